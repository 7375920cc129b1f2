//! Scenario tests: geometry, Select All, reports, reads, power cuts, the
//! durable image, the Changed Zone List.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zns_spec::{
    ReportFilter, ReportHeader, StatusCode, ZoneAttributes, ZoneDescriptor, ZoneSendAction,
    ZoneState,
};

use super::{geo, put, states, status, write, Zones};
use crate::zns::durable::crc32c;
use crate::zns::{DurableError, GeometryError, ZoneError, ZoneGeometry};

use ZoneState::{
    Closed as ZSC, Empty as ZSE, ExplicitlyOpen as ZSEO, Full as ZSF, ImplicitlyOpen as ZSIO,
    Offline as ZSO, ReadOnly as ZSRO,
};

const EXT: [u8; 64] = [0x5A; 64];

/// Zone size 8 (= capacity), 9 zones, no limits, 64-byte extensions:
/// 0 ZSE, 1 ZSIO(2), 2 ZSEO(2), 3 ZSC(2), 4 ZSF(8), 5 ZSRO(2), 6 ZSO,
/// 7 ZSC by Set ZDE (nothing written, ZDEV), 8 ZSF finished at 3.
fn mixed() -> Zones {
    let z = Zones::new(geo(8, 8, 9, None, None, 64, false)).unwrap();
    put(&z, 1, ZSIO, 2);
    put(&z, 2, ZSEO, 2);
    put(&z, 3, ZSC, 2);
    put(&z, 4, ZSF, 8);
    put(&z, 5, ZSRO, 2);
    put(&z, 6, ZSO, 0);
    z.send(56, ZoneSendAction::SetDescriptorExtension, false, Some(&EXT)).unwrap();
    put(&z, 8, ZSF, 3);
    z.check_invariants().unwrap();
    z
}

#[test]
fn zns_geometry_validation() {
    let ok = geo(12, 10, 4, Some(2), Some(3), 64, false);
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(ok.namespace_blocks(), 48);
    assert_eq!((ok.zdes(), ok.mor_field(), ok.mar_field()), (1, 1, 2));
    assert_eq!(geo(12, 10, 4, None, None, 0, false).mor_field(), u32::MAX);
    let bad = |g: ZoneGeometry| Zones::new(g).unwrap_err();
    assert_eq!(bad(geo(0, 0, 4, None, None, 0, false)), GeometryError::ZeroZoneSize);
    assert_eq!(
        bad(geo(8, 9, 4, None, None, 0, false)),
        GeometryError::Capacity { capacity: 9, size: 8 }
    );
    assert!(matches!(bad(geo(8, 0, 4, None, None, 0, false)), GeometryError::Capacity { .. }));
    assert_eq!(bad(geo(8, 8, 0, None, None, 0, false)), GeometryError::NoZones);
    assert!(matches!(
        bad(geo(u64::MAX / 2, 8, 3, None, None, 0, false)),
        GeometryError::TooLarge { .. }
    ));
    assert_eq!(bad(geo(8, 8, 4, Some(0), None, 0, false)), GeometryError::ZeroLimit);
    assert_eq!(bad(geo(8, 8, 4, None, Some(0), 0, false)), GeometryError::ZeroLimit);
    assert_eq!(
        bad(geo(8, 8, 4, Some(3), Some(2), 0, false)),
        GeometryError::OpenExceedsActive { open: 3, active: 2 }
    );
    assert_eq!(bad(geo(8, 8, 4, None, None, 65, false)), GeometryError::ExtensionSize(65));
    assert_eq!(bad(geo(8, 8, 4, None, None, 256 * 64, false)), GeometryError::ExtensionSize(16384));
    // Limits above the zone count never bind but are accepted.
    assert!(Zones::new(geo(8, 8, 2, Some(14), Some(14), 0, false)).is_ok());
    let z = Zones::new(ok).unwrap();
    assert_eq!((z.zone_of(47), z.zone_of(48)), (Some(3), None));
    assert!(z.descriptor(4).is_none() && z.zone_info(4).is_none());
}

