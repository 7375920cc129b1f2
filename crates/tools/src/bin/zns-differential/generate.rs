//! Random commands, aimed where the rules are: at, before and after the
//! write pointer, across the zone capacity and the zone's end, outside the
//! namespace, at zone starts and beside them, on one zone and on all.

use std::fmt;

use zns_device::{ReportFilter, Target, Zone, ZoneAction, ZoneOp, ZoneState};

use crate::rng::Rng;

/// What the generator needs to know about the device pair.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Zones in the namespace.
    pub zones: u64,
    /// Zone size in blocks.
    pub zone_size: u64,
    /// Namespace size in blocks.
    pub blocks: u64,
    /// Block size in bytes.
    pub block_size: usize,
    /// Most blocks in one read or write (on both devices).
    pub max_blocks: u64,
    /// Most blocks in one Zone Append (on both devices).
    pub max_append_blocks: u64,
    /// Zone descriptor extension size in bytes (0 = none).
    pub ext: usize,
    /// Max Open Resources.
    pub max_open: Option<u32>,
    /// Max Active Resources.
    pub max_active: Option<u32>,
    /// Write Zeroes is supported by both.
    pub write_zeroes: bool,
    /// Zone random write areas on both, alike: window size and commit
    /// unit in blocks.
    pub zrwa: Option<(u64, u64)>,
}

/// One command with its data: `bytes` to move (0 for none), `fill` seeds
/// the data written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// The command.
    pub op: ZoneOp,
    /// Bytes the command moves.
    pub bytes: usize,
    /// Seed of the data a write carries.
    pub fill: u64,
}

impl Cmd {
    fn plain(op: ZoneOp) -> Cmd {
        Cmd { op, bytes: 0, fill: 0 }
    }

    /// Blocks the command moves, for its description.
    fn blocks(&self, bs: usize) -> usize {
        self.bytes / bs.max(1)
    }

    /// A one-line description, e.g. `write 4 blocks at LBA 120 (FUA)`.
    pub fn describe(&self, bs: usize) -> String {
        match &self.op {
            ZoneOp::Read { lba } => format!("read {} blocks at LBA {lba}", self.blocks(bs)),
            ZoneOp::Write { lba, fua, .. } => format!(
                "write {} blocks at LBA {lba}{}",
                self.blocks(bs),
                if *fua { " (FUA)" } else { "" }
            ),
            ZoneOp::Append { zslba, .. } => {
                format!("zone append of {} blocks to zone at LBA {zslba}", self.blocks(bs))
            }
            ZoneOp::WriteZeroes { lba, blocks } => {
                format!("write zeroes of {blocks} blocks at LBA {lba}")
            }
            ZoneOp::Flush => "flush".into(),
            ZoneOp::Zone { action, target: Target::Zone(l) } => {
                format!("{} zone at LBA {l}", action.name())
            }
            ZoneOp::Zone { action, target: Target::All } => {
                format!("{} all zones (Select All)", action.name())
            }
            ZoneOp::SetZoneExtension { zslba } => {
                format!("set zone descriptor extension of zone at LBA {zslba}")
            }
            ZoneOp::ReportZones { slba, filter, partial, extended } => format!(
                "{}zone report from LBA {slba}, filter {filter:?}, {}partial, {} bytes",
                if *extended { "extended " } else { "" },
                if *partial { "" } else { "not " },
                self.bytes
            ),
            ZoneOp::Copy { ranges, dest } => {
                format!("copy of {} ranges to LBA {dest}", ranges.len())
            }
            ZoneOp::OpenZrwa { zslba } => format!("open zone at LBA {zslba} with a ZRWA"),
            ZoneOp::CommitZrwa { lba } => format!("ZRWA commit up to LBA {lba}"),
            ZoneOp::RuhStatus => "reclaim unit handle status".to_string(),
            ZoneOp::RuhUpdate { pids } => format!("reclaim unit handle update of {pids:?}"),
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(4096))
    }
}

/// What a prologue step does to its zone.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A one-block write at the write pointer (implicit open).
    Write,
    /// Open Zone.
    Open,
    /// Set Zone Descriptor Extension (or Close where there are none).
    Extension,
}

