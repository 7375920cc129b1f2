//! The conformance suite of the device API: every check is a function of
//! `&dyn ZonedDevice`, so any backend can run it. A check resets every zone
//! before it starts and leaves them reset; it needs at least 8 zones, and
//! it panics with a message naming what the device did wrong.
//!
//! Run the whole suite with [`run_all`], or one check from [`CHECKS`].

#![allow(dead_code)]

pub mod divergence;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_device::{
    Completion, Data, DeviceError, IoBuffer, OpKind, ReportFilter, StatusCode, Target, Zone,
    ZoneAction, ZoneOp, ZoneQueue, ZoneState, ZonedDevice,
};

use divergence::{zone_error, Divergence};

/// A named check.
pub type Check = (&'static str, fn(&dyn ZonedDevice));

/// Every check, in a sensible order.
pub const CHECKS: &[Check] = &[
    ("geometry_and_full_report", geometry_and_full_report),
    ("zone_state_transitions", zone_state_transitions),
    ("select_all_actions", select_all_actions),
    ("invalid_transitions_and_targets", invalid_transitions_and_targets),
    ("write_append_read_round_trips", write_append_read_round_trips),
    ("plain_memory_buffers", plain_memory_buffers),
    ("report_filters_and_partial_reports", report_filters_and_partial_reports),
    ("write_errors_reach_the_caller", write_errors_reach_the_caller),
    ("resource_limits", resource_limits),
    ("write_zeroes_and_flush", write_zeroes_and_flush),
    ("copy", copy),
    ("zone_extensions", zone_extensions),
    ("async_at_depth", async_at_depth),
    ("blocking_calls_keep_async_completions", blocking_calls_keep_async_completions),
    ("queue_full", queue_full),
    ("bad_submissions_return_the_buffer", bad_submissions_return_the_buffer),
    ("queues_on_several_threads", queues_on_several_threads),
    ("per_lba_metadata", per_lba_metadata),
    ("placement_without_fdp", placement_without_fdp),
    ("zrwa_unsupported", zrwa_unsupported),
    ("zrwa_window_and_commits", zrwa_window_and_commits),
    ("zrwa_resources", zrwa_resources),
];

/// One `#[test]` per check named, each on a fresh device from the
/// invoking module's `fn dev() -> Arc<dyn ZonedDevice>`, with this module
/// imported there as `c` (the macro's paths resolve where it is used).
// Not every user of this module makes tests of it.
#[allow(unused_macros)]
macro_rules! check_tests {
    ($($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                c::$check(dev().as_ref());
            }
        )*
    };
}

/// The tests of every check a backend without ZRWA runs (all of
/// [`CHECKS`] but the ZRWA ones, which [`check_tests`] adds where they
/// apply), plus the whole suite in order on one device.
#[allow(unused_macros)]
macro_rules! suite_tests {
    () => {
        check_tests!(
            geometry_and_full_report,
            zone_state_transitions,
            select_all_actions,
            invalid_transitions_and_targets,
            write_append_read_round_trips,
            plain_memory_buffers,
            report_filters_and_partial_reports,
            write_errors_reach_the_caller,
            resource_limits,
            write_zeroes_and_flush,
            copy,
            zone_extensions,
            async_at_depth,
            blocking_calls_keep_async_completions,
            queue_full,
            bad_submissions_return_the_buffer,
            queues_on_several_threads,
            per_lba_metadata,
            placement_without_fdp,
        );
        #[test]
        fn whole_suite_on_one_device() {
            c::run_all(dev().as_ref());
        }
    };
}

/// Runs every check against `dev`.
pub fn run_all(dev: &dyn ZonedDevice) {
    for (name, check) in CHECKS {
        eprintln!("conformance: {name}");
        check(dev);
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A deterministic byte pattern for `blocks` blocks starting at `lba`.
pub fn pattern(seed: u64, lba: u64, blocks: usize, block_size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks * block_size);
    for b in 0..blocks as u64 {
        let mut x = (seed ^ (lba + b).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        for _ in 0..block_size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(x as u8);
        }
    }
    out
}

fn bs(dev: &dyn ZonedDevice) -> usize {
    dev.info().block_size as usize
}

fn buffer(dev: &dyn ZonedDevice, bytes: &[u8]) -> IoBuffer {
    let mut b = dev.alloc(bytes.len()).expect("alloc");
    b.copy_from_slice(bytes);
    b
}

fn zone_lba(dev: &dyn ZonedDevice, index: u64) -> u64 {
    dev.info().zone_start(index).expect("zone exists")
}

fn reset_all(q: &mut dyn ZoneQueue) {
    q.zone_action(ZoneAction::Reset, Target::All).expect("reset all zones");
}

fn zone(q: &mut dyn ZoneQueue, lba: u64) -> Zone {
    q.zone(lba).unwrap_or_else(|e| panic!("report of zone at {lba}: {e}"))
}

fn state(q: &mut dyn ZoneQueue, lba: u64) -> ZoneState {
    zone(q, lba).state
}

/// Asserts that `r` failed with the NVMe status `code` for `op` at `lba`.
#[track_caller]
pub fn expect_status<T: std::fmt::Debug>(
    r: Result<T, DeviceError>,
    code: StatusCode,
    op: OpKind,
    lba: Option<u64>,
) {
    match r {
        Err(DeviceError::Nvme { status, op: o, lba: l }) => {
            assert!(
                status.is(code) && o == op && l == lba,
                "expected {op} at {lba:?} to fail with {code}, got {o} at {l:?}: {status}"
            );
        }
        other => panic!("expected {op} at {lba:?} to fail with {code}, got {other:?}"),
    }
}

fn write_blocks(dev: &dyn ZonedDevice, q: &mut dyn ZoneQueue, lba: u64, blocks: usize, seed: u64) {
    let data = pattern(seed, lba, blocks, bs(dev));
    q.write(lba, &buffer(dev, &data)).unwrap_or_else(|e| panic!("write {blocks} at {lba}: {e}"));
}

fn read_blocks(dev: &dyn ZonedDevice, q: &mut dyn ZoneQueue, lba: u64, blocks: usize) -> Vec<u8> {
    let mut b = dev.alloc(blocks * bs(dev)).expect("alloc");
    q.read(lba, &mut b).unwrap_or_else(|e| panic!("read {blocks} at {lba}: {e}"));
    b.to_vec()
}

fn fresh_queue(dev: &dyn ZonedDevice, depth: usize) -> Box<dyn ZoneQueue> {
    let mut q = dev.queue(depth).expect("queue");
    reset_all(q.as_mut());
    q
}

/// True for QEMU's emulated NVMe controller.
fn is_qemu(dev: &dyn ZonedDevice) -> bool {
    dev.info().model.starts_with("QEMU NVMe")
}

/// Reports a known deviation of the device from the specification that a
/// check accepts (each one is documented where it is accepted).
fn deviation(dev: &dyn ZonedDevice, what: &str) {
    let i = dev.info();
    eprintln!("conformance: known deviation of {} {}: {what}", i.model, i.firmware);
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// The info is coherent and a full report lists every zone, Empty.
pub fn geometry_and_full_report(dev: &dyn ZonedDevice) {
    let info = dev.info().clone();
    assert!(info.zone_count >= 8, "the suite needs at least 8 zones");
    assert!(info.block_size.is_power_of_two() && info.block_size >= 512);
    assert!(info.zone_capacity > 0 && info.zone_capacity <= info.zone_size);
    assert!(info.mdts_bytes >= info.block_size as usize);
    assert!(info.zasl_bytes >= info.block_size as usize && info.zasl_bytes <= info.mdts_bytes);
    if let (Some(o), Some(a)) = (info.max_open, info.max_active) {
        assert!(o <= a, "max open {o} above max active {a}");
    }
    let mut q = fresh_queue(dev, 4);
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX).expect("report all");
    assert_eq!(zones.len() as u64, info.zone_count);
    for (i, z) in zones.iter().enumerate() {
        assert_eq!(z.index, i as u64);
        assert_eq!(z.start, i as u64 * info.zone_size);
        assert_eq!(z.size, info.zone_size);
        assert_eq!(z.state, ZoneState::Empty, "zone {i} after reset all");
        assert_eq!(z.write_pointer, Some(z.start));
        assert_eq!(z.remaining(), z.capacity);
        assert!(z.is_writable());
        if !info.capabilities.variable_zone_capacity {
            assert_eq!(z.capacity, info.zone_capacity, "zone {i}");
        }
    }
    let three = q.report_zones(0, ReportFilter::All, 3).unwrap();
    assert_eq!(three, zones[..3]);
    // From the middle of zone 5: zone 5 first.
    let from = q.report_zones(zone_lba(dev, 5) + 1, ReportFilter::All, 2).unwrap();
    assert_eq!(from.iter().map(|z| z.index).collect::<Vec<_>>(), vec![5, 6]);
    let last = zone_lba(dev, info.zone_count - 1);
    assert_eq!(q.report_zones(last, ReportFilter::All, 10).unwrap().len(), 1);
    let end = info.blocks();
    expect_status(
        q.report_zones(end, ReportFilter::All, 1),
        StatusCode::LbaOutOfRange,
        OpKind::ReportZones,
        Some(end),
    );
}

/// Every transition the host can cause on one zone, seen in reports.
pub fn zone_state_transitions(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z = zone_lba(dev, 1);
    let cap = zone(q, z).capacity;
    use ZoneState::*;

    // Empty -write-> Implicitly Opened, write pointer advances.
    write_blocks(dev, q, z, 1, 1);
    let s = zone(q, z);
    assert_eq!((s.state, s.write_pointer), (ImplicitlyOpen, Some(z + 1)));
    // Implicitly Opened -close-> Closed -write-> Implicitly Opened.
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Closed);
    write_blocks(dev, q, z + 1, 1, 1);
    assert_eq!(state(q, z), ImplicitlyOpen);
    // Implicitly Opened -open-> Explicitly Opened -close-> Closed -open->
    // Explicitly Opened.
    q.zone_action(ZoneAction::Open, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), ExplicitlyOpen);
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Closed);
    q.zone_action(ZoneAction::Open, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), ExplicitlyOpen);
    // A write keeps an explicitly opened zone explicitly opened.
    write_blocks(dev, q, z + 2, 1, 1);
    let s = zone(q, z);
    assert_eq!((s.state, s.write_pointer), (ExplicitlyOpen, Some(z + 3)));
    // Explicitly Opened -finish-> Full, no write pointer.
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    let s = zone(q, z);
    assert_eq!((s.state, s.write_pointer, s.remaining()), (Full, None, 0));
    assert!(!s.is_writable());
    // Full -reset-> Empty.
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    let s = zone(q, z);
    assert_eq!((s.state, s.write_pointer), (Empty, Some(z)));
    // Empty -open-> Explicitly Opened -reset-> Empty.
    q.zone_action(ZoneAction::Open, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), ExplicitlyOpen);
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Empty);
    // Empty -finish-> Full.
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Full);
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    // Closed -finish-> Full; Closed -reset-> Empty.
    write_blocks(dev, q, z, 1, 1);
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Full);
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    write_blocks(dev, q, z, 1, 1);
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Empty);
    // Implicitly Opened -finish-> Full.
    write_blocks(dev, q, z, 1, 1);
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Full);
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    // Writing the whole capacity fills the zone.
    let mut done = 0;
    while done < cap {
        let n = (cap - done).min(dev.info().max_transfer_blocks()) as usize;
        write_blocks(dev, q, z + done, n, 2);
        done += n as u64;
    }
    let s = zone(q, z);
    assert_eq!((s.state, s.written()), (Full, cap));
    // Actions that leave a state as it is succeed.
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Open, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Open, Target::Zone(z)).unwrap();
    write_blocks(dev, q, z, 1, 3);
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
    assert_eq!(state(q, z), Closed);
    reset_all(q);
}

