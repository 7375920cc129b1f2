//! What a stream of writes the client never flushes costs in device
//! flushes (on a file-backed device each is an `fdatasync`), counted, not
//! timed:
//! - on a fresh FTL, none until the client flushes, then one flush's worth
//!   (data before log, log durable), and a second flush with nothing new
//!   in between costs none;
//! - on a full FTL, where every zone the stream fills needs a zone
//!   reclaimed, the zones the stream emptied are reclaimed many to one
//!   durable log write (they used to cost two device flushes each, the
//!   stream waiting for them).
//!
//! Both check the data afterwards, across a clean reopen.

mod common;

use std::sync::Arc;

use zns_ftl::{BlockDevice, Ftl, FtlConfig, FtlStats};

/// 1 MiB writes of version `version` over blocks `lba..lba + blocks`.
fn write_stream(ftl: &Ftl, lba: u64, blocks: u64, version: u64) {
    let bs = ftl.block_size() as usize;
    let per = (1 << 20) / bs as u64;
    let mut buf = vec![0u8; per as usize * bs];
    let mut l = lba;
    while l < lba + blocks {
        let n = per.min(lba + blocks - l);
        for i in 0..n {
            common::fill(&mut buf[i as usize * bs..(i as usize + 1) * bs], l + i, version);
        }
        ftl.write(l, &buf[..n as usize * bs]).unwrap();
        l += n;
    }
}

/// Checks that blocks `lba..lba + blocks` hold version `version`.
fn check_stream(ftl: &dyn BlockDevice, lba: u64, blocks: u64, version: u64) {
    let bs = ftl.block_size() as usize;
    let mut buf = vec![0u8; 256 * bs];
    let mut l = lba;
    while l < lba + blocks {
        let n = 256.min(lba + blocks - l);
        ftl.read(l, &mut buf[..n as usize * bs]).unwrap();
        for i in 0..n {
            let got = common::decode(&buf[i as usize * bs..(i as usize + 1) * bs]);
            assert_eq!(got, Some((l + i, version)), "block {}", l + i);
        }
        l += n;
    }
}

fn flushes(a: &FtlStats, b: &FtlStats) -> u64 {
    b.device_flushes - a.device_flushes
}

#[test]
fn a_stream_without_a_flush_flushes_the_device_only_when_the_client_does() {
    let dev = common::device("emu:small");
    let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
    // 96 MiB: many metadata pages' worth of map records (about 450 a
    // page), which the log used to write, a flush first, every 16 pages.
    let blocks = (96 << 20) / ftl.block_size() as u64;
    let start = ftl.stats();
    write_stream(&ftl, 0, blocks, 1);
    let written = ftl.stats();
    assert_eq!(flushes(&start, &written), 0, "device flushes with no flush asked for");
    ftl.flush().unwrap();
    let flushed = ftl.stats();
    // Data before log, then the log pages: two.
    assert_eq!(flushes(&written, &flushed), 2);
    // Nothing written since: every page and block is durable already.
    ftl.flush().unwrap();
    assert_eq!(flushes(&flushed, &ftl.stats()), 0, "a second flush with nothing new");
    write_stream(&ftl, 0, 8, 2);
    ftl.flush().unwrap();
    assert_eq!(flushes(&flushed, &ftl.stats()), 2);
    ftl.close().unwrap();
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    check_stream(&ftl, 0, 8, 2);
    check_stream(&ftl, 8, blocks - 8, 1);
}

#[test]
fn a_stream_over_a_full_device_reclaims_the_zones_it_empties_together() {
    // 96 zones of 3.75 MiB, 16 bytes of tags a block; 25 % spare, so
    // that about 20 zones are free or empty at a time.
    let dev = common::device("emu:small,zones=96");
    let config = FtlConfig { op: 0.25, ..FtlConfig::default() };
    let ftl = Ftl::format(Arc::clone(&dev), config.clone()).unwrap();
    let all = ftl.capacity_blocks();
    write_stream(&ftl, 0, all, 1);
    ftl.flush().unwrap();
    let full = ftl.stats();
    // 192 MiB of overwrites, about 51 zones: past the free zones, each
    // needs one reclaimed.
    let blocks = (192 << 20) / ftl.block_size() as u64;
    write_stream(&ftl, 0, blocks, 2);
    let after = ftl.stats();
    let victims = after.gc_victims - full.gc_victims;
    assert!(victims >= 20, "only {victims} zones reclaimed");
    assert_eq!(after.gc_blocks_copied, full.gc_blocks_copied, "the emptied zones moved nothing");
    // One durable log write (two device flushes) per zone reclaimed
    // before. Now about ten zones a write: garbage collection starts once
    // the emptied zones are as many as the free ones (half of about 20),
    // and takes them all; at least six whatever the timing.
    let f = flushes(&full, &after);
    assert!(f * 3 <= victims, "{f} device flushes for {victims} zones reclaimed");
    ftl.flush().unwrap();
    ftl.close().unwrap();
    let ftl = Ftl::open(dev, config).unwrap();
    check_stream(&ftl, 0, blocks, 2);
    check_stream(&ftl, blocks, all - blocks, 1);
}
