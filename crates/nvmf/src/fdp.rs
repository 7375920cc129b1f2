//! Flexible Data Placement of the target's namespaces: a namespace whose
//! device reports FDP ([`zns_device::DeviceInfo::fdp`]) is served with
//! it. Identify reports the endurance groups, the FDP log pages (20h-23h)
//! and FDP Events feature (1Eh) are the device's own, read through
//! [`ZonedDevice::log_page`] and [`ZonedDevice::get_features`]; feature
//! 1Dh is answered from the description the device gave when it opened;
//! I/O Management Receive and Send run on the device as
//! [`ZoneOp::RuhStatus`] and [`ZoneOp::RuhUpdate`].
//!
//! Endurance groups: with one FDP namespace, its group keeps the number
//! the device reports; with several, the target numbers them 1, 2, ... in
//! NSID order, one group per namespace, and maps each to its device's
//! own group on the way through.

use std::sync::Arc;

use zns_device::{DeviceError, FdpInfo, ZoneOp, ZonedDevice};
use zns_spec::command::Features;
use zns_spec::fdp::{
    parse_placement_id_list, FdpEventsFeature, FdpFeature, IoManagementReceive, IoManagementSend,
    MO_RUH_STATUS, MO_RUH_UPDATE,
};
use zns_spec::features::FeatureId;
use zns_spec::identify::IdentifyController;
use zns_spec::log::GetLogPage;
use zns_spec::{IoOpcode, Status, StatusCode, SubmissionEntry};

use crate::admin::Done;
use crate::io::{run, sized, IoDone, Lane};
use crate::subsystem::{Namespace, Subsystem};

/// One FDP namespace of the subsystem as an endurance group.
pub(crate) struct Group<'a> {
    /// The group's identifier as the target reports it.
    pub endgid: u16,
    /// The namespace.
    pub ns: &'a Namespace,
    /// Its device.
    pub device: &'a Arc<dyn ZonedDevice>,
    /// The device's description of its FDP.
    pub fdp: &'a FdpInfo,
}

/// The subsystem's FDP namespaces as endurance groups (see the module's
/// numbering).
pub(crate) fn groups(sub: &Subsystem) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = sub
        .namespaces()
        .iter()
        .filter_map(|ns| {
            let fdp = ns.device_info()?.fdp.as_ref()?;
            Some(Group { endgid: fdp.endurance_group, ns, device: ns.device()?, fdp })
        })
        .collect();
    if out.len() > 1 {
        for (i, g) in out.iter_mut().enumerate() {
            g.endgid = i as u16 + 1;
        }
    }
    out
}

/// The group of endurance group identifier `endgid`.
fn group(sub: &Subsystem, endgid: u16) -> Option<Group<'_>> {
    groups(sub).into_iter().find(|g| g.endgid == endgid && endgid != 0)
}

/// The group namespace `nsid` belongs to.
fn group_of(sub: &Subsystem, nsid: u32) -> Option<Group<'_>> {
    groups(sub).into_iter().find(|g| g.ns.nsid == nsid)
}

/// Identify Controller CTRATT bits: endurance groups and FDP supported,
/// when a namespace has FDP.
pub(crate) fn ctratt(sub: &Subsystem) -> u32 {
    match groups(sub).is_empty() {
        true => 0,
        false => IdentifyController::CTRATT_ENDURANCE_GROUPS | IdentifyController::CTRATT_FDPS,
    }
}

/// Identify Controller ENDGIDMAX: the largest group identifier.
pub(crate) fn endgidmax(sub: &Subsystem) -> u16 {
    groups(sub).iter().map(|g| g.endgid).max().unwrap_or(0)
}

/// Identify Namespace ENDGID of `ns` (0: no group).
pub(crate) fn endgid(sub: &Subsystem, ns: &Namespace) -> u16 {
    group_of(sub, ns.nsid).map_or(0, |g| g.endgid)
}

/// The status of a device's refusal of an admin command: its own NVMe
/// status, or Internal Error when it failed otherwise.
fn admin_status(e: &DeviceError) -> Status {
    match e {
        DeviceError::Nvme { status, .. } => *status,
        other => {
            tracing::warn!(error = %other, "FDP admin command on the device failed");
            StatusCode::InternalError.status()
        }
    }
}

