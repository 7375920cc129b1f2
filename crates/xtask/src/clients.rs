//! `cargo xtask clients`: real clients on znskit's exports, inside a QEMU
//! guest (Debian's kernel and binaries, busybox initramfs).
//!
//! On the host the task starts two servers (the `zns` binary, release
//! build), both on loopback:
//! - `zns serve` with two namespaces, an emulated ZN540 cut to 16 zones
//!   (its timing model on the real clock) and `emu:small` (4 MiB zones),
//!   over NVMe/TCP. In the guest the kernel's `nvme-tcp` connects to it
//!   through QEMU's user-mode network (the host's loopback is 10.0.2.2
//!   there): `nvme discover`, `nvme connect`, nvme-cli's `list`,
//!   `id-ctrl`, `zns id-ctrl`, `zns id-ns`, `zns report-zones`,
//!   `zns reset-zone` and `zns zone-append`; `blkzone` report, open,
//!   close, finish, reset; fio's zoned workloads with psync, libaio and
//!   io_uring and crc32c verification (mq-deadline selected, as udev
//!   would); znskit's conformance suite through the guest's `ng:` and
//!   `zbd:` views of the target; btrfs in zoned mode (`mkfs.btrfs -O
//!   zoned`, fio with crc32c verification, `btrfs check`) on the
//!   small-zone namespace; ext4 (mkfs, fio with crc32c verification,
//!   fstrim, fsck) on the target's third namespace, the FTL on another
//!   emulated device served as a conventional NVMe namespace
//!   (`zns serve --ftl`); `nvme disconnect`.
//! - a second `zns serve` on a device image (`emu:file=`, `tiny`) with
//!   one block damaged on the host before it starts: in the guest a read
//!   of it fails, the kernel logs a critical medium error (the target
//!   completed it with Unrecovered Read Error) and the target's SMART log
//!   counts the media error.
//! - `zns ftl serve --device emu:small`: the FTL over NBD, attached by
//!   QEMU as the guest's virtio disk. In the guest: mkfs.ext4, mount, fio
//!   writing and verifying files with crc32c, a SQLite workload checked
//!   with `PRAGMA integrity_check`, umount, `fsck.ext4 -f -n`; then XFS
//!   (mkfs, fio with crc32c verification, `xfs_repair -n`).
//!
//! The task fails on any failed step, a missing result marker, or a
//! server that saw a protocol or transport error.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::guest::RESULT_MARKER;
use crate::server::{build_zns, Server};
use crate::vmtest::{self, Options as VmOptions};
use crate::{kernel, Error, Result};

const USAGE: &str = "usage: cargo xtask clients [OPTIONS]

Boots a QEMU guest whose kernel connects over NVMe/TCP to `zns serve` (an
emulated ZN540) and whose virtio disk is `zns ftl serve` (the FTL over NBD),
both running on the host, and runs nvme-cli, blkzone, fio, mkfs.ext4,
SQLite and fsck against them.

options:
  --timeout SECS     give the guest this long (default 900)
  --kernel PACKAGE   kernel package (default: newest linux-image-*-cloud-amd64-unsigned)
  --no-install       do not install missing packages; fail instead
  --kvm              use KVM (software emulation otherwise)
  --memory SIZE      guest memory (default 1G)
  --nvmet            also run the conformance suite through znskit's tcp: initiator
                     against the guest kernel's own target (nvmet-tcp on a zoned
                     null_blk); not yet passing, see docs/nvmf.md
  --nvmet-only CHECKS
                     the same, with only these conformance checks";

/// The subsystem NQN the guest connects to.
pub const NQN: &str = "nqn.2026-11.io.znskit:clients";

/// The subsystem of the device image with a damaged block.
pub const MEDIA_NQN: &str = "nqn.2026-11.io.znskit:media-error";

/// The subsystem the guest kernel's own target (nvmet) exports.
pub const NVMET_NQN: &str = "nqn.2026-11.io.znskit:nvmet";

/// The host NQN and ID the guest presents.
const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:8d3c1e52-5a43-4c39-9b7e-2f1c7a3b9e01";
const HOSTID: &str = "8d3c1e52-5a43-4c39-9b7e-2f1c7a3b9e01";

/// The NVMe/TCP target's namespaces: the ZN540's geometry and timing, cut
/// to 16 zones (32 GiB, sparse in RAM), and a small-zone device (4 MiB
/// zones) for the workloads that fill zones.
const NVMF_DEVICES: [&str; 2] = ["emu:zn540,zones=16", "emu:small"];

