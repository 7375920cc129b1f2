//! The conformance suite against emulated devices (`emu:tiny`, `emu:small`),
//! plus device opening and URI handling of the emulator backend.
//!
//! Set `ZNS_CONFORMANCE_DEVICE` to a URI to run the whole suite against
//! another device as well (it resets every zone: use a scratch device).

#[macro_use]
mod conformance;

use std::sync::Arc;

use zns_device::{open, DeviceError, DriverDevice, ReportFilter, ZonedDevice};

macro_rules! suite {
    ($profile:ident, $uri:literal) => {
        mod $profile {
            use super::conformance as c;

            fn dev() -> std::sync::Arc<dyn zns_device::ZonedDevice> {
                zns_device::open($uri).expect($uri)
            }

            suite_tests!();
            check_tests!(zrwa_unsupported, zrwa_window_and_commits, zrwa_resources);
        }
    };
}

suite!(tiny, "emu:tiny");
suite!(small, "emu:small");
suite!(tiny_512, "emu:tiny,lba=512");
suite!(tiny_zrwa, "emu:tiny,zrwa=16/4/2");
suite!(small_zrwa, "emu:small,zrwa=64/8/3");

#[test]
fn every_check_has_a_test() {
    assert_eq!(
        conformance::CHECKS.len(),
        22,
        "add the new check to suite_tests! in conformance/mod.rs"
    );
}

#[test]
fn conformance_on_configured_device() {
    let Ok(uri) = std::env::var("ZNS_CONFORMANCE_DEVICE") else { return };
    let dev = open(&uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    conformance::run_all(dev.as_ref());
}

#[test]
fn emulated_devices_describe_themselves() {
    let dev = open("emu:tiny").unwrap();
    let i = dev.info();
    assert_eq!(i.backend, "driver");
    assert_eq!(i.uri, "emu:tiny");
    assert!(i.transport.contains("emulator"), "{}", i.transport);
    assert_eq!(i.serial, "ZNSKIT-TINY-0001");
    assert_eq!((i.block_size, i.zone_count, i.zone_size, i.zone_capacity), (4096, 16, 64, 48));
    assert_eq!((i.max_open, i.max_active), (Some(4), Some(6)));
    assert_eq!((i.mdts_bytes, i.zasl_bytes), (4096 << 5, 4096 << 4));
    assert_eq!(i.capabilities.extension_bytes, 64);
    assert!(i.capabilities.append && i.capabilities.copy.is_some());
    assert!(i.capabilities.read_across_zone_boundaries);
    let conv = i.conventional.expect("tiny has a conventional namespace");
    assert_eq!((conv.block_size, conv.blocks), (4096, 1024));
    assert_ne!(conv.nsid, i.nsid);
    let id = i.identify.as_ref().expect("identify data");
    assert_eq!(id.controller.serial_number.trim(), "ZNSKIT-TINY-0001");
    assert!(dev.emulator().is_some());
    assert!(dev.as_any().downcast_ref::<DriverDevice>().is_some());

    let z = open("emu:").unwrap();
    assert_eq!(z.info().zone_count, 904);
    assert!(z.info().conventional.is_none());
    let s = open("emu:small,media=null,timing=off").unwrap();
    assert_eq!((s.info().zone_count, s.info().metadata_size), (256, 16));
}

#[test]
fn lba_option_selects_the_block_size() {
    let dev = open("emu:zn540,lba=512,media=null").unwrap();
    let i = dev.info();
    assert_eq!((i.block_size, i.zone_size, i.zone_capacity), (512, 524288 * 8, 275712 * 8));
    assert_eq!(i.zone_count, 904);
    let dev = open("emu:zn540,lba=4096").unwrap();
    assert_eq!((dev.info().block_size, dev.info().zone_size), (4096, 524288));
    // Data goes through in 512 B blocks.
    let dev = open("emu:tiny,lba=512").unwrap();
    assert_eq!((dev.info().block_size, dev.info().zone_capacity), (512, 48 * 8));
    let mut q = dev.queue(4).unwrap();
    let mut b = dev.alloc(4096).unwrap();
    b.fill(0x3C);
    q.write(0, &b).unwrap();
    assert_eq!(q.zone(0).unwrap().write_pointer, Some(8));
    let mut r = dev.alloc(4096).unwrap();
    q.read(0, &mut r).unwrap();
    assert!(r.iter().all(|&x| x == 0x3C));
}

#[test]
fn large_metadata_transfers_round_trip() {
    // 64 bytes for each of the largest write's blocks: more metadata than
    // the controller stages on the stack.
    let dev = open("emu:zn540,zones=2,metadata=64").unwrap();
    let blocks = dev.info().max_transfer_blocks() as usize;
    assert!(blocks * 64 > 2048, "{blocks} blocks");
    let mut q = dev.queue(4).unwrap();
    let mut data = dev.alloc(blocks * 4096).unwrap();
    data.fill(0x5E);
    let meta: Vec<u8> = (0..blocks * 64).map(|i| (i % 251) as u8).collect();
    let mut m = dev.alloc(meta.len()).unwrap();
    m.copy_from_slice(&meta);
    data.attach_metadata(m);
    q.write(0, &data).unwrap();
    let mut back = dev.alloc(blocks * 4096).unwrap();
    back.attach_metadata(dev.alloc(meta.len()).unwrap());
    q.read(0, &mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0x5E));
    assert_eq!(&back.metadata().unwrap()[..], &meta[..]);
}

