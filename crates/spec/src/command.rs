//! Typed commands: builders that produce a [`SubmissionEntry`] and decoders
//! that read one back, so the driver and the emulator share one encoding.
//!
//! Builders leave the command identifier and the data pointers (PRP1/PRP2)
//! zero for the driver to fill in; the exception is queue creation, whose
//! PRP1 is the queue's base address and so part of the command. Counts are
//! real counts (1-based) here and 0's based on the wire; a builder fails with
//! [`CommandError`] when a count is zero or does not fit its field.
//!
//! Decoders accept any entry. Identifiers a controller may not serve (CNS,
//! feature, log page) are kept raw, with an accessor that names them; zone
//! actions and report filters with reserved values fail with [`DecodeError`],
//! which the controller answers with Invalid Field in Command.

use crate::features::{
    self, FeatureId, FeatureSelect, IoCommandSetProfile, NumberOfQueues, VolatileWriteCache,
};
use crate::identify::Cns;
use crate::opcode::{AdminOpcode, CommandSetId, IoOpcode};
use crate::sqe::SubmissionEntry;
use crate::status::StatusCode;
use crate::zone::{ReportFilter, ZoneReceiveAction, ZoneSendAction};

pub use crate::log::GetLogPage;

/// A command the builder cannot encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// A count is zero; the wire field is 0's based and starts at one.
    #[error("{field} must be at least 1")]
    ZeroCount {
        /// The field's name.
        field: &'static str,
    },
    /// A count or value does not fit its field.
    #[error("{field} = {value} exceeds the maximum {max}")]
    TooLarge {
        /// The field's name.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The largest value the field holds.
        max: u64,
    },
}

/// A submission entry field holding a value the command does not define.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Zone Management Send action reserved.
    #[error("reserved zone send action {0:#04x}")]
    ZoneSendAction(u8),
    /// Zone Management Receive action reserved.
    #[error("reserved zone receive action {0:#04x}")]
    ZoneReceiveAction(u8),
    /// Zone Management Receive action specific field (report filter) reserved.
    #[error("reserved zone report filter {0:#04x}")]
    ReportFilter(u8),
}

impl DecodeError {
    /// The status a controller completes the command with: Invalid Field in
    /// Command.
    pub const fn status_code(self) -> StatusCode {
        StatusCode::InvalidField
    }
}

/// Most blocks a 16-bit 0's based NLB field holds.
pub const MAX_BLOCKS: u32 = 65536;

/// Most entries a 16-bit 0's based queue size field holds.
pub const MAX_QUEUE_ENTRIES: u32 = 65536;

/// Most dwords a 32-bit 0's based NUMD field holds.
pub const MAX_DWORDS: u64 = 1 << 32;

/// `count - 1` after checking `1..=max`.
const fn zeros_based(field: &'static str, count: u64, max: u64) -> Result<u64, CommandError> {
    if count == 0 {
        Err(CommandError::ZeroCount { field })
    } else if count > max {
        Err(CommandError::TooLarge { field, value: count, max })
    } else {
        Ok(count - 1)
    }
}

/// NLB (CDW12 15:0) of a block count.
const fn nlb(blocks: u32) -> Result<u32, CommandError> {
    match zeros_based("blocks", blocks as u64, MAX_BLOCKS as u64) {
        Ok(v) => Ok(v as u32),
        Err(e) => Err(e),
    }
}

/// Block count of an NLB field (CDW12 15:0).
const fn blocks_of(cdw12: u32) -> u32 {
    (cdw12 & 0xFFFF) + 1
}

const fn bit(dw: u32, n: u32) -> bool {
    dw & (1 << n) != 0
}

const fn bits(dw: u32, lo: u32, width: u32) -> u32 {
    (dw >> lo) & ((1 << width) - 1)
}

// ---------------------------------------------------------------------------
// Admin commands
// ---------------------------------------------------------------------------

/// Identify (admin 06h). CDW10: CNS (7:0), CNTID (31:16); CDW11: CNS
/// specific identifier (15:0), CSI (31:24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdentifyCmd {
    /// Namespace identifier.
    pub nsid: u32,
    /// CNS: which structure to return, raw (see [`IdentifyCmd::cns_kind`]).
    pub cns: u8,
    /// Controller identifier (CNS values that take one).
    pub cntid: u16,
    /// CNS specific identifier.
    pub cns_specific_id: u16,
    /// Command set identifier, raw (see [`IdentifyCmd::command_set`]).
    pub csi: u8,
}

impl IdentifyCmd {
    /// Identify with every optional field zero.
    pub const fn new(cns: Cns, nsid: u32) -> Self {
        IdentifyCmd { nsid, cns: cns as u8, cntid: 0, cns_specific_id: 0, csi: 0 }
    }

    /// Identify Controller (CNS 01h).
    pub const fn controller() -> Self {
        Self::new(Cns::Controller, 0)
    }

    /// Identify Namespace for the NVM command set (CNS 00h).
    pub const fn namespace(nsid: u32) -> Self {
        Self::new(Cns::Namespace, nsid)
    }

    /// Active namespaces with an NSID above `after` (CNS 02h).
    pub const fn active_namespaces(after: u32) -> Self {
        Self::new(Cns::ActiveNamespaces, after)
    }

    /// Namespace Identification Descriptor list (CNS 03h).
    pub const fn ns_id_descriptors(nsid: u32) -> Self {
        Self::new(Cns::NamespaceIdDescriptors, nsid)
    }

    /// Command set specific Identify Namespace (CNS 05h).
    pub const fn csi_namespace(nsid: u32, csi: CommandSetId) -> Self {
        IdentifyCmd { csi: csi as u8, ..Self::new(Cns::CsiNamespace, nsid) }
    }

    /// Command set specific Identify Controller (CNS 06h).
    pub const fn csi_controller(csi: CommandSetId) -> Self {
        IdentifyCmd { csi: csi as u8, ..Self::new(Cns::CsiController, 0) }
    }

    /// Active namespaces of one command set with an NSID above `after` (CNS 07h).
    pub const fn csi_active_namespaces(after: u32, csi: CommandSetId) -> Self {
        IdentifyCmd { csi: csi as u8, ..Self::new(Cns::CsiActiveNamespaces, after) }
    }

    /// I/O Command Set data structure of controller `cntid` (CNS 1Ch).
    pub const fn io_command_sets(cntid: u16) -> Self {
        IdentifyCmd { cntid, ..Self::new(Cns::IoCommandSets, 0) }
    }

    /// The structure CNS names; `None` for values the controller does not
    /// serve (it answers Invalid Field in Command).
    pub const fn cns_kind(&self) -> Option<Cns> {
        Cns::from_raw(self.cns)
    }

    /// The command set named by CSI, if known.
    pub const fn command_set(&self) -> Option<CommandSetId> {
        CommandSetId::from_raw(self.csi)
    }

    /// The submission entry.
    pub const fn to_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(AdminOpcode::Identify as u8, self.nsid);
        e.cdw10 = self.cns as u32 | (self.cntid as u32) << 16;
        e.cdw11 = self.cns_specific_id as u32 | (self.csi as u32) << 24;
        e
    }

    /// Decodes an Identify entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        IdentifyCmd {
            nsid: e.nsid,
            cns: e.cdw10 as u8,
            cntid: (e.cdw10 >> 16) as u16,
            cns_specific_id: e.cdw11 as u16,
            csi: (e.cdw11 >> 24) as u8,
        }
    }
}

/// Create I/O Completion Queue (admin 05h). PRP1: queue base; CDW10: QID
/// (15:0), QSIZE (31:16, 0's based); CDW11: PC (0), IEN (1), IV (31:16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateIoCq {
    /// Queue identifier.
    pub qid: u16,
    /// Queue entries (1..=65536; controllers require at least 2).
    pub entries: u32,
    /// Base address of the queue memory (PRP1).
    pub base: u64,
    /// PC: the queue is physically contiguous.
    pub physically_contiguous: bool,
    /// IEN: interrupts enabled.
    pub interrupts_enabled: bool,
    /// IV: interrupt vector.
    pub interrupt_vector: u16,
}

