//! `zns identify`: controller, namespace and ZNS identification in an
//! nvme-cli like `field : value` layout, or as JSON.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use zns_device::{DeviceInfo, IdentifyData, ZonedDevice};
use zns_emulator::conv::FtlStats;
use zns_spec::identify::{IdentifyController, Oncs, ZnsNamespace};

use crate::num::bytes_h;

pub fn run(dev: &dyn ZonedDevice, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    let ftl = firmware(dev);
    let text = if as_json {
        serde_json::to_string_pretty(&to_json(info, ftl.as_ref())?)? + "\n"
    } else {
        human(info, ftl.as_ref())
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// The firmware counters of an emulated conventional twin's namespace.
fn firmware(dev: &dyn ZonedDevice) -> Option<FtlStats> {
    let nsid = dev.info().nsid;
    let ns = dev.emulator()?.namespaces().iter().find(|n| n.nsid() == nsid)?;
    ns.firmware().map(|f| f.stats())
}

fn oncs_names(o: Oncs) -> Vec<&'static str> {
    [
        (Oncs::COMPARE, "Compare"),
        (Oncs::WRITE_UNCORRECTABLE, "Write Uncorrectable"),
        (Oncs::DATASET_MANAGEMENT, "Dataset Management"),
        (Oncs::WRITE_ZEROES, "Write Zeroes"),
        (Oncs::SAVE_SELECT_FEATURES, "Save/Select in Features"),
        (Oncs::RESERVATIONS, "Reservations"),
        (Oncs::TIMESTAMP, "Timestamp"),
        (Oncs::VERIFY, "Verify"),
        (Oncs::COPY, "Copy"),
    ]
    .into_iter()
    .filter(|(bit, _)| o.has(*bit))
    .map(|(_, n)| n)
    .collect()
}

fn limit(v: Option<u32>) -> String {
    match v {
        Some(n) => format!("{} ({n} zones)", n - 1),
        None => "0xffffffff (no limit)".to_string(),
    }
}

fn kv(s: &mut String, k: &str, v: String) {
    let _ = writeln!(s, "{k:<9} : {v}");
}

fn kv13(s: &mut String, k: &str, v: String) {
    let _ = writeln!(s, "{k:<13} : {v}");
}

fn human(info: &DeviceInfo, ftl: Option<&FtlStats>) -> String {
    let mut s = String::new();
    kv(&mut s, "device", info.uri.clone());
    kv(&mut s, "backend", format!("{} ({})", info.backend, info.transport));
    let Some(id) = &info.identify else {
        kv(&mut s, "model", info.model.clone());
        kv(&mut s, "serial", info.serial.clone());
        return s + &geometry(info, ftl);
    };
    let IdentifyData { version, controller: c, zns_controller, namespace: n, zns_namespace: z } =
        id;
    let _ = writeln!(s, "\nNVMe Identify Controller:");
    kv(&mut s, "vid", format!("{:#06x}", c.vid));
    kv(&mut s, "ssvid", format!("{:#06x}", c.ssvid));
    kv(&mut s, "sn", c.serial_number.trim().to_string());
    kv(&mut s, "mn", c.model_number.trim().to_string());
    kv(&mut s, "fr", c.firmware_revision.trim().to_string());
    kv(&mut s, "ver", format!("{:#x} ({version})", c.ver.0));
    kv(&mut s, "cntlid", format!("{:#x}", c.cntlid));
    kv(
        &mut s,
        "mdts",
        match info.mdts_bytes {
            b if c.mdts == 0 => format!("0 (no limit; driver uses {})", bytes_h(b as u64)),
            b => format!("{} ({})", c.mdts, bytes_h(b as u64)),
        },
    );
    kv(&mut s, "ctratt", format!("{:#x}{}", c.ctratt, ctratt_text(c.ctratt)));
    kv(&mut s, "endgidmax", format!("{}", c.endgidmax));
    kv(&mut s, "cntrltype", format!("{}", c.cntrltype));
    kv(&mut s, "oacs", format!("{:#x}", c.oacs));
    kv(&mut s, "sqes", format!("{:#x}", c.sqes));
    kv(&mut s, "cqes", format!("{:#x}", c.cqes));
    kv(&mut s, "maxcmd", format!("{}", c.maxcmd));
    kv(&mut s, "nn", format!("{}", c.nn));
    kv(&mut s, "oncs", format!("{:#x} ({})", c.oncs.0, oncs_names(c.oncs).join(", ")));
    kv(
        &mut s,
        "vwc",
        format!(
            "{:#x} ({})",
            c.vwc,
            if c.vwc & IdentifyController::VWC_PRESENT != 0 { "present" } else { "none" }
        ),
    );
    kv(&mut s, "ocfs", format!("{:#x}", c.ocfs));
    kv(&mut s, "subnqn", c.subnqn.clone());

    if info.zoned {
        let _ = writeln!(s, "\nZNS Identify Controller:");
        let _ = writeln!(
            s,
            "{:<9} : {} ({})",
            "zasl",
            zns_controller.zasl,
            bytes_h(info.zasl_bytes as u64)
        );
    }

    let _ = writeln!(s, "\nNVMe Identify Namespace {}:", info.nsid);
    kv(&mut s, "nsze", format!("{:#x}", n.nsze));
    kv(&mut s, "ncap", format!("{:#x}", n.ncap));
    kv(&mut s, "nuse", format!("{:#x}", n.nuse));
    kv(&mut s, "nsfeat", format!("{:#x}", n.nsfeat));
    kv(&mut s, "nlbaf", format!("{}", n.nlbaf));
    kv(&mut s, "flbas", format!("{:#x}", n.flbas));
    kv(&mut s, "mssrl", format!("{}", n.mssrl));
    kv(&mut s, "mcl", format!("{}", n.mcl));
    kv(&mut s, "msrc", format!("{}", n.msrc));
    kv(&mut s, "endgid", format!("{}", n.endgid));
    kv(&mut s, "nguid", hex(&n.nguid));
    kv(&mut s, "eui64", hex(&n.eui64));
    for (i, f) in n.lbaf.iter().enumerate().take(n.nlbaf as usize + 1) {
        let used = if i == n.format_index() as usize { " (in use)" } else { "" };
        kv(
            &mut s,
            &format!("lbaf {i:>2}"),
            format!(
                "ms:{:<3} lbads:{:<2} rp:{:#x}{used}",
                f.metadata_size, f.lba_data_size_log2, f.relative_performance
            ),
        );
    }

    if !info.zoned {
        return s + "\n" + &geometry(info, ftl);
    }
    let _ = writeln!(s, "\nZNS Identify Namespace {}:", info.nsid);
    kv(&mut s, "zoc", format!("{:#x}", z.zoc));
    kv(&mut s, "ozcs", format!("{:#x}{}", z.ozcs, ozcs_text(z)));
    kv(&mut s, "mar", limit(z.max_active));
    kv(&mut s, "mor", limit(z.max_open));
    kv(&mut s, "rrl", format!("{}", z.rrl));
    kv(&mut s, "frl", format!("{}", z.frl));
    kv(&mut s, "numzrwa", format!("{:#x}", z.numzrwa));
    kv(&mut s, "zrwafg", format!("{}", z.zrwafg));
    kv(&mut s, "zrwasz", format!("{}", z.zrwasz));
    let explicit = if z.zrwa_explicit_flush() { " (explicit flush)" } else { "" };
    kv(&mut s, "zrwacap", format!("{:#x}{explicit}", z.zrwacap));
    for (i, e) in z.lbafe.iter().enumerate().take(n.nlbaf as usize + 1) {
        let used = if i == n.format_index() as usize { " (in use)" } else { "" };
        kv(
            &mut s,
            &format!("lbafe {i:>2}"),
            format!("zsze:{:#x} zdes:{}{used}", e.zone_size, e.zdes),
        );
    }
    s + "\n" + &geometry(info, ftl)
}

/// The CTRATT bits of endurance groups and Flexible Data Placement, named.
fn ctratt_text(ctratt: u32) -> String {
    let v: Vec<&str> = [
        (IdentifyController::CTRATT_ENDURANCE_GROUPS, "endurance groups"),
        (IdentifyController::CTRATT_FDPS, "flexible data placement"),
    ]
    .into_iter()
    .filter(|(bit, _)| ctratt & bit != 0)
    .map(|(_, n)| n)
    .collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.join(", "))
    }
}

