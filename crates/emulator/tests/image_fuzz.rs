//! The device image fuzzer: a `tiny` image with a history (an older and a
//! newer state) is damaged in every region it has (bit flips and byte
//! runs in the superblock, the profile text, both zone-state slots, the
//! checksum and data regions; records forged with valid checksums;
//! truncation to every region boundary; extension; a slot copied from the
//! older image), and every damaged copy is opened as `emu:file=` would be.
//!
//! Each open either fails with one line naming the image, or comes up with
//! exactly the zone state of a valid slot, and then every readable block
//! returns data that was once written there (or zeros), or fails with a
//! checksum error: never other data, never a panic. The image check agrees:
//! an image that does not open is reported damaged, one that opens has at
//! most slot or data problems.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_emulator::harness::Harness;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::image::check::{check, CheckReport, Verdict};
use zns_emulator::image::{layout, DeviceImage, NamespaceLayout};
use zns_emulator::media::MediaError;
use zns_emulator::profile::Profile;
use zns_emulator::{Controller, Emulator, MediaChoice};
use zns_spec::SubmissionEntry;

const BS: usize = 4096;
const PAGE: usize = 4096;

/// An image as its non-zero pages and its length.
#[derive(Clone)]
struct Snapshot {
    len: u64,
    pages: Vec<(u64, Vec<u8>)>,
}

impl Snapshot {
    fn take(path: &Path) -> Snapshot {
        let bytes = std::fs::read(path).unwrap();
        let pages = bytes
            .chunks(PAGE)
            .enumerate()
            .filter(|(_, p)| p.iter().any(|&b| b != 0))
            .map(|(i, p)| ((i * PAGE) as u64, p.to_vec()))
            .collect();
        Snapshot { len: bytes.len() as u64, pages }
    }

    fn write(&self, path: &Path) {
        let f = std::fs::File::create(path).unwrap();
        f.set_len(self.len).unwrap();
        for (at, p) in &self.pages {
            f.write_all_at(p, *at).unwrap();
        }
    }

    fn read(&self, at: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        for (p_at, p) in &self.pages {
            let (a, b) = ((*p_at).max(at), (*p_at + p.len() as u64).min(at + len as u64));
            if a < b {
                out[(a - at) as usize..(b - at) as usize]
                    .copy_from_slice(&p[(a - p_at) as usize..(b - p_at) as usize]);
            }
        }
        out
    }
}

/// Everything ever written: the data each block has held, per namespace.
type History = HashMap<(u32, u64), Vec<Vec<u8>>>;

fn session(path: &Path, f: impl FnOnce(&mut Harness, &mut dyn FnMut(&mut Harness, u32, u64, u8))) {
    let memory = ProcessMemory::new();
    let ctrl = Emulator::open_image(path)
        .unwrap()
        .media(MediaChoice::Image(path.into()))
        .build(memory.clone())
        .unwrap();
    let mut h = Harness::start(ctrl, memory, 8).unwrap();
    let buf = h.buffer(BS);
    let mut write = |h: &mut Harness, nsid: u32, lba: u64, seed: u8| {
        let data: Vec<u8> = (0..BS).map(|i| (i as u8).wrapping_mul(seed) ^ seed | 1).collect();
        h.memory.write(buf.addr(), &data).unwrap();
        let mut w = SubmissionEntry::new(0x01, nsid);
        w.set_cdw10_11(lba);
        w.prp1 = buf.addr();
        assert!(h.io(w).status().is_success());
    };
    f(&mut h, &mut write);
    assert!(h.io(SubmissionEntry::new(0x00, 0xFFFF_FFFF)).status().is_success());
}

