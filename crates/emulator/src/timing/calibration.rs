//! Measuring a timed profile against reference figures: real commands
//! through real queues ([`Harness`]), one host thread, on the virtual
//! clock, so every figure is deterministic.
//!
//! [`zn540_figures`] measures every figure of the ZN540 reference
//! (`crates/emulator/examples/calibrate.rs` prints them as JSON);
//! [`Figure::ratio`] is measured / reference. The procedures follow the
//! reference's: QD 1 in one zone for latencies and the request-size table,
//! several zones at QD 1 each for inter-zone writes, one zone at a deep
//! queue for append and read ceilings; zone management after the zone was
//! written one block at a time... here written in large commands, then the
//! host idles one second, as the reference's benchmark sleeps before it
//! measures.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_spec::command::{ReadWrite, ZoneAppend, ZoneSend};
use zns_spec::{CompletionEntry, SubmissionEntry, ZoneSendAction};

use crate::clock::Clock;
use crate::harness::{Harness, RawQueue};
use crate::host::ProcessMemory;
use crate::profile::Profile;
use crate::{Emulator, MediaChoice};

/// One measured figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What was measured.
    pub name: String,
    /// Unit of both values.
    pub unit: &'static str,
    /// The reference value.
    pub reference: f64,
    /// The value measured on the model.
    pub measured: f64,
}

impl Figure {
    /// measured / reference.
    pub fn ratio(&self) -> f64 {
        self.measured / self.reference
    }

    /// True within ±`tolerance` (0.10 = ±10 %).
    pub fn within(&self, tolerance: f64) -> bool {
        (self.ratio() - 1.0).abs() <= tolerance
    }
}

/// What a stream of commands gave.
#[derive(Debug, Default)]
pub struct Stream {
    /// Commands completed in the measured window.
    pub ops: u64,
    /// Virtual nanoseconds of the measured window.
    pub elapsed_ns: u64,
    /// Latencies (ns) of the commands in the measured window.
    pub latencies: Vec<u64>,
    /// Commands that failed.
    pub errors: u64,
}

impl Stream {
    /// Commands per second.
    pub fn iops(&self) -> f64 {
        self.ops as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }

    /// Mean latency in µs.
    pub fn mean_us(&self) -> f64 {
        self.latencies.iter().sum::<u64>() as f64 / self.latencies.len().max(1) as f64 / 1e3
    }

    /// The `q` quantile (0..=1) of the latencies, in µs (HdrHistogram,
    /// three significant digits).
    pub fn quantile_us(&self, q: f64) -> f64 {
        let Ok(mut h) = hdrhistogram::Histogram::<u64>::new(3) else { return 0.0 };
        for &ns in &self.latencies {
            // Auto-resizing: a record fails only on a zero-width histogram.
            let _ = h.record(ns);
        }
        if h.is_empty() {
            return 0.0;
        }
        h.value_at_quantile(q) as f64 / 1e3
    }
}

/// A timed emulator on the virtual clock, with no data (null media, no
/// data movement: the model times commands from their entries alone).
pub struct Bench {
    h: Harness,
    extra: Vec<RawQueue>,
    clock: Arc<Clock>,
    /// Logical block size.
    pub block: u64,
    /// Zone size in blocks.
    pub zone_size: u64,
    /// Zone capacity in blocks.
    pub zone_cap: u64,
    /// Largest transfer in blocks.
    pub max_blocks: u64,
    /// Entries of each queue.
    entries: u32,
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench").field("now_ns", &self.now()).finish_non_exhaustive()
    }
}

const NSID: u32 = 1;

impl Bench {
    /// A fresh device of `profile`, which must have a timing model; its
    /// first namespace is the one commands go to (zoned, or conventional
    /// without the zone helpers).
    pub fn new(profile: &Profile) -> Result<Bench, String> {
        let memory = ProcessMemory::new();
        let ctrl = Emulator::with_profile(profile.clone())
            .media(MediaChoice::Null)
            .timing(true)
            .build(memory.clone())
            .map_err(|e| e.to_string())?;
        ctrl.set_data_transfer(false);
        let clock = Arc::clone(ctrl.clock());
        let ns = &profile.namespaces[0];
        let entries = profile.controller.max_queue_entries.min(1024);
        let h = Harness::start(ctrl, memory, entries).map_err(|e| e.to_string())?;
        Ok(Bench {
            h,
            extra: Vec::new(),
            clock,
            block: ns.block_size as u64,
            zone_size: ns.zone_size,
            zone_cap: ns.zone_capacity,
            max_blocks: (4096u64 << profile.controller.mdts_log2) / ns.block_size as u64,
            entries,
        })
    }

