//! Capacity: every tenant can fill every logical zone it advertises,
//! whatever widths ballooning gives its stripe groups. A group wider than
//! the zone scale leaves most of each column unwritten when its logical
//! zone fills (a column serves one logical zone), so widths have to come
//! out of the physical zones no logical zone needs.

mod common;

use std::sync::Arc;

use zns_device::{Target, ZoneAction, ZoneQueue, ZonedDevice};
use zns_ezns::{Instance, Status, TenantDevice};

/// Zone scale 1 with groups up to 4 wide: a logical zone holds one
/// physical zone's capacity. 40 logical zones on 94 physical zones (the
/// plan's floor: 40 plus 31 for stripe ends).
const NARROW_ZONES: &str = r#"
device = "emu:ezns-test"
zone_scale = 1
stripe_unit_kib = 8
max_width = 4

[[tenant]]
name = "a"
zones = 20
active_zones = 6

[[tenant]]
name = "b"
zones = 20
active_zones = 4
"#;

/// Writes every logical zone of `dev` full, 8 blocks a command, `open` zones
/// at a time; returns the widest group seen.
fn fill_all(dev: &Arc<dyn ZonedDevice>, inst: &Instance, open: usize) -> usize {
    let info = dev.info().clone();
    let bs = info.block_size as usize;
    let buf = dev.alloc(8 * bs).unwrap();
    let mut q = dev.queue(8).unwrap();
    let mut widest = 0;
    for first in (0..info.zone_count).step_by(open) {
        let zones: Vec<u64> = (first..(first + open as u64).min(info.zone_count)).collect();
        for off in (0..info.zone_capacity).step_by(8) {
            for &z in &zones {
                let lba = z * info.zone_size + off;
                q.write(lba, &buf).unwrap_or_else(|e| {
                    panic!("{}: zone {z} at {off}: {e} ({:?})", info.uri, free(inst))
                });
            }
            let s = inst.status();
            assert!(s.free_zones >= s.reserved_zones, "{s}");
            widest = widest.max(widest_group(&s));
        }
    }
    widest
}

fn widest_group(s: &Status) -> usize {
    s.tenants.iter().flat_map(|t| t.stripes.iter().map(|z| z.width)).max().unwrap_or(0)
}

fn free(inst: &Instance) -> (u64, u64) {
    let s = inst.status();
    (s.free_zones, s.reserved_zones)
}

fn reset_all(dev: &Arc<dyn ZonedDevice>, inst: &Instance) {
    let mut q = dev.queue(8).unwrap();
    q.zone_action(ZoneAction::Reset, Target::All).unwrap();
    // The physical zones come back once their resets are done.
    settle(inst, "resets");
}

/// Pumps the instance until its internal commands (finishes, resets,
/// journal blocks) are done: only polling moves them on, and a tenant's
/// queue that was dropped polls no more.
fn settle(inst: &Instance, what: &str) {
    for _ in 0..1000 {
        inst.pump();
        if inst.status().internal_pending == 0 {
            return;
        }
        std::thread::yield_now();
    }
    panic!("the {what} did not finish: {:?}", inst.status().internal_pending);
}

#[test]
fn every_logical_zone_fills_when_groups_are_wider_than_the_zone_scale() {
    let inst = common::instance(NARROW_ZONES);
    let a: Arc<dyn ZonedDevice> = inst.tenant("a").unwrap();
    let b: Arc<dyn ZonedDevice> = inst.tenant("b").unwrap();
    for round in 0..3 {
        let wide_a = fill_all(&a, &inst, 1);
        let wide_b = fill_all(&b, &inst, 4);
        // The first zones stripe wide: there is room to spare at first.
        assert!(round > 0 || wide_a > 1, "tenant a never striped wider than one column");
        assert!(wide_b >= 1);
        let s = inst.status();
        assert_eq!(s.reserved_zones, 0, "full logical zones need nothing more");
        reset_all(&a, &inst);
        reset_all(&b, &inst);
        let s2 = inst.status();
        assert_eq!(s2.reserved_zones, 40, "empty logical zones need a physical zone each");
        assert!(s2.free_zones >= 40, "round {round}: {} free after the resets", s2.free_zones);
        assert!(s2.free_zones > s.free_zones);
    }
}

#[test]
fn tenants_writing_at_once_fill_every_logical_zone() {
    let inst = common::instance(NARROW_ZONES);
    for round in 0..2 {
        std::thread::scope(|scope| {
            for (name, writers) in [("a", 3u64), ("b", 2)] {
                for w in 0..writers {
                    let dev: Arc<dyn ZonedDevice> = inst.tenant(name).unwrap();
                    scope.spawn(move || {
                        let info = dev.info().clone();
                        let buf = dev.alloc(4 * info.block_size as usize).unwrap();
                        let mut q = dev.queue(4).unwrap();
                        for z in (w..info.zone_count).step_by(writers as usize) {
                            for off in (0..info.zone_capacity).step_by(4) {
                                q.write(z * info.zone_size + off, &buf).unwrap_or_else(|e| {
                                    panic!("round {round}, {name} zone {z} at {off}: {e}")
                                });
                            }
                        }
                    });
                }
            }
        });
        // The last full zones' finishes may still be in flight when the
        // writers' queues go.
        settle(&inst, "finishes");
        let s = inst.status();
        assert_eq!((s.reserved_zones, s.device_active), (0, 0), "{s}");
        for name in ["a", "b"] {
            reset_all(&(inst.tenant(name).unwrap() as Arc<dyn ZonedDevice>), &inst);
        }
    }
}

