//! The four experiments, each in static and elastic mode.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use zns_device::{ReportFilter, Target, ZoneAction, ZoneState, ZonedDevice};
use zns_ezns::{Config, Instance, Mode};

use super::engine::{self, Either, Load, Port, Reader, Tenant, Until, Writer};
use super::kv::{KvShape, KvStore, Mix};
use super::results::{
    self, Balloon, BalloonRun, BalloonSample, DeviceSummary, EznsResults, IsolationPoint, KvPoint,
    PhaseFigure, UtilizationPoint, SCHEMA_VERSION,
};
use super::{EznsBenchError, Options, Scale, EXPERIMENTS};
use crate::characterize::progress::Observer;
use crate::characterize::stats::LatencyHistogram;

/// The tenants of every run.
const TENANTS: [&str; 4] = ["a", "b", "c", "d"];

/// Active logical zones per tenant (the eZNS paper's configuration).
const ACTIVE: u32 = 16;

/// Bytes per append of the writers.
const CHUNK: u64 = 128 * 1024;

/// Both modes, baseline first.
const MODES: [Mode; 2] = [Mode::Static, Mode::Elastic];

/// Sizes and durations of a scale (device time).
#[derive(Debug, Clone, Copy)]
struct Plan {
    tenant_zones: u32,
    zone_scale: u32,
    idle_ms: u64,
    tick_ms: u64,
    /// Appends in flight per logical zone.
    depth: usize,
    phase_ns: u64,
    sample_ns: u64,
    warmup_ns: u64,
    window_ns: u64,
    reader_zones: u64,
    reader_blocks: u64,
    reader_depth: usize,
    util_zones: u64,
    kv: KvShape,
    kv_ns: u64,
}

impl Plan {
    fn of(scale: Scale) -> Plan {
        let ms = 1_000_000;
        let kv = KvShape { keys: 32 * 1024, batch: 32, max_flushing: 4, heads: 4, clients: 16 };
        let full = Plan {
            tenant_zones: 20,
            zone_scale: 16,
            idle_ms: 100,
            tick_ms: 10,
            depth: 4,
            phase_ns: 3000 * ms,
            sample_ns: 40 * ms,
            warmup_ns: 300 * ms,
            window_ns: 1000 * ms,
            reader_zones: 4,
            reader_blocks: 8192,
            reader_depth: 8,
            util_zones: 4,
            kv,
            kv_ns: 1000 * ms,
        };
        match scale {
            Scale::Full => full,
            Scale::Smoke => Plan {
                idle_ms: 4,
                tick_ms: 1,
                phase_ns: 24 * ms,
                sample_ns: 2 * ms,
                warmup_ns: 8 * ms,
                window_ns: 8 * ms,
                reader_blocks: 256,
                kv: KvShape { keys: 1024, clients: 4, ..kv },
                kv_ns: 6 * ms,
                ..full
            },
        }
    }

    /// Runs of each experiment (for progress).
    fn runs(&self) -> [u64; 4] {
        [2, 6, 8, 2 * Mix::ALL.len() as u64]
    }

    /// Physical zones the tenants' logical zones need.
    fn physical_zones(&self) -> u64 {
        (TENANTS.len() as u64) * self.tenant_zones as u64 * self.zone_scale as u64
    }
}

/// The device, the plan and the run's state.
struct Lab<'a> {
    base: Arc<dyn ZonedDevice>,
    plan: Plan,
    rng: SmallRng,
    obs: &'a dyn Observer,
}

/// Reports device-time progress of one run as steps of 1 %.
struct Meter<'a> {
    obs: &'a dyn Observer,
    from: u64,
    span: u64,
    done: u64,
}

impl Meter<'_> {
    fn at(&mut self, now: u64) {
        let pct = (now.saturating_sub(self.from) * 100 / self.span.max(1)).min(100);
        if pct > self.done {
            self.obs.step(pct - self.done);
            self.done = pct;
        }
    }

    fn finish(&mut self) {
        self.at(self.from + self.span);
    }
}

impl<'a> Lab<'a> {
    fn now(&self) -> u64 {
        self.base.now_ns()
    }

