//! `cargo xtask ublk`: znskit devices as the guest kernel's own block
//! devices through ublk (`ublk_drv`), in a QEMU guest on Debian's generic
//! kernel (the build host's kernel may have no ublk; the cloud kernel has
//! no f2fs).
//!
//! The run is in parts, each timed in the guest (`--parts` picks some):
//!
//! - `basic`: `zns --device emu:small ublk` serves an emulated ZNS SSD in
//!   the background: the kernel sees a host-managed zoned block device
//!   (`queue/zoned`, 256 zones), `blkzone report` lists its zones, `dd`
//!   writes 64 KiB at zone 0's start with direct I/O and reads it back,
//!   busybox's `wget` scrapes the server's `--metrics` endpoint on the
//!   guest's loopback (the bytes written exactly those 64 KiB, the bytes
//!   read at least them, a zone report counted), `blkzone` opens,
//!   finishes and resets zones; SIGTERM removes the device (its sysfs
//!   entry goes, the server reports no failed request).
//!   Then `zns --device emu:small ftl ublk` serves the FTL (formatted at
//!   start, the device lives only in the process) as a plain disk:
//!   mkfs.ext4, mount, a file written, umount, `e2fsck -f -n`, the file
//!   read back; SIGTERM removes it and closes the FTL with a checkpoint.
//! - `conv`: `zns --device emu:small-conv,zones=64 ublk` serves a
//!   conventional namespace (the page-mapped twin of `emu:small`) as a
//!   plain disk: `queue/zoned` is `none`, discard and Write Zeroes are
//!   offered; mkfs.ext4, mount, a file written with fsync, umount,
//!   `e2fsck -f -n`, the file read back; then `blkdiscard` and
//!   `blkdiscard -z` on data written with direct I/O read back as zeros
//!   beside the data kept; SIGTERM removes the device.
//! - `crash`: `kill -9` of the server and a new one taking the device
//!   over (`--id N`), cycle after cycle, on a zoned device image and on
//!   the FTL with a writer in flight, then ext4 mounted across a kill
//!   ([`crate::ublk_crash`]).
//! - `fio-zbd`, `zonefs`, `f2fs`, `btrfs`, `ftl-fs`: real clients
//!   ([`crate::ublk_clients`]): fio's `t/zbd/test-zbd-support`, its
//!   results checked both ways against a table of expected outcomes;
//!   zonefs, f2fs and btrfs mounted, written and checked on zoned ublk
//!   devices; ext4 with fio, SQLite and fsck on the FTL's.
//! - `perf` (not run by default; also `cargo xtask ublk-perf`): 4 KiB
//!   random reads through ublk, NBD, nvme-tcp and null_blk
//!   ([`crate::ublk_perf`]), written to `docs/ublk-perf.json`.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use crate::args::{self, GuestArgs, List};
use crate::guest::RESULT_MARKER;
use crate::kernel::Flavour;
use crate::vmtest;
use crate::{clients, fio_zbd, kernel, ublk_clients, ublk_crash, ublk_perf, Error, Result};

/// Kernel modules the guest loads: the ublk driver and ext4.
const MODULES: &[&str] = &["ublk_drv", "ext4"];

/// The parts of the task, in the order they run.
pub const PARTS: &[&str] =
    &["basic", "conv", "crash", "fio-zbd", "zonefs", "f2fs", "btrfs", "ftl-fs", ublk_perf::PART];

/// The parts a run without `--parts` runs: all but the benchmark.
const DEFAULT_PARTS: usize = PARTS.len() - 1;

/// The guest's line with a part's duration: `UBLK-PART NAME SECONDS`.
const PART_TIME: &str = "UBLK-PART ";

