//! MariaDB with sysbench in the guest of `cargo xtask apps`: the server's
//! configuration, the shell lines that initialise a data directory on the
//! side's filesystem, start `mariadbd`, load sysbench's tables and run its
//! OLTP workloads with the counters read around each, and the parsing of
//! sysbench's report.
//!
//! Each line sysbench prints in a phase reaches the host as `APPS-SB SIDE
//! PHASE LINE`; the counters use the db_bench phases' `APPS-STAT`,
//! `APPS-SMART` and `APPS-OCP` lines, at points `before-PHASE` and
//! `after-PHASE`.

use std::path::{Path, PathBuf};

/// Prefix of a line of sysbench's output.
pub const SB: &str = "APPS-SB ";

/// The phase that loads sysbench's tables.
pub const PREPARE: &str = "sysbench_prepare";

/// sysbench's OLTP workloads the task knows, in the order they run:
/// the three the studies run, then `oltp_update_non_index` (one UPDATE
/// per transaction: with a commit's fsync of the redo log the device, not
/// the SQL layer, sets the pace).
pub const WORKLOADS: [&str; 4] =
    ["oltp_read_only", "oltp_write_only", "oltp_read_write", "oltp_update_non_index"];

/// The workloads run when none are named: the studies' three.
pub const DEFAULT_WORKLOADS: [&str; 3] = ["oltp_read_only", "oltp_write_only", "oltp_read_write"];

/// The server's unix socket in the guest (on its tmpfs).
const SOCKET: &str = "/tmp/mariadbd.sock";

/// The configuration file the task writes into the guest.
pub const CONFIG: &str = "/etc/mysql/apps.cnf";

/// The SQL files of the server's package that create its system tables
/// (what `mariadb-install-db` feeds `mariadbd --bootstrap`, less the help
/// tables, the GIS procedures and the sys schema, which sysbench does not
/// use).
pub const BOOTSTRAP_SQL: [&str; 3] =
    ["mysql_system_tables.sql", "mysql_performance_tables.sql", "mysql_system_tables_data.sql"];

/// What the guest runs with MariaDB on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct Sysbench {
    /// sysbench's tables (`--tables`).
    pub tables: u32,
    /// Rows of each (`--table-size`).
    pub table_size: u32,
    /// Seconds of each workload (`--time`).
    pub seconds: u32,
    /// Transactions of each workload instead (`--events`, no time
    /// limit): a guest on a dilated clock counts its seconds F times
    /// slower, so a count bounds the run's real time where seconds would
    /// stretch it F times.
    pub events: Option<u32>,
    /// Client threads (`--threads`).
    pub threads: u32,
    /// InnoDB's buffer pool, MiB: below the tables' size, so that reads
    /// and page flushes reach the device.
    pub buffer_pool_mib: u32,
    /// The workloads run, in [`WORKLOADS`]' order.
    pub workloads: Vec<&'static str>,
    /// sysbench's `--rand-seed`.
    pub seed: u64,
    /// Restart the server before each workload: its clean shutdown writes
    /// every dirty page, so that no workload pays for the writes of the
    /// one before (or of the load) in the background, at a pace the
    /// guest's clock, not the device, sets.
    pub clean_start: bool,
}

impl Sysbench {
    /// The phases: the load, then each workload.
    pub fn phases(&self) -> Vec<&'static str> {
        let mut p = vec![PREPARE];
        p.extend(WORKLOADS.iter().filter(|w| self.workloads.contains(w)));
        p
    }

    /// The options every sysbench command shares.
    pub fn common(&self) -> String {
        format!(
            "--db-driver=mysql --mysql-socket={SOCKET} --mysql-user=root --mysql-db=sbtest \
             --tables={} --table-size={} --threads={} --rand-seed={}",
            self.tables,
            self.table_size,
            self.threads,
            self.seed.max(1)
        )
    }

    /// The options of a workload's run: bounded by time (or by
    /// transactions, [`Sysbench::events`]), the 95th percentile in the
    /// report and the latency histogram after it (the 99th percentile is
    /// read from that).
    pub fn run_options(&self) -> String {
        let (time, events) = match self.events {
            Some(n) => (0, n),
            None => (self.seconds, 0),
        };
        format!(
            "--time={time} --events={events} --percentile=95 --histogram=on --report-interval=0"
        )
    }
}

