//! `zns emu`: persistent emulated devices and the built-in profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Subcommand;
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
    },
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
            for name in Profile::built_in_names() {
                let p = Profile::by_name(name)?;
                writeln!(out, "{name:<10} {}", p.description)?;
            }
        }
        EmuCommand::ShowProfile { name } => match Profile::built_in_text(&name) {
            Some(text) => out.write_all(text.as_bytes())?,
            None => {
                let known: Vec<_> = Profile::built_in_names().collect();
                bail!("no built-in profile named {name:?} (built-in: {})", known.join(", "));
            }
        },
        EmuCommand::Create { path, profile } => {
            let p = load_profile(&profile)?;
            if let Some(nsid) = zns_emulator::ftl_namespace(&p) {
                bail!(
                    "profile {:?}: namespace {nsid} is a conventional SSD with a device-side FTL, \
                     whose map device images do not hold; use it as emu:{} (RAM)",
                    p.name,
                    p.name
                );
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
