//! The conventional firmware through real queues: commands, garbage
//! collection against a reference model, power cuts, bad input.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zns_spec::command::{
    DatasetManagement, DsmRange, Flush, ReadWrite, WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::{ReportFilter, StatusCode, SubmissionEntry, ZoneSendAction};

use crate::harness::Harness;
use crate::host::{DmaAllocation, HostMemory, ProcessMemory};
use crate::profile::{FtlProfile, Profile};
use crate::Emulator;

const BS: usize = 4096;

/// `small-conv` cut to 16 segments of 64 blocks, OP 50 %: 682 blocks
/// exposed, garbage collection after a few hundred writes.
fn tiny_conv(op: f64) -> Profile {
    let mut p = Profile::by_name("small-conv").unwrap();
    let ns = &mut p.namespaces[0];
    ns.metadata_size = 0;
    ns.ftl = Some(FtlProfile {
        flash_zones: 16,
        flash_zone_blocks: 64,
        segment_blocks: 64,
        over_provisioning: op,
        policy: "greedy".into(),
    });
    p.validate().unwrap();
    p
}

struct Rig {
    h: Harness,
    buf: DmaAllocation,
    /// A PRP list naming the buffer's pages after the first.
    list: DmaAllocation,
}

impl Rig {
    fn new(profile: Profile) -> Rig {
        let memory = ProcessMemory::new();
        let ctrl = Emulator::with_profile(profile).build(memory.clone()).unwrap();
        let h = Harness::start(ctrl, memory, 64).unwrap();
        let buf = h.buffer(64 * BS);
        let list = h.buffer(BS);
        let entries: Vec<u8> =
            (1..64u64).flat_map(|i| (buf.addr() + i * BS as u64).to_le_bytes()).collect();
        h.memory.write(list.addr(), &entries).unwrap();
        Rig { h, buf, list }
    }

    fn blocks(&self) -> u64 {
        self.h.ctrl.namespaces()[0].capacity()
    }

    fn run(&mut self, mut sqe: SubmissionEntry) -> StatusCode {
        sqe.prp1 = self.buf.addr();
        if sqe.opcode() != 0x09 {
            // PRP2: the second page, or a list; the harness buffer is one
            // contiguous allocation, so a PRP list of its pages.
            sqe.prp2 = self.prp2(&sqe);
        }
        let e = self.h.io(sqe);
        e.status().code().unwrap_or(StatusCode::InternalError)
    }

    /// PRP2 for a transfer from the start of the buffer.
    fn prp2(&self, sqe: &SubmissionEntry) -> u64 {
        match (sqe.cdw12 & 0xFFFF) + 1 {
            1 => 0,
            2 => self.buf.addr() + BS as u64,
            _ => self.list.addr(),
        }
    }

    fn write(&mut self, lba: u64, data: &[u8]) -> StatusCode {
        self.h.memory.write(self.buf.addr(), data).unwrap();
        self.run(ReadWrite::new(1, lba, (data.len() / BS) as u32).write().unwrap())
    }

    fn read(&mut self, lba: u64, blocks: usize) -> (StatusCode, Vec<u8>) {
        let s = self.run(ReadWrite::new(1, lba, blocks as u32).read().unwrap());
        let mut out = vec![0u8; blocks * BS];
        self.h.memory.read(self.buf.addr(), &mut out).unwrap();
        (s, out)
    }

    fn deallocate(&mut self, ranges: &[(u64, u32)]) -> StatusCode {
        let raw: Vec<u8> = ranges
            .iter()
            .flat_map(|&(slba, blocks)| DsmRange { attributes: 0, blocks, slba }.to_bytes())
            .collect();
        self.h.memory.write(self.buf.addr(), &raw).unwrap();
        let sqe = DatasetManagement::deallocate(1, ranges.len() as u16).to_entry().unwrap();
        self.run(sqe)
    }

    fn flush(&mut self) -> StatusCode {
        self.run(Flush { nsid: 1 }.to_entry())
    }

    fn check(&self) {
        self.h.ctrl.namespaces()[0].firmware().unwrap().check().unwrap();
    }
}

/// One block of data naming its block and version.
fn block(lba: u64, version: u32) -> Vec<u8> {
    let mut b = vec![0u8; BS];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..12].copy_from_slice(&version.to_le_bytes());
    for (i, x) in b[12..].iter_mut().enumerate() {
        *x = (i as u32 ^ version ^ lba as u32) as u8;
    }
    b
}

