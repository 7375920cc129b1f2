//! Host CPU nanoseconds per I/O in the driver, separated from the emulator.
//!
//! The driver runs against the in-process emulator with no timing model, on
//! null media with data movement switched off, so what remains is command
//! processing: the driver's submit (CID, tracker, PRPs, SQE), doorbell, poll
//! and completion handling, and the emulator's fetch, decode, zone checks
//! and CQE posting. A transport wrapper timestamps every call into the
//! emulator (register writes, doorbells, polls) with the cycle counter; the
//! emulator's share is the time inside those calls, the driver's share is the
//! rest of the loop. All on one thread, one queue pair.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use zns_driver::{
    Controller, ControllerOptions, DmaBuffer, DmaMemory, EmulatedTransport, Transport,
};
use zns_emulator::host::ProcessMemory;
use zns_emulator::profile::Profile;
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::command::ReadWrite;

use crate::clock::{ticks, Calibration};

/// Failures running the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    /// The emulator could not be built.
    #[error("emulator: {0}")]
    Emulator(#[from] zns_emulator::EmulatorError),
    /// The driver failed.
    #[error("driver: {0}")]
    Driver(#[from] zns_driver::Error),
    /// A command failed.
    #[error("command failed: {0}")]
    Command(zns_spec::Status),
}

/// Options of the overhead benchmark.
#[derive(Debug, Clone)]
pub struct OverheadOptions {
    /// Measuring time per queue depth and operation.
    pub duration: Duration,
    /// Block size (bytes) of each I/O.
    pub block_size: u32,
}

impl Default for OverheadOptions {
    fn default() -> Self {
        OverheadOptions { duration: Duration::from_secs(2), block_size: 4096 }
    }
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadSample {
    /// `read` or `write`.
    pub op: &'static str,
    /// Commands kept in flight.
    pub queue_depth: u32,
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second, driver plus emulator, one core.
    pub ios_per_sec: f64,
    /// Nanoseconds per I/O, all of it.
    pub total_ns_per_io: f64,
    /// Nanoseconds per I/O inside the emulator.
    pub emulator_ns_per_io: f64,
    /// Nanoseconds per I/O in the driver and the benchmark loop.
    pub driver_ns_per_io: f64,
}

/// The benchmark's JSON output.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadReport {
    /// Driver nanoseconds per 4 KiB read at QD 1.
    pub driver_ns_per_io_qd1: f64,
    /// Driver nanoseconds per 4 KiB read at QD 32.
    pub driver_ns_per_io_qd32: f64,
    /// Emulator nanoseconds per 4 KiB read at QD 1.
    pub emulator_ns_per_io_qd1: f64,
    /// Emulator nanoseconds per 4 KiB read at QD 32.
    pub emulator_ns_per_io_qd32: f64,
    /// 4 KiB reads per second through driver and data-less emulator at QD 1.
    pub ios_per_sec_qd1: f64,
    /// 4 KiB reads per second through driver and data-less emulator at QD 32.
    pub ios_per_sec_qd32: f64,
    /// Every configuration measured (reads and sequential writes).
    pub samples: Vec<OverheadSample>,
    /// How the figures were obtained.
    pub method: &'static str,
}

/// Wraps the emulated transport and accumulates cycle-counter ticks spent
/// inside the emulator.
#[derive(Debug)]
struct TimedTransport {
    inner: EmulatedTransport,
    ticks: std::sync::atomic::AtomicU64,
}

impl TimedTransport {
    #[inline(always)]
    fn timed<R>(&self, f: impl FnOnce() -> R) -> R {
        let t0 = ticks();
        let r = f();
        let dt = ticks().wrapping_sub(t0);
        // One thread uses this transport; Relaxed is enough and uncontended.
        self.ticks.fetch_add(dt, std::sync::atomic::Ordering::Relaxed);
        r
    }

    fn take(&self) -> u64 {
        self.ticks.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Transport for TimedTransport {
    fn read32(&self, offset: u32) -> u32 {
        self.timed(|| self.inner.read32(offset))
    }
    fn read64(&self, offset: u32) -> u64 {
        self.timed(|| self.inner.read64(offset))
    }
    fn write32(&self, offset: u32, value: u32) {
        self.timed(|| self.inner.write32(offset, value))
    }
    fn write64(&self, offset: u32, value: u64) {
        self.timed(|| self.inner.write64(offset, value))
    }
    fn poll(&self, cqid: u16) {
        self.timed(|| self.inner.poll(cqid))
    }
    fn allocate_dma(&self, len: usize) -> zns_driver::Result<DmaMemory> {
        self.inner.allocate_dma(len)
    }
    fn describe(&self) -> String {
        format!("timed {}", self.inner.describe())
    }
}

/// A zoned namespace with huge zones and no resource limits, so sequential
/// writes never need zone management in the measured loop.
fn profile(block_size: u32) -> Profile {
    let mut p = Profile::by_name("small").expect("built-in profile");
    p.namespaces.truncate(1);
    let ns = &mut p.namespaces[0];
    ns.block_size = block_size;
    ns.metadata_size = 0;
    ns.zones = 64;
    ns.zone_size = 1 << 24;
    ns.zone_capacity = 1 << 24;
    ns.max_open = None;
    ns.max_active = None;
    p
}

/// Runs the benchmark.
pub fn run(opts: &OverheadOptions) -> Result<OverheadReport, OverheadError> {
    let memory = ProcessMemory::new();
    let p = profile(opts.block_size);
    let emu = Emulator::with_profile(p).media(MediaChoice::Null).build(memory.clone())?;
    emu.set_data_transfer(false);
    let timed = Arc::new(TimedTransport {
        inner: EmulatedTransport::new(emu.clone(), memory),
        ticks: Default::default(),
    });
    let transport: Arc<dyn Transport> = timed.clone();
    let ctrl = Controller::new(transport, ControllerOptions::default())?;
    let ns = ctrl
        .zoned_namespace()
        .ok_or(OverheadError::Command(zns_spec::StatusCode::InvalidNamespaceOrFormat.into()))?;
    let nsid = ns.nsid;
    let blocks_total = 64u64 << 24;
    let mut samples = Vec::new();
    for (op, qd) in [("read", 1u32), ("read", 32), ("write", 1), ("write", 32)] {
        samples.push(measure(&ctrl, &timed, nsid, blocks_total, op, qd, opts)?);
    }
    let pick = |op: &str, qd: u32| {
        samples.iter().find(|s| s.op == op && s.queue_depth == qd).expect("measured").clone()
    };
    let (r1, r32) = (pick("read", 1), pick("read", 32));
    Ok(OverheadReport {
        driver_ns_per_io_qd1: r1.driver_ns_per_io,
        driver_ns_per_io_qd32: r32.driver_ns_per_io,
        emulator_ns_per_io_qd1: r1.emulator_ns_per_io,
        emulator_ns_per_io_qd32: r32.emulator_ns_per_io,
        ios_per_sec_qd1: r1.ios_per_sec,
        ios_per_sec_qd32: r32.ios_per_sec,
        samples,
        method: "one thread, one queue pair; emulator with no timing model, null media, data \
                 transfer off; emulator share = cycle-counter time inside transport calls \
                 (doorbells, register accesses, polls); driver share = the rest of the loop",
    })
}

fn measure(
    ctrl: &Controller,
    timed: &TimedTransport,
    nsid: u32,
    blocks_total: u64,
    op: &'static str,
    qd: u32,
    opts: &OverheadOptions,
) -> Result<OverheadSample, OverheadError> {
    let mut q = ctrl.create_queue_pair(qd as u16 + 1)?;
    let mut free: Vec<DmaBuffer> =
        (0..qd).map(|_| ctrl.alloc_buffer(opts.block_size as usize)).collect::<Result<_, _>>()?;
    let mut rng = SmallRng::seed_from_u64(7);
    // Each write measurement starts in a zone of its own.
    let mut next_write = if qd == 1 { 0 } else { 1 << 24 };
    let mut failed = None;
    // Warm up, then measure.
    for phase in 0..2 {
        let span = if phase == 0 { opts.duration / 10 } else { opts.duration };
        let cal = Calibration::start();
        timed.take();
        let t_start = ticks();
        let wall = Instant::now();
        let mut done = 0u64;
        while wall.elapsed() < span {
            for _ in 0..256 {
                while let Some(buf) = free.pop() {
                    let lba =
                        if op == "read" { rng.gen_range(0..blocks_total) } else { next_write };
                    let rw = ReadWrite::new(nsid, lba, 1);
                    let cmd = if op == "read" { rw.read() } else { rw.write() }
                        .expect("one block is a valid count");
                    match q.submit_owned(cmd, buf, lba) {
                        Ok(_) => next_write += (op == "write") as u64,
                        Err(r) => {
                            free.push(r.buffer);
                            break;
                        }
                    }
                }
                q.ring();
                q.poll(usize::MAX, |c| {
                    if !c.status.is_success() {
                        failed = Some(c.status);
                    }
                    if let Some(b) = c.buffer {
                        free.push(b);
                    }
                    done += 1;
                });
                if let Some(s) = failed {
                    return Err(OverheadError::Command(s));
                }
            }
        }
        if phase == 1 {
            let total_ticks = ticks().wrapping_sub(t_start) as f64;
            let emu_ticks = timed.take() as f64;
            let tpn = cal.ticks_per_ns();
            let secs = wall.elapsed().as_secs_f64();
            let total_ns = total_ticks / tpn / done as f64;
            let emu_ns = emu_ticks / tpn / done as f64;
            return Ok(OverheadSample {
                op,
                queue_depth: qd,
                ios: done,
                ios_per_sec: done as f64 / secs,
                total_ns_per_io: total_ns,
                emulator_ns_per_io: emu_ns,
                driver_ns_per_io: total_ns - emu_ns,
            });
        }
    }
    unreachable!("the measuring phase returns")
}
