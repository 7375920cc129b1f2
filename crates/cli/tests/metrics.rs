//! `--metrics`: a served device's endpoint counts the commands a host
//! sends, read directly and through a real Prometheus scraping it.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_device::ZonedDevice;
use zns_metrics::{client, parse};

const TIMEOUT: Duration = Duration::from_secs(10);

/// The sum of the samples of `name` whose labels include `labels`.
fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    parse::parse(text)
        .unwrap()
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .map(|s| s.value)
        .sum()
}

/// Runs `zns ARGS` (a server), listening and serving its metrics on free
/// loopback ports: the server and its metrics URL.
fn start(args: &[&str]) -> (common::Server, String) {
    let mut all = args.to_vec();
    all.extend(["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]);
    let mut server = common::Server::start(&all);
    let url = server.metrics_url();
    (server, url)
}

/// `zns --device emu:small serve` as subsystem `nqn` (see [`start`]), and
/// a host on its namespace 1.
fn serve_emu_small(nqn: &str) -> (common::Server, String, Arc<dyn ZonedDevice>) {
    let (server, url) = start(&["--device", "emu:small", "serve", "--nqn", nqn]);
    let dev = host(&server, nqn);
    (server, url, dev)
}

/// A host on namespace 1 of subsystem `nqn` of `server`.
fn host(server: &common::Server, nqn: &str) -> Arc<dyn ZonedDevice> {
    zns_device::open(&format!("tcp:{}/{nqn}/1", server.addr)).unwrap()
}

/// Writes `n` commands of 4 blocks each at the start of zone 0 of `dev`.
fn write(dev: &dyn ZonedDevice, n: u64) {
    let mut q = dev.queue(4).unwrap();
    let buf = q.alloc(4 * dev.info().block_size as usize).unwrap();
    for i in 0..n {
        q.write(i * 4, &buf).unwrap();
    }
}

#[test]
fn serve_counts_the_commands_of_a_host_by_opcode_and_status() {
    let (server, url, dev) = serve_emu_small("nqn.2026-11.io.znskit:metrics");
    write(dev.as_ref(), 6);
    // A write past the write pointer fails with Zone Invalid Write.
    let mut q = dev.queue(2).unwrap();
    let buf = q.alloc(4096).unwrap();
    assert!(q.write(1000, &buf).is_err());
    let text = client::get(&url, "/metrics", TIMEOUT).unwrap();
    let w = [("namespace", "1"), ("opcode", "write")];
    assert_eq!(sum(&text, "zns_commands_total", &w), 7.0, "{text}");
    assert_eq!(sum(&text, "zns_bytes_total", &w), ((6 * 4 + 1) * 4096) as f64);
    let bad = [("status", "Zone Invalid Write")];
    assert_eq!(sum(&text, "zns_completions_total", &bad), 1.0);
    assert_eq!(sum(&text, "zns_zones", &[("state", "implicitly_opened")]), 1.0);
    assert_eq!(sum(&text, "zns_host_written_bytes_total", &[]), (6 * 4 * 4096) as f64);
    assert_eq!(sum(&text, "zns_write_amplification", &[]), 1.0);
    let zones = client::get(&url, "/zones", TIMEOUT).unwrap();
    let maps: Vec<zns_metrics::ZoneMap> = serde_json::from_str(&zones).unwrap();
    assert_eq!(maps[0].zones[0].written, 24);
    drop((q, dev));
    server.stop();
}

#[test]
fn serve_exports_the_figures_of_an_ftl() {
    let nqn = "nqn.2026-11.io.znskit:ftl-metrics";
    let (server, url) = start(&["serve", "--ftl", "emu:small", "--nqn", nqn]);
    let dev = host(&server, nqn);
    write(dev.as_ref(), 5);
    drop(dev);
    let text = client::get(&url, "/metrics", TIMEOUT).unwrap();
    let f = [("ftl", "1")];
    assert_eq!(sum(&text, "zns_ftl_user_writes_total", &f), 5.0, "{text}");
    assert_eq!(sum(&text, "zns_ftl_user_written_blocks_total", &f), 20.0);
    assert_eq!(sum(&text, "zns_ftl_zones", &f) as u64, 256);
    server.stop();
}

#[test]
fn ftl_serve_exports_the_figures_of_its_ftl() {
    let (server, url) = start(&["--device", "emu:small", "ftl", "serve"]);
    let text = client::get(&url, "/metrics", TIMEOUT).unwrap();
    assert!(sum(&text, "zns_ftl_logical_blocks", &[("ftl", "1")]) > 0.0, "{text}");
    assert_eq!(sum(&text, "zns_ftl_zones", &[("ftl", "1")]) as u64, 256);
    // Its device's zones: the FTL's metadata log has opened some.
    assert_eq!(sum(&text, "zns_zones", &[("namespace", "1")]) as u64, 256);
    let text = server.stop();
    assert!(text.contains("checkpoint written"), "{text}");
}

/// A Prometheus server on loopback, its data in a temporary directory;
/// killed when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (HOST:PORT) every 200 ms.
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\nscrape_configs:\n  \
                 - job_name: zns\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // A free loopback port for its web interface.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={listen}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run prometheus");
        Prometheus { child, url: format!("http://{listen}"), _dir: dir }
    }

    /// The value of instant query `q`, once Prometheus has one, or
    /// `None`.
    fn query(&self, q: &str) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", percent_encode(q));
        let body = client::get(&self.url, &path, TIMEOUT).ok()?;
        let j: serde_json::Value = serde_json::from_str(&body).ok()?;
        j["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        common::wait_exit(&mut self.child, "prometheus to exit after SIGKILL");
    }
}