/// Select All applies each action to the zones in its scope only. A
/// backend without Select All refuses it (except for Reset) as
/// unsupported and changes nothing.
pub fn select_all_actions(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    use ZoneState::*;
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| zone_lba(dev, i));
    if !dev.info().capabilities.select_all {
        write_blocks(dev, q, a, 1, 1);
        q.zone_action(ZoneAction::Finish, Target::Zone(d)).unwrap();
        for action in [ZoneAction::Open, ZoneAction::Close, ZoneAction::Finish, ZoneAction::Offline]
        {
            let r = q.zone_action(action, Target::All);
            assert!(matches!(r, Err(DeviceError::Unsupported(_))), "{action:?} all: {r:?}");
        }
        assert_eq!([a, b, d].map(|l| state(q, l)), [ImplicitlyOpen, Empty, Full]);
        q.zone_action(ZoneAction::Reset, Target::All).unwrap();
        let all = q.report_zones(0, ReportFilter::All, usize::MAX).unwrap();
        assert!(all.iter().all(|z| z.state == Empty), "reset all");
        return;
    }
    write_blocks(dev, q, a, 1, 1); // implicitly opened
    q.zone_action(ZoneAction::Open, Target::Zone(b)).unwrap(); // explicitly opened
    write_blocks(dev, q, c, 2, 1);
    q.zone_action(ZoneAction::Close, Target::Zone(c)).unwrap(); // closed
    q.zone_action(ZoneAction::Finish, Target::Zone(d)).unwrap(); // full
    q.zone_action(ZoneAction::Close, Target::All).unwrap();
    // The explicitly opened zone has nothing written.
    let unwritten = divergence::closed_unwritten(dev, "close all");
    let states = [a, b, c, d].map(|l| state(q, l));
    assert_eq!(states, [Closed, unwritten, Closed, Full], "close all");
    assert_eq!(state(q, zone_lba(dev, 4)), Empty, "close all leaves Empty zones");
    // Select All opens and finishes Closed zones, not Empty ones.
    let [opened, finished] = match unwritten {
        Closed => [ExplicitlyOpen, Full],
        other => [other; 2],
    };
    q.zone_action(ZoneAction::Open, Target::All).unwrap();
    let states = [a, b, c, d].map(|l| state(q, l));
    assert_eq!(states, [ExplicitlyOpen, opened, ExplicitlyOpen, Full], "open all");
    assert_eq!(state(q, zone_lba(dev, 4)), Empty, "open all opens Closed zones only");
    q.zone_action(ZoneAction::Finish, Target::All).unwrap();
    let states = [a, b, c, d].map(|l| state(q, l));
    assert_eq!(states, [Full, finished, Full, Full], "finish all");
    assert_eq!(state(q, zone_lba(dev, 4)), Empty, "finish all leaves Empty zones");
    q.zone_action(ZoneAction::Reset, Target::All).unwrap();
    let all = q.report_zones(0, ReportFilter::All, usize::MAX).unwrap();
    assert!(all.iter().all(|z| z.state == Empty), "reset all");
    // Offline all with no Read Only zone changes nothing.
    let offline_all = q.zone_action(ZoneAction::Offline, Target::All);
    if divergence::diverges(dev, Divergence::OfflineIsRefused, "offline all") {
        expect_status(offline_all, StatusCode::InvalidZoneStateTransition, OpKind::Offline, None);
    } else {
        offline_all.unwrap();
    }
    assert_eq!(q.report_zones(0, ReportFilter::Offline, usize::MAX).unwrap(), vec![]);
}

