//! The workloads, the same on both sides: a sequential fill, random
//! overwrites (preconditioning, then the measured sustained run, binned by
//! device time), and 4 KiB random reads alone and beside a writer.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::super::progress::Observer;
use super::super::stats::LatencyHistogram;
use super::super::CharacterizeError;
use super::results::{Phase, ReadTails, Sustained};
use super::side::{Side, WriteCounters};

/// Device time the progress bar of a timed phase moves by, ns.
const STEP_NS: u64 = 1_000_000;

/// Bytes the progress bar of a phase of writes moves by.
const STEP_BYTES: u64 = 1 << 20;

/// What one side runs.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Blocks per write request.
    pub request_blocks: u64,
    /// Random writes before the measured run, in capacities.
    pub precondition: f64,
    /// Length of the measured run, device ns.
    pub sustained_ns: u64,
    /// Width of a throughput bin, device ns.
    pub bin_ns: u64,
    /// Device time the device is left idle before the reads alone.
    pub settle_ns: u64,
    /// Reads alone.
    pub idle_reads: u64,
    /// Length of the reads beside writes, device ns.
    pub read_ns: u64,
    /// Reads after each write request in that phase.
    pub reads_per_write: u32,
    /// Seed of the offsets.
    pub seed: u64,
}

impl Plan {
    /// Steps of each phase for the progress bars: fill and
    /// preconditioning in MiB, the timed phases in device ms.
    pub fn steps(&self, capacity_bytes: u64) -> [u64; 4] {
        [
            capacity_bytes / STEP_BYTES,
            (capacity_bytes as f64 * self.precondition) as u64 / STEP_BYTES,
            self.sustained_ns / STEP_NS,
            self.read_ns / STEP_NS + self.idle_reads.div_ceil(1000),
        ]
    }
}

/// Requests of `request_blocks` at aligned offsets: the device's blocks
/// divided into slots.
struct Slots {
    count: u64,
    blocks: u64,
}

impl Slots {
    fn new(side: &dyn Side, blocks: u64) -> Result<Slots, CharacterizeError> {
        let count = side.blocks() / blocks;
        if count < 2 {
            return Err(CharacterizeError::Invalid(format!(
                "{} blocks cannot take random requests of {blocks} blocks",
                side.blocks()
            )));
        }
        Ok(Slots { count, blocks })
    }

    fn random(&self, rng: &mut SmallRng) -> u64 {
        rng.gen_range(0..self.count) * self.blocks
    }
}

/// Writes every slot once, in order.
pub(crate) fn fill(
    side: &dyn Side,
    plan: &Plan,
    obs: &dyn Observer,
) -> Result<Phase, CharacterizeError> {
    let slots = Slots::new(side, plan.request_blocks)?;
    let mut lane = side.lane(plan.request_blocks)?;
    let bytes_per = plan.request_blocks * side.block_size() as u64;
    let (t0, w0, c0) = (side.now(), Instant::now(), side.counters());
    let mut stepped = 0u64;
    for i in 0..slots.count {
        lane.write(i * slots.blocks, slots.blocks)?;
        let done = (i + 1) * bytes_per / STEP_BYTES;
        obs.step(done - stepped);
        stepped = done;
    }
    Ok(Phase::new(slots.count * bytes_per, side.now() - t0, w0, waf(side, c0)))
}

/// The write amplification since `before`, if the counters can be read.
fn waf(side: &dyn Side, before: Option<WriteCounters>) -> Option<f64> {
    side.counters()?.since(before?).waf()
}

/// MiB/s, write amplification and running write amplification by bin.
type BinSeries = (Vec<f64>, Vec<Option<f64>>, Vec<Option<f64>>);

/// Throughput and write amplification by bin of device time.
struct Bins {
    t0: u64,
    bin_ns: u64,
    /// Bytes of the requests that completed in each bin begun so far.
    bytes: Vec<u64>,
    /// The counters when each bin began (read at the first completion
    /// after its start).
    counters: Vec<Option<WriteCounters>>,
}

