//! The device conformance suite through znskit's NVMe/TCP initiator
//! (`tcp:` URIs) against znskit's target in the same process: the
//! transport, the target's command mapping and the backend together must
//! behave exactly like the emulator reached directly.

#[path = "../../device/tests/conformance/mod.rs"]
mod conformance;

use std::sync::Arc;

use zns_device::ZonedDevice;
use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};

const NQN: &str = "nqn.2026-11.io.znskit:conformance";

fn over_tcp(device: &str, options: &str) {
    over_tcp_with(device, options, TargetConfig::default());
}

/// `dev` served by a target of its own on loopback.
fn serve(dev: Arc<dyn ZonedDevice>, config: TargetConfig) -> NvmfTarget {
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap()
}

/// `device` served, and reached through the `tcp:` initiator.
fn served(device: &str) -> (NvmfTarget, Arc<dyn ZonedDevice>) {
    let target = serve(zns_device::open(device).unwrap(), TargetConfig::default());
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
    (target, remote)
}

fn over_tcp_with(device: &str, options: &str, config: TargetConfig) {
    let target = serve(zns_device::open(device).unwrap(), config);
    let uri = format!("tcp:{}/{NQN}{options}", target.local_addr());
    let remote = zns_device::open(&uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    assert_eq!(remote.info().backend, "tcp");
    conformance::run_all(remote.as_ref());
    drop(remote);
    let stats = target.stop();
    assert_eq!(stats.transport_errors, 0, "{stats:?}");
}

#[test]
fn conformance_over_tcp_tiny() {
    over_tcp("emu:tiny", "");
}

#[test]
fn conformance_over_tcp_small_with_digests() {
    over_tcp("emu:small", ",digest=both");
}

#[test]
fn conformance_over_tcp_with_a_polling_target() {
    let config = TargetConfig { poll: std::time::Duration::from_micros(50), ..Default::default() };
    over_tcp_with("emu:tiny", "", config);
}

#[test]
fn conformance_over_tcp_with_zone_random_write_areas() {
    over_tcp("emu:tiny,zrwa=16/4/2", "");
}

#[test]
fn deep_queues_are_cut_to_what_the_target_takes() {
    // zns characterize asks for 1024 entries; a Connect with more than
    // CAP.MQES + 1 is refused, so the initiator asks for no more.
    let (target, remote) = served("emu:tiny");
    let mut q = remote.queue(1024).unwrap_or_else(|e| panic!("a queue of 1024: {e}"));
    assert!(q.capacity() >= 1 && q.capacity() < 1024, "{}", q.capacity());
    assert_eq!(q.zone(0).unwrap().start, 0);
    drop(q);
    drop(remote);
    target.stop();
}

/// A conventional twin served beside its ZNS twin, reached by NSID through
/// the `tcp:` initiator: a device without zones, I/O anywhere below its
/// size, the twin's statuses, zone commands refused by the target.
#[test]
fn a_conventional_twin_over_tcp_is_a_device_without_zones() {
    use zns_device::{DeviceError, Target, ZoneAction};
    use zns_spec::{ReportFilter, StatusCode};
    let twin = zns_device::open("emu:small-conv").unwrap();
    let local = twin.info().clone();
    let devices = vec![zns_device::open("emu:small").unwrap(), twin];
    let target =
        NvmfTarget::bind("127.0.0.1:0", Subsystem::new(NQN, devices).unwrap(), Default::default())
            .unwrap();
    let base = format!("tcp:{}/{NQN}", target.local_addr());
    // Without an NSID the first zoned namespace is opened.
    let zoned = zns_device::open(&base).unwrap();
    assert!(zoned.info().zoned && zoned.info().nsid == 1);
    drop(zoned);
    let dev = zns_device::open(&format!("{base}/2")).unwrap();
    let i = dev.info().clone();
    assert!(!i.zoned && i.nsid == 2 && !i.capabilities.append);
    assert_eq!((i.zone_count, i.zone_size, i.zone_capacity), (0, 0, 0));
    assert_eq!((i.namespace_blocks, i.block_size), (local.namespace_blocks, local.block_size));
    let mut q = dev.queue(8).unwrap();
    let mut buf = dev.alloc(4 * 4096).unwrap();
    buf.iter_mut().enumerate().for_each(|(j, b)| *b = j as u8 ^ 0xA5);
    let last = i.blocks() - 4;
    q.write(last, &buf).unwrap();
    q.write(7, &buf).unwrap();
    q.flush().unwrap();
    let mut back = dev.alloc(4 * 4096).unwrap();
    q.read(last, &mut back).unwrap();
    assert_eq!(back[..], buf[..]);
    q.write_zeroes(8, 2).unwrap();
    q.read(7, &mut back).unwrap();
    assert_eq!(back[..4096], buf[..4096]);
    assert!(back[4096..3 * 4096].iter().all(|&b| b == 0));
    assert_eq!(back[3 * 4096..], buf[3 * 4096..]);
    let e = q.write(last + 1, &buf).unwrap_err();
    assert_eq!(e.status().and_then(|s| s.code()), Some(StatusCode::LbaOutOfRange), "{e}");
    let e = q.read(i.blocks(), &mut back).unwrap_err();
    assert_eq!(e.status().and_then(|s| s.code()), Some(StatusCode::LbaOutOfRange), "{e}");
    let e = q.zone_action(ZoneAction::Reset, Target::Zone(0)).unwrap_err();
    assert_eq!(e.status().and_then(|s| s.code()), Some(StatusCode::InvalidOpcode), "{e}");
    let e = q.report_zones(0, ReportFilter::All, 10).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e}");
    drop((q, dev));
    assert_eq!(target.stop().transport_errors, 0);
}

