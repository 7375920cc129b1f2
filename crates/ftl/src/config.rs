//! FTL configuration, and the stream plan derived from it and the device's
//! open and active zone limits.

use crate::error::{FtlError, Result};

/// How garbage collection chooses the zone to reclaim: shared with the
/// emulator's conventional firmware (crate `zns-ftl-core`).
pub use zns_ftl_core::VictimPolicy;

/// Which open zones take which writes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamLayout {
    /// One log: user writes and garbage-collection copies share the same
    /// open zones (the classic single-log FTL, the baseline).
    Single,
    /// User writes split into hot and cold streams by inferred lifetime
    /// (SepBIT-style: a write is hot when the data it replaces lived
    /// shorter than a threshold), garbage-collection copies go to their
    /// own streams (warm: survivors of hot zones; cold: the rest). Needs
    /// five open zones with the metadata log; with fewer the two GC
    /// streams become one.
    #[default]
    Separated,
}

/// How user data reaches its zone.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Write commands at the write pointer, one outstanding per zone: a
    /// writer owns its open zone while it writes, so concurrent writers
    /// need one open zone each.
    #[default]
    Write,
    /// Zone Append: writers share each stream's open zone and keep several
    /// appends outstanding; the device picks the LBAs.
    Append,
}

/// Whether the metadata log uses the device's zone random write areas.
///
/// Where the log uses them (a device with ZRWAs, explicit commit, and a
/// window and metadata zones of whole flush-granularity units), it writes
/// its pages into the ZRWA of its zone, overlaps that write with the
/// device flush that must precede it (window blocks are never durable
/// until committed), and commits where the log must be durable. A commit
/// is whole flush-granularity units, so with a granularity `g` above one
/// block every synced persist pads the unit with up to `g − 1` empty
/// pages. See docs/ftl.md ("Zone random write areas") for what it costs
/// and saves.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZrwaUse {
    /// Plain writes at the write pointer (every device).
    Off,
    /// ZRWAs where they cost no device writes: a flush granularity of one
    /// block. Measured on the emulator: the same device writes, flushes
    /// 18 % faster.
    #[default]
    Auto,
    /// ZRWAs wherever the log can use them, padding commits to the flush
    /// granularity.
    On,
}

/// Configuration of an FTL.
///
/// Geometry (exposed capacity, metadata zones) is fixed at format and
/// stored on the device; the other fields may change from one open to the
/// next.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct FtlConfig {
    /// Over-provisioning: spare / exposed capacity. Spare is the capacity
    /// of the data zones minus the exposed capacity minus the zones that
    /// never hold invalid data (one per write head and the GC reserve); at
    /// least one zone of spare is always left. Used at format.
    pub op: f64,
    /// Victim selection.
    pub policy: VictimPolicy,
    /// Stream separation.
    pub streams: StreamLayout,
    /// Write commands or Zone Append.
    pub write_mode: WriteMode,
    /// Open zones per user stream (concurrent plain writers per stream).
    pub heads_per_stream: u32,
    /// Background GC starts when free zones fall to the GC reserve plus
    /// this many. The default, 0, collects just in time: free zones held
    /// above the reserve are spare space that holds no invalid data (at
    /// OP 7 %, `gc_low` 1 and `gc_high` 2 cost about 5 % more WAF); higher
    /// values trade WAF for fewer writes waiting for GC.
    pub gc_low: u32,
    /// Background GC stops when free zones reach the GC reserve plus this
    /// many (at least `gc_low + 1`; default 1).
    pub gc_high: u32,
    /// Relocate with the NVMe Copy command when the device has it.
    pub use_copy: bool,
    /// Store each data block's logical address in its per-LBA metadata
    /// when the device has separate metadata of at least 8 bytes (the
    /// reverse map kept with the data: `Ftl::check` verifies it). Costs a
    /// metadata transfer per write.
    pub tag_blocks: bool,
    /// At recovery, adopt the blocks written after the last durable log
    /// page that survived (by their tags, which need 16 bytes of metadata
    /// to carry a write sequence number): writes completed but not yet
    /// flushed are kept when the device kept them. Without it (or without
    /// such tags) recovery keeps exactly what the log names.
    pub rescan: bool,
    /// Metadata zones; `None` chooses from the checkpoint size. Used at
    /// format.
    pub meta_zones: Option<u32>,
    /// A user write is hot when the data it replaces lived shorter than
    /// this fraction of the exposed capacity (in blocks written).
    pub hot_threshold: f64,
    /// Depth of each I/O queue (outstanding appends per writer).
    pub queue_depth: u32,
    /// Most garbage-collection streams with separated streams (fewer when
    /// the open-zone budget leaves less room): GC writes the survivors of
    /// each victim to the stream of its estimated death-rate class.
    pub gc_streams: u32,
    /// Whether the metadata log writes into zone random write areas (an
    /// open option: nothing on the device depends on it; mounts with and
    /// without may take turns).
    pub zrwa: ZrwaUse,
}

