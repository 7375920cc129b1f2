//! A cheap cycle clock for attributing time inside tight loops, and the
//! calling thread's CPU time.
//!
//! Reading `Instant` costs tens of nanoseconds, as much as the work being
//! split; the time-stamp counter costs a few. Ticks are converted to
//! nanoseconds with a rate calibrated against `Instant` over each run.

use std::time::Instant;

/// Reads the cycle counter (the time-stamp counter on x86-64; elsewhere a
/// monotonic clock in nanoseconds).
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86-64; it only reads a counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// CPU time the calling thread has used, in nanoseconds (0 where unknown).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Measures how many ticks pass per nanosecond, over a span of wall time.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    start_ticks: u64,
    start: Instant,
}

impl Calibration {
    /// Starts a calibration span.
    pub fn start() -> Self {
        Calibration { start_ticks: ticks(), start: Instant::now() }
    }

    /// Ticks per nanosecond since [`Calibration::start`].
    pub fn ticks_per_ns(&self) -> f64 {
        let t = ticks().wrapping_sub(self.start_ticks) as f64;
        let ns = self.start.elapsed().as_nanos().max(1) as f64;
        t / ns
    }
}
