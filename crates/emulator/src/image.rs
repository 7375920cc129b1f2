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
//!
//! An image never passes for something it is not (version 2 on):
//! - the superblock carries a CRC32C of itself and one of the profile
//!   text, so a damaged superblock or profile is an error, never another
//!   device;
//! - creation writes a valid "fresh" zone-state record (sequence 1, no
//!   payload) into slot B, so a fresh device is told by its own record: a
//!   namespace with no valid slot fails to open, naming what is wrong with
//!   each slot, instead of coming back empty;
//! - opening checks the file is as long as its layout: a truncated image
//!   is an error naming both lengths.
//!
//! Version 1 images (no checksums, no fresh record) still open: there,
//! two never-written slots mean a fresh device, as before.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::Mutex;

use crate::namespace::ZoneStateSink;
use crate::profile::{NamespaceKind, Profile, ProfileError};

const MAGIC: &[u8; 8] = b"ZNSKIMG1";
/// The version images are created with.
const VERSION: u32 = 2;
/// Images before superblock checksums and the fresh record.
const VERSION_LEGACY: u32 = 1;
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

/// Bytes an image of `profile` spans: the end of its last data region.
fn image_end(profile: &Profile, layouts: &[NamespaceLayout]) -> u64 {
    layouts
        .iter()
        .zip(&profile.namespaces)
        .map(|(l, ns)| l.data_offset + ns.capacity_blocks() * ns.block_size as u64)
        .max()
        .unwrap_or(0)
}

/// The superblock of `profile_text` (version 2): magic, version, profile
/// length, the profile's CRC32C, then the CRC32C of those 20 bytes.
fn superblock(profile_text: &str) -> Vec<u8> {
    let mut sb = vec![0u8; SUPERBLOCK as usize];
    sb[0..8].copy_from_slice(MAGIC);
    sb[8..12].copy_from_slice(&VERSION.to_le_bytes());
    sb[12..16].copy_from_slice(&(profile_text.len() as u32).to_le_bytes());
    sb[16..20].copy_from_slice(&crc32c::crc32c(profile_text.as_bytes()).to_le_bytes());
    let own = crc32c::crc32c(&sb[..20]);
    sb[20..24].copy_from_slice(&own.to_le_bytes());
    sb
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
    /// Format version (1: before checksums and the fresh record).
    version: u32,
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
        let sb = superblock(&toml);
        let layouts = layout(profile);
        let end = image_end(profile, &layouts);
        lock(&file, &p)?;
        file.write_all_at(&sb, 0).map_err(io)?;
        file.write_all_at(toml.as_bytes(), SUPERBLOCK).map_err(io)?;
        file.set_len(end).map_err(io)?;
        // Every zoned namespace starts with a valid record of a fresh
        // device, in the slot sequence 1 belongs to.
        for (l, ns) in layouts.iter().zip(&profile.namespaces) {
            if ns.kind == NamespaceKind::Zoned {
                let fresh = slot_record(1, &[], l.slot_bytes);
                file.write_all_at(&fresh, l.zone_state_offset + l.slot_bytes).map_err(io)?;
            }
        }
        file.sync_all().map_err(io)?;
        Ok(DeviceImage { profile: profile.clone(), layouts, file, path: p, version: VERSION })
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
        let word = |i: usize| u32::from_le_bytes(sb[i..i + 4].try_into().expect("4 bytes"));
        let version = word(8);
        if version != VERSION && version != VERSION_LEGACY {
            return Err(invalid(&format!("unsupported image version {version}")));
        }
        if version >= 2 && word(20) != crc32c::crc32c(&sb[..20]) {
            return Err(invalid("the superblock is damaged (checksum mismatch)"));
        }
        let len = word(12) as u64;
        if len > PROFILE_AREA {
            return Err(invalid("profile length out of range"));
        }
        let mut text = vec![0u8; len as usize];
        file.read_exact_at(&mut text, SUPERBLOCK)
            .map_err(|_| invalid("shorter than its profile text"))?;
        if version >= 2 && word(16) != crc32c::crc32c(&text) {
            return Err(invalid("the profile text is damaged (checksum mismatch)"));
        }
        let text = String::from_utf8(text).map_err(|_| invalid("profile is not UTF-8"))?;
        let profile = Profile::from_toml(&text)?;
        let layouts = layout(&profile);
        let end = image_end(&profile, &layouts);
        let actual = file.metadata().map_err(io)?.len();
        if actual < end {
            return Err(invalid(&format!(
                "truncated: {actual} bytes, but its layout ({} profile) spans {end}; data \
                 written to the missing part is lost",
                profile.name
            )));
        }
        Ok(DeviceImage { profile, layouts, file, path: p, version })
    }

    /// A handle on the same file (for media and the zone-state sink).
    pub fn file(&self) -> Result<File, ImageError> {
        self.file.try_clone().map_err(|source| ImageError::Io { path: self.path.clone(), source })
    }

    /// The newest valid zone-state record of namespace `nsid` (1-based):
    /// its sequence number and payload (empty for the fresh record a new
    /// image starts with); `None` only for a version 1 image whose slots
    /// were never written. A namespace without a valid slot is an error
    /// naming what is wrong with each, never a fresh device.
    pub fn load_zone_state(&self, nsid: u32) -> Result<Option<(u64, Vec<u8>)>, ImageError> {
        let l = self.layouts[(nsid - 1) as usize];
        let mut best: Option<(u64, Vec<u8>)> = None;
        let mut why = Vec::new();
        let mut damaged_seq = 0u64;
        for slot in 0..2u64 {
            let off = l.zone_state_offset + slot * l.slot_bytes;
            let state = read_slot(&self.file, off, l.slot_bytes, self.version)
                .map_err(|source| ImageError::Io { path: self.path.clone(), source })?;
            match state {
                Slot::Valid(seq, data) => {
                    if best.as_ref().is_none_or(|(s, _)| seq > *s) {
                        best = Some((seq, data));
                    }
                }
                Slot::Blank => {
                    why.push(format!("slot {} never written", SLOT_NAMES[slot as usize]))
                }
                Slot::Damaged(w, seq) => {
                    damaged_seq = damaged_seq.max(seq);
                    why.push(format!("slot {} {w}", SLOT_NAMES[slot as usize]));
                }
            }
        }
        let blank = why.iter().all(|w| w.ends_with("never written"));
        match best {
            Some(b) => {
                for w in why.iter().filter(|w| !w.ends_with("never written")) {
                    let lost = match damaged_seq > b.0 {
                        true => ": the newer zone state in it is lost",
                        false => "",
                    };
                    tracing::warn!(
                        "device image {}: namespace {nsid}: {w}; using the other slot \
                         (sequence {}){lost}",
                        self.path,
                        b.0
                    );
                }
                Ok(Some(b))
            }
            None if self.version == VERSION_LEGACY && blank => Ok(None),
            None => Err(ImageError::Invalid {
                path: self.path.clone(),
                why: format!(
                    "namespace {nsid} has no valid zone-state slot ({}): its zone state is lost; \
                     the image is not opened as a fresh device",
                    why.join(", ")
                ),
            }),
        }
    }

    /// A sink that stores zone state into this image, continuing after
    /// sequence number `last_seq` per namespace.
    pub fn sink(&self, last_seq: Vec<u64>) -> Result<ImageSink, ImageError> {
        Ok(ImageSink {
            file: self.file()?,
            layouts: self.layouts.clone(),
            seq: Mutex::new(last_seq),
            version: self.version,
        })
    }
}

