//! `zns characterize`: measures the device's performance model (see
//! `zns_bench::characterize`) and writes `results.json` and `report.html`;
//! `zns characterize --compare A.json B.json` sets two runs side by side;
//! `zns characterize --suite compare --device A --device B [--device C]`
//! runs the same random-write workloads on a ZNS device (through
//! `zns-ftl`), a conventional one and one with Flexible Data Placement
//! (`zns_bench::characterize::versus`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use zns_bench::characterize::{
    self, compare, reference, versus, Grid, Options, Results, RunReference, Suite,
    TerminalProgress, EXPERIMENTS,
};

/// Suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SuiteArg {
    /// A handful of commands per point: checks that everything runs.
    Smoke,
    /// Every experiment with few points and samples.
    Quick,
    /// Every experiment with more points and samples.
    Full,
    /// ZNS against conventional against FDP: the same random writes and
    /// reads on a ZNS device (through zns-ftl), a conventional one and
    /// optionally one with Flexible Data Placement (--device two or three
    /// times).
    Compare,
}

impl SuiteArg {
    /// The characterization suite, `None` for `compare`.
    fn suite(self) -> Option<Suite> {
        match self {
            SuiteArg::Smoke => Some(Suite::Smoke),
            SuiteArg::Quick => Some(Suite::Quick),
            SuiteArg::Full => Some(Suite::Full),
            SuiteArg::Compare => None,
        }
    }
}

/// The devices `--suite compare` runs when none is named: the ZN540, its
/// conventional twin and its FDP twin, cut to 64 zones' worth of flash (of
/// 904) so that twenty device minutes overwrite each many times, keeping
/// no data.
pub const DEFAULT_DEVICES: [&str; 3] = [
    "emu:zn540,zones=64,media=null",
    "emu:zn540-conv,zones=64,media=null",
    "emu:zn540-fdp,zones=64,media=null",
];

