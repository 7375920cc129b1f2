//! Every I/O command end to end against the emulator.

mod common;

use common::{pattern, Rig};
use zns_driver::{Error, ReportRequest};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::{ReportFilter, ZoneAttributes, ZoneSendAction, ZoneState};

#[test]
fn write_then_read_zoned_and_conventional() {
    let rig = Rig::new("tiny");
    let mut q = rig.ctrl.create_queue_pair(32).unwrap();
    for ns in [rig.zns(), rig.nvm()] {
        let bs = ns.block_size;
        let mut w = rig.ctrl.alloc_buffer(4 * bs).unwrap();
        w.as_mut_slice().copy_from_slice(&pattern(1, 0, 4 * bs));
        q.write(&ns, 0, &w).unwrap();
        let mut w2 = rig.ctrl.alloc_buffer(2 * bs).unwrap();
        w2.as_mut_slice().copy_from_slice(&pattern(2, 4, 2 * bs));
        q.write_with(&ns, 4, &w2, true).unwrap();
        q.flush(&ns).unwrap();
        let mut r = rig.ctrl.pool().alloc_zeroed(6 * bs).unwrap();
        q.read(&ns, 0, &mut r).unwrap();
        assert_eq!(&r.as_slice()[..4 * bs], w.as_slice(), "nsid {}", ns.nsid);
        assert_eq!(&r.as_slice()[4 * bs..], w2.as_slice(), "nsid {}", ns.nsid);
    }
}

#[test]
fn write_zeroes_clears_blocks() {
    let rig = Rig::new("tiny");
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let mut w = rig.ctrl.alloc_buffer(8 * 4096).unwrap();
    w.fill(0xA5);
    q.write(&ns, 100, &w).unwrap();
    q.write_zeroes(&ns, 102, 3).unwrap();
    let mut r = rig.ctrl.alloc_buffer(8 * 4096).unwrap();
    q.read(&ns, 100, &mut r).unwrap();
    for (i, block) in r.as_slice().chunks(4096).enumerate() {
        let want = if (2..5).contains(&i) { 0 } else { 0xA5 };
        assert!(block.iter().all(|&b| b == want), "block {i}");
    }
}

#[test]
fn copy_gathers_ranges_at_the_write_pointer() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let src = ns.zone_lba(1).unwrap();
    let dst = ns.zone_lba(2).unwrap();
    let mut w = rig.ctrl.alloc_buffer(8 * 4096).unwrap();
    w.as_mut_slice().copy_from_slice(&pattern(3, src, 8 * 4096));
    q.write(&ns, src, &w).unwrap();
    let ranges = [SourceRangeFormat0::new(src, 2), SourceRangeFormat0::new(src + 4, 4)];
    q.copy(&ns, dst, &ranges).unwrap();
    let mut r = rig.ctrl.alloc_buffer(6 * 4096).unwrap();
    q.read(&ns, dst, &mut r).unwrap();
    assert_eq!(&r.as_slice()[..2 * 4096], &w.as_slice()[..2 * 4096]);
    assert_eq!(&r.as_slice()[2 * 4096..], &w.as_slice()[4 * 4096..]);
    // The destination's write pointer moved past the copied blocks.
    let mut rep = rig.ctrl.alloc_buffer(4096).unwrap();
    let report = q.zone_receive(&ns, ReportRequest::from(dst), &mut rep).unwrap();
    assert_eq!(report.descriptors[0].write_pointer, dst + 6);
    assert_eq!(report.descriptors[0].state, ZoneState::ImplicitlyOpen);
}

#[test]
fn append_returns_the_assigned_lba() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let z = ns.zone_lba(3).unwrap();
    let mut a = rig.ctrl.alloc_buffer(2 * 4096).unwrap();
    a.as_mut_slice().copy_from_slice(&pattern(4, 0, 2 * 4096));
    assert_eq!(q.append(&ns, z, &a).unwrap(), z);
    let mut b = rig.ctrl.alloc_buffer(4096).unwrap();
    b.fill(0x3C);
    assert_eq!(q.append_with(&ns, z, &b, true).unwrap(), z + 2);
    let mut r = rig.ctrl.alloc_buffer(3 * 4096).unwrap();
    q.read(&ns, z, &mut r).unwrap();
    assert_eq!(&r.as_slice()[..2 * 4096], a.as_slice());
    assert!(r.as_slice()[2 * 4096..].iter().all(|&x| x == 0x3C));
    // Larger than ZASL (16 pages on tiny): refused before it is submitted.
    let big = rig.ctrl.alloc_buffer(17 * 4096).unwrap();
    assert!(matches!(q.append(&ns, z, &big), Err(Error::TransferTooLarge { .. })));
}

fn state_of(q: &mut zns_driver::QueuePair, rig: &Rig, slba: u64) -> ZoneState {
    let ns = rig.zns();
    let mut rep = rig.ctrl.alloc_buffer(128).unwrap();
    q.zone_receive(&ns, ReportRequest::from(slba), &mut rep).unwrap().descriptors[0].state
}

