//! Random FDP commands, aimed where the rules are: writes that fill a
//! handle's reclaim unit exactly, cross it, or stay inside; placement
//! identifiers the namespace has and lacks; updates of one handle, of
//! several, of every one, with identifiers it lacks; status reads of every
//! length; log pages from every kind of offset; features of other groups,
//! handles and namespaces.

use super::command::{FdpCmd, FdpOp, NsidChoice};
use super::compare::{page_size, FdpState};
use super::reference::FdpGeometry;
use crate::rng::Rng;

/// A block count up to `max`: mostly small, sometimes the largest.
fn count(rng: &mut Rng, max: u64) -> u64 {
    let max = max.max(1);
    match rng.weighted(&[70, 25, 5]) {
        0 => rng.range(1, max.min(8)),
        1 => rng.range(1, max),
        _ => max,
    }
}

/// A placement identifier the namespace lacks.
fn invalid_pid(rng: &mut Rng, g: &FdpGeometry) -> u16 {
    match rng.below(3) {
        0 => g.handles,
        1 => u16::MAX,
        _ => g.handles + rng.below(u16::MAX as u64 - g.handles as u64) as u16,
    }
}

/// The next command, given both sides' state as the peer reports it.
pub fn next(rng: &mut Rng, g: &FdpGeometry, state: &FdpState) -> FdpCmd {
    let op = match rng.weighted(&[34, 12, 2, 12, 12, 16, 4, 6]) {
        0 => write(rng, g, state),
        1 => read(rng, g),
        2 => FdpOp::Flush,
        3 => receive(rng, g),
        4 => send(rng, g),
        5 => log(rng, g),
        6 => {
            let endgid = match rng.weighted(&[60, 10, 10, 10, 10]) {
                0 => g.endgid,
                1 => 0,
                2 => g.endgid.wrapping_add(1),
                3 => g.endgid | 0x100,
                _ => u16::MAX,
            };
            FdpOp::GetFdpFeature { endgid }
        }
        _ => events_feature(rng, g),
    };
    FdpCmd { op, fill: rng.next() }
}

fn write(rng: &mut Rng, g: &FdpGeometry, state: &FdpState) -> FdpOp {
    let placement = match rng.weighted(&[70, 15, 15]) {
        0 => Some(rng.below(g.handles as u64) as u16),
        1 => None,
        _ => Some(invalid_pid(rng, g)),
    };
    let handle = placement.filter(|p| *p < g.handles).unwrap_or(0);
    let left = state.available(handle).unwrap_or(g.ru_blocks).max(1);
    let max = g.max_blocks.min(65536);
    let blocks = match rng.weighted(&[55, 15, 20, 10]) {
        0 => count(rng, max),
        // Exactly what the handle's unit has left, or just past it.
        1 => left.min(max),
        2 => (left + rng.range(1, 8)).min(max),
        _ => left.saturating_sub(rng.range(1, 4)).clamp(1, max),
    };
    let lba = match rng.weighted(&[85, 10, 5]) {
        0 => rng.below(g.blocks.saturating_sub(blocks) + 1),
        // Across the namespace's end, or past it.
        1 => g.blocks.saturating_sub(rng.range(0, blocks)),
        _ => g.blocks + rng.below(1 << 20),
    };
    FdpOp::Write { lba, blocks: blocks as u32, fua: rng.chance(10), placement }
}

fn read(rng: &mut Rng, g: &FdpGeometry) -> FdpOp {
    let blocks = count(rng, g.max_blocks.min(65536));
    let lba = match rng.weighted(&[90, 10]) {
        0 => rng.below(g.blocks.saturating_sub(blocks) + 1),
        _ => g.blocks.saturating_sub(rng.range(0, blocks)),
    };
    FdpOp::Read { lba, blocks: blocks as u32 }
}

fn receive(rng: &mut Rng, g: &FdpGeometry) -> FdpOp {
    let full = 4 + 8 * g.handles as u32;
    let mo = match rng.weighted(&[90, 5, 5]) {
        0 => 1,
        1 => 0,
        _ => [2, 0x7F, 0xFF][rng.below(3) as usize],
    };
    let dwords = match rng.weighted(&[50, 30, 20]) {
        0 => full,
        1 => rng.range(1, full as u64) as u32,
        _ => full + rng.range(1, 64) as u32,
    };
    FdpOp::IoMgmtReceive { mo, dwords }
}

