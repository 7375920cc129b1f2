//! Device URIs: one string selects a backend and its options.
//!
//! Every form, with what it opens, is listed once in [`URI_FORMS`]
//! (`emu:tiny`, `emu:file=PATH`, `pcie:0000:00:04.0`, `ng:/dev/ng0n1`,
//! `zbd:/dev/nvme0n1`, `tcp:HOST:PORT/NQN[/NSID]` and their options);
//! `zns --help`, the README and docs/cli.md print that list.
//!
//! Crates above this one add schemes of their own with [`register_scheme`]
//! (`ezns:config=PATH,tenant=NAME`, a tenant namespace of elastic logical
//! zones, from `zns-ezns`).
//!
//! Options are `key=value` pairs separated by commas, parsed strictly: an
//! unknown key, a repeated key or a bad value is an error naming it and the
//! valid choices. A `file=` path therefore cannot contain a comma.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, RwLock};

use zns_driver::transport::PciBinding;
use zns_driver::PciAddress;

use crate::error::DeviceError;

#[cfg(feature = "emulator")]
mod emulator;
mod forms;
#[cfg(feature = "emulator")]
pub use emulator::{
    is_profile_file, load_profile, ClockMode, Dilation, EmulatorMedia, EmulatorUri, Timing,
    ZrwaOption, EMULATOR_OPTIONS,
};
pub use forms::{help_text, markdown_table, plain, UriForm, URI_FORMS, URI_OPTIONS_NOTE};

/// The profile `emu:` uses when none is named.
pub const DEFAULT_PROFILE: &str = "zn540";

/// The URI used when none is given.
pub const DEFAULT_URI: &str = "emu:zn540";

/// URI schemes this build accepts.
#[cfg(feature = "emulator")]
pub const SCHEMES: &[&str] = &["emu", "pcie", "ng", "zbd", "tcp"];
/// URI schemes this build accepts.
#[cfg(not(feature = "emulator"))]
pub const SCHEMES: &[&str] = &["pcie", "ng", "zbd", "tcp"];

/// Opens a device of a layered scheme from its whole URI.
pub type SchemeOpener = fn(&str) -> crate::Result<Arc<dyn crate::ZonedDevice>>;

/// Schemes served by crates layered above this one: name, usage, opener.
static LAYERED: RwLock<Vec<(&'static str, &'static str, SchemeOpener)>> = RwLock::new(Vec::new());

/// Registers a URI scheme served by a crate layered above this one (it
/// cannot be a dependency of this crate), so that [`crate::open`] and every
/// tool built on it accept its URIs: `scheme` is the name before the colon,
/// `usage` its form for error messages (`ezns:config=PATH,tenant=NAME`).
/// Registering a scheme again replaces its opener; the built-in schemes
/// cannot be replaced.
///
/// Thread safety: callable from any thread, at any time.
pub fn register_scheme(scheme: &'static str, usage: &'static str, opener: SchemeOpener) {
    if SCHEMES.contains(&scheme) {
        return;
    }
    let mut l = LAYERED.write().unwrap_or_else(|e| e.into_inner());
    l.retain(|(s, _, _)| *s != scheme);
    l.push((scheme, usage, opener));
}

/// The opener of a registered layered scheme.
pub fn layered_opener(scheme: &str) -> Option<SchemeOpener> {
    let l = LAYERED.read().unwrap_or_else(|e| e.into_inner());
    l.iter().find(|(s, _, _)| *s == scheme).map(|(_, _, o)| *o)
}

/// Every scheme this process accepts: the built-in ones and the
/// registered layered ones.
pub fn schemes() -> Vec<&'static str> {
    let l = LAYERED.read().unwrap_or_else(|e| e.into_inner());
    SCHEMES.iter().copied().chain(l.iter().map(|(s, _, _)| *s)).collect()
}

/// Options a `zbd:` URI accepts.
pub const ZONED_BLOCK_OPTIONS: &[&str] = &["io"];

