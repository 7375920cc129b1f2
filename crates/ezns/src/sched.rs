//! The zoned I/O scheduler: per-zone read congestion control and
//! per-device write admission control. Both live on the I/O path, so both
//! are atomics only: a few loads, compare-exchanges and stores per command,
//! shared by every queue of every tenant without a lock.
//!
//! * **Read congestion control** (per logical zone, delay-based): a window
//!   of reads in flight. A read that took longer than the target (device
//!   time from submission to completion) halves the window, at most once
//!   per target interval; every read within the target grows it by one
//!   over the window (one per window of reads). Reads past the window wait
//!   in their queue. A zone whose dies are busy (programs, erases, other
//!   tenants' reads) thus gets fewer reads in flight instead of a queue on
//!   the dies, which is what stretches the tail.
//! * **Write admission control** (per device): a window of write bytes in
//!   flight on the whole device, shrunk by a quarter when the average
//!   write latency is above its target and grown by a sixteenth otherwise
//!   (once per target interval either way); each logical zone with writes
//!   in flight may have an equal share of it. Writes past their share wait
//!   in their queue: a busy writer cannot fill the shared write buffer
//!   alone. The target is the device's own uncongested write latency (the
//!   *baseline*: the fastest full stripe-unit write of the last two
//!   baseline epochs) times a factor, so it fits whatever device is below
//!   (a fixed target can also be configured).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

/// Fixed-point scale of windows (1/1000).
const SCALE: u64 = 1000;

/// A logical zone's read window.
///
/// Thread safety: `Sync` (atomics).
#[derive(Debug)]
pub struct ReadCc {
    /// Window in thousandths of a read.
    window: AtomicU64,
    /// Reads in flight.
    inflight: AtomicU32,
    /// Device time of the last decrease.
    last_cut: AtomicU64,
}

impl ReadCc {
    /// A window of `start` reads.
    pub fn new(start: u32) -> ReadCc {
        ReadCc {
            window: AtomicU64::new(start as u64 * SCALE),
            inflight: AtomicU32::new(0),
            last_cut: AtomicU64::new(0),
        }
    }

    /// The window, in reads.
    pub fn window(&self) -> f64 {
        self.window.load(Relaxed) as f64 / SCALE as f64
    }

    /// Reads in flight.
    pub fn inflight(&self) -> u32 {
        self.inflight.load(Relaxed)
    }

    /// Takes a place for one read; false when the window is full.
    pub fn admit(&self) -> bool {
        let w = (self.window.load(Relaxed) / SCALE).max(1) as u32;
        self.inflight.fetch_update(AcqRel, Relaxed, |n| (n < w).then_some(n + 1)).is_ok()
    }

    /// A read admitted without the window (congestion control off).
    pub fn enter(&self) {
        self.inflight.fetch_add(1, AcqRel);
    }

    /// A read completed after `latency_ns` at device time `now`; `target_ns`
    /// is the congestion threshold, `max` the largest window.
    pub fn complete(&self, latency_ns: u64, now: u64, target_ns: u64, max: u32) {
        self.inflight.fetch_sub(1, AcqRel);
        let max = max as u64 * SCALE;
        if latency_ns > target_ns {
            let last = self.last_cut.load(Relaxed);
            if now.saturating_sub(last) >= target_ns
                && self.last_cut.compare_exchange(last, now, AcqRel, Relaxed).is_ok()
            {
                let _ = self.window.fetch_update(AcqRel, Relaxed, |w| Some((w / 2).max(SCALE)));
            }
        } else {
            let _ = self.window.fetch_update(AcqRel, Relaxed, |w| {
                Some((w + SCALE * SCALE / w.max(SCALE)).min(max))
            });
        }
    }

    /// A read admitted with [`ReadCc::admit`] or [`ReadCc::enter`] that
    /// never reached the device.
    pub fn cancel(&self) {
        self.inflight.fetch_sub(1, AcqRel);
    }
}

