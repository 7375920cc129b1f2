//! Differences between the peer and the reference that are understood:
//! each one names the rule it follows and matches exactly the commands
//! and outcomes it explains; docs/differential.md gives the reasoning.

use zns_device::{ReportFilter, StatusCode, Target, ZoneAction, ZoneOp, ZoneState};

use crate::compare::{counts, differing_zones, fill, Observed, Outcome, Snapshot};
use crate::generate::{Cmd, Geometry};

/// A known, documented difference.
#[derive(Debug)]
pub struct Divergence {
    /// Short identifier, as in docs/differential.md.
    pub id: &'static str,
    /// What differs, in one line.
    pub title: &'static str,
}

/// Everything a matcher may look at.
#[derive(Debug)]
pub struct Case<'a> {
    /// The pair's geometry.
    pub g: &'a Geometry,
    /// The command.
    pub cmd: &'a Cmd,
    /// The zones before it (the same on both).
    pub before: &'a Snapshot,
    /// What the peer did.
    pub peer: &'a Observed,
    /// The peer's zones after it.
    pub peer_after: &'a Snapshot,
    /// What the reference did.
    pub ours: &'a Observed,
    /// The reference's zones after it.
    pub ours_after: &'a Snapshot,
}

impl Case<'_> {
    fn peer_is(&self, code: StatusCode) -> bool {
        self.peer.outcome.status().is_some_and(|s| s.is(code))
    }

    fn ours_is(&self, code: StatusCode) -> bool {
        self.ours.outcome.status().is_some_and(|s| s.is(code))
    }

    /// Neither device changed any zone.
    fn unchanged(&self) -> bool {
        self.peer_after == self.before && self.ours_after == self.before
    }

    /// The zone holding `lba`, before the command.
    fn zone_before(&self, lba: u64) -> Option<&zns_device::Zone> {
        self.before.zones.get(usize::try_from(lba / self.g.zone_size).ok()?)
    }
}

/// The catalogue, in the order of docs/differential.md.
pub const DIVERGENCES: &[Divergence] = &[
    Divergence {
        id: "check-order",
        title: "a write that crosses the end of its zone and breaks another rule: the peer \
                reports the other rule, the reference Zone Boundary Error",
    },
    Divergence {
        id: "close-before-resource-check",
        title: "an open (implicit or explicit) of an Empty zone without active resources: \
                the peer closes an implicitly opened zone before it fails",
    },
    Divergence {
        id: "open-all-one-by-one",
        title: "Open with Select All that does not fit the free open resources: the peer \
                opens Closed zones one by one, closing (then opening) implicitly opened ones \
                to make room, and stops at the first that does not fit",
    },
    Divergence {
        id: "failed-extension-write",
        title: "a Set Zone Descriptor Extension that fails: the peer has already stored the \
                new extension data",
    },
    Divergence {
        id: "zrwa-close-before-resource-check",
        title: "an Open with ZRWA Allocate of an Empty or Closed zone that fails for want of \
                an active or a ZRWA resource: the peer closes an implicitly opened zone first",
    },
    Divergence {
        id: "zrwa-open-full-zone",
        title: "an Open with ZRWA Allocate of a Full zone: the peer may check its write \
                pointer's alignment first (ZRWA Resources Unavailable), the reference refuses \
                the zone's state (Invalid Zone State Transition)",
    },
    Divergence {
        id: "zrwa-commit-one-past",
        title: "Flush Explicit ZRWA Range whose last LBA is one past the window: the peer \
                checks the commit unit (Invalid Field in Command), the reference the window \
                (Zone Boundary Error)",
    },
    Divergence {
        id: "zrwa-append-check-order",
        title: "a Zone Append to a zone with a ZRWA that also breaks an append rule: the peer \
                reports Invalid Zone Operation Request, the reference the other rule",
    },
    Divergence {
        id: "report-filter-9h",
        title: "Zone Management Receive with Reporting Options 9h (zones with Reset Zone \
                Recommended): the peer answers Invalid Field in Command",
    },
];

fn find(id: &str) -> &'static Divergence {
    DIVERGENCES.iter().find(|d| d.id == id).expect("a catalogued divergence")
}

