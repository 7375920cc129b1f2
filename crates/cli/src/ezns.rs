//! `zns ezns`: elastic logical zones (`zns-ezns`): the status of an
//! instance, and the experiments that set eZNS against static striping.
//!
//! A tenant itself is a device URI, `ezns:config=PATH,tenant=NAME`, that
//! every other command takes (`main` registers the scheme).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;
use zns_ezns::Instance;

#[derive(Debug, Subcommand)]
pub enum EznsCommand {
    /// Bring up the instance of a configuration (formatting an empty base
    /// device, recovering one that holds its namespaces) and show its
    /// tenants, budgets, lent spares, stripes and scheduler windows.
    Status {
        /// The configuration file (TOML: the base device and the tenants).
        #[arg(long, short = 'c', value_name = "PATH")]
        config: PathBuf,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: EznsCommand, out: &mut dyn Write) -> Result<()> {
    match cmd {
        EznsCommand::Status { config, json } => {
            let inst = Instance::open_config(&config)
                .with_context(|| format!("bring up {}", config.display()))?;
            let status = inst.status();
            if json {
                let v = serde_json::json!({ "recovery": inst.recovery(), "status": status });
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                let r = inst.recovery();
                if r.formatted {
                    writeln!(
                        out,
                        "formatted: the base device was empty; a fresh journal was written"
                    )?;
                } else {
                    writeln!(
                        out,
                        "recovered: {} zones closed ({} restriped after a torn stripe), {} full, {} emptied; {} physical zones finished, {} unreferenced reset",
                        r.closed, r.restriped, r.full, r.emptied, r.finished, r.orphans
                    )?;
                }
                write!(out, "{status}")?;
            }
            Ok(())
        }
    }
}
