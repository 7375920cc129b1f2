//! Admin commands: Identify, queue creation and deletion, features, logs.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use zns_spec::command::{CreateIoCq, CreateIoSq, DeleteQueue, Features, GetLogPage, IdentifyCmd};
use zns_spec::features::{FeatureId, NumberOfQueues};
use zns_spec::identify::{
    ActiveNamespaceList, Cns, IdentifyController, IdentifyNamespace, IoCommandSetVector, LbaFormat,
    NamespaceIdDescriptor, NamespaceIdDescriptorList, Oncs, ZnsController, ZnsNamespace,
    ZoneFormatExtension,
};
use zns_spec::log::{
    ChangedZoneList, EnduranceGroupLog, ErrorLogEntry, LogPageId, OcpSmartLog, SmartLog,
};
use zns_spec::regs::{Cc, Version};
use zns_spec::{
    AdminOpcode, CommandSetId, Status, StatusCode, StatusCodeType, StatusField, SubmissionEntry,
};

use crate::controller::{Controller, Outcome, PAGE_SIZE};
use crate::namespace::Namespace;
use crate::profile::Profile;
use crate::prp;

/// This controller's identifier (Identify Controller CNTLID).
const CONTROLLER_ID: u16 = 1;

/// Error log entries kept (Identify Controller ELPE + 1).
const ERROR_LOG_ENTRIES: usize = 64;

/// Admin-side controller state: features and the error log.
#[derive(Debug)]
pub(crate) struct AdminState {
    /// I/O (SQs, CQs) granted by Set Features Number of Queues.
    pub granted_queues: (u16, u16),
    queues_requested: bool,
    volatile_write_cache: bool,
    /// Raw values of features stored but not acted on.
    plain_features: [(u8, u32); 5],
    error_count: u64,
    errors: VecDeque<ErrorLogEntry>,
    /// Commands failed with a Media and Data Integrity status (SMART log).
    media_errors: u64,
}

impl AdminState {
    pub fn new(profile: &Profile) -> Self {
        let q = profile.controller.max_io_queues;
        AdminState {
            granted_queues: (q, q),
            queues_requested: false,
            volatile_write_cache: profile.controller.volatile_write_cache,
            plain_features: [(0x01, 0), (0x02, 0), (0x04, 0x0157), (0x08, 0), (0x0B, 0)],
            error_count: 0,
            errors: VecDeque::with_capacity(ERROR_LOG_ENTRIES),
            media_errors: 0,
        }
    }

    /// Power loss: everything volatile is gone; the SMART counters, kept
    /// in non-volatile storage by a drive, stay.
    pub fn power_cut(&mut self, profile: &Profile) {
        let media_errors = self.media_errors;
        *self = AdminState::new(profile);
        self.media_errors = media_errors;
    }

    /// Controller reset: features return to defaults, the error log stays.
    pub fn reset(&mut self, profile: &Profile) {
        let errors = std::mem::take(&mut self.errors);
        let (count, media_errors) = (self.error_count, self.media_errors);
        *self = AdminState::new(profile);
        self.errors = errors;
        self.error_count = count;
        self.media_errors = media_errors;
    }

    /// Records a failed command in the Error Information log.
    pub fn log_error(&mut self, sqid: u16, sqe: &SubmissionEntry, status: Status) {
        self.error_count += 1;
        if status.sct == StatusCodeType::MediaError {
            self.media_errors += 1;
        }
        if self.errors.len() == ERROR_LOG_ENTRIES {
            self.errors.pop_back();
        }
        self.errors.push_front(ErrorLogEntry {
            error_count: self.error_count,
            sqid,
            cid: sqe.cid(),
            status: StatusField::new(status, false, true),
            lba: sqe.cdw10_11(),
            nsid: sqe.nsid,
            ..ErrorLogEntry::default()
        });
    }
}

