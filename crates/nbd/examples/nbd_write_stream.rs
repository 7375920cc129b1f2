//! Sequential NBD write throughput against `qemu-nbd`, both servers on the
//! same disk in the same run, printed as JSON (progress on stderr).
//!
//! For every state, request size and connection count, each server gets a
//! fresh target in one temporary directory (`--dir`, default the system's
//! temp directory, so both live on the same file system):
//! - `qemu-nbd` serving a sparse raw file (`--cache=writeback
//!   --aio=threads --shared=8`: a volatile page cache that `NBD_CMD_FLUSH`
//!   turns into `fdatasync`, as the FTL's emulated device does), as large
//!   as the FTL's export;
//! - `zns-nbd` in this process, over the FTL freshly formatted on a
//!   file-backed emulated device (`zns emu create` of the `small` profile:
//!   960 MiB of zones, 16 bytes of metadata a block, an 837 MiB export),
//!   the FTL's defaults (`--heads N` sets `heads_per_stream`).
//!
//! The state (`--state`): `fresh` targets are empty; `full` ones have had
//! every block written and flushed, so the stream overwrites, and on the
//! FTL every zone it fills needs one reclaimed (garbage collection).
//!
//! Then `--size` bytes (default 256 MiB) are written once, sequentially,
//! with no flush until the end and one flush then (timed in), by one or
//! both clients:
//! - `nbdcopy` (libnbd; the external judge), copying a file of random
//!   bytes in `/dev/shm` with `--connections=N --threads=N
//!   --request-size=S --flush`, its default queue (16 MiB in flight);
//! - [`zns_nbd::NbdClient`] from this process, the range cut into `N`
//!   contiguous slices, one connection each, pipelined to 16 MiB in
//!   flight per connection.
//!
//! `sync(1)` runs before every measurement so writeback left by the last
//! one does not slow the next. The FTL's counters over the stream (device
//! flushes, each an `fdatasync` of the image; writers that waited for a
//! free zone; zones garbage collection reclaimed and the seconds it took)
//! are reported for each run; `ratio_zns_to_qemu` compares the medians of
//! `--repeat` runs.
//!
//! ```text
//! cargo run --release -p zns-nbd --example nbd_write_stream -- \
//!     [--size MIB] [--conns 1,4] [--request-kib 1024,4096] \
//!     [--client nbdcopy,ours] [--state fresh,full] [--repeat N] \
//!     [--heads N] [--dir PATH]
//! ```

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::{RngCore, SeedableRng};
use serde_json::{json, Value};
use zns_emulator::image::DeviceImage;
use zns_emulator::profile::Profile;
use zns_ftl::{BlockDevice, Ftl, FtlConfig};
use zns_nbd::wire::cmd;
use zns_nbd::{Export, NbdClient, NbdServer, ServerConfig};

const MIB: u64 = 1 << 20;
/// Bytes in flight per connection for our client (nbdcopy's default
/// `--queue-size`).
const IN_FLIGHT: u64 = 16 * MIB;

/// Sequential NBD write throughput, `zns-nbd` on the FTL against
/// `qemu-nbd`; prints JSON (progress on stderr).
#[derive(Debug, Parser)]
struct Args {
    /// MiB written by each run.
    #[arg(long, value_name = "MIB", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..))]
    size: u64,
    /// Connection counts, one run each.
    #[arg(long, value_name = "N,N", value_delimiter = ',', default_value = "1,4",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    conns: Vec<usize>,
    /// Request sizes in KiB, one run each.
    #[arg(long = "request-kib", value_name = "KIB,KIB", value_delimiter = ',',
          default_value = "1024,4096", value_parser = clap::value_parser!(u64).range(1..))]
    request_kib: Vec<u64>,
    /// Clients, one run each: `nbdcopy` (libnbd) and `ours` (`NbdClient`).
    #[arg(long = "client", value_name = "NAME,NAME", value_delimiter = ',',
          value_parser = ["nbdcopy", "ours"], default_value = "nbdcopy,ours")]
    clients: Vec<String>,
    /// Runs of each case; the median is reported (0 counts as 1).
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: usize,
    /// Where the targets are made (default the system's temp directory).
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Target states, one run each: `fresh` (empty) and `full` (every block
    /// written and flushed first).
    #[arg(long = "state", value_name = "STATE,STATE", value_delimiter = ',',
          value_parser = ["fresh", "full"], default_value = "fresh,full")]
    states: Vec<String>,
    /// `FtlConfig::heads_per_stream`: open zones per user stream, so
    /// writers on as many connections each have their own.
    #[arg(long, value_name = "N", default_value_t = FtlConfig::default().heads_per_stream)]
    heads: u32,
}

