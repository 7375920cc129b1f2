//! The `ng:` backend's admin side beyond Identify: Get Log Page and
//! Get/Set Features through the admin passthrough ioctl (for
//! [`crate::ZonedDevice::log_page`] and friends, and FDP discovery), and
//! the description of an NVM command set namespace, which `ng:` opens as
//! a device without zones (a conventional drive, or an FDP one).

use std::fs::File;
use std::os::fd::AsFd;

use zns_spec::command::GetLogPage;
use zns_spec::identify::{IdentifyController, IdentifyNamespace};
use zns_spec::{AdminOpcode, SubmissionEntry};

use super::{os_error, status_error, sys};
use crate::error::{OpKind, Result};
use crate::info::{DeviceInfo, NvmIdentity};

/// Runs admin command `sqe` of kind `op` with `data` as its buffer;
/// returns completion DW0. An NVMe status is [`DeviceError::Nvme`].
pub(crate) fn run(
    file: &File,
    op: OpKind,
    sqe: &SubmissionEntry,
    data: Option<&mut [u8]>,
) -> Result<u32> {
    let r = sys::nvme_passthru(file.as_fd(), true, sqe, data)
        .map_err(|e| os_error(op, None, e.raw_os_error().unwrap_or(libc::EIO)))?;
    match r.status {
        0 => Ok(r.result),
        s => Err(status_error(op, None, s)),
    }
}

/// Get Log Page `page` (at most `mdts` bytes).
pub(crate) fn log_page(file: &File, page: GetLogPage, mdts: usize) -> Result<Vec<u8>> {
    let (sqe, len) = crate::command::log_page_entry(&page, mdts)?;
    let mut out = vec![0u8; len];
    run(file, OpKind::GetLogPage, &sqe, Some(&mut out))?;
    Ok(out)
}

/// Get or Set Features `entry`, its data (if any) in `data`.
pub(crate) fn features(
    file: &File,
    entry: &SubmissionEntry,
    data: Option<&mut [u8]>,
) -> Result<u32> {
    let op = match entry.opcode() {
        o if o == AdminOpcode::SetFeatures as u8 => OpKind::SetFeatures,
        _ => OpKind::GetFeatures,
    };
    run(file, op, entry, data)
}

/// The description of NVM command set namespace `nsid` (`ng:` at
/// `transport`), with `mdts` bytes per command: no zones, no Zone
/// Append, its FDP configuration if its endurance group has one.
pub(crate) fn nvm_info(
    file: &File,
    uri: &str,
    transport: String,
    nsid: u32,
    (ic, id): (&IdentifyController, &IdentifyNamespace),
    block_size: u32,
    mdts: usize,
) -> DeviceInfo {
    let fdp = crate::fdp::discover(
        uri,
        ic.ctratt,
        id.endgid,
        |e| run(file, OpKind::GetFeatures, &e, None),
        |p| log_page(file, p, mdts),
    );
    let n = NvmIdentity { ic, id, zns_controller: Default::default(), nsid, block_size };
    DeviceInfo { fdp, ..DeviceInfo::nvm_namespace("ng", transport, uri, n, mdts) }
}