    /// The emulated controller (its namespaces, their firmware).
    pub fn controller(&self) -> &Arc<crate::Controller> {
        &self.h.ctrl
    }

    /// Virtual nanoseconds since the device was built.
    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The host idles `ns` nanoseconds.
    pub fn idle(&self, ns: u64) {
        self.clock.wait_ns(ns);
    }

    /// Start LBA of zone `z`.
    pub fn zone(&self, z: u64) -> u64 {
        z * self.zone_size
    }

    /// Bytes of `blocks` blocks.
    pub fn bytes(&self, blocks: u64) -> u64 {
        blocks * self.block
    }

    /// Blocks in `bytes`.
    pub fn blocks(&self, bytes: u64) -> u64 {
        bytes / self.block
    }

    /// A Write entry.
    pub fn write(lba: u64, blocks: u64) -> SubmissionEntry {
        ReadWrite::new(NSID, lba, blocks as u32).write().expect("valid block count")
    }

    /// A Read entry.
    pub fn read(lba: u64, blocks: u64) -> SubmissionEntry {
        ReadWrite::new(NSID, lba, blocks as u32).read().expect("valid block count")
    }

    /// A Zone Append entry.
    pub fn append(zslba: u64, blocks: u64) -> SubmissionEntry {
        ZoneAppend::new(NSID, zslba, blocks as u32).to_entry().expect("valid block count")
    }

    /// A Zone Management Send entry.
    pub fn send(zslba: u64, action: ZoneSendAction) -> SubmissionEntry {
        ZoneSend::new(NSID, zslba, action).to_entry()
    }

    /// Runs one command at QD 1 on queue 1; returns its completion and
    /// latency in ns.
    pub fn run(&mut self, sqe: SubmissionEntry) -> (CompletionEntry, u64) {
        let t0 = self.now();
        let e = self.h.io(sqe);
        (e, self.now() - t0)
    }

    /// Runs one command and returns its latency in µs; panics on failure.
    pub fn latency_us(&mut self, sqe: SubmissionEntry) -> f64 {
        let (e, ns) = self.run(sqe);
        assert!(e.status().is_success(), "command failed: {}", e.status());
        ns as f64 / 1e3
    }

    /// Writes `blocks` blocks from the zone's write pointer at `lba` in
    /// commands of at most `chunk` blocks, at QD 1.
    pub fn fill(&mut self, lba: u64, blocks: u64, chunk: u64) {
        let mut done = 0;
        while done < blocks {
            let n = chunk.min(blocks - done).min(self.max_blocks);
            let (e, _) = self.run(Self::write(lba + done, n));
            assert!(e.status().is_success(), "fill failed: {}", e.status());
            done += n;
        }
    }

    fn queue(&mut self, i: usize) -> &mut RawQueue {
        if i == 0 {
            &mut self.h.io
        } else {
            &mut self.extra[i - 1]
        }
    }