fn main() {
    let o = Args::parse();
    let size = o.size * MIB;
    let requests: Vec<u64> = o.request_kib.iter().map(|k| k << 10).collect();
    let repeat = o.repeat.max(1);
    let tmp = match &o.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("a temporary directory");
    let dir = tmp.path();
    let have_nbdcopy = tool("nbdcopy");
    let have_qemu = tool("qemu-nbd");
    if !have_qemu {
        eprintln!("qemu-nbd not found: the reference is skipped");
    }
    // The source nbdcopy copies: random bytes, in RAM where possible so
    // reading it costs no disk.
    let shm = Path::new("/dev/shm");
    let src_dir = if shm.is_dir() { shm } else { dir };
    let source = src_dir.join(format!("znskit-nbd-write-src-{}.raw", std::process::id()));
    let _source_guard = Removed(source.clone());
    let payload = random_bytes(size);
    std::fs::write(&source, &payload).expect("write the source file");

    // The FTL's exposed size, which qemu-nbd's file copies.
    let export = {
        let (image, ftl) = ftl_image(dir, o.heads);
        let bytes = ftl.capacity_bytes();
        drop(ftl.close());
        std::fs::remove_file(image).unwrap();
        bytes
    };
    let mut runs = Vec::new();
    for state in &o.states {
        for &req in &requests {
            for &conns in &o.conns {
                for client in &o.clients {
                    if client == "nbdcopy" && !have_nbdcopy {
                        eprintln!("nbdcopy not found: its runs are skipped");
                        continue;
                    }
                    let mut qemu = Vec::new();
                    let mut ours = Vec::new();
                    for rep in 0..repeat {
                        eprintln!(
                            "[{state}, {client}] {} KiB requests, {conns} connection(s), run {}",
                            req >> 10,
                            rep + 1
                        );
                        let w = Writer {
                            client,
                            req,
                            conns,
                            size,
                            source: &source,
                            payload: &payload,
                            full: state == "full",
                        };
                        if have_qemu {
                            qemu.push(measure_qemu(dir, &w, export));
                        }
                        ours.push(measure_ours(dir, &w, o.heads));
                    }
                    let (q, z) = (median(&qemu), median(&ours));
                    let ratio = match (&q, &z) {
                        (Some(q), Some(z)) => json!(mib_s(z) / mib_s(q)),
                        _ => Value::Null,
                    };
                    eprintln!(
                        "  qemu-nbd {:.0} MiB/s, zns-nbd {:.0} MiB/s, ratio {ratio}",
                        q.as_ref().map(mib_s).unwrap_or(0.0),
                        z.as_ref().map(mib_s).unwrap_or(0.0)
                    );
                    runs.push(json!({
                        "state": state,
                        "client": client,
                        "request_bytes": req,
                        "connections": conns,
                        "qemu_nbd": q,
                        "zns_nbd": z,
                        "ratio_zns_to_qemu": ratio,
                        "all_runs": { "qemu_nbd": qemu, "zns_nbd": ours },
                    }));
                }
            }
        }
    }
    let out = json!({
        "benchmark": "nbd-write-stream",
        "bytes": size,
        "dir": dir.display().to_string(),
        "repeat": repeat,
        "method": "a new target per run (full: every block written and flushed first); \
                   sequential writes, no flush until one at the end (timed in); median of the \
                   repeats",
        "zns_device": "emu:file (profile small), FtlConfig::default() but heads_per_stream",
        "heads_per_stream": o.heads,
        "qemu_nbd": "raw sparse file, --cache=writeback --aio=threads",
        "runs": runs,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

/// One measurement's job: which client writes how.
struct Writer<'a> {
    client: &'a str,
    req: u64,
    conns: usize,
    size: u64,
    source: &'a Path,
    payload: &'a [u8],
    /// Every block of the target written (and flushed) before the run:
    /// the stream overwrites, and the FTL must collect a zone for every
    /// zone it fills.
    full: bool,
}

impl Writer<'_> {
    /// Writes the whole stream to `addr` and flushes; seconds taken.
    fn run(&self, addr: SocketAddr) -> f64 {
        if self.client == "nbdcopy" {
            return self.nbdcopy(addr);
        }
        self.ours(addr)
    }

    fn nbdcopy(&self, addr: SocketAddr) -> f64 {
        let uri = format!("nbd://{}:{}/bench", addr.ip(), addr.port());
        let t = Instant::now();
        let status = Command::new("nbdcopy")
            .arg(format!("--connections={}", self.conns))
            .arg(format!("--threads={}", self.conns))
            .arg(format!("--request-size={}", self.req))
            .args(["--flush", "--sparse=0", "--no-extents"])
            .arg(self.source)
            .arg(&uri)
            .stdout(Stdio::null())
            .status()
            .expect("run nbdcopy");
        let secs = t.elapsed().as_secs_f64();
        assert!(status.success(), "nbdcopy to {uri} failed: {status}");
        secs
    }

    /// `conns` connections, each writing its contiguous slice, pipelined.
    fn ours(&self, addr: SocketAddr) -> f64 {
        let slice = (self.size / self.conns as u64).next_multiple_of(self.req);
        let depth = (IN_FLIGHT / self.req).max(1) as usize;
        let mut clients: Vec<NbdClient> =
            (0..self.conns).map(|_| NbdClient::connect(addr, "bench").unwrap()).collect();
        let t = Instant::now();
        std::thread::scope(|s| {
            for (i, c) in clients.iter_mut().enumerate() {
                let start = i as u64 * slice;
                let end = (start + slice).min(self.size);
                let (req, payload) = (self.req, self.payload);
                s.spawn(move || write_slice(c, payload, start, end, req, depth));
            }
        });
        // One flush at the end, on one connection (CAN_MULTI_CONN: it
        // covers every connection's completed writes).
        clients[0].flush().unwrap();
        let secs = t.elapsed().as_secs_f64();
        for c in clients {
            c.disconnect().unwrap();
        }
        secs
    }
}

/// Writes bytes `start..end` of `payload` at the same offsets, `req`
/// bytes a request, `depth` requests in flight.
fn write_slice(c: &mut NbdClient, payload: &[u8], start: u64, end: u64, req: u64, depth: usize) {
    let mut off = start;
    let mut outstanding = 0usize;
    while off < end || outstanding > 0 {
        while off < end && outstanding < depth {
            let n = req.min(end - off);
            let body = &payload[off as usize..(off + n) as usize];
            c.send(cmd::WRITE, 0, off, n as u32, body).unwrap();
            off += n;
            outstanding += 1;
        }
        c.flush_requests().unwrap();
        let (_, errno) = c.recv(None).unwrap();
        assert_eq!(errno, 0, "a write failed");
        outstanding -= 1;
    }
}

/// Bytes of the FTL's export on the `small` profile: the qemu-nbd file
/// gets the same size, so "full" means the same amount of data.
fn ftl_image(dir: &Path, heads: u32) -> (PathBuf, Ftl) {
    let image = dir.join("ftl.img");
    DeviceImage::create(&image, &Profile::by_name("small").unwrap()).unwrap();
    let uri = format!("emu:file={}", image.display());
    let config = FtlConfig { heads_per_stream: heads, ..FtlConfig::default() };
    let ftl = Ftl::format(zns_device::open(&uri).unwrap(), config).unwrap();
    (image, ftl)
}

fn measure_qemu(dir: &Path, w: &Writer<'_>, export: u64) -> Value {
    let file = dir.join("qemu.raw");
    let f = std::fs::File::create(&file).unwrap();
    f.set_len(export).unwrap();
    if w.full {
        use std::os::unix::fs::FileExt;
        let chunk = &w.payload[..(4 * MIB).min(w.size) as usize];
        let mut off = 0;
        while off < export {
            let n = (chunk.len() as u64).min(export - off) as usize;
            f.write_all_at(&chunk[..n], off).unwrap();
            off += n as u64;
        }
        f.sync_data().unwrap();
    }
    drop(f);
    sync();
    let q = QemuNbd::start(&file).expect("qemu-nbd started");
    let secs = w.run(q.addr);
    drop(q);
    std::fs::remove_file(&file).unwrap();
    result(w.size, secs, json!({}))
}

fn measure_ours(dir: &Path, w: &Writer<'_>, heads: u32) -> Value {
    let (image, ftl) = ftl_image(dir, heads);
    assert!(ftl.capacity_bytes() >= w.size, "the FTL exposes less than --size");
    if w.full {
        // Every logical block once, then a flush: the device is full and
        // the stream's every new zone needs garbage collection first.
        let chunk = &w.payload[..(4 * MIB).min(w.size) as usize];
        let (bs, blocks) = (ftl.block_size() as u64, ftl.capacity_blocks());
        let mut lba = 0;
        while lba < blocks {
            let n = (chunk.len() as u64 / bs).min(blocks - lba);
            ftl.write(lba, &chunk[..(n * bs) as usize]).unwrap();
            lba += n;
        }
        ftl.flush().unwrap();
    }
    let ftl = Arc::new(ftl);
    let dev: Arc<dyn BlockDevice> = ftl.clone();
    let server =
        NbdServer::bind("127.0.0.1:0", vec![Export::new("bench", dev)], ServerConfig::default())
            .unwrap();
    sync();
    let before = ftl.stats();
    let secs = w.run(server.local_addr());
    let after = ftl.stats();
    server.stop();
    let extra = json!({
        "device_flushes": after.device_flushes - before.device_flushes,
        "user_flushes": after.user_flushes - before.user_flushes,
        "checkpoints": after.checkpoints - before.checkpoints,
        "meta_blocks_written": after.meta_blocks_written - before.meta_blocks_written,
        "user_waits": after.user_waits - before.user_waits,
        "gc_victims": after.gc_victims - before.gc_victims,
        "gc_blocks_copied": after.gc_blocks_copied - before.gc_blocks_copied,
        "gc_seconds": after.gc_seconds - before.gc_seconds,
    });
    drop(Arc::try_unwrap(ftl).expect("the server let go of the FTL").close());
    std::fs::remove_file(&image).unwrap();
    result(w.size, secs, extra)
}

fn result(bytes: u64, secs: f64, mut extra: Value) -> Value {
    let m = extra.as_object_mut().unwrap();
    m.insert("seconds".into(), json!(secs));
    m.insert("mib_s".into(), json!(bytes as f64 / MIB as f64 / secs));
    extra
}

fn mib_s(v: &Value) -> f64 {
    v["mib_s"].as_f64().unwrap()
}

/// The run with the median throughput.
fn median(runs: &[Value]) -> Option<Value> {
    let mut v: Vec<&Value> = runs.iter().collect();
    v.sort_by(|a, b| mib_s(a).total_cmp(&mib_s(b)));
    v.get(v.len() / 2).map(|x| (*x).clone())
}

fn random_bytes(n: u64) -> Vec<u8> {
    let mut v = vec![0u8; n as usize];
    rand::rngs::SmallRng::seed_from_u64(0x6e62_6477).fill_bytes(&mut v);
    v
}

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes back every dirty page (`sync(1)`), so one run's writeback does
/// not land in the next.
fn sync() {
    let _ = Command::new("sync").status();
}

/// A file removed when dropped.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `qemu-nbd` serving `file` on a free loopback port.
struct QemuNbd {
    child: Child,
    addr: SocketAddr,
}

impl QemuNbd {
    fn start(file: &Path) -> Option<QemuNbd> {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            l.local_addr().ok()?.port()
        };
        let child = Command::new("qemu-nbd")
            .args(["--format=raw", "--export-name=bench", "--bind=127.0.0.1"])
            .arg(format!("--port={port}"))
            .args(["--persistent", "--shared=8", "--cache=writeback", "--aio=threads"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let q = QemuNbd { child, addr };
        for _ in 0..200 {
            if TcpStream::connect(addr).is_ok() {
                return Some(q);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }
}

impl Drop for QemuNbd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
