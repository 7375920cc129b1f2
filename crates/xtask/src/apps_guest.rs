//! The guest side of `cargo xtask apps`: the `/init` script that runs
//! RocksDB's `db_bench` on each stack, and the parsing of what it prints.
//!
//! Every measurement reaches the host as a console line with a prefix:
//! `APPS-STAT SIDE POINT KEY VALUE` for a counter read at a point of the
//! run (sectors the kernel wrote to a namespace, the filesystem's size and
//! use, f2fs's garbage collection counters), `APPS-SMART SIDE POINT JSON`
//! for the controller's SMART log (its data units written), `APPS-OCP SIDE
//! POINT PAGE` for its OCP SMART / Health Information Extended log (the
//! bytes its media took: nvme-cli's JSON, or the raw page in hex where
//! nvme-cli has no OCP plugin), `APPS-DB SIDE PHASE LINE` for each line
//! `db_bench` printed in a phase, and `APPS-SB SIDE PHASE LINE` for each
//! line sysbench printed (MariaDB's phases, [`crate::apps_mysql`]).

use std::collections::BTreeMap;

use std::path::Path;
use std::time::Instant;

use crate::apps_mysql::{self, Sysbench};
use crate::clients::{end_lines, start_lines};
use crate::probe::HostProbe;

/// Prefix of a counter line.
pub const STAT: &str = "APPS-STAT ";
/// Prefix of a line with the controller's SMART log as nvme-cli's JSON.
pub const SMART: &str = "APPS-SMART ";
/// Prefix of a line with the controller's OCP SMART / Health Information
/// Extended log (LID C0h): nvme-cli's JSON, or `raw:` and its 512 bytes in
/// hex.
pub const OCP: &str = "APPS-OCP ";
/// Prefix of a line of `db_bench`'s output.
pub const DB: &str = "APPS-DB ";

/// The OCP log's GUID as its bytes 496-511 hold it.
const OCP_GUID: [u8; 16] = [
    0xC5, 0xAF, 0x10, 0x28, 0xEA, 0xBF, 0xF2, 0xA4, 0x9C, 0x4F, 0x6F, 0x7C, 0xC9, 0x14, 0xD5, 0xAF,
];

/// The db_bench phases, in the order they run on each side.
pub const PHASES: [&str; 3] = ["fillrandom", "overwrite", "readwhilewriting"];

/// One stack the guest measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// Its name in the results (`f2fs-zns`, `ext4-conv`, `xfs-conv`).
    pub name: String,
    /// The filesystem.
    pub fs: &'static str,
    /// The subsystem its namespaces are in.
    pub nqn: String,
    /// The host's port of that subsystem's target.
    pub port: u16,
}

impl Side {
    /// Whether this is the zoned side (f2fs with a metadata namespace).
    pub fn zoned(&self) -> bool {
        self.fs == "f2fs"
    }
}

/// What the guest runs on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Keys db_bench writes (fillrandom) and overwrites.
    pub num: u64,
    /// Value size, bytes (keys are 16 bytes).
    pub value_size: u32,
    /// The filesystem's use the filler file and the database aim at
    /// before the overwrite, percent of its size (0: no filler).
    pub fill_percent: u32,
    /// Seconds of readwhilewriting (0: not run).
    pub rww_seconds: u32,
    /// Run overwrite after fillrandom.
    pub overwrite: bool,
    /// Write the conventional namespace whole before mkfs (a drive in
    /// use, not one fresh from the factory).
    pub precondition: bool,
    /// db_bench's seed.
    pub seed: u64,
    /// Run db_bench at all (its phases; MariaDB's may run alone).
    pub db_bench: bool,
    /// db_bench bound to the device: every write waits for its WAL
    /// record to be durable (`--sync=1`: an fsync per write) and reads
    /// bypass the page cache and the block cache, so that the device, not
    /// the guest's memory, paces them.
    pub device_bound: bool,
}

impl Workload {
    /// The phases this workload runs.
    pub fn phases(&self) -> Vec<&'static str> {
        if !self.db_bench {
            return Vec::new();
        }
        let mut p = vec![PHASES[0]];
        if self.overwrite {
            p.push(PHASES[1]);
        }
        if self.rww_seconds > 0 {
            p.push(PHASES[2]);
        }
        p
    }

    /// MiB of keys and values db_bench writes in one pass.
    pub fn db_mib(&self) -> u64 {
        (self.num * (16 + self.value_size as u64)).div_ceil(1 << 20)
    }
}

/// db_bench's options for a workload bound to the device: an fsync per
/// write, reads from the device (no page cache, a block cache of 0
/// bytes).
pub const DEVICE_BOUND: &str = " --sync=1 --use_direct_reads=true";

