//! Randomized commands through real queues against a reference model.
//!
//! `soak_ten_million_commands` is the release-mode run (ignored by default;
//! `cargo test --release -- --ignored soak`): at least 10 million commands,
//! zero panics, an intact model check at the end and along the way.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zns_emulator::exerciser::Exerciser;

fn run(seed: u64, commands: u64, check_every: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ex = Exerciser::new().expect("bring-up");
    let mut next_check = check_every;
    while ex.commands < commands {
        if let Err(v) = ex.step(&mut rng) {
            panic!("seed {seed}, after {} commands: {v}", ex.commands);
        }
        if ex.commands >= next_check {
            ex.verify().unwrap_or_else(|v| panic!("seed {seed}, at {}: {v}", ex.commands));
            next_check += check_every;
        }
    }
    ex.verify().unwrap_or_else(|v| panic!("seed {seed}, final check: {v}"));
    assert!(ex.successes > commands / 5, "too few successes: {} of {}", ex.successes, ex.commands);
    eprintln!(
        "seed {seed}: {} commands, {} succeeded, {} power cuts",
        ex.commands, ex.successes, ex.power_cuts
    );
}

#[test]
fn randomized_commands_match_the_model() {
    for seed in 0..2 {
        run(seed, 10_000, 5_000);
    }
}

#[test]
#[ignore = "release-mode soak: cargo test --release -- --ignored soak"]
fn soak_ten_million_commands() {
    run(0x5EED, 10_000_000, 1_000_000);
}
