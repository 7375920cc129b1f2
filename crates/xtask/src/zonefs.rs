//! zonefs on a zoned namespace of `zns serve`, formatted here: Debian 12
//! packages no zonefs-tools, so there is no `mkzonefs` to run in the guest.
//!
//! zonefs keeps one 4 KiB superblock at the start of the device's first
//! zone; every other zone becomes a file (`seq/N` for sequential zones)
//! whose size is the zone's write pointer. The superblock's layout, from
//! the kernel's zonefs documentation and definitions (all little-endian):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `0x5a4f4653` ("ZOFS") |
//! | 4 | CRC32 of the 4 KiB block with this field zero |
//! | 8 | label, 32 bytes |
//! | 40 | UUID, 16 bytes |
//! | 56 | feature flags (u64; none set: default owner and permissions) |
//! | 64, 68, 72 | uid, gid, permissions (used only with their features) |
//! | 76 | reserved, zero, to 4096 |
//!
//! The kernel checks the checksum as `crc32(~0, block)`: the reflected
//! IEEE polynomial, initial value all ones, no final inversion. The guest
//! writes the block at LBA 0 with direct I/O and finishes zone 0, which
//! zonefs never exposes, so it cannot be written again.
//!
//! The guest writes zone files with asynchronous direct I/O: this
//! kernel's zonefs refuses its own synchronous direct writes (Zone
//! Append) on a zoned null_blk as on the target; see docs/nvmf.md.

/// Size of the superblock.
pub const SUPER_SIZE: usize = 4096;

/// The superblock's magic number.
pub const MAGIC: u32 = 0x5a4f_4653;

/// Programs the guest's zonefs lines run beside blkzone and fio: GNU dd
/// (direct I/O).
pub const TOOLS: &[(&str, &str)] = &[("dd", "coreutils")];

/// Where the superblock image sits in the guest.
pub const GUEST_IMAGE: &str = "/zonefs/super.img";

/// CRC32 as the kernel's `crc32(seed, ...)` computes it: reflected
/// polynomial 0xEDB88320, no final inversion.
pub fn crc32_le(seed: u32, data: &[u8]) -> u32 {
    let mut crc = seed;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    crc
}

/// A superblock with `label` (at most 32 bytes) and `uuid`, no features.
pub fn superblock(label: &str, uuid: [u8; 16]) -> Vec<u8> {
    let mut b = vec![0u8; SUPER_SIZE];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    let l = label.as_bytes();
    let n = l.len().min(32);
    b[8..8 + n].copy_from_slice(&l[..n]);
    b[40..56].copy_from_slice(&uuid);
    let crc = crc32_le(!0, &b);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The guest's lines on zoned block device `$dev` (a shell expression)
/// of `zones` zones of `capacity` bytes each: every zone reset, the
/// superblock written and zone 0 finished, zonefs mounted with one file
/// per other zone; fio filling `seq/0` to the zone's capacity with
/// asynchronous direct writes (libaio) and verifying it (crc32c), the file
/// size and the zone's state checked; half a zone written to `seq/1` and
/// its size found again after a remount (zonefs takes file sizes from the
/// zones' write pointers); `seq/0` truncated to 0 (a zone reset); umount.
///
/// Synchronous direct writes are left out: zonefs sends them as Zone
/// Append, and this kernel's zonefs refuses the result of the first one
/// ("Corrupted write pointer") on a zoned null_blk as on the target (see
/// docs/nvmf.md).
pub fn guest_lines(dev: &str, zones: u32, capacity: u64) -> String {
    let files = zones - 1;
    let half = capacity / 2;
    format!(
        r#"# zonefs, formatted by the task (Debian 12 has no mkzonefs).
ZS=$(cat /sys/block/$(basename {dev})/queue/chunk_sectors)
run zonefs-reset blkzone reset {dev}
run zonefs-super /usr/bin/dd if={GUEST_IMAGE} of={dev} bs=4096 count=1 oflag=direct
run zonefs-finish-0 blkzone finish -o 0 -c 1 {dev}
run zonefs-mount mount -t zonefs {dev} /mnt
run zonefs-files sh -c '[ "$(ls /mnt/seq | wc -l)" = {files} ]'
run zonefs-fio fio --name=zonefs --filename=/mnt/seq/0 --ioengine=libaio --iodepth=4 --direct=1 --rw=write --bs=64k --size={capacity} --file_append=1 --fallocate=none --allow_file_create=0 --verify=crc32c --do_verify=1 --minimal
run zonefs-size sh -c '[ "$(stat -c %s /mnt/seq/0)" = {capacity} ]'
expect zonefs-zone-full "zcond:14(fu)" blkzone report -o $ZS -c 1 {dev}
run zonefs-fio-half fio --name=zonefs-half --filename=/mnt/seq/1 --ioengine=libaio --iodepth=4 --direct=1 --rw=write --bs=64k --size={half} --file_append=1 --fallocate=none --allow_file_create=0 --minimal
run zonefs-umount umount /mnt
run zonefs-remount mount -t zonefs {dev} /mnt
run zonefs-size-after-remount sh -c '[ "$(stat -c %s /mnt/seq/1)" = {half} ] && [ "$(stat -c %s /mnt/seq/0)" = {capacity} ]'
run zonefs-truncate truncate -s 0 /mnt/seq/0
run zonefs-size-0 sh -c '[ "$(stat -c %s /mnt/seq/0)" = 0 ]'
expect zonefs-zone-reset "zcond: 1(em)" blkzone report -o $ZS -c 1 {dev}
run zonefs-umount-2 umount /mnt
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_the_kernels() {
        // The standard CRC-32 of "123456789" is 0xCBF43926; the kernel's
        // form has no final inversion.
        assert_eq!(!crc32_le(!0, b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn the_superblock_checks_out() {
        let b = superblock("znskit", [7; 16]);
        assert_eq!(b.len(), SUPER_SIZE);
        assert_eq!(&b[0..4], b"SFOZ");
        assert_eq!(&b[8..14], b"znskit");
        assert_eq!(&b[40..56], &[7; 16]);
        assert!(b[56..76].iter().all(|&x| x == 0) && b[76..].iter().all(|&x| x == 0));
        let stored = u32::from_le_bytes(b[4..8].try_into().unwrap());
        let mut zeroed = b.clone();
        zeroed[4..8].fill(0);
        assert_eq!(crc32_le(!0, &zeroed), stored);
    }

    #[test]
    fn the_guest_formats_then_mounts_and_writes_a_zone_file() {
        let s = guest_lines("$B", 144, 786432);
        let sup = s.find("of=$B bs=4096 count=1 oflag=direct").unwrap();
        let finish = s.find("blkzone finish -o 0 -c 1 $B").unwrap();
        let mount = s.find("mount -t zonefs $B /mnt").unwrap();
        assert!(sup < finish && finish < mount);
        assert!(s.contains("[ \"$(ls /mnt/seq | wc -l)\" = 143 ]"));
        assert!(s.contains("--filename=/mnt/seq/0 --ioengine=libaio"));
        assert!(s.contains("--size=786432 --file_append=1"));
        assert!(s.contains("= 393216 ]"));
    }
}
