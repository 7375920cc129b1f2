use super::*;
use std::io::{Read, Write};
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

/// Echoes what it reads; "P" panics, "C" closes; waits with `until` when
/// `deadline` is set and counts its resumes.
struct Echo {
    s: TcpStream,
    resumes: Arc<AtomicUsize>,
    deadline: Option<Duration>,
}

impl Session for Echo {
    fn resume(&mut self, _ctx: &Resume<'_>) -> Wait {
        self.resumes.fetch_add(1, Ordering::SeqCst);
        let mut b = [0u8; 64];
        loop {
            match (&self.s).read(&mut b) {
                Ok(0) => return Wait::Close,
                Ok(n) => {
                    assert!(b[0] != b'P', "asked to panic");
                    if b[0] == b'C' {
                        return Wait::Close;
                    }
                    if (&self.s).write_all(&b[..n]).is_err() {
                        return Wait::Close;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Wait::Input { until: self.deadline.map(|d| Instant::now() + d) }
                }
                Err(_) => return Wait::Close,
            }
        }
    }

    fn socket(&self) -> &TcpStream {
        &self.s
    }
}

fn echo_server(
    config: ServerConfig,
    deadline: Option<Duration>,
) -> (EventServer, Arc<AtomicUsize>) {
    let resumes = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&resumes);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = EventServer::serve(listener, "test", config, move |s, _| {
        s.set_nonblocking(true).ok()?;
        Some(Box::new(Echo { s, resumes: Arc::clone(&r), deadline }) as Box<dyn Session>)
    })
    .unwrap();
    (server, resumes)
}

fn echo_once(c: &mut TcpStream, what: &[u8]) {
    c.write_all(what).unwrap();
    let mut got = vec![0u8; what.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(got, what);
}

fn wait_for(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn many_idle_connections_hold_no_worker() {
    let config = ServerConfig { workers: 1, linger: Duration::ZERO, ..ServerConfig::default() };
    let (server, _) = echo_server(config, None);
    let idle: Vec<TcpStream> =
        (0..300).map(|_| TcpStream::connect(server.local_addr()).unwrap()).collect();
    wait_for("300 open", || server.open_connections() == 300);
    // One worker, 300 idle connections: a new one is served at once.
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    echo_once(&mut c, b"hello");
    // And each idle one still is, when it speaks.
    for mut s in idle.into_iter().step_by(50) {
        echo_once(&mut s, b"x");
    }
    assert_eq!(server.stop().connections, 301);
}

#[test]
fn a_session_that_panics_or_closes_ends_alone_and_the_limit_refuses() {
    let config = ServerConfig { max_connections: 2, workers: 2, ..ServerConfig::default() };
    let (server, _) = echo_server(config, None);
    let addr = server.local_addr();
    let mut a = TcpStream::connect(addr).unwrap();
    let mut b = TcpStream::connect(addr).unwrap();
    wait_for("2 open", || server.open_connections() == 2);
    let mut refused = TcpStream::connect(addr).unwrap();
    assert_eq!(refused.read(&mut [0u8; 1]).unwrap(), 0, "closed at accept");
    a.write_all(b"P").unwrap();
    assert_eq!(a.read(&mut [0u8; 1]).unwrap_or(0), 0, "the panicking session is closed");
    echo_once(&mut b, b"still here");
    b.write_all(b"C").unwrap();
    assert_eq!(b.read(&mut [0u8; 1]).unwrap_or(0), 0);
    wait_for("none open", || server.open_connections() == 0);
    let totals = server.stop();
    assert_eq!((totals.connections, totals.refused), (2, 1));
}

#[test]
fn a_deadline_resumes_a_session_that_hears_nothing() {
    let config = ServerConfig { linger: Duration::ZERO, ..ServerConfig::default() };
    let (server, resumes) = echo_server(config, Some(Duration::from_millis(20)));
    let _c = TcpStream::connect(server.local_addr()).unwrap();
    wait_for("first resume", || resumes.load(Ordering::SeqCst) >= 1);
    let start = Instant::now();
    let first = resumes.load(Ordering::SeqCst);
    wait_for("five deadlines", || resumes.load(Ordering::SeqCst) >= first + 5);
    assert!(start.elapsed() >= Duration::from_millis(80), "resumed before its deadlines");
    server.stop();
}

/// Sends 1 MiB to a peer that does not read, waiting for room.
struct Flood {
    s: TcpStream,
    left: usize,
    resumes: Arc<AtomicUsize>,
}

impl Session for Flood {
    fn resume(&mut self, _ctx: &Resume<'_>) -> Wait {
        self.resumes.fetch_add(1, Ordering::SeqCst);
        let chunk = [7u8; 65536];
        while self.left > 0 {
            match (&self.s).write(&chunk[..self.left.min(chunk.len())]) {
                Ok(n) => self.left -= n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Wait::Output { until: None }
                }
                Err(_) => return Wait::Close,
            }
        }
        Wait::Close
    }

    fn socket(&self) -> &TcpStream {
        &self.s
    }
}

#[test]
fn a_peer_that_does_not_read_holds_no_worker_and_is_resumed_when_it_does() {
    let resumes = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&resumes);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = ServerConfig { workers: 1, ..ServerConfig::default() };
    let flood = EventServer::serve(listener, "flood", config, move |s, _| {
        s.set_nonblocking(true).ok()?;
        let _ = socket2::SockRef::from(&s).set_send_buffer_size(16384);
        Some(Box::new(Flood { s, left: 1 << 20, resumes: Arc::clone(&r) }) as Box<dyn Session>)
    })
    .unwrap();
    let mut slow = TcpStream::connect(flood.local_addr()).unwrap();
    let _ = socket2::SockRef::from(&slow).set_recv_buffer_size(16384);
    wait_for("a wait for room", || resumes.load(Ordering::SeqCst) >= 1);
    std::thread::sleep(Duration::from_millis(50));
    let parked = resumes.load(Ordering::SeqCst);
    assert_eq!(parked, 1, "resumed without room");
    // Another connection is served meanwhile by the one worker.
    let _other = TcpStream::connect(flood.local_addr()).unwrap();
    wait_for("the second connection runs", || resumes.load(Ordering::SeqCst) >= 2);
    let mut got = Vec::new();
    slow.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 1 << 20);
    flood.stop();
}