/// Zone actions that bring the reference to the peer's zone states after
/// divergence `id`, where plain zone actions can: closes of the zones the
/// peer closed, then opens of the zones it opened (implicitly opened ones
/// first, which need no resource). `None` where they cannot (a descriptor
/// extension can only be set on an Empty zone).
pub fn repair(id: &str, c: &Case<'_>) -> Option<Vec<Cmd>> {
    if !matches!(
        id,
        "close-before-resource-check" | "open-all-one-by-one" | "zrwa-close-before-resource-check"
    ) {
        return None;
    }
    let action = |action, z: &zns_device::Zone| Cmd {
        op: ZoneOp::Zone { action, target: Target::Zone(z.start) },
        bytes: 0,
        fill: 0,
    };
    let mut first = Vec::new();
    let mut closes = Vec::new();
    let mut opens = Vec::new();
    for i in differing_zones(c.ours_after, c.peer_after) {
        let (ours, peer) = (c.ours_after.zones.get(i)?, c.peer_after.zones.get(i)?);
        match (ours.state, peer.state) {
            (ZoneState::ImplicitlyOpen, ZoneState::ExplicitlyOpen) => {
                first.push(action(ZoneAction::Open, ours))
            }
            (ZoneState::ImplicitlyOpen, ZoneState::Closed) => {
                closes.push(action(ZoneAction::Close, ours))
            }
            (ZoneState::Closed, ZoneState::ExplicitlyOpen) => {
                opens.push(action(ZoneAction::Open, ours))
            }
            _ => return None,
        }
    }
    first.extend(closes);
    first.extend(opens);
    Some(first)
}

