//! NVMe in-band authentication with the kernel's host: a `zns serve` that
//! requires the guest's host NQN to authenticate with DH-HMAC-CHAP (and
//! can prove itself with a controller secret), and the guest's `nvme
//! connect` with the right secrets (the namespace then reads), a wrong
//! secret, a wrong controller secret and none (each refused).

use std::path::Path;
use std::process::Command;

use crate::server::Server;
use crate::{Error, Result};

/// The subsystem that requires authentication.
pub const NQN: &str = "nqn.2026-11.io.znskit:dhchap";

/// Secrets made by `zns gen-dhchap-key` for one run.
pub struct Secrets {
    /// The host's secret.
    pub host: String,
    /// The controller's secret.
    pub ctrl: String,
    /// Another secret: wrong for either side.
    pub wrong: String,
}

impl Secrets {
    /// Three new secrets: SHA-256-, SHA-384- and SHA-512-transformed, of
    /// 32, 48 and 64 bytes.
    pub fn make(zns: &Path) -> Result<Secrets> {
        let key = |len: &str, hmac: &str| -> Result<String> {
            let out = Command::new(zns)
                .args(["gen-dhchap-key", "--key-length", len, "--hmac", hmac])
                .output()
                .map_err(|e| Error::new(format!("zns gen-dhchap-key: {e}")))?;
            let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !out.status.success() || !s.starts_with("DHHC-1:") {
                return Err(Error::new(format!("zns gen-dhchap-key printed {s:?}")));
            }
            Ok(s)
        };
        Ok(Secrets { host: key("32", "1")?, ctrl: key("48", "2")?, wrong: key("64", "3")? })
    }
}

/// Starts the target: `emu:tiny`, host `hostnqn` bound to the secrets.
pub fn start(zns: &Path, hostnqn: &str, s: &Secrets) -> Result<Server> {
    let host = format!("{hostnqn}={}", s.host);
    let ctrl = format!("{hostnqn}={}", s.ctrl);
    Server::start(
        "zns serve (DH-HMAC-CHAP)",
        zns,
        &[
            "--device",
            "emu:tiny",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nqn",
            NQN,
            "--dhchap-secret",
            &host,
            "--dhchap-ctrl-secret",
            &ctrl,
        ],
    )
}

/// The guest's lines: refused connects first, then the one that works.
pub fn guest_lines(port: u16, hostnqn: &str, hostid: &str, s: &Secrets) -> String {
    let refused = |name: &str, args: &str| {
        format!(
            r#"if nvme connect $TA -n {NQN} --hostnqn {hostnqn} --hostid {hostid} {args} >/tmp/auth.out 2>&1; then
    fail=1; say "FAILED {name}: connected"; nvme disconnect -n {NQN}
else
    say "END {name}: refused as it must: $(tr '\n' ' ' < /tmp/auth.out | cut -c1-160)"
fi
"#
        )
    };
    let mut l = format!(
        "# DH-HMAC-CHAP: a target that requires this host to authenticate.\nTA=\"-t tcp -a 10.0.2.2 -s {port}\"\n"
    );
    l.push_str(&refused("dhchap-none", ""));
    l.push_str(&refused("dhchap-wrong", &format!("--dhchap-secret {}", s.wrong)));
    l.push_str(&refused(
        "dhchap-wrong-ctrl",
        &format!("--dhchap-secret {} --dhchap-ctrl-secret {}", s.host, s.wrong),
    ));
    l.push_str(&format!(
        r#"run dhchap-connect nvme connect $TA -n {NQN} --hostnqn {hostnqn} --hostid {hostid} --dhchap-secret {host} --dhchap-ctrl-secret {ctrl}
auth_disk() {{
    for d in /sys/block/nvme*n*; do
        if [ "$(cat $d/device/subsysnqn 2>/dev/null)" = "{NQN}" ]; then basename $d; return; fi
    done
}}
i=0
while [ $i -lt 100 ] && [ -z "$(auth_disk)" ]; do sleep 0.1; i=$((i + 1)); done
expect dhchap-read "1+0 records in" dd if=/dev/$(auth_disk) of=/dev/null bs=4096 count=1 iflag=direct
run dhchap-disconnect nvme disconnect -n {NQN}
"#,
        host = s.host,
        ctrl = s.ctrl
    ));
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_tries_three_refusals_before_the_connect_that_works() {
        let s = Secrets {
            host: "DHHC-1:01:H:".into(),
            ctrl: "DHHC-1:02:C:".into(),
            wrong: "DHHC-1:03:W:".into(),
        };
        let l = guest_lines(4421, "nqn.h", "id", &s);
        let none = l.find("FAILED dhchap-none").unwrap();
        let wrong = l.find("--dhchap-secret DHHC-1:03:W:").unwrap();
        let ok = l.find("run dhchap-connect").unwrap();
        assert!(none < wrong && wrong < ok);
        assert!(l[ok..].contains("--dhchap-secret DHHC-1:01:H: --dhchap-ctrl-secret DHHC-1:02:C:"));
        assert!(l.contains("expect dhchap-read"));
    }
}