/// Mean device time (ns) of `n` QD 1 4 KiB writes to the first zone.
fn qd1_4k_write_ns(uri: &str, n: u64) -> f64 {
    let dev = open(uri).unwrap();
    let clock = Arc::clone(dev.emulator().expect("emulated").clock());
    let mut q = dev.queue(4).unwrap();
    let b = dev.alloc(4096).unwrap();
    let per = 4096 / dev.info().block_size as u64;
    q.write(0, &b).unwrap();
    let t0 = clock.now_ns();
    for i in 1..=n {
        q.write(i * per, &b).unwrap();
    }
    (clock.now_ns() - t0) as f64 / n as f64
}

#[test]
fn small_lbas_are_slower_on_the_virtual_clock() {
    let per =
        zns_emulator::profile::Profile::by_name("zn540").unwrap().timing.unwrap().small_lba_ns;
    let base = qd1_4k_write_ns("emu:zn540,media=null", 200);
    let same = qd1_4k_write_ns("emu:zn540,media=null,lba=4096", 200);
    let small = qd1_4k_write_ns("emu:zn540,media=null,lba=512", 200);
    assert_eq!(base, same, "4 KiB LBAs: nothing changes");
    let extra = small - base;
    assert!((extra - 8.0 * per as f64).abs() < 0.1 * 8.0 * per as f64, "{base} -> {small} ns");
}

#[test]
fn null_media_keeps_zone_state_but_no_data() {
    let dev = open("emu:tiny,media=null").unwrap();
    let mut q = dev.queue(4).unwrap();
    let mut b = dev.alloc(4096).unwrap();
    b.fill(0xEE);
    q.write(0, &b).unwrap();
    assert_eq!(q.zone(0).unwrap().write_pointer, Some(1));
    q.read(0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0));
}

#[test]
fn images_keep_data_and_zone_state_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = zns_emulator::profile::Profile::by_name("tiny").unwrap();
    zns_emulator::image::DeviceImage::create(&path, &profile).unwrap();
    let uri = format!("emu:file={}", path.display());
    {
        let dev = open(&uri).unwrap();
        let mut q = dev.queue(4).unwrap();
        let mut b = dev.alloc(2 * 4096).unwrap();
        b.fill(0x5A);
        q.write(64, &b).unwrap();
        q.flush().unwrap();
        assert_eq!(dev.info().uri, uri);
    }
    let dev = open(&format!("{uri},profile=tiny")).unwrap();
    let mut q = dev.queue(4).unwrap();
    let z = q.zone(64).unwrap();
    assert_eq!(z.write_pointer, Some(66));
    let mut b = dev.alloc(2 * 4096).unwrap();
    q.read(64, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0x5A));
    // A buffer keeps its device, and so the image's lock, alive.
    drop((b, q));
    let e = open(&uri).unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    drop(dev);
    let e = open(&format!("{uri},profile=small")).unwrap_err();
    assert!(matches!(e, DeviceError::InvalidUri { .. }), "{e}");
    assert!(e.to_string().contains("holds a \"tiny\" device, not \"small\""), "{e}");
    let e = open(&format!("emu:file={}", dir.path().join("missing.img").display())).unwrap_err();
    assert!(e.to_string().contains("missing.img"), "{e}");
}

