//! `zns log`: the controller's health log pages in an nvme-cli like
//! `field : value` layout, or as JSON: SMART / Health Information (LID
//! 02h) and the OCP Datacenter NVMe SSD specification's SMART / Health
//! Information Extended (LID C0h), whose media bytes written over the
//! host's bytes written are the device's write amplification, and an
//! endurance group's Endurance Group Information (LID 09h), whose media
//! units over data units written are the group's.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use serde_json::{json, Value};
use zns_device::ZonedDevice;
use zns_spec::log::{EnduranceGroupLog, GetLogPage, LogPageId, OcpSmartLog, SmartLog};

/// `zns log`'s pages.
#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// SMART / Health Information (LID 02h): host commands and data units
    /// (512,000 bytes each) read and written, errors, power cycles.
    Smart {
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
    /// SMART / Health Information Extended (LID C0h, OCP): bytes written
    /// to and read from the media, the device's own writes (garbage
    /// collection) included, and erase counts.
    OcpSmart {
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
    /// Endurance Group Information (LID 09h) of one endurance group (an
    /// FDP device's: `zns fdp status` names it): data units the hosts
    /// wrote and media units the flash took, their ratio the group's write
    /// amplification, and its capacity.
    Endurance {
        /// The endurance group (ENDGID).
        #[arg(long, default_value_t = 1)]
        group: u16,
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(dev: &dyn ZonedDevice, cmd: &LogCommand, out: &mut dyn Write) -> Result<()> {
    let text = match cmd {
        LogCommand::Smart { json } => {
            let s = SmartLog::from_bytes(&page(dev, LogPageId::SmartHealth)?);
            if *json {
                pretty(&smart_json(&s))?
            } else {
                smart_text(&s)
            }
        }
        LogCommand::OcpSmart { json } => {
            let l = OcpSmartLog::from_bytes(&page(dev, LogPageId::OcpSmartExtended)?);
            if !l.guid_matches() {
                bail!(
                    "log page C0h has GUID {:032X}, not the OCP SMART / Health Information \
                     Extended page's {:032X}: the device means something else by it",
                    l.guid,
                    OcpSmartLog::GUID
                );
            }
            if *json {
                pretty(&ocp_json(&l))?
            } else {
                ocp_text(&l)
            }
        }
        LogCommand::Endurance { group, json } => {
            let l = EnduranceGroupLog::from_bytes(&group_page(dev, *group)?);
            if *json {
                pretty(&endurance_json(&l))?
            } else {
                endurance_text(&l, *group)
            }
        }
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// The 512 bytes of endurance group `group`'s Endurance Group Information.
fn group_page(dev: &dyn ZonedDevice, group: u16) -> Result<[u8; 512]> {
    let lid = LogPageId::EnduranceGroupInformation;
    let bytes = dev
        .log_page(zns_spec::fdp::get_log_page(lid, group, 128))
        .with_context(|| format!("endurance group {group} of {}", dev.info().uri))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| anyhow::anyhow!("log page 0x09: {} bytes, not 512", bytes.len()))
}

/// The 512 bytes of controller-wide page `lid`.
fn page(dev: &dyn ZonedDevice, lid: LogPageId) -> Result<[u8; 512]> {
    let bytes = dev
        .log_page(GetLogPage::new(lid, 0xFFFF_FFFF, 128))
        .with_context(|| format!("log page {:#04X} of {}", lid as u8, dev.info().uri))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| anyhow::anyhow!("log page {:#04X}: {} bytes, not 512", lid as u8, bytes.len()))
}

fn pretty(v: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// A 128-bit counter for JSON, which holds 64 bits.
fn n(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn kv(s: &mut String, k: &str, v: String) {
    let _ = writeln!(s, "{k:<36} : {v}");
}

/// Bytes, with MiB beside them.
fn bytes(v: u128) -> String {
    format!("{v} ({:.1} MiB)", v as f64 / (1u64 << 20) as f64)
}

fn smart_text(s: &SmartLog) -> String {
    let mut t = String::from("SMART / Health Information (LID 02h):\n");
    kv(&mut t, "critical_warning", format!("{:#x}", s.critical_warning));
    kv(&mut t, "temperature", format!("{} K", s.composite_temperature));
    kv(&mut t, "available_spare", format!("{} %", s.available_spare));
    kv(&mut t, "available_spare_threshold", format!("{} %", s.available_spare_threshold));
    kv(&mut t, "percentage_used", format!("{} %", s.percentage_used));
    let units = |u: u128| format!("{u} ({:.1} MB)", u as f64 * 0.512);
    kv(&mut t, "data_units_read", units(s.data_units_read));
    kv(&mut t, "data_units_written", units(s.data_units_written));
    kv(&mut t, "host_read_commands", s.host_read_commands.to_string());
    kv(&mut t, "host_write_commands", s.host_write_commands.to_string());
    kv(&mut t, "controller_busy_time", s.controller_busy_time.to_string());
    kv(&mut t, "power_cycles", s.power_cycles.to_string());
    kv(&mut t, "power_on_hours", s.power_on_hours.to_string());
    kv(&mut t, "unsafe_shutdowns", s.unsafe_shutdowns.to_string());
    kv(&mut t, "media_errors", s.media_errors.to_string());
    kv(&mut t, "num_err_log_entries", s.error_log_entries.to_string());
    t
}

/// nvme-cli's `smart-log -o json` names.
fn smart_json(s: &SmartLog) -> Value {
    json!({
        "critical_warning": s.critical_warning,
        "temperature": s.composite_temperature,
        "avail_spare": s.available_spare,
        "spare_thresh": s.available_spare_threshold,
        "percent_used": s.percentage_used,
        "data_units_read": n(s.data_units_read),
        "data_units_written": n(s.data_units_written),
        "host_read_commands": n(s.host_read_commands),
        "host_write_commands": n(s.host_write_commands),
        "controller_busy_time": n(s.controller_busy_time),
        "power_cycles": n(s.power_cycles),
        "power_on_hours": n(s.power_on_hours),
        "unsafe_shutdowns": n(s.unsafe_shutdowns),
        "media_errors": n(s.media_errors),
        "num_err_log_entries": n(s.error_log_entries),
    })
}

fn ocp_text(l: &OcpSmartLog) -> String {
    let mut t = String::from("SMART / Health Information Extended (LID C0h, OCP):\n");
    kv(&mut t, "Physical media units written", bytes(l.media_bytes_written));
    kv(&mut t, "Physical media units read", bytes(l.media_bytes_read));
    kv(&mut t, "Max user data erase counts", l.max_erase_count.to_string());
    kv(&mut t, "Min user data erase counts", l.min_erase_count.to_string());
    let (major, minor, point, errata) = l.dssd_version;
    kv(&mut t, "DSSD specification version", format!("{major}.{minor}.{point} errata {errata}"));
    kv(&mut t, "Log page version", l.version.to_string());
    kv(&mut t, "Log page GUID", format!("0x{:032X}", l.guid));
    t
}

fn endurance_text(l: &EnduranceGroupLog, group: u16) -> String {
    let mut t = format!("Endurance Group Information (LID 09h), group {group}:\n");
    kv(&mut t, "critical_warning", format!("{:#x}", l.critical_warning));
    kv(&mut t, "available_spare", format!("{} %", l.available_spare));
    kv(&mut t, "available_spare_threshold", format!("{} %", l.available_spare_threshold));
    kv(&mut t, "percentage_used", format!("{} %", l.percentage_used));
    let units = |u: u128| format!("{u} ({:.1} MB)", u as f64 * 0.512);
    kv(&mut t, "endurance_estimate", units(l.endurance_estimate));
    kv(&mut t, "data_units_read", units(l.data_units_read));
    kv(&mut t, "data_units_written", units(l.data_units_written));
    kv(&mut t, "media_units_written", units(l.media_units_written));
    let waf = l.write_amplification().map_or("- (nothing written)".into(), |w| format!("{w:.3}"));
    kv(&mut t, "write_amplification", waf);
    kv(&mut t, "host_read_commands", l.host_read_commands.to_string());
    kv(&mut t, "host_write_commands", l.host_write_commands.to_string());
    kv(&mut t, "media_errors", l.media_errors.to_string());
    kv(&mut t, "num_err_log_entries", l.error_log_entries.to_string());
    kv(&mut t, "total_capacity", bytes(l.total_capacity));
    kv(&mut t, "unallocated_capacity", bytes(l.unallocated_capacity));
    t
}

/// nvme-cli's `endurance-log -o json` names, and the ratio.
fn endurance_json(l: &EnduranceGroupLog) -> Value {
    json!({
        "critical_warning": l.critical_warning,
        "avl_spare": l.available_spare,
        "avl_spare_threshold": l.available_spare_threshold,
        "percent_used": l.percentage_used,
        "endurance_estimate": n(l.endurance_estimate),
        "data_units_read": n(l.data_units_read),
        "data_units_written": n(l.data_units_written),
        "media_units_written": n(l.media_units_written),
        "write_amplification": l.write_amplification(),
        "host_read_cmds": n(l.host_read_commands),
        "host_write_cmds": n(l.host_write_commands),
        "media_data_integrity_err": n(l.media_errors),
        "num_err_info_log_entries": n(l.error_log_entries),
        "total_end_grp_capacity": n(l.total_capacity),
        "unalloc_end_grp_capacity": n(l.unallocated_capacity),
    })
}

/// The page's counters; the media units are bytes.
fn ocp_json(l: &OcpSmartLog) -> Value {
    json!({
        "physical_media_units_written": n(l.media_bytes_written),
        "physical_media_units_read": n(l.media_bytes_read),
        "max_user_data_erase_count": l.max_erase_count,
        "min_user_data_erase_count": l.min_erase_count,
        "log_page_version": l.version,
        "log_page_guid": format!("0x{:032X}", l.guid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extended_page_shows_bytes_and_its_guid() {
        let l = OcpSmartLog {
            media_bytes_written: 3 << 20,
            media_bytes_read: 1 << 20,
            max_erase_count: 4,
            min_erase_count: 1,
            ..OcpSmartLog::new()
        };
        let t = ocp_text(&l);
        assert!(t.contains("Physical media units written         : 3145728 (3.0 MiB)"), "{t}");
        assert!(
            t.contains("Log page GUID                        : 0xAFD514C97C6F4F9CA4F2BFEA2810AFC5")
        );
        let j = ocp_json(&l);
        assert_eq!(j["physical_media_units_written"], 3 << 20);
        assert_eq!(
            (j["max_user_data_erase_count"].as_u64(), j["log_page_version"].as_u64()),
            (Some(4), Some(3))
        );
        assert_eq!(n(u128::MAX), u64::MAX);
    }
}
