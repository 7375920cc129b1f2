//! `cargo xtask nvmet`: znskit's NVMe/TCP initiator against an
//! independent target, the guest kernel's own (nvmet-tcp, configured
//! through configfs) exporting a zoned null_blk device, in a QEMU guest
//! that needs no network device (both ends use the guest's loopback).
//!
//! `zns write` sends it writes in the capsule and by R2T through `tcp:`,
//! then the device conformance suite runs against it. nvmet's zoned
//! backend answers some checks with statuses other than the ZNS command
//! set's; the suite accepts exactly those (its `nvmet` divergences, listed
//! in docs/nvmf.md) and fails on any other difference, or on a divergence
//! that stops occurring. The same lines run at the end of `cargo xtask
//! clients --nvmet`.

use std::fs;
use std::time::Instant;

use clap::Parser;

use crate::args::{self, GuestArgs};
use crate::guest::RESULT_MARKER;
use crate::vmtest;
use crate::{kernel, Error, Result};

/// The subsystem the guest kernel's own target (nvmet) exports.
pub const NVMET_NQN: &str = "nqn.2026-11.io.znskit:nvmet";

/// The subsystem of the `zns serve` the guest measures beside nvmet.
const ZNSKIT_NQN: &str = "nqn.2026-11.io.znskit:guest";

/// Kernel modules the guest needs beyond the built-in ones.
const MODULES: &[&str] = &["nvmet-tcp", "null_blk"];

/// znskit's NVMe/TCP initiator against the guest kernel's own target (nvmet-tcp)
///
/// Boots a QEMU guest whose kernel exports a zoned null_blk device with its own
/// NVMe/TCP target (nvmet-tcp) on the guest's loopback, and runs znskit's tcp:
/// initiator against it: writes in the capsule and by R2T, then the device
/// conformance suite (nvmet's known divergences accepted exactly).
#[derive(Debug, Clone, Parser)]
#[command(
    verbatim_doc_comment,
    args_override_self = true,
    mut_arg("kernel", args::cloud_kernel),
    mut_arg("timeout", |a| a.default_value("600"))
)]
pub struct Args {
    /// Only these conformance checks (comma separated; default: all).
    #[arg(long, value_name = "CHECKS")]
    only: Option<String>,
    #[command(flatten)]
    guest: GuestArgs,
}

/// Runs the whole task.
pub fn run(opts: &Args) -> Result<()> {
    let o = &opts.guest.vm();
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("nvmet");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        kernel::Flavour::Cloud,
        o.kernel.as_deref(),
        o.install,
    )?;
    let modules = kernel::modules_for(&kernel, MODULES, &[])?;
    let programs =
        vmtest::build_guest_binaries(&root, &target, o.install, &["zns-conformance", "zns"])?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let script = init_script(&names, opts.only.as_deref().unwrap_or_default());
    let initramfs = vmtest::pack_initramfs(&dir, &programs, &modules, &script, &[])?;
    let prepared = start.elapsed();
    let log = dir.join("guest.log");
    let guest_start = Instant::now();
    let outcome = vmtest::boot(&kernel, &initramfs, &[], o, &log)?;
    let guest_time = guest_start.elapsed();
    println!();
    for s in &outcome.summaries {
        println!("nvmet: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &outcome.failures {
        println!("nvmet: {}", f.trim_start_matches("vmtest: "));
    }
    print_figures(&log);
    let pass = outcome.result == Some(true) && outcome.failures.is_empty();
    println!(
        "nvmet: {} in {:.1} s (preparation {:.1} s, guest {:.1} s; log {})",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        prepared.as_secs_f64(),
        guest_time.as_secs_f64(),
        log.display()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("znskit's initiator against the kernel's target failed"))
    }
}

/// Prints the figures the guest measured ([`figure_lines`]) from its log,
/// the two targets side by side.
fn print_figures(log: &std::path::Path) {
    let text = fs::read_to_string(log).unwrap_or_default();
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split("nvmet-figure ").nth(1) else { continue };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let [target, name, value] = f[..] {
            rows.push((target.into(), name.into(), value.into()));
        }
    }
    let value = |t: &str, n: &str| {
        rows.iter().find(|r| r.0 == t && r.1 == n).map_or("-".to_string(), |r| r.2.clone())
    };
    let mut names: Vec<&str> = Vec::new();
    for r in &rows {
        if !names.contains(&r.1.as_str()) {
            names.push(r.1.as_str());
        }
    }
    if names.is_empty() {
        println!("nvmet: no figures measured (see the guest log)");
        return;
    }
    println!("nvmet: 4 KiB random reads through znskit's tcp: initiator in the guest (software emulation: compare the columns, not the machine):");
    println!("nvmet: {:<36} {:>14} {:>14}", "figure", "nvmet+null_blk", "zns serve");
    for n in names {
        println!("nvmet: {n:<36} {:>14} {:>14}", value("nvmet", n), value("znskit", n));
    }
}

