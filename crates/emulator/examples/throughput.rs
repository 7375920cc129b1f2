//! Emulator throughput through the real queue path, against the memory system.
//!
//! Measures on one thread, in one run: 4 KiB reads and writes submitted as
//! SQEs and completed as CQEs with data copied (QD 1 and QD 32), a plain
//! `memcpy` of 4 KiB blocks from random offsets over the same working set,
//! 4 KiB random reads from two device images of the same working set, one
//! with data checksums and one without (in alternating slices, so their
//! ratio is the cost of the checksums), and, when `fio` is installed,
//! fio's psync engine reading 4 KiB at random from a tmpfs file of the
//! same size. Prints one JSON object.
//!
//! The host side is kept as lean as a polled driver's: each batch of
//! submission entries is written with one host-memory access (two at the
//! ring's wrap), the tail doorbell is rung once, the completions are read
//! back with one access and the head doorbell is rung once, so the figures
//! are the emulator's rather than the host loop's.
//!
//! Each figure is the best of ten equal slices of its measuring time (the
//! machine may be busy with other work); the QD 32 reads and the `memcpy`
//! baseline run in alternating slices, so their ratio compares like with
//! like.
//!
//! ```text
//! cargo run --release -p zns-emulator --example throughput [-- --working-set-mib 64 --seconds 2 --image-dir DIR --images-only]
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_emulator::harness::Harness;
use zns_emulator::host::{DmaAllocation, HostMemory, ProcessMemory};
use zns_emulator::image::DeviceImage;
use zns_emulator::media::block_checksum;
use zns_emulator::profile::Profile;
use zns_emulator::{Controller, Emulator, MediaChoice};
use zns_spec::{regs, CompletionEntry, SubmissionEntry};

const BLOCK: usize = 4096;

/// Emulator throughput through the real queue path, against the memory
/// system; prints one JSON object.
#[derive(Debug, Parser)]
struct Args {
    /// MiB of the working set: the device's data read and written, and the
    /// `memcpy` baseline's source.
    #[arg(long = "working-set-mib", value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..))]
    working_set_mib: u64,
    /// Seconds of measuring time per figure (ten slices, the best kept).
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    seconds: f64,
    /// Where the device images are made.
    #[arg(long, value_name = "DIR", default_value_os_t = std::env::temp_dir())]
    image_dir: std::path::PathBuf,
    /// Only the device image reads.
    #[arg(long)]
    images_only: bool,
}

impl Args {
    /// The working set in bytes.
    fn working_set(&self) -> usize {
        (self.working_set_mib << 20) as usize
    }
}

/// A device whose zones are 16 MiB and hold the whole working set.
fn profile(working_set: usize) -> Profile {
    let mut p = Profile::by_name("small").expect("built-in profile");
    let ns = &mut p.namespaces[0];
    ns.metadata_size = 0;
    ns.zone_size = 4096;
    ns.zone_capacity = 4096;
    ns.zones = (working_set / (4096 * BLOCK)).max(1) as u32 + 2;
    ns.max_open = None;
    ns.max_active = None;
    p.controller.max_queue_entries = 1024;
    p
}

fn cmd(op: u8, lba: u64, prp1: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op, 1);
    e.set_cdw10_11(lba);
    e.prp1 = prp1;
    e
}

/// Measuring slices per figure.
const SLICES: u32 = 10;

/// Runs `f(batch_index)` repeatedly for about `secs`; returns operations per second.
fn rate_once(secs: f64, qd: usize, f: &mut impl FnMut(u64)) -> f64 {
    let deadline = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut batches = 0u64;
    while start.elapsed() < deadline {
        for _ in 0..64 {
            f(batches);
            batches += 1;
        }
    }
    (batches as usize * qd) as f64 / start.elapsed().as_secs_f64()
}

/// The best rate of [`SLICES`] slices of `secs` in all: on a shared machine
/// the best slice is the one least disturbed by other work.
fn rate(secs: f64, qd: usize, mut f: impl FnMut(u64)) -> f64 {
    (0..SLICES).map(|_| rate_once(secs / SLICES as f64, qd, &mut f)).fold(0.0, f64::max)
}

