//! `zns write-zeroes` and `zns copy`: commands that write blocks without
//! moving host data. Their ranges and the device's limits are checked
//! before the first command (see [`crate::range`]).

use std::io::Write;

use anyhow::{bail, Result};
use clap::Args;
use zns_device::{StatusCode, ZonedDevice};

use crate::io::plural;
use crate::num::parse_num;
use crate::range::check_range;

/// Blocks one Write Zeroes command covers (NLB is 16 bits, 0's based).
const ZEROES_PER_COMMAND: u64 = 65536;

/// Arguments of `zns write-zeroes`.
#[derive(Debug, Args)]
pub struct WriteZeroesArgs {
    /// First LBA: the write pointer of the zone to write.
    #[arg(long, value_parser = parse_num)]
    pub lba: u64,
    /// Blocks to write as zeroes.
    #[arg(long, value_parser = parse_num)]
    pub blocks: u64,
}

/// Arguments of `zns copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// A source range, LBA:BLOCKS (decimal or 0x hex); repeat for several,
    /// copied in the order given.
    #[arg(long = "source", value_name = "LBA:BLOCKS", required = true,
          value_parser = parse_range)]
    pub sources: Vec<(u64, u64)>,
    /// Destination LBA: the write pointer of the zone to write.
    #[arg(long, value_parser = parse_num, value_name = "LBA")]
    pub dest: u64,
}

/// Parses `LBA:BLOCKS`, e.g. `0x400:8`.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let Some((lba, blocks)) = s.split_once(':') else {
        return Err(format!("{s:?} is not LBA:BLOCKS (e.g. 0x400:8)"));
    };
    let blocks = parse_num(blocks)?;
    if blocks == 0 {
        return Err(format!("{s:?}: a range of 0 blocks"));
    }
    Ok((parse_num(lba)?, blocks))
}

pub fn write_zeroes(
    dev: &dyn ZonedDevice,
    args: &WriteZeroesArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let info = dev.info();
    if args.blocks == 0 {
        bail!("--blocks must be at least 1");
    }
    let what = format!("write zeroes of {} at LBA {:#x}", plural(args.blocks), args.lba);
    check_range(info, &what, args.lba, args.blocks, "nothing was written")?;
    if !info.capabilities.write_zeroes {
        bail!("{what}: the device does not support Write Zeroes; nothing was written");
    }
    let mut q = dev.queue(2)?;
    if args.blocks > ZEROES_PER_COMMAND {
        // Several commands: refused up front unless all of them fit.
        let z = q.zone(args.lba)?;
        if args.lba + args.blocks > z.end() {
            bail!(
                "{what} does not fit: zone {} (LBA {:#x}) takes blocks up to LBA {:#x}; nothing \
                 was written",
                z.index,
                z.start,
                z.end()
            );
        }
    }
    q.write_zeroes(args.lba, args.blocks)?;
    writeln!(out, "wrote zeroes to {} at LBA {:#x}", plural(args.blocks), args.lba)?;
    Ok(())
}

pub fn copy(dev: &dyn ZonedDevice, args: &CopyArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    let total: u64 = args.sources.iter().map(|(_, n)| n).sum();
    let what = format!("copy of {} to LBA {:#x}", plural(total), args.dest);
    for (lba, n) in &args.sources {
        let src = format!("{what}: source {} at LBA {lba:#x}", plural(*n));
        check_range(info, &src, *lba, *n, "nothing was copied")?;
    }
    check_range(info, &format!("{what}: the destination"), args.dest, total, "nothing was copied")?;
    let Some(limits) = info.capabilities.copy else {
        bail!("{what}: the device does not support Copy; nothing was copied");
    };
    let too_big = |limit: String| -> Result<()> {
        bail!(
            "{what}: {limit}: the device would answer {}; nothing was copied",
            StatusCode::CommandSizeLimitExceeded.name()
        )
    };
    if args.sources.len() > limits.max_ranges as usize {
        too_big(format!(
            "{} source ranges, but the device copies at most {} per command (MSRC)",
            args.sources.len(),
            limits.max_ranges
        ))?;
    }
    if let Some((lba, n)) =
        args.sources.iter().find(|(_, n)| *n > u64::from(limits.max_range_blocks))
    {
        too_big(format!(
            "the source at LBA {lba:#x} has {n} blocks, but one range holds at most {} (MSSRL)",
            limits.max_range_blocks
        ))?;
    }
    if total > u64::from(limits.max_blocks) {
        too_big(format!(
            "the device copies at most {} blocks per command (MCL)",
            limits.max_blocks
        ))?;
    }
    let ranges: Vec<(u64, u32)> = args.sources.iter().map(|&(l, n)| (l, n as u32)).collect();
    let mut q = dev.queue(2)?;
    q.copy(&ranges, args.dest)?;
    writeln!(
        out,
        "copied {} from {} to LBA {:#x}",
        plural(total),
        if ranges.len() == 1 { "1 range".to_string() } else { format!("{} ranges", ranges.len()) },
        args.dest
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_in_decimal_and_hex() {
        assert_eq!(parse_range("0x400:8"), Ok((0x400, 8)));
        assert_eq!(parse_range("16:0x10"), Ok((16, 16)));
        assert!(parse_range("16").unwrap_err().contains("LBA:BLOCKS"));
        assert!(parse_range("16:0").unwrap_err().contains("0 blocks"));
        assert!(parse_range("x:1").is_err());
    }
}