/// Executes one admin command.
pub(crate) fn execute(ctrl: &Controller, sqe: &SubmissionEntry) -> Outcome {
    if sqe.fuse() != 0 || sqe.psdt() != 0 {
        return Err(StatusCode::InvalidField.into());
    }
    let Some(op) = AdminOpcode::from_raw(sqe.opcode()) else {
        return Err(StatusCode::InvalidOpcode.into());
    };
    let r = match op {
        AdminOpcode::Identify => identify(ctrl, sqe),
        AdminOpcode::CreateIoCq => create_cq(ctrl, sqe),
        AdminOpcode::CreateIoSq => create_sq(ctrl, sqe),
        AdminOpcode::DeleteIoSq => ctrl.delete_sq(DeleteQueue::decode(sqe).qid).map(|_| 0),
        AdminOpcode::DeleteIoCq => ctrl.delete_cq(DeleteQueue::decode(sqe).qid).map(|_| 0),
        AdminOpcode::GetFeatures => get_features(ctrl, sqe),
        AdminOpcode::SetFeatures => set_features(ctrl, sqe),
        AdminOpcode::GetLogPage => get_log_page(ctrl, sqe),
        // Abort: the command is never found in time; DW0 bit 0 = not aborted.
        AdminOpcode::Abort => Ok(1),
        AdminOpcode::KeepAlive => Ok(0),
        // Asynchronous events are not reported; hosts poll the logs instead.
        AdminOpcode::AsyncEventRequest => Err(StatusCode::InvalidOpcode),
    };
    r.map_err(Status::from)
}

/// `data` → host memory through the admin command's PRPs.
fn send(ctrl: &Controller, sqe: &SubmissionEntry, data: &[u8]) -> Result<(), StatusCode> {
    let mut at = 0;
    prp::walk(&*ctrl.host, PAGE_SIZE, sqe.prp1, sqe.prp2, data.len(), |s| {
        ctrl.host
            .write(s.addr, &data[at..at + s.len])
            .map_err(|_| StatusCode::DataTransferError)?;
        at += s.len;
        Ok(())
    })
}

/// Host memory → `buf` through the admin command's PRPs.
fn receive(ctrl: &Controller, sqe: &SubmissionEntry, buf: &mut [u8]) -> Result<(), StatusCode> {
    let mut at = 0;
    prp::walk(&*ctrl.host, PAGE_SIZE, sqe.prp1, sqe.prp2, buf.len(), |s| {
        ctrl.host
            .read(s.addr, &mut buf[at..at + s.len])
            .map_err(|_| StatusCode::DataTransferError)?;
        at += s.len;
        Ok(())
    })
}

fn create_cq(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let c = CreateIoCq::decode(sqe);
    if c.entries < 2 || c.entries > ctrl.max_queue_entries() {
        return Err(StatusCode::InvalidQueueSize);
    }
    if !c.physically_contiguous {
        // CAP.CQR = 1: queues must be physically contiguous.
        return Err(StatusCode::InvalidField);
    }
    if c.base == 0 || !c.base.is_multiple_of(PAGE_SIZE as u64) {
        return Err(StatusCode::InvalidPrpOffset);
    }
    if c.interrupts_enabled && c.interrupt_vector != 0 {
        return Err(StatusCode::InvalidInterruptVector);
    }
    ctrl.create_cq(c.qid, c.base, c.entries).map(|_| 0)
}

fn create_sq(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let c = CreateIoSq::decode(sqe);
    if c.entries < 2 || c.entries > ctrl.max_queue_entries() {
        return Err(StatusCode::InvalidQueueSize);
    }
    if !c.physically_contiguous {
        return Err(StatusCode::InvalidField);
    }
    if c.base == 0 || !c.base.is_multiple_of(PAGE_SIZE as u64) {
        return Err(StatusCode::InvalidPrpOffset);
    }
    ctrl.create_sq(c.qid, c.base, c.entries, c.cqid).map(|_| 0)
}

// ---- Identify -------------------------------------------------------------

