//! The three sides of the comparison as the workload sees them:
//! random-write block devices, each thread with a lane of its own (a queue
//! and buffers).
//!
//! - [`HostFtlSide`]: `zns-ftl` over a ZNS device. Garbage collection runs
//!   in the host (the FTL's own thread) and relocates with the device's
//!   commands; its write amplification is the FTL's count.
//! - [`ConventionalSide`]: a conventional namespace, written directly.
//!   Garbage collection runs inside the device; its write amplification is
//!   the firmware's own count, read from the emulated controller.
//! - [`FdpSide`]: a conventional namespace with Flexible Data Placement,
//!   written directly with a placement identifier on every write: hot and
//!   cold data on reclaim unit handles of their own when the host knows
//!   which is which. Garbage collection runs inside the device; its write
//!   amplification is the device's FDP Statistics log page (22h), checked
//!   against the emulated firmware's counters where there are some.

use std::sync::Arc;

use zns_device::{IoBuffer, ZoneOp, ZoneQueue, ZonedDevice};
use zns_ftl::{Ftl, FtlConfig};
use zns_spec::fdp::{self, FdpStatsLog};
use zns_spec::log::LogPageId;

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

/// What the host knows about the data of a write.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Heat {
    /// Nothing: a write of the uniform workload.
    Unknown,
    /// The hot range of the hot/cold workload (most of its writes).
    Hot,
    /// The rest of the hot/cold workload's blocks.
    Cold,
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
    /// Where [`Side::counters`] come from.
    fn counter_source(&self) -> &'static str;
    /// A second count of the same writes to check the first against (the
    /// emulated firmware's, beside a device's log page), with its source.
    fn check_counters(&self) -> Option<(WriteCounters, &'static str)> {
        None
    }
    /// What the side does with what the host knows about the data: for the
    /// uniform workload (`hot_cold` false) or the hot/cold one.
    fn separation(&self, hot_cold: bool) -> String;
    /// Unmaps every block the workload may address, so that the next
    /// workload starts from a device holding no data.
    fn trim(&self) -> Result<(), CharacterizeError>;

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
    /// Writes `blocks` blocks at `lba`, of data the host knows `heat` of;
    /// returns once the device took them.
    fn write(&mut self, lba: u64, blocks: u64, heat: Heat) -> Result<(), CharacterizeError>;
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

    fn counter_source(&self) -> &'static str {
        "host FTL counters"
    }

    /// The FTL gets no hint: with its default separated streams it sorts
    /// user writes by the age of the data they replace.
    fn separation(&self, _hot_cold: bool) -> String {
        "none given; the host FTL sorts writes into its own hot and cold streams by the age of \
         the data they replace"
            .into()
    }

    fn trim(&self) -> Result<(), CharacterizeError> {
        Ok(self.ftl.discard(0, self.ftl.capacity_blocks())?)
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
    fn write(&mut self, lba: u64, blocks: u64, _heat: Heat) -> Result<(), CharacterizeError> {
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

    fn firmware_counters(&self) -> Option<WriteCounters> {
        self.firmware().map(|f| WriteCounters {
            host: f.host_blocks,
            data: f.host_blocks + f.gc_blocks,
            meta: 0,
        })
    }

    /// A lane whose writes carry `placement` (the placement identifiers
    /// of unknown or cold data and of hot data), or none.
    fn placed_lane(
        &self,
        max_blocks: u64,
        placement: Option<[u16; 2]>,
    ) -> Result<Box<dyn Lane + '_>, CharacterizeError> {
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
        Ok(Box::new(ConvLane { q, buffers, chunk, bs, placement }))
    }

    /// Unmaps the namespace with Write Zeroes (the emulated firmware
    /// deallocates the blocks; they read as zeros).
    fn write_zeroes_all(&self) -> Result<(), CharacterizeError> {
        let mut q = self.dev.queue(1)?;
        let blocks = self.dev.info().blocks();
        q.write_zeroes(0, blocks)
            .map_err(|e| CharacterizeError::command(&format!("write zeroes to {blocks} blocks"), e))
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
        self.placed_lane(max_blocks, None)
    }

    fn counters(&self) -> Option<WriteCounters> {
        self.firmware_counters()
    }

    fn counter_source(&self) -> &'static str {
        "firmware counters"
    }

    fn separation(&self, _hot_cold: bool) -> String {
        "none: one host stream, no placement".into()
    }

    fn trim(&self) -> Result<(), CharacterizeError> {
        self.write_zeroes_all()
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
    /// Placement identifiers of unknown or cold data and of hot data;
    /// `None`: writes without placement.
    placement: Option<[u16; 2]>,
}