#[test]
fn devices_come_back_after_a_power_cut() {
    let dev = DriverDevice::open_emulator(&Default::default(), "emu:").unwrap();
    let emu = Arc::clone(dev.emulator().unwrap());
    let memory = Arc::clone(dev.host_memory().unwrap());
    {
        let mut q = dev.driver_queue(4).unwrap();
        let mut b = dev.alloc(4096).unwrap();
        b.fill(1);
        zns_device::ZoneQueue::write_fua(&mut q, 0, &b).unwrap();
    }
    emu.power_cut(7);
    drop(dev);
    let dev: Arc<dyn ZonedDevice> =
        Arc::new(DriverDevice::from_emulator(emu, memory, "emu:").unwrap());
    let mut q = dev.queue(4).unwrap();
    let z = q.report_zones(0, ReportFilter::All, 1).unwrap();
    assert_eq!(z[0].write_pointer, Some(1), "the FUA write survived");
}

#[test]
fn zones_the_emulator_changes_reach_the_device_layer() {
    let dev = open("emu:tiny").unwrap();
    let changes = dev.zone_changes().expect("emulated devices see their zone changes");
    assert_eq!(changes.take(), Vec::<u64>::new());
    let g0 = changes.generation();
    let zones = dev.emulator().unwrap().namespaces()[0].zones().unwrap();
    zones.set_offline(2).unwrap();
    zones.set_read_only(1).unwrap();
    zones.set_offline(2).unwrap(); // already Offline: no change
    assert_eq!(changes.generation(), g0 + 2);
    let zone_size = dev.info().zone_size;
    assert_eq!(changes.take(), vec![2 * zone_size, zone_size]);
    assert_eq!(changes.take(), Vec::<u64>::new(), "taken once");
    // The zones say so too.
    let mut q = dev.queue(2).unwrap();
    let z = q.report_zones(0, ReportFilter::All, 3).unwrap();
    assert_eq!(z[1].state, zns_device::ZoneState::ReadOnly);
    assert_eq!(z[2].state, zns_device::ZoneState::Offline);
}

#[test]
fn the_conventional_namespace_has_queues_of_its_own() {
    use zns_device::{Data, StatusCode, ZoneOp};
    let dev = open("emu:tiny").unwrap();
    let conv = dev.conventional().expect("tiny has a conventional namespace").clone();
    assert_eq!((conv.nsid, conv.block_size, conv.zone_count), (2, 4096, 0));
    assert_eq!(conv.conventional.unwrap().blocks, 1024);
    assert!(!conv.capabilities.append && conv.capabilities.copy.is_some());
    let mut q = dev.conventional_queue(4).unwrap();
    assert_eq!(q.info().nsid, 2);
    // Random writes, in any order, read back.
    let mut a = dev.alloc(8192).unwrap();
    a.fill(0x5A);
    q.write(900, &a).unwrap();
    let mut b = dev.alloc(4096).unwrap();
    b.fill(0xA5);
    q.write(10, &b).unwrap();
    q.write(5, &b).unwrap();
    let mut back = dev.alloc(8192).unwrap();
    q.read(900, &mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0x5A));
    q.copy(&[(900, 1), (10, 1)], 300).unwrap();
    q.read(300, &mut back).unwrap();
    assert!(back[..4096].iter().all(|&x| x == 0x5A) && back[4096..].iter().all(|&x| x == 0xA5));
    q.write_zeroes(300, 1).unwrap();
    q.flush().unwrap();
    // The zoned namespace is untouched; the device's own statuses.
    let mut zq = dev.queue(2).unwrap();
    assert_eq!(zq.zone(0).unwrap().write_pointer, Some(0));
    let e = q.read(1024, &mut back).unwrap_err();
    assert_eq!(e.status(), Some(StatusCode::LbaOutOfRange.status()), "{e}");
    let mut report = dev.alloc(4096).unwrap();
    let op =
        ZoneOp::ReportZones { slba: 0, filter: ReportFilter::All, partial: false, extended: false };
    let e = q.execute(&op, Data::FromDevice(&mut report)).unwrap_err();
    assert_eq!(e.status(), Some(StatusCode::InvalidOpcode.status()), "{e}");
    // A device without one says so.
    let small = open("emu:small").unwrap();
    assert!(small.conventional().is_none());
    let e = small.conventional_queue(1).map(drop).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e}");
}