impl Bins {
    fn new(t0: u64, plan: &Plan, start: Option<WriteCounters>) -> Bins {
        // Room for the measured run and a long preconditioning: the
        // vectors grow only past that.
        let n = (plan.sustained_ns / plan.bin_ns.max(1)) as usize + 4096;
        let (mut bytes, mut counters) = (Vec::with_capacity(n), Vec::with_capacity(n));
        bytes.push(0);
        counters.push(start);
        Bins { t0, bin_ns: plan.bin_ns.max(1), bytes, counters }
    }

    /// A request of `bytes` completed at `t`; bins that began since the
    /// last call get the counters `now` reads.
    fn add(&mut self, t: u64, bytes: u64, now: impl Fn() -> Option<WriteCounters>) {
        let i = ((t - self.t0) / self.bin_ns) as usize;
        if i >= self.bytes.len() {
            let c = now();
            while self.bytes.len() <= i {
                self.bytes.push(0);
                self.counters.push(c);
            }
        }
        self.bytes[i] += bytes;
    }

    /// MiB/s, write amplification and write amplification since the
    /// first bin, of every whole bin up to `end`, when the counters read
    /// `last`.
    fn finish(mut self, end: u64, last: Option<WriteCounters>) -> BinSeries {
        let whole = (((end - self.t0) / self.bin_ns) as usize).min(self.bytes.len());
        self.counters.truncate(whole + 1);
        if self.counters.len() == whole {
            self.counters.push(last);
        }
        let secs = self.bin_ns as f64 / 1e9;
        let mib_s = self.bytes.iter().take(whole).map(|&b| b as f64 / 1048576.0 / secs).collect();
        let waf = self.counters.windows(2).map(|w| w[1]?.since(w[0]?).waf()).collect();
        let start = self.counters[0];
        let running =
            self.counters.iter().skip(1).map(|c| c.as_ref()?.since(start?).waf()).collect();
        (mib_s, waf, running)
    }
}

/// Random writes: `plan.precondition` capacities (calling `measure`
/// when they are done), then `plan.sustained_ns` of device time more,
/// binned by device time from the first write on.
pub(crate) fn random_writes(
    side: &dyn Side,
    plan: &Plan,
    obs: &dyn Observer,
    measure: &dyn Fn(),
) -> Result<(Phase, Sustained), CharacterizeError> {
    let slots = Slots::new(side, plan.request_blocks)?;
    let mut lane = side.lane(plan.request_blocks)?;
    let mut rng = SmallRng::seed_from_u64(plan.seed ^ 0x9E37_79B9);
    let bytes_per = plan.request_blocks * side.block_size() as u64;
    let total = (side.blocks() as f64 * side.block_size() as f64 * plan.precondition) as u64;
    let (t0, w0, c0) = (side.now(), Instant::now(), side.counters());
    let mut bins = Bins::new(t0, plan, c0);
    let (mut bytes, mut stepped, mut t) = (0u64, 0u64, t0);
    while bytes < total {
        lane.write(slots.random(&mut rng), slots.blocks)?;
        t = side.now();
        bins.add(t, bytes_per, || side.counters());
        bytes += bytes_per;
        let done = bytes / STEP_BYTES;
        obs.step(done - stepped);
        stepped = done;
    }
    let pre = Phase::new(bytes, t - t0, w0, waf(side, c0));
    measure();
    let (m0, mw0, mc0) = (t, Instant::now(), side.counters());
    let end = m0 + plan.sustained_ns;
    let mut hist = LatencyHistogram::new();
    (bytes, stepped) = (0, 0);
    while t < end {
        let lba = slots.random(&mut rng);
        let submitted = side.now();
        lane.write(lba, slots.blocks)?;
        t = side.now();
        hist.record(t - submitted);
        bins.add(t, bytes_per, || side.counters());
        bytes += bytes_per;
        let done = (t - m0).min(plan.sustained_ns) / STEP_NS;
        obs.step(done - stepped);
        stepped = done;
    }
    let last = side.counters();
    let totals = last.zip(mc0).map(|(c, c0)| c.since(c0));
    let first = (m0 - t0).div_ceil(plan.bin_ns) as usize;
    let series = bins.finish(t, last);
    let measured = Phase::new(bytes, t - m0, mw0, totals.and_then(|d| d.waf()));
    Ok((pre, Sustained::new(measured, plan.bin_ns, first, series, totals, hist.stats())))
}

