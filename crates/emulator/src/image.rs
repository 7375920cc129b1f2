//! The on-disk form of a persistent emulated device (`emu:file=PATH`).
//!
//! One sparse file:
//!
//! | bytes | content |
//! |---|---|
//! | 0..4096 | superblock: magic, version, profile length, layout table |
//! | 4096..69632 | the profile as TOML |
//! | per namespace | two zone-state slots (A/B), metadata region, data region |
//!
//! Zone state is written alternately to slot A and B, each with a sequence
//! number and a checksum, so a write torn by a crash leaves the other slot
//! intact; opening picks the newest valid slot. Data and metadata regions
//! are addressed by LBA, holes read as zeros.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::Mutex;

use crate::namespace::ZoneStateSink;
use crate::profile::{NamespaceKind, Profile, ProfileError};

const MAGIC: &[u8; 8] = b"ZNSKIMG1";
const VERSION: u32 = 1;
const SUPERBLOCK: u64 = 4096;
const PROFILE_AREA: u64 = 65536;
const ALIGN: u64 = 1 << 20;
const SLOT_HEADER: usize = 24; // sequence u64, length u64, checksum u32, reserved u32

/// Problems with a device image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be created, read or written.
    #[error("device image {path}: {source}")]
    Io {
        /// Image path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a znskit device image or is damaged.
    #[error("device image {path} is not valid: {why}")]
    Invalid {
        /// Image path.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The image's profile is not acceptable.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// Creation would overwrite an existing file.
    #[error("device image {0} already exists")]
    Exists(String),
    /// Another open of the image holds its lock (a server or another
    /// command is using it).
    #[error("device image {0} is in use by another process (a running server or command holds its lock)")]
    InUse(String),
}

/// Where one namespace lives in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceLayout {
    /// Offset of zone-state slot A (slot B follows at `slot_bytes`).
    pub zone_state_offset: u64,
    /// Size of one zone-state slot.
    pub slot_bytes: u64,
    /// Offset of the metadata region.
    pub metadata_offset: u64,
    /// Offset of the data region.
    pub data_offset: u64,
}

/// Takes the image's exclusive advisory lock, held while any handle on the
/// open file lives: two controllers on one image would each keep their own
/// zone state and overwrite each other's data.
fn lock(file: &File, path: &str) -> Result<(), ImageError> {
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => ImageError::InUse(path.to_string()),
        std::fs::TryLockError::Error(source) => ImageError::Io { path: path.to_string(), source },
    })
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Space reserved for one zone-state image of a namespace: generous for the
/// per-zone record and its descriptor extension.
fn slot_bytes(ns: &crate::profile::NamespaceProfile) -> u64 {
    if ns.kind != NamespaceKind::Zoned {
        return 0;
    }
    let per_zone = 64 + ns.descriptor_extension_bytes as u64;
    round_up(SLOT_HEADER as u64 + 4096 + ns.zones as u64 * per_zone, 4096)
}

/// Computes the layout of every namespace of a profile.
pub fn layout(profile: &Profile) -> Vec<NamespaceLayout> {
    let mut at = round_up(SUPERBLOCK + PROFILE_AREA, ALIGN);
    profile
        .namespaces
        .iter()
        .map(|ns| {
            let slot = slot_bytes(ns);
            let zone_state_offset = at;
            at = round_up(at + 2 * slot, ALIGN);
            let metadata_offset = at;
            at = round_up(at + ns.capacity_blocks() * ns.metadata_size as u64, ALIGN);
            let data_offset = at;
            at = round_up(at + ns.capacity_blocks() * ns.block_size as u64, ALIGN);
            NamespaceLayout { zone_state_offset, slot_bytes: slot, metadata_offset, data_offset }
        })
        .collect()
}

/// An open device image.
#[derive(Debug)]
pub struct DeviceImage {
    /// The profile stored in the image.
    pub profile: Profile,
    /// Namespace layouts, NSID 1 first.
    pub layouts: Vec<NamespaceLayout>,
    file: File,
    path: String,
}