/// Actions a state does not allow, and targets that are not zones.
pub fn invalid_transitions_and_targets(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z = zone_lba(dev, 2);
    let bad = StatusCode::InvalidZoneStateTransition;
    let offline = |q: &mut dyn ZoneQueue| {
        let r = q.zone_action(ZoneAction::Offline, Target::Zone(z));
        if dev.info().capabilities.offline {
            expect_status(r, bad, OpKind::Offline, Some(z));
        } else {
            assert!(matches!(r, Err(DeviceError::Unsupported(_))), "offline: {r:?}");
        }
    };
    expect_status(q.zone_action(ZoneAction::Close, Target::Zone(z)), bad, OpKind::Close, Some(z));
    offline(q);
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    expect_status(q.zone_action(ZoneAction::Open, Target::Zone(z)), bad, OpKind::Open, Some(z));
    expect_status(q.zone_action(ZoneAction::Close, Target::Zone(z)), bad, OpKind::Close, Some(z));
    offline(q);
    assert_eq!(state(q, z), ZoneState::Full, "failed actions change nothing");
    // Not a zone start; past the namespace.
    expect_status(
        q.zone_action(ZoneAction::Open, Target::Zone(z + 1)),
        StatusCode::InvalidField,
        OpKind::Open,
        Some(z + 1),
    );
    let end = dev.info().blocks();
    expect_status(
        q.zone_action(ZoneAction::Reset, Target::Zone(end)),
        StatusCode::LbaOutOfRange,
        OpKind::Reset,
        Some(end),
    );
    reset_all(q);
}

/// Data written, written with FUA and appended reads back unchanged, in
/// single commands and split across the transfer limit.
pub fn write_append_read_round_trips(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let info = dev.info().clone();
    let b = bs(dev);
    let z0 = zone_lba(dev, 0);
    // More blocks than one command carries (when the zone is large enough).
    let big = (info.max_transfer_blocks() + 3).min(info.zone_capacity - 4) as usize;
    write_blocks(dev, q, z0, big, 7);
    assert_eq!(read_blocks(dev, q, z0, big), pattern(7, z0, big, b));
    let fua = pattern(8, z0 + big as u64, 2, b);
    q.write_fua(z0 + big as u64, &buffer(dev, &fua)).unwrap();
    assert_eq!(read_blocks(dev, q, z0 + big as u64, 2), fua);
    assert_eq!(zone(q, z0).write_pointer, Some(z0 + big as u64 + 2));
    // Reads of part of what was written.
    assert_eq!(read_blocks(dev, q, z0 + 1, 1), pattern(7, z0 + 1, 1, b));

    // Appends land at the write pointer, one after another.
    let z1 = zone_lba(dev, 1);
    let mut expect = z1;
    for (i, blocks) in [1usize, 3, 2].into_iter().enumerate() {
        let data = pattern(100 + i as u64, 0, blocks, b);
        let lba = q.append(z1, &buffer(dev, &data)).unwrap();
        assert_eq!(lba, expect, "append {i}");
        assert_eq!(read_blocks(dev, q, lba, blocks), data);
        expect += blocks as u64;
    }
    assert_eq!(zone(q, z1).write_pointer, Some(expect));
    // The largest append the device takes.
    let max = info.max_append_blocks().min(info.zone_capacity - 6) as usize;
    let data = pattern(200, 0, max, b);
    assert_eq!(q.append(z1, &buffer(dev, &data)).unwrap(), expect);
    assert_eq!(read_blocks(dev, q, expect, max), data);
    // One block more than ZASL is refused before it reaches the device.
    let too_big = dev.alloc(info.zasl_bytes + b).unwrap();
    assert!(matches!(q.append(z1, &too_big), Err(DeviceError::InvalidArgument(_))));
    // Partial blocks are refused.
    let partial = dev.alloc(b + 1).unwrap();
    assert!(matches!(q.write(z0, &partial), Err(DeviceError::InvalidArgument(_))));
    let mut empty = dev.alloc(0).unwrap();
    assert!(matches!(q.read(z0, &mut empty), Err(DeviceError::InvalidArgument(_))));
    reset_all(q);
}

/// Plain aligned memory works as well as the device's own buffers.
pub fn plain_memory_buffers(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let b = bs(dev);
    let z = zone_lba(dev, 3);
    let data = pattern(5, z, 3, b);
    let mut w = IoBuffer::aligned(data.len()).unwrap();
    w.copy_from_slice(&data);
    q.write(z, &w).unwrap();
    let mut r = IoBuffer::aligned(data.len()).unwrap();
    q.read(z, &mut r).unwrap();
    assert_eq!(&r[..], &data[..]);
    assert_eq!(q.append(z, &w).unwrap(), z + 3);
    // Asynchronously too: the same buffer comes back, filled.
    let r = IoBuffer::aligned(data.len()).unwrap();
    q.submit(ZoneOp::Read { lba: z + 3 }, Some(r), 9).unwrap();
    let mut got = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| got.push(c)).unwrap();
    let c = got.pop().unwrap();
    assert_eq!(c.tag, 9);
    let back = c.buffer.expect("buffer back");
    assert!(!back.is_dma());
    assert_eq!(&back[..], &data[..]);
    reset_all(q);
}

/// Reports filtered by state, page by page, with and without Partial
/// Report, synchronously and asynchronously.
pub fn report_filters_and_partial_reports(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let info = dev.info().clone();
    let n = info.zone_count;
    let [imp, exp, closed, full] = [1, 3, 4, n - 1].map(|i| zone_lba(dev, i));
    write_blocks(dev, q, imp, 1, 1);
    q.zone_action(ZoneAction::Open, Target::Zone(exp)).unwrap();
    write_blocks(dev, q, closed, 1, 1);
    q.zone_action(ZoneAction::Close, Target::Zone(closed)).unwrap();
    q.zone_action(ZoneAction::Finish, Target::Zone(full)).unwrap();
    let starts = |f: ReportFilter, q: &mut dyn ZoneQueue| -> Vec<u64> {
        q.report_zones(0, f, usize::MAX).unwrap().iter().map(|z| z.start).collect()
    };
    assert_eq!(starts(ReportFilter::ImplicitlyOpen, q), vec![imp]);
    assert_eq!(starts(ReportFilter::ExplicitlyOpen, q), vec![exp]);
    assert_eq!(starts(ReportFilter::Closed, q), vec![closed]);
    // Only Full zones exist of the two states the Full and Read Only
    // filters name.
    let of = |state: ZoneState| if state == ZoneState::Full { vec![full] } else { vec![] };
    let listed = divergence::listed_by(dev, ReportFilter::Full);
    assert_eq!(starts(ReportFilter::Full, q), of(listed), "filter Full");
    let listed = divergence::listed_by(dev, ReportFilter::ReadOnly);
    assert_eq!(starts(ReportFilter::ReadOnly, q), of(listed), "filter Read Only");
    assert_eq!(starts(ReportFilter::Offline, q), Vec::<u64>::new());
    let empty = starts(ReportFilter::Empty, q);
    assert_eq!(empty.len() as u64, n - 4);
    assert!(!empty.contains(&imp) && !empty.contains(&full));
    // A filtered report from a later LBA skips earlier matches.
    let late = q.report_zones(exp, ReportFilter::Empty, 2).unwrap();
    assert_eq!(late.iter().map(|z| z.index).collect::<Vec<_>>(), vec![5, 6]);

    // Walking page by page (two zones a command) gives the full report.
    let all = q.report_zones(0, ReportFilter::All, usize::MAX).unwrap();
    let mut walked = Vec::new();
    let mut slba = 0;
    while slba < info.blocks() {
        let page = q.report_page(slba, ReportFilter::All, 2).unwrap();
        assert_eq!(page.zones as usize, page.descriptors.len(), "partial report header");
        assert!(page.descriptors.len() <= 2);
        let last = page.descriptors.last().expect("page").start;
        walked.extend(page.descriptors);
        slba = last + info.zone_size;
    }
    assert_eq!(walked, all);

    // Without Partial Report the header counts every match from the LBA,
    // however few descriptors fit.
    let mut buf = dev.alloc(64 + 2 * 64).unwrap();
    let op =
        ZoneOp::ReportZones { slba: 0, filter: ReportFilter::All, partial: false, extended: false };
    q.execute(&op, Data::FromDevice(&mut buf)).unwrap();
    let r = zns_device::parse_report(&buf, info.zone_size, None).unwrap();
    assert_eq!((r.zones, r.descriptors.len()), (n, 2));
    let op = ZoneOp::ReportZones {
        slba: 0,
        filter: ReportFilter::Empty,
        partial: false,
        extended: false,
    };
    q.execute(&op, Data::FromDevice(&mut buf)).unwrap();
    let r = zns_device::parse_report(&buf, info.zone_size, None).unwrap();
    assert_eq!(r.zones, n - 4);
    assert_eq!(r.descriptors[0].index, 0);

    // The same report, asynchronously.
    let buf = dev.alloc(64 + 4 * 64).unwrap();
    let op =
        ZoneOp::ReportZones { slba: 0, filter: ReportFilter::All, partial: true, extended: false };
    q.submit(op, Some(buf), 77).unwrap();
    let mut got = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| got.push(c)).unwrap();
    let c = got.pop().unwrap();
    assert_eq!((c.tag, c.op), (77, OpKind::ReportZones));
    c.result.unwrap();
    let r = zns_device::parse_report(&c.buffer.unwrap(), info.zone_size, None).unwrap();
    assert_eq!(r.descriptors, all[..4]);
    reset_all(q);
}

