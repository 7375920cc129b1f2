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
/// extensions and open/active limits that differ, and a conventional one.
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
                zoned.max_open=6,zoned.max_active=8,zoned.descr_ext_size=64",
    },
    Namespace { nsid: 3, image: "conventional.img", mib: 64, props: "" },
];

/// QEMU arguments attaching the controller and `NAMESPACES` backed by
/// files in `image_dir`.
pub fn qemu_device_args(image_dir: &std::path::Path) -> Vec<String> {
    let mut a = vec!["-device".to_string(), "nvme,serial=zns0,id=nvme0".to_string()];
    for ns in NAMESPACES {
        a.push("-drive".into());
        a.push(format!(
            "file={},if=none,id=nvm{},format=raw",
            image_dir.join(ns.image).display(),
            ns.nsid
        ));
        let mut dev = format!(
            "nvme-ns,drive=nvm{0},bus=nvme0,nsid={0},logical_block_size=4096,\
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

/// One run of the conformance suite in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Label in the log.
    pub label: String,
    /// The device URI (`pcie:` runs find their address in the guest).
    pub uri: String,
}

/// The runs, in order: the kernel paths first, then the user-space driver
/// after the kernel lets go of the controller.
///
/// The kernel numbers namespace devices in the order it finds them, not
/// by namespace ID, so the script looks the names up: `$NS1` and `$NS2`
/// stand for the `0nX` suffixes of namespaces 1 and 2.
pub fn default_runs() -> Vec<Run> {
    [
        ("ng-pow2", "ng:/dev/ng$NS1"),
        ("ng-npow2", "ng:/dev/ng$NS2"),
        ("zbd-uring", "zbd:/dev/nvme$NS1"),
        ("zbd-psync", "zbd:/dev/nvme$NS1,io=psync"),
        ("pcie", "pcie:"),
    ]
    .into_iter()
    .map(|(l, u)| Run { label: l.into(), uri: u.into() })
    .collect()
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
    /// 2 MiB huge pages to reserve for the user-space driver.
    pub hugepages: u32,
    /// nvme-cli is in the initramfs (for a description of the device by an
    /// independent tool).
    pub nvme_cli: bool,
    /// fio is in the initramfs (for a zoned workload by an independent
    /// tool before the suites).
    pub fio: bool,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The `/init` shell script (run by busybox `sh`).
pub fn init_script(p: &Plan) -> String {
    let mut s = String::from(
        r#"#!/bin/sh
# znskit vmtest guest: mounts, loads modules, runs the conformance suite
# against each backend, prints a result marker and powers off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
say() { echo "vmtest: $*"; }
fail=0
now() { cut -d. -f1 /proc/uptime; }
run() {
    label=$1; shift
    say "RUN $label: $*"
    t0=$(now)
    "$@"
    rc=$?
    say "END $label rc=$rc ($(( $(now) - t0 )) s)"
    if [ $rc -ne 0 ]; then fail=1; say "FAILED $label"; fi
}
say "guest up: Linux $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs"
"#,
    );
    for m in &p.modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(
        r#"i=0
while [ $i -lt 150 ]; do
    [ -e /dev/ng0n1 ] && [ -e /dev/ng0n2 ] && [ -e /dev/ng0n3 ] && break
    sleep 0.1; i=$((i + 1))
done
ls -l /dev/ng* /dev/nvme* 2>&1
# The 0nX suffix of the devices of namespace ID $1.
suffix_of() {
    for d in /sys/block/nvme0n*; do
        if [ "$(cat $d/nsid 2>/dev/null)" = "$1" ]; then basename $d | sed 's/^nvme//'; return; fi
    done
    echo "0n$1"
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
    let args: Vec<String> = p.conformance_args.iter().map(|a| quote(a)).collect();
    let args = args.join(" ");
    for r in &p.runs {
        if r.uri == "pcie:" {
            s.push_str(&format!(
                r#"bdf=$(cat /sys/class/nvme/nvme0/address 2>/dev/null)
echo {hp} > /proc/sys/vm/nr_hugepages
say "huge pages: $(grep HugePages_Total /proc/meminfo)"
if [ -n "$bdf" ] && echo "$bdf" > /sys/bus/pci/drivers/nvme/unbind; then
    say "unbound $bdf from the kernel's nvme driver"
    run {label} /bin/zns-conformance {args} "pcie:$bdf"
else
    say "cannot unbind the controller from the kernel"; fail=1
fi
"#,
                hp = p.hugepages,
                label = r.label,
            ));
        } else {
            s.push_str(&format!("run {} /bin/zns-conformance {args} \"{}\"\n", r.label, r.uri));
        }
    }
    s.push_str(&format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{m} PASS"; else echo "{m} FAIL"; fi
sync
poweroff -f
"#,
        m = RESULT_MARKER
    ));
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
            hugepages: 64,
            nvme_cli: false,
            fio: false,
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
        assert!(s.contains("'--only' 'copy,queue_full'"));
        assert!(s.contains("/sys/bus/pci/drivers/nvme/unbind"));
        assert!(s.contains("echo 64 > /proc/sys/vm/nr_hugepages"));
        assert!(s.contains("VMTEST-RESULT: PASS") && s.contains("VMTEST-RESULT: FAIL"));
        assert!(s.trim_end().ends_with("poweroff -f"));
        assert!(!s.contains("nvme list") && !s.contains("fio "));
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn qemu_gets_three_namespaces() {
        let a = qemu_device_args(std::path::Path::new("img"));
        assert_eq!(a.iter().filter(|x| *x == "-device").count(), 4);
        assert!(a.contains(&"file=img/zns-pow2.img,if=none,id=nvm1,format=raw".to_string()));
        let ns2 = a.iter().find(|x| x.contains("nsid=2")).unwrap();
        assert!(ns2.contains("zoned.zone_size=48M") && ns2.contains("zoned.descr_ext_size=64"));
        let ns3 = a.iter().find(|x| x.contains("nsid=3")).unwrap();
        assert!(!ns3.contains("zoned"));
    }
}
