//! The timing parameters a fit adjusts, each tied to the figures of a
//! characterization that identify it.
//!
//! QD 1 latencies are fitted by their means, as the built-in models
//! were calibrated (a drive's firmware housekeeping puts a part of every
//! mean in the tail, which the model's housekeeping reproduces; the
//! medians then follow). Every parameter here moves one figure far more than any other
//! parameter does (a QD 1 latency, a ceiling, a zone management cost), so
//! the fit can move each toward its own figure and let the others follow
//! (a Jacobi iteration: see [`super::fit`]). Parameters no figure of the
//! suites identifies (the geometry of the flash, the write buffer, the
//! number of processing units, the host interface's fixed delays) stay as
//! the base profile has them; docs/fit.md lists both.

use zns_emulator::timing::TimingProfile;

/// How a figure moves when its parameter grows.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The figure grows with the parameter (a cost adding to a latency).
    Up,
    /// The figure falls as the parameter grows (a cost limiting a
    /// throughput, a rate shortening a latency).
    Down,
}

/// One adjustable parameter of the `[timing]` table.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy)]
pub struct Parameter {
    /// Name as in the `[timing]` table (`read_us` is the mean of its
    /// levels, scaled together).
    pub name: &'static str,
    /// Figures that identify it, best first: the fit uses the first one
    /// the target has.
    pub figures: &'static [&'static str],
    /// How the figure moves with it.
    pub direction: Direction,
    /// Smallest value the fit may give it.
    pub min: f64,
    /// Largest value the fit may give it.
    pub max: f64,
    /// A start for a parameter whose base value is 0 (a ratio step cannot
    /// leave 0).
    pub seed: f64,
    /// What the parameter is, for the report.
    pub what: &'static str,
    /// A condition on the target for its figure to identify it: `(figure,
    /// bound, fraction)` asks for `figure < fraction × bound`. Where the
    /// target fails it (or lacks either figure), the parameter is kept.
    pub only_below: Option<(&'static str, &'static str, f64)>,
    get: fn(&TimingProfile) -> f64,
    set: fn(&mut TimingProfile, f64),
}

impl Parameter {
    /// Its value in `t`.
    pub fn get(&self, t: &TimingProfile) -> f64 {
        (self.get)(t)
    }

    /// Whether `figures` (a target's) identify it: its `only_below`
    /// condition holds, or it has none.
    pub fn identified_by(&self, figures: &std::collections::BTreeMap<String, f64>) -> bool {
        self.only_below.is_none_or(|(figure, bound, fraction)| {
            matches!((figures.get(figure), figures.get(bound)), (Some(f), Some(b)) if *f < fraction * b)
        })
    }

    /// Sets it in `t` (clamped to its range, rounded as the table stores
    /// it).
    pub fn set(&self, t: &mut TimingProfile, v: f64) {
        (self.set)(t, v.clamp(self.min, self.max))
    }
}

/// Reads and writes one parameter of a timing table.
type Access = (fn(&TimingProfile) -> f64, fn(&mut TimingProfile, f64));

fn round(v: f64) -> u64 {
    v.round().max(0.0) as u64
}

macro_rules! integer {
    ($field:ident) => {
        (|t: &TimingProfile| t.$field as f64, |t: &mut TimingProfile, v: f64| t.$field = round(v))
    };
}

/// The mean array read time over the page levels.
fn read_mean(t: &TimingProfile) -> f64 {
    t.read_us.iter().sum::<f64>() / t.read_us.len().max(1) as f64
}

/// Scales every page level's read time so their mean is `v` (the levels
/// keep their proportions: the spread of QD 1 read latencies).
fn set_read_mean(t: &mut TimingProfile, v: f64) {
    let mean = read_mean(t);
    if mean > 0.0 {
        let k = v / mean;
        for r in &mut t.read_us {
            *r = (*r * k * 100.0).round() / 100.0;
        }
    } else {
        t.read_us.iter_mut().for_each(|r| *r = v);
    }
}

/// Every parameter the fit adjusts, in the order it reports them.
pub fn all() -> Vec<Parameter> {
    let mut v = read_parameters();
    v.extend(write_parameters());
    v.extend(zone_context_parameters());
    v.extend(zone_management_parameters());
    v
}

/// A parameter without a condition on the target.
fn param(
    name: &'static str,
    figures: &'static [&'static str],
    direction: Direction,
    (min, max, seed): (f64, f64, f64),
    what: &'static str,
    (get, set): Access,
) -> Parameter {
    Parameter { name, figures, direction, min, max, seed, what, only_below: None, get, set }
}

