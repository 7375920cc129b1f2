//! The io_uring NVMe passthrough backend (`ng:/dev/ngXnY`): every command
//! is an NVMe submission entry built exactly as the driver builds it, sent
//! through the kernel's generic namespace device with `IORING_OP_URING_CMD`
//! (128-byte SQEs, 32-byte CQEs carrying the command's result), so the
//! device's own statuses and Zone Append's assigned LBA come back unchanged.
//!
//! A zoned namespace opens as a zoned device; an NVM command set
//! namespace as one without zones (with its FDP configuration where its
//! endurance group has one). Identify, Get Log Page and Get/Set Features
//! go through the admin passthrough ioctl. Each
//! [`PassthroughQueue`] owns an io_uring ring: submissions are queued
//! without a system call, [`ZoneQueue::ring`] submits them all with one
//! `io_uring_enter`, and polling reaps completions. The namespace device
//! is shared by all queues.
//!
//! Limits: the kernel passes through at most its own transfer limit per
//! command (`max_hw_sectors_kb` of the controller's namespaces), and the
//! admin passthrough needs `CAP_SYS_ADMIN`.

use std::any::Any;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_uring::opcode::UringCmd80;
use zns_spec::command::{GetLogPage, IdentifyCmd, ZoneReceive};
use zns_spec::identify::{
    ActiveNamespaceList, IdentifyController, IdentifyNamespace, NamespaceIdDescriptorList, Oncs,
    ZnsController, ZnsNamespace, IDENTIFY_SIZE,
};
use zns_spec::{
    AdminOpcode, CommandSetId, ReportFilter, ReportHeader, SubmissionEntry, ZoneDescriptor,
};

use super::ng_admin;
use super::sys::{self, Big, Borrowed, Cqe, Held, Ring};
use super::{os_error, status_error, sysfs, MAX_QUEUE_DEPTH};
use crate::buffer::IoBuffer;
use crate::command::{self, Transfer};
use crate::device::{Data, ZoneQueue, ZonedDevice};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::{
    Capabilities, ConventionalNamespace, CopyLimits, DeviceInfo, IdentifyData, ZrwaInfo,
};
use crate::op::{Completion, Rejected, ZoneOp};

/// The minimum memory page size assumed for MDTS and ZASL (CAP.MPSMIN is
/// not visible through the kernel; 4 KiB is what controllers report).
const ASSUMED_MPSMIN: u64 = 4096;

/// The transfer limit used when sysfs shows none for the namespace: the
/// kernel's default request size limit (255 sectors), in whole pages.
const FALLBACK_TRANSFER: usize = 124 << 10;

/// What the device and its queues share.
#[derive(Debug)]
struct Shared {
    file: File,
    info: DeviceInfo,
}

/// A zoned namespace, or an NVM one as a device without zones, reached
/// through the kernel's NVMe generic character device with io_uring
/// passthrough; admin commands (Identify, Get Log Page, Get/Set
/// Features) go through the admin passthrough ioctl.
///
/// Thread safety: `Send + Sync`; each thread makes its own queue (its own
/// io_uring) with [`ZonedDevice::queue`].
#[derive(Debug)]
pub struct PassthroughDevice {
    shared: Arc<Shared>,
    path: PathBuf,
}

fn admin(file: &File, uri: &str, what: &str, sqe: &SubmissionEntry) -> Result<Box<[u8]>> {
    let mut buf = vec![0u8; IDENTIFY_SIZE].into_boxed_slice();
    let r = sys::nvme_passthru(file.as_fd(), true, sqe, Some(&mut buf)).map_err(|e| {
        DeviceError::Unavailable {
            uri: uri.to_string(),
            reason: format!("{what} through the admin passthrough ioctl: {e}"),
        }
    })?;
    if r.status != 0 {
        let status = zns_spec::StatusField(r.status).status();
        return Err(DeviceError::Unavailable {
            uri: uri.to_string(),
            reason: format!("{what}: {status}"),
        });
    }
    Ok(buf)
}

fn page(b: &[u8]) -> &[u8; IDENTIFY_SIZE] {
    b.try_into().expect("identify buffers are 4 KiB")
}

