//! `cargo xtask apps`: RocksDB's `db_bench` (Debian's rocksdb-tools) in a
//! QEMU guest on Debian's generic kernel, on f2fs over an emulated ZNS
//! drive and on ext4 (and XFS) over its conventional twin, both reached
//! through the kernel's nvme-tcp from `zns serve` on the host.
//!
//! The two devices are the ZN540's timing model (controller, NAND, write
//! buffer; on the real clock, as `zns serve` runs timed devices) with the
//! zones cut down: [`ZONES`] zones of 4 MiB whose capacity is 3 MiB (one
//! stripe of the ZN540's 32 dies), 480 MiB of flash, and the same flash
//! behind a page-mapped FTL with greedy garbage collection and 7 % spare
//! (the conventional twin, 448.6 MiB exposed). Each is served by a `zns
//! serve` of its own, so each controller's SMART log counts one stack's
//! writes; the ZNS side's target also exports the FTL on a small
//! emulated device as f2fs's metadata namespace ([`crate::f2fs`]).
//!
//! On each side the guest (preconditions the conventional namespace by
//! writing it whole,) makes the filesystem, writes a filler file so that
//! the filler and the database together reach the fill ratio asked for,
//! then runs db_bench's fillrandom, overwrite and readwhilewriting,
//! reading around each phase the sectors the kernel wrote to each
//! namespace, the controller's SMART data units written and its OCP
//! extended SMART log's media bytes written (their ratio is the device's
//! write amplification), the filesystem's use and f2fs's garbage
//! collection counters. The host writes `apps.json`, `apps.svg` and a
//! markdown table, and with `--docs` puts them in `docs/` (the table into
//! `docs/apps.md`).
//!
//! `--smoke`: fillrandom only, a small database, no filler, no
//! preconditioning, on f2fs-zns and ext4-conv; it fails unless both runs
//! finish and every figure it reports is there.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plotters::prelude::*;
use serde_json::{json, Value};

use crate::apps_guest::{self, Collected, Side, Workload};
use crate::kernel::Flavour;
use crate::server::{build_zns, Server};
use crate::vmtest::{self, Options as VmOptions};
use crate::{f2fs, kernel, Error, Result};

const USAGE: &str = "usage: cargo xtask apps [OPTIONS]

