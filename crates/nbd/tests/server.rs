//! The NBD server against its own client and raw sockets: negotiation,
//! every command, errors, malformed peers, several connections, and
//! durability of FUA and flush across a power cut of the emulated device.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use zns_device::uri::DeviceUri;
use zns_device::{DriverDevice, ZonedDevice};
use zns_ftl::testkit::{CrashDevice, PowerSwitch};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, MemoryBlockDevice};
use zns_nbd::wire::{self, cmd, errno, opt, tx};
use zns_nbd::{Export, NbdClient, NbdError, NbdServer, ServerConfig};

mod common;

fn memory_server(blocks: u64) -> (NbdServer, Arc<MemoryBlockDevice>) {
    let dev = Arc::new(MemoryBlockDevice::new(4096, blocks));
    let exports = vec![
        Export::new("mem", Arc::clone(&dev) as Arc<dyn BlockDevice>)
            .with_description("a test disk"),
        Export::new("ro", Arc::clone(&dev) as Arc<dyn BlockDevice>).read_only(true),
    ];
    let server = NbdServer::bind("127.0.0.1:0", exports, ServerConfig::default()).unwrap();
    (server, dev)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn errno_of(e: NbdError) -> u32 {
    match e {
        NbdError::Command { errno, .. } => errno,
        other => panic!("expected a command error, got {other}"),
    }
}

#[test]
fn negotiation_lists_describes_and_refuses_unknown_exports() {
    let (server, _dev) = memory_server(256);
    let addr = server.local_addr();
    assert_eq!(zns_nbd::list_exports(addr).unwrap(), vec!["mem".to_string(), "ro".to_string()]);
    let info = zns_nbd::export_info(addr, "mem").unwrap();
    assert_eq!(info.size, 256 * 4096);
    assert_eq!(info.block_sizes, Some((4096, 4096, zns_nbd::MAX_PAYLOAD)));
    assert_eq!(info.name.as_deref(), Some("mem"));
    assert_eq!(info.description.as_deref(), Some("a test disk"));
    let want = tx::HAS_FLAGS
        | tx::SEND_FLUSH
        | tx::SEND_FUA
        | tx::SEND_TRIM
        | tx::SEND_WRITE_ZEROES
        | tx::CAN_MULTI_CONN;
    assert_eq!(info.flags, want);
    let ro = zns_nbd::export_info(addr, "ro").unwrap();
    assert_ne!(ro.flags & tx::READ_ONLY, 0);
    // The empty name is the default export, the first.
    assert_eq!(zns_nbd::export_info(addr, "").unwrap().name.as_deref(), Some("mem"));
    let e = NbdClient::connect(addr, "nope").unwrap_err().to_string();
    assert!(e.contains("NBD_REP_ERR_UNKNOWN") && e.contains("exports: mem, ro"), "{e}");
    assert_eq!(server.stop().protocol_errors, 0);
}

#[test]
fn every_command_reaches_the_device() {
    let (server, dev) = memory_server(256);
    let mut c = NbdClient::connect(server.local_addr(), "mem").unwrap();
    let data = pattern(3 * 4096, 1);
    c.write(8192, &data, false).unwrap();
    c.write(65536, &data[..4096], true).unwrap();
    c.flush().unwrap();
    let mut back = vec![0u8; data.len()];
    c.read(8192, &mut back).unwrap();
    assert_eq!(back, data);
    let mut direct = vec![0u8; 4096];
    dev.read(16, &mut direct).unwrap();
    assert_eq!(direct, data[..4096]);
    // Trim and write zeroes (with and without holes) read back as zeros.
    c.trim(8192, 4096).unwrap();
    c.write_zeroes(12288, 4096, false).unwrap();
    c.write_zeroes(16384, 4096, true).unwrap();
    c.read(8192, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0));
    // A zero-length read succeeds without data.
    c.read(0, &mut []).unwrap();
    c.disconnect().unwrap();
    let stats = server.stop();
    assert_eq!(stats.bytes_written, 4 * 4096);
    assert_eq!(stats.errors, 0);
}