/// The namespace's Flexible Data Placement, for the summary.
fn fdp_text(info: &DeviceInfo) -> String {
    match &info.fdp {
        Some(f) => {
            "\nFlexible Data Placement:\n".to_string()
                + &crate::fdp::config_text(f, u64::from(info.block_size))
        }
        None => String::new(),
    }
}

fn ozcs_text(z: &ZnsNamespace) -> String {
    let mut v = Vec::new();
    if z.read_across_boundaries() {
        v.push("read across zone boundaries");
    }
    if z.zrwa_supported() {
        v.push("zone random write area");
    }
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.join(", "))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A conventional namespace: its size, no zones, and the firmware of an
/// emulated conventional twin.
fn conventional(info: &DeviceInfo, ftl: Option<&FtlStats>) -> String {
    let mut s = String::from("Conventional namespace (NVM command set):\n");
    let bs = u64::from(info.block_size);
    kv13(&mut s, "nsid", info.nsid.to_string());
    kv13(
        &mut s,
        "block size",
        format!("{} bytes (+{} metadata)", info.block_size, info.metadata_size),
    );
    kv13(
        &mut s,
        "capacity",
        format!("{:#x} blocks ({})", info.blocks(), bytes_h(info.blocks() * bs)),
    );
    kv13(&mut s, "zones", "none (not a zoned namespace)".into());
    kv13(&mut s, "max transfer", bytes_h(info.mdts_bytes as u64));
    let c = &info.capabilities;
    kv13(&mut s, "write zeroes", if c.write_zeroes { "yes" } else { "no" }.into());
    kv13(&mut s, "write cache", if c.volatile_write_cache { "volatile" } else { "none" }.into());
    if let Some(f) = ftl {
        let _ = writeln!(s, "\nDevice-side FTL (emulated firmware):");
        kv13(
            &mut s,
            "flash",
            format!(
                "{} segments of {} blocks ({})",
                f.segments,
                f.segment_blocks,
                bytes_h(f.physical_blocks * bs)
            ),
        );
        kv13(
            &mut s,
            "over-prov.",
            format!("{:.2} % (spare / exposed)", f.over_provisioning() * 100.0),
        );
        kv13(
            &mut s,
            "usable / raw",
            format!("{:.4}", f.exposed_blocks as f64 / f.physical_blocks as f64),
        );
        kv13(&mut s, "victims", format!("{} by {}", f.victims, f.policy));
        let waf = if f.host_blocks == 0 {
            "- (nothing written)".into()
        } else {
            format!("{:.3}", f.waf())
        };
        kv13(&mut s, "device WAF", waf);
    }
    s
}

