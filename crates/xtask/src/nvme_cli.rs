//! nvme-cli's own test suite (`tests/` of Debian's nvme-cli source
//! package, the nvme-cli the guest runs) against a `zns serve` controller:
//! every test file run with Debian's Python in the guest, its outcome
//! checked against [`EXPECTED`], both ways (a failure not listed fails the
//! run, and so does a listed one that no longer happens).
//!
//! The suite is written for PCIe drives: its `setUp` asserts that the
//! controller sits on the PCI bus, which no NVMe over Fabrics controller
//! does. The run applies one change to the unpacked suite, [`FABRICS_PATCH`]:
//! the check also accepts a controller of the `nvme-fabrics` class. Nothing
//! else of the suite is changed.
//!
//! The controller serves `emu:small-conv` (a conventional twin: an NVM
//! namespace 1 over the device's own FTL), the namespace the suite's tests
//! read, write and zero; the suite's namespace management tests need a
//! controller that creates namespaces, which this target does not.

use std::fs;
use std::path::{Path, PathBuf};

use crate::server::Server;
use crate::vmtest::{self, GuestEntry};
use crate::{Error, Result};

/// The subsystem the suite runs against.
pub const NQN: &str = "nqn.2026-11.io.znskit:nvme-cli-tests";

/// Where the suite sits in the guest (the suite reads `tests/config.json`
/// relative to where it runs).
const GUEST_DIR: &str = "/nvme-cli";

/// The suite's check that the controller is a PCI device, and what the run
/// puts in its place: PCI, or NVMe over Fabrics.
pub const FABRICS_PATCH: (&str, &str) = ("| grep -i pci\"", "| grep -i -e pci -e nvme-fabrics\"");

/// The outcomes that are not a pass, with why. `ERROR` is an exception in
/// the test (its set-up included), `FAIL` a failed assertion.
pub const EXPECTED: &[(&str, &str, &str)] = &[
    (
        "nvme_attach_detach_ns_test",
        "FAIL",
        "namespace management: the suite lists the subsystem's controllers (`nvme list-ctrl`, \
         Identify CNS 13h) to delete, create and attach namespaces; the target's namespaces are \
         the devices it serves, fixed for its life (no Namespace Management or Attachment; \
         CNS 13h answers Invalid Field in Command)",
    ),
    ("nvme_create_max_ns_test", "FAIL", "namespace management, as nvme_attach_detach_ns_test"),
    (
        "nvme_format_test",
        "FAIL",
        "Format NVM (optional) is not offered, and the test manages namespaces too (as \
         nvme_attach_detach_ns_test)",
    ),
    (
        "nvme_get_features_test",
        "FAIL",
        "features 08h and 09h (interrupt coalescing, interrupt vector configuration) concern \
         PCIe interrupts; a fabrics controller has none (Invalid Field in Command)",
    ),
    (
        "nvme_get_lba_status_test",
        "FAIL",
        "Get LBA Status (admin 86h, optional) is not offered: Invalid Command Opcode",
    ),
    (
        "nvme_lba_status_log_test",
        "FAIL",
        "the LBA Status Information log page (0Eh, optional) is not offered: Invalid Log Page",
    ),
    (
        "nvme_smart_log_test",
        "ERROR",
        "a fault of the suite: after `nvme smart-log` succeeds it looks for `data_units_read` in \
         the output, which nvme-cli 2.x prints as `Data Units Read`; it errors so on any device",
    ),
    (
        "nvme_writeuncor_test",
        "FAIL",
        "Write Uncorrectable (04h, optional) is not offered: Invalid Command Opcode",
    ),
];

/// The suite's files, unpacked from the source package under `cache`.
pub struct Suite {
    /// The directory holding the test files.
    pub dir: PathBuf,
    /// `nvme-cli VERSION`, for the report.
    pub source: String,
    /// The test files (`nvme_*_test.py`), by name without `.py`.
    pub tests: Vec<String>,
}