/// The db_bench options every phase shares: no compression, small
/// memtables and files (flushes and compactions within seconds), direct
/// I/O for flush and compaction (the device sees them, not the guest's
/// page cache), histograms for the tails.
pub fn db_bench_common(w: &Workload) -> String {
    format!(
        "db_bench --db=$MNT/db --wal_dir=$MNT/db --key_size=16 --value_size={} --num={} \
         --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 \
         --max_bytes_for_level_base=16777216 --max_background_jobs=2 --cache_size={} \
         --use_direct_io_for_flush_and_compaction=true --bytes_per_sync=1048576 \
         --histogram=1 --threads=1 --seed={}{}",
        w.value_size,
        w.num,
        if w.device_bound { 0 } else { 8 << 20 },
        w.seed,
        if w.device_bound { DEVICE_BOUND } else { "" }
    )
}

/// MariaDB's part of a run: its workload and the directory of the
/// server's data files in the guest.
#[derive(Debug, Clone, Copy)]
pub struct Mysql<'a> {
    /// sysbench's tables and workloads.
    pub sysbench: &'a Sysbench,
    /// The server's messages, character sets and bootstrap SQL.
    pub share: &'a Path,
}

/// The guest's `/init`: for each side, connect to its target, find its
/// namespaces by subsystem and namespace ID, (precondition,) mkfs, mount,
/// filler file, db_bench's phases and MariaDB's with the counters read
/// around each, umount, disconnect.
pub fn init_script(
    modules: &[String],
    sides: &[Side],
    w: &Workload,
    mysql: Option<Mysql>,
    mke2fs: &str,
    probe_host: Option<&HostProbe>,
    guest_clock: Option<f64>,
) -> String {
    let mut s = start_lines(
        "RocksDB's db_bench and MariaDB with sysbench on f2fs over a ZNS model and on \
         ext4/XFS over its conventional twin, counters around each phase, a result marker, \
         power off.",
        modules,
        false,
    );
    s.push_str(&format!("MKE2FS={mke2fs}\n"));
    s.push_str(&helpers());
    s.push_str(&clock_lines(guest_clock));
    if let Some(m) = mysql {
        s.push_str(&apps_mysql::helpers(m.share));
    }
    if let Some(host) = probe_host {
        s.push_str(&probe_lines(host));
    }
    for side in sides {
        s.push_str(&side_lines(side, w, mysql.map(|m| m.sysbench)));
    }
    s.push_str(&end_lines());
    s
}

/// The keep-alive timeout a guest on a dilated clock asks for, seconds.
/// Its kernel sends a Keep Alive every half of it by the guest's clock,
/// F times slower than the target's, which counts the timeout in real
/// time: no timeout the guest's keep-alives meet exists for F > 2, so the
/// guest asks for a day (a run's commands keep the controller alive).
pub const DILATED_KEEP_ALIVE_S: u32 = 86_400;

/// Prefix of the lines of the guest's clock check (on a dilated guest
/// clock): `start U0`, then `end U1` after a sleep, U its uptime in s.
pub const CLOCK: &str = "APPS-CLOCK ";

/// Real seconds the clock check's sleep aims at: long against the
/// console's delays, short against a run.
const CLOCK_CHECK_REAL_S: f64 = 4.0;

/// The guest's clock check sleeps at least this long by its own clock,
/// ten ticks of `/proc/uptime`.
const CLOCK_CHECK_MIN_GUEST_S: f64 = 0.1;

/// How far the measured slowdown of the guest's clock may be from the
/// factor asked for (a fraction of it) before the run fails.
pub const CLOCK_CHECK_TOLERANCE: f64 = 0.25;

/// The lines that set `$CONNECT_OPTS`, what every `nvme connect` of the
/// apps' guests adds: on a dilated guest clock
/// ([`crate::guest_clock`]), the keep-alive timeout of
/// [`DILATED_KEEP_ALIVE_S`], and the clock check (a sleep the host times
/// between two [`CLOCK`] lines); nothing otherwise.
pub fn clock_lines(guest_clock: Option<f64>) -> String {
    match guest_clock {
        Some(f) => format!(
            "say \"the guest's clock runs {f} times slower than the host's\"\n\
             CONNECT_OPTS=\"--keep-alive-tmo={DILATED_KEEP_ALIVE_S}\"\n\
             echo \"{CLOCK}start $(cut -d' ' -f1 /proc/uptime)\"\n\
             sleep {:.3}\n\
             echo \"{CLOCK}end $(cut -d' ' -f1 /proc/uptime)\"\n",
            (CLOCK_CHECK_REAL_S / f).max(CLOCK_CHECK_MIN_GUEST_S)
        ),
        None => "CONNECT_OPTS=\n".into(),
    }
}

/// The guest's clock as the host timed it: real seconds that passed
/// between the clock check's two lines, over the guest's.
#[derive(Debug, Default)]
pub struct ClockCheck {
    start: Option<(Instant, f64)>,
    /// Real seconds per second of the guest's clock, once measured.
    pub slowdown: Option<f64>,
}

impl ClockCheck {
    /// Takes the check's line `rest` (after [`CLOCK`]), seen at `at`.
    fn watch(&mut self, rest: &str, at: Instant) {
        let mut w = rest.split_whitespace();
        let (Some(what), Some(Ok(uptime))) = (w.next(), w.next().map(str::parse::<f64>)) else {
            return;
        };
        match (what, self.start) {
            ("start", _) => self.start = Some((at, uptime)),
            ("end", Some((t0, u0))) if uptime > u0 => {
                self.slowdown = Some(at.duration_since(t0).as_secs_f64() / (uptime - u0));
            }
            _ => {}
        }
    }