RocksDB's db_bench (Debian's rocksdb-tools) in a QEMU guest on Debian's generic
kernel: fillrandom, overwrite and readwhilewriting on f2fs over an emulated ZNS
drive (the ZN540's timing model, zones cut down) and on ext4 (and XFS) over its
conventional twin (the same NAND behind a device-side FTL), both through the
kernel's nvme-tcp to `zns serve`. Throughput, p99 and p99.9 from db_bench,
bytes the host wrote, the controllers' SMART data units written and media bytes
written (OCP log C0h), the device WAF they give, f2fs's GC.

options:
  --smoke            fillrandom only, a small database, no filler, f2fs-zns and
                     ext4-conv; fails unless both runs give every figure
  --fs LIST          conventional side's filesystems, comma separated: ext4, xfs
                     (default ext4,xfs; --smoke: ext4)
  --num N            keys written and overwritten (default 65536; --smoke 8192)
  --value-size B     value bytes (default 1000)
  --fill PCT         filesystem use aimed at before overwrite, filler file
                     included, percent of the space free after mkfs
                     (default 55; --smoke 0)
  --rww-seconds S    seconds of readwhilewriting (default 30; 0 skips it)
  --no-precondition  do not write the conventional namespace whole before mkfs
  --zones N          zones of each device (default 160: 480 MiB of flash)
  --seed N           db_bench's seed (default: from the clock)
  --out DIR          where apps.json, apps.svg, apps-table.md go
                     (default target/apps, target/apps-smoke with --smoke)
  --docs             also write docs/apps.json, docs/apps.svg and the table
                     in docs/apps.md
  --timeout SECS     give the guest this long (default 1800; --smoke 420)
  --kernel PACKAGE   kernel package (default: newest linux-image-*-amd64-unsigned)
  --no-install       do not install missing packages; fail instead
  --zns PATH         serve with this `zns` binary instead of building one
  --kvm              use KVM (software emulation otherwise)
  --memory SIZE      guest memory (default 1G)";

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

/// Options of the task.
#[derive(Debug, Clone)]
pub struct Options {
    vm: VmOptions,
    smoke: bool,
    fs: Vec<String>,
    workload: Workload,
    zones: u32,
    out: Option<PathBuf>,
    docs: bool,
    zns: Option<PathBuf>,
}

/// Parses the arguments after `apps`; `None` after printing help.
pub fn parse(args: impl Iterator<Item = String>) -> Result<Option<Options>> {
    let args: Vec<String> = args.collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let mut o = VmOptions::default();
    o.timeout = Duration::from_secs(if smoke { 420 } else { 1800 });
    let mut w = Workload {
        num: if smoke { 8192 } else { 65536 },
        value_size: 1000,
        fill_percent: if smoke { 0 } else { 55 },
        rww_seconds: if smoke { 0 } else { 30 },
        overwrite: !smoke,
        precondition: !smoke,
        seed: vmtest::new_seed() % 1_000_000_007,
    };
    let mut fs: Vec<String> =
        if smoke { vec!["ext4".into()] } else { vec!["ext4".into(), "xfs".into()] };
    let (mut zones, mut out, mut docs, mut zns) = (ZONES, None, false, None);
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next().ok_or_else(|| Error::new(format!("{name} needs a value\n{USAGE}")))
        };
        fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
            v.parse().map_err(|_| Error::new(format!("{name} {v:?}: not a number")))
        }
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--smoke" => {}
            "--fs" => {
                let v = value("--fs")?;
                fs = v.split(',').map(|s| s.trim().to_string()).collect();
                if let Some(bad) = fs.iter().find(|f| !["ext4", "xfs"].contains(&f.as_str())) {
                    return Err(Error::new(format!("--fs: {bad:?} is not ext4 or xfs")));
                }
            }
            "--num" => w.num = num::<u64>("--num", &value("--num")?)?.max(1),
            "--value-size" => {
                w.value_size = num::<u32>("--value-size", &value("--value-size")?)?.max(1)
            }
            "--fill" => w.fill_percent = num::<u32>("--fill", &value("--fill")?)?.min(95),
            "--rww-seconds" => w.rww_seconds = num("--rww-seconds", &value("--rww-seconds")?)?,
            "--no-precondition" => w.precondition = false,
            "--zones" => zones = num::<u32>("--zones", &value("--zones")?)?.max(16),
            "--seed" => w.seed = num("--seed", &value("--seed")?)?,
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--docs" => docs = true,
            "--zns" => zns = Some(PathBuf::from(value("--zns")?)),
            "--timeout" => {
                o.timeout =
                    Duration::from_secs(num::<u64>("--timeout", &value("--timeout")?)?.max(1))
            }
            "--kernel" => o.kernel = Some(value("--kernel")?),
            "--no-install" => o.install = false,
            "--kvm" => o.kvm = true,
            "--memory" => o.memory = value("--memory")?,
            other => return Err(Error::new(format!("unknown option {other:?}\n{USAGE}"))),
        }
    }
    Ok(Some(Options { vm: o, smoke, fs, workload: w, zones, out, docs, zns }))
}

