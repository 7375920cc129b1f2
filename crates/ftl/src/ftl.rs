//! The FTL: [`Ftl`] implements [`BlockDevice`] over any zoned device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam::queue::ArrayQueue;
use parking_lot::{Mutex, RwLock};
use zns_device::{
    IoBuffer, ReportFilter, Target, ZoneAction, ZoneOp, ZoneQueue, ZoneState, ZonedDevice,
};

use crate::block::{check_range, check_request};
use crate::config::{FtlConfig, Role, StreamPlan, WriteMode};
use crate::error::{FtlError, Result};
use crate::journal::{records_per_page, Journal, Superblock};
use crate::layout::Layout;
use crate::map::Map;
use crate::meta::{meta_zone_plan, LogZrwa, MetaCtx, MetaWriter};
use crate::recovery::{Mode, RepairReport};
use crate::stats::{Counters, FtlStats, PoolCounts};
use crate::tag::{self, Tag, Tagging};
use crate::zones::{Grant, Pool, Who, Zones};

/// Most idle I/O queues kept for reuse (more threads than this at once
/// create and drop queues as they go).
const IDLE_QUEUES: usize = 64;

/// Where the runs of a grant's data landed, `(PBA, blocks)` in data order:
/// one run for a Write (no allocation on the write path), one per append
/// for Zone Appends.
pub(crate) enum Placed {
    One(Option<(u32, u32)>),
    Many(std::vec::IntoIter<(u32, u32)>),
}

impl Placed {
    /// A single run.
    pub(crate) fn one(pba: u32, blocks: u32) -> Placed {
        Placed::One(Some((pba, blocks)))
    }

    /// Runs in data order.
    pub(crate) fn many(runs: Vec<(u32, u32)>) -> Placed {
        Placed::Many(runs.into_iter())
    }
}

impl Iterator for Placed {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        match self {
            Placed::One(run) => run.take(),
            Placed::Many(runs) => runs.next(),
        }
    }
}

/// A queue and its buffers, used by one thread at a time.
pub(crate) struct IoCtx {
    pub q: Box<dyn ZoneQueue>,
    /// A buffer of the largest transfer (MDTS).
    pub big: IoBuffer,
    /// Buffers of one Zone Append each, for appends in flight.
    pub small: Vec<IoBuffer>,
    /// Host memory for data on its way between commands.
    pub staging: Vec<u8>,
    /// Metadata for `big` (MDTS blocks of per-LBA metadata) when blocks
    /// are tagged with their logical address; attached only while a
    /// command uses it.
    pub tags: Option<IoBuffer>,
    /// Indexes of the blocks of a GC batch whose data failed its check.
    pub damaged: Vec<u32>,
}

/// Everything the FTL's threads share.
///
/// Thread safety: `Send + Sync`. Lock order: meta → journal; zone pools and
/// per-zone reclaim locks are never held across each other or across the
/// meta lock's device commands, except the reclaim lock around a reset.
pub(crate) struct Shared {
    pub dev: Arc<dyn ZonedDevice>,
    pub layout: Layout,
    pub config: FtlConfig,
    pub plan: StreamPlan,
    pub map: Map,
    pub journal: Mutex<Journal>,
    pub meta: Mutex<MetaWriter>,
    pub zones: Zones,
    /// Held shared by reads of a zone, exclusively by its reset.
    pub reclaim: Box<[RwLock<()>]>,
    /// Idle queues with their buffers: taken and given back around every
    /// request without a lock.
    ctxs: ArrayQueue<IoCtx>,
    pub stats: Counters,
    /// Logical time: user blocks written (this mount) plus `clock_base`.
    clock_base: AtomicU64,
    /// Hot/cold threshold in blocks of logical time.
    pub hot_threshold: u64,
    /// Records waiting that trigger a background log write
    /// ([`persist_batch`]).
    persist_batch: usize,
    /// The next write sequence number for a user block's tag (see
    /// [`crate::tag`]).
    pub write_seq: AtomicU64,
    /// How blocks are tagged: the FTL instance's key, data checksums.
    pub tagging: Tagging,
    /// Damaged metadata pages the mount passed over (see [`Parts`]).
    pub mount_damage: Vec<crate::recovery::Damage>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("layout", &self.layout).finish_non_exhaustive()
    }
}

