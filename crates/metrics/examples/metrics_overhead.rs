//! The cost of counting: 4 KiB reads at queue depth 32 on a data-less
//! emulator (`emu:small,media=null`), through the device itself and
//! through a `MeteredDevice` wrapping it, alternated in rounds; prints
//! one JSON object with nanoseconds per read for each and the difference.
//!
//! `cargo run --release -p zns-metrics --example metrics_overhead [SECONDS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use zns_device::{ZoneOp, ZonedDevice};
use zns_metrics::MeteredDevice;

const DEPTH: usize = 32;

/// The cost of counting: plain against metered reads.
#[derive(Debug, Parser)]
struct Args {
    /// Seconds measured: ten rounds of a tenth each, plain and metered
    /// alternating, after one warm-up round of each.
    #[arg(value_name = "SECONDS", default_value_t = 2.0)]
    seconds: f64,
}

/// Reads for `time`; returns (reads, elapsed).
fn reads(dev: &dyn ZonedDevice, time: Duration) -> (u64, Duration) {
    let mut q = dev.queue(DEPTH).unwrap();
    let bs = dev.info().block_size as usize;
    let span = dev.info().zone_size * 8;
    let mut bufs: Vec<_> = (0..DEPTH).map(|_| Some(q.alloc(bs).unwrap())).collect();
    let (mut done, mut lba) = (0u64, 0u64);
    let mut back = Vec::with_capacity(DEPTH);
    let start = Instant::now();
    for (i, b) in bufs.iter_mut().enumerate() {
        q.submit(ZoneOp::Read { lba }, b.take(), i as u64).unwrap();
        lba = (lba + 1) % span;
    }
    q.ring();
    while start.elapsed() < time {
        q.poll(DEPTH, &mut |c| {
            c.result.unwrap();
            back.push((c.tag, c.buffer));
        });
        for (tag, buf) in back.drain(..) {
            done += 1;
            q.submit(ZoneOp::Read { lba }, buf, tag).unwrap();
            lba = (lba + 1) % span;
        }
        q.ring();
    }
    let elapsed = start.elapsed();
    q.drain(Duration::from_secs(10), &mut |_| {}).unwrap();
    (done, elapsed)
}

fn main() {
    let args = Args::parse();
    let round = Duration::from_secs_f64(args.seconds / 10.0);
    let plain = zns_device::open("emu:small,media=null").unwrap();
    let metered: Arc<dyn ZonedDevice> =
        MeteredDevice::wrap(zns_device::open("emu:small,media=null").unwrap());
    let (mut p, mut m) = ((0u64, Duration::ZERO), (0u64, Duration::ZERO));
    // Warm-up, then alternate so that both see the same machine.
    reads(plain.as_ref(), round);
    reads(metered.as_ref(), round);
    for _ in 0..5 {
        let (n, t) = reads(plain.as_ref(), round);
        p = (p.0 + n, p.1 + t);
        let (n, t) = reads(metered.as_ref(), round);
        m = (m.0 + n, m.1 + t);
    }
    let ns = |(n, t): (u64, Duration)| t.as_nanos() as f64 / n.max(1) as f64;
    let (pn, mn) = (ns(p), ns(m));
    let report = serde_json::json!({
        "device": "emu:small,media=null",
        "queue_depth": DEPTH,
        "block_bytes": plain.info().block_size,
        "plain_ns_per_read": pn,
        "metered_ns_per_read": mn,
        "overhead_ns_per_read": mn - pn,
        "overhead_percent": (mn / pn - 1.0) * 100.0,
    });
    println!("{report}");
}