/// Arguments of `zns characterize`.
#[derive(Debug, Args)]
pub struct CharacterizeArgs {
    /// How many points and samples.
    #[arg(long, value_enum, default_value = "quick")]
    pub suite: SuiteArg,
    /// Directory for results.json and report.html.
    #[arg(long, default_value = "characterize-out", value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Run only these experiments (comma separated): qd1, intra_zone,
    /// inter_zone, open, zone_mgmt, reads, read_under_write,
    /// reset_interference.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub only: Vec<String>,
    /// Reset every zone first if some hold data (the data is lost).
    #[arg(long)]
    pub force: bool,
    /// A custom grid over the suite's points: a TOML file, or the same
    /// TOML on the command line (e.g. 'read_qds = [1, 64, 1024]'); fields
    /// in docs/characterize.md ("Custom grids").
    #[arg(long, value_name = "FILE|TOML")]
    pub grid: Option<String>,
    /// Measure against another run (its results.json, e.g. a real drive's)
    /// instead of the profile's reference figures: the ratio table is made
    /// against it and the plots draw its values over the measured curves.
    #[arg(long, value_name = "RESULTS.json")]
    pub reference: Option<PathBuf>,
    /// The device's time dilation factor when the device does not say
    /// (a dilated emulator behind `zns serve`, reached with `tcp:`): every
    /// device time is divided by it. An `emu:...,dilation=F` device in
    /// this process gives its own.
    #[arg(long, value_name = "F")]
    pub dilation: Option<f64>,
    /// Measure real-time fidelity instead of one run: the suite on the
    /// `emu:` device (a) in process on the virtual clock, (b) in process on
    /// the real clock, (c) served over NVMe/TCP from this process and
    /// reached with the `tcp:` initiator; writes each run and
    /// fidelity.json into --out and prints each path's headline figures
    /// as ratios to (a), or why a path does not carry one.
    #[arg(long, conflicts_with_all = ["compare", "reference"])]
    pub fidelity: bool,
    /// With --fidelity: the paths to run (comma separated, from a, b, c;
    /// a is always run).
    #[arg(long, value_delimiter = ',', value_name = "LIST", requires = "fidelity")]
    pub paths: Vec<String>,
    /// With --fidelity: results.json of the same suite run from inside a
    /// guest against the served device (`ng:` or `zbd:`), added as path
    /// (d).
    #[arg(long, value_name = "RESULTS.json", requires = "fidelity")]
    pub guest: Option<PathBuf>,
    /// With --fidelity: the target's poll time for path (c), µs (as `zns
    /// serve --poll-us`).
    #[arg(long, default_value_t = 0, value_name = "US", requires = "fidelity")]
    pub target_poll_us: u64,
    /// Time a fixed CPU-bound workload and a fixed kernel path (4 KiB
    /// through a socket pair) instead of measuring a device and print how
    /// slow this host is against the reference (JSON): the dilation factor
    /// to give a device this host measures.
    #[arg(long, conflicts_with_all = ["compare", "fidelity"])]
    pub probe: bool,
    /// With --probe: the reference host's probe time, ns (its own --probe
    /// output), instead of the built-in one.
    #[arg(long, value_name = "NS", requires = "probe")]
    pub probe_reference: Option<u64>,
    /// With --probe: the reference host's kernel probe time, ns (its own
    /// --probe output's kernel_ns), instead of the built-in one.
    #[arg(long, value_name = "NS", requires = "probe")]
    pub probe_kernel_reference: Option<u64>,
    /// Compare two results.json files instead of measuring: prints figure,
    /// A, B and B/A.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"],
          conflicts_with_all = ["suite", "out", "seed", "only", "force", "grid", "reference"])]
    pub compare: Option<Vec<PathBuf>>,
    /// With --compare: also write an HTML comparison (both runs' plots on
    /// the same axes and every figure) to this file.
    #[arg(long, requires = "compare", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Trace every command and flash operation of the emulated device
    /// into FILE (JSON trace-event format for ui.perfetto.dev; the last
    /// events, see docs/observability.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["compare", "fidelity", "probe"])]
    pub trace: Option<PathBuf>,
    /// With --suite compare: device minutes of sustained random writes.
    #[arg(long, value_name = "MIN")]
    pub minutes: Option<f64>,
    /// With --suite compare: KiB per write request.
    #[arg(long, value_name = "KIB")]
    pub request_kib: Option<u64>,
    /// With --suite compare: capacities of random writes before the
    /// measured run.
    #[arg(long, value_name = "X")]
    pub precondition: Option<f64>,
    /// With --suite compare: device seconds per throughput bin.
    #[arg(long, value_name = "S")]
    pub bin_seconds: Option<f64>,
    /// With --suite compare: device seconds of reads among writes.
    #[arg(long, value_name = "S")]
    pub read_seconds: Option<f64>,
    /// With --suite compare: 4 KiB reads after each write request in that
    /// phase.
    #[arg(long, value_name = "N")]
    pub reads_per_write: Option<u32>,
    /// With --suite compare: 4 KiB reads alone on the settled device.
    #[arg(long, value_name = "N")]
    pub idle_reads: Option<u64>,
    /// With --suite compare: over-provisioning of the host FTL, percent
    /// (default: the conventional twin's own).
    #[arg(long, value_name = "PCT")]
    pub ftl_op: Option<f64>,
    /// With --suite compare: percent of the capacity that is hot in the
    /// hot/cold workload (its first blocks).
    #[arg(long, value_name = "PCT")]
    pub hot_percent: Option<f64>,
    /// With --suite compare: percent of the hot/cold workload's random
    /// writes that go to the hot range.
    #[arg(long, value_name = "PCT")]
    pub hot_writes_percent: Option<f64>,
    /// With --suite compare: write the hot/cold workload's cold range at
    /// random, like its hot range, instead of in order round and round.
    #[arg(long)]
    pub cold_random: bool,
}

impl CharacterizeArgs {
    /// The options only `--suite compare` takes that were given.
    fn compare_options_given(&self) -> Vec<&'static str> {
        let given = [
            ("--minutes", self.minutes.is_some()),
            ("--request-kib", self.request_kib.is_some()),
            ("--precondition", self.precondition.is_some()),
            ("--bin-seconds", self.bin_seconds.is_some()),
            ("--read-seconds", self.read_seconds.is_some()),
            ("--reads-per-write", self.reads_per_write.is_some()),
            ("--idle-reads", self.idle_reads.is_some()),
            ("--ftl-op", self.ftl_op.is_some()),
            ("--hot-percent", self.hot_percent.is_some()),
            ("--hot-writes-percent", self.hot_writes_percent.is_some()),
            ("--cold-random", self.cold_random),
        ];
        given.iter().filter(|g| g.1).map(|g| g.0).collect()
    }

    /// The comparison's options.
    fn compare_options(&self) -> versus::CompareOptions {
        let d = versus::CompareOptions::default();
        versus::CompareOptions {
            request_bytes: self.request_kib.map_or(d.request_bytes, |k| k * 1024),
            precondition: self.precondition.unwrap_or(d.precondition),
            sustained_s: self.minutes.map_or(d.sustained_s, |m| m * 60.0),
            bin_s: self.bin_seconds.unwrap_or(d.bin_s),
            settle_s: d.settle_s,
            idle_reads: self.idle_reads.unwrap_or(d.idle_reads),
            read_s: self.read_seconds.unwrap_or(d.read_s),
            reads_per_write: self.reads_per_write.unwrap_or(d.reads_per_write),
            hot_fraction: self.hot_percent.map_or(d.hot_fraction, |p| p / 100.0),
            hot_share: self.hot_writes_percent.map_or(d.hot_share, |p| p / 100.0),
            cold_in_order: !self.cold_random && d.cold_in_order,
            ftl_op: self.ftl_op.map(|p| p / 100.0),
            seed: self.seed,
            force: self.force,
        }
    }
}

