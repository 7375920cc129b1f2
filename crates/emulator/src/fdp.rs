//! The controller's side of Flexible Data Placement (TP4146): Identify
//! fields, features 1Dh and 1Eh, the log pages 20h-23h and the I/O
//! Management commands, over the firmware of the one namespace whose
//! profile has a `[namespace.fdp]` table ([`crate::conv::fdp`] keeps the
//! handles, counters and events).
//!
//! That namespace is endurance group 1, the only one, with FDP enabled in
//! configuration 0 from the start (the profile fixes it). A controller
//! without such a namespace supports none of this: the features fail with
//! Invalid Field in Command, the log pages with Invalid Log Page, the I/O
//! Management commands with Invalid Command Opcode, and Identify reports
//! neither endurance groups nor FDP.

use zns_spec::command::GetLogPage;
use zns_spec::fdp::{
    FdpAttributes, FdpConfigDescriptor, FdpConfigLog, FdpEventsFeature, FdpEventsLog, FdpFeature,
    FdpStatsLog, IoManagementReceive, IoManagementSend, RuhAttributes, RuhStatus, RuhUsageLog,
    SupportedFdpEvent, FDP_EVENTS_LSP_HOST, MO_RUH_STATUS, MO_RUH_UPDATE,
};
use zns_spec::identify::IdentifyController;
use zns_spec::log::LogPageId;
use zns_spec::{StatusCode, SubmissionEntry};

use crate::controller::Controller;
use crate::conv::fdp::SUPPORTED_EVENTS;
use crate::conv::Firmware;
use crate::host::HostMemory;
use crate::io::{dma_from_host, dma_to_host};
use crate::namespace::Namespace;

/// The endurance group of the FDP namespace.
pub(crate) const ENDURANCE_GROUP: u16 = 1;

/// The namespace with Flexible Data Placement, if the controller has one.
pub(crate) fn namespace(ctrl: &Controller) -> Option<&Namespace> {
    ctrl.namespaces.iter().find(|ns| ns.firmware().is_some_and(|f| f.fdp().is_some()))
}

/// The FDP firmware of endurance group `endgid`: Invalid Field in Command
/// for a controller without FDP or another group.
fn group(ctrl: &Controller, endgid: u16) -> Result<(&Namespace, &Firmware), StatusCode> {
    let ns = namespace(ctrl).ok_or(StatusCode::InvalidField)?;
    let f = ns.firmware().ok_or(StatusCode::InvalidField)?;
    if endgid != ENDURANCE_GROUP {
        return Err(StatusCode::InvalidField);
    }
    Ok((ns, f))
}

/// Identify Controller CTRATT bits: endurance groups and FDP supported,
/// on a controller with an FDP namespace.
pub(crate) fn ctratt(ctrl: &Controller) -> u32 {
    match namespace(ctrl) {
        Some(_) => IdentifyController::CTRATT_ENDURANCE_GROUPS | IdentifyController::CTRATT_FDPS,
        None => 0,
    }
}

/// Identify Controller ENDGIDMAX.
pub(crate) fn endgidmax(ctrl: &Controller) -> u16 {
    if namespace(ctrl).is_some() {
        ENDURANCE_GROUP
    } else {
        0
    }
}

/// Identify Namespace ENDGID: 1 for the FDP namespace, 0 (none) for the
/// others.
pub(crate) fn endgid(ns: &Namespace) -> u16 {
    match ns.firmware().and_then(|f| f.fdp()) {
        Some(_) => ENDURANCE_GROUP,
        None => 0,
    }
}

// ---- Features -------------------------------------------------------------

/// Get Features 1Dh: FDP enabled, configuration 0, for endurance group 1
/// (CDW11 15:0).
pub(crate) fn get_feature(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let f = FdpFeature::decode(sqe);
    group(ctrl, f.endgid)?;
    Ok(FdpFeature { endgid: f.endgid, enabled: true, config_index: 0 }.to_dword() as u64)
}

/// Set Features 1Dh: the configuration of an endurance group may change
/// only while it has no namespace, and the FDP namespace is always there:
/// Command Sequence Error.
pub(crate) fn set_feature(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let f = FdpFeature::decode(sqe);
    group(ctrl, f.endgid)?;
    Err(StatusCode::CommandSequenceError)
}

