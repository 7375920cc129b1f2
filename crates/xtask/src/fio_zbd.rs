//! fio's own zoned block device tests, `t/zbd/test-zbd-support` with the
//! `t/zbd/functions` it sources, run unmodified in the guest against a
//! namespace of `zns serve`.
//!
//! It runs on a device of its own, [`PROFILE`]: small zones keep the
//! tests that fill zones quick under software emulation.
//!
//! The script comes from Debian's source package of the fio the guest
//! runs (the host's installed `fio`, same source version), fetched at test
//! time ([`crate::source`]). Nothing of it is kept in the repository.
//!
//! The script calls fio as `$(dirname "$0")/../../fio`: in the guest it
//! sits in `/fio/t/zbd/` and `/fio/fio` links to Debian's `/usr/bin/fio`.
//! Each test's log ends with its status (`PASS`, `FAIL`, `SKIP` after the
//! reason); the guest prints one `ZBD-RESULT` line per log, and the task
//! checks them against [`EXPECTED_FAILURES`] and [`EXPECTED_SKIPS`] both
//! ways: a failure or skip not listed fails the task, and so does a
//! listed one that no longer happens.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::vmtest::GuestEntry;
use crate::{run_checked, Error, Result};

/// Where the script and its functions live in the guest (fio is
/// `../../fio` from there).
pub const GUEST_DIR: &str = "/fio/t/zbd";

/// The guest's line for one test: `ZBD-RESULT NN STATUS [reason]`.
pub const RESULT: &str = "ZBD-RESULT ";

/// The guest's line with a test's duration: `ZBD-TIME NN SECONDS`.
pub const TIME: &str = "ZBD-TIME ";

/// Tests that fail against znskit's target, each with the reason (the
/// kernel's or the script's; never a znskit bug, those are fixed).
pub const EXPECTED_FAILURES: &[(u32, &str)] = &[(
    54,
    "fio 3.33 runs it with --experimental_verify=1, which does not work with \
     --zonemode=zbd: the verify replay (zbd_replay_write_order) cannot restore \
     the zones it wrote, and trips its own assertion (or, on other zone \
     geometries, writes a zone it has already filled: Zone Is Full); fio 3.34 \
     refuses the combination and drops the option from the test",
)];

/// Tests the script skips on an NVMe ZNS namespace, with its reason: they
/// need a SCSI device, a regular (not zoned) block device, or conventional
/// zones, which a ZNS namespace does not have.
pub const EXPECTED_SKIPS: &[(u32, &str)] = &[
    (9, "sg engine: not a SCSI device"),
    (10, "sg engine: not a SCSI device"),
    (14, "conventional zones: a ZNS namespace has none"),
    (42, "regular block devices only"),
    (43, "regular block devices only"),
    (49, "regular block devices only"),
    (50, "conventional zones: a ZNS namespace has none"),
    (51, "conventional zones: a ZNS namespace has none"),
    (52, "conventional zones: a ZNS namespace has none"),
    (53, "conventional zones: a ZNS namespace has none"),
    (56, "regular block devices only"),
];

/// The script, unpacked and cached.
#[derive(Debug, Clone)]
pub struct Script {
    /// Holds `test-zbd-support` and `functions`.
    pub dir: PathBuf,
    /// `fio 3.33-3`: the source package it came from.
    pub source: String,
    /// The numbers of the tests it defines, in order.
    pub tests: Vec<u32>,
}

/// The numbers of the tests a `test-zbd-support` text defines
/// (`testNN() {` at the start of a line).
pub fn test_numbers(script: &str) -> Vec<u32> {
    let mut n: Vec<u32> = script
        .lines()
        .filter_map(|l| l.strip_prefix("test")?.split_once("()")?.0.parse().ok())
        .collect();
    n.sort_unstable();
    n.dedup();
    n
}

