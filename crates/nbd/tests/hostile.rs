//! The server against hostile and broken clients: partial requests and
//! options left hanging, trickles, replies never read, 32 MiB requests
//! (streamed in chunks, memory bounded), and device failures in the middle
//! of a chunked request. Every wait here is bounded.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_block::{BlockDevice, BlockError, MemoryBlockDevice};
use zns_nbd::server::IO_BUFFER;
use zns_nbd::wire::{self, cmd, errno, opt};
use zns_nbd::{Export, NbdClient, NbdError, NbdServer, ServerConfig, MAX_PAYLOAD};

mod common;

use common::{have, run_tool};

const STALL: Duration = Duration::from_millis(300);
/// How long a test waits for anything before failing.
const PATIENCE: Duration = Duration::from_secs(5);
const MIB: usize = 1 << 20;
/// 40 MiB of 4 KiB blocks: room for a maximal request.
const BLOCKS: u64 = 10 * 1024;

/// A block device that fails reads and writes of one chosen block.
struct Faulty {
    inner: MemoryBlockDevice,
    bad: AtomicU64,
}

impl Faulty {
    fn hits(&self, lba: u64, len: usize) -> bool {
        let bad = self.bad.load(Ordering::Relaxed);
        (lba..lba + (len / 4096) as u64).contains(&bad)
    }
    fn fail(&self) -> BlockError {
        BlockError::failed("injected failure")
    }
}

impl BlockDevice for Faulty {
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn capacity_blocks(&self) -> u64 {
        self.inner.capacity_blocks()
    }
    fn read(&self, lba: u64, buf: &mut [u8]) -> zns_block::Result<()> {
        if self.hits(lba, buf.len()) {
            return Err(self.fail());
        }
        self.inner.read(lba, buf)
    }
    fn write(&self, lba: u64, buf: &[u8]) -> zns_block::Result<()> {
        if self.hits(lba, buf.len()) {
            return Err(self.fail());
        }
        self.inner.write(lba, buf)
    }
    fn flush(&self) -> zns_block::Result<()> {
        Ok(())
    }
    fn discard(&self, lba: u64, blocks: u64) -> zns_block::Result<()> {
        self.inner.discard(lba, blocks)
    }
}

/// A server with a stall timeout of [`STALL`] exporting "mem", a device
/// whose block `dev.bad` fails (none at first).
fn server() -> (NbdServer, Arc<Faulty>) {
    let dev = Arc::new(Faulty {
        inner: MemoryBlockDevice::new(4096, BLOCKS),
        bad: AtomicU64::new(u64::MAX),
    });
    let exports = vec![Export::new("mem", Arc::clone(&dev) as Arc<dyn BlockDevice>)];
    let config = ServerConfig { stall_timeout: STALL, ..ServerConfig::default() };
    (NbdServer::bind("127.0.0.1:0", exports, config).unwrap(), dev)
}

/// Data that differs in every 8-byte word, so a chunk landing in the
/// wrong place cannot go unnoticed.
fn pattern(len: usize, offset: u64, seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    let first = offset / 8;
    for w in first..first + len as u64 / 8 + 2 {
        v.extend_from_slice(&(w.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed).to_le_bytes());
    }
    let skip = (offset % 8) as usize;
    v[skip..skip + len].to_vec()
}

/// A write and a read back of 64 KiB: the connection works.
fn check_io(c: &mut NbdClient, seed: u64) {
    let data = pattern(64 << 10, 0, seed);
    c.write(0, &data, false).unwrap();
    let mut back = vec![0u8; data.len()];
    c.read(0, &mut back).unwrap();
    assert!(back == data, "the good client read back other data");
}

/// A raw session past negotiation (`NBD_OPT_EXPORT_NAME`, as old clients
/// do, so partial blocks are allowed).
fn raw_session(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    s.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    s.write_all(&opt::EXPORT_NAME.to_be_bytes()).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(b"mem").unwrap();
    let mut r = [0u8; 10];
    s.read_exact(&mut r).unwrap();
    s
}

fn header(kind: u16, offset: u64, length: u32) -> [u8; wire::REQUEST_LEN] {
    wire::Request { flags: 0, kind, cookie: 77, offset, length }.encode()
}

/// Sends a request (and payload) on a raw session; returns the reply's
/// errno.
fn raw_request(s: &mut TcpStream, kind: u16, offset: u64, len: u32, payload: &[u8]) -> u32 {
    s.write_all(&header(kind, offset, len)).unwrap();
    s.write_all(payload).unwrap();
    let mut r = [0u8; 16];
    s.read_exact(&mut r).unwrap();
    assert_eq!(wire::be32(&r), wire::SIMPLE_REPLY_MAGIC);
    assert_eq!(wire::be64(&r[8..]), 77);
    wire::be32(&r[4..])
}

