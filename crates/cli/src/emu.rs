//! `zns emu`: persistent emulated devices and the built-in profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use zns_emulator::image::check::{check, CheckReport, Verdict};
use zns_emulator::image::DeviceImage;
use zns_emulator::profile::Profile;

use crate::num::human_size;

#[derive(Debug, Subcommand)]
pub enum EmuCommand {
    /// Create a persistent emulated device, opened later with --device emu:file=PATH.
    Create {
        /// Image file to create (must not exist; sparse, grows as data is written).
        path: PathBuf,
        /// A built-in profile name, or a profile TOML file (see `zns emu show-profile`).
        #[arg(long, default_value = "zn540")]
        profile: String,
        /// Keep no data checksums (blocks are then not verified on read).
        #[arg(long)]
        no_checksums: bool,
    },
    /// Verify a device image end to end: superblock, profile, layout,
    /// length, zone-state slots and every readable block's data and
    /// metadata checksums. Exit status: 0 clean, 3 damaged and --repair
    /// restores everything, 4 data or zone state lost, 1 the check could
    /// not run.
    Check {
        /// Image file.
        path: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Repair what can be: write the zone state the newest valid slot and
        /// the data prove as the next record, extend a file cut short,
        /// rebuild a lost zone state from the data checksums; report what
        /// is lost. Never done without this flag (nor on open).
        #[arg(long)]
        repair: bool,
    },
    /// Fit an emulator profile to a drive's `zns characterize` results (or
    /// to a built-in reference) and write it as a profile TOML for
    /// `--device emu:profile=FILE.toml`; prints the residuals.
    Fit(Box<crate::fit::FitArgs>),
    /// List the built-in profiles.
    Profiles,
    /// Print a built-in profile as TOML, to copy and edit.
    ShowProfile {
        /// Profile name.
        name: String,
    },
}

/// A built-in profile by name, or a TOML file.
fn load_profile(spec: &str) -> Result<Profile> {
    if Profile::built_in_names().any(|n| n == spec) {
        return Ok(Profile::by_name(spec)?);
    }
    let path = Path::new(spec);
    if path.exists() {
        return Profile::load(path).with_context(|| format!("profile file {spec}"));
    }
    let known: Vec<_> = Profile::built_in_names().collect();
    bail!("unknown profile {spec:?}: not a built-in profile ({}) nor a file", known.join(", "))
}

pub fn run(cmd: EmuCommand, out: &mut dyn Write) -> Result<()> {
    match cmd {
        EmuCommand::Profiles => {
            // One column for the names, as wide as the longest.
            let width = Profile::built_in_names().map(str::len).max().unwrap_or(0);
            for name in Profile::built_in_names() {
                let p = Profile::by_name(name)?;
                writeln!(out, "{name:<width$} {}", p.description)?;
            }
        }
        EmuCommand::ShowProfile { name } => match Profile::built_in_text(&name) {
            Some(text) => out.write_all(text.as_bytes())?,
            None => {
                let known: Vec<_> = Profile::built_in_names().collect();
                bail!("no built-in profile named {name:?} (built-in: {})", known.join(", "));
            }
        },
        EmuCommand::Check { path, json, repair } => return check_image(&path, json, repair, out),
        EmuCommand::Fit(args) => return crate::fit::run(&args, out),
        EmuCommand::Create { path, profile, no_checksums } => {
            let mut p = load_profile(&profile)?;
            if let Some(nsid) = zns_emulator::ftl_namespace(&p) {
                bail!(
                    "profile {:?}: namespace {nsid} is a conventional SSD with a device-side FTL, \
                     whose map device images do not hold; use it as emu:{} (RAM)",
                    p.name,
                    p.name
                );
            }
            if no_checksums {
                p.controller.data_checksums = Some(false);
            }
            DeviceImage::create(&path, &p).map_err(anyhow::Error::new)?;
            let size: u64 =
                p.namespaces.iter().map(|n| n.capacity_blocks() * u64::from(n.block_size)).sum();
            writeln!(
                out,
                "created {} ({} profile, {} of namespaces); use --device emu:file={}",
                path.display(),
                p.name,
                human_size(size),
                path.display()
            )?;
        }
    }
    Ok(())
}

