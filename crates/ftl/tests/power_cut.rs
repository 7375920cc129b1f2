//! Power-cut tests on the emulator.
//!
//! Each cycle runs random writes, discards and flushes (the GC thread
//! working beside them) until a [`PowerSwitch`] armed with a random
//! command budget stops all I/O — anywhere: inside garbage collection, a
//! log write or a checkpoint — then cuts power in the emulator (dropping
//! whatever was not durable, tearing multi-block writes), brings the
//! controller back up, recovers the FTL and checks every block:
//! - a block reads back its value as of the last completed flush, or a
//!   value written (acknowledged or attempted) after it;
//! - a block never holds another block's data;
//! - nothing panics, and recovery never reports corruption.
//!
//! On devices whose blocks carry 16-byte tags, recovery also adopts blocks
//! written after the last durable log page; the cycles check that it
//! happens, and the tests at the end pin down what it may and may not
//! adopt.
//!
//! `cargo test` runs a short version; the soak runs 10,000 cycles:
//! `cargo test --release -p zns-ftl -- --ignored soak`.

mod common;

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_device::uri::DeviceUri;
use zns_device::{DriverDevice, ZonedDevice};
use zns_ftl::testkit::{CrashDevice, PowerSwitch};
use zns_ftl::{Ftl, FtlConfig, FtlError, StreamLayout, WriteMode, ZrwaUse};

/// What a block may hold after a power cut.
#[derive(Debug, Clone, Default)]
struct Expect {
    /// The value as of the last completed flush (`None` = zeros).
    stable: Option<u64>,
    /// Values written or discarded since (attempts included).
    since: Vec<Option<u64>>,
    /// The value a live read must return.
    current: Option<u64>,
}

struct Harness {
    uri: String,
    emu: Arc<zns_emulator::Controller>,
    memory: Arc<zns_emulator::host::ProcessMemory>,
    dev: Option<Arc<dyn ZonedDevice>>,
    model: Vec<Expect>,
    /// Blocks written or discarded since the last check.
    touched: std::collections::BTreeSet<u64>,
    version: u64,
    formatted: bool,
    /// Blocks recoveries adopted by their tags.
    rescued: u64,
    /// Writes go sequentially from here (wrapping), not at random:
    /// overwrites empty whole zones, which garbage collection reclaims
    /// several at a time.
    stream: Option<u64>,
}

impl Harness {
    fn new(uri: &str) -> Harness {
        let DeviceUri::Emulator(e) = uri.parse::<DeviceUri>().unwrap() else { panic!("{uri}") };
        let d = DriverDevice::open_emulator(&e, uri).unwrap();
        let emu = Arc::clone(d.emulator().unwrap());
        let memory = Arc::clone(d.host_memory().unwrap());
        Harness {
            uri: uri.to_string(),
            emu,
            memory,
            dev: Some(Arc::new(d)),
            model: Vec::new(),
            touched: Default::default(),
            version: 0,
            formatted: false,
            rescued: 0,
            stream: None,
        }
    }

    /// Brings the FTL up (format the first time, recover afterwards) and
    /// checks the blocks touched since the last check, or all with `full`.
    fn up(&mut self, config: &FtlConfig, switch: &Arc<PowerSwitch>, full: bool) -> Ftl {
        let dev = self.dev.clone().expect("device is up");
        let crash: Arc<dyn ZonedDevice> = Arc::new(CrashDevice::new(dev, Arc::clone(switch)));
        if !self.formatted {
            let ftl = Ftl::format(crash, config.clone()).unwrap();
            self.model = vec![Expect::default(); ftl.capacity_blocks() as usize];
            self.formatted = true;
            return ftl;
        }
        let ftl = match Ftl::open(crash, config.clone()) {
            Ok(f) => f,
            Err(e) => panic!("recovery failed: {e}"),
        };
        self.rescued += ftl.stats().rescued_blocks;
        let report = ftl.check(false).unwrap();
        assert!(report.is_ok(), "after recovery: {:?}", report.problems);
        self.verify(&ftl, full);
        ftl
    }