/// 4 KiB random reads at queue depth 1 of blocks the fill wrote:
/// `plan.idle_reads` alone once the
/// side finished its garbage collection and the device was idle for
/// `plan.settle_ns`, then for
/// `plan.read_ns` interleaved with the random writes of the sustained run
/// on the same host thread, `plan.reads_per_write` reads after each
/// write: the device programs the writes it buffered and collects garbage
/// while they run.
pub(crate) fn reads(
    side: &dyn Side,
    plan: &Plan,
    obs: &dyn Observer,
) -> Result<ReadTails, CharacterizeError> {
    let mut reader = side.lane(1)?;
    let mut rng = SmallRng::seed_from_u64(plan.seed ^ 0x2545_F491);
    let slots = Slots::new(side, plan.request_blocks)?;
    // The blocks the fill wrote: a block past the last whole slot was
    // never written, and reading it costs the device no flash read.
    let n = slots.count * slots.blocks;
    side.settle(plan.settle_ns)?;
    let mut idle = LatencyHistogram::new();
    for i in 0..plan.idle_reads {
        let lba = rng.gen_range(0..n);
        let t0 = side.now();
        reader.read(lba, 1)?;
        idle.record(side.now() - t0);
        if (i + 1) % 1000 == 0 {
            obs.step(1);
        }
    }
    let mut writer = side.lane(plan.request_blocks)?;
    let bytes_per = plan.request_blocks * side.block_size() as u64;
    let mut busy = LatencyHistogram::new();
    let (t0, w0, c0) = (side.now(), Instant::now(), side.counters());
    let end = t0 + plan.read_ns;
    let (mut t, mut written, mut stepped) = (t0, 0u64, 0u64);
    while t < end {
        writer.write(slots.random(&mut rng), slots.blocks)?;
        written += bytes_per;
        for _ in 0..plan.reads_per_write {
            let lba = rng.gen_range(0..n);
            let submitted = side.now();
            reader.read(lba, 1)?;
            busy.record(side.now() - submitted);
        }
        t = side.now();
        let done = (t - t0).min(plan.read_ns) / STEP_NS;
        obs.step(done - stepped);
        stepped = done;
    }
    let phase = Phase::new(written, t - t0, w0, waf(side, c0));
    Ok(ReadTails::new(&idle, &busy, plan.reads_per_write, phase))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(bin_ns: u64) -> Plan {
        Plan {
            request_blocks: 1,
            precondition: 0.0,
            sustained_ns: 10 * bin_ns,
            bin_ns,
            settle_ns: 0,
            idle_reads: 0,
            read_ns: 1,
            reads_per_write: 1,
            seed: 0,
        }
    }

    fn counted(host: u64, data: u64) -> Option<WriteCounters> {
        Some(WriteCounters { host, data, meta: 0 })
    }

    #[test]
    fn bins_sum_completions_and_difference_the_counters_at_their_starts() {
        let second = 1_000_000_000;
        let mut b = Bins::new(100, &plan(second), counted(0, 0));
        b.add(100 + second / 2, 1 << 20, || unreachable!("bin 0 is open"));
        b.add(100 + second - 1, 1 << 20, || unreachable!("bin 0 is open"));
        // Nothing completes in bin 1; bin 2 starts with these counters.
        b.add(100 + 2 * second + 5, 3 << 20, || counted(10, 30));
        b.add(100 + 3 * second, 1 << 20, || counted(20, 50));
        // The run ends inside bin 3: three whole bins.
        let (mib_s, waf, running) = b.finish(100 + 3 * second + 7, counted(25, 60));
        assert_eq!(mib_s, vec![2.0, 0.0, 3.0]);
        // Bins 0 and 1 share the reading taken in bin 2.
        assert_eq!(waf, vec![Some(3.0), None, Some(2.0)]);
        assert_eq!(running, vec![Some(3.0), Some(3.0), Some(2.5)]);
    }
}
