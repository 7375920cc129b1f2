//! `--trace FILE` of `zns characterize`, `zns serve` and `zns ublk`: the
//! `emu:` device's URI gains `trace=FILE` (zns-device writes the trace
//! when the device closes; docs/observability.md).

use std::path::Path;

use anyhow::{bail, Result};
use zns_device::uri::DeviceUri;

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

/// [`traced_uri`] for the devices of `zns serve`: with `--trace`, exactly
/// one of them must be an `emu:` device (the others are served as they
/// are).
pub fn traced_uris(uris: &[String], trace: Option<&Path>) -> Result<Vec<String>> {
    if trace.is_none() {
        return Ok(uris.to_vec());
    }
    let emulated: Vec<usize> = (0..uris.len())
        .filter(|&i| matches!(uris[i].parse::<DeviceUri>(), Ok(DeviceUri::Emulator(_))))
        .collect();
    let [one] = emulated[..] else {
        bail!(
            "--trace takes one emu: device among --device ({} given); give each emulated device \
             a trace=FILE of its own in its URI instead",
            emulated.len()
        );
    };
    let mut out = uris.to_vec();
    out[one] = traced_uri(&uris[one], trace)?;
    Ok(out)
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
        let mixed = ["zbd:/dev/x".to_string(), "emu:zn540".to_string()];
        assert_eq!(traced_uris(&mixed, t).unwrap()[1], "emu:zn540,trace=t.json");
    }
}
