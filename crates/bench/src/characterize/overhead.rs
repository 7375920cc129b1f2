//! The characterization engine's own cost per I/O, in host time.
//!
//! On a real clock every nanosecond the engine spends between taking a
//! command's time stamps, keeping its streams at depth and recording its
//! latency is device time too: it lowers the throughput of shallow points
//! and, where it falls between a time stamp and the submission or the
//! poll, it is part of a latency. This module measures that cost so a run
//! can say how much of a QD 1 write it is.
//!
//! The method is differential, on a device whose commands cost no device
//! time: an emulator without its timing model, on null media
//! ([`OVERHEAD_URI`]), whose commands complete inside the doorbell write.
//! Two loops send the same QD 1 4 KiB writes to it:
//!
//! * the engine: one write stream through [`engine::run`], exactly as the
//!   `qd1` experiment runs it (streams, slots, device-time reads,
//!   histogram);
//! * the bare loop: submit, ring, poll until the completion, nothing else.
//!
//! Both pay the same device layer, driver and emulator; the difference of
//! their wall time per I/O is the engine's own cost. Passes alternate the
//! two loops and the fastest pass of each counts, which keeps out what
//! the rest of the machine did meanwhile.
//!
//! Independently, the run's own `qd1/write/4KiB` point gives the device
//! time per write that no latency covers (the gap between one completion's
//! time stamp and the next submission's): on a real clock that is the
//! engine's and the driver's host time between commands, seen on the
//! device under test; on a virtual clock it is zero, host time being free.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use zns_device::{Completion, ZoneOp};

use super::engine::{self, describe, Ctx, Stream, Work, ZonePool};
use super::results::{Overhead, Point};
use super::CharacterizeError;

/// The device the overhead is measured on: the emulator with the ZN540
/// geometry, no timing model (commands complete at once, real clock),
/// null media.
pub const OVERHEAD_URI: &str = "emu:zn540,timing=off,media=null";

/// Bytes per write of both loops.
const IO_BYTES: usize = 4096;

/// How long the bare loop polls for one completion before giving up.
const STALL: Duration = Duration::from_secs(10);

/// Measures the engine's cost with `ios` writes per pass and `passes`
/// passes of each loop; `clock` is the measured run's device clock and
/// `points` its points (for the QD 1 write latency and gap).
pub(crate) fn measure(
    ios: u64,
    passes: u32,
    clock: &str,
    points: &[Point],
) -> Result<Overhead, CharacterizeError> {
    let ios = ios.max(1);
    let passes = passes.max(1);
    let dev = zns_device::open(OVERHEAD_URI)?;
    let info = dev.info().clone();
    let mut q = dev.queue(64)?;
    let pool = ZonePool::scan(q.as_mut(), &info)?;
    let mut ctx = Ctx {
        dev: dev.as_ref(),
        q,
        info,
        pool,
        rng: rand::rngs::SmallRng::seed_from_u64(1),
        fill_byte: 0x5a,
        dilation: Default::default(),
        late_source: None,
        late: Default::default(),
    };
    let (mut engine_best, mut bare_best) = (f64::INFINITY, f64::INFINITY);
    for pass in 0..passes {
        for engine_first in [pass % 2 == 1, pass % 2 == 0] {
            let ns =
                if engine_first { engine_pass(&mut ctx, ios)? } else { bare_pass(&mut ctx, ios)? };
            ctx.release_zones()?;
            if engine_first {
                engine_best = engine_best.min(ns);
            } else {
                bare_best = bare_best.min(ns);
            }
        }
    }
    drop(ctx);
    drop(dev);
    let write = points.iter().find(|p| p.id == "qd1/write/4KiB" && p.ops > 0);
    let qd1_write_mean_us = write.map(|p| p.latency.mean_us);
    let qd1_write_gap_ns = write.filter(|p| p.ops > 1).map(|p| {
        let covered = p.latency.mean_us * 1e3 * p.ops as f64;
        ((p.elapsed_ns as f64 - covered) / (p.ops - 1) as f64).max(0.0)
    });
    let ns_per_io = (engine_best - bare_best).max(0.0);
    let fraction_of_qd1_write =
        qd1_write_mean_us.filter(|&m| m > 0.0).map(|m| ns_per_io / (m * 1e3));
    let applies = if clock == "virtual" { "no" } else { "yes" };
    let o = Overhead {
        method: "differential".into(),
        device: OVERHEAD_URI.into(),
        ios,
        passes,
        engine_ns_per_io: engine_best,
        bare_ns_per_io: bare_best,
        ns_per_io,
        qd1_write_mean_us,
        fraction_of_qd1_write,
        qd1_write_gap_ns,
        applies: applies.into(),
    };
    tracing::info!(
        ns_per_io = o.ns_per_io,
        engine = o.engine_ns_per_io,
        bare = o.bare_ns_per_io,
        fraction = ?o.fraction_of_qd1_write,
        "engine overhead measured"
    );
    Ok(o)
}

/// `ios` QD 1 writes through the engine; wall ns per write.
fn engine_pass(ctx: &mut Ctx<'_>, ios: u64) -> Result<f64, CharacterizeError> {
    let mut s = [Stream::new(Work::Write { zone: None }, 1, IO_BYTES).limit(ios)];
    let t = Instant::now();
    engine::run(ctx, &mut s)?;
    let wall = t.elapsed().as_nanos() as f64;
    if s[0].ops != ios {
        return Err(CharacterizeError::Internal(format!(
            "overhead: {} of {ios} writes completed",
            s[0].ops
        )));
    }
    Ok(wall / ios as f64)
}