/// Parses `--sb-workloads`: a comma-separated subset of [`WORKLOADS`]
/// (with or without the `oltp_` prefix).
pub fn parse_workloads(list: &str) -> Result<Vec<&'static str>, String> {
    let mut out = Vec::new();
    for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let found = WORKLOADS
            .iter()
            .find(|k| **k == w || k.strip_prefix("oltp_") == Some(w))
            .ok_or_else(|| format!("{w:?} is not one of {}", WORKLOADS.join(", ")))?;
        if !out.contains(found) {
            out.push(*found);
        }
    }
    if out.is_empty() {
        return Err("no workload".into());
    }
    out.sort_by_key(|w| WORKLOADS.iter().position(|k| k == w));
    Ok(out)
}

/// The directory with the server's error messages (`english/errmsg.sys`),
/// character sets and bootstrap SQL: `/usr/share/mariadb` or, in Debian's
/// packages, `/usr/share/mysql`.
pub fn share_dir() -> Option<PathBuf> {
    ["/usr/share/mariadb", "/usr/share/mysql"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("english/errmsg.sys").is_file() && d.join(BOOTSTRAP_SQL[0]).is_file())
}

/// The data files the guest needs besides the programs: the server's
/// English messages, character sets and bootstrap SQL, sysbench's Lua
/// scripts.
pub fn data_files(share: &Path, sysbench_lua: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = vec![share.join("english/errmsg.sys")];
    files.extend(BOOTSTRAP_SQL.iter().map(|f| share.join(f)));
    let mut listed = |dir: &Path, ext: &str| -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_file() && p.extension().is_some_and(|x| x == ext) {
                files.push(p);
            }
        }
        Ok(())
    };
    listed(&share.join("charsets"), "xml")?;
    listed(sysbench_lua, "lua")?;
    files.sort();
    Ok(files)
}

/// The server's configuration: root in the guest, the unix socket only,
/// small buffers, every commit flushed, direct I/O for the data files.
pub fn config(share: &Path, sb: &Sysbench) -> String {
    let share = share.display();
    format!(
        "# Written by cargo xtask apps for its guest.
[mariadbd]
user=root
socket={SOCKET}
pid-file=/tmp/mariadbd.pid
skip-networking
skip-name-resolve
tmpdir=/tmp
lc-messages-dir={share}
character-sets-dir={share}/charsets
performance_schema=OFF
max_connections=64
key_buffer_size=1M
innodb_buffer_pool_size={}M
innodb_log_file_size=32M
innodb_log_buffer_size=4M
innodb_flush_method=O_DIRECT
innodb_flush_log_at_trx_commit=1
innodb_doublewrite=ON
",
        sb.buffer_pool_mib
    )
}

/// The guest's users and groups: `mariadbd --user=root` looks root up.
pub fn passwd() -> (&'static str, &'static str) {
    ("root:x:0:0:root:/root:/bin/sh\n", "root:x:0:\n")
}

