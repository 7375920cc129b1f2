//! Admin commands of the target's controllers: Identify, Get Log Page, Get
//! and Set Features, Asynchronous Event Request, Keep Alive. The discovery
//! controller answers Identify Controller, the Discovery log page, the
//! features and Keep Alive.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use zns_spec::command::{Features, IdentifyCmd};
use zns_spec::fabrics::{self, DiscoveryEntry};
use zns_spec::identify::{IoCommandSetVector, IDENTIFY_SIZE};
use zns_spec::log::{GetLogPage, LogPageId, OcpSmartLog, SmartLog};
use zns_spec::{AdminOpcode, CommandSetId, IoOpcode, Status, StatusCode, SubmissionEntry};

use crate::controller::{Controller, Role, MAX_IO_QUEUES};
use crate::subsystem::{identify_discovery_controller, Subsystem};
use crate::target::Shared;

/// How an admin command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Complete it: status, result, and the first `data` bytes of the
    /// output buffer go to the host.
    Complete {
        /// The status.
        status: Status,
        /// Completion dwords 0-1.
        result: u64,
        /// Bytes of output data.
        data: usize,
    },
    /// Hold it (an Asynchronous Event Request waiting for an event).
    Held,
}

impl Done {
    pub(crate) fn ok(data: usize) -> Done {
        Done::Complete { status: Status::SUCCESS, result: 0, data }
    }

    pub(crate) fn result(result: u64) -> Done {
        Done::Complete { status: Status::SUCCESS, result, data: 0 }
    }

    pub(crate) fn err(code: StatusCode) -> Done {
        Done::Complete { status: code.status(), result: 0, data: 0 }
    }
}

/// Where the target listens, for the Discovery log page.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    /// The listening address.
    pub addr: SocketAddr,
    /// The NVM subsystem's NQN.
    pub subnqn: String,
    /// Hosts the subsystem allows (empty: any).
    pub allowed_hosts: Vec<String>,
}

impl Listener {
    fn allows(&self, hostnqn: &str) -> bool {
        self.allowed_hosts.is_empty() || self.allowed_hosts.iter().any(|h| h == hostnqn)
    }
}

/// Held Asynchronous Event Requests of one admin queue.
#[derive(Debug, Default)]
pub(crate) struct AsyncEvents {
    pub held: Vec<u16>,
}

/// Most Asynchronous Event Requests held (AERL + 1).
const AER_LIMIT: usize = 4;

/// Runs admin command `sqe`; `host` is the data the host sent (Set
/// Features of a feature with data), output data goes to `out`.
pub(crate) fn execute(
    ctrl: &Controller,
    shared: &Shared,
    aer: &mut AsyncEvents,
    sqe: &SubmissionEntry,
    host: &[u8],
    out: &mut Vec<u8>,
) -> Done {
    let Some(op) = AdminOpcode::from_raw(sqe.opcode()) else {
        return Done::err(StatusCode::InvalidOpcode);
    };
    match op {
        AdminOpcode::Identify => identify(ctrl, sqe, out),
        AdminOpcode::GetLogPage => get_log_page(ctrl, shared, sqe, out),
        AdminOpcode::GetFeatures => {
            let fdp = ctrl.subsystem().and_then(|s| crate::fdp::get_feature(s, sqe, out));
            fdp.unwrap_or_else(|| get_features(ctrl, sqe))
        }
        AdminOpcode::SetFeatures => {
            if Features::decode(sqe).save {
                return Done::err(StatusCode::FeatureNotSaveable);
            }
            let fdp = ctrl.subsystem().and_then(|s| crate::fdp::set_feature(s, sqe, host));
            fdp.unwrap_or_else(|| set_features(ctrl, shared, sqe))
        }
        AdminOpcode::KeepAlive => Done::ok(0),
        AdminOpcode::AsyncEventRequest => {
            if aer.held.len() >= AER_LIMIT {
                return Done::err(StatusCode::AsyncEventLimitExceeded);
            }
            aer.held.push(sqe.cid());
            Done::Held
        }
        // Queues are created by Connect on a fabric; Abort is not offered.
        _ => Done::err(StatusCode::InvalidOpcode),
    }
}

fn page(out: &mut Vec<u8>, bytes: &[u8]) -> Done {
    out.clear();
    out.extend_from_slice(bytes);
    Done::ok(bytes.len())
}