/// Zone scale 4 with groups up to 3 wide: a logical zone holds four
/// physical zones' capacity, which a width of 3 does not divide.
const WIDTH_NOT_DIVIDING: &str = r#"
device = "emu:ezns-test"
zone_scale = 4
stripe_unit_kib = 8
max_width = 3

[[tenant]]
name = "a"
zones = 4
active_zones = 1
"#;

#[test]
fn a_logical_zone_ends_on_no_more_columns_than_its_last_blocks_fill() {
    let inst = common::instance(WIDTH_NOT_DIVIDING);
    let a: Arc<dyn ZonedDevice> = inst.tenant("a").unwrap();
    let before = inst.status().free_zones;
    // One logical zone (4 × 48 blocks): a group of 3 fills 3 physical
    // zones, and the last 48 blocks fill one more. A last group of 3
    // would write 16 blocks of each of 3 new zones and leave 64 to pad.
    assert_eq!(fill_all(&a, &inst, 1), 3, "the tenant stripes 3 wide");
    settle(&inst, "finishes");
    let s = inst.status();
    assert_eq!(s.reserved_zones, 0, "{s}");
    // fill_all wrote every logical zone; each took four physical zones.
    let zones = a.info().zone_count;
    assert_eq!(before - s.free_zones, 4 * zones, "{s}");
}

/// Four tenants, groups no wider than the zone scale, on a timed device
/// (virtual clock): ballooning lends and returns spares and widens groups
/// at write pointers that fall anywhere in a stripe unit.
const FOUR_BALLOONING: &str = r#"
device = "emu:ezns-test"
zone_scale = 8
stripe_unit_kib = 8
max_width = 8
headroom = 4
idle_ms = 5
tick_ms = 1

[[tenant]]
name = "a"
zones = 6
active_zones = 4

[[tenant]]
name = "b"
zones = 6
active_zones = 4

[[tenant]]
name = "c"
zones = 6
active_zones = 4

[[tenant]]
name = "d"
zones = 6
active_zones = 4
"#;

/// A tenant written like a log-structured file system: three logical
/// zones open at a time, writes of 1 to 4 blocks to one of them at
/// random, a full zone replaced by a free one, the oldest full zone reset
/// when none is free.
struct LogWriter {
    dev: Arc<TenantDevice>,
    q: Box<dyn ZoneQueue>,
    /// Open zones and their write pointers.
    logs: Vec<(u64, u64)>,
    full: std::collections::VecDeque<u64>,
    free: Vec<u64>,
    /// Blocks written so far.
    blocks: u64,
    rng: u64,
}

impl LogWriter {
    fn new(inst: &Instance, name: &str, seed: u64) -> LogWriter {
        let dev = inst.tenant(name).unwrap();
        let q = dev.queue(8).unwrap();
        let zones = dev.info().zone_count;
        let logs = (0..3).map(|z| (z, 0)).collect();
        let free = (3..zones).rev().collect();
        LogWriter { dev, q, logs, full: Default::default(), free, blocks: 0, rng: seed }
    }

    fn step(&mut self) {
        let info = self.dev.info().clone();
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let log = &mut self.logs[(self.rng >> 33) as usize % 3];
        let n = (1 + (self.rng >> 40) % 4).min(info.zone_capacity - log.1);
        let buf = self.dev.alloc(n as usize * info.block_size as usize).unwrap();
        self.q.write(log.0 * info.zone_size + log.1, &buf).unwrap();
        self.blocks += n;
        log.1 += n;
        if log.1 == info.zone_capacity {
            self.full.push_back(log.0);
            if self.free.is_empty() {
                let z = self.full.pop_front().unwrap();
                self.q.zone_action(ZoneAction::Reset, Target::Zone(z * info.zone_size)).unwrap();
                self.free.push(z);
            }
            *log = (self.free.pop().unwrap(), 0);
        }
    }
}

#[test]
fn tenants_that_fill_and_reset_logical_zones_pad_nothing() {
    let inst = common::timed_instance(FOUR_BALLOONING);
    let bs = inst.base().info().block_size as u128;
    let mut w: Vec<LogWriter> = ["a", "b", "c", "d"]
        .iter()
        .zip(7..)
        .map(|(n, seed)| LogWriter::new(&inst, n, seed))
        .collect();
    // All four, then `a` alone (the others' spares lent to it), then all
    // four again (returned), then two.
    for who in [&[0, 1, 2, 3][..], &[0], &[0, 1, 2, 3], &[0, 1]] {
        let before = inst.status();
        let media = common::media_written(&inst);
        let blocks: u64 = w.iter().map(|t| t.blocks).sum();
        for step in 0..6000 {
            for &t in who {
                w[t].step();
            }
            if step % 4 == 0 {
                inst.base().wait_ns(200_000);
            }
        }
        let s = inst.status();
        let data = w.iter().map(|t| t.blocks).sum::<u64>() - blocks;
        let journal = s.journal_blocks_written - before.journal_blocks_written;
        assert!(s.loans > before.loans, "tenants {who:?}: no spare lent: {s}");
        assert_eq!(s.internal_padded_blocks, 0, "tenants {who:?}: {s}");
        // The device wrote the tenants' data and eZNS's journal, no more.
        assert_eq!(
            common::media_written(&inst) - media,
            (data + journal) as u128 * bs,
            "{who:?}: {s}"
        );
    }
}
