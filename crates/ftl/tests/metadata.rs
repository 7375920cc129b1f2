//! Damage to the metadata log: a torn last page is dropped, damage
//! anywhere else is reported with its place; read errors are reported.

mod common;

use std::sync::Arc;

use zns_device::{ReportFilter, ZoneState, ZonedDevice};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, FtlError, MemoryBlockDevice};

/// A formatted device with some data, flushed, its FTL dropped.
fn prepared(ops: usize) -> (Arc<dyn ZonedDevice>, MemoryBlockDevice, u32) {
    let dev = common::device("emu:tiny");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), ops, 5, false);
    ftl.flush().unwrap();
    let meta = ftl.meta_zones();
    drop(ftl);
    (dev, model, meta)
}

/// The metadata zone being written: (start LBA, write pointer).
fn current_meta_zone(dev: &dyn ZonedDevice, meta: u32) -> (u64, u64) {
    let mut q = dev.queue(2).unwrap();
    let zones = q.report_zones(0, ReportFilter::All, meta as usize).unwrap();
    let z = zones
        .iter()
        .find(|z| matches!(z.state, ZoneState::ImplicitlyOpen | ZoneState::Closed))
        .expect("a metadata zone is being written");
    (z.start, z.write_pointer.unwrap())
}

#[test]
fn a_torn_last_page_is_dropped_and_the_log_goes_on() {
    let (dev, model, meta) = prepared(400);
    let (_, wp) = current_meta_zone(dev.as_ref(), meta);
    // A half-written page at the end of the log.
    let mut q = dev.queue(2).unwrap();
    let mut b = dev.alloc(4096).unwrap();
    b[..2048].fill(0x5A);
    q.write(wp, &b).unwrap();
    q.flush().unwrap();
    drop(q);
    let ftl = Ftl::open(Arc::clone(&dev), FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
    // The next mount's pages follow the torn one: still fine.
    common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), 200, 6, false);
    ftl.flush().unwrap();
    drop(ftl);
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
}

#[test]
fn damage_inside_the_log_is_reported_with_its_place() {
    let (dev, _, meta) = prepared(100);
    let (start, wp) = current_meta_zone(dev.as_ref(), meta);
    assert!(wp - start >= 3, "a few pages were written");
    let emu = Arc::clone(dev.emulator().unwrap());
    let media = emu.namespaces()[0].media();
    let target = wp - 2;
    let mut page = vec![0u8; 4096];
    media.read(target, &mut page).unwrap();
    page[100] ^= 0xFF;
    media.write(target, &page).unwrap();
    match Ftl::open(dev, FtlConfig::default()) {
        Err(FtlError::Corrupt { zone, block, reason }) => {
            assert_eq!(zone * 64 + block, target, "{reason}");
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn read_errors_in_the_log_are_reported() {
    let (dev, _, meta) = prepared(100);
    let (start, _) = current_meta_zone(dev.as_ref(), meta);
    let emu = Arc::clone(dev.emulator().unwrap());
    emu.namespaces()[0].inject_read_error(start + 1);
    let e = Ftl::open(dev, FtlConfig::default()).unwrap_err();
    assert!(matches!(e, FtlError::Device { .. }), "{e}");
    assert!(e.to_string().contains("read metadata"), "{e}");
}

#[test]
fn a_device_of_another_geometry_or_without_ftl_is_refused() {
    let dev = common::device("emu:tiny");
    assert!(matches!(
        Ftl::open(Arc::clone(&dev), FtlConfig::default()),
        Err(FtlError::NotFormatted)
    ));
    // User data where the metadata should be.
    let mut q = dev.queue(2).unwrap();
    let b = dev.alloc(4096).unwrap();
    q.write(0, &b).unwrap();
    let mut c = dev.alloc(4096).unwrap();
    c.fill(1);
    q.write(1, &c).unwrap();
    drop(q);
    assert!(matches!(Ftl::open(dev, FtlConfig::default()), Err(FtlError::NotFormatted)));
}

#[test]
fn checkpoints_recycle_metadata_zones() {
    let dev = common::device("emu:tiny");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), 6000, 7, true);
    let s = ftl.stats();
    assert!(s.checkpoints > 3, "{s:?}");
    assert!(s.meta_blocks_written > 6 * 48, "the log wrapped around the metadata zones: {s:?}");
    ftl.close().unwrap();
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
}

#[test]
fn an_invalid_format_changes_nothing() {
    let (dev, model, _) = prepared(200);
    // Fifteen of sixteen zones for metadata leaves no room for data.
    let bad = FtlConfig { meta_zones: Some(15), ..FtlConfig::default() };
    let e = Ftl::format(Arc::clone(&dev), bad).map(|_| ()).unwrap_err();
    assert!(matches!(e, FtlError::Config(_)), "{e}");
    let ftl = Ftl::open(dev, FtlConfig::default()).expect("the FTL survives a refused format");
    common::compare_all(&ftl, &model);
}

#[test]
fn damaged_metadata_is_never_reformatted() {
    let (dev, model, meta) = prepared(200);
    let (start, _) = current_meta_zone(dev.as_ref(), meta);
    let emu = Arc::clone(dev.emulator().unwrap());
    let media = emu.namespaces()[0].media();
    let mut page = vec![0u8; 4096];
    media.read(start, &mut page).unwrap();
    page[17] ^= 0x40;
    media.write(start, &page).unwrap();
    let written = Ftl::written_zones(dev.as_ref()).unwrap();
    assert!(written > 0);
    match Ftl::open_or_format(Arc::clone(&dev), FtlConfig::default()) {
        Err(FtlError::NotEmpty { written_zones }) => assert_eq!(written_zones, written),
        Err(FtlError::Corrupt { .. }) => {}
        Ok(_) => panic!("a device with damaged metadata was reformatted"),
        Err(e) => panic!("unexpected error {e}"),
    }
    // Nothing was reset: the data zones still hold the blocks.
    assert_eq!(Ftl::written_zones(dev.as_ref()).unwrap(), written);
    // Repairing the page brings everything back.
    page[17] ^= 0x40;
    media.write(start, &page).unwrap();
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
}

#[test]
fn only_an_empty_device_is_formatted_by_open_or_format() {
    let dev = common::device("emu:tiny");
    let ftl = Ftl::open_or_format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    drop(ftl);
    let other = common::device("emu:tiny");
    let mut q = other.queue(2).unwrap();
    let b = other.alloc(4096).unwrap();
    q.write(64, &b).unwrap();
    drop(q);
    let e = Ftl::open_or_format(other, FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(matches!(e, FtlError::NotEmpty { written_zones: 1 }), "{e}");
    assert!(e.to_string().contains("refusing to format"), "{e}");
}