fn identify(ctrl: &Controller, sqe: &SubmissionEntry, out: &mut Vec<u8>) -> Done {
    let cmd = IdentifyCmd::decode(sqe);
    let sub = match &ctrl.role {
        Role::Io(s) => s,
        Role::Discovery if cmd.cns == 0x01 => {
            return page(out, &identify_discovery_controller(ctrl.cntlid)[..]);
        }
        Role::Discovery => return Done::err(StatusCode::InvalidField),
    };
    let zeros = [0u8; IDENTIFY_SIZE];
    let zoned = CommandSetId::Zoned as u8;
    let nvm = CommandSetId::Nvm as u8;
    match cmd.cns {
        0x01 => page(out, &sub.identify_controller(ctrl.cntlid)[..]),
        0x02 => match active_list(sub, cmd.nsid, |_| true) {
            Some(b) => page(out, &b),
            None => Done::err(StatusCode::InvalidNamespaceOrFormat),
        },
        // The active namespaces of one command set.
        0x07 if cmd.csi == zoned || cmd.csi == nvm => {
            let of_set = |id: u32| sub.namespace(id).is_some_and(|n| n.csi() as u8 == cmd.csi);
            match active_list(sub, cmd.nsid, of_set) {
                Some(b) => page(out, &b),
                None => Done::err(StatusCode::InvalidNamespaceOrFormat),
            }
        }
        0x06 if cmd.csi == zoned => page(out, &sub.identify_zns_controller()[..]),
        // NVM-specific controller data: no limits beyond MDTS.
        0x06 if cmd.csi == nvm => page(out, &zeros),
        0x1C => page(out, &IoCommandSetVector::nvm_and_zns().to_bytes()[..]),
        0x00 | 0x03 | 0x05 | 0x08 => {
            if cmd.nsid == 0xFFFF_FFFF && cmd.cns == 0x00 {
                return page(out, &zeros);
            }
            let Some(ns) = sub.namespace(cmd.nsid) else {
                return Done::err(StatusCode::InvalidNamespaceOrFormat);
            };
            match (cmd.cns, cmd.csi) {
                (0x00, _) => page(out, &sub.identify_namespace(ns)[..]),
                (0x03, _) => page(out, &sub.ns_descriptors(ns)[..]),
                (0x05, c) if c == zoned => match sub.identify_zns_namespace(ns) {
                    Some(b) => page(out, &b[..]),
                    // Not a zoned namespace: the command set does not apply.
                    None => Done::err(StatusCode::InvalidIoCommandSet),
                },
                (0x05, c) if c == nvm => page(out, &zeros),
                (0x08, _) => page(out, &sub.identify_independent_namespace(ns)[..]),
                _ => Done::err(StatusCode::InvalidField),
            }
        }
        _ => Done::err(StatusCode::InvalidField),
    }
}

/// Active namespace list: NSIDs above `after` (up to 1024), `None` for
/// the NSIDs the list may not start from.
fn active_list(sub: &Subsystem, after: u32, keep: impl Fn(u32) -> bool) -> Option<Vec<u8>> {
    if after >= 0xFFFF_FFFE {
        return None;
    }
    let mut b = vec![0u8; IDENTIFY_SIZE];
    let ids = sub.namespaces().iter().map(|n| n.nsid).filter(|&id| id > after && keep(id));
    for (i, id) in ids.take(1024).enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&id.to_le_bytes());
    }
    Some(b)
}

