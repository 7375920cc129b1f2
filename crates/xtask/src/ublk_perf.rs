//! `cargo xtask ublk`'s `perf` part (also `cargo xtask ublk-perf`): 4 KiB
//! random reads with fio at queue depth 1 (median latency) and 32 (IOPS)
//! through each way the guest's kernel reaches a znskit device, in one
//! guest run, on the same kind of device: an emulator that keeps no data
//! and has no timing model (`emu:small,media=null,timing=off`), so what is
//! measured is the path, not a medium.
//!
//! - `null_blk`: the kernel's null block device, the floor (no server);
//!   measured first, and again at queue depth 32 right after each ublk
//!   path, so that a ublk path's ratio to the floor compares runs a few
//!   seconds apart (the emulated guest's speed drifts with the host's
//!   load); the table shows the floor's medians.
//! - `ublk-zoned-pinned` and `ublk-ftl-pinned`: the same with
//!   `--pin-queues`, each queue's thread kept on its queue's CPUs
//!   (libublk's placement, the server's before it let them run anywhere).
//! - `ublk-zoned` and `nvme-tcp-zoned`: the zoned device itself through
//!   `zns ublk` and through the kernel's nvme-tcp to `zns serve` on the
//!   guest's loopback.
//! - `ublk-ftl`, `nbd-ftl` and `nvme-tcp-ftl`: the FTL on that device
//!   through `zns ftl ublk`, through the kernel's NBD client to `zns ftl
//!   serve`, and as `zns serve --ftl`'s conventional namespace. NBD
//!   exports only the FTL (a plain disk), so the three transports are
//!   compared on the FTL; the 64 MiB read are written first, so reads
//!   reach the device rather than the FTL's unmapped-block shortcut.
//!
//! Each path's figures come from fio's JSON (`--output-format=json`),
//! printed by the guest on one line and read here; the task writes
//! `docs/ublk-perf.json` and prints a table and the issue's goals.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::{Error, Result};

/// The part's name in `cargo xtask ublk --parts`.
pub const PART: &str = "perf";

/// The device every path serves: data-less, no timing model.
pub const DEVICE: &str = "emu:small,media=null,timing=off";

/// The guest's line with one measurement: `UBLK-PERF PATH QD FIO-JSON`.
const MARKER: &str = "UBLK-PERF ";

/// Seconds each fio run measures (after one second of ramp).
const RUNTIME_SECS: u32 = 5;

/// The bytes fio reads from: the start of every device.
const REGION_MIB: u32 = 64;

/// The NVMe/TCP subsystem `zns serve` exports by default.
const NQN: &str = "nqn.2026-11.io.znskit:target";

/// The host's NQN and ID for nvme connect (the guest has no
/// `/etc/nvme/hostnqn`, and the kernel refuses a host ID seen with
/// another NQN).
const HOST_ID: &str = "3f6a1c2e-7b54-4d0e-9a61-5c2d8e4b7f10";

/// The floor's path name.
const FLOOR: &str = "null_blk";

/// The paths, in the order the table lists them: (name, what it is).
pub const PATHS: &[(&str, &str)] = &[
    ("null_blk", "the kernel's null_blk (no server): the floor"),
    ("ublk-zoned", "zns ublk on the zoned device"),
    ("ublk-zoned-pinned", "zns ublk --pin-queues: queue threads on their queues' CPUs"),
    ("nvme-tcp-zoned", "the kernel's nvme-tcp to zns serve, the zoned namespace"),
    ("ublk-ftl", "zns ftl ublk: the FTL on the device"),
    ("ublk-ftl-pinned", "zns ftl ublk --pin-queues"),
    ("nbd-ftl", "the kernel's NBD client to zns ftl serve (the same FTL)"),
    ("nvme-tcp-ftl", "the kernel's nvme-tcp to zns serve --ftl (the same FTL)"),
];

