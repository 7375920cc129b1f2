//! Flexible Data Placement through the target: an FDP namespace served in
//! process and reached through znskit's `tcp:` initiator must show the
//! device's own configuration, reclaim unit handles, log pages and
//! features; and the host written from the specification gets the
//! specification's statuses for what the target refuses.

use std::sync::Arc;

use zns_device::{ZoneQueue, ZonedDevice};
use zns_nvmf::{Backend, NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::{Features, ReadWrite};
use zns_spec::fdp::{
    get_log_page, FdpEventType, FdpEventsFeature, FdpEventsLog, FdpFeature, IoManagementReceive,
    IoManagementSend, RuhStatus, FDP_EVENTS_LSP_HOST,
};
use zns_spec::identify::{Cns, IdentifyController, IdentifyNamespace};
use zns_spec::log::LogPageId;
use zns_spec::tcp::Digests;
use zns_spec::{CommandSetId, StatusCode, SubmissionEntry};

mod common;
use common::*;

/// `devices` as the namespaces of a target on loopback.
fn serve(devices: Vec<Arc<dyn ZonedDevice>>) -> NvmfTarget {
    let backends = devices.into_iter().flat_map(Backend::of_device).collect();
    let sub = Subsystem::with_backends(NQN, backends).unwrap();
    NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap()
}

/// The available blocks of each placement handle.
fn available(q: &mut dyn ZoneQueue) -> Vec<u64> {
    q.ruh_status().unwrap().descriptors.iter().map(|d| d.available_blocks).collect()
}

/// Page `lid` of endurance group `endgid` (`lsp` its LSP), 4 KiB of it.
fn page(dev: &dyn ZonedDevice, lid: LogPageId, endgid: u16, lsp: u8) -> Vec<u8> {
    let mut g = get_log_page(lid, endgid, 1024);
    g.lsp = lsp;
    dev.log_page(g).unwrap_or_else(|e| panic!("log page {lid:?}: {e}"))
}

#[test]
fn an_fdp_namespace_is_served_with_the_devices_placement() {
    let dev = zns_device::open("emu:small-fdp").unwrap();
    let t = serve(vec![Arc::clone(&dev)]);
    let remote = zns_device::open(&format!("tcp:{}/{NQN}/1", t.local_addr())).unwrap();
    assert_eq!(remote.info().backend, "tcp");
    assert!(!remote.info().zoned);
    assert_eq!(remote.info().fdp, dev.info().fdp, "the device's configuration, group 1 kept");
    let unit = dev.info().fdp.as_ref().unwrap().reclaim_unit_bytes / 4096;

    // Placed writes land on their handles, as the device itself tells.
    let mut q = remote.queue(4).unwrap();
    let buf = q.alloc(8 * 4096).unwrap();
    q.write_placed(0, &buf, 1).unwrap();
    q.write_placed(64, &buf, 6).unwrap();
    q.write_placed(128, &buf, 6).unwrap();
    let mut want = vec![unit; 8];
    want[1] = unit - 8;
    want[6] = unit - 16;
    assert_eq!(available(q.as_mut()), want);
    let mut local = dev.queue(2).unwrap();
    assert_eq!(available(local.as_mut()), want);
    q.ruh_update(&[6]).unwrap();
    want[6] = unit;
    assert_eq!(available(local.as_mut()), want);
    let e = q.ruh_update(&[8]).unwrap_err();
    assert!(e.is_status(StatusCode::InvalidField), "the device's status: {e}");

    // The logs are the device's own.
    for lid in [
        LogPageId::FdpConfigurations,
        LogPageId::ReclaimUnitHandleUsage,
        LogPageId::FdpStatistics,
        LogPageId::EnduranceGroupInformation,
    ] {
        assert_eq!(page(remote.as_ref(), lid, 1, 0), page(dev.as_ref(), lid, 1, 0), "{lid:?}");
    }
    // Feature 1Dh from the description, 1Eh and the events from the device.
    let dw0 =
        remote.get_features(&FdpFeature { endgid: 1, ..Default::default() }.get_entry(), None);
    assert_eq!(dw0.unwrap(), 1);
    let ev = FdpEventsFeature { nsid: 1, placement_handle: 0, event_types: 1, enable: true };
    remote.set_features(&ev.set_entry(), Some(&[FdpEventType::InvalidPlacementId as u8])).unwrap();
    let mut got = [0u8; 6];
    let get = FdpEventsFeature { event_types: 3, ..ev };
    assert_eq!(remote.get_features(&get.get_entry(), Some(&mut got)).unwrap(), 3);
    assert_eq!(&got[2..4], &[FdpEventType::InvalidPlacementId as u8, 1]);
    // A placement identifier the namespace lacks: handle 0 takes it and
    // the device logs the event.
    q.write_placed(256, &buf, 40).unwrap();
    let host = page(remote.as_ref(), LogPageId::FdpEvents, 1, FDP_EVENTS_LSP_HOST);
    assert_eq!(host, page(dev.as_ref(), LogPageId::FdpEvents, 1, FDP_EVENTS_LSP_HOST));
    let events = FdpEventsLog::from_bytes(&host).unwrap().events;
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].kind(), events[0].pid), (Some(FdpEventType::InvalidPlacementId), 40));
    drop((q, remote));
    assert_eq!(t.stop().transport_errors, 0);
}

