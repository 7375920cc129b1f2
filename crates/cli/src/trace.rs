//! `--trace FILE` of `zns characterize`, `zns serve` and `zns ublk`: the
//! `emu:` device's URI gains `trace=FILE` (zns-device writes the trace
//! when the device closes; docs/observability.md). `zns serve` traces the
//! base device of eZNS tenants the same way, with eZNS's stripe and
//! balloon events in it.

use std::path::Path;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use zns_device::uri::DeviceUri;
use zns_ezns::config::EznsUri;

/// `uri` with `trace=FILE` when `trace` is given; only an `emu:` device
/// without a trace of its own takes one.
pub fn traced_uri(uri: &str, trace: Option<&Path>) -> Result<String> {
    let Some(path) = trace else { return Ok(uri.to_string()) };
    let file = path.to_str().filter(|p| !p.is_empty() && !p.contains(','));
    let Some(file) = file else {
        bail!("--trace {}: the file name must be UTF-8 without commas", path.display());
    };
    match uri.parse::<DeviceUri>() {
        Ok(DeviceUri::Emulator(e)) if e.trace.is_some() => {
            bail!("--trace: {uri} has a trace= of its own; give one or the other")
        }
        Ok(DeviceUri::Emulator(_)) if uri.trim_end_matches(':') == "emu" => {
            Ok(format!("emu:trace={file}"))
        }
        Ok(DeviceUri::Emulator(_)) => Ok(format!("{uri},trace={file}")),
        _ => bail!(
            "--trace records the emulator's commands and flash operations: it needs an emu: \
             device with a timing model (e.g. emu:zn540), not {uri}"
        ),
    }
}

/// What `--trace` of `zns serve` does to its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeTrace {
    /// The devices' URIs, the one `emu:` device's with `trace=FILE`.
    pub uris: Vec<String>,
    /// Or, when the device traced is the base device of the eZNS tenants
    /// served: their configuration file (as `--device` names it), whose
    /// base URI gets `trace=FILE` when the instance is brought up
    /// ([`ezns_base_uri`]).
    pub ezns_config: Option<PathBuf>,
}

/// [`traced_uri`] for the devices of `zns serve`: with `--trace`, exactly
/// one emulated device must be among them, an `emu:` device or the base
/// device of the tenants of one eZNS configuration (the others are served
/// as they are).
pub fn traced_uris(uris: &[String], trace: Option<&Path>) -> Result<ServeTrace> {
    let untraced = ServeTrace { uris: uris.to_vec(), ezns_config: None };
    if trace.is_none() {
        return Ok(untraced);
    }
    let emulated: Vec<usize> = (0..uris.len())
        .filter(|&i| matches!(uris[i].parse::<DeviceUri>(), Ok(DeviceUri::Emulator(_))))
        .collect();
    let mut configs: Vec<PathBuf> = Vec::new();
    for uri in uris.iter().filter(|u| u.starts_with("ezns:")) {
        let u: EznsUri = uri.parse().with_context(|| format!("open {uri}"))?;
        if !configs.iter().any(|c| same_config(c, &u.config)) {
            configs.push(u.config);
        }
    }
    match (&emulated[..], &configs[..]) {
        (&[one], []) => {
            let mut out = untraced;
            out.uris[one] = traced_uri(&uris[one], trace)?;
            Ok(out)
        }
        ([], [config]) => Ok(ServeTrace { ezns_config: Some(config.clone()), ..untraced }),
        _ => bail!(
            "--trace takes one emu: device among --device ({} given{}); give each emulated \
             device a trace=FILE of its own in its URI instead (for eZNS tenants, in the \
             configuration's device URI)",
            emulated.len(),
            match configs.len() {
                0 => String::new(),
                1 => ", plus the base device of 1 eZNS configuration".to_string(),
                n => format!(", plus the base devices of {n} eZNS configurations"),
            }
        ),
    }
}

/// Whether two eZNS configuration paths name one file (tenants of one
/// file share one base device, however the file is named).
pub fn same_config(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The URI eZNS brings the base device `base` of a configuration up with
/// under `zns serve --trace FILE`: `base` as served, traced into `FILE`
/// (it must be an `emu:` device with a timing model).
pub fn ezns_base_uri(base: &str, trace: &Path) -> Result<String> {
    traced_uri(base, Some(trace))
        .with_context(|| format!("--trace of eZNS tenants traces their base device {base}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_emulated_devices_take_a_trace() {
        let t = Some(Path::new("t.json"));
        assert_eq!(traced_uri("emu:zn540", t).unwrap(), "emu:zn540,trace=t.json");
        assert_eq!(traced_uri("emu:", t).unwrap(), "emu:trace=t.json");
        assert_eq!(traced_uri("emu:zn540", None).unwrap(), "emu:zn540");
        let e = traced_uri("zbd:/dev/nvme0n1", t).unwrap_err().to_string();
        assert!(e.contains("needs an emu: device"), "{e}");
        let e = traced_uri("emu:zn540,trace=a.json", t).unwrap_err().to_string();
        assert!(e.contains("of its own"), "{e}");
        let e = traced_uri("emu:zn540", Some(Path::new("a,b"))).unwrap_err().to_string();
        assert!(e.contains("without commas"), "{e}");
        let two = ["emu:zn540".to_string(), "emu:small-zone".to_string()];
        assert!(traced_uris(&two, t).unwrap_err().to_string().contains("2 given"));
        assert_eq!(traced_uris(&two, None).unwrap().uris, two);
        let mixed = ["zbd:/dev/x".to_string(), "emu:zn540".to_string()];
        let traced = traced_uris(&mixed, t).unwrap();
        assert_eq!((&traced.uris[1][..], &traced.ezns_config), ("emu:zn540,trace=t.json", &None));
    }

    #[test]
    fn ezns_tenants_of_one_configuration_trace_its_base_device() {
        let t = Some(Path::new("t.json"));
        let tenant = |c: &str, n: &str| format!("ezns:config={c},tenant={n}");
        let two = [tenant("e.toml", "a"), tenant("e.toml", "b"), "zbd:/dev/x".to_string()];
        let traced = traced_uris(&two, t).unwrap();
        assert_eq!(traced.uris, two, "the tenants' URIs stay as they are");
        assert_eq!(traced.ezns_config, Some(PathBuf::from("e.toml")));
        let e = traced_uris(&[tenant("e.toml", "a"), tenant("f.toml", "a")], t).unwrap_err();
        assert!(e.to_string().contains("2 eZNS configurations"), "{e}");
        let e = traced_uris(&[tenant("e.toml", "a"), "emu:zn540".into()], t).unwrap_err();
        assert!(e.to_string().contains("1 given, plus the base device of 1 eZNS"), "{e}");
        assert_eq!(
            ezns_base_uri("emu:zn540,clock=real", Path::new("t.json")).unwrap(),
            "emu:zn540,clock=real,trace=t.json"
        );
        let e = ezns_base_uri("zbd:/dev/x", Path::new("t.json")).unwrap_err();
        assert!(format!("{e:#}").contains("traces their base device zbd:/dev/x"), "{e:#}");
    }
}
