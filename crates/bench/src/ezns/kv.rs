//! A key-value workload per tenant: YCSB-like mixes over a small
//! log-structured store.
//!
//! The store keeps values of one block (4 KiB) and an index in memory
//! (key → LBA). Updates go into an in-memory batch (a memtable); a full
//! batch is flushed with one Zone Append to one of `heads` logical zones
//! written round robin, and while `max_flushing` flushes are in flight and
//! the batch is full, updates wait (a write stall). A read of a key whose
//! newest version is still in memory is answered from memory; any other
//! read reads the value's block. A logical zone's capacity is a whole
//! number of batches, so heads fill exactly and become Full; space is
//! never reclaimed (the runs are sized to fit), so there is no garbage
//! collection.
//!
//! Closed loop: `clients` clients per tenant, each with one operation at a
//! time; an operation's latency is device time from its start to its end
//! (0 for one served from memory without waiting).

use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use zns_device::{Completion, ZoneOp};

use super::engine::{check, Load, Port};
use super::EznsBenchError;
use crate::characterize::stats::LatencyHistogram;

/// A YCSB core workload mix.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mix {
    /// Update heavy: 50 % reads, 50 % updates.
    A,
    /// Read mostly: 95 % reads, 5 % updates.
    B,
    /// Read only.
    C,
    /// Read-modify-write: 50 % reads, 50 % read-modify-writes.
    F,
}

impl Mix {
    /// Every mix, in the order the experiment runs them.
    pub const ALL: [Mix; 4] = [Mix::A, Mix::B, Mix::C, Mix::F];

    /// `"A"`, `"B"`, `"C"`, `"F"`.
    pub fn name(self) -> &'static str {
        match self {
            Mix::A => "A",
            Mix::B => "B",
            Mix::C => "C",
            Mix::F => "F",
        }
    }

    /// Fraction of operations that only read.
    fn read_fraction(self) -> f64 {
        match self {
            Mix::A | Mix::F => 0.5,
            Mix::B => 0.95,
            Mix::C => 1.0,
        }
    }
}

/// YCSB's scrambled Zipfian key chooser (Gray et al.'s generator, constant
/// 0.99, ranks hashed so hot keys are spread over the key space).
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub(crate) struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    /// YCSB's constant.
    const THETA: f64 = 0.99;

    /// Keys `0 .. n`.
    pub fn new(n: u64) -> Zipf {
        let theta = Self::THETA;
        let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n, theta, alpha: 1.0 / (1.0 - theta), zetan, eta }
    }

    /// A key.
    pub fn next(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        let rank = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            ((self.n as f64) * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        fnv1a(rank.min(self.n - 1)) % self.n
    }
}

/// FNV-1a of the eight bytes of `x` (YCSB's scrambling hash).
fn fnv1a(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What a client is doing.
#[derive(Debug, Clone, Copy)]
enum Client {
    Idle,
    /// A read of `key` in flight; `then_update` for read-modify-write.
    Reading {
        start: u64,
        key: u32,
        then_update: bool,
    },
    /// Waiting for room in the batch to update `key`.
    Updating {
        start: u64,
        key: u32,
    },
}

/// A flush in flight: its batch's sequence number and keys.
#[derive(Debug)]
struct Flush {
    seq: u32,
    keys: Vec<u32>,
}

/// Sizes of a store.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KvShape {
    /// Keys (a whole number of batches).
    pub keys: u64,
    /// Records per batch (128 KiB of 4 KiB values: 32).
    pub batch: usize,
    /// Flushes in flight at most.
    pub max_flushing: usize,
    /// Logical zones written at once.
    pub heads: usize,
    /// Clients per tenant.
    pub clients: usize,
}

/// One tenant's store and its clients.
///
/// Thread safety: owned by the engine's thread.
pub(crate) struct KvStore {
    shape: KvShape,
    zipf: Zipf,
    /// Key → LBA of its newest flushed version (`u64::MAX`: none).
    index: Vec<u64>,
    /// Key → 1 + sequence number of the batch holding its newest version
    /// (0: none in memory).
    in_mem: Vec<u32>,
    batch: Vec<u32>,
    seq: u32,
    flushing: Vec<Option<Flush>>,
    /// `(logical zone, blocks reserved)` per head.
    heads: Vec<(u64, u64)>,
    next_head: usize,
    next_zone: u64,
    zones: u64,
    clients: Vec<Client>,
    /// The mix running; `None` while loading.
    mix: Option<Mix>,
    loaded: u64,
    stopped: bool,
    bs: u64,
    /// Every operation's latency.
    pub all: LatencyHistogram,
    /// Reads' latencies.
    pub reads: LatencyHistogram,
    /// Updates' and read-modify-writes' latencies.
    pub updates: LatencyHistogram,
    /// Operations completed.
    pub ops: u64,
    /// Bytes written (flushes) and read.
    pub io: (u64, u64),
}

