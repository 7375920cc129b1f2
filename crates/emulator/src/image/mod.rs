//! The on-disk form of a persistent emulated device (`emu:file=PATH`).
//!
//! One sparse file:
//!
//! | bytes | content |
//! |---|---|
//! | 0..4096 | superblock: magic, version, checksums, feature flags, layout table ([`format`]) |
//! | 4096..69632 | the profile as TOML |
//! | per namespace | two zone-state slots (A/B), metadata region, data checksum region, data region |
//!
//! Zone state is written alternately to slot A and B, each with a sequence
//! number and a checksum, so a write torn by a crash leaves the other slot
//! intact; opening uses the newest valid slot. Data and metadata regions
//! are addressed by LBA, holes read as zeros.
//!
//! Opening never writes what it could not validate: when a slot is
//! damaged, blank beside a later record, or not the neighbour of the other
//! in sequence, the newest valid record may not be the last one written.
//! The zone state is then rebuilt from it and what the data region proves
//! (the `recover` module: checksums bound to each block's LBA and its
//! zone's write generation), and the device opens read-only (commands that
//! would write fail with Namespace is Write Protected), the evidence left
//! for [`check::check`]; when the data cannot prove the state, opening
//! fails, naming what may be lost.
//!
//! An image never passes for something it is not:
//! - the superblock carries a CRC32C of itself and one of the profile
//!   text, so a damaged superblock or profile is an error, never another
//!   device (version 2 on);
//! - creation writes a valid "fresh" zone-state record (sequence 1, no
//!   payload) into slot B, so a fresh device is told by its own record: a
//!   namespace with no valid slot fails to open, naming what is wrong with
//!   each slot, instead of coming back empty (version 2 on);
//! - the superblock records where every region lies, and opening checks
//!   that against the layout the profile gives (version 3);
//! - opening checks the file is as long as its layout: a truncated image
//!   is an error naming both lengths;
//! - every written block has a CRC32C in the checksum region, verified on
//!   every read: a block that fails it reads as Unrecovered Read Error
//!   (version 3, unless the profile says `data_checksums = false`; see
//!   [`crate::media::Checksummed`]); bound to the zone's write generation
//!   and with metadata checksummed too in images with feature bits 2 and 1
//!   (images made since; older version 3 images open as before).
//!
//! Versions 1 and 2 still open: there, blocks carry no checksums, and in
//! version 1 two never-written slots mean a fresh device.
//!
//! [`check::check`] verifies an image end to end, and repairs it when
//! asked; nothing is repaired on open.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::Mutex;

use crate::namespace::ZoneStateSink;
use crate::profile::{NamespaceKind, Profile, ProfileError};

pub mod check;
mod format;
mod recover;
mod slot;

pub use format::NamespaceLayout;
use format::{
    image_end, layout_for, Features, Superblock, MAX_NAMESPACES, PROFILE_AREA, SLOT_HEADER,
    SUPERBLOCK, VERSION, VERSION_LEGACY,
};
pub use recover::ZoneChange;
use slot::{legacy_slot_record, read_slot, slot_record, Slot, SLOT_NAMES};

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

/// Takes the image's exclusive advisory lock, held while any handle on the
/// open file lives: two controllers on one image would each keep their own
/// zone state and overwrite each other's data.
pub(crate) fn lock(file: &File, path: &str) -> Result<(), ImageError> {
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => ImageError::InUse(path.to_string()),
        std::fs::TryLockError::Error(source) => ImageError::Io { path: path.to_string(), source },
    })
}

/// The layout of every namespace of a new image of `profile` (data
/// checksums unless the profile says `data_checksums = false`).
pub fn layout(profile: &Profile) -> Vec<NamespaceLayout> {
    layout_for(profile, Features::new_image(profile.controller.data_checksums.unwrap_or(true)))
}

/// What the fixed part of an image says: its superblock, profile and the
/// layout of its namespaces (checked against each other).
pub(crate) struct Structure {
    pub superblock: Superblock,
    pub profile: Profile,
    pub layouts: Vec<NamespaceLayout>,
}

