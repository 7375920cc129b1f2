//! `emu:` URIs: the embedded emulator's profile, media, clock and
//! geometry options (the `emulator` feature).

use std::fmt;
use std::path::PathBuf;

pub use zns_emulator::clock::{ClockMode, Dilation};
use zns_emulator::profile::{valid_block_size, Profile};

use super::{one_of, DEFAULT_PROFILE};

/// Options an `emu:` URI accepts.
pub const EMULATOR_OPTIONS: &[&str] = &[
    "profile",
    "file",
    "media",
    "timing",
    "clock",
    "dilation",
    "zones",
    "metadata",
    "lba",
    "op",
    "zrwa",
    "trace",
    "trace_events",
];

/// Zone random write areas an `emu:` URI gives the zoned namespace
/// (`zrwa=SIZE/GRANULARITY/RESOURCES`, in blocks of the final block size):
/// a window of `size` blocks committed in units of `flush_granularity`, on
/// at most `resources` zones at once, with explicit commits.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZrwaOption {
    /// ZRWASZ in blocks.
    pub size: u64,
    /// ZRWAFG in blocks.
    pub flush_granularity: u64,
    /// NUMZRWA as a count.
    pub resources: u32,
}

impl ZrwaOption {
    fn parse(value: &str) -> Option<ZrwaOption> {
        let mut it = value.split('/');
        let o = ZrwaOption {
            size: it.next()?.parse().ok()?,
            flush_granularity: it.next()?.parse().ok()?,
            resources: it.next()?.parse().ok()?,
        };
        let fits = o.size > 0
            && o.size <= u64::from(u16::MAX)
            && o.flush_granularity > 0
            && o.size.is_multiple_of(o.flush_granularity)
            && o.resources > 0;
        (it.next().is_none() && fits).then_some(o)
    }
}

impl fmt::Display for ZrwaOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.size, self.flush_granularity, self.resources)
    }
}

/// Where an emulated device keeps its data (file media comes with `file=`).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmulatorMedia {
    /// Sparse RAM (the default).
    #[default]
    Ram,
    /// No data: zone state only, reads return zeroes.
    Null,
}

impl EmulatorMedia {
    const VALUES: &'static [&'static str] = &["ram", "null"];

    fn name(self) -> &'static str {
        match self {
            EmulatorMedia::Ram => "ram",
            EmulatorMedia::Null => "null",
        }
    }
}

/// The emulator's timing model.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timing {
    /// Commands complete when the timing model says (the profile must
    /// have one).
    On,
    /// Commands complete as soon as they are processed.
    Off,
}

impl Timing {
    const VALUES: &'static [&'static str] = &["on", "off"];

    fn name(self) -> &'static str {
        match self {
            Timing::On => "on",
            Timing::Off => "off",
        }
    }
}

/// An `emu:` URI.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EmulatorUri {
    /// Built-in profile name or a profile TOML file (a path ending in
    /// `.toml`); with `file`, the profile the image must hold.
    pub profile: Option<String>,
    /// Device image file.
    pub file: Option<PathBuf>,
    /// Media (RAM unless given; ignored with `file`, which is file media).
    pub media: Option<EmulatorMedia>,
    /// Timing model; `None` = on exactly when the profile has one.
    pub timing: Option<Timing>,
    /// Clock of a timed emulator; `None` = virtual.
    pub clock: Option<ClockMode>,
    /// Factor stretching every modelled duration; `None` = 1.
    pub dilation: Option<Dilation>,
    /// Number of zones of the zoned namespace, instead of the profile's.
    pub zones: Option<u32>,
    /// Metadata bytes per block of the zoned namespace, instead of the
    /// profile's.
    pub metadata: Option<u16>,
    /// Block size in bytes of the zoned namespace, instead of the
    /// profile's (zone size and capacity in bytes kept).
    pub lba: Option<u32>,
    /// Over-provisioning of a conventional twin in percent (spare /
    /// exposed), instead of the profile's.
    pub op: Option<u32>,
    /// Zone random write areas of the zoned namespace, instead of the
    /// profile's.
    pub zrwa: Option<ZrwaOption>,
    /// A trace of every command and flash operation, written to this file
    /// in the JSON trace-event format when the device closes
    /// ([`crate::trace`]).
    pub trace: Option<PathBuf>,
    /// Events the trace keeps (the last ones); `None` =
    /// [`crate::trace::DEFAULT_TRACE_EVENTS`].
    pub trace_events: Option<usize>,
}

