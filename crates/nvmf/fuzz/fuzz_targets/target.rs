//! Fuzzes the NVMe/TCP target through its socket, as a hostile host
//! would reach it: one live target in the process (an emulated `tiny`
//! device, zoned and conventional namespaces, without data; and the FTL
//! on another emulated device), and for each input one connection (two
//! for an I/O queue) whose bytes the input chooses.
//!
//! The first input byte picks the shape:
//! - raw bytes from the first one on;
//! - a valid ICReq and admin Connect, the controller enabled, then raw
//!   bytes;
//! - the same, then the rest as records framed into well-formed PDUs
//!   (command capsules with in-capsule or transport data descriptors,
//!   H2CData), so the entries and their data reach the command decoders;
//! - an admin queue on one connection and an I/O queue on another, then
//!   framed records on the I/O queue.
//!
//! Bit 2 of the first byte connects as the host the subsystem requires to
//! authenticate (DH-HMAC-CHAP), so commands meet the unauthenticated
//! queue; bit 3 then also sends a valid AUTH_Negotiate and takes the
//! challenge, so the records' Authentication Send and Receive reach the
//! reply's checks.
//!
//! The host half-closes its side and reads until the target closes.
//! Findings: a panic in any target thread (libFuzzer's panic hook aborts
//! the process), a target that never closes the connection (the run's
//! `-timeout`), and a target that stops accepting hosts.

#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use zns_driver::tcp::PduReader;
use zns_nvmf::{Backend, NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::Features;
use zns_spec::fabrics::{ConnectCommand, ConnectData, PropertySet};
use zns_spec::features::FeatureId;
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{CommonHeader, DataHeader, Digests, IcReq, PduType, FLAG_DATA_LAST};
use zns_spec::{CompletionEntry, SubmissionEntry};

const NQN: &str = "nqn.2026-11.io.znskit:fuzz";
const HOSTNQN: &str = "nqn.2026-11.io.znskit:fuzz-host";
/// A host that must authenticate, with a secret of key bytes 0..32.
const AUTH_HOSTNQN: &str = "nqn.2026-11.io.znskit:fuzz-auth-host";

/// The live target, started at the first input.
fn target() -> SocketAddr {
    static TARGET: OnceLock<NvmfTarget> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let dev = zns_device::open("emu:tiny,media=null").expect("emu:tiny");
            let under = zns_device::open("emu:small,zones=16").expect("emu:small");
            let ftl = zns_ftl::Ftl::format(under, zns_ftl::FtlConfig::default()).expect("FTL");
            let mut backends = Backend::of_device(dev);
            let media = Some(Arc::clone(ftl.device()));
            backends.push(Backend::Block { device: Arc::new(ftl), name: "FTL".into(), media });
            let secret = zns_spec::auth::Secret::new((0..32).collect(), None).expect("secret");
            let secrets = zns_nvmf::HostSecrets { host: secret.clone(), controller: Some(secret) };
            let sub = Subsystem::with_backends(NQN, backends)
                .expect("subsystem")
                .with_host_secrets(AUTH_HOSTNQN, secrets);
            NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).expect("bind")
        })
        .local_addr()
}

fuzz_target!(|input: &[u8]| {
    let addr = target();
    let Some((&mode, rest)) = input.split_first() else { return };
    let digests = Digests::from_raw(mode >> 4);
    let host = Host { auth: mode & 0b100 != 0, negotiate: mode & 0b1000 != 0 };
    match mode & 0b11 {
        0 => exchange(addr, input),
        1 => {
            let mut bytes = admin_prefix(digests, host);
            bytes.extend_from_slice(rest);
            exchange(addr, &bytes);
        }
        2 => {
            let mut bytes = admin_prefix(digests, host);
            frame(digests, rest, &mut bytes);
            exchange(addr, &bytes);
        }
        _ => io_queue(addr, digests, rest),
    }
    // The target still takes hosts.
    let mut s = TcpStream::connect(addr).expect("the target stopped accepting");
    s.write_all(&IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 }.to_bytes()).unwrap();
    let mut resp = [0u8; 128];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_exact(&mut resp).expect("no ICResp from the target");
});

/// Sends `bytes` on a new connection, half-closes, and reads until the
/// target closes it.
fn exchange(addr: SocketAddr, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    drain(&mut s);
}

