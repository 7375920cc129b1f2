//! `cargo xtask apps --tenants`: four tenants as the namespaces of one
//! `zns serve`, eZNS logical zones (`mode = "elastic"`) against static
//! striping (`mode = "static"`) over the same ZN540 model, each tenant an
//! f2fs with a db_bench of its own, all four running together.
//!
//! Each mode has its own `zns serve` and base device (a configuration file
//! each, written by the task): the four tenants `a` to `d` are namespaces 1
//! to 4, and the small conventional drives that hold their f2fs metadata
//! ([`crate::apps::meta_profile`]) namespaces 5 to 8. The
//! guest runs, per mode:
//!
//! 1. `fill`: fillrandom on every tenant at once (each builds its database);
//! 2. `overwrite-together`: overwrite on every tenant for the same seconds;
//! 3. `overwrite-alone`: overwrite on `a` alone, the others idle (their
//!    filesystems mounted, doing nothing): ballooning's case, a busy
//!    tenant that may borrow the idle tenants' spares;
//! 4. `read-alone`: readrandom on `a`, the others idle, once `a`'s
//!    database is settled (compacted whole, filler
//!    written and deleted: [`FILLER_MIB`]) so that it reads from the dies;
//! 5. `read-beside-writers`: readrandom on `a` while `b`, `c` and `d`
//!    overwrite: isolation's case, a light reader beside heavy writers.
//!
//! Every db_bench line reaches the host as `APPS-TN MODE PHASE TENANT
//! LINE`; the host takes each run's throughput and tails (p99, p99.9) and
//! sets the claims beside each other: `a`'s gain alone over together
//! (ballooning) and `a`'s read tail beside writers over alone (isolation),
//! per mode.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::apps;
use crate::apps_guest::{self, Collected, Workload};

/// The tenants, in namespace order.
pub const TENANTS: [&str; 4] = ["a", "b", "c", "d"];

/// The modes compared, each a `zns serve` of its own.
pub const MODES: [&str; 2] = ["elastic", "static"];

/// The phases, in the order they run.
pub const PHASES: [&str; 5] =
    ["fill", "overwrite-together", "overwrite-alone", "read-alone", "read-beside-writers"];

/// Prefix of a tenant's db_bench line.
pub const TN: &str = "APPS-TN ";

/// The side mode `mode`'s device counters are recorded under.
pub fn side(mode: &str) -> String {
    format!("tenants-{mode}")
}

/// The subsystem of mode `mode`.
pub fn nqn(mode: &str) -> String {
    format!("nqn.2026-11.io.znskit:apps-tenants-{mode}")
}

/// What the tenants run.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantWorkload {
    /// Keys each tenant's fillrandom writes.
    pub num: u64,
    /// Value bytes.
    pub value_size: u32,
    /// Seconds of each timed phase (overwrite, readrandom).
    pub seconds: u32,
    /// Operations of each tenant in each timed phase instead of
    /// `seconds` (db_bench's `--writes`, `--reads`): what a guest on a
    /// dilated clock runs, whose seconds last F times longer.
    pub ops: Option<u64>,
    /// Physical zones of each mode's base device.
    pub zones: u32,
    /// Physical zones' capacity per logical zone (eZNS's `zone_scale`).
    pub zone_scale: u32,
    /// Logical zones of each tenant.
    pub tenant_zones: u32,
    /// Active (and open) logical zones of each tenant.
    pub active_zones: u32,
    /// db_bench's seed.
    pub seed: u64,
    /// db_bench bound to the device ([`apps_guest::DEVICE_BOUND`]).
    pub device_bound: bool,
    /// KiB a base zone's data rotates over the drive's dies in (the
    /// timing model's `zone_stripe_kib`, a divisor of the program unit).
    pub stripe_kib: u32,
    /// MiB tenant `a` writes, then deletes, through each of its f2fs's
    /// data logs before the read phases ([`FILLER_MIB`]; 0: none).
    pub filler_mib: u32,
}

impl TenantWorkload {
    /// The full run's sizes, or the smaller ones of `--smoke`.
    pub fn new(smoke: bool, seed: u64) -> TenantWorkload {
        TenantWorkload {
            num: if smoke { 4096 } else { 8192 },
            value_size: 1000,
            seconds: if smoke { 8 } else { 20 },
            ops: None,
            zones: BASE_ZONES,
            zone_scale: MAX_WIDTH,
            tenant_zones: TENANT_PHYSICAL_ZONES / MAX_WIDTH,
            active_zones: 8,
            seed,
            device_bound: false,
            stripe_kib: PROGRAM_UNIT_KIB,
            filler_mib: FILLER_MIB,
        }
    }

    /// Logical zones of `scale` physical zones each (1, 2, 4 or 8: a
    /// logical zone's size must be a power of two for the kernel), the
    /// tenants' capacity unchanged.
    pub fn with_zone_scale(self, scale: u32) -> TenantWorkload {
        TenantWorkload { zone_scale: scale, tenant_zones: TENANT_PHYSICAL_ZONES / scale, ..self }
    }

    /// MiB of keys and values each tenant's fillrandom writes.
    pub fn db_mib(&self) -> f64 {
        (self.num * (16 + self.value_size as u64)) as f64 / (1u64 << 20) as f64
    }
}

/// The ZN540 model's program unit in KiB (16 KiB pages, 2 planes, TLC):
/// the tenants' base zones rotate over the dies in whole units by
/// default. A zone then stages at most one unit that its die has not
/// programmed, where the profile's 32 KiB chunks stage a whole stripe
/// (32 dies' units, 3 MiB): on a real zone of 1,077 MiB a sliver, on the
/// cut-down zones of 3 MiB their whole data until they are full, so that
/// the tenants' reads of their recent data would be served by the buffer.
pub const PROGRAM_UNIT_KIB: u32 = 96;

