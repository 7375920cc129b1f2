//! Turning a [`ZoneOp`] into an NVMe submission entry, and the checks every
//! backend makes before a command reaches its device: whole blocks, the
//! Zone Append limit, Copy ranges, which way a buffer moves.
//!
//! The driver backend and the io_uring passthrough backend both send the
//! entries built here; the zoned block backend uses the checks only.

use zns_spec::command::{
    CopyCmd, Flush, ReadWrite, WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::copy::{SourceRangeFormat0, MAX_RANGES};
use zns_spec::fdp::{IoManagementReceive, IoManagementSend};
use zns_spec::{SubmissionEntry, ZoneReceiveAction, ZoneSendAction};

use crate::buffer::IoBuffer;
use crate::error::{DeviceError, Result};
use crate::info::DeviceInfo;
use crate::op::{CopyRange, ZoneOp};
use crate::zone::Target;

/// Blocks in a transfer of `len` bytes, which must be a whole, non-zero
/// number of the device's blocks.
pub(crate) fn blocks(info: &DeviceInfo, op: &ZoneOp, len: usize) -> Result<u32> {
    let bs = info.block_size as usize;
    if len == 0 || !len.is_multiple_of(bs) {
        return Err(DeviceError::InvalidArgument(format!(
            "{}: {len} bytes is not a whole, non-zero number of {bs}-byte blocks",
            op.kind()
        )));
    }
    u32::try_from(len / bs)
        .map_err(|_| DeviceError::InvalidArgument(format!("{}: {len} bytes", op.kind())))
}

/// Checks the metadata attached to `buf` for `op`: only Read, Write and
/// Zone Append carry it, only on a device that supports it, and it must
/// hold exactly `blocks × metadata size` bytes. A buffer without metadata
/// passes.
pub(crate) fn check_metadata(info: &DeviceInfo, op: &ZoneOp, buf: &IoBuffer) -> Result<()> {
    let Some(meta) = buf.metadata() else { return Ok(()) };
    if !matches!(op, ZoneOp::Read { .. } | ZoneOp::Write { .. } | ZoneOp::Append { .. }) {
        return Err(DeviceError::InvalidArgument(format!(
            "{}: only reads, writes and zone appends carry per-LBA metadata",
            op.kind()
        )));
    }
    if !info.capabilities.metadata {
        return Err(DeviceError::Unsupported(if info.metadata_size == 0 {
            "per-LBA metadata: the namespace's LBA format has none".to_string()
        } else {
            "per-LBA metadata in a separate buffer on this backend".to_string()
        }));
    }
    let want = blocks(info, op, buf.len())? as usize * info.metadata_size as usize;
    if meta.len() != want {
        return Err(DeviceError::InvalidArgument(format!(
            "{}: {} bytes of metadata for {} bytes of data; expected {want} ({} per block)",
            op.kind(),
            meta.len(),
            buf.len(),
            info.metadata_size
        )));
    }
    Ok(())
}

/// [`check_metadata`] for the buffer of a blocking command, if it has one.
pub(crate) fn check_data_metadata(
    info: &DeviceInfo,
    op: &ZoneOp,
    data: &crate::device::Data<'_>,
) -> Result<()> {
    match data {
        crate::device::Data::ToDevice(b) => check_metadata(info, op, b),
        crate::device::Data::FromDevice(b) => check_metadata(info, op, b),
        crate::device::Data::None => Ok(()),
    }
}

/// Refuses a Zone Append larger than the device's limit (ZASL).
pub(crate) fn check_append_len(info: &DeviceInfo, len: usize) -> Result<()> {
    if len > info.zasl_bytes {
        return Err(DeviceError::InvalidArgument(format!(
            "zone append of {len} bytes exceeds the device's limit (ZASL) of {} bytes",
            info.zasl_bytes
        )));
    }
    Ok(())
}

/// The entry of Get Log Page `page` and the bytes it returns, refused
/// when they are more than one command of `mdts` bytes moves.
pub(crate) fn log_page_entry(
    page: &zns_spec::command::GetLogPage,
    mdts: usize,
) -> Result<(SubmissionEntry, usize)> {
    let len = page.length_bytes();
    if len > mdts {
        return Err(DeviceError::InvalidArgument(format!(
            "log page of {len} bytes: more than one command moves ({mdts})"
        )));
    }
    let sqe = page.to_entry().map_err(|e| DeviceError::InvalidArgument(e.to_string()))?;
    Ok((sqe, len))
}

/// Refuses a zone report buffer the command cannot describe.
pub(crate) fn check_report_len(len: usize) -> Result<()> {
    if len < 64 || !len.is_multiple_of(4) {
        return Err(DeviceError::InvalidArgument(format!(
            "zone report buffer of {len} bytes (whole dwords, at least 64)"
        )));
    }
    Ok(())
}

/// The submission entry of `op` moving `len` bytes on the device `info`
/// describes (namespace `info.nsid`). Data pointers are left zero. Placed
/// writes and the reclaim unit handle commands are refused here on a
/// namespace without Flexible Data Placement enabled.
pub(crate) fn entry(info: &DeviceInfo, op: &ZoneOp, len: usize) -> Result<SubmissionEntry> {
    crate::fdp::check(info, op)?;
    let nsid = info.nsid;
    let built = |r: std::result::Result<SubmissionEntry, zns_spec::command::CommandError>| {
        r.map_err(|e| DeviceError::InvalidArgument(format!("{}: {e}", op.kind())))
    };
    match op {
        ZoneOp::Read { lba } => built(ReadWrite::new(nsid, *lba, blocks(info, op, len)?).read()),
        ZoneOp::Write { lba, fua, placement } => {
            let mut rw = ReadWrite::new(nsid, *lba, blocks(info, op, len)?).with_fua(*fua);
            if let Some(pid) = placement {
                rw = rw.with_placement(*pid);
            }
            built(rw.write())
        }
        ZoneOp::Append { zslba, fua } => {
            check_append_len(info, len)?;
            let mut a = ZoneAppend::new(nsid, *zslba, blocks(info, op, len)?);
            a.fua = *fua;
            built(a.to_entry())
        }
        ZoneOp::WriteZeroes { lba, blocks } => {
            built(WriteZeroes::new(nsid, *lba, *blocks).to_entry())
        }
        ZoneOp::Flush => Ok(Flush { nsid }.to_entry()),
        ZoneOp::Zone { action, target: Target::Zone(slba) } => {
            Ok(ZoneSend::new(nsid, *slba, action.send_action()).to_entry())
        }
        ZoneOp::Zone { action, target: Target::All } => {
            Ok(ZoneSend::all(nsid, action.send_action()).to_entry())
        }
        ZoneOp::SetZoneExtension { zslba } => {
            Ok(ZoneSend::new(nsid, *zslba, ZoneSendAction::SetDescriptorExtension).to_entry())
        }
        ZoneOp::OpenZrwa { zslba } => Ok(ZoneSend::open_zrwa(nsid, *zslba).to_entry()),
        ZoneOp::CommitZrwa { lba } => Ok(ZoneSend::flush_zrwa(nsid, *lba).to_entry()),
        ZoneOp::ReportZones { slba, filter, partial, extended } => {
            check_report_len(len)?;
            let mut r = ZoneReceive::report(nsid, *slba, len as u64, *filter);
            r.partial = *partial;
            if *extended {
                r.action = ZoneReceiveAction::ExtendedReport;
            }
            built(r.to_entry())
        }
        ZoneOp::Copy { ranges, dest } => {
            check_ranges(ranges)?;
            built(CopyCmd::new(nsid, *dest, ranges.len() as u16).to_entry())
        }
        ZoneOp::RuhStatus => {
            crate::fdp::check_status_len(len)?;
            built(IoManagementReceive::ruh_status(nsid, (len / 4) as u64).to_entry())
        }
        ZoneOp::RuhUpdate { pids } => {
            crate::fdp::check_pids(pids)?;
            built(IoManagementSend::ruh_update(nsid, pids.len() as u32).map(|c| c.to_entry()))
        }
    }
}

/// The data of a command whose data the queue builds itself: a Copy's
/// source range list, a Reclaim Unit Handle Update's placement
/// identifiers; `None` for other commands.
pub(crate) fn own_data(op: &ZoneOp) -> Option<Result<Vec<u8>>> {
    match op {
        ZoneOp::Copy { ranges, .. } => Some(copy_list(ranges)),
        ZoneOp::RuhUpdate { pids } => {
            Some(crate::fdp::check_pids(pids).map(|()| zns_spec::fdp::placement_id_list(pids)))
        }
        _ => None,
    }
}

/// Refuses an empty or oversized list of Copy ranges, and ranges of 0 or
/// more than 65536 blocks.
pub(crate) fn check_ranges(ranges: &[CopyRange]) -> Result<()> {
    if ranges.is_empty() || ranges.len() > MAX_RANGES {
        return Err(DeviceError::InvalidArgument(format!(
            "{} copy source ranges (1..={MAX_RANGES})",
            ranges.len()
        )));
    }
    if let Some(r) =
        ranges.iter().find(|r| r.blocks == 0 || r.blocks > SourceRangeFormat0::MAX_BLOCKS)
    {
        return Err(DeviceError::InvalidArgument(format!(
            "copy source range of {} blocks at LBA {} (1..=65536)",
            r.blocks, r.slba
        )));
    }
    Ok(())
}

/// The ranges as format 0 source range descriptors.
pub(crate) fn format0(ranges: &[CopyRange]) -> Vec<SourceRangeFormat0> {
    ranges.iter().map(|r| SourceRangeFormat0::new(r.slba, r.blocks)).collect()
}

/// The Copy command's data: its format 0 source range list.
pub(crate) fn copy_list(ranges: &[CopyRange]) -> Result<Vec<u8>> {
    check_ranges(ranges)?;
    SourceRangeFormat0::encode_list(&format0(ranges))
        .map_err(|e| DeviceError::InvalidArgument(e.to_string()))
}

/// What a blocking command moves, checked against the command: the
/// caller's buffer, or bytes of the queue's own (a Set Zone Descriptor
/// Extension's data padded to the extension size, a Copy's range list, a
/// Reclaim Unit Handle Update's placement identifiers).
pub(crate) enum Transfer<'a> {
    /// No data.
    None,
    /// Data to the device.
    ToDevice(std::borrow::Cow<'a, [u8]>),
    /// Data from the device.
    FromDevice(&'a mut [u8]),
}

/// The data a blocking `op` moves with `data`, and the transfer length
/// its submission entry takes (0 for Copy and Reclaim Unit Handle Update,
/// whose data are not blocks).
pub(crate) fn transfer<'a>(
    info: &DeviceInfo,
    op: &ZoneOp,
    data: crate::device::Data<'a>,
) -> Result<(Transfer<'a>, usize)> {
    use crate::device::Data;
    Ok(match (op, data) {
        (ZoneOp::SetZoneExtension { .. }, Data::ToDevice(buf)) => {
            let ext = info.capabilities.extension_bytes;
            if ext == 0 || buf.len() > ext {
                return Err(DeviceError::InvalidArgument(format!(
                    "{} bytes of zone extension data; the device takes {ext}",
                    buf.len()
                )));
            }
            let mut padded = vec![0u8; ext];
            padded[..buf.len()].copy_from_slice(buf);
            (Transfer::ToDevice(padded.into()), ext)
        }
        (op @ (ZoneOp::Copy { .. } | ZoneOp::RuhUpdate { .. }), Data::None) => {
            let bytes = own_data(op).expect("a command with data of its own")?;
            (Transfer::ToDevice(bytes.into()), 0)
        }
        (op, Data::None) if op.data_to_device().is_none() => (Transfer::None, 0),
        (op, Data::ToDevice(buf)) if op.data_to_device() == Some(true) => {
            (Transfer::ToDevice(buf.as_slice().into()), buf.len())
        }
        (op, Data::FromDevice(buf)) if op.data_to_device() == Some(false) => {
            let len = buf.len();
            (Transfer::FromDevice(buf.as_mut_slice()), len)
        }
        (op, Data::None) => return Err(no_buffer(op)),
        (op, _) if op.data_to_device().is_none() => return Err(stray_buffer(op)),
        (op, _) => return Err(wrong_way(op)),
    })
}

/// The error for a command that needs a buffer and got none.
pub(crate) fn no_buffer(op: &ZoneOp) -> DeviceError {
    DeviceError::InvalidArgument(format!("{} needs a buffer", op.kind()))
}

/// The error for a buffer given to a command that moves no data.
pub(crate) fn stray_buffer(op: &ZoneOp) -> DeviceError {
    DeviceError::InvalidArgument(format!("{} takes no buffer", op.kind()))
}

/// The error for a buffer that moves the wrong way.
pub(crate) fn wrong_way(op: &ZoneOp) -> DeviceError {
    DeviceError::InvalidArgument(format!("{}: the buffer moves the wrong way", op.kind()))
}

/// Pads the data of a Set Zone Descriptor Extension to the extension size
/// (the device takes exactly that many bytes).
pub(crate) fn pad_extension(info: &DeviceInfo, buf: &mut IoBuffer) -> Result<()> {
    let ext = info.capabilities.extension_bytes;
    let len = buf.len();
    if ext == 0 || len > ext || buf.capacity() < ext {
        return Err(DeviceError::InvalidArgument(format!(
            "{len} bytes of zone extension data; the device takes {ext}"
        )));
    }
    buf.set_len(ext)?;
    buf[len..].fill(0);
    Ok(())
}
