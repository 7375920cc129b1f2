//! Flexible Data Placement (NVMe TP4146) as the host sees it: the
//! description a backend reads when a device opens ([`FdpInfo`], in
//! [`crate::DeviceInfo::fdp`]), and the checks that keep placement
//! directives and reclaim unit handle commands away from namespaces
//! without FDP.
//!
//! Discovery takes four admin commands: Identify Controller (CTRATT bit
//! 19, FDPS), Identify Namespace (ENDGID), Get Features 1Dh of that
//! endurance group (FDPE, FDPCIDX) and the FDP Configurations log page
//! (20h) of the group, whose descriptor FDPCIDX names.

use serde::Serialize;
use zns_spec::fdp::{FdpConfigLog, FdpFeature, PlacementId, RuhStatus, RuhType};
use zns_spec::identify::IdentifyController;
use zns_spec::log::{GetLogPage, LogPageId};
use zns_spec::SubmissionEntry;

use crate::error::{DeviceError, Result};
use crate::info::DeviceInfo;
use crate::op::ZoneOp;

/// The largest FDP Configurations page discovery reads: 64 KiB hold
/// dozens of configurations of 128 handles each.
const MAX_CONFIG_LOG: u64 = 64 * 1024;

/// What a reclaim unit handle keeps apart (RUHT).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuhKind {
    /// Initially isolated: its data is kept apart when written; garbage
    /// collection may mix it with other initially isolated handles' data.
    InitiallyIsolated,
    /// Persistently isolated: its data stays apart through garbage
    /// collection too.
    PersistentlyIsolated,
    /// A value the specification reserves.
    Reserved(u8),
}

impl RuhKind {
    /// The kind of a raw RUHT.
    pub const fn from_raw(v: u8) -> Self {
        match RuhType::from_raw(v) {
            Some(RuhType::InitiallyIsolated) => RuhKind::InitiallyIsolated,
            Some(RuhType::PersistentlyIsolated) => RuhKind::PersistentlyIsolated,
            None => RuhKind::Reserved(v),
        }
    }

    /// A short name ("initially isolated", ...).
    pub fn name(self) -> String {
        match self {
            RuhKind::InitiallyIsolated => "initially isolated".into(),
            RuhKind::PersistentlyIsolated => "persistently isolated".into(),
            RuhKind::Reserved(v) => format!("reserved ({v:#x})"),
        }
    }
}

/// The Flexible Data Placement configuration of a namespace's endurance
/// group, as the device reported it when it opened.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FdpInfo {
    /// Endurance group identifier (Identify Namespace ENDGID).
    pub endurance_group: u16,
    /// FDPE: FDP is enabled in the group (Get Features 1Dh). Placed writes
    /// and the reclaim unit handle commands need it.
    pub enabled: bool,
    /// FDPCIDX: the configuration in use, an index into the FDP
    /// Configurations log page.
    pub config_index: u8,
    /// NRG: reclaim groups.
    pub reclaim_groups: u32,
    /// RGIF: the upper bits of a placement identifier that name the
    /// reclaim group (0: the identifier is the placement handle).
    pub rgif: u8,
    /// Each reclaim unit handle's kind, by reclaim unit handle identifier
    /// (NRUH of them).
    pub handles: Vec<RuhKind>,
    /// RUNS: nominal reclaim unit size in bytes.
    pub reclaim_unit_bytes: u64,
    /// MAXPIDS + 1: the most placement identifiers a namespace may have.
    pub max_placement_ids: u32,
    /// ERUTL: estimated reclaim unit time limit in seconds (0: none).
    pub time_limit_secs: u32,
    /// FDPVWC: the configuration has a volatile write cache.
    pub volatile_write_cache: bool,
}

impl FdpInfo {
    /// The placement identifier of placement handle `handle` in reclaim
    /// group `reclaim_group`; `None` when either does not fit the RGIF
    /// split.
    pub fn placement_id(&self, handle: u16, reclaim_group: u16) -> Option<u16> {
        PlacementId { reclaim_group, handle }.encode(self.rgif)
    }

    /// Bytes of a Reclaim Unit Handle Status that holds every descriptor
    /// the namespace may return (one per placement handle and reclaim
    /// group).
    pub fn ruh_status_bytes(&self) -> usize {
        let descriptors = (self.max_placement_ids as usize)
            .max(self.handles.len())
            .saturating_mul(self.reclaim_groups.max(1) as usize);
        RuhStatus::HEADER + descriptors.saturating_mul(zns_spec::fdp::RuhStatusDescriptor::SIZE)
    }
}