/// MiB of filler per f2fs data log that tenant `a` writes and deletes
/// before the read phases, so that the database it then reads lies on
/// the dies rather than in the drive's staging. A logical zone of the
/// widest group keeps [`MAX_WIDTH`] physical zones open, each with up to
/// one unprogrammed [`PROGRAM_UNIT_KIB`] unit (768 KiB in all); the
/// overwrite phase that runs just before leaves `a`'s newest tables in
/// those units, and how much of the database that is varies from run to
/// run with where its compactions and zone ends fell. 4 MiB moves every
/// physical zone of the log on by more than a unit.
pub const FILLER_MIB: u32 = 4;

/// The f2fs data logs a file's data goes to by its name, with
/// mkfs.f2fs's default extension lists: warm (no extension on a list),
/// cold (`iso` is on the cold list) and hot (`db` is on the hot list).
pub const FILLER_FILES: [&str; 3] = ["filler", "filler.iso", "filler.db"];

/// The base device's active zones: room for four tenants' shares.
pub const BASE_ACTIVE: u32 = 96;

/// The widest stripe group (eZNS's `max_width`).
pub const MAX_WIDTH: u32 = 8;

/// Each tenant's capacity in physical zones (1,152 MiB: 48 sections of
/// 24 MiB for f2fs, which needs a few dozen to collect garbage in): four
/// tenants claim 1,536 of the base device's zones, the rest is the
/// surplus wide groups take.
pub const TENANT_PHYSICAL_ZONES: u32 = 384;

/// The base device's zones (its data is kept only where written).
pub const BASE_ZONES: u32 = 2048;

/// The eZNS configuration of `mode` over the base device `device`.
pub fn config(mode: &str, device: &str, w: &TenantWorkload) -> String {
    let mut s = format!(
        r#"# Four tenants over one ZN540 model (zones cut down), {mode} striping.
device = "{device}"
mode = "{mode}"
zone_scale = {scale}
stripe_unit_kib = 64
max_width = {MAX_WIDTH}
headroom = 8
idle_ms = {IDLE_MS}
tick_ms = 50
"#,
        scale = w.zone_scale
    );
    for t in TENANTS {
        let _ = write!(
            s,
            "\n[[tenant]]\nname = \"{t}\"\nzones = {}\nactive_zones = {}\n",
            w.tenant_zones, w.active_zones
        );
    }
    s
}

/// The device profile `profile` (with a `[timing]` table) with its
/// zones' data rotating over the dies in `stripe_kib` KiB
/// (`zone_stripe_kib`, set first in the table).
pub fn with_zone_stripe(profile: &str, stripe_kib: u32) -> String {
    let mut s = String::with_capacity(profile.len() + 24);
    for line in profile.lines() {
        let key = line.trim_start();
        if key.starts_with("zone_stripe_kib") {
            continue;
        }
        s.push_str(line);
        s.push('\n');
        if key == "[timing]" {
            let _ = writeln!(s, "zone_stripe_kib = {stripe_kib}");
        }
    }
    s
}

/// Stripe unit of the zn540 profile, which reports written before
/// `base_zone_stripe_kib` was recorded had.
const PROFILE_STRIPE_KIB: u64 = 32;

/// The base device's namespace: the apps profile's 4 MiB zones of 3 MiB
/// capacity, with active zones for four tenants' shares.
pub fn base_namespace() -> String {
    format!(
        "[[namespace]]
kind = \"zoned\"
block_size = 4096
zones = {BASE_ZONES}
zone_size = 1024
zone_capacity = 768
max_open = {BASE_ACTIVE}
max_active = {BASE_ACTIVE}
descriptor_extension_bytes = 0
read_across_zone_boundaries = true
"
    )
}

/// db_bench's command for tenant `t` of `mode`: the apps' options on the
/// tenant's filesystem, then `extra`.
fn db_bench(mode: &str, t: &str, w: &TenantWorkload, extra: &str) -> String {
    let common = apps_guest::db_bench_common(&Workload {
        num: w.num,
        value_size: w.value_size,
        fill_percent: 0,
        rww_seconds: 0,
        overwrite: false,
        precondition: false,
        seed: w.seed,
        db_bench: true,
        device_bound: w.device_bound,
    });
    format!("{} {extra}", common.replace("$MNT", &format!("/mnt/{mode}-{t}")))
}

/// Who runs what in `phase`: (tenant, db_bench's benchmark, its options).
pub fn phase_runs(phase: &str, w: &TenantWorkload) -> Vec<(&'static str, &'static str, String)> {
    let timed = |b: &str| {
        let bound = match (w.ops, b) {
            (Some(n), "readrandom") => format!("--reads={n}"),
            (Some(n), _) => format!("--writes={n}"),
            (None, _) => format!("--duration={}", w.seconds),
        };
        format!("--benchmarks={b} --use_existing_db=1 {bound}")
    };
    match phase {
        "fill" => TENANTS
            .iter()
            .map(|t| (*t, "fillrandom", "--benchmarks=fillrandom --use_existing_db=0".into()))
            .collect(),
        "overwrite-together" => {
            TENANTS.iter().map(|t| (*t, "overwrite", timed("overwrite"))).collect()
        }
        "overwrite-alone" => vec![("a", "overwrite", timed("overwrite"))],
        "read-alone" => vec![("a", "readrandom", timed("readrandom"))],
        _ => std::iter::once(("a", "readrandom", timed("readrandom")))
            .chain(TENANTS[1..].iter().map(|t| (*t, "overwrite", timed("overwrite"))))
            .collect(),
    }
}

