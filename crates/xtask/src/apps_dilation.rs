//! `cargo xtask apps --dilations F1,F2`: the same comparison run at two
//! (or more) dilation factors of the device clock, and per phase each
//! factor's ZNS/conventional ratio (the tenants' run: eZNS/static) set
//! against the first factor's.
//!
//! A dilated clock stretches every modelled duration F times, so a guest F
//! times slower than the machine the model stands for sees the device as
//! that machine would. If the figures depend on the device's behaviour and
//! not on how slow the guest is, the ratios at two factors agree: the
//! check is that they agree within 10 %.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

/// How far two factors' ratios may be apart and still agree.
pub const TOLERANCE: f64 = 0.10;

/// The ratios of one run's report, by `phase: A / B`: db_bench's
/// operations/s and sysbench's transactions/s of f2fs-zns over each
/// conventional side; in a tenants' report, each phase's operations/s of
/// all its tenants together, eZNS over static, and tenant `a`'s read p99
/// in the isolation phases.
pub fn ratios(r: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut put = |k: String, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b) {
            if b > 0.0 {
                out.insert(k, a / b);
            }
        }
    };
    if let Some(t) = r.get("tenants").filter(|t| t.is_object()) {
        let modes = &t["modes"];
        let phases: Vec<String> = modes["elastic"]["phases"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for p in phases {
            let sum = |m: &str| -> Option<f64> {
                let ts = modes[m]["phases"][p.as_str()].as_object()?;
                ts.values().map(|v| v["ops_per_sec"].as_f64()).sum()
            };
            put(format!("{p} ops/s: elastic / static"), sum("elastic"), sum("static"));
        }
        for p in ["read-alone", "read-beside-writers"] {
            let p99 = |m: &str| modes[m]["phases"][p]["a"]["p99_us"].as_f64();
            put(format!("{p} a's read p99: elastic / static"), p99("elastic"), p99("static"));
        }
        return out;
    }
    let Some(sides) = r["sides"].as_object() else { return out };
    let zns = &r["sides"]["f2fs-zns"];
    for (name, side) in sides.iter().filter(|(n, _)| n.as_str() != "f2fs-zns") {
        if let Some(phases) = zns["phases"].as_object() {
            for (p, f) in phases {
                put(
                    format!("{p} ops/s: f2fs-zns / {name}"),
                    f["ops_per_sec"].as_f64(),
                    side["phases"][p]["ops_per_sec"].as_f64(),
                );
            }
        }
        if let Some(phases) = zns["mysql"]["phases"].as_object() {
            for (p, f) in phases {
                put(
                    format!("{p} transactions/s: f2fs-zns / {name}"),
                    f["tps"].as_f64(),
                    side["mysql"]["phases"][p]["tps"].as_f64(),
                );
            }
        }
    }
    out
}

/// The device's write amplification over a run's whole life, by side (a
/// stack, from its filesystem's creation to the end; a tenants' mode,
/// from the filesystems' creation to the last unmount): media bytes over
/// the host's, both from the device's own logs.
pub fn device_wafs(r: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if let Some(modes) = r["tenants"]["modes"].as_object() {
        for (m, v) in modes {
            if let Some(w) = v["device"]["whole_run"]["device_waf"].as_f64() {
                out.insert(format!("tenants {m}"), w);
            }
        }
    }
    if let Some(sides) = r["sides"].as_object() {
        for (n, v) in sides {
            if let Some(w) = v["device_waf_mkfs_to_end"].as_f64() {
                out.insert(n.clone(), w);
            }
        }
    }
    out
}

/// The share of the guest kernel's reads the drive served from its write
/// buffer (data not yet programmed: no die read), by read phase and mode
/// of a tenants' report (`"read-alone elastic"`); empty for other reports.
pub fn buffer_read_shares(r: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if let Some(modes) = r["tenants"]["modes"].as_object() {
        // The read phases, where the share decides much of the readers'
        // figures.
        for p in crate::apps_tenants::PHASES.iter().filter(|p| p.starts_with("read")) {
            for (m, v) in modes {
                let share = &v["device"]["phases"][p]["read_share_from_drive_buffer"];
                if let Some(x) = share.as_f64() {
                    out.insert(format!("{p} {m}"), x);
                }
            }
        }
    }
    out
}