impl CreateIoCq {
    /// A physically contiguous, polled (interrupts disabled) queue.
    pub const fn new(qid: u16, entries: u32, base: u64) -> Self {
        CreateIoCq {
            qid,
            entries,
            base,
            physically_contiguous: true,
            interrupts_enabled: false,
            interrupt_vector: 0,
        }
    }

    /// The submission entry; fails when `entries` is 0 or above 65536.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let qsize = match zeros_based("entries", self.entries as u64, MAX_QUEUE_ENTRIES as u64) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(AdminOpcode::CreateIoCq as u8, 0);
        e.prp1 = self.base;
        e.cdw10 = self.qid as u32 | qsize << 16;
        e.cdw11 = self.physically_contiguous as u32
            | (self.interrupts_enabled as u32) << 1
            | (self.interrupt_vector as u32) << 16;
        Ok(e)
    }

    /// Decodes a Create I/O Completion Queue entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        CreateIoCq {
            qid: e.cdw10 as u16,
            entries: (e.cdw10 >> 16) + 1,
            base: e.prp1,
            physically_contiguous: bit(e.cdw11, 0),
            interrupts_enabled: bit(e.cdw11, 1),
            interrupt_vector: (e.cdw11 >> 16) as u16,
        }
    }
}

/// Create I/O Submission Queue (admin 01h). PRP1: queue base; CDW10: QID
/// (15:0), QSIZE (31:16, 0's based); CDW11: PC (0), QPRIO (2:1), CQID
/// (31:16); CDW12: NVMSETID (15:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateIoSq {
    /// Queue identifier.
    pub qid: u16,
    /// Queue entries (1..=65536; controllers require at least 2).
    pub entries: u32,
    /// Base address of the queue memory (PRP1).
    pub base: u64,
    /// PC: the queue is physically contiguous.
    pub physically_contiguous: bool,
    /// QPRIO: priority class for weighted round robin (0 urgent .. 3 low).
    pub priority: u8,
    /// Completion queue the entries complete to.
    pub cqid: u16,
    /// NVM set identifier.
    pub nvmsetid: u16,
}

impl CreateIoSq {
    /// A physically contiguous queue completing to `cqid`.
    pub const fn new(qid: u16, entries: u32, base: u64, cqid: u16) -> Self {
        CreateIoSq {
            qid,
            entries,
            base,
            physically_contiguous: true,
            priority: 0,
            cqid,
            nvmsetid: 0,
        }
    }

    /// The submission entry; fails when `entries` is 0 or above 65536 or the
    /// priority exceeds 3.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let qsize = match zeros_based("entries", self.entries as u64, MAX_QUEUE_ENTRIES as u64) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        if self.priority > 3 {
            return Err(CommandError::TooLarge {
                field: "priority",
                value: self.priority as u64,
                max: 3,
            });
        }
        let mut e = SubmissionEntry::new(AdminOpcode::CreateIoSq as u8, 0);
        e.prp1 = self.base;
        e.cdw10 = self.qid as u32 | qsize << 16;
        e.cdw11 = self.physically_contiguous as u32
            | (self.priority as u32) << 1
            | (self.cqid as u32) << 16;
        e.cdw12 = self.nvmsetid as u32;
        Ok(e)
    }

    /// Decodes a Create I/O Submission Queue entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        CreateIoSq {
            qid: e.cdw10 as u16,
            entries: (e.cdw10 >> 16) + 1,
            base: e.prp1,
            physically_contiguous: bit(e.cdw11, 0),
            priority: bits(e.cdw11, 1, 2) as u8,
            cqid: (e.cdw11 >> 16) as u16,
            nvmsetid: e.cdw12 as u16,
        }
    }
}

/// Delete I/O Submission Queue (admin 00h) or Completion Queue (admin 04h).
/// CDW10: QID (15:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeleteQueue {
    /// Queue identifier.
    pub qid: u16,
}

impl DeleteQueue {
    /// Delete I/O Submission Queue `qid`.
    pub const fn sq_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(AdminOpcode::DeleteIoSq as u8, 0);
        e.cdw10 = self.qid as u32;
        e
    }

    /// Delete I/O Completion Queue `qid`.
    pub const fn cq_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(AdminOpcode::DeleteIoCq as u8, 0);
        e.cdw10 = self.qid as u32;
        e
    }

    /// Decodes either delete command.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        DeleteQueue { qid: e.cdw10 as u16 }
    }
}

impl GetLogPage {
    /// The submission entry; fails when `dwords` is 0 or above 2^32.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let numd = match zeros_based("dwords", self.dwords, MAX_DWORDS) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(AdminOpcode::GetLogPage as u8, self.nsid);
        e.cdw10 = self.lid as u32
            | ((self.lsp & 0x7F) as u32) << 8
            | (self.rae as u32) << 15
            | (numd & 0xFFFF) << 16;
        e.cdw11 = numd >> 16 | (self.lsi as u32) << 16;
        e.cdw12 = self.offset as u32;
        e.cdw13 = (self.offset >> 32) as u32;
        e.cdw14 =
            (self.uuid_index & 0x7F) as u32 | (self.ot as u32) << 23 | (self.csi as u32) << 24;
        Ok(e)
    }

    /// Decodes a Get Log Page entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        let numd = (e.cdw10 >> 16) | (e.cdw11 & 0xFFFF) << 16;
        GetLogPage {
            nsid: e.nsid,
            lid: e.cdw10 as u8,
            lsp: bits(e.cdw10, 8, 7) as u8,
            rae: bit(e.cdw10, 15),
            dwords: numd as u64 + 1,
            lsi: (e.cdw11 >> 16) as u16,
            offset: e.cdw12 as u64 | (e.cdw13 as u64) << 32,
            uuid_index: bits(e.cdw14, 0, 7) as u8,
            ot: bit(e.cdw14, 23),
            csi: (e.cdw14 >> 24) as u8,
        }
    }
}

/// Get Features (admin 0Ah) or Set Features (admin 09h). CDW10: FID (7:0),
/// SEL (10:8, Get only) and SV (31, Set only); CDW11: the feature-specific
/// value. The opcode says which: build with [`Features::get_entry`] or
/// [`Features::set_entry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Features {
    /// Namespace identifier (namespace-specific features).
    pub nsid: u32,
    /// FID: feature identifier, raw (see [`Features::feature_id`]).
    pub fid: u8,
    /// SEL: which value Get Features returns, raw (see [`Features::select`]).
    pub sel: u8,
    /// SV: Set Features saves the value across power cycles.
    pub save: bool,
    /// CDW11: the value to set (Set), or a feature-specific parameter (Get).
    pub value: u32,
}

impl Features {
    /// Get Features `fid`.
    pub const fn get(fid: FeatureId, select: FeatureSelect) -> Self {
        Features { nsid: 0, fid: fid as u8, sel: select as u8, save: false, value: 0 }
    }

    /// Set Features `fid` to `value` (CDW11).
    pub const fn set(fid: FeatureId, value: u32, save: bool) -> Self {
        Features { nsid: 0, fid: fid as u8, sel: 0, save, value }
    }

    /// Set Features Number of Queues; fails when a count is 0.
    pub const fn set_number_of_queues(n: NumberOfQueues) -> Result<Self, CommandError> {
        match n.to_dword() {
            Some(v) => Ok(Self::set(FeatureId::NumberOfQueues, v, false)),
            None => Err(CommandError::ZeroCount { field: "queues" }),
        }
    }

    /// Set Features I/O Command Set Profile; fails when `index` exceeds 511.
    pub const fn set_io_command_set_profile(index: u16) -> Result<Self, CommandError> {
        match (IoCommandSetProfile { index }).to_dword() {
            Some(v) => Ok(Self::set(FeatureId::IoCommandSetProfile, v, false)),
            None => Err(CommandError::TooLarge {
                field: "I/O command set index",
                value: index as u64,
                max: IoCommandSetProfile::MAX_INDEX as u64,
            }),
        }
    }