/// Device time without I/O after which a tenant is idle (`idle_ms`).
pub const IDLE_MS: u64 = 500;

/// Seconds the guest waits (by its own clock) before a phase where `a`
/// runs alone, so the arbiter sees the others idle: `IDLE_MS` of device
/// time (`dilation` times longer in the guest's time on a dilated device
/// clock, as long on a guest clock dilated with it) and a fifth more, two
/// of the arbiter's ticks (a fixed margin in the guest's seconds would
/// cost F times as much on a dilated guest clock).
pub fn idle_wait_s(dilation: f64) -> f64 {
    IDLE_MS as f64 * 1.2 * dilation / 1000.0
}

/// The guest's lines for mode `mode` (its target on `port`): connect, mkfs
/// and mount each tenant's f2fs, the phases, umount, disconnect.
pub fn mode_lines(mode: &str, port: u16, w: &TenantWorkload, dilation: f64) -> String {
    let nqn = nqn(mode);
    let n = TENANTS.len();
    let mut s = format!(
        r#"# ---- tenants, {mode} ----
run connect-{mode} nvme connect -t tcp -a 10.0.2.2 -s {port} -n {nqn} $CONNECT_OPTS
# The kernel scans namespaces in no fixed order: wait for every one.
all_up() {{ for n in {all}; do [ -n "$(disk_of {nqn} $n)" ] || return 1; done; }}
i=0
while [ $i -lt 100 ] && ! all_up; do sleep 0.1; i=$((i + 1)); done
# The device's counters are the controller's: every namespace of the
# mode. Beside them the sectors the kernel wrote to those namespaces, the
# host's bytes without the SMART log's rounding.
SIDE={side}; CTRL=$(ctrl_of {nqn}); DISKS=$(for n in {all}; do disk_of {nqn} $n; done)
mode_counters() {{
    device_counters $1
    n=0; r=0
    for d in $DISKS; do
        # Fields 3 and 7: sectors read and written (one read of the file).
        read -r _r1 _r2 rs _r4 _w1 _w2 ws _rest < /sys/block/$d/stat
        n=$((n + ws)); r=$((r + rs))
    done
    apps_stat $1 host_sectors $n
    apps_stat $1 host_read_sectors $r
}}
mode_counters start
"#,
        side = side(mode),
        all = (1..=2 * n).map(|i| i.to_string()).collect::<Vec<_>>().join(" ")
    );
    for (i, t) in TENANTS.iter().enumerate() {
        let (data, meta) = (i + 1, i + 1 + n);
        let _ = write!(
            s,
            r#"D=$(disk_of {nqn} {data}); META=$(disk_of {nqn} {meta})
say "{mode} tenant {t}: $D ($(cat /sys/block/$D/size 2>/dev/null) sectors, $(cat /sys/block/$D/queue/max_open_zones 2>/dev/null) open), metadata $META"
expect zoned-{mode}-{t} host-managed cat /sys/block/$D/queue/zoned
echo mq-deadline > /sys/block/$D/queue/scheduler
mkdir -p /mnt/{mode}-{t}
run mkfs-{mode}-{t} mkfs.f2fs -q -f -m -c /dev/$D /dev/$META
run mount-{mode}-{t} mount -t f2fs /dev/$META /mnt/{mode}-{t}
"#
        );
    }
    for p in PHASES {
        if p == "read-alone" {
            s.push_str(&settle_lines(mode, w));
        }
        s.push_str("sync; echo 3 > /proc/sys/vm/drop_caches\n");
        // The others idle long enough for the arbiter to see it (idle_ms),
        // counted from the sync's last write.
        let _ = writeln!(s, "mode_counters before-{p}");
        if p.ends_with("alone") {
            let _ = writeln!(s, "sleep {:.1}", idle_wait_s(dilation));
        }
        let _ = writeln!(s, "say \"RUN tenants-{mode}-{p}\"\nt0=$(now)");
        let runs = phase_runs(p, w);
        for (t, _, extra) in &runs {
            let _ = writeln!(
                s,
                "( {} > /tmp/tn-{t}.out 2>&1 < /dev/null; echo $? > /tmp/tn-{t}.rc ) &",
                db_bench(mode, t, w, extra)
            );
        }
        s.push_str("wait\n");
        for (t, _, _) in &runs {
            let _ = writeln!(
                s,
                r#"sed "s/^/{TN}{mode} {p} {t} /" /tmp/tn-{t}.out
rc=$(cat /tmp/tn-{t}.rc); if [ "$rc" != 0 ]; then fail=1; say "FAILED tenants-{mode}-{p}-{t} rc=$rc"; fi"#
            );
        }
        let _ = writeln!(s, "say \"END tenants-{mode}-{p} ($(( $(now) - t0 )) s)\"");
        let _ = writeln!(s, "sync; mode_counters after-{p}");
    }
    for t in TENANTS {
        let _ = writeln!(s, "run umount-{mode}-{t} umount /mnt/{mode}-{t}");
    }
    s.push_str("mode_counters end\n");
    let _ = writeln!(s, "run disconnect-{mode} nvme disconnect -n {nqn}");
    s
}

