//! `zns emu fit` round trip: characterize an emulated drive whose timing
//! differs from the base profile's, fit the base to that run, and recover
//! the parameters the drive was made with.

use zns_bench::characterize::{self, Grid, NoProgress, Options, Suite};
use zns_bench::fit::{self, FitOptions, Quiet, Target};
use zns_device::DriverDevice;
use zns_emulator::profile::Profile;
use zns_emulator::timing::TimingProfile;
use zns_emulator::MediaChoice;

/// The experiments the round trip measures (the others identify no
/// parameter, and cost debug-build time).
const ONLY: &[&str] = &["qd1", "inter_zone", "intra_zone", "open", "zone_mgmt", "reads"];

fn characterize(profile: &Profile) -> characterize::Results {
    let dev = DriverDevice::open_profile(profile.clone(), MediaChoice::Null, "emu:drive").unwrap();
    let opts = Options {
        suite: Suite::Quick,
        seed: 7,
        only: ONLY.iter().map(|s| s.to_string()).collect(),
        // Quick's experiments (smoke's reads stay in the write buffer),
        // with fewer points and commands: large writes for the
        // program-bound write ceiling, deep reads for the link-bound
        // read ceilings.
        grid: Some(Grid {
            qd1_sizes_kib: Some(vec![4, 128]),
            // A 128 KiB write in 96 binds a stripe: with 1,000 of them
            // their p99 is a binding's, not on the edge between the two.
            qd1_ops: Some(1000),
            read_qds: Some(vec![1, 256]),
            read_ops: Some(4000),
            seq_read_kib: Some(128),
            seq_read_qds: Some(vec![1, 32]),
            intra_qds: Some(vec![1, 4]),
            intra_ops: Some(2000),
            inter_ops: Some(2000),
            samples: Some(2),
            ..Grid::default()
        }),
        ..Options::default()
    };
    characterize::run(&dev, &opts, &NoProgress).unwrap()
}

/// The zn540 model with other costs, on a smaller namespace.
fn drive() -> Profile {
    let mut p = Profile::by_name("zn540").unwrap();
    p.name = "drive".into();
    p.namespaces[0].zones = 64;
    let t = p.timing.as_mut().unwrap();
    t.read_us = t.read_us.iter().map(|r| r * 1.3).collect();
    // Far enough below the dies' random read rate that the link alone
    // bounds 4 KiB reads at QD 256.
    t.link_to_host_command_ns = 2000;
    t.link_to_host_mbps = 3000;
    t.program_us = 3000;
    t.erase_us = 200;
    t.open_ns = 6000;
    t.close_ns = 8000;
    t.finish_ns = 10_000;
    t.reset_metadata_us = 1000;
    t.close_block_us = 3000;
    t.write_ns = 2500;
    t.write_overlap_ns = 4500;
    // Two zones at QD 1 well below the many-zone ceiling: the wait for
    // another zone's write context is identified.
    t.zone_switch_ns = 4000;
    t.implicit_open_ns = 1000;
    p
}

#[test]
fn a_fit_recovers_the_parameters_a_drive_was_made_with() {
    let drive = drive();
    let results = characterize(&drive);
    let target = Target::from_results(&results, "drive").unwrap();
    let base = Profile::by_name("zn540").unwrap();
    let (profile, report) = fit::fit(&target, &FitOptions::new(base, "fitted"), &Quiet).unwrap();
    let off: Vec<(&str, f64)> =
        report.fitted.iter().map(|r| (r.figure.as_str(), r.ratio)).collect();
    assert!(report.converged, "rounds: {:?}\nfigures: {off:?}", report.rounds);
    // The geometry is the drive's, not the base's.
    assert_eq!(profile.namespaces[0].zones, 64);
    let truth = drive.timing.as_ref().unwrap();
    let got = profile.timing.as_ref().unwrap();
    // A parameter (or a sum the fit identifies as one) of the drive against
    // the fitted profile, within `tol`.
    let close = |name: &str, of: &dyn Fn(&TimingProfile) -> f64, tol: f64| {
        let (want, have) = (of(truth), of(got));
        assert!((have / want - 1.0).abs() <= tol, "{name}: drive {want}, fitted {have}");
    };
    close("read_us", &|t| t.read_us.iter().sum::<f64>() / t.read_us.len() as f64, 0.03);
    // The read ceilings' serial resource: its cost per command (the 4 KiB
    // ceiling) and its byte rate (the 128 KiB one).
    close("link_to_host_command_ns", &|t| t.link_to_host_command_ns as f64, 0.05);
    close("link_to_host_mbps", &|t| t.link_to_host_mbps as f64, 0.03);
    close("program_us", &|t| t.program_us as f64, 0.02);
    close("erase_us", &|t| t.erase_us as f64, 0.03);
    close("open_ns", &|t| t.open_ns as f64, 0.02);
    close("close_ns", &|t| t.close_ns as f64, 0.02);
    close("finish_ns", &|t| t.finish_ns as f64, 0.02);
    close("reset_metadata_us", &|t| t.reset_metadata_us as f64, 0.02);
    close("close_block_us", &|t| t.close_block_us as f64, 0.05);
    // A write's processing before and overlapping its transfer are
    // identified together (docs/fit.md): their sum.
    close("write_ns + write_overlap_ns", &|t| (t.write_ns + t.write_overlap_ns) as f64, 0.03);
    // The wait for another zone's write context (two zones taking turns),
    // and the open beyond it (the first write to a zone pays both).
    close("zone_switch_ns", &|t| t.zone_switch_ns as f64, 0.05);
    close(
        "implicit_open_ns + zone_switch_ns",
        &|t| (t.implicit_open_ns + t.zone_switch_ns) as f64,
        0.05,
    );
    // What the fit did not aim at, the fitted profile predicts.
    for e in &report.experiments {
        assert!(e.median_error < 0.05, "{}: median error {}", e.experiment, e.median_error);
    }
}