/// Loaded when the kernel has them (ext4's metadata checksums).
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries (busybox
/// has no blkzone, and its dd, mke2fs and blkdiscard lack what the run
/// needs).
const GUEST_TOOLS: &[(&str, &str)] = &[
    ("blkzone", "util-linux"),
    ("blkdiscard", "util-linux"),
    ("mke2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
    ("dd", "coreutils"),
];

/// znskit devices as the guest kernel's block devices through ublk
///
/// Boots a QEMU guest on Debian's generic kernel with ublk_drv loaded and serves
/// znskit devices as the guest's block devices through ublk: `zns --device
/// emu:small ublk` as a host-managed zoned device (blkzone report, open, finish,
/// reset; dd with direct I/O written at zone 0 and read back; its --metrics
/// endpoint scraped in the guest, the bytes dd moved in its counters), then `zns --device
/// emu:small ftl ublk`, the FTL as a plain disk (mkfs.ext4, mount, a file written
/// and read back, e2fsck), and `zns --device emu:small-conv,zones=64 ublk`, a
/// conventional namespace as a plain disk (ext4 likewise; blkdiscard and
/// blkdiscard -z read back as zeros). Then kill -9 of the server and a new one
/// taking the device over (zns ublk --id N), cycle after cycle, on the zoned
/// device and on the FTL; then real clients: fio's zoned block device tests,
/// zonefs, f2fs and btrfs on zoned ublk devices, ext4 with fio, SQLite and fsck
/// on the FTL's. Each part is timed.
#[derive(Debug, Clone, Parser)]
#[command(verbatim_doc_comment, args_override_self = true, mut_arg("kernel", args::generic_kernel))]
pub struct Args {
    /// The parts to run, comma separated (they run in this order):
    ///   basic    the zoned device and the FTL, as above
    ///   conv     the conventional namespace, as above
    ///   crash    kill -9 and takeover cycles (zoned, FTL, ext4)
    ///   fio-zbd  fio's t/zbd/test-zbd-support (Debian's fio source)
    ///   zonefs   zonefs, formatted by the task, mounted and written
    ///   f2fs     f2fs on the zoned device, the FTL's as metadata device
    ///   btrfs    btrfs in zoned mode
    ///   ftl-fs   ext4 on the FTL: fio, SQLite, fsck
    ///   perf     not by default (cargo xtask ublk-perf): 4 KiB random
    ///            reads at QD 1 and 32 through ublk, NBD, nvme-tcp
    ///            and null_blk; writes docs/ublk-perf.json
    #[arg(long, value_name = "LIST", verbatim_doc_comment,
          default_value_t = List::of(&PARTS[..DEFAULT_PARTS]),
          value_parser = |s: &str| args::parts(s, PARTS))]
    parts: List<String>,
    /// Only these fio zbd tests: numbers and ranges, comma separated
    /// (1-29,33-58; default: all)
    #[arg(long, value_name = "LIST", verbatim_doc_comment, value_parser = args::zbd_tests)]
    zbd_tests: Option<List<u32>>,
    /// Crash cycles on each device (default: 12 zoned, 10 FTL; the zoned
    /// device takes at most 13)
    #[arg(long, value_name = "N", allow_negative_numbers = true, verbatim_doc_comment,
          value_parser = clap::value_parser!(u32)
              .range(1..=i64::from(ublk_crash::ZONED_CYCLES) + 1))]
    cycles: Option<u32>,
    #[command(flatten)]
    guest: GuestArgs,
}

impl Args {
    /// Only these fio zbd tests (all when empty).
    fn zbd_tests(&self) -> &[u32] {
        self.zbd_tests.as_deref().unwrap_or_default()
    }
}