#[test]
fn bad_requests_get_their_errno_and_the_connection_goes_on() {
    let (server, _dev) = memory_server(16);
    let addr = server.local_addr();
    let mut c = NbdClient::connect(addr, "mem").unwrap();
    let end = 16 * 4096;
    let mut buf = vec![0u8; 4096];
    assert_eq!(errno_of(c.read(end, &mut buf).unwrap_err()), errno::EINVAL);
    assert_eq!(errno_of(c.write(end, &buf, false).unwrap_err()), errno::ENOSPC);
    assert_eq!(errno_of(c.trim(end - 4096, 8192).unwrap_err()), errno::ENOSPC);
    assert_eq!(errno_of(c.read(u64::MAX - 10, &mut buf).unwrap_err()), errno::EINVAL);
    // This client asked for block sizes: partial blocks are refused.
    assert_eq!(errno_of(c.read(100, &mut buf[..512]).unwrap_err()), errno::EINVAL);
    assert_eq!(errno_of(c.write(512, &buf[..512], false).unwrap_err()), errno::EINVAL);
    // Unknown command, unknown flag.
    let cookie = c.send(99, 0, 0, 0, &[]).unwrap();
    c.flush_requests().unwrap();
    assert_eq!(c.recv(None).unwrap(), (cookie, errno::EINVAL));
    let cookie = c.send(cmd::FLUSH, 1 << 9, 0, 0, &[]).unwrap();
    c.flush_requests().unwrap();
    assert_eq!(c.recv(None).unwrap(), (cookie, errno::EINVAL));
    // Reads above the maximum payload.
    let cookie = c.send(cmd::READ, 0, 0, zns_nbd::MAX_PAYLOAD + 4096, &[]).unwrap();
    c.flush_requests().unwrap();
    assert_eq!(c.recv(None).unwrap(), (cookie, errno::EOVERFLOW));
    // Still served.
    c.write(0, &pattern(4096, 9), false).unwrap();
    c.read(0, &mut buf).unwrap();
    assert_eq!(buf, pattern(4096, 9));
    let mut ro = NbdClient::connect(addr, "ro").unwrap();
    assert_eq!(errno_of(ro.write(0, &buf, false).unwrap_err()), errno::EPERM);
    assert_eq!(errno_of(ro.trim(0, 4096).unwrap_err()), errno::EPERM);
    ro.read(0, &mut buf).unwrap();
    assert_eq!(buf, pattern(4096, 9));
    drop((c, ro));
    assert_eq!(server.stop().protocol_errors, 0);
}

/// A raw fixed-newstyle session that selects `name` with
/// `NBD_OPT_EXPORT_NAME`, the way old clients do.
fn export_name_session(addr: SocketAddr, name: &str) -> (TcpStream, u64, u16) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    assert_eq!(&h[0..16], b"NBDMAGICIHAVEOPT");
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.write_all(&opt::EXPORT_NAME.to_be_bytes()).unwrap();
    s.write_all(&(name.len() as u32).to_be_bytes()).unwrap();
    s.write_all(name.as_bytes()).unwrap();
    let mut r = [0u8; 10];
    s.read_exact(&mut r).unwrap();
    (s, wire::be64(&r), wire::be16(&r[8..]))
}

fn raw_request(s: &mut TcpStream, kind: u16, offset: u64, len: u32, payload: &[u8]) -> u32 {
    let req = wire::Request { flags: 0, kind, cookie: 77, offset, length: len };
    s.write_all(&req.encode()).unwrap();
    s.write_all(payload).unwrap();
    let mut r = [0u8; 16];
    s.read_exact(&mut r).unwrap();
    assert_eq!(wire::be32(&r), wire::SIMPLE_REPLY_MAGIC);
    assert_eq!(wire::be64(&r[8..]), 77);
    wire::be32(&r[4..])
}

