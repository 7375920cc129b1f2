//! [`TenantQueue`]: a tenant's [`ZoneQueue`], turning logical commands
//! into commands on a queue of the base device.
//!
//! A write or append reserves its blocks at the logical write pointer
//! (lock-free on the fast path), then becomes one *piece* per column it
//! touches, each a contiguous run of one physical zone gathered from the
//! caller's buffer. Pieces wait in the queue until they may go: a write
//! piece when its group's journal record is durable, its physical zone's
//! token says every block below it is written and nothing else is in
//! flight there (it then claims the token), and write admission lets it
//! in; a read piece when its zone's read window has room. A command
//! completes when its last piece does, with its status or the first
//! failure, named for the logical command and LBA.
//!
//! Thread safety: `Send`, not `Sync`, like every [`ZoneQueue`]: one
//! thread owns it. It shares the instance with other queues through
//! atomics and the cold-path locks described in `runtime`.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_device::{
    Completion, Data, DeviceError, DeviceInfo, IoBuffer, OpKind, Rejected, ReportFilter,
    StatusCode, Target, ZoneAction, ZoneOp, ZoneQueue, ZoneState, DEFAULT_TIMEOUT,
};
use zns_spec::{ReportHeader, ZoneAttributes, ZoneDescriptor, ZoneType};

use crate::control;
use crate::ops::Slow;
use crate::runtime::{group_end, Ezns, Gate, Group, BUSY, COMMITTED, FAILED, PENDING};

/// A logical command in flight.
#[derive(Debug)]
struct Cmd {
    tag: u64,
    op: OpKind,
    lba: Option<u64>,
    buffer: Option<IoBuffer>,
    /// Pieces not yet completed.
    parts: u32,
    error: Option<DeviceError>,
    /// The LBA an append landed at.
    result: u64,
    /// Journal records the completion waits for.
    gates: Vec<Gate>,
    /// Issued by `execute`: the completion goes to it, not to `poll`.
    sync: bool,
    /// A write waiting for its blocks: zone, position (`None`: append),
    /// blocks, FUA.
    write: Option<(usize, Option<u64>, u64, bool)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write {
        fua: bool,
    },
    /// A Flush of the base device; `after`: only once the command's other
    /// pieces completed (a FUA write makes everything below it in its
    /// logical zone durable, as a zone's FUA write does).
    Flush {
        after: bool,
    },
}

/// One command on the base device.
#[derive(Debug)]
struct Piece {
    cmd: u32,
    kind: Kind,
    /// Logical zone.
    zone: usize,
    group: Option<Arc<Group>>,
    col: usize,
    /// Group-relative logical range the piece covers (its column's part).
    lo: u64,
    hi: u64,
    /// Zone offset of the command's first block.
    first: u64,
    /// Physical zone and block offset in it.
    pz: u32,
    off: u64,
    blocks: u64,
    start_ns: u64,
}

enum Launch {
    Sent,
    NotYet,
    Failed(DeviceError),
}

/// A queue of one tenant namespace.
///
/// Thread safety: `Send`, not `Sync`; see the module documentation.
pub struct TenantQueue {
    ez: Arc<Ezns>,
    t: usize,
    base: Box<dyn ZoneQueue>,
    depth: usize,
    cmds: Vec<Option<Cmd>>,
    free_cmds: Vec<u32>,
    pieces: Vec<Option<Piece>>,
    free_pieces: Vec<u32>,
    pending: VecDeque<u32>,
    stalled: VecDeque<u32>,
    gated: Vec<u32>,
    ready: VecDeque<Completion>,
    sync_done: Option<Completion>,
    pool: Vec<IoBuffer>,
    done: Vec<Completion>,
    in_flight: usize,
    scratch: Option<IoBuffer>,
}

impl std::fmt::Debug for TenantQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantQueue")
            .field("tenant", &self.ez.tenants[self.t].name)
            .field("outstanding", &self.outstanding())
            .field("pieces_in_flight", &self.in_flight)
            .field("pieces_waiting", &self.pending.len())
            .field("writes_waiting_for_room", &self.stalled.len())
            .field("waiting_for_journal", &self.gated.len())
            .finish_non_exhaustive()
    }
}

fn nvme(code: StatusCode, op: OpKind, lba: Option<u64>) -> DeviceError {
    DeviceError::Nvme { status: code.status(), op, lba }
}

