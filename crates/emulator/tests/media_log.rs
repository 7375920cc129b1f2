//! The OCP SMART / Health Information Extended log page (LID C0h) of a
//! zoned device: the media take exactly what the host's commands place
//! (the model collects no garbage), read what they read.

use zns_emulator::clock::ClockMode;
use zns_emulator::harness::Harness;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::profile::{NamespaceKind, Profile};
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::command::{ReadWrite, WriteZeroes};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::log::{GetLogPage, LogPageId, OcpSmartLog, SmartLog};
use zns_spec::{StatusCode, SubmissionEntry};

const BS: u128 = 4096;

fn log_page(h: &mut Harness, lid: LogPageId, nsid: u32) -> Result<[u8; 512], StatusCode> {
    let page = h.buffer(4096);
    let mut glp = GetLogPage::new(lid, nsid, 128).to_entry().unwrap();
    glp.prp1 = page.addr();
    let e = h.admin(glp);
    if !e.status().is_success() {
        return Err(e.status().code().unwrap_or(StatusCode::InternalError));
    }
    let mut b = [0u8; 512];
    h.memory.read(page.addr(), &mut b).unwrap();
    Ok(b)
}

fn ok(h: &mut Harness, mut sqe: SubmissionEntry, prp1: u64) {
    sqe.prp1 = prp1;
    let e = h.io(sqe);
    assert!(e.status().is_success(), "opcode {:#x}: {}", sqe.opcode(), e.status());
}

#[test]
fn a_zoned_device_programs_what_writes_appends_and_copies_place() {
    let memory = ProcessMemory::new();
    let ctrl = Emulator::builder("tiny").unwrap().build(memory.clone()).unwrap();
    let mut h = Harness::start(ctrl, memory, 32).unwrap();
    let buf = h.buffer(4 * 4096);
    h.memory.write(buf.addr(), &[0x5A; 4 * 4096]).unwrap();
    // PRP2 of transfers over more than two pages: a list of the others.
    let list = h.buffer(4096);
    let entries: Vec<u8> = (1..4u64).flat_map(|i| (buf.addr() + i * 4096).to_le_bytes()).collect();
    h.memory.write(list.addr(), &entries).unwrap();
    let fresh = OcpSmartLog::from_bytes(&log_page(&mut h, LogPageId::OcpSmartExtended, 0).unwrap());
    assert_eq!((fresh.media_bytes_written, fresh.media_bytes_read), (0, 0));
    assert!(fresh.guid_matches() && fresh.version == OcpSmartLog::VERSION);

    // 4 blocks written to zone 0, 2 appended to zone 1, 3 zeroed in zone
    // 0 (deallocated, not programmed), 2 copied from zone 0 to zone 2,
    // 2 written to the conventional namespace.
    let mut w = ReadWrite::new(1, 0, 4).write().unwrap();
    w.prp2 = list.addr();
    ok(&mut h, w, buf.addr());
    let mut a = SubmissionEntry::new(0x7D, 1);
    a.set_cdw10_11(64);
    a.cdw12 = 1;
    a.prp2 = buf.addr() + 4096;
    ok(&mut h, a, buf.addr());
    ok(&mut h, WriteZeroes::new(1, 4, 3).to_entry().unwrap(), 0);
    let ranges = h.buffer(4096);
    let r = SourceRangeFormat0::new(0, 2).to_bytes().unwrap();
    h.memory.write(ranges.addr(), &r).unwrap();
    let mut c = SubmissionEntry::new(0x19, 1);
    c.set_cdw10_11(128);
    ok(&mut h, c, ranges.addr());
    let mut w = ReadWrite::new(2, 10, 2).write().unwrap();
    w.prp2 = buf.addr() + 4096;
    ok(&mut h, w, buf.addr());
    // 3 blocks read, one of them never written.
    let mut rd = ReadWrite::new(1, 64, 3).read().unwrap();
    rd.prp2 = list.addr();
    ok(&mut h, rd, buf.addr());

    let b = log_page(&mut h, LogPageId::OcpSmartExtended, 0xFFFF_FFFF).unwrap();
    let log = OcpSmartLog::from_bytes(&b);
    assert_eq!(log.media_bytes_written, (4 + 2 + 2 + 2) * BS);
    assert_eq!(log.media_bytes_read, (2 + 3) * BS);
    // Zone resets are not counted as erases: not modelled, zero.
    assert_eq!((log.max_erase_count, log.min_erase_count), (0, 0));
    assert!(log.guid_matches());
    // The host's data units count Write and Zone Append only.
    let smart = SmartLog::from_bytes(&log_page(&mut h, LogPageId::SmartHealth, 0).unwrap());
    assert_eq!(smart.data_units_written, 1);
    // The page is the controller's: a namespace is Invalid Field.
    assert_eq!(log_page(&mut h, LogPageId::OcpSmartExtended, 1), Err(StatusCode::InvalidField));
}