    fn verify(&mut self, ftl: &Ftl, full: bool) {
        let bs = ftl.block_size() as usize;
        let n = ftl.capacity_blocks();
        assert_eq!(n as usize, self.model.len());
        let step = 64u64;
        let mut buf = vec![0u8; step as usize * bs];
        let ranges: Vec<(u64, u64)> = if full {
            (0..n).step_by(step as usize).map(|l| (l, step.min(n - l))).collect()
        } else {
            self.touched.iter().map(|&l| (l, 1)).collect()
        };
        self.touched.clear();
        for (lba, k) in ranges {
            ftl.read(lba, &mut buf[..k as usize * bs]).unwrap();
            for i in 0..k {
                let l = lba + i;
                let got = common::decode(&buf[i as usize * bs..(i as usize + 1) * bs]);
                if let Some((owner, _)) = got {
                    assert_eq!(owner, l, "block {l} holds block {owner}'s data");
                }
                let got = got.map(|(_, v)| v);
                let e = &mut self.model[l as usize];
                assert!(
                    got == e.stable || e.since.contains(&got),
                    "block {l} reads version {got:?}; flushed {:?}, written since {:?}",
                    e.stable,
                    e.since
                );
                *e = Expect { stable: got, since: Vec::new(), current: got };
            }
        }
    }

    /// Random operations until one fails or `ops` are done.
    fn run(&mut self, ftl: &Ftl, rng: &mut SmallRng, ops: usize) -> Option<FtlError> {
        let bs = ftl.block_size() as usize;
        let n = ftl.capacity_blocks();
        let mut buf = vec![0u8; 8 * bs];
        for _ in 0..ops {
            let k = if rng.gen_bool(0.75) { 1 } else { rng.gen_range(1..=8u64) }.min(n);
            let lba = if let Some(next) = self.stream.as_mut() {
                let at = if *next + k > n { 0 } else { *next };
                *next = at + k;
                at
            } else if rng.gen_bool(0.7) {
                rng.gen_range(0..(n / 4).max(1)).min(n - k)
            } else {
                rng.gen_range(0..=n - k)
            };
            // A stream only writes, with a flush now and then.
            let op = match self.stream {
                Some(_) if rng.gen_bool(0.98) => 0,
                Some(_) => 99,
                None => rng.gen_range(0..100),
            };
            match op {
                0..=69 => {
                    self.version += 1;
                    let v = self.version;
                    for i in 0..k {
                        common::fill(&mut buf[i as usize * bs..(i as usize + 1) * bs], lba + i, v);
                        self.model[(lba + i) as usize].since.push(Some(v));
                        self.touched.insert(lba + i);
                    }
                    if let Err(e) = ftl.write(lba, &buf[..k as usize * bs]) {
                        return Some(e);
                    }
                    for i in lba..lba + k {
                        self.model[i as usize].current = Some(v);
                    }
                }
                70..=84 => {
                    if let Err(e) = ftl.read(lba, &mut buf[..k as usize * bs]) {
                        return Some(e);
                    }
                    for i in 0..k {
                        let got = common::decode(&buf[i as usize * bs..(i as usize + 1) * bs]);
                        let want = self.model[(lba + i) as usize].current;
                        assert_eq!(got.map(|g| g.1), want, "live read of block {}", lba + i);
                    }
                }
                85..=89 => {
                    for i in lba..lba + k {
                        self.model[i as usize].since.push(None);
                        self.touched.insert(i);
                    }
                    if let Err(e) = ftl.discard(lba, k) {
                        return Some(e);
                    }
                    for i in lba..lba + k {
                        self.model[i as usize].current = None;
                    }
                }
                _ => {
                    if let Err(e) = ftl.flush() {
                        return Some(e);
                    }
                    for e in self.model.iter_mut() {
                        e.stable = e.current;
                        e.since.clear();
                    }
                }
            }
        }
        None
    }

    /// Cuts power: the FTL is gone, the emulator drops what was not
    /// durable, the controller comes back.
    fn cut(&mut self, ftl: Ftl, switch: &PowerSwitch, seed: u64) {
        switch.arm(0);
        drop(ftl);
        self.emu.power_cut(seed);
        self.dev = None;
        let d =
            DriverDevice::from_emulator(Arc::clone(&self.emu), Arc::clone(&self.memory), &self.uri)
                .unwrap();
        self.dev = Some(Arc::new(d));
    }
}

/// `cycles` power cuts on a fresh `uri` device; every block is checked
/// after every `full_every`-th cut, the blocks written since the previous
/// check after the others. Returns the blocks recoveries adopted by their
/// tags.
fn cycles(
    uri: &str,
    config: FtlConfig,
    cycles: usize,
    seed: u64,
    max_budget: u64,
    ops: usize,
    full_every: usize,
) -> u64 {
    cycles_mixed(uri, &[config], cycles, seed, max_budget, ops, full_every)
}

/// [`cycles`], mount `i` with `configs[i % configs.len()]`.
fn cycles_mixed(
    uri: &str,
    configs: &[FtlConfig],
    cycles: usize,
    seed: u64,
    max_budget: u64,
    ops: usize,
    full_every: usize,
) -> u64 {
    cycles_in(Harness::new(uri), configs, cycles, seed, max_budget, ops, full_every)
}

