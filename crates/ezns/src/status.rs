//! A snapshot of an instance for `zns ezns status`: tenants, their
//! budgets and loans, their open logical zones' stripes, the scheduler's
//! windows.

use std::fmt;
use std::sync::atomic::Ordering::*;

use serde::Serialize;

use crate::runtime::Ezns;

/// One logical zone's stripe.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct StripeStatus {
    /// Logical zone index.
    pub zone: u32,
    /// Zone state.
    pub state: String,
    /// Write pointer (zone offset, blocks).
    pub wp: u64,
    /// Stripe groups so far.
    pub groups: usize,
    /// Width of the current group.
    pub width: usize,
    /// Stripe unit in blocks.
    pub unit: u64,
    /// Columns of the current group on other tenants' spares.
    pub borrowed: usize,
    /// First die of each column of the current group.
    pub dies: Vec<u32>,
    /// Read congestion window (reads in flight allowed).
    pub read_window: f64,
    /// Reads in flight.
    pub reads_in_flight: u32,
}

/// One tenant.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct TenantStatus {
    /// Name.
    pub name: String,
    /// Logical zones.
    pub zones: u32,
    /// Max active logical zones.
    pub active_zones: u32,
    /// Essential physical active zones.
    pub essential: u32,
    /// Spare physical active zones.
    pub spare: u32,
    /// Width every active logical zone is guaranteed.
    pub essential_width: u32,
    /// Width a new group would aim at now.
    pub target_width: u32,
    /// Open logical zones.
    pub open: u32,
    /// Active logical zones.
    pub active: u32,
    /// Average open logical zones.
    pub avg_open: f64,
    /// Physical active zones held on its own budget.
    pub held: u32,
    /// Its spares held by other tenants.
    pub lent: u32,
    /// Other tenants' spares it holds.
    pub borrowed: u32,
    /// Returned spares it still holds unfinished (parked), on its budget.
    pub parked: u32,
    /// Marked inactive (its spares are lendable).
    pub inactive: bool,
    /// Times its lent spares were taken back.
    pub reclaims: u64,
    /// Write commands and MiB written.
    pub writes: u64,
    /// MiB written.
    pub write_mib: f64,
    /// Read commands.
    pub reads: u64,
    /// MiB read.
    pub read_mib: f64,
    /// Its open or closed logical zones.
    pub stripes: Vec<StripeStatus>,
}

/// An instance.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Base device URI.
    pub device: String,
    /// `elastic` or `static`.
    pub mode: &'static str,
    /// Device time (ns).
    pub now_ns: u64,
    /// Physical active zones the tenants may hold together.
    pub device_limit: u32,
    /// Physical active zones held.
    pub device_active: u32,
    /// Free physical zones.
    pub free_zones: u64,
    /// Physical zones the logical zones that are not full still need to
    /// reach their capacity at width one; only the free zones beyond
    /// these go to wider groups.
    pub reserved_zones: u64,
    /// Dies and dies per zone the allocator assumes.
    pub dies: u32,
    /// Dies per physical zone.
    pub zone_dies: u32,
    /// Spare columns lent so far.
    pub loans: u64,
    /// Write admission window (KiB) and bytes in flight (KiB).
    pub write_window_kib: u64,
    /// Write KiB in flight.
    pub write_inflight_kib: u64,
    /// Average write latency (µs).
    pub write_latency_us: f64,
    /// The write latency target now (µs): fixed, or the measured
    /// uncongested latency times the configured factor (0 before any
    /// write).
    pub write_target_us: f64,
    /// The measured uncongested write latency (µs; 0 before any write).
    pub write_baseline_us: f64,
    /// Journal zone, generation and blocks written in it.
    pub journal: (u32, u64, u64),
    /// Internal commands that failed.
    pub internal_failures: u64,
    /// Finish commands sent to the base device so far (each may pad the
    /// rest of a physical zone).
    pub internal_finishes: u64,
    /// Blocks the finishes sent so far left for the device to pad: each
    /// physical zone's capacity less the blocks it held. On a drive that
    /// pads (the ZN540 programs the rest of a finished zone) these are
    /// written beside the tenants' data.
    pub internal_padded_blocks: u64,
    /// Journal and checkpoint blocks written since the instance opened:
    /// with the padding, what eZNS writes beyond the tenants' data.
    pub journal_blocks_written: u64,
    /// Internal work queued or in flight (journal entries, finishes and
    /// resets of physical zones).
    pub internal_pending: u64,
    /// Internal commands whose completions a pump took (the background
    /// thread, or `Instance::pump`) rather than a tenant queue's poll:
    /// work that fell due while every tenant was idle.
    pub internal_pumped: u64,
    /// Tenants.
    pub tenants: Vec<TenantStatus>,
}

