//! The device's part and the host's part of each time per operation,
//! told apart by the two dilation factors of `cargo xtask apps
//! --dilations`.
//!
//! A dilated clock keeps a figure bound by the device the same at every
//! factor. What the host spends on each operation in real time (the
//! guest's CPU under software emulation, the threads of QEMU and of `zns
//! serve` waiting for one of the host's cores) is not dilated. With the
//! guest's clock dilated too (`--guest-clock`) the guest sees that real
//! time F times shorter, so a time per operation is `t(F) = d + h / F`;
//! with the device's clock alone the guest sees the device F times
//! slower, `t(F) = F d + h`. Two factors solve for `d`, the device's part
//! (in the undilated model's time), and `h`, the host's real time per
//! operation, and so say how much of each factor's figure was the host's.
//! Where that share is large, or differs between the two modes compared,
//! their ratio moves with the factor (and with the host's speed and load)
//! whatever the device does; the ratio of the `d`s is the one a run
//! without any host cost would show.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

/// A figure's identity: phase and side (a stack, or a tenants' mode).
type Figure = (String, String);

/// Each figure's times at the two factors, their split and its rate.
type Solved = BTreeMap<Figure, (f64, f64, Split, &'static str)>;

/// The mean time per operation of each figure of one report, in µs of
/// the guest's clock, with the rate it is the inverse of: db_bench's
/// operations (over a tenants' mode, the mean of its tenants' times) and
/// sysbench's transactions.
pub fn times(r: &Value) -> BTreeMap<Figure, (f64, &'static str)> {
    let mut out = BTreeMap::new();
    let us = |rate: Option<f64>| rate.filter(|&x| x > 0.0).map(|x| 1e6 / x);
    if let Some(modes) = r["tenants"]["modes"].as_object() {
        for (m, v) in modes {
            for (p, ts) in v["phases"].as_object().into_iter().flatten() {
                let each = ts.as_object().and_then(|t| {
                    t.values().map(|x| us(x["ops_per_sec"].as_f64())).collect::<Option<Vec<_>>>()
                });
                if let Some(e) = each.filter(|e| !e.is_empty()) {
                    let mean = e.iter().sum::<f64>() / e.len() as f64;
                    out.insert((p.clone(), m.clone()), (mean, "ops/s"));
                }
            }
        }
        return out;
    }
    for (n, side) in r["sides"].as_object().into_iter().flatten() {
        for (p, f) in side["phases"].as_object().into_iter().flatten() {
            if let Some(t) = us(f["ops_per_sec"].as_f64()) {
                out.insert((p.clone(), n.clone()), (t, "ops/s"));
            }
        }
        for (p, f) in side["mysql"]["phases"].as_object().into_iter().flatten() {
            if let Some(t) = us(f["tps"].as_f64()) {
                out.insert((p.clone(), n.clone()), (t, "transactions/s"));
            }
        }
    }
    out
}

/// One time per operation split over two factors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The device's part: µs of the undilated model's time.
    pub device_us: f64,
    /// The host's real time per operation, µs.
    pub host_us: f64,
}

impl Split {
    /// Solves the times `t1` at factor `f1` and `t2` at `f2` (µs of the
    /// guest's clock); `None` unless the factors are positive and differ.
    pub fn solve(f1: f64, t1: f64, f2: f64, t2: f64, guest_clock: bool) -> Option<Split> {
        if f1 <= 0.0 || f2 <= 0.0 || f1 == f2 {
            return None;
        }
        Some(if guest_clock {
            let host_us = (t1 - t2) / (1.0 / f1 - 1.0 / f2);
            Split { device_us: t2 - host_us / f2, host_us }
        } else {
            let device_us = (t2 - t1) / (f2 - f1);
            Split { device_us, host_us: t1 - f1 * device_us }
        })
    }

    /// The host's part of the time the guest sees at factor `f`.
    pub fn host_at(&self, f: f64, guest_clock: bool) -> f64 {
        if guest_clock {
            self.host_us / f
        } else {
            self.host_us
        }
    }

