//! Progress of a run: a bar per experiment and an estimate of the time
//! left for the whole suite.

use std::cell::RefCell;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a run tells about its progress. Every method has an empty default.
pub trait Observer {
    /// The run starts: the experiments it will do, `(name, title, weight)`,
    /// where weight is an estimate of the relative time each takes.
    fn suite_started(&self, experiments: &[(String, String, f64)]) {
        let _ = experiments;
    }
    /// Experiment `index` (of the list above) starts with `steps` steps.
    fn experiment_started(&self, index: usize, steps: u64) {
        let _ = (index, steps);
    }
    /// Some steps of the current experiment are done.
    fn step(&self, n: u64) {
        let _ = n;
    }
    /// Experiment `index` is done.
    fn experiment_finished(&self, index: usize) {
        let _ = index;
    }
    /// The run is done.
    fn suite_finished(&self) {}
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Observer for NoProgress {}

/// Bars on stderr, drawn only when stderr is a terminal: one for the suite
/// (with its ETA) and one for the running experiment.
///
/// Thread safety: used from the suite's thread only.
#[derive(Debug)]
pub struct TerminalProgress {
    multi: MultiProgress,
    state: RefCell<State>,
}

#[derive(Debug, Default)]
struct State {
    suite: Option<ProgressBar>,
    experiment: Option<ProgressBar>,
    experiments: Vec<(String, String, f64)>,
    /// Suite-bar units per experiment.
    units: Vec<u64>,
    /// Suite-bar position when the current experiment started.
    base: u64,
    current: usize,
    steps: u64,
    done_steps: u64,
}

/// Suite-bar units for the whole run.
const SUITE_UNITS: f64 = 100_000.0;

impl TerminalProgress {
    /// Bars on stderr when it is a terminal; hidden otherwise.
    pub fn stderr() -> TerminalProgress {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        TerminalProgress {
            multi: MultiProgress::with_draw_target(target),
            state: Default::default(),
        }
    }

    /// True when the bars are drawn.
    pub fn is_visible(&self) -> bool {
        !self.multi.is_hidden()
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Observer for TerminalProgress {
    fn suite_started(&self, experiments: &[(String, String, f64)]) {
        let mut s = self.state.borrow_mut();
        let total: f64 = experiments.iter().map(|e| e.2.max(0.0)).sum::<f64>().max(1e-9);
        s.units =
            experiments.iter().map(|e| ((e.2.max(0.0) / total) * SUITE_UNITS) as u64).collect();
        let bar = self.multi.add(ProgressBar::new(s.units.iter().sum::<u64>().max(1)));
        bar.set_style(style(
            "suite      [{bar:30}] {percent:>3}%  {elapsed} elapsed, about {eta} left",
        ));
        s.experiments = experiments.to_vec();
        s.suite = Some(bar);
    }

    fn experiment_started(&self, index: usize, steps: u64) {
        let mut s = self.state.borrow_mut();
        let name = s.experiments.get(index).map(|e| e.0.clone()).unwrap_or_default();
        let bar = self.multi.add(ProgressBar::new(steps.max(1)));
        bar.set_style(style("{msg:<18} [{bar:30}] {pos}/{len}"));
        bar.set_message(name);
        s.experiment = Some(bar);
        s.current = index;
        s.steps = steps.max(1);
        s.done_steps = 0;
        s.base = s.units.iter().take(index).sum();
        if let Some(b) = &s.suite {
            b.set_position(s.base);
        }
    }

    fn step(&self, n: u64) {
        let mut s = self.state.borrow_mut();
        s.done_steps = (s.done_steps + n).min(s.steps);
        if let Some(b) = &s.experiment {
            b.set_position(s.done_steps);
        }
        let unit = s.units.get(s.current).copied().unwrap_or(0);
        let pos = s.base + unit * s.done_steps / s.steps;
        if let Some(b) = &s.suite {
            b.set_position(pos);
        }
    }

    fn experiment_finished(&self, _index: usize) {
        let mut s = self.state.borrow_mut();
        if let Some(b) = s.experiment.take() {
            b.finish_and_clear();
            self.multi.remove(&b);
        }
    }

    fn suite_finished(&self) {
        let mut s = self.state.borrow_mut();
        if let Some(b) = s.suite.take() {
            b.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}
