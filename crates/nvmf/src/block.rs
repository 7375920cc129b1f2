//! I/O commands on block namespaces (NVM command set): the FTL, or any
//! other [`BlockDevice`], behind Read, Write, Flush, Write Zeroes, Dataset
//! Management and Copy (read and write, within [`COPY_LIMITS`]). Zone
//! commands and Zone Append are not NVM commands: Invalid Opcode.
//!
//! The block device has no volatile-cache switch of its own: a write with
//! FUA is a write followed by a flush, so it is durable before its
//! completion, as on any drive with a volatile write cache (the target
//! reports one for these namespaces).

use zns_block::{BlockDevice, BlockError};
use zns_spec::command::{CopyCmd, DatasetManagement, DsmRange, ReadWrite, WriteZeroes};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::{IoOpcode, StatusCode, SubmissionEntry};

use crate::io::IoDone;

/// Copy limits of block namespaces (Identify Namespace MSSRL, MCL and
/// MSRC + 1): blocks per source range, blocks per command, ranges.
pub const COPY_LIMITS: (u32, u32, u32) = (256, 1024, 16);

/// Runs I/O command `op` (`sqe`) on block device `dev`. `host` is the data
/// the host sent, `room` the bytes its descriptor offers for data to it,
/// output goes to `out`; `zeros` is the connection's buffer of zeroes.
pub(crate) fn execute(
    dev: &dyn BlockDevice,
    zeros: &mut Vec<u8>,
    op: IoOpcode,
    sqe: &SubmissionEntry,
    host: &[u8],
    room: usize,
    out: &mut Vec<u8>,
) -> IoDone {
    let r = match op {
        IoOpcode::Read => read(dev, sqe, room, out),
        IoOpcode::Write => write(dev, sqe, host),
        IoOpcode::Flush => dev.flush().map(|()| IoDone::ok(0, 0)).map_err(|e| block_error(&e)),
        IoOpcode::WriteZeroes => write_zeroes(dev, zeros, sqe),
        IoOpcode::DatasetManagement => dataset_management(dev, sqe, host),
        IoOpcode::Copy => copy(dev, zeros, sqe, host),
        IoOpcode::Compare => compare(dev, out, sqe, host),
        IoOpcode::Verify => verify(dev, out, sqe),
        _ => Err(IoDone::err(StatusCode::InvalidOpcode)),
    };
    r.unwrap_or_else(|d| d)
}

/// The status of a block device's error: range and alignment errors are
/// the host's, a block that cannot be read is a media error, anything
/// else the target's.
pub(crate) fn block_error(e: &BlockError) -> IoDone {
    let code = match e {
        BlockError::OutOfRange { .. } => StatusCode::LbaOutOfRange,
        BlockError::Misaligned { .. } => StatusCode::InvalidField,
        BlockError::Unreadable { .. } => StatusCode::UnrecoveredReadError,
        BlockError::NoSpace => StatusCode::CapacityExceeded,
        other => {
            tracing::warn!(error = %other, "block namespace failure");
            return IoDone::err(StatusCode::InternalError);
        }
    };
    tracing::debug!(error = %e, ?code, "block command failed");
    IoDone::err(code)
}

/// Bytes of `blocks` blocks, checked against the range of the namespace
/// and what the data descriptor offers.
fn span(dev: &dyn BlockDevice, slba: u64, blocks: u32, offered: usize) -> Result<usize, IoDone> {
    if slba.checked_add(blocks as u64).is_none_or(|end| end > dev.capacity_blocks()) {
        return Err(IoDone::err(StatusCode::LbaOutOfRange));
    }
    let len = blocks as usize * dev.block_size() as usize;
    if len > crate::subsystem::BLOCK_MDTS {
        return Err(IoDone::err(StatusCode::InvalidField));
    }
    if len > offered {
        return Err(IoDone::err(StatusCode::SglLengthInvalid));
    }
    Ok(len)
}

fn read(
    dev: &dyn BlockDevice,
    sqe: &SubmissionEntry,
    room: usize,
    out: &mut Vec<u8>,
) -> Result<IoDone, IoDone> {
    let c = ReadWrite::decode(sqe);
    let len = span(dev, c.slba, c.blocks, room)?;
    out.resize(len, 0);
    dev.read(c.slba, &mut out[..len]).map_err(|e| block_error(&e))?;
    Ok(IoDone::ok(0, len))
}

