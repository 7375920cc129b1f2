//! Bringing an instance up on a base device: fitting the configuration to
//! it, formatting an empty device, or recovering from its journal and its
//! zones after a restart or a power cut.
//!
//! Recovery of a logical zone: its groups come from the journal; the last
//! group's write pointer is the end of the longest prefix of it that every
//! column holds (the columns' device write pointers, which a power cut
//! rolls back each on its own). Blocks a column holds past that point are
//! not the zone's: when there are any (or a column is full), the zone is
//! restriped at its write pointer, each column going on from its own
//! device write pointer, so no later write meets them. Open zones come
//! back Closed, a zone with nothing written comes back Empty, physical
//! zones nobody references are reset, and groups' columns that should
//! have been finished are (a parked column, which no journal entry names
//! as such, among them: it is finished at recovery).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::Mutex;
use zns_device::{
    Capabilities, DeviceInfo, ReportFilter, Target, Zone, ZoneAction, ZoneQueue, ZoneState,
    ZonedDevice,
};

use crate::alloc::{Allocator, DieMap};
use crate::arbiter::{Arbiter, Budget, Holding};
use crate::config::{Config, Mode};
use crate::control::{Control, JournalState};
use crate::error::EznsError;
use crate::journal::{self, Entry, GroupRecord, Mapping};
use crate::layout::{Column, Layout};
use crate::runtime::{
    committed, Ezns, Geometry, Group, LZone, PhysZone, Tenant, TenantStats, ZoneMap,
};
use crate::sched::{WriteAdmission, WriteTarget};
use crate::trace::Tracer;

/// What the last bring-up found and did.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryReport {
    /// The device was empty and got a fresh journal.
    pub formatted: bool,
    /// Journal generation and blocks read.
    pub journal_blocks: u64,
    /// Logical zones that came back Closed (open or closed before).
    pub closed: u32,
    /// Logical zones that came back Full.
    pub full: u32,
    /// Logical zones whose columns held blocks past the zone's recovered
    /// write pointer (a torn stripe), restriped at it.
    pub restriped: u32,
    /// Logical zones with nothing written that came back Empty.
    pub emptied: u32,
    /// Physical zones finished that should have been.
    pub finished: u32,
    /// Physical zones nothing referenced, reset.
    pub orphans: u32,
}

/// The resolved plan of a configuration on a base device.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub geo: Geometry,
    pub dies: DieMap,
    pub device_limit: u32,
    pub headroom: u32,
    pub budgets: Vec<(u32, u32)>,
    pub layout: String,
}

