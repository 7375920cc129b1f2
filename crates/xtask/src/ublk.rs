//! `cargo xtask ublk`: znskit devices as the guest kernel's own block
//! devices through ublk (`ublk_drv`), in a QEMU guest on Debian's cloud
//! kernel (the build host's kernel may have no ublk).
//!
//! In the guest, `zns --device emu:small ublk` serves an emulated ZNS SSD
//! in the background: the kernel sees a host-managed zoned block device
//! (`queue/zoned`, 256 zones), `blkzone report` lists its zones, `dd`
//! writes 64 KiB at zone 0's start with direct I/O and reads it back,
//! `blkzone` opens, finishes and resets zones; SIGTERM removes the device
//! (its sysfs entry goes, the server reports no failed request). Then
//! `zns --device emu:small ftl ublk` serves the FTL (formatted at start,
//! the device lives only in the process) as a plain disk: mkfs.ext4,
//! mount, a file written, umount, `e2fsck -f -n`, the file read back;
//! SIGTERM removes it and closes the FTL with a checkpoint.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::guest::RESULT_MARKER;
use crate::kernel::Flavour;
use crate::vmtest::{self, Options as VmOptions};
use crate::{clients, kernel, Error, Result};

const USAGE: &str = "usage: cargo xtask ublk [OPTIONS]