/// The guest's lines that settle tenant `a`'s database of `mode` before
/// the read phases, after the counters of the phase before and before
/// those of the reads, so no phase counts their writes (the whole run's
/// device WAF does): db_bench compacts the whole database, the memtable
/// the overwrite left in the log included, and returns when it is done
/// (else the reader's own open would flush that memtable and compact
/// what the overwrite left pending, and read the new tables from where
/// the drive stages them; `waitforcompaction` would first sleep 5 s of
/// the guest's clock, F times longer on a dilated one), then
/// [`FILLER_FILES`] of `w.filler_mib` MiB each, fsynced and deleted.
/// Both modes read the same shape of database, one whose shape does not
/// depend on where the overwrite's compactions stopped. Nothing when
/// `w.filler_mib` is 0.
fn settle_lines(mode: &str, w: &TenantWorkload) -> String {
    if w.filler_mib == 0 {
        return String::new();
    }
    let dir = format!("/mnt/{mode}-a");
    let files = FILLER_FILES.map(|f| format!("{dir}/{f}")).join(" ");
    format!(
        "# a's database settled, and its newest data out of the drive's staging.\n\
         run compact-{mode}-a {}\n\
         run filler-{mode}-a sh -c 'for f in {files}; do \
         dd if=/dev/zero of=$f bs=1M count={n} conv=fsync status=none || exit 1; done'\n\
         run filler-rm-{mode}-a rm {files}\n",
        db_bench(mode, "a", w, "--benchmarks=compact --use_existing_db=1"),
        n = w.filler_mib
    )
}

/// The tenants' db_bench lines: (mode, phase, tenant) -> lines.
#[derive(Debug, Default)]
pub struct TenantLines {
    /// Lines by mode, phase and tenant.
    pub lines: BTreeMap<(String, String, String), Vec<String>>,
}

impl TenantLines {
    /// Takes `line` if it is a tenant's.
    pub fn watch(&mut self, line: &str) {
        let Some(rest) = line.trim_end_matches(['\r', '\n']).strip_prefix(TN) else { return };
        let mut it = rest.splitn(4, ' ');
        if let (Some(m), Some(p), Some(t)) = (it.next(), it.next(), it.next()) {
            let text = it.next().unwrap_or("").to_string();
            self.lines.entry((m.into(), p.into(), t.into())).or_default().push(text);
        }
    }
}

/// Relative change of `b` over `a`, percent.
fn change(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => Some((b / a - 1.0) * 100.0),
        _ => None,
    }
}

/// The tenants' results: per mode, phase and tenant db_bench's figures;
/// per mode the claims' figures (ballooning, isolation).
pub fn results(w: &TenantWorkload, all: &Collected, configs: &[(String, String)]) -> Value {
    let c = &all.tenants;
    let mut modes = serde_json::Map::new();
    for m in MODES {
        let mut phases = serde_json::Map::new();
        for p in PHASES {
            let mut tenants = serde_json::Map::new();
            for (t, bench, _) in phase_runs(p, w) {
                let key = (m.to_string(), p.to_string(), t.to_string());
                let lines = c.lines.get(&key).cloned().unwrap_or_default();
                let f = apps_guest::parse_db_bench(bench, &lines);
                tenants.insert(
                    t.into(),
                    json!({
                        "benchmark": bench,
                        "ops_per_sec": f.ops_per_sec,
                        "mb_per_sec": f.mb_per_sec,
                        "operations": f.operations,
                        "p50_us": f.p50_us,
                        "p99_us": f.p99_us,
                        "p999_us": f.p999_us,
                        "latency_of": if bench == "readrandom" { "reads" } else { "writes" },
                    }),
                );
            }
            phases.insert(p.into(), Value::Object(tenants));
        }
        let f = |p: &str, k: &str| phases.get(p).and_then(|v| v["a"][k].as_f64());
        let others = |p: &str| -> Option<f64> {
            let v = phases.get(p)?;
            TENANTS[1..].iter().map(|t| v[*t]["ops_per_sec"].as_f64()).sum()
        };
        let claims = json!({
            "ballooning": {
                "a_ops_together": f("overwrite-together", "ops_per_sec"),
                "a_ops_alone": f("overwrite-alone", "ops_per_sec"),
                "a_gain_alone_pct": change(f("overwrite-together", "ops_per_sec"), f("overwrite-alone", "ops_per_sec")),
                "a_p99_together_us": f("overwrite-together", "p99_us"),
                "a_p99_alone_us": f("overwrite-alone", "p99_us"),
            },
            "isolation": {
                "a_read_p99_alone_us": f("read-alone", "p99_us"),
                "a_read_p99_beside_writers_us": f("read-beside-writers", "p99_us"),
                "a_read_p999_alone_us": f("read-alone", "p999_us"),
                "a_read_p999_beside_writers_us": f("read-beside-writers", "p999_us"),
                "p99_change_pct": change(f("read-alone", "p99_us"), f("read-beside-writers", "p99_us")),
                "p999_change_pct": change(f("read-alone", "p999_us"), f("read-beside-writers", "p999_us")),
                "a_read_ops_alone": f("read-alone", "ops_per_sec"),
                "a_read_ops_beside_writers": f("read-beside-writers", "ops_per_sec"),
                "writers_ops_sum": others("read-beside-writers"),
            },
        });
        let device = device_counts(all, m);
        modes.insert(m.into(), json!({ "phases": phases, "claims": claims, "device": device }));
    }
    json!({
        "tenants": TENANTS,
        "keys_per_tenant": w.num,
        "value_size": w.value_size,
        "db_mib_per_tenant": w.db_mib(),
        "seconds_per_timed_phase": if w.ops.is_some() { Value::Null } else { json!(w.seconds) },
        "ops_per_timed_phase": w.ops,
        "base_zones": w.zones,
        "base_active_zones": BASE_ACTIVE,
        "tenant_logical_zones": w.tenant_zones,
        "zone_scale": w.zone_scale,
        "max_width": MAX_WIDTH,
        "tenant_active_zones": w.active_zones,
        "seed": w.seed,
        "device_bound": w.device_bound,
        "base_zone_stripe_kib": w.stripe_kib,
        "read_filler_mib_per_log": w.filler_mib,
        "configs": configs.iter().map(|(m, t)| (m.clone(), json!(t))).collect::<serde_json::Map<_, _>>(),
        "modes": modes,
    })
}

