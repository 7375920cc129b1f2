//! `cargo xtask apps`: RocksDB's `db_bench` (Debian's rocksdb-tools) and
//! MariaDB with sysbench (Debian's mariadb-server and sysbench) in a QEMU
//! guest on Debian's generic kernel, on f2fs over an emulated ZNS drive
//! and on ext4 (and XFS) over its conventional twin, both reached through
//! the kernel's nvme-tcp from `zns serve` on the host.
//!
//! The two devices are the ZN540's timing model (controller, NAND, write
//! buffer; on the real clock, as `zns serve` runs timed devices) with the
//! zones cut down: [`ZONES`] zones of 4 MiB whose capacity is 3 MiB (one
//! stripe of the ZN540's 32 dies), 480 MiB of flash, and the same flash
//! behind a page-mapped FTL with greedy garbage collection and 7 % spare
//! (the conventional twin, 448.6 MiB exposed). Each is served by a `zns
//! serve` of its own, so each controller's SMART log counts one stack's
//! writes; the ZNS side's target also exports a small conventional drive
//! of the twin's model as f2fs's metadata namespace ([`meta_profile`]).
//!
//! On each side the guest (preconditions the conventional namespace by
//! writing it whole,) makes the filesystem, writes a filler file so that
//! the filler and the database together reach the fill ratio asked for,
//! then runs db_bench's fillrandom, overwrite and readwhilewriting, then
//! (the RocksDB database removed) initialises a MariaDB data directory,
//! loads sysbench's tables and runs its OLTP workloads
//! ([`crate::apps_mysql`]), reading around each phase the sectors the
//! kernel wrote to each
//! namespace, the controller's SMART data units written and its OCP
//! extended SMART log's media bytes written (their ratio is the device's
//! write amplification), the filesystem's use and f2fs's garbage
//! collection counters. The host writes `apps.json`, `apps.svg` and a
//! markdown table, and with `--docs` puts them in `docs/` (the table into
//! `docs/apps.md`).
//!
//! `--smoke`: fillrandom only, a small database, no filler, no
//! preconditioning, one short sysbench oltp_read_write on a small table,
//! on f2fs-zns and ext4-conv; it fails unless both runs finish and every
//! figure it reports is there.
//!
//! Every run times a CPU-bound probe on the host and in the guest
//! (`apps.json`: `clock`). `--dilation F` serves the devices on a clock
//! dilated F times; `--dilations F1,F2` runs the whole comparison at each
//! factor and compares the ratios ([`crate::apps_dilation`]). `--tenants`
//! replaces the stacks by four eZNS tenants against static zones
//! ([`crate::apps_tenants`]).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plotters::prelude::*;
use serde_json::{json, Value};

use clap::Parser;

use crate::apps_dilation;
use crate::apps_guest::{self, Collected, Side, Workload};
use crate::apps_mysql::{self, Sysbench};
use crate::apps_tenants::{self, TenantWorkload};
use crate::apps_tenants_plot;
use crate::args::{self, GuestArgs, List};
use crate::guest_clock;
use crate::kernel::Flavour;
use crate::probe::HostProbe;
use crate::server::{build_zns, Server};
use crate::vmtest::GuestEntry;
use crate::vmtest::{self, Options as VmOptions};
use crate::{kernel, Error, Result};

/// Zones of each device (4 MiB, capacity 3 MiB).
pub const ZONES: u32 = 160;

/// The ZNS side's subsystem.
pub const NQN_ZNS: &str = "nqn.2026-11.io.znskit:apps-zns";
/// The conventional side's subsystem.
pub const NQN_CONV: &str = "nqn.2026-11.io.znskit:apps-conv";

/// The ZN540's profile, whose timing model both devices take.
const ZN540: &str = include_str!("../../emulator/profiles/zn540.toml");

/// Kernel modules: f2fs's (with the crc32 it asks for by a soft
/// dependency), ext4, and a crc32c before anything needing libcrc32c
/// (which fails to load without one); XFS's when asked for.
const MODULES: &[&str] = &[
    "mq-deadline",
    "nvme-core",
    "nvme-tcp",
    "virtio_pci",
    "virtio_net",
    "crc32_generic",
    "crc32c_generic",
    "f2fs",
    "ext4",
];

/// Host programs packed into the guest with their libraries.
const TOOLS: &[(&str, &str)] = &[
    ("nvme", "nvme-cli"),
    ("db_bench", "rocksdb-tools"),
    ("mkfs.f2fs", "f2fs-tools"),
    ("mke2fs", "e2fsprogs"),
    ("mkfs.xfs", "xfsprogs"),
];

/// MariaDB's server and sysbench, packed when MariaDB runs.
const MYSQL_TOOLS: &[(&str, &str)] = &[("mariadbd", "mariadb-server"), ("sysbench", "sysbench")];

/// Where Debian's sysbench keeps its Lua workloads.
const SYSBENCH_LUA: &str = "/usr/share/sysbench";

/// Options of the task.
#[derive(Debug, Clone)]
pub struct Options {
    vm: VmOptions,
    smoke: bool,
    fs: Vec<String>,
    workload: Workload,
    mysql: Option<Sysbench>,
    zones: u32,
    out: Option<PathBuf>,
    docs: bool,
    zns: Option<PathBuf>,
    tenants: Option<TenantWorkload>,
    dilations: Vec<f64>,
    /// `--repeat`: runs per factor of `--dilations`.
    repeat: u32,
    /// `--pool`: earlier dilation reports whose runs are compared together.
    pool: Vec<PathBuf>,
    /// `--guest-clock`: the guest's clock dilated with the devices'.
    guest_clock: bool,
    /// `--replot`: draw this report's plot instead of running.
    replot: Option<PathBuf>,
    /// `--trace`: the events each emulated data drive's trace keeps.
    trace: Option<u64>,
}

/// RocksDB and MariaDB in a guest: f2fs over a ZNS model, ext4/XFS over its twin;
/// eZNS tenants (--tenants); two dilations (--dilations F1,F2)
///
/// RocksDB's db_bench (Debian's rocksdb-tools) and MariaDB with sysbench (Debian's
/// mariadb-server, sysbench) in a QEMU guest on Debian's generic kernel: db_bench's
/// fillrandom, overwrite and readwhilewriting, then sysbench's oltp_read_only,
/// oltp_write_only and oltp_read_write, on f2fs over an emulated ZNS drive (the
/// ZN540's timing model, zones cut down) and on ext4 (and XFS) over its
/// conventional twin (the same NAND behind a device-side FTL), both through the
/// kernel's nvme-tcp to `zns serve`. Throughput and tails (db_bench: p99, p99.9;
/// sysbench: transactions/s, p95, p99), bytes the host wrote, the controllers'
/// SMART data units written and media bytes written (OCP log C0h), the device WAF
/// they give, f2fs's GC.
#[derive(Debug, Clone, Parser)]
#[command(
    verbatim_doc_comment,
    args_override_self = true,
    mut_arg("kernel", args::generic_kernel),
    mut_arg("timeout", |a| a
        .default_value(None::<&str>)
        .help("Give the guest this long, seconds (default 2700; --smoke 720)")),
    mut_arg("smp", |a| a
        .default_value(None::<&str>)
        .help("The guest's CPUs (default 2; --tenants 4, one per tenant)"))
)]
pub struct Args {
    /// Fillrandom only, a small database, no filler, one short sysbench
    /// oltp_read_write, f2fs-zns and ext4-conv; fails unless both runs give
    /// every figure
    #[arg(long, verbatim_doc_comment)]
    smoke: bool,
    /// rocksdb, mysql or both, comma separated.
    #[arg(long, value_name = "LIST", default_value_t = List::of(APPS), value_parser = apps)]
    apps: List<String>,
    /// The conventional side's filesystems, comma separated: ext4, xfs
    /// (default ext4,xfs; --smoke: ext4)
    #[arg(long, value_name = "LIST", verbatim_doc_comment, value_parser = filesystems)]
    fs: Option<List<String>>,
    /// Keys written and overwritten (default 65536; --smoke 8192).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    num: Option<u64>,
    /// Value bytes.
    #[arg(long, value_name = "B", allow_negative_numbers = true, default_value_t = 1000)]
    value_size: u32,
    /// Filesystem use aimed at before overwrite, filler file included,
    /// percent of the space free after mkfs, at most 95 (default 55;
    /// --smoke 0)
    #[arg(long, value_name = "PCT", verbatim_doc_comment, allow_negative_numbers = true)]
    fill: Option<u32>,
    /// db_bench (the tenants' too) bound to the device: every write waits
    /// for an fsync of its WAL record (--sync=1), reads bypass the page
    /// cache and the block cache (--use_direct_reads, --cache_size=0);
    /// MariaDB restarted before each sysbench workload (its dirty pages
    /// written first); the workload a dilation check needs
    #[arg(long, verbatim_doc_comment)]
    device_bound: bool,
    /// Seconds of readwhilewriting, 0 skips it (default 30; --smoke 0).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    rww_seconds: Option<u32>,
    /// Do not write the conventional namespace whole before mkfs.
    #[arg(long)]
    no_precondition: bool,
    /// Zones of each device, at least 16 (160: 480 MiB of flash).
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = ZONES)]
    zones: u32,
    /// db_bench's and sysbench's seed (default: from the clock).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// sysbench's tables (default 4; --smoke 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    sb_tables: Option<u32>,
    /// Rows of each (default 25000; --smoke 5000).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    sb_table_size: Option<u32>,
    /// Seconds of each sysbench workload (default 30; --smoke 5).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    sb_seconds: Option<u32>,
    /// Transactions of each sysbench workload instead of --sb-seconds
    /// (default with --guest-clock: 200)
    #[arg(long, value_name = "N", verbatim_doc_comment, value_parser = clap::value_parser!(u32).range(1..))]
    sb_events: Option<u32>,
    /// sysbench's client threads.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 4)]
    sb_threads: u32,
    /// read_only, write_only, read_write, update_non_index (one UPDATE
    /// per transaction, device-bound at one thread), comma separated
    /// (default the first three; --smoke read_write)
    #[arg(long, value_name = "LIST", verbatim_doc_comment, value_parser = sb_workloads)]
    sb_workloads: Option<List<&'static str>>,
    /// InnoDB's buffer pool, MiB, at least 8.
    #[arg(long, value_name = "MIB", allow_negative_numbers = true, default_value_t = 16)]
    buffer_pool: u32,
    /// Where apps.json, apps.svg, apps-table.md go (default target/apps,
    /// target/apps-smoke with --smoke)
    #[arg(long, value_name = "DIR", verbatim_doc_comment)]
    out: Option<PathBuf>,
    /// After a run without failures also write docs/apps.json,
    /// docs/apps.svg and the table in docs/apps.md (with --tenants:
    /// docs/apps-tenants.json and its table; with --dilations:
    /// docs/apps-dilations.json, or docs/apps-tenants-dilations.json with
    /// --tenants, and its table)
    #[arg(long, verbatim_doc_comment)]
    docs: bool,
    /// Serve with this `zns` binary instead of building one.
    #[arg(long, value_name = "PATH")]
    zns: Option<PathBuf>,
    /// Instead of the stacks above: four tenants as the namespaces of one
    /// `zns serve`, eZNS logical zones against static striping over the
    /// same ZN540 model (a target each), an f2fs and db_bench per tenant,
    /// all four at once: fill, overwrite together, overwrite by one alone
    /// (ballooning), reads alone and beside three writers (isolation);
    /// throughput, p99, p99.9 per tenant (results in target/apps-tenants)
    #[arg(long, verbatim_doc_comment, help_heading = "Tenants (eZNS)")]
    tenants: bool,
    /// Keys each tenant fills (default 8192; --smoke 4096).
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Tenants (eZNS)")]
    tn_num: Option<u64>,
    /// Seconds of each timed phase (default 20; --smoke 8).
    #[arg(long, value_name = "S", allow_negative_numbers = true, help_heading = "Tenants (eZNS)")]
    tn_seconds: Option<u32>,
    /// Operations of each tenant in each timed phase instead of
    /// --tn-seconds (default with --guest-clock: 1024)
    #[arg(long, value_name = "N", verbatim_doc_comment, conflicts_with = "tn_seconds",
          value_parser = clap::value_parser!(u64).range(1..), help_heading = "Tenants (eZNS)")]
    tn_ops: Option<u64>,
    /// Physical zones per logical zone (eZNS's zone_scale: 1, 2, 4 or 8;
    /// default 8, the widest group, so groups fill whole physical zones);
    /// the tenants' capacity stays 1,152 MiB
    #[arg(long, value_name = "N", verbatim_doc_comment, help_heading = "Tenants (eZNS)",
          value_parser = zone_scale)]
    tn_zone_scale: Option<u32>,
    /// KiB the base drive's zones rotate over its 32 dies in (a divisor
    /// of the 96 KiB program unit; default 96: a zone keeps at most one
    /// unit unprogrammed; 32, the zn540 profile's, stages a whole 3 MiB
    /// stripe, which is all of a cut-down zone until it is full, so reads
    /// of a tenant's recent data come from the drive's buffer)
    #[arg(long, value_name = "KIB", verbatim_doc_comment, help_heading = "Tenants (eZNS)",
          value_parser = stripe_kib)]
    tn_stripe_kib: Option<u32>,
    /// MiB tenant `a` writes, then deletes, through each of its f2fs's
    /// data logs (warm, cold, hot) before the read phases, once db_bench
    /// has compacted its database whole, so the database is read from
    /// the dies, not from the units the overwrite just before left in the
    /// drive's staging (default 4; 0 leaves out the compaction and the
    /// filler both)
    #[arg(long, value_name = "MIB", verbatim_doc_comment, help_heading = "Tenants (eZNS)")]
    tn_filler_mib: Option<u32>,
    /// Serve every device on a clock dilated F times (F >= 1): each
    /// modelled duration lasts F times longer, for a guest F times slower
    /// than the machine the model stands for; the guest's slowdown is
    /// measured by a CPU-bound probe in the same run (apps.json: clock)
    #[arg(long, value_name = "F", verbatim_doc_comment, value_parser = dilation,
          overrides_with = "dilations", help_heading = "Dilated clock")]
    dilation: Option<f64>,
    /// Run the whole comparison at each factor and report, per phase, each
    /// factor's ZNS/conventional ratio (eZNS/static with --tenants) and
    /// whether they agree within 10 % (results in target/apps-dilations)
    #[arg(long, value_name = "F1,F2", verbatim_doc_comment, value_parser = dilations,
          overrides_with = "dilation", help_heading = "Dilated clock")]
    dilations: Option<List<f64>>,
    /// Run the comparison N times at each factor of --dilations (in
    /// turn: F1, F2, F1, F2, ...) and compare the factors' means, with
    /// each ratio's run-to-run spread beside them; with --dilation, N
    /// runs at that factor and their spread
    #[arg(long, value_name = "N", verbatim_doc_comment, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..),
          help_heading = "Dilated clock")]
    repeat: u32,
    /// Run nothing: compare the runs of earlier dilation reports
    /// (apps-dilations.json or apps-tenants-dilations.json) together,
    /// grouped by factor, as --repeat does (results in --out); with
    /// --dilations, only the runs at those factors, in that order
    #[arg(long, value_name = "FILE", num_args = 1.., verbatim_doc_comment,
          conflicts_with_all = ["dilation", "replot", "repeat", "guest_clock"],
          help_heading = "Dilated clock")]
    pool: Vec<PathBuf>,
    /// Dilate the guest's clock with the devices' (with --dilation or
    /// --dilations): QEMU runs under libfaketime at 1/F of real time, so
    /// what the guest's clock paces (writeback, InnoDB's page cleaner,
    /// the benchmarks' own timing) keeps the devices' pace too. Timed
    /// phases last F times longer in real time: sysbench runs
    /// --sb-events transactions instead, the tenants --tn-ops
    /// operations, and --rww-seconds is the guest's seconds
    #[arg(long, verbatim_doc_comment, help_heading = "Dilated clock")]
    guest_clock: bool,
    /// Run nothing: draw the plot of an earlier run's report (apps.json
    /// or apps-tenants.json) into --out (with --docs: into docs/)
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    replot: Option<PathBuf>,
    /// Trace each emulated data drive (the stacks' ZNS drive and its twin;
    /// with --tenants, each mode's base drive): its last N events
    /// (commands, flash operations, buffer room and waits, eZNS's
    /// decisions) written when its server stops, as NAME.trace.json
    /// (JSON trace events, for ui.perfetto.dev) in the run's work
    /// directory, target/vmtest/apps-*
    #[arg(long, value_name = "N", verbatim_doc_comment, num_args = 0..=1,
          default_missing_value = "500000", value_parser = clap::value_parser!(u64).range(1..))]
    trace: Option<u64>,
    #[command(flatten)]
    guest: GuestArgs,
}