    /// Set Features Volatile Write Cache.
    pub const fn set_volatile_write_cache(enabled: bool) -> Self {
        Self::set(FeatureId::VolatileWriteCache, VolatileWriteCache { enabled }.to_dword(), false)
    }

    /// The named feature; `None` for identifiers this crate does not name.
    pub const fn feature_id(&self) -> Option<FeatureId> {
        FeatureId::from_raw(self.fid)
    }

    /// The Get Features select value; `None` for the reserved values.
    pub const fn select(&self) -> Option<FeatureSelect> {
        FeatureSelect::from_raw(self.sel)
    }

    /// CDW11 read as Number of Queues (a count of 0 marks the invalid FFFFh).
    pub const fn number_of_queues(&self) -> NumberOfQueues {
        NumberOfQueues::from_dword(self.value)
    }

    /// CDW11 read as Volatile Write Cache enable.
    pub const fn volatile_write_cache(&self) -> bool {
        VolatileWriteCache::from_dword(self.value).enabled
    }

    /// CDW11 read as the I/O Command Set Profile index.
    pub const fn io_command_set_profile(&self) -> u16 {
        IoCommandSetProfile::from_dword(self.value).index
    }

    /// A Get Features entry (FID, SEL and CDW11; SV is not sent).
    pub const fn get_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(AdminOpcode::GetFeatures as u8, self.nsid);
        e.cdw10 = self.fid as u32 | ((self.sel & 7) as u32) << 8;
        e.cdw11 = self.value;
        e
    }

    /// A Set Features entry (FID, SV and CDW11; SEL is not sent).
    pub const fn set_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(AdminOpcode::SetFeatures as u8, self.nsid);
        e.cdw10 = features::set_features_cdw10(self.fid, self.save);
        e.cdw11 = self.value;
        e
    }

    /// Decodes a Get or Set Features entry (SEL and SV are read whatever the
    /// opcode; each is reserved, so zero, in the other command).
    pub const fn decode(e: &SubmissionEntry) -> Self {
        Features {
            nsid: e.nsid,
            fid: features::cdw10_fid(e.cdw10),
            sel: features::cdw10_select(e.cdw10),
            save: features::cdw10_save(e.cdw10),
            value: e.cdw11,
        }
    }
}

// ---------------------------------------------------------------------------
// I/O commands
// ---------------------------------------------------------------------------

/// Read (02h) or Write (01h). CDW10-11: SLBA; CDW12: NLB (15:0, 0's based),
/// DTYPE (23:20), PRINFO (29:26), FUA (30), LR (31); CDW13: DSM (7:0), DSPEC
/// (31:16); CDW14: initial reference tag; CDW15: application tag (15:0) and
/// mask (31:16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadWrite {
    /// Namespace identifier.
    pub nsid: u32,
    /// Starting LBA.
    pub slba: u64,
    /// Number of logical blocks (1..=65536).
    pub blocks: u32,
    /// DTYPE: directive type.
    pub dtype: u8,
    /// PRINFO: protection information action and checks.
    pub prinfo: u8,
    /// FUA: force unit access.
    pub fua: bool,
    /// LR: limited retry.
    pub lr: bool,
    /// DSM: dataset management hints.
    pub dsm: u8,
    /// DSPEC: directive specific value.
    pub dspec: u16,
    /// Expected initial logical block reference tag.
    pub reference_tag: u32,
    /// Expected logical block application tag.
    pub app_tag: u16,
    /// Logical block application tag mask.
    pub app_tag_mask: u16,
}

impl ReadWrite {
    /// A plain transfer of `blocks` blocks at `slba`.
    pub const fn new(nsid: u32, slba: u64, blocks: u32) -> Self {
        ReadWrite {
            nsid,
            slba,
            blocks,
            dtype: 0,
            prinfo: 0,
            fua: false,
            lr: false,
            dsm: 0,
            dspec: 0,
            reference_tag: 0,
            app_tag: 0,
            app_tag_mask: 0,
        }
    }

    /// The same command with FUA set as given.
    pub const fn with_fua(self, fua: bool) -> Self {
        ReadWrite { fua, ..self }
    }

    /// The same command as a write placed by Flexible Data Placement:
    /// DTYPE 2h (Data Placement) and DSPEC the placement identifier
    /// ([`crate::fdp::PlacementId`]).
    pub const fn with_placement(self, pid: u16) -> Self {
        ReadWrite { dtype: crate::fdp::DTYPE_DATA_PLACEMENT, dspec: pid, ..self }
    }

    /// The placement identifier of a write with DTYPE 2h (Data
    /// Placement); `None` for any other directive type.
    pub const fn placement(&self) -> Option<u16> {
        match self.dtype {
            crate::fdp::DTYPE_DATA_PLACEMENT => Some(self.dspec),
            _ => None,
        }
    }

    const fn encode(&self, opcode: IoOpcode) -> Result<SubmissionEntry, CommandError> {
        let nlb = match nlb(self.blocks) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(opcode as u8, self.nsid);
        e.cdw10 = self.slba as u32;
        e.cdw11 = (self.slba >> 32) as u32;
        e.cdw12 = nlb
            | ((self.dtype & 0xF) as u32) << 20
            | ((self.prinfo & 0xF) as u32) << 26
            | (self.fua as u32) << 30
            | (self.lr as u32) << 31;
        e.cdw13 = self.dsm as u32 | (self.dspec as u32) << 16;
        e.cdw14 = self.reference_tag;
        e.cdw15 = self.app_tag as u32 | (self.app_tag_mask as u32) << 16;
        Ok(e)
    }

    /// A Read entry; fails when `blocks` is 0 or above 65536.
    pub const fn read(&self) -> Result<SubmissionEntry, CommandError> {
        self.encode(IoOpcode::Read)
    }

    /// A Write entry; fails when `blocks` is 0 or above 65536.
    pub const fn write(&self) -> Result<SubmissionEntry, CommandError> {
        self.encode(IoOpcode::Write)
    }

    /// Decodes a Read or Write entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        ReadWrite {
            nsid: e.nsid,
            slba: e.cdw10_11(),
            blocks: blocks_of(e.cdw12),
            dtype: bits(e.cdw12, 20, 4) as u8,
            prinfo: bits(e.cdw12, 26, 4) as u8,
            fua: bit(e.cdw12, 30),
            lr: bit(e.cdw12, 31),
            dsm: e.cdw13 as u8,
            dspec: (e.cdw13 >> 16) as u16,
            reference_tag: e.cdw14,
            app_tag: e.cdw15 as u16,
            app_tag_mask: (e.cdw15 >> 16) as u16,
        }
    }
}

/// Flush (00h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flush {
    /// Namespace identifier; [`Flush::ALL_NAMESPACES`] flushes every namespace.
    pub nsid: u32,
}

impl Flush {
    /// NSID FFFFFFFFh: every attached namespace.
    pub const ALL_NAMESPACES: u32 = 0xFFFF_FFFF;

    /// The submission entry.
    pub const fn to_entry(&self) -> SubmissionEntry {
        SubmissionEntry::new(IoOpcode::Flush as u8, self.nsid)
    }

    /// Decodes a Flush entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        Flush { nsid: e.nsid }
    }

    /// True when the flush covers every namespace.
    pub const fn is_all(&self) -> bool {
        self.nsid == Self::ALL_NAMESPACES
    }
}