/// [`cycles_mixed`] with harness `h`.
fn cycles_in(
    mut h: Harness,
    configs: &[FtlConfig],
    cycles: usize,
    seed: u64,
    max_budget: u64,
    ops: usize,
    full_every: usize,
) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut failures = 0usize;
    for cycle in 0..cycles {
        let switch = PowerSwitch::new();
        let config = &configs[cycle % configs.len()];
        let ftl = h.up(config, &switch, cycle % full_every == 0);
        switch.arm(rng.gen_range(1..=max_budget));
        if let Some(e) = h.run(&ftl, &mut rng, ops) {
            failures += 1;
            assert!(
                matches!(e, FtlError::Device { .. } | FtlError::Failed(_)),
                "cycle {cycle}: unexpected error {e}"
            );
        }
        h.cut(ftl, &switch, seed ^ cycle as u64);
    }
    // Most cycles should end in the middle of something.
    assert!(failures * 2 >= cycles, "only {failures} of {cycles} cycles were cut short");
    let switch = PowerSwitch::new();
    let ftl = h.up(&configs[0], &switch, true);
    ftl.close().unwrap();
    h.rescued
}

#[test]
fn power_cuts_tiny_default() {
    let rescued = cycles("emu:tiny,metadata=16", FtlConfig::default(), 200, 1, 400, 300, 1);
    assert!(rescued > 0, "no recovery adopted a block by its tag");
}

#[test]
fn power_cuts_tiny_single_log_append() {
    let c = FtlConfig {
        streams: StreamLayout::Single,
        write_mode: WriteMode::Append,
        ..FtlConfig::default()
    };
    let rescued = cycles("emu:tiny,metadata=16", c, 100, 2, 400, 300, 1);
    assert!(rescued > 0, "no recovery adopted a block by its tag");
}

/// Sequential overwrites: every zone the stream fills empties an older
/// one, and garbage collection reclaims the emptied zones together, ahead
/// of need, under one durable log write; cuts land among those resets.
#[test]
fn power_cuts_tiny_sequential_stream() {
    let mut h = Harness::new("emu:tiny,metadata=16,zones=64");
    h.stream = Some(0);
    // Spare enough that zones empty before the watermarks force a
    // collection.
    let c = FtlConfig { op: 0.5, ..FtlConfig::default() };
    cycles_in(h, &[c], 100, 5, 400, 400, 1);
}

#[test]
fn power_cuts_tiny_untagged() {
    assert_eq!(cycles("emu:tiny", FtlConfig::default(), 60, 4, 400, 300, 1), 0);
}

#[test]
fn power_cuts_small_without_copy() {
    let c = FtlConfig { use_copy: false, op: 0.07, ..FtlConfig::default() };
    cycles("emu:small", c, 6, 3, 30_000, 30_000, 2);
}

/// The metadata log in zone random write areas: a cut loses every
/// uncommitted window, and what was flushed must survive it. With a unit
/// of four blocks, commits pad (recovery skips the blank blocks); with
/// one, they never do.
fn zrwa_cycles(uri: &str, n: usize, seed: u64) {
    let c = FtlConfig { zrwa: ZrwaUse::On, ..FtlConfig::default() };
    let rescued = cycles(uri, c.clone(), n, seed, 400, 300, 1);
    assert!(rescued > 0, "no recovery adopted a block by its tag");
    let mut h = Harness::new(uri);
    let ftl = h.up(&c, &PowerSwitch::new(), false);
    put(&ftl, 1, 1);
    ftl.flush().unwrap();
    let s = ftl.stats();
    assert!(s.zrwa_commits > 0, "the log never committed a ZRWA: {s:?}");
    ftl.close().unwrap();
}

#[test]
fn power_cuts_tiny_zrwa() {
    zrwa_cycles("emu:tiny,metadata=16,zrwa=8/4/2", 120, 5);
    zrwa_cycles("emu:tiny,metadata=16,zrwa=4/1/1", 60, 6);
}

/// Mounts with and without ZRWAs take turns on one device: a zone the log
/// wrote plainly to a write pointer off the flush granularity gets no ZRWA
/// and is written on plainly (and flushed), the next zone gets one.
#[test]
fn power_cuts_tiny_zrwa_on_and_off() {
    let on = FtlConfig { zrwa: ZrwaUse::On, ..FtlConfig::default() };
    let off = FtlConfig { zrwa: ZrwaUse::Off, ..FtlConfig::default() };
    let configs = [off, on.clone(), on];
    cycles_mixed("emu:tiny,metadata=16,zrwa=8/4/2", &configs, 90, 8, 400, 300, 1);
}