impl EmulatorUri {
    /// The profile to build when no image is given: a built-in name or a
    /// profile file.
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or(DEFAULT_PROFILE)
    }

    /// The profile to build when no image is given: the built-in one of
    /// that name, or the profile file read and checked.
    pub fn load_profile(&self) -> Result<Profile, zns_emulator::profile::ProfileError> {
        load_profile(self.profile_name())
    }
}

/// True when `value` of `profile=` names a profile file rather than a
/// built-in profile: it ends in `.toml` (built-in names never do).
pub fn is_profile_file(value: &str) -> bool {
    value.ends_with(".toml") && value.len() > ".toml".len()
}

/// A built-in profile by name, or a profile TOML file by path (see
/// [`is_profile_file`]).
pub fn load_profile(spec: &str) -> Result<Profile, zns_emulator::profile::ProfileError> {
    if is_profile_file(spec) {
        Profile::load(std::path::Path::new(spec))
    } else {
        Profile::by_name(spec)
    }
}

pub(super) fn parse(rest: &str) -> Result<EmulatorUri, String> {
    let mut u = EmulatorUri::default();
    if rest.is_empty() {
        return Ok(u);
    }
    for (i, item) in rest.split(',').enumerate() {
        if item.is_empty() {
            return Err("empty option (two commas, or a trailing comma)".into());
        }
        let (key, value) = match item.split_once('=') {
            Some(kv) => kv,
            None if i == 0 => ("profile", item),
            None => {
                return Err(format!(
                    "{item:?} is not a key=value option (valid options: {})",
                    EMULATOR_OPTIONS.join(", ")
                ))
            }
        };
        emulator_option(&mut u, key, value)?;
    }
    check_emulator_options(&u)?;
    Ok(u)
}

/// Sets option `key` of an `emu:` URI to `value`.
fn emulator_option(u: &mut EmulatorUri, key: &str, value: &str) -> Result<(), String> {
    match key {
        "profile" => once(&mut u.profile, key, || emulator_profile(value)),
        "file" => once(&mut u.file, key, || match value {
            "" => Err("file= needs a path".into()),
            _ => Ok(PathBuf::from(value)),
        }),
        "media" => once(&mut u.media, key, || match value {
            "ram" => Ok(EmulatorMedia::Ram),
            "null" => Ok(EmulatorMedia::Null),
            _ => Err(one_of(key, value, EmulatorMedia::VALUES)),
        }),
        "timing" => once(&mut u.timing, key, || match value {
            "on" => Ok(Timing::On),
            "off" => Ok(Timing::Off),
            _ => Err(one_of(key, value, Timing::VALUES)),
        }),
        "clock" => once(&mut u.clock, key, || match value {
            "virtual" => Ok(ClockMode::Virtual),
            "real" => Ok(ClockMode::Real),
            _ => Err(one_of(key, value, &["virtual", "real"])),
        }),
        "dilation" => once(&mut u.dilation, key, || value.parse::<Dilation>()),
        "metadata" => once(&mut u.metadata, key, || {
            value.parse::<u16>().map_err(|_| {
                format!("metadata={value:?}: expected bytes of metadata per block (0 to 65535)")
            })
        }),
        "lba" => once(&mut u.lba, key, || match value.parse::<u32>() {
            Ok(n) if valid_block_size(n) => Ok(n),
            _ => Err(format!(
                "lba={value:?}: expected a block size in bytes, a power of two from 512 to \
                 65536 (512 or 4096 on a ZN540)"
            )),
        }),
        "op" => once(&mut u.op, key, || match value.trim_end_matches('%').parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(n),
            _ => Err(format!(
                "op={value:?}: expected a whole percentage of over-provisioning from 1 to 1000 \
                 (7 and 28 are the presets)"
            )),
        }),
        "zrwa" => once(&mut u.zrwa, key, || {
            ZrwaOption::parse(value).ok_or_else(|| {
                format!(
                    "zrwa={value:?}: expected SIZE/GRANULARITY/RESOURCES in blocks, e.g. 16/4/2 \
                     (a size up to 65535 that the granularity divides, at least one resource)"
                )
            })
        }),
        "trace" => once(&mut u.trace, key, || match value {
            "" => Err("trace= needs a file name".into()),
            _ => Ok(PathBuf::from(value)),
        }),
        "trace_events" => once(&mut u.trace_events, key, || match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("trace_events={value:?}: expected a number of events >= 1")),
        }),
        "zones" => once(&mut u.zones, key, || match value.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("zones={value:?}: expected a number of zones >= 1")),
        }),
        _ => {
            Err(format!("unknown option {key:?} (valid options: {})", EMULATOR_OPTIONS.join(", ")))
        }
    }
}