impl TenantQueue {
    pub(crate) fn new(ez: Arc<Ezns>, t: usize, depth: usize) -> zns_device::Result<TenantQueue> {
        if depth == 0 {
            return Err(DeviceError::InvalidArgument("queue depth 0 (at least 1)".into()));
        }
        let base = ez.base.queue((depth * 4).clamp(16, 1024))?;
        Ok(TenantQueue {
            ez,
            t,
            base,
            depth,
            cmds: (0..=depth).map(|_| None).collect(),
            free_cmds: (0..=depth as u32).rev().collect(),
            pieces: Vec::new(),
            free_pieces: Vec::new(),
            pending: VecDeque::new(),
            stalled: VecDeque::new(),
            gated: Vec::new(),
            ready: VecDeque::new(),
            sync_done: None,
            pool: Vec::new(),
            done: Vec::new(),
            in_flight: 0,
            scratch: None,
        })
    }

    fn tinfo(&self) -> &DeviceInfo {
        &self.ez.tenants[self.t].info
    }

    fn bs(&self) -> usize {
        self.ez.geo.bs
    }

    fn in_use(&self) -> usize {
        self.depth + 1 - self.free_cmds.len()
    }

    // ---- submission -------------------------------------------------

    /// Checks a command's shape before it takes a slot.
    fn check(&self, op: &ZoneOp, buffer: &Option<IoBuffer>) -> Result<(), DeviceError> {
        let info = self.tinfo();
        let bs = info.block_size as usize;
        if buffer.as_ref().is_some_and(|b| b.metadata().is_some()) {
            return Err(DeviceError::Unsupported(
                "eZNS tenant namespaces carry no per-LBA metadata".into(),
            ));
        }
        match op {
            ZoneOp::WriteZeroes { .. } => {
                return Err(DeviceError::Unsupported("eZNS tenants have no Write Zeroes".into()))
            }
            ZoneOp::Write { placement: Some(_), .. } => {
                return Err(DeviceError::Unsupported(
                    "eZNS tenants have no Flexible Data Placement".into(),
                ))
            }
            ZoneOp::SetZoneExtension { .. } => {
                return Err(DeviceError::Unsupported(
                    "the device has no zone descriptor extensions".into(),
                ))
            }
            ZoneOp::Copy { ranges, .. } => {
                if ranges.is_empty() {
                    return Err(DeviceError::InvalidArgument("copy without source ranges".into()));
                }
                return Err(DeviceError::Unsupported("eZNS tenants have no Copy".into()));
            }
            ZoneOp::Zone { action: ZoneAction::Offline, target: Target::Zone(_) } => {
                return Err(DeviceError::Unsupported("eZNS tenants have no Offline Zone".into()))
            }
            ZoneOp::OpenZrwa { .. } | ZoneOp::CommitZrwa { .. } => {
                return Err(DeviceError::Unsupported(
                    "eZNS tenants have no zone random write areas".into(),
                ))
            }
            ZoneOp::RuhStatus | ZoneOp::RuhUpdate { .. } => {
                return Err(DeviceError::Unsupported(format!(
                    "{}: eZNS tenants have no Flexible Data Placement",
                    op.kind()
                )))
            }
            _ => {}
        }
        match (op.data_to_device(), buffer) {
            (None, Some(_)) => {
                return Err(DeviceError::InvalidArgument(format!("{} takes no buffer", op.kind())))
            }
            (Some(_), None) => {
                return Err(DeviceError::InvalidArgument(format!("{} needs a buffer", op.kind())))
            }
            _ => {}
        }
        if let (Some(b), ZoneOp::Read { .. } | ZoneOp::Write { .. } | ZoneOp::Append { .. }) =
            (buffer, op)
        {
            if b.is_empty() || !b.len().is_multiple_of(bs) {
                return Err(DeviceError::InvalidArgument(format!(
                    "{} bytes is not a whole, non-zero number of {bs}-byte blocks",
                    b.len()
                )));
            }
            let limit =
                if matches!(op, ZoneOp::Append { .. }) { info.zasl_bytes } else { info.mdts_bytes };
            if b.len() > limit {
                return Err(DeviceError::InvalidArgument(format!(
                    "{} of {} bytes exceeds the limit of {limit} bytes",
                    op.kind(),
                    b.len()
                )));
            }
        }
        if let (Some(b), ZoneOp::ReportZones { extended, .. }) = (buffer, op) {
            if b.len() < ReportHeader::SIZE {
                return Err(DeviceError::InvalidArgument("a zone report needs 64 bytes".into()));
            }
            if *extended {
                return Err(DeviceError::Unsupported("no extended zone reports".into()));
            }
        }
        Ok(())
    }