impl DeviceImage {
    /// Creates a new image for `profile`; refuses to overwrite a file.
    pub fn create(path: &Path, profile: &Profile) -> Result<DeviceImage, ImageError> {
        profile.validate()?;
        let p = path.display().to_string();
        let io = |source| ImageError::Io { path: p.clone(), source };
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ImageError::Exists(p.clone())
                } else {
                    io(e)
                }
            })?;
        let toml = profile.to_toml();
        if toml.len() as u64 > PROFILE_AREA {
            return Err(ImageError::Invalid { path: p, why: "profile text too large".into() });
        }
        let mut sb = vec![0u8; SUPERBLOCK as usize];
        sb[0..8].copy_from_slice(MAGIC);
        sb[8..12].copy_from_slice(&VERSION.to_le_bytes());
        sb[12..16].copy_from_slice(&(toml.len() as u32).to_le_bytes());
        let layouts = layout(profile);
        let end = layouts
            .iter()
            .zip(&profile.namespaces)
            .map(|(l, ns)| l.data_offset + ns.capacity_blocks() * ns.block_size as u64)
            .max()
            .unwrap_or(0);
        lock(&file, &p)?;
        file.write_all_at(&sb, 0).map_err(io)?;
        file.write_all_at(toml.as_bytes(), SUPERBLOCK).map_err(io)?;
        file.set_len(end).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(DeviceImage { profile: profile.clone(), layouts, file, path: p })
    }

    /// Opens an existing image.
    pub fn open(path: &Path) -> Result<DeviceImage, ImageError> {
        let p = path.display().to_string();
        let io = |source| ImageError::Io { path: p.clone(), source };
        let invalid = |why: &str| ImageError::Invalid { path: p.clone(), why: why.to_string() };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io)?;
        lock(&file, &p)?;
        let mut sb = vec![0u8; SUPERBLOCK as usize];
        file.read_exact_at(&mut sb, 0).map_err(|_| invalid("shorter than a superblock"))?;
        if &sb[0..8] != MAGIC {
            return Err(invalid("no znskit device image magic"));
        }
        let version = u32::from_le_bytes(sb[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(invalid(&format!("unsupported image version {version}")));
        }
        let len = u32::from_le_bytes(sb[12..16].try_into().expect("4 bytes")) as u64;
        if len > PROFILE_AREA {
            return Err(invalid("profile length out of range"));
        }
        let mut text = vec![0u8; len as usize];
        file.read_exact_at(&mut text, SUPERBLOCK).map_err(io)?;
        let text = String::from_utf8(text).map_err(|_| invalid("profile is not UTF-8"))?;
        let profile = Profile::from_toml(&text)?;
        let layouts = layout(&profile);
        Ok(DeviceImage { profile, layouts, file, path: p })
    }

    /// A handle on the same file (for media and the zone-state sink).
    pub fn file(&self) -> Result<File, ImageError> {
        self.file.try_clone().map_err(|source| ImageError::Io { path: self.path.clone(), source })
    }

    /// The newest valid zone-state image of namespace `nsid` (1-based), or
    /// `None` if none was ever written (a fresh device: all zones empty).
    pub fn load_zone_state(&self, nsid: u32) -> Result<Option<(u64, Vec<u8>)>, ImageError> {
        let l = self.layouts[(nsid - 1) as usize];
        let mut best: Option<(u64, Vec<u8>)> = None;
        for slot in 0..2 {
            let off = l.zone_state_offset + slot * l.slot_bytes;
            if let Some((seq, data)) = read_slot(&self.file, off, l.slot_bytes)
                .map_err(|source| ImageError::Io { path: self.path.clone(), source })?
            {
                if best.as_ref().is_none_or(|(s, _)| seq > *s) {
                    best = Some((seq, data));
                }
            }
        }
        Ok(best)
    }

    /// A sink that stores zone state into this image, continuing after
    /// sequence number `last_seq` per namespace.
    pub fn sink(&self, last_seq: Vec<u64>) -> Result<ImageSink, ImageError> {
        Ok(ImageSink {
            file: self.file()?,
            layouts: self.layouts.clone(),
            seq: Mutex::new(last_seq),
        })
    }
}