/// A host-side flash translation layer: a random-write [`BlockDevice`]
/// over the zones of a zoned device.
///
/// - **Map**: logical block → device block and back, packed; per-zone
///   valid counts ([`crate::map`]).
/// - **Zones**: free / open / full / victim pools; streams own their open
///   zones (write heads) within the device's open and active limits
///   ([`crate::zones`]).
/// - **Writes**: split at zone boundaries, written with Write commands at
///   the write pointer (one writer per open zone) or Zone Append (shared
///   open zones, several appends in flight), see [`WriteMode`].
/// - **Garbage collection**: a background thread between low and high
///   free-zone watermarks; writers wait for it when free zones reach the
///   GC reserve ([`crate::gc`]).
/// - **Persistence**: a checksummed log of map changes with periodic
///   checkpoints in dedicated zones ([`crate::meta`]); [`Ftl::open`]
///   recovers after a clean shutdown or a power cut.
///
/// Thread safety: `Send + Sync`; share it (`Arc<Ftl>`) and call it from
/// any number of threads. Each call uses its own device queue; reads take
/// no lock on the map.
pub struct Ftl {
    pub(crate) shared: Arc<Shared>,
    gc: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Ftl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ftl")
            .field("logical_blocks", &self.shared.layout.logical)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// Zones the FTL may keep open at once, the metadata log's included.
pub(crate) fn open_budget(dev: &dyn ZonedDevice) -> u32 {
    let i = dev.info();
    let limit = match (i.max_open, i.max_active) {
        (Some(o), Some(a)) => o.min(a),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 64,
    };
    limit.min(i.zone_count as u32)
}

/// What [`Shared::new`] needs besides the device and the configuration.
pub(crate) struct Parts {
    pub layout: Layout,
    pub map: Map,
    pub meta: MetaWriter,
    pub pools: Vec<Pool>,
    /// Half-written zones to continue, (zone, blocks written); their pool
    /// is [`Pool::Open`].
    pub resume: Vec<(u32, u32)>,
    pub clock: u64,
    /// The mount generation: write sequence numbers start at
    /// [`crate::tag::first_seq`] of it.
    pub generation: u32,
    /// Damaged metadata pages the mount passed over because they held
    /// nothing it needed (reported by [`Ftl::check`]).
    pub damage: Vec<crate::recovery::Damage>,
}

/// Most records a background log write waits for: 2 MiB of journal in
/// RAM, 512 MiB of data in 4 KiB blocks.
const MAX_PERSIST_BATCH: usize = 1 << 17;

/// Records waiting that trigger a background log write: a quarter of a
/// metadata zone of log pages (at least 16 pages, at most
/// [`MAX_PERSIST_BATCH`] records).
///
/// Every log write flushes the device first (data before log), so this
/// sets how often a stream of writes the client never flushes pays a
/// device flush (`fdatasync` on a file-backed device) in its write path:
/// at 16 pages, every 28 MiB of 4 KiB blocks; at a quarter of a `small`
/// metadata zone, every 423 MiB. Records still waiting are written by the
/// next flush, garbage collection or checkpoint; what the log has not
/// written yet a power cut may lose, as any write not flushed (with tags,
/// the rescan brings back what the device kept). A quarter of a zone
/// keeps one persist far below the zone the metadata zone plan allows it
/// to fill ([`meta_zone_plan`]).
fn persist_batch(layout: &Layout) -> usize {
    let pages = (layout.cap(0) / 4).max(16) as usize;
    (records_per_page(layout.block_size as usize) * pages).min(MAX_PERSIST_BATCH)
}

impl Shared {
    pub(crate) fn new(dev: Arc<dyn ZonedDevice>, config: FtlConfig, parts: Parts) -> Result<Self> {
        let budget = open_budget(dev.as_ref()).saturating_sub(1);
        let plan = StreamPlan::new(&config, budget)?;
        let Parts { layout, map, meta, pools, resume, clock, generation, damage } = parts;
        let zones = Zones::new(&layout, &plan, config.gc_low, config.gc_high, pools, resume);
        let hot_threshold = ((layout.logical as f64 * config.hot_threshold) as u64).max(1);
        let persist_batch = persist_batch(&layout);
        Ok(Shared {
            reclaim: (0..layout.zones).map(|_| RwLock::new(())).collect(),
            dev,
            plan,
            map,
            journal: Mutex::new(Journal::default()),
            tagging: Tagging {
                key: meta.sb.instance,
                data_crc: meta.sb.features & crate::journal::FEATURE_DATA_CRC != 0,
            },
            meta: Mutex::new(meta),
            zones,
            ctxs: ArrayQueue::new(IDLE_QUEUES),
            stats: Counters::default(),
            clock_base: AtomicU64::new(clock),
            hot_threshold,
            persist_batch,
            write_seq: AtomicU64::new(crate::tag::first_seq(generation)),
            mount_damage: damage,
            layout,
            config,
        })
    }

    /// Logical time: user blocks written.
    pub fn now(&self) -> u64 {
        self.clock_base.load(Ordering::Relaxed) + Counters::get(&self.stats.user_blocks_written)
    }

    /// A new queue with its buffers.
    pub fn new_ctx(&self) -> Result<IoCtx> {
        let q = self
            .dev
            .queue(self.config.queue_depth as usize)
            .map_err(FtlError::device("create an I/O queue"))?;
        let big = q
            .alloc(self.layout.mdts_blocks as usize * self.layout.block_size as usize)
            .map_err(FtlError::device("allocate an I/O buffer"))?;
        let tags = match self.tag_size() {
            0 => None,
            ms => Some(
                q.alloc(self.layout.mdts_blocks as usize * ms)
                    .map_err(FtlError::device("allocate a metadata buffer"))?,
            ),
        };
        Ok(IoCtx { q, big, small: Vec::new(), staging: Vec::new(), tags, damaged: Vec::new() })
    }

    /// Bytes of per-LBA metadata each data block carries its tag in (its
    /// logical address, for `Ftl::check` and a rescan of the zones), or 0
    /// when the device cannot store one: it needs separate metadata of at
    /// least 8 bytes that the backend passes.
    pub fn tag_size(&self) -> usize {
        let info = self.dev.info();
        if self.config.tag_blocks
            && info.capabilities.metadata
            && info.capabilities.stores_data
            && info.metadata_size >= 8
        {
            info.metadata_size as usize
        } else {
            0
        }
    }

    /// Runs `f` with a queue of the pool (created when none is idle).
    fn with_ctx<T>(&self, f: impl FnOnce(&mut IoCtx) -> Result<T>) -> Result<T> {
        let mut ctx = match self.ctxs.pop() {
            Some(c) => c,
            None => self.new_ctx()?,
        };
        let r = f(&mut ctx);
        // A queue with commands in flight (after an error) is not reused;
        // beyond IDLE_QUEUES idle ones, the extra is dropped.
        if ctx.q.outstanding() == 0 {
            let _ = self.ctxs.push(ctx);
        }
        r
    }