    /// The failure of a run whose guest's clock was to run `f` times
    /// slower, if it did not (within [`CLOCK_CHECK_TOLERANCE`]).
    pub fn failure(&self, f: f64) -> Option<String> {
        match self.slowdown {
            None => Some(format!(
                "no clock check from the guest: its clock's slowdown (to be {f}) was not measured"
            )),
            Some(s) if (s / f - 1.0).abs() > CLOCK_CHECK_TOLERANCE => Some(format!(
                "the guest's clock ran {s:.2} times slower than real time, not {f}: \
                 libfaketime did not slow QEMU's clocks as asked"
            )),
            Some(_) => None,
        }
    }
}

/// Prefix of the line with the guest's CPU-bound probe (`zns
/// characterize --probe`, set against the host's).
pub const PROBE: &str = "APPS-PROBE ";

/// The guest's lines that run the probe (the host's `zns`, packed as
/// `/usr/bin/zns`) against the host's probe times.
pub fn probe_lines(host: &HostProbe) -> String {
    let args = host.guest_args();
    format!(
        "say \"RUN probe: zns characterize --probe {args}\"\n\
         echo \"{PROBE}$(zns characterize --probe {args} 2>&1 | tr -d '\\n')\"\n"
    )
}

/// Shell helpers: namespaces and controllers by subsystem NQN, counters.
pub(crate) fn helpers() -> String {
    format!(
        r#"mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# The block device of namespace $2 of subsystem $1, and the controller.
disk_of() {{
    for d in /sys/block/nvme*n*; do
        if [ "$(cat $d/device/subsysnqn 2>/dev/null)" = "$1" ] && [ "$(cat $d/nsid 2>/dev/null)" = "$2" ]; then
            basename $d; return
        fi
    done
}}
ctrl_of() {{
    for c in /sys/class/nvme/nvme*; do
        if [ "$(cat $c/subsysnqn 2>/dev/null)" = "$1" ]; then basename $c; return; fi
    done
}}
apps_stat() {{ echo "{STAT}$SIDE $1 $2 $3"; }}
# The device's own counters at point $1, from controller $CTRL: the SMART
# log's data units written, the OCP extended SMART log's media bytes (the
# raw page where nvme-cli has no OCP plugin).
device_counters() {{
    echo "{SMART}$SIDE $1 $(nvme smart-log /dev/$CTRL -o json 2>&1 | tr -d '\n')"
    ocp=$(nvme ocp smart-add-log /dev/$CTRL -o json 2>&1 | tr -d '\n')
    case "$ocp" in
        *"Physical media units written"*) echo "{OCP}$SIDE $1 $ocp" ;;
        *) echo "{OCP}$SIDE $1 raw:$(nvme get-log /dev/$CTRL --log-id=0xc0 --log-len=512 -b 2>/dev/null | od -An -v -tx1 | tr -d ' \n') $ocp" ;;
    esac
}}
# Counters at point $1: sectors written to each namespace, the device's
# own, the filesystem's size and use, f2fs's GC.
counters() {{
    apps_stat $1 data_sectors $(awk '{{print $7}}' /sys/block/$D/stat)
    [ -n "$META" ] && apps_stat $1 meta_sectors $(awk '{{print $7}}' /sys/block/$META/stat)
    device_counters $1
    if grep -q " $MNT " /proc/mounts; then
        set -- $1 $(df -k $MNT | tail -n 1)
        apps_stat $1 fs_kib $3
        apps_stat $1 fs_used_kib $4
        apps_stat $1 fs_avail_kib $5
    fi
    if [ "$FS" = f2fs ]; then
        for f in /sys/fs/f2fs/$FSDEV/lifetime_write_kbytes /sys/fs/f2fs/$FSDEV/moved_blocks_foreground /sys/fs/f2fs/$FSDEV/moved_blocks_background /sys/fs/f2fs/$FSDEV/gc_foreground_calls /sys/fs/f2fs/$FSDEV/gc_background_calls /sys/fs/f2fs/$FSDEV/cp_foreground_calls /sys/fs/f2fs/$FSDEV/cp_background_calls; do
            [ -r $f ] && apps_stat $1 f2fs_$(basename $f) $(cat $f)
        done
        st=/sys/kernel/debug/f2fs/status
        if [ -r $st ]; then
            gc=$(sed -n 's/^GC calls: *\([0-9]*\).*/\1/p' $st | head -n 1)
            [ -n "$gc" ] && apps_stat $1 f2fs_debug_gc_calls $gc
            mv=$(sed -n 's/^Try to move *\([0-9]*\) blocks.*/\1/p' $st | head -n 1)
            [ -n "$mv" ] && apps_stat $1 f2fs_debug_gc_moved_blocks $mv
        fi
    fi
    if [ "$FS" = ext4 ] && [ -r /sys/fs/ext4/$D/lifetime_write_kbytes ]; then
        apps_stat $1 ext4_lifetime_write_kbytes $(cat /sys/fs/ext4/$D/lifetime_write_kbytes)
    fi
}}
# db_bench phase $1 with options $2..., its output on the console.
phase() {{
    p=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches
    counters before-$p
    say "RUN db_bench-$SIDE-$p: $*"
    t0=$(now)
    "$@" > /tmp/db.out 2>&1 < /dev/null
    rc=$?
    sed "s/^/{DB}$SIDE $p /" /tmp/db.out
    sync
    say "END db_bench-$SIDE-$p rc=$rc ($(( $(now) - t0 )) s)"
    if [ $rc -ne 0 ]; then fail=1; say "FAILED db_bench-$SIDE-$p"; fi
    counters after-$p
}}
"#
    )
}

