//! Multi-threaded stress: writers on their own zones, appenders sharing
//! zones, a thread doing zone management (including Select All) and
//! faults-free chaos, a reader and an invariant checker, all at once on a
//! namespace with tight open/active limits. Ends with exact checks: every
//! writer's write pointer is where it left it, appends to shared zones got
//! disjoint ranges that tile the written extent, and the counts match the
//! states. A watchdog fails the test instead of hanging on a deadlock.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zns_spec::{ReportFilter, StatusCode, ZoneSendAction, ZoneState};

use super::geo;
use crate::zns::{ZoneError, Zones};

const ZS: u64 = 64;
const CAP: u64 = 60;
const ZONES: u32 = 16;
const MOR: u32 = 4;
const MAR: u32 = 6;

struct Shared {
    zones: Zones,
    /// A tag per block: which write last stored data there.
    media: Vec<AtomicU32>,
    next_tag: AtomicU32,
    stop: AtomicBool,
}

impl Shared {
    /// The data callback of a write of `n` blocks: stores a fresh tag.
    fn store(&self, lba: u64, n: u64) -> u32 {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        for b in lba..lba + n {
            self.media[b as usize].store(tag, Ordering::Relaxed);
        }
        tag
    }
}

/// Writer `t` owns zones 2t and 2t+1; returns their final write pointers.
fn writer(s: &Shared, t: u32, rounds: usize) -> [(u32, u64); 2] {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(t));
    let own = [2 * t, 2 * t + 1];
    let mut wp = [0u64; 2];
    for _ in 0..rounds {
        let k = rng.gen_range(0..2);
        let zone = own[k];
        let start = u64::from(zone) * ZS;
        let n = rng.gen_range(1..=4).min(CAP - wp[k]);
        let fua = rng.gen_bool(0.1);
        let slba = start + wp[k];
        match s.zones.write(slba, n, fua, |l| {
            assert_eq!(l, slba);
            s.store(l, n);
            Ok::<(), ()>(())
        }) {
            Ok(o) => {
                assert_eq!(o.lba, slba);
                wp[k] += n;
                if o.filled {
                    s.zones.send(start, ZoneSendAction::Reset, false, None).unwrap();
                    wp[k] = 0;
                }
            }
            Err(ZoneError::Status(StatusCode::TooManyActiveZones)) => {
                // Free an active resource: finish and reset the other zone.
                let other = own[1 - k];
                let ostart = u64::from(other) * ZS;
                s.zones.send(ostart, ZoneSendAction::Finish, false, None).unwrap();
                s.zones.send(ostart, ZoneSendAction::Reset, false, None).unwrap();
                wp[1 - k] = 0;
            }
            Err(ZoneError::Status(StatusCode::TooManyOpenZones)) => std::thread::yield_now(),
            Err(ZoneError::Status(StatusCode::ZoneIsFull)) => {
                // Finished by a Select All from the chaos thread.
                s.zones.send(start, ZoneSendAction::Reset, false, None).unwrap();
                wp[k] = 0;
            }
            Err(e) => panic!("writer {t}: write {n} at {slba} (wp {}): {e:?}", wp[k]),
        }
        let info = s.zones.zone_info(zone).unwrap();
        assert_eq!(info.written_extent - start, wp[k], "writer {t} zone {zone}");
    }
    [(own[0], wp[0]), (own[1], wp[1])]
}

/// Appends to the shared zones 8..12; returns (lba, blocks, tag) per success.
fn appender(s: &Shared, t: u64, rounds: usize) -> Vec<(u64, u64, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(100 + t);
    let mut done = Vec::new();
    for _ in 0..rounds {
        let zone = rng.gen_range(8..12u64);
        let n = rng.gen_range(1..=3);
        let mut tag = 0;
        match s.zones.append(zone * ZS, n, 8, rng.gen_bool(0.1), |l| {
            tag = s.store(l, n);
            Ok::<(), ()>(())
        }) {
            Ok(o) => {
                assert_eq!(o.lba / ZS, zone);
                done.push((o.lba, n, tag));
            }
            Err(ZoneError::Status(
                StatusCode::ZoneIsFull
                | StatusCode::ZoneBoundaryError
                | StatusCode::TooManyActiveZones
                | StatusCode::TooManyOpenZones,
            )) => std::thread::yield_now(),
            Err(e) => panic!("appender {t}: {e:?}"),
        }
    }
    done
}