/// The tenants' guest CPUs unless `--smp` says otherwise: one per tenant.
/// With fewer, four tenants writing at once share CPUs in the guest's
/// scheduler time slices (4 ms at Debian's 250 Hz, in the guest's time):
/// on a dilated guest clock those slices, not the drive, set every
/// writer's p99 (3.1 to 4.2 ms on two CPUs, where the drive's own writes
/// took at most 131 µs). The host shares its cores between the vCPUs'
/// threads in its own, real-time slices, F times finer in the guest's time.
const TENANT_SMP: u32 = apps_tenants::TENANTS.len() as u32;

/// sysbench's transactions per workload on a dilated guest clock unless
/// `--sb-events` says otherwise.
const GUEST_CLOCK_EVENTS: u32 = 200;

/// Each tenant's operations per timed phase on a dilated guest clock
/// unless `--tn-ops` or `--tn-seconds` says otherwise.
const GUEST_CLOCK_TN_OPS: u64 = 1024;

/// The applications `--apps` names.
const APPS: &[&str] = &["rocksdb", "mysql"];

/// `--apps`: rocksdb, mysql or both.
fn apps(v: &str) -> Result<List<String>, String> {
    let list: Vec<String> = v.split(',').map(|a| a.trim().to_string()).collect();
    match list.iter().find(|a| !APPS.contains(&a.as_str())) {
        Some(bad) => Err(format!("{bad:?} is not rocksdb or mysql")),
        None => Ok(List(list)),
    }
}

/// `--fs`: ext4, xfs or both.
fn filesystems(v: &str) -> Result<List<String>, String> {
    let list: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    match list.iter().find(|f| !["ext4", "xfs"].contains(&f.as_str())) {
        Some(bad) => Err(format!("{bad:?} is not ext4 or xfs")),
        None => Ok(List(list)),
    }
}

/// `--sb-workloads`: sysbench's workloads, in [`apps_mysql::WORKLOADS`]' order.
fn sb_workloads(v: &str) -> Result<List<&'static str>, String> {
    apps_mysql::parse_workloads(v).map(List)
}

/// Dilation factors, comma separated, each finite and at least 1.
fn factors(v: &str) -> Result<Vec<f64>, String> {
    v.split(',')
        .map(|f| match f.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 1.0 => Ok(x),
            _ => Err(format!("{f:?}: give a factor of at least 1")),
        })
        .collect()
}

/// `--tn-zone-scale`: 1, 2, 4 or 8.
fn zone_scale(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n @ (1 | 2 | 4 | 8)) => Ok(n),
        _ => Err(format!("{s:?}: a logical zone is 1, 2, 4 or 8 physical zones")),
    }
}

/// `--tn-stripe-kib`: at least 4 KiB and a divisor of the program unit
/// (what the timing model accepts).
fn stripe_kib(s: &str) -> Result<u32, String> {
    let unit = apps_tenants::PROGRAM_UNIT_KIB;
    match s.parse::<u32>() {
        Ok(k) if k >= 4 && unit.is_multiple_of(k) => Ok(k),
        _ => Err(format!("{s:?}: at least 4 and a divisor of the {unit} KiB program unit")),
    }
}

/// `--dilation`: one factor.
fn dilation(v: &str) -> Result<f64, String> {
    match factors(v)?[..] {
        [f] => Ok(f),
        _ => Err("one factor (--dilations for several)".into()),
    }
}

/// `--dilations`: two factors or more.
fn dilations(v: &str) -> Result<List<f64>, String> {
    let f = factors(v)?;
    if f.len() < 2 {
        return Err("give two factors or more (F1,F2)".into());
    }
    Ok(List(f))
}

impl Args {
    /// The task's options: the defaults `--smoke` changes resolved, the
    /// seed drawn from the clock when not given.
    pub fn options(&self) -> Options {
        let smoke = self.smoke;
        let pick = |given: Option<u32>, full: u32, small: u32| {
            given.unwrap_or(if smoke { small } else { full })
        };
        let seed = self.seed.unwrap_or_else(|| vmtest::new_seed() % 1_000_000_007);
        let workload = Workload {
            num: self.num.unwrap_or(if smoke { 8192 } else { 65536 }).max(1),
            value_size: self.value_size.max(1),
            fill_percent: pick(self.fill, 55, 0).min(95),
            rww_seconds: pick(self.rww_seconds, 30, 0),
            overwrite: !smoke,
            precondition: !smoke && !self.no_precondition,
            seed,
            db_bench: self.apps.iter().any(|a| a == "rocksdb"),
            device_bound: self.device_bound,
        };
        let default_workloads =
            if smoke { vec!["oltp_read_write"] } else { apps_mysql::DEFAULT_WORKLOADS.to_vec() };
        let mysql = self.apps.iter().any(|a| a == "mysql").then(|| Sysbench {
            tables: pick(self.sb_tables, 4, 1).max(1),
            table_size: pick(self.sb_table_size, 25_000, 5000).max(1),
            seconds: pick(self.sb_seconds, 30, 5).max(1),
            events: self.sb_events.or(self.guest_clock.then_some(GUEST_CLOCK_EVENTS)),
            threads: self.sb_threads.max(1),
            buffer_pool_mib: self.buffer_pool.max(8),
            workloads: self.sb_workloads.as_ref().map_or(default_workloads, |w| w.0.clone()),
            seed,
            clean_start: self.device_bound,
        });
        let tenants = self.tenants.then(|| {
            let mut tw = TenantWorkload::new(smoke, seed);
            if let Some(scale) = self.tn_zone_scale {
                tw = tw.with_zone_scale(scale);
            }
            tw.num = self.tn_num.unwrap_or(tw.num).max(1);
            tw.seconds = self.tn_seconds.unwrap_or(tw.seconds).max(1);
            tw.ops = self
                .tn_ops
                .or((self.guest_clock && self.tn_seconds.is_none()).then_some(GUEST_CLOCK_TN_OPS));
            tw.device_bound = self.device_bound;
            tw.stripe_kib = self.tn_stripe_kib.unwrap_or(tw.stripe_kib);
            tw.filler_mib = self.tn_filler_mib.unwrap_or(tw.filler_mib);
            tw
        });
        let fs = match &self.fs {
            Some(fs) => fs.0.clone(),
            None if smoke => vec!["ext4".into()],
            None => vec!["ext4".into(), "xfs".into()],
        };
        let dilations = match (&self.dilations, self.dilation) {
            (Some(list), _) => list.0.clone(),
            (None, one) => one.into_iter().collect(),
        };
        let mut vm = self.guest.vm_or(Duration::from_secs(if smoke { 720 } else { 2700 }));
        if self.tenants && self.guest.smp().is_none() {
            vm.smp = TENANT_SMP;
        }
        Options {
            vm,
            smoke,
            fs,
            workload,
            mysql,
            zones: self.zones.max(16),
            out: self.out.clone(),
            docs: self.docs,
            zns: self.zns.clone(),
            tenants,
            dilations,
            repeat: self.repeat,
            pool: self.pool.clone(),
            guest_clock: self.guest_clock,
            replot: self.replot.clone(),
            trace: self.trace,
        }
    }
}

/// The controller and namespace lines of a profile, then the ZN540's
/// timing table.
fn profile(name: &str, namespace: &str) -> String {
    let timing = ZN540.find("[timing]").map(|at| &ZN540[at..]).unwrap_or("");
    format!(
        r#"name = "{name}"
description = "the ZN540's timing model on zones of 3 MiB capacity (one stripe of its 32 dies)"

[controller]
serial = "ZNSKIT-{serial}"
model = "znskit {name}"
max_queue_entries = 1024
max_io_queues = 64
mdts_log2 = 6
zasl_log2 = 5

{namespace}
{timing}"#,
        serial = name.to_uppercase()
    )
}

/// A zoned namespace of `zones` 4 MiB zones of 3 MiB capacity (one
/// stripe over the ZN540's 32 dies), 14 open.
fn zoned_namespace(zones: u32) -> String {
    format!(
        "[[namespace]]
kind = \"zoned\"
block_size = 4096
metadata_size = 0
zones = {zones}
zone_size = 1024
zone_capacity = 768
max_open = 14
max_active = 14
descriptor_extension_bytes = 0
read_across_zone_boundaries = true
"
    )
}