impl Default for FtlConfig {
    fn default() -> Self {
        FtlConfig {
            op: 0.10,
            policy: VictimPolicy::default(),
            streams: StreamLayout::default(),
            write_mode: WriteMode::default(),
            heads_per_stream: 1,
            gc_low: 0,
            gc_high: 1,
            use_copy: true,
            tag_blocks: true,
            rescan: true,
            meta_zones: None,
            hot_threshold: 1.0,
            queue_depth: 16,
            gc_streams: 3,
            zrwa: ZrwaUse::Auto,
        }
    }
}

impl FtlConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(FtlError::Config(s));
        if !(self.op.is_finite() && self.op > 0.0 && self.op < 100.0) {
            return bad(format!("op {} (must be > 0)", self.op));
        }
        if self.heads_per_stream == 0 {
            return bad("heads_per_stream 0 (at least 1)".into());
        }
        if self.gc_high <= self.gc_low {
            return bad(format!("gc_high {} must exceed gc_low {}", self.gc_high, self.gc_low));
        }
        if !(self.hot_threshold.is_finite() && self.hot_threshold > 0.0) {
            return bad(format!("hot_threshold {} (must be > 0)", self.hot_threshold));
        }
        if self.queue_depth == 0 {
            return bad("queue_depth 0 (at least 1)".into());
        }
        if self.gc_streams == 0 {
            return bad("gc_streams 0 (at least 1)".into());
        }
        if self.meta_zones == Some(0) {
            return bad("meta_zones 0".into());
        }
        Ok(())
    }
}

/// Stream roles of user writes. (A zone records the role it was opened
/// for; GC zones record [`Role::gc_code`] of their class.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    UserHot,
    UserCold,
}

impl Role {
    /// The role code of zones opened for GC class `class` (0 = hottest).
    pub fn gc_code(class: usize) -> u32 {
        2 + class as u32
    }
}

/// Roles, indexed by `Role as usize`.
const ROLES: usize = 2;

/// Which stream each role writes to, and how many open zones each stream
/// may have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamPlan {
    /// Stream of each role, indexed by `Role as usize`.
    pub of_role: [usize; ROLES],
    /// Most open zones of each stream.
    pub max_heads: Vec<u32>,
    /// GC streams, hottest first: survivors of a victim go to the one of
    /// its death-rate class (see `gc::gc_class`).
    pub gc: Vec<usize>,
    /// Free zones only GC may take.
    pub reserve: u32,
    /// Names for statistics.
    pub names: Vec<String>,
}

