//! NBD over TLS: real clients (`qemu-io`, `qemu-img` from qemu-utils,
//! `nbdinfo` from libnbd-bin) with x509 certificates made here by rcgen, a
//! Rust TLS client speaking the protocol by hand, plain clients refused,
//! client certificates required by a client CA, and TLS handshakes that
//! stall or trickle closed within the stall timeout.
//!
//! A missing client program skips its test, saying so, except under
//! `CI=true`, where it fails it. Every wait here is bounded.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use zns_block::{BlockDevice, MemoryBlockDevice};
use zns_nbd::wire::{self, cmd, opt, rep};
use zns_nbd::{Export, NbdClient, NbdError, NbdServer, ServerConfig, TlsConfig, TlsError};

mod common;

use common::{have, run_tool};

const STALL: Duration = Duration::from_millis(400);
/// How long a test waits for the server before failing.
const PATIENCE: Duration = Duration::from_secs(10);
const BLOCKS: u64 = 4096;
const SIZE: u64 = BLOCKS * 4096;

/// A certificate authority, and certificates it signed, in a temporary
/// directory laid out for the servers and for QEMU's and libnbd's
/// `tls-creds-x509` directories:
///
/// * `server/`: `server-cert.pem`, `server-key.pem` (for "localhost" and
///   127.0.0.1) and `ca-cert.pem`;
/// * `anonymous/`: `ca-cert.pem` only, a client without a certificate;
/// * `client/`: `ca-cert.pem`, `client-cert.pem`, `client-key.pem`, a
///   client with a certificate the CA signed;
/// * `rogue/`: the same with a client certificate another CA signed.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateDer<'static>,
    client: (CertificateDer<'static>, String),
    rogue: (CertificateDer<'static>, String),
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for `names`, signed by `issuer`: its DER, PEM, and key.
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (CertificateDer<'static>, String, String) {
    let mut p =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, issuer).unwrap();
    (cert.der().clone(), cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = new_ca("znskit test CA");
        let other = new_ca("a CA the server does not trust");
        let server_names = ["localhost", "127.0.0.1"];
        let (_, server_cert, server_key) =
            leaf(&ca, "znskit NBD server", &server_names, ExtendedKeyUsagePurpose::ServerAuth);
        let (client_der, client_cert, client_key) =
            leaf(&ca, "a client", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let (rogue_der, rogue_cert, rogue_key) =
            leaf(&other, "a rogue client", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let ca_pem = ca.pem();
        let root = dir.path();
        write(
            &root.join("server"),
            &[
                ("server-cert.pem", &server_cert),
                ("server-key.pem", &server_key),
                ("ca-cert.pem", &ca_pem),
            ],
        );
        write(&root.join("anonymous"), &[("ca-cert.pem", &ca_pem)]);
        write(
            &root.join("client"),
            &[
                ("ca-cert.pem", &ca_pem),
                ("client-cert.pem", &client_cert),
                ("client-key.pem", &client_key),
            ],
        );
        write(
            &root.join("rogue"),
            &[
                ("ca-cert.pem", &ca_pem),
                ("client-cert.pem", &rogue_cert),
                ("client-key.pem", &rogue_key),
            ],
        );
        Pki {
            dir,
            ca: ca.der().clone(),
            client: (client_der, client_key),
            rogue: (rogue_der, rogue_key),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The server's TLS settings; with `client_ca`, clients need a
    /// certificate the CA signed.
    fn server_config(&self, client_ca: bool) -> TlsConfig {
        let ca = self.path("server/ca-cert.pem");
        TlsConfig::from_pem_files(
            self.path("server/server-cert.pem"),
            self.path("server/server-key.pem"),
            client_ca.then_some(ca.as_path()),
        )
        .unwrap()
    }

    /// A rustls client trusting the CA, presenting `cert` if given.
    fn client_config(&self, cert: Option<&(CertificateDer<'static>, String)>) -> Arc<ClientConfig> {
        self.client_config_with(cert, rustls::DEFAULT_VERSIONS)
    }

    /// The same, speaking only the TLS `versions`.
    fn client_config_with(
        &self,
        cert: Option<&(CertificateDer<'static>, String)>,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Arc<ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match cert {
            Some((der, key)) => {
                use rustls::pki_types::pem::PemObject;
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
                builder.with_client_auth_cert(vec![der.clone()], key).unwrap()
            }
            None => builder.with_no_client_auth(),
        })
    }
}

/// A server requiring TLS, with a stall timeout of [`STALL`], exporting
/// "ftl", a memory disk of [`SIZE`] bytes.
fn server(pki: &Pki, client_ca: bool) -> (NbdServer, Arc<MemoryBlockDevice>) {
    let dev = Arc::new(MemoryBlockDevice::new(4096, BLOCKS));
    let exports = vec![Export::new("ftl", Arc::clone(&dev) as Arc<dyn BlockDevice>)];
    let config = ServerConfig {
        stall_timeout: STALL,
        tls: Some(pki.server_config(client_ca)),
        ..ServerConfig::default()
    };
    (NbdServer::bind("127.0.0.1:0", exports, config).unwrap(), dev)
}

/// `qemu-io` on the export with the credentials of `creds` (a directory
/// of [`Pki`]), or none (no TLS), running `commands`.
fn qemu_io(addr: SocketAddr, creds: Option<&Path>, commands: &[&str]) -> (bool, String) {
    let object =
        creds.map(|d| format!("tls-creds-x509,id=tls0,endpoint=client,dir={}", d.display()));
    let mut image = format!("driver=nbd,host={},port={},export=ftl", addr.ip(), addr.port());
    let mut args = Vec::new();
    if let Some(o) = &object {
        args.extend(["--object", o.as_str()]);
        image.push_str(",tls-creds=tls0");
    }
    for c in commands {
        args.extend(["-c", c]);
    }
    args.extend(["--image-opts", image.as_str()]);
    run_tool("qemu-io", &args)
}

const PATTERN_IO: [&str; 4] =
    ["write -P 0xa5 0 1M", "write -P 0x3c 1M 64k", "read -P 0xa5 0 1M", "read -P 0x3c 1M 64k"];

/// qemu-io's output shows every command of [`PATTERN_IO`] done and no
/// pattern mismatch.
fn assert_pattern_io(ok: bool, out: &str) {
    assert!(ok && !out.contains("fail") && !out.contains("error"), "{out}");
    assert_eq!(out.matches("wrote ").count(), 2, "{out}");
    assert_eq!(out.matches("read ").count(), 2, "{out}");
}

fn assert_memory_holds_the_pattern(dev: &MemoryBlockDevice) {
    let mut back = vec![0u8; 1 << 20];
    dev.read(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0xa5), "the written pattern is not on the device");
    let mut back = vec![0u8; 64 << 10];
    dev.read(256, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0x3c), "the second pattern is not on the device");
}

/// (1) QEMU's NBD client, TLS by gnutls, writes and reads back patterns.
#[test]
fn qemu_io_writes_and_reads_back_over_tls() {
    if !have("qemu-io", "qemu-utils") {
        return;
    }
    let pki = Pki::new();
    let (server, dev) = server(&pki, false);
    let (ok, out) = qemu_io(server.local_addr(), Some(&pki.path("anonymous")), &PATTERN_IO);
    assert_pattern_io(ok, &out);
    assert_memory_holds_the_pattern(&dev);
    let stats = server.stop();
    assert_eq!(stats.tls_refused, 0, "{stats:?}");
    assert_eq!((stats.errors, stats.protocol_errors, stats.timeouts), (0, 0, 0), "{stats:?}");
    assert_eq!(stats.bytes_written, (1 << 20) + (64 << 10), "{stats:?}");
}

/// (2) `qemu-img info` over TLS sees the export's size.
#[test]
fn qemu_img_info_over_tls() {
    if !have("qemu-img", "qemu-utils") {
        return;
    }
    let pki = Pki::new();
    let (server, _dev) = server(&pki, false);
    let addr = server.local_addr();
    let object =
        format!("tls-creds-x509,id=tls0,endpoint=client,dir={}", pki.path("anonymous").display());
    let image =
        format!("driver=nbd,host={},port={},export=ftl,tls-creds=tls0", addr.ip(), addr.port());
    let args = ["info", "--output=json", "--object", &object, "--image-opts", &image];
    let (ok, out) = run_tool("qemu-img", &args);
    assert!(ok, "{out}");
    let info: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(info["virtual-size"], SIZE, "{out}");
    // Without the credentials, qemu-img cannot open it.
    let plain = format!("nbd://{addr}/ftl");
    let (ok, out) = run_tool("qemu-img", &["info", plain.as_str()]);
    assert!(!ok, "{out}");
    let stats = server.stop();
    assert_eq!(stats.tls_refused, 1, "{stats:?}");
}

/// (3) libnbd's `nbdinfo` over TLS (`nbds://` with the credentials'
/// directory).
#[test]
fn nbdinfo_over_tls() {
    if !have("nbdinfo", "libnbd-bin") {
        return;
    }
    let pki = Pki::new();
    let (server, _dev) = server(&pki, false);
    let addr = server.local_addr();
    let uri = format!("nbds://{addr}/ftl?tls-certificates={}", pki.path("anonymous").display());
    let (ok, out) = run_tool("nbdinfo", &["--json", uri.as_str()]);
    assert!(ok, "{out}");
    let info: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(info["TLS"], true, "{out}");
    let export = &info["exports"][0];
    assert_eq!(export["export-name"], "ftl", "{out}");
    assert_eq!(export["export-size"], SIZE, "{out}");
    // nbd:// (no TLS) is refused.
    let (ok, out) = run_tool("nbdinfo", &["--json", &format!("nbd://{addr}/ftl")]);
    assert!(!ok, "{out}");
    let stats = server.stop();
    assert_eq!((stats.tls_refused, stats.protocol_errors), (1, 0), "{stats:?}");
}

/// The greeting read and the client's flags sent: a raw fixed-newstyle
/// negotiation at its first option.
fn raw_session(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    assert_eq!(&h[0..16], b"NBDMAGICIHAVEOPT");
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    s
}

fn send_option(s: &mut impl Write, option: u32, data: &[u8]) {
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.write_all(&option.to_be_bytes()).unwrap();
    s.write_all(&(data.len() as u32).to_be_bytes()).unwrap();
    s.write_all(data).unwrap();
    s.flush().unwrap();
}

/// One option reply: its option, type and data.
fn read_reply(s: &mut impl Read) -> std::io::Result<(u32, u32, Vec<u8>)> {
    let mut r = [0u8; 20];
    s.read_exact(&mut r)?;
    assert_eq!(wire::be64(&r), wire::OPT_REPLY_MAGIC);
    let mut data = vec![0u8; wire::be32(&r[16..]) as usize];
    s.read_exact(&mut data)?;
    Ok((wire::be32(&r[8..]), wire::be32(&r[12..]), data))
}

/// `NBD_OPT_GO` data for `name`, asking for nothing.
fn go_data(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

fn closed_after(s: &mut TcpStream, since: Instant) -> Duration {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut b = [0u8; 4096];
    match s.read(&mut b) {
        Ok(0) => since.elapsed(),
        Ok(n) => panic!("the server sent {n} bytes instead of closing"),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => since.elapsed(),
        Err(e) => panic!("the server did not close the connection within {PATIENCE:?}: {e}"),
    }
}

/// (4) Clients that do not start TLS: every option but `NBD_OPT_ABORT` is
/// refused with `NBD_REP_ERR_TLS_REQD`, `NBD_OPT_EXPORT_NAME` closes the
/// connection, and QEMU without credentials cannot connect.
#[test]
fn plain_clients_are_refused_with_tls_reqd() {
    let pki = Pki::new();
    let (server, dev) = server(&pki, false);
    let addr = server.local_addr();
    for e in [
        NbdClient::connect(addr, "ftl").unwrap_err(),
        zns_nbd::list_exports(addr).unwrap_err(),
        zns_nbd::export_info(addr, "ftl").unwrap_err(),
    ] {
        let NbdError::Refused { reply, message, .. } = &e else { panic!("{e}") };
        assert_eq!(*reply, "NBD_REP_ERR_TLS_REQD", "{e}");
        assert!(message.contains("NBD_OPT_STARTTLS"), "{e}");
    }
    // Raw: refused options leave the session open; ABORT is acknowledged.
    let mut s = raw_session(addr);
    for option in [opt::LIST, opt::STRUCTURED_REPLY, opt::GO] {
        let data = if option == opt::GO { go_data("ftl") } else { Vec::new() };
        send_option(&mut s, option, &data);
        let (o, kind, _) = read_reply(&mut s).unwrap();
        assert_eq!((o, kind), (option, rep::ERR_TLS_REQD));
    }
    send_option(&mut s, opt::ABORT, &[]);
    assert_eq!(read_reply(&mut s).unwrap().1, rep::ACK);
    drop(s);
    // NBD_OPT_EXPORT_NAME cannot be refused: the connection is closed.
    let mut s = raw_session(addr);
    send_option(&mut s, opt::EXPORT_NAME, b"ftl");
    closed_after(&mut s, Instant::now());
    if have("qemu-io", "qemu-utils") {
        let (ok, out) = qemu_io(addr, None, &["write -P 0x77 0 64k"]);
        assert!(!ok && out.contains("TLS"), "{out}");
    }
    // Nothing was written.
    let mut back = vec![0u8; 4096];
    dev.read(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0));
    let stats = server.stop();
    assert_eq!(stats.requests, 0, "{stats:?}");
    // Three of the crate's client, the raw session, EXPORT_NAME, qemu-io.
    assert!(stats.tls_refused >= 5, "{stats:?}");
    assert_eq!(stats.protocol_errors, 0, "{stats:?}");
}

/// The TLS handshake after `NBD_OPT_STARTTLS` on a raw session, by rustls.
fn starttls(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> StreamOwned<ClientConnection, TcpStream> {
    let mut s = raw_session(addr);
    send_option(&mut s, opt::STARTTLS, &[]);
    assert_eq!(read_reply(&mut s).unwrap(), (opt::STARTTLS, rep::ACK, Vec::new()));
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = StreamOwned::new(ClientConnection::new(config, name).unwrap(), s);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).unwrap();
    }
    tls
}

/// A Rust client over rustls, byte by byte: inside TLS options are served
/// (never `NBD_REP_ERR_TLS_REQD`), a second `NBD_OPT_STARTTLS` is
/// invalid, and the transmission phase carries data both ways; the
/// server ends the session with `close_notify`.
#[test]
fn a_rust_tls_client_negotiates_and_transfers() {
    let pki = Pki::new();
    let (server, dev) = server(&pki, false);
    let mut s = starttls(server.local_addr(), pki.client_config(None));
    send_option(&mut s, opt::STARTTLS, &[]);
    assert_eq!(read_reply(&mut s).unwrap().1, rep::ERR_INVALID);
    send_option(&mut s, opt::LIST, &[]);
    let (_, kind, data) = read_reply(&mut s).unwrap();
    assert_eq!((kind, &data[4..]), (rep::SERVER, &b"ftl"[..]));
    assert_eq!(read_reply(&mut s).unwrap().1, rep::ACK);
    send_option(&mut s, opt::GO, &go_data("ftl"));
    loop {
        let (_, kind, data) = read_reply(&mut s).unwrap();
        if kind == rep::ACK {
            break;
        }
        assert_eq!(kind, rep::INFO);
        if wire::be16(&data) == wire::info::EXPORT {
            assert_eq!(wire::be64(&data[2..]), SIZE);
        }
    }
    // Idle between requests, past the stall timeout: the ticks of the
    // socket under TLS wake the server, which keeps the connection.
    std::thread::sleep(STALL * 2);
    // 3 MiB written in one request (three chunks), read back.
    let payload: Vec<u8> = (0..3 << 20).map(|i: u32| (i * 7 + i / 4096) as u8).collect();
    let req = |kind, cookie, length| wire::Request { flags: 0, kind, cookie, offset: 8192, length };
    s.write_all(&req(cmd::WRITE, 1, payload.len() as u32).encode()).unwrap();
    s.write_all(&payload).unwrap();
    s.write_all(&req(cmd::READ, 2, payload.len() as u32).encode()).unwrap();
    s.flush().unwrap();
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!((wire::be32(&h[4..]), wire::be64(&h[8..])), (0, 1));
    s.read_exact(&mut h).unwrap();
    assert_eq!((wire::be32(&h[4..]), wire::be64(&h[8..])), (0, 2));
    let mut back = vec![0u8; payload.len()];
    s.read_exact(&mut back).unwrap();
    assert!(back == payload, "read back differs");
    let mut direct = vec![0u8; 4096];
    dev.read(2, &mut direct).unwrap();
    assert_eq!(direct, payload[..4096]);
    s.write_all(&req(cmd::DISC, 3, 0).encode()).unwrap();
    s.flush().unwrap();
    // close_notify: a clean end of the TLS stream, not an error.
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    let stats = server.stop();
    assert_eq!((stats.tls_refused, stats.protocol_errors, stats.errors), (0, 0, 0), "{stats:?}");
    assert_eq!(stats.bytes_written, payload.len() as u64);
}

/// A TLS 1.2 client (the kernel's `nbd-client` allows only TLS 1.2 by
/// default) with a client certificate is served, and the session's
/// version is 1.2.
#[test]
fn tls_1_2_clients_are_served() {
    let pki = Pki::new();
    let (server, _dev) = server(&pki, true);
    let config = pki.client_config_with(Some(&pki.client), &[&rustls::version::TLS12]);
    let mut s = starttls(server.local_addr(), config);
    assert_eq!(s.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    send_option(&mut s, opt::GO, &go_data("ftl"));
    while read_reply(&mut s).unwrap().1 != rep::ACK {}
    let req = wire::Request { flags: 0, kind: cmd::READ, cookie: 9, offset: 0, length: 8192 };
    s.write_all(&req.encode()).unwrap();
    s.flush().unwrap();
    let mut reply = [0u8; 16 + 8192];
    s.read_exact(&mut reply).unwrap();
    assert_eq!((wire::be32(&reply[4..]), wire::be64(&reply[8..])), (0, 9));
    drop(s);
    let stats = server.stop();
    assert_eq!((stats.tls_refused, stats.bytes_read), (0, 8192), "{stats:?}");
}

/// Whether the TLS session on `s` fails (or ends) at the first option: a
/// client the server refused during the handshake learns it there (in
/// TLS 1.3 the client's side of the handshake ends first).
fn refused_in_tls(s: &mut StreamOwned<ClientConnection, TcpStream>) -> bool {
    let sent = s
        .write_all(&wire::IHAVEOPT.to_be_bytes())
        .and_then(|_| s.write_all(&opt::LIST.to_be_bytes()))
        .and_then(|_| s.write_all(&0u32.to_be_bytes()))
        .and_then(|_| s.flush());
    sent.is_err() || read_reply(s).is_err()
}

/// A client whose handshake the server refuses at once: `Err` from the
/// handshake itself, or refused at its first option.
fn tls_refused(addr: SocketAddr, config: Arc<ClientConfig>) -> bool {
    let mut s = raw_session(addr);
    send_option(&mut s, opt::STARTTLS, &[]);
    assert_eq!(read_reply(&mut s).unwrap().1, rep::ACK);
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = StreamOwned::new(ClientConnection::new(config, name).unwrap(), s);
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return true;
        }
    }
    refused_in_tls(&mut tls)
}

/// (5) With a client CA, clients need a certificate it signed: without
/// one (qemu-io, rustls) or with another CA's (rustls) the handshake
/// fails; with one (qemu-io, rustls) the export is served.
#[test]
fn a_client_ca_requires_client_certificates_it_signed() {
    let pki = Pki::new();
    let (server, dev) = server(&pki, true);
    let addr = server.local_addr();
    assert!(tls_refused(addr, pki.client_config(None)), "a client without a certificate");
    assert!(tls_refused(addr, pki.client_config(Some(&pki.rogue))), "another CA's client");
    let mut s = starttls(addr, pki.client_config(Some(&pki.client)));
    send_option(&mut s, opt::LIST, &[]);
    assert_eq!(read_reply(&mut s).unwrap().1, rep::SERVER);
    drop(s);
    let mut refused = 2;
    if have("qemu-io", "qemu-utils") {
        let (ok, out) = qemu_io(addr, Some(&pki.path("anonymous")), &["read 0 4k"]);
        assert!(!ok, "qemu-io without a client certificate: {out}");
        refused += 1;
        let (ok, out) = qemu_io(addr, Some(&pki.path("client")), &PATTERN_IO);
        assert_pattern_io(ok, &out);
        assert_memory_holds_the_pattern(&dev);
    }
    let stats = server.stop();
    assert_eq!(stats.tls_refused, refused, "{stats:?}");
    assert_eq!((stats.protocol_errors, stats.timeouts), (0, 0), "{stats:?}");
}

/// (6) A client that acknowledges TLS and then stalls in the handshake
/// (a record begun and never finished, nothing at all, or a record
/// trickled a byte at a time) is closed within the stall timeout; so is
/// one that, inside TLS, begins an option and stops.
#[test]
fn a_stalled_tls_handshake_is_closed_within_the_stall_timeout() {
    let pki = Pki::new();
    let (server, _dev) = server(&pki, false);
    let addr = server.local_addr();
    let begin = |s: &mut TcpStream| {
        send_option(s, opt::STARTTLS, &[]);
        assert_eq!(read_reply(s).unwrap().1, rep::ACK);
    };
    let assert_bounded = |after: Duration| {
        // The handshake's clock starts at the acknowledgement: the stall
        // timeout, a tick and scheduling later at most.
        assert!(after >= STALL && after < STALL * 6, "closed after {after:?}");
    };
    // Half of a ClientHello's record header.
    let mut s = raw_session(addr);
    let t = Instant::now();
    begin(&mut s);
    s.write_all(&[0x16, 0x03, 0x01]).unwrap();
    assert_bounded(closed_after(&mut s, t));
    // Nothing after the acknowledgement.
    let mut s = raw_session(addr);
    let t = Instant::now();
    begin(&mut s);
    assert_bounded(closed_after(&mut s, t));
    // A record of 512 bytes, a byte every eighth of the stall timeout.
    let mut s = raw_session(addr);
    let t = Instant::now();
    begin(&mut s);
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    let mut trickle = s.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        for _ in 0..512 {
            std::thread::sleep(STALL / 8);
            if trickle.write_all(&[0x01]).is_err() {
                return;
            }
        }
    });
    assert_bounded(closed_after(&mut s, t));
    drop(s);
    trickler.join().unwrap();
    // Half an option inside TLS.
    let mut s = starttls(addr, pki.client_config(None));
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.flush().unwrap();
    let t = Instant::now();
    let after = closed_after(&mut s.sock, t);
    assert!(after >= STALL && after < STALL * 6, "closed after {after:?}");
    let stats = server.stop();
    assert_eq!((stats.timeouts, stats.tls_refused), (4, 0), "{stats:?}");
}