    /// Keeps `qd` commands outstanding on each of `queues` queues (one
    /// thread, round robin) until `total` completed; `make(queue, n)`
    /// builds the `n`-th command of a queue. The first `warmup` completions
    /// are not measured.
    // `q` picks a queue, its counter and its commands alike.
    #[allow(clippy::needless_range_loop)]
    pub fn stream(
        &mut self,
        queues: usize,
        qd: usize,
        total: u64,
        warmup: u64,
        mut make: impl FnMut(usize, u64) -> SubmissionEntry,
    ) -> Stream {
        while self.extra.len() + 1 < queues {
            let q = self.h.add_queue(self.entries).expect("queue");
            self.extra.push(q);
        }
        let mut issued = vec![0u64; queues];
        let mut submitted_at: HashMap<(usize, u16), u64> = HashMap::new();
        let mut left = total;
        let mut done = 0u64;
        let mut s = Stream::default();
        let mut start = self.now();
        let ctrl = Arc::clone(&self.h.ctrl);
        let memory = Arc::clone(&self.h.memory);
        for q in 0..queues {
            for _ in 0..qd {
                if left == 0 {
                    break;
                }
                let sqe = make(q, issued[q]);
                issued[q] += 1;
                left -= 1;
                let now = self.now();
                let cid = self.queue(q).push(&memory, sqe);
                submitted_at.insert((q, cid), now);
            }
            self.queue(q).ring(&ctrl);
        }
        while done < total {
            for q in 0..queues {
                while let Some(e) = self.queue(q).reap(&ctrl, &memory) {
                    let now = self.now();
                    let t0 = submitted_at.remove(&(q, e.cid)).unwrap_or(now);
                    done += 1;
                    if !e.status().is_success() {
                        s.errors += 1;
                    }
                    if done == warmup {
                        start = now;
                    } else if done > warmup {
                        s.ops += 1;
                        s.latencies.push(now - t0);
                    }
                    if left > 0 {
                        let sqe = make(q, issued[q]);
                        issued[q] += 1;
                        left -= 1;
                        let cid = self.queue(q).push(&memory, sqe);
                        submitted_at.insert((q, cid), now);
                        self.queue(q).ring(&ctrl);
                    }
                }
            }
        }
        s.elapsed_ns = self.now() - start;
        s
    }
}

/// The median of `v` (the lower middle value of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(f64::NAN)
}

/// The ZN540's reference figure `name` for `lba_bytes`-byte blocks.
fn reference_figure(name: &str, lba_bytes: u32) -> Result<f64, String> {
    crate::reference::zn540(name, lba_bytes).ok_or_else(|| {
        format!("the ZN540 reference has no figure {name} for {lba_bytes}-byte blocks")
    })
}

fn fig(name: impl Into<String>, unit: &'static str, reference: f64, measured: f64) -> Figure {
    Figure { name: name.into(), unit, reference, measured }
}

/// The reference figures of the ZN540 (`crate::reference`) and the model's.
/// `quick` measures only a cheap subset (for unit tests in debug builds).
pub fn zn540_figures(profile: &Profile, quick: bool) -> Result<Vec<Figure>, String> {
    let mut out = Vec::new();
    latency_figures(profile, quick, &mut out)?;
    size_figures(profile, quick, &mut out)?;
    ceiling_figures(profile, quick, &mut out)?;
    zone_management_figures(profile, &mut out)?;
    occupancy_figures(profile, quick, &mut out)?;
    Ok(out)
}

/// The ZN540's reference figure `name` (4 KiB blocks).
fn r(name: &str) -> Result<f64, String> {
    reference_figure(name, 4096)
}

/// The ZN540's reference figure `name` with 512-byte blocks.
fn r512(name: &str) -> Result<f64, String> {
    reference_figure(name, 512)
}