/// Like [`rate`] for two workloads at once, in alternating slices, so that
/// both see the same conditions; returns the best rate of each.
fn rate_pair(
    secs: f64,
    (qd_a, mut a): (usize, impl FnMut(u64)),
    (qd_b, mut b): (usize, impl FnMut(u64)),
) -> (f64, f64) {
    let slice = secs / SLICES as f64;
    (0..SLICES).fold((0.0, 0.0), |(best_a, best_b), _| {
        let ra = rate_once(slice, qd_a, &mut a);
        let rb = rate_once(slice, qd_b, &mut b);
        (f64::max(best_a, ra), f64::max(best_b, rb))
    })
}

/// CPU time this thread has run, in nanoseconds (Linux schedstat; 0
/// where it cannot be read).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One workload's best figures over the slices of [`cost_pair`].
#[derive(Clone, Copy)]
struct Cost {
    /// Best operations per second (wall clock).
    rate: f64,
    /// Least CPU nanoseconds per operation: on a loaded machine, what
    /// other work takes from the thread does not count against it.
    cpu_ns: f64,
}

/// Two workloads in alternating slices, like [`rate_pair`], with the CPU
/// time of each slice measured too.
fn cost_pair(
    secs: f64,
    (qd_a, mut a): (usize, impl FnMut(u64)),
    (qd_b, mut b): (usize, impl FnMut(u64)),
) -> (Cost, Cost) {
    let slice = secs / SLICES as f64;
    let once = |qd: usize, f: &mut dyn FnMut(u64)| {
        let (start, cpu) = (Instant::now(), thread_cpu_ns());
        let mut batches = 0u64;
        while start.elapsed() < Duration::from_secs_f64(slice) {
            for _ in 0..64 {
                f(batches);
                batches += 1;
            }
        }
        let ops = (batches as usize * qd) as f64;
        Cost {
            rate: ops / start.elapsed().as_secs_f64(),
            cpu_ns: (thread_cpu_ns() - cpu) as f64 / ops,
        }
    };
    let best = |x: Cost, y: Cost| Cost { rate: x.rate.max(y.rate), cpu_ns: x.cpu_ns.min(y.cpu_ns) };
    let none = Cost { rate: 0.0, cpu_ns: f64::INFINITY };
    (0..SLICES).fold((none, none), |(ba, bb), _| {
        let ca = once(qd_a, &mut a);
        let cb = once(qd_b, &mut b);
        (best(ba, ca), best(bb, cb))
    })
}

/// Entries in the measured queue pair.
const QUEUE_ENTRIES: u32 = 1024;
/// Queue identifier of the measured queue pair (the harness owns queue 1).
const QID: u16 = 2;

/// A lean host for one I/O queue pair: batches in, completions checked.
struct Host {
    ctrl: std::sync::Arc<Controller>,
    memory: std::sync::Arc<ProcessMemory>,
    sq: DmaAllocation,
    cq: DmaAllocation,
    sq_tail: u32,
    cq_head: u32,
    phase: bool,
    next_cid: u16,
    /// Staging for the entries of one batch (submission or completion).
    staged: Vec<u8>,
}

impl Host {
    /// Creates queue pair [`QID`] through the harness's admin queue.
    fn new(h: &mut Harness) -> Host {
        let sq = h.buffer(QUEUE_ENTRIES as usize * 64);
        let cq = h.buffer(QUEUE_ENTRIES as usize * 16);
        let mut create_cq = SubmissionEntry::new(0x05, 0);
        create_cq.prp1 = cq.addr();
        create_cq.cdw10 = QID as u32 | ((QUEUE_ENTRIES - 1) << 16);
        create_cq.cdw11 = 1;
        assert!(h.admin(create_cq).status().is_success(), "create I/O CQ");
        let mut create_sq = SubmissionEntry::new(0x01, 0);
        create_sq.prp1 = sq.addr();
        create_sq.cdw10 = QID as u32 | ((QUEUE_ENTRIES - 1) << 16);
        create_sq.cdw11 = 1 | ((QID as u32) << 16);
        assert!(h.admin(create_sq).status().is_success(), "create I/O SQ");
        Host {
            ctrl: h.ctrl.clone(),
            memory: h.memory.clone(),
            sq,
            cq,
            sq_tail: 0,
            cq_head: 0,
            phase: true,
            next_cid: 0,
            staged: Vec::with_capacity(QUEUE_ENTRIES as usize * 64),
        }
    }

