//! The commands of the FDP mode and their submission entries: placed
//! writes and reads, Flush, I/O Management Receive (Reclaim Unit Handle
//! Status) and Send (Reclaim Unit Handle Update), Get Log Page 20h-23h and
//! Get Features 1Dh and 1Eh.

use zns_spec::command::{Flush, ReadWrite};
use zns_spec::fdp::{placement_id_list, FdpEventsFeature, FdpFeature, IoManagementSend};
use zns_spec::log::GetLogPage;
use zns_spec::opcode::IoOpcode;
use zns_spec::SubmissionEntry;

use super::target::{Queue, Transfer};
use crate::compare::fill;

/// Which namespace a Get Features 1Eh names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsidChoice {
    /// The FDP namespace.
    Own,
    /// This NSID (0, FFFFFFFFh, one no namespace has).
    Other(u32),
}

/// One command of the FDP mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FdpOp {
    /// Write `blocks` blocks at `lba`; `placement`: DTYPE 2h with this
    /// DSPEC, `None`: no directive.
    Write {
        /// First LBA.
        lba: u64,
        /// Blocks (1..=65536).
        blocks: u32,
        /// Force Unit Access.
        fua: bool,
        /// The placement identifier, if the write is placed.
        placement: Option<u16>,
    },
    /// Read `blocks` blocks at `lba`.
    Read {
        /// First LBA.
        lba: u64,
        /// Blocks (1..=65536).
        blocks: u32,
    },
    /// Flush.
    Flush,
    /// I/O Management Receive with management operation `mo` (01h: Reclaim
    /// Unit Handle Status), `dwords` dwords.
    IoMgmtReceive {
        /// MO.
        mo: u8,
        /// NUMD + 1.
        dwords: u32,
    },
    /// I/O Management Send with management operation `mo` (01h: Reclaim
    /// Unit Handle Update) of the placement identifiers `pids`.
    IoMgmtSend {
        /// MO.
        mo: u8,
        /// The placement identifiers (1..=65536 of them).
        pids: Vec<u16>,
    },
    /// Get Log Page `lid` of endurance group `lsi`.
    GetLog {
        /// LID (20h-23h).
        lid: u8,
        /// LSI: the endurance group.
        lsi: u16,
        /// LSP (23h: bit 0 asks for host events).
        lsp: u8,
        /// LPO in bytes.
        offset: u64,
        /// NUMD + 1.
        dwords: u32,
    },
    /// Get Features 1Dh of endurance group `endgid`.
    GetFdpFeature {
        /// CDW11 15:0.
        endgid: u16,
    },
    /// Get Features 1Eh of a placement handle.
    GetEventsFeature {
        /// The namespace named.
        nsid: NsidChoice,
        /// PHNDL.
        handle: u16,
        /// NOET.
        event_types: u8,
    },
}

/// A command and the seed of the data it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdpCmd {
    /// The command.
    pub op: FdpOp,
    /// Seed of the data a write carries.
    pub fill: u64,
}

