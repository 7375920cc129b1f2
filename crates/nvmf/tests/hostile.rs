//! The target (and the `tcp:` initiator) against hostile peers: every
//! length field at its largest, stalls at every byte offset of a PDU,
//! floods of connections, hosts that stop sending keep-alives, queues that
//! outlive their controller, duplicate queue IDs, disconnects with I/O in
//! flight. Each test ends with a good host's data checked: a hostile host
//! costs its own connection, never another's service.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::{ReadWrite, ZoneReceive};
use zns_spec::fabrics::{disconnect_sqe, ConnectData};
use zns_spec::log::{GetLogPage, LogPageId};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{
    self, CommonHeader, DataHeader, Digests, FatalError, IcReq, IcResp, PduError, PduType, R2t,
    TermReq, FLAG_DATA_LAST,
};
use zns_spec::{ReportFilter, StatusCode, SubmissionEntry};

mod common;
use common::*;

/// The stall timeout the tests' targets use.
const STALL: Duration = Duration::from_millis(300);

fn hostile_target(max_connections: usize) -> NvmfTarget {
    let dev = zns_device::open("emu:small").unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let config = TargetConfig { max_connections, stall_timeout: STALL, ..Default::default() };
    NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap()
}

/// A good host's write and read back on a new controller: the target still
/// serves, with the data intact.
fn good_host_round_trip(addr: SocketAddr, seed: u8) {
    let (_admin, cntlid) = admin(addr, Digests::default());
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let (_, zone) = q.ok(
        ZoneReceive::report(1, 0, 4096, ReportFilter::Empty).to_entry().unwrap(),
        Dir::In(4096),
    );
    let slba = u64::from_le_bytes(zone[64 + 16..64 + 24].try_into().unwrap());
    let data = pattern(8192, seed);
    q.ok(ReadWrite::new(1, slba, 2).write().unwrap(), Dir::Out(&data));
    let (_, back) = q.ok(ReadWrite::new(1, slba, 2).read().unwrap(), Dir::In(8192));
    assert_eq!(back, data, "a good host's data");
}

/// Waits (bounded) until the target has closed `s`; how long that took.
fn closed_within(s: &mut TcpStream, bound: Duration) -> Duration {
    let start = Instant::now();
    s.set_read_timeout(Some(bound)).unwrap();
    let mut sink = Vec::new();
    match s.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("not closed within {bound:?}: {e}"),
    }
    start.elapsed()
}

/// The termination request a target sent before closing, read to the end.
fn termination(s: &mut TcpStream) -> TermReq {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.len() >= 24, "no termination request: {rest:?}");
    assert_eq!(rest[0], PduType::C2hTermReq.raw());
    TermReq::from_bytes(rest[8..24].try_into().unwrap())
}

/// The bytes of a 1-block write capsule with `data` in the capsule.
fn write_capsule(digests: Digests, data: &[u8]) -> Vec<u8> {
    let mut sqe = ReadWrite::new(1, 0, (data.len() / 4096).max(1) as u32).write().unwrap();
    sqe.set_cid(1);
    SglDescriptor::in_capsule(0, data.len() as u32).store_in(&mut sqe);
    let ch = CommonHeader::new(PduType::CapsuleCmd, digests, data.len(), 0);
    let mut wire = ch.to_bytes().to_vec();
    wire.extend_from_slice(&sqe.to_bytes());
    if digests.header {
        let d = tcp::digest(&wire);
        wire.extend_from_slice(&d.to_le_bytes());
    }
    wire.extend_from_slice(data);
    if digests.data {
        wire.extend_from_slice(&tcp::digest(data).to_le_bytes());
    }
    wire
}

/// A connected admin queue (a controller with no Keep Alive Timeout):
/// nothing but the stall timeout bounds how long it may stay quiet.
fn connected(addr: SocketAddr, digests: Digests) -> Host {
    let mut h = Host::connect(addr, digests);
    let c = h.fabric_connect_kato(0, ConnectData::ANY_CONTROLLER, NQN, 0);
    assert!(c.status().is_success(), "{:?}", c.status());
    h
}