/// Compare: the blocks read (into `scratch`) and set against the host's
/// data; Compare Failure where they differ.
fn compare(
    dev: &dyn BlockDevice,
    scratch: &mut Vec<u8>,
    sqe: &SubmissionEntry,
    host: &[u8],
) -> Result<IoDone, IoDone> {
    let c = ReadWrite::decode(sqe);
    let len = span(dev, c.slba, c.blocks, host.len())?;
    scratch.resize(scratch.len().max(len), 0);
    dev.read(c.slba, &mut scratch[..len]).map_err(|e| block_error(&e))?;
    if scratch[..len] != host[..len] {
        return Err(IoDone::err(StatusCode::CompareFailure));
    }
    Ok(IoDone::ok(0, 0))
}

/// Verify: the blocks read (their checksums checked), MDTS at a time,
/// without a transfer.
fn verify(
    dev: &dyn BlockDevice,
    scratch: &mut Vec<u8>,
    sqe: &SubmissionEntry,
) -> Result<IoDone, IoDone> {
    let c = ReadWrite::decode(sqe);
    let bs = dev.block_size() as u64;
    if c.slba.checked_add(c.blocks as u64).is_none_or(|end| end > dev.capacity_blocks()) {
        return Err(IoDone::err(StatusCode::LbaOutOfRange));
    }
    let per = (crate::subsystem::BLOCK_MDTS as u64 / bs).max(1);
    let mut at = 0u64;
    while at < c.blocks as u64 {
        let n = per.min(c.blocks as u64 - at);
        let len = (n * bs) as usize;
        scratch.resize(scratch.len().max(len), 0);
        dev.read(c.slba + at, &mut scratch[..len]).map_err(|e| block_error(&e))?;
        at += n;
    }
    Ok(IoDone::ok(0, 0))
}

fn write(dev: &dyn BlockDevice, sqe: &SubmissionEntry, host: &[u8]) -> Result<IoDone, IoDone> {
    let c = ReadWrite::decode(sqe);
    let len = span(dev, c.slba, c.blocks, host.len())?;
    dev.write_fua(c.slba, &host[..len], c.fua).map_err(|e| block_error(&e))?;
    Ok(IoDone::ok(0, 0))
}

fn write_zeroes(
    dev: &dyn BlockDevice,
    zeros: &mut Vec<u8>,
    sqe: &SubmissionEntry,
) -> Result<IoDone, IoDone> {
    let c = WriteZeroes::decode(sqe);
    let blocks = c.blocks as u64;
    if c.slba.checked_add(blocks).is_none_or(|end| end > dev.capacity_blocks()) {
        return Err(IoDone::err(StatusCode::LbaOutOfRange));
    }
    if c.deallocate {
        // Deallocated blocks read as zeroes (DLFEAT).
        dev.discard(c.slba, blocks).map_err(|e| block_error(&e))?;
    } else {
        zns_block::write_zeroes(dev, c.slba, blocks, zeros, crate::subsystem::BLOCK_MDTS)
            .map_err(|e| block_error(&e))?;
    }
    if c.fua {
        dev.flush().map_err(|e| block_error(&e))?;
    }
    Ok(IoDone::ok(0, 0))
}

/// Dataset Management: every range is checked before any is
/// deallocated; without the deallocate attribute the command is a hint
/// and does nothing.
fn dataset_management(
    dev: &dyn BlockDevice,
    sqe: &SubmissionEntry,
    host: &[u8],
) -> Result<IoDone, IoDone> {
    let c = DatasetManagement::decode(sqe);
    let ranges = DsmRange::decode_ranges(host, c.ranges as usize)
        .ok_or_else(|| IoDone::err(StatusCode::SglLengthInvalid))?;
    let cap = dev.capacity_blocks();
    if ranges.iter().any(|r| r.slba.checked_add(r.blocks as u64).is_none_or(|end| end > cap)) {
        return Err(IoDone::err(StatusCode::LbaOutOfRange));
    }
    if c.deallocate {
        for r in ranges.iter().filter(|r| r.blocks > 0) {
            dev.discard(r.slba, r.blocks as u64).map_err(|e| block_error(&e))?;
        }
    }
    Ok(IoDone::ok(0, 0))
}

/// Reads `ranges` in order into `buf` (their total size) and writes it at
/// `dest`.
fn copy_through(
    dev: &dyn BlockDevice,
    ranges: &[SourceRangeFormat0],
    dest: u64,
    buf: &mut [u8],
) -> Result<(), IoDone> {
    let bs = dev.block_size() as usize;
    let mut at = 0usize;
    for r in ranges {
        let len = r.blocks as usize * bs;
        dev.read(r.slba, &mut buf[at..at + len]).map_err(|e| block_error(&e))?;
        at += len;
    }
    dev.write(dest, buf).map_err(|e| block_error(&e))
}