#[test]
fn built_in_twins_have_their_zns_twins_controller_and_nand() {
    for (conv, zns) in [("zn540-conv", "zn540"), ("small-conv", "small")] {
        let c = Profile::by_name(conv).unwrap();
        let z = Profile::by_name(zns).unwrap();
        assert_eq!(c.timing, z.timing, "{conv}: the same timing model");
        let (mut cc, zc) = (c.controller.clone(), z.controller.clone());
        (cc.serial, cc.model) = (zc.serial.clone(), zc.model.clone());
        assert_eq!(cc, zc, "{conv}: the same controller");
        let (cn, zn) = (&c.namespaces[0], &z.namespaces[0]);
        let f = cn.ftl.as_ref().unwrap();
        assert_eq!((f.flash_zones, f.flash_zone_blocks), (zn.zones, zn.zone_capacity));
        assert_eq!(cn.block_size, zn.block_size);
        // OP 7 % of the flash in whole segments.
        let exposed = cn.capacity_blocks() as f64;
        assert!((f.physical_blocks() as f64 / exposed - 1.07).abs() < 1e-5);
        assert_eq!(Profile::from_toml(&c.to_toml()).unwrap(), c, "{conv} round-trips");
    }
    let z = Profile::by_name("zn540-conv").unwrap();
    let f = z.namespaces[0].ftl.as_ref().unwrap();
    assert_eq!((f.segments(), f.segment_blocks), (81_134, 3072));
}

#[test]
fn bad_ftl_tables_are_refused_with_reasons() {
    let mut p = tiny_conv(0.5);
    p.namespaces[0].ftl.as_mut().unwrap().over_provisioning = 0.01;
    let e = p.validate().unwrap_err().to_string();
    assert!(e.contains("spare") && e.contains("needs 4"), "{e}");
    p.namespaces[0].ftl.as_mut().unwrap().over_provisioning = f64::NAN;
    assert!(p.validate().unwrap_err().to_string().contains("over_provisioning"));
    let mut p = tiny_conv(0.5);
    p.namespaces[0].ftl.as_mut().unwrap().policy = "lru".into();
    assert!(p.validate().unwrap_err().to_string().contains("lru"));
    let mut p = tiny_conv(0.5);
    p.namespaces[0].blocks = 100;
    assert!(p.validate().unwrap_err().to_string().contains("leave blocks out"));
    // With a timing model a segment holds whole program units on every die.
    let mut p = Profile::by_name("zn540-conv").unwrap();
    p.namespaces[0].ftl.as_mut().unwrap().segment_blocks = 3000;
    assert!(p.validate().unwrap_err().to_string().contains("program units"));
    // A zoned namespace has no FTL table.
    let mut p = Profile::by_name("zn540").unwrap();
    p.namespaces[0].ftl = Profile::by_name("zn540-conv").unwrap().namespaces[0].ftl.clone();
    assert!(p.validate().unwrap_err().to_string().contains("only conventional"));
    // Other block sizes keep the flash's bytes.
    let mut ns = Profile::by_name("zn540-conv").unwrap().namespaces[0].clone();
    let before = ns.capacity_blocks();
    ns.set_block_size(512).unwrap();
    assert_eq!(ns.ftl.as_ref().unwrap().segment_blocks, 3072 * 8);
    assert!((ns.capacity_blocks() as f64 / (before * 8) as f64 - 1.0).abs() < 1e-6);
}

