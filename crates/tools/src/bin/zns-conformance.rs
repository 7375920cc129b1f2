//! `zns-conformance`: runs the device conformance suite (the same checks
//! `cargo test` runs against the emulator) against any device URI.
//!
//! ```text
//! zns-conformance [--list] [--only CHECK,...] [--skip CHECK,...] [--repeat N] [--fail-fast] URI...
//! ```
//!
//! Every check resets every zone of the device: use scratch devices only.
//! Each check's result is printed as `PASS`/`FAIL` with the URI and the
//! check's name, then one `N passed, N failed` line; the exit code is 1
//! when any check failed or a device could not be opened.

#[path = "../../../device/tests/conformance/mod.rs"]
mod conformance;

use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

/// Runs the device conformance suite against each device URI (emu:, pcie:,
/// ng:, zbd:, tcp:). Every check resets every zone: use scratch devices
/// only.
#[derive(Debug, Parser)]
#[command(name = "zns-conformance", version)]
struct Args {
    /// List the checks and exit.
    #[arg(long)]
    list: bool,
    /// Run only these checks (comma separated).
    #[arg(long, value_name = "CHECK,...", value_delimiter = ',', value_parser = check_name)]
    only: Option<Vec<String>>,
    /// Leave these checks out (comma separated).
    #[arg(long, value_name = "CHECK,...", value_delimiter = ',', value_parser = check_name)]
    skip: Vec<String>,
    /// Run the suite this many times on each device.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Stop at the first failed check.
    #[arg(long)]
    fail_fast: bool,
    /// The devices.
    #[arg(value_name = "URI", required_unless_present = "list")]
    uris: Vec<String>,
}

/// A check's name, refused unless the suite has it.
fn check_name(name: &str) -> Result<String, String> {
    if conformance::CHECKS.iter().any(|(n, _)| *n == name) {
        Ok(name.to_string())
    } else {
        Err(format!("unknown check {name:?} (--list shows them)"))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for (name, _) in conformance::CHECKS {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    let (mut passed, mut failed) = (0u32, 0u32);
    for uri in &args.uris {
        let dev = match zns_device::open(uri) {
            Ok(d) => d,
            Err(e) => {
                println!("FAIL {uri} open: {e}");
                failed += 1;
                continue;
            }
        };
        let i = dev.info();
        println!(
            "device {uri}: {} ({}), {} zones of {} blocks (capacity {}), {}-byte blocks, \
             open/active {:?}/{:?}, mdts {} KiB, zasl {} KiB",
            i.backend,
            i.transport,
            i.zone_count,
            i.zone_size,
            i.zone_capacity,
            i.block_size,
            i.max_open,
            i.max_active,
            i.mdts_bytes >> 10,
            i.zasl_bytes >> 10
        );
        let rounds = args.repeat as usize;
        let checks = conformance::CHECKS.iter().cycle().take(conformance::CHECKS.len() * rounds);
        for (name, check) in checks {
            let selected = args.only.as_ref().is_none_or(|o| o.iter().any(|n| n == name));
            if !selected || args.skip.iter().any(|n| n == name) {
                continue;
            }
            let start = Instant::now();
            let r = panic::catch_unwind(AssertUnwindSafe(|| check(dev.as_ref())));
            let secs = start.elapsed().as_secs_f64();
            match r {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {uri} {name} ({secs:.2} s)");
                }
                Err(p) => {
                    failed += 1;
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    println!("FAIL {uri} {name} ({secs:.2} s): {msg}");
                    if args.fail_fast {
                        println!("conformance: {passed} passed, {failed} failed");
                        return ExitCode::FAILURE;
                    }
                }
            }
        }
    }
    println!("conformance: {passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
