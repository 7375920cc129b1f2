//! The poller thread: it owns every session that waits, watches their
//! sockets (one-shot interest, so a session is woken once per wait) and
//! their deadlines, hands the ready ones to the workers, and is the only
//! thread that drops a session, after taking its socket off the poller.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender};
use slab::Slab;

use super::session::{Session, Wait};

/// A session's identity: its slot and the slot's generation (a slot is
/// reused, a token is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    key: usize,
    gen: u64,
}

/// A session on its way between the poller and a worker.
pub(crate) struct Entry {
    pub token: Token,
    pub peer: Box<str>,
    pub session: Box<dyn Session>,
}

/// What the poller is told.
pub(crate) enum Msg {
    /// An accepted connection's session, to run at once.
    New(Box<dyn Session>, Box<str>),
    /// A worker gives a session back to wait.
    Park(Entry, Wait),
    /// A session is over.
    Ended(Entry),
    /// Close the session (see `Closer`).
    Close(Token),
    /// The server stops.
    Stop,
}

/// State the server's threads share.
///
/// Thread safety: `Send + Sync`.
pub(crate) struct Core {
    pub name: &'static str,
    stopping: AtomicBool,
    inbox: Sender<Msg>,
    pub poller: polling::Poller,
    /// Sessions that exist (running, ready or waiting).
    pub open: AtomicUsize,
    pub connections: AtomicU64,
    pub refused: AtomicU64,
    pub accept_errors: AtomicU64,
}

impl Core {
    /// The core and the receiving end of its poller's inbox.
    pub fn new(name: &'static str) -> std::io::Result<(Arc<Core>, Receiver<Msg>)> {
        let (inbox, rx) = crossbeam::channel::unbounded();
        let core = Core {
            name,
            stopping: AtomicBool::new(false),
            inbox,
            poller: polling::Poller::new()?,
            open: AtomicUsize::new(0),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
        };
        Ok((Arc::new(core), rx))
    }

    /// Tells the poller `m` and wakes it.
    pub fn send(&self, m: Msg) {
        // Fails only once the poller has gone, when nothing is left to do.
        if self.inbox.send(m).is_ok() {
            let _ = self.poller.notify();
        }
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }
}

/// A session's place in the poller.
struct Slot {
    gen: u64,
    /// The session, while it waits.
    parked: Option<Entry>,
    /// Its socket is on the poller (added at the first wait).
    registered: bool,
    /// A close was asked for while it ran.
    close: bool,
    /// The id of its live deadline in the timer heap (0: none).
    timer: u64,
}

/// The poller thread's state.
pub(crate) struct PollLoop {
    core: Arc<Core>,
    inbox: Receiver<Msg>,
    ready: Sender<Entry>,
    slots: Slab<Slot>,
    /// Deadlines: (when, slot, timer id); stale ones are skipped.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_gen: u64,
    next_timer: u64,
    /// Sessions on a worker or in the ready queue.
    running: usize,
    stopping: bool,
}

impl PollLoop {
    pub fn new(core: Arc<Core>, inbox: Receiver<Msg>, ready: Sender<Entry>) -> PollLoop {
        PollLoop {
            core,
            inbox,
            ready,
            slots: Slab::new(),
            timers: BinaryHeap::new(),
            next_gen: 0,
            next_timer: 0,
            running: 0,
            stopping: false,
        }
    }

    /// Runs until the server stops and every session has come back from
    /// its worker; then drops what is left.
    pub fn run(mut self) {
        let mut events = polling::Events::new();
        loop {
            let timeout = self.next_timeout();
            events.clear();
            if let Err(e) = self.core.poller.wait(&mut events, timeout) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::warn!(server = self.core.name, error = %e, "poller wait failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            for ev in events.iter() {
                self.wake(ev.key);
            }
            while let Ok(msg) = self.inbox.try_recv() {
                self.handle(msg);
            }
            self.expire_timers();
            if self.stopping && self.running == 0 {
                break;
            }
        }
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        for key in keys {
            if let Some(e) = self.slots[key].parked.take() {
                self.end(e);
            }
        }
    }