#[test]
fn zns_select_all_scopes() {
    let all = |a| {
        let z = mixed();
        let out = z.send(0xDEAD_BEEF, a, true, None).unwrap();
        z.check_invariants().unwrap();
        (states(&z), out, z)
    };
    let (s, out, _) = all(ZoneSendAction::Close);
    assert_eq!(s, [ZSE, ZSC, ZSC, ZSC, ZSF, ZSRO, ZSO, ZSC, ZSF]);
    assert_eq!(out.transitioned, [1, 2]);

    let (s, out, z) = all(ZoneSendAction::Finish);
    assert_eq!(s, [ZSE, ZSF, ZSF, ZSF, ZSF, ZSRO, ZSO, ZSF, ZSF]);
    assert_eq!(out.transitioned, [1, 2, 3, 7]);
    assert!(z.zone_info(7).unwrap().attrs.has(ZoneAttributes::EXTENSION_VALID));
    assert_eq!((z.open_zones(), z.active_zones()), (0, 0));

    let (s, out, z) = all(ZoneSendAction::Reset);
    assert_eq!(s, [ZSE, ZSE, ZSE, ZSE, ZSE, ZSRO, ZSO, ZSE, ZSE]);
    assert_eq!(out.transitioned, [1, 2, 3, 4, 7, 8]);
    assert_eq!(out.released, [(8, 8), (16, 8), (24, 8), (32, 8), (56, 8), (64, 8)]);
    assert_eq!(z.zone_info(7).unwrap().attrs, ZoneAttributes(0));
    assert_eq!(z.extension(7).unwrap(), vec![0; 64]);

    let (s, out, _) = all(ZoneSendAction::Offline);
    assert_eq!(s, [ZSE, ZSIO, ZSEO, ZSC, ZSF, ZSO, ZSO, ZSC, ZSF]);
    assert_eq!((out.transitioned, out.released), (vec![5], vec![(40, 8)]));

    let (s, out, z) = all(ZoneSendAction::Open);
    assert_eq!(s, [ZSE, ZSIO, ZSEO, ZSEO, ZSF, ZSRO, ZSO, ZSEO, ZSF]);
    assert_eq!(out.transitioned, [3, 7]);
    assert_eq!((z.open_zones(), z.active_zones()), (4, 4));

    let z = mixed();
    let e = z.send(0, ZoneSendAction::SetDescriptorExtension, true, Some(&EXT));
    assert_eq!(e, Err(StatusCode::InvalidField));
    // A select-all action with nothing in scope succeeds and changes nothing.
    let z = Zones::new(geo(8, 8, 3, None, None, 0, false)).unwrap();
    for a in [ZoneSendAction::Open, ZoneSendAction::Close, ZoneSendAction::Reset] {
        assert_eq!(z.send(0, a, true, None).unwrap().transitioned, Vec::<u32>::new());
    }
}

#[test]
fn zns_open_all_is_all_or_nothing() {
    let z = Zones::new(geo(8, 8, 6, Some(3), Some(4), 0, false)).unwrap();
    put(&z, 0, ZSC, 1);
    put(&z, 1, ZSC, 1);
    put(&z, 2, ZSIO, 1);
    put(&z, 3, ZSIO, 1);
    let before = states(&z);
    // 2 open + 2 closed > MOR 3: nothing changes, no implicit close either.
    assert_eq!(z.send(0, ZoneSendAction::Open, true, None), Err(StatusCode::TooManyOpenZones));
    assert_eq!(states(&z), before);
    assert_eq!((z.open_zones(), z.active_zones()), (2, 4));
    z.send(16, ZoneSendAction::Finish, false, None).unwrap();
    let out = z.send(0, ZoneSendAction::Open, true, None).unwrap();
    assert_eq!(out.transitioned, [0, 1]);
    assert_eq!(states(&z), [ZSEO, ZSEO, ZSF, ZSIO, ZSE, ZSE]);
    assert_eq!((z.open_zones(), z.active_zones()), (3, 3));
    z.check_invariants().unwrap();
}

