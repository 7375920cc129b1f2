//! Zone-state slots: two per zoned namespace (A and B), written in turn,
//! each a header (sequence number, payload length, checksum) and the
//! payload, so a write torn by a crash leaves the other slot intact.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::format::{SLOT_HEADER, VERSION_SLOT_CHECKSUMS};

/// Slot names, by index.
pub(crate) const SLOT_NAMES: [&str; 2] = ["A", "B"];

/// What a zone-state slot holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A record: sequence number and payload.
    Valid(u64, Vec<u8>),
    /// Nothing ever written (all header bytes zero).
    Blank,
    /// Something that is not a valid record: why, and the sequence number
    /// its header claims.
    Damaged(String, u64),
}

/// Reads the slot at `off` (`slot` bytes). From version 2 on, checksums
/// cover the whole slot after the header (payload and zero padding), so
/// damage anywhere in it is found; version 1 covered the payload only.
pub(crate) fn read_slot(file: &File, off: u64, slot: u64, version: u32) -> std::io::Result<Slot> {
    let mut h = [0u8; SLOT_HEADER];
    file.read_exact_at(&mut h, off)?;
    if h.iter().all(|&b| b == 0) {
        return Ok(Slot::Blank);
    }
    let seq = u64::from_le_bytes(h[0..8].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    let sum = u32::from_le_bytes(h[16..20].try_into().expect("4 bytes"));
    if seq == 0 || len > slot - SLOT_HEADER as u64 {
        let why = format!("has an impossible header (sequence {seq}, length {len})");
        return Ok(Slot::Damaged(why, seq));
    }
    let covered = if version >= VERSION_SLOT_CHECKSUMS { slot - SLOT_HEADER as u64 } else { len };
    let mut data = vec![0u8; covered as usize];
    file.read_exact_at(&mut data, off + SLOT_HEADER as u64)?;
    if checksum(seq, &data) != sum {
        return Ok(Slot::Damaged(format!("fails its checksum (sequence {seq})"), seq));
    }
    data.truncate(len as usize);
    Ok(Slot::Valid(seq, data))
}

/// A whole slot of `slot` bytes (version 2 on): header (sequence, length,
/// checksum of everything after the header) and payload, zero padded.
pub(crate) fn slot_record(seq: u64, image: &[u8], slot: u64) -> Vec<u8> {
    let mut buf = vec![0u8; slot as usize];
    buf[SLOT_HEADER..SLOT_HEADER + image.len()].copy_from_slice(image);
    let sum = checksum(seq, &buf[SLOT_HEADER..]);
    buf[0..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&(image.len() as u64).to_le_bytes());
    buf[16..20].copy_from_slice(&sum.to_le_bytes());
    buf
}

/// A version 1 slot record: the checksum covers the payload only.
pub(crate) fn legacy_slot_record(seq: u64, image: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(SLOT_HEADER + image.len());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&(image.len() as u64).to_le_bytes());
    buf.extend_from_slice(&checksum(seq, image).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(image);
    buf
}

fn checksum(seq: u64, data: &[u8]) -> u32 {
    // FNV-1a over the sequence and the data: detects torn and stale slots.
    let mut h: u32 = 0x811C_9DC5;
    for b in seq.to_le_bytes().iter().chain(data) {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
