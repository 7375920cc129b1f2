//! `zns emu fit`: an emulator profile from a drive's measurements.
//!
//! A fit starts from a base profile (its flash geometry, write buffer and
//! host interface), takes the measured device's namespace geometry, and
//! adjusts the timing parameters of [`parameters::all`] until the
//! emulator, characterized with the same suite and seed on the virtual
//! clock, reproduces the figures that identify them. Each round runs the
//! whole suite once on the candidate and moves every parameter toward its
//! own figure (a secant step on that figure, a ratio step when there is no
//! usable slope yet): the figures are chosen so that each depends mostly on
//! its own parameter, and the rounds settle the rest of their coupling.
//!
//! Everything the suite measured beyond the identifying figures is a
//! prediction of the fitted profile, and [`FitReport`] says how good each
//! experiment's is; [`cross_validate`] fits again with each experiment
//! held out and reports how well the others predict it.
//!
//! Thread safety: the functions run on the calling thread; the types are
//! plain data.

pub mod geometry;
pub mod parameters;
pub mod target;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use zns_device::DriverDevice;
use zns_emulator::profile::Profile;
use zns_emulator::timing::TimingProfile;
use zns_emulator::MediaChoice;

use crate::characterize::{self, NoProgress, Options, Results};
use parameters::{Direction, Parameter};
pub use target::Target;

/// Why a fit failed.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// Bad input: the target, the base profile or an option.
    #[error("{0}")]
    Invalid(String),
    /// A candidate profile did not pass the emulator's checks.
    #[error("candidate profile: {0}")]
    Profile(#[from] zns_emulator::profile::ProfileError),
    /// The emulator could not be built from a candidate.
    #[error("emulator: {0}")]
    Device(#[from] zns_device::DeviceError),
    /// The characterization of a candidate failed.
    #[error("characterization of a candidate: {0}")]
    Characterize(#[from] characterize::CharacterizeError),
}

/// How to fit.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct FitOptions {
    /// Profile the fit starts from (it must have a timing model).
    pub base: Profile,
    /// Name of the fitted profile.
    pub name: String,
    /// Experiments whose figures the fit does not use (they are predicted
    /// and reported apart).
    pub holdout: Vec<String>,
    /// Most rounds (suite runs on candidates).
    pub rounds: u32,
    /// Done when every identifying figure is within this relative error.
    pub tolerance: f64,
}

impl FitOptions {
    /// Defaults: 12 rounds, 1 % tolerance, nothing held out.
    pub fn new(base: Profile, name: impl Into<String>) -> FitOptions {
        FitOptions { base, name: name.into(), holdout: Vec::new(), rounds: 12, tolerance: 0.01 }
    }
}

/// Progress of a fit.
pub trait FitObserver {
    /// Round `round` (from 1) of at most `of` is done; `worst` is the
    /// largest relative error of an identifying figure.
    fn round(&self, round: u32, of: u32, worst: f64) {
        let _ = (round, of, worst);
    }
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl FitObserver for Quiet {}

/// One parameter's fit.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct ParameterFit {
    /// Name in the `[timing]` table.
    pub name: String,
    /// What it is.
    pub what: String,
    /// The figure it was fitted to; `None`: kept from the base (the target
    /// has none of its figures, or they are held out).
    pub figure: Option<String>,
    /// Its value in the base profile.
    pub base: f64,
    /// Its fitted value.
    pub fitted: f64,
}

/// A figure of the target against the fitted profile's.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct Residual {
    /// Figure name as in `results.json`.
    pub figure: String,
    /// Its experiment.
    pub experiment: String,
    /// The target's value.
    pub target: f64,
    /// The fitted profile's.
    pub fitted: f64,
    /// fitted / target.
    pub ratio: f64,
}

/// How well the fitted profile predicts one experiment's figures that it
/// was not fitted to.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentFit {
    /// Experiment name.
    pub experiment: String,
    /// Held out of the fit (`--holdout`): none of its figures was used.
    pub held_out: bool,
    /// Central figures (means, medians, IOPS, MiB/s) compared.
    pub figures: usize,
    /// Median of |ratio - 1| over them.
    pub median_error: f64,
    /// Share of them within ±10 %.
    pub within_10_percent: f64,
    /// The worst of them.
    pub worst: Option<Residual>,
    /// Tail latency figures (p95 to p99.99) compared.
    pub tail_figures: usize,
    /// Median of |ratio - 1| over the tails.
    pub tail_median_error: f64,
}