impl PassthroughDevice {
    /// Opens the generic namespace device at `path` (`/dev/ng0n1`). `uri`
    /// is the URI as given, kept for [`DeviceInfo::uri`].
    pub fn open(path: &Path, uri: &str) -> Result<Self> {
        super::check_device_file(path, uri, false)?;
        let fail = |reason: String| DeviceError::Unavailable { uri: uri.to_string(), reason };
        match Ring::<Big>::new(1) {
            Ok(r) if r.supports(UringCmd80::CODE) => {}
            Ok(_) => {
                return Err(fail(
                    "this kernel's io_uring has no IORING_OP_URING_CMD (Linux 5.19 or later \
                     is needed)"
                        .into(),
                ))
            }
            Err(e) => return Err(fail(format!("io_uring with 128-byte entries: {e}"))),
        }
        let file = super::open_rw(path, uri, 0)?;
        let nsid = sys::nvme_namespace_id(file.as_fd()).map_err(|e| {
            fail(format!(
                "{} is not an NVMe generic namespace device (NVME_IOCTL_ID: {e})",
                path.display()
            ))
        })?;
        let ic = IdentifyController::from_bytes(page(&admin(
            &file,
            uri,
            "Identify Controller",
            &IdentifyCmd::controller().to_entry(),
        )?));
        let id = IdentifyNamespace::from_bytes(page(&admin(
            &file,
            uri,
            "Identify Namespace",
            &IdentifyCmd::namespace(nsid).to_entry(),
        )?));
        let csi = admin(&file, uri, "Namespace Identification Descriptors", &{
            IdentifyCmd::ns_id_descriptors(nsid).to_entry()
        })
        .ok()
        .and_then(|b| NamespaceIdDescriptorList::from_bytes(page(&b)).ok())
        .and_then(|l| l.command_set());
        if csi == Some(CommandSetId::Nvm) {
            return Self::open_nvm(file, path, uri, nsid, (&ic, &id));
        }
        if csi.is_some_and(|c| c != CommandSetId::Zoned) {
            return Err(DeviceError::Unsupported(format!(
                "namespace {nsid} of {} is neither a zoned nor an NVM namespace (command set \
                 {csi:?})",
                path.display()
            )));
        }
        let zns = ZnsNamespace::from_bytes(page(&admin(
            &file,
            uri,
            "ZNS Identify Namespace",
            &IdentifyCmd::csi_namespace(nsid, CommandSetId::Zoned).to_entry(),
        )?));
        let zctrl = admin(
            &file,
            uri,
            "ZNS Identify Controller",
            &IdentifyCmd::csi_controller(CommandSetId::Zoned).to_entry(),
        )
        .map(|b| ZnsController::from_bytes(page(&b)))
        .unwrap_or_default();
        let block_size = id.block_size().ok_or_else(|| {
            fail(format!("namespace {nsid}: LBA format {} has no data size", id.format_index()))
        })?;
        let fmt = zns.current_zone_format(&id);
        if fmt.zone_size == 0 {
            return Err(DeviceError::Unsupported(format!(
                "namespace {nsid} of {} reports no zone size: not a zoned namespace",
                path.display()
            )));
        }
        let mdts = transfer_limit(path, &ic, block_size);
        let zasl = zctrl
            .zasl_bytes(ASSUMED_MPSMIN, Some(mdts as u64))
            .map_or(mdts, |z| (z.min(usize::MAX as u64) as usize).min(mdts));
        let zone_capacity = first_zone_capacity(&file, nsid, uri)?;
        let conventional = conventional_namespace(&file, uri, nsid);
        let copy = CopyLimits::from_identify(&ic, &id);
        let ext = fmt.extension_bytes() as usize;
        let info = DeviceInfo {
            backend: "ng",
            transport: format!("io_uring passthrough {}", path.display()),
            uri: uri.to_string(),
            model: ic.model_number.trim().to_string(),
            serial: ic.serial_number.trim().to_string(),
            firmware: ic.firmware_revision.trim().to_string(),
            nsid,
            block_size: block_size as u32,
            metadata_size: id.current_lba_format().metadata_size,
            zoned: true,
            namespace_blocks: id.nsze / fmt.zone_size * fmt.zone_size,
            zone_count: id.nsze / fmt.zone_size,
            zone_size: fmt.zone_size,
            zone_capacity,
            max_open: zns.max_open,
            max_active: zns.max_active,
            zasl_bytes: zasl,
            mdts_bytes: mdts,
            capabilities: Capabilities {
                append: true,
                copy,
                write_zeroes: ic.oncs.has(Oncs::WRITE_ZEROES),
                extended_report: ext > 0,
                extension_bytes: ext,
                read_across_zone_boundaries: zns.read_across_boundaries(),
                variable_zone_capacity: zns.variable_capacity(),
                volatile_write_cache: ic.vwc & IdentifyController::VWC_PRESENT != 0,
                select_all: true,
                offline: true,
                // Not passed through yet: refused with Unsupported.
                metadata: false,
                stores_data: true,
                zrwa: ZrwaInfo::from_identify(&zns),
            },
            conventional,
            // FDP is for NVM namespaces (see `open_nvm`).
            fdp: None,
            identify: Some(IdentifyData {
                version: ic.ver,
                controller: ic.clone(),
                zns_controller: zctrl,
                namespace: id,
                zns_namespace: zns,
            }),
        };
        tracing::info!(
            uri,
            zones = info.zone_count,
            zone_size = info.zone_size,
            mdts = info.mdts_bytes,
            "zoned namespace open through io_uring passthrough"
        );
        Ok(PassthroughDevice { shared: Arc::new(Shared { file, info }), path: path.to_path_buf() })
    }

