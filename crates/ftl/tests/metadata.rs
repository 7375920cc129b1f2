//! Damage to the metadata log: a page that does not decode, the last one
//! included, fails the mount with its place (a crash cannot leave one);
//! `Ftl::repair` rolls the log back knowingly; read errors are reported.

mod common;

use std::sync::Arc;

use zns_device::{ReportFilter, ZoneState, ZonedDevice};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, FtlError, MemoryBlockDevice};

/// A formatted device with some data, flushed, its FTL dropped.
fn prepared(ops: usize) -> (Arc<dyn ZonedDevice>, MemoryBlockDevice, u32) {
    prepared_on("emu:tiny", ops)
}

/// [`prepared`] on the device `uri`.
fn prepared_on(uri: &str, ops: usize) -> (Arc<dyn ZonedDevice>, MemoryBlockDevice, u32) {
    let dev = common::device(uri);
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

/// Flips one byte of the block at `lba` on the emulated media.
fn flip(dev: &Arc<dyn ZonedDevice>, lba: u64, byte: usize) {
    let emu = Arc::clone(dev.emulator().unwrap());
    let media = emu.namespaces()[0].media();
    let mut page = vec![0u8; 4096];
    media.read(lba, &mut page).unwrap();
    page[byte] ^= 0x10;
    media.write(lba, &page).unwrap();
}

/// The error of a mount that must fail on the page at `lba`.
fn refused_at(dev: &Arc<dyn ZonedDevice>, lba: u64) -> String {
    match Ftl::open(Arc::clone(dev), FtlConfig::default()) {
        Err(FtlError::Corrupt { zone, block, reason }) => {
            assert_eq!(zone * 64 + block, lba, "{reason}");
            reason
        }
        other => panic!("expected the mount to fail on block {lba}, got {other:?}"),
    }
}

#[test]
fn a_half_written_last_page_is_damage_not_a_torn_write() {
    let (dev, model, meta) = prepared(400);
    let (_, wp) = current_meta_zone(dev.as_ref(), meta);
    // A page with half its bytes written, below the write pointer: a
    // crash cannot leave one (one-block writes are atomic on power loss).
    let mut q = dev.queue(2).unwrap();
    let mut b = dev.alloc(4096).unwrap();
    b[..2048].fill(0x5A);
    q.write(wp, &b).unwrap();
    q.flush().unwrap();
    drop(q);
    let reason = refused_at(&dev, wp);
    assert!(reason.contains("write pointer") && reason.contains("--repair"), "{reason}");
    // What the page held cannot be known: a repair refuses to lose it
    // silently, and writes nothing.
    match Ftl::repair(Arc::clone(&dev), FtlConfig::default()) {
        Err(FtlError::RepairLoses(r)) => assert_eq!(r.unknown_pages.len(), 1, "{r:?}"),
        other => panic!("{:?}", other.map(|(_, r)| r)),
    }
    refused_at(&dev, wp);
    // Accepted, it drops the page and loses nothing else: it held nothing.
    let (ftl, report) = Ftl::repair_with(Arc::clone(&dev), FtlConfig::default(), true).unwrap();
    let report = report.expect("the repair reports the damage");
    assert_eq!(report.damage.len(), 1, "{report:?}");
    assert_eq!((report.damage[0].0 as u64) * 64 + report.damage[0].1 as u64, wp);
    assert_eq!(report.unknown_pages.len(), 1);
    assert!(report.unmapped.is_empty() && report.damaged_blocks.is_empty(), "{report:?}");
    common::compare_all(&ftl, &model);
    // The repaired FTL goes on, and opens without repair from now on.
    common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), 200, 6, false);
    ftl.flush().unwrap();
    drop(ftl);
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
}