/// Test numbers and ranges, comma separated (`1-29,33,40-58`), in order
/// without repeats; `None` for anything else.
pub fn parse_selection(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (a, b): (u32, u32) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let n = part.parse().ok()?;
                (n, n)
            }
        };
        if a > b {
            return None;
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Finds (or fetches and unpacks) the script of the installed fio's
/// source package under `cache`.
pub fn prepare(cache: &Path, install: bool) -> Result<Script> {
    let (package, version) = crate::source::installed("fio")?;
    let source = format!("{package} {version}");
    // An epoch's colon does not belong in a file name.
    let dir = cache.join("fio-source").join(version.replace(':', "_")).join("t/zbd");
    if !dir.join("test-zbd-support").is_file() || !dir.join("functions").is_file() {
        let files = ["t/zbd/test-zbd-support", "t/zbd/functions"];
        crate::source::fetch(cache, &package, &version, &files, &dir, install)?;
    }
    let text = fs::read_to_string(dir.join("test-zbd-support"))
        .map_err(|e| Error::io(&dir.join("test-zbd-support"), e))?;
    let tests = test_numbers(&text);
    if tests.is_empty() {
        return Err(Error::new(format!("{}: no testNN() functions", dir.display())));
    }
    Ok(Script { dir, source, tests })
}

/// The script's files and fio's link, placed where the script looks.
pub fn guest_entries(script: &Script) -> Result<Vec<GuestEntry>> {
    let mut out = Vec::new();
    for f in ["test-zbd-support", "functions"] {
        let p = script.dir.join(f);
        let bytes = fs::read(&p).map_err(|e| Error::io(&p, e))?;
        out.push(GuestEntry::File { path: format!("{GUEST_DIR}/{f}"), mode: 0o755, bytes });
    }
    out.push(GuestEntry::Symlink { path: "/fio/fio".into(), target: "/usr/bin/fio".into() });
    Ok(out)
}

/// The emulated device the tests run on (`zns emu create --profile`):
/// small zones, so the tests that fill zones move little data under
/// software emulation (1 MiB zones with a capacity of 768 KiB, which the
/// script handles as ZNS drives have it), and 144 of them, so the tests
/// that need up to 130 sequential zones run; 14 open and active, as
/// `emu:small`. No timing model: commands complete as they run.
pub const PROFILE: &str = r#"name = "fio-zbd"
description = "fio's zoned block device tests: 144 zones of 1 MiB (capacity 768 KiB), 4 KiB blocks, max open = max active = 14"
timing = "none"

[controller]
serial = "ZNSKIT-FIOZBD-01"
model = "znskit emulated ZNS SSD (fio zbd tests)"
max_queue_entries = 1024
max_io_queues = 64
mdts_log2 = 6
zasl_log2 = 5

[[namespace]]
kind = "zoned"
block_size = 4096
zones = 144
zone_size = 256
zone_capacity = 192
max_open = 14
max_active = 14
descriptor_extension_bytes = 0
read_across_zone_boundaries = true
"#;

/// [`PROFILE`]'s zones.
pub const DEVICE_ZONES: u32 = 144;

/// [`PROFILE`]'s zone capacity in bytes (192 blocks of 4 KiB).
pub const DEVICE_ZONE_CAPACITY: u64 = 192 * 4096;

/// A fresh image of [`PROFILE`] in `dir` (`zns emu create`); its URI.
pub fn make_device(zns: &Path, dir: &Path) -> Result<String> {
    let profile = dir.join("fio-zbd-profile.toml");
    fs::write(&profile, PROFILE).map_err(|e| Error::io(&profile, e))?;
    let image = dir.join("fio-zbd.img");
    let _ = fs::remove_file(&image);
    run_checked(
        Command::new(zns).args(["emu", "create"]).arg(&image).arg("--profile").arg(&profile),
        "zns emu create (fio's test device)",
    )?;
    let uri = format!("emu:file={}", image.display());
    if uri.contains(',') {
        return Err(Error::new(format!("{uri}: a device path cannot hold a comma")));
    }
    Ok(uri)
}

/// Programs the script runs beside fio and blkzone (program, Debian
/// package): bash itself, GNU grep (`grep -P`), GNU sed, and coreutils
/// where busybox's applets lack an option (`timeout -v`) or may differ.
pub const TOOLS: &[(&str, &str)] = &[
    ("bash", "bash"),
    ("grep", "grep"),
    ("sed", "sed"),
    ("stat", "coreutils"),
    ("timeout", "coreutils"),
    ("realpath", "coreutils"),
    ("readlink", "coreutils"),
    ("sort", "coreutils"),
    ("tr", "coreutils"),
    ("tee", "coreutils"),
    ("head", "coreutils"),
    ("tail", "coreutils"),
    ("dirname", "coreutils"),
    ("basename", "coreutils"),
];

/// The guest's lines: the script (with `-r`, every zone reset first, and
/// `-t N` for each of `only`, all tests when empty) on zoned block device
/// `$dev` (a shell expression), its output piped (the console is a
/// terminal: no colours), then one [`RESULT`] line per test log, with the
/// log's last lines for a failure.
pub fn guest_lines(dev: &str, only: &[u32]) -> String {
    let select: String = only.iter().map(|t| format!(" -t {t}")).collect();
    format!(
        r#"# fio's own zoned block device tests, from Debian's fio source, unmodified.
say "RUN fio-zbd-tests: test-zbd-support -r -w{select} {dev}"
# bash's process substitution opens /dev/fd/N.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
t0=$(now)
start=$(date +%s)
rm -f {GUEST_DIR}/test-zbd-support.log.*
/usr/bin/bash {GUEST_DIR}/test-zbd-support -r -w{select} {dev} 2>&1 | cat
say "END fio-zbd-tests ($(( $(now) - t0 )) s)"
# The tests run in numeric order; each log is last written as its test ends.
prev=$start
for n in $(ls {GUEST_DIR} | sed -n 's/^test-zbd-support[.]log[.]//p' | sort -n); do
    f={GUEST_DIR}/test-zbd-support.log.$n
    end=$(stat -c %Y "$f")
    echo "{TIME}$n $((end - prev))"
    prev=$end
    st=$(tail -n 1 "$f")
    case "$st" in
        SKIP) echo "{RESULT}$n SKIP $(tail -n 2 "$f" | head -n 1)" ;;
        FAIL)
            echo "{RESULT}$n FAIL"
            grep -E "^fio: |rror|Assertion|<>" "$f" | head -n 20 | sed "s/^/zbd-log $n| /"
            tail -n 30 "$f" | sed "s/^/zbd-log $n| /" ;;
        *) echo "{RESULT}$n $st" ;;
    esac