fn get_log_page(
    ctrl: &Controller,
    shared: &Shared,
    sqe: &SubmissionEntry,
    out: &mut Vec<u8>,
) -> Done {
    let cmd = GetLogPage::decode(sqe);
    let full: Vec<u8> = match (&ctrl.role, cmd.lid) {
        (Role::Discovery, fabrics::LID_DISCOVERY) => discovery_log(&shared.listener, &ctrl.hostnqn),
        (Role::Discovery, _) => return Done::err(StatusCode::InvalidLogPage),
        (Role::Io(_), 0x01) => vec![0u8; 64],
        (Role::Io(_), 0x02) => smart_log(ctrl).to_vec(),
        (Role::Io(_), 0x03) => firmware_slot_log(),
        (Role::Io(_), 0x04) => vec![0u8; 4096],
        (Role::Io(sub), 0x05) => effects_log(cmd.csi, !crate::fdp::groups(sub).is_empty()),
        (Role::Io(sub), 0x09 | 0x20..=0x23) => {
            match crate::fdp::log_page(sub, &cmd, max_transfer(ctrl)) {
                // The device answered the host's offset and length itself.
                Ok(page) => return page_as_asked(out, page, cmd.length_bytes()),
                Err(status) => return Done::Complete { status, result: 0, data: 0 },
            }
        }
        (Role::Io(sub), 0xC0) => {
            if sqe.nsid != 0 && sqe.nsid != 0xFFFF_FFFF {
                return Done::err(StatusCode::InvalidField);
            }
            match ocp_smart_log(sub) {
                Ok(log) => log.to_bytes().to_vec(),
                Err(code) => return Done::err(code),
            }
        }
        (Role::Io(sub), 0xBF) if cmd.csi == CommandSetId::Zoned as u8 => {
            match sub.namespace(sqe.nsid) {
                None => return Done::err(StatusCode::InvalidNamespaceOrFormat),
                Some(ns) if ns.zoned().is_none() => return Done::err(StatusCode::InvalidField),
                Some(_) => {}
            }
            shared.refresh_zone_changes();
            ctrl.changed_zone_list(sqe.nsid, cmd.rae).to_vec()
        }
        _ => return Done::err(StatusCode::InvalidLogPage),
    };
    let start = cmd.offset.min(full.len() as u64) as usize;
    if cmd.offset > full.len() as u64 {
        return Done::err(StatusCode::InvalidField);
    }
    // NUMD comes from the wire: checked against MDTS before anything is
    // allocated.
    let len = cmd.dwords.saturating_mul(4);
    if len > max_transfer(ctrl) as u64 {
        return Done::err(StatusCode::InvalidField);
    }
    let len = len as usize;
    out.clear();
    out.resize(len, 0);
    let n = len.min(full.len() - start);
    out[..n].copy_from_slice(&full[start..start + n]);
    Done::ok(len)
}

/// The bytes of a page the device cut to the host's offset and length:
/// exactly `len` of them (zeros past what it returned).
fn page_as_asked(out: &mut Vec<u8>, mut page: Vec<u8>, len: usize) -> Done {
    page.resize(len, 0);
    *out = page;
    Done::ok(len)
}

/// The most data one admin command returns: the subsystem's MDTS; the
/// discovery controller (whose Identify reports no limit) 64 KiB, room for
/// a discovery log of hundreds of entries.
fn max_transfer(ctrl: &Controller) -> usize {
    match ctrl.subsystem() {
        Some(s) => s.mdts_bytes(),
        None => 64 * 1024,
    }
}

fn smart_log(ctrl: &Controller) -> [u8; 512] {
    let s = &ctrl.stats;
    SmartLog {
        composite_temperature: 313,
        available_spare: 100,
        available_spare_threshold: 10,
        data_units_read: SmartLog::data_units(s.bytes_read.load(Ordering::Relaxed) as u128),
        data_units_written: SmartLog::data_units(s.bytes_written.load(Ordering::Relaxed) as u128),
        host_read_commands: s.read_commands.load(Ordering::Relaxed) as u128,
        host_write_commands: s.write_commands.load(Ordering::Relaxed) as u128,
        power_cycles: 1,
        media_errors: s.media_errors.load(Ordering::Relaxed) as u128,
        ..SmartLog::default()
    }
    .to_bytes()
}

/// The OCP SMART / Health Information Extended page (LID C0h): the
/// subsystem's media are its devices' (an FTL's device included), so its
/// media counters are the sum of theirs, and its erase counts the most and
/// the least of theirs (a device that does not count erases says 0).
/// Invalid Log Page unless every device answers with the page, and when
/// no namespace is on a device (block devices of their own).
fn ocp_smart_log(sub: &Subsystem) -> Result<OcpSmartLog, StatusCode> {
    let mut log = OcpSmartLog::new();
    let mut erases: Option<(u32, u32)> = None;
    let request = GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128);
    let devices = sub.media_devices();
    if devices.is_empty() {
        return Err(StatusCode::InvalidLogPage);
    }
    for dev in devices {
        let page = dev.log_page(request).map_err(|e| {
            tracing::debug!(device = %dev.info().uri, error = %e, "no OCP extended SMART log");
            StatusCode::InvalidLogPage
        })?;
        let Ok(bytes) = <&[u8; OcpSmartLog::SIZE]>::try_from(page.as_slice()) else {
            return Err(StatusCode::InvalidLogPage);
        };
        let p = OcpSmartLog::from_bytes(bytes);
        if !p.guid_matches() {
            tracing::debug!(device = %dev.info().uri, "OCP extended SMART log of another GUID");
            return Err(StatusCode::InvalidLogPage);
        }
        log.media_bytes_written += p.media_bytes_written;
        log.media_bytes_read += p.media_bytes_read;
        erases = Some(match erases {
            None => (p.max_erase_count, p.min_erase_count),
            Some((max, min)) => (max.max(p.max_erase_count), min.min(p.min_erase_count)),
        });
    }
    if let Some((max, min)) = erases {
        (log.max_erase_count, log.min_erase_count) = (max, min);
    }
    Ok(log)
}

