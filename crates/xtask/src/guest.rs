//! What runs inside the guest: the `/init` script of the initramfs and
//! the QEMU device configuration it tests against.

/// A zoned or conventional namespace of the guest's NVMe controller.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// Namespace ID.
    pub nsid: u32,
    /// Backing file name in the image directory.
    pub image: &'static str,
    /// Size of the backing file in MiB.
    pub mib: u64,
    /// QEMU `nvme-ns` properties beyond drive, nsid and block sizes.
    pub props: &'static str,
}

/// The controller's namespaces: a zoned namespace with a power-of-two zone
/// size (the kernel makes it a zoned block device and a generic device), a
/// zoned namespace whose zone size is not a power of two (the kernel only
/// makes a generic device: its block device is hidden), with descriptor
/// extensions, open/active limits that differ and zone random write areas
/// (64-block windows committed in 8-block units, 4 of them), and a
/// conventional one.
pub const NAMESPACES: &[Namespace] = &[
    Namespace {
        nsid: 1,
        image: "zns-pow2.img",
        mib: 16 * 64,
        props: "zoned=true,zoned.zone_size=64M,zoned.zone_capacity=60M,\
                zoned.max_open=14,zoned.max_active=14",
    },
    Namespace {
        nsid: 2,
        image: "zns-npow2.img",
        mib: 10 * 48,
        props: "zoned=true,zoned.zone_size=48M,zoned.zone_capacity=44M,\
                zoned.max_open=6,zoned.max_active=8,zoned.descr_ext_size=64,\
                zoned.zrwas=256K,zoned.zrwafg=32K,zoned.numzrwa=4",
    },
    Namespace { nsid: 3, image: "conventional.img", mib: 64, props: "" },
];

/// The second controller of the VFIO guest: one small zoned namespace.
pub const SECOND_NAMESPACES: &[Namespace] = &[Namespace {
    nsid: 1,
    image: "second-zns.img",
    mib: 8 * 16,
    props: "zoned=true,zoned.zone_size=16M,zoned.zone_capacity=12M,\
            zoned.max_open=4,zoned.max_active=6",
}];

/// The FDP controller's namespace: a conventional namespace (QEMU puts no
/// zoned namespace in an FDP subsystem) in endurance group 1, using all
/// [`FDP_HANDLES`] reclaim unit handles (placement handles 0-7).
pub const FDP_NAMESPACES: &[Namespace] =
    &[Namespace { nsid: 1, image: "fdp.img", mib: 64, props: "fdp.ruhs=0-7" }];

/// Reclaim unit handles of the FDP subsystem.
pub const FDP_HANDLES: u16 = 8;

/// Serial number of the FDP controller (the guest finds it by this).
pub const FDP_SERIAL: &str = "znsfdp0";

/// QEMU arguments of the FDP controller beside the ZNS one: a subsystem
/// with Flexible Data Placement (one reclaim group, [`FDP_HANDLES`]
/// handles, reclaim units of 1 MiB, so that a few hundred commands cross
/// many of them) and [`FDP_NAMESPACES`] on a controller of its own (QEMU
/// refuses zoned namespaces in an FDP subsystem).
pub fn qemu_fdp_args(image_dir: &std::path::Path) -> Vec<String> {
    let mut a = vec![
        "-device".to_string(),
        format!(
            "nvme-subsys,id=fdpsubsys,nqn=znskit-fdp,fdp=on,fdp.runs=1M,fdp.nrg=1,\
             fdp.nruh={FDP_HANDLES}"
        ),
    ];
    a.extend(controller_args(
        image_dir,
        "nvmefdp",
        &format!("nvme,serial={FDP_SERIAL},id=nvmefdp,subsys=fdpsubsys"),
        FDP_NAMESPACES,
    ));
    a
}

/// True when `help` (the output of `qemu-system-x86_64 -device
/// nvme-subsys,help`) lists the subsystem's FDP properties (QEMU 8.0 and
/// later).
pub fn qemu_has_fdp(help: &str) -> bool {
    ["fdp=", "fdp.runs=", "fdp.nruh="].iter().all(|p| help.contains(p))
}

/// PCI addresses of the VFIO guest's two controllers (QEMU `addr=` 04.0
/// and 05.0 on the q35 root bus: each its own IOMMU group).
pub const VFIO_BDFS: [&str; 2] = ["0000:00:04.0", "0000:00:05.0"];

/// Kernel command line of the VFIO guest: the emulated Intel IOMMU on
/// (Debian's kernels leave it off by default).
pub const IOMMU_APPEND: &str = "intel_iommu=on";

/// QEMU arguments attaching the controller and `NAMESPACES` backed by
/// files in `image_dir`.
pub fn qemu_device_args(image_dir: &std::path::Path) -> Vec<String> {
    controller_args(image_dir, "nvme0", "nvme,serial=zns0,id=nvme0", NAMESPACES)
}