/// Get Log Page of an FDP page (20h-23h) of the group LSI names, read from
/// the group's device with its own group identifier: Invalid Log Page
/// without FDP, Invalid Field in Command for another group. The length
/// (NUMD, from the wire) is checked against `max` before anything is
/// allocated.
pub(crate) fn log_page(sub: &Subsystem, cmd: &GetLogPage, max: usize) -> Result<Vec<u8>, Status> {
    if groups(sub).is_empty() {
        return Err(StatusCode::InvalidLogPage.status());
    }
    let g = group(sub, cmd.lsi).ok_or(StatusCode::InvalidField.status())?;
    if cmd.dwords.saturating_mul(4) > max as u64 {
        return Err(StatusCode::InvalidField.status());
    }
    let request = GetLogPage { nsid: 0, lsi: g.fdp.endurance_group, ..*cmd };
    g.device.log_page(request).map_err(|e| admin_status(&e))
}

/// Get Features 1Dh (from the device's description) and 1Eh (from the
/// device): `None` for other features.
pub(crate) fn get_feature(
    sub: &Subsystem,
    sqe: &SubmissionEntry,
    out: &mut Vec<u8>,
) -> Option<Done> {
    let f = Features::decode(sqe);
    Some(match (f.feature_id()?, f.sel) {
        // Supported capabilities: 1Dh neither saveable nor changeable
        // here; 1Eh namespace specific (bit 1) and changeable (bit 2).
        (FeatureId::FlexibleDataPlacement, 3) => Done::result(0),
        (FeatureId::FdpEvents, 3) => Done::result(0b110),
        (FeatureId::FlexibleDataPlacement, _) => match group(sub, FdpFeature::decode(sqe).endgid) {
            Some(g) => {
                let (enabled, config_index) = (g.fdp.enabled, g.fdp.config_index);
                let v = FdpFeature { enabled, config_index, ..FdpFeature::default() };
                Done::result(v.to_dword() as u64)
            }
            None => Done::err(StatusCode::InvalidField),
        },
        (FeatureId::FdpEvents, _) => get_events(sub, sqe, out),
        _ => return None,
    })
}

/// Get Features 1Eh, run on the namespace's device with its NSID: NOET
/// two-byte descriptors for the host.
fn get_events(sub: &Subsystem, sqe: &SubmissionEntry, out: &mut Vec<u8>) -> Done {
    let (g, entry) = match events_target(sub, sqe) {
        Ok(t) => t,
        Err(d) => return d,
    };
    let len = FdpEventsFeature::decode(sqe).event_types as usize * 2;
    out.clear();
    out.resize(len, 0);
    let data = if len == 0 { None } else { Some(&mut out[..]) };
    match g.device.get_features(&entry, data) {
        Ok(dw0) => Done::Complete { status: Status::SUCCESS, result: dw0 as u64, data: len },
        Err(e) => Done::Complete { status: admin_status(&e), result: 0, data: 0 },
    }
}

/// The group of a 1Eh command's namespace and the entry for its device
/// (the device's NSID): Invalid Namespace or Format for an NSID naming no
/// namespace, Invalid Field in Command for one without FDP.
fn events_target<'a>(
    sub: &'a Subsystem,
    sqe: &SubmissionEntry,
) -> Result<(Group<'a>, SubmissionEntry), Done> {
    if sub.namespace(sqe.nsid).is_none() {
        return Err(Done::err(StatusCode::InvalidNamespaceOrFormat));
    }
    let g = group_of(sub, sqe.nsid).ok_or(Done::err(StatusCode::InvalidField))?;
    // Built anew: the host's data descriptor and CID are not the device's.
    let f = FdpEventsFeature {
        nsid: g.ns.device_info().map_or(0, |i| i.nsid),
        ..FdpEventsFeature::decode(sqe)
    };
    let set = sqe.opcode() == zns_spec::AdminOpcode::SetFeatures as u8;
    let entry = if set { f.set_entry() } else { f.get_entry() };
    Ok((g, entry))
}