    /// The metadata writer's view of the rest.
    pub fn meta_ctx(&self) -> MetaCtx<'_> {
        MetaCtx {
            layout: &self.layout,
            map: &self.map,
            journal: &self.journal,
            stats: &self.stats,
            write_seq: &self.write_seq,
        }
    }

    /// Stops the FTL after a failure that may have left the device and the
    /// map apart; returns the error for the caller.
    pub fn fail(&self, e: FtlError) -> FtlError {
        self.zones.fail(&e.to_string());
        e
    }

    fn check_failed(&self) -> Result<()> {
        if !self.zones.has_failed() {
            return Ok(());
        }
        match self.zones.lock().failed() {
            Some(f) => Err(FtlError::Failed(f.to_string())),
            None => Ok(()),
        }
    }

    /// Writes the log (durably with `sync`); a failure stops the FTL.
    pub fn persist(&self, sync: bool) -> Result<()> {
        let mut m = self.meta.lock();
        // A persist that failed while this one waited may have taken
        // records it never wrote: nothing after it may claim durability,
        // even when it needs no device command of its own.
        self.check_failed()?;
        m.persist(&self.meta_ctx(), sync).map_err(|e| self.fail(e))
    }

    /// Writes the log in the background when enough records wait.
    fn maybe_persist(&self) -> Result<()> {
        if self.journal.lock().pending().len() < self.persist_batch {
            return Ok(());
        }
        self.persist_batch_now()
    }

    /// Writes the pending log records (not durably) unless another thread
    /// is writing the log already.
    fn persist_batch_now(&self) -> Result<()> {
        let Some(mut m) = self.meta.try_lock() else { return Ok(()) };
        self.check_failed()?;
        m.persist(&self.meta_ctx(), false).map_err(|e| self.fail(e))
    }

    /// The stream a user write of `n` blocks at `lba` goes to: hot when
    /// most of its blocks are hot by their update history
    /// ([`Zones::classify_write`], which also records this write).
    fn classify(&self, lba: u64, n: u64) -> Role {
        if self.plan.stream(Role::UserHot) == self.plan.stream(Role::UserCold) {
            return Role::UserCold;
        }
        let now = self.now();
        let mut hot = 0u64;
        for l in lba..lba + n {
            let at = self.map.lookup(l);
            if self.zones.classify_write(&self.map, &self.layout, l, at, now, self.hot_threshold) {
                hot += 1;
            }
        }
        if hot * 2 > n {
            Role::UserHot
        } else {
            Role::UserCold
        }
    }

    /// Writes `data` into the blocks of grant `g`, block `i` of it tagged
    /// `tag(i)` (when blocks are tagged);
    /// returns where each run of the data landed (PBA, blocks), in data
    /// order.
    pub fn write_grant(
        &self,
        ctx: &mut IoCtx,
        g: &Grant,
        data: &[u8],
        tag: impl Fn(u32) -> Tag,
    ) -> Result<Placed> {
        let bs = self.layout.block_size as usize;
        if g.exclusive {
            let ms = self.tag_size();
            let mut done = 0u32;
            while done < g.blocks {
                let k = (g.blocks - done).min(self.layout.mdts_blocks);
                ctx.big.set_len(k as usize * bs).map_err(FtlError::device("size a buffer"))?;
                ctx.big.copy_from_slice(&data[done as usize * bs..(done + k) as usize * bs]);
                if let Some(mut tags) = ctx.tags.take() {
                    if let Err(e) = tags.set_len(k as usize * ms) {
                        ctx.tags = Some(tags);
                        return Err(FtlError::device("size a metadata buffer")(e));
                    }
                    let blocks = &data[done as usize * bs..(done + k) as usize * bs];
                    tag::fill(&mut tags, ms, &self.tagging, &tag, done, blocks);
                    ctx.big.attach_metadata(tags);
                }
                let lba = self.layout.lba(self.layout.pba(g.zone, g.offset + done));
                let r = ctx.q.write(lba, &ctx.big);
                ctx.tags = ctx.big.detach_metadata();
                r.map_err(FtlError::device("write data"))?;
                done += k;
            }
            return Ok(Placed::one(self.layout.pba(g.zone, g.offset), g.blocks));
        }
        self.append(ctx, g, data, tag).map(Placed::many)
    }