/// Fits `config` to the base device `info` (and its emulator, for dies).
pub(crate) fn plan(config: &Config, base: &dyn ZonedDevice) -> Result<Plan, EznsError> {
    let info = base.info();
    let fit = |reason: String| EznsError::Fit { device: info.uri.clone(), reason };
    if info.capabilities.variable_zone_capacity {
        return Err(fit("zone capacities vary between zones".into()));
    }
    let bs = info.block_size as usize;
    let unit = (config.stripe_unit_kib as u64 * 1024) / bs as u64;
    if unit == 0 || !(config.stripe_unit_kib as u64 * 1024).is_multiple_of(bs as u64) {
        return Err(fit(format!(
            "stripe_unit_kib {} is not a whole number of {bs}-byte blocks",
            config.stripe_unit_kib
        )));
    }
    if unit > info.zone_capacity {
        return Err(fit(format!(
            "the stripe unit exceeds the zone capacity ({} blocks)",
            info.zone_capacity
        )));
    }
    if info.zone_count < 3 {
        return Err(fit("fewer than 3 zones (two hold the journal)".into()));
    }
    let zones = info.zone_count.min(u32::MAX as u64) as u32;
    let mar = info.max_active.unwrap_or(zones).min(zones - 2);
    let device_limit = mar.saturating_sub(1);
    let headroom = config.headroom.unwrap_or(match config.mode {
        Mode::Elastic => config.max_width,
        Mode::Static => 0,
    });
    let usable = device_limit.saturating_sub(headroom);
    let n = config.tenants.len() as u32;
    let share = usable / n;
    let mut budgets = Vec::new();
    for t in &config.tenants {
        let a = t.active_zones;
        let essential = t.essential.unwrap_or(((share / 2) / a * a).max(a));
        let spare = t.spare.unwrap_or(share.saturating_sub(essential));
        if essential < a {
            return Err(fit(format!(
                "tenant {:?}: {essential} essential zones for {a} active logical zones (one each at least)",
                t.name
            )));
        }
        budgets.push((essential, spare));
    }
    let total: u32 = budgets.iter().map(|(e, s)| e + s).sum();
    if total > usable {
        return Err(fit(format!(
            "the tenants' essential and spare zones ({total}) exceed the device's {usable} active zones \
             (max active {mar}, less one for the journal and {headroom} of headroom)"
        )));
    }
    let scale = config.zone_scale as u64;
    let need: u64 = config.tenants.iter().map(|t| t.zones as u64 * scale).sum();
    let have = zones as u64 - 2;
    if need + device_limit as u64 > have {
        return Err(fit(format!(
            "the tenants' logical zones need {need} physical zones plus {device_limit} for stripe ends; \
             the device has {have} besides the journal"
        )));
    }
    let from_emu = base
        .emulator()
        .and_then(|e| e.profile().timing.as_ref().map(|t| (t.dies(), t.zone_stripe_dies)));
    let dies = DieMap {
        dies: config.dies.or(from_emu.map(|d| d.0)).unwrap_or(1),
        zone_dies: config.zone_dies.or(from_emu.map(|d| d.1)).unwrap_or(1),
    };
    let mut layout =
        format!("zone_scale={} phys_cap={} tenants=", config.zone_scale, info.zone_capacity);
    for t in &config.tenants {
        layout.push_str(&format!("{}:{}:{};", t.name, t.zones, t.active_zones));
    }
    let geo = Geometry {
        bs,
        phys_zones: zones,
        phys_size: info.zone_size,
        phys_cap: info.zone_capacity,
        mdts_blocks: info.max_transfer_blocks(),
        unit,
        lcap: scale * info.zone_capacity,
        lsize: scale * info.zone_size,
        journal: [0, 1],
    };
    Ok(Plan { geo, dies, device_limit, headroom, budgets, layout })
}

fn tenant_info(
    config: &Config,
    t: usize,
    base: &DeviceInfo,
    geo: &Geometry,
    uri: &str,
) -> DeviceInfo {
    let tc = &config.tenants[t];
    DeviceInfo {
        backend: "ezns",
        transport: format!("eZNS tenant {} ({}) on {}", tc.name, config.mode.name(), base.uri),
        uri: uri.to_string(),
        model: "znskit eZNS tenant namespace".into(),
        serial: format!("EZNS-{}", tc.name),
        firmware: base.firmware.clone(),
        nsid: 1,
        block_size: base.block_size,
        metadata_size: 0,
        zoned: true,
        namespace_blocks: tc.zones as u64 * geo.lsize,
        zone_count: tc.zones as u64,
        zone_size: geo.lsize,
        zone_capacity: geo.lcap,
        max_open: Some(tc.active_zones),
        max_active: Some(tc.active_zones),
        zasl_bytes: base.zasl_bytes,
        mdts_bytes: base.mdts_bytes,
        capabilities: Capabilities {
            append: true,
            copy: None,
            write_zeroes: false,
            extended_report: false,
            extension_bytes: 0,
            read_across_zone_boundaries: false,
            variable_zone_capacity: false,
            volatile_write_cache: base.capabilities.volatile_write_cache,
            select_all: true,
            offline: false,
            metadata: false,
            stores_data: base.capabilities.stores_data,
            zrwa: None,
        },
        conventional: None,
        fdp: None,
        identify: None,
    }
}

/// Blocks written in a physical zone as its report says.
fn written(z: &Zone) -> u64 {
    match z.state {
        ZoneState::Full => z.capacity,
        _ => z.written(),
    }
}