fn identify(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let cmd = IdentifyCmd::decode(sqe);
    let cns = Cns::from_raw(cmd.cns).ok_or(StatusCode::InvalidField)?;
    let data: Box<[u8; 4096]> = match cns {
        Cns::Controller => identify_controller(ctrl).to_bytes(),
        Cns::Namespace => match namespace_for_identify(ctrl, sqe.nsid)? {
            Some(ns) => identify_namespace(ns).to_bytes(),
            None => Box::new([0; 4096]),
        },
        Cns::ActiveNamespaces => active_list(ctrl, sqe.nsid, None)?.to_bytes(),
        Cns::CsiActiveNamespaces => {
            let csi = csi_of(cmd.csi)?;
            active_list(ctrl, sqe.nsid, Some(csi))?.to_bytes()
        }
        Cns::NamespaceIdDescriptors => match namespace_for_identify(ctrl, sqe.nsid)? {
            Some(ns) => descriptors(ns).to_bytes(),
            None => return Err(StatusCode::InvalidNamespaceOrFormat),
        },
        Cns::CsiNamespace => {
            let csi = csi_of(cmd.csi)?;
            match namespace_for_identify(ctrl, sqe.nsid)? {
                Some(ns) if ns.csi() != csi => return Err(StatusCode::InvalidField),
                Some(ns) if csi == CommandSetId::Zoned => zns_namespace(ns).to_bytes(),
                _ => Box::new([0; 4096]),
            }
        }
        Cns::CsiController => match csi_of(cmd.csi)? {
            CommandSetId::Zoned => {
                ZnsController { zasl: ctrl.profile.controller.zasl_log2 }.to_bytes()
            }
            _ => Box::new([0; 4096]),
        },
        Cns::IoCommandSets => {
            // CNTID names the controller; 0 is accepted as "this one".
            if cmd.cntid != 0 && cmd.cntid != CONTROLLER_ID {
                return Err(StatusCode::InvalidField);
            }
            command_set_vector().to_bytes()
        }
        Cns::IoCommandSetIndependentNamespace => return Err(StatusCode::InvalidField),
    };
    send(ctrl, sqe, &data[..])?;
    Ok(0)
}

/// The command set combinations offered: 0 = NVM + ZNS, 1 = NVM only.
pub(crate) fn command_set_vector() -> IoCommandSetVector {
    let mut v = IoCommandSetVector::nvm_and_zns();
    v.set_combination(1, IoCommandSetVector::bit(CommandSetId::Nvm));
    v
}

fn csi_of(raw: u8) -> Result<CommandSetId, StatusCode> {
    match CommandSetId::from_raw(raw) {
        Some(c @ (CommandSetId::Nvm | CommandSetId::Zoned)) => Ok(c),
        _ => Err(StatusCode::InvalidField),
    }
}

/// `Ok(None)` for a valid but inactive NSID (its data structure is zeros).
fn namespace_for_identify(ctrl: &Controller, nsid: u32) -> Result<Option<&Namespace>, StatusCode> {
    if nsid == 0 || nsid as usize > ctrl.namespaces.len() {
        return Err(StatusCode::InvalidNamespaceOrFormat);
    }
    Ok(ctrl.namespace(nsid))
}

fn active_list(
    ctrl: &Controller,
    after: u32,
    csi: Option<CommandSetId>,
) -> Result<ActiveNamespaceList, StatusCode> {
    if after >= 0xFFFF_FFFE {
        return Err(StatusCode::InvalidNamespaceOrFormat);
    }
    let ids = ctrl
        .namespaces
        .iter()
        .filter(|ns| ns.nsid > after && ctrl.namespace_active(ns))
        .filter(|ns| csi.is_none_or(|c| ns.csi() == c))
        .map(|ns| ns.nsid)
        .collect();
    Ok(ActiveNamespaceList { ids })
}

