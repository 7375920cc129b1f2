//! Reference figures of real devices, tied to emulator profiles by name.
//!
//! The files live in the crate's `reference/` folder (`zn540.toml` for the
//! `zn540` profile) and are built in. Each names figures exactly as
//! `results.json` does, so a run on an emulated device of that profile
//! gets a table of measured against reference, with ratios. A figure
//! belongs to one LBA format of the device (`lba_bytes`, 4096 unless
//! given); a run is compared with the figures of its device's block size.

use serde::Deserialize;

use super::results::{ReferenceRow, ReferenceTable, Results};

const BUILT_IN: &[(&str, &str)] = &[("zn540", include_str!("../../reference/zn540.toml"))];

/// A reference file.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// The emulator profile it belongs to.
    pub profile: String,
    /// The real device.
    pub device: String,
    /// Where the figures come from.
    pub source: String,
    /// The figures.
    #[serde(rename = "figure")]
    pub figures: Vec<ReferenceFigure>,
}

/// One reference figure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFigure {
    /// Figure name as in `results.json`.
    pub name: String,
    /// Its value (unit in the name).
    pub value: f64,
    /// What it is.
    pub what: String,
    /// The LBA format (block size in bytes) it was measured with.
    #[serde(default = "default_lba_bytes")]
    pub lba_bytes: u64,
}

/// Block size of figures that do not name one, and of devices whose
/// description has none.
pub const DEFAULT_LBA_BYTES: u64 = 4096;

pub(crate) fn default_lba_bytes() -> u64 {
    DEFAULT_LBA_BYTES
}

/// The built-in reference of the profile named `profile`, if there is one.
pub fn for_profile(profile: &str) -> Option<Reference> {
    let (_, text) = BUILT_IN.iter().find(|(name, _)| *name == profile)?;
    match toml::from_str::<Reference>(text) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(profile, error = %e, "built-in reference does not parse");
            None
        }
    }
}

/// Profiles that have reference figures.
pub fn profiles() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(n, _)| *n).collect()
}

/// The table of measured against reference for a run, when its device is
/// an emulator whose profile has a reference with figures for the
/// device's block size.
pub fn table_for(results: &Results) -> Option<ReferenceTable> {
    let r = for_profile(results.device.profile.as_deref()?)?;
    let t = table(&r, results);
    if t.rows.is_empty() {
        tracing::info!(
            profile = %r.profile,
            lba_bytes = t.lba_bytes,
            "the reference has no figures for this block size"
        );
        return None;
    }
    Some(t)
}

/// The block size of the run's device (`device.info.block_size`), 4096
/// when the description has none.
pub fn lba_bytes(results: &Results) -> u64 {
    results
        .device
        .info
        .get("block_size")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(DEFAULT_LBA_BYTES)
}

/// Measured against `r`, figure by figure: the figures of the run's
/// device's block size.
pub fn table(r: &Reference, results: &Results) -> ReferenceTable {
    let lba = lba_bytes(results);
    let rows = r
        .figures
        .iter()
        .filter(|f| f.lba_bytes == lba)
        .map(|f| {
            let measured = results.figure(&f.name);
            let ratio = measured.filter(|_| f.value != 0.0).map(|m| m / f.value);
            ReferenceRow {
                figure: f.name.clone(),
                what: f.what.clone(),
                reference: f.value,
                measured,
                ratio,
            }
        })
        .collect();
    ReferenceTable {
        profile: r.profile.clone(),
        device: r.device.clone(),
        source: r.source.clone(),
        lba_bytes: lba,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_references_parse_and_name_figures_well() {
        for name in profiles() {
            let r = for_profile(name).expect("parses");
            assert_eq!(r.profile, name);
            assert!(r.figures.len() > 50);
            let names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
            for n in &names {
                // `<point id>:<stat>`, or a summary figure (`ceiling/...`).
                let (id, stat) = n.rsplit_once(':').unwrap_or_else(|| {
                    assert!(n.starts_with("ceiling/"), "{n}");
                    n.rsplit_once('/').expect("ceiling/<stat>")
                });
                assert!(!id.is_empty() && !stat.is_empty(), "{n}");
                assert!(
                    stat.ends_with("_us") || stat.ends_with("kiops") || stat.ends_with("mib_s"),
                    "{n}"
                );
            }
            let mut keys: Vec<(u64, &str)> =
                r.figures.iter().map(|f| (f.lba_bytes, f.name.as_str())).collect();
            keys.sort_unstable();
            let before = keys.len();
            keys.dedup();
            assert_eq!(before, keys.len(), "duplicate figure names");
            assert!(r.figures.iter().all(|f| [512, 4096].contains(&f.lba_bytes)));
        }
        assert!(for_profile("tiny").is_none());
    }

    fn results_with_block_size(block_size: Option<u64>) -> Results {
        let mut info = serde_json::json!({ "zone_count": 904 });
        if let Some(b) = block_size {
            info["block_size"] = b.into();
        }
        let text = serde_json::json!({
            "schema_version": 2,
            "tool": { "name": "zns-bench", "version": "0" },
            "suite": "quick",
            "seed": 1,
            "device": { "uri": "emu:zn540", "clock": "virtual", "profile": "zn540", "info": info },
            "duration": { "device_ns": 0 },
            "host": { "started_unix_s": 0, "wall_ns": 0 },
            "experiments": [],
            "points": [],
            "summary": {},
            "reference": null
        });
        serde_json::from_value(text).expect("results")
    }

    #[test]
    fn tables_take_the_figures_of_the_device_block_size() {
        let r = for_profile("zn540").unwrap();
        let t4k = table(&r, &results_with_block_size(Some(4096)));
        assert_eq!(t4k.lba_bytes, 4096);
        assert!(t4k.rows.len() > 50);
        let w = |t: &ReferenceTable| {
            t.rows
                .iter()
                .find(|row| row.figure == "qd1/write/4KiB:mean_us")
                .map(|row| row.reference)
        };
        assert_eq!(w(&t4k), Some(11.36));
        let t512 = table(&r, &results_with_block_size(Some(512)));
        assert_eq!(t512.lba_bytes, 512);
        assert_eq!(w(&t512), Some(19.8));
        let append = t512.rows.iter().find(|row| row.figure == "qd1/append/4KiB:mean_us");
        assert_eq!(append.map(|row| row.reference), Some(24.3));
        assert!(t512.rows.len() < t4k.rows.len());
        let old = table(&r, &results_with_block_size(None));
        assert_eq!((old.lba_bytes, old.rows.len()), (4096, t4k.rows.len()));
        assert!(table_for(&results_with_block_size(Some(8192))).is_none());
        assert!(table_for(&results_with_block_size(Some(512))).is_some());
    }
}