/// The array read time and the device-to-host link: QD 1 read latency and
/// the read ceilings.
fn read_parameters() -> Vec<Parameter> {
    use Direction::{Down, Up};
    vec![
        param(
            "read_us",
            &["qd1/read/4KiB:mean_us", "qd1/read/4KiB:p50_us", "read_qd/random/4KiB/qd=1:mean_us"],
            Up,
            (1.0, 2000.0, 50.0),
            "array read time (mean over page levels)",
            (read_mean, set_read_mean),
        ),
        param(
            "link_to_host_command_ns",
            &["read_qd/random/4KiB:max_kiops", "read_zones/random/4KiB:max_kiops"],
            Down,
            (0.0, 1_000_000.0, 1000.0),
            "the device-to-host DMA's work per command, on the link (sets the 4 KiB read ceiling)",
            integer!(link_to_host_command_ns),
        ),
        param(
            "link_to_host_list_ns",
            &["read_qd/random/16KiB:max_mib_s"],
            Down,
            (0.0, 1_000_000.0, 300.0),
            "more of that work with a PRP list (sets the 16 KiB read ceiling)",
            integer!(link_to_host_list_ns),
        ),
        param(
            "link_to_host_mbps",
            &["read_qd/sequential/128KiB:max_mib_s", "read_zones/sequential/128KiB:max_mib_s"],
            Up,
            (50.0, 100_000.0, 3000.0),
            "device-to-host data rate (sets the 128 KiB read ceiling)",
            integer!(link_to_host_mbps),
        ),
    ]
}

/// Write and append processing, the host-to-device link and programs:
/// QD 1 write latencies and the write ceilings.
fn write_parameters() -> Vec<Parameter> {
    use Direction::{Down, Up};
    vec![
        param(
            "write_ns",
            &["qd1/write/4KiB:mean_us", "qd1/write/4KiB:p50_us"],
            Up,
            (0.0, 1_000_000.0, 1000.0),
            "write processing before the data transfer",
            integer!(write_ns),
        ),
        param(
            "write_overlap_ns",
            &["inter_zone/write/4KiB:max_kiops"],
            Down,
            (0.0, 1_000_000.0, 1000.0),
            "write processing overlapping the transfer (sets the many-zone write ceiling)",
            integer!(write_overlap_ns),
        ),
        param(
            "append_ns",
            &["qd1/append/4KiB:mean_us", "qd1/append/4KiB:p50_us"],
            Up,
            (0.0, 1_000_000.0, 1000.0),
            "Zone Append processing before the data transfer",
            integer!(append_ns),
        ),
        param(
            "append_overlap_ns",
            &["intra_zone/append/4KiB:max_kiops", "inter_zone/append/4KiB:max_kiops"],
            Down,
            (0.0, 1_000_000.0, 1000.0),
            "Zone Append processing overlapping the transfer (sets the append ceiling)",
            integer!(append_overlap_ns),
        ),
        param(
            "link_from_host_mbps",
            &["qd1/write/128KiB:p50_us", "qd1/append/128KiB:p50_us"],
            Down,
            (50.0, 100_000.0, 2000.0),
            "host-to-device data rate",
            integer!(link_from_host_mbps),
        ),
        param(
            "program_us",
            &["ceiling/write_mib_s"],
            Down,
            (10.0, 100_000.0, 1000.0),
            "program time of one program unit (sets the write bandwidth)",
            integer!(program_us),
        ),
        param(
            "stripe_open_us",
            &["qd1/write/128KiB:p99_us"],
            Up,
            (0.0, 100_000.0, 100.0),
            "binding a zone's next stripe of erase blocks (the large-write tail)",
            integer!(stripe_open_us),
        ),
    ]
}

/// A zone's write context: opening a zone implicitly and switching
/// between zones.
fn zone_context_parameters() -> Vec<Parameter> {
    use Direction::Up;
    vec![
        param(
            "implicit_open_ns",
            &["open/first_write/implicit:mean_us", "open/first_write/implicit:p50_us"],
            Up,
            (0.0, 10_000_000.0, 1000.0),
            "first write to a zone it opens implicitly (beyond fetching its write context)",
            integer!(implicit_open_ns),
        ),
        Parameter {
            // Two zones at QD 1 each: every write waits for the other
            // zone's context. Where two zones already reach the many-zone
            // ceiling, the wait hides behind the processing unit and the
            // figure does not identify it.
            only_below: Some((
                "inter_zone/write/4KiB/zones=2:kiops",
                "inter_zone/write/4KiB:max_kiops",
                0.9,
            )),
            ..param(
                "zone_switch_ns",
                &["inter_zone/write/4KiB/zones=2:mean_us"],
                Up,
                (0.0, 1_000_000.0, 1000.0),
                "fetching the write context of another zone than the one held (writes taking turns over zones)",
                integer!(zone_switch_ns),
            )
        },
    ]
}