/// The device's own counts of mode `m` between points `from` and `to`:
/// the host's bytes (its controller's SMART data units), the media's (the
/// OCP extended SMART log's), their ratio, or why there is none.
fn device_span(all: &Collected, m: &str, from: &str, to: &str) -> Value {
    let n = side(m);
    let units = all.delta(&n, from, to, "smart_data_units_written");
    let media = all.delta(&n, from, to, "media_bytes_written");
    let waf = apps::device_waf(all, &n, from, to);
    let sectors = all.delta(&n, from, to, "host_sectors");
    let exact = match (media, sectors) {
        (Some(m), Some(s)) if s > 0 => Some(m as f64 / (s as f64 * 512.0)),
        _ => None,
    };
    // Reads: the kernel's bytes against the dies' (the OCP log counts no
    // read the drive served from its write buffer, data not yet
    // programmed).
    let read = all.delta(&n, from, to, "host_read_sectors").map(|s| s as f64 * 512.0);
    let media_read = all.delta(&n, from, to, "media_bytes_read").map(|b| b as f64);
    let from_buffer = match (read, media_read) {
        (Some(r), Some(m)) if r > 0.0 => Some((1.0 - m / r).max(0.0)),
        _ => None,
    };
    json!({
        "kernel_mib_read": read.map(apps::mib_of),
        "media_mib_read": media_read.map(apps::mib_of),
        "read_share_from_drive_buffer": from_buffer,
        "smart_data_units_written": units,
        "smart_mib_written": units.map(|u| apps::mib_of(u as f64 * apps::DATA_UNIT)),
        "kernel_mib_written": sectors.map(|s| apps::mib_of(s as f64 * 512.0)),
        "media_mib_written": media.map(|b| apps::mib_of(b as f64)),
        "device_waf": waf.ok(),
        "why_no_waf": waf.err(),
        "media_over_kernel_bytes": exact,
    })
}

/// Mode `m`'s device counts: per phase, and over the whole run (the
/// filesystems made to the last unmount).
fn device_counts(all: &Collected, m: &str) -> Value {
    let phases: serde_json::Map<String, Value> = PHASES
        .iter()
        .map(|p| {
            (p.to_string(), device_span(all, m, &format!("before-{p}"), &format!("after-{p}")))
        })
        .collect();
    json!({ "phases": phases, "whole_run": device_span(all, m, "start", "end") })
}

