//! The time base of the timing model: a real clock or a virtual one.
//!
//! Every timed command gets a completion time from the model
//! ([`crate::timing`]); its completion entry is posted when the
//! controller's clock reaches that time.
//!
//! * [`ClockMode::Real`]: wall-clock time (`Instant`). A completion becomes
//!   visible once real time has passed its due time; the host spins in its
//!   poll loop meanwhile. For overhead measurements and real peers.
//! * [`ClockMode::Virtual`]: simulated time that only moves forward when the
//!   host waits. When the host polls a completion queue that has commands
//!   outstanding but none due, the clock jumps to the next moment at which
//!   the model completes a command, on any queue, and never past it: the
//!   earliest pending completion across all queues. Polling is the host's
//!   statement that it is waiting. Host software takes no virtual time, so
//!   a 20-minute experiment runs as fast as the emulator can process its
//!   commands, and the same commands in the same order give the same
//!   figures on any machine, however busy.
//!
//! # Several host threads on the virtual clock
//!
//! The in-process host runs one thread per queue. Each poll that finds
//! nothing due on its own queue while that queue has commands outstanding
//! moves the clock to the earliest completion still pending anywhere, and
//! no further; a completion due for another queue is kept for that queue's
//! next poll, and while it waits there untaken the clock does not move
//! (its thread must see it at its due time, and may submit more at that
//! time), so no completion is skipped and none arrives early. Commands are
//! timestamped with the clock when their doorbell is rung.
//!
//! The figures are exact for one host thread, polling several queues
//! round robin if it likes, and for threads that poll promptly. A thread
//! busy elsewhere for more than 2 ms of real time with a completion
//! waiting stops holding the clock (so one stalled thread, for instance one
//! waiting for a lock another thread holds while polling, cannot stall the
//! others); it then submits later in virtual time and finds its
//! completions later than they were due.
//!
//! Deterministic: one host thread, the same seed and the same commands
//! give the same completion times, to the nanosecond.
//!
//! # Dilation
//!
//! A clock may be *dilated* by a factor F ≥ 1 ([`Dilation`]): the timing
//! model then runs on model time, the clock's time divided by F, so every
//! modelled duration takes F times as long on the clock (a 10 µs write
//! completes 40 µs after its doorbell at F = 4). A host F times slower
//! than the machine the model stands for (a guest under software
//! emulation) then sees the device as that machine would, as DieCast does
//! for whole distributed systems; figures measured on the clock are
//! divided by F to give the modelled drive's ([`Clock::to_model`]).
//!
//! # Late completions
//!
//! On the real clock nothing forces the host to collect a completion when
//! it falls due: a completion is posted at the first poll of its queue at
//! or after its due time. When the host polls less often than completions
//! fall due (it is busy, descheduled, or sleeps between looks), or the
//! emulator's own work falls behind, completions reach the host late and
//! every figure measured from them is inflated. [`Lateness`] counts how
//! many were late and by how much, in model time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A time dilation factor F ≥ 1, kept in millionths so that it compares
/// and hashes exactly (`dilation=2.5` is 2,500,000).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dilation(u64);

impl Dilation {
    /// No dilation: model time is the clock's.
    pub const NONE: Dilation = Dilation(1_000_000);

    /// The largest factor accepted: beyond it a modelled microsecond lasts
    /// seconds, which no experiment needs.
    pub const MAX: f64 = 10_000.0;

    /// `factor` as a dilation: finite, at least 1, at most [`Dilation::MAX`]
    /// (to a millionth).
    pub fn new(factor: f64) -> Result<Dilation, String> {
        if !(factor.is_finite() && (1.0..=Self::MAX).contains(&factor)) {
            return Err(format!(
                "dilation {factor} is not valid (a factor from 1 to {})",
                Self::MAX
            ));
        }
        Ok(Dilation((factor * 1e6).round() as u64))
    }