/// Latency at QD 1 in one zone: 4 KiB writes and appends (both LBA formats), first writes to implicitly opened zones, random reads.
fn latency_figures(profile: &Profile, quick: bool, out: &mut Vec<Figure>) -> Result<(), String> {
    let new = || Bench::new(profile);
    // QD 1, one zone, 4 KiB.
    {
        let mut b = new()?;
        let z = b.zone(1);
        b.run(Bench::write(z, 1));
        let s = b.stream(1, 1, 2000, 100, |_, n| Bench::write(z + 1 + n, 1));
        out.push(fig("write 4 KiB QD 1 mean", "us", r("qd1/write/4KiB:mean_us")?, s.mean_us()));
        let z = b.zone(2);
        b.run(Bench::append(z, 1));
        let s = b.stream(1, 1, 2000, 100, |_, _| Bench::append(z, 1));
        out.push(fig("append 4 KiB QD 1 mean", "us", r("qd1/append/4KiB:mean_us")?, s.mean_us()));
        let (mut w, mut a) = (0.0, 0.0);
        for i in 0..10 {
            w += b.latency_us(Bench::write(b.zone(10 + i), 1));
            b.run(Bench::send(b.zone(10 + i), ZoneSendAction::Reset));
            a += b.latency_us(Bench::append(b.zone(30 + i), 1));
            b.run(Bench::send(b.zone(30 + i), ZoneSendAction::Reset));
        }
        let first = r("open/first_write/implicit:mean_us")?;
        out.push(fig("first write to an implicitly opened zone", "us", first, w / 10.0));
        let first = r("open/first_append/implicit:mean_us")?;
        out.push(fig("first append to an implicitly opened zone", "us", first, a / 10.0));
    }

    // QD 1, one zone, 4 KiB requests with the 512 B LBA format: the same
    // device (zone sizes in bytes kept), 8 blocks per command.
    {
        let mut small = profile.clone();
        small.namespaces[0].set_block_size(512).map_err(|e| e.to_string())?;
        let mut b = Bench::new(&small)?;
        let n = b.blocks(4096);
        let z = b.zone(1);
        b.run(Bench::write(z, n));
        let s = b.stream(1, 1, 2000, 100, |_, i| Bench::write(z + (1 + i) * n, n));
        let want = r512("qd1/write/4KiB:mean_us")?;
        out.push(fig("write 4 KiB QD 1 mean, 512 B LBAs", "us", want, s.mean_us()));
        let z = b.zone(2);
        b.run(Bench::append(z, n));
        let s = b.stream(1, 1, 2000, 100, |_, _| Bench::append(z, n));
        let want = r512("qd1/append/4KiB:mean_us")?;
        out.push(fig("append 4 KiB QD 1 mean, 512 B LBAs", "us", want, s.mean_us()));
    }

    // Random reads, QD 1, in a written zone.
    {
        let mut b = new()?;
        let z = b.zone(3);
        let span = if quick { b.blocks(32 << 20) } else { b.zone_cap };
        b.fill(z, span, b.blocks(128 << 10));
        b.idle(1_000_000_000);
        let mut rng = SmallRng::seed_from_u64(1);
        let n = if quick { 300 } else { 4000 };
        let s = b.stream(1, 1, n, 0, |_, _| Bench::read(z + rng.gen_range(0..span), 1));
        out.push(fig(
            "random read 4 KiB QD 1 mean",
            "us",
            r("qd1/read/4KiB:mean_us")?,
            s.mean_us(),
        ));
        out.push(fig(
            "random read 4 KiB QD 1 p50",
            "us",
            r("qd1/read/4KiB:p50_us")?,
            s.quantile_us(0.5),
        ));
        out.push(fig(
            "random read 4 KiB QD 1 p95",
            "us",
            r("qd1/read/4KiB:p95_us")?,
            s.quantile_us(0.95),
        ));
    }

    Ok(())
}

/// Throughput at QD 1 in one zone by request size, with the 128 KiB write tail.
fn size_figures(profile: &Profile, quick: bool, out: &mut Vec<Figure>) -> Result<(), String> {
    let new = || Bench::new(profile);
    // Request sizes, QD 1, one zone.
    for kib in [4u64, 8, 16, 32, 64, 128] {
        if quick && kib != 16 && kib != 128 {
            continue;
        }
        let w_ref = r(&format!("qd1/write/{kib}KiB:kiops"))?;
        let a_ref = r(&format!("qd1/append/{kib}KiB:kiops"))?;
        let mut b = new()?;
        let n = b.blocks(kib << 10);
        let count = if quick {
            300
        } else {
            ((1u64 << 30) / (kib << 10)).clamp(2000, 20000).min(b.zone_cap / n - 1)
        };
        let z = b.zone(1);
        let s = b.stream(1, 1, count, count / 5, |_, i| Bench::write(z + i * n, n));
        out.push(fig(format!("write {kib} KiB QD 1"), "KIOPS", w_ref, s.iops() / 1e3));
        if kib == 128 {
            out.push(fig(
                "write bandwidth (128 KiB, QD 1)",
                "MiB/s",
                r("ceiling/write_mib_s")?,
                s.iops() * (128.0 / 1024.0),
            ));
            out.push(fig(
                "128 KiB write p50",
                "us",
                r("qd1/write/128KiB:p50_us")?,
                s.quantile_us(0.50),
            ));
            out.push(fig(
                "128 KiB write p95",
                "us",
                r("qd1/write/128KiB:p95_us")?,
                s.quantile_us(0.95),
            ));
            out.push(fig(
                "128 KiB write p99",
                "us",
                r("qd1/write/128KiB:p99_us")?,
                s.quantile_us(0.99),
            ));
        }
        let z = b.zone(2);
        let s = b.stream(1, 1, count, count / 5, |_, _| Bench::append(z, n));
        out.push(fig(format!("append {kib} KiB QD 1"), "KIOPS", a_ref, s.iops() / 1e3));
    }

    Ok(())
}

