//! NBD over loopback: 4 KiB random reads and writes at queue depth 1
//! (latency) and 32 (IOPS, one connection pipelining), printed as JSON,
//! for three servers in one run:
//! - `zns-nbd` over the FTL on `emu:small` (data in RAM): what a user gets;
//! - `zns-nbd` over a RAM block device: the server and protocol alone;
//! - `qemu-nbd` serving a raw file on tmpfs (`/dev/shm`), the reference
//!   peer (skipped, and said so, when qemu-nbd is missing).
//!
//! All three are driven by the same client ([`zns_nbd::NbdClient`]) over
//! a 256 MiB region, written once before the measurement so reads hit
//! mapped data. Writes use no FUA; each phase ends with a flush (timed
//! apart).
//!
//! ```text
//! cargo run --release -p zns-nbd --example nbd_loopback [-- --seconds 2]
//! ```

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, MemoryBlockDevice};
use zns_nbd::wire::cmd;
use zns_nbd::{Export, NbdClient, NbdServer, ServerConfig};

const BS: usize = 4096;
const REGION: u64 = 256 << 20;
const QD: usize = 32;

/// NBD over loopback: 4 KiB random reads and writes at QD 1 and 32 on
/// three servers; prints JSON.
#[derive(Debug, Parser)]
struct Args {
    /// Seconds of each measured phase.
    #[arg(long, value_name = "N", default_value_t = 2.0)]
    seconds: f64,
}

fn main() {
    let args = Args::parse();
    let dur = Duration::from_secs_f64(args.seconds);
    let mut results = Vec::new();

    let dev = zns_device::open("emu:small").expect("emu:small");
    let ftl: Arc<dyn BlockDevice> = Arc::new(Ftl::format(dev, FtlConfig::default()).unwrap());
    results.push(measure_ours("zns-nbd (FTL on emu:small)", ftl, dur));
    let ram: Arc<dyn BlockDevice> = Arc::new(MemoryBlockDevice::new(BS as u32, REGION / BS as u64));
    results.push(measure_ours("zns-nbd (RAM block device)", ram, dur));
    match QemuNbd::start() {
        Some(q) => results.push(measure("qemu-nbd (raw file on tmpfs)", q.addr, "bench", dur)),
        None => eprintln!("qemu-nbd not found or /dev/shm missing: the reference is skipped"),
    }
    let out = json!({
        "benchmark": "nbd-loopback",
        "block_size": BS,
        "region_bytes": REGION,
        "queue_depth_iops": QD,
        "seconds_per_phase": args.seconds,
        "servers": results,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

fn measure_ours(label: &str, dev: Arc<dyn BlockDevice>, dur: Duration) -> Value {
    let server =
        NbdServer::bind("127.0.0.1:0", vec![Export::new("bench", dev)], ServerConfig::default())
            .unwrap();
    let r = measure(label, server.local_addr(), "bench", dur);
    server.stop();
    r
}

/// `qemu-nbd` on a sparse raw file in /dev/shm, on a free port.
struct QemuNbd {
    child: Child,
    addr: SocketAddr,
    file: std::path::PathBuf,
}

impl QemuNbd {
    fn start() -> Option<QemuNbd> {
        let name = format!("/dev/shm/znskit-nbd-bench-{}.raw", std::process::id());
        let file = std::path::PathBuf::from(name);
        std::fs::File::create(&file).ok()?.set_len(REGION).ok()?;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            l.local_addr().ok()?.port()
        };
        let child = Command::new("qemu-nbd")
            .args(["-f", "raw", "-x", "bench", "-b", "127.0.0.1", "-p", &port.to_string()])
            .args(["--persistent", "--shared=8", "--aio=threads", "--cache=writeback"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let q = QemuNbd { child, addr, file };
        for _ in 0..100 {
            if TcpStream::connect(addr).is_ok() {
                return Some(q);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for QemuNbd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

fn measure(label: &str, addr: SocketAddr, export: &str, dur: Duration) -> Value {
    let mut c = NbdClient::connect(addr, export).unwrap();
    let blocks = REGION.min(c.size()) / BS as u64;
    // Fill the region once so reads find data.
    let chunk = vec![0x5Au8; 1 << 20];
    let mut off = 0;
    while off < blocks * BS as u64 {
        c.write(off, &chunk, false).unwrap();
        off += chunk.len() as u64;
    }
    c.flush().unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut phases = serde_json::Map::new();
    for (name, kind) in [("randread", cmd::READ), ("randwrite", cmd::WRITE)] {
        let qd1 = qd1(&mut c, &mut rng, blocks, kind, dur);
        let t = Instant::now();
        c.flush().unwrap();
        let flush_us = t.elapsed().as_secs_f64() * 1e6;
        let iops = pipelined(&mut c, &mut rng, blocks, kind, dur);
        c.flush().unwrap();
        phases.insert(
            name.into(),
            json!({ "qd1": qd1, "qd32_iops": iops.round(), "flush_after_qd1_us": flush_us }),
        );
    }
    c.disconnect().unwrap();
    json!({ "server": label, "export_bytes": blocks * BS as u64, "phases": phases })
}

fn qd1(c: &mut NbdClient, rng: &mut SmallRng, blocks: u64, kind: u16, dur: Duration) -> Value {
    let mut h = Histogram::<u64>::new(3).unwrap();
    let mut buf = vec![0xA5u8; BS];
    let start = Instant::now();
    while start.elapsed() < dur {
        let off = rng.gen_range(0..blocks) * BS as u64;
        let t = Instant::now();
        if kind == cmd::READ {
            c.read(off, &mut buf).unwrap();
        } else {
            c.write(off, &buf, false).unwrap();
        }
        h.record(t.elapsed().as_nanos() as u64).unwrap();
    }
    json!({
        "ops": h.len(),
        "iops": (h.len() as f64 / start.elapsed().as_secs_f64()).round(),
        "mean_us": h.mean() / 1e3,
        "p50_us": h.value_at_quantile(0.5) as f64 / 1e3,
        "p99_us": h.value_at_quantile(0.99) as f64 / 1e3,
    })
}

/// Keeps `QD` requests in flight on one connection for `dur`; IOPS.
fn pipelined(c: &mut NbdClient, rng: &mut SmallRng, blocks: u64, kind: u16, dur: Duration) -> f64 {
    let payload = vec![0x3Cu8; BS];
    let mut data = vec![0u8; BS];
    let send = |c: &mut NbdClient, rng: &mut SmallRng| {
        let off = rng.gen_range(0..blocks) * BS as u64;
        let body: &[u8] = if kind == cmd::WRITE { &payload } else { &[] };
        c.send(kind, 0, off, BS as u32, body).unwrap();
    };
    for _ in 0..QD {
        send(c, rng);
    }
    c.flush_requests().unwrap();
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < dur {
        let sink = if kind == cmd::READ { Some(&mut data[..]) } else { None };
        let (_, errno) = c.recv(sink).unwrap();
        assert_eq!(errno, 0);
        done += 1;
        send(c, rng);
        if done.is_multiple_of(8) {
            c.flush_requests().unwrap();
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    c.flush_requests().unwrap();
    for _ in 0..QD {
        let sink = if kind == cmd::READ { Some(&mut data[..]) } else { None };
        c.recv(sink).unwrap();
    }
    done as f64 / elapsed
}