    // The refusal hands the caller's buffer back by value, as the trait's
    // `submit` does.
    #[allow(clippy::result_large_err)]
    fn submit_inner(
        &mut self,
        op: ZoneOp,
        buffer: Option<IoBuffer>,
        tag: u64,
        sync: bool,
    ) -> Result<(), Rejected> {
        if let Err(error) = self.check(&op, &buffer) {
            return Err(Rejected { error, buffer });
        }
        let full = if sync {
            self.in_use() > self.depth
        } else {
            self.in_use() + self.ready.len() >= self.depth
        };
        if full {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        }
        let slot = self.free_cmds.pop().expect("a free slot");
        self.cmds[slot as usize] = Some(Cmd {
            tag,
            op: op.kind(),
            lba: op.lba(),
            buffer,
            parts: 0,
            error: None,
            result: 0,
            gates: Vec::new(),
            sync,
            write: None,
        });
        match op {
            ZoneOp::Read { lba } => self.start_read(slot, lba),
            ZoneOp::Write { lba, fua, .. } => self.start_write_cmd(slot, lba, Some(lba), fua),
            ZoneOp::Append { zslba, fua } => self.start_write_cmd(slot, zslba, None, fua),
            ZoneOp::Flush => {
                self.add_piece(slot, Kind::Flush { after: false }, 0, None, 0, (0, 0, 0), (0, 0, 0))
            }
            ZoneOp::Zone { action, target } => self.start_zone(slot, action, target),
            ZoneOp::ReportZones { slba, filter, partial, .. } => {
                self.start_report(slot, slba, filter, partial)
            }
            _ => unreachable!("refused by check"),
        }
        self.maybe_complete(slot);
        Ok(())
    }

    fn fail(&mut self, slot: u32, e: DeviceError) {
        if let Some(c) = self.cmds[slot as usize].as_mut() {
            if c.error.is_none() {
                c.error = Some(e);
            }
        }
    }

    fn fail_code(&mut self, slot: u32, code: StatusCode) {
        let c = self.cmds[slot as usize].as_ref().expect("live command");
        let e = nvme(code, c.op, c.lba);
        self.fail(slot, e);
    }

    fn start_read(&mut self, slot: u32, lba: u64) {
        let bs = self.bs();
        let lsize = self.ez.geo.lsize;
        let blocks = self.tinfo().blocks();
        let cmd = self.cmds[slot as usize].as_mut().expect("live command");
        let n = (cmd.buffer.as_ref().map_or(0, |b| b.len()) / bs) as u64;
        if lba >= blocks || lba + n > blocks {
            return self.fail_code(slot, StatusCode::LbaOutOfRange);
        }
        let (z, off) = ((lba / lsize) as usize, lba % lsize);
        if off + n > lsize {
            return self.fail_code(slot, StatusCode::ZoneBoundaryError);
        }
        if let Some(b) = cmd.buffer.as_mut() {
            b.fill(0);
        }
        let ez = Arc::clone(&self.ez);
        let lz = &ez.tenants[self.t].zones[z];
        let st = &ez.tenants[self.t].stats;
        ez.tenants[self.t].last_read.store(ez.now(), Relaxed);
        st.reads.fetch_add(1, Relaxed);
        st.read_blocks.fetch_add(n, Relaxed);
        if lz.state() == ZoneState::Offline {
            return self.fail_code(slot, StatusCode::ZoneIsOffline);
        }
        let hi = (off + n).min(lz.wp());
        let map = lz.map.load();
        for (i, g) in map.iter().enumerate() {
            let (a, b) = (off.max(g.layout.start), hi.min(group_end(&map, i)));
            if a >= b {
                continue;
            }
            self.add_group_pieces(slot, Kind::Read, z, g, a, b, off);
        }
    }

    fn start_write_cmd(&mut self, slot: u32, lba: u64, at: Option<u64>, fua: bool) {
        let bs = self.bs();
        let lsize = self.ez.geo.lsize;
        let blocks = self.tinfo().blocks();
        let cmd = self.cmds[slot as usize].as_mut().expect("live command");
        let n = (cmd.buffer.as_ref().map_or(0, |b| b.len()) / bs) as u64;
        if lba >= blocks || lba + n > blocks {
            return self.fail_code(slot, StatusCode::LbaOutOfRange);
        }
        let z = (lba / lsize) as usize;
        let off = lba % lsize;
        if at.is_none() && off != 0 {
            return self.fail_code(slot, StatusCode::InvalidField);
        }
        if off + n > lsize {
            return self.fail_code(slot, StatusCode::ZoneBoundaryError);
        }
        cmd.write = Some((z, at.map(|_| off), n, fua));
        if self.stalled.iter().any(|&s| {
            self.cmds[s as usize].as_ref().and_then(|c| c.write).is_some_and(|w| w.0 == z)
        }) {
            self.stalled.push_back(slot);
            return;
        }
        if !self.start_write(slot) {
            self.stalled.push_back(slot);
        }
    }

