//! `zns report-zones`: zone reports as an nvme-cli style table, in
//! util-linux blkzone's layout, as JSON or as CSV.

use std::io::Write;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use zns_device::{DeviceInfo, ReportFilter, Zone, ZoneState, ZonedDevice};

use crate::num::parse_num;

/// Zone states to filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    Empty,
    ImplicitOpen,
    ExplicitOpen,
    Closed,
    Full,
    ReadOnly,
    Offline,
}

impl StateArg {
    fn filter(self) -> ReportFilter {
        match self {
            StateArg::Empty => ReportFilter::Empty,
            StateArg::ImplicitOpen => ReportFilter::ImplicitlyOpen,
            StateArg::ExplicitOpen => ReportFilter::ExplicitlyOpen,
            StateArg::Closed => ReportFilter::Closed,
            StateArg::Full => ReportFilter::Full,
            StateArg::ReadOnly => ReportFilter::ReadOnly,
            StateArg::Offline => ReportFilter::Offline,
        }
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// nvme-cli `zns report-zones` style.
    Table,
    /// util-linux `blkzone report` style, in 512-byte sectors.
    Blkzone,
    /// JSON object with every field.
    Json,
    /// CSV with a header line.
    Csv,
}

/// Arguments of `zns report-zones`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// First zone to report, by index (as the table's `Zone:` column).
    #[arg(long, default_value = "0", value_parser = parse_num)]
    pub start_zone: u64,
    /// Most zones to report (default: all).
    #[arg(long, value_parser = parse_num)]
    pub count: Option<u64>,
    /// Only zones in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(dev: &dyn ZonedDevice, args: &ReportArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    info.require_zoned()?;
    let Some(start) = info.zone_start(args.start_zone) else {
        bail!(
            "zone {} does not exist (the device has {} zones, 0..={})",
            args.start_zone,
            info.zone_count,
            info.zone_count.saturating_sub(1)
        );
    };
    let max = args.count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let filter = args.state.map_or(ReportFilter::All, StateArg::filter);
    let mut q = dev.queue(2)?;
    let zones = if max == 0 { Vec::new() } else { q.report_zones(start, filter, max)? };
    let text = match args.format {
        Format::Table => table(&zones),
        Format::Blkzone => blkzone(&zones, info),
        Format::Json => json(&zones, info)?,
        Format::Csv => csv(&zones),
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// The zone type as nvme-cli names it.
fn type_name(_z: &Zone) -> &'static str {
    "SEQWRITE_REQ"
}

/// The raw write pointer as the descriptor carries it (all ones where the
/// zone has none).
fn raw_wp(z: &Zone) -> u64 {
    z.write_pointer.unwrap_or(u64::MAX)
}

/// nvme-cli `zns report-zones` layout, each line led by the zone's index
/// (what `--zone` takes); a zone holding a zone random write area says
/// so after its attributes.
pub fn table(zones: &[Zone]) -> String {
    let mut s = format!("nr_zones: {}\n", zones.len());
    for z in zones {
        s += &format!(
            "Zone: {:<6} SLBA: {:<10} WP: {:<10} Cap: {:<10} State: {:<12} Type: {:<14} Attrs: {:#x}{}\n",
            z.index,
            format!("{:#x}", z.start),
            format!("{:#x}", raw_wp(z)),
            format!("{:#x}", z.capacity),
            z.state.nvme_cli_name(),
            type_name(z),
            z.attributes.0,
            if z.has_zrwa() { " (ZRWA)" } else { "" }
        );
    }
    s
}

/// blkzone's two-letter condition names.
fn blkzone_condition(s: ZoneState) -> &'static str {
    match s {
        ZoneState::Empty => "em",
        ZoneState::ImplicitlyOpen => "oi",
        ZoneState::ExplicitlyOpen => "oe",
        ZoneState::Closed => "cl",
        ZoneState::ReadOnly => "ro",
        ZoneState::Full => "fu",
        ZoneState::Offline => "of",
    }
}

/// util-linux `blkzone report` layout, in 512-byte sectors; the write
/// pointer is relative to the zone start (the zone length for Full zones,
/// 0 where there is none), as the kernel reports it.
pub fn blkzone(zones: &[Zone], info: &DeviceInfo) -> String {
    let spb = u64::from(info.block_size / 512).max(1);
    let mut s = String::new();
    for z in zones {
        let wptr = match (z.write_pointer, z.state) {
            (Some(wp), _) => wp - z.start,
            (None, ZoneState::Full) => z.size,
            (None, _) => 0,
        };
        s += &format!(
            "  start: 0x{:09x}, len 0x{:06x}, cap 0x{:06x}, wptr 0x{:06x} reset:{} non-seq:{}, zcond:{:2}({}) [type: {}({})]\n",
            z.start * spb,
            z.size * spb,
            z.capacity * spb,
            wptr * spb,
            u8::from(z.reset_recommended()),
            0,
            z.state as u8,
            blkzone_condition(z.state),
            z.zone_type as u8,
            "SEQ_WRITE_REQUIRED",
        );
    }
    s
}

