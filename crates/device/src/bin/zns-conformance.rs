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

#[path = "../../tests/conformance/mod.rs"]
mod conformance;

use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str =
    "usage: zns-conformance [--list] [--only CHECK,...] [--skip CHECK,...] [--repeat N] [--fail-fast] URI...
Runs the device conformance suite against each device URI (emu:, pcie:, ng:, zbd:).
Every check resets every zone: use scratch devices only.";

fn names(list: &str) -> Result<Vec<String>, String> {
    let known: Vec<&str> = conformance::CHECKS.iter().map(|(n, _)| *n).collect();
    list.split(',')
        .filter(|n| !n.is_empty())
        .map(|n| {
            if known.contains(&n) {
                Ok(n.to_string())
            } else {
                Err(format!("unknown check {n:?} (--list shows them)"))
            }
        })
        .collect()
}

struct Args {
    only: Option<Vec<String>>,
    skip: Vec<String>,
    repeat: u32,
    fail_fast: bool,
    uris: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a =
        Args { only: None, skip: Vec::new(), repeat: 1, fail_fast: false, uris: Vec::new() };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--list" => {
                for (name, _) in conformance::CHECKS {
                    println!("{name}");
                }
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--only" => a.only = Some(names(&args.next().ok_or("--only needs a list")?)?),
            "--skip" => a.skip.extend(names(&args.next().ok_or("--skip needs a list")?)?),
            "--fail-fast" => a.fail_fast = true,
            "--repeat" => {
                let n = args.next().ok_or("--repeat needs a count")?;
                a.repeat = n.parse().map_err(|_| format!("--repeat {n:?}: not a count"))?;
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            _ => a.uris.push(arg),
        }
    }
    if a.uris.is_empty() {
        return Err(USAGE.into());
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zns-conformance: {e}");
            return ExitCode::from(2);
        }
    };
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
        let rounds = args.repeat.max(1) as usize;
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