/// Device time over which the fastest write is remembered as the
/// baseline: long enough that a congested phase of a few seconds does not
/// teach congestion as the norm, short enough to follow a device that
/// really got slower (the baseline is the minimum over this epoch and the
/// one before).
pub const BASELINE_EPOCH_NS: u64 = 10_000_000_000;

/// What the average write latency is held to.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WriteTarget {
    /// A fixed latency in ns.
    Fixed(u64),
    /// The measured baseline (uncongested write latency) times this.
    Baseline(f64),
}

/// The device's write window.
///
/// Thread safety: `Sync` (atomics).
#[derive(Debug)]
pub struct WriteAdmission {
    window: AtomicU64,
    inflight: AtomicU64,
    /// Logical zones with writes in flight.
    zones: AtomicU32,
    /// Average write latency (exponentially weighted), ns.
    avg_ns: AtomicU64,
    last_adjust: AtomicU64,
    /// Fastest sampled write of the current and of the previous epoch
    /// (`u64::MAX`: none yet), and when the current one began.
    base_cur: AtomicU64,
    base_prev: AtomicU64,
    epoch_start: AtomicU64,
    target: WriteTarget,
    min: u64,
    max: u64,
}

impl WriteAdmission {
    /// A window between `min` and `max` bytes, starting at `max`, held to
    /// `target`.
    pub fn new(min: u64, max: u64, target: WriteTarget) -> WriteAdmission {
        WriteAdmission {
            window: AtomicU64::new(max),
            inflight: AtomicU64::new(0),
            zones: AtomicU32::new(0),
            avg_ns: AtomicU64::new(0),
            last_adjust: AtomicU64::new(0),
            base_cur: AtomicU64::new(u64::MAX),
            base_prev: AtomicU64::new(u64::MAX),
            epoch_start: AtomicU64::new(0),
            target,
            min,
            max,
        }
    }

    /// The uncongested write latency learned so far (ns), 0 before any
    /// sampled write.
    pub fn baseline_ns(&self) -> u64 {
        match self.base_cur.load(Relaxed).min(self.base_prev.load(Relaxed)) {
            u64::MAX => 0,
            b => b,
        }
    }

    /// The latency target now (ns); 0 while a baseline target has no
    /// baseline yet (nothing to hold the window to).
    pub fn target_ns(&self) -> u64 {
        match self.target {
            WriteTarget::Fixed(ns) => ns,
            WriteTarget::Baseline(factor) => (self.baseline_ns() as f64 * factor) as u64,
        }
    }

    /// The window in bytes.
    pub fn window(&self) -> u64 {
        self.window.load(Relaxed)
    }

    /// Write bytes in flight.
    pub fn inflight(&self) -> u64 {
        self.inflight.load(Relaxed)
    }

    /// The average write latency in ns.
    pub fn avg_latency_ns(&self) -> u64 {
        self.avg_ns.load(Relaxed)
    }

    /// Takes room for a write of `bytes` to a zone that has `zone_bytes`
    /// in flight already; false when the device window or the zone's
    /// share of it is full. A write to a zone with nothing in flight is
    /// always let in: whichever queue completes writes first would
    /// otherwise take the room they free again at once, and zones of
    /// queues polled later would never get any (a starved zone holds its
    /// whole tenant's writes behind it). So the window bounds what is in
    /// flight beyond one write per writing zone.
    pub fn admit(&self, bytes: u64, zone_bytes: u64) -> bool {
        if zone_bytes == 0 {
            self.enter(bytes, 0);
            return true;
        }
        let window = self.window.load(Relaxed);
        let zones = self.zones.load(Relaxed) as u64;
        let share = (window / zones.max(1)).max(bytes);
        if zone_bytes + bytes > share {
            return false;
        }
        self.inflight
            .fetch_update(AcqRel, Relaxed, |n| (n + bytes <= window).then_some(n + bytes))
            .is_ok()
    }

