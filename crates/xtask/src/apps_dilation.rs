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

/// The comparison of `runs` (factor, report, table): per ratio each
/// factor's value, the largest relative difference from the first
/// factor's, and whether every factor is within [`TOLERANCE`].
pub fn compare(runs: &[(f64, Value, String)]) -> Value {
    let all: Vec<(f64, BTreeMap<String, f64>)> =
        runs.iter().map(|(f, r, _)| (*f, ratios(r))).collect();
    let Some((_, first)) = all.first() else { return json!({"ratios": [], "all_agree": false}) };
    let mut rows = Vec::new();
    let mut all_agree = !first.is_empty();
    for (k, r0) in first {
        let values: Vec<Option<f64>> = all.iter().map(|(_, m)| m.get(k).copied()).collect();
        let diff = values
            .iter()
            .skip(1)
            .map(|v| v.map(|v| (v / r0 - 1.0).abs()))
            .try_fold(0.0f64, |acc, d| d.map(|d| acc.max(d)));
        let agree = diff.is_some_and(|d| d <= TOLERANCE);
        all_agree &= agree;
        rows.push(json!({
            "ratio": k,
            "values": values,
            "max_difference": diff,
            "agree_within_10_pct": agree,
        }));
    }
    json!({
        "factors": all.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
        "guest_slowdown_vs_host": runs.iter().map(|(_, r, _)| r["clock"]["guest_slowdown_vs_host"].clone()).collect::<Vec<_>>(),
        "guest_kernel_slowdown_vs_host": runs.iter().map(|(_, r, _)| r["clock"]["guest_kernel_slowdown_vs_host"].clone()).collect::<Vec<_>>(),
        "late_completions": runs.iter().map(|(_, r, _)| r["late_completions"].clone()).collect::<Vec<_>>(),
        "guest_clock_dilated": runs.iter().any(|(_, r, _)| r["clock"]["guest_clock_dilated"] == true),
        "device_waf": runs.iter().map(|(_, r, _)| json!(device_wafs(r))).collect::<Vec<_>>(),
        "tolerance": TOLERANCE,
        "ratios": rows,
        "all_agree": all_agree,
    })
}

/// The comparison as markdown: one row per ratio, a column per factor.
pub fn markdown(c: &Value) -> String {
    let factors: Vec<f64> = c["factors"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let mut s = String::new();
    // On a dilated guest clock the probes timed themselves in the guest's
    // time, F times shorter than the real time they took.
    let guest_clock = c["guest_clock_dilated"] == true;
    let slow = |key: &str| -> String {
        c[key]
            .as_array()
            .map(|a| {
                let x: Vec<String> = a
                    .iter()
                    .zip(&factors)
                    .map(|(v, f)| {
                        let real = if guest_clock { *f } else { 1.0 };
                        v.as_f64().map_or("?".into(), |x| format!("{:.1}", x * real))
                    })
                    .collect();
                x.join(" and ")
            })
            .unwrap_or_default()
    };
    let _ = writeln!(
        s,
        "Dilation factors {}{}; the guest's CPU-bound probe took {} times the host's time in \
         those runs, its kernel probe (system calls moving 4 KiB) {} times{}.\n",
        factors.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" and "),
        if guest_clock { ", the guest's clock dilated with the devices'" } else { "" },
        slow("guest_slowdown_vs_host"),
        slow("guest_kernel_slowdown_vs_host"),
        if guest_clock { " (in real time: F times what its own clock showed)" } else { "" }
    );
    s.push_str("| ratio |");
    for f in &factors {
        let _ = write!(s, " F = {f} |");
    }
    s.push_str(" difference | within 10 % |\n|---|");
    for _ in &factors {
        s.push_str("---:|");
    }
    s.push_str("---:|---|\n");
    for row in c["ratios"].as_array().into_iter().flatten() {
        let _ = write!(s, "| {} |", row["ratio"].as_str().unwrap_or(""));
        for v in row["values"].as_array().into_iter().flatten() {
            let _ = write!(s, " {} |", v.as_f64().map_or("–".into(), |x| format!("{x:.3}")));
        }
        let _ = writeln!(
            s,
            " {} | {} |",
            row["max_difference"].as_f64().map_or("–".into(), |d| format!("{:.1} %", d * 100.0)),
            if row["agree_within_10_pct"].as_bool() == Some(true) { "yes" } else { "no" }
        );
    }
    let _ = writeln!(
        s,
        "\nAll ratios within 10 %: {}.",
        if c["all_agree"].as_bool() == Some(true) { "yes" } else { "no" }
    );
    for (f, w) in factors.iter().zip(c["device_waf"].as_array().into_iter().flatten()) {
        let Some(w) = w.as_object().filter(|w| !w.is_empty()) else { continue };
        let each: Vec<String> = w
            .iter()
            .map(|(side, v)| {
                format!("{side} {}", v.as_f64().map_or("–".into(), |x| format!("{x:.3}")))
            })
            .collect();
        let _ = writeln!(s, "\nF = {f}: device WAF over the whole run: {}.", each.join(", "));
    }
    let late = c["late_completions"].as_array().cloned().unwrap_or_default();
    for (f, l) in factors.iter().zip(&late) {
        for line in l.as_array().into_iter().flatten().filter_map(Value::as_str) {
            let _ = writeln!(s, "\nF = {f}: {line}");
        }
    }
    s
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
        let c = compare(&[(128.0, r, String::new()), (256.0, r2, String::new())]);
        assert_eq!(c["device_waf"][1]["tenants static"], 1.004);
        let t = markdown(&c);
        assert!(
            t.contains("\nF = 256: device WAF over the whole run: tenants static 1.004.\n"),
            "{t}"
        );
        assert!(!t.contains("F = 128: device WAF"), "{t}");
    }
}