#[test]
fn commands_write_read_zero_deallocate_and_flush() {
    let mut r = Rig::new(tiny_conv(0.5));
    assert_eq!(r.blocks(), 682);
    let data: Vec<u8> = (0..8).flat_map(|i| block(100 + i, 1)).collect();
    assert_eq!(r.write(100, &data), StatusCode::Success);
    let (s, back) = r.read(100, 8);
    assert_eq!(s, StatusCode::Success);
    assert_eq!(back, data);
    // Never written: zeros, at no cost to the flash.
    let (_, back) = r.read(0, 4);
    assert!(back.iter().all(|&b| b == 0));
    // Write Zeroes unmaps.
    assert_eq!(r.run(WriteZeroes::new(1, 101, 2).to_entry().unwrap()), StatusCode::Success);
    // Dataset Management deallocates several ranges.
    assert_eq!(r.deallocate(&[(104, 1), (106, 1), (0, 0)]), StatusCode::Success);
    let (_, back) = r.read(100, 8);
    for i in 0..8u64 {
        let got = &back[i as usize * BS..(i as usize + 1) * BS];
        if [1, 2, 4, 6].contains(&i) {
            assert!(got.iter().all(|&b| b == 0), "block {} zeroed", 100 + i);
        } else {
            assert_eq!(got, &block(100 + i, 1)[..], "block {} kept", 100 + i);
        }
    }
    // A rewrite replaces, FUA and Flush succeed.
    let mut fua = ReadWrite::new(1, 100, 1).with_fua(true).write().unwrap();
    r.h.memory.write(r.buf.addr(), &block(100, 2)).unwrap();
    fua.prp1 = r.buf.addr();
    assert!(r.h.io(fua).status().is_success());
    assert_eq!(r.flush(), StatusCode::Success);
    assert_eq!(r.read(100, 1).1, block(100, 2));
    let st = r.h.ctrl.namespaces()[0].firmware().unwrap().stats();
    assert_eq!((st.host_blocks, st.mapped_blocks, st.gc_blocks), (9, 4, 0));
    r.check();
}

#[test]
fn bad_input_gets_the_nvm_command_sets_statuses_and_changes_nothing() {
    let mut r = Rig::new(tiny_conv(0.5));
    let end = r.blocks();
    assert_eq!(r.write(end - 1, &block(end - 1, 1)), StatusCode::Success);
    let two: Vec<u8> = [block(end - 1, 2), block(end, 2)].concat();
    assert_eq!(r.write(end - 1, &two), StatusCode::LbaOutOfRange);
    assert_eq!(r.read(end, 1).0, StatusCode::LbaOutOfRange);
    assert_eq!(
        r.run(WriteZeroes::new(1, end - 1, 2).to_entry().unwrap()),
        StatusCode::LbaOutOfRange
    );
    // A range past the end refuses the whole command: the first range is
    // not deallocated either.
    assert_eq!(r.deallocate(&[(end - 1, 1), (end, 1)]), StatusCode::LbaOutOfRange);
    assert_eq!(r.deallocate(&[(u64::MAX, 2)]), StatusCode::LbaOutOfRange);
    assert_eq!(r.read(end - 1, 1).1, block(end - 1, 1), "nothing changed");
    // Zone commands belong to another command set.
    let append = ZoneAppend::new(1, 0, 1).to_entry().unwrap();
    assert_eq!(r.run(append), StatusCode::InvalidOpcode);
    let reset = ZoneSend::new(1, 0, ZoneSendAction::Reset).to_entry();
    assert_eq!(r.run(reset), StatusCode::InvalidOpcode);
    let report = ZoneReceive::report(1, 0, 4096, ReportFilter::All).to_entry().unwrap();
    assert_eq!(r.run(report), StatusCode::InvalidOpcode);
    let st = r.h.ctrl.namespaces()[0].firmware().unwrap().stats();
    assert_eq!((st.host_blocks, st.mapped_blocks), (1, 1));
    r.check();
}

#[test]
fn identify_describes_an_nvm_namespace_of_the_exposed_size() {
    use zns_spec::identify::{IdentifyController, IdentifyNamespace, Oncs};
    let mut r = Rig::new(tiny_conv(0.5));
    let buf = r.h.buffer(4096);
    let mut id = SubmissionEntry::new(0x06, 1);
    id.prp1 = buf.addr();
    id.cdw10 = 0; // CNS 00h
    assert!(r.h.admin(id).status().is_success());
    let mut b = [0u8; 4096];
    r.h.memory.read(buf.addr(), &mut b).unwrap();
    let ns = IdentifyNamespace::from_bytes(&b);
    assert_eq!((ns.nsze, ns.ncap, ns.dlfeat & 7), (682, 682, 1));
    id.cdw10 = 1; // CNS 01h
    id.nsid = 0;
    assert!(r.h.admin(id).status().is_success());
    r.h.memory.read(buf.addr(), &mut b).unwrap();
    let c = IdentifyController::from_bytes(&b);
    assert!(c.oncs.has(Oncs::DATASET_MANAGEMENT) && c.oncs.has(Oncs::WRITE_ZEROES));
    // CNS 05h for the zoned command set: not this namespace's.
    id.cdw10 = 5;
    id.cdw11 = 2 << 24;
    id.nsid = 1;
    assert!(r.h.admin(id).status().is(StatusCode::InvalidField));
}