fn drain(s: &mut TcpStream) {
    let mut sink = [0u8; 16384];
    while let Ok(n) = s.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

/// A command capsule PDU.
fn capsule(digests: Digests, sqe: &SubmissionEntry, data: &[u8], out: &mut Vec<u8>) {
    pdu(digests, PduType::CapsuleCmd, 0, &sqe.to_bytes(), data, out);
}

fn pdu(digests: Digests, t: PduType, flags: u8, specific: &[u8], data: &[u8], out: &mut Vec<u8>) {
    let ch = CommonHeader::new(t, digests, data.len(), flags);
    let start = out.len();
    out.extend_from_slice(&ch.to_bytes());
    out.extend_from_slice(specific);
    if ch.flags & zns_spec::tcp::FLAG_HDGST != 0 {
        let d = zns_spec::tcp::digest(&out[start..]);
        out.extend_from_slice(&d.to_le_bytes());
    }
    if !data.is_empty() {
        out.extend_from_slice(data);
        if ch.flags & zns_spec::tcp::FLAG_DDGST != 0 {
            out.extend_from_slice(&zns_spec::tcp::digest(data).to_le_bytes());
        }
    }
}

/// Which host an admin prefix connects as.
#[derive(Clone, Copy)]
struct Host {
    /// The host that must authenticate.
    auth: bool,
    /// Then a valid AUTH_Negotiate and the challenge's Receive.
    negotiate: bool,
}

/// A Connect of queue `qid` to controller `cntlid` as `hostnqn`.
fn connect(digests: Digests, qid: u16, cntlid: u16, hostnqn: &str, out: &mut Vec<u8>) {
    let mut c = ConnectCommand { recfmt: 0, qid, sqsize: 31, cattr: 0, kato_ms: 0 }.to_sqe();
    c.set_cid(0xFFF0);
    SglDescriptor::in_capsule(0, ConnectData::SIZE as u32).store_in(&mut c);
    let data =
        ConnectData { host_id: [9; 16], cntlid, subnqn: NQN.into(), hostnqn: hostnqn.into() };
    capsule(digests, &c, &data.to_bytes(), out);
}

/// A valid AUTH_Negotiate, and the Receive that takes the challenge.
fn negotiate(digests: Digests, out: &mut Vec<u8>) {
    use zns_spec::auth::{AuthCommand, Negotiate};
    let n = Negotiate { tid: 1, sc_c: 0, hashes: vec![1, 2, 3], dh_groups: vec![0] }.to_bytes();
    let mut send = AuthCommand::send(n.len() as u32).to_sqe();
    send.set_cid(0xFFE0);
    SglDescriptor::in_capsule(0, n.len() as u32).store_in(&mut send);
    capsule(digests, &send, &n, out);
    let mut receive = AuthCommand::receive(4096).to_sqe();
    receive.set_cid(0xFFE1);
    SglDescriptor::transport(4096).store_in(&mut receive);
    capsule(digests, &receive, &[], out);
}

/// ICReq, admin Connect (as `host` says), CC.EN with the I/O command
/// sets, four I/O queues.
fn admin_prefix(digests: Digests, host: Host) -> Vec<u8> {
    let mut out = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 }.to_bytes().to_vec();
    let hostnqn = if host.auth { AUTH_HOSTNQN } else { HOSTNQN };
    connect(digests, 0, ConnectData::ANY_CONTROLLER, hostnqn, &mut out);
    if host.auth && host.negotiate {
        negotiate(digests, &mut out);
    }
    let mut p = PropertySet { offset: 0x14, eight_bytes: false, value: 0x0046_0061 }.to_sqe();
    p.set_cid(0xFFF1);
    capsule(digests, &p, &[], &mut out);
    let mut q = Features::set(FeatureId::NumberOfQueues, 0x0003_0003, false).set_entry();
    q.set_cid(0xFFF2);
    capsule(digests, &q, &[], &mut out);
    out
}

/// Opcodes a record picks from (admin and I/O: the connection's queue
/// decides which apply); a pick past the table takes the next input byte
/// as the opcode.
const OPCODES: [u8; 16] = [
    0x06, // Identify
    0x02, // Get Log Page
    0x09, // Set Features
    0x0A, // Get Features
    0x0C, // Asynchronous Event Request
    0x18, // Keep Alive
    0x7F, // Fabrics
    0x02, // Read
    0x01, // Write
    0x08, // Write Zeroes
    0x00, // Flush
    0x7D, // Zone Append
    0x79, // Zone Management Send
    0x7A, // Zone Management Receive
    0x19, // Copy
    0x09, // Dataset Management
];

/// Namespace IDs a record picks from (the target's are 1 to 3).
const NSIDS: [u32; 6] = [0, 1, 2, 3, 4, 0xFFFF_FFFF];

