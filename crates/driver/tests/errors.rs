//! Error statuses reach the caller intact, each on its own command.

mod common;

use common::{Deadline, Rig};
use zns_driver::{Error, QueuePair};
use zns_spec::command::ReadWrite;
use zns_spec::{StatusCode, StatusCodeType};

fn expect_status(r: zns_driver::Result<impl std::fmt::Debug>, code: StatusCode) -> Error {
    let e = r.expect_err("command should fail");
    assert!(e.is_status(code), "got {e}, want {code}");
    e
}

#[test]
fn write_off_the_write_pointer_is_zone_invalid_write() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let w = rig.ctrl.alloc_buffer(4096).unwrap();
    let e = expect_status(q.write(&ns, 5, &w), StatusCode::ZoneInvalidWrite);
    assert_eq!(e.to_string(), "Zone Invalid Write (SCT 1h, SC BCh)");
    let Error::Nvme(n) = e else { panic!("not an NVMe error") };
    assert_eq!(n.status.sct, StatusCodeType::CommandSpecific);
    assert_eq!(n.status.sc, 0xBC);
    assert_eq!(n.opcode, 0x01);
    assert_eq!(n.qid, q.qid());
}

#[test]
fn zone_state_errors() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let w = rig.ctrl.alloc_buffer(4096).unwrap();
    let z0 = ns.zone_lba(0).unwrap();
    q.finish_zone(&ns, z0).unwrap();
    let e = expect_status(q.write(&ns, z0, &w), StatusCode::ZoneIsFull);
    assert_eq!(e.to_string(), "Zone Is Full (SCT 1h, SC B9h)");
    expect_status(q.append(&ns, z0, &w), StatusCode::ZoneIsFull);
    expect_status(
        q.close_zone(&ns, ns.zone_lba(1).unwrap()),
        StatusCode::InvalidZoneStateTransition,
    );
    // Max open is 4: a fifth explicit open fails.
    for i in 2..6 {
        q.open_zone(&ns, ns.zone_lba(i).unwrap()).unwrap();
    }
    expect_status(q.open_zone(&ns, ns.zone_lba(6).unwrap()), StatusCode::TooManyOpenZones);
    // Append must name a zone start.
    expect_status(q.append(&ns, ns.zone_lba(2).unwrap() + 1, &w), StatusCode::InvalidField);
}

#[test]
fn out_of_range_and_admin_errors() {
    let rig = Rig::new("tiny");
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let mut r = rig.ctrl.alloc_buffer(2 * 4096).unwrap();
    expect_status(q.read(&ns, ns.blocks - 1, &mut r), StatusCode::LbaOutOfRange);
    expect_status(rig.ctrl.identify_namespace(0xFFFF_0000), StatusCode::InvalidNamespaceOrFormat);
    // A buffer that is not whole blocks is refused by the driver.
    let mut odd = rig.ctrl.alloc_buffer(1000).unwrap();
    assert!(matches!(q.read(&ns, 0, &mut odd), Err(Error::InvalidArgument(_))));
    // The queue still works afterwards.
    q.read(&ns, 0, &mut r).unwrap();
}

fn submit_write(q: &mut QueuePair, rig: &Rig, nsid: u32, lba: u64, tag: u64) {
    let mut b = rig.ctrl.alloc_buffer(4096).unwrap();
    b.fill(tag as u8);
    let cmd = ReadWrite::new(nsid, lba, 1).write().unwrap();
    q.submit_owned(cmd, b, tag).unwrap();
}

#[test]
fn every_completion_carries_its_own_status() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(16).unwrap();
    let z = ns.zone_lba(3).unwrap();
    // In order: ok at the write pointer, off the pointer, ok, full zone range, ok.
    submit_write(&mut q, &rig, ns.nsid, z, 10);
    submit_write(&mut q, &rig, ns.nsid, z + 7, 11);
    submit_write(&mut q, &rig, ns.nsid, z + 1, 12);
    submit_write(&mut q, &rig, ns.nsid, 1 << 40, 13);
    submit_write(&mut q, &rig, ns.nsid, z + 2, 14);
    q.ring();
    let mut got = Vec::new();
    let deadline = Deadline::start();
    while got.len() < 5 {
        deadline.check(format_args!("5 completions, {} so far", got.len()));
        q.poll(16, |c| {
            assert!(c.buffer.is_some(), "owned buffer comes back");
            got.push((c.tag, c.status));
        });
    }
    got.sort_by_key(|g| g.0);
    let want = [
        (10, StatusCode::Success),
        (11, StatusCode::ZoneInvalidWrite),
        (12, StatusCode::Success),
        (13, StatusCode::LbaOutOfRange),
        (14, StatusCode::Success),
    ];
    for ((tag, status), (wtag, wcode)) in got.iter().zip(want) {
        assert_eq!(*tag, wtag);
        assert_eq!(*status, wcode.status(), "tag {tag}: {status}");
    }
}

#[test]
fn a_reset_with_queues_open_reports_them_and_keeps_the_data() {
    let rig = Rig::new("tiny");
    let ns = rig.zns();
    let mut q = rig.ctrl.create_queue_pair(16).unwrap();
    let z = ns.zone_lba(2).unwrap();
    q.reset_zone(&ns, z).unwrap();
    let mut data = rig.ctrl.alloc_buffer(2 * ns.block_size).unwrap();
    data.fill(0x5C);
    q.write(&ns, z, &data).unwrap();
    q.flush(&ns).unwrap();
    let old = rig.ctrl.clone();

    let ctrl = rig.ctrl.reset().unwrap();
    // The old queue pair and handle report the reset instead of hanging.
    let mut back = ctrl.alloc_buffer(2 * ns.block_size).unwrap();
    let e = q.read(&ns, z, &mut back).unwrap_err();
    assert!(matches!(e, Error::ControllerReset), "{e}");
    assert!(matches!(old.identify_controller().unwrap_err(), Error::ControllerReset));
    assert!(matches!(old.reset().unwrap_err(), Error::ControllerReset));
    drop(q);
    drop(old);

    // The controller after the reset has every queue id again and the data.
    let mut q = ctrl.create_queue_pair(16).unwrap();
    q.read(&ns, z, &mut back).unwrap();
    assert!(back.as_slice().iter().all(|&b| b == 0x5C));
    let mut more = ctrl.alloc_buffer(ns.block_size).unwrap();
    more.fill(0x77);
    q.write(&ns, z + 2, &more).unwrap();
    assert_eq!(ctrl.free_queue_ids() + 1, ctrl.info().io_queue_pairs as usize);
}
