//! Garbage-collection victim selection: which erase unit (a zone of the
//! host FTL, a segment of a device FTL) to reclaim next.
//!
//! A policy looks at each candidate's valid blocks and capacity, and for
//! the age-aware policies at when its data was born and written, in the
//! caller's logical time (any clock that advances with writes: the host
//! FTL counts user blocks written).

/// How garbage collection chooses the unit to reclaim.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VictimPolicy {
    /// The unit with the fewest valid blocks.
    Greedy,
    /// The unit with the best `(1 − u) · age / (1 + u)` (u = valid
    /// fraction, age = logical time since its data was born): the
    /// log-structured file system's cost-benefit policy. Lets cold units
    /// be reclaimed at a higher utilisation than hot ones.
    CostBenefit,
    /// Lifetime: estimates how fast each unit's valid blocks die from its
    /// utilisation and the time since they were written (exponential
    /// decay), and picks the unit furthest past the utilisation at which
    /// collecting it minimises write amplification (see
    /// [`lifetime_score`]). Greedy when every block dies at the same
    /// rate; hot units are collected emptier than cold ones, as the
    /// optimal split of spare space between them requires. The host FTL's
    /// default.
    #[default]
    Lifetime,
    /// Cost-age-times: the unit with the lowest
    /// `u / ((1 − u) · age) · (1 + resets)`, which adds wear (erase
    /// count) to the age-aware cost.
    CostAgeTime,
}

/// A policy name that is not one of [`VictimPolicy::ALL`].
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown victim policy {0:?} (greedy, cost-benefit, lifetime, cost-age-time)")]
pub struct UnknownPolicy(pub String);

impl VictimPolicy {
    /// Every policy.
    pub const ALL: [VictimPolicy; 4] = [
        VictimPolicy::Greedy,
        VictimPolicy::CostBenefit,
        VictimPolicy::Lifetime,
        VictimPolicy::CostAgeTime,
    ];

    /// A short name (`greedy`, `cost-benefit`, `lifetime`, `cost-age-time`).
    pub fn name(self) -> &'static str {
        match self {
            VictimPolicy::Greedy => "greedy",
            VictimPolicy::CostBenefit => "cost-benefit",
            VictimPolicy::Lifetime => "lifetime",
            VictimPolicy::CostAgeTime => "cost-age-time",
        }
    }
}

impl std::str::FromStr for VictimPolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, UnknownPolicy> {
        VictimPolicy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownPolicy(s.into()))
    }
}

impl std::fmt::Display for VictimPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a policy knows of one reclaimable unit.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The caller's name for the unit.
    pub id: u32,
    /// Valid blocks in it.
    pub valid: u32,
    /// Blocks it holds when full.
    pub capacity: u32,
    /// Mean birth time of its blocks (when their data was first written).
    pub birth: u64,
    /// Mean time its blocks were written into it.
    pub written_at: u64,
    /// Times it was reclaimed before.
    pub resets: u32,
}

