//! The eZNS configuration file and the `ezns:` device URI.
//!
//! One TOML file describes one base device and the tenant namespaces
//! carved out of it:
//!
//! ```toml
//! device = "emu:small-zone,media=null"   # the base device's URI
//! mode = "elastic"                       # or "static"
//! zone_scale = 16                        # physical zones' capacity per logical zone
//! stripe_unit_kib = 64
//! max_width = 16
//!
//! [[tenant]]
//! name = "a"
//! zones = 64             # logical zones
//! active_zones = 16      # Max Active (= Max Open) logical zones
//! ```
//!
//! A tenant is then the device `ezns:config=PATH,tenant=NAME`. The base
//! URI lives in the file, not in the tenant's URI: base URIs carry their
//! own commas, colons and, in file paths and NQNs, `@`, so any separator
//! would need escaping; and every tenant of a device must agree on it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EznsError;

/// Most tenants one device carries.
pub const MAX_TENANTS: usize = 64;

/// How logical zones are striped.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// eZNS: stripe width per stripe group from essentials plus spares
    /// (local and global overdrive), the die-aware serial allocator, read
    /// congestion control and write admission control.
    #[default]
    Elastic,
    /// The baseline: every logical zone striped over a fixed number of
    /// physical zones (a tenant's share of the active zones divided by its
    /// active logical zones), taken lowest index first, no I/O scheduling.
    Static,
}

impl Mode {
    /// `"elastic"` or `"static"`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Elastic => "elastic",
            Mode::Static => "static",
        }
    }
}

/// The zoned I/O scheduler (elastic mode only).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Per-zone read congestion control.
    pub read_cc: bool,
    /// A read slower than this (device time, from submission to
    /// completion) is a congestion signal for its logical zone.
    pub read_target_us: u64,
    /// Largest read congestion window (reads in flight per logical zone).
    pub read_window_max: u32,
    /// Per-device write admission control.
    pub write_admission: bool,
    /// A fixed average write latency above which the device's write window
    /// shrinks. Unset (the default): the target is the device's measured
    /// uncongested write latency times `write_target_factor`.
    pub write_target_us: Option<u64>,
    /// With no fixed target: how many times the uncongested write latency
    /// (the fastest full stripe-unit write seen lately) the average write
    /// latency may reach before the window shrinks. Writes that slow have
    /// waited for write-buffer room or for busy dies, not for the link.
    pub write_target_factor: f64,
    /// Smallest and largest device write window in KiB.
    pub write_window_min_kib: u64,
    /// Largest device write window in KiB.
    pub write_window_max_kib: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            read_cc: true,
            read_target_us: 400,
            read_window_max: 64,
            write_admission: true,
            write_target_us: None,
            write_target_factor: 8.0,
            write_window_min_kib: 1024,
            write_window_max_kib: 64 * 1024,
        }
    }
}

/// One tenant namespace.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Name (letters, digits, `-`, `_`; at most 32 bytes).
    pub name: String,
    /// Logical zones of the namespace.
    pub zones: u32,
    /// Max Active Resources (and Max Open Resources) in logical zones.
    pub active_zones: u32,
    /// Essential physical active zones: the namespace's own, never lent.
    /// Default: half its share, at least one per active logical zone.
    #[serde(default)]
    pub essential: Option<u32>,
    /// Spare physical active zones: lent to busy namespaces while this one
    /// is idle. Default: the rest of its share.
    #[serde(default)]
    pub spare: Option<u32>,
}

/// The configuration file.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The base device's URI.
    pub device: String,
    /// Elastic (eZNS) or static striping.
    #[serde(default)]
    pub mode: Mode,
    /// Physical zones' capacity in one logical zone.
    #[serde(default = "default_zone_scale")]
    pub zone_scale: u32,
    /// Stripe unit in KiB (a whole number of blocks dividing the physical
    /// zone capacity).
    #[serde(default = "default_unit")]
    pub stripe_unit_kib: u32,
    /// Widest stripe group (elastic mode).
    #[serde(default = "default_max_width")]
    pub max_width: u32,
    /// Dies of the base device; absent: from the emulator's timing model,
    /// else 1 (no die awareness).
    #[serde(default)]
    pub dies: Option<u32>,
    /// Dies one physical zone is striped over (zone `i` on dies
    /// `i·n .. i·n + n` modulo `dies`); absent: from the emulator, else 1.
    #[serde(default)]
    pub zone_dies: Option<u32>,
    /// Active physical zones kept free of every tenant's share, for
    /// restripes in flight. Default: `max_width` (elastic), 0 (static).
    #[serde(default)]
    pub headroom: Option<u32>,
    /// A namespace with no write for this long (device time) is inactive
    /// and lends its spares.
    #[serde(default = "default_idle_ms")]
    pub idle_ms: u64,
    /// How often (device time) the arbiter looks at the namespaces.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// On a base device on the real clock, how often (real time, µs) a
    /// background thread polls eZNS's internal commands and runs the
    /// arbiter when no tenant queue does; 0: never (only tenant queues'
    /// polls move them, as on a virtual clock always).
    #[serde(default = "default_pump_us")]
    pub pump_us: u64,
    /// The zoned I/O scheduler.
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    /// The namespaces.
    #[serde(rename = "tenant")]
    pub tenants: Vec<TenantConfig>,
}