/// QEMU arguments of the VFIO guest: a q35 machine with an emulated Intel
/// IOMMU (interrupt remapping on, which VFIO's type-1 backend wants before
/// it isolates a device; with TCG the split irqchip it needs is QEMU's
/// own), the controller of [`qemu_device_args`] at [`VFIO_BDFS`]`[0]` and a
/// second one with [`SECOND_NAMESPACES`] at [`VFIO_BDFS`]`[1]`.
///
/// Why intel-iommu and not virtio-iommu: Debian's cloud kernel is built
/// without `CONFIG_VIRTIO_IOMMU`, and QEMU's VT-d model runs under TCG.
pub fn qemu_iommu_args(image_dir: &std::path::Path) -> Vec<String> {
    let mut a: Vec<String> =
        ["-machine", "q35,kernel-irqchip=split", "-device", "intel-iommu,intremap=on"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    a.extend(controller_args(
        image_dir,
        "nvme0",
        "nvme,serial=zns0,id=nvme0,addr=04.0",
        NAMESPACES,
    ));
    a.extend(controller_args(
        image_dir,
        "nvme1",
        "nvme,serial=zns1,id=nvme1,addr=05.0",
        SECOND_NAMESPACES,
    ));
    a
}

fn controller_args(
    image_dir: &std::path::Path,
    bus: &str,
    controller: &str,
    namespaces: &[Namespace],
) -> Vec<String> {
    let mut a = vec!["-device".to_string(), controller.to_string()];
    for ns in namespaces {
        a.push("-drive".into());
        a.push(format!(
            "file={},if=none,id={bus}-nvm{},format=raw",
            image_dir.join(ns.image).display(),
            ns.nsid
        ));
        let mut dev = format!(
            "nvme-ns,drive={bus}-nvm{0},bus={bus},nsid={0},logical_block_size=4096,\
             physical_block_size=4096",
            ns.nsid
        );
        if !ns.props.is_empty() {
            dev.push(',');
            dev.push_str(ns.props);
        }
        a.push("-device".into());
        a.push(dev);
    }
    a
}

/// The guest program a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `zns-conformance`: the device conformance suite.
    Conformance,
    /// `zns-differential`: random command sequences compared with znskit's
    /// emulator.
    Differential,
    /// `zns-differential --fdp`: the FDP namespace compared with an
    /// emulated one, and the check that placed writes reached their
    /// handles, through the kernel's passthrough.
    DifferentialFdp,
    /// `zns characterize --suite smoke`: the characterization suite, short,
    /// checked for its `results.json` and `report.html`.
    Characterize,
    /// `zns-pcie-check`: both controllers open at once, and a controller
    /// reset with an I/O queue pair open.
    PcieCheck,
}

impl Tool {
    /// The program's path in the guest.
    pub fn program(self) -> &'static str {
        match self {
            Tool::Conformance => "/bin/zns-conformance",
            Tool::Differential | Tool::DifferentialFdp => "/bin/zns-differential",
            Tool::Characterize => "/bin/zns",
            Tool::PcieCheck => "/bin/zns-pcie-check",
        }
    }
}

/// One run of a test program in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Label in the log.
    pub label: String,
    /// The program.
    pub tool: Tool,
    /// The device URI (`pcie:` runs find their address in the guest;
    /// `vfio:` stands for the first controller of the VFIO guest through
    /// VFIO, `vfio2:` for the second, `vfio-both:` for both).
    pub uri: String,
}

impl Run {
    /// True for the runs of the VFIO guest (emulated IOMMU, two
    /// controllers bound to `vfio-pci`).
    pub fn in_vfio_guest(&self) -> bool {
        self.uri.starts_with("vfio")
    }
}