/// The candidate `policy` reclaims first at logical time `now`, among
/// those holding at least one invalid block; `None` when there is none.
/// Greedy breaks ties by the older birth, the others by the earlier
/// candidate.
pub fn select(
    policy: VictimPolicy,
    now: u64,
    candidates: impl Iterator<Item = Candidate>,
) -> Option<u32> {
    let reclaimable = candidates.filter(|c| c.valid < c.capacity);
    let age = |c: &Candidate| (now.saturating_sub(c.birth) + 1) as f64;
    let best = match policy {
        VictimPolicy::Greedy => reclaimable.min_by_key(|c| (c.valid, c.birth)),
        VictimPolicy::CostBenefit => reclaimable
            .map(|c| {
                let u = c.valid as f64 / c.capacity as f64;
                (c, (1.0 - u) * age(&c) / (1.0 + u))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c),
        VictimPolicy::Lifetime => reclaimable
            .map(|c| {
                let u = (c.valid as f64 / c.capacity as f64).max(1e-6);
                let t = (now.saturating_sub(c.written_at) + 1) as f64;
                (c, lifetime_score(u, t))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c),
        VictimPolicy::CostAgeTime => reclaimable
            .map(|c| {
                let u = c.valid as f64 / c.capacity as f64;
                (c, u / ((1.0 - u) * age(&c)) * (1.0 + c.resets as f64))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c),
    };
    best.map(|c| c.id)
}

/// The lifetime policy's score of a unit at utilisation `u` whose blocks
/// were written `t` ago: `h(u) / λ` with `λ = −ln(u) / t` the estimated
/// rate at which its valid blocks die (exponential decay) and
/// `h(u) = (1 − u)/u + ln u`.
///
/// For pools whose blocks die at rates `λ_p`, the write amplification is
/// smallest (for a given spare space) when each pool is collected at the
/// utilisation where `λ_p / h(u_p)` is the same for all pools (a Lagrange
/// condition of the fluid model: pool `p` costs `W_p / (1 − u_p)` writes and
/// `D_p · ln(1/u_p) / (1 − u_p)` space). A unit's `h(u)/λ` grows as it
/// empties; the unit with the largest value is the furthest past its
/// optimal collection point. With one pool (uniform writes) all `λ` are
/// equal and the choice is greedy's.
pub fn lifetime_score(u: f64, t: f64) -> f64 {
    let u = u.clamp(1e-9, 1.0 - 1e-9);
    let h = (1.0 - u) / u + u.ln();
    h * t / -u.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(id: u32, valid: u32, birth: u64) -> Candidate {
        Candidate { id, valid, capacity: 100, birth, written_at: birth, resets: 0 }
    }

    #[test]
    fn policies_parse_and_print() {
        for p in VictimPolicy::ALL {
            assert_eq!(p.name().parse::<VictimPolicy>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        let e = "lru".parse::<VictimPolicy>().unwrap_err().to_string();
        assert!(e.contains("\"lru\"") && e.contains("cost-benefit"), "{e}");
    }

    #[test]
    fn greedy_takes_the_emptiest_and_skips_full_units() {
        let c = [unit(0, 100, 0), unit(1, 40, 5), unit(2, 40, 3), unit(3, 70, 0)];
        assert_eq!(select(VictimPolicy::Greedy, 10, c.into_iter()), Some(2), "older birth wins");
        assert_eq!(select(VictimPolicy::Greedy, 10, [unit(0, 100, 0)].into_iter()), None);
        for p in VictimPolicy::ALL {
            assert_eq!(select(p, 10, std::iter::empty()), None);
        }
    }

    #[test]
    fn age_aware_policies_prefer_old_cold_units() {
        // Same utilisation: the older unit is the better victim.
        let c = [unit(0, 50, 900), unit(1, 50, 100)];
        assert_eq!(select(VictimPolicy::CostBenefit, 1000, c.into_iter()), Some(1));
        assert_eq!(select(VictimPolicy::Lifetime, 1000, c.into_iter()), Some(1));
        assert_eq!(select(VictimPolicy::CostAgeTime, 1000, c.into_iter()), Some(1));
        // Wear counts against a unit under cost-age-times.
        let mut worn = unit(1, 50, 100);
        worn.resets = 50;
        let c = [unit(0, 50, 900), worn];
        assert_eq!(select(VictimPolicy::CostAgeTime, 1000, c.into_iter()), Some(0));
    }

    #[test]
    fn lifetime_scores_follow_the_optimality_condition() {
        // Same decay rate (uniform writes): the emptier unit wins, as in
        // greedy.
        let lambda = 0.5f64;
        let at = |u: f64| lifetime_score(u, -u.ln() / lambda);
        assert!(at(0.3) > at(0.5) && at(0.5) > at(0.9));
        // The two-pool optimum at 90/10, OP 20 % collects hot units (rate
        // 9) at u = 0.213 and cold units (rate 1/9) at u = 0.801: there
        // the scores are equal.
        let hot = lifetime_score(0.2127, -(0.2127f64).ln() / 9.0);
        let cold = lifetime_score(0.8012, -(0.8012f64).ln() / (1.0 / 9.0));
        assert!((hot / cold - 1.0).abs() < 0.02, "{hot} vs {cold}");
        // Extremes stay finite.
        assert!(lifetime_score(0.0, 1.0).is_finite() && lifetime_score(1.0, 1.0).is_finite());
    }
}
