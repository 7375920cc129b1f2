//! `cargo xtask crash`: crash consistency of the FTL under a real
//! filesystem.
//!
//! The host serves a persistent emulated device (`emu:file=`, the `small`
//! profile) through `zns ftl serve`. The guest's kernel attaches it with
//! Debian's `nbd-client`, makes ext4 on it and runs cycles of an
//! fsync-heavy workload: files of random content and length are written
//! and fsynced, each success printed with the content's checksum. At a
//! random moment of each cycle the host kills the server with SIGKILL (no
//! flush, no checkpoint) and starts it again on the same image and port:
//! the FTL recovers from what reached the device. The guest sees its disk
//! fail, drops the mount, attaches the restarted export, mounts (the
//! journal replays), unmounts, runs `e2fsck -f -n` (must be clean),
//! mounts again and checks that every file whose last fsync succeeded
//! reads back with its checksum. Files being rewritten when the server
//! died are not checked: their content is whatever the filesystem
//! promises for unsynced data, but fsck must still be clean.
//!
//! At the end the host stops the server cleanly and runs
//! `zns ftl check --read-all` on the image.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::args::{self, GuestArgs};
use crate::clients::guest_files;
use crate::guest::RESULT_MARKER;
use crate::server::{build_zns, Server};
use crate::vmtest;
use crate::{kernel, run_checked, Error, Result};

/// The guest line that starts a cycle's writes: the host arms its kill.
const ARM: &str = "CRASH-ARM ";

/// The device image's profile: the `small` profile (4 MiB zones) cut to
/// this many zones (384 MiB), so that the cycles' writes exceed the
/// device's capacity and the FTL's garbage collection runs between crashes.
const BASE_PROFILE: &str = "small";
const ZONES: u32 = 96;

/// Megabytes of the file the background writer overwrites in place.
const BIG_MIB: u32 = 160;

/// Kernel modules the guest needs beyond the built-in ones.
const MODULES: &[&str] = &["nbd", "virtio_pci", "virtio_net", "ext4"];
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries.
const GUEST_TOOLS: &[(&str, &str)] =
    &[("nbd-client", "nbd-client"), ("mke2fs", "e2fsprogs"), ("e2fsck", "e2fsprogs")];

/// Crash consistency: ext4 on `zns ftl serve` (NBD), the server killed in each cycle
///
/// Crash consistency through a real filesystem: ext4 in a QEMU guest on the
/// FTL exported by `zns ftl serve` (NBD, the guest kernel's nbd driver), the
/// server killed with SIGKILL at a random moment of each cycle and restarted
/// on the same device image; after each crash the guest remounts, fsck must
/// be clean and every file whose fsync succeeded must read back intact.
#[derive(Debug, Clone, Parser)]
#[command(verbatim_doc_comment, args_override_self = true, mut_arg("kernel", args::cloud_kernel))]
pub struct Args {
    /// Crash cycles.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    cycles: u32,
    /// Seed of the kill moments (default: from the clock; printed).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Earliest kill after a cycle starts writing, milliseconds.
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = 300)]
    min_ms: u64,
    /// Latest kill after a cycle starts writing, milliseconds (at least
    /// --min-ms).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = 3000)]
    max_ms: u64,
    #[command(flatten)]
    guest: GuestArgs,
}

impl Args {
    /// Checks what clap cannot: the kill window is not empty.
    fn check(&self) -> Result<()> {
        if self.min_ms > self.max_ms {
            return Err(Error::new(format!(
                "--min-ms {} is above --max-ms {}",
                self.min_ms, self.max_ms
            )));
        }
        Ok(())
    }
}

/// SplitMix64: the kill moments, reproducible from the seed.
struct Moments {
    state: u64,
    min_ms: u64,
    span: u64,
}

impl Moments {
    fn new(seed: u64, min_ms: u64, max_ms: u64) -> Moments {
        Moments { state: seed, min_ms, span: (max_ms - min_ms).saturating_add(1) }
    }

    fn next(&mut self) -> Duration {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Duration::from_millis(self.min_ms + z % self.span)
    }
}

/// What the killer thread did.
#[derive(Debug, Default)]
struct Kills {
    /// Cycles whose server was killed and restarted.
    done: u32,
    /// Problems (a restart that failed, a cycle armed twice).
    errors: Vec<String>,
}