Boots a QEMU guest on Debian's cloud kernel with ublk_drv loaded and serves
znskit devices as the guest's block devices through ublk: `zns --device
emu:small ublk` as a host-managed zoned device (blkzone report, open, finish,
reset; dd with direct I/O written at zone 0 and read back), then `zns --device
emu:small ftl ublk`, the FTL as a plain disk (mkfs.ext4, mount, a file written
and read back, e2fsck).

options:
  --timeout SECS     give the guest this long (default 600)
  --kernel PACKAGE   kernel package (default: newest linux-image-*-cloud-amd64-unsigned)
  --no-install       do not install missing packages; fail instead
  --kvm              use KVM (software emulation otherwise)";

/// Kernel modules the guest loads: the ublk driver and ext4.
const MODULES: &[&str] = &["ublk_drv", "ext4"];

/// Loaded when the kernel has them (ext4's metadata checksums).
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries (busybox
/// has no blkzone, and its dd and mke2fs lack what the run needs).
const GUEST_TOOLS: &[(&str, &str)] = &[
    ("blkzone", "util-linux"),
    ("mke2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
    ("dd", "coreutils"),
];

/// Options of the task.
#[derive(Debug, Clone)]
pub struct Options {
    vm: VmOptions,
}

/// Parses the arguments after `ublk`; `None` after printing help.
pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Options>> {
    let mut o = VmOptions::default();
    o.timeout = Duration::from_secs(600);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().ok_or_else(|| Error::new(format!("{name} needs a value\n{USAGE}")))
        };
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--timeout" => {
                let v = value("--timeout")?;
                let s: u64 =
                    v.parse().map_err(|_| Error::new(format!("--timeout {v:?}: not a number")))?;
                o.timeout = Duration::from_secs(s.max(1));
            }
            "--kernel" => o.kernel = Some(value("--kernel")?),
            "--no-install" => o.install = false,
            "--kvm" => o.kvm = true,
            other => return Err(Error::new(format!("unknown option {other:?}\n{USAGE}"))),
        }
    }
    Ok(Some(Options { vm: o }))
}

/// Runs the whole task.
pub fn run(opts: &Options) -> Result<()> {
    let o = &opts.vm;
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("ublk");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let files = clients::guest_files(GUEST_TOOLS, o.install)?;
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Cloud, o.kernel.as_deref(), o.install)?;
    let modules = kernel::modules_for(&kernel, MODULES, OPTIONAL_MODULES)?;
    // zns-cli's ublk feature: its bindings need libclang on the host.
    let programs = vmtest::build_guest_binaries_with(
        &root,
        &target,
        o.install,
        o.glibc,
        &["zns"],
        &["zns-cli/ublk"],
    )?;
    let path_of =
        |p: &str| vmtest::which(p).ok_or_else(|| Error::new(format!("{p} is not installed")));
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let script = init_script(&names, &path_of("mke2fs")?, &path_of("dd")?);
    let initramfs = vmtest::pack_initramfs(&dir, &programs, &modules, &script, &files)?;
    let prepared = start.elapsed();
    let log = dir.join("guest.log");
    let guest_start = Instant::now();
    let outcome = vmtest::boot(&kernel, &initramfs, &[], o, &log)?;
    let guest_time = guest_start.elapsed();
    println!();
    for s in &outcome.summaries {
        println!("ublk: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &outcome.failures {
        println!("ublk: {}", f.trim_start_matches("vmtest: "));
    }
    let pass = outcome.result == Some(true) && outcome.failures.is_empty();
    println!(
        "ublk: {} in {:.1} s (preparation {:.1} s, guest {:.1} s; log {})",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        prepared.as_secs_f64(),
        guest_time.as_secs_f64(),
        log.display()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("znskit's devices as the guest kernel's ublk block devices failed"))
    }
}

/// The guest's `/init`: modules, [`zoned_lines`], [`ftl_lines`], the
/// result marker. `mke2fs` and `dd` are Debian's programs' paths:
/// busybox's shell runs its own applets of those names before any in
/// `$PATH`.
fn init_script(modules: &[String], mke2fs: &Path, dd: &Path) -> String {
    let mut s = crate::guest::shell_start(
        "znskit's devices as the kernel's block devices through ublk, a result marker, \
         power off.",
    );
    s.push_str("mkdir -p /mnt /run\n");
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(SERVER_HELPERS);
    s.push_str(&zoned_lines(&dd.display().to_string()));
    s.push_str(&ftl_lines(&mke2fs.display().to_string()));
    s.push_str(&format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{RESULT_MARKER} PASS"; else echo "{RESULT_MARKER} FAIL"; fi
poweroff -f
"#
    ));
    s
}

/// Shell helpers: `start_server LABEL OUT CMD...` runs a `zns ... ublk`
/// in the background (`$SP` its pid) and waits for the block device its
/// first line names (`$D` the path, `$B` its name); `stop_server LABEL
/// OUT` sends it SIGTERM, waits for it to end, and checks that the
/// device is gone and that no request failed.
const SERVER_HELPERS: &str = r#"start_server() {
    label=$1; out=$2; shift 2
    say "RUN $label: $*"
    "$@" > $out 2> $out.err &
    SP=$!
    D=""; i=0
    while [ $i -lt 300 ]; do
        D=$(head -n 1 $out 2>/dev/null)
        case "$D" in /dev/ublkb*) [ -b "$D" ] && break ;; esac
        kill -0 $SP 2>/dev/null || break
        D=""; sleep 0.1; i=$((i + 1))
    done
    if [ -z "$D" ]; then
        fail=1; echo "FAIL $label: no ublk block device"; cat $out $out.err
        return 1
    fi
    B=$(basename $D)
    cat $out
    say "END $label: $D"
}
stop_server() {
    # Not $label: the run and expect helpers set that one.
    server=$1; out=$2
    kill -TERM $SP
    i=0
    while kill -0 $SP 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $SP 2>/dev/null; then
        fail=1; echo "FAIL $server: the server did not end on SIGTERM"; kill -KILL $SP
    fi
    wait $SP
    rc=$?
    cat $out; cat $out.err
    if [ $rc -ne 0 ]; then fail=1; echo "FAIL $server: the server exited with $rc"; fi
    if [ -e /sys/block/$B ] || [ -e /dev/$B ]; then fail=1; echo "FAIL $server: $B is still there"; fi
    expect $server-clean "(0 failed)" cat $out
    say "END $server: $B removed"
}
"#;

