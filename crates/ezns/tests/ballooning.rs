//! Zone ballooning on a timed device (virtual clock): an idle tenant's
//! spares go to a busy one, come back the moment it writes, and every
//! active zone goes back to the pool in the end; the allocator keeps
//! tenants' stripes on distinct dies.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use zns_device::{Target, ZoneAction, ZoneOp, ZoneQueue, ZonedDevice};
use zns_ezns::{Instance, Status, TenantQueue};

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

[[tenant]]
name = "b"
zones = 8
active_zones = 4

[[tenant]]
name = "c"
zones = 8
active_zones = 4
"#;

fn tenant<'a>(s: &'a Status, name: &str) -> &'a zns_ezns::status::TenantStatus {
    s.tenants.iter().find(|t| t.name == name).expect("tenant")
}

/// Keeps `depth` 16 KiB appends in flight on `zone` of a tenant for `ns`
/// of device time, resetting the zone when it fills.
fn write_for(
    dev: &dyn ZonedDevice,
    q: &mut TenantQueue,
    zone: u64,
    ns: u64,
    inst: &Instance,
    watch: &mut dyn FnMut(&Status),
) {
    let info = dev.info().clone();
    let zslba = zone * info.zone_size;
    let end = dev.now_ns() + ns;
    let mut written = q.zone(zslba).unwrap().written();
    let mut in_flight = 0u64;
    while dev.now_ns() < end {
        if in_flight == 0 && written + 4 > info.zone_capacity {
            q.zone_action(ZoneAction::Reset, Target::Zone(zslba)).unwrap();
            written = 0;
        }
        while in_flight < 4 && written + (in_flight + 1) * 4 <= info.zone_capacity {
            q.submit(ZoneOp::Append { zslba, fua: false }, Some(dev.alloc(4 * 4096).unwrap()), 0)
                .unwrap();
            in_flight += 1;
        }
        q.ring();
        let mut done = 0;
        let wall = std::time::Instant::now();
        while done == 0 {
            done = q.poll(usize::MAX, &mut |c| {
                c.result.expect("append");
            }) as u64;
            if wall.elapsed() > std::time::Duration::from_secs(20) {
                panic!("no completion: {q:?}\n{}", inst.status());
            }
        }
        in_flight -= done;
        written += done * 4;
        watch(&inst.status());
    }
    q.drain(std::time::Duration::from_secs(10), &mut |c| {
        c.result.expect("append");
    })
    .unwrap();
}

