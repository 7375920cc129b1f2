//! Garbage collection: a background thread that reclaims full zones.
//!
//! It starts when free zones fall to the GC reserve plus the low watermark
//! (or a writer waits for a zone) and runs until they reach the reserve
//! plus the high watermark. For each victim (chosen by the configured
//! [`crate::VictimPolicy`]) it moves every valid block to a GC stream's open zone
//! — with the NVMe Copy command when the device has it and the FTL owns
//! the destination zone, else by reading and writing — updates the map
//! only where the block was not overwritten meanwhile, makes those records
//! durable, then resets the victim under its reclaim lock, which waits for
//! reads still in the zone. Full zones that hold no valid block at that
//! moment are reset with it, under the same durable log write: the device
//! flushes a collection costs are paid once for all of them.
//!
//! Relocated blocks keep the birth time of their victim, so a later
//! overwrite measures their whole lifetime. The survivors of a victim go to
//! one of several GC streams by the rate at which the victim's blocks died
//! lately (see [`gc_class`]): blocks that keep company with fast-dying ones
//! are mostly hot, and hot data is kept apart from cold data however it was
//! first written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_device::{Target, ZoneAction};

use zns_ftl_core::victim::{self, Candidate};

use crate::config::{Role, WriteMode};
use crate::error::{FtlError, Result};
use crate::ftl::{IoCtx, Placed, Shared};
use crate::stats::Counters;
use crate::tag::{self, Tag};
use crate::zones::{Pools, Who};

/// The GC thread's body.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut ctx = match shared.new_ctx() {
        Ok(c) => c,
        Err(e) => {
            shared.fail(e);
            return;
        }
    };
    let mut running = false;
    loop {
        let victim = {
            let mut p = shared.zones.lock();
            loop {
                if p.shutdown || p.failed().is_some() {
                    return;
                }
                let wanted = p.gc_wanted() || (running && !p.gc_satisfied());
                if wanted {
                    if let Some(z) = select_victim(&shared, &p) {
                        shared.zones.take_victim(&mut p, z);
                        running = true;
                        break z;
                    }
                    // Nothing reclaimable in full zones. If writers are
                    // blocked, close out an open zone holding invalid blocks
                    // (it then becomes a candidate); failing that, tell them,
                    // then wait for a change (a zone filling, a discard).
                    let blocked = p.users_blocked();
                    if blocked {
                        let invalid = |z: u32, written: u32| written - shared.map.valid(z);
                        if let Some(z) = shared.zones.close_out_head(&mut p, invalid) {
                            drop(p);
                            if let Err(e) = finish(&shared, &mut ctx, z) {
                                shared.fail(e);
                                return;
                            }
                            p = shared.zones.lock();
                            continue;
                        }
                    }
                    shared.zones.set_stalled(&mut p, blocked);
                }
                if let Some(z) = empty_ahead(&shared, &p) {
                    // Not a watermark round: `running` stays as it was.
                    shared.zones.take_victim(&mut p, z);
                    break z;
                }
                running = false;
                p.gc_requested = false;
                shared.zones.gc_wait(&mut p, Duration::from_millis(if wanted { 5 } else { 50 }));
            }
        };
        if let Err(e) = collect(&shared, &mut ctx, victim) {
            shared.zones.return_victim(victim);
            if shared.zones.lock().failed().is_none() {
                shared.fail(e);
            }
            return;
        }
    }
}

/// A full zone holding no valid block, to reclaim before any writer needs
/// it: `Some` once such zones are at least as many as the free zones
/// writers may still take (and at least one).
///
/// Reclaiming a zone without valid blocks moves nothing (the write
/// amplification is the same whenever it is done), but its reset needs
/// the log durable first and takes time of its own (on a file-backed
/// device, holes punched in the file). Left to the watermarks, a stream
/// of overwrites on a full device waits for that whenever free zones run
/// out. Started here, with half of the runway (free zones plus empty
/// ones) still free, the log flush and the resets run while writers go on
/// into the other half, and [`collect`] takes every empty zone with the
/// first: under a stream each round reclaims about half the runway, one
/// durable log write for all. On a device with free zones to spare this
/// never fires (empty zones are fewer than free ones).
pub(crate) fn empty_ahead(shared: &Shared, p: &Pools) -> Option<u32> {
    let mut empty = p.full_zones().filter(|&z| shared.map.valid(z) == 0);
    let first = empty.next()?;
    let count = 1 + empty.count();
    (count >= p.user_free()).then_some(first)
}