/// Get Log Page `lid` of group `lsi`, `dwords` of it, on the admin queue.
fn log_cmd(lid: LogPageId, lsi: u16, dwords: u64) -> SubmissionEntry {
    get_log_page(lid, lsi, dwords).to_entry().unwrap()
}

#[test]
fn identify_logs_and_io_management_get_the_specifications_statuses() {
    let zoned = zns_device::open("emu:small").unwrap();
    let fdp = zns_device::open("emu:small-fdp").unwrap();
    let t = serve(vec![zoned, Arc::clone(&fdp)]);
    let (mut h, cntlid) = admin(t.local_addr(), Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_ne!(c.ctratt & IdentifyController::CTRATT_FDPS, 0);
    assert_ne!(c.ctratt & IdentifyController::CTRATT_ENDURANCE_GROUPS, 0);
    assert_eq!(c.endgidmax, 1);
    let ns = |h: &mut Host, nsid| {
        IdentifyNamespace::from_bytes(&h.identify(Cns::Namespace, nsid, CommandSetId::Nvm)).endgid
    };
    assert_eq!((ns(&mut h, 1), ns(&mut h, 2)), (0, 1));

    // Log pages: the device's; another group, or more than MDTS: Invalid
    // Field in Command, before anything reaches the device.
    let (_, d) = h.ok(log_cmd(LogPageId::FdpStatistics, 1, 16), Dir::In(64));
    assert_eq!(d, page(fdp.as_ref(), LogPageId::FdpStatistics, 1, 0)[..64]);
    let (c, _) = h.cmd(log_cmd(LogPageId::FdpConfigurations, 2, 16), Dir::In(64));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let (c, _) = h.cmd(log_cmd(LogPageId::FdpConfigurations, 1, 1 << 30), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    // An offset inside the page: the device cuts it.
    let mut at = get_log_page(LogPageId::FdpConfigurations, 1, 4);
    at.offset = 16;
    let (_, d) = h.ok(at.to_entry().unwrap(), Dir::In(16));
    assert_eq!(d, page(fdp.as_ref(), LogPageId::FdpConfigurations, 1, 0)[16..32]);
    // Features: 1Dh of another group, 1Eh of a namespace without FDP or
    // none; Set Features 1Dh of the group: its namespace pins it.
    let get1d = |g: u16| FdpFeature { endgid: g, ..Default::default() }.get_entry();
    let (r, _) = h.ok(get1d(1), Dir::None);
    assert_eq!(r & 0xFFFF_FFFF, 1);
    let (c, _) = h.cmd(get1d(3), Dir::None);
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let ev = |nsid| FdpEventsFeature { nsid, placement_handle: 0, event_types: 3, enable: true };
    let (c, _) = h.cmd(ev(1).get_entry(), Dir::In(6));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let (c, _) = h.cmd(ev(9).get_entry(), Dir::In(6));
    assert!(c.status().is(StatusCode::InvalidNamespaceOrFormat), "{:?}", c.status());
    let set1d = FdpFeature { endgid: 1, enabled: true, config_index: 0 }.set_entry();
    let (c, _) = h.cmd(set1d, Dir::None);
    assert!(c.status().is(StatusCode::CommandSequenceError), "{:?}", c.status());
    let mut saved = Features::decode(&set1d);
    saved.save = true;
    let (c, _) = h.cmd(saved.set_entry(), Dir::None);
    assert!(c.status().is(StatusCode::FeatureNotSaveable), "{:?}", c.status());

    // I/O Management: the namespace without FDP says so; other operations
    // and lengths beyond MDTS are invalid fields; the device answers the
    // rest.
    let mut q = io_queue(t.local_addr(), cntlid, 1, Digests::default());
    let (c, _) = q.cmd(IoManagementReceive::ruh_status(1, 16).to_entry().unwrap(), Dir::In(64));
    assert!(c.status().is(StatusCode::FdpDisabled), "{:?}", c.status());
    let (_, d) = q.ok(IoManagementReceive::ruh_status(2, 16).to_entry().unwrap(), Dir::In(64));
    assert_eq!(u16::from_le_bytes([d[14], d[15]]), 8, "NRUHSD");
    let mut other = IoManagementReceive::ruh_status(2, 16);
    other.operation = 2;
    let (c, _) = q.cmd(other.to_entry().unwrap(), Dir::In(64));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let huge = IoManagementReceive::ruh_status(2, 1 << 32).to_entry().unwrap();
    let (c, _) = q.cmd(huge, Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let (c, _) = q.cmd(IoManagementReceive::ruh_status(2, 64).to_entry().unwrap(), Dir::In(64));
    assert!(c.status().is(StatusCode::SglLengthInvalid), "{:?}", c.status());
    let update = IoManagementSend::ruh_update(2, 2).unwrap().to_entry();
    q.ok(update, Dir::Out(&[3, 0, 4, 0]));
    let (c, _) = q.cmd(update, Dir::Out(&[3, 0]));
    assert!(c.status().is(StatusCode::SglLengthInvalid), "{:?}", c.status());
    let mut bad = IoManagementSend::ruh_update(2, 1).unwrap();
    bad.operation = 7;
    let (c, _) = q.cmd(bad.to_entry(), Dir::Out(&[0, 0]));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    // A placed write to the namespace without FDP: the directive is not
    // enabled there.
    let w = ReadWrite::new(1, 0, 1).with_placement(1).write().unwrap();
    let (c, _) = q.cmd(w, Dir::Out(&[0u8; 4096]));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let w = ReadWrite::new(2, 0, 1).with_placement(1).write().unwrap();
    q.ok(w, Dir::Out(&[0u8; 4096]));
    let all = (16 + 8 * 32) / 4;
    let (_, d) = q.ok(IoManagementReceive::ruh_status(2, all).to_entry().unwrap(), Dir::In(272));
    let s = RuhStatus::from_bytes(&d).unwrap();
    let unit = fdp.info().fdp.as_ref().unwrap().reclaim_unit_bytes / 4096;
    let got: Vec<u64> = s.descriptors.iter().map(|d| d.available_blocks).collect();
    assert_eq!(got, [unit, unit - 1, unit, unit, unit, unit, unit, unit]);
    drop((h, q));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn several_fdp_namespaces_are_groups_of_their_own() {
    let a = zns_device::open("emu:small-fdp").unwrap();
    let b = zns_device::open("emu:small-fdp").unwrap();
    // Different traffic, so the two statistics pages differ.
    b.queue(2).unwrap().write_placed(0, &b.alloc(4 * 4096).unwrap(), 2).unwrap();
    let t = serve(vec![Arc::clone(&a), Arc::clone(&b)]);
    let (mut h, cntlid) = admin(t.local_addr(), Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.endgidmax, 2);
    let ns = |h: &mut Host, nsid| {
        IdentifyNamespace::from_bytes(&h.identify(Cns::Namespace, nsid, CommandSetId::Nvm)).endgid
    };
    assert_eq!((ns(&mut h, 1), ns(&mut h, 2)), (1, 2));
    for (lsi, dev) in [(1, &a), (2, &b)] {
        let (_, d) = h.ok(log_cmd(LogPageId::FdpStatistics, lsi, 16), Dir::In(64));
        assert_eq!(d, page(dev.as_ref(), LogPageId::FdpStatistics, 1, 0)[..64], "group {lsi}");
    }
    let (c, _) = h.cmd(log_cmd(LogPageId::FdpStatistics, 3, 16), Dir::In(64));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    // Each namespace's commands reach its own device.
    let mut q = io_queue(t.local_addr(), cntlid, 1, Digests::default());
    let update = IoManagementSend::ruh_update(2, 1).unwrap().to_entry();
    q.ok(update, Dir::Out(&[2, 0]));
    let unit = b.info().fdp.as_ref().unwrap().reclaim_unit_bytes / 4096;
    assert_eq!(available(b.queue(2).unwrap().as_mut())[2], unit);
    drop((h, q));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn a_target_without_fdp_has_none() {
    let t = serve(vec![zns_device::open("emu:small").unwrap()]);
    let (mut h, cntlid) = admin(t.local_addr(), Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.ctratt & IdentifyController::CTRATT_FDPS, 0);
    assert_eq!(c.endgidmax, 0);
    let (c, _) = h.cmd(log_cmd(LogPageId::FdpConfigurations, 1, 16), Dir::In(64));
    assert!(c.status().is(StatusCode::InvalidLogPage), "{:?}", c.status());
    let get = FdpFeature { endgid: 1, ..Default::default() }.get_entry();
    let (c, _) = h.cmd(get, Dir::None);
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    let mut q = io_queue(t.local_addr(), cntlid, 1, Digests::default());
    let (c, _) = q.cmd(IoManagementReceive::ruh_status(1, 16).to_entry().unwrap(), Dir::In(64));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", t.local_addr())).unwrap();
    assert!(remote.info().fdp.is_none());
    drop((h, q, remote));
    assert_eq!(t.stop().transport_errors, 0);
}