/// Writes the device refuses fail with the status the specification
/// names, and leave the zone as it was.
pub fn write_errors_reach_the_caller(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let info = dev.info().clone();
    let b = bs(dev);
    let z = zone_lba(dev, 2);
    write_blocks(dev, q, z, 2, 1);
    let before = zone(q, z);
    let one = buffer(dev, &pattern(9, 0, 1, b));

    // Off the write pointer, either side.
    let invalid_write = zone_error(dev, StatusCode::ZoneInvalidWrite, "write off the pointer");
    let e = q.write(z + 5, &one).unwrap_err();
    assert_eq!(e.to_string(), format!("write at LBA {}: {}", z + 5, invalid_write.status()));
    expect_status(q.write(z + 5, &one), invalid_write, OpKind::Write, Some(z + 5));
    expect_status(q.write(z, &one), invalid_write, OpKind::Write, Some(z));
    assert_eq!(zone(q, z), before, "a refused write changes nothing");
    assert_eq!(read_blocks(dev, q, z, 2), pattern(1, z, 2, b));

    // Past the zone capacity: fill another zone up to one block short of
    // it, then write two.
    let z7 = zone_lba(dev, 7);
    let cap = zone(q, z7).capacity;
    let fill = |q: &mut dyn ZoneQueue| {
        let mut done = 0;
        while done < cap - 1 {
            let n = (cap - 1 - done).min(info.max_transfer_blocks()) as usize;
            q.write(z7 + done, &dev.alloc(n * b).unwrap()).unwrap();
            done += n as u64;
        }
    };
    fill(q);
    let last = z7 + cap - 1;
    let two = dev.alloc(2 * b).unwrap();
    let split = cap == info.zone_size
        && divergence::diverges(
            dev,
            Divergence::WriteAcrossZoneEndSplits,
            "write across a zone end",
        );
    if split {
        // It lands in both zones; then zone 7 is refilled as it was.
        q.write(last, &two).unwrap();
        let z8 = zone_lba(dev, 8);
        assert_eq!(state(q, z7), ZoneState::Full);
        assert_eq!(zone(q, z8).write_pointer, Some(z8 + 1));
        for z in [z7, z8] {
            q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
        }
        fill(q);
    } else {
        let boundary = zone_error(dev, StatusCode::ZoneBoundaryError, "write past the capacity");
        expect_status(q.write(last, &two), boundary, OpKind::Write, Some(last));
    }
    let full_before = zone(q, z7);
    let boundary = zone_error(dev, StatusCode::ZoneBoundaryError, "append past the capacity");
    expect_status(q.append(z7, &two), boundary, OpKind::Append, Some(z7));
    assert_eq!(zone(q, z7), full_before);
    q.write(last, &one).unwrap();
    assert_eq!(state(q, z7), ZoneState::Full);
    let wp = z + 2;

    // A full zone.
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    let is_full = zone_error(dev, StatusCode::ZoneIsFull, "write to a Full zone");
    expect_status(q.write(wp, &one), is_full, OpKind::Write, Some(wp));
    expect_status(q.append(z, &one), is_full, OpKind::Append, Some(z));

    // Out of range: writes, reads and appends.
    let end = info.blocks();
    let range = divergence::out_of_range(dev, "write past the end");
    expect_status(q.write(end, &one), range, OpKind::Write, Some(end));
    let mut r = dev.alloc(b).unwrap();
    let range = divergence::out_of_range(dev, "read past the end");
    expect_status(q.read(end, &mut r), range, OpKind::Read, Some(end));
    expect_status(q.append(end, &one), StatusCode::LbaOutOfRange, OpKind::Append, Some(end));
    // Append to an LBA that is not a zone start.
    expect_status(q.append(z + 1, &one), StatusCode::InvalidField, OpKind::Append, Some(z + 1));
    reset_all(q);
}

/// Too Many Open Zones and Too Many Active Zones, when the device has
/// limits.
pub fn resource_limits(dev: &dyn ZonedDevice) {
    let info = dev.info().clone();
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let one = buffer(dev, &pattern(3, 0, 1, bs(dev)));
    if let Some(max_open) = info.max_open.filter(|&m| (m as u64) < info.zone_count) {
        // Every open resource held by an explicitly opened zone.
        for i in 0..max_open as u64 {
            q.zone_action(ZoneAction::Open, Target::Zone(zone_lba(dev, i))).unwrap();
        }
        let next = zone_lba(dev, max_open as u64);
        let open_more = q.zone_action(ZoneAction::Open, Target::Zone(next));
        let too_many = if info.max_active == info.max_open {
            StatusCode::TooManyActiveZones
        } else {
            StatusCode::TooManyOpenZones
        };
        let too_many = zone_error(dev, too_many, "open beyond the open resources");
        expect_status(open_more, too_many, OpKind::Open, Some(next));
        expect_status(q.write(next, &one), too_many, OpKind::Write, Some(next));
        assert_eq!(state(q, next), ZoneState::Empty);
        // Closing one frees an open resource.
        q.zone_action(ZoneAction::Close, Target::Zone(zone_lba(dev, 0))).unwrap();
        if info.max_active > info.max_open {
            q.zone_action(ZoneAction::Open, Target::Zone(next)).unwrap();
        }
        reset_all(q);

        // Implicitly opened zones are closed by the controller to make room.
        for i in 0..=max_open as u64 {
            q.write(zone_lba(dev, i), &one).unwrap_or_else(|e| {
                if info.max_active.is_some_and(|a| i >= a as u64) {
                    return;
                }
                panic!("implicit open of zone {i}: {e}")
            });
        }
        let open = q.report_zones(0, ReportFilter::ImplicitlyOpen, usize::MAX).unwrap();
        assert!(open.len() <= max_open as usize, "{} zones open, limit {max_open}", open.len());
        reset_all(q);
    }
    if let Some(max_active) = info.max_active.filter(|&m| (m as u64) < info.zone_count) {
        for i in 0..max_active as u64 {
            let z = zone_lba(dev, i);
            q.write(z, &one).unwrap();
            q.zone_action(ZoneAction::Close, Target::Zone(z)).unwrap();
        }
        let next = zone_lba(dev, max_active as u64);
        let too_many = zone_error(
            dev,
            StatusCode::TooManyActiveZones,
            "activation beyond the active resources",
        );
        expect_status(q.write(next, &one), too_many, OpKind::Write, Some(next));
        expect_status(
            q.zone_action(ZoneAction::Open, Target::Zone(next)),
            too_many,
            OpKind::Open,
            Some(next),
        );
        expect_status(q.append(next, &one), too_many, OpKind::Append, Some(next));
        // Finishing an active zone frees its resource.
        q.zone_action(ZoneAction::Finish, Target::Zone(zone_lba(dev, 0))).unwrap();
        q.write(next, &one).unwrap();
        reset_all(q);
    }
}

