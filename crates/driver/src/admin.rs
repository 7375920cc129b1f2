//! Admin commands: Identify, Get Log Page, Get/Set Features, and I/O queue
//! creation and deletion.
//!
//! The functions here run on an admin [`QueuePair`] and are used by
//! bring-up before a [`Controller`] exists; the `Controller` methods wrap
//! them with the admin queue's lock.

use zns_spec::command::{CreateIoCq, CreateIoSq, DeleteQueue, Features, GetLogPage, IdentifyCmd};
use zns_spec::features::{FeatureId, FeatureSelect, NumberOfQueues};
use zns_spec::identify::{
    ActiveNamespaceList, IdentifyController, IdentifyNamespace, IoCommandSetVector,
    NamespaceIdDescriptorList, ZnsController, ZnsNamespace, IDENTIFY_SIZE,
};
use zns_spec::log::{ChangedZoneList, ErrorLogEntry, LogPageId};
use zns_spec::{CommandSetId, SubmissionEntry};

use crate::controller::Controller;
use crate::dma::{DmaBuffer, DmaPool};
use crate::error::{Error, Result};
use crate::queue::{Completion, QueuePair};

/// Maps a command builder's refusal to the driver's error.
pub(crate) fn built<T>(r: std::result::Result<T, zns_spec::command::CommandError>) -> Result<T> {
    r.map_err(|e| Error::Command(e.to_string()))
}

/// Runs Identify `cmd` and returns the 4 KiB structure.
pub(crate) fn identify_raw(
    q: &mut QueuePair,
    pool: &DmaPool,
    cmd: IdentifyCmd,
) -> Result<Box<[u8; IDENTIFY_SIZE]>> {
    let mut buf = pool.alloc_zeroed(IDENTIFY_SIZE)?;
    q.execute(cmd.to_entry(), Some(&mut buf))?;
    let mut out = Box::new([0u8; IDENTIFY_SIZE]);
    out.copy_from_slice(buf.as_slice());
    Ok(out)
}

/// Identify Controller (CNS 01h).
pub(crate) fn identify_controller(q: &mut QueuePair, pool: &DmaPool) -> Result<IdentifyController> {
    Ok(IdentifyController::from_bytes(&*identify_raw(q, pool, IdentifyCmd::controller())?))
}

/// Identify Namespace (CNS 00h).
pub(crate) fn identify_namespace(
    q: &mut QueuePair,
    pool: &DmaPool,
    nsid: u32,
) -> Result<IdentifyNamespace> {
    Ok(IdentifyNamespace::from_bytes(&*identify_raw(q, pool, IdentifyCmd::namespace(nsid))?))
}

/// ZNS Identify Namespace (CNS 05h, CSI 02h).
pub(crate) fn identify_zns_namespace(
    q: &mut QueuePair,
    pool: &DmaPool,
    nsid: u32,
) -> Result<ZnsNamespace> {
    let cmd = IdentifyCmd::csi_namespace(nsid, CommandSetId::Zoned);
    Ok(ZnsNamespace::from_bytes(&*identify_raw(q, pool, cmd)?))
}

/// ZNS Identify Controller (CNS 06h, CSI 02h).
pub(crate) fn identify_zns_controller(q: &mut QueuePair, pool: &DmaPool) -> Result<ZnsController> {
    let cmd = IdentifyCmd::csi_controller(CommandSetId::Zoned);
    Ok(ZnsController::from_bytes(&*identify_raw(q, pool, cmd)?))
}

/// Namespace Identification Descriptor list (CNS 03h).
pub(crate) fn namespace_descriptors(
    q: &mut QueuePair,
    pool: &DmaPool,
    nsid: u32,
) -> Result<NamespaceIdDescriptorList> {
    let raw = identify_raw(q, pool, IdentifyCmd::ns_id_descriptors(nsid))?;
    NamespaceIdDescriptorList::from_bytes(&raw).map_err(|e| Error::Malformed(e.to_string()))
}

