//! A CPU-bound probe: a fixed amount of work, timed, that tells how fast
//! the host running a measurement is against a reference host.
//!
//! A guest under software emulation runs its CPU many times slower than
//! a native host, so a device at native speed looks relatively fast to it.
//! Running the probe on both sides of a run (the native host that serves
//! the device and the guest that measures it, or the guest against
//! [`REFERENCE_NS`]) gives the guest's slowdown, and that is the time
//! dilation factor (`emu:...,dilation=F`) that keeps a native machine's
//! CPU-to-device ratio: see docs/fidelity.md.
//!
//! The work is integer arithmetic and dependent loads from a 64 KiB table
//! (what a storage stack's host side does: branches, hashing, cache-resident
//! data), with no system calls and no allocation inside the timed part.

use std::hint::black_box;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Rounds of the probe's inner loop per pass.
const ROUNDS: u64 = 1 << 22;

/// Entries of the table the loop reads (64 KiB of `u64`).
const TABLE: usize = 8192;

/// Nanoseconds one pass of the probe takes on the reference host: a
/// native x86-64 server core of 2.x GHz, release build. A host whose
/// probe takes `k` times this is `k` times slower.
pub const REFERENCE_NS: u64 = 8_000_000;

/// What the probe measured.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Fastest pass, ns.
    pub ns: u64,
    /// Passes run.
    pub passes: u32,
    /// The reference it is set against, ns.
    pub reference_ns: u64,
    /// `ns / reference_ns`: how many times slower than the reference this
    /// host is.
    pub slowdown: f64,
    /// The dilation factor that gives this host the reference host's
    /// CPU-to-device ratio: the slowdown, at least 1.
    pub suggested_dilation: f64,
}

/// One pass: the fixed work, its result kept from the optimizer.
fn pass(table: &[u64; TABLE]) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut acc: u64 = 0;
    for _ in 0..ROUNDS {
        // xorshift64*: cheap, data-dependent, not vectorizable.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        acc = acc.rotate_left(5) ^ table[(v ^ acc) as usize % TABLE];
    }
    black_box(acc)
}

/// Runs `passes` passes (at least 1) and keeps the fastest, set against
/// `reference_ns` ([`REFERENCE_NS`] unless another host's probe is given).
pub fn run(passes: u32, reference_ns: Option<u64>) -> Probe {
    let mut table = [0u64; TABLE];
    let mut s: u64 = 1;
    for t in table.iter_mut() {
        s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        *t = s;
    }
    let table = black_box(table);
    let passes = passes.max(1);
    let mut best = u64::MAX;
    for _ in 0..passes {
        let t0 = Instant::now();
        black_box(pass(&table));
        best = best.min(t0.elapsed().as_nanos() as u64);
    }
    of(best, passes, reference_ns.unwrap_or(REFERENCE_NS))
}

/// The probe figures of a pass that took `ns`, against `reference_ns`.
pub fn of(ns: u64, passes: u32, reference_ns: u64) -> Probe {
    let slowdown = ns as f64 / reference_ns.max(1) as f64;
    Probe { ns, passes, reference_ns, slowdown, suggested_dilation: slowdown.max(1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowdown_and_dilation_follow_the_reference() {
        let p = of(40_000_000, 3, 8_000_000);
        assert_eq!((p.slowdown, p.suggested_dilation), (5.0, 5.0));
        let fast = of(4_000_000, 1, 8_000_000);
        assert_eq!((fast.slowdown, fast.suggested_dilation), (0.5, 1.0));
        assert!(run(1, None).ns > 0);
    }
}
