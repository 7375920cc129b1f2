//! The profile in the units the simulation uses, and the time data takes
//! to cross a link or a channel.

use crate::timing::profile::TimingProfile;

/// Memory page size for PRP purposes.
const MEMORY_PAGE: u64 = 4096;

/// The profile in the units the simulation uses (nanoseconds, bytes).
#[derive(Debug, Clone)]
pub(super) struct Params {
    pub(super) fetch: u64,
    pub(super) post: u64,
    pub(super) to_host_mbps: u64,
    pub(super) from_host_mbps: u64,
    pub(super) prp_list: u64,
    pub(super) to_host_command: u64,
    pub(super) to_host_list: u64,
    pub(super) units: usize,
    pub(super) read: u64,
    pub(super) write: u64,
    pub(super) write_overlap: u64,
    pub(super) append: u64,
    pub(super) append_overlap: u64,
    pub(super) append_serial: u64,
    /// Per logical block of a Write or Zone Append, for blocks under 4 KiB.
    pub(super) small_lba: u64,
    pub(super) implicit_open: u64,
    pub(super) zone_switch: u64,
    pub(super) flush: u64,
    pub(super) other: u64,
    pub(super) report: u64,
    pub(super) open: u64,
    pub(super) close: u64,
    pub(super) close_buffered: u64,
    pub(super) finish: u64,
    pub(super) reset: u64,
    pub(super) reset_metadata: u64,
    pub(super) housekeeping_fraction: f64,
    pub(super) housekeeping_mean: u64,
    pub(super) channels: u32,
    pub(super) dies: u32,
    pub(super) stripe: u32,
    pub(super) channel_mbps: u64,
    pub(super) channel_overhead: u64,
    /// Bytes sensed at once (a page on every plane).
    pub(super) sense_bytes: u64,
    /// Bytes of one flash page (one plane's share of a page group).
    pub(super) page: u64,
    /// Planes per die.
    pub(super) planes: u32,
    pub(super) read_levels: Vec<u64>,
    pub(super) program: u64,
    pub(super) program_variation: f64,
    pub(super) block_open: u64,
    /// Management work when a zone's writes enter a new stripe of erase
    /// blocks (not its first).
    pub(super) stripe_open: u64,
    pub(super) suspend: u64,
    pub(super) suspend_limit: u32,
    pub(super) erase_suspend: u64,
    pub(super) erase_suspend_limit: u32,
    /// Erase progress between suspends (ns).
    pub(super) erase_resume_min: u64,
    pub(super) erase: u64,
    pub(super) erase_variation: f64,
    pub(super) close_block: u64,
    /// Program unit bytes.
    pub(super) unit: u64,
    /// Program units per erase block.
    pub(super) units_per_block: u64,
    /// Bytes of the unit a zone's data rotates over its dies in.
    pub(super) chunk: u64,
    /// Stripe rows each program unit of a zone gathers its data from
    /// (program unit / `chunk`; 1: a program unit holds consecutive data).
    pub(super) rows: u64,
    pub(super) buffer: u64,
}

impl Params {
    pub(super) fn new(p: &TimingProfile) -> Self {
        let us = |v: u64| v.saturating_mul(1000);
        Params {
            fetch: p.fetch_ns,
            post: p.post_ns,
            to_host_mbps: p.link_to_host_mbps,
            from_host_mbps: p.link_from_host_mbps,
            prp_list: p.prp_list_ns,
            to_host_command: p.link_to_host_command_ns,
            to_host_list: p.link_to_host_list_ns,
            units: p.processing_units as usize,
            read: p.read_ns,
            write: p.write_ns,
            write_overlap: p.write_overlap_ns,
            append: p.append_ns,
            append_overlap: p.append_overlap_ns,
            append_serial: p.append_serial_ns,
            small_lba: p.small_lba_ns,
            implicit_open: p.implicit_open_ns,
            zone_switch: p.zone_switch_ns,
            flush: p.flush_ns,
            other: p.other_ns,
            report: p.report_ns,
            open: p.open_ns,
            close: p.close_ns,
            close_buffered: p.close_buffered_ns,
            finish: p.finish_ns,
            reset: p.reset_ns,
            reset_metadata: us(p.reset_metadata_us),
            housekeeping_fraction: p.housekeeping_fraction,
            housekeeping_mean: p.housekeeping_mean_ns,
            channels: p.channels,
            dies: p.dies(),
            stripe: p.zone_stripe_dies,
            channel_mbps: p.channel_mbps,
            channel_overhead: p.channel_overhead_ns,
            sense_bytes: p.page_kib as u64 * 1024 * p.planes as u64,
            page: p.page_kib as u64 * 1024,
            planes: p.planes,
            read_levels: p.read_us.iter().map(|t| (t * 1000.0).round() as u64).collect(),
            program: us(p.program_us),
            program_variation: p.program_variation,
            block_open: us(p.block_open_us),
            stripe_open: us(p.stripe_open_us),
            suspend: us(p.suspend_us),
            suspend_limit: p.suspend_limit,
            erase_suspend: p
                .erase_suspend_us
                .map_or(us(p.suspend_us), |t| (t * 1000.0).round() as u64),
            erase_suspend_limit: p.erase_suspend_limit.unwrap_or(p.suspend_limit),
            erase_resume_min: p.erase_resume_min_us.map_or(0, |t| (t * 1000.0).round() as u64),
            erase: us(p.erase_us),
            erase_variation: p.erase_variation,
            close_block: us(p.close_block_us),
            unit: p.program_unit_bytes(),
            units_per_block: (p.block_kib as u64 * 1024 / p.program_unit_bytes()).max(1),
            chunk: p.stripe_unit_bytes(),
            rows: (p.program_unit_bytes() / p.stripe_unit_bytes()).max(1),
            buffer: p.write_buffer_kib as u64 * 1024,
        }
    }
}

/// Nanoseconds to move `bytes` at `mbps` (10^6 bytes per second).
#[inline]
pub(super) fn xfer(bytes: u64, mbps: u64) -> u64 {
    (bytes.saturating_mul(1000)).div_ceil(mbps.max(1))
}

/// Whether a transfer of `bytes` needs a PRP list (more than two pages).
#[inline]
pub(super) fn needs_prp_list(bytes: u64) -> bool {
    bytes.div_ceil(MEMORY_PAGE) > 2
}