    /// The factor.
    pub fn factor(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// True for a factor of exactly 1.
    pub fn is_none(self) -> bool {
        self == Self::NONE
    }

    /// Clock nanoseconds as model nanoseconds (rounded down).
    #[inline]
    pub fn to_model(self, clock_ns: u64) -> u64 {
        if self.is_none() {
            return clock_ns;
        }
        (clock_ns as u128 * 1_000_000 / self.0 as u128) as u64
    }

    /// Model nanoseconds as clock nanoseconds (rounded up, so that a model
    /// time reached on the clock is never before it).
    #[inline]
    pub fn to_clock(self, model_ns: u64) -> u64 {
        if self.is_none() {
            return model_ns;
        }
        (model_ns as u128 * self.0 as u128).div_ceil(1_000_000).min(u64::MAX as u128) as u64
    }
}

impl Default for Dilation {
    fn default() -> Self {
        Dilation::NONE
    }
}

impl std::fmt::Display for Dilation {
    /// The factor, as short as it is exact (`4`, `2.5`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.factor())
    }
}

impl std::str::FromStr for Dilation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let f: f64 = s
            .parse()
            .map_err(|_| format!("dilation {s:?} is not a number (a factor from 1 up)"))?;
        Dilation::new(f)
    }
}

/// Completions posted later than this after their due time (model time)
/// count as late: beyond the few microseconds one turn of a polling loop
/// takes, and a fraction of the shortest modelled latency (a ZN540 4 KiB
/// write, 11 µs), so a late one visibly inflates what the host measures.
pub const LATE_AFTER_NS: u64 = 5_000;

/// Buckets of the lateness histogram: bucket `i` holds delays below
/// `2^i` ns (bucket 0: on time), the last everything longer.
const LATE_BUCKETS: usize = 40;

/// Counts of completions by how late they were posted (model time after
/// their due time). Updated with atomics only, so the poll path takes no
/// lock and allocates nothing for it, and readable from any thread while
/// the device runs.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug)]
pub struct Lateness {
    delivered: AtomicU64,
    late: AtomicU64,
    max_ns: AtomicU64,
    sum_ns: AtomicU64,
    buckets: [AtomicU64; LATE_BUCKETS],
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            delivered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Lateness {
    /// Counts one completion posted `late_ns` after its due time.
    #[inline]
    pub fn record(&self, late_ns: u64) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        if late_ns == 0 {
            self.buckets[0].fetch_add(1, Ordering::Relaxed);
            return;
        }
        let b = (64 - late_ns.leading_zeros() as usize).min(LATE_BUCKETS - 1);
        self.buckets[b].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(late_ns, Ordering::Relaxed);
        self.max_ns.fetch_max(late_ns, Ordering::Relaxed);
        if late_ns > LATE_AFTER_NS {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> LatenessStats {
        LatenessStats {
            delivered: self.delivered.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            max_ns: self.max_ns.load(Ordering::Relaxed),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
        }
    }
}

/// A reading of [`Lateness`]: completions posted, how many late (more than
/// [`LATE_AFTER_NS`] after their due time), and how late, in model time.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatenessStats {
    /// Completions posted by the timing model.
    pub delivered: u64,
    /// Of those, posted more than [`LATE_AFTER_NS`] after their due time.
    pub late: u64,
    /// Longest delay past a due time (ns).
    pub max_ns: u64,
    /// Sum of the delays (ns).
    pub sum_ns: u64,
    /// Histogram: `buckets[i]` counts delays in `[2^(i-1), 2^i)` ns
    /// (`buckets[0]`: none).
    pub buckets: [u64; LATE_BUCKETS],
}

impl Default for LatenessStats {
    fn default() -> Self {
        LatenessStats { delivered: 0, late: 0, max_ns: 0, sum_ns: 0, buckets: [0; LATE_BUCKETS] }
    }
}

impl LatenessStats {
    /// What happened between `earlier` and this reading. The interval's
    /// maximum is bounded by its histogram (the upper edge of its highest
    /// bucket, within a factor of 2) and by this reading's maximum.
    pub fn since(&self, earlier: &LatenessStats) -> LatenessStats {
        let buckets: [u64; LATE_BUCKETS] =
            std::array::from_fn(|i| self.buckets[i].saturating_sub(earlier.buckets[i]));
        let top = buckets.iter().rposition(|&n| n > 0).unwrap_or(0);
        let edge = if top == 0 { 0 } else { 1u64 << top.min(63) };
        LatenessStats {
            delivered: self.delivered.saturating_sub(earlier.delivered),
            late: self.late.saturating_sub(earlier.late),
            max_ns: if top + 1 == LATE_BUCKETS { self.max_ns } else { edge.min(self.max_ns) },
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            buckets,
        }
    }