/// One round of a fit.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Largest relative error of an identifying figure.
    pub worst: f64,
    /// Root mean square of the log ratios of the identifying figures.
    pub rms_log: f64,
}

/// What a fit did and how well the result reproduces the target.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// Where the target figures come from.
    pub source: String,
    /// The base profile's name.
    pub base: String,
    /// The fitted profile's name.
    pub profile: String,
    /// The suite and seed the candidates ran.
    pub suite: String,
    /// Its seed.
    pub seed: u64,
    /// Experiments held out of the fit.
    pub holdout: Vec<String>,
    /// Every identifying figure within the tolerance.
    pub converged: bool,
    /// The tolerance.
    pub tolerance: f64,
    /// Each round; the fitted profile is the best one's.
    pub rounds: Vec<Round>,
    /// Each parameter.
    pub parameters: Vec<ParameterFit>,
    /// The identifying figures, target against fitted.
    pub fitted: Vec<Residual>,
    /// Every other figure both have, by experiment.
    pub experiments: Vec<ExperimentFit>,
    /// Every other figure both have, one by one.
    pub predicted: Vec<Residual>,
}

impl FitReport {
    /// The prediction summary of `experiment`.
    pub fn experiment(&self, experiment: &str) -> Option<&ExperimentFit> {
        self.experiments.iter().find(|e| e.experiment == experiment)
    }
}

/// A parameter, the figure it is fitted to, and its last two steps.
struct Knob {
    parameter: Parameter,
    figure: String,
    /// (value, measured figure) of the round before.
    last: Option<(f64, f64)>,
}

/// Characterizes `profile` as the target was measured (virtual clock,
/// data-less media: timing does not depend on data).
fn measure(profile: &Profile, target: &Target) -> Result<Results, FitError> {
    profile.validate()?;
    let dev = DriverDevice::open_profile(profile.clone(), MediaChoice::Null, "emu:fit-candidate")?;
    let opts = Options {
        suite: target.suite,
        seed: target.seed,
        only: target.only.clone(),
        force: false,
        grid: target.grid.clone(),
        reference: None,
        ..Default::default()
    };
    Ok(characterize::run(&dev, &opts, &NoProgress)?)
}

/// The next value of a parameter at `value` whose figure measured
/// `measured` against `want`: a secant step from the round before when its
/// slope has the parameter's sign, else a ratio step (exact for a figure
/// proportional to the parameter, short of it for one with a constant
/// part, so it never overshoots such a figure). At most 4× either way.
fn step(knob: &Knob, value: f64, measured: f64, want: f64) -> f64 {
    let p = &knob.parameter;
    let sign = match p.direction {
        Direction::Up => 1.0,
        Direction::Down => -1.0,
    };
    if value <= 0.0 {
        // A ratio step cannot leave 0; a figure that wants more starts
        // from the parameter's seed.
        return if sign * (want - measured) > 0.0 { p.seed } else { 0.0 };
    }
    let secant = knob.last.and_then(|(v0, m0)| {
        let slope = (measured - m0) / (value - v0);
        (slope.is_finite() && slope * sign > 0.0 && (value - v0).abs() > 1e-9 * value)
            .then(|| value + (want - measured) / slope)
    });
    let next = secant.unwrap_or_else(|| match p.direction {
        Direction::Up => value * want / measured,
        Direction::Down => value * measured / want,
    });
    next.clamp(value / 4.0, value * 4.0)
}

/// The profile halfway between `best` and `tried` in every fitted
/// parameter; the knobs forget their last steps.
fn halfway(best: &Profile, tried: &Profile, knobs: &mut [Knob]) -> Profile {
    let mut p = best.clone();
    let (b, t) = (best.timing.as_ref().expect("kept"), tried.timing.as_ref().expect("kept"));
    let mid = p.timing.as_mut().expect("kept");
    for k in knobs {
        let v = (k.parameter.get(b) + k.parameter.get(t)) / 2.0;
        k.parameter.set(mid, v);
        k.last = None;
    }
    p
}

