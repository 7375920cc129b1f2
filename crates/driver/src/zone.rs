//! Zone management: Zone Management Send (every action, one zone or all)
//! and Zone Management Receive (reports and extended reports with filters
//! and partial reporting), plus a report walker that lists every zone in
//! as many commands as the buffer requires. The driver only builds and
//! decodes these commands; zone policy lives above it.

use zns_spec::command::{ZoneReceive, ZoneSend};
use zns_spec::{ReportFilter, ReportHeader, ZoneDescriptor, ZoneReceiveAction, ZoneSendAction};

use crate::admin::built;
use crate::dma::DmaBuffer;
use crate::error::{Error, Result};
use crate::namespace::Namespace;
use crate::queue::QueuePair;

/// What a Zone Management Receive asks for.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportRequest {
    /// Lowest LBA whose zone is considered.
    pub slba: u64,
    /// Which zones to list.
    pub filter: ReportFilter,
    /// Partial Report: the header counts only the descriptors returned.
    pub partial: bool,
    /// Extended report: each descriptor followed by its extension.
    pub extended: bool,
}

impl ReportRequest {
    /// Every zone from `slba` on, full (non-partial) count, no extensions.
    pub fn from(slba: u64) -> Self {
        ReportRequest { slba, filter: ReportFilter::All, partial: false, extended: false }
    }
}

/// A decoded zone report.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ZoneReport {
    /// The header's zone count (all matching zones from the start LBA, or
    /// with Partial Report the descriptors returned).
    pub zones: u64,
    /// The descriptors that fit in the buffer.
    pub descriptors: Vec<ZoneDescriptor>,
    /// Extended reports: each descriptor's extension bytes.
    pub extensions: Vec<Vec<u8>>,
}

/// Decodes a report image: header, then descriptors of 64 bytes each
/// followed by `extension_bytes` bytes in an extended report.
pub fn parse_report(bytes: &[u8], extension_bytes: Option<usize>) -> Result<ZoneReport> {
    let header: &[u8; ReportHeader::SIZE] = bytes
        .get(..ReportHeader::SIZE)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Error::Malformed("zone report shorter than its header".into()))?;
    let zones = ReportHeader::from_bytes(header).zones;
    let stride = ZoneDescriptor::SIZE + extension_bytes.unwrap_or(0);
    let room = (bytes.len() - ReportHeader::SIZE) / stride;
    let n = usize::try_from(zones).unwrap_or(usize::MAX).min(room);
    let mut report = ZoneReport { zones, ..Default::default() };
    for i in 0..n {
        let at = ReportHeader::SIZE + i * stride;
        let d: &[u8; ZoneDescriptor::SIZE] =
            bytes[at..at + ZoneDescriptor::SIZE].try_into().expect("64-byte descriptor");
        let desc = ZoneDescriptor::from_bytes(d)
            .map_err(|e| Error::Malformed(format!("zone descriptor {i}: {e}")))?;
        report.descriptors.push(desc);
        if extension_bytes.is_some() {
            report.extensions.push(bytes[at + ZoneDescriptor::SIZE..at + stride].to_vec());
        }
    }
    Ok(report)
}

impl QueuePair {
    /// Zone Management Send `action` on the zone starting at `slba`.
    pub fn zone_send(&mut self, ns: &Namespace, slba: u64, action: ZoneSendAction) -> Result<()> {
        self.execute(ZoneSend::new(ns.nsid, slba, action).to_entry(), None).map(drop)
    }

    /// Zone Management Send `action` with Select All.
    pub fn zone_send_all(&mut self, ns: &Namespace, action: ZoneSendAction) -> Result<()> {
        self.execute(ZoneSend::all(ns.nsid, action).to_entry(), None).map(drop)
    }

    /// Opens the zone at `slba` explicitly.
    pub fn open_zone(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.zone_send(ns, slba, ZoneSendAction::Open)
    }

    /// Opens the zone at `slba` and allocates a zone random write area.
    pub fn open_zone_zrwa(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.execute(ZoneSend::open_zrwa(ns.nsid, slba).to_entry(), None).map(drop)
    }

    /// Closes the zone at `slba`.
    pub fn close_zone(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.zone_send(ns, slba, ZoneSendAction::Close)
    }

    /// Finishes the zone at `slba`.
    pub fn finish_zone(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.zone_send(ns, slba, ZoneSendAction::Finish)
    }

    /// Resets the zone at `slba`.
    pub fn reset_zone(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.zone_send(ns, slba, ZoneSendAction::Reset)
    }

    /// Takes the zone at `slba` offline.
    pub fn offline_zone(&mut self, ns: &Namespace, slba: u64) -> Result<()> {
        self.zone_send(ns, slba, ZoneSendAction::Offline)
    }

    /// Flush Explicit ZRWA Range: commits the zone random write area of the
    /// zone holding `lba` from its write pointer up to and including `lba`.
    pub fn flush_zrwa(&mut self, ns: &Namespace, lba: u64) -> Result<()> {
        self.execute(ZoneSend::flush_zrwa(ns.nsid, lba).to_entry(), None).map(drop)
    }

