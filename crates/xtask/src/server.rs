//! `zns` servers on the host for the guest tasks: built once (release),
//! started on loopback, stopped cleanly (SIGTERM) or killed (SIGKILL) and
//! restarted on the same port.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use crate::{run_checked, vmtest, Error, Result};

/// Builds the host's `zns` (release; the same build the guest's programs
/// come from, see [`vmtest::build_guest_binaries`]) and returns its path.
pub(crate) fn build_zns(root: &Path, target: &Path, install: bool) -> Result<PathBuf> {
    let mut built = vmtest::build_guest_binaries(root, target, install, &["zns"])?;
    Ok(built.remove(0))
}

/// A `zns` server on the host, stopped (SIGTERM) when dropped.
pub(crate) struct Server {
    label: &'static str,
    child: Child,
    stdout: BufReader<ChildStdout>,
    pub(crate) port: u16,
}

impl Server {
    /// Starts `zns ARGS` and waits for its `listening on` line.
    pub(crate) fn start(label: &'static str, zns: &Path, args: &[&str]) -> Result<Server> {
        let mut child = Command::new(zns)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::new(format!("{}: {e}", zns.display())))?;
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut s = Server { label, child, stdout, port: 0 };
        let mut line = String::new();
        loop {
            line.clear();
            let n =
                s.stdout.read_line(&mut line).map_err(|e| Error::new(format!("{label}: {e}")))?;
            if n == 0 {
                return Err(Error::new(format!("{label} exited before listening")));
            }
            print!("host| {label}| {line}");
            if let Some(rest) = line.strip_prefix("listening on ") {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                s.port = addr
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| Error::new(format!("{label}: no port in {line:?}")))?;
                return Ok(s);
            }
        }
    }

    /// SIGKILL (no chance to flush or checkpoint), then what it printed
    /// since it started listening.
    pub(crate) fn kill(mut self) -> Result<String> {
        self.child.kill().map_err(|e| Error::new(format!("{}: kill: {e}", self.label)))?;
        let _ = self.child.wait();
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        Ok(rest)
    }

    /// SIGTERM, then its closing lines; fails unless it exits cleanly.
    pub(crate) fn stop(mut self) -> Result<String> {
        let pid = self.child.id().to_string();
        run_checked(Command::new("kill").args(["-TERM", &pid]), "kill -TERM")?;
        let status = self.child.wait().map_err(|e| Error::new(format!("{}: {e}", self.label)))?;
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        for l in rest.lines() {
            println!("host| {}| {l}", self.label);
        }
        if !status.success() {
            return Err(Error::new(format!("{} exited with {status}", self.label)));
        }
        Ok(rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