/// Finishes `zone`, whose unwritten rest will never be written.
fn finish(shared: &Shared, ctx: &mut IoCtx, zone: u32) -> Result<()> {
    ctx.q
        .zone_action(ZoneAction::Finish, Target::Zone(shared.layout.zone_start(zone)))
        .map_err(FtlError::device("finish a zone"))?;
    Counters::add(&shared.stats.zone_finishes, 1);
    tracing::debug!(zone, "open zone closed out for garbage collection");
    Ok(())
}

/// The best victim among the full zones for the configured policy; `None`
/// when no full zone has an invalid block.
pub(crate) fn select_victim(shared: &Shared, p: &Pools) -> Option<u32> {
    let now = shared.now();
    let layout = &shared.layout;
    let candidates = p.full_zones().map(|z| {
        let valid = shared.map.valid(z);
        let info = &shared.zones.info[z as usize];
        // Keeps the samples the recent death rate of a victim comes from.
        info.sample(valid, now);
        Candidate {
            id: z,
            valid,
            capacity: layout.cap(z),
            birth: info.birth(now),
            written_at: info.written_at(now),
            resets: info.resets.load(std::sync::atomic::Ordering::Relaxed),
        }
    });
    victim::select(shared.config.policy, now, candidates)
}

/// The GC stream class (0 = hottest of `k`) of a victim whose blocks died
/// lately at `rate` per hot threshold of logical time (1: the rate of data
/// living as long as the threshold, which is the mean lifetime of any block
/// by default). The class limits halve from `2^(k/2)`: with two classes the
/// split is at 2, with four at 4, 2 and 1, with eight at 16 down to 1/4.
pub(crate) fn gc_class(rate: f64, k: usize) -> usize {
    let last = k.saturating_sub(1);
    let top = k as f64 / 2.0;
    (0..last).find(|&c| rate > (top - c as f64).exp2()).unwrap_or(last)
}