fn residual(target: &Target, figure: &str, want: f64, got: f64) -> Residual {
    Residual {
        figure: figure.to_string(),
        experiment: target.experiment_of(figure),
        target: want,
        fitted: got,
        ratio: got / want,
    }
}

/// Fits a profile to `target`. Returns the fitted profile and the report.
///
/// Errors: a base without a timing model or zoned namespace, a target
/// without geometry the profile needs, a candidate the emulator refuses,
/// or no parameter with a figure to fit.
pub fn fit(
    target: &Target,
    opts: &FitOptions,
    obs: &dyn FitObserver,
) -> Result<(Profile, FitReport), FitError> {
    let mut profile = geometry::apply(&opts.base, target.info.as_ref())?;
    profile.name = opts.name.clone();
    profile.description = format!("fitted by zns emu fit to {}", target.source);
    let base_timing = profile.timing.clone().expect("geometry::apply checks it");
    let (mut knobs, mut kept) = knobs_for(target, opts)?;
    let mut rounds = Vec::new();
    let mut best: Option<(f64, Profile, Results)> = None;
    for round in 1..=opts.rounds.max(1) {
        let results = measure(&profile, target)?;
        if round == 1 {
            keep_unmeasured(&mut knobs, &mut kept, &results, target)?;
        }
        let measured = measured_figures(&knobs, &results, target)?;
        let errors = knobs.iter().zip(&measured).map(|(k, got)| got / target.figures[&k.figure]);
        let worst = errors.clone().map(|r| (r - 1.0).abs()).fold(0.0, f64::max);
        let rms_log = (errors.map(|r| r.ln().powi(2)).sum::<f64>() / knobs.len() as f64).sqrt();
        rounds.push(Round { worst, rms_log });
        obs.round(round, opts.rounds, worst);
        if worst <= opts.tolerance {
            best = Some((rms_log, profile, results));
            break;
        }
        match &best {
            // The parameters' steps interact: a round that ends worse than
            // the best goes back halfway toward it, its slopes forgotten.
            Some((b, best_profile, _)) if rms_log > *b => {
                profile = halfway(best_profile, &profile, &mut knobs);
                continue;
            }
            _ => {}
        }
        let next = stepped(&profile, &mut knobs, measured, target);
        best = Some((rms_log, profile, results));
        profile = next;
    }
    let (_, profile, results) = best.expect("at least one round");
    let timing = profile.timing.as_ref().expect("kept");
    let parameters = parameter_fits(&knobs, &kept, &base_timing, timing);
    let (fitted, predicted) = residuals(target, &knobs, &results);
    let experiments = by_experiment(&predicted, &opts.holdout);
    let converged = rounds.iter().any(|r| r.worst <= opts.tolerance);
    let report = FitReport {
        source: target.source.clone(),
        base: opts.base.name.clone(),
        profile: profile.name.clone(),
        suite: target.suite.name().into(),
        seed: target.seed,
        holdout: opts.holdout.clone(),
        converged,
        tolerance: opts.tolerance,
        rounds,
        parameters,
        fitted,
        experiments,
        predicted,
    };
    Ok((profile, report))
}

/// The parameters to fit, each with the first figure of the target (not
/// held out) that identifies it, and those kept as the base has them.
fn knobs_for(target: &Target, opts: &FitOptions) -> Result<(Vec<Knob>, Vec<Parameter>), FitError> {
    let held = |figure: &str| opts.holdout.contains(&target.experiment_of(figure));
    let mut knobs: Vec<Knob> = Vec::new();
    let mut kept = Vec::new();
    for p in parameters::all() {
        match p.figures.iter().find(|f| target.figures.contains_key(**f) && !held(f)) {
            Some(f) if p.identified_by(&target.figures) => {
                knobs.push(Knob { parameter: p, figure: f.to_string(), last: None })
            }
            Some(f) => {
                tracing::info!(
                    parameter = p.name,
                    figure = %f,
                    "the target's figures do not identify the parameter: it is kept"
                );
                kept.push(p)
            }
            None => kept.push(p),
        }
    }
    if knobs.is_empty() {
        return Err(FitError::Invalid(format!(
            "{} has none of the figures that identify the timing parameters",
            target.source
        )));
    }
    Ok((knobs, kept))
}