/// Kernel modules the part needs beyond ublk's.
pub const MODULES: &[&str] = &["null_blk", "nbd", "nvme-tcp"];

/// Host programs (program, Debian package) the part runs in the guest.
pub const TOOLS: &[(&str, &str)] =
    &[("fio", "fio"), ("nvme", "nvme-cli"), ("nbd-client", "nbd-client")];

/// One path's figures.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// One of [`PATHS`].
    pub path: String,
    /// Median latency at queue depth 1, microseconds (submission to
    /// completion, fio's `lat`).
    pub qd1_p50_us: f64,
    /// IOPS at queue depth 1.
    pub qd1_iops: f64,
    /// IOPS at queue depth 32.
    pub qd32_iops: f64,
    /// Median latency at queue depth 32, microseconds.
    pub qd32_p50_us: f64,
    /// null_blk's IOPS at queue depth 32 in the runs beside this path's
    /// ([`floor_beside`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_beside_qd32_iops: Option<f64>,
}

/// One fio run's figures: (IOPS, median latency in microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Reads per second.
    pub iops: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
}

/// Parses a guest line `UBLK-PERF PATH QD JSON`: the path, the queue
/// depth and fio's figures.
pub fn parse_line(line: &str) -> Option<(String, u32, Sample)> {
    let rest = line.strip_prefix(MARKER)?;
    let mut it = rest.splitn(3, ' ');
    let path = it.next()?.to_string();
    let qd: u32 = it.next()?.parse().ok()?;
    let json = it.next()?;
    // fio may print warnings before its JSON.
    let json = &json[json.find('{')?..];
    Some((path, qd, parse_fio(json)?))
}

/// fio's JSON: the first job's read IOPS and median latency (total
/// latency where fio reports its percentiles, completion latency
/// otherwise).
fn parse_fio(json: &str) -> Option<Sample> {
    let v: Value = serde_json::from_str(json).ok()?;
    let read = v.get("jobs")?.get(0)?.get("read")?;
    let iops = read.get("iops")?.as_f64()?;
    let p50 = ["lat_ns", "clat_ns"]
        .iter()
        .find_map(|k| read.get(k)?.get("percentile")?.get("50.000000")?.as_f64())?;
    Some(Sample { iops, p50_us: p50 / 1000.0 })
}

/// The rows of the paths measured at both depths, in [`PATHS`] order; a
/// path measured more than once at a depth (null_blk, between the others)
/// shows its medians.
pub fn rows(samples: &[(String, u32, Sample)]) -> Vec<Row> {
    let median = |p: &str, qd: u32, f: fn(&Sample) -> f64| {
        let mut v: Vec<f64> =
            samples.iter().filter(|(q, d, _)| q == p && *d == qd).map(|s| f(&s.2)).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    };
    let iops: fn(&Sample) -> f64 = |s| s.iops;
    let p50: fn(&Sample) -> f64 = |s| s.p50_us;
    PATHS
        .iter()
        .filter_map(|(p, _)| {
            Some(Row {
                path: p.to_string(),
                qd1_p50_us: round1(median(p, 1, p50)?),
                qd1_iops: median(p, 1, iops)?.round(),
                qd32_iops: median(p, 32, iops)?.round(),
                qd32_p50_us: round1(median(p, 32, p50)?),
                floor_beside_qd32_iops: floor_beside(samples, p).map(f64::round),
            })
        })
        .collect()
}

