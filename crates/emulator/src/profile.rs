//! Device profiles: controller and namespace geometry as data.
//!
//! Profiles are TOML files; the ones in the crate's `profiles/` folder are
//! built in and selectable by name (`tiny`, `small`, `zn540`, `small-zone`,
//! the conventional twins `zn540-conv` and `small-conv`, and their
//! Flexible Data Placement twins `zn540-fdp` and `small-fdp`).
//! Users copy and edit them, and load their own with [`Profile::from_toml`]
//! or [`Profile::load`].
//!
//! A profile with a `[timing]` table has a timing model
//! ([`crate::timing::TimingProfile`]); `timing = "none"`, or no table,
//! means commands complete as soon as they are processed.

use serde::{Deserialize, Serialize};

use crate::timing::TimingProfile;

/// Problems with a profile's text or values.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// No built-in profile has this name.
    #[error("no built-in profile named {name:?} (known: {known})")]
    UnknownName {
        /// The requested name.
        name: String,
        /// The built-in names, comma separated.
        known: String,
    },
    /// The TOML did not parse or did not match the schema.
    #[error("profile does not parse: {0}")]
    Parse(#[from] toml::de::Error),
    /// A file could not be read.
    #[error("cannot read profile {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A value is out of the range the emulator supports.
    #[error("invalid profile: {0}")]
    Invalid(String),
}

const BUILT_IN: &[(&str, &str)] = &[
    ("tiny", include_str!("../profiles/tiny.toml")),
    ("small", include_str!("../profiles/small.toml")),
    ("zn540", include_str!("../profiles/zn540.toml")),
    ("small-zone", include_str!("../profiles/small-zone.toml")),
    ("zn540-conv", include_str!("../profiles/zn540-conv.toml")),
    ("small-conv", include_str!("../profiles/small-conv.toml")),
    ("zn540-fdp", include_str!("../profiles/zn540-fdp.toml")),
    ("small-fdp", include_str!("../profiles/small-fdp.toml")),
];

/// A device description: controller parameters and its namespaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ProfileText")]
pub struct Profile {
    /// Short name (`zn540`).
    pub name: String,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
    /// Controller parameters.
    pub controller: ControllerProfile,
    /// Namespaces, NSID 1 first.
    #[serde(rename = "namespace")]
    pub namespaces: Vec<NamespaceProfile>,
    /// The timing model's parameters: a `[timing]` table; absent or
    /// `timing = "none"` for none.
    #[serde(default, with = "timing_setting", skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingProfile>,
}

/// A profile as written: `twin = "NAME"` takes the controller and the
/// timing model of built-in profile `NAME` where the text gives none (a
/// conventional twin has its ZNS twin's controller, NAND and timing).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileText {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    twin: Option<String>,
    #[serde(default)]
    controller: Option<ControllerProfile>,
    #[serde(rename = "namespace")]
    namespaces: Vec<NamespaceProfile>,
    /// Absent (`None`), or `"none"` / a table (`Some`).
    #[serde(default, deserialize_with = "timing_given")]
    timing: Option<Option<TimingProfile>>,
}

fn timing_given<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<TimingProfile>>, D::Error> {
    timing_setting::deserialize(d).map(Some)
}

impl TryFrom<ProfileText> for Profile {
    type Error = String;

    fn try_from(t: ProfileText) -> Result<Self, String> {
        let twin = match &t.twin {
            Some(name) => Some(Profile::by_name(name).map_err(|e| format!("twin: {e}"))?),
            None => None,
        };
        let controller = match (t.controller, &twin) {
            (Some(c), _) => c,
            (None, Some(tw)) => tw.controller.clone(),
            (None, None) => return Err("missing field `controller`".into()),
        };
        let timing = match (t.timing, &twin) {
            (Some(given), _) => given,
            (None, Some(tw)) => tw.timing.clone(),
            (None, None) => None,
        };
        Ok(Profile {
            name: t.name,
            description: t.description,
            controller,
            namespaces: t.namespaces,
            timing,
        })
    }
}

/// `timing = "none"` or a `[timing]` table.
mod timing_setting {
    use std::fmt;

