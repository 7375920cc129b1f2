//! NVMe/TCP over loopback beside the in-process path, printed as JSON:
//! 4 KiB random reads at queue depth 1 (latency) and 32 (IOPS, one
//! queue), on a data-less emulator (`emu:small,media=null`) and one with
//! data (`emu:small`), each reached
//! - directly (`zns_device::open`, the emulator through the driver), and
//! - through znskit's initiator (`tcp:`) and znskit's target in the same
//!   process, with the target's connections sleeping in blocking reads,
//!   with them polling their sockets for 100 µs first (`--poll-us`), and
//!   with the initiator's queues polling too (`poll_us=100`);
//!
//! and the floor the kernel sets: the same bytes ping-ponged over
//! loopback TCP by two threads that do nothing else (`tcp_floor`; at
//! QD 32 once with the answers' bytes in cache and once taken from random
//! places in as much memory as the devices' data, `qd32_spread`, the
//! floor for reads with data); with the target's CPU time per I/O (its connection threads' user and
//! system time from `/proc/self/task`, over the measured window).
//!
//! The target runs the device in its connection threads, so its CPU time
//! includes the device path's own: the driver and the emulator (which
//! does in software what a drive's controller does in hardware, such as
//! the copy of a read's data out of its media). Where the same run
//! measured the device in process (one thread, always busy, so its CPU
//! per read at QD 32 is 1/IOPS), each NVMe/TCP row's `export_cpu_us_per_io`
//! is the target's CPU per read less that: what the target and NVMe/TCP
//! cost above the device path.
//!
//! ```text
//! cargo run --release -p zns-nvmf --example nvmf_loopback [-- --seconds 2]
//!     [--device emu:small] [--path in-process --path "nvme-tcp loopback, both poll"]
//!     [--rounds 5]
//! ```

mod common;

use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use zns_device::{Data, IoBuffer, ZoneOp, ZoneQueue, ZonedDevice};
use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};

use common::{floor_qd32, lba, prepare, readable_bytes, QD, REQUEST, RESPONSE};

const NQN: &str = "nqn.2026-11.io.znskit:bench";

/// The NVMe/TCP paths measured: name, target's poll (µs), initiator's
/// poll (µs).
const PATHS: [(&str, u64, u32); 3] = [
    ("nvme-tcp loopback", 0, 0),
    ("nvme-tcp loopback, target polls", 100, 0),
    ("nvme-tcp loopback, both poll", 100, 100),
];

/// The paths measured (see the module's documentation).
#[derive(Debug, Parser)]
struct Args {
    /// Seconds of each measured window.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Measure this device instead of the two.
    #[arg(long = "device", value_name = "URI")]
    only_device: Option<String>,
    /// Measure only these paths: "in-process", "floor" or an NVMe/TCP
    /// path's name (repeatable).
    #[arg(long = "path", value_name = "NAME")]
    only_path: Vec<String>,
    /// Measure everything this many times in turn and add `summary`: each
    /// NVMe/TCP row's target CPU per read over its round's floors, as
    /// medians (a machine whose speed drifts between minutes moves the
    /// target and the floor of one round together).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
}

