//! NVMe/TCP over loopback beside the in-process path, printed as JSON:
//! 4 KiB random reads at queue depth 1 (latency) and 32 (IOPS, one
//! queue), on a data-less emulator (`emu:small,media=null`) and one with
//! data (`emu:small`), each reached
//! - directly (`zns_device::open`, the emulator through the driver), and
//! - through znskit's initiator (`tcp:`) and znskit's target in the same
//!   process, with the target's connections sleeping in blocking reads
//!   and with them polling their sockets for 100 µs first (`--poll-us`);
//!
//! with the target's CPU time per I/O (its connection threads' user and
//! system time from `/proc/self/task`, over the measured window).
//!
//! ```text
//! cargo run --release -p zns-nvmf --example nvmf_loopback [-- --seconds 2]
//! ```

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};
use zns_device::{Data, IoBuffer, ZoneOp, ZoneQueue, ZonedDevice};
use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};

const QD: usize = 32;
const NQN: &str = "nqn.2026-11.io.znskit:bench";

fn main() {
    let mut seconds = 2.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => seconds = args.next().and_then(|v| v.parse().ok()).expect("--seconds N"),
            other => panic!("unknown argument {other:?} (--seconds N)"),
        }
    }
    let dur = Duration::from_secs_f64(seconds);
    let mut rows = Vec::new();
    for uri in ["emu:small,media=null", "emu:small"] {
        let direct = zns_device::open(uri).unwrap();
        let span = prepare(direct.as_ref());
        rows.push(run("in-process", uri, direct.as_ref(), span, dur, None));
        drop(direct);

        for (path, poll_us) in [("nvme-tcp loopback", 0), ("nvme-tcp loopback, target polls", 100)]
        {
            let dev = zns_device::open(uri).unwrap();
            let span = prepare(dev.as_ref());
            let sub = Subsystem::new(NQN, vec![dev]).unwrap();
            let poll = Duration::from_micros(poll_us);
            let config = TargetConfig { poll, ..Default::default() };
            let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
            let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
            rows.push(run(path, uri, remote.as_ref(), span, dur, Some(())));
            drop(remote);
            target.stop();
        }
    }
    let out = json!({
        "benchmark": "nvmf-loopback",
        "block_size": 4096,
        "queue_depth_iops": QD,
        "seconds_per_phase": seconds,
        "rows": rows,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

/// Writes the first zones so reads find data; returns the readable span
/// in blocks.
fn prepare(dev: &dyn ZonedDevice) -> u64 {
    let info = dev.info().clone();
    let mut q = dev.queue(4).unwrap();
    let chunk = (info.mdts_bytes / info.block_size as usize).clamp(1, 64);
    let mut buf = dev.alloc(chunk * info.block_size as usize).unwrap();
    buf.fill(0xA5);
    let zones = 8.min(info.zone_count);
    for z in 0..zones {
        let start = z * info.zone_size;
        let mut lba = start;
        while lba + (chunk as u64) <= start + info.zone_capacity {
            q.execute(&ZoneOp::Write { lba, fua: false }, Data::ToDevice(&buf)).unwrap();
            lba += chunk as u64;
        }
    }
    zones * info.zone_size
}

/// A random readable LBA (inside the written part of a zone).
fn lba(rng: &mut u64, info: &zns_device::DeviceInfo, span: u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let zone = (*rng % (span / info.zone_size)) * info.zone_size;
    zone + (*rng >> 20) % (info.zone_capacity - 64)
}

fn run(
    path: &str,
    uri: &str,
    dev: &dyn ZonedDevice,
    span: u64,
    dur: Duration,
    target: Option<()>,
) -> Value {
    let info = dev.info().clone();
    let mut q = dev.queue(QD).unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut buf = dev.alloc(info.block_size as usize).unwrap();
    let mut h = Histogram::<u64>::new(3).unwrap();
    let cpu0 = target.map(|_| target_cpu_ns());
    let start = Instant::now();
    while start.elapsed() < dur {
        let op = ZoneOp::Read { lba: lba(&mut rng, &info, span) };
        let t = Instant::now();
        q.execute(&op, Data::FromDevice(&mut buf)).unwrap();
        h.record(t.elapsed().as_nanos() as u64).unwrap();
    }
    let qd1_ops = h.len();
    let qd1_cpu = cpu0.map(|c| target_cpu_ns().saturating_sub(c));
    let cpu1 = target.map(|_| target_cpu_ns());
    let (iops, qd32_ops) = qd32(q.as_mut(), dev, &info, span, dur, &mut rng);
    let qd32_cpu = cpu1.map(|c| target_cpu_ns().saturating_sub(c));
    let per_io = |cpu: Option<u64>, ops: u64| cpu.map(|c| c as f64 / ops.max(1) as f64 / 1e3);
    json!({
        "path": path,
        "device": uri,
        "qd1": {
            "ops": qd1_ops,
            "mean_us": h.mean() / 1e3,
            "p50_us": h.value_at_quantile(0.5) as f64 / 1e3,
            "p99_us": h.value_at_quantile(0.99) as f64 / 1e3,
            "target_cpu_us_per_io": per_io(qd1_cpu, qd1_ops),
        },
        "qd32": {
            "iops": iops.round(),
            "target_cpu_us_per_io": per_io(qd32_cpu, qd32_ops),
        },
    })
}

fn qd32(
    q: &mut dyn ZoneQueue,
    dev: &dyn ZonedDevice,
    info: &zns_device::DeviceInfo,
    span: u64,
    dur: Duration,
    rng: &mut u64,
) -> (f64, u64) {
    let mut spare: Vec<IoBuffer> =
        (0..QD).map(|_| dev.alloc(info.block_size as usize).unwrap()).collect();
    for i in 0..QD {
        let b = spare.pop().unwrap();
        q.submit(ZoneOp::Read { lba: lba(rng, info, span) }, Some(b), i as u64).unwrap();
    }
    q.ring();
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < dur {
        let mut back = Vec::new();
        q.poll(QD, &mut |c| {
            c.result.as_ref().unwrap();
            back.push(c.buffer.unwrap());
        });
        for b in back {
            done += 1;
            q.submit(ZoneOp::Read { lba: lba(rng, info, span) }, Some(b), done).unwrap();
        }
        q.ring();
    }
    let elapsed = start.elapsed().as_secs_f64();
    while q.outstanding() > 0 {
        q.poll(QD, &mut |_| {});
    }
    (done as f64 / elapsed, done)
}

/// User plus system time of the target's connection threads, in ns.
fn target_cpu_ns() -> u64 {
    let tick_ns = 1e9 / 100.0; // USER_HZ
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("nvmf-conn") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the command name: utime and stime are 14th and 15th.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        total += (ticks as f64 * tick_ns) as u64;
    }
    total
}
