//! Damage to a device image never costs data that is still in it.
//!
//! - A damaged zone-state slot: opening writes nothing, comes up read-only
//!   (writes fail with Namespace is Write Protected) with the zone state
//!   rebuilt from the older slot and the data checksums, so blocks written
//!   after the older slot's state read back as written; the check names the
//!   zones that differ and `repair` restores them.
//! - A zone reset and rewritten between the two slots: the checksums bind
//!   blocks to their zone's write generation, so the rebuilt state is the
//!   rewritten zone, never the stale blocks from before the reset.
//! - Per-LBA metadata carries checksums like data: damage is Unrecovered
//!   Read Error on the read and named by the check.

use std::os::unix::fs::FileExt;
use std::path::Path;

use zns_emulator::harness::Harness;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::image::check::{check, CheckReport, Verdict};
use zns_emulator::image::{layout, DeviceImage, NamespaceLayout};
use zns_emulator::profile::Profile;
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::{Status, StatusCode, SubmissionEntry};

const BS: usize = 4096;

fn open(path: &Path) -> Harness {
    let memory = ProcessMemory::new();
    let ctrl = Emulator::open_image(path)
        .unwrap()
        .media(MediaChoice::Image(path.into()))
        .build(memory.clone())
        .unwrap();
    Harness::start(ctrl, memory, 16).unwrap()
}

fn pattern(lba: u64, round: u8) -> Vec<u8> {
    (0..BS).map(|i| (i as u8).wrapping_mul(31) ^ (lba as u8) ^ round.wrapping_mul(97) | 1).collect()
}

/// Writes block `lba` of namespace 1 (with metadata when `meta`).
fn write(h: &mut Harness, lba: u64, round: u8, meta: Option<&[u8]>) -> Status {
    let buf = h.buffer(BS);
    h.memory.write(buf.addr(), &pattern(lba, round)).unwrap();
    let md = h.buffer(4096);
    let mut w = SubmissionEntry::new(0x01, 1);
    w.set_cdw10_11(lba);
    w.prp1 = buf.addr();
    if let Some(m) = meta {
        h.memory.write(md.addr(), m).unwrap();
        w.mptr = md.addr();
    }
    h.io(w).status()
}

/// Reads block `lba` of namespace 1: its status, data and metadata.
fn read(h: &mut Harness, lba: u64) -> (Status, Vec<u8>, Vec<u8>) {
    let buf = h.buffer(BS);
    let md = h.buffer(4096);
    let mut r = SubmissionEntry::new(0x02, 1);
    r.set_cdw10_11(lba);
    r.prp1 = buf.addr();
    r.mptr = md.addr();
    let s = h.io(r).status();
    let mut data = vec![0u8; BS];
    h.memory.read(buf.addr(), &mut data).unwrap();
    let mut meta = vec![0u8; 16];
    h.memory.read(md.addr(), &mut meta).unwrap();
    (s, data, meta)
}

/// NSATTR of Identify Namespace for namespace 1 (bit 0: write protected).
fn nsattr(h: &mut Harness) -> u8 {
    let buf = h.buffer(4096);
    let mut id = SubmissionEntry::new(0x06, 1);
    id.prp1 = buf.addr();
    id.cdw10 = 0; // CNS 00h: Identify Namespace
    assert!(h.admin(id).status().is_success());
    let mut b = vec![0u8; 4096];
    h.memory.read(buf.addr(), &mut b).unwrap();
    b[99]
}

fn flush(h: &mut Harness) {
    assert!(h.io(SubmissionEntry::new(0x00, 0xFFFF_FFFF)).status().is_success());
}

fn reset(h: &mut Harness, zslba: u64) {
    let mut z = SubmissionEntry::new(0x79, 1);
    z.set_cdw10_11(zslba);
    z.cdw13 = 0x04;
    assert!(h.io(z).status().is_success());
}

fn flip(path: &Path, at: u64, mask: u8) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ mask], at).unwrap();
}

fn bytes(path: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at).unwrap();
    b
}

