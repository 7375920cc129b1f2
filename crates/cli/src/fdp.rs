//! `zns fdp`: Flexible Data Placement of the device's namespace: its
//! configuration, each reclaim unit handle's current reclaim unit (I/O
//! Management Receive), the FDP statistics and the write amplification
//! they give (log page 22h), reclaim unit handle updates (I/O Management
//! Send) and the FDP events (log page 23h, feature 1Eh).

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use serde_json::{json, Value};
use zns_device::{FdpInfo, RuhStatus, ZonedDevice};
use zns_spec::fdp::{
    get_log_page, FdpEvent, FdpEventType, FdpEventsFeature, FdpEventsLog, FdpStatsLog,
    MediaReallocated, PlacementId, SupportedFdpEvent, FDP_EVENTS_LSP_HOST,
};
use zns_spec::log::LogPageId;

use crate::num::bytes_h;

/// `zns fdp`'s commands.
#[derive(Debug, Subcommand)]
pub enum FdpCommand {
    /// The configuration, each reclaim unit handle with the blocks its
    /// current reclaim unit still takes, the FDP statistics (log page 22h)
    /// and the write amplification they give.
    Status {
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reclaim Unit Handle Update: each placement handle named leaves its
    /// current reclaim unit and writes a fresh one next.
    Update {
        /// A placement handle (reclaim group 0); repeat for several.
        #[arg(long = "handle", required = true, value_name = "N")]
        handles: Vec<u16>,
    },
    /// The FDP events (log page 23h): host events (what the host's
    /// commands caused) and controller events (garbage collection's).
    Events {
        /// Only host events.
        #[arg(long, conflicts_with = "controller")]
        host: bool,
        /// Only controller events.
        #[arg(long)]
        controller: bool,
        /// First enable every event type the device reports on every
        /// placement handle (feature 1Eh; the device logs none until then).
        #[arg(long)]
        enable: bool,
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(dev: &dyn ZonedDevice, cmd: &FdpCommand, out: &mut dyn Write) -> Result<()> {
    let fdp = require(dev)?;
    match cmd {
        FdpCommand::Status { json } => status(dev, fdp, *json, out),
        FdpCommand::Update { handles } => update(dev, fdp, handles, out),
        FdpCommand::Events { host, controller, enable, json } => {
            if *enable {
                enable_events(dev, fdp, out)?;
            }
            let which: &[bool] = match (host, controller) {
                (true, _) => &[true],
                (_, true) => &[false],
                _ => &[true, false],
            };
            events(dev, fdp, which, *json, out)
        }
    }
}

/// The namespace's FDP, enabled; a clear error otherwise.
fn require(dev: &dyn ZonedDevice) -> Result<&FdpInfo> {
    let info = dev.info();
    match &info.fdp {
        Some(f) if f.enabled => Ok(f),
        Some(f) => bail!(
            "{}: Flexible Data Placement is disabled in endurance group {} of namespace {}",
            info.uri,
            f.endurance_group,
            info.nsid
        ),
        None => bail!(
            "{}: namespace {} has no Flexible Data Placement (`zns identify` shows what the \
             device reports; emu:small-fdp and emu:zn540-fdp have it)",
            info.uri,
            info.nsid
        ),
    }
}

/// The placement identifier of placement handle `handle` (reclaim group
/// 0) on `fdp`, checked against its handles (the caller names the
/// handle in the error's context).
pub fn placement_id(fdp: &FdpInfo, handle: u16) -> Result<u16> {
    let n = fdp.handles.len().max(fdp.max_placement_ids as usize);
    if handle as usize >= n {
        bail!("the namespace has {n} placement handles (0..={})", n.saturating_sub(1));
    }
    fdp.placement_id(handle, 0)
        .with_context(|| format!("the handle does not fit RGIF {}", fdp.rgif))
}

fn kv(s: &mut String, k: &str, v: String) {
    let _ = writeln!(s, "{k:<28} : {v}");
}

/// A 128-bit counter for JSON, which holds 64 bits.
fn n64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The FDP Statistics page of the namespace's group.
fn stats(dev: &dyn ZonedDevice, fdp: &FdpInfo) -> Result<FdpStatsLog> {
    let page = dev
        .log_page(get_log_page(LogPageId::FdpStatistics, fdp.endurance_group, 16))
        .with_context(|| format!("FDP statistics (log page 22h) of {}", dev.info().uri))?;
    let b: &[u8; FdpStatsLog::SIZE] = page
        .as_slice()
        .try_into()
        .map_err(|_| anyhow::anyhow!("log page 22h: {} bytes, not 64", page.len()))?;
    Ok(FdpStatsLog::from_bytes(b))
}

/// Media bytes over host bytes; `None` before anything was written.
fn waf(s: &FdpStatsLog) -> Option<f64> {
    (s.host_bytes_written > 0).then(|| s.media_bytes_written as f64 / s.host_bytes_written as f64)
}

/// The reclaim unit handle status of the namespace.
fn ruh_status(dev: &dyn ZonedDevice) -> Result<RuhStatus> {
    let mut q = dev.queue(2)?;
    Ok(q.ruh_status()?)
}

fn status(dev: &dyn ZonedDevice, fdp: &FdpInfo, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let st = ruh_status(dev)?;
    let s = stats(dev, fdp)?;
    let text = if as_json {
        serde_json::to_string_pretty(&status_json(dev, fdp, &st, &s))? + "\n"
    } else {
        status_text(dev, fdp, &st, &s)
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// A handle's kind by its reclaim unit handle identifier.
fn kind(fdp: &FdpInfo, ruhid: u16) -> String {
    fdp.handles.get(ruhid as usize).map_or("unknown".into(), |k| k.name())
}

fn status_text(dev: &dyn ZonedDevice, fdp: &FdpInfo, st: &RuhStatus, s: &FdpStatsLog) -> String {
    let info = dev.info();
    let bs = u64::from(info.block_size);
    let mut t = format!("Flexible Data Placement of {}, namespace {}:\n", info.uri, info.nsid);
    t += &config_text(fdp, bs);
    let _ = writeln!(t, "\nReclaim unit handles (I/O Management Receive, status):");
    let _ = writeln!(
        t,
        "{:>6} {:>6} {:>6}  {:<22} {:>12}",
        "handle", "pid", "ruhid", "kind", "available"
    );
    let unit = fdp.reclaim_unit_bytes / bs.max(1);
    for d in &st.descriptors {
        let p = PlacementId::decode(d.pid, fdp.rgif);
        let pct = if unit > 0 { d.available_blocks as f64 * 100.0 / unit as f64 } else { 0.0 };
        let _ = writeln!(
            t,
            "{:>6} {:>6} {:>6}  {:<22} {:>12} ({pct:.1} % of the unit)",
            p.handle,
            d.pid,
            d.ruhid,
            kind(fdp, d.ruhid),
            format!("{} blocks", d.available_blocks)
        );
    }
    let _ = writeln!(t, "\nFDP statistics (log page 22h):");
    kv(&mut t, "host bytes written (HBMW)", stat(s.host_bytes_written));
    kv(&mut t, "media bytes written (MBMW)", stat(s.media_bytes_written));
    kv(&mut t, "media bytes erased (MBE)", stat(s.media_bytes_erased));
    let w = waf(s).map_or("- (nothing written)".into(), |w| format!("{w:.3} (MBMW / HBMW)"));
    kv(&mut t, "write amplification", w);
    t
}

fn stat(v: u128) -> String {
    format!("{v} ({})", bytes_h(v))
}

/// The configuration lines `zns fdp status` and `zns identify` share.
pub fn config_text(fdp: &FdpInfo, block_size: u64) -> String {
    let mut t = String::new();
    kv(&mut t, "endurance group", fdp.endurance_group.to_string());
    let on = if fdp.enabled { "yes" } else { "no" };
    kv(&mut t, "enabled", format!("{on} (configuration {})", fdp.config_index));
    kv(&mut t, "reclaim groups", format!("{} (RGIF {})", fdp.reclaim_groups, fdp.rgif));
    let blocks = fdp.reclaim_unit_bytes / block_size.max(1);
    kv(
        &mut t,
        "reclaim unit",
        format!("{} ({blocks} blocks)", bytes_h(fdp.reclaim_unit_bytes as u128)),
    );
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for k in &fdp.handles {
        match kinds.iter_mut().find(|(n, _)| *n == k.name()) {
            Some((_, c)) => *c += 1,
            None => kinds.push((k.name(), 1)),
        }
    }
    let kinds: Vec<String> = kinds.iter().map(|(n, c)| format!("{c} {n}")).collect();
    kv(&mut t, "reclaim unit handles", format!("{} ({})", fdp.handles.len(), kinds.join(", ")));
    kv(&mut t, "placement identifiers", format!("at most {} a namespace", fdp.max_placement_ids));
    let limit = match fdp.time_limit_secs {
        0 => "none".to_string(),
        s => format!("{s} s"),
    };
    kv(&mut t, "reclaim unit time limit", limit);
    t
}

fn status_json(dev: &dyn ZonedDevice, fdp: &FdpInfo, st: &RuhStatus, s: &FdpStatsLog) -> Value {
    let info = dev.info();
    let handles: Vec<Value> = st
        .descriptors
        .iter()
        .map(|d| {
            let p = PlacementId::decode(d.pid, fdp.rgif);
            json!({
                "pid": d.pid,
                "placement_handle": p.handle,
                "reclaim_group": p.reclaim_group,
                "ruhid": d.ruhid,
                "kind": fdp.handles.get(d.ruhid as usize),
                "available_blocks": d.available_blocks,
                "time_remaining_secs": d.time_remaining_secs,
            })
        })
        .collect();
    json!({
        "device": info.uri,
        "nsid": info.nsid,
        "block_size": info.block_size,
        "fdp": fdp,
        "handles": handles,
        "statistics": {
            "host_bytes_written": n64(s.host_bytes_written),
            "media_bytes_written": n64(s.media_bytes_written),
            "media_bytes_erased": n64(s.media_bytes_erased),
            "waf": waf(s),
        },
    })
}

fn update(
    dev: &dyn ZonedDevice,
    fdp: &FdpInfo,
    handles: &[u16],
    out: &mut dyn Write,
) -> Result<()> {
    let pids = handles
        .iter()
        .map(|&h| placement_id(fdp, h).with_context(|| format!("--handle {h}")))
        .collect::<Result<Vec<u16>>>()?;
    let mut q = dev.queue(2)?;
    q.ruh_update(&pids)?;
    let st = q.ruh_status()?;
    for (&h, pid) in handles.iter().zip(&pids) {
        let avail = st.descriptors.iter().find(|d| d.pid == *pid).map(|d| d.available_blocks);
        match avail {
            Some(a) => {
                writeln!(out, "placement handle {h}: a new reclaim unit, {a} blocks available")?
            }
            None => writeln!(out, "placement handle {h}: a new reclaim unit")?,
        }
    }
    Ok(())
}

/// Enables every event type the device reports on every placement handle.
fn enable_events(dev: &dyn ZonedDevice, fdp: &FdpInfo, out: &mut dyn Write) -> Result<()> {
    let nsid = dev.info().nsid;
    let handles = fdp.handles.len().max(1) as u16;
    let mut types: Vec<u8> = Vec::new();
    for h in 0..handles {
        let f = FdpEventsFeature { nsid, placement_handle: h, event_types: 16, enable: true };
        let mut data = [0u8; 32];
        let n = dev
            .get_features(&f.get_entry(), Some(&mut data))
            .with_context(|| format!("FDP events of placement handle {h} (feature 1Eh)"))?;
        types = data
            .chunks(SupportedFdpEvent::SIZE)
            .take(n as usize)
            .map(|c| SupportedFdpEvent::from_bytes([c[0], c[1]]).event_type)
            .collect();
        if types.is_empty() {
            continue;
        }
        let set = FdpEventsFeature { event_types: types.len() as u8, ..f };
        dev.set_features(&set.set_entry(), Some(&types))
            .with_context(|| format!("enable FDP events on placement handle {h}"))?;
    }
    let names: Vec<String> = types.iter().map(|t| format!("{t:02X}h")).collect();
    writeln!(out, "enabled event types {} on {handles} placement handles", names.join(", "))?;
    Ok(())
}

/// The host (`true`) or controller events of the namespace's group.
fn event_log(dev: &dyn ZonedDevice, fdp: &FdpInfo, host: bool) -> Result<Vec<FdpEvent>> {
    let read = |dwords: u64| {
        let mut g = get_log_page(LogPageId::FdpEvents, fdp.endurance_group, dwords);
        g.lsp = if host { FDP_EVENTS_LSP_HOST } else { 0 };
        dev.log_page(g).with_context(|| format!("FDP events (log page 23h) of {}", dev.info().uri))
    };
    let head = read((FdpEventsLog::HEADER / 4) as u64)?;
    let n = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as u64;
    let max = dev.info().mdts_bytes as u64;
    let want = (FdpEventsLog::HEADER as u64 + n * FdpEvent::SIZE as u64).min(max) / 64 * 64;
    let page = read(want / 4)?;
    // A page cut at the transfer limit keeps the events that fit.
    let fit = (page.len() - FdpEventsLog::HEADER) / FdpEvent::SIZE;
    let mut b = page;
    b[..4].copy_from_slice(&(fit.min(n as usize) as u32).to_le_bytes());
    Ok(FdpEventsLog::from_bytes(&b).context("FDP events log page")?.events)
}

fn event_name(t: u8) -> String {
    match FdpEventType::from_raw(t) {
        Some(FdpEventType::RuNotFullyWritten) => "reclaim unit not fully written".into(),
        Some(FdpEventType::RuTimeLimitExceeded) => "reclaim unit time limit exceeded".into(),
        Some(FdpEventType::ControllerResetModifiedRuhs) => {
            "controller level reset modified handles".into()
        }
        Some(FdpEventType::InvalidPlacementId) => "invalid placement identifier".into(),
        Some(FdpEventType::MediaReallocated) => "media reallocated".into(),
        Some(FdpEventType::ImplicitlyModifiedRuh) => "implicitly modified handle".into(),
        None => format!("type {t:#04x}"),
    }
}

/// What an event's valid fields say.
fn event_details(e: &FdpEvent) -> String {
    let mut v = Vec::new();
    if e.flags & FdpEvent::PIV != 0 {
        v.push(format!("pid {}", e.pid));
    }
    if e.flags & FdpEvent::NSIDV != 0 {
        v.push(format!("nsid {}", e.nsid));
    }
    if e.flags & FdpEvent::LV != 0 {
        v.push(format!("reclaim group {} handle {}", e.reclaim_group, e.ruh));
    }
    if e.kind() == Some(FdpEventType::MediaReallocated) {
        let m = MediaReallocated::from_bytes(&e.type_specific);
        v.push(format!("{} blocks moved", m.blocks_moved));
        if let Some(lba) = m.lba {
            v.push(format!("from LBA {lba:#x}"));
        }
    }
    v.join(", ")
}

/// Milliseconds of an event's timestamp (bits 47:0).
fn millis(e: &FdpEvent) -> u64 {
    e.timestamp & ((1 << 48) - 1)
}

fn events(
    dev: &dyn ZonedDevice,
    fdp: &FdpInfo,
    which: &[bool],
    as_json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut logs = Vec::new();
    for &host in which {
        logs.push((host, event_log(dev, fdp, host)?));
    }
    if as_json {
        let mut v = json!({});
        for (host, evs) in &logs {
            let list: Vec<Value> = evs
                .iter()
                .map(|e| {
                    json!({
                        "type": e.event_type, "name": event_name(e.event_type),
                        "flags": e.flags, "pid": e.pid, "nsid": e.nsid,
                        "timestamp_ms": millis(e), "reclaim_group": e.reclaim_group,
                        "ruh": e.ruh, "details": event_details(e),
                    })
                })
                .collect();
            v[if *host { "host" } else { "controller" }] = Value::Array(list);
        }
        out.write_all((serde_json::to_string_pretty(&v)? + "\n").as_bytes())?;
        return Ok(());
    }
    let mut t = String::new();
    for (host, evs) in &logs {
        let who = if *host { "Host" } else { "Controller" };
        let _ = writeln!(t, "{who} events (log page 23h): {}", evs.len());
        for e in evs {
            let _ = writeln!(
                t,
                "  {:>10} ms  {:<32} {}",
                millis(e),
                event_name(e.event_type),
                event_details(e)
            );
        }
    }
    out.write_all(t.as_bytes())?;
    Ok(())
}