impl ConvLane {
    fn run(&mut self, lba: u64, blocks: u64, write: Option<Heat>) -> Result<(), CharacterizeError> {
        let placement = match (write, self.placement) {
            (Some(Heat::Hot), Some(p)) => Some(p[1]),
            (Some(_), Some(p)) => Some(p[0]),
            _ => None,
        };
        let mut next = 0u64;
        let mut error: Option<CharacterizeError> = None;
        while next < blocks || self.q.outstanding() > 0 {
            while next < blocks && error.is_none() {
                let Some(mut b) = self.buffers.pop() else { break };
                let k = self.chunk.min(blocks - next);
                b.set_len(k as usize * self.bs)?;
                let at = lba + next;
                let op = match write {
                    Some(_) => ZoneOp::Write { lba: at, fua: false, placement },
                    None => ZoneOp::Read { lba: at },
                };
                match self.q.submit(op, Some(b), at) {
                    Ok(()) => next += k,
                    Err(r) => {
                        let full = r.is_queue_full();
                        if let Some(b) = r.buffer {
                            self.buffers.push(b);
                        }
                        if !full {
                            let what = command(write.is_some(), at);
                            error = Some(CharacterizeError::command(&what, r.error));
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
                    let what = command(write.is_some(), c.tag);
                    error.get_or_insert(CharacterizeError::command(&what, e));
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
    fn write(&mut self, lba: u64, blocks: u64, heat: Heat) -> Result<(), CharacterizeError> {
        self.run(lba, blocks, Some(heat))
    }

    fn read(&mut self, lba: u64, blocks: u64) -> Result<(), CharacterizeError> {
        self.run(lba, blocks, None)
    }
}

/// The endurance group of `dev`'s namespace when it has Flexible Data
/// Placement enabled, as the device layer found at open (CTRATT.FDPS, the
/// namespace's ENDGID, Get Features 1Dh, the FDP Configurations page);
/// `None` otherwise.
pub(crate) fn fdp_endurance_group(dev: &dyn ZonedDevice) -> Option<u16> {
    dev.info().fdp.as_ref().filter(|f| f.enabled).map(|f| f.endurance_group)
}

/// A conventional namespace with Flexible Data Placement, written directly
/// with a placement identifier on every write.
///
/// Thread safety: `Send + Sync`.
pub(crate) struct FdpSide {
    inner: ConventionalSide,
    /// The namespace's endurance group, which the FDP log pages name.
    endgid: u16,
    /// Placement identifiers of unknown or cold data (handle 0) and of hot
    /// data (handle 1).
    pids: [u16; 2],
    /// Reclaim unit handles of the configuration.
    handles: usize,
    /// Bytes per block the FDP statistics count (data and metadata).
    unit: u128,
}

impl FdpSide {
    /// The FDP namespace `dev`. Reads its FDP configuration (which must
    /// have two reclaim unit handles at least: hot and cold data need one
    /// each) and its FDP statistics once.
    pub fn new(dev: Arc<dyn ZonedDevice>) -> Result<Self, CharacterizeError> {
        let uri = dev.info().uri.clone();
        let endgid = fdp_endurance_group(dev.as_ref()).ok_or_else(|| {
            CharacterizeError::Invalid(format!(
                "{uri}: no Flexible Data Placement (Identify: CTRATT.FDPS clear or no endurance \
                 group)"
            ))
        })?;
        // The configuration the device opened with (Get Features 1Dh and
        // the FDP Configurations page, read by the device layer).
        let f = dev.info().fdp.clone().ok_or_else(|| {
            CharacterizeError::Invalid(format!("{uri}: no FDP configuration described"))
        })?;
        let handles = f.handles.len();
        if handles < 2 {
            return Err(CharacterizeError::Invalid(format!(
                "{uri}: its FDP configuration has {handles} reclaim unit handle(s); the hot/cold \
                 workload needs two (one for hot data, one for cold)"
            )));
        }
        let pid = |handle: u16| {
            f.placement_id(handle, 0).ok_or_else(|| {
                CharacterizeError::Invalid(format!(
                    "{uri}: placement handle {handle} does not fit a placement identifier with \
                     RGIF {}",
                    f.rgif
                ))
            })
        };
        let pids = [pid(0)?, pid(1)?];
        let info = dev.info();
        let unit = u128::from(info.block_size) + u128::from(info.metadata_size);
        let side = FdpSide { inner: ConventionalSide::new(dev), endgid, pids, handles, unit };
        side.statistics()?;
        Ok(side)
    }

    /// The FDP Statistics page (22h) of the namespace's endurance group.
    fn statistics(&self) -> Result<FdpStatsLog, CharacterizeError> {
        let dwords = (FdpStatsLog::SIZE / 4) as u64;
        let page = fdp::get_log_page(LogPageId::FdpStatistics, self.endgid, dwords);
        let b = self
            .inner
            .dev
            .log_page(page)
            .map_err(|e| CharacterizeError::command("Get Log Page FDP Statistics (22h)", e))?;
        let b: &[u8; FdpStatsLog::SIZE] =
            b.get(..FdpStatsLog::SIZE).and_then(|b| b.try_into().ok()).ok_or_else(|| {
                CharacterizeError::Invalid(format!(
                    "{}: the FDP Statistics page came back with {} bytes of {}",
                    self.inner.dev.info().uri,
                    b.len(),
                    FdpStatsLog::SIZE
                ))
            })?;
        Ok(FdpStatsLog::from_bytes(b))
    }
}

impl Side for FdpSide {
    fn blocks(&self) -> u64 {
        self.inner.blocks()
    }

    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }

    fn device(&self) -> &Arc<dyn ZonedDevice> {
        self.inner.device()
    }

    fn lane(&self, max_blocks: u64) -> Result<Box<dyn Lane + '_>, CharacterizeError> {
        self.inner.placed_lane(max_blocks, Some(self.pids))
    }

    /// Host and media bytes written (HBMW, MBMW) of the FDP Statistics
    /// page, in blocks with their metadata. A page that cannot be read
    /// gives no counts (and a warning): the figures of that interval are
    /// left out rather than the run stopped.
    fn counters(&self) -> Option<WriteCounters> {
        match self.statistics() {
            Ok(s) => Some(WriteCounters {
                host: (s.host_bytes_written / self.unit) as u64,
                data: (s.media_bytes_written / self.unit) as u64,
                meta: 0,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "FDP statistics unreadable");
                None
            }
        }
    }

    fn counter_source(&self) -> &'static str {
        "FDP Statistics log page (22h): MBMW / HBMW"
    }

    fn check_counters(&self) -> Option<(WriteCounters, &'static str)> {
        self.inner.firmware_counters().map(|c| (c, "firmware counters"))
    }

    fn separation(&self, hot_cold: bool) -> String {
        let [cold, hot] = self.pids;
        if hot_cold {
            format!(
                "hot range on placement identifier {hot}, cold on {cold} (of {} reclaim unit \
                 handles)",
                self.handles
            )
        } else {
            format!(
                "one reclaim unit handle (placement identifier {cold}): uniform random writes \
                 give the host nothing to separate"
            )
        }
    }

    fn trim(&self) -> Result<(), CharacterizeError> {
        self.inner.write_zeroes_all()
    }
}