/// Write Zeroes (08h). CDW10-11: SLBA; CDW12: NLB (15:0, 0's based), DTYPE
/// (23:20), DEAC (25), PRINFO (29:26), FUA (30), LR (31); CDW13: DSPEC
/// (31:16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteZeroes {
    /// Namespace identifier.
    pub nsid: u32,
    /// Starting LBA.
    pub slba: u64,
    /// Number of logical blocks (1..=65536).
    pub blocks: u32,
    /// DTYPE: directive type.
    pub dtype: u8,
    /// DEAC: deallocate the blocks.
    pub deallocate: bool,
    /// PRINFO: protection information action and checks.
    pub prinfo: u8,
    /// FUA: force unit access.
    pub fua: bool,
    /// LR: limited retry.
    pub lr: bool,
    /// DSPEC: directive specific value.
    pub dspec: u16,
}

impl WriteZeroes {
    /// Zeroes `blocks` blocks at `slba`.
    pub const fn new(nsid: u32, slba: u64, blocks: u32) -> Self {
        WriteZeroes {
            nsid,
            slba,
            blocks,
            dtype: 0,
            deallocate: false,
            prinfo: 0,
            fua: false,
            lr: false,
            dspec: 0,
        }
    }

    /// The same command placed by Flexible Data Placement (DTYPE 2h, DSPEC
    /// the placement identifier).
    pub const fn with_placement(self, pid: u16) -> Self {
        WriteZeroes { dtype: crate::fdp::DTYPE_DATA_PLACEMENT, dspec: pid, ..self }
    }

    /// The submission entry; fails when `blocks` is 0 or above 65536.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let nlb = match nlb(self.blocks) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(IoOpcode::WriteZeroes as u8, self.nsid);
        e.cdw10 = self.slba as u32;
        e.cdw11 = (self.slba >> 32) as u32;
        e.cdw12 = nlb
            | ((self.dtype & 0xF) as u32) << 20
            | (self.deallocate as u32) << 25
            | ((self.prinfo & 0xF) as u32) << 26
            | (self.fua as u32) << 30
            | (self.lr as u32) << 31;
        e.cdw13 = (self.dspec as u32) << 16;
        Ok(e)
    }

    /// Decodes a Write Zeroes entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        WriteZeroes {
            nsid: e.nsid,
            slba: e.cdw10_11(),
            blocks: blocks_of(e.cdw12),
            dtype: bits(e.cdw12, 20, 4) as u8,
            deallocate: bit(e.cdw12, 25),
            prinfo: bits(e.cdw12, 26, 4) as u8,
            fua: bit(e.cdw12, 30),
            lr: bit(e.cdw12, 31),
            dspec: (e.cdw13 >> 16) as u16,
        }
    }
}

/// Dataset Management (09h). CDW10: NR (7:0, 0's based number of ranges);
/// CDW11: IDR (0), IDW (1), AD (2: deallocate). The data buffer holds the
/// ranges ([`DsmRange`], 16 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatasetManagement {
    /// Namespace identifier.
    pub nsid: u32,
    /// Number of ranges (1..=256).
    pub ranges: u16,
    /// IDR: the ranges will be read (a hint).
    pub integral_read: bool,
    /// IDW: the ranges will be written (a hint).
    pub integral_write: bool,
    /// AD: deallocate the ranges.
    pub deallocate: bool,
}

impl DatasetManagement {
    /// Deallocates `ranges` ranges (1..=256).
    pub const fn deallocate(nsid: u32, ranges: u16) -> Self {
        DatasetManagement {
            nsid,
            ranges,
            integral_read: false,
            integral_write: false,
            deallocate: true,
        }
    }

    /// The submission entry; fails when `ranges` is 0 or above 256.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        if self.ranges == 0 {
            return Err(CommandError::ZeroCount { field: "NR" });
        }
        if self.ranges > 256 {
            return Err(CommandError::TooLarge {
                field: "NR",
                value: self.ranges as u64,
                max: 256,
            });
        }
        let mut e = SubmissionEntry::new(IoOpcode::DatasetManagement as u8, self.nsid);
        e.cdw10 = (self.ranges - 1) as u32;
        e.cdw11 = self.integral_read as u32
            | (self.integral_write as u32) << 1
            | (self.deallocate as u32) << 2;
        Ok(e)
    }

    /// Decodes a Dataset Management entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        DatasetManagement {
            nsid: e.nsid,
            ranges: (e.cdw10 & 0xFF) as u16 + 1,
            integral_read: bit(e.cdw11, 0),
            integral_write: bit(e.cdw11, 1),
            deallocate: bit(e.cdw11, 2),
        }
    }
}

/// One range of a Dataset Management command: context attributes (bytes
/// 0..4), length in logical blocks (4..8), starting LBA (8..16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DsmRange {
    /// Context attributes.
    pub attributes: u32,
    /// Length in logical blocks.
    pub blocks: u32,
    /// Starting LBA.
    pub slba: u64,
}

impl DsmRange {
    /// Bytes of one range.
    pub const SIZE: usize = 16;

    /// The range's 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.attributes.to_le_bytes());
        b[4..8].copy_from_slice(&self.blocks.to_le_bytes());
        b[8..].copy_from_slice(&self.slba.to_le_bytes());
        b
    }

    /// The first `n` ranges in `data`; `None` when `data` is shorter.
    pub fn decode_ranges(data: &[u8], n: usize) -> Option<Vec<DsmRange>> {
        let bytes = data.get(..n.checked_mul(Self::SIZE)?)?;
        Some(
            bytes
                .chunks_exact(Self::SIZE)
                .map(|c| DsmRange {
                    attributes: u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
                    blocks: u32::from_le_bytes(c[4..8].try_into().expect("4 bytes")),
                    slba: u64::from_le_bytes(c[8..].try_into().expect("8 bytes")),
                })
                .collect(),
        )
    }
}

/// Copy (19h). CDW10-11: SDLBA; CDW12: NR (7:0, 0's based), DESFMT (11:8),
/// PRINFOR (15:12), DTYPE (23:20), PRINFOW (29:26), FUA (30), LR (31);
/// CDW13: DSPEC (31:16). The data buffer holds the source ranges
/// ([`crate::copy::SourceRangeFormat0`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyCmd {
    /// Namespace identifier.
    pub nsid: u32,
    /// SDLBA: destination starting LBA.
    pub sdlba: u64,
    /// Number of source ranges (1..=256).
    pub ranges: u16,
    /// DESFMT: source range descriptor format.
    pub format: u8,
    /// PRINFOR: protection information for the reads.
    pub prinfor: u8,
    /// DTYPE: directive type of the write.
    pub dtype: u8,
    /// PRINFOW: protection information for the write.
    pub prinfow: u8,
    /// FUA: force unit access.
    pub fua: bool,
    /// LR: limited retry.
    pub lr: bool,
    /// DSPEC: directive specific value.
    pub dspec: u16,
}

impl CopyCmd {
    /// Copies `ranges` format 0 source ranges to `sdlba`.
    pub const fn new(nsid: u32, sdlba: u64, ranges: u16) -> Self {
        CopyCmd {
            nsid,
            sdlba,
            ranges,
            format: crate::copy::DESCRIPTOR_FORMAT_0,
            prinfor: 0,
            dtype: 0,
            prinfow: 0,
            fua: false,
            lr: false,
            dspec: 0,
        }
    }

    /// The same command with its write placed by Flexible Data Placement
    /// (DTYPE 2h, DSPEC the placement identifier).
    pub const fn with_placement(self, pid: u16) -> Self {
        CopyCmd { dtype: crate::fdp::DTYPE_DATA_PLACEMENT, dspec: pid, ..self }
    }