impl FdpCmd {
    /// The kind, for the tally.
    pub fn kind(&self) -> &'static str {
        match &self.op {
            FdpOp::Write { placement: Some(_), .. } => "placed write",
            FdpOp::Write { placement: None, .. } => "write",
            FdpOp::Read { .. } => "read",
            FdpOp::Flush => "flush",
            FdpOp::IoMgmtReceive { .. } => "I/O management receive",
            FdpOp::IoMgmtSend { .. } => "I/O management send",
            FdpOp::GetLog { .. } => "get log page",
            FdpOp::GetFdpFeature { .. } => "get features 1Dh",
            FdpOp::GetEventsFeature { .. } => "get features 1Eh",
        }
    }

    /// A one-line description.
    pub fn describe(&self) -> String {
        match &self.op {
            FdpOp::Write { lba, blocks, fua, placement } => format!(
                "write {blocks} blocks at LBA {lba}{}{}",
                placement.map_or(String::new(), |p| format!(", placement identifier {p}")),
                if *fua { " (FUA)" } else { "" }
            ),
            FdpOp::Read { lba, blocks } => format!("read {blocks} blocks at LBA {lba}"),
            FdpOp::Flush => "flush".into(),
            FdpOp::IoMgmtReceive { mo, dwords } => {
                format!("I/O management receive MO {mo:#04x}, {dwords} dwords")
            }
            FdpOp::IoMgmtSend { mo, pids } => {
                format!("I/O management send MO {mo:#04x}, placement identifiers {pids:?}")
            }
            FdpOp::GetLog { lid, lsi, lsp, offset, dwords } => format!(
                "get log page {lid:#04x}, endurance group {lsi}, LSP {lsp}, offset {offset}, \
                 {dwords} dwords"
            ),
            FdpOp::GetFdpFeature { endgid } => {
                format!("get features 1Dh, endurance group {endgid:#x}")
            }
            FdpOp::GetEventsFeature { nsid, handle, event_types } => format!(
                "get features 1Eh, {}, placement handle {handle}, {event_types} event types",
                match nsid {
                    NsidChoice::Own => "the FDP namespace".to_string(),
                    NsidChoice::Other(n) => format!("NSID {n:#x}"),
                }
            ),
        }
    }

    /// The queue, submission entry and data of the command on namespace
    /// `nsid` with `block_size`-byte blocks. The entries are built field by
    /// field so that values a builder would refuse (a placement identifier
    /// the namespace lacks, an unaligned offset) reach the device.
    pub fn entry(&self, nsid: u32, block_size: usize) -> (Queue, SubmissionEntry, Transfer) {
        match &self.op {
            FdpOp::Write { lba, blocks, fua, placement } => {
                let mut rw = ReadWrite::new(nsid, *lba, *blocks).with_fua(*fua);
                if let Some(p) = placement {
                    rw = rw.with_placement(*p);
                }
                let sqe = rw.write().unwrap_or_else(|_| raw_rw(IoOpcode::Write, nsid, *lba));
                let mut data = vec![0u8; *blocks as usize * block_size];
                fill(&mut data, self.fill);
                (Queue::Io, sqe, Transfer::ToDevice(data))
            }
            FdpOp::Read { lba, blocks } => {
                let rw = ReadWrite::new(nsid, *lba, *blocks);
                let sqe = rw.read().unwrap_or_else(|_| raw_rw(IoOpcode::Read, nsid, *lba));
                (Queue::Io, sqe, Transfer::FromDevice(*blocks as usize * block_size))
            }
            FdpOp::Flush => (Queue::Io, Flush { nsid }.to_entry(), Transfer::None),
            FdpOp::IoMgmtReceive { mo, dwords } => {
                let mut e = SubmissionEntry::new(IoOpcode::IoManagementReceive as u8, nsid);
                e.cdw10 = *mo as u32;
                e.cdw11 = dwords.saturating_sub(1);
                (Queue::Io, e, Transfer::FromDevice(*dwords as usize * 4))
            }
            FdpOp::IoMgmtSend { mo, pids } => {
                let n = pids.len().clamp(1, 65536) as u32;
                let mut e = match IoManagementSend::ruh_update(nsid, n) {
                    Ok(s) => s.to_entry(),
                    Err(_) => SubmissionEntry::new(IoOpcode::IoManagementSend as u8, nsid),
                };
                e.cdw10 = (e.cdw10 & !0xFF) | *mo as u32;
                (Queue::Io, e, Transfer::ToDevice(placement_id_list(pids)))
            }
            FdpOp::GetLog { lid, lsi, lsp, offset, dwords } => {
                let g = GetLogPage {
                    lid: *lid,
                    lsi: *lsi,
                    lsp: *lsp,
                    offset: *offset,
                    dwords: (*dwords).max(1) as u64,
                    ..zns_spec::fdp::get_log_page(
                        zns_spec::log::LogPageId::FdpConfigurations,
                        *lsi,
                        1,
                    )
                };
                let e = g.to_entry().expect("1..=2^32 dwords");
                (Queue::Admin, e, Transfer::FromDevice(*dwords as usize * 4))
            }
            FdpOp::GetFdpFeature { endgid } => {
                let e = FdpFeature { endgid: *endgid, enabled: false, config_index: 0 }.get_entry();
                (Queue::Admin, e, Transfer::None)
            }
            FdpOp::GetEventsFeature { nsid: which, handle, event_types } => {
                let n = match which {
                    NsidChoice::Own => nsid,
                    NsidChoice::Other(n) => *n,
                };
                let f = FdpEventsFeature {
                    nsid: n,
                    placement_handle: *handle,
                    event_types: *event_types,
                    enable: false,
                };
                let len = (*event_types as usize * 2).max(4);
                (Queue::Admin, f.get_entry(), Transfer::FromDevice(len))
            }
        }
    }
}

