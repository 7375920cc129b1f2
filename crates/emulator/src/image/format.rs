//! The fixed part of a device image: the superblock, its layout table, and
//! where each namespace's regions lie.
//!
//! Superblock (4096 bytes, integers little-endian):
//!
//! | bytes | field | versions |
//! |---|---|---|
//! | 0..8 | magic `ZNSKIMG1` | all |
//! | 8..12 | format version | all |
//! | 12..16 | profile text length | all |
//! | 16..20 | CRC32C of the profile text | 2, 3 |
//! | 20..24 | CRC32C of the superblock: bytes 0..20 (version 2); all 4096 bytes with this field zero (version 3) | 2, 3 |
//! | 24..28 | feature flags: bit 0 data checksums, bit 1 metadata checksums, bit 2 zone write generations | 3 |
//! | 28..32 | namespaces in the layout table | 3 |
//! | 32.. | layout table: 64 bytes per namespace | 3 |
//!
//! A layout table entry: zone-state offset, slot size, metadata offset,
//! checksum offset (0: none), data offset, end of the data region,
//! metadata checksum offset (0: none; images with feature bit 1), seven
//! u64, then 8 reserved bytes.
//!
//! Feature bits 1 and 2 came later within version 3; images without them
//! open as before (metadata unchecked, every block in write generation 0),
//! and a reader that does not know a bit refuses the image. Opening checks the table against the
//! layout the profile gives, so an image is never read with its regions in
//! other places than where they were written.

use crate::profile::{NamespaceKind, NamespaceProfile, Profile};

/// Image magic.
pub(crate) const MAGIC: &[u8; 8] = b"ZNSKIMG1";
/// The version images are created with: a layout table and data checksums.
pub(crate) const VERSION: u32 = 3;
/// Superblock and slot checksums, the fresh record.
pub(crate) const VERSION_SLOT_CHECKSUMS: u32 = 2;
/// Images before superblock checksums and the fresh record.
pub(crate) const VERSION_LEGACY: u32 = 1;
/// Bytes of the superblock.
pub(crate) const SUPERBLOCK: u64 = 4096;
/// Bytes reserved for the profile text.
pub(crate) const PROFILE_AREA: u64 = 65536;
/// Regions start on this boundary.
const ALIGN: u64 = 1 << 20;
/// Bytes of a zone-state slot's header: sequence u64, length u64,
/// checksum u32, reserved u32.
pub(crate) const SLOT_HEADER: usize = 24;
/// Feature flag: every written block has a CRC32C in the checksum region.
pub(crate) const FLAG_DATA_CHECKSUMS: u32 = 1;
/// Feature flag: every block's metadata has a CRC32C in the metadata
/// checksum region.
pub(crate) const FLAG_METADATA_CHECKSUMS: u32 = 2;
/// Feature flag: zone states carry each zone's write generation and data
/// checksums are bound to it (see [`crate::media::Generations`]).
pub(crate) const FLAG_GENERATIONS: u32 = 4;
/// Every feature flag this version knows.
const KNOWN_FLAGS: u32 = FLAG_DATA_CHECKSUMS | FLAG_METADATA_CHECKSUMS | FLAG_GENERATIONS;
/// Bytes of one data checksum (a CRC32C per block).
pub(crate) const CHECKSUM_BYTES: u64 = 4;
/// Offset of the layout table in a version 3 superblock.
const TABLE: usize = 32;
/// Bytes of one layout table entry.
const ENTRY: usize = 64;
/// Most namespaces a layout table holds.
pub(crate) const MAX_NAMESPACES: usize = (SUPERBLOCK as usize - TABLE) / ENTRY;

/// Where one namespace lives in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceLayout {
    /// Offset of zone-state slot A (slot B follows at `slot_bytes`).
    pub zone_state_offset: u64,
    /// Size of one zone-state slot (0 for a conventional namespace).
    pub slot_bytes: u64,
    /// Offset of the metadata region.
    pub metadata_offset: u64,
    /// Offset of the data checksum region (a CRC32C per block), when the
    /// image has data checksums.
    pub checksum_offset: Option<u64>,
    /// Offset of the data region.
    pub data_offset: u64,
    /// End of the data region: the image must be at least this long.
    pub data_end: u64,
    /// Offset of the metadata checksum region (a CRC32C per block's
    /// metadata), when the image has metadata checksums and the namespace
    /// has metadata.
    pub metadata_checksum_offset: Option<u64>,
}

