//! What the FDP mode compares after every command: the completion (status
//! and DW0), the data returned (reads, Reclaim Unit Handle Status, log
//! pages, feature data), and each side's FDP state read back afterwards:
//! every placement handle's reclaim unit available media writes (RUAMW)
//! and the FDP statistics' counters, compared by how much the command
//! changed them.

use zns_spec::fdp::{FdpStatsLog, IoManagementReceive, RuhStatus};
use zns_spec::log::LogPageId;

use super::command::FdpCmd;
use super::reference::FdpGeometry;
use super::target::{Queue, Reply, Target, Transfer};

/// One side's FDP state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FdpState {
    /// RUAMW of each placement handle, in the order of its Reclaim Unit
    /// Handle Status descriptors (placement identifier, handle, RUAMW).
    pub ruamw: Vec<(u16, u16, u64)>,
    /// The FDP Statistics page.
    pub stats: FdpStatsLog,
}

impl FdpState {
    /// RUAMW of placement handle `h`, if the namespace has it.
    pub fn available(&self, h: u16) -> Option<u64> {
        self.ruamw.iter().find(|d| d.0 == h).map(|d| d.2)
    }
}

/// Reads the FDP state of `t`'s namespace (`g.handles` placement
/// handles).
pub fn state(t: &mut dyn Target, g: &FdpGeometry) -> Result<FdpState, String> {
    let dwords = (RuhStatus::HEADER + 32 * g.handles as usize).div_ceil(4) as u64;
    let sqe = IoManagementReceive::ruh_status(t.nsid(), dwords).to_entry().expect("dwords");
    let r = t.run(Queue::Io, &sqe, &Transfer::FromDevice(dwords as usize * 4));
    let data = r
        .data
        .ok_or_else(|| format!("{}: Reclaim Unit Handle Status: {}", t.name(), r.outcome.name()))?;
    let s = RuhStatus::from_bytes(&data).map_err(|e| format!("{}: {e}", t.name()))?;
    let ruamw = s.descriptors.iter().map(|d| (d.pid, d.ruhid, d.available_blocks)).collect();
    let g22 = zns_spec::fdp::get_log_page(LogPageId::FdpStatistics, g.endgid, 16);
    let r = t.run(Queue::Admin, &g22.to_entry().expect("16 dwords"), &Transfer::FromDevice(64));
    let data =
        r.data.ok_or_else(|| format!("{}: FDP Statistics: {}", t.name(), r.outcome.name()))?;
    let page: [u8; 64] = data[..64].try_into().expect("64 bytes");
    Ok(FdpState { ruamw, stats: FdpStatsLog::from_bytes(&page) })
}

/// What one side did with one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The completion and data.
    pub reply: Reply,
    /// The state before.
    pub before: FdpState,
    /// The state after.
    pub after: FdpState,
}

impl Seen {
    /// How much a counter of the statistics grew.
    pub fn grew(&self, f: fn(&FdpStatsLog) -> u128) -> i128 {
        f(&self.after.stats) as i128 - f(&self.before.stats) as i128
    }
}

/// A part of what the two sides did that can differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Aspect {
    /// Status or DW0.
    Completion,
    /// The data returned.
    Data,
    /// A handle's RUAMW afterwards.
    Ruamw,
    /// Host bytes written (HBMW) grew differently.
    HostBytes,
    /// Media bytes written (MBMW) grew differently.
    MediaBytes,
    /// Media bytes erased (MBE) grew differently.
    Erased,
}

impl Aspect {
    /// The aspect's name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Aspect::Completion => "completion",
            Aspect::Data => "data",
            Aspect::Ruamw => "RUAMW",
            Aspect::HostBytes => "HBMW",
            Aspect::MediaBytes => "MBMW",
            Aspect::Erased => "MBE",
        }
    }
}

/// The aspects in which `peer` and `ours` differ.
pub fn differences(peer: &Seen, ours: &Seen) -> Vec<Aspect> {
    let mut d = Vec::new();
    if peer.reply.outcome != ours.reply.outcome {
        d.push(Aspect::Completion);
    }
    if peer.reply.data != ours.reply.data {
        d.push(Aspect::Data);
    }
    if peer.after.ruamw != ours.after.ruamw {
        d.push(Aspect::Ruamw);
    }
    if peer.grew(|s| s.host_bytes_written) != ours.grew(|s| s.host_bytes_written) {
        d.push(Aspect::HostBytes);
    }
    if peer.grew(|s| s.media_bytes_written) != ours.grew(|s| s.media_bytes_written) {
        d.push(Aspect::MediaBytes);
    }
    if peer.grew(|s| s.media_bytes_erased) != ours.grew(|s| s.media_bytes_erased) {
        d.push(Aspect::Erased);
    }
    d
}

/// Runs `cmd` on `t` between two reads of its FDP state.
pub fn observe(
    t: &mut dyn Target,
    g: &FdpGeometry,
    cmd: &FdpCmd,
    before: FdpState,
) -> Result<Seen, String> {
    let (queue, sqe, data) = cmd.entry(t.nsid(), g.block_size);
    let reply = t.run(queue, &sqe, &data);
    let after = state(t, g)?;
    Ok(Seen { reply, before, after })
}

/// The size in bytes of FDP log page `lid` as a side with geometry `g` and
/// no events has it: what offsets are aimed at.
pub fn page_size(lid: u8, g: &FdpGeometry) -> u64 {
    match lid {
        0x20 => 16 + (64 + 4 * g.ruhs as u64).next_multiple_of(8),
        0x21 => 8 + 8 * g.ruhs as u64,
        _ => 64,
    }
}

/// The bytes of a log page window at `offset` that fall on `field` (a
/// byte range of the page): indices into the window.
pub fn window_range(
    offset: u64,
    len: usize,
    field: std::ops::Range<u64>,
) -> std::ops::Range<usize> {
    let lo = field.start.max(offset).min(offset + len as u64);
    let hi = field.end.max(offset).min(offset + len as u64);
    (lo - offset) as usize..(hi - offset) as usize
}

/// Indices where two buffers of the same length differ.
pub fn differing_bytes(a: &[u8], b: &[u8]) -> Vec<usize> {
    a.iter().zip(b).enumerate().filter(|(_, (x, y))| x != y).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_clip_fields_to_what_was_read() {
        // MAXPIDS (page bytes 26..28) in a window of 16 bytes from 20.
        assert_eq!(window_range(20, 16, 26..28), 6..8);
        assert_eq!(window_range(0, 8, 26..28), 8..8, "outside the window: empty");
        assert_eq!(window_range(27, 8, 26..28), 0..1, "the field's second byte only");
        assert_eq!(differing_bytes(&[1, 2, 3], &[1, 0, 3]), vec![1]);
    }
}