/// Copy: the source ranges, read in order, written from the destination
/// LBA on. Every range and the limits are checked before anything is
/// written. `buf` is the connection's scratch buffer (overwritten; it is
/// zeroed again before Write Zeroes uses it).
fn copy(
    dev: &dyn BlockDevice,
    buf: &mut Vec<u8>,
    sqe: &SubmissionEntry,
    host: &[u8],
) -> Result<IoDone, IoDone> {
    let c = CopyCmd::decode(sqe);
    if c.format != 0 {
        return Err(IoDone::err(StatusCode::InvalidField));
    }
    let (range_max, total_max, ranges_max) = COPY_LIMITS;
    if c.ranges as u32 > ranges_max {
        return Err(IoDone::err(StatusCode::CommandSizeLimitExceeded));
    }
    let need = c.ranges as usize * SourceRangeFormat0::SIZE;
    if host.len() < need {
        return Err(IoDone::err(StatusCode::SglLengthInvalid));
    }
    let ranges = SourceRangeFormat0::decode_ranges(&host[..need], c.ranges as usize)
        .map_err(|_| IoDone::err(StatusCode::InvalidField))?;
    let cap = dev.capacity_blocks();
    let total: u64 = ranges.iter().map(|r| r.blocks as u64).sum();
    if ranges.iter().any(|r| r.blocks > range_max) || total > total_max as u64 {
        return Err(IoDone::err(StatusCode::CommandSizeLimitExceeded));
    }
    let fits = |slba: u64, n: u64| slba.checked_add(n).is_some_and(|end| end <= cap);
    if !ranges.iter().all(|r| fits(r.slba, r.blocks as u64)) || !fits(c.sdlba, total) {
        return Err(IoDone::err(StatusCode::LbaOutOfRange));
    }
    let bs = dev.block_size() as usize;
    let bytes = total as usize * bs;
    buf.resize(buf.len().max(bytes), 0);
    let r = copy_through(dev, &ranges, c.sdlba, &mut buf[..bytes]);
    // Zeroed again whatever happened: a read that failed half way left
    // source data behind, which Write Zeroes would otherwise write.
    buf[..bytes].fill(0);
    r?;
    if c.fua {
        dev.flush().map_err(|e| block_error(&e))?;
    }
    Ok(IoDone::ok(0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_block::MemoryBlockDevice;
    use zns_spec::command::WriteZeroes;

    /// A memory disk whose blocks from `bad` on fail their reads.
    struct Damaged {
        disk: MemoryBlockDevice,
        bad: u64,
    }

    impl BlockDevice for Damaged {
        fn block_size(&self) -> u32 {
            self.disk.block_size()
        }
        fn capacity_blocks(&self) -> u64 {
            self.disk.capacity_blocks()
        }
        fn read(&self, lba: u64, buf: &mut [u8]) -> zns_block::Result<()> {
            // Fill the buffer first, as a device that fails half way may.
            self.disk.read(lba, buf)?;
            let blocks = (buf.len() / self.block_size() as usize) as u64;
            if lba + blocks > self.bad {
                return Err(BlockError::Unreadable {
                    lba: self.bad,
                    source: "fails its checksum".into(),
                });
            }
            Ok(())
        }
        fn write(&self, lba: u64, buf: &[u8]) -> zns_block::Result<()> {
            self.disk.write(lba, buf)
        }
        fn flush(&self) -> zns_block::Result<()> {
            self.disk.flush()
        }
        fn discard(&self, lba: u64, blocks: u64) -> zns_block::Result<()> {
            self.disk.discard(lba, blocks)
        }
    }

    #[test]
    fn a_copy_that_fails_leaves_write_zeroes_writing_zeroes() {
        let dev = Damaged { disk: MemoryBlockDevice::new(4096, 64), bad: 8 };
        dev.write(0, &[0xA5; 4 * 4096]).unwrap();
        let mut zeros = Vec::new();
        let mut out = Vec::new();
        // Two ranges: blocks 0-3 read, blocks 6-9 fail (8 is damaged).
        let ranges: Vec<u8> = [(0u64, 4u32), (6, 4)]
            .iter()
            .flat_map(|&(slba, n)| SourceRangeFormat0::new(slba, n).to_bytes().unwrap())
            .collect();
        let sqe = CopyCmd::new(1, 32, 2).to_entry().unwrap();
        let done = execute(&dev, &mut zeros, IoOpcode::Copy, &sqe, &ranges, 0, &mut out);
        assert_eq!(done.status, StatusCode::UnrecoveredReadError.status());
        let sqe = WriteZeroes::new(1, 0, 4).to_entry().unwrap();
        let done = execute(&dev, &mut zeros, IoOpcode::WriteZeroes, &sqe, &[], 0, &mut out);
        assert!(done.status.is_success());
        let mut back = vec![0xFF; 4 * 4096];
        dev.read(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0), "Write Zeroes wrote stale copy data");
    }
}
