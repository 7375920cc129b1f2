//! eZNS decisions in the base emulator's trace, event by event: a tenant
//! writing slowly gets a stripe group of its own zones; the other tenant
//! falls idle and is marked inactive; the writer's stripe widens with the
//! idle tenant's spares in two steps as its average of open zones falls
//! to one (a loan, then the wider group, twice); the idle tenant writes,
//! is active again, and has its spares back (a return, then the writer's
//! group without them, which then widens to its own target with the
//! parked columns). The trace file shows the same on the tenants' tracks.

mod common;

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use zns_device::{ZoneQueue, ZonedDevice};
use zns_emulator::trace::{TraceEvent, TraceSink};
use zns_ezns::{Config, Instance};

/// Two tenants: `a` has only essential zones (its wider stripes must be
/// borrowed), `b` has spares to lend; idle after 5 ms.
const CONFIG: &str = r#"
device = "emu:ezns-test"
zone_scale = 4
stripe_unit_kib = 8
max_width = 8
idle_ms = 5
tick_ms = 1

[[tenant]]
name = "a"
zones = 8
active_zones = 4
essential = 4
spare = 0

[[tenant]]
name = "b"
zones = 8
active_zones = 4
essential = 4
spare = 8
"#;

/// Keeps the eZNS events and the tenants' names.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<TraceEvent>>,
    names: Mutex<Vec<(u16, String)>>,
}

impl TraceSink for Recorder {
    fn event(&self, event: &TraceEvent) {
        if matches!(
            event,
            TraceEvent::Stripe { .. }
                | TraceEvent::Balloon { .. }
                | TraceEvent::TenantActivity { .. }
        ) {
            self.events.lock().push(*event);
        }
    }

    fn name_tenant(&self, tenant: u16, name: &str) {
        let mut names = self.names.lock();
        if !names.iter().any(|(t, _)| *t == tenant) {
            names.push((tenant, name.to_string()));
        }
    }
}

/// A stripe group as its column events tell it: tenant, logical zone,
/// start, physical zones, budgets.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    tenant: u16,
    lzone: u32,
    start: u64,
    zones: Vec<u32>,
    budgets: Vec<u16>,
}

/// What the events say, in order, with a group's columns gathered.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Stripe(Group),
    Lend { zones: u32, lent: u32, borrowed: u32 },
    Return { zones: u32, lent: u32, borrowed: u32 },
    Inactive { tenant: u16, lendable: u32 },
    Active { tenant: u16 },
}

fn seen(events: &[TraceEvent]) -> Vec<Seen> {
    let mut out: Vec<Seen> = Vec::new();
    for e in events {
        match *e {
            TraceEvent::Stripe { tenant, lzone, start, width, column, zone, budget, .. } => {
                if column == 0 {
                    let g = Group { tenant, lzone, start, zones: vec![], budgets: vec![] };
                    out.push(Seen::Stripe(g));
                }
                let Some(Seen::Stripe(g)) = out.last_mut() else { panic!("column {e:?} alone") };
                assert_eq!((g.tenant, g.lzone, g.start), (tenant, lzone, start), "{e:?}");
                assert_eq!(usize::from(column), g.zones.len(), "{e:?}");
                assert!(column < width, "{e:?}");
                g.zones.push(zone);
                g.budgets.push(budget);
            }
            // Only b lends, only a borrows.
            TraceEvent::Balloon {
                lender: 1, borrower: 0, zones, returned, lent, borrowed, ..
            } => out.push(if returned {
                Seen::Return { zones, lent, borrowed }
            } else {
                Seen::Lend { zones, lent, borrowed }
            }),
            TraceEvent::TenantActivity { tenant, inactive: true, lendable, .. } => {
                out.push(Seen::Inactive { tenant, lendable })
            }
            TraceEvent::TenantActivity { tenant, inactive: false, .. } => {
                out.push(Seen::Active { tenant })
            }
            _ => panic!("unexpected {e:?}"),
        }
    }
    out
}

/// One stripe unit (two blocks) of `dev` at zone offset `*wp`; then 1 ms
/// of device time.
fn put(dev: &dyn ZonedDevice, q: &mut Box<dyn ZoneQueue>, wp: &mut u64) {
    let bs = dev.info().block_size as usize;
    q.write(*wp, &dev.alloc(2 * bs).unwrap()).unwrap();
    *wp += 2;
    dev.wait_ns(1_000_000);
}

