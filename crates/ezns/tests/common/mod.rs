//! Shared test setup: a small emulated device without timing (zones of 64
//! blocks, capacity 48) and an eZNS instance on it.

#![allow(dead_code)]

use std::sync::Arc;

use zns_device::{DriverDevice, ZonedDevice};
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::profile::Profile;
use zns_emulator::Emulator;
use zns_ezns::{Config, Instance};

/// The device: `zones` zones of 64 blocks (capacity 48), max active 32.
pub const PROFILE: &str = r#"
name = "ezns-test"
description = "small zones for eZNS tests"
timing = "none"

[controller]
serial = "EZNS-TEST-0001"
model = "znskit emulated ZNS SSD (eZNS tests)"
max_queue_entries = 1024
max_io_queues = 64
mdts_log2 = 5
zasl_log2 = 4

[[namespace]]
kind = "zoned"
block_size = 4096
zones = 96
zone_size = 64
zone_capacity = 48
max_open = 32
max_active = 32
descriptor_extension_bytes = 0
read_across_zone_boundaries = true
"#;

/// Two tenants, zone scale 2 (logical capacity 96 blocks), 8 KiB units.
pub const CONFIG: &str = r#"
device = "emu:ezns-test"
zone_scale = 2
stripe_unit_kib = 8
max_width = 4

[[tenant]]
name = "a"
zones = 10
active_zones = 6

[[tenant]]
name = "b"
zones = 10
active_zones = 4
"#;

/// An emulated controller of [`PROFILE`] and its host memory.
pub fn emulator() -> (Arc<zns_emulator::Controller>, Arc<ProcessMemory>) {
    let profile = Profile::from_toml(PROFILE).expect("profile");
    let memory = ProcessMemory::new();
    let host: Arc<dyn HostMemory> = memory.clone();
    let emu = Emulator::with_profile(profile).build(host).expect("emulator");
    (emu, memory)
}

/// The driver's device on an emulated controller.
pub fn base(
    emu: &Arc<zns_emulator::Controller>,
    memory: &Arc<ProcessMemory>,
) -> Arc<dyn ZonedDevice> {
    Arc::new(
        DriverDevice::from_emulator(Arc::clone(emu), Arc::clone(memory), "emu:ezns-test")
            .expect("device"),
    )
}

/// A fresh instance of `config` on a new emulated device.
pub fn instance(config: &str) -> Instance {
    let (emu, memory) = emulator();
    Instance::open(base(&emu, &memory), Config::from_toml(config).expect("config"))
        .expect("instance")
}