/// The FDP description of a namespace in endurance group `endgid` on a
/// controller with `ctratt`: `None` without FDPS or outside any group.
/// `feature` runs a Get Features entry (its DW0), `log` a Get Log Page.
/// A device that says it has FDP but does not describe it opens without
/// (a warning says why).
pub(crate) fn discover(
    uri: &str,
    ctratt: u32,
    endgid: u16,
    feature: impl FnOnce(SubmissionEntry) -> Result<u32>,
    mut log: impl FnMut(GetLogPage) -> Result<Vec<u8>>,
) -> Option<FdpInfo> {
    if ctratt & IdentifyController::CTRATT_FDPS == 0 || endgid == 0 {
        return None;
    }
    let run = || -> Result<FdpInfo> {
        let dw0 = feature(FdpFeature { endgid, ..FdpFeature::default() }.get_entry())?;
        let f = FdpFeature::from_dwords(endgid as u32, dw0);
        let head = log(config_page(endgid, 16))?;
        let size = FdpConfigLog::size_of(&head).unwrap_or(16) as u64;
        let size = size.clamp(16, MAX_CONFIG_LOG);
        let page = log(config_page(endgid, size.div_ceil(4)))?;
        let configs = FdpConfigLog::from_bytes(&page)
            .map_err(|e| DeviceError::Unsupported(format!("FDP Configurations log: {e}")))?
            .configs;
        let c = configs.get(f.config_index as usize).ok_or_else(|| {
            DeviceError::Unsupported(format!(
                "FDP configuration {} of {} listed",
                f.config_index,
                configs.len()
            ))
        })?;
        Ok(FdpInfo {
            endurance_group: endgid,
            enabled: f.enabled,
            config_index: f.config_index,
            reclaim_groups: c.reclaim_groups,
            rgif: c.attributes.rgif,
            handles: c.handle_types.iter().map(|&t| RuhKind::from_raw(t)).collect(),
            reclaim_unit_bytes: c.reclaim_unit_bytes,
            max_placement_ids: c.max_placement_ids,
            time_limit_secs: c.time_limit_secs,
            volatile_write_cache: c.attributes.volatile_write_cache,
        })
    };
    match run() {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(
                uri,
                endgid,
                error = %e,
                "the controller reports Flexible Data Placement but does not describe it: \
                 opened without"
            );
            None
        }
    }
}

/// A Get Log Page of the FDP Configurations page of group `endgid`.
fn config_page(endgid: u16, dwords: u64) -> GetLogPage {
    zns_spec::fdp::get_log_page(LogPageId::FdpConfigurations, endgid, dwords)
}

/// Refuses a placed write, a Reclaim Unit Handle Status or Update on a
/// namespace without FDP enabled: a controller may ignore a placement
/// directive it does not support, so the host catches it. Other commands
/// pass.
pub(crate) fn check(info: &DeviceInfo, op: &ZoneOp) -> Result<()> {
    let what = match op {
        ZoneOp::Write { placement: Some(pid), lba, .. } => {
            format!("write at LBA {lba} with placement identifier {pid}")
        }
        ZoneOp::RuhStatus | ZoneOp::RuhUpdate { .. } => op.kind().name().to_string(),
        _ => return Ok(()),
    };
    let why = match &info.fdp {
        Some(f) if f.enabled => return Ok(()),
        Some(f) => {
            format!("Flexible Data Placement is disabled in endurance group {}", f.endurance_group)
        }
        None => "it has no Flexible Data Placement".to_string(),
    };
    let msg = format!("{what}: namespace {} of {}: {why}", info.nsid, info.uri);
    Err(match op {
        // A directive the namespace cannot take is a bad argument; a
        // command it lacks is unsupported.
        ZoneOp::Write { .. } => DeviceError::InvalidArgument(msg),
        _ => DeviceError::Unsupported(msg),
    })
}

/// Refuses a Reclaim Unit Handle Status buffer the command cannot
/// describe: whole dwords, at least the 16-byte header.
pub(crate) fn check_status_len(len: usize) -> Result<()> {
    if len < RuhStatus::HEADER || !len.is_multiple_of(4) {
        return Err(DeviceError::InvalidArgument(format!(
            "reclaim unit handle status buffer of {len} bytes (whole dwords, at least {})",
            RuhStatus::HEADER
        )));
    }
    Ok(())
}