    fn meter(&self, span: u64) -> Meter<'a> {
        Meter { obs: self.obs, from: self.now(), span, done: 0 }
    }

    fn config(&self, mode: Mode) -> Result<Config, EznsBenchError> {
        let p = &self.plan;
        let mut text = format!(
            "device = {:?}\nmode = {:?}\nzone_scale = {}\nstripe_unit_kib = 64\nmax_width = 16\n\
             idle_ms = {}\ntick_ms = {}\n",
            self.base.info().uri,
            mode.name(),
            p.zone_scale,
            p.idle_ms,
            p.tick_ms
        );
        for t in TENANTS {
            text.push_str(&format!(
                "\n[[tenant]]\nname = {t:?}\nzones = {}\nactive_zones = {ACTIVE}\n",
                p.tenant_zones
            ));
        }
        Ok(Config::from_toml(&text)?)
    }

    /// A fresh instance of four tenants in `mode` on the (empty) base.
    fn instance(&self, mode: Mode) -> Result<Instance, EznsBenchError> {
        Ok(Instance::open(Arc::clone(&self.base), self.config(mode)?)?)
    }

    /// Lets the instance's internal work finish, drops it and resets every
    /// zone of the base device.
    fn close(&self, inst: Instance) -> Result<(), EznsBenchError> {
        let t0 = self.now();
        let mut rounds = 0;
        while rounds < 100_000 && inst.status().internal_pending > 0 {
            inst.pump();
            self.base.wait_ns(10_000);
            rounds += 1;
        }
        tracing::debug!(
            rounds,
            device_us = (self.now() - t0) / 1000,
            pending = inst.status().internal_pending,
            "eZNS instance settled"
        );
        drop(inst);
        reset_all(self.base.as_ref())
    }

    /// A port on tenant `name` with `depth` commands.
    fn port(&self, inst: &Instance, name: &str, depth: usize) -> Result<Port, EznsBenchError> {
        let dev = inst.tenant(name)?;
        Port::new(dev.as_ref(), depth, CHUNK as usize)
    }

    /// A writer of `zones` logical zones and its port.
    fn writer(
        &self,
        inst: &Instance,
        name: &str,
        zones: u64,
    ) -> Result<Tenant<Writer>, EznsBenchError> {
        let depth = self.plan.depth;
        let port = self.port(inst, name, zones as usize * (depth + 1))?;
        let w = Writer::new(0, zones, depth, CHUNK, &port);
        Ok(Tenant::new(port, w))
    }
}

/// Resets every zone of `dev`.
fn reset_all(dev: &dyn ZonedDevice) -> Result<(), EznsBenchError> {
    let mut q = dev.queue(4)?;
    q.zone_action(ZoneAction::Reset, Target::All)
        .map_err(|source| EznsBenchError::Command { what: "reset every zone".into(), source })
}

/// Checks the base device and empties it (with `force`).
fn prepare(base: &dyn ZonedDevice, plan: &Plan, force: bool) -> Result<(), EznsBenchError> {
    let info = base.info();
    if !info.zoned || info.zone_count == 0 {
        return Err(EznsBenchError::Invalid(format!(
            "{} has no zones: the eZNS experiments need a zoned device (e.g. emu:small-zone)",
            info.uri
        )));
    }
    let active = info.max_active.unwrap_or(info.zone_count as u32) as u64;
    let need = plan.physical_zones() + active + 2;
    if info.zone_count < need {
        return Err(EznsBenchError::Invalid(format!(
            "{} has {} zones; the experiments need at least {need} (four tenants of {} logical \
             zones of {} physical zones, plus {active} for stripe ends and 2 for the journal): \
             give more, e.g. emu:small-zone,media=null,zones=2048",
            info.uri, info.zone_count, plan.tenant_zones, plan.zone_scale
        )));
    }
    let mut q = base.queue(4)?;
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX)?;
    let busy = zones
        .iter()
        .filter(|z| !matches!(z.state, ZoneState::Empty | ZoneState::ReadOnly | ZoneState::Offline))
        .count();
    if busy > 0 && !force {
        return Err(EznsBenchError::Invalid(format!(
            "{busy} zones of {} are not empty; the experiments write and reset every zone: \
             reset them first or pass --force",
            info.uri
        )));
    }
    drop(q);
    reset_all(base)
}

