//! `zns zone open --zrwa` and `zns zone commit`: zone random write areas.
//!
//! A zone opened with a ZRWA takes writes anywhere in the window at its
//! write pointer (`zns write --lba`), overwrites included; `zns zone
//! commit` moves the write pointer over what the window holds. A ZRWA
//! lasts while the device is powered: an emulated device of one `zns`
//! command ends with the command, so use a served device (`zns serve`
//! and a `tcp:` URI) or the library to keep one across commands.

use std::io::Write;

use anyhow::{bail, Result};
use clap::{ArgGroup, Args};
use zns_device::{DeviceInfo, StatusCode, ZoneQueue, ZonedDevice};

use crate::num::parse_num;
use crate::range::check_range;

/// Which blocks `zns zone commit` commits.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("end").required(true).args(["lba", "zone"])))]
pub struct CommitArgs {
    /// The last LBA to commit: the zone's write pointer moves past it.
    #[arg(long, value_parser = parse_num, value_name = "LBA", conflicts_with = "blocks")]
    pub lba: Option<u64>,
    /// The zone by index (as report-zones prints it), with --blocks.
    #[arg(long, value_parser = parse_num, value_name = "N", requires = "blocks")]
    pub zone: Option<u64>,
    /// Blocks to commit from the zone's write pointer (with --zone).
    #[arg(long, value_parser = parse_num, value_name = "BLOCKS")]
    pub blocks: Option<u64>,
}

/// Refuses a ZRWA command on a device without ZRWAs, naming the status
/// the device would answer.
fn require_zrwa(info: &DeviceInfo, what: &str) -> Result<()> {
    info.require_zoned()?;
    if info.capabilities.zrwa.is_none() {
        bail!(
            "{what}: the device has no zone random write areas: the device would answer {}; \
             nothing was changed",
            StatusCode::InvalidZoneOperationRequest
        );
    }
    Ok(())
}

/// One line on the zone holding `lba`: index, start, state, write pointer
/// and whether it still holds a ZRWA.
fn describe(q: &mut dyn ZoneQueue, lba: u64, out: &mut dyn Write) -> Result<()> {
    let z = q.zone(lba)?;
    let wp = z.write_pointer.map_or("none".into(), |w| format!("{w:#x}"));
    let zrwa = if z.has_zrwa() { ", with a ZRWA" } else { "" };
    writeln!(out, "zone {} at LBA {:#x}: {}{zrwa}, write pointer {wp}", z.index, z.start, z.state)?;
    Ok(())
}

/// `zns zone open --zrwa`: Open Zone with ZRWA Allocate on the zone at
/// `zslba`.
pub fn open(dev: &dyn ZonedDevice, zslba: u64, out: &mut dyn Write) -> Result<()> {
    require_zrwa(dev.info(), &format!("open zone at LBA {zslba:#x} with a ZRWA"))?;
    let mut q = dev.queue(2)?;
    q.open_zrwa(zslba)?;
    describe(q.as_mut(), zslba, out)
}

/// `zns zone commit`: Flush Explicit ZRWA Range up to `--lba`, or of
/// `--blocks` from the write pointer of `--zone`.
pub fn commit(dev: &dyn ZonedDevice, args: &CommitArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    require_zrwa(info, "ZRWA commit")?;
    let mut q = dev.queue(2)?;
    let last = match (args.lba, args.zone, args.blocks) {
        (Some(lba), _, _) => {
            check_range(
                info,
                &format!("ZRWA commit up to LBA {lba:#x}"),
                lba,
                1,
                "nothing was changed",
            )?;
            lba
        }
        (None, Some(i), Some(blocks)) => {
            let Some(start) = info.zone_start(i) else {
                bail!(
                    "zone {i} does not exist: the device has {} zones (0 to {})",
                    info.zone_count,
                    info.zone_count.saturating_sub(1)
                );
            };
            if blocks == 0 {
                bail!("--blocks 0: a commit takes at least one block; nothing was changed");
            }
            let z = q.zone(start)?;
            let Some(wp) = z.write_pointer else {
                bail!("zone {i} is {} and has no write pointer: nothing was changed", z.state);
            };
            wp + blocks - 1
        }
        _ => bail!("name the last LBA to commit (--lba) or a zone and a count (--zone, --blocks)"),
    };
    q.commit_zrwa(last)?;
    describe(q.as_mut(), last, out)
}