/// Shell helpers (once, after the db_bench ones whose `counters` they
/// use): the bootstrap, the server's start and clean stop, a sysbench
/// phase with its output on the console.
pub fn helpers(share: &Path) -> String {
    let share = share.display();
    let sql: Vec<String> = BOOTSTRAP_SQL.iter().map(|f| format!("{share}/{f}")).collect();
    let sql = sql.join(" ");
    format!(
        r#"# MariaDB: the system tables as mariadb-install-db makes them (root
# without a password), and sysbench's database.
mysql_sql() {{
    echo "create database if not exists mysql;"
    echo "use mysql;"
    echo "SET @auth_root_socket=NULL;"
    cat {sql}
    echo "CREATE DATABASE sbtest;"
}}
mysql_init() {{
    mkdir -p $1 || return 1
    mysql_sql | mariadbd --defaults-file={CONFIG} --datadir=$1 --bootstrap --log-warnings=0 > /tmp/mariadbd-init.log 2>&1
    mrc=$?
    [ $mrc -ne 0 ] && sed 's/^/mariadbd: /' /tmp/mariadbd-init.log | tail -n 30
    return $mrc
}}
# Starts the server on datadir $1 and waits for it to take connections.
mysql_start() {{
    rm -f {SOCKET}
    mariadbd --defaults-file={CONFIG} --datadir=$1 > /tmp/mariadbd.log 2>&1 < /dev/null &
    MARIADBD=$!
    i=0
    while [ $i -lt 3000 ]; do
        grep -q "ready for connections" /tmp/mariadbd.log && [ -S {SOCKET} ] && return 0
        kill -0 $MARIADBD 2>/dev/null || break
        sleep 0.2; i=$((i + 1))
    done
    sed 's/^/mariadbd: /' /tmp/mariadbd.log | tail -n 30
    return 1
}}
# A clean shutdown: SIGTERM, its exit status, and its log saying so.
mysql_stop() {{
    kill -TERM $MARIADBD || return 1
    wait $MARIADBD
    mrc=$?
    grep -q "Shutdown complete" /tmp/mariadbd.log || mrc=1
    [ $mrc -ne 0 ] && sed 's/^/mariadbd: /' /tmp/mariadbd.log | tail -n 30
    return $mrc
}}
# sysbench phase $1 with arguments $2..., its output on the console.
sb_phase() {{
    p=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches
    counters before-$p
    say "RUN sysbench-$SIDE-$p: sysbench $*"
    t0=$(now)
    sysbench "$@" > /tmp/sb.out 2>&1 < /dev/null
    sbrc=$?
    sed "s/^/{SB}$SIDE $p /" /tmp/sb.out
    sync
    apps_stat after-$p elapsed_s $(( $(now) - t0 ))
    apps_stat after-$p datadir_kib $(du -sk $MNT/mysql | cut -f1)
    say "END sysbench-$SIDE-$p rc=$sbrc ($(( $(now) - t0 )) s)"
    if [ $sbrc -ne 0 ]; then fail=1; say "FAILED sysbench-$SIDE-$p"; fi
    counters after-$p
}}
"#
    )
}

/// The lines of one side, on its mounted filesystem (`$MNT`): the RocksDB
/// database removed when `after_db_bench` (the filler stays), a data
/// directory, the server, sysbench's load and workloads, a clean stop.
pub fn side_lines(name: &str, sb: &Sysbench, after_db_bench: bool) -> String {
    let common = sb.common();
    let run = sb.run_options();
    let mut s = format!("# MariaDB and sysbench on {name}\n");
    if after_db_bench {
        s.push_str(&format!("run rm-rocksdb-{name} rm -rf $MNT/db\n"));
    }
    s.push_str(&format!(
        r#"run mysql-init-{name} mysql_init $MNT/mysql
run mysql-start-{name} mysql_start $MNT/mysql
if [ -n "$MARIADBD" ] && kill -0 $MARIADBD 2>/dev/null; then
sb_phase {PREPARE} oltp_read_write {common} prepare
"#
    ));
    for w in &sb.workloads {
        if sb.clean_start {
            s.push_str(&format!(
                "run mysql-stop-{name}-{w} mysql_stop\n\
                 run mysql-start-{name}-{w} mysql_start $MNT/mysql\n"
            ));
        }
        s.push_str(&format!("sb_phase {w} {w} {common} {run} run\n"));
    }
    s.push_str(&format!("run mysql-stop-{name} mysql_stop\nfi\nMARIADBD=\n"));
    s
}

/// What sysbench reported for one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SbFigures {
    /// Transactions per second.
    pub tps: Option<f64>,
    /// Queries per second.
    pub qps: Option<f64>,
    /// Transactions done.
    pub transactions: Option<u64>,
    /// Errors sysbench ignored (deadlocks retried).
    pub ignored_errors: Option<u64>,
    /// Average latency of a transaction, ms.
    pub avg_ms: Option<f64>,
    /// Its 95th percentile, ms, as sysbench reports it.
    pub p95_ms: Option<f64>,
    /// Its 99th percentile, ms, from the histogram.
    pub p99_ms: Option<f64>,
    /// The longest, ms.
    pub max_ms: Option<f64>,
    /// The run's length, s.
    pub seconds: Option<f64>,
}