/// A read or write entry for a block count no builder takes (only ever
/// generated in range, so this is the LBA alone with one block).
fn raw_rw(op: IoOpcode, nsid: u32, lba: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op as u8, nsid);
    e.cdw10 = lba as u32;
    e.cdw11 = (lba >> 32) as u32;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_the_fields_that_are_compared() {
        let w = FdpCmd {
            op: FdpOp::Write { lba: 0x1_0000_0002, blocks: 3, fua: true, placement: Some(9) },
            fill: 1,
        };
        let (q, e, t) = w.entry(7, 4096);
        assert_eq!((q, e.opcode(), e.nsid), (Queue::Io, 0x01, 7));
        assert_eq!((e.cdw10, e.cdw11), (2, 1));
        assert_eq!(e.cdw12 & 0xFFFF, 2, "NLB is 0's based");
        assert_eq!((e.cdw12 >> 20) & 0xF, 2, "DTYPE 2h");
        assert_ne!(e.cdw12 & (1 << 30), 0, "FUA");
        assert_eq!(e.cdw13 >> 16, 9, "DSPEC");
        assert_eq!(t.len(), 3 * 4096);
        let plain =
            FdpCmd { op: FdpOp::Write { lba: 0, blocks: 1, fua: false, placement: None }, fill: 1 };
        let (_, e, _) = plain.entry(7, 4096);
        assert_eq!((e.cdw12 >> 20) & 0xF, 0);
        assert_eq!(e.cdw13, 0);

        let r = FdpCmd { op: FdpOp::IoMgmtReceive { mo: 1, dwords: 12 }, fill: 0 };
        let (q, e, t) = r.entry(7, 4096);
        assert_eq!((q, e.opcode(), e.cdw10, e.cdw11, t.len()), (Queue::Io, 0x12, 1, 11, 48));
        let s = FdpCmd { op: FdpOp::IoMgmtSend { mo: 1, pids: vec![3, 0x100] }, fill: 0 };
        let (_, e, t) = s.entry(7, 4096);
        assert_eq!((e.opcode(), e.cdw10), (0x1D, 1 | 1 << 16), "MOS: 0's based count");
        assert_eq!(t, Transfer::ToDevice(vec![3, 0, 0, 1]));

        let g = FdpCmd {
            op: FdpOp::GetLog { lid: 0x23, lsi: 1, lsp: 1, offset: 64, dwords: 16 },
            fill: 0,
        };
        let (q, e, t) = g.entry(7, 4096);
        assert_eq!(
            (q, e.opcode(), e.cdw10 & 0xFF, (e.cdw10 >> 8) & 0x7F),
            (Queue::Admin, 0x02, 0x23, 1)
        );
        assert_eq!((e.cdw10 >> 16, e.cdw11 >> 16, e.cdw12), (15, 1, 64));
        assert_eq!(t.len(), 64);

        let f = FdpCmd {
            op: FdpOp::GetEventsFeature {
                nsid: NsidChoice::Other(0xFFFF_FFFF),
                handle: 2,
                event_types: 6,
            },
            fill: 0,
        };
        let (_, e, t) = f.entry(7, 4096);
        assert_eq!(
            (e.opcode(), e.nsid, e.cdw10 & 0xFF, e.cdw11),
            (0x0A, 0xFFFF_FFFF, 0x1E, 2 | 6 << 16)
        );
        assert_eq!(t.len(), 12);
    }
}