    /// The submission entry; fails when `ranges` is 0 or above 256.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let nr = match zeros_based("ranges", self.ranges as u64, crate::copy::MAX_RANGES as u64) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(IoOpcode::Copy as u8, self.nsid);
        e.cdw10 = self.sdlba as u32;
        e.cdw11 = (self.sdlba >> 32) as u32;
        e.cdw12 = nr
            | ((self.format & 0xF) as u32) << 8
            | ((self.prinfor & 0xF) as u32) << 12
            | ((self.dtype & 0xF) as u32) << 20
            | ((self.prinfow & 0xF) as u32) << 26
            | (self.fua as u32) << 30
            | (self.lr as u32) << 31;
        e.cdw13 = (self.dspec as u32) << 16;
        Ok(e)
    }

    /// Decodes a Copy entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        CopyCmd {
            nsid: e.nsid,
            sdlba: e.cdw10_11(),
            ranges: (e.cdw12 & 0xFF) as u16 + 1,
            format: bits(e.cdw12, 8, 4) as u8,
            prinfor: bits(e.cdw12, 12, 4) as u8,
            dtype: bits(e.cdw12, 20, 4) as u8,
            prinfow: bits(e.cdw12, 26, 4) as u8,
            fua: bit(e.cdw12, 30),
            lr: bit(e.cdw12, 31),
            dspec: (e.cdw13 >> 16) as u16,
        }
    }

    /// Bytes of the source range list for descriptor format 0.
    pub const fn format0_list_bytes(&self) -> usize {
        self.ranges as usize * crate::copy::SourceRangeFormat0::SIZE
    }
}

/// Zone Management Send (79h). CDW10-11: SLBA; CDW13: ZSA (7:0), Select All
/// (8), ZSASO (9; with Open Zone: allocate a ZRWA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneSend {
    /// Namespace identifier.
    pub nsid: u32,
    /// Start LBA of the zone (ignored with Select All).
    pub slba: u64,
    /// Zone send action.
    pub action: ZoneSendAction,
    /// Select All: act on every zone the action applies to.
    pub select_all: bool,
    /// ZSASO: zone send action specific option; for Open Zone, allocate a
    /// zone random write area.
    pub zrwa_allocate: bool,
}

impl ZoneSend {
    /// `action` on the zone starting at `slba`.
    pub const fn new(nsid: u32, slba: u64, action: ZoneSendAction) -> Self {
        ZoneSend { nsid, slba, action, select_all: false, zrwa_allocate: false }
    }

    /// `action` on every zone.
    pub const fn all(nsid: u32, action: ZoneSendAction) -> Self {
        ZoneSend { nsid, slba: 0, action, select_all: true, zrwa_allocate: false }
    }

    /// Open Zone with ZRWA Allocate: explicitly opens the zone starting at
    /// `zslba` and allocates a zone random write area to it.
    pub const fn open_zrwa(nsid: u32, zslba: u64) -> Self {
        ZoneSend {
            nsid,
            slba: zslba,
            action: ZoneSendAction::Open,
            select_all: false,
            zrwa_allocate: true,
        }
    }

    /// Flush Explicit ZRWA Range: commits the zone random write area of the
    /// zone holding `last_lba` from its write pointer up to and including
    /// `last_lba` (SLBA carries the last LBA to commit, not a zone start).
    pub const fn flush_zrwa(nsid: u32, last_lba: u64) -> Self {
        ZoneSend::new(nsid, last_lba, ZoneSendAction::FlushZrwa)
    }

    /// The submission entry.
    pub const fn to_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(IoOpcode::ZoneMgmtSend as u8, self.nsid);
        e.cdw10 = self.slba as u32;
        e.cdw11 = (self.slba >> 32) as u32;
        e.cdw13 =
            self.action as u32 | (self.select_all as u32) << 8 | (self.zrwa_allocate as u32) << 9;
        e
    }

    /// Decodes a Zone Management Send entry; fails on a reserved action.
    pub const fn decode(e: &SubmissionEntry) -> Result<Self, DecodeError> {
        let raw = e.cdw13 as u8;
        let Some(action) = ZoneSendAction::from_raw(raw) else {
            return Err(DecodeError::ZoneSendAction(raw));
        };
        Ok(ZoneSend {
            nsid: e.nsid,
            slba: e.cdw10_11(),
            action,
            select_all: bit(e.cdw13, 8),
            zrwa_allocate: bit(e.cdw13, 9),
        })
    }
}

/// Zone Management Receive (7Ah). CDW10-11: SLBA; CDW12: NUMD (0's based
/// dwords); CDW13: ZRA (7:0), ZRASF (15:8), Partial Report (16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneReceive {
    /// Namespace identifier.
    pub nsid: u32,
    /// Lowest LBA whose zone the report considers.
    pub slba: u64,
    /// Dwords to transfer (1..=2^32).
    pub dwords: u64,
    /// Zone receive action.
    pub action: ZoneReceiveAction,
    /// Which zones to list (ZRASF).
    pub filter: ReportFilter,
    /// Partial Report: the header counts only the descriptors returned.
    pub partial: bool,
}

impl ZoneReceive {
    /// Report Zones into a `bytes`-byte buffer (rounded down to whole dwords).
    pub const fn report(nsid: u32, slba: u64, bytes: u64, filter: ReportFilter) -> Self {
        ZoneReceive {
            nsid,
            slba,
            dwords: bytes / 4,
            action: ZoneReceiveAction::Report,
            filter,
            partial: false,
        }
    }

    /// Bytes to transfer; saturates at `usize::MAX` where `usize` is narrow.
    pub const fn bytes(&self) -> usize {
        let b = self.dwords.saturating_mul(4);
        if b > usize::MAX as u64 {
            usize::MAX
        } else {
            b as usize
        }
    }

    /// True for Extended Report Zones (descriptors with their extensions).
    pub const fn extended(&self) -> bool {
        matches!(self.action, ZoneReceiveAction::ExtendedReport)
    }

    /// The submission entry; fails when `dwords` is 0 or above 2^32.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let numd = match zeros_based("dwords", self.dwords, MAX_DWORDS) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(IoOpcode::ZoneMgmtRecv as u8, self.nsid);
        e.cdw10 = self.slba as u32;
        e.cdw11 = (self.slba >> 32) as u32;
        e.cdw12 = numd;
        e.cdw13 = self.action as u32 | (self.filter as u32) << 8 | (self.partial as u32) << 16;
        Ok(e)
    }

    /// Decodes a Zone Management Receive entry; fails on a reserved action or
    /// report filter.
    pub const fn decode(e: &SubmissionEntry) -> Result<Self, DecodeError> {
        let zra = e.cdw13 as u8;
        let Some(action) = ZoneReceiveAction::from_raw(zra) else {
            return Err(DecodeError::ZoneReceiveAction(zra));
        };
        let zrasf = (e.cdw13 >> 8) as u8;
        let Some(filter) = ReportFilter::from_raw(zrasf) else {
            return Err(DecodeError::ReportFilter(zrasf));
        };
        Ok(ZoneReceive {
            nsid: e.nsid,
            slba: e.cdw10_11(),
            dwords: e.cdw12 as u64 + 1,
            action,
            filter,
            partial: bit(e.cdw13, 16),
        })
    }
}

/// Zone Append (7Dh). CDW10-11: ZSLBA; CDW12: NLB (15:0, 0's based), PIREMAP
/// (25), PRINFO (29:26), FUA (30), LR (31); CDW14: initial reference tag;
/// CDW15: application tag (15:0) and mask (31:16). The completion's DW0-DW1
/// carry the LBA the data was written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneAppend {
    /// Namespace identifier.
    pub nsid: u32,
    /// Start LBA of the zone appended to.
    pub zslba: u64,
    /// Number of logical blocks (1..=65536).
    pub blocks: u32,
    /// PIREMAP: remap the reference tag to the assigned LBA.
    pub piremap: bool,
    /// PRINFO: protection information action and checks.
    pub prinfo: u8,
    /// FUA: force unit access.
    pub fua: bool,
    /// LR: limited retry.
    pub lr: bool,
    /// Initial logical block reference tag.
    pub reference_tag: u32,
    /// Logical block application tag.
    pub app_tag: u16,
    /// Logical block application tag mask.
    pub app_tag_mask: u16,
}

impl ZoneAppend {
    /// Appends `blocks` blocks to the zone starting at `zslba`.
    pub const fn new(nsid: u32, zslba: u64, blocks: u32) -> Self {
        ZoneAppend {
            nsid,
            zslba,
            blocks,
            piremap: false,
            prinfo: 0,
            fua: false,
            lr: false,
            reference_tag: 0,
            app_tag: 0,
            app_tag_mask: 0,
        }
    }

