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

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
}

impl Clock {
    /// A clock of `mode`, at 0.
    pub fn new(mode: ClockMode) -> Self {
        Clock { mode, origin: Instant::now(), virtual_ns: AtomicU64::new(0) }
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
}
