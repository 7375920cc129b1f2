//! The background pump: eZNS's internal commands (journal blocks,
//! finishes and resets of physical zones) run on the control queue, which
//! every tenant queue's poll moves on. When the tenants go idle with
//! internal commands in flight, no poll would take their completions
//! until the next tenant command, and on a real clock they would complete
//! late by the whole idle time; the arbiter's ticks, also run by polls,
//! would wait as long. The pump polls the control queue and runs the
//! arbiter every `pump_us` of real time instead.
//!
//! It only runs where completions fall due in real time: a real device,
//! or an emulator timed on the real clock. On a virtual clock time moves
//! with the polls themselves, and a thread polling beside them would make
//! runs depend on thread timing; an untimed emulator completes every
//! command as it is submitted.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::runtime::Ezns;

/// Starts the pump of `ez` when its configuration and clock call for
/// one. The thread holds the instance weakly and ends within one period
/// of the instance's end.
pub(crate) fn start(ez: &Arc<Ezns>) {
    let period = ez.config.pump_us;
    if period == 0 || !due_in_real_time(ez) {
        return;
    }
    let weak = Arc::downgrade(ez);
    let period = Duration::from_micros(period);
    let spawned =
        std::thread::Builder::new().name("ezns-pump".into()).spawn(move || run(&weak, period));
    if let Err(e) = spawned {
        // The instance works without it, as on a virtual clock.
        tracing::warn!(error = %e, "eZNS: no background pump thread");
    }
}

/// True when the base device's completions fall due in real time.
fn due_in_real_time(ez: &Ezns) -> bool {
    match ez.base.emulator() {
        Some(e) => e.is_timed() && !e.clock().is_virtual(),
        None => ez.base.clock_name() == "real",
    }
}

fn run(ez: &Weak<Ezns>, period: Duration) {
    loop {
        std::thread::sleep(period);
        let Some(ez) = ez.upgrade() else { return };
        once(&ez);
    }
}

/// One pump: the control queue (if its lock is free) and the arbiter's
/// tick (if one is due), as a tenant queue's poll runs them.
pub(crate) fn once(ez: &Ezns) {
    let completed = crate::control::pump(ez);
    ez.pumped.fetch_add(completed, std::sync::atomic::Ordering::Relaxed);
    ez.maybe_tick();
}
