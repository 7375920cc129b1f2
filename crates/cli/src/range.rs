//! Zone arguments and LBA ranges, checked against the namespace before any
//! command is sent: a request the device would refuse part-way (after some
//! output was written, or some blocks were) fails whole, with the limit it
//! breaks and the status the device would have answered.
//!
//! A zone is named explicitly, by index (`--zone N`, the index
//! `report-zones` prints) or by start LBA (`--lba SLBA` / `--zone-start
//! SLBA`); a bare number could be either, so it is refused.

use anyhow::{bail, Result};
use clap::{ArgGroup, Args};
use zns_device::{DeviceInfo, StatusCode};

use crate::num::parse_num;

/// Which zone a zone command acts on (`zns zone ACTION`). The hidden bare
/// argument stays out of the group so that usage lines do not show it.
#[derive(Debug, Args)]
#[group(skip)]
#[command(group(ArgGroup::new("target").required(true).args(["zone", "lba", "all"])))]
pub struct ZoneTarget {
    /// The zone by index, as report-zones prints it (0 is the first zone).
    #[arg(long, value_parser = parse_num, value_name = "N")]
    pub zone: Option<u64>,
    /// The zone by its start LBA, report-zones' SLBA (decimal or 0x hex).
    #[arg(long, visible_alias = "zone-start", value_parser = parse_num, value_name = "SLBA")]
    pub lba: Option<u64>,
    /// Every zone the action applies to (Select All).
    #[arg(long)]
    pub all: bool,
    /// A bare number, refused: it could be an index or an LBA.
    #[arg(hide = true, value_parser = bare_zone, value_name = "ZONE")]
    pub bare: Option<u64>,
}

/// Which zone `zns append` appends to.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct AppendZone {
    /// The zone by index, as report-zones prints it (0 is the first zone).
    #[arg(long, value_parser = parse_num, value_name = "N")]
    pub zone: Option<u64>,
    /// The zone by its start LBA, report-zones' SLBA (decimal or 0x hex).
    #[arg(long, value_parser = parse_num, value_name = "SLBA")]
    pub zone_start: Option<u64>,
}

impl AppendZone {
    /// The zone's start LBA, checked against the namespace.
    pub fn resolve(&self, info: &DeviceInfo) -> Result<u64> {
        zone_start(info, self.zone, self.zone_start, "zone append to zone")
    }
}

impl ZoneTarget {
    /// The zone's start LBA, checked against the namespace; `None` for
    /// `--all`. `what` names the action ("reset").
    pub fn resolve(&self, info: &DeviceInfo, what: &str) -> Result<Option<u64>> {
        if self.all {
            return Ok(None);
        }
        zone_start(info, self.zone, self.lba, &format!("{what} zone")).map(Some)
    }
}

/// Clap's parser for a bare zone argument: always an error saying what to
/// write instead.
fn bare_zone(s: &str) -> Result<u64, String> {
    Err(format!(
        "a bare zone argument is ambiguous: write --zone {s} for the zone with that index (as \
         report-zones numbers them) or --lba {s} for the zone that starts at that LBA"
    ))
}

/// Start LBA of the zone named by `index` or `slba` (exactly one is set).
fn zone_start(info: &DeviceInfo, index: Option<u64>, slba: Option<u64>, what: &str) -> Result<u64> {
    match (index, slba) {
        (Some(_), _) if info.zone_count == 0 => {
            bail!("{what}: the device has no zones (a conventional namespace): nothing was changed")
        }
        (Some(i), _) => info.zone_start(i).ok_or_else(|| {
            anyhow::anyhow!(
                "zone {i} does not exist: the device has {} zones (0 to {})",
                info.zone_count,
                info.zone_count.saturating_sub(1)
            )
        }),
        (None, Some(lba)) => {
            check_range(info, &format!("{what} at LBA {lba:#x}"), lba, 1, "nothing was changed")?;
            // Without zones the device itself answers (a conventional
            // namespace refuses zone commands with its own status).
            if info.zone_size != 0 && lba % info.zone_size != 0 {
                let z = lba / info.zone_size;
                bail!(
                    "{what} at LBA {lba:#x}: not a zone's start LBA (it lies in zone {z}, which \
                     starts at LBA {:#x}; --zone {z} names it): the device would answer {}; \
                     nothing was changed",
                    z * info.zone_size,
                    StatusCode::InvalidField.name()
                );
            }
            Ok(lba)
        }
        (None, None) => bail!("no zone given: use --zone N or --lba SLBA"),
    }
}