#[test]
fn bad_uris_fail_cleanly() {
    for (uri, needle) in [
        ("nvme:/dev/ng0n1", "unknown device URI scheme \"nvme\""),
        ("ng:/dev/ng-znskit-missing", "/dev/ng-znskit-missing"),
        ("zbd:/dev/nvme-znskit-missing", "/dev/nvme-znskit-missing"),
        ("ng:/dev/null", "not an NVMe generic"),
        ("zbd:/dev/null", "not a block device"),
        ("emu:tiny,color=blue", "unknown option \"color\""),
        ("emu:bogus", "unknown profile \"bogus\""),
        ("emu:zn540,lba=1000", "lba=\"1000\""),
        ("pcie:ffff:ff:1f.7", "no PCI device ffff:ff:1f.7"),
        ("pcie:zz", "not a PCI address"),
    ] {
        let e = open(uri).unwrap_err();
        assert!(e.to_string().contains(needle), "{uri}: {e}");
    }
}

#[test]
fn pcie_refuses_devices_that_are_not_nvme_controllers() {
    // Any PCI function of another class on this machine must be refused
    // before the driver touches it.
    let Ok(entries) = std::fs::read_dir("/sys/bus/pci/devices") else { return };
    for e in entries.flatten() {
        let class = std::fs::read_to_string(e.path().join("class")).unwrap_or_default();
        if class.trim().starts_with("0x0108") {
            continue;
        }
        let addr = e.file_name().to_string_lossy().into_owned();
        let err = open(&format!("pcie:{addr}")).unwrap_err();
        assert!(err.to_string().contains("is not an NVMe controller"), "{addr}: {err}");
        return;
    }
}

#[test]
fn errors_are_send_and_sync_and_queues_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<DeviceError>();
    send_sync::<zns_device::IoBuffer>();
    send_sync::<DriverDevice>();
    send::<Box<dyn zns_device::ZoneQueue>>();
    send::<zns_device::DriverQueue>();
}

#[test]
fn a_block_failing_its_data_checksum_reads_as_unrecovered_read_error() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = zns_emulator::profile::Profile::by_name("tiny").unwrap();
    zns_emulator::image::DeviceImage::create(&path, &profile).unwrap();
    let data_offset = zns_emulator::image::layout(&profile)[0].data_offset;
    let uri = format!("emu:file={}", path.display());
    {
        let dev = open(&uri).unwrap();
        let mut q = dev.queue(4).unwrap();
        let mut b = dev.alloc(4 * 4096).unwrap();
        b.fill(0x3C);
        q.write(0, &b).unwrap();
        q.flush().unwrap();
    }
    // One bit of LBA 1 flips on the "medium".
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    f.write_all_at(&[0x3C ^ 0x08], data_offset + 4096 + 9).unwrap();
    drop(f);
    let dev = open(&uri).unwrap();
    let mut q = dev.queue(4).unwrap();
    let mut b = dev.alloc(4 * 4096).unwrap();
    let e = q.read(0, &mut b).unwrap_err();
    match &e {
        DeviceError::Nvme { status, lba, .. } => {
            assert!(status.is(zns_spec::StatusCode::UnrecoveredReadError), "{e}");
            assert_eq!(*lba, Some(0));
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("Unrecovered Read Error"), "{e}");
    let mut one = dev.alloc(4096).unwrap();
    q.read(2, &mut one).unwrap();
    assert!(one.iter().all(|&x| x == 0x3C));
}

