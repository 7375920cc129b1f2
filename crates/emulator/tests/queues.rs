//! The controller through real queues: bring-up, Identify, data commands,
//! queue wrap-around and completion ordering.

use zns_emulator::harness::Harness;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::Emulator;
use zns_spec::identify::{IdentifyController, ZnsNamespace};
use zns_spec::{StatusCode, SubmissionEntry, ZoneDescriptor, ZoneState};

fn tiny() -> Harness {
    let memory = ProcessMemory::new();
    let ctrl = Emulator::builder("tiny").unwrap().build(memory.clone()).unwrap();
    Harness::start(ctrl, memory, 64).unwrap()
}

fn rw(op: u8, nsid: u32, slba: u64, blocks: u32, prp1: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op, nsid);
    e.set_cdw10_11(slba);
    e.cdw12 = blocks - 1;
    e.prp1 = prp1;
    e
}

#[test]
fn identify_reports_the_profile() {
    let mut h = tiny();
    let buf = h.buffer(4096);
    let mut id = SubmissionEntry::new(0x06, 0);
    id.cdw10 = 1;
    id.prp1 = buf.addr();
    assert!(h.admin(id).status().is_success());
    let mut b = [0u8; 4096];
    h.memory.read(buf.addr(), &mut b).unwrap();
    let c = IdentifyController::from_bytes(&b);
    assert_eq!(c.serial_number, "ZNSKIT-TINY-0001");
    assert_eq!(c.nn, 2);
    let mut zid = SubmissionEntry::new(0x06, 1);
    zid.cdw10 = 5;
    zid.cdw11 = 2 << 24;
    zid.prp1 = buf.addr();
    assert!(h.admin(zid).status().is_success());
    h.memory.read(buf.addr(), &mut b).unwrap();
    let z = ZnsNamespace::from_bytes(&b);
    assert_eq!(z.lbafe[0].zone_size, 64);
    assert_eq!(z.max_open, Some(4));
    assert_eq!(z.max_active, Some(6));
}

#[test]
fn write_read_append_and_errors_through_queues() {
    let mut h = tiny();
    let buf = h.buffer(8192);
    h.memory.write(buf.addr(), &[0xAB; 8192]).unwrap();
    let mut w = rw(0x01, 1, 0, 2, buf.addr());
    w.prp2 = buf.addr() + 4096;
    assert!(h.io(w).status().is_success());
    // Off the write pointer.
    assert!(h.io(rw(0x01, 1, 5, 1, buf.addr())).status().is(StatusCode::ZoneInvalidWrite));
    // Append returns the assigned LBA.
    let e = h.io(rw(0x7D, 1, 0, 1, buf.addr()));
    assert!(e.status().is_success());
    assert_eq!(e.result_u64(), 2);
    let out = h.buffer(4096 * 4);
    let mut rd = rw(0x02, 1, 0, 4, out.addr());
    // Four blocks span two pages beyond PRP1: build a PRP2 list is not needed
    // for 2 pages, but 4 pages need a list.
    let list = h.buffer(4096);
    let entries: Vec<u8> = (1..4u64).flat_map(|i| (out.addr() + i * 4096).to_le_bytes()).collect();
    h.memory.write(list.addr(), &entries).unwrap();
    rd.prp2 = list.addr();
    assert!(h.io(rd).status().is_success());
    let mut b = vec![0u8; 4096 * 4];
    h.memory.read(out.addr(), &mut b).unwrap();
    assert!(b[..3 * 4096].iter().all(|&x| x == 0xAB));
    assert!(b[3 * 4096..].iter().all(|&x| x == 0), "unwritten block reads as zeros");
    // A report shows the implicitly opened zone at WP 3.
    let rep = h.buffer(4096);
    let mut r = SubmissionEntry::new(0x7A, 1);
    r.prp1 = rep.addr();
    r.cdw12 = 4096 / 4 - 1;
    r.cdw13 = 1 << 16;
    assert!(h.io(r).status().is_success());
    let mut d = [0u8; 64];
    h.memory.read(rep.addr() + 64, &mut d).unwrap();
    let z = ZoneDescriptor::from_bytes(&d).unwrap();
    assert_eq!((z.state, z.write_pointer, z.capacity), (ZoneState::ImplicitlyOpen, 3, 48));
    // Wild pointers are a data transfer error, not a crash.
    assert!(h.io(rw(0x02, 1, 0, 1, 0x10)).status().is(StatusCode::DataTransferError));
    // Unknown opcode and namespace.
    assert!(h.io(SubmissionEntry::new(0x55, 1)).status().is(StatusCode::InvalidOpcode));
    assert!(h.io(rw(0x02, 9, 0, 1, out.addr())).status().is(StatusCode::InvalidNamespaceOrFormat));
}

#[test]
fn queues_wrap_many_times_and_keep_order() {
    let mut h = tiny();
    let buf = h.buffer(4096);
    for i in 0..1000u64 {
        let slba = 64 * 2 + (i % 48);
        if i % 48 == 0 {
            let mut reset = SubmissionEntry::new(0x79, 1);
            reset.set_cdw10_11(128);
            reset.cdw13 = 0x04;
            assert!(h.io(reset).status().is_success());
        }
        let e = h.io(rw(0x01, 1, slba, 1, buf.addr()));
        assert!(e.status().is_success(), "write {i}: {}", e.status());
    }
    // Batches larger than one doorbell: 40 commands, one ring.
    let mut cids = Vec::new();
    for _ in 0..40 {
        cids.push(h.io.push(&h.memory, rw(0x02, 1, 0, 1, buf.addr())));
    }
    h.io.ring(&h.ctrl);
    for cid in cids {
        let e = h.io.reap(&h.ctrl, &h.memory).unwrap();
        assert_eq!(e.cid, cid);
        assert!(e.status().is_success());
    }
}