/// The host side of the cycles: on each `CRASH-ARM N` from the guest,
/// waits the next moment, kills the server and starts it again on the
/// same image and port. Returns the last server, still running.
fn killer(
    mut server: Server,
    zns: &Path,
    device: &str,
    arms: mpsc::Receiver<u32>,
    mut moments: Moments,
) -> (Option<Server>, Kills) {
    let mut kills = Kills::default();
    let listen = format!("127.0.0.1:{}", server.port);
    while let Ok(cycle) = arms.recv() {
        if cycle != kills.done + 1 {
            kills.errors.push(format!("the guest armed cycle {cycle} after {} kills", kills.done));
        }
        let wait = moments.next();
        std::thread::sleep(wait);
        let t = Instant::now();
        if let Err(e) = server.kill() {
            kills.errors.push(format!("cycle {cycle}: {e}"));
            return (None, kills);
        }
        let args = ["--device", device, "ftl", "serve", "--listen", &listen, "--export", "ftl"];
        match Server::start("zns ftl serve", zns, &args) {
            Ok(s) => server = s,
            Err(e) => {
                kills.errors.push(format!("cycle {cycle}: restart after SIGKILL: {e}"));
                return (None, kills);
            }
        }
        kills.done += 1;
        println!(
            "crash: cycle {cycle}: SIGKILL {:.2} s into the writes, serving again after {:.2} s",
            wait.as_secs_f64(),
            t.elapsed().as_secs_f64()
        );
    }
    (Some(server), kills)
}

/// Runs the whole task.
pub fn run(opts: &Args) -> Result<()> {
    opts.check()?;
    let o = &opts.guest.vm();
    let start = Instant::now();
    let seed = opts.seed.unwrap_or_else(vmtest::new_seed);
    println!("crash: {} cycles, seed {seed}", opts.cycles);
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("crash");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    vmtest::ensure_host_tools(o.install, false, &cache)?;
    let files = guest_files(GUEST_TOOLS, o.install)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        kernel::Flavour::Cloud,
        o.kernel.as_deref(),
        o.install,
    )?;
    let modules = kernel::modules_for(&kernel, MODULES, OPTIONAL_MODULES)?;
    let zns = build_zns(&root, &target, o.install)?;

    let image = dir.join("ftl.img");
    let _ = fs::remove_file(&image);
    let device = format!("emu:file={}", image.display());
    let image_arg = image.display().to_string();
    let profile = cut_profile(&zns, &dir)?;
    let profile_arg = profile.display().to_string();
    run_checked(
        Command::new(&zns).args(["emu", "create", &image_arg, "--profile", &profile_arg]),
        "zns emu create",
    )?;
    run_checked(Command::new(&zns).args(["--device", &device, "ftl", "format"]), "zns ftl format")?;
    let server = Server::start(
        "zns ftl serve",
        &zns,
        &["--device", &device, "ftl", "serve", "--listen", "127.0.0.1:0", "--export", "ftl"],
    )?;
    let port = server.port;

    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let nbd_client =
        vmtest::which("nbd-client").ok_or_else(|| Error::new("nbd-client is not installed"))?;
    let script = init_script(&names, port, &mke2fs, &nbd_client, opts.cycles);
    let initramfs = vmtest::pack_initramfs(&dir, &[], &modules, &script, &files)?;
    let devices = qemu_args();
    let log = dir.join("guest.log");

    let (tx, rx) = mpsc::channel::<u32>();
    let moments = Moments::new(seed, opts.min_ms, opts.max_ms);
    let killer_zns = zns.clone();
    let killer_device = device.clone();
    let killer =
        std::thread::spawn(move || killer(server, &killer_zns, &killer_device, rx, moments));
    let outcome = vmtest::boot_watched(&kernel, &initramfs, &devices, o, &log, &mut |line| {
        if let Some(n) = line.strip_prefix(ARM).and_then(|n| n.trim().parse().ok()) {
            let _ = tx.send(n);
        }
    });
    drop(tx);
    let (server, kills) =
        killer.join().map_err(|_| Error::new("the thread that kills the server panicked"))?;
    let mut failures = kills.errors.clone();
    match server.map(Server::stop) {
        Some(Ok(s)) if s.contains(" 0 closed for protocol errors") => {}
        Some(Ok(s)) => failures.push(format!("zns ftl serve saw errors: {}", s.trim())),
        Some(Err(e)) => failures.push(e.to_string()),
        None => failures.push("no server was running at the end".into()),
    }
    let outcome = outcome?;
    failures.extend(outcome.failures.iter().cloned());
    if kills.done != opts.cycles {
        failures.push(format!("{} of {} cycles were crashed", kills.done, opts.cycles));
    }
    let check =
        Command::new(&zns).args(["--device", &device, "ftl", "check", "--read-all"]).output();
    match check {
        Ok(c) if c.status.success() => {
            println!(
                "crash: zns ftl check --read-all: {}",
                String::from_utf8_lossy(&c.stdout).trim()
            )
        }
        Ok(c) => failures.push(format!(
            "zns ftl check --read-all failed: {}{}",
            String::from_utf8_lossy(&c.stdout),
            String::from_utf8_lossy(&c.stderr)
        )),
        Err(e) => failures.push(format!("zns ftl check: {e}")),
    }
    println!();
    for s in &outcome.summaries {
        println!("crash: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &failures {
        println!("crash: {}", f.trim_start_matches("vmtest: "));
    }
    let pass = outcome.result == Some(true) && failures.is_empty();
    println!(
        "crash: {} ({} cycles, seed {seed}) in {:.1} s (log {})",
        if pass { "PASS" } else { "FAIL" },
        kills.done,
        start.elapsed().as_secs_f64(),
        log.display()
    );
    if pass {
        let _ = fs::remove_file(&image);
        Ok(())
    } else {
        Err(Error::new(format!("crash consistency failed (image kept: {})", image.display())))
    }
}

