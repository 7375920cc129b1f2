//! Statistics: what users asked for, what reached the device, and what
//! garbage collection cost.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running counters, updated with relaxed atomics.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_blocks_written: AtomicU64,
    pub user_blocks_read: AtomicU64,
    pub user_writes: AtomicU64,
    pub user_reads: AtomicU64,
    pub user_flushes: AtomicU64,
    pub blocks_discarded: AtomicU64,
    pub data_blocks_written: AtomicU64,
    pub gc_blocks_copied: AtomicU64,
    pub gc_blocks_discarded_copies: AtomicU64,
    pub gc_copy_commands: AtomicU64,
    pub gc_victims: AtomicU64,
    pub gc_nanos: AtomicU64,
    pub meta_blocks_written: AtomicU64,
    pub checkpoints: AtomicU64,
    pub device_flushes: AtomicU64,
    pub zone_resets: AtomicU64,
    pub zone_finishes: AtomicU64,
    pub rescanned_zones: AtomicU64,
    pub rescued_blocks: AtomicU64,
    pub resumed_zones: AtomicU64,
    pub damaged_reads: AtomicU64,
    pub gc_damaged_blocks: AtomicU64,
    pub zrwa_commits: AtomicU64,
    pub zrwa_pad_blocks: AtomicU64,
}

impl Counters {
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Zones in each pool.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolCounts {
    /// Empty zones ready to write.
    pub free: usize,
    /// Zones a stream is writing.
    pub open: usize,
    /// Zones completely written (GC candidates).
    pub full: usize,
    /// Zones being reclaimed.
    pub victim: usize,
    /// Zones of the metadata log.
    pub meta: usize,
    /// Read-only or offline zones.
    pub unusable: usize,
}

/// A snapshot of an FTL's statistics.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FtlStats {
    /// Blocks the FTL exposes.
    pub logical_blocks: u64,
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks users wrote.
    pub user_blocks_written: u64,
    /// Blocks users read.
    pub user_blocks_read: u64,
    /// Write requests.
    pub user_writes: u64,
    /// Read requests.
    pub user_reads: u64,
    /// Flush requests.
    pub user_flushes: u64,
    /// Blocks discarded.
    pub blocks_discarded: u64,
    /// Data blocks written to the device (user data plus GC copies).
    pub data_blocks_written: u64,
    /// Blocks GC relocated.
    pub gc_blocks_copied: u64,
    /// GC copies that were overwritten while being relocated.
    pub gc_blocks_discarded_copies: u64,
    /// Copy commands GC issued (0 when relocating by read and write).
    pub gc_copy_commands: u64,
    /// Zones GC reclaimed.
    pub gc_victims: u64,
    /// Time GC spent relocating and resetting, in seconds.
    pub gc_seconds: f64,
    /// Metadata blocks written (log pages, checkpoints, zone headers).
    pub meta_blocks_written: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Flush commands sent to the device.
    pub device_flushes: u64,
    /// Zone resets.
    pub zone_resets: u64,
    /// Zone finishes: half-written zones closed out at recovery (those the
    /// streams could not take as heads), and open zones GC closed out when
    /// no full zone had an invalid block.
    pub zone_finishes: u64,
    /// Zones recovery rescanned by their block tags (this mount).
    pub rescanned_zones: u64,
    /// Blocks recovery adopted by their tags: written after the last
    /// durable log page and kept by the device (this mount).
    pub rescued_blocks: u64,
    /// Half-written zones recovery kept open to be written on (this
    /// mount); the others it finished.
    pub resumed_zones: u64,
    /// Reads refused because a block failed its data checksum.
    pub damaged_reads: u64,
    /// Damaged blocks GC moved (their copies still fail their check).
    pub gc_damaged_blocks: u64,
    /// Commits of the metadata log's zone random write area (Flush
    /// Explicit ZRWA Range commands; see [`crate::ZrwaUse`]).
    pub zrwa_commits: u64,
    /// Empty log pages written to complete a flush-granularity unit
    /// before those commits (counted in `meta_blocks_written` too).
    pub zrwa_pad_blocks: u64,
    /// Times a user write waited for GC to free a zone.
    pub user_waits: u64,
    /// Write amplification of data: device data blocks / user blocks.
    pub waf: f64,
    /// Write amplification counting metadata too.
    pub waf_total: f64,
    /// Zones per pool.
    pub pools: PoolCounts,
    /// Blocks valid on the device (mapped logical blocks).
    pub valid_blocks: u64,
    /// Invalid blocks in full and open zones: the spare space garbage
    /// collection works with (free zones and unwritten space excluded).
    pub invalid_blocks: u64,
    /// Heap bytes of the map (L2P, P2L, valid counts, update history).
    pub map_bytes: usize,
    /// Map bytes per exposed block.
    pub map_bytes_per_block: f64,
}