pub(crate) fn snapshot(ez: &Ezns) -> Status {
    let mib = |blocks: u64| blocks as f64 * ez.geo.bs as f64 / (1 << 20) as f64;
    let (journal, failures, finishes, padded, journal_blocks, pending) = {
        let c = ez.ctl.lock();
        (
            (c.journal.zones[c.journal.cur], c.journal.generation, c.journal.seq),
            c.failures,
            c.finishes,
            c.padded,
            c.journal_blocks,
            c.work(),
        )
    };
    let arb = ez.arb.lock();
    let map = arb.alloc.map();
    let tenants = ez
        .tenants
        .iter()
        .enumerate()
        .map(|(t, ten)| {
            let b = &arb.tenants[t];
            let stripes = ten
                .zones
                .iter()
                .filter(|z| z.state().is_active())
                .map(|z| {
                    let m = z.map.load();
                    let last = m.last();
                    StripeStatus {
                        zone: z.index,
                        state: z.state().to_string(),
                        wp: z.wp(),
                        groups: m.len(),
                        width: last.map_or(0, |g| g.layout.width()),
                        unit: last.map_or(ez.geo.unit, |g| g.layout.unit),
                        borrowed: last.map_or(0, |g| {
                            g.layout.cols.iter().filter(|c| c.budget as usize != t).count()
                        }),
                        dies: last.map_or(Vec::new(), |g| {
                            g.layout.cols.iter().map(|c| map.first_die(c.zone)).collect()
                        }),
                        read_window: z.rcc.window(),
                        reads_in_flight: z.rcc.inflight(),
                    }
                })
                .collect();
            TenantStatus {
                name: ten.name.clone(),
                zones: ten.zones.len() as u32,
                active_zones: b.active_zones,
                essential: b.essential,
                spare: b.spare,
                essential_width: b.essential_width(),
                target_width: arb.target_width(t),
                open: b.open,
                active: b.active,
                avg_open: b.avg_open,
                held: b.held,
                lent: b.lent,
                borrowed: b.borrowed,
                parked: arb.parked_of(t),
                inactive: b.inactive,
                reclaims: b.reclaims,
                writes: ten.stats.writes.load(Relaxed),
                write_mib: mib(ten.stats.write_blocks.load(Relaxed)),
                reads: ten.stats.reads.load(Relaxed),
                read_mib: mib(ten.stats.read_blocks.load(Relaxed)),
                stripes,
            }
        })
        .collect();
    Status {
        device: ez.base.info().uri.clone(),
        mode: ez.config.mode.name(),
        now_ns: ez.now(),
        device_limit: arb.device_limit,
        device_active: arb.device_active,
        free_zones: arb.alloc.free_count(),
        reserved_zones: ez.reserved_zones(),
        dies: map.dies,
        zone_dies: map.zone_dies,
        loans: arb.loans,
        write_window_kib: ez.wadm.window() / 1024,
        write_inflight_kib: ez.wadm.inflight() / 1024,
        write_latency_us: ez.wadm.avg_latency_ns() as f64 / 1000.0,
        write_target_us: ez.wadm.target_ns() as f64 / 1000.0,
        write_baseline_us: ez.wadm.baseline_ns() as f64 / 1000.0,
        journal,
        internal_failures: failures,
        internal_finishes: finishes,
        internal_padded_blocks: padded,
        journal_blocks_written: journal_blocks,
        internal_pending: pending,
        internal_pumped: ez.pumped.load(Relaxed),
        tenants,
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "eZNS ({}) on {}", self.mode, self.device)?;
        writeln!(
            f,
            "active physical zones {}/{} held, {} free zones ({} needed by logical zones), {} dies ({} per zone), {} spare columns lent so far, {} internal commands pending ({} taken by the pump), {} failed, {} finishes sent ({} blocks padded), {} returned spares parked",
            self.device_active,
            self.device_limit,
            self.free_zones,
            self.reserved_zones,
            self.dies,
            self.zone_dies,
            self.loans,
            self.internal_pending,
            self.internal_pumped,
            self.internal_failures,
            self.internal_finishes,
            self.internal_padded_blocks,
            self.tenants.iter().map(|t| t.parked).sum::<u32>()
        )?;
        writeln!(
            f,
            "write admission: window {} KiB, {} KiB in flight, average write latency {:.1} us (target {:.1} us, baseline {:.1} us); journal zone {} generation {} ({} blocks; {} written since opened)",
            self.write_window_kib,
            self.write_inflight_kib,
            self.write_latency_us,
            self.write_target_us,
            self.write_baseline_us,
            self.journal.0,
            self.journal.1,
            self.journal.2,
            self.journal_blocks_written
        )?;
        writeln!(
            f,
            "{:<12} {:>5} {:>9} {:>6} {:>6} {:>9} {:>11} {:>5} {:>5} {:>5} {:>8} {:>9}",
            "tenant",
            "zones",
            "open/act",
            "ess",
            "spare",
            "ess/tgt w",
            "held",
            "lent",
            "borr",
            "state",
            "writes",
            "MiB"
        )?;
        for t in &self.tenants {
            writeln!(
                f,
                "{:<12} {:>5} {:>4}/{:<4} {:>6} {:>6} {:>4}/{:<4} {:>11} {:>5} {:>5} {:>5} {:>8} {:>9.1}",
                t.name,
                t.zones,
                t.open,
                t.active,
                t.essential,
                t.spare,
                t.essential_width,
                t.target_width,
                t.held,
                t.lent,
                t.borrowed,
                if t.inactive { "idle" } else { "busy" },
                t.writes,
                t.write_mib
            )?;
            for s in &t.stripes {
                writeln!(
                    f,
                    "  zone {:>5} {:<16} wp {:>10} groups {:>3} width {:>3} (borrowed {:>2}) read window {:>5.1} ({} in flight) dies {:?}",
                    s.zone, s.state, s.wp, s.groups, s.width, s.borrowed, s.read_window, s.reads_in_flight, s.dies
                )?;
            }
        }
        Ok(())
    }
}