/// The lines of one side.
fn side_lines(side: &Side, w: &Workload, sysbench: Option<&Sysbench>) -> String {
    let common = db_bench_common(w);
    let name = &side.name;
    let nqn = &side.nqn;
    let port = side.port;
    let fs = side.fs;
    let mut s = format!(
        r#"# ---- {name}: {fs} ----
SIDE={name}; FS={fs}; MNT=/mnt/{name}; META=; FSDEV=
run connect-{name} nvme connect -t tcp -a 10.0.2.2 -s {port} -n {nqn} $CONNECT_OPTS
i=0
while [ $i -lt 100 ] && {{ [ -z "$(disk_of {nqn} 1)" ] || [ "$(cat /sys/block/$(disk_of {nqn} 1)/size 2>/dev/null)" = 0 ]; }}; do sleep 0.1; i=$((i + 1)); done
D=$(disk_of {nqn} 1); CTRL=$(ctrl_of {nqn})
say "{name}: data namespace $D ($(cat /sys/block/$D/queue/zoned 2>/dev/null), $(cat /sys/block/$D/size 2>/dev/null) sectors) on $CTRL"
mkdir -p $MNT
"#
    );
    if side.zoned() {
        s.push_str(&format!(
            r#"i=0
while [ $i -lt 100 ] && [ -z "$(disk_of {nqn} 2)" ]; do sleep 0.1; i=$((i + 1)); done
META=$(disk_of {nqn} 2)
say "{name}: metadata namespace $META ($(cat /sys/block/$META/size 2>/dev/null) sectors)"
expect zoned-{name} host-managed cat /sys/block/$D/queue/zoned
echo mq-deadline > /sys/block/$D/queue/scheduler
counters mkfs
run mkfs-{name} mkfs.f2fs -q -f -m -c /dev/$D /dev/$META
run mount-{name} mount -t f2fs /dev/$META $MNT
FSDEV=$(ls /sys/fs/f2fs | grep -v '^features$' | head -n 1)
"#
        ));
    } else {
        let mkfs = match fs {
            "xfs" => "mkfs.xfs -f -q -K /dev/$D",
            _ => "$MKE2FS -t ext4 -F -q -E nodiscard /dev/$D",
        };
        if w.precondition {
            // Discarded whole first, each conventional side starts from the
            // same state, not from the garbage the side before left in the
            // FTL they share.
            s.push_str(&format!("run discard-{name} blkdiscard /dev/$D\n"));
            s.push_str(&format!(
                "run precondition-{name} dd if=/dev/zero of=/dev/$D bs=1M count=$(( $(cat /sys/block/$D/size) / 2048 )) conv=fsync\n"
            ));
        }
        s.push_str(&format!(
            r#"expect conventional-{name} none cat /sys/block/$D/queue/zoned
counters mkfs
run mkfs-{name} {mkfs}
run mount-{name} mount -t {fs} /dev/$D $MNT
"#
        ));
    }
    s.push_str("counters mounted\n");
    if w.fill_percent > 0 {
        let (pct, db) = (w.fill_percent, if w.db_bench { w.db_mib() } else { 0 });
        // The fill ratio is of the space free after mkfs (what df calls
        // available): f2fs on zones whose capacity is below their size
        // counts the gaps as used.
        s.push_str(&format!(
            r#"set -- $(df -k $MNT | tail -n 1)
filler=$(( $4 * {pct} / 100 / 1024 - {db} ))
[ $filler -lt 0 ] && filler=0
say "{name}: $(( $4 / 1024 )) MiB free after mkfs: a filler file of $filler MiB, then a database of {db} MiB"
# In fsynced 6 MiB steps: f2fs on Linux 6.12 writes a large dirty file
# back into every zone it spans at once, past the drive's active zones.
filler_write() {{
    n=0
    while [ $n -lt $1 ]; do
        c=$(( $1 - n )); [ $c -gt 6 ] && c=6
        dd if=/dev/zero of=$MNT/filler bs=1M count=$c seek=$n conv=notrunc,fsync 2>/dev/null || return 1
        n=$(( n + c ))
    done
}}
run filler-{name} filler_write $filler
counters filled
"#
        ));
    }
    for p in w.phases() {
        let extra = match p {
            "fillrandom" => "--benchmarks=fillrandom --use_existing_db=0".to_string(),
            "overwrite" => "--benchmarks=overwrite --use_existing_db=1".to_string(),
            _ => format!(
                "--benchmarks=readwhilewriting --use_existing_db=1 --duration={}",
                w.rww_seconds
            ),
        };
        s.push_str(&format!("phase {p} {common} {extra}\n"));
    }
    if let Some(sb) = sysbench {
        s.push_str(&apps_mysql::side_lines(name, sb, w.db_bench));
    }
    s.push_str(&format!(
        r#"run umount-{name} umount $MNT
counters end
run disconnect-{name} nvme disconnect -n {nqn}
"#
    ));
    s
}