    use serde::de::{self, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::timing::TimingProfile;

    pub fn serialize<S: Serializer>(t: &Option<TimingProfile>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => t.serialize(s),
            None => s.serialize_str("none"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TimingProfile>, D::Error> {
        struct Setting;
        impl<'de> Visitor<'de> for Setting {
            type Value = Option<TimingProfile>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [timing] table or the string \"none\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "none" => Ok(None),
                    _ => Err(E::custom(format!(
                        "timing = {v:?} is not valid (a [timing] table, or \"none\")"
                    ))),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                TimingProfile::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
            }
        }
        d.deserialize_any(Setting)
    }
}

/// Controller-wide parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerProfile {
    /// Serial number (Identify Controller SN, at most 20 ASCII characters).
    pub serial: String,
    /// Model number (MN, at most 40 ASCII characters).
    pub model: String,
    /// Largest queue the controller accepts (CAP.MQES + 1), 2..=65536.
    #[serde(default = "default_mqes")]
    pub max_queue_entries: u32,
    /// I/O submission and completion queues offered (Number of Queues), 1..=1024.
    #[serde(default = "default_queues")]
    pub max_io_queues: u16,
    /// Maximum Data Transfer Size as a power of two of 4 KiB pages (MDTS), 1..=9.
    #[serde(default = "default_mdts")]
    pub mdts_log2: u8,
    /// Zone Append Size Limit as a power of two of 4 KiB pages (ZASL), 1..=mdts_log2.
    #[serde(default = "default_zasl")]
    pub zasl_log2: u8,
    /// Whether the controller has a volatile write cache (VWC); without one
    /// every completed write is durable.
    #[serde(default = "default_true")]
    pub volatile_write_cache: bool,
    /// Whether every written block carries a CRC32C that reads verify (a
    /// block that fails it reads as Unrecovered Read Error). Absent: on for
    /// device images (`emu:file=`), off for RAM; null media keeps no data
    /// and never checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_checksums: Option<bool>,
}

fn default_mqes() -> u32 {
    1024
}
fn default_queues() -> u16 {
    64
}
fn default_mdts() -> u8 {
    6
}
fn default_zasl() -> u8 {
    5
}
fn default_true() -> bool {
    true
}

/// The command set of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamespaceKind {
    /// Zoned Namespace command set (CSI 02h).
    Zoned,
    /// NVM command set (CSI 00h), random writes: an ordinary SSD.
    Conventional,
}

/// One namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceProfile {
    /// Zoned or conventional.
    pub kind: NamespaceKind,
    /// Logical block size in bytes: 512, 4096 (a power of two 512..=65536).
    pub block_size: u32,
    /// Metadata bytes per block, kept in a separate buffer (0 = none).
    #[serde(default)]
    pub metadata_size: u16,
    /// Conventional namespaces: size in blocks.
    #[serde(default)]
    pub blocks: u64,
    /// Zoned: number of zones.
    #[serde(default)]
    pub zones: u32,
    /// Zoned: zone size in blocks (need not be a power of two).
    #[serde(default)]
    pub zone_size: u64,
    /// Zoned: writable blocks per zone, at most the zone size.
    #[serde(default)]
    pub zone_capacity: u64,
    /// Zoned: Max Open Resources (absent = no limit).
    #[serde(default)]
    pub max_open: Option<u32>,
    /// Zoned: Max Active Resources (absent = no limit).
    #[serde(default)]
    pub max_active: Option<u32>,
    /// Zoned: zone descriptor extension size in bytes, a multiple of 64 (0 = none).
    #[serde(default)]
    pub descriptor_extension_bytes: usize,
    /// Zoned: reads may cross zone boundaries (OZCS.RAZB).
    #[serde(default = "default_true")]
    pub read_across_zone_boundaries: bool,
    /// Zoned: zone random write areas (a `[namespace.zrwa]` table with
    /// `size`, `flush_granularity`, `resources` and `explicit_flush`);
    /// absent when the namespace has none. The `zrwa=` option of an `emu:`
    /// URI sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zrwa: Option<crate::zns::ZrwaGeometry>,
    /// Copy: maximum blocks in one source range (MSSRL).
    #[serde(default = "default_mssrl")]
    pub copy_max_range_blocks: u16,
    /// Copy: maximum blocks in one command (MCL).
    #[serde(default = "default_mcl")]
    pub copy_max_blocks: u32,
    /// Copy: maximum source ranges in one command (MSRC + 1), 1..=256.
    #[serde(default = "default_msrc")]
    pub copy_max_ranges: u16,
    /// Conventional namespaces: the firmware's flash translation layer (a
    /// `[namespace.ftl]` table). Without one the namespace's blocks sit at
    /// fixed places on the media (an idealised drive that never collects
    /// garbage); with one the namespace is a conventional SSD whose
    /// page-mapped FTL collects garbage inside the device ([`crate::conv`]),
    /// and its size follows from the flash and the over-provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ftl: Option<FtlProfile>,
    /// Conventional namespaces with an FTL: Flexible Data Placement (a
    /// `[namespace.fdp]` table). The host tags writes with a placement
    /// identifier and the firmware keeps each reclaim unit handle's data
    /// in reclaim units (segments) of its own ([`crate::conv`]). Absent:
    /// no FDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fdp: Option<FdpProfile>,
}