/// Frames `rest` as records, each a kind byte, a 16-bit length, then:
/// for a command capsule an opcode pick, a namespace pick, the Fabrics
/// type, CDW10-CDW15 (24 bytes) and up to 8 KiB of data, carried in the
/// capsule or announced for transfer by R2T (or as room for data from
/// the target) as the kind says; for H2CData the command and transfer
/// tags, the offset and the data.
fn frame(digests: Digests, mut rest: &[u8], out: &mut Vec<u8>) {
    let mut cid = 0u16;
    while let Some((&kind, tail)) = rest.split_first() {
        rest = tail;
        let Some(len_bytes) = rest.get(..2) else { return };
        let len = (u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as usize) % 8193;
        rest = &rest[2..];
        if kind & 1 == 0 {
            let Some(head) = rest.get(..28) else { return };
            rest = &rest[28..];
            let pick = head[0] as usize;
            let opcode = match OPCODES.get(pick % 32) {
                Some(&op) => op,
                None => head[3],
            };
            let nsid = match NSIDS.get(head[1] as usize % 8) {
                Some(&n) => n,
                None => u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
            };
            let mut sqe = SubmissionEntry::new(opcode, nsid);
            cid = cid.wrapping_add(1);
            sqe.set_cid(cid);
            let d: Vec<u32> = head[4..28]
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (sqe.cdw10, sqe.cdw11, sqe.cdw12, sqe.cdw13, sqe.cdw14, sqe.cdw15) =
                (d[0], d[1], d[2], d[3], d[4], d[5]);
            if opcode == 0x7F {
                // The Fabrics command type sits in the entry's byte 4.
                let mut b = sqe.to_bytes();
                b[4] = head[2];
                sqe = SubmissionEntry::from_bytes(&b);
            }
            let data = &rest[..len.min(rest.len())];
            rest = &rest[data.len()..];
            let data: &[u8] = match kind >> 1 & 3 {
                0 | 1 => {
                    SglDescriptor::in_capsule(0, data.len() as u32).store_in(&mut sqe);
                    data
                }
                // Data by R2T, or room for data from the target.
                2 => {
                    SglDescriptor::transport(len as u32 * 16).store_in(&mut sqe);
                    &[]
                }
                // A descriptor of the input's choosing.
                _ => {
                    let mut b = sqe.to_bytes();
                    b[24..40].copy_from_slice(&head[4..20]);
                    sqe = SubmissionEntry::from_bytes(&b);
                    data
                }
            };
            capsule(digests, &sqe, data, out);
        } else {
            let Some(h) = rest.get(..8) else { return };
            let cccid = u16::from_le_bytes([h[0], h[1]]);
            let ttag = u16::from_le_bytes([h[2], h[3]]);
            let datao = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) % (1 << 20);
            rest = &rest[8..];
            let data = &rest[..len.clamp(1, 8192).min(rest.len())];
            if data.is_empty() {
                return;
            }
            rest = &rest[data.len()..];
            let dh = DataHeader { cccid, ttag, datao, datal: data.len() as u32 };
            let flags = if kind & 2 != 0 { FLAG_DATA_LAST } else { 0 };
            pdu(digests, PduType::H2cData, flags, &dh.to_bytes(), data, out);
        }
    }
}

/// Reads PDUs until a response capsule arrives; its completion.
fn response(s: &mut TcpStream, reader: &mut PduReader) -> Option<CompletionEntry> {
    loop {
        let p = reader.read(s).ok()?;
        if p.ch.pdu_type == PduType::CapsuleResp {
            return Some(CompletionEntry::from_bytes(p.specific()[..16].try_into().unwrap()));
        }
    }
}

/// An admin queue, then an I/O queue of its controller carrying the
/// framed records of `rest`.
fn io_queue(addr: SocketAddr, digests: Digests, rest: &[u8]) {
    let mut admin = TcpStream::connect(addr).expect("connect");
    admin.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    admin
        .write_all(&admin_prefix(digests, Host { auth: false, negotiate: false }))
        .expect("admin queue");
    let mut ic = [0u8; 128];
    admin.read_exact(&mut ic).expect("ICResp");
    let mut reader = PduReader::new(1 << 20);
    reader.digests = digests;
    let connected = response(&mut admin, &mut reader).expect("Connect response");
    assert!(connected.status().is_success(), "admin Connect refused: {connected:?}");
    let cntlid = connected.dw0 as u16;
    for what in ["Property Set", "Number of Queues"] {
        let c = response(&mut admin, &mut reader).unwrap_or_else(|| panic!("{what}: no response"));
        assert!(c.status().is_success(), "{what} refused: {c:?}");
    }
    let mut bytes = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 }.to_bytes().to_vec();
    connect(digests, 1, cntlid, HOSTNQN, &mut bytes);
    frame(digests, rest, &mut bytes);
    exchange(addr, &bytes);
    let _ = admin.shutdown(Shutdown::Write);
    drain(&mut admin);
}