fn run_check(path: &Path, repair: bool) -> CheckReport {
    check(path, repair, &mut |_, _| {}).unwrap()
}

fn kinds(r: &CheckReport) -> Vec<&'static str> {
    r.problems.iter().map(|p| p.kind).collect()
}

/// The sequence number of the newest zone-state slot of namespace 1.
fn newest_seq(path: &Path) -> u64 {
    run_check(path, false).namespaces[0].sequence.unwrap()
}

/// A `small` image: an older state with 8 blocks in zone 0 and 8 in zone
/// 1, then a newer one that adds 8 blocks to zone 0 and 4 in zone 2.
fn two_states(dir: &Path) -> (std::path::PathBuf, NamespaceLayout) {
    let path = dir.join("dev.img");
    let profile = Profile::by_name("small").unwrap();
    drop(DeviceImage::create(&path, &profile).unwrap());
    let mut h = open(&path);
    for lba in (0..8).chain(1024..1032) {
        assert!(write(&mut h, lba, 1, None).is_success());
    }
    flush(&mut h);
    drop(h);
    let mut h = open(&path);
    for lba in (8..16).chain(2048..2052) {
        assert!(write(&mut h, lba, 1, None).is_success());
    }
    flush(&mut h);
    drop(h);
    (path, layout(&profile)[0])
}

/// The report's scenario, in the API images had before read-only opens: a
/// `small` image with data in two zones, one byte flipped in the newest
/// slot. An open that fell back to the older slot read the blocks written
/// after it as zeros, and its next flush wrote the older state over the
/// damaged slot, after which the check found nothing wrong.
#[test]
fn a_flipped_byte_in_the_newest_slot_costs_no_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, l) = two_states(dir.path());
    let seq = newest_seq(&path);
    flip(&path, l.zone_state_offset + (seq % 2) * l.slot_bytes + 40, 0x04);
    let slots = bytes(&path, l.zone_state_offset, 2 * l.slot_bytes as usize);
    let mut h = open(&path);
    for lba in (8..16).chain(2048..2052) {
        let (s, data, _) = read(&mut h, lba);
        assert!(s.is_success(), "LBA {lba}: {s}");
        assert!(data == pattern(lba, 1), "LBA {lba} must read as written, not zeros");
    }
    assert!(write(&mut h, 16, 2, None).is(StatusCode::NamespaceWriteProtected));
    flush(&mut h);
    drop(h);
    assert_eq!(bytes(&path, l.zone_state_offset, 2 * l.slot_bytes as usize), slots);
    assert!(!run_check(&path, false).is_ok(), "the damage is still there to be found");
}

#[test]
fn a_damaged_newest_slot_opens_read_only_with_every_block_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, l) = two_states(dir.path());
    let seq = newest_seq(&path);
    let newest = l.zone_state_offset + (seq % 2) * l.slot_bytes;
    flip(&path, newest + 100, 0x08);
    let slots = bytes(&path, l.zone_state_offset, 2 * l.slot_bytes as usize);

    // An ordinary open: every block comes back, nothing is written.
    let mut h = open(&path);
    for lba in (0..16).chain(1024..1032).chain(2048..2052) {
        let (s, data, _) = read(&mut h, lba);
        assert!(s.is_success(), "LBA {lba}: {s}");
        assert!(data == pattern(lba, 1), "LBA {lba} must read as written, not zeros");
    }
    assert!(write(&mut h, 16, 2, None).is(StatusCode::NamespaceWriteProtected));
    let mut z = SubmissionEntry::new(0x79, 1);
    z.set_cdw10_11(0x400);
    z.cdw13 = 0x02; // Finish
    assert!(h.io(z).status().is(StatusCode::NamespaceWriteProtected));
    assert!(h.ctrl.namespaces()[0].write_protected());
    assert_eq!(nsattr(&mut h) & 1, 1, "Identify says the namespace is write protected");
    flush(&mut h);
    drop(h);
    assert_eq!(bytes(&path, l.zone_state_offset, 2 * l.slot_bytes as usize), slots);

    // The check names the damage, the zones that differ and says a repair
    // restores them.
    let r = run_check(&path, false);
    assert_eq!(kinds(&r), ["slot", "zones"], "{:?}", r.problems);
    assert_eq!(r.verdict(), Verdict::Repairable);
    let zones = &r.problems[1].message;
    assert!(zones.contains("zone 0: 16 blocks written (it recorded 8)"), "{zones}");
    assert!(zones.contains("zone 2: 4 blocks written (it recorded 0)"), "{zones}");
    assert!(!zones.contains("zone 1:"), "{zones}");

    // The repair restores them; the device is writable again.
    let r = run_check(&path, true);
    assert_eq!(r.verdict(), Verdict::Clean, "{:?} {:?}", r.problems, r.repairs);
    assert_eq!(r.namespaces[0].readable_blocks, 28);
    let mut h = open(&path);
    assert!(!h.ctrl.namespaces()[0].write_protected());
    assert_eq!(nsattr(&mut h) & 1, 0);
    assert!(write(&mut h, 16, 2, None).is_success());
    for lba in (0..16).chain(2048..2052) {
        assert_eq!(read(&mut h, lba).1, pattern(lba, 1), "LBA {lba}");
    }
}