impl KvStore {
    /// A store of `shape` on the tenant of `port`, with `zones` logical
    /// zones.
    pub fn new(shape: KvShape, zones: u64, port: &Port) -> Result<KvStore, EznsBenchError> {
        let batch_blocks = shape.batch as u64;
        if shape.keys == 0 || !shape.keys.is_multiple_of(batch_blocks) {
            return Err(EznsBenchError::Invalid(format!(
                "{} keys is not a whole number of {}-record batches",
                shape.keys, shape.batch
            )));
        }
        if !port.zone_cap.is_multiple_of(batch_blocks) || zones < shape.heads as u64 {
            return Err(EznsBenchError::Invalid(format!(
                "a logical zone of {} blocks does not take whole batches of {} (or fewer than {} zones)",
                port.zone_cap, shape.batch, shape.heads
            )));
        }
        Ok(KvStore {
            shape,
            zipf: Zipf::new(shape.keys),
            index: vec![u64::MAX; shape.keys as usize],
            in_mem: vec![0; shape.keys as usize],
            batch: Vec::with_capacity(shape.batch),
            seq: 0,
            flushing: (0..shape.max_flushing).map(|_| None).collect(),
            heads: (0..shape.heads as u64).map(|z| (z, 0)).collect(),
            next_head: 0,
            next_zone: shape.heads as u64,
            zones,
            clients: vec![Client::Idle; shape.clients],
            mix: None,
            loaded: 0,
            stopped: false,
            bs: port.bs,
            all: LatencyHistogram::new(),
            reads: LatencyHistogram::new(),
            updates: LatencyHistogram::new(),
            ops: 0,
            io: (0, 0),
        })
    }

    /// Runs `mix` from now on, with fresh statistics.
    pub fn start_mix(&mut self, mix: Mix) {
        self.mix = Some(mix);
        self.stopped = false;
        // Operations a stop left waiting for room belong to the last mix.
        for c in &mut self.clients {
            if matches!(c, Client::Updating { .. }) {
                *c = Client::Idle;
            }
        }
        self.all = LatencyHistogram::new();
        self.reads = LatencyHistogram::new();
        self.updates = LatencyHistogram::new();
        self.ops = 0;
    }

    /// Puts `key` in the batch if it has room.
    fn put(&mut self, key: u32) -> bool {
        if self.batch.len() >= self.shape.batch {
            return false;
        }
        self.batch.push(key);
        self.in_mem[key as usize] = self.seq + 1;
        true
    }

    fn done(&mut self, start: u64, now: u64, update: bool) {
        let ns = now.saturating_sub(start);
        self.all.record(ns);
        if update {
            self.updates.record(ns);
        } else {
            self.reads.record(ns);
        }
        self.ops += 1;
    }