/// What is wrong with the fixed part of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StructureError {
    /// `superblock`, `profile` or `layout`.
    pub kind: &'static str,
    /// In words for the user.
    pub why: String,
}

/// Reads and checks the superblock, the profile text and the layout table.
pub(crate) fn read_structure(file: &File) -> Result<Structure, StructureError> {
    let err = |kind, why: String| StructureError { kind, why };
    let unreadable = |e: std::io::Error| err("superblock", format!("cannot read it: {e}"));
    let mut sb = vec![0u8; SUPERBLOCK as usize];
    let got = read_up_to(file, &mut sb, 0).map_err(unreadable)?;
    let superblock = Superblock::decode(&sb[..got]).map_err(|w| err("superblock", w))?;
    let mut text = vec![0u8; superblock.profile_len as usize];
    let got = read_up_to(file, &mut text, SUPERBLOCK).map_err(unreadable)?;
    if got < text.len() {
        let why = format!(
            "shorter than its profile text ({} bytes, the text ends at {})",
            SUPERBLOCK + got as u64,
            SUPERBLOCK + text.len() as u64
        );
        return Err(err("profile", why));
    }
    if superblock.profile_crc.is_some_and(|c| c != zns_spec::crc::crc32c(&text)) {
        return Err(err("profile", "the profile text is damaged (checksum mismatch)".into()));
    }
    let text = String::from_utf8(text)
        .map_err(|_| err("profile", "the profile text is not UTF-8".into()))?;
    let profile =
        Profile::from_toml(&text).map_err(|e| err("profile", format!("its profile: {e}")))?;
    let layouts = superblock.layouts(&profile).map_err(|w| err("layout", w))?;
    Ok(Structure { superblock, profile, layouts })
}

/// `pread` until `buf` is full or the file ends; returns the bytes read.
pub(crate) fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match file.read_at(&mut buf[at..], offset + at as u64) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// The error for a file shorter than its layout.
pub(crate) fn truncated(actual: u64, end: u64, profile: &Profile) -> String {
    format!(
        "truncated: {actual} bytes, but its layout ({} profile) spans {end}; data written to the \
         missing part is lost",
        profile.name
    )
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
    /// Format version (1: before checksums and the fresh record; 2: before
    /// the layout table and data checksums).
    version: u32,
    /// Zone states carry write generations (feature flag).
    generations: bool,
}

/// The zone state opening an image gives a zoned namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneStateLoad {
    /// Sequence number of the record it comes from (0: none).
    pub sequence: u64,
    /// The durable zone image; `None` for a version 1 image whose slots
    /// were never written, empty for the fresh record of a new image.
    pub payload: Option<Vec<u8>>,
    /// Why the image must not be written, when its slots cannot be
    /// trusted: the state is then rebuilt from the newest valid record and
    /// the data region, and nothing may change until `image::check`
    /// repairs it (a write would overwrite the evidence).
    pub read_only: Option<String>,
}