/// How the zoned block backend moves data.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlockIo {
    /// io_uring reads and writes with `O_DIRECT`, many in flight (the
    /// default; `pread`/`pwrite` when the kernel has no io_uring).
    #[default]
    Uring,
    /// `pread`/`pwrite` with `O_DIRECT`, one at a time, when the queue is
    /// rung.
    Psync,
}

impl BlockIo {
    const VALUES: &'static [&'static str] = &["uring", "psync"];

    /// The option value (`uring`, `psync`).
    pub fn name(self) -> &'static str {
        match self {
            BlockIo::Uring => "uring",
            BlockIo::Psync => "psync",
        }
    }
}

/// Options of a `pcie:` URI.
pub const PCIE_OPTIONS: &[&str] = &["transport"];

/// A `pcie:` URI.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieUri {
    /// The controller's PCI function.
    pub addr: PciAddress,
    /// Which user-space path reaches it (`transport=`; `auto` when absent).
    pub binding: PciBinding,
}

/// A `zbd:` URI.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonedBlockUri {
    /// The block device (`/dev/nvme0n1`).
    pub path: PathBuf,
    /// How data moves; `None` = the default.
    pub io: Option<BlockIo>,
}

/// A parsed device URI.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceUri {
    /// `emu:...`: the in-process emulator through the user-space driver
    /// (the `emulator` feature).
    #[cfg(feature = "emulator")]
    Emulator(EmulatorUri),
    /// `pcie:BDF[,transport=...]`: the user-space driver on a PCIe
    /// controller.
    Pcie(PcieUri),
    /// `ng:PATH`: io_uring NVMe passthrough on a generic namespace device.
    Passthrough(PathBuf),
    /// `zbd:PATH[,io=...]`: the kernel's zoned block device.
    ZonedBlock(ZonedBlockUri),
    /// `tcp:HOST:PORT/NQN[/NSID]`: an NVMe/TCP target.
    Tcp(TcpUri),
    /// A scheme registered with [`register_scheme`]: its name and the
    /// whole URI, which its opener parses.
    Layered {
        /// The scheme.
        scheme: String,
        /// The whole URI.
        uri: String,
    },
}

/// What a `tcp:` URI names.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpUri {
    /// `HOST:PORT` (an IPv6 host in brackets).
    pub addr: String,
    /// The subsystem NQN.
    pub nqn: String,
    /// The namespace; `None`: the first zoned namespace.
    pub nsid: Option<u32>,
    /// Header digests.
    pub header_digest: bool,
    /// Data digests.
    pub data_digest: bool,
    /// Microseconds a queue waiting for the target spins on its socket
    /// before it sleeps in a blocking read (`poll_us=N`; 0: never spins).
    pub poll_us: u32,
    /// The host NQN to connect as (`hostnqn=NQN`); `None`: znskit's own.
    pub hostnqn: Option<String>,
    /// The host's DH-HMAC-CHAP secret (`dhchap_secret=DHHC-1:...`), used
    /// when the target asks the host to authenticate.
    pub dhchap_secret: Option<zns_spec::auth::Secret>,
    /// The controller's secret (`dhchap_ctrl_secret=DHHC-1:...`): the
    /// target must then prove itself too.
    pub dhchap_ctrl_secret: Option<zns_spec::auth::Secret>,
}

/// The longest spin `poll_us` takes: one second.
pub const MAX_POLL_US: u32 = 1_000_000;

