//! A guest whose clock runs F times slower than the host's: QEMU under
//! libfaketime (Debian's `libfaketime`), so every clock QEMU reads, and
//! with them the guest's timers and clock sources (HPET, the PIT, the
//! local APIC's timer), advance at 1/F of real time.
//!
//! A device served on a clock dilated F times (`dilation=F`) then looks to
//! the guest as the undilated device would, and so does everything the
//! guest's own clock paces: its schedulers' timers, writeback, a
//! database's page cleaner. Only the guest's CPU stays as fast as software
//! emulation makes it, which in the guest's time is F times faster. This
//! is how DieCast dilates whole virtual machines; a device-only dilation
//! leaves the guest's timers on real time (docs/apps.md).
//!
//! The kernel needs `no_timer_check`: its check that the IO-APIC delivers
//! timer interrupts waits a few milliseconds by a delay loop, in which a
//! guest on a slow clock sees no tick and panics.

use std::path::PathBuf;
use std::process::Command;

/// What the guest's kernel command line gets on a dilated clock: no IO-APIC
/// timer check, and the CPU's random numbers trusted to seed the kernel's
/// generator at boot ([`CPU`]).
pub const KERNEL_ARGS: &str = "no_timer_check random.trust_cpu=on";

/// The guest's CPU under software emulation on a dilated clock: QEMU's
/// default model with RDRAND. Without a source of randomness the kernel
/// seeds its generator from interrupt timing, which takes seconds of the
/// guest's time; on a clock F times slower, programs that ask for random
/// bytes early (libuuid in mkfs.f2fs retries for 2 s) wait F times as
/// long in real time.
pub const CPU: &str = "qemu64,+rdrand";

/// Where Debian's libfaketime keeps its multi-threaded library (QEMU runs
/// a thread per vCPU).
const LIBRARY_DIRS: &[&str] = &["/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/faketime"];

/// The library's file name.
const LIBRARY: &str = "libfaketimeMT.so.1";

/// The installed libfaketime, if any.
pub fn library() -> Option<PathBuf> {
    LIBRARY_DIRS.iter().map(|d| PathBuf::from(d).join(LIBRARY)).find(|p| p.exists())
}

/// libfaketime's `FAKETIME` for a clock `factor` times slower: no offset,
/// a rate of 1/F.
pub fn faketime_spec(factor: f64) -> String {
    format!("+0 x{}", 1.0 / factor)
}

/// Runs `cmd` (QEMU) on a clock `factor` times slower. The library's
/// presence is checked before any guest starts ([`check`]); without it the
/// guest would run undilated, so a missing one is left for QEMU's loader
/// to refuse loudly rather than skipped.
pub fn apply(cmd: &mut Command, factor: f64) {
    let lib = library().unwrap_or_else(|| PathBuf::from(LIBRARY_DIRS[0]).join(LIBRARY));
    cmd.env("LD_PRELOAD", lib)
        .env("FAKETIME", faketime_spec(factor))
        // Monotonic clocks too: QEMU's virtual clock is CLOCK_MONOTONIC.
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "0");
}

/// Installs Debian's libfaketime when it is missing and `install` allows
/// it (as root); fails, saying how to install it, when it is still missing.
pub fn ensure(install: bool) -> crate::Result<()> {
    if library().is_none() && install && crate::vmtest::is_root() {
        println!("apps: installing libfaketime");
        crate::vmtest::apt_install(&["libfaketime".into()], None)?;
    }
    match library() {
        Some(_) => Ok(()),
        None => Err(crate::Error::new(format!(
            "a dilated guest clock needs libfaketime ({LIBRARY} in {}): apt-get install libfaketime",
            LIBRARY_DIRS.join(" or ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_inverse_of_the_factor() {
        assert_eq!(faketime_spec(8.0), "+0 x0.125");
        assert_eq!(faketime_spec(512.0), "+0 x0.001953125");
        assert_eq!(faketime_spec(1.0), "+0 x1");
    }

    #[test]
    fn qemu_gets_the_library_and_the_rate() {
        let mut cmd = Command::new("qemu-system-x86_64");
        apply(&mut cmd, 64.0);
        let env: Vec<(String, String)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_str()?.to_string(), v?.to_str()?.to_string())))
            .collect();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("FAKETIME").as_deref(), Some("+0 x0.015625"));
        assert!(get("LD_PRELOAD").is_some_and(|l| l.ends_with(LIBRARY)));
        assert_eq!(get("FAKETIME_DONT_FAKE_MONOTONIC").as_deref(), Some("0"));
    }
}
