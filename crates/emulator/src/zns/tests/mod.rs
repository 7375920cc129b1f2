//! Tests of the zone state machine: the transition/error table, scenarios,
//! a model-based property test and a multi-threaded stress test.

use zns_spec::{StatusCode, ZoneSendAction, ZoneState};

use super::{WriteOutcome, ZoneError, ZoneGeometry, Zones};

mod model;
mod scenarios;
mod table;
mod threads;
mod zrwa;

/// A geometry for tests.
pub(super) fn geo(
    zone_size: u64,
    zone_capacity: u64,
    zones: u32,
    max_open: Option<u32>,
    max_active: Option<u32>,
    ext: usize,
    razb: bool,
) -> ZoneGeometry {
    ZoneGeometry {
        zone_size,
        zone_capacity,
        zones,
        max_open,
        max_active,
        descriptor_extension_bytes: ext,
        read_across_boundaries: razb,
        zrwa: None,
    }
}

/// A write whose data transfer always succeeds.
pub(super) fn write(z: &Zones, slba: u64, blocks: u64) -> Result<WriteOutcome, StatusCode> {
    z.write(slba, blocks, false, |_| Ok::<(), ()>(())).map_err(status)
}

/// The status of a write error whose data callback cannot fail.
pub(super) fn status(e: ZoneError<()>) -> StatusCode {
    e.status().expect("the data callback does not fail")
}

/// Drives zone `zone` into `state` with `written` blocks written, through
/// the public commands only. Panics if the namespace's limits forbid it.
pub(super) fn put(z: &Zones, zone: u32, state: ZoneState, written: u64) {
    let g = z.geometry().clone();
    let start = g.zone_start(zone);
    let fill = |n: u64| {
        if n > 0 {
            write(z, start, n).unwrap_or_else(|e| panic!("setup write to zone {zone}: {e}"));
        }
    };
    let send = |a| {
        z.send(start, a, false, None).unwrap_or_else(|e| panic!("setup {a:?} zone {zone}: {e}"));
    };
    match state {
        ZoneState::Empty => assert_eq!(written, 0),
        ZoneState::ImplicitlyOpen => {
            assert!(written > 0 && written < g.zone_capacity);
            fill(written);
        }
        ZoneState::ExplicitlyOpen => {
            assert!(written < g.zone_capacity);
            send(ZoneSendAction::Open);
            fill(written);
        }
        ZoneState::Closed => {
            assert!(written < g.zone_capacity);
            if written == 0 {
                send(ZoneSendAction::Open);
            }
            fill(written);
            send(ZoneSendAction::Close);
        }
        ZoneState::Full => {
            fill(written);
            if written < g.zone_capacity {
                send(ZoneSendAction::Finish);
            }
        }
        ZoneState::ReadOnly => {
            fill(written);
            z.set_read_only(zone).unwrap();
        }
        ZoneState::Offline => {
            assert_eq!(written, 0);
            z.set_offline(zone).unwrap();
        }
    }
    let info = z.zone_info(zone).unwrap();
    assert_eq!((info.state, info.written_extent - start), (state, written), "setup of zone {zone}");
}

/// Every zone's state, in zone order.
pub(super) fn states(z: &Zones) -> Vec<ZoneState> {
    (0..z.geometry().zones).map(|i| z.zone_info(i).unwrap().state).collect()
}