/// Splits a report buffer into header count, descriptors and extensions.
fn parse(out: &[u8], ext: usize) -> (u64, Vec<ZoneDescriptor>, Vec<Vec<u8>>) {
    let count = ReportHeader::from_bytes(out[..64].try_into().unwrap()).zones;
    let entry = 64 + ext;
    let (mut d, mut e) = (Vec::new(), Vec::new());
    let mut at = 64;
    while at + entry <= out.len() {
        let b: &[u8; 64] = out[at..at + 64].try_into().unwrap();
        if b.iter().all(|&x| x == 0) {
            break;
        }
        d.push(ZoneDescriptor::from_bytes(b).unwrap());
        e.push(out[at + 64..at + entry].to_vec());
        at += entry;
    }
    (count, d, e)
}

const FILTERS: [ReportFilter; 9] = [
    ReportFilter::All,
    ReportFilter::Empty,
    ReportFilter::ImplicitlyOpen,
    ReportFilter::ExplicitlyOpen,
    ReportFilter::Closed,
    ReportFilter::Full,
    ReportFilter::ReadOnly,
    ReportFilter::Offline,
    ReportFilter::ResetRecommended,
];

#[test]
fn zns_report_every_filter_partial_and_not() {
    let z = mixed();
    z.set_reset_recommended(4).unwrap();
    let st = states(&z);
    for filter in FILTERS {
        for from_zone in [0u32, 3] {
            for mid in [0u64, 5] {
                let slba = u64::from(from_zone) * 8 + mid;
                let want: Vec<u32> = (from_zone..9)
                    .filter(|&i| filter.matches(st[i as usize], z.zone_info(i).unwrap().attrs))
                    .collect();
                let name = format!("{filter:?} from {slba}");
                // Room for everything.
                let mut out = vec![0xFFu8; 64 + 64 * 12];
                z.report(slba, filter, false, false, &mut out).unwrap();
                let (count, d, _) = parse(&out, 0);
                assert_eq!(count, want.len() as u64, "{name}");
                let got: Vec<u32> = d.iter().map(|d| (d.start / 8) as u32).collect();
                assert_eq!(got, want, "{name}");
                assert!(out[64 + 64 * want.len()..].iter().all(|&b| b == 0), "{name}: tail zeroed");
                for d in &d {
                    assert_eq!(Some(*d), z.descriptor((d.start / 8) as u32), "{name}");
                }
                // Room for two: partial counts what is returned.
                for partial in [false, true] {
                    let mut out = vec![0u8; 64 + 64 * 2];
                    z.report(slba, filter, partial, false, &mut out).unwrap();
                    let (count, d, _) = parse(&out, 0);
                    let shown = want.len().min(2);
                    let expect = if partial { shown } else { want.len() };
                    assert_eq!(count, expect as u64, "{name} partial={partial}");
                    assert_eq!(d.len(), shown, "{name} partial={partial}");
                }
            }
        }
    }
}

#[test]
fn zns_report_fields_and_buffers() {
    let z = mixed();
    let mut out = vec![0u8; 64 + 64 * 9];
    z.report(0, ReportFilter::All, false, false, &mut out).unwrap();
    let (_, d, _) = parse(&out, 0);
    let wps: Vec<u64> = d.iter().map(|d| d.write_pointer).collect();
    let inv = ZoneDescriptor::INVALID_WRITE_POINTER;
    assert_eq!(wps, [0, 10, 18, 26, inv, inv, inv, 56, inv]);
    assert!(d.iter().all(|d| d.capacity == 8 && d.zone_type as u8 == 2));
    assert_eq!(d[7].attrs, ZoneAttributes(ZoneAttributes::EXTENSION_VALID));

    // Tiny buffers: whatever fits of the header.
    for len in [0usize, 1, 10, 63, 64, 64 + 63] {
        for partial in [false, true] {
            let mut out = vec![0xEEu8; len];
            z.report(0, ReportFilter::All, partial, false, &mut out).unwrap();
            let mut full = [0u8; 64];
            full[..8].copy_from_slice(&(if partial { 0u64 } else { 9 }).to_le_bytes());
            let n = len.min(64);
            assert_eq!(&out[..n], &full[..n], "len {len} partial {partial}");
            assert!(out[n..].iter().all(|&b| b == 0));
        }
    }
    // Exactly one descriptor fits.
    let mut out = vec![0u8; 128];
    z.report(0, ReportFilter::All, true, false, &mut out).unwrap();
    assert_eq!(parse(&out, 0).0, 1);

    // Errors.
    assert_eq!(
        z.report(72, ReportFilter::All, false, false, &mut out),
        Err(StatusCode::LbaOutOfRange)
    );
    let plain = Zones::new(geo(8, 8, 2, None, None, 0, false)).unwrap();
    assert_eq!(
        plain.report(0, ReportFilter::All, false, true, &mut out),
        Err(StatusCode::InvalidField)
    );
}