/// A conventional twin is a device without zones: I/O anywhere below its
/// size, zone commands refused by the device, zone reports refused before
/// asking.
#[test]
fn conventional_twins_open_as_devices_without_zones() {
    use zns_device::{Target, ZoneAction};
    use zns_spec::StatusCode;
    let dev = open("emu:small-conv").unwrap();
    let i = dev.info().clone();
    assert!(!i.zoned);
    assert_eq!((i.zone_count, i.zone_size, i.zone_capacity), (0, 0, 0));
    assert_eq!(i.namespace_blocks, (256 * 960) * 100 / 107);
    assert_eq!(i.blocks(), i.namespace_blocks);
    assert!(!i.capabilities.append && i.conventional.is_none());
    assert_eq!(i.zone_index(0), None);
    assert_eq!(i.identify.as_ref().unwrap().controller.serial_number.trim(), "ZNSKIT-SMALLC-0001");
    let mut q = dev.queue(8).unwrap();
    let mut buf = dev.alloc(4 * 4096).unwrap();
    buf.iter_mut().enumerate().for_each(|(j, b)| *b = j as u8 ^ 0x5A);
    let last = i.blocks() - 4;
    q.write(last, &buf).unwrap();
    q.write(7, &buf).unwrap();
    q.flush().unwrap();
    let mut back = dev.alloc(4 * 4096).unwrap();
    q.read(last, &mut back).unwrap();
    assert_eq!(back[..], buf[..]);
    q.write_zeroes(8, 2).unwrap();
    q.read(7, &mut back).unwrap();
    assert_eq!(back[..4096], buf[..4096]);
    assert!(back[4096..3 * 4096].iter().all(|&b| b == 0));
    let e = q.write(last + 1, &buf).unwrap_err();
    assert_eq!(e.status().and_then(|s| s.code()), Some(StatusCode::LbaOutOfRange), "{e}");
    let e = q.zone_action(ZoneAction::Reset, Target::Zone(0)).unwrap_err();
    assert_eq!(e.status().and_then(|s| s.code()), Some(StatusCode::InvalidOpcode), "{e}");
    let e = q.report_zones(0, ReportFilter::All, 10).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("conventional") && e.to_string().contains("no zones"), "{e}");
    let fw = dev.emulator().unwrap().namespaces()[0].firmware().unwrap().stats();
    assert_eq!((fw.host_blocks, fw.mapped_blocks), (8, 6));
}

#[test]
fn uri_options_scale_and_provision_conventional_twins() {
    let d = open("emu:zn540-conv,zones=16,op=28,media=null").unwrap();
    let blocks = (16 * 275712 / 3072 * 3072) as f64 / 1.28;
    assert_eq!(d.info().namespace_blocks, blocks.floor() as u64);
    let d = open("emu:zn540-conv,zones=16,lba=512,media=null").unwrap();
    assert_eq!(d.info().block_size, 512);
    assert_eq!(d.info().namespace_blocks, ((16 * 275712 / 3072 * 3072 * 8) as f64 / 1.07) as u64);
    let e = open("emu:zn540,op=28").unwrap_err().to_string();
    assert!(e.contains("op=") && e.contains("ZNS profile"), "{e}");
    let e = open("emu:zn540-conv,zones=1,op=1").unwrap_err().to_string();
    assert!(e.contains("spare"), "{e}");
}

