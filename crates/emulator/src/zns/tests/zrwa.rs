//! Zone Random Write Areas: the window, implicit and explicit commits,
//! resources, Zone Append, Finish, Reset, Close and power cuts.

use rand::SeedableRng;
use zns_spec::{StatusCode, ZoneAttributes, ZoneSendAction, ZoneState};

use super::{geo, status, write, Zones};
use crate::zns::{ZoneGeometry, ZrwaGeometry};

/// Zones of 64 blocks (capacity 48), a window of 16 blocks committed in
/// units of 4, two ZRWA resources, at most 4 open zones.
fn g() -> ZoneGeometry {
    let mut g = geo(64, 48, 8, Some(4), Some(6), 0, true);
    g.zrwa =
        Some(ZrwaGeometry { size: 16, flush_granularity: 4, resources: 2, explicit_flush: true });
    g
}

fn zones() -> Zones {
    Zones::new(g()).unwrap()
}

fn open_zrwa(z: &Zones, zone: u32) -> Result<(), StatusCode> {
    z.send_raw(u64::from(zone) * 64, ZoneSendAction::Open as u8, false, true, None).map(drop)
}

fn flush(z: &Zones, last: u64) -> Result<u64, StatusCode> {
    z.send(last, ZoneSendAction::FlushZrwa, false, None).map(|o| o.committed)
}

/// (state, write pointer from the zone start, ZRWAV, readable end from the
/// zone start).
fn look(z: &Zones, zone: u32) -> (ZoneState, u64, bool, u64) {
    let i = z.zone_info(zone).unwrap();
    let zrwa = i.attrs.has(ZoneAttributes::ZRWA_VALID);
    (i.state, i.written_extent - i.start, zrwa, i.window_end - i.start)
}

/// The runs a read of the whole zone sees, relative to the zone start.
fn visible(z: &Zones, zone: u32) -> Vec<(u64, u64, bool)> {
    let start = u64::from(zone) * 64;
    let mut runs = Vec::new();
    z.read_extent(start, 64, |l, n, w| runs.push((l - start, n, w))).unwrap();
    runs
}

#[test]
fn a_new_zrwa_releases_the_unwritten_rest_of_its_zone() {
    let z = zones();
    write(&z, 64, 4).unwrap();
    let out = z.send_raw(64, ZoneSendAction::Open as u8, false, true, None).unwrap();
    assert_eq!(out.released, vec![(68, 60)]);
    let again = z.send_raw(64, ZoneSendAction::Open as u8, false, true, None).unwrap();
    assert_eq!(again.released, vec![], "a zone that has a ZRWA keeps its window");
}

#[test]
fn writes_land_anywhere_in_the_window_and_are_readable() {
    let z = zones();
    open_zrwa(&z, 1).unwrap();
    assert_eq!(look(&z, 1), (ZoneState::ExplicitlyOpen, 0, true, 0));
    let d = z.descriptor(1).unwrap();
    assert!(d.attrs.has(ZoneAttributes::ZRWA_VALID));
    // Out of order, then an overwrite: the write pointer stays put.
    let o = write(&z, 64 + 8, 4).unwrap();
    assert_eq!(o.zrwa_commit, Some((64, 0)));
    write(&z, 64, 2).unwrap();
    write(&z, 64 + 8, 8).unwrap();
    assert_eq!(look(&z, 1), (ZoneState::ExplicitlyOpen, 0, true, 16));
    assert_eq!(z.descriptor(1).unwrap().write_pointer, 64);
    assert_eq!(visible(&z, 1), vec![(0, 16, true), (16, 48, false)]);
    z.check_invariants().unwrap();
}