fn main() {
    let args = Args::parse();
    let mut rounds: Vec<(Vec<Value>, Option<Value>)> =
        (0..args.rounds).map(|_| round(&args)).collect();
    let mut out = json!({
        "benchmark": "nvmf-loopback",
        "block_size": 4096,
        "queue_depth_iops": QD,
        "seconds_per_phase": args.seconds,
    });
    if rounds.len() == 1 {
        let (rows, floor) = rounds.pop().expect("one round");
        out["rows"] = json!(rows);
        out["tcp_floor"] = json!(floor);
    } else {
        out["summary"] = summary(&rounds);
        let all: Vec<Value> = rounds
            .into_iter()
            .map(|(rows, floor)| json!({ "rows": rows, "tcp_floor": floor }))
            .collect();
        out["rounds"] = json!(all);
    }
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

/// One measurement of every device and path asked for: the rows, and the
/// floor (if asked for).
fn round(args: &Args) -> (Vec<Value>, Option<Value>) {
    let wanted = |path: &str| args.only_path.is_empty() || args.only_path.iter().any(|p| p == path);
    let dur = Duration::from_secs_f64(args.seconds);
    let mut rows = Vec::new();
    let devices = match &args.only_device {
        Some(d) => vec![d.as_str()],
        None => vec!["emu:small,media=null", "emu:small"],
    };
    // The largest working set the devices' reads touch, for the floor.
    let mut store = 0;
    for uri in devices {
        // The device path's CPU per read at QD 32, where measured.
        let mut device_us = None;
        if wanted("in-process") {
            let direct = zns_device::open(uri).unwrap();
            let span = prepare(direct.as_ref());
            store = store.max(readable_bytes(direct.info()));
            let row = run("in-process", uri, direct.as_ref(), span, dur, None);
            device_us = row["qd32"]["iops"].as_f64().filter(|i| *i > 0.0).map(|i| 1e6 / i);
            rows.push(row);
        }
        for (path, target_poll_us, host_poll_us) in PATHS {
            if wanted(path) {
                rows.push(through_target(
                    uri,
                    path,
                    target_poll_us,
                    host_poll_us,
                    dur,
                    device_us,
                    &mut store,
                ));
            }
        }
    }
    if store == 0 {
        // Only the floor: the working set of the default device with data.
        store = readable_bytes(zns_device::open("emu:small").unwrap().info());
    }
    (rows, wanted("floor").then(|| tcp_floor(dur, store)))
}

/// One NVMe/TCP row: `uri` served by a target in this process, read
/// through `tcp:`; `device_us` is the device path's CPU per read in
/// process, if measured. Grows `store` to the device's readable bytes.
fn through_target(
    uri: &str,
    path: &str,
    target_poll_us: u64,
    host_poll_us: u32,
    dur: Duration,
    device_us: Option<f64>,
    store: &mut usize,
) -> Value {
    let dev = zns_device::open(uri).unwrap();
    let span = prepare(dev.as_ref());
    *store = (*store).max(readable_bytes(dev.info()));
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let poll = Duration::from_micros(target_poll_us);
    let config = TargetConfig { poll, ..Default::default() };
    let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
    let mut remote_uri = format!("tcp:{}/{NQN}", target.local_addr());
    if host_poll_us > 0 {
        remote_uri += &format!(",poll_us={host_poll_us}");
    }
    let remote = zns_device::open(&remote_uri).unwrap();
    let mut row = run(path, uri, remote.as_ref(), span, dur, Some(()));
    let target_us = row["qd32"]["target_cpu_us_per_io"].as_f64();
    if let (Some(t), Some(d)) = (target_us, device_us) {
        row["qd32"]["export_cpu_us_per_io"] = json!(t - d);
    }
    drop(remote);
    target.stop();
    row
}

/// Per NVMe/TCP row (device and path), over the rounds: the median target
/// CPU per read at QD 32, the median floors (in cache and spread), and the
/// median of each round's target CPU over that round's floors.
fn summary(rounds: &[(Vec<Value>, Option<Value>)]) -> Value {
    let mut keys: Vec<(String, String)> = Vec::new();
    for (rows, _) in rounds {
        for r in rows.iter().filter(|r| r["qd32"]["target_cpu_us_per_io"].is_number()) {
            let key = (
                r["device"].as_str().unwrap_or("").to_string(),
                r["path"].as_str().unwrap_or("").to_string(),
            );
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let floor_of = |floor: &Option<Value>, which: &str| {
        floor.as_ref().and_then(|f| f[which]["server_cpu_us_per_io"].as_f64())
    };
    let rows: Vec<Value> = keys
        .iter()
        .map(|(device, path)| {
            let (mut target, mut over, mut over_spread) = (Vec::new(), Vec::new(), Vec::new());
            for (rows, floor) in rounds {
                let Some(t) = rows
                    .iter()
                    .find(|r| r["device"] == device.as_str() && r["path"] == path.as_str())
                    .and_then(|r| r["qd32"]["target_cpu_us_per_io"].as_f64())
                else {
                    continue;
                };
                target.push(t);
                over.extend(floor_of(floor, "qd32").map(|f| t / f));
                over_spread.extend(floor_of(floor, "qd32_spread").map(|f| t / f));
            }
            json!({
                "device": device,
                "path": path,
                "target_cpu_us_per_io_median": median(&mut target),
                "over_floor_median": median(&mut over),
                "over_spread_floor_median": median(&mut over_spread),
            })
        })
        .collect();
    let mut hot: Vec<f64> = rounds.iter().filter_map(|(_, f)| floor_of(f, "qd32")).collect();
    let mut spread: Vec<f64> =
        rounds.iter().filter_map(|(_, f)| floor_of(f, "qd32_spread")).collect();
    json!({
        "rounds": rounds.len(),
        "floor_qd32_cpu_us_per_io_median": median(&mut hot),
        "floor_qd32_spread_cpu_us_per_io_median": median(&mut spread),
        "rows": rows,
    })
}

/// The median of `v` (the mean of the middle two for an even count), or
/// `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The kernel's share of NVMe/TCP reads over loopback: the same bytes
/// (a 72-byte capsule out; a C2HData PDU of 4 KiB and a response capsule
/// back) moved by two threads that do nothing else. At QD 1 both spin on
/// non-blocking sockets; at QD 32 the answering side sleeps in blocking
/// reads and answers each batch of requests with one send, as `zns serve`
/// does, and its CPU time per request is measured, once with the answers'
/// bytes always in cache (`qd32`) and once with each taken from a random
/// 4 KiB of a store as large as the devices' data (`qd32_spread`, the
/// floor for reads with data). What NVMe/TCP adds above these figures is
/// znskit's own.
fn tcp_floor(dur: Duration, store: usize) -> Value {
    json!({
        "qd1": floor_qd1(dur),
        "qd32": floor_qd32(dur, 0),
        "qd32_spread": floor_qd32(dur, store),
    })
}

/// Reads exactly `buf.len()` bytes from a non-blocking socket, spinning;
/// false at end of stream.
fn spin_read(s: &mut std::net::TcpStream, buf: &mut [u8]) -> bool {
    use std::io::{ErrorKind, Read};
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return false,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) => panic!("{e}"),
        }
    }
    true
}