/// The ZNS device's profile: 4 MiB zones of 3 MiB capacity, 14 open.
pub fn zns_profile() -> String {
    profile("apps-zns", &zoned_namespace(256))
}

/// The drive that holds f2fs's metadata (device 0 of an f2fs on a zoned
/// drive): a conventional namespace of the conventional twin's model (the
/// same NAND and timing behind a device-side FTL), as f2fs is deployed
/// beside a ZNS drive, on a small conventional drive or conventional
/// zones. Its [`META_FLASH_ZONES`] zones of flash with 25 % spare expose
/// exactly 72 MiB: mkfs.f2fs needs device 0 to be whole sections of the
/// zoned namespace's 4 MiB zones (see [`crate::f2fs::FTL_DEVICE`]). It is
/// timed and dilated like the data's drive: an untimed one would answer
/// f2fs's metadata I/O in no device time at every factor, so that share
/// of the ZNS stack's time would not grow with the dilation while
/// everything else did. (A host FTL over a small zoned drive of the same
/// model, its first form, put that FTL's zone finishes, up to 0.9 s on
/// the ZN540, and its garbage collection on f2fs's metadata path.)
pub fn meta_profile() -> String {
    profile("apps-meta", &conventional_namespace(META_FLASH_ZONES, 0.25))
}

/// Zones of flash of the metadata drive ([`meta_profile`]): 30 of 3 MiB
/// with 25 % spare are 72 MiB exposed, in exact arithmetic.
const META_FLASH_ZONES: u32 = 30;

/// The metadata drive of a run, its profile written to `dir`.
fn meta_device(dir: &Path, dilation: Option<f64>) -> Result<String> {
    let path = dir.join("apps-meta.toml");
    fs::write(&path, meta_profile()).map_err(|e| Error::io(&path, e))?;
    Ok(dilated(format!("emu:profile={}", path.display()), dilation))
}

/// Its conventional twin: the flash of its zones behind a page-mapped FTL.
pub fn conv_profile() -> String {
    profile("apps-conv", &conventional_namespace(256, 0.07))
}

/// A conventional namespace over `flash_zones` zones' worth of the zoned
/// namespace's flash, behind a page-mapped FTL with greedy garbage
/// collection and `spare` over-provisioning.
fn conventional_namespace(flash_zones: u32, spare: f64) -> String {
    format!(
        "[[namespace]]
kind = \"conventional\"
block_size = 4096

[namespace.ftl]
flash_zones = {flash_zones}
flash_zone_blocks = 768
segment_blocks = 768
over_provisioning = {spare}
policy = \"greedy\"
"
    )
}

/// Runs the task: once, or once per dilation factor of `--dilations` and
/// their ZNS/conventional ratios compared.
pub fn run(opts: &Options) -> Result<()> {
    if let Some(report) = &opts.replot {
        return replot(opts, report);
    }
    if !opts.pool.is_empty() {
        return pool(opts);
    }
    if opts.repeat > 1 && opts.dilations.is_empty() {
        return Err(Error::new(
            "--repeat runs a dilation factor several times: give --dilation or --dilations",
        ));
    }
    if opts.guest_clock {
        if opts.dilations.is_empty() {
            return Err(Error::new(
                "--guest-clock dilates the guest's clock with the devices': give --dilation or \
                 --dilations",
            ));
        }
        guest_clock::ensure(opts.vm.install)?;
    }
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let default = match (&opts.tenants, opts.dilations.len() > 1, opts.smoke) {
        (Some(_), false, _) => "apps-tenants",
        (Some(_), true, _) => "apps-tenants-dilations",
        (None, true, _) => "apps-dilations",
        (None, false, true) => "apps-smoke",
        (None, false, false) => "apps",
    };
    let out = opts.out.clone().unwrap_or_else(|| target.join(default));
    let mut failures = Vec::new();
    let mut runs = Vec::new();
    if opts.dilations.len() < 2 && opts.repeat == 1 {
        let (report, table, f) = run_once(opts, opts.dilations.first().copied(), &out)?;
        failures.extend(f);
        runs.push((opts.dilations.first().copied().unwrap_or(1.0), report, table));
    } else {
        for k in 1..=opts.repeat {
            for &f in &opts.dilations {
                let (dir, name) = match opts.repeat {
                    1 => (out.join(format!("dilation-{f}")), format!("dilation {f}")),
                    _ => (
                        out.join(format!("dilation-{f}-run-{k}")),
                        format!("dilation {f}, run {k}"),
                    ),
                };
                let (report, table, fails) = run_once(opts, Some(f), &dir)?;
                failures.extend(fails.into_iter().map(|x| format!("{name}: {x}")));
                runs.push((f, report, table));
            }
        }
    }
    let (json_name, marker) = if opts.tenants.is_some() {
        ("apps-tenants.json", "apps-tenants")
    } else {
        ("apps.json", "apps")
    };
    let (report, table, marker, json_name) = if runs.len() > 1 {
        let cmp = apps_dilation::compare(&runs);
        let table = apps_dilation::markdown(&cmp);
        let mut report = json!({
            "task": "cargo xtask apps",
            "dilations": opts.dilations,
            "repeat": opts.repeat,
            "comparison": cmp,
            "runs": runs.iter().map(|(f, r, _)| json!({"dilation": f, "report": r})).collect::<Vec<_>>(),
        });
        report["failures"] = json!(failures);
        if opts.tenants.is_some() {
            (report, table, "apps-tenants-dilations", "apps-tenants-dilations.json")
        } else {
            (report, table, "apps-dilations", "apps-dilations.json")
        }
    } else {
        let (_, report, table) = runs.pop().ok_or_else(|| Error::new("no run"))?;
        (report, table, marker, json_name)
    };
    fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    write_outputs(&out, &report, &table, runs.len() > 1 || opts.tenants.is_some())?;
    if marker == "apps-tenants" {
        apps_tenants_plot::plot(&report, &out.join("apps-tenants.svg"))?;
    }
    if opts.docs && failures.is_empty() {
        let docs = root.join("docs");
        write_json(&docs.join(json_name), &report)?;
        if marker == "apps" {
            plot(&report, &docs.join("apps.svg"))?;
        }
        if marker == "apps-tenants" {
            apps_tenants_plot::plot(&report, &docs.join("apps-tenants.svg"))?;
        }
        update_doc(&docs.join("apps.md"), marker, &table)?;
    }
    println!();
    for l in table.lines() {
        println!("apps: {l}");
    }
    for f in &failures {
        println!("apps: {f}");
    }
    println!(
        "apps: {} in {:.1} s (results in {})",
        if failures.is_empty() { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        out.display()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::new("the application runs failed"))
    }
}

/// `--pool`: the runs of the dilation reports `opts.pool` compared
/// together, grouped by factor, into `--out` (default
/// target/apps-dilations-pooled); nothing is run.
fn pool(opts: &Options) -> Result<()> {
    let mut runs = Vec::new();
    for path in &opts.pool {
        let report = read_report(path)?;
        let each: Vec<(Option<f64>, Value)> = match report["runs"].as_array() {
            Some(rs) if !rs.is_empty() => {
                rs.iter().map(|r| (r["dilation"].as_f64(), r["report"].clone())).collect()
            }
            // A run's own report (--dilation F) is one run at its factor.
            None if report["tenants"].is_object() || report["sides"].is_object() => {
                vec![(report["clock"]["dilation"].as_f64(), report)]
            }
            _ => {
                return Err(Error::new(format!(
                    "{}: not a report of cargo xtask apps (no runs, no figures)",
                    path.display()
                )))
            }
        };
        for (f, r) in each {
            let f = f.ok_or_else(|| {
                Error::new(format!("{}: a run without its dilation factor", path.display()))
            })?;
            runs.push((f, r, String::new()));
        }
    }
    if !opts.dilations.is_empty() {
        // Only the factors asked for, grouped in the order given.
        let at = |f: f64| opts.dilations.iter().position(|&g| g == f);
        runs.retain(|(f, _, _)| at(*f).is_some());
        runs.sort_by_key(|(f, _, _)| at(*f));
        if runs.is_empty() {
            return Err(Error::new("--pool: no run at the factors of --dilations"));
        }
    }
    let kinds: Vec<bool> = runs.iter().map(|(_, r, _)| r["tenants"].is_object()).collect();
    if kinds.iter().any(|&t| t != kinds[0]) {
        return Err(Error::new("--pool: tenants' and stacks' reports do not compare"));
    }
    let cmp = apps_dilation::compare(&runs);
    let table = apps_dilation::markdown(&cmp);
    let report = json!({
        "task": "cargo xtask apps --pool",
        "pooled": opts.pool.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "comparison": cmp,
    });
    let out = opts.out.clone().unwrap_or_else(|| {
        vmtest::target_dir(&vmtest::workspace_root()).join("apps-dilations-pooled")
    });
    fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    write_json(&out.join("apps-dilations-pooled.json"), &report)?;
    let md = out.join("apps-dilations-pooled.md");
    fs::write(&md, &table).map_err(|e| Error::io(&md, e))?;
    for l in table.lines() {
        println!("apps: {l}");
    }
    println!("apps: pooled {} runs (results in {})", runs.len(), out.display());
    Ok(())
}

/// The report of an earlier run, read from `path`.
fn read_report(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::new(format!("{}: not a report: {e}", path.display())))
}

/// `--replot`: the plot of the report at `path`, the tenants' or the
/// stacks' as its content says, into `--out` (default: beside the report)
/// or, with `--docs`, into docs/.
fn replot(opts: &Options, path: &Path) -> Result<()> {
    let report = read_report(path)?;
    let dir = if opts.docs {
        vmtest::workspace_root().join("docs")
    } else {
        opts.out.clone().unwrap_or_else(|| path.parent().unwrap_or(Path::new(".")).to_path_buf())
    };
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let svg = if report["tenants"].is_object() {
        let svg = dir.join("apps-tenants.svg");
        apps_tenants_plot::plot(&report, &svg)?;
        svg
    } else if report["sides"].is_object() {
        let svg = dir.join("apps.svg");
        plot(&report, &svg)?;
        svg
    } else {
        return Err(Error::new(format!(
            "{}: neither an apps.json nor an apps-tenants.json report",
            path.display()
        )));
    };
    println!("apps: drew {}", svg.display());
    Ok(())
}

/// `uri` with the dilated clock of factor `f`, if any.
fn dilated(uri: String, f: Option<f64>) -> String {
    match f {
        Some(f) => format!("{uri},dilation={f}"),
        None => uri,
    }
}

/// `uri` with a trace into `dir`/`name`.trace.json keeping the last
/// `events` events, with `--trace`; as it is otherwise.
fn traced(uri: String, events: Option<u64>, dir: &Path, name: &str) -> String {
    match events {
        Some(n) => {
            let file = dir.join(format!("{name}.trace.json"));
            format!("{uri},trace={},trace_events={n}", file.display())
        }
        None => uri,
    }
}

/// The factor the guest's clock runs slower by in a run at `dilation`:
/// the devices' factor with `--guest-clock`, none otherwise.
fn guest_clock_at(opts: &Options, dilation: Option<f64>) -> Option<f64> {
    dilation.filter(|_| opts.guest_clock)
}

/// How many of the guest's seconds one second of device time lasts (what
/// the guest's own waits for the device are stretched by): F on a
/// dilated device clock, 1 when the guest's clock is dilated with it.
fn guest_waits(opts: &Options, dilation: Option<f64>) -> f64 {
    match guest_clock_at(opts, dilation) {
        Some(_) => 1.0,
        None => dilation.unwrap_or(1.0),
    }
}

/// `zns serve`'s stall timeout for a guest on a dilated clock
/// (`--guest-clock`): the default 30 s stretched F times, at most a day
/// (a host on a slow clock sends a PDU's pieces and takes its responses
/// at its clock's pace); nothing otherwise.
fn stall_args(opts: &Options, dilation: Option<f64>) -> Vec<String> {
    match guest_clock_at(opts, dilation) {
        Some(f) => vec!["--stall-timeout".into(), format!("{}", (30.0 * f).min(86_400.0))],
        None => Vec::new(),
    }
}