#[test]
fn a_write_past_the_window_commits_whole_units() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    // Ends one block past the window [0, 16): one unit of 4 commits.
    let o = write(&z, 10, 7).unwrap();
    assert_eq!(o.zrwa_commit, Some((0, 4)));
    assert_eq!(look(&z, 0), (ZoneState::ExplicitlyOpen, 4, true, 17));
    // Ends 9 past the new window [4, 20): three units.
    let o = write(&z, 20, 9).unwrap();
    assert_eq!(o.zrwa_commit, Some((4, 12)));
    assert_eq!(look(&z, 0).1, 16);
    let i = z.zone_info(0).unwrap();
    assert_eq!(i.durable_extent, 16, "committed blocks are durable");
    z.check_invariants().unwrap();
}

#[test]
fn writes_outside_the_two_windows_are_invalid() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    write(&z, 0, 17).unwrap(); // commits 4
    assert_eq!(status_of(write(&z, 3, 1)), StatusCode::ZoneInvalidWrite, "before the WP");
    // From WP 4, writes may end at 4 + 2 × 16 = 36.
    assert_eq!(status_of(write(&z, 30, 7)), StatusCode::ZoneInvalidWrite);
    write(&z, 30, 6).unwrap();
    assert_eq!(look(&z, 0).1, 20);
    // The capacity still bounds writes: WP 20 allows up to 52, capacity 48.
    assert_eq!(status_of(write(&z, 40, 9)), StatusCode::ZoneBoundaryError);
    z.check_invariants().unwrap();
}

fn status_of(r: Result<crate::zns::WriteOutcome, StatusCode>) -> StatusCode {
    r.expect_err("the write must fail")
}

#[test]
fn explicit_flush_commits_up_to_the_last_lba() {
    let z = zones();
    open_zrwa(&z, 2).unwrap();
    let s = 128;
    write(&z, s, 12).unwrap();
    assert_eq!(flush(&z, s + 7), Ok(8));
    assert_eq!(look(&z, 2), (ZoneState::ExplicitlyOpen, 8, true, 12));
    assert_eq!(z.zone_info(2).unwrap().durable_extent, s + 8);
    assert_eq!(flush(&z, s + 7), Err(StatusCode::ZoneBoundaryError), "before the WP");
    assert_eq!(flush(&z, s + 8 + 16), Err(StatusCode::ZoneBoundaryError), "past the window");
    assert_eq!(flush(&z, s + 9), Err(StatusCode::InvalidField), "not whole units");
    let all = z.send(0, ZoneSendAction::FlushZrwa, true, None);
    assert_eq!(all.unwrap_err(), StatusCode::InvalidField);
    // Committing blocks never written is allowed; they read as zeros.
    assert_eq!(flush(&z, s + 8 + 15), Ok(16));
    assert_eq!(look(&z, 2).1, 24);
    // A zone without a ZRWA.
    write(&z, 192, 1).unwrap();
    assert_eq!(flush(&z, 192), Err(StatusCode::InvalidField));
    z.check_invariants().unwrap();
}

#[test]
fn committing_to_the_capacity_fills_the_zone_and_frees_the_zrwa() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    write(&z, 0, 32).unwrap(); // commits 16
    write(&z, 32, 16).unwrap(); // ends at the capacity: commits 16 more
    assert_eq!(look(&z, 0), (ZoneState::ExplicitlyOpen, 32, true, 48));
    assert_eq!(flush(&z, 47), Ok(16));
    assert_eq!(look(&z, 0), (ZoneState::Full, 48, false, 48));
    assert_eq!((z.zrwa_zones(), z.open_zones()), (0, 0));
    z.check_invariants().unwrap();
}