/// The controller and namespace lines of a profile, then the ZN540's
/// timing table.
fn profile(name: &str, namespace: &str) -> String {
    let timing = ZN540.find("[timing]").map(|at| &ZN540[at..]).unwrap_or("");
    format!(
        r#"name = "{name}"
description = "the ZN540's timing model on 4 MiB zones of 3 MiB capacity (one stripe of its 32 dies)"

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

/// The ZNS device's profile: 4 MiB zones of 3 MiB capacity, 14 open.
pub fn zns_profile() -> String {
    profile(
        "apps-zns",
        "[[namespace]]
kind = \"zoned\"
block_size = 4096
zones = 256
zone_size = 1024
zone_capacity = 768
max_open = 14
max_active = 14
descriptor_extension_bytes = 0
read_across_zone_boundaries = true
",
    )
}

/// Its conventional twin: the flash of its zones behind a page-mapped FTL.
pub fn conv_profile() -> String {
    profile(
        "apps-conv",
        "[[namespace]]
kind = \"conventional\"
block_size = 4096

[namespace.ftl]
flash_zones = 256
flash_zone_blocks = 768
segment_blocks = 768
over_provisioning = 0.07
policy = \"greedy\"
",
    )
}

/// Runs the task.
pub fn run(opts: &Options) -> Result<()> {
    let o = &opts.vm;
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join(if opts.smoke { "apps-smoke" } else { "apps" });
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let zns = match &opts.zns {
        Some(p) => p.clone(),
        None => build_zns(&root, &target)?,
    };
    let files = crate::clients::guest_files(TOOLS, o.install)?;
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Generic, o.kernel.as_deref(), o.install)?;
    let mut wanted = MODULES.to_vec();
    if opts.fs.iter().any(|f| f == "xfs") {
        wanted.push("xfs");
    }
    let modules = kernel::modules_for(&kernel, &wanted, &[])?;
    let zns_toml = dir.join("apps-zns.toml");
    let conv_toml = dir.join("apps-conv.toml");
    fs::write(&zns_toml, zns_profile()).map_err(|e| Error::io(&zns_toml, e))?;
    fs::write(&conv_toml, conv_profile()).map_err(|e| Error::io(&conv_toml, e))?;
    let zns_uri = format!("emu:profile={},zones={}", zns_toml.display(), opts.zones);
    let conv_uri = format!("emu:profile={},zones={}", conv_toml.display(), opts.zones);
    let zns_server = Server::start(
        "zns serve (ZNS)",
        &zns,
        &[
            "--device",
            &zns_uri,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nqn",
            NQN_ZNS,
            "--ftl",
            f2fs::FTL_DEVICE,
        ],
    )?;
    let conv_server = Server::start(
        "zns serve (conventional)",
        &zns,
        &["--device", &conv_uri, "serve", "--listen", "127.0.0.1:0", "--nqn", NQN_CONV],
    )?;
    let mut sides = vec![Side {
        name: "f2fs-zns".into(),
        fs: "f2fs",
        nqn: NQN_ZNS.into(),
        port: zns_server.port,
    }];
    for f in &opts.fs {
        let fs: &'static str = if f == "xfs" { "xfs" } else { "ext4" };
        sides.push(Side {
            name: format!("{fs}-conv"),
            fs,
            nqn: NQN_CONV.into(),
            port: conv_server.port,
        });
    }
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let script =
        apps_guest::init_script(&names, &sides, &opts.workload, &mke2fs.display().to_string());
    let initramfs = vmtest::pack_initramfs(&dir, &[], &modules, &script, &files)?;
    let devices: Vec<String> = ["-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0"]
        .map(String::from)
        .to_vec();
    let log = dir.join("guest.log");
    let mut collected = Collected::default();
    let guest_start = Instant::now();
    let outcome =
        vmtest::boot_watched(&kernel, &initramfs, &devices, o, &log, &mut |l| collected.watch(l));
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let zns_end = zns_server.stop();
    let conv_end = conv_server.stop();
    let outcome = outcome?;
    let mut failures = outcome.failures.clone();
    for (what, end) in [("zns serve (ZNS)", &zns_end), ("zns serve (conventional)", &conv_end)] {
        match end {
            Ok(s) if s.contains(" 0 ended by transport errors") => {}
            Ok(s) => failures.push(format!("{what} saw errors: {}", s.trim())),
            Err(e) => failures.push(e.to_string()),
        }
    }
    if outcome.result != Some(true) {
        failures.push("the guest did not report PASS".into());
    }
    let results = results(opts, &sides, &collected, &zns_uri, &conv_uri);
    failures.extend(missing(&results, &opts.workload));
    failures
        .extend(collected.smart_errors.iter().map(|e| format!("no SMART data units written: {e}")));
    failures.extend(collected.ocp_errors.iter().map(|e| format!("no OCP media bytes: {e}")));
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| target.join(if opts.smoke { "apps-smoke" } else { "apps" }));
    fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    let table = markdown(&results);
    let mut report = results.clone();
    report["guest_seconds"] = json!(guest_secs);
    report["failures"] = json!(failures);
    write_outputs(&out, &report, &table)?;
    if opts.docs && failures.is_empty() {
        let docs = root.join("docs");
        write_outputs(&docs, &report, &table)?;
        fs::remove_file(docs.join("apps-table.md")).ok();
        update_doc(&docs.join("apps.md"), &table)?;
    }
    println!();
    for l in table.lines() {
        println!("apps: {l}");
    }
    for f in &failures {
        println!("apps: {f}");
    }
    println!(
        "apps: {} in {:.1} s (guest {:.1} s; log {}; results in {})",
        if failures.is_empty() { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        guest_secs,
        log.display(),
        out.display()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::new("the application runs failed"))
    }
}