/// A prepared device (blocks tagged with sequence numbers) whose newest
/// log page, made durable by a flush, maps a batch of freshly written
/// blocks; returns it with the model before and after the batch and the
/// page's address. The device is written too little for garbage
/// collection to run: a collection's zone reset makes the log durable
/// first, which would split the batch over two pages at a time that
/// depends on the collector thread.
fn last_page_maps_a_batch() -> (Arc<dyn ZonedDevice>, MemoryBlockDevice, MemoryBlockDevice, u64) {
    let (dev, model, meta) = prepared_on("emu:tiny,metadata=16", 60);
    let before = MemoryBlockDevice::new(model.block_size(), model.capacity_blocks());
    let mut buf = vec![0u8; model.block_size() as usize];
    for l in 0..model.capacity_blocks() {
        model.read(l, &mut buf).unwrap();
        before.write(l, &buf).unwrap();
    }
    let older = (10..40u64).filter(|&l| {
        before.read(l, &mut buf).unwrap();
        buf.iter().any(|&b| b != 0)
    });
    assert!(older.count() >= 10, "the batch replaces older versions");
    let ftl = Ftl::open(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let (_, start) = current_meta_zone(dev.as_ref(), meta);
    for l in 10..40u64 {
        common::fill(&mut buf, l, 1000 + l);
        ftl.write(l, &buf).unwrap();
        model.write(l, &buf).unwrap();
    }
    ftl.flush().unwrap();
    assert_eq!(ftl.stats().gc_victims, 0, "garbage collection stayed idle");
    drop(ftl);
    let (_, wp) = current_meta_zone(dev.as_ref(), meta);
    assert_eq!(wp, start + 1, "the batch's records fill one page");
    (dev, before, model, wp - 1)
}

#[test]
fn a_flipped_byte_in_the_newest_durable_page_fails_the_mount_and_repair_rolls_back() {
    let (dev, _, after, page) = last_page_maps_a_batch();
    flip(&dev, page, 300);
    let reason = refused_at(&dev, page);
    assert!(reason.contains("checksum"), "{reason}");
    // The blocks' tags are newer than the kept log: the repair adopts them
    // and nothing is lost but the page itself.
    let (ftl, report) = Ftl::repair_with(Arc::clone(&dev), FtlConfig::default(), true).unwrap();
    let report = report.expect("damage reported");
    assert_eq!(report.unknown_pages.len(), 1, "{report:?}");
    assert!(report.adopted >= 30, "{report:?}");
    common::compare_all(&ftl, &after);
    drop(ftl);
    common::compare_all(&Ftl::open(dev, FtlConfig::default()).unwrap(), &after);
}

#[test]
fn without_the_tags_rescan_a_repair_rolls_back_to_the_older_versions() {
    let (dev, before, _, page) = last_page_maps_a_batch();
    flip(&dev, page, 4000);
    refused_at(&dev, page);
    let config = FtlConfig { rescan: false, ..FtlConfig::default() };
    let (ftl, report) = Ftl::repair_with(Arc::clone(&dev), config, true).unwrap();
    let report = report.expect("damage reported");
    assert_eq!(report.adopted, 0);
    // The damaged page's records are unreadable: the batch is lost, and
    // the blocks read their versions from before it, as reported.
    common::compare_all(&ftl, &before);
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
fn unreadable_log_pages_are_damage_named_and_repaired() {
    // A metadata page the device cannot read back (Unrecovered Read
    // Error, as a drive's ECC failure or a device image's data checksum
    // gives) is a damaged page: named, and rolled back by a repair.
    let (dev, _, meta) = prepared(100);
    let (_, wp) = current_meta_zone(dev.as_ref(), meta);
    let emu = Arc::clone(dev.emulator().unwrap());
    emu.namespaces()[0].inject_read_error(wp - 1);
    match Ftl::open(Arc::clone(&dev), FtlConfig::default()) {
        Err(FtlError::Corrupt { zone, block, reason }) => {
            assert_eq!(zone * 64 + block, wp - 1, "{reason}");
            assert!(reason.contains("Unrecovered Read Error"), "{reason}");
        }
        other => panic!("expected a damaged page, got {other:?}"),
    }
    // The newest page unreadable: the repair drops it and adopts the
    // blocks its records mapped by their tags, as for a damaged page.
    let (dev, _, after, page) = last_page_maps_a_batch();
    Arc::clone(dev.emulator().unwrap()).namespaces()[0].inject_read_error(page);
    let reason = refused_at(&dev, page);
    assert!(reason.contains("Unrecovered Read Error"), "{reason}");
    let (ftl, report) = Ftl::repair_with(Arc::clone(&dev), FtlConfig::default(), true).unwrap();
    let report = report.expect("damage reported");
    assert_eq!(report.unknown_pages.len(), 1, "{report:?}");
    common::compare_all(&ftl, &after);
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
    let e = Ftl::open(dev, FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(
        matches!(e, FtlError::NotEmpty { written_zones: 1 }),
        "other data is not 'no FTL': {e}"
    );
}

#[test]
fn a_damaged_header_page_is_damage_not_an_unformatted_device() {
    let (dev, model, _) = prepared(50);
    // Both copies: one alone is recovered from the other.
    flip(&dev, 0, 40);
    flip(&dev, 1, 40);
    let reason = refused_at(&dev, 0);
    assert!(
        reason.contains("header page (its superblock") && reason.contains("checksum"),
        "{reason}"
    );
    assert!(reason.contains("nothing was changed"), "{reason}");
    // Neither a repair nor open_or_format takes it for something else.
    let e = Ftl::repair(Arc::clone(&dev), FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(matches!(e, FtlError::Corrupt { zone: 0, block: 0, .. }), "{e}");
    let e = Ftl::open_or_format(Arc::clone(&dev), FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(matches!(e, FtlError::Corrupt { zone: 0, block: 0, .. }), "{e}");
    assert!(Ftl::written_zones(dev.as_ref()).unwrap() > 1, "nothing was reset");
    flip(&dev, 1, 40);
    let ftl = Ftl::open(Arc::clone(&dev), FtlConfig::default()).expect("one copy restored");
    common::compare_all(&ftl, &model);
    drop(ftl);
    flip(&dev, 0, 40);
    let ftl = Ftl::open(dev, FtlConfig::default()).expect("the header restored, the FTL opens");
    common::compare_all(&ftl, &model);
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
        // The header's copy is intact: opened, with every block. An open
        // FTL may write and collect garbage in the background (the zone
        // count moves), so the check is the data itself, then again after
        // a reopen.
        Ok(ftl) => {
            common::compare_all(&ftl, &model);
            drop(ftl);
            let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
            common::compare_all(&ftl, &model);
            return;
        }
        Err(e) => panic!("unexpected error {e}"),
    }
    // Refused: nothing was reset, the data zones still hold the blocks.
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
    assert!(e.to_string().contains("not formatted over"), "{e}");
}

#[test]
fn a_damaged_end_page_with_no_older_checkpoint_is_known_by_its_place_or_repaired_from_the_tags() {
    let dev = common::device("emu:tiny,metadata=16");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    let mut buf = vec![0u8; 4096];
    for round in 0..3u64 {
        for l in (round * 7..ftl.capacity_blocks()).step_by(3) {
            common::fill(&mut buf, l, round);
            ftl.write(l, &buf).unwrap();
            model.write(l, &buf).unwrap();
        }
    }
    ftl.flush().unwrap();
    assert_eq!(ftl.stats().checkpoints, 1, "only the format's checkpoint");
    drop(ftl);
    // The format's checkpoint: its End page (page kind 4) in zone 0.
    let media = Arc::clone(dev.emulator().unwrap().namespaces()[0].media());
    let end = (0..64u64)
        .find(|&lba| {
            media.read(lba, &mut buf).unwrap();
            buf[4] == 4 && buf[..4] != [0; 4]
        })
        .expect("the End page");
    flip(&dev, end, 40);
    // Alone, the End page is known by its place (right after the
    // checkpoint's last page, followed by a page of the same mount): the
    // checkpoint is whole, and the mount passes over the damage.
    let ftl = Ftl::open(Arc::clone(&dev), FtlConfig::default()).unwrap();
    common::compare_all(&ftl, &model);
    assert_eq!(ftl.check(false).unwrap().problems[0].kind(), "damaged-metadata");
    drop(ftl);
    // With the page after it damaged too, nothing tells what the End page
    // was, and no complete checkpoint is left.
    flip(&dev, end + 1, 40);
    refused_at(&dev, end);
    let (ftl, report) = Ftl::repair_with(Arc::clone(&dev), FtlConfig::default(), true).unwrap();
    let report = report.expect("damage reported");
    assert!(report.partial_checkpoint, "{report:?}");
    assert_eq!(report.damage[0].1 as u64, end);
    common::compare_all(&ftl, &model);
    drop(ftl);
    common::compare_all(&Ftl::open(dev, FtlConfig::default()).unwrap(), &model);
}