/// The runs' factors in the order they first appear, each with the
/// indexes of its runs.
fn groups(runs: &[(f64, Value, String)]) -> Vec<(f64, Vec<usize>)> {
    let mut out: Vec<(f64, Vec<usize>)> = Vec::new();
    for (i, (f, _, _)) in runs.iter().enumerate() {
        match out.iter_mut().find(|(g, _)| g == f) {
            Some((_, idx)) => idx.push(i),
            None => out.push((*f, vec![i])),
        }
    }
    out
}

/// One ratio at one factor over its runs: the mean, and the spread of
/// its runs (the largest minus the smallest, over the mean; 0 for one
/// run). `None` when a run lacks the ratio.
fn at_factor(all: &[BTreeMap<String, f64>], idx: &[usize], k: &str) -> Option<(f64, f64)> {
    let v: Vec<f64> = idx.iter().map(|&i| all[i].get(k).copied()).collect::<Option<_>>()?;
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let (lo, hi) = range(&v);
    Some((mean, if mean > 0.0 { (hi - lo) / mean } else { 0.0 }))
}

/// The comparison of `runs` (factor, report, table), several runs of a
/// factor allowed (`--repeat`): per ratio each factor's mean over its
/// runs and each run's value, the largest relative difference of a
/// factor's mean from the first factor's, the largest run-to-run spread
/// at one factor, and whether every factor's mean is within
/// [`TOLERANCE`] of the first's.
pub fn compare(runs: &[(f64, Value, String)]) -> Value {
    let all: Vec<BTreeMap<String, f64>> = runs.iter().map(|(_, r, _)| ratios(r)).collect();
    let groups = groups(runs);
    let Some((_, first_idx)) = groups.first() else {
        return json!({"ratios": [], "all_agree": false});
    };
    let mut keys: Vec<&String> = first_idx.iter().flat_map(|&i| all[i].keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows = Vec::new();
    // One factor has nothing to agree with: its runs' spread only.
    let compared = groups.len() > 1;
    let mut all_agree = !keys.is_empty();
    for k in keys {
        let per: Vec<Option<(f64, f64)>> =
            groups.iter().map(|(_, idx)| at_factor(&all, idx, k)).collect();
        let diff = match per[0] {
            Some((m0, _)) if m0 > 0.0 => per
                .iter()
                .skip(1)
                .map(|p| p.map(|(m, _)| (m / m0 - 1.0).abs()))
                .try_fold(0.0f64, |acc, d| d.map(|d| acc.max(d))),
            _ => None,
        };
        let spread = per.iter().flatten().map(|&(_, s)| s).fold(0.0f64, f64::max);
        let agree = diff.is_some_and(|d| d <= TOLERANCE);
        all_agree &= agree;
        rows.push(json!({
            "ratio": k,
            "values": per.iter().map(|p| p.map(|(m, _)| m)).collect::<Vec<_>>(),
            "runs": groups.iter().map(|(_, idx)| idx.iter().map(|&i| all[i].get(k).copied()).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "max_difference": if compared { json!(diff) } else { Value::Null },
            "run_spread": spread,
            "agree_within_10_pct": if compared { json!(agree) } else { Value::Null },
        }));
    }
    let per_run =
        |f: &dyn Fn(&Value) -> Value| runs.iter().map(|(_, r, _)| f(r)).collect::<Vec<_>>();
    let guest_clock = runs.iter().any(|(_, r, _)| r["clock"]["guest_clock_dilated"] == true);
    json!({
        "factors": groups.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
        "runs_per_factor": groups.iter().map(|(_, idx)| idx.len()).collect::<Vec<_>>(),
        "run_factors": runs.iter().map(|(f, _, _)| *f).collect::<Vec<_>>(),
        "guest_slowdown_vs_host": per_run(&|r| r["clock"]["guest_slowdown_vs_host"].clone()),
        "guest_kernel_slowdown_vs_host": per_run(&|r| r["clock"]["guest_kernel_slowdown_vs_host"].clone()),
        "late_completions": per_run(&|r| r["late_completions"].clone()),
        "guest_clock_dilated": guest_clock,
        "device_waf": per_run(&|r| json!(device_wafs(r))),
        "reads_from_drive_buffer": per_run(&|r| json!(buffer_read_shares(r))),
        "tolerance": TOLERANCE,
        "ratios": rows,
        "all_agree": if compared { json!(all_agree) } else { Value::Null },
        "time_split": crate::apps_host_term::split(runs, guest_clock),
    })
}

/// The comparison as markdown: one row per ratio, a column per factor
/// (with several runs of a factor: its mean, the runs' range, and a
/// column for the largest run-to-run spread).
pub fn markdown(c: &Value) -> String {
    let factors: Vec<f64> = floats(&c["factors"]);
    // Reports from before --repeat have one run per factor.
    let run_factors = match floats(&c["run_factors"]) {
        r if r.is_empty() => factors.clone(),
        r => r,
    };
    let repeated = run_factors.len() > factors.len();
    let mut s = String::new();
    // On a dilated guest clock the probes timed themselves in the guest's
    // time, F times shorter than the real time they took.
    let guest_clock = c["guest_clock_dilated"] == true;
    let slow = |key: &str| -> String {
        let x: Vec<String> = c[key]
            .as_array()
            .into_iter()
            .flatten()
            .zip(&run_factors)
            .map(|(v, f)| {
                let real = if guest_clock { *f } else { 1.0 };
                v.as_f64().map_or("?".into(), |x| format!("{:.1}", x * real))
            })
            .collect();
        x.join(" and ")
    };
    let counts: Vec<String> = c["runs_per_factor"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|n| n.to_string())
        .collect();
    let _ = writeln!(
        s,
        "Dilation factors {}{}{}; the guest's CPU-bound probe took {} times the host's time in \
         those runs, its kernel probe (system calls moving 4 KiB) {} times{}.\n",
        factors.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" and "),
        if repeated { format!(", {} runs each", counts.join(" and ")) } else { String::new() },
        if guest_clock { ", the guest's clock dilated with the devices'" } else { "" },
        slow("guest_slowdown_vs_host"),
        slow("guest_kernel_slowdown_vs_host"),
        if guest_clock { " (in real time: F times what its own clock showed)" } else { "" }
    );
    table(&mut s, c, &factors, repeated);
    match c["all_agree"].as_bool() {
        Some(all) => {
            let _ = writeln!(
                s,
                "\nAll ratios within 10 %{}: {}.",
                if repeated { " (the factors' means)" } else { "" },
                if all { "yes" } else { "no" }
            );
        }
        None => s.push_str("\nOne factor: its runs' spread, nothing to compare.\n"),
    }
    s.push_str(&crate::apps_host_term::markdown(&c["time_split"]));
    let label = |i: usize, f: f64| -> String {
        let k = run_factors[..i].iter().filter(|&&g| g == f).count() + 1;
        if repeated {
            format!("F = {f}, run {k}")
        } else {
            format!("F = {f}")
        }
    };
    // One line a run for each per-run map of figures (reports from before
    // a figure existed have none).
    let mut per_run = |key: &str, what: &str, fmt: &dyn Fn(&Value) -> String| {
        let runs = c[key].as_array().into_iter().flatten().enumerate().take(run_factors.len());
        for (i, v) in runs {
            let Some(v) = v.as_object().filter(|v| !v.is_empty()) else { continue };
            let each: Vec<String> = v.iter().map(|(k, x)| format!("{k} {}", fmt(x))).collect();
            let _ = writeln!(s, "\n{}: {what}: {}.", label(i, run_factors[i]), each.join(", "));
        }
    };
    per_run("device_waf", "device WAF over the whole run", &|v| {
        v.as_f64().map_or("–".into(), |x| format!("{x:.3}"))
    });
    per_run(
        "reads_from_drive_buffer",
        "the guest's reads the drive served from its write buffer",
        &crate::apps_tenants::pct_of,
    );
    let late = c["late_completions"].as_array().cloned().unwrap_or_default();
    for (i, l) in late.iter().enumerate().take(run_factors.len()) {
        for line in l.as_array().into_iter().flatten().filter_map(Value::as_str) {
            let _ = writeln!(s, "\n{}: {line}", label(i, run_factors[i]));
        }
    }
    s
}

/// The smallest and the largest of `v`.
pub(crate) fn range(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)))
}