#[test]
fn stripe_and_balloon_decisions_are_traced_in_order() {
    let (emu, memory) = common::timed_emulator();
    let recorder = Arc::new(Recorder::default());
    emu.add_trace_sink(recorder.clone());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ezns.json");
    let file = Arc::new(zns_device::trace::TraceFile::new(&path, 100_000, 4));
    emu.add_trace_sink(file.clone());
    let inst = Instance::open(common::base(&emu, &memory), Config::from_toml(CONFIG).unwrap())
        .expect("instance");
    let a = inst.tenant("a").unwrap();
    let b = inst.tenant("b").unwrap();
    let mut qa = a.queue(8).unwrap();
    let mut wp = 0;
    // a writes a unit a millisecond until b (idle) lends it spares, then
    // two rows of the widest stripe: every column holds data.
    while inst.status().tenants[0].borrowed == 0 {
        assert!(wp < 200, "a never borrowed: {}", inst.status());
        put(a.as_ref(), &mut qa, &mut wp);
    }
    for _ in 0..16 {
        put(a.as_ref(), &mut qa, &mut wp);
    }
    let widened = inst.status().tenants[0].borrowed;
    // b writes: active again, its spares back at once.
    let mut qb = b.queue(2).unwrap();
    qb.write(0, &b.alloc(4096).unwrap()).unwrap();
    assert_eq!(inst.status().tenants[1].lent, 0, "{}", inst.status());

    let events = recorder.events.lock().clone();
    let got = seen(&events);
    let [Seen::Stripe(first), Seen::Inactive { tenant: 1, lendable: 8 }, Seen::Lend { zones: l1, lent: t1, borrowed: b1 }, Seen::Stripe(wider), Seen::Lend { zones: l2, lent: t2, borrowed: b2 }, Seen::Stripe(wide), Seen::Active { tenant: 1 }, Seen::Return { zones: back, lent: 0, borrowed: 0 }, Seen::Stripe(narrow), Seen::Stripe(bs), Seen::Stripe(again)] =
        &got[..]
    else {
        panic!("events: {got:#?}")
    };
    // a's first group: one column of its own (its essential width: 4
    // essential zones over 4 active logical zones).
    assert_eq!((first.tenant, first.lzone, first.start), (0, 0, 0));
    assert_eq!((first.zones.len(), &first.budgets[..]), (1, &[0][..]), "{first:?}");
    // The loans: a's target width is its 4 essential zones and b's 8
    // spares over the logical zones its average says it writes at once.
    // The average starts at its 4 active zones and decays towards the 1
    // it opens: at two writers the target is 6 (5 columns borrowed), at
    // one it is max_width, 8 (2 more).
    assert_eq!((*l1, *t1, *b1, wider.zones.len()), (5, 5, 5, 6), "{got:#?}");
    assert_eq!((*l2, *t2, *b2), (2, 7, 7), "{got:#?}");
    assert_eq!((widened, wide.zones.len()), (7, 8), "{got:#?}");
    for g in [wider, wide] {
        assert_eq!((g.tenant, g.lzone), (0, 0));
        assert!(g.start > 0 && g.start < wp, "{g:?}");
        let mut distinct = g.zones.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), g.zones.len(), "{g:?}");
    }
    assert!(wider.start < wide.start);
    assert_eq!(wider.zones[0], first.zones[0], "the column a had goes on");
    assert_eq!(wide.zones[..6], wider.zones[..], "the wider group's columns go on");
    assert_eq!(wide.budgets.iter().filter(|&&t| t == 1).count() as u32, widened, "{wide:?}");
    // The return: every borrowed zone, parked; a goes on with its own.
    assert_eq!(*back, widened);
    assert_eq!((narrow.tenant, narrow.lzone, narrow.start), (0, 0, wp));
    assert!(narrow.budgets.iter().all(|&t| t == 0), "{narrow:?}");
    assert_eq!(narrow.zones[0], first.zones[0]);
    // b's own first group: its 12 zones over the one logical zone it
    // writes, capped at max_width.
    assert_eq!((bs.tenant, bs.lzone, bs.start, bs.zones.len()), (1, 0, 0, 8));
    assert!(bs.budgets.iter().all(|&t| t == 1), "{bs:?}");
    assert!(bs.zones.iter().all(|z| !wide.zones.contains(z)), "{bs:?} {wide:?}");
    // a's target is its own 4 now: its zone widens back by parked columns
    // (on its budget now), which fill with data instead of padding.
    assert_eq!((again.tenant, again.lzone, again.start, again.zones.len()), (0, 0, wp, 4));
    assert!(again.budgets.iter().all(|&t| t == 0), "{again:?}");
    assert_eq!(again.zones[0], first.zones[0]);
    assert!(again.zones[1..].iter().all(|z| wide.zones[1..].contains(z)), "{again:?} {wide:?}");
    assert_eq!(*recorder.names.lock(), [(0, "a".to_string()), (1, "b".to_string())]);

    // The trace file: the tenants' tracks with the same marks.
    file.write_file().unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let all = doc["traceEvents"].as_array().unwrap();
    let named = |tid: u64, name: &str| {
        all.iter().any(|e| {
            e["ph"] == "M" && e["pid"] == 5 && e["tid"] == tid && e["args"]["name"] == name
        })
    };
    assert!(named(0, "tenant a") && named(1, "tenant b"));
    let marks: Vec<(u64, &str)> = all
        .iter()
        .filter(|e| e["ph"] == "i" && e["pid"] == 5)
        .map(|e| (e["tid"].as_u64().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        marks,
        [
            (0, "stripe"),
            (1, "inactive"),
            (0, "borrow"),
            (1, "lend"),
            (0, "stripe"),
            (0, "borrow"),
            (1, "lend"),
            (0, "stripe"),
            (1, "active again"),
            (0, "give back"),
            (1, "get back"),
            (0, "stripe"),
            (1, "stripe"),
            (0, "stripe"),
        ]
    );
    let wide_mark = all
        .iter()
        .filter(|e| e["ph"] == "i" && e["pid"] == 5 && e["name"] == "stripe")
        .nth(2)
        .unwrap();
    let zones: Vec<u64> = wide_mark["args"]["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z.as_u64().unwrap())
        .collect();
    assert_eq!(zones, wide.zones.iter().map(|&z| u64::from(z)).collect::<Vec<_>>());
    assert_eq!(wide_mark["args"]["borrowed"], u64::from(widened));
    assert_eq!(wide_mark["args"]["budgets"][1], "b");
    let lent_counter = all
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "zones lent by b")
        .map(|e| e["args"]["zones"].as_u64().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(lent_counter, [5, u64::from(widened), 0]);
    drop((qa, qb, a, b, inst));
}
