//! Analytic write-amplification references for garbage collection, to
//! compare measured figures against.
//!
//! - [`greedy_waf`]: greedy victim selection under uniform random writes
//!   in the limit of many blocks per erase unit,
//!   `A = a / (a + W0(−a·e^−a))` with `a = 1 + OP` (physical / logical).
//! - [`two_pool_oracle`]: data of two temperatures kept apart by an
//!   oracle, each pool collected greedily, spare space split between the
//!   pools optimally.

/// Lambert W, principal branch, for `x` in `[−1/e, 0]`.
///
/// Thread safety: a pure function.
pub fn lambert_w0(x: f64) -> f64 {
    let e = std::f64::consts::E;
    if x <= -1.0 / e {
        return -1.0;
    }
    // Series near the branch point, then Halley's iteration.
    let p = (2.0 * (e * x + 1.0)).sqrt();
    let mut w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p;
    for _ in 0..60 {
        let ew = w.exp();
        let f = w * ew - x;
        let d = ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0);
        let next = w - f / d;
        if (next - w).abs() < 1e-15 {
            return next;
        }
        w = next;
    }
    w
}

/// Greedy's write amplification under uniform random writes at
/// over-provisioning `op` (spare / logical).
///
/// Thread safety: a pure function.
pub fn greedy_waf(op: f64) -> f64 {
    let a = 1.0 + op;
    a / (a + lambert_w0(-a * (-a).exp()))
}

/// The smallest write amplification of two pools — a fraction `writes` of
/// the writes going uniformly to a fraction `data` of the blocks, the rest
/// uniformly to the others — each collected greedily, over every split of
/// the spare `op`; returns the write amplification and the hot pool's
/// share of the spare.
///
/// Thread safety: a pure function.
pub fn two_pool_oracle(writes: f64, data: f64, op: f64) -> (f64, f64) {
    let mut best = (f64::MAX, 0.0);
    let steps = 20_000;
    for i in 1..steps {
        let s = op * i as f64 / steps as f64;
        let waf =
            writes * greedy_waf(s / data) + (1.0 - writes) * greedy_waf((op - s) / (1.0 - data));
        if waf < best.0 {
            best = (waf, s / op);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_inverts_x_e_to_the_x() {
        for x in [-0.3678, -0.3, -0.1, -0.01, 0.0] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-12, "{x}: {w}");
            assert!(w >= -1.0);
        }
        assert_eq!(lambert_w0(-1.0), -1.0);
    }

    #[test]
    fn greedy_limits_match_the_published_figures() {
        for (op, want) in [(0.07, 7.82), (0.10, 5.68), (0.20, 3.19), (0.28, 2.48)] {
            let got = greedy_waf(op);
            assert!((got - want).abs() < 0.01, "OP {op}: {got} vs {want}");
        }
    }

    #[test]
    fn the_oracle_gives_the_hot_pool_more_than_its_share() {
        let (waf, share) = two_pool_oracle(0.9, 0.1, 0.2);
        assert!((waf - 1.646).abs() < 0.01, "{waf}");
        assert!(share > 0.4 && share < 0.55, "{share}");
        let (uniform, _) = two_pool_oracle(0.5, 0.5, 0.2);
        assert!((uniform - greedy_waf(0.2)).abs() < 0.01, "{uniform}");
    }
}