/// The numbers of a JSON array.
pub(crate) fn floats(v: &Value) -> Vec<f64> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default()
}

/// The table's header and one row per ratio.
fn table(s: &mut String, c: &Value, factors: &[f64], repeated: bool) {
    s.push_str("| ratio |");
    for f in factors {
        let _ = write!(s, " F = {f} |");
    }
    s.push_str(if repeated {
        " difference of means | run-to-run spread | within 10 % |\n|---|"
    } else {
        " difference | within 10 % |\n|---|"
    });
    for _ in factors {
        s.push_str("---:|");
    }
    s.push_str(if repeated { "---:|---:|---|\n" } else { "---:|---|\n" });
    let pct = |v: &Value| v.as_f64().map_or("–".into(), |d| format!("{:.1} %", d * 100.0));
    for row in c["ratios"].as_array().into_iter().flatten() {
        let _ = write!(s, "| {} |", row["ratio"].as_str().unwrap_or(""));
        let means = row["values"].as_array().cloned().unwrap_or_default();
        let runs = row["runs"].as_array().cloned().unwrap_or_default();
        for (i, v) in means.iter().enumerate() {
            let mean = v.as_f64().map_or("–".into(), |x| format!("{x:.3}"));
            let each = floats(runs.get(i).unwrap_or(&Value::Null));
            if repeated && each.len() > 1 {
                let (lo, hi) = range(&each);
                let _ = write!(s, " {mean} ({lo:.3}–{hi:.3}) |");
            } else {
                let _ = write!(s, " {mean} |");
            }
        }
        let _ = write!(s, " {} |", pct(&row["max_difference"]));
        if repeated {
            let _ = write!(s, " {} |", pct(&row["run_spread"]));
        }
        let verdict = match row["agree_within_10_pct"].as_bool() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "–",
        };
        let _ = writeln!(s, " {verdict} |");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(zns: f64, conv: f64, slow: f64) -> Value {
        json!({"clock": {"guest_slowdown_vs_host": slow, "guest_kernel_slowdown_vs_host": slow * 10.0},
               "late_completions": ["emu:x: late completions: 1 of 2"], "sides": {
            "f2fs-zns": {"phases": {"fillrandom": {"ops_per_sec": zns}},
                         "mysql": {"phases": {"oltp_read_write": {"tps": zns / 100.0}}}},
            "ext4-conv": {"phases": {"fillrandom": {"ops_per_sec": conv}},
                          "mysql": {"phases": {"oltp_read_write": {"tps": conv / 50.0}}}},
        }})
    }

    #[test]
    fn ratios_at_two_factors_agree_within_ten_percent_or_not() {
        let r = ratios(&report(150.0, 100.0, 30.0));
        assert_eq!(r["fillrandom ops/s: f2fs-zns / ext4-conv"], 1.5);
        assert_eq!(r["oltp_read_write transactions/s: f2fs-zns / ext4-conv"], 0.75);
        // fillrandom 1.5 and 1.6: 6.7 % apart; sysbench 0.75 and 1.6: far.
        let mut second = report(160.0, 100.0, 31.0);
        second["sides"]["ext4-conv"]["mysql"]["phases"]["oltp_read_write"]["tps"] = json!(1.0);
        let runs =
            vec![(4.0, report(150.0, 100.0, 30.0), String::new()), (16.0, second, String::new())];
        let c = compare(&runs);
        let rows = c["ratios"].as_array().unwrap();
        assert_eq!(rows[0]["agree_within_10_pct"], true, "{c}");
        assert_eq!(rows[1]["agree_within_10_pct"], false, "{c}");
        assert_eq!(c["all_agree"], false);
        let t = markdown(&c);
        assert!(
            t.contains("| fillrandom ops/s: f2fs-zns / ext4-conv | 1.500 | 1.600 | 6.7 % | yes |"),
            "{t}"
        );
        assert!(t.contains("All ratios within 10 %: no.") && t.contains("30.0 and 31.0"), "{t}");
        assert!(
            t.contains("kernel probe (system calls moving 4 KiB) 300.0 and 310.0 times"),
            "{t}"
        );
        assert!(t.contains("\nF = 16: emu:x: late completions: 1 of 2\n"), "{t}");
        assert!(!t.contains("guest's clock dilated"), "{t}");
        // On a dilated guest clock the probes' own times are F times short.
        let mut dilated = runs.clone();
        for (_, r, _) in &mut dilated {
            r["clock"]["guest_clock_dilated"] = json!(true);
        }
        let t = markdown(&compare(&dilated));
        assert!(t.contains("clock dilated with the devices'; the guest's CPU-bound"), "{t}");
        assert!(t.contains("took 120.0 and 496.0 times") && t.contains("(in real time"), "{t}");
        let same = vec![runs[0].clone(), (16.0, report(150.0, 100.0, 31.0), String::new())];
        assert_eq!(compare(&same)["all_agree"], true);
        // A ratio missing at one factor does not agree.
        let mut gone = report(150.0, 100.0, 1.0);
        gone["sides"]["ext4-conv"]["phases"]["fillrandom"]["ops_per_sec"] = Value::Null;
        assert_eq!(compare(&[runs[0].clone(), (2.0, gone, String::new())])["all_agree"], false);
    }

    #[test]
    fn repeated_runs_compare_the_factors_means_beside_their_spread() {
        let at = |f: f64, zns: f64| (f, report(zns, 100.0, 2.0), String::new());
        // F = 4: 1.00 and 1.20 (mean 1.10, spread 18.2 %); F = 8: 1.15
        // and 1.17 (mean 1.16, 5.5 % from 1.10).
        let runs = vec![at(4.0, 100.0), at(8.0, 115.0), at(4.0, 120.0), at(8.0, 117.0)];
        let c = compare(&runs);
        assert_eq!(c["factors"], json!([4.0, 8.0]));
        assert_eq!(c["runs_per_factor"], json!([2, 2]));
        let row = &c["ratios"][0];
        assert_eq!(row["ratio"], "fillrandom ops/s: f2fs-zns / ext4-conv");
        assert!((row["values"][0].as_f64().unwrap() - 1.1).abs() < 1e-12, "{row}");
        assert!((row["max_difference"].as_f64().unwrap() - 0.06 / 1.1).abs() < 1e-12, "{row}");
        assert!((row["run_spread"].as_f64().unwrap() - 0.2 / 1.1).abs() < 1e-12, "{row}");
        assert_eq!(row["agree_within_10_pct"], true);
        assert_eq!(row["runs"], json!([[1.0, 1.2], [1.15, 1.17]]));
        let t = markdown(&c);
        assert!(t.contains("Dilation factors 4 and 8, 2 and 2 runs each;"), "{t}");
        assert!(t.contains("| difference of means | run-to-run spread | within 10 % |"), "{t}");
        assert!(
            t.contains(
                "| fillrandom ops/s: f2fs-zns / ext4-conv | 1.100 (1.000–1.200) | 1.160 \
                 (1.150–1.170) | 5.5 % | 18.2 % | yes |"
            ),
            "{t}"
        );
        assert!(t.contains("All ratios within 10 % (the factors' means): yes."), "{t}");
        assert!(t.contains("\nF = 8, run 2: emu:x: late completions: 1 of 2\n"), "{t}");
        assert!(t.contains("took 2.0 and 2.0 and 2.0 and 2.0 times"), "{t}");
        // A run without a ratio leaves its factor's mean unknown.
        let mut gone = report(100.0, 100.0, 2.0);
        gone["sides"]["ext4-conv"]["phases"]["fillrandom"]["ops_per_sec"] = Value::Null;
        let c = compare(&[at(4.0, 100.0), at(8.0, 100.0), (8.0, gone, String::new())]);
        assert_eq!(c["ratios"][0]["agree_within_10_pct"], false, "{c}");
        assert_eq!(c["all_agree"], false);
        // One factor run twice: its spread, no verdict.
        let c = compare(&[at(4.0, 100.0), at(4.0, 120.0)]);
        assert_eq!(
            (c["all_agree"].clone(), c["runs_per_factor"].clone()),
            (Value::Null, json!([2]))
        );
        assert!(c["ratios"][0]["agree_within_10_pct"].is_null(), "{c}");
        let t = markdown(&c);
        assert!(t.contains("| 1.100 (1.000–1.200) | – | 18.2 % | – |"), "{t}");
        assert!(t.contains("One factor: its runs' spread, nothing to compare."), "{t}");
    }

    #[test]
    fn a_tenants_report_compares_elastic_with_static() {
        let ph = |ops: f64| json!({"a": {"ops_per_sec": ops, "p99_us": 100.0}, "b": {"ops_per_sec": ops}});
        let r = json!({"tenants": {"modes": {
            "elastic": {"phases": {"fill": ph(30.0), "read-alone": ph(10.0)}},
            "static": {"phases": {"fill": ph(20.0), "read-alone": ph(10.0)}},
        }}});
        let m = ratios(&r);
        assert_eq!(m["fill ops/s: elastic / static"], 1.5);
        assert_eq!(m["read-alone a's read p99: elastic / static"], 1.0);
        assert!(device_wafs(&r).is_empty());
        let mut r2 = r.clone();
        r2["tenants"]["modes"]["static"]["device"] = json!({"whole_run": {"device_waf": 1.004}});
        let c = compare(&[(128.0, r, String::new()), (256.0, r2.clone(), String::new())]);
        assert_eq!(c["device_waf"][1]["tenants static"], 1.004);
        let t = markdown(&c);
        assert!(
            t.contains("\nF = 256: device WAF over the whole run: tenants static 1.004.\n"),
            "{t}"
        );
        assert!(!t.contains("F = 128: device WAF"), "{t}");
        // The same times at both factors: on the device's clock alone all
        // of each is the host's, and no ratio of device parts exists.
        assert_eq!(c["time_split"]["model"], "t = F d + h", "{c}");
        assert!(t.contains("| fill | elastic | 33333.3 | 33333.3 | 100 % | 100 % |"), "{t}");
        assert!(t.contains("| fill ops/s: elastic / static | 1.500 | 1.500 | – |"), "{t}");
        assert!(!t.contains("write buffer"), "{t}");
        // The read phases' share of reads from the drive's buffer, per run.
        let mut r3 = r2.clone();
        let share = |x: f64| json!({"read_share_from_drive_buffer": x});
        r3["tenants"]["modes"]["elastic"]["device"] =
            json!({"phases": {"read-alone": share(0.544), "fill": share(1.0)}});
        r3["tenants"]["modes"]["static"]["device"]["phases"] =
            json!({"read-alone": share(0.228), "read-beside-writers": share(0.2)});
        assert_eq!(buffer_read_shares(&r3).len(), 3);
        let c = compare(&[(256.0, r2, String::new()), (512.0, r3, String::new())]);
        let t = markdown(&c);
        assert!(
            t.contains(
                "\nF = 512: the guest's reads the drive served from its write buffer: \
                 read-alone elastic 54 %, read-alone static 23 %, read-beside-writers static 20 %.\n"
            ),
            "{t}"
        );
    }
}