fn parse_tcp(rest: &str) -> Result<TcpUri, String> {
    let (main, opts) = match rest.split_once(',') {
        Some((m, o)) => (m, Some(o)),
        None => (rest, None),
    };
    let usage =
        "expected tcp:HOST:PORT/NQN[/NSID], e.g. tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target";
    let Some((addr, path)) = main.split_once('/') else { return Err(usage.into()) };
    let port_ok =
        addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if !port_ok {
        return Err(format!("{addr:?} is not HOST:PORT ({usage})"));
    }
    let (nqn, nsid) = match path.split_once('/') {
        Some((n, id)) => {
            let v: u32 = id.parse().map_err(|_| format!("{id:?} is not a namespace ID"))?;
            if v == 0 || v == u32::MAX {
                return Err(format!("namespace ID {v} is not a valid NSID"));
            }
            (n, Some(v))
        }
        None => (path, None),
    };
    if !nqn.starts_with("nqn.") || nqn.len() > 223 {
        return Err(format!("{nqn:?} is not an NQN (\"nqn.\" and at most 223 bytes)"));
    }
    let mut u = TcpUri {
        addr: addr.to_string(),
        nqn: nqn.to_string(),
        nsid,
        header_digest: false,
        data_digest: false,
        poll_us: 0,
        hostnqn: None,
        dhchap_secret: None,
        dhchap_ctrl_secret: None,
    };
    let mut seen = Vec::new();
    for item in opts.into_iter().flat_map(|o| o.split(',')) {
        let key = item.split_once('=').map_or(item, |(k, _)| k);
        if seen.contains(&key) {
            return Err(format!("option {key:?} is given twice"));
        }
        seen.push(key);
        match item.split_once('=') {
            Some(("digest", v)) => {
                let (h, d) = match v {
                    "none" => (false, false),
                    "header" => (true, false),
                    "data" => (false, true),
                    "both" => (true, true),
                    _ => return Err(format!("digest={v:?}: one of none, header, data, both")),
                };
                u.header_digest = h;
                u.data_digest = d;
            }
            Some(("poll_us", v)) => {
                u.poll_us =
                    v.parse().ok().filter(|us| *us <= MAX_POLL_US).ok_or_else(|| {
                        format!("poll_us={v:?}: microseconds, 0 to {MAX_POLL_US}")
                    })?;
            }
            Some(("hostnqn", v)) => {
                if !v.starts_with("nqn.") || v.len() > 223 {
                    return Err(format!("hostnqn={v:?} is not an NQN"));
                }
                u.hostnqn = Some(v.to_string());
            }
            Some(("dhchap_secret", v)) => {
                u.dhchap_secret = Some(
                    zns_spec::auth::Secret::parse(v).map_err(|e| format!("dhchap_secret: {e}"))?,
                );
            }
            Some(("dhchap_ctrl_secret", v)) => {
                u.dhchap_ctrl_secret = Some(
                    zns_spec::auth::Secret::parse(v)
                        .map_err(|e| format!("dhchap_ctrl_secret: {e}"))?,
                );
            }
            _ => {
                return Err(format!(
                    "{:?} is not an option of tcp: (valid options: digest, poll_us, hostnqn, \
                     dhchap_secret, dhchap_ctrl_secret)",
                    item.split_once('=').map_or(item, |(k, _)| k)
                ))
            }
        }
    }
    if u.dhchap_ctrl_secret.is_some() && u.dhchap_secret.is_none() {
        return Err("dhchap_ctrl_secret needs dhchap_secret too".into());
    }
    Ok(u)
}

/// `uri` with the value of every option whose name says secret replaced,
/// for error messages (a mistyped option name included).
fn without_secrets(uri: &str) -> String {
    let mut parts = uri.split(',');
    let mut out = parts.next().unwrap_or_default().to_string();
    for p in parts {
        out.push(',');
        match p.split_once('=') {
            Some((k, _)) if k.contains("secr") => out.push_str(&format!("{k}=(hidden)")),
            _ => out.push_str(p),
        }
    }
    out
}

impl FromStr for DeviceUri {
    type Err = DeviceError;