/// Zone management: open, close, finish and reset, with the erases and
/// block closes of a reset.
fn zone_management_parameters() -> Vec<Parameter> {
    use Direction::Up;
    vec![
        param(
            "open_ns",
            &["zone_mgmt/open/empty:mean_us", "zone_mgmt/open/empty:p50_us"],
            Up,
            (0.0, 10_000_000.0, 1000.0),
            "explicit Open Zone",
            integer!(open_ns),
        ),
        param(
            "close_ns",
            &["zone_mgmt/close/after_open:mean_us", "zone_mgmt/close/after_open:p50_us"],
            Up,
            (0.0, 10_000_000.0, 1000.0),
            "Close Zone",
            integer!(close_ns),
        ),
        param(
            "close_buffered_ns",
            &["zone_mgmt/close/after_write:mean_us", "zone_mgmt/close/after_write:p50_us"],
            Up,
            (0.0, 10_000_000.0, 1000.0),
            "Close Zone with data not yet programmed",
            integer!(close_buffered_ns),
        ),
        param(
            "finish_ns",
            &["zone_mgmt/finish/empty:p50_us", "zone_mgmt/finish/empty:mean_us"],
            Up,
            (0.0, 100_000_000.0, 1000.0),
            "Finish Zone processing",
            integer!(finish_ns),
        ),
        param(
            "reset_metadata_us",
            &["zone_mgmt/reset/empty:p50_us", "zone_mgmt/reset_after_finish/empty:p50_us"],
            Up,
            (0.0, 1_000_000.0, 100.0),
            "Reset Zone's metadata update (the reset of an empty zone)",
            integer!(reset_metadata_us),
        ),
        param(
            "erase_us",
            &["zone_mgmt/reset_after_finish/full:p50_us", "zone_mgmt/reset/full:p50_us"],
            Up,
            (1.0, 1_000_000.0, 1000.0),
            "erase time of one erase block",
            integer!(erase_us),
        ),
        param(
            "close_block_us",
            &["zone_mgmt/reset/6.25%:p50_us", "zone_mgmt/reset/12.5%:p50_us"],
            Up,
            (0.0, 1_000_000.0, 100.0),
            "closing a partly programmed erase block before its erase",
            integer!(close_block_us),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_emulator::profile::Profile;

    #[test]
    fn every_parameter_reads_back_what_it_set() {
        let mut t = Profile::by_name("zn540").unwrap().timing.unwrap();
        for p in all() {
            let v = (p.get(&t) * 1.5).max(p.seed).clamp(p.min, p.max);
            p.set(&mut t, v);
            let back = p.get(&t);
            assert!((back - v).abs() <= 0.01 * v.max(1.0), "{}: set {v}, got {back}", p.name);
        }
        // Out of range values are clamped.
        let prog = all().into_iter().find(|p| p.name == "program_us").unwrap();
        prog.set(&mut t, -5.0);
        assert_eq!(t.program_us, 10);
    }

    #[test]
    fn the_zone_switch_is_fitted_only_where_two_zones_stay_below_the_ceiling() {
        let switch = all().into_iter().find(|p| p.name == "zone_switch_ns").unwrap();
        let figures = |two: f64| {
            [
                ("inter_zone/write/4KiB/zones=2:kiops".to_string(), two),
                ("inter_zone/write/4KiB:max_kiops".to_string(), 186.0),
            ]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert!(switch.identified_by(&figures(143.5)));
        assert!(!switch.identified_by(&figures(175.0)));
        // Without the ceiling there is nothing to compare with.
        let mut lone = figures(143.5);
        lone.remove("inter_zone/write/4KiB:max_kiops");
        assert!(!switch.identified_by(&lone));
        // Parameters without a condition are identified by their figure.
        assert!(all()[0].identified_by(&lone));
    }

    #[test]
    fn read_levels_keep_their_proportions() {
        let mut t = Profile::by_name("zn540").unwrap().timing.unwrap();
        let before = t.read_us.clone();
        let doubled = read_mean(&t) * 2.0;
        set_read_mean(&mut t, doubled);
        for (a, b) in before.iter().zip(&t.read_us) {
            assert!((b / a - 2.0).abs() < 0.01);
        }
    }

    #[test]
    fn names_are_timing_fields_and_figures_are_unique_per_parameter() {
        let text = toml::to_string(&Profile::by_name("zn540").unwrap().timing.unwrap()).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for p in all() {
            assert!(text.contains(&format!("{} =", p.name)), "{}", p.name);
            assert!(seen.insert(p.figures[0]), "{} shares its figure", p.name);
        }
    }
}