/// Runs the whole task.
pub fn run(opts: &Args) -> Result<()> {
    let o = &opts.guest.vm();
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("ublk");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let mut tools: Vec<(&str, &str)> = GUEST_TOOLS.to_vec();
    let mut wanted_modules: Vec<&str> = MODULES.to_vec();
    let mut entries = Vec::new();
    for p in opts.parts.iter() {
        tools.extend(ublk_clients::tools(p));
        wanted_modules.extend_from_slice(ublk_clients::modules(p));
        entries.extend(ublk_clients::entries(p, zonefs_uuid()));
        if p == ublk_perf::PART {
            tools.extend_from_slice(ublk_perf::TOOLS);
            wanted_modules.extend_from_slice(ublk_perf::MODULES);
        }
    }
    tools.sort_unstable();
    tools.dedup();
    // fio installed first: the zbd script is its source package's.
    let files = clients::guest_files(&tools, o.install)?;
    let zbd = if opts.parts.iter().any(|p| p == "fio-zbd") {
        Some(fio_zbd::prepare(&cache, o.install)?)
    } else {
        None
    };
    let zbd_wanted: Vec<u32> = match &zbd {
        Some(z) if opts.zbd_tests().is_empty() => z.tests.clone(),
        Some(z) => {
            if let Some(n) = opts.zbd_tests().iter().find(|n| !z.tests.contains(n)) {
                return Err(Error::new(format!("--zbd-tests: the script has no test {n}")));
            }
            opts.zbd_tests().to_vec()
        }
        None => Vec::new(),
    };
    if let Some(z) = &zbd {
        entries.extend(fio_zbd::guest_entries(z)?);
    }
    // The generic kernel: the cloud kernel has no f2fs.
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Generic, o.kernel.as_deref(), o.install)?;
    let modules = kernel::modules_for(&kernel, &wanted_modules, OPTIONAL_MODULES)?;
    // With zns-cli's ublk feature, as every guest program is built.
    let programs = vmtest::build_guest_binaries(&root, &target, o.install, &["zns"])?;
    let path_of =
        |p: &str| vmtest::which(p).ok_or_else(|| Error::new(format!("{p} is not installed")));
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let plan = Plan {
        parts: opts.parts.to_vec(),
        cycles: opts.cycles,
        zbd_tests: opts.zbd_tests().to_vec(),
    };
    let by_path = GuestTools {
        mke2fs: path_of("mke2fs")?,
        dd: path_of("dd")?,
        blkdiscard: path_of("blkdiscard")?,
    };
    let script = init_script(&names, &by_path, &plan);
    let initramfs =
        vmtest::pack_initramfs_with(&dir, &programs, &modules, &script, &files, &entries)?;
    let prepared = start.elapsed();
    let log = dir.join("guest.log");
    let guest_start = Instant::now();
    let mut part_times: Vec<(String, u64)> = Vec::new();
    let mut zbd_results = BTreeMap::new();
    let mut zbd_times = BTreeMap::new();
    let mut perf = Vec::new();
    let outcome = vmtest::boot_watched(&kernel, &initramfs, &[], o, &log, &mut |line| {
        if let Some(t) = parse_part_time(line) {
            part_times.push(t);
        } else if let Some((n, status, why)) = fio_zbd::parse_result(line) {
            zbd_results.insert(n, (status, why));
        } else if let Some((n, secs)) = fio_zbd::parse_time(line) {
            zbd_times.insert(n, secs);
        } else if let Some(sample) = ublk_perf::parse_line(line) {
            perf.push(sample);
        }
    })?;
    let guest_time = guest_start.elapsed();
    println!();
    for s in &outcome.summaries {
        println!("ublk: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &outcome.failures {
        println!("ublk: {}", f.trim_start_matches("vmtest: "));
    }
    let mut failures = outcome.failures.len();
    if let Some(z) = &zbd {
        println!("ublk: {} ({})", fio_zbd::summary(&zbd_results), z.source);
        println!("ublk: {}", fio_zbd::slowest(&zbd_times, 8));
        for p in fio_zbd::check_against(
            &zbd_results,
            &zbd_wanted,
            ublk_clients::EXPECTED_FAILURES,
            ublk_clients::EXPECTED_SKIPS,
        ) {
            failures += 1;
            println!("ublk: {p}");
        }
    }
    for part in opts.parts.iter() {
        match part_times.iter().find(|(p, _)| p == part) {
            Some((_, secs)) => println!("ublk: part {part}: {secs} s in the guest"),
            None => {
                failures += 1;
                println!("ublk: part {part}: did not finish");
            }
        }
    }
    if opts.parts.iter().any(|p| p == ublk_perf::PART) {
        if let Err(e) = ublk_perf::report(&perf, &root, o.smp) {
            failures += 1;
            println!("{e}");
        }
    }
    let pass = outcome.result == Some(true) && failures == 0;
    println!(
        "ublk: {} in {:.1} s (preparation {:.1} s, guest {:.1} s; parts {}; log {})",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        prepared.as_secs_f64(),
        guest_time.as_secs_f64(),
        opts.parts.join(","),
        log.display()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("znskit's devices as the guest kernel's ublk block devices failed"))
    }
}

/// Parses a [`PART_TIME`] line: the part, its seconds.
fn parse_part_time(line: &str) -> Option<(String, u64)> {
    let (part, secs) = line.strip_prefix(PART_TIME)?.split_once(' ')?;
    Some((part.to_string(), secs.trim().parse().ok()?))
}

/// What the guest runs.
#[derive(Debug, Clone)]
struct Plan {
    /// The parts, of [`PARTS`].
    parts: Vec<String>,
    /// Crash cycles on each device (`None`: the defaults).
    cycles: Option<u32>,
    /// fio zbd tests to run (all when empty).
    zbd_tests: Vec<u32>,
}

/// A UUID for the zonefs superblock: random bits from the clock (version
/// 4 and variant bits set).
fn zonefs_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&vmtest::new_seed().to_le_bytes());
    u[8..].copy_from_slice(&vmtest::new_seed().rotate_left(17).to_le_bytes());
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

/// Debian's programs the guest runs by path: busybox's shell runs its own
/// applets of those names before any in `$PATH`.
#[derive(Debug, Clone)]
struct GuestTools {
    mke2fs: PathBuf,
    dd: PathBuf,
    blkdiscard: PathBuf,
}