#[test]
fn zone_send_actions_one_zone_and_select_all() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let z = ns.zone_lba(4).unwrap();
    q.open_zone(&ns, z).unwrap();
    assert_eq!(state_of(&mut q, &rig, z), ZoneState::ExplicitlyOpen);
    q.close_zone(&ns, z).unwrap();
    assert_eq!(state_of(&mut q, &rig, z), ZoneState::Closed);
    q.finish_zone(&ns, z).unwrap();
    assert_eq!(state_of(&mut q, &rig, z), ZoneState::Full);
    q.reset_zone(&ns, z).unwrap();
    assert_eq!(state_of(&mut q, &rig, z), ZoneState::Empty);
    q.zone_send(&ns, z, ZoneSendAction::Open).unwrap();
    assert_eq!(state_of(&mut q, &rig, z), ZoneState::ExplicitlyOpen);

    // Select All over two written zones and the opened one.
    let w = rig.ctrl.alloc_buffer(4096).unwrap();
    let (a, b) = (ns.zone_lba(5).unwrap(), ns.zone_lba(6).unwrap());
    q.write(&ns, a, &w).unwrap();
    q.write(&ns, b, &w).unwrap();
    q.zone_send_all(&ns, ZoneSendAction::Close).unwrap();
    for s in [z, a, b] {
        assert_eq!(state_of(&mut q, &rig, s), ZoneState::Closed);
    }
    q.zone_send_all(&ns, ZoneSendAction::Finish).unwrap();
    for s in [z, a, b] {
        assert_eq!(state_of(&mut q, &rig, s), ZoneState::Full);
    }
    let mut rep = rig.ctrl.alloc_buffer(4096).unwrap();
    let full = q.report_all_zones(&ns, ReportFilter::Full, &mut rep).unwrap();
    assert_eq!(full.iter().map(|d| d.start).collect::<Vec<_>>(), vec![z, a, b]);
    q.zone_send_all(&ns, ZoneSendAction::Reset).unwrap();
    let empty = q.report_all_zones(&ns, ReportFilter::Empty, &mut rep).unwrap();
    assert_eq!(empty.len(), 16);
    // Offline applies to read-only zones only.
    let e = q.offline_zone(&ns, z).unwrap_err();
    assert!(e.is_status(zns_spec::StatusCode::InvalidZoneStateTransition), "{e}");
}

#[test]
fn reports_partial_full_count_and_extended() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    // Room for two descriptors.
    let mut rep = rig.ctrl.alloc_buffer(64 + 2 * 64).unwrap();
    let all = q.zone_receive(&ns, ReportRequest::from(0), &mut rep).unwrap();
    assert_eq!(all.zones, 16, "non-partial header counts every matching zone");
    assert_eq!(all.descriptors.len(), 2);
    let mut req = ReportRequest::from(ns.zone_lba(10).unwrap() + 5);
    req.partial = true;
    let part = q.zone_receive(&ns, req, &mut rep).unwrap();
    assert_eq!(part.zones, 2);
    assert_eq!(part.descriptors[0].start, ns.zone_lba(10).unwrap());
    assert_eq!(part.descriptors[0].capacity, 48);

    // A zone descriptor extension shows in the extended report.
    let z = ns.zone_lba(7).unwrap();
    q.set_zone_extension(&ns, z, b"znskit").unwrap();
    let mut ext = rig.ctrl.alloc_buffer(64 + 2 * 128).unwrap();
    let mut req = ReportRequest::from(z);
    req.extended = true;
    let r = q.zone_receive(&ns, req, &mut ext).unwrap();
    assert_eq!(r.descriptors[0].state, ZoneState::Closed);
    assert!(r.descriptors[0].attrs.has(ZoneAttributes::EXTENSION_VALID));
    assert_eq!(&r.extensions[0][..6], b"znskit");
    assert!(r.extensions[0][6..].iter().all(|&b| b == 0));
    assert!(q.set_zone_extension(&ns, z, &[0; 65]).is_err());
}

#[test]
fn report_walker_uses_as_many_commands_as_needed() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let w = rig.ctrl.alloc_buffer(4096).unwrap();
    for i in [1u64, 4, 9, 15] {
        q.write(&ns, ns.zone_lba(i).unwrap(), &w).unwrap();
    }
    // Three descriptors per command: six commands for sixteen zones.
    let mut rep = rig.ctrl.alloc_buffer(64 + 3 * 64).unwrap();
    let all = q.report_all_zones(&ns, ReportFilter::All, &mut rep).unwrap();
    assert_eq!(all.len(), 16);
    for (i, d) in all.iter().enumerate() {
        assert_eq!(d.start, i as u64 * 64);
    }
    let open = q.report_all_zones(&ns, ReportFilter::ImplicitlyOpen, &mut rep).unwrap();
    assert_eq!(open.iter().map(|d| d.start / 64).collect::<Vec<_>>(), vec![1, 4, 9, 15]);
    assert!(open.iter().all(|d| d.write_pointer == d.start + 1));
    let mut tiny = rig.ctrl.alloc_buffer(64).unwrap();
    assert!(q.report_all_zones(&ns, ReportFilter::All, &mut tiny).is_err());
}