    /// The submission entry; fails when `blocks` is 0 or above 65536.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        let nlb = match nlb(self.blocks) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        let mut e = SubmissionEntry::new(IoOpcode::ZoneAppend as u8, self.nsid);
        e.cdw10 = self.zslba as u32;
        e.cdw11 = (self.zslba >> 32) as u32;
        e.cdw12 = nlb
            | (self.piremap as u32) << 25
            | ((self.prinfo & 0xF) as u32) << 26
            | (self.fua as u32) << 30
            | (self.lr as u32) << 31;
        e.cdw14 = self.reference_tag;
        e.cdw15 = self.app_tag as u32 | (self.app_tag_mask as u32) << 16;
        Ok(e)
    }

    /// Decodes a Zone Append entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        ZoneAppend {
            nsid: e.nsid,
            zslba: e.cdw10_11(),
            blocks: blocks_of(e.cdw12),
            piremap: bit(e.cdw12, 25),
            prinfo: bits(e.cdw12, 26, 4) as u8,
            fua: bit(e.cdw12, 30),
            lr: bit(e.cdw12, 31),
            reference_tag: e.cdw14,
            app_tag: e.cdw15 as u16,
            app_tag_mask: (e.cdw15 >> 16) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dataset_management_round_trips_with_its_ranges() {
        let d = DatasetManagement::deallocate(3, 2);
        let e = d.to_entry().unwrap();
        assert_eq!((e.opcode(), e.cdw10, e.cdw11), (0x09, 1, 1 << 2));
        assert_eq!(DatasetManagement::decode(&e), d);
        assert!(DatasetManagement::deallocate(1, 0).to_entry().is_err());
        assert!(DatasetManagement::deallocate(1, 257).to_entry().is_err());
        let r = [
            DsmRange { attributes: 0, blocks: 8, slba: 1 << 33 },
            DsmRange { attributes: 7, blocks: 1, slba: 5 },
        ];
        let bytes: Vec<u8> = r.iter().flat_map(|x| x.to_bytes()).collect();
        assert_eq!(DsmRange::decode_ranges(&bytes, 2).unwrap(), r);
        assert!(DsmRange::decode_ranges(&bytes, 3).is_none());
    }

    use super::*;
    use crate::log::LogPageId;

    /// Builders leave CID and data pointers for the driver.
    fn assert_driver_fields_clear(e: &SubmissionEntry) {
        assert_eq!(e.cid(), 0);
        assert_eq!((e.prp1, e.prp2, e.mptr), (0, 0, 0));
    }

    #[test]
    fn identify_dwords_and_round_trip() {
        let cmds = [
            IdentifyCmd::controller(),
            IdentifyCmd::namespace(1),
            IdentifyCmd::active_namespaces(7),
            IdentifyCmd::ns_id_descriptors(2),
            IdentifyCmd::csi_namespace(3, CommandSetId::Zoned),
            IdentifyCmd::csi_controller(CommandSetId::Zoned),
            IdentifyCmd::csi_active_namespaces(0, CommandSetId::Zoned),
            IdentifyCmd::io_command_sets(0x0102),
            IdentifyCmd {
                cns_specific_id: 0xBEEF,
                ..IdentifyCmd::new(Cns::IoCommandSetIndependentNamespace, 9)
            },
        ];
        for c in cmds {
            let e = c.to_entry();
            assert_eq!(e.opcode(), 0x06);
            assert_driver_fields_clear(&e);
            assert_eq!(IdentifyCmd::decode(&e), c);
        }
        let e = IdentifyCmd {
            nsid: 0x0A0B_0C0D,
            cns: Cns::CsiNamespace as u8,
            cntid: 0x1234,
            cns_specific_id: 0x5678,
            csi: 2,
        }
        .to_entry();
        assert_eq!(e.nsid, 0x0A0B_0C0D);
        assert_eq!(e.cdw10, 0x1234_0005);
        assert_eq!(e.cdw11, 0x0200_5678);
        assert_eq!(IdentifyCmd::io_command_sets(3).to_entry().cdw10, 0x0003_001C);
        let mut bad = e;
        bad.cdw10 = 0x04;
        assert_eq!(IdentifyCmd::decode(&bad).cns_kind(), None);
        let back = IdentifyCmd::decode(&e);
        assert_eq!(back.cns_kind(), Some(Cns::CsiNamespace));
        assert_eq!(back.command_set(), Some(CommandSetId::Zoned));
    }

    #[test]
    fn create_queues_dwords_and_round_trip() {
        let cq = CreateIoCq {
            qid: 3,
            entries: 1024,
            base: 0x1_0000_2000,
            physically_contiguous: true,
            interrupts_enabled: true,
            interrupt_vector: 0x0102,
        };
        let e = cq.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x05);
        assert_eq!(e.prp1, 0x1_0000_2000);
        assert_eq!(e.cdw10, 3 | 1023 << 16);
        assert_eq!(e.cdw11, 0b11 | 0x0102 << 16);
        assert_eq!(CreateIoCq::decode(&e), cq);
        let e = CreateIoCq::new(1, 65536, 0).to_entry().unwrap();
        assert_eq!(e.cdw10, 1 | 0xFFFF << 16);
        assert_eq!(e.cdw11, 1);
        assert_eq!(CreateIoCq::decode(&e).entries, 65536);
        assert_eq!(
            CreateIoCq::new(1, 0, 0).to_entry(),
            Err(CommandError::ZeroCount { field: "entries" })
        );
        assert!(matches!(
            CreateIoCq::new(1, 65537, 0).to_entry(),
            Err(CommandError::TooLarge { value: 65537, max: 65536, .. })
        ));

        let sq = CreateIoSq {
            qid: 4,
            entries: 64,
            base: 0xABC0_0000,
            physically_contiguous: true,
            priority: 2,
            cqid: 0x0304,
            nvmsetid: 0x0506,
        };
        let e = sq.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x01);
        assert_eq!(e.prp1, 0xABC0_0000);
        assert_eq!(e.cdw10, 4 | 63 << 16);
        assert_eq!(e.cdw11, 1 | 0b10 << 1 | 0x0304 << 16);
        assert_eq!(e.cdw12, 0x0506);
        assert_eq!(CreateIoSq::decode(&e), sq);
        assert!(CreateIoSq { priority: 4, ..sq }.to_entry().is_err());
        assert!(CreateIoSq::new(1, 0, 0, 1).to_entry().is_err());
    }

    #[test]
    fn delete_queues() {
        let d = DeleteQueue { qid: 0x0102 };
        let sq = d.sq_entry();
        let cq = d.cq_entry();
        assert_eq!((sq.opcode(), sq.cdw10), (0x00, 0x0102));
        assert_eq!((cq.opcode(), cq.cdw10), (0x04, 0x0102));
        assert_driver_fields_clear(&sq);
        assert_eq!(DeleteQueue::decode(&sq), d);
        assert_eq!(DeleteQueue::decode(&cq), d);
    }

    #[test]
    fn get_log_page_dwords_and_round_trip() {
        let g = GetLogPage {
            nsid: 0xFFFF_FFFF,
            lid: 0xBF,
            lsp: 0x55,
            rae: true,
            dwords: 0x0001_2346,
            lsi: 0xABCD,
            offset: 0x0000_0001_0000_0200,
            uuid_index: 0x45,
            ot: true,
            csi: 2,
        };
        let e = g.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x02);
        assert_driver_fields_clear(&e);
        assert_eq!(e.nsid, 0xFFFF_FFFF);
        assert_eq!(e.cdw10, 0xBF | 0x55 << 8 | 1 << 15 | 0x2345 << 16);
        assert_eq!(e.cdw11, 0x0001 | 0xABCD << 16);
        assert_eq!(e.cdw12, 0x0200);
        assert_eq!(e.cdw13, 0x0001);
        assert_eq!(e.cdw14, 0x45 | 1 << 23 | 2 << 24);
        let back = GetLogPage::decode(&e);
        assert_eq!(back, g);
        assert_eq!(back.length_bytes(), 0x0001_2346 * 4);
        assert_eq!(back.log_page_id(), Some(LogPageId::ChangedZoneList));

        let smart = GetLogPage::new(LogPageId::SmartHealth, 0xFFFF_FFFF, 128);
        let e = smart.to_entry().unwrap();
        assert_eq!(e.cdw10, 0x02 | 127 << 16);
        assert_eq!((e.cdw11, e.cdw14), (0, 0));
        let max = GetLogPage { dwords: 1 << 32, ..smart }.to_entry().unwrap();
        assert_eq!((max.cdw10 >> 16, max.cdw11 & 0xFFFF), (0xFFFF, 0xFFFF));
        assert_eq!(GetLogPage::decode(&max).dwords, 1 << 32);
        assert!(GetLogPage { dwords: 0, ..smart }.to_entry().is_err());
        assert!(GetLogPage { dwords: (1 << 32) + 1, ..smart }.to_entry().is_err());
    }

    #[test]
    fn features_dwords_and_round_trip() {
        let n = Features::set_number_of_queues(NumberOfQueues { submission: 4, completion: 2 })
            .unwrap();
        let e = n.set_entry();
        assert_eq!(e.opcode(), 0x09);
        assert_driver_fields_clear(&e);
        assert_eq!(e.cdw10, 0x07);
        assert_eq!(e.cdw11, 3 | 1 << 16);
        let back = Features::decode(&e);
        assert_eq!(back, n);
        assert_eq!(back.feature_id(), Some(FeatureId::NumberOfQueues));
        assert_eq!(back.number_of_queues(), NumberOfQueues { submission: 4, completion: 2 });
        let zero = NumberOfQueues { submission: 0, completion: 1 };
        assert!(Features::set_number_of_queues(zero).is_err());

        let p = Features::set_io_command_set_profile(0x1FF).unwrap();
        let e = p.set_entry();
        assert_eq!((e.cdw10, e.cdw11), (0x19, 0x1FF));
        assert_eq!(Features::decode(&e).io_command_set_profile(), 0x1FF);
        assert!(Features::set_io_command_set_profile(512).is_err());

        let w = Features { save: true, ..Features::set_volatile_write_cache(true) };
        let e = w.set_entry();
        assert_eq!((e.cdw10, e.cdw11), (0x8000_0006, 1));
        let back = Features::decode(&e);
        assert_eq!(back, w);
        assert!(back.save && back.volatile_write_cache());

        let g = Features {
            nsid: 1,
            value: 0xABCD,
            ..Features::get(FeatureId::IoCommandSetProfile, FeatureSelect::Saved)
        };
        let e = g.get_entry();
        assert_eq!((e.opcode(), e.nsid, e.cdw10, e.cdw11), (0x0A, 1, 0x19 | 2 << 8, 0xABCD));
        assert_eq!(Features::decode(&e), g);
        assert_eq!(g.select(), Some(FeatureSelect::Saved));
        let sels =
            [FeatureSelect::Current, FeatureSelect::Default, FeatureSelect::SupportedCapabilities];
        for sel in sels {
            let f = Features::get(FeatureId::Arbitration, sel);
            assert_eq!(f.get_entry().cdw10, 0x01 | (sel as u32) << 8);
            assert_eq!(Features::decode(&f.get_entry()), f);
        }
        // Get never sends SV; Set never sends SEL.
        let both = Features {
            sel: 3,
            save: true,
            ..Features::get(FeatureId::Arbitration, FeatureSelect::Current)
        };
        assert_eq!(both.get_entry().cdw10, 0x01 | 3 << 8);
        assert_eq!(both.set_entry().cdw10, 0x8000_0001);

        let mut raw = e;
        raw.cdw10 = 0x03 | 5 << 8;
        let odd = Features::decode(&raw);
        assert_eq!((odd.fid, odd.feature_id(), odd.select()), (0x03, None, None));
    }

    #[test]
    fn read_write_dwords_and_round_trip() {
        let rw = ReadWrite {
            nsid: 1,
            slba: 0x0102_0304_0506_0708,
            blocks: 0x1235,
            dtype: 0x2,
            prinfo: 0xD,
            fua: true,
            lr: true,
            dsm: 0x47,
            dspec: 0xABCD,
            reference_tag: 0x1122_3344,
            app_tag: 0x5566,
            app_tag_mask: 0x7788,
        };
        let r = rw.read().unwrap();
        let w = rw.write().unwrap();
        assert_eq!((r.opcode(), w.opcode()), (0x02, 0x01));
        assert_driver_fields_clear(&r);
        assert_eq!(r.nsid, 1);
        assert_eq!((r.cdw10, r.cdw11), (0x0506_0708, 0x0102_0304));
        assert_eq!(r.cdw12, 0x1234 | 0x2 << 20 | 0xD << 26 | 1 << 30 | 1 << 31);
        assert_eq!(r.cdw13, 0x47 | 0xABCD << 16);
        assert_eq!(r.cdw14, 0x1122_3344);
        assert_eq!(r.cdw15, 0x5566 | 0x7788 << 16);
        assert_eq!(ReadWrite::decode(&r), rw);
        assert_eq!(ReadWrite::decode(&w), rw);

        let plain = ReadWrite::new(2, 100, 1).with_fua(true).write().unwrap();
        assert_eq!(plain.cdw12, 1 << 30);
        assert_eq!(ReadWrite::decode(&plain).placement(), None);
        // A placed write: DTYPE 2h (CDW12 23:20), DSPEC the placement
        // identifier (CDW13 31:16).
        let placed = ReadWrite::new(2, 100, 1).with_placement(7).write().unwrap();
        assert_eq!((placed.cdw12, placed.cdw13), (2 << 20, 7 << 16));
        assert_eq!(ReadWrite::decode(&placed).placement(), Some(7));
        let streams = ReadWrite { dtype: 1, ..ReadWrite::new(2, 0, 1) };
        assert_eq!(streams.placement(), None, "DTYPE 1h is the Streams directive");
        let copy = CopyCmd::new(1, 0, 1).with_placement(3).to_entry().unwrap();
        assert_eq!((copy.cdw12 >> 20 & 0xF, copy.cdw13 >> 16), (2, 3));
        let max = ReadWrite::new(2, 0, 65536).read().unwrap();
        assert_eq!(max.cdw12, 0xFFFF);
        assert_eq!(ReadWrite::decode(&max).blocks, 65536);
        assert_eq!(
            ReadWrite::new(2, 0, 0).read(),
            Err(CommandError::ZeroCount { field: "blocks" })
        );
        assert_eq!(
            ReadWrite::new(2, 0, 65537).write(),
            Err(CommandError::TooLarge { field: "blocks", value: 65537, max: 65536 })
        );
    }

    #[test]
    fn flush_and_write_zeroes() {
        let f = Flush { nsid: Flush::ALL_NAMESPACES };
        let e = f.to_entry();
        assert_eq!((e.opcode(), e.nsid), (0x00, 0xFFFF_FFFF));
        assert_eq!(Flush::decode(&e), f);
        assert!(f.is_all());

        let wz = WriteZeroes {
            nsid: 1,
            slba: 0x1_0000_0010,
            blocks: 16,
            dtype: 0,
            deallocate: true,
            prinfo: 0x9,
            fua: true,
            lr: false,
            dspec: 0,
        };
        let e = wz.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x08);
        assert_driver_fields_clear(&e);
        assert_eq!((e.cdw10, e.cdw11), (0x10, 0x1));
        assert_eq!(e.cdw12, 15 | 1 << 25 | 0x9 << 26 | 1 << 30);
        assert_eq!(e.cdw13, 0);
        assert_eq!(WriteZeroes::decode(&e), wz);
        // Placed: DTYPE 2h in CDW12 23:20, the placement identifier in
        // CDW13 31:16.
        let placed = wz.with_placement(0x0102);
        let e = placed.to_entry().unwrap();
        assert_eq!(e.cdw12, 15 | 2 << 20 | 1 << 25 | 0x9 << 26 | 1 << 30);
        assert_eq!(e.cdw13, 0x0102 << 16);
        assert_eq!(WriteZeroes::decode(&e), placed);
        assert!(WriteZeroes::new(1, 0, 0).to_entry().is_err());
        assert!(WriteZeroes::new(1, 0, 65537).to_entry().is_err());
    }

    #[test]
    fn copy_dwords_and_round_trip() {
        let c = CopyCmd {
            nsid: 1,
            sdlba: 0x0A0B_0C0D_0E0F_1011,
            ranges: 256,
            format: 0x1,
            prinfor: 0x3,
            dtype: 0x2,
            prinfow: 0xC,
            fua: true,
            lr: true,
            dspec: 0x4321,
        };
        let e = c.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x19);
        assert_driver_fields_clear(&e);
        assert_eq!((e.cdw10, e.cdw11), (0x0E0F_1011, 0x0A0B_0C0D));
        assert_eq!(
            e.cdw12,
            0xFF | 0x1 << 8 | 0x3 << 12 | 0x2 << 20 | 0xC << 26 | 1 << 30 | 1 << 31
        );
        assert_eq!(e.cdw13, 0x4321 << 16);
        assert_eq!(CopyCmd::decode(&e), c);
        let one = CopyCmd::new(1, 5, 1);
        assert_eq!(one.to_entry().unwrap().cdw12, 0);
        assert_eq!(CopyCmd::decode(&one.to_entry().unwrap()), one);
        assert_eq!(one.format0_list_bytes(), 32);
        assert!(CopyCmd::new(1, 0, 0).to_entry().is_err());
        assert!(CopyCmd::new(1, 0, 257).to_entry().is_err());
    }

    #[test]
    fn zone_send_dwords_and_round_trip() {
        let actions = [
            ZoneSendAction::Close,
            ZoneSendAction::Finish,
            ZoneSendAction::Open,
            ZoneSendAction::Reset,
            ZoneSendAction::Offline,
            ZoneSendAction::SetDescriptorExtension,
            ZoneSendAction::FlushZrwa,
        ];
        for a in actions {
            let z = ZoneSend::new(1, 0x4_0000_8000, a);
            let e = z.to_entry();
            assert_eq!(e.opcode(), 0x79);
            assert_driver_fields_clear(&e);
            assert_eq!((e.cdw10, e.cdw11, e.cdw13), (0x8000, 0x4, a as u32));
            assert_eq!(ZoneSend::decode(&e), Ok(z));
        }
        let open = ZoneSend::open_zrwa(1, 0x100);
        assert_eq!(open.to_entry().cdw13, 0x03 | 1 << 9);
        assert_eq!((open.to_entry().cdw10, open.slba), (0x100, 0x100));
        let flush = ZoneSend::flush_zrwa(1, 0x1_0000_0107);
        let e = flush.to_entry();
        assert_eq!((e.cdw10, e.cdw11, e.cdw13), (0x107, 0x1, 0x11));
        assert_eq!(ZoneSend::decode(&e), Ok(flush));
        assert_eq!(ZoneSend::decode(&open.to_entry()), Ok(open));
        let reset_all = ZoneSend::all(1, ZoneSendAction::Reset);
        assert_eq!(reset_all.to_entry().cdw13, 0x04 | 1 << 8);
        assert_eq!(ZoneSend::decode(&reset_all.to_entry()), Ok(reset_all));
        let mut bad = reset_all.to_entry();
        bad.cdw13 = 0x06;
        assert_eq!(ZoneSend::decode(&bad), Err(DecodeError::ZoneSendAction(0x06)));
        assert_eq!(DecodeError::ZoneSendAction(6).status_code(), StatusCode::InvalidField);
    }

    #[test]
    fn zone_receive_dwords_and_round_trip() {
        let z = ZoneReceive {
            nsid: 1,
            slba: 0x2_0000_0000,
            dwords: 1024,
            action: ZoneReceiveAction::ExtendedReport,
            filter: ReportFilter::ResetRecommended,
            partial: true,
        };
        let e = z.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x7A);
        assert_driver_fields_clear(&e);
        assert_eq!((e.cdw10, e.cdw11), (0, 2));
        assert_eq!(e.cdw12, 1023);
        assert_eq!(e.cdw13, 0x01 | 0x09 << 8 | 1 << 16);
        let back = ZoneReceive::decode(&e).unwrap();
        assert_eq!(back, z);
        assert_eq!(back.bytes(), 4096);
        assert!(back.extended());

        let r = ZoneReceive::report(1, 0, 4096, ReportFilter::Full);
        assert_eq!(r.to_entry().unwrap().cdw13, 0x05 << 8);
        assert!(!r.extended());
        assert_eq!(ZoneReceive::decode(&r.to_entry().unwrap()), Ok(r));
        assert!(ZoneReceive::report(1, 0, 3, ReportFilter::All).to_entry().is_err());
        let mut max = r.to_entry().unwrap();
        max.cdw12 = u32::MAX;
        assert_eq!(ZoneReceive::decode(&max).unwrap().dwords, 1 << 32);

        let mut bad = e;
        bad.cdw13 = 0x02;
        assert_eq!(ZoneReceive::decode(&bad), Err(DecodeError::ZoneReceiveAction(0x02)));
        bad.cdw13 = 0x08 << 8;
        assert_eq!(ZoneReceive::decode(&bad), Err(DecodeError::ReportFilter(0x08)));
    }

    #[test]
    fn zone_append_dwords_and_round_trip() {
        let a = ZoneAppend {
            nsid: 1,
            zslba: 0x0001_0000_0002_0000,
            blocks: 8,
            piremap: true,
            prinfo: 0x8,
            fua: true,
            lr: true,
            reference_tag: 0xDEAD_BEEF,
            app_tag: 0x1234,
            app_tag_mask: 0xFFFF,
        };
        let e = a.to_entry().unwrap();
        assert_eq!(e.opcode(), 0x7D);
        assert_driver_fields_clear(&e);
        assert_eq!((e.cdw10, e.cdw11), (0x0002_0000, 0x0001_0000));
        assert_eq!(e.cdw12, 7 | 1 << 25 | 0x8 << 26 | 1 << 30 | 1 << 31);
        assert_eq!(e.cdw13, 0);
        assert_eq!(e.cdw14, 0xDEAD_BEEF);
        assert_eq!(e.cdw15, 0x1234 | 0xFFFF << 16);
        assert_eq!(ZoneAppend::decode(&e), a);
        assert!(ZoneAppend::new(1, 0, 0).to_entry().is_err());
        assert_eq!(ZoneAppend::new(1, 0, 65536).to_entry().unwrap().cdw12, 0xFFFF);
    }

    #[test]
    fn decoders_accept_any_entry() {
        let patterns = [0u32, u32::MAX, 0xA5A5_A5A5, 0x5A5A_5A5A];
        for p in patterns {
            let mut e = SubmissionEntry::new(0, p);
            e.cdw10 = p;
            e.cdw11 = p;
            e.cdw12 = p;
            e.cdw13 = p;
            e.cdw14 = p;
            e.cdw15 = p;
            let _ = ReadWrite::decode(&e);
            let _ = WriteZeroes::decode(&e);
            let _ = CopyCmd::decode(&e);
            let _ = ZoneAppend::decode(&e);
            let _ = ZoneSend::decode(&e);
            let _ = ZoneReceive::decode(&e);
            let _ = GetLogPage::decode(&e);
            let _ = CreateIoCq::decode(&e);
            let _ = CreateIoSq::decode(&e);
            let _ = IdentifyCmd::decode(&e);
            let _ = Features::decode(&e);
            let _ = DeleteQueue::decode(&e);
            let _ = Flush::decode(&e);
        }
    }
}
