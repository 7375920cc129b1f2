//! The workloads, the same on every side: a sequential fill, random
//! overwrites (preconditioning, then the measured sustained run, binned by
//! device time), uniform over the capacity or hot/cold (a hot range taking
//! most writes), and 4 KiB random reads alone and beside a writer.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::super::progress::Observer;
use super::super::stats::LatencyHistogram;
use super::super::CharacterizeError;
use super::results::{Counted, Phase, ReadTails, Sustained};
use super::side::{Heat, Side, WriteCounters};

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
    /// Steps of each phase for the progress bars (fill, preconditioning,
    /// sustained, reads): the fill and preconditioning in MiB, the timed
    /// phases in device ms.
    pub fn steps(&self, capacity_bytes: u64) -> [u64; 4] {
        [
            capacity_bytes / STEP_BYTES,
            (capacity_bytes as f64 * self.precondition) as u64 / STEP_BYTES,
            self.sustained_ns / STEP_NS,
            self.read_ns / STEP_NS + self.idle_reads.div_ceil(1000),
        ]
    }
}

/// Where the random writes of a workload go.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mix {
    /// Every slot alike; the host knows nothing of the data.
    Uniform,
    /// The first `hot_fraction` of the slots (a range the host knows)
    /// take `hot_share` of the writes, at random; the rest take the
    /// remainder, in order round and round (a log, as a flash cache's
    /// large objects or a log-structured store's cold data) or at random.
    HotCold {
        /// Fraction of the slots that are hot.
        hot_fraction: f64,
        /// Fraction of the writes that go to them.
        hot_share: f64,
        /// Cold slots written in order, round and round (else at random).
        cold_in_order: bool,
    },
}

impl Mix {
    /// Mixed into the seed, so that the workloads draw different offsets.
    fn salt(self) -> u64 {
        match self {
            Mix::Uniform => 0,
            Mix::HotCold { .. } => 0x5BD1_E995,
        }
    }
}

/// Requests of `request_blocks` at aligned offsets: the device's blocks
/// divided into slots, the first `hot` of them hot.
struct Slots {
    count: u64,
    blocks: u64,
    /// Hot slots (0: uniform).
    hot: u64,
    /// Fraction of the writes to the hot slots.
    share: f64,
    /// The next cold slot when cold slots are written in order.
    cold_next: Option<u64>,
}

impl Slots {
    /// Slots of `blocks` blocks over `total` blocks.
    fn new(total: u64, blocks: u64, mix: Mix) -> Result<Slots, CharacterizeError> {
        let count = total / blocks;
        if count < 2 {
            return Err(CharacterizeError::Invalid(format!(
                "{total} blocks cannot take random requests of {blocks} blocks"
            )));
        }
        let (hot, share, cold_next) = match mix {
            Mix::Uniform => (0, 0.0, None),
            Mix::HotCold { hot_fraction, hot_share, cold_in_order } => {
                // At least one hot and one cold slot.
                let hot = ((count as f64 * hot_fraction).round() as u64).clamp(1, count - 1);
                (hot, hot_share, cold_in_order.then_some(hot))
            }
        };
        Ok(Slots { count, blocks, hot, share, cold_next })
    }

    /// What the host knows of slot `i`'s data.
    fn heat(&self, i: u64) -> Heat {
        match (self.hot, i < self.hot) {
            (0, _) => Heat::Unknown,
            (_, true) => Heat::Hot,
            (_, false) => Heat::Cold,
        }
    }

    /// The next slot's first block and heat: uniform, or hot with
    /// probability `share` (a random hot slot), else the next cold slot
    /// in order or a random one.
    fn random(&mut self, rng: &mut SmallRng) -> (u64, Heat) {
        let slot = if self.hot == 0 {
            rng.gen_range(0..self.count)
        } else if rng.gen_bool(self.share) {
            rng.gen_range(0..self.hot)
        } else if let Some(next) = self.cold_next.as_mut() {
            let slot = *next;
            *next = if slot + 1 == self.count { self.hot } else { slot + 1 };
            slot
        } else {
            rng.gen_range(self.hot..self.count)
        };
        (slot * self.blocks, self.heat(slot))
    }
}