/// Ceilings: writes over 8 zones, appends to one zone at depth, random and sequential reads at depth.
fn ceiling_figures(profile: &Profile, quick: bool, out: &mut Vec<Figure>) -> Result<(), String> {
    let new = || Bench::new(profile);
    // Ceilings.
    {
        let mut b = new()?;
        let count = if quick { 4000 } else { 40000 };
        let zs: Vec<u64> = (0..8).map(|i| b.zone(20 + i)).collect();
        let s = b.stream(8, 1, count, count / 5, |q, i| Bench::write(zs[q] + i, 1));
        let want = r("inter_zone/write/4KiB:max_kiops")?;
        out.push(fig("4 KiB writes, 8 zones at QD 1", "KIOPS", want, s.iops() / 1e3));
        if !quick {
            let z = b.zone(40);
            let s = b.stream(1, 32, 40000, 5000, |_, _| Bench::append(z, 1));
            let want = r("intra_zone/append/4KiB:max_kiops")?;
            out.push(fig("4 KiB appends, one zone, QD 32", "KIOPS", want, s.iops() / 1e3));
            let z = b.zone(41);
            let s = b.stream(1, 4, 40000, 5000, |_, _| Bench::append(z, 1));
            out.push(fig("4 KiB appends, one zone, QD 4", "KIOPS", want, s.iops() / 1e3));
            let z = b.zone(42);
            let s = b.stream(1, 32, 40000, 5000, |_, _| Bench::append(z, 2));
            let want = r("intra_zone/append/8KiB:max_kiops")?;
            out.push(fig("8 KiB appends, one zone, QD 32", "KIOPS", want, s.iops() / 1e3));
        }
    }
    if !quick {
        let mut b = new()?;
        let z = b.zone(5);
        b.fill(z, b.zone_cap, b.blocks(128 << 10));
        b.idle(1_000_000_000);
        let cap = b.zone_cap;
        let mut rng = SmallRng::seed_from_u64(2);
        let s = b.stream(1, 256, 100000, 20000, |_, _| Bench::read(z + rng.gen_range(0..cap), 1));
        let want = r("read_qd/random/4KiB:max_kiops")?;
        out.push(fig("random read 4 KiB QD 256", "KIOPS", want, s.iops() / 1e3));
        let s = b
            .stream(1, 256, 50000, 10000, |_, _| Bench::read(z + rng.gen_range(0..cap / 4) * 4, 4));
        let want = r("read_qd/random/16KiB:max_mib_s")?;
        out.push(fig("random read 16 KiB QD 256", "MiB/s", want, s.iops() / 64.0));
        let per = 32;
        let s = b.stream(1, 32, cap / per, 1000, |_, i| Bench::read(z + i * per % cap, per));
        let want = r("read_qd/sequential/128KiB:max_mib_s")?;
        out.push(fig("sequential read 128 KiB QD 32", "MiB/s", want, s.iops() / 8.0));
    }

    Ok(())
}

/// Open, close and finish of zones that are empty or just written.
fn zone_management_figures(profile: &Profile, out: &mut Vec<Figure>) -> Result<(), String> {
    let new = || Bench::new(profile);
    // Zone management.
    {
        let mut b = new()?;
        let z = b.zone(50);
        out.push(fig(
            "explicit open",
            "us",
            r("zone_mgmt/open/empty:mean_us")?,
            b.latency_us(Bench::send(z, ZoneSendAction::Open)),
        ));
        let want = r("zone_mgmt/close/after_open:mean_us")?;
        out.push(fig("close", "us", want, b.latency_us(Bench::send(z, ZoneSendAction::Close))));
        let z = b.zone(51);
        b.run(Bench::send(z, ZoneSendAction::Open));
        b.fill(z, 3, 1);
        let close = b.latency_us(Bench::send(z, ZoneSendAction::Close));
        out.push(fig(
            "close right after writing",
            "us",
            r("zone_mgmt/close/after_write:mean_us")?,
            close,
        ));
        let z = b.zone(52);
        let fin = b.latency_us(Bench::send(z, ZoneSendAction::Finish));
        out.push(fig("finish of an empty zone", "us", r("zone_mgmt/finish/empty:p50_us")?, fin));
    }
    Ok(())
}