/// The runs, in order: the kernel paths first, then the user-space driver
/// after the kernel lets go of the controller. The differential runs use
/// the paths that return the controller's own statuses: the passthrough
/// (`ng:`) on both zoned namespaces, and the user-space driver (`pcie:`,
/// the first zoned namespace). The characterization suite's smoke run
/// goes through the passthrough on the first zoned namespace.
///
/// The VFIO runs come last and run in a guest of their own (see
/// [`vfio_script`]): the conformance suite and a differential run on the
/// first controller through VFIO, the suite on the second controller, and
/// `zns-pcie-check` on both.
///
/// The FDP run (`diff-ng-fdp`) compares the FDP controller's namespace
/// with an emulated FDP namespace through the passthrough, the placed
/// writes carrying DTYPE 2h and DSPEC through the guest kernel.
///
/// The kernel numbers namespace devices in the order it finds them, not
/// by namespace ID, so the script looks the names up: `$NS1` and `$NS2`
/// stand for the `XnY` suffixes of namespaces 1 and 2 of the ZNS
/// controller, `$FDP` for the FDP controller's namespace.
pub fn default_runs() -> Vec<Run> {
    use Tool::{Characterize, Conformance, Differential, DifferentialFdp, PcieCheck};
    [
        ("ng-pow2", Conformance, "ng:/dev/ng$NS1"),
        ("ng-npow2", Conformance, "ng:/dev/ng$NS2"),
        ("zbd-uring", Conformance, "zbd:/dev/nvme$NS1"),
        ("zbd-psync", Conformance, "zbd:/dev/nvme$NS1,io=psync"),
        ("diff-ng-pow2", Differential, "ng:/dev/ng$NS1"),
        ("diff-ng-npow2", Differential, "ng:/dev/ng$NS2"),
        ("diff-ng-fdp", DifferentialFdp, "ng:/dev/ng$FDP"),
        ("characterize-ng", Characterize, "ng:/dev/ng$NS1"),
        ("pcie", Conformance, "pcie:"),
        ("diff-pcie", Differential, "pcie:"),
        ("vfio", Conformance, "vfio:"),
        ("diff-vfio", Differential, "vfio:"),
        ("vfio-second", Conformance, "vfio2:"),
        ("vfio-reset", PcieCheck, "vfio-both:"),
    ]
    .into_iter()
    .map(|(l, tool, u)| Run { label: l.into(), tool, uri: u.into() })
    .collect()
}

/// Prefix of the line a characterization run prints when its outputs are
/// there.
pub const CHARACTERIZE_SUMMARY: &str = "characterize: ";

/// The lines of a characterization run labelled `label` on `uri`: the
/// smoke suite (`--force`: the conformance runs before it leave zones
/// written), its progress and log on stderr kept in a file (the console is
/// a terminal), then a check that `results.json` and `report.html` are
/// there and not empty.
fn characterize_lines(label: &str, uri: &str) -> String {
    let out = format!("/tmp/{label}");
    format!(
        r#"run {label} /bin/zns characterize --device "{uri}" --suite smoke --force --out {out} 2>{out}.stderr
if [ -s {out}/results.json ] && [ -s {out}/report.html ]; then
    echo "{CHARACTERIZE_SUMMARY}{label}: results.json $(wc -c < {out}/results.json) bytes, report.html $(wc -c < {out}/report.html) bytes"
else
    echo "FAIL {label}: no results.json or report.html in {out}"; fail=1
    tail -n 20 {out}.stderr
fi
"#
    )
}

/// Marker the guest prints last: followed by `PASS` or `FAIL`.
pub const RESULT_MARKER: &str = "VMTEST-RESULT:";

/// What `/init` does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Kernel modules to load, in order (files in `/lib/modules`).
    pub modules: Vec<String>,
    /// Conformance runs.
    pub runs: Vec<Run>,
    /// Extra arguments for every `zns-conformance` run (`--only ...`).
    pub conformance_args: Vec<String>,
    /// Extra arguments for every `zns-differential` run (`--count ...`).
    pub differential_args: Vec<String>,
    /// Extra arguments of the FDP differential run (`--count ...`).
    pub fdp_args: Vec<String>,
    /// Seed of the first differential run; each further run adds 1 (the
    /// runs on the same namespace then try different sequences).
    pub differential_seed: u64,
    /// 2 MiB huge pages to reserve for the user-space driver.
    pub hugepages: u32,
    /// nvme-cli is in the initramfs (for a description of the device by an
    /// independent tool).
    pub nvme_cli: bool,
    /// fio is in the initramfs (for a zoned workload by an independent
    /// tool before the suites).
    pub fio: bool,
    /// Trace the block layer and io_uring; print the trace on failure.
    pub trace: bool,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The first lines of every guest's `/init`: busybox's applets, Debian's
/// programs before them in `$PATH` (busybox's shell still prefers its own
/// applets: call such programs by path), the mounts, and the shell
/// helpers: `say`, `run LABEL CMD...` (a failed command fails the run),
/// `expect LABEL TEXT CMD...` (so does output without TEXT).
/// The parts a `--parts LIST` names (comma separated), each one of
/// `known`.
pub fn parse_parts(list: &str, known: &[&str]) -> Result<Vec<String>, crate::Error> {
    let parts: Vec<String> = list.split(',').map(str::trim).map(str::to_string).collect();
    if let Some(bad) = parts.iter().find(|p| !known.contains(&p.as_str())) {
        return Err(crate::Error::new(format!(
            "--parts: unknown part {bad:?} (known: {})",
            known.join(", ")
        )));
    }
    Ok(parts)
}

