//! The NVMe/TCP target's resource use against four goals, printed as one
//! JSON object (progress goes to stderr):
//!
//! 1. **Idle connections** (`idle_connections`): 10,000 idle connections
//!    held in under 200 MiB of RSS. The example re-executes itself with
//!    `--serve-target` to run a target alone in a child process
//!    (`emu:small,media=null`, `max_connections` = N + 16, defaults
//!    otherwise). The parent opens N raw connections one after another,
//!    each doing ICReq/ICResp and an admin Fabrics Connect with KATO 0
//!    (no Keep Alive timer, so the target keeps the connection), then
//!    leaves them idle. The child's `VmRSS`, `RssAnon` and `Threads` (from
//!    `/proc/<pid>/status`) and its open descriptors (`/proc/<pid>/fd`) are
//!    read before the first connection and 0.5 s after the last; per
//!    connection is the difference over the connections held; the RSS
//!    after is split by kind of mapping (`/proc/<pid>/smaps`: 2 MiB
//!    anonymous mappings are thread stacks, other anonymous memory the
//!    heap and malloc's arenas, the rest files). Kernel
//!    memory (socket buffers, thread kernel stacks) is not in RSS; the
//!    system-wide change of `KernelStack` and `Slab` in `/proc/meminfo` is
//!    reported beside it as an indication. `RLIMIT_NOFILE` is raised as
//!    far as allowed in both processes (the hard limit too, when the
//!    process may); where a connection fails (no descriptor, no thread),
//!    the count reached and the error are reported. Met: 10,000 held and
//!    `VmRSS` after < 200 MiB.
//! 2. **Stalled clients** (`stalled_clients`): a good client, znskit's
//!    `tcp:` initiator on a target in this process (`emu:small` with its
//!    first zones written, `stall_timeout` 600 s so nobody is timed out
//!    during the run), reads 4 KiB at random at queue depth 1 for
//!    `--seconds`: first alone (`baseline`), then while K raw clients
//!    connect and each send the first 64 bytes of their 128-byte ICReq and
//!    stop (`while_arriving`), then with all K of them stalled
//!    (`with_stalled`). Latency is per read, wall clock, in an HDR
//!    histogram. Met (K ≥ 1,000): with them stalled, no read took more
//!    than 10 ms longer than the baseline's median, i.e.
//!    `with_stalled.max` ≤ `baseline.p50` + 10 ms.
//! 3. **CPU per read** (`cpu_per_read`): 4 KiB random reads at queue depth
//!    32 on one `tcp:` queue for `--seconds`, on `emu:small,media=null`
//!    (no data) and on `emu:small` (data), target in this process with
//!    the default configuration (no polling). Target CPU is the time on a
//!    CPU (`/proc/self/task/<tid>/schedstat`, ns) of the target's
//!    `nvmf-worker-*` and `nvmf-poll` threads over the measured window (after a 0.2 s
//!    warm-up), divided by the reads completed; the time of any other
//!    thread but the benchmark's own (the initiator's) is reported as
//!    `other_threads_cpu_us_per_io`. Beside it, the kernel's floor: the
//!    same bytes (a 72-byte capsule in, 4 KiB + 48 bytes out) answered by
//!    a thread that sleeps in blocking reads and answers each batch with
//!    one send, as `nvmf_loopback`'s `tcp_floor.qd32` does, with the
//!    answers' bytes always in cache (`kernel_floor_qd32`) and taken from
//!    random places in a store as large as the devices' data
//!    (`kernel_floor_qd32_spread`, the floor beside reads with data). Met: target
//!    CPU ≤ 1.0 µs per read on both devices. The emulated device runs in
//!    the target's threads (a doorbell executes the commands), so its own
//!    work is in that figure: the same reads straight on the device (one
//!    thread, the device API, before the target starts) give
//!    `device_alone_cpu_us_per_io`, and `export_cpu_us_per_io` is the
//!    target's CPU less that: what serving NVMe/TCP costs, as it would in
//!    front of a real drive (`export_met` when ≤ 1.0 µs on both).
//!    `lower_bound_us_per_io` is the in-cache kernel floor plus the device
//!    alone: what a target in this process pays before any NVMe/TCP work
//!    of its own, and `target_over_lower_bound_us_per_io` the rest (the
//!    goal is out of reach on a machine where the lower bound is itself
//!    near 1.0 µs).
//!    `--workers N` sets the target's worker threads for this goal
//!    (default the target's own default).
//! 4. NBD: not measured here.
//!
//! Where fewer than 10,000 connections could be held, the RSS at 10,000
//! is projected linearly (`rss_mib_projected_at_10000`); `met` stays
//! false. `--goals 13` runs only goals 1 and 3, and so on; `--device URI`
//! (repeatable) measures goal 3 on these devices instead of the two.
//!
//! ```text
//! cargo run --release -p zns-nvmf --example nvmf_resources [-- --idle 10000]
//!     [--stalled 1000] [--seconds 2] [--goals 123] [--device URI]...
//! ```

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use zns_device::{Data, IoBuffer, ZoneOp, ZonedDevice};
use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};