fn send(rng: &mut Rng, g: &FdpGeometry) -> FdpOp {
    let h = g.handles as u64;
    let valid = |rng: &mut Rng| rng.below(h) as u16;
    let pids: Vec<u16> = match rng.weighted(&[40, 20, 8, 10, 8, 8, 6]) {
        0 => vec![valid(rng)],
        1 => {
            // Several distinct handles.
            let mut v: Vec<u16> = (0..g.handles).collect();
            for i in 0..v.len() {
                let j = i + rng.below((v.len() - i) as u64) as usize;
                v.swap(i, j);
            }
            v.truncate(rng.range(2, h.max(2) - 1).min(h) as usize);
            v
        }
        2 => {
            let p = valid(rng);
            vec![p, p]
        }
        3 => (0..g.handles).collect(),
        4 => (0..=g.handles).map(|p| p.min(g.handles - 1)).collect(),
        5 => vec![valid(rng), invalid_pid(rng, g)],
        _ => vec![invalid_pid(rng, g)],
    };
    let mo = match rng.weighted(&[92, 4, 4]) {
        0 => 1,
        1 => 0,
        _ => 2,
    };
    FdpOp::IoMgmtSend { mo, pids }
}

fn log(rng: &mut Rng, g: &FdpGeometry) -> FdpOp {
    let lid = 0x20 + rng.below(4) as u8;
    let size = page_size(lid, g);
    let lsi = match rng.weighted(&[85, 10, 5]) {
        0 => g.endgid,
        1 => 0,
        _ => g.endgid.wrapping_add(1),
    };
    let lsp = if lid == 0x23 { rng.below(2) as u8 } else { 0 };
    let offset = match rng.weighted(&[55, 20, 8, 7, 5, 5]) {
        0 => 0,
        1 => 4 * rng.below(size / 4),
        2 => size,
        3 => size + 4 * rng.range(1, 16),
        4 => 2,
        _ => 4 * rng.range(1, 1 << 20),
    };
    let whole = (size.saturating_sub(offset.min(size))).div_ceil(4).max(1);
    let dwords = match rng.weighted(&[50, 30, 20]) {
        0 => whole,
        1 => rng.range(1, whole),
        _ => whole + rng.range(1, 32),
    };
    FdpOp::GetLog { lid, lsi, lsp, offset, dwords: dwords.min(1024) as u32 }
}

fn events_feature(rng: &mut Rng, g: &FdpGeometry) -> FdpOp {
    let nsid = match rng.weighted(&[85, 5, 5, 5]) {
        0 => NsidChoice::Own,
        1 => NsidChoice::Other(0),
        2 => NsidChoice::Other(u32::MAX),
        _ => NsidChoice::Other(200),
    };
    let handle = match rng.weighted(&[85, 15]) {
        0 => rng.below(g.handles as u64) as u16,
        _ => invalid_pid(rng, g),
    };
    let event_types = [0u8, 1, 2, 3, 4, 6, 8, 16][rng.below(8) as usize];
    FdpOp::GetEventsFeature { nsid, handle, event_types }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> FdpGeometry {
        FdpGeometry {
            blocks: 4096,
            block_size: 4096,
            metadata_size: 0,
            endgid: 1,
            handles: 8,
            ruhs: 8,
            ru_blocks: 256,
            mdts_log2: 5,
            volatile_write_cache: true,
            max_blocks: 32,
            model: "test".into(),
        }
    }

    #[test]
    fn commands_reach_the_rules_and_stay_within_the_transfer_limit() {
        let g = geometry();
        let state = FdpState { ruamw: (0..8).map(|h| (h, h, 5)).collect(), ..Default::default() };
        let mut rng = Rng::for_sequence(1, 2);
        let (mut fills, mut invalid, mut every, mut at_end) = (0, 0, 0, 0);
        for _ in 0..5000 {
            match next(&mut rng, &g, &state).op {
                FdpOp::Write { blocks, placement, .. } => {
                    assert!((1..=32).contains(&blocks));
                    let h = placement.filter(|p| *p < 8).unwrap_or(0);
                    fills += (blocks as u64 == state.available(h).unwrap()) as u32;
                    invalid += placement.is_some_and(|p| p >= 8) as u32;
                }
                FdpOp::Read { blocks, .. } => assert!((1..=32).contains(&blocks)),
                FdpOp::IoMgmtSend { pids, .. } => every += (pids.len() == 8) as u32,
                FdpOp::GetLog { lid, offset, dwords, .. } => {
                    assert!((1..=1024).contains(&dwords));
                    at_end += (offset == page_size(lid, &g)) as u32;
                }
                _ => {}
            }
        }
        assert!(
            fills > 50 && invalid > 50 && every > 20 && at_end > 20,
            "{fills} {invalid} {every} {at_end}"
        );
    }
}