/// The device under the FTL that `zns serve --ftl` exports as the
/// target's third, conventional namespace.
const NVMF_FTL_DEVICE: &str = "emu:small";

/// The NBD export's device: a 1 GiB emulated ZNS SSD, data in RAM.
const NBD_DEVICE: &str = "emu:small";

/// Kernel modules the guest needs beyond the built-in ones.
/// mq-deadline keeps a zone's writes in order at queue depths above 1
/// (the script selects it: this kernel gives fabrics devices none).
const MODULES: &[&str] = &[
    "mq-deadline",
    "nvme-core",
    "nvme-tcp",
    "nvmet-tcp",
    "null_blk",
    "virtio_pci",
    "virtio_net",
    "virtio_blk",
    "ext4",
    "xfs",
    "btrfs",
];
/// Modules loaded when the kernel has them (ext4's metadata checksums).
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries.
const GUEST_TOOLS: &[(&str, &str)] = &[
    ("nvme", "nvme-cli"),
    ("fio", "fio"),
    ("blkzone", "util-linux"),
    ("mke2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
    ("sqlite3", "sqlite3"),
    ("mkfs.xfs", "xfsprogs"),
    ("xfs_repair", "xfsprogs"),
    ("mkfs.btrfs", "btrfs-progs"),
    ("btrfs", "btrfs-progs"),
];

/// Options of the task.
#[derive(Debug, Clone, Default)]
pub struct Options {
    vm: VmOptions,
    /// Run the kernel-target step, with these conformance checks ("" = all).
    nvmet: Option<String>,
}

/// Parses the arguments after `clients`; `None` after printing help.
pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Options>> {
    let mut o = VmOptions::default();
    let mut nvmet = None;
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
            "--memory" => o.memory = value("--memory")?,
            "--nvmet" => nvmet = Some(String::new()),
            "--nvmet-only" => nvmet = Some(value("--nvmet-only")?),
            other => return Err(Error::new(format!("unknown option {other:?}\n{USAGE}"))),
        }
    }
    Ok(Some(Options { vm: o, nvmet }))
}