/// Flexible Data Placement on a conventional namespace with a device-side
/// FTL: its reclaim unit handles, all of one isolation. The namespace is
/// endurance group 1, with one reclaim group; a reclaim unit is one of the
/// FTL's segments (`segment_blocks`), and the namespace's placement handle
/// `i` is reclaim unit handle `i`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdpProfile {
    /// Reclaim unit handles (1..=[`FDP_MAX_HANDLES`]); each has an open
    /// segment for host writes.
    pub handles: u16,
    /// `initially` isolated (garbage collection moves every handle's valid
    /// data into one shared segment) or `persistently` isolated (into a
    /// segment of the handle's own).
    #[serde(default)]
    pub kind: FdpIsolation,
}

/// How a reclaim unit handle's data stays apart from other handles'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FdpIsolation {
    /// Initially isolated (RUHT 1h): apart when written; garbage collection
    /// may mix handles.
    #[default]
    Initially,
    /// Persistently isolated (RUHT 2h): apart through garbage collection
    /// too.
    Persistently,
}

/// Most reclaim unit handles an FDP namespace may have.
pub const FDP_MAX_HANDLES: u16 = 128;

impl FdpProfile {
    /// Open segments garbage collection writes to: one shared, or one per
    /// handle when persistently isolated.
    pub fn gc_streams(&self) -> u64 {
        match self.kind {
            FdpIsolation::Initially => 1,
            FdpIsolation::Persistently => self.handles as u64,
        }
    }

    /// Segments the firmware never counts on for data: the GC reserve and
    /// one to spare, and every open segment (one per handle, and the GC's).
    pub fn reserved_segments(&self) -> u64 {
        FTL_RESERVED_SEGMENTS - 2 + self.handles as u64 + self.gc_streams()
    }

    fn validate(&self, nsid: usize) -> Result<(), ProfileError> {
        if self.handles == 0 || self.handles > FDP_MAX_HANDLES {
            return Err(ProfileError::Invalid(format!(
                "namespace {nsid}: fdp.handles {} must be in 1..={FDP_MAX_HANDLES}",
                self.handles
            )));
        }
        Ok(())
    }
}

/// The device-side FTL of a conventional namespace: its flash and how it
/// is used. Block counts are in the namespace's logical blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlProfile {
    /// The raw flash: as much as this many zones of the ZNS twin hold
    /// (`zones=` of a device URI changes it).
    pub flash_zones: u32,
    /// Blocks of flash per zone of the ZNS twin (its zone capacity).
    pub flash_zone_blocks: u64,
    /// Blocks per segment, the unit garbage collection reclaims: one erase
    /// block on every die. With a timing model, a whole number of program
    /// units on every die.
    pub segment_blocks: u64,
    /// Over-provisioning: spare / exposed capacity (0.07 for 7 %).
    pub over_provisioning: f64,
    /// Victim selection (`greedy`, `cost-benefit`, `lifetime`,
    /// `cost-age-time`).
    #[serde(default = "default_policy")]
    pub policy: String,
}

fn default_policy() -> String {
    "greedy".into()
}

/// Segments the firmware never counts on for data: the GC reserve, the
/// host's and the GC's open segments and one to spare, so garbage
/// collection always finds a victim holding invalid blocks (with Flexible
/// Data Placement, more: [`FdpProfile::reserved_segments`]).
pub const FTL_RESERVED_SEGMENTS: u64 = 4;

impl FtlProfile {
    /// Whole segments of flash.
    pub fn segments(&self) -> u64 {
        (self.flash_zones as u64 * self.flash_zone_blocks) / self.segment_blocks.max(1)
    }