    /// Reserves a write's blocks and makes its pieces; false when it must
    /// wait for room.
    fn start_write(&mut self, slot: u32) -> bool {
        let (z, at, n, fua) =
            self.cmds[slot as usize].as_ref().and_then(|c| c.write).expect("a write");
        let ez = Arc::clone(&self.ez);
        match ez.reserve(self.t, z, at, n) {
            Ok(wp) => {
                let tenant = &ez.tenants[self.t];
                tenant.last_write.store(ez.now(), Relaxed);
                tenant.stats.writes.fetch_add(1, Relaxed);
                tenant.stats.write_blocks.fetch_add(n, Relaxed);
                let cmd = self.cmds[slot as usize].as_mut().expect("live command");
                cmd.write = None;
                if at.is_none() {
                    cmd.result = z as u64 * ez.geo.lsize + wp;
                }
                let lz = &ez.tenants[self.t].zones[z];
                let map = lz.map.load();
                for (i, g) in map.iter().enumerate() {
                    let (a, b) = (wp.max(g.layout.start), (wp + n).min(group_end(&map, i)));
                    if a < b {
                        self.add_group_pieces(slot, Kind::Write { fua }, z, g, a, b, wp);
                    }
                }
                if fua {
                    let k = Kind::Flush { after: true };
                    self.add_piece(slot, k, z, None, 0, (0, 0, 0), (0, 0, 0));
                }
                true
            }
            Err(Slow::Wait) => false,
            Err(Slow::Status(s)) => {
                let c = self.cmds[slot as usize].as_mut().expect("live command");
                c.write = None;
                let e = DeviceError::Nvme { status: s, op: c.op, lba: c.lba };
                self.fail(slot, e);
                true
            }
        }
    }

    /// One piece per column of `g` for the zone offsets `[a, b)` of a
    /// command whose first block is at zone offset `first`.
    #[allow(clippy::too_many_arguments)]
    fn add_group_pieces(
        &mut self,
        slot: u32,
        kind: Kind,
        z: usize,
        g: &Arc<Group>,
        a: u64,
        b: u64,
        first: u64,
    ) {
        let l = &g.layout;
        let (lo, hi) = (a - l.start, b - l.start);
        for (c, col) in l.cols.iter().enumerate() {
            let (x, y) = (l.ext(c, lo), l.ext(c, hi));
            if y > x {
                let group = Some(Arc::clone(g));
                let at = (col.zone, col.base + x, y - x);
                self.add_piece(slot, kind, z, group, c, (lo, hi, first), at);
            }
        }
    }

    /// Queues a piece of command `slot`: `range` is the group-relative
    /// logical range and the command's first zone offset, `at` the
    /// physical zone, offset and blocks.
    #[allow(clippy::too_many_arguments)]
    fn add_piece(
        &mut self,
        slot: u32,
        kind: Kind,
        zone: usize,
        group: Option<Arc<Group>>,
        col: usize,
        range: (u64, u64, u64),
        at: (u32, u64, u64),
    ) {
        let (lo, hi, first) = range;
        let (pz, off, blocks) = at;
        let p = Piece {
            cmd: slot,
            kind,
            zone,
            group,
            col,
            lo,
            hi,
            first,
            pz,
            off,
            blocks,
            start_ns: 0,
        };
        let id = match self.free_pieces.pop() {
            Some(id) => {
                self.pieces[id as usize] = Some(p);
                id
            }
            None => {
                self.pieces.push(Some(p));
                (self.pieces.len() - 1) as u32
            }
        };
        self.pending.push_back(id);
        self.cmds[slot as usize].as_mut().expect("live command").parts += 1;
    }

    fn start_zone(&mut self, slot: u32, action: ZoneAction, target: Target) {
        let ez = Arc::clone(&self.ez);
        let r = match target {
            Target::All => ez.zone_action_all(self.t, action),
            Target::Zone(lba) => {
                if lba >= self.tinfo().blocks() {
                    Err(StatusCode::LbaOutOfRange)
                } else if lba % ez.geo.lsize != 0 {
                    Err(StatusCode::InvalidField)
                } else {
                    ez.zone_action(self.t, (lba / ez.geo.lsize) as usize, action)
                }
            }
        };
        match r {
            Ok(gates) => self.cmds[slot as usize].as_mut().expect("live command").gates = gates,
            Err(code) => self.fail_code(slot, code),
        }
    }