fn write_outputs(out: &Path, report: &Value, table: &str) -> Result<()> {
    let json_path = out.join("apps.json");
    let text = serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    fs::write(&json_path, text).map_err(|e| Error::io(&json_path, e))?;
    let table_path = out.join("apps-table.md");
    fs::write(&table_path, table).map_err(|e| Error::io(&table_path, e))?;
    plot(report, &out.join("apps.svg"))
}

/// Bytes in `sectors` of 512 bytes, as MiB.
fn mib(sectors: u64) -> f64 {
    sectors as f64 * 512.0 / (1u64 << 20) as f64
}

/// A device URI as recorded: the profile file by its name, not its path.
fn shown(uri: &str) -> String {
    match (uri.find("profile="), uri.find(',')) {
        (Some(a), Some(b)) if a < b => {
            let path = &uri[a + 8..b];
            let name = path.rsplit('/').next().unwrap_or(path);
            format!("{}profile={name}{}", &uri[..a], &uri[b..])
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
const DATA_UNIT: f64 = 512_000.0;

/// Bytes as MiB.
fn mib_of(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

/// The device's write amplification between points `from` and `to` of
/// `side`: the media bytes its OCP log counts over the host bytes its SMART
/// log counts; or why there is none.
fn device_waf(c: &Collected, side: &str, from: &str, to: &str) -> Result<f64, &'static str> {
    let media = c.delta(side, from, to, "media_bytes_written");
    let host = c.delta(side, from, to, "smart_data_units_written");
    match (media, host) {
        (None, _) => Err("no OCP SMART / Health Information Extended log (C0h) read on both sides"),
        (_, None) => Err("no SMART log (02h) read on both sides"),
        (_, Some(0)) => Err("the host wrote no data unit"),
        (Some(m), Some(h)) => Ok(m as f64 / (h as f64 * DATA_UNIT)),
    }
}

/// The results: per side, the fill, and per phase db_bench's figures and
/// the counters' deltas.
fn results(opts: &Options, sides: &[Side], c: &Collected, zns_uri: &str, conv_uri: &str) -> Value {
    let w = &opts.workload;
    let mut out_sides = serde_json::Map::new();
    let mut waf_sides = serde_json::Map::new();
    let mut waf_null = serde_json::Map::new();
    for side in sides {
        let n = side.name.as_str();
        let mut phases = serde_json::Map::new();
        for p in w.phases() {
            let lines = c.db.get(&(n.to_string(), p.to_string())).cloned().unwrap_or_default();
            let f = apps_guest::parse_db_bench(p, &lines);
            let (b, a) = (format!("before-{p}"), format!("after-{p}"));
            let data = c.delta(n, &b, &a, "data_sectors");
            let meta = c.delta(n, &b, &a, "meta_sectors");
            let host = data.map(|d| d + meta.unwrap_or(0));
            let smart = c.delta(n, &b, &a, "smart_data_units_written");
            let moved = c
                .delta(n, &b, &a, "f2fs_moved_blocks_foreground")
                .zip(c.delta(n, &b, &a, "f2fs_moved_blocks_background"))
                .map(|(x, y)| x + y)
                .or_else(|| c.delta(n, &b, &a, "f2fs_debug_gc_moved_blocks"));
            let calls = c
                .delta(n, &b, &a, "f2fs_gc_foreground_calls")
                .zip(c.delta(n, &b, &a, "f2fs_gc_background_calls"))
                .map(|(x, y)| x + y)
                .or_else(|| c.delta(n, &b, &a, "f2fs_debug_gc_calls"));
            let used = |point: &str| fill(c, n, point);
            let media = c.delta(n, &b, &a, "media_bytes_written");
            let waf = device_waf(c, n, &b, &a);
            if let Err(why) = waf {
                waf_null.insert(format!("{n} {p}"), json!(why));
            }
            if let Some(m) =
                waf_sides.entry(n.to_string()).or_insert_with(|| json!({})).as_object_mut()
            {
                m.insert(p.to_string(), json!(waf.ok()));
            }
            phases.insert(
                p.to_string(),
                json!({
                    "ops_per_sec": f.ops_per_sec,
                    "mb_per_sec": f.mb_per_sec,
                    "micros_per_op": f.micros_per_op,
                    "operations": f.operations,
                    "p50_us": f.p50_us,
                    "p99_us": f.p99_us,
                    "p999_us": f.p999_us,
                    "latency_of": if p == "readwhilewriting" { "reads" } else { "writes" },
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
                    "fs_use_before": used(&b),
                    "fs_use_after": used(&a),
                    "db_bench_lines": lines.len(),
                }),
            );
        }
        let fs_mib = c.stat(n, "mounted", "fs_kib").map(|k| k as f64 / 1024.0);
        out_sides.insert(
            n.to_string(),
            json!({
                "filesystem": side.fs,
                "device": shown(if side.zoned() { zns_uri } else { conv_uri }),
                "metadata_device": if side.zoned() { Some(f2fs::FTL_DEVICE) } else { None },
                "filesystem_mib": fs_mib,
                "free_mib_after_mkfs": c.stat(n, "mounted", "fs_avail_kib").map(|k| k as f64 / 1024.0),
                "fs_use_after_filler": fill(c, n, "filled"),
                "host_mib_written_precondition_to_end": c.delta(n, "mkfs", "end", "data_sectors").map(mib),
                "media_mib_written_mkfs_to_end": c.delta(n, "mkfs", "end", "media_bytes_written").map(|m| mib_of(m as f64)),
                "device_waf_mkfs_to_end": device_waf(c, n, "mkfs", "end").ok(),
                "phases": phases,
            }),
        );
    }
    json!({
        "task": "cargo xtask apps",
        "smoke": opts.smoke,
        "workload": {
            "tool": "db_bench (Debian rocksdb-tools)",
            "rocksdb_version": vmtest::installed_version("rocksdb-tools"),
            "num": w.num,
            "key_size": 16,
            "value_size": w.value_size,
            "db_mib": w.db_mib(),
            "fill_percent_target": w.fill_percent,
            "readwhilewriting_seconds": w.rww_seconds,
            "conventional_preconditioned": w.precondition,
            "seed": w.seed,
            "db_bench_options": apps_guest::db_bench_common(w),
        },
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

/// What a run must report; each missing figure is a failure.
fn missing(results: &Value, w: &Workload) -> Vec<String> {
    let mut out = Vec::new();
    let Some(sides) = results["sides"].as_object() else { return vec!["no sides".into()] };
    for (name, s) in sides {
        for p in w.phases() {
            let ph = &s["phases"][p];
            let mut need = vec![
                "ops_per_sec",
                "p99_us",
                "p999_us",
                "host_mib_written",
                "smart_mib_written",
                "media_mib_written",
                "device_waf",
            ];
            if p != "readwhilewriting" {
                need.push("mb_per_sec");
            }
            if s["filesystem"] == "f2fs" {
                need.push("f2fs_gc_moved_blocks");
            }
            for k in need {
                if ph[k].is_null() {
                    out.push(format!("{name} {p}: no {k}"));
                }
            }
        }
    }
    out
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

/// The figures as a markdown table: one row per side and phase.
pub fn markdown(r: &Value) -> String {
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
                    let pct = |v: &Value| {
                        v.as_f64().map(|x| format!("{:.0} %", x * 100.0)).unwrap_or("–".into())
                    };
                    let _ = writeln!(
                        s,
                        "| {name} | {p} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} → {} |",
                        f["latency_of"].as_str().unwrap_or(""),
                        num(&f["ops_per_sec"], 0),
                        num(&f["mb_per_sec"], 1),
                        num(&f["p99_us"], 0),
                        num(&f["p999_us"], 0),
                        num(&f["host_mib_written"], 1),
                        num(&f["smart_mib_written"], 1),
                        num(&f["media_mib_written"], 1),
                        num(&f["device_waf"], 2),
                        f["f2fs_gc_moved_blocks"]
                            .as_u64()
                            .map(|v| v.to_string())
                            .unwrap_or("–".into()),
                        pct(&f["fs_use_before"]),
                        pct(&f["fs_use_after"]),
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

/// Replaces what lies between the markers in `doc` with `table`.
fn update_doc(doc: &Path, table: &str) -> Result<()> {
    const BEGIN: &str = "<!-- apps:begin (written by cargo xtask apps --docs) -->";
    const END: &str = "<!-- apps:end -->";
    let text = fs::read_to_string(doc).map_err(|e| Error::io(doc, e))?;
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
        return Err(Error::new(format!("{}: no {BEGIN} … {END} markers", doc.display())));
    };
    let new = format!("{}{BEGIN}\n{table}{}", &text[..a], &text[b..]);
    fs::write(doc, new).map_err(|e| Error::io(doc, e))
}

/// Bars: ops/s of each phase, one bar per stack.
fn plot(r: &Value, path: &Path) -> Result<()> {
    let sides: Vec<(String, Value)> = r["sides"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let phases: Vec<String> = sides
        .first()
        .and_then(|(_, s)| s["phases"].as_object().map(|m| m.keys().cloned().collect()))
        .unwrap_or_default();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root =
            SVGBackend::new(path, (420 * phases.len().max(1) as u32, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((1, phases.len().max(1)));
        const COLORS: [RGBColor; 3] =
            [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];
        for (area, p) in panels.iter().zip(&phases) {
            let vals: Vec<f64> = sides
                .iter()
                .map(|(_, s)| s["phases"][p]["ops_per_sec"].as_f64().unwrap_or(0.0))
                .collect();
            let top = vals.iter().cloned().fold(1.0, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("db_bench {p}"), ("sans-serif", 18))
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
                .y_desc("operations/s")
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

    #[test]
    fn options_default_to_the_full_run_and_smoke_cuts_it_down() {
        let p = |a: &[&str]| parse(a.iter().map(|s| s.to_string())).unwrap().unwrap();
        let full = p(&[]);
        assert!(!full.smoke && full.fs == ["ext4", "xfs"] && full.workload.overwrite);
        assert_eq!(full.workload.phases(), ["fillrandom", "overwrite", "readwhilewriting"]);
        let smoke = p(&["--smoke"]);
        assert!(smoke.smoke && smoke.fs == ["ext4"] && smoke.workload.phases() == ["fillrandom"]);
        assert_eq!((smoke.workload.fill_percent, smoke.workload.precondition), (0, false));
        assert_eq!(p(&["--fs", "xfs", "--num", "10", "--seed", "3"]).workload.num, 10);
        assert!(parse(["--fs", "btrfs"].map(String::from).into_iter()).is_err());
    }

    #[test]
    fn the_profiles_take_the_zn540_timing_model() {
        for t in [zns_profile(), conv_profile()] {
            assert!(t.contains("[timing]") && t.contains("zone_stripe_dies = 32"), "{t}");
        }
        assert!(zns_profile().contains("zone_capacity = 768"));
        assert!(conv_profile().contains("segment_blocks = 768"));
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
        assert!(missing(&r, &w).is_empty());
        let t = markdown(&r);
        assert!(t.contains("fillrandom f2fs-zns / ext4-conv: +25.0 %"), "{t}");
        assert!(t.contains("| 4.0 | 4.0 | 5.0 | 1.25 | 0 |"), "{t}");
        r["sides"]["ext4-conv"]["phases"]["fillrandom"]["p999_us"] = Value::Null;
        assert_eq!(missing(&r, &w), ["ext4-conv fillrandom: no p999_us"]);
        r["sides"]["f2fs-zns"]["phases"]["fillrandom"]["device_waf"] = Value::Null;
        assert_eq!(missing(&r, &w)[1], "f2fs-zns fillrandom: no device_waf");
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
