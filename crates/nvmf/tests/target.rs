//! The NVMe/TCP target against a host written here from the transport
//! specification: initialization, Connect, properties, Identify, features,
//! logs, discovery, I/O with in-capsule data, R2T/H2CData and C2HData,
//! digests, the device's own statuses, and malformed hosts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::{IdentifyCmd, ReadWrite, ZoneAppend, ZoneReceive, ZoneSend};
use zns_spec::event::{AsyncEvent, AEC_ZONE_DESCRIPTOR_CHANGED};
use zns_spec::fabrics::{
    self, connect_status, ConnectCommand, ConnectData, DiscoveryEntry, DiscoveryHeader, PropertySet,
};
use zns_spec::features::FeatureId;
use zns_spec::identify::{
    Cns, IdentifyController, IdentifyNamespace, NamespaceIdDescriptorList, ZnsController,
    ZnsNamespace, IDENTIFY_SIZE,
};
use zns_spec::log::{ChangedZoneList, GetLogPage, LogPageId};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{self, CommonHeader, Digests, PduType, TermReq};
use zns_spec::{
    CommandSetId, ReportFilter, Status, StatusCode, SubmissionEntry, ZoneAttributes, ZoneSendAction,
};

mod common;
use common::*;

#[test]
fn a_host_identifies_the_controller_and_its_zoned_namespace() {
    let t = target("emu:small");
    let (mut h, cntlid) = admin(t.local_addr(), Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.cntlid, cntlid);
    assert_eq!(c.subnqn, NQN);
    assert_eq!(c.cntrltype, IdentifyController::CNTRLTYPE_IO);
    assert_eq!(c.nn, 1);
    assert!(c.sgls & 1 != 0 && c.ioccsz >= 4 && c.iorcsz == 1 && c.icdoff == 0);
    assert!(c.mdts > 0 && c.lpa & 2 != 0);
    let list = h.identify(Cns::ActiveNamespaces, 0, CommandSetId::Nvm);
    assert_eq!(&list[..8], &[1, 0, 0, 0, 0, 0, 0, 0]);
    let descs = NamespaceIdDescriptorList::from_bytes(&h.identify(
        Cns::NamespaceIdDescriptors,
        1,
        CommandSetId::Nvm,
    ))
    .unwrap();
    assert_eq!(descs.command_set(), Some(CommandSetId::Zoned));
    let ns = IdentifyNamespace::from_bytes(&h.identify(Cns::Namespace, 1, CommandSetId::Nvm));
    let info = zns_device::open("emu:small").unwrap().info().clone();
    assert_eq!(ns.nsze, info.blocks());
    assert_eq!(1u32 << ns.lbaf[0].lba_data_size_log2, info.block_size);
    let z = ZnsNamespace::from_bytes(&h.identify(Cns::CsiNamespace, 1, CommandSetId::Zoned));
    assert_eq!(z.lbafe[0].zone_size, info.zone_size);
    assert_eq!(z.max_open, info.max_open);
    let zc = ZnsController::from_bytes(&h.identify(Cns::CsiController, 0, CommandSetId::Zoned));
    assert!(zc.zasl > 0);
    let ind = h.identify(Cns::IoCommandSetIndependentNamespace, 1, CommandSetId::Nvm);
    assert_eq!(ind[14] & 1, 1, "namespace ready");
    // A namespace that does not exist, a CNS that is not offered.
    let (c, _) = h.cmd(IdentifyCmd::namespace(9).to_entry(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidNamespaceOrFormat));
    let (c, _) =
        h.cmd(IdentifyCmd::new(Cns::Namespace, 1).to_entry().with_cns(0x42), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidField));
    // The effects log names Zone Append for the zoned command set.
    let lp = GetLogPage::new(LogPageId::CommandsSupportedAndEffects, 0, 1024);
    let mut lp = lp;
    lp.csi = 2;
    let (_, effects) = h.ok(lp.to_entry().unwrap(), Dir::In(4096));
    assert_eq!(effects[1024 + 4 * 0x7D] & 1, 1);
    // SMART log and keep alive.
    let (_, smart) = h.ok(
        GetLogPage::new(LogPageId::SmartHealth, 0xFFFF_FFFF, 128).to_entry().unwrap(),
        Dir::In(512),
    );
    assert_eq!(smart.len(), 512);
    h.ok(SubmissionEntry::new(0x18, 0), Dir::None);
    drop(h);
    t.stop();
}

trait WithCns {
    fn with_cns(self, cns: u8) -> SubmissionEntry;
}

impl WithCns for SubmissionEntry {
    fn with_cns(mut self, cns: u8) -> SubmissionEntry {
        self.cdw10 = (self.cdw10 & !0xFF) | cns as u32;
        self
    }
}