impl DeviceImage {
    /// Creates a new image for `profile`; refuses to overwrite a file.
    pub fn create(path: &Path, profile: &Profile) -> Result<DeviceImage, ImageError> {
        profile.validate()?;
        let p = path.display().to_string();
        let io = |source| ImageError::Io { path: p.clone(), source };
        let toml = profile.to_toml();
        if toml.len() as u64 > PROFILE_AREA {
            return Err(ImageError::Invalid { path: p, why: "profile text too large".into() });
        }
        if profile.namespaces.len() > MAX_NAMESPACES {
            let why = format!("more than {MAX_NAMESPACES} namespaces");
            return Err(ImageError::Invalid { path: p, why });
        }
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ImageError::Exists(p.clone())
                } else {
                    io(e)
                }
            })?;
        let layouts = layout(profile);
        let sb = Superblock::encode_new(&toml, &layouts);
        lock(&file, &p)?;
        file.write_all_at(&sb, 0).map_err(io)?;
        file.write_all_at(toml.as_bytes(), SUPERBLOCK).map_err(io)?;
        file.set_len(image_end(&layouts)).map_err(io)?;
        // Every zoned namespace starts with a valid record of a fresh
        // device, in the slot sequence 1 belongs to.
        for (l, ns) in layouts.iter().zip(&profile.namespaces) {
            if ns.kind == NamespaceKind::Zoned {
                let fresh = slot_record(1, &[], l.slot_bytes);
                file.write_all_at(&fresh, l.zone_state_offset + l.slot_bytes).map_err(io)?;
            }
        }
        file.sync_all().map_err(io)?;
        let generations = layouts.iter().any(|l| l.checksum_offset.is_some());
        Ok(DeviceImage {
            profile: profile.clone(),
            layouts,
            file,
            path: p,
            version: VERSION,
            generations,
        })
    }

    /// Opens an existing image: its superblock, profile and layout table
    /// must be intact and agree, and the file must be as long as its
    /// layout. Zone state is read by [`DeviceImage::load_zone_state`].
    pub fn open(path: &Path) -> Result<DeviceImage, ImageError> {
        let p = path.display().to_string();
        let io = |source| ImageError::Io { path: p.clone(), source };
        let invalid = |why: String| ImageError::Invalid { path: p.clone(), why };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io)?;
        lock(&file, &p)?;
        let s = read_structure(&file).map_err(|e| invalid(e.why))?;
        let end = image_end(&s.layouts);
        let actual = file.metadata().map_err(io)?.len();
        if actual < end {
            return Err(invalid(truncated(actual, end, &s.profile)));
        }
        let version = s.superblock.version;
        let generations = s.superblock.generations();
        Ok(DeviceImage {
            profile: s.profile,
            layouts: s.layouts,
            file,
            path: p,
            version,
            generations,
        })
    }

    /// The image's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Whether written blocks carry data checksums.
    pub fn data_checksums(&self) -> bool {
        self.layouts.iter().any(|l| l.checksum_offset.is_some())
    }

    /// The image's path, as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// A handle on the same file (for media and the zone-state sink).
    pub fn file(&self) -> Result<File, ImageError> {
        self.file.try_clone().map_err(|source| ImageError::Io { path: self.path.clone(), source })
    }

    /// Whether zone states carry write generations that data checksums
    /// are bound to (images made before them do not).
    pub fn generations(&self) -> bool {
        self.generations
    }

    /// The zone state of namespace `nsid` (1-based) as opening uses it:
    /// the newest valid record when both slots can be trusted. When they
    /// cannot (a damaged slot, records that are not neighbours), the state
    /// rebuilt from the newest valid record and the data region, and the
    /// image must open read-only: nothing is written, so the evidence
    /// stays for `image::check`. A namespace without a valid slot, or
    /// whose state the data cannot prove (no data checksums, blocks no
    /// checksum accounts for), is an error naming what is wrong, never a
    /// fresh device or fewer blocks.
    pub fn load_zone_state(&self, nsid: u32) -> Result<ZoneStateLoad, ImageError> {
        let i = (nsid - 1) as usize;
        let (l, ns) = (&self.layouts[i], &self.profile.namespaces[i]);
        let io = |source| ImageError::Io { path: self.path.clone(), source };
        let a = recover::assess(&self.file, l, ns, self.version, self.generations).map_err(io)?;
        let invalid = |why: String| ImageError::Invalid { path: self.path.clone(), why };
        let Some((seq, payload)) = a.choice.newest.clone() else {
            if self.version == VERSION_LEGACY && a.choice.damaged.is_empty() {
                return Ok(ZoneStateLoad { sequence: 0, payload: None, read_only: None });
            }
            return Err(invalid(format!(
                "{}; `zns emu check --repair` rebuilds it from the data checksums",
                no_valid_slot(nsid, &a.choice.all)
            )));
        };
        let only_older = a.only_older_damaged();
        let Some(recovery) = a.recovery else {
            return Ok(ZoneStateLoad { sequence: seq, payload: Some(payload), read_only: None });
        };
        let trouble = a.trouble.join("; ");
        if recovery.is_err() && only_older {
            let why = format!(
                "namespace {nsid}: {trouble}; it held an older record than sequence {seq}, which \
                 is used; the image is read-only (writes fail with Namespace is Write Protected) \
                 until `zns emu check --repair`"
            );
            tracing::warn!("device image {}: {why}", self.path);
            return Ok(ZoneStateLoad {
                sequence: seq,
                payload: Some(payload),
                read_only: Some(why),
            });
        }
        let r = recovery.map_err(|why| {
            invalid(format!(
                "namespace {nsid}: {trouble}; {why}: the image is not opened (`zns emu check` \
                 tells what is lost, `zns emu check --repair` keeps what is left)"
            ))
        })?;
        if r.unaccounted_total > 0 {
            let listed: Vec<String> =
                r.unaccounted.iter().map(|(z, lba)| format!("{lba:#x} (zone {z})")).collect();
            return Err(invalid(format!(
                "namespace {nsid}: {trouble}; {} blocks beyond the write pointers the data \
                 proves hold data no checksum accounts for ({}{}): they may be lost, the image \
                 is not opened (`zns emu check` tells what is lost, `zns emu check --repair` \
                 keeps what is left)",
                r.unaccounted_total,
                listed.join(", "),
                if r.unaccounted_total > listed.len() as u64 { ", ..." } else { "" }
            )));
        }
        let rebuilt = match r.changes.is_empty() {
            true => format!("the data proves nothing beyond sequence {seq}"),
            false => format!(
                "rebuilt from sequence {seq} and the data: {}",
                r.changes.iter().map(ZoneChange::describe).collect::<Vec<_>>().join(", ")
            ),
        };
        let why = format!(
            "namespace {nsid}: {trouble}; {rebuilt}; the image is read-only (writes fail with \
             Namespace is Write Protected) until `zns emu check --repair`"
        );
        tracing::warn!("device image {}: {why}", self.path);
        Ok(ZoneStateLoad { sequence: seq, payload: Some(r.payload), read_only: Some(why) })
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

/// Zone-state slot `k` (0 = A) of a namespace: a record counts as valid
/// only if its payload also decodes as the namespace's zone state, so a
/// record that passes its slot checksum but holds something else is
/// damage, and the other slot is used.
pub(crate) fn read_zone_slot(
    file: &File,
    l: &NamespaceLayout,
    k: u64,
    ns: &crate::profile::NamespaceProfile,
    version: u32,
    generations: bool,
) -> std::io::Result<Slot> {
    let slot = read_slot(file, l.zone_state_offset + k * l.slot_bytes, l.slot_bytes, version)?;
    Ok(match slot {
        Slot::Valid(seq, data) if !data.is_empty() => {
            let g = crate::zone_geometry(ns);
            match crate::zns::Zones::decode_durable(g.clone(), &data) {
                // Generations in an image that has none: not its record.
                Ok(z) if !generations && (0..g.zones).any(|i| z.generations().get(i) != 0) => {
                    Slot::Damaged(
                        format!(
                            "holds write generations, which this image does not keep (sequence \
                             {seq})"
                        ),
                        seq,
                    )
                }
                Ok(_) => Slot::Valid(seq, data),
                Err(e) => Slot::Damaged(
                    format!("holds a zone state that does not decode (sequence {seq}: {e})"),
                    seq,
                ),
            }
        }
        other => other,
    })
}

/// What the two slots of a namespace give.
pub(crate) struct SlotChoice {
    /// The newest valid record.
    pub(crate) newest: Option<(u64, Vec<u8>)>,
    /// What is wrong with each damaged slot ("slot A fails its checksum ...").
    pub(crate) damaged: Vec<String>,
    /// What each slot is, when not valid (damaged or never written).
    pub(crate) all: Vec<String>,
    /// A damaged slot claims a newer sequence than the newest valid one.
    pub(crate) lost_newer: bool,
}

pub(crate) fn choose_slot(slots: &[Slot; 2]) -> SlotChoice {
    let mut c =
        SlotChoice { newest: None, damaged: Vec::new(), all: Vec::new(), lost_newer: false };
    let mut damaged_seq = 0u64;
    for (i, slot) in slots.iter().enumerate() {
        match slot {
            Slot::Valid(seq, data) => {
                if c.newest.as_ref().is_none_or(|(s, _)| seq > s) {
                    c.newest = Some((*seq, data.clone()));
                }
            }
            Slot::Blank => c.all.push(format!("slot {} never written", SLOT_NAMES[i])),
            Slot::Damaged(w, seq) => {
                damaged_seq = damaged_seq.max(*seq);
                let w = format!("slot {} {w}", SLOT_NAMES[i]);
                c.all.push(w.clone());
                c.damaged.push(w);
            }
        }
    }
    c.lost_newer = c.newest.as_ref().is_some_and(|(s, _)| damaged_seq > *s);
    c
}

pub(crate) fn no_valid_slot(nsid: u32, why: &[String]) -> String {
    format!(
        "namespace {nsid} has no valid zone-state slot ({}): its zone state is lost; the image is \
         not opened as a fresh device",
        why.join(", ")
    )
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

    /// Two zone states of `tiny`'s namespace 1: fresh, and with zone 1
    /// read only.
    fn states() -> (Vec<u8>, Vec<u8>) {
        let p = Profile::by_name("tiny").unwrap();
        let z = crate::zns::Zones::new(crate::zone_geometry(&p.namespaces[0])).unwrap();
        let fresh = z.encode_durable();
        z.set_read_only(1).unwrap();
        (fresh, z.encode_durable())
    }

    fn first() -> Vec<u8> {
        states().0
    }

    /// The state opening uses, as (sequence, payload), and whether it is
    /// read-only.
    fn loaded(img: &DeviceImage) -> (Option<(u64, Vec<u8>)>, bool) {
        let s = img.load_zone_state(1).unwrap();
        (s.payload.map(|p| (s.sequence, p)), s.read_only.is_some())
    }

    fn second() -> Vec<u8> {
        states().1
    }

    #[test]
    fn a_record_that_does_not_decode_is_damage_and_the_other_slot_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let img = DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
        let sink = img.sink(vec![1, 0]).unwrap();
        sink.save(1, &first()).unwrap();
        // A record with a valid slot checksum that is no zone state.
        sink.save(1, b"not a zone state").unwrap();
        assert_eq!(loaded(&img), (Some((2, first())), true));
    }

    #[test]
    fn create_open_and_alternate_slots() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let profile = Profile::by_name("tiny").unwrap();
        let img = DeviceImage::create(&path, &profile).unwrap();
        assert!(matches!(DeviceImage::create(&path, &profile), Err(ImageError::Exists(_))));
        // A new image holds the fresh record, in slot B.
        assert_eq!(loaded(&img), (Some((1, Vec::new())), false));
        let sink = img.sink(vec![1, 0]).unwrap();
        sink.save(1, &first()).unwrap();
        sink.save(1, &second()).unwrap();
        drop((img, sink));
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!(img.profile, profile);
        assert_eq!(loaded(&img), (Some((3, second())), false));
        // Tear the newest slot (B, odd sequence): the older one is the
        // base, the data proves nothing newer, and the image is read-only.
        let l = img.layouts[0];
        img.file
            .write_all_at(b"X", l.zone_state_offset + l.slot_bytes + SLOT_HEADER as u64)
            .unwrap();
        assert_eq!(loaded(&img), (Some((2, first())), true));
    }

    /// A `tiny` image with two saved records; returns its directory, path
    /// and namespace 1's layout.
    fn written_image() -> (tempfile::TempDir, std::path::PathBuf, NamespaceLayout) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let img = DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
        let sink = img.sink(vec![1, 0]).unwrap();
        sink.save(1, &first()).unwrap();
        sink.save(1, &second()).unwrap();
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

    /// Writes an image as versions 1 and 2 made it: their superblock, the
    /// profile text, their layout (no checksum region), and for version 2
    /// the fresh record in slot B.
    pub(crate) fn old_image(path: &Path, profile: &Profile, version: u32) -> Vec<NamespaceLayout> {
        let text = profile.to_toml();
        let mut sb = vec![0u8; SUPERBLOCK as usize];
        sb[0..8].copy_from_slice(format::MAGIC);
        sb[8..12].copy_from_slice(&version.to_le_bytes());
        sb[12..16].copy_from_slice(&(text.len() as u32).to_le_bytes());
        if version >= format::VERSION_SLOT_CHECKSUMS {
            sb[16..20].copy_from_slice(&zns_spec::crc::crc32c(text.as_bytes()).to_le_bytes());
            let own = zns_spec::crc::crc32c(&sb[..20]);
            sb[20..24].copy_from_slice(&own.to_le_bytes());
        }
        let layouts = layout_for(profile, Features::NONE);
        let f = OpenOptions::new().read(true).write(true).create_new(true).open(path).unwrap();
        f.write_all_at(&sb, 0).unwrap();
        f.write_all_at(text.as_bytes(), SUPERBLOCK).unwrap();
        f.set_len(image_end(&layouts)).unwrap();
        if version >= format::VERSION_SLOT_CHECKSUMS {
            let l = layouts[0];
            f.write_all_at(&slot_record(1, &[], l.slot_bytes), l.zone_state_offset + l.slot_bytes)
                .unwrap();
        }
        layouts
    }

    #[test]
    fn version_1_and_2_images_still_open() {
        let dir = tempfile::tempdir().unwrap();
        let profile = Profile::by_name("tiny").unwrap();
        // Version 1: no checksums, no fresh record; blank slots are fresh.
        let path = dir.path().join("v1.img");
        let layouts = old_image(&path, &profile, VERSION_LEGACY);
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!((img.version(), img.data_checksums()), (1, false));
        assert_eq!(img.layouts, layouts);
        assert_eq!(loaded(&img), (None, false));
        let sink = img.sink(vec![0, 0]).unwrap();
        sink.save(1, &first()).unwrap();
        drop((img, sink));
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!(loaded(&img), (Some((1, first())), false));
        // Version 2: the fresh record, no data checksums.
        let path = dir.path().join("v2.img");
        old_image(&path, &profile, format::VERSION_SLOT_CHECKSUMS);
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!((img.version(), img.data_checksums()), (2, false));
        assert_eq!(loaded(&img), (Some((1, Vec::new())), false));
    }

    #[test]
    fn without_data_checksums_only_a_damaged_older_slot_opens_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let profile = Profile::by_name("tiny").unwrap();
        for (k, newer) in [(0u64, false), (1, true)] {
            let path = dir.path().join(format!("v2-{k}.img"));
            let l = old_image(&path, &profile, format::VERSION_SLOT_CHECKSUMS)[0];
            let img = DeviceImage::open(&path).unwrap();
            let sink = img.sink(vec![1, 0]).unwrap();
            sink.save(1, &first()).unwrap();
            sink.save(1, &second()).unwrap();
            // Slot A holds sequence 2, B sequence 3; the header survives.
            let at = l.zone_state_offset + k * l.slot_bytes + SLOT_HEADER as u64 + 5;
            img.file.write_all_at(b"X", at).unwrap();
            match newer {
                false => assert_eq!(loaded(&img), (Some((3, second())), true)),
                true => {
                    let e = img.load_zone_state(1).unwrap_err().to_string();
                    assert!(
                        e.contains("keeps no data checksums") && e.contains("not opened"),
                        "{e}"
                    );
                }
            }
        }
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
    fn new_images_are_version_3_with_data_checksums_unless_the_profile_says_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut profile = Profile::by_name("tiny").unwrap();
        let img = DeviceImage::create(&dir.path().join("a.img"), &profile).unwrap();
        assert_eq!((img.version(), img.data_checksums()), (3, true));
        assert!(img.layouts.iter().all(|l| l.checksum_offset.is_some()));
        profile.controller.data_checksums = Some(false);
        let path = dir.path().join("b.img");
        drop(DeviceImage::create(&path, &profile).unwrap());
        let img = DeviceImage::open(&path).unwrap();
        assert_eq!((img.version(), img.data_checksums()), (3, false));
        assert_eq!(img.profile, profile);
    }
}
