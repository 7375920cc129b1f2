//! Running the `zns` binary from the command-line tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};

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
    stdout: BufReader<ChildStdout>,
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
        // From here on Drop kills and reaps the child, whatever happens.
        let mut server = Server { child, addr: String::new(), stdout };
        let mut line = String::new();
        loop {
            line.clear();
            if server.stdout.read_line(&mut line).unwrap() == 0 {
                let mut err = String::new();
                server.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!("zns {} exited early: {err}", args.join(" "));
            }
            if let Some(rest) = line.strip_prefix("listening on ") {
                server.addr = rest.split_whitespace().next().unwrap().to_string();
                return server;
            }
        }
    }

    /// Sends SIGTERM and returns the rest of stdout once it exits
    /// successfully.
    pub fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        let r = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(r, 0);
        let status = self.child.wait().unwrap();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
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