/// An `emu:` URI's profile: a built-in one's name, or a profile file.
fn emulator_profile(value: &str) -> Result<String, String> {
    if !Profile::built_in_names().any(|n| n == value) && !is_profile_file(value) {
        let known = Profile::built_in_names().collect::<Vec<_>>().join(", ");
        return Err(format!(
            "unknown profile {value:?} (built-in profiles: {known}; or a profile file ending in \
             .toml)"
        ));
    }
    Ok(value.to_string())
}

/// Options of an `emu:` URI that do not combine.
fn check_emulator_options(u: &EmulatorUri) -> Result<(), String> {
    if u.file.is_some()
        && (u.zones.is_some()
            || u.metadata.is_some()
            || u.lba.is_some()
            || u.op.is_some()
            || u.zrwa.is_some())
    {
        return Err("zones=, metadata=, op=, lba= and zrwa= do not combine with file= (an image \
                    keeps its geometry)"
            .into());
    }
    if u.file.is_some() && u.media.is_some() {
        return Err("media= does not combine with file= (an image is file media)".into());
    }
    if u.timing == Some(Timing::Off) && u.clock.is_some() {
        return Err("clock= needs the timing model; it does not combine with timing=off".into());
    }
    if u.timing == Some(Timing::Off) && u.dilation.is_some() {
        return Err("dilation= needs the timing model; it does not combine with timing=off".into());
    }
    if u.timing == Some(Timing::Off) && u.trace.is_some() {
        return Err("trace= needs the timing model; it does not combine with timing=off".into());
    }
    if u.trace_events.is_some() && u.trace.is_none() {
        return Err("trace_events= sizes a trace: it needs trace=FILE".into());
    }
    Ok(())
}

impl fmt::Display for EmulatorUri {
    /// The canonical form, e.g. `emu:tiny,media=null`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self;
        let mut parts = Vec::new();
        match (&u.file, &u.profile) {
            (Some(p), prof) => {
                parts.push(format!("file={}", p.display()));
                if let Some(n) = prof {
                    parts.push(format!("profile={n}"));
                }
            }
            (None, _) => parts.push(u.profile_name().to_string()),
        }
        if let Some(m) = u.media {
            parts.push(format!("media={}", m.name()));
        }
        if let Some(t) = u.timing {
            parts.push(format!("timing={}", t.name()));
        }
        if let Some(c) = u.clock {
            parts.push(format!("clock={}", c.name()));
        }
        if let Some(d) = u.dilation {
            parts.push(format!("dilation={d}"));
        }
        if let Some(n) = u.zones {
            parts.push(format!("zones={n}"));
        }
        if let Some(n) = u.metadata {
            parts.push(format!("metadata={n}"));
        }
        if let Some(n) = u.lba {
            parts.push(format!("lba={n}"));
        }
        if let Some(n) = u.op {
            parts.push(format!("op={n}"));
        }
        if let Some(z) = u.zrwa {
            parts.push(format!("zrwa={z}"));
        }
        if let Some(t) = &u.trace {
            parts.push(format!("trace={}", t.display()));
        }
        if let Some(n) = u.trace_events {
            parts.push(format!("trace_events={n}"));
        }
        write!(f, "emu:{}", parts.join(","))
    }
}

/// Sets option `key` to what `value` makes of it, unless it was given
/// before.
fn once<T>(
    slot: &mut Option<T>,
    key: &str,
    value: impl FnOnce() -> Result<T, String>,
) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("option {key:?} given twice"));
    }
    *slot = Some(value()?);
    Ok(())
}