/// The dilation and the probes of a run: the host's probe time, the
/// guest's, and the guest's slowdown against the host (the factor that
/// would give the guest the host's CPU-to-device ratio).
fn probe_report(
    dilation: Option<f64>,
    guest_clock: Option<f64>,
    host: &HostProbe,
    c: &Collected,
) -> Value {
    let guest = c.probe.as_ref().and_then(|p| p.as_ref().ok());
    json!({
        "dilation": dilation.unwrap_or(1.0),
        // The guest's clock dilated too: its probes, and every figure it
        // timed, are in its own (dilated) time.
        "guest_clock_dilated": guest_clock.is_some(),
        // Real seconds per second of the guest's clock, timed by the host
        // around a sleep of the guest's (null when not dilated).
        "guest_clock_slowdown_measured": c.clock.slowdown,
        "host_probe_ns": host.ns,
        "host_kernel_probe_ns": host.kernel_ns,
        "guest_probe_ns": guest.and_then(|g| g["ns"].as_u64()),
        "guest_kernel_probe_ns": guest.and_then(|g| g["kernel_ns"].as_u64()),
        "guest_slowdown_vs_host": guest.and_then(|g| g["slowdown"].as_f64()),
        "guest_kernel_slowdown_vs_host": guest.and_then(|g| g["kernel_slowdown"].as_f64()),
        "guest_probe_error": c.probe.as_ref().and_then(|p| p.as_ref().err()),
        "how": "zns characterize --probe (a fixed CPU-bound loop and a fixed kernel path, 4 KiB \
                written and read back through a socket pair, best of 5 passes each) on the \
                host before the guest boots and in the guest (the host's zns binary) against \
                the host's times: the guest's slowdowns, the dilations that would keep the \
                host's CPU-to-device ratio for work in user space and for work in the kernel",
    })
}

/// What every run needs: the `zns` binary, the kernel and its modules,
/// the guest's files, the work directory.
struct Prepared {
    zns: PathBuf,
    kernel: kernel::Kernel,
    modules: Vec<kernel::Module>,
    files: Vec<PathBuf>,
    entries: Vec<GuestEntry>,
    share: Option<PathBuf>,
    dir: PathBuf,
    host: HostProbe,
}

fn prepare(opts: &Options, dilation: Option<f64>) -> Result<Prepared> {
    let o = &opts.vm;
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let mut name = match (&opts.tenants, opts.smoke) {
        (Some(_), _) => "apps-tenants".to_string(),
        (None, true) => "apps-smoke".into(),
        (None, false) => "apps".into(),
    };
    if let Some(f) = dilation {
        name.push_str(&format!("-dilation-{f}"));
    }
    let dir = cache.join(name);
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let zns = match &opts.zns {
        Some(p) => p.clone(),
        None => build_zns(&root, &target, o.install)?,
    };
    let (mut files, mut entries, share) = guest_payload(opts)?;
    // The host's zns in the guest, for the probe.
    let bytes = vmtest::without_debug_info(&zns, &dir)?;
    entries.push(GuestEntry::File { path: "/usr/bin/zns".into(), mode: 0o755, bytes });
    let libs = vmtest::with_libraries(&zns)
        .ok_or_else(|| Error::new(format!("cannot list the libraries of {}", zns.display())))?;
    files.extend(libs.into_iter().filter(|l| *l != zns));
    files.sort();
    files.dedup();
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Generic, o.kernel.as_deref(), o.install)?;
    let mut wanted = MODULES.to_vec();
    if opts.tenants.is_none() && opts.fs.iter().any(|f| f == "xfs") {
        wanted.push("xfs");
    }
    let modules = kernel::modules_for(&kernel, &wanted, &[])?;
    let host = HostProbe::measure(&zns)?;
    Ok(Prepared { zns, kernel, modules, files, entries, share, dir, host })
}