/// Waits (at most [`PATIENCE`]) for the server to close `s` without
/// sending anything; returns the time since `since`.
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

/// Closed once the stall timeout passed, and not much later (a tick of a
/// quarter of it, plus scheduling on a busy machine).
fn assert_closed_by_the_stall_timeout(after: Duration) {
    assert!(after >= STALL && after < STALL * 8, "closed after {after:?}");
}

/// Polls (at most [`PATIENCE`]) until `cond` holds.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < PATIENCE, "{what} did not happen within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The server's one connection holds an input buffer of at most a piece
/// of payload (`zns_nbd::CHUNK`, a MiB) and a request, an output of at most
/// 256 KiB and a piece, and one block of scratch: far below the 32 MiB of
/// a buffer of a whole maximal request.
fn assert_one_connections_buffers_are_small(held: u64) {
    let most = (IO_BUFFER + 2 * MIB + 256 * 1024 + 64 * 1024) as u64;
    assert!(held > 0 && held <= most, "{held} bytes buffered at most");
}

#[test]
fn half_a_request_header_is_closed_and_others_go_on() {
    let (server, _dev) = server();
    let addr = server.local_addr();
    let mut good = NbdClient::connect(addr, "mem").unwrap();
    let mut bad = raw_session(addr);
    let t = Instant::now();
    bad.write_all(&header(cmd::READ, 0, 4096)[..10]).unwrap();
    check_io(&mut good, 1);
    assert_closed_by_the_stall_timeout(closed_after(&mut bad, t));
    check_io(&mut good, 2);
    drop(good);
    let stats = server.stop();
    assert_eq!((stats.timeouts, stats.protocol_errors), (1, 0), "{stats:?}");
}

#[test]
fn a_write_with_half_its_payload_is_closed_and_others_go_on() {
    let (server, dev) = server();
    let addr = server.local_addr();
    let mut good = NbdClient::connect(addr, "mem").unwrap();
    let mut bad = raw_session(addr);
    // 3 MiB announced, 1.5 MiB sent: the server has written a chunk of it
    // to the device and waits for the second.
    let t = Instant::now();
    bad.write_all(&header(cmd::WRITE, 4 << 20, 3 << 20)).unwrap();
    bad.write_all(&pattern(3 * MIB / 2, 0, 9)).unwrap();
    check_io(&mut good, 3);
    assert_closed_by_the_stall_timeout(closed_after(&mut bad, t));
    check_io(&mut good, 4);
    drop(good);
    let stats = server.stop();
    assert_eq!((stats.timeouts, stats.protocol_errors), (1, 0), "{stats:?}");
    // The unfinished write was not acknowledged; what reached the device
    // is whole chunks of it.
    let mut b = vec![0u8; 4096];
    dev.read(((4 << 20) + 3 * MIB / 2) as u64 / 4096, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0));
}