    /// Hands the waiting session of slot `key` to the workers.
    fn wake(&mut self, key: usize) {
        let Some(entry) = self.slots.get_mut(key).and_then(|s| s.parked.take()) else { return };
        self.slots[key].timer = 0;
        self.running += 1;
        // The workers outlive the poller loop: the send cannot fail.
        let _ = self.ready.send(entry);
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::New(session, peer) => {
                if self.stopping {
                    self.core.open.fetch_sub(1, Ordering::SeqCst);
                    drop_quietly(session, self.core.name);
                    return;
                }
                self.next_gen += 1;
                let gen = self.next_gen;
                let key = self.slots.insert(Slot {
                    gen,
                    parked: None,
                    registered: false,
                    close: false,
                    timer: 0,
                });
                self.running += 1;
                let _ = self.ready.send(Entry { token: Token { key, gen }, peer, session });
            }
            Msg::Park(entry, wait) => {
                self.running -= 1;
                self.park(entry, wait);
            }
            Msg::Ended(entry) => {
                self.running -= 1;
                self.end(entry);
            }
            Msg::Close(token) => {
                let Some(slot) = self.slots.get_mut(token.key).filter(|s| s.gen == token.gen)
                else {
                    return;
                };
                match slot.parked.take() {
                    Some(entry) => self.end(entry),
                    None => slot.close = true,
                }
            }
            Msg::Stop => {
                self.stopping = true;
                let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
                for key in keys {
                    if let Some(e) = self.slots[key].parked.take() {
                        self.end(e);
                    }
                }
            }
        }
    }

    /// Puts a session to wait for `wait`.
    fn park(&mut self, entry: Entry, wait: Wait) {
        let key = entry.token.key;
        let slot = &self.slots[key];
        let (interest, until) = match wait {
            _ if slot.close || self.stopping => return self.end(entry),
            Wait::Close => return self.end(entry),
            Wait::Input { until } => (polling::Event::readable(key), until),
            Wait::Output { until } => (polling::Event::writable(key), until),
        };
        let armed = if slot.registered {
            self.core.poller.modify(entry.session.socket(), interest)
        } else {
            // SAFETY: the socket is taken off the poller (`end`) before
            // its session, which owns it, is dropped; only this thread
            // drops sessions, and only through `end` while registered.
            unsafe { self.core.poller.add(entry.session.socket(), interest) }
        };
        if let Err(e) = armed {
            tracing::warn!(server = self.core.name, peer = %entry.peer, error = %e, "cannot watch a connection; closing it");
            return self.end(entry);
        }
        let slot = &mut self.slots[key];
        slot.registered = true;
        if let Some(t) = until {
            self.next_timer += 1;
            slot.timer = self.next_timer;
            self.timers.push(Reverse((t, key, self.next_timer)));
        }
        slot.parked = Some(entry);
    }

    /// Ends a session: off the poller, out of its slot, dropped.
    fn end(&mut self, entry: Entry) {
        let key = entry.token.key;
        if self.slots.get(key).is_some_and(|s| s.registered) {
            let _ = self.core.poller.delete(entry.session.socket());
        }
        self.slots.try_remove(key);
        drop_quietly(entry.session, self.core.name);
        self.core.open.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes the sessions whose deadline has passed.
    fn expire_timers(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((when, key, id))) = self.timers.peek() {
            if when > now {
                break;
            }
            self.timers.pop();
            if self.slots.get(key).is_some_and(|s| s.timer == id) {
                self.wake(key);
            }
        }
        // Deadlines of sessions woken by input stay in the heap until they
        // pass; a heap far larger than the sessions is rebuilt.
        if self.timers.len() > 2 * self.slots.len() + 64 {
            let slots = &self.slots;
            self.timers.retain(|Reverse((_, k, id))| slots.get(*k).is_some_and(|s| s.timer == *id));
        }
    }

    /// How long the poller may sleep: until the earliest live deadline.
    fn next_timeout(&mut self) -> Option<Duration> {
        while let Some(&Reverse((when, key, id))) = self.timers.peek() {
            if self.slots.get(key).is_some_and(|s| s.timer == id) {
                return Some(when.saturating_duration_since(Instant::now()));
            }
            self.timers.pop();
        }
        None
    }
}

/// Drops a session; a panic in its drop is logged, not spread to the
/// poller (which serves every other session).
fn drop_quietly(session: Box<dyn Session>, name: &str) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(session))).is_err() {
        tracing::warn!(server = name, "a connection's clean-up panicked");
    }
}
