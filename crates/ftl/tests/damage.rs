//! Damage that costs nothing: a damaged metadata page the log does not
//! need (superseded by a newer checkpoint, a page of a checkpoint, a
//! header copy) is passed over by the mount and named by the check, and a
//! repair restores the exact flushed state.

mod common;

use std::sync::Arc;

use zns_device::{ReportFilter, ZoneState, ZonedDevice};
use zns_ftl::{Ftl, FtlConfig, FtlError, MemoryBlockDevice};

/// Flips one byte of the block at `lba` on the emulated media.
fn flip(dev: &Arc<dyn ZonedDevice>, lba: u64, byte: usize) {
    let emu = Arc::clone(dev.emulator().unwrap());
    let media = emu.namespaces()[0].media();
    let mut page = vec![0u8; 4096];
    media.read(lba, &mut page).unwrap();
    page[byte] ^= 0x10;
    media.write(lba, &page).unwrap();
}

/// A tagged `tiny` FTL with several checkpoints, data written after the
/// last, flushed, dropped.
fn prepared() -> (Arc<dyn ZonedDevice>, MemoryBlockDevice) {
    let dev = common::device("emu:tiny,metadata=16");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    for round in 0..3 {
        common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), 300, round, false);
        ftl.flush().unwrap();
        ftl.checkpoint().unwrap();
    }
    common::random_ops(&ftl, &model, 0..ftl.capacity_blocks(), 100, 9, false);
    ftl.flush().unwrap();
    drop(ftl);
    (dev, model)
}

/// Every written block of the metadata zones: (LBA, page kind byte,
/// checkpoint id for chunk and End pages), in log order (zones by their
/// first page's sequence number).
fn meta_pages(dev: &Arc<dyn ZonedDevice>) -> Vec<(u64, u8, u64)> {
    let mut q = dev.queue(2).unwrap();
    let zones = q.report_zones(0, ReportFilter::All, 16).unwrap();
    let media = Arc::clone(dev.emulator().unwrap().namespaces()[0].media());
    let mut b = vec![0u8; 4096];
    let mut live = Vec::new();
    for z in zones.iter().take(6) {
        if z.state == ZoneState::Empty {
            continue;
        }
        let end = z.write_pointer.unwrap_or(z.start + z.capacity);
        media.read(z.start, &mut b).unwrap();
        let seq = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let pages = (z.start..end)
            .map(|lba| {
                media.read(lba, &mut b).unwrap();
                (lba, b[4], u64::from_le_bytes(b[32..40].try_into().unwrap()))
            })
            .collect::<Vec<_>>();
        live.push((seq, pages));
    }
    live.sort_by_key(|(s, _)| *s);
    live.into_iter().flat_map(|(_, p)| p).collect()
}

/// Opens, compares with `model`, and checks that the check names the
/// damaged block as repairable damage; then repairs, which restores
/// everything and names the block, and opens clean again.
fn passed_over_and_repaired(dev: &Arc<dyn ZonedDevice>, model: &MemoryBlockDevice, lba: u64) {
    let ftl = Ftl::open(Arc::clone(dev), FtlConfig::default())
        .unwrap_or_else(|e| panic!("damage the log does not need fails the mount: {e}"));
    common::compare_all(&ftl, model);
    let r = ftl.check(false).unwrap();
    assert!(r.only_repairable(), "{r:?}");
    assert_eq!(r.problems[0].kind(), "damaged-metadata");
    assert_eq!(r.problems[0].zone().unwrap() as u64 * 64, lba - lba % 64, "{:?}", r.problems);
    drop(ftl);
    let (ftl, report) = Ftl::repair(Arc::clone(dev), FtlConfig::default())
        .unwrap_or_else(|e| panic!("the repair restores everything: {e}"));
    let report = report.expect("the damage is reported");
    assert!(!report.loses(), "{report:?}");
    let named = report.damage.iter().any(|d| d.0 as u64 * 64 + d.1 as u64 == lba);
    assert!(named, "the damaged block {lba} is named: {report:?}");
    common::compare_all(&ftl, model);
    assert!(ftl.check(true).unwrap().is_ok());
    drop(ftl);
    let ftl = Ftl::open(Arc::clone(dev), FtlConfig::default()).unwrap();
    common::compare_all(&ftl, model);
    assert!(ftl.check(true).unwrap().is_ok(), "the repaired log holds no damage");
}

#[test]
fn a_damaged_end_page_superseded_by_a_newer_checkpoint_loses_nothing() {
    let (dev, model) = prepared();
    let pages = meta_pages(&dev);
    let ends: Vec<&(u64, u8, u64)> = pages.iter().filter(|p| p.1 == 4).collect();
    assert!(ends.len() >= 2, "two checkpoints in the live zones: {pages:?}");
    let older = ends[0].0;
    flip(&dev, older, 40);
    passed_over_and_repaired(&dev, &model, older);
}