#[test]
fn a_trickling_client_is_closed_at_the_deadline_of_its_first_byte() {
    let (server, _dev) = server();
    let mut bad = raw_session(server.local_addr());
    let mut trickle = bad.try_clone().unwrap();
    let t = Instant::now();
    // A byte every 100 ms, each well within the stall timeout: 28 bytes of
    // header and 1 MiB of payload would take more than a day.
    let writer = std::thread::spawn(move || {
        let mut msg = header(cmd::WRITE, 0, 1 << 20).to_vec();
        msg.resize(wire::REQUEST_LEN + 64, 0x5a);
        for b in msg {
            if trickle.write_all(&[b]).is_err() || t.elapsed() > PATIENCE {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    assert_closed_by_the_stall_timeout(closed_after(&mut bad, t));
    writer.join().unwrap();
    let stats = server.stop();
    assert_eq!(stats.timeouts, 1, "{stats:?}");
}

#[test]
fn an_idle_client_is_not_closed() {
    let (server, _dev) = server();
    let mut c = NbdClient::connect(server.local_addr(), "mem").unwrap();
    check_io(&mut c, 5);
    std::thread::sleep(STALL * 3);
    check_io(&mut c, 6);
    assert_eq!(server.open_connections(), 1);
    drop(c);
    let stats = server.stop();
    assert_eq!((stats.timeouts, stats.errors), (0, 0), "{stats:?}");
}

#[test]
fn maximal_requests_are_streamed_with_one_chunk_of_buffer() {
    let (server, _dev) = server();
    let mut c = NbdClient::connect(server.local_addr(), "mem").unwrap();
    let len = MAX_PAYLOAD as usize;
    let data = pattern(len, 4096, 11);
    let mut back = vec![0u8; len];
    c.write(4096, &data, true).unwrap();
    c.read(4096, &mut back).unwrap();
    assert!(back == data, "32 MiB read back differs");
    assert_one_connections_buffers_are_small(server.peak_buffered_bytes());
    drop(c);
    wait_for("the connection's buffers to be freed", || server.buffered_bytes() == 0);
    let stats = server.stop();
    assert_eq!((stats.errors, stats.bytes_read, stats.bytes_written), (0, len as u64, len as u64));
}

#[test]
fn unaligned_requests_across_chunks_read_back_as_written() {
    let (server, dev) = server();
    let mut s = raw_session(server.local_addr());
    // 3 MiB and a bit, starting and ending inside blocks: partial first
    // and last blocks, three chunk boundaries.
    let (offset, len) = (1000u64, 3 * MIB + 5000);
    let data = pattern(len, offset, 12);
    assert_eq!(raw_request(&mut s, cmd::WRITE, offset, len as u32, &data), 0);
    let mut model = vec![0u8; 5 * MIB];
    model[offset as usize..offset as usize + len].copy_from_slice(&data);
    let mut all = vec![0u8; model.len()];
    dev.read(0, &mut all).unwrap();
    assert!(all == model, "the device holds other data");
    // Read back an unaligned range overlapping the write's ends.
    let (ro, rl) = (777u64, 3 * MIB + 9000);
    let mut back = vec![0u8; rl];
    assert_eq!(raw_request(&mut s, cmd::READ, ro, rl as u32, &[]), 0);
    s.read_exact(&mut back).unwrap();
    assert!(back[..] == model[ro as usize..ro as usize + rl], "the read differs");
    // Partial blocks went through one block of scratch, not a chunk's.
    assert_one_connections_buffers_are_small(server.peak_buffered_bytes());
    // Zeroes without holes over chunks and partial blocks.
    let wz = wire::Request {
        flags: wire::cmd_flag::NO_HOLE,
        kind: cmd::WRITE_ZEROES,
        cookie: 77,
        offset: 3000,
        length: (2 * MIB + 100) as u32,
    };
    s.write_all(&wz.encode()).unwrap();
    let mut r = [0u8; 16];
    s.read_exact(&mut r).unwrap();
    assert_eq!(wire::be32(&r[4..]), 0);
    model[3000..3000 + 2 * MIB + 100].fill(0);
    dev.read(0, &mut all).unwrap();
    assert!(all == model, "zeroing differs");
    drop(s);
    let stats = server.stop();
    assert_eq!((stats.errors, stats.protocol_errors), (0, 0), "{stats:?}");
}

#[test]
fn a_failed_chunk_of_a_write_is_reported_and_the_stream_stays_framed() {
    let (server, dev) = server();
    let mut c = NbdClient::connect(server.local_addr(), "mem").unwrap();
    // The second chunk of a 3 MiB write fails.
    dev.bad.store((MIB + 8192) as u64 / 4096, Ordering::Relaxed);
    let e = c.write(0, &pattern(3 * MIB, 0, 13), false).unwrap_err();
    assert!(matches!(e, NbdError::Command { errno: errno::EIO, .. }), "{e}");
    dev.bad.store(u64::MAX, Ordering::Relaxed);
    check_io(&mut c, 14);
    drop(c);
    assert_eq!(server.stop().protocol_errors, 0);
}

#[test]
fn a_read_failing_after_its_first_chunk_closes_the_connection() {
    let (server, dev) = server();
    let addr = server.local_addr();
    let mut c = NbdClient::connect(addr, "mem").unwrap();
    let mut back = vec![0u8; 3 * MIB];
    // In the first chunk: an error reply, and the connection goes on.
    dev.bad.store(100, Ordering::Relaxed);
    let e = c.read(0, &mut back).unwrap_err();
    assert!(matches!(e, NbdError::Command { errno: errno::EIO, .. }), "{e}");
    check_io(&mut c, 15);
    // In the third chunk: the header and two chunks went out; the client
    // sees the connection end before the rest.
    dev.bad.store((2 * MIB + 4096) as u64 / 4096, Ordering::Relaxed);
    let e = c.read(0, &mut back).unwrap_err();
    assert!(matches!(&e, NbdError::Io(io) if io.kind() == ErrorKind::UnexpectedEof), "{e}");
    dev.bad.store(u64::MAX, Ordering::Relaxed);
    let mut c = NbdClient::connect(addr, "mem").unwrap();
    check_io(&mut c, 16);
    drop(c);
    let stats = server.stop();
    assert_eq!((stats.errors, stats.protocol_errors, stats.timeouts), (2, 0, 0), "{stats:?}");
}

#[test]
fn a_client_that_does_not_read_its_replies_is_closed() {
    let (server, _dev) = server();
    let mut s = raw_session(server.local_addr());
    // 128 MiB of replies asked for and none read: more than the socket
    // buffers take, so the server's send stalls.
    for _ in 0..4 {
        s.write_all(&header(cmd::READ, 0, MAX_PAYLOAD)).unwrap();
    }
    wait_for("the stalled connection to close", || server.stats().timeouts == 1);
    drop(s);
    server.stop();
}

#[test]
fn half_an_option_and_silence_are_closed_in_negotiation() {
    let (server, _dev) = server();
    let addr = server.local_addr();
    let mut greeting = [0u8; 18];
    // Half an option.
    let mut half = TcpStream::connect(addr).unwrap();
    half.set_read_timeout(Some(PATIENCE)).unwrap();
    half.read_exact(&mut greeting).unwrap();
    let t = Instant::now();
    half.write_all(&1u32.to_be_bytes()).unwrap();
    half.write_all(&wire::IHAVEOPT.to_be_bytes()).unwrap();
    assert_closed_by_the_stall_timeout(closed_after(&mut half, t));
    // Nothing at all: closed by the negotiation deadline, twice the stall
    // timeout after connecting.
    let t = Instant::now();
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    silent.read_exact(&mut greeting).unwrap();
    let after = closed_after(&mut silent, t);
    assert!(after >= STALL * 2 && after < STALL * 10, "closed after {after:?}");
    let stats = server.stop();
    assert_eq!(stats.timeouts, 2, "{stats:?}");
}

/// `qemu-io`, a real client, with maximal requests; skipped (and said so)
/// without qemu-utils, except under `CI=true`.
#[test]
fn qemu_io_streams_maximal_requests() {
    if !have("qemu-io", "qemu-utils") {
        return;
    }
    let (server, _dev) = server();
    let url = format!("nbd://{}/mem", server.local_addr());
    let mut args = vec!["-f", "raw", url.as_str()];
    for c in [
        "write -P 0xa5 0 32M",
        "write -P 0x3c 1M 3M",
        "read -P 0xa5 0 1M",
        "read -P 0x3c 1M 3M",
        "read -P 0xa5 4M 28M",
        "write -z 2M 8M",
        "read -P 0 2M 8M",
    ] {
        args.extend(["-c", c]);
    }
    let (ok, out) = run_tool("qemu-io", &args);
    assert!(ok && !out.contains("fail") && !out.contains("error"), "{out}");
    assert_eq!(out.matches("read ").count(), 4, "{out}");
    let stats = server.stop();
    assert_eq!((stats.errors, stats.protocol_errors, stats.timeouts), (0, 0, 0), "{stats:?}");
}

#[test]
fn one_worker_serves_a_good_client_beside_stalled_and_greedy_ones() {
    let dev = Arc::new(MemoryBlockDevice::new(4096, BLOCKS));
    let export = Export::new("mem", Arc::clone(&dev) as Arc<dyn BlockDevice>);
    // One worker, and a stall timeout longer than the test: nobody here
    // is closed for stalling, and none of them may hold the worker.
    let config =
        ServerConfig { workers: 1, stall_timeout: Duration::from_secs(60), ..Default::default() };
    let server = NbdServer::bind("127.0.0.1:0", vec![export], config).unwrap();
    let addr = server.local_addr();
    let mut held = Vec::new();
    // Silent after connecting, half an option, half a request header,
    // a write with half its payload.
    held.push(TcpStream::connect(addr).unwrap());
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0, 0, 0, 3, 0x49, 0x48]).unwrap();
    held.push(s);
    let mut s = raw_session(addr);
    s.write_all(&header(cmd::READ, 0, 4096)[..11]).unwrap();
    held.push(s);
    let mut s = raw_session(addr);
    s.write_all(&header(cmd::WRITE, 0, 2 << 20)).unwrap();
    s.write_all(&pattern(MIB + 4096, 0, 3)).unwrap();
    held.push(s);
    // A client asking for 64 MiB of reads and taking none of it.
    let mut greedy = raw_session(addr);
    let _ = socket2::SockRef::from(&greedy).set_recv_buffer_size(4096);
    for _ in 0..2 {
        greedy.write_all(&header(cmd::READ, 0, MAX_PAYLOAD)).unwrap();
    }
    held.push(greedy);
    std::thread::sleep(Duration::from_millis(200));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut good = NbdClient::connect(addr, "mem").unwrap();
        check_io(&mut good, 21);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("a good client's I/O within 10 s");
    drop(held);
    let stats = server.stop();
    assert_eq!(stats.timeouts, 0, "{stats:?}");
}
