//! eZNS on a dilated device keeps its time in the modelled drive's units:
//! the same work on a virtual clock dilated 8 times leaves the same
//! instance clock, write latency and read windows as undilated.

mod common;

use zns_device::ZonedDevice;
use zns_ezns::{Config, Instance, Status};

const CONFIG: &str = r#"
device = "emu:ezns-test"
zone_scale = 4
stripe_unit_kib = 8
max_width = 8

[[tenant]]
name = "a"
zones = 8
active_zones = 4

[scheduler]
# Above the model's read latency, below eight times it.
read_target_us = 200
"#;

/// Writes a zone of tenant `a` in 64 KiB pieces, reads it back at queue
/// depth 8, and returns the instance's status.
fn run(factor: f64) -> Status {
    let (emu, memory) = common::timed_emulator_dilated(factor);
    let inst = Instance::open(common::base(&emu, &memory), Config::from_toml(CONFIG).unwrap())
        .expect("instance");
    let a = inst.tenant("a").unwrap();
    let mut q = a.queue(8).unwrap();
    let bs = a.info().block_size as usize;
    let per = 65536 / bs;
    let mut buf = a.alloc(per * bs).unwrap();
    buf.fill(0x5A);
    let cap = a.info().zone_capacity;
    let mut lba = 0;
    // All but the last piece: the zone stays open, its stripe shown.
    while lba + 2 * per as u64 <= cap {
        q.write(lba, &buf).unwrap();
        lba += per as u64;
    }
    for round in 0..4u64 {
        for i in 0..lba / per as u64 {
            let at = (i * 7 + round) % (lba / per as u64) * per as u64;
            q.read(at, &mut buf).unwrap();
        }
    }
    let s = inst.status();
    drop(q);
    s
}

#[test]
fn a_dilated_device_leaves_the_schedulers_figures_in_the_drives_time() {
    let plain = run(1.0);
    let dilated = run(8.0);
    let close = |a: f64, b: f64| (a - b).abs() <= 0.02 * a.abs().max(b.abs()) + 1e-9;
    assert!(plain.now_ns > 0);
    assert!(
        close(plain.now_ns as f64, dilated.now_ns as f64),
        "instance clock: {} undilated, {} dilated",
        plain.now_ns,
        dilated.now_ns
    );
    assert!(
        close(plain.write_latency_us, dilated.write_latency_us),
        "write latency: {} µs undilated, {} µs dilated",
        plain.write_latency_us,
        dilated.write_latency_us
    );
    assert_eq!(plain.write_window_kib, dilated.write_window_kib);
    let windows =
        |s: &Status| -> Vec<f64> { s.tenants[0].stripes.iter().map(|z| z.read_window).collect() };
    assert!(!windows(&plain).is_empty(), "{plain:?}");
    assert_eq!(windows(&plain), windows(&dilated));
}