fn default_zone_scale() -> u32 {
    16
}
fn default_unit() -> u32 {
    64
}
fn default_max_width() -> u32 {
    16
}
fn default_idle_ms() -> u64 {
    1000
}
fn default_tick_ms() -> u64 {
    100
}
fn default_pump_us() -> u64 {
    200
}

impl Config {
    /// Parses the TOML text of a configuration.
    pub fn from_toml(text: &str) -> Result<Config, EznsError> {
        let c: Config = toml::from_str(text).map_err(|e| EznsError::Config(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<Config, EznsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| EznsError::Config(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text)
            .map_err(|e| EznsError::Config(format!("{}: {}", path.display(), e.reason())))
    }

    /// The TOML text of this configuration.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a configuration serializes")
    }

    /// The tenant named `name` and its index.
    pub fn tenant(&self, name: &str) -> Option<(usize, &TenantConfig)> {
        self.tenants.iter().enumerate().find(|(_, t)| t.name == name)
    }

    /// Checks what can be checked without the base device.
    pub fn check(&self) -> Result<(), EznsError> {
        let bad = |m: String| Err(EznsError::Config(m));
        if self.tenants.is_empty() {
            return bad("no [[tenant]]".into());
        }
        if self.tenants.len() > MAX_TENANTS {
            return bad(format!("{} tenants (at most {MAX_TENANTS})", self.tenants.len()));
        }
        if self.zone_scale == 0 || self.stripe_unit_kib == 0 || self.max_width == 0 {
            return bad("zone_scale, stripe_unit_kib and max_width must be at least 1".into());
        }
        if self.max_width > crate::journal::MAX_COLUMNS as u32 {
            return bad(format!(
                "max_width {} (at most {})",
                self.max_width,
                crate::journal::MAX_COLUMNS
            ));
        }
        if self.dies == Some(0) || self.zone_dies == Some(0) {
            return bad("dies and zone_dies must be at least 1".into());
        }
        if self.tick_ms == 0 {
            return bad("tick_ms must be at least 1".into());
        }
        let s = &self.scheduler;
        if s.read_window_max == 0 || s.write_window_min_kib == 0 {
            return bad("scheduler windows must be at least 1".into());
        }
        if !(s.write_target_factor >= 1.0 && s.write_target_factor.is_finite()) {
            return bad("scheduler.write_target_factor must be at least 1".into());
        }
        if s.write_target_us == Some(0) {
            return bad("scheduler.write_target_us must be at least 1".into());
        }
        if s.write_window_min_kib > s.write_window_max_kib {
            return bad("scheduler.write_window_min_kib above write_window_max_kib".into());
        }
        for (i, t) in self.tenants.iter().enumerate() {
            let ok = !t.name.is_empty()
                && t.name.len() <= 32
                && t.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                return bad(format!(
                    "tenant name {:?}: 1 to 32 letters, digits, '-' or '_'",
                    t.name
                ));
            }
            if self.tenants[..i].iter().any(|o| o.name == t.name) {
                return bad(format!("tenant {:?} named twice", t.name));
            }
            if t.zones == 0 || t.active_zones == 0 {
                return bad(format!(
                    "tenant {:?}: zones and active_zones must be at least 1",
                    t.name
                ));
            }
            if t.active_zones > t.zones {
                return bad(format!(
                    "tenant {:?}: active_zones {} above its zones {}",
                    t.name, t.active_zones, t.zones
                ));
            }
        }
        Ok(())
    }
}