/// Checks that `blocks` blocks from `lba` lie inside the zoned namespace.
/// `what` describes the request ("read of 8 blocks at LBA 0x0"), `none`
/// what did not happen ("nothing was read").
pub fn check_range(info: &DeviceInfo, what: &str, lba: u64, blocks: u64, none: &str) -> Result<()> {
    let size = info.blocks();
    let fits = lba.checked_add(blocks).is_some_and(|end| end <= size);
    if !fits {
        let reach = if lba >= size { "starts" } else { "reaches" };
        bail!(
            "{what} {reach} past the end of the namespace ({size} blocks, last LBA {:#x}): the \
             device would answer {}; {none}",
            size.saturating_sub(1),
            StatusCode::LbaOutOfRange.name()
        );
    }
    Ok(())
}

/// Checks a read of `blocks` blocks from `lba`: inside the namespace, and
/// within one zone when the device does not read across zone boundaries.
pub fn check_read(info: &DeviceInfo, lba: u64, blocks: u64) -> Result<()> {
    let what = format!("read of {} at LBA {lba:#x}", crate::io::plural(blocks));
    check_range(info, &what, lba, blocks, "nothing was read")?;
    let (first, last) = (lba / info.zone_size, (lba + blocks - 1) / info.zone_size);
    if first != last && !info.capabilities.read_across_zone_boundaries {
        bail!(
            "{what} crosses from zone {first} into zone {}, and the device does not read across \
             zone boundaries: it would answer {}; nothing was read",
            first + 1,
            StatusCode::ZoneBoundaryError.name()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DeviceInfo {
        zns_device::open("emu:tiny").unwrap().info().clone()
    }

    #[test]
    fn ranges_inside_the_namespace_pass_and_others_name_the_limit() {
        let i = info();
        check_range(&i, "read", 0, 1024, "nothing").unwrap();
        check_range(&i, "read", 1023, 1, "nothing").unwrap();
        let e = check_range(&i, "read of 2 blocks at LBA 0x3ff", 1023, 2, "nothing was read")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "read of 2 blocks at LBA 0x3ff reaches past the end of the namespace (1024 blocks, \
             last LBA 0x3ff): the device would answer LBA Out of Range; nothing was read"
        );
        let e = check_range(&i, "x", 1024, 1, "-").unwrap_err().to_string();
        assert!(e.contains("starts past the end"), "{e}");
        assert!(check_range(&i, "x", u64::MAX, 2, "-").is_err(), "no overflow");
        check_read(&i, 0x3f, 2).unwrap();
    }

    #[test]
    fn zones_by_index_or_start_lba() {
        let i = info();
        assert_eq!(zone_start(&i, Some(3), None, "open zone").unwrap(), 0xc0);
        assert_eq!(zone_start(&i, None, Some(0xc0), "open zone").unwrap(), 0xc0);
        let e = zone_start(&i, Some(16), None, "open zone").unwrap_err().to_string();
        assert_eq!(e, "zone 16 does not exist: the device has 16 zones (0 to 15)");
        let e = zone_start(&i, None, Some(0x41), "open zone").unwrap_err().to_string();
        assert!(e.contains("not a zone's start LBA (it lies in zone 1, which starts"), "{e}");
        assert!(e.contains("Invalid Field in Command"), "{e}");
        let e = zone_start(&i, None, Some(0x400), "reset zone").unwrap_err().to_string();
        assert!(e.starts_with("reset zone at LBA 0x400 starts past the end"), "{e}");
        assert!(bare_zone("3").unwrap_err().contains("--zone 3"));
    }
}
