//! `cargo xtask ublk`'s client parts: real clients on znskit's ublk block
//! devices in the guest, each part with servers of its own.
//!
//! - `fio-zbd`: fio's own zoned block device tests
//!   (`t/zbd/test-zbd-support` from Debian's fio source package, see
//!   [`crate::fio_zbd`]) on `zns ublk` serving an emulated device of fio's
//!   test profile ([`fio_zbd::PROFILE`]: 144 zones of 1 MiB, data in
//!   RAM), each result checked against [`EXPECTED_FAILURES`] and
//!   [`EXPECTED_SKIPS`] both ways.
//! - `zonefs`: zonefs on a device of the same profile, formatted with
//!   the superblock of [`crate::zonefs`] (Debian 12 has no mkzonefs),
//!   mounted, written and checked as there.
//! - `f2fs`: `mkfs.f2fs -m` on the zoned ublk device of `emu:small` with
//!   the FTL's ublk device (on `emu:small,zones=30`) as its conventional
//!   metadata device, mount, fio with crc32c verification, umount,
//!   `fsck.f2fs` ([`crate::f2fs::fs_lines`]).
//! - `btrfs`: btrfs in zoned mode on the zoned ublk device of
//!   `emu:small`: mkfs, mount, fio with crc32c verification, umount,
//!   `btrfs check`.
//! - `ftl-fs`: ext4 on the FTL's ublk device: fio with crc32c
//!   verification, a SQLite workload checked with `PRAGMA
//!   integrity_check`, umount, `e2fsck -f -n`.

use crate::vmtest::GuestEntry;
use crate::{f2fs, fio_zbd, zonefs};

/// The client parts, in the order they run.
pub const PARTS: &[&str] = &["fio-zbd", "zonefs", "f2fs", "btrfs", "ftl-fs"];

/// Where fio's test profile sits in the guest.
pub const PROFILE_PATH: &str = "/etc/znskit/fio-zbd.toml";

/// fio zbd tests that fail on the zoned ublk device, each with the
/// reason: fio's own, as on the NVMe/TCP namespace.
pub const EXPECTED_FAILURES: &[(u32, &str)] = fio_zbd::EXPECTED_FAILURES;

/// fio zbd tests the script skips on the zoned ublk device, with its
/// reason: as on an NVMe ZNS namespace, it is neither a SCSI device nor
/// a regular block device and has no conventional zones.
pub const EXPECTED_SKIPS: &[(u32, &str)] = fio_zbd::EXPECTED_SKIPS;

/// MiB each of fio's two jobs writes and verifies on a filesystem.
const FIO_MIB_PER_JOB: u32 = 32;

/// Kernel modules `part` needs beyond the ublk driver and ext4.
pub fn modules(part: &str) -> &'static [&'static str] {
    match part {
        "zonefs" => &["zonefs"],
        // f2fs asks for the crypto API's crc32 by a soft dependency that
        // the module list does not follow.
        "f2fs" => &["crc32_generic", "f2fs"],
        // libcrc32c, which btrfs needs, fails to load unless a crc32c
        // algorithm is there first.
        "btrfs" => &["crc32c_generic", "btrfs"],
        _ => &[],
    }
}

/// Host programs (program, Debian package) `part` runs in the guest.
pub fn tools(part: &str) -> Vec<(&'static str, &'static str)> {
    let mut t = vec![("fio", "fio")];
    match part {
        "fio-zbd" => t.extend_from_slice(fio_zbd::TOOLS),
        "zonefs" => t.extend_from_slice(zonefs::TOOLS),
        "f2fs" => t.extend_from_slice(&[("mkfs.f2fs", "f2fs-tools"), ("fsck.f2fs", "f2fs-tools")]),
        "btrfs" => t.extend_from_slice(&[("mkfs.btrfs", "btrfs-progs"), ("btrfs", "btrfs-progs")]),
        "ftl-fs" => t.push(("sqlite3", "sqlite3")),
        _ => {}
    }
    t
}

/// Files `part` needs in the guest beyond programs: fio's profile, the
/// zonefs superblock (with `uuid`).
pub fn entries(part: &str, uuid: [u8; 16]) -> Vec<GuestEntry> {
    let profile = || GuestEntry::File {
        path: PROFILE_PATH.into(),
        mode: 0o644,
        bytes: fio_zbd::PROFILE.as_bytes().to_vec(),
    };
    match part {
        "fio-zbd" => vec![profile()],
        "zonefs" => vec![
            profile(),
            GuestEntry::File {
                path: zonefs::GUEST_IMAGE.into(),
                mode: 0o644,
                bytes: zonefs::superblock("znskit", uuid),
            },
        ],
        _ => Vec::new(),
    }
}