pub(crate) fn run(
    base: Arc<dyn ZonedDevice>,
    opts: &Options,
    obs: &dyn Observer,
) -> Result<EznsResults, EznsBenchError> {
    let plan = Plan::of(opts.scale);
    prepare(base.as_ref(), &plan, opts.force)?;
    let weights = [3.0, 3.0, 2.5, 4.0];
    let list: Vec<(String, String, f64)> = EXPERIMENTS
        .iter()
        .zip(weights)
        .map(|((n, t), w)| (n.to_string(), t.to_string(), w))
        .collect();
    obs.suite_started(&list);
    let mut lab = Lab { base, plan, rng: SmallRng::seed_from_u64(opts.seed), obs };
    let (wall, t0) = (Instant::now(), lab.now());
    let mut r = skeleton(&lab, opts)?;
    let runs = plan.runs();
    obs.experiment_started(0, runs[0] * 100);
    r.balloon = balloon(&mut lab)?;
    obs.experiment_finished(0);
    obs.experiment_started(1, runs[1] * 100);
    r.isolation = isolation(&mut lab)?;
    obs.experiment_finished(1);
    obs.experiment_started(2, runs[2] * 100);
    r.utilization = utilization(&mut lab)?;
    obs.experiment_finished(2);
    obs.experiment_started(3, runs[3] * 100);
    r.kv = kv(&mut lab)?;
    obs.experiment_finished(3);
    obs.suite_finished();
    r.device_s = (lab.now() - t0) as f64 / 1e9;
    r.wall_s = wall.elapsed().as_secs_f64();
    (r.summary, r.kv_mean) = results::summarize(&r);
    Ok(r)
}

/// The results before anything is measured.
fn skeleton(lab: &Lab<'_>, opts: &Options) -> Result<EznsResults, EznsBenchError> {
    let info = lab.base.info();
    let dies = lab.base.emulator().and_then(|e| e.profile().timing.as_ref().map(|t| t.dies()));
    let p = &lab.plan;
    let mib = |blocks: u64| (blocks * info.block_size as u64) as f64 / (1 << 20) as f64;
    let scaling = format!(
        "{} zones of {:.0} MiB capacity (each zone's geometry and the dies as the device has \
         them); 4 tenants x {} logical zones of {} physical zones ({:.0} MiB), {ACTIVE} active \
         each; idle after {} ms, arbiter every {} ms; runs of {} ms of device time (balloon: \
         3 phases of {} ms) instead of the eZNS paper's minutes",
        info.zone_count,
        mib(info.zone_capacity),
        p.tenant_zones,
        p.zone_scale,
        mib(info.zone_capacity * p.zone_scale as u64),
        p.idle_ms,
        p.tick_ms,
        (p.warmup_ns + p.window_ns) / 1_000_000,
        p.phase_ns / 1_000_000
    );
    Ok(EznsResults {
        schema: SCHEMA_VERSION,
        scale: opts.scale.name().to_string(),
        seed: opts.seed,
        device: DeviceSummary {
            uri: info.uri.clone(),
            clock: lab.base.clock_name().to_string(),
            zones: info.zone_count,
            zone_capacity_mib: mib(info.zone_capacity),
            max_active: info.max_active,
            dies: dies.unwrap_or(0),
        },
        scaling,
        config: lab.config(Mode::Elastic)?.to_toml(),
        device_s: 0.0,
        wall_s: 0.0,
        balloon: Balloon::default(),
        isolation: Vec::new(),
        utilization: Vec::new(),
        kv: Vec::new(),
        summary: Vec::new(),
        kv_mean: None,
    })
}

fn mib_s(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return 0.0;
    }
    bytes as f64 / (1 << 20) as f64 / (ns as f64 / 1e9)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Experiment 1 in both modes.
fn balloon(lab: &mut Lab<'_>) -> Result<Balloon, EznsBenchError> {
    let mut b = Balloon {
        phase_ms: lab.plan.phase_ns as f64 / 1e6,
        sample_ms: lab.plan.sample_ns as f64 / 1e6,
        runs: Vec::new(),
    };
    for mode in MODES {
        b.runs.push(balloon_run(lab, mode)?);
    }
    Ok(b)
}

