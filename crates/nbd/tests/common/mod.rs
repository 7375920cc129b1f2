//! What the NBD tests share: real clients (run with a time bound, and
//! skipped, saying so, where they are not installed) and bounded waits.

#![allow(dead_code)]

use std::fs::File;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a test waits for a client program or a client thread:
/// generous, since two cores may be busy with other tests.
pub const TOOL_PATIENCE: Duration = Duration::from_secs(60);

/// Says the test is skipped for want of `what` (`why`: what is missing
/// and how to install it); the test then returns. Under `CI=true`, where
/// everything is meant to be installed, it fails instead, so that a
/// missing client cannot pass unseen.
pub fn skip(what: &str, why: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {what} is missing: {why}");
    eprintln!("skipped: {what} ({why})");
}

/// Whether `program --version` runs; when it does not, the test is
/// [`skip`]ped (`package` installs it).
pub fn have(program: &str, package: &str) -> bool {
    let runs = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        skip(program, &format!("not installed: apt-get install {package}"));
    }
    runs
}

/// Runs `program` with `args` for at most [`TOOL_PATIENCE`]: whether it
/// succeeded, and its output and errors.
pub fn run_tool(program: &str, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let out = File::create(&out_path).unwrap();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t.elapsed() > TOOL_PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            panic!("{program} {args:?} did not finish within {TOOL_PATIENCE:?}: {out}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), std::fs::read_to_string(&out_path).unwrap())
}

/// Joins `handle` (re-raising its panic), failing the test, naming `what`
/// it waited for, when the thread has not finished within
/// [`TOOL_PATIENCE`]: a client stuck on a server that never answers.
pub fn join_within<T>(handle: JoinHandle<T>, what: &str) -> T {
    let t = Instant::now();
    while !handle.is_finished() {
        assert!(t.elapsed() < TOOL_PATIENCE, "{what}: not within {TOOL_PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    handle.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}