#[test]
fn a_reset_and_rewritten_zone_is_rebuilt_in_its_new_generation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = Profile::by_name("small").unwrap();
    drop(DeviceImage::create(&path, &profile).unwrap());
    let l = layout(&profile)[0];
    let mut h = open(&path);
    for lba in 0..12 {
        assert!(write(&mut h, lba, 1, None).is_success());
    }
    flush(&mut h);
    drop(h);
    // The newest record is zone 0's reset; 5 blocks of new data follow it
    // (the process ends before a flush records them). The 7 old blocks
    // beyond are stale: they would pass for data if their checksums were
    // not bound to the generation (a deallocation that did not happen is
    // put back by hand).
    let stale_sums = bytes(&path, l.checksum_offset.unwrap(), 12 * 4);
    let stale_data = bytes(&path, l.data_offset, 12 * BS);
    let mut h = open(&path);
    reset(&mut h, 0);
    for lba in 0..5 {
        assert!(write(&mut h, lba, 2, None).is_success());
    }
    drop(h);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&stale_sums[5 * 4..], l.checksum_offset.unwrap() + 5 * 4).unwrap();
    f.write_all_at(&stale_data[5 * BS..], l.data_offset + 5 * BS as u64).unwrap();
    drop(f);
    let seq = newest_seq(&path);
    flip(&path, l.zone_state_offset + (seq % 2) * l.slot_bytes + 30, 0x01);
    let r = run_check(&path, false);
    assert_eq!(r.verdict(), Verdict::Repairable, "{:?}", r.problems);
    let z = &r.namespaces[0].changed_zones;
    assert_eq!((z.len(), z[0].zone, z[0].before), (1, 0, 12), "{z:?}");
    assert_eq!((z[0].after, z[0].reset), (5, true), "{z:?}");
    let mut h = open(&path);
    for lba in 0..5 {
        assert_eq!(read(&mut h, lba).1, pattern(lba, 2), "LBA {lba}");
    }
    let zi = h.ctrl.namespaces()[0].zones().unwrap().zone_info(0).unwrap();
    assert_eq!(zi.written_extent, 5, "the stale blocks are not current data");
    drop(h);
    assert_eq!(run_check(&path, true).verdict(), Verdict::Clean);
}