/// Finds (or fetches and unpacks) the suite of the installed nvme-cli.
pub fn prepare(cache: &Path, install: bool) -> Result<Suite> {
    let (package, version) = crate::source::installed("nvme-cli")?;
    let dir = cache.join("nvme-cli-source").join(version.replace(':', "_")).join("tests");
    if !dir.join("nvme_test.py").is_file() {
        crate::source::fetch(cache, &package, &version, &["tests/*.py"], &dir, install)?;
    }
    let mut tests: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| Error::io(&dir, e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("nvme_") && n.ends_with("_test.py"))
        .filter(|n| n != "nvme_simple_template_test.py" && n != "nvme_test.py")
        .map(|n| n.trim_end_matches(".py").to_string())
        .collect();
    tests.sort();
    if tests.is_empty() {
        return Err(Error::new(format!("{}: no nvme_*_test.py", dir.display())));
    }
    Ok(Suite { dir, source: format!("{package} {version}"), tests })
}

/// The suite's files in the guest, the PCI check patched
/// ([`FABRICS_PATCH`]).
pub fn guest_entries(suite: &Suite) -> Result<Vec<GuestEntry>> {
    let mut out = Vec::new();
    for e in fs::read_dir(&suite.dir).map_err(|e| Error::io(&suite.dir, e))? {
        let p = e.map_err(|e| Error::io(&suite.dir, e))?.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.ends_with(".py") {
            continue;
        }
        let mut text = fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
        if name == "nvme_test.py" {
            if !text.contains(FABRICS_PATCH.0) {
                return Err(Error::new(format!(
                    "{}: the PCI check ({:?}) is not where the patch expects it",
                    p.display(),
                    FABRICS_PATCH.0
                )));
            }
            text = text.replace(FABRICS_PATCH.0, FABRICS_PATCH.1);
        }
        out.push(GuestEntry::File {
            path: format!("{GUEST_DIR}/tests/{name}"),
            mode: 0o644,
            bytes: text.into_bytes(),
        });
    }
    Ok(out)
}

