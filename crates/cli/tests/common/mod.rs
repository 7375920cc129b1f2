//! Running the `zns` binary from the command-line tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a test waits for a child process: generous, since two cores
/// may be busy with other tests.
pub const PATIENCE: Duration = Duration::from_secs(60);

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

/// Runs `program` with `args` for at most [`PATIENCE`], checks that it
/// succeeded, and returns its output and errors.
pub fn run_tool(program: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let status = wait_exit(&mut child, &format!("{program} {args:?} to finish"));
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert!(status.success(), "{program} {args:?} failed:\n{text}");
    text
}

/// `child`'s exit status once it exits; after [`PATIENCE`] it is killed
/// and the test fails, naming `what` it waited for.
pub fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: not within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `out` up to the first line for which `last` holds, or to its
/// end: the text read, and `out` to read on. A child that neither prints
/// that line nor exits within [`PATIENCE`] is killed and the test fails,
/// naming `what` it waited for. (The reading happens on a thread of its
/// own since a pipe read has no timeout.)
pub fn read_until(
    child: &mut Child,
    mut out: BufReader<ChildStdout>,
    what: &str,
    last: fn(&str) -> bool,
) -> (String, BufReader<ChildStdout>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        loop {
            let at = text.len();
            match out.read_line(&mut text) {
                Ok(0) | Err(_) => break,
                Ok(_) if last(&text[at..]) => break,
                Ok(_) => {}
            }
        }
        let _ = tx.send((text, out));
    });
    rx.recv_timeout(PATIENCE).unwrap_or_else(|_| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: not within {PATIENCE:?}")
    })
}

/// What a `zns` run printed and how it exited.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `zns` with `args`, no stdin, and no device or log settings from
/// the environment.
pub fn zns(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(args)
        .env_remove("ZNS_DEVICE")
        .env_remove("ZNS_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run zns");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `o`, after checking that the run succeeded.
#[track_caller]
pub fn ok(o: Out) -> Out {
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    o
}

/// A running `zns` server (`zns ... serve`, `zns ... ftl serve`) on a port
/// of its own choosing, killed and reaped if the test ends without
/// stopping it.
pub struct Server {
    child: Child,
    /// The address it printed on its `listening on` line.
    pub addr: String,
    stdout: Option<BufReader<ChildStdout>>,
}

impl Server {
    /// Runs `zns` with `args` (which include `--listen 127.0.0.1:0`) and
    /// waits for its `listening on ADDR` line; panics with its stderr if
    /// it exits first.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_zns"))
            .args(args)
            .env_remove("ZNS_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run a zns server");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let what = format!("a `listening on` line from zns {}", args.join(" "));
        let (text, stdout) =
            read_until(&mut child, stdout, &what, |l| l.starts_with("listening on "));
        // From here on Drop kills and reaps the child, whatever happens.
        let mut server = Server { child, addr: String::new(), stdout: Some(stdout) };
        let Some(rest) = text.lines().find_map(|l| l.strip_prefix("listening on ")) else {
            let mut err = String::new();
            server.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("zns {} exited early: {err}", args.join(" "));
        };
        server.addr = rest.split_whitespace().next().unwrap().to_string();
        server
    }

    /// Reads the server's output up to its `metrics on http://ADDR/metrics`
    /// line (`--metrics`) and returns `http://ADDR`.
    pub fn metrics_url(&mut self) -> String {
        let out = self.stdout.take().unwrap();
        let (text, out) = read_until(&mut self.child, out, "a `metrics on` line", |l| {
            l.trim_start().starts_with("metrics on ")
        });
        self.stdout = Some(out);
        let url = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("metrics on "))
            .unwrap_or_else(|| panic!("no `metrics on` line in {text}"));
        url.trim_end_matches("/metrics").to_string()
    }

    /// Sends SIGTERM and returns the rest of stdout once it exits
    /// successfully.
    pub fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        let r = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(r, 0);
        let status = wait_exit(&mut self.child, "zns to exit after SIGTERM");
        let mut rest = String::new();
        self.stdout.take().unwrap().read_to_string(&mut rest).unwrap();
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success(), "serve failed: {status}\n{rest}\n{err}");
        rest
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes, in `dir`, an eZNS configuration of two tenants `a` and `b` (8
/// logical zones, 2 active, each) over one `emu:zn540` cut to 48 zones,
/// and returns its path.
pub fn two_tenants(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("tenants.toml");
    let text = r#"device = "emu:zn540,zones=48"
zone_scale = 1
max_width = 4
headroom = 2

[[tenant]]
name = "a"
zones = 8
active_zones = 2

[[tenant]]
name = "b"
zones = 8
active_zones = 2
"#;
    std::fs::write(&config, text).unwrap();
    config
}