    /// An NVM command set namespace, as a device without zones: reads,
    /// writes (placed by FDP where its endurance group has it), Write
    /// Zeroes, Flush, Copy, and the FDP commands.
    fn open_nvm(
        file: File,
        path: &Path,
        uri: &str,
        nsid: u32,
        (ic, id): (&IdentifyController, &IdentifyNamespace),
    ) -> Result<Self> {
        let block_size = id.block_size().ok_or_else(|| DeviceError::Unavailable {
            uri: uri.to_string(),
            reason: format!("namespace {nsid}: LBA format {} has no data size", id.format_index()),
        })?;
        let mdts = transfer_limit(path, ic, block_size);
        let transport = format!("io_uring passthrough {}", path.display());
        let info =
            ng_admin::nvm_info(&file, uri, transport, nsid, (ic, id), block_size as u32, mdts);
        tracing::info!(
            uri,
            blocks = info.namespace_blocks,
            fdp = info.fdp.is_some(),
            mdts = info.mdts_bytes,
            "NVM namespace open through io_uring passthrough"
        );
        Ok(PassthroughDevice { shared: Arc::new(Shared { file, info }), path: path.to_path_buf() })
    }

    /// The namespace device's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A queue of the concrete type with room for `depth` commands.
    pub fn passthrough_queue(&self, depth: usize) -> Result<PassthroughQueue> {
        PassthroughQueue::new(Arc::clone(&self.shared), depth)
    }
}

/// The most bytes one command moves: the controller's MDTS within the
/// kernel's limit for the namespace, at least a block.
fn transfer_limit(path: &Path, ic: &IdentifyController, block_size: u64) -> usize {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let kernel_limit = sysfs::parse_nvme_name(&name)
        .and_then(|(ctrl, ns)| sysfs::namespace_transfer_limit(Path::new("/sys"), ctrl, ns))
        .unwrap_or(FALLBACK_TRANSFER);
    ic.max_transfer_bytes(ASSUMED_MPSMIN)
        .map_or(kernel_limit, |m| (m.min(usize::MAX as u64) as usize).min(kernel_limit))
        .max(block_size as usize)
}

/// Capacity of zone 0, from a one-zone report through the I/O passthrough
/// ioctl.
fn first_zone_capacity(file: &File, nsid: u32, uri: &str) -> Result<u64> {
    let mut buf = vec![0u8; ReportHeader::SIZE + ZoneDescriptor::SIZE];
    let mut r = ZoneReceive::report(nsid, 0, buf.len() as u64, ReportFilter::All);
    r.partial = true;
    let sqe = r.to_entry().map_err(|e| DeviceError::InvalidArgument(e.to_string()))?;
    let res = sys::nvme_passthru(file.as_fd(), false, &sqe, Some(&mut buf)).map_err(|e| {
        DeviceError::Unavailable {
            uri: uri.to_string(),
            reason: format!("zone report through the I/O passthrough ioctl: {e}"),
        }
    })?;
    if res.status != 0 {
        return Err(status_error(OpKind::ReportZones, Some(0), res.status));
    }
    let report = crate::zone::parse_report(&buf, 1, None)?;
    report
        .descriptors
        .first()
        .map(|d| d.capacity)
        .ok_or_else(|| DeviceError::Unsupported("the device reported no zones".into()))
}