    /// Zone Appends `data` into the zone of shared grant `g`, several in
    /// flight.
    fn append(
        &self,
        ctx: &mut IoCtx,
        g: &Grant,
        data: &[u8],
        tag: impl Fn(u32) -> Tag,
    ) -> Result<Vec<(u32, u32)>> {
        let bs = self.layout.block_size as usize;
        let ms = self.tag_size();
        let chunk = self.layout.zasl_blocks.min(self.layout.mdts_blocks).max(1);
        let chunks = g.blocks.div_ceil(chunk) as usize;
        let depth = ctx.q.capacity().clamp(1, 64);
        while ctx.small.len() < depth.min(chunks) {
            let mut b = ctx
                .q
                .alloc(chunk as usize * bs)
                .map_err(FtlError::device("allocate an append buffer"))?;
            if ms > 0 {
                // Stays attached: the queue hands it back with the data.
                let tags = ctx
                    .q
                    .alloc(chunk as usize * ms)
                    .map_err(FtlError::device("allocate a metadata buffer"))?;
                b.attach_metadata(tags);
            }
            ctx.small.push(b);
        }
        let zslba = self.layout.zone_start(g.zone);
        let mut placed = vec![(0u32, 0u32); chunks];
        let mut next = 0usize;
        let mut completed = 0usize;
        let mut error: Option<FtlError> = None;
        loop {
            while error.is_none() && next < chunks {
                let Some(mut b) = ctx.small.pop() else { break };
                let first = next as u32 * chunk;
                let k = chunk.min(g.blocks - first);
                if let Err(e) = b.set_len(k as usize * bs) {
                    ctx.small.push(b);
                    error = Some(FtlError::device("size an append buffer")(e));
                    break;
                }
                b.copy_from_slice(&data[first as usize * bs..(first + k) as usize * bs]);
                if let Some(tags) = b.metadata_mut() {
                    if let Err(e) = tags.set_len(k as usize * ms) {
                        ctx.small.push(b);
                        error = Some(FtlError::device("size a metadata buffer")(e));
                        break;
                    }
                    let blocks = &data[first as usize * bs..(first + k) as usize * bs];
                    tag::fill(tags, ms, &self.tagging, &tag, first, blocks);
                }
                match ctx.q.submit(ZoneOp::Append { zslba, fua: false }, Some(b), next as u64) {
                    Ok(()) => next += 1,
                    Err(r) => {
                        let full = r.is_queue_full();
                        if let Some(b) = r.buffer {
                            ctx.small.push(b);
                        }
                        if !full {
                            error = Some(FtlError::device("submit a zone append")(r.error));
                        }
                        break;
                    }
                }
            }
            ctx.q.ring();
            if ctx.q.outstanding() == 0 {
                break;
            }
            let (small, placed_ref, layout) = (&mut ctx.small, &mut placed, &self.layout);
            let mut got = 0usize;
            ctx.q.poll(usize::MAX, &mut |c| {
                got += 1;
                if let Some(b) = c.buffer {
                    small.push(b);
                }
                let i = c.tag as usize;
                let k = chunk.min(g.blocks - i as u32 * chunk);
                match c.result {
                    Ok(lba) => match layout.pba_of_lba(lba) {
                        Some(p) if layout.zone_of(p) == g.zone && i < placed_ref.len() => {
                            placed_ref[i] = (p, k)
                        }
                        _ => {
                            error.get_or_insert(FtlError::Failed(format!(
                                "a zone append to zone {} landed at LBA {lba}",
                                g.zone
                            )));
                        }
                    },
                    Err(e) => {
                        error.get_or_insert(FtlError::device("zone append")(e));
                    }
                }
            });
            completed += got;
            if got == 0 {
                std::hint::spin_loop();
            }
        }
        match error {
            Some(e) => Err(e),
            None if completed == chunks => Ok(placed),
            None => {
                Err(FtlError::Failed(format!("{completed} of {chunks} zone appends completed")))
            }
        }
    }

    fn do_write(&self, lba: u64, data: &[u8]) -> Result<()> {
        let n = check_request(lba, data.len(), self.layout.block_size, self.layout.logical)?;
        if n == 0 {
            return Ok(());
        }
        self.check_failed()?;
        let role = self.classify(lba, n);
        let stream = self.plan.stream(role);
        let exclusive = self.config.write_mode == WriteMode::Write;
        let bs = self.layout.block_size as usize;
        // Whether the log has a batch to write, learnt under the journal
        // lock taken for the map anyway.
        let mut batch_ready = false;
        // Whether an overwrite left a zone without valid blocks: garbage
        // collection may reclaim it ahead of need (`gc::empty_ahead`).
        let mut emptied = false;
        // Numbered before any of it is placed or logged: a number at or
        // above a log page's watermark means "written after that page".
        let seq = self.write_seq.fetch_add(n, Ordering::Relaxed);
        self.with_ctx(|ctx| {
            let mut done = 0u64;
            while done < n {
                let want = (n - done).min(u32::MAX as u64) as u32;
                let g = self.zones.reserve(
                    &self.layout,
                    stream,
                    want,
                    Who::User,
                    exclusive,
                    role as u32,
                )?;
                let part = &data[done as usize * bs..(done + g.blocks as u64) as usize * bs];
                let (first, first_seq) = (lba + done, seq + done);
                let tag = |i: u32| Tag { logical: first + i as u64, seq: first_seq + i as u64 };
                let placed = match self.write_grant(ctx, &g, part, tag) {
                    Ok(p) => p,
                    Err(e) => return Err(self.fail(e)),
                };
                let now = self.now();
                {
                    let mut j = self.journal.lock();
                    let mut l = lba + done;
                    for (p, k) in placed {
                        for i in 0..k {
                            if let Some(old) = self.map.assign(&mut j, l, p + i) {
                                emptied |= self.map.valid(self.layout.zone_of(old)) == 0;
                            }
                            l += 1;
                        }
                    }
                    batch_ready = j.pending().len() >= self.persist_batch;
                }
                self.zones.info[g.zone as usize].add(now, now, g.blocks);
                Counters::add(&self.stats.data_blocks_written, g.blocks as u64);
                Counters::add(&self.stats.user_blocks_written, g.blocks as u64);
                self.zones.complete(&g);
                done += g.blocks as u64;
            }
            Ok(())
        })?;
        Counters::add(&self.stats.user_writes, 1);
        if emptied {
            self.zones.poke_gc();
        }
        if batch_ready {
            self.persist_batch_now()?;
        }
        Ok(())
    }