fn firmware_slot_log() -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[0] = 1; // AFI: slot 1 active
    let fw = env!("CARGO_PKG_VERSION").as_bytes();
    let n = fw.len().min(8);
    b[8..8 + n].copy_from_slice(&fw[..n]);
    b[8 + n..16].fill(b' ');
    b
}

/// Commands Supported and Effects (LID 05h) of command set `csi`: CSUPP
/// (bit 0) and LBCC (bit 1, logical block content change) per opcode;
/// with `fdp`, the I/O Management commands of the NVM command set.
fn effects_log(csi: u8, fdp: bool) -> Vec<u8> {
    const CSUPP: u32 = 1 << 0;
    const LBCC: u32 = 1 << 1;
    let mut b = vec![0u8; 4096];
    let mut set = |io: bool, opcode: u8, flags: u32| {
        let at = if io { 1024 } else { 0 } + 4 * opcode as usize;
        b[at..at + 4].copy_from_slice(&flags.to_le_bytes());
    };
    for op in [
        AdminOpcode::GetLogPage,
        AdminOpcode::Identify,
        AdminOpcode::SetFeatures,
        AdminOpcode::GetFeatures,
        AdminOpcode::AsyncEventRequest,
        AdminOpcode::KeepAlive,
    ] {
        set(false, op as u8, CSUPP);
    }
    if csi == CommandSetId::Nvm as u8 || csi == CommandSetId::Zoned as u8 {
        set(true, IoOpcode::Flush as u8, CSUPP);
        set(true, IoOpcode::Read as u8, CSUPP);
        set(true, IoOpcode::Compare as u8, CSUPP);
        set(true, IoOpcode::Verify as u8, CSUPP);
        for op in [IoOpcode::Write, IoOpcode::WriteZeroes, IoOpcode::Copy] {
            set(true, op as u8, CSUPP | LBCC);
        }
    }
    if csi == CommandSetId::Nvm as u8 {
        set(true, IoOpcode::DatasetManagement as u8, CSUPP | LBCC);
    }
    if csi == CommandSetId::Nvm as u8 && fdp {
        set(true, IoOpcode::IoManagementReceive as u8, CSUPP);
        set(true, IoOpcode::IoManagementSend as u8, CSUPP);
    }
    if csi == CommandSetId::Zoned as u8 {
        set(true, IoOpcode::ZoneMgmtRecv as u8, CSUPP);
        set(true, IoOpcode::ZoneMgmtSend as u8, CSUPP | LBCC);
        set(true, IoOpcode::ZoneAppend as u8, CSUPP | LBCC);
    }
    b
}

fn discovery_log(l: &Listener, hostnqn: &str) -> Vec<u8> {
    if !l.allows(hostnqn) {
        return fabrics::discovery_log_page(1, &[]);
    }
    let entry = DiscoveryEntry {
        trtype: fabrics::TRTYPE_TCP,
        adrfam: if l.addr.is_ipv4() { fabrics::ADRFAM_IPV4 } else { fabrics::ADRFAM_IPV6 },
        subtype: fabrics::SUBTYPE_NVM,
        treq: fabrics::TREQ_SECURE_NOT_REQUIRED | fabrics::TREQ_DISABLE_SQ_FLOW_CONTROL,
        portid: 1,
        cntlid: 0xFFFF,
        asqsz: 32,
        trsvcid: l.addr.port().to_string(),
        subnqn: l.subnqn.clone(),
        traddr: l.addr.ip().to_string(),
        ..DiscoveryEntry::default()
    };
    fabrics::discovery_log_page(1, &[entry])
}

/// Feature identifiers the target keeps (beyond `zns_spec::features`).
mod fid {
    pub const ARBITRATION: u8 = 0x01;
    pub const POWER_MANAGEMENT: u8 = 0x02;
    pub const TEMPERATURE_THRESHOLD: u8 = 0x04;
    pub const ERROR_RECOVERY: u8 = 0x05;
    pub const VOLATILE_WRITE_CACHE: u8 = 0x06;
    pub const NUMBER_OF_QUEUES: u8 = 0x07;
    pub const WRITE_ATOMICITY: u8 = 0x0A;
    pub const ASYNC_EVENT_CONFIG: u8 = 0x0B;
    pub const KEEP_ALIVE_TIMER: u8 = 0x0F;
    pub const IO_COMMAND_SET_PROFILE: u8 = 0x19;
}

