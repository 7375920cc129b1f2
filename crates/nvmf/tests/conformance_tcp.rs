//! The device conformance suite through znskit's NVMe/TCP initiator
//! (`tcp:` URIs) against znskit's target in the same process: the
//! transport, the target's command mapping and the backend together must
//! behave exactly like the emulator reached directly.

#[path = "../../device/tests/conformance/mod.rs"]
mod conformance;

use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};

const NQN: &str = "nqn.2026-11.io.znskit:conformance";

fn over_tcp(device: &str, options: &str) {
    over_tcp_with(device, options, TargetConfig::default());
}

fn over_tcp_with(device: &str, options: &str, config: TargetConfig) {
    let dev = zns_device::open(device).unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let target = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
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
    let dev = zns_device::open("emu:tiny").unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let target = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", target.local_addr())).unwrap();
    let mut q = remote.queue(1024).unwrap_or_else(|e| panic!("a queue of 1024: {e}"));
    assert!(q.capacity() >= 1 && q.capacity() < 1024, "{}", q.capacity());
    assert_eq!(q.zone(0).unwrap().start, 0);
    drop(q);
    drop(remote);
    target.stop();
}
