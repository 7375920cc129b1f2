//! The FDP peer as its own commands describe it (Identify, Get Features
//! 1Dh, the FDP Configurations page, Reclaim Unit Handle Status), and the
//! reference: znskit's emulator with a conventional namespace of the same
//! size, block format, handles and reclaim unit size.

use std::sync::Arc;

use zns_device::DriverDevice;
use zns_emulator::host::ProcessMemory;
use zns_emulator::profile::{FtlProfile, Profile};
use zns_emulator::Emulator;
use zns_spec::command::IdentifyCmd;
use zns_spec::fdp::{FdpConfigLog, FdpFeature, IoManagementReceive, RuhStatus};
use zns_spec::identify::{IdentifyController, IdentifyNamespace, IDENTIFY_SIZE};
use zns_spec::log::LogPageId;
use zns_spec::SubmissionEntry;

use super::target::{DriverTarget, Queue, Reply, Target, TargetError, Transfer};

/// What both sides of an FDP comparison share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdpGeometry {
    /// Namespace size in blocks (NSZE).
    pub blocks: u64,
    /// Logical block size in bytes.
    pub block_size: usize,
    /// Metadata bytes per block (separate, not transferred here).
    pub metadata_size: u16,
    /// The endurance group of the namespace.
    pub endgid: u16,
    /// The namespace's placement handles (its Reclaim Unit Handle Status
    /// descriptors, one reclaim group).
    pub handles: u16,
    /// Reclaim unit handles of the configuration (NRUH).
    pub ruhs: u16,
    /// Reclaim unit size in blocks (RUNS / block size).
    pub ru_blocks: u64,
    /// MDTS as a power of two of 4 KiB pages (0: none stated).
    pub mdts_log2: u8,
    /// The controller has a volatile write cache.
    pub volatile_write_cache: bool,
    /// Most blocks one command moves on both paths.
    pub max_blocks: u64,
    /// The controller's model number.
    pub model: String,
}

/// Why a peer cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    /// A command of the description failed.
    #[error("{what}: {outcome}")]
    Command {
        /// The command.
        what: &'static str,
        /// How it ended.
        outcome: String,
    },
    /// The peer has FDP in a shape the emulator does not have.
    #[error("{0}")]
    Unsupported(String),
    /// The reference could not be built.
    #[error("the reference: {0}")]
    Reference(String),
    /// Opening the reference's raw side failed.
    #[error(transparent)]
    Target(#[from] TargetError),
}

fn ask(
    t: &mut dyn Target,
    what: &'static str,
    queue: Queue,
    sqe: &SubmissionEntry,
    len: usize,
) -> Result<Reply, DescribeError> {
    let r = t.run(queue, sqe, &Transfer::FromDevice(len));
    match r.outcome {
        crate::compare::Outcome::Done(_) => Ok(r),
        ref o => Err(DescribeError::Command { what, outcome: o.name() }),
    }
}

fn page(r: &Reply) -> Box<[u8; IDENTIFY_SIZE]> {
    let mut b = Box::new([0u8; IDENTIFY_SIZE]);
    if let Some(d) = &r.data {
        let n = d.len().min(IDENTIFY_SIZE);
        b[..n].copy_from_slice(&d[..n]);
    }
    b
}