/// Options an `ezns:` URI accepts.
pub const URI_OPTIONS: &[&str] = &["config", "tenant"];

/// A parsed `ezns:config=PATH,tenant=NAME` URI.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EznsUri {
    /// The configuration file.
    pub config: PathBuf,
    /// The tenant's name.
    pub tenant: String,
}

impl std::str::FromStr for EznsUri {
    type Err = EznsError;

    fn from_str(uri: &str) -> Result<Self, EznsError> {
        let bad = |reason: String| EznsError::Uri { uri: uri.to_string(), reason };
        let Some(rest) = uri.strip_prefix("ezns:") else {
            return Err(bad("not an ezns: URI".into()));
        };
        let (mut config, mut tenant) = (None, None);
        for item in rest.split(',') {
            let Some((key, value)) = item.split_once('=') else {
                return Err(bad(format!(
                    "{item:?} is not a key=value option (expected ezns:config=PATH,tenant=NAME)"
                )));
            };
            let slot = match key {
                "config" => &mut config,
                "tenant" => &mut tenant,
                _ => {
                    return Err(bad(format!(
                        "unknown option {key:?} (valid options: {})",
                        URI_OPTIONS.join(", ")
                    )))
                }
            };
            if value.is_empty() {
                return Err(bad(format!("{key}= needs a value")));
            }
            if slot.replace(value.to_string()).is_some() {
                return Err(bad(format!("option {key:?} given twice")));
            }
        }
        match (config, tenant) {
            (Some(c), Some(t)) => Ok(EznsUri { config: PathBuf::from(c), tenant: t }),
            _ => Err(bad("expected ezns:config=PATH,tenant=NAME".into())),
        }
    }
}

impl std::fmt::Display for EznsUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ezns:config={},tenant={}", self.config.display(), self.tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
device = "emu:small-zone,media=null"
zone_scale = 4

[[tenant]]
name = "a"
zones = 8
active_zones = 4

[[tenant]]
name = "b-2"
zones = 8
active_zones = 2
essential = 4
spare = 6
"#;

    #[test]
    fn parses_with_defaults_and_round_trips() {
        let c = Config::from_toml(TEXT).unwrap();
        assert_eq!(
            (c.mode, c.zone_scale, c.stripe_unit_kib, c.max_width),
            (Mode::Elastic, 4, 64, 16)
        );
        assert_eq!(c.tenant("b-2").unwrap().0, 1);
        assert_eq!(c.tenants[1].spare, Some(6));
        assert!(c.scheduler.read_cc && c.scheduler.write_admission);
        assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let err = |t: &str| Config::from_toml(t).unwrap_err().to_string();
        assert!(err("device = \"emu:tiny\"\ntenant = []").contains("no [[tenant]]"));
        assert!(err(&TEXT.replace("\"b-2\"", "\"a\"")).contains("named twice"));
        assert!(err(&TEXT.replace("\"b-2\"", "\"b c\"")).contains("letters, digits"));
        assert!(
            err(&TEXT.replace("active_zones = 2", "active_zones = 9")).contains("above its zones")
        );
        assert!(err(&TEXT.replace("zone_scale = 4", "zone_scale = 0")).contains("at least 1"));
        assert!(err(&format!("{TEXT}\nspeed = 3")).contains("speed"));
        assert!(err(&TEXT.replace("mode", "x").replace("zone_scale = 4", "mode = \"fast\""))
            .contains("fast"));
    }

    #[test]
    fn uris_parse_strictly() {
        let u: EznsUri = "ezns:config=/x/e.toml,tenant=a".parse().unwrap();
        assert_eq!((u.config.to_str(), u.tenant.as_str()), (Some("/x/e.toml"), "a"));
        assert_eq!(u.to_string(), "ezns:config=/x/e.toml,tenant=a");
        let u: EznsUri = "ezns:tenant=b,config=c@d.toml".parse().unwrap();
        assert_eq!(u.config.to_str(), Some("c@d.toml"));
        for (bad, why) in [
            ("ezns:tenant=a", "expected ezns:config=PATH,tenant=NAME"),
            ("ezns:config=x,tenant=a,tenant=b", "twice"),
            ("ezns:config=x,tenant=", "needs a value"),
            ("ezns:config=x,tenant=a,speed=1", "valid options: config, tenant"),
            ("ezns:a@emu:tiny", "key=value"),
        ] {
            let e = bad.parse::<EznsUri>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