/// The grid `--grid` names: a file when one exists at that path, else
/// TOML text.
fn read_grid(arg: &str) -> Result<Grid> {
    let path = std::path::Path::new(arg);
    let (text, from) = if path.is_file() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--grid: cannot read {}", path.display()))?;
        (text, path.display().to_string())
    } else if arg.contains('=') {
        (arg.to_string(), "the command line".to_string())
    } else {
        bail!("--grid {arg:?}: no such file, and not TOML (a field = value)");
    };
    Grid::from_toml(&text).map_err(|e| anyhow::anyhow!("--grid ({from}): {e}"))
}

pub fn run(uri: &str, args: &CharacterizeArgs, out: &mut dyn Write) -> Result<()> {
    if let Some(files) = &args.compare {
        return compare_files(&files[0], &files[1], args.html.as_deref(), out);
    }
    if args.probe {
        let reference = zns_bench::probe::Reference {
            cpu_ns: args.probe_reference,
            kernel_ns: args.probe_kernel_reference,
        };
        let p = zns_bench::probe::run(5, reference);
        writeln!(out, "{}", serde_json::to_string_pretty(&p)?)?;
        return Ok(());
    }
    if args.fidelity {
        return run_fidelity(uri, args, out);
    }
    let Some(suite) = args.suite.suite() else {
        bail!(
            "--suite compare takes a ZNS device, a conventional one and optionally an FDP one \
             (--device two or three times)"
        );
    };
    let extra = args.compare_options_given();
    if !extra.is_empty() {
        bail!("only --suite compare takes {}", extra.join(", "));
    }
    for name in &args.only {
        if !EXPERIMENTS.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            bail!("--only: unknown experiment {name:?} (known: {})", known.join(", "));
        }
    }
    let grid = args.grid.as_deref().map(read_grid).transpose()?;
    let reference = match &args.reference {
        Some(path) => Some((
            path,
            RunReference::load(path).with_context(|| format!("--reference {}", path.display()))?,
        )),
        None => None,
    };
    let dev = zns_device::open(uri)?;
    if let Some((path, r)) = &reference {
        // The run checks it as well; here the message names the option.
        r.check_block_size(u64::from(dev.info().block_size))
            .with_context(|| format!("--reference {}", path.display()))?;
    }
    let opts = Options {
        suite,
        seed: args.seed,
        only: args.only.clone(),
        force: args.force,
        grid,
        reference: reference.map(|(_, r)| r),
        dilation: args.dilation,
        late_source: None,
    };
    let progress = TerminalProgress::stderr();
    let results = characterize::run(dev.as_ref(), &opts, &progress).context("characterize")?;
    drop(dev);
    let (json, html) = characterize::write_outputs(&results, &args.out)?;
    summary(&results, out)?;
    writeln!(out, "wrote {} and {}", json.display(), html.display())?;
    if let Some(t) = &args.trace {
        writeln!(out, "wrote trace {}", t.display())?;
    }
    let stopped: Vec<&str> =
        results.experiments.iter().filter(|e| e.error.is_some()).map(|e| e.name.as_str()).collect();
    if !stopped.is_empty() {
        bail!("experiments stopped early: {} (see {})", stopped.join(", "), json.display());
    }
    Ok(())
}