/// Every active NSID: of one command set (CNS 07h) or of all (CNS 02h),
/// paging through lists of 1024.
pub(crate) fn active_namespace_ids(
    q: &mut QueuePair,
    pool: &DmaPool,
    csi: Option<CommandSetId>,
) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut after = 0u32;
    loop {
        let cmd = match csi {
            Some(c) => IdentifyCmd::csi_active_namespaces(after, c),
            None => IdentifyCmd::active_namespaces(after),
        };
        let list = ActiveNamespaceList::from_bytes(&*identify_raw(q, pool, cmd)?);
        let full = list.ids.len() == ActiveNamespaceList::MAX_ENTRIES;
        let last = list.ids.last().copied();
        // A list must ascend past `after`; anything else ends the walk.
        ids.extend(list.ids.into_iter().filter(|&id| id > after));
        match last {
            Some(l) if full && l > after && l < 0xFFFF_FFFE => after = l,
            _ => return Ok(ids),
        }
    }
}

/// Get Log Page: `page.length_bytes()` bytes from `page.offset`, in pieces
/// of at most the admin queue's transfer limit (advancing the offset).
pub(crate) fn get_log_page(q: &mut QueuePair, pool: &DmaPool, page: GetLogPage) -> Result<Vec<u8>> {
    let len = page.length_bytes();
    let piece = q.max_transfer().min(len).max(4) / 4 * 4;
    let mut buf = pool.alloc(piece)?;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let n = piece.min(len - out.len());
        let part =
            GetLogPage { dwords: (n / 4) as u64, offset: page.offset + out.len() as u64, ..page };
        buf.set_len(n)?;
        buf.fill(0);
        q.execute(built(part.to_entry())?, Some(&mut buf))?;
        out.extend_from_slice(buf.as_slice());
    }
    Ok(out)
}

/// Get Features; returns completion DW0.
pub(crate) fn get_features(q: &mut QueuePair, f: Features) -> Result<u32> {
    Ok(q.execute(f.get_entry(), None)? as u32)
}

/// Set Features; returns completion DW0.
pub(crate) fn set_features(q: &mut QueuePair, f: Features) -> Result<u32> {
    Ok(q.execute(f.set_entry(), None)? as u32)
}

/// Set Features Number of Queues asking for `pairs` SQs and CQs; returns
/// the I/O queue pairs granted (capped at the request).
pub(crate) fn set_number_of_queues(q: &mut QueuePair, pairs: u16) -> Result<u16> {
    let want = NumberOfQueues { submission: pairs, completion: pairs };
    let dw0 = set_features(q, built(Features::set_number_of_queues(want))?)?;
    let got = NumberOfQueues::from_dword(dw0);
    Ok(got.submission.min(got.completion).min(pairs))
}

/// Creates I/O CQ and SQ `qid` (SQ completing to the CQ) over ring memory
/// at the given bus addresses; deletes the CQ again if the SQ fails.
pub(crate) fn create_io_queue_pair(
    q: &mut QueuePair,
    qid: u16,
    depth: u16,
    cq_base: u64,
    sq_base: u64,
) -> Result<()> {
    let cq = built(CreateIoCq::new(qid, depth as u32, cq_base).to_entry())?;
    q.execute_preset(cq)?;
    let sq = built(CreateIoSq::new(qid, depth as u32, sq_base, qid).to_entry())?;
    if let Err(e) = q.execute_preset(sq) {
        if let Err(e2) = q.execute(DeleteQueue { qid }.cq_entry(), None) {
            tracing::warn!(qid, error = %e2, "deleting the CQ after a failed SQ creation failed");
        }
        return Err(e);
    }
    Ok(())
}

/// Deletes I/O SQ `qid`, then CQ `qid`.
pub(crate) fn delete_io_queue_pair(q: &mut QueuePair, qid: u16) -> Result<()> {
    q.execute(DeleteQueue { qid }.sq_entry(), None)?;
    q.execute(DeleteQueue { qid }.cq_entry(), None)?;
    Ok(())
}

/// Admin commands. Each takes the admin queue's lock for its duration.
impl Controller {
    /// Runs any admin command, transferring `data` (its current length) in
    /// whichever direction the opcode implies; returns the completion
    /// whatever its status.
    pub fn admin_command(
        &self,
        cmd: SubmissionEntry,
        data: Option<&mut DmaBuffer>,
    ) -> Result<Completion> {
        self.with_admin(|q, _| q.execute_raw(cmd, data))
    }

    /// Identify: the 4 KiB structure `cmd` selects.
    pub fn identify(&self, cmd: IdentifyCmd) -> Result<Box<[u8; IDENTIFY_SIZE]>> {
        self.with_admin(|q, pool| identify_raw(q, pool, cmd))
    }