/// The firmware of the namespace a 1Eh command names: Invalid Field in
/// Command without FDP on the controller, for a namespace without it or a
/// placement handle it lacks; Invalid Namespace or Format for an NSID that
/// names no namespace.
fn events_target<'a>(
    ctrl: &'a Controller,
    f: &FdpEventsFeature,
) -> Result<&'a Firmware, StatusCode> {
    namespace(ctrl).ok_or(StatusCode::InvalidField)?;
    let ns = ctrl.namespace(f.nsid).ok_or(StatusCode::InvalidNamespaceOrFormat)?;
    let fw = ns.firmware().filter(|fw| fw.fdp().is_some()).ok_or(StatusCode::InvalidField)?;
    let handles = fw.fdp().map_or(0, |c| c.handles);
    if f.placement_handle >= handles {
        return Err(StatusCode::InvalidField);
    }
    Ok(fw)
}

/// Get Features 1Eh: NOET supported event descriptors of the placement
/// handle (the types the firmware reports, each with its enabled bit; the
/// rest of the buffer zeros), sent by `send`; DW0 is how many it filled.
pub(crate) fn get_events_feature(
    ctrl: &Controller,
    sqe: &SubmissionEntry,
    send: impl FnOnce(&[u8]) -> Result<(), StatusCode>,
) -> Result<u64, StatusCode> {
    let f = FdpEventsFeature::decode(sqe);
    let fw = events_target(ctrl, &f)?;
    if f.event_types == 0 {
        return Err(StatusCode::InvalidField);
    }
    let mut data = vec![0u8; f.event_types as usize * SupportedFdpEvent::SIZE];
    let n = SUPPORTED_EVENTS.len().min(f.event_types as usize);
    for (i, &t) in SUPPORTED_EVENTS.iter().take(n).enumerate() {
        let d = SupportedFdpEvent {
            event_type: t as u8,
            enabled: fw.fdp_event_enabled(f.placement_handle, t),
        };
        data[i * 2..i * 2 + 2].copy_from_slice(&d.to_bytes());
    }
    send(&data)?;
    Ok(n as u64)
}

/// Set Features 1Eh: enables (CDW12 bit 0) or disables the NOET event
/// types the data lists (one byte each, fetched by `receive`) on the
/// placement handle. A type the firmware never reports fails with Invalid
/// Field in Command and changes nothing.
pub(crate) fn set_events_feature(
    ctrl: &Controller,
    sqe: &SubmissionEntry,
    receive: impl FnOnce(&mut [u8]) -> Result<(), StatusCode>,
) -> Result<u64, StatusCode> {
    let f = FdpEventsFeature::decode(sqe);
    let fw = events_target(ctrl, &f)?;
    let mut types = vec![0u8; f.event_types as usize];
    if !types.is_empty() {
        receive(&mut types)?;
    }
    fw.set_fdp_events(f.placement_handle, &types, f.enable)?;
    Ok(0)
}

// ---- Log pages ------------------------------------------------------------

