//! What one ublk queue does with each request: the device I/O behind it.
//!
//! A handler owns what its queue needs (a [`ZoneQueue`] and a buffer, or
//! a shared [`BlockDevice`] and a buffer) and carries out one request at
//! a time, blocking in the device until it completes: the queue's thread
//! serves its requests one after the other. The request's data moves
//! through a [`DataPort`]: in the server the ublk character device
//! (`UBLK_F_USER_COPY`), in tests memory.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zns_block::BlockDevice;
use zns_device::{Data, IoBuffer, ReportFilter, ZoneQueue};

use crate::errno::{block_errno, device_errno, io_errno, EINVAL, EOPNOTSUPP};
use crate::request::{zone_op, Geometry, Request};
use crate::zone;

/// Where a request's data comes from and goes to.
pub(crate) trait DataPort {
    /// Fills `buf` with the request's data (what the kernel writes).
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<()>;
    /// Hands `buf` to the kernel as the request's data (what it reads).
    fn deliver(&mut self, buf: &[u8]) -> io::Result<()>;
}

/// How a request ended, as the ublk driver takes it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    /// Bytes done (reads, writes, reports), 0 (requests without data), or
    /// a negative errno.
    pub res: i32,
    /// Where a Zone Append landed, in sectors.
    pub append_sector: Option<u64>,
}

impl Done {
    fn ok(bytes: usize) -> Done {
        Done { res: i32::try_from(bytes).unwrap_or(i32::MAX), append_sector: None }
    }

    fn failed(errno: i32) -> Done {
        Done { res: -errno, append_sector: None }
    }
}

/// Counters of one ublk queue: its thread alone writes them, any thread
/// reads them ([`Counters::snapshot`]); the device's are the sum of its
/// queues'.
///
/// Thread safety: `Send + Sync` (atomics). Aligned to a cache line of its
/// own, so that queues on different CPUs do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counters {
    requests: AtomicU64,
    failed: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// What a served device has done so far.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests completed.
    pub requests: u64,
    /// Requests completed with an error.
    pub failed: u64,
    /// Bytes the kernel read.
    pub bytes_read: u64,
    /// Bytes the kernel wrote (Zone Append included).
    pub bytes_written: u64,
}

