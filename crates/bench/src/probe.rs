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
//!
//! A second part, the kernel probe, times what the first leaves out: system
//! calls that copy data through the kernel (4 KiB written into one end of a
//! Unix socket pair and read from the other). Software emulation (QEMU's
//! TCG) translates a user-space loop into host code that runs at nearly
//! native speed, but a system call, a page-table walk or a copy in the
//! kernel costs it many times more: for an application whose every write
//! ends in an fsync, the kernel probe's slowdown is the one that matters.

use std::hint::black_box;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
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

/// Round trips of the kernel probe per pass.
const KERNEL_ROUNDS: u32 = 4096;

/// Bytes each round trip writes and reads back.
const KERNEL_BYTES: usize = 4096;

/// Nanoseconds one pass of the kernel probe takes on the reference host
/// (the same native core as [`REFERENCE_NS`]: about 1 µs per 4 KiB
/// written and read back through a socket pair).
pub const KERNEL_REFERENCE_NS: u64 = 4_000_000;

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
    /// The kernel probe's fastest pass, ns (`None` where no socket pair
    /// could be made).
    #[serde(default)]
    pub kernel_ns: Option<u64>,
    /// The reference the kernel probe is set against, ns.
    #[serde(default)]
    pub kernel_reference_ns: Option<u64>,
    /// `kernel_ns / kernel_reference_ns`.
    #[serde(default)]
    pub kernel_slowdown: Option<f64>,
    /// The dilation factor that gives this host the reference host's
    /// CPU-to-device ratio: the CPU-bound slowdown, at least 1. (An
    /// application whose time goes to system calls, as one that fsyncs
    /// every write, needs the kernel slowdown instead.)
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

/// What the probe's figures are set against: the reference host's pass
/// times, ns (the built-in ones where `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reference {
    /// The CPU-bound pass ([`REFERENCE_NS`] when `None`).
    pub cpu_ns: Option<u64>,
    /// The kernel pass ([`KERNEL_REFERENCE_NS`] when `None`).
    pub kernel_ns: Option<u64>,
}

/// Runs `passes` passes (at least 1) of both parts and keeps the fastest
/// of each, set against `reference`.
pub fn run(passes: u32, reference: Reference) -> Probe {
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
    let kernel = match kernel_probe(passes) {
        Ok(ns) => Some(ns),
        Err(e) => {
            tracing::warn!("the kernel probe could not run: {e}");
            None
        }
    };
    with_kernel(of(best, passes, reference.cpu_ns.unwrap_or(REFERENCE_NS)), kernel, reference)
}

/// The fastest of `passes` passes of the kernel probe, ns.
fn kernel_probe(passes: u32) -> std::io::Result<u64> {
    let (mut a, mut b) = UnixStream::pair()?;
    let out = [0x5au8; KERNEL_BYTES];
    let mut back = [0u8; KERNEL_BYTES];
    let mut best = u64::MAX;
    for _ in 0..passes {
        let t0 = Instant::now();
        for _ in 0..KERNEL_ROUNDS {
            // One write and one read of 4 KiB: two system calls, a copy
            // into the kernel and one out, no sleep (the socket's buffer
            // holds a round's bytes).
            a.write_all(black_box(&out))?;
            b.read_exact(&mut back)?;
        }
        best = best.min(t0.elapsed().as_nanos() as u64);
        black_box(&back);
    }
    Ok(best)
}

/// The probe figures of a pass that took `ns`, against `reference_ns`.
pub fn of(ns: u64, passes: u32, reference_ns: u64) -> Probe {
    let slowdown = ns as f64 / reference_ns.max(1) as f64;
    Probe {
        ns,
        passes,
        reference_ns,
        slowdown,
        kernel_ns: None,
        kernel_reference_ns: None,
        kernel_slowdown: None,
        suggested_dilation: slowdown.max(1.0),
    }
}

/// `probe` with the kernel probe's pass time `kernel_ns` (if it ran) set
/// against `reference`.
pub fn with_kernel(probe: Probe, kernel_ns: Option<u64>, reference: Reference) -> Probe {
    let Some(ns) = kernel_ns else { return probe };
    let reference_ns = reference.kernel_ns.unwrap_or(KERNEL_REFERENCE_NS).max(1);
    Probe {
        kernel_ns: Some(ns),
        kernel_reference_ns: Some(reference_ns),
        kernel_slowdown: Some(ns as f64 / reference_ns as f64),
        ..probe
    }
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
        let p = run(1, Reference::default());
        assert!(p.ns > 0 && p.kernel_ns.is_some_and(|k| k > 0), "{p:?}");
        assert_eq!(p.kernel_reference_ns, Some(KERNEL_REFERENCE_NS));
    }

    #[test]
    fn the_kernel_slowdown_is_set_against_its_own_reference() {
        let cpu = of(16_000_000, 5, 8_000_000);
        let r = Reference { cpu_ns: None, kernel_ns: Some(1_000_000) };
        let p = with_kernel(cpu, Some(40_000_000), r);
        assert_eq!((p.slowdown, p.kernel_slowdown), (2.0, Some(40.0)));
        assert_eq!((p.kernel_ns, p.kernel_reference_ns), (Some(40_000_000), Some(1_000_000)));
        // The suggested dilation stays the CPU-bound one.
        assert_eq!(p.suggested_dilation, 2.0);
        assert_eq!(with_kernel(cpu, None, r), cpu);
        let builtin = with_kernel(cpu, Some(8_000_000), Reference::default());
        assert_eq!(builtin.kernel_slowdown, Some(2.0));
    }

    #[test]
    fn an_older_report_without_the_kernel_probe_still_reads() {
        let old = r#"{"ns":9,"passes":1,"reference_ns":9,"slowdown":1.0,"suggested_dilation":1.0}"#;
        let p: Probe = serde_json::from_str(old).unwrap();
        assert_eq!((p.kernel_ns, p.kernel_slowdown), (None, None));
    }
}