/// After the first round: a reference (a drive's published figures) may
/// name a figure the candidates' suite does not measure (the 16 KiB
/// series are `full`'s); its parameter keeps the base's value.
fn keep_unmeasured(
    knobs: &mut Vec<Knob>,
    kept: &mut Vec<Parameter>,
    results: &Results,
    target: &Target,
) -> Result<(), FitError> {
    let (have, lack): (Vec<Knob>, Vec<Knob>) = std::mem::take(knobs)
        .into_iter()
        .partition(|k| results.figure(&k.figure).is_some_and(|v| v > 0.0));
    for k in lack {
        tracing::info!(
            parameter = k.parameter.name,
            figure = %k.figure,
            suite = %target.suite,
            "the suite does not measure the figure: the parameter is kept"
        );
        kept.push(k.parameter);
    }
    *knobs = have;
    if knobs.is_empty() {
        return Err(FitError::Invalid(format!(
            "the candidate's run has none of the figures that identify the timing \
             parameters (the suite {} and its options do not measure them)",
            target.suite
        )));
    }
    Ok(())
}

/// Each knob's figure in a candidate's `results`.
fn measured_figures(
    knobs: &[Knob],
    results: &Results,
    target: &Target,
) -> Result<Vec<f64>, FitError> {
    let mut measured = Vec::with_capacity(knobs.len());
    for knob in knobs {
        let Some(got) = results.figure(&knob.figure).filter(|v| *v > 0.0) else {
            return Err(FitError::Invalid(format!(
                "the candidate's run has no figure {} (the suite {} and its options \
                 do not measure it)",
                knob.figure, target.suite
            )));
        };
        measured.push(got);
    }
    Ok(measured)
}

/// The next candidate: every knob stepped from `profile` toward its
/// figure, given what it `measured`.
fn stepped(profile: &Profile, knobs: &mut [Knob], measured: Vec<f64>, target: &Target) -> Profile {
    let mut next = profile.clone();
    let timing = profile.timing.as_ref().expect("kept");
    let next_timing = next.timing.as_mut().expect("kept");
    for (knob, got) in knobs.iter_mut().zip(measured) {
        let value = knob.parameter.get(timing);
        let v = step(knob, value, got, target.figures[&knob.figure]);
        knob.last = Some((value, got));
        knob.parameter.set(next_timing, v);
    }
    next
}

/// Every parameter's base and fitted value: the fitted ones first, then
/// those kept.
fn parameter_fits(
    knobs: &[Knob],
    kept: &[Parameter],
    base: &TimingProfile,
    fitted: &TimingProfile,
) -> Vec<ParameterFit> {
    let mut parameters: Vec<ParameterFit> = knobs
        .iter()
        .map(|k| ParameterFit {
            name: k.parameter.name.into(),
            what: k.parameter.what.into(),
            figure: Some(k.figure.clone()),
            base: k.parameter.get(base),
            fitted: k.parameter.get(fitted),
        })
        .collect();
    parameters.extend(kept.iter().map(|p| ParameterFit {
        name: p.name.into(),
        what: p.what.into(),
        figure: None,
        base: p.get(base),
        fitted: p.get(fitted),
    }));
    parameters
}

/// The fitted profile's figures against the target: those the knobs were
/// fitted to, and every other one (predicted).
fn residuals(target: &Target, knobs: &[Knob], results: &Results) -> (Vec<Residual>, Vec<Residual>) {
    let identifying: BTreeSet<&str> = knobs.iter().map(|k| k.figure.as_str()).collect();
    let fitted: Vec<Residual> = knobs
        .iter()
        .filter_map(|k| {
            let got = results.figure(&k.figure)?;
            Some(residual(target, &k.figure, target.figures[&k.figure], got))
        })
        .collect();
    let predicted: Vec<Residual> = target
        .figures
        .iter()
        .filter(|(name, _)| !identifying.contains(name.as_str()))
        .filter_map(|(name, want)| {
            let got = results.figure(name).filter(|v| v.is_finite())?;
            Some(residual(target, name, *want, got))
        })
        .collect();
    (fitted, predicted)
}