    fn start_report(&mut self, slot: u32, slba: u64, filter: ReportFilter, partial: bool) {
        let ez = Arc::clone(&self.ez);
        let cmd = self.cmds[slot as usize].as_mut().expect("live command");
        let buf = cmd.buffer.as_mut().expect("checked");
        if let Err(code) = fill_report(&ez, self.t, slba, filter, partial, buf) {
            self.fail_code(slot, code);
        }
    }

    // ---- the engine -------------------------------------------------

    fn take_buf(&mut self, bytes: usize) -> Result<IoBuffer, DeviceError> {
        let mut b = match self.pool.iter().rposition(|b| b.capacity() >= bytes) {
            Some(i) => self.pool.swap_remove(i),
            None => self.base.alloc(bytes.next_multiple_of(64 * 1024))?,
        };
        b.set_len(bytes)?;
        Ok(b)
    }

    /// Copies between a command's buffer and a piece's (to the piece when
    /// `to_piece`).
    fn copy(&mut self, p: &Piece, piece_buf: &mut IoBuffer, to_piece: bool) {
        let bs = self.bs();
        let Some(g) = p.group.as_ref() else { return };
        let l = &g.layout;
        let col_lo = l.ext(p.col, p.lo);
        let cmd = self.cmds[p.cmd as usize].as_mut().expect("live command");
        let Some(buf) = cmd.buffer.as_mut() else { return };
        l.chunks(p.lo, p.hi, |c, o, q, k| {
            if c != p.col {
                return;
            }
            let at = ((l.start + o - p.first) as usize) * bs;
            let pat = ((q - col_lo) as usize) * bs;
            let len = k as usize * bs;
            if to_piece {
                piece_buf[pat..pat + len].copy_from_slice(&buf[at..at + len]);
            } else {
                buf[at..at + len].copy_from_slice(&piece_buf[pat..pat + len]);
            }
        });
    }

    fn launch(&mut self, id: u32) -> Launch {
        let ez = Arc::clone(&self.ez);
        let p = self.pieces[id as usize].take().expect("pending piece");
        let bs = self.bs();
        let bytes = p.blocks as usize * bs;
        let lz = &ez.tenants[self.t].zones[p.zone];
        let put_back = |me: &mut Self, p: Piece| me.pieces[id as usize] = Some(p);
        let (op, buf) = match p.kind {
            Kind::Flush { after } => {
                if after && self.cmds[p.cmd as usize].as_ref().is_some_and(|c| c.parts > 1) {
                    put_back(self, p);
                    return Launch::NotYet;
                }
                (ZoneOp::Flush, None)
            }
            Kind::Read => {
                if ez.read_cc() {
                    if !lz.rcc.admit() {
                        put_back(self, p);
                        return Launch::NotYet;
                    }
                } else {
                    lz.rcc.enter();
                }
                match self.take_buf(bytes) {
                    Ok(b) => (ZoneOp::Read { lba: ez.zone_lba(p.pz) + p.off }, Some(b)),
                    Err(e) => {
                        lz.rcc.cancel();
                        put_back(self, p);
                        return Launch::Failed(e);
                    }
                }
            }
            Kind::Write { fua } => {
                let g = p.group.as_ref().expect("a write has a group");
                if g.dead.load(Acquire) {
                    put_back(self, p);
                    return Launch::Failed(nvme(StatusCode::ZoneInvalidWrite, OpKind::Write, None));
                }
                if lz.failed.load(Acquire) {
                    put_back(self, p);
                    return Launch::Failed(nvme(StatusCode::WriteFault, OpKind::Write, None));
                }
                match g.gate.load(Acquire) {
                    PENDING => {
                        put_back(self, p);
                        return Launch::NotYet;
                    }
                    FAILED => {
                        put_back(self, p);
                        return Launch::Failed(nvme(
                            StatusCode::InternalError,
                            OpKind::Write,
                            None,
                        ));
                    }
                    _ => {}
                }
                let token = &ez.phys[p.pz as usize].token;
                if token.compare_exchange(p.off, p.off | BUSY, AcqRel, Acquire).is_err() {
                    put_back(self, p);
                    return Launch::NotYet;
                }
                if g.dead.load(Acquire) {
                    token.store(p.off, Release);
                    put_back(self, p);
                    return Launch::Failed(nvme(StatusCode::ZoneInvalidWrite, OpKind::Write, None));
                }
                let zone_bytes = lz.wbytes.load(Acquire);
                if ez.write_admission() {
                    if !ez.wadm.admit(bytes as u64, zone_bytes) {
                        token.store(p.off, Release);
                        put_back(self, p);
                        return Launch::NotYet;
                    }
                } else {
                    ez.wadm.enter(bytes as u64, zone_bytes);
                }
                lz.wbytes.fetch_add(bytes as u64, AcqRel);
                let mut b = match self.take_buf(bytes) {
                    Ok(b) => b,
                    Err(e) => {
                        let left = lz.wbytes.fetch_sub(bytes as u64, AcqRel) - bytes as u64;
                        ez.wadm.cancel(bytes as u64, left);
                        token.store(p.off, Release);
                        put_back(self, p);
                        return Launch::Failed(e);
                    }
                };
                self.copy(&p, &mut b, true);
                (ZoneOp::Write { lba: ez.zone_lba(p.pz) + p.off, fua, placement: None }, Some(b))
            }
        };
        let mut p = p;
        p.start_ns = ez.now();
        let kind = p.kind;
        let (pz, off) = (p.pz, p.off);
        self.pieces[id as usize] = Some(p);
        match self.base.submit(op, buf, id as u64) {
            Ok(()) => {
                self.in_flight += 1;
                Launch::Sent
            }
            Err(r) => {
                if let Some(b) = r.buffer {
                    self.pool.push(b);
                }
                match kind {
                    Kind::Read => lz.rcc.cancel(),
                    Kind::Write { .. } => {
                        let left = lz.wbytes.fetch_sub(bytes as u64, AcqRel) - bytes as u64;
                        ez.wadm.cancel(bytes as u64, left);
                        ez.phys[pz as usize].token.store(off, Release);
                    }
                    Kind::Flush { .. } => {}
                }
                if matches!(r.error, DeviceError::QueueFull) {
                    Launch::NotYet
                } else {
                    Launch::Failed(r.error)
                }
            }
        }
    }