/// null_blk's IOPS at queue depth 32 measured right beside `path`'s: the
/// mean of the floor's runs just before and just after it (the guest's
/// speed drifts with the host's load, so a ratio to the floor compares
/// runs minutes apart only at a cost). `None` for null_blk itself or
/// with no floor run beside.
pub fn floor_beside(samples: &[(String, u32, Sample)], path: &str) -> Option<f64> {
    if path == FLOOR {
        return None;
    }
    let floor = |s: &&(String, u32, Sample)| s.0 == FLOOR && s.1 == 32;
    let at = samples.iter().position(|(p, qd, _)| p == path && *qd == 32)?;
    let before = samples[..at].iter().rev().find(floor).map(|s| s.2.iops);
    let after = samples[at + 1..].iter().find(floor).map(|s| s.2.iops);
    match (before, after) {
        (Some(a), Some(b)) => Some((a + b) / 2.0),
        (a, b) => a.or(b),
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The issue's goals at queue depth 32, each with whether it is met:
/// ublk at least twice NBD's IOPS, ahead of nvme-tcp, within 2x of
/// null_blk (the floor's runs beside the path's, [`floor_beside`], where
/// there are some; its median otherwise).
pub fn goals(rows: &[Row]) -> Vec<(String, Option<bool>)> {
    let row = |p: &str| rows.iter().find(|r| r.path == p);
    let iops = |p: &str| row(p).map(|r| r.qd32_iops);
    let ratio = |a: &str, b: &str| {
        let beside = if b == FLOOR { row(a)?.floor_beside_qd32_iops } else { None };
        Some(iops(a)? / beside.or(iops(b))?)
    };
    let say = |what: String, r: Option<f64>, ok: fn(f64) -> bool| {
        let shown = r.map_or("not measured".into(), |r| format!("{r:.2}x"));
        (format!("{what}: {shown}"), r.map(ok))
    };
    vec![
        say(
            "ublk-ftl / nbd-ftl IOPS at QD 32 (goal >= 2)".into(),
            ratio("ublk-ftl", "nbd-ftl"),
            |r| r >= 2.0,
        ),
        say(
            "ublk-ftl / nvme-tcp-ftl IOPS at QD 32 (goal > 1)".into(),
            ratio("ublk-ftl", "nvme-tcp-ftl"),
            |r| r > 1.0,
        ),
        say(
            "ublk-zoned / nvme-tcp-zoned IOPS at QD 32 (goal > 1)".into(),
            ratio("ublk-zoned", "nvme-tcp-zoned"),
            |r| r > 1.0,
        ),
        say(
            "ublk-zoned / null_blk IOPS at QD 32 (goal >= 0.5)".into(),
            ratio("ublk-zoned", "null_blk"),
            |r| r >= 0.5,
        ),
        say(
            "ublk-ftl / null_blk IOPS at QD 32 (goal >= 0.5)".into(),
            ratio("ublk-ftl", "null_blk"),
            |r| r >= 0.5,
        ),
    ]
}

/// The JSON the task writes.
#[derive(Debug, Serialize)]
struct Report<'a> {
    what: &'static str,
    how: String,
    device: &'static str,
    rows: &'a [Row],
    goals: Vec<Goal>,
}

#[derive(Debug, Serialize)]
struct Goal {
    goal: String,
    met: Option<bool>,
}

/// Prints the table and the goals, writes `docs/ublk-perf.json` under
/// `root`. A path without figures is an error under `CI=true` (its
/// client missing or failing), a warning otherwise.
pub fn report(samples: &[(String, u32, Sample)], root: &Path, smp: u32) -> Result<()> {
    let rows = rows(samples);
    println!(
        "ublk perf: {:<18} {:>12} {:>10} {:>11} {:>12} {:>14}",
        "path", "QD1 p50 us", "QD1 IOPS", "QD32 IOPS", "QD32 p50 us", "null_blk beside"
    );
    for r in &rows {
        let beside = r.floor_beside_qd32_iops.map_or("-".into(), |f| format!("{f:.0}"));
        println!(
            "ublk perf: {:<18} {:>12.1} {:>10.0} {:>11.0} {:>12.1} {:>14}",
            r.path, r.qd1_p50_us, r.qd1_iops, r.qd32_iops, r.qd32_p50_us, beside
        );
    }
    let goals: Vec<Goal> = goals(&rows).into_iter().map(|(goal, met)| Goal { goal, met }).collect();
    for g in &goals {
        let verdict = match g.met {
            Some(true) => "met",
            Some(false) => "missed",
            None => "unknown",
        };
        println!("ublk perf: {} ({verdict})", g.goal);
    }
    let missing: Vec<&str> =
        PATHS.iter().map(|p| p.0).filter(|p| !rows.iter().any(|r| r.path == *p)).collect();
    let report = Report {
        what: "4 KiB random reads with fio (io_uring, direct I/O, the first 64 MiB of each \
               device, 1 s ramp and 5 s measured per run) at queue depth 1 and 32",
        how: format!(
            "one QEMU guest under software emulation (TCG, {smp} vCPUs), Debian's generic \
             kernel; every server in the guest (nvme-tcp and NBD on its loopback); absolute \
             figures are the emulated guest's, the ratios are what compares"
        ),
        device: DEVICE,
        rows: &rows,
        goals,
    };
    if !missing.is_empty() {
        let msg = format!("ublk perf: no figures for {}", missing.join(", "));
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Err(Error::new(msg));
        }
        println!("{msg}");
    }
    if rows.is_empty() {
        return Err(Error::new("ublk perf: nothing was measured"));
    }
    let path = root.join("docs/ublk-perf.json");
    let json = serde_json::to_string_pretty(&report).map_err(|e| Error::new(e.to_string()))?;
    std::fs::write(&path, json + "\n").map_err(|e| Error::io(&path, e))?;
    println!("ublk perf: wrote {}", path.display());
    Ok(())
}