#[test]
fn resources_are_counted_and_released_by_finish_and_reset() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    open_zrwa(&z, 1).unwrap();
    open_zrwa(&z, 1).unwrap(); // it has one already
    assert_eq!(open_zrwa(&z, 2), Err(StatusCode::ZrwaResourcesUnavailable));
    assert_eq!(look(&z, 2).0, ZoneState::Empty, "a refused open changes nothing");
    // Finish commits what the window holds and frees the resource.
    write(&z, 64 + 4, 3).unwrap();
    z.send(64, ZoneSendAction::Finish, false, None).unwrap();
    assert_eq!(look(&z, 1), (ZoneState::Full, 7, false, 7));
    assert_eq!(visible(&z, 1), vec![(0, 7, true), (7, 57, false)]);
    open_zrwa(&z, 2).unwrap();
    assert_eq!(open_zrwa(&z, 3), Err(StatusCode::ZrwaResourcesUnavailable));
    // Reset drops the window and frees the resource.
    write(&z, 5, 3).unwrap();
    let out = z.send(0, ZoneSendAction::Reset, false, None).unwrap();
    assert_eq!(out.released, vec![(0, 64)]);
    assert_eq!(look(&z, 0), (ZoneState::Empty, 0, false, 0));
    open_zrwa(&z, 3).unwrap();
    assert_eq!(z.zrwa_zones(), 2);
    z.check_invariants().unwrap();
}

#[test]
fn open_needs_a_write_pointer_on_a_unit_and_a_zone_that_can_open() {
    let z = zones();
    write(&z, 0, 3).unwrap();
    assert_eq!(open_zrwa(&z, 0), Err(StatusCode::ZrwaResourcesUnavailable));
    write(&z, 3, 1).unwrap();
    open_zrwa(&z, 0).unwrap();
    assert_eq!(look(&z, 0), (ZoneState::ExplicitlyOpen, 4, true, 4));
    write(&z, 64, 48).unwrap();
    let full = open_zrwa(&z, 1);
    assert_eq!(full, Err(StatusCode::InvalidZoneStateTransition));
    // A zone finished off a unit is Full first: its state is what is wrong.
    write(&z, 6 * 64, 3).unwrap();
    z.send(6 * 64, ZoneSendAction::Finish, false, None).unwrap();
    assert_eq!(open_zrwa(&z, 6), Err(StatusCode::InvalidZoneStateTransition));
    let all = z.send_raw(0, ZoneSendAction::Open as u8, true, true, None);
    assert_eq!(all.unwrap_err(), StatusCode::InvalidField);
    // Open resources are checked before ZRWA resources.
    for zone in 2u32..5 {
        z.send(u64::from(zone) * 64, ZoneSendAction::Open, false, None).unwrap();
    }
    assert_eq!(open_zrwa(&z, 5), Err(StatusCode::TooManyOpenZones));
    z.check_invariants().unwrap();
}

#[test]
fn zone_append_is_refused_in_a_zrwa_zone() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    let r = z.append(0, 1, u64::MAX, false, |_| Ok::<(), ()>(()));
    assert_eq!(r.map_err(status), Err(StatusCode::InvalidZoneOperationRequest));
    let o = z.append(64, 1, u64::MAX, false, |_| Ok::<(), ()>(())).map_err(status).unwrap();
    assert_eq!(o.zrwa_commit, None);
}

#[test]
fn close_keeps_the_zrwa_and_a_write_reopens_the_zone() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    write(&z, 2, 2).unwrap();
    z.send(0, ZoneSendAction::Close, false, None).unwrap();
    assert_eq!(look(&z, 0), (ZoneState::Closed, 0, true, 4));
    write(&z, 0, 2).unwrap();
    assert_eq!(look(&z, 0), (ZoneState::ImplicitlyOpen, 0, true, 4));
    z.send(0, ZoneSendAction::Close, false, None).unwrap();
    assert_eq!(flush(&z, 3), Ok(4));
    assert_eq!(look(&z, 0), (ZoneState::ImplicitlyOpen, 4, true, 4));
    z.check_invariants().unwrap();
}

