//! Fault injection, durability and persistence through real queues.

use zns_emulator::harness::Harness;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::image::DeviceImage;
use zns_emulator::profile::Profile;
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::log::ChangedZoneList;
use zns_spec::{StatusCode, SubmissionEntry};

fn cmd(op: u8, nsid: u32, slba: u64, blocks: u32, prp1: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op, nsid);
    e.set_cdw10_11(slba);
    e.cdw12 = blocks - 1;
    e.prp1 = prp1;
    e
}

fn start(media: MediaChoice, profile: &str) -> Harness {
    let memory = ProcessMemory::new();
    let b = match &media {
        MediaChoice::Image(p) => Emulator::open_image(p).unwrap(),
        _ => Emulator::builder(profile).unwrap(),
    };
    let ctrl = b.media(media).build(memory.clone()).unwrap();
    Harness::start(ctrl, memory, 32).unwrap()
}

#[test]
fn injected_media_errors_reach_the_host_and_are_logged() {
    let mut h = start(MediaChoice::Ram, "tiny");
    let buf = h.buffer(4096);
    assert!(h.io(cmd(0x01, 1, 0, 1, buf.addr())).status().is_success());
    h.ctrl.namespaces()[0].inject_read_error(0);
    let e = h.io(cmd(0x02, 1, 0, 1, buf.addr()));
    assert!(e.status().is(StatusCode::UnrecoveredReadError), "{}", e.status());
    assert!(e.status_field().dnr());

    // Zone 1 goes read only, zone 2 offline: the host sees it in statuses
    // and in the Changed Zone List.
    let zones = h.ctrl.namespaces()[0].zones().unwrap();
    zones.set_read_only(1).unwrap();
    zones.set_offline(2).unwrap();
    let w = h.io(cmd(0x01, 1, 64, 1, buf.addr()));
    assert!(w.status().is(StatusCode::ZoneIsReadOnly), "{}", w.status());
    let r = h.io(cmd(0x02, 1, 128, 1, buf.addr()));
    assert!(r.status().is(StatusCode::ZoneIsOffline), "{}", r.status());
    let log = h.buffer(4096);
    let mut glp = SubmissionEntry::new(0x02, 1);
    glp.prp1 = log.addr();
    glp.cdw10 = 0xBF | (1023 << 16);
    glp.cdw14 = 2 << 24;
    assert!(h.admin(glp).status().is_success());
    let mut b = [0u8; 4096];
    h.memory.read(log.addr(), &mut b).unwrap();
    let list = ChangedZoneList::from_bytes(&b);
    assert_eq!(list.zones, vec![64, 128]);
    // Reading the log clears it.
    assert!(h.admin(glp).status().is_success());
    h.memory.read(log.addr(), &mut b).unwrap();
    assert!(ChangedZoneList::from_bytes(&b).zones.is_empty());
    // Offline Zone is accepted from Read Only only.
    let mut off = SubmissionEntry::new(0x79, 1);
    off.set_cdw10_11(64);
    off.cdw13 = 0x05;
    assert!(h.io(off).status().is_success());
    off.set_cdw10_11(0);
    assert!(h.io(off).status().is(StatusCode::InvalidZoneStateTransition));
    // The Error Information log holds the failures, newest first.
    let mut err = SubmissionEntry::new(0x02, 0);
    err.prp1 = log.addr();
    err.cdw10 = 0x01 | (15 << 16);
    assert!(h.admin(err).status().is_success());
    h.memory.read(log.addr(), &mut b).unwrap();
    let newest = zns_spec::log::ErrorLogEntry::from_bytes(b[..64].try_into().unwrap());
    assert_eq!(newest.status.status(), StatusCode::InvalidZoneStateTransition.status());
}

