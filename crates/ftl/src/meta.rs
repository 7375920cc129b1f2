//! The metadata log writer.
//!
//! Zones `0..meta_zones` hold one log of checksummed pages (see
//! [`crate::journal`]): each zone starts with a header page (the
//! superblock), then log pages of mapping records, checkpoints and their
//! end markers. A checkpoint is a Begin record, the L2P map in chunk
//! pages, and an End page; recovery loads the newest complete checkpoint
//! and replays the records logged after its Begin record.
//!
//! Ordering rules, which together make every durable record point at
//! durable data of its own logical block:
//! - data before log: records are taken from the journal, then the device
//!   is flushed (the data they name completed before), then they are
//!   written;
//! - checkpoint chunks are followed by a flush before the End page, so
//!   every block a durable checkpoint names is durable;
//! - a new checkpoint's End is durable before older metadata zones are
//!   reset;
//! - a data zone is reset only after the records moving its valid blocks
//!   away are durable (see [`crate::gc`]);
//! - every page carries the write watermark read after its contents were
//!   taken (under the journal lock, so every map change the page shows is
//!   numbered below it);
//! - a mount writes a page of its generation before any data
//!   ([`MetaWriter::seal_mount`]), so write sequence numbers never repeat.
//!
//! With [`crate::ZrwaUse`] `Auto` or `On` on a device whose ZRWAs suit it
//! ([`LogZrwa`]), pages go into the ZRWA of the log's zone. Window blocks
//! survive no power cut, so "durable" means committed: where the log must
//! be durable it commits through its last page, rounded up to the flush
//! granularity (the rest of the unit filled with empty pages), and a zone
//! the log leaves is committed whole first. Commits are in
//! log order, so a durable page never follows a lost one. Pages that fit
//! the window without moving its write pointer are written while the
//! device flush before them runs: they cannot become durable before the
//! commit that follows the flush.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use zns_device::{DeviceInfo, IoBuffer, StatusCode, Target, ZoneAction, ZoneOp, ZoneQueue};

use crate::config::{FtlConfig, ZrwaUse};
use crate::error::{FtlError, Result};
use crate::journal::{
    entries_per_chunk, records_per_page, Body, Journal, Page, Record, Superblock,
};
use crate::layout::Layout;
use crate::map::Map;
use crate::stats::Counters;

/// Checkpoint pages for `logical` blocks, at most (chunks + Begin + End).
pub(crate) fn checkpoint_pages(logical: u64, block_size: usize) -> u64 {
    logical.div_ceil(entries_per_chunk(block_size) as u64) + 2
}

/// Metadata zones a layout needs, and the free-zone count at which a
/// checkpoint starts.
///
/// With `t` zones for a whole checkpoint: a checkpoint starts when `t + 2`
/// zones are free (one persist fills at most one more zone before the
/// check), so even a checkpoint cut short by a power failure leaves a zone
/// for the next mount; after a checkpoint two zones stay live (the one
/// holding its Begin record and the current one), which leaves one zone of
/// log between checkpoints.
pub(crate) fn meta_zone_plan(
    logical: u64,
    block_size: usize,
    cap: u32,
    header_pages: u32,
) -> (u32, u32) {
    let room = (cap as u64).saturating_sub(header_pages as u64).max(1);
    let t = checkpoint_pages(logical, block_size).div_ceil(room) as u32;
    (t + 5, t + 2)
}

/// `records` in log pages of `block_size` bytes.
fn log_pages(records: &[Record], block_size: usize) -> Vec<Body> {
    records.chunks(records_per_page(block_size)).map(|c| Body::Log(c.to_vec())).collect()
}

/// The zone random write area geometry the log writes with.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogZrwa {
    /// ZRWASZ: blocks in the window.
    pub size: u32,
    /// ZRWAFG: the commit unit in blocks.
    pub granularity: u32,
}

