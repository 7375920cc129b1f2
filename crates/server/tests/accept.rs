//! A server out of file descriptors: failed accepts pause instead of
//! spinning, and the connection waiting is served once descriptors free.
//!
//! The descriptor limit is lowered in a child process (this test binary
//! run again), so no other test shares it.

use std::io::Read;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use zns_server::{EventServer, Resume, ServerConfig, Session, Wait};

const CHILD: &str = "ZNS_SERVER_ACCEPT_CHILD";

/// Says "hi", then keeps the connection (and its descriptor) until the
/// peer closes it.
struct Hi(TcpStream, bool);

impl Session for Hi {
    fn resume(&mut self, _ctx: &Resume<'_>) -> Wait {
        if !self.1 {
            self.1 = true;
            let _ = std::io::Write::write_all(&mut self.0, b"hi");
            return Wait::Input { until: None };
        }
        match self.0.read(&mut [0u8; 16]) {
            Ok(n) if n > 0 => Wait::Input { until: None },
            _ => Wait::Close,
        }
    }

    fn socket(&self) -> &TcpStream {
        &self.0
    }
}

#[test]
fn accept_errors_back_off_and_the_waiting_connection_is_served_later() {
    if std::env::var_os(CHILD).is_some() {
        return out_of_descriptors();
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "accept_errors_back_off_and_the_waiting_connection_is_served_later"])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(text.contains("served after"), "the child did not run its check:\n{text}");
}

fn out_of_descriptors() {
    let limit = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
    // SAFETY: a valid rlimit read by the call; this process is the child
    // made for this test alone.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ServerConfig { workers: 1, ..ServerConfig::default() };
    let server = EventServer::serve(listener, "test", config, |s, _| {
        Some(Box::new(Hi(s, false)) as Box<dyn Session>)
    })
    .unwrap();
    // The client's socket exists before the descriptors run out; its
    // connect needs none.
    let client = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let first = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let mut hog = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hog.push(f);
    }
    // An accept already waiting when the descriptors ran out holds one
    // for the next connection: a first client takes it (and keeps it).
    // From then on every accept fails: no descriptor for the connection.
    first.connect(&addr.into()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let before = server.totals().accept_errors;
    client.connect(&addr.into()).unwrap();
    let mut client: TcpStream = client.into();
    std::thread::sleep(Duration::from_millis(1500));
    let errors = server.totals().accept_errors - before;
    // 10, 20, 40, ... 640 ms: at most 8 tries in 1.5 s, where a loop
    // without pauses makes hundreds of thousands.
    assert!((2..=9).contains(&errors), "{errors} failed accepts in 1.5 s");
    drop(hog);
    let start = Instant::now();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = [0u8; 2];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hi");
    println!("served after {:?} ({errors} failed accepts)", start.elapsed());
    // The first client and this one.
    assert_eq!(server.stop().connections, 2);
}