#[test]
fn old_clients_may_send_partial_blocks() {
    let (server, dev) = memory_server(16);
    let (mut s, size, flags) = export_name_session(server.local_addr(), "mem");
    assert_eq!(size, 16 * 4096);
    assert_ne!(flags & tx::SEND_FUA, 0);
    dev.write(0, &pattern(8192, 3)).unwrap();
    // 700 bytes straddling the first block boundary.
    let patch = vec![0xEE; 700];
    assert_eq!(raw_request(&mut s, cmd::WRITE, 4000, 700, &patch), 0);
    let mut want = pattern(8192, 3);
    want[4000..4700].fill(0xEE);
    let mut got = vec![0u8; 8192];
    dev.read(0, &mut got).unwrap();
    assert_eq!(got, want);
    assert_eq!(raw_request(&mut s, cmd::READ, 3990, 20, &[]), 0);
    let mut data = [0u8; 20];
    s.read_exact(&mut data).unwrap();
    assert_eq!(&data[..], &want[3990..4010]);
    // Partial zeroing keeps the rest of the blocks.
    assert_eq!(raw_request(&mut s, cmd::WRITE_ZEROES, 100, 8000, &[]), 0);
    want[100..8100].fill(0);
    dev.read(0, &mut got).unwrap();
    assert_eq!(got, want);
    drop(s);
    assert_eq!(server.stop().protocol_errors, 0);
}

#[test]
fn a_malformed_peer_loses_only_its_own_connection() {
    let (server, _dev) = memory_server(16);
    let addr = server.local_addr();
    let mut good = NbdClient::connect(addr, "mem").unwrap();
    // Bad request magic in transmission.
    let (mut bad, _, _) = export_name_session(addr, "mem");
    bad.write_all(&[0xAB; 28]).unwrap();
    let mut rest = Vec::new();
    assert_eq!(bad.read_to_end(&mut rest).unwrap(), 0, "the server closes without replying");
    // A write longer than any payload the server takes.
    let (mut huge, _, _) = export_name_session(addr, "mem");
    let req = wire::Request { flags: 0, kind: cmd::WRITE, cookie: 1, offset: 0, length: u32::MAX };
    huge.write_all(&req.encode()).unwrap();
    assert_eq!(huge.read_to_end(&mut rest).unwrap(), 0);
    // Garbage instead of the option magic, and unknown client flags.
    let mut s = TcpStream::connect(addr).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    s.write_all(&1u32.to_be_bytes()).unwrap();
    s.write_all(&[0x55; 16]).unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    let mut s = TcpStream::connect(addr).unwrap();
    s.read_exact(&mut h).unwrap();
    s.write_all(&0x80u32.to_be_bytes()).unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    // Unknown export by name: closed, as the protocol says.
    let mut s = TcpStream::connect(addr).unwrap();
    s.read_exact(&mut h).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.write_all(&opt::EXPORT_NAME.to_be_bytes()).unwrap();
    s.write_all(&2u32.to_be_bytes()).unwrap();
    s.write_all(b"no").unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    // The well-behaved connection never noticed.
    good.write(0, &pattern(4096, 5), true).unwrap();
    let mut back = vec![0u8; 4096];
    good.read(0, &mut back).unwrap();
    assert_eq!(back, pattern(4096, 5));
    drop(good);
    let stats = server.stop();
    assert_eq!(stats.protocol_errors, 5, "{stats:?}");
}

#[test]
fn unsupported_options_are_refused_by_name() {
    let (server, _dev) = memory_server(16);
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    s.write_all(&1u32.to_be_bytes()).unwrap();
    for option in [opt::STARTTLS, opt::STRUCTURED_REPLY, 42] {
        s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
        s.write_all(&option.to_be_bytes()).unwrap();
        s.write_all(&0u32.to_be_bytes()).unwrap();
        let mut r = [0u8; 20];
        s.read_exact(&mut r).unwrap();
        assert_eq!(wire::be32(&r[8..]), option);
        assert_eq!(wire::be32(&r[12..]), wire::rep::ERR_UNSUP);
        let mut msg = vec![0u8; wire::be32(&r[16..]) as usize];
        s.read_exact(&mut msg).unwrap();
        assert!(String::from_utf8(msg).unwrap().contains("not supported"));
    }
    // Abort gets its ACK.
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.write_all(&opt::ABORT.to_be_bytes()).unwrap();
    s.write_all(&0u32.to_be_bytes()).unwrap();
    let mut r = [0u8; 20];
    s.read_exact(&mut r).unwrap();
    assert_eq!(wire::be32(&r[12..]), wire::rep::ACK);
    drop(s);
    server.stop();
}