#[test]
fn a_power_cut_keeps_committed_zrwa_blocks_and_loses_the_window() {
    let uri = "emu:tiny,zrwa=16/4/2";
    let Ok(zns_device::DeviceUri::Emulator(e)) = uri.parse() else { panic!("{uri}") };
    let dev = DriverDevice::open_emulator(&e, uri).unwrap();
    let w = dev.info().capabilities.zrwa.expect("zrwa= gives the namespace ZRWAs");
    assert_eq!((w.size, w.flush_granularity, w.resources, w.explicit_flush), (16, 4, 2, true));
    let emu = Arc::clone(dev.emulator().unwrap());
    let memory = Arc::clone(dev.host_memory().unwrap());
    {
        let mut q = dev.driver_queue(4).unwrap();
        zns_device::ZoneQueue::open_zrwa(&mut q, 0).unwrap();
        let mut b = dev.alloc(8 * 4096).unwrap();
        b.fill(7);
        zns_device::ZoneQueue::write(&mut q, 0, &b).unwrap();
        zns_device::ZoneQueue::commit_zrwa(&mut q, 3).unwrap();
        // Even a flush does not make the window durable.
        zns_device::ZoneQueue::flush(&mut q).unwrap();
    }
    emu.power_cut(3);
    drop(dev);
    let dev: Arc<dyn ZonedDevice> =
        Arc::new(DriverDevice::from_emulator(emu, memory, uri).unwrap());
    let mut q = dev.queue(4).unwrap();
    let z = q.zone(0).unwrap();
    assert_eq!((z.state, z.write_pointer), (zns_device::ZoneState::Closed, Some(4)));
    assert!(!z.has_zrwa(), "a power cycle ends every ZRWA");
    let mut b = dev.alloc(8 * 4096).unwrap();
    q.read(0, &mut b).unwrap();
    assert!(b[..4 * 4096].iter().all(|&x| x == 7), "committed blocks survive");
    assert!(b[4 * 4096..].iter().all(|&x| x == 0), "the window is lost");
}

#[test]
fn device_images_keep_zrwas_and_committed_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let mut profile = zns_emulator::profile::Profile::by_name("tiny").unwrap();
    profile.namespaces[0].zrwa = Some(zns_emulator::zns::ZrwaGeometry {
        size: 8,
        flush_granularity: 2,
        resources: 1,
        explicit_flush: true,
    });
    zns_emulator::image::DeviceImage::create(&path, &profile).unwrap();
    let uri = format!("emu:file={}", path.display());
    {
        let dev = open(&uri).unwrap();
        let mut q = dev.queue(4).unwrap();
        q.open_zrwa(64).unwrap();
        let mut b = dev.alloc(6 * 4096).unwrap();
        b.fill(0x42);
        q.write(64, &b).unwrap();
        q.commit_zrwa(67).unwrap();
    }
    let dev = open(&uri).unwrap();
    assert_eq!(dev.info().capabilities.zrwa.map(|w| w.size), Some(8));
    let mut q = dev.queue(4).unwrap();
    let z = q.zone(64).unwrap();
    assert_eq!((z.write_pointer, z.has_zrwa()), (Some(68), false));
    let mut b = dev.alloc(6 * 4096).unwrap();
    q.read(64, &mut b).unwrap();
    assert!(b[..4 * 4096].iter().all(|&x| x == 0x42));
    assert!(b[4 * 4096..].iter().all(|&x| x == 0), "uncommitted blocks are not kept");
    // The old window's blocks are still in the file; a new window that
    // skips them reads zeros there, not them.
    q.open_zrwa(64).unwrap();
    let mut one = dev.alloc(4096).unwrap();
    one.fill(0x17);
    q.write(70, &one).unwrap();
    let mut b = dev.alloc(3 * 4096).unwrap();
    q.read(68, &mut b).unwrap();
    assert!(b[..2 * 4096].iter().all(|&x| x == 0), "a hole in the window reads zeros");
    assert!(b[2 * 4096..].iter().all(|&x| x == 0x17));
}

/// The available blocks of each placement handle of `dev`'s namespace, from
/// I/O Management Receive (Reclaim Unit Handle Status) on a raw queue.
fn ruh_available(dev: &DriverDevice) -> Vec<u64> {
    use zns_spec::fdp::{IoManagementReceive, RuhStatus};
    let mut q = dev.driver_queue(4).unwrap();
    let cmd = IoManagementReceive::ruh_status(dev.namespace().nsid, 1024);
    let mut buf = dev.controller().alloc_buffer(4096).unwrap();
    let qp = q.queue_pair();
    qp.execute(cmd.to_entry().unwrap(), Some(&mut buf)).unwrap();
    let status = RuhStatus::from_bytes(buf.as_slice()).unwrap();
    status.descriptors.iter().map(|d| d.available_blocks).collect()
}