    fn do_read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_request(lba, buf.len(), self.layout.block_size, self.layout.logical)?;
        let bs = self.layout.block_size as usize;
        let layout = &self.layout;
        self.with_ctx(|ctx| {
            let mut i = 0u64;
            while i < n {
                let Some(p) = self.map.lookup(lba + i) else {
                    buf[i as usize * bs..(i as usize + 1) * bs].fill(0);
                    i += 1;
                    continue;
                };
                let zone = layout.zone_of(p);
                let _guard = self.reclaim[zone as usize].read();
                if self.map.lookup(lba + i) != Some(p) {
                    continue; // moved meanwhile: translate again
                }
                let off = layout.offset_of(p);
                let mut k = 1u64;
                while i + k < n
                    && k < layout.mdts_blocks as u64
                    && off as u64 + k < layout.cap(zone) as u64
                    && self.map.lookup(lba + i + k) == Some(p + k as u32)
                {
                    k += 1;
                }
                self.read_verified(ctx, lba + i, p, k as u32)?;
                buf[i as usize * bs..(i + k) as usize * bs].copy_from_slice(&ctx.big);
                i += k;
            }
            Ok(())
        })?;
        Counters::add(&self.stats.user_reads, 1);
        Counters::add(&self.stats.user_blocks_read, n);
        Ok(())
    }

    /// Reads `k` blocks from PBA `p` (logical blocks from `logical` on)
    /// into `ctx.big`; with data checksums, with their tags, each checked
    /// against its data and its logical block.
    fn read_verified(&self, ctx: &mut IoCtx, logical: u64, p: u32, k: u32) -> Result<()> {
        let bs = self.layout.block_size as usize;
        let ms = self.tag_size();
        let lba = self.layout.lba(p);
        if !self.tagging.data_crc || ms == 0 {
            ctx.big.set_len(k as usize * bs).map_err(FtlError::device("size a buffer"))?;
            return ctx.q.read(lba, &mut ctx.big).map_err(FtlError::device("read data"));
        }
        tag::read_with_metadata(ctx.q.as_mut(), &mut ctx.big, &mut ctx.tags, lba, k as usize, ms)
            .map_err(FtlError::device("read data"))?;
        let meta = ctx.tags.as_ref().expect("the metadata buffer is back after every read");
        for (j, (m, d)) in meta.chunks_exact(ms).zip(ctx.big.chunks_exact(bs)).enumerate() {
            let l = logical + j as u64;
            if tag::decode(m, &self.tagging, d).is_some_and(|t| t.logical == l) {
                continue;
            }
            let why = match tag::claimed(m) {
                Some(c) if c == l => "fails its checksum",
                Some(_) => "belongs to another logical block",
                None => "carries no tag",
            };
            let at = p + j as u32;
            let (zone, offset) = (self.layout.zone_of(at), self.layout.offset_of(at));
            tracing::error!(logical = l, zone, offset, why, "damaged data block");
            Counters::add(&self.stats.damaged_reads, 1);
            return Err(FtlError::DamagedData { logical: l, zone, offset, why });
        }
        Ok(())
    }

    fn do_discard(&self, lba: u64, blocks: u64) -> Result<()> {
        check_range(lba, blocks, self.layout.logical)?;
        self.check_failed()?;
        let mut l = lba;
        while l < lba + blocks {
            let k = (lba + blocks - l).min(1 << 20);
            let mut j = self.journal.lock();
            self.map.unmap(&mut j, l, k);
            l += k;
        }
        Counters::add(&self.stats.blocks_discarded, blocks);
        self.zones.unstall();
        // The discard may have emptied zones (see `gc::empty_ahead`).
        self.zones.poke_gc();
        self.maybe_persist()
    }

    fn do_flush(&self) -> Result<()> {
        self.check_failed()?;
        self.persist(true)?;
        Counters::add(&self.stats.user_flushes, 1);
        Ok(())
    }

    pub(crate) fn stats(&self) -> FtlStats {
        let c = &self.stats;
        let g = Counters::get;
        let (counts, invalid) = {
            let p = self.zones.lock();
            let written = p.written_blocks(&self.layout);
            let valid: u64 =
                p.full_zones().chain(p.open_zones()).map(|z| self.map.valid(z) as u64).sum();
            (p.counts(), written.saturating_sub(valid))
        };
        let [free, open, full, victim, meta, unusable] = counts;
        let user = g(&c.user_blocks_written);
        let data = g(&c.data_blocks_written);
        let metab = g(&c.meta_blocks_written);
        let ratio = |x: u64| if user == 0 { 0.0 } else { x as f64 / user as f64 };
        let valid: u64 = (0..self.layout.zones).map(|z| self.map.valid(z) as u64).sum();
        let map_bytes = self.map.bytes();
        FtlStats {
            logical_blocks: self.layout.logical,
            block_size: self.layout.block_size,
            user_blocks_written: user,
            user_blocks_read: g(&c.user_blocks_read),
            user_writes: g(&c.user_writes),
            user_reads: g(&c.user_reads),
            user_flushes: g(&c.user_flushes),
            blocks_discarded: g(&c.blocks_discarded),
            data_blocks_written: data,
            gc_blocks_copied: g(&c.gc_blocks_copied),
            gc_blocks_discarded_copies: g(&c.gc_blocks_discarded_copies),
            gc_copy_commands: g(&c.gc_copy_commands),
            gc_victims: g(&c.gc_victims),
            gc_seconds: g(&c.gc_nanos) as f64 / 1e9,
            meta_blocks_written: metab,
            checkpoints: g(&c.checkpoints),
            device_flushes: g(&c.device_flushes),
            zone_resets: g(&c.zone_resets),
            zone_finishes: g(&c.zone_finishes),
            rescanned_zones: g(&c.rescanned_zones),
            rescued_blocks: g(&c.rescued_blocks),
            resumed_zones: g(&c.resumed_zones),
            damaged_reads: g(&c.damaged_reads),
            gc_damaged_blocks: g(&c.gc_damaged_blocks),
            zrwa_commits: g(&c.zrwa_commits),
            zrwa_pad_blocks: g(&c.zrwa_pad_blocks),
            user_waits: self.zones.user_waits(),
            waf: ratio(data),
            waf_total: ratio(data + metab),
            pools: PoolCounts { free, open, full, victim, meta, unusable },
            valid_blocks: valid,
            invalid_blocks: invalid,
            map_bytes,
            map_bytes_per_block: map_bytes as f64 / self.layout.logical as f64,
        }
    }
}