/// A test of whether a case shows one divergence.
type Matcher = fn(&Case<'_>) -> bool;

/// The known divergence `c` shows, if any.
pub fn explain(c: &Case<'_>) -> Option<&'static Divergence> {
    let matchers: [(&str, Matcher); 9] = [
        ("check-order", check_order),
        ("close-before-resource-check", close_before_resource_check),
        ("open-all-one-by-one", open_all_one_by_one),
        ("failed-extension-write", failed_extension_write),
        ("zrwa-close-before-resource-check", zrwa_close_before_resource_check),
        ("zrwa-open-full-zone", zrwa_open_full_zone),
        ("zrwa-commit-one-past", zrwa_commit_one_past),
        ("zrwa-append-check-order", zrwa_append_check_order),
        ("report-filter-9h", report_filter_9h),
    ];
    matchers.iter().find(|(_, m)| m(c)).map(|(id, _)| find(id))
}

/// Blocks a write-like command moves, and its first LBA.
fn extent(c: &Case<'_>) -> Option<(u64, u64)> {
    let bs = c.g.block_size as u64;
    match &c.cmd.op {
        ZoneOp::Write { lba, .. } => Some((*lba, c.cmd.bytes as u64 / bs)),
        ZoneOp::WriteZeroes { lba, blocks } => Some((*lba, *blocks as u64)),
        _ => None,
    }
}

/// A write (or Write Zeroes) inside the namespace that runs past the end
/// of its zone and also breaks a rule checked on the zone: the peer checks
/// the zone's state, then the write pointer, then the capacity; the
/// reference checks the zone boundary first (docs/zns-spec.md, choice 3).
/// Neither changes anything.
fn check_order(c: &Case<'_>) -> bool {
    let Some((lba, blocks)) = extent(c) else { return false };
    let Some(z) = c.zone_before(lba) else { return false };
    let crosses = lba + blocks > z.start + c.g.zone_size && lba + blocks <= c.g.blocks;
    if !crosses || !c.ours_is(StatusCode::ZoneBoundaryError) || !c.unchanged() {
        return false;
    }
    let expected = match z.state {
        ZoneState::Full => StatusCode::ZoneIsFull,
        ZoneState::ReadOnly => StatusCode::ZoneIsReadOnly,
        ZoneState::Offline => StatusCode::ZoneIsOffline,
        _ if z.write_pointer != Some(lba) => StatusCode::ZoneInvalidWrite,
        _ => return false,
    };
    c.peer_is(expected)
}

/// The zone a command would open (implicitly or explicitly), if any.
fn opened_zone<'a>(c: &'a Case<'a>) -> Option<&'a zns_device::Zone> {
    match &c.cmd.op {
        ZoneOp::Write { lba, .. } | ZoneOp::WriteZeroes { lba, .. } => c.zone_before(*lba),
        ZoneOp::Append { zslba, .. }
        | ZoneOp::Zone { action: ZoneAction::Open, target: Target::Zone(zslba) } => {
            c.zone_before(*zslba).filter(|z| z.start == *zslba)
        }
        _ => None,
    }
}

/// An implicit or explicit open of an Empty zone while every open and
/// every active resource is taken: both fail with Too Many Active Zones,
/// but the peer first closes an implicitly opened zone to free an open
/// resource (QEMU's automatic transition runs before its resource check).
/// The reference closes nothing for a command that fails (docs/zns-spec.md,
/// choice 7). The only difference: one zone Implicitly Opened before is
/// Closed on the peer, with the same write pointer and attributes.
fn close_before_resource_check(c: &Case<'_>) -> bool {
    let Some(z) = opened_zone(c) else { return false };
    let (open, active) = counts(&c.before.zones);
    let limits_reached = c.g.max_open.is_some_and(|m| open as u64 >= m as u64)
        && c.g.max_active.is_some_and(|m| active as u64 >= m as u64);
    if z.state != ZoneState::Empty
        || !limits_reached
        || !c.peer_is(StatusCode::TooManyActiveZones)
        || !c.ours_is(StatusCode::TooManyActiveZones)
        || c.ours_after != c.before
    {
        return false;
    }
    let changed = differing_zones(c.before, c.peer_after);
    changed.len() == 1 && auto_closed(c, changed[0])
}

/// Zone `i` went from Implicitly Opened (before) to Closed (on the peer),
/// keeping its write pointer, capacity, attributes and extension.
fn auto_closed(c: &Case<'_>, i: usize) -> bool {
    let (Some(b), Some(a)) = (c.before.zones.get(i), c.peer_after.zones.get(i)) else {
        return false;
    };
    b.state == ZoneState::ImplicitlyOpen
        && a.state == ZoneState::Closed
        && (a.write_pointer, a.capacity, a.attributes)
            == (b.write_pointer, b.capacity, b.attributes)
        && c.before.ext.get(i) == c.peer_after.ext.get(i)
}

/// Open with Select All when the Closed zones do not all fit the free open
/// resources: the reference opens none and answers Too Many Open Zones
/// (docs/zns-spec.md, choice 6). The peer walks its list of Closed zones
/// and opens them one at a time; when the open resources are exhausted it
/// first closes the oldest implicitly opened zone, which joins the end of
/// that list and is opened explicitly in turn; it stops at the first zone
/// that does not fit. So every zone that differs went Closed → Explicitly
/// Opened, Implicitly Opened → Explicitly Opened, or Implicitly Opened →
/// Closed, with its write pointer, attributes and extension kept, and the
/// peer's open zones stay within its limit.
fn open_all_one_by_one(c: &Case<'_>) -> bool {
    let is_open_all =
        matches!(c.cmd.op, ZoneOp::Zone { action: ZoneAction::Open, target: Target::All });
    if !is_open_all
        || !c.ours_is(StatusCode::TooManyOpenZones)
        || c.ours_after != c.before
        || !(done(c.peer) || c.peer_is(StatusCode::TooManyOpenZones))
    {
        return false;
    }
    let (open, _) = counts(&c.peer_after.zones);
    if c.g.max_open.is_some_and(|m| open as u64 > m as u64) {
        return false;
    }
    differing_zones(c.before, c.peer_after).into_iter().all(|i| {
        let (b, a) = (&c.before.zones[i], &c.peer_after.zones[i]);
        let kept = (a.write_pointer, a.capacity, a.attributes)
            == (b.write_pointer, b.capacity, b.attributes)
            && c.before.ext.get(i) == c.peer_after.ext.get(i);
        let moved = matches!(
            (b.state, a.state),
            (ZoneState::Closed, ZoneState::ExplicitlyOpen)
                | (ZoneState::ImplicitlyOpen, ZoneState::ExplicitlyOpen)
                | (ZoneState::ImplicitlyOpen, ZoneState::Closed)
        );
        kept && moved
    })
}

/// Set Zone Descriptor Extension on a zone that is not Empty: both answer
/// Invalid Zone State Transition and leave the zone's state alone, but
/// the peer has stored the command's data as the zone's extension before
/// checking the state (QEMU transfers the data first), which shows in the
/// reports of a zone whose extension is valid. Only that extension differs,
/// and on the peer it is the command's data.
fn failed_extension_write(c: &Case<'_>) -> bool {
    let ZoneOp::SetZoneExtension { zslba } = c.cmd.op else { return false };
    let Some(i) = c.zone_before(zslba).filter(|z| z.start == zslba).map(|z| z.index as usize)
    else {
        return false;
    };
    let same_failure = match (&c.peer.outcome, &c.ours.outcome) {
        (Outcome::Failed(a), Outcome::Failed(b)) => a == b,
        _ => false,
    };
    if !same_failure || c.ours_after != c.before || c.peer_after.zones != c.before.zones {
        return false;
    }
    let mut data = vec![0u8; c.g.ext];
    fill(&mut data[..c.cmd.bytes.min(c.g.ext)], c.cmd.fill);
    differing_zones(c.before, c.peer_after) == [i] && c.peer_after.ext.get(i) == Some(&data)
}

/// Open with ZRWA Allocate of an Empty or Closed zone while every open
/// resource is taken, failing for want of an active resource or a ZRWA:
/// QEMU closes the oldest implicitly opened zone before its resource
/// checks; the reference changes nothing for a command that fails
/// (docs/zns-spec.md, choice 7). Both answer the same status; the only
/// difference is one zone Implicitly Opened before and Closed on the peer.
fn zrwa_close_before_resource_check(c: &Case<'_>) -> bool {
    let ZoneOp::OpenZrwa { zslba } = c.cmd.op else { return false };
    let Some(z) = c.zone_before(zslba).filter(|z| z.start == zslba) else { return false };
    let (open, _) = counts(&c.before.zones);
    let open_full = c.g.max_open.is_some_and(|m| open as u64 >= m as u64);
    let same = [StatusCode::ZrwaResourcesUnavailable, StatusCode::TooManyActiveZones]
        .into_iter()
        .any(|s| c.peer_is(s) && c.ours_is(s));
    if !matches!(z.state, ZoneState::Empty | ZoneState::Closed)
        || !open_full
        || !same
        || c.ours_after != c.before
    {
        return false;
    }
    let changed = differing_zones(c.before, c.peer_after);
    changed.len() == 1 && auto_closed(c, changed[0])
}

/// Open with ZRWA Allocate of a Full zone: QEMU checks that the zone's
/// write pointer sits on a commit unit before it looks at the state, and a
/// zone finished off a unit keeps its write pointer there, so it answers
/// ZRWA Resources Unavailable; the reference refuses a zone that cannot be
/// opened for its state (docs/zns-spec.md, ZRWA rule 1). Both refuse;
/// nothing changes.
fn zrwa_open_full_zone(c: &Case<'_>) -> bool {
    let ZoneOp::OpenZrwa { zslba } = c.cmd.op else { return false };
    let Some(z) = c.zone_before(zslba).filter(|z| z.start == zslba) else { return false };
    z.state == ZoneState::Full
        && c.peer_is(StatusCode::ZrwaResourcesUnavailable)
        && c.ours_is(StatusCode::InvalidZoneStateTransition)
        && c.unchanged()
}

/// Flush Explicit ZRWA Range with the last LBA at the write pointer plus
/// the window size, one past the window: QEMU takes it as inside and then
/// refuses the range, which is not whole commit units (the write pointer
/// sits on a unit), with Invalid Field in Command; the reference refuses
/// an LBA past the window with Zone Boundary Error (docs/zns-spec.md, ZRWA
/// rule 4). Nothing changes.
fn zrwa_commit_one_past(c: &Case<'_>) -> bool {
    let ZoneOp::CommitZrwa { lba } = c.cmd.op else { return false };
    let (Some((size, unit)), Some(z)) = (c.g.zrwa, c.zone_before(lba)) else { return false };
    let one_past = z.has_zrwa() && z.write_pointer.is_some_and(|wp| lba == wp + size);
    one_past
        && unit > 1
        && c.ours_is(StatusCode::ZoneBoundaryError)
        && c.peer_is(StatusCode::InvalidField)
        && c.unchanged()
}

/// A Zone Append to a zone that has a ZRWA and breaks another append rule
/// (an LBA that is no zone start, data past the capacity): QEMU checks for
/// the ZRWA right after the LBA range and answers Invalid Zone Operation
/// Request; the reference checks it once the zone is locked, after the
/// append's own checks, and reports the other rule (docs/zns-spec.md,
/// ZRWA rule 5). Both refuse; nothing changes.
fn zrwa_append_check_order(c: &Case<'_>) -> bool {
    let ZoneOp::Append { zslba, .. } = c.cmd.op else { return false };
    let Some(z) = c.zone_before(zslba) else { return false };
    z.has_zrwa()
        && c.peer_is(StatusCode::InvalidZoneOperationRequest)
        && !done(c.ours)
        && !c.ours_is(StatusCode::InvalidZoneOperationRequest)
        && c.unchanged()
}

/// A zone report with Reporting Options 9h: the reference lists the zones
/// with Reset Zone Recommended set (none here); the peer refuses the value
/// as reserved with Invalid Field in Command. Nothing changes.
fn report_filter_9h(c: &Case<'_>) -> bool {
    matches!(c.cmd.op, ZoneOp::ReportZones { filter: ReportFilter::ResetRecommended, .. })
        && c.peer_is(StatusCode::InvalidField)
        && done(c.ours)
        && c.unchanged()
}

fn done(o: &Observed) -> bool {
    matches!(o.outcome, Outcome::Done(_))
}