/// Refuses an empty or oversized list of placement identifiers.
pub(crate) fn check_pids(pids: &[u16]) -> Result<()> {
    if pids.is_empty() || pids.len() > 65536 {
        return Err(DeviceError::InvalidArgument(format!(
            "reclaim unit handle update of {} placement identifiers (1..=65536)",
            pids.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_spec::fdp::{FdpAttributes, FdpConfigDescriptor};

    fn config_log(handles: Vec<u8>) -> Vec<u8> {
        let d = FdpConfigDescriptor {
            attributes: FdpAttributes { rgif: 2, volatile_write_cache: true, valid: true },
            reclaim_groups: 4,
            max_placement_ids: 3,
            namespaces: 1,
            reclaim_unit_bytes: 3 << 20,
            time_limit_secs: 7,
            handle_types: handles,
            vendor: vec![],
        };
        let other = FdpConfigDescriptor { handle_types: vec![2], ..d.clone() };
        FdpConfigLog { version: 0, configs: vec![other, d] }.to_bytes()
    }

    fn serve(page: &[u8], g: GetLogPage) -> Result<Vec<u8>> {
        assert_eq!((g.lid, g.lsi), (0x20, 5));
        let mut b = page.to_vec();
        b.resize(g.length_bytes(), 0);
        Ok(b)
    }

    #[test]
    fn discovery_reads_the_configuration_the_feature_names() {
        let page = config_log(vec![1, 2, 9]);
        let fdp = discover(
            "x",
            IdentifyController::CTRATT_FDPS,
            5,
            |e| {
                assert_eq!((e.opcode(), e.cdw10 & 0xFF, e.cdw11), (0x0A, 0x1D, 5));
                Ok(1 | 1 << 8)
            },
            |g| serve(&page, g),
        )
        .expect("FDP");
        assert_eq!((fdp.endurance_group, fdp.enabled, fdp.config_index), (5, true, 1));
        assert_eq!((fdp.reclaim_groups, fdp.rgif, fdp.max_placement_ids), (4, 2, 3));
        assert_eq!(
            fdp.handles,
            [RuhKind::InitiallyIsolated, RuhKind::PersistentlyIsolated, RuhKind::Reserved(9)]
        );
        assert_eq!((fdp.reclaim_unit_bytes, fdp.time_limit_secs), (3 << 20, 7));
        assert!(fdp.volatile_write_cache);
        // RGIF 2: the group in bits 15:14.
        assert_eq!(fdp.placement_id(5, 3), Some(0xC005));
        assert_eq!(fdp.placement_id(0, 4), None);
        assert_eq!(fdp.ruh_status_bytes(), 16 + 32 * 3 * 4);
    }

    #[test]
    fn no_fdps_no_group_or_no_description_is_no_fdp() {
        let page = config_log(vec![1]);
        let never = |_: SubmissionEntry| -> Result<u32> { panic!("no command without FDPS") };
        assert!(discover("x", 0, 5, never, |g| serve(&page, g)).is_none());
        let fdps = IdentifyController::CTRATT_FDPS;
        assert!(discover("x", fdps, 0, never, |g| serve(&page, g)).is_none());
        // FDPCIDX 7 names no configuration; a failing feature is no FDP.
        assert!(discover("x", fdps, 5, |_| Ok(1 | 7 << 8), |g| serve(&page, g)).is_none());
        let refused = |_: SubmissionEntry| -> Result<u32> {
            Err(DeviceError::Unsupported("no features".into()))
        };
        assert!(discover("x", fdps, 5, refused, |g| serve(&page, g)).is_none());
        // Disabled is described, not hidden.
        let off = discover("x", fdps, 5, |_| Ok(1 << 8), |g| serve(&page, g)).unwrap();
        assert!(!off.enabled);
    }

    #[test]
    fn buffer_and_list_checks() {
        assert!(check_status_len(16).is_ok());
        assert!(check_status_len(12).is_err());
        assert!(check_status_len(18).is_err());
        assert!(check_pids(&[]).is_err());
        assert!(check_pids(&[0, 1]).is_ok());
        assert!(check_pids(&vec![0; 65537]).is_err());
    }
}
