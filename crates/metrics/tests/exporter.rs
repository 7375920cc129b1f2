//! A metered emulated device driven with known commands: its scrape, its
//! zone map and its HTTP endpoint say what happened.

use std::sync::Arc;
use std::time::Duration;

use zns_device::{Target, ZoneAction, ZonedDevice};
use zns_metrics::{client, parse, ExporterBuilder, MeteredDevice, MetricsServer};

fn value(samples: &[parse::Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .map(|s| s.value)
}

#[test]
fn a_scrape_counts_commands_zones_and_statuses() {
    let dev = MeteredDevice::wrap(zns_device::open("emu:small").unwrap());
    let mut b = ExporterBuilder::new();
    b.metered("1", &dev);
    let exporter = Arc::new(b.build());
    let info = dev.info().clone();
    let bs = info.block_size as usize;
    let mut q = dev.queue(8).unwrap();
    let buf = q.alloc(4 * bs).unwrap();
    // Zone 0: three writes of 4 blocks; zone 1 opened; zone 2 full.
    for i in 0..3 {
        q.write(i * 4, &buf).unwrap();
    }
    q.zone_action(ZoneAction::Open, Target::Zone(info.zone_size)).unwrap();
    q.zone_action(ZoneAction::Finish, Target::Zone(2 * info.zone_size)).unwrap();
    // A write past the write pointer: Zone Invalid Write.
    assert!(q.write(100, &buf).is_err());

    let s = parse::parse(&exporter.encode()).unwrap();
    let w = [("namespace", "1"), ("queue", "0"), ("opcode", "write")];
    assert_eq!(value(&s, "zns_commands_total", &w), Some(4.0));
    assert_eq!(value(&s, "zns_bytes_total", &w), Some((16 * bs) as f64));
    assert_eq!(value(&s, "zns_command_latency_seconds_count", &w), Some(4.0));
    let send = [("namespace", "1"), ("opcode", "zone_management_send")];
    assert_eq!(value(&s, "zns_commands_total", &send), Some(2.0));
    let ok = [("queue", "0"), ("status", "Successful Completion")];
    assert_eq!(value(&s, "zns_completions_total", &ok), Some(5.0));
    let bad = [("status", "Zone Invalid Write")];
    assert_eq!(value(&s, "zns_completions_total", &bad), Some(1.0));
    let zones = |state| value(&s, "zns_zones", &[("namespace", "1"), ("state", state)]);
    assert_eq!(zones("implicitly_opened"), Some(1.0));
    assert_eq!(zones("explicitly_opened"), Some(1.0));
    assert_eq!(zones("full"), Some(1.0));
    assert_eq!(zones("empty"), Some((info.zone_count - 3) as f64));
    assert_eq!(value(&s, "zns_open_zones", &[]), Some(2.0));
    let uri = info.uri.as_str();
    let host = value(&s, "zns_host_written_bytes_total", &[("device", uri)]).unwrap();
    assert_eq!(host, (12 * bs) as f64);
    // A zoned namespace programs what the host writes: no amplification.
    assert_eq!(value(&s, "zns_write_amplification", &[("device", uri)]), Some(1.0));

    // The same through HTTP, and the zone map as JSON.
    let server = MetricsServer::start("127.0.0.1:0", Arc::clone(&exporter)).unwrap();
    let base = format!("http://{}", server.local_addr());
    let text = client::get(&base, "/metrics", Duration::from_secs(10)).unwrap();
    let s = parse::parse(&text).unwrap();
    assert_eq!(value(&s, "zns_commands_total", &w), Some(4.0));
    let json = client::get(&base, "/zones", Duration::from_secs(10)).unwrap();
    let maps: Vec<zns_metrics::ZoneMap> = serde_json::from_str(&json).unwrap();
    assert_eq!(maps[0].zones[0].written, 12);
    assert_eq!(maps[0].zones[2].state, "full");
    assert!(client::get(&base, "/other", Duration::from_secs(10)).is_err());
    server.stop();
}

#[test]
fn queue_slots_are_given_back() {
    let dev = MeteredDevice::wrap(zns_device::open("emu:small").unwrap());
    for _ in 0..3 {
        let mut q = dev.queue(4).unwrap();
        q.flush().unwrap();
    }
    let queues = dev.metrics().queues();
    assert_eq!(queues.len(), 1);
    assert_eq!(queues[0].commands(zns_metrics::Opcode::Flush), 3);
}

#[test]
fn submitted_commands_come_back_with_their_tags_and_are_counted() {
    let dev = MeteredDevice::wrap(zns_device::open("emu:small").unwrap());
    let mut q = dev.queue(4).unwrap();
    for tag in [70, 71, 72] {
        let buf = q.alloc(4096).unwrap();
        q.submit(zns_device::ZoneOp::Read { lba: tag }, Some(buf), tag).unwrap();
    }
    // The in-flight table is the queue's depth: a fifth command waits.
    let buf = q.alloc(4096).unwrap();
    q.submit(zns_device::ZoneOp::Read { lba: 0 }, Some(buf), 73).unwrap();
    let extra = q.alloc(4096).unwrap();
    let refused = q.submit(zns_device::ZoneOp::Read { lba: 0 }, Some(extra), 74).unwrap_err();
    assert!(refused.is_queue_full() && refused.buffer.is_some());
    q.ring();
    let mut tags = Vec::new();
    q.drain(Duration::from_secs(10), &mut |c| {
        assert!(c.result.is_ok());
        tags.push(c.tag);
    })
    .unwrap();
    tags.sort();
    assert_eq!(tags, [70, 71, 72, 73]);
    let m = &dev.metrics().queues()[0];
    assert_eq!(m.commands(zns_metrics::Opcode::Read), 4);
    assert_eq!(m.bytes(zns_metrics::Opcode::Read), 4 * 4096);
    assert_eq!(m.status(zns_device::StatusCode::Success), 4);
}
