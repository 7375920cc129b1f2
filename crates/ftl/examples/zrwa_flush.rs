//! A flush-heavy workload with the metadata log in zone random write
//! areas and without, printed as JSON.
//!
//! One writer (QD 1) writes random 4 KiB blocks over the first `--span`
//! logical blocks of a freshly formatted FTL and flushes after every
//! `k`-th write, `--writes` writes in all (few enough that garbage
//! collection never runs). Each case runs on a fresh instance of the same
//! emulated device (default `emu:zn540,zones=16`, the ZN540's timing model
//! on the emulator's virtual clock) given ZRWAs of `--window` blocks with a
//! flush granularity of 1, 4 and 8 blocks; the FTL runs with
//! `ZrwaUse::Off` and `ZrwaUse::On` on each (the default, `Auto`, is `On`
//! at a granularity of 1 block and `Off` above it).
//!
//! Per case, measured over the workload only (the format is excluded):
//! - `device_blocks_per_flush`: blocks written to the device (data, log
//!   pages and the blank blocks commits padded units with, by the FTL's
//!   counters) per user flush; `meta_blocks_per_flush` the metadata log's
//!   share, `pad_blocks_per_flush` the padding. Cross-check:
//!   `zone_blocks_growth`, the growth of the sum of every zone's write
//!   pointer (read from zone reports before and after), equals
//!   `device_blocks` unless a checkpoint reset metadata zones
//!   (`checkpoints` > 0);
//! - `waf_total`: device blocks / user blocks;
//! - `flush_ns_p50`, `_p99`, `_mean` and `write_ns_p50`, `_p99`: latency
//!   of each `flush()` and `write()` call in the device's clock
//!   (`ZonedDevice::now_ns`, virtual: the timing model's time, not the
//!   host's), and `device_ns_per_flush`: the device time of the whole
//!   workload per flush;
//! - `device_flushes_per_flush`, `zrwa_commits_per_flush`: commands.
//!
//! ```text
//! cargo run --release -p zns-ftl --example zrwa_flush [-- --device emu:zn540,zones=16]
//!     [--writes 20000] [--span 65536] [--window 64] [--every 1,4,16]
//! ```

use std::sync::Arc;

use clap::Parser;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use zns_device::{ReportFilter, ZonedDevice};
use zns_ftl::{Ftl, FtlConfig, ZrwaUse};

/// A flush-heavy workload on the FTL with its metadata log in zone random
/// write areas and without; prints JSON.
#[derive(Debug, Parser)]
struct Args {
    /// The emulated device each case runs on (a `zrwa=` option is added).
    #[arg(long, value_name = "URI", default_value = "emu:zn540,zones=16")]
    device: String,
    /// Writes in all (few enough that garbage collection never runs).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    writes: u64,
    /// Logical blocks the random writes fall in (from block 0).
    #[arg(long, value_name = "N", default_value_t = 65_536,
          value_parser = clap::value_parser!(u64).range(1..))]
    span: u64,
    /// Blocks of each zone random write area.
    #[arg(long, value_name = "N", default_value_t = 64)]
    window: u64,
    /// Writes per flush (`k`): a flush after every k-th write; one case
    /// per value.
    #[arg(long, value_name = "K,K", value_delimiter = ',', default_value = "1,4,16",
          value_parser = clap::value_parser!(u64).range(1..))]
    every: Vec<u64>,
}

/// Blocks written in every zone of `dev` (committed, for ZRWA zones).
fn device_blocks(dev: &dyn ZonedDevice) -> u64 {
    let mut q = dev.queue(1).expect("a queue");
    let zones = dev.info().zone_count as usize;
    let report = q.report_zones(0, ReportFilter::All, zones).expect("a zone report");
    report.iter().map(|z| z.written()).sum()
}

/// The `p` quantile of `ns` (HdrHistogram, three significant digits).
fn percentile(ns: &[u64], p: f64) -> u64 {
    let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("a histogram");
    for &v in ns {
        h.record(v).expect("auto-resizing");
    }
    h.value_at_quantile(p)
}