#[test]
fn conformance_over_tcp_with_a_polling_initiator() {
    over_tcp("emu:tiny", ",poll_us=50");
}

/// A host's queue depth reaches the device: 32 reads sent at once are
/// served side by side by a timed emulator (on its virtual clock, so the
/// figure does not depend on this machine), not one after another.
#[test]
fn reads_sent_together_are_in_flight_together_on_the_device() {
    use zns_device::{Data, ZoneOp};
    let clock = zns_device::open("emu:zn540,zones=4,media=null").unwrap();
    assert_eq!(clock.clock_name(), "virtual");
    let target = serve(Arc::clone(&clock), TargetConfig::default());
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
    let info = remote.info().clone();
    let mut q = remote.queue(32).unwrap();
    let bs = info.block_size as usize;
    let mut chunk = remote.alloc(64 * bs).unwrap();
    chunk.fill(0x5A);
    for lba in (0..1024).step_by(64) {
        q.execute(&ZoneOp::Write { lba, fua: false, placement: None }, Data::ToDevice(&chunk))
            .unwrap();
    }
    // The same 32 reads one at a time, then all sent together.
    let lbas: Vec<u64> = (0..32).map(|i| i * 31).collect();
    let mut one = remote.alloc(bs).unwrap();
    let t0 = clock.now_ns();
    for &lba in &lbas {
        q.execute(&ZoneOp::Read { lba }, Data::FromDevice(&mut one)).unwrap();
    }
    let serial = clock.now_ns() - t0;
    assert!(serial > 0, "a timed device's reads take time");
    let t1 = clock.now_ns();
    for (i, &lba) in lbas.iter().enumerate() {
        let buf = remote.alloc(bs).unwrap();
        q.submit(ZoneOp::Read { lba }, Some(buf), i as u64).unwrap();
    }
    let mut done = 0;
    q.drain(std::time::Duration::from_secs(30), &mut |c| {
        c.result.unwrap();
        done += 1;
    })
    .unwrap();
    let together = clock.now_ns() - t1;
    assert_eq!(done, 32);
    assert!(together * 3 < serial, "together {together} ns, one at a time {serial} ns");
    drop(q);
    drop(remote);
    target.stop();
}

/// A host that goes away with commands in flight harms nothing: the
/// target waits for the device, drops the answers, and serves the next
/// queue as before.
#[test]
fn a_queue_closed_with_reads_in_flight_leaves_the_target_serving() {
    use zns_device::{Data, ZoneOp};
    let (target, remote) = served("emu:zn540,zones=4,media=null,clock=real");
    let bs = remote.info().block_size as usize;
    for round in 0..3u64 {
        let mut q = remote.queue(32).unwrap();
        for i in 0..32u64 {
            let buf = remote.alloc(bs).unwrap();
            q.submit(ZoneOp::Read { lba: i * 8 + round }, Some(buf), i).unwrap();
        }
        q.ring();
        // Gone before the modelled reads (about 70 µs) are due.
    }
    let mut q = remote.queue(4).unwrap();
    let mut buf = remote.alloc(bs).unwrap();
    q.execute(&ZoneOp::Write { lba: 0, fua: false, placement: None }, Data::ToDevice(&buf))
        .unwrap();
    q.execute(&ZoneOp::Read { lba: 0 }, Data::FromDevice(&mut buf)).unwrap();
    assert_eq!(q.zone(0).unwrap().write_pointer, Some(1));
    drop(q);
    drop(remote);
    let stats = target.stop();
    assert_eq!(stats.transport_errors, 0, "{stats:?}");
}