#[test]
fn connections_beyond_the_limit_are_closed_and_stop_ends_the_rest() {
    let dev = Arc::new(MemoryBlockDevice::new(4096, 16));
    let exports = vec![Export::new("m", dev as Arc<dyn BlockDevice>)];
    let server = NbdServer::bind(
        "127.0.0.1:0",
        exports,
        ServerConfig { max_connections: 2, ..ServerConfig::default() },
    )
    .unwrap();
    let addr = server.local_addr();
    let mut a = NbdClient::connect(addr, "m").unwrap();
    let _b = NbdClient::connect(addr, "m").unwrap();
    assert!(NbdClient::connect(addr, "m").is_err());
    a.flush().unwrap();
    let stats = server.stop();
    assert_eq!((stats.connections, stats.refused), (2, 1));
    // The server is gone: the open connection is closed.
    assert!(a.flush().is_err());
}

#[test]
fn exports_are_validated() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemoryBlockDevice::new(4096, 16));
    let twice = vec![Export::new("a", Arc::clone(&dev)), Export::new("a", Arc::clone(&dev))];
    let e = NbdServer::bind("127.0.0.1:0", twice, ServerConfig::default()).unwrap_err();
    assert!(e.to_string().contains("exported twice"), "{e}");
    let e = NbdServer::bind("127.0.0.1:0", Vec::new(), ServerConfig::default()).unwrap_err();
    assert!(e.to_string().contains("at least one export"), "{e}");
    let taken =
        NbdServer::bind("127.0.0.1:0", vec![Export::new("a", dev)], ServerConfig::default())
            .unwrap();
    let dev: Arc<dyn BlockDevice> = Arc::new(MemoryBlockDevice::new(4096, 16));
    let e =
        NbdServer::bind(taken.local_addr(), vec![Export::new("a", dev)], ServerConfig::default())
            .unwrap_err();
    assert!(matches!(e, NbdError::Bind { .. }), "{e}");
}

/// An FTL on an emulated device whose power can be cut.
struct Rig {
    uri: String,
    emu: Arc<zns_emulator::Controller>,
    memory: Arc<zns_emulator::host::ProcessMemory>,
    switch: Arc<PowerSwitch>,
}

impl Rig {
    fn new(uri: &str) -> (Rig, Arc<dyn ZonedDevice>) {
        let DeviceUri::Emulator(e) = uri.parse::<DeviceUri>().unwrap() else { panic!("{uri}") };
        let d = DriverDevice::open_emulator(&e, uri).unwrap();
        let rig = Rig {
            uri: uri.into(),
            emu: Arc::clone(d.emulator().unwrap()),
            memory: Arc::clone(d.host_memory().unwrap()),
            switch: PowerSwitch::new(),
        };
        let dev = rig.crashable(Arc::new(d));
        (rig, dev)
    }

    fn crashable(&self, d: Arc<dyn ZonedDevice>) -> Arc<dyn ZonedDevice> {
        Arc::new(CrashDevice::new(d, Arc::clone(&self.switch)))
    }

    /// Cuts power with `ftl` and the server still holding it; returns the
    /// device as it comes back.
    fn cut(&self, server: NbdServer, ftl: Arc<Ftl>) -> Arc<dyn ZonedDevice> {
        self.switch.arm(0);
        server.stop();
        drop(ftl);
        self.emu.power_cut(7);
        self.switch.disarm();
        let d =
            DriverDevice::from_emulator(Arc::clone(&self.emu), Arc::clone(&self.memory), &self.uri)
                .unwrap();
        self.crashable(Arc::new(d))
    }
}