fn read_journal(
    q: &mut dyn ZoneQueue,
    z: &Zone,
    bs: usize,
    mdts: u64,
) -> Result<Vec<u8>, EznsError> {
    let n = written(z);
    let mut out = vec![0u8; n as usize * bs];
    let mut done = 0;
    while done < n {
        let k = (n - done).min(mdts);
        let mut b = q.alloc(k as usize * bs)?;
        q.read(z.start + done, &mut b)?;
        out[(done as usize * bs)..((done + k) as usize * bs)].copy_from_slice(&b);
        done += k;
    }
    Ok(out)
}

/// Opens (formats or recovers) an instance on `base`.
pub(crate) fn open(
    base: Arc<dyn ZonedDevice>,
    config: Config,
    key: Option<PathBuf>,
    uri_of: &dyn Fn(&str) -> String,
) -> Result<Arc<Ezns>, EznsError> {
    config.check()?;
    let plan = plan(&config, base.as_ref())?;
    let geo = plan.geo.clone();
    let dev_uri = base.info().uri.clone();
    let mut q = base.queue(64)?;
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX)?;
    if zones.len() as u64 != geo.phys_zones as u64 {
        return Err(EznsError::Damaged {
            device: dev_uri,
            reason: format!("the zone report lists {} of {} zones", zones.len(), geo.phys_zones),
        });
    }
    let fresh = zones.iter().all(|z| z.state == ZoneState::Empty);
    let (state, mapping) = replay_journal(q.as_mut(), &zones, &plan, &config, &dev_uri, fresh)?;
    let digest = state.digest;
    let mut ctl = Control::new(q, geo.bs, state, mapping);
    if fresh {
        ctl.record(Entry::Super { digest, layout: plan.layout.clone() });
        ctl.record(Entry::End);
        let size = geo.phys_size;
        ctl.sync(|z| z as u64 * size)?;
    }
    let tenants = new_tenants(&config, base.info(), &geo, uri_of);
    let mut arb = new_arbiter(&config, &plan);
    let phys = phys_zones(&zones);
    let mut report = recover_zones(&geo, &zones, &mut ctl, &mut arb, &phys, &tenants, fresh)?;
    // Loans recovered are not new ones: the trace starts from here.
    arb.log.clear();
    let trace = Tracer::new(base.as_ref(), &tenants);
    report.journal_blocks = ctl.journal.seq;
    let size = geo.phys_size;
    ctl.sync(|z| z as u64 * size)?;
    let wadm = write_admission(&config);
    let work = ctl.work();
    let ez = Ezns {
        base,
        config,
        geo,
        tenants,
        phys,
        arb: Mutex::new(arb),
        ctl: Mutex::new(ctl),
        ctl_work: AtomicU64::new(work),
        pumped: AtomicU64::new(0),
        wadm,
        next_tick: AtomicU64::new(0),
        key,
        recovery: report,
        trace,
    };
    let ez = Arc::new(ez);
    crate::pump::start(&ez);
    Ok(ez)
}

/// The journal's state and the tenants' mapping of logical zones: a
/// fresh device's, or those of the newest complete journal on the device
/// (whose other journal zone is reset for the next generation).
fn replay_journal(
    q: &mut dyn ZoneQueue,
    zones: &[Zone],
    plan: &Plan,
    config: &Config,
    dev_uri: &str,
    fresh: bool,
) -> Result<(JournalState, Mapping), EznsError> {
    let geo = &plan.geo;
    let damaged = |reason: String| EznsError::Damaged { device: dev_uri.to_string(), reason };
    let digest = journal::layout_digest(&plan.layout);
    let counts: Vec<u32> = config.tenants.iter().map(|t| t.zones).collect();
    let mut state = JournalState {
        zones: geo.journal,
        cur: 0,
        generation: 1,
        seq: 0,
        cap: geo.phys_cap,
        digest,
        layout: plan.layout.clone(),
    };
    let mut mapping = Mapping::new(&counts);
    if fresh {
        return Ok((state, mapping));
    }
    let mut logs = Vec::new();
    for (i, &j) in geo.journal.iter().enumerate() {
        let z = &zones[j as usize];
        let raw = read_journal(q, z, geo.bs, geo.mdts_blocks)?;
        let log = journal::read_zone(raw.chunks(geo.bs))
            .map_err(|e| damaged(format!("journal zone {j}: {e}")))?;
        logs.push((i, log));
    }
    let best = logs
        .iter()
        .filter_map(|(i, l)| l.as_ref().filter(|l| l.complete).map(|l| (*i, l)))
        .max_by_key(|(_, l)| l.generation);
    let Some((cur, log)) = best else {
        return Err(damaged(
            "the device holds data but no complete eZNS journal (not an eZNS device, or its \
             journal is damaged); reset it to start over"
                .into(),
        ));
    };
    if log.digest != digest {
        return Err(EznsError::Mismatch {
            device: dev_uri.to_string(),
            reason: format!("on the device: {}; in the configuration: {}", log.layout, plan.layout),
        });
    }
    for e in &log.entries {
        mapping.apply(e).map_err(|e| damaged(format!("journal: {e}")))?;
    }
    state.cur = cur;
    state.generation = log.generation;
    state.seq = log.blocks;
    let other = geo.journal[1 - cur];
    if zones[other as usize].state != ZoneState::Empty {
        q.zone_action(ZoneAction::Reset, Target::Zone(other as u64 * geo.phys_size))?;
    }
    Ok((state, mapping))
}