/// The zoned device: the kernel's view, blkzone, dd with direct I/O.
fn zoned_lines(dd: &str) -> String {
    format!(
        r#"# emu:small as a host-managed zoned block device.
if start_server ublk-zoned /tmp/zoned.out /bin/zns --device emu:small ublk --queues 2 --depth 32; then
    q=/sys/block/$B/queue
    say "$B: zoned=$(cat $q/zoned) zones=$(cat $q/nr_zones) zone_sectors=$(cat $q/chunk_sectors) max_open=$(cat $q/max_open_zones) max_active=$(cat $q/max_active_zones) append_max=$(cat $q/zone_append_max_bytes) logical_block=$(cat $q/logical_block_size)"
    expect zoned host-managed cat $q/zoned
    expect nr-zones 256 cat $q/nr_zones
    expect zone-sectors 8192 cat $q/chunk_sectors
    expect blkzone-report "start: 0x000002000, len 0x002000" blkzone report -c 3 $D
    expect blkzone-capacity "cap 0x001e00" blkzone report -c 1 $D
    head -c 65536 /dev/urandom > /tmp/pattern
    run dd-write {dd} if=/tmp/pattern of=$D bs=64k count=1 oflag=direct
    run dd-read {dd} if=$D of=/tmp/back bs=64k count=1 iflag=direct
    run dd-compare cmp /tmp/pattern /tmp/back
    expect blkzone-written "wptr 0x000080" blkzone report -c 1 $D
    expect blkzone-implicit "(oi)" blkzone report -c 1 $D
    run blkzone-open blkzone open -o 0x2000 -c 1 $D
    expect blkzone-opened "(oe)" blkzone report -o 0x2000 -c 1 $D
    run blkzone-finish blkzone finish -o 0x2000 -c 1 $D
    expect blkzone-full "(fu)" blkzone report -o 0x2000 -c 1 $D
    run blkzone-reset blkzone reset -o 0 -c 1 $D
    expect blkzone-reset-wp "wptr 0x000000" blkzone report -c 1 $D
    run blkzone-reset-all blkzone reset $D
    expect blkzone-all-empty "(em)" blkzone report -o 0x2000 -c 1 $D
    stop_server ublk-zoned-stop /tmp/zoned.out
fi
"#
    )
}

/// The FTL as a plain disk: ext4 on it.
fn ftl_lines(mke2fs: &str) -> String {
    format!(
        r#"# The FTL on emu:small as a plain disk: ext4.
if start_server ublk-ftl /tmp/ftl.out /bin/zns --device emu:small ftl ublk; then
    expect ftl-not-zoned none cat /sys/block/$B/queue/zoned
    say "$B: $(cat /sys/block/$B/size) sectors"
    run mkfs-ext4 {mke2fs} -t ext4 -F -q $D
    run mount-ext4 mount -t ext4 $D /mnt
    head -c 4194304 /dev/urandom > /tmp/file
    run write-file cp /tmp/file /mnt/file
    run umount-ext4 umount /mnt
    run fsck-ext4 e2fsck -f -n $D
    run mount-ro mount -t ext4 -o ro $D /mnt
    run read-file cmp /tmp/file /mnt/file
    run umount-ro umount /mnt
    stop_server ublk-ftl-stop /tmp/ftl.out
    expect ftl-checkpoint "checkpoint written" cat /tmp/ftl.out
fi
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_serves_the_zoned_device_then_the_ftl_and_ends_with_a_marker() {
        let s = init_script(
            &["ublk_drv.ko".into(), "ext4.ko".into()],
            Path::new("/usr/sbin/mke2fs"),
            Path::new("/usr/bin/dd"),
        );
        assert!(s.starts_with("#!/bin/sh\n"));
        let ublk = s.find("insmod /lib/modules/ublk_drv.ko").unwrap();
        let zoned = s.find("/bin/zns --device emu:small ublk").unwrap();
        let dd = s
            .find("run dd-write /usr/bin/dd if=/tmp/pattern of=$D bs=64k count=1 oflag=direct")
            .unwrap();
        let stop = s.find("stop_server ublk-zoned-stop").unwrap();
        let ftl = s.find("/bin/zns --device emu:small ftl ublk").unwrap();
        let mkfs = s.find("run mkfs-ext4 /usr/sbin/mke2fs -t ext4").unwrap();
        let fsck = s.find("run fsck-ext4 e2fsck -f -n $D").unwrap();
        assert!(ublk < zoned && zoned < dd && dd < stop && stop < ftl && ftl < mkfs && mkfs < fsck);
        assert!(s.contains("expect zoned host-managed cat $q/zoned"));
        assert!(s.contains("VMTEST-RESULT: PASS") && s.trim_end().ends_with("poweroff -f"));
        let p = |a: &[&str]| parse(a.iter().map(|s| s.to_string()));
        let o = p(&["--timeout", "60", "--kvm"]).unwrap().unwrap();
        assert_eq!((o.vm.timeout, o.vm.kvm), (Duration::from_secs(60), true));
        assert!(p(&["--help"]).unwrap().is_none());
        assert!(p(&["--frobnicate"]).is_err());
    }
}