/// What db_bench reported for one phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DbFigures {
    /// Operations per second.
    pub ops_per_sec: Option<f64>,
    /// MB/s as db_bench prints it (fillrandom, overwrite).
    pub mb_per_sec: Option<f64>,
    /// Microseconds per operation, average.
    pub micros_per_op: Option<f64>,
    /// Operations done.
    pub operations: Option<u64>,
    /// Latency percentiles of the phase's measured operation (writes, or
    /// reads for readwhilewriting), µs.
    pub p50_us: Option<f64>,
    /// 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub p999_us: Option<f64>,
}

/// Parses db_bench's output of `phase`: its result line (`fillrandom :
/// 6.6 micros/op 151466 ops/sec 0.4 seconds 65536 operations; 16.8
/// MB/s`) and the percentiles of the histogram of the operation the
/// phase measures (`Microseconds per write:` or `per read:`).
pub fn parse_db_bench(phase: &str, lines: &[String]) -> DbFigures {
    let mut f = DbFigures::default();
    let number = |s: &str| s.trim_end_matches([';', ',']).parse::<f64>().ok();
    for l in lines {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix(phase) {
            let Some(rest) = rest.trim_start().strip_prefix(':') else { continue };
            let words: Vec<&str> = rest.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                let prev = if i > 0 { number(words[i - 1]) } else { None };
                match *w {
                    "micros/op" => f.micros_per_op = prev,
                    "ops/sec" => f.ops_per_sec = prev,
                    "operations;" | "operations" => f.operations = prev.map(|v| v as u64),
                    "MB/s" => f.mb_per_sec = prev,
                    _ => {}
                }
            }
        }
    }
    let wanted = if phase == "readwhilewriting" || phase == "readrandom" {
        "Microseconds per read:"
    } else {
        "Microseconds per write:"
    };
    if let Some(at) = lines.iter().position(|l| l.trim() == wanted) {
        if let Some(p) = lines[at..].iter().find(|l| l.trim_start().starts_with("Percentiles:")) {
            let words: Vec<&str> = p.split_whitespace().collect();
            for pair in words.windows(2) {
                let v = number(pair[1]);
                match pair[0] {
                    "P50:" => f.p50_us = v,
                    "P99:" => f.p99_us = v,
                    "P99.9:" => f.p999_us = v,
                    _ => {}
                }
            }
        }
    }
    f
}

/// The console lines of a run, by side.
#[derive(Debug, Default)]
pub struct Collected {
    /// Counters: side -> point -> key -> value.
    pub stats: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
    /// db_bench's lines: (side, phase) -> lines.
    pub db: BTreeMap<(String, String), Vec<String>>,
    /// sysbench's lines: (side, phase) -> lines.
    pub sb: BTreeMap<(String, String), Vec<String>>,
    /// SMART lines without data units written, as printed.
    pub smart_errors: Vec<String>,
    /// OCP extended SMART lines without media bytes, as printed.
    pub ocp_errors: Vec<String>,
    /// The guest's probe (`zns characterize --probe`'s JSON), or what it
    /// printed instead.
    pub probe: Option<Result<serde_json::Value, String>>,
    /// The tenants' db_bench lines.
    pub tenants: crate::apps_tenants::TenantLines,
    /// The clock check of a guest on a dilated clock.
    pub clock: ClockCheck,
}

/// The media bytes written and read of an OCP SMART / Health Information
/// Extended log line's page: nvme-cli's JSON (`"Physical media units
/// written": {"hi": .., "lo": ..}`, bytes), or `raw:` and the page in hex,
/// whose GUID must be the page's. `None` when neither is there.
pub fn parse_ocp(page: &str) -> Option<(u64, u64)> {
    if let Some(hex) = page.strip_prefix("raw:") {
        let hex = hex.split_whitespace().next()?;
        if hex.len() != 1024 {
            return None;
        }
        let b: Vec<u8> = (0..512)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
            .collect::<Option<_>>()?;
        if b[496..] != OCP_GUID {
            return None;
        }
        let counter = |at: usize| -> Option<u64> {
            let v = u128::from_le_bytes(b[at..at + 16].try_into().ok()?);
            u64::try_from(v).ok()
        };
        return Some((counter(0)?, counter(16)?));
    }
    let v: serde_json::Value = serde_json::from_str(&page[page.find('{')?..]).ok()?;
    let counter = |name: &str| -> Option<u64> {
        let c = &v[name];
        let half = |k: &str| c[k].as_u64().or_else(|| c[k].as_str()?.parse().ok());
        // Counts past 64 bits do not fit the figures; a drive of this
        // size never reaches them.
        match (half("hi")?, half("lo")?) {
            (0, lo) => Some(lo),
            _ => None,
        }
    };
    Some((counter("Physical media units written")?, counter("Physical media units read")?))
}

