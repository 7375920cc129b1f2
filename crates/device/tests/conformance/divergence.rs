//! Devices known to answer some checks otherwise than the ZNS command set
//! specification says, and exactly how.
//!
//! A check asks here at each point where the specification names an
//! outcome that such a device gives differently. On a device this
//! catalogue lists, the check then expects that device's outcome and only
//! that one: a device that stops diverging, or diverges in another way,
//! fails the check, as any other difference does. Every other device gets
//! the specification's outcome. Each accepted divergence is reported on
//! stderr (`conformance: known divergence ...`). Why each is accepted:
//! docs/nvmf.md ("Linux nvmet") and docs/differential.md (QEMU).

use zns_device::{ReportFilter, StatusCode, ZoneState, ZonedDevice};

/// A known divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Divergence {
    /// `nvmet-zone-errors`: Linux nvmet on a zoned block device completes
    /// the writes, Write Zeroes, Zone Appends and zone opens its block
    /// device refuses with Internal Error, whatever the zone error (its
    /// block-layer-to-NVMe status mapping knows no zone status).
    ZoneErrorsAreInternalErrors,
    /// `nvmet-close-unwritten`: Close of an open zone with nothing
    /// written leaves it Empty (the zoned block device model of null_blk),
    /// where the specification makes it Closed.
    CloseOfUnwrittenZoneEmptiesIt,
    /// `nvmet-report-filter-full-read-only`: Zone Management Receive with
    /// filter 5h (Full) reports the Read Only zones and 6h (Read Only)
    /// the Full ones (Linux's header numbered the two the other way
    /// round). Seen on Linux 6.1; 6.12 reports them as specified, so it
    /// applies to nvmet of kernels before 6.12 (or of a release it cannot
    /// read).
    FullAndReadOnlyFiltersSwapped,
    /// `nvmet-offline`: the Offline Zone action is not offered: with
    /// Select All it fails with Invalid Zone State Transition even when no
    /// zone is Read Only (nothing to do).
    OfflineIsRefused,
    /// `nvmet-write-across-zones`: a write that runs past the end of a
    /// zone whose capacity is its size succeeds and continues in the next
    /// zone (the block layer splits it at the zone boundary, and each part
    /// is a valid write in its zone), where the specification refuses it
    /// with Zone Boundary Error.
    WriteAcrossZoneEndSplits,
    /// `nvmet-lba-range`: a Read or Write past the end of the namespace
    /// completes with Internal Error, not LBA Out of Range (nvmet hands
    /// it to the block layer unchecked, which fails I/O past the device's
    /// end as an I/O error).
    OutOfRangeIsInternalError,
    /// `nvmet-zrwa`: on a namespace without zone random write areas, an
    /// Open with ZRWA Allocate opens the zone as a plain Open (the bit is
    /// not looked at) and Flush Explicit ZRWA Range fails with Invalid
    /// Zone State Transition, where the specification refuses both with
    /// Invalid Zone Operation Request.
    ZrwaBitIgnored,
    /// `qemu-numzrwa`: QEMU's controller puts the number of ZRWA
    /// resources itself in Identify Namespace's NUMZRWA, which the
    /// specification makes 0's based, so read as specified it states one
    /// resource more than it has.
    NumzrwaNotZerosBased,
}

impl Divergence {
    /// Its name in the report and the docs.
    pub const fn name(self) -> &'static str {
        match self {
            Divergence::ZoneErrorsAreInternalErrors => "nvmet-zone-errors",
            Divergence::CloseOfUnwrittenZoneEmptiesIt => "nvmet-close-unwritten",
            Divergence::FullAndReadOnlyFiltersSwapped => "nvmet-report-filter-full-read-only",
            Divergence::OfflineIsRefused => "nvmet-offline",
            Divergence::WriteAcrossZoneEndSplits => "nvmet-write-across-zones",
            Divergence::OutOfRangeIsInternalError => "nvmet-lba-range",
            Divergence::ZrwaBitIgnored => "nvmet-zrwa",
            Divergence::NumzrwaNotZerosBased => "qemu-numzrwa",
        }
    }

    /// True when `dev` diverges this way.
    pub fn applies(self, dev: &dyn ZonedDevice) -> bool {
        match self {
            Divergence::NumzrwaNotZerosBased => is_qemu(dev),
            Divergence::FullAndReadOnlyFiltersSwapped => {
                is_nvmet(dev) && nvmet_release(dev).is_none_or(|r| r < (6, 12))
            }
            _ => is_nvmet(dev),
        }
    }
}