/// `ios` QD 1 writes by submit, ring and poll alone; wall ns per write.
fn bare_pass(ctx: &mut Ctx<'_>, ios: u64) -> Result<f64, CharacterizeError> {
    let (zone, cap) = ctx.take_zone()?;
    let blocks = (IO_BYTES as u64 / ctx.info.block_size as u64).max(1);
    if ios * blocks > cap {
        return Err(CharacterizeError::Invalid(format!(
            "overhead: {ios} writes do not fit a zone of {cap} blocks"
        )));
    }
    let mut buffer = Some(ctx.data_buffer(IO_BYTES)?);
    let t = Instant::now();
    for i in 0..ios {
        let op = ZoneOp::Write { lba: zone + i * blocks, fua: false, placement: None };
        if let Err(r) = ctx.q.submit(op.clone(), buffer.take(), 0) {
            return Err(CharacterizeError::command(&describe(&op), r.error));
        }
        ctx.q.ring();
        let mut done: Option<Completion> = None;
        let mut polls = 0u32;
        while ctx.q.poll(1, &mut |c| done = Some(c)) == 0 {
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(4096) && t.elapsed() > STALL {
                return Err(CharacterizeError::Stalled(format!("overhead: {}", describe(&op))));
            }
            std::hint::spin_loop();
        }
        let c = done.expect("polled one completion");
        c.result.map_err(|e| CharacterizeError::command(&describe(&op), e))?;
        buffer = c.buffer;
    }
    Ok(t.elapsed().as_nanos() as f64 / ios as f64)
}

/// The device under test runs on `clock`; this is what a measured
/// overhead means for its figures, in one line.
pub fn describe_overhead(o: &Overhead) -> String {
    let mut s = format!(
        "{:.0} ns per I/O ({:.0} ns through the engine - {:.0} ns bare, QD 1 4 KiB writes on {}, \
         best of {} x {})",
        o.ns_per_io, o.engine_ns_per_io, o.bare_ns_per_io, o.device, o.passes, o.ios
    );
    match (o.fraction_of_qd1_write, o.qd1_write_mean_us) {
        (Some(f), Some(m)) => {
            s += &format!(" = {:.2} % of the QD 1 4 KiB write latency ({m:.2} us)", f * 100.0)
        }
        _ => s += "; no QD 1 4 KiB write latency in this run (run qd1)",
    }
    if let Some(g) = o.qd1_write_gap_ns {
        s += &format!("; device time between QD 1 writes: {g:.0} ns");
    }
    if o.applies == "no" {
        s += "; virtual clock: host time costs no device time, no figure of this run includes it";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::characterize::{run, NoProgress, Options, Suite};

    /// The figure is there and makes sense (not a timing assertion: any
    /// machine, however slow or busy, passes).
    fn check(o: &Overhead, clock: &str) {
        assert_eq!(o.method, "differential");
        assert_eq!(o.device, OVERHEAD_URI);
        assert!(o.ios > 0 && o.passes > 0, "{o:?}");
        for v in [o.engine_ns_per_io, o.bare_ns_per_io, o.ns_per_io] {
            assert!(v.is_finite() && v >= 0.0, "{o:?}");
        }
        assert!(o.bare_ns_per_io > 0.0, "a write costs some host time: {o:?}");
        assert!(
            (o.ns_per_io - (o.engine_ns_per_io - o.bare_ns_per_io).max(0.0)).abs() < 1e-6,
            "{o:?}"
        );
        let m = o.qd1_write_mean_us.expect("the run measured qd1/write/4KiB");
        assert!(m > 0.0, "{o:?}");
        let f = o.fraction_of_qd1_write.expect("a fraction");
        assert!((f - o.ns_per_io / (m * 1e3)).abs() < 1e-9, "{o:?}");
        let g = o.qd1_write_gap_ns.expect("a gap");
        assert!(g.is_finite() && g >= 0.0, "{o:?}");
        assert_eq!(o.applies, if clock == "virtual" { "no" } else { "yes" });
        if clock == "virtual" {
            // Host time costs no virtual time; the mean comes from the
            // histogram (0.1 % resolution).
            assert!(g < 0.01 * m * 1e3, "{o:?}");
        }
    }

    #[test]
    fn results_carry_a_sensible_overhead_on_both_clocks() {
        for (uri, clock) in [("emu:tiny", "real"), ("emu:zn540", "virtual")] {
            let dev = zns_device::open(uri).unwrap();
            assert_eq!(dev.clock_name(), clock);
            let opts = Options {
                suite: Suite::Smoke,
                seed: 3,
                only: vec!["qd1".into()],
                ..Default::default()
            };
            let r = run(dev.as_ref(), &opts, &NoProgress).unwrap();
            let text = serde_json::to_string(&r).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let o = v["host"].get("overhead").expect("results.json has host.overhead");
            assert!(o.is_object(), "overhead is {o}");
            let back = crate::characterize::Results::from_json(&text).unwrap();
            let o = back.host.overhead.expect("overhead reads back");
            check(&o, clock);
            assert!(!describe_overhead(&o).is_empty());
        }
    }
}