/// The tenants of `config` on the base device `info`, their logical zones
/// all empty until recovery.
fn new_tenants(
    config: &Config,
    info: &DeviceInfo,
    geo: &Geometry,
    uri_of: &dyn Fn(&str) -> String,
) -> Vec<Tenant> {
    config
        .tenants
        .iter()
        .enumerate()
        .map(|(t, tc)| Tenant {
            name: tc.name.clone(),
            info: tenant_info(config, t, info, geo, &uri_of(&tc.name)),
            zones: (0..tc.zones)
                .map(|z| LZone::new(z, config.scheduler.read_window_max.min(16)))
                .collect(),
            last_write: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            inactive: AtomicBool::new(false),
            stats: TenantStats::default(),
        })
        .collect()
}

/// The arbiter of active zones, each tenant with its planned budget and
/// nothing held yet.
fn new_arbiter(config: &Config, plan: &Plan) -> Arbiter {
    Arbiter {
        mode: config.mode,
        tenants: config
            .tenants
            .iter()
            .zip(&plan.budgets)
            .map(|(tc, &(essential, spare))| Budget {
                essential,
                spare,
                active_zones: tc.active_zones,
                open: 0,
                active: 0,
                held: 0,
                lent: 0,
                borrowed: 0,
                inactive: false,
                avg_open: tc.active_zones as f64,
                reclaims: 0,
            })
            .collect(),
        device_limit: plan.device_limit,
        device_active: 0,
        max_width: config.max_width,
        alloc: Allocator::new(config.mode, plan.dies, config.tenants.len()),
        loans: 0,
        headroom: plan.headroom,
        parked: Vec::new(),
        log: Vec::new(),
    }
}

/// The physical zones' state, each zone's write token at what it holds.
fn phys_zones(zones: &[Zone]) -> Box<[PhysZone]> {
    zones
        .iter()
        .map(|z| {
            let p = PhysZone::default();
            p.token.store(written(z), std::sync::atomic::Ordering::Relaxed);
            p
        })
        .collect()
}

/// Recovers every tenant's logical zones against the device's `zones`,
/// then resets or finishes the physical zones that need it.
fn recover_zones(
    geo: &Geometry,
    zones: &[Zone],
    ctl: &mut Control,
    arb: &mut Arbiter,
    phys: &[PhysZone],
    tenants: &[Tenant],
    fresh: bool,
) -> Result<RecoveryReport, EznsError> {
    let mut r = Recovery {
        geo,
        zones,
        ctl,
        arb,
        phys,
        refs: HashMap::new(),
        fresh: Vec::new(),
        pending: Vec::new(),
        report: RecoveryReport { formatted: fresh, ..RecoveryReport::default() },
    };
    for (t, tenant) in tenants.iter().enumerate() {
        for lz in tenant.zones.iter() {
            r.fresh.clear();
            r.zone(t, lz)?;
            if let Some(f) = r.fresh.pop() {
                r.pending.push((t, lz.index, f.1, f.2));
            }
        }
    }
    r.sweep()?;
    for (t, z, e, unit) in std::mem::take(&mut r.pending) {
        r.fresh_group(t, &tenants[t].zones[z as usize], e, unit)?;
    }
    Ok(r.report.clone())
}

