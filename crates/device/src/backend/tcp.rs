//! The NVMe/TCP backend (`tcp:HOST:PORT/NQN[/NSID]` URIs): a zoned
//! namespace of a remote NVMe/TCP target (znskit's `zns serve`, the Linux
//! kernel's nvmet, SPDK) through the driver's TCP transport; or, named by
//! its NSID, a conventional (NVM command set) one, which opens as a device
//! without zones ([`DeviceInfo::zoned`] false).
//!
//! Opening the device connects an admin queue (a new controller), enables
//! the controller with the I/O command sets, asks for I/O queues and reads
//! the Identify data. Each [`ZoneQueue`] is one more connection: an I/O
//! queue of that controller. Commands are built by the same code as for
//! the driver and the passthrough; the target's statuses come back as
//! they are.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zns_driver::tcp::{Event, HostAuth, TcpError, TcpQueuePair};
use zns_spec::command::{Features, IdentifyCmd};
use zns_spec::features::FeatureId;
use zns_spec::identify::{
    ActiveNamespaceList, IdentifyController, IdentifyNamespace, NamespaceIdDescriptorList, Oncs,
    ZnsController, ZnsNamespace, IDENTIFY_SIZE,
};
use zns_spec::log::GetLogPage;
use zns_spec::regs::Cap;
use zns_spec::tcp::Digests;
use zns_spec::{
    AdminOpcode, CommandSetId, ReportFilter, ReportHeader, SubmissionEntry, ZoneDescriptor,
};

use super::status_error;
use crate::buffer::IoBuffer;
use crate::command::{self, Transfer};
use crate::device::{Data, ZoneQueue, ZonedDevice};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::{Capabilities, CopyLimits, DeviceInfo, IdentifyData, NvmIdentity, ZrwaInfo};
use crate::op::{Completion, Rejected, ZoneOp};
use crate::uri::TcpUri;

/// The host NQN znskit presents.
pub const HOST_NQN: &str = "nqn.2014-08.io.znskit:host";

/// I/O queues asked for at open.
const IO_QUEUES: u16 = 64;

/// Most commands one queue keeps in flight (and asks the target for).
const MAX_DEPTH: usize = 128;

/// State shared by the device and its queues.
#[derive(Debug)]
struct Shared {
    uri: TcpUri,
    info: DeviceInfo,
    cntlid: u16,
    /// The admin queue: it keeps the controller alive, and carries Get
    /// Log Page.
    admin: Mutex<TcpQueuePair>,
    /// CAP.MQES + 1: the most entries the controller takes in a queue.
    max_entries: usize,
    /// Queue IDs free for new queues, least recently used first: a target
    /// tears a closed connection's queue down asynchronously (Linux nvmet
    /// refuses its ID until then), so a freed ID goes to the back.
    free_qids: Mutex<VecDeque<u16>>,
}

/// A zoned (or, by NSID, conventional) namespace of an NVMe/TCP target.
///
/// Thread safety: `Send + Sync`; queues are created from any thread.
#[derive(Debug)]
pub struct TcpDevice {
    shared: Arc<Shared>,
}

fn tcp_err<'a>(uri: &'a str, what: &'a str) -> impl Fn(TcpError) -> DeviceError + 'a {
    move |e| DeviceError::Unavailable { uri: uri.to_string(), reason: format!("{what}: {e}") }
}

/// Runs an admin command that returns a 4 KiB page.
fn identify(
    q: &mut TcpQueuePair,
    uri: &str,
    what: &str,
    sqe: SubmissionEntry,
) -> Result<[u8; IDENTIFY_SIZE]> {
    let mut page = [0u8; IDENTIFY_SIZE];
    let c = q.run(sqe, None, Some(&mut page[..])).map_err(tcp_err(uri, what))?;
    if !c.status().is_success() {
        return Err(DeviceError::Unavailable {
            uri: uri.to_string(),
            reason: format!("{what}: {}", c.status()),
        });
    }
    Ok(page)
}