pub fn shell_start(purpose: &str) -> String {
    // The line the host waits for before it counts the boot as done.
    let up = crate::vmtest::GUEST_UP.trim_start_matches("vmtest: ");
    format!(
        r#"#!/bin/sh
# znskit guest: {purpose}
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
say() {{ echo "vmtest: $*"; }}
fail=0
now() {{ cut -d. -f1 /proc/uptime; }}
run() {{
    label=$1; shift
    say "RUN $label: $*"
    t0=$(now)
    "$@"
    rc=$?
    say "END $label rc=$rc ($(( $(now) - t0 )) s)"
    if [ $rc -ne 0 ]; then fail=1; say "FAILED $label"; fi
}}
expect() {{
    label=$1; want=$2; shift 2
    got=$("$@" 2>&1)
    case "$got" in
        *"$want"*) say "END $label: found '$want'" ;;
        *) fail=1; echo "FAIL $label: '$want' not in: $got" ;;
    esac
}}
say "{up} Linux $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs"
"#
    )
}

/// The start of every vmtest `/init` script: [`shell_start`], modules (`modules`, files in `/lib/modules`), waiting for the
/// namespaces, `$NS1` and `$NS2`, and the kernel's view of them.
fn prologue(purpose: &str, modules: &[String], trace: bool) -> String {
    let mut s = shell_start(purpose);
    if trace {
        s.push_str(
            r#"mount -t tracefs tracefs /sys/kernel/tracing
echo 16384 > /sys/kernel/tracing/buffer_size_kb
for e in block/block_bio_queue block/block_rq_issue block/block_rq_complete block/block_bio_complete io_uring/io_uring_complete io_uring/io_uring_queue_async_work; do
    echo 1 > /sys/kernel/tracing/events/$e/enable
done
"#,
        );
    }
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(
        r#"# The controller (nvmeN) whose serial number is $1.
ctrl_with_serial() {
    for c in /sys/class/nvme/nvme*; do
        if [ "$(tr -d ' ' < $c/serial 2>/dev/null)" = "$1" ]; then basename $c; return; fi
    done
}
i=0
while [ $i -lt 150 ]; do
    ZC=$(ctrl_with_serial zns0)
    [ -n "$ZC" ] && [ -e /dev/ng${ZC#nvme}n1 ] && [ -e /dev/ng${ZC#nvme}n2 ] && [ -e /dev/ng${ZC#nvme}n3 ] && break
    sleep 0.1; i=$((i + 1))
done
ZC=${ZC:-nvme0}
ls -l /dev/ng* /dev/nvme* 2>&1
# The XnY suffix of the devices of namespace ID $1 of the ZNS controller.
suffix_of() {
    for d in /sys/block/${ZC}n*; do
        if [ "$(cat $d/nsid 2>/dev/null)" = "$1" ]; then basename $d | sed 's/^nvme//'; return; fi
    done
    echo "${ZC#nvme}n$1"
}
NS1=$(suffix_of 1)
NS2=$(suffix_of 2)
say "namespace 1 is nvme$NS1/ng$NS1, namespace 2 is ng$NS2"
for b in /sys/block/nvme*; do
    [ -e "$b/queue/zoned" ] || continue
    say "$(basename $b): zoned=$(cat $b/queue/zoned) zones=$(cat $b/queue/nr_zones) zone_sectors=$(cat $b/queue/chunk_sectors) max_open=$(cat $b/queue/max_open_zones) max_active=$(cat $b/queue/max_active_zones) append_max=$(cat $b/queue/zone_append_max_bytes)"
done
"#,
    );
    s
}

/// Reserves `hugepages` huge pages and unbinds the controller from the
/// kernel's `nvme` driver: `$bdf` is its address, `$unbound` 1 on success.
fn unbind(hugepages: u32) -> String {
    format!(
        r#"bdf=$(cat /sys/class/nvme/$ZC/address 2>/dev/null)
echo {hugepages} > /proc/sys/vm/nr_hugepages
say "huge pages: $(grep HugePages_Total /proc/meminfo)"
unbound=0
if [ -n "$bdf" ] && echo "$bdf" > /sys/bus/pci/drivers/nvme/unbind; then
    say "unbound $bdf from the kernel's nvme driver"
    unbound=1
else
    say "cannot unbind the controller from the kernel"; fail=1
fi
"#
    )
}

/// The end of every `/init` script: the kernel log (and trace) on failure,
/// the result marker, power off.
fn epilogue() -> String {
    format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -ne 0 ] && [ -e /sys/kernel/tracing/trace ]; then say "trace:"; grep -v nvme0n3 /sys/kernel/tracing/trace | tail -n 120; fi
if [ $fail -eq 0 ]; then echo "{m} PASS"; else echo "{m} FAIL"; fi
sync
poweroff -f
"#,
        m = RESULT_MARKER
    )
}

