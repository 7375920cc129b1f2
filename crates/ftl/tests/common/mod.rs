//! Helpers shared by the FTL's integration tests.

#![allow(dead_code)]

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, MemoryBlockDevice};

/// Fills `buf` (one block) with data naming `lba` and `version`.
pub fn fill(buf: &mut [u8], lba: u64, version: u64) {
    buf[0..8].copy_from_slice(&lba.to_le_bytes());
    buf[8..16].copy_from_slice(&version.to_le_bytes());
    let mut x =
        lba.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    for chunk in buf[16..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// The (lba, version) a block names, `None` for an all-zero block; panics
/// on a block that is neither a valid filled block nor zeros.
pub fn decode(buf: &[u8]) -> Option<(u64, u64)> {
    if buf.iter().all(|&b| b == 0) {
        return None;
    }
    let lba = u64::from_le_bytes(buf[0..8].try_into().unwrap());
    let version = u64::from_le_bytes(buf[8..16].try_into().unwrap());
    let mut want = vec![0u8; buf.len()];
    fill(&mut want, lba, version);
    assert!(want == buf, "block claims lba {lba} version {version} but its body differs");
    Some((lba, version))
}

/// Opens a fresh emulated device.
pub fn device(uri: &str) -> Arc<dyn zns_device::ZonedDevice> {
    zns_device::open(uri).unwrap_or_else(|e| panic!("{uri}: {e}"))
}

/// Compares every block of `ftl` with `model`.
pub fn compare_all(ftl: &dyn BlockDevice, model: &MemoryBlockDevice) {
    let bs = ftl.block_size() as usize;
    let n = ftl.capacity_blocks();
    assert_eq!(n, model.capacity_blocks());
    let step = 64u64;
    let mut a = vec![0u8; step as usize * bs];
    let mut b = vec![0u8; step as usize * bs];
    let mut lba = 0;
    while lba < n {
        let k = step.min(n - lba) as usize;
        ftl.read(lba, &mut a[..k * bs]).unwrap();
        model.read(lba, &mut b[..k * bs]).unwrap();
        for i in 0..k {
            if a[i * bs..(i + 1) * bs] != b[i * bs..(i + 1) * bs] {
                panic!(
                    "block {} differs: ftl has {:?}, model has {:?}",
                    lba + i as u64,
                    decode(&a[i * bs..(i + 1) * bs]),
                    decode(&b[i * bs..(i + 1) * bs])
                );
            }
        }
        lba += k as u64;
    }
}

/// Runs `ops` random operations against `ftl` and `model` on blocks
/// `range`, from `seed`; `hot` makes 80% of writes go to a fifth of the
/// range. Reads are checked as they go.
pub fn random_ops(
    ftl: &dyn BlockDevice,
    model: &MemoryBlockDevice,
    range: std::ops::Range<u64>,
    ops: usize,
    seed: u64,
    hot: bool,
) {
    let bs = ftl.block_size() as usize;
    let mut rng = SmallRng::seed_from_u64(seed);
    let span = range.end - range.start;
    let mut buf = vec![0u8; 16 * bs];
    let mut back = vec![0u8; 16 * bs];
    for op in 0..ops {
        let n = if rng.gen_bool(0.7) { 1 } else { rng.gen_range(1..=16u64) }.min(span);
        let lba = if hot && rng.gen_bool(0.8) {
            range.start + rng.gen_range(0..(span / 5).max(1)).min(span - n)
        } else {
            range.start + rng.gen_range(0..=span - n)
        };
        let len = n as usize * bs;
        match rng.gen_range(0..100) {
            0..=59 => {
                let version = seed << 32 | op as u64;
                for i in 0..n as usize {
                    fill(&mut buf[i * bs..(i + 1) * bs], lba + i as u64, version);
                }
                ftl.write(lba, &buf[..len]).unwrap();
                model.write(lba, &buf[..len]).unwrap();
            }
            60..=89 => {
                ftl.read(lba, &mut back[..len]).unwrap();
                model.read(lba, &mut buf[..len]).unwrap();
                for i in 0..n as usize {
                    let (a, b) = (&back[i * bs..(i + 1) * bs], &buf[i * bs..(i + 1) * bs]);
                    assert!(
                        a == b,
                        "op {op}: block {} reads {:?}, expected {:?}",
                        lba + i as u64,
                        decode(a),
                        decode(b)
                    );
                }
            }
            90..=96 => {
                ftl.discard(lba, n).unwrap();
                model.discard(lba, n).unwrap();
            }
            _ => ftl.flush().unwrap(),
        }
    }
}

/// Formats `uri` with `config`.
pub fn format(uri: &str, config: FtlConfig) -> Ftl {
    Ftl::format(device(uri), config).unwrap()
}
