//! Malformed hosts against a live target: valid PDU streams with random
//! bytes flipped, cut short, or followed by garbage, and random bytes
//! alone. Whatever arrives, the target must not panic, must close (or
//! keep serving) only that connection, and must go on serving a
//! well-behaved host whose data stays intact.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use zns_device::{Data, ZoneOp};
use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::ReadWrite;
use zns_spec::fabrics::{ConnectCommand, ConnectData};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{CommonHeader, Digests, IcReq, PduType};

const NQN: &str = "nqn.2026-11.io.znskit:robust";

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn capsule(digests: Digests, sqe: zns_spec::SubmissionEntry, data: &[u8]) -> Vec<u8> {
    let ch = CommonHeader::new(PduType::CapsuleCmd, digests, data.len(), 0);
    let mut b = ch.to_bytes().to_vec();
    b.extend_from_slice(&sqe.to_bytes());
    if digests.header {
        let d = zns_spec::tcp::digest(&b);
        b.extend_from_slice(&d.to_le_bytes());
    }
    b.extend_from_slice(data);
    if digests.data && !data.is_empty() {
        b.extend_from_slice(&zns_spec::tcp::digest(data).to_le_bytes());
    }
    b
}

/// A valid stream: ICReq, admin Connect, Property Set, then a write with
/// in-capsule data to a namespace (refused: the admin queue takes no I/O).
fn valid_stream(digests: Digests) -> Vec<u8> {
    let mut s = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 }.to_bytes().to_vec();
    let mut c = ConnectCommand { recfmt: 0, qid: 0, sqsize: 31, cattr: 0, kato_ms: 0 }.to_sqe();
    c.set_cid(1);
    SglDescriptor::in_capsule(0, 1024).store_in(&mut c);
    let data = ConnectData {
        host_id: [3; 16],
        cntlid: 0xFFFF,
        subnqn: NQN.into(),
        hostnqn: "nqn.x:fuzz".into(),
    };
    s.extend(capsule(digests, c, &data.to_bytes()));
    let mut p =
        zns_spec::fabrics::PropertySet { offset: 0x14, eight_bytes: false, value: 0x460061 }
            .to_sqe();
    p.set_cid(2);
    s.extend(capsule(digests, p, &[]));
    let mut w = ReadWrite::new(1, 0, 1).write().unwrap();
    w.set_cid(3);
    SglDescriptor::in_capsule(0, 4096).store_in(&mut w);
    s.extend(capsule(digests, w, &[0x5A; 4096]));
    s
}

/// Sends `bytes`, half-closes, drains what the target says until it
/// closes or goes quiet.
fn hit(addr: SocketAddr, bytes: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr) else { return };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    while let Ok(n) = s.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Cut(usize),
    Garbage(Vec<u8>),
    Random(Vec<u8>),
}

fn damage() -> impl Strategy<Value = (bool, Vec<Damage>)> {
    let one = prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Damage::Flip(i, x)),
        any::<usize>().prop_map(Damage::Cut),
        proptest::collection::vec(any::<u8>(), 1..300).prop_map(Damage::Garbage),
        proptest::collection::vec(any::<u8>(), 0..600).prop_map(Damage::Random),
    ];
    (any::<bool>(), proptest::collection::vec(one, 1..4))
}

#[test]
fn malformed_streams_harm_only_their_connection() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let dev = zns_device::open("emu:tiny").unwrap();
    let sub = Subsystem::new(NQN, vec![Arc::clone(&dev)]).unwrap();
    let target = NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap();
    let addr = target.local_addr();
    // A well-behaved host writes a block first; it must survive everything.
    let uri = format!("tcp:{addr}/{NQN}");
    let good = zns_device::open(&uri).unwrap();
    let mut q = good.queue(4).unwrap();
    let mut b = good.alloc(4096).unwrap();
    b.fill(0xC3);
    q.execute(&ZoneOp::Write { lba: 64, fua: false, placement: None }, Data::ToDevice(&b)).unwrap();
    // Reads of it in flight on the target while the others misbehave.
    for tag in 0..3 {
        q.submit(ZoneOp::Read { lba: 64 }, Some(good.alloc(4096).unwrap()), tag).unwrap();
    }
    q.ring();

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&damage(), |(digests, hits)| {
            let d = Digests { header: digests, data: digests };
            let mut bytes = valid_stream(d);
            for h in hits {
                match h {
                    // (An earlier cut may have left nothing to damage.)
                    Damage::Flip(i, x) if !bytes.is_empty() => {
                        let n = bytes.len();
                        bytes[i % n] ^= x;
                    }
                    Damage::Cut(i) if !bytes.is_empty() => {
                        let n = bytes.len();
                        bytes.truncate(i % n);
                    }
                    Damage::Flip(..) | Damage::Cut(_) => {}
                    Damage::Garbage(g) => bytes.extend(g),
                    Damage::Random(r) => bytes = r,
                }
            }
            hit(addr, &bytes);
            Ok(())
        })
        .unwrap();

    // The good host's queue and data are untouched, and new hosts connect.
    let mut answered = 0;
    q.drain(Duration::from_secs(10), &mut |c| {
        c.result.unwrap();
        assert!(c.buffer.unwrap().iter().all(|&x| x == 0xC3));
        answered += 1;
    })
    .unwrap();
    assert_eq!(answered, 3);
    let mut back = good.alloc(4096).unwrap();
    q.execute(&ZoneOp::Read { lba: 64 }, Data::FromDevice(&mut back)).unwrap();
    assert!(back.iter().all(|&x| x == 0xC3));
    let again = zns_device::open(&uri).unwrap();
    assert_eq!(again.info().zone_count, dev.info().zone_count);
    drop((q, good, again));
    let stats = target.stop();
    assert!(stats.transport_errors > 0, "no malformed stream was noticed: {stats:?}");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "the target panicked");
}