/// The guest's `/init`: modules, loopback, [`script_lines`],
/// [`figure_lines`], the result marker.
fn init_script(modules: &[String], only: &str) -> String {
    let mut s = crate::guest::shell_start(
        "znskit's NVMe/TCP initiator against the guest kernel's target, a result marker, \
         power off.",
    );
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str("ip link set lo up\n");
    s.push_str(&script_lines(only));
    s.push_str(&figure_lines());
    s.push_str(&format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{RESULT_MARKER} PASS"; else echo "{RESULT_MARKER} FAIL"; fi
poweroff -f
"#
    ));
    s
}

/// Guest shell lines: the kernel's own NVMe/TCP target (nvmet-tcp,
/// configured through configfs) exporting a zoned null_blk device on
/// 127.0.0.1:4420, and znskit's `tcp:` initiator writing to it and running
/// the conformance suite (the checks `only` names, or all). Needs the
/// `run` and `say` helpers of [`crate::guest::shell_start`], the
/// `nvmet-tcp` and `null_blk` modules, loopback up, and `/bin/zns` and
/// `/bin/zns-conformance`.
pub fn script_lines(only: &str) -> String {
    let only = if only.is_empty() { String::new() } else { format!("--only {only} ") };
    format!(
        r#"# The guest kernel's own target (nvmet-tcp) exports a zoned null_blk
# device; znskit's tcp: initiator runs the conformance suite against it.
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

/// Guest shell lines measuring, through znskit's `tcp:` initiator, 4 KiB
/// random reads at QD 1 (latency) and by queue depth (the best rate) on
/// the kernel's target (null_blk behind nvmet-tcp, set up by
/// [`script_lines`]) and on `zns serve` with a data-less emulated device,
/// both on the guest's loopback: `zns characterize --suite quick --only
/// reads` on each, its figures printed on lines starting `nvmet-figure`.
/// Relative figures only: the guest runs under software emulation.
pub fn figure_lines() -> String {
    format!(
        r#"# The same reads through znskit's initiator on both targets.
/bin/zns --device emu:small,media=null serve --listen 127.0.0.1:4421 --nqn {ZNSKIT_NQN} > /tmp/serve.log 2>&1 &
ZP=$!
sleep 1
for t in "nvmet tcp:127.0.0.1:4420/{NVMET_NQN}" "znskit tcp:127.0.0.1:4421/{ZNSKIT_NQN}"; do
    set -- $t
    run figures-$1 /bin/zns --device "$2" characterize --suite quick --only reads --force --out /tmp/figures-$1 > /tmp/figures-$1.txt 2>&1 || tail -n 5 /tmp/figures-$1.txt
    grep -E "^ *(read_qd/random/4KiB/qd=1:(p50|p99)_us|read_qd/random/4KiB:max_kiops) " /tmp/figures-$1.txt | head -3 | while read -r name value rest; do
        echo "nvmet-figure $1 $name $value"
    done
done
kill $ZP
"#
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_script_configures_nvmet_then_runs_the_suite_and_ends_with_a_marker() {
        let s = init_script(&["null_blk.ko".into()], "");
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("insmod /lib/modules/null_blk.ko"));
        let lo = s.find("ip link set lo up").unwrap();
        let port = s.find("ln -s $SUB $T/ports/1/subsystems/").unwrap();
        let suite = s.find("zns-conformance \"tcp:127.0.0.1:4420/").unwrap();
        assert!(lo < port && port < suite);
        assert!(s.contains("VMTEST-RESULT: PASS") && s.trim_end().ends_with("poweroff -f"));
        assert!(script_lines("copy,queue_full").contains("--only copy,queue_full \"tcp:"));
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        let o = p(&["--only", "copy", "--timeout", "60"]).unwrap().unwrap();
        assert_eq!(
            (o.only.as_deref(), o.guest.vm().timeout),
            (Some("copy"), Duration::from_secs(60))
        );
        let o = p(&[]).unwrap().unwrap();
        assert_eq!((o.only, o.guest.vm().timeout), (None, Duration::from_secs(600)));
        assert!(p(&["--frobnicate"]).is_err());
        assert!(p(&["--timeout", "ten"]).unwrap_err().to_string().contains("--timeout"));
        assert!(p(&["--only"]).is_err(), "--only needs its checks");
    }
}
