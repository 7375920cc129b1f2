//! Reference figures of real devices, tied to emulator profiles by name.
//!
//! The files are the emulator's (`zns_emulator::reference`: `zn540.toml`
//! for the `zn540` profile, which its calibration reads too) and are built
//! in. Each names figures exactly as
//! `results.json` does, so a run on an emulated device of that profile
//! gets a table of measured against reference, with ratios. A figure
//! belongs to one LBA format of the device (`lba_bytes`, 4096 unless
//! given); a run is compared with the figures of its device's block size.
//!
//! Another run can be the reference instead ([`RunReference`], `zns
//! characterize --reference`): the table then holds that run's values of
//! the figures the built-in references name and of its summary, and
//! [`ReferenceTable::curves`] its value of every figure of the points both
//! runs measured, which the report draws over the measured curves.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use super::results::{
    ReferenceRow, ReferenceTable, ReferenceValue, Results, REFERENCE_PROFILE, REFERENCE_RUN,
};
use super::CharacterizeError;

const BUILT_IN: &[(&str, &str)] = &[("zn540", zns_emulator::reference::ZN540_TOML)];

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
        kind: REFERENCE_PROFILE.to_string(),
        profile: r.profile.clone(),
        device: r.device.clone(),
        source: r.source.clone(),
        file: None,
        lba_bytes: lba,
        rows,
        curves: Vec::new(),
    }
}

/// Another run (its `results.json`) as the reference of a run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct RunReference {
    /// The file's name without its directory (what `results.json`
    /// records: a path says where a file was on one machine, not what it
    /// is).
    pub file: String,
    /// The run.
    pub results: Results,
}

impl RunReference {
    /// Reads the `results.json` at `path`; refuses a file that is not one
    /// (or of a schema version this build does not read) and a run that
    /// measured nothing.
    pub fn load(path: &Path) -> Result<RunReference, CharacterizeError> {
        let file = path
            .file_name()
            .map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
        let bad = |reason: String| CharacterizeError::Reference { file: file.clone(), reason };
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
        let results = Results::from_json(&text)
            .map_err(|e| bad(format!("not a results.json of zns characterize: {e}")))?;
        if results.points.iter().all(|p| p.ops == 0) {
            return Err(bad("the run measured nothing: no point has a command".into()));
        }
        Ok(RunReference { file, results })
    }

    /// Refuses a reference measured with another block size than
    /// `block_size`: figures of another LBA format do not compare (the
    /// same request is a different number of blocks).
    pub fn check_block_size(&self, block_size: u64) -> Result<(), CharacterizeError> {
        let theirs = lba_bytes(&self.results);
        if theirs != block_size {
            return Err(CharacterizeError::Reference {
                file: self.file.clone(),
                reason: format!(
                    "its device ({}) has {theirs} B blocks, this one {block_size} B: figures of \
                     another LBA format do not compare",
                    self.results.device.uri
                ),
            });
        }
        Ok(())
    }
}

/// Names of the figures a run reference's table lists: those the built-in
/// references name (once each, in their order), then `extra`'s.
fn key_figures(extra: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    let built_in = profiles()
        .into_iter()
        .filter_map(for_profile)
        .flat_map(|r| r.figures.into_iter().map(|f| f.name));
    for name in built_in.chain(extra) {
        if seen.insert(name.clone()) {
            names.push(name);
        }
    }
    names
}

/// What a figure is, from its name, for figures no built-in reference
/// describes.
fn describe(figure: &str) -> String {
    if figure == "ceiling/write_mib_s" {
        return "the highest write or append MiB/s of any point that ran alone".into();
    }
    let Some((id, stat)) = figure.rsplit_once(':') else { return figure.to_string() };
    let what = match stat {
        "mean_us" => "mean latency",
        "p50_us" => "median latency",
        "p95_us" => "p95 latency",
        "p99_us" => "p99 latency",
        "p99_9_us" => "p99.9 latency",
        "p99_99_us" => "p99.99 latency",
        "kiops" => "KIOPS",
        "mib_s" => "MiB/s",
        "max_kiops" => return format!("{id}: the highest KIOPS along the series"),
        "max_mib_s" => return format!("{id}: the highest MiB/s along the series"),
        other => other,
    };
    format!("{id}: {what}")
}