/// `s` with everything but unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_endpoint_and_answers_a_promql_query() {
    if !common::have("prometheus", "prometheus") {
        return;
    }
    let (server, url, dev) = serve_emu_small("nqn.2026-11.io.znskit:prometheus");
    write(dev.as_ref(), 9);
    let prometheus = Prometheus::start(url.trim_start_matches("http://"));
    let q = r#"sum(zns_commands_total{job="zns",namespace="1",opcode="write"})"#;
    let deadline = Instant::now() + common::PATIENCE;
    let mut last = None;
    while Instant::now() < deadline {
        last = prometheus.query(q);
        if last == Some(9.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(last, Some(9.0), "{q} through Prometheus at {}", prometheus.url);
    let open = prometheus.query(r#"zns_open_zones{namespace="1"}"#);
    assert_eq!(open, Some(1.0));
    drop(prometheus);
    drop(dev);
    server.stop();
}

/// `zns top --once` against a live server: the zone map, the limits, and
/// the rates of writes a host sends meanwhile.
#[test]
fn top_once_shows_a_live_server() {
    let (server, url, dev) = serve_emu_small("nqn.2026-11.io.znskit:top");
    let mut top = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(["top", "--metrics", &url, "--once", "--interval", "1", "--size", "100x30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Writes until top has printed its frame, so that some fall in its
    // interval; paced, and never filling zone 0, which stays open.
    let mut q = dev.queue(2).unwrap();
    let buf = q.alloc(4096).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    let mut lba = 0;
    while top.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "zns top --once did not finish");
        if lba + 1 < dev.info().zone_capacity {
            q.write(lba, &buf).unwrap();
            lba += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let o = top.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.starts_with(&format!("zns top  {url}\n")), "{text}");
    assert!(text.contains("namespace 1: 256 zones  open 1/14  active 1/14  empty 255"), "{text}");
    let row0 = text.lines().find(|l| l.starts_with("│    0 ")).unwrap();
    assert!(row0["│    0 ".len()..].starts_with(|c: char| c.is_ascii_digit()), "{text}");
    assert!(row0.contains(&".".repeat(79)), "{text}");
    let write = text.lines().find(|l| l.starts_with("write ")).unwrap();
    let iops: f64 = write.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(iops > 0.0, "{text}");
    assert!(!write.trim_end().ends_with('-'), "latency percentiles missing: {text}");
    drop((q, dev));
    server.stop();
}

#[test]
fn top_needs_a_terminal_or_once() {
    let o = common::zns(&["-d", "emu:small", "top"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("use --once"), "{}", o.stderr);
    let o = common::zns(&["-d", "emu:small", "top", "--once", "--size", "5x5"]);
    assert!(o.stderr.contains("--size 5x5"), "{}", o.stderr);
    let o = common::ok(common::zns(&["-d", "emu:small", "top", "--once", "--interval", "0.1"]));
    assert!(o.stdout.contains("namespace 1: 256 zones  open 0/14"), "{}", o.stdout);
}
