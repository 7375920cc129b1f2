//! The host's probe (`zns characterize --probe`: a CPU-bound loop and a
//! kernel path, each timed) and the arguments that set a guest's probe
//! against it: the guest's slowdowns are then against this host, in the
//! same run.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{Error, Result};

/// What the host's probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostProbe {
    /// The CPU-bound pass, ns.
    pub ns: u64,
    /// The kernel pass, ns (`None` from a `zns` that has none).
    pub kernel_ns: Option<u64>,
}

impl HostProbe {
    /// Runs `zns characterize --probe` on this host.
    pub fn measure(zns: &Path) -> Result<HostProbe> {
        let o = Command::new(zns)
            .args(["characterize", "--probe"])
            .output()
            .map_err(|e| Error::new(format!("{}: {e}", zns.display())))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::new(format!("zns characterize --probe: {e}: {text}")))?;
        Self::from_json(&v)
            .ok_or_else(|| Error::new(format!("zns characterize --probe: no ns: {text}")))
    }

    /// The figures of a `zns characterize --probe` report.
    pub fn from_json(v: &Value) -> Option<HostProbe> {
        Some(HostProbe { ns: v["ns"].as_u64()?, kernel_ns: v["kernel_ns"].as_u64() })
    }

    /// The guest's `zns characterize --probe` options that set its passes
    /// against this host's.
    pub fn guest_args(&self) -> String {
        match self.kernel_ns {
            Some(k) => format!("--probe-reference {} --probe-kernel-reference {k}", self.ns),
            None => format!("--probe-reference {}", self.ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_is_set_against_both_passes() {
        let v = serde_json::json!({"ns": 9, "kernel_ns": 4, "slowdown": 1.0});
        let p = HostProbe::from_json(&v).unwrap();
        assert_eq!(p.guest_args(), "--probe-reference 9 --probe-kernel-reference 4");
        let old = HostProbe::from_json(&serde_json::json!({"ns": 9})).unwrap();
        assert_eq!(old.guest_args(), "--probe-reference 9");
        assert_eq!(HostProbe::from_json(&serde_json::json!({"kernel_ns": 4})), None);
    }
}
