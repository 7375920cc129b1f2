//! What the NVMe/TCP examples share: the kernel's floor for 4 KiB reads
//! over loopback at QD 32, a device's first zones written for reads, and
//! random LBAs in them.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zns_device::{Data, ZoneOp, ZonedDevice};

/// Commands in flight on the measured queue.
pub const QD: usize = 32;

/// Bytes of a read's command capsule: common header and entry.
pub const REQUEST: usize = 8 + 64;

/// Bytes of a 4 KiB read's answer: C2HData header, data, response capsule.
pub const RESPONSE: usize = 24 + 4096 + 24;

/// The kernel's share at QD 32: an answering thread that sleeps in
/// blocking reads and answers each batch of requests with one send, as
/// the target does; its CPU time per request (`server_cpu_us_per_io`).
///
/// Each answer's 4 KiB is copied into the send buffer from a store of
/// `store_bytes`: with one answer's worth the bytes are always in the
/// core's cache; with a device's readable span (see [`prepare`]) each
/// answer comes from a random 4 KiB of it, so the copy pays the memory
/// traffic a read from that device's working set pays, and the floor
/// stands beside the target reading that device with data.
pub fn floor_qd32(dur: Duration, store_bytes: usize) -> Value {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut input = vec![0u8; 256 * 1024];
        let mut out = Vec::with_capacity(QD * RESPONSE);
        let store = vec![0xA5u8; store_bytes.max(RESPONSE)];
        let pages = (store.len() - RESPONSE) / 4096 + 1;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let (mut held, mut answered) = (0usize, 0u64);
        let cpu0 = thread_cpu_ns();
        // The client closes with answers unread: a reset ends the loop too.
        while let Ok(n @ 1..) = s.read(&mut input) {
            held += n;
            out.clear();
            while held >= REQUEST {
                held -= REQUEST;
                let at = (xorshift(&mut rng) % pages as u64) as usize * 4096;
                out.extend_from_slice(&store[at..at + RESPONSE]);
                answered += 1;
            }
            if s.write_all(&out).is_err() {
                break;
            }
        }
        (thread_cpu_ns() - cpu0, answered)
    });
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_nonblocking(true).unwrap();
    let batch = vec![0u8; QD * REQUEST];
    s.write_all(&batch).unwrap();
    let mut input = vec![0u8; 256 * 1024];
    let (mut held, mut done) = (0usize, 0u64);
    let start = Instant::now();
    while start.elapsed() < dur {
        let n = match s.read(&mut input) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => panic!("{e}"),
        };
        held += n;
        let whole = held / RESPONSE;
        held %= RESPONSE;
        done += whole as u64;
        if whole > 0 {
            s.set_nonblocking(false).unwrap();
            s.write_all(&batch[..whole * REQUEST]).unwrap();
            s.set_nonblocking(true).unwrap();
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(s);
    let (cpu, answered) = echo.join().unwrap();
    json!({
        "iops": (done as f64 / elapsed).round(),
        "server_cpu_us_per_io": cpu as f64 / answered.max(1) as f64 / 1e3,
        "store_bytes": store_bytes.max(RESPONSE),
    })
}

/// The calling thread's time on a CPU, in ns (`/proc/thread-self/schedstat`).
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Writes the first zones so reads find data; returns the readable span
/// in blocks.
pub fn prepare(dev: &dyn ZonedDevice) -> u64 {
    let info = dev.info().clone();
    let mut q = dev.queue(4).unwrap();
    let chunk = (info.mdts_bytes / info.block_size as usize).clamp(1, 64);
    let mut buf = dev.alloc(chunk * info.block_size as usize).unwrap();
    buf.fill(0xA5);
    let zones = prepared_zones(&info);
    for z in 0..zones {
        let start = z * info.zone_size;
        let mut lba = start;
        while lba + (chunk as u64) <= start + info.zone_capacity {
            q.execute(&ZoneOp::Write { lba, fua: false, placement: None }, Data::ToDevice(&buf))
                .unwrap();
            lba += chunk as u64;
        }
    }
    zones * info.zone_size
}

/// Zones [`prepare`] writes.
fn prepared_zones(info: &zns_device::DeviceInfo) -> u64 {
    8.min(info.zone_count)
}

/// Bytes of data [`prepare`] writes: what random reads over its span
/// touch.
pub fn readable_bytes(info: &zns_device::DeviceInfo) -> usize {
    (prepared_zones(info) * info.zone_capacity * info.block_size as u64) as usize
}

/// The next value of a xorshift generator (never 0 from a nonzero seed).
fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// A random readable LBA (inside the written part of a zone).
pub fn lba(rng: &mut u64, info: &zns_device::DeviceInfo, span: u64) -> u64 {
    let r = xorshift(rng);
    let zone = (r % (span / info.zone_size)) * info.zone_size;
    zone + (r >> 20) % (info.zone_capacity - 64)
}