const SLOT_NAMES: [&str; 2] = ["A", "B"];

/// What a zone-state slot holds.
enum Slot {
    /// A record: sequence number and payload.
    Valid(u64, Vec<u8>),
    /// Nothing ever written (all header bytes zero).
    Blank,
    /// Something that is not a valid record: why, and the sequence number
    /// its header claims.
    Damaged(String, u64),
}

/// Reads the slot at `off` (`slot` bytes). Version 2 checksums cover the
/// whole slot after the header (payload and zero padding), so damage
/// anywhere in it is found; version 1 covered the payload only.
fn read_slot(file: &File, off: u64, slot: u64, version: u32) -> std::io::Result<Slot> {
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
    let covered = if version >= 2 { slot - SLOT_HEADER as u64 } else { len };
    let mut data = vec![0u8; covered as usize];
    file.read_exact_at(&mut data, off + SLOT_HEADER as u64)?;
    if checksum(seq, &data) != sum {
        return Ok(Slot::Damaged(format!("fails its checksum (sequence {seq})"), seq));
    }
    data.truncate(len as usize);
    Ok(Slot::Valid(seq, data))
}

/// A whole slot of `slot` bytes (version 2): header (sequence, length,
/// checksum of everything after the header) and payload, zero padded.
fn slot_record(seq: u64, image: &[u8], slot: u64) -> Vec<u8> {
    let mut buf = vec![0u8; slot as usize];
    buf[SLOT_HEADER..SLOT_HEADER + image.len()].copy_from_slice(image);
    let sum = checksum(seq, &buf[SLOT_HEADER..]);
    buf[0..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&(image.len() as u64).to_le_bytes());
    buf[16..20].copy_from_slice(&sum.to_le_bytes());
    buf
}

