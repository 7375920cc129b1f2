//! The endpoint against peers that send garbage, stall, send too much or
//! ask for what it does not serve: each is answered or closed alone,
//! within bounded bytes and time, and a good scrape goes on meanwhile.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{ask, ending, flood, scrape, send, serve, PROMPT};
use zns_metrics::{HttpLimits, OPENMETRICS};

#[test]
fn garbage_closes_its_own_connection_only() {
    let server = serve(HttpLimits::default());
    let addr = server.local_addr();
    // A good client half way through its request meanwhile.
    let mut good = send(addr, b"GET /metrics HTTP/1.1\r\nHost: a\r\n");
    // A TLS ClientHello's first bytes, then noise.
    let mut noise = vec![0x16, 0x03, 0x01, 0x02, 0x00];
    let mut x: u32 = 0x2545_f491;
    for _ in 0..4000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let e = ask(addr, &noise);
    assert_eq!(e.status(), Some(400), "{}", e.text);
    for (request, status) in [
        (&b"hello there\r\n\r\n"[..], 400),
        (b"GET /metrics\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        (b"GET /metrics HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nContent-Length: lots\r\n\r\n", 400),
    ] {
        let e = ask(addr, request);
        assert_eq!(e.status(), Some(status), "{:?}: {}", String::from_utf8_lossy(request), e.text);
    }
    // A peer that sends garbage and closes at once.
    drop(send(addr, &noise));
    // The good client finishes its request and is answered.
    std::io::Write::write_all(&mut good, b"\r\n").unwrap();
    let e = ending(&mut good, PROMPT);
    assert_eq!(e.status(), Some(200), "{}", e.text);
    assert!(e.text.contains("zns_namespace_info"), "{}", e.text);
    scrape(addr);
    server.stop();
}

#[test]
fn stalled_clients_are_closed_in_bounded_time_and_a_scrape_goes_by_them() {
    let timeout = Duration::from_secs(4);
    let limits =
        HttpLimits { request_timeout: timeout, max_connections: 128, ..HttpLimits::default() };
    let server = serve(limits);
    let addr = server.local_addr();
    let t0 = Instant::now();
    // 64 clients that stop: before the request line ends, inside the
    // headers, or before their first byte.
    let mut stalled: Vec<TcpStream> = (0..64)
        .map(|i| {
            let part: &[u8] = match i % 3 {
                0 => b"GET /metr",
                1 => b"GET /metrics HTTP/1.1\r\nHost: a\r\n",
                _ => b"",
            };
            send(addr, part)
        })
        .collect();
    // One that trickles a byte of an endless header every 100 ms: a
    // deadline, not an idle timeout, ends it.
    let trickler = send(addr, b"GET /metrics HTTP/1.1\r\nX-Slow: ");
    let mut writer = trickler.try_clone().unwrap();
    let drip = std::thread::spawn(move || {
        let until = Instant::now() + 3 * timeout;
        while Instant::now() < until && std::io::Write::write_all(&mut writer, b"a").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    stalled.push(trickler);
    // A good scrape meanwhile: answered while every one of them is open.
    scrape(addr);
    scrape(addr);
    assert!(t0.elapsed() < timeout, "the scrapes ended only after {:?}", t0.elapsed());
    assert!(server.open_connections() >= 65, "{}", server.open_connections());
    for (i, s) in stalled.iter_mut().enumerate() {
        let e = ending(s, timeout + PROMPT);
        assert!(e.closed, "stalled client {i} still open: {}", e.text);
        assert_eq!(e.status(), Some(408), "stalled client {i}: {}", e.text);
        // Its deadline began at its accept, after t0.
        let at = e.at - t0;
        assert!(at >= timeout && at < timeout + PROMPT, "stalled client {i} closed after {at:?}");
    }
    drip.join().unwrap();
    let until = Instant::now() + PROMPT;
    while server.open_connections() > 0 {
        assert!(Instant::now() < until, "{} connections left", server.open_connections());
        std::thread::sleep(Duration::from_millis(20));
    }
    scrape(addr);
    server.stop();
}

#[test]
fn an_oversized_head_is_refused_at_its_limit() {
    let server = serve(HttpLimits::default());
    let addr = server.local_addr();
    // A request line of 16 KiB (the limit is 8 KiB).
    let mut line = b"GET /".to_vec();
    line.resize(16 << 10, b'a');
    line.extend_from_slice(b" HTTP/1.1\r\n\r\n");
    let e = ask(addr, &line);
    assert_eq!(e.status(), Some(431), "{}", e.text);
    // A header block of 16 KiB, in fields of fair length.
    let mut head = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while head.len() < 16 << 10 {
        head.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let e = ask(addr, &head);
    assert_eq!(e.status(), Some(431), "{}", e.text);
    // A header of 64 MiB: the connection is closed long before it is
    // sent, so the server never buffered it.
    let mut s = send(addr, b"GET /metrics HTTP/1.1\r\nX-Big: ");
    let sent = flood(&mut s, b'a', 64 << 20).expect("the server took a 64 MiB header");
    assert!(sent < 32 << 20, "{sent} bytes went before the close");
    scrape(addr);
    server.stop();
}

#[test]
fn a_request_body_is_refused_unread() {
    let server = serve(HttpLimits::default());
    let addr = server.local_addr();
    let e = ask(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n");
    assert_eq!(e.status(), Some(405), "{}", e.text);
    assert!(e.text.contains("\r\nAllow: GET, HEAD\r\n"), "{}", e.text);
    let e = ask(addr, b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(e.status(), Some(413), "{}", e.text);
    // A GET announcing 1 GiB is answered before any of it comes ...
    let mut s = send(addr, b"GET /metrics HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n");
    let e = ending(&mut s, PROMPT);
    assert!(e.closed && e.status() == Some(413), "{e:?}");
    // ... and its body is not read: the connection is gone long before.
    let sent = flood(&mut s, b'b', 64 << 20).expect("the server read a 64 MiB body");
    assert!(sent < 32 << 20, "{sent} bytes went before the close");
    scrape(addr);
    server.stop();
}

#[test]
fn other_methods_get_405_and_other_paths_404() {
    let server = serve(HttpLimits::default());
    let addr = server.local_addr();
    for method in ["POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "get"] {
        let e = ask(addr, format!("{method} /metrics HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        assert_eq!(e.status(), Some(405), "{method}: {}", e.text);
    }
    for path in ["/", "/metric", "/metrics/", "/zones/x", "*"] {
        let e = ask(addr, format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(e.status(), Some(404), "{path}: {}", e.text);
    }
    let e = ask(addr, b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
    assert_eq!(e.status(), Some(200), "{}", e.text);
    assert!(e.text.contains(&format!("\r\nContent-Type: {OPENMETRICS}\r\n")), "{}", e.text);
    let e = ask(addr, b"GET /zones HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(e.status(), Some(200), "{}", e.text);
    assert!(e.text.contains("\r\nContent-Type: application/json\r\n"), "{}", e.text);
    // HEAD: the head of GET's answer, its length, no body.
    let e = ask(addr, b"HEAD /zones HTTP/1.1\r\n\r\n");
    assert_eq!(e.status(), Some(200), "{}", e.text);
    let (head, body) = e.text.split_once("\r\n\r\n").unwrap();
    assert!(body.is_empty(), "{body}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|n| n.parse().ok())
        .unwrap();
    let get = ask(addr, b"GET /zones HTTP/1.1\r\n\r\n");
    assert_eq!(get.text.split_once("\r\n\r\n").unwrap().1.len(), len);
    server.stop();
}

#[test]
fn a_newcomer_past_the_limit_closes_the_oldest_waiting_connection() {
    let limits = HttpLimits {
        request_timeout: Duration::from_secs(60),
        max_connections: 4,
        ..HttpLimits::default()
    };
    let server = serve(limits);
    let addr = server.local_addr();
    let mut held: Vec<TcpStream> =
        (0..12).map(|i| send(addr, if i % 2 == 0 { b"" } else { b"GET /" })).collect();
    // Long before the 60 s timeout: the scrape took the place of the
    // oldest connection.
    scrape(addr);
    assert!(server.open_connections() <= 8, "{}", server.open_connections());
    // The 9 oldest were closed, one for each newcomer past 4; the 3
    // newest wait on.
    for (i, s) in held.iter_mut().enumerate() {
        let e = ending(s, if i < 9 { PROMPT } else { Duration::from_millis(300) });
        assert_eq!(e.closed, i < 9, "held connection {i}: {e:?}");
    }
    server.stop();
}

#[test]
fn limits_that_serve_nothing_are_refused() {
    let exporter = std::sync::Arc::new(zns_metrics::ExporterBuilder::new().build());
    for limits in [
        HttpLimits { max_connections: 0, ..HttpLimits::default() },
        HttpLimits { request_timeout: Duration::ZERO, ..HttpLimits::default() },
        HttpLimits { max_head: 10, ..HttpLimits::default() },
    ] {
        let e = zns_metrics::MetricsServer::start_with("127.0.0.1:0", exporter.clone(), limits)
            .unwrap_err();
        assert!(matches!(e, zns_metrics::MetricsError::Listen(..)), "{e}");
    }
}

#[test]
fn a_newcomer_closes_an_answered_connection_before_one_still_asking() {
    let limits = HttpLimits {
        request_timeout: Duration::from_secs(60),
        max_connections: 2,
        ..HttpLimits::default()
    };
    let server = serve(limits);
    let addr = server.local_addr();
    let mut asking = send(addr, b"GET /met");
    // Answered, and kept open: the server waits for it to close.
    let mut answered = send(addr, b"GET /zones HTTP/1.1\r\n\r\n");
    let e = ending(&mut answered, PROMPT);
    assert_eq!(e.status(), Some(200), "{}", e.text);
    // A newcomer past the 2: the answered one goes, the older one asking
    // stays.
    let _newcomer = send(addr, b"");
    let e = ending(&mut asking, Duration::from_millis(300));
    assert!(!e.closed, "the connection still asking was closed: {e:?}");
    server.stop();
}