fn run(a: &Args, uri: &str, zrwa: ZrwaUse, every: u64) -> Value {
    let dev = zns_device::open(uri).expect("open the device");
    let config = FtlConfig { zrwa, ..FtlConfig::default() };
    let ftl = Ftl::format(Arc::clone(&dev), config).expect("format");
    ftl.flush().expect("flush");
    let span = a.span.min(ftl.capacity_blocks());
    let bs = ftl.block_size() as usize;
    let before = ftl.stats();
    let blocks_before = device_blocks(dev.as_ref());
    let t0 = dev.now_ns();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut buf = vec![0u8; bs];
    let (mut flush_ns, mut write_ns) = (Vec::new(), Vec::new());
    for i in 0..a.writes {
        let l = rng.gen_range(0..span);
        buf[..8].copy_from_slice(&l.to_le_bytes());
        buf[8..16].copy_from_slice(&i.to_le_bytes());
        let t = dev.now_ns();
        ftl.write(l, &buf).expect("write");
        write_ns.push(dev.now_ns() - t);
        if (i + 1) % every == 0 {
            let t = dev.now_ns();
            ftl.flush().expect("flush");
            flush_ns.push(dev.now_ns() - t);
        }
    }
    let elapsed = dev.now_ns() - t0;
    let s = ftl.stats();
    let growth = device_blocks(dev.as_ref()) as i64 - blocks_before as i64;
    let blocks = s.data_blocks_written + s.meta_blocks_written
        - before.data_blocks_written
        - before.meta_blocks_written;
    let flushes = (s.user_flushes - before.user_flushes) as f64;
    let user = (s.user_blocks_written - before.user_blocks_written) as f64;
    let per = |x: u64, y: u64| (x - y) as f64 / flushes;
    assert_eq!(s.gc_victims, 0, "garbage collection ran: lower --writes");
    let mean = flush_ns.iter().sum::<u64>() as f64 / flush_ns.len().max(1) as f64;
    drop(ftl);
    json!({
        "device": uri,
        "zrwa": format!("{zrwa:?}").to_lowercase(),
        "flush_every": every,
        "writes": a.writes,
        "flushes": flushes,
        "device_blocks": blocks,
        "zone_blocks_growth": growth,
        "checkpoints": s.checkpoints - before.checkpoints,
        "device_blocks_per_flush": blocks as f64 / flushes,
        "device_bytes_per_flush": blocks as f64 * bs as f64 / flushes,
        "meta_blocks_per_flush": per(s.meta_blocks_written, before.meta_blocks_written),
        "pad_blocks_per_flush": per(s.zrwa_pad_blocks, before.zrwa_pad_blocks),
        "waf_total": blocks as f64 / user,
        "flush_ns_p50": percentile(&flush_ns, 0.5),
        "flush_ns_p99": percentile(&flush_ns, 0.99),
        "flush_ns_mean": mean,
        "write_ns_p50": percentile(&write_ns, 0.5),
        "write_ns_p99": percentile(&write_ns, 0.99),
        "device_ns_per_flush": elapsed as f64 / flushes,
        "device_flushes_per_flush": per(s.device_flushes, before.device_flushes),
        "zrwa_commits_per_flush": per(s.zrwa_commits, before.zrwa_commits),
    })
}

fn main() {
    let a = Args::parse();
    let mut cases = Vec::new();
    for fg in [1u64, 4, 8] {
        let uri = format!("{},zrwa={}/{fg}/4", a.device, a.window);
        for &every in &a.every {
            for zrwa in [ZrwaUse::Off, ZrwaUse::On] {
                cases.push(run(&a, &uri, zrwa, every));
            }
        }
    }
    let out = json!({
        "workload": "4 KiB random writes, QD 1, a flush every k writes",
        "writes": a.writes,
        "span_blocks": a.span,
        "cases": cases,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
}