fn geometry(info: &DeviceInfo, ftl: Option<&FtlStats>) -> String {
    if !info.zoned {
        return conventional(info, ftl) + &fdp_text(info);
    }
    let mut s = String::from("Zoned namespace:\n");
    let bs = u64::from(info.block_size);
    kv13(&mut s, "nsid", info.nsid.to_string());
    kv13(
        &mut s,
        "block size",
        format!("{} bytes (+{} metadata)", info.block_size, info.metadata_size),
    );
    kv13(&mut s, "zones", info.zone_count.to_string());
    kv13(
        &mut s,
        "zone size",
        format!("{:#x} blocks ({})", info.zone_size, bytes_h(info.zone_size * bs)),
    );
    kv13(
        &mut s,
        "zone capacity",
        format!("{:#x} blocks ({})", info.zone_capacity, bytes_h(info.zone_capacity * bs)),
    );
    kv13(&mut s, "capacity", bytes_h(info.zone_count * info.zone_capacity * bs));
    kv13(&mut s, "max open", info.max_open.map_or("no limit".into(), |n| n.to_string()));
    kv13(&mut s, "max active", info.max_active.map_or("no limit".into(), |n| n.to_string()));
    kv13(&mut s, "max transfer", bytes_h(info.mdts_bytes as u64));
    kv13(&mut s, "append limit", bytes_h(info.zasl_bytes as u64));
    let c = &info.capabilities;
    kv13(
        &mut s,
        "copy",
        c.copy.map_or("no".into(), |l| {
            format!(
                "yes ({} ranges, {} blocks a range, {} blocks a command)",
                l.max_ranges, l.max_range_blocks, l.max_blocks
            )
        }),
    );
    kv13(&mut s, "extensions", format!("{} bytes", c.extension_bytes));
    kv13(
        &mut s,
        "zrwa",
        c.zrwa.map_or("no".into(), |w| {
            format!(
                "yes ({} blocks a window, committed in {} blocks, {} zones at once, {})",
                w.size,
                w.flush_granularity,
                w.resources,
                if w.explicit_flush { "explicit commits" } else { "implicit commits only" }
            )
        }),
    );
    kv13(&mut s, "write cache", if c.volatile_write_cache { "volatile" } else { "none" }.into());
    if let Some(cn) = &info.conventional {
        kv13(
            &mut s,
            "conventional",
            format!(
                "namespace {}: {} blocks of {} bytes ({})",
                cn.nsid,
                cn.blocks,
                cn.block_size,
                bytes_h(cn.blocks * u64::from(cn.block_size))
            ),
        );
    }
    s + &fdp_text(info)
}