    /// Sends the pieces that may go, in order.
    fn launch_pending(&mut self) {
        let mut n = self.pending.len();
        while n > 0 {
            n -= 1;
            let id = self.pending.pop_front().expect("counted");
            match self.launch(id) {
                Launch::Sent => {}
                Launch::NotYet => self.pending.push_back(id),
                Launch::Failed(e) => {
                    let p = self.pieces[id as usize].take().expect("failed piece");
                    self.free_pieces.push(id);
                    self.piece_done(p.cmd, Some(e));
                }
            }
        }
    }

    fn piece_done(&mut self, slot: u32, err: Option<DeviceError>) {
        if let Some(e) = err {
            let c = self.cmds[slot as usize].as_ref().expect("live command");
            let e = match e {
                DeviceError::Nvme { status, .. } => {
                    DeviceError::Nvme { status, op: c.op, lba: c.lba }
                }
                other => other,
            };
            self.fail(slot, e);
        }
        self.cmds[slot as usize].as_mut().expect("live command").parts -= 1;
        self.maybe_complete(slot);
    }

    /// A base completion.
    fn completed(&mut self, c: Completion) {
        let id = c.tag as u32;
        let Some(p) = self.pieces[id as usize].take() else { return };
        self.free_pieces.push(id);
        self.in_flight -= 1;
        let ez = Arc::clone(&self.ez);
        let now = ez.now();
        let latency = now.saturating_sub(p.start_ns);
        let lz = &ez.tenants[self.t].zones[p.zone];
        let bytes = p.blocks * self.bs() as u64;
        let sched = &ez.config.scheduler;
        let mut buf = c.buffer;
        match p.kind {
            Kind::Write { .. } => {
                let token = &ez.phys[p.pz as usize].token;
                let left = lz.wbytes.fetch_sub(bytes, AcqRel) - bytes;
                let full_unit = p.blocks >= ez.geo.unit;
                ez.wadm.complete(bytes, left, latency, now, full_unit, ez.write_admission());
                match &c.result {
                    Ok(_) => {
                        let end = p.off + p.blocks;
                        token.store(end, Release);
                        if end >= ez.geo.phys_cap {
                            ez.release(&[(p.pz, false)]);
                        }
                    }
                    Err(e) => {
                        token.store(p.off, Release);
                        let status = e.status().unwrap_or(StatusCode::WriteFault.status());
                        ez.break_zone(self.t, p.zone, status);
                    }
                }
            }
            Kind::Read => {
                lz.rcc.complete(latency, now, sched.read_target_us * 1000, sched.read_window_max);
                if c.result.is_ok() {
                    if let Some(b) = buf.as_mut() {
                        self.copy(&p, b, false);
                    }
                }
            }
            Kind::Flush { .. } => {}
        }
        if let Some(b) = buf {
            self.pool.push(b);
        }
        self.piece_done(p.cmd, c.result.err());
    }

