//! A randomized command exerciser with a reference model of the data.
//!
//! It drives a controller through real queues with a mix of well-formed
//! commands (writes at and around write pointers, appends, reads across
//! zones, zone management with and without Select All, reports, copies,
//! write zeroes, flushes), mutated and entirely random submission entries,
//! hostile admin commands and power cuts, and keeps a byte-exact model of
//! what every block must read back. [`Exerciser::verify`] reads the whole
//! device and compares. The randomness comes from a [`Choices`] source: a
//! seeded RNG for the soak test, the fuzzer's bytes for the fuzz target.
//!
//! Only well-formed commands carry valid data pointers, so only they can
//! move data; every other command may only fail or change zone state, and
//! any other outcome is reported as a model violation.

use std::sync::Arc;

use zns_spec::{StatusCode, SubmissionEntry};

use crate::harness::{Harness, HarnessError};
use crate::host::{DmaAllocation, HostMemory, ProcessMemory};
use crate::{Controller, Emulator};

/// A source of choices.
pub trait Choices {
    /// A value in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64;
    /// Any 64-bit value.
    fn any(&mut self) -> u64;
    /// True with probability about `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

impl<R: rand::RngCore> Choices for R {
    fn below(&mut self, n: u64) -> u64 {
        rand::Rng::gen_range(self, 0..n)
    }
    fn any(&mut self) -> u64 {
        self.next_u64()
    }
}

/// Choices read from a byte string (fuzzer input); zeros when exhausted.
#[derive(Debug)]
pub struct ByteChoices<'a> {
    data: &'a [u8],
}

impl<'a> ByteChoices<'a> {
    /// Wraps fuzzer input.
    pub fn new(data: &'a [u8]) -> Self {
        ByteChoices { data }
    }

    /// True when every byte has been used.
    pub fn exhausted(&self) -> bool {
        self.data.is_empty()
    }
}

impl Choices for ByteChoices<'_> {
    fn below(&mut self, n: u64) -> u64 {
        let v = if n <= 256 { self.take(1) } else { self.take(8) };
        v % n
    }
    fn any(&mut self) -> u64 {
        self.take(8)
    }
}

impl ByteChoices<'_> {
    fn take(&mut self, k: usize) -> u64 {
        let k = k.min(self.data.len());
        let mut b = [0u8; 8];
        b[..k].copy_from_slice(&self.data[..k]);
        self.data = &self.data[k..];
        u64::from_le_bytes(b)
    }
}

/// What went wrong: the device disagrees with the model.
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// Bring-up failed.
    #[error("bring-up: {0}")]
    Harness(#[from] HarnessError),
    /// A block reads back differently from the model.
    #[error("namespace {nsid} LBA {lba}: content differs from the model")]
    Data {
        /// Namespace.
        nsid: u32,
        /// Block.
        lba: u64,
    },
    /// A command that must fail (no valid data pointer) moved data.
    #[error("command {0:?} moved data without a valid data pointer")]
    PhantomData(SubmissionEntry),
    /// A command the model considers valid failed unexpectedly.
    #[error("command {sqe:?} failed: {status}")]
    Unexpected {
        /// The command.
        sqe: SubmissionEntry,
        /// Its status.
        status: zns_spec::Status,
    },
    /// The zone bookkeeping is inconsistent.
    #[error("zone invariants: {0}")]
    Invariant(String),
}

const BS: usize = 4096;
const MAX_BLOCKS: u64 = 8;

/// The exerciser: a `tiny` controller, its queues, and the model.
pub struct Exerciser {
    h: Harness,
    /// Expected bytes of namespace 1 (zoned) and 2 (conventional).
    model: [Vec<u8>; 2],
    data: DmaAllocation,
    junk: DmaAllocation,
    list: DmaAllocation,
    generation: u64,
    zone_size: u64,
    zones: u64,
    conventional_blocks: u64,
    /// Commands submitted.
    pub commands: u64,
    /// Commands that completed successfully.
    pub successes: u64,
    /// Power cuts performed.
    pub power_cuts: u64,
}