impl Collected {
    /// Takes `line` if it is one of the run's.
    pub fn watch(&mut self, line: &str) {
        self.watch_at(line, Instant::now());
    }

    /// Takes `line`, seen at `at`, if it is one of the run's.
    pub fn watch_at(&mut self, line: &str, at: Instant) {
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(rest) = line.strip_prefix(CLOCK) {
            self.clock.watch(rest, at);
        } else if let Some(rest) = line.strip_prefix(PROBE) {
            let v = rest.find('{').and_then(|at| serde_json::from_str(&rest[at..]).ok());
            self.probe = Some(v.ok_or_else(|| rest.to_string()));
        } else if line.starts_with(crate::apps_tenants::TN) {
            self.tenants.watch(line);
        } else if let Some(rest) = line.strip_prefix(STAT) {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if let [side, point, key, value] = w[..] {
                if let Ok(v) = value.parse::<u64>() {
                    self.stats
                        .entry(side.into())
                        .or_default()
                        .entry(point.into())
                        .or_default()
                        .insert(key.into(), v);
                }
            }
        } else if let Some(rest) = line.strip_prefix(SMART) {
            let mut it = rest.splitn(3, ' ');
            if let (Some(side), Some(point), Some(json)) = (it.next(), it.next(), it.next()) {
                let duw = json
                    .find('{')
                    .and_then(|at| serde_json::from_str::<serde_json::Value>(&json[at..]).ok())
                    .and_then(|v| {
                        // nvme-cli prints the 128-bit counters as strings.
                        let d = &v["data_units_written"];
                        d.as_u64().or_else(|| d.as_str().and_then(|s| s.parse().ok()))
                    });
                match duw {
                    Some(v) => {
                        self.stats
                            .entry(side.into())
                            .or_default()
                            .entry(point.into())
                            .or_default()
                            .insert("smart_data_units_written".into(), v);
                    }
                    None => self.smart_errors.push(format!("{side} {point}: {json}")),
                }
            }
        } else if let Some(rest) = line.strip_prefix(OCP) {
            let mut it = rest.splitn(3, ' ');
            if let (Some(side), Some(point), Some(page)) = (it.next(), it.next(), it.next()) {
                match parse_ocp(page) {
                    Some((written, read)) => {
                        let at = self
                            .stats
                            .entry(side.into())
                            .or_default()
                            .entry(point.into())
                            .or_default();
                        at.insert("media_bytes_written".into(), written);
                        at.insert("media_bytes_read".into(), read);
                    }
                    None => self.ocp_errors.push(format!("{side} {point}: {page}")),
                }
            }
        } else if let Some((rest, to)) = line
            .strip_prefix(DB)
            .map(|r| (r, &mut self.db))
            .or_else(|| line.strip_prefix(apps_mysql::SB).map(|r| (r, &mut self.sb)))
        {
            let mut it = rest.splitn(3, ' ');
            if let (Some(side), Some(phase)) = (it.next(), it.next()) {
                let text = it.next().unwrap_or("").to_string();
                to.entry((side.into(), phase.into())).or_default().push(text);
            }
        }
    }

    /// Counter `key` of `side` at `point`.
    pub fn stat(&self, side: &str, point: &str, key: &str) -> Option<u64> {
        self.stats.get(side)?.get(point)?.get(key).copied()
    }