fn get_features(ctrl: &Controller, sqe: &SubmissionEntry) -> Done {
    let cmd = Features::decode(sqe);
    if cmd.sel == 3 {
        // Supported capabilities: changeable (bit 2), not saveable.
        return match cmd.fid {
            fid::NUMBER_OF_QUEUES
            | fid::ASYNC_EVENT_CONFIG
            | fid::KEEP_ALIVE_TIMER
            | fid::VOLATILE_WRITE_CACHE
            | fid::IO_COMMAND_SET_PROFILE => Done::result(1 << 2),
            fid::ARBITRATION
            | fid::POWER_MANAGEMENT
            | fid::TEMPERATURE_THRESHOLD
            | fid::ERROR_RECOVERY
            | fid::WRITE_ATOMICITY => Done::result(0),
            _ => Done::err(StatusCode::InvalidField),
        };
    }
    let v = match cmd.fid {
        fid::NUMBER_OF_QUEUES => {
            let n = ctrl.io_queues.load(Ordering::Relaxed) as u64;
            n | n << 16
        }
        fid::ASYNC_EVENT_CONFIG => ctrl.async_event_config.load(Ordering::Relaxed) as u64,
        fid::KEEP_ALIVE_TIMER => ctrl.kato_ms.load(Ordering::Relaxed) as u64,
        fid::VOLATILE_WRITE_CACHE => ctrl.write_cache.load(Ordering::Relaxed) as u64,
        fid::TEMPERATURE_THRESHOLD => 0x0157, // 343 K over-temperature threshold
        fid::ARBITRATION
        | fid::POWER_MANAGEMENT
        | fid::ERROR_RECOVERY
        | fid::WRITE_ATOMICITY
        | fid::IO_COMMAND_SET_PROFILE => 0,
        _ => return Done::err(StatusCode::InvalidField),
    };
    Done::result(v)
}

fn set_features(ctrl: &Controller, shared: &Shared, sqe: &SubmissionEntry) -> Done {
    let cmd = Features::decode(sqe);
    if cmd.save {
        return Done::err(StatusCode::FeatureNotSaveable);
    }
    match cmd.fid {
        fid::NUMBER_OF_QUEUES => {
            let (sq, cq) = (cmd.value & 0xFFFF, cmd.value >> 16);
            if sq == 0xFFFF || cq == 0xFFFF {
                return Done::err(StatusCode::InvalidField);
            }
            let granted = sq.min(cq).min(MAX_IO_QUEUES - 1);
            ctrl.io_queues.store(granted, Ordering::Relaxed);
            Done::result(granted as u64 | (granted as u64) << 16)
        }
        fid::ASYNC_EVENT_CONFIG => {
            // Changes made before the switch are listed under the old
            // setting: enabling notices does not announce them.
            shared.refresh_zone_changes();
            ctrl.async_event_config.store(cmd.value, Ordering::Relaxed);
            Done::ok(0)
        }
        fid::KEEP_ALIVE_TIMER => {
            ctrl.set_kato(cmd.value);
            Done::ok(0)
        }
        fid::VOLATILE_WRITE_CACHE => {
            ctrl.write_cache.store(cmd.value & 1 != 0, Ordering::Relaxed);
            Done::ok(0)
        }
        fid::IO_COMMAND_SET_PROFILE if cmd.value & 0x1FF == 0 => Done::ok(0),
        fid::TEMPERATURE_THRESHOLD => Done::ok(0),
        fid::ARBITRATION
        | fid::POWER_MANAGEMENT
        | fid::ERROR_RECOVERY
        | fid::WRITE_ATOMICITY
        | fid::IO_COMMAND_SET_PROFILE => Done::err(StatusCode::FeatureNotChangeable),
        _ => Done::err(StatusCode::InvalidField),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zns_effects_log_lists_zone_commands_and_the_nvm_one_does_not() {
        let at = |b: &[u8], op: u8| {
            u32::from_le_bytes(b[1024 + 4 * op as usize..][..4].try_into().unwrap())
        };
        let z = effects_log(2, true);
        assert_eq!(at(&z, 0x7D), 0b11);
        assert_eq!(at(&z, 0x7A), 0b01);
        assert_eq!(at(&z, 0x02), 0b01);
        let n = effects_log(0, false);
        assert_eq!(at(&n, 0x7D), 0);
        assert_eq!(at(&n, 0x01), 0b11);
        assert_eq!(at(&n, 0x12), 0);
        let f = effects_log(0, true);
        assert_eq!((at(&f, 0x12), at(&f, 0x1D)), (0b01, 0b01));
        assert_eq!(at(&z, 0x12), 0, "FDP is for NVM namespaces");
    }
}
