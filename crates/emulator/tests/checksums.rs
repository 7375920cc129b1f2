//! Data checksums through real queues: a block of a device image whose
//! data no longer matches its checksum reads as Unrecovered Read Error,
//! the command returns none of its blocks, and the SMART / Health log
//! counts it.

use std::os::unix::fs::FileExt;
use std::path::Path;

use zns_emulator::harness::Harness;
use zns_emulator::host::{DmaAllocation, HostMemory, ProcessMemory};
use zns_emulator::image::{layout, DeviceImage};
use zns_emulator::profile::Profile;
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::log::{ErrorLogEntry, SmartLog};
use zns_spec::{StatusCode, SubmissionEntry};

fn cmd(op: u8, nsid: u32, slba: u64, blocks: u32, prp1: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op, nsid);
    e.set_cdw10_11(slba);
    e.cdw12 = blocks - 1;
    e.prp1 = prp1;
    e
}

fn open(path: &Path) -> Harness {
    let memory = ProcessMemory::new();
    let b = Emulator::open_image(path).unwrap();
    let ctrl = b.media(MediaChoice::Image(path.into())).build(memory.clone()).unwrap();
    Harness::start(ctrl, memory, 32).unwrap()
}

fn flip(path: &Path, at: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x20], at).unwrap();
}

/// Reads or writes (`op`) `blocks` blocks through a PRP list over the
/// pages of `buf`; returns the command and the list it points to (keep it
/// alive until the command completes).
fn list_cmd(
    h: &Harness,
    op: u8,
    nsid: u32,
    slba: u64,
    blocks: u32,
    buf: u64,
) -> (SubmissionEntry, DmaAllocation) {
    let mut r = cmd(op, nsid, slba, blocks, buf);
    let list = h.buffer(4096);
    let entries: Vec<u8> =
        (1..blocks as u64).flat_map(|i| (buf + i * 4096).to_le_bytes()).collect();
    h.memory.write(list.addr(), &entries).unwrap();
    r.prp2 = list.addr();
    (r, list)
}

fn smart(h: &mut Harness) -> SmartLog {
    let log = h.buffer(4096);
    let mut glp = SubmissionEntry::new(0x02, 0xFFFF_FFFF);
    glp.prp1 = log.addr();
    glp.cdw10 = 0x02 | (127 << 16);
    let c = h.admin(glp);
    assert!(c.status().is_success(), "{}", c.status());
    let mut b = [0u8; 512];
    h.memory.read(log.addr(), &mut b).unwrap();
    SmartLog::from_bytes(&b)
}