fn to_json(info: &DeviceInfo, ftl: Option<&FtlStats>) -> Result<Value> {
    let mut v = serde_json::to_value(info).context("device info as JSON")?;
    if let Some(f) = ftl {
        v["ftl"] = json!({
            "exposed_blocks": f.exposed_blocks,
            "physical_blocks": f.physical_blocks,
            "segment_blocks": f.segment_blocks,
            "segments": f.segments,
            "over_provisioning": f.over_provisioning(),
            "policy": f.policy.name(),
            "host_blocks": f.host_blocks,
            "gc_blocks": f.gc_blocks,
            "victims": f.victims,
            "waf": f.waf(),
        });
    }
    if let Some(id) = &info.identify {
        let c = &id.controller;
        let n = &id.namespace;
        let z = &id.zns_namespace;
        v["identify"] = json!({
            "version": id.version.to_string(),
            "controller": {
                "vid": c.vid, "ssvid": c.ssvid,
                "sn": c.serial_number.trim(), "mn": c.model_number.trim(),
                "fr": c.firmware_revision.trim(),
                "ver": c.ver.0, "cntlid": c.cntlid, "mdts": c.mdts,
                "ctratt": c.ctratt, "endgidmax": c.endgidmax,
                "cntrltype": c.cntrltype, "oacs": c.oacs,
                "sqes": c.sqes, "cqes": c.cqes, "maxcmd": c.maxcmd, "nn": c.nn,
                "oncs": c.oncs.0, "vwc": c.vwc, "ocfs": c.ocfs, "subnqn": c.subnqn,
            },
            "zns_controller": if info.zoned { json!({ "zasl": id.zns_controller.zasl }) } else { Value::Null },
            "namespace": {
                "nsid": info.nsid, "endgid": n.endgid,
                "nsze": n.nsze, "ncap": n.ncap, "nuse": n.nuse, "nsfeat": n.nsfeat,
                "nlbaf": n.nlbaf, "flbas": n.flbas,
                "mssrl": n.mssrl, "mcl": n.mcl, "msrc": n.msrc,
                "nguid": hex(&n.nguid), "eui64": hex(&n.eui64),
                "lbafs": n.lbaf.iter().take(n.nlbaf as usize + 1).map(|f| json!({
                    "ms": f.metadata_size, "lbads": f.lba_data_size_log2,
                    "rp": f.relative_performance,
                })).collect::<Vec<_>>(),
            },
            "zns_namespace": if !info.zoned { Value::Null } else { json!({
                "zoc": z.zoc, "ozcs": z.ozcs,
                "mar": z.max_active.map_or(u32::MAX, |m| m - 1),
                "mor": z.max_open.map_or(u32::MAX, |m| m - 1),
                "rrl": z.rrl, "frl": z.frl,
                "numzrwa": z.numzrwa, "zrwafg": z.zrwafg, "zrwasz": z.zrwasz,
                "zrwacap": z.zrwacap,
                "lbafe": z.lbafe.iter().take(n.nlbaf as usize + 1).map(|e| json!({
                    "zsze": e.zone_size, "zdes": e.zdes,
                })).collect::<Vec<_>>(),
            }) },
        });
    }
    Ok(v)
}