    fn from_str(uri: &str) -> Result<Self, DeviceError> {
        let bad = |reason: String| DeviceError::uri(&without_secrets(uri), reason);
        let (scheme, rest) = match uri.split_once(':') {
            Some((s, r)) => (s, r),
            None if uri == "emu" => ("emu", ""),
            None => {
                return Err(bad(format!(
                    "no scheme; expected SCHEME:..., one of {} (e.g. emu:tiny, pcie:0000:00:04.0)",
                    schemes().join(", ")
                )))
            }
        };
        match scheme {
            #[cfg(feature = "emulator")]
            "emu" => emulator::parse(rest).map(DeviceUri::Emulator).map_err(bad),
            #[cfg(not(feature = "emulator"))]
            "emu" => Err(bad(
                "this build has no emulator (zns-device without its emulator feature)".into(),
            )),
            "pcie" => parse_pcie(rest).map(DeviceUri::Pcie).map_err(bad),
            "ng" => {
                if rest.is_empty() {
                    return Err(bad("ng: needs a device path, e.g. ng:/dev/ng0n1".into()));
                }
                if rest.contains(',') {
                    return Err(bad("ng: URIs take no options".into()));
                }
                Ok(DeviceUri::Passthrough(PathBuf::from(rest)))
            }
            "zbd" => parse_zoned_block(rest).map(DeviceUri::ZonedBlock).map_err(bad),
            "tcp" => parse_tcp(rest).map(DeviceUri::Tcp).map_err(bad),
            other if layered_opener(other).is_some() => {
                Ok(DeviceUri::Layered { scheme: other.to_string(), uri: uri.to_string() })
            }
            other => Err(bad(format!(
                "unknown device URI scheme {other:?} (known schemes: {})",
                schemes().join(", ")
            ))),
        }
    }
}

fn parse_pcie(rest: &str) -> Result<PcieUri, String> {
    let mut items = rest.split(',');
    let bdf = items.next().unwrap_or_default();
    let addr: PciAddress = bdf.parse().map_err(|_| {
        format!("{bdf:?} is not a PCI address (expected DDDD:BB:DD.F, e.g. 0000:00:04.0)")
    })?;
    let mut binding = None;
    for item in items {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "{item:?} is not a key=value option (valid options: {})",
                PCIE_OPTIONS.join(", ")
            ));
        };
        match key {
            "transport" if binding.is_some() => return Err(format!("option {key:?} given twice")),
            "transport" => {
                binding = Some(
                    value
                        .parse::<PciBinding>()
                        .map_err(|_| one_of(key, value, PciBinding::VALUES))?,
                )
            }
            _ => {
                return Err(format!(
                    "unknown option {key:?} (valid options: {})",
                    PCIE_OPTIONS.join(", ")
                ))
            }
        }
    }
    Ok(PcieUri { addr, binding: binding.unwrap_or_default() })
}

fn parse_zoned_block(rest: &str) -> Result<ZonedBlockUri, String> {
    let mut items = rest.split(',');
    let path = items.next().unwrap_or_default();
    if path.is_empty() {
        return Err("zbd: needs a block device path, e.g. zbd:/dev/nvme0n1".into());
    }
    let mut u = ZonedBlockUri { path: PathBuf::from(path), io: None };
    for item in items {
        if item.is_empty() {
            return Err("empty option (two commas, or a trailing comma)".into());
        }
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "{item:?} is not a key=value option (valid options: {})",
                ZONED_BLOCK_OPTIONS.join(", ")
            ));
        };
        match key {
            "io" => {
                if u.io.is_some() {
                    return Err(format!("option {key:?} given twice"));
                }
                u.io = Some(match value {
                    "uring" => BlockIo::Uring,
                    "psync" => BlockIo::Psync,
                    _ => return Err(one_of(key, value, BlockIo::VALUES)),
                });
            }
            _ => {
                return Err(format!(
                    "unknown option {key:?} (valid options: {})",
                    ZONED_BLOCK_OPTIONS.join(", ")
                ))
            }
        }
    }
    Ok(u)
}

fn one_of(key: &str, value: &str, valid: &[&str]) -> String {
    format!("{key}={value:?} is not valid (valid values: {})", valid.join(", "))
}