/// QEMU's emulated NVMe controller, by the model number it reports.
pub fn is_qemu(dev: &dyn ZonedDevice) -> bool {
    dev.info().model == "QEMU NVMe Ctrl"
}

/// The ZRWA resources `dev` has, when Identify states `stated`.
pub fn zrwa_resources(dev: &dyn ZonedDevice, stated: u64) -> u64 {
    let d = Divergence::NumzrwaNotZerosBased;
    if diverges(dev, d, &format!("{stated} ZRWA resources stated, {} usable", stated - 1)) {
        stated - 1
    } else {
        stated
    }
}

/// Linux's NVMe target (nvmet), by the model number it reports unless
/// configured otherwise.
pub fn is_nvmet(dev: &dyn ZonedDevice) -> bool {
    dev.info().model == "Linux"
}

/// The kernel release (major, minor) of an nvmet target: its firmware
/// revision is the release it runs (`6.12.117`).
pub fn nvmet_release(dev: &dyn ZonedDevice) -> Option<(u32, u32)> {
    let mut parts = dev.info().firmware.split('.');
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next()?.trim().parse().ok()?;
    Some((major, minor))
}

/// Reports an accepted divergence `d` at `what`.
pub fn note(dev: &dyn ZonedDevice, d: Divergence, what: &str) {
    let i = dev.info();
    eprintln!("conformance: known divergence {} of {} {}: {what}", d.name(), i.model, i.firmware);
}

/// The status a command the zone state refuses with `code` (Zone Invalid
/// Write, Zone Is Full, Zone Boundary Error, Too Many Open or Active
/// Zones) gets from `dev`.
pub fn zone_error(dev: &dyn ZonedDevice, code: StatusCode, what: &str) -> StatusCode {
    let d = Divergence::ZoneErrorsAreInternalErrors;
    if d.applies(dev) {
        note(dev, d, &format!("{what}: Internal Error for {code}"));
        StatusCode::InternalError
    } else {
        code
    }
}

/// The status a Read or Write past the end of the namespace gets from
/// `dev` (the specification's: LBA Out of Range).
pub fn out_of_range(dev: &dyn ZonedDevice, what: &str) -> StatusCode {
    let d = Divergence::OutOfRangeIsInternalError;
    if diverges(dev, d, &format!("{what}: Internal Error for LBA Out of Range")) {
        StatusCode::InternalError
    } else {
        StatusCode::LbaOutOfRange
    }
}

/// The state Close leaves an open zone in that has nothing written.
pub fn closed_unwritten(dev: &dyn ZonedDevice, what: &str) -> ZoneState {
    let d = Divergence::CloseOfUnwrittenZoneEmptiesIt;
    if d.applies(dev) {
        note(dev, d, &format!("{what}: Empty, not Closed"));
        ZoneState::Empty
    } else {
        ZoneState::Closed
    }
}

/// The state of the zones a report filtered by Full or Read Only lists
/// on `dev`.
pub fn listed_by(dev: &dyn ZonedDevice, filter: ReportFilter) -> ZoneState {
    let (own, other) = match filter {
        ReportFilter::Full => (ZoneState::Full, ZoneState::ReadOnly),
        ReportFilter::ReadOnly => (ZoneState::ReadOnly, ZoneState::Full),
        _ => panic!("only the Full and Read Only filters diverge, not {filter:?}"),
    };
    let d = Divergence::FullAndReadOnlyFiltersSwapped;
    if d.applies(dev) {
        note(dev, d, &format!("filter {filter:?} lists {other:?} zones"));
        other
    } else {
        own
    }
}

/// True when `dev` diverges as `d` does (reported with `what`).
pub fn diverges(dev: &dyn ZonedDevice, d: Divergence, what: &str) -> bool {
    let applies = d.applies(dev);
    if applies {
        note(dev, d, what);
    }
    applies
}