/// The FDP description of the namespace `t` reaches; fails for a
/// controller without FDP, a namespace outside an FDP endurance group, or
/// a shape the emulator lacks (several reclaim groups, handles the
/// namespace does not use).
pub fn describe(t: &mut dyn Target) -> Result<FdpGeometry, DescribeError> {
    let nsid = t.nsid();
    let r =
        ask(t, "Identify Controller", Queue::Admin, &IdentifyCmd::controller().to_entry(), 4096)?;
    let ic = IdentifyController::from_bytes(&page(&r));
    if ic.ctratt & IdentifyController::CTRATT_FDPS == 0 {
        return Err(DescribeError::Unsupported(format!(
            "{}: the controller does not support Flexible Data Placement (CTRATT bit 19 clear)",
            t.name()
        )));
    }
    let sqe = IdentifyCmd::namespace(nsid).to_entry();
    let id = IdentifyNamespace::from_bytes(&page(&ask(
        t,
        "Identify Namespace",
        Queue::Admin,
        &sqe,
        4096,
    )?));
    let block_size = id.block_size().ok_or_else(|| {
        DescribeError::Unsupported(format!("namespace {nsid}: its LBA format has no data size"))
    })? as usize;
    let endgid = id.endgid;
    let f = FdpFeature { endgid, enabled: false, config_index: 0 };
    let r = t.run(Queue::Admin, &f.get_entry(), &Transfer::None);
    let feature = FdpFeature::from_dwords(
        endgid as u32,
        r.dw0().ok_or_else(|| DescribeError::Command {
            what: "Get Features 1Dh",
            outcome: r.outcome.name(),
        })?,
    );
    if !feature.enabled {
        return Err(DescribeError::Unsupported(format!(
            "{}: FDP is not enabled in endurance group {endgid}",
            t.name()
        )));
    }
    let (ruhs, ru_bytes) = config_of(t, endgid, feature.config_index)?;
    let handles = handles_of(t, nsid, ruhs)?;
    if handles != ruhs {
        return Err(DescribeError::Unsupported(format!(
            "{}: namespace {nsid} uses {handles} of the {ruhs} reclaim unit handles; the \
             emulator's FDP namespace uses all of them",
            t.name()
        )));
    }
    if ru_bytes % block_size as u64 != 0 || ru_bytes == 0 {
        return Err(DescribeError::Unsupported(format!(
            "reclaim units of {ru_bytes} bytes are no whole number of {block_size}-byte blocks"
        )));
    }
    let mdts_log2 = ic.mdts;
    let mdts_bytes = match mdts_log2 {
        0 => usize::MAX,
        m => 4096usize << m.min(20),
    };
    let max_bytes = mdts_bytes.min(t.max_transfer()).min(4096 << 9);
    Ok(FdpGeometry {
        blocks: id.nsze,
        block_size,
        metadata_size: id.current_lba_format().metadata_size,
        endgid,
        handles,
        ruhs,
        ru_blocks: ru_bytes / block_size as u64,
        mdts_log2,
        volatile_write_cache: ic.vwc & IdentifyController::VWC_PRESENT != 0,
        max_blocks: (max_bytes / block_size).max(1) as u64,
        model: ic.model_number.trim().to_string(),
    })
}

/// NRUH and RUNS of configuration `index` of the FDP Configurations page
/// of endurance group `endgid`, which must have one reclaim group.
fn config_of(t: &mut dyn Target, endgid: u16, index: u8) -> Result<(u16, u64), DescribeError> {
    let what = "Get Log Page 20h";
    let head = zns_spec::fdp::get_log_page(LogPageId::FdpConfigurations, endgid, 4);
    let r = ask(t, what, Queue::Admin, &head.to_entry().expect("4 dwords"), 16)?;
    let size = r.data.as_deref().and_then(FdpConfigLog::size_of).unwrap_or(16).clamp(16, 4096);
    let g =
        zns_spec::fdp::get_log_page(LogPageId::FdpConfigurations, endgid, size.div_ceil(4) as u64);
    let r =
        ask(t, what, Queue::Admin, &g.to_entry().expect("dwords"), size.div_ceil(4) as usize * 4)?;
    let log = FdpConfigLog::from_bytes(r.data.as_deref().unwrap_or_default())
        .map_err(|e| DescribeError::Command { what, outcome: e.to_string() })?;
    let c = log.configs.get(index as usize).ok_or_else(|| {
        DescribeError::Unsupported(format!("configuration {index} is not in the page"))
    })?;
    if c.reclaim_groups != 1 || c.attributes.rgif != 0 {
        return Err(DescribeError::Unsupported(format!(
            "{} reclaim groups (RGIF {}): the emulator has one",
            c.reclaim_groups, c.attributes.rgif
        )));
    }
    Ok((c.handle_types.len() as u16, c.reclaim_unit_bytes))
}

/// The number of placement handles of namespace `nsid`: the descriptors of
/// its Reclaim Unit Handle Status (one reclaim group).
fn handles_of(t: &mut dyn Target, nsid: u32, ruhs: u16) -> Result<u16, DescribeError> {
    let dwords = (RuhStatus::HEADER + 32 * ruhs as usize).div_ceil(4) as u64;
    let sqe = IoManagementReceive::ruh_status(nsid, dwords).to_entry().expect("dwords");
    let r = ask(t, "Reclaim Unit Handle Status", Queue::Io, &sqe, dwords as usize * 4)?;
    let s = RuhStatus::from_bytes(r.data.as_deref().unwrap_or_default()).map_err(|e| {
        DescribeError::Command { what: "Reclaim Unit Handle Status", outcome: e.to_string() }
    })?;
    Ok(s.descriptors.len() as u16)
}

