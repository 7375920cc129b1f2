//! `zns emu fit`: an emulator profile fitted to a characterization (or to
//! a built-in reference), written as a profile TOML that `emu:profile=`
//! loads, with the fit's residuals printed and stored beside it.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zns_bench::characterize::{self, reference, Suite, EXPERIMENTS};
use zns_bench::fit::{self, BaseTrial, FitObserver, FitOptions, FitReport, Fold, Target};
use zns_emulator::profile::{NamespaceKind, Profile};

/// Options of `zns emu fit`.
#[derive(Debug, Args)]
pub struct FitArgs {
    /// A `results.json` of `zns characterize` on the drive to emulate.
    #[arg(required_unless_present = "reference", conflicts_with = "reference")]
    pub results: Option<PathBuf>,
    /// Fit to a built-in reference instead (a real drive's figures): its
    /// emulator profile's name (`zn540`).
    #[arg(long, value_name = "PROFILE")]
    pub reference: Option<String>,
    /// With --reference: the suite that measures candidates.
    #[arg(long, default_value = "quick", value_name = "SUITE", requires = "reference")]
    pub suite: String,
    /// The profile TOML to write.
    #[arg(long, value_name = "PROFILE.toml")]
    pub out: PathBuf,
    /// The profile the fit starts from (flash geometry, write buffer, host
    /// interface): a built-in name, a profile file, or `auto`: fit from
    /// every built-in timed ZNS profile and keep the one that reproduces
    /// the run best.
    #[arg(long, default_value = "auto", value_name = "PROFILE")]
    pub base: String,
    /// Name of the fitted profile (default: the output file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Experiments whose figures the fit does not use: it predicts them.
    #[arg(long, value_delimiter = ',', value_name = "EXPERIMENTS")]
    pub holdout: Vec<String>,
    /// Also fit once per experiment with that experiment held out, and
    /// report how well the rest predicts it.
    #[arg(long)]
    pub cross_validate: bool,
    /// Most rounds (suite runs on candidates) per fit.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Done when every identifying figure is within this many percent.
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    pub tolerance: f64,
    /// The fit's report (JSON); default: beside --out, `.fit.json`.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// A progress line on stderr when it is a terminal.
struct Progress(ProgressBar);

impl Progress {
    fn new() -> Progress {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} fit: {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        Progress(bar)
    }
}

impl FitObserver for Progress {
    fn round(&self, round: u32, of: u32, worst: f64) {
        self.0.set_message(format!(
            "round {round} of at most {of}, worst identifying figure {:+.1} %",
            worst * 100.0
        ));
        self.0.tick();
    }
}

/// `--base auto`.
const AUTO: &str = "auto";

/// The built-in profiles `--base auto` tries: those with a timing model
/// and a zoned namespace, conventional twins left out.
fn auto_bases() -> Result<Vec<Profile>> {
    let mut out = Vec::new();
    for name in Profile::built_in_names() {
        let p = Profile::by_name(name)?;
        let zoned = p.namespaces.iter().any(|n| n.kind == NamespaceKind::Zoned);
        if p.timing.is_some() && zoned && zns_emulator::ftl_namespace(&p).is_none() {
            out.push(p);
        }
    }
    Ok(out)
}

fn load_base(spec: &str) -> Result<Vec<Profile>> {
    if spec == AUTO {
        return auto_bases();
    }
    Ok(vec![zns_device::uri::load_profile(spec).with_context(|| format!("--base {spec}"))?])
}

fn target(args: &FitArgs, base: &Profile) -> Result<Target> {
    if let Some(name) = &args.reference {
        let r = reference::for_profile(name).with_context(|| {
            format!(
                "--reference: no built-in reference named {name:?} (known: {})",
                reference::profiles().join(", ")
            )
        })?;
        let suite: Suite = args.suite.parse().map_err(|e| anyhow::anyhow!("--suite: {e}"))?;
        let lba = u64::from(base.namespaces[0].block_size);
        let t = Target::from_reference(&r, lba, suite);
        if t.figures.is_empty() {
            bail!("the {name} reference has no figures for {lba}-byte blocks");
        }
        return Ok(t);
    }
    let path = args.results.as_ref().expect("clap requires one");
    let r = characterize::read_results(path)?;
    let source = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let source = format!("{} ({source})", r.device.uri);
    Ok(Target::from_results(&r, &source)?)
}

pub fn run(args: &FitArgs, out: &mut dyn Write) -> Result<()> {
    if !(args.tolerance > 0.0 && args.tolerance < 100.0) {
        bail!("--tolerance must be a percentage between 0 and 100");
    }
    for e in &args.holdout {
        if !EXPERIMENTS.iter().any(|(n, _)| n == e) {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            bail!("--holdout: unknown experiment {e:?} (known: {})", known.join(", "));
        }
    }
    let bases = load_base(&args.base)?;
    // A reference's figures come without geometry: the first base's
    // (zn540 for auto) gives the block size they are taken for.
    let target = target(args, &bases[0])?;
    let name = args.name.clone().unwrap_or_else(|| {
        args.out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or("fitted".into())
    });
    let mut opts = FitOptions::new(bases[0].clone(), name);
    opts.holdout = args.holdout.clone();
    opts.rounds = args.rounds;
    opts.tolerance = args.tolerance / 100.0;
    let progress = Progress::new();
    let mut trials = None;
    let mut chosen = None;
    if bases.len() > 1 {
        let (p, r, tried) = fit::fit_best_base(&target, &bases, &opts, &progress)?;
        opts.base = bases.iter().find(|b| b.name == r.base).expect("tried").clone();
        trials = Some(tried);
        chosen = Some((p, r));
    }
    let (profile, report) = match chosen {
        Some(fitted) => fitted,
        None => fit::fit(&target, &opts, &progress)?,
    };
    let folds = if args.cross_validate {
        Some(fit::folds(&target, &opts, &report, &progress)?)
    } else {
        None
    };
    progress.0.finish_and_clear();
    if let Some(tried) = &trials {
        print_trials(tried, &report.base, out)?;
    }
    print_report(&report, out)?;
    if let Some(folds) = &folds {
        print_folds(folds, out)?;
    }
    let report_path = args.report.clone().unwrap_or_else(|| args.out.with_extension("fit.json"));
    write_profile(&profile, &report, &args.out)?;
    let json = serde_json::json!({ "fit": report, "bases": trials, "cross_validation": folds });
    std::fs::write(&report_path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("write {}", report_path.display()))?;
    writeln!(
        out,
        "wrote {} and {}; use --device emu:profile={}",
        args.out.display(),
        report_path.display(),
        args.out.display()
    )?;
    Ok(())
}

/// The profile TOML with the fit's summary as comments on top.
fn write_profile(profile: &Profile, report: &FitReport, path: &Path) -> Result<()> {
    let mut text = format!(
        "# Fitted by `zns emu fit` to {} from the {} profile ({} suite, seed {}).\n\
         # Identifying figures within {:.1} %: {}. Residuals: the .fit.json beside it.\n",
        report.source,
        report.base,
        report.suite,
        report.seed,
        report.tolerance * 100.0,
        if report.converged { "yes" } else { "no" }
    );
    for p in &report.parameters {
        let from = p.figure.as_deref().unwrap_or("kept from the base");
        text.push_str(&format!("#   {} = {} ({})\n", p.name, round3(p.fitted), from));
    }
    text.push_str(&profile.to_toml());
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn print_report(r: &FitReport, out: &mut dyn Write) -> Result<()> {
    let best = r.rounds.iter().map(|x| x.rms_log).fold(f64::INFINITY, f64::min);
    writeln!(
        out,
        "fit to {} from {} ({} suite, seed {}): {} rounds, {}",
        r.source,
        r.base,
        r.suite,
        r.seed,
        r.rounds.len(),
        if r.converged {
            format!("every identifying figure within {:.1} %", r.tolerance * 100.0)
        } else {
            format!("not within {:.1} % (best rms log error {best:.3})", r.tolerance * 100.0)
        }
    )?;
    writeln!(out, "{:<22} {:>12} {:>12}  identified by", "parameter", "base", "fitted")?;
    for p in &r.parameters {
        let by = p.figure.as_deref().unwrap_or("(kept from the base)");
        writeln!(out, "{:<22} {:>12} {:>12}  {by}", p.name, round3(p.base), round3(p.fitted))?;
    }
    writeln!(out, "{:<46} {:>12} {:>12} {:>8}", "identifying figure", "target", "fitted", "ratio")?;
    for f in &r.fitted {
        writeln!(out, "  {:<44} {:>12.2} {:>12.2} {:>8.3}", f.figure, f.target, f.fitted, f.ratio)?;
    }
    writeln!(
        out,
        "predicted (figures not fitted to): {:<12} {:>7} {:>8} {:>8} {:>7} {:>8}  worst",
        "experiment", "figures", "median", "±10 %", "tails", "median"
    )?;
    for e in &r.experiments {
        let worst =
            e.worst.as_ref().map(|w| format!("{} {:.3}", w.figure, w.ratio)).unwrap_or_default();
        let pct = |v: f64| if v.is_finite() { format!("{:.1}%", v * 100.0) } else { "-".into() };
        writeln!(
            out,
            "  {:<46} {:>7} {:>8} {:>7.0}% {:>7} {:>8}  {worst}",
            format!("{}{}", e.experiment, if e.held_out { " (held out)" } else { "" }),
            e.figures,
            pct(e.median_error),
            e.within_10_percent * 100.0,
            e.tail_figures,
            pct(e.tail_median_error)
        )?;
    }
    Ok(())
}

fn print_trials(trials: &[BaseTrial], chosen: &str, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "base profiles tried (median |log ratio| over every central figure):")?;
    for t in trials {
        let how = match (t.score, &t.error) {
            (Some(s), _) => format!("{s:.4}{}", if t.base == chosen { "  <- chosen" } else { "" }),
            (None, Some(e)) => format!("not fitted: {e}"),
            (None, None) => "not fitted".into(),
        };
        writeln!(out, "  {:<16} {how}", t.base)?;
    }
    Ok(())
}

fn print_folds(folds: &[Fold], out: &mut dyn Write) -> Result<()> {
    writeln!(out, "cross-validation: each experiment held out, predicted by a fit on the rest")?;
    writeln!(
        out,
        "  {:<20} {:>8} {:>12} {:>12}  parameters without a figure",
        "held out", "figures", "median err", "fit on all"
    )?;
    for f in folds {
        let Some(p) = &f.prediction else { continue };
        let all = f.with_all.as_ref().map(|a| format!("{:.1}%", a.median_error * 100.0));
        writeln!(
            out,
            "  {:<20} {:>8} {:>11.1}% {:>12}  {}",
            f.experiment,
            p.figures,
            p.median_error * 100.0,
            all.unwrap_or_else(|| "-".into()),
            if f.unidentified.is_empty() { "none".into() } else { f.unidentified.join(", ") }
        )?;
    }
    Ok(())
}