impl TcpDevice {
    /// Connects to the target `uri` names; `text` is the URI as given.
    pub fn open(uri: &TcpUri, text: &str) -> Result<Self> {
        // Secrets never reach the device's URI or an error message.
        let shown;
        let text = if uri.dhchap_secret.is_some() {
            shown = crate::DeviceUri::Tcp(uri.clone()).to_string();
            shown.as_str()
        } else {
            text
        };
        let fail = |reason: String| DeviceError::Unavailable { uri: text.to_string(), reason };
        let digests = Digests { header: uri.header_digest, data: uri.data_digest };
        let mut admin = TcpQueuePair::connect(uri.addr.as_str(), digests)
            .map_err(|e| fail(format!("connect to {}: {e}", uri.addr)))?;
        let cntlid = connect_queue(&mut admin, uri, 0, 32, 0xFFFF)
            .map_err(|e| fail(format!("admin queue: {e}")))?;
        let max_entries =
            enable(&mut admin).map_err(|e| fail(format!("enable the controller: {e}")))?;
        let nq = Features::set(
            FeatureId::NumberOfQueues,
            {
                let n = (IO_QUEUES - 1) as u32;
                n | n << 16
            },
            false,
        );
        let c = admin.run(nq.set_entry(), None, None).map_err(tcp_err(text, "Number of Queues"))?;
        let granted =
            if c.status().is_success() { (c.dw0 & 0xFFFF).min(c.dw0 >> 16) as u16 + 1 } else { 1 };
        let ic = IdentifyController::from_bytes(&identify(
            &mut admin,
            text,
            "Identify Controller",
            IdentifyCmd::controller().to_entry(),
        )?);
        let nsid = match uri.nsid {
            Some(n) => n,
            None => first_zoned(&mut admin, text)?,
        };
        let csi = identify(
            &mut admin,
            text,
            "Namespace Identification Descriptors",
            IdentifyCmd::ns_id_descriptors(nsid).to_entry(),
        )
        .ok()
        .and_then(|b| NamespaceIdDescriptorList::from_bytes(&b).ok())
        .and_then(|l| l.command_set());
        if csi.is_some_and(|c| c != CommandSetId::Zoned && c != CommandSetId::Nvm) {
            return Err(DeviceError::Unsupported(format!(
                "namespace {nsid} of {} is neither a zoned nor an NVM namespace (command set \
                 {csi:?})",
                uri.nqn
            )));
        }
        // Only a namespace that says it is NVM's is taken as conventional:
        // a target without command set descriptors serves zoned ones.
        let zoned = csi != Some(CommandSetId::Nvm);
        let id = IdentifyNamespace::from_bytes(&identify(
            &mut admin,
            text,
            "Identify Namespace",
            IdentifyCmd::namespace(nsid).to_entry(),
        )?);
        let (zns, zctrl) = if zoned {
            let zns = ZnsNamespace::from_bytes(&identify(
                &mut admin,
                text,
                "ZNS Identify Namespace",
                IdentifyCmd::csi_namespace(nsid, CommandSetId::Zoned).to_entry(),
            )?);
            let zctrl = identify(
                &mut admin,
                text,
                "ZNS Identify Controller",
                IdentifyCmd::csi_controller(CommandSetId::Zoned).to_entry(),
            )
            .map(|b| ZnsController::from_bytes(&b))
            .unwrap_or_default();
            (Some(zns), zctrl)
        } else {
            (None, ZnsController::default())
        };
        let mut info = describe(text, uri, &ic, &id, zns.as_ref(), zctrl, nsid)?;
        info.fdp = discover_fdp(&mut admin, text, &ic, &id, info.mdts_bytes);
        let shared = Arc::new(Shared {
            uri: uri.clone(),
            info,
            cntlid,
            admin: Mutex::new(admin),
            max_entries,
            free_qids: Mutex::new((1..=granted.min(IO_QUEUES)).collect()),
        });
        let mut dev = TcpDevice { shared };
        if zoned {
            let capacity = first_zone_capacity(&dev)?;
            Arc::get_mut(&mut dev.shared).expect("not shared yet").info.zone_capacity = capacity;
        }
        tracing::info!(
            uri = text,
            cntlid,
            nsid,
            zoned,
            zones = dev.shared.info.zone_count,
            "NVMe/TCP namespace open"
        );
        Ok(dev)
    }