done
"#
    )
}

/// A test's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Passed.
    Pass,
    /// Failed.
    Fail,
    /// Skipped by the script (its reason kept beside).
    Skip,
}

/// Parses a [`RESULT`] line: test number, status, reason (skips).
pub fn parse_result(line: &str) -> Option<(u32, Status, String)> {
    let rest = line.strip_prefix(RESULT)?;
    let mut w = rest.splitn(3, ' ');
    let n = w.next()?.parse().ok()?;
    let status = match w.next()?.trim() {
        "PASS" => Status::Pass,
        "FAIL" => Status::Fail,
        "SKIP" => Status::Skip,
        _ => return None,
    };
    Some((n, status, w.next().unwrap_or_default().trim().to_string()))
}

/// Parses a [`TIME`] line: test number, seconds.
pub fn parse_time(line: &str) -> Option<(u32, u64)> {
    let (n, secs) = line.strip_prefix(TIME)?.split_once(' ')?;
    Some((n.parse().ok()?, secs.trim().parse().ok()?))
}

/// The `k` longest tests of `times` (test, seconds), longest first.
pub fn slowest(times: &BTreeMap<u32, u64>, k: usize) -> String {
    let mut v: Vec<(u32, u64)> = times.iter().map(|(n, s)| (*n, *s)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: u64 = times.values().sum();
    let top: Vec<String> = v.iter().take(k).map(|(n, s)| format!("{n}: {s} s")).collect();
    format!("fio zbd tests took {total} s; longest {}", top.join(", "))
}

/// What the results say against the expectations, for `wanted` (the tests
/// run): a line per problem (empty when the run passes).
pub fn check(results: &BTreeMap<u32, (Status, String)>, wanted: &[u32]) -> Vec<String> {
    check_against(results, wanted, EXPECTED_FAILURES, EXPECTED_SKIPS)
}

/// [`check`] against the expected failures and skips of another device
/// (`expected_failures`, `expected_skips`: test and reason).
pub fn check_against(
    results: &BTreeMap<u32, (Status, String)>,
    wanted: &[u32],
    expected_failures: &[(u32, &str)],
    expected_skips: &[(u32, &str)],
) -> Vec<String> {
    let listed = |list: &[(u32, &str)], n: u32| list.iter().any(|(t, _)| *t == n);
    let mut problems = Vec::new();
    for &n in wanted {
        match results.get(&n) {
            None => problems.push(format!("fio zbd test {n}: no result (the script stopped?)")),
            Some((Status::Pass, _)) => {
                if listed(expected_failures, n) {
                    problems.push(format!(
                        "fio zbd test {n} passed but is listed as an expected failure"
                    ));
                }
                if listed(expected_skips, n) {
                    problems
                        .push(format!("fio zbd test {n} passed but is listed as an expected skip"));
                }
            }
            Some((Status::Fail, _)) if !listed(expected_failures, n) => {
                problems.push(format!("fio zbd test {n} FAILED (not an expected failure)"));
            }
            Some((Status::Skip, why)) if !listed(expected_skips, n) => {
                problems.push(format!("fio zbd test {n} skipped unexpectedly: {why}"));
            }
            Some(_) => {}
        }
    }
    for n in results.keys().filter(|n| !wanted.contains(n)) {
        problems.push(format!("fio zbd test {n}: a result for a test not asked for"));
    }
    problems
}

/// One line: how many passed, failed as expected, skipped as expected.
pub fn summary(results: &BTreeMap<u32, (Status, String)>) -> String {
    let count = |s: Status| results.values().filter(|(x, _)| *x == s).count();
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, (s, _))| *s == Status::Fail)
        .map(|(n, _)| n.to_string())
        .collect();
    let skipped: Vec<String> = results
        .iter()
        .filter(|(_, (s, _))| *s == Status::Skip)
        .map(|(n, _)| n.to_string())
        .collect();
    format!(
        "fio zbd tests: {} passed, {} failed [{}], {} skipped [{}]",
        count(Status::Pass),
        count(Status::Fail),
        failed.join(" "),
        count(Status::Skip),
        skipped.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_tests_a_script_defines() {
        let s = "test1() {\n  :\n}\n# test7() in a comment\ntest12() {\n}\ntest2() {\n}\n\
                 write_and_run_one_fio_job() {\n}\ntest_x() {\n}\n";
        assert_eq!(test_numbers(s), [1, 2, 12]);
    }

    #[test]
    fn the_device_constants_are_the_profiles() {
        assert!(PROFILE.contains(&format!("zones = {DEVICE_ZONES}\n")));
        assert!(PROFILE.contains(&format!("zone_capacity = {}\n", DEVICE_ZONE_CAPACITY / 4096)));
        assert!(PROFILE.contains("block_size = 4096\n"));
    }

    #[test]
    fn selections_take_numbers_and_ranges() {
        assert_eq!(parse_selection("5"), Some(vec![5]));
        assert_eq!(parse_selection("1-3, 7,2"), Some(vec![1, 2, 3, 7]));
        assert_eq!(parse_selection("3-1"), None);
        assert_eq!(parse_selection("x"), None);
        assert_eq!(parse_selection(""), None);
    }

    #[test]
    fn results_are_checked_both_ways() {
        assert_eq!(parse_result("ZBD-RESULT 5 PASS"), Some((5, Status::Pass, String::new())));
        assert_eq!(
            parse_result("ZBD-RESULT 9 SKIP /dev/nvme0n2 is not a SCSI device"),
            Some((9, Status::Skip, "/dev/nvme0n2 is not a SCSI device".into()))
        );
        assert_eq!(parse_result("ZBD-RESULT x PASS"), None);
        assert_eq!(parse_result("ZBD-RESULT 3 MAYBE"), None);
        assert_eq!(parse_result("vmtest: ZBD-RESULT 3 PASS"), None);
        assert_eq!(parse_time("ZBD-TIME 31 34"), Some((31, 34)));
        assert_eq!(parse_time("ZBD-TIME 31"), None);
        let times: BTreeMap<u32, u64> = [(1, 2), (30, 31), (31, 34), (2, 2)].into();
        assert_eq!(slowest(&times, 2), "fio zbd tests took 69 s; longest 31: 34 s, 30: 31 s");

        let skip = EXPECTED_SKIPS[0].0;
        let mut r = BTreeMap::new();
        r.insert(1, (Status::Pass, String::new()));
        r.insert(skip, (Status::Skip, "not a SCSI device".into()));
        assert!(check(&r, &[1, skip]).is_empty());
        // A missing result, an unexpected failure, an unexpected skip, a
        // listed skip that passed, a result not asked for.
        assert_eq!(check(&r, &[1, skip, 2]).len(), 1);
        r.insert(1, (Status::Fail, String::new()));
        assert!(check(&r, &[1, skip])[0].contains("FAILED"));
        r.insert(1, (Status::Skip, "why".into()));
        assert!(check(&r, &[1, skip])[0].contains("skipped unexpectedly: why"));
        r.insert(1, (Status::Pass, String::new()));
        r.insert(skip, (Status::Pass, String::new()));
        assert!(check(&r, &[1, skip])[0].contains("listed as an expected skip"));
        assert!(check(&r, &[1])[0].contains("not asked for"));
        assert!(summary(&r).starts_with("fio zbd tests: 2 passed, 0 failed"));
    }

    #[test]
    fn the_guest_runs_the_script_unmodified_and_reports_every_log() {
        let s = guest_lines("$S", &[5, 7]);
        assert!(
            s.contains("/usr/bin/bash /fio/t/zbd/test-zbd-support -r -w -t 5 -t 7 $S 2>&1 | cat")
        );
        assert!(s.contains("f=/fio/t/zbd/test-zbd-support.log.$n"));
        assert!(s.contains("echo \"ZBD-TIME $n $((end - prev))\""));
        assert!(s.contains("echo \"ZBD-RESULT $n SKIP"));
        assert!(guest_lines("$S", &[]).contains("test-zbd-support -r -w $S"));
    }
}