#[test]
fn zns_extended_report() {
    let z = mixed();
    let mut out = vec![0u8; 64 + 128 * 9];
    z.report(0, ReportFilter::All, false, true, &mut out).unwrap();
    let (count, d, e) = parse(&out, 64);
    assert_eq!((count, d.len()), (9, 9));
    for (i, ext) in e.iter().enumerate() {
        let want = if i == 7 { EXT.to_vec() } else { vec![0; 64] };
        assert_eq!(ext, &want, "zone {i}");
    }
    // Entries are whole: a descriptor without room for its extension is left out.
    let mut out = vec![0u8; 64 + 128 + 100];
    z.report(56, ReportFilter::Closed, true, true, &mut out).unwrap();
    let (count, d, e) = parse(&out, 64);
    assert_eq!((count, d.len(), e[0].clone()), (1, 1, EXT.to_vec()));
    assert!(out[192..].iter().all(|&b| b == 0));
}

#[test]
fn zns_read_extent_runs() {
    let z = Zones::new(geo(12, 10, 4, None, None, 0, true)).unwrap();
    put(&z, 0, ZSIO, 5);
    put(&z, 1, ZSF, 10);
    put(&z, 3, ZSRO, 4);
    let runs = |s, n| {
        let mut v = Vec::new();
        z.read_extent(s, n, |l, c, w| v.push((l, c, w))).map(|_| v)
    };
    assert_eq!(
        runs(0, 48).unwrap(),
        [
            (0, 5, true),
            (5, 7, false),
            (12, 10, true),
            (22, 14, false),
            (36, 4, true),
            (40, 8, false)
        ]
    );
    assert_eq!(runs(3, 1).unwrap(), [(3, 1, true)]);
    assert_eq!(runs(7, 2).unwrap(), [(7, 2, false)]);
    assert_eq!(runs(20, 4).unwrap(), [(20, 2, true), (22, 2, false)]);
    assert_eq!(runs(0, 0), Err(StatusCode::InvalidField));
    assert_eq!(runs(47, 2), Err(StatusCode::LbaOutOfRange));
    // A zone finished early shows only what was written.
    z.send(0, ZoneSendAction::Finish, false, None).unwrap();
    assert_eq!(runs(0, 12).unwrap(), [(0, 5, true), (5, 7, false)]);
    z.set_offline(2).unwrap();
    assert_eq!(runs(20, 8), Err(StatusCode::ZoneIsOffline));
    assert_eq!(runs(24, 1), Err(StatusCode::ZoneIsOffline));
}