/// Exposed blocks for a device whose data zones (not metadata, usable)
/// have capacities `caps`, at over-provisioning `op` with `slack` zones
/// held out; at least one zone of spare space is always left.
pub(crate) fn exposed_blocks(caps: &[u32], stride: u32, plan: &StreamPlan, op: f64) -> Result<u64> {
    let total: u64 = caps.iter().map(|&c| c as u64).sum();
    let slack = plan.slack();
    if total <= (slack as u64 + 1) * stride as u64 {
        return Err(FtlError::Config(format!(
            "{} data zones cannot hold the {slack} zones the streams and GC reserve need plus \
             one zone of spare space",
            caps.len()
        )));
    }
    // What garbage collection cannot use as spare: the reserve zones,
    // empty, and the heads' unwritten space, half a zone each on average
    // (a head is anywhere from empty to full). Sizing on that makes the
    // spare GC works with the one asked for, not more.
    let heads: u64 = plan.max_heads.iter().map(|&h| h as u64).sum();
    let held = plan.reserve as u64 * stride as u64 + heads * stride as u64 / 2;
    let usable = total - held;
    // Never more than every head and reserve zone full plus a zone of
    // spare: garbage collection always finds a victim.
    let bound = total - (slack as u64 + 1) * stride as u64;
    let logical = ((usable as f64 / (1.0 + op)).floor() as u64).min(bound);
    if logical >= u32::MAX as u64 {
        return Err(FtlError::Config(format!("{logical} logical blocks (at most 2^32 - 2)")));
    }
    Ok(logical)
}

/// The geometry a format lays out, computed from a zone report before
/// anything is written (and again after the reset, to confirm it).
struct FormatPlan {
    zones: u32,
    caps: Box<[u32]>,
    stride: u32,
    meta_zones: u32,
    logical: u64,
}

impl FormatPlan {
    /// The plan for `report`, where `ready` says which zones will be
    /// Empty; every configuration error is found here.
    fn new(
        dev: &dyn ZonedDevice,
        config: &FtlConfig,
        report: &[zns_device::Zone],
        ready: impl Fn(&zns_device::Zone) -> bool,
    ) -> Result<FormatPlan> {
        let info = dev.info();
        let zones = u32::try_from(report.len())
            .map_err(|_| FtlError::Config(format!("{} zones", report.len())))?;
        let caps: Box<[u32]> = report.iter().map(|z| z.capacity as u32).collect();
        let stride = caps.iter().copied().max().unwrap_or(0);
        if stride < 2 || zones < 4 {
            return Err(FtlError::Config(format!("{zones} zones of {stride} blocks: too small")));
        }
        if info.block_size < 512 {
            return Err(FtlError::Config(format!("block size {} (at least 512)", info.block_size)));
        }
        if (zones as u64) * stride as u64 >= u32::MAX as u64 {
            return Err(FtlError::Config(format!(
                "{zones} zones of {stride} blocks exceed 2^32 device blocks"
            )));
        }
        let budget = open_budget(dev).saturating_sub(1);
        let plan = StreamPlan::new(config, budget)?;
        let usable = |z: &zns_device::Zone| ready(z) && z.capacity > 0;
        // Metadata zones come first; size them for the capacity they will
        // checkpoint (the exposed capacity with no metadata zones bounds it).
        let all_caps: Vec<u32> =
            report.iter().filter(|z| usable(z)).map(|z| z.capacity as u32).collect();
        let upper = exposed_blocks(&all_caps, stride, &plan, config.op)?;
        let needed = meta_zone_plan(upper, info.block_size as usize, caps[0], 2).0;
        let meta_zones = config.meta_zones.unwrap_or(needed);
        if meta_zones < needed {
            return Err(FtlError::Config(format!(
                "{meta_zones} metadata zones; checkpoints of this capacity need {needed}"
            )));
        }
        if meta_zones as usize >= report.len()
            || report[..meta_zones as usize].iter().any(|z| !usable(z))
        {
            return Err(FtlError::Config(format!(
                "the first {meta_zones} zones must be usable for metadata"
            )));
        }
        let data_caps: Vec<u32> = report[meta_zones as usize..]
            .iter()
            .filter(|z| usable(z))
            .map(|z| z.capacity as u32)
            .collect();
        let logical = exposed_blocks(&data_caps, stride, &plan, config.op)?;
        Ok(FormatPlan { zones, caps, stride, meta_zones, logical })
    }
}