/// Tail latency statistics: predicted and reported apart (they rest on
/// few samples and on mechanisms the identifying figures do not reach).
fn is_tail(figure: &str) -> bool {
    ["p95_us", "p99_us", "p99_9_us", "p99_99_us"].iter().any(|s| figure.ends_with(s))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn by_experiment(predicted: &[Residual], holdout: &[String]) -> Vec<ExperimentFit> {
    let mut groups: BTreeMap<&str, Vec<&Residual>> = BTreeMap::new();
    for r in predicted {
        groups.entry(r.experiment.as_str()).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(name, rs)| {
            let err = |r: &&Residual| (r.ratio - 1.0).abs();
            let (tail, central): (Vec<&Residual>, Vec<&Residual>) =
                rs.into_iter().partition(|r| is_tail(&r.figure));
            let within = central.iter().filter(|r| err(r) <= 0.10).count();
            ExperimentFit {
                experiment: name.to_string(),
                held_out: holdout.iter().any(|h| h == name),
                figures: central.len(),
                median_error: median(central.iter().map(err).collect()),
                within_10_percent: within as f64 / central.len().max(1) as f64,
                worst: central
                    .iter()
                    .max_by(|a, b| err(a).total_cmp(&err(b)))
                    .map(|r| (*r).clone()),
                tail_figures: tail.len(),
                tail_median_error: median(tail.iter().map(err).collect()),
            }
        })
        .collect()
}

impl FitReport {
    /// How well the fitted profile reproduces the whole target: the
    /// median of |ln(fitted / target)| over every central figure, the
    /// identifying ones and the predicted ones (tails left out, as in
    /// [`ExperimentFit`]). Lower is better; 0.01 is about 1 %.
    pub fn score(&self) -> f64 {
        let logs = self
            .fitted
            .iter()
            .chain(&self.predicted)
            .filter(|r| !is_tail(&r.figure) && r.ratio > 0.0 && r.ratio.is_finite())
            .map(|r| r.ratio.ln().abs())
            .collect();
        median(logs)
    }
}

/// One base profile tried by [`fit_best_base`].
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct BaseTrial {
    /// The base profile's name.
    pub base: String,
    /// Its fit's [`FitReport::score`]; `None` when it could not be fitted.
    pub score: Option<f64>,
    /// Why it could not be fitted.
    pub error: Option<String>,
}

/// Fits from each of `bases` and keeps the fit that reproduces the whole
/// target best ([`FitReport::score`]): the structure the suites' figures
/// cannot identify parameter by parameter (dies, stripes, buffer) is
/// chosen among whole profiles instead. Returns the best fit and every
/// trial, in the order of `bases`.
///
/// Errors: no base could be fitted (the last base's error).
pub fn fit_best_base(
    target: &Target,
    bases: &[Profile],
    opts: &FitOptions,
    obs: &dyn FitObserver,
) -> Result<(Profile, FitReport, Vec<BaseTrial>), FitError> {
    let mut best: Option<(Profile, FitReport)> = None;
    let mut trials = Vec::new();
    let mut last_error = None;
    for base in bases {
        let mut o = opts.clone();
        o.base = base.clone();
        match fit(target, &o, obs) {
            Ok((p, r)) => {
                let score = r.score();
                trials.push(BaseTrial { base: base.name.clone(), score: Some(score), error: None });
                if best.as_ref().is_none_or(|(_, b)| score < b.score()) {
                    best = Some((p, r));
                }
            }
            Err(e) => {
                trials.push(BaseTrial {
                    base: base.name.clone(),
                    score: None,
                    error: Some(e.to_string()),
                });
                last_error = Some(e);
            }
        }
    }
    match best {
        Some((p, r)) => Ok((p, r, trials)),
        None => {
            Err(last_error
                .unwrap_or_else(|| FitError::Invalid("no base profile to fit from".into())))
        }
    }
}

/// One fold of a cross-validation: the fit without one experiment's
/// figures, and how well it predicts that experiment.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize)]
pub struct Fold {
    /// The experiment held out.
    pub experiment: String,
    /// Parameters that lost their figure (kept from the base in this fold).
    pub unidentified: Vec<String>,
    /// How the fold's fit predicts the held-out experiment.
    pub prediction: Option<ExperimentFit>,
    /// The same experiment's prediction by the fit on everything (its
    /// non-identifying figures), for comparison.
    pub with_all: Option<ExperimentFit>,
}

/// Fits once on everything, then once per experiment of the target with
/// that experiment held out, and reports each held-out experiment's
/// prediction beside the full fit's. `obs` sees every round of every
/// fit.
pub fn cross_validate(
    target: &Target,
    opts: &FitOptions,
    obs: &dyn FitObserver,
) -> Result<(Profile, FitReport, Vec<Fold>), FitError> {
    let (profile, full) = fit(target, opts, obs)?;
    let folds = folds(target, opts, &full, obs)?;
    Ok((profile, full, folds))
}

/// The folds of [`cross_validate`] around `full`, a fit of `target` with
/// `opts` already made (by [`fit`] or [`fit_best_base`]).
pub fn folds(
    target: &Target,
    opts: &FitOptions,
    full: &FitReport,
    obs: &dyn FitObserver,
) -> Result<Vec<Fold>, FitError> {
    let experiments: BTreeSet<String> =
        target.figures.keys().map(|f| target.experiment_of(f)).collect();
    let mut folds = Vec::new();
    for e in experiments {
        if opts.holdout.contains(&e) {
            continue;
        }
        let mut o = opts.clone();
        o.holdout.push(e.clone());
        let (_, r) = match fit(target, &o, obs) {
            Ok(x) => x,
            // Holding out the only experiments with identifying figures
            // leaves nothing to fit: that fold has no prediction.
            Err(FitError::Invalid(_)) => continue,
            Err(err) => return Err(err),
        };
        let unidentified = r
            .parameters
            .iter()
            .filter(|p| {
                p.figure.is_none()
                    && full.parameters.iter().any(|q| q.name == p.name && q.figure.is_some())
            })
            .map(|p| p.name.clone())
            .collect();
        folds.push(Fold {
            prediction: r.experiment(&e).cloned(),
            with_all: full.experiment(&e).cloned(),
            experiment: e,
            unidentified,
        });
    }
    Ok(folds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(direction: Direction) -> Knob {
        let mut parameter = parameters::all().remove(0);
        parameter.direction = direction;
        Knob { parameter, figure: "x".into(), last: None }
    }

    #[test]
    fn ratio_steps_head_the_right_way_and_secants_land_on_lines() {
        let up = knob(Direction::Up);
        // Figure = 10 + value: the ratio step falls short, never beyond.
        let v = step(&up, 10.0, 20.0, 30.0);
        assert!(v > 10.0 && v <= 20.0, "{v}");
        let mut up = up;
        up.last = Some((10.0, 20.0));
        assert!((step(&up, v, 10.0 + v, 30.0) - 20.0).abs() < 1e-9);
        // Throughput falling with the parameter: more throughput wanted,
        // a smaller parameter.
        let down = knob(Direction::Down);
        assert!(step(&down, 100.0, 50.0, 100.0) < 100.0);
        // A secant of the wrong sign is not trusted.
        let mut down = down;
        down.last = Some((50.0, 40.0));
        assert!(step(&down, 100.0, 50.0, 100.0) < 100.0);
        // At most 4x per round, and 0 leaves only toward more.
        assert_eq!(step(&knob(Direction::Up), 1.0, 1.0, 1000.0), 4.0);
        let seed = knob(Direction::Up).parameter.seed;
        assert_eq!(step(&knob(Direction::Up), 0.0, 1.0, 2.0), seed);
        assert_eq!(step(&knob(Direction::Up), 0.0, 2.0, 1.0), 0.0);
    }

    #[test]
    fn experiments_summarise_central_and_tail_figures_apart() {
        let r = |figure: &str, ratio: f64| Residual {
            figure: figure.into(),
            experiment: "qd1".into(),
            target: 1.0,
            fitted: ratio,
            ratio,
        };
        let e = by_experiment(
            &[r("a:p50_us", 1.02), r("b:kiops", 0.8), r("c:mean_us", 1.0), r("a:p99_us", 2.0)],
            &["qd1".into()],
        );
        assert_eq!(e.len(), 1);
        let e = &e[0];
        assert!(e.held_out);
        assert_eq!((e.figures, e.tail_figures), (3, 1));
        assert!((e.median_error - 0.02).abs() < 1e-9);
        assert_eq!(e.worst.as_ref().unwrap().figure, "b:kiops");
        assert!((e.within_10_percent - 2.0 / 3.0).abs() < 1e-9);
        assert!((e.tail_median_error - 1.0).abs() < 1e-9);
    }
}
