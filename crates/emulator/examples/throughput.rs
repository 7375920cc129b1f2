//! Emulator throughput through the real queue path, against the memory system.
//!
//! Measures on one thread, in one run: 4 KiB reads and writes submitted as
//! SQEs and completed as CQEs with data copied (QD 1 and QD 32), a plain
//! `memcpy` of 4 KiB blocks from random offsets over the same working set,
//! and, when `fio` is installed, fio's psync engine reading 4 KiB at random
//! from a tmpfs file of the same size. Prints one JSON object.
//!
//! ```text
//! cargo run --release -p zns-emulator --example throughput [-- --working-set-mib 64 --seconds 2]
//! ```

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_emulator::harness::Harness;
use zns_emulator::host::{DmaAllocation, HostMemory, ProcessMemory};
use zns_emulator::profile::Profile;
use zns_emulator::Emulator;
use zns_spec::SubmissionEntry;

const BLOCK: usize = 4096;

struct Args {
    working_set: usize,
    seconds: f64,
}

fn args() -> Args {
    let mut a = Args { working_set: 64 << 20, seconds: 2.0 };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--working-set-mib" => a.working_set = v.parse::<usize>().expect("MiB") << 20,
            "--seconds" => a.seconds = v.parse().expect("seconds"),
            _ => panic!("unknown argument {k} (use --working-set-mib N, --seconds S)"),
        }
    }
    a
}

/// A device whose zones are 16 MiB and hold the whole working set.
fn profile(working_set: usize) -> Profile {
    let mut p = Profile::by_name("small").expect("built-in profile");
    let ns = &mut p.namespaces[0];
    ns.metadata_size = 0;
    ns.zone_size = 4096;
    ns.zone_capacity = 4096;
    ns.zones = (working_set / (4096 * BLOCK)).max(1) as u32 + 2;
    ns.max_open = None;
    ns.max_active = None;
    p.controller.max_queue_entries = 1024;
    p
}

fn cmd(op: u8, lba: u64, prp1: u64) -> SubmissionEntry {
    let mut e = SubmissionEntry::new(op, 1);
    e.set_cdw10_11(lba);
    e.prp1 = prp1;
    e
}

/// Runs `f(batch_index)` repeatedly for about `secs`; returns operations per second.
fn rate(secs: f64, qd: usize, mut f: impl FnMut(u64)) -> f64 {
    let deadline = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut batches = 0u64;
    while start.elapsed() < deadline {
        for _ in 0..64 {
            f(batches);
            batches += 1;
        }
    }
    (batches as usize * qd) as f64 / start.elapsed().as_secs_f64()
}

fn run_batch(h: &mut Harness, cmds: impl Iterator<Item = SubmissionEntry>) {
    let mut n = 0;
    for c in cmds {
        h.io.push(&h.memory, c);
        n += 1;
    }
    h.io.ring(&h.ctrl);
    for _ in 0..n {
        let e = h.io.reap(&h.ctrl, &h.memory).expect("synchronous completion");
        assert!(e.status().is_success(), "{}", e.status());
    }
}

fn main() {
    let a = args();
    let ws_blocks = (a.working_set / BLOCK) as u64;
    let zone_blocks = 4096u64;
    let memory = ProcessMemory::new();
    let ctrl = Emulator::with_profile(profile(a.working_set)).build(memory.clone()).expect("build");
    let mut h = Harness::start(ctrl, memory.clone(), 1024).expect("start");
    let bufs: Vec<DmaAllocation> = (0..32).map(|_| h.buffer(BLOCK)).collect();
    for (i, b) in bufs.iter().enumerate() {
        memory.write(b.addr(), &vec![i as u8 + 1; BLOCK]).unwrap();
    }

    // Fill the working set (sequentially, as a zoned device requires).
    for lba in (0..ws_blocks).step_by(32) {
        run_batch(&mut h, (0..32).map(|i| cmd(0x01, lba + i, bufs[i as usize].addr())));
    }

    let mut rng = SmallRng::seed_from_u64(1);
    let read_qd1 = rate(a.seconds, 1, |_| {
        let lba = rng.gen_range(0..ws_blocks);
        run_batch(&mut h, std::iter::once(cmd(0x02, lba, bufs[0].addr())));
    });
    let read_qd32 = rate(a.seconds, 32, |_| {
        let lbas: Vec<u64> = (0..32).map(|_| rng.gen_range(0..ws_blocks)).collect();
        run_batch(&mut h, (0..32).map(|i| cmd(0x02, lbas[i], bufs[i].addr())));
    });

    // Writes go at the write pointer of the zones past the working set,
    // moving on (and resetting) when a zone is full.
    let first = ws_blocks.div_ceil(zone_blocks);
    let spare = profile(a.working_set).namespaces[0].zones as u64 - first;
    let (mut zone, mut off) = (first, 0u64);
    let mut advance = |h: &mut Harness, n: u64| -> u64 {
        if off + n > zone_blocks {
            zone = first + (zone - first + 1) % spare;
            off = 0;
            let mut reset = SubmissionEntry::new(0x79, 1);
            reset.set_cdw10_11(zone * zone_blocks);
            reset.cdw13 = 0x04;
            run_batch(h, std::iter::once(reset));
        }
        off += n;
        zone * zone_blocks + off - n
    };
    let write_qd1 = rate(a.seconds, 1, |_| {
        let lba = advance(&mut h, 1);
        run_batch(&mut h, std::iter::once(cmd(0x01, lba, bufs[0].addr())));
    });
    let write_qd32 = rate(a.seconds, 32, |_| {
        let lba = advance(&mut h, 32);
        run_batch(&mut h, (0..32).map(|i| cmd(0x01, lba + i as u64, bufs[i].addr())));
    });

    // The memory system's limit: 4 KiB copies from random offsets.
    let src = vec![7u8; a.working_set];
    let mut dst = vec![0u8; BLOCK];
    let blocks = a.working_set / BLOCK;
    let memcpy = rate(a.seconds, 1, |_| {
        let off = rng.gen_range(0..blocks) * BLOCK;
        dst.copy_from_slice(&src[off..off + BLOCK]);
        std::hint::black_box(&mut dst);
    });

    let fio = fio_psync(a.working_set, a.seconds);
    let mut out = serde_json::json!({
        "working_set_bytes": a.working_set,
        "read_4k_qd1": read_qd1.round(),
        "read_4k_qd32": read_qd32.round(),
        "write_4k_qd1": write_qd1.round(),
        "write_4k_qd32": write_qd32.round(),
        "memcpy_4k": memcpy.round(),
        "ratio_vs_memcpy": (read_qd32 / memcpy * 1000.0).round() / 1000.0,
        "commands_completed": h.ctrl.commands_completed(),
    });
    if let Some(f) = fio {
        out["fio_psync_randread_4k"] = f.round().into();
        out["ratio_vs_fio"] = ((read_qd32 / f * 1000.0).round() / 1000.0).into();
    }
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// fio psync 4 KiB random reads from a tmpfs file of `size` bytes, in IOPS.
fn fio_psync(size: usize, secs: f64) -> Option<f64> {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let file = format!("{dir}/znskit-throughput-{}", std::process::id());
    let out = std::process::Command::new("fio")
        .args([
            "--name=randread",
            &format!("--filename={file}"),
            &format!("--size={size}"),
            "--rw=randread",
            "--bs=4k",
            "--ioengine=psync",
            "--time_based",
            &format!("--runtime={}", secs.ceil() as u64),
            "--output-format=json",
        ])
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&file);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["jobs"][0]["read"]["iops"].as_f64()
}