/// How many times the namespace the reference's flash holds: enough spare
/// that garbage collection does not start within a run (its counters would
/// then differ from a peer without it: four times was not enough for a
/// run whose many handle updates left reclaim units part written), the
/// most the emulator's 1000 % over-provisioning limit allows.
const FLASH_FACTOR: u64 = 10;

/// The emulator's FTL for a namespace of exactly `g.blocks` blocks whose
/// segments (reclaim units) are `g.ru_blocks` long.
pub fn ftl_for(g: &FdpGeometry) -> Result<FtlProfile, DescribeError> {
    let s = g.ru_blocks;
    let data = g.blocks.div_ceil(s);
    // Open units (one per handle and the GC's) and the GC reserve.
    let reserved = g.handles as u64 + 4;
    let segments = (g.blocks * FLASH_FACTOR).div_ceil(s).max(data + reserved + 1);
    // exposed = floor(physical / (1 + OP)): aim half a block above the size.
    let physical = segments * s;
    let op = physical as f64 / (g.blocks as f64 + 0.5) - 1.0;
    let ftl = FtlProfile {
        flash_zones: u32::try_from(segments).map_err(|_| {
            DescribeError::Unsupported(format!("{segments} reclaim units are too many"))
        })?,
        flash_zone_blocks: s,
        segment_blocks: s,
        over_provisioning: op,
        policy: "greedy".into(),
    };
    if ftl.exposed_blocks() != g.blocks || !(op > 0.0 && op <= 10.0) {
        return Err(DescribeError::Unsupported(format!(
            "no emulator flash of {s}-block reclaim units exposes exactly {} blocks (over-\
             provisioning {op:.3})",
            g.blocks
        )));
    }
    Ok(ftl)
}

/// The reference's profile (TOML).
pub fn profile_toml(g: &FdpGeometry) -> Result<String, DescribeError> {
    let ftl = ftl_for(g)?;
    // MDTS 0 (no limit) has no profile value: the largest the emulator has.
    let mdts = match g.mdts_log2 {
        0 => 9,
        m => m.min(9),
    };
    Ok(format!(
        "name = \"differential-fdp\"\n\
         description = \"the FDP geometry of {model}\"\n\n\
         [controller]\nserial = \"ZNSKIT-DIFF-FDP\"\nmodel = \"znskit reference\"\n\
         mdts_log2 = {mdts}\nzasl_log2 = {mdts}\nvolatile_write_cache = {vwc}\n\n\
         [[namespace]]\nkind = \"conventional\"\nblock_size = {bs}\nmetadata_size = {ms}\n\n\
         [namespace.ftl]\nflash_zones = {zones}\nflash_zone_blocks = {s}\nsegment_blocks = {s}\n\
         over_provisioning = {op:?}\npolicy = \"greedy\"\n\n\
         [namespace.fdp]\nhandles = {h}\nkind = \"initially\"\n",
        model = g.model.replace(['"', '\\'], "_"),
        vwc = g.volatile_write_cache,
        bs = g.block_size,
        ms = g.metadata_size,
        zones = ftl.flash_zones,
        s = ftl.segment_blocks,
        op = ftl.over_provisioning,
        h = g.handles,
    ))
}

/// The reference: an emulated controller (RAM media, no timing model)
/// with the namespace `g` describes, reached through the user-space
/// driver.
pub fn open(g: &FdpGeometry) -> Result<DriverTarget, DescribeError> {
    let text = profile_toml(g)?;
    let profile = Profile::from_toml(&text).map_err(|e| DescribeError::Reference(e.to_string()))?;
    let memory = ProcessMemory::new();
    let emu = Emulator::with_profile(profile)
        .build(memory.clone())
        .map_err(|e| DescribeError::Reference(e.to_string()))?;
    let dev = DriverDevice::from_emulator(emu, memory, "emu:differential-fdp")
        .map_err(|e| DescribeError::Reference(e.to_string()))?;
    Ok(DriverTarget::new(Arc::new(dev), "emu")?)
}