    /// Blocks of flash the firmware uses (whole segments).
    pub fn physical_blocks(&self) -> u64 {
        self.segments() * self.segment_blocks
    }

    /// Blocks the namespace exposes: `physical / (1 + over_provisioning)`,
    /// rounded down.
    pub fn exposed_blocks(&self) -> u64 {
        (self.physical_blocks() as f64 / (1.0 + self.over_provisioning)).floor() as u64
    }

    /// The victim policy.
    pub fn victim_policy(&self) -> Result<zns_ftl_core::VictimPolicy, ProfileError> {
        self.policy.parse().map_err(|e: zns_ftl_core::UnknownPolicy| {
            ProfileError::Invalid(format!("ftl.policy: {e}"))
        })
    }

    /// Checks the table; `reserved`: segments the firmware keeps out of
    /// the exposed capacity ([`FTL_RESERVED_SEGMENTS`], or more with FDP).
    fn validate(
        &self,
        nsid: usize,
        timing: Option<&TimingProfile>,
        block: u64,
        reserved: u64,
    ) -> Result<(), ProfileError> {
        let bad = |m: String| Err(ProfileError::Invalid(format!("namespace {nsid}: ftl.{m}")));
        if self.flash_zones == 0 || self.flash_zone_blocks == 0 || self.segment_blocks == 0 {
            return bad("flash_zones, flash_zone_blocks and segment_blocks must be above 0".into());
        }
        if !(self.over_provisioning.is_finite()
            && self.over_provisioning > 0.0
            && self.over_provisioning <= 10.0)
        {
            return bad(format!(
                "over_provisioning {} must be above 0 and at most 10 (1000 %)",
                self.over_provisioning
            ));
        }
        self.victim_policy()?;
        let segments = self.segments();
        if segments > u32::MAX as u64 {
            return bad(format!(
                "{segments} segments of {} blocks are too many",
                self.segment_blocks
            ));
        }
        let data_segments = self.exposed_blocks().div_ceil(self.segment_blocks);
        if data_segments + reserved > segments {
            return bad(format!(
                "over_provisioning {} leaves {} of {segments} segments of spare; the firmware needs \
                 {reserved}",
                self.over_provisioning,
                segments - data_segments.min(segments)
            ));
        }
        if let Some(t) = timing {
            let unit = t.program_unit_bytes();
            let stripe = unit * t.dies() as u64;
            if !(self.segment_blocks * block).is_multiple_of(stripe) {
                return bad(format!(
                    "segment_blocks ({} bytes) must be a whole number of program units \
                     ({unit} bytes) on each of the {} dies",
                    self.segment_blocks * block,
                    t.dies()
                ));
            }
        }
        Ok(())
    }
}

fn default_mssrl() -> u16 {
    1024
}
fn default_mcl() -> u32 {
    4096
}
fn default_msrc() -> u16 {
    128
}

/// Whether `bytes` is a logical block size namespaces may have: a power of
/// two from 512 to 65536.
pub fn valid_block_size(bytes: u32) -> bool {
    bytes.is_power_of_two() && (512..=65536).contains(&bytes)
}

impl NamespaceProfile {
    /// Size of the namespace in blocks.
    pub fn capacity_blocks(&self) -> u64 {
        match (self.kind, &self.ftl) {
            (NamespaceKind::Zoned, _) => self.zones as u64 * self.zone_size,
            (NamespaceKind::Conventional, Some(f)) => f.exposed_blocks(),
            (NamespaceKind::Conventional, None) => self.blocks,
        }
    }

    /// Blocks the namespace's media hold: its capacity, or with a
    /// device-side FTL its flash.
    pub fn media_blocks(&self) -> u64 {
        match &self.ftl {
            Some(f) if self.kind == NamespaceKind::Conventional => f.physical_blocks(),
            _ => self.capacity_blocks(),
        }
    }

