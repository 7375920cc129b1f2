//! Model-based randomized tests: the FTL against an in-memory block device.

mod common;

use std::sync::Arc;

use common::{compare_all, device, random_ops};
use zns_ftl::{
    BlockDevice, Ftl, FtlConfig, FtlError, MemoryBlockDevice, StreamLayout, VictimPolicy,
    WriteMode, ZrwaUse,
};

/// Returns the statistics of the reopened FTL.
fn run_single(uri: &str, config: FtlConfig, ops: usize, seed: u64) -> zns_ftl::FtlStats {
    let dev = device(uri);
    let ftl = Ftl::format(Arc::clone(&dev), config.clone()).unwrap();
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    random_ops(&ftl, &model, 0..ftl.capacity_blocks(), ops, seed, true);
    compare_all(&ftl, &model);
    let s = ftl.stats();
    assert!(s.user_blocks_written > 0);
    assert!(s.waf >= 1.0, "{s:?}");
    ftl.close().unwrap();
    // A clean shutdown loses nothing.
    let ftl = Ftl::open(dev, config).unwrap();
    compare_all(&ftl, &model);
    random_ops(&ftl, &model, 0..ftl.capacity_blocks(), ops / 4, seed + 1, false);
    compare_all(&ftl, &model);
    ftl.stats()
}

#[test]
fn tiny_device_with_heavy_gc() {
    run_single("emu:tiny", FtlConfig::default(), 6000, 1);
}

#[test]
fn small_device_default_config() {
    run_single("emu:small", FtlConfig::default(), 3000, 2);
}

#[test]
fn every_victim_policy() {
    for (i, policy) in VictimPolicy::ALL.into_iter().enumerate() {
        let c = FtlConfig { policy, ..FtlConfig::default() };
        run_single("emu:tiny", c, 3000, 10 + i as u64);
    }
}

#[test]
fn single_log_and_append_mode() {
    let single = FtlConfig { streams: StreamLayout::Single, ..FtlConfig::default() };
    run_single("emu:tiny", single.clone(), 3000, 20);
    let append = FtlConfig { write_mode: WriteMode::Append, ..FtlConfig::default() };
    run_single("emu:tiny", append.clone(), 3000, 21);
    run_single("emu:tiny", FtlConfig { write_mode: WriteMode::Append, ..single }, 3000, 22);
}

#[test]
fn metadata_log_in_zone_random_write_areas() {
    let on = FtlConfig { zrwa: ZrwaUse::On, ..FtlConfig::default() };
    for uri in ["emu:tiny,zrwa=8/4/2", "emu:small,zrwa=64/8/3", "emu:tiny,zrwa=2/1/1"] {
        let s = run_single(uri, on.clone(), 3000, 40);
        assert!(s.zrwa_commits > 0, "{uri}: {s:?}");
    }
    // ZRWAs the log cannot use (zone capacity 48 is not whole units of
    // 32): plain writes, as without them.
    let s = run_single("emu:tiny,zrwa=32/32/1", on, 2000, 42);
    assert_eq!((s.zrwa_commits, s.zrwa_pad_blocks), (0, 0));
    // The default uses them only where commits need no padding.
    let s = run_single("emu:tiny,zrwa=8/1/1", FtlConfig::default(), 2000, 43);
    assert!(s.zrwa_commits > 0 && s.zrwa_pad_blocks == 0, "{s:?}");
    let s = run_single("emu:tiny,zrwa=8/4/1", FtlConfig::default(), 2000, 44);
    assert_eq!(s.zrwa_commits, 0);
}

#[test]
fn read_and_write_without_copy() {
    run_single("emu:tiny", FtlConfig { use_copy: false, ..FtlConfig::default() }, 3000, 30);
}