#[test]
fn garbage_collection_keeps_every_block_under_random_overwrites() {
    let mut r = Rig::new(tiny_conv(0.5));
    let n = r.blocks();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut model: HashMap<u64, u32> = HashMap::new();
    for v in 1..=3000u32 {
        // Mostly small writes, some up to a whole segment (they cross
        // segments while garbage collection looks for victims).
        let len =
            if rng.gen_range(0..4) == 0 { rng.gen_range(4..=64u64) } else { rng.gen_range(1..=3) };
        let lba = rng.gen_range(0..n - len);
        if v % 64 == 0 {
            r.check();
        }
        match rng.gen_range(0..20) {
            0 => {
                assert_eq!(r.deallocate(&[(lba, len as u32)]), StatusCode::Success);
                (lba..lba + len).for_each(|l| {
                    model.remove(&l);
                });
            }
            _ => {
                let data: Vec<u8> = (lba..lba + len).flat_map(|l| block(l, v)).collect();
                assert_eq!(r.write(lba, &data), StatusCode::Success);
                (lba..lba + len).for_each(|l| {
                    model.insert(l, v);
                });
            }
        }
    }
    for lba in 0..n {
        let (s, got) = r.read(lba, 1);
        assert_eq!(s, StatusCode::Success);
        match model.get(&lba) {
            Some(&v) => assert_eq!(got, block(lba, v), "block {lba}"),
            None => assert!(got.iter().all(|&b| b == 0), "block {lba} reads zeros"),
        }
    }
    let st = r.h.ctrl.namespaces()[0].firmware().unwrap().stats();
    assert!(st.victims > 50 && st.gc_blocks > 0, "{st:?}");
    assert!(st.waf() > 1.0 && st.waf() < 4.0, "{st:?}: {}", st.waf());
    assert!(st.free_segments >= 1);
    r.check();
}

/// Power cuts at random points of a random workload, garbage collection
/// running all along: after each, every block reads its last flushed
/// version or one written after the flush, never anything else; the
/// firmware's invariants hold.
#[test]
fn power_cuts_never_lose_a_flushed_block() {
    let mut r = Rig::new(tiny_conv(0.4));
    let n = r.blocks();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    // Per block: the flushed version (0: zeros) and versions since.
    let mut flushed: HashMap<u64, u32> = HashMap::new();
    let mut since: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut version = 0u32;
    let mut victims = 0;
    for cycle in 0..40u64 {
        for _ in 0..rng.gen_range(50..400) {
            version += 1;
            let lba = rng.gen_range(0..n - 4);
            let len = rng.gen_range(1..=4u64);
            match rng.gen_range(0..40) {
                0 => {
                    assert_eq!(r.flush(), StatusCode::Success);
                    for (l, vs) in since.drain() {
                        flushed.insert(l, *vs.last().unwrap());
                    }
                }
                1 => {
                    assert_eq!(r.deallocate(&[(lba, len as u32)]), StatusCode::Success);
                    (lba..lba + len).for_each(|l| since.entry(l).or_default().push(0));
                }
                _ => {
                    let data: Vec<u8> = (lba..lba + len).flat_map(|l| block(l, version)).collect();
                    assert_eq!(r.write(lba, &data), StatusCode::Success);
                    (lba..lba + len).for_each(|l| since.entry(l).or_default().push(version));
                }
            }
        }
        r.h.ctrl.power_cut(cycle);
        let memory = r.h.memory.clone();
        r.h = Harness::start(r.h.ctrl.clone(), memory, 64).unwrap();
        r.check();
        for lba in 0..n {
            let (s, got) = r.read(lba, 1);
            assert_eq!(s, StatusCode::Success);
            let base = flushed.get(&lba).copied().unwrap_or(0);
            let later = since.get(&lba).map(|v| v.as_slice()).unwrap_or(&[]);
            let found = std::iter::once(base).chain(later.iter().copied()).find(|&v| match v {
                0 => got.iter().all(|&b| b == 0),
                v => got == block(lba, v),
            });
            let Some(v) = found else {
                panic!("cycle {cycle}: block {lba} reads neither version {base} nor {later:?}")
            };
            // What survived is durable now.
            flushed.insert(lba, v);
        }
        since.clear();
        victims = r.h.ctrl.namespaces()[0].firmware().unwrap().stats().victims;
    }
    assert!(victims > 100, "garbage collection ran: {victims} victims");
}