use common::{floor_qd32, lba, prepare, readable_bytes, QD};
use zns_spec::fabrics::{ConnectCommand, ConnectData};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{CommonHeader, Digests, IcReq, PduType, IC_PDU_SIZE};
use zns_spec::CompletionEntry;

const NQN: &str = "nqn.2026-11.io.znskit:resources";
const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa";
const MIB: f64 = 1024.0 * 1024.0;

/// The goals' measurements (see the module's documentation).
#[derive(Debug, Parser)]
struct Args {
    /// Idle connections to hold (goal 1).
    #[arg(long, default_value_t = 10_000)]
    idle: usize,
    /// Stalled clients beside the good one (goal 2).
    #[arg(long, default_value_t = 1_000)]
    stalled: usize,
    /// Seconds of each measured window.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Which goals to run: digits 1 to 4.
    #[arg(long, default_value = "1234")]
    goals: String,
    /// Devices of goal 3 (repeatable; default the data-less and the data
    /// emulator).
    #[arg(long = "device", value_name = "URI")]
    devices: Vec<String>,
    /// The target's worker threads for goal 3 (default the target's own).
    #[arg(long)]
    workers: Option<usize>,
    /// Run a target alone with room for N connections (the child process
    /// goal 1 measures).
    #[arg(long, value_name = "N", hide = true)]
    serve_target: Option<usize>,
}