    /// A queue of the concrete type with room for `depth` commands.
    pub fn tcp_queue(&self, depth: usize) -> Result<TcpQueue> {
        TcpQueue::new(Arc::clone(&self.shared), depth)
    }
}

/// The Flexible Data Placement of the namespace `id` describes, read on
/// the admin queue with the commands of [`crate::fdp::discover`] (log
/// pages in one command each, within `mdts` bytes).
fn discover_fdp(
    admin: &mut TcpQueuePair,
    text: &str,
    ic: &IdentifyController,
    id: &IdentifyNamespace,
    mdts: usize,
) -> Option<crate::fdp::FdpInfo> {
    let admin = std::cell::RefCell::new(admin);
    crate::fdp::discover(
        text,
        ic.ctratt,
        id.endgid,
        |e| admin_features(&mut admin.borrow_mut(), text, OpKind::GetFeatures, e, None, None),
        |page| admin_log_page(&mut admin.borrow_mut(), text, page, mdts),
    )
}

/// Runs a Get or Set Features entry on the admin queue, with its data
/// out of `out` or into `inp`; returns completion DW0.
fn admin_features(
    q: &mut TcpQueuePair,
    uri: &str,
    op: OpKind,
    e: SubmissionEntry,
    out: Option<&[u8]>,
    inp: Option<&mut [u8]>,
) -> Result<u32> {
    let what = if op == OpKind::GetFeatures { "Get Features" } else { "Set Features" };
    let c = q.run(e, out, inp).map_err(tcp_err(uri, what))?;
    if !c.status().is_success() {
        return Err(status_error(op, None, c.status_field().0));
    }
    Ok(c.dw0)
}

/// Get Log Page on the admin queue, in one command of at most `mdts`
/// bytes.
fn admin_log_page(
    q: &mut TcpQueuePair,
    uri: &str,
    page: GetLogPage,
    mdts: usize,
) -> Result<Vec<u8>> {
    let (sqe, len) = command::log_page_entry(&page, mdts)?;
    let mut out = vec![0u8; len];
    let c = q.run(sqe, None, Some(&mut out[..])).map_err(tcp_err(uri, "Get Log Page"))?;
    if !c.status().is_success() {
        return Err(status_error(OpKind::GetLogPage, None, c.status_field().0));
    }
    Ok(out)
}