    fn maybe_complete(&mut self, slot: u32) {
        let Some(c) = self.cmds[slot as usize].as_ref() else { return };
        if c.parts > 0 || c.write.is_some() {
            return;
        }
        let mut failed = false;
        for g in &c.gates {
            match g.load(Acquire) {
                COMMITTED => {}
                FAILED => failed = true,
                _ => {
                    if !self.gated.contains(&slot) {
                        self.gated.push(slot);
                    }
                    return;
                }
            }
        }
        let mut c = self.cmds[slot as usize].take().expect("live command");
        self.free_cmds.push(slot);
        if failed && c.error.is_none() {
            c.error = Some(nvme(StatusCode::InternalError, c.op, c.lba));
        }
        let done = Completion {
            tag: c.tag,
            op: c.op,
            result: match c.error {
                Some(e) => Err(e),
                None => Ok(c.result),
            },
            buffer: c.buffer,
        };
        if c.sync {
            self.sync_done = Some(done);
        } else {
            self.ready.push_back(done);
        }
    }

    /// Everything but delivering completions: base completions, the
    /// control queue and the arbiter, stalled writes, gates, pending
    /// pieces, the doorbell.
    fn progress(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        self.base.poll(usize::MAX, &mut |c| done.push(c));
        for c in done.drain(..) {
            self.completed(c);
        }
        self.done = done;
        control::pump(&self.ez);
        self.ez.maybe_tick();
        if !self.stalled.is_empty() {
            let mut blocked: Vec<usize> = Vec::new();
            for _ in 0..self.stalled.len() {
                let slot = self.stalled.pop_front().expect("counted");
                let z = self.cmds[slot as usize].as_ref().and_then(|c| c.write).map(|w| w.0);
                if z.is_some_and(|z| blocked.contains(&z)) || !self.start_write(slot) {
                    blocked.extend(z);
                    self.stalled.push_back(slot);
                } else {
                    self.maybe_complete(slot);
                }
            }
        }
        if !self.gated.is_empty() {
            for slot in std::mem::take(&mut self.gated) {
                self.maybe_complete(slot);
            }
        }
        self.launch_pending();
        self.base.ring();
    }

    /// Pieces sent or waiting, and stalled writes.
    fn busy(&self) -> bool {
        self.in_flight > 0
            || !self.pending.is_empty()
            || !self.stalled.is_empty()
            || !self.gated.is_empty()
    }
}

/// Fills `buf` with a zone report of tenant `t` from the zone holding
/// `slba` on.
pub(crate) fn fill_report(
    ez: &Ezns,
    t: usize,
    slba: u64,
    filter: ReportFilter,
    partial: bool,
    buf: &mut [u8],
) -> Result<(), StatusCode> {
    let tenant = &ez.tenants[t];
    let (lsize, lcap) = (ez.geo.lsize, ez.geo.lcap);
    if slba >= tenant.info.blocks() {
        return Err(StatusCode::LbaOutOfRange);
    }
    buf.fill(0);
    let fit = (buf.len() - ReportHeader::SIZE) / ZoneDescriptor::SIZE;
    let (mut listed, mut matched) = (0usize, 0u64);
    for lz in tenant.zones[(slba / lsize) as usize..].iter() {
        let state = lz.state();
        if !filter.matches(state, ZoneAttributes(0)) {
            continue;
        }
        matched += 1;
        if listed < fit {
            let start = lz.index as u64 * lsize;
            let d = ZoneDescriptor {
                zone_type: ZoneType::SequentialWriteRequired,
                state,
                attrs: ZoneAttributes(0),
                attrs_info: 0,
                capacity: lcap,
                start,
                write_pointer: if state.has_write_pointer() {
                    start + lz.wp()
                } else {
                    ZoneDescriptor::INVALID_WRITE_POINTER
                },
            };
            let at = ReportHeader::SIZE + listed * ZoneDescriptor::SIZE;
            buf[at..at + ZoneDescriptor::SIZE].copy_from_slice(&d.to_bytes());
            listed += 1;
        } else if partial {
            break;
        }
    }
    let zones = if partial { listed as u64 } else { matched };
    buf[..ReportHeader::SIZE].copy_from_slice(&ReportHeader { zones }.to_bytes());
    Ok(())
}