impl fmt::Display for DeviceUri {
    /// The canonical form, e.g. `emu:tiny,media=null`, `pcie:0000:00:04.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceUri::Pcie(p) => {
                write!(f, "pcie:{}", p.addr)?;
                if p.binding != PciBinding::Auto {
                    write!(f, ",transport={}", p.binding.name())?;
                }
                Ok(())
            }
            DeviceUri::Layered { uri, .. } => f.write_str(uri),
            DeviceUri::Tcp(t) => {
                write!(f, "tcp:{}/{}", t.addr, t.nqn)?;
                if let Some(n) = t.nsid {
                    write!(f, "/{n}")?;
                }
                match (t.header_digest, t.data_digest) {
                    (false, false) => {}
                    (true, false) => write!(f, ",digest=header")?,
                    (false, true) => write!(f, ",digest=data")?,
                    (true, true) => write!(f, ",digest=both")?,
                }
                if t.poll_us > 0 {
                    write!(f, ",poll_us={}", t.poll_us)?;
                }
                if let Some(h) = &t.hostnqn {
                    write!(f, ",hostnqn={h}")?;
                }
                // Secrets are never shown: URIs end up in logs and results.
                if t.dhchap_secret.is_some() {
                    write!(f, ",dhchap_secret=(hidden)")?;
                }
                if t.dhchap_ctrl_secret.is_some() {
                    write!(f, ",dhchap_ctrl_secret=(hidden)")?;
                }
                Ok(())
            }
            DeviceUri::Passthrough(p) => write!(f, "ng:{}", p.display()),
            DeviceUri::ZonedBlock(z) => {
                write!(f, "zbd:{}", z.path.display())?;
                if let Some(io) = z.io {
                    write!(f, ",io={}", io.name())?;
                }
                Ok(())
            }
            #[cfg(feature = "emulator")]
            DeviceUri::Emulator(u) => write!(f, "{u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_uris_parse_print_and_refuse_bad_parts() {
        let u: DeviceUri =
            "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:t/2,digest=both".parse().unwrap();
        let DeviceUri::Tcp(t) = &u else { panic!("{u:?}") };
        assert_eq!(
            (t.addr.as_str(), t.nqn.as_str(), t.nsid),
            ("127.0.0.1:4420", "nqn.2026-11.io.znskit:t", Some(2))
        );
        assert!(t.header_digest && t.data_digest);
        assert_eq!(u.to_string(), "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:t/2,digest=both");
        let v6: DeviceUri = "tcp:[::1]:4420/nqn.a".parse().unwrap();
        assert_eq!(v6.to_string(), "tcp:[::1]:4420/nqn.a");
        let polled: DeviceUri = "tcp:[::1]:4420/nqn.a,poll_us=50,digest=header".parse().unwrap();
        let DeviceUri::Tcp(t) = &polled else { panic!("{polled:?}") };
        assert_eq!((t.poll_us, t.header_digest, t.data_digest), (50, true, false));
        assert_eq!(polled.to_string(), "tcp:[::1]:4420/nqn.a,digest=header,poll_us=50");
        for (bad, why) in [
            ("tcp:127.0.0.1/nqn.a", "HOST:PORT"),
            ("tcp:127.0.0.1:4420", "expected tcp:"),
            ("tcp:127.0.0.1:4420/notnqn", "not an NQN"),
            ("tcp:127.0.0.1:4420/nqn.a/0", "not a valid NSID"),
            ("tcp:127.0.0.1:4420/nqn.a,digest=all", "digest="),
            ("tcp:127.0.0.1:4420/nqn.a,x=1", "valid options"),
            ("tcp:127.0.0.1:4420/nqn.a,poll_us=-1", "poll_us="),
            ("tcp:127.0.0.1:4420/nqn.a,poll_us=1000001", "0 to 1000000"),
            ("tcp:127.0.0.1:4420/nqn.a,poll_us=1,poll_us=2", "given twice"),
            ("tcp:127.0.0.1:4420/nqn.a,hostnqn=host", "not an NQN"),
            ("tcp:127.0.0.1:4420/nqn.a,dhchap_secret=DHHC-1:00:AAAA:", "dhchap_secret"),
            (&format!("tcp:127.0.0.1:4420/nqn.a,dhchap_ctrl_secret={SECRET}"), "needs"),
        ] {
            let e = bad.parse::<DeviceUri>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // Secrets parse, and never show again.
        let text = format!("tcp:127.0.0.1:4420/nqn.a,hostnqn=nqn.h,dhchap_secret={SECRET}");
        let u: DeviceUri = text.parse().unwrap();
        let DeviceUri::Tcp(t) = &u else { panic!("{u:?}") };
        assert_eq!(t.hostnqn.as_deref(), Some("nqn.h"));
        assert_eq!(t.dhchap_secret.as_ref().map(|s| s.to_string()).as_deref(), Some(SECRET));
        assert_eq!(u.to_string(), "tcp:127.0.0.1:4420/nqn.a,hostnqn=nqn.h,dhchap_secret=(hidden)");
        // A mistyped option name does not echo the value that follows it.
        let e = format!("tcp:127.0.0.1:4420/nqn.a,dhchap_secrt={SECRET}")
            .parse::<DeviceUri>()
            .unwrap_err()
            .to_string();
        assert!(!e.contains("AAECAw"), "{e}");
    }

    /// A valid DH-HMAC-CHAP secret (key bytes 0..32, SHA-256-transformed).
    const SECRET: &str = "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";

    fn emu(s: &str) -> EmulatorUri {
        match s.parse::<DeviceUri>() {
            Ok(DeviceUri::Emulator(u)) => u,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn emulator_forms() {
        assert_eq!(emu("emu:"), EmulatorUri::default());
        assert_eq!(emu("emu").profile_name(), "zn540");
        assert_eq!(emu("emu:tiny").profile.as_deref(), Some("tiny"));
        assert_eq!(emu("emu:profile=small").profile.as_deref(), Some("small"));
        let u = emu("emu:file=/tmp/x.img,profile=tiny");
        assert_eq!(u.file, Some(PathBuf::from("/tmp/x.img")));
        assert_eq!(u.profile.as_deref(), Some("tiny"));
        assert_eq!(emu("emu:zn540,zones=16").zones, Some(16));
        let z = ZrwaOption { size: 16, flush_granularity: 4, resources: 2 };
        assert_eq!(emu("emu:tiny,zrwa=16/4/2").zrwa, Some(z));
        let text = "emu:tiny,zrwa=16/4/2".parse::<DeviceUri>().unwrap().to_string();
        assert_eq!(text, "emu:tiny,zrwa=16/4/2");
        for bad in ["16/4", "16/5/2", "16/4/0", "0/1/1", "65536/1/1", "16/0/1", "16/4/2/1", "x"] {
            assert!(format!("emu:tiny,zrwa={bad}").parse::<DeviceUri>().is_err(), "{bad}");
        }
        assert!("emu:file=/tmp/x.img,zrwa=16/4/2".parse::<DeviceUri>().is_err());
        assert!("emu:zn540,zones=0".parse::<DeviceUri>().is_err());
        assert!("emu:zn540,zones=x".parse::<DeviceUri>().is_err());
        assert!("emu:file=/tmp/x.img,zones=4".parse::<DeviceUri>().is_err());
        assert_eq!(emu("emu:zn540,metadata=8").metadata, Some(8));
        assert!("emu:zn540,metadata=-1".parse::<DeviceUri>().is_err());
        assert!("emu:zn540,metadata=70000".parse::<DeviceUri>().is_err());
        assert_eq!(emu("emu:zn540,lba=512").lba, Some(512));
        assert_eq!(emu("emu:zn540,lba=4096").lba, Some(4096));
        for bad in ["256", "1000", "131072", "x", "-512", ""] {
            assert!(format!("emu:zn540,lba={bad}").parse::<DeviceUri>().is_err(), "{bad}");
        }
        let u = emu("emu:tiny,media=null,timing=off");
        assert_eq!((u.media, u.timing), (Some(EmulatorMedia::Null), Some(Timing::Off)));
        let u = emu("emu:zn540,timing=on,clock=real");
        assert_eq!((u.timing, u.clock), (Some(Timing::On), Some(ClockMode::Real)));
        assert_eq!(emu("emu:clock=virtual").clock, Some(ClockMode::Virtual));
    }

    #[test]
    fn canonical_form_round_trips() {
        for s in [
            "emu:zn540",
            "emu:tiny,media=null",
            "emu:zn540,timing=on,clock=real",
            "emu:zn540,zones=32,metadata=16,lba=512",
            "emu:zn540-conv,zones=64,op=28",
            "emu:file=a.img,profile=small",
            "pcie:0000:00:04.0",
            "ng:/dev/ng0n1",
            "zbd:/dev/nvme0n1",
            "zbd:/dev/nvme0n2,io=psync",
        ] {
            let u: DeviceUri = s.parse().unwrap();
            assert_eq!(u.to_string(), s);
            assert_eq!(u.to_string().parse::<DeviceUri>().unwrap(), u);
        }
        assert_eq!("emu:".parse::<DeviceUri>().unwrap().to_string(), "emu:zn540");
        assert_eq!("pcie:00:04.0".parse::<DeviceUri>().unwrap().to_string(), "pcie:0000:00:04.0");
        let v: DeviceUri = "pcie:00:05.0,transport=vfio".parse().unwrap();
        assert!(matches!(v, DeviceUri::Pcie(PcieUri { binding: PciBinding::Vfio, .. })));
        assert_eq!(v.to_string(), "pcie:0000:00:05.0,transport=vfio");
        let a: DeviceUri = "pcie:00:05.0,transport=auto".parse().unwrap();
        assert_eq!(a.to_string(), "pcie:0000:00:05.0");
    }

    #[test]
    fn kernel_backend_forms() {
        let u: DeviceUri = "ng:/dev/ng0n2".parse().unwrap();
        assert_eq!(u, DeviceUri::Passthrough(PathBuf::from("/dev/ng0n2")));
        let u: DeviceUri = "zbd:/dev/nvme0n1".parse().unwrap();
        assert_eq!(
            u,
            DeviceUri::ZonedBlock(ZonedBlockUri { path: "/dev/nvme0n1".into(), io: None })
        );
        let u: DeviceUri = "zbd:/dev/disk/by-id/nvme-x,io=psync".parse().unwrap();
        let DeviceUri::ZonedBlock(z) = u else { panic!("{u:?}") };
        assert_eq!((z.path, z.io), (PathBuf::from("/dev/disk/by-id/nvme-x"), Some(BlockIo::Psync)));
    }

    #[test]
    fn layered_schemes_open_through_their_registered_opener() {
        fn opener(uri: &str) -> crate::Result<Arc<dyn crate::ZonedDevice>> {
            Err(DeviceError::uri(uri, "test opener"))
        }
        assert!("layer-test:x".parse::<DeviceUri>().is_err());
        register_scheme("layer-test", "layer-test:ARG", opener);
        register_scheme("emu", "emu:", opener);
        let u: DeviceUri = "layer-test:a=1,b".parse().unwrap();
        assert_eq!(
            u,
            DeviceUri::Layered { scheme: "layer-test".into(), uri: "layer-test:a=1,b".into() }
        );
        assert_eq!(u.to_string(), "layer-test:a=1,b");
        assert!(schemes().contains(&"layer-test"));
        let e = crate::open("layer-test:q").unwrap_err().to_string();
        assert!(e.contains("test opener"), "{e}");
        assert!(crate::open("emu:tiny").is_ok(), "built-in schemes stay");
    }

    #[test]
    fn errors_name_the_problem_and_the_choices() {
        let err = |s: &str| s.parse::<DeviceUri>().unwrap_err().to_string();
        let e = err("emu:tiny,speed=fast");
        assert!(
            e.contains("\"speed\"")
                && e.contains("valid options: profile, file, media, timing, clock"),
            "{e}"
        );
        assert!(err("emu:huge").contains("tiny, small, zn540"), "{}", err("emu:huge"));
        assert!(err("emu:tiny,media=tape").contains("ram, null"));
        assert!(err("emu:tiny,timing=real").contains("valid values: on, off"));
        assert!(err("emu:zn540,clock=fast").contains("valid values: virtual, real"));
        assert!(err("emu:zn540,timing=off,clock=real").contains("does not combine"));
        assert!(err("emu:zn540,clock=real,clock=real").contains("twice"));
        assert!(err("emu:zn540,dilation=0.5").contains("from 1"));
        assert!(err("emu:zn540,timing=off,dilation=2").contains("does not combine"));
        assert_eq!(emu("emu:zn540,dilation=4").dilation, Dilation::new(4.0).ok());
        let t = emu("emu:zn540,trace=run.json,trace_events=1000");
        assert_eq!(
            (t.trace.as_deref(), t.trace_events),
            (Some(std::path::Path::new("run.json")), Some(1000))
        );
        assert_eq!(
            "emu:zn540,trace=run.json,trace_events=1000".parse::<DeviceUri>().unwrap().to_string(),
            "emu:zn540,trace=run.json,trace_events=1000"
        );
        assert!(err("emu:zn540,trace=").contains("needs a file name"));
        assert!(err("emu:zn540,trace=a,trace_events=0").contains(">= 1"));
        assert!(err("emu:zn540,trace_events=5").contains("needs trace=FILE"));
        assert!(err("emu:zn540,timing=off,trace=a").contains("does not combine"));
        assert!(err("emu:tiny,profile=small").contains("twice"));
        assert!(err("emu:tiny,,media=null").contains("empty option"));
        assert!(err("emu:tiny,null").contains("key=value"));
        assert!(err("emu:file=").contains("needs a path"));
        assert!(err("emu:file=x,media=null").contains("does not combine"));
        assert!(err("emu:file=x,lba=512").contains("do not combine with file="));
        assert!(err("emu:zn540,lba=1000").contains("power of two"));
        assert!(err("emu:zn540,lba=512,lba=512").contains("twice"));
        assert_eq!(emu("emu:zn540-conv,op=28").op, Some(28));
        assert_eq!(emu("emu:zn540-conv,op=7%").op, Some(7));
        assert!(err("emu:zn540-conv,op=0").contains("1 to 1000"));
        assert!(err("emu:zn540-conv,op=6.5").contains("whole percentage"));
        assert!(err("emu:file=x,op=28").contains("op=, lba= and zrwa= do not combine with file="));
        assert!(err("nvme:/dev/ng0n1").contains("unknown device URI scheme \"nvme\""));
        assert!(err("nvme:x").contains("known schemes: emu, pcie, ng, zbd"));
        assert!(err("ng:").contains("needs a device path"));
        assert!(err("ng:/dev/ng0n1,x=1").contains("no options"));
        assert!(err("zbd:").contains("needs a block device path"));
        assert!(err("zbd:/dev/nvme0n1,io=aio").contains("valid values: uring, psync"));
        assert!(err("zbd:/dev/nvme0n1,depth=4").contains("valid options: io"));
        assert!(err("zbd:/dev/nvme0n1,io=psync,io=uring").contains("twice"));
        assert!(err("zbd:/dev/nvme0n1,,io=psync").contains("empty option"));
        assert!(err("zbd:/dev/nvme0n1,psync").contains("key=value"));
        assert!(err("/dev/nvme0n1").contains("no scheme"));
        assert!(err("pcie:xyz").contains("not a PCI address"));
        assert!(err("pcie:0000:00:04.0,x=1").contains("unknown option \"x\""));
        assert!(err("pcie:0000:00:04.0,transport=uio").contains("valid values: auto, vfio, sysfs"));
        assert!(err("pcie:0000:00:04.0,transport=vfio,transport=vfio").contains("twice"));
        assert!(err("pcie:0000:00:04.0,vfio").contains("not a key=value"));
    }
}
