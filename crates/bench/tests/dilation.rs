//! A dilated device clock: the same suite on the virtual clock at F = 1
//! and F = 4 gives the same figures once device time is divided by F, and
//! the run says it was dilated. Virtual time: not a timed test.

use zns_bench::characterize::{self, fidelity, Grid, NoProgress, Options, Results, Suite};

/// The quick suite's experiments that cost little debug-build time (the
/// zone management ones pad gigabytes of zones through the model; the
/// release-build `zns characterize --device emu:zn540,dilation=4` runs
/// all of them).
const ONLY: &[&str] = &["qd1", "intra_zone", "inter_zone", "open", "reads"];

fn run(uri: &str) -> Results {
    let dev = zns_device::open(uri).unwrap();
    let opts = Options {
        suite: Suite::Quick,
        seed: 3,
        only: ONLY.iter().map(|s| s.to_string()).collect(),
        grid: Some(Grid {
            qd1_sizes_kib: Some(vec![4, 128]),
            qd1_ops: Some(300),
            read_qds: Some(vec![1, 32]),
            read_ops: Some(1000),
            seq_read_qds: Some(vec![1, 8]),
            intra_qds: Some(vec![1, 4]),
            intra_ops: Some(500),
            inter_ops: Some(500),
            samples: Some(2),
            ..Grid::default()
        }),
        ..Options::default()
    };
    characterize::run(dev.as_ref(), &opts, &NoProgress).unwrap()
}

#[test]
fn figures_at_dilation_4_are_those_at_1_after_conversion() {
    let plain = run("emu:zn540,media=null,zones=64");
    let dilated = run("emu:zn540,media=null,zones=64,dilation=4");
    assert_eq!((plain.device.dilation, dilated.device.dilation), (1.0, 4.0));
    let mut compared = 0;
    for (name, a) in plain.figures() {
        let b = dilated.figure(&name).unwrap_or_else(|| panic!("{name} missing at F = 4"));
        assert!((b / a - 1.0).abs() <= 0.03 || (a - b).abs() < 1e-9, "{name}: {a} at 1, {b} at 4");
        compared += 1;
    }
    assert!(compared > 100, "{compared} figures");
    let headline = fidelity::HEADLINE.iter().filter(|f| plain.figure(f).is_some()).count();
    assert!(headline >= 8, "{headline} headline figures measured");
    // One host thread polling at once: nothing late on either.
    for r in [&plain, &dilated] {
        let l = r.host.late_completions.expect("an emulator's completions are counted");
        assert!(l.completions > 1000 && l.late == 0, "{l:?}");
        assert!(r.points.iter().all(|p| p.late.is_some_and(|l| l.late == 0)));
    }
}