#[test]
fn fua_and_a_flush_on_another_connection_survive_a_power_cut() {
    let (rig, dev) = Rig::new("emu:tiny");
    let ftl = Arc::new(Ftl::format(dev, FtlConfig::default()).unwrap());
    let exports = vec![Export::new("ftl", Arc::clone(&ftl) as Arc<dyn BlockDevice>)];
    let server = NbdServer::bind("127.0.0.1:0", exports, ServerConfig::default()).unwrap();
    let addr = server.local_addr();
    let mut a = NbdClient::connect(addr, "ftl").unwrap();
    let mut b = NbdClient::connect(addr, "ftl").unwrap();
    assert_ne!(a.flags() & tx::CAN_MULTI_CONN, 0);
    a.write(0, &pattern(8192, 1), true).unwrap();
    // Acknowledged on one connection, flushed through the other.
    a.write(256 << 10, &pattern(16384, 2), false).unwrap();
    b.flush().unwrap();
    b.write(512 << 10, &pattern(4096, 3), true).unwrap();
    drop((a, b));
    let dev = rig.cut(server, ftl);
    let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
    for (offset, len, seed) in [(0u64, 8192usize, 1u8), (256 << 10, 16384, 2), (512 << 10, 4096, 3)]
    {
        let mut back = vec![0u8; len];
        ftl.read(offset / 4096, &mut back).unwrap();
        assert!(back == pattern(len, seed), "data at byte {offset} lost in the power cut");
    }
}

#[test]
fn many_connections_write_in_parallel() {
    let dev = zns_device::open("emu:tiny").unwrap();
    let ftl = Arc::new(Ftl::format(dev, FtlConfig::default()).unwrap());
    let exports = vec![Export::new("ftl", Arc::clone(&ftl) as Arc<dyn BlockDevice>)];
    let server = NbdServer::bind("127.0.0.1:0", exports, ServerConfig::default()).unwrap();
    let addr = server.local_addr();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = NbdClient::connect(addr, "ftl").unwrap();
                for i in 0..32u64 {
                    let off = (i * 4 + t as u64) * 4096;
                    c.write(off, &pattern(4096, t.wrapping_add(i as u8)), false).unwrap();
                }
                c.flush().unwrap();
            })
        })
        .collect();
    for t in threads {
        common::join_within(t, "a client thread's 32 writes and flush");
    }
    let mut c = NbdClient::connect(addr, "ftl").unwrap();
    let mut back = vec![0u8; 4096];
    for t in 0..4u8 {
        for i in 0..32u64 {
            c.read((i * 4 + t as u64) * 4096, &mut back).unwrap();
            assert!(back == pattern(4096, t.wrapping_add(i as u8)), "thread {t} write {i}");
        }
    }
    drop(c);
    let stats = server.stop();
    assert_eq!(stats.connections, 5);
    assert_eq!(stats.bytes_written, 4 * 32 * 4096);
}

#[test]
fn a_damaged_block_reads_as_eio_and_its_neighbours_as_written() {
    let dev = zns_device::open("emu:small,zones=16").unwrap();
    let ftl = Arc::new(Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap());
    let exports = vec![Export::new("ftl", Arc::clone(&ftl) as Arc<dyn BlockDevice>)];
    let server = NbdServer::bind("127.0.0.1:0", exports, ServerConfig::default()).unwrap();
    let mut c = NbdClient::connect(server.local_addr(), "ftl").unwrap();
    let data: Vec<u8> = (0..4u8).flat_map(|b| pattern(4096, 40 + b)).collect();
    c.write(8 * 4096, &data, true).unwrap();
    // Find logical block 9 (the second block written) on the media and
    // flip one byte of it behind the FTL's back.
    let media = Arc::clone(dev.emulator().unwrap().namespaces()[0].media());
    let want = &data[4096..8192];
    let mut block = vec![0u8; 4096];
    let lba = (0..16u64 * 1024)
        .find(|&lba| {
            media.read(lba, &mut block).unwrap();
            block == want
        })
        .expect("the written block is on the media");
    block[100] ^= 1;
    media.write(lba, &block).unwrap();
    let mut back = vec![0u8; 4096];
    assert_eq!(errno_of(c.read(9 * 4096, &mut back).unwrap_err()), errno::EIO);
    c.read(8 * 4096, &mut back).unwrap();
    assert_eq!(back, data[..4096]);
    c.read(10 * 4096, &mut back).unwrap();
    assert_eq!(back, data[8192..12288]);
    drop(c);
    let stats = server.stop();
    assert_eq!(stats.protocol_errors, 0);
}