/// Zone size = capacity 16, 8 zones, MOR 4, 64-byte extensions. Builds the
/// power-cut scenario; returns the zones and each zone's (durable, written).
fn power_scenario() -> Zones {
    let z = Zones::new(geo(16, 16, 8, Some(4), None, 64, false)).unwrap();
    write(&z, 0, 4).unwrap();
    z.flush();
    write(&z, 4, 4).unwrap(); // zone 0: durable 4, written 8
    z.write(16, 5, true, |_| Ok::<(), ()>(())).map_err(status).unwrap(); // zone 1: FUA
    write(&z, 32, 3).unwrap(); // zone 2: nothing durable
    write(&z, 48, 16).unwrap(); // zone 3: filled, durable
    write(&z, 64, 3).unwrap();
    z.send(64, ZoneSendAction::Finish, false, None).unwrap(); // zone 4: finished, durable
    z.send(80, ZoneSendAction::Open, false, None).unwrap(); // zone 5: ZSEO, nothing written
    z.send(96, ZoneSendAction::SetDescriptorExtension, false, Some(&EXT)).unwrap(); // zone 6
    write(&z, 112, 2).unwrap();
    z.send(112, ZoneSendAction::Close, false, None).unwrap(); // zone 7: closed, undurable
    z.check_invariants().unwrap();
    z
}

#[test]
fn zns_power_cut_rolls_back_only_undurable_tails() {
    let mut seen0 = std::collections::BTreeSet::new();
    let mut seen2 = std::collections::BTreeSet::new();
    for seed in 0..300u64 {
        let z = power_scenario();
        let before: Vec<_> = (0..8).map(|i| z.zone_info(i).unwrap()).collect();
        let dropped = z.power_cut(&mut ChaCha8Rng::seed_from_u64(seed));
        z.check_invariants().unwrap();
        let after: Vec<_> = (0..8).map(|i| z.zone_info(i).unwrap()).collect();
        let mut expect_dropped = Vec::new();
        for (b, a) in before.iter().zip(&after) {
            assert!(
                a.written_extent >= b.durable_extent && a.written_extent <= b.written_extent,
                "seed {seed} zone {}: {} not in [{}, {}]",
                b.index,
                a.written_extent,
                b.durable_extent,
                b.written_extent
            );
            assert_eq!(a.durable_extent, a.written_extent);
            if a.written_extent < b.written_extent {
                expect_dropped.push((a.written_extent, b.written_extent - a.written_extent));
            }
            // Power-on form: nothing open; active zones Closed unless empty
            // without extension.
            let want = match b.state {
                s if s.is_active() => {
                    if a.written_extent == a.start && !b.attrs.has(ZoneAttributes::EXTENSION_VALID)
                    {
                        ZSE
                    } else {
                        ZSC
                    }
                }
                s => s,
            };
            assert_eq!(a.state, want, "seed {seed} zone {}", b.index);
        }
        assert_eq!(dropped, expect_dropped, "seed {seed}");
        assert_eq!(z.open_zones(), 0);
        let closed = states(&z).iter().filter(|&&s| s == ZSC).count() as u32;
        assert_eq!(z.active_zones(), closed);
        // Durable zones untouched.
        assert_eq!(after[1].written_extent, 16 + 5);
        assert_eq!((after[3].state, after[3].written_extent), (ZSF, 64));
        assert_eq!((after[4].state, after[4].written_extent), (ZSF, 67));
        assert_eq!(after[5].state, ZSE);
        assert_eq!((after[6].state, z.extension(6).unwrap()), (ZSC, EXT.to_vec()));
        // Lost blocks read as zeros.
        let mut written = 0;
        z.read_extent(0, 16, |_, n, w| written += if w { n } else { 0 }).unwrap();
        assert_eq!(written, after[0].written_extent);
        seen0.insert(after[0].written_extent);
        seen2.insert(after[2].written_extent - 32);
        // The namespace works again: the opened zones are free.
        z.send(80, ZoneSendAction::Open, false, None).unwrap();
    }
    // Every rollback point occurs, including torn multi-block writes.
    assert_eq!(seen0, (4..=8).collect());
    assert_eq!(seen2, (0..=3).collect());
}