/// The base image's two states: (older, newer) snapshots and the history.
fn base(dir: &Path) -> (Snapshot, Snapshot, History, Vec<NamespaceLayout>) {
    let path = dir.join("base.img");
    // `tiny` with a conventional namespace of 128 blocks: every case is
    // checked end to end too, so the image is kept small.
    let mut profile = Profile::by_name("tiny").unwrap();
    profile.namespaces[1].blocks = 128;
    drop(DeviceImage::create(&path, &profile).unwrap());
    let mut history: History = HashMap::new();
    let mut seeds = 1u8..;
    let mut record = |nsid: u32, lba: u64| {
        let seed = seeds.next().unwrap();
        let data: Vec<u8> = (0..BS).map(|i| (i as u8).wrapping_mul(seed) ^ seed | 1).collect();
        history.entry((nsid, lba)).or_default().push(data);
        seed
    };
    let mut plan_old = Vec::new();
    for lba in (0..16).chain(64..68) {
        plan_old.push((1, lba, record(1, lba)));
    }
    for lba in 100..108 {
        plan_old.push((2, lba, record(2, lba)));
    }
    session(&path, |h, w| {
        for &(nsid, lba, seed) in &plan_old {
            w(h, nsid, lba, seed);
        }
    });
    let older = Snapshot::take(&path);
    let mut plan_new = Vec::new();
    for lba in 128..138 {
        plan_new.push((1, lba, record(1, lba)));
    }
    plan_new.push((2, 101, record(2, 101)));
    session(&path, |h, w| {
        // Zone 1 is reset: its blocks are gone in the newer state.
        let mut reset = SubmissionEntry::new(0x79, 1);
        reset.set_cdw10_11(64);
        reset.cdw13 = 0x04;
        assert!(h.io(reset).status().is_success());
        for &(nsid, lba, seed) in &plan_new {
            w(h, nsid, lba, seed);
        }
    });
    let newer = Snapshot::take(&path);
    (older, newer, history, layout(&profile))
}

/// The payloads of the slots of namespace 1 in `s` that hold a state, newest first.
fn slot_payloads(s: &Snapshot, l: &NamespaceLayout) -> Vec<Vec<u8>> {
    let mut v: Vec<(u64, Vec<u8>)> = (0..2)
        .filter_map(|k| {
            let h = s.read(l.zone_state_offset + k * l.slot_bytes, 24);
            let seq = u64::from_le_bytes(h[0..8].try_into().unwrap());
            let len = u64::from_le_bytes(h[8..16].try_into().unwrap());
            (len > 0 && len < l.slot_bytes)
                .then(|| (seq, s.read(l.zone_state_offset + k * l.slot_bytes + 24, len as usize)))
        })
        .collect();
    v.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
    v.into_iter().map(|(_, p)| p).collect()
}

/// One damaged copy to open.
struct Case {
    what: String,
    image: Snapshot,
    /// Zone states (namespace 1 payloads) an open may come up with.
    allowed: Vec<Vec<u8>>,
    /// The open must fail, with this in its line.
    must_fail: Option<&'static str>,
}

/// Opens `path` as `emu:file=` does.
fn open(path: &Path) -> Result<Arc<Controller>, String> {
    let memory = ProcessMemory::new();
    Emulator::open_image(path)
        .and_then(|b| b.media(MediaChoice::Image(path.into())).build(memory))
        .map_err(|e| e.to_string())
}

/// How the cases went, to show the fuzzer reached every outcome.
#[derive(Debug, Default)]
struct Tally {
    failed_opens: usize,
    opens: usize,
    older_states: usize,
    checksum_errors: usize,
}