fn floor_qd1(dur: Duration) -> Value {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let (mut req, resp) = ([0u8; REQUEST], vec![0u8; RESPONSE]);
        while spin_read(&mut s, &mut req) {
            s.write_all(&resp).unwrap();
        }
    });
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_nonblocking(true).unwrap();
    let (req, mut resp) = ([0u8; REQUEST], vec![0u8; RESPONSE]);
    let mut h = Histogram::<u64>::new(3).unwrap();
    let start = Instant::now();
    while start.elapsed() < dur {
        let t = Instant::now();
        s.write_all(&req).unwrap();
        assert!(spin_read(&mut s, &mut resp));
        h.record(t.elapsed().as_nanos() as u64).unwrap();
    }
    drop(s);
    echo.join().unwrap();
    json!({
        "ops": h.len(),
        "mean_us": h.mean() / 1e3,
        "p50_us": h.value_at_quantile(0.5) as f64 / 1e3,
        "p99_us": h.value_at_quantile(0.99) as f64 / 1e3,
    })
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
    let cpu = || target.map(|_| target_cpu_ns());
    let (iops, qd32_ops, qd32_cpu) = qd32(q.as_mut(), dev, &info, span, dur, &mut rng, &cpu);
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

/// Reads at QD 32 for `dur` after a warm-up of [`WARM_UP`] (the target
/// makes its buffers for the 31 more reads in flight than at QD 1 then):
/// IOPS, reads and the target's CPU time (`cpu`, in ns) over the
/// measured window.
fn qd32(
    q: &mut dyn ZoneQueue,
    dev: &dyn ZonedDevice,
    info: &zns_device::DeviceInfo,
    span: u64,
    dur: Duration,
    rng: &mut u64,
    cpu: &dyn Fn() -> Option<u64>,
) -> (f64, u64, Option<u64>) {
    let mut spare: Vec<IoBuffer> =
        (0..QD).map(|_| dev.alloc(info.block_size as usize).unwrap()).collect();
    for i in 0..QD {
        let b = spare.pop().unwrap();
        q.submit(ZoneOp::Read { lba: lba(rng, info, span) }, Some(b), i as u64).unwrap();
    }
    q.ring();
    let mut back = Vec::with_capacity(QD);
    let mut done = 0u64;
    let mut window = |q: &mut dyn ZoneQueue, dur: Duration| {
        let (start, first) = (Instant::now(), done);
        while start.elapsed() < dur {
            q.poll(QD, &mut |c| {
                c.result.as_ref().unwrap();
                back.push(c.buffer.unwrap());
            });
            for b in back.drain(..) {
                done += 1;
                q.submit(ZoneOp::Read { lba: lba(rng, info, span) }, Some(b), done).unwrap();
            }
            q.ring();
        }
        (start.elapsed().as_secs_f64(), done - first)
    };
    window(q, WARM_UP);
    let cpu0 = cpu();
    let (elapsed, reads) = window(q, dur);
    let spent = cpu0.and_then(|c| Some(cpu()?.saturating_sub(c)));
    while q.outstanding() > 0 {
        q.poll(QD, &mut |_| {});
    }
    (reads as f64 / elapsed, reads, spent)
}