fn identify_controller(ctrl: &Controller) -> IdentifyController {
    let c = &ctrl.profile.controller;
    IdentifyController {
        vid: 0x1B36,
        ssvid: 0x1AF4,
        serial_number: c.serial.clone(),
        model_number: c.model.clone(),
        firmware_revision: env!("CARGO_PKG_VERSION").chars().take(8).collect(),
        mdts: c.mdts_log2,
        cntlid: CONTROLLER_ID,
        ver: Version::V2_0_0,
        cntrltype: IdentifyController::CNTRLTYPE_IO,
        // Endurance groups and Flexible Data Placement with an FDP namespace.
        ctratt: crate::fdp::ctratt(ctrl),
        endgidmax: crate::fdp::endgidmax(ctrl),
        acl: 3,
        aerl: 0,
        lpa: 1 << 1, // command-set-specific (CSI) log pages supported
        elpe: (ERROR_LOG_ENTRIES - 1) as u8,
        sqes: 0x66,
        cqes: 0x44,
        maxcmd: 0,
        nn: ctrl.namespaces.len() as u32,
        oncs: Oncs(
            Oncs::WRITE_ZEROES
                | Oncs::SAVE_SELECT_FEATURES
                | Oncs::COPY
                // Deallocation on conventional namespaces.
                | if ctrl.namespaces.iter().any(|n| !n.is_zoned()) {
                    Oncs::DATASET_MANAGEMENT
                } else {
                    0
                },
        ),
        vwc: if c.volatile_write_cache { IdentifyController::VWC_PRESENT | 0b110 } else { 0 },
        ocfs: IdentifyController::OCFS_FORMAT0,
        subnqn: format!("nqn.2024-01.io.znskit:emulator:{}", c.serial),
        ..IdentifyController::default()
    }
}

fn identify_namespace(ns: &Namespace) -> IdentifyNamespace {
    let p = &ns.profile;
    let cap = ns.capacity();
    let mut lbaf = [LbaFormat::default(); 64];
    lbaf[0] =
        LbaFormat { metadata_size: p.metadata_size, ..LbaFormat::with_block_size(p.block_size) };
    IdentifyNamespace {
        nsze: cap,
        ncap: cap,
        nuse: cap,
        nlbaf: 0,
        flbas: IdentifyNamespace::encode_flbas(0, false),
        // Metadata in a separate buffer (MPTR) only.
        mc: if p.metadata_size > 0 { 1 << 1 } else { 0 },
        // Deallocated blocks read as zeros.
        dlfeat: 0x01,
        // NSATTR bit 0: a namespace whose image could not be trusted is
        // read-only, and hosts are told so.
        nsattr: u8::from(ns.write_protected),
        endgid: crate::fdp::endgid(ns),
        mssrl: p.copy_max_range_blocks,
        mcl: p.copy_max_blocks,
        msrc: (p.copy_max_ranges - 1) as u8,
        nguid: nguid(ns.nsid),
        lbaf,
        ..IdentifyNamespace::default()
    }
}

fn nguid(nsid: u32) -> [u8; 16] {
    let mut g = *b"znskit-emulated\0";
    g[12..16].copy_from_slice(&nsid.to_be_bytes());
    g
}

fn descriptors(ns: &Namespace) -> NamespaceIdDescriptorList {
    NamespaceIdDescriptorList {
        descriptors: vec![
            NamespaceIdDescriptor::Nguid(nguid(ns.nsid)),
            NamespaceIdDescriptor::Csi(ns.csi() as u8),
        ],
    }
}

fn zns_namespace(ns: &Namespace) -> ZnsNamespace {
    let g = ns.zones().expect("zoned namespace").geometry();
    let mut lbafe = [ZoneFormatExtension::default(); 64];
    lbafe[0] = ZoneFormatExtension {
        zone_size: g.zone_size,
        zdes: (g.descriptor_extension_bytes / 64) as u8,
    };
    let mut ozcs = 0;
    if g.read_across_boundaries {
        ozcs |= ZnsNamespace::OZCS_READ_ACROSS_BOUNDARIES;
    }
    let mut id = ZnsNamespace {
        zoc: 0,
        max_active: g.max_active,
        max_open: g.max_open,
        lbafe,
        ..ZnsNamespace::default()
    };
    if let Some(w) = &g.zrwa {
        ozcs |= ZnsNamespace::OZCS_ZRWA;
        id.numzrwa = w.resources - 1;
        // Validated: the size fits 16 bits and the granularity divides it.
        id.zrwasz = w.size as u16;
        id.zrwafg = w.flush_granularity as u16;
        if w.explicit_flush {
            id.zrwacap = ZnsNamespace::ZRWACAP_EXPLICIT_FLUSH;
        }
    }
    id.ozcs = ozcs;
    id
}

