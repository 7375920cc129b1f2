//! Test support: a zoned device whose power can be "cut" at an exact
//! command.
//!
//! [`CrashDevice`] wraps any [`ZonedDevice`]; its queues count the
//! commands submitted through a shared [`PowerSwitch`], and once the switch
//! has run out every new command is refused (as if the machine had lost
//! power; commands already submitted still complete). A test arms the
//! switch with a random budget, runs a workload until the FTL fails, then
//! calls the emulator's `power_cut`, which drops whatever was not durable,
//! and recovers. This reaches every point between two device commands: in
//! the middle of garbage collection, of a log write, of a checkpoint.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zns_device::{
    Completion, Data, DeviceError, DeviceInfo, IoBuffer, Rejected, ZoneOp, ZoneQueue, ZonedDevice,
};

const UNLIMITED: u64 = u64::MAX;

/// How many more commands may reach the device.
///
/// Thread safety: `Send + Sync` (one atomic counter).
#[derive(Debug)]
pub struct PowerSwitch {
    left: AtomicU64,
}

impl Default for PowerSwitch {
    fn default() -> Self {
        PowerSwitch { left: AtomicU64::new(UNLIMITED) }
    }
}

impl PowerSwitch {
    /// A switch that lets every command through.
    pub fn new() -> Arc<Self> {
        Arc::new(PowerSwitch::default())
    }

    /// Lets `commands` more commands through, then refuses all.
    pub fn arm(&self, commands: u64) {
        self.left.store(commands.min(UNLIMITED - 1), Ordering::SeqCst);
    }

    /// Lets every command through again.
    pub fn disarm(&self) {
        self.left.store(UNLIMITED, Ordering::SeqCst);
    }

    /// True once the switch has refused or will refuse the next command.
    pub fn is_off(&self) -> bool {
        self.left.load(Ordering::SeqCst) == 0
    }

    /// Takes one command from the budget; false when none is left.
    fn take(&self) -> bool {
        self.left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| match v {
                UNLIMITED => Some(v),
                0 => None,
                n => Some(n - 1),
            })
            .is_ok()
    }
}

fn power_lost(info: &DeviceInfo) -> DeviceError {
    DeviceError::Unavailable {
        uri: info.uri.clone(),
        reason: "power lost (cut by the test kit)".into(),
    }
}

/// A zoned device behind a [`PowerSwitch`].
///
/// Thread safety: `Send + Sync`, like the device it wraps.
#[derive(Debug)]
pub struct CrashDevice {
    inner: Arc<dyn ZonedDevice>,
    switch: Arc<PowerSwitch>,
}

impl CrashDevice {
    /// Wraps `inner`; `switch` decides how many commands reach it.
    pub fn new(inner: Arc<dyn ZonedDevice>, switch: Arc<PowerSwitch>) -> Self {
        CrashDevice { inner, switch }
    }

    /// The device behind the switch (for an emulated device, its
    /// controller's `power_cut` is reached through this one).
    pub fn inner(&self) -> &Arc<dyn ZonedDevice> {
        &self.inner
    }
}

impl ZonedDevice for CrashDevice {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn queue(&self, depth: usize) -> zns_device::Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(CrashQueue {
            inner: self.inner.queue(depth)?,
            switch: Arc::clone(&self.switch),
        }))
    }

    fn alloc(&self, len: usize) -> zns_device::Result<IoBuffer> {
        self.inner.alloc(len)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A queue of a [`CrashDevice`].
///
/// Thread safety: `Send`, like the queue it wraps.
struct CrashQueue {
    inner: Box<dyn ZoneQueue>,
    switch: Arc<PowerSwitch>,
}

impl ZoneQueue for CrashQueue {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn alloc(&self, len: usize) -> zns_device::Result<IoBuffer> {
        self.inner.alloc(len)
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn outstanding(&self) -> usize {
        self.inner.outstanding()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        if !self.switch.take() {
            return Err(Rejected { error: power_lost(self.inner.info()), buffer });
        }
        self.inner.submit(op, buffer, tag)
    }

    fn ring(&mut self) {
        self.inner.ring()
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        self.inner.poll(max, f)
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> zns_device::Result<u64> {
        if !self.switch.take() {
            return Err(power_lost(self.inner.info()));
        }
        self.inner.execute(op, data)
    }
}