/// The guest's lines of `part` (one of [`PARTS`]); `only`: the fio zbd
/// tests to run (all when empty). `mke2fs` is Debian's program's path.
/// Needs the shell helpers of `ublk.rs`.
pub fn lines(part: &str, only: &[u32], mke2fs: &str) -> String {
    let fio_device =
        format!("/bin/zns --device emu:profile={PROFILE_PATH} ublk --queues 2 --depth 32");
    match part {
        // The tests provoke failing requests on purpose (writes off the
        // write pointer, too many active zones).
        "fio-zbd" => format!(
            r#"# fio's zoned block device tests on a zoned ublk device.
if start_server ublk-fio-zbd /tmp/fz.out {fio_device}; then
{zbd}    stop_server ublk-fio-zbd-stop /tmp/fz.out failures-expected
fi
"#,
            zbd = fio_zbd::guest_lines("$D", only)
        ),
        "zonefs" => format!(
            r#"# zonefs on a zoned ublk device.
if start_server ublk-zonefs /tmp/zf.out {fio_device}; then
{zonefs}    stop_server ublk-zonefs-stop /tmp/zf.out
fi
"#,
            zonefs =
                zonefs::guest_lines("$D", fio_zbd::DEVICE_ZONES, fio_zbd::DEVICE_ZONE_CAPACITY)
        ),
        "f2fs" => format!(
            r#"# f2fs on a zoned ublk device, the FTL's ublk device its metadata device.
if start_server ublk-f2fs-zoned /tmp/f2z.out /bin/zns --device {zoned} ublk --queues 2 --depth 32; then
    ZD=$D; ZB=$B; ZSP=$SP
    if start_server ublk-f2fs-meta /tmp/f2c.out /bin/zns --device {meta} ftl ublk; then
        CD=$D
{fs}        stop_server ublk-f2fs-meta-stop /tmp/f2c.out
    fi
    SP=$ZSP; B=$ZB
    stop_server ublk-f2fs-zoned-stop /tmp/f2z.out
fi
"#,
            zoned = f2fs::ZONED_DEVICE,
            meta = f2fs::FTL_DEVICE,
            fs = f2fs::fs_lines("$ZD", "$CD", FIO_MIB_PER_JOB)
        ),
        "btrfs" => format!(
            r#"# btrfs in zoned mode on a zoned ublk device (Zone Append for data).
if start_server ublk-btrfs /tmp/bt.out /bin/zns --device emu:small ublk --queues 2 --depth 32; then
    run btrfs-mkfs mkfs.btrfs -f -q -O zoned -d single -m single $D
    run btrfs-mount mount -t btrfs $D /mnt
    run btrfs-fio fio --name=btrfs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size={FIO_MIB_PER_JOB}m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
    expect btrfs-zoned "zoned mode enabled" dmesg
    run btrfs-umount umount /mnt
    run btrfs-check btrfs check --readonly $D
    stop_server ublk-btrfs-stop /tmp/bt.out
fi
"#
        ),
        "ftl-fs" => format!(
            r#"# ext4 on the FTL's ublk device: fio, SQLite, fsck.
if start_server ublk-ftl-fs /tmp/ff.out /bin/zns --device emu:small ftl ublk --queues 2 --depth 32; then
    run ftl-fs-mkfs {mke2fs} -t ext4 -F -q $D
    run ftl-fs-mount mount -t ext4 $D /mnt
    run ftl-fs-fio fio --name=ext4 --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size={FIO_MIB_PER_JOB}m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
    expect ftl-fs-sqlite "ok" sqlite3 /mnt/test.db "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000) INSERT INTO t SELECT x, hex(randomblob(64)) FROM c; DELETE FROM t WHERE k % 3 = 0; VACUUM; PRAGMA integrity_check;"
    expect ftl-fs-sqlite-count "13334" sqlite3 /mnt/test.db "SELECT count(*) FROM t;"
    run ftl-fs-umount umount /mnt
    run ftl-fs-fsck e2fsck -f -n $D
    stop_server ublk-ftl-fs-stop /tmp/ff.out
fi
"#
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_serves_its_devices_and_runs_its_clients() {
        let z = lines("fio-zbd", &[5], "/usr/sbin/mke2fs");
        assert!(z.contains("emu:profile=/etc/znskit/fio-zbd.toml ublk"));
        assert!(z.contains("test-zbd-support -r -w -t 5 $D"));
        assert!(z.contains("stop_server ublk-fio-zbd-stop /tmp/fz.out failures-expected"));
        let f = lines("f2fs", &[], "/usr/sbin/mke2fs");
        let meta = f.find("ftl ublk").unwrap();
        assert!(meta < f.find("mkfs.f2fs -f -m -c $ZD $CD").unwrap());
        assert!(f.contains("SP=$ZSP; B=$ZB"));
        let b = lines("btrfs", &[], "/usr/sbin/mke2fs");
        assert!(b.contains("mkfs.btrfs -f -q -O zoned") && b.contains("btrfs check --readonly $D"));
        let e = lines("ftl-fs", &[], "/usr/sbin/mke2fs");
        assert!(e.contains("/usr/sbin/mke2fs -t ext4") && e.contains("PRAGMA integrity_check"));
        assert!(lines("zonefs", &[], "").contains("mount -t zonefs $D /mnt"));
        for p in PARTS {
            assert!(!lines(p, &[], "x").is_empty(), "{p}");
            assert!(tools(p).contains(&("fio", "fio")));
        }
        assert_eq!(entries("zonefs", [1; 16]).len(), 2);
        assert_eq!(modules("f2fs"), ["crc32_generic", "f2fs"]);
    }
}
