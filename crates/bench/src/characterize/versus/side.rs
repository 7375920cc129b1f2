//! The two sides of the comparison as the workload sees them: random-write
//! block devices, each thread with a lane of its own (a queue and buffers).
//!
//! - [`HostFtlSide`]: `zns-ftl` over a ZNS device. Garbage collection runs
//!   in the host (the FTL's own thread) and relocates with the device's
//!   commands; its write amplification is the FTL's count.
//! - [`ConventionalSide`]: a conventional namespace, written directly.
//!   Garbage collection runs inside the device; its write amplification is
//!   the firmware's own count, read from the emulated controller.

use std::sync::Arc;

use zns_device::{IoBuffer, ZoneOp, ZoneQueue, ZonedDevice};
use zns_ftl::{Ftl, FtlConfig};

use super::super::CharacterizeError;

/// Blocks written as counted by whoever collects garbage: blocks the host
/// asked for, data blocks programmed for them (the host's and the moved
/// ones) and metadata blocks.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct WriteCounters {
    pub host: u64,
    pub data: u64,
    pub meta: u64,
}

impl WriteCounters {
    /// The counts since `before`.
    pub fn since(self, before: WriteCounters) -> WriteCounters {
        WriteCounters {
            host: self.host.saturating_sub(before.host),
            data: self.data.saturating_sub(before.data),
            meta: self.meta.saturating_sub(before.meta),
        }
    }

    /// Data blocks per host block; `None` before any host block.
    pub fn waf(self) -> Option<f64> {
        (self.host > 0).then(|| self.data as f64 / self.host as f64)
    }
}

/// A random-write block device of whole blocks.
pub(crate) trait Side: Send + Sync {
    /// Blocks the workload may address.
    fn blocks(&self) -> u64;
    /// Bytes per block.
    fn block_size(&self) -> u32;
    /// The device behind it.
    fn device(&self) -> &Arc<dyn ZonedDevice>;
    /// A lane for one thread, for requests of at most `max_blocks`.
    fn lane(&self, max_blocks: u64) -> Result<Box<dyn Lane + '_>, CharacterizeError>;
    /// The garbage collector's counters, when they can be read.
    fn counters(&self) -> Option<WriteCounters>;

    /// Device time now.
    fn now(&self) -> u64 {
        self.device().now_ns()
    }

    /// Lets the side finish the work writes left it, then leaves the
    /// device idle for `ns` of device time.
    fn settle(&self, ns: u64) -> Result<(), CharacterizeError> {
        self.device().wait_ns(ns);
        Ok(())
    }
}

/// One thread's way to a [`Side`].
pub(crate) trait Lane: Send {
    /// Writes `blocks` blocks at `lba`; returns once the device took them.
    fn write(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError>;
    /// Reads `blocks` blocks at `lba`.
    fn read(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError>;
}

/// `zns-ftl` formatted on a ZNS device.
///
/// Thread safety: `Send + Sync` (the FTL is).
pub(crate) struct HostFtlSide {
    dev: Arc<dyn ZonedDevice>,
    ftl: Ftl,
}

impl HostFtlSide {
    /// Formats the FTL on `dev` with `config` (the device's zones must be
    /// empty, as `Ftl::format` requires).
    pub fn format(dev: Arc<dyn ZonedDevice>, config: FtlConfig) -> Result<Self, CharacterizeError> {
        let ftl = Ftl::format(Arc::clone(&dev), config)?;
        Ok(HostFtlSide { dev, ftl })
    }

    /// Stops the FTL's garbage collection and checkpoints it.
    pub fn close(self) -> Result<(), CharacterizeError> {
        Ok(self.ftl.close()?)
    }
}

impl Side for HostFtlSide {
    fn blocks(&self) -> u64 {
        self.ftl.capacity_blocks()
    }

    fn block_size(&self) -> u32 {
        self.ftl.block_size()
    }

    fn device(&self) -> &Arc<dyn ZonedDevice> {
        &self.dev
    }

    fn lane(&self, max_blocks: u64) -> Result<Box<dyn Lane + '_>, CharacterizeError> {
        let bs = self.block_size() as usize;
        let buf = pattern(max_blocks as usize * bs);
        Ok(Box::new(FtlLane { ftl: &self.ftl, bs, buf }))
    }

    /// Garbage collection first: the FTL's thread may still be
    /// relocating a victim when the writes stop.
    fn settle(&self, ns: u64) -> Result<(), CharacterizeError> {
        self.ftl.wait_for_gc()?;
        self.dev.wait_ns(ns);
        Ok(())
    }

    fn counters(&self) -> Option<WriteCounters> {
        let s = self.ftl.stats();
        Some(WriteCounters {
            host: s.user_blocks_written,
            data: s.data_blocks_written,
            meta: s.meta_blocks_written,
        })
    }
}

/// Bytes that are not all zero (a device may treat zeros specially).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8) ^ 0x5A).collect()
}

struct FtlLane<'a> {
    ftl: &'a Ftl,
    bs: usize,
    buf: Vec<u8>,
}