    /// Switches the namespace to another LBA format of `bytes` per block,
    /// keeping its byte sizes: zone size, zone capacity and (conventional)
    /// namespace size are rescaled to the new block count. Block-counted
    /// limits (copy limits) and the metadata per block are kept as they
    /// are.
    ///
    /// Errors: `bytes` not a power of two in 512..=65536, or a size that
    /// is not a whole number of the new blocks.
    pub fn set_block_size(&mut self, bytes: u32) -> Result<(), ProfileError> {
        if !valid_block_size(bytes) {
            return Err(ProfileError::Invalid(format!(
                "block size {bytes}: must be a power of two in 512..=65536"
            )));
        }
        let old = self.block_size as u64;
        let new = bytes as u64;
        let rescale = |what: &str, blocks: u64| -> Result<u64, ProfileError> {
            let total = blocks.checked_mul(old).ok_or_else(|| {
                ProfileError::Invalid(format!("the {what} ({blocks} blocks) is too large"))
            })?;
            if total % new != 0 {
                return Err(ProfileError::Invalid(format!(
                    "block size {bytes}: the {what} ({total} bytes) is not a whole number of \
                     {bytes}-byte blocks"
                )));
            }
            Ok(total / new)
        };
        let (blocks, zone_size, zone_capacity) = (
            rescale("namespace size", self.blocks)?,
            rescale("zone size", self.zone_size)?,
            rescale("zone capacity", self.zone_capacity)?,
        );
        if let Some(f) = &mut self.ftl {
            let (zone_blocks, segment) = (
                rescale("flash per zone", f.flash_zone_blocks)?,
                rescale("segment", f.segment_blocks)?,
            );
            f.flash_zone_blocks = zone_blocks;
            f.segment_blocks = segment;
        }
        if let Some(z) = &mut self.zrwa {
            // The window keeps its size in bytes, like the zones.
            let (size, fg) = (
                rescale("ZRWA size", z.size)?,
                rescale("ZRWA flush granularity", z.flush_granularity)?,
            );
            z.size = size;
            z.flush_granularity = fg;
        }
        self.blocks = blocks;
        self.zone_size = zone_size;
        self.zone_capacity = zone_capacity;
        self.block_size = bytes;
        Ok(())
    }
}

