//! The twins in a guest: ext4 on a conventional twin, f2fs on its ZNS
//! twin, the same fio job on both (the `twins` part of `cargo xtask
//! clients`, on Debian's generic kernel, which has f2fs).
//!
//! One `zns serve` exports `emu:small` (zoned), its conventional twin
//! `emu:small-conv` (the same flash behind a device-side FTL with garbage
//! collection) and, as f2fs's metadata device, the FTL on a small
//! emulated device (as in [`crate::f2fs`]: a ZNS drive without
//! conventional zones needs one). The guest's kernel connects with
//! nvme-tcp, makes ext4 on the twin and f2fs on the zoned namespace,
//! runs [`FIO_JOB`] on each with JSON output, unmounts, and checks both
//! with fsck. The host reads fio's JSON from the console and prints the
//! figures side by side.

use serde_json::Value;

use crate::clients::{connect_lines, end_lines, start_lines};

/// The subsystem of the run.
pub const NQN: &str = "nqn.2026-11.io.znskit:twins";

/// The ZNS twin: 256 zones of 4 MiB (capacity 3.75 MiB).
pub const ZONED_DEVICE: &str = "emu:small";

/// The conventional twin: the flash of those 256 zones behind a
/// page-mapped FTL, 7 % of it spare.
pub const CONVENTIONAL_DEVICE: &str = "emu:small-conv";

/// Kernel modules the guest needs beyond the built-in ones: f2fs's (see
/// [`crate::f2fs::MODULES`]) and ext4.
pub const MODULES: &[&str] = &[
    "mq-deadline",
    "nvme-core",
    "nvme-tcp",
    "virtio_pci",
    "virtio_net",
    "crc32_generic",
    "f2fs",
    "ext4",
];

/// Modules loaded when the kernel has them (ext4's metadata checksums).
pub const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries.
pub const TOOLS: &[(&str, &str)] = &[
    ("nvme", "nvme-cli"),
    ("fio", "fio"),
    ("mkfs.f2fs", "f2fs-tools"),
    ("fsck.f2fs", "f2fs-tools"),
    ("mke2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
];

/// The fio job run on both filesystems: 4 KiB random writes over a
/// 32 MiB file with an fsync every 32 writes, read back and checked
/// (crc32c), then 64 MiB of 1 MiB sequential writes to a second file,
/// fsynced every 8 MiB. Buffered I/O: f2fs on a zoned device turns direct
/// writes into buffered ones anyway, so both go through the page cache.
///
/// The fsyncs bound what is written back at once: on Linux 6.12, f2fs
/// writes a large dirty file back into every zone its blocks span at the
/// same time (the block layer keeps each zone's writes in order, one at a
/// time, not the zones to a few), so 64 MiB written back in one go makes
/// 17 zones active on a namespace that allows 14, and the drive, real or
/// emulated, answers Too Many Active Zones.
pub const FIO_JOB: &str = "[global]
ioengine=psync
direct=0

[randwrite]
rw=randwrite
bs=4k
size=32m
fsync=32
verify=crc32c
do_verify=1

[seqwrite]
stonewall
rw=write
bs=1m
size=64m
fsync=8
end_fsync=1
";

/// Prefix of the console lines that carry fio's JSON for filesystem `fs`.
fn json_prefix(fs: &str) -> String {
    format!("FIO-JSON {fs} ")
}

/// The filesystems compared, in the order printed: name, what it is on.
pub const FILESYSTEMS: [(&str, &str); 2] = [("ext4", CONVENTIONAL_DEVICE), ("f2fs", ZONED_DEVICE)];

/// The guest's `/init`: connect, ext4 on the conventional twin, f2fs on
/// the zoned namespace (the FTL namespace its metadata device), the same
/// fio job on each, umount, fsck, disconnect. `mke2fs` is Debian's
/// program's path (busybox has an applet of that name).
pub fn init_script(modules: &[String], nvmf_port: u16, mke2fs: &str) -> String {
    let mut s = start_lines(
        "ext4 on a conventional twin, f2fs on its ZNS twin, one fio job on both, fsck, a \
         result marker, power off.",
        modules,
        false,
    );
    s.push_str(&connect_lines(nvmf_port, NQN, 3));
    let ext4 = json_prefix("ext4");
    let f2fs = json_prefix("f2fs");
    s.push_str(&format!(
        r#"Z=/dev/nvme$(suffix_of 1)
C=/dev/nvme$(suffix_of 2)
M=/dev/nvme$(suffix_of 3)
for b in $Z $C $M; do say "$b: zoned=$(cat /sys/block/$(basename $b)/queue/zoned) $(cat /sys/block/$(basename $b)/size) sectors"; done
expect twins-zoned-ns host-managed cat /sys/block/$(basename $Z)/queue/zoned
expect twins-conventional-ns none cat /sys/block/$(basename $C)/queue/zoned
echo mq-deadline > /sys/block/$(basename $Z)/queue/scheduler
cat > /tmp/twins.fio <<'JOB'
{FIO_JOB}JOB
mkdir -p /mnt/ext4 /mnt/f2fs
run mkfs-ext4-twin {mke2fs} -t ext4 -F -q $C
run mount-ext4-twin mount -t ext4 $C /mnt/ext4
run mkfs-f2fs-twin mkfs.f2fs -q -f -m -c $Z $M
run mount-f2fs-twin mount -t f2fs $M /mnt/f2fs
# The same job on each (its files in the current directory); its JSON
# goes to the console line by line.
run fio-ext4-twin sh -c "cd /mnt/ext4 && fio --eta=never --output-format=json --output=/tmp/ext4.json /tmp/twins.fio"
sed 's/^/{ext4}/' /tmp/ext4.json
run fio-f2fs-twin sh -c "cd /mnt/f2fs && fio --eta=never --output-format=json --output=/tmp/f2fs.json /tmp/twins.fio"
sed 's/^/{f2fs}/' /tmp/f2fs.json
run umount-ext4-twin umount /mnt/ext4
run umount-f2fs-twin umount /mnt/f2fs
run fsck-ext4-twin e2fsck -f -n $C
fsck.f2fs -f --dry-run $M > /tmp/fsck-f2fs.out 2>&1 < /dev/null
rc=$?
cat /tmp/fsck-f2fs.out
say "END fsck-f2fs-twin rc=$rc"
if [ $rc -ne 0 ] || grep -qF "[Fail]" /tmp/fsck-f2fs.out || ! grep -qF "[FSCK] other corrupted bugs" /tmp/fsck-f2fs.out; then
    fail=1; say "FAILED fsck-f2fs-twin"
fi
run nvme-disconnect nvme disconnect -n {NQN}
"#
    ));
    s.push_str(&end_lines());
    s
}

/// Collects the console lines carrying fio's JSON, by filesystem.
#[derive(Debug, Default)]
pub struct JsonLines {
    text: [String; 2],
}

impl JsonLines {
    /// Takes `line` if it carries fio's JSON.
    pub fn watch(&mut self, line: &str) {
        let line = line.trim_end_matches(['\r', '\n']);
        for (i, (fs, _)) in FILESYSTEMS.iter().enumerate() {
            if let Some(rest) = line.strip_prefix(&json_prefix(fs)) {
                self.text[i].push_str(rest);
                self.text[i].push('\n');
            }
        }
    }

    /// The figures of each filesystem's jobs, or why there are none.
    pub fn figures(&self) -> [Result<Vec<JobFigures>, String>; 2] {
        [0, 1].map(|i| parse(&self.text[i]).map_err(|e| format!("{}: {e}", FILESYSTEMS[i].0)))
    }
}

/// What one fio job wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFigures {
    /// The job's name.
    pub name: String,
    /// Write bandwidth, MiB/s.
    pub mib_s: f64,
    /// Write IOPS.
    pub iops: f64,
    /// 99th percentile of the writes' completion latency, µs.
    pub p99_us: f64,
}