/// The write admission of `config`'s scheduler.
fn write_admission(config: &Config) -> WriteAdmission {
    let s = &config.scheduler;
    let target = match s.write_target_us {
        Some(us) => WriteTarget::Fixed(us * 1000),
        None => WriteTarget::Baseline(s.write_target_factor),
    };
    WriteAdmission::new(s.write_window_min_kib * 1024, s.write_window_max_kib * 1024, target)
}

/// Recovery of the logical zones against the device's zones.
struct Recovery<'a> {
    geo: &'a Geometry,
    zones: &'a [Zone],
    ctl: &'a mut Control,
    arb: &'a mut Arbiter,
    phys: &'a [PhysZone],
    /// Physical zones the mapping references.
    refs: HashMap<u32, (usize, u32)>,
    /// Set by `zone` for a Closed zone none of whose columns can go on:
    /// tenant, write pointer and unit.
    fresh: Vec<(usize, u64, u64)>,
    /// Such zones: tenant, zone, write pointer, unit.
    pending: Vec<(usize, u32, u64, u64)>,
    report: RecoveryReport,
}

impl Recovery<'_> {
    fn lba(&self, z: u32) -> u64 {
        z as u64 * self.geo.phys_size
    }

    fn damaged(&self, reason: String) -> EznsError {
        EznsError::Damaged { device: "the base device".into(), reason }
    }

    /// Finishes (or, when `reset`, resets) a physical zone now unless it
    /// is already Full (Empty for a reset) or empty.
    fn settle(&mut self, z: u32, reset: bool) -> Result<(), EznsError> {
        let zone = &self.zones[z as usize];
        let action = match (reset, zone.state) {
            (true, ZoneState::Empty) => return Ok(()),
            (true, _) => ZoneAction::Reset,
            (
                false,
                ZoneState::Full | ZoneState::Empty | ZoneState::ReadOnly | ZoneState::Offline,
            ) => return Ok(()),
            (false, _) => ZoneAction::Finish,
        };
        self.ctl.q.zone_action(action, Target::Zone(self.lba(z)))?;
        if reset {
            self.report.orphans += 1;
        } else {
            self.report.finished += 1;
        }
        let t = &self.phys[z as usize].token;
        t.store(if reset { 0 } else { self.geo.phys_cap }, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn check_group(&self, g: &GroupRecord) -> Result<(), EznsError> {
        let bad = g.unit == 0
            || g.cols.is_empty()
            || g.cols.iter().any(|c| {
                c.zone as usize >= self.zones.len()
                    || self.geo.journal.contains(&c.zone)
                    || c.base >= self.geo.phys_cap
                    || c.budget as usize >= self.arb.tenants.len()
            });
        if bad {
            return Err(
                self.damaged(format!("journal group at {} names impossible columns", g.start))
            );
        }
        Ok(())
    }

    fn zone(&mut self, t: usize, lz: &LZone) -> Result<(), EznsError> {
        let rec = self.ctl.mapping.zones[t][lz.index as usize].clone();
        let mut map: ZoneMap = Vec::new();
        for g in &rec.groups {
            self.check_group(g)?;
            let room: Vec<u64> = g.cols.iter().map(|c| self.geo.phys_cap - c.base).collect();
            let mut layout =
                Layout::new(g.start, g.unit as u64, g.cols.clone(), &room, self.geo.lcap - g.start);
            layout.len = layout.len.min(g.len);
            map.push(Group::new(layout, committed()));
        }
        let mut inner = lz.inner.lock();
        if map.is_empty() {
            let state = if rec.finished.is_some() { ZoneState::Full } else { ZoneState::Empty };
            lz.set_state(&mut inner, state);
            return Ok(());
        }
        for (i, g) in map.iter().enumerate() {
            for c in &g.layout.cols {
                self.refs.insert(c.zone, (t, lz.index));
                // A column no later group goes on should have been
                // finished. (A returned spare is parked, unfinished, and
                // may come back in any later group of its zone; after a
                // restart it is finished here.)
                let later =
                    map[i + 1..].iter().any(|n| n.layout.cols.iter().any(|x| x.zone == c.zone));
                if i + 1 < map.len() && !later {
                    self.settle(c.zone, false)?;
                }
            }
        }
        let last = map.last().expect("non-empty").clone();
        let l = &last.layout;
        let dev: Vec<u64> = l.cols.iter().map(|c| written(&self.zones[c.zone as usize])).collect();
        let x: Vec<u64> = l.cols.iter().zip(&dev).map(|(c, &d)| d.saturating_sub(c.base)).collect();
        let e = l.start + l.consistent_end(&x).min(l.len);
        let offline = l.cols.iter().any(|c| {
            matches!(self.zones[c.zone as usize].state, ZoneState::Offline | ZoneState::ReadOnly)
        });
        lz.map.store(Arc::new(map.clone()));
        if offline {
            lz.word.store(e, std::sync::atomic::Ordering::Release);
            lz.set_state(&mut inner, ZoneState::Offline);
            return Ok(());
        }
        if let Some(at) = rec.finished {
            for c in &l.cols {
                self.settle(c.zone, false)?;
            }
            lz.word.store(at, std::sync::atomic::Ordering::Release);
            lz.set_state(&mut inner, ZoneState::Full);
            self.report.full += 1;
            return Ok(());
        }
        if e >= self.geo.lcap {
            for c in &l.cols {
                self.settle(c.zone, false)?;
            }
            lz.word.store(self.geo.lcap, std::sync::atomic::Ordering::Release);
            lz.set_state(&mut inner, ZoneState::Full);
            self.report.full += 1;
            return Ok(());
        }
        if e == 0 {
            self.ctl.record(Entry::Reset { tenant: t as u16, zone: lz.index });
            for g in &map {
                for c in &g.layout.cols {
                    self.settle(c.zone, true)?;
                    self.refs.remove(&c.zone);
                }
            }
            lz.map.store(Arc::new(Vec::new()));
            lz.set_state(&mut inner, ZoneState::Empty);
            self.report.emptied += 1;
            return Ok(());
        }
        // Closed at `e`. Restripe when a column holds blocks past its share
        // of `e` or cannot take more.
        let rel = e - l.start;
        let ragged = l.cols.iter().enumerate().any(|(c, col)| {
            let z = &self.zones[col.zone as usize];
            dev[c] != col.base + l.ext(c, rel) || z.state == ZoneState::Full
        });
        let mut cols = l.cols.clone();
        if ragged || e >= l.end() {
            self.report.restriped += 1;
            self.report.closed += 1;
            let mut keep: Vec<Column> = Vec::new();
            for (c, col) in l.cols.iter().enumerate() {
                let z = &self.zones[col.zone as usize];
                if z.state != ZoneState::Full && self.geo.phys_cap - dev[c] >= self.geo.unit {
                    keep.push(Column { base: dev[c], ..*col });
                } else {
                    self.settle(col.zone, false)?;
                }
            }
            if keep.is_empty() {
                // No column can go on: a fresh one, once the sweep has
                // freed the zones nobody references.
                drop(inner);
                self.fresh.push((t, e, l.unit));
                map.retain(|g| g.layout.start < e);
                lz.map.store(Arc::new(map));
                return Ok(());
            }
            let room: Vec<u64> = keep.iter().map(|c| self.geo.phys_cap - c.base).collect();
            let layout = Layout::new(e, l.unit, keep, &room, self.geo.lcap - e);
            self.ctl.record(Entry::Group {
                tenant: t as u16,
                zone: lz.index,
                start: e,
                len: layout.len,
                unit: layout.unit as u32,
                cols: layout.cols.clone(),
            });
            for c in &layout.cols {
                self.refs.insert(c.zone, (t, lz.index));
            }
            cols = layout.cols.clone();
            map.retain(|g| g.layout.start < e);
            map.push(Group::new(layout, committed()));
            lz.map.store(Arc::new(map));
        }
        for c in &cols {
            let z = &self.zones[c.zone as usize];
            if z.state != ZoneState::Full {
                let h = Holding { tenant: t as u16, budget: c.budget };
                self.arb.grant(h);
                self.arb.alloc.hold(c.zone, t);
                self.phys[c.zone as usize].set_holder(h);
            }
        }
        self.arb.tenants[t].active += 1;
        if !(ragged || e >= l.end()) {
            self.report.closed += 1;
        }
        let end = lz.map.load().last().map_or(0, |g| g.layout.end());
        lz.seg_end.store(end, std::sync::atomic::Ordering::Release);
        lz.word.store(e, std::sync::atomic::Ordering::Release);
        lz.set_state(&mut inner, ZoneState::Closed);
        Ok(())
    }

    /// Gives a Closed zone none of whose columns could go on a group of one
    /// fresh column at its write pointer `e`.
    fn fresh_group(&mut self, t: usize, lz: &LZone, e: u64, unit: u64) -> Result<(), EznsError> {
        let taken = self.arb.alloc.take(t, 1, &[]);
        let Some(&zone) = taken.first() else {
            return Err(self.damaged("no free zone to continue a logical zone".into()));
        };
        let h = Holding { tenant: t as u16, budget: t as u16 };
        self.arb.grant(h);
        self.phys[zone as usize].set_holder(h);
        let cols = vec![Column { zone, base: 0, budget: t as u16 }];
        let layout = Layout::new(e, unit, cols, &[self.geo.phys_cap], self.geo.lcap - e);
        self.ctl.record(Entry::Group {
            tenant: t as u16,
            zone: lz.index,
            start: e,
            len: layout.len,
            unit: layout.unit as u32,
            cols: layout.cols.clone(),
        });
        let mut map: ZoneMap = lz.map.load().iter().cloned().collect();
        map.push(Group::new(layout, committed()));
        let end = map.last().map_or(0, |g| g.layout.end());
        lz.map.store(Arc::new(map));
        lz.seg_end.store(end, std::sync::atomic::Ordering::Release);
        let mut inner = lz.inner.lock();
        self.arb.tenants[t].active += 1;
        lz.word.store(e, std::sync::atomic::Ordering::Release);
        lz.set_state(&mut inner, ZoneState::Closed);
        Ok(())
    }

    /// Resets the physical zones nothing references and frees the empty
    /// ones.
    fn sweep(&mut self) -> Result<(), EznsError> {
        for z in 0..self.zones.len() as u32 {
            if self.geo.journal.contains(&z) || self.refs.contains_key(&z) {
                continue;
            }
            match self.zones[z as usize].state {
                ZoneState::Offline | ZoneState::ReadOnly => continue,
                ZoneState::Empty => {}
                _ => {
                    tracing::info!(zone = z, "eZNS recovery: resetting an unreferenced zone");
                    self.settle(z, true)?;
                }
            }
            if self.phys[z as usize].holder().is_none() {
                self.arb.alloc.free(z);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_split_the_active_zones() {
        let dev = zns_device::open("emu:small-zone,media=null,zones=2000").unwrap();
        let text = r#"
device = "x"
zone_scale = 4
[[tenant]]
name = "a"
zones = 64
active_zones = 16
[[tenant]]
name = "b"
zones = 64
active_zones = 16
"#;
        let c = Config::from_toml(text).unwrap();
        let p = plan(&c, dev.as_ref()).unwrap();
        // 256 active less the journal's and 16 of headroom, split in two.
        assert_eq!(p.device_limit, 255);
        assert_eq!(p.budgets, [(48, 71), (48, 71)]);
        assert_eq!((p.dies.dies, p.dies.zone_dies), (128, 1));
        assert_eq!(p.geo.lcap, 4 * 24576);
        let big = Config::from_toml(&text.replace("zones = 64", "zones = 600")).unwrap();
        assert!(plan(&big, dev.as_ref()).unwrap_err().to_string().contains("physical zones"));
    }
}