impl StreamPlan {
    /// The plan for `config` when the FTL may keep `budget` zones open
    /// besides the metadata log's.
    pub fn new(config: &FtlConfig, budget: u32) -> Result<StreamPlan> {
        let h = config.heads_per_stream;
        let plan = match config.streams {
            StreamLayout::Single => StreamPlan {
                of_role: [0; ROLES],
                max_heads: vec![h],
                gc: vec![0],
                reserve: 2,
                names: vec!["log".into()],
            },
            StreamLayout::Separated => {
                // As many GC streams as the budget leaves room for, up to
                // `gc_streams`, at least one.
                let k = budget.saturating_sub(2 * h).clamp(1, config.gc_streams.max(1));
                // A victim's survivors all go to one GC stream, so GC needs
                // at most one new zone per victim (the reserve's first) and
                // gives it back; the second is the margin.
                let mut names: Vec<String> = vec!["user-hot".into(), "user-cold".into()];
                names.extend((0..k).map(|c| match (c, k) {
                    (_, 1) => "gc".to_string(),
                    (0, 2) => "gc-warm".to_string(),
                    (1, 2) => "gc-cold".to_string(),
                    _ => format!("gc-{c}"),
                }));
                let mut max_heads = vec![h, h];
                max_heads.extend((0..k).map(|_| 1));
                let gc: Vec<usize> = (2..2 + k as usize).collect();
                StreamPlan { of_role: [0, 1], max_heads, gc, reserve: 2, names }
            }
        };
        let need: u32 = plan.max_heads.iter().sum();
        if need > budget {
            return Err(FtlError::Config(format!(
                "the streams need {need} open zones but the device allows {budget} besides the \
                 metadata log's (lower heads_per_stream or use the single stream layout)"
            )));
        }
        Ok(plan)
    }

    /// Stream of `role`.
    pub fn stream(&self, role: Role) -> usize {
        self.of_role[role as usize]
    }

    /// For each stream, whether users and GC both write to it.
    pub fn shared_with_gc(&self) -> Vec<bool> {
        (0..self.max_heads.len())
            .map(|s| self.of_role.contains(&s) && self.gc.contains(&s))
            .collect()
    }

    /// Zones that never hold invalid blocks: one per write head (the
    /// frontier) and the GC reserve.
    pub fn slack(&self) -> u32 {
        self.max_heads.iter().sum::<u32>() + self.reserve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_fit_the_open_zone_budget() {
        let c = FtlConfig::default();
        let p = StreamPlan::new(&c, 13).unwrap();
        assert_eq!(p.max_heads, vec![1; 2 + c.gc_streams as usize]);
        assert_eq!((p.gc[0], p.reserve), (2, 2));
        assert_eq!(p.shared_with_gc(), vec![false; 2 + c.gc_streams as usize]);
        let p = StreamPlan::new(&FtlConfig { gc_streams: 20, ..c.clone() }, 13).unwrap();
        assert_eq!(p.gc.len(), 11, "as many GC streams as the budget allows");
        let p = StreamPlan::new(&c, 4).unwrap();
        assert_eq!((p.max_heads, p.gc), (vec![1, 1, 1, 1], vec![2, 3]));
        let p = StreamPlan::new(&c, 3).unwrap();
        assert_eq!((p.slack(), p.max_heads, p.gc), (3 + 2, vec![1, 1, 1], vec![2]));
        assert!(StreamPlan::new(&c, 2).is_err());
        let s = FtlConfig { streams: StreamLayout::Single, heads_per_stream: 4, ..c.clone() };
        let p = StreamPlan::new(&s, 4).unwrap();
        assert_eq!((p.of_role, p.slack()), ([0; ROLES], 4 + 2));
        assert_eq!(p.shared_with_gc(), vec![true]);
        assert!("greedy".parse::<VictimPolicy>().is_ok());
        assert!("lru".parse::<VictimPolicy>().is_err());
        assert!(FtlConfig { gc_low: 1, gc_high: 1, ..c.clone() }.validate().is_err());
        assert!(FtlConfig { op: 0.0, ..c.clone() }.validate().is_err());
        assert!(FtlConfig { gc_streams: 0, ..c.clone() }.validate().is_err());
        c.validate().unwrap();
    }
}