/// The write figures of each job in fio's JSON output (`text` may start
/// with fio's notes before the JSON). A job that reported an error (a
/// failed verification among them) is an error.
pub fn parse(text: &str) -> Result<Vec<JobFigures>, String> {
    let start = text.find('{').ok_or("no JSON in fio's output")?;
    let v: Value = serde_json::from_str(&text[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let jobs = v["jobs"].as_array().ok_or("fio's JSON has no jobs")?;
    if jobs.is_empty() {
        return Err("fio's JSON has no jobs".into());
    }
    jobs.iter()
        .map(|j| {
            let name = j["jobname"].as_str().unwrap_or("?").to_string();
            let error = j["error"].as_i64().unwrap_or(-1);
            if error != 0 {
                return Err(format!("fio job {name} ended with error {error}"));
            }
            let w = &j["write"];
            let num = |v: &Value, what: &str| {
                v.as_f64().ok_or_else(|| format!("fio job {name}: no {what}"))
            };
            let p99 = num(&w["clat_ns"]["percentile"]["99.000000"], "write p99 clat")?;
            Ok(JobFigures {
                mib_s: num(&w["bw_bytes"], "write bandwidth")? / (1u64 << 20) as f64,
                iops: num(&w["iops"], "write IOPS")?,
                p99_us: p99 / 1000.0,
                name,
            })
        })
        .collect()
}

/// The figures side by side: one row per job and measure, one column per
/// filesystem.
pub fn table(ext4: &[JobFigures], f2fs: &[JobFigures]) -> Vec<String> {
    let mut rows = vec![format!(
        "{:<22} {:>22} {:>22}",
        "fio job (writes)",
        format!("ext4 on {CONVENTIONAL_DEVICE}"),
        format!("f2fs on {ZONED_DEVICE}")
    )];
    for (a, b) in ext4.iter().zip(f2fs) {
        let measures: [(&str, f64, f64, usize); 3] = [
            ("MiB/s", a.mib_s, b.mib_s, 1),
            ("IOPS", a.iops, b.iops, 0),
            ("p99 clat (us)", a.p99_us, b.p99_us, 0),
        ];
        for (what, x, y, digits) in measures {
            rows.push(format!(
                "{:<22} {:>22.digits$} {:>22.digits$}",
                format!("{} {what}", a.name),
                x,
                y
            ));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_formats_both_runs_the_job_on_each_and_checks_after_unmounting() {
        let s = init_script(&["f2fs.ko".into(), "ext4.ko".into()], 4420, "/usr/sbin/mke2fs");
        assert!(s.starts_with("#!/bin/sh\n") && s.contains("insmod /lib/modules/ext4.ko"));
        assert!(s.contains(&format!("nvme connect $T -n {NQN}")));
        assert!(s.contains(FIO_JOB));
        let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle} not in {s}"));
        assert!(at("/usr/sbin/mke2fs -t ext4 -F -q $C") < at("cd /mnt/ext4 && fio"));
        assert!(at("mkfs.f2fs -q -f -m -c $Z $M") < at("cd /mnt/f2fs && fio"));
        assert!(at("cd /mnt/f2fs && fio") < at("umount /mnt/ext4"));
        assert!(at("umount /mnt/ext4") < at("e2fsck -f -n $C"));
        assert!(at("umount /mnt/f2fs") < at("fsck.f2fs -f --dry-run $M"));
        assert!(s.contains("sed 's/^/FIO-JSON f2fs /' /tmp/f2fs.json"));
        assert!(s.trim_end().ends_with("poweroff -f"));
    }

    fn job(name: &str, bw: u64, iops: f64, p99: u64, error: i64) -> String {
        format!(
            r#"{{"jobname": "{name}", "error": {error}, "read": {{"bw_bytes": 1}},
               "write": {{"bw_bytes": {bw}, "iops": {iops},
                          "clat_ns": {{"percentile": {{"50.000000": 10, "99.000000": {p99}}}}}}}}}"#
        )
    }

    #[test]
    fn figures_come_from_the_json_on_the_console() {
        let json = format!(
            "{{\"fio version\": \"fio-3.33\",\n\"jobs\": [{}, {}]\n}}",
            job("randwrite", 3 << 20, 768.5, 250_000, 0),
            job("seqwrite", 40 << 20, 40.0, 90_000_000, 0)
        );
        let mut lines = JsonLines::default();
        lines.watch("note: both iodepth >= 1 and synchronous I/O engine");
        for l in json.lines() {
            lines.watch(&format!("FIO-JSON ext4 {l}\r\n"));
        }
        lines.watch("[   12.3] some kernel line");
        let [ext4, f2fs] = lines.figures();
        let ext4 = ext4.unwrap();
        assert_eq!(ext4.len(), 2);
        assert_eq!(
            ext4[0],
            JobFigures { name: "randwrite".into(), mib_s: 3.0, iops: 768.5, p99_us: 250.0 }
        );
        assert_eq!(ext4[1].mib_s, 40.0);
        assert!(f2fs.unwrap_err().contains("f2fs: no JSON"));
        let t = table(&ext4, &ext4);
        assert_eq!(t.len(), 7);
        assert!(t[0].contains("ext4 on emu:small-conv") && t[0].contains("f2fs on emu:small"));
        assert!(t[1].starts_with("randwrite MiB/s") && t[1].contains("3.0"));
        assert!(t[3].starts_with("randwrite p99 clat (us)") && t[3].contains("250"));
    }

    /// docs/compare.md gives users the same job and devices.
    #[test]
    fn the_recipe_in_compare_md_is_this_run() {
        let doc = include_str!("../../../docs/compare.md");
        let at = doc
            .find("## In a guest: ext4 on the conventional twin, f2fs on the ZNS twin")
            .expect("the section");
        let section = &doc[at..];
        assert!(section.contains(&format!("```ini\n{FIO_JOB}```")));
        let serve = format!(
            "--device {ZONED_DEVICE} --device {CONVENTIONAL_DEVICE} serve --ftl {}",
            crate::f2fs::FTL_DEVICE
        );
        assert!(section.contains(&serve), "{serve}");
    }

    #[test]
    fn a_job_with_an_error_fails_the_figures() {
        let json = format!("{{\"jobs\": [{}]}}", job("randwrite", 1, 1.0, 1, 84));
        let e = parse(&json).unwrap_err();
        assert!(e.contains("randwrite") && e.contains("84"), "{e}");
        assert!(parse("{\"jobs\": []}").is_err());
        assert!(parse("{\"jobs\": [{\"jobname\": \"x\", \"error\": 0}]}").is_err());
    }
}
