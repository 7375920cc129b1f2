//! Running the `zns` binary from the command-line tests.

#![allow(dead_code)]

use std::process::{Command, Stdio};

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