#[test]
fn zns_power_cut_after_flush_loses_nothing() {
    let z = power_scenario();
    z.set_read_only(7).unwrap();
    z.flush();
    let before: Vec<_> = (0..8).map(|i| z.zone_info(i).unwrap().written_extent).collect();
    assert!(z.power_cut(&mut ChaCha8Rng::seed_from_u64(1)).is_empty());
    let after: Vec<_> = (0..8).map(|i| z.zone_info(i).unwrap().written_extent).collect();
    assert_eq!(before, after);
    assert_eq!(states(&z), [ZSC, ZSC, ZSC, ZSF, ZSF, ZSE, ZSC, ZSRO]);
    assert_eq!(z.take_changed_zones(10), Vec::<u64>::new(), "the log is volatile");
    // FUA makes the whole prefix durable.
    write(&z, 8, 2).unwrap();
    z.write(10, 1, true, |_| Ok::<(), ()>(())).map_err(status).unwrap();
    assert!(z.power_cut(&mut ChaCha8Rng::seed_from_u64(2)).is_empty());
    assert_eq!(z.zone_info(0).unwrap().written_extent, 11);
}

/// What the worst power cut leaves of `z`: (state, written, attrs, ext).
fn worst_case(z: &Zones) -> Vec<(ZoneState, u64, u8, Vec<u8>)> {
    (0..z.geometry().zones)
        .map(|i| {
            let info = z.zone_info(i).unwrap();
            let zdev = info.attrs.has(ZoneAttributes::EXTENSION_VALID);
            let w = info.durable_extent - info.start;
            match info.state {
                s if s.is_active() && w == 0 && !zdev => (ZSE, 0, 0, vec![0; 64]),
                s if s.is_active() => (ZSC, w, info.attrs.0, z.extension(i).unwrap()),
                s => (s, w, info.attrs.0, z.extension(i).unwrap()),
            }
        })
        .collect()
}

fn snapshot(z: &Zones) -> Vec<(ZoneState, u64, u8, Vec<u8>)> {
    (0..z.geometry().zones)
        .map(|i| {
            let info = z.zone_info(i).unwrap();
            (info.state, info.written_extent - info.start, info.attrs.0, z.extension(i).unwrap())
        })
        .collect()
}

#[test]
fn zns_durable_image_round_trip() {
    let z = power_scenario();
    z.finish_by_controller(7).unwrap();
    z.set_read_only(2).unwrap();
    let image = z.encode_durable();
    let back = Zones::decode_durable(z.geometry().clone(), &image).unwrap();
    back.check_invariants().unwrap();
    assert_eq!(snapshot(&back), worst_case(&z));
    assert_eq!(back.encode_durable(), image, "re-encoding is stable");
    assert_eq!(back.open_zones(), 0);
    assert_eq!(back.active_zones(), 3, "zones 0, 1 and 6 are Closed");
    assert!(back.zone_info(7).unwrap().attrs.has(ZoneAttributes::FINISHED_BY_CONTROLLER));

    // After a flush, the image is exactly the power-on form of the zones.
    z.flush();
    let back = Zones::decode_durable(z.geometry().clone(), &z.encode_durable()).unwrap();
    z.power_cut(&mut ChaCha8Rng::seed_from_u64(0));
    assert_eq!(snapshot(&back), snapshot(&z));

    // Fresh namespaces round-trip too, and the decoded zones work.
    let g = geo(12, 10, 3, Some(1), Some(2), 0, true);
    let fresh = Zones::new(g.clone()).unwrap();
    let back = Zones::decode_durable(g, &fresh.encode_durable()).unwrap();
    write(&back, 0, 10).unwrap();
    assert_eq!(back.zone_info(0).unwrap().state, ZSF);
}

/// Rewrites zone `zone`'s record in `image` and fixes the checksum.
fn patch(image: &[u8], ext: usize, zone: usize, state: u8, attrs: u8, written: u64) -> Vec<u8> {
    let mut v = image.to_vec();
    let at = 48 + zone * (12 + ext);
    v[at] = state;
    v[at + 1] = attrs;
    v[at + 4..at + 12].copy_from_slice(&written.to_le_bytes());
    reseal(v)
}

fn reseal(mut v: Vec<u8>) -> Vec<u8> {
    let n = v.len() - 4;
    let crc = crc32c(&v[..n]);
    v[n..].copy_from_slice(&crc.to_le_bytes());
    v
}