impl Ftl {
    /// Formats `dev` (every zone is reset: all data is lost) and starts an
    /// FTL on it. The configuration is checked against the device before
    /// anything is written: an invalid one changes nothing.
    pub fn format(dev: Arc<dyn ZonedDevice>, config: FtlConfig) -> Result<Ftl> {
        config.validate()?;
        let info = dev.info().clone();
        info.require_zoned().map_err(FtlError::device("open the device"))?;
        let mut q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
        let before = q
            .report_zones(0, ReportFilter::All, info.zone_count as usize)
            .map_err(FtlError::device("report zones"))?;
        // Every zone a reset makes Empty is usable: plan on that first.
        let resettable =
            |z: &zns_device::Zone| !matches!(z.state, ZoneState::ReadOnly | ZoneState::Offline);
        let planned = FormatPlan::new(dev.as_ref(), &config, &before, resettable)?;
        q.zone_action(ZoneAction::Reset, Target::All)
            .map_err(FtlError::device("reset all zones"))?;
        let report = q
            .report_zones(0, ReportFilter::All, info.zone_count as usize)
            .map_err(FtlError::device("report zones"))?;
        let empty = |z: &zns_device::Zone| z.state == ZoneState::Empty;
        let plan = FormatPlan::new(dev.as_ref(), &config, &report, empty)?;
        if plan.logical != planned.logical || plan.meta_zones != planned.meta_zones {
            return Err(FtlError::Config(format!(
                "the zones changed when reset ({} logical blocks planned, {} after the reset)",
                planned.logical, plan.logical
            )));
        }
        let FormatPlan { zones, caps, stride, meta_zones, logical } = plan;
        let usable = |z: &zns_device::Zone| z.state == ZoneState::Empty && z.capacity > 0;
        let layout = Layout {
            block_size: info.block_size,
            zone_size: info.zone_size,
            zones,
            caps,
            stride,
            meta_zones,
            mdts_blocks: info.max_transfer_blocks().min(u32::MAX as u64) as u32,
            zasl_blocks: ((info.zasl_bytes / info.block_size as usize) as u32).max(1),
            logical,
        };
        let sb = Superblock {
            instance: instance_id(),
            logical,
            block_size: info.block_size,
            zone_size: info.zone_size,
            zones,
            meta_zones,
            stride,
            op_ppm: (config.op * 1e6) as u32,
            features: crate::journal::FEATURE_DATA_CRC | crate::journal::FEATURE_BACKUP_HEADER,
        };
        let pools: Vec<Pool> = report
            .iter()
            .enumerate()
            .map(|(i, z)| match i < meta_zones as usize {
                true => Pool::Meta,
                false if usable(z) => Pool::Free,
                false => Pool::Unusable,
            })
            .collect();
        let meta_q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
        let zrwa = LogZrwa::choose(&info, &config, &layout);
        let meta = MetaWriter::new(
            meta_q,
            &layout,
            sb,
            vec![None; meta_zones as usize],
            None,
            1,
            1,
            0,
            zrwa,
        )?;
        let map = Map::new(&layout);
        let parts = Parts {
            layout,
            map,
            meta,
            pools,
            resume: Vec::new(),
            clock: 0,
            generation: 1,
            damage: Vec::new(),
        };
        let shared = Shared::new(dev, config, parts)?;
        {
            let mut m = shared.meta.lock();
            m.checkpoint(&shared.meta_ctx())?;
        }
        tracing::info!(logical, meta_zones, zones, stride, "FTL formatted");
        Ok(Ftl::start(shared))
    }

    /// Opens the FTL on `dev` and recovers its state from the metadata log,
    /// after a clean shutdown or a power cut: every write acknowledged
    /// before the last completed flush is there. Geometry comes from the
    /// device; the rest of `config` applies from now on.
    pub fn open(dev: Arc<dyn ZonedDevice>, config: FtlConfig) -> Result<Ftl> {
        config.validate()?;
        let (shared, _) = crate::recovery::recover(dev, config, Mode::Mount)?;
        Ok(Ftl::start(shared))
    }

    /// Opens the FTL on `dev` like [`Ftl::open`], but where the metadata
    /// log is damaged, rebuilds the map from every intact source instead
    /// of failing: any complete checkpoint, the log pages on both sides of
    /// a damaged one, and the blocks' tags (blocks written after the log,
    /// and where damaged pages' map changes are unknown, every version
    /// newer than what the kept log maps); mappings whose block's tag
    /// names another logical block are dropped. A checkpoint in a fresh
    /// metadata zone makes the repaired state the FTL's. Returns what was
    /// found (`None`: the FTL was intact).
    ///
    /// A repair that cannot account for every block
    /// ([`RepairReport::loses`]) writes nothing and fails with
    /// [`FtlError::RepairLoses`] unless `accept_loss`. Explicit only:
    /// nothing repairs on [`Ftl::open`].
    pub fn repair_with(
        dev: Arc<dyn ZonedDevice>,
        config: FtlConfig,
        accept_loss: bool,
    ) -> Result<(Ftl, Option<RepairReport>)> {
        config.validate()?;
        let mode = Mode::Repair { accept_loss };
        let (shared, report) = crate::recovery::recover(dev, config, mode)?;
        let ftl = Ftl::start(shared);
        {
            let s = &ftl.shared;
            let mut m = s.meta.lock();
            m.checkpoint(&s.meta_ctx())?;
        }
        Ok((ftl, report))
    }

    /// [`Ftl::repair_with`] without accepting a loss: a repair that cannot
    /// account for every block changes nothing and fails with
    /// [`FtlError::RepairLoses`].
    pub fn repair(
        dev: Arc<dyn ZonedDevice>,
        config: FtlConfig,
    ) -> Result<(Ftl, Option<RepairReport>)> {
        Ftl::repair_with(dev, config, false)
    }

    /// What [`Ftl::repair_with`] would find and restore on `dev`, writing
    /// nothing (`None`: the FTL is intact). The report's
    /// [`RepairReport::loses`] tells a repair that restores everything
    /// from one that loses blocks.
    pub fn diagnose(dev: &dyn ZonedDevice, config: &FtlConfig) -> Result<Option<RepairReport>> {
        config.validate()?;
        let a = crate::recovery::analyze(dev, config, Mode::Diagnose)?;
        Ok((!a.repair.is_clean()).then_some(a.repair))
    }