#[test]
fn unaccounted_blocks_refuse_the_open_and_are_named_as_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (path, l) = two_states(dir.path());
    let seq = newest_seq(&path);
    flip(&path, l.zone_state_offset + (seq % 2) * l.slot_bytes + 64, 0x40);
    // The checksum of the last block written after the older state is
    // damaged too: nothing proves it, and it may have been current.
    flip(&path, l.checksum_offset.unwrap() + 15 * 4, 0x01);
    let memory = ProcessMemory::new();
    let e = Emulator::open_image(&path)
        .unwrap()
        .media(MediaChoice::Image(path.clone()))
        .build(memory)
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 blocks beyond the write pointers") && e.contains("0xf (zone 0)"), "{e}");
    assert!(e.contains("zns emu check --repair"), "{e}");
    let r = run_check(&path, false);
    assert_eq!(r.verdict(), Verdict::Lost);
    assert!(kinds(&r).contains(&"lost"), "{:?}", r.problems);
    let r = run_check(&path, true);
    assert_eq!(r.verdict(), Verdict::Lost, "the repair says it lost something");
    assert!(r.repairs.iter().any(|x| x.contains("lost: 1 blocks")), "{:?}", r.repairs);
    // Afterwards the image is consistent: 15 blocks in zone 0.
    let r = run_check(&path, false);
    assert_eq!(r.verdict(), Verdict::Clean, "{:?}", r.problems);
}

#[test]
fn damaged_metadata_is_an_unrecovered_read_error_and_named_by_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = Profile::by_name("small").unwrap();
    drop(DeviceImage::create(&path, &profile).unwrap());
    let l = layout(&profile)[0];
    assert!(l.metadata_checksum_offset.is_some());
    let mut h = open(&path);
    for lba in 0..4 {
        let meta = [lba as u8 + 0x30; 16];
        assert!(write(&mut h, lba, 1, Some(&meta)).is_success());
    }
    flush(&mut h);
    drop(h);
    // One flipped byte in block 1's metadata; block 2's zeroed.
    flip(&path, l.metadata_offset + 16 + 3, 0x01);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(&[0u8; 16], l.metadata_offset + 2 * 16)
        .unwrap();
    let mut h = open(&path);
    let (s, _, meta) = read(&mut h, 0);
    assert!(s.is_success() && meta == vec![0x30; 16], "{s} {meta:?}");
    for lba in [1, 2] {
        assert!(read(&mut h, lba).0.is(StatusCode::UnrecoveredReadError), "LBA {lba}");
    }
    drop(h);
    let r = run_check(&path, false);
    assert_eq!(kinds(&r), ["metadata"], "{:?}", r.problems);
    assert_eq!(r.namespaces[0].damaged_metadata, [1, 2]);
    assert!(r.problems[0].message.contains("2 blocks fail their metadata checksum"));
    assert_eq!(r.verdict(), Verdict::Lost);
}

/// Images made before write generations and metadata checksums (version 3
/// with only the data checksum flag) open and work as before: every zone
/// stays in generation 0, so their checksums keep matching.
#[test]
fn images_from_before_generations_keep_generation_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = Profile::by_name("tiny").unwrap();
    drop(DeviceImage::create(&path, &profile).unwrap());
    let mut sb = bytes(&path, 0, 4096);
    sb[24..28].copy_from_slice(&1u32.to_le_bytes());
    sb[20..24].fill(0);
    let crc = zns_spec::crc::crc32c(&sb);
    sb[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(&sb, 0).unwrap();
    let img = DeviceImage::open(&path).unwrap();
    assert!(!img.generations());
    drop(img);
    let mut h = open(&path);
    for lba in 0..4 {
        assert!(write(&mut h, lba, 1, None).is_success());
    }
    flush(&mut h);
    reset(&mut h, 0);
    for lba in 0..2 {
        assert!(write(&mut h, lba, 2, None).is_success());
    }
    flush(&mut h);
    drop(h);
    let mut h = open(&path);
    for lba in 0..2 {
        assert_eq!(read(&mut h, lba).1, pattern(lba, 2), "LBA {lba}");
    }
    drop(h);
    let l = layout(&profile)[0];
    let entry = u32::from_le_bytes(bytes(&path, l.checksum_offset.unwrap(), 4).try_into().unwrap());
    assert_eq!(entry, zns_emulator::media::block_checksum(0, &pattern(0, 2)));
    assert_eq!(run_check(&path, false).verdict(), Verdict::Clean);
}