#[test]
fn a_power_cut_loses_the_window_and_keeps_what_was_committed() {
    for seed in 0..20 {
        let z = zones();
        open_zrwa(&z, 0).unwrap();
        write(&z, 0, 20).unwrap(); // commits 4, window holds [4, 20)
        open_zrwa(&z, 1).unwrap();
        write(&z, 64, 3).unwrap(); // nothing committed
        let image = z.encode_durable();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let dropped = z.power_cut(&mut rng);
        assert_eq!(dropped, vec![(4, 16), (64, 3)]);
        assert_eq!(look(&z, 0), (ZoneState::Closed, 4, false, 4));
        assert_eq!(look(&z, 1), (ZoneState::Empty, 0, false, 0));
        assert_eq!(visible(&z, 0), vec![(0, 4, true), (4, 60, false)]);
        assert_eq!(z.zrwa_zones(), 0);
        z.check_invariants().unwrap();
        let back = Zones::decode_durable(g(), &image).unwrap();
        assert_eq!(look(&back, 0), (ZoneState::Closed, 4, false, 4));
        assert_eq!(back.encode_durable(), z.encode_durable());
    }
}

#[test]
fn the_geometry_rejects_windows_identify_cannot_describe() {
    let bad = |size, flush_granularity, resources| {
        let mut g = g();
        g.zrwa = Some(ZrwaGeometry { size, flush_granularity, resources, explicit_flush: true });
        Zones::new(g).is_err()
    };
    assert!(bad(16, 0, 1) && bad(0, 4, 1) && bad(18, 4, 1) && bad(16, 4, 0));
    assert!(bad(1 << 16, 1, 1));
    assert!(!bad(65535, 5, 1));
}

#[test]
fn without_explicit_flush_only_implicit_commits_remain() {
    let mut geometry = g();
    geometry.zrwa.as_mut().unwrap().explicit_flush = false;
    let z = Zones::new(geometry).unwrap();
    open_zrwa(&z, 0).unwrap();
    write(&z, 0, 8).unwrap();
    assert_eq!(flush(&z, 3), Err(StatusCode::InvalidField));
    assert_eq!(write(&z, 8, 12).unwrap().zrwa_commit, Some((0, 4)));
}

#[test]
fn controller_changes_free_the_zrwa() {
    let z = zones();
    open_zrwa(&z, 0).unwrap();
    write(&z, 2, 3).unwrap();
    z.set_read_only(0).unwrap();
    assert_eq!(look(&z, 0), (ZoneState::ReadOnly, 5, false, 5));
    assert_eq!(z.zone_info(0).unwrap().durable_extent, 5);
    open_zrwa(&z, 1).unwrap();
    write(&z, 64, 3).unwrap();
    z.finish_by_controller(1).unwrap();
    assert_eq!(look(&z, 1), (ZoneState::Full, 3, false, 3));
    open_zrwa(&z, 2).unwrap();
    z.set_offline(2).unwrap();
    assert_eq!((look(&z, 2), z.zrwa_zones()), ((ZoneState::Offline, 0, false, 0), 0));
    z.check_invariants().unwrap();
}

mod random {
    //! Random sequences of ZRWA commands: the invariants hold after every
    //! step, a refused command changes nothing, and successful commits
    //! move the write pointer as the rules say (stated here as a search,
    //! not as the implementation's arithmetic).

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        OpenZrwa(u32),
        Open(u32),
        /// A write `delta` blocks from the write pointer (negative: before).
        Write(u32, i64, u64),
        /// A commit up to `delta` blocks from the write pointer.
        Flush(u32, i64),
        Append(u32),
        Close(u32),
        Finish(u32),
        Reset(u32),
        PowerCut(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let zone = 0u32..4;
        prop_oneof![
            3 => zone.clone().prop_map(Op::OpenZrwa),
            1 => zone.clone().prop_map(Op::Open),
            10 => (zone.clone(), -2i64..36, 1u64..12).prop_map(|(z, d, n)| Op::Write(z, d, n)),
            4 => (zone.clone(), -2i64..20).prop_map(|(z, d)| Op::Flush(z, d)),
            1 => zone.clone().prop_map(Op::Append),
            1 => zone.clone().prop_map(Op::Close),
            1 => zone.clone().prop_map(Op::Finish),
            1 => zone.prop_map(Op::Reset),
            1 => any::<u64>().prop_map(Op::PowerCut),
        ]
    }