pub(crate) fn summary(r: &Results, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{} on {} (clock {}): {} points, {:.2} s device time, {:.2} s wall time",
        r.suite,
        r.device.uri,
        r.device.clock,
        r.points.len(),
        r.duration.device_ns as f64 / 1e9,
        r.host.wall_ns as f64 / 1e9
    )?;
    if r.device.dilation != 1.0 {
        writeln!(
            out,
            "dilated device: every device time was divided by {} (figures are the modelled \
             drive's)",
            r.device.dilation
        )?;
    }
    if let Some(l) = &r.host.late_completions {
        writeln!(out, "late completions: {}", late_line(l))?;
    }
    writeln!(
        out,
        "{:<20} {:>6} {:>10} {:>10}  status",
        "experiment", "points", "device s", "wall s"
    )?;
    for e in &r.experiments {
        let status = match &e.error {
            Some(err) => format!("stopped: {err}"),
            None if !e.skipped.is_empty() => format!("ok ({} parts skipped)", e.skipped.len()),
            None => "ok".to_string(),
        };
        writeln!(
            out,
            "{:<20} {:>6} {:>10.3} {:>10.3}  {status}",
            e.name,
            e.points,
            e.duration.device_ns as f64 / 1e9,
            r.host.experiments_wall_ns.get(&e.name).copied().unwrap_or(0) as f64 / 1e9
        )?;
    }
    match &r.host.overhead {
        Some(o) => writeln!(out, "engine overhead: {}", characterize::describe_overhead(o))?,
        None => writeln!(out, "engine overhead: not measured")?,
    }
    let key = [
        "qd1/write/4KiB:mean_us",
        "qd1/append/4KiB:mean_us",
        "qd1/read/4KiB:mean_us",
        "read_qd/random/4KiB/qd=1:p50_us",
        "read_qd/random/4KiB/qd=1:p99_us",
        "open/first_write/implicit:mean_us",
        "zone_mgmt/reset/full:p50_us",
        "zone_mgmt/finish/50%:p50_us",
    ];
    let mut figures: Vec<(String, f64)> =
        key.iter().filter_map(|k| r.figure(k).map(|v| (k.to_string(), v))).collect();
    figures.extend(r.summary.iter().map(|(k, v)| (k.clone(), *v)));
    if !figures.is_empty() {
        writeln!(out, "key figures:")?;
        for (k, v) in figures {
            writeln!(out, "  {k:<46} {v:>12.2}")?;
        }
    }
    if let Some(t) = &r.reference {
        let measured: Vec<f64> = t.rows.iter().filter_map(|row| row.ratio).collect();
        let whose = if t.kind == characterize::results::REFERENCE_RUN {
            format!("the reference run {}", t.source)
        } else {
            format!("the {} reference ({})", t.profile, t.device)
        };
        writeln!(
            out,
            "measured against {whose}, {} B LBA format: {} of {} figures measured",
            t.lba_bytes,
            measured.len(),
            t.rows.len()
        )?;
        writeln!(out, "  {:<46} {:>12} {:>12} {:>8}", "figure", "reference", "measured", "ratio")?;
        for row in &t.rows {
            if let (Some(m), Some(q)) = (row.measured, row.ratio) {
                writeln!(
                    out,
                    "  {:<46} {:>12.2} {:>12.2} {:>8.3}",
                    row.figure, row.reference, m, q
                )?;
            }
        }
    } else if let Some(p) = &r.device.profile {
        if !reference::profiles().contains(&p.as_str()) {
            writeln!(out, "no reference figures for the {p} profile")?;
        } else {
            writeln!(
                out,
                "no reference figures for the {p} profile with {} B blocks",
                reference::lba_bytes(r)
            )?;
        }
    }
    Ok(())
}

fn compare_files(a: &Path, b: &Path, html: Option<&Path>, out: &mut dyn Write) -> Result<()> {
    let ra = characterize::read_results(a)?;
    let rb = characterize::read_results(b)?;
    writeln!(
        out,
        "A: {} ({}, clock {}, suite {})",
        a.display(),
        ra.device.uri,
        ra.device.clock,
        ra.suite
    )?;
    writeln!(
        out,
        "B: {} ({}, clock {}, suite {})",
        b.display(),
        rb.device.uri,
        rb.device.clock,
        rb.suite
    )?;
    let rows = compare::compare(&ra, &rb);
    write!(out, "{}", compare::to_text(&rows))?;
    if let Some(path) = html {
        let page = compare::html(&ra, &a.display().to_string(), &rb, &b.display().to_string());
        std::fs::write(path, page).with_context(|| format!("write {}", path.display()))?;
        writeln!(out, "wrote {}", path.display())?;
    }
    Ok(())
}

