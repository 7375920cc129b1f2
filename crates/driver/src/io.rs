//! Blocking I/O commands on a queue pair: Read, Write (FUA), Flush, Write
//! Zeroes, Copy and Zone Append. Each submits, rings and waits for its own
//! completion; completions of asynchronous commands arriving meanwhile are
//! kept for the next [`QueuePair::poll`].
//!
//! For the asynchronous path, build entries with `zns_spec::command` and
//! use [`QueuePair::submit_owned`] or [`QueuePair::submit`].

use zns_spec::command::{CopyCmd, Flush, ReadWrite, WriteZeroes, ZoneAppend};
use zns_spec::copy::{SourceRangeFormat0, MAX_RANGES};

use crate::admin::built;
use crate::dma::DmaBuffer;
use crate::error::{Error, Result};
use crate::namespace::Namespace;
use crate::queue::QueuePair;

/// Blocks in `len` bytes of `ns`, or an error for partial blocks.
pub(crate) fn blocks_of(ns: &Namespace, len: usize) -> Result<u32> {
    ns.blocks_in(len).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{len} bytes is not a whole number of {}-byte blocks",
            ns.block_size
        ))
    })
}

impl QueuePair {
    /// Reads `buf.len()` bytes at `slba` into `buf`.
    pub fn read(&mut self, ns: &Namespace, slba: u64, buf: &mut DmaBuffer) -> Result<()> {
        let blocks = blocks_of(ns, buf.len())?;
        let cmd = built(ReadWrite::new(ns.nsid, slba, blocks).read())?;
        self.execute(cmd, Some(buf)).map(drop)
    }

    /// Writes `buf` at `slba`.
    pub fn write(&mut self, ns: &Namespace, slba: u64, buf: &DmaBuffer) -> Result<()> {
        self.write_with(ns, slba, buf, false)
    }

    /// Writes `buf` at `slba`, with Force Unit Access when `fua`.
    pub fn write_with(
        &mut self,
        ns: &Namespace,
        slba: u64,
        buf: &DmaBuffer,
        fua: bool,
    ) -> Result<()> {
        self.write_placed(ns, slba, buf, fua, None)
    }

    /// Writes `buf` at `slba`, with Force Unit Access when `fua`, placed
    /// by Flexible Data Placement when `placement` is a Placement
    /// Identifier (DTYPE 2h, DSPEC the identifier; see
    /// [`zns_spec::fdp::PlacementId::encode`]).
    pub fn write_placed(
        &mut self,
        ns: &Namespace,
        slba: u64,
        buf: &DmaBuffer,
        fua: bool,
        placement: Option<u16>,
    ) -> Result<()> {
        let blocks = blocks_of(ns, buf.len())?;
        let mut rw = ReadWrite::new(ns.nsid, slba, blocks).with_fua(fua);
        if let Some(pid) = placement {
            rw = rw.with_placement(pid);
        }
        let cmd = built(rw.write())?;
        // The controller only reads the buffer.
        self.execute_slice(cmd, Some(buf.dma()))?.check().map(drop)
    }

    /// Flushes the namespace's volatile write cache.
    pub fn flush(&mut self, ns: &Namespace) -> Result<()> {
        self.execute(Flush { nsid: ns.nsid }.to_entry(), None).map(drop)
    }

    /// Writes zeroes to `blocks` blocks at `slba`.
    pub fn write_zeroes(&mut self, ns: &Namespace, slba: u64, blocks: u32) -> Result<()> {
        let cmd = built(WriteZeroes::new(ns.nsid, slba, blocks).to_entry())?;
        self.execute(cmd, None).map(drop)
    }

    /// Copies the source `ranges` to `sdlba` (format 0 descriptors, built in
    /// the queue's scratch DMA buffer).
    pub fn copy(
        &mut self,
        ns: &Namespace,
        sdlba: u64,
        ranges: &[SourceRangeFormat0],
    ) -> Result<()> {
        if ranges.is_empty() || ranges.len() > MAX_RANGES {
            return Err(Error::InvalidArgument(format!(
                "{} source ranges (1..={MAX_RANGES})",
                ranges.len()
            )));
        }
        let cmd = built(CopyCmd::new(ns.nsid, sdlba, ranges.len() as u16).to_entry())?;
        let mut scratch = self.take_scratch()?;
        let len = ranges.len() * SourceRangeFormat0::SIZE;
        let r = encode_ranges(ranges, &mut scratch.as_mut_slice()[..len])
            .and_then(|()| self.execute_slice(cmd, Some(scratch.slice(..len)?)));
        self.put_scratch(scratch);
        r?.check().map(drop)
    }

    /// Appends `buf` to the zone starting at `zslba`; returns the LBA the
    /// data was written at (completion DW0-DW1).
    pub fn append(&mut self, ns: &Namespace, zslba: u64, buf: &DmaBuffer) -> Result<u64> {
        self.append_with(ns, zslba, buf, false)
    }

    /// [`QueuePair::append`] with Force Unit Access when `fua`.
    pub fn append_with(
        &mut self,
        ns: &Namespace,
        zslba: u64,
        buf: &DmaBuffer,
        fua: bool,
    ) -> Result<u64> {
        let limit = ns.append_limit().unwrap_or(ns.max_transfer);
        if buf.len() > limit {
            return Err(Error::TransferTooLarge { len: buf.len(), max: limit });
        }
        let blocks = blocks_of(ns, buf.len())?;
        let mut a = ZoneAppend::new(ns.nsid, zslba, blocks);
        a.fua = fua;
        let cmd = built(a.to_entry())?;
        self.execute_slice(cmd, Some(buf.dma()))?.check()
    }
}

/// Writes format 0 descriptors back to back into `out`.
fn encode_ranges(ranges: &[SourceRangeFormat0], out: &mut [u8]) -> Result<()> {
    for (r, chunk) in ranges.iter().zip(out.chunks_exact_mut(SourceRangeFormat0::SIZE)) {
        chunk.copy_from_slice(&r.to_bytes().map_err(|e| Error::InvalidArgument(e.to_string()))?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_encode_back_to_back() {
        let ranges =
            [SourceRangeFormat0::new(10, 2), SourceRangeFormat0::new(0x1_0000_0000, 65536)];
        let mut out = [0u8; 64];
        encode_ranges(&ranges, &mut out).unwrap();
        assert_eq!(&out[8..16], &10u64.to_le_bytes());
        assert_eq!(&out[16..18], &1u16.to_le_bytes());
        assert_eq!(&out[40..48], &0x1_0000_0000u64.to_le_bytes());
        assert_eq!(&out[48..50], &0xFFFFu16.to_le_bytes());
        assert!(encode_ranges(&[SourceRangeFormat0::new(0, 0)], &mut out).is_err());
    }
}