/// Every figure a tenants run must give; each missing one is a failure.
pub fn missing(r: &Value, w: &TenantWorkload) -> Vec<String> {
    let mut out = Vec::new();
    for m in MODES {
        for p in PHASES {
            for (t, bench, _) in phase_runs(p, w) {
                let v = &r["modes"][m]["phases"][p][t];
                let mut need = vec!["ops_per_sec", "p99_us", "p999_us"];
                if bench != "readrandom" {
                    need.push("mb_per_sec");
                }
                out.extend(
                    need.iter()
                        .filter(|k| v[**k].is_null())
                        .map(|k| format!("tenants {m} {p} {t}: no {k}")),
                );
            }
        }
        // The SMART log's WAF over the whole run (a phase may write less
        // than its data unit); the media's bytes over the kernel's for
        // every span that wrote.
        let d = &r["modes"][m]["device"];
        let whole = &d["whole_run"];
        if whole["device_waf"].is_null() {
            let why = whole["why_no_waf"].as_str().unwrap_or("no counters");
            out.push(format!("tenants {m} whole run: no device WAF ({why})"));
        }
        let spans = PHASES.iter().map(|p| (*p, &d["phases"][*p]));
        for (what, v) in spans.chain([("whole run", whole)]) {
            let wrote = v["kernel_mib_written"].as_f64();
            if wrote.is_none() || (wrote > Some(0.0) && v["media_over_kernel_bytes"].is_null()) {
                out.push(format!("tenants {m} {what}: no media bytes over the kernel's"));
            }
        }
    }
    out
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

fn pct(v: &Value) -> String {
    v.as_f64().map(|x| format!("{x:+.1} %")).unwrap_or_else(|| "–".into())
}

/// A share (0 to 1) as a percentage.
pub(crate) fn pct_of(v: &Value) -> String {
    v.as_f64().map(|x| format!("{:.0} %", x * 100.0)).unwrap_or_else(|| "–".into())
}

/// How long a report's timed phases ran: seconds, or operations per tenant.
fn timed_phases(r: &Value) -> String {
    match (r["ops_per_timed_phase"].as_u64(), r["seconds_per_timed_phase"].as_u64()) {
        (Some(n), _) => format!("{n} operations per tenant"),
        (None, Some(s)) => format!("{s} s"),
        (None, None) => "–".into(),
    }
}

/// The tenants' figures as markdown: one row per mode, phase and tenant,
/// then the claims per mode.
pub fn markdown(r: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Four tenants, each an f2fs with db_bench ({} keys of 16 + {} bytes, {:.1} MiB), \
         {} logical zones and {} active; timed phases {}; base device {} zones, {} active, \
         striped over its dies in {} KiB; {}.\n",
        r["keys_per_tenant"],
        r["value_size"],
        r["db_mib_per_tenant"].as_f64().unwrap_or(0.0),
        r["tenant_logical_zones"],
        r["tenant_active_zones"],
        timed_phases(r),
        r["base_zones"],
        r["base_active_zones"],
        r["base_zone_stripe_kib"].as_u64().unwrap_or(PROFILE_STRIPE_KIB),
        match r["read_filler_mib_per_log"].as_u64().unwrap_or(0) {
            0 => "no filler before the reads".to_string(),
            n => format!("before the reads `a` wrote and deleted {n} MiB through each data log"),
        },
    );
    s.push_str("| mode | phase | tenant | benchmark | ops/s | MB/s | p99 (µs) | p99.9 (µs) |\n");
    s.push_str("|---|---|---|---|---:|---:|---:|---:|\n");
    for m in MODES {
        for p in PHASES {
            let Some(ts) = r["modes"][m]["phases"][p].as_object() else { continue };
            for (t, v) in ts {
                let _ = writeln!(
                    s,
                    "| {m} | {p} | {t} | {} | {} | {} | {} | {} |",
                    v["benchmark"].as_str().unwrap_or(""),
                    num(&v["ops_per_sec"], 0),
                    num(&v["mb_per_sec"], 1),
                    num(&v["p99_us"], 0),
                    num(&v["p999_us"], 0),
                );
            }
        }
    }
    s.push_str(
        "\n| mode | `a` overwrite ops/s together → alone | gain alone | `a` read p99 alone → beside writers (µs) | p99 change | p99.9 alone → beside (µs) | p99.9 change | writers' ops/s |\n",
    );
    s.push_str("|---|---|---:|---|---:|---|---:|---:|\n");
    for m in MODES {
        let b = &r["modes"][m]["claims"]["ballooning"];
        let i = &r["modes"][m]["claims"]["isolation"];
        let _ = writeln!(
            s,
            "| {m} | {} → {} | {} | {} → {} | {} | {} → {} | {} | {} |",
            num(&b["a_ops_together"], 0),
            num(&b["a_ops_alone"], 0),
            pct(&b["a_gain_alone_pct"]),
            num(&i["a_read_p99_alone_us"], 0),
            num(&i["a_read_p99_beside_writers_us"], 0),
            pct(&i["p99_change_pct"]),
            num(&i["a_read_p999_alone_us"], 0),
            num(&i["a_read_p999_beside_writers_us"], 0),
            pct(&i["p999_change_pct"]),
            num(&i["writers_ops_sum"], 0),
        );
    }
    s.push_str(
        "\nThe device's own counts, per mode from its controller (the four tenants and \
         their metadata drives): host MiB from the SMART log's data units (of 512,000 \
         bytes, rounded up, so ±0.5 MiB), media MiB from the OCP extended SMART log; \
         beside them the MiB the guest's kernel wrote to the same namespaces, and the \
         media's bytes over those; then the MiB the kernel read, those the dies read \
         (OCP), and the share of the kernel's reads the drive served from its write \
         buffer (data not yet programmed: no die read).\n\n\
         | mode | span | host MiB (SMART) | media MiB (OCP) | device WAF | host MiB (kernel) | media / kernel | read MiB (kernel) | read MiB (media) | reads from the buffer |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in MODES {
        let d = &r["modes"][m]["device"];
        let spans = PHASES.iter().map(|p| (*p, &d["phases"][*p]));
        for (what, v) in spans.chain([("whole run", &d["whole_run"])]) {
            let _ = writeln!(
                s,
                "| {m} | {what} | {} | {} | {} | {} | {} | {} | {} | {} |",
                num(&v["smart_mib_written"], 1),
                num(&v["media_mib_written"], 1),
                num(&v["device_waf"], 3),
                num(&v["kernel_mib_written"], 2),
                num(&v["media_over_kernel_bytes"], 3),
                num(&v["kernel_mib_read"], 2),
                num(&v["media_mib_read"], 2),
                pct_of(&v["read_share_from_drive_buffer"]),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_has_four_tenants_over_one_base_device() {
        let w = TenantWorkload::new(true, 5);
        let text = config("elastic", "emu:profile=x.toml,zones=256,clock=real", &w);
        assert_eq!(text.matches("[[tenant]]").count(), 4, "{text}");
        assert!(text.contains("mode = \"elastic\"") && text.contains("zones = 48\n"), "{text}");
        assert!(text.contains("zone_scale = 8\n") && text.contains("max_width = 8\n"), "{text}");
        let narrow = config("static", "emu:zn540", &w.clone().with_zone_scale(1));
        assert!(
            narrow.contains("zone_scale = 1\n") && narrow.contains("zones = 384\n"),
            "{narrow}"
        );
        assert!(base_namespace().contains(&format!("max_active = {BASE_ACTIVE}")));
    }

    #[test]
    fn the_base_zones_stripe_set_once_at_the_top_of_the_timing_table() {
        let profile =
            "[controller]\nserial = \"x\"\n[timing]\npage_kib = 16\nzone_stripe_kib = 32\n";
        let s = with_zone_stripe(profile, 96);
        assert_eq!(
            s,
            "[controller]\nserial = \"x\"\n[timing]\nzone_stripe_kib = 96\npage_kib = 16\n"
        );
        let absent = with_zone_stripe("[timing]\npage_kib = 16\n", 48);
        assert_eq!(absent, "[timing]\nzone_stripe_kib = 48\npage_kib = 16\n");
    }

    #[test]
    fn the_guest_runs_the_phases_in_order_with_the_right_tenants() {
        let w = TenantWorkload::new(false, 5);
        let s = mode_lines("static", 4430, &w, 8.0);
        assert_eq!(s.matches("sleep 4.8\n").count(), 2, "{s}");
        let idle = s.find("sleep 4.8").unwrap();
        assert!(
            s[..idle].ends_with("drop_caches\nmode_counters before-overwrite-alone\n"),
            "the wait follows the sync and the counters: {s}"
        );
        let at = |n: &str| s.find(n).unwrap_or_else(|| panic!("{n} not in {s}"));
        assert!(at("-s 4430 -n nqn.2026-11.io.znskit:apps-tenants-static") < at("mkfs-static-a"));
        assert!(at("mount-static-d") < at("RUN tenants-static-fill"));
        assert!(at("for n in 1 2 3 4 5 6 7 8; do") < at("! all_up; do sleep"), "{s}");
        assert!(at("! all_up; do sleep") < at("D=$(disk_of"), "{s}");
        for p in PHASES.windows(2) {
            assert!(
                at(&format!("RUN tenants-static-{}\"", p[0]))
                    < at(&format!("RUN tenants-static-{}\"", p[1]))
            );
        }
        assert!(s.contains("--db=/mnt/static-c/db") && !s.contains("$MNT"), "{s}");
        assert!(s.contains("--benchmarks=readrandom --use_existing_db=1 --duration=20"));
        // Isolation: a reads while the three others write.
        let r = phase_runs("read-beside-writers", &w);
        assert_eq!(
            r.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(),
            [("a", "readrandom"), ("b", "overwrite"), ("c", "overwrite"), ("d", "overwrite")]
        );
        assert_eq!(phase_runs("overwrite-alone", &w).len(), 1);
        // Bounded by operations instead: writes for overwrite, reads for
        // readrandom, no duration.
        let counted = TenantWorkload { ops: Some(300), ..w.clone() };
        let r = phase_runs("read-beside-writers", &counted);
        assert!(r[0].2.ends_with("--use_existing_db=1 --reads=300"), "{}", r[0].2);
        assert!(r[1].2.ends_with("--use_existing_db=1 --writes=300"), "{}", r[1].2);
        assert!(r.iter().all(|x| !x.2.contains("--duration")));
        assert!(!phase_runs("fill", &counted)[0].2.contains("--writes"));
        assert!(!s.contains("--sync=1"), "{s}");
        let synced =
            mode_lines("static", 4430, &TenantWorkload { device_bound: true, ..w.clone() }, 8.0);
        assert!(synced.contains(apps_guest::DEVICE_BOUND), "{synced}");
        assert!(
            at("umount-static-a")
                < at("nvme disconnect -n nqn.2026-11.io.znskit:apps-tenants-static")
        );
        // The device's counters around the filesystems' lives and each
        // phase, from the mode's controller.
        assert!(
            at("CTRL=$(ctrl_of nqn.2026-11.io.znskit:apps-tenants-static)")
                < at("mode_counters start")
        );
        assert!(at("mode_counters start") < at("mkfs-static-a"));
        for p in PHASES {
            let (b, a) = (
                at(&format!("mode_counters before-{p}\n")),
                at(&format!("sync; mode_counters after-{p}\n")),
            );
            assert!(
                b < at(&format!("RUN tenants-static-{p}\""))
                    && a > at(&format!("END tenants-static-{p} ")),
                "{p}"
            );
        }
        assert!(
            at("umount-static-d") < at("mode_counters end")
                && at("mode_counters end") < at("nvme disconnect")
        );
        // The settling: a's database compacted, then filler through every
        // data log, fsynced, deleted; between the counters of the
        // overwrite before and those of the reads.
        let compact = at("run compact-static-a db_bench --db=/mnt/static-a/db ");
        let filler = at("run filler-static-a sh -c 'for f in /mnt/static-a/filler ");
        assert!(at("sync; mode_counters after-overwrite-alone\n") < compact, "{s}");
        assert!(compact < filler, "{s}");
        assert!(s.contains(" --benchmarks=compact --use_existing_db=1\n"), "{s}");
        assert!(filler < at("run filler-rm-static-a rm /mnt/static-a/filler "), "{s}");
        assert!(at("run filler-rm-static-a") < at("mode_counters before-read-alone\n"), "{s}");
        let files = "/mnt/static-a/filler /mnt/static-a/filler.iso /mnt/static-a/filler.db";
        assert!(s.contains(&format!("for f in {files}; do dd ")), "{s}");
        assert!(s.contains(&format!("rm {files}\n")), "{s}");
        assert!(s.contains("bs=1M count=4 conv=fsync"), "{s}");
        assert_eq!(s.matches("run filler-").count(), 2, "once, before the first reads");
        assert_eq!(s.matches("run compact-").count(), 1, "once, before the first reads");
        let unfilled = mode_lines("static", 4430, &TenantWorkload { filler_mib: 0, ..w }, 8.0);
        assert!(!unfilled.contains("filler") && !unfilled.contains("run compact-"), "{unfilled}");
    }

    #[test]
    fn figures_are_collected_checked_and_set_beside_the_claims() {
        let w = TenantWorkload::new(true, 5);
        let mut c = Collected::default();
        let out = |bench: &str, ops: u64, p99: f64| {
            let per = if bench == "readrandom" { "read" } else { "write" };
            format!(
                "{bench} : 10.0 micros/op {ops} ops/sec 8.0 seconds 800 operations; 1.0 MB/s\n\
                 Microseconds per {per}:\nPercentiles: P50: 5.00 P99: {p99:.2} P99.9: {:.2}",
                p99 * 2.0
            )
        };
        for m in MODES {
            for p in PHASES {
                for (t, bench, _) in phase_runs(p, &w) {
                    let ops = if p == "overwrite-alone" { 150 } else { 100 };
                    let p99 = if p == "read-beside-writers" { 300.0 } else { 200.0 };
                    for l in out(bench, ops, p99).lines() {
                        c.watch(&format!("{TN}{m} {p} {t} {l}\r"));
                    }
                }
            }
        }
        // The device's counts: each phase writes 10 data units and the
        // media take 1.2 times their bytes; the lone reader writes none.
        for m in MODES {
            let count = |c: &mut Collected, point: &str, units: u64, media: u64| {
                let n = side(m);
                c.watch(&format!(r#"APPS-SMART {n} {point} {{"data_units_written":"{units}"}}"#));
                c.watch(&format!("APPS-STAT {n} {point} host_sectors {}", units * 1000));
                // Reads: 2,000 sectors a written data unit, the dies a
                // quarter of them (three quarters from the drive's buffer).
                c.watch(&format!("APPS-STAT {n} {point} host_read_sectors {}", units * 2000));
                c.watch(&format!(
                    r#"APPS-OCP {n} {point} {{"Physical media units written":{{"hi":0,"lo":{media}}},"Physical media units read":{{"hi":0,"lo":{}}}}}"#,
                    units * 256_000
                ));
            };
            let mut units = 0;
            count(&mut c, "start", 0, 0);
            for p in PHASES {
                count(&mut c, &format!("before-{p}"), units, units * 614_400);
                if p != "read-alone" {
                    units += 10;
                }
                count(&mut c, &format!("after-{p}"), units, units * 614_400);
            }
            count(&mut c, "end", units, units * 614_400);
        }
        let r = results(&w, &c, &[]);
        assert!(missing(&r, &w).is_empty(), "{:?}", missing(&r, &w));
        let d = &r["modes"]["static"]["device"];
        assert_eq!(d["phases"]["fill"]["device_waf"].as_f64(), Some(1.2), "{d}");
        assert_eq!(d["whole_run"]["device_waf"].as_f64(), Some(1.2), "{d}");
        assert_eq!(d["whole_run"]["smart_data_units_written"].as_u64(), Some(40), "{d}");
        assert!(d["phases"]["read-alone"]["why_no_waf"].as_str().unwrap().contains("no data unit"));
        let fill = &d["phases"]["fill"];
        assert_eq!(fill["read_share_from_drive_buffer"].as_f64(), Some(0.75), "{d}");
        assert_eq!(fill["kernel_mib_read"].as_f64(), Some(apps::mib_of(10.0 * 2000.0 * 512.0)));
        assert!(d["phases"]["read-alone"]["read_share_from_drive_buffer"].is_null(), "{d}");
        let b = &r["modes"]["elastic"]["claims"]["ballooning"];
        assert_eq!(b["a_gain_alone_pct"].as_f64(), Some(50.0), "{b}");
        let i = &r["modes"]["static"]["claims"]["isolation"];
        assert_eq!(
            (i["p99_change_pct"].as_f64(), i["writers_ops_sum"].as_f64()),
            (Some(50.0), Some(300.0))
        );
        let t = markdown(&r);
        assert!(t.contains("| elastic | 100 → 150 | +50.0 % | 200 → 300 | +50.0 % | 400 → 600 | +50.0 % | 300 |"), "{t}");
        assert!(t.contains("; timed phases 8 s;"), "{t}");
        assert!(
            t.contains("| static | fill | 4.9 | 5.9 | 1.200 | 4.88 | 1.200 | 9.77 | 2.44 | 75 % |"),
            "{t}"
        );
        assert!(
            t.contains("| elastic | read-alone | 0.0 | 0.0 | – | 0.00 | – | 0.00 | 0.00 | – |"),
            "{t}"
        );
        assert!(t.contains("| elastic | whole run | 19.5 | 23.4 | 1.200 | 19.53 | 1.200 | 39.06 | 9.77 | 75 % |"), "{t}");
        let counted = TenantWorkload { ops: Some(256), ..w.clone() };
        let t = markdown(&results(&counted, &c, &[]));
        assert!(t.contains("; timed phases 256 operations per tenant;"), "{t}");
        assert!(
            t.contains(
                "96 KiB; before the reads `a` wrote and deleted 4 MiB through each data log.\n"
            ),
            "{t}"
        );
        let unfilled = TenantWorkload { filler_mib: 0, ..w.clone() };
        let t = markdown(&results(&unfilled, &c, &[]));
        assert!(t.contains("96 KiB; no filler before the reads.\n"), "{t}");
        c.tenants.lines.remove(&("static".into(), "fill".into(), "c".into()));
        let r = results(&w, &c, &[]);
        assert_eq!(missing(&r, &w).len(), 4, "{:?}", missing(&r, &w));
        assert!(missing(&r, &w)[0].starts_with("tenants static fill c: no"));
        // A run without the device's counters at the end has no WAF.
        c.stats.get_mut(&side("elastic")).unwrap().remove("end");
        let r = results(&w, &c, &[]);
        let m = missing(&r, &w);
        assert_eq!(
            m.first().map(String::as_str),
            Some("tenants elastic whole run: no device WAF (no OCP SMART / Health Information Extended log (C0h) read on both sides)"),
            "{m:?}"
        );
    }
}