/// Measured against another run: its values of the key figures (those the
/// built-in references name, then its summary) as rows, and its value of
/// every other figure of the points both runs measured as curves.
pub fn table_from_run(reference: &RunReference, results: &Results) -> ReferenceTable {
    let them = &reference.results;
    let lba = lba_bytes(results);
    let described: Vec<ReferenceFigure> = profiles()
        .into_iter()
        .filter_map(for_profile)
        .flat_map(|r| r.figures)
        .filter(|f| f.lba_bytes == lba)
        .collect();
    let rows: Vec<ReferenceRow> = key_figures(them.summary.keys().cloned())
        .into_iter()
        .filter_map(|name| {
            let value = them.figure(&name)?;
            let measured = results.figure(&name);
            let what = described
                .iter()
                .find(|f| f.name == name)
                .map_or_else(|| describe(&name), |f| f.what.clone());
            Some(ReferenceRow {
                ratio: measured.filter(|_| value != 0.0).map(|m| m / value),
                figure: name,
                what,
                reference: value,
                measured,
            })
        })
        .collect();
    let in_rows: HashSet<&str> = rows.iter().map(|r| r.figure.as_str()).collect();
    let mut curves = Vec::new();
    for p in results.points.iter().filter(|p| p.ops > 0) {
        let Some(q) = them.point(&p.id).filter(|q| q.ops > 0) else { continue };
        for (stat, value) in q.figures() {
            let figure = format!("{}:{stat}", q.id);
            if value.is_finite() && !in_rows.contains(figure.as_str()) {
                curves.push(ReferenceValue { figure, value });
            }
        }
    }
    ReferenceTable {
        kind: REFERENCE_RUN.to_string(),
        profile: them.device.profile.clone().unwrap_or_default(),
        device: them.device.uri.clone(),
        source: format!(
            "{}: a {} run on {} (seed {}, {} clock)",
            reference.file, them.suite, them.device.uri, them.seed, them.device.clock
        ),
        file: Some(reference.file.clone()),
        lba_bytes: lba,
        rows,
        curves,
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

    #[test]
    fn a_run_as_its_own_reference_gives_ratios_of_one() {
        use super::super::results::test_runs::{point, run};
        let mut them = run(vec![
            point("qd1/write/4KiB", "write", 11_000, 88_000.0),
            point("qd1/append/4KiB", "append", 15_000, 66_000.0),
            point("qd1/write/64KiB", "write", 60_000, 16_000.0),
        ]);
        them.summary.insert("intra_zone/append/4KiB:max_kiops".into(), 130.0);
        let me = RunReference { file: "results.json".into(), results: them.clone() };
        let t = table_from_run(&me, &them);
        assert_eq!((t.kind.as_str(), t.file.as_deref()), (REFERENCE_RUN, Some("results.json")));
        assert!(t.source.starts_with("results.json: a smoke run on emu:tiny"), "{}", t.source);
        assert_eq!(t.short_name(), "results.json (emu:tiny)");
        // Figures the built-in references name, then the summary's.
        let names: Vec<&str> = t.rows.iter().map(|r| r.figure.as_str()).collect();
        assert_eq!(names[0], "qd1/write/4KiB:mean_us");
        assert!(names.contains(&"qd1/write/64KiB:kiops"), "{names:?}");
        assert!(names.contains(&"intra_zone/append/4KiB:max_kiops"), "{names:?}");
        assert!(!names.contains(&"qd1/write/8KiB:kiops"), "the run has no such figure");
        for row in &t.rows {
            assert_eq!(row.ratio, Some(1.0), "{row:?}");
        }
        let w = t.rows.iter().find(|r| r.figure == "qd1/write/4KiB:mean_us").unwrap();
        assert_eq!(w.what, "write, QD 1, 4 KiB: mean latency");
        // Every other figure of the shared points is a curve value.
        assert!(t.curves.iter().any(|c| c.figure == "qd1/write/64KiB:p99_us"));
        assert!(!t.curves.iter().any(|c| names.contains(&c.figure.as_str())));

        // Against a run with fewer points: rows it lacks are unmeasured,
        // curves only where both have the point.
        let fewer = run(vec![point("qd1/write/4KiB", "write", 22_000, 44_000.0)]);
        let t = table_from_run(&me, &fewer);
        let w = t.rows.iter().find(|r| r.figure == "qd1/write/4KiB:mean_us").unwrap();
        assert!((w.ratio.unwrap() - 2.0).abs() < 0.01, "{w:?}");
        let a = t.rows.iter().find(|r| r.figure == "qd1/append/4KiB:mean_us").unwrap();
        assert!(a.measured.is_none() && a.ratio.is_none());
        assert!(t.curves.iter().all(|c| c.figure.starts_with("qd1/write/4KiB:")), "{t:?}");
    }

    #[test]
    fn files_that_cannot_be_a_reference_are_refused_by_name() {
        use super::super::results::test_runs::{point, run};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let refused = |path: &Path| RunReference::load(path).unwrap_err().to_string();
        let e = refused(&write("notes.txt", "not json"));
        assert!(e.starts_with("reference notes.txt: not a results.json"), "{e}");
        let e = refused(&write("other.json", "{\"hello\": 1}"));
        assert!(e.contains("no schema_version"), "{e}");
        let e = refused(&write("future.json", "{\"schema_version\": 3}"));
        assert!(e.contains("schema_version 3"), "{e}");
        let e = refused(&dir.path().join("absent.json"));
        assert!(e.contains("cannot read"), "{e}");
        let empty = serde_json::to_string(&run(vec![])).unwrap();
        let e = refused(&write("empty.json", &empty));
        assert!(e.contains("measured nothing"), "{e}");

        let good = serde_json::to_string(&run(vec![point("qd1/write/4KiB", "write", 1, 1.0)]));
        let r = RunReference::load(&write("results.json", &good.unwrap())).unwrap();
        assert_eq!(r.file, "results.json");
        assert!(r.check_block_size(4096).is_ok());
        let e = r.check_block_size(512).unwrap_err().to_string();
        assert!(e.contains("4096 B blocks, this one 512 B"), "{e}");
    }
}