/// The commands of one sequence.
#[derive(Debug)]
pub struct Sequence {
    prologue: Vec<(Step, u64)>,
}

impl Sequence {
    /// A new sequence: in about a third of them, a prologue first opens
    /// (or activates) about as many zones as the resource limits allow,
    /// so that commands after it meet the limits.
    pub fn new(rng: &mut Rng, g: &Geometry) -> Sequence {
        let mut prologue = Vec::new();
        if rng.chance(35) {
            let lo = g.max_open.map_or(2, |o| o.saturating_sub(1) as u64).max(1);
            let hi = g.max_active.or(g.max_open).map_or(6, |a| a as u64 + 1).max(lo);
            let k = rng.range(lo, hi).min(g.zones);
            let mut order: Vec<u64> = (0..g.zones).collect();
            for i in 0..order.len() {
                let j = i + rng.below((order.len() - i) as u64) as usize;
                order.swap(i, j);
            }
            for &z in order.iter().take(k as usize) {
                let step = match rng.weighted(&[60, 30, 10]) {
                    0 => Step::Write,
                    1 => Step::Open,
                    _ => Step::Extension,
                };
                prologue.push((step, z));
            }
            prologue.reverse();
        }
        Sequence { prologue }
    }

    /// Commands the prologue still has.
    pub fn prologue_left(&self) -> usize {
        self.prologue.len()
    }

    /// The next command, given the zones as the device reports them now.
    pub fn next(&mut self, rng: &mut Rng, g: &Geometry, zones: &[Zone]) -> Cmd {
        if let Some((step, index)) = self.prologue.pop() {
            let z = &zones[index as usize];
            return match step {
                Step::Write => write_at(rng, g, wp_of(z), 1),
                Step::Open => Cmd::plain(ZoneOp::Zone {
                    action: ZoneAction::Open,
                    target: Target::Zone(z.start),
                }),
                Step::Extension if g.ext > 0 => Cmd {
                    op: ZoneOp::SetZoneExtension { zslba: z.start },
                    bytes: g.ext,
                    fill: rng.next(),
                },
                Step::Extension => Cmd::plain(ZoneOp::Zone {
                    action: ZoneAction::Finish,
                    target: Target::Zone(z.start),
                }),
            };
        }
        random_command(rng, g, zones)
    }
}

/// The write pointer, or where it would be: the zone's end for Full zones,
/// its start where there is none.
fn wp_of(z: &Zone) -> u64 {
    match (z.write_pointer, z.state) {
        (Some(wp), _) => wp,
        (None, ZoneState::Full) => z.start + z.capacity,
        (None, _) => z.start,
    }
}

fn write_at(rng: &mut Rng, g: &Geometry, lba: u64, blocks: u64) -> Cmd {
    Cmd {
        op: ZoneOp::Write { lba, fua: rng.chance(10), placement: None },
        bytes: blocks as usize * g.block_size,
        fill: rng.next(),
    }
}

/// A block count up to `max`: mostly small, sometimes the largest.
fn count(rng: &mut Rng, max: u64) -> u64 {
    let max = max.max(1);
    match rng.weighted(&[70, 25, 5]) {
        0 => rng.range(1, max.min(8)),
        1 => rng.range(1, max),
        _ => max,
    }
}

/// An LBA somewhere interesting for a write to zone `z`.
fn aim(rng: &mut Rng, g: &Geometry, z: &Zone) -> u64 {
    let wp = wp_of(z);
    let cap_end = z.start + z.capacity;
    match rng.weighted(&[40, 10, 10, 12, 5, 5, 10, 8]) {
        0 => wp,
        1 => wp.saturating_sub(rng.range(1, 8)).max(z.start),
        2 => wp + rng.range(1, 8),
        3 => cap_end.saturating_sub(rng.range(1, 4)).max(z.start),
        4 if g.zone_size > z.capacity => cap_end + rng.below(g.zone_size - z.capacity),
        4 => cap_end,
        5 => (z.start + g.zone_size).saturating_sub(rng.range(1, 4)),
        6 => rng.below(g.blocks),
        _ => outside(rng, g),
    }
}

