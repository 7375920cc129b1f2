//! One case per cell of the zone state × command tables, with the resource
//! limit variants, on a namespace whose zone size (12) is not a power of two
//! and whose zone capacity (10) is smaller than the zone size.
//!
//! Every case builds a fresh namespace, drives the target zone (and maybe
//! others) into a starting state through public commands, applies one
//! command, and checks the status, the target's state and written extent,
//! the open/active counts, the states of other zones named by the case, and
//! the internal invariants. All failures are collected and printed by case
//! name.

use zns_spec::{StatusCode, ZoneAttributes, ZoneSendAction, ZoneState};

use super::{geo, put, status, Zones};
use crate::zns::ZoneGeometry;

use ZoneState::{
    Closed as ZSC, Empty as ZSE, ExplicitlyOpen as ZSEO, Full as ZSF, ImplicitlyOpen as ZSIO,
    Offline as ZSO, ReadOnly as ZSRO,
};

/// Zone size 12, capacity 10, 6 zones, MOR 2, MAR 3, one 64-byte extension.
fn g() -> ZoneGeometry {
    geo(12, 10, 6, Some(2), Some(3), 64, false)
}

/// The target zone and its start.
const T: u32 = 1;
const S: u64 = 12;

#[derive(Clone, Copy, Debug)]
enum Op {
    Write(u64, u64),
    /// A write whose data transfer fails.
    WriteFailing(u64, u64),
    WriteZeroes(u64, u64),
    Copy(u64, u64),
    /// Zone Append: ZSLBA, blocks, limit.
    Append(u64, u64, u64),
    Read(u64, u64),
    Send(u64, ZoneSendAction, bool),
    /// Raw send: SLBA, ZSA, select all, ZRWA allocate.
    Raw(u64, u8, bool, bool),
    /// Set Zone Descriptor Extension with `n` bytes of data.
    SetZde(u64, bool, usize),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Ok,
    /// Success, and the command wrote at (or appended to) this LBA.
    OkAt(u64),
    Status(StatusCode),
    DataFailed,
}

/// A zone driven into a state with some blocks written: (zone, state, written).
type Setup = (u32, ZoneState, u64);