/// One of the FDP log pages (20h-23h) of the endurance group LSI names:
/// Invalid Log Page without FDP, Invalid Field in Command for another
/// group.
pub(crate) fn log_page(
    ctrl: &Controller,
    lid: LogPageId,
    cmd: &GetLogPage,
) -> Result<Vec<u8>, StatusCode> {
    if namespace(ctrl).is_none() {
        return Err(StatusCode::InvalidLogPage);
    }
    let (ns, fw) = group(ctrl, cmd.lsi)?;
    let cfg = fw.fdp().ok_or(StatusCode::InvalidField)?;
    // Bytes with metadata, as the statistics count them.
    let unit = (ns.block_size() + ns.metadata_size()) as u128;
    let page = match lid {
        LogPageId::FdpConfigurations => {
            let d = FdpConfigDescriptor {
                attributes: FdpAttributes {
                    rgif: 0,
                    volatile_write_cache: ctrl.profile.controller.volatile_write_cache,
                    valid: true,
                },
                reclaim_groups: 1,
                max_placement_ids: cfg.handles as u32,
                namespaces: 1,
                reclaim_unit_bytes: fw.segment_blocks() * ns.block_size() as u64,
                time_limit_secs: 0,
                handle_types: vec![cfg.ruh_type() as u8; cfg.handles as usize],
                vendor: Vec::new(),
            };
            FdpConfigLog { version: 0, configs: vec![d] }.to_bytes()
        }
        LogPageId::ReclaimUnitHandleUsage => {
            // Namespace 1 uses every handle, as its profile lists them.
            let used = RuhAttributes::HostSpecified as u8;
            RuhUsageLog { attributes: vec![used; cfg.handles as usize] }.to_bytes()
        }
        LogPageId::FdpStatistics => {
            let s = fw.fdp_stats().ok_or(StatusCode::InvalidField)?;
            let t = s.total();
            FdpStatsLog {
                host_bytes_written: t.host_blocks as u128 * unit,
                media_bytes_written: s.media_blocks() as u128 * unit,
                media_bytes_erased: s.erased_blocks() as u128 * unit,
            }
            .to_bytes()
            .to_vec()
        }
        LogPageId::FdpEvents => {
            let host = cmd.lsp & FDP_EVENTS_LSP_HOST != 0;
            FdpEventsLog { events: fw.fdp_events(host) }.to_bytes()
        }
        _ => return Err(StatusCode::InvalidLogPage),
    };
    Ok(page)
}

// ---- I/O Management -------------------------------------------------------

/// The FDP firmware of an I/O Management command's namespace: Invalid
/// Command Opcode on a controller without FDP (the commands are not
/// supported), FDP Disabled for a namespace outside the FDP endurance
/// group.
fn io_target<'a>(ctrl: &Controller, ns: &'a Namespace) -> Result<&'a Firmware, StatusCode> {
    if namespace(ctrl).is_none() {
        return Err(StatusCode::InvalidOpcode);
    }
    ns.firmware().filter(|f| f.fdp().is_some()).ok_or(StatusCode::FdpDisabled)
}

/// I/O Management Receive: management operation 01h, Reclaim Unit Handle
/// Status, as many bytes as NUMD asks (zeros past the data); other
/// operations fail with Invalid Field in Command.
pub(crate) fn io_management_receive(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
) -> Result<u64, StatusCode> {
    let fw = io_target(ctrl, ns)?;
    let cmd = IoManagementReceive::decode(sqe);
    if cmd.operation != MO_RUH_STATUS {
        return Err(StatusCode::InvalidField);
    }
    let len = cmd.length_bytes();
    if len > ctrl.max_transfer_bytes() as u64 {
        return Err(StatusCode::InvalidField);
    }
    let status = RuhStatus { descriptors: fw.ruh_status().unwrap_or_default() }.to_bytes();
    let mut out = vec![0u8; len as usize];
    let n = out.len().min(status.len());
    out[..n].copy_from_slice(&status[..n]);
    dma_to_host(ctrl, host, sqe, &out)?;
    Ok(0)
}

/// I/O Management Send: management operation 01h, Reclaim Unit Handle
/// Update of the MOS + 1 placement identifiers in the data. More
/// identifiers than the namespace has, one it lacks, or another operation
/// fail with Invalid Field in Command and change nothing.
pub(crate) fn io_management_send(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
) -> Result<u64, StatusCode> {
    let fw = io_target(ctrl, ns)?;
    let cmd = IoManagementSend::decode(sqe);
    if cmd.operation != MO_RUH_UPDATE {
        return Err(StatusCode::InvalidField);
    }
    let n = cmd.placement_ids() as usize;
    if n > fw.fdp().map_or(0, |c| c.handles as usize) {
        return Err(StatusCode::InvalidField);
    }
    let mut raw = vec![0u8; n * 2];
    dma_from_host(ctrl, host, sqe, &mut raw)?;
    let pids = zns_spec::fdp::parse_placement_id_list(&raw, n).ok_or(StatusCode::InvalidField)?;
    fw.ruh_update(&pids)?;
    Ok(0)
}