/// The `/init` shell script of `cargo xtask vmtest` (run by busybox `sh`).
pub fn init_script(p: &Plan) -> String {
    let mut s = prologue(
        "runs the conformance suite and the differential test against each backend, \
         prints a result marker and powers off.",
        &p.modules,
        p.trace,
    );
    if p.nvme_cli {
        s.push_str(
            r#"say "nvme-cli's view of the controller:"
nvme list 2>&1
nvme zns id-ns /dev/ng$NS2 2>&1 | head -12
nvme zns report-zones /dev/ng$NS1 -d 3 2>&1
"#,
        );
    }
    if p.fio {
        s.push_str(
            r#"run fio-zbd fio --name=zbd --filename=/dev/nvme$NS1 --direct=1 --ioengine=psync --zonemode=zbd --rw=write --bs=128k --size=2z --io_size=32m --max_open_zones=2 --verify=crc32c --do_verify=1 --minimal
"#,
        );
    }
    if p.runs.iter().any(|r| r.tool == Tool::DifferentialFdp) {
        s.push_str(&fdp_lookup());
    }
    let mut unbound = false;
    let mut seed = p.differential_seed;
    for r in p.runs.iter().filter(|r| !r.in_vfio_guest()) {
        if r.tool == Tool::Characterize {
            s.push_str(&characterize_lines(&r.label, &r.uri));
            continue;
        }
        let (program, args) = command_of(r, p, &mut seed);
        if r.tool == Tool::DifferentialFdp {
            s.push_str(&format!(
                "if [ -n \"$FDP\" ]; then run {l} {program} {args} \"{u}\"; \
                 else echo \"FAIL {l}: no FDP namespace (controller {FDP_SERIAL})\"; fail=1; fi\n",
                l = r.label,
                u = r.uri
            ));
        } else if r.uri == "pcie:" {
            if !unbound {
                unbound = true;
                s.push_str(&unbind(p.hugepages));
            }
            s.push_str(&format!(
                "if [ $unbound -eq 1 ]; then run {} {program} {args} \"pcie:$bdf\"; fi\n",
                r.label
            ));
        } else {
            s.push_str(&format!("run {} {program} {args} \"{}\"\n", r.label, r.uri));
        }
    }
    s.push_str(&epilogue());
    s
}