    /// Opens the FTL on `dev`, or formats the device when it holds nothing
    /// at all (every zone Empty). A device with written zones but no
    /// readable FTL (damaged metadata, or other data) is never formatted
    /// here: that is [`FtlError::NotEmpty`].
    pub fn open_or_format(dev: Arc<dyn ZonedDevice>, config: FtlConfig) -> Result<Ftl> {
        match Ftl::open(Arc::clone(&dev), config.clone()) {
            Err(FtlError::NotFormatted) => match Ftl::written_zones(dev.as_ref())? {
                0 => Ftl::format(dev, config),
                written_zones => Err(FtlError::NotEmpty { written_zones }),
            },
            r => r,
        }
    }

    /// Zones of `dev` that hold data (any state but Empty, Read Only and
    /// Offline): what a format would destroy.
    pub fn written_zones(dev: &dyn ZonedDevice) -> Result<u64> {
        let info = dev.info();
        let mut q = dev.queue(2).map_err(FtlError::device("create a queue"))?;
        let report = q
            .report_zones(0, ReportFilter::All, info.zone_count as usize)
            .map_err(FtlError::device("report zones"))?;
        Ok(report
            .iter()
            .filter(|z| {
                !matches!(z.state, ZoneState::Empty | ZoneState::ReadOnly | ZoneState::Offline)
            })
            .count() as u64)
    }

    fn start(shared: Shared) -> Ftl {
        let shared = Arc::new(shared);
        let s = Arc::clone(&shared);
        let gc = std::thread::Builder::new()
            .name("zns-ftl-gc".into())
            .spawn(move || crate::gc::run(s))
            .map_err(|e| shared.fail(FtlError::Failed(format!("cannot start the GC thread: {e}"))))
            .ok();
        Ftl { shared, gc }
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> FtlStats {
        self.shared.stats()
    }

    /// Bytes of RAM the map takes per exposed block (L2P, P2L, valid
    /// counts and the update history over the logical capacity).
    pub fn map_bytes_per_block(&self) -> f64 {
        self.shared.map.bytes() as f64 / self.shared.layout.logical as f64
    }

    /// The configuration in effect.
    pub fn config(&self) -> &FtlConfig {
        &self.shared.config
    }

    /// Metadata zones (the first zones of the device).
    pub fn meta_zones(&self) -> u32 {
        self.shared.layout.meta_zones
    }

    /// Zones the FTL may keep open at once (its metadata log's included),
    /// and how many it keeps open at most.
    pub fn open_zone_limits(&self) -> (u32, u32) {
        (open_budget(self.shared.dev.as_ref()), self.shared.plan.max_heads.iter().sum::<u32>() + 1)
    }

    /// Writes a checkpoint now (recovery then replays less log).
    pub fn checkpoint(&self) -> Result<()> {
        let mut m = self.shared.meta.lock();
        self.shared.check_failed()?;
        m.persist(&self.shared.meta_ctx(), false).map_err(|e| self.shared.fail(e))?;
        m.checkpoint(&self.shared.meta_ctx()).map_err(|e| self.shared.fail(e))
    }

    /// Blocks until garbage collection has no more to do for now (free
    /// zones at the high watermark, or nothing reclaimable).
    pub fn wait_for_gc(&self) -> Result<()> {
        loop {
            {
                let p = self.shared.zones.lock();
                if let Some(f) = p.failed() {
                    return Err(FtlError::Failed(f.to_string()));
                }
                // Nothing reclaimable: no full zone holds an invalid block.
                let reclaimable =
                    p.full_zones().any(|z| self.shared.map.valid(z) < self.shared.layout.cap(z));
                if p.gc_satisfied() || !reclaimable {
                    return Ok(());
                }
            }
            self.shared.zones.gc_notify();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Stops garbage collection, writes a checkpoint and flushes: the next
    /// [`Ftl::open`] replays almost nothing.
    pub fn close(mut self) -> Result<()> {
        self.stop_gc();
        self.checkpoint()
    }

    fn stop_gc(&mut self) {
        self.shared.zones.shutdown();
        if let Some(h) = self.gc.take() {
            if h.join().is_err() {
                tracing::error!("the GC thread panicked");
            }
        }
    }
}

impl Drop for Ftl {
    fn drop(&mut self) {
        self.stop_gc();
        if self.shared.check_failed().is_ok() {
            if let Err(e) = self.shared.persist(true) {
                tracing::warn!(error = %e, "final flush of the FTL failed");
            }
        }
    }
}

/// The block device the FTL offers (also as [`BlockDevice`], whose calls
/// these are with the FTL's own errors).
impl Ftl {
    /// Bytes in one block.
    pub fn block_size(&self) -> u32 {
        self.shared.layout.block_size
    }

    /// Number of logical blocks.
    pub fn capacity_blocks(&self) -> u64 {
        self.shared.layout.logical
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks() * self.block_size() as u64
    }

    /// Reads `buf.len()` bytes (whole blocks) from block `lba`.
    pub fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        self.shared.do_read(lba, buf)
    }

    /// Writes `buf` (whole blocks) at block `lba`; durable once a later
    /// [`Ftl::flush`] returns.
    pub fn write(&self, lba: u64, buf: &[u8]) -> Result<()> {
        self.shared.do_write(lba, buf)
    }

    /// Makes every write acknowledged before this call durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.do_flush()
    }

    /// Discards `blocks` blocks from `lba`: they read as zeros.
    pub fn discard(&self, lba: u64, blocks: u64) -> Result<()> {
        self.shared.do_discard(lba, blocks)
    }

    /// The zoned device the FTL keeps its blocks on (for what its
    /// controller counts: the media writes of its log pages).
    pub fn device(&self) -> &Arc<dyn ZonedDevice> {
        &self.shared.dev
    }
}

/// A format identity from the clock and the process.
fn instance_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = t ^ ((std::process::id() as u64) << 32) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^ (x >> 33)
}