/// Reclaims `victim`: relocates its valid blocks, logs durably, resets it.
pub(crate) fn collect(shared: &Shared, ctx: &mut IoCtx, victim: u32) -> Result<()> {
    let started = Instant::now();
    let layout = &shared.layout;
    let base = layout.pba(victim, 0);
    let live: Vec<(u32, u64)> = (0..layout.cap(victim))
        .filter_map(|o| shared.map.owner(base + o).map(|l| (o, l)))
        .collect();
    let info = &shared.zones.info[victim as usize];
    let now = shared.now();
    let birth = info.birth(now);
    // The survivors go to the GC stream of the rate at which the victim's
    // blocks died lately, in units of the hot threshold.
    let rate = info.recent_death_rate(live.len() as u32, now) * shared.hot_threshold as f64;
    let class = gc_class(rate, shared.plan.gc.len());
    let stream = shared.plan.gc[class];
    let role = Role::gc_code(class);
    let exclusive = shared.config.write_mode == WriteMode::Write;
    let copy = shared.dev.info().capabilities.copy.filter(|_| shared.config.use_copy && exclusive);
    let bs = layout.block_size as usize;
    let mut i = 0usize;
    while i < live.len() {
        // The largest batch one command (or one read per run plus one
        // write) can move.
        let want = match copy {
            Some(c) => batch_for_copy(&live[i..], c.max_ranges, c.max_range_blocks, c.max_blocks),
            None => (live.len() - i).min(layout.mdts_blocks as usize),
        };
        let g = shared.zones.reserve(layout, stream, want as u32, Who::Gc, exclusive, role)?;
        let batch = &live[i..i + g.blocks as usize];
        let placed = match copy {
            Some(c) => {
                let ranges = runs(batch, c.max_range_blocks)
                    .map(|(o, n)| (layout.lba(base + o), n))
                    .collect::<Vec<_>>();
                let dest = layout.lba(layout.pba(g.zone, g.offset));
                ctx.q.copy(&ranges, dest).map_err(FtlError::device("copy valid blocks"))?;
                Counters::add(&shared.stats.gc_copy_commands, 1);
                Placed::one(layout.pba(g.zone, g.offset), g.blocks)
            }
            None => {
                let mut data = std::mem::take(&mut ctx.staging);
                data.resize(batch.len() * bs, 0);
                let r = read_runs(shared, ctx, &mut data, base, batch, bs);
                // A copy never outranks the version it copies (see
                // crate::tag): it carries no sequence number of its own. A
                // damaged block moves with a tag that fails as it did.
                let damaged = std::mem::take(&mut ctx.damaged);
                let tag = |i: u32| Tag {
                    logical: batch[i as usize].1,
                    seq: if damaged.contains(&i) { tag::POISONED } else { tag::RELOCATED },
                };
                let r = r.and_then(|()| shared.write_grant(ctx, &g, &data, tag));
                ctx.damaged = damaged;
                ctx.staging = data;
                r?
            }
        };
        let mut moved = 0u64;
        {
            let mut j = shared.journal.lock();
            let mut k = 0usize;
            for (p, n) in placed {
                for d in 0..n {
                    let (o, l) = batch[k];
                    if shared.map.relocate(&mut j, l, base + o, p + d) {
                        moved += 1;
                    }
                    k += 1;
                }
            }
        }
        shared.zones.info[g.zone as usize].add(birth, shared.now(), g.blocks);
        Counters::add(&shared.stats.data_blocks_written, g.blocks as u64);
        Counters::add(&shared.stats.gc_blocks_copied, g.blocks as u64);
        Counters::add(&shared.stats.gc_blocks_discarded_copies, g.blocks as u64 - moved);
        shared.zones.complete(&g);
        i += g.blocks as usize;
    }
    // Full zones that hold no valid block need no relocation, only the
    // durable log a reset needs: they are reclaimed with the victim, under
    // the same log flush. A stream of overwrites empties a zone for every
    // zone it fills; reclaimed one at a time, each cost two device flushes
    // (fdatasync on a file-backed device) while the stream waited for it.
    let empty = take_empty_zones(shared, victim);
    // Everything that moved blocks out of the victim, and every overwrite
    // or discard that emptied the other zones (journaled before their
    // valid count read 0, so taken by this persist), must be durable
    // before their blocks are gone.
    if let Err(e) = shared.persist(true) {
        empty.iter().for_each(|&z| shared.zones.return_victim(z));
        return Err(e);
    }
    debug_assert_eq!(shared.map.valid(victim), 0, "zone {victim} still holds valid blocks");
    for (i, &zone) in std::iter::once(&victim).chain(&empty).enumerate() {
        if let Err(e) = reset(shared, ctx, zone) {
            // The victim goes back by the caller; the rest here.
            empty[i.saturating_sub(1)..].iter().for_each(|&z| shared.zones.return_victim(z));
            return Err(e);
        }
    }
    Counters::add(&shared.stats.gc_nanos, started.elapsed().as_nanos() as u64);
    tracing::trace!(victim, moved = live.len(), empty = empty.len(), "zone reclaimed");
    Ok(())
}

/// Most empty zones reclaimed along with one victim: bounds the length of
/// one collection (a reset each; a waiting writer gets each zone as soon
/// as it is reset).
const EMPTY_BATCH: usize = 64;

/// Full zones besides `victim` holding no valid block (at most
/// [`EMPTY_BATCH`]), taken as victims. A full zone's valid count only
/// falls (nothing writes into it), so each stays empty.
fn take_empty_zones(shared: &Shared, victim: u32) -> Vec<u32> {
    let mut p = shared.zones.lock();
    let empty: Vec<u32> = p
        .full_zones()
        .filter(|&z| z != victim && shared.map.valid(z) == 0)
        .take(EMPTY_BATCH)
        .collect();
    for &z in &empty {
        shared.zones.take_victim(&mut p, z);
    }
    empty
}

/// Resets `zone`, a victim whose blocks are no longer mapped by the
/// durable log, once reads still in it are done; it becomes free.
fn reset(shared: &Shared, ctx: &mut IoCtx, zone: u32) -> Result<()> {
    {
        let _reclaim = shared.reclaim[zone as usize].write();
        ctx.q
            .zone_action(ZoneAction::Reset, Target::Zone(shared.layout.zone_start(zone)))
            .map_err(FtlError::device("reset a reclaimed zone"))?;
    }
    Counters::add(&shared.stats.zone_resets, 1);
    Counters::add(&shared.stats.gc_victims, 1);
    shared.zones.release_victim(zone);
    Ok(())
}