/// A starting state of the target: name, setup, written blocks, open/active.
type Start = (&'static str, Vec<Setup>, u64, (u32, u32));

struct Case {
    name: String,
    geometry: ZoneGeometry,
    /// Zones driven into states, in this order: (zone, state, written).
    setup: Vec<(u32, ZoneState, u64)>,
    op: Op,
    expect: Expect,
    /// Target state and written extent (relative to the zone start) after.
    after: (ZoneState, u64),
    /// Open and active zones after.
    counts: (u32, u32),
    /// Other zones' states after.
    others: Vec<(u32, ZoneState)>,
    /// Whether the target has ZDEV set after.
    zdev: bool,
}

/// A case on the default geometry.
fn case(
    name: impl Into<String>,
    setup: &[(u32, ZoneState, u64)],
    op: Op,
    expect: Expect,
    after: (ZoneState, u64),
    counts: (u32, u32),
) -> Case {
    Case {
        name: name.into(),
        geometry: g(),
        setup: setup.to_vec(),
        op,
        expect,
        after,
        counts,
        others: Vec::new(),
        zdev: false,
    }
}

impl Case {
    fn others(mut self, o: &[(u32, ZoneState)]) -> Self {
        self.others = o.to_vec();
        self
    }
    fn zdev(mut self) -> Self {
        self.zdev = true;
        self
    }
    fn geometry(mut self, g: ZoneGeometry) -> Self {
        self.geometry = g;
        self
    }
}

/// The seven starting states of the target: name, setup, written extent,
/// open/active counts.
fn starts() -> Vec<Start> {
    vec![
        ("ZSE", vec![], 0, (0, 0)),
        ("ZSIO", vec![(T, ZSIO, 3)], 3, (1, 1)),
        ("ZSEO", vec![(T, ZSEO, 3)], 3, (1, 1)),
        ("ZSC", vec![(T, ZSC, 3)], 3, (0, 1)),
        ("ZSF", vec![(T, ZSF, 10)], 10, (0, 0)),
        ("ZSRO", vec![(T, ZSRO, 3)], 3, (0, 0)),
        ("ZSO", vec![(T, ZSO, 0)], 0, (0, 0)),
    ]
}

fn state_of(name: &str) -> ZoneState {
    match name {
        "ZSE" => ZSE,
        "ZSIO" => ZSIO,
        "ZSEO" => ZSEO,
        "ZSC" => ZSC,
        "ZSF" => ZSF,
        "ZSRO" => ZSRO,
        _ => ZSO,
    }
}

fn base_cells() -> Vec<Case> {
    use StatusCode::*;
    let mut v = Vec::new();
    for (name, setup, wp, counts) in starts() {
        let st = state_of(name);
        let same = (st, wp);
        let fail = |code| Expect::Status(code);
        let write_result = match st {
            ZSF => (fail(ZoneIsFull), same, counts),
            ZSRO => (fail(ZoneIsReadOnly), same, counts),
            ZSO => (fail(ZoneIsOffline), same, counts),
            ZSE | ZSC => (Expect::OkAt(S + wp), (ZSIO, wp + 2), (1, 1)),
            _ => (Expect::OkAt(S + wp), (st, wp + 2), counts),
        };
        // The write-type commands, at the write pointer, two blocks.
        for (cmd, op) in [
            ("Write", Op::Write(S + wp, 2)),
            ("Write Zeroes", Op::WriteZeroes(S + wp, 2)),
            ("Copy destination", Op::Copy(S + wp, 2)),
            ("Zone Append", Op::Append(S, 2, 8)),
        ] {
            let (e, a, c) = write_result;
            v.push(case(format!("{cmd} / {name}"), &setup, op, e, a, c));
        }
        // Read of the first four blocks.
        let e = if st == ZSO { fail(ZoneIsOffline) } else { Expect::Ok };
        v.push(case(format!("Read / {name}"), &setup, Op::Read(S, 4), e, same, counts));

        let send = |a| Op::Send(S, a, false);
        let invalid = fail(InvalidZoneStateTransition);
        // Open.
        let (e, a, c) = match st {
            ZSE | ZSIO | ZSEO | ZSC => (Expect::Ok, (ZSEO, wp), (1, 1)),
            _ => (invalid, same, counts),
        };
        v.push(case(format!("Open / {name}"), &setup, send(ZoneSendAction::Open), e, a, c));
        // Close.
        let (e, a, c) = match st {
            ZSIO | ZSEO | ZSC => (Expect::Ok, (ZSC, wp), (0, 1)),
            _ => (invalid, same, counts),
        };
        v.push(case(format!("Close / {name}"), &setup, send(ZoneSendAction::Close), e, a, c));
        // Finish.
        let (e, a, c) = match st {
            ZSE | ZSIO | ZSEO | ZSC | ZSF => (Expect::Ok, (ZSF, wp), (0, 0)),
            _ => (invalid, same, counts),
        };
        v.push(case(format!("Finish / {name}"), &setup, send(ZoneSendAction::Finish), e, a, c));
        // Reset.
        let (e, a, c) = match st {
            ZSE | ZSIO | ZSEO | ZSC | ZSF => (Expect::Ok, (ZSE, 0), (0, 0)),
            _ => (invalid, same, counts),
        };
        v.push(case(format!("Reset / {name}"), &setup, send(ZoneSendAction::Reset), e, a, c));
        // Offline.
        let (e, a, c) = match st {
            ZSRO | ZSO => (Expect::Ok, (ZSO, 0), (0, 0)),
            _ => (invalid, same, counts),
        };
        v.push(case(format!("Offline / {name}"), &setup, send(ZoneSendAction::Offline), e, a, c));
        // Set Zone Descriptor Extension.
        let c = match st {
            ZSE => case(
                format!("Set ZDE / {name}"),
                &setup,
                Op::SetZde(S, false, 64),
                Expect::Ok,
                (ZSC, 0),
                (0, 1),
            )
            .zdev(),
            _ => case(
                format!("Set ZDE / {name}"),
                &setup,
                Op::SetZde(S, false, 64),
                invalid,
                same,
                counts,
            ),
        };
        v.push(c);
    }
    v
}

#[rustfmt::skip]
fn variant_cells() -> Vec<Case> {
    use StatusCode::*;
    let st = |c| Expect::Status(c);
    let zsio3 = [(T, ZSIO, 3)];
    let zsc3 = [(T, ZSC, 3)];
    // Other zones holding resources, oldest first.
    let two_zsio = [(2, ZSIO, 1), (3, ZSIO, 1)];
    let two_zseo = [(2, ZSEO, 1), (3, ZSEO, 1)];
    let three_zsc = [(2, ZSC, 1), (3, ZSC, 1), (4, ZSC, 1)];
    let with = |a: &[(u32, ZoneState, u64)], b: &[(u32, ZoneState, u64)]| {
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        v
    };
    let open = Op::Send(S, ZoneSendAction::Open, false);
    vec![
        // --- Write: validation order and geometry.
        case("Write / not at WP", &zsio3, Op::Write(S + 4, 2), st(ZoneInvalidWrite), (ZSIO, 3), (1, 1)),
        case("Write / ZSE not at WP", &[], Op::Write(S + 1, 2), st(ZoneInvalidWrite), (ZSE, 0), (0, 0)),
        case("Write / ZSC not at WP", &zsc3, Op::Write(S, 1), st(ZoneInvalidWrite), (ZSC, 3), (0, 1)),
        case("Write / past capacity", &zsio3, Op::Write(S + 3, 8), st(ZoneBoundaryError), (ZSIO, 3), (1, 1)),
        case("Write / ZSE past capacity", &[], Op::Write(S, 11), st(ZoneBoundaryError), (ZSE, 0), (0, 0)),
        case("Write / crosses zone size", &zsio3, Op::Write(S + 3, 10), st(ZoneBoundaryError), (ZSIO, 3), (1, 1)),
        case("Write / crossing beats Zone Is Full", &[(T, ZSF, 10)], Op::Write(S + 10, 3), st(ZoneBoundaryError), (ZSF, 10), (0, 0)),
        case("Write / crossing beats Zone Invalid Write", &[], Op::Write(S + 11, 2), st(ZoneBoundaryError), (ZSE, 0), (0, 0)),
        case("Write / into the gap past capacity", &zsio3, Op::Write(S + 10, 1), st(ZoneInvalidWrite), (ZSIO, 3), (1, 1)),
        case("Write / Full: state before write pointer", &[(T, ZSF, 10)], Op::Write(S, 1), st(ZoneIsFull), (ZSF, 10), (0, 0)),
        case("Write / beyond namespace", &[], Op::Write(70, 3), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        case("Write / LBA overflow", &[], Op::Write(u64::MAX, 2), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        case("Write / zero blocks", &[], Op::Write(S, 0), st(InvalidField), (ZSE, 0), (0, 0)),
        case("Write / fills ZSIO", &zsio3, Op::Write(S + 3, 7), Expect::OkAt(S + 3), (ZSF, 10), (0, 0)),
        case("Write / fills ZSEO", &[(T, ZSEO, 3)], Op::Write(S + 3, 7), Expect::OkAt(S + 3), (ZSF, 10), (0, 0)),
        case("Write / fills ZSC", &zsc3, Op::Write(S + 3, 7), Expect::OkAt(S + 3), (ZSF, 10), (0, 0)),
        case("Write / fills ZSE at once", &[], Op::Write(S, 10), Expect::OkAt(S), (ZSF, 10), (0, 0)),
        case("Write / data failure on ZSE", &[], Op::WriteFailing(S, 2), Expect::DataFailed, (ZSE, 0), (0, 0)),
        case("Write / data failure on ZSIO", &zsio3, Op::WriteFailing(S + 3, 2), Expect::DataFailed, (ZSIO, 3), (1, 1)),
        case("Write / data failure on filling write", &zsio3, Op::WriteFailing(S + 3, 7), Expect::DataFailed, (ZSIO, 3), (1, 1)),
        // --- Write: resources.
        case("Write / ZSE, MAR exhausted", &three_zsc, Op::Write(S, 2), st(TooManyActiveZones), (ZSE, 0), (0, 3)),
        case("Write / ZSE, MAR exhausted, filling write", &three_zsc, Op::Write(S, 10), st(TooManyActiveZones), (ZSE, 0), (0, 3)),
        case("Write / ZSC, MAR exhausted needs no active", &with(&zsc3, &[(2, ZSC, 1), (3, ZSC, 1)]), Op::Write(S + 3, 1), Expect::OkAt(S + 3), (ZSIO, 4), (1, 3)),
        case("Write / ZSE, MOR exhausted by ZSIO: oldest closed", &two_zsio, Op::Write(S, 2), Expect::OkAt(S), (ZSIO, 2), (2, 3))
            .others(&[(2, ZSC), (3, ZSIO)]),
        case("Write / ZSE, MOR exhausted by ZSEO", &two_zseo, Op::Write(S, 2), st(TooManyOpenZones), (ZSE, 0), (2, 2))
            .others(&[(2, ZSEO), (3, ZSEO)]),
        case("Write / ZSE, MOR: explicit never closed, implicit is", &[(2, ZSEO, 1), (3, ZSIO, 1)], Op::Write(S, 2), Expect::OkAt(S), (ZSIO, 2), (2, 3))
            .others(&[(2, ZSEO), (3, ZSC)]),
        case("Write / ZSC, MOR exhausted by ZSIO: oldest closed", &with(&zsc3, &two_zsio), Op::Write(S + 3, 2), Expect::OkAt(S + 3), (ZSIO, 5), (2, 3))
            .others(&[(2, ZSC), (3, ZSIO)]),
        case("Write / ZSC, MOR exhausted by ZSEO", &with(&zsc3, &two_zseo), Op::Write(S + 3, 2), st(TooManyOpenZones), (ZSC, 3), (2, 3)),
        case("Write / ZSE, MOR and MAR exhausted: no side effect", &[(4, ZSC, 1), (2, ZSIO, 1), (3, ZSIO, 1)], Op::Write(S, 2), st(TooManyActiveZones), (ZSE, 0), (2, 3))
            .others(&[(2, ZSIO), (3, ZSIO)]),
        case("Write / ZSE, MOR exhausted, filling write still closes oldest", &two_zsio, Op::Write(S, 10), Expect::OkAt(S), (ZSF, 10), (1, 2))
            .others(&[(2, ZSC), (3, ZSIO)]),
        case("Write / data failure leaves the oldest ZSIO open", &two_zsio, Op::WriteFailing(S, 2), Expect::DataFailed, (ZSE, 0), (2, 2))
            .others(&[(2, ZSIO), (3, ZSIO)]),
        case("Write / ZSIO at MOR needs nothing", &with(&zsio3, &[(2, ZSEO, 1)]), Op::Write(S + 3, 1), Expect::OkAt(S + 3), (ZSIO, 4), (2, 2)),
        // --- Zone Append.
        case("Append / ZSLBA not a zone start", &zsio3, Op::Append(S + 3, 2, 8), st(InvalidField), (ZSIO, 3), (1, 1)),
        case("Append / over the size limit", &zsio3, Op::Append(S, 4, 3), st(InvalidField), (ZSIO, 3), (1, 1)),
        case("Append / range check first", &[], Op::Append(72, 1, 8), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        case("Append / past capacity", &zsio3, Op::Append(S, 8, 8), st(ZoneBoundaryError), (ZSIO, 3), (1, 1)),
        case("Append / larger than the zone", &[], Op::Append(S, 13, 100), st(ZoneBoundaryError), (ZSE, 0), (0, 0)),
        case("Append / fills", &zsio3, Op::Append(S, 7, 8), Expect::OkAt(S + 3), (ZSF, 10), (0, 0)),
        case("Append / ZSE, MOR exhausted by ZSIO", &two_zsio, Op::Append(S, 2, 8), Expect::OkAt(S), (ZSIO, 2), (2, 3))
            .others(&[(2, ZSC)]),
        case("Append / ZSE, MAR exhausted", &three_zsc, Op::Append(S, 2, 8), st(TooManyActiveZones), (ZSE, 0), (0, 3)),
        // --- Read.
        case("Read / crosses zone boundary", &zsio3, Op::Read(S + 8, 8), st(ZoneBoundaryError), (ZSIO, 3), (1, 1)),
        case("Read / offline beats boundary", &[(T, ZSO, 0)], Op::Read(S + 8, 8), st(ZoneIsOffline), (ZSO, 0), (0, 0)),
        case("Read / beyond namespace", &[], Op::Read(70, 3), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        case("Read / past capacity inside the zone", &zsio3, Op::Read(S + 10, 2), Expect::Ok, (ZSIO, 3), (1, 1)),
        case("Read / across boundaries with RAZB", &zsio3, Op::Read(S + 8, 8), Expect::Ok, (ZSIO, 3), (1, 1))
            .geometry(geo(12, 10, 6, Some(2), Some(3), 64, true)),
        case("Read / RAZB into an offline zone", &[(2, ZSO, 0)], Op::Read(S + 8, 8), st(ZoneIsOffline), (ZSE, 0), (0, 0))
            .geometry(geo(12, 10, 6, Some(2), Some(3), 64, true)),
        // --- Open.
        case("Open / ZSE, MAR exhausted", &three_zsc, open, st(TooManyActiveZones), (ZSE, 0), (0, 3)),
        case("Open / ZSE, MOR exhausted by ZSIO: oldest closed", &two_zsio, open, Expect::Ok, (ZSEO, 0), (2, 3))
            .others(&[(2, ZSC), (3, ZSIO)]),
        case("Open / ZSE, MOR exhausted by ZSEO", &two_zseo, open, st(TooManyOpenZones), (ZSE, 0), (2, 2)),
        case("Open / ZSC, MOR exhausted by ZSIO", &with(&zsc3, &two_zsio), open, Expect::Ok, (ZSEO, 3), (2, 3))
            .others(&[(2, ZSC), (3, ZSIO)]),
        case("Open / ZSC, MOR exhausted by ZSEO", &with(&zsc3, &two_zseo), open, st(TooManyOpenZones), (ZSC, 3), (2, 3)),
        case("Open / ZSIO at MOR needs nothing", &with(&zsio3, &[(2, ZSEO, 1)]), open, Expect::Ok, (ZSEO, 3), (2, 2))
            .others(&[(2, ZSEO)]),
        case("Open / ZSEO with nothing written", &[(T, ZSEO, 0)], open, Expect::Ok, (ZSEO, 0), (1, 1)),
        case("Open / ZRWA allocate unsupported", &[], Op::Raw(S, 0x03, false, true), st(InvalidZoneOperationRequest), (ZSE, 0), (0, 0)),
        case("Close / ZRWA allocate bit ignored", &zsio3, Op::Raw(S, 0x01, false, true), Expect::Ok, (ZSC, 3), (0, 1)),
        case("Open / SLBA not a zone start", &[], Op::Send(S + 1, ZoneSendAction::Open, false), st(InvalidField), (ZSE, 0), (0, 0)),
        case("Open / SLBA out of range", &[], Op::Send(72, ZoneSendAction::Open, false), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        case("Open / SLBA out of range beats reserved action", &[], Op::Raw(72, 0x07, false, false), st(LbaOutOfRange), (ZSE, 0), (0, 0)),
        // --- Close.
        case("Close / ZSEO with nothing written stays active", &[(T, ZSEO, 0)], Op::Send(S, ZoneSendAction::Close, false), Expect::Ok, (ZSC, 0), (0, 1)),
        case("Close / SLBA mid-zone", &zsio3, Op::Send(S + 5, ZoneSendAction::Close, false), st(InvalidField), (ZSIO, 3), (1, 1)),
        // --- Finish.
        case("Finish / ZSE needs no resources", &three_zsc, Op::Send(S, ZoneSendAction::Finish, false), Expect::Ok, (ZSF, 0), (0, 3)),
        // --- Reset / Offline / ZRWA / reserved.
        case("Reset / SLBA mid-zone", &zsio3, Op::Send(S + 1, ZoneSendAction::Reset, false), st(InvalidField), (ZSIO, 3), (1, 1)),
        case("Flush ZRWA / unsupported", &zsio3, Op::Raw(S + 3, 0x11, false, false), st(InvalidZoneOperationRequest), (ZSIO, 3), (1, 1)),
        case("Flush ZRWA / unsupported, Select All", &zsio3, Op::Raw(0, 0x11, true, false), st(InvalidField), (ZSIO, 3), (1, 1)),
        case("Reserved action", &zsio3, Op::Raw(S, 0x06, false, false), st(InvalidField), (ZSIO, 3), (1, 1)),
        // --- Set Zone Descriptor Extension.
        case("Set ZDE / MAR exhausted", &three_zsc, Op::SetZde(S, false, 64), st(TooManyActiveZones), (ZSE, 0), (0, 3)),
        case("Set ZDE / needs no open resource", &two_zseo, Op::SetZde(S, false, 64), Expect::Ok, (ZSC, 0), (2, 3)).zdev(),
        case("Set ZDE / Select All", &[], Op::SetZde(S, true, 64), st(InvalidField), (ZSE, 0), (0, 0)),
        case("Set ZDE / wrong data length", &[], Op::SetZde(S, false, 32), st(InvalidField), (ZSE, 0), (0, 0)),
        case("Set ZDE / not supported", &[], Op::SetZde(S, false, 0), st(InvalidField), (ZSE, 0), (0, 0))
            .geometry(geo(12, 10, 6, Some(2), Some(3), 0, false)),
        // --- Power-of-two geometry with capacity = size: filling reaches the zone end.
        case("Write / fills a whole power-of-two zone", &[], Op::Write(16, 16), Expect::OkAt(16), (ZSF, 16), (0, 0))
            .geometry(geo(16, 16, 4, None, None, 0, false)),
        case("Write / no limits, ZSE", &[(0, ZSIO, 1), (2, ZSIO, 1), (3, ZSEO, 1)], Op::Write(16, 1), Expect::OkAt(16), (ZSIO, 1), (4, 4))
            .geometry(geo(16, 16, 4, None, None, 0, false)),
    ]
}

/// Runs one case; `Err` describes the first mismatch.
fn run(c: &Case) -> Result<(), String> {
    let z = Zones::new(c.geometry.clone()).map_err(|e| format!("geometry: {e}"))?;
    for &(zone, state, written) in &c.setup {
        put(&z, zone, state, written);
    }
    z.check_invariants().map_err(|e| format!("after setup: {e}"))?;
    let start = c.geometry.zone_start(T);
    let ok = |lba: Option<u64>| match (c.expect, lba) {
        (Expect::Ok, _) => Ok(()),
        (Expect::OkAt(want), Some(got)) if want == got => Ok(()),
        (e, lba) => Err(format!("expected {e:?}, got success at {lba:?}")),
    };
    let fail = |s: StatusCode| match c.expect {
        Expect::Status(want) if want == s => Ok(()),
        e => Err(format!("expected {e:?}, got {s}")),
    };
    let wr = |r: Result<super::WriteOutcome, super::ZoneError<&str>>| match r {
        Ok(o) => ok(Some(o.lba)),
        Err(super::ZoneError::Status(s)) => fail(s),
        Err(super::ZoneError::Data(_)) if c.expect == Expect::DataFailed => Ok(()),
        Err(e) => Err(format!("expected {:?}, got {e}", c.expect)),
    };
    let good = |_| Ok::<(), &str>(());
    match c.op {
        Op::Write(s, n) => wr(z.write(s, n, false, good)),
        Op::WriteFailing(s, n) => wr(z.write(s, n, false, |_| Err("media failure"))),
        Op::WriteZeroes(s, n) => wr(z.write_zeroes(s, n, false, good)),
        Op::Copy(s, n) => wr(z.copy_destination(s, n, false, good)),
        Op::Append(s, n, max) => wr(z.append(s, n, max, false, good)),
        Op::Read(s, n) => match z.read_extent(s, n, |_, _, _| {}) {
            Ok(()) => ok(None),
            Err(e) => fail(e),
        },
        Op::Send(s, a, all) => match z.send(s, a, all, None) {
            Ok(_) => ok(None),
            Err(e) => fail(e),
        },
        Op::Raw(s, zsa, all, zrwaa) => match z.send_raw(s, zsa, all, zrwaa, None) {
            Ok(_) => ok(None),
            Err(e) => fail(e),
        },
        Op::SetZde(s, all, n) => {
            let data = vec![0xA5u8; n];
            match z.send(s, ZoneSendAction::SetDescriptorExtension, all, Some(&data)) {
                Ok(_) => ok(None),
                Err(e) => fail(e),
            }
        }
    }?;
    let info = z.zone_info(T).unwrap();
    let got = (info.state, info.written_extent - start);
    if got != c.after {
        return Err(format!("target: expected {:?}, got {got:?}", c.after));
    }
    let counts = (z.open_zones(), z.active_zones());
    if counts != c.counts {
        return Err(format!("open/active: expected {:?}, got {counts:?}", c.counts));
    }
    for &(zone, want) in &c.others {
        let s = z.zone_info(zone).unwrap().state;
        if s != want {
            return Err(format!("zone {zone}: expected {want:?}, got {s:?}"));
        }
    }
    if info.attrs.has(ZoneAttributes::EXTENSION_VALID) != c.zdev {
        return Err(format!("ZDEV: expected {}, got attrs {:#x}", c.zdev, info.attrs.0));
    }
    if c.zdev && z.extension(T).unwrap() != vec![0xA5; 64] {
        return Err("extension data not stored".into());
    }
    z.check_invariants().map_err(|e| format!("after the command: {e}"))
}

#[test]
fn zns_transition_table() {
    let cases: Vec<Case> = base_cells().into_iter().chain(variant_cells()).collect();
    // 7 states × 10 commands (Write, Append, Write Zeroes, Copy, Read, Open,
    // Close, Finish, Reset, Offline, Set ZDE = 11 columns here).
    assert_eq!(base_cells().len(), 7 * 11);
    let failures: Vec<String> =
        cases.iter().filter_map(|c| run(c).err().map(|e| format!("  [{}] {e}", c.name))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn zns_write_outcome_reports_transitions() {
    let z = Zones::new(g()).unwrap();
    put(&z, 2, ZSIO, 1);
    put(&z, 3, ZSIO, 1);
    let o = super::write(&z, S, 2).unwrap();
    assert!(o.opened && !o.filled);
    assert_eq!(o.closed_by_controller, Some(24));
    let o = super::write(&z, S + 2, 8).unwrap();
    assert!(!o.opened && o.filled && o.closed_by_controller.is_none());
    assert_eq!(z.implicitly_opened(), vec![3]);
    // FUA: the zone is durable up to the end of the write.
    let o = z.write(37, 1, true, |_| Ok::<(), ()>(())).map_err(status).unwrap();
    assert_eq!(o.lba, 37);
    let info = z.zone_info(3).unwrap();
    assert_eq!((info.written_extent, info.durable_extent), (38, 38));
}