/// Adds `n` to a counter that only the calling thread writes: a load and
/// a store, not a locked read-modify-write, on every request.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Counters {
    fn count(&self, request: &Request, done: &Done) {
        bump(&self.requests, 1);
        if done.res < 0 {
            bump(&self.failed, 1);
            return;
        }
        let bytes = request.data_bytes() as u64;
        match request {
            Request::Read { .. } => bump(&self.bytes_read, bytes),
            Request::Write { .. } | Request::Append { .. } => bump(&self.bytes_written, bytes),
            _ => {}
        }
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            requests: self.requests.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

impl std::ops::Add for Stats {
    type Output = Stats;

    fn add(self, o: Stats) -> Stats {
        Stats {
            requests: self.requests + o.requests,
            failed: self.failed + o.failed,
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }
}

/// Carries out the requests of one ublk queue.
pub(crate) trait Handler: Send {
    /// Carries out `request`, its data through `port`.
    fn handle(&mut self, request: &Request, port: &mut dyn DataPort) -> Done;
}

/// A request that failed, with the errno to complete it with.
type Failed = i32;

/// A [`zns_device::ZonedDevice`]'s requests through one [`ZoneQueue`]:
/// a zoned namespace's, or a conventional one's (reads, writes, flushes,
/// Write Zeroes, and discards as Write Zeroes).
pub(crate) struct ZonedHandler {
    queue: Box<dyn ZoneQueue>,
    buf: IoBuffer,
    geometry: Geometry,
    /// The largest request the kernel sends (its max_sectors), in bytes.
    max_request_bytes: usize,
    /// Discards are carried out as Write Zeroes (a conventional
    /// namespace's: the device commands have no Dataset Management, and
    /// a device may deallocate what it zeroes).
    discard_as_zeroes: bool,
    counters: Arc<Counters>,
}

impl ZonedHandler {
    /// A handler on `queue`, with a buffer for requests of up to
    /// `max_request_bytes`; with `discard_as_zeroes`, discards are
    /// Write Zeroes (see [`crate::Layout::discard_sectors`]), otherwise
    /// `EOPNOTSUPP`.
    pub(crate) fn new(
        queue: Box<dyn ZoneQueue>,
        geometry: Geometry,
        max_request_bytes: usize,
        discard_as_zeroes: bool,
        counters: Arc<Counters>,
    ) -> zns_device::Result<ZonedHandler> {
        let buf = queue.alloc(max_request_bytes)?;
        Ok(ZonedHandler { queue, buf, geometry, max_request_bytes, discard_as_zeroes, counters })
    }

    fn run(&mut self, request: &Request, port: &mut dyn DataPort) -> Result<Done, Failed> {
        let op = match *request {
            Request::ReportZones { sector, zones } => return self.report(sector, zones, port),
            Request::Discard { sector, sectors } if self.discard_as_zeroes => {
                zone_op(&Request::WriteZeroes { sector, sectors }, &self.geometry)?
            }
            _ => zone_op(request, &self.geometry)?,
        };
        let bytes = request.data_bytes();
        let lba = match op.data_to_device() {
            Some(to_device) => {
                if bytes > self.max_request_bytes {
                    return Err(EINVAL);
                }
                self.buf.set_len(bytes).map_err(|e| device_errno(&e))?;
                if to_device {
                    port.fetch(&mut self.buf).map_err(|e| io_errno(&e))?;
                    self.queue.execute(&op, Data::ToDevice(&self.buf))
                } else {
                    let lba = self.queue.execute(&op, Data::FromDevice(&mut self.buf));
                    if lba.is_ok() {
                        port.deliver(&self.buf).map_err(|e| io_errno(&e))?;
                    }
                    lba
                }
            }
            None => self.queue.execute(&op, Data::None),
        }
        .map_err(|e| {
            tracing::debug!("ublk {}: {e}", request.name());
            device_errno(&e)
        })?;
        let mut done = Done::ok(bytes);
        if matches!(request, Request::Append { .. }) {
            done.append_sector = Some(self.geometry.sector(lba));
        }
        Ok(done)
    }

    /// A zone report: the device's zones from the one holding `sector`,
    /// as `struct blk_zone`s.
    fn report(&mut self, sector: u64, zones: u32, port: &mut dyn DataPort) -> Result<Done, Failed> {
        // Any sector of the first zone.
        let lba = sector >> (self.geometry.shift() - 9);
        let found = self
            .queue
            .report_zones(lba, ReportFilter::All, zones as usize)
            .map_err(|e| device_errno(&e))?;
        let bytes = zone::report(&found, &self.geometry);
        if !bytes.is_empty() {
            port.deliver(&bytes).map_err(|e| io_errno(&e))?;
        }
        // The request is the kernel's whole report buffer, which may have
        // room for more zones than it asks for; a shorter result would
        // leave the rest of the request to be issued again. The driver
        // caps a result at the request's length, and the zeroes it filled
        // the buffer with end the report after the last zone written, so
        // the result is the longest a request can be.
        Ok(Done::ok(bytes.len().max(self.max_request_bytes)))
    }
}

impl Handler for ZonedHandler {
    fn handle(&mut self, request: &Request, port: &mut dyn DataPort) -> Done {
        let done = self.run(request, port).unwrap_or_else(Done::failed);
        self.counters.count(request, &done);
        done
    }
}

/// A [`BlockDevice`]'s requests (the FTL's): reads, writes (FUA as a
/// write and a flush), flushes, discards, and Write Zeroes as discards
/// (a discarded block reads as zeros).
pub(crate) struct BlockHandler {
    device: Arc<dyn BlockDevice>,
    buf: Vec<u8>,
    geometry: Geometry,
    counters: Arc<Counters>,
}

impl BlockHandler {
    /// A handler on `device`, with a buffer for requests of up to
    /// `max_request_bytes`.
    pub(crate) fn new(
        device: Arc<dyn BlockDevice>,
        geometry: Geometry,
        max_request_bytes: usize,
        counters: Arc<Counters>,
    ) -> BlockHandler {
        BlockHandler { device, buf: vec![0; max_request_bytes], geometry, counters }
    }

    fn run(&mut self, request: &Request, port: &mut dyn DataPort) -> Result<Done, Failed> {
        let g = self.geometry;
        let ftl = |e: zns_block::BlockError| {
            tracing::debug!("ublk {}: {e}", request.name());
            block_errno(&e)
        };
        let bytes = request.data_bytes();
        if bytes > self.buf.len() {
            return Err(EINVAL);
        }
        match *request {
            Request::Read { sector, sectors } => {
                g.blocks(sectors)?;
                let buf = &mut self.buf[..bytes];
                self.device.read(g.lba(sector)?, buf).map_err(ftl)?;
                port.deliver(buf).map_err(|e| io_errno(&e))?;
            }
            Request::Write { sector, sectors, fua } => {
                g.blocks(sectors)?;
                let buf = &mut self.buf[..bytes];
                port.fetch(buf).map_err(|e| io_errno(&e))?;
                self.device.write_fua(g.lba(sector)?, buf, fua).map_err(ftl)?;
            }
            Request::Flush => self.device.flush().map_err(ftl)?,
            Request::Discard { sector, sectors } | Request::WriteZeroes { sector, sectors } => {
                self.device.discard(g.lba(sector)?, g.blocks(sectors)?).map_err(ftl)?
            }
            Request::Append { .. }
            | Request::Zone { .. }
            | Request::ResetAll
            | Request::ReportZones { .. } => return Err(EOPNOTSUPP),
        }
        Ok(Done::ok(bytes))
    }
}

impl Handler for BlockHandler {
    fn handle(&mut self, request: &Request, port: &mut dyn DataPort) -> Done {
        let done = self.run(request, port).unwrap_or_else(Done::failed);
        self.counters.count(request, &done);
        done
    }
}

#[cfg(test)]
mod tests {
    use zns_block::MemoryBlockDevice;
    use zns_device::{ZoneAction, ZoneState};

    use super::*;
    use crate::errno::{EIO, ENOSPC};
    use crate::zone::BLK_ZONE_BYTES;

    /// The kernel's side of the data, in memory.
    #[derive(Default)]
    struct Memory {
        /// What a write brings.
        input: Vec<u8>,
        /// What the last read delivered.
        output: Vec<u8>,
    }

    impl DataPort for Memory {
        fn fetch(&mut self, buf: &mut [u8]) -> io::Result<()> {
            buf.copy_from_slice(&self.input[..buf.len()]);
            Ok(())
        }
        fn deliver(&mut self, buf: &[u8]) -> io::Result<()> {
            self.output = buf.to_vec();
            Ok(())
        }
    }

    /// A handler of `uri`'s device, as the server makes it.
    fn handler(uri: &str) -> (ZonedHandler, Arc<Counters>) {
        let dev = zns_device::open(uri).unwrap();
        let layout = crate::Layout::zoned_device(dev.info(), 64 << 10).unwrap();
        let counters = Arc::new(Counters::default());
        let h = ZonedHandler::new(
            dev.queue(4).unwrap(),
            layout.geometry,
            64 << 10,
            layout.discard_sectors > 0,
            counters.clone(),
        )
        .unwrap();
        (h, counters)
    }

    fn tiny() -> (ZonedHandler, Arc<Counters>) {
        handler("emu:tiny")
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn a_zoned_device_writes_appends_reads_reports_and_resets() {
        // tiny: 16 zones of 64 4-KiB blocks (512 sectors), capacity 48.
        let (mut h, counters) = tiny();
        let mut m =
            Memory { input: (0..16384).map(|i| (i % 251) as u8).collect(), ..Memory::default() };
        let done = h.handle(&Request::Write { sector: 0, sectors: 16, fua: false }, &mut m);
        assert_eq!(done, Done { res: 8192, append_sector: None });
        // Zone Append to zone 1 lands at its start; the kernel gets the
        // sector.
        let done = h.handle(&Request::Append { sector: 512, sectors: 8, fua: true }, &mut m);
        assert_eq!(done, Done { res: 4096, append_sector: Some(512) });
        let done = h.handle(&Request::Append { sector: 512, sectors: 8, fua: false }, &mut m);
        assert_eq!(done.append_sector, Some(520));
        let done = h.handle(&Request::Read { sector: 0, sectors: 16 }, &mut m);
        assert_eq!(done.res, 8192);
        assert_eq!(m.output, m.input[..8192]);
        // Writing off the write pointer fails as the drive fails it.
        let done = h.handle(&Request::Write { sector: 64, sectors: 8, fua: false }, &mut m);
        assert_eq!(done.res, -EIO);
        assert_eq!(h.handle(&Request::Flush, &mut m).res, 0);

        // A report of three zones: zone 0 open with two blocks written,
        // zone 1 open, zone 2 empty; the result is the longest request.
        let done = h.handle(&Request::ReportZones { sector: 0, zones: 3 }, &mut m);
        assert_eq!(done.res, 64 << 10);
        assert_eq!(m.output.len(), 3 * BLK_ZONE_BYTES);
        let z = |i: usize| &m.output[i * BLK_ZONE_BYTES..(i + 1) * BLK_ZONE_BYTES];
        assert_eq!((u64_at(z(0), 0), u64_at(z(0), 8), u64_at(z(0), 16)), (0, 512, 16));
        assert_eq!(z(0)[25], ZoneState::ImplicitlyOpen as u8);
        assert_eq!(u64_at(z(0), 32), 48 * 8);
        assert_eq!((u64_at(z(1), 0), u64_at(z(1), 16)), (512, 528));
        assert_eq!((u64_at(z(2), 16), z(2)[25]), (1024, ZoneState::Empty as u8));
        // The last zones: the report stops at the device's end.
        h.handle(&Request::ReportZones { sector: 15 * 512 + 8, zones: 4 }, &mut m);
        assert_eq!(m.output.len(), BLK_ZONE_BYTES);
        assert_eq!(u64_at(&m.output, 0), 15 * 512);

        let finish = Request::Zone { action: ZoneAction::Finish, sector: 512 };
        assert_eq!(h.handle(&finish, &mut m).res, 0);
        let open = Request::Zone { action: ZoneAction::Open, sector: 1024 };
        assert_eq!(h.handle(&open, &mut m).res, 0);
        h.handle(&Request::ReportZones { sector: 512, zones: 2 }, &mut m);
        assert_eq!(m.output[25], ZoneState::Full as u8);
        assert_eq!(u64_at(&m.output, 16), 1024, "a Full zone's write pointer is its end");
        assert_eq!(m.output[BLK_ZONE_BYTES + 25], ZoneState::ExplicitlyOpen as u8);
        let close = Request::Zone { action: ZoneAction::Close, sector: 1024 };
        assert_eq!(h.handle(&close, &mut m).res, 0);
        let reset = Request::Zone { action: ZoneAction::Reset, sector: 0 };
        assert_eq!(h.handle(&reset, &mut m).res, 0);
        h.handle(&Request::ReportZones { sector: 0, zones: 1 }, &mut m);
        assert_eq!((u64_at(&m.output, 16), m.output[25]), (0, ZoneState::Empty as u8));
        assert_eq!(h.handle(&Request::ResetAll, &mut m).res, 0);
        h.handle(&Request::ReportZones { sector: 0, zones: 3 }, &mut m);
        assert!((0..3).all(|i| m.output[i * BLK_ZONE_BYTES + 25] == ZoneState::Empty as u8));

        // Write Zeroes at the write pointer; discard is not a zoned
        // device's; a request larger than the buffer is refused.
        let wz = Request::WriteZeroes { sector: 0, sectors: 16 };
        assert_eq!(h.handle(&wz, &mut m).res, 0);
        assert_eq!(h.handle(&Request::Discard { sector: 0, sectors: 8 }, &mut m).res, -EOPNOTSUPP);
        let big = Request::Read { sector: 0, sectors: (128 << 10) / 512 };
        assert_eq!(h.handle(&big, &mut m).res, -EINVAL);
        let s = counters.snapshot();
        assert_eq!((s.bytes_written, s.bytes_read), (8192 + 8192, 8192));
        assert_eq!(s.failed, 3);
        assert_eq!(s.requests, 19);
    }

    #[test]
    fn a_conventional_namespace_writes_anywhere_discards_and_zeroes() {
        // The conventional twin of small, cut to 64 zones' flash: a plain
        // disk of 4-KiB blocks.
        let (mut h, counters) = handler("emu:small-conv,zones=64");
        let mut m =
            Memory { input: (0..16384).map(|i| (i % 253) as u8).collect(), ..Memory::default() };
        // Writes land anywhere, overwrites included, out of order.
        for sector in [4096, 0, 8, 4096] {
            let w = Request::Write { sector, sectors: 32, fua: sector == 0 };
            assert_eq!(h.handle(&w, &mut m), Done { res: 16384, append_sector: None });
        }
        assert_eq!(h.handle(&Request::Read { sector: 0, sectors: 8 }, &mut m).res, 4096);
        assert_eq!(m.output, m.input[..4096]);
        assert_eq!(h.handle(&Request::Read { sector: 8, sectors: 32 }, &mut m).res, 16384);
        assert_eq!(m.output, m.input);
        assert_eq!(h.handle(&Request::Flush, &mut m).res, 0);

        // A discard and a Write Zeroes: those blocks read as zeros, their
        // neighbours keep their data.
        let discard = Request::Discard { sector: 16, sectors: 8 };
        assert_eq!(h.handle(&discard, &mut m).res, 0);
        let zeroes = Request::WriteZeroes { sector: 4096 + 8, sectors: 16 };
        assert_eq!(h.handle(&zeroes, &mut m).res, 0);
        h.handle(&Request::Read { sector: 8, sectors: 24 }, &mut m);
        assert_eq!(m.output[..4096], m.input[..4096]);
        assert!(m.output[4096..8192].iter().all(|&b| b == 0));
        assert_eq!(m.output[8192..], m.input[8192..12288]);
        h.handle(&Request::Read { sector: 4096, sectors: 32 }, &mut m);
        assert_eq!(m.output[..4096], m.input[..4096]);
        assert!(m.output[4096..12288].iter().all(|&b| b == 0));
        assert_eq!(m.output[12288..], m.input[12288..]);

        // No zones: zone requests fail; a discard off the blocks is
        // refused.
        let append = Request::Append { sector: 0, sectors: 8, fua: false };
        assert!(h.handle(&append, &mut m).res < 0);
        let reset = Request::Zone { action: ZoneAction::Reset, sector: 0 };
        assert!(h.handle(&reset, &mut m).res < 0);
        assert_eq!(h.handle(&Request::Discard { sector: 4, sectors: 8 }, &mut m).res, -EINVAL);
        let s = counters.snapshot();
        assert_eq!((s.requests, s.failed), (14, 3));
        assert_eq!((s.bytes_written, s.bytes_read), (4 * 16384, 4096 + 2 * 16384 + 12288));
    }

    #[test]
    fn a_block_device_reads_writes_flushes_and_discards() {
        let dev = Arc::new(MemoryBlockDevice::new(4096, 64));
        let counters = Arc::new(Counters::default());
        let g = Geometry::new(4096).unwrap();
        let mut h = BlockHandler::new(dev.clone(), g, 64 << 10, counters.clone());
        let mut m = Memory { input: vec![0xA5; 16384], ..Memory::default() };
        assert_eq!(
            h.handle(&Request::Write { sector: 8, sectors: 16, fua: true }, &mut m).res,
            8192
        );
        assert_eq!(h.handle(&Request::Read { sector: 0, sectors: 32 }, &mut m).res, 16384);
        assert!(m.output[..4096].iter().all(|&b| b == 0));
        assert!(m.output[4096..12288].iter().all(|&b| b == 0xA5));
        assert_eq!(h.handle(&Request::Flush, &mut m).res, 0);
        // Write Zeroes is a discard: discarded blocks read as zeros.
        assert_eq!(h.handle(&Request::WriteZeroes { sector: 8, sectors: 8 }, &mut m).res, 0);
        assert_eq!(h.handle(&Request::Discard { sector: 16, sectors: 8 }, &mut m).res, 0);
        h.handle(&Request::Read { sector: 0, sectors: 32 }, &mut m);
        assert!(m.output.iter().all(|&b| b == 0));
        // Past the end; zone requests; a part of a block.
        assert_eq!(h.handle(&Request::Read { sector: 64 * 8, sectors: 8 }, &mut m).res, -ENOSPC);
        assert_eq!(h.handle(&Request::ResetAll, &mut m).res, -EOPNOTSUPP);
        let append = Request::Append { sector: 0, sectors: 8, fua: false };
        assert_eq!(h.handle(&append, &mut m).res, -EOPNOTSUPP);
        assert_eq!(h.handle(&Request::Read { sector: 1, sectors: 8 }, &mut m).res, -EINVAL);
        let s = counters.snapshot();
        assert_eq!((s.requests, s.failed, s.bytes_written), (10, 4, 8192));
        // A device's stats are its queues' summed.
        let sum = s + Stats { requests: 1, failed: 0, bytes_read: 4096, bytes_written: 0 };
        assert_eq!((sum.requests, sum.failed, sum.bytes_read), (11, 4, s.bytes_read + 4096));
    }
}