/// The guest's `/init`: modules, each part of `plan` timed ([`zoned_lines`]
/// and [`ftl_lines`] for `basic`, [`conv_lines`] for `conv`,
/// [`ublk_crash`]'s for `crash`), the result marker.
fn init_script(modules: &[String], tools: &GuestTools, plan: &Plan) -> String {
    let mut s = crate::guest::shell_start(
        "znskit's devices as the kernel's block devices through ublk, a result marker, \
         power off.",
    );
    s.push_str("mkdir -p /mnt /run\n");
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(SERVER_HELPERS);
    let path = |p: &PathBuf| p.display().to_string();
    let (dd, mke2fs) = (path(&tools.dd), path(&tools.mke2fs));
    let part = |name: &str, lines: String| {
        format!("say \"PART {name}\"\npart_t0=$(now)\n{lines}echo \"{PART_TIME}{name} $(( $(now) - part_t0 ))\"\n")
    };
    for p in &plan.parts {
        let lines = match p.as_str() {
            "basic" => zoned_lines(&dd) + &ftl_lines(&mke2fs),
            "conv" => conv_lines(&dd, &mke2fs, &path(&tools.blkdiscard)),
            "crash" => {
                let zoned = plan.cycles.unwrap_or(ublk_crash::ZONED_CYCLES);
                let ftl = plan.cycles.unwrap_or(ublk_crash::FTL_CYCLES);
                ublk_crash::zoned_lines(&dd, zoned) + &ublk_crash::ftl_lines(&dd, &mke2fs, ftl)
            }
            ublk_perf::PART => ublk_perf::lines(&dd),
            p if ublk_clients::PARTS.contains(&p) => {
                ublk_clients::lines(p, &plan.zbd_tests, &mke2fs)
            }
            _ => continue,
        };
        s.push_str(&part(p, lines));
    }
    s.push_str(&format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{RESULT_MARKER} PASS"; else echo "{RESULT_MARKER} FAIL"; fi
poweroff -f
"#
    ));
    s
}

/// Shell helpers: `start_server LABEL OUT CMD...` runs a `zns ... ublk`
/// in the background (`$SP` its pid) and waits for the block device its
/// first line names (`$D` the path, `$B` its name); `stop_server LABEL
/// OUT [failures-expected]` sends it SIGTERM, waits for it to end, and
/// checks that the device is gone and that no request failed (unless the
/// clients made requests fail on purpose).
const SERVER_HELPERS: &str = r#"start_server() {
    label=$1; out=$2; shift 2
    say "RUN $label: $*"
    "$@" > $out 2> $out.err &
    SP=$!
    D=""; i=0
    while [ $i -lt 300 ]; do
        D=$(head -n 1 $out 2>/dev/null)
        case "$D" in /dev/ublkb*) [ -b "$D" ] && break ;; esac
        kill -0 $SP 2>/dev/null || break
        D=""; sleep 0.1; i=$((i + 1))
    done
    if [ -z "$D" ]; then
        fail=1; echo "FAIL $label: no ublk block device"; cat $out $out.err
        return 1
    fi
    B=$(basename $D)
    cat $out
    say "END $label: $D"
}
stop_server() {
    # Not $label: the run and expect helpers set that one.
    server=$1; out=$2
    kill -TERM $SP
    i=0
    while kill -0 $SP 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $SP 2>/dev/null; then
        fail=1; echo "FAIL $server: the server did not end on SIGTERM"; kill -KILL $SP
    fi
    wait $SP
    rc=$?
    cat $out; cat $out.err
    if [ $rc -ne 0 ]; then fail=1; echo "FAIL $server: the server exited with $rc"; fi
    if [ -e /sys/block/$B ] || [ -e /dev/$B ]; then fail=1; echo "FAIL $server: $B is still there"; fi
    [ "$3" = failures-expected ] || expect $server-clean "(0 failed)" cat $out
    say "END $server: $B removed"
}
"#;

/// Where the zoned device's server answers `--metrics` in the guest.
const METRICS_ADDR: &str = "127.0.0.1:9464";

/// Bytes the zoned part's `dd` writes (one 64 KiB block), and reads back,
/// before the scrape.
const DD_BYTES: u64 = 65536;

/// `metric FILE NAME OPCODE`: the sum of the samples of counter `NAME`
/// (`zns_bytes_total`, ...) with label `opcode="OPCODE"` in the scrape
/// `FILE` (every queue's), as a whole number; 0 when there are none.
const METRIC_FN: &str = r#"        metric() { awk -v name="$2{" -v op="opcode=\"$3\"" 'index($0, name) == 1 && index($0, op) { s += $NF } END { printf "%d\n", s }' "$1"; }"#;