/// Write Zeroes advances the write pointer and reads back as zeroes; Flush
/// succeeds.
pub fn write_zeroes_and_flush(dev: &dyn ZonedDevice) {
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z = zone_lba(dev, 5);
    write_blocks(dev, q, z, 1, 4);
    if dev.info().capabilities.write_zeroes {
        q.write_zeroes(z + 1, 3).unwrap();
        assert_eq!(zone(q, z).write_pointer, Some(z + 4));
        assert!(read_blocks(dev, q, z + 1, 3).iter().all(|&x| x == 0));
        expect_status(
            q.write_zeroes(z, 1),
            zone_error(dev, StatusCode::ZoneInvalidWrite, "write zeroes off the pointer"),
            OpKind::WriteZeroes,
            Some(z),
        );
    }
    q.flush().unwrap();
    assert_eq!(read_blocks(dev, q, z, 1), pattern(4, z, 1, bs(dev)));
    reset_all(q);
}

/// Copy gathers source ranges at a zone's write pointer.
pub fn copy(dev: &dyn ZonedDevice) {
    let Some(limits) = dev.info().capabilities.copy else { return };
    assert!(limits.max_ranges >= 1 && limits.max_blocks >= 1);
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let b = bs(dev);
    let (src, dst) = (zone_lba(dev, 0), zone_lba(dev, 6));
    write_blocks(dev, q, src, 8, 11);
    q.copy(&[(src, 2), (src + 4, 3)], dst).unwrap();
    let z = zone(q, dst);
    assert_eq!((z.state, z.write_pointer), (ZoneState::ImplicitlyOpen, Some(dst + 5)));
    let mut expect = pattern(11, src, 2, b);
    expect.extend(pattern(11, src + 4, 3, b));
    assert_eq!(read_blocks(dev, q, dst, 5), expect);
    // The destination must be the write pointer.
    let r = q.copy(&[(src, 1)], dst);
    if is_qemu(dev) && r.as_ref().err().is_some_and(|e| e.is_status(StatusCode::InternalError)) {
        deviation(
            dev,
            "a Copy to a destination off the write pointer fails with Internal Error, not \
             Zone Invalid Write (QEMU's copy path reports the refused write as an aio error)",
        );
    } else {
        expect_status(r, StatusCode::ZoneInvalidWrite, OpKind::Copy, Some(dst));
    }
    assert_eq!(zone(q, dst).write_pointer, Some(dst + 5), "a refused copy writes nothing");
    // Asynchronously.
    let op = ZoneOp::Copy { ranges: vec![(src + 7, 1).into()], dest: dst + 5 };
    q.submit(op, None, 5).unwrap();
    let mut got = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| got.push(c)).unwrap();
    assert_eq!(got.len(), 1);
    got[0].result.as_ref().unwrap();
    assert!(got[0].buffer.is_none());
    assert_eq!(read_blocks(dev, q, dst + 5, 1), pattern(11, src + 7, 1, b));
    assert!(matches!(q.copy(&[], dst), Err(DeviceError::InvalidArgument(_))));
    reset_all(q);
}

/// Descriptor extensions: set on an Empty zone (which becomes Closed),
/// read back through an extended report, refused elsewhere.
pub fn zone_extensions(dev: &dyn ZonedDevice) {
    let ext = dev.info().capabilities.extension_bytes;
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z = zone_lba(dev, 2);
    if ext == 0 {
        assert!(matches!(q.set_zone_extension(z, b"x"), Err(DeviceError::Unsupported(_))));
        return;
    }
    assert!(dev.info().capabilities.extended_report);
    q.set_zone_extension(z, b"zone two").unwrap();
    let s = zone(q, z);
    assert_eq!(s.state, ZoneState::Closed);
    assert!(s.has_extension());
    let got = q.zone_extension(z).unwrap();
    assert_eq!(got.len(), ext);
    assert_eq!(&got[..8], b"zone two");
    assert!(got[8..].iter().all(|&x| x == 0));
    // Only an Empty zone takes an extension.
    expect_status(
        q.set_zone_extension(z, b"again"),
        StatusCode::InvalidZoneStateTransition,
        OpKind::SetZoneExtension,
        Some(z),
    );
    // Asynchronously, with a short buffer the queue pads.
    let z3 = zone_lba(dev, 3);
    let mut buf = dev.alloc(5).unwrap();
    buf.copy_from_slice(b"three");
    q.submit(ZoneOp::SetZoneExtension { zslba: z3 }, Some(buf), 1).unwrap();
    let mut got = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| got.push(c)).unwrap();
    got[0].result.as_ref().unwrap();
    assert_eq!(&q.zone_extension(z3).unwrap()[..6], b"three\0");
    // Reset drops it.
    q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
    assert!(!zone(q, z).has_extension());
    let too_long = vec![1u8; ext + 1];
    assert!(matches!(q.set_zone_extension(z, &too_long), Err(DeviceError::InvalidArgument(_))));
    reset_all(q);
}