    /// Writes `n` ring entries of `size` bytes from `staged` at `index` on,
    /// in at most two accesses (the ring may wrap), or reads them into it.
    fn ring_access(&mut self, base: u64, size: usize, index: u32, n: usize, write: bool) {
        let first = n.min((QUEUE_ENTRIES - index) as usize);
        let spans =
            [(base + index as u64 * size as u64, 0..first * size), (base, first * size..n * size)];
        for (addr, range) in spans {
            if range.is_empty() {
                continue;
            }
            let r = if write {
                self.memory.write(addr, &self.staged[range])
            } else {
                self.memory.read(addr, &mut self.staged[range])
            };
            r.expect("ring lies in host memory");
        }
    }

    /// Submits the commands as one batch and checks all their completions.
    fn run(&mut self, cmds: impl Iterator<Item = SubmissionEntry>) {
        self.staged.clear();
        let mut n = 0usize;
        for mut c in cmds {
            c.set_cid(self.next_cid);
            self.next_cid = self.next_cid.wrapping_add(1);
            self.staged.extend_from_slice(&c.to_bytes());
            n += 1;
        }
        assert!(n < QUEUE_ENTRIES as usize);
        self.ring_access(self.sq.addr(), 64, self.sq_tail, n, true);
        self.sq_tail = (self.sq_tail + n as u32) % QUEUE_ENTRIES;
        self.ctrl.mmio_write32(regs::sq_tail_doorbell(QID, 0), self.sq_tail);

        // The emulator completes synchronously: all n entries are posted.
        self.staged.resize(n * 16, 0);
        self.ring_access(self.cq.addr(), 16, self.cq_head, n, false);
        for (i, b) in self.staged.chunks_exact(16).enumerate() {
            let e = CompletionEntry::from_bytes(b.try_into().expect("16 bytes"));
            let wrapped = self.cq_head as usize + i >= QUEUE_ENTRIES as usize;
            assert_eq!(e.phase(), self.phase != wrapped, "completion posted");
            assert!(e.status().is_success(), "{}", e.status());
        }
        self.cq_head += n as u32;
        if self.cq_head >= QUEUE_ENTRIES {
            self.cq_head -= QUEUE_ENTRIES;
            self.phase = !self.phase;
        }
        self.ctrl.mmio_write32(regs::cq_head_doorbell(QID, 0), self.cq_head);
    }
}

/// A controller on `media`, its host, and 32 one-block buffers, the
/// working set written (sequentially, as a zoned device requires).
struct Device {
    h: Harness,
    host: Host,
    bufs: Vec<DmaAllocation>,
}

impl Device {
    fn new(p: Profile, media: MediaChoice, ws_blocks: u64) -> Device {
        let memory = ProcessMemory::new();
        let ctrl = Emulator::with_profile(p).media(media).build(memory.clone()).expect("build");
        let mut h = Harness::start(ctrl, memory.clone(), 2).expect("start");
        let mut host = Host::new(&mut h);
        let bufs: Vec<DmaAllocation> = (0..32).map(|_| h.buffer(BLOCK)).collect();
        for (i, b) in bufs.iter().enumerate() {
            let data: Vec<u8> = (0..BLOCK).map(|j| (i * 7 + j) as u8 | 1).collect();
            memory.write(b.addr(), &data).unwrap();
        }
        for lba in (0..ws_blocks).step_by(32) {
            host.run((0..32).map(|i| cmd(0x01, lba + i, bufs[i as usize].addr())));
        }
        Device { h, host, bufs }
    }

    /// 32 random 4 KiB reads as one batch.
    fn read32(&mut self, rng: &mut SmallRng, ws_blocks: u64) {
        let lbas: [u64; 32] = std::array::from_fn(|_| rng.gen_range(0..ws_blocks));
        let bufs = &self.bufs;
        self.host.run((0..32).map(|i| cmd(0x02, lbas[i], bufs[i].addr())));
    }