/// Which checksums an image keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    /// A CRC32C per written block.
    pub data_checksums: bool,
    /// A CRC32C per block's metadata.
    pub metadata_checksums: bool,
}

impl Features {
    /// What a new image gets: both checksums, or neither.
    pub fn new_image(checksums: bool) -> Features {
        Features { data_checksums: checksums, metadata_checksums: checksums }
    }

    /// Neither (versions 1 and 2).
    pub const NONE: Features = Features { data_checksums: false, metadata_checksums: false };
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Space reserved for one zone-state image of a namespace: generous for the
/// per-zone record and its descriptor extension.
fn slot_bytes(ns: &NamespaceProfile) -> u64 {
    if ns.kind != NamespaceKind::Zoned {
        return 0;
    }
    let per_zone = 64 + ns.descriptor_extension_bytes as u64;
    round_up(SLOT_HEADER as u64 + 4096 + ns.zones as u64 * per_zone, 4096)
}

/// The layout of every namespace of `profile`: slots, metadata, metadata
/// checksums, data checksums, data (the checksum regions when `features`
/// has them), each region on a 1 MiB boundary. Without checksums it is the
/// layout of versions 1 and 2.
pub(crate) fn layout_for(profile: &Profile, features: Features) -> Vec<NamespaceLayout> {
    let mut at = round_up(SUPERBLOCK + PROFILE_AREA, ALIGN);
    profile
        .namespaces
        .iter()
        .map(|ns| {
            let blocks = ns.capacity_blocks();
            let slot = slot_bytes(ns);
            let zone_state_offset = at;
            at = round_up(at + 2 * slot, ALIGN);
            let metadata_offset = at;
            at = round_up(at + blocks * ns.metadata_size as u64, ALIGN);
            let metadata_checksum_offset = (features.metadata_checksums && ns.metadata_size > 0)
                .then(|| {
                    let o = at;
                    at = round_up(at + blocks * CHECKSUM_BYTES, ALIGN);
                    o
                });
            let checksum_offset = features.data_checksums.then(|| {
                let o = at;
                at = round_up(at + blocks * CHECKSUM_BYTES, ALIGN);
                o
            });
            let data_offset = at;
            let data_end = at + blocks * ns.block_size as u64;
            at = round_up(data_end, ALIGN);
            NamespaceLayout {
                zone_state_offset,
                slot_bytes: slot,
                metadata_offset,
                checksum_offset,
                data_offset,
                data_end,
                metadata_checksum_offset,
            }
        })
        .collect()
}

/// Bytes an image with these layouts spans: the end of its last data region.
pub(crate) fn image_end(layouts: &[NamespaceLayout]) -> u64 {
    layouts.iter().map(|l| l.data_end).max().unwrap_or(0)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// Format version.
    pub version: u32,
    /// Length of the profile text.
    pub profile_len: u64,
    /// CRC32C of the profile text (versions 2 and 3).
    pub profile_crc: Option<u32>,
    /// Feature flags (0 before version 3).
    pub flags: u32,
    /// The layout table (version 3); `None` before.
    pub table: Option<Vec<NamespaceLayout>>,
}

impl Superblock {
    /// Whether the image keeps data checksums.
    pub fn checksums(&self) -> bool {
        self.flags & FLAG_DATA_CHECKSUMS != 0
    }

    /// Which checksums the image keeps.
    pub fn features(&self) -> Features {
        Features {
            data_checksums: self.checksums(),
            metadata_checksums: self.flags & FLAG_METADATA_CHECKSUMS != 0,
        }
    }

    /// Whether zone states carry write generations and checksums are
    /// bound to them.
    pub fn generations(&self) -> bool {
        self.flags & FLAG_GENERATIONS != 0
    }

    /// The superblock of a new image: version 3, `profile_text`, `layouts`
    /// (with checksums: data, metadata and generations).
    pub fn encode_new(profile_text: &str, layouts: &[NamespaceLayout]) -> Vec<u8> {
        let checksums = layouts.iter().any(|l| l.checksum_offset.is_some());
        Superblock::encode(profile_text, layouts, if checksums { KNOWN_FLAGS } else { 0 })
    }

