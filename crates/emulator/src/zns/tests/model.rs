//! Model-based property test: random command sequences run against
//! [`Zones`] and against a deliberately naive reference model written here
//! (a plain vector of zones, counts recomputed by scanning, the oldest
//! implicitly opened zone found by a timestamp). Both must return the same
//! statuses, reports, descriptors, extensions, counts, durable extents and
//! durable images; counts never exceed the limits.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zns_spec::{ReportFilter, StatusCode, ZoneDescriptor, ZoneState, ZoneType};

use super::geo;
use crate::zns::{ZoneError, ZoneGeometry, Zones};

use ZoneState::*;

#[derive(Clone, Debug)]
struct MZone {
    state: ZoneState,
    /// Written blocks.
    wp: u64,
    /// Durable blocks.
    durable: u64,
    zdev: bool,
    ext: Vec<u8>,
    /// When the zone last became implicitly open.
    opened_at: u64,
}

struct Model {
    g: ZoneGeometry,
    z: Vec<MZone>,
    clock: u64,
}

impl Model {
    fn new(g: ZoneGeometry) -> Self {
        let empty = MZone {
            state: Empty,
            wp: 0,
            durable: 0,
            zdev: false,
            ext: vec![0; g.descriptor_extension_bytes],
            opened_at: 0,
        };
        Model { z: vec![empty; g.zones as usize], g, clock: 0 }
    }

    fn nsze(&self) -> u64 {
        self.g.zone_size * self.g.zones as u64
    }

    fn open(&self) -> u32 {
        self.z.iter().filter(|z| matches!(z.state, ImplicitlyOpen | ExplicitlyOpen)).count() as u32
    }

    fn active(&self) -> u32 {
        self.z
            .iter()
            .filter(|z| matches!(z.state, ImplicitlyOpen | ExplicitlyOpen | Closed))
            .count() as u32
    }