/// Finishes the zone at `lba` (or every zone) through the harness.
fn finish(h: &mut Harness, lba: u64, all: bool) {
    let mut f = SubmissionEntry::new(0x79, 1);
    f.set_cdw10_11(lba);
    f.cdw13 = 0x02 | u32::from(all) << 8;
    ok(h, f, 0);
}

fn media_written(h: &mut Harness) -> u128 {
    OcpSmartLog::from_bytes(&log_page(h, LogPageId::OcpSmartExtended, 0).unwrap())
        .media_bytes_written
}

/// The ZN540's timing model on 8 zones of 768 blocks (one stripe of its
/// 32 dies), null media, on the virtual clock.
fn timed_zn540() -> Harness {
    let mut p = Profile::by_name("zn540").unwrap();
    let ns = p.namespaces.iter_mut().find(|n| n.kind == NamespaceKind::Zoned).unwrap();
    (ns.zones, ns.zone_size, ns.zone_capacity) = (8, 1024, 768);
    let memory = ProcessMemory::new();
    let ctrl = Emulator::with_profile(p)
        .media(MediaChoice::Null)
        .clock(ClockMode::Virtual)
        .build(memory.clone())
        .unwrap();
    Harness::start(ctrl, memory, 32).unwrap()
}

#[test]
fn a_timed_finish_programs_its_padding_and_the_media_count_it() {
    // The ZN540's timing model pads a finished zone's rest through its
    // write path, so the media take the padding as they take data.
    let mut h = timed_zn540();
    let buf = h.buffer(4096);
    ok(&mut h, ReadWrite::new(1, 0, 1).write().unwrap(), buf.addr());
    assert_eq!(media_written(&mut h), BS);
    // Zone 0 holds one block: Finish pads the other 767.
    finish(&mut h, 0, false);
    assert_eq!(media_written(&mut h), 768 * BS);
    // A full zone and an empty one pad nothing.
    finish(&mut h, 0, false);
    finish(&mut h, 1024, false);
    assert_eq!(media_written(&mut h), 768 * BS);
    // Finish of every zone pads the open ones with data (zones 2 and 3).
    ok(&mut h, ReadWrite::new(1, 2048, 1).write().unwrap(), buf.addr());
    ok(&mut h, ReadWrite::new(1, 3072, 1).write().unwrap(), buf.addr());
    finish(&mut h, 0, true);
    assert_eq!(media_written(&mut h), 3 * 768 * BS);
}

#[test]
fn an_untimed_finish_programs_nothing() {
    let memory = ProcessMemory::new();
    let ctrl = Emulator::builder("tiny").unwrap().build(memory.clone()).unwrap();
    let mut h = Harness::start(ctrl, memory, 32).unwrap();
    let buf = h.buffer(4096);
    ok(&mut h, ReadWrite::new(1, 0, 1).write().unwrap(), buf.addr());
    finish(&mut h, 0, false);
    assert_eq!(media_written(&mut h), BS);
}

fn media_read(h: &mut Harness) -> u128 {
    OcpSmartLog::from_bytes(&log_page(h, LogPageId::OcpSmartExtended, 0).unwrap()).media_bytes_read
}

#[test]
fn a_timed_read_of_data_not_yet_programmed_is_no_media_read() {
    // Zones cut down to one stripe of the ZN540 (32 dies x 96 KiB): a
    // zone's data waits in the drive until the zone is full, and reads of
    // it come from there, not from the dies.
    let mut h = timed_zn540();
    let buf = h.buffer(32 * 4096);
    let list = h.buffer(4096);
    let entries: Vec<u8> = (1..32u64).flat_map(|i| (buf.addr() + i * 4096).to_le_bytes()).collect();
    h.memory.write(list.addr(), &entries).unwrap();
    let io = |h: &mut Harness, mut sqe: SubmissionEntry| {
        sqe.prp2 = list.addr();
        ok(h, sqe, buf.addr());
    };
    io(&mut h, ReadWrite::new(1, 0, 4).write().unwrap());
    io(&mut h, ReadWrite::new(1, 0, 4).read().unwrap());
    assert_eq!(media_read(&mut h), 0);
    assert_eq!(h.ctrl.buffer_read_bytes(), 4 * BS as u64);
    // Zone 1 filled and given time to program: its reads are media reads,
    // zone 0's still are not.
    for i in 0..24 {
        io(&mut h, ReadWrite::new(1, 1024 + i * 32, 32).write().unwrap());
    }
    let t = h.ctrl.clock().now_ns();
    h.ctrl.clock().advance_to(t + 1_000_000_000);
    io(&mut h, ReadWrite::new(1, 1024 + 100, 3).read().unwrap());
    io(&mut h, ReadWrite::new(1, 2, 2).read().unwrap());
    assert_eq!(media_read(&mut h), 3 * BS);
    assert_eq!(h.ctrl.buffer_read_bytes(), 6 * BS as u64);
    // The host's own count is every block it read.
    let smart = SmartLog::from_bytes(&log_page(&mut h, LogPageId::SmartHealth, 0).unwrap());
    assert_eq!(smart.host_read_commands, 3);
}