    /// Starts client `i`'s next operation at `now`.
    fn start_op(
        &mut self,
        i: usize,
        port: &mut Port,
        now: u64,
        rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError> {
        let Some(mix) = self.mix else {
            if self.loaded < self.shape.keys {
                let key = self.loaded as u32;
                self.loaded += 1;
                self.clients[i] = Client::Updating { start: now, key };
            }
            return Ok(());
        };
        let key = self.zipf.next(rng) as u32;
        let read_only = mix == Mix::C || rng.gen_bool(mix.read_fraction());
        if !read_only && mix != Mix::F {
            self.clients[i] = Client::Updating { start: now, key };
            return Ok(());
        }
        let then_update = !read_only;
        if self.in_mem[key as usize] != 0 {
            if then_update {
                self.clients[i] = Client::Updating { start: now, key };
            } else {
                self.done(now, now, false);
            }
            return Ok(());
        }
        let lba = self.index[key as usize];
        if lba == u64::MAX {
            return Err(EznsBenchError::Internal(format!("key {key} was never stored")));
        }
        let tag = (self.shape.max_flushing + i) as u64;
        port.submit(ZoneOp::Read { lba }, port.bs as usize, tag)?;
        self.clients[i] = Client::Reading { start: now, key, then_update };
        Ok(())
    }

    /// Puts client `i`'s waiting update into the batch if there is room
    /// (flushing a full batch first when a flush slot is free).
    fn try_update(&mut self, i: usize, port: &mut Port, now: u64) -> Result<(), EznsBenchError> {
        if let Client::Updating { start, key } = self.clients[i] {
            self.maybe_flush(port)?;
            if self.put(key) {
                self.clients[i] = Client::Idle;
                if self.mix.is_some() {
                    self.done(start, now, true);
                }
            }
        }
        Ok(())
    }

    /// Flushes the batch when it is full (or the load's last one) and a
    /// flush slot is free.
    fn maybe_flush(&mut self, port: &mut Port) -> Result<(), EznsBenchError> {
        let loading_done = self.mix.is_none() && self.loaded >= self.shape.keys;
        if self.batch.is_empty() || (self.batch.len() < self.shape.batch && !loading_done) {
            return Ok(());
        }
        let Some(slot) = self.flushing.iter().position(Option::is_none) else {
            return Ok(());
        };
        let n = self.batch.len() as u64;
        let h = self.next_head;
        self.next_head = (h + 1) % self.heads.len();
        if self.heads[h].1 + n > port.zone_cap {
            if self.next_zone >= self.zones {
                return Err(EznsBenchError::Invalid(format!(
                    "the store filled its tenant's {} logical zones: fewer keys or operations",
                    self.zones
                )));
            }
            self.heads[h] = (self.next_zone, 0);
            self.next_zone += 1;
        }
        let zslba = self.heads[h].0 * port.zone_size;
        self.heads[h].1 += n;
        port.submit(ZoneOp::Append { zslba, fua: false }, (n * port.bs) as usize, slot as u64)?;
        let keys = std::mem::replace(&mut self.batch, Vec::with_capacity(self.shape.batch));
        self.flushing[slot] = Some(Flush { seq: self.seq, keys });
        self.seq += 1;
        Ok(())
    }
}

impl Load for KvStore {
    fn submit(
        &mut self,
        port: &mut Port,
        now: u64,
        rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError> {
        for i in 0..self.clients.len() {
            self.try_update(i, port, now)?;
            if matches!(self.clients[i], Client::Idle) && !self.stopped {
                self.start_op(i, port, now, rng)?;
                // An update with room in the batch is done at once.
                self.try_update(i, port, now)?;
            }
        }
        self.maybe_flush(port)
    }

    fn complete(&mut self, c: &mut Completion, now: u64) -> Result<(), EznsBenchError> {
        let tag = c.tag as usize;
        if tag < self.shape.max_flushing {
            let lba = check(c, "flush a batch (Zone Append)")?;
            let f = self.flushing[tag].take().ok_or_else(|| {
                EznsBenchError::Internal(format!("a flush completion for idle slot {tag}"))
            })?;
            for (k, &key) in f.keys.iter().enumerate() {
                if self.in_mem[key as usize] == f.seq + 1 {
                    self.in_mem[key as usize] = 0;
                    self.index[key as usize] = lba + k as u64;
                }
            }
            self.io.0 += f.keys.len() as u64 * self.bs;
            return Ok(());
        }
        check(c, "read a value")?;
        self.io.1 += c.buffer.as_ref().map_or(0, |b| b.len() as u64);
        let i = tag - self.shape.max_flushing;
        match self.clients[i] {
            Client::Reading { start, key, then_update: true } => {
                self.clients[i] = Client::Updating { start, key };
            }
            Client::Reading { start, .. } => {
                self.clients[i] = Client::Idle;
                self.done(start, now, false);
            }
            other => {
                return Err(EznsBenchError::Internal(format!(
                    "a read completion for client {i} in state {other:?}"
                )))
            }
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.mix.is_none()
            && self.loaded >= self.shape.keys
            && self.batch.is_empty()
            && self.flushing.iter().all(Option::is_none)
            && self.clients.iter().all(|c| matches!(c, Client::Idle))
    }

    fn bytes(&self) -> (u64, u64) {
        self.io
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipf_keys_are_in_range_and_skewed() {
        let n = 10_000u64;
        let z = Zipf::new(n);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..200_000 {
            let k = z.next(&mut rng);
            assert!(k < n);
            counts[k as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // Uniform keys would give 20 each; YCSB's Zipfian constant puts
        // several percent of all requests on the hottest key and far more
        // than a tenth of them on the hottest 1 %.
        assert!(counts[0] > 5_000, "hottest key {}", counts[0]);
        let top: u32 = counts[..100].iter().sum();
        assert!(top > 60_000, "hottest 1 %: {top}");
        assert!(counts.iter().filter(|&&c| c > 0).count() > 3_000);
    }

    #[test]
    fn mixes_read_what_ycsb_reads() {
        assert_eq!(Mix::ALL.map(Mix::name), ["A", "B", "C", "F"]);
        assert_eq!(Mix::C.read_fraction(), 1.0);
        assert_eq!(Mix::B.read_fraction(), 0.95);
    }
}