    fn implicit_by_age(&self) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = (0..self.z.len())
            .filter(|&i| self.z[i].state == ImplicitlyOpen)
            .map(|i| (self.z[i].opened_at, i as u32))
            .collect();
        v.sort();
        v.into_iter().map(|(_, i)| i).collect()
    }

    fn wipe(z: &mut MZone) {
        z.wp = 0;
        z.durable = 0;
        z.zdev = false;
        z.ext.iter_mut().for_each(|b| *b = 0);
    }

    /// Open resource check for zone `i` (Empty or Closed), closing the oldest
    /// implicitly opened zone if needed; then opens it in `to`.
    fn open_zone(&mut self, i: usize, to: ZoneState) -> Result<(), StatusCode> {
        if self.z[i].state == Empty {
            if let Some(m) = self.g.max_active {
                if self.active() >= m {
                    return Err(StatusCode::TooManyActiveZones);
                }
            }
        }
        if let Some(m) = self.g.max_open {
            if self.open() >= m {
                match self.implicit_by_age().first() {
                    Some(&v) => self.z[v as usize].state = Closed,
                    None => return Err(StatusCode::TooManyOpenZones),
                }
            }
        }
        self.clock += 1;
        self.z[i].state = to;
        self.z[i].opened_at = self.clock;
        Ok(())
    }

    fn finish(z: &mut MZone) {
        z.state = Full;
        z.durable = z.wp;
    }

    fn write(
        &mut self,
        slba: u64,
        n: u64,
        fua: bool,
        append: Option<u64>,
        data_ok: bool,
    ) -> Result<u64, Option<StatusCode>> {
        use StatusCode::*;
        let zs = self.g.zone_size;
        if n == 0 {
            return Err(Some(InvalidField));
        }
        if !matches!(slba.checked_add(n), Some(e) if e <= self.nsze()) {
            return Err(Some(LbaOutOfRange));
        }
        let i = (slba / zs) as usize;
        let start = i as u64 * zs;
        if let Some(max) = append {
            if slba != start || n > max {
                return Err(Some(InvalidField));
            }
        }
        if slba + n > start + zs {
            return Err(Some(ZoneBoundaryError));
        }
        match self.z[i].state {
            Full => return Err(Some(ZoneIsFull)),
            ReadOnly => return Err(Some(ZoneIsReadOnly)),
            Offline => return Err(Some(ZoneIsOffline)),
            _ => {}
        }
        let at = if append.is_some() { start + self.z[i].wp } else { slba };
        if at != start + self.z[i].wp {
            return Err(Some(ZoneInvalidWrite));
        }
        if self.z[i].wp + n > self.g.zone_capacity {
            return Err(Some(ZoneBoundaryError));
        }
        // Resource checks happen before the data transfer; a failed
        // transfer must leave no trace, so check on a copy.
        let saved = (self.z.clone(), self.clock);
        if matches!(self.z[i].state, Empty | Closed) {
            self.open_zone(i, ImplicitlyOpen).map_err(Some)?;
        }
        if !data_ok {
            (self.z, self.clock) = saved;
            return Err(None);
        }
        let z = &mut self.z[i];
        z.wp += n;
        if fua {
            z.durable = z.wp;
        }
        if z.wp == self.g.zone_capacity {
            Self::finish(z);
        }
        Ok(at)
    }

    fn read(&self, slba: u64, n: u64) -> Result<Vec<bool>, StatusCode> {
        let zs = self.g.zone_size;
        if n == 0 {
            return Err(StatusCode::InvalidField);
        }
        if !matches!(slba.checked_add(n), Some(e) if e <= self.nsze()) {
            return Err(StatusCode::LbaOutOfRange);
        }
        let first = (slba / zs) as usize;
        let last = ((slba + n - 1) / zs) as usize;
        if self.z[first].state == Offline {
            return Err(StatusCode::ZoneIsOffline);
        }
        if first != last && !self.g.read_across_boundaries {
            return Err(StatusCode::ZoneBoundaryError);
        }
        if (first..=last).any(|i| self.z[i].state == Offline) {
            return Err(StatusCode::ZoneIsOffline);
        }
        Ok((slba..slba + n).map(|l| l % zs < self.z[(l / zs) as usize].wp).collect())
    }

    fn send(
        &mut self,
        slba: u64,
        zsa: u8,
        all: bool,
        zrwaa: bool,
        ext: Option<&[u8]>,
    ) -> Result<(), StatusCode> {
        use StatusCode::*;
        if !all && slba >= self.nsze() {
            return Err(LbaOutOfRange);
        }
        if !matches!(zsa, 1..=5 | 0x10 | 0x11) || zsa == 0x11 && all {
            return Err(InvalidField);
        }
        // This geometry has no zone random write areas.
        if zsa == 0x11 || (zsa == 3 && zrwaa) {
            return Err(InvalidZoneOperationRequest);
        }
        let exts = self.g.descriptor_extension_bytes;
        if zsa == 0x10 && (all || exts == 0) {
            return Err(InvalidField);
        }
        if !all && slba / self.g.zone_size * self.g.zone_size != slba {
            return Err(InvalidField);
        }
        if zsa == 0x10 && !matches!(ext, Some(e) if e.len() == exts) {
            return Err(InvalidField);
        }
        if all {
            let n = self.z.len();
            match zsa {
                3 => {
                    let closed = self.z.iter().filter(|z| z.state == Closed).count() as u32;
                    if self.g.max_open.is_some_and(|m| self.open() + closed > m) {
                        return Err(TooManyOpenZones);
                    }
                    for z in self.z.iter_mut().filter(|z| z.state == Closed) {
                        z.state = ExplicitlyOpen;
                    }
                }
                1 => {
                    for z in &mut self.z {
                        if matches!(z.state, ImplicitlyOpen | ExplicitlyOpen) {
                            z.state = Closed;
                        }
                    }
                }
                2 => {
                    for z in &mut self.z {
                        if matches!(z.state, ImplicitlyOpen | ExplicitlyOpen | Closed) {
                            Self::finish(z);
                        }
                    }
                }
                4 => {
                    for i in 0..n {
                        if matches!(
                            self.z[i].state,
                            ImplicitlyOpen | ExplicitlyOpen | Closed | Full
                        ) {
                            self.z[i].state = Empty;
                            Self::wipe(&mut self.z[i]);
                        }
                    }
                }
                5 => {
                    for z in &mut self.z {
                        if z.state == ReadOnly {
                            z.state = Offline;
                            Self::wipe(z);
                        }
                    }
                }
                _ => unreachable!(),
            }
            return Ok(());
        }
        let i = (slba / self.g.zone_size) as usize;
        let s = self.z[i].state;
        match (zsa, s) {
            (3, Empty | Closed) => self.open_zone(i, ExplicitlyOpen)?,
            (3, ImplicitlyOpen) => self.z[i].state = ExplicitlyOpen,
            (3, ExplicitlyOpen) => {}
            (1, ImplicitlyOpen | ExplicitlyOpen) => self.z[i].state = Closed,
            (1, Closed) => {}
            (2, Empty | ImplicitlyOpen | ExplicitlyOpen | Closed) => Self::finish(&mut self.z[i]),
            (2, Full) => {}
            (4, ImplicitlyOpen | ExplicitlyOpen | Closed | Full) => {
                self.z[i].state = Empty;
                Self::wipe(&mut self.z[i]);
            }
            (4, Empty) => {}
            (5, ReadOnly) => {
                self.z[i].state = Offline;
                Self::wipe(&mut self.z[i]);
            }
            (5, Offline) => {}
            (0x10, Empty) => {
                if self.g.max_active.is_some_and(|m| self.active() >= m) {
                    return Err(TooManyActiveZones);
                }
                let z = &mut self.z[i];
                z.state = Closed;
                z.zdev = true;
                z.ext.copy_from_slice(ext.unwrap());
            }
            _ => return Err(InvalidZoneStateTransition),
        }
        Ok(())
    }

    fn report(
        &self,
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        extended: bool,
        len: usize,
    ) -> Result<Vec<u8>, StatusCode> {
        if slba >= self.nsze() {
            return Err(StatusCode::LbaOutOfRange);
        }
        let exts = self.g.descriptor_extension_bytes;
        if extended && exts == 0 {
            return Err(StatusCode::InvalidField);
        }
        let entry = 64 + if extended { exts } else { 0 };
        let room = if len >= 64 { (len - 64) / entry } else { 0 };
        let matching: Vec<usize> = ((slba / self.g.zone_size) as usize..self.z.len())
            .filter(|&i| {
                let s = self.z[i].state;
                match filter {
                    ReportFilter::All => true,
                    ReportFilter::Empty => s == Empty,
                    ReportFilter::ImplicitlyOpen => s == ImplicitlyOpen,
                    ReportFilter::ExplicitlyOpen => s == ExplicitlyOpen,
                    ReportFilter::Closed => s == Closed,
                    ReportFilter::Full => s == Full,
                    ReportFilter::ReadOnly => s == ReadOnly,
                    ReportFilter::Offline => s == Offline,
                    ReportFilter::ResetRecommended => false,
                }
            })
            .collect();
        let shown = matching.len().min(room);
        let mut full = vec![0u8; 64 + shown * entry];
        let count = if partial { shown } else { matching.len() } as u64;
        full[..8].copy_from_slice(&count.to_le_bytes());
        for (k, &i) in matching.iter().take(shown).enumerate() {
            let at = 64 + k * entry;
            full[at..at + 64].copy_from_slice(&self.descriptor(i).to_bytes());
            if extended {
                full[at + 64..at + entry].copy_from_slice(&self.z[i].ext);
            }
        }
        full.resize(len.max(full.len()), 0);
        full.truncate(len);
        Ok(full)
    }

    fn descriptor(&self, i: usize) -> ZoneDescriptor {
        let z = &self.z[i];
        let start = i as u64 * self.g.zone_size;
        ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state: z.state,
            attrs: zns_spec::ZoneAttributes(if z.zdev { 0x80 } else { 0 }),
            attrs_info: 0,
            capacity: self.g.zone_capacity,
            start,
            write_pointer: match z.state {
                Full | ReadOnly | Offline => u64::MAX,
                _ => start + z.wp,
            },
        }
    }

    fn set_read_only(&mut self, i: usize) -> Result<(), StatusCode> {
        match self.z[i].state {
            Offline => Err(StatusCode::InvalidZoneStateTransition),
            _ => {
                let z = &mut self.z[i];
                z.state = ReadOnly;
                z.durable = z.wp;
                Ok(())
            }
        }
    }

    fn set_offline(&mut self, i: usize) {
        self.z[i].state = Offline;
        Self::wipe(&mut self.z[i]);
    }

    /// The power-on form of a zone with `keep` written blocks.
    fn power_on(z: &mut MZone, keep: u64) {
        z.wp = keep;
        z.durable = keep;
        if matches!(z.state, ImplicitlyOpen | ExplicitlyOpen | Closed) {
            if keep == 0 && !z.zdev {
                z.state = Empty;
                Self::wipe(z);
            } else {
                z.state = Closed;
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Cmd {
    /// Write at the model's write pointer plus `delta`.
    Write {
        zone: u32,
        delta: i8,
        n: u64,
        fua: bool,
        data_ok: bool,
    },
    WriteAt {
        lba: u64,
        n: u64,
    },
    Append {
        zone: u32,
        off: u8,
        n: u64,
        max: u64,
        fua: bool,
    },
    Read {
        lba: u64,
        n: u64,
    },
    Send {
        zone: u32,
        off: u8,
        zsa: u8,
        all: bool,
        zrwaa: bool,
    },
    SetZde {
        zone: u32,
        all: bool,
        byte: u8,
        short: bool,
    },
    Report {
        lba: u64,
        filter: usize,
        partial: bool,
        extended: bool,
        len: usize,
    },
    Flush,
    ReadOnly(u32),
    Offline(u32),
    PowerCut(u64),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let zone = 0u32..8;
    prop_oneof![
        8 => (zone.clone(), prop_oneof![6 => Just(0i8), 1 => -1i8..=1], 1u64..9, any::<bool>(), prop::bool::weighted(0.95))
            .prop_map(|(zone, delta, n, fua, data_ok)| Cmd::Write { zone, delta, n, fua, data_ok }),
        1 => (0u64..70, 1u64..12).prop_map(|(lba, n)| Cmd::WriteAt { lba, n }),
        4 => (zone.clone(), prop_oneof![8 => Just(0u8), 1 => 1u8..3], 1u64..9, 1u64..8, any::<bool>())
            .prop_map(|(zone, off, n, max, fua)| Cmd::Append { zone, off, n, max, fua }),
        3 => (0u64..70, 1u64..20).prop_map(|(lba, n)| Cmd::Read { lba, n }),
        6 => (
            zone.clone(),
            prop_oneof![12 => Just(0u8), 1 => 1u8..3],
            prop::sample::select(vec![1u8, 2, 3, 4, 5, 1, 3, 4, 0x11, 0x06, 0]),
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.05),
        )
            .prop_map(|(zone, off, zsa, all, zrwaa)| Cmd::Send { zone, off, zsa, all, zrwaa }),
        2 => (zone.clone(), prop::bool::weighted(0.1), 1u8..=255, prop::bool::weighted(0.1))
            .prop_map(|(zone, all, byte, short)| Cmd::SetZde { zone, all, byte, short }),
        3 => (0u64..70, 0usize..9, any::<bool>(), any::<bool>(), prop::sample::select(vec![0usize, 10, 64, 100, 128, 200, 320, 1024, 4096]))
            .prop_map(|(lba, filter, partial, extended, len)| Cmd::Report { lba, filter, partial, extended, len }),
        1 => Just(Cmd::Flush),
        1 => zone.clone().prop_map(Cmd::ReadOnly),
        1 => zone.clone().prop_map(Cmd::Offline),
        1 => any::<u64>().prop_map(Cmd::PowerCut),
    ]
}

fn geometries() -> impl Strategy<Value = ZoneGeometry> {
    prop::sample::select(vec![
        geo(8, 8, 6, Some(2), Some(3), 64, false),
        geo(6, 4, 6, Some(1), Some(2), 0, true),
        geo(7, 7, 5, Some(3), Some(3), 64, true),
        geo(5, 3, 7, None, Some(2), 128, false),
        geo(4, 4, 6, None, None, 0, false),
        geo(10, 9, 8, Some(4), Some(6), 64, true),
    ])
}

const FILTERS: [ReportFilter; 9] = [
    ReportFilter::All,
    ReportFilter::Empty,
    ReportFilter::ImplicitlyOpen,
    ReportFilter::ExplicitlyOpen,
    ReportFilter::Closed,
    ReportFilter::Full,
    ReportFilter::ReadOnly,
    ReportFilter::Offline,
    ReportFilter::ResetRecommended,
];

fn flatten(e: ZoneError<&str>) -> Option<StatusCode> {
    match e {
        ZoneError::Status(s) => Some(s),
        ZoneError::Data(_) => None,
    }
}

fn run(g: ZoneGeometry, cmds: Vec<Cmd>) -> Result<(), TestCaseError> {
    let z = Zones::new(g.clone()).unwrap();
    let mut m = Model::new(g.clone());
    let zs = g.zone_size;
    for (step, c) in cmds.into_iter().enumerate() {
        let at = |zone: u32| u64::from(zone % g.zones) * zs;
        match c.clone() {
            Cmd::Write { zone, delta, n, fua, data_ok } => {
                let i = (zone % g.zones) as usize;
                let slba = (at(zone) + m.z[i].wp).saturating_add_signed(delta.into());
                let want = m.write(slba, n, fua, None, data_ok);
                let got = z
                    .write(slba, n, fua, |l| {
                        assert_eq!(l, slba);
                        if data_ok {
                            Ok(())
                        } else {
                            Err("media failure")
                        }
                    })
                    .map(|o| o.lba)
                    .map_err(flatten);
                prop_assert_eq!(got, want, "step {}: {:?}", step, c);
            }
            Cmd::WriteAt { lba, n } => {
                let want = m.write(lba, n, false, None, true);
                let got = z.write(lba, n, false, |_| Ok::<(), &str>(())).map(|o| o.lba);
                prop_assert_eq!(got.map_err(flatten), want, "step {}: {:?}", step, c);
            }
            Cmd::Append { zone, off, n, max, fua } => {
                let zslba = at(zone) + u64::from(off);
                let want = m.write(zslba, n, fua, Some(max), true);
                let got = z.append(zslba, n, max, fua, |_| Ok::<(), &str>(())).map(|o| o.lba);
                prop_assert_eq!(got.map_err(flatten), want, "step {}: {:?}", step, c);
            }
            Cmd::Read { lba, n } => {
                let want = m.read(lba, n);
                let mut blocks = Vec::new();
                let got = z
                    .read_extent(lba, n, |l, k, w| {
                        assert_eq!(l, lba + blocks.len() as u64, "runs are contiguous");
                        blocks.resize(blocks.len() + k as usize, w);
                    })
                    .map(|_| blocks);
                prop_assert_eq!(got, want, "step {}: {:?}", step, c);
            }
            Cmd::Send { zone, off, zsa, all, zrwaa } => {
                let slba = at(zone) + u64::from(off);
                let want = m.send(slba, zsa, all, zrwaa, None);
                let got = z.send_raw(slba, zsa, all, zrwaa, None).map(|_| ());
                prop_assert_eq!(got, want, "step {}: {:?}", step, c);
            }
            Cmd::SetZde { zone, all, byte, short } => {
                let len = g.descriptor_extension_bytes.saturating_sub(if short { 1 } else { 0 });
                let data = vec![byte; len];
                let want = m.send(at(zone), 0x10, all, false, Some(&data));
                let got = z.send_raw(at(zone), 0x10, all, false, Some(&data)).map(|_| ());
                prop_assert_eq!(got, want, "step {}: {:?}", step, c);
            }
            Cmd::Report { lba, filter, partial, extended, len } => {
                let f = FILTERS[filter];
                let want = m.report(lba, f, partial, extended, len);
                let mut out = vec![0xCCu8; len];
                let got = z.report(lba, f, partial, extended, &mut out).map(|_| out);
                prop_assert_eq!(got, want, "step {}: {:?}", step, c);
            }
            Cmd::Flush => {
                z.flush();
                for mz in &mut m.z {
                    mz.durable = mz.wp;
                }
            }
            Cmd::ReadOnly(zone) => {
                let i = zone % g.zones;
                let want = m.set_read_only(i as usize);
                prop_assert_eq!(z.set_read_only(i), want, "step {}: {:?}", step, c);
            }
            Cmd::Offline(zone) => {
                let i = zone % g.zones;
                m.set_offline(i as usize);
                prop_assert_eq!(z.set_offline(i), Ok(()), "step {}: {:?}", step, c);
            }
            Cmd::PowerCut(seed) => {
                let dropped = z.power_cut(&mut ChaCha8Rng::seed_from_u64(seed));
                let mut want_dropped = Vec::new();
                for (i, mz) in m.z.iter_mut().enumerate() {
                    let keep = z.zone_info(i as u32).unwrap().written_extent - i as u64 * zs;
                    prop_assert!(
                        keep >= mz.durable && keep <= mz.wp,
                        "step {}: zone {} kept {} outside [{}, {}]",
                        step,
                        i,
                        keep,
                        mz.durable,
                        mz.wp
                    );
                    if keep < mz.wp {
                        want_dropped.push((i as u64 * zs + keep, mz.wp - keep));
                    }
                    Model::power_on(mz, keep);
                }
                prop_assert_eq!(dropped, want_dropped, "step {}", step);
            }
        }
        // Full comparison after every command.
        for i in 0..g.zones {
            let info = z.zone_info(i).unwrap();
            let mz = &m.z[i as usize];
            prop_assert_eq!(
                z.descriptor(i).unwrap(),
                m.descriptor(i as usize),
                "step {} zone {}",
                step,
                i
            );
            prop_assert_eq!(
                info.written_extent - info.start,
                mz.wp,
                "step {} zone {} extent",
                step,
                i
            );
            prop_assert_eq!(
                info.durable_extent - info.start,
                mz.durable,
                "step {} zone {} durable",
                step,
                i
            );
            prop_assert_eq!(
                z.extension(i).unwrap(),
                mz.ext.clone(),
                "step {} zone {} ext",
                step,
                i
            );
        }
        prop_assert_eq!(
            (z.open_zones(), z.active_zones()),
            (m.open(), m.active()),
            "step {}",
            step
        );
        prop_assert_eq!(z.implicitly_opened(), m.implicit_by_age(), "step {}", step);
        if let Some(x) = g.max_open {
            prop_assert!(m.open() <= x);
        }
        if let Some(x) = g.max_active {
            prop_assert!(m.active() <= x);
        }
        if let Err(e) = z.check_invariants() {
            return Err(TestCaseError::fail(format!("step {step}: {e}")));
        }
    }
    // The durable image is the model after the worst power cut.
    let back = Zones::decode_durable(g.clone(), &z.encode_durable())
        .map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    for mz in &mut m.z {
        let keep = mz.durable;
        Model::power_on(mz, keep);
    }
    for i in 0..g.zones {
        prop_assert_eq!(back.descriptor(i).unwrap(), m.descriptor(i as usize), "image zone {}", i);
        prop_assert_eq!(back.extension(i).unwrap(), m.z[i as usize].ext.clone());
        let info = back.zone_info(i).unwrap();
        prop_assert_eq!(info.written_extent - info.start, m.z[i as usize].wp, "image zone {}", i);
    }
    prop_assert_eq!(back.active_zones(), m.active());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn zns_model_equivalence(g in geometries(), cmds in prop::collection::vec(cmd(), 1..100)) {
        run(g, cmds)?;
    }
}