impl LogZrwa {
    /// What the log uses on a device with `info` under `config`: `None`
    /// unless ZRWAs are asked for and the device has them with explicit
    /// commit, a window of whole units, and metadata zones of whole units
    /// (so a commit can always reach the end of a zone); with
    /// [`ZrwaUse::Auto`], only units of one block (no padding).
    pub fn choose(info: &DeviceInfo, config: &FtlConfig, layout: &Layout) -> Option<LogZrwa> {
        if config.zrwa == ZrwaUse::Off {
            return None;
        }
        let w = info.capabilities.zrwa?;
        let (size, fg) = (u32::try_from(w.size).ok()?, u32::try_from(w.flush_granularity).ok()?);
        let fits = w.explicit_flush
            && w.resources >= 1
            && fg >= 1
            && size >= fg
            && size.is_multiple_of(fg)
            && (0..layout.meta_zones).all(|z| layout.cap(z).is_multiple_of(fg));
        if !fits {
            tracing::info!(?w, "the device's ZRWAs do not suit the metadata log: plain writes");
            return None;
        }
        if config.zrwa == ZrwaUse::Auto && fg > 1 {
            tracing::info!(?w, "ZRWA commits would pad the metadata log: plain writes");
            return None;
        }
        Some(LogZrwa { size, granularity: fg })
    }
}

/// The metadata zone whose ZRWA the log writes into.
#[derive(Debug, Clone, Copy)]
struct Window {
    zone: u32,
    /// The zone's write pointer (offset of the first uncommitted block),
    /// as the device moves it.
    wp: u32,
}

/// Writes the metadata log.
///
/// Thread safety: `Send`; the FTL keeps it behind a mutex, which orders
/// log pages exactly as their records were taken from the journal.
pub(crate) struct MetaWriter {
    q: Box<dyn ZoneQueue>,
    buf: IoBuffer,
    pub sb: Superblock,
    /// First page sequence number of every live metadata zone; `None` =
    /// empty.
    pub first_seq: Vec<Option<u64>>,
    /// Zone being written and the next block in it.
    pub current: Option<(u32, u32)>,
    pub next_seq: u64,
    pub generation: u32,
    /// Last checkpoint id started.
    pub ckpt: u64,
    /// Checkpoint when free metadata zones fall to this.
    pub trigger: u32,
    /// Write log pages into ZRWAs with this geometry.
    zrwa: Option<LogZrwa>,
    /// The zone holding the log's ZRWA, while it holds one.
    window: Option<Window>,
    /// A zone the log writes plainly because it got no ZRWA.
    plain: Option<u32>,
    /// Pages were written outside a ZRWA since the last device flush.
    unflushed: bool,
    /// The write watermark of the last page written (padding pages carry
    /// it).
    last_watermark: u64,
    /// With ZRWAs: the buffer a window write goes out in while the device
    /// flush before it runs (see [`MetaWriter::flush_beside_window_write`]).
    side: Option<IoBuffer>,
}

impl std::fmt::Debug for MetaWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaWriter")
            .field("current", &self.current)
            .field("next_seq", &self.next_seq)
            .field("generation", &self.generation)
            .field("ckpt", &self.ckpt)
            .finish_non_exhaustive()
    }
}

/// What a metadata write needs from the rest of the FTL.
pub(crate) struct MetaCtx<'a> {
    pub layout: &'a Layout,
    pub map: &'a Map,
    pub journal: &'a Mutex<Journal>,
    pub stats: &'a Counters,
    /// The next data-block write sequence number.
    pub write_seq: &'a AtomicU64,
}

impl MetaCtx<'_> {
    /// The write watermark now. Read under the journal lock: a map change
    /// seen before is then ordered before the read, so its write was
    /// numbered below the value.
    fn watermark(&self) -> u64 {
        let _j = self.journal.lock();
        self.write_seq.load(Ordering::Relaxed)
    }

    /// Takes every record waiting, with the watermark of that moment.
    fn take_records(&self) -> (Vec<Record>, u64) {
        let mut j = self.journal.lock();
        (j.take(), self.write_seq.load(Ordering::Relaxed))
    }
}