/// Runs one case; `Err` describes a broken property.
fn run(
    dir: &Path,
    n: usize,
    case: &Case,
    history: &History,
    tally: &mut Tally,
) -> Result<(), String> {
    let path: PathBuf = dir.join(format!("case-{n}.img"));
    case.image.write(&path);
    let shown = path.display().to_string();
    // `zns emu check` agrees with opening: whatever fails to open is damage.
    let report = std::panic::catch_unwind(|| check(&path, false, &mut |_, _| {}))
        .map_err(|_| "check panicked")?
        .map_err(|e| format!("check failed: {e}"))?;
    let outcome = std::panic::catch_unwind(|| open(&path)).map_err(|_| "open panicked")?;
    if outcome.is_err() && report.is_ok() {
        return Err("the open fails, the check finds nothing wrong".into());
    }
    let opens_with = ["slot", "zones", "data", "metadata"];
    if outcome.is_ok() && report.problems.iter().any(|p| !opens_with.contains(&p.kind)) {
        return Err(format!("opens, but the check finds {:?}", report.problems));
    }
    let ctrl = match (outcome, case.must_fail) {
        (Err(e), want) => {
            if e.contains('\n') || !e.contains(&shown) {
                return Err(format!("error is not one line naming the image: {e}"));
            }
            if want.is_some_and(|w| !e.contains(w)) {
                return Err(format!("error does not say {want:?}: {e}"));
            }
            std::fs::remove_file(&path).unwrap();
            tally.failed_opens += 1;
            return Ok(());
        }
        (Ok(_), Some(w)) => return Err(format!("opened, but must fail ({w})")),
        (Ok(c), None) => c,
    };
    let zones = ctrl.namespaces()[0].zones().unwrap();
    let state = zones.encode_durable();
    if !case.allowed.contains(&state) {
        return Err("opened with a zone state that is in no valid slot".into());
    }
    tally.opens += 1;
    // `allowed` lists the image's newest state first.
    if state != case.allowed[0] {
        tally.older_states += 1;
    }
    let mut check = |nsid: u32, lba: u64| -> Result<(), String> {
        let ns = &ctrl.namespaces()[nsid as usize - 1];
        let mut buf = vec![0u8; BS];
        match ns.media().read(lba, &mut buf) {
            Err(MediaError::Checksum { .. }) => {
                tally.checksum_errors += 1;
                Ok(())
            }
            Err(e) => Err(format!("namespace {nsid} LBA {lba}: {e}")),
            Ok(()) if buf.iter().all(|&b| b == 0) => Ok(()),
            Ok(()) if history.get(&(nsid, lba)).is_some_and(|v| v.contains(&buf)) => Ok(()),
            Ok(()) => Err(format!("namespace {nsid} LBA {lba} returned data never written")),
        }
    };
    for z in 0..16 {
        let zi = zones.zone_info(z).unwrap();
        for lba in zi.start..zi.written_extent {
            check(1, lba)?;
        }
    }
    for lba in (96..112).chain([0, 50, 127]) {
        check(2, lba)?;
    }
    drop(ctrl);
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

/// Regions of the image to damage: (name, start, end).
fn regions(l: &[NamespaceLayout], profile_len: u64) -> Vec<(String, u64, u64)> {
    let mut r = vec![
        ("superblock".to_string(), 0, 4096),
        ("profile text".to_string(), 4096, 4096 + profile_len),
    ];
    for (i, l) in l.iter().enumerate() {
        let ns = i + 1;
        if l.slot_bytes > 0 {
            for (k, name) in ["A", "B"].iter().enumerate() {
                let at = l.zone_state_offset + k as u64 * l.slot_bytes;
                r.push((format!("namespace {ns} slot {name} header"), at, at + 24));
                r.push((format!("namespace {ns} slot {name} body"), at + 24, at + 2048));
            }
        }
        // The written blocks (and a few unwritten ones of namespace 2).
        let extents: &[(u64, u64)] = if ns == 1 { &[(0, 16), (128, 10)] } else { &[(96, 12)] };
        for &(lba, n) in extents {
            let sums = l.checksum_offset.unwrap() + 4 * lba;
            r.push((format!("namespace {ns} checksums of {lba}+{n}"), sums, sums + 4 * n));
            let data = l.data_offset + lba * BS as u64;
            r.push((format!("namespace {ns} data of {lba}+{n}"), data, data + n * BS as u64));
        }
    }
    r
}

#[test]
fn damaged_images_fail_with_one_line_or_open_as_a_valid_state() {
    let dir = scratch();
    let (older, newer, history, l) = base(dir.path());
    let valid = slot_payloads(&newer, &l[0]);
    assert_eq!(valid.len(), 2, "both slots of the newer image hold a state");
    let profile_len = u64::from_le_bytes(newer.read(12, 8).try_into().unwrap()) & 0xFFFF_FFFF;
    let mut rng = SmallRng::seed_from_u64(0x5EED);
    let mut cases = Vec::new();
    let case = |what: String, image: Snapshot| Case {
        what,
        image,
        allowed: valid.clone(),
        must_fail: None,
    };
    // The undamaged image opens with its newest state.
    cases.push(case("undamaged".into(), newer.clone()));
    for (name, start, end) in regions(&l, profile_len) {
        for k in 0..12 {
            let at = rng.gen_range(start..end);
            let mut img = newer.clone();
            let mut page = img.read(at, 1);
            page[0] ^= 1 << rng.gen_range(0..8);
            poke(&mut img, at, &page);
            cases.push(case(format!("{name}: bit flip at {at} ({k})"), img));
            let len = rng.gen_range(1..=256).min((end - at) as usize);
            let run: Vec<u8> = match k % 3 {
                0 => (0..len).map(|_| rng.gen()).collect(),
                1 => vec![0; len],
                _ => vec![0xFF; len],
            };
            let mut img = newer.clone();
            poke(&mut img, at, &run);
            cases.push(case(format!("{name}: {len}-byte run at {at} ({k})"), img));
        }
    }
    // Truncation to every region boundary (and just past it), extension.
    let mut bounds = vec![0, 100, 4096, 4096 + profile_len / 2];
    for l in &l {
        bounds.extend([l.zone_state_offset, l.zone_state_offset + 24, l.metadata_offset]);
        bounds.extend([l.checksum_offset.unwrap(), l.data_offset, l.data_offset + 4096]);
        bounds.push(l.data_end - 1);
    }
    for b in bounds {
        let mut img = newer.clone();
        img.len = b;
        img.pages.retain(|(at, _)| *at < b);
        if let Some((at, p)) = img.pages.last_mut() {
            p.truncate((b - *at).min(p.len() as u64) as usize);
        }
        let mut c = case(format!("truncated to {b}"), img);
        c.must_fail = Some(match b {
            b if b < 4096 => "shorter than a superblock",
            b if b < 4096 + profile_len => "shorter than its profile text",
            _ => "truncated",
        });
        cases.push(c);
    }
    for extra in [1, 4096, 1 << 20] {
        let mut img = newer.clone();
        img.len += extra;
        cases.push(case(format!("extended by {extra}"), img));
    }
    // A slot copied from the older image: the older state is a valid slot.
    for k in 0..2 {
        let at = l[0].zone_state_offset + k * l[0].slot_bytes;
        let slot = older.read(at, l[0].slot_bytes as usize);
        let mut img = newer.clone();
        poke(&mut img, at, &slot);
        let mut c = case(format!("slot {k} copied from the older image"), img);
        c.allowed.extend(slot_payloads(&older, &l[0]));
        cases.push(c);
    }
    // Forged records: slot payloads and superblocks damaged, their own
    // checksums made valid again.
    for k in 0..24 {
        let (what, img) = forge(&newer, &l[0], k, &mut rng);
        cases.push(case(what, img));
    }

    let mut broken = Vec::new();
    let mut tally = Tally::default();
    for (n, c) in cases.iter().enumerate() {
        if let Err(e) = run(dir.path(), n, c, &history, &mut tally) {
            broken.push(format!("{}: {e}", c.what));
        }
    }
    assert!(broken.is_empty(), "{} of {} cases:\n{}", broken.len(), cases.len(), broken.join("\n"));
    // Every outcome was reached: refused opens, opens, fallbacks to the
    // older slot, and damaged blocks failing their reads.
    assert!(cases.len() > 250, "{} cases", cases.len());
    assert!(tally.failed_opens > 50 && tally.opens > 50, "{tally:?}");
    assert!(tally.older_states > 0 && tally.checksum_errors > 20, "{tally:?}");
}

fn poke(img: &mut Snapshot, at: u64, bytes: &[u8]) {
    let mut i = 0;
    while i < bytes.len() {
        let pos = at + i as u64;
        let page_at = pos / PAGE as u64 * PAGE as u64;
        let idx = match img.pages.iter().position(|(a, _)| *a == page_at) {
            Some(idx) => idx,
            None => {
                img.pages.push((page_at, vec![0; PAGE]));
                img.pages.len() - 1
            }
        };
        let off = (pos - page_at) as usize;
        let n = (PAGE - off).min(bytes.len() - i);
        img.pages[idx].1[off..off + n].copy_from_slice(&bytes[i..i + n]);
        i += n;
    }
}

/// A forged record: a changed byte in a slot's payload (the slot's own
/// checksum recomputed) or in the superblock (its CRC recomputed).
fn forge(s: &Snapshot, l: &NamespaceLayout, k: u32, rng: &mut SmallRng) -> (String, Snapshot) {
    let mut img = s.clone();
    if k.is_multiple_of(2) {
        let slot_at = l.zone_state_offset + (k as u64 / 2 % 2) * l.slot_bytes;
        let mut slot = s.read(slot_at, l.slot_bytes as usize);
        let len = u64::from_le_bytes(slot[8..16].try_into().unwrap()) as usize;
        let at = 24 + rng.gen_range(0..len);
        slot[at] ^= 1 << rng.gen_range(0..8);
        let seq = u64::from_le_bytes(slot[0..8].try_into().unwrap());
        let sum = fnv(seq, &slot[24..]);
        slot[16..20].copy_from_slice(&sum.to_le_bytes());
        poke(&mut img, slot_at, &slot);
        (format!("forged slot payload byte {at}"), img)
    } else {
        let mut sb = s.read(0, 4096);
        let at = [12, 24, 28, 32, 40, 48, 56, 64, 72, 88, 96, 104, 120][k as usize / 2 % 13];
        sb[at] ^= 1 << rng.gen_range(0..8);
        sb[20..24].fill(0);
        let crc = zns_spec::crc::crc32c(&sb);
        sb[20..24].copy_from_slice(&crc.to_le_bytes());
        poke(&mut img, 0, &sb);
        (format!("forged superblock byte {at}"), img)
    }
}

/// The slot checksum (FNV-1a over the sequence number and the slot body).
fn fnv(seq: u64, data: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for b in seq.to_le_bytes().iter().chain(data) {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

// ---------------------------------------------------------------------
// Slot, metadata and data damage against the exact last flushed state.
//
// Three histories on a `tiny` image whose zoned namespace has 16 bytes of
// metadata per block: (A) a flushed state, then more data in two zones;
// (B) reset and rewrite cycles of one zone (its generation advances each
// time); (C) a zone reset as the newest record. Each damaged copy is
// checked, then opened. The property: either the open comes up with
// exactly the last flushed zone state, and every block of it reads back
// as written (or fails with Unrecovered Read Error where the check names
// it), writes refused exactly when the check found the slots untrusted;
// or the open fails with one line naming the image and the check says the
// image is not clean. Never fewer blocks, or other data, with success.
// Every few cases the copy is also repaired: a repairable image then opens
// writable with exactly that state.
// ---------------------------------------------------------------------

/// A directory for the damaged images: in shared memory where there is
/// one (opening, repairing and closing an image syncs it, which costs a
/// disk write per case elsewhere).
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    match shm.is_dir() {
        true => tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().unwrap()),
        false => tempfile::tempdir().unwrap(),
    }
}

/// Default number of damaged images; `ZNS_IMAGE_FUZZ_CASES` sets another
/// (the long run: `ZNS_IMAGE_FUZZ_CASES=100000 cargo test --release -p
/// zns-emulator --test image_fuzz`).
const DEFAULT_CASES: usize = 96;
/// Metadata bytes per block of the fuzzed zoned namespace.
const MS: usize = 16;

/// One step of a history.
#[derive(Clone, Copy)]
enum Step {
    /// Write block `lba` of namespace `nsid` with pattern `seed` (and its
    /// metadata, on namespace 1).
    Write(u32, u64, u8),
    /// Reset the zone of namespace 1 starting at this LBA.
    Reset(u64),
    /// Flush every namespace.
    Flush,
}

fn block_of(seed: u8, lba: u64) -> Vec<u8> {
    (0..BS).map(|i| (i as u8).wrapping_mul(seed | 1) ^ seed ^ (lba as u8) | 1).collect()
}

fn meta_of(seed: u8, lba: u64) -> Vec<u8> {
    (0..MS).map(|i| (i as u8) ^ seed.wrapping_mul(3) ^ (lba as u8).wrapping_add(0x40)).collect()
}

/// A history's final image and what it must read as.
struct Base {
    name: &'static str,
    image: Snapshot,
    /// The zone state of namespace 1 the undamaged image opens with.
    state: Vec<u8>,
    /// Current data and metadata per (namespace, LBA).
    data: HashMap<(u32, u64), (Vec<u8>, Vec<u8>)>,
}

fn build(dir: &Path, name: &'static str, sessions: &[Vec<Step>]) -> Base {
    let path = dir.join(format!("{name}.img"));
    let mut profile = Profile::by_name("tiny").unwrap();
    profile.namespaces[0].metadata_size = MS as u16;
    profile.namespaces[1].blocks = 128;
    drop(DeviceImage::create(&path, &profile).unwrap());
    let mut data: HashMap<(u32, u64), (Vec<u8>, Vec<u8>)> = HashMap::new();
    for steps in sessions {
        let memory = ProcessMemory::new();
        let ctrl = Emulator::open_image(&path)
            .unwrap()
            .media(MediaChoice::Image(path.clone()))
            .build(memory.clone())
            .unwrap();
        let mut h = Harness::start(ctrl, memory, 8).unwrap();
        let (buf, md) = (h.buffer(BS), h.buffer(4096));
        for step in steps {
            let mut e = match *step {
                Step::Write(nsid, lba, seed) => {
                    let (d, m) = (block_of(seed, lba), meta_of(seed, lba));
                    h.memory.write(buf.addr(), &d).unwrap();
                    let mut w = SubmissionEntry::new(0x01, nsid);
                    w.set_cdw10_11(lba);
                    w.prp1 = buf.addr();
                    if nsid == 1 {
                        h.memory.write(md.addr(), &m).unwrap();
                        w.mptr = md.addr();
                    }
                    data.insert((nsid, lba), (d, if nsid == 1 { m } else { Vec::new() }));
                    w
                }
                Step::Reset(zslba) => {
                    data.retain(|&(n, l), _| n != 1 || l / 64 != zslba / 64);
                    let mut r = SubmissionEntry::new(0x79, 1);
                    r.set_cdw10_11(zslba);
                    r.cdw13 = 0x04;
                    r
                }
                Step::Flush => SubmissionEntry::new(0x00, 0xFFFF_FFFF),
            };
            if let Step::Write(..) = step {
                e.cdw12 = 0;
            }
            let c = h.io(e);
            assert!(c.status().is_success(), "{name}: {}", c.status());
        }
    }
    let ctrl = open(&path).unwrap();
    let state = ctrl.namespaces()[0].zones().unwrap().encode_durable();
    assert!(!ctrl.namespaces()[0].write_protected());
    drop(ctrl);
    let image = Snapshot::take(&path);
    std::fs::remove_file(&path).unwrap();
    Base { name, image, state, data }
}

fn histories(dir: &Path) -> Vec<Base> {
    use Step::*;
    let w = |lbas: std::ops::Range<u64>, seed: u8| -> Vec<Step> {
        lbas.map(|l| Write(1, l, seed.wrapping_add(l as u8))).collect()
    };
    let conv = |seed: u8| -> Vec<Step> { (100..104).map(|l| Write(2, l, seed)).collect() };
    let a1 = [w(0..8, 1), w(64..72, 2), conv(3), vec![Flush]].concat();
    let a2 = [w(8..16, 4), w(128..132, 5), vec![Write(2, 101, 6), Flush]].concat();
    let b1 = [w(0..12, 7), conv(8), vec![Flush]].concat();
    let mut b2 = Vec::new();
    for (k, n) in [(0u8, 9u64), (1, 3), (2, 7), (3, 5)] {
        b2.push(Reset(0));
        b2.extend(w(0..n, 20 + k));
        b2.push(Flush);
    }
    let c1 = [w(64..72, 30), w(0..4, 31), conv(32), vec![Flush]].concat();
    let c2 = vec![Reset(64)];
    vec![
        build(dir, "writes", &[a1, a2]),
        build(dir, "cycles", &[b1, b2]),
        build(dir, "reset", &[c1, c2]),
    ]
}

/// The damage of one case: bytes to write over the base image.
struct Damage {
    what: String,
    patches: Vec<(u64, Vec<u8>)>,
}

/// Case `i`: the history and its damage. Slot flips sweep every offset of
/// both slots (a stride coprime with their length visits each once);
/// the other kinds pick written blocks at random.
fn damage(i: usize, bases: &[Base], l: &NamespaceLayout, rng: &mut SmallRng) -> (usize, Damage) {
    let b = i % bases.len();
    let base = &bases[b];
    let kind = (i / bases.len()) % 8;
    let round = i / (bases.len() * 8);
    let slots = 2 * l.slot_bytes;
    let flip = |img: &Snapshot, at: u64, mask: u8| (at, vec![img.read(at, 1)[0] ^ mask]);
    let mut written: Vec<u64> =
        base.data.keys().filter(|(n, _)| *n == 1).map(|&(_, lba)| lba).collect();
    written.sort_unstable();
    let pick = |rng: &mut SmallRng| written[rng.gen_range(0..written.len())];
    let sums = l.checksum_offset.unwrap();
    let msums = l.metadata_checksum_offset.unwrap();
    let mask = 1u8 << rng.gen_range(0..8);
    // Half the cases flip slot bytes: 4 per round and history, so every
    // offset of both slots is flipped once 2 * slot_bytes / 4 rounds have
    // run (24 cases a round: 98,304 for tiny's two 8 KiB slots).
    let kind = match kind {
        0..=3 => 0,
        4 => 2,
        5 => 3 + round % 2,
        6 => 5,
        _ => 6 + round % 2,
    };
    let sweep = round * 4 + (i / bases.len()) % 8;
    let d = match kind {
        0 | 1 => {
            // Every offset of each slot, over the rounds (7919 is coprime
            // with the slots' length, a power of two).
            let at = (sweep as u64 * 7919) % slots;
            Damage {
                what: format!("slot byte {at} flipped"),
                patches: vec![flip(&base.image, l.zone_state_offset + at, mask)],
            }
        }
        2 => {
            let at = rng.gen_range(0..slots);
            let len = rng.gen_range(1..=64).min((slots - at) as usize);
            let run: Vec<u8> = match rng.gen_range(0..3) {
                0 => (0..len).map(|_| rng.gen()).collect(),
                1 => vec![0; len],
                _ => vec![0xFF; len],
            };
            Damage {
                what: format!("{len}-byte run at slot byte {at}"),
                patches: vec![(l.zone_state_offset + at, run)],
            }
        }
        3 => {
            let lba = pick(rng);
            let at = l.metadata_offset + lba * MS as u64 + rng.gen_range(0..MS as u64);
            Damage {
                what: format!("metadata of LBA {lba} flipped"),
                patches: vec![flip(&base.image, at, mask)],
            }
        }
        4 => {
            let lba = pick(rng);
            Damage {
                what: format!("metadata of LBA {lba} zeroed"),
                patches: vec![(l.metadata_offset + lba * MS as u64, vec![0; MS])],
            }
        }
        5 => {
            let lba = pick(rng);
            let (what, at) = match rng.gen_range(0..3) {
                0 => ("data", l.data_offset + lba * BS as u64 + rng.gen_range(0..BS as u64)),
                1 => ("checksum", sums + lba * 4 + rng.gen_range(0..4)),
                _ => ("metadata checksum", msums + lba * 4 + rng.gen_range(0..4)),
            };
            Damage {
                what: format!("{what} of LBA {lba} flipped"),
                patches: vec![flip(&base.image, at, mask)],
            }
        }
        6 => {
            let (a, b2) = (rng.gen_range(0..l.slot_bytes), rng.gen_range(0..l.slot_bytes));
            Damage {
                what: format!("both slots flipped at {a} and {b2}"),
                patches: vec![
                    flip(&base.image, l.zone_state_offset + a, mask),
                    flip(&base.image, l.zone_state_offset + l.slot_bytes + b2, mask),
                ],
            }
        }
        _ => {
            let at = rng.gen_range(0..slots);
            let lba = pick(rng);
            let entry = if rng.gen() { sums } else { l.data_offset };
            let unit = if entry == sums { 4 } else { BS as u64 };
            Damage {
                what: format!("slot byte {at} and block {lba} flipped"),
                patches: vec![
                    flip(&base.image, l.zone_state_offset + at, mask),
                    flip(&base.image, entry + lba * unit + rng.gen_range(0..unit.min(4)), mask),
                ],
            }
        }
    };
    (b, d)
}

/// Checks one damaged image at `path` (the base with `d` written over it);
/// `Err` says which part of the property broke.
fn judge(path: &Path, base: &Base, repair: bool, tally: &mut Tally) -> Result<(), String> {
    let shown = path.display().to_string();
    let report = check(path, false, &mut |_, _| {}).map_err(|e| format!("check failed: {e}"))?;
    let verdict = report.verdict();
    match open(path) {
        Err(e) => {
            if e.contains('\n') || !e.contains(&shown) {
                return Err(format!("error is not one line naming the image: {e}"));
            }
            if verdict == Verdict::Clean {
                return Err(format!("the open fails ({e}), the check finds nothing wrong"));
            }
            tally.failed_opens += 1;
        }
        Ok(ctrl) => {
            tally.opens += 1;
            let untrusted = report.problems.iter().any(|p| p.kind == "slot" || p.kind == "zones");
            if ctrl.namespaces()[0].write_protected() != untrusted {
                return Err(format!(
                    "write protection {} but the check found {:?}",
                    ctrl.namespaces()[0].write_protected(),
                    report.problems
                ));
            }
            if untrusted {
                tally.older_states += 1;
            }
            exact(&ctrl, base, &report, tally)?;
        }
    }
    if !repair || verdict == Verdict::Clean {
        return Ok(());
    }
    let after = check(path, true, &mut |_, _| {}).map_err(|e| format!("repair failed: {e}"))?;
    if verdict == Verdict::Repairable {
        if after.verdict() != Verdict::Clean {
            return Err(format!("repairable, but after the repair: {:?}", after.problems));
        }
        let ctrl = open(path).map_err(|e| format!("repaired, but does not open: {e}"))?;
        if ctrl.namespaces()[0].write_protected() {
            return Err("repaired, but still write-protected".into());
        }
        exact(&ctrl, base, &after, tally)?;
    } else if after.verdict() != Verdict::Lost {
        return Err(format!("lost before the repair, {:?} after it", after.verdict()));
    }
    Ok(())
}

/// The opened state is exactly the base's last flushed state, and every
/// block of it reads as written or fails where the check named it.
fn exact(
    ctrl: &Controller,
    base: &Base,
    report: &CheckReport,
    t: &mut Tally,
) -> Result<(), String> {
    let zones = ctrl.namespaces()[0].zones().unwrap();
    if zones.encode_durable() != base.state {
        return Err(format!("opened with another zone state than the last flushed: {:?}", {
            let z: Vec<u64> = (0..16)
                .map(|i| zones.zone_info(i).map_or(0, |zi| zi.written_extent - zi.start))
                .collect();
            z
        }));
    }
    let ns = &ctrl.namespaces()[0];
    let named =
        |list: &[u64], total: u64, lba: u64| list.contains(&lba) || total > list.len() as u64;
    let r = &report.namespaces[0];
    for (&(nsid, lba), (d, m)) in &base.data {
        if nsid != 1 {
            continue;
        }
        let mut buf = vec![0u8; BS];
        match ns.media().read(lba, &mut buf) {
            Err(MediaError::Checksum { .. }) if named(&r.damaged_blocks, r.damaged_total, lba) => {
                t.checksum_errors += 1
            }
            Err(e) => return Err(format!("LBA {lba}: {e}, not named by the check")),
            Ok(()) if buf == *d => {}
            Ok(()) => return Err(format!("LBA {lba} returned other data than written")),
        }
        let mut meta = vec![0u8; MS];
        match ns.media().read_metadata(lba, &mut meta) {
            Err(MediaError::Checksum { .. })
                if named(&r.damaged_metadata, r.damaged_metadata_total, lba) =>
            {
                t.checksum_errors += 1
            }
            Err(e) => return Err(format!("metadata of LBA {lba}: {e}, not named by the check")),
            Ok(()) if meta == *m => {}
            Ok(()) => return Err(format!("metadata of LBA {lba} is not what was written")),
        }
    }
    Ok(())
}

#[test]
fn slot_metadata_and_reset_damage_never_costs_flushed_blocks() {
    let cases: usize = std::env::var("ZNS_IMAGE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let dir = scratch();
    let bases = histories(dir.path());
    let mut profile = Profile::by_name("tiny").unwrap();
    profile.namespaces[0].metadata_size = MS as u16;
    profile.namespaces[1].blocks = 128;
    let l = layout(&profile)[0];
    // Each history's undamaged image is clean and opens with its state.
    let mut tally = Tally::default();
    let path = dir.path().join("case.img");
    for base in &bases {
        base.image.write(&path);
        let r = check(&path, false, &mut |_, _| {}).unwrap();
        assert_eq!(r.verdict(), Verdict::Clean, "{}: {:?}", base.name, r.problems);
        judge(&path, base, false, &mut tally).unwrap_or_else(|e| panic!("{}: {e}", base.name));
    }
    let started = std::time::Instant::now();
    let mut rng = SmallRng::seed_from_u64(0xDA3A6E);
    let mut broken = Vec::new();
    let mut written = usize::MAX;
    for i in 0..cases {
        let (b, d) = damage(i, &bases, &l, &mut rng);
        // The base is written once per history; each case patches it and
        // puts the original bytes back afterwards.
        if written != b {
            bases[b].image.write(&path);
            written = b;
        }
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let originals: Vec<(u64, Vec<u8>)> =
            d.patches.iter().map(|(at, p)| (*at, bases[b].image.read(*at, p.len()))).collect();
        for (at, p) in &d.patches {
            f.write_all_at(p, *at).unwrap();
        }
        drop(f);
        let repair = i % 8 == 0;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            judge(&path, &bases[b], repair, &mut tally)
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => broken.push(format!("{} #{i}: {}: {e}", bases[b].name, d.what)),
            Err(_) => broken.push(format!("{} #{i}: {}: panicked", bases[b].name, d.what)),
        }
        if repair {
            written = usize::MAX;
        } else {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            for (at, p) in &originals {
                f.write_all_at(p, *at).unwrap();
            }
        }
        if broken.len() > 20 {
            break;
        }
    }
    eprintln!("{cases} damaged images in {:.1} s: {tally:?}", started.elapsed().as_secs_f64());
    assert!(broken.is_empty(), "{} cases broke:\n{}", broken.len(), broken.join("\n"));
    assert!(tally.failed_opens > 0 && tally.opens > cases / 4, "{tally:?}");
    assert!(tally.older_states > 0 && tally.checksum_errors > 0, "{tally:?}");
}