/// Finish and reset by how full the zone is (medians of several resets).
fn occupancy_figures(profile: &Profile, quick: bool, out: &mut Vec<Figure>) -> Result<(), String> {
    let new = || Bench::new(profile);
    let cap = profile.namespaces[0].zone_capacity;
    // (label, blocks written, the reference's name for the occupancy,
    // whether it gives finish, reset unfinished and reset finished).
    let rows: [(&str, u64, &str, [bool; 3]); 8] = [
        ("0", 0, "empty", [false, true, true]),
        ("1 LBA", 1, "1LBA", [true, true, true]),
        ("6.25%", cap / 16, "6.25%", [true, true, true]),
        ("12.5%", cap / 8, "12.5%", [true, true, true]),
        ("25%", cap / 4, "25%", [true, true, true]),
        ("50%", cap / 2, "50%", [true, true, true]),
        ("full - 1 LBA", cap - 1, "full-1LBA", [true, false, false]),
        ("100%", cap, "full", [false, true, true]),
    ];
    // The reference's medians in ms (NaN where it gives none).
    let ms = |kind: &str, key: &str, given: bool| -> Result<f64, String> {
        if !given {
            return Ok(f64::NAN);
        }
        Ok(r(&format!("zone_mgmt/{kind}/{key}:p50_us"))? / 1e3)
    };
    let mut occupancies = Vec::new();
    for (label, blocks, key, [f, u, fr]) in rows {
        let (fin, reset) = (ms("finish", key, f)?, ms("reset", key, u)?);
        occupancies.push((label, blocks, fin, reset, ms("reset_after_finish", key, fr)?));
    }
    // Resets vary from one to the next (erase times differ with the wear
    // of the zone's blocks): the reference gives medians, so each reset
    // figure is the median of several.
    let samples = if quick { 1 } else { 5 };
    for (label, blocks, fin_ref, reset_u, reset_f) in occupancies {
        if quick && label != "6.25%" && label != "0" {
            continue;
        }
        let mut b = new()?;
        let chunk = b.blocks(128 << 10);
        let (mut unfinished, mut finished, mut finish) = (Vec::new(), Vec::new(), None);
        for i in 0..samples {
            if !reset_u.is_nan() {
                let z = b.zone(60 + i);
                b.run(Bench::send(z, ZoneSendAction::Open));
                b.fill(z, blocks, chunk);
                b.idle(1_000_000_000);
                unfinished.push(b.latency_us(Bench::send(z, ZoneSendAction::Reset)) / 1e3);
            }
            let z = b.zone(80 + i);
            b.run(Bench::send(z, ZoneSendAction::Open));
            b.fill(z, blocks, chunk);
            b.idle(1_000_000_000);
            let f = b.latency_us(Bench::send(z, ZoneSendAction::Finish)) / 1e3;
            finish.get_or_insert(f);
            if !reset_f.is_nan() {
                b.idle(1_000_000_000);
                finished.push(b.latency_us(Bench::send(z, ZoneSendAction::Reset)) / 1e3);
            }
            if reset_f.is_nan() && reset_u.is_nan() {
                break;
            }
        }
        if !reset_u.is_nan() {
            out.push(fig(format!("reset, unfinished, {label}"), "ms", reset_u, median(unfinished)));
        }
        if let (false, Some(f)) = (fin_ref.is_nan(), finish) {
            out.push(fig(format!("finish, {label}"), "ms", fin_ref, f));
        }
        if !reset_f.is_nan() {
            out.push(fig(format!("reset, finished, {label}"), "ms", reset_f, median(finished)));
        }
    }
    Ok(())
}