#[test]
fn spares_move_to_a_busy_tenant_and_come_back_when_the_lender_writes() {
    // Idle after 20 ms: b, writing a block a millisecond of a's writes
    // (which can take a few ms when finishes pad zones), stays active.
    let inst = common::timed_instance(&CONFIG.replace("idle_ms = 5", "idle_ms = 20"));
    let a = inst.tenant("a").unwrap();
    let b = inst.tenant("b").unwrap();
    let mut qa = a.tenant_queue(8).unwrap();
    let mut qb = b.tenant_queue(2).unwrap();
    // a writes one zone; b and c never wrote: idle after 5 ms, their
    // spares lent to a.
    let mut most = (0u32, 0u32, 0usize);
    write_for(a.as_ref(), &mut qa, 0, 60_000_000, &inst, &mut |s| {
        let t = tenant(s, "a");
        let width = t.stripes.iter().map(|z| z.width).max().unwrap_or(0);
        most = (most.0.max(t.borrowed), most.1.max(t.held), most.2.max(width));
    });
    let s = inst.status();
    assert!(tenant(&s, "b").inactive && tenant(&s, "c").inactive, "{s}");
    assert!(most.0 > 0, "a never borrowed a spare: {s}");
    let own = tenant(&s, "a").essential + tenant(&s, "a").spare;
    assert!(
        most.2 as u32 > own.min(8) - 1 || most.2 == 8,
        "widest stripe {} with {own} own zones",
        most.2
    );
    let lent_by_b = tenant(&s, "b").lent;
    assert!(lent_by_b + tenant(&s, "c").lent == tenant(&s, "a").borrowed, "{s}");
    // b writes: its spares come back at once (a's stripes holding them
    // are restriped without them, the columns parked), while a goes on
    // and b keeps writing a block a millisecond.
    let start = a.now_ns();
    let mut returned_after = None;
    let mut lent_later = 0;
    for round in 0..20 {
        qb.write(round * 4096 / 4096, &b.alloc(4096).unwrap()).unwrap();
        if round == 0 {
            assert!(!tenant(&inst.status(), "b").inactive);
        }
        write_for(a.as_ref(), &mut qa, 0, 1_000_000, &inst, &mut |s| {
            let lent = tenant(s, "b").lent;
            if returned_after.is_none() && lent == 0 {
                returned_after = Some(s.now_ns - start);
            }
            if returned_after.is_some() {
                lent_later = lent_later.max(lent);
            }
        });
    }
    let s = inst.status();
    let back = returned_after.unwrap_or_else(|| panic!("b's spares never came back: {s}"));
    // Coming back is parking the borrowed columns, with no finish to wait
    // for (which would pad the rest of each at one die's program speed).
    assert!(back < 2_000_000, "b's spares took {back} ns to come back");
    assert_eq!(lent_later, 0, "b lent again while writing: {s}");
    assert!(tenant(&s, "b").reclaims >= 1 || lent_by_b == 0);
    // Everything reset: every active zone is back in the pool.
    let mut queues: Vec<Box<dyn ZoneQueue>> = vec![Box::new(qa), Box::new(qb)];
    for q in queues.iter_mut() {
        q.zone_action(ZoneAction::Reset, Target::All).unwrap();
    }
    settle(&inst, &mut queues);
    let s = inst.status();
    assert_eq!((s.device_active, s.free_zones), (0, inst.base().info().zone_count - 2), "{s}");
    assert!(s.tenants.iter().all(|t| t.lent == 0 && t.borrowed == 0 && t.held == 0), "{s}");
}

#[test]
fn a_reading_tenant_lends_no_spare() {
    // b wrote once and then only reads, a block a millisecond of a's
    // writes (a few ms when finishes pad zones: idle after 20 ms); c does
    // nothing: a borrows c's spares, never b's, and b is never marked
    // inactive.
    let inst = common::timed_instance(&CONFIG.replace("idle_ms = 5", "idle_ms = 20"));
    let a = inst.tenant("a").unwrap();
    let b = inst.tenant("b").unwrap();
    let mut qa = a.tenant_queue(8).unwrap();
    let mut qb = b.tenant_queue(2).unwrap();
    let mut buf = b.alloc(4096).unwrap();
    qb.write(0, &buf).unwrap();
    let mut b_lent = 0;
    let mut b_inactive = false;
    for _ in 0..80 {
        qb.read(0, &mut buf).unwrap();
        write_for(a.as_ref(), &mut qa, 0, 1_000_000, &inst, &mut |s| {
            b_lent = b_lent.max(tenant(s, "b").lent);
            b_inactive |= tenant(s, "b").inactive;
        });
    }
    let s = inst.status();
    assert!(tenant(&s, "c").inactive && tenant(&s, "c").lent > 0, "c lent nothing: {s}");
    assert_eq!((b_lent, b_inactive), (0, false), "{s}");
}

/// Polls until the control queue has nothing left to do.
fn settle(inst: &Instance, queues: &mut [Box<dyn ZoneQueue>]) {
    for _ in 0..10_000 {
        for q in queues.iter_mut() {
            q.poll(usize::MAX, &mut |_| {});
        }
        inst.pump();
        inst.base().wait_ns(100_000);
        let s = inst.status();
        if s.device_active == 0 && s.internal_pending == 0 {
            return;
        }
    }
}

#[test]
fn spares_always_return() {
    for seed in 0..8 {
        spares_return(seed);
    }
}