// ---- Features -------------------------------------------------------------

fn get_features(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let f = Features::decode(sqe);
    let st = ctrl.admin_state.lock();
    match FeatureId::from_raw(f.fid) {
        Some(FeatureId::NumberOfQueues) => {
            let (s, c) = st.granted_queues;
            Ok(NumberOfQueues { submission: s, completion: c }.to_dword().unwrap_or(0) as u64)
        }
        Some(FeatureId::VolatileWriteCache) => {
            if !ctrl.profile.controller.volatile_write_cache {
                return Err(StatusCode::InvalidField);
            }
            Ok(st.volatile_write_cache as u64)
        }
        Some(FeatureId::IoCommandSetProfile) => Ok(ctrl.iocs_index.load(Ordering::Relaxed) as u64),
        Some(FeatureId::FlexibleDataPlacement) => crate::fdp::get_feature(ctrl, sqe),
        Some(FeatureId::FdpEvents) => {
            crate::fdp::get_events_feature(ctrl, sqe, |data| send(ctrl, sqe, data))
        }
        _ => st
            .plain_features
            .iter()
            .find(|(id, _)| *id == f.fid)
            .map(|(_, v)| *v as u64)
            .ok_or(StatusCode::InvalidField),
    }
}

fn set_features(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let f = Features::decode(sqe);
    if f.save {
        return Err(StatusCode::FeatureNotSaveable);
    }
    let mut st = ctrl.admin_state.lock();
    match FeatureId::from_raw(f.fid) {
        Some(FeatureId::NumberOfQueues) => {
            let want = NumberOfQueues::from_dword(sqe.cdw11);
            if want.submission == 0 || want.completion == 0 {
                // A 0's based value of FFFFh asks for 65536 queues: invalid.
                return Err(StatusCode::InvalidField);
            }
            if st.queues_requested {
                return Err(StatusCode::CommandSequenceError);
            }
            let max = ctrl.profile.controller.max_io_queues;
            st.granted_queues = (want.submission.min(max), want.completion.min(max));
            st.queues_requested = true;
            let (s, c) = st.granted_queues;
            Ok(NumberOfQueues { submission: s, completion: c }.to_dword().unwrap_or(0) as u64)
        }
        Some(FeatureId::VolatileWriteCache) => {
            if !ctrl.profile.controller.volatile_write_cache {
                return Err(StatusCode::InvalidField);
            }
            let enable = sqe.cdw11 & 1 != 0;
            if st.volatile_write_cache && !enable {
                // Turning the cache off writes it back first.
                for ns in &ctrl.namespaces {
                    ns.flush().map_err(|_| StatusCode::WriteFault)?;
                }
            }
            st.volatile_write_cache = enable;
            ctrl.write_cache.store(enable, Ordering::Relaxed);
            Ok(0)
        }
        Some(FeatureId::IoCommandSetProfile) => {
            if ctrl.css.load(Ordering::Relaxed) != Cc::CSS_ALL_IO_SETS {
                return Err(StatusCode::InvalidField);
            }
            let index = (sqe.cdw11 & 0x1FF) as u16;
            if command_set_vector().combination(index) == 0 {
                return Err(StatusCode::IoCommandSetCombinationRejected);
            }
            ctrl.iocs_index.store(index as u8, Ordering::Relaxed);
            Ok(0)
        }
        Some(FeatureId::FlexibleDataPlacement) => crate::fdp::set_feature(ctrl, sqe),
        Some(FeatureId::FdpEvents) => {
            crate::fdp::set_events_feature(ctrl, sqe, |buf| receive(ctrl, sqe, buf))
        }
        _ => {
            let slot = st.plain_features.iter_mut().find(|(id, _)| *id == f.fid);
            let slot = slot.ok_or(StatusCode::InvalidField)?;
            slot.1 = sqe.cdw11;
            Ok(0)
        }
    }
}