impl ZoneQueue for TenantQueue {
    fn info(&self) -> &DeviceInfo {
        self.tinfo()
    }

    fn alloc(&self, len: usize) -> zns_device::Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn capacity(&self) -> usize {
        self.depth
    }

    fn outstanding(&self) -> usize {
        self.in_use() + self.ready.len()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        self.submit_inner(op, buffer, tag, false)
    }

    fn ring(&mut self) {
        self.launch_pending();
        self.base.ring();
        control::pump(&self.ez);
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        if self.ready.is_empty() || self.busy() {
            self.progress();
        }
        let mut n = 0;
        while n < max {
            let Some(c) = self.ready.pop_front() else { break };
            f(c);
            n += 1;
        }
        n
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> zns_device::Result<u64> {
        let (buf, back) = match (op.data_to_device(), data) {
            (None, Data::None) => (None, None),
            (Some(true), Data::ToDevice(b)) => {
                if b.metadata().is_some() {
                    return Err(DeviceError::Unsupported(
                        "eZNS tenant namespaces carry no per-LBA metadata".into(),
                    ));
                }
                let mut s = self.scratch_buf(b.len())?;
                s.copy_from_slice(b);
                (Some(s), None)
            }
            (Some(false), Data::FromDevice(b)) => {
                if b.metadata().is_some() {
                    return Err(DeviceError::Unsupported(
                        "eZNS tenant namespaces carry no per-LBA metadata".into(),
                    ));
                }
                let s = self.scratch_buf(b.len())?;
                (Some(s), Some(b))
            }
            (None, _) => {
                return Err(DeviceError::InvalidArgument(format!("{} takes no buffer", op.kind())))
            }
            (Some(_), Data::None) => {
                return Err(DeviceError::InvalidArgument(format!("{} needs a buffer", op.kind())))
            }
            (Some(_), _) => {
                return Err(DeviceError::InvalidArgument(format!(
                    "{}: the buffer moves the wrong way",
                    op.kind()
                )))
            }
        };
        let start = Instant::now();
        while self.in_use() > self.depth {
            self.progress();
            if start.elapsed() > DEFAULT_TIMEOUT {
                return Err(DeviceError::Timeout {
                    what: "a free queue slot",
                    after: start.elapsed(),
                });
            }
        }
        self.submit_inner(op.clone(), buf, 0, true).map_err(|r| r.error)?;
        let c = loop {
            if let Some(c) = self.sync_done.take() {
                break c;
            }
            self.progress();
            if start.elapsed() > DEFAULT_TIMEOUT {
                for &id in &self.pending {
                    if let Some(p) = &self.pieces[id as usize] {
                        let token = self.ez.phys[p.pz as usize].token.load(Relaxed);
                        tracing::warn!(kind = ?p.kind, zone = p.pz, off = p.off, token, "piece still waiting");
                    }
                }
                return Err(DeviceError::Timeout { what: "a command", after: start.elapsed() });
            }
        };
        let mut returned = c.buffer;
        if let (Some(dst), Some(src)) = (back, returned.as_ref()) {
            let n = dst.len();
            dst.copy_from_slice(&src[..n]);
        }
        if let Some(b) = returned.take() {
            self.scratch = Some(b);
        }
        c.result
    }
}

impl TenantQueue {
    fn scratch_buf(&mut self, len: usize) -> zns_device::Result<IoBuffer> {
        let mut b = match self.scratch.take() {
            Some(b) if b.capacity() >= len => b,
            _ => IoBuffer::aligned(len)?,
        };
        b.set_len(len)?;
        Ok(b)
    }
}

impl Drop for TenantQueue {
    fn drop(&mut self) {
        // Pieces already reserved hold their physical zones' order: send
        // and finish them, so other queues' writes behind them go on. A
        // device that stopped answering (a power cut) is given up on after
        // two seconds without a completion.
        let mut last = (self.in_flight, self.pending.len(), Instant::now());
        while self.busy() && last.2.elapsed() < Duration::from_secs(2) {
            self.progress();
            if (self.in_flight, self.pending.len()) != (last.0, last.1) {
                last = (self.in_flight, self.pending.len(), Instant::now());
            }
            std::thread::yield_now();
        }
        for id in std::mem::take(&mut self.pending) {
            if let Some(p) = self.pieces[id as usize].take() {
                if matches!(p.kind, Kind::Write { .. }) {
                    let status = StatusCode::WriteFault.status();
                    self.ez.break_zone(self.t, p.zone, status);
                }
            }
        }
    }
}