    /// The write pointer after a write ending at `end` in a ZRWA zone at
    /// `wp`: the first one in flush units from `wp` whose window holds
    /// `end`, at most the capacity end.
    fn expected_wp(wp: u64, end: u64, cap_end: u64) -> u64 {
        let w = g().zrwa.unwrap();
        let mut at = wp;
        while at + w.size < end && at < cap_end {
            at += w.flush_granularity;
        }
        at.min(cap_end)
    }

    fn step(z: &Zones, op: &Op) -> Result<(), TestCaseError> {
        let zone_of = |op: &Op| match *op {
            Op::OpenZrwa(i) | Op::Open(i) | Op::Write(i, ..) | Op::Flush(i, _) => Some(i),
            Op::Append(i) | Op::Close(i) | Op::Finish(i) | Op::Reset(i) => Some(i),
            Op::PowerCut(_) => None,
        };
        let before: Vec<_> = (0..8).map(|i| z.zone_info(i).unwrap()).collect();
        let at = |i: u32, d: i64| before[i as usize].written_extent.checked_add_signed(d);
        let start = |i: u32| u64::from(i) * 64;
        let send = |i: u32, a: ZoneSendAction| z.send(start(i), a, false, None).map(drop);
        let ok = match *op {
            Op::OpenZrwa(i) => open_zrwa(z, i).is_ok(),
            Op::Open(i) => send(i, ZoneSendAction::Open).is_ok(),
            Op::Close(i) => send(i, ZoneSendAction::Close).is_ok(),
            Op::Finish(i) => send(i, ZoneSendAction::Finish).is_ok(),
            Op::Reset(i) => send(i, ZoneSendAction::Reset).is_ok(),
            Op::Append(i) => {
                let r = z.append(start(i), 1, u64::MAX, false, |_| Ok::<(), ()>(()));
                let zrwa = before[i as usize].attrs.has(ZoneAttributes::ZRWA_VALID);
                if zrwa {
                    prop_assert_eq!(
                        r.clone().map_err(status).err(),
                        Some(StatusCode::InvalidZoneOperationRequest)
                    );
                }
                r.is_ok()
            }
            Op::Write(i, d, n) => match at(i, d).filter(|&l| l < start(i + 1)) {
                None => false,
                Some(lba) => {
                    let r = write(z, lba, n);
                    if let Ok(o) = r {
                        let b = &before[i as usize];
                        let cap_end = start(i) + 48;
                        let zrwa = b.attrs.has(ZoneAttributes::ZRWA_VALID);
                        let want = if zrwa {
                            expected_wp(b.written_extent, lba + n, cap_end)
                        } else {
                            lba + n
                        };
                        let info = z.zone_info(i).unwrap();
                        prop_assert_eq!(info.written_extent, want, "{:?} from {:?}", op, b);
                        prop_assert_eq!(o.zrwa_commit.is_some(), zrwa);
                    }
                    r.is_ok()
                }
            },
            Op::Flush(i, d) => match at(i, d).filter(|&l| l < start(i + 1)) {
                None => false,
                Some(lba) => {
                    let r = flush(z, lba);
                    if r.is_ok() {
                        let info = z.zone_info(i).unwrap();
                        prop_assert_eq!(info.written_extent, lba + 1);
                        prop_assert_eq!(info.durable_extent, lba + 1, "a commit is durable");
                    }
                    r.is_ok()
                }
            },
            Op::PowerCut(seed) => {
                z.power_cut(&mut rand::rngs::SmallRng::seed_from_u64(seed));
                prop_assert_eq!(z.zrwa_zones(), 0);
                true
            }
        };
        if let Err(e) = z.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        if !ok {
            let i = zone_of(op).expect("power cuts do not fail");
            prop_assert_eq!(
                z.zone_info(i).unwrap(),
                before[i as usize],
                "{:?} failed yet changed",
                op
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn random_zrwa_sequences_keep_the_rules(ops in prop::collection::vec(op(), 1..80)) {
            let z = zones();
            for op in &ops {
                step(&z, op)?;
            }
        }
    }
}