// ---- Logs -----------------------------------------------------------------

fn get_log_page(ctrl: &Controller, sqe: &SubmissionEntry) -> Result<u64, StatusCode> {
    let cmd = GetLogPage::decode(sqe);
    let len = cmd.length_bytes();
    if len > ctrl.max_transfer_bytes() {
        return Err(StatusCode::InvalidField);
    }
    let page: Vec<u8> = match LogPageId::from_raw(cmd.lid) {
        Some(LogPageId::ErrorInformation) => {
            let st = ctrl.admin_state.lock();
            let mut v = vec![0u8; ERROR_LOG_ENTRIES * ErrorLogEntry::SIZE];
            for (i, e) in st.errors.iter().enumerate() {
                v[i * 64..(i + 1) * 64].copy_from_slice(&e.to_bytes());
            }
            v
        }
        Some(LogPageId::SmartHealth) => {
            // Controller-wide only (LPA bit 0 clear).
            if sqe.nsid != 0 && sqe.nsid != 0xFFFF_FFFF {
                return Err(StatusCode::InvalidField);
            }
            smart_log(ctrl).to_bytes().to_vec()
        }
        Some(LogPageId::OcpSmartExtended) => {
            if sqe.nsid != 0 && sqe.nsid != 0xFFFF_FFFF {
                return Err(StatusCode::InvalidField);
            }
            ocp_smart_log(ctrl).to_bytes().to_vec()
        }
        Some(LogPageId::ChangedZoneList) => {
            if cmd.csi != CommandSetId::Zoned as u8 {
                return Err(StatusCode::InvalidField);
            }
            let ns = ctrl.namespace(sqe.nsid).ok_or(StatusCode::InvalidNamespaceOrFormat)?;
            let zones = ns.zones().ok_or(StatusCode::InvalidField)?;
            let ids = zones.take_changed_zones(ChangedZoneList::MAX_ZONES + 1);
            ChangedZoneList::from_zones(&ids).to_bytes().to_vec()
        }
        Some(LogPageId::EnduranceGroupInformation) => {
            endurance_log(ctrl, cmd.lsi)?.to_bytes().to_vec()
        }
        Some(
            lid @ (LogPageId::FdpConfigurations
            | LogPageId::ReclaimUnitHandleUsage
            | LogPageId::FdpStatistics
            | LogPageId::FdpEvents),
        ) => crate::fdp::log_page(ctrl, lid, &cmd)?,
        _ => return Err(StatusCode::InvalidLogPage),
    };
    let offset = cmd.offset;
    if !offset.is_multiple_of(4) || offset > page.len() as u64 {
        return Err(StatusCode::InvalidField);
    }
    let mut out = vec![0u8; len];
    let avail = &page[offset as usize..];
    let n = avail.len().min(len);
    out[..n].copy_from_slice(&avail[..n]);
    send(ctrl, sqe, &out)?;
    Ok(0)
}

/// The Endurance Group Information page of group `endgid` (LSI): the one
/// group, the FDP namespace's, with its firmware's host and media blocks
/// (data and media units written: their ratio is the group's write
/// amplification) and its flash as the total capacity, all of it given to
/// the namespace. Reads, commands and errors are the controller's, as
/// SMART reports them (an FDP profile has that one namespace). Invalid Log
/// Page on a controller without endurance groups, Invalid Field in Command
/// for another group.
fn endurance_log(ctrl: &Controller, endgid: u16) -> Result<EnduranceGroupLog, StatusCode> {
    let ns = crate::fdp::namespace(ctrl).ok_or(StatusCode::InvalidLogPage)?;
    if endgid != crate::fdp::ENDURANCE_GROUP {
        return Err(StatusCode::InvalidField);
    }
    let fw = ns.firmware().ok_or(StatusCode::InvalidLogPage)?.stats();
    let bytes = |blocks: u64| blocks as u128 * ns.block_size() as u128;
    let s = smart_log(ctrl);
    Ok(EnduranceGroupLog {
        critical_warning: s.critical_warning,
        available_spare: s.available_spare,
        available_spare_threshold: s.available_spare_threshold,
        percentage_used: s.percentage_used,
        endurance_estimate: 0,
        data_units_read: s.data_units_read,
        data_units_written: SmartLog::data_units(bytes(fw.host_blocks)),
        media_units_written: SmartLog::data_units(bytes(fw.host_blocks + fw.gc_blocks)),
        host_read_commands: s.host_read_commands,
        host_write_commands: s.host_write_commands,
        media_errors: s.media_errors,
        error_log_entries: s.error_log_entries,
        total_capacity: bytes(fw.physical_blocks),
        unallocated_capacity: 0,
    })
}