    /// `key` at `to` less `key` at `from`.
    pub fn delta(&self, side: &str, from: &str, to: &str, key: &str) -> Option<u64> {
        Some(self.stat(side, to, key)?.saturating_sub(self.stat(side, from, key)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            num: 1000,
            value_size: 1000,
            fill_percent: 80,
            rww_seconds: 5,
            overwrite: true,
            precondition: true,
            seed: 7,
            db_bench: true,
            device_bound: false,
        }
    }

    #[test]
    fn the_script_runs_each_side_with_counters_around_each_phase() {
        let sides = [
            Side { name: "f2fs-zns".into(), fs: "f2fs", nqn: "nqn.z".into(), port: 4420 },
            Side { name: "ext4-conv".into(), fs: "ext4", nqn: "nqn.c".into(), port: 4421 },
        ];
        let sb = Sysbench {
            tables: 1,
            table_size: 100,
            seconds: 2,
            events: None,
            threads: 1,
            buffer_pool_mib: 8,
            workloads: vec!["oltp_write_only"],
            seed: 3,
            clean_start: false,
        };
        let mysql = Mysql { sysbench: &sb, share: Path::new("/usr/share/mysql") };
        let s = init_script(
            &["f2fs.ko".into()],
            &sides,
            &workload(),
            Some(mysql),
            "/sbin/mke2fs",
            Some(&HostProbe { ns: 9, kernel_ns: Some(4) }),
            None,
        );
        assert!(s.starts_with("#!/bin/sh\n") && s.trim_end().ends_with("poweroff -f"));
        let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle} not in {s}"));
        assert!(at("-s 4420 -n nqn.z") < at("mkfs.f2fs -q -f -m -c /dev/$D /dev/$META"));
        assert!(at("mkfs.f2fs") < at("phase fillrandom db_bench"));
        assert!(
            at("phase fillrandom") < at("phase overwrite")
                && at("phase overwrite") < at("phase readwhilewriting")
        );
        assert!(at("nvme disconnect -n nqn.z") < at("-s 4421 -n nqn.c"));
        // MariaDB after db_bench, on the same filesystem, before umount.
        assert!(at("mysql_sql() {") < at("# ---- f2fs-zns"));
        assert!(at("phase readwhilewriting") < at("mysql_init $MNT/mysql"));
        assert!(at("sb_phase oltp_write_only") < at("run umount-f2fs-zns"));
        assert!(at("precondition-ext4-conv dd") < at("$MKE2FS -t ext4 -F -q -E nodiscard /dev/$D"));
        assert!(at("run discard-ext4-conv blkdiscard /dev/$D") < at("precondition-ext4-conv dd"));
        assert!(s.contains("--duration=5") && s.contains("--num=1000") && s.contains("--seed=7"));
        assert!(!s.contains("--sync=1"), "{s}");
        assert!(s.contains("nvme ocp smart-add-log /dev/$CTRL -o json"), "{s}");
        assert!(s.contains("--log-id=0xc0 --log-len=512 -b"), "{s}");
        assert!(
            at("zns characterize --probe --probe-reference 9 --probe-kernel-reference 4 2>&1")
                < at("# ---- f2fs-zns")
        );
        let smoke = Workload {
            fill_percent: 0,
            rww_seconds: 0,
            overwrite: false,
            precondition: false,
            ..workload()
        };
        assert_eq!(smoke.phases(), ["fillrandom"]);
        let s = init_script(&[], &sides, &smoke, None, "/sbin/mke2fs", None, None);
        assert!(
            !s.contains("phase overwrite") && !s.contains("filler") && !s.contains("precondition-")
        );
        assert!(!s.contains("blkdiscard"));
        assert!(!s.contains("mysql_init") && !s.contains("sb_phase"));
        let synced = init_script(
            &[],
            &sides,
            &Workload { device_bound: true, ..smoke },
            None,
            "m",
            None,
            None,
        );
        assert!(synced.contains(DEVICE_BOUND) && synced.contains("--cache_size=0 "), "{synced}");
        let alone = Workload { db_bench: false, ..workload() };
        assert!(alone.phases().is_empty());
        let s = init_script(&[], &sides, &alone, Some(mysql), "/sbin/mke2fs", None, None);
        assert!(!s.contains("phase fillrandom") && !s.contains("rm -rf $MNT/db"), "{s}");
        assert!(at("CONNECT_OPTS=\n") < at("-s 4420 -n nqn.z $CONNECT_OPTS\n"), "{s}");
        let dilated = init_script(&[], &sides, &alone, Some(mysql), "m", None, Some(512.0));
        let opts = dilated.find("CONNECT_OPTS=\"--keep-alive-tmo=86400\"\n").unwrap();
        assert!(opts < dilated.find("nvme connect").unwrap(), "{dilated}");
        assert!(s.contains("then a database of 0 MiB") && s.contains("sb_phase oltp_write_only"));
    }

    #[test]
    fn the_guest_clock_check_sleeps_and_is_timed_by_the_host() {
        let lines = clock_lines(Some(8.0));
        assert!(lines.contains("\nsleep 0.500\n"), "{lines}");
        assert!(clock_lines(Some(512.0)).contains("\nsleep 0.100\n"), "at least 0.1 s");
        assert!(!clock_lines(None).contains(CLOCK));
        let t0 = Instant::now();
        let mut c = Collected::default();
        assert!(c.clock.failure(8.0).unwrap().contains("no clock check"));
        c.watch_at(&format!("{CLOCK}start 12.50\r"), t0);
        c.watch_at(&format!("{CLOCK}end 13.00\r"), t0 + std::time::Duration::from_secs_f64(4.1));
        assert!((c.clock.slowdown.unwrap() - 8.2).abs() < 1e-9);
        assert_eq!(c.clock.failure(8.0), None);
        // A clock libfaketime left alone runs at the host's pace.
        let e = c.clock.failure(64.0).unwrap();
        assert!(e.contains("8.20 times slower than real time, not 64"), "{e}");
        let mut bad = ClockCheck::default();
        bad.watch("end 13.00", t0);
        bad.watch("start x", t0);
        assert!(bad.slowdown.is_none() && bad.start.is_none());
    }