    /// Adds the counts of `other` (an interval's, from
    /// [`LatenessStats::since`]) to these.
    pub fn add(&mut self, other: &LatenessStats) {
        self.delivered += other.delivered;
        self.late += other.late;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    /// The delay (ns) at or below which a fraction `q` of the completions
    /// were posted: the upper edge of the histogram bucket holding that
    /// quantile (within a factor of 2), 0 when they were on time.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.delivered == 0 {
            return 0;
        }
        let want = ((self.delivered as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return if i == 0 { 0 } else { (1u64 << i).min(self.max_ns.max(1)) };
            }
        }
        self.max_ns
    }

    /// Mean delay of all completions (ns).
    pub fn mean_ns(&self) -> f64 {
        if self.delivered == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.delivered as f64
        }
    }

    /// One line: `12 of 3400 completions late (> 5 µs): p99 64 µs, max 180 µs`.
    pub fn describe(&self) -> String {
        if self.late == 0 {
            return format!(
                "{} completions, none late (> {} µs; max {:.1} µs)",
                self.delivered,
                LATE_AFTER_NS / 1000,
                self.max_ns as f64 / 1e3
            );
        }
        format!(
            "{} of {} completions late (> {} µs past due): p99 {:.1} µs, max {:.1} µs, mean {:.2} µs",
            self.late,
            self.delivered,
            LATE_AFTER_NS / 1000,
            self.quantile_ns(0.99) as f64 / 1e3,
            self.max_ns as f64 / 1e3,
            self.mean_ns() / 1e3
        )
    }
}

/// Which time a [`Clock`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClockMode {
    /// Wall-clock time.
    Real,
    /// Simulated time, advanced by the host's polls (the default of a
    /// timed emulator).
    #[default]
    Virtual,
}

impl ClockMode {
    /// `"real"` or `"virtual"`.
    pub fn name(self) -> &'static str {
        match self {
            ClockMode::Real => "real",
            ClockMode::Virtual => "virtual",
        }
    }
}

impl std::str::FromStr for ClockMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "real" => Ok(ClockMode::Real),
            "virtual" => Ok(ClockMode::Virtual),
            _ => Err(format!("clock {s:?} is not valid (valid values: virtual, real)")),
        }
    }
}

/// A clock in nanoseconds since an arbitrary origin (its creation).
///
/// Thread safety: `Send + Sync`; reading it takes no lock.
#[derive(Debug)]
pub struct Clock {
    mode: ClockMode,
    origin: Instant,
    virtual_ns: AtomicU64,
    dilation: Dilation,
}

impl Clock {
    /// A clock of `mode`, at 0, not dilated.
    pub fn new(mode: ClockMode) -> Self {
        Clock::dilated(mode, Dilation::NONE)
    }

    /// A clock of `mode`, at 0, whose model time runs `dilation` times
    /// slower than it (see the module documentation).
    pub fn dilated(mode: ClockMode, dilation: Dilation) -> Self {
        Clock { mode, origin: Instant::now(), virtual_ns: AtomicU64::new(0), dilation }
    }

    /// The dilation factor (1: none).
    pub fn dilation(&self) -> Dilation {
        self.dilation
    }

    /// Model time now: [`Clock::now_ns`] divided by the dilation factor.
    #[inline]
    pub fn model_now_ns(&self) -> u64 {
        self.dilation.to_model(self.now_ns())
    }

    /// A span of clock time as model time (divided by the dilation factor).
    #[inline]
    pub fn to_model(&self, clock_ns: u64) -> u64 {
        self.dilation.to_model(clock_ns)
    }

    /// Which time this clock keeps.
    pub fn mode(&self) -> ClockMode {
        self.mode
    }