#[test]
fn zns_durable_image_rejects_corruption() {
    let g = geo(8, 6, 4, Some(1), Some(2), 64, false);
    let z = Zones::new(g.clone()).unwrap();
    put(&z, 2, ZSF, 6);
    put(&z, 0, ZSC, 2);
    z.send(8, ZoneSendAction::SetDescriptorExtension, false, Some(&EXT)).unwrap();
    z.flush();
    let image = z.encode_durable();
    let dec = |b: &[u8]| Zones::decode_durable(g.clone(), b).map(|_| ());
    assert_eq!(dec(&image), Ok(()));

    // Any single flipped bit is caught.
    for i in 0..image.len() {
        for bit in 0..8 {
            let mut bad = image.clone();
            bad[i] ^= 1 << bit;
            assert!(dec(&bad).is_err(), "flip byte {i} bit {bit} accepted");
        }
    }
    assert_eq!(dec(&[]), Err(DurableError::Magic));
    assert_eq!(dec(b"NOTZONES-and-more"), Err(DurableError::Magic));
    assert!(matches!(dec(&image[..image.len() - 1]), Err(DurableError::Length { .. })));
    assert!(matches!(dec(&image[..20]), Err(DurableError::Length { .. })));
    let mut longer = image.clone();
    longer.push(0);
    assert!(matches!(dec(&longer), Err(DurableError::Length { .. })));
    let mut v2 = image.clone();
    v2[8] = 2;
    assert_eq!(dec(&reseal(v2)), Err(DurableError::Version(2)));
    let mut other = g.clone();
    other.max_open = Some(2);
    assert_eq!(
        Zones::decode_durable(other, &image).map(|_| ()),
        Err(DurableError::GeometryMismatch)
    );
    let mut other = g.clone();
    other.zone_capacity = 7;
    assert_eq!(
        Zones::decode_durable(other, &image).map(|_| ()),
        Err(DurableError::GeometryMismatch)
    );
    let mut broken = g.clone();
    broken.zone_capacity = 9;
    assert!(matches!(
        Zones::decode_durable(broken, &image).map(|_| ()),
        Err(DurableError::Geometry(_))
    ));

    // Impossible zones, with a valid checksum.
    let zone_err = |b: Vec<u8>| matches!(dec(&b), Err(DurableError::Zone { .. }));
    let zdev = ZoneAttributes::EXTENSION_VALID;
    assert!(zone_err(patch(&image, 64, 3, 0x2, 0, 1)), "implicitly open");
    assert!(zone_err(patch(&image, 64, 3, 0x3, 0, 1)), "explicitly open");
    assert!(zone_err(patch(&image, 64, 3, 0x5, 0, 0)), "reserved state");
    assert!(zone_err(patch(&image, 64, 3, 0x1, 0, 1)), "empty with data");
    assert!(zone_err(patch(&image, 64, 3, 0x1, zdev, 0)), "empty with ZDEV");
    assert!(zone_err(patch(&image, 64, 0, 0x4, 0, 6)), "closed at capacity");
    assert!(zone_err(patch(&image, 64, 0, 0x4, 0, 0)), "closed, nothing, no ZDEV");
    assert!(zone_err(patch(&image, 64, 2, 0xE, 0, 7)), "past capacity");
    assert!(zone_err(patch(&image, 64, 2, 0xE, 0x40, 6)), "unknown attribute");
    assert!(zone_err(patch(&image, 64, 0, 0x4, 0x01, 2)), "ZFC outside Full");
    assert!(zone_err(patch(&image, 64, 1, 0x4, 0, 1)), "extension without ZDEV");
    assert!(zone_err(patch(&image, 64, 3, 0xF, 0, 2)), "offline with data");
    // The bytes once reserved are the zone's write generation.
    let mut generation = image.clone();
    generation[48 + 2] = 1;
    let z = Zones::decode_durable(g.clone(), &reseal(generation)).unwrap();
    assert_eq!((z.generations().get(0), z.generations().get(1)), (1, 0));
    assert_eq!(
        dec(&patch(&image, 64, 3, 0x4, 0, 1)),
        Err(DurableError::TooManyActive { active: 3, max: 2 })
    );
    assert!(dec(&patch(&image, 64, 2, 0xD, 0, 3)).is_ok(), "read only is fine");
    // ZDEV needs extension support.
    let g0 = geo(8, 6, 2, None, None, 0, false);
    let plain = Zones::new(g0.clone()).unwrap().encode_durable();
    let bad = patch(&plain, 0, 0, 0x4, ZoneAttributes::EXTENSION_VALID, 0);
    assert!(matches!(Zones::decode_durable(g0, &bad), Err(DurableError::Zone { zone: 0, .. })));
}

