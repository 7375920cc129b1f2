//! The kernel-path backends (`ng:` and `zbd:`) against the zoned
//! namespaces this machine has, read-only: open, describe, report every
//! zone. A build host seldom has such a namespace, so the tests are
//! ignored by default: `cargo test -p zns-device --test kernel_backends --
//! --ignored` runs them. Each skips, saying why, where there is no such
//! namespace or no permission to open it, except under `CI=true`, where it
//! fails. The destructive conformance suite runs
//! against them with `zns-conformance URI` (or `ZNS_CONFORMANCE_DEVICE`
//! with `cargo test`), as `cargo xtask vmtest` does inside a QEMU guest.

use std::path::PathBuf;

use zns_device::{open, DeviceError, ReportFilter};

/// Says the test is skipped for want of `what` (`why`: what is missing
/// and how to get it); the test then returns. Under `CI=true` it fails
/// instead, so that a missing device cannot pass unseen.
fn skip(what: &str, why: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {what} is missing: {why}");
    eprintln!("skipped: {what} ({why})");
}

/// Where a zoned namespace comes from, for the skip messages.
const GET: &str = "needs a ZNS drive, or QEMU's emulated one as `cargo xtask vmtest` uses";

fn devices(dir: &str, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.strip_prefix(prefix).is_some_and(|rest| {
                            rest.contains('n') && rest.chars().all(|c| c.is_ascii_alphanumeric())
                        })
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Opens `uri` and checks the description against a full report; returns
/// false (after saying why) when the device is not usable here.
fn describe_and_report(uri: &str) -> bool {
    let dev = match open(uri) {
        Ok(d) => d,
        Err(DeviceError::Unsupported(why)) => {
            eprintln!("{uri}: not a zoned namespace ({why})");
            return false;
        }
        Err(e @ DeviceError::Unavailable { .. }) => {
            eprintln!("{uri}: cannot open ({e})");
            return false;
        }
        Err(e) => panic!("{uri}: {e}"),
    };
    let info = dev.info().clone();
    assert!(info.zone_count > 0 && info.zone_size > 0, "{info:?}");
    assert!(info.zone_capacity <= info.zone_size);
    assert!(info.zasl_bytes <= info.mdts_bytes && info.mdts_bytes >= info.block_size as usize);
    let mut q = dev.queue(4).unwrap();
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX).unwrap();
    assert_eq!(zones.len() as u64, info.zone_count);
    for (i, z) in zones.iter().enumerate() {
        assert_eq!(z.start, i as u64 * info.zone_size, "{uri}: zone {i}");
    }
    eprintln!("{uri}: {} zones of {} blocks, {}", info.zone_count, info.zone_size, info.transport);
    true
}

#[test]
#[ignore = "needs a zoned NVMe namespace: cargo test -p zns-device --test kernel_backends -- --ignored"]
fn passthrough_devices_describe_themselves() {
    let found = devices("/dev", "ng");
    if found.is_empty() {
        skip("an NVMe generic namespace device", &format!("no /dev/ng* on this machine; {GET}"));
        return;
    }
    let used = found.iter().filter(|p| describe_and_report(&format!("ng:{}", p.display()))).count();
    if used == 0 {
        let why = format!("none of {found:?} is one this process can open (root?); {GET}");
        skip("a zoned NVMe generic namespace device", &why);
    }
}

#[test]
#[ignore = "needs a zoned NVMe namespace: cargo test -p zns-device --test kernel_backends -- --ignored"]
fn zoned_block_devices_describe_themselves() {
    let zoned: Vec<PathBuf> = devices("/dev", "nvme")
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            std::fs::read_to_string(format!("/sys/class/block/{name}/queue/zoned"))
                .is_ok_and(|s| s.trim() == "host-managed")
        })
        .collect();
    if zoned.is_empty() {
        let why = format!("no host-managed /dev/nvme*n* on this machine; {GET}");
        skip("a zoned NVMe block device", &why);
        return;
    }
    let mut used = 0;
    for p in &zoned {
        for io in ["", ",io=psync"] {
            used += usize::from(describe_and_report(&format!("zbd:{}{io}", p.display())));
        }
    }
    if used == 0 {
        let why = format!("none of {zoned:?} is one this process can open (root?); {GET}");
        skip("a zoned NVMe block device", &why);
    }
}
