//! What tracing costs the emulator: 4 KiB random reads and 128 KiB writes
//! at QD 32 on a timed `zn540` (virtual clock, no data) through its real
//! queues, with no trace sink and with a trace file's ring buffer
//! ([`zns_device::trace::TraceFile`], the sink `emu:...,trace=FILE`
//! installs), in alternating slices of one run on one device. Prints one
//! JSON object: commands per second of wall time in each mode, the best of
//! the slices, and the cost of tracing as a fraction.
//!
//! `--traced 0` installs no sink in any slice (both figures untraced): for
//! comparing builds with tracing off, with no trace's memory in the cache.
//!
//! ```text
//! cargo run --release -p zns-device --example trace_cost [-- --seconds 4 --slices 8 --traced 0|1]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::builder::TypedValueParser as _;
use clap::Parser;
use zns_device::trace::{TraceFile, DEFAULT_TRACE_EVENTS};
use zns_emulator::clock::ClockMode;
use zns_emulator::harness::Harness;
use zns_emulator::host::ProcessMemory;
use zns_emulator::timing::calibration::Bench;
use zns_emulator::trace::TraceSink;
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::{SubmissionEntry, ZoneSendAction};

/// Blocks of 4 KiB read at random (256 MiB).
const WORKING_SET: u64 = 65_536;
/// Commands in flight.
const QD: usize = 32;

/// What tracing costs the timed emulator: commands per second with and
/// without a trace file's ring buffer; prints one JSON object.
#[derive(Debug, Parser)]
struct Args {
    /// Seconds of wall time per mode (untraced, traced), split into its
    /// slices.
    #[arg(long, value_name = "S", default_value_t = 4.0)]
    seconds: f64,
    /// Slices per mode, each half reads and half writes; the modes
    /// alternate.
    #[arg(long, value_name = "N", default_value_t = 8)]
    slices: u32,
    /// 1: the traced slices install a trace sink; 0: no slice does.
    #[arg(long, value_name = "0|1", default_value = "1", action = clap::ArgAction::Set,
          value_parser = clap::builder::PossibleValuesParser::new(["0", "1"]).map(|v| v == "1"))]
    traced: bool,
}

/// Runs `next(i)` commands with `QD` in flight for `d` of wall time;
/// returns commands per second.
fn run(h: &mut Harness, d: Duration, mut next: impl FnMut(u64) -> SubmissionEntry) -> f64 {
    let (t0, mut done, mut issued) = (Instant::now(), 0u64, 0u64);
    for _ in 0..QD {
        h.io.push(&h.memory, next(issued));
        issued += 1;
    }
    h.io.ring(&h.ctrl);
    loop {
        let mut reaped = 0;
        while let Some(e) = h.io.reap(&h.ctrl, &h.memory) {
            assert!(e.status().is_success(), "{e:?}");
            reaped += 1;
        }
        done += reaped;
        let over = t0.elapsed() >= d;
        if !over {
            for _ in 0..reaped {
                h.io.push(&h.memory, next(issued));
                issued += 1;
            }
            if reaped > 0 {
                h.io.ring(&h.ctrl);
            }
        }
        if over && done == issued {
            return done as f64 / t0.elapsed().as_secs_f64();
        }
        if over && t0.elapsed() > d * 10 {
            panic!("commands did not complete within {:?}", d * 10);
        }
    }
}

fn main() {
    let a = Args::parse();
    let memory = ProcessMemory::new();
    let ctrl = Emulator::builder("zn540")
        .expect("built-in profile")
        .media(MediaChoice::Null)
        .clock(ClockMode::Virtual)
        .build(memory.clone())
        .expect("emulator");
    ctrl.set_data_transfer(false);
    let mut h = Harness::start(ctrl, memory, 256).expect("harness");
    let g = h.ctrl.namespaces()[0].zones().expect("zoned").geometry().clone();
    let (zone, cap) = (g.zone_size, g.zone_capacity);
    // The working set on flash.
    let fill = Duration::from_secs(3600);
    let mut lba = 0;
    let mut left = WORKING_SET / 32;
    while left > 0 {
        let n = left.min(QD as u64 * 4);
        for _ in 0..n {
            h.io.push(&h.memory, Bench::write(lba, 32));
            lba += 32;
        }
        h.io.ring(&h.ctrl);
        for _ in 0..n {
            let t = Instant::now();
            while h.io.reap(&h.ctrl, &h.memory).is_none() {
                assert!(t.elapsed() < fill, "fill stalled");
            }
        }
        left -= n;
    }
    let trace_path = std::env::temp_dir().join(format!("trace_cost.{}.json", std::process::id()));
    let channels = h.ctrl.profile().timing.as_ref().map_or(1, |t| t.channels);
    let sink: Arc<dyn TraceSink> =
        Arc::new(TraceFile::new(&trace_path, DEFAULT_TRACE_EVENTS, channels));
    let slice = Duration::from_secs_f64(a.seconds / f64::from(a.slices.max(1)));
    let (mut best_off, mut best_on) = ([0f64; 2], [0f64; 2]);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    // Writes go to zones past the working set, reset when full.
    let first = WORKING_SET.div_ceil(zone) + 1;
    let mut wlba = first * zone;
    for i in 0..a.slices * 2 {
        let on = i % 2 == 1;
        if on && a.traced {
            h.ctrl.add_trace_sink(Arc::clone(&sink));
        }
        let reads = run(&mut h, slice / 2, |_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            Bench::read(rng % WORKING_SET, 1)
        });
        let writes = run(&mut h, slice / 2, |_| {
            if wlba % zone + 32 > cap {
                // The next zone (reset after the slice).
                wlba = (wlba / zone + 1) * zone;
            }
            let e = Bench::write(wlba, 32);
            wlba += 32;
            e
        });
        // Zones written in this slice are reset for the next.
        let mut z = first;
        while z * zone <= wlba {
            let e = h.io(Bench::send(z * zone, ZoneSendAction::Reset));
            assert!(e.status().is_success());
            z += 1;
        }
        wlba = first * zone;
        if on && a.traced {
            h.ctrl.remove_trace_sink(&sink);
        }
        let best = if on { &mut best_on } else { &mut best_off };
        best[0] = best[0].max(reads);
        best[1] = best[1].max(writes);
    }
    drop(sink);
    let _ = std::fs::remove_file(&trace_path);
    let cost = |off: f64, on: f64| if off > 0.0 { 1.0 - on / off } else { 0.0 };
    println!(
        "{{\"read_4k_qd32_off\":{:.0},\"read_4k_qd32_traced\":{:.0},\"read_cost\":{:.4},\
         \"write_128k_qd32_off\":{:.0},\"write_128k_qd32_traced\":{:.0},\"write_cost\":{:.4}}}",
        best_off[0],
        best_on[0],
        cost(best_off[0], best_on[0]),
        best_off[1],
        best_on[1],
        cost(best_off[1], best_on[1])
    );
}