#[test]
fn a_damaged_block_reads_as_unrecovered_read_error_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = Profile::by_name("tiny").unwrap();
    drop(DeviceImage::create(&path, &profile).unwrap());
    let l = layout(&profile);
    let mut h = open(&path);
    let buf = h.buffer(4 * 4096);
    let data: Vec<u8> = (0..4 * 4096).map(|i| (i % 251) as u8 + 1).collect();
    h.memory.write(buf.addr(), &data).unwrap();
    for (nsid, lba) in [(1, 0), (2, 100)] {
        let (w, _list) = list_cmd(&h, 0x01, nsid, lba, 4, buf.addr());
        let c = h.io(w);
        assert!(c.status().is_success(), "{}", c.status());
    }
    assert!(h.io(SubmissionEntry::new(0x00, 0xFFFF_FFFF)).status().is_success());
    let before = smart(&mut h);
    assert_eq!(before.media_errors, 0);
    assert_eq!(before.host_write_commands, 2);
    drop(h);

    // One bit of block 2 of each namespace flips while the device is off.
    flip(&path, l[0].data_offset + 2 * 4096 + 100);
    flip(&path, l[1].data_offset + 102 * 4096 + 4095);
    let mut h = open(&path);
    let buf = h.buffer(4 * 4096);
    for (nsid, lba) in [(1, 0), (2, 100)] {
        h.memory.write(buf.addr(), &[0xFF; 4 * 4096]).unwrap();
        let (r, _list) = list_cmd(&h, 0x02, nsid, lba, 4, buf.addr());
        let c = h.io(r);
        assert!(c.status().is(StatusCode::UnrecoveredReadError), "{}", c.status());
        assert!(c.status_field().dnr());
        // None of the command's blocks comes back as good.
        let mut back = vec![0u8; 4 * 4096];
        h.memory.read(buf.addr(), &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0 || b == 0xFF), "namespace {nsid}");
        // The blocks around it are intact.
        for ok in [lba, lba + 1, lba + 3] {
            let c = h.io(cmd(0x02, nsid, ok, 1, buf.addr()));
            assert!(c.status().is_success(), "{ok}: {}", c.status());
            let mut b = vec![0u8; 4096];
            h.memory.read(buf.addr(), &mut b).unwrap();
            let i = (ok - lba) as usize;
            assert_eq!(b, data[i * 4096..(i + 1) * 4096]);
        }
    }
    // A Copy whose source holds the block fails the same way.
    let ranges = h.buffer(4096);
    let r = zns_spec::copy::SourceRangeFormat0::new(1, 2).to_bytes().unwrap();
    h.memory.write(ranges.addr(), &r).unwrap();
    let mut c = SubmissionEntry::new(0x19, 1);
    c.prp1 = ranges.addr();
    c.set_cdw10_11(64);
    let done = h.io(c);
    assert!(done.status().is(StatusCode::UnrecoveredReadError), "{}", done.status());
    // A Zone Append is a write: it succeeds, and reads back.
    let mut a = cmd(0x7D, 1, 0, 1, buf.addr());
    a.set_cdw10_11(0);
    h.memory.write(buf.addr(), &[0x42; 4096]).unwrap();
    let done = h.io(a);
    assert!(done.status().is_success(), "{}", done.status());
    assert_eq!(done.result_u64(), 4);
    // Three media errors, in the SMART / Health log and the error log.
    let s = smart(&mut h);
    assert_eq!(s.media_errors, 3);
    assert!(s.error_log_entries >= 3);
    assert_eq!(s.host_read_commands, 6);
    assert_eq!(s.data_units_read, 1, "6 blocks of 4 KiB: one unit of 512,000 bytes, rounded up");
    let log = h.buffer(4096);
    let mut glp = SubmissionEntry::new(0x02, 0);
    glp.prp1 = log.addr();
    glp.cdw10 = 0x01 | (15 << 16);
    assert!(h.admin(glp).status().is_success());
    let mut b = [0u8; 64];
    h.memory.read(log.addr(), &mut b).unwrap();
    let newest = ErrorLogEntry::from_bytes(&b);
    assert_eq!(newest.status.status(), StatusCode::UnrecoveredReadError.status());
    // Rewriting the block heals it (conventional namespace: in place).
    h.memory.write(buf.addr(), &data[2 * 4096..3 * 4096]).unwrap();
    assert!(h.io(cmd(0x01, 2, 102, 1, buf.addr())).status().is_success());
    let (r, _list) = list_cmd(&h, 0x02, 2, 100, 4, buf.addr());
    assert!(h.io(r).status().is_success());
}

#[test]
fn ram_media_checks_only_when_the_profile_asks_and_the_count_survives_a_power_cut() {
    let mut p = Profile::by_name("tiny").unwrap();
    p.controller.data_checksums = Some(true);
    let memory = ProcessMemory::new();
    let ctrl = Emulator::with_profile(p).build(memory.clone()).unwrap();
    let mut h = Harness::start(ctrl, memory, 32).unwrap();
    let buf = h.buffer(4096);
    h.memory.write(buf.addr(), &[7; 4096]).unwrap();
    assert!(h.io(cmd(0x01, 2, 5, 1, buf.addr())).status().is_success());
    // RAM is not damaged from outside; an injected error stands in and is
    // counted like a checksum failure.
    h.ctrl.namespaces()[1].inject_read_error(5);
    assert!(h.io(cmd(0x02, 2, 5, 1, buf.addr())).status().is(StatusCode::UnrecoveredReadError));
    assert_eq!(smart(&mut h).media_errors, 1);
    let ctrl = h.ctrl.clone();
    ctrl.power_cut(1);
    let mut h = Harness::start(ctrl, h.memory.clone(), 32).unwrap();
    let s = smart(&mut h);
    assert_eq!((s.media_errors, s.power_cycles, s.unsafe_shutdowns), (1, 2, 1));
    // Controller-wide only.
    let mut glp = SubmissionEntry::new(0x02, 1);
    glp.prp1 = h.buffer(4096).addr();
    glp.cdw10 = 0x02 | (127 << 16);
    assert!(h.admin(glp).status().is(StatusCode::InvalidField));
}