/// Writes every slot once, in order (each as hot or cold as `mix` makes
/// it).
pub(crate) fn fill(
    side: &dyn Side,
    plan: &Plan,
    mix: Mix,
    obs: &dyn Observer,
) -> Result<Phase, CharacterizeError> {
    let slots = Slots::new(side.blocks(), plan.request_blocks, mix)?;
    let mut lane = side.lane(plan.request_blocks)?;
    let bytes_per = plan.request_blocks * side.block_size() as u64;
    let (t0, w0, c0) = (side.now(), Instant::now(), side.counters());
    let mut stepped = 0u64;
    for i in 0..slots.count {
        lane.write(i * slots.blocks, slots.blocks, slots.heat(i))?;
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

/// Random writes as `mix` spreads them: `plan.precondition` capacities
/// (calling `measure` when they are done), then `plan.sustained_ns` of
/// device time more, binned by device time from the first write on.
pub(crate) fn random_writes(
    side: &dyn Side,
    plan: &Plan,
    mix: Mix,
    obs: &dyn Observer,
    measure: &dyn Fn(),
) -> Result<(Phase, Sustained), CharacterizeError> {
    let mut slots = Slots::new(side.blocks(), plan.request_blocks, mix)?;
    let mut lane = side.lane(plan.request_blocks)?;
    let mut rng = SmallRng::seed_from_u64(plan.seed ^ 0x9E37_79B9 ^ mix.salt());
    let bytes_per = plan.request_blocks * side.block_size() as u64;
    let total = (side.blocks() as f64 * side.block_size() as f64 * plan.precondition) as u64;
    let (t0, w0, c0) = (side.now(), Instant::now(), side.counters());
    let mut bins = Bins::new(t0, plan, c0);
    let (mut bytes, mut stepped, mut t) = (0u64, 0u64, t0);
    while bytes < total {
        let (lba, heat) = slots.random(&mut rng);
        lane.write(lba, slots.blocks, heat)?;
        t = side.now();
        bins.add(t, bytes_per, || side.counters());
        bytes += bytes_per;
        let done = bytes / STEP_BYTES;
        obs.step(done - stepped);
        stepped = done;
    }
    let pre = Phase::new(bytes, t - t0, w0, waf(side, c0));
    measure();
    let (m0, mw0, mc0, check0) = (t, Instant::now(), side.counters(), side.check_counters());
    let end = m0 + plan.sustained_ns;
    let mut hist = LatencyHistogram::new();
    (bytes, stepped) = (0, 0);
    while t < end {
        let (lba, heat) = slots.random(&mut rng);
        let submitted = side.now();
        lane.write(lba, slots.blocks, heat)?;
        t = side.now();
        hist.record(t - submitted);
        bins.add(t, bytes_per, || side.counters());
        bytes += bytes_per;
        let done = (t - m0).min(plan.sustained_ns) / STEP_NS;
        obs.step(done - stepped);
        stepped = done;
    }
    let (last, check) = (side.counters(), side.check_counters());
    let totals = last.zip(mc0).map(|(c, c0)| c.since(c0));
    let check = check.zip(check0).map(|((c, source), (c0, _))| (c.since(c0), source));
    let first = (m0 - t0).div_ceil(plan.bin_ns) as usize;
    let series = bins.finish(t, last);
    let measured = Phase::new(bytes, t - m0, mw0, totals.and_then(|d| d.waf()));
    let counted = Counted { totals, source: side.counter_source(), check };
    Ok((pre, Sustained::new(measured, plan.bin_ns, first, series, counted, hist.stats())))
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
    let mut slots = Slots::new(side.blocks(), plan.request_blocks, Mix::Uniform)?;
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
        let (lba, heat) = slots.random(&mut rng);
        writer.write(lba, slots.blocks, heat)?;
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

    #[test]
    fn hot_cold_slots_send_the_share_to_the_hot_range_and_cycle_the_cold_one() {
        let mix = Mix::HotCold { hot_fraction: 0.2, hot_share: 0.8, cold_in_order: true };
        let mut s = Slots::new(1000, 10, mix).unwrap();
        assert_eq!((s.count, s.hot), (100, 20));
        let mut rng = SmallRng::seed_from_u64(7);
        let (mut hot, mut cold) = (0u32, Vec::new());
        for _ in 0..10_000 {
            match s.random(&mut rng) {
                (lba, Heat::Hot) => {
                    assert!(lba < 200 && lba % 10 == 0, "{lba}");
                    hot += 1;
                }
                (lba, Heat::Cold) => cold.push(lba),
                other => panic!("{other:?}"),
            }
        }
        assert!((7700..8300).contains(&hot), "{hot} of 10000 hot");
        // The cold range in order, round and round, from its first slot.
        let want: Vec<u64> = (0..cold.len() as u64).map(|i| 200 + i % 80 * 10).collect();
        assert_eq!(cold, want);
        // At random, the cold writes cover the cold range out of order.
        let mix = Mix::HotCold { hot_fraction: 0.2, hot_share: 0.8, cold_in_order: false };
        let mut s = Slots::new(1000, 10, mix).unwrap();
        let cold: Vec<u64> = (0..2000)
            .filter_map(|_| match s.random(&mut rng) {
                (lba, Heat::Cold) => Some(lba),
                _ => None,
            })
            .collect();
        assert!(cold.iter().all(|&l| (200..1000).contains(&l)));
        assert!(cold.windows(2).any(|w| w[1] < w[0]), "not in order");
        // The fill knows each slot's heat; the uniform workload knows none.
        assert_eq!((s.heat(19), s.heat(20)), (Heat::Hot, Heat::Cold));
        let u = Slots::new(1000, 10, Mix::Uniform).unwrap();
        assert_eq!((u.hot, u.heat(0)), (0, Heat::Unknown));
        // A range too small for two slots is refused.
        assert!(Slots::new(15, 10, Mix::Uniform).is_err());
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