    /// A version 3 superblock with these feature `flags` (images made
    /// before some features existed have fewer).
    pub fn encode(profile_text: &str, layouts: &[NamespaceLayout], flags: u32) -> Vec<u8> {
        let mut sb = vec![0u8; SUPERBLOCK as usize];
        sb[0..8].copy_from_slice(MAGIC);
        sb[8..12].copy_from_slice(&VERSION.to_le_bytes());
        sb[12..16].copy_from_slice(&(profile_text.len() as u32).to_le_bytes());
        sb[16..20].copy_from_slice(&zns_spec::crc::crc32c(profile_text.as_bytes()).to_le_bytes());
        sb[24..28].copy_from_slice(&flags.to_le_bytes());
        sb[28..32].copy_from_slice(&(layouts.len() as u32).to_le_bytes());
        for (i, l) in layouts.iter().enumerate() {
            let e = TABLE + i * ENTRY;
            let fields = [
                l.zone_state_offset,
                l.slot_bytes,
                l.metadata_offset,
                l.checksum_offset.unwrap_or(0),
                l.data_offset,
                l.data_end,
                l.metadata_checksum_offset.unwrap_or(0),
            ];
            for (k, v) in fields.iter().enumerate() {
                sb[e + 8 * k..e + 8 * k + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        let crc = zns_spec::crc::crc32c(&sb);
        sb[20..24].copy_from_slice(&crc.to_le_bytes());
        sb
    }

    /// Decodes and checks a superblock; the error says what is wrong.
    pub fn decode(sb: &[u8]) -> Result<Superblock, String> {
        if sb.len() < SUPERBLOCK as usize {
            return Err(format!("shorter than a superblock ({} of {SUPERBLOCK} bytes)", sb.len()));
        }
        if &sb[0..8] != MAGIC {
            return Err("no znskit device image magic".into());
        }
        let version = le32(sb, 8);
        let profile_len = le32(sb, 12) as u64;
        let stored = le32(sb, 20);
        // Older versions wrote nothing past their fields: anything there
        // is damage (a flipped version number must not turn a newer image
        // into an older one that is read unchecked).
        let zero_from = |at: usize| sb[at..SUPERBLOCK as usize].iter().all(|&b| b == 0);
        let good = match version {
            VERSION_LEGACY => zero_from(16),
            VERSION_SLOT_CHECKSUMS => stored == zns_spec::crc::crc32c(&sb[..20]) && zero_from(24),
            VERSION => {
                let mut copy = sb[..SUPERBLOCK as usize].to_vec();
                copy[20..24].fill(0);
                stored == zns_spec::crc::crc32c(&copy)
            }
            v => return Err(format!("unsupported image version {v}")),
        };
        if !good {
            return Err("the superblock is damaged (checksum mismatch)".into());
        }
        if profile_len > PROFILE_AREA {
            return Err(format!(
                "profile length {profile_len} is out of range (at most {PROFILE_AREA})"
            ));
        }
        let profile_crc = (version >= VERSION_SLOT_CHECKSUMS).then(|| le32(sb, 16));
        if version < VERSION {
            return Ok(Superblock { version, profile_len, profile_crc, flags: 0, table: None });
        }
        let flags = le32(sb, 24);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown feature flags {flags:#x} (made by a newer znskit?)"));
        }
        let count = le32(sb, 28) as usize;
        if count == 0 || count > MAX_NAMESPACES {
            return Err(format!("the layout table lists {count} namespaces"));
        }
        let table = (0..count)
            .map(|i| {
                let e = TABLE + i * ENTRY;
                let f = |k: usize| le64(sb, e + 8 * k);
                NamespaceLayout {
                    zone_state_offset: f(0),
                    slot_bytes: f(1),
                    metadata_offset: f(2),
                    checksum_offset: (f(3) != 0).then(|| f(3)),
                    data_offset: f(4),
                    data_end: f(5),
                    metadata_checksum_offset: (f(6) != 0).then(|| f(6)),
                }
            })
            .collect();
        Ok(Superblock { version, profile_len, profile_crc, flags, table: Some(table) })
    }

    /// The layouts of this image's namespaces for `profile`: computed from
    /// the profile, and for version 3 checked against the layout table and
    /// the checksum flag.
    pub fn layouts(&self, profile: &Profile) -> Result<Vec<NamespaceLayout>, String> {
        let Some(table) = &self.table else {
            return Ok(layout_for(profile, Features::NONE));
        };
        let wanted = profile.controller.data_checksums.unwrap_or(true);
        if wanted != self.checksums() {
            return Err(format!(
                "the superblock says data checksums are {}, the profile says data_checksums = {}",
                if self.checksums() { "on" } else { "off" },
                wanted
            ));
        }
        let computed = layout_for(profile, self.features());
        if table.len() != computed.len() {
            return Err(format!(
                "the layout table lists {} namespaces, the profile has {}",
                table.len(),
                computed.len()
            ));
        }
        for (i, (t, c)) in table.iter().zip(&computed).enumerate() {
            if t != c {
                return Err(format!(
                    "the layout table does not match the profile: namespace {} is {} in the \
                     table, {} by the profile",
                    i + 1,
                    describe(t),
                    describe(c)
                ));
            }
        }
        Ok(computed)
    }
}

/// A layout in one phrase, for error messages.
fn describe(l: &NamespaceLayout) -> String {
    format!(
        "slots at {} ({} bytes each), metadata at {}, metadata checksums at {}, checksums at {}, \
         data {}..{}",
        l.zone_state_offset,
        l.slot_bytes,
        l.metadata_offset,
        l.metadata_checksum_offset.map_or("none".to_string(), |o| o.to_string()),
        l.checksum_offset.map_or("none".to_string(), |o| o.to_string()),
        l.data_offset,
        l.data_end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_do_not_overlap_and_checksums_sit_before_the_data() {
        for name in Profile::built_in_names() {
            let p = Profile::by_name(name).unwrap();
            for checksums in [false, true] {
                let ls = layout_for(&p, Features::new_image(checksums));
                let mut end = SUPERBLOCK + PROFILE_AREA;
                for (l, ns) in ls.iter().zip(&p.namespaces) {
                    let blocks = ns.capacity_blocks();
                    assert!(l.zone_state_offset >= end, "{name}");
                    assert!(l.zone_state_offset + 2 * l.slot_bytes <= l.metadata_offset);
                    let mut next = l.metadata_offset + blocks * ns.metadata_size as u64;
                    assert_eq!(l.checksum_offset.is_some(), checksums);
                    let md = checksums && ns.metadata_size > 0;
                    assert_eq!(l.metadata_checksum_offset.is_some(), md, "{name}");
                    if let Some(m) = l.metadata_checksum_offset {
                        assert!(m >= next && m % ALIGN == 0);
                        next = m + blocks * CHECKSUM_BYTES;
                    }
                    if let Some(c) = l.checksum_offset {
                        assert!(c >= next && c % ALIGN == 0);
                        next = c + blocks * CHECKSUM_BYTES;
                    }
                    assert!(l.data_offset >= next);
                    assert_eq!(l.data_end, l.data_offset + blocks * ns.block_size as u64);
                    end = l.data_end;
                }
            }
        }
    }

    #[test]
    fn superblock_round_trips_and_rejects_damage() {
        let p = Profile::by_name("tiny").unwrap();
        let text = p.to_toml();
        let ls = layout_for(&p, Features::new_image(true));
        let sb = Superblock::encode_new(&text, &ls);
        let d = Superblock::decode(&sb).unwrap();
        assert_eq!(d.version, VERSION);
        assert!(d.checksums());
        assert_eq!(d.layouts(&p).unwrap(), ls);
        // Any flipped bit of the 4096 bytes is caught, the version's too:
        // no flip turns the image into an older one read unchecked.
        for at in [0usize, 9, 13, 17, 21, 25, 29, 40, 100, 4095] {
            let mut bad = sb.clone();
            bad[at] ^= 0x10;
            assert!(Superblock::decode(&bad).is_err(), "byte {at}");
        }
        for bit in 0..8 {
            let mut bad = sb.clone();
            bad[8] ^= 1 << bit;
            assert!(Superblock::decode(&bad).is_err(), "version bit {bit}");
        }
        // A table that disagrees with the profile, its checksum made valid.
        let mut other = p.clone();
        other.namespaces[1].blocks *= 2;
        let forged = Superblock::encode_new(&text, &layout_for(&other, Features::new_image(true)));
        let e = Superblock::decode(&forged).unwrap().layouts(&p).unwrap_err();
        assert!(e.contains("layout table does not match the profile: namespace 2"), "{e}");
        // The checksum flag and the profile's setting disagree.
        let plain = Superblock::encode_new(&text, &layout_for(&p, Features::NONE));
        let e = Superblock::decode(&plain).unwrap().layouts(&p).unwrap_err();
        assert!(e.contains("data checksums are off"), "{e}");
    }
}