    /// Identify Controller (CNS 01h), read now.
    pub fn identify_controller(&self) -> Result<IdentifyController> {
        self.with_admin(identify_controller)
    }

    /// Identify Namespace (CNS 00h).
    pub fn identify_namespace(&self, nsid: u32) -> Result<IdentifyNamespace> {
        self.with_admin(|q, pool| identify_namespace(q, pool, nsid))
    }

    /// ZNS Identify Namespace (CNS 05h, CSI 02h).
    pub fn identify_zns_namespace(&self, nsid: u32) -> Result<ZnsNamespace> {
        self.with_admin(|q, pool| identify_zns_namespace(q, pool, nsid))
    }

    /// ZNS Identify Controller (CNS 06h, CSI 02h).
    pub fn identify_zns_controller(&self) -> Result<ZnsController> {
        self.with_admin(identify_zns_controller)
    }

    /// Namespace Identification Descriptors (CNS 03h).
    pub fn namespace_descriptors(&self, nsid: u32) -> Result<NamespaceIdDescriptorList> {
        self.with_admin(|q, pool| namespace_descriptors(q, pool, nsid))
    }

    /// Identify I/O Command Set data structure (CNS 1Ch).
    pub fn io_command_set_vector(&self) -> Result<IoCommandSetVector> {
        let cntid = self.info().identify.cntlid;
        let raw = match self.identify(IdentifyCmd::io_command_sets(cntid)) {
            // Some controllers only accept CNTID 0 here.
            Err(Error::Nvme(_)) if cntid != 0 => self.identify(IdentifyCmd::io_command_sets(0))?,
            r => r?,
        };
        Ok(IoCommandSetVector::from_bytes(&raw))
    }

    /// Active NSIDs of one command set (CNS 07h) or of all (CNS 02h).
    pub fn active_namespace_ids(&self, csi: Option<CommandSetId>) -> Result<Vec<u32>> {
        self.with_admin(|q, pool| active_namespace_ids(q, pool, csi))
    }

    /// Get Log Page; returns the page's bytes.
    pub fn get_log_page(&self, page: GetLogPage) -> Result<Vec<u8>> {
        self.with_admin(|q, pool| get_log_page(q, pool, page))
    }

    /// The newest `entries` Error Information log entries (LID 01h).
    pub fn error_log(&self, entries: usize) -> Result<Vec<ErrorLogEntry>> {
        let entries = entries.clamp(1, 256);
        let dwords = (entries * ErrorLogEntry::SIZE / 4) as u64;
        let bytes = self.get_log_page(GetLogPage::new(LogPageId::ErrorInformation, 0, dwords))?;
        Ok(bytes
            .chunks_exact(ErrorLogEntry::SIZE)
            .map(|c| ErrorLogEntry::from_bytes(c.try_into().expect("64-byte chunk")))
            .collect())
    }

    /// The Changed Zone List log page (LID BFh, CSI 02h) of namespace `nsid`.
    pub fn changed_zone_list(&self, nsid: u32) -> Result<ChangedZoneList> {
        let dwords = (ChangedZoneList::SIZE / 4) as u64;
        let bytes = self.get_log_page(GetLogPage::new(LogPageId::ChangedZoneList, nsid, dwords))?;
        let page: &[u8; ChangedZoneList::SIZE] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| Error::Malformed("changed zone list length".into()))?;
        Ok(ChangedZoneList::from_bytes(page))
    }

    /// Get Features; returns completion DW0.
    pub fn get_features(&self, f: Features) -> Result<u32> {
        self.with_admin(|q, _| get_features(q, f))
    }

    /// Set Features; returns completion DW0.
    pub fn set_features(&self, f: Features) -> Result<u32> {
        self.with_admin(|q, _| set_features(q, f))
    }

    /// Get Features `fid` (current value); returns completion DW0.
    pub fn get_feature(&self, fid: FeatureId) -> Result<u32> {
        self.get_features(Features::get(fid, FeatureSelect::Current))
    }

    /// Set Features `fid` to `value` (not saved); returns completion DW0.
    pub fn set_feature(&self, fid: FeatureId, value: u32) -> Result<u32> {
        self.set_features(Features::set(fid, value, false))
    }
}