/// The SMART / Health Information page: media errors (every command that
/// failed with a Media and Data Integrity status, such as Unrecovered Read
/// Error on a block that fails its data checksum), error log entries, host
/// commands and data units, power cycles and unsafe shutdowns (power
/// cuts), power-on hours. The emulator has no thermal or wear model: the
/// temperature is a constant 313 K (40 °C), the spare 100 %, nothing worn,
/// and busy time is not kept (0).
fn smart_log(ctrl: &Controller) -> SmartLog {
    let io = ctrl.io_totals();
    let st = ctrl.admin_state.lock();
    SmartLog {
        critical_warning: 0,
        composite_temperature: 313,
        available_spare: 100,
        available_spare_threshold: 10,
        percentage_used: 0,
        data_units_read: SmartLog::data_units(io.bytes_read as u128),
        data_units_written: SmartLog::data_units(io.bytes_written as u128),
        host_read_commands: io.read_commands as u128,
        host_write_commands: io.write_commands as u128,
        controller_busy_time: 0,
        power_cycles: ctrl.power_cycles.load(Ordering::Relaxed) as u128,
        power_on_hours: (ctrl.created.elapsed().as_secs() / 3600) as u128,
        unsafe_shutdowns: ctrl.unsafe_shutdowns.load(Ordering::Relaxed) as u128,
        media_errors: st.media_errors as u128,
        error_log_entries: st.error_count as u128,
    }
}

/// The OCP SMART / Health Information Extended page (LID C0h): what the
/// media took. A namespace without a device-side FTL (a zoned one)
/// programs exactly the blocks its Write, Zone Append and Copy commands
/// place (a rewrite inside a zone random write area again; Write Zeroes
/// deallocates: nothing is programmed), and on a timed controller the
/// padding a Finish programs to the rest of a zone with data; a
/// conventional twin's firmware programs the host's blocks and those its
/// garbage collection moves, each moved block read once too, and knows
/// its segments' erase counts. Media reads are the host's Read and Copy
/// sources (blocks never written included) plus those moves, less what a
/// timed controller served from its write buffer (data not yet
/// programmed, which no die read). Bad blocks,
/// ECC, thermal, power and the zoned namespaces' erase counts are not
/// modelled: zero, as the specification has it for unsupported fields.
fn ocp_smart_log(ctrl: &Controller) -> OcpSmartLog {
    let io = ctrl.io_totals();
    let mut log = OcpSmartLog {
        media_bytes_written: io.media_bytes_written as u128,
        media_bytes_read: io.media_bytes_read.saturating_sub(ctrl.buffer_read_bytes()) as u128,
        ..OcpSmartLog::new()
    };
    let mut erases: Option<(u32, u32)> = None;
    for ns in &ctrl.namespaces {
        let Some(f) = ns.firmware() else { continue };
        let s = f.stats();
        let bs = ns.block_size() as u128;
        log.media_bytes_written += (s.host_blocks + s.gc_blocks) as u128 * bs;
        log.media_bytes_read += s.gc_blocks as u128 * bs;
        erases = Some(match erases {
            None => (s.max_erases, s.min_erases),
            Some((max, min)) => (max.max(s.max_erases), min.min(s.min_erases)),
        });
    }
    if let Some((max, min)) = erases {
        (log.max_erase_count, log.min_erase_count) = (max, min);
    }
    log
}