/// The first number of `s` (`2543   (508.31 per sec.)` gives 2543).
fn first_number(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.trim_end_matches('s').parse().ok()
}

/// The number in the parentheses of `s` (`2543 (508.31 per sec.)` gives
/// 508.31).
fn per_sec(s: &str) -> Option<f64> {
    let inside = &s[s.find('(')? + 1..];
    inside.split_whitespace().next()?.parse().ok()
}

/// The latency at `pct` percent of sysbench's histogram (`value |***
/// count` lines): the first bucket where the running count reaches
/// `pct` % of the total, as sysbench computes its own percentile.
pub fn histogram_percentile(lines: &[String], pct: f64) -> Option<f64> {
    let start = lines.iter().position(|l| l.trim_start().starts_with("Latency histogram"))?;
    let mut buckets = Vec::new();
    for l in &lines[start + 1..] {
        let Some((value, rest)) = l.split_once('|') else {
            if buckets.is_empty() {
                continue;
            }
            break;
        };
        let (Ok(v), Some(Ok(c))) =
            (value.trim().parse::<f64>(), rest.split_whitespace().last().map(str::parse::<u64>))
        else {
            continue;
        };
        buckets.push((v, c));
    }
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    let want = (total as f64 * pct / 100.0).ceil() as u64;
    let mut seen = 0;
    buckets.into_iter().find_map(|(v, c)| {
        seen += c;
        (seen >= want).then_some(v)
    })
}