    /// Sets the descriptor extension of the (empty) zone at `slba` to
    /// `data`, zero-padded to the namespace's extension size.
    pub fn set_zone_extension(&mut self, ns: &Namespace, slba: u64, data: &[u8]) -> Result<()> {
        let ext = ns.zoned.as_ref().map_or(0, |z| z.extension_bytes);
        if ext == 0 || data.len() > ext {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of zone extension data; the namespace takes {ext}",
                data.len()
            )));
        }
        let cmd = ZoneSend::new(ns.nsid, slba, ZoneSendAction::SetDescriptorExtension).to_entry();
        let mut scratch = self.take_scratch()?;
        let r = match scratch.set_len(ext) {
            Ok(()) => {
                let bytes = scratch.as_mut_slice();
                bytes[..data.len()].copy_from_slice(data);
                bytes[data.len()..].fill(0);
                self.execute_slice(cmd, Some(scratch.dma()))
            }
            Err(e) => Err(e),
        };
        self.put_scratch(scratch);
        r?.check().map(drop)
    }

    /// Zone Management Receive into `buf` (its whole length, whole dwords),
    /// decoded.
    pub fn zone_receive(
        &mut self,
        ns: &Namespace,
        req: ReportRequest,
        buf: &mut DmaBuffer,
    ) -> Result<ZoneReport> {
        let ext = ns.zoned.as_ref().map_or(0, |z| z.extension_bytes);
        let len = buf.len() / 4 * 4;
        if len < ReportHeader::SIZE {
            return Err(Error::InvalidArgument(format!("report buffer of {} bytes", buf.len())));
        }
        let mut cmd = ZoneReceive::report(ns.nsid, req.slba, len as u64, req.filter);
        cmd.partial = req.partial;
        if req.extended {
            cmd.action = ZoneReceiveAction::ExtendedReport;
        }
        let full = buf.len();
        buf.set_len(len)?;
        let r = self.execute(built(cmd.to_entry())?, Some(buf));
        let parsed = r.and_then(|_| parse_report(buf.as_slice(), req.extended.then_some(ext)));
        buf.set_len(full)?;
        parsed
    }

    /// Every zone matching `filter`, walking the namespace with partial
    /// reports in as many commands as `buf` (at least 128 bytes) needs.
    pub fn report_all_zones(
        &mut self,
        ns: &Namespace,
        filter: ReportFilter,
        buf: &mut DmaBuffer,
    ) -> Result<Vec<ZoneDescriptor>> {
        let zone_size =
            ns.zoned.as_ref().map(|z| z.zone_size).ok_or_else(|| {
                Error::InvalidArgument(format!("namespace {} is not zoned", ns.nsid))
            })?;
        if buf.len() < ReportHeader::SIZE + ZoneDescriptor::SIZE {
            return Err(Error::InvalidArgument(format!(
                "report buffer of {} bytes holds no descriptor",
                buf.len()
            )));
        }
        let mut out = Vec::new();
        let mut slba = 0;
        while slba < ns.blocks {
            let req = ReportRequest { slba, filter, partial: true, extended: false };
            let report = self.zone_receive(ns, req, buf)?;
            let Some(last) = report.descriptors.last() else { break };
            if last.start < slba {
                return Err(Error::Malformed(format!(
                    "zone report from LBA {slba} went back to zone {}",
                    last.start
                )));
            }
            slba = last.start + zone_size;
            out.extend(report.descriptors);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_spec::{ZoneAttributes, ZoneState, ZoneType};

    fn desc(start: u64, state: ZoneState) -> ZoneDescriptor {
        ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state,
            attrs: ZoneAttributes(0),
            attrs_info: 0,
            capacity: 100,
            start,
            write_pointer: start + 3,
        }
    }

    #[test]
    fn parses_plain_and_extended_reports() {
        let mut b = vec![0u8; 64 + 3 * 64];
        b[..64].copy_from_slice(&ReportHeader { zones: 5 }.to_bytes());
        for i in 0..3 {
            b[64 + i * 64..128 + i * 64]
                .copy_from_slice(&desc(i as u64 * 128, ZoneState::Empty).to_bytes());
        }
        let r = parse_report(&b, None).unwrap();
        assert_eq!(r.zones, 5);
        assert_eq!(r.descriptors.len(), 3, "only what fits");
        assert_eq!(r.descriptors[2].start, 256);

        let mut e = vec![0u8; 64 + 2 * 128];
        e[..64].copy_from_slice(&ReportHeader { zones: 1 }.to_bytes());
        e[64..128].copy_from_slice(&desc(0, ZoneState::Closed).to_bytes());
        e[128..192].fill(0xEE);
        let r = parse_report(&e, Some(64)).unwrap();
        assert_eq!(r.descriptors.len(), 1);
        assert_eq!(r.extensions, vec![vec![0xEE; 64]]);

        assert!(parse_report(&b[..10], None).is_err());
        let mut bad = b.clone();
        bad[64 + 1] = 0x50; // reserved state
        assert!(parse_report(&bad, None).is_err());
    }
}
