//! The kernel's ublk driver serving znskit devices: a zoned emulated
//! device appears as a host-managed block device and goes away at stop;
//! a block device takes writes and reads them back.
//!
//! Needs root and `ublk_drv` (Linux 6.6+), which a build host often lacks,
//! so the test is ignored by default: `cargo test -p zns-ublk -- --ignored`
//! runs it. Where the kernel has no ublk it says it skipped, except under
//! `CI=true`, where it fails. `cargo xtask ublk` runs the same paths (and
//! blkzone, dd, mkfs.ext4, fsck) in a QEMU guest whose kernel has ublk.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use zns_block::{BlockDevice, MemoryBlockDevice};
use zns_ublk::{check_control, Config, Target, UblkDevice, CONTROL_PATH};

/// `false` (after saying why) when the kernel's ublk cannot be used here;
/// panics instead under `CI=true`.
fn ublk_usable() -> bool {
    let Err(e) = check_control(Path::new(CONTROL_PATH)) else { return true };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and the kernel's ublk is missing: {e}");
    }
    eprintln!("skipped: the kernel's ublk ({e})");
    false
}

fn sysfs(dev: &UblkDevice, attr: &str) -> String {
    let p = format!("/sys/block/ublkb{}/{attr}", dev.id());
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")).trim().to_string()
}

#[test]
#[ignore = "needs root and the kernel's ublk_drv: cargo test -p zns-ublk -- --ignored"]
fn a_zoned_device_is_a_host_managed_block_device_until_stopped() {
    if !ublk_usable() {
        return;
    }
    // tiny: 16 zones of 64 4-KiB blocks (512 sectors), max open 4.
    let dev = zns_device::open("emu:tiny").unwrap();
    let ublk = UblkDevice::start(Target::Zoned(dev), &Config::default()).unwrap();
    assert!(ublk.zoned());
    assert_eq!(sysfs(&ublk, "queue/zoned"), "host-managed");
    assert_eq!(sysfs(&ublk, "queue/nr_zones"), "16");
    assert_eq!(sysfs(&ublk, "queue/chunk_sectors"), "512");
    assert_eq!(sysfs(&ublk, "queue/max_open_zones"), "4");
    let mut f = fs::File::open(ublk.block_path()).unwrap();
    let mut block = vec![0xffu8; 4096];
    f.read_exact(&mut block).unwrap();
    assert!(block.iter().all(|&b| b == 0), "an empty zone reads as zeroes");
    drop(f);
    let path = ublk.block_path();
    let stats = ublk.stop().unwrap();
    assert!(stats.requests > 0 && stats.failed == 0, "{stats:?}");
    assert!(!path.exists(), "{} is gone", path.display());
}

#[test]
#[ignore = "needs root and the kernel's ublk_drv: cargo test -p zns-ublk -- --ignored"]
fn a_block_device_takes_writes_and_reads_them_back() {
    if !ublk_usable() {
        return;
    }
    let mem = Arc::new(MemoryBlockDevice::new(4096, 2048));
    let target =
        Target::Block { device: Arc::clone(&mem) as Arc<dyn BlockDevice>, name: "memory".into() };
    let config = Config { queues: 2, depth: 16, ..Config::default() };
    let ublk = UblkDevice::start(target, &config).unwrap();
    assert_eq!(sysfs(&ublk, "queue/zoned"), "none");
    assert_eq!(sysfs(&ublk, "size"), (2048 * 8).to_string());
    let mut f = fs::OpenOptions::new().read(true).write(true).open(ublk.block_path()).unwrap();
    let data: Vec<u8> = (0..65536).map(|i| (i % 253) as u8).collect();
    f.seek(SeekFrom::Start(4096 * 10)).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let stats = ublk.stop().unwrap();
    assert_eq!(stats.failed, 0, "{stats:?}");
    let mut back = vec![0u8; data.len()];
    mem.read(10, &mut back).unwrap();
    assert_eq!(back, data);
}