fn io_round_trip(digests: Digests) {
    let t = target("emu:small");
    let addr = t.local_addr();
    let (_admin, cntlid) = admin(addr, digests);
    let mut q = io_queue(addr, cntlid, 1, digests);
    let info = zns_device::open("emu:small").unwrap().info().clone();
    let bs = info.block_size as usize;
    // In-capsule write, then a 64 KiB write that needs an R2T.
    let small = pattern(bs, 1);
    q.ok(ReadWrite::new(1, 0, 1).write().unwrap(), Dir::Out(&small));
    let big = pattern(16 * bs, 2);
    q.ok(ReadWrite::new(1, 1, 16).write().unwrap(), Dir::Out(&big));
    let (_, back) = q.ok(ReadWrite::new(1, 0, 17).read().unwrap(), Dir::In(17 * bs));
    assert_eq!(&back[..bs], &small[..]);
    assert_eq!(&back[bs..], &big[..]);
    // Zone Append returns where the data landed.
    let (lba, _) =
        q.ok(ZoneAppend::new(1, 0, 2).to_entry().unwrap(), Dir::Out(&pattern(2 * bs, 3)));
    assert_eq!(lba, 17);
    // The device's own status: a write off the write pointer.
    let (c, _) = q.cmd(ReadWrite::new(1, 5, 1).write().unwrap(), Dir::Out(&small));
    assert!(c.status().is(StatusCode::ZoneInvalidWrite), "{:?}", c.status());
    assert!(c.status_field().dnr());
    // Report zones: zone 0's write pointer.
    let rep = ZoneReceive::report(1, 0, 4096, ReportFilter::All);
    let (_, r) = q.ok(rep.to_entry().unwrap(), Dir::In(4096));
    let report = zns_device::parse_report(&r, info.zone_size, None).unwrap();
    assert_eq!(report.descriptors[0].write_pointer, Some(19));
    // Reset, flush, read past the end.
    q.ok(ZoneSend::new(1, 0, ZoneSendAction::Reset).to_entry(), Dir::None);
    q.ok(zns_spec::command::Flush { nsid: 1 }.to_entry(), Dir::None);
    let (c, _) = q.cmd(ReadWrite::new(1, info.blocks(), 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    // A read larger than the host's buffer.
    let (c, _) = q.cmd(ReadWrite::new(1, 0, 2).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::SglLengthInvalid), "{:?}", c.status());
    drop(q);
    let stats = t.stop();
    assert_eq!(stats.transport_errors, 0);
}

#[test]
fn without_sq_flow_control_a_read_ends_with_its_data() {
    let t = target("emu:small");
    let addr = t.local_addr();
    let (_admin, cntlid) = admin(addr, Digests::default());
    let mut q = Host::connect(addr, Digests::default());
    let c = q.fabric_connect_with(1, cntlid, NQN, 0, fabrics::CATTR_DISABLE_SQ_FLOW_CONTROL);
    assert!(c.status().is_success(), "{:?}", c.status());
    assert_eq!(c.sq_head, fabrics::SQHD_NOT_REPORTED, "no SQ head once flow control is off");
    let bs = zns_device::open("emu:small").unwrap().info().block_size as usize;
    let data = pattern(4 * bs, 9);
    let (c, _) = q.cmd(ReadWrite::new(1, 0, 4).write().unwrap(), Dir::Out(&data));
    assert!(c.status().is_success() && c.sq_head == fabrics::SQHD_NOT_REPORTED, "{c:?}");
    for round in 0..3 {
        let (c, back) = q.cmd(ReadWrite::new(1, 0, 4).read().unwrap(), Dir::In(4 * bs));
        assert!(c.status().is_success(), "{:?}", c.status());
        assert_eq!(back, data);
        assert_eq!(q.data_completions, round + 1, "the read ended with its C2HData PDU");
    }
    // A failed read still gets its response capsule, and no stray
    // response of an earlier read is left in the stream.
    let (c, _) = q.cmd(ReadWrite::new(1, 1 << 40, 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    assert_eq!(q.data_completions, 3);
    // A queue that keeps flow control gets responses, with its SQ head.
    let mut plain = io_queue(addr, cntlid, 2, Digests::default());
    let (c, back) = plain.cmd(ReadWrite::new(1, 0, 4).read().unwrap(), Dir::In(4 * bs));
    assert!(c.status().is_success() && c.sq_head != fabrics::SQHD_NOT_REPORTED, "{c:?}");
    assert_eq!((back, plain.data_completions), (data, 0));
    drop((q, plain));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn compare_and_verify_read_the_blocks_of_zoned_and_block_namespaces() {
    let (t, _dev) = zoned_and_ftl();
    let addr = t.local_addr();
    let (_a, cntlid) = admin(addr, Digests::default());
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    for nsid in [1, 2] {
        let data = pattern(8192, nsid as u8);
        q.ok(ReadWrite::new(nsid, 0, 2).write().unwrap(), Dir::Out(&data));
        let compare = |d: &[u8], q: &mut Host| {
            let mut sqe = ReadWrite::new(nsid, 0, 2).write().unwrap();
            sqe.cdw0 = (sqe.cdw0 & !0xFF) | 0x05;
            q.cmd(sqe, Dir::Out(d)).0.status()
        };
        assert!(compare(&data, &mut q).is_success(), "namespace {nsid}");
        let mut other = data.clone();
        other[5000] ^= 1;
        assert!(compare(&other, &mut q).is(StatusCode::CompareFailure), "namespace {nsid}");
        let mut verify = ReadWrite::new(nsid, 0, 2).read().unwrap();
        verify.cdw0 = (verify.cdw0 & !0xFF) | 0x0C;
        assert!(q.cmd(verify, Dir::None).0.status().is_success(), "namespace {nsid}");
        let mut past = ReadWrite::new(nsid, u64::MAX - 1, 1).read().unwrap();
        past.cdw0 = (past.cdw0 & !0xFF) | 0x0C;
        assert!(!q.cmd(past, Dir::None).0.status().is_success(), "namespace {nsid}");
    }
    t.stop();
}

#[test]
fn io_with_in_capsule_data_r2t_and_c2h_data() {
    io_round_trip(Digests::default());
}

#[test]
fn io_with_header_and_data_digests() {
    io_round_trip(Digests { header: true, data: true });
}

#[test]
fn discovery_lists_the_subsystem() {
    let t = target("emu:tiny");
    let mut h = Host::connect(t.local_addr(), Digests::default());
    let c = h.fabric_connect(0, ConnectData::ANY_CONTROLLER, fabrics::DISCOVERY_NQN);
    assert!(c.status().is_success());
    h.ok(PropertySet { offset: 0x14, eight_bytes: false, value: 1 }.to_sqe(), Dir::None);
    let id = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(id.cntrltype, IdentifyController::CNTRLTYPE_DISCOVERY);
    let mut lp = GetLogPage::new(LogPageId::ErrorInformation, 0, 512);
    lp.lid = fabrics::LID_DISCOVERY;
    lp.csi = 0;
    let (_, log) = h.ok(lp.to_entry().unwrap(), Dir::In(2048));
    let head = DiscoveryHeader::from_bytes(log[..1024].try_into().unwrap());
    assert_eq!(head.numrec, 1);
    let e = DiscoveryEntry::from_bytes(log[1024..2048].try_into().unwrap());
    assert_eq!(e.subnqn, NQN);
    assert_eq!(e.trtype, fabrics::TRTYPE_TCP);
    assert_eq!(e.trsvcid, t.local_addr().port().to_string());
    drop(h);
    t.stop();
}

#[test]
fn bad_connects_are_refused_with_the_field_named() {
    let t = target("emu:tiny");
    let addr = t.local_addr();
    let mut h = Host::connect(addr, Digests::default());
    // Commands before Connect.
    let (c, _) = h.cmd(IdentifyCmd::controller().to_entry(), Dir::In(4096));
    assert!(c.status().is(StatusCode::CommandSequenceError));
    let c = h.fabric_connect(0, ConnectData::ANY_CONTROLLER, "nqn.2026-11.io.znskit:nope");
    assert_eq!(c.status(), connect_status::INVALID_PARAMETERS);
    assert_eq!(c.dw0, fabrics::connect_invalid_parameter(256, true));
    // An I/O queue for a controller that does not exist.
    let c = h.fabric_connect(1, 77, NQN);
    assert_eq!(c.status(), connect_status::INVALID_PARAMETERS);
    assert_eq!(c.dw0, fabrics::connect_invalid_parameter(16, true));
    let (_a, cntlid) = admin(addr, Digests::default());
    // Beyond the granted queues, and from another host.
    let mut q = Host::connect(addr, Digests::default());
    let c = q.fabric_connect(9, cntlid, NQN);
    assert_eq!(c.status(), connect_status::INVALID_PARAMETERS);
    let sqe = ConnectCommand { recfmt: 0, qid: 1, sqsize: 31, cattr: 0, kato_ms: 0 }.to_sqe();
    let other =
        ConnectData { host_id: [1; 16], cntlid, subnqn: NQN.into(), hostnqn: "nqn.x:other".into() };
    let (c, _) = q.cmd(sqe, Dir::Out(&other.to_bytes()));
    assert_eq!(c.status(), connect_status::INVALID_HOST);
    drop((h, q));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn transport_errors_end_only_their_connection() {
    let t = target("emu:tiny");
    let addr = t.local_addr();
    let (mut a, cntlid) = admin(addr, Digests::default());
    let digests = Digests { header: true, data: true };
    let mut bad = io_queue(addr, cntlid, 1, digests);
    // A write whose data digest is wrong fails alone, with Transient
    // Transport Error; the queue goes on.
    let data = pattern(4096, 9);
    let c = send_damaged_write(&mut bad, 7, &data, |h| h, |d| d ^ 1);
    assert!(c.status().is(StatusCode::TransientTransportError), "{:?}", c.status());
    assert_eq!(c.cid, 7);
    bad.ok(ReadWrite::new(1, 0, 1).write().unwrap(), Dir::Out(&data));
    let (_, back) = bad.ok(ReadWrite::new(1, 0, 1).read().unwrap(), Dir::In(4096));
    assert_eq!(back, data, "the damaged write wrote nothing; the good one did");
    // A header digest error is fatal: the connection is terminated.
    bad.s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let _ = send_damaged_write(&mut bad, 8, &data, |h| h ^ 1, |d| d);
    let mut rest = Vec::new();
    let _ = bad.s.read_to_end(&mut rest);
    assert_eq!(rest[0], PduType::C2hTermReq.raw());
    let term = TermReq::from_bytes(rest[8..24].try_into().unwrap());
    assert_eq!(term.fes, tcp::FatalError::HeaderDigest.raw());
    // Garbage instead of an ICReq.
    let mut g = TcpStream::connect(addr).unwrap();
    g.write_all(&[0xEE; 128]).unwrap();
    let mut b = Vec::new();
    g.read_to_end(&mut b).unwrap();
    assert_eq!(b[0], PduType::C2hTermReq.raw());
    // The admin queue goes on.
    let id = IdentifyController::from_bytes(&a.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(id.cntlid, cntlid);
    drop(a);
    assert_eq!(t.stop().transport_errors, 2);
}

/// Sends a 1-block write at LBA 0 with in-capsule `data` and digests
/// passed through `hd` and `dd`; returns its response (when the target
/// sends one: a fatal error ends the connection instead).
fn send_damaged_write(
    q: &mut Host,
    cid: u16,
    data: &[u8],
    hd: impl Fn(u32) -> u32,
    dd: impl Fn(u32) -> u32,
) -> zns_spec::CompletionEntry {
    let mut sqe = ReadWrite::new(1, 0, 1).write().unwrap();
    sqe.set_cid(cid);
    SglDescriptor::in_capsule(0, data.len() as u32).store_in(&mut sqe);
    let ch = CommonHeader::new(PduType::CapsuleCmd, q.digests, data.len(), 0);
    let mut h = ch.to_bytes().to_vec();
    h.extend_from_slice(&sqe.to_bytes());
    let mut wire = h.clone();
    wire.extend_from_slice(&hd(tcp::digest(&h)).to_le_bytes());
    wire.extend_from_slice(data);
    wire.extend_from_slice(&dd(tcp::digest(data)).to_le_bytes());
    q.s.write_all(&wire).unwrap();
    if hd(0) != 0 {
        return zns_spec::CompletionEntry::from_bytes(&[0; 16]);
    }
    q.response()
}

#[test]
fn hosts_outside_the_allow_list_are_refused() {
    let dev = zns_device::open("emu:tiny").unwrap();
    let sub =
        Subsystem::new(NQN, vec![dev]).unwrap().with_allowed_hosts(vec!["nqn.x:other".into()]);
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let mut h = Host::connect(t.local_addr(), Digests::default());
    let c = h.fabric_connect(0, ConnectData::ANY_CONTROLLER, NQN);
    assert_eq!(c.status(), connect_status::INVALID_HOST);
    // Its discovery log lists nothing.
    let mut d = Host::connect(t.local_addr(), Digests::default());
    assert!(d
        .fabric_connect(0, ConnectData::ANY_CONTROLLER, fabrics::DISCOVERY_NQN)
        .status()
        .is_success());
    d.ok(PropertySet { offset: 0x14, eight_bytes: false, value: 1 }.to_sqe(), Dir::None);
    let mut lp = GetLogPage::new(LogPageId::ErrorInformation, 0, 256);
    lp.lid = fabrics::LID_DISCOVERY;
    lp.csi = 0;
    let (_, log) = d.ok(lp.to_entry().unwrap(), Dir::In(1024));
    assert_eq!(DiscoveryHeader::from_bytes(log[..1024].try_into().unwrap()).numrec, 0);
    drop((h, d));
    t.stop();
}

#[test]
fn subsystems_are_validated() {
    let dev = zns_device::open("emu:tiny").unwrap();
    let e = Subsystem::new("not-an-nqn", vec![dev.clone()]).unwrap_err();
    assert!(e.to_string().contains("nqn."), "{e}");
    let e = Subsystem::new(fabrics::DISCOVERY_NQN, vec![dev]).unwrap_err();
    assert!(e.to_string().contains("discovery"), "{e}");
    let e = Subsystem::new(NQN, Vec::new()).unwrap_err();
    assert!(e.to_string().contains("at least one"), "{e}");
    let _ = Status::SUCCESS;
}

/// A subsystem of a zoned namespace (1) and the FTL on another device as
/// a conventional one (2); returns the target and the FTL's device.
fn zoned_and_ftl() -> (NvmfTarget, std::sync::Arc<dyn zns_device::ZonedDevice>) {
    use std::sync::Arc;
    use zns_ftl::{BlockDevice, Ftl, FtlConfig};
    let zoned = zns_device::open("emu:small").unwrap();
    let under = zns_device::open("emu:small,zones=16").unwrap();
    let ftl = Arc::new(Ftl::format(Arc::clone(&under), FtlConfig::default()).unwrap());
    let backends = vec![
        zns_nvmf::Backend::Zoned(zoned),
        zns_nvmf::Backend::Block {
            device: ftl as Arc<dyn BlockDevice>,
            name: "FTL".into(),
            media: Some(Arc::clone(&under)),
        },
    ];
    let sub = Subsystem::with_backends(NQN, backends).unwrap();
    (NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap(), under)
}

/// The OCP extended SMART log (LID C0h) through the `tcp:` initiator: the
/// sum of what the subsystem's devices count, the FTL's device included.
#[test]
fn the_ocp_extended_log_adds_up_the_media_of_every_device() {
    use std::sync::Arc;
    use zns_device::{Data, ZoneOp, ZonedDevice};
    use zns_ftl::{BlockDevice, Ftl, FtlConfig};
    use zns_nvmf::Backend;
    use zns_spec::log::OcpSmartLog;
    let zoned = zns_device::open("emu:small").unwrap();
    let twin = zns_device::open("emu:small-conv").unwrap();
    let under = zns_device::open("emu:small,zones=16").unwrap();
    let ftl = Arc::new(Ftl::format(Arc::clone(&under), FtlConfig::default()).unwrap());
    let mut backends = Backend::of_device(Arc::clone(&zoned));
    backends.extend(Backend::of_device(Arc::clone(&twin)));
    let block = Arc::clone(&ftl) as Arc<dyn BlockDevice>;
    backends.push(Backend::Block {
        device: block,
        name: "FTL".into(),
        media: Some(Arc::clone(ftl.device())),
    });
    let sub = Subsystem::with_backends(NQN, backends).unwrap();
    assert_eq!(sub.media_devices().len(), 3);
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", t.local_addr())).unwrap();
    let bs = remote.info().block_size as usize;
    // 16 blocks to the zoned namespace over the network, 8 to the twin
    // and 8 to the FTL in this process.
    let mut q = remote.queue(4).unwrap();
    let mut data = remote.alloc(16 * bs).unwrap();
    data.fill(0x5A);
    q.execute(&ZoneOp::Write { lba: 0, fua: false, placement: None }, Data::ToDevice(&data))
        .unwrap();
    let mut tq = twin.queue(4).unwrap();
    let mut tdata = twin.alloc(8 * bs).unwrap();
    tdata.fill(0x6B);
    tq.execute(&ZoneOp::Write { lba: 100, fua: false, placement: None }, Data::ToDevice(&tdata))
        .unwrap();
    ftl.write(0, &vec![0x7C; 8 * bs]).unwrap();
    ftl.flush().unwrap();
    let request = GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128);
    let page = |d: &Arc<dyn ZonedDevice>| {
        let b = d.log_page(request).unwrap();
        OcpSmartLog::from_bytes(b.as_slice().try_into().unwrap())
    };
    let (z, c) = (page(&zoned), page(&twin));
    let b = bs as u128;
    assert_eq!(z.media_bytes_written, 16 * b);
    assert_eq!(c.media_bytes_written, 8 * b);
    // The FTL writes in the background too: its device's count is read
    // on either side of the target's.
    let f0 = page(&under);
    let total = page(&remote);
    let f1 = page(&under);
    assert!(f0.media_bytes_written >= 8 * b, "the FTL's data and its metadata");
    let sum =
        |f: &OcpSmartLog| z.media_bytes_written + c.media_bytes_written + f.media_bytes_written;
    assert!(sum(&f0) <= total.media_bytes_written && total.media_bytes_written <= sum(&f1));
    assert!(total.media_bytes_read >= z.media_bytes_read + c.media_bytes_read);
    assert!(total.guid_matches() && total.version == OcpSmartLog::VERSION);
    // The page is the controller's: a namespace is Invalid Field.
    let e = remote.log_page(GetLogPage { nsid: 1, ..request }).unwrap_err();
    assert!(e.is_status(StatusCode::InvalidField), "{e}");
    drop((q, remote));
    assert_eq!(t.stop().transport_errors, 0);

    // A block device of its own has no media to count.
    let memory = Arc::new(zns_ftl::MemoryBlockDevice::new(4096, 64)) as Arc<dyn BlockDevice>;
    let sub = Subsystem::with_backends(
        NQN,
        vec![Backend::Block { device: memory, name: "RAM".into(), media: None }],
    )
    .unwrap();
    assert!(sub.media_devices().is_empty());
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let (mut h, _) = admin(t.local_addr(), Digests::default());
    let (c, _) = h.cmd(request.to_entry().unwrap(), Dir::In(512));
    assert!(c.status().is(StatusCode::InvalidLogPage), "{:?}", c.status());
    drop(h);
    t.stop();
}

/// A device standing on another's media, as an eZNS tenant stands on its
/// base: every command goes to the base.
#[derive(Debug)]
struct OnBase(std::sync::Arc<dyn zns_device::ZonedDevice>);

impl zns_device::ZonedDevice for OnBase {
    fn info(&self) -> &zns_device::DeviceInfo {
        self.0.info()
    }

    fn queue(&self, depth: usize) -> zns_device::Result<Box<dyn zns_device::ZoneQueue>> {
        self.0.queue(depth)
    }

    fn alloc(&self, len: usize) -> zns_device::Result<zns_device::IoBuffer> {
        self.0.alloc(len)
    }

    fn media_device(&self) -> Option<std::sync::Arc<dyn zns_device::ZonedDevice>> {
        Some(std::sync::Arc::clone(&self.0))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Two namespaces on one base device (tenants of one drive): the OCP
/// extended SMART log counts the base's media once, not once per
/// namespace.
#[test]
fn the_ocp_extended_log_counts_a_shared_base_once() {
    use std::sync::Arc;
    use zns_device::{Data, ZoneOp, ZonedDevice};
    use zns_nvmf::Backend;
    use zns_spec::log::OcpSmartLog;
    let base = zns_device::open("emu:small").unwrap();
    let on = |b: &Arc<dyn ZonedDevice>| Arc::new(OnBase(Arc::clone(b))) as Arc<dyn ZonedDevice>;
    let mut backends = Backend::of_device(on(&base));
    backends.extend(Backend::of_device(on(&base)));
    let sub = Subsystem::with_backends(NQN, backends).unwrap();
    assert_eq!(sub.namespaces().len(), 2);
    assert_eq!(sub.media_devices().len(), 1, "one base under both");
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let bs = base.info().block_size as usize;
    let zone = base.info().zone_size;
    for (ns, lba, blocks) in [(1, 0, 16), (2, zone, 8)] {
        let remote = zns_device::open(&format!("tcp:{}/{NQN}/{ns}", t.local_addr())).unwrap();
        let mut q = remote.queue(4).unwrap();
        let mut data = remote.alloc(blocks * bs).unwrap();
        data.fill(0x5A);
        let write = ZoneOp::Write { lba, fua: false, placement: None };
        q.execute(&write, Data::ToDevice(&data)).unwrap();
    }
    let request = GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128);
    let remote = zns_device::open(&format!("tcp:{}/{NQN}", t.local_addr())).unwrap();
    let page = |d: &Arc<dyn ZonedDevice>| {
        let b = d.log_page(request).unwrap();
        OcpSmartLog::from_bytes(b.as_slice().try_into().unwrap())
    };
    let (total, own) = (page(&remote), page(&base));
    assert_eq!(own.media_bytes_written, 24 * bs as u128);
    assert_eq!(total.media_bytes_written, own.media_bytes_written, "counted once");
    drop(remote);
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn the_ftl_is_a_conventional_namespace_beside_the_zoned_one() {
    let (t, _) = zoned_and_ftl();
    let (mut h, _) = admin(t.local_addr(), Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.nn, 2);
    assert!(c.oncs.has(zns_spec::identify::Oncs::DATASET_MANAGEMENT));
    assert!(c.oncs.has(zns_spec::identify::Oncs::WRITE_ZEROES));
    assert!(c.vwc & IdentifyController::VWC_PRESENT != 0, "the FTL caches until a flush");
    let descs = NamespaceIdDescriptorList::from_bytes(&h.identify(
        Cns::NamespaceIdDescriptors,
        2,
        CommandSetId::Nvm,
    ))
    .unwrap();
    assert_eq!(descs.command_set(), Some(CommandSetId::Nvm));
    let raw = h.identify(Cns::Namespace, 2, CommandSetId::Nvm);
    assert_eq!(raw[33] & 0b111, 1, "DLFEAT: deallocated blocks read as zeroes");
    assert!(IdentifyNamespace::from_bytes(&raw).nsze > 0);
    // Each command set's own list; no ZNS data for the NVM namespace.
    let zl = h.identify(Cns::CsiActiveNamespaces, 0, CommandSetId::Zoned);
    assert_eq!(&zl[..8], &[1, 0, 0, 0, 0, 0, 0, 0]);
    let nl = h.identify(Cns::CsiActiveNamespaces, 0, CommandSetId::Nvm);
    assert_eq!(&nl[..8], &[2, 0, 0, 0, 0, 0, 0, 0]);
    let mut zc = IdentifyCmd::new(Cns::CsiNamespace, 2);
    zc.csi = CommandSetId::Zoned as u8;
    let (c, _) = h.cmd(zc.to_entry(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidIoCommandSet), "{:?}", c.status());
    // No Changed Zone List for a namespace without zones.
    let lp = GetLogPage::new(LogPageId::ChangedZoneList, 2, 1024);
    let (c, _) = h.cmd(lp.to_entry().unwrap(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    drop(h);
    t.stop();
}

#[test]
fn block_io_reaches_the_ftl_with_its_statuses() {
    use zns_spec::command::{DatasetManagement, DsmRange, WriteZeroes};
    let (t, under) = zoned_and_ftl();
    let addr = t.local_addr();
    let (_admin, cntlid) = admin(addr, Digests::default());
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let bs = 4096usize;
    // Random writes anywhere (no write pointer), in the capsule and by R2T.
    let a: Vec<u8> = (0..4u8).flat_map(|i| pattern(bs, 60 + i)).collect();
    q.ok(ReadWrite::new(2, 100, 2).write().unwrap(), Dir::Out(&a[..2 * bs]));
    let mut fua = ReadWrite::new(2, 102, 2);
    fua.fua = true;
    q.ok(fua.write().unwrap(), Dir::Out(&a[2 * bs..]));
    let big: Vec<u8> = (0..16u8).flat_map(|i| pattern(bs, i)).collect();
    q.ok(ReadWrite::new(2, 7, 16).write().unwrap(), Dir::Out(&big));
    let (_, back) = q.ok(ReadWrite::new(2, 100, 4).read().unwrap(), Dir::In(4 * bs));
    assert_eq!(back, a);
    let (_, back) = q.ok(ReadWrite::new(2, 7, 16).read().unwrap(), Dir::In(16 * bs));
    assert_eq!(back, big);
    // Deallocate two blocks, zero one without deallocating.
    let ranges = DsmRange { attributes: 0, blocks: 2, slba: 100 }.to_bytes();
    q.ok(DatasetManagement::deallocate(2, 1).to_entry().unwrap(), Dir::Out(&ranges));
    q.ok(WriteZeroes::new(2, 103, 1).to_entry().unwrap(), Dir::None);
    let (_, back) = q.ok(ReadWrite::new(2, 100, 4).read().unwrap(), Dir::In(4 * bs));
    assert!(back[..2 * bs].iter().all(|&b| b == 0));
    assert_eq!(&back[2 * bs..3 * bs], &a[2 * bs..3 * bs]);
    assert!(back[3 * bs..].iter().all(|&b| b == 0));
    q.ok(zns_spec::command::Flush { nsid: 2 }.to_entry(), Dir::None);
    q.ok(zns_spec::command::Flush { nsid: 0xFFFF_FFFF }.to_entry(), Dir::None);
    // Bad input: past the end, a range past the end (nothing changes),
    // zone commands on a conventional namespace.
    let raw = IdentifyNamespace::from_bytes(&identify_namespace_2(addr));
    let (c, _) = q.cmd(ReadWrite::new(2, raw.nsze, 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let two: Vec<u8> = [
        DsmRange { attributes: 0, blocks: 1, slba: 7 }.to_bytes(),
        DsmRange { attributes: 0, blocks: 1, slba: raw.nsze }.to_bytes(),
    ]
    .concat();
    let (c, _) = q.cmd(DatasetManagement::deallocate(2, 2).to_entry().unwrap(), Dir::Out(&two));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (_, back) = q.ok(ReadWrite::new(2, 7, 1).read().unwrap(), Dir::In(bs));
    assert_eq!(back, big[..bs], "a refused deallocation changed nothing");
    // Copy: two source ranges to one destination.
    let src: Vec<u8> = [
        zns_spec::copy::SourceRangeFormat0 { slba: 8, blocks: 2, ..Default::default() }
            .to_bytes()
            .unwrap(),
        zns_spec::copy::SourceRangeFormat0 { slba: 20, blocks: 1, ..Default::default() }
            .to_bytes()
            .unwrap(),
    ]
    .concat();
    let cp = zns_spec::command::CopyCmd::new(2, 500, 2);
    q.ok(cp.to_entry().unwrap(), Dir::Out(&src));
    let (_, back) = q.ok(ReadWrite::new(2, 500, 3).read().unwrap(), Dir::In(3 * bs));
    assert_eq!(&back[..2 * bs], &big[bs..3 * bs]);
    assert_eq!(&back[2 * bs..], &big[13 * bs..14 * bs]);
    let (c, _) = q.cmd(ZoneAppend::new(2, 0, 1).to_entry().unwrap(), Dir::Out(&a[..bs]));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let (c, _) = q.cmd(ZoneSend::new(2, 0, ZoneSendAction::Reset).to_entry(), Dir::None);
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    // A block damaged on the media: Unrecovered Read Error, as a drive says.
    let media = std::sync::Arc::clone(under.emulator().unwrap().namespaces()[0].media());
    let want = &big[3 * bs..4 * bs];
    let mut block = vec![0u8; bs];
    let lba = (0..16u64 * 1024)
        .find(|&l| {
            media.read(l, &mut block).unwrap();
            block == want
        })
        .expect("the block is on the media");
    block[9] ^= 4;
    media.write(lba, &block).unwrap();
    let (c, _) = q.cmd(ReadWrite::new(2, 10, 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::UnrecoveredReadError), "{:?}", c.status());
    let (_, back) = q.ok(ReadWrite::new(2, 11, 1).read().unwrap(), Dir::In(bs));
    assert_eq!(back, big[4 * bs..5 * bs]);
    drop(q);
    assert_eq!(t.stop().transport_errors, 0);
}

/// Identify Namespace 2 on a fresh admin queue.
fn identify_namespace_2(addr: SocketAddr) -> Box<[u8; IDENTIFY_SIZE]> {
    let (mut h, _) = admin(addr, Digests::default());
    h.identify(Cns::Namespace, 2, CommandSetId::Nvm)
}

/// Get Log Page Changed Zone List of `nsid`, with Retain Asynchronous
/// Event as given.
fn changed_zones(h: &mut Host, nsid: u32, rae: bool) -> ChangedZoneList {
    let mut lp = GetLogPage::new(LogPageId::ChangedZoneList, nsid, 1024);
    lp.rae = rae;
    let (_, page) = h.ok(lp.to_entry().unwrap(), Dir::In(4096));
    ChangedZoneList::from_bytes(page[..].try_into().unwrap())
}

fn set_async_event_config(h: &mut Host, value: u32) {
    let f = zns_spec::command::Features::set(FeatureId::AsyncEventConfiguration, value, false);
    h.ok(f.set_entry(), Dir::None);
}

/// Keep Alive; its response must be the next PDU (no event came first).
fn quiet(h: &mut Host) {
    let cid = h.submit(SubmissionEntry::new(0x18, 0));
    let c = h.response();
    assert_eq!(c.cid, cid, "an Asynchronous Event Request completed: {c:?}");
}

#[test]
fn zone_changes_reach_hosts_as_events_and_changed_zone_lists() {
    let dev = zns_device::open("emu:small").unwrap();
    let zones = || dev.emulator().unwrap().namespaces()[0].zones().unwrap();
    let zs = dev.info().zone_size;
    // A change before the target serves is no controller's.
    zones().set_offline(9).unwrap();
    let sub = Subsystem::new(NQN, vec![dev.clone()]).unwrap();
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let addr = t.local_addr();
    let (mut h, cntlid) = admin(addr, Digests::default());
    let (mut other, _) = admin(addr, Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_ne!(c.oaes & AEC_ZONE_DESCRIPTOR_CHANGED, 0, "OAES: Zone Descriptor Changed");
    assert_eq!(changed_zones(&mut h, 1, false), ChangedZoneList::default());
    // Notices disabled (as the Linux host leaves them): the zone is
    // listed, the held request stays held.
    let aer = h.submit(SubmissionEntry::new(0x0C, 0));
    zones().set_offline(2).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    quiet(&mut h);
    assert_eq!(changed_zones(&mut h, 1, true).zones, [2 * zs]);
    // Enabled: the next change completes the held request at once.
    set_async_event_config(&mut h, AEC_ZONE_DESCRIPTOR_CHANGED);
    let f = zns_spec::command::Features::get(
        FeatureId::AsyncEventConfiguration,
        zns_spec::features::FeatureSelect::Current,
    );
    assert_eq!(h.ok(f.get_entry(), Dir::None).0 as u32, AEC_ZONE_DESCRIPTOR_CHANGED);
    zones().set_read_only(1).unwrap();
    let c = h.response();
    assert_eq!(c.cid, aer);
    assert!(c.status().is_success());
    assert_eq!(AsyncEvent::from_result(c.result_u64()), AsyncEvent::zone_descriptor_changed(1));
    assert_eq!(c.result_u64(), 0x0000_0001_00BF_EF02);
    // Masked until the log is read with RAE cleared: listed, no event.
    let aer = h.submit(SubmissionEntry::new(0x0C, 0));
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    q.ok(ReadWrite::new(1, 3 * zs, 1).write().unwrap(), Dir::Out(&pattern(4096, 1)));
    zones().finish_by_controller(3).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    quiet(&mut h);
    assert_eq!(changed_zones(&mut h, 1, true).zones, [2 * zs, zs, 3 * zs]);
    quiet(&mut h);
    assert_eq!(changed_zones(&mut h, 1, false).zones, [2 * zs, zs, 3 * zs]);
    assert_eq!(changed_zones(&mut h, 1, false), ChangedZoneList::default());
    // Re-armed: the next change completes the request held meanwhile.
    zones().set_reset_recommended(3).unwrap();
    let c = h.response();
    assert_eq!((c.cid, c.result_u64()), (aer, 0x0000_0001_00BF_EF02));
    assert_eq!(changed_zones(&mut h, 1, false).zones, [3 * zs]);
    // Zone 3 is Full with Zone Finished by Controller and Reset Zone
    // Recommended, as the host's report says.
    let rep = ZoneReceive::report(1, 3 * zs, 4096, ReportFilter::All);
    let (_, r) = q.ok(rep.to_entry().unwrap(), Dir::In(4096));
    let report = zns_device::parse_report(&r, zs, None).unwrap();
    let z = &report.descriptors[0];
    assert_eq!(z.state, zns_spec::ZoneState::Full);
    assert!(z.attributes.has(ZoneAttributes::FINISHED_BY_CONTROLLER));
    assert!(z.attributes.has(ZoneAttributes::RESET_RECOMMENDED));
    // The other host saw every change since it connected, in its own list.
    assert_eq!(changed_zones(&mut other, 1, false).zones, [2 * zs, zs, 3 * zs]);
    // An event that came with no request held waits for the next one.
    zones().set_offline(4).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let aer = h.submit(SubmissionEntry::new(0x0C, 0));
    let c = h.response();
    assert_eq!((c.cid, AsyncEvent::from_result(c.result_u64()).nsid), (aer, 1));
    // No such namespace; the command set must be ZNS.
    let (c, _) = h.cmd(
        GetLogPage::new(LogPageId::ChangedZoneList, 7, 1024).to_entry().unwrap(),
        Dir::In(4096),
    );
    assert!(c.status().is(StatusCode::InvalidNamespaceOrFormat), "{:?}", c.status());
    let mut lp = GetLogPage::new(LogPageId::ChangedZoneList, 1, 1024);
    lp.csi = 0;
    let (c, _) = h.cmd(lp.to_entry().unwrap(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidLogPage), "{:?}", c.status());
    drop((h, other, q));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn a_devices_conventional_namespace_is_a_namespace_of_the_subsystem() {
    use zns_spec::command::{DatasetManagement, DsmRange, WriteZeroes};
    let t = target("emu:tiny");
    let addr = t.local_addr();
    let (mut h, cntlid) = admin(addr, Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.nn, 2);
    assert!(c.oncs.has(zns_spec::identify::Oncs::DATASET_MANAGEMENT));
    let list = h.identify(Cns::ActiveNamespaces, 0, CommandSetId::Nvm);
    assert_eq!(&list[..12], &[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
    let nl = h.identify(Cns::CsiActiveNamespaces, 0, CommandSetId::Nvm);
    assert_eq!(&nl[..8], &[2, 0, 0, 0, 0, 0, 0, 0]);
    let descs = NamespaceIdDescriptorList::from_bytes(&h.identify(
        Cns::NamespaceIdDescriptors,
        2,
        CommandSetId::Nvm,
    ))
    .unwrap();
    assert_eq!(descs.command_set(), Some(CommandSetId::Nvm));
    // The emulator's own namespace: its size, block size and Copy limits.
    let dev = zns_device::open("emu:tiny").unwrap();
    let conv = dev.conventional().unwrap().clone();
    let ns = IdentifyNamespace::from_bytes(&h.identify(Cns::Namespace, 2, CommandSetId::Nvm));
    assert_eq!(ns.nsze, conv.conventional.unwrap().blocks);
    assert_eq!(1u32 << ns.lbaf[0].lba_data_size_log2, conv.block_size);
    let copy = conv.capabilities.copy.unwrap();
    assert_eq!((ns.mcl, ns.msrc as u32 + 1), (copy.max_blocks, copy.max_ranges));
    let mut zc = IdentifyCmd::new(Cns::CsiNamespace, 2);
    zc.csi = CommandSetId::Zoned as u8;
    let (c, _) = h.cmd(zc.to_entry(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidIoCommandSet), "{:?}", c.status());

    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let bs = conv.block_size as usize;
    let blocks = ns.nsze;
    // Random writes anywhere, in the capsule and by R2T; the zoned
    // namespace beside it is untouched.
    let a = pattern(2 * bs, 11);
    q.ok(ReadWrite::new(2, 700, 2).write().unwrap(), Dir::Out(&a));
    let big = pattern(16 * bs, 12);
    q.ok(ReadWrite::new(2, 3, 16).write().unwrap(), Dir::Out(&big));
    let (_, back) = q.ok(ReadWrite::new(2, 700, 2).read().unwrap(), Dir::In(2 * bs));
    assert_eq!(back, a);
    let (_, back) = q.ok(ReadWrite::new(2, 3, 16).read().unwrap(), Dir::In(16 * bs));
    assert_eq!(back, big);
    let rep = ZoneReceive::report(1, 0, 4096, ReportFilter::All);
    let (_, r) = q.ok(rep.to_entry().unwrap(), Dir::In(4096));
    let zs = zns_device::open("emu:tiny").unwrap().info().zone_size;
    let report = zns_device::parse_report(&r, zs, None).unwrap();
    assert_eq!(report.descriptors[0].write_pointer, Some(0));
    // Copy, Write Zeroes, deallocation (as zeroes), flush.
    let src = zns_spec::copy::SourceRangeFormat0 { slba: 700, blocks: 2, ..Default::default() }
        .to_bytes()
        .unwrap();
    q.ok(zns_spec::command::CopyCmd::new(2, 100, 1).to_entry().unwrap(), Dir::Out(&src));
    let (_, back) = q.ok(ReadWrite::new(2, 100, 2).read().unwrap(), Dir::In(2 * bs));
    assert_eq!(back, a);
    q.ok(WriteZeroes::new(2, 100, 1).to_entry().unwrap(), Dir::None);
    let ranges = DsmRange { attributes: 0, blocks: 4, slba: 3 }.to_bytes();
    q.ok(DatasetManagement::deallocate(2, 1).to_entry().unwrap(), Dir::Out(&ranges));
    let (_, back) = q.ok(ReadWrite::new(2, 3, 5).read().unwrap(), Dir::In(5 * bs));
    assert!(back[..4 * bs].iter().all(|&b| b == 0));
    assert_eq!(&back[4 * bs..], &big[4 * bs..5 * bs]);
    let (_, back) = q.ok(ReadWrite::new(2, 100, 2).read().unwrap(), Dir::In(2 * bs));
    assert!(back[..bs].iter().all(|&b| b == 0));
    assert_eq!(&back[bs..], &a[bs..]);
    q.ok(zns_spec::command::Flush { nsid: 2 }.to_entry(), Dir::None);
    q.ok(zns_spec::command::Flush { nsid: 0xFFFF_FFFF }.to_entry(), Dir::None);
    // The device's statuses; no zone commands on an NVM namespace; a
    // refused deallocation changes nothing.
    let (c, _) = q.cmd(ReadWrite::new(2, blocks, 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (c, _) = q.cmd(ReadWrite::new(2, blocks - 1, 2).write().unwrap(), Dir::Out(&a));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let two: Vec<u8> = [
        DsmRange { attributes: 0, blocks: 1, slba: 8 }.to_bytes(),
        DsmRange { attributes: 0, blocks: 1, slba: blocks }.to_bytes(),
    ]
    .concat();
    let (c, _) = q.cmd(DatasetManagement::deallocate(2, 2).to_entry().unwrap(), Dir::Out(&two));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (_, back) = q.ok(ReadWrite::new(2, 8, 1).read().unwrap(), Dir::In(bs));
    assert_eq!(back, big[5 * bs..6 * bs]);
    let (c, _) = q.cmd(ZoneAppend::new(2, 0, 1).to_entry().unwrap(), Dir::Out(&a[..bs]));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let (c, _) = q.cmd(ZoneSend::new(2, 0, ZoneSendAction::Reset).to_entry(), Dir::None);
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let (c, _) = q
        .cmd(ZoneReceive::report(2, 0, 4096, ReportFilter::All).to_entry().unwrap(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    // Dataset Management stays an NVM command: not on the zoned namespace.
    let (c, _) = q.cmd(DatasetManagement::deallocate(1, 1).to_entry().unwrap(), Dir::Out(&ranges));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    drop((h, q));
    assert_eq!(t.stop().transport_errors, 0);
}

/// A device that is not zoned (a conventional twin) beside a zoned one in
/// one subsystem: an NVM namespace whose commands reach the device itself,
/// with its statuses.
#[test]
fn a_device_that_is_not_zoned_is_an_nvm_namespace_beside_a_zoned_one() {
    use zns_spec::command::{DatasetManagement, DsmRange, WriteZeroes};
    let zoned = zns_device::open("emu:small").unwrap();
    let twin = zns_device::open("emu:small-conv").unwrap();
    let info = twin.info().clone();
    assert!(!info.zoned);
    let backends: Vec<_> =
        [zoned, twin].into_iter().flat_map(zns_nvmf::Backend::of_device).collect();
    assert_eq!(backends.len(), 2);
    let sub = Subsystem::with_backends(NQN, backends).unwrap();
    assert_eq!(sub.namespaces()[1].name(), "emu:small-conv");
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let addr = t.local_addr();
    let (mut h, cntlid) = admin(addr, Digests::default());
    let c = IdentifyController::from_bytes(&h.identify(Cns::Controller, 0, CommandSetId::Nvm));
    assert_eq!(c.nn, 2);
    assert!(c.oncs.has(zns_spec::identify::Oncs::DATASET_MANAGEMENT));
    let descs = |h: &mut Host, nsid| {
        NamespaceIdDescriptorList::from_bytes(&h.identify(
            Cns::NamespaceIdDescriptors,
            nsid,
            CommandSetId::Nvm,
        ))
        .unwrap()
        .command_set()
    };
    assert_eq!(descs(&mut h, 1), Some(CommandSetId::Zoned));
    assert_eq!(descs(&mut h, 2), Some(CommandSetId::Nvm));
    let ns = IdentifyNamespace::from_bytes(&h.identify(Cns::Namespace, 2, CommandSetId::Nvm));
    assert_eq!(ns.nsze, info.namespace_blocks);
    assert_eq!(1u32 << ns.lbaf[0].lba_data_size_log2, info.block_size);
    let mut zc = IdentifyCmd::new(Cns::CsiNamespace, 2);
    zc.csi = CommandSetId::Zoned as u8;
    let (c, _) = h.cmd(zc.to_entry(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidIoCommandSet), "{:?}", c.status());

    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let bs = info.block_size as usize;
    let blocks = ns.nsze;
    // Writes anywhere, the last blocks too, in the capsule and by R2T.
    let a = pattern(2 * bs, 21);
    q.ok(ReadWrite::new(2, blocks - 2, 2).write().unwrap(), Dir::Out(&a));
    let big = pattern(16 * bs, 22);
    q.ok(ReadWrite::new(2, 5000, 16).write().unwrap(), Dir::Out(&big));
    let (_, back) = q.ok(ReadWrite::new(2, blocks - 2, 2).read().unwrap(), Dir::In(2 * bs));
    assert_eq!(back, a);
    let (_, back) = q.ok(ReadWrite::new(2, 5000, 16).read().unwrap(), Dir::In(16 * bs));
    assert_eq!(back, big);
    // The zoned namespace beside it is untouched.
    let rep = ZoneReceive::report(1, 0, 4096, ReportFilter::All);
    let (_, r) = q.ok(rep.to_entry().unwrap(), Dir::In(4096));
    let report = zns_device::parse_report(&r, 1024, None).unwrap();
    assert_eq!(report.descriptors[0].write_pointer, Some(0));
    // Deallocation and Write Zeroes: the blocks read back as zeroes, the
    // ones around them as written.
    let ranges = DsmRange { attributes: 0, blocks: 4, slba: 5002 }.to_bytes();
    q.ok(DatasetManagement::deallocate(2, 1).to_entry().unwrap(), Dir::Out(&ranges));
    q.ok(WriteZeroes::new(2, 5010, 2).to_entry().unwrap(), Dir::None);
    let (_, back) = q.ok(ReadWrite::new(2, 5000, 16).read().unwrap(), Dir::In(16 * bs));
    let zero = |r: std::ops::Range<usize>| back[r.start * bs..r.end * bs].iter().all(|&b| b == 0);
    assert!(zero(2..6) && zero(10..12));
    assert_eq!(&back[..2 * bs], &big[..2 * bs]);
    assert_eq!(&back[6 * bs..10 * bs], &big[6 * bs..10 * bs]);
    assert_eq!(&back[12 * bs..], &big[12 * bs..]);
    q.ok(zns_spec::command::Flush { nsid: 2 }.to_entry(), Dir::None);
    q.ok(zns_spec::command::Flush { nsid: 0xFFFF_FFFF }.to_entry(), Dir::None);
    // The device's statuses past the end; a deallocation with one range
    // out of range is refused whole.
    let (c, _) = q.cmd(ReadWrite::new(2, blocks, 1).read().unwrap(), Dir::In(bs));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (c, _) = q.cmd(ReadWrite::new(2, blocks - 1, 2).write().unwrap(), Dir::Out(&a));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (c, _) = q.cmd(WriteZeroes::new(2, blocks - 1, 2).to_entry().unwrap(), Dir::None);
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let two: Vec<u8> = [
        DsmRange { attributes: 0, blocks: 1, slba: 5000 }.to_bytes(),
        DsmRange { attributes: 0, blocks: 2, slba: blocks - 1 }.to_bytes(),
    ]
    .concat();
    let (c, _) = q.cmd(DatasetManagement::deallocate(2, 2).to_entry().unwrap(), Dir::Out(&two));
    assert!(c.status().is(StatusCode::LbaOutOfRange), "{:?}", c.status());
    let (_, back) = q.ok(ReadWrite::new(2, 5000, 1).read().unwrap(), Dir::In(bs));
    assert_eq!(back, big[..bs]);
    // No zone commands on it.
    let (c, _) = q.cmd(ZoneAppend::new(2, 0, 1).to_entry().unwrap(), Dir::Out(&a[..bs]));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let (c, _) = q.cmd(ZoneSend::new(2, 0, ZoneSendAction::Reset).to_entry(), Dir::None);
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    let (c, _) = q
        .cmd(ZoneReceive::report(2, 0, 4096, ReportFilter::All).to_entry().unwrap(), Dir::In(4096));
    assert!(c.status().is(StatusCode::InvalidOpcode), "{:?}", c.status());
    drop((h, q));
    assert_eq!(t.stop().transport_errors, 0);
}

#[test]
fn a_conventional_backend_needs_a_device_that_reaches_one() {
    let dev = zns_device::open("emu:small").unwrap();
    assert_eq!(zns_nvmf::Backend::of_device(dev.clone()).len(), 1);
    let bad = zns_nvmf::Backend::Conventional { device: dev, name: "emu:small, none".into() };
    let e = Subsystem::with_backends(NQN, vec![bad]).unwrap_err();
    assert!(e.to_string().contains("no conventional namespace"), "{e}");
}

/// The Media and Data Integrity Errors counter of the target's SMART log.
fn media_errors(h: &mut Host) -> u128 {
    let lp = GetLogPage::new(LogPageId::SmartHealth, 0xFFFF_FFFF, 128);
    let (_, smart) = h.ok(lp.to_entry().unwrap(), Dir::In(512));
    zns_spec::log::SmartLog::from_bytes(&smart[..512].try_into().unwrap()).media_errors
}

#[test]
fn a_block_failing_its_data_checksum_reaches_the_host_as_unrecovered_read_error() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let profile = zns_emulator::profile::Profile::by_name("tiny").unwrap();
    zns_emulator::image::DeviceImage::create(&path, &profile).unwrap();
    let data_offset = zns_emulator::image::layout(&profile)[0].data_offset;
    let uri = format!("emu:file={}", path.display());
    let data = pattern(4 * 4096, 5);
    {
        let t = target(&uri);
        let (a, cntlid) = admin(t.local_addr(), Digests::default());
        let mut q = io_queue(t.local_addr(), cntlid, 1, Digests::default());
        q.ok(ReadWrite::new(1, 0, 4).write().unwrap(), Dir::Out(&data));
        q.ok(zns_spec::command::Flush { nsid: 1 }.to_entry(), Dir::None);
        drop((q, a));
        t.stop();
    }
    // One bit of LBA 2 flips while the target is down.
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    f.write_all_at(&[data[2 * 4096 + 7] ^ 0x40], data_offset + 2 * 4096 + 7).unwrap();
    drop(f);
    // The stopped target's last connection thread lets go of the device
    // (and so of the image's lock) just after `stop` returns.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let dev = loop {
        match zns_device::open(&uri) {
            Ok(d) => break d,
            Err(e) if e.to_string().contains("in use") && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("{e}"),
        }
    };
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let t = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let (mut a, cntlid) = admin(t.local_addr(), Digests::default());
    assert_eq!(media_errors(&mut a), 0);
    let mut q = io_queue(t.local_addr(), cntlid, 1, Digests { header: true, data: true });
    // The whole read fails, with no data sent: the kernel's nvme driver
    // turns this status into a media error (BLK_STS_MEDIUM).
    let (c, back) = q.cmd(ReadWrite::new(1, 0, 4).read().unwrap(), Dir::In(4 * 4096));
    assert!(c.status().is(StatusCode::UnrecoveredReadError), "{:?}", c.status());
    assert!(c.status_field().dnr());
    assert!(back.is_empty(), "no data of a failed read reaches the host");
    let (_, good) = q.ok(ReadWrite::new(1, 3, 1).read().unwrap(), Dir::In(4096));
    assert_eq!(good, data[3 * 4096..]);
    assert_eq!(media_errors(&mut a), 1);
    drop((q, a));
    assert_eq!(t.stop().transport_errors, 0);
}