/// The device-side map survives a power cut only where durable: a write
/// never flushed may be lost, one flushed never is.
#[test]
fn a_power_cut_loses_unflushed_writes_only() {
    let mut r = Rig::new(tiny_conv(0.5));
    assert_eq!(r.write(5, &block(5, 1)), StatusCode::Success);
    assert_eq!(r.flush(), StatusCode::Success);
    let mut lost = 0;
    for seed in 0..20 {
        assert_eq!(r.write(5, &block(5, 100 + seed as u32)), StatusCode::Success);
        r.h.ctrl.power_cut(seed);
        let memory = r.h.memory.clone();
        r.h = Harness::start(r.h.ctrl.clone(), memory, 64).unwrap();
        let got = r.read(5, 1).1;
        if got == block(5, 1) {
            lost += 1;
        } else {
            assert_eq!(got, block(5, 100 + seed as u32));
            // Survived: durable from now on; make block 5 flushed again.
            assert_eq!(r.write(5, &block(5, 1)), StatusCode::Success);
            assert_eq!(r.flush(), StatusCode::Success);
        }
    }
    assert!(lost > 0 && lost < 20, "{lost} of 20 unflushed writes lost");
}

#[test]
fn device_images_of_conventional_twins_are_refused() {
    let dir = std::env::temp_dir().join(format!("znskit-conv-image-{}", std::process::id()));
    let e = Emulator::builder("small-conv")
        .unwrap()
        .media(crate::MediaChoice::Image(dir.join("dev.img")))
        .build(ProcessMemory::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("device-side FTL") && e.contains("dev.img"), "{e}");
    assert!(!dir.exists(), "nothing was created");
}

/// The OCP SMART / Health Information Extended page (LID C0h) of the
/// controller.
fn ocp_log(h: &mut Harness) -> zns_spec::log::OcpSmartLog {
    use zns_spec::log::{GetLogPage, LogPageId, OcpSmartLog};
    let page = h.buffer(BS);
    let mut glp =
        GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128).to_entry().unwrap();
    glp.prp1 = page.addr();
    let e = h.admin(glp);
    assert!(e.status().is_success(), "{}", e.status());
    let mut b = [0u8; OcpSmartLog::SIZE];
    h.memory.read(page.addr(), &mut b).unwrap();
    OcpSmartLog::from_bytes(&b)
}

#[test]
fn the_ocp_extended_log_counts_the_hosts_blocks_and_those_gc_moved() {
    let mut r = Rig::new(tiny_conv(0.5));
    let n = r.blocks();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut written = 0u64;
    for v in 0..1500u32 {
        let len = rng.gen_range(1..=4u64);
        let lba = rng.gen_range(0..n - len);
        let data: Vec<u8> = (lba..lba + len).flat_map(|l| block(l, v)).collect();
        assert_eq!(r.write(lba, &data), StatusCode::Success);
        written += len;
    }
    // Write Zeroes unmaps: nothing is programmed.
    assert_eq!(r.run(WriteZeroes::new(1, 10, 8).to_entry().unwrap()), StatusCode::Success);
    assert_eq!(r.read(0, 16).0, StatusCode::Success);
    let st = r.h.ctrl.namespaces()[0].firmware().unwrap().stats();
    assert_eq!(st.host_blocks, written);
    assert!(st.gc_blocks > 0 && st.victims > 0, "{st:?}");
    let log = ocp_log(&mut r.h);
    assert!(log.guid_matches());
    let bs = BS as u128;
    assert_eq!(log.media_bytes_written, (written + st.gc_blocks) as u128 * bs);
    // The host's 16 blocks, and each moved block read once.
    assert_eq!(log.media_bytes_read, (16 + st.gc_blocks) as u128 * bs);
    assert!(log.media_bytes_written > written as u128 * bs, "garbage collection wrote more");
    assert!(log.max_erase_count >= 1 && log.min_erase_count <= log.max_erase_count, "{log:?}");
    assert_eq!((st.max_erases, st.min_erases), (log.max_erase_count, log.min_erase_count));
}