#[test]
fn writes_carry_their_placement_handle_to_an_fdp_device() {
    let dev = open("emu:small-fdp").unwrap();
    let driver = dev.as_any().downcast_ref::<DriverDevice>().unwrap();
    let before = ruh_available(driver);
    assert_eq!(before.len(), 8);
    let mut q = dev.queue(4).unwrap();
    let buf = q.alloc(8 * 4096).unwrap();
    q.write_placed(0, &buf, 3).unwrap();
    q.write(64, &buf).unwrap();
    let after = ruh_available(driver);
    let used: Vec<u64> = before.iter().zip(&after).map(|(b, a)| b - a).collect();
    // Handle 3 took the placed write, handle 0 the one without a handle.
    assert_eq!(used, [8, 0, 0, 8, 0, 0, 0, 0]);
    let mut back = q.alloc(8 * 4096).unwrap();
    q.read(0, &mut back).unwrap();
    assert_eq!(&back[..], &buf[..]);
}

#[test]
fn fdp_devices_describe_their_placement_configuration() {
    use zns_device::RuhKind;
    let dev = open("emu:small-fdp").unwrap();
    let f = dev.info().fdp.clone().expect("emu:small-fdp has FDP");
    assert_eq!((f.endurance_group, f.enabled, f.config_index), (1, true, 0));
    assert_eq!((f.reclaim_groups, f.rgif, f.max_placement_ids), (1, 0, 8));
    assert_eq!(f.handles, vec![RuhKind::InitiallyIsolated; 8]);
    // One reclaim unit is one segment of 960 blocks of 4 KiB.
    assert_eq!(f.reclaim_unit_bytes, 960 * 4096);
    assert_eq!(f.placement_id(5, 0), Some(5));
    for uri in ["emu:small", "emu:small-conv", "emu:tiny"] {
        assert!(open(uri).unwrap().info().fdp.is_none(), "{uri}");
    }
}

#[test]
fn ruh_status_counts_down_per_handle_and_an_update_gives_a_fresh_unit() {
    let dev = open("emu:small-fdp").unwrap();
    let unit = dev.info().fdp.as_ref().unwrap().reclaim_unit_bytes / 4096;
    let mut q = dev.queue(4).unwrap();
    let fresh = q.ruh_status().unwrap();
    assert_eq!(fresh.descriptors.len(), 8);
    assert!(fresh.descriptors.iter().enumerate().all(|(i, d)| d.pid == i as u16));
    assert!(fresh.descriptors.iter().all(|d| d.available_blocks == unit));
    let buf = q.alloc(16 * 4096).unwrap();
    q.write_placed(0, &buf, 2).unwrap();
    q.write_placed(100, &buf, 2).unwrap();
    q.write_placed(200, &buf, 5).unwrap();
    let avail = |q: &mut Box<dyn zns_device::ZoneQueue>| -> Vec<u64> {
        q.ruh_status().unwrap().descriptors.iter().map(|d| d.available_blocks).collect()
    };
    let mut want = vec![unit; 8];
    want[2] = unit - 32;
    want[5] = unit - 16;
    assert_eq!(avail(&mut q), want);
    // Handle 2 leaves its partly written unit; the next write to it opens
    // a fresh one. Handle 5 keeps its unit.
    q.ruh_update(&[2]).unwrap();
    want[2] = unit;
    assert_eq!(avail(&mut q), want);
    q.write_placed(300, &buf, 2).unwrap();
    want[2] = unit - 16;
    assert_eq!(avail(&mut q), want);
    // The device checks the identifiers: one it lacks changes nothing.
    let e = q.ruh_update(&[1, 9]).unwrap_err();
    assert!(e.is_status(zns_device::StatusCode::InvalidField), "{e}");
    assert_eq!(avail(&mut q), want);
}