/// Scrapes the zoned device's `--metrics` endpoint with busybox's `wget`
/// (the guest has no curl) once the server listens, and checks the I/O
/// the run did so far in its counters: the bytes `dd` wrote, exactly (the
/// kernel writes nothing of its own to a zoned disk), in one to 16
/// commands (64 KiB, split at most into 4 KiB); the bytes it read back and
/// no more than the kernel's own reads of the disk add (16 MiB); the
/// zone report `blkzone` asked for. Counters are summed over queues.
fn metrics_lines() -> String {
    let (addr, dd) = (METRICS_ADDR, DD_BYTES);
    format!(
        r#"    # The metrics endpoint, scraped inside the guest.
    if command -v wget > /dev/null; then
        i=0
        until grep -q "metrics on http://{addr}/metrics" /tmp/zoned.out && wget -q -O /tmp/metrics.txt http://{addr}/metrics; do
            i=$((i + 1)); [ $i -ge 100 ] && break; sleep 0.1
        done
        [ -s /tmp/metrics.txt ] || {{ fail=1; echo "FAIL ublk-metrics-scrape: no answer from http://{addr}/metrics"; cat /tmp/zoned.out.err; }}
{METRIC_FN}
        m=/tmp/metrics.txt
        w=$(metric $m zns_bytes_total write); wn=$(metric $m zns_commands_total write)
        r=$(metric $m zns_bytes_total read); zr=$(metric $m zns_commands_total zone_management_receive)
        say "metrics: $w bytes written in $wn commands, $r bytes read, $zr zone reports"
        if [ "$w" -ne {dd} ] || [ "$wn" -lt 1 ] || [ "$wn" -gt 16 ]; then
            fail=1; echo "FAIL ublk-metrics-writes: $w bytes in $wn commands, not the {dd} dd wrote"; cat /tmp/metrics.txt
        fi
        if [ "$r" -lt {dd} ] || [ "$r" -gt 16777216 ]; then
            fail=1; echo "FAIL ublk-metrics-reads: $r bytes read, dd read {dd}"
        fi
        if [ "$zr" -lt 1 ]; then fail=1; echo "FAIL ublk-metrics-reports: no zone report counted"; fi
    else
        fail=1; echo "FAIL ublk-metrics: the guest has no wget to scrape the endpoint with"
    fi
"#
    )
}

/// The zoned device: the kernel's view, blkzone, dd with direct I/O, the
/// metrics endpoint ([`metrics_lines`]).
fn zoned_lines(dd: &str) -> String {
    format!(
        r#"# emu:small as a host-managed zoned block device, its metrics on loopback.
ip link set lo up
if start_server ublk-zoned /tmp/zoned.out /bin/zns --device emu:small ublk --queues 2 --depth 32 --metrics {METRICS_ADDR}; then
    q=/sys/block/$B/queue
    say "$B: zoned=$(cat $q/zoned) zones=$(cat $q/nr_zones) zone_sectors=$(cat $q/chunk_sectors) max_open=$(cat $q/max_open_zones) max_active=$(cat $q/max_active_zones) append_max=$(cat $q/zone_append_max_bytes) logical_block=$(cat $q/logical_block_size)"
    expect zoned host-managed cat $q/zoned
    expect nr-zones 256 cat $q/nr_zones
    expect zone-sectors 8192 cat $q/chunk_sectors
    expect blkzone-report "start: 0x000002000, len 0x002000" blkzone report -c 3 $D
    expect blkzone-capacity "cap 0x001e00" blkzone report -c 1 $D
    head -c {DD_BYTES} /dev/urandom > /tmp/pattern
    run dd-write {dd} if=/tmp/pattern of=$D bs=64k count=1 oflag=direct
    run dd-read {dd} if=$D of=/tmp/back bs=64k count=1 iflag=direct
    run dd-compare cmp /tmp/pattern /tmp/back
{metrics}    expect blkzone-written "wptr 0x000080" blkzone report -c 1 $D
    expect blkzone-implicit "(oi)" blkzone report -c 1 $D
    run blkzone-open blkzone open -o 0x2000 -c 1 $D
    expect blkzone-opened "(oe)" blkzone report -o 0x2000 -c 1 $D
    run blkzone-finish blkzone finish -o 0x2000 -c 1 $D
    expect blkzone-full "(fu)" blkzone report -o 0x2000 -c 1 $D
    run blkzone-reset blkzone reset -o 0 -c 1 $D
    expect blkzone-reset-wp "wptr 0x000000" blkzone report -c 1 $D
    run blkzone-reset-all blkzone reset $D
    expect blkzone-all-empty "(em)" blkzone report -o 0x2000 -c 1 $D
    stop_server ublk-zoned-stop /tmp/zoned.out
fi
"#,
        metrics = metrics_lines()
    )
}