/// Writes the device's profile ([`BASE_PROFILE`] with [`ZONES`] zones)
/// into `dir` and returns its path.
fn cut_profile(zns: &Path, dir: &Path) -> Result<std::path::PathBuf> {
    let out = Command::new(zns)
        .args(["emu", "show-profile", BASE_PROFILE])
        .output()
        .map_err(|e| Error::new(format!("zns emu show-profile: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("\nzones = ") {
        return Err(Error::new(format!("zns emu show-profile {BASE_PROFILE} gave no zone count")));
    }
    let cut: String = text
        .lines()
        .map(|l| match l.starts_with("zones = ") {
            true => format!("zones = {ZONES}\n"),
            false if l.starts_with("name = ") => "name = \"small-crash\"\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    let path = dir.join("profile.toml");
    fs::write(&path, cut).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// QEMU arguments: user-mode networking only (the host's loopback is
/// 10.0.2.2 in the guest; the disk is attached by the guest's kernel).
fn qemu_args() -> Vec<String> {
    ["-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The guest's `/init`: attach, mkfs, then `cycles` crash cycles.
/// `mke2fs` and `nbd_client` are Debian's programs' paths (busybox's
/// shell prefers its own applets).
pub fn init_script(
    modules: &[String],
    port: u16,
    mke2fs: &Path,
    nbd_client: &Path,
    cycles: u32,
) -> String {
    let (mke2fs, nbd) = (mke2fs.display(), nbd_client.display());
    let mut s = crate::guest::shell_start(
        "ext4 on the FTL over NBD, the server killed at random moments; fsck and fsynced files \
         checked after each crash.",
    );
    s.push_str("mkdir -p /mnt /tmp/sums\n");
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    s.push_str(&format!(
        r#"i=0
while [ $i -lt 100 ] && [ ! -e /sys/class/net/eth0 ]; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
# Attaches the export to $1, retrying while the server restarts.
attach() {{
    i=0
    until {nbd} 10.0.2.2 {port} $1 -N ftl -b 4096 -t 20 >/tmp/nbd.out 2>&1; do
        i=$((i + 1))
        if [ $i -ge 300 ]; then cat /tmp/nbd.out; return 1; fi
        sleep 0.1
    done
    i=0
    while [ $i -lt 50 ] && [ "$(cat /sys/block/$(basename $1)/size)" = 0 ]; do sleep 0.1; i=$((i + 1)); done
}}
rand() {{ od -An -N2 -tu2 /dev/urandom | tr -d ' '; }}
DEV=/dev/nbd0
run attach attach $DEV
say "$DEV: $(cat /sys/block/nbd0/size) sectors"
run mkfs-ext4 {mke2fs} -t ext4 -F -q -E lazy_itable_init=0,lazy_journal_init=0 $DEV
run mount mount -t ext4 $DEV /mnt
mkdir -p /mnt/d
run fill dd if=/dev/zero of=/mnt/big bs=1M count={BIG_MIB} conv=fsync
c=1
while [ $fail -eq 0 ] && [ $c -le {cycles} ]; do
    echo "{ARM}$c"
    # In the background, direct overwrites of the big file: the device
    # fills and the FTL collects garbage while the fsyncs go on.
    (while dd if=/dev/zero of=/mnt/big bs=1M count=2 seek=$(( $(rand) % ({BIG_MIB} - 1) )) conv=notrunc oflag=direct 2>/dev/null; do echo >> /tmp/bg; done) &
    bg=$!
    n=0
    while :; do
        f=f$(( $(rand) % 48 ))
        head -c $(( ($(rand) % 32 + 1) * 4096 )) /dev/urandom > /tmp/blob
        sum=$(md5sum < /tmp/blob | cut -d' ' -f1)
        rm -f /tmp/sums/$f
        dd if=/tmp/blob of=/mnt/d/$f bs=65536 conv=fsync 2>/tmp/dd.out || break
        echo "$sum  /mnt/d/$f" > /tmp/sums/$f
        echo "fsync-ok $c $f $sum"
        n=$((n + 1))
        if [ $n -ge 20000 ]; then fail=1; say "FAILED cycle $c: no crash after $n fsyncs"; break; fi
    done
    kill $bg 2>/dev/null; wait $bg 2>/dev/null
    [ $fail -ne 0 ] && break
    # Only the server's death may end the writes: the disk must be dead.
    if dd if=$DEV of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
        fail=1; say "FAILED cycle $c: a write failed with the disk alive: $(cat /tmp/dd.out)"; break
    fi
    say "cycle $c: $n fsyncs acknowledged, then the disk failed"
    umount /mnt 2>/dev/null || umount -l /mnt
    {nbd} -d $DEV >/dev/null 2>&1
    DEV=/dev/nbd$((c % 8))
    if ! attach $DEV; then fail=1; say "FAILED cycle $c: cannot attach the restarted export"; break; fi
    mount -t ext4 $DEV /mnt || {{ fail=1; say "FAILED cycle $c: mount after the crash"; break; }}
    umount /mnt
    if ! e2fsck -f -n $DEV >/tmp/fsck.out 2>&1; then
        fail=1; say "FAILED cycle $c: e2fsck -f -n is not clean"; cat /tmp/fsck.out; break
    fi
    mount -t ext4 $DEV /mnt || {{ fail=1; say "FAILED cycle $c: mount after fsck"; break; }}
    files=$(ls /tmp/sums | wc -l)
    if [ $files -gt 0 ] && ! cat /tmp/sums/* | md5sum -c >/tmp/check.out 2>&1; then
        fail=1; say "FAILED cycle $c: fsynced files differ:"; grep -v ': OK$' /tmp/check.out; break
    fi
    say "cycle $c: journal replayed, fsck clean, $files fsynced files intact"
    c=$((c + 1))
done
say "background overwrites: $(( $(cat /tmp/bg 2>/dev/null | wc -l) * 2 )) MiB acknowledged"
run umount umount /mnt
run fsck-final e2fsck -f -n $DEV
{nbd} -d $DEV >/dev/null 2>&1
if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
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
    fn the_script_arms_each_cycle_and_checks_after_it() {
        let s = init_script(
            &["nbd.ko".into()],
            10809,
            Path::new("/usr/sbin/mke2fs"),
            Path::new("/usr/sbin/nbd-client"),
            7,
        );
        assert!(s.starts_with("#!/bin/sh\n") && s.trim_end().ends_with("poweroff -f"));
        assert!(s.contains("insmod /lib/modules/nbd.ko"));
        assert!(s.contains("/usr/sbin/nbd-client 10.0.2.2 10809 $1 -N ftl -b 4096 -t 20"));
        assert!(s.contains("[ $c -le 7 ]") && s.contains("echo \"CRASH-ARM $c\""));
        let (w, f, m) = (
            s.find("conv=fsync").unwrap(),
            s.find("e2fsck -f -n $DEV >").unwrap(),
            s.find("md5sum -c").unwrap(),
        );
        assert!(w < f && f < m);
    }

    #[test]
    fn kill_moments_follow_the_seed_within_bounds() {
        let mut a = Moments::new(7, 300, 3000);
        let mut b = Moments::new(7, 300, 3000);
        let xs: Vec<_> = (0..100).map(|_| a.next()).collect();
        assert_eq!(xs, (0..100).map(|_| b.next()).collect::<Vec<_>>());
        assert!(xs.iter().all(|d| (300..=3000).contains(&(d.as_millis() as u64))));
        assert!(xs.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn options_reject_nonsense() {
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        let e = p(&["--cycles", "0"]).unwrap_err().to_string();
        assert!(e.contains("--cycles"), "{e}");
        assert!(p(&["--cycles", "many"]).is_err() && p(&["--seed", "-1"]).is_err());
        assert!(p(&["--min-ms", "soon"]).is_err() && p(&["--max-ms", "1.5"]).is_err());
        let e = p(&["--min-ms", "10", "--max-ms", "5"]).unwrap().unwrap().check().unwrap_err();
        assert_eq!(e.to_string(), "--min-ms 10 is above --max-ms 5");
        let o = p(&["--min-ms", "5", "--max-ms", "5"]).unwrap().unwrap();
        assert!(o.check().is_ok(), "a window of one moment");
        let o = p(&["--cycles", "3", "--seed", "7", "--memory", "2G"]).unwrap().unwrap();
        assert_eq!((o.cycles, o.seed, o.guest.vm().memory.as_str()), (3, Some(7), "2G"));
        let o = p(&[]).unwrap().unwrap();
        assert_eq!((o.cycles, o.seed, o.min_ms, o.max_ms), (20, None, 300, 3000));
        assert_eq!(o.guest.vm().timeout, Duration::from_secs(900));
        assert!(o.check().is_ok());
    }
}