fn read_slot(file: &File, off: u64, slot: u64) -> std::io::Result<Option<(u64, Vec<u8>)>> {
    let mut h = [0u8; SLOT_HEADER];
    file.read_exact_at(&mut h, off)?;
    let seq = u64::from_le_bytes(h[0..8].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    let sum = u32::from_le_bytes(h[16..20].try_into().expect("4 bytes"));
    if seq == 0 || len > slot - SLOT_HEADER as u64 {
        return Ok(None);
    }
    let mut data = vec![0u8; len as usize];
    file.read_exact_at(&mut data, off + SLOT_HEADER as u64)?;
    Ok((checksum(seq, &data) == sum).then_some((seq, data)))
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

/// Stores zone-state images into a device image file, alternating slots.
#[derive(Debug)]
pub struct ImageSink {
    file: File,
    layouts: Vec<NamespaceLayout>,
    seq: Mutex<Vec<u64>>,
}

impl ZoneStateSink for ImageSink {
    fn save(&self, nsid: u32, image: &[u8]) -> std::io::Result<()> {
        let idx = (nsid - 1) as usize;
        let l = self.layouts[idx];
        if image.len() as u64 > l.slot_bytes - SLOT_HEADER as u64 {
            return Err(std::io::Error::other("zone state image larger than its slot"));
        }
        let mut seqs = self.seq.lock();
        let seq = seqs[idx] + 1;
        let off = l.zone_state_offset + (seq % 2) * l.slot_bytes;
        let mut buf = Vec::with_capacity(SLOT_HEADER + image.len());
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&(image.len() as u64).to_le_bytes());
        buf.extend_from_slice(&checksum(seq, image).to_le_bytes());
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(image);
        self.file.write_all_at(&buf, off)?;
        seqs[idx] = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_and_alternate_slots() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let profile = Profile::by_name("tiny").unwrap();
        let img = DeviceImage::create(&path, &profile).unwrap();
        assert!(matches!(DeviceImage::create(&path, &profile), Err(ImageError::Exists(_))));
        assert_eq!(img.load_zone_state(1).unwrap(), None);
        let sink = img.sink(vec![0; 2]).unwrap();
        sink.save(1, b"first").unwrap();
        sink.save(1, b"second").unwrap();
        drop((img, sink));
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!(img.profile, profile);
        assert_eq!(img.load_zone_state(1).unwrap(), Some((2, b"second".to_vec())));
        // Tear the newest slot: the older one wins.
        let l = img.layouts[0];
        img.file.write_all_at(b"X", l.zone_state_offset + SLOT_HEADER as u64).unwrap();
        assert_eq!(img.load_zone_state(1).unwrap(), Some((1, b"first".to_vec())));
    }

    #[test]
    fn a_second_open_is_refused_while_the_first_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let profile = Profile::by_name("tiny").unwrap();
        let img = DeviceImage::create(&path, &profile).unwrap();
        let e = DeviceImage::open(&path).unwrap_err();
        assert!(matches!(e, ImageError::InUse(_)), "{e}");
        assert!(e.to_string().contains("in use"), "{e}");
        drop(img);
        let img = DeviceImage::open(&path).unwrap();
        assert!(matches!(DeviceImage::open(&path), Err(ImageError::InUse(_))));
        drop(img);
        DeviceImage::open(&path).unwrap();
    }

    #[test]
    fn garbage_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let e = DeviceImage::open(&path).unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
    }

    #[test]
    fn zn540_image_is_sparse_and_regions_do_not_overlap() {
        let profile = Profile::by_name("zn540").unwrap();
        let l = layout(&profile);
        assert!(l[0].zone_state_offset + 2 * l[0].slot_bytes <= l[0].metadata_offset);
        assert!(l[0].metadata_offset <= l[0].data_offset);
    }
}