#[test]
fn zns_changed_zone_list() {
    let z = Zones::new(geo(8, 8, 6, Some(2), Some(2), 0, false)).unwrap();
    put(&z, 0, ZSIO, 1);
    put(&z, 1, ZSC, 1);
    assert_eq!(z.changed_zones_generation(), 0);
    z.set_read_only(0).unwrap();
    z.set_read_only(0).unwrap(); // no-op, listed once
    z.set_offline(3).unwrap();
    z.finish_by_controller(1).unwrap();
    assert_eq!((z.open_zones(), z.active_zones()), (0, 0));
    assert_eq!(z.zone_info(1).unwrap().attrs.0, ZoneAttributes::FINISHED_BY_CONTROLLER);
    put(&z, 2, ZSIO, 1);
    z.set_finish_recommended(2).unwrap();
    z.set_reset_recommended(2).unwrap();
    assert_eq!(z.changed_zones_pending(), 4);
    // Every change counts once, a zone changed twice included.
    assert_eq!(z.changed_zones_generation(), 5);
    assert_eq!(z.take_changed_zones(2), [0, 24]);
    assert_eq!(z.take_changed_zones(10), [8, 16]);
    assert_eq!(z.take_changed_zones(10), Vec::<u64>::new());
    assert_eq!(z.changed_zones_generation(), 5, "taking the list is no change");
    // Host-initiated changes are not listed; fault errors.
    z.send(0, ZoneSendAction::Offline, false, None).unwrap();
    assert_eq!(z.changed_zones_pending(), 0);
    assert_eq!(z.changed_zones_generation(), 5);
    assert_eq!(z.set_read_only(0), Err(StatusCode::InvalidZoneStateTransition));
    assert_eq!(z.set_read_only(6), Err(StatusCode::LbaOutOfRange));
    assert_eq!(z.finish_by_controller(4), Err(StatusCode::InvalidZoneStateTransition));
    assert_eq!(z.set_finish_recommended(4), Err(StatusCode::InvalidZoneStateTransition));
    assert_eq!(z.set_reset_recommended(4), Err(StatusCode::InvalidZoneStateTransition));
    // Finish clears FZR, Reset clears everything.
    let attrs = z.zone_info(2).unwrap().attrs;
    assert!(attrs.has(ZoneAttributes::FINISH_RECOMMENDED | ZoneAttributes::RESET_RECOMMENDED));
    z.send(16, ZoneSendAction::Finish, false, None).unwrap();
    assert_eq!(z.zone_info(2).unwrap().attrs.0, ZoneAttributes::RESET_RECOMMENDED);
    z.send(16, ZoneSendAction::Reset, false, None).unwrap();
    assert_eq!(z.zone_info(2).unwrap().attrs.0, 0);
    z.check_invariants().unwrap();
}

#[test]
fn zns_misc() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Zones>();
    let e: ZoneError<&str> = StatusCode::ZoneIsFull.into();
    assert_eq!(e.to_string(), "Zone Is Full (SCT 1h, SC B9h)");
    assert_eq!(ZoneError::<&str>::Data("boom").to_string(), "data transfer failed: boom");
    let z = Zones::new(geo(8, 8, 2, None, None, 0, false)).unwrap();
    assert!(format!("{z:?}").contains("open: 0"));
}
