//! `cargo xtask engines`: queue-depth-1 latency of 4 KiB random reads,
//! sequential writes and Zone Append on QEMU's zoned namespace, through
//! znskit's backends (`pcie:`, `ng:`, `zbd:`) and fio's `psync`, `libaio`
//! and `io_uring` engines, in one guest run: a JSON table and a CCDF plot.
//!
//! The guest runs `zns-engines` (crates/bench/src/bin/zns-engines.rs),
//! which prints one `ENGINE-RESULT {json}` line per engine and operation;
//! this side collects them, writes `engines.json` and draws `engines.svg`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::args::{self, GuestArgs};
use crate::guest::{self, EnginesPlan};
use crate::vmtest;
use crate::{kernel, Error, Result};

/// Engines in the order of the table and the plot's legend.
pub const ENGINES: &[&str] = &["pcie", "ng", "zbd", "fio-psync", "fio-libaio", "fio-io_uring"];

/// Operations, in order.
pub const OPERATIONS: &[(&str, &str)] = &[
    ("randread", "4 KiB random read"),
    ("write", "4 KiB sequential write"),
    ("append", "4 KiB zone append"),
];

/// Queue-depth-1 latency of znskit's backends and fio's engines in a guest
///
/// Boots the vmtest guest and measures queue-depth-1 latency of 4 KiB random reads,
/// sequential writes and zone appends on QEMU's zoned namespace through znskit's
/// user-space driver (pcie:), io_uring passthrough (ng:) and zoned block device (zbd:)
/// backends and fio's psync, libaio and io_uring engines (fio cannot append: no zone
/// append reaches user space through a block device). Writes engines.json (the table
/// and the CCDF points) and engines.svg (the CCDF plot) into the output directory.
///
/// Software emulation distorts absolute numbers: compare engines within one run only.
#[derive(Debug, Clone, Parser)]
#[command(verbatim_doc_comment, args_override_self = true, mut_arg("kernel", args::cloud_kernel))]
pub struct Args {
    /// Output directory (default: docs/ of the workspace).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Measured operations per engine and operation (0 counts as 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 5000)]
    ops: u64,
    /// Operations before those, not measured.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 50)]
    warmup: u64,
    #[command(flatten)]
    guest: GuestArgs,
}

impl Args {
    /// Measured operations per engine and operation.
    fn ops(&self) -> u64 {
        self.ops.max(1)
    }
}

/// One engine and operation, as `zns-engines` measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `pcie`, `ng`, `zbd`, `fio-psync`, ...
    pub engine: String,
    /// `randread`, `write` or `append`.
    pub op: String,
    /// Measured operations.
    pub ops: u64,
    /// Mean latency, microseconds.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Operations per second over the measured operations' wall-clock time.
    pub iops: f64,
    /// The CCDF: `[latency_us, P(latency > latency_us)]`.
    pub ccdf: Vec<[f64; 2]>,
}

/// What `engines.json` holds.
#[derive(Debug, Serialize)]
struct Report<'a> {
    what: &'static str,
    caveat: &'static str,
    environment: Environment,
    results: &'a [Row],
}

/// Where the figures come from.
#[derive(Debug, Serialize)]
struct Environment {
    qemu: String,
    accelerator: &'static str,
    guest_cpus: u32,
    guest_kernel: String,
    fio: String,
    namespace: String,
    block_size: u32,
    queue_depth: u32,
    ops: u64,
    warmup: u64,
}

const WHAT: &str = "Queue-depth-1 latency of 4 KiB operations on one QEMU zoned namespace, \
                    through znskit's backends and fio's engines, in one guest run \
                    (cargo xtask engines)";

const CAVEAT: &str = "QEMU emulates the controller (and, without KVM, the CPU) in software: \
                      absolute latencies and IOPS say nothing about real devices. Only \
                      relative comparisons between engines of the same run mean anything.";

/// Decodes the guest's result lines.
pub fn parse_rows(lines: &[String]) -> Result<Vec<Row>> {
    lines
        .iter()
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| Error::new(format!("a result line does not parse ({e}): {l}")))
        })
        .collect()
}

/// The rows in table order, or what is missing.
pub fn ordered(rows: &[Row]) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (op, _) in OPERATIONS {
        for e in ENGINES {
            match rows.iter().find(|r| r.engine == *e && r.op == *op) {
                Some(r) => out.push(r.clone()),
                None if *op == "append" && e.starts_with("fio-") => {}
                None => missing.push(format!("{e} {op}")),
            }
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(Error::new(format!("no result for {}", missing.join(", "))))
    }
}