/// Zone management on zones 12..16 plus occasional Select All Close/Finish
/// on the whole namespace.
fn chaos(s: &Shared, rounds: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..rounds {
        let zone = rng.gen_range(12..16u32);
        let start = u64::from(zone) * ZS;
        let r = match rng.gen_range(0..100) {
            0..=19 => s.zones.send(start, ZoneSendAction::Open, false, None).map(|_| ()),
            20..=39 => s.zones.send(start, ZoneSendAction::Close, false, None).map(|_| ()),
            40..=49 => s.zones.send(start, ZoneSendAction::Finish, false, None).map(|_| ()),
            50..=64 => s.zones.send(start, ZoneSendAction::Reset, false, None).map(|_| ()),
            65..=96 => {
                let wp = s.zones.zone_info(zone).unwrap().written_extent;
                let data = |l| {
                    s.store(l, 1);
                    Ok::<(), ()>(())
                };
                s.zones.write(wp, 1, false, data).map(|_| ()).map_err(|e| e.status().unwrap())
            }
            97..=98 => s.zones.send(0, ZoneSendAction::Close, true, None).map(|_| ()),
            _ => s.zones.send(0, ZoneSendAction::Finish, true, None).map(|_| ()),
        };
        match r {
            Ok(())
            | Err(
                StatusCode::TooManyActiveZones
                | StatusCode::TooManyOpenZones
                | StatusCode::InvalidZoneStateTransition
                | StatusCode::ZoneIsFull,
            ) => {}
            Err(e) => panic!("chaos: {e}"),
        }
    }
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn checker(s: &Shared) {
    let mut out = vec![0u8; 64 + 64 * ZONES as usize];
    while !s.stop.load(Ordering::Relaxed) {
        s.zones.check_invariants().unwrap();
        assert!(s.zones.open_zones() <= MOR && s.zones.active_zones() <= MAR);
        s.zones.report(0, ReportFilter::All, false, false, &mut out).unwrap();
        assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), u64::from(ZONES));
        std::thread::yield_now();
    }
}

fn reader(s: &Shared) {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    while !s.stop.load(Ordering::Relaxed) {
        let zone = rng.gen_range(0..ZONES as u64);
        let off = rng.gen_range(0..ZS);
        let n = rng.gen_range(1..=ZS - off);
        s.zones
            .read_extent(zone * ZS + off, n, |l, k, written| {
                if written {
                    for b in l..l + k {
                        assert_ne!(s.media[b as usize].load(Ordering::Relaxed), 0, "block {b}");
                    }
                }
            })
            .unwrap();
    }
}

#[test]
fn zns_threads_no_deadlock_and_exact_accounting() {
    let g = geo(ZS, CAP, ZONES, Some(MOR), Some(MAR), 0, false);
    let s = Arc::new(Shared {
        zones: Zones::new(g).unwrap(),
        media: (0..ZS * u64::from(ZONES)).map(|_| AtomicU32::new(0)).collect(),
        next_tag: AtomicU32::new(1),
        stop: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel();
    let s2 = Arc::clone(&s);
    std::thread::spawn(move || {
        let result = std::thread::scope(|sc| {
            // Stops the reader and the checker however this body ends, so a
            // panicking worker fails the test instead of hanging it.
            let _stop = StopOnDrop(&s2.stop);
            let writers: Vec<_> = (0..4)
                .map(|t| {
                    sc.spawn({
                        let s = &*s2;
                        move || writer(s, t, 3000)
                    })
                })
                .collect();
            let appenders: Vec<_> = (0..2)
                .map(|t| {
                    sc.spawn({
                        let s = &*s2;
                        move || appender(s, t, 2000)
                    })
                })
                .collect();
            let ch = sc.spawn(|| chaos(&s2, 3000));
            sc.spawn(|| checker(&s2));
            sc.spawn(|| reader(&s2));
            let w: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
            let a: Vec<_> = appenders.into_iter().flat_map(|h| h.join().unwrap()).collect();
            ch.join().unwrap();
            (w, a)
        });
        let _ = tx.send(result);
    });
    let (writers, appends) = match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no progress in 300 s: deadlock?"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a test thread panicked"),
    };
    let z = &s.zones;
    z.check_invariants().unwrap();
    // Writers' zones are exactly where their owners left them.
    for (zone, wp) in writers.into_iter().flatten() {
        let info = z.zone_info(zone).unwrap();
        assert_eq!(info.written_extent - info.start, wp, "zone {zone}");
    }
    // Appends to the shared zones tile each zone's written extent exactly,
    // and the data landed where the completion said.
    for zone in 8..12u64 {
        let mut mine: Vec<_> = appends.iter().filter(|a| a.0 / ZS == zone).copied().collect();
        mine.sort();
        let mut next = zone * ZS;
        for &(lba, n, tag) in &mine {
            assert_eq!(lba, next, "zone {zone}: gap or overlap at {lba}");
            for b in lba..lba + n {
                assert_eq!(s.media[b as usize].load(Ordering::Relaxed), tag, "block {b}");
            }
            next += n;
        }
        let info = z.zone_info(zone as u32).unwrap();
        assert_eq!(info.written_extent, next, "zone {zone}");
        assert!(info.state != ZoneState::Empty || next == zone * ZS);
    }
    let st: Vec<_> = (0..ZONES).map(|i| z.zone_info(i).unwrap().state).collect();
    let open = st.iter().filter(|s| s.is_open()).count() as u32;
    let active = st.iter().filter(|s| s.is_active()).count() as u32;
    assert_eq!((z.open_zones(), z.active_zones()), (open, active));
}