impl Profile {
    /// Names of the built-in profiles.
    pub fn built_in_names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|(n, _)| *n)
    }

    /// A built-in profile by name.
    pub fn by_name(name: &str) -> Result<Profile, ProfileError> {
        let text = BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).ok_or_else(|| {
            ProfileError::UnknownName {
                name: name.to_string(),
                known: Self::built_in_names().collect::<Vec<_>>().join(", "),
            }
        })?;
        Self::from_toml(text)
    }

    /// The TOML text of a built-in profile (to copy and edit).
    pub fn built_in_text(name: &str) -> Option<&'static str> {
        BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// Parses and validates a profile.
    pub fn from_toml(text: &str) -> Result<Profile, ProfileError> {
        let p: Profile = toml::from_str(text)?;
        p.validate()?;
        Ok(p)
    }

    /// Reads a profile file.
    pub fn load(path: &std::path::Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ProfileError::Io { path: path.display().to_string(), source })?;
        Self::from_toml(&text)
    }

    /// The profile as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("profiles always serialize")
    }

    /// Checks every value against what the emulator supports.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |m: String| Err(ProfileError::Invalid(m));
        let c = &self.controller;
        if c.serial.len() > 20 || !c.serial.is_ascii() {
            return bad("serial must be at most 20 ASCII characters".into());
        }
        if c.model.len() > 40 || !c.model.is_ascii() {
            return bad("model must be at most 40 ASCII characters".into());
        }
        if !(2..=65536).contains(&c.max_queue_entries) {
            return bad("max_queue_entries must be in 2..=65536".into());
        }
        if !(1..=1024).contains(&c.max_io_queues) {
            return bad("max_io_queues must be in 1..=1024".into());
        }
        if !(1..=9).contains(&c.mdts_log2) {
            return bad("mdts_log2 must be in 1..=9".into());
        }
        if c.zasl_log2 == 0 || c.zasl_log2 > c.mdts_log2 {
            return bad("zasl_log2 must be in 1..=mdts_log2".into());
        }
        if let Some(t) = &self.timing {
            t.validate(4096u64 << c.mdts_log2).map_err(ProfileError::Invalid)?;
        }
        if self.namespaces.is_empty() || self.namespaces.len() > 16 {
            return bad("a profile needs 1 to 16 namespaces".into());
        }
        if self.namespaces.iter().filter(|n| n.fdp.is_some()).count() > 1 {
            // The FDP namespace is endurance group 1, the only one.
            return bad("at most one namespace may have Flexible Data Placement".into());
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            let nsid = i + 1;
            if !valid_block_size(ns.block_size) {
                return bad(format!(
                    "namespace {nsid}: block_size must be a power of two in 512..=65536"
                ));
            }
            if ns.copy_max_ranges == 0 || ns.copy_max_ranges > 256 || ns.copy_max_range_blocks == 0
            {
                return bad(format!("namespace {nsid}: copy limits out of range"));
            }
            if ns.kind == NamespaceKind::Conventional && ns.zrwa.is_some() {
                return bad(format!("namespace {nsid}: zone random write areas need zones"));
            }
            if ns.fdp.is_some() && (ns.kind != NamespaceKind::Conventional || ns.ftl.is_none()) {
                return bad(format!(
                    "namespace {nsid}: Flexible Data Placement needs a conventional namespace \
                     with an [namespace.ftl] table"
                ));
            }
            match ns.kind {
                NamespaceKind::Conventional => match &ns.ftl {
                    None if ns.blocks == 0 => {
                        return bad(format!(
                            "namespace {nsid}: conventional namespaces need blocks > 0"
                        ));
                    }
                    None => {}
                    Some(_) if ns.blocks != 0 => {
                        return bad(format!(
                            "namespace {nsid}: with an [namespace.ftl] table the size follows \
                             from the flash and the over-provisioning; leave blocks out"
                        ));
                    }
                    Some(f) => {
                        let reserved = ns
                            .fdp
                            .as_ref()
                            .map_or(FTL_RESERVED_SEGMENTS, |d| d.reserved_segments());
                        if let Some(d) = &ns.fdp {
                            d.validate(nsid)?;
                        }
                        f.validate(nsid, self.timing.as_ref(), ns.block_size as u64, reserved)?;
                    }
                },
                NamespaceKind::Zoned => {
                    if ns.ftl.is_some() {
                        return bad(format!(
                            "namespace {nsid}: only conventional namespaces have an FTL table"
                        ));
                    }
                    if ns.zones == 0 || ns.zone_size == 0 {
                        return bad(format!(
                            "namespace {nsid}: zoned namespaces need zones and zone_size"
                        ));
                    }
                    if ns.zone_capacity == 0 || ns.zone_capacity > ns.zone_size {
                        return bad(format!(
                            "namespace {nsid}: zone_capacity must be in 1..=zone_size"
                        ));
                    }
                    if ns.descriptor_extension_bytes % 64 != 0
                        || ns.descriptor_extension_bytes > 255 * 64
                    {
                        return bad(format!(
                            "namespace {nsid}: descriptor_extension_bytes must be a multiple of 64, at most 16320"
                        ));
                    }
                    if ns.max_open == Some(0) || ns.max_active == Some(0) {
                        return bad(format!(
                            "namespace {nsid}: max_open/max_active must be at least 1"
                        ));
                    }
                    if let (Some(o), Some(a)) = (ns.max_open, ns.max_active) {
                        if o > a {
                            return bad(format!("namespace {nsid}: max_open exceeds max_active"));
                        }
                    }
                    if let Some(z) = &ns.zrwa {
                        if let Err(e) = z.validate() {
                            return bad(format!("namespace {nsid}: {e}"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_parse() {
        for name in Profile::built_in_names() {
            let p = Profile::by_name(name).unwrap();
            assert_eq!(p.name, name);
            assert_eq!(Profile::from_toml(&p.to_toml()).unwrap(), p);
        }
        let z = Profile::by_name("zn540").unwrap();
        let ns = &z.namespaces[0];
        assert_eq!((ns.zones, ns.zone_size, ns.zone_capacity), (904, 524288, 275712));
        assert_eq!((ns.max_open, ns.max_active), (Some(14), Some(14)));
    }

    #[test]
    fn timing_tables() {
        assert!(Profile::by_name("zn540").unwrap().timing.is_some());
        assert!(Profile::by_name("tiny").unwrap().timing.is_none());
        assert!(Profile::by_name("small").unwrap().timing.is_none());
        let s = Profile::by_name("small-zone").unwrap();
        let ns = &s.namespaces[0];
        assert_eq!((ns.zone_capacity * 4096, ns.max_active), (96 << 20, Some(256)));
        let t = s.timing.as_ref().unwrap();
        assert_eq!((t.channels, t.dies_per_channel), (16, 8));
        // A zone is one erase block on one die.
        assert_eq!(t.zone_stripe_dies, 1);
        assert_eq!(t.block_kib as u64 * 1024, ns.zone_capacity * 4096);
        let bytes = ns.zones as u64 * ns.zone_capacity * 4096;
        assert!((3.79e12..3.81e12).contains(&(bytes as f64)), "{bytes}");
        // `timing = "none"` switches a timed profile off.
        let text = Profile::built_in_text("zn540").unwrap();
        let head = text.split("[timing]").next().unwrap();
        let off = head.replacen("[controller]", "timing = \"none\"\n\n[controller]", 1);
        assert!(Profile::from_toml(&off).unwrap().timing.is_none());
        let bad = head.replacen("[controller]", "timing = \"fast\"\n\n[controller]", 1);
        let e = Profile::from_toml(&bad).unwrap_err().to_string();
        assert!(e.contains("\"none\""), "{e}");
        let mut p = Profile::by_name("zn540").unwrap();
        p.timing.as_mut().unwrap().read_us.pop();
        assert!(p.validate().unwrap_err().to_string().contains("read_us"));
        // Traces name an operation's planes in a 32-bit mask.
        let mut p = Profile::by_name("zn540").unwrap();
        p.timing.as_mut().unwrap().planes = 33;
        assert!(p.validate().unwrap_err().to_string().contains("planes must be at most 32"));
    }

    #[test]
    fn block_size_changes_keep_byte_sizes() {
        let mut ns = Profile::by_name("zn540").unwrap().namespaces[0].clone();
        ns.set_block_size(512).unwrap();
        assert_eq!((ns.block_size, ns.zone_size, ns.zone_capacity), (512, 524288 * 8, 275712 * 8));
        ns.set_block_size(4096).unwrap();
        assert_eq!((ns.zone_size, ns.zone_capacity), (524288, 275712));
        let mut t = Profile::by_name("tiny").unwrap();
        let conv = &mut t.namespaces[1];
        conv.set_block_size(512).unwrap();
        assert_eq!(conv.blocks, 1024 * 8);
        let ns = &mut t.namespaces[0];
        ns.zone_capacity = 47;
        let e = ns.set_block_size(8192).unwrap_err().to_string();
        assert!(e.contains("zone capacity") && e.contains("8192"), "{e}");
        assert_eq!((ns.block_size, ns.zone_size), (4096, 64), "unchanged on error");
        assert!(ns.set_block_size(1000).unwrap_err().to_string().contains("power of two"));
        assert!(ns.set_block_size(256).is_err());
    }

    #[test]
    fn bad_profiles_are_rejected_with_reasons() {
        let e = Profile::by_name("nope").unwrap_err().to_string();
        assert!(e.contains("tiny") && e.contains("zn540"), "{e}");
        let mut p = Profile::by_name("tiny").unwrap();
        p.namespaces[0].zone_capacity = 65;
        assert!(p.validate().unwrap_err().to_string().contains("zone_capacity"));
        let text =
            Profile::built_in_text("tiny").unwrap().replace("zones = 16", "zones = 16\nbogus = 1");
        assert!(matches!(Profile::from_toml(&text), Err(ProfileError::Parse(_))));
    }

    #[test]
    fn zrwa_tables_parse_validate_and_scale_with_the_block_size() {
        let text = Profile::built_in_text("tiny").unwrap().replace(
            "read_across_zone_boundaries = true",
            "read_across_zone_boundaries = true\n[namespace.zrwa]\nsize = 16\n\
             flush_granularity = 4\nresources = 2",
        );
        let p = Profile::from_toml(&text).unwrap();
        let z = p.namespaces[0].zrwa.expect("the table");
        assert_eq!((z.size, z.flush_granularity, z.resources, z.explicit_flush), (16, 4, 2, true));
        assert_eq!(Profile::from_toml(&toml::to_string(&p).unwrap()).unwrap(), p);
        let mut small = p.clone();
        small.namespaces[0].set_block_size(512).unwrap();
        let z = small.namespaces[0].zrwa.unwrap();
        assert_eq!((z.size, z.flush_granularity), (128, 32), "the same bytes");
        let mut bad = p.clone();
        bad.namespaces[0].zrwa.as_mut().unwrap().size = 18;
        assert!(bad.validate().unwrap_err().to_string().contains("ZRWA"));
        let mut conv = p;
        conv.namespaces[1].zrwa = conv.namespaces[0].zrwa;
        assert!(conv.validate().unwrap_err().to_string().contains("need zones"));
    }
}