/// Many commands in flight: appends to a few zones and writes to many,
/// every completion with its tag, status, LBA and buffer.
pub fn async_at_depth(dev: &dyn ZonedDevice) {
    let info = dev.info().clone();
    let b = bs(dev);
    let mut q = fresh_queue(dev, 32);
    let q = q.as_mut();
    assert!(q.capacity() >= 8, "queue capacity {}", q.capacity());
    let zones = 3u64.min(info.max_open.unwrap_or(3) as u64);
    let per_zone = info.zone_capacity.min(150);
    let total = zones * per_zone;
    let mut lbas: HashMap<u64, u64> = HashMap::new();
    let mut most_outstanding = 0;
    let mut next = 0u64;
    let on_done = |c: Completion, lbas: &mut HashMap<u64, u64>| {
        assert_eq!(c.op, OpKind::Append);
        let lba = c.result.unwrap_or_else(|e| panic!("append {}: {e}", c.tag));
        let buf = c.buffer.expect("buffer back");
        assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), c.tag);
        assert!(lbas.insert(c.tag, lba).is_none(), "tag {} completed twice", c.tag);
    };
    // A completion that never comes fails the test rather than hang it
    // (generous: a kernel path on a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < total || q.outstanding() > 0 {
        assert!(Instant::now() < deadline, "{} of {total} appends completed in 60 s", lbas.len());
        while next < total {
            let mut buf = dev.alloc(b).unwrap();
            buf[..8].copy_from_slice(&next.to_le_bytes());
            let zslba = zone_lba(dev, next % zones);
            match q.submit(ZoneOp::Append { zslba, fua: false }, Some(buf), next) {
                Ok(()) => next += 1,
                Err(r) if r.is_queue_full() => {
                    assert!(r.buffer.is_some(), "a refused submission returns its buffer");
                    break;
                }
                Err(r) => panic!("submit: {}", r.error),
            }
        }
        most_outstanding = most_outstanding.max(q.outstanding());
        q.ring();
        q.poll(usize::MAX, &mut |c| on_done(c, &mut lbas));
    }
    assert_eq!(lbas.len() as u64, total);
    assert!(most_outstanding >= 8, "at most {most_outstanding} commands were in flight");
    // Every append landed in its zone, at a distinct LBA, with its data.
    let mut per: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    for (&tag, &lba) in &lbas {
        let zi = tag % zones;
        assert_eq!(lba / info.zone_size, zi, "tag {tag} landed in the wrong zone");
        assert!(per.entry(zi).or_default().insert(lba));
    }
    for zi in 0..zones {
        let z = zone_lba(dev, zi);
        let got = read_blocks(dev, q, z, per_zone as usize);
        for (i, block) in got.chunks(b).enumerate() {
            let tag = u64::from_le_bytes(block[..8].try_into().unwrap());
            assert_eq!(lbas[&tag], z + i as u64);
        }
    }
    reset_all(q);

    // Writes to many zones at once, one outstanding per zone (several
    // writes to one zone in flight may be reordered by a real device).
    let zones = info.max_active.map_or(8, |a| a as u64).min(info.zone_count).min(8);
    let rounds = 4u64;
    let mut done = 0;
    for r in 0..rounds {
        for zi in 0..zones {
            let lba = zone_lba(dev, zi) + r;
            let buf = buffer(dev, &pattern(r, lba, 1, b));
            q.submit(ZoneOp::Write { lba, fua: false, placement: None }, Some(buf), lba).unwrap();
        }
        q.drain(Duration::from_secs(10), &mut |c| {
            assert_eq!(c.op, OpKind::Write);
            assert_eq!(c.result.unwrap_or_else(|e| panic!("{e}")), 0);
            done += 1;
        })
        .unwrap();
    }
    assert_eq!(done, zones * rounds);
    for zi in 0..zones {
        let z = zone_lba(dev, zi);
        assert_eq!(zone(q, z).write_pointer, Some(z + rounds));
        for r in 0..rounds {
            assert_eq!(read_blocks(dev, q, z + r, 1), pattern(r, z + r, 1, b));
        }
    }
    // A failing command among good ones fails alone, with its context.
    let bad = zone_lba(dev, 0) + 100.min(info.zone_capacity - 1);
    q.submit(
        ZoneOp::Write { lba: bad, fua: false, placement: None },
        Some(dev.alloc(b).unwrap()),
        1,
    )
    .unwrap();
    q.submit(ZoneOp::Read { lba: zone_lba(dev, 0) }, Some(dev.alloc(b).unwrap()), 2).unwrap();
    let mut results = HashMap::new();
    q.drain(Duration::from_secs(10), &mut |c| {
        results.insert(c.tag, c.result);
    })
    .unwrap();
    expect_status(
        results.remove(&1).unwrap(),
        zone_error(dev, StatusCode::ZoneInvalidWrite, "asynchronous write off the pointer"),
        OpKind::Write,
        Some(bad),
    );
    results.remove(&2).unwrap().unwrap();
    reset_all(q);
}

/// A blocking call between asynchronous submissions keeps their
/// completions for the next poll.
pub fn blocking_calls_keep_async_completions(dev: &dyn ZonedDevice) {
    let b = bs(dev);
    let mut q = fresh_queue(dev, 16);
    let q = q.as_mut();
    let z = zone_lba(dev, 4);
    for tag in 0..6 {
        q.submit(ZoneOp::Append { zslba: z, fua: false }, Some(dev.alloc(b).unwrap()), tag)
            .unwrap();
    }
    q.ring();
    // Blocking commands while the appends complete.
    let _ = zone(q, z);
    q.flush().unwrap();
    assert_eq!(q.outstanding(), 6);
    let mut tags = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| {
        c.result.unwrap();
        tags.push(c.tag);
    })
    .unwrap();
    tags.sort_unstable();
    assert_eq!(tags, (0..6).collect::<Vec<_>>());
    assert_eq!(zone(q, z).write_pointer, Some(z + 6));
    assert_eq!(q.outstanding(), 0);
    reset_all(q);
}

/// A full queue refuses with QueueFull and hands the buffer back; after a
/// poll it takes commands again; blocking calls wait for room.
pub fn queue_full(dev: &dyn ZonedDevice) {
    let b = bs(dev);
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let cap = q.capacity();
    assert!(cap >= 1);
    let z = zone_lba(dev, 0);
    let mut accepted = 0;
    let refused = loop {
        let mut buf = dev.alloc(b).unwrap();
        buf.fill(accepted as u8);
        match q.submit(ZoneOp::Append { zslba: z, fua: false }, Some(buf), accepted) {
            Ok(()) => accepted += 1,
            Err(r) => break r,
        }
        assert!(accepted <= 1024, "the queue never filled");
    };
    assert!(refused.is_queue_full(), "{}", refused.error);
    assert!(matches!(refused.error, DeviceError::QueueFull));
    let back = refused.buffer.expect("buffer back");
    assert_eq!(back[0], accepted as u8);
    assert_eq!(accepted as usize, cap, "capacity {cap}, accepted {accepted}");
    assert_eq!(q.outstanding(), cap);
    // A blocking call on the full queue waits for room.
    q.ring();
    let z1 = zone_lba(dev, 1);
    write_blocks(dev, q, z1, 1, 1);
    let mut n = 0;
    q.drain(Duration::from_secs(10), &mut |c| {
        c.result.unwrap();
        n += 1;
    })
    .unwrap();
    assert_eq!(n, cap);
    q.submit(ZoneOp::Append { zslba: z, fua: false }, Some(back), 99).unwrap();
    q.drain(Duration::from_secs(10), &mut |c| assert_eq!(c.tag, 99)).unwrap();
    assert_eq!(zone(q, z).write_pointer, Some(z + cap as u64 + 1));
    reset_all(q);
}

/// Submissions that cannot be run are refused at once, buffer returned.
pub fn bad_submissions_return_the_buffer(dev: &dyn ZonedDevice) {
    let b = bs(dev);
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let r = q.submit(ZoneOp::Flush, Some(dev.alloc(b).unwrap()), 1).unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)) && r.buffer.is_some());
    let r = q.submit(ZoneOp::Write { lba: 0, fua: false, placement: None }, None, 1).unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)) && r.buffer.is_none());
    let r = q.submit(
        ZoneOp::Write { lba: 0, fua: false, placement: None },
        Some(dev.alloc(b + 1).unwrap()),
        1,
    );
    let r = r.unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)));
    assert_eq!(r.buffer.unwrap().len(), b + 1);
    let big = dev.info().zasl_bytes + b;
    let r = q.submit(ZoneOp::Append { zslba: 0, fua: false }, Some(dev.alloc(big).unwrap()), 1);
    assert!(matches!(r.unwrap_err().error, DeviceError::InvalidArgument(_)));
    let r = q.submit(ZoneOp::Copy { ranges: vec![], dest: 0 }, None, 1).unwrap_err();
    assert!(matches!(r.error, DeviceError::InvalidArgument(_)));
    assert_eq!(q.outstanding(), 0);
    assert!(matches!(dev.queue(0), Err(DeviceError::InvalidArgument(_))));
    // Through execute: a buffer moving the wrong way.
    let mut buf = dev.alloc(b).unwrap();
    let r = q.execute(
        &ZoneOp::Write { lba: 0, fua: false, placement: None },
        Data::FromDevice(&mut buf),
    );
    assert!(matches!(r, Err(DeviceError::InvalidArgument(_))));
    assert_eq!(state(q, 0), ZoneState::Empty);
}

