//! Differences between an FDP peer and the reference that are understood:
//! each matches exactly the commands and outcomes it explains, and every
//! aspect that differs must be one it explains; docs/differential.md
//! ("FDP divergences") gives the reasoning.

use zns_spec::fdp::FdpStatsLog;
use zns_spec::StatusCode;

use super::command::{FdpCmd, FdpOp, NsidChoice};
use super::compare::{differing_bytes, page_size, window_range, Aspect, Seen};
use super::reference::FdpGeometry;
use crate::compare::Outcome;

/// A known, documented difference.
pub use crate::divergence::Divergence;

/// Everything a matcher may look at.
#[derive(Debug)]
pub struct Case<'a> {
    /// The pair's geometry.
    pub g: &'a FdpGeometry,
    /// The command.
    pub cmd: &'a FdpCmd,
    /// What the peer did.
    pub peer: &'a Seen,
    /// What the reference did.
    pub ours: &'a Seen,
    /// The aspects that differ.
    pub differ: &'a [Aspect],
}

impl Case<'_> {
    fn only(&self, allowed: &[Aspect]) -> bool {
        self.differ.iter().all(|a| allowed.contains(a))
    }

    fn peer_is(&self, code: StatusCode) -> bool {
        status_is(&self.peer.reply.outcome, code)
    }

    fn ours_is(&self, code: StatusCode) -> bool {
        status_is(&self.ours.reply.outcome, code)
    }

    /// Bytes of one block with its metadata, as the statistics count.
    fn unit(&self) -> i128 {
        (self.g.block_size + self.g.metadata_size as usize) as i128
    }

    /// MBMW grew by HBMW's growth on the reference (no garbage collection)
    /// and by that plus `extra_blocks` on the peer.
    fn media_grew_by(&self, extra_blocks: u64) -> bool {
        let host = |s: &Seen| s.grew(|x| x.host_bytes_written);
        let media = |s: &Seen| s.grew(|x| x.media_bytes_written);
        media(self.ours) == host(self.ours)
            && media(self.peer) == host(self.peer) + extra_blocks as i128 * self.unit()
    }
}

fn status_is(o: &Outcome, code: StatusCode) -> bool {
    o.status().is_some_and(|s| s.is(code))
}

fn done(o: &Outcome) -> bool {
    matches!(o, Outcome::Done(_))
}

/// The catalogue, in the order of docs/differential.md.
pub const DIVERGENCES: &[Divergence] = &[
    Divergence {
        id: "qemu-mbmw-counts-units-left",
        title: "the peer counts the rest of every reclaim unit a handle leaves (Reclaim Unit \
                Handle Update, and each unit a write fills) as media bytes written",
    },
    Divergence {
        id: "qemu-invalid-pid-keeps-unit",
        title: "a write with a placement identifier the namespace lacks that fills handle 0's \
                reclaim unit: the peer does not move handle 0 to a new unit",
    },
    Divergence {
        id: "qemu-ruh-update-stops-at-invalid",
        title: "a Reclaim Unit Handle Update naming an invalid identifier after valid ones: the \
                peer has updated the handles before it when it fails",
    },
    Divergence {
        id: "qemu-ruh-update-of-every-handle",
        title: "a Reclaim Unit Handle Update naming as many identifiers as the namespace has \
                handles: the peer refuses it with Invalid Field in Command",
    },
    Divergence {
        id: "io-management-operation-0",
        title: "I/O Management Receive or Send with management operation 00h: the peer \
                completes it doing nothing, the reference answers Invalid Field in Command",
    },
    Divergence {
        id: "log-offset-at-end",
        title: "an FDP log page read from an offset equal to the page's size: the peer answers \
                Invalid Field in Command, the reference returns zeros",
    },
    Divergence {
        id: "qemu-fdp-configuration-fields",
        title: "the FDP Configurations page: the peer states MAXPIDS and NNSS of its \
                controller's limits and leaves FDPVWC clear",
    },
    Divergence {
        id: "qemu-lists-every-event-type",
        title: "Get Features 1Eh: the peer lists every FDP event type, the reference the ones \
                it reports",
    },
    Divergence {
        id: "qemu-endgid-low-byte",
        title: "Get Features 1Dh: the peer reads the endurance group from CDW11 bits 7:0 only",
    },
    Divergence {
        id: "features-1eh-inactive-nsid",
        title: "Get Features 1Eh naming no namespace: the peer answers Invalid Field in \
                Command, the reference Invalid Namespace or Format",
    },
];