/// The servers of a run (by label), the guest's script, and the devices
/// served (the stacks' URIs, or the tenants' configurations, by name).
type Launched = (Vec<(&'static str, Server)>, String, Vec<(String, String)>);

/// The servers of a run and the guest's script: the ZNS and conventional
/// stacks, or the tenants' two modes.
fn servers_and_script(opts: &Options, p: &Prepared, dilation: Option<f64>) -> Result<Launched> {
    let names: Vec<String> = p.modules.iter().map(|m| m.name.clone()).collect();
    if let Some(tw) = &opts.tenants {
        let base_toml = p.dir.join("apps-tenants-base.toml");
        let text = apps_tenants::with_zone_stripe(
            &profile("apps-tenants", &apps_tenants::base_namespace()),
            tw.stripe_kib,
        );
        fs::write(&base_toml, text).map_err(|e| Error::io(&base_toml, e))?;
        let meta = meta_device(&p.dir, dilation)?;
        let mut servers = Vec::new();
        let mut configs = Vec::new();
        let mut body = String::new();
        for (mode, label) in
            apps_tenants::MODES.iter().zip(["zns serve (eZNS)", "zns serve (static)"])
        {
            let base = format!("emu:profile={},zones={},clock=real", base_toml.display(), tw.zones);
            let base =
                traced(dilated(base, dilation), opts.trace, &p.dir, &format!("tenants-{mode}"));
            let text = apps_tenants::config(mode, &base, tw);
            let path = p.dir.join(format!("tenants-{mode}.toml"));
            fs::write(&path, &text).map_err(|e| Error::io(&path, e))?;
            let mut args: Vec<String> = Vec::new();
            for t in apps_tenants::TENANTS {
                args.extend([
                    "--device".into(),
                    format!("ezns:config={},tenant={t}", path.display()),
                ]);
            }
            for _ in apps_tenants::TENANTS {
                args.extend(["--device".into(), meta.clone()]);
            }
            args.extend(["serve", "--listen", "127.0.0.1:0", "--nqn"].map(String::from));
            args.push(apps_tenants::nqn(mode));
            args.extend(stall_args(opts, dilation));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let server = Server::start(label, &p.zns, &args)?;
            body.push_str(&apps_tenants::mode_lines(
                mode,
                server.port,
                tw,
                guest_waits(opts, dilation),
            ));
            servers.push((label, server));
            configs.push((mode.to_string(), shown_config(&text)));
        }
        let mut s = crate::clients::start_lines(
            "four f2fs tenants with db_bench each on eZNS and on static zones over one ZN540 \
             model per mode, a result marker, power off.",
            &names,
            false,
        );
        s.push_str(&apps_guest::helpers());
        s.push_str(&apps_guest::clock_lines(guest_clock_at(opts, dilation)));
        s.push_str(&apps_guest::probe_lines(&p.host));
        s.push_str(&body);
        s.push_str(&crate::clients::end_lines());
        return Ok((servers, s, configs));
    }
    let zns_toml = p.dir.join("apps-zns.toml");
    let conv_toml = p.dir.join("apps-conv.toml");
    fs::write(&zns_toml, zns_profile()).map_err(|e| Error::io(&zns_toml, e))?;
    fs::write(&conv_toml, conv_profile()).map_err(|e| Error::io(&conv_toml, e))?;
    let zns_uri =
        dilated(format!("emu:profile={},zones={}", zns_toml.display(), opts.zones), dilation);
    let zns_uri = traced(zns_uri, opts.trace, &p.dir, "zns");
    let conv_uri =
        dilated(format!("emu:profile={},zones={}", conv_toml.display(), opts.zones), dilation);
    let conv_uri = traced(conv_uri, opts.trace, &p.dir, "conv");
    let meta = meta_device(&p.dir, dilation)?;
    let stall = stall_args(opts, dilation);
    let stall: Vec<&str> = stall.iter().map(String::as_str).collect();
    let serve = |devices: &[&str], nqn: &str| -> Vec<String> {
        let mut a: Vec<String> =
            devices.iter().flat_map(|d| ["--device", d]).map(String::from).collect();
        a.extend(["serve", "--listen", "127.0.0.1:0", "--nqn", nqn].map(String::from));
        a.extend(stall.iter().map(|s| s.to_string()));
        a
    };
    let zns_args = serve(&[&zns_uri, &meta], NQN_ZNS);
    let zns_args: Vec<&str> = zns_args.iter().map(String::as_str).collect();
    let zns_server = Server::start("zns serve (ZNS)", &p.zns, &zns_args)?;
    let conv_args = serve(&[&conv_uri], NQN_CONV);
    let conv_args: Vec<&str> = conv_args.iter().map(String::as_str).collect();
    let conv_server = Server::start("zns serve (conventional)", &p.zns, &conv_args)?;
    let sides = sides(opts, zns_server.port, conv_server.port);
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let mysql = opts
        .mysql
        .as_ref()
        .zip(p.share.as_deref())
        .map(|(sysbench, share)| apps_guest::Mysql { sysbench, share });
    let script = apps_guest::init_script(
        &names,
        &sides,
        &opts.workload,
        mysql,
        &mke2fs.display().to_string(),
        Some(&p.host),
        guest_clock_at(opts, dilation),
    );
    let uris = vec![
        ("zns".to_string(), zns_uri),
        ("conv".to_string(), conv_uri),
        ("meta".to_string(), meta),
    ];
    Ok((
        vec![("zns serve (ZNS)", zns_server), ("zns serve (conventional)", conv_server)],
        script,
        uris,
    ))
}

/// The sides of the ZNS-against-conventional run.
fn sides(opts: &Options, zns_port: u16, conv_port: u16) -> Vec<Side> {
    let mut sides =
        vec![Side { name: "f2fs-zns".into(), fs: "f2fs", nqn: NQN_ZNS.into(), port: zns_port }];
    for f in &opts.fs {
        let fs: &'static str = if f == "xfs" { "xfs" } else { "ext4" };
        sides.push(Side { name: format!("{fs}-conv"), fs, nqn: NQN_CONV.into(), port: conv_port });
    }
    sides
}

/// An eZNS configuration as recorded: its base profile by name, not path.
fn shown_config(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix("device = \"") {
            Some(uri) => format!("device = \"{}", shown(uri)),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One run (at dilation `dilation`, if any): servers, the guest, the
/// figures; writes them into `out` and returns the report, its table and
/// the failures.
fn run_once(
    opts: &Options,
    dilation: Option<f64>,
    out: &Path,
) -> Result<(Value, String, Vec<String>)> {
    let mut o = opts.vm.clone();
    o.guest_clock = guest_clock_at(opts, dilation);
    let o = &o;
    let p = prepare(opts, dilation)?;
    let (servers, script, uris) = servers_and_script(opts, &p, dilation)?;
    let initramfs =
        vmtest::pack_initramfs_with(&p.dir, &[], &p.modules, &script, &p.files, &p.entries)?;
    let devices: Vec<String> = ["-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0"]
        .map(String::from)
        .to_vec();
    let log = p.dir.join("guest.log");
    let mut collected = Collected::default();
    let guest_start = Instant::now();
    let outcome =
        vmtest::boot_watched(&p.kernel, &initramfs, &devices, o, &log, &mut |l| collected.watch(l));
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let mut failures = Vec::new();
    let mut lateness = Vec::new();
    let mut ezns = Vec::new();
    for (what, server) in servers {
        match server.stop() {
            Ok(s) if s.contains(" 0 ended by transport errors") => {
                // Recorded without this machine's paths (the profiles' directory).
                let dir = format!("{}/", p.dir.display());
                let lines = |key: &str| -> Vec<String> {
                    let hits = s.lines().filter(|l| l.contains(key));
                    hits.map(|l| l.trim().replace(&dir, "")).collect()
                };
                lateness.extend(lines("late completions"));
                ezns.extend(lines("journal blocks written"));
            }
            Ok(s) => failures.push(format!("{what} saw errors: {}", s.trim())),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let outcome = outcome?;
    failures.extend(outcome.failures.clone());
    if outcome.result != Some(true) {
        failures.push("the guest did not report PASS".into());
    }
    if !matches!(collected.probe, Some(Ok(_))) {
        failures.push(format!("no probe from the guest: {:?}", collected.probe));
    }
    if let Some(f) = o.guest_clock {
        failures.extend(collected.clock.failure(f));
    }
    let (mut report, table) = if let Some(tw) = &opts.tenants {
        let r = apps_tenants::results(tw, &collected, &uris);
        failures.extend(apps_tenants::missing(&r, tw));
        failures.extend(
            collected.smart_errors.iter().map(|e| format!("no SMART data units written: {e}")),
        );
        failures.extend(collected.ocp_errors.iter().map(|e| format!("no OCP media bytes: {e}")));
        let table = apps_tenants::markdown(&r);
        (json!({"task": "cargo xtask apps --tenants", "smoke": opts.smoke, "tenants": r}), table)
    } else {
        let uri =
            |k: &str| uris.iter().find(|(n, _)| n == k).map(|(_, u)| u.clone()).unwrap_or_default();
        let results = results(
            opts,
            &sides(opts, 0, 0),
            &collected,
            [&uri("zns"), &uri("conv"), &uri("meta")],
        );
        failures.extend(missing(&results, &opts.workload, opts.mysql.as_ref()));
        failures.extend(
            collected.smart_errors.iter().map(|e| format!("no SMART data units written: {e}")),
        );
        failures.extend(collected.ocp_errors.iter().map(|e| format!("no OCP media bytes: {e}")));
        let table = markdown(&results);
        (results, table)
    };
    report["clock"] = probe_report(dilation, o.guest_clock, &p.host, &collected);
    report["late_completions"] = json!(lateness);
    report["ezns"] = json!(ezns);
    report["guest_seconds"] = json!(guest_secs);
    report["guest_cpus"] = json!(o.smp);
    report["failures"] = json!(failures);
    fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    write_outputs(out, &report, &table, opts.tenants.is_some())?;
    println!(
        "apps: run{} done: guest {guest_secs:.1} s, log {}",
        dilation.map(|f| format!(" at dilation {f}")).unwrap_or_default(),
        log.display()
    );
    Ok((report, table, failures))
}

/// The host files packed into the guest (programs, their libraries,
/// data), the files written for it, and the directory of MariaDB's shared
/// files when it runs; missing packages are installed unless
/// `--no-install`.
fn guest_payload(opts: &Options) -> Result<(Vec<PathBuf>, Vec<GuestEntry>, Option<PathBuf>)> {
    let mut tools = TOOLS.to_vec();
    if opts.mysql.is_some() {
        tools.extend(MYSQL_TOOLS);
    }
    let mut files = crate::clients::guest_files(&tools, opts.vm.install)?;
    let Some(sb) = &opts.mysql else { return Ok((files, Vec::new(), None)) };
    let (entries, share, data) = mysql_guest_files(sb)?;
    files.extend(data);
    Ok((files, entries, Some(share)))
}

/// What MariaDB and sysbench need in the guest besides their programs:
/// the configuration, `/etc/passwd` and `/etc/group` (written here), the
/// directory of the server's shared files (returned), and those files and
/// sysbench's Lua scripts (host files).
fn mysql_guest_files(sb: &Sysbench) -> Result<(Vec<GuestEntry>, PathBuf, Vec<PathBuf>)> {
    let share = apps_mysql::share_dir().ok_or_else(|| {
        Error::new("no english/errmsg.sys and system tables SQL in /usr/share/mariadb or /usr/share/mysql (mariadb-server)")
    })?;
    let lua = Path::new(SYSBENCH_LUA);
    let data = apps_mysql::data_files(&share, lua).map_err(|e| Error::io(lua, e))?;
    for w in &sb.workloads {
        if !data.iter().any(|f| f.file_stem().is_some_and(|s| s == *w)) {
            return Err(Error::new(format!("sysbench's {w}.lua is not in {SYSBENCH_LUA}")));
        }
    }
    let (passwd, group) = apps_mysql::passwd();
    let file = |path: &str, text: String| GuestEntry::File {
        path: path.into(),
        mode: 0o644,
        bytes: text.into_bytes(),
    };
    let entries = vec![
        file(apps_mysql::CONFIG, apps_mysql::config(&share, sb)),
        file("/etc/passwd", passwd.into()),
        file("/etc/group", group.into()),
    ];
    Ok((entries, share, data))
}

/// `apps.json` and `apps-table.md` in `out`, and `apps.svg` unless
/// `no_plot` (the tenants' and the dilations' reports have no bars).
fn write_outputs(out: &Path, report: &Value, table: &str, no_plot: bool) -> Result<()> {
    write_json(&out.join("apps.json"), report)?;
    let table_path = out.join("apps-table.md");
    fs::write(&table_path, table).map_err(|e| Error::io(&table_path, e))?;
    if no_plot {
        return Ok(());
    }
    plot(report, &out.join("apps.svg"))
}

fn write_json(path: &Path, report: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// Bytes in `sectors` of 512 bytes, as MiB.
fn mib(sectors: u64) -> f64 {
    sectors as f64 * 512.0 / (1u64 << 20) as f64
}

/// A device URI as recorded: the profile file by its name, not its path.
fn shown(uri: &str) -> String {
    let end = uri.find(',').unwrap_or(uri.len());
    match uri.find("profile=") {
        Some(a) if a < end => {
            let path = &uri[a + 8..end];
            let name = path.rsplit('/').next().unwrap_or(path);
            format!("{}profile={name}{}", &uri[..a], &uri[end..])
        }
        _ => uri.to_string(),
    }
}

/// How much of the space free after mkfs is used at `point` (what df
/// says used, less what it said right after mounting, over what it said
/// available then).
fn fill(c: &Collected, side: &str, point: &str) -> Option<f64> {
    let used = c.stat(side, point, "fs_used_kib")?;
    let used0 = c.stat(side, "mounted", "fs_used_kib")?;
    let free0 = c.stat(side, "mounted", "fs_avail_kib")?;
    Some(used.saturating_sub(used0) as f64 / free0.max(1) as f64)
}

/// Bytes in a SMART data unit.
pub(crate) const DATA_UNIT: f64 = 512_000.0;

/// Bytes as MiB.
pub(crate) fn mib_of(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

/// The device's write amplification between points `from` and `to` of
/// `side`: the media bytes its OCP log counts over the host bytes its SMART
/// log counts; or why there is none.
pub(crate) fn device_waf(
    c: &Collected,
    side: &str,
    from: &str,
    to: &str,
) -> Result<f64, &'static str> {
    let media = c.delta(side, from, to, "media_bytes_written");
    let host = c.delta(side, from, to, "smart_data_units_written");
    match (media, host) {
        (None, _) => Err("no OCP SMART / Health Information Extended log (C0h) read on both sides"),
        (_, None) => Err("no SMART log (02h) read on both sides"),
        (_, Some(0)) => Err("the host wrote no data unit"),
        (Some(m), Some(h)) => Ok(m as f64 / (h as f64 * DATA_UNIT)),
    }
}

/// The counters around phase `p` of side `n` (the sectors the kernel
/// wrote, the SMART and OCP logs' bytes, f2fs's GC, the filesystem's use)
/// and the device's WAF over the phase, or why there is none.
fn around(
    c: &Collected,
    n: &str,
    p: &str,
) -> (serde_json::Map<String, Value>, Result<f64, &'static str>) {
    let (b, a) = (format!("before-{p}"), format!("after-{p}"));
    let data = c.delta(n, &b, &a, "data_sectors");
    let meta = c.delta(n, &b, &a, "meta_sectors");
    let host = data.map(|d| d + meta.unwrap_or(0));
    let smart = c.delta(n, &b, &a, "smart_data_units_written");
    let sum = |x: &str, y: &str, debug: &str| {
        c.delta(n, &b, &a, x)
            .zip(c.delta(n, &b, &a, y))
            .map(|(x, y)| x + y)
            .or_else(|| c.delta(n, &b, &a, debug))
    };
    let moved = sum(
        "f2fs_moved_blocks_foreground",
        "f2fs_moved_blocks_background",
        "f2fs_debug_gc_moved_blocks",
    );
    let calls = sum("f2fs_gc_foreground_calls", "f2fs_gc_background_calls", "f2fs_debug_gc_calls");
    // Foreground GC runs in a writer's path and ends with a checkpoint,
    // which stalls every writer of the filesystem.
    let fg_calls = c.delta(n, &b, &a, "f2fs_gc_foreground_calls");
    let checkpoints = c
        .delta(n, &b, &a, "f2fs_cp_foreground_calls")
        .zip(c.delta(n, &b, &a, "f2fs_cp_background_calls"))
        .map(|(f, b)| f + b);
    let media = c.delta(n, &b, &a, "media_bytes_written");
    let waf = device_waf(c, n, &b, &a);
    let v = json!({
        "host_mib_written_data_ns": data.map(mib),
        "host_mib_written_metadata_ns": meta.map(mib),
        "host_mib_written": host.map(mib),
        // A SMART data unit is 1000 blocks of 512 bytes.
        "smart_mib_written": smart.map(|u| mib_of(u as f64 * DATA_UNIT)),
        "media_mib_written": media.map(|m| mib_of(m as f64)),
        "media_mib_read": c.delta(n, &b, &a, "media_bytes_read").map(|m| mib_of(m as f64)),
        "device_waf": waf.ok(),
        "f2fs_gc_moved_blocks": moved,
        "f2fs_gc_calls": calls,
        "f2fs_gc_foreground_calls": fg_calls,
        "f2fs_checkpoints": checkpoints,
        "fs_use_before": fill(c, n, &b),
        "fs_use_after": fill(c, n, &a),
    });
    (v.as_object().cloned().unwrap_or_default(), waf)
}

/// The results: per side, the fill, per phase db_bench's figures, per
/// MariaDB phase sysbench's, and the counters' deltas around each.
/// `uris`: the ZNS device's, the conventional twin's and the metadata
/// FTL's drive's.
fn results(opts: &Options, sides: &[Side], c: &Collected, uris: [&str; 3]) -> Value {
    let [zns_uri, conv_uri, meta_uri] = uris;
    let w = &opts.workload;
    let mut out_sides = serde_json::Map::new();
    let mut waf_sides = serde_json::Map::new();
    let mut waf_null = serde_json::Map::new();
    let mut note = |n: &str, p: &str, waf: &Result<f64, &'static str>| {
        if let Err(why) = waf {
            waf_null.insert(format!("{n} {p}"), json!(why));
        }
        if let Some(m) = waf_sides.entry(n.to_string()).or_insert_with(|| json!({})).as_object_mut()
        {
            m.insert(p.to_string(), json!(waf.ok()));
        }
    };
    for side in sides {
        let n = side.name.as_str();
        let mut phases = serde_json::Map::new();
        for p in w.phases() {
            let lines = c.db.get(&(n.to_string(), p.to_string())).cloned().unwrap_or_default();
            let f = apps_guest::parse_db_bench(p, &lines);
            let (mut v, waf) = around(c, n, p);
            note(n, p, &waf);
            v.extend(
                json!({
                    "ops_per_sec": f.ops_per_sec,
                    "mb_per_sec": f.mb_per_sec,
                    "micros_per_op": f.micros_per_op,
                    "operations": f.operations,
                    "p50_us": f.p50_us,
                    "p99_us": f.p99_us,
                    "p999_us": f.p999_us,
                    "latency_of": if p == "readwhilewriting" { "reads" } else { "writes" },
                    "db_bench_lines": lines.len(),
                })
                .as_object()
                .cloned()
                .unwrap_or_default(),
            );
            phases.insert(p.to_string(), Value::Object(v));
        }
        let fs_mib = c.stat(n, "mounted", "fs_kib").map(|k| k as f64 / 1024.0);
        let mut out = json!({
            "filesystem": side.fs,
            "device": shown(if side.zoned() { zns_uri } else { conv_uri }),
            "metadata_device": side.zoned().then(|| shown(meta_uri)),
            "filesystem_mib": fs_mib,
            "free_mib_after_mkfs": c.stat(n, "mounted", "fs_avail_kib").map(|k| k as f64 / 1024.0),
            "fs_use_after_filler": fill(c, n, "filled"),
            "host_mib_written_precondition_to_end": c.delta(n, "mkfs", "end", "data_sectors").map(mib),
            "media_mib_written_mkfs_to_end": c.delta(n, "mkfs", "end", "media_bytes_written").map(|m| mib_of(m as f64)),
            "device_waf_mkfs_to_end": device_waf(c, n, "mkfs", "end").ok(),
            "phases": phases,
        });
        if let Some(sb) = &opts.mysql {
            out["mysql"] = mysql_results(sb, c, n, &mut note);
        }
        out_sides.insert(n.to_string(), out);
    }
    json!({
        "task": "cargo xtask apps",
        "smoke": opts.smoke,
        "workload": {
            "tool": "db_bench (Debian rocksdb-tools)",
            "db_bench": w.db_bench,
            "rocksdb_version": vmtest::installed_version("rocksdb-tools"),
            "num": w.num,
            "key_size": 16,
            "value_size": w.value_size,
            "db_mib": w.db_mib(),
            "fill_percent_target": w.fill_percent,
            "readwhilewriting_seconds": w.rww_seconds,
            "device_bound": w.device_bound,
            "conventional_preconditioned": w.precondition,
            "seed": w.seed,
            "db_bench_options": apps_guest::db_bench_common(w),
        },
        "mysql": opts.mysql.as_ref().map(|sb| json!({
            "server": "mariadbd (Debian mariadb-server)",
            "mariadb_version": vmtest::installed_version("mariadb-server"),
            "sysbench_version": vmtest::installed_version("sysbench"),
            "tables": sb.tables,
            "table_size": sb.table_size,
            "rows": sb.tables as u64 * sb.table_size as u64,
            "seconds": sb.seconds,
            "events": sb.events,
            "threads": sb.threads,
            "buffer_pool_mib": sb.buffer_pool_mib,
            "workloads": sb.workloads,
            "server_restarted_before_each_workload": sb.clean_start,
            "sysbench_options": format!("{} {}", sb.common(), sb.run_options()),
            "after_db_bench": w.db_bench,
        })),
        "zones": opts.zones,
        "device_waf": {
            "how": "per side and phase: the bytes the media took (OCP SMART / Health Information \
                    Extended log, LID C0h, Physical Media Units Written) over the bytes the host \
                    wrote (SMART log, LID 02h, Data Units Written × 512,000), both read from the \
                    side's controller in the guest before and after the phase; the ZNS side's \
                    media include the device under the FTL that holds f2fs's metadata",
            "sides": Value::Object(waf_sides),
            "why_null": Value::Object(waf_null),
        },
        "sides": Value::Object(out_sides),
    })
}

/// A side's MariaDB phases: sysbench's figures (none for the load) and
/// the counters around each; `note` records each phase's device WAF.
fn mysql_results(
    sb: &Sysbench,
    c: &Collected,
    n: &str,
    note: &mut impl FnMut(&str, &str, &Result<f64, &'static str>),
) -> Value {
    let mut phases = serde_json::Map::new();
    for p in sb.phases() {
        let lines = c.sb.get(&(n.to_string(), p.to_string())).cloned().unwrap_or_default();
        let (mut v, waf) = around(c, n, p);
        note(n, p, &waf);
        v.insert("elapsed_s".into(), json!(c.stat(n, &format!("after-{p}"), "elapsed_s")));
        v.insert("sysbench_lines".into(), json!(lines.len()));
        let datadir = c.stat(n, &format!("after-{p}"), "datadir_kib");
        v.insert("datadir_mib_after".into(), json!(datadir.map(|k| k as f64 / 1024.0)));
        if p != apps_mysql::PREPARE {
            let f = apps_mysql::parse_sysbench(&lines);
            v.extend(
                json!({
                    "tps": f.tps,
                    "qps": f.qps,
                    "transactions": f.transactions,
                    "ignored_errors": f.ignored_errors,
                    "avg_ms": f.avg_ms,
                    "p95_ms": f.p95_ms,
                    "p99_ms": f.p99_ms,
                    "max_ms": f.max_ms,
                    "seconds": f.seconds,
                })
                .as_object()
                .cloned()
                .unwrap_or_default(),
            );
        }
        phases.insert(p.to_string(), Value::Object(v));
    }
    json!({ "phases": phases })
}

/// What a run must report; each missing figure is a failure.
fn missing(results: &Value, w: &Workload, mysql: Option<&Sysbench>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(sides) = results["sides"].as_object() else { return vec!["no sides".into()] };
    let counters = ["host_mib_written", "smart_mib_written", "media_mib_written"];
    for (name, s) in sides {
        let f2fs = s["filesystem"] == "f2fs";
        for p in w.phases() {
            let mut need = vec!["ops_per_sec", "p99_us", "p999_us", "device_waf"];
            need.extend(counters);
            if p != "readwhilewriting" {
                need.push("mb_per_sec");
            }
            if f2fs {
                need.push("f2fs_gc_moved_blocks");
            }
            out.extend(
                need.iter()
                    .filter(|k| s["phases"][p][**k].is_null())
                    .map(|k| format!("{name} {p}: no {k}")),
            );
        }
        for p in mysql.map(Sysbench::phases).unwrap_or_default() {
            let mut need = counters.to_vec();
            if p != apps_mysql::PREPARE {
                need.extend(["tps", "p95_ms", "p99_ms"]);
            }
            // A read-only workload may leave nothing for the device to
            // write: its WAF has no denominator.
            if p != "oltp_read_only" {
                need.push("device_waf");
            }
            if f2fs {
                need.push("f2fs_gc_moved_blocks");
            }
            let ph = &s["mysql"]["phases"][p];
            out.extend(
                need.iter()
                    .filter(|k| ph[**k].is_null())
                    .map(|k| format!("{name} mysql {p}: no {k}")),
            );
        }
    }
    out
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

/// The figures as markdown: db_bench's table (one row per side and
/// phase), then MariaDB's (one row per side and sysbench phase).
pub fn markdown(r: &Value) -> String {
    let mut s = String::new();
    if r["workload"]["db_bench"].as_bool().unwrap_or(true) {
        s.push_str(&db_bench_table(r));
    }
    if r["mysql"].is_object() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&mysql_table(r));
    }
    s
}

/// The per-phase counters of a table row: host, SMART and media MiB
/// written, the device WAF, f2fs's GC blocks moved, the fill.
fn counter_cells(f: &Value) -> String {
    let pct = |v: &Value| v.as_f64().map(|x| format!("{:.0} %", x * 100.0)).unwrap_or("–".into());
    format!(
        "{} | {} | {} | {} | {} | {} → {}",
        num(&f["host_mib_written"], 1),
        num(&f["smart_mib_written"], 1),
        num(&f["media_mib_written"], 1),
        num(&f["device_waf"], 2),
        f["f2fs_gc_moved_blocks"].as_u64().map(|v| v.to_string()).unwrap_or("–".into()),
        pct(&f["fs_use_before"]),
        pct(&f["fs_use_after"]),
    )
}

/// MariaDB's table: sysbench's transactions/s and tails, the counters.
fn mysql_table(r: &Value) -> String {
    let mut s = String::new();
    let m = &r["mysql"];
    let _ = writeln!(
        s,
        "MariaDB {} with sysbench {}: {} table(s) of {} rows, {} threads, {} per workload, \
         InnoDB buffer pool {} MiB (O_DIRECT, a log flush per commit){}.\n",
        m["mariadb_version"].as_str().unwrap_or("?"),
        m["sysbench_version"].as_str().unwrap_or("?"),
        m["tables"],
        m["table_size"],
        m["threads"],
        match m["events"].as_u64() {
            Some(n) => format!("{n} transactions"),
            None => format!("{} s", m["seconds"]),
        },
        m["buffer_pool_mib"],
        if m["after_db_bench"].as_bool() == Some(true) {
            "; after db_bench, its database removed, the filler kept"
        } else {
            ""
        },
    );
    s.push_str(
        "| stack | sysbench phase | transactions/s | queries/s | p95 (ms) | p99 (ms) | seconds | host MiB written | SMART MiB written | media MiB written | device WAF | f2fs GC blocks moved | fill before → after |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let order: Vec<&str> =
        std::iter::once(apps_mysql::PREPARE).chain(apps_mysql::WORKLOADS).collect();
    let mut ratios = Vec::new();
    let sides = r["sides"].as_object().cloned().unwrap_or_default();
    for (name, side) in &sides {
        let phases = &side["mysql"]["phases"];
        for p in order.iter().filter(|p| phases[**p].is_object()) {
            let f = &phases[*p];
            let _ = writeln!(
                s,
                "| {name} | {p} | {} | {} | {} | {} | {} | {} |",
                num(&f["tps"], 1),
                num(&f["qps"], 0),
                num(&f["p95_ms"], 2),
                num(&f["p99_ms"], 2),
                f["elapsed_s"].as_u64().map(|v| v.to_string()).unwrap_or("–".into()),
                counter_cells(f),
            );
            let zns = sides.get("f2fs-zns").map(|z| &z["mysql"]["phases"][*p]);
            let ratio = |k: &str| -> Option<f64> {
                Some((zns?[k].as_f64()? / f[k].as_f64()? - 1.0) * 100.0)
            };
            if let (Some(t), Some(l), false) = (ratio("tps"), ratio("p99_ms"), name == "f2fs-zns") {
                ratios.push(format!("{p} f2fs-zns / {name}: {t:+.1} % (p99 {l:+.1} %)"));
            }
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(
            s,
            "\nTransactions/s (and p99 latency), ZNS against conventional: {}.",
            ratios.join("; ")
        );
    }
    s
}

/// db_bench's table: one row per side and phase.
fn db_bench_table(r: &Value) -> String {
    let mut s = String::new();
    let w = &r["workload"];
    let _ = writeln!(
        s,
        "db_bench {} keys of 16 + {} bytes ({} MiB), seed {}; fill target {} % of the space \
         free after mkfs; conventional namespace preconditioned: {}; devices of {} zones.\n",
        w["num"],
        w["value_size"],
        w["db_mib"],
        w["seed"],
        w["fill_percent_target"],
        w["conventional_preconditioned"],
        r["zones"]
    );
    s.push_str(
        "| stack | phase | ops/s | MB/s | p99 (µs) | p99.9 (µs) | host MiB written | SMART MiB written | media MiB written | device WAF | f2fs GC blocks moved | fill before → after |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    if let Some(sides) = r["sides"].as_object() {
        for (name, side) in sides {
            if let Some(phases) = side["phases"].as_object() {
                for (p, f) in phases {
                    let _ = writeln!(
                        s,
                        "| {name} | {p} ({}) | {} | {} | {} | {} | {} |",
                        f["latency_of"].as_str().unwrap_or(""),
                        num(&f["ops_per_sec"], 0),
                        num(&f["mb_per_sec"], 1),
                        num(&f["p99_us"], 0),
                        num(&f["p999_us"], 0),
                        counter_cells(f),
                    );
                }
            }
        }
    }
    let zns = &r["sides"]["f2fs-zns"]["phases"];
    let mut ratios = Vec::new();
    if let Some(sides) = r["sides"].as_object() {
        for (name, side) in sides.iter().filter(|(n, _)| n.as_str() != "f2fs-zns") {
            for p in ["fillrandom", "overwrite", "readwhilewriting"] {
                if let (Some(a), Some(b)) =
                    (zns[p]["ops_per_sec"].as_f64(), side["phases"][p]["ops_per_sec"].as_f64())
                {
                    ratios.push(format!("{p} f2fs-zns / {name}: {:+.1} %", (a / b - 1.0) * 100.0));
                }
            }
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(s, "\nThroughput, ZNS against conventional: {}.", ratios.join("; "));
    }
    s
}

/// Replaces what lies between the markers `name` (`apps`, `apps-tenants`,
/// `apps-dilations`) in `doc` with `table`.
fn update_doc(doc: &Path, name: &str, table: &str) -> Result<()> {
    let begin = format!("<!-- {name}:begin (written by cargo xtask apps --docs) -->");
    let end = format!("<!-- {name}:end -->");
    let text = fs::read_to_string(doc).map_err(|e| Error::io(doc, e))?;
    let (Some(a), Some(b)) = (text.find(&begin), text.find(&end)) else {
        return Err(Error::new(format!("{}: no {begin} … {end} markers", doc.display())));
    };
    let new = format!("{}{begin}\n{table}{}", &text[..a], &text[b..]);
    fs::write(doc, new).map_err(|e| Error::io(doc, e))
}

/// Bars: ops/s of each db_bench phase and transactions/s of each
/// sysbench workload, one bar per stack.
fn plot(r: &Value, path: &Path) -> Result<()> {
    let sides: Vec<(String, Value)> = r["sides"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let first = sides.first().map(|(_, s)| s.clone()).unwrap_or_default();
    let bars = |at: &dyn Fn(&Value) -> &Value| -> Vec<f64> {
        sides.iter().map(|(_, s)| at(s).as_f64().unwrap_or(0.0)).collect()
    };
    // (title, axis, a bar per side)
    let mut panels: Vec<(String, &str, Vec<f64>)> = Vec::new();
    let phases: Vec<String> =
        first["phases"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    for p in phases {
        let v = bars(&|s: &Value| &s["phases"][p.as_str()]["ops_per_sec"]);
        panels.push((format!("db_bench {p}"), "operations/s", v));
    }
    for p in apps_mysql::WORKLOADS.iter().filter(|p| first["mysql"]["phases"][**p].is_object()) {
        let v = bars(&|s: &Value| &s["mysql"]["phases"][*p]["tps"]);
        panels.push((format!("sysbench {p}"), "transactions/s", v));
    }
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root =
            SVGBackend::new(path, (420 * panels.len().max(1) as u32, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        const COLORS: [RGBColor; 3] =
            [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];
        for (area, (title, axis, vals)) in areas.iter().zip(&panels) {
            let top = vals.iter().cloned().fold(1.0, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d(0.0..sides.len() as f64, 0.0..top)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(sides.len() + 1)
                .x_label_formatter(&|x| {
                    let i = (*x - 0.5).round() as usize;
                    if (*x - 0.5 - i as f64).abs() < 0.01 {
                        sides.get(i).map(|s| s.0.clone()).unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_desc(*axis)
                .label_style(("sans-serif", 13))
                .draw()?;
            chart.draw_series(vals.iter().enumerate().map(|(i, v)| {
                Rectangle::new(
                    [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, *v)],
                    COLORS[i % 3].filled(),
                )
            }))?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `args` as the options of the task.
    fn parse(args: &[&str]) -> Result<Option<Options>> {
        crate::args::tests::parse::<Args>(args).map(|a| a.map(|a| a.options()))
    }

    #[test]
    fn options_default_to_the_full_run_and_smoke_cuts_it_down() {
        let p = |a: &[&str]| parse(a).unwrap().unwrap();
        let full = p(&[]);
        assert!(!full.smoke && full.fs == ["ext4", "xfs"] && full.workload.overwrite);
        assert_eq!((full.workload.num, full.workload.fill_percent), (65536, 55));
        assert_eq!((full.vm.timeout, full.zones), (Duration::from_secs(2700), ZONES));
        let sb = full.mysql.clone().unwrap();
        assert_eq!(sb.workloads, apps_mysql::DEFAULT_WORKLOADS);
        assert_eq!(
            (sb.tables, sb.table_size, sb.seconds, sb.seed),
            (4, 25_000, 30, full.workload.seed)
        );
        assert_eq!(full.workload.phases(), ["fillrandom", "overwrite", "readwhilewriting"]);
        let smoke = p(&["--smoke"]);
        assert!(smoke.smoke && smoke.fs == ["ext4"] && smoke.workload.phases() == ["fillrandom"]);
        assert_eq!((smoke.workload.fill_percent, smoke.workload.precondition), (0, false));
        assert_eq!((smoke.workload.num, smoke.vm.timeout), (8192, Duration::from_secs(720)));
        let sb = smoke.mysql.unwrap();
        assert_eq!((sb.workloads, sb.tables, sb.seconds), (vec!["oltp_read_write"], 1, 5));
        let given =
            p(&["--timeout", "60", "--fill", "99", "--smoke", "--num", "0", "--zones", "3"]);
        assert_eq!((given.vm.timeout, given.workload.fill_percent), (Duration::from_secs(60), 95));
        assert_eq!((given.workload.num, given.zones), (1, 16));
        let rocksdb = p(&["--apps", "rocksdb"]);
        assert!(rocksdb.mysql.is_none() && rocksdb.workload.db_bench);
        let mysql = p(&["--apps", "mysql", "--sb-workloads", "write_only", "--seed", "9"]);
        assert!(!mysql.workload.db_bench && mysql.workload.phases().is_empty());
        assert_eq!(
            mysql.mysql.as_ref().map(|m| (m.workloads.clone(), m.seed)),
            Some((vec!["oltp_write_only"], 9))
        );
        assert!(parse(&["--apps", "postgres"]).is_err());
        assert!(parse(&["--apps", ""]).is_err());
        assert!(parse(&["--sb-workloads", "insert"]).is_err());
        let xfs = p(&["--fs", "xfs", "--num", "10", "--seed", "3"]);
        assert_eq!((xfs.workload.num, xfs.fs.as_slice()), (10, &["xfs".to_string()][..]));
        assert!(parse(&["--fs", "btrfs"]).is_err());
        assert!(parse(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn a_dilated_guest_clock_counts_transactions_and_needs_a_factor() {
        let p = |a: &[&str]| parse(a).unwrap().unwrap();
        let timed = p(&["--apps", "mysql", "--dilations", "64,128"]);
        assert!(!timed.guest_clock && timed.mysql.unwrap().events.is_none());
        let dilated = p(&["--apps", "mysql", "--dilations", "64,128", "--guest-clock"]);
        assert!(dilated.guest_clock);
        assert_eq!(dilated.mysql.as_ref().unwrap().events, Some(GUEST_CLOCK_EVENTS));
        assert_eq!(
            dilated.mysql.unwrap().run_options(),
            "--time=0 --events=200 --percentile=95 --histogram=on --report-interval=0"
        );
        let counted = p(&["--apps", "mysql", "--sb-events", "50"]);
        assert_eq!(counted.mysql.unwrap().events, Some(50));
        assert!(parse(&["--sb-events", "0"]).is_err());
        // The guest's clock follows the devices': no factor, no run.
        let alone = p(&["--guest-clock"]);
        let e = run(&alone).unwrap_err().to_string();
        assert!(e.contains("--dilation"), "{e}");
        assert_eq!(stall_args(&dilated_opts(), Some(64.0)), ["--stall-timeout", "1920"]);
        assert_eq!(stall_args(&dilated_opts(), Some(4096.0)), ["--stall-timeout", "86400"]);
        assert!(stall_args(&p(&["--dilation", "64"]), Some(64.0)).is_empty());
        // The tenants' idle waits are the guest's: stretched only when its
        // clock is not.
        assert_eq!(guest_waits(&p(&["--dilation", "64"]), Some(64.0)), 64.0);
        assert_eq!(guest_waits(&dilated_opts(), Some(64.0)), 1.0);
        assert_eq!(guest_waits(&p(&[]), None), 1.0);
        // The tenants' timed phases count operations on a dilated guest
        // clock, unless told a number of seconds or operations.
        let tn = |a: &[&str]| p(a).tenants.map(|t| (t.ops, t.seconds));
        assert_eq!(tn(&["--tenants", "--dilation", "8"]), Some((None, 20)));
        let ops = Some((Some(GUEST_CLOCK_TN_OPS), 20));
        assert_eq!(tn(&["--tenants", "--dilation", "8", "--guest-clock"]), ops);
        let secs = &["--tenants", "--dilation", "8", "--guest-clock", "--tn-seconds", "2"];
        assert_eq!(tn(secs), Some((None, 2)));
        assert_eq!(tn(&["--tenants", "--tn-ops", "9"]), Some((Some(9), 20)));
        let e = parse(&["--tenants", "--tn-ops", "9", "--tn-seconds", "2"]).unwrap_err();
        assert!(e.to_string().contains("--tn-seconds"), "{e}");
        assert!(parse(&["--tn-ops", "0"]).is_err());
    }

    fn dilated_opts() -> Options {
        parse(&["--dilation", "64", "--guest-clock"]).unwrap().unwrap()
    }

    #[test]
    fn tenants_and_dilation_options_are_parsed_and_checked() {
        let p = parse;
        let t = p(&["--tenants", "--smoke", "--tn-seconds", "3", "--seed", "4"]).unwrap().unwrap();
        let tw = t.tenants.unwrap();
        assert_eq!((tw.num, tw.seconds, tw.seed), (4096, 3, 4));
        assert_eq!(tw.stripe_kib, 96, "whole program units by default");
        let chunked = p(&["--tenants", "--tn-stripe-kib", "32"]).unwrap().unwrap();
        assert_eq!(chunked.tenants.unwrap().stripe_kib, 32);
        assert_eq!(tw.filler_mib, apps_tenants::FILLER_MIB, "filler before the reads by default");
        let unfilled = p(&["--tenants", "--tn-filler-mib", "0"]).unwrap().unwrap();
        assert_eq!(unfilled.tenants.unwrap().filler_mib, 0);
        assert!(p(&[]).unwrap().unwrap().tenants.is_none());
        assert_eq!(p(&["--dilation", "8"]).unwrap().unwrap().dilations, [8.0]);
        assert_eq!(p(&["--dilations", "2, 16"]).unwrap().unwrap().dilations, [2.0, 16.0]);
        let last = p(&["--dilations", "2,4", "--dilation", "3"]).unwrap().unwrap();
        assert_eq!(last.dilations, [3.0], "the last of --dilation and --dilations wins");
        assert!(p(&[]).unwrap().unwrap().dilations.is_empty());
        for bad in [&["--dilation", "0.5"][..], &["--dilation", "2,4"], &["--dilations", "4"]] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        assert!(p(&["--dilations", "2,x"]).is_err() && p(&["--dilation", "inf"]).is_err());
        assert_eq!(dilated("emu:zn540".into(), Some(4.0)), "emu:zn540,dilation=4");
        assert_eq!(dilated("emu:zn540".into(), None), "emu:zn540");
        let dir = Path::new("run");
        let t = traced("emu:zn540".into(), Some(9), dir, "zns");
        assert_eq!(
            t,
            format!("emu:zn540,trace={},trace_events=9", dir.join("zns.trace.json").display())
        );
        assert_eq!(traced("emu:zn540".into(), None, dir, "zns"), "emu:zn540");
        assert_eq!(parse(&["--trace"]).unwrap().unwrap().trace, Some(500_000));
        assert_eq!(parse(&["--trace", "7"]).unwrap().unwrap().trace, Some(7));
        assert!(parse(&["--trace", "0"]).is_err());
        assert_eq!(parse(&[]).unwrap().unwrap().trace, None);
        // A CPU per tenant unless --smp says otherwise; 2 for the stacks.
        assert_eq!(parse(&["--tenants"]).unwrap().unwrap().vm.smp, 4);
        assert_eq!(parse(&["--tenants", "--smp", "2"]).unwrap().unwrap().vm.smp, 2);
        assert_eq!(parse(&[]).unwrap().unwrap().vm.smp, 2);
        assert_eq!(parse(&["--smp", "3"]).unwrap().unwrap().vm.smp, 3);
    }

    #[test]
    fn repeats_need_factors_and_pooled_reports_compare_by_factor() {
        let o = parse(&["--tenants", "--dilations", "128,256", "--repeat", "3"]).unwrap().unwrap();
        assert_eq!((o.repeat, o.dilations.as_slice()), (3, &[128.0, 256.0][..]));
        assert_eq!(parse(&["--dilations", "2,4"]).unwrap().unwrap().repeat, 1);
        let e = run(&parse(&["--repeat", "2"]).unwrap().unwrap()).unwrap_err();
        assert!(e.to_string().contains("--dilation"), "{e}");
        assert_eq!(parse(&["--dilation", "8", "--repeat", "2"]).unwrap().unwrap().repeat, 2);
        assert!(parse(&["--dilations", "2,4", "--repeat", "0"]).is_err());
        assert!(parse(&["--pool", "a.json", "--dilation", "2"]).is_err());
        assert!(parse(&["--pool", "a.json", "--guest-clock"]).is_err());
        // Two reports of runs at 8 and 16, and 16 again: pooled, 16 has
        // two runs, its mean is compared with 8's.
        let dir = tempfile::tempdir().unwrap();
        let ph = |ops: f64| json!({"fill": {"a": {"ops_per_sec": ops}}});
        let at = |f: f64, el: f64| {
            json!({"dilation": f, "report": {"tenants": {"modes": {
                "elastic": {"phases": ph(el)}, "static": {"phases": ph(100.0)}}}}})
        };
        let one = dir.path().join("one.json");
        let two = dir.path().join("two.json");
        let write =
            |p: &Path, runs: Value| fs::write(p, json!({"runs": runs}).to_string()).unwrap();
        write(&one, json!([at(8.0, 100.0), at(16.0, 104.0)]));
        write(&two, json!([at(16.0, 112.0)]));
        let out = dir.path().join("out");
        let (o, t, s) = (out.to_str().unwrap(), one.to_str().unwrap(), two.to_str().unwrap());
        run(&parse(&["--pool", t, s, "--out", o]).unwrap().unwrap()).unwrap();
        let pooled: Value = serde_json::from_str(
            &fs::read_to_string(out.join("apps-dilations-pooled.json")).unwrap(),
        )
        .unwrap();
        let row = &pooled["comparison"]["ratios"][0];
        assert_eq!(pooled["comparison"]["runs_per_factor"], json!([1, 2]));
        assert!((row["values"][1].as_f64().unwrap() - 1.08).abs() < 1e-9, "{row}");
        assert_eq!(row["agree_within_10_pct"], true, "{row}");
        // --dilations picks the factors and their order: 16 first, then 8.
        let picked = parse(&["--pool", t, s, "--dilations", "16,8", "--out", o]).unwrap().unwrap();
        run(&picked).unwrap();
        let pooled: Value = serde_json::from_str(
            &fs::read_to_string(out.join("apps-dilations-pooled.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(pooled["comparison"]["factors"], json!([16.0, 8.0]));
        assert_eq!(pooled["comparison"]["runs_per_factor"], json!([2, 1]));
        let none = parse(&["--pool", t, "--dilations", "2,4", "--out", o]).unwrap().unwrap();
        assert!(run(&none).unwrap_err().to_string().contains("no run at the factors"));
        // Not a dilation report, or a missing file: an error naming it.
        let bad = dir.path().join("bad.json");
        fs::write(&bad, "{}").unwrap();
        let e = run(&parse(&["--pool", bad.to_str().unwrap()]).unwrap().unwrap()).unwrap_err();
        assert!(e.to_string().contains("bad.json") && e.to_string().contains("no runs"), "{e}");
        // A single run's report counts as one run at its factor.
        let single = dir.path().join("single.json");
        let mut r = at(8.0, 110.0)["report"].clone();
        r["clock"] = json!({"dilation": 8.0});
        fs::write(&single, r.to_string()).unwrap();
        let (g, o) = (single.to_str().unwrap(), out.to_str().unwrap());
        run(&parse(&["--pool", t, g, "--out", o]).unwrap().unwrap()).unwrap();
        let pooled: Value = serde_json::from_str(
            &fs::read_to_string(out.join("apps-dilations-pooled.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(pooled["comparison"]["runs_per_factor"], json!([2, 1]), "{pooled}");
        let gone = dir.path().join("gone.json");
        assert!(run(&parse(&["--pool", gone.to_str().unwrap()]).unwrap().unwrap()).is_err());
    }

    #[test]
    fn bad_values_are_errors_that_name_the_option() {
        for (args, name) in [
            (&["--apps", "rocksdb,postgres"][..], "--apps"),
            (&["--fs", "ext4,btrfs"], "--fs"),
            (&["--sb-workloads", ","], "--sb-workloads"),
            (&["--num", "lots"], "--num"),
            (&["--num", "-1"], "--num"),
            (&["--fill", "half"], "--fill"),
            (&["--value-size", "1k"], "--value-size"),
            (&["--zones", "-16"], "--zones"),
            (&["--seed", "0x10"], "--seed"),
            (&["--sb-tables", "x"], "--sb-tables"),
            (&["--tn-num", "x"], "--tn-num"),
            (&["--tn-seconds", "-3"], "--tn-seconds"),
            (&["--tn-zone-scale", "3"], "--tn-zone-scale"),
            (&["--tn-stripe-kib", "64"], "--tn-stripe-kib"),
            (&["--tn-stripe-kib", "2"], "--tn-stripe-kib"),
            (&["--tn-filler-mib", "lots"], "--tn-filler-mib"),
            (&["--dilation", "0"], "--dilation"),
            (&["--dilations", "8"], "--dilations"),
            (&["--timeout", "soon"], "--timeout"),
            (&["--memory", "lots"], "--memory"),
            (&["--frobnicate"], "--frobnicate"),
        ] {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.contains(name), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_profiles_take_the_zn540_timing_model() {
        for t in [zns_profile(), conv_profile(), meta_profile()] {
            assert!(t.contains("[timing]") && t.contains("zone_stripe_dies = 32"), "{t}");
        }
        assert!(zns_profile().contains("zone_capacity = 768"));
        let base = apps_tenants::with_zone_stripe(
            &profile("apps-tenants", &apps_tenants::base_namespace()),
            96,
        );
        assert_eq!(base.matches("zone_stripe_kib").count(), 1, "{base}");
        assert!(base.contains("[timing]\nzone_stripe_kib = 96\n"), "{base}");
        assert_eq!(
            base.lines().count(),
            profile("x", &apps_tenants::base_namespace()).lines().count()
        );
        assert!(conv_profile().contains("segment_blocks = 768"));
    }

    #[test]
    fn the_metadata_drive_is_conventional_and_whole_sections() {
        let t = meta_profile();
        assert!(t.contains("kind = \"conventional\"") && t.contains("over_provisioning = 0.25"));
        // Exposed blocks: the flash over 1 + spare, as the emulator floors it.
        let exposed = (META_FLASH_ZONES as f64 * 768.0 / 1.25).floor() as u64;
        assert_eq!(exposed * 4096, 72 << 20);
        assert_eq!((exposed * 4096) % (4 << 20), 0, "whole 4 MiB sections");
    }

    #[test]
    fn missing_figures_fail_the_run_and_the_table_shows_ratios() {
        let w = Workload {
            num: 10,
            value_size: 100,
            fill_percent: 0,
            rww_seconds: 0,
            overwrite: false,
            precondition: false,
            seed: 1,
            db_bench: true,
            device_bound: false,
        };
        let phase = |ops: f64| {
            json!({"ops_per_sec": ops, "mb_per_sec": 1.0, "p99_us": 2.0, "p999_us": 3.0,
                   "host_mib_written": 4.0, "smart_mib_written": 4.0, "media_mib_written": 5.0,
                   "device_waf": 1.25, "f2fs_gc_moved_blocks": 0, "latency_of": "writes"})
        };
        let mut r = json!({"workload": {"num": 10}, "zones": 160, "sides": {
            "f2fs-zns": {"filesystem": "f2fs", "phases": {"fillrandom": phase(125.0)}},
            "ext4-conv": {"filesystem": "ext4", "phases": {"fillrandom": phase(100.0)}},
        }});
        assert!(missing(&r, &w, None).is_empty());
        let t = markdown(&r);
        assert!(t.contains("fillrandom f2fs-zns / ext4-conv: +25.0 %"), "{t}");
        assert!(t.contains("| 4.0 | 4.0 | 5.0 | 1.25 | 0 |"), "{t}");
        r["sides"]["ext4-conv"]["phases"]["fillrandom"]["p999_us"] = Value::Null;
        assert_eq!(missing(&r, &w, None), ["ext4-conv fillrandom: no p999_us"]);
        r["sides"]["f2fs-zns"]["phases"]["fillrandom"]["device_waf"] = Value::Null;
        assert_eq!(missing(&r, &w, None)[1], "f2fs-zns fillrandom: no device_waf");
    }

    #[test]
    fn mysql_figures_are_required_tabled_and_compared() {
        let w = Workload { db_bench: false, ..parse(&[]).unwrap().unwrap().workload };
        let sb = Sysbench {
            tables: 1,
            table_size: 10,
            seconds: 1,
            events: None,
            threads: 1,
            buffer_pool_mib: 16,
            workloads: vec!["oltp_read_only", "oltp_write_only"],
            seed: 1,
            clean_start: false,
        };
        let counters = |waf: Value| {
            json!({"host_mib_written": 4.0, "smart_mib_written": 4.0, "media_mib_written": 5.0,
                   "device_waf": waf, "f2fs_gc_moved_blocks": 3, "elapsed_s": 9})
        };
        let run = |tps: f64, waf: Value| {
            let mut v = counters(waf);
            v["tps"] = json!(tps);
            v["qps"] = json!(tps * 20.0);
            v["p95_ms"] = json!(7.5);
            v["p99_ms"] = json!(12.25);
            v
        };
        let side = |fs: &str, tps: f64| {
            json!({"filesystem": fs, "phases": {}, "mysql": {"phases": {
                "sysbench_prepare": counters(json!(1.0)),
                "oltp_read_only": run(tps, Value::Null),
                "oltp_write_only": run(tps / 2.0, json!(1.5)),
            }}})
        };
        let mut r = json!({"workload": {"db_bench": false}, "zones": 160,
            "mysql": {"tables": 1, "table_size": 10, "threads": 1, "seconds": 1, "buffer_pool_mib": 16},
            "sides": {"f2fs-zns": side("f2fs", 150.0), "ext4-conv": side("ext4", 100.0)}});
        // A read-only run may give the device nothing to write.
        assert!(missing(&r, &w, Some(&sb)).is_empty(), "{:?}", missing(&r, &w, Some(&sb)));
        let t = markdown(&r);
        assert!(!t.contains("db_bench"), "{t}");
        assert!(t.contains("1 threads, 1 s per workload"), "{t}");
        let mut counted = r.clone();
        counted["mysql"]["events"] = json!(200);
        let c = markdown(&counted);
        assert!(c.contains("1 threads, 200 transactions per workload"), "{c}");
        assert!(t.contains("| f2fs-zns | oltp_write_only | 75.0 | 1500 | 7.50 | 12.25 | 9 | 4.0 | 4.0 | 5.0 | 1.50 | 3 |"), "{t}");
        assert!(
            t.find("| ext4-conv | sysbench_prepare |") < t.find("| ext4-conv | oltp_read_only |")
        );
        assert!(t.contains("oltp_read_only f2fs-zns / ext4-conv: +50.0 % (p99 +0.0 %)"), "{t}");
        r["sides"]["ext4-conv"]["mysql"]["phases"]["oltp_write_only"]["p99_ms"] = Value::Null;
        r["sides"]["ext4-conv"]["mysql"]["phases"]["oltp_write_only"]["device_waf"] = Value::Null;
        r["sides"]["f2fs-zns"]["mysql"]["phases"]["sysbench_prepare"]["f2fs_gc_moved_blocks"] =
            Value::Null;
        assert_eq!(
            missing(&r, &w, Some(&sb)),
            [
                "ext4-conv mysql oltp_write_only: no p99_ms",
                "ext4-conv mysql oltp_write_only: no device_waf",
                "f2fs-zns mysql sysbench_prepare: no f2fs_gc_moved_blocks"
            ]
        );
        r["sides"]["f2fs-zns"]["mysql"] = Value::Null;
        assert_eq!(missing(&r, &w, Some(&sb)).len(), 2 + 5 + 7 + 8);
    }

    #[test]
    fn f2fs_gc_and_checkpoints_are_counted_around_a_phase() {
        let mut c = Collected::default();
        for (point, [moved, fg, bg, cpf, cpb]) in
            [("before-p", [100, 10, 1, 20, 2]), ("after-p", [160, 14, 1, 27, 3])]
        {
            for (name, v) in [
                ("moved_blocks_foreground", moved),
                ("moved_blocks_background", 0),
                ("gc_foreground_calls", fg),
                ("gc_background_calls", bg),
                ("cp_foreground_calls", cpf),
                ("cp_background_calls", cpb),
            ] {
                c.watch(&format!("APPS-STAT f2fs-zns {point} f2fs_{name} {v}"));
            }
        }
        let (v, _) = around(&c, "f2fs-zns", "p");
        assert_eq!(v["f2fs_gc_moved_blocks"], 60);
        assert_eq!(v["f2fs_gc_calls"], 4);
        assert_eq!(v["f2fs_gc_foreground_calls"], 4);
        assert_eq!(v["f2fs_checkpoints"], 8);
        // A kernel without the checkpoint counters: none, not zero.
        let (v, _) = around(&c, "ext4-conv", "p");
        assert!(v["f2fs_checkpoints"].is_null() && v["f2fs_gc_foreground_calls"].is_null());
    }

    #[test]
    fn the_device_waf_is_media_bytes_over_the_hosts_data_units() {
        let mut c = Collected::default();
        let line = |side: &str, point: &str, media: u64, units: u64| {
            [
                format!("APPS-STAT {side} {point} smart_data_units_written {units}"),
                format!(
                    r#"APPS-OCP {side} {point} {{"Physical media units written":{{"hi":0,"lo":{media}}},"Physical media units read":{{"hi":0,"lo":0}}}}"#
                ),
            ]
        };
        for l in line("ext4-conv", "before-fillrandom", 1_024_000, 10).into_iter().chain(line(
            "ext4-conv",
            "after-fillrandom",
            4_096_000,
            20,
        )) {
            c.watch(&l);
        }
        // 3,072,000 media bytes for 10 data units of 512,000 bytes.
        let waf = device_waf(&c, "ext4-conv", "before-fillrandom", "after-fillrandom").unwrap();
        assert!((waf - 0.6).abs() < 1e-12, "{waf}");
        for l in line("ext4-conv", "end", 4_096_000, 20) {
            c.watch(&l);
        }
        let e = device_waf(&c, "ext4-conv", "after-fillrandom", "end").unwrap_err();
        assert!(e.contains("no data unit"), "{e}");
        let e = device_waf(&c, "ext4-conv", "mkfs", "end").unwrap_err();
        assert!(e.contains("C0h"), "{e}");
    }
}