impl std::fmt::Debug for Exerciser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exerciser").field("commands", &self.commands).finish_non_exhaustive()
    }
}

impl Exerciser {
    /// A fresh `tiny` device, brought up.
    pub fn new() -> Result<Exerciser, Violation> {
        let memory = ProcessMemory::new();
        let ctrl =
            Emulator::builder("tiny").expect("built-in").build(memory.clone()).expect("build");
        let p = ctrl.profile().namespaces.clone();
        let h = Harness::start(ctrl, memory, 64)?;
        let alloc = |n| h.memory.allocate(n, 4096).expect("host memory");
        let zns = &p[0];
        Ok(Exerciser {
            model: [
                vec![0; (zns.zones as u64 * zns.zone_size) as usize * BS],
                vec![0; p[1].blocks as usize * BS],
            ],
            data: alloc(MAX_BLOCKS as usize * BS * 4),
            junk: alloc(8192),
            list: alloc(4096),
            generation: 0,
            zone_size: zns.zone_size,
            zones: zns.zones as u64,
            conventional_blocks: p[1].blocks,
            h,
            commands: 0,
            successes: 0,
            power_cuts: 0,
        })
    }

    /// The controller under test.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.h.ctrl
    }

    fn written_extent(&self, zone: u64) -> u64 {
        let z = self.h.ctrl.namespaces()[0].zones().expect("zoned");
        z.zone_info(zone as u32).expect("zone").written_extent
    }

    /// Fills the data buffer with a fresh pattern for `blocks` blocks and
    /// returns a command with PRPs pointing at it.
    fn with_data(&mut self, op: u8, nsid: u32, slba: u64, blocks: u64) -> SubmissionEntry {
        self.generation += 1;
        let mut bytes = vec![0u8; blocks as usize * BS];
        for (i, w) in bytes.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&(self.generation.rotate_left(17) ^ i as u64 ^ slba).to_le_bytes());
        }
        self.h.memory.write(self.data.addr(), &bytes).expect("data buffer");
        let mut e = SubmissionEntry::new(op, nsid);
        e.set_cdw10_11(slba);
        e.cdw12 = (blocks - 1) as u32;
        self.set_prps(&mut e, self.data.addr(), blocks as usize * BS);
        e
    }

    fn set_prps(&mut self, e: &mut SubmissionEntry, addr: u64, len: usize) {
        e.prp1 = addr;
        let pages = len.div_ceil(BS);
        if pages == 2 {
            e.prp2 = addr + BS as u64;
        } else if pages > 2 {
            let l: Vec<u8> =
                (1..pages as u64).flat_map(|i| (addr + i * BS as u64).to_le_bytes()).collect();
            self.h.memory.write(self.list.addr(), &l).expect("list");
            e.prp2 = self.list.addr();
        }
    }

    fn data_bytes(&self, blocks: u64) -> Vec<u8> {
        let mut v = vec![0u8; blocks as usize * BS];
        self.h.memory.read(self.data.addr(), &mut v).expect("data buffer");
        v
    }

    /// Runs one randomly chosen step.
    pub fn step(&mut self, c: &mut impl Choices) -> Result<(), Violation> {
        let zone = c.below(self.zones);
        let zslba = zone * self.zone_size;
        let blocks = 1 + c.below(MAX_BLOCKS);
        match c.below(100) {
            0..=29 => {
                // Write at the write pointer, sometimes beside it.
                let mut slba = self.written_extent(zone);
                if c.chance(10) {
                    slba = slba.wrapping_add(c.below(3)).wrapping_sub(1);
                }
                let e = self.with_data(0x01, 1, slba, blocks);
                let mut e = e;
                if c.chance(5) {
                    e.cdw12 |= 1 << 30; // FUA
                }
                self.data_command(e, 0, slba, blocks)
            }
            30..=44 => {
                let e = self.with_data(0x7D, 1, zslba, blocks);
                let r = self.submit(e);
                if r.status().is_success() {
                    let lba = r.result_u64();
                    let bytes = self.data_bytes(blocks);
                    self.store(0, lba, &bytes);
                }
                Ok(())
            }
            45..=59 => {
                let nsid = 1 + c.below(2) as u32;
                let cap =
                    if nsid == 1 { self.zones * self.zone_size } else { self.conventional_blocks };
                let slba = c.below(cap + 4);
                let mut e = SubmissionEntry::new(0x02, nsid);
                e.set_cdw10_11(slba);
                e.cdw12 = (blocks - 1) as u32;
                let addr = self.data.addr();
                self.set_prps(&mut e, addr, blocks as usize * BS);
                let r = self.submit(e);
                if r.status().is_success() {
                    let got = self.data_bytes(blocks);
                    let m = &self.model[nsid as usize - 1];
                    let want = &m[slba as usize * BS..(slba + blocks) as usize * BS];
                    if got != want {
                        let bad = (0..blocks as usize)
                            .find(|&i| got[i * BS..(i + 1) * BS] != want[i * BS..(i + 1) * BS])
                            .unwrap_or(0);
                        return Err(Violation::Data { nsid, lba: slba + bad as u64 });
                    }
                }
                Ok(())
            }
            60..=71 => {
                let mut e = SubmissionEntry::new(0x79, 1);
                e.set_cdw10_11(if c.chance(90) {
                    zslba
                } else {
                    c.below(self.zones * self.zone_size + 8)
                });
                let action = [0x01, 0x02, 0x03, 0x04, 0x04, 0x05, 0x10, c.below(256) as u32];
                e.cdw13 = action[c.below(8) as usize] | if c.chance(8) { 1 << 8 } else { 0 };
                if c.chance(3) {
                    e.cdw13 |= 1 << 9;
                }
                e.prp1 = self.junk.addr();
                self.zone_state_command(e)
            }
            72..=76 => {
                let mut e = SubmissionEntry::new(0x7A, 1);
                e.set_cdw10_11(c.below(self.zones * self.zone_size + 8));
                e.prp1 = self.junk.addr();
                e.prp2 = self.junk.addr() + 4096;
                e.cdw12 = c.below(2048) as u32;
                e.cdw13 = c.below(2) as u32 | (c.below(10) as u32) << 8 | (c.below(2) as u32) << 16;
                self.zone_state_command(e)
            }
            77..=80 => self.copy(c),
            81..=83 => {
                let nsid = 1 + c.below(2) as u32;
                let slba = if nsid == 1 {
                    self.written_extent(zone)
                } else {
                    c.below(self.conventional_blocks)
                };
                let mut e = SubmissionEntry::new(0x08, nsid);
                e.set_cdw10_11(slba);
                e.cdw12 = (blocks - 1) as u32;
                let r = self.submit(e);
                if r.status().is_success() {
                    self.store(nsid as usize - 1, slba, &vec![0; blocks as usize * BS]);
                }
                Ok(())
            }
            84..=85 => {
                let e = SubmissionEntry::new(0x00, if c.chance(50) { 1 } else { 0xFFFF_FFFF });
                let r = self.submit(e);
                if !r.status().is_success() {
                    return Err(Violation::Unexpected { sqe: e, status: r.status() });
                }
                Ok(())
            }
            86..=89 => {
                let slba = c.below(self.conventional_blocks - blocks + 1);
                let e = self.with_data(0x01, 2, slba, blocks);
                self.data_command(e, 1, slba, blocks)
            }
            90..=97 => {
                // Garbage: mutated or random entries without valid data pointers.
                let mut e = SubmissionEntry::from_bytes(&{
                    let mut b = [0u8; 64];
                    for w in b.chunks_exact_mut(8) {
                        w.copy_from_slice(&c.any().to_le_bytes());
                    }
                    b
                });
                if c.chance(70) {
                    let ops = [0x00, 0x01, 0x02, 0x08, 0x19, 0x79, 0x7A, 0x7D, 0x04, 0x05, 0x09];
                    e.cdw0 = (e.cdw0 & !0xFFFF) | ops[c.below(ops.len() as u64) as usize];
                    e.nsid = c.below(4) as u32;
                    e.cdw12 &= 0xFFFF_000F;
                    if c.chance(50) {
                        e.set_cdw10_11(c.below(self.zones * self.zone_size + 8));
                    }
                }
                if e.psdt() == 0 && c.chance(50) {
                    e.prp1 = 0;
                    e.prp2 = 0;
                }
                self.zone_state_command(e)
            }
            98 => self.admin_garbage(c),
            _ => {
                if c.chance(20) {
                    self.power_cut(c.any())
                } else {
                    Ok(())
                }
            }
        }
    }

    fn submit(&mut self, e: SubmissionEntry) -> zns_spec::CompletionEntry {
        self.commands += 1;
        let r = self.h.io(e);
        if r.status().is_success() {
            self.successes += 1;
        }
        r
    }

    fn store(&mut self, ns: usize, lba: u64, bytes: &[u8]) {
        let at = lba as usize * BS;
        self.model[ns][at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn data_command(
        &mut self,
        e: SubmissionEntry,
        ns: usize,
        slba: u64,
        blocks: u64,
    ) -> Result<(), Violation> {
        let r = self.submit(e);
        if r.status().is_success() {
            let bytes = self.data_bytes(blocks);
            self.store(ns, slba, &bytes);
        }
        Ok(())
    }

    /// A command that may change zone states but never writes data: after
    /// success, zones now empty lose their model contents.
    fn zone_state_command(&mut self, e: SubmissionEntry) -> Result<(), Violation> {
        let before: Vec<u64> = (0..self.zones).map(|z| self.written_extent(z)).collect();
        let r = self.submit(e);
        for z in 0..self.zones {
            let now = self.written_extent(z);
            let start = z * self.zone_size;
            if now < before[z as usize] {
                if now != start {
                    return Err(Violation::Invariant(format!("zone {z} extent shrank to {now}")));
                }
                let a = start as usize * BS;
                self.model[0][a..a + self.zone_size as usize * BS].fill(0);
            } else if now > before[z as usize] {
                // Only Write Zeroes may advance without data.
                if r.status().is_success() && e.opcode() == 0x08 && e.nsid == 1 {
                    let from = before[z as usize] as usize * BS;
                    self.model[0][from..now as usize * BS].fill(0);
                } else {
                    return Err(Violation::PhantomData(e));
                }
            }
        }
        if r.status().is_success() && e.opcode() == 0x08 && e.nsid == 2 {
            let w = zns_spec::command::WriteZeroes::decode(&e);
            self.store(1, w.slba, &vec![0; w.blocks as usize * BS]);
        }
        Ok(())
    }

    fn copy(&mut self, c: &mut impl Choices) -> Result<(), Violation> {
        let nsid = 1 + c.below(2) as u32;
        let ranges = 1 + c.below(3);
        let cap = if nsid == 1 { self.zones * self.zone_size } else { self.conventional_blocks };
        let mut desc = Vec::new();
        let mut srcs = Vec::new();
        for _ in 0..ranges {
            let n = 1 + c.below(4);
            let s = c.below(cap - n + 1);
            let r = zns_spec::copy::SourceRangeFormat0::new(s, n as u32);
            desc.extend_from_slice(&r.to_bytes().expect("1..=4 blocks encode"));
            srcs.push((s, n));
        }
        self.h.memory.write(self.junk.addr(), &desc).expect("junk");
        let dest = if nsid == 1 {
            let z = c.below(self.zones);
            self.written_extent(z)
        } else {
            c.below(cap)
        };
        let mut e = SubmissionEntry::new(0x19, nsid);
        e.set_cdw10_11(dest);
        e.cdw12 = (ranges - 1) as u32;
        e.prp1 = self.junk.addr();
        let ns = nsid as usize - 1;
        let mut gathered = Vec::new();
        for (s, n) in &srcs {
            gathered.extend_from_slice(&self.model[ns][*s as usize * BS..(*s + *n) as usize * BS]);
        }
        let r = self.submit(e);
        if r.status().is_success() {
            self.store(ns, dest, &gathered);
        }
        Ok(())
    }

    fn admin_garbage(&mut self, c: &mut impl Choices) -> Result<(), Violation> {
        let mut b = [0u8; 64];
        for w in b.chunks_exact_mut(8) {
            w.copy_from_slice(&c.any().to_le_bytes());
        }
        let mut e = SubmissionEntry::from_bytes(&b);
        let ops = [0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0A, 0x0C, 0x18, 0x7F];
        e.cdw0 = (e.cdw0 & !0xFFFF) | ops[c.below(ops.len() as u64) as usize];
        e.nsid = c.below(4) as u32;
        // Keep the exerciser's own I/O queue pair alive, and keep the
        // controller's command sets as set up (a different profile would
        // legitimately detach the zoned namespace).
        let op = e.opcode();
        if matches!(op, 0x00 | 0x04) && e.cdw10 as u16 <= 1 {
            e.cdw10 |= 0x100;
        }
        if matches!(op, 0x09) && e.cdw10 as u8 == 0x19 {
            e.cdw10 &= !0xFF;
        }
        if matches!(op, 0x01 | 0x05) {
            e.prp1 = self.junk.addr();
            e.cdw10 = (e.cdw10 & 0xFFFF_0000) | (2 + c.below(8) as u32);
            e.cdw10 &= 0x000F_FFFF;
        }
        if c.chance(50) {
            e.prp1 = self.junk.addr();
            e.prp2 = 0;
        }
        self.commands += 1;
        let r = self.h.admin(e);
        if r.status().is_success() {
            self.successes += 1;
        }
        // The queue pair must still work.
        let probe = SubmissionEntry::new(0x00, 1);
        let p = self.submit(probe);
        if !p.status().is_success() {
            return Err(Violation::Unexpected { sqe: e, status: p.status() });
        }
        Ok(())
    }

    /// Cuts power, brings the controller up again, and drops from the model
    /// what the cut legitimately lost (undurable zone tails).
    pub fn power_cut(&mut self, seed: u64) -> Result<(), Violation> {
        self.power_cuts += 1;
        self.h.ctrl.power_cut(seed);
        let ctrl = Arc::clone(&self.h.ctrl);
        let memory = Arc::clone(&self.h.memory);
        self.h = Harness::start(ctrl, memory, 64)?;
        for z in 0..self.zones {
            let now = self.written_extent(z) as usize;
            let end = ((z + 1) * self.zone_size) as usize;
            self.model[0][now * BS..end * BS].fill(0);
        }
        Ok(())
    }

    /// Reads the whole device and compares it with the model; checks the
    /// zone bookkeeping.
    pub fn verify(&mut self) -> Result<(), Violation> {
        let zones = self.h.ctrl.namespaces()[0].zones().expect("zoned");
        zones.check_invariants().map_err(Violation::Invariant)?;
        for (ns, cap) in [(0usize, self.zones * self.zone_size), (1, self.conventional_blocks)] {
            for slba in (0..cap).step_by(MAX_BLOCKS as usize) {
                let mut e = SubmissionEntry::new(0x02, ns as u32 + 1);
                e.set_cdw10_11(slba);
                e.cdw12 = (MAX_BLOCKS - 1) as u32;
                let addr = self.data.addr();
                self.set_prps(&mut e, addr, MAX_BLOCKS as usize * BS);
                let r = self.h.io(e);
                if r.status().is(StatusCode::ZoneIsOffline) {
                    continue;
                }
                if !r.status().is_success() {
                    return Err(Violation::Unexpected { sqe: e, status: r.status() });
                }
                let got = self.data_bytes(MAX_BLOCKS);
                for i in 0..MAX_BLOCKS as usize {
                    let at = (slba as usize + i) * BS;
                    if got[i * BS..(i + 1) * BS] != self.model[ns][at..at + BS] {
                        return Err(Violation::Data { nsid: ns as u32 + 1, lba: slba + i as u64 });
                    }
                }
            }
        }
        Ok(())
    }
}