fn main() {
    let args = Args::parse();
    if let Some(n) = args.serve_target {
        return serve_target(n);
    }
    let Args { idle, stalled, seconds, goals, mut devices, .. } = args;
    let workers = args.workers.unwrap_or(TargetConfig::default().workers);
    let dur = Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let nofile = raise_nofile(idle as u64 + stalled as u64 + 256);
    let run = |g: char| goals.contains(g);
    let idle = run('1').then(|| idle_connections(idle));
    let stalled = run('2').then(|| stalled_clients(stalled, dur));
    if devices.is_empty() {
        devices = vec!["emu:small,media=null".into(), "emu:small".into()];
    }
    let cpu = run('3').then(|| cpu_per_read(&devices, dur, workers));
    let waiting = run('4').then(|| cpu_while_waiting(dur));
    let out = json!({
        "benchmark": "nvmf-resources",
        "host": host(),
        "loadavg_at_start": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        "nofile_limit_parent": nofile,
        "idle_connections": idle,
        "stalled_clients": stalled,
        "cpu_per_read": cpu,
        "cpu_while_commands_wait": waiting,
        "nbd": Value::Null,
        "run_seconds": started.elapsed().as_secs_f64().round(),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

// ---------------------------------------------------------------- goal 1

/// The child: a target alone, its port on stdout, until stdin closes.
fn serve_target(max_connections: usize) {
    raise_nofile(3 * max_connections as u64 + 256);
    let dev = zns_device::open("emu:small,media=null").unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let config = TargetConfig { max_connections, ..Default::default() };
    let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
    println!("{}", target.local_addr().port());
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    eprintln!("target child: {:?}", target.stats());
    // Not stopped: the parent has measured what it wanted.
    std::process::exit(0);
}

/// What is measured of the child at one moment.
struct Snapshot {
    rss_kib: u64,
    anon_kib: u64,
    threads: u64,
    fds: u64,
    kernel_stack_kib: u64,
    slab_kib: u64,
}

fn snapshot(pid: u32) -> Snapshot {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    Snapshot {
        rss_kib: field(&status, "VmRSS:"),
        anon_kib: field(&status, "RssAnon:"),
        threads: field(&status, "Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0),
        kernel_stack_kib: field(&meminfo, "KernelStack:"),
        slab_kib: field(&meminfo, "Slab:"),
    }
}

/// RSS by kind of mapping, in KiB, from `/proc/<pid>/smaps`: thread
/// stacks (anonymous read-write mappings of exactly 2 MiB, Rust's default
/// stack), other anonymous memory (the heap and malloc's arenas), and
/// files (the program and its libraries).
fn rss_by_kind(pid: u32) -> (u64, u64, u64) {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut stacks, mut anon, mut file) = (0, 0, 0);
    let (mut kind, mut size) = (0u8, 0u64);
    for l in smaps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"Size:") => size = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0),
            Some(&"Rss:") => {
                let rss: u64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
                match kind {
                    0 if size == 2048 => stacks += rss,
                    0 => anon += rss,
                    _ => file += rss,
                }
            }
            Some(first) if first.contains('-') && !first.ends_with(':') => {
                let path = f.get(5).copied().unwrap_or("");
                kind = if path.is_empty() || path.starts_with('[') { 0 } else { 1 };
            }
            _ => {}
        }
    }
    (stacks, anon, file)
}

/// The first number after `key` at the start of a line.
fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A raw host's admin queue: ICReq, then Connect with KATO 0.
fn raw_admin(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(&IcReq { pfv: 0, hpda: 0, digests: Digests::default(), maxr2t: 0 }.to_bytes())?;
    let mut icresp = [0u8; IC_PDU_SIZE];
    s.read_exact(&mut icresp)?;
    let mut sqe = ConnectCommand { recfmt: 0, qid: 0, sqsize: 31, cattr: 0, kato_ms: 0 }.to_sqe();
    sqe.set_cid(1);
    let data = ConnectData {
        host_id: [0xAA; 16],
        cntlid: ConnectData::ANY_CONTROLLER,
        subnqn: NQN.into(),
        hostnqn: HOSTNQN.into(),
    }
    .to_bytes();
    SglDescriptor::in_capsule(0, data.len() as u32).store_in(&mut sqe);
    let mut pdu = CommonHeader::new(PduType::CapsuleCmd, Digests::default(), data.len(), 0)
        .to_bytes()
        .to_vec();
    pdu.extend_from_slice(&sqe.to_bytes());
    pdu.extend_from_slice(&data);
    s.write_all(&pdu)?;
    // The response capsule: 8-byte common header, 16-byte completion.
    let mut resp = [0u8; 24];
    s.read_exact(&mut resp)?;
    let cqe = CompletionEntry::from_bytes(resp[8..24].try_into().unwrap());
    if resp[0] != PduType::CapsuleResp.raw() || !cqe.status().is_success() {
        return Err(std::io::Error::other(format!("Connect failed: {:?}", cqe.status())));
    }
    Ok(s)
}