/// Debian's Python for the guest: the interpreter with its libraries, and
/// the standard library without what the suite never imports (tests,
/// IDLE, Tk, 2to3, pip's bootstrap, compiled caches).
pub fn python_files() -> Result<Vec<PathBuf>> {
    let python = PathBuf::from("/usr/bin/python3.11");
    if !python.is_file() {
        return Err(Error::new("Debian's python3.11 is not installed (apt-get install python3)"));
    }
    let mut files = vmtest::with_libraries(&python)
        .ok_or_else(|| Error::new("cannot list python3.11's libraries (ldd)"))?;
    let skip = [
        "test",
        "idlelib",
        "tkinter",
        "turtledemo",
        "lib2to3",
        "ensurepip",
        "pydoc_data",
        "__pycache__",
        "site-packages",
        "dist-packages",
        "config-3.11-x86_64-linux-gnu",
    ];
    let mut stack = vec![PathBuf::from("/usr/lib/python3.11")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let ty = e.file_type().map_err(|err| Error::io(&p, err))?;
            if skip.contains(&name.as_str()) {
                continue;
            }
            if ty.is_dir() {
                stack.push(p);
            } else if ty.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Starts the suite's target: `emu:small-conv` as namespace 1.
pub fn start(zns: &Path) -> Result<Server> {
    Server::start(
        "zns serve (nvme-cli tests)",
        zns,
        &["--device", "emu:small-conv", "serve", "--listen", "127.0.0.1:0", "--nqn", NQN],
    )
}

/// The guest's lines: connect, write the suite's configuration for the
/// controller and namespace 1 of [`NQN`], run each test, print one
/// `NVMECLI-RESULT name status` line each.
pub fn guest_lines(port: u16, hostnqn: &str, hostid: &str, tests: &[String]) -> String {
    format!(
        r#"# nvme-cli's own test suite against a zns serve controller.
TN="-t tcp -a 10.0.2.2 -s {port}"
run nvme-cli-tests-connect nvme connect $TN -n {NQN} --hostnqn {hostnqn} --hostid {hostid}
nc_ctrl() {{
    for c in /sys/class/nvme/nvme*; do
        if [ "$(cat $c/subsysnqn 2>/dev/null)" = "{NQN}" ]; then basename $c; return; fi
    done
}}
nc_ns() {{
    for d in /sys/block/nvme*n*; do
        if [ "$(cat $d/device/subsysnqn 2>/dev/null)" = "{NQN}" ] && [ "$(cat $d/nsid 2>/dev/null)" = 1 ]; then
            basename $d; return
        fi
    done
}}
i=0
while [ $i -lt 100 ] && [ -z "$(nc_ns)" ]; do sleep 0.1; i=$((i + 1)); done
NC=/dev/$(nc_ctrl); NN=/dev/$(nc_ns)
say "nvme-cli tests: controller $NC, namespace $NN"
printf '{{"controller": "%s", "ns1": "%s", "log_dir": "/tmp/nvmetests/"}}\n' $NC $NN > {GUEST_DIR}/tests/config.json
for t in {tests}; do
    ( cd {GUEST_DIR} && PYTHONPATH={GUEST_DIR}/tests timeout 300 python3.11 -m unittest -v $t ) > /tmp/$t.out 2>&1
    rc=$?
    if grep -q '^OK' /tmp/$t.out; then st=PASS
    elif grep -q 'FAILED (.*errors=' /tmp/$t.out; then st=ERROR
    elif grep -q '^FAILED' /tmp/$t.out; then st=FAIL
    else st="EXIT-$rc"; fi
    say "NVMECLI-RESULT $t $st"
    if [ $st != PASS ]; then tail -n 80 /tmp/$t.out | sed 's/^/    | /'; fi
done
run nvme-cli-tests-disconnect nvme disconnect -n {NQN}
"#,
        tests = tests.join(" ")
    )
}

/// `(test, status)` from a guest line, if it is a result line.
pub fn parse_result(line: &str) -> Option<(String, String)> {
    let rest = line.split("NVMECLI-RESULT ").nth(1)?;
    let mut it = rest.split_whitespace();
    Some((it.next()?.to_string(), it.next()?.to_string()))
}

/// The failures of the run against [`EXPECTED`]: a test that did not run,
/// an outcome not listed, a listed one that changed.
pub fn check(
    results: &std::collections::BTreeMap<String, String>,
    tests: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    for t in tests {
        let want = EXPECTED.iter().find(|(n, _, _)| n == t).map_or("PASS", |(_, s, _)| *s);
        match results.get(t) {
            None => out.push(format!("nvme-cli test {t}: no result")),
            Some(got) if got != want => {
                out.push(format!("nvme-cli test {t}: {got}, expected {want}"));
            }
            Some(_) => {}
        }
    }
    out
}

/// One line for the report: passes, explained outcomes, the source.
pub fn summary(results: &std::collections::BTreeMap<String, String>, source: &str) -> String {
    let pass = results.values().filter(|s| *s == "PASS").count();
    format!(
        "nvme-cli tests: {pass} of {} pass, {} explained ({source})",
        results.len(),
        results.len() - pass
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_parse_and_are_checked_both_ways() {
        let l = "guest| vmtest: NVMECLI-RESULT nvme_flush_test PASS";
        assert_eq!(parse_result(l), Some(("nvme_flush_test".into(), "PASS".into())));
        assert_eq!(parse_result("guest| something else"), None);
        let tests = vec!["nvme_flush_test".to_string(), "nvme_id_ctrl_test".to_string()];
        let mut r = std::collections::BTreeMap::new();
        r.insert("nvme_flush_test".to_string(), "PASS".to_string());
        assert_eq!(check(&r, &tests).len(), 1, "a test without a result fails the run");
        r.insert("nvme_id_ctrl_test".to_string(), "FAIL".to_string());
        assert_eq!(check(&r, &tests).len(), 1, "an unexplained failure fails the run");
        r.insert("nvme_id_ctrl_test".to_string(), "PASS".to_string());
        assert!(check(&r, &tests).is_empty());
    }

    #[test]
    fn the_guest_writes_the_configuration_and_runs_every_test() {
        let l = guest_lines(4420, "nqn.h", "id", &["nvme_a_test".into(), "nvme_b_test".into()]);
        assert!(l.contains("tests/config.json"));
        assert!(l.contains("for t in nvme_a_test nvme_b_test; do"));
        assert!(l.contains("NVMECLI-RESULT $t $st"));
    }
}