/// The table in Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| operation | engine | mean µs | p50 µs | p95 µs | p99 µs | p99.9 µs | IOPS |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let op = OPERATIONS.iter().find(|(o, _)| *o == r.op).map_or(r.op.as_str(), |(_, n)| n);
        s.push_str(&format!(
            "| {op} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
            r.engine, r.mean_us, r.p50_us, r.p95_us, r.p99_us, r.p99_9_us, r.iops
        ));
    }
    s
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// `10^v` as tick text: 1, 10, 100, 1k, 10k; 0.1, 0.01, ...
fn power_label(v: f64) -> String {
    let x = 10f64.powf(v);
    if x >= 1e3 {
        format!("{}k", (x / 1e3).round())
    } else if x >= 1.0 {
        format!("{}", x.round())
    } else {
        let digits = (-v).ceil().max(0.0) as usize;
        format!("{x:.digits$}")
    }
}

/// Draws the CCDFs, one panel per operation, logarithmic on both axes.
pub fn plot(rows: &[Row], path: &Path) -> Result<()> {
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (1500, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((1, OPERATIONS.len()));
        for (area, (op, title)) in panels.iter().zip(OPERATIONS) {
            let series: Vec<(usize, &Row)> = ENGINES
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    rows.iter().find(|r| r.engine == *e && r.op == *op).map(|r| (i, r))
                })
                .collect();
            let pts = |r: &Row| -> Vec<(f64, f64)> {
                r.ccdf
                    .iter()
                    .filter(|p| p[0] > 0.0 && p[1] > 0.0)
                    .map(|p| (p[0].log10(), p[1].log10()))
                    .collect()
            };
            let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, r)| pts(r)).collect();
            let x_lo = all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min).floor();
            let x_hi = all.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max).ceil();
            let y_lo = all.iter().map(|p| p.1).fold(0.0, f64::min).floor();
            let (x_lo, x_hi) =
                if x_lo.is_finite() { (x_lo, x_hi.max(x_lo + 1.0)) } else { (0.0, 1.0) };
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{title}, queue depth 1"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(60)
                .build_cartesian_2d(x_lo..x_hi, y_lo..0.05)?;
            chart
                .configure_mesh()
                .x_desc("latency (µs)")
                .y_desc("P(latency > x)")
                .x_labels((x_hi - x_lo) as usize + 1)
                .y_labels((-y_lo) as usize + 1)
                .x_label_formatter(&|v| power_label(*v))
                .y_label_formatter(&|v| power_label(*v))
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 14))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()?;
            for (i, r) in series {
                let color = PALETTE[i % PALETTE.len()];
                chart
                    .draw_series(LineSeries::new(pts(r), color.stroke_width(2)))?
                    .label(r.engine.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font(("sans-serif", 13))
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn first_line(cmd: &str, arg: &str) -> String {
    Command::new(cmd)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// Runs the whole task.
pub fn run(a: &Args) -> Result<()> {
    let start = Instant::now();
    let vm = a.guest.vm();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("engines");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let out = a.out.clone().unwrap_or_else(|| root.join("docs"));
    fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    vmtest::ensure_host_tools(vm.install, true, &cache)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        kernel::Flavour::Cloud,
        vm.kernel.as_deref(),
        vm.install,
    )?;
    let modules = kernel::modules_to_load(&kernel)?;
    let programs = vmtest::build_guest_binaries(&root, &target, vm.install, &["zns-engines"])?;
    let fio = vmtest::which("fio").ok_or_else(|| Error::new("fio is not installed"))?;
    let mut files = vmtest::with_libraries(&fio)
        .ok_or_else(|| Error::new("cannot list the shared libraries fio needs (ldd)"))?;
    files.sort();
    files.dedup();
    let plan = EnginesPlan {
        modules: modules.iter().map(|m| m.name.clone()).collect(),
        ops: a.ops(),
        warmup: a.warmup,
        hugepages: 64,
    };
    let script = guest::engines_script(&plan);
    let initramfs = vmtest::pack_initramfs(&dir, &programs, &modules, &script, &files)?;
    let images = dir.join("images");
    vmtest::make_images(&images)?;
    let log = dir.join("guest.log");
    let devices = guest::qemu_device_args(&images);
    let outcome = vmtest::boot(&kernel, &initramfs, &devices, &vm, &log)?;
    for f in &outcome.failures {
        println!("engines: {}", f.trim_start_matches("vmtest: "));
    }
    if outcome.result != Some(true) || !outcome.failures.is_empty() {
        return Err(Error::new(format!("the guest run failed (log {})", log.display())));
    }
    let rows = ordered(&parse_rows(&outcome.engine_results)?)?;
    let ns = &guest::NAMESPACES[0];
    let report = Report {
        what: WHAT,
        caveat: CAVEAT,
        environment: Environment {
            qemu: first_line("qemu-system-x86_64", "--version"),
            accelerator: if vm.kvm { "KVM" } else { "TCG (software emulation)" },
            guest_cpus: vm.smp,
            guest_kernel: kernel.package.clone(),
            fio: first_line(&fio.to_string_lossy(), "--version"),
            namespace: format!("nsid {}: {}", ns.nsid, ns.props),
            block_size: 4096,
            queue_depth: 1,
            ops: a.ops(),
            warmup: a.warmup,
        },
        results: &rows,
    };
    let json_path = out.join("engines.json");
    let json = serde_json::to_string_pretty(&report).map_err(|e| Error::new(e.to_string()))?;
    fs::write(&json_path, json + "\n").map_err(|e| Error::io(&json_path, e))?;
    let svg_path = out.join("engines.svg");
    plot(&rows, &svg_path)?;
    println!("\n{}", markdown(&rows));
    println!("{CAVEAT}");
    println!(
        "engines: wrote {} and {} in {:.1} s (guest log {})",
        json_path.display(),
        svg_path.display(),
        start.elapsed().as_secs_f64(),
        log.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_keep_their_defaults_and_reject_what_is_not_a_count() {
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        let o = p(&[]).unwrap().unwrap();
        assert_eq!((o.ops(), o.warmup, o.out.as_deref()), (5000, 50, None));
        let vm = o.guest.vm();
        assert_eq!((vm.timeout.as_secs(), vm.install, vm.kvm), (900, true, false));
        let o = p(&["--out", "x", "--ops", "0", "--warmup", "0", "--no-install"]).unwrap().unwrap();
        assert_eq!((o.ops(), o.warmup, o.out.as_deref()), (1, 0, Some(Path::new("x"))));
        assert!(!o.guest.vm().install);
        for bad in [&["--ops", "many"][..], &["--warmup", "-3"], &["--ops", "1e3"], &["--out"]] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains(bad[0]), "{bad:?}: {e}");
        }
    }

    fn row(engine: &str, op: &str, base: f64) -> Row {
        Row {
            engine: engine.into(),
            op: op.into(),
            ops: 100,
            mean_us: base,
            p50_us: base,
            p95_us: base * 2.0,
            p99_us: base * 3.0,
            p99_9_us: base * 5.0,
            max_us: base * 6.0,
            iops: 1e6 / base,
            ccdf: vec![[base * 0.5, 1.0], [base, 0.5], [base * 3.0, 0.01], [base * 6.0, 0.001]],
        }
    }

    fn all_rows() -> Vec<Row> {
        let mut rows = Vec::new();
        for (i, e) in ENGINES.iter().enumerate() {
            for (op, _) in OPERATIONS {
                if *op != "append" || !e.starts_with("fio-") {
                    rows.push(row(e, op, 100.0 + 10.0 * i as f64));
                }
            }
        }
        rows
    }

    #[test]
    fn result_lines_parse_and_order() {
        let line = r#"{"engine":"ng","op":"write","ops":3,"mean_us":1.5,"p50_us":1,"p95_us":2,"p99_us":2,"p99_9_us":2,"max_us":2,"iops":600000.0,"ccdf":[[1.0,1.0],[2.0,0.333]]}"#;
        let rows = parse_rows(&[line.to_string()]).unwrap();
        assert_eq!(rows[0].ccdf[1], [2.0, 0.333]);
        assert!(parse_rows(&["{".into()]).is_err());
        let mut rows = all_rows();
        rows.reverse();
        let o = ordered(&rows).unwrap();
        assert_eq!((o[0].engine.as_str(), o[0].op.as_str()), ("pcie", "randread"));
        assert_eq!(o.len(), 15);
        for e in guest::FIO_ENGINES {
            assert!(ENGINES.contains(&format!("fio-{e}").as_str()), "{e}");
        }
        rows.retain(|r| !(r.engine == "zbd" && r.op == "append"));
        assert!(ordered(&rows).unwrap_err().to_string().contains("zbd append"));
    }

    #[test]
    fn the_table_and_the_plot_are_written() {
        let rows = ordered(&all_rows()).unwrap();
        let t = markdown(&rows);
        assert!(t.contains("| 4 KiB random read | pcie | 100 | 100 | 200 | 300 | 500 | 10000 |"));
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("e.svg");
        plot(&rows, &svg).unwrap();
        let text = fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("fio-io_uring"));
        assert!(text.contains("zone append"));
        assert_eq!(power_label(2.0), "100");
        assert_eq!(power_label(-2.0), "0.01");
        assert_eq!(power_label(4.0), "10k");
    }
}