impl Lane for FtlLane<'_> {
    fn write(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError> {
        let len = blocks as usize * self.bs;
        let data = self.buf.get(..len).ok_or_else(|| too_long(blocks))?;
        Ok(self.ftl.write(lba, data)?)
    }

    fn read(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError> {
        let len = blocks as usize * self.bs;
        let data = self.buf.get_mut(..len).ok_or_else(|| too_long(blocks))?;
        Ok(self.ftl.read(lba, data)?)
    }
}

fn too_long(blocks: u64) -> CharacterizeError {
    CharacterizeError::Internal(format!("a request of {blocks} blocks exceeds its lane"))
}

/// A conventional namespace, written and read directly.
///
/// Thread safety: `Send + Sync`.
pub(crate) struct ConventionalSide {
    dev: Arc<dyn ZonedDevice>,
    emulator: Option<Arc<zns_emulator::Controller>>,
}

impl ConventionalSide {
    /// The conventional device `dev` (its namespace has no zones).
    pub fn new(dev: Arc<dyn ZonedDevice>) -> Self {
        let emulator = dev.emulator().cloned();
        ConventionalSide { dev, emulator }
    }

    /// The firmware's counters, when the device is an emulated
    /// conventional twin.
    pub fn firmware(&self) -> Option<zns_emulator::conv::FtlStats> {
        let ctrl = self.emulator.as_ref()?;
        ctrl.namespaces().iter().find_map(|n| n.firmware()).map(|f| f.stats())
    }
}

impl Side for ConventionalSide {
    fn blocks(&self) -> u64 {
        self.dev.info().blocks()
    }

    fn block_size(&self) -> u32 {
        self.dev.info().block_size
    }

    fn device(&self) -> &Arc<dyn ZonedDevice> {
        &self.dev
    }

    fn lane(&self, max_blocks: u64) -> Result<Box<dyn Lane + '_>, CharacterizeError> {
        let info = self.dev.info();
        let chunk = info.max_transfer_blocks().min(max_blocks).max(1);
        let chunks = max_blocks.div_ceil(chunk) as usize;
        // A queue shorter than a request sends it in several rounds.
        let q = self.dev.queue(chunks)?;
        let bs = info.block_size as usize;
        let mut buffers = Vec::with_capacity(chunks);
        for _ in 0..chunks.min(q.capacity()) {
            let mut b = self.dev.alloc(chunk as usize * bs)?;
            b.copy_from_slice(&pattern(chunk as usize * bs));
            buffers.push(b);
        }
        Ok(Box::new(ConvLane { q, buffers, chunk, bs }))
    }

    fn counters(&self) -> Option<WriteCounters> {
        self.firmware().map(|f| WriteCounters {
            host: f.host_blocks,
            data: f.host_blocks + f.gc_blocks,
            meta: 0,
        })
    }
}

/// A queue and its buffers: a request goes out as commands of at most the
/// device's transfer size, all in flight at once, as a block layer would
/// send it.
struct ConvLane {
    q: Box<dyn ZoneQueue>,
    buffers: Vec<IoBuffer>,
    chunk: u64,
    bs: usize,
}

impl ConvLane {
    fn run(&mut self, lba: u64, blocks: u64, write: bool) -> Result<(), CharacterizeError> {
        let mut next = 0u64;
        let mut error: Option<CharacterizeError> = None;
        while next < blocks || self.q.outstanding() > 0 {
            while next < blocks && error.is_none() {
                let Some(mut b) = self.buffers.pop() else { break };
                let k = self.chunk.min(blocks - next);
                b.set_len(k as usize * self.bs)?;
                let at = lba + next;
                let op = if write {
                    ZoneOp::Write { lba: at, fua: false, placement: None }
                } else {
                    ZoneOp::Read { lba: at }
                };
                match self.q.submit(op, Some(b), at) {
                    Ok(()) => next += k,
                    Err(r) => {
                        let full = r.is_queue_full();
                        if let Some(b) = r.buffer {
                            self.buffers.push(b);
                        }
                        if !full {
                            error = Some(CharacterizeError::command(&command(write, at), r.error));
                        }
                        break;
                    }
                }
            }
            self.q.ring();
            let buffers = &mut self.buffers;
            self.q.poll(usize::MAX, &mut |c| {
                if let Some(b) = c.buffer {
                    buffers.push(b);
                }
                if let Err(e) = c.result {
                    error.get_or_insert(CharacterizeError::command(&command(write, c.tag), e));
                }
            });
            if error.is_some() && self.q.outstanding() == 0 {
                break;
            }
        }
        error.map_or(Ok(()), Err)
    }
}

fn command(write: bool, lba: u64) -> String {
    format!("{} at LBA {lba:#x}", if write { "write" } else { "read" })
}

impl Lane for ConvLane {
    fn write(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError> {
        self.run(lba, blocks, true)
    }

    fn read(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError> {
        self.run(lba, blocks, false)
    }
}