#[test]
fn large_requests_cross_zones_and_mappings() {
    let ftl = Ftl::format(device("emu:small"), FtlConfig::default()).unwrap();
    let bs = ftl.block_size() as usize;
    let model = MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks());
    // 3000 blocks: several zones of 960 and several transfers of 64.
    let n = 3000usize;
    let mut buf = vec![0u8; n * bs];
    for i in 0..n {
        common::fill(&mut buf[i * bs..(i + 1) * bs], 100 + i as u64, 1);
    }
    ftl.write(100, &buf).unwrap();
    model.write(100, &buf).unwrap();
    // Scatter the mapping, then read it back in one request.
    for i in (0..n).step_by(7) {
        common::fill(&mut buf[..bs], 100 + i as u64, 2);
        ftl.write(100 + i as u64, &buf[..bs]).unwrap();
        model.write(100 + i as u64, &buf[..bs]).unwrap();
    }
    ftl.discard(500, 33).unwrap();
    model.discard(500, 33).unwrap();
    let mut a = vec![0u8; (n + 200) * bs];
    let mut b = vec![0u8; (n + 200) * bs];
    ftl.read(0, &mut a).unwrap();
    model.read(0, &mut b).unwrap();
    assert!(a == b);
    compare_all(&ftl, &model);
}

#[test]
fn bad_requests_are_refused() {
    let ftl = Ftl::format(device("emu:tiny"), FtlConfig::default()).unwrap();
    let bs = ftl.block_size() as usize;
    let cap = ftl.capacity_blocks();
    assert!(matches!(ftl.write(cap, &vec![0; bs]), Err(FtlError::OutOfRange { .. })));
    assert!(matches!(ftl.write(0, &vec![0; bs + 1]), Err(FtlError::Misaligned { .. })));
    assert!(matches!(ftl.read(cap - 1, &mut vec![0; 2 * bs]), Err(FtlError::OutOfRange { .. })));
    assert!(matches!(ftl.discard(cap, 1), Err(FtlError::OutOfRange { .. })));
    ftl.write(0, &[]).unwrap();
    let bad = FtlConfig { op: -1.0, ..FtlConfig::default() };
    assert!(matches!(Ftl::format(device("emu:tiny"), bad), Err(FtlError::Config(_))));
    assert!(matches!(
        Ftl::open(device("emu:tiny"), FtlConfig::default()),
        Err(FtlError::NotFormatted)
    ));
}

#[test]
fn filling_the_whole_device_repeatedly_never_runs_out_of_space() {
    let ftl = Ftl::format(device("emu:tiny"), FtlConfig::default()).unwrap();
    let bs = ftl.block_size() as usize;
    let cap = ftl.capacity_blocks();
    let buf = vec![0x5Au8; cap as usize * bs];
    for pass in 0..20 {
        if let Err(e) = ftl.write(0, &buf) {
            panic!("pass {pass}: {e}: {:#?}", ftl.stats());
        }
    }
    let s = ftl.stats();
    assert_eq!(s.valid_blocks, cap);
    assert!(s.gc_victims > 0, "{s:?}");
}

fn threads(config: FtlConfig, uri: &str, nthreads: u64, ops: usize) {
    let ftl = Arc::new(Ftl::format(device(uri), config).unwrap());
    let model = Arc::new(MemoryBlockDevice::new(ftl.block_size(), ftl.capacity_blocks()));
    let per = ftl.capacity_blocks() / nthreads;
    let handles: Vec<_> = (0..nthreads)
        .map(|t| {
            let (ftl, model) = (Arc::clone(&ftl), Arc::clone(&model));
            std::thread::spawn(move || {
                random_ops(ftl.as_ref(), &model, t * per..(t + 1) * per, ops, 100 + t, t % 2 == 0)
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    compare_all(ftl.as_ref(), &model);
    let s = ftl.stats();
    assert!(s.gc_victims > 0, "{s:?}");
}

#[test]
fn several_threads_plain_writes() {
    let c = FtlConfig { heads_per_stream: 2, ..FtlConfig::default() };
    threads(c, "emu:small", 4, 40_000);
}

#[test]
fn several_threads_appends() {
    let c = FtlConfig { write_mode: WriteMode::Append, ..FtlConfig::default() };
    threads(c, "emu:small", 4, 40_000);
}
