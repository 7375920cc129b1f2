//! Shared test setup: a small emulated device without timing (zones of 64
//! blocks, capacity 48) and an eZNS instance on it.

#![allow(dead_code)]

use std::sync::Arc;

use zns_device::{DriverDevice, ZonedDevice};
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::profile::Profile;
use zns_emulator::Emulator;
use zns_ezns::{Config, Instance};
use zns_spec::log::{GetLogPage, LogPageId, OcpSmartLog};

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

/// [`PROFILE`] with a timing model (virtual clock): 4 channels × 2 dies,
/// a zone on one die (one 192 KiB erase block), a shared 1 MiB buffer.
pub fn timed_profile() -> String {
    let timing = r#"
[timing]
fetch_ns = 3000
post_ns = 3000
link_to_host_mbps = 3300
link_from_host_mbps = 2350
prp_list_ns = 1200
processing_units = 2
read_ns = 2200
write_ns = 1860
write_overlap_ns = 3500
append_ns = 3800
append_overlap_ns = 3500
append_serial_ns = 1700
implicit_open_ns = 2500
flush_ns = 2000
other_ns = 3000
report_ns = 3000
open_ns = 3560
close_ns = 5000
close_buffered_ns = 4200
finish_ns = 7500
reset_ns = 5000
reset_metadata_us = 200
channels = 4
dies_per_channel = 2
planes = 2
page_kib = 16
bits_per_cell = 3
channel_mbps = 380
channel_overhead_ns = 6000
read_us = [40.0, 44.0, 55.0]
program_us = 2320
suspend_us = 50
suspend_limit = 4
erase_us = 3000
block_kib = 192
close_block_us = 2400
write_buffer_kib = 1024
zone_stripe_dies = 1
"#;
    PROFILE.replace("timing = \"none\"\n", "").replace("zones = 96", "zones = 256") + timing
}

/// An emulated controller of [`timed_profile`] and its host memory.
pub fn timed_emulator() -> (Arc<zns_emulator::Controller>, Arc<ProcessMemory>) {
    timed_emulator_dilated(1.0)
}

/// [`timed_emulator`] on a virtual clock dilated `factor` times.
pub fn timed_emulator_dilated(factor: f64) -> (Arc<zns_emulator::Controller>, Arc<ProcessMemory>) {
    let profile = Profile::from_toml(&timed_profile()).expect("timed profile");
    let memory = ProcessMemory::new();
    let host: Arc<dyn HostMemory> = memory.clone();
    let dilation = zns_emulator::clock::Dilation::new(factor).expect("dilation");
    let emu = Emulator::with_profile(profile).dilation(dilation).build(host).expect("emulator");
    (emu, memory)
}

/// A fresh instance of `config` on a new timed emulated device.
pub fn timed_instance(config: &str) -> Instance {
    let (emu, memory) = timed_emulator();
    Instance::open(base(&emu, &memory), Config::from_toml(config).expect("config"))
        .expect("instance")
}

/// [`timed_emulator`] on the real clock: completions fall due in real time.
pub fn timed_emulator_real() -> (Arc<zns_emulator::Controller>, Arc<ProcessMemory>) {
    let profile = Profile::from_toml(&timed_profile()).expect("timed profile");
    let memory = ProcessMemory::new();
    let host: Arc<dyn HostMemory> = memory.clone();
    let emu = Emulator::with_profile(profile)
        .clock(zns_emulator::clock::ClockMode::Real)
        .build(host)
        .expect("emulator");
    (emu, memory)
}

/// Bytes the base device has programmed (its OCP log's media bytes
/// written: the host's data and what Finish commands padded).
pub fn media_written(inst: &Instance) -> u128 {
    let page = GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128);
    let b = inst.base().log_page(page).unwrap();
    OcpSmartLog::from_bytes(b[..512].try_into().unwrap()).media_bytes_written
}
