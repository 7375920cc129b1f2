//! A flood of connections held open: the endpoint keeps its threads and
//! its connection limit, and a good scrape goes through at once. (Alone
//! in its test binary, so that the process's threads are the endpoint's
//! and this test's.)

mod common;

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::Instant;

use common::{scrape, send, serve, PROMPT};
use zns_metrics::HttpLimits;

/// The threads of this process now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Whether the server has closed `s` (without waiting).
fn closed(mut s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    match s.read(&mut [0u8; 64]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

#[test]
fn five_hundred_held_connections_cost_no_thread_and_a_scrape_goes_through() {
    let limits = HttpLimits::default();
    let server = serve(limits);
    let addr = server.local_addr();
    scrape(addr);
    let before = threads();
    let held: Vec<TcpStream> = (0..500)
        .map(|i| {
            let part: &[u8] = match i % 3 {
                0 => b"",
                1 => b"GET /metrics HTTP/1.1\r\n",
                _ => b"GET /zo",
            };
            send(addr, part)
        })
        .collect();
    scrape(addr);
    assert_eq!(threads(), before, "threads while 500 connections are held");
    let open = server.open_connections();
    assert!(open <= 2 * limits.max_connections, "{open} connections open");
    // All but the newest (up to the limit) were closed for newcomers.
    let until = Instant::now() + PROMPT;
    loop {
        let n = held.iter().filter(|s| closed(s)).count();
        if n >= 500 - limits.max_connections {
            break;
        }
        assert!(Instant::now() < until, "only {n} of 500 held connections closed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let t = Instant::now();
    server.stop();
    assert!(t.elapsed() < PROMPT, "stopping took {:?}", t.elapsed());
}