fn idle_connections(n: usize) -> Value {
    eprintln!("idle connections: {n} to a target in a child process");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--serve-target", &(n + 16).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", line.trim()).parse().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = snapshot(pid);
    let child_nofile = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .ok()
        .and_then(|l| {
            let l = l.lines().find(|l| l.starts_with("Max open files"))?.to_string();
            let v: Vec<&str> = l.split_whitespace().collect();
            Some(json!({ "soft": v.get(3)?.parse::<u64>().ok()?, "hard": v.get(4)?.parse::<u64>().ok()? }))
        });
    let mut held = Vec::with_capacity(n);
    let mut failed = None;
    let start = Instant::now();
    for i in 0..n {
        match raw_admin(addr) {
            Ok(s) => held.push(s),
            Err(e) => {
                eprintln!("  connection {i} failed: {e}");
                failed = Some(json!({ "index": i, "error": e.to_string() }));
                break;
            }
        }
        if (i + 1) % 2000 == 0 {
            eprintln!("  {} connected, child RSS {} KiB", i + 1, snapshot(pid).rss_kib);
        }
    }
    let connect_s = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let after = snapshot(pid);
    let (stacks_kib, heap_kib, file_kib) = rss_by_kind(pid);
    let alive = matches!(child.try_wait(), Ok(None));
    let count = held.len();
    let k = count.max(1) as f64;
    let per = |a: u64, b: u64| (a as f64 - b as f64) / k;
    let diff_mib = |a: u64, b: u64| ((a as f64 - b as f64) / 1024.0 * 10.0).round() / 10.0;
    eprintln!(
        "  held {} in {connect_s:.1} s: RSS {} -> {} KiB, threads {} -> {}",
        count, before.rss_kib, after.rss_kib, before.threads, after.threads
    );
    // Closed: how much the target gives back once its threads are gone.
    drop(held);
    let wait = Instant::now();
    while snapshot(pid).threads > before.threads && wait.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    let closed = snapshot(pid);
    drop(child.stdin.take());
    let _ = child.wait();
    let reached = if alive { count } else { 0 };
    let rss_after_mib = after.rss_kib as f64 / 1024.0;
    json!({
        "goal": "10000 idle connections (ICReq + admin Connect, KATO 0) in < 200 MiB RSS",
        "device": "emu:small,media=null",
        "requested": n,
        "held": reached,
        "failed": failed,
        "child_alive": alive,
        "child_nofile_limit": child_nofile,
        "connect_seconds": (connect_s * 100.0).round() / 100.0,
        "rss_mib_before": (before.rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        "rss_mib_after": (rss_after_mib * 10.0).round() / 10.0,
        "rss_anon_mib_after": (after.anon_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        "rss_mib_after_by_kind": {
            "thread_stacks": (stacks_kib as f64 / 1024.0 * 10.0).round() / 10.0,
            "heap_and_arenas": (heap_kib as f64 / 1024.0 * 10.0).round() / 10.0,
            "files": (file_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        },
        "rss_mib_projected_at_10000": ((before.rss_kib as f64 + per(after.rss_kib, before.rss_kib) * 10_000.0) / 1024.0).round(),
        "stack_rss_kib_per_connection": (stacks_kib as f64 / k * 10.0).round() / 10.0,
        "rss_kib_per_connection": (per(after.rss_kib, before.rss_kib) * 10.0).round() / 10.0,
        "threads_before": before.threads,
        "threads_after": after.threads,
        "fds_before": before.fds,
        "fds_after": after.fds,
        "fds_per_connection": (per(after.fds, before.fds) * 100.0).round() / 100.0,
        "system_kernel_stack_mib_delta": diff_mib(after.kernel_stack_kib, before.kernel_stack_kib),
        "system_slab_mib_delta": diff_mib(after.slab_kib, before.slab_kib),
        "rss_mib_after_close": (closed.rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        "threads_after_close": closed.threads,
        "met": reached >= 10_000 && rss_after_mib < 200.0,
    })
}

// ---------------------------------------------------------------- goal 2

/// A client that connects, sends the first half of its ICReq and stops.
fn stalled_client(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    let req = IcReq { pfv: 0, hpda: 0, digests: Digests::default(), maxr2t: 0 }.to_bytes();
    s.write_all(&req[..IC_PDU_SIZE / 2])?;
    Ok(s)
}

fn latency(h: &Histogram<u64>) -> Value {
    let us = |v: u64| (v as f64 / 1e1).round() / 1e2;
    json!({
        "reads": h.len(),
        "p50_us": us(h.value_at_quantile(0.5)),
        "p99_us": us(h.value_at_quantile(0.99)),
        "max_us": us(h.max()),
    })
}

fn stalled_clients(k: usize, dur: Duration) -> Value {
    eprintln!("stalled clients: {k}, good client at QD 1");
    let uri = "emu:small";
    let dev = zns_device::open(uri).unwrap();
    let span = prepare(dev.as_ref());
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let config = TargetConfig {
        max_connections: k + 64,
        stall_timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
    let addr = target.local_addr();
    let good = zns_device::open(&format!("tcp:{addr}/{NQN}")).unwrap();
    let info = good.info().clone();
    let mut q = good.queue(1).unwrap();
    let mut buf = good.alloc(info.block_size as usize).unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut qd1 = |d: Duration| {
        let mut h = Histogram::<u64>::new(3).unwrap();
        let start = Instant::now();
        while start.elapsed() < d {
            let op = ZoneOp::Read { lba: lba(&mut rng, &info, span) };
            let t = Instant::now();
            q.execute(&op, Data::FromDevice(&mut buf)).unwrap();
            h.record(t.elapsed().as_nanos() as u64).unwrap();
        }
        h
    };
    qd1(Duration::from_millis(200));
    let baseline = qd1(dur);
    // The stalled clients arrive, one after another, during the reads.
    let before = target.stats().connections;
    let arriving = std::thread::spawn(move || {
        let mut v = Vec::with_capacity(k);
        for _ in 0..k {
            match stalled_client(addr) {
                Ok(s) => v.push(s),
                Err(e) => {
                    eprintln!("  stalled client {} failed: {e}", v.len());
                    break;
                }
            }
        }
        v
    });
    let while_arriving = qd1(dur);
    let stalled = arriving.join().unwrap();
    let arrived_in_window = target.stats().connections - before;
    let wait = Instant::now();
    while target.stats().connections < before + stalled.len() as u64
        && wait.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let threads = field(&std::fs::read_to_string("/proc/self/status").unwrap(), "Threads:");
    let with_stalled = qd1(dur);
    // A new host while they are stalled.
    let t = Instant::now();
    let newcomer = zns_device::open(&format!("tcp:{addr}/{NQN}")).unwrap();
    let newcomer_open_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(newcomer);
    let stats = target.stats();
    eprintln!("  target {stats:?}, {threads} threads in this process");
    let count = stalled.len();
    drop(q);
    drop(good);
    drop(stalled);
    target.stop();
    let base_p50 = baseline.value_at_quantile(0.5);
    let delta = |a: u64, b: u64| ((a as f64 - b as f64) / 1e1).round() / 1e2;
    json!({
        "goal": "1000 stalled clients do not delay a good client's 4 KiB read by more than 10 ms",
        "device": uri,
        "stalled": count,
        "stalled_kind": "connected, sent 64 of the ICReq's 128 bytes, stopped",
        "stall_timeout_s": 600,
        "target_timeouts_during_run": stats.timeouts,
        "process_threads_with_stalled": threads,
        "baseline": latency(&baseline),
        "while_arriving": latency(&while_arriving),
        "while_arriving_accepted": arrived_in_window,
        "with_stalled": latency(&with_stalled),
        "delta_p99_us": delta(with_stalled.value_at_quantile(0.99), baseline.value_at_quantile(0.99)),
        "delta_max_us": delta(with_stalled.max(), baseline.max()),
        "worst_delay_over_baseline_p50_us": delta(with_stalled.max(), base_p50),
        "new_client_open_ms_with_stalled": (newcomer_open_ms * 100.0).round() / 100.0,
        "met": count >= 1000 && with_stalled.max() <= base_p50 + 10_000_000,
    })
}

// ---------------------------------------------------------------- goal 3

/// Time on a CPU of each thread of this process, in ns, with its name.
fn threads_cpu() -> HashMap<u64, (String, u64)> {
    let mut m = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return m };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else { continue };
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        m.insert(tid, (comm.trim().to_string(), ns));
    }
    m
}

fn cpu_per_read(devices: &[String], dur: Duration, workers: usize) -> Value {
    let me = unsafe { libc::gettid() } as u64;
    let mut rows = Vec::new();
    let (mut met, mut export_met) = (true, true);
    let mut store = 0;
    for uri in devices {
        eprintln!("CPU per read: {uri}, QD {QD}, the device alone");
        let dev = zns_device::open(uri).unwrap();
        let span = prepare(dev.as_ref());
        store = store.max(readable_bytes(dev.info()));
        let alone = read_window(dev.as_ref(), span, dur);
        let device = alone.cpu_of(|tid, _| tid == me) as f64 / alone.reads.max(1) as f64;
        eprintln!("CPU per read: {uri}, QD {QD}, through the target");
        let sub = Subsystem::new(NQN, vec![dev]).unwrap();
        let config = TargetConfig { workers, ..TargetConfig::default() };
        let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
        let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
        let w = read_window(remote.as_ref(), span, dur);
        let is_target =
            |name: &str| name.starts_with("nvmf-worker") || name.starts_with("nvmf-poll");
        let conn = w.cpu_of(|_, name| is_target(name));
        let client = w.cpu_of(|tid, _| tid == me);
        let other = w.cpu_of(|tid, name| tid != me && !is_target(name));
        let conn_threads = w.busy_threads(is_target);
        let per = |ns: f64| (ns / w.reads.max(1) as f64 / 1e1).round() / 1e2;
        met &= per(conn as f64) <= 1.0;
        let export = per(conn as f64 - device * w.reads as f64);
        export_met &= export <= 1.0;
        rows.push(json!({
            "device": uri,
            "iops": (w.reads as f64 / w.secs).round(),
            "target_cpu_us_per_io": per(conn as f64),
            "device_alone_cpu_us_per_io": (device / 1e1).round() / 1e2,
            "device_alone_iops": (alone.reads as f64 / alone.secs).round(),
            "export_cpu_us_per_io": export,
            "target_threads_busy": conn_threads,
            "other_threads_cpu_us_per_io": per(other as f64),
            "initiator_thread_cpu_us_per_io": per(client as f64),
        }));
        drop(remote);
        target.stop();
    }
    eprintln!("CPU per read: kernel floor");
    let floor = floor_qd32(dur, 0);
    let floor_us = floor["server_cpu_us_per_io"].as_f64().unwrap_or(f64::NAN);
    for row in &mut rows {
        add_lower_bound(row, floor_us);
    }
    json!({
        "goal": "<= 1.0 us of target CPU per 4 KiB read at QD 32 on one connection",
        "queue_depth": QD,
        "rows": rows,
        "kernel_floor_qd32": floor,
        "kernel_floor_qd32_spread": floor_qd32(dur, store),
        "met": met,
        "export_met": export_met,
    })
}

/// Adds to a row of goal 3 what no target in this process can go below:
/// the kernel's own cost of moving the same bytes (`floor_us`, in cache)
/// plus the device's own work on the same reads (`device_alone`, which for
/// the emulated drive includes its DMA in software), and the target's CPU
/// above that: what NVMe/TCP itself costs.
fn add_lower_bound(row: &mut Value, floor_us: f64) {
    let device = row["device_alone_cpu_us_per_io"].as_f64().unwrap_or(f64::NAN);
    let target = row["target_cpu_us_per_io"].as_f64().unwrap_or(f64::NAN);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    row["lower_bound_us_per_io"] = json!(round(floor_us + device));
    row["target_over_lower_bound_us_per_io"] = json!(round(target - floor_us - device));
}

/// A measured stretch of reads: how many completed, over how long, and
/// every thread's CPU time at its start and end.
struct Window {
    reads: u64,
    secs: f64,
    cpu0: HashMap<u64, (String, u64)>,
    cpu1: HashMap<u64, (String, u64)>,
}

impl Window {
    /// CPU time (ns) of the threads `pick` chooses (by id and name) over
    /// the window.
    fn cpu_of(&self, pick: impl Fn(u64, &str) -> bool) -> u64 {
        self.cpu1
            .iter()
            .filter(|(tid, (name, _))| pick(**tid, name))
            .map(|(tid, (_, ns))| ns - self.cpu0.get(tid).map_or(0, |c| c.1))
            .sum()
    }

    /// How many threads with a name `pick` accepts ran in the window.
    fn busy_threads(&self, pick: impl Fn(&str) -> bool) -> usize {
        self.cpu1
            .iter()
            .filter(|(tid, (name, ns))| pick(name) && *ns > self.cpu0.get(*tid).map_or(0, |c| c.1))
            .count()
    }
}

/// 4 KiB random reads at queue depth [`QD`] on one queue of `dev` (its
/// first `span` blocks) for `dur`, after a 0.2 s warm-up that is not
/// measured.
fn read_window(dev: &dyn ZonedDevice, span: u64, dur: Duration) -> Window {
    let info = dev.info().clone();
    let mut q = dev.queue(QD).unwrap();
    let mut spare: Vec<IoBuffer> =
        (0..QD).map(|_| dev.alloc(info.block_size as usize).unwrap()).collect();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..QD {
        let op = ZoneOp::Read { lba: lba(&mut rng, &info, span) };
        q.submit(op, Some(spare.pop().unwrap()), i as u64).unwrap();
    }
    q.ring();
    let (mut done, mut window) = (0u64, None);
    let mut back = Vec::with_capacity(QD);
    let start = Instant::now();
    while start.elapsed() < dur + Duration::from_millis(200) {
        if window.is_none() && start.elapsed() >= Duration::from_millis(200) {
            window = Some((done, Instant::now(), threads_cpu()));
        }
        q.poll(QD, &mut |c| {
            c.result.as_ref().unwrap();
            back.push(c.buffer.unwrap());
        });
        for b in back.drain(..) {
            done += 1;
            q.submit(ZoneOp::Read { lba: lba(&mut rng, &info, span) }, Some(b), done).unwrap();
        }
        q.ring();
    }
    let (cpu1, t1) = (threads_cpu(), Instant::now());
    let (done0, t0, cpu0) = window.unwrap();
    while q.outstanding() > 0 {
        q.poll(QD, &mut |_| {});
    }
    Window { reads: done - done0, secs: (t1 - t0).as_secs_f64(), cpu0, cpu1 }
}

// ---------------------------------------------------------------- 4

/// The target's CPU, in cores, while its commands wait on a timed device
/// (`emu:zn540` on the real clock, reads of about 70 µs each): a queue
/// with commands in flight and no input looks for their completions; it
/// must not spin a core doing so. Reads at QD 1 and QD 32 through the
/// `tcp:` initiator (which sleeps while it waits), with their latency.
fn cpu_while_waiting(dur: Duration) -> Value {
    let uri = "emu:zn540,clock=real,media=null,zones=16";
    let mut rows = Vec::new();
    // Polling for a second spins through every wait, as queues did before
    // they slept between looks: the comparison in the same run.
    let polls = [("sleeps between looks", 0u64), ("spins (--poll-us 1000000)", 1_000_000)];
    for ((how, poll_us), qd) in polls.into_iter().flat_map(|p| [(p, 1usize), (p, QD)]) {
        eprintln!("CPU while commands wait: {uri}, QD {qd}, {how}");
        let dev = zns_device::open(uri).unwrap();
        let span = prepare(dev.as_ref());
        let sub = Subsystem::new(NQN, vec![dev]).unwrap();
        let config =
            TargetConfig { poll: Duration::from_micros(poll_us), ..TargetConfig::default() };
        let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
        let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
        let info = remote.info().clone();
        let mut q = remote.queue(qd).unwrap();
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut issued: HashMap<u64, Instant> = HashMap::new();
        for i in 0..qd as u64 {
            let b = remote.alloc(info.block_size as usize).unwrap();
            q.submit(ZoneOp::Read { lba: lba(&mut rng, &info, span) }, Some(b), i).unwrap();
            issued.insert(i, Instant::now());
        }
        q.ring();
        let mut hist = Histogram::<u64>::new(3).unwrap();
        let (mut next, mut window) = (qd as u64, None);
        let start = Instant::now();
        while start.elapsed() < dur + Duration::from_millis(200) {
            if window.is_none() && start.elapsed() >= Duration::from_millis(200) {
                window = Some((hist.len(), Instant::now(), threads_cpu()));
                hist.reset();
            }
            let mut back = Vec::new();
            q.poll(qd, &mut |c| {
                c.result.as_ref().unwrap();
                let t = issued.remove(&c.tag).unwrap();
                back.push((c.buffer.unwrap(), t.elapsed()));
            });
            if back.is_empty() {
                // The initiator sleeps: its thread's spinning is not the
                // target's, and would take the target's core.
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            for (b, took) in back {
                hist.record(took.as_nanos() as u64).unwrap();
                q.submit(ZoneOp::Read { lba: lba(&mut rng, &info, span) }, Some(b), next).unwrap();
                issued.insert(next, Instant::now());
                next += 1;
            }
            q.ring();
        }
        let (cpu1, t1) = (threads_cpu(), Instant::now());
        let (_, t0, cpu0) = window.unwrap();
        while q.outstanding() > 0 {
            q.poll(qd, &mut |_| {});
        }
        let conn: u64 = cpu1
            .iter()
            .filter(|(_, (name, _))| {
                name.starts_with("nvmf-worker") || name.starts_with("nvmf-poll")
            })
            .map(|(tid, (_, ns))| ns - cpu0.get(tid).map_or(0, |c| c.1))
            .sum();
        let secs = (t1 - t0).as_secs_f64();
        rows.push(json!({
            "target": how,
            "queue_depth": qd,
            "iops": (hist.len() as f64 / secs).round(),
            "target_cores_busy": (conn as f64 / 1e9 / secs * 1000.0).round() / 1000.0,
            "latency_us": latency(&hist),
        }));
        drop(q);
        drop(remote);
        target.stop();
    }
    json!({
        "device": uri,
        "note": "target CPU in cores while reads wait on a timed device; 1.0 is a spinning core",
        "rows": rows,
    })
}

// ---------------------------------------------------------------- shared

/// Raises `RLIMIT_NOFILE` to `want` (the hard limit too, where the
/// process may); the limits in force after.
fn raise_nofile(want: u64) -> Value {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    let hard_before = r.rlim_max;
    if want > r.rlim_max {
        let up = libc::rlimit { rlim_cur: want, rlim_max: want };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &up) } == 0 {
            r = up;
        }
    }
    if r.rlim_cur < want.min(r.rlim_max) {
        r.rlim_cur = want.min(r.rlim_max);
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    json!({ "wanted": want, "soft": r.rlim_cur, "hard": r.rlim_max, "hard_before": hard_before })
}

fn host() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':'])))
        .unwrap_or("")
        .to_string();
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": format!("{} {}", read("/proc/sys/kernel/ostype"), read("/proc/sys/kernel/osrelease")),
        "cpu": cpu,
        "mem_gib": (field(&read("/proc/meminfo"), "MemTotal:") as f64 * 1024.0 / MIB / 1024.0).round(),
    })
}