/// QD 32 runs this long before its window opens.
const WARM_UP: Duration = Duration::from_millis(200);

/// User plus system time of the target's connection threads, in ns.
fn target_cpu_ns() -> u64 {
    let tick_ns = 1e9 / 100.0; // USER_HZ
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !(comm.starts_with("nvmf-worker") || comm.starts_with("nvmf-poll")) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(device: &str, path: &str, cpu: Option<f64>) -> Value {
        json!({ "device": device, "path": path, "qd32": { "target_cpu_us_per_io": cpu } })
    }

    fn floor(hot: f64, spread: f64) -> Option<Value> {
        Some(json!({
            "qd32": { "server_cpu_us_per_io": hot },
            "qd32_spread": { "server_cpu_us_per_io": spread },
        }))
    }

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn summary_takes_each_rounds_ratio_to_its_own_floor() {
        // The machine ran twice as slow in the second round: the target
        // and the floor moved together, so the ratios agree.
        let rounds = vec![
            (vec![row("d", "in-process", None), row("d", "tcp", Some(1.0))], floor(0.5, 0.8)),
            (vec![row("d", "in-process", None), row("d", "tcp", Some(2.0))], floor(1.0, 1.6)),
            (vec![row("d", "tcp", Some(1.2))], floor(0.6, 1.0)),
        ];
        let s = summary(&rounds);
        assert_eq!(s["rounds"], 3);
        assert_eq!(s["floor_qd32_cpu_us_per_io_median"], 0.6);
        assert_eq!(s["floor_qd32_spread_cpu_us_per_io_median"], 1.0);
        // Only rows with a target's CPU are summed up.
        let rows = s["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["path"], "tcp");
        assert_eq!(rows[0]["target_cpu_us_per_io_median"], 1.2);
        assert_eq!(rows[0]["over_floor_median"], 2.0);
        assert_eq!(rows[0]["over_spread_floor_median"], 1.25);
    }

    #[test]
    fn summary_without_a_floor_has_no_ratios() {
        let s = summary(&[(vec![row("d", "tcp", Some(1.0))], None)]);
        assert!(s["rows"][0]["over_floor_median"].is_null());
        assert_eq!(s["rows"][0]["target_cpu_us_per_io_median"], 1.0);
    }
}
