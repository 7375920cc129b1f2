//! What a fit aims at: named figures (a characterization's, or a
//! reference's), the run that measured them, and the device's geometry.

use std::collections::BTreeMap;

use crate::characterize::reference::Reference;
use crate::characterize::{Grid, Results, Suite};

use super::FitError;

/// The figures a fit reproduces and how to measure them on a candidate.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where the figures come from (for the report).
    pub source: String,
    /// Figure name (as in `results.json`) to value.
    pub figures: BTreeMap<String, f64>,
    /// Experiment of each point id the source measured.
    pub experiments: BTreeMap<String, String>,
    /// The suite a candidate runs to measure the same figures.
    pub suite: Suite,
    /// Its seed.
    pub seed: u64,
    /// The source run's custom grid.
    pub grid: Option<Grid>,
    /// The source run's `--only`.
    pub only: Vec<String>,
    /// The measured device's description (`device.info` of
    /// `results.json`), for its geometry; `None`: the base profile's.
    pub info: Option<serde_json::Value>,
}

impl Target {
    /// Every figure of a characterization run.
    pub fn from_results(r: &Results, source: &str) -> Result<Target, FitError> {
        if r.device.info.get("zoned").and_then(|z| z.as_bool()) == Some(false) {
            return Err(FitError::Invalid(format!(
                "{source} measured a conventional device; the fit models a zoned namespace"
            )));
        }
        let suite =
            r.suite.parse::<Suite>().map_err(|e| FitError::Invalid(format!("{source}: {e}")))?;
        let figures: BTreeMap<String, f64> =
            r.figures().into_iter().filter(|(_, v)| v.is_finite() && *v > 0.0).collect();
        if figures.is_empty() {
            return Err(FitError::Invalid(format!("{source} holds no figures")));
        }
        Ok(Target {
            source: source.to_string(),
            figures,
            experiments: r.points.iter().map(|p| (p.id.clone(), p.experiment.clone())).collect(),
            suite,
            seed: r.seed,
            grid: r.grid.clone(),
            only: r.only.clone(),
            info: Some(r.device.info.clone()),
        })
    }

    /// The figures of a reference (a real drive's) of one LBA format,
    /// measured on candidates with `suite`.
    pub fn from_reference(r: &Reference, lba_bytes: u64, suite: Suite) -> Target {
        Target {
            source: format!("{} ({})", r.device, r.source),
            figures: r
                .figures
                .iter()
                .filter(|f| f.lba_bytes == lba_bytes && f.value > 0.0)
                .map(|f| (f.name.clone(), f.value))
                .collect(),
            experiments: BTreeMap::new(),
            suite,
            seed: 1,
            grid: None,
            only: Vec::new(),
            info: None,
        }
    }

    /// The experiment a figure belongs to: its point's, or for a summary
    /// figure the experiment whose series it sums up.
    pub fn experiment_of(&self, figure: &str) -> String {
        if let Some((id, _)) = figure.rsplit_once(':') {
            if let Some(e) = self.experiments.get(id) {
                return e.clone();
            }
        }
        experiment_by_name(figure).to_string()
    }
}

/// The experiment of a figure by its name alone (figures of references,
/// summary figures).
pub fn experiment_by_name(figure: &str) -> &str {
    let first = figure.split(['/', ':']).next().unwrap_or(figure);
    match first {
        "read_qd" | "read_zones" => "reads",
        // The write ceiling is set by the QD 1 large writes.
        "ceiling" => "qd1",
        _ if figure.starts_with("qd1/read/") => "reads",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_map_to_their_experiments() {
        assert_eq!(experiment_by_name("read_qd/random/4KiB:max_kiops"), "reads");
        assert_eq!(experiment_by_name("qd1/read/4KiB:p50_us"), "reads");
        assert_eq!(experiment_by_name("qd1/write/4KiB:p50_us"), "qd1");
        assert_eq!(experiment_by_name("ceiling/write_mib_s"), "qd1");
        assert_eq!(experiment_by_name("zone_mgmt/reset/full:p50_us"), "zone_mgmt");
    }
}