/// An LBA at or past the namespace's end, or just before it.
fn outside(rng: &mut Rng, g: &Geometry) -> u64 {
    match rng.below(3) {
        0 => g.blocks.saturating_sub(rng.range(1, 3)),
        1 => g.blocks,
        _ => g.blocks + rng.below(g.zone_size * 4),
    }
}

/// A zone start, sometimes an LBA inside a zone or past the namespace.
fn zone_target(rng: &mut Rng, g: &Geometry, z: &Zone, odd_percent: u64) -> u64 {
    if !rng.chance(odd_percent) {
        return z.start;
    }
    if rng.chance(50) {
        z.start + rng.range(1, g.zone_size - 1)
    } else {
        match rng.below(3) {
            0 => g.blocks,
            1 => g.blocks + g.zone_size * rng.range(0, 3),
            _ => u64::MAX - rng.below(g.zone_size),
        }
    }
}

fn random_command(rng: &mut Rng, g: &Geometry, zones: &[Zone]) -> Cmd {
    let z = &zones[rng.below(g.zones) as usize];
    let wz = if g.write_zeroes { 5 } else { 0 };
    let ext = if g.ext > 0 { 3 } else { 0 };
    let zrwa = if g.zrwa.is_some() { 20 } else { 0 };
    match rng.weighted(&[30, 14, wz, 12, 28, 7, ext, 1, zrwa]) {
        0 => {
            let lba = aim(rng, g, z);
            let n = count(rng, g.max_blocks);
            write_at(rng, g, lba, n)
        }
        1 => {
            let zslba = zone_target(rng, g, z, 10);
            let room = (z.start + z.capacity).saturating_sub(wp_of(z));
            let n = if rng.chance(20) && room > 0 {
                (room + rng.below(3)).clamp(1, g.max_append_blocks)
            } else {
                count(rng, g.max_append_blocks)
            };
            Cmd {
                op: ZoneOp::Append { zslba, fua: rng.chance(10) },
                bytes: n as usize * g.block_size,
                fill: rng.next(),
            }
        }
        2 => {
            // Mostly: fill the zone to a few blocks short of (or just
            // past) its capacity, so that later writes cross its end.
            let wp = wp_of(z);
            let room = (z.start + z.capacity).saturating_sub(wp);
            let (lba, n) = if rng.chance(60) && room > 0 {
                (wp, (room + 2).saturating_sub(rng.below(8)).clamp(1, 65536))
            } else {
                (aim(rng, g, z), count(rng, 64))
            };
            Cmd::plain(ZoneOp::WriteZeroes { lba, blocks: n as u32 })
        }
        3 => {
            let wp = wp_of(z);
            let lba = match rng.weighted(&[35, 20, 15, 10, 10, 10]) {
                0 => z.start + rng.below((wp - z.start).max(1)),
                1 => wp + rng.below(4),
                2 => (z.start + g.zone_size).saturating_sub(rng.range(1, 4)),
                3 => z.start + z.capacity + rng.below((g.zone_size - z.capacity).max(1)),
                4 => rng.below(g.blocks),
                _ => outside(rng, g),
            };
            let n = count(rng, g.max_blocks);
            Cmd { op: ZoneOp::Read { lba }, bytes: n as usize * g.block_size, fill: 0 }
        }
        4 => {
            let action = match rng.weighted(&[25, 20, 15, 15, 5]) {
                0 => ZoneAction::Open,
                1 => ZoneAction::Close,
                2 => ZoneAction::Finish,
                3 => ZoneAction::Reset,
                _ => ZoneAction::Offline,
            };
            let target =
                if rng.chance(8) { Target::All } else { Target::Zone(zone_target(rng, g, z, 6)) };
            Cmd::plain(ZoneOp::Zone { action, target })
        }
        5 => {
            let slba = match rng.weighted(&[60, 20, 10, 10]) {
                0 => z.start,
                1 => z.start + rng.range(1, g.zone_size - 1),
                2 => 0,
                _ => outside(rng, g),
            };
            let filters = [
                ReportFilter::Empty,
                ReportFilter::ImplicitlyOpen,
                ReportFilter::ExplicitlyOpen,
                ReportFilter::Closed,
                ReportFilter::Full,
                ReportFilter::ReadOnly,
                ReportFilter::Offline,
                ReportFilter::ResetRecommended,
            ];
            let filter = if rng.chance(45) {
                ReportFilter::All
            } else {
                filters[rng.below(filters.len() as u64) as usize]
            };
            let extended = if g.ext > 0 { rng.chance(30) } else { rng.chance(3) };
            let per = 64 + if extended { g.ext } else { 0 };
            let n = rng.range(0, g.zones + 2) as usize;
            Cmd {
                op: ZoneOp::ReportZones { slba, filter, partial: rng.chance(50), extended },
                bytes: 64 + n * per,
                fill: 0,
            }
        }
        6 => Cmd {
            op: ZoneOp::SetZoneExtension { zslba: zone_target(rng, g, z, 6) },
            bytes: g.ext,
            fill: rng.next(),
        },
        7 => Cmd::plain(ZoneOp::Flush),
        _ => zrwa_command(rng, g, zones, z),
    }
}