/// Set Features 1Dh and 1Eh: `None` for other features. 1Dh: Command
/// Sequence Error for a group (it has its namespace, so its configuration
/// cannot change), Invalid Field in Command for another. 1Eh: the event
/// types in `host` (NOET bytes) enabled or disabled on the device.
pub(crate) fn set_feature(sub: &Subsystem, sqe: &SubmissionEntry, host: &[u8]) -> Option<Done> {
    let f = Features::decode(sqe);
    match f.feature_id()? {
        FeatureId::FlexibleDataPlacement => {
            Some(match group(sub, FdpFeature::decode(sqe).endgid) {
                Some(_) => Done::err(StatusCode::CommandSequenceError),
                None => Done::err(StatusCode::InvalidField),
            })
        }
        FeatureId::FdpEvents => Some(set_events(sub, sqe, host)),
        _ => None,
    }
}

fn set_events(sub: &Subsystem, sqe: &SubmissionEntry, host: &[u8]) -> Done {
    let (g, entry) = match events_target(sub, sqe) {
        Ok(t) => t,
        Err(d) => return d,
    };
    let n = FdpEventsFeature::decode(sqe).event_types as usize;
    if host.len() < n {
        return Done::err(StatusCode::SglLengthInvalid);
    }
    let data = if n == 0 { None } else { Some(&host[..n]) };
    match g.device.set_features(&entry, data) {
        Ok(dw0) => Done::result(dw0 as u64),
        Err(e) => Done::Complete { status: admin_status(&e), result: 0, data: 0 },
    }
}

/// Whether I/O Management commands reach namespace `ns`: Invalid Command
/// Opcode when no namespace of the subsystem has FDP (the commands are
/// not supported), FDP Disabled for a namespace outside every FDP group.
pub(crate) fn io_target(sub: &Subsystem, ns: &Namespace) -> Result<(), IoDone> {
    let groups = groups(sub);
    if groups.is_empty() {
        return Err(IoDone::err(StatusCode::InvalidOpcode));
    }
    if !groups.iter().any(|g| g.ns.nsid == ns.nsid) {
        return Err(IoDone::err(StatusCode::FdpDisabled));
    }
    Ok(())
}

/// I/O Management Receive, Reclaim Unit Handle Status: as many bytes as
/// NUMD asks, from the device. NUMD comes from the wire: it is checked
/// against MDTS before anything is allocated, and against the room the
/// host's descriptor offers. Other operations: Invalid Field in Command.
pub(crate) fn receive(
    lane: &mut Lane<'_>,
    sqe: &SubmissionEntry,
    room: usize,
    out: &mut Vec<u8>,
) -> IoDone {
    let cmd = IoManagementReceive::decode(sqe);
    if cmd.operation != MO_RUH_STATUS {
        return IoDone::err(StatusCode::InvalidField);
    }
    let len = cmd.length_bytes();
    if len > lane.ns.mdts_bytes() as u64 {
        return IoDone::err(StatusCode::InvalidField);
    }
    let len = len as usize;
    if len > room {
        return IoDone::err(StatusCode::SglLengthInvalid);
    }
    if let Err(d) = sized(lane, len) {
        return d;
    }
    let done = run(lane, ZoneOp::RuhStatus, Some(false));
    if !done.status.is_success() {
        return done;
    }
    out.clear();
    out.extend_from_slice(&lane.buf.as_slice()[..len]);
    IoDone::ok(0, len)
}

/// I/O Management Send, Reclaim Unit Handle Update of the MOS + 1
/// placement identifiers in the host's data, run on the device (which
/// checks them). Other operations: Invalid Field in Command.
pub(crate) fn send(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let cmd = IoManagementSend::decode(sqe);
    if cmd.operation != MO_RUH_UPDATE {
        return IoDone::err(StatusCode::InvalidField);
    }
    // At most 65536 identifiers of 2 bytes: bounded by the host's data.
    let n = cmd.placement_ids() as usize;
    let Some(pids) = parse_placement_id_list(host, n) else {
        return IoDone::err(StatusCode::SglLengthInvalid);
    };
    run(lane, ZoneOp::RuhUpdate { pids }, None)
}

/// The I/O Management opcodes, which [`io_target`] admits.
pub(crate) fn is_io_management(op: IoOpcode) -> bool {
    matches!(op, IoOpcode::IoManagementReceive | IoOpcode::IoManagementSend)
}