/// Runs of consecutive block offsets in `batch`, each at most `max`
/// blocks: (first offset, blocks).
fn runs(batch: &[(u32, u64)], max: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut i = 0usize;
    std::iter::from_fn(move || {
        let (start, _) = *batch.get(i)?;
        let mut n = 1u32;
        while n < max && batch.get(i + n as usize).is_some_and(|&(o, _)| o == start + n) {
            n += 1;
        }
        i += n as usize;
        Some((start, n))
    })
}

/// How many of the first entries of `live` one Copy command can move.
fn batch_for_copy(live: &[(u32, u64)], max_ranges: u32, max_range: u32, max_blocks: u32) -> usize {
    let mut blocks = 0usize;
    for (_, n) in runs(live, max_range).take(max_ranges as usize) {
        blocks += (n as usize).min(max_blocks as usize - blocks);
        if blocks == max_blocks as usize {
            break;
        }
    }
    blocks.max(1)
}

/// Reads the blocks of `batch` (offsets in the zone at `base`) into `data`.
fn read_runs(
    shared: &Shared,
    ctx: &mut IoCtx,
    data: &mut [u8],
    base: u32,
    batch: &[(u32, u64)],
    bs: usize,
) -> Result<()> {
    let layout = &shared.layout;
    let ms = shared.tag_size();
    let verify = shared.tagging.data_crc && ms > 0;
    ctx.damaged.clear();
    let mut at = 0usize;
    for (o, n) in runs(batch, layout.mdts_blocks) {
        let lba = layout.lba(base + o);
        let r = match verify {
            true => tag::read_with_metadata(
                ctx.q.as_mut(),
                &mut ctx.big,
                &mut ctx.tags,
                lba,
                n as usize,
                ms,
            ),
            false => ctx.big.set_len(n as usize * bs).and_then(|()| ctx.q.read(lba, &mut ctx.big)),
        };
        r.map_err(FtlError::device("read valid blocks"))?;
        if verify {
            let meta = ctx.tags.as_ref().expect("the metadata buffer is back after every read");
            for (j, (m, d)) in meta.chunks_exact(ms).zip(ctx.big.chunks_exact(bs)).enumerate() {
                let (offset, logical) = batch[at + j];
                if tag::decode(m, &shared.tagging, d).is_none_or(|t| t.logical != logical) {
                    tracing::warn!(
                        zone = layout.zone_of(base),
                        offset,
                        logical,
                        "GC moves a damaged block; it stays damaged"
                    );
                    Counters::add(&shared.stats.gc_damaged_blocks, 1);
                    ctx.damaged.push((at + j) as u32);
                }
            }
        }
        data[at * bs..(at + n as usize) * bs].copy_from_slice(&ctx.big);
        at += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_classes_split_by_rate() {
        assert_eq!(gc_class(100.0, 1), 0);
        assert_eq!((gc_class(2.5, 2), gc_class(1.5, 2)), (0, 1));
        let four: Vec<usize> = [5.0, 3.0, 1.5, 0.5, 0.0].iter().map(|&r| gc_class(r, 4)).collect();
        assert_eq!(four, vec![0, 1, 2, 3, 3]);
        assert_eq!((gc_class(20.0, 8), gc_class(0.3, 8), gc_class(0.2, 8)), (0, 6, 7));
    }

    #[test]
    fn runs_and_copy_batches_respect_limits() {
        let live: Vec<(u32, u64)> = [0, 1, 2, 5, 6, 9].iter().map(|&o| (o, 0)).collect();
        assert_eq!(runs(&live, 8).collect::<Vec<_>>(), vec![(0, 3), (5, 2), (9, 1)]);
        assert_eq!(runs(&live, 2).collect::<Vec<_>>(), vec![(0, 2), (2, 1), (5, 2), (9, 1)]);
        assert_eq!(batch_for_copy(&live, 2, 8, 100), 5);
        assert_eq!(batch_for_copy(&live, 10, 8, 4), 4);
        assert_eq!(batch_for_copy(&live, 10, 8, 100), 6);
    }
}