/// CC.EN with the I/O command sets (CSS 110b) when CAP offers them, then
/// CSTS.RDY within CAP.TO; returns the most entries a queue may have
/// (CAP.MQES + 1).
fn enable(q: &mut TcpQueuePair) -> std::result::Result<usize, TcpError> {
    let cap = Cap(q.property(0x00, true)?);
    let css = if cap.css() & Cap::CSS_IO_COMMAND_SETS != 0 { 0b110 } else { 0b000 };
    let cc = 1 | css << 4 | 6 << 16 | 4 << 20;
    q.set_property(0x14, cc, false)?;
    let deadline = Instant::now() + Duration::from_millis(cap.timeout_ms().max(500) as u64);
    loop {
        if q.property(0x1C, false)? & 1 == 1 {
            return Ok(cap.max_queue_entries() as usize);
        }
        if Instant::now() > deadline {
            return Err(TcpError::Io(std::io::Error::other("CSTS.RDY did not rise within CAP.TO")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first active namespace whose command set is ZNS.
fn first_zoned(q: &mut TcpQueuePair, uri: &str) -> Result<u32> {
    let list = ActiveNamespaceList::from_bytes(&identify(
        q,
        uri,
        "Active Namespace List",
        IdentifyCmd::active_namespaces(0).to_entry(),
    )?);
    for n in list.ids {
        let d = identify(
            q,
            uri,
            "Namespace Identification Descriptors",
            IdentifyCmd::ns_id_descriptors(n).to_entry(),
        )?;
        if NamespaceIdDescriptorList::from_bytes(&d).ok().and_then(|l| l.command_set())
            == Some(CommandSetId::Zoned)
        {
            return Ok(n);
        }
    }
    Err(DeviceError::Unsupported(format!("{uri}: the subsystem has no zoned namespace")))
}

/// The device description from Identify data (zone capacity filled in
/// later from a report). Without ZNS data (`zns` `None`) the namespace is
/// a conventional one: no zones, reads and writes anywhere below NSZE.
fn describe(
    text: &str,
    uri: &TcpUri,
    ic: &IdentifyController,
    id: &IdentifyNamespace,
    zns: Option<&ZnsNamespace>,
    zctrl: ZnsController,
    nsid: u32,
) -> Result<DeviceInfo> {
    let block_size = id.block_size().ok_or_else(|| {
        DeviceError::Unsupported(format!(
            "namespace {nsid}: LBA format {} has no data size",
            id.format_index()
        ))
    })?;
    let Some(zns) = zns else {
        let transport = format!("NVMe/TCP {} {}", uri.addr, uri.nqn);
        let n = NvmIdentity { ic, id, zns_controller: zctrl, nsid, block_size: block_size as u32 };
        let mdts = mdts_bytes(ic, block_size as usize);
        return Ok(DeviceInfo::nvm_namespace("tcp", transport, text, n, mdts));
    };
    let fmt = zns.current_zone_format(id);
    if fmt.zone_size == 0 {
        return Err(DeviceError::Unsupported(format!("namespace {nsid} reports no zone size")));
    }
    let mdts = mdts_bytes(ic, block_size as usize);
    let zasl =
        zctrl.zasl_bytes(4096, Some(mdts as u64)).map_or(mdts, |z| (z.min(mdts as u64)) as usize);
    let ext = fmt.extension_bytes() as usize;
    Ok(DeviceInfo {
        backend: "tcp",
        transport: format!("NVMe/TCP {} {}", uri.addr, uri.nqn),
        uri: text.to_string(),
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
        zone_capacity: fmt.zone_size,
        max_open: zns.max_open,
        max_active: zns.max_active,
        zasl_bytes: zasl,
        mdts_bytes: mdts,
        capabilities: Capabilities {
            append: true,
            copy: CopyLimits::from_identify(ic, id),
            write_zeroes: ic.oncs.has(Oncs::WRITE_ZEROES),
            extended_report: ext > 0,
            extension_bytes: ext,
            read_across_zone_boundaries: zns.read_across_boundaries(),
            variable_zone_capacity: zns.variable_capacity(),
            volatile_write_cache: ic.vwc & IdentifyController::VWC_PRESENT != 0,
            select_all: true,
            offline: true,
            // Metadata does not travel over the fabric here.
            metadata: false,
            stores_data: true,
            zrwa: ZrwaInfo::from_identify(zns),
        },
        conventional: None,
        fdp: None,
        identify: Some(IdentifyData {
            version: ic.ver,
            controller: ic.clone(),
            zns_controller: zctrl,
            namespace: id.clone(),
            zns_namespace: zns.clone(),
        }),
    })
}

/// Largest transfer of one command: MDTS (in units of CAP.MPSMIN, 4 KiB on
/// every target in use), at most 1 MiB, at least a block.
fn mdts_bytes(ic: &IdentifyController, block_size: usize) -> usize {
    ic.max_transfer_bytes(4096).map_or(1 << 20, |m| m.min(1 << 20) as usize).max(block_size)
}

fn first_zone_capacity(dev: &TcpDevice) -> Result<u64> {
    let mut q = dev.tcp_queue(2)?;
    let len = ReportHeader::SIZE + ZoneDescriptor::SIZE;
    let mut buf = IoBuffer::aligned(len)?;
    let op =
        ZoneOp::ReportZones { slba: 0, filter: ReportFilter::All, partial: true, extended: false };
    q.execute(&op, Data::FromDevice(&mut buf))?;
    let report = crate::zone::parse_report(buf.as_slice(), dev.shared.info.zone_size, None)?;
    report
        .descriptors
        .first()
        .map(|d| d.capacity)
        .ok_or_else(|| DeviceError::Unsupported("the target reported no zones".into()))
}

impl ZonedDevice for TcpDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(self.tcp_queue(depth)?))
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn log_page(&self, page: GetLogPage) -> Result<Vec<u8>> {
        let info = &self.shared.info;
        admin_log_page(&mut self.shared.admin.lock(), &info.uri, page, info.mdts_bytes)
    }

    fn get_features(&self, entry: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::GetFeatures)?;
        let mut admin = self.shared.admin.lock();
        admin_features(&mut admin, &self.shared.info.uri, OpKind::GetFeatures, *entry, None, data)
    }

    fn set_features(&self, entry: &SubmissionEntry, data: Option<&[u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::SetFeatures)?;
        let mut admin = self.shared.admin.lock();
        admin_features(&mut admin, &self.shared.info.uri, OpKind::SetFeatures, *entry, data, None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What an outstanding command holds.
#[derive(Debug)]
struct Slot {
    tag: u64,
    op: OpKind,
    lba: Option<u64>,
    /// The buffer the command moves (handed back at completion).
    buffer: Option<IoBuffer>,
    /// Bytes the queue itself sends (Copy ranges).
    list: Option<Vec<u8>>,
    /// Whether the buffer receives data.
    from_device: bool,
}

/// An I/O queue: one NVMe/TCP connection.
///
/// Thread safety: `Send`, not `Sync`.
#[derive(Debug)]
pub struct TcpQueue {
    shared: Arc<Shared>,
    qp: TcpQueuePair,
    slots: Vec<Option<Slot>>,
    free: Vec<u16>,
    deferred: VecDeque<Completion>,
    /// The transport failed: every command fails from now on.
    broken: Option<String>,
}

impl Drop for TcpQueue {
    fn drop(&mut self) {
        self.shared.free_qids.lock().push_back(self.qp.qid());
    }
}

impl TcpQueue {
    fn new(shared: Arc<Shared>, depth: usize) -> Result<TcpQueue> {
        if depth == 0 {
            return Err(DeviceError::InvalidArgument("queue depth 0 (at least 1)".into()));
        }
        // The queue is one entry larger than the commands it holds, and no
        // larger than the controller takes (a Connect with a larger SQSIZE
        // is refused).
        let n = depth.min(MAX_DEPTH).min(shared.max_entries.saturating_sub(1).max(1));
        let uri = shared.info.uri.clone();
        let fail = |reason: String| DeviceError::Unavailable { uri: uri.clone(), reason };
        let digests = Digests { header: shared.uri.header_digest, data: shared.uri.data_digest };
        // A target may still hold a queue ID whose connection just closed:
        // on a refused Connect, try the next free ID.
        let mut last = None;
        let mut qp = None;
        for _ in 0..4 {
            let Some(qid) = shared.free_qids.lock().pop_front() else { break };
            let connected =
                TcpQueuePair::connect(shared.uri.addr.as_str(), digests).and_then(|mut qp| {
                    connect_queue(&mut qp, &shared.uri, qid, (n + 1) as u16, shared.cntlid)?;
                    Ok(qp)
                });
            match connected {
                Ok(q) => {
                    qp = Some(q);
                    break;
                }
                Err(e) => {
                    shared.free_qids.lock().push_back(qid);
                    let refused = matches!(e, TcpError::Command { .. });
                    last = Some(format!("I/O queue {qid}: {e}"));
                    if !refused {
                        break;
                    }
                }
            }
        }
        let Some(mut qp) = qp else {
            return Err(match last {
                Some(reason) => fail(reason),
                None => DeviceError::InvalidArgument(
                    "every I/O queue the target granted is in use".into(),
                ),
            });
        };
        if let Some(id) = &shared.info.identify {
            let in_capsule = (id.controller.ioccsz as usize * 16).saturating_sub(64);
            qp.set_in_capsule_limit(in_capsule);
        }
        // No command of this queue moves more than MDTS: a target sending
        // more is refused before the host buffers it.
        qp.set_max_data(shared.info.mdts_bytes.max(zns_driver::tcp::DEFAULT_MAX_DATA));
        qp.set_poll(std::time::Duration::from_micros(shared.uri.poll_us.into()));
        Ok(TcpQueue {
            shared,
            qp,
            slots: (0..n).map(|_| None).collect(),
            free: (0..n as u16).rev().collect(),
            deferred: VecDeque::new(),
            broken: None,
        })
    }

    /// The transport failed: fail every outstanding command.
    fn fail_all(&mut self, e: &TcpError) {
        let why = e.to_string();
        tracing::warn!(error = %why, "NVMe/TCP queue failed");
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Some(slot) = s.take() {
                self.free.push(i as u16);
                self.deferred.push_back(Completion {
                    tag: slot.tag,
                    op: slot.op,
                    result: Err(DeviceError::Io {
                        context: slot.op.describe(slot.lba, false),
                        source: std::io::Error::other(why.clone()),
                    }),
                    buffer: slot.buffer,
                });
            }
        }
        self.broken = Some(why);
    }

    /// Handles one PDU for the outstanding commands (`lone`: a borrowed
    /// command of [`ZoneQueue::execute`] with its CID and data). Returns
    /// the lone command's completion when it arrives.
    fn pump(&mut self, lone: &mut Option<Lone<'_>>) -> std::result::Result<Option<u64>, TcpError> {
        let mut r2t = None;
        let completion = match self.qp.next_event()? {
            Event::R2t { cid, ttag, offset, len } => {
                r2t = Some((cid, ttag, offset, len));
                None
            }
            Event::Data { cid, offset, bytes, success } => {
                let dest: &mut [u8] = match lone.as_mut() {
                    Some(l) if l.cid == cid => l.inp.as_deref_mut().unwrap_or(&mut []),
                    _ => match self.slots.get_mut(cid as usize).and_then(|s| s.as_mut()) {
                        Some(Slot { buffer: Some(b), from_device: true, .. }) => b.as_mut_slice(),
                        _ => &mut [],
                    },
                };
                let end = offset as usize + bytes.len();
                if end > dest.len() {
                    return Err(TcpError::Pdu(zns_spec::tcp::PduError::DataOutOfRange {
                        offset,
                        len: bytes.len() as u32,
                        limit: dest.len() as u32,
                    }));
                }
                dest[offset as usize..end].copy_from_slice(bytes);
                // SUCCESS: the data PDU stands for the response capsule.
                success.then(|| zns_driver::tcp::data_completion(self.qp.qid(), cid))
            }
            Event::Completion(c) => Some(c),
        };
        let lone_done = completion.and_then(|c| self.complete(c, lone.as_ref()));
        if let Some((cid, ttag, offset, len)) = r2t {
            let src: &[u8] = match lone.as_ref() {
                Some(l) if l.cid == cid => l.out.unwrap_or(&[]),
                _ => match self.slots.get(cid as usize).and_then(|s| s.as_ref()) {
                    Some(Slot { list: Some(l), .. }) => l,
                    Some(Slot { buffer: Some(b), from_device: false, .. }) => b.as_slice(),
                    _ => &[],
                },
            };
            let end = offset as usize + len as usize;
            if end > src.len() {
                return Err(TcpError::Pdu(zns_spec::tcp::PduError::DataOutOfRange {
                    offset,
                    len,
                    limit: src.len() as u32,
                }));
            }
            // `src` borrows the slots, `qp` is another field: no copy.
            self.qp.send_data(cid, ttag, offset, &src[offset as usize..end])?;
        }
        match lone_done {
            Some(Ok(v)) => Ok(Some(v)),
            Some(Err(field)) => {
                let l = lone.as_ref().expect("lone");
                l.status.set(Some(field));
                Ok(Some(0))
            }
            None => Ok(None),
        }
    }

    /// Completes the command `c` answers: the lone command's result
    /// (returned), or an outstanding one's, queued for `poll`.
    fn complete(
        &mut self,
        c: zns_spec::CompletionEntry,
        lone: Option<&Lone<'_>>,
    ) -> Option<std::result::Result<u64, u16>> {
        let cid = c.cid;
        let result =
            if c.status().is_success() { Ok(c.result_u64()) } else { Err(c.status_field().0) };
        if lone.is_some_and(|l| l.cid == cid) {
            return Some(result);
        }
        if let Some(slot) = self.slots.get_mut(cid as usize).and_then(|s| s.take()) {
            self.free.push(cid);
            let result = match result {
                Ok(v) if slot.op == OpKind::Append => Ok(v),
                Ok(_) => Ok(0),
                Err(field) => Err(status_error(slot.op, slot.lba, field)),
            };
            self.deferred.push_back(Completion {
                tag: slot.tag,
                op: slot.op,
                result,
                buffer: slot.buffer,
            });
        }
        None
    }
}

/// Fabrics Connect of queue `qid` as the URI's host, then DH-HMAC-CHAP
/// when the target asks for it; returns the controller ID.
fn connect_queue(
    qp: &mut TcpQueuePair,
    uri: &TcpUri,
    qid: u16,
    entries: u16,
    cntlid: u16,
) -> std::result::Result<u16, TcpError> {
    let hostnqn = uri.hostnqn.as_deref().unwrap_or(HOST_NQN);
    // Without SQ flow control a read ends with its data (one PDU fewer);
    // a target that refuses the attribute is asked again without it.
    qp.set_sq_flow_control(false);
    let id = match qp.fabric_connect(qid, entries, cntlid, &uri.nqn, hostnqn) {
        Err(TcpError::Command { status, .. })
            if status == zns_spec::fabrics::connect_status::INVALID_PARAMETERS =>
        {
            tracing::debug!(qid, "the target refused SQ flow control off; connecting with it on");
            qp.set_sq_flow_control(true);
            qp.fabric_connect(qid, entries, cntlid, &uri.nqn, hostnqn)?
        }
        r => r?,
    };
    if !qp.auth_required() {
        return Ok(id);
    }
    let Some(host) = uri.dhchap_secret.clone() else {
        return Err(TcpError::Authentication(
            "the target requires this host to authenticate: give dhchap_secret=DHHC-1:...".into(),
        ));
    };
    let secrets = HostAuth { host, controller: uri.dhchap_ctrl_secret.clone() };
    qp.authenticate(&secrets, hostnqn, &uri.nqn)?;
    Ok(id)
}

/// The borrowed command of [`ZoneQueue::execute`].
struct Lone<'a> {
    cid: u16,
    out: Option<&'a [u8]>,
    inp: Option<&'a mut [u8]>,
    status: std::cell::Cell<Option<u16>>,
}

impl ZoneQueue for TcpQueue {
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
        if let Some(why) = &self.broken {
            let error = DeviceError::Io {
                context: op.kind().describe(op.lba(), false),
                source: std::io::Error::other(why.clone()),
            };
            return Err(Rejected { error, buffer });
        }
        let Some(&cid) = self.free.last() else {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        };
        let info = &self.shared.info;
        let (buffer, list, len, from_device) = match (op.data_to_device(), buffer) {
            (None, Some(b)) => {
                return Err(Rejected { error: command::stray_buffer(&op), buffer: Some(b) })
            }
            (Some(_), None) => {
                return Err(Rejected { error: command::no_buffer(&op), buffer: None })
            }
            (None, None) => match command::own_data(&op) {
                Some(Ok(l)) => (None, Some(l), 0, false),
                Some(Err(error)) => return Err(Rejected { error, buffer: None }),
                None => (None, None, 0, false),
            },
            (Some(to), Some(mut buf)) => {
                if let Err(error) = command::check_metadata(info, &op, &buf) {
                    return Err(Rejected { error, buffer: Some(buf) });
                }
                if let ZoneOp::SetZoneExtension { .. } = op {
                    if let Err(error) = command::pad_extension(info, &mut buf) {
                        return Err(Rejected { error, buffer: Some(buf) });
                    }
                }
                let len = buf.len();
                (Some(buf), None, len, !to)
            }
        };
        let mut sqe = match command::entry(info, &op, len) {
            Ok(e) => e,
            Err(error) => return Err(Rejected { error, buffer }),
        };
        sqe.set_cid(cid);
        let out: Option<&[u8]> = match (&list, &buffer) {
            (Some(l), _) => Some(l),
            (None, Some(b)) if !from_device => Some(b.as_slice()),
            _ => None,
        };
        let in_len = if from_device { len } else { 0 };
        if let Err(e) = self.qp.send(sqe, out, in_len) {
            self.fail_all(&e);
            let error = DeviceError::Io {
                context: op.kind().describe(op.lba(), false),
                source: std::io::Error::other(e.to_string()),
            };
            return Err(Rejected { error, buffer });
        }
        self.free.pop();
        self.slots[cid as usize] =
            Some(Slot { tag, op: op.kind(), lba: op.lba(), buffer, list, from_device });
        Ok(())
    }

    fn ring(&mut self) {
        if let Err(e) = self.qp.flush() {
            self.fail_all(&e);
        }
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        let mut n = 0;
        loop {
            while n < max {
                let Some(c) = self.deferred.pop_front() else { break };
                f(c);
                n += 1;
            }
            if n >= max || self.broken.is_some() || self.free.len() == self.slots.len() {
                return n;
            }
            match self.qp.ready() {
                Ok(true) => {}
                Ok(false) => return n,
                Err(e) => {
                    self.fail_all(&e);
                    continue;
                }
            }
            if let Err(e) = self.pump(&mut None) {
                self.fail_all(&e);
            }
        }
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        command::check_data_metadata(&self.shared.info, op, &data)?;
        let context = || op.kind().describe(op.lba(), false);
        if let Some(why) = &self.broken {
            return Err(DeviceError::Io {
                context: context(),
                source: std::io::Error::other(why.clone()),
            });
        }
        let info = &self.shared.info;
        let (mut transfer, len) = command::transfer(info, op, data)?;
        let (out, inp): (Option<&[u8]>, Option<&mut [u8]>) = match &mut transfer {
            Transfer::None => (None, None),
            Transfer::ToDevice(d) => (Some(d), None),
            Transfer::FromDevice(b) => (None, Some(b)),
        };
        let mut sqe = command::entry(info, op, len)?;
        // A CID no slot uses: slots are numbered below MAX_DEPTH.
        let cid = 0xFFF0;
        sqe.set_cid(cid);
        let in_len = inp.as_ref().map_or(0, |b| b.len());
        let sent = self.qp.send(sqe, out, in_len).and_then(|_| self.qp.flush());
        if let Err(e) = sent {
            self.fail_all(&e);
            return Err(DeviceError::Io {
                context: context(),
                source: std::io::Error::other(e.to_string()),
            });
        }
        let mut lone = Some(Lone { cid, out, inp, status: std::cell::Cell::new(None) });
        loop {
            self.qp.wait();
            match self.pump(&mut lone) {
                Ok(Some(v)) => {
                    let l = lone.take().expect("lone");
                    return match l.status.get() {
                        Some(field) => Err(status_error(op.kind(), op.lba(), field)),
                        None if op.kind() == OpKind::Append => Ok(v),
                        None => Ok(0),
                    };
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail_all(&e);
                    return Err(DeviceError::Io {
                        context: context(),
                        source: std::io::Error::other(e.to_string()),
                    });
                }
            }
        }
    }
}
