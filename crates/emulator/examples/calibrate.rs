//! Measures every figure of the ZN540 reference on the `zn540` profile's
//! timing model (through real queues, on the virtual clock) and prints
//! JSON: measured, reference and ratio per figure.
//!
//! ```text
//! cargo run --release -p zns-emulator --example calibrate [-- --quick] [--profile FILE.toml]
//! ```
//!
//! Exits with status 1 when a figure is off by more than 10 %. With
//! `--quick` the 128 KiB write tail percentiles are reported (`"tail":
//! true`) but not required: a short run holds the buffer's start-up
//! transient.

use std::path::PathBuf;

use clap::Parser;
use zns_emulator::profile::Profile;
use zns_emulator::timing::calibration::zn540_figures;

/// Every figure of the ZN540 reference measured on a profile's timing
/// model; exits with status 1 when one is off by more than 10 %.
#[derive(Debug, Parser)]
struct Args {
    /// A short run: the 128 KiB write tail percentiles are reported but
    /// not required.
    #[arg(long)]
    quick: bool,
    /// The profile to measure, a TOML file (default the built-in `zn540`).
    #[arg(long, value_name = "FILE.toml")]
    profile: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    let quick = args.quick;
    let profile = match &args.profile {
        Some(path) => Profile::load(path).expect("profile"),
        None => Profile::by_name("zn540").expect("built-in profile"),
    };
    let started = std::time::Instant::now();
    let figures = zn540_figures(&profile, quick).expect("calibration run");
    let rows: Vec<serde_json::Value> = figures
        .iter()
        .map(|f| {
            serde_json::json!({
                "figure": f.name,
                "unit": f.unit,
                "reference": f.reference,
                "measured": (f.measured * 1000.0).round() / 1000.0,
                "ratio": (f.ratio() * 1000.0).round() / 1000.0,
                "within_10_percent": f.within(0.10),
                "tail": quick && is_tail(&f.name),
            })
        })
        .collect();
    let excused = |name: &str| quick && is_tail(name);
    let off = figures.iter().filter(|f| !(f.within(0.10) || excused(&f.name))).count();
    let report = serde_json::json!({
        "profile": profile.name,
        "clock": "virtual",
        "figures": rows,
        "outside_10_percent": off,
        "wall_seconds": started.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    if off > 0 {
        std::process::exit(1);
    }
}

/// The 128 KiB write tail percentiles: informational.
fn is_tail(name: &str) -> bool {
    name.starts_with("128 KiB write p9")
}