/// Random bursts and pauses of three tenants; at the end every zone is
/// reset and every active zone, lent or not, is back.
fn spares_return(seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let inst = common::timed_instance(CONFIG);
    let devs: Vec<Arc<zns_ezns::TenantDevice>> =
        ["a", "b", "c"].iter().map(|n| inst.tenant(n).unwrap()).collect();
    let mut tqs: Vec<TenantQueue> = devs.iter().map(|d| d.tenant_queue(8).unwrap()).collect();
    let mut loans = 0;
    for _ in 0..40 {
        let t = rng.gen_range(0..3);
        let zone = rng.gen_range(0..4);
        let ns = rng.gen_range(1..8) * 1_000_000;
        write_for(devs[t].as_ref(), &mut tqs[t], zone, ns, &inst, &mut |s| {
            loans = loans.max(s.loans);
        });
        if rng.gen_bool(0.3) {
            devs[t].wait_ns(rng.gen_range(1..20) * 1_000_000);
        }
        let s = inst.status();
        let borrowed: u32 = s.tenants.iter().map(|t| t.borrowed).sum();
        let lent: u32 = s.tenants.iter().map(|t| t.lent).sum();
        assert_eq!(borrowed, lent, "{s}");
        assert!(s.device_active <= s.device_limit, "{s}");
    }
    assert!(loans > 0, "seed {seed}: no spare was ever lent");
    let mut queues: Vec<Box<dyn ZoneQueue>> =
        tqs.into_iter().map(|q| Box::new(q) as Box<dyn ZoneQueue>).collect();
    for q in queues.iter_mut() {
        q.zone_action(ZoneAction::Reset, Target::All).unwrap();
    }
    settle(&inst, &mut queues);
    let s = inst.status();
    assert_eq!((s.device_active, s.free_zones), (0, inst.base().info().zone_count - 2), "{s}");
    assert!(s.tenants.iter().all(|t| t.lent == 0 && t.borrowed == 0 && t.held == 0), "{s}");
}

#[test]
fn tenants_stripes_take_distinct_dies() {
    let inst = common::timed_instance(&CONFIG.replace("idle_ms = 5", "idle_ms = 100000"));
    let a = inst.tenant("a").unwrap();
    let b = inst.tenant("b").unwrap();
    let (mut qa, mut qb) = (a.queue(4).unwrap(), b.queue(4).unwrap());
    let size = a.info().zone_size;
    for z in 0..2 {
        qa.write(z * size, &a.alloc(4096).unwrap()).unwrap();
        qb.write(z * size, &b.alloc(4096).unwrap()).unwrap();
    }
    let s = inst.status();
    let dies = |n: &str| -> BTreeSet<u32> {
        tenant(&s, n).stripes.iter().flat_map(|z| z.dies.iter().copied()).collect()
    };
    let (da, db) = (dies("a"), dies("b"));
    let columns: usize = s.tenants.iter().flat_map(|t| t.stripes.iter().map(|z| z.width)).sum();
    assert!(columns <= 8, "{s}");
    assert!(da.is_disjoint(&db), "a on {da:?}, b on {db:?}\n{s}");
}

/// One stripe unit (two blocks) of `a` at zone offset `*wp`, a pattern
/// per unit; then 1 ms of device time.
fn put(a: &dyn ZonedDevice, q: &mut Box<dyn ZoneQueue>, wp: &mut u64) {
    let bs = a.info().block_size as usize;
    let mut buf = a.alloc(2 * bs).unwrap();
    buf.fill(pattern(*wp));
    q.write(*wp, &buf).unwrap();
    *wp += 2;
    a.wait_ns(1_000_000);
}

fn pattern(at: u64) -> u8 {
    (at / 2 % 251) as u8 + 1
}

/// Checks that `a`'s zone 0 holds the pattern up to `wp`.
fn check_pattern(a: &dyn ZonedDevice, q: &mut Box<dyn ZoneQueue>, wp: u64) {
    let mut buf = a.alloc(2 * a.info().block_size as usize).unwrap();
    for at in (0..wp).step_by(2) {
        q.read(at, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == pattern(at)), "block {at} of a's zone 0");
    }
}