/// `zns characterize --suite compare`: `devices` are the `--device`
/// values ([`DEFAULT_DEVICES`] when none was given).
pub fn run_compare(
    devices: &[String],
    device_given: bool,
    args: &CharacterizeArgs,
    out: &mut dyn Write,
) -> Result<()> {
    if args.trace.is_some() {
        bail!(
            "--trace takes one emu: device; --suite compare runs several (give each a trace=FILE)"
        );
    }
    if !args.only.is_empty() {
        bail!(
            "--only selects experiments of the other suites; --suite compare runs all of its own"
        );
    }
    if args.grid.is_some() {
        bail!("--grid sets points of the other suites; --suite compare takes its own options");
    }
    if args.reference.is_some() {
        bail!("--reference is for the other suites; --suite compare has no reference figures");
    }
    let uris: Vec<String> = if device_given {
        devices.to_vec()
    } else {
        writeln!(
            out,
            "no --device given: comparing {}, {} and {} (the ZN540, its conventional twin and its \
             FDP twin, scaled to 64 of its 904 zones, keeping no data)",
            DEFAULT_DEVICES[0], DEFAULT_DEVICES[1], DEFAULT_DEVICES[2]
        )?;
        DEFAULT_DEVICES.iter().map(|s| s.to_string()).collect()
    };
    if !(2..=3).contains(&uris.len()) {
        bail!(
            "--suite compare takes a ZNS device, a conventional one and optionally one with FDP \
             (--device two or three times); got {}: {}",
            uris.len(),
            uris.join(", ")
        );
    }
    let devs = uris
        .iter()
        .map(|u| zns_device::open(u).with_context(|| format!("open {u}")))
        .collect::<Result<Vec<Arc<dyn zns_device::ZonedDevice>>>>()?;
    let opts = args.compare_options();
    let progress = TerminalProgress::stderr();
    let results = versus::run(devs, &opts, &progress).context("compare")?;
    let paths = versus::write_outputs(&results, &args.out)?;
    compare_summary(&results, out)?;
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    writeln!(out, "wrote {}", names.join(", "))?;
    Ok(())
}

fn compare_summary(r: &versus::CompareResults, out: &mut dyn Write) -> Result<()> {
    let c = &r.config;
    writeln!(
        out,
        "{} KiB random writes: fill, {} capacities of preconditioning, {:.0} s measured in {} s \
         bins, uniform then hot/cold ({:.0} % of the capacity taking {:.0} % of the writes, the \
         cold range {}, {:.2} capacities of preconditioning); host FTL OP {:.1} %",
        c.request_bytes / 1024,
        c.precondition_capacities,
        c.sustained_s,
        c.bin_s,
        c.hot_fraction * 100.0,
        c.hot_share * 100.0,
        if c.cold_in_order { "in order" } else { "at random" },
        c.hot_cold_precondition_capacities,
        c.ftl_op * 100.0
    )?;
    for s in std::iter::once(&r.zns).chain([&r.conventional]).chain(r.fdp.as_ref()) {
        writeln!(
            out,
            "{:<12} {} (clock {}), garbage collection: {}",
            s.role, s.device.uri, s.device.clock, s.gc
        )?;
    }
    writeln!(
        out,
        "{:.1} s of device time in {:.1} s of wall time",
        r.duration.device_ns as f64 / 1e9,
        r.duration.wall_ns as f64 / 1e9
    )?;
    write!(out, "{}", versus::to_text(r))?;
    Ok(())
}

/// One line on the late completions of a run.
pub(crate) fn late_line(l: &characterize::results::LateCompletions) -> String {
    if l.late == 0 {
        format!(
            "none of {} (> {} µs past due; max {:.1} µs)",
            l.completions, l.late_after_us, l.max_us
        )
    } else {
        format!(
            "{} of {} posted more than {} µs past due (p99 {:.1} µs, max {:.1} µs): the host did \
             not collect them in time, and figures measured from them are inflated",
            l.late, l.completions, l.late_after_us, l.p99_us, l.max_us
        )
    }
}

