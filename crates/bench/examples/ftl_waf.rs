//! Write amplification of the FTL at steady state, printed as JSON.
//!
//! Workloads, each on a fresh `emu:small,media=null` device (the emulator
//! keeps zone state but no data, so long runs are cheap):
//! - `uniform`: random 4 KiB overwrites of the whole device, at OP 7, 10,
//!   20 and 28 %; compared with greedy's analytic limit
//!   A = a / (a + W0(−a·e^−a)), a = 1 + OP.
//! - `hot-cold-90-10`, `hot-cold-80-20`: 90 % (80 %) of the writes go to
//!   10 % (20 %) of the blocks, at OP 20 %; compared with the two-pool
//!   oracle (hot and cold data in separate pools, each collected greedily,
//!   spare space split between them optimally) and with single-log greedy.
//!
//! Each run fills the device sequentially, writes `warmup` × capacity to
//! reach steady state, then measures WAF over `measure` × capacity more;
//! IOPS are wall-clock over that window (GC runs in its own thread), then
//! random 4 KiB reads are timed.
//! - `threads`: four writer threads, 4 KiB and 64 KiB random writes at
//!   OP 20 %, with plain writes (one open zone per writer and stream) and
//!   with Zone Append (writers share each stream's open zone, a request's
//!   appends in flight together): the write-mode trade-off. IOPS count
//!   requests.
//!
//! ```text
//! cargo run --release -p zns-bench --example ftl_waf [-- --quick] [--only uniform|hot-cold|threads]
//!     [--warmup 3] [--measure 2] [--policies greedy,cost-benefit] [--mode write|append]
//!     [--hot-threshold 1.0] [--gc-streams 3]
//! ```

use std::time::Instant;

use clap::builder::TypedValueParser as _;
use clap::Parser;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_bench::ftl_bench::Workload;
use zns_ftl::analytic::{greedy_waf, two_pool_oracle};
use zns_ftl::{Ftl, FtlConfig, StreamLayout, VictimPolicy, WriteMode};

const URI: &str = "emu:small,media=null";

/// Write amplification of the FTL at steady state; prints JSON.
#[derive(Debug, Parser)]
struct Args {
    /// A shorter run: 1.5 capacities of warm-up, 0.5 measured and a tenth
    /// of the reads, unless `--warmup` or `--measure` say otherwise.
    #[arg(long)]
    quick: bool,
    /// Device capacities written to reach steady state [default: 3, 1.5
    /// with `--quick`].
    #[arg(long, value_name = "N")]
    warmup: Option<f64>,
    /// Device capacities written while measuring [default: 2, 0.5 with
    /// `--quick`].
    #[arg(long, value_name = "N")]
    measure: Option<f64>,
    /// Only the workloads whose name starts with this (`uniform`,
    /// `hot-cold`, `threads`).
    #[arg(long, value_name = "NAME")]
    only: Option<String>,
    /// Victim policies compared (`greedy`, `cost-benefit`, `lifetime`,
    /// `cost-age-time`).
    #[arg(long, value_name = "P,P", value_delimiter = ',', default_value = "greedy,lifetime")]
    policies: Vec<VictimPolicy>,
    /// How user data reaches its zone: plain writes or Zone Append.
    #[arg(long, value_name = "MODE", default_value = "write",
          value_parser = clap::builder::PossibleValuesParser::new(["write", "append"])
              .map(|m| if m == "append" { WriteMode::Append } else { WriteMode::Write }))]
    mode: WriteMode,
    /// `FtlConfig::hot_threshold`.
    #[arg(long, value_name = "X", default_value_t = FtlConfig::default().hot_threshold)]
    hot_threshold: f64,
    /// `FtlConfig::gc_streams`.
    #[arg(long, value_name = "N", default_value_t = FtlConfig::default().gc_streams)]
    gc_streams: u32,
}

impl Args {
    /// Device capacities of warm-up.
    fn warmup(&self) -> f64 {
        self.warmup.unwrap_or(if self.quick { 1.5 } else { 3.0 })
    }

    /// Device capacities measured.
    fn measure(&self) -> f64 {
        self.measure.unwrap_or(if self.quick { 0.5 } else { 2.0 })
    }

    /// Random reads timed after each run (4 KiB; of the request size for
    /// `threads`).
    fn reads(&self) -> u64 {
        if self.quick {
            20_000
        } else {
            200_000
        }
    }
}

struct Outcome {
    waf: f64,
    waf_total: f64,
    map_bytes_per_block: f64,
    write_iops: f64,
    read_iops: f64,
    gc_seconds: f64,
    user_waits: u64,
    op_effective: f64,
    logical: u64,
    op_device: f64,
    meta_zones: u32,
}