/// The guest programs `tools` (program, Debian package) with their
/// libraries, and `/etc/mke2fs.conf`; missing packages are installed
/// when `install`.
pub(crate) fn guest_files(tools: &[(&str, &str)], install: bool) -> Result<Vec<PathBuf>> {
    let missing: Vec<String> = tools
        .iter()
        .filter(|(p, _)| vmtest::which(p).is_none())
        .map(|(_, pkg)| pkg.to_string())
        .collect();
    if !missing.is_empty() {
        if !install {
            return Err(Error::new(format!("missing packages: {}", missing.join(" "))));
        }
        vmtest::apt_install(&missing, None)?;
    }
    let mut files = Vec::new();
    for (p, _) in tools {
        let path = vmtest::which(p).ok_or_else(|| Error::new(format!("{p} is not installed")))?;
        files.extend(
            vmtest::with_libraries(&path)
                .ok_or_else(|| Error::new(format!("cannot list the libraries of {p} (ldd)")))?,
        );
    }
    let conf = PathBuf::from("/etc/mke2fs.conf");
    if conf.is_file() {
        files.push(conf);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Runs the whole task.
pub fn run(opts: &Options) -> Result<()> {
    let o = &opts.vm;
    let nvmet = opts.nvmet.clone();
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("clients");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, true, &cache)?;
    let files = guest_files(GUEST_TOOLS, o.install)?;
    let kernel = kernel::prepare(&cache.join("kernel"), o.kernel.as_deref(), o.install)?;
    let modules = kernel::modules_for(&kernel, MODULES, OPTIONAL_MODULES)?;
    let zns = build_zns(&root, &target)?;

    let nvmf = Server::start(
        "zns serve",
        &zns,
        &[
            "--device",
            NVMF_DEVICES[0],
            "--device",
            NVMF_DEVICES[1],
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nqn",
            NQN,
            "--ftl",
            NVMF_FTL_DEVICE,
        ],
    )?;
    let image = damaged_image(&zns, &dir)?;
    let image_uri = format!("emu:file={}", image.display());
    let media = Server::start(
        "zns serve (media error)",
        &zns,
        &["--device", &image_uri, "serve", "--listen", "127.0.0.1:0", "--nqn", MEDIA_NQN],
    )?;
    let nbd = Server::start(
        "zns ftl serve",
        &zns,
        &["--device", NBD_DEVICE, "ftl", "serve", "--listen", "127.0.0.1:0", "--export", "ftl"],
    )?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let script = init_script(&names, nvmf.port, media.port, &mke2fs, nvmet.as_deref());
    let programs = vmtest::build_guest_binaries(
        &root,
        &target,
        o.install,
        o.glibc,
        &["zns-conformance", "zns"],
    )?;
    let initramfs = vmtest::pack_initramfs(&dir, &programs, &modules, &script, &files)?;
    let devices = qemu_args(nbd.port);
    let log = dir.join("guest.log");
    let outcome = vmtest::boot(&kernel, &initramfs, &devices, o, &log);
    let nvmf_end = nvmf.stop();
    let media_end = media.stop();
    let nbd_end = nbd.stop();
    let outcome = outcome?;
    let mut failures = outcome.failures.clone();
    match &nvmf_end {
        Ok(s) if s.contains(" 0 ended by transport errors") => {}
        Ok(s) => failures.push(format!("zns serve saw transport errors: {}", s.trim())),
        Err(e) => failures.push(e.to_string()),
    }
    match &media_end {
        Ok(s) if s.contains(" 0 ended by transport errors") => {}
        Ok(s) => {
            failures.push(format!("zns serve (media error) saw transport errors: {}", s.trim()))
        }
        Err(e) => failures.push(e.to_string()),
    }
    match &nbd_end {
        Ok(s) if s.contains(" 0 closed for protocol errors") && s.contains("(0 failed)") => {}
        Ok(s) => failures.push(format!("zns ftl serve saw errors: {}", s.trim())),
        Err(e) => failures.push(e.to_string()),
    }
    println!();
    for s in &outcome.summaries {
        println!("clients: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &failures {
        println!("clients: {}", f.trim_start_matches("vmtest: "));
    }
    let pass = outcome.result == Some(true) && failures.is_empty();
    println!(
        "clients: {} in {:.1} s (log {})",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        log.display()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("the real clients failed"))
    }
}

/// A `tiny` device image whose zone 0 holds four written blocks (block
/// `i` all bytes `A0h + i`), block 2 then damaged by one flipped bit, as
/// the medium under a drive's block can be: a read of it fails with
/// Unrecovered Read Error.
fn damaged_image(zns: &Path, dir: &Path) -> Result<PathBuf> {
    let image = dir.join("media-error.img");
    let _ = fs::remove_file(&image);
    let arg = image.display().to_string();
    crate::run_checked(
        std::process::Command::new(zns).args(["emu", "create", &arg, "--profile", "tiny"]),
        "zns emu create",
    )?;
    let blocks: Vec<u8> = (0..4u8).flat_map(|i| [0xA0 + i; 4096]).collect();
    let input = dir.join("media-error.bin");
    fs::write(&input, blocks).map_err(|e| Error::io(&input, e))?;
    let device = format!("emu:file={arg}");
    let input_arg = input.display().to_string();
    crate::run_checked(
        std::process::Command::new(zns)
            .args(["--device", &device, "write", "--lba", "0", "--input", &input_arg]),
        "zns write",
    )?;
    let mut bytes = fs::read(&image).map_err(|e| Error::io(&image, e))?;
    let at = bytes
        .chunks_exact(4096)
        .position(|b| b.iter().all(|&x| x == 0xA2))
        .ok_or_else(|| Error::new("the written block is not in the image"))?;
    bytes[at * 4096 + 100] ^= 0x04;
    fs::write(&image, bytes).map_err(|e| Error::io(&image, e))?;
    Ok(image)
}

/// QEMU arguments: user-mode networking (the host's loopback is 10.0.2.2
/// in the guest) and the NBD export as a virtio disk.
fn qemu_args(nbd_port: u16) -> Vec<String> {
    vec![
        "-netdev".into(),
        "user,id=net0".into(),
        "-device".into(),
        "virtio-net-pci,netdev=net0".into(),
        "-blockdev".into(),
        format!(
            "driver=nbd,node-name=ftl,server.type=inet,server.host=127.0.0.1,\
             server.port={nbd_port},export=ftl"
        ),
        "-device".into(),
        "virtio-blk-pci,drive=ftl".into(),
    ]
}

/// The guest kernel's own NVMe/TCP target (nvmet-tcp, configured through
/// configfs) exporting a zoned null_blk device, and znskit's `tcp:`
/// initiator running the conformance suite against it (`--nvmet`).
fn nvmet_lines(only: &str) -> String {
    let only = if only.is_empty() { String::new() } else { format!("--only {only} ") };
    format!(
        r#"# The other direction: the guest kernel's own target (nvmet-tcp) exports a
# zoned null_blk device; znskit's tcp: initiator runs the conformance suite.
mount -t configfs none /sys/kernel/config 2>/dev/null
N=/sys/kernel/config/nullb/znskit
mkdir $N
for kv in blocksize=4096 size=64 memory_backed=1 zoned=1 zone_size=4 zone_nr_conv=0 zone_max_open=8 zone_max_active=10 power=1; do
    echo ${{kv#*=}} > $N/${{kv%%=*}} || {{ fail=1; say "null_blk: cannot set $kv"; }}
done
# Newer kernels name the disk after its configfs directory, older ones nullbN.
NB=$(for b in /sys/block/znskit /sys/block/nullb*; do [ "$(cat $b/queue/zoned 2>/dev/null)" = host-managed ] && basename $b; done | head -1)
say "zoned null_blk: $NB"
T=/sys/kernel/config/nvmet
SUB=$T/subsystems/{NVMET_NQN}
mkdir $SUB $SUB/namespaces/1 $T/ports/1
echo 1 > $SUB/attr_allow_any_host
echo /dev/$NB > $SUB/namespaces/1/device_path
echo 1 > $SUB/namespaces/1/enable || {{ fail=1; say "nvmet: cannot enable the namespace"; }}
echo tcp > $T/ports/1/addr_trtype
echo ipv4 > $T/ports/1/addr_adrfam
echo 127.0.0.1 > $T/ports/1/addr_traddr
echo 4420 > $T/ports/1/addr_trsvcid
ln -s $SUB $T/ports/1/subsystems/{NVMET_NQN}
U="tcp:127.0.0.1:4420/{NVMET_NQN}"
head -c 12288 /dev/urandom > /tmp/small
head -c 1048576 /dev/urandom > /tmp/big
run nvmet-write-small /bin/zns --device "$U" write --lba 0 --input /tmp/small
run nvmet-write-big /bin/zns --device "$U" write --lba 3 --input /tmp/big
run nvmet-write-after /bin/zns --device "$U" write --lba 259 --input /tmp/small
run nvmet-reset /bin/zns --device "$U" zone reset --all
run conformance-nvmet /bin/zns-conformance {only}"tcp:127.0.0.1:4420/{NVMET_NQN}"
"#
    )
}

/// The guest's `/init`. `mke2fs` is Debian's program's path: busybox's
/// shell runs its own applet of that name before any in `$PATH`.
/// `nvmet`: also the kernel-target run of [`nvmet_lines`] (with the
/// conformance checks it names, or all).
pub fn init_script(
    modules: &[String],
    nvmf_port: u16,
    media_port: u16,
    mke2fs: &Path,
    nvmet: Option<&str>,
) -> String {
    let mke2fs = mke2fs.display();
    let mut s = crate::guest::shell_start(
        "real clients on znskit's NVMe/TCP target and NBD export, a result marker, power off.",
    );
    s.push_str("mkdir -p /mnt /etc/nvme /run\n");
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(&format!(
        r#"i=0
while [ $i -lt 100 ] && {{ [ ! -e /sys/class/net/eth0 ] || [ ! -e /sys/block/vda ]; }}; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
echo {HOSTNQN} > /etc/nvme/hostnqn
echo {HOSTID} > /etc/nvme/hostid
# NVMe/TCP: the kernel's host on znskit's target.
T="-t tcp -a 10.0.2.2 -s {nvmf_port}"
expect nvme-discover "{NQN}" nvme discover $T
run nvme-connect nvme connect $T -n {NQN} --hostnqn {HOSTNQN} --hostid {HOSTID}
i=0
while [ $i -lt 100 ] && {{ [ ! -e /sys/block/nvme0n1/queue/zoned ] || [ ! -e /sys/block/nvme0n2/queue/zoned ] || [ ! -e /sys/block/nvme0n3/queue/zoned ]; }}; do sleep 0.1; i=$((i + 1)); done
# The 0nX suffix of namespace ID $1 (the kernel numbers in discovery order).
suffix_of() {{
    for d in /sys/block/nvme0n*; do
        if [ "$(cat $d/nsid 2>/dev/null)" = "$1" ]; then basename $d | sed 's/^nvme//'; return; fi
    done
    echo "0n$1"
}}
Z=/dev/nvme$(suffix_of 1)
S=/dev/nvme$(suffix_of 2)
G=/dev/ng$(suffix_of 2)
F=/dev/nvme$(suffix_of 3)
for b in $Z $S; do
    q=/sys/block/$(basename $b)/queue
    say "$b: zoned=$(cat $q/zoned) zones=$(cat $q/nr_zones) zone_sectors=$(cat $q/chunk_sectors) max_open=$(cat $q/max_open_zones) append_max=$(cat $q/zone_append_max_bytes)"
done
expect zoned host-managed cat /sys/block/$(basename $Z)/queue/zoned
# What udev does on a full system: zoned writes above queue depth 1 need
# mq-deadline's per-zone write lock.
for b in $Z $S; do echo mq-deadline > /sys/block/$(basename $b)/queue/scheduler; done
expect scheduler "[mq-deadline]" cat /sys/block/$(basename $S)/queue/scheduler
expect nvme-list "znskit" nvme list
expect nvme-id-ctrl "{NQN}" nvme id-ctrl /dev/nvme0
expect nvme-zns-id-ctrl "zasl" nvme zns id-ctrl /dev/nvme0
expect nvme-zns-id-ns "mor" nvme zns id-ns $Z
expect nvme-zns-report "nr_zones: 16" nvme zns report-zones $Z -d 2
expect blkzone "start: 0x000000000" blkzone report -c 2 $Z
run fio-zoned-psync fio --name=zoned --filename=$Z --direct=1 --ioengine=psync --zonemode=zbd --rw=write --bs=128k --size=2z --io_size=48m --max_open_zones=2 --verify=crc32c --do_verify=1 --minimal
run nvme-zone-reset nvme zns reset-zone $Z -s 0
expect nvme-wp-reset "WP: 0 " nvme zns report-zones $Z -d 1
# The small-zone namespace: zone actions through blkzone, fio's
# asynchronous engines filling and verifying zones, nvme-cli's append.
run blkzone-open blkzone open -o 0 -c 1 $S
expect blkzone-opened "(oe)" blkzone report -c 1 $S
run blkzone-close blkzone close -o 0 -c 1 $S
run blkzone-finish blkzone finish -o 0 -c 1 $S
expect blkzone-full "(fu)" blkzone report -c 1 $S
run blkzone-reset blkzone reset $S
run fio-zoned-libaio fio --name=libaio --filename=$S --direct=1 --ioengine=libaio --iodepth=8 --zonemode=zbd --rw=randwrite --bs=16k --size=8z --io_size=24m --max_open_zones=4 --verify=crc32c --do_verify=1 --minimal
run blkzone-reset-2 blkzone reset $S
run fio-zoned-io_uring fio --name=io_uring --filename=$S --direct=1 --ioengine=io_uring --iodepth=16 --zonemode=zbd --rw=write --bs=64k --size=6z --verify=crc32c --do_verify=1 --minimal
run blkzone-reset-3 blkzone reset $S
head -c 8192 /dev/urandom > /tmp/blob
expect nvme-zone-append "Success" nvme zns zone-append $S -s 0 -z 8192 -d /tmp/blob
expect nvme-append-wp "WP: 0x2 " nvme zns report-zones $S -d 1
run blkzone-reset-4 blkzone reset $S
# btrfs in zoned mode on the small-zone namespace (Zone Append for data).
run mkfs-btrfs mkfs.btrfs -f -q -O zoned -d single -m single $S
run mount-btrfs mount -t btrfs $S /mnt
run fio-btrfs fio --name=btrfs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=48m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
expect btrfs-zoned "zoned mode enabled" dmesg
run umount-btrfs umount /mnt
run btrfs-check btrfs check --readonly $S
run blkzone-reset-5 blkzone reset $S
# znskit's own kernel-path backends on the kernel's view of the target.
run conformance-ng /bin/zns-conformance "ng:$G"
run conformance-zbd /bin/zns-conformance "zbd:$S"
# The FTL as the target's conventional namespace: an ordinary disk.
expect ftl-ns-not-zoned none cat /sys/block/$(basename $F)/queue/zoned
run mkfs-ext4-nvmf {mke2fs} -t ext4 -F -q $F
run mount-nvmf mount -t ext4 $F /mnt
run fio-ext4-nvmf fio --name=nvmf --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=32m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
run fstrim-nvmf fstrim -v /mnt
run umount-nvmf umount /mnt
run fsck-ext4-nvmf e2fsck -f -n $F
run nvme-disconnect nvme disconnect -n {NQN}
# A device image with a damaged block on a second target: the read fails
# with Unrecovered Read Error, which the kernel logs as a medium error.
T2="-t tcp -a 10.0.2.2 -s {media_port}"
run nvme-connect-media nvme connect $T2 -n {MEDIA_NQN} --hostnqn {HOSTNQN} --hostid {HOSTID}
i=0
while [ $i -lt 100 ] && ! ls /sys/block | grep -Eq '^nvme[0-9]+n1$'; do sleep 0.1; i=$((i + 1)); done
M=/dev/$(ls /sys/block | grep -E '^nvme[0-9]+n1$' | head -n 1)
C=/dev/$(ls /sys/class/nvme | head -n 1)
say "media-error namespace $M on $C"
if dd if=$M of=/dev/null bs=4096 count=4 iflag=direct 2>/tmp/dd.err; then
    fail=1; say "FAILED media-read: the damaged block read back"
else
    say "END media-read: failed as it must: $(head -n 1 /tmp/dd.err)"
fi
run media-read-intact dd if=$M of=/dev/null bs=4096 skip=3 count=1 iflag=direct
expect media-error-logged "critical medium error" dmesg
run media-smart sh -c "nvme smart-log $C | tr -d ' \t' | grep -Eq '^media_errors:[1-9]'"
run nvme-disconnect-media nvme disconnect -n {MEDIA_NQN}
# NBD: the FTL as the guest's virtio disk.
D=/dev/vda
say "vda: $(cat /sys/block/vda/size 2>/dev/null) sectors"
run mkfs-ext4 {mke2fs} -t ext4 -F -q $D
run mount mount -t ext4 $D /mnt
run fio-ext4 fio --name=ext4 --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=96m --numjobs=2 --fsync=16 --verify=crc32c --do_verify=1 --minimal
expect sqlite "ok" sqlite3 /mnt/test.db "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000) INSERT INTO t SELECT x, hex(randomblob(64)) FROM c; DELETE FROM t WHERE k % 3 = 0; VACUUM; PRAGMA integrity_check;"
expect sqlite-count "13334" sqlite3 /mnt/test.db "SELECT count(*) FROM t;"
run umount umount /mnt
run fsck-ext4 e2fsck -f -n $D
# XFS on the same disk.
run mkfs-xfs mkfs.xfs -f -q $D
run mount-xfs mount -t xfs $D /mnt
run fio-xfs fio --name=xfs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=48m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
run umount-xfs umount /mnt
run xfs-repair xfs_repair -n $D
sync
"#
    ));
    if let Some(only) = nvmet {
        s.push_str(&nvmet_lines(only));
    }
    s.push_str(&format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{RESULT_MARKER} PASS"; else echo "{RESULT_MARKER} FAIL"; fi
poweroff -f
"#
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_connects_then_uses_the_disk_and_ends_with_a_marker() {
        let s =
            init_script(&["nvme-tcp.ko".into()], 4420, 4421, Path::new("/usr/sbin/mke2fs"), None);
        assert!(!s.contains("nvmet"));
        let n = init_script(&[], 4420, 4421, Path::new("/usr/sbin/mke2fs"), Some("copy"));
        assert!(n.contains("zns-conformance --only copy \"tcp:127.0.0.1:4420/"));
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("insmod /lib/modules/nvme-tcp.ko"));
        assert!(s.contains("T=\"-t tcp -a 10.0.2.2 -s 4420\""));
        let connect = s.find("nvme connect $T").unwrap();
        assert!(connect < s.find("fio-zoned").unwrap());
        // ext4 on the target's FTL namespace while connected, then on the
        // NBD disk after the disconnect.
        let disconnect = s.find("nvme disconnect").unwrap();
        assert!(s.find("/usr/sbin/mke2fs -t ext4 -F -q $F").unwrap() < disconnect);
        assert!(disconnect < s.find("/usr/sbin/mke2fs -t ext4 -F -q $D").unwrap());
        assert!(s.contains("e2fsck -f -n $D"));
        // The media-error target after the first one is gone.
        let media = s.find("nvme connect $T2 -n nqn.2026-11.io.znskit:media-error").unwrap();
        assert!(disconnect < media && s.contains("T2=\"-t tcp -a 10.0.2.2 -s 4421\""));
        assert!(s.find("critical medium error").unwrap() > media);
        assert!(s.contains("VMTEST-RESULT: PASS") && s.trim_end().ends_with("poweroff -f"));
        let q = qemu_args(10809);
        assert!(q.iter().any(|a| a.contains("server.port=10809,export=ftl")));
    }
}