/// `zns characterize --fidelity`: the suite over paths (a), (b), (c) (and
/// a guest's run as (d)) to the same emulated drive, and the table of
/// their headline figures (`zns_bench::characterize::fidelity`).
fn run_fidelity(uri: &str, args: &CharacterizeArgs, out: &mut dyn Write) -> Result<()> {
    use zns_bench::characterize::fidelity::{self, PathRun};
    use zns_device::DeviceUri;

    let Some(suite) = args.suite.suite() else {
        bail!("--fidelity runs the smoke, quick or full suite, not compare");
    };
    let base = match uri.parse::<DeviceUri>() {
        Ok(DeviceUri::Emulator(e)) if e.file.is_none() => e,
        _ => bail!(
            "--fidelity measures an emulated drive over several paths: give --device \
             emu:PROFILE (a timed profile such as zn540); a guest's run on the served device \
             comes in with --guest"
        ),
    };
    if base.clock.is_some() {
        bail!("--fidelity chooses the clock of each path itself: leave clock= out of {uri}");
    }
    let paths: Vec<String> = if args.paths.is_empty() {
        vec!["a".into(), "b".into(), "c".into()]
    } else {
        args.paths.clone()
    };
    if let Some(p) = paths.iter().find(|p| !matches!(p.as_str(), "a" | "b" | "c")) {
        bail!("--paths: unknown path {p:?} (a, b, c; a guest's run comes with --guest)");
    }
    let grid = args.grid.as_deref().map(read_grid).transpose()?;
    let opts = |dilation: Option<f64>, late_source| Options {
        suite,
        seed: args.seed,
        only: args.only.clone(),
        force: args.force,
        grid: grid.clone(),
        reference: None,
        dilation,
        late_source,
    };
    let real = format!("{uri},clock=real");
    let mut runs: Vec<PathRun> = Vec::new();
    let progress = TerminalProgress::stderr();
    let mut one = |path: &str, label: &str, results: Results, out: &mut dyn Write| -> Result<()> {
        let dir = args.out.join(path);
        characterize::write_outputs(&results, &dir)?;
        writeln!(out, "({path}) {label}: wrote {}", dir.display())?;
        runs.push(PathRun { path: path.into(), label: label.into(), results });
        Ok(())
    };
    // (a): the model's own figures.
    let dev = zns_device::open(uri)?;
    if !dev.emulator().is_some_and(|e| e.is_timed()) {
        bail!("--fidelity: {uri} has no timing model (use a timed profile such as emu:zn540)");
    }
    let r = characterize::run(dev.as_ref(), &opts(None, None), &progress).context("path (a)")?;
    drop(dev);
    one("a", "in process, virtual clock", r, out)?;
    if paths.iter().any(|p| p == "b") {
        let dev = zns_device::open(&real)?;
        let r =
            characterize::run(dev.as_ref(), &opts(None, None), &progress).context("path (b)")?;
        drop(dev);
        one("b", "in process, real clock", r, out)?;
    }
    if paths.iter().any(|p| p == "c") {
        let dev = zns_device::open(&real)?;
        let emulator = dev.emulator().cloned();
        let dilation = emulator.as_ref().map(|e| e.clock().dilation().factor());
        let nqn = "nqn.2026-11.io.znskit:fidelity";
        let sub =
            zns_nvmf::Subsystem::with_backends(nqn.to_string(), zns_nvmf::Backend::of_device(dev))?;
        let config = zns_nvmf::TargetConfig {
            poll: std::time::Duration::from_micros(args.target_poll_us),
            ..Default::default()
        };
        let target = zns_nvmf::NvmfTarget::bind("127.0.0.1:0", sub, config)
            .context("serve the device on loopback for path (c)")?;
        let tcp = format!("tcp:{}/{nqn}", target.local_addr());
        let result = zns_device::open(&tcp).map_err(anyhow::Error::from).and_then(|remote| {
            characterize::run(remote.as_ref(), &opts(dilation, emulator), &progress)
                .context("path (c)")
        });
        target.stop();
        one("c", "zns serve (real clock) and the tcp: initiator, loopback", result?, out)?;
    }
    if let Some(path) = &args.guest {
        let r = characterize::read_results(path)?;
        one("d", "from inside the guest (kernel nvme-tcp)", r, out)?;
    }
    let table = fidelity::table(&runs);
    let json = args.out.join("fidelity.json");
    std::fs::write(&json, serde_json::to_string_pretty(&table)? + "\n")
        .with_context(|| format!("write {}", json.display()))?;
    write!(out, "{}", fidelity::to_text(&table))?;
    writeln!(out, "wrote {}", json.display())?;
    Ok(())
}