#[test]
#[ignore = "long: cargo test --release -p zns-ftl -- --ignored soak"]
fn power_cut_soak_zrwa() {
    zrwa_cycles("emu:tiny,metadata=16,zrwa=8/4/2", 3000, 14);
    zrwa_cycles("emu:tiny,metadata=16,zrwa=16/8/1", 1000, 15);
}

/// Writes block `l` of `ftl` at `version`.
fn put(ftl: &Ftl, l: u64, version: u64) {
    let mut b = vec![0u8; ftl.block_size() as usize];
    common::fill(&mut b, l, version);
    ftl.write(l, &b).unwrap();
}

/// The version block `l` of `ftl` holds.
fn get(ftl: &Ftl, l: u64) -> Option<u64> {
    let mut b = vec![0u8; ftl.block_size() as usize];
    ftl.read(l, &mut b).unwrap();
    common::decode(&b).map(|(owner, v)| {
        assert_eq!(owner, l, "block {l} holds block {owner}'s data");
        v
    })
}

/// Flushed and unflushed writes and discards, the device's cache flushed
/// behind the FTL's back (so every write survives the cut), then a power
/// cut: what recovery makes of it, with and without the rescan.
fn rescue_scenario(rescan: bool) -> (Vec<Option<u64>>, u64) {
    let mut h = Harness::new("emu:small");
    let config = FtlConfig { rescan, ..FtlConfig::default() };
    let switch = PowerSwitch::new();
    let ftl = h.up(&config, &switch, false);
    for l in 0..100 {
        put(&ftl, l, 1);
    }
    // Logged: a write then a discard of the same block; a write replaced
    // by a later one.
    put(&ftl, 300, 6);
    ftl.discard(300, 1).unwrap();
    put(&ftl, 400, 7);
    put(&ftl, 400, 8);
    ftl.flush().unwrap();
    // Never flushed by the FTL: overwrites, new blocks, a block written
    // twice, a block overwritten and then discarded.
    for l in 0..50 {
        put(&ftl, l, 2);
    }
    for l in 200..210 {
        put(&ftl, l, 3);
    }
    put(&ftl, 500, 4);
    put(&ftl, 500, 5);
    put(&ftl, 400, 9);
    ftl.discard(400, 1).unwrap();
    h.dev.as_ref().unwrap().queue(1).unwrap().flush().unwrap();
    h.cut(ftl, &switch, 7);
    let ftl = h.up(&config, &PowerSwitch::new(), false);
    let rescued = ftl.stats().rescued_blocks;
    // The zones being written when power failed are written on, not
    // padded out.
    assert_eq!(ftl.stats().zone_finishes, 0);
    assert!(ftl.stats().resumed_zones > 0);
    let before = ftl.stats().pools;
    for l in 600..700 {
        put(&ftl, l, 10);
    }
    assert_eq!(ftl.stats().pools.free, before.free, "a fresh zone was opened");
    let got = [0, 49, 50, 99, 200, 209, 210, 300, 400, 500].iter().map(|&l| get(&ftl, l)).collect();
    ftl.close().unwrap();
    (got, rescued)
}

#[test]
fn recovery_adopts_unflushed_blocks_the_device_kept() {
    let (got, rescued) = rescue_scenario(true);
    // Block 400: its discard was never logged, so the write after the
    // flush is the newest version the device holds.
    let want = [Some(2), Some(2), Some(1), Some(1), Some(3), Some(3), None, None, Some(9), Some(5)];
    assert_eq!(got, want.to_vec());
    assert_eq!(rescued, 50 + 10 + 2);
}

#[test]
fn without_the_rescan_recovery_keeps_what_the_log_names() {
    let (got, rescued) = rescue_scenario(false);
    let want = [Some(1), Some(1), Some(1), Some(1), None, None, None, None, Some(8), None];
    assert_eq!(got, want.to_vec());
    assert_eq!(rescued, 0);
}

#[test]
#[ignore = "long: cargo test --release -p zns-ftl -- --ignored soak"]
fn power_cut_soak_10000_cycles() {
    cycles("emu:tiny,metadata=16", FtlConfig::default(), 5000, 11, 600, 400, 1);
    let c = FtlConfig {
        streams: StreamLayout::Single,
        write_mode: WriteMode::Append,
        ..FtlConfig::default()
    };
    cycles("emu:tiny,metadata=16", c, 4000, 12, 600, 400, 1);
    let c = FtlConfig { use_copy: false, ..FtlConfig::default() };
    cycles("emu:small", c, 1000, 13, 20_000, 20_000, 50);
}
