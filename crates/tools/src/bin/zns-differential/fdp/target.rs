//! Raw NVMe commands on one side of an FDP comparison: the submission
//! entry as built, the completion's status and DW0 as the controller
//! returned them. The device API has no I/O Management, Get Log Page or
//! Get Features commands on every backend, so the FDP mode sends its own
//! entries: through the user-space driver ([`DriverTarget`]: `emu:`,
//! `pcie:`) or through the kernel's NVMe generic namespace device
//! ([`super::ng::NgTarget`]: `ng:`).

use std::any::Any;
use std::sync::Arc;

use zns_device::{DriverDevice, ZonedDevice};
use zns_driver::{Controller, QueuePair};
use zns_spec::SubmissionEntry;

use crate::compare::Outcome;

/// Which queue a command goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// The admin queue.
    Admin,
    /// An I/O queue (the command's NSID names the namespace).
    Io,
}

/// The data a command moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transfer {
    /// None.
    None,
    /// These bytes, to the device.
    ToDevice(Vec<u8>),
    /// This many bytes, from the device (into a zeroed buffer).
    FromDevice(usize),
}

impl Transfer {
    /// Bytes moved.
    pub fn len(&self) -> usize {
        match self {
            Transfer::None => 0,
            Transfer::ToDevice(v) => v.len(),
            Transfer::FromDevice(n) => *n,
        }
    }
}

/// What a command returned: its completion (DW0 with success) and, for a
/// command that read data and succeeded, the whole buffer afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The completion.
    pub outcome: Outcome,
    /// The buffer of a successful command that moved data from the device.
    pub data: Option<Vec<u8>>,
}

impl Reply {
    /// A reply without data.
    pub fn bare(outcome: Outcome) -> Reply {
        Reply { outcome, data: None }
    }

    /// DW0 of a successful completion.
    pub fn dw0(&self) -> Option<u32> {
        match self.outcome {
            Outcome::Done(v) => Some(v as u32),
            _ => None,
        }
    }
}

/// A controller and namespace that take raw commands.
pub trait Target {
    /// The name in the output (the URI).
    fn name(&self) -> &str;
    /// The namespace the I/O commands go to.
    fn nsid(&self) -> u32;
    /// Most bytes one command may move on this path.
    fn max_transfer(&self) -> usize;
    /// Runs `sqe` on `queue`, moving `data`, and waits for it.
    fn run(&mut self, queue: Queue, sqe: &SubmissionEntry, data: &Transfer) -> Reply;
}

/// Errors opening a side.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The device API refused the URI.
    #[error(transparent)]
    Device(#[from] zns_device::DeviceError),
    /// The driver refused a queue.
    #[error("{uri}: {what}: {source}")]
    Driver {
        /// The device.
        uri: String,
        /// What failed.
        what: &'static str,
        /// Why.
        source: zns_driver::Error,
    },
    /// The URI names a device this mode cannot send raw commands to.
    #[error("{0}")]
    Unsupported(String),
}

/// A side reached through the user-space driver: an emulated controller
/// (`emu:`) or a PCIe one (`pcie:`), with an I/O queue pair of its own.
pub struct DriverTarget {
    name: String,
    /// Keeps the device (and an emulated controller) alive.
    _device: Arc<dyn ZonedDevice>,
    ctrl: Controller,
    qp: QueuePair,
    nsid: u32,
    max_transfer: usize,
}

impl DriverTarget {
    /// The side of `device`, which must be a driver backend device.
    pub fn new(device: Arc<dyn ZonedDevice>, name: &str) -> Result<DriverTarget, TargetError> {
        let any: &dyn Any = device.as_any();
        let Some(d) = any.downcast_ref::<DriverDevice>() else {
            return Err(TargetError::Unsupported(format!(
                "{name}: the FDP mode sends raw commands through the user-space driver (emu:, \
                 pcie:) or the kernel's generic namespace device (ng:); {} is neither",
                device.info().backend
            )));
        };
        let ctrl = d.controller().clone();
        let qp = ctrl.create_queue_pair(8).map_err(|source| TargetError::Driver {
            uri: name.to_string(),
            what: "an I/O queue pair",
            source,
        })?;
        let info = device.info();
        let (nsid, max_transfer) = (info.nsid, info.mdts_bytes);
        Ok(DriverTarget { name: name.to_string(), _device: device, ctrl, qp, nsid, max_transfer })
    }

    fn execute(&mut self, queue: Queue, sqe: &SubmissionEntry, data: &Transfer) -> Reply {
        let mut buf = match data.len() {
            0 => None,
            n => match self.ctrl.alloc_buffer(n) {
                Ok(b) => Some(b),
                Err(e) => return Reply::bare(Outcome::Other(e.to_string())),
            },
        };
        if let Some(b) = buf.as_mut() {
            match data {
                Transfer::ToDevice(v) => b.as_mut_slice()[..v.len()].copy_from_slice(v),
                _ => b.fill(0),
            }
        }
        let r = match queue {
            Queue::Admin => self.ctrl.admin_command(*sqe, buf.as_mut()),
            Queue::Io => self.qp.execute_raw(*sqe, buf.as_mut()),
        };
        match r {
            Ok(c) if c.is_success() => {
                let data = match (data, &buf) {
                    (Transfer::FromDevice(n), Some(b)) => Some(b.as_slice()[..*n].to_vec()),
                    _ => None,
                };
                Reply { outcome: Outcome::Done(c.result), data }
            }
            Ok(c) => Reply::bare(Outcome::Failed(c.status)),
            Err(e) => Reply::bare(Outcome::Other(e.to_string())),
        }
    }
}

impl Target for DriverTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn nsid(&self) -> u32 {
        self.nsid
    }

    fn max_transfer(&self) -> usize {
        self.max_transfer
    }

    fn run(&mut self, queue: Queue, sqe: &SubmissionEntry, data: &Transfer) -> Reply {
        self.execute(queue, sqe, data)
    }
}