/// The guest's lines of the part. Needs the shell helpers of `ublk.rs`
/// (`start_server`, `stop_server`) and the guest's helpers (`run`,
/// `say`); `dd` is Debian's program's path (busybox's has no direct
/// I/O).
pub fn lines(dd: &str) -> String {
    let region = REGION_MIB;
    let secs = RUNTIME_SECS;
    format!(
        r#"# Performance: 4 KiB random reads at queue depth 1 and 32 on each path.
ip link set lo up
PU="{DEVICE}"
perf_fio() {{
    for qd in ${{3:-1 32}}; do
        fio --name=perf --filename=$2 --direct=1 --rw=randread --bs=4k --ioengine=io_uring --iodepth=$qd --size={region}m --time_based --runtime={secs} --ramp_time=1 --lat_percentiles=1 --randrepeat=0 --output-format=json --output=/tmp/perf.json > /tmp/perf.err 2>&1
        rc=$?
        if [ $rc -ne 0 ]; then
            fail=1; echo "FAIL perf-$1-qd$qd: fio exited with $rc"; cat /tmp/perf.err /tmp/perf.json
        else
            echo "{MARKER}$1 $qd $(tr -d '\n' < /tmp/perf.json)"
        fi
    done
}}
# The floor again at QD 32, beside the path just measured.
perf_floor() {{ if [ -b /dev/nullb0 ]; then perf_fio null_blk /dev/nullb0 32; fi; }}
perf_fill() {{ run perf-fill-$1 {dd} if=/dev/zero of=$2 bs=1M count={region} oflag=direct status=none; }}
wait_listening() {{
    i=0
    while [ $i -lt 300 ] && ! grep -q listening $1 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    grep -q listening $1 || {{ fail=1; echo "FAIL $2: the server is not listening"; cat $1; }}
}}
if [ -b /dev/nullb0 ]; then perf_fio null_blk /dev/nullb0; else fail=1; echo "FAIL perf-null_blk: no /dev/nullb0"; fi
if start_server perf-ublk-zoned /tmp/pz.out /bin/zns --device $PU ublk --queues 2 --depth 64; then
    perf_fio ublk-zoned $D
    perf_floor
    stop_server perf-ublk-zoned-stop /tmp/pz.out
fi
if start_server perf-ublk-zoned-pinned /tmp/pzp.out /bin/zns --device $PU ublk --queues 2 --depth 64 --pin-queues; then
    perf_fio ublk-zoned-pinned $D
    perf_floor
    stop_server perf-ublk-zoned-pinned-stop /tmp/pzp.out
fi
if start_server perf-ublk-ftl /tmp/pf.out /bin/zns --device $PU ftl ublk --queues 2 --depth 64; then
    perf_fill ublk-ftl $D
    perf_fio ublk-ftl $D
    perf_floor
    stop_server perf-ublk-ftl-stop /tmp/pf.out
fi
if start_server perf-ublk-ftl-pinned /tmp/pfp.out /bin/zns --device $PU ftl ublk --queues 2 --depth 64 --pin-queues; then
    perf_fill ublk-ftl-pinned $D
    perf_fio ublk-ftl-pinned $D
    perf_floor
    stop_server perf-ublk-ftl-pinned-stop /tmp/pfp.out
fi
# NBD: the FTL through the kernel's NBD client.
/bin/zns --device $PU ftl serve --listen 127.0.0.1:10809 > /tmp/nbd.out 2>&1 &
NP=$!
wait_listening /tmp/nbd.out perf-nbd
if run perf-nbd-connect nbd-client 127.0.0.1 10809 /dev/nbd0 -N ftl -b 4096 -t 20 && [ $rc -eq 0 ]; then
    perf_fill nbd-ftl /dev/nbd0
    perf_fio nbd-ftl /dev/nbd0
    run perf-nbd-disconnect nbd-client -d /dev/nbd0
fi
kill -TERM $NP; wait $NP; cat /tmp/nbd.out
# NVMe/TCP: the zoned device and the FTL on it as two namespaces.
/bin/zns --device $PU serve --ftl $PU --listen 127.0.0.1:4420 > /tmp/tcp.out 2>&1 &
TP=$!
wait_listening /tmp/tcp.out perf-nvme-tcp
mkdir -p /etc/nvme
if run perf-nvme-connect nvme connect -t tcp -a 127.0.0.1 -s 4420 -n {NQN} --hostnqn nqn.2014-08.org.nvmexpress:uuid:{HOST_ID} --hostid {HOST_ID} && [ $rc -eq 0 ]; then
    i=0
    while [ $i -lt 100 ] && {{ [ ! -e /sys/block/nvme0n1 ] || [ ! -e /sys/block/nvme0n2 ]; }}; do sleep 0.1; i=$((i + 1)); done
    NZ=""; NF=""
    for d in /sys/block/nvme0n*; do
        if [ "$(cat $d/queue/zoned)" = host-managed ]; then NZ=/dev/$(basename $d); else NF=/dev/$(basename $d); fi
    done
    say "nvme-tcp: zoned $NZ, FTL $NF"
    if [ -n "$NZ" ]; then perf_fio nvme-tcp-zoned $NZ; else fail=1; echo "FAIL perf-nvme-tcp: no zoned namespace"; fi
    if [ -n "$NF" ]; then
        perf_fill nvme-tcp-ftl $NF
        perf_fio nvme-tcp-ftl $NF
    else
        fail=1; echo "FAIL perf-nvme-tcp: no FTL namespace"
    fi
    run perf-nvme-disconnect nvme disconnect -n {NQN}
fi
kill -TERM $TP; wait $TP; cat /tmp/tcp.out
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO: &str = r#"{"fio version":"fio-3.33","jobs":[{"jobname":"perf","read":{"iops":12345.6,"clat_ns":{"mean":70000.0},"lat_ns":{"mean":80000.0,"percentile":{"1.000000":50000,"50.000000":78336,"99.000000":120000}}}}]}"#;

    #[test]
    fn fio_lines_become_rows_and_goals() {
        let line = format!("{MARKER}ublk-ftl 1 fio: a warning {FIO}");
        let (p, qd, s) = parse_line(&line).unwrap();
        assert_eq!((p.as_str(), qd), ("ublk-ftl", 1));
        assert_eq!(s, Sample { iops: 12345.6, p50_us: 78.336 });
        assert!(parse_line("UBLK-PERF ublk-ftl 1 {}").is_none());
        assert!(parse_line("UBLK-PART perf 3").is_none());
        let sample = |iops| Sample { iops, p50_us: 10.0 };
        let samples = vec![
            ("nbd-ftl".to_string(), 32, sample(1000.0)),
            ("ublk-ftl".to_string(), 1, sample(500.0)),
            ("ublk-ftl".to_string(), 32, sample(2500.0)),
            ("nbd-ftl".to_string(), 1, sample(400.0)),
            ("null_blk".to_string(), 32, sample(4000.0)),
        ];
        let r = rows(&samples);
        assert_eq!(r.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["ublk-ftl", "nbd-ftl"]);
        assert_eq!((r[0].qd1_iops, r[0].qd32_iops, r[0].qd1_p50_us), (500.0, 2500.0, 10.0));
        let g = goals(&r);
        assert_eq!(
            g[0],
            ("ublk-ftl / nbd-ftl IOPS at QD 32 (goal >= 2): 2.50x".into(), Some(true))
        );
        assert_eq!(g[3].1, None);
    }

    #[test]
    fn the_floor_beside_a_path_is_the_runs_around_it() {
        let sample = |iops| Sample { iops, p50_us: 10.0 };
        let s = |p: &str, qd, iops| (p.to_string(), qd, sample(iops));
        let samples = vec![
            s("null_blk", 1, 100.0),
            s("null_blk", 32, 9000.0),
            s("ublk-zoned", 1, 50.0),
            s("ublk-zoned", 32, 4000.0),
            s("null_blk", 32, 7000.0),
            s("ublk-ftl", 1, 50.0),
            s("ublk-ftl", 32, 2000.0),
            s("null_blk", 32, 3000.0),
            s("nbd-ftl", 1, 10.0),
            s("nbd-ftl", 32, 500.0),
        ];
        assert_eq!(floor_beside(&samples, "ublk-zoned"), Some(8000.0));
        assert_eq!(floor_beside(&samples, "ublk-ftl"), Some(5000.0));
        assert_eq!(floor_beside(&samples, "nbd-ftl"), Some(3000.0));
        assert_eq!(floor_beside(&samples, "null_blk"), None);
        assert_eq!(floor_beside(&samples, "nvme-tcp-ftl"), None);
        let r = rows(&samples);
        let floor = r.iter().find(|r| r.path == "null_blk").unwrap();
        assert_eq!(floor.qd32_iops, 7000.0, "the median of the floor's runs");
        let g = goals(&r);
        assert_eq!(
            g[3],
            ("ublk-zoned / null_blk IOPS at QD 32 (goal >= 0.5): 0.50x".into(), Some(true))
        );
        assert_eq!(
            g[4],
            ("ublk-ftl / null_blk IOPS at QD 32 (goal >= 0.5): 0.40x".into(), Some(false))
        );
    }

    #[test]
    fn the_script_measures_every_path() {
        let s = lines("/usr/bin/dd");
        for (p, _) in PATHS {
            assert!(s.contains(&format!("perf_fio {p} ")), "{p}");
        }
        assert!(s.contains("--iodepth=$qd") && s.contains("for qd in ${3:-1 32}"));
        let floor = s.matches("\n    perf_floor\n").count();
        assert_eq!(floor, 4, "the floor beside every ublk path");
        assert!(s.contains("nbd-client 127.0.0.1 10809 /dev/nbd0 -N ftl"));
        assert!(s.contains("--device $PU serve --ftl $PU --listen"));
        assert!(s.contains("/usr/bin/dd if=/dev/zero of=$2 bs=1M count=64 oflag=direct"));
    }
}