    /// The device's part of the time the guest sees at factor `f`.
    pub fn device_at(&self, f: f64, guest_clock: bool) -> f64 {
        if guest_clock {
            self.device_us
        } else {
            f * self.device_us
        }
    }
}

/// Each figure's mean time per operation at the smallest and the largest
/// factor of `runs` (factor, report, table), its split and the host's
/// share at each, and the ratios the comparison makes (eZNS over static,
/// f2fs-zns over each conventional stack) at each factor and from the
/// device's parts alone. `Null` with fewer than two factors.
pub fn split(runs: &[(f64, Value, String)], guest_clock: bool) -> Value {
    let factors: Vec<f64> = runs.iter().map(|(f, _, _)| *f).collect();
    let (lo, hi) = crate::apps_dilation::range(&factors);
    if runs.is_empty() || lo == hi {
        return Value::Null;
    }
    let all: Vec<_> = runs.iter().map(|(f, r, _)| (*f, times(r))).collect();
    // A figure's mean over the runs at factor `f`, if every one has it.
    let mean = |fig: &Figure, f: f64| -> Option<(f64, &'static str)> {
        let v: Vec<(f64, &'static str)> = all
            .iter()
            .filter(|(g, _)| *g == f)
            .map(|(_, t)| t.get(fig).copied())
            .collect::<Option<_>>()?;
        let n = v.len() as f64;
        Some((v.iter().map(|(t, _)| t).sum::<f64>() / n, v.first()?.1))
    };
    let mut figures: Vec<&Figure> = all.iter().flat_map(|(_, t)| t.keys()).collect();
    figures.sort();
    figures.dedup();
    let mut solved = Solved::new();
    let mut rows = Vec::new();
    for fig in figures {
        let (Some((t1, rate)), Some((t2, _))) = (mean(fig, lo), mean(fig, hi)) else { continue };
        let Some(s) = Split::solve(lo, t1, hi, t2, guest_clock) else { continue };
        solved.insert(fig.clone(), (t1, t2, s, rate));
        rows.push(json!({
            "phase": fig.0,
            "side": fig.1,
            "us_per_op": [t1, t2],
            "device_us": s.device_us,
            "host_us": s.host_us,
            "host_share": [s.host_at(lo, guest_clock) / t1, s.host_at(hi, guest_clock) / t2],
        }));
    }
    json!({
        "model": if guest_clock { "t = d + h / F" } else { "t = F d + h" },
        "factors": [lo, hi],
        "times": rows,
        "ratios": device_ratios(&solved, guest_clock),
    })
}

/// The comparison's ratios from the times per operation (the inverse of
/// the times' ratio) at each factor, and from the device's parts alone
/// (`None` where a device's part is not positive: the host's part there
/// is within the runs' noise, or the time grew against the model).
fn device_ratios(solved: &Solved, guest_clock: bool) -> Vec<Value> {
    let mut out = Vec::new();
    // (numerator side, denominator side) pairs the comparison makes.
    let sides: Vec<&String> = solved.keys().map(|(_, s)| s).collect();
    let pairs: Vec<(&str, String)> = if sides.iter().any(|s| *s == "elastic") {
        vec![("elastic", "static".to_string())]
    } else {
        let mut others: Vec<String> =
            sides.iter().filter(|s| s.as_str() != "f2fs-zns").map(|s| s.to_string()).collect();
        others.sort();
        others.dedup();
        others.into_iter().map(|o| ("f2fs-zns", o)).collect()
    };
    for ((phase, side), (t1, t2, s, rate)) in solved {
        for (num, den) in pairs.iter().filter(|(n, _)| n == side) {
            let Some((u1, u2, o, _)) = solved.get(&(phase.clone(), den.clone())) else { continue };
            let d = |x: &Split| x.device_at(1.0, guest_clock);
            let only = (d(s) > 0.0 && d(o) > 0.0).then(|| d(o) / d(s));
            out.push(json!({
                "ratio": format!("{phase} {rate}: {num} / {den}"),
                "at_factors": [u1 / t1, u2 / t2],
                "device_only": only,
            }));
        }
    }
    out
}

/// The split as markdown: what the model is, a table of the times and
/// their host's shares, and one of the ratios with the device's parts
/// alone. Empty for `Null` (one factor).
pub fn markdown(split: &Value) -> String {
    let Some(rows) = split["times"].as_array().filter(|r| !r.is_empty()) else {
        return String::new();
    };
    let f = crate::apps_dilation::floats(&split["factors"]);
    let &[lo, hi] = f.as_slice() else { return String::new() };
    let guest_clock = split["model"] == "t = d + h / F";
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nTime per operation (µs of the guest's clock; a tenants' mode: the mean of its \
         tenants') at F = {lo} and {hi}, split as {}: d the device's part, h the host's real \
         time per operation (the guest's CPU under emulation, threads waiting for a core){}. \
         A ratio holds across factors only where the host's share is small, or the same on \
         both sides.\n",
        split["model"].as_str().unwrap_or("?"),
        if guest_clock {
            ", which the guest's clock, running F times slow, shows F times shorter"
        } else {
            ", the same at every factor while the device's part grows F times"
        }
    );
    let _ = writeln!(
        s,
        "| phase | side | F = {lo} | F = {hi} | host's share at {lo} | at {hi} | d (µs) | h (ms) \
         |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    let num =
        |v: &Value, k: f64, p: usize| v.as_f64().map_or("–".into(), |x| format!("{:.p$}", x * k));
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} % | {} % | {} | {} |",
            r["phase"].as_str().unwrap_or(""),
            r["side"].as_str().unwrap_or(""),
            num(&r["us_per_op"][0], 1.0, 1),
            num(&r["us_per_op"][1], 1.0, 1),
            num(&r["host_share"][0], 100.0, 0),
            num(&r["host_share"][1], 100.0, 0),
            num(&r["device_us"], 1.0, 1),
            num(&r["host_us"], 1e-3, 2),
        );
    }
    let ratios = split["ratios"].as_array().cloned().unwrap_or_default();
    if !ratios.is_empty() {
        let _ = writeln!(
            s,
            "\n| ratio, from the times per operation | F = {lo} | F = {hi} | from d alone \
             |\n|---|---:|---:|---:|"
        );
        for r in ratios {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                r["ratio"].as_str().unwrap_or(""),
                num(&r["at_factors"][0], 1.0, 3),
                num(&r["at_factors"][1], 1.0, 3),
                num(&r["device_only"], 1.0, 3),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenants' report whose two tenants each take `t` µs an operation
    /// in every phase of each mode.
    fn tenants(elastic: f64, stat: f64) -> Value {
        let ph = |t: f64| json!({"a": {"ops_per_sec": 1e6 / t}, "b": {"ops_per_sec": 1e6 / t}});
        json!({"tenants": {"modes": {
            "elastic": {"phases": {"fill": ph(elastic)}},
            "static": {"phases": {"fill": ph(stat)}},
        }}})
    }

    #[test]
    fn two_factors_split_a_time_into_the_devices_part_and_the_hosts() {
        // On a dilated guest clock: elastic d = 50 µs, h = 6.4 ms; static
        // d = 55 µs, h = 3.2 ms.
        let t = |d: f64, h: f64, f: f64| d + h / f;
        let runs = vec![
            (256.0, tenants(t(50.0, 6400.0, 256.0), t(55.0, 3200.0, 256.0)), String::new()),
            (512.0, tenants(t(50.0, 6400.0, 512.0), t(55.0, 3200.0, 512.0)), String::new()),
        ];
        let s = split(&runs, true);
        assert_eq!(s["model"], "t = d + h / F");
        let e = &s["times"][0];
        assert_eq!((e["phase"].as_str(), e["side"].as_str()), (Some("fill"), Some("elastic")));
        let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-6;
        assert!(close(&e["device_us"], 50.0) && close(&e["host_us"], 6400.0), "{e}");
        // 25 of 75 µs at 256, 12.5 of 62.5 at 512.
        assert!(close(&e["host_share"][0], 1.0 / 3.0) && close(&e["host_share"][1], 0.2), "{e}");
        let r = &s["ratios"][0];
        assert_eq!(r["ratio"], "fill ops/s: elastic / static");
        // The ratio moves from 67.5/75 to 61.25/62.5; the devices' is 1.1.
        assert!(close(&r["at_factors"][0], 67.5 / 75.0), "{r}");
        assert!(close(&r["at_factors"][1], 61.25 / 62.5), "{r}");
        assert!(close(&r["device_only"], 1.1), "{r}");
        let m = markdown(&s);
        assert!(m.contains("split as t = d + h / F"), "{m}");
        assert!(m.contains("| fill | elastic | 75.0 | 62.5 | 33 % | 20 % | 50.0 | 6.40 |"), "{m}");
        assert!(m.contains("| fill ops/s: elastic / static | 0.900 | 0.980 | 1.100 |"), "{m}");
        // One factor: nothing to split.
        assert!(split(&runs[..1], true).is_null());
        assert!(markdown(&Value::Null).is_empty());
    }

    #[test]
    fn on_the_devices_clock_alone_the_device_grows_with_the_factor() {
        // t = F d + h: zns d = 2 µs, h = 100; ext4 d = 3 µs, h = 40.
        let rep = |f: f64| {
            json!({"sides": {
                "f2fs-zns": {"phases": {"overwrite": {"ops_per_sec": 1e6 / (f * 2.0 + 100.0)}},
                             "mysql": {"phases": {"oltp_read_only": {"tps": 1e6 / (f * 2.0 + 100.0)}}}},
                "ext4-conv": {"phases": {"overwrite": {"ops_per_sec": 1e6 / (f * 3.0 + 40.0)}}},
            }})
        };
        let runs = vec![(8.0, rep(8.0), String::new()), (4.0, rep(4.0), String::new())];
        let s = split(&runs, false);
        assert_eq!(s["factors"], json!([4.0, 8.0]));
        let zns = s["times"].as_array().unwrap().iter().find(|r| r["side"] == "f2fs-zns").unwrap();
        let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-6;
        assert!(close(&zns["device_us"], 2.0) && close(&zns["host_us"], 100.0), "{zns}");
        let r = s["ratios"].as_array().unwrap();
        // sysbench has no conventional side here: one ratio.
        assert_eq!(r.len(), 1, "{s}");
        assert_eq!(r[0]["ratio"], "overwrite ops/s: f2fs-zns / ext4-conv");
        assert!(close(&r[0]["device_only"], 1.5), "{s}");
        assert!(markdown(&s).contains("while the device's part grows F times"));
    }

    #[test]
    fn a_time_that_grows_against_the_model_has_no_devices_ratio() {
        // Elastic slower at the larger factor on a dilated guest clock: its
        // host's part comes out negative and its device's part above both.
        let runs = vec![
            (256.0, tenants(60.0, 70.0), String::new()),
            (512.0, tenants(80.0, 60.0), String::new()),
        ];
        let s = split(&runs, true);
        let e = &s["times"][0];
        assert!(e["host_us"].as_f64().unwrap() < 0.0, "{e}");
        assert!((e["device_us"].as_f64().unwrap() - 100.0).abs() < 1e-6, "{e}");
        // Static: d = 50, h = 5120: both positive, so a ratio exists.
        assert!(s["ratios"][0]["device_only"].is_number(), "{s}");
        // A device's part below zero: no ratio.
        let runs = vec![
            (256.0, tenants(100.0, 70.0), String::new()),
            (512.0, tenants(40.0, 60.0), String::new()),
        ];
        let s = split(&runs, true);
        assert!(s["ratios"][0]["device_only"].is_null(), "{s}");
        assert!(markdown(&s).contains("| fill ops/s: elastic / static | 0.700 | 1.500 | – |"));
    }
}