/// `zns emu check`.
fn check_image(path: &Path, as_json: bool, repair: bool, out: &mut dyn Write) -> Result<()> {
    let visible = !as_json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = ProgressBar::with_draw_target(
        None,
        if visible { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() },
    );
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} blocks ({eta})")
            .expect("template")
            .progress_chars("=> "),
    );
    bar.set_message("verifying data");
    let r = check(path, repair, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report_json(&r, repair))?)?;
    } else {
        print_report(&r, out)?;
    }
    let why = match r.verdict() {
        Verdict::Clean => return Ok(()),
        Verdict::Repairable => format!(
            "device image {} is damaged: {} problem(s); --repair restores everything",
            path.display(),
            r.problems.len()
        ),
        Verdict::Lost if r.problems.is_empty() => format!(
            "device image {}: the repair kept what it could; data or zone state was lost (see \
             the repair lines)",
            path.display()
        ),
        Verdict::Lost => format!(
            "device image {} is damaged: {} problem(s); data or zone state is lost",
            path.display(),
            r.problems.len()
        ),
    };
    // The exit status tells clean, repairable and lost apart, which the
    // one failure status of other commands cannot.
    out.flush()?;
    eprintln!("zns: {why}");
    std::process::exit(exit_status(r.verdict()))
}

/// `zns emu check`'s exit status for a verdict: 0 clean, 3 repairable
/// without loss, 4 lost (1 is left to a check that could not run).
fn exit_status(v: Verdict) -> i32 {
    match v {
        Verdict::Clean => 0,
        Verdict::Repairable => 3,
        Verdict::Lost => 4,
    }
}

fn report_json(r: &CheckReport, repair: bool) -> Value {
    let mut v = json!({
        "image": r.path,
        "ok": r.is_ok(),
        "verdict": match r.verdict() {
            Verdict::Clean => "clean",
            Verdict::Repairable => "repairable",
            Verdict::Lost => "lost",
        },
        "version": r.version,
        "profile": r.profile,
        "data_checksums": r.data_checksums,
        "metadata_checksums": r.metadata_checksums,
        "length": r.length,
        "expected_length": r.expected_length,
        "namespaces": r.namespaces.iter().map(|n| json!({
            "nsid": n.nsid,
            "kind": if n.zoned { "zoned" } else { "conventional" },
            "slots": n.slots,
            "sequence": n.sequence,
            "changed_zones": n.changed_zones.iter().map(|c| json!({
                "zone": c.zone,
                "recorded_blocks": c.before,
                "proven_blocks": c.after,
                "reset": c.reset,
            })).collect::<Vec<_>>(),
            "unaccounted_blocks": n.unaccounted_blocks,
            "readable_blocks": n.readable_blocks,
            "checked_blocks": n.checked_blocks,
            "damaged_blocks": n.damaged_blocks,
            "damaged_total": n.damaged_total,
            "damaged_metadata": n.damaged_metadata,
            "damaged_metadata_total": n.damaged_metadata_total,
            "unverified_blocks": n.unverified_blocks,
        })).collect::<Vec<_>>(),
        "problems": r.problems.iter().map(|p| json!({
            "kind": p.kind,
            "namespace": p.nsid,
            "message": p.message,
            "repairable": p.repairable,
        })).collect::<Vec<_>>(),
    });
    if repair {
        v["repairs"] = json!(r.repairs);
    }
    v
}

fn print_report(r: &CheckReport, out: &mut dyn Write) -> Result<()> {
    for line in &r.repairs {
        writeln!(out, "repair: {line}")?;
    }
    let format = match (r.version, r.data_checksums) {
        (Some(v), true) if r.metadata_checksums => {
            format!("format {v}, data and metadata checksums")
        }
        (Some(v), true) => format!("format {v}, data checksums"),
        (Some(v), false) => format!("format {v}, no data checksums: data not verified"),
        (None, _) => "format unknown".to_string(),
    };
    writeln!(
        out,
        "checked {} ({} profile, {format}): {} bytes{}",
        r.path,
        r.profile.as_deref().unwrap_or("unknown"),
        r.length,
        match r.expected_length {
            Some(e) if e != r.length => format!(" (its layout spans {e})"),
            _ => String::new(),
        }
    )?;
    for n in &r.namespaces {
        let state = match (n.zoned, n.sequence) {
            (false, _) => String::new(),
            (true, Some(s)) => format!("zone state sequence {s}; "),
            (true, None) => "no zone state; ".to_string(),
        };
        let slots = match n.slots.as_slice() {
            [a, b] => format!(" (slot A {a}, slot B {b})"),
            _ => String::new(),
        };
        let unverified = match n.unverified_blocks {
            0 => String::new(),
            u => format!(", {u} unverified (a write was interrupted; --repair checksums them)"),
        };
        let metadata = match n.damaged_metadata_total {
            0 => String::new(),
            m => format!(", {m} with damaged metadata"),
        };
        writeln!(
            out,
            "namespace {} ({}): {state}{} readable blocks, {} verified, {} damaged{metadata}{unverified}{slots}",
            n.nsid,
            if n.zoned { "zoned" } else { "conventional" },
            n.readable_blocks,
            n.checked_blocks,
            n.damaged_total
        )?;
    }
    for p in &r.problems {
        writeln!(out, "problem: {}", p.message)?;
    }
    if r.is_ok() {
        writeln!(out, "no problems found")?;
    }
    Ok(())
}