#[test]
fn damaged_pages_before_the_newest_checkpoint_lose_nothing() {
    // Each page of the oldest live zone before the newest checkpoint's
    // Begin page: log pages, an older checkpoint's chunk and End.
    let (dev, _) = prepared();
    let pages = meta_pages(&dev);
    let newest_chunk = pages.iter().rposition(|p| p.1 == 3).expect("a chunk page");
    let zone_start = pages[0].0;
    // The Begin page is the page before the chunk; the pages before it.
    for &(lba, _, _) in &pages[2..newest_chunk - 1] {
        let (dev, model) = prepared();
        assert!(lba >= zone_start + 2);
        flip(&dev, lba, 300);
        passed_over_and_repaired(&dev, &model, lba);
    }
}

#[test]
fn a_damaged_chunk_of_the_newest_checkpoint_falls_back_on_the_older_one() {
    let (dev, model) = prepared();
    let pages = meta_pages(&dev);
    let chunk = pages.iter().rev().find(|p| p.1 == 3).expect("a chunk page").0;
    flip(&dev, chunk, 100);
    passed_over_and_repaired(&dev, &model, chunk);
}

#[test]
fn one_damaged_header_copy_is_recovered_from_the_other() {
    // Either copy of the first live zone's header (where the superblock
    // is read), and of the newest zone's.
    for (copy, byte) in [(0u64, 40usize), (1, 40), (0, 4000), (1, 9)] {
        for newest in [false, true] {
            let (dev, model) = prepared();
            let pages = meta_pages(&dev);
            let start = match newest {
                false => pages[0].0,
                true => pages.last().unwrap().0 / 64 * 64,
            };
            flip(&dev, start + copy, byte);
            passed_over_and_repaired(&dev, &model, start + copy);
        }
    }
}

#[test]
fn both_header_copies_of_every_live_zone_damaged_is_named() {
    let (dev, model) = prepared();
    let pages = meta_pages(&dev);
    let mut starts: Vec<u64> = pages.iter().map(|p| p.0 / 64 * 64).collect();
    starts.dedup();
    for &s in &starts {
        flip(&dev, s, 40);
        flip(&dev, s + 1, 40);
    }
    let e = Ftl::open(Arc::clone(&dev), FtlConfig::default()).map(|_| ()).unwrap_err();
    match &e {
        FtlError::Corrupt { zone, block: 0, reason } => {
            // Named in the first written zone, where it is looked for first.
            assert_eq!(*zone * 64, *starts.iter().min().unwrap(), "{reason}");
            assert!(reason.contains("no copy of it could be read"), "{reason}");
        }
        other => panic!("{other}"),
    }
    let e = Ftl::repair(Arc::clone(&dev), FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(matches!(e, FtlError::Corrupt { block: 0, .. }), "{e}");
    for &s in &starts {
        flip(&dev, s, 40);
    }
    common::compare_all(&Ftl::open(dev, FtlConfig::default()).unwrap(), &model);
}

#[test]
fn a_damaged_page_after_the_checkpoint_is_named_and_not_repaired_without_accepting_the_loss() {
    let (dev, model) = prepared();
    let pages = meta_pages(&dev);
    // A log page after the newest checkpoint's End.
    let end = pages.iter().rposition(|p| p.1 == 4).unwrap();
    let lba = pages[end + 1..].iter().find(|p| p.1 == 2).expect("a log page after the End").0;
    flip(&dev, lba, 300);
    let e = Ftl::open(Arc::clone(&dev), FtlConfig::default()).map(|_| ()).unwrap_err();
    assert!(
        matches!(&e, FtlError::Corrupt { zone, block, .. } if zone * 64 + block == lba),
        "the damaged block is named: {e}"
    );
    let d = Ftl::diagnose(dev.as_ref(), &FtlConfig::default()).unwrap().expect("damage");
    assert!(d.loses() && d.unknown_pages.len() == 1, "{d:?}");
    let written = Ftl::written_zones(dev.as_ref()).unwrap();
    match Ftl::repair(Arc::clone(&dev), FtlConfig::default()) {
        Err(FtlError::RepairLoses(r)) => assert_eq!(*r, d),
        other => panic!("{:?}", other.map(|(_, r)| r)),
    }
    // Nothing was written: the same damage again, every zone as it was.
    assert_eq!(Ftl::written_zones(dev.as_ref()).unwrap(), written);
    assert_eq!(Ftl::diagnose(dev.as_ref(), &FtlConfig::default()).unwrap(), Some(d));
    let (ftl, r) = Ftl::repair_with(Arc::clone(&dev), FtlConfig::default(), true).unwrap();
    assert!(r.unwrap().loses());
    // Every block flushed whose page was intact reads as written; those
    // the damaged page named came back by their tags.
    common::compare_all(&ftl, &model);
}