    /// One random 4 KiB read.
    fn read1(&mut self, rng: &mut SmallRng, ws_blocks: u64) {
        let lba = rng.gen_range(0..ws_blocks);
        self.host.run(std::iter::once(cmd(0x02, lba, self.bufs[0].addr())));
    }
}

/// 4 KiB random reads from two device images of the working set, without
/// and with data checksums, at QD 1 and QD 32, in alternating slices:
/// `[plain_qd1, checked_qd1, plain_qd32, checked_qd32]`.
fn image_reads(a: &Args, ws_blocks: u64) -> [Cost; 4] {
    let dir = tempfile::tempdir_in(&a.image_dir).expect("image directory");
    let mut devices = [false, true].map(|checksums| {
        let mut p = profile(a.working_set());
        p.controller.data_checksums = Some(checksums);
        let path = dir.path().join(format!("checksums-{checksums}.img"));
        DeviceImage::create(&path, &p).expect("create image");
        Device::new(p, MediaChoice::Image(path), ws_blocks)
    });
    let [plain, checked] = &mut devices;
    let (mut r1, mut r2) = (SmallRng::seed_from_u64(3), SmallRng::seed_from_u64(3));
    let qd1 = cost_pair(
        a.seconds,
        (1, |_| plain.read1(&mut r1, ws_blocks)),
        (1, |_| checked.read1(&mut r2, ws_blocks)),
    );
    let qd32 = cost_pair(
        a.seconds,
        (32, |_| plain.read32(&mut r1, ws_blocks)),
        (32, |_| checked.read32(&mut r2, ws_blocks)),
    );
    [qd1.0, qd1.1, qd32.0, qd32.1]
}