#[test]
fn power_cut_keeps_flushed_and_fua_writes() {
    let mut h = start(MediaChoice::Ram, "tiny");
    let buf = h.buffer(4096);
    h.memory.write(buf.addr(), &[0x5A; 4096]).unwrap();
    for lba in 0..8 {
        assert!(h.io(cmd(0x01, 1, lba, 1, buf.addr())).status().is_success());
    }
    assert!(h.io(SubmissionEntry::new(0x00, 1)).status().is_success());
    for lba in 8..16 {
        assert!(h.io(cmd(0x01, 1, lba, 1, buf.addr())).status().is_success());
    }
    // Zone 1: a FUA write is durable without a flush.
    let mut fua = cmd(0x01, 1, 64, 1, buf.addr());
    fua.cdw12 |= 1 << 30;
    assert!(h.io(fua).status().is_success());
    for seed in 0..20 {
        let ctrl = h.ctrl.clone();
        ctrl.power_cut(seed);
        assert!(!ctrl.is_ready(), "a power cut leaves the controller disabled");
        h = Harness::start(ctrl, h.memory.clone(), 32).unwrap();
        let z = h.ctrl.namespaces()[0].zones().unwrap();
        let e0 = z.zone_info(0).unwrap().written_extent;
        assert!((8..=16).contains(&e0), "zone 0 extent {e0}");
        assert_eq!(z.zone_info(1).unwrap().written_extent, 65);
        let r = h.io(cmd(0x02, 1, 7, 1, buf.addr()));
        assert!(r.status().is_success());
        // Rewrite the lost tail so every seed starts from 16 written blocks.
        for lba in e0..16 {
            assert!(h.io(cmd(0x01, 1, lba, 1, buf.addr())).status().is_success());
        }
    }
}

#[test]
fn a_device_image_survives_a_restart_and_a_power_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
    {
        let mut h = start(MediaChoice::Image(path.clone()), "tiny");
        let buf = h.buffer(4096);
        h.memory.write(buf.addr(), &[0xC3; 4096]).unwrap();
        for lba in 0..4 {
            assert!(h.io(cmd(0x01, 1, lba, 1, buf.addr())).status().is_success());
        }
        assert!(h.io(cmd(0x01, 2, 500, 1, buf.addr())).status().is_success());
        assert!(h.io(SubmissionEntry::new(0x00, 0xFFFF_FFFF)).status().is_success());
        // Written after the flush: may be lost.
        assert!(h.io(cmd(0x01, 1, 4, 1, buf.addr())).status().is_success());
        h.ctrl.power_cut(3);
    }
    let mut h = start(MediaChoice::Image(path.clone()), "tiny");
    let z = h.ctrl.namespaces()[0].zones().unwrap();
    let extent = z.zone_info(0).unwrap().written_extent;
    assert!((4..=5).contains(&extent), "{extent}");
    let buf = h.buffer(4096);
    for (nsid, lba) in [(1, 3), (2, 500)] {
        assert!(h.io(cmd(0x02, nsid, lba, 1, buf.addr())).status().is_success());
        let mut b = [0u8; 4096];
        h.memory.read(buf.addr(), &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0xC3), "namespace {nsid} LBA {lba}");
    }
    // The write pointer continues where the durable data ends.
    assert!(h.io(cmd(0x01, 1, extent, 1, buf.addr())).status().is_success());
}

#[test]
fn metadata_travels_with_the_data() {
    let mut h = start(MediaChoice::Ram, "small");
    let buf = h.buffer(8192);
    let meta = h.buffer(4096);
    h.memory.write(meta.addr(), &(0..32u8).collect::<Vec<_>>()).unwrap();
    let mut w = cmd(0x01, 1, 0, 2, buf.addr());
    w.prp2 = buf.addr() + 4096;
    w.mptr = meta.addr();
    assert!(h.io(w).status().is_success());
    // Copy moves data and metadata to another zone's write pointer.
    let ranges = h.buffer(4096);
    let r = zns_spec::copy::SourceRangeFormat0::new(0, 2).to_bytes().unwrap();
    h.memory.write(ranges.addr(), &r).unwrap();
    let mut c = SubmissionEntry::new(0x19, 1);
    c.set_cdw10_11(1024);
    c.prp1 = ranges.addr();
    assert!(h.io(c).status().is_success(), "copy");
    let out = h.buffer(4096);
    let mut rd = cmd(0x02, 1, 1024, 2, buf.addr());
    rd.prp2 = buf.addr() + 4096;
    rd.mptr = out.addr();
    assert!(h.io(rd).status().is_success());
    let mut m = [0u8; 32];
    h.memory.read(out.addr(), &mut m).unwrap();
    assert_eq!(m.to_vec(), (0..32u8).collect::<Vec<_>>());
}