/// What the `conv` part serves: the conventional twin of `emu:small`
/// cut to 64 zones' flash (about 220 MiB after over-provisioning).
const CONV_DEVICE: &str = "emu:small-conv,zones=64";

/// Largest discard and Write Zeroes the conventional device takes: one
/// Write Zeroes command of 65536 4-KiB blocks.
const CONV_ZEROES_BYTES: u64 = 65536 * 4096;

/// A conventional namespace as a plain disk: the kernel's view, ext4
/// with a file written (fsync), checked and read back, then discard and
/// Write Zeroes through `blkdiscard` (util-linux's at `blkdiscard`,
/// busybox's has no `-z`) read back as zeros beside data kept.
fn conv_lines(dd: &str, mke2fs: &str, blkdiscard: &str) -> String {
    format!(
        r#"# {CONV_DEVICE}, a conventional namespace, as a plain disk.
if start_server ublk-conv /tmp/conv.out /bin/zns --device {CONV_DEVICE} ublk --queues 2 --depth 32; then
    q=/sys/block/$B/queue
    say "$B: zoned=$(cat $q/zoned) sectors=$(cat /sys/block/$B/size) logical_block=$(cat $q/logical_block_size) discard_max=$(cat $q/discard_max_bytes) write_zeroes_max=$(cat $q/write_zeroes_max_bytes)"
    expect conv-not-zoned none cat $q/zoned
    expect conv-described "a conventional namespace, not zoned" cat /tmp/conv.out
    expect conv-discard-max {CONV_ZEROES_BYTES} cat $q/discard_max_bytes
    expect conv-write-zeroes-max {CONV_ZEROES_BYTES} cat $q/write_zeroes_max_bytes
    run conv-mkfs-ext4 {mke2fs} -t ext4 -F -q $D
    run conv-mount mount -t ext4 $D /mnt
    head -c 4194304 /dev/urandom > /tmp/conv-file
    run conv-write-fsync {dd} if=/tmp/conv-file of=/mnt/file bs=1M conv=fsync
    run conv-umount umount /mnt
    run conv-fsck e2fsck -f -n $D
    run conv-mount-ro mount -t ext4 -o ro $D /mnt
    run conv-read-file cmp /tmp/conv-file /mnt/file
    run conv-umount-ro umount /mnt
    # 1 MiB at 64 MiB: its first 256 KiB discarded, the next 256 KiB
    # zeroed, the rest kept (-f: blkdiscard refuses a device holding a
    # filesystem otherwise).
    head -c 1048576 /dev/urandom > /tmp/conv-pattern
    run conv-dd-write {dd} if=/tmp/conv-pattern of=$D bs=1M seek=64 count=1 oflag=direct
    run conv-blkdiscard {blkdiscard} -f -o 67108864 -l 262144 $D
    run conv-blkdiscard-z {blkdiscard} -f -z -o 67371008 -l 262144 $D
    run conv-dd-read {dd} if=$D of=/tmp/conv-back bs=1M skip=64 count=1 iflag=direct
    {{ head -c 524288 /dev/zero; tail -c 524288 /tmp/conv-pattern; }} > /tmp/conv-want
    run conv-zeros-and-data cmp /tmp/conv-want /tmp/conv-back
    stop_server ublk-conv-stop /tmp/conv.out
fi
"#
    )
}

