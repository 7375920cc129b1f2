//! Reference figures of real devices, tied to emulator profiles by name.
//!
//! The files live in the crate's `reference/` folder (`zn540.toml` for the
//! `zn540` profile) and are built in. Each names figures exactly as
//! `results.json` does, so a run on an emulated device of that profile
//! gets a table of measured against reference, with ratios.

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
/// an emulator whose profile has a reference.
pub fn table_for(results: &Results) -> Option<ReferenceTable> {
    let r = for_profile(results.device.profile.as_deref()?)?;
    Some(table(&r, results))
}

/// Measured against `r`, figure by figure.
pub fn table(r: &Reference, results: &Results) -> ReferenceTable {
    let rows = r
        .figures
        .iter()
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
            let mut names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
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
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            assert_eq!(before, names.len(), "duplicate figure names");
        }
        assert!(for_profile("tiny").is_none());
    }
}