/// Parses sysbench's report of a run (`transactions: 2543 (508.31 per
/// sec.)`, `95th percentile: 7.98`, the histogram).
pub fn parse_sysbench(lines: &[String]) -> SbFigures {
    let mut f = SbFigures::default();
    for l in lines {
        let Some((key, value)) = l.trim().split_once(':') else { continue };
        match key.trim() {
            "transactions" => {
                f.transactions = first_number(value).map(|v| v as u64);
                f.tps = per_sec(value);
            }
            "queries" => f.qps = per_sec(value),
            "ignored errors" => f.ignored_errors = first_number(value).map(|v| v as u64),
            "avg" => f.avg_ms = first_number(value),
            "max" => f.max_ms = first_number(value),
            "95th percentile" => f.p95_ms = first_number(value),
            "total time" => f.seconds = first_number(value),
            _ => {}
        }
    }
    f.p99_ms = histogram_percentile(lines, 99.0);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> Sysbench {
        Sysbench {
            tables: 2,
            table_size: 5000,
            seconds: 7,
            events: None,
            threads: 3,
            buffer_pool_mib: 16,
            workloads: vec!["oltp_read_only", "oltp_read_write"],
            seed: 11,
            clean_start: false,
        }
    }

    #[test]
    fn workloads_parse_in_their_order_with_or_without_the_prefix() {
        assert_eq!(
            parse_workloads("read_write, oltp_read_only,read_only").unwrap(),
            ["oltp_read_only", "oltp_read_write"]
        );
        assert!(parse_workloads("oltp_insert").unwrap_err().contains("oltp_insert"));
        assert_eq!(
            parse_workloads("update_non_index,write_only").unwrap(),
            ["oltp_write_only", "oltp_update_non_index"]
        );
        assert!(parse_workloads(" , ").is_err());
        assert_eq!(sb().phases(), [PREPARE, "oltp_read_only", "oltp_read_write"]);
    }

    #[test]
    fn the_side_loads_runs_each_workload_and_stops_the_server() {
        let s = side_lines("ext4-conv", &sb(), true);
        let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle} not in {s}"));
        assert!(at("rm -rf $MNT/db") < at("mysql_init $MNT/mysql"));
        assert!(at("mysql_init") < at("mysql_start $MNT/mysql"));
        assert!(at("mysql_start") < at("sb_phase sysbench_prepare oltp_read_write"));
        assert!(at(" prepare\n") < at("sb_phase oltp_read_only oltp_read_only"));
        assert!(at("sb_phase oltp_read_only") < at("sb_phase oltp_read_write oltp_read_write"));
        assert!(at("sb_phase oltp_read_write") < at("mysql_stop"));
        assert!(!s.contains("oltp_write_only"));
        assert!(s.contains("--tables=2 --table-size=5000 --threads=3 --rand-seed=11"), "{s}");
        assert!(s.contains("--time=7 --events=0 --percentile=95 --histogram=on"), "{s}");
        let counted = Sysbench { events: Some(300), ..sb() };
        let c = side_lines("ext4-conv", &counted, true);
        assert!(c.contains("--time=0 --events=300 --percentile=95"), "{c}");
        assert!(!side_lines("x", &sb(), false).contains("rm -rf"));
        assert!(!s.contains("mysql-stop-ext4-conv-"), "{s}");
        let clean = side_lines("ext4-conv", &Sysbench { clean_start: true, ..sb() }, true);
        let at = |needle: &str| clean.find(needle).unwrap_or_else(|| panic!("{needle} in {clean}"));
        assert!(at(" prepare\n") < at("run mysql-stop-ext4-conv-oltp_read_only mysql_stop\n"));
        assert!(
            at("run mysql-stop-ext4-conv-oltp_read_only")
                < at("run mysql-start-ext4-conv-oltp_read_only mysql_start $MNT/mysql\n")
        );
        assert!(
            at("run mysql-start-ext4-conv-oltp_read_only") < at("sb_phase oltp_read_only oltp_")
        );
        assert!(at("sb_phase oltp_read_only") < at("run mysql-stop-ext4-conv-oltp_read_write"));
        let share = Path::new("/usr/share/mysql");
        let h = helpers(share);
        assert!(h.contains("cat /usr/share/mysql/mysql_system_tables.sql "), "{h}");
        assert!(h.contains("--bootstrap") && h.contains("kill -TERM $MARIADBD"), "{h}");
        let c = config(share, &sb());
        assert!(c.contains("innodb_buffer_pool_size=16M\n"), "{c}");
        assert!(c.contains("innodb_flush_method=O_DIRECT\ninnodb_flush_log_at_trx_commit=1\n"));
        assert!(c.contains("character-sets-dir=/usr/share/mysql/charsets\n"), "{c}");
    }

    const RUN: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Threads started!

Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.490 |                                         4
       0.499 |*****************                        86
       1.163 |****************                         5
       7.980 |*                                        4
      97.230 |                                         1

SQL statistics:
    queries performed:
        read:                            35602
        write:                           10172
        other:                           5086
        total:                           50860
    transactions:                        100   (508.31 per sec.)
    queries:                             50860  (10166.24 per sec.)
    ignored errors:                      2      (0.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          5.0023s
    total number of events:              2543

Latency (ms):
         min:                                    0.77
         avg:                                    1.96
         max:                                   97.23
         95th percentile:                        1.16
         sum:                                 4996.45
";

    #[test]
    fn sysbench_figures_come_from_its_report_and_histogram() {
        let lines: Vec<String> = RUN.lines().map(String::from).collect();
        let f = parse_sysbench(&lines);
        assert_eq!((f.tps, f.qps), (Some(508.31), Some(10166.24)));
        assert_eq!((f.transactions, f.ignored_errors), (Some(100), Some(2)));
        assert_eq!((f.avg_ms, f.max_ms, f.p95_ms), (Some(1.96), Some(97.23), Some(1.16)));
        assert_eq!(f.seconds, Some(5.0023));
        // 100 transactions: the 99th is in the bucket of 7.980 ms, the
        // 95th (95 of them) in that of 1.163 ms, as sysbench reports.
        assert_eq!(f.p99_ms, Some(7.98));
        assert_eq!(histogram_percentile(&lines, 95.0), Some(1.163));
        assert_eq!(histogram_percentile(&lines, 100.0), Some(97.23));
        let failed: Vec<String> =
            ["FATAL: unable to connect to MySQL server"].map(String::from).to_vec();
        assert_eq!(parse_sysbench(&failed), SbFigures::default());
    }
}