/// The FTL as a plain disk: ext4 on it.
fn ftl_lines(mke2fs: &str) -> String {
    format!(
        r#"# The FTL on emu:small as a plain disk: ext4.
if start_server ublk-ftl /tmp/ftl.out /bin/zns --device emu:small ftl ublk; then
    expect ftl-not-zoned none cat /sys/block/$B/queue/zoned
    say "$B: $(cat /sys/block/$B/size) sectors"
    run mkfs-ext4 {mke2fs} -t ext4 -F -q $D
    run mount-ext4 mount -t ext4 $D /mnt
    head -c 4194304 /dev/urandom > /tmp/file
    run write-file cp /tmp/file /mnt/file
    run umount-ext4 umount /mnt
    run fsck-ext4 e2fsck -f -n $D
    run mount-ro mount -t ext4 -o ro $D /mnt
    run read-file cmp /tmp/file /mnt/file
    run umount-ro umount /mnt
    stop_server ublk-ftl-stop /tmp/ftl.out
    expect ftl-checkpoint "checkpoint written" cat /tmp/ftl.out
fi
"#
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_script_serves_the_zoned_device_then_the_ftl_and_ends_with_a_marker() {
        let plan = Plan {
            parts: PARTS.iter().map(|p| p.to_string()).collect(),
            cycles: None,
            zbd_tests: Vec::new(),
        };
        let tools = GuestTools {
            mke2fs: "/usr/sbin/mke2fs".into(),
            dd: "/usr/bin/dd".into(),
            blkdiscard: "/usr/sbin/blkdiscard".into(),
        };
        let s = init_script(&["ublk_drv.ko".into(), "ext4.ko".into()], &tools, &plan);
        assert!(s.starts_with("#!/bin/sh\n"));
        let ublk = s.find("insmod /lib/modules/ublk_drv.ko").unwrap();
        let zoned = s.find("/bin/zns --device emu:small ublk").unwrap();
        let dd = s
            .find("run dd-write /usr/bin/dd if=/tmp/pattern of=$D bs=64k count=1 oflag=direct")
            .unwrap();
        let stop = s.find("stop_server ublk-zoned-stop").unwrap();
        let ftl = s.find("/bin/zns --device emu:small ftl ublk").unwrap();
        let mkfs = s.find("run mkfs-ext4 /usr/sbin/mke2fs -t ext4").unwrap();
        let fsck = s.find("run fsck-ext4 e2fsck -f -n $D").unwrap();
        assert!(ublk < zoned && zoned < dd && dd < stop && stop < ftl && ftl < mkfs && mkfs < fsck);
        // The conventional namespace: a plain disk with ext4, discard and
        // Write Zeroes, between the FTL and the crash cycles.
        let conv_part = s.find("say \"PART conv\"").unwrap();
        let conv = s.find("/bin/zns --device emu:small-conv,zones=64 ublk").unwrap();
        let order = [
            "expect conv-not-zoned none cat $q/zoned",
            "expect conv-discard-max 268435456 cat $q/discard_max_bytes",
            "run conv-mkfs-ext4 /usr/sbin/mke2fs -t ext4 -F -q $D",
            "of=/mnt/file bs=1M conv=fsync",
            "run conv-fsck e2fsck -f -n $D",
            "run conv-read-file cmp /tmp/conv-file /mnt/file",
            "run conv-blkdiscard /usr/sbin/blkdiscard -f -o 67108864 -l 262144 $D",
            "run conv-blkdiscard-z /usr/sbin/blkdiscard -f -z -o 67371008 -l 262144 $D",
            "run conv-zeros-and-data cmp /tmp/conv-want /tmp/conv-back",
            "stop_server ublk-conv-stop /tmp/conv.out",
        ]
        .map(|l| s.find(l).unwrap_or_else(|| panic!("{l:?} not in the script")));
        assert!(fsck < conv_part && conv_part < conv && conv < order[0]);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        let crash = s.find("say \"PART crash\"").unwrap();
        assert!(order[9] < crash && crash < s.find("ublk --id 7").unwrap());
        assert!(s.contains("echo \"UBLK-PART conv $(( $(now) - part_t0 ))\""));
        assert!(s.contains("echo \"UBLK-PART basic $(( $(now) - part_t0 ))\""));
        assert_eq!(parse_part_time("UBLK-PART crash 61"), Some(("crash".into(), 61)));
        assert_eq!(parse_part_time("UBLK-PART crash"), None);
        assert!(s.contains("expect zoned host-managed cat $q/zoned"));
        // The zoned server's metrics, scraped after dd's I/O, before the
        // zone commands; loopback up first.
        let lo = s.find("ip link set lo up").unwrap();
        let served = s.find("ublk --queues 2 --depth 32 --metrics 127.0.0.1:9464").unwrap();
        let compare = s.find("run dd-compare").unwrap();
        let scrape = s.find("wget -q -O /tmp/metrics.txt http://127.0.0.1:9464/metrics").unwrap();
        let checked = s.find("FAIL ublk-metrics-writes").unwrap();
        let open = s.find("run blkzone-open").unwrap();
        assert!(lo < served && served < compare && compare < scrape && scrape < checked);
        assert!(checked < open && open < stop, "{s}");
        assert!(s.contains(r#"if [ "$w" -ne 65536 ]"#) && s.contains("head -c 65536 /dev/urandom"));
        assert!(s.contains("VMTEST-RESULT: PASS") && s.trim_end().ends_with("poweroff -f"));
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        let o = p(&["--timeout", "60", "--kvm"]).unwrap().unwrap();
        assert_eq!((o.guest.vm().timeout, o.guest.vm().kvm), (Duration::from_secs(60), true));
        assert_eq!((&o.parts[..], o.cycles), (&List::of(&PARTS[..DEFAULT_PARTS])[..], None));
        assert!(o.parts.iter().any(|p| p == "conv"), "conv runs by default");
        assert!(!o.parts.iter().any(|p| p == ublk_perf::PART), "not the benchmark");
        let o = p(&["--parts", "conv,basic"]).unwrap().unwrap();
        assert_eq!(o.parts.0, ["basic", "conv"]);
        let o = p(&["--parts", "crash", "--cycles", "3"]).unwrap().unwrap();
        assert_eq!((&o.parts[..], o.cycles), (&["crash".to_string()][..], Some(3)));
        assert!(p(&["--parts", "nope"]).is_err() && p(&["--cycles", "14"]).is_err());
        assert!(p(&["--help"]).unwrap().is_none());
        assert!(p(&["--frobnicate"]).is_err());
    }

    /// Runs the guest's `metric` shell function on `scrape`.
    fn metric(scrape: &str, name: &str, opcode: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.txt");
        std::fs::write(&file, scrape).unwrap();
        let script = format!("{METRIC_FN}\nmetric \"$1\" \"$2\" \"$3\"");
        let out = std::process::Command::new("sh")
            .args(["-c", &script, "sh", file.to_str().unwrap(), name, opcode])
            .output();
        match out {
            Ok(o) if o.status.success() => Some(String::from_utf8(o.stdout).unwrap()),
            Ok(o) => panic!("metric {name} {opcode}: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and no sh: {e}");
                println!("skipped: no sh to run the guest's metric function: {e}");
                None
            }
        }
    }

    #[test]
    fn the_guest_sums_a_counter_over_queues_by_opcode() {
        // The exporter's text: two queues, a histogram and completions by
        // status (whose label holds spaces) beside the counters.
        let scrape = r#"# TYPE zns_commands counter
zns_commands_total{namespace="1",queue="0",opcode="write"} 3
zns_commands_total{namespace="1",queue="1",opcode="write"} 2
zns_commands_total{namespace="1",queue="1",opcode="read"} 7
# TYPE zns_bytes counter
zns_bytes_total{namespace="1",queue="0",opcode="write"} 49152
zns_bytes_total{namespace="1",queue="1",opcode="write"} 16384
zns_bytes_total{namespace="1",queue="1",opcode="read"} 65536
zns_bytes_total{namespace="1",queue="1",opcode="zone_append"} 4096
zns_command_latency_seconds_bucket{le="0.001",namespace="1",queue="0",opcode="write"} 3
zns_completions_total{namespace="1",queue="0",status="Successful Completion"} 12
# EOF
"#;
        let Some(w) = metric(scrape, "zns_bytes_total", "write") else { return };
        assert_eq!(w, "65536\n");
        assert_eq!(metric(scrape, "zns_commands_total", "write").unwrap(), "5\n");
        assert_eq!(metric(scrape, "zns_bytes_total", "read").unwrap(), "65536\n");
        assert_eq!(metric(scrape, "zns_commands_total", "flush").unwrap(), "0\n");
        assert_eq!(metric("", "zns_bytes_total", "write").unwrap(), "0\n");
    }

    #[test]
    fn ublk_perf_is_ublk_with_the_benchmark_part() {
        let perf = |a: &[&str]| {
            let argv = ["cargo xtask", "ublk-perf"].into_iter().chain(a.iter().copied());
            match crate::Cli::try_parse_from(argv).unwrap().task {
                Some(crate::Task::UblkPerf(o)) => o,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(perf(&[]).parts.0, [ublk_perf::PART]);
        let o = perf(&["--parts", "perf,basic", "--timeout", "60"]);
        assert_eq!(o.parts, List::of(&["basic", "perf"]), "in the order they run");
        assert_eq!(o.guest.vm().timeout, Duration::from_secs(60));
        let argv = ["cargo xtask", "ublk"];
        match crate::Cli::try_parse_from(argv).unwrap().task {
            Some(crate::Task::Ublk(o)) => assert_eq!(o.parts, List::of(&PARTS[..DEFAULT_PARTS])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_option_values_are_errors_that_say_what_is_wanted() {
        let bad = |a: &[&str]| crate::args::tests::parse::<Args>(a).unwrap_err().to_string();
        assert!(bad(&["--parts", "basic,nope"]).contains("unknown part \"nope\""));
        assert!(bad(&["--cycles", "0"]).contains("--cycles"));
        assert!(bad(&["--cycles", "several"]).contains("--cycles"));
        assert!(crate::args::tests::parse::<Args>(&["--cycles", "13"]).is_ok(), "13 is the most");
        assert!(bad(&["--zbd-tests", "1-x"]).contains("not test numbers and ranges"));
        assert!(bad(&["--timeout", "-1"]).contains("--timeout"));
        let o = crate::args::tests::parse::<Args>(&[]).unwrap().unwrap();
        assert_eq!((o.guest.vm().timeout, o.zbd_tests()), (Duration::from_secs(900), &[][..]));
    }
}