    /// A write admitted without the window (admission control off).
    pub fn enter(&self, bytes: u64, zone_bytes: u64) {
        self.inflight.fetch_add(bytes, AcqRel);
        if zone_bytes == 0 {
            self.zones.fetch_add(1, AcqRel);
        }
    }

    /// Gives back the room of an admitted write that never reached the
    /// device (`zone_left`: its zone's bytes in flight without it).
    pub fn cancel(&self, bytes: u64, zone_left: u64) {
        self.inflight.fetch_sub(bytes, AcqRel);
        if zone_left == 0 {
            self.zones.fetch_sub(1, AcqRel);
        }
    }

    /// A write of `bytes` completed after `latency_ns` at device time
    /// `now`, leaving `zone_left` bytes of its zone in flight. `sample`:
    /// it may teach the baseline (a full stripe unit: smaller writes are
    /// faster and would set the target too low for full ones). Adjusts the
    /// window towards the target when `adjust`.
    pub fn complete(
        &self,
        bytes: u64,
        zone_left: u64,
        latency_ns: u64,
        now: u64,
        sample: bool,
        adjust: bool,
    ) {
        self.inflight.fetch_sub(bytes, AcqRel);
        if zone_left == 0 {
            self.zones.fetch_sub(1, AcqRel);
        }
        let _ = self.avg_ns.fetch_update(AcqRel, Relaxed, |a| {
            Some(if a == 0 { latency_ns } else { (a * 7 + latency_ns) / 8 })
        });
        if sample && latency_ns > 0 {
            self.base_cur.fetch_min(latency_ns, AcqRel);
        }
        if !adjust {
            return;
        }
        let target_ns = self.target_ns();
        if target_ns == 0 {
            return;
        }
        let last = self.last_adjust.load(Relaxed);
        if now.saturating_sub(last) < target_ns
            || self.last_adjust.compare_exchange(last, now, AcqRel, Relaxed).is_err()
        {
            return;
        }
        // Only the adjusting thread gets here (once per interval), so the
        // epoch turns over without a race worth a lock.
        let epoch = self.epoch_start.load(Relaxed);
        if now.saturating_sub(epoch) >= BASELINE_EPOCH_NS {
            self.epoch_start.store(now, Relaxed);
            self.base_prev.store(self.base_cur.swap(u64::MAX, AcqRel), Relaxed);
        }
        let avg = self.avg_ns.load(Relaxed);
        let (min, max) = (self.min, self.max);
        let _ = self.window.fetch_update(AcqRel, Relaxed, |w| {
            Some(if avg > target_ns { (w - w / 4).max(min) } else { (w + w / 16).min(max) })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_window_halves_on_slow_reads_and_grows_back() {
        let cc = ReadCc::new(8);
        for _ in 0..8 {
            assert!(cc.admit());
        }
        assert!(!cc.admit());
        cc.complete(1_000_000, 10_000_000, 500_000, 64);
        assert_eq!(cc.window(), 4.0);
        // A second slow read within the interval does not cut again.
        cc.complete(1_000_000, 10_100_000, 500_000, 64);
        assert_eq!(cc.window(), 4.0);
        assert_eq!(cc.inflight(), 6);
        assert!(!cc.admit());
        for _ in 0..6 {
            cc.complete(100_000, 11_000_000, 500_000, 64);
        }
        assert!(cc.window() > 5.0 && cc.window() < 6.0, "{}", cc.window());
        let floor = ReadCc::new(1);
        floor.enter();
        floor.complete(u64::MAX / 2, 1 << 40, 1, 64);
        assert_eq!(floor.window(), 1.0);
    }

    #[test]
    fn write_window_shares_and_adapts() {
        let wa = WriteAdmission::new(1 << 20, 8 << 20, WriteTarget::Fixed(1_000_000));
        // Two zones: each may have half the window.
        assert!(wa.admit(1 << 20, 0));
        assert!(wa.admit(1 << 20, 0));
        assert!(wa.admit(2 << 20, 1 << 20));
        assert!(!wa.admit(2 << 20, 3 << 20), "over the zone's share");
        assert_eq!(wa.inflight(), 4 << 20);
        // Slow writes shrink the window, fast ones grow it back.
        wa.complete(1 << 20, 2 << 20, 5_000_000, 10_000_000, true, true);
        assert_eq!(wa.window(), 6 << 20);
        wa.complete(2 << 20, 0, 100, 10_100_000, true, true);
        assert_eq!(wa.window(), 6 << 20, "once per interval");
        for i in 0..100u64 {
            wa.complete(0, 1, 100, 20_000_000 + i * 1_000_000, true, true);
        }
        assert_eq!(wa.window(), 8 << 20);
        // An idle device always admits.
        let idle = WriteAdmission::new(1, 2, WriteTarget::Fixed(1));
        assert!(idle.admit(1 << 30, 0));
        // So does any zone with nothing in flight, window full or not; a
        // zone with writes in flight waits for room.
        let full = WriteAdmission::new(1 << 20, 1 << 20, WriteTarget::Fixed(1));
        assert!(full.admit(1 << 20, 0));
        assert!(!full.admit(1 << 10, 1 << 20));
        assert!(full.admit(1 << 20, 0));
        assert_eq!(full.inflight(), 2 << 20);
        full.complete(1 << 20, 0, 1, 1, false, false);
        assert!(!full.admit(1 << 10, 1 << 20), "still over the window");
        full.complete(1 << 20, 0, 1, 1, false, false);
        assert!(full.admit(1 << 10, 1 << 10));
    }

    #[test]
    fn the_target_follows_the_measured_baseline() {
        let mb = 1 << 20;
        let run = |base: u64| {
            // A device whose uncongested writes take `base`, then writes 3x
            // as slow: under a 4x target they are not congestion, 5x are.
            let wa = WriteAdmission::new(mb, 8 * mb, WriteTarget::Baseline(4.0));
            let mut now = 1_000_000;
            let mut step = |wa: &WriteAdmission, lat: u64, sample: bool| {
                assert!(wa.admit(mb, 0));
                now += 10 * base;
                wa.complete(mb, 0, lat, now, sample, true);
            };
            for _ in 0..4 {
                step(&wa, base, true);
            }
            assert_eq!(wa.baseline_ns(), base);
            assert_eq!(wa.target_ns(), 4 * base);
            // A smaller, faster write that may not teach the baseline.
            step(&wa, base / 10, false);
            assert_eq!(wa.baseline_ns(), base);
            for _ in 0..50 {
                step(&wa, 3 * base, true);
            }
            let steady = wa.window();
            for _ in 0..50 {
                step(&wa, 5 * base, true);
            }
            (steady, wa.window(), wa.target_ns())
        };
        // The same rule on a fast and on a slow device: the window stays
        // open at 3x either device's baseline and closes at 5x, although
        // the slow device's 3x is above the fast one's 5x.
        for base in [40_000, 400_000] {
            let (steady, congested, target) = run(base);
            assert_eq!((steady, congested, target), (8 * mb, mb, 4 * base), "base {base}");
        }
        // Without a sample there is no target: the window stays open.
        let wa = WriteAdmission::new(mb, 8 * mb, WriteTarget::Baseline(4.0));
        wa.complete(0, 1, 10_000_000, 50_000_000, false, true);
        assert_eq!((wa.target_ns(), wa.window()), (0, 8 * mb));
    }

    #[test]
    fn the_baseline_forgets_after_two_epochs() {
        let wa = WriteAdmission::new(1, 2, WriteTarget::Baseline(2.0));
        wa.complete(0, 1, 1_000, 1, true, true);
        let mut now = 1;
        for epoch in 0..3 {
            now += BASELINE_EPOCH_NS;
            wa.complete(0, 1, 5_000, now, true, true);
            let want = if epoch < 1 { 1_000 } else { 5_000 };
            assert_eq!(wa.baseline_ns(), want, "epoch {epoch}");
        }
    }
}