/// Least CPU nanoseconds of one data checksum of a 4 KiB block (what a
/// checksummed read adds to a plain one, besides one table load), over
/// [`SLICES`] slices of 100,000 blocks from a 1 MiB buffer.
fn checksum_ns() -> f64 {
    let data: Vec<u8> = (0..1usize << 20).map(|i| (i * 31 + i / 4096) as u8).collect();
    const N: u64 = 100_000;
    (0..SLICES)
        .map(|_| {
            let cpu = thread_cpu_ns();
            let mut acc = 0u32;
            for i in 0..N {
                let off = (i as usize % 256) * BLOCK;
                acc ^= block_checksum(i, &data[off..off + BLOCK]);
            }
            std::hint::black_box(acc);
            (thread_cpu_ns() - cpu) as f64 / N as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The device image figures as JSON fields.
fn image_json(image: &[Cost; 4], crc_ns: f64) -> serde_json::Map<String, serde_json::Value> {
    let ratio = |x: f64, y: f64| (x / y * 1000.0).round() / 1000.0;
    let v = serde_json::json!({
        "image_read_4k_qd1": image[0].rate.round(),
        "image_checksummed_read_4k_qd1": image[1].rate.round(),
        "image_read_4k_qd32": image[2].rate.round(),
        "image_checksummed_read_4k_qd32": image[3].rate.round(),
        "checksum_ratio_qd1": ratio(image[1].rate, image[0].rate),
        "checksum_ratio_qd32": ratio(image[3].rate, image[2].rate),
        "image_read_cpu_ns_qd1": image[0].cpu_ns.round(),
        "image_checksummed_read_cpu_ns_qd1": image[1].cpu_ns.round(),
        "image_read_cpu_ns_qd32": image[2].cpu_ns.round(),
        "image_checksummed_read_cpu_ns_qd32": image[3].cpu_ns.round(),
        "checksum_cpu_cost_qd1": ratio(image[1].cpu_ns, image[0].cpu_ns) - 1.0,
        "checksum_cpu_cost_qd32": ratio(image[3].cpu_ns, image[2].cpu_ns) - 1.0,
        "block_checksum_ns_4k": (crc_ns * 10.0).round() / 10.0,
        "block_checksum_share_qd1": ratio(crc_ns, image[0].cpu_ns),
        "block_checksum_share_qd32": ratio(crc_ns, image[2].cpu_ns),
    });
    match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("a JSON object"),
    }
}

fn main() {
    let a = Args::parse();
    let ws_blocks = (a.working_set() / BLOCK) as u64;
    if a.images_only {
        let image = image_reads(&a, ws_blocks);
        let mut out = serde_json::Map::new();
        out.insert("working_set_bytes".into(), a.working_set().into());
        out.extend(image_json(&image, checksum_ns()));
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }
    let zone_blocks = 4096u64;
    let Device { h, mut host, bufs } =
        Device::new(profile(a.working_set()), MediaChoice::Ram, ws_blocks);

    let mut rng = SmallRng::seed_from_u64(1);
    let read_qd1 = rate(a.seconds, 1, |_| {
        let lba = rng.gen_range(0..ws_blocks);
        host.run(std::iter::once(cmd(0x02, lba, bufs[0].addr())));
    });
    // QD 32 reads against the memory system's limit, 4 KiB copies from
    // random offsets of a working set of the same size, in alternation.
    let src = vec![7u8; a.working_set()];
    let mut dst = vec![0u8; BLOCK];
    let blocks = a.working_set() / BLOCK;
    let mut copy_rng = SmallRng::seed_from_u64(2);
    let (read_qd32, memcpy) = rate_pair(
        a.seconds,
        (32, |_| {
            let lbas: [u64; 32] = std::array::from_fn(|_| rng.gen_range(0..ws_blocks));
            host.run((0..32).map(|i| cmd(0x02, lbas[i], bufs[i].addr())));
        }),
        (1, |_| {
            let off = copy_rng.gen_range(0..blocks) * BLOCK;
            dst.copy_from_slice(&src[off..off + BLOCK]);
            std::hint::black_box(&mut dst);
        }),
    );
    drop(src);

    // Writes go at the write pointer of the zones past the working set,
    // moving on (and resetting) when a zone is full.
    let first = ws_blocks.div_ceil(zone_blocks);
    let spare = profile(a.working_set()).namespaces[0].zones as u64 - first;
    let (mut zone, mut off) = (first, 0u64);
    let mut advance = |host: &mut Host, n: u64| -> u64 {
        if off + n > zone_blocks {
            zone = first + (zone - first + 1) % spare;
            off = 0;
            let mut reset = SubmissionEntry::new(0x79, 1);
            reset.set_cdw10_11(zone * zone_blocks);
            reset.cdw13 = 0x04;
            host.run(std::iter::once(reset));
        }
        off += n;
        zone * zone_blocks + off - n
    };
    let write_qd1 = rate(a.seconds, 1, |_| {
        let lba = advance(&mut host, 1);
        host.run(std::iter::once(cmd(0x01, lba, bufs[0].addr())));
    });
    let write_qd32 = rate(a.seconds, 32, |_| {
        let lba = advance(&mut host, 32);
        host.run((0..32).map(|i| cmd(0x01, lba + i as u64, bufs[i].addr())));
    });

    let image = image_reads(&a, ws_blocks);
    let fio = fio_psync(a.working_set(), a.seconds);
    let mut out = serde_json::json!({
        "working_set_bytes": a.working_set(),
        "read_4k_qd1": read_qd1.round(),
        "read_4k_qd32": read_qd32.round(),
        "write_4k_qd1": write_qd1.round(),
        "write_4k_qd32": write_qd32.round(),
        "memcpy_4k": memcpy.round(),
        "ratio_vs_memcpy": (read_qd32 / memcpy * 1000.0).round() / 1000.0,
        "commands_completed": h.ctrl.commands_completed(),
    });
    for (k, v) in image_json(&image, checksum_ns()) {
        out[k] = v;
    }
    if let Some(f) = fio {
        out["fio_psync_randread_4k"] = f.round().into();
        out["ratio_vs_fio"] = ((read_qd32 / f * 1000.0).round() / 1000.0).into();
    }
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// fio psync 4 KiB random reads from a tmpfs file of `size` bytes, in IOPS.
fn fio_psync(size: usize, secs: f64) -> Option<f64> {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let file = format!("{dir}/znskit-throughput-{}", std::process::id());
    let out = std::process::Command::new("fio")
        .args([
            "--name=randread",
            &format!("--filename={file}"),
            &format!("--size={size}"),
            "--rw=randread",
            "--bs=4k",
            "--ioengine=psync",
            "--time_based",
            &format!("--runtime={}", secs.ceil() as u64),
            "--output-format=json",
        ])
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&file);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["jobs"][0]["read"]["iops"].as_f64()
}