/// A version 1 slot record: the checksum covers the payload only.
fn legacy_slot_record(seq: u64, image: &[u8]) -> Vec<u8> {
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

/// Stores zone-state images into a device image file, alternating slots.
#[derive(Debug)]
pub struct ImageSink {
    file: File,
    layouts: Vec<NamespaceLayout>,
    seq: Mutex<Vec<u64>>,
    version: u32,
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
        let record = match self.version {
            VERSION_LEGACY => legacy_slot_record(seq, image),
            _ => slot_record(seq, image, l.slot_bytes),
        };
        self.file.write_all_at(&record, off)?;
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
        // A new image holds the fresh record, in slot B.
        assert_eq!(img.load_zone_state(1).unwrap(), Some((1, Vec::new())));
        let sink = img.sink(vec![1, 0]).unwrap();
        sink.save(1, b"first").unwrap();
        sink.save(1, b"second").unwrap();
        drop((img, sink));
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!(img.profile, profile);
        assert_eq!(img.load_zone_state(1).unwrap(), Some((3, b"second".to_vec())));
        // Tear the newest slot (B, odd sequence): the older one wins.
        let l = img.layouts[0];
        img.file
            .write_all_at(b"X", l.zone_state_offset + l.slot_bytes + SLOT_HEADER as u64)
            .unwrap();
        assert_eq!(img.load_zone_state(1).unwrap(), Some((2, b"first".to_vec())));
    }

    /// A `tiny` image with two saved records; returns its directory, path
    /// and namespace 1's layout.
    fn written_image() -> (tempfile::TempDir, std::path::PathBuf, NamespaceLayout) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let img = DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
        let sink = img.sink(vec![1, 0]).unwrap();
        sink.save(1, b"first").unwrap();
        sink.save(1, b"second").unwrap();
        let l = img.layouts[0];
        drop((img, sink));
        (dir, path, l)
    }

    fn poke(path: &Path, at: u64, bytes: &[u8]) {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(bytes, at).unwrap();
    }

    fn open_error(path: &Path) -> String {
        let img = DeviceImage::open(path);
        let e = match img {
            Ok(img) => img.load_zone_state(1).map(|_| ()).unwrap_err(),
            Err(e) => e,
        };
        e.to_string()
    }

    #[test]
    fn both_slots_damaged_is_an_error_never_a_fresh_device() {
        let (_d, path, l) = written_image();
        poke(&path, l.zone_state_offset + SLOT_HEADER as u64 + 1, b"?");
        poke(&path, l.zone_state_offset + l.slot_bytes + 3, b"\xff");
        let e = open_error(&path);
        assert!(e.contains("namespace 1 has no valid zone-state slot"), "{e}");
        assert!(e.contains("slot A fails its checksum") && e.contains("slot B"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
        // Zeroed slots are not taken for a never-written device either.
        let (_d, path, l) = written_image();
        poke(&path, l.zone_state_offset, &vec![0u8; 2 * l.slot_bytes as usize]);
        let e = open_error(&path);
        assert!(e.contains("slot A never written, slot B never written"), "{e}");
        // Nor random bytes over both slots.
        let (_d, path, l) = written_image();
        let noise: Vec<u8> =
            (0..2 * l.slot_bytes).map(|i| ((i * 2_654_435_761) >> 7) as u8).collect();
        poke(&path, l.zone_state_offset, &noise);
        assert!(open_error(&path).contains("no valid zone-state slot"));
    }

    #[test]
    fn truncation_and_damaged_structures_are_errors() {
        let (_d, path, _) = written_image();
        let full = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(1_500_000).unwrap();
        drop(f);
        let e = open_error(&path);
        assert!(e.contains("truncated: 1500000 bytes") && e.contains(&full.to_string()), "{e}");
        // A flipped byte in the superblock or in the profile text.
        for (at, what) in
            [(13u64, "superblock is damaged"), (SUPERBLOCK + 40, "profile text is damaged")]
        {
            let (_d, path, _) = written_image();
            let f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, at).unwrap();
            f.write_all_at(&[b[0] ^ 0x02], at).unwrap();
            drop(f);
            let e = open_error(&path);
            assert!(e.contains(what), "{at}: {e}");
        }
    }

    #[test]
    fn version_1_images_with_blank_slots_still_open_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.img");
        let img = DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
        let l = img.layouts[0];
        drop(img);
        // What version 1 wrote: no checksums, no fresh record.
        poke(&path, 8, &VERSION_LEGACY.to_le_bytes());
        poke(&path, 16, &[0u8; 8]);
        poke(&path, l.zone_state_offset + l.slot_bytes, &[0u8; SLOT_HEADER]);
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!(img.load_zone_state(1).unwrap(), None);
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