/// What [`park_spares`] leaves: a's queue, the lender's queue and name,
/// the other idle tenant's name, a's write pointer and the finishes sent
/// before the lender woke.
type Parked = (Box<dyn ZoneQueue>, Box<dyn ZoneQueue>, &'static str, &'static str, u64, u64);

/// `a` writes slowly into its zone 0 while `b` and `c` fall idle, so its
/// stripe widens with their spares; then (`halve`: after `a` opens a
/// second zone, which halves its target width) the lender of most of
/// them writes.
fn park_spares(inst: &Instance, halve: bool) -> Parked {
    let a = inst.tenant("a").unwrap();
    let mut qa = a.queue(8).unwrap();
    let cap = a.info().zone_capacity;
    let mut wp = 0u64;
    // No column comes near full.
    while tenant(&inst.status(), "a").borrowed == 0 {
        assert!(wp < cap / 2, "a never borrowed a spare: {}", inst.status());
        put(a.as_ref(), &mut qa, &mut wp);
    }
    // Two rows of the widest stripe: every column holds data.
    for _ in 0..16 {
        put(a.as_ref(), &mut qa, &mut wp);
    }
    // A second open zone halves a's target width (two writers), so once
    // the lender's columns are back a's zone 0 stays narrower than the
    // target and no widening takes them out of the park again at once.
    if halve {
        let mut one = a.alloc(2 * a.info().block_size as usize).unwrap();
        one.fill(0xee);
        qa.write(a.info().zone_size, &one).unwrap();
    }
    let s = inst.status();
    let before = s.internal_finishes;
    let (lender, other) = if tenant(&s, "b").lent > 0 { ("b", "c") } else { ("c", "b") };
    let lent = tenant(&s, lender).lent;
    let borrowed = tenant(&s, "a").borrowed;
    assert!(lent > 0, "{s}");
    // The lender writes: its spares are back on its budget at once,
    // parked in a's zone, and nothing is finished (nor, with it, padded).
    let l = inst.tenant(lender).unwrap();
    let mut ql = l.queue(2).unwrap();
    ql.write(0, &l.alloc(l.info().block_size as usize).unwrap()).unwrap();
    let s = inst.status();
    assert_eq!(tenant(&s, lender).lent, 0, "{s}");
    assert_eq!(tenant(&s, "a").borrowed, borrowed - lent, "{s}");
    // At its full target `a` takes them back into its zone at once.
    let parked = tenant(&s, "a").parked;
    assert!(parked <= lent && (parked > 0 || !halve), "{s}");
    assert!(s.device_active <= s.device_limit, "{s}");
    (qa, ql, lender, other, wp, before)
}

#[test]
fn a_returned_spare_is_parked_without_a_finish_and_keeps_its_data() {
    let inst = common::timed_instance(CONFIG);
    let a = inst.tenant("a").unwrap();
    let (mut qa, ql, _, other, mut wp, before) = park_spares(&inst, true);
    // a goes on; the parked columns take no new stripe (they are not in
    // the zone's stripe now) and are not finished.
    for _ in 0..8 {
        put(a.as_ref(), &mut qa, &mut wp);
        let s = inst.status();
        let stripe = &tenant(&s, "a").stripes[0];
        assert!(stripe.borrowed as u32 <= tenant(&s, other).lent, "{s}");
    }
    let s = inst.status();
    assert_eq!(s.internal_finishes, before, "a returned spare was finished: {s}");
    assert_eq!(s.internal_failures, 0, "{s}");
    // Every block a wrote reads back, the parked columns' included.
    check_pattern(a.as_ref(), &mut qa, wp);
    // Finishing the logical zone finishes the parked columns too (it is
    // a ZNS finish); resetting everything brings every zone back.
    qa.zone_action(ZoneAction::Finish, Target::Zone(0)).unwrap();
    let mut queues: Vec<Box<dyn ZoneQueue>> = vec![qa, ql];
    settle_some(&inst, &mut queues);
    let s = inst.status();
    assert_eq!(tenant(&s, "a").parked, 0, "{s}");
    assert!(s.internal_finishes > before, "{s}");
    for q in queues.iter_mut() {
        q.zone_action(ZoneAction::Reset, Target::All).unwrap();
    }
    settle(&inst, &mut queues);
    let s = inst.status();
    assert_eq!((s.device_active, s.free_zones), (0, inst.base().info().zone_count - 2), "{s}");
    assert!(s.tenants.iter().all(|t| t.lent == 0 && t.borrowed == 0 && t.held == 0), "{s}");
}