/// A command about zone random write areas: an Open with ZRWA Allocate, a
/// write in, across or past a zone's window, or a commit, mostly aimed at
/// a zone that has a ZRWA.
fn zrwa_command(rng: &mut Rng, g: &Geometry, zones: &[Zone], z: &Zone) -> Cmd {
    let (size, unit) = g.zrwa.expect("only with ZRWAs");
    // Mostly a zone with a window, where there is one.
    let with: Vec<&Zone> = zones.iter().filter(|z| z.has_zrwa()).collect();
    let w = match with.is_empty() || rng.chance(25) {
        true => z,
        false => with[rng.below(with.len() as u64) as usize],
    };
    match rng.weighted(&[30, 40, 30]) {
        0 => zrwa_open(rng, g, zones),
        1 => {
            let wp = wp_of(w);
            let lba = match rng.weighted(&[40, 25, 15, 10, 10]) {
                0 => wp + rng.below(size),
                1 => wp + size - rng.range(1, unit.min(size)),
                2 => wp + size + rng.below(size),
                3 => wp + 2 * size - rng.range(0, 2),
                _ => wp.saturating_sub(rng.range(1, unit)).max(w.start),
            };
            let n = match rng.weighted(&[50, 30, 20]) {
                0 => rng.range(1, unit),
                1 => rng.range(1, size),
                _ => rng.range(size, 2 * size),
            };
            write_at(rng, g, lba, n.clamp(1, g.max_blocks))
        }
        _ => {
            let wp = wp_of(w);
            let last = match rng.weighted(&[50, 15, 10, 10, 10, 5]) {
                0 => wp + unit * rng.range(1, size / unit) - 1,
                1 => wp + rng.below(size),
                2 => wp.saturating_sub(rng.range(1, unit)),
                3 => wp + size + rng.below(size),
                4 => rng.below(g.blocks),
                _ => outside(rng, g),
            };
            Cmd::plain(ZoneOp::CommitZrwa { lba: last })
        }
    }
}

/// Open with ZRWA Allocate of a zone that has no ZRWA and is Empty, Closed
/// or Full (QEMU counts a second resource for a zone that has one, and
/// takes one for an open zone without checking, so those would leave the
/// two devices apart in a way no report shows), or of an LBA that is no
/// zone start.
fn zrwa_open(rng: &mut Rng, g: &Geometry, zones: &[Zone]) -> Cmd {
    let fit: Vec<&Zone> = zones
        .iter()
        .filter(|z| {
            !z.has_zrwa()
                && matches!(z.state, ZoneState::Empty | ZoneState::Closed | ZoneState::Full)
        })
        .collect();
    let zslba = match fit.is_empty() || rng.chance(10) {
        true => {
            let z = &zones[rng.below(g.zones) as usize];
            zone_target(rng, g, z, 100)
        }
        false => fit[rng.below(fit.len() as u64) as usize].start,
    };
    Cmd::plain(ZoneOp::OpenZrwa { zslba })
}
