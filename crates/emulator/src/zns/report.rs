//! Zone Management Receive: Report Zones and Extended Report Zones.

use zns_spec::{ReportFilter, ReportHeader, StatusCode, ZoneDescriptor};

use super::Zones;

impl Zones {
    /// Fills `out`, the data buffer of a Zone Management Receive command.
    ///
    /// Layout: a 64-byte [`ReportHeader`], then one entry per matching zone
    /// from the zone containing `slba` on, in zone order, as many whole
    /// entries as fit. An entry is a 64-byte [`ZoneDescriptor`], followed in
    /// an `extended` report by the zone's ZDES × 64-byte extension (zeros
    /// unless ZDEV is set). The header counts every matching zone from
    /// `slba` to the end of the namespace, or with `partial` only the
    /// entries actually returned. The rest of `out` is zeroed; a buffer
    /// shorter than the header receives the header's first bytes.
    ///
    /// Errors: LBA Out of Range when `slba` is past the namespace; Invalid
    /// Field in Command for an extended report without descriptor extension
    /// support.
    ///
    /// Each zone is read under its own lock once, so the header and the
    /// entries describe the same snapshot of every zone.
    ///
    /// QEMU rejects a buffer shorter than the header with Invalid Field in
    /// Command; the caller can do the same before calling this.
    pub fn report(
        &self,
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        extended: bool,
        out: &mut [u8],
    ) -> Result<(), StatusCode> {
        let g = &self.geometry;
        self.check_range(slba, 1)?;
        if extended && g.descriptor_extension_bytes == 0 {
            return Err(StatusCode::InvalidField);
        }
        out.fill(0);
        let entry = ZoneDescriptor::SIZE + if extended { g.descriptor_extension_bytes } else { 0 };
        let room = out.len().saturating_sub(ReportHeader::SIZE) / entry;
        let first = (slba / g.zone_size) as u32;

        let (mut matched, mut returned) = (0u64, 0usize);
        for index in first..g.zones {
            if partial && returned == room {
                break;
            }
            let z = self.lock(index);
            if !filter.matches(z.state, z.attrs) {
                continue;
            }
            matched += 1;
            if returned < room {
                let at = ReportHeader::SIZE + returned * entry;
                out[at..at + ZoneDescriptor::SIZE]
                    .copy_from_slice(&z.descriptor(g.zone_capacity).to_bytes());
                if extended && z.has_extension() {
                    let e = at + ZoneDescriptor::SIZE;
                    out[e..e + z.ext.len()].copy_from_slice(&z.ext);
                }
                returned += 1;
            }
        }
        let zones = if partial { returned as u64 } else { matched };
        let header = ReportHeader { zones }.to_bytes();
        let n = out.len().min(ReportHeader::SIZE);
        out[..n].copy_from_slice(&header[..n]);
        Ok(())
    }
}