/// Samples of experiment 1: bytes per tenant at the last sample.
struct Sampler {
    start: u64,
    last_t: u64,
    last: Vec<u64>,
    samples: Vec<BalloonSample>,
}

impl Sampler {
    fn take(&mut self, now: u64, tenants: &[Tenant<Writer>], inst: &Instance) {
        let bytes: Vec<u64> = tenants.iter().map(|t| t.load.bytes().0).collect();
        let dt = now - self.last_t;
        let d = |i: usize| bytes[i] - self.last[i];
        let s = inst.status();
        let writer = &s.tenants[0];
        let open: Vec<_> = writer.stripes.iter().filter(|z| z.state.contains("Open")).collect();
        let widths: Vec<usize> = open.iter().map(|z| z.width).collect();
        let dies: BTreeSet<u32> = open.iter().flat_map(|z| z.dies.iter().copied()).collect();
        self.samples.push(BalloonSample {
            t_ms: (now - self.start) as f64 / 1e6,
            writer_mib_s: mib_s(d(0), dt),
            others_mib_s: mib_s((1..bytes.len()).map(d).sum(), dt),
            lent_spares: s.tenants.iter().map(|t| t.lent).sum(),
            writer_width: widths.iter().sum::<usize>() as f64 / widths.len().max(1) as f64,
            writer_dies: dies.len() as u32,
            internal_pending: s.internal_pending,
            write_window_kib: s.write_window_kib,
        });
        self.last = bytes;
        self.last_t = now;
    }
}