fn find(id: &str) -> &'static Divergence {
    DIVERGENCES.iter().find(|d| d.id == id).expect("a catalogued divergence")
}

/// A test of whether a case shows one divergence.
type Matcher = fn(&Case<'_>) -> bool;

/// The known divergence `c` shows, if any.
pub fn explain(c: &Case<'_>) -> Option<&'static Divergence> {
    let matchers: [(&str, Matcher); 10] = [
        ("qemu-mbmw-counts-units-left", units_left),
        ("qemu-invalid-pid-keeps-unit", invalid_pid_keeps_unit),
        ("qemu-ruh-update-stops-at-invalid", update_stops_at_invalid),
        ("qemu-ruh-update-of-every-handle", update_of_every_handle),
        ("io-management-operation-0", io_management_operation_0),
        ("log-offset-at-end", log_offset_at_end),
        ("qemu-fdp-configuration-fields", configuration_fields),
        ("qemu-lists-every-event-type", every_event_type),
        ("qemu-endgid-low-byte", endgid_low_byte),
        ("features-1eh-inactive-nsid", inactive_nsid),
    ];
    matchers.iter().find(|(_, m)| m(c)).map(|(id, _)| find(id))
}

/// Where a command goes after a divergence that left the two sides'
/// handles apart: `true` for the peer.
pub type Repair = Vec<(bool, FdpCmd)>;

fn update(pids: Vec<u16>) -> FdpCmd {
    FdpCmd { op: FdpOp::IoMgmtSend { mo: 1, pids }, fill: 0 }
}

/// Commands that bring the two sides' handles together again after
/// divergence `id`, where it left them apart: a Reclaim Unit Handle
/// Update on the side that kept a unit the other left.
pub fn repair(id: &str, c: &Case<'_>) -> Option<Repair> {
    match (id, &c.cmd.op) {
        ("qemu-invalid-pid-keeps-unit", _) => {
            Some(vec![(true, update(vec![0])), (false, update(vec![0]))])
        }
        ("qemu-ruh-update-stops-at-invalid", FdpOp::IoMgmtSend { pids, .. }) => {
            let valid: Vec<u16> = pids.iter().copied().take_while(|&p| p < c.g.handles).collect();
            Some(vec![(false, update(valid))])
        }
        ("qemu-ruh-update-of-every-handle", FdpOp::IoMgmtSend { pids, .. }) => {
            let (a, b) = pids.split_at(pids.len() / 2);
            Some(vec![(true, update(a.to_vec())), (true, update(b.to_vec()))])
        }
        _ => None,
    }
}

/// QEMU's reclaim unit accounting of a write of `n` blocks to a handle
/// whose unit has `r` blocks left (units of `s` blocks): the blocks left
/// afterwards, and the blocks it counts as media written beyond the
/// host's (the rest of each unit the write fills, counted again when the
/// handle moves on). A placement identifier the namespace lacks moves the
/// handle nowhere (`valid` false): its count stays as it was at each unit
/// end.
pub fn qemu_write(r: u64, n: u64, s: u64, valid: bool) -> (u64, u64) {
    let (mut r, mut n, mut extra) = (r, n, 0);
    while n > 0 {
        if n < r {
            r -= n;
            break;
        }
        n -= r;
        if valid {
            extra += r;
            r = s;
        }
    }
    (r, extra)
}

/// QEMU's accounting of a Reclaim Unit Handle Update of `pids` (in order,
/// stopping at the first the namespace lacks): the blocks it counts as
/// media written (each handle's unit's rest, a fresh unit's included).
fn qemu_update_extra(c: &Case<'_>, pids: &[u16]) -> u64 {
    let mut left: Vec<(u16, u64)> = c.peer.before.ruamw.iter().map(|d| (d.0, d.2)).collect();
    let mut extra = 0;
    for p in pids {
        let Some(e) = left.iter_mut().find(|e| e.0 == *p) else { break };
        extra += e.1;
        e.1 = c.g.ru_blocks;
    }
    extra
}

/// The peer counts the rest of a reclaim unit a handle leaves as media
/// bytes written (QEMU adds it to MBMW in `nvme_update_ruh`, which a
/// Reclaim Unit Handle Update calls, and which a write calls at each unit
/// end with the count not yet cleared); the reference counts media writes
/// only. Matched: MBMW alone differs, by exactly QEMU's rule; or a read of
/// the FDP Statistics page whose MBMW bytes alone differ, after such
/// commands.
fn units_left(c: &Case<'_>) -> bool {
    if !c.only(&[Aspect::MediaBytes, Aspect::Data]) {
        return false;
    }
    match &c.cmd.op {
        FdpOp::GetLog { lid: 0x22, offset, .. } => stats_read_differs_in_mbmw(c, *offset),
        _ if c.differ.contains(&Aspect::Data) => false,
        FdpOp::IoMgmtSend { mo: 1, pids } if done(&c.peer.reply.outcome) => {
            c.media_grew_by(qemu_update_extra(c, pids))
        }
        FdpOp::Write { blocks, placement, .. } if done(&c.peer.reply.outcome) => {
            let h = placement.filter(|p| *p < c.g.handles).unwrap_or(0);
            let valid = placement.is_none_or(|p| p < c.g.handles);
            let Some(r) = c.peer.before.available(h) else { return false };
            let (_, extra) = qemu_write(r, *blocks as u64, c.g.ru_blocks, valid);
            extra > 0 && c.media_grew_by(extra)
        }
        _ => false,
    }
}

/// A read of the FDP Statistics page from `offset`: only MBMW's bytes
/// differ, and the two sides' MBMW did differ before the command.
fn stats_read_differs_in_mbmw(c: &Case<'_>, offset: u64) -> bool {
    let (Some(a), Some(b)) = (&c.peer.reply.data, &c.ours.reply.data) else { return false };
    let mbmw = window_range(offset, a.len(), 16..32);
    let mbmw_of = |s: &FdpStatsLog| s.media_bytes_written;
    a.len() == b.len()
        && differing_bytes(a, b).iter().all(|i| mbmw.contains(i))
        && mbmw_of(&c.peer.before.stats) != mbmw_of(&c.ours.before.stats)
        && !c.differ.contains(&Aspect::MediaBytes)
}

/// A placed write naming an identifier the namespace lacks, long enough
/// to fill handle 0's unit: QEMU writes through handle 0 but asks
/// `nvme_update_ruh` to move the invalid identifier's handle, which it
/// refuses, so handle 0 keeps its unit and its count goes on from where it
/// was; the reference moves handle 0 to a new unit (docs/fdp.md: an
/// invalid identifier writes as handle 0). Matched: that write, both
/// succeed, only handle 0's RUAMW differs and the peer's is QEMU's.
fn invalid_pid_keeps_unit(c: &Case<'_>) -> bool {
    let FdpOp::Write { blocks, placement: Some(p), .. } = c.cmd.op else { return false };
    if p < c.g.handles || !c.only(&[Aspect::Ruamw]) || !done(&c.peer.reply.outcome) {
        return false;
    }
    let Some(r) = c.peer.before.available(0) else { return false };
    let (left, _) = qemu_write(r, blocks as u64, c.g.ru_blocks, false);
    let others_same =
        c.peer.after.ruamw.iter().zip(&c.ours.after.ruamw).all(|(a, b)| a.0 == 0 || a == b);
    blocks as u64 >= r && c.peer.after.available(0) == Some(left) && others_same
}

/// A Reclaim Unit Handle Update whose list has an identifier the
/// namespace lacks after valid ones: QEMU updates the handles in order
/// and stops at the invalid one with Invalid Field in Command; the
/// reference checks the whole list first and changes nothing. Matched:
/// both fail so, the reference changed nothing, the peer's handles before
/// the invalid identifier have whole units and MBMW grew by QEMU's rule.
fn update_stops_at_invalid(c: &Case<'_>) -> bool {
    let FdpOp::IoMgmtSend { mo: 1, pids } = &c.cmd.op else { return false };
    let valid: Vec<u16> = pids.iter().copied().take_while(|&p| p < c.g.handles).collect();
    if valid.is_empty()
        || valid.len() == pids.len()
        || !c.only(&[Aspect::Ruamw, Aspect::MediaBytes])
        || !c.peer_is(StatusCode::InvalidField)
        || !c.ours_is(StatusCode::InvalidField)
        || c.ours.after.ruamw != c.ours.before.ruamw
    {
        return false;
    }
    let reset = c.peer.after.ruamw.iter().zip(&c.peer.before.ruamw).all(|(a, b)| {
        if valid.contains(&a.0) {
            a.2 == c.g.ru_blocks
        } else {
            a == b
        }
    });
    reset && c.media_grew_by(qemu_update_extra(c, &valid))
}

/// A Reclaim Unit Handle Update of as many identifiers as the namespace
/// has handles: QEMU refuses a count at or above its limit (`npid >=
/// MIN(128, nrg * nruh)`, one too strict); the reference takes up to the
/// number of handles. Matched: that count, all valid, the peer failed
/// with Invalid Field in Command and changed nothing, the reference
/// succeeded.
fn update_of_every_handle(c: &Case<'_>) -> bool {
    let FdpOp::IoMgmtSend { mo: 1, pids } = &c.cmd.op else { return false };
    pids.len() == c.g.handles as usize
        && pids.iter().all(|&p| p < c.g.handles)
        && c.only(&[Aspect::Completion, Aspect::Ruamw])
        && c.peer_is(StatusCode::InvalidField)
        && done(&c.ours.reply.outcome)
        && c.peer.after.ruamw == c.peer.before.ruamw
}

/// I/O Management Receive or Send with management operation 00h: QEMU
/// takes it as "no operation" and succeeds without moving data; the
/// reference answers Invalid Field in Command. Matched: MO 00h, those
/// outcomes, nothing else changed.
fn io_management_operation_0(c: &Case<'_>) -> bool {
    let mo0 =
        matches!(c.cmd.op, FdpOp::IoMgmtReceive { mo: 0, .. } | FdpOp::IoMgmtSend { mo: 0, .. });
    mo0 && c.only(&[Aspect::Completion, Aspect::Data])
        && done(&c.peer.reply.outcome)
        && c.ours_is(StatusCode::InvalidField)
        && c.peer.reply.data.as_ref().is_none_or(|d| d.iter().all(|&b| b == 0))
}

/// A log page read from an offset equal to the page's size: QEMU refuses
/// offsets at or past the end; the reference refuses those past it and
/// returns zeros from the end itself. Matched: an FDP page, that offset,
/// those outcomes, zeros.
fn log_offset_at_end(c: &Case<'_>) -> bool {
    let FdpOp::GetLog { lid, lsi, offset, .. } = c.cmd.op else { return false };
    lsi == c.g.endgid
        && offset == page_size(lid, c.g)
        && c.only(&[Aspect::Completion, Aspect::Data])
        && c.peer_is(StatusCode::InvalidField)
        && c.ours.reply.data.as_ref().is_some_and(|d| d.iter().all(|&b| b == 0))
}

/// The FDP Configurations page: QEMU states MAXPIDS 127 (its controller's
/// limit of placement identifiers) and NNSS 256 (its namespace limit) and
/// never sets FDPVWC; the reference states what its one namespace has
/// (MAXPIDS the handles less one, NNSS 1) and FDPVWC as its cache. Matched:
/// both read the page, and the bytes that differ are those fields' only,
/// with the peer's MAXPIDS and NNSS not below the reference's.
fn configuration_fields(c: &Case<'_>) -> bool {
    let FdpOp::GetLog { lid: 0x20, offset, .. } = c.cmd.op else { return false };
    let (Some(a), Some(b)) = (&c.peer.reply.data, &c.ours.reply.data) else { return false };
    if !c.only(&[Aspect::Data]) || a.len() != b.len() {
        return false;
    }
    // The first descriptor starts at byte 16 of the page.
    let (fdpa, maxpids, nnss) = (18..19, 26..28, 28..32);
    let ok = differing_bytes(a, b).into_iter().all(|i| {
        let at = offset + i as u64;
        (fdpa.contains(&at) && (a[i] ^ b[i]) == 1 << 4)
            || maxpids.contains(&at)
            || nnss.contains(&at)
    });
    let field = |d: &[u8], r: std::ops::Range<u64>| -> Option<u64> {
        let w = window_range(offset, d.len(), r.clone());
        (w.len() == (r.end - r.start) as usize)
            .then(|| d[w].iter().rev().fold(0u64, |v, &x| v << 8 | x as u64))
    };
    let not_below = |r: std::ops::Range<u64>| match (field(a, r.clone()), field(b, r)) {
        (Some(p), Some(o)) => p >= o,
        _ => true,
    };
    ok && not_below(maxpids) && not_below(nnss)
}

/// Get Features 1Eh: QEMU lists every FDP event type the specification
/// defines (up to NOET), the reference the types it reports; both give
/// each type's enabled bit. Matched: both succeed, each side's list holds
/// distinct event types, as many as its DW0 says, zeros after them, the
/// types both list have the same enabled bit, and the peer lists at least
/// as many.
fn every_event_type(c: &Case<'_>) -> bool {
    if !matches!(c.cmd.op, FdpOp::GetEventsFeature { .. })
        || !c.only(&[Aspect::Completion, Aspect::Data])
    {
        return false;
    }
    let (Some(a), Some(b)) = (&c.peer.reply.data, &c.ours.reply.data) else { return false };
    let (Some(na), Some(nb)) = (c.peer.reply.dw0(), c.ours.reply.dw0()) else { return false };
    let list = |d: &[u8], n: u32| -> Option<Vec<(u8, u8)>> {
        let n = n as usize;
        if d.len() < 2 * n || d[2 * n..].iter().any(|&x| x != 0) {
            return None;
        }
        let l: Vec<(u8, u8)> = d[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
        let mut types: Vec<u8> = l.iter().map(|e| e.0).collect();
        types.sort_unstable();
        types.dedup();
        (types.len() == l.len()).then_some(l)
    };
    let (Some(la), Some(lb)) = (list(a, na), list(b, nb)) else { return false };
    na >= nb && lb.iter().all(|e| la.iter().all(|f| f.0 != e.0 || f.1 == e.1))
}

/// Get Features 1Dh with an endurance group whose low byte is 1 and high
/// byte is not 0: QEMU takes CDW11 bits 7:0 as the group (the field is
/// bits 15:0) and answers for group 1; the reference refuses the group
/// with Invalid Field in Command.
fn endgid_low_byte(c: &Case<'_>) -> bool {
    let FdpOp::GetFdpFeature { endgid } = c.cmd.op else { return false };
    endgid & 0xFF == c.g.endgid
        && endgid != c.g.endgid
        && c.only(&[Aspect::Completion])
        && done(&c.peer.reply.outcome)
        && c.ours_is(StatusCode::InvalidField)
}

/// Get Features 1Eh with an NSID that names no namespace (FFFFFFFFh, or
/// one not attached): QEMU answers Invalid Field in Command, the
/// reference Invalid Namespace or Format.
fn inactive_nsid(c: &Case<'_>) -> bool {
    let FdpOp::GetEventsFeature { nsid: NsidChoice::Other(n), .. } = c.cmd.op else { return false };
    n != 0
        && c.only(&[Aspect::Completion])
        && c.peer_is(StatusCode::InvalidField)
        && c.ours_is(StatusCode::InvalidNamespaceOrFormat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_moves_handles_at_unit_ends_only_for_valid_identifiers() {
        // 10 blocks left of 16: a write of 4 leaves 6, nothing extra.
        assert_eq!(qemu_write(10, 4, 16, true), (6, 0));
        // A write of exactly 10 fills the unit: a whole new one, the 10
        // counted again.
        assert_eq!(qemu_write(10, 10, 16, true), (16, 10));
        // 10 + 16 + 3: two unit ends, 13 left.
        assert_eq!(qemu_write(10, 29, 16, true), (13, 26));
        // Invalid identifiers: the count restarts from 10 at each end.
        assert_eq!(qemu_write(10, 13, 16, false), (7, 0));
        assert_eq!(qemu_write(10, 20, 16, false), (10, 0));
    }
}