/// Queues on several threads at once: each writes its own zone, all
/// append to a shared one.
pub fn queues_on_several_threads(dev: &dyn ZonedDevice) {
    let info = dev.info().clone();
    let b = bs(dev);
    reset_all(dev.queue(2).unwrap().as_mut());
    let threads = 4u64;
    let per = info.zone_capacity.min(40) / threads;
    let shared_zone = zone_lba(dev, threads);
    let results: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut q = dev.queue(8).expect("queue per thread");
                    let q = q.as_mut();
                    let own = zone_lba(dev, t);
                    let mut landed = Vec::new();
                    for i in 0..per {
                        let data = pattern(t, own + i, 1, b);
                        q.write(own + i, &buffer(dev, &data)).unwrap();
                        let mut tagged = vec![0u8; b];
                        tagged[..8].copy_from_slice(&t.to_le_bytes());
                        tagged[8..16].copy_from_slice(&i.to_le_bytes());
                        landed.push(q.append(shared_zone, &buffer(dev, &tagged)).unwrap());
                    }
                    assert_eq!(read_blocks(dev, q, own, per as usize), pattern_run(t, own, per, b));
                    landed
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let mut q = dev.queue(2).unwrap();
    let q = q.as_mut();
    let mut all = BTreeSet::new();
    for (t, lbas) in results.iter().enumerate() {
        for (i, &lba) in lbas.iter().enumerate() {
            assert!(all.insert(lba), "two appends landed at {lba}");
            let block = read_blocks(dev, q, lba, 1);
            assert_eq!(u64::from_le_bytes(block[..8].try_into().unwrap()), t as u64);
            assert_eq!(u64::from_le_bytes(block[8..16].try_into().unwrap()), i as u64);
        }
    }
    assert_eq!(all.len() as u64, threads * per);
    assert_eq!(zone(q, shared_zone).write_pointer, Some(shared_zone + threads * per));
    reset_all(q);
}

fn pattern_run(seed: u64, lba: u64, blocks: u64, b: usize) -> Vec<u8> {
    (0..blocks).flat_map(|i| pattern(seed, lba + i, 1, b)).collect()
}

/// Keeps `Arc` in use for suites that hold devices as `Arc<dyn ZonedDevice>`.
pub fn as_dyn(dev: &Arc<dyn ZonedDevice>) -> &dyn ZonedDevice {
    dev.as_ref()
}

/// Per-LBA metadata travels with Read, Write and Zone Append where the
/// device supports it (blocking and queued commands, DMA and plain
/// buffers), reads without metadata still work, and metadata of the wrong
/// length is refused with nothing written. Where it is not supported,
/// attaching metadata is refused with `Unsupported`, nothing written.
/// Flexible Data Placement on a device without it (every zoned
/// namespace): a placed write is refused before it reaches the device
/// (`InvalidArgument` where the backend could carry the directive,
/// `Unsupported` where it cannot) and writes nothing, queued or blocking;
/// the reclaim unit handle commands are `Unsupported`.
pub fn placement_without_fdp(dev: &dyn ZonedDevice) {
    if dev.info().fdp.as_ref().is_some_and(|f| f.enabled) {
        eprintln!("conformance: placement_without_fdp skipped: the device has FDP");
        return;
    }
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z0 = zone_lba(dev, 0);
    let data = buffer(dev, &pattern(1, z0, 2, bs(dev)));
    let refused = |e: &DeviceError| {
        matches!(e, DeviceError::InvalidArgument(_) | DeviceError::Unsupported(_))
    };
    let e = q.write_placed(z0, &data, 1).expect_err("a placed write without FDP");
    assert!(refused(&e), "a placed write without FDP: {e}");
    let op = ZoneOp::Write { lba: z0, fua: false, placement: Some(1) };
    let r = q.submit(op, Some(data), 1).expect_err("a queued placed write without FDP");
    assert!(refused(&r.error), "a queued placed write without FDP: {}", r.error);
    assert!(r.buffer.is_some(), "the refused write's buffer comes back");
    assert_eq!(zone(q, z0).write_pointer, Some(z0), "the refused writes wrote nothing");
    for (what, e) in [
        ("reclaim unit handle status", q.ruh_status().map(drop).expect_err("status")),
        ("reclaim unit handle update", q.ruh_update(&[0]).expect_err("update")),
    ] {
        assert!(matches!(e, DeviceError::Unsupported(_)), "{what} without FDP: {e}");
    }
}

pub fn per_lba_metadata(dev: &dyn ZonedDevice) {
    let info = dev.info().clone();
    let mut q = fresh_queue(dev, 8);
    let q = q.as_mut();
    let ms = info.metadata_size as usize;
    let z0 = zone_lba(dev, 0);
    let blocks = 4;
    let bytes = |seed: u8, n: usize| -> Vec<u8> {
        (0..n).map(|i| seed.wrapping_add((i * 7) as u8)).collect()
    };
    let mut data = buffer(dev, &pattern(1, z0, blocks, bs(dev)));
    if !info.capabilities.metadata {
        data.attach_metadata(IoBuffer::aligned((ms * blocks).max(16)).expect("alloc"));
        match q.write(z0, &data) {
            Err(DeviceError::Unsupported(_)) => {}
            other => panic!("a write with metadata on a device without it: {other:?}"),
        }
        assert_eq!(zone(q, z0).write_pointer, Some(z0), "the refused write wrote nothing");
        return;
    }
    // Blocking write, DMA metadata; read back into plain-memory metadata.
    let meta = bytes(3, ms * blocks);
    data.attach_metadata(buffer(dev, &meta));
    q.write(z0, &data).expect("write with metadata");
    let mut back = dev.alloc(blocks * bs(dev)).expect("alloc");
    back.attach_metadata(IoBuffer::aligned(ms * blocks).expect("alloc"));
    q.read(z0, &mut back).expect("read with metadata");
    assert_eq!(&back[..], &data[..], "data read with metadata");
    assert_eq!(&back.metadata().expect("metadata kept")[..], &meta[..], "metadata read back");
    assert_eq!(read_blocks(dev, q, z0, blocks), data.to_vec(), "read without metadata");
    // Queued Zone Append with metadata: both buffers come back.
    let z1 = zone_lba(dev, 1);
    let meta2 = bytes(101, ms * 2);
    let mut a = buffer(dev, &pattern(2, z1, 2, bs(dev)));
    a.attach_metadata(buffer(dev, &meta2));
    q.submit(ZoneOp::Append { zslba: z1, fua: false }, Some(a), 77).expect("submit append");
    let mut done = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| done.push(c)).expect("drain");
    let c = done.pop().expect("one completion");
    assert_eq!(c.result.as_ref().ok(), Some(&z1), "append landed at the zone start");
    let returned = c.buffer.expect("buffer handed back");
    assert_eq!(&returned.metadata().expect("metadata handed back")[..], &meta2[..]);
    let mut back = dev.alloc(2 * bs(dev)).expect("alloc");
    back.attach_metadata(dev.alloc(ms * 2).expect("alloc"));
    q.read(z1, &mut back).expect("read appended blocks with metadata");
    assert_eq!(&back.metadata().expect("metadata")[..], &meta2[..], "appended metadata");
    // Wrong length: refused, nothing written.
    let wp = z0 + blocks as u64;
    let mut bad = buffer(dev, &pattern(3, wp, 1, bs(dev)));
    bad.attach_metadata(IoBuffer::aligned(ms + 1).expect("alloc"));
    match q.write(wp, &bad) {
        Err(DeviceError::InvalidArgument(_)) => {}
        other => panic!("metadata of the wrong length: {other:?}"),
    }
    assert_eq!(zone(q, z0).write_pointer, Some(wp), "the refused write wrote nothing");
    reset_all(q);
}

/// The device's zone random write areas, or `None` after saying why the
/// ZRWA checks do not run.
fn zrwa_of(dev: &dyn ZonedDevice, check: &str) -> Option<zns_device::ZrwaInfo> {
    let info = dev.info();
    let Some(w) = info.capabilities.zrwa else {
        eprintln!("conformance: {check} skipped: the device reports no zone random write areas");
        return None;
    };
    if info.zone_capacity < 2 * w.size + w.flush_granularity || !w.explicit_flush {
        eprintln!(
            "conformance: {check} skipped: needs explicit commits and zones of at least two \
             windows and a granule ({} blocks), the capacity is {}",
            2 * w.size + w.flush_granularity,
            info.zone_capacity
        );
        return None;
    }
    Some(w)
}