/// Certificates and keys that cannot be used are refused with errors
/// naming the file and the problem.
#[test]
fn unusable_certificates_and_keys_are_refused_by_name() {
    let pki = Pki::new();
    let cert = pki.path("server/server-cert.pem");
    let key = pki.path("server/server-key.pem");
    let missing = pki.path("server/none.pem");
    let e = TlsConfig::from_pem_files(&missing, &key, None).unwrap_err();
    assert!(matches!(e, TlsError::Read { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with("cannot read certificate") && msg.contains("none.pem"), "{msg}");
    // A key where the certificate should be, and the reverse.
    let e = TlsConfig::from_pem_files(&key, &key, None).unwrap_err().to_string();
    assert!(e.contains("server-key.pem holds no certificate"), "{e}");
    let e = TlsConfig::from_pem_files(&cert, &cert, None).unwrap_err().to_string();
    assert!(e.contains("server-cert.pem holds no private key"), "{e}");
    // Another certificate's key.
    let other = pki.path("client/client-key.pem");
    let e = TlsConfig::from_pem_files(&cert, &other, None).unwrap_err();
    assert!(matches!(e, TlsError::KeyMismatch), "{e}");
    // A client CA file without certificates.
    let e = TlsConfig::from_pem_files(&cert, &key, Some(&key)).unwrap_err().to_string();
    assert!(e.contains("holds no client CA certificate"), "{e}");
    let e = TlsConfig::from_pem_files(&cert, &key, Some(&missing)).unwrap_err().to_string();
    assert!(e.starts_with("cannot read client CA certificate"), "{e}");
    let good = TlsConfig::from_pem_files(&cert, &key, Some(&pki.path("server/ca-cert.pem")));
    assert!(good.unwrap().requires_client_certificates());
}
