//! Each point's late completions are those of its own commands: the
//! experiments that take their points' samples in turn (`open`,
//! `zone_mgmt`: one zone per sample, with fills and resets around the
//! timed command) count every point's apart, so the fidelity table judges
//! a figure by the completions behind it. Virtual time: not a timed test.

use zns_bench::characterize::{self, Grid, NoProgress, Options, Suite};

/// The ZN540's timing model with zones cut to 1 MiB (capacity 768 KiB), so
/// that `zone_mgmt`'s fills stay small in a debug build.
fn small_zn540(dir: &std::path::Path) -> String {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../emulator/profiles/zn540.toml");
    let text = std::fs::read_to_string(src).unwrap();
    let text = text
        .replace("zones = 904\n", "zones = 64\n")
        .replace("zone_size = 524288\n", "zone_size = 256\n")
        .replace("zone_capacity = 275712\n", "zone_capacity = 192\n");
    assert!(text.contains("zone_size = 256\n"), "the ZN540 profile's zone lines moved");
    let path = dir.join("zn540-small.toml");
    std::fs::write(&path, text).unwrap();
    format!("emu:profile={},media=null", path.display())
}

#[test]
fn sampled_points_count_only_their_own_completions() {
    let dir = tempfile::tempdir().unwrap();
    let dev = zns_device::open(&small_zn540(dir.path())).unwrap();
    let opts = Options {
        suite: Suite::Smoke,
        seed: 5,
        only: vec!["open".into(), "zone_mgmt".into()],
        grid: Some(Grid { samples: Some(3), ..Default::default() }),
        ..Default::default()
    };
    let r = characterize::run(dev.as_ref(), &opts, &NoProgress).unwrap();
    let mut checked = 0;
    for p in r.points.iter().filter(|p| ["open", "zone_mgmt"].contains(&p.experiment.as_str())) {
        let l =
            p.late.unwrap_or_else(|| panic!("{}: the emulator's completions are counted", p.id));
        // One command per sample, and nothing else: not the fills, not
        // the resets between samples, not the other points' samples.
        assert_eq!(l.completions, p.ops, "{}: {l:?}", p.id);
        checked += 1;
    }
    assert!(checked >= 20, "{checked} points");
    for id in ["open/first_write/implicit", "zone_mgmt/reset/full", "zone_mgmt/finish/50%"] {
        assert!(r.points.iter().any(|p| p.id == id), "no point {id}");
    }
}
