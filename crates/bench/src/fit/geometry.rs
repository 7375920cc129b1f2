//! The fitted profile's geometry: the measured device's namespace (zones,
//! sizes, resource limits, transfer limits) on the base profile's flash.

use zns_emulator::profile::{NamespaceKind, Profile};

use super::FitError;

/// `base` with the zoned namespace and transfer limits `info` (a
/// `results.json` `device.info`) describes; without `info`, `base` as it
/// is. Conventional namespaces of the base are dropped: the fit models the
/// zoned one.
pub fn apply(base: &Profile, info: Option<&serde_json::Value>) -> Result<Profile, FitError> {
    let mut p = base.clone();
    p.namespaces.retain(|ns| ns.kind == NamespaceKind::Zoned);
    if p.namespaces.is_empty() {
        return Err(FitError::Invalid(format!(
            "the base profile {:?} has no zoned namespace",
            base.name
        )));
    }
    if p.timing.is_none() {
        return Err(FitError::Invalid(format!(
            "the base profile {:?} has no timing model to fit",
            base.name
        )));
    }
    let Some(info) = info else { return Ok(p) };
    let num = |key: &str| info.get(key).and_then(serde_json::Value::as_u64);
    let need =
        |key: &str| num(key).ok_or_else(|| FitError::Invalid(format!("device.info has no {key}")));
    let ns = &mut p.namespaces[0];
    let block = need("block_size")?;
    ns.set_block_size(block as u32)
        .map_err(|e| FitError::Invalid(format!("device.info block_size: {e}")))?;
    ns.zones = need("zone_count")? as u32;
    ns.zone_size = need("zone_size")?;
    ns.zone_capacity = need("zone_capacity")?;
    ns.max_open = num("max_open").map(|v| v as u32).filter(|v| *v > 0);
    ns.max_active = num("max_active").map(|v| v as u32).filter(|v| *v > 0);
    ns.metadata_size = num("metadata_size").unwrap_or(0) as u16;
    // Transfer limits in 4 KiB memory pages, as the controller reports
    // them (0: none, which the profile cannot say: keep the base's).
    let log2_pages = |bytes: u64| (bytes / 4096).max(1).ilog2() as u8;
    if let Some(m) = num("mdts_bytes").filter(|m| *m >= 4096) {
        p.controller.mdts_log2 = log2_pages(m);
    }
    if let Some(z) = num("zasl_bytes").filter(|z| *z >= 4096) {
        p.controller.zasl_log2 = log2_pages(z);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_namespace_replaces_the_base_one() {
        let base = Profile::by_name("zn540").unwrap();
        let info = serde_json::json!({
            "block_size": 512, "zone_count": 64, "zone_size": 131072,
            "zone_capacity": 100000, "max_open": 8, "max_active": 12,
            "mdts_bytes": 131072, "zasl_bytes": 65536,
        });
        let p = apply(&base, Some(&info)).unwrap();
        let ns = &p.namespaces[0];
        assert_eq!(
            (ns.block_size, ns.zones, ns.zone_size, ns.zone_capacity),
            (512, 64, 131072, 100000)
        );
        assert_eq!((ns.max_open, ns.max_active), (Some(8), Some(12)));
        assert_eq!((p.controller.mdts_log2, p.controller.zasl_log2), (5, 4));
        assert_eq!(p.timing, base.timing);
        // Missing geometry is an error, not a guess.
        let e = apply(&base, Some(&serde_json::json!({ "block_size": 4096 }))).unwrap_err();
        assert!(e.to_string().contains("zone_count"), "{e}");
        assert!(apply(&Profile::by_name("tiny").unwrap(), None).is_err());
    }
}
