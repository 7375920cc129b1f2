//! DH-HMAC-CHAP in-band authentication: znskit's initiator against the
//! target with secrets, with and without the controller proven too, wrong
//! and missing secrets refused, every secret transformation and key
//! length, and a raw host's commands before authenticating refused.

use std::sync::Arc;

use zns_device::{Data, ZoneOp, ZonedDevice};
use zns_nvmf::{HostSecrets, NvmfTarget, Subsystem, TargetConfig};
use zns_spec::auth::{Hash, Secret, AUTHENTICATION_REQUIRED, CONNECT_AUTH_REQUIRED};
use zns_spec::fabrics::ConnectData;
use zns_spec::tcp::Digests;

mod common;
use common::{Dir, Host, HOSTNQN, NQN};

/// znskit's initiator's own host NQN.
const ZNSKIT_HOST: &str = "nqn.2014-08.io.znskit:host";

fn secret(seed: u8, len: usize, transform: Option<Hash>) -> Secret {
    Secret::new((0..len as u8).map(|i| i.wrapping_mul(seed)).collect(), transform).unwrap()
}

/// A target on `emu:tiny` requiring `host` to authenticate with `secrets`.
fn target(host: &str, secrets: HostSecrets) -> NvmfTarget {
    let dev = zns_device::open("emu:tiny").unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap().with_host_secrets(host, secrets);
    NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap()
}

fn uri(t: &NvmfTarget, opts: &str) -> String {
    format!("tcp:{}/{NQN}{opts}", t.local_addr())
}

/// Writes and reads back a block through `dev`, on a fresh queue (which
/// authenticates too).
fn round_trip(dev: &Arc<dyn ZonedDevice>) {
    let mut q = dev.queue(4).unwrap();
    let bs = dev.info().block_size as usize;
    let mut buf = dev.alloc(bs).unwrap();
    buf.as_mut_slice().fill(0x5A);
    q.execute(&ZoneOp::Append { zslba: 0, fua: false }, Data::ToDevice(&buf)).unwrap();
    let mut back = dev.alloc(bs).unwrap();
    q.execute(&ZoneOp::Read { lba: 0 }, Data::FromDevice(&mut back)).unwrap();
    assert_eq!(back.as_slice(), buf.as_slice());
}

fn open_err(uri: &str) -> String {
    match zns_device::open(uri) {
        Ok(_) => panic!("{uri} opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_host_with_its_secret_authenticates_on_every_queue() {
    let s = secret(3, 32, Some(Hash::Sha256));
    let t = target(ZNSKIT_HOST, HostSecrets { host: s.clone(), controller: None });
    let dev = zns_device::open(&uri(&t, &format!(",dhchap_secret={s}"))).unwrap();
    round_trip(&dev);
    // The secret never shows in the device's URI.
    assert!(dev.info().uri.contains("dhchap_secret=(hidden)"), "{}", dev.info().uri);
    assert!(!dev.info().uri.contains(&s.to_string()));
    drop(dev);
    t.stop();
}

#[test]
fn bidirectional_authentication_proves_the_controller_too() {
    let (h, c) = (secret(5, 48, Some(Hash::Sha384)), secret(7, 64, Some(Hash::Sha512)));
    let t = target(ZNSKIT_HOST, HostSecrets { host: h.clone(), controller: Some(c.clone()) });
    let dev =
        zns_device::open(&uri(&t, &format!(",dhchap_secret={h},dhchap_ctrl_secret={c}"))).unwrap();
    round_trip(&dev);
    drop(dev);
    // A host that expects another controller secret refuses the target.
    let other = secret(11, 64, Some(Hash::Sha512));
    let e = open_err(&uri(&t, &format!(",dhchap_secret={h},dhchap_ctrl_secret={other}")));
    assert!(e.contains("controller's response does not match"), "{e}");
    t.stop();
}

#[test]
fn wrong_and_missing_secrets_are_refused() {
    let s = secret(3, 32, None);
    let t = target(ZNSKIT_HOST, HostSecrets { host: s, controller: None });
    let wrong = secret(4, 32, None);
    let e = open_err(&uri(&t, &format!(",dhchap_secret={wrong}")));
    assert!(e.contains("secret does not match"), "{e}");
    let e = open_err(&uri(&t, ""));
    assert!(e.contains("requires this host to authenticate"), "{e}");
    // A host the target has no secret for connects without one.
    let free = zns_device::open(&uri(&t, ",hostnqn=nqn.2014-08.io.znskit:another")).unwrap();
    round_trip(&free);
    drop(free);
    // Asking for a controller proof the target has no secret for fails.
    let s = secret(3, 32, None);
    let c = secret(9, 32, None);
    let e = open_err(&uri(&t, &format!(",dhchap_secret={s},dhchap_ctrl_secret={c}")));
    assert!(e.contains("refused"), "{e}");
    t.stop();
}

#[test]
fn every_transformation_and_key_length_agrees_between_the_two_sides() {
    for (len, transform) in
        [(32, None), (32, Some(Hash::Sha256)), (48, Some(Hash::Sha384)), (64, Some(Hash::Sha512))]
    {
        let s = secret(13, len, transform);
        let t = target(ZNSKIT_HOST, HostSecrets { host: s.clone(), controller: None });
        let dev = zns_device::open(&uri(&t, &format!(",dhchap_secret={s}")))
            .unwrap_or_else(|e| panic!("{len} bytes, {transform:?}: {e}"));
        drop(dev);
        t.stop();
    }
}

#[test]
fn a_raw_host_that_does_not_authenticate_gets_authentication_required() {
    let t = target(HOSTNQN, HostSecrets { host: secret(3, 32, None), controller: None });
    let mut h = Host::connect(t.local_addr(), Digests::default());
    let c = h.fabric_connect_kato(0, ConnectData::ANY_CONTROLLER, NQN, 0);
    assert!(c.status().is_success());
    assert_ne!(c.dw0 & CONNECT_AUTH_REQUIRED, 0, "Connect asks for authentication");
    // Property Get before authenticating.
    let (c, _) =
        h.cmd(zns_spec::fabrics::PropertyGet { offset: 0, eight_bytes: true }.to_sqe(), Dir::None);
    assert_eq!(c.status(), AUTHENTICATION_REQUIRED);
    // An out-of-turn Receive gets AUTH_Failure1, and the queue closes.
    let (c, d) = h.cmd(zns_spec::auth::AuthCommand::receive(4096).to_sqe(), Dir::In(4096));
    assert!(c.status().is_success());
    assert_eq!(
        zns_spec::auth::kind(&d),
        Some((zns_spec::auth::TYPE_COMMON, zns_spec::auth::id::FAILURE1))
    );
    let mut rest = Vec::new();
    h.s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let _ = std::io::Read::read_to_end(&mut h.s, &mut rest);
    assert!(rest.is_empty(), "closed after the failure");
    t.stop();
}
