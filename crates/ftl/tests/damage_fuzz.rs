//! FTL damage fuzzer: one flipped byte in a metadata page of an FTL filled
//! to one of several states (several checkpoints, garbage collection
//! having run, dropped without a close, closed cleanly), every written
//! metadata page in turn. The property: a mount or a repair that succeeds
//! returns exactly the last flushed state; anything else is an error that
//! names the damaged place or what a repair would lose. Never fewer
//! blocks with success.
//!
//! `ZNS_FTL_DAMAGE_CASES` sets the number of damaged FTLs (default 48, a
//! few seconds), `ZNS_FTL_DAMAGE_SEED` the first seed.

mod common;

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_device::{ReportFilter, ZoneState, ZonedDevice};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, FtlError, MemoryBlockDevice};

/// How the FTL was left before the damage.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Explicit checkpoints between batches of writes, then more writes.
    Checkpoints,
    /// Enough overwrites on the small device for garbage collection.
    CollectedGarbage,
    /// Written and flushed, then dropped without a close.
    Dropped,
    /// Closed cleanly (a checkpoint at the end).
    Closed,
}

const STATES: [State; 4] =
    [State::Checkpoints, State::CollectedGarbage, State::Dropped, State::Closed];

/// An FTL on a tagged `tiny` device left in `state`, its last flushed
/// contents and its metadata zone count.
fn filled(state: State, seed: u64) -> (Arc<dyn ZonedDevice>, MemoryBlockDevice, u32) {
    let dev = common::device("emu:tiny,metadata=16");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    let n = ftl.capacity_blocks();
    let meta = ftl.meta_zones();
    match state {
        State::Checkpoints => {
            for round in 0..3 {
                common::random_ops(&ftl, &model, 0..n, 150, seed * 8 + round, false);
                ftl.flush().unwrap();
                ftl.checkpoint().unwrap();
            }
            common::random_ops(&ftl, &model, 0..n, 60, seed * 8 + 5, false);
            ftl.flush().unwrap();
        }
        State::CollectedGarbage => {
            common::random_ops(&ftl, &model, 0..n, 900, seed, true);
            ftl.flush().unwrap();
            assert!(ftl.stats().gc_victims > 0, "garbage collection ran");
        }
        State::Dropped => {
            common::random_ops(&ftl, &model, 0..n, 250, seed, false);
            ftl.flush().unwrap();
        }
        State::Closed => {
            common::random_ops(&ftl, &model, 0..n, 250, seed, false);
            ftl.close().unwrap();
            return (dev, model, meta);
        }
    }
    drop(ftl);
    (dev, model, meta)
}

/// LBAs of every written block of the metadata zones.
fn meta_blocks(dev: &Arc<dyn ZonedDevice>, meta: u32) -> Vec<u64> {
    let mut q = dev.queue(2).unwrap();
    let zones = q.report_zones(0, ReportFilter::All, meta as usize).unwrap();
    zones
        .iter()
        .filter(|z| z.state != ZoneState::Empty)
        .flat_map(|z| z.start..z.write_pointer.unwrap_or(z.start + z.capacity))
        .collect()
}

/// Whether `ftl` reads exactly `model`'s contents.
fn same(ftl: &Ftl, model: &MemoryBlockDevice) -> Result<(), String> {
    let bs = ftl.block_size() as usize;
    let (mut a, mut b) = (vec![0u8; bs], vec![0u8; bs]);
    for l in 0..ftl.capacity_blocks() {
        ftl.read(l, &mut a).map_err(|e| format!("block {l}: {e}"))?;
        model.read(l, &mut b).unwrap();
        if a != b {
            return Err(format!("block {l} differs from the last flushed state"));
        }
    }
    Ok(())
}

/// Whether `e` is an error that names the damage or what is lost.
fn names_damage(e: &FtlError) -> Result<(), String> {
    match e {
        FtlError::Corrupt { reason, .. } if !reason.is_empty() => Ok(()),
        FtlError::RepairLoses(r) if r.loses() && !r.damage.is_empty() => Ok(()),
        other => Err(format!("an error that names no damage: {other}")),
    }
}

/// One damaged FTL: open, then repair; what each did, or the violation.
fn case(state: State, seed: u64, pick: usize) -> Result<&'static str, String> {
    // Garbage collection runs in a thread, so the log's layout varies a
    // little from run to run: the damaged block is picked among this
    // FTL's own, the `pick`-th of them.
    let (dev, model, meta) = filled(state, seed);
    let blocks = meta_blocks(&dev, meta);
    let mut rng = SmallRng::seed_from_u64(seed ^ pick as u64);
    let lba = blocks[pick % blocks.len()];
    let media = Arc::clone(dev.emulator().unwrap().namespaces()[0].media());
    let mut page = vec![0u8; 4096];
    media.read(lba, &mut page).unwrap();
    let byte = rng.gen_range(0..page.len());
    page[byte] ^= rng.gen_range(1..=255u8);
    media.write(lba, &page).unwrap();
    let mut outcome = "refused";
    match Ftl::open(Arc::clone(&dev), FtlConfig::default()) {
        Ok(ftl) => {
            same(&ftl, &model).map_err(|e| format!("the mount succeeded but {e}"))?;
            outcome = "mounted";
        }
        Err(e) => names_damage(&e)?,
    }
    match Ftl::repair(Arc::clone(&dev), FtlConfig::default()) {
        Ok((ftl, _)) => {
            same(&ftl, &model).map_err(|e| format!("the repair succeeded but {e}"))?;
            if outcome == "refused" {
                outcome = "repaired";
            }
        }
        Err(e) => {
            names_damage(&e)?;
            outcome = "lost";
        }
    }
    Ok(outcome)
}

#[test]
fn one_flipped_byte_in_any_metadata_page_never_loses_blocks_silently() {
    let cases: usize =
        std::env::var("ZNS_FTL_DAMAGE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    let first: u64 =
        std::env::var("ZNS_FTL_DAMAGE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let started = std::time::Instant::now();
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    let mut failures = Vec::new();
    for i in 0..cases {
        let state = STATES[i % STATES.len()];
        let seed = first + (i / STATES.len() / 16) as u64;
        let pick = i / STATES.len();
        match case(state, seed, pick) {
            Ok(o) => *outcomes.entry(o).or_default() += 1,
            Err(e) => failures.push(format!("{state:?} seed {seed} pick {pick}: {e}")),
        }
    }
    eprintln!(
        "{cases} damaged FTLs in {:.1} s: {outcomes:?}, {} violations",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