/// The first active namespace of the NVM command set beside `nsid`.
fn conventional_namespace(file: &File, uri: &str, nsid: u32) -> Option<ConventionalNamespace> {
    let list = admin(file, uri, "active namespaces", &IdentifyCmd::active_namespaces(0).to_entry())
        .ok()?;
    ActiveNamespaceList::from_bytes(page(&list)).ids.into_iter().filter(|&n| n != nsid).find_map(
        |n| {
            let d = admin(file, uri, "descriptors", &IdentifyCmd::ns_id_descriptors(n).to_entry())
                .ok()?;
            let csi = NamespaceIdDescriptorList::from_bytes(page(&d)).ok()?.command_set();
            if csi.is_some_and(|c| c != CommandSetId::Nvm) {
                return None;
            }
            let id = IdentifyNamespace::from_bytes(page(
                &admin(file, uri, "namespace", &IdentifyCmd::namespace(n).to_entry()).ok()?,
            ));
            let block_size = id.block_size()? as u32;
            (id.nsze > 0).then_some(ConventionalNamespace { nsid: n, block_size, blocks: id.nsze })
        },
    )
}

impl ZonedDevice for PassthroughDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(self.passthrough_queue(depth)?))
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn log_page(&self, page: GetLogPage) -> Result<Vec<u8>> {
        ng_admin::log_page(&self.shared.file, page, self.shared.info.mdts_bytes)
    }

    fn get_features(&self, entry: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::GetFeatures)?;
        ng_admin::features(&self.shared.file, entry, data)
    }

    fn set_features(&self, entry: &SubmissionEntry, data: Option<&[u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::SetFeatures)?;
        // The ioctl takes one buffer for either direction; the kernel only
        // reads a Set Features buffer.
        let mut copy = data.map(<[u8]>::to_vec);
        ng_admin::features(&self.shared.file, entry, copy.as_deref_mut())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What an outstanding command needs at completion.
#[derive(Debug, Clone, Copy)]
struct Slot {
    tag: u64,
    op: OpKind,
    lba: Option<u64>,
    /// The ring holds the queue's own bytes (Copy ranges): no buffer back.
    internal: bool,
}

/// A queue of the passthrough backend: one io_uring ring.
///
/// Thread safety: `Send`, not `Sync`: one thread submits, rings and polls.
#[derive(Debug)]
pub struct PassthroughQueue {
    shared: Arc<Shared>,
    ring: Ring<Big>,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    deferred: VecDeque<Completion>,
}

impl PassthroughQueue {
    fn new(shared: Arc<Shared>, depth: usize) -> Result<Self> {
        if depth == 0 {
            return Err(DeviceError::InvalidArgument("queue depth 0 (at least 1)".into()));
        }
        let n = depth.min(MAX_QUEUE_DEPTH);
        let ring = Ring::new(n).map_err(|e| DeviceError::Io {
            context: format!("create an io_uring of {n} entries"),
            source: e,
        })?;
        Ok(PassthroughQueue {
            shared,
            ring,
            slots: vec![None; n],
            free: (0..n as u32).rev().collect(),
            deferred: VecDeque::with_capacity(n),
        })
    }

    /// The completion of the command in a slot, freeing the slot.
    fn finish(slots: &mut [Option<Slot>], free: &mut Vec<u32>, c: Cqe) -> Option<Completion> {
        let slot = slots.get_mut(c.slot as usize)?.take()?;
        free.push(c.slot);
        let result = outcome(slot.op, slot.lba, c.res, c.result);
        let buffer = match c.held {
            Held::Buffer(b) if !slot.internal => Some(b),
            _ => None,
        };
        Some(Completion { tag: slot.tag, op: slot.op, result, buffer })
    }

    /// Polls until a slot is free, keeping completions for
    /// [`ZoneQueue::poll`].
    fn make_room(&mut self) -> Result<()> {
        let start = std::time::Instant::now();
        while self.free.is_empty() {
            let (slots, free, deferred) = (&mut self.slots, &mut self.free, &mut self.deferred);
            self.ring.wait(std::time::Duration::from_millis(100), &mut |c| {
                if let Some(c) = Self::finish(slots, free, c) {
                    deferred.push_back(c);
                }
            });
            if start.elapsed() > crate::device::DEFAULT_TIMEOUT && self.free.is_empty() {
                return Err(DeviceError::Timeout {
                    what: "room in a full queue",
                    after: start.elapsed(),
                });
            }
        }
        Ok(())
    }
}

/// The result of a passthrough completion: `res` is a negative errno, the
/// NVMe status field, or 0 with the command's result.
fn outcome(op: OpKind, lba: Option<u64>, res: i32, result: u64) -> Result<u64> {
    match res {
        0 if op == OpKind::Append => Ok(result),
        0 => Ok(0),
        r if r < 0 => Err(os_error(op, lba, -r)),
        r => Err(status_error(op, lba, r as u16)),
    }
}

impl ZoneQueue for PassthroughQueue {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len() + self.deferred.len()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        let Some(&slot) = self.free.last() else {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        };
        let info = &self.shared.info;
        let (held, len, internal) = match (op.data_to_device(), buffer) {
            (None, Some(b)) => {
                return Err(Rejected { error: command::stray_buffer(&op), buffer: Some(b) })
            }
            (Some(_), None) => {
                return Err(Rejected { error: command::no_buffer(&op), buffer: None })
            }
            (None, None) => match command::own_data(&op) {
                Some(Ok(list)) => (Held::Bytes(list), 0, true),
                Some(Err(error)) => return Err(Rejected { error, buffer: None }),
                None => (Held::None, 0, false),
            },
            (Some(_), Some(mut buf)) => {
                if let Err(error) = command::check_metadata(info, &op, &buf) {
                    return Err(Rejected { error, buffer: Some(buf) });
                }
                if let ZoneOp::SetZoneExtension { .. } = op {
                    if let Err(error) = command::pad_extension(info, &mut buf) {
                        return Err(Rejected { error, buffer: Some(buf) });
                    }
                }
                let len = buf.len();
                (Held::Buffer(buf), len, false)
            }
        };
        let give_back = |held: Held| match held {
            Held::Buffer(b) => Some(b),
            _ => None,
        };
        let sqe = match command::entry(info, &op, len) {
            Ok(e) => e,
            Err(error) => return Err(Rejected { error, buffer: give_back(held) }),
        };
        if let Err(refused) = self.ring.push_nvme(slot, self.shared.file.as_fd(), &sqe, held) {
            return Err(Rejected { error: DeviceError::QueueFull, buffer: give_back(refused.0) });
        }
        self.free.pop();
        self.slots[slot as usize] = Some(Slot { tag, op: op.kind(), lba: op.lba(), internal });
        Ok(())
    }

    fn ring(&mut self) {
        if let Err(e) = self.ring.submit() {
            tracing::error!(error = %e, "io_uring submission failed");
        }
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        let mut n = 0;
        while n < max {
            let Some(c) = self.deferred.pop_front() else { break };
            f(c);
            n += 1;
        }
        if n < max {
            let (slots, free) = (&mut self.slots, &mut self.free);
            self.ring.reap(max - n, &mut |c| {
                if let Some(c) = Self::finish(slots, free, c) {
                    f(c);
                    n += 1;
                }
            });
        }
        n
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        command::check_data_metadata(&self.shared.info, op, &data)?;
        self.make_room()?;
        let info = &self.shared.info;
        let (mut transfer, len) = command::transfer(info, op, data)?;
        let borrowed = match &mut transfer {
            Transfer::None => Borrowed::None,
            Transfer::ToDevice(d) => Borrowed::ToDevice(d),
            Transfer::FromDevice(b) => Borrowed::FromDevice(b),
        };
        let sqe = command::entry(info, op, len)?;
        let slot = self.free.pop().expect("make_room left a free slot");
        let (slots, free, deferred) = (&mut self.slots, &mut self.free, &mut self.deferred);
        let r = self.ring.run_borrowed(slot, self.shared.file.as_fd(), &sqe, borrowed, &mut |c| {
            if let Some(c) = Self::finish(slots, free, c) {
                deferred.push_back(c);
            }
        });
        self.free.push(slot);
        let c = r.map_err(|e| DeviceError::Io {
            context: op.kind().describe(op.lba(), false),
            source: e,
        })?;
        outcome(op.kind(), op.lba(), c.res, c.result)
    }
}