#[test]
fn a_closer_closes_a_waiting_session_and_stop_drops_every_session() {
    let closers: Arc<parking_lot::Mutex<Vec<Closer>>> = Arc::default();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Held {
        s: TcpStream,
        closers: Arc<parking_lot::Mutex<Vec<Closer>>>,
        dropped: Arc<AtomicUsize>,
    }
    impl Session for Held {
        fn resume(&mut self, ctx: &Resume<'_>) -> Wait {
            self.closers.lock().push(ctx.closer());
            Wait::Input { until: None }
        }
        fn socket(&self) -> &TcpStream {
            &self.s
        }
    }
    impl Drop for Held {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (c, d) = (Arc::clone(&closers), Arc::clone(&dropped));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = EventServer::serve(listener, "held", ServerConfig::default(), move |s, _| {
        Some(Box::new(Held { s, closers: Arc::clone(&c), dropped: Arc::clone(&d) })
            as Box<dyn Session>)
    })
    .unwrap();
    let mut first = TcpStream::connect(server.local_addr()).unwrap();
    let _second = TcpStream::connect(server.local_addr()).unwrap();
    wait_for("two sessions", || closers.lock().len() == 2);
    closers.lock()[0].close();
    assert_eq!(first.read(&mut [0u8; 1]).unwrap_or(0), 0, "closed by its closer");
    wait_for("one dropped", || dropped.load(Ordering::SeqCst) == 1);
    // A closer of a session that is gone does nothing.
    closers.lock()[0].close();
    server.stop();
    assert_eq!(dropped.load(Ordering::SeqCst), 2, "stop drops the waiting session");
}
