//! Fuzzes the controller's command path: the input chooses a sequence of
//! well-formed, mutated and random commands (see `zns_emulator::exerciser`);
//! any panic, hang, or disagreement with the reference model is a finding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use zns_emulator::exerciser::{ByteChoices, Exerciser};

fuzz_target!(|data: &[u8]| {
    let mut ex = Exerciser::new().expect("bring-up");
    let mut choices = ByteChoices::new(data);
    let mut steps = 0;
    while !choices.exhausted() && steps < 4096 {
        if let Err(v) = ex.step(&mut choices) {
            panic!("model violation: {v}");
        }
        steps += 1;
    }
    if let Err(v) = ex.verify() {
        panic!("final check: {v}");
    }
});