#[test]
fn held_out_experiments_keep_their_parameters_and_are_predicted() {
    let results = characterize(&drive());
    let target = Target::from_results(&results, "drive").unwrap();
    let base = Profile::by_name("zn540").unwrap();
    let mut opts = FitOptions::new(base.clone(), "fitted");
    opts.holdout = vec!["zone_mgmt".into()];
    opts.rounds = 3;
    let (profile, report) = fit::fit(&target, &opts, &Quiet).unwrap();
    // Zone management's parameters had no figure: the base's values.
    let (b, f) = (base.timing.as_ref().unwrap(), profile.timing.as_ref().unwrap());
    assert_eq!((f.erase_us, f.open_ns, f.finish_ns), (b.erase_us, b.open_ns, b.finish_ns));
    let kept: Vec<&str> =
        report.parameters.iter().filter(|p| p.figure.is_none()).map(|p| p.name.as_str()).collect();
    assert!(kept.contains(&"erase_us") && kept.contains(&"open_ns"), "{kept:?}");
    // ...so the held-out experiment is predicted, and badly: the drive's
    // zone management costs differ from the base's.
    let z = report.experiment("zone_mgmt").expect("predicted");
    assert!(z.held_out);
    assert!(z.median_error > 0.05, "{z:?}");
    assert!(report.fitted.iter().all(|r| r.experiment != "zone_mgmt"));
}

#[test]
fn targets_without_identifying_figures_or_of_conventional_drives_are_refused() {
    let mut results = characterize(&drive());
    results.points.retain(|p| p.experiment == "open");
    results.points.iter_mut().for_each(|p| p.id = format!("x{}", p.id));
    results.summary.clear();
    let target = Target::from_results(&results, "drive").unwrap();
    let base = Profile::by_name("zn540").unwrap();
    let e = fit::fit(&target, &FitOptions::new(base, "f"), &Quiet).unwrap_err();
    assert!(e.to_string().contains("none of the figures"), "{e}");
    results.device.info["zoned"] = false.into();
    let e = Target::from_results(&results, "drive").unwrap_err();
    assert!(e.to_string().contains("conventional"), "{e}");
}

#[test]
fn the_base_that_reproduces_a_drive_best_is_chosen() {
    // A small-zone drive (a zone on one die) with other program and erase
    // times: fitted from the zn540 structure it stays far off, from its
    // own class it is reproduced.
    let mut drive = Profile::by_name("small-zone").unwrap();
    drive.name = "drive".into();
    drive.namespaces[0].zones = 64;
    let t = drive.timing.as_mut().unwrap();
    t.program_us = t.program_us * 6 / 5;
    t.erase_us = t.erase_us * 13 / 10;
    let target = Target::from_results(&characterize(&drive), "drive").unwrap();
    let bases = [Profile::by_name("zn540").unwrap(), Profile::by_name("small-zone").unwrap()];
    let mut opts = FitOptions::new(bases[0].clone(), "fitted");
    opts.rounds = 4;
    let (profile, report, trials) = fit::fit_best_base(&target, &bases, &opts, &Quiet).unwrap();
    assert_eq!(report.base, "small-zone", "{trials:?}");
    assert_eq!(trials.len(), 2);
    let score = |name: &str| trials.iter().find(|t| t.base == name).unwrap().score.unwrap();
    assert!(score("zn540") > 5.0 * score("small-zone"), "{trials:?}");
    assert_eq!(profile.timing.as_ref().unwrap().zone_stripe_dies, 1);
}

#[test]
fn a_reference_figure_the_suite_does_not_measure_keeps_its_parameter() {
    // The ZN540's figures include the 16 KiB random read ceiling, which
    // only `full` measures: on `smoke` candidates its parameter is kept
    // and the others are fitted.
    let r = zns_bench::characterize::reference::for_profile("zn540").unwrap();
    let target = Target::from_reference(&r, 4096, Suite::Smoke);
    assert!(target.figures.contains_key("read_qd/random/16KiB:max_mib_s"));
    let base = Profile::by_name("zn540").unwrap();
    let mut opts = FitOptions::new(base, "fitted");
    opts.rounds = 1;
    let (_, report) = fit::fit(&target, &opts, &Quiet).unwrap();
    let figure = |name: &str| {
        report.parameters.iter().find(|p| p.name == name).map(|p| p.figure.clone()).unwrap()
    };
    assert_eq!(figure("link_to_host_list_ns"), None);
    assert_eq!(figure("write_ns").as_deref(), Some("qd1/write/4KiB:mean_us"));
}