/// Without zone random write areas, Open with ZRWA Allocate and Flush
/// Explicit ZRWA Range are Invalid Zone Operation Request (a backend with
/// no way to send them says Unsupported).
pub fn zrwa_unsupported(dev: &dyn ZonedDevice) {
    if dev.info().capabilities.zrwa.is_some() {
        eprintln!("conformance: zrwa_unsupported skipped: the device has ZRWAs");
        return;
    }
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let z = zone_lba(dev, 2);
    if divergence::diverges(
        dev,
        Divergence::ZrwaBitIgnored,
        "ZRWA Allocate ignored, commit refused",
    ) {
        q.open_zrwa(z).unwrap();
        let zn = zone(q, z);
        // Without a ZRWA; null_blk reports a zone opened with nothing
        // written as Empty.
        assert!(!zn.has_zrwa(), "{zn:?}");
        assert!(matches!(zn.state, ZoneState::Empty | ZoneState::ExplicitlyOpen), "{zn:?}");
        let r = q.commit_zrwa(z + 3);
        expect_status(r, StatusCode::InvalidZoneStateTransition, OpKind::CommitZrwa, Some(z + 3));
        q.zone_action(ZoneAction::Reset, Target::Zone(z)).unwrap();
        return;
    }
    for (r, op, lba) in
        [(q.open_zrwa(z), OpKind::OpenZrwa, z), (q.commit_zrwa(z + 3), OpKind::CommitZrwa, z + 3)]
    {
        match r {
            Err(DeviceError::Unsupported(_)) => {}
            r => expect_status(r, StatusCode::InvalidZoneOperationRequest, op, Some(lba)),
        }
    }
    assert_eq!(state(q, z), ZoneState::Empty, "a refused ZRWA open changes nothing");
}

/// Writes anywhere in the window, overwrites, implicit and explicit
/// commits, and the statuses of writes and commits outside the window.
pub fn zrwa_window_and_commits(dev: &dyn ZonedDevice) {
    let Some(w) = zrwa_of(dev, "zrwa_window_and_commits") else { return };
    let (size, fg) = (w.size, w.flush_granularity);
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    let b = bs(dev);
    let z = zone_lba(dev, 3);
    q.open_zrwa(z).unwrap();
    let zn = zone(q, z);
    assert!(zn.has_zrwa(), "ZRWAV after Open with ZRWA Allocate");
    assert_eq!((zn.state, zn.write_pointer), (ZoneState::ExplicitlyOpen, Some(z)));
    // Out of order, then an overwrite: the write pointer does not move and
    // reads see the newest data.
    let n = fg as usize;
    write_blocks(dev, q, z + fg, n, 21);
    write_blocks(dev, q, z, n, 22);
    write_blocks(dev, q, z + fg, n, 23);
    assert_eq!(zone(q, z).write_pointer, Some(z), "window writes leave the write pointer");
    let mut expect = pattern(22, z, n, b);
    expect.extend(pattern(23, z + fg, n, b));
    assert_eq!(read_blocks(dev, q, z, 2 * n), expect, "window contents");
    // Outside: before the write pointer (after a commit), or past two
    // windows from it.
    q.commit_zrwa(z + fg - 1).unwrap();
    let wp = z + fg;
    assert_eq!(zone(q, wp).write_pointer, Some(wp));
    let one = buffer(dev, &pattern(24, 0, 1, b));
    expect_status(q.write(wp - 1, &one), StatusCode::ZoneInvalidWrite, OpKind::Write, Some(wp - 1));
    let far = wp + 2 * size;
    expect_status(q.write(far, &one), StatusCode::ZoneInvalidWrite, OpKind::Write, Some(far));
    // Commits outside the window, and of part of a granule.
    let before = wp - 1;
    let r = q.commit_zrwa(before);
    expect_status(r, StatusCode::ZoneBoundaryError, OpKind::CommitZrwa, Some(before));
    let past = wp + size + fg;
    expect_status(
        q.commit_zrwa(past),
        StatusCode::ZoneBoundaryError,
        OpKind::CommitZrwa,
        Some(past),
    );
    if fg > 1 {
        expect_status(q.commit_zrwa(wp), StatusCode::InvalidField, OpKind::CommitZrwa, Some(wp));
    }
    // Zone Append is not allowed in a ZRWA zone.
    let r = q.append(z, &one);
    expect_status(r, StatusCode::InvalidZoneOperationRequest, OpKind::Append, Some(z));
    assert_eq!(zone(q, z).write_pointer, Some(wp), "refused commands move nothing");
    // A write one block past the window commits one granule implicitly.
    write_blocks(dev, q, wp + size, 1, 25);
    assert_eq!(zone(q, z).write_pointer, Some(wp + fg), "implicit commit");
    assert_eq!(read_blocks(dev, q, wp + size, 1), pattern(25, wp + size, 1, b));
    assert_eq!(read_blocks(dev, q, z, 2 * n), expect, "committed data");
    // Finish ends the ZRWA; the written blocks stay readable.
    q.zone_action(ZoneAction::Finish, Target::Zone(z)).unwrap();
    let zn = zone(q, z);
    assert_eq!(zn.state, ZoneState::Full);
    assert!(!zn.has_zrwa(), "Finish frees the ZRWA");
    assert_eq!(read_blocks(dev, q, wp + size, 1), pattern(25, wp + size, 1, b));
    reset_all(q);
}

/// NUMZRWA zones may hold a ZRWA at once; Reset and commits to the zone
/// capacity free one; Close keeps it.
pub fn zrwa_resources(dev: &dyn ZonedDevice) {
    let Some(w) = zrwa_of(dev, "zrwa_resources") else { return };
    let info = dev.info().clone();
    let n = divergence::zrwa_resources(dev, w.resources);
    let open_limit = info.max_open.map_or(u64::MAX, u64::from);
    if n + 1 > open_limit || n + 2 > info.zone_count {
        eprintln!(
            "conformance: zrwa_resources skipped: {n} ZRWAs and one more need {} open zones \
             and {} zones",
            n + 1,
            n + 2
        );
        return;
    }
    let mut q = fresh_queue(dev, 4);
    let q = q.as_mut();
    for i in 0..n {
        q.open_zrwa(zone_lba(dev, i)).unwrap_or_else(|e| panic!("ZRWA {i} of {n}: {e}"));
    }
    let extra = zone_lba(dev, n);
    let r = q.open_zrwa(extra);
    expect_status(r, StatusCode::ZrwaResourcesUnavailable, OpKind::OpenZrwa, Some(extra));
    assert_eq!(state(q, extra), ZoneState::Empty, "a refused ZRWA open changes nothing");
    // Close keeps the ZRWA: still no resource free.
    let z0 = zone_lba(dev, 0);
    q.zone_action(ZoneAction::Close, Target::Zone(z0)).unwrap();
    assert!(zone(q, z0).has_zrwa(), "Close keeps the ZRWA");
    let r = q.open_zrwa(extra);
    expect_status(r, StatusCode::ZrwaResourcesUnavailable, OpKind::OpenZrwa, Some(extra));
    // Reset frees it.
    q.zone_action(ZoneAction::Reset, Target::Zone(z0)).unwrap();
    assert!(!zone(q, z0).has_zrwa());
    q.open_zrwa(extra).unwrap();
    // Committing up to the capacity fills the zone and frees its ZRWA.
    let cap = zone(q, extra).capacity;
    let mut at = extra;
    while at < extra + cap {
        let blocks = (extra + cap - at).min(w.size) as usize;
        write_blocks(dev, q, at, blocks, 26);
        at += blocks as u64;
    }
    q.commit_zrwa(extra + cap - 1).unwrap();
    let zn = zone(q, extra);
    assert_eq!((zn.state, zn.has_zrwa()), (ZoneState::Full, false));
    q.open_zrwa(z0).unwrap();
    reset_all(q);
}