/// Finds the FDP controller by its serial number and sets `$FDP` to the
/// `XnY` suffix of its namespace (empty when it is not there).
fn fdp_lookup() -> String {
    format!(
        r#"FDP=""
i=0
while [ $i -lt 150 ]; do
    FC=$(ctrl_with_serial {FDP_SERIAL})
    [ -n "$FC" ] && [ -e /dev/ng${{FC#nvme}}n1 ] && break
    sleep 0.1; i=$((i + 1))
done
if [ -n "$FC" ]; then
    n=$(ls -d /sys/class/nvme/$FC/${{FC}}n* 2>/dev/null | head -n 1)
    FDP=$(basename "${{n:-${{FC}}n1}}" | sed 's/^nvme//')
    say "the FDP namespace is ng$FDP (controller $FC)"
else
    say "no FDP controller (serial {FDP_SERIAL})"
fi
"#
    )
}

/// The program of run `r` and its arguments before the URI, quoted for
/// the shell; a differential run takes `seed` and advances it.
fn command_of(r: &Run, p: &Plan, seed: &mut u64) -> (&'static str, String) {
    let join = |args: &[String]| args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
    let args = match r.tool {
        Tool::Conformance | Tool::Characterize => join(&p.conformance_args),
        Tool::PcieCheck => String::new(),
        Tool::Differential => {
            let mut a = vec!["--seed".to_string(), format!("{:#x}", *seed)];
            a.extend(p.differential_args.iter().cloned());
            *seed = seed.wrapping_add(1);
            join(&a)
        }
        Tool::DifferentialFdp => {
            let mut a = vec!["--fdp".to_string(), "--seed".to_string(), format!("{:#x}", *seed)];
            a.extend(p.fdp_args.iter().cloned());
            *seed = seed.wrapping_add(1);
            join(&a)
        }
    };
    (r.tool.program(), args)
}

/// Binds both controllers of the VFIO guest to `vfio-pci` the way a user
/// does: unbind from the kernel's `nvme` driver, `driver_override`, then
/// `drivers_probe`; checks each landed in an IOMMU group of its own with a
/// `/dev/vfio/N` node. `$vfio_ok` is 1 on success.
fn bind_vfio(hugepages: u32) -> String {
    let mut s = format!(
        r#"echo {hugepages} > /proc/sys/vm/nr_hugepages
say "huge pages: $(grep HugePages_Total /proc/meminfo)"
say "IOMMU: $(ls /sys/class/iommu 2>/dev/null | tr '
' ' ')groups: $(ls /sys/kernel/iommu_groups | wc -l)"
vfio_ok=1
groups=""
"#
    );
    for bdf in VFIO_BDFS {
        s.push_str(&format!(
            r#"d=/sys/bus/pci/devices/{bdf}
if [ -e $d/driver ]; then echo {bdf} > $d/driver/unbind; fi
echo vfio-pci > $d/driver_override
echo {bdf} > /sys/bus/pci/drivers_probe
drv=$(basename "$(readlink $d/driver)" 2>/dev/null)
grp=$(basename "$(readlink $d/iommu_group)" 2>/dev/null)
if [ "$drv" = vfio-pci ] && [ -n "$grp" ] && [ -e /dev/vfio/$grp ]; then
    say "{bdf}: bound to vfio-pci, IOMMU group $grp ($(ls $d/iommu_group/devices | wc -l) device(s))"
    case " $groups " in *" $grp "*) say "{bdf} shares IOMMU group $grp"; fail=1; vfio_ok=0 ;; esac
    groups="$groups $grp"
else
    say "{bdf}: not bound to vfio-pci (driver '$drv', IOMMU group '$grp')"; fail=1; vfio_ok=0
fi
"#
        ));
    }
    s
}

/// The `/init` script of the VFIO guest of `cargo xtask vmtest`: the
/// controllers bound to `vfio-pci` ([`bind_vfio`]), then the runs of `p`
/// that belong there, each device URI naming the VFIO transport.
pub fn vfio_script(p: &Plan) -> String {
    let mut s = shell_start(
        "binds two NVMe controllers to vfio-pci behind an emulated IOMMU, runs the \
         conformance suite, the differential test and the driver's two-controller and reset \
         checks through VFIO, prints a result marker and powers off.",
    );
    for m in &p.modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(&bind_vfio(p.hugepages));
    let [first, second] = VFIO_BDFS.map(|b| format!("pcie:{b},transport=vfio"));
    let mut seed = p.differential_seed;
    for r in p.runs.iter().filter(|r| r.in_vfio_guest()) {
        let (program, args) = command_of(r, p, &mut seed);
        let uris = match r.uri.as_str() {
            "vfio2:" => format!("\"{second}\""),
            "vfio-both:" => format!("\"{first}\" \"{second}\""),
            _ => format!("\"{first}\""),
        };
        s.push_str(&format!(
            "if [ $vfio_ok -eq 1 ]; then run {} {program} {args} {uris}; fi\n",
            r.label
        ));
    }
    s.push_str(&epilogue());
    s
}

/// Marker of the lines `zns-engines` prints with one result each.
pub const ENGINE_RESULT: &str = "ENGINE-RESULT ";

/// fio's I/O engines `cargo xtask engines` compares with znskit's backends.
pub const FIO_ENGINES: &[&str] = &["psync", "libaio", "io_uring"];

/// What the `/init` script of `cargo xtask engines` does.
#[derive(Debug, Clone)]
pub struct EnginesPlan {
    /// Kernel modules to load, in order.
    pub modules: Vec<String>,
    /// Measured operations of each kind and engine.
    pub ops: u64,
    /// Operations before those, not measured.
    pub warmup: u64,
    /// 2 MiB huge pages to reserve for the user-space driver.
    pub hugepages: u32,
}

/// The `/init` script of `cargo xtask engines`: on the first zoned
/// namespace, fio's engines (sequential writes, then random reads of what
/// they wrote; fio's latency logs read by `zns-engines fio`), znskit's
/// `zbd:` and `ng:` backends, then the user-space driver (`pcie:`) once
/// the kernel has let go of the controller. Every zone is reset first.
pub fn engines_script(p: &EnginesPlan) -> String {
    let mut s = prologue(
        "measures queue-depth-1 latency through fio and znskit's backends, prints the \
         results and powers off.",
        &p.modules,
        false,
    );
    let total = p.ops + p.warmup;
    let (ops, warmup) = (p.ops, p.warmup);
    for e in FIO_ENGINES {
        s.push_str(&format!("run reset-{e} /bin/zns-engines reset \"zbd:/dev/nvme$NS1\"\n"));
        for op in ["write", "randread"] {
            s.push_str(&format!(
                "run fio-{e}-{op} fio --name={op} --filename=/dev/nvme$NS1 --ioengine={e} \
                 --direct=1 --iodepth=1 --rw={op} --bs=4k --zonemode=zbd --offset=0 --size=1z \
                 --number_ios={total} --randrepeat=1 --write_lat_log=/tmp/fio-{e}-{op} \
                 --log_avg_msec=0 --output=/tmp/fio-{e}-{op}.out\n\
                 run fio-{e}-{op}-log /bin/zns-engines fio --engine fio-{e} --op {op} \
                 --warmup {warmup} /tmp/fio-{e}-{op}_lat.1.log\n"
            ));
        }
    }
    for (engine, uri) in [("zbd", "zbd:/dev/nvme$NS1"), ("ng", "ng:/dev/ng$NS1")] {
        s.push_str(&format!(
            "run {engine} /bin/zns-engines measure --ops {ops} --warmup {warmup} \
             --engine {engine} \"{uri}\"\n"
        ));
    }
    s.push_str(&unbind(p.hugepages));
    s.push_str(&format!(
        "if [ $unbound -eq 1 ]; then run pcie /bin/zns-engines measure --ops {ops} \
         --warmup {warmup} --engine pcie \"pcie:$bdf\"; fi\n"
    ));
    s.push_str(&epilogue());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_every_backend_and_ends_with_a_marker() {
        let plan = Plan {
            modules: vec!["nvme-core.ko".into(), "nvme.ko".into()],
            runs: default_runs(),
            conformance_args: vec!["--only".into(), "copy,queue_full".into()],
            differential_args: vec!["--count".into(), "7".into()],
            fdp_args: vec!["--count".into(), "3".into()],
            differential_seed: 0x2a,
            hugepages: 64,
            nvme_cli: false,
            fio: false,
            trace: false,
        };
        let s = init_script(&plan);
        assert!(s.starts_with("#!/bin/sh\n"));
        let core = s.find("insmod /lib/modules/nvme-core.ko").unwrap();
        assert!(core < s.find("insmod /lib/modules/nvme.ko").unwrap());
        for uri in
            ["\"ng:/dev/ng$NS1\"", "\"ng:/dev/ng$NS2\"", "\"zbd:/dev/nvme$NS1\"", "\"pcie:$bdf\""]
        {
            assert!(s.contains(uri), "{uri}");
        }
        assert!(s.contains("/bin/zns-conformance '--only' 'copy,queue_full' \"ng:/dev/ng$NS1\""));
        assert!(s.contains(
            "run diff-ng-npow2 /bin/zns-differential '--seed' '0x2b' '--count' '7' \"ng:/dev/ng$NS2\""
        ));
        assert!(s.contains(
            "run diff-ng-fdp /bin/zns-differential '--fdp' '--seed' '0x2c' '--count' '3' \
             \"ng:/dev/ng$FDP\""
        ));
        assert!(s.contains(
            "run diff-pcie /bin/zns-differential '--seed' '0x2d' '--count' '7' \"pcie:$bdf\""
        ));
        // The FDP namespace is looked up by its controller's serial number
        // before the runs, and its run fails the guest when it is missing.
        let lookup = s.find("FC=$(ctrl_with_serial znsfdp0)").expect("the FDP lookup");
        assert!(lookup < s.find("run diff-ng-fdp").unwrap());
        assert!(s.contains("else echo \"FAIL diff-ng-fdp: no FDP namespace"));
        // The ZNS controller is found by serial too, and only it unbinds.
        assert!(s.contains("ZC=$(ctrl_with_serial zns0)"));
        assert!(s.contains("bdf=$(cat /sys/class/nvme/$ZC/address"));
        let c = s
            .find(
                "run characterize-ng /bin/zns characterize --device \"ng:/dev/ng$NS1\" \
                 --suite smoke --force --out /tmp/characterize-ng",
            )
            .expect("a characterization run");
        assert!(c < s.find("/sys/bus/pci/drivers/nvme/unbind").unwrap());
        assert!(s.contains("[ -s /tmp/characterize-ng/results.json ]"));
        assert!(s.contains("[ -s /tmp/characterize-ng/report.html ]"));
        assert_eq!(s.matches("/sys/bus/pci/drivers/nvme/unbind").count(), 1);
        assert!(s.contains("/sys/bus/pci/drivers/nvme/unbind"));
        assert!(s.contains("echo 64 > /proc/sys/vm/nr_hugepages"));
        assert!(s.contains("VMTEST-RESULT: PASS") && s.contains("VMTEST-RESULT: FAIL"));
        assert!(s.trim_end().ends_with("poweroff -f"));
        assert!(!s.contains("nvme list") && !s.contains("fio "));
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn the_engines_script_measures_every_engine_before_the_driver() {
        let s = engines_script(&EnginesPlan {
            modules: vec!["nvme.ko".into()],
            ops: 100,
            warmup: 5,
            hugepages: 64,
        });
        for e in FIO_ENGINES {
            assert!(s.contains(&format!("--ioengine={e} --direct=1 --iodepth=1 --rw=randread")));
            assert!(s.contains(&format!("--engine fio-{e} --op write --warmup 5")));
        }
        assert!(s.contains("--number_ios=105"));
        let unbind = s.find("/sys/bus/pci/drivers/nvme/unbind").unwrap();
        assert!(s.find("--engine ng \"ng:/dev/ng$NS1\"").unwrap() < unbind);
        assert!(s.find("--engine pcie \"pcie:$bdf\"").unwrap() > unbind);
        assert!(s.trim_end().ends_with("poweroff -f"));
    }

    #[test]
    fn qemu_gets_three_namespaces() {
        let a = qemu_device_args(std::path::Path::new("img"));
        assert_eq!(a.iter().filter(|x| *x == "-device").count(), 4);
        assert!(a.contains(&"file=img/zns-pow2.img,if=none,id=nvme0-nvm1,format=raw".to_string()));
        assert!(a.iter().any(|x| x.starts_with("nvme-ns,drive=nvme0-nvm1,bus=nvme0,nsid=1,")));
        let ns2 = a.iter().find(|x| x.contains("nsid=2")).unwrap();
        assert!(ns2.contains("zoned.zone_size=48M") && ns2.contains("zoned.descr_ext_size=64"));
        let ns3 = a.iter().find(|x| x.contains("nsid=3")).unwrap();
        assert!(!ns3.contains("zoned"));
    }

    #[test]
    fn the_fdp_controller_has_a_subsystem_of_its_own() {
        let a = qemu_fdp_args(std::path::Path::new("img"));
        let subsys = a.iter().position(|x| x.starts_with("nvme-subsys,")).unwrap();
        let ctrl = a.iter().position(|x| x.starts_with("nvme,")).unwrap();
        assert!(subsys < ctrl, "the subsystem must exist before its controller");
        assert!(a[subsys].contains("fdp=on") && a[subsys].contains("fdp.nruh=8"));
        assert!(a[subsys].contains("fdp.runs=1M") && a[subsys].contains("fdp.nrg=1"));
        assert!(a[ctrl].contains("serial=znsfdp0") && a[ctrl].contains("subsys=fdpsubsys"));
        let ns = a.iter().find(|x| x.starts_with("nvme-ns,")).unwrap();
        assert!(ns.contains("bus=nvmefdp") && ns.contains("fdp.ruhs=0-7") && !ns.contains("zoned"));
        assert!(a.contains(&"file=img/fdp.img,if=none,id=nvmefdp-nvm1,format=raw".to_string()));
        let help = "nvme-subsys options:\n  fdp.nrg=<uint32>\n  fdp.nruh=<uint16>\n  \
                    fdp.runs=<size>\n  fdp=<bool>\n  nqn=<str>\n";
        assert!(qemu_has_fdp(help));
        assert!(!qemu_has_fdp("nvme-subsys options:\n  nqn=<str>\n"));
    }

    #[test]
    fn the_vfio_guest_has_an_iommu_and_two_controllers() {
        let a = qemu_iommu_args(std::path::Path::new("img"));
        let iommu = a.iter().position(|x| x.starts_with("intel-iommu")).unwrap();
        let first = a.iter().position(|x| x.starts_with("nvme,")).unwrap();
        assert!(iommu < first, "the IOMMU must come before the devices it translates");
        assert!(a.contains(&"q35,kernel-irqchip=split".to_string()));
        assert!(a.contains(&"nvme,serial=zns0,id=nvme0,addr=04.0".to_string()));
        assert!(a.contains(&"nvme,serial=zns1,id=nvme1,addr=05.0".to_string()));
        assert_eq!(a.iter().filter(|x| x.starts_with("nvme-ns,")).count(), 4);
        assert!(a.iter().any(|x| x.contains("drive=nvme1-nvm1,bus=nvme1,nsid=1")));
        assert!(VFIO_BDFS[0].ends_with("04.0") && VFIO_BDFS[1].ends_with("05.0"));
    }

    #[test]
    fn vfio_runs_go_to_their_own_guest_with_the_vfio_transport() {
        let plan = Plan {
            modules: vec!["vfio.ko".into(), "vfio-iommu-type1.ko".into(), "vfio-pci.ko".into()],
            runs: default_runs(),
            conformance_args: vec![],
            differential_args: vec!["--count".into(), "7".into()],
            fdp_args: vec!["--count".into(), "3".into()],
            differential_seed: 0x10,
            hugepages: 64,
            nvme_cli: false,
            fio: false,
            trace: false,
        };
        let plain = init_script(&plan);
        assert!(!plain.contains("transport=vfio") && !plain.contains("vfio-reset"));
        let s = vfio_script(&plan);
        let bind = s.find("echo vfio-pci > $d/driver_override").unwrap();
        assert!(s.find("insmod /lib/modules/vfio-pci.ko").unwrap() < bind);
        assert!(s.contains("echo 0000:00:05.0 > /sys/bus/pci/drivers_probe"));
        let first = "\"pcie:0000:00:04.0,transport=vfio\"";
        let second = "\"pcie:0000:00:05.0,transport=vfio\"";
        assert!(s.find(&format!("run vfio /bin/zns-conformance  {first}")).unwrap() > bind);
        assert!(s.contains("run diff-vfio /bin/zns-differential '--seed' '0x10'"));
        assert!(s.contains(&format!("run vfio-second /bin/zns-conformance  {second}")));
        assert!(s.contains(&format!("run vfio-reset /bin/zns-pcie-check  {first} {second}")));
        assert!(!s.contains("ng:/dev") && !s.contains("/sys/bus/pci/drivers/nvme/unbind"));
        assert!(s.trim_end().ends_with("poweroff -f"));
    }
}