#[test]
fn reclaim_unit_handle_commands_run_asynchronously_too() {
    use zns_device::{RuhStatus, ZoneOp};
    let dev = open("emu:small-fdp").unwrap();
    let mut q = dev.queue(4).unwrap();
    let data = q.alloc(4 * 4096).unwrap();
    q.submit(ZoneOp::Write { lba: 8, fua: false, placement: Some(7) }, Some(data), 1).unwrap();
    q.submit(ZoneOp::RuhUpdate { pids: vec![3, 4] }, None, 2).unwrap();
    q.submit(ZoneOp::RuhStatus, Some(q.alloc(16 + 8 * 32).unwrap()), 3).unwrap();
    let mut done = Vec::new();
    q.drain(zns_device::DEFAULT_TIMEOUT, &mut |c| done.push(c)).unwrap();
    done.sort_by_key(|c| c.tag);
    assert!(done.iter().all(|c| c.result.is_ok()), "{done:?}");
    assert!(done[1].buffer.is_none(), "the update's identifiers are the queue's own");
    let status = RuhStatus::from_bytes(done[2].buffer.as_ref().unwrap()).unwrap();
    let unit = dev.info().fdp.as_ref().unwrap().reclaim_unit_bytes / 4096;
    assert_eq!(status.descriptors[7].available_blocks, unit - 4);
    assert_eq!(status.descriptors[3].available_blocks, unit);
    // A status buffer the command cannot describe is refused with it.
    let r = q.submit(ZoneOp::RuhStatus, Some(q.alloc(8).unwrap()), 4).unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)), "{}", r.error);
    assert_eq!(r.buffer.map(|b| b.len()), Some(8));
    let r = q.submit(ZoneOp::RuhUpdate { pids: vec![] }, None, 5).unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)), "{}", r.error);
}

#[test]
fn placement_needs_fdp_and_is_refused_clearly_without() {
    use zns_device::ZoneOp;
    let dev = open("emu:small").unwrap();
    let mut q = dev.queue(4).unwrap();
    let buf = q.alloc(4096).unwrap();
    let e = q.write_placed(0, &buf, 1).unwrap_err();
    assert!(matches!(e, DeviceError::InvalidArgument(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("placement identifier 1") && msg.contains("no Flexible Data Placement"),
        "{msg}"
    );
    assert!(msg.contains("emu:small"), "{msg}");
    // The asynchronous path refuses it too, and hands the buffer back.
    let r = q
        .submit(ZoneOp::Write { lba: 0, fua: false, placement: Some(1) }, Some(buf), 1)
        .unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)), "{}", r.error);
    assert!(r.buffer.is_some());
    for e in [q.ruh_status().unwrap_err(), q.ruh_update(&[0]).unwrap_err()] {
        assert!(matches!(e, DeviceError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("no Flexible Data Placement"), "{e}");
    }
    // Nothing was written: zone 0 is still empty.
    assert_eq!(q.zone(0).unwrap().write_pointer, Some(0));
}

#[test]
fn fdp_features_and_logs_go_through_the_device() {
    use zns_spec::fdp::{FdpEventsFeature, FdpFeature, SupportedFdpEvent};
    let dev = open("emu:small-fdp").unwrap();
    let dw0 = dev.get_features(&FdpFeature { endgid: 1, ..Default::default() }.get_entry(), None);
    assert_eq!(dw0.unwrap(), 1, "FDPE, configuration 0");
    let ev = FdpEventsFeature { nsid: 1, placement_handle: 0, event_types: 3, enable: true };
    let types = [0x00u8, 0x03, 0x80];
    dev.set_features(&ev.set_entry(), Some(&types)).unwrap();
    let mut data = [0u8; 6];
    let n = dev.get_features(&ev.get_entry(), Some(&mut data)).unwrap();
    assert_eq!(n, 3);
    let got: Vec<SupportedFdpEvent> =
        data.chunks(2).map(|c| SupportedFdpEvent::from_bytes([c[0], c[1]])).collect();
    assert!(got.iter().all(|e| e.enabled), "{got:?}");
    // Not Get Features: refused before it reaches the controller.
    let e = dev.get_features(&ev.set_entry(), None).unwrap_err();
    assert!(matches!(e, DeviceError::InvalidArgument(_)), "{e}");
    // The controller's own statuses come back by name.
    let e = dev.get_features(&FdpFeature { endgid: 2, ..Default::default() }.get_entry(), None);
    assert!(e.unwrap_err().is_status(zns_device::StatusCode::InvalidField));
}