    #[test]
    fn db_bench_figures_come_from_its_result_line_and_histogram() {
        let out = "Keys:       16 bytes each
fillrandom   :      12.500 micros/op 80000 ops/sec 0.819 seconds 65536 operations;   79.4 MB/s
Microseconds per write:
Count: 65536 Average: 12.1  StdDev: 80.00
Min: 1  Median: 4.1  Max: 9000
Percentiles: P50: 4.12 P75: 5.50 P99: 20.10 P99.9: 1200.00 P99.99: 4000.50
------------------------------------------------------";
        let lines: Vec<String> = out.lines().map(String::from).collect();
        let f = parse_db_bench("fillrandom", &lines);
        assert_eq!(f.ops_per_sec, Some(80000.0));
        assert_eq!(f.mb_per_sec, Some(79.4));
        assert_eq!(f.operations, Some(65536));
        assert_eq!((f.p50_us, f.p99_us, f.p999_us), (Some(4.12), Some(20.1), Some(1200.0)));
        let rww = "readwhilewriting :      50.0 micros/op 20000 ops/sec 5.0 seconds 100000 operations; (60000 of 100000 found)
Microseconds per read:
Count: 100000 Average: 49
Percentiles: P50: 30.00 P75: 40.00 P99: 300.00 P99.9: 900.00 P99.99: 2000.00";
        let lines: Vec<String> = rww.lines().map(String::from).collect();
        let f = parse_db_bench("readwhilewriting", &lines);
        assert_eq!((f.ops_per_sec, f.mb_per_sec, f.p999_us), (Some(20000.0), None, Some(900.0)));
        assert_eq!(parse_db_bench("overwrite", &lines), DbFigures::default());
    }

    #[test]
    fn the_raw_ocp_page_gives_its_counters_when_its_guid_is_the_pages() {
        let mut page = [0u8; 512];
        page[..16].copy_from_slice(&(3u128 << 20).to_le_bytes());
        page[16..32].copy_from_slice(&4096u128.to_le_bytes());
        page[496..].copy_from_slice(&OCP_GUID);
        let hex: String = page.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_ocp(&format!("raw:{hex} ocp: not a command")), Some((3 << 20, 4096)));
        page[500] ^= 1;
        let other: String = page.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_ocp(&format!("raw:{other}")), None, "another GUID");
        assert_eq!(parse_ocp(&format!("raw:{}", &hex[2..])), None, "a short page");
        let huge = r#"{"Physical media units written":{"hi":1,"lo":0},"Physical media units read":{"hi":0,"lo":0}}"#;
        assert_eq!(parse_ocp(huge), None, "past 64 bits");
        assert_eq!(parse_ocp("raw:"), None);
    }

    #[test]
    fn console_lines_are_collected_by_side() {
        let mut c = Collected::default();
        c.watch("APPS-STAT f2fs-zns before-fillrandom data_sectors 100\r");
        c.watch("APPS-STAT f2fs-zns after-fillrandom data_sectors 300");
        c.watch("APPS-DB f2fs-zns fillrandom fillrandom   :  1 micros/op");
        c.watch("vmtest: something else");
        c.watch("APPS-SB ext4-conv oltp_read_only     transactions:   10   (2.00 per sec.)");
        c.watch(
            r#"APPS-SMART f2fs-zns end {  "critical_warning":0,  "data_units_written":"42",  "x":1}"#,
        );
        c.watch("APPS-SMART f2fs-zns mkfs Usage: nvme smart-log");
        assert_eq!(c.stat("f2fs-zns", "end", "smart_data_units_written"), Some(42));
        assert_eq!(c.smart_errors.len(), 1);
        // nvme-cli's OCP plugin, numbers or strings, and a page it could
        // not read.
        c.watch(
            r#"APPS-OCP f2fs-zns end {  "Physical media units written":{    "hi":0,    "lo":4194304  },  "Physical media units read":{    "hi":"0",    "lo":"8192"  },  "Log page version":3}"#,
        );
        assert_eq!(c.stat("f2fs-zns", "end", "media_bytes_written"), Some(4 << 20));
        assert_eq!(c.stat("f2fs-zns", "end", "media_bytes_read"), Some(8192));
        c.watch("APPS-OCP ext4-conv end raw: NVMe status: Invalid Log Page");
        assert_eq!(c.ocp_errors.len(), 1, "{:?}", c.ocp_errors);
        assert_eq!(c.stat("ext4-conv", "end", "media_bytes_written"), None);
        assert_eq!(
            c.delta("f2fs-zns", "before-fillrandom", "after-fillrandom", "data_sectors"),
            Some(200)
        );
        assert_eq!(
            c.db[&("f2fs-zns".to_string(), "fillrandom".to_string())],
            ["fillrandom   :  1 micros/op"]
        );
        assert_eq!(c.stat("ext4-conv", "end", "data_sectors"), None);
        assert_eq!(
            c.sb[&("ext4-conv".to_string(), "oltp_read_only".to_string())],
            ["    transactions:   10   (2.00 per sec.)"]
        );
        assert!(!c.db.contains_key(&("ext4-conv".to_string(), "oltp_read_only".to_string())));
        c.watch(
            r#"APPS-PROBE {  "ns": 240000000,  "slowdown": 30.0,  "suggested_dilation": 30.0}"#,
        );
        assert_eq!(c.probe.as_ref().unwrap().as_ref().unwrap()["slowdown"], 30.0);
        c.watch("APPS-PROBE zns: not found");
        assert_eq!(c.probe, Some(Err("zns: not found".into())));
        c.watch("APPS-TN elastic fill a fillrandom : 1 micros/op");
        assert_eq!(c.tenants.lines.len(), 1);
    }
}