fn run(workload: Workload, config: FtlConfig, a: &Args, seed: u64) -> Outcome {
    let dev = zns_device::open(URI).expect(URI);
    let device_blocks = dev.info().zone_count * dev.info().zone_capacity;
    let ftl = Ftl::format(dev, config).expect("format");
    let bs = ftl.block_size() as usize;
    let n = ftl.capacity_blocks();
    // Fill once, in large writes.
    let chunk = 256u64;
    let big = vec![0x11u8; chunk as usize * bs];
    let mut l = 0;
    while l < n {
        let k = chunk.min(n - l);
        ftl.write(l, &big[..k as usize * bs]).expect("fill");
        l += k;
    }
    let gen = workload.generator(n).expect("workload");
    let mut rng = SmallRng::seed_from_u64(seed);
    let block = vec![0x22u8; bs];
    let warm = (a.warmup() * n as f64) as u64;
    for _ in 0..warm {
        ftl.write(gen.next(&mut rng), &block).expect("warm-up write");
    }
    let s0 = ftl.stats();
    let t0 = Instant::now();
    let meas = (a.measure() * n as f64) as u64;
    let (mut invalid_sum, mut samples) = (0f64, 0u64);
    let mut sampling = 0f64;
    for i in 0..meas {
        ftl.write(gen.next(&mut rng), &block).expect("write");
        if i % 2048 == 0 {
            let t = Instant::now();
            invalid_sum += ftl.stats().invalid_blocks as f64;
            samples += 1;
            sampling += t.elapsed().as_secs_f64();
        }
    }
    let elapsed = t0.elapsed().as_secs_f64() - sampling;
    let s1 = ftl.stats();
    let user = (s1.user_blocks_written - s0.user_blocks_written) as f64;
    let data = (s1.data_blocks_written - s0.data_blocks_written) as f64;
    let meta = (s1.meta_blocks_written - s0.meta_blocks_written) as f64;
    let mut rbuf = vec![0u8; bs];
    let t1 = Instant::now();
    for _ in 0..a.reads() {
        ftl.read(rng.gen_range(0..n), &mut rbuf).expect("read");
    }
    let read_iops = a.reads() as f64 / t1.elapsed().as_secs_f64();
    let meta_zones = ftl.meta_zones();
    let out = Outcome {
        waf: data / user,
        waf_total: (data + meta) / user,
        map_bytes_per_block: ftl.map_bytes_per_block(),
        write_iops: meas as f64 / elapsed,
        read_iops,
        gc_seconds: s1.gc_seconds - s0.gc_seconds,
        user_waits: s1.user_waits - s0.user_waits,
        op_effective: invalid_sum / samples.max(1) as f64 / n as f64,
        logical: n,
        op_device: device_blocks as f64 / n as f64 - 1.0,
        meta_zones,
    };
    drop(ftl);
    out
}

fn main() {
    let a = Args::parse();
    let mut results = Vec::new();
    let want = |w: &str| a.only.as_deref().is_none_or(|o| w.starts_with(o));
    let base = FtlConfig {
        write_mode: a.mode,
        hot_threshold: a.hot_threshold,
        gc_streams: a.gc_streams,
        ..FtlConfig::default()
    };
    let mut seed = 1u64;
    let emit = |results: &mut Vec<serde_json::Value>, v: serde_json::Value| {
        eprintln!("{v}");
        results.push(v);
    };
    if want("uniform") {
        for op in [0.07, 0.10, 0.20, 0.28] {
            let limit = greedy_waf(op);
            for &policy in &a.policies {
                let streams = if policy == VictimPolicy::Greedy {
                    StreamLayout::Single
                } else {
                    StreamLayout::Separated
                };
                let c = FtlConfig { op, policy, streams, ..base.clone() };
                seed += 1;
                let o = run(Workload::Uniform, c, &a, seed);
                emit(
                    &mut results,
                    serde_json::json!({
                        "workload": "uniform",
                        "op": op,
                        "policy": policy.name(),
                        "streams": format!("{streams:?}").to_lowercase(),
                        "mode": format!("{:?}", a.mode).to_lowercase(),
                        "gc_streams": a.gc_streams,
                        "waf": o.waf,
                        "waf_total": o.waf_total,
                        "greedy_analytic": limit,
                        "waf_vs_analytic": o.waf / limit,
                        "op_effective": o.op_effective,
                        "greedy_analytic_at_effective_op": greedy_waf(o.op_effective),
                        "waf_vs_analytic_at_effective_op": o.waf / greedy_waf(o.op_effective),
                        "map_bytes_per_block": o.map_bytes_per_block,
                        "write_iops": o.write_iops,
                        "read_iops": o.read_iops,
                        "gc_seconds": o.gc_seconds,
                        "user_waits": o.user_waits,
                        "logical_blocks": o.logical,
                        "op_device": o.op_device,
                        "meta_zones": o.meta_zones,
                    }),
                );
            }
        }
    }
    if want("hot-cold") {
        for (writes, data) in [(0.9, 0.1), (0.8, 0.2)] {
            let op = 0.20;
            let w = Workload::HotCold { writes, data };
            let (oracle, hot_share) = two_pool_oracle(writes, data, op);
            let mut single_greedy = None;
            for (policy, streams) in std::iter::once((VictimPolicy::Greedy, StreamLayout::Single))
                .chain(a.policies.iter().map(|&p| (p, StreamLayout::Separated)))
            {
                let c = FtlConfig { op, policy, streams, ..base.clone() };
                seed += 1;
                let o = run(w, c, &a, seed);
                if streams == StreamLayout::Single {
                    single_greedy = Some(o.waf);
                }
                let sg = single_greedy.unwrap_or(o.waf);
                emit(
                    &mut results,
                    serde_json::json!({
                        "workload": w.name(),
                        "op": op,
                        "policy": policy.name(),
                        "streams": format!("{streams:?}").to_lowercase(),
                        "mode": format!("{:?}", a.mode).to_lowercase(),
                        "gc_streams": a.gc_streams,
                        "waf": o.waf,
                        "waf_total": o.waf_total,
                        "op_effective": o.op_effective,
                        "oracle_two_pool": oracle,
                        "oracle_two_pool_at_effective_op": two_pool_oracle(writes, data, o.op_effective).0,
                        "waf_vs_oracle_at_effective_op": o.waf / two_pool_oracle(writes, data, o.op_effective).0,
                        "oracle_hot_spare_share": hot_share,
                        "waf_vs_oracle": o.waf / oracle,
                        "single_log_greedy_waf": sg,
                        "reduction_vs_single_log_greedy": 1.0 - o.waf / sg,
                        "map_bytes_per_block": o.map_bytes_per_block,
                        "write_iops": o.write_iops,
                        "read_iops": o.read_iops,
                        "gc_seconds": o.gc_seconds,
                        "user_waits": o.user_waits,
                        "logical_blocks": o.logical,
                        "op_device": o.op_device,
                        "meta_zones": o.meta_zones,
                    }),
                );
            }
        }
    }
    if want("threads") {
        for mode in [WriteMode::Write, WriteMode::Append] {
            for (threads, blocks) in [(4u64, 1u64), (4, 16)] {
                let o = run_threads(mode, threads, blocks, &a);
                emit(
                    &mut results,
                    serde_json::json!({
                        "workload": format!("uniform-{threads}-threads-{}k", blocks * 4),
                        "op": 0.20,
                        "policy": VictimPolicy::default().name(),
                        "streams": "separated",
                        "mode": format!("{mode:?}").to_lowercase(),
                        "heads_per_stream": o.heads,
                        "waf": o.waf,
                        "map_bytes_per_block": o.map_bytes_per_block,
                        "write_iops": o.write_iops,
                        "read_iops": o.read_iops,
                        "op_effective": o.op_effective,
                    }),
                );
            }
        }
    }
    println!("{}", serde_json::to_string_pretty(&results).expect("json"));
}