#[test]
fn a_host_that_stops_at_any_byte_of_a_pdu_is_closed_after_the_stall_timeout() {
    let t = hostile_target(512);
    let addr = t.local_addr();
    let digests = Digests { header: true, data: true };
    let capsule = write_capsule(digests, &pattern(4096, 1));
    // Every byte of the header and its digest, and points in the data.
    let mut cuts: Vec<usize> = (1..=76).collect();
    cuts.extend([77, 2048, 76 + 4095, 76 + 4096, capsule.len() - 1]);
    let mut stalled: Vec<TcpStream> = cuts
        .iter()
        .map(|&cut| {
            let mut h = connected(addr, digests);
            h.s.write_all(&capsule[..cut]).unwrap();
            h.s
        })
        .collect();
    // Half an ICReq, and nothing at all, before any queue exists.
    for cut in [0, 1, 64, tcp::IC_PDU_SIZE - 1] {
        let mut s = TcpStream::connect(addr).unwrap();
        let req = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 }.to_bytes();
        s.write_all(&req[..cut]).unwrap();
        stalled.push(s);
    }
    // An ICReq and then no Connect.
    stalled.push(Host::connect(addr, digests).s);
    // Meanwhile a good host is served.
    good_host_round_trip(addr, 1);
    let bound = STALL * 3 + Duration::from_secs(2);
    for (i, s) in stalled.iter_mut().enumerate() {
        closed_within(s, bound);
        assert!(i < cuts.len() + 5);
    }
    good_host_round_trip(addr, 2);
    let stats = t.stop();
    assert_eq!(stats.timeouts as usize, stalled.len(), "{stats:?}");
}