fn balloon_run(lab: &mut Lab<'_>, mode: Mode) -> Result<BalloonRun, EznsBenchError> {
    let inst = lab.instance(mode)?;
    let mut ts = TENANTS
        .iter()
        .map(|n| lab.writer(&inst, n, ACTIVE as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let p = lab.plan;
    let start = lab.now();
    let mut meter = lab.meter(3 * p.phase_ns);
    let mut s = Sampler { start, last_t: start, last: vec![0; ts.len()], samples: Vec::new() };
    let mut tick = |now: u64, ts: &mut [Tenant<Writer>]| {
        let alone = (now - start) / p.phase_ns == 1;
        if ts[1].active == alone {
            tracing::debug!(alone, "balloon: phase change\n{}", inst.status());
        }
        ts.iter_mut().skip(1).for_each(|t| t.active = !alone);
        if now >= s.last_t + p.sample_ns {
            s.take(now, ts, &inst);
        }
        meter.at(now);
        // After the third phase everyone goes on writing until no spare is
        // lent any more (at most two phases more): how long spares take to
        // come back is a figure.
        let returned = s.samples.last().is_some_and(|x| x.lent_spares == 0);
        now < start + 3 * p.phase_ns || !returned
    };
    engine::run(
        lab.base.as_ref(),
        &mut ts,
        Until::Time(start + 5 * p.phase_ns),
        &mut lab.rng,
        &mut tick,
    )?;
    tracing::debug!("balloon: end\n{}", inst.status());
    meter.finish();
    drop(ts);
    lab.close(inst)?;
    let returned_after_ms = s
        .samples
        .iter()
        .find(|x| x.t_ms > 2.0 * p.phase_ns as f64 / 1e6 && x.lent_spares == 0)
        .map(|x| x.t_ms - 2.0 * p.phase_ns as f64 / 1e6);
    let lent_most = s.samples.iter().map(|x| x.lent_spares).max().unwrap_or(0);
    let phases = ["all", "alone", "back"]
        .iter()
        .enumerate()
        .map(|(i, name)| phase_means(&s.samples, name, i as f64, p.phase_ns as f64 / 1e6))
        .collect();
    Ok(BalloonRun {
        mode: mode.name().to_string(),
        lent_most,
        returned_after_ms: returned_after_ms.filter(|_| lent_most > 0),
        samples: s.samples,
        phases,
    })
}

/// Means of the samples in the second half of phase `i`.
fn phase_means(samples: &[BalloonSample], name: &str, i: f64, phase_ms: f64) -> PhaseFigure {
    let (lo, hi) = ((i + 0.5) * phase_ms, (i + 1.0) * phase_ms);
    let sel: Vec<&BalloonSample> = samples.iter().filter(|s| s.t_ms > lo && s.t_ms <= hi).collect();
    let n = sel.len().max(1) as f64;
    PhaseFigure {
        phase: name.to_string(),
        writer_mib_s: sel.iter().map(|s| s.writer_mib_s).sum::<f64>() / n,
        others_mib_s: sel.iter().map(|s| s.others_mib_s).sum::<f64>() / n,
        lent_spares: sel.iter().map(|s| s.lent_spares as f64).sum::<f64>() / n,
        writer_width: sel.iter().map(|s| s.writer_width).sum::<f64>() / n,
    }
}

/// Experiment 2 in both modes with 0, 1 and 2 writers.
fn isolation(lab: &mut Lab<'_>) -> Result<Vec<IsolationPoint>, EznsBenchError> {
    let mut out = Vec::new();
    for mode in MODES {
        for writers in 0..=2 {
            out.push(isolation_run(lab, mode, writers)?);
        }
    }
    Ok(out)
}

/// Writes the reader's data set; returns its port and extents.
fn prefill(lab: &mut Lab<'_>, inst: &Instance) -> Result<(Port, Vec<(u64, u64)>), EznsBenchError> {
    let p = lab.plan;
    let depth = p.reader_depth.max(p.reader_zones as usize * (p.depth + 1));
    let port = lab.port(inst, TENANTS[0], depth)?;
    let w = Writer::new(0, p.reader_zones, p.depth, CHUNK, &port)
        .bounded(p.reader_blocks.min(port.zone_cap));
    let mut ts = [Tenant::new(port, w)];
    engine::run(lab.base.as_ref(), &mut ts, Until::Finished, &mut lab.rng, &mut |_, _| true)?;
    let [t] = ts;
    let extents = t.load.extents(&t.port);
    Ok((t.port, extents))
}

fn isolation_run(
    lab: &mut Lab<'_>,
    mode: Mode,
    writers: usize,
) -> Result<IsolationPoint, EznsBenchError> {
    let inst = lab.instance(mode)?;
    let (port, extents) = prefill(lab, &inst)?;
    let p = lab.plan;
    let mut reader = Reader::new(extents, p.reader_depth, 4096, &port);
    let start = lab.now();
    reader.record_from = start + p.warmup_ns;
    let mut ts = vec![Tenant::new(port, Either::Reader(reader))];
    for name in &TENANTS[1..=writers] {
        let w = lab.writer(&inst, name, ACTIVE as u64)?;
        ts.push(Tenant::new(w.port, Either::Writer(w.load)));
    }
    let span = p.warmup_ns + p.window_ns;
    let mut meter = lab.meter(span);
    let mut tick = |now: u64, _: &mut [Tenant<Either>]| {
        meter.at(now);
        true
    };
    engine::run(lab.base.as_ref(), &mut ts, Until::Time(start + span), &mut lab.rng, &mut tick)?;
    meter.finish();
    let elapsed = lab.now() - start;
    let end = inst.status();
    tracing::debug!(writers, "isolation: end of the window\n{end}");
    let written: u64 = ts.iter().map(|t| t.load.bytes().0).sum();
    let Either::Reader(r) = &ts[0].load else {
        return Err(EznsBenchError::Internal("the reader is not the first tenant".into()));
    };
    let point = IsolationPoint {
        mode: mode.name().to_string(),
        writers: writers as u32,
        reads: r.hist.len(),
        p50_us: us(r.hist.percentile(50.0)),
        p99_us: us(r.hist.percentile(99.0)),
        p99_9_us: us(r.hist.percentile(99.9)),
        read_mib_s: mib_s(r.read, elapsed),
        write_mib_s: mib_s(written, elapsed),
        end_write_window_kib: end.write_window_kib,
        end_internal_pending: end.internal_pending,
        end_lent_spares: end.tenants.iter().map(|t| t.lent).sum(),
    };
    drop(ts);
    lab.close(inst)?;
    Ok(point)
}

/// Experiment 3 in both modes with 1 to 4 tenants writing.
fn utilization(lab: &mut Lab<'_>) -> Result<Vec<UtilizationPoint>, EznsBenchError> {
    let mut out = Vec::new();
    for mode in MODES {
        for n in 1..=TENANTS.len() {
            out.push(utilization_run(lab, mode, n)?);
        }
    }
    Ok(out)
}

fn utilization_run(
    lab: &mut Lab<'_>,
    mode: Mode,
    n: usize,
) -> Result<UtilizationPoint, EznsBenchError> {
    let inst = lab.instance(mode)?;
    let p = lab.plan;
    let mut ts = TENANTS[..n]
        .iter()
        .map(|name| lab.writer(&inst, name, p.util_zones))
        .collect::<Result<Vec<_>, _>>()?;
    let start = lab.now();
    let span = p.warmup_ns + p.window_ns;
    let mut meter = lab.meter(span);
    let mut mark: Option<(u64, u64)> = None;
    let mut tick = |now: u64, ts: &mut [Tenant<Writer>]| {
        if mark.is_none() && now >= start + p.warmup_ns {
            mark = Some((now, ts.iter().map(|t| t.load.written).sum()));
        }
        meter.at(now);
        true
    };
    engine::run(lab.base.as_ref(), &mut ts, Until::Time(start + span), &mut lab.rng, &mut tick)?;
    meter.finish();
    tracing::debug!(tenants = n, "utilization: end of the window\n{}", inst.status());
    let end = lab.now();
    let total: u64 = ts.iter().map(|t| t.load.written).sum();
    let (t0, b0) = mark.unwrap_or((start, 0));
    drop(ts);
    lab.close(inst)?;
    Ok(UtilizationPoint {
        mode: mode.name().to_string(),
        tenants: n as u32,
        device_mib_s: mib_s(total - b0, end - t0),
    })
}

/// Experiment 4: in each mode, load the four stores, then run every mix.
fn kv(lab: &mut Lab<'_>) -> Result<Vec<KvPoint>, EznsBenchError> {
    let mut out = Vec::new();
    for mode in MODES {
        let inst = lab.instance(mode)?;
        let p = lab.plan;
        let mut ts = Vec::new();
        for name in TENANTS {
            let port = lab.port(&inst, name, p.kv.clients + p.kv.max_flushing)?;
            let store = KvStore::new(p.kv, p.tenant_zones as u64, &port)?;
            ts.push(Tenant::new(port, store));
        }
        engine::run(lab.base.as_ref(), &mut ts, Until::Finished, &mut lab.rng, &mut |_, _| true)?;
        for mix in Mix::ALL {
            out.push(kv_run(lab, &mut ts, mode, mix)?);
        }
        drop(ts);
        lab.close(inst)?;
    }
    Ok(out)
}

fn kv_run(
    lab: &mut Lab<'_>,
    ts: &mut [Tenant<KvStore>],
    mode: Mode,
    mix: Mix,
) -> Result<KvPoint, EznsBenchError> {
    ts.iter_mut().for_each(|t| t.load.start_mix(mix));
    let written0: u64 = ts.iter().map(|t| t.load.bytes().0).sum();
    let start = lab.now();
    let span = lab.plan.kv_ns;
    let mut meter = lab.meter(span);
    let mut tick = |now: u64, _: &mut [Tenant<KvStore>]| {
        meter.at(now);
        true
    };
    engine::run(lab.base.as_ref(), ts, Until::Time(start + span), &mut lab.rng, &mut tick)?;
    meter.finish();
    let elapsed = lab.now() - start;
    let (mut all, mut reads, mut updates) =
        (LatencyHistogram::new(), LatencyHistogram::new(), LatencyHistogram::new());
    for t in ts.iter() {
        all.merge(&t.load.all);
        reads.merge(&t.load.reads);
        updates.merge(&t.load.updates);
    }
    let ops: u64 = ts.iter().map(|t| t.load.ops).sum();
    let written: u64 = ts.iter().map(|t| t.load.bytes().0).sum::<u64>() - written0;
    Ok(KvPoint {
        mode: mode.name().to_string(),
        mix: mix.name().to_string(),
        kops_s: ops as f64 / (elapsed as f64 / 1e9) / 1000.0,
        p99_us: us(all.percentile(99.0)),
        p99_9_us: us(all.percentile(99.9)),
        read_p99_9_us: us(reads.percentile(99.9)),
        update_p99_9_us: us(updates.percentile(99.9)),
        write_mib_s: mib_s(written, elapsed),
    })
}