#[derive(Serialize)]
struct JsonZone {
    index: u64,
    slba: u64,
    wp: Option<u64>,
    cap: u64,
    size: u64,
    state: &'static str,
    #[serde(rename = "type")]
    zone_type: &'static str,
    attrs: u8,
    /// The zone holds a zone random write area (ZRWAV).
    zrwa: bool,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    device: &'a str,
    block_size: u32,
    nr_zones: usize,
    zones: Vec<JsonZone>,
}

fn json_zone(z: &Zone) -> JsonZone {
    JsonZone {
        index: z.index,
        slba: z.start,
        wp: z.write_pointer,
        cap: z.capacity,
        size: z.size,
        state: z.state.nvme_cli_name(),
        zone_type: type_name(z),
        attrs: z.attributes.0,
        zrwa: z.has_zrwa(),
    }
}

/// JSON: `{"device", "block_size", "nr_zones", "zones": [...]}`, numbers in
/// blocks, `wp` null where the zone has none.
pub fn json(zones: &[Zone], info: &DeviceInfo) -> Result<String> {
    let r = JsonReport {
        device: &info.uri,
        block_size: info.block_size,
        nr_zones: zones.len(),
        zones: zones.iter().map(json_zone).collect(),
    };
    Ok(serde_json::to_string_pretty(&r)? + "\n")
}

/// CSV: `index,slba,wp,cap,size,state,type,attrs`, decimal, `wp` empty
/// where the zone has none.
pub fn csv(zones: &[Zone]) -> String {
    let mut s = String::from("index,slba,wp,cap,size,state,type,attrs\n");
    for z in zones {
        let wp = z.write_pointer.map(|w| w.to_string()).unwrap_or_default();
        s += &format!(
            "{},{},{},{},{},{},{},{}\n",
            z.index,
            z.start,
            wp,
            z.capacity,
            z.size,
            z.state.nvme_cli_name(),
            type_name(z),
            z.attributes.0
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_device::{ZoneAttributes, ZoneType};

    fn zone(index: u64, state: ZoneState, wp: Option<u64>) -> Zone {
        Zone {
            index,
            start: index * 0x80000,
            size: 0x80000,
            capacity: 0x43500,
            write_pointer: wp,
            state,
            zone_type: ZoneType::SequentialWriteRequired,
            attributes: ZoneAttributes(0),
        }
    }

    fn info() -> DeviceInfo {
        zns_device::open("emu:tiny").unwrap().info().clone()
    }

    #[test]
    fn every_state_in_every_format() {
        let zones: Vec<Zone> = [
            (ZoneState::Empty, Some(0)),
            (ZoneState::ImplicitlyOpen, Some(0x80010)),
            (ZoneState::ExplicitlyOpen, Some(0x100000)),
            (ZoneState::Closed, Some(0x180008)),
            (ZoneState::ReadOnly, None),
            (ZoneState::Full, None),
            (ZoneState::Offline, None),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (s, wp))| zone(i as u64, s, wp))
        .collect();
        let t = table(&zones);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "nr_zones: 7");
        assert_eq!(
            lines[1],
            "Zone: 0      SLBA: 0x0        WP: 0x0        Cap: 0x43500    State: EMPTY        Type: SEQWRITE_REQ   Attrs: 0x0"
        );
        assert!(lines[2].contains("State: IMP_OPENED "));
        assert!(lines[6].contains("WP: 0xffffffffffffffff Cap: 0x43500    State: FULL "));
        assert!(lines[7].contains("State: OFFLINE "));
        let b = blkzone(&zones, &info());
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(
            lines[0],
            "  start: 0x000000000, len 0x400000, cap 0x21a800, wptr 0x000000 reset:0 non-seq:0, zcond: 1(em) [type: 2(SEQ_WRITE_REQUIRED)]"
        );
        assert!(lines[1].contains("wptr 0x000080") && lines[1].contains("zcond: 2(oi)"));
        assert!(lines[2].contains("zcond: 3(oe)") && lines[3].contains("zcond: 4(cl)"));
        assert!(lines[4].contains("wptr 0x000000") && lines[4].contains("zcond:13(ro)"));
        assert!(lines[5].contains("wptr 0x400000") && lines[5].contains("zcond:14(fu)"));
        assert!(lines[6].contains("zcond:15(of)"));
        let c = csv(&zones);
        assert!(c.lines().nth(6).unwrap().starts_with("5,2621440,,275712,524288,FULL,"));
        let j: serde_json::Value = serde_json::from_str(&json(&zones, &info()).unwrap()).unwrap();
        assert_eq!(j["zones"][3]["state"], "CLOSED");
        assert!(j["zones"][5]["wp"].is_null());
    }
}