#[test]
fn a_host_trickling_one_byte_at_a_time_is_closed_at_the_deadline() {
    let t = hostile_target(16);
    let mut h = connected(t.local_addr(), Digests::default());
    let capsule = write_capsule(Digests::default(), &pattern(4096, 2));
    let start = Instant::now();
    let mut sent = 0;
    // One byte every 50 ms: each read finds something, the PDU never ends.
    while sent < capsule.len() && start.elapsed() < STALL * 10 {
        if h.s.write_all(&capsule[sent..sent + 1]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = start.elapsed() + closed_within(&mut h.s, Duration::from_secs(5));
    assert!(took < STALL * 10, "closed after {took:?} and {sent} bytes");
    assert!(sent < 100, "{sent} bytes taken");
    good_host_round_trip(t.local_addr(), 3);
    assert_eq!(t.stop().timeouts, 1);
}

#[test]
fn stalled_hosts_at_the_connection_limit_lock_nobody_out_for_long() {
    let t = hostile_target(8);
    let addr = t.local_addr();
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&[0x00, 0x00]).unwrap();
            s
        })
        .collect();
    // Within a few stall timeouts the slots are free again.
    let deadline = Instant::now() + STALL * 3 + Duration::from_secs(5);
    while t.stats().timeouts < 8 || t.open_connections() > 0 {
        assert!(Instant::now() < deadline, "{:?}", t.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    good_host_round_trip(addr, 4);
    drop(stalled);
    t.stop();
}

#[test]
fn every_length_field_at_its_largest_is_refused_before_anything_is_allocated() {
    let t = hostile_target(64);
    let addr = t.local_addr();
    let (mut a, cntlid) = admin(addr, Digests::default());
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    // Zone Management Receive: NUMD (up to 16 GiB) above MDTS.
    for dwords in [u32::MAX as u64 + 1, 1 << 28, (1 << 20) + 1] {
        let mut zr = ZoneReceive::report(1, 0, 4096, ReportFilter::All);
        zr.dwords = dwords;
        let (c, d) = q.cmd(zr.to_entry().unwrap(), Dir::In(u32::MAX as usize));
        assert!(c.status().is(StatusCode::InvalidField), "NUMD {dwords}: {:?}", c.status());
        assert!(d.is_empty());
    }
    // Get Log Page: NUMD above MDTS.
    let lp = GetLogPage::new(LogPageId::SmartHealth, 0xFFFF_FFFF, u32::MAX as u64 + 1);
    let (c, _) = a.cmd(lp.to_entry().unwrap(), Dir::In(u32::MAX as usize));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    // Read: NLB at its largest (256 MiB) above MDTS.
    let (c, _) = q.cmd(ReadWrite::new(1, 0, 65536).read().unwrap(), Dir::In(u32::MAX as usize));
    assert!(c.status().is(StatusCode::InvalidField), "{:?}", c.status());
    // A write by R2T whose SGL length (up to 4 GiB) is above MDTS.
    let mut w = ReadWrite::new(1, 0, 1).write().unwrap();
    w.set_cid(900);
    SglDescriptor::transport(u32::MAX).store_in(&mut w);
    q.pdu(PduType::CapsuleCmd, 0, &w.to_bytes(), &[]);
    assert!(q.response().status().is(StatusCode::SglLengthInvalid));
    // In-capsule data at PLEN's largest, and just over IOCCSZ's 8 KiB:
    // Data Transfer Limit Exceeded, the connection terminated.
    for len in [u32::MAX as usize - 72, 8192 + 1] {
        let mut h = connected(addr, Digests::default());
        let mut ch = CommonHeader::new(PduType::CapsuleCmd, Digests::default(), 16, 0);
        ch.plen = (72 + len) as u32;
        h.s.write_all(&ch.to_bytes()).unwrap();
        // Refused on the header alone: no byte of the data is sent (the
        // target would close with them unread, and reset the stream).
        h.s.write_all(&[0u8; 64]).unwrap();
        let term = termination(&mut h.s);
        assert_eq!(term.fes, FatalError::DataLimitExceeded.raw(), "{len} bytes in the capsule");
    }
    // H2CData above MAXH2CDATA (128 KiB), at PLEN's largest.
    let mut w = ReadWrite::new(1, 0, 64).write().unwrap();
    w.set_cid(901);
    SglDescriptor::transport(64 * 4096).store_in(&mut w);
    let mut h = io_queue(addr, cntlid, 2, Digests::default());
    h.pdu(PduType::CapsuleCmd, 0, &w.to_bytes(), &[]);
    let (pt, _, spec, _) = h.recv();
    assert_eq!(pt, PduType::R2t);
    let r = R2t::from_bytes(spec[..16].try_into().unwrap());
    let dh = DataHeader { cccid: 901, ttag: r.ttag, datao: 0, datal: u32::MAX - 24 };
    let mut ch = CommonHeader::new(PduType::H2cData, Digests::default(), 16, FLAG_DATA_LAST);
    ch.plen = u32::MAX;
    // The common header alone is refused (see above).
    h.s.write_all(&ch.to_bytes()).unwrap();
    let _ = dh;
    assert_eq!(termination(&mut h.s).fes, FatalError::DataLimitExceeded.raw());
    // H2CData whose DATAL runs past the R2T's length.
    let mut h = io_queue(addr, cntlid, 3, Digests::default());
    h.pdu(PduType::CapsuleCmd, 0, &w.to_bytes(), &[]);
    let (_, _, spec, _) = h.recv();
    let r = R2t::from_bytes(spec[..16].try_into().unwrap());
    let dh = DataHeader { cccid: 901, ttag: r.ttag, datao: 64 * 4096 - 4096, datal: 8192 };
    h.pdu(PduType::H2cData, FLAG_DATA_LAST, &dh.to_bytes(), &pattern(8192, 0));
    assert_eq!(termination(&mut h.s).fes, FatalError::DataOutOfRange.raw());
    // A termination request longer than its 128 bytes of data.
    let mut h = connected(addr, Digests::default());
    let mut ch = CommonHeader::new(PduType::H2cTermReq, Digests::default(), 0, 0);
    ch.plen = u32::MAX;
    h.s.write_all(&ch.to_bytes()).unwrap();
    assert_eq!(termination(&mut h.s).fes, FatalError::InvalidHeaderField.raw());
    drop((a, q));
    good_host_round_trip(addr, 5);
    t.stop();
}

#[test]
fn the_keep_alive_timeout_ends_a_silent_controller_and_its_io_queues() {
    let t = hostile_target(64);
    let addr = t.local_addr();
    // KATO 1 s; nothing sent after the set-up.
    let (mut a, cntlid) = admin_kato(addr, Digests::default(), 1000);
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let took = closed_within(&mut a.s, Duration::from_secs(10));
    assert!(took <= Duration::from_secs(4), "the admin queue lived {took:?}");
    closed_within(&mut q.s, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.controllers() > 0 {
        assert!(Instant::now() < deadline, "the controller outlived its Keep Alive Timeout");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Commands on an I/O queue keep the controller alive (traffic based).
    let (mut a, cntlid) = admin_kato(addr, Digests::default(), 1000);
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        q.ok(ReadWrite::new(1, 0, 1).read().unwrap(), Dir::In(4096));
        std::thread::sleep(Duration::from_millis(200));
    }
    a.ok(SubmissionEntry::new(0x18, 0), Dir::None);
    assert_eq!(t.controllers(), 1);
    drop((a, q));
    assert_eq!(t.stop().keep_alive_expirations, 1);
}

#[test]
fn io_queues_end_with_their_controller_and_queue_ids_are_not_shared() {
    let t = hostile_target(64);
    let addr = t.local_addr();
    let (mut a, cntlid) = admin(addr, Digests::default());
    let mut q1 = io_queue(addr, cntlid, 1, Digests::default());
    // A second Connect for QID 1: Command Sequence Error.
    let mut dup = Host::connect(addr, Digests::default());
    let c = dup.fabric_connect(1, cntlid, NQN);
    assert!(c.status().is(StatusCode::CommandSequenceError), "{:?}", c.status());
    // The QID is free again once its connection ends.
    drop(q1);
    let deadline = Instant::now() + Duration::from_secs(5);
    q1 = loop {
        let mut h = Host::connect(addr, Digests::default());
        if h.fabric_connect(1, cntlid, NQN).status().is_success() {
            break h;
        }
        assert!(Instant::now() < deadline, "QID 1 never freed");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut q2 = io_queue(addr, cntlid, 2, Digests::default());
    // The admin queue's Disconnect ends the association: its I/O queues
    // are closed, and no queue joins the controller any more.
    let (c, _) = a.cmd(disconnect_sqe(), Dir::None);
    assert!(c.status().is_success());
    closed_within(&mut a.s, Duration::from_secs(5));
    closed_within(&mut q1.s, Duration::from_secs(5));
    closed_within(&mut q2.s, Duration::from_secs(5));
    let mut late = Host::connect(addr, Digests::default());
    let c = late.fabric_connect(3, cntlid, NQN);
    assert!(!c.status().is_success(), "a queue joined a removed controller");
    good_host_round_trip(addr, 6);
    t.stop();
}

#[test]
fn floods_of_connections_and_disconnects_with_io_in_flight_leave_others_served() {
    let t = hostile_target(64);
    let addr = t.local_addr();
    // Connections opened and dropped at once, and garbage.
    for i in 0..300 {
        let mut s = TcpStream::connect(addr).unwrap();
        if i % 3 == 0 {
            let _ = s.write_all(&[0xEE; 200]);
        }
    }
    // Every one is served or, past the limit, refused at accept, and the
    // dropped ones are closed: their slots are free again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.stats().connections + t.stats().refused < 300 || t.open_connections() > 0 {
        assert!(Instant::now() < deadline, "{:?}, {} open", t.stats(), t.open_connections());
        std::thread::sleep(Duration::from_millis(10));
    }
    // A queue that sends 32 reads and goes away without reading a reply.
    let (_a, cntlid) = admin(addr, Digests::default());
    let mut q = io_queue(addr, cntlid, 1, Digests::default());
    for i in 0..32u16 {
        let mut sqe = ReadWrite::new(1, 0, 1).read().unwrap();
        sqe.set_cid(100 + i);
        SglDescriptor::transport(4096).store_in(&mut sqe);
        q.pdu(PduType::CapsuleCmd, 0, &sqe.to_bytes(), &[]);
    }
    drop(q);
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.stats().connections + t.stats().refused < 302 {
        assert!(Instant::now() < deadline, "{:?}", t.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    good_host_round_trip(addr, 7);
    t.stop();
}

#[test]
fn an_h2c_data_digest_error_fails_its_command_only() {
    let t = hostile_target(16);
    let addr = t.local_addr();
    let digests = Digests { header: true, data: true };
    let (_a, cntlid) = admin(addr, digests);
    let mut q = io_queue(addr, cntlid, 1, digests);
    // A 64 KiB write by R2T, one of its two H2CData PDUs damaged.
    let data = pattern(65536, 8);
    let mut w = ReadWrite::new(1, 0, 16).write().unwrap();
    w.set_cid(77);
    SglDescriptor::transport(65536).store_in(&mut w);
    q.pdu(PduType::CapsuleCmd, 0, &w.to_bytes(), &[]);
    let (pt, _, spec, _) = q.recv();
    assert_eq!(pt, PduType::R2t);
    let r = R2t::from_bytes(spec[..16].try_into().unwrap());
    for (i, half) in data.chunks(32768).enumerate() {
        let dh = DataHeader { cccid: 77, ttag: r.ttag, datao: (i * 32768) as u32, datal: 32768 };
        let ch = CommonHeader::new(
            PduType::H2cData,
            digests,
            half.len(),
            if i == 1 { FLAG_DATA_LAST } else { 0 },
        );
        let mut h = ch.to_bytes().to_vec();
        h.extend_from_slice(&dh.to_bytes());
        let hd = tcp::digest(&h);
        let dd = tcp::digest(half) ^ if i == 0 { 0x10 } else { 0 };
        q.s.write_all(&h).unwrap();
        q.s.write_all(&hd.to_le_bytes()).unwrap();
        q.s.write_all(half).unwrap();
        q.s.write_all(&dd.to_le_bytes()).unwrap();
    }
    let c = q.response();
    assert_eq!(c.cid, 77);
    assert!(c.status().is(StatusCode::TransientTransportError), "{:?}", c.status());
    // Nothing was written; the queue goes on and the write succeeds again.
    let (_, back) = q.ok(ReadWrite::new(1, 0, 1).read().unwrap(), Dir::In(4096));
    assert_eq!(back, vec![0u8; 4096]);
    q.ok(ReadWrite::new(1, 0, 16).write().unwrap(), Dir::Out(&data));
    let (_, back) = q.ok(ReadWrite::new(1, 0, 16).read().unwrap(), Dir::In(65536));
    assert_eq!(back, data);
    assert_eq!(t.stop().transport_errors, 0);
}

/// A target that answers the ICReq, reads the Connect and then sends
/// `pdu`.
fn target_answering_with(pdu: Vec<u8>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let j = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut req = [0u8; tcp::IC_PDU_SIZE];
        s.read_exact(&mut req).unwrap();
        let resp = IcResp { pfv: 0, cpda: 0, digests: Digests::default(), maxh2cdata: 131072 };
        s.write_all(&resp.to_bytes()).unwrap();
        // The Connect capsule with its 1 KiB of data.
        let mut connect = [0u8; 72 + 1024];
        s.read_exact(&mut connect).unwrap();
        s.write_all(&pdu).unwrap();
        // Hold the connection until the initiator lets go.
        let _ = s.read_to_end(&mut Vec::new());
    });
    (addr, j)
}

#[test]
fn the_initiator_refuses_a_success_flag_it_did_not_ask_for() {
    // SUCCESS on a queue that keeps SQ flow control, then SUCCESS
    // without LAST_PDU on one that gave it up: both break the transport.
    for (flags, flow_control) in
        [(FLAG_DATA_LAST | tcp::FLAG_DATA_SUCCESS, true), (tcp::FLAG_DATA_SUCCESS, false)]
    {
        let mut pdu =
            CommonHeader::new(PduType::C2hData, Digests::default(), 16, flags).to_bytes().to_vec();
        pdu.extend_from_slice(&DataHeader { cccid: 0, ttag: 0, datao: 0, datal: 16 }.to_bytes());
        pdu.extend_from_slice(&[0u8; 16]);
        let (addr, j) = target_answering_with(pdu);
        let mut qp = zns_driver::tcp::TcpQueuePair::connect(addr, Digests::default()).unwrap();
        qp.set_sq_flow_control(flow_control);
        let e = qp.fabric_connect(0, 32, 0xFFFF, NQN, HOSTNQN).unwrap_err();
        assert!(
            matches!(e, zns_driver::tcp::TcpError::Pdu(PduError::Field { .. })),
            "flags {flags:#x}: {e}"
        );
        drop(qp);
        j.join().unwrap();
    }
}

/// A target that answers the ICReq, reads the Connect and then claims a
/// C2HData PDU of nearly 4 GiB.
fn hostile_target_for_the_initiator() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let mut ch = CommonHeader::new(PduType::C2hData, Digests::default(), 16, FLAG_DATA_LAST);
    ch.plen = u32::MAX;
    let mut pdu = ch.to_bytes().to_vec();
    pdu.extend_from_slice(
        &DataHeader { cccid: 0, ttag: 0, datao: 0, datal: u32::MAX - 24 }.to_bytes(),
    );
    target_answering_with(pdu)
}

#[test]
fn the_initiator_refuses_a_target_pdu_larger_than_it_asked_for() {
    let (addr, j) = hostile_target_for_the_initiator();
    let mut qp = zns_driver::tcp::TcpQueuePair::connect(addr, Digests::default()).unwrap();
    let e = qp.fabric_connect(0, 32, 0xFFFF, NQN, HOSTNQN).unwrap_err();
    match e {
        zns_driver::tcp::TcpError::Pdu(PduError::DataLimit { len, max, .. }) => {
            assert_eq!(max, zns_driver::tcp::DEFAULT_MAX_DATA);
            assert!(len > max);
        }
        other => panic!("expected a data limit error, got {other}"),
    }
    drop(qp);
    j.join().unwrap();
}

/// Runs `f` on its own thread; fails if it takes longer than `bound`.
fn within(bound: Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(bound).unwrap_or_else(|_| panic!("{what} took more than {bound:?}"));
}

#[test]
fn hosts_that_stall_mid_pdu_mid_transfer_or_never_read_hold_no_worker() {
    // One worker, and a stall timeout longer than the test: nothing here
    // is closed for stalling; the good host must be served beside them.
    let dev = zns_device::open("emu:small").unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    let config =
        TargetConfig { workers: 1, stall_timeout: Duration::from_secs(60), ..Default::default() };
    let t = NvmfTarget::bind("127.0.0.1:0", sub, config).unwrap();
    let addr = t.local_addr();
    let capsule = write_capsule(Digests::default(), &pattern(4096, 7));
    let mut held: Vec<TcpStream> = (0..20)
        .map(|i| {
            let mut h = connected(addr, Digests::default());
            h.s.write_all(&capsule[..1 + i * 7]).unwrap();
            h.s
        })
        .collect();
    // Writes whose R2T is answered by nothing.
    let (_admin, cntlid) = admin(addr, Digests::default());
    for qid in 1..=3 {
        let mut q = io_queue(addr, cntlid, qid, Digests::default());
        let mut sqe = ReadWrite::new(1, 0, 4).write().unwrap();
        sqe.set_cid(9);
        SglDescriptor::transport(16384).store_in(&mut sqe);
        q.pdu(PduType::CapsuleCmd, 0, &sqe.to_bytes(), &[]);
        let (ty, ..) = q.recv();
        assert_eq!(ty, PduType::R2t);
        held.push(q.s);
    }
    // A host that asks for 16 MiB of reads and takes none of it.
    let mut greedy = io_queue(addr, cntlid, 4, Digests::default());
    let _ = socket2::SockRef::from(&greedy.s).set_recv_buffer_size(4096);
    for i in 0..128u16 {
        let mut sqe = ReadWrite::new(1, 0, 32).read().unwrap();
        sqe.set_cid(100 + i);
        SglDescriptor::transport(128 * 1024).store_in(&mut sqe);
        greedy.pdu(PduType::CapsuleCmd, 0, &sqe.to_bytes(), &[]);
    }
    std::thread::sleep(Duration::from_millis(200));
    within(Duration::from_secs(10), "a good host's round trip", move || {
        good_host_round_trip(addr, 8);
    });
    drop(held);
    drop(greedy);
    assert_eq!(t.stop().timeouts, 0);
}
