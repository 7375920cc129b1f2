//! [`MeteredDevice`]: any [`ZonedDevice`] with every command its queues
//! carry counted in [`DeviceMetrics`], for the exports to serve as live
//! metrics. The rest of the device (its emulator, log pages, clock) is
//! the wrapped device's.

use std::any::Any;
use std::sync::Arc;

use zns_device::{
    Completion, Data, DeviceInfo, IoBuffer, Rejected, Result, ZoneChanges, ZoneOp, ZoneQueue,
    ZonedDevice,
};

use crate::record::{DeviceMetrics, QueueMetrics};

/// A device whose queues count their commands: per queue, by opcode,
/// with latencies on the device's clock and completions by status.
///
/// Thread safety: `Send + Sync`, as the device it wraps.
#[derive(Debug)]
pub struct MeteredDevice {
    inner: Arc<dyn ZonedDevice>,
    zoned: Arc<DeviceMetrics>,
    conventional: Arc<DeviceMetrics>,
}

impl MeteredDevice {
    /// Wraps `inner`: its queues (and its conventional namespace's)
    /// count into fresh [`DeviceMetrics`].
    pub fn wrap(inner: Arc<dyn ZonedDevice>) -> Arc<MeteredDevice> {
        Arc::new(MeteredDevice {
            inner,
            zoned: DeviceMetrics::new(),
            conventional: DeviceMetrics::new(),
        })
    }

    /// The device wrapped, whose commands are not counted (scrapes use it).
    pub fn inner(&self) -> &Arc<dyn ZonedDevice> {
        &self.inner
    }

    /// The counters of [`ZonedDevice::queue`]'s queues.
    pub fn metrics(&self) -> &Arc<DeviceMetrics> {
        &self.zoned
    }

    /// The counters of [`ZonedDevice::conventional_queue`]'s queues.
    pub fn conventional_metrics(&self) -> &Arc<DeviceMetrics> {
        &self.conventional
    }
}

impl ZonedDevice for MeteredDevice {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        let q = self.inner.queue(depth)?;
        Ok(Box::new(MeteredQueue::new(q, Arc::clone(&self.inner), Arc::clone(&self.zoned))))
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        self.inner.alloc(len)
    }

    fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.inner.emulator()
    }

    fn zone_changes(&self) -> Option<&dyn ZoneChanges> {
        self.inner.zone_changes()
    }

    fn conventional(&self) -> Option<&DeviceInfo> {
        self.inner.conventional()
    }

    fn conventional_queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        let q = self.inner.conventional_queue(depth)?;
        let m = Arc::clone(&self.conventional);
        Ok(Box::new(MeteredQueue::new(q, Arc::clone(&self.inner), m)))
    }

    fn log_page(&self, page: zns_spec::log::GetLogPage) -> Result<Vec<u8>> {
        self.inner.log_page(page)
    }

    fn media_device(&self) -> Option<Arc<dyn ZonedDevice>> {
        self.inner.media_device()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn clock_name(&self) -> &'static str {
        self.inner.clock_name()
    }

    fn wait_ns(&self, ns: u64) {
        self.inner.wait_ns(ns)
    }

    fn as_any(&self) -> &dyn Any {
        // Downcasts look for the backend, which is the wrapped device's.
        self.inner.as_any()
    }
}

/// What a command in flight needs at its completion.
#[derive(Debug, Clone, Copy, Default)]
struct InFlight {
    tag: u64,
    start_ns: u64,
    bytes: u64,
}

/// A queue that counts what it carries. Commands in flight are kept in a
/// table of the queue's capacity, allocated once: the tag the inner queue
/// sees is the table index, and the caller's tag comes back in the
/// completion. The clock is read once per ring (a command reaches the
/// device then, not at its submission) and once per poll that delivers
/// completions, not per command.
struct MeteredQueue {
    inner: Box<dyn ZoneQueue>,
    clock: Arc<dyn ZonedDevice>,
    metrics: Arc<QueueMetrics>,
    device: Arc<DeviceMetrics>,
    flight: Vec<InFlight>,
    free: Vec<u32>,
    /// Slots submitted since the last ring, to be stamped by it.
    unrung: Vec<u32>,
}

impl MeteredQueue {
    fn new(
        inner: Box<dyn ZoneQueue>,
        clock: Arc<dyn ZonedDevice>,
        device: Arc<DeviceMetrics>,
    ) -> Self {
        let n = inner.capacity();
        MeteredQueue {
            inner,
            clock,
            metrics: device.take(),
            device,
            flight: vec![InFlight::default(); n],
            free: (0..n as u32).rev().collect(),
            unrung: Vec::with_capacity(n),
        }
    }
}

impl Drop for MeteredQueue {
    fn drop(&mut self) {
        self.device.give_back(self.metrics.slot());
    }
}

/// Bytes a command moves between host and device.
fn data_bytes(data: &Data<'_>) -> u64 {
    match data {
        Data::ToDevice(b) => b.len() as u64,
        Data::FromDevice(b) => b.len() as u64,
        Data::None => 0,
    }
}

impl ZoneQueue for MeteredQueue {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        self.inner.alloc(len)
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn outstanding(&self) -> usize {
        self.inner.outstanding()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        let Some(slot) = self.free.pop() else {
            return Err(Rejected { error: zns_device::DeviceError::QueueFull, buffer });
        };
        let bytes = buffer.as_ref().map_or(0, |b| b.len() as u64);
        self.flight[slot as usize] = InFlight { tag, start_ns: 0, bytes };
        let r = self.inner.submit(op, buffer, u64::from(slot));
        match r {
            Ok(()) => self.unrung.push(slot),
            Err(_) => self.free.push(slot),
        }
        r
    }

    fn ring(&mut self) {
        let now = self.clock.now_ns();
        for &slot in &self.unrung {
            self.flight[slot as usize].start_ns = now;
        }
        self.unrung.clear();
        self.inner.ring()
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        let (flight, free, metrics) = (&self.flight, &mut self.free, &self.metrics);
        let clock = &self.clock;
        // Read at the first completion this poll delivers, for all of them.
        let mut now: Option<u64> = None;
        self.inner.poll(max, &mut |mut c: Completion| {
            let slot = c.tag as usize;
            let Some(&entry) = flight.get(slot) else {
                // Not a tag this queue gave: deliver it as it came.
                f(c);
                return;
            };
            free.push(slot as u32);
            let at = *now.get_or_insert_with(|| clock.now_ns());
            let took = at.saturating_sub(entry.start_ns);
            metrics.record(c.op, entry.bytes, took, c.result.as_ref().map(|_| ()));
            c.tag = entry.tag;
            f(c)
        })
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        let bytes = data_bytes(&data);
        let start = self.clock.now_ns();
        let r = self.inner.execute(op, data);
        let took = self.clock.now_ns().saturating_sub(start);
        self.metrics.record(op.kind(), bytes, took, r.as_ref().map(|_| ()));
        r
    }
}