impl MetaWriter {
    /// A writer continuing a log: `first_seq` says which metadata zones are
    /// live, `current` where to write next.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        q: Box<dyn ZoneQueue>,
        layout: &Layout,
        sb: Superblock,
        first_seq: Vec<Option<u64>>,
        current: Option<(u32, u32)>,
        next_seq: u64,
        generation: u32,
        ckpt: u64,
        zrwa: Option<LogZrwa>,
    ) -> Result<Self> {
        let buf = q
            .alloc(layout.mdts_blocks as usize * layout.block_size as usize)
            .map_err(FtlError::device("allocate a metadata buffer"))?;
        let (_, trigger) = meta_zone_plan(
            sb.logical,
            layout.block_size as usize,
            layout.cap(0),
            sb.header_pages(),
        );
        let side = match zrwa {
            Some(_) => Some(
                q.alloc(layout.mdts_blocks as usize * layout.block_size as usize)
                    .map_err(FtlError::device("allocate a metadata buffer"))?,
            ),
            None => None,
        };
        Ok(MetaWriter {
            q,
            buf,
            sb,
            first_seq,
            current,
            next_seq,
            generation,
            ckpt,
            trigger,
            zrwa,
            window: None,
            plain: None,
            unflushed: false,
            last_watermark: 0,
            side,
        })
    }

    /// Free metadata zones.
    pub fn free_zones(&self) -> u32 {
        self.first_seq.iter().filter(|s| s.is_none()).count() as u32
    }

    fn device_flush(&mut self, stats: &Counters) -> Result<()> {
        self.q.flush().map_err(FtlError::device("flush"))?;
        Counters::add(&stats.device_flushes, 1);
        self.unflushed = false;
        Ok(())
    }

    /// Makes every page written so far durable: a device flush when pages
    /// were written outside a ZRWA since the last one, then a commit of
    /// the log's ZRWA (window blocks survive no power cut, not even after
    /// a flush; committed ones are durable at once). Data needs nothing
    /// here: every persist flushed the device before writing its pages.
    ///
    /// No page written since the last device flush (`unflushed` clear; a
    /// window page is made durable by its commit, not by a flush): every
    /// page is durable already, and so is the data the log names, so the
    /// flush is skipped. A client flushing each of several connections in
    /// turn (CAN_MULTI_CONN) then pays one device flush, not one each.
    fn make_durable(&mut self, ctx: &MetaCtx<'_>) -> Result<()> {
        if self.unflushed {
            self.device_flush(ctx.stats)?;
        }
        self.commit_window(ctx)
    }

    /// Commits the log's ZRWA through its last page, rounded up to the
    /// flush granularity: the rest of the unit after the last page is
    /// filled with empty log pages first (a commit takes whole units, and
    /// real pages keep every block below the write pointer a page, so a
    /// blank block stays damage), and the log goes on after them.
    fn commit_window(&mut self, ctx: &MetaCtx<'_>) -> Result<()> {
        let (Some(z), Some(w)) = (self.zrwa, self.window) else { return Ok(()) };
        let end = match self.current {
            Some((c, o)) if c == w.zone => o,
            _ => return Ok(()),
        };
        if end <= w.wp {
            return Ok(());
        }
        let to = end.next_multiple_of(z.granularity).min(ctx.layout.cap(w.zone));
        self.write_padding(ctx, w.zone, end, to)?;
        let last = ctx.layout.zone_start(w.zone) + to as u64 - 1;
        self.q.commit_zrwa(last).map_err(FtlError::device("commit the metadata log's ZRWA"))?;
        Counters::add(&ctx.stats.zrwa_commits, 1);
        Counters::add(&ctx.stats.zrwa_pad_blocks, (to - end) as u64);
        self.current = Some((w.zone, to));
        self.window = (to < ctx.layout.cap(w.zone)).then_some(Window { zone: w.zone, wp: to });
        Ok(())
    }

    /// Writes empty log pages into blocks `from..to` of `zone` (inside the
    /// window: `to` is at most one window past the write pointer, so
    /// nothing is committed implicitly), with the watermark of the last
    /// page written: they describe nothing.
    fn write_padding(&mut self, ctx: &MetaCtx<'_>, zone: u32, from: u32, to: u32) -> Result<()> {
        let bs = ctx.layout.block_size as usize;
        let mut at = from;
        while at < to {
            let n = (to - at).min(ctx.layout.mdts_blocks) as usize;
            for i in 0..n {
                let page = Page {
                    seq: self.next_seq,
                    generation: self.generation,
                    watermark: self.last_watermark,
                    body: Body::Log(Vec::new()),
                };
                page.encode(&mut self.buf[i * bs..(i + 1) * bs]);
                self.next_seq += 1;
            }
            self.buf.set_len(n * bs).map_err(FtlError::device("size a metadata buffer"))?;
            let r = self.q.write(ctx.layout.zone_start(zone) + at as u64, &self.buf);
            let full = ctx.layout.mdts_blocks as usize * bs;
            self.buf.set_len(full).map_err(FtlError::device("size a metadata buffer"))?;
            r.map_err(FtlError::device("write metadata"))?;
            Counters::add(&ctx.stats.meta_blocks_written, n as u64);
            at += n as u32;
        }
        Ok(())
    }

    /// Before writing at `offset` of `zone`: leaves the ZRWA of another
    /// zone (committed whole: that zone is full) and opens one in `zone`
    /// when the log uses ZRWAs. A device out of ZRWA resources, or a zone
    /// whose write pointer is not on a unit boundary (written without a
    /// ZRWA before), is written plainly. Returns the blocks a write at
    /// `offset` may take at most.
    fn enter_zone(&mut self, ctx: &MetaCtx<'_>, zone: u32, offset: u32) -> Result<u32> {
        let Some(z) = self.zrwa else { return Ok(u32::MAX) };
        if self.plain == Some(zone) {
            return Ok(u32::MAX);
        }
        if self.window.is_some_and(|w| w.zone != zone) {
            self.commit_window(ctx)?;
            self.window = None;
        }
        if self.window.is_none() {
            match self.q.open_zrwa(ctx.layout.zone_start(zone)) {
                Ok(()) => self.window = Some(Window { zone, wp: offset }),
                Err(e) if e.is_status(StatusCode::ZrwaResourcesUnavailable) => {
                    tracing::warn!(zone, offset, "no ZRWA for the metadata zone: plain writes");
                    self.plain = Some(zone);
                    return Ok(u32::MAX);
                }
                Err(e) => return Err(FtlError::device("open a metadata zone with a ZRWA")(e)),
            }
        }
        let w = self.window.expect("set above");
        // Writes may end up to two windows past the write pointer.
        Ok((w.wp + 2 * z.size).saturating_sub(offset))
    }

    /// Whether `pages` pages fit the window at the log's end without
    /// moving its write pointer: then nothing of them can be committed
    /// before the log commits, and they may be written while the device
    /// flush that must precede them (data before log) still runs.
    fn fits_window(&self, layout: &Layout, pages: usize) -> bool {
        let (Some(z), Some(w), Some((c, o))) = (self.zrwa, self.window, self.current) else {
            return false;
        };
        let end = o as u64 + pages as u64;
        c == w.zone
            && o > 0
            && self.side.is_some()
            && pages as u64 <= layout.mdts_blocks as u64
            && end <= (w.wp + z.size) as u64
            && end <= layout.cap(c) as u64
    }

    /// Device flush and the write of `bodies` into the window together
    /// (both submitted, then both waited for). Safe because window blocks
    /// are never durable: the pages become durable only when committed,
    /// after this returns, so after the flush. Call only when
    /// [`MetaWriter::fits_window`].
    fn flush_beside_window_write(
        &mut self,
        ctx: &MetaCtx<'_>,
        watermark: u64,
        bodies: Vec<Body>,
    ) -> Result<()> {
        let bs = ctx.layout.block_size as usize;
        let (zone, offset) = self.current.expect("fits_window checked the log's end");
        let mut buf = self.side.take().expect("fits_window checked the buffer");
        self.last_watermark = watermark;
        let n = bodies.len();
        for (i, body) in bodies.into_iter().enumerate() {
            let page = Page { seq: self.next_seq, generation: self.generation, watermark, body };
            page.encode(&mut buf[i * bs..(i + 1) * bs]);
            self.next_seq += 1;
        }
        let lba = ctx.layout.zone_start(zone) + offset as u64;
        let r = self.submit_pair(buf, n * bs, lba);
        // Whatever happened, every command submitted is waited for.
        let mut error = r.err();
        let side = &mut self.side;
        while self.q.outstanding() > 0 {
            self.q.poll(usize::MAX, &mut |c| {
                if let Some(b) = c.buffer {
                    *side = Some(b);
                }
                if let Err(e) = c.result {
                    error.get_or_insert(FtlError::device("flush or write metadata")(e));
                }
            });
        }
        if let Some(b) = self.side.as_mut() {
            b.set_len(ctx.layout.mdts_blocks as usize * bs)
                .map_err(FtlError::device("size a metadata buffer"))?;
        }
        if let Some(e) = error {
            return Err(e);
        }
        Counters::add(&ctx.stats.device_flushes, 1);
        Counters::add(&ctx.stats.meta_blocks_written, n as u64);
        self.unflushed = false;
        self.current = Some((zone, offset + n as u32));
        Ok(())
    }

    /// Submits a device flush and the write of the first `len` bytes of
    /// `buf` at `lba`; the buffer comes back in the write's completion (or
    /// at once into [`MetaWriter::side`] when refused).
    fn submit_pair(&mut self, mut buf: IoBuffer, len: usize, lba: u64) -> Result<()> {
        if let Err(e) = buf.set_len(len) {
            self.side = Some(buf);
            return Err(FtlError::device("size a metadata buffer")(e));
        }
        if let Err(r) = self.q.submit(ZoneOp::Flush, None, 0) {
            self.side = Some(buf);
            return Err(FtlError::device("flush")(r.error));
        }
        let w = self.q.submit(ZoneOp::Write { lba, fua: false, placement: None }, Some(buf), 1);
        self.q.ring();
        w.map_err(|r| {
            self.side = r.buffer;
            FtlError::device("write metadata")(r.error)
        })
    }

    /// After a write of blocks up to `end` in the ZRWA zone: the write
    /// pointer moves as the device moves it (implicit commit of the whole
    /// units that bring `end` back into the window).
    fn after_window_write(&mut self, layout: &Layout, end: u32) {
        let (Some(z), Some(w)) = (self.zrwa, self.window.as_mut()) else { return };
        if end > w.wp + z.size {
            let units = (end - w.wp - z.size).div_ceil(z.granularity);
            w.wp = (w.wp + units * z.granularity).min(layout.cap(w.zone));
        }
        if w.wp >= layout.cap(w.zone) {
            self.window = None;
        }
    }

    /// Writes pages with `bodies` at the end of the log, each with write
    /// watermark `watermark`; returns the zone each landed in.
    fn write_pages(
        &mut self,
        ctx: &MetaCtx<'_>,
        watermark: u64,
        bodies: impl IntoIterator<Item = Body>,
    ) -> Result<Vec<u32>> {
        let layout = ctx.layout;
        let bs = layout.block_size as usize;
        self.last_watermark = watermark;
        let mut zones = Vec::new();
        let mut it = bodies.into_iter().peekable();
        while it.peek().is_some() {
            let (zone, offset) = match self.current {
                Some((z, o)) if o < layout.cap(z) => (z, o),
                _ => {
                    let Some(z) =
                        (0..layout.meta_zones).find(|&z| self.first_seq[z as usize].is_none())
                    else {
                        return Err(FtlError::Failed(
                            "the metadata zones are exhausted (no checkpoint could free one)"
                                .into(),
                        ));
                    };
                    (z, 0)
                }
            };
            let window_room = self.enter_zone(ctx, zone, offset)?;
            let room =
                (layout.cap(zone) - offset).min(layout.mdts_blocks).min(window_room) as usize;
            let mut n = 0usize;
            if offset == 0 {
                self.first_seq[zone as usize] = Some(self.next_seq);
            }
            // The zone's header pages first: the superblock and, where
            // the format keeps one, its copy (also when a zone was left
            // with the first only, by a power cut between the two).
            while n < room && offset + (n as u32) < self.sb.header_pages() {
                let page = Page {
                    seq: self.next_seq,
                    generation: self.generation,
                    watermark,
                    body: Body::Header(self.sb),
                };
                page.encode(&mut self.buf[n * bs..(n + 1) * bs]);
                self.next_seq += 1;
                n += 1;
            }
            while n < room {
                let Some(body) = it.next() else { break };
                let page =
                    Page { seq: self.next_seq, generation: self.generation, watermark, body };
                page.encode(&mut self.buf[n * bs..(n + 1) * bs]);
                self.next_seq += 1;
                zones.push(zone);
                n += 1;
            }
            self.buf.set_len(n * bs).map_err(FtlError::device("size a metadata buffer"))?;
            let r = self.q.write(layout.zone_start(zone) + offset as u64, &self.buf);
            let full = layout.mdts_blocks as usize * bs;
            self.buf.set_len(full).map_err(FtlError::device("size a metadata buffer"))?;
            r.map_err(FtlError::device("write metadata"))?;
            Counters::add(&ctx.stats.meta_blocks_written, n as u64);
            self.current = Some((zone, offset + n as u32));
            if self.window.is_some_and(|w| w.zone == zone) {
                self.after_window_write(layout, offset + n as u32);
            } else {
                self.unflushed = true;
            }
        }
        Ok(zones)
    }

    /// Writes every record waiting in the journal (after a device flush,
    /// so the data they name is durable first); with `sync`, flushes again
    /// so the records are durable too. Checkpoints when metadata zones run
    /// low.
    pub fn persist(&mut self, ctx: &MetaCtx<'_>, sync: bool) -> Result<()> {
        self.write_log(ctx, sync, false)
    }

    /// Starts a mount's log: writes every record waiting in at least one
    /// page (of this mount's generation), durably. Until a page of the
    /// generation is durable, another mount could take the same generation
    /// and number its writes like this one's.
    pub fn seal_mount(&mut self, ctx: &MetaCtx<'_>) -> Result<()> {
        self.write_log(ctx, true, true)
    }

    /// [`MetaWriter::persist`], writing one (empty) log page even without
    /// records when `page` is set.
    fn write_log(&mut self, ctx: &MetaCtx<'_>, sync: bool, page: bool) -> Result<()> {
        let (records, mark) = ctx.take_records();
        let any = !records.is_empty() || page;
        if any {
            let mut pages = log_pages(&records, ctx.layout.block_size as usize);
            if pages.is_empty() {
                pages.push(Body::Log(Vec::new()));
            }
            if self.fits_window(ctx.layout, pages.len()) {
                self.flush_beside_window_write(ctx, mark, pages)?;
            } else {
                self.device_flush(ctx.stats)?;
                self.write_pages(ctx, mark, pages)?;
            }
        }
        if sync {
            self.make_durable(ctx)?;
        }
        if any && self.free_zones() <= self.trigger {
            self.checkpoint(ctx)?;
        }
        Ok(())
    }

    /// Writes a checkpoint of the whole map, then resets the metadata zones
    /// it makes unnecessary.
    pub fn checkpoint(&mut self, ctx: &MetaCtx<'_>) -> Result<()> {
        let layout = ctx.layout;
        let id = self.ckpt + 1;
        let (records, mark) = {
            let mut j = ctx.journal.lock();
            j.push(Record::CheckpointBegin { id });
            (j.take(), ctx.write_seq.load(Ordering::Relaxed))
        };
        self.device_flush(ctx.stats)?;
        let zones = self.write_pages(ctx, mark, log_pages(&records, layout.block_size as usize))?;
        let begin_zone = *zones.last().expect("the Begin record was written");
        self.ckpt = id;
        // The map, a batch of chunk pages at a time (entries read without
        // locks: changes made meanwhile are logged after the Begin record).
        let per = entries_per_chunk(layout.block_size as usize) as u64;
        let batch = layout.mdts_blocks.max(2) as usize - 1;
        let mut chunks = 0u64;
        let mut bodies = Vec::with_capacity(batch);
        let mut first = 0u64;
        while first < ctx.map.logical() {
            let end = (first + per).min(ctx.map.logical());
            let entries: Vec<u32> = (first..end).map(|l| ctx.map.raw(l)).collect();
            if entries.iter().any(|&e| e != u32::MAX) {
                bodies.push(Body::Chunk { ckpt: id, first, entries });
                chunks += 1;
            }
            if bodies.len() >= batch {
                self.write_pages(ctx, ctx.watermark(), bodies.drain(..))?;
            }
            first = end;
        }
        self.write_pages(ctx, ctx.watermark(), bodies.drain(..))?;
        // Every block the chunks name completed before it was read: make it
        // durable before the checkpoint counts.
        self.device_flush(ctx.stats)?;
        self.write_pages(ctx, ctx.watermark(), [Body::End { ckpt: id, chunks }])?;
        self.make_durable(ctx)?;
        Counters::add(&ctx.stats.checkpoints, 1);
        // Zones wholly before the Begin record are no longer needed.
        let keep_from = self.first_seq[begin_zone as usize].expect("begin zone is live");
        for z in 0..layout.meta_zones {
            if matches!(self.first_seq[z as usize], Some(s) if s < keep_from) {
                self.q
                    .zone_action(ZoneAction::Reset, Target::Zone(layout.zone_start(z)))
                    .map_err(FtlError::device("reset a metadata zone"))?;
                Counters::add(&ctx.stats.zone_resets, 1);
                self.first_seq[z as usize] = None;
                if matches!(self.current, Some((c, _)) if c == z) {
                    self.current = None;
                }
                if self.window.is_some_and(|w| w.zone == z) {
                    self.window = None; // a reset drops the ZRWA
                }
                if self.plain == Some(z) {
                    self.plain = None;
                }
            }
        }
        tracing::debug!(id, chunks, free_meta_zones = self.free_zones(), "checkpoint written");
        Ok(())
    }
}