    /// `"real"` or `"virtual"`.
    pub fn name(&self) -> &'static str {
        self.mode.name()
    }

    /// True for [`ClockMode::Virtual`].
    pub fn is_virtual(&self) -> bool {
        self.mode == ClockMode::Virtual
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self.mode {
            ClockMode::Real => self.origin.elapsed().as_nanos() as u64,
            ClockMode::Virtual => self.virtual_ns.load(Ordering::Acquire),
        }
    }

    /// Moves a virtual clock forward to `t` (never backward); a real clock
    /// ignores it. The controller does this itself when the host waits;
    /// a host may do it to model time it spends elsewhere (think time,
    /// rate limits): completions that fall due meanwhile are posted at
    /// the host's next poll.
    pub fn advance_to(&self, t: u64) {
        if self.mode == ClockMode::Virtual {
            self.virtual_ns.fetch_max(t, Ordering::AcqRel);
        }
    }

    /// Lets `ns` nanoseconds pass: a virtual clock moves forward (see
    /// [`Clock::advance_to`]), on a real clock the calling thread waits.
    pub fn wait_ns(&self, ns: u64) {
        match self.mode {
            ClockMode::Virtual => self.advance_to(self.now_ns().saturating_add(ns)),
            ClockMode::Real => {
                let until = self.now_ns().saturating_add(ns);
                if ns > 200_000 {
                    std::thread::sleep(Duration::from_nanos(ns - 100_000));
                }
                while self.now_ns() < until {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

impl Default for Clock {
    /// A real clock.
    fn default() -> Self {
        Clock::new(ClockMode::Real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_moves_only_forward_and_only_when_told() {
        let c = Clock::new(ClockMode::Virtual);
        assert_eq!(c.now_ns(), 0);
        c.advance_to(500);
        c.advance_to(100);
        assert_eq!(c.now_ns(), 500);
        c.wait_ns(20);
        assert_eq!(c.now_ns(), 520);
        assert_eq!((c.name(), c.is_virtual()), ("virtual", true));
    }

    #[test]
    fn real_time_passes() {
        let c = Clock::new(ClockMode::Real);
        let a = c.now_ns();
        c.wait_ns(50_000);
        assert!(c.now_ns() >= a + 50_000);
        c.advance_to(u64::MAX);
        assert!(c.now_ns() < u64::MAX / 2);
        assert_eq!("real".parse::<ClockMode>(), Ok(ClockMode::Real));
        assert!("fast".parse::<ClockMode>().unwrap_err().contains("virtual, real"));
    }

    #[test]
    fn dilation_converts_both_ways() {
        let d: Dilation = "4".parse().unwrap();
        assert_eq!((d.to_model(40_000), d.to_clock(10_000)), (10_000, 40_000));
        let d = Dilation::new(2.5).unwrap();
        assert_eq!(d.to_string(), "2.5");
        assert_eq!(d.to_clock(3), 8);
        assert!(d.to_model(d.to_clock(12_345)) >= 12_345);
        assert!(Dilation::new(0.5).is_err() && "x".parse::<Dilation>().is_err());
        assert_eq!(Dilation::NONE.to_model(7), 7);
        let c = Clock::dilated(ClockMode::Virtual, Dilation::new(4.0).unwrap());
        c.advance_to(4_000);
        assert_eq!((c.now_ns(), c.model_now_ns()), (4_000, 1_000));
    }

    #[test]
    fn lateness_counts_and_quantiles() {
        let l = Lateness::default();
        for _ in 0..98 {
            l.record(0);
        }
        l.record(3_000);
        l.record(100_000);
        let s = l.snapshot();
        assert_eq!((s.delivered, s.late, s.max_ns), (100, 1, 100_000));
        assert_eq!(s.quantile_ns(0.5), 0);
        assert!((2_048..=4_096).contains(&s.quantile_ns(0.99)));
        assert_eq!(s.quantile_ns(1.0), 100_000);
        assert!(s.describe().starts_with("1 of 100 completions late"));
        let later = {
            l.record(0);
            l.snapshot()
        };
        assert_eq!(later.since(&s).delivered, 1);
        assert_eq!(later.since(&s).late, 0);
    }
}