struct ThreadsOutcome {
    heads: u32,
    waf: f64,
    map_bytes_per_block: f64,
    write_iops: f64,
    read_iops: f64,
    op_effective: f64,
}

/// `threads` writers of `blocks`-block random writes (and then readers),
/// plain writes (one open zone per writer and stream) or appends (shared
/// open zones).
fn run_threads(mode: WriteMode, threads: u64, blocks: u64, a: &Args) -> ThreadsOutcome {
    let heads = if mode == WriteMode::Write { threads as u32 } else { 1 };
    let config = FtlConfig {
        op: 0.20,
        write_mode: mode,
        heads_per_stream: heads,
        hot_threshold: a.hot_threshold,
        gc_streams: a.gc_streams,
        ..FtlConfig::default()
    };
    let dev = zns_device::open(URI).expect(URI);
    let ftl = std::sync::Arc::new(Ftl::format(dev, config).expect("format"));
    let bs = ftl.block_size() as usize;
    let n = ftl.capacity_blocks();
    let big = vec![0x11u8; 256 * bs];
    let mut l = 0;
    while l < n {
        let k = 256.min(n - l);
        ftl.write(l, &big[..k as usize * bs]).expect("fill");
        l += k;
    }
    let phase = |total: u64, write: bool, seed: u64| -> f64 {
        let per = total / threads;
        let t0 = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let ftl = std::sync::Arc::clone(&ftl);
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed * 100 + t);
                    let mut buf = vec![0x33u8; blocks as usize * bs];
                    for _ in 0..per / blocks {
                        let lba = rng.gen_range(0..=n - blocks);
                        if write {
                            ftl.write(lba, &buf).expect("write");
                        } else {
                            ftl.read(lba, &mut buf).expect("read");
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("worker");
        }
        (per / blocks * threads) as f64 / t0.elapsed().as_secs_f64()
    };
    phase((a.warmup() * n as f64) as u64, true, 1);
    let s0 = ftl.stats();
    let write_iops = phase((a.measure() * n as f64) as u64, true, 2);
    let s1 = ftl.stats();
    let read_iops = phase(a.reads() * blocks, false, 3);
    let user = (s1.user_blocks_written - s0.user_blocks_written) as f64;
    ThreadsOutcome {
        heads,
        waf: (s1.data_blocks_written - s0.data_blocks_written) as f64 / user,
        map_bytes_per_block: ftl.map_bytes_per_block(),
        write_iops,
        read_iops,
        op_effective: s1.invalid_blocks as f64 / n as f64,
    }
}
