//! Worker threads: each takes a ready session, resumes it until it has
//! to wait, and gives it back to the poller. A session that waits for
//! input is first kept for a moment (the linger) while no other session
//! is ready, so a peer answering at once (a host at queue depth 1) costs
//! no trip through the poller.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Receiver;

use super::core::{Core, Entry, Msg};
use super::session::{Resume, Wait};

/// Runs sessions from `ready` until the poller goes.
pub(crate) fn run(core: Arc<Core>, ready: Receiver<Entry>, linger: Duration) {
    while let Ok(mut entry) = ready.recv() {
        if core.stopping() {
            core.send(Msg::Ended(entry));
            continue;
        }
        let msg = loop {
            let ctx = Resume { peer: &entry.peer, core: &core, token: entry.token, ready: &ready };
            let session = &mut entry.session;
            let wait = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                session.resume(&ctx)
            })) {
                Ok(w) => w,
                Err(_) => {
                    tracing::warn!(server = core.name, peer = %entry.peer, "a connection panicked; closing it");
                    Wait::Close
                }
            };
            match wait {
                Wait::Close => break Msg::Ended(entry),
                Wait::Input { until } if lingers(&core, &ready, linger) => {
                    let mut limit = Instant::now() + linger;
                    if let Some(u) = until {
                        limit = limit.min(u);
                    }
                    if readable_before(entry.session.socket(), limit) {
                        continue;
                    }
                    entry.session.parking();
                    break Msg::Park(entry, wait);
                }
                w @ Wait::Input { .. } => {
                    entry.session.parking();
                    break Msg::Park(entry, w);
                }
                w => break Msg::Park(entry, w),
            }
        };
        core.send(msg);
    }
}

/// Whether a session waiting for input may keep its worker a moment.
fn lingers(core: &Core, ready: &Receiver<Entry>, linger: Duration) -> bool {
    !linger.is_zero() && ready.is_empty() && !core.stopping()
}

/// Whether `socket` has input (or its end, or an error) before `limit`.
fn readable_before(socket: &std::net::TcpStream, limit: Instant) -> bool {
    let Some(left) = limit.checked_duration_since(Instant::now()) else { return false };
    let mut fd = libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: `fd` is one valid pollfd for the call's duration, the count
    // is 1, and the descriptor belongs to `socket`, open while borrowed.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0
}
