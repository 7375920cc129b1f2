//! f2fs on znskit's NVMe/TCP target, in a guest that boots Debian's
//! generic kernel (the cloud kernel the other guests boot has no f2fs).
//!
//! `zns serve` exports a zoned namespace (`emu:small`, 4 MiB zones) and,
//! as a conventional namespace, the FTL on a small emulated device: f2fs
//! keeps its metadata (superblock, checkpoints, SIT, NAT, SSA) at fixed
//! places that are rewritten in place, so on a ZNS drive, which has no
//! conventional zones, it needs a conventional device first. The guest
//! runs `mkfs.f2fs -m` (zoned) with the FTL as the metadata device and
//! the zoned namespace added by `-c`, mounts it, writes and verifies files
//! with fio (crc32c), unmounts, and runs `fsck.f2fs` on it.

use crate::clients::{connect_lines, end_lines, start_lines};

/// The subsystem of the f2fs run.
pub const NQN: &str = "nqn.2026-11.io.znskit:f2fs";

/// The zoned namespace: 256 zones of 4 MiB (capacity 3.75 MiB), 14 open.
pub const ZONED_DEVICE: &str = "emu:small";

/// The device under the FTL that becomes f2fs's metadata device: cut to
/// 30 zones, so the FTL's disk (60 MiB) holds f2fs's metadata and little
/// more and the files land on the zoned namespace. Its size is a whole
/// number of the zoned namespace's 4 MiB zones: mkfs.f2fs 1.15 starts the
/// zoned device right after device 0's last block, and a device 0 that is
/// not a whole number of sections leaves every section straddling two
/// zones (fsck.f2fs then fails; the 67.5 MiB of 32 zones did).
pub const FTL_DEVICE: &str = "emu:small,zones=30";

/// Kernel modules the guest needs beyond the built-in ones. f2fs checksums
/// its metadata with the crypto API's `crc32`, which it asks for by a soft
/// dependency that the module list does not follow: `crc32_generic`.
pub const MODULES: &[&str] =
    &["mq-deadline", "nvme-core", "nvme-tcp", "virtio_pci", "virtio_net", "crc32_generic", "f2fs"];

/// Host programs packed into the guest with their libraries.
pub const TOOLS: &[(&str, &str)] = &[
    ("nvme", "nvme-cli"),
    ("fio", "fio"),
    ("blkzone", "util-linux"),
    ("mkfs.f2fs", "f2fs-tools"),
    ("fsck.f2fs", "f2fs-tools"),
];

/// MiB each of fio's two jobs writes and verifies on f2fs.
pub const FIO_MIB_PER_JOB: u32 = 64;

/// The guest's `/init`: connect, mkfs.f2fs on both namespaces, mount,
/// fio with crc32c verification, umount, fsck.f2fs, disconnect.
pub fn init_script(modules: &[String], nvmf_port: u16) -> String {
    let mut s = start_lines(
        "f2fs on znskit's NVMe/TCP target (zoned namespace, FTL metadata device), a result \
         marker, power off.",
        modules,
        false,
    );
    s.push_str(&connect_lines(nvmf_port, NQN, 2));
    s.push_str(
        r#"Z=/dev/nvme$(suffix_of 1)
C=/dev/nvme$(suffix_of 2)
say "$Z: zoned=$(cat /sys/block/$(basename $Z)/queue/zoned) zones=$(cat /sys/block/$(basename $Z)/queue/nr_zones); $C: $(cat /sys/block/$(basename $C)/size) sectors"
expect f2fs-zoned-ns host-managed cat /sys/block/$(basename $Z)/queue/zoned
expect f2fs-metadata-ns none cat /sys/block/$(basename $C)/queue/zoned
echo mq-deadline > /sys/block/$(basename $Z)/queue/scheduler
"#,
    );
    s.push_str(&fs_lines("$Z", "$C", FIO_MIB_PER_JOB));
    s.push_str(&format!("run nvme-disconnect nvme disconnect -n {NQN}\n"));
    s.push_str(&end_lines());
    s
}

/// The f2fs lines on zoned block device `zoned` and conventional
/// (metadata) device `conventional` (shell expressions): `mkfs.f2fs -m`
/// with the zoned device added by `-c`, mount, fio's two jobs writing
/// and verifying `mib_per_job` MiB each (crc32c), umount, zones found
/// full, `fsck.f2fs` clean.
pub fn fs_lines(zoned: &str, conventional: &str, mib_per_job: u32) -> String {
    format!(
        r#"# run, keeping the output, which must also hold $2.
checked() {{
    label=$1; want=$2; shift 2
    say "RUN $label: $*"
    t0=$(now)
    "$@" > /tmp/$label.out 2>&1 < /dev/null
    rc=$?
    cat /tmp/$label.out
    say "END $label rc=$rc ($(( $(now) - t0 )) s)"
    if [ $rc -ne 0 ]; then fail=1; say "FAILED $label"; fi
    grep -qF -- "$want" /tmp/$label.out || {{ fail=1; echo "FAIL $label: '$want' not in its output"; }}
}}
checked mkfs-f2fs "Host-managed zoned block device" mkfs.f2fs -f -m -c {zoned} {conventional}
run mount-f2fs mount -t f2fs {conventional} /mnt
expect f2fs-mounted " /mnt f2fs " cat /proc/mounts
run fio-f2fs fio --name=f2fs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size={mib_per_job}m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
run umount-f2fs umount /mnt
expect f2fs-zones-written "(fu)" blkzone report {zoned}
checked fsck-f2fs "[FSCK] other corrupted bugs" fsck.f2fs -f --dry-run {conventional}
if grep -qF "[Fail]" /tmp/fsck-f2fs.out; then fail=1; echo "FAIL fsck-f2fs: [Fail] in its output"; fi
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_formats_both_namespaces_and_checks_after_unmounting() {
        let s = init_script(&["f2fs.ko".into()], 4420);
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("insmod /lib/modules/f2fs.ko"));
        assert!(s.contains(&format!("nvme connect $T -n {NQN}")));
        let mkfs = s.find("mkfs.f2fs -f -m -c $Z $C").unwrap();
        let fio = s.find("--directory=/mnt").unwrap();
        let umount = s.find("umount /mnt").unwrap();
        let fsck = s.find("fsck.f2fs -f --dry-run $C").unwrap();
        assert!(mkfs < fio && fio < umount && umount < fsck);
        assert!(s.contains("--verify=crc32c --do_verify=1"));
        assert!(s.trim_end().ends_with("poweroff -f"));
    }
}