#[test]
fn a_zone_with_parked_columns_comes_back_after_a_restart() {
    let (emu, memory) = common::timed_emulator();
    let config = zns_ezns::Config::from_toml(CONFIG).unwrap();
    let mut wp;
    {
        let inst = Instance::open(common::base(&emu, &memory), config.clone()).unwrap();
        let a = inst.tenant("a").unwrap();
        let (mut qa, mut ql, _, _, at, _) = park_spares(&inst, true);
        wp = at;
        put(a.as_ref(), &mut qa, &mut wp);
        qa.flush().unwrap();
        ql.flush().unwrap();
    }
    let inst = Instance::open(common::base(&emu, &memory), config).unwrap();
    let a = inst.tenant("a").unwrap();
    let mut qa = a.queue(8).unwrap();
    assert_eq!(qa.zone(0).unwrap().written(), wp, "{}", inst.status());
    // The parked columns, which no later group went on, are finished.
    assert!(inst.recovery().finished >= 1, "{:?}", inst.recovery());
    check_pattern(a.as_ref(), &mut qa, wp);
    // The zone goes on from its write pointer, over columns that can.
    for _ in 0..8 {
        put(a.as_ref(), &mut qa, &mut wp);
    }
    check_pattern(a.as_ref(), &mut qa, wp);
    let s = inst.status();
    assert!(s.device_active <= s.device_limit && s.internal_failures == 0, "{s}");
}

/// Polls until the control queue has nothing left to do.
fn settle_some(inst: &Instance, queues: &mut [Box<dyn ZoneQueue>]) {
    for _ in 0..10_000 {
        for q in queues.iter_mut() {
            q.poll(usize::MAX, &mut |_| {});
        }
        inst.pump();
        inst.base().wait_ns(100_000);
        if inst.status().internal_pending == 0 {
            return;
        }
    }
}

#[test]
fn a_logical_zone_with_parked_columns_fills_without_padding() {
    for halve in [true, false] {
        fill_after_parking(halve);
    }
}

/// [`park_spares`], then `a` fills its zone 0: nothing is padded.
fn fill_after_parking(halve: bool) {
    // Groups no wider than the zone scale: a logical zone can fill its
    // physical zones exactly (wider groups pad by design).
    let inst = common::timed_instance(&CONFIG.replace("zone_scale = 4", "zone_scale = 8"));
    let a = inst.tenant("a").unwrap();
    let bs = a.info().block_size as u128;
    let (mut qa, ql, ..) = park_spares(&inst, halve);
    let mut wp = qa.zone(0).unwrap().written();
    // From here only `a` writes, and eZNS's journal.
    let (media, journal) = (common::media_written(&inst), inst.status().journal_blocks_written);
    let from = wp;
    while wp < a.info().zone_capacity {
        put(a.as_ref(), &mut qa, &mut wp);
    }
    let mut queues: Vec<Box<dyn ZoneQueue>> = vec![qa, ql];
    settle_some(&inst, &mut queues);
    let s = inst.status();
    let data = (wp - from + s.journal_blocks_written - journal) as u128 * bs;
    // The parked columns came back and filled: the logical zone took
    // exactly the physical zones its capacity needs, each written full.
    assert_eq!(tenant(&s, "a").parked, 0, "{s}");
    assert_eq!(common::media_written(&inst) - media, data, "blocks padded (halve {halve}): {s}");
    assert_eq!(s.internal_padded_blocks, 0, "{s}");
    check_pattern(a.as_ref(), &mut queues[0], wp);
}
