//! The background pump: on a real clock eZNS's internal commands complete
//! while every tenant is idle; with `pump_us = 0`, or on a virtual clock,
//! only polls move them; the pump's thread ends with its instance.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_device::{Target, ZoneAction, ZonedDevice};
use zns_emulator::host::ProcessMemory;
use zns_ezns::{Config, Instance};

fn config(pump_us: u64) -> Config {
    Config::from_toml(&format!(
        r#"
device = "emu:ezns-test"
zone_scale = 2
stripe_unit_kib = 8
max_width = 4
pump_us = {pump_us}

[[tenant]]
name = "a"
zones = 8
active_zones = 4
"#
    ))
    .unwrap()
}

type Emu = (Arc<zns_emulator::Controller>, Arc<ProcessMemory>);

/// Fills three logical zones of tenant `a` and resets the first, then
/// drops the queue: the resets and finishes of their physical zones are
/// left on eZNS's control queue, and no tenant polls. Returns the
/// instance and how many internal commands were then in flight.
fn leave_internal_work((emu, memory): &Emu, config: Config) -> (Instance, u64) {
    let inst = Instance::open(common::base(emu, memory), config).unwrap();
    let a = inst.tenant("a").unwrap();
    let bs = a.info().block_size as usize;
    let (size, cap) = (a.info().zone_size, a.info().zone_capacity);
    let mut q = a.queue(8).unwrap();
    let mut buf = a.alloc(8 * bs).unwrap();
    buf.fill(0x3C);
    for start in (0..3).map(|z| z * size) {
        for lba in (start..start + cap).step_by(8) {
            q.write(lba, &buf).unwrap();
        }
    }
    q.zone_action(ZoneAction::Reset, Target::Zone(0)).unwrap();
    drop(q);
    let pending = inst.status().internal_pending;
    (inst, pending)
}

/// Threads of this process named like the pump's.
fn pump_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "ezns-pump")
        .count()
}

/// Waits up to `limit` for `done`.
fn within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    done()
}

// One test: the thread count is the process's.
#[test]
fn the_pump_moves_internal_commands_on_while_tenants_are_idle() {
    // Without the pump the internal commands wait for a poll.
    let (inst, pending) = leave_internal_work(&common::timed_emulator_real(), config(0));
    assert!(pending > 0, "the scenario leaves internal commands in flight");
    assert_eq!(pump_threads(), 0);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(inst.status().internal_pending, pending, "nothing polled them");
    assert_eq!(inst.status().internal_pumped, 0);
    inst.pump();
    assert!(within(Duration::from_secs(5), || {
        inst.pump();
        inst.status().internal_pending == 0
    }));
    assert!(inst.status().internal_pumped > 0, "the completions were the pump's");
    drop(inst);

    // With it they complete with no poll, and no later than a pump's
    // period or so after they fell due. How many are still in flight when
    // the scenario ends depends on the host's speed (the pump may already
    // have taken them all), so the pump's own count is what shows it.
    let emu = common::timed_emulator_real();
    let (inst, _) = leave_internal_work(&emu, config(200));
    assert_eq!(pump_threads(), 1);
    assert!(
        within(Duration::from_secs(5), || inst.status().internal_pending == 0),
        "still {} internal commands in flight",
        inst.status().internal_pending
    );
    assert!(inst.status().internal_pumped > 0, "no completion was the pump's");
    let late = emu.0.lateness().unwrap();
    assert!(late.max_ns < 100_000_000, "a completion posted {} ns late", late.max_ns);
    drop(inst);
    assert!(within(Duration::from_secs(5), || pump_threads() == 0), "the thread outlived it");

    // On a virtual clock no thread runs beside the polls.
    let (inst, pending) = leave_internal_work(&common::timed_emulator(), config(200));
    assert!(pending > 0);
    assert_eq!(pump_threads(), 0);
    drop(inst);
}
