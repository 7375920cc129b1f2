//! The experiments of the suite and the run that strings them together.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::SeedableRng;
use zns_device::{DeviceInfo, Target, ZoneAction, ZoneOp, ZoneQueue, ZonedDevice, DEFAULT_TIMEOUT};
use zns_emulator::clock::{Dilation, LatenessStats};

use super::engine::{run as run_streams, Ctx, Stream, Work, WriteZone, ZonePool};
use super::plan::{Plan, EXPERIMENTS};
use super::progress::Observer;
use super::results::{
    DeviceDescription, Duration, ExperimentRecord, HistogramData, Host, LateCompletions, Overhead,
    Point, Results, Tool, SCHEMA_VERSION,
};
use super::stats::LatencyHistogram;
use super::{clock, overhead, reference, size_label, CharacterizeError, Options};

/// Zones assumed when the device sets no open or active limit.
const UNLIMITED_ZONES: usize = 16;

/// Most zones the read experiments keep data in.
const MAX_DATASET_ZONES: usize = 6;

/// Most zones reset while I/O runs, per round.
const MAX_RESET_TARGETS: usize = 6;

/// Zone occupancies of the zone management experiment: name and written
/// blocks for a zone of `cap` blocks, without repeats.
pub(crate) fn occupancies(cap: u64) -> Vec<(&'static str, u64)> {
    let all = [
        ("empty", 0),
        ("1LBA", 1),
        ("6.25%", cap / 16),
        ("12.5%", cap / 8),
        ("25%", cap / 4),
        ("50%", cap / 2),
        ("full-1LBA", cap.saturating_sub(1)),
        ("full", cap),
    ];
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for (label, blocks) in all {
        if blocks > cap || out.iter().any(|&(_, b)| b == blocks) {
            continue;
        }
        out.push((label, blocks));
    }
    out
}

/// 1, 2, 4, ... below `max`, then `max`.
fn doubling_to(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut k = 1;
    while k < max {
        v.push(k);
        k *= 2;
    }
    if max > 0 {
        v.push(max);
    }
    v
}

/// The measured run: device, plan, points so far.
struct Runner<'a> {
    ctx: Ctx<'a>,
    plan: Plan,
    obs: &'a dyn Observer,
    points: Vec<Point>,
    /// Extents `(first LBA, blocks)` of the read data set, once written.
    dataset: Option<Vec<(u64, u64)>>,
    /// Name of the running experiment.
    experiment: &'static str,
    /// Index of the running experiment in the run's list.
    index: usize,
    skipped: Vec<String>,
}

pub(crate) fn run(
    dev: &dyn ZonedDevice,
    opts: &Options,
    obs: &dyn Observer,
) -> Result<Results, CharacterizeError> {
    check_only(&opts.only)?;
    let wall0 = Instant::now();
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let info = dev.info().clone();
    // Before the device is touched: a reference of another block size
    // would give a table of figures that do not compare.
    if let Some(r) = &opts.reference {
        r.check_block_size(u64::from(info.block_size))?;
    }
    let mut q = dev.queue(1024)?;
    let pool = empty_zones(q.as_mut(), &info, opts.force)?;
    // After the zones were emptied: the map starts with every zone Empty.
    let recorder = super::activity::Recorder::attach(dev);
    let dilation = match opts.dilation {
        Some(f) => Dilation::new(f).map_err(CharacterizeError::Dilation)?,
        None => dev.emulator().map_or(Dilation::NONE, |e| e.clock().dilation()),
    };
    let late_source = opts.late_source.clone().or_else(|| dev.emulator().cloned());
    let late0 = late_source.as_ref().and_then(|c| c.lateness());
    let ctx = Ctx {
        dev,
        q,
        info: info.clone(),
        pool,
        rng: rand::rngs::SmallRng::seed_from_u64(opts.seed),
        fill_byte: (opts.seed as u8) ^ 0x5a,
        dilation,
        late_source,
        late: Default::default(),
    };
    let plan = Plan::with_grid(opts.suite, opts.grid.as_ref());
    let mut r = Runner {
        ctx,
        plan,
        obs,
        points: Vec::new(),
        dataset: None,
        experiment: "",
        index: 0,
        skipped: Vec::new(),
    };
    let selected: Vec<(&'static str, &'static str)> = EXPERIMENTS
        .iter()
        .copied()
        .filter(|(n, _)| opts.only.is_empty() || opts.only.iter().any(|o| o == n))
        .collect();
    let weights: Vec<(String, String, f64)> =
        selected.iter().map(|&(n, t)| (n.to_string(), t.to_string(), r.weight(n))).collect();
    obs.suite_started(&weights);
    let device0 = r.ctx.now();
    let (records, experiments_wall_ns) = r.run_selected(&selected);
    r.drop_dataset()?;
    r.sweep()?;
    let device_ns = r.ctx.now().saturating_sub(device0);
    let activity = recorder.map(|a| a.finish(dev));
    let clock_name = clock::clock_name(dev);
    let overhead = engine_overhead(&r.plan, clock_name, &r.points);
    obs.suite_finished();
    let late_completions = match (late0, r.ctx.late_reading()) {
        (Some(a), Some(b)) => Some(LateCompletions::of(&b.since(&a))),
        _ => None,
    };
    let summary = summarize(&r.points);
    let mut results = Results {
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "zns-bench".into(), version: env!("CARGO_PKG_VERSION").into() },
        suite: opts.suite.name().into(),
        seed: opts.seed,
        only: opts.only.clone(),
        grid: opts.grid.clone(),
        device: DeviceDescription {
            uri: info.uri.clone(),
            clock: clock_name.into(),
            profile: dev.emulator().map(|c| c.profile().name.clone()),
            dilation: dilation.factor(),
            info: serde_json::to_value(&info).unwrap_or(serde_json::Value::Null),
        },
        duration: Duration { device_ns },
        experiments: records,
        points: std::mem::take(&mut r.points),
        summary,
        reference: None,
        host: Host {
            started_unix_s,
            wall_ns: wall0.elapsed().as_nanos() as u64,
            experiments_wall_ns,
            overhead,
            late_completions,
        },
        activity,
    };
    results.reference = match &opts.reference {
        Some(r) => Some(reference::table_from_run(r, &results)),
        None => reference::table_for(&results),
    };
    Ok(results)
}

/// Refuses experiment names `--only` gives that the suite does not have.
fn check_only(only: &[String]) -> Result<(), CharacterizeError> {
    for name in only {
        if !EXPERIMENTS.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            return Err(CharacterizeError::Invalid(format!(
                "unknown experiment {name:?} (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The device's zones, every one empty: a device holding data is refused,
/// or with `force` reset first; at least two zones must be usable.
fn empty_zones(
    q: &mut dyn ZoneQueue,
    info: &DeviceInfo,
    force: bool,
) -> Result<ZonePool, CharacterizeError> {
    let mut pool = ZonePool::scan(q, info)?;
    if pool.occupied > 0 {
        if !force {
            return Err(CharacterizeError::NotEmpty(pool.occupied));
        }
        tracing::info!(zones = pool.occupied, "resetting every zone first (--force)");
        q.zone_action(ZoneAction::Reset, Target::All)
            .map_err(|e| CharacterizeError::command("reset all zones", e))?;
        pool = ZonePool::scan(q, info)?;
    }
    if pool.available() < 2 {
        return Err(CharacterizeError::NoZones);
    }
    Ok(pool)
}

/// The engine's own overhead on this host, or `None` (with a warning)
/// where it could not be measured.
fn engine_overhead(plan: &Plan, clock: &str, points: &[Point]) -> Option<Overhead> {
    match overhead::measure(plan.overhead_ios, plan.overhead_passes, clock, points) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(error = %e, "the engine's overhead could not be measured");
            None
        }
    }
}

impl Runner<'_> {
    /// Runs the `selected` experiments `(name, title)` in turn; an
    /// experiment that fails is recorded as stopped and the next one
    /// runs. Returns their records and wall times by name.
    fn run_selected(
        &mut self,
        selected: &[(&'static str, &'static str)],
    ) -> (Vec<ExperimentRecord>, BTreeMap<String, u64>) {
        let mut records = Vec::new();
        let mut experiments_wall_ns = BTreeMap::new();
        for (i, &(name, title)) in selected.iter().enumerate() {
            self.experiment = name;
            self.index = i;
            self.skipped.clear();
            let (d0, w0, before) = (self.ctx.now(), Instant::now(), self.points.len());
            tracing::info!(experiment = name, "experiment starts");
            let mut error = self.experiment(name).err();
            if error.is_some() {
                // Whatever is still in flight is of no use now.
                let _ = self.ctx.q.drain(DEFAULT_TIMEOUT, &mut |_| {});
            }
            if let Err(e) = self.ctx.release_zones() {
                error.get_or_insert(e);
            }
            if let Some(e) = &error {
                tracing::warn!(experiment = name, error = %e, "experiment stopped early");
            }
            experiments_wall_ns.insert(name.to_string(), w0.elapsed().as_nanos() as u64);
            records.push(ExperimentRecord {
                name: name.to_string(),
                title: title.to_string(),
                duration: Duration { device_ns: self.ctx.now().saturating_sub(d0) },
                points: self.points.len() - before,
                skipped: self.skipped.clone(),
                error: error.map(|e| e.to_string()),
            });
            self.obs.experiment_finished(i);
        }
        (records, experiments_wall_ns)
    }
}

/// Derived figures: the best throughput of each scaling series, and the
/// write bandwidth over every write and append point.
pub(crate) fn summarize(points: &[Point]) -> BTreeMap<String, f64> {
    let mut s = BTreeMap::new();
    let mut write_bw: f64 = 0.0;
    for p in points {
        if matches!(p.op.as_str(), "write" | "append") && p.condition.is_none() {
            write_bw = write_bw.max(p.mib_s);
        }
        if !matches!(p.experiment.as_str(), "intra_zone" | "inter_zone" | "reads") {
            continue;
        }
        let Some((series, _)) = p.id.rsplit_once('/') else { continue };
        if !(series.starts_with("intra_zone/")
            || series.starts_with("inter_zone/")
            || series.starts_with("read_qd/")
            || series.starts_with("read_zones/"))
        {
            continue;
        }
        let k = s.entry(format!("{series}:max_kiops")).or_insert(0.0f64);
        *k = k.max(p.iops / 1000.0);
        let m = s.entry(format!("{series}:max_mib_s")).or_insert(0.0f64);
        *m = m.max(p.mib_s);
    }
    if write_bw > 0.0 {
        s.insert("ceiling/write_mib_s".to_string(), write_bw);
    }
    s
}

/// A point with its identity filled in and nothing measured yet.
fn point(experiment: &str, id: String, op: &str) -> Point {
    Point {
        id,
        experiment: experiment.to_string(),
        op: op.to_string(),
        pattern: None,
        condition: None,
        block_bytes: None,
        queue_depth: None,
        zones: None,
        occupancy: None,
        occupancy_label: None,
        rate_fraction: None,
        target_mib_s: None,
        ops: 0,
        bytes: 0,
        elapsed_ns: 0,
        iops: 0.0,
        mib_s: 0.0,
        latency: Default::default(),
        histogram: HistogramData::default(),
        late: None,
    }
}

/// Fills in what was measured.
fn measured(mut p: Point, hist: &LatencyHistogram, ops: u64, bytes: u64, elapsed_ns: u64) -> Point {
    p.ops = ops;
    p.bytes = bytes;
    p.elapsed_ns = elapsed_ns;
    let secs = elapsed_ns as f64 / 1e9;
    if secs > 0.0 {
        p.iops = ops as f64 / secs;
        p.mib_s = bytes as f64 / (1024.0 * 1024.0) / secs;
    }
    p.latency = hist.stats();
    p.histogram = HistogramData::of(hist);
    p
}

/// The measurements of several streams as one.
fn merged(p: Point, streams: &[Stream]) -> Point {
    let mut h = LatencyHistogram::new();
    let (mut ops, mut bytes) = (0, 0);
    let mut first = u64::MAX;
    let mut last = 0;
    for s in streams {
        h.merge(&s.hist);
        ops += s.ops;
        bytes += s.bytes;
        if let Some(f) = s.first_submit {
            first = first.min(f);
            last = last.max(s.last_complete);
        }
    }
    let elapsed = last.saturating_sub(first.min(last));
    measured(p, &h, ops, bytes, elapsed)
}

/// Samples of one command kind taken one at a time, with the late
/// completions of those commands: experiments that take the samples of
/// several points in turn (one zone each) keep each point's apart.
#[derive(Default)]
struct Samples {
    hist: LatencyHistogram,
    bytes: u64,
    late: LatenessStats,
}

impl Samples {
    /// A sample: its command's time, bytes and late completions (from
    /// [`Runner::sampled`]).
    fn add(&mut self, (ns, late): (u64, LatenessStats), bytes: u64) {
        self.hist.record(ns);
        self.bytes += bytes;
        self.late.add(&late);
    }

    fn to_point(&self, p: Point) -> Point {
        let ops = self.hist.len();
        let busy = self.hist.sum_ns() as u64;
        measured(p, &self.hist, ops, self.bytes, busy)
    }
}

impl Runner<'_> {
    /// Keeps a measured point, with the late completions of its commands:
    /// those counted since the last point was kept.
    fn push_point(&mut self, mut p: Point) {
        p.late = self.ctx.take_late().map(|l| LateCompletions::of(&l));
        self.points.push(p);
    }

    /// Keeps the point of `s`, with the late completions of its own
    /// samples' commands only (not those of the fills and resets around
    /// them, nor of other points' samples taken in between).
    fn push_samples(&mut self, s: &Samples, p: Point) {
        let mut p = s.to_point(p);
        self.ctx.take_late();
        p.late = self.ctx.late_source.as_ref().map(|_| LateCompletions::of(&s.late));
        self.points.push(p);
    }

    /// Runs `f` (one timed command of a sample) and returns its value with
    /// the late completions counted while it ran; those counted before it
    /// belong to no point and are dropped.
    fn sampled<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, CharacterizeError>,
    ) -> Result<(T, LatenessStats), CharacterizeError> {
        self.ctx.take_late();
        let v = f(self)?;
        Ok((v, self.ctx.take_late().unwrap_or_default()))
    }

    fn begin(&self, steps: u64) {
        self.obs.experiment_started(self.index, steps);
    }

    fn step(&self) {
        self.obs.step(1);
    }

    fn skip(&mut self, why: String) {
        tracing::info!(experiment = self.experiment, %why, "skipped");
        self.skipped.push(why);
    }

    fn bsz(&self) -> u64 {
        self.ctx.info.block_size as u64
    }

    fn active_limit(&self) -> usize {
        self.ctx.info.max_active.map_or(UNLIMITED_ZONES, |v| v as usize).max(1)
    }

    fn open_limit(&self) -> usize {
        self.ctx.info.max_open.map_or(UNLIMITED_ZONES, |v| v as usize).clamp(1, self.active_limit())
    }

    fn zone_capacity(&self) -> u64 {
        self.ctx.info.zone_capacity
    }

    fn dataset_zones(&self) -> usize {
        (self.active_limit() / 2).clamp(1, MAX_DATASET_ZONES)
    }

    fn queue_capacity(&self) -> usize {
        self.ctx.q.capacity()
    }

    /// The device time a point may run from now.
    fn deadline(&self) -> u64 {
        self.ctx.now() + self.plan.point_cap_ns
    }

    /// A relative estimate of an experiment's running time, for the ETA.
    fn weight(&self, name: &str) -> f64 {
        let p = &self.plan;
        let cap_bytes = (self.zone_capacity() * self.bsz()) as f64;
        let kib32 = 32.0 * 1024.0;
        let n_sizes = p.qd1_sizes.len() as f64;
        let bytes_qd1: f64 = p.qd1_sizes.iter().map(|&s| s as f64).sum::<f64>();
        let zones = doubling_to(self.open_limit()).len() as f64;
        let occ: f64 = occupancies(self.zone_capacity()).iter().map(|o| o.1 as f64).sum::<f64>()
            / self.zone_capacity().max(1) as f64;
        let window_cmds = |ns: u64| ns as f64 / 5_000.0;
        match name {
            "qd1" => 2.0 * (n_sizes * p.qd1_ops as f64 + bytes_qd1 * p.qd1_ops as f64 / kib32),
            "intra_zone" => (p.intra_sizes.len() * p.intra_qds.len()) as f64 * p.intra_ops as f64,
            "inter_zone" => 2.0 * p.inter_sizes.len() as f64 * zones * p.inter_ops as f64,
            "open" => p.open_samples as f64 * 16.0,
            "zone_mgmt" => {
                2.0 * p.mgmt_samples as f64 * occ * cap_bytes / kib32
                    + p.mgmt_samples_full.saturating_sub(p.mgmt_samples) as f64 * cap_bytes / kib32
                    + p.mgmt_samples_cheap as f64 * 8.0
            }
            "reads" => {
                (p.dataset_bytes as f64 * self.dataset_zones() as f64) / kib32
                    + n_sizes * p.qd1_read_ops as f64
                    + (p.rand_read_sizes.len() * p.read_qds.len()) as f64 * p.read_ops as f64
                    + p.seq_read_qds.len() as f64 * p.seq_read_ops as f64 * 4.0
                    + zones * (p.read_ops + p.seq_read_ops) as f64
            }
            "read_under_write" => {
                (p.rw_fractions.len() * p.rw_read_qds.len()) as f64
                    * window_cmds(p.rw_window_ns)
                    * 4.0
            }
            "reset_interference" => {
                p.ri_rounds as f64
                    * 4.0
                    * (window_cmds(p.ri_baseline_ns) * 2.0
                        + MAX_RESET_TARGETS as f64 * p.ri_occupancy * cap_bytes / kib32)
            }
            _ => 1.0,
        }
    }

    fn experiment(&mut self, name: &str) -> Result<(), CharacterizeError> {
        match name {
            "qd1" => self.qd1(),
            "intra_zone" => self.intra_zone(),
            "inter_zone" => self.inter_zone(),
            "open" => self.open(),
            "zone_mgmt" => self.zone_mgmt(),
            "reads" => self.reads(),
            "read_under_write" => self.read_under_write(),
            "reset_interference" => self.reset_interference(),
            other => Err(CharacterizeError::Invalid(format!("unknown experiment {other:?}"))),
        }
    }

    fn can_append(&mut self) -> bool {
        if self.ctx.info.capabilities.append {
            return true;
        }
        self.skip("appends: the device has no Zone Append".into());
        false
    }

    /// Sizes the device takes in one command of this kind.
    fn sizes_for(&mut self, sizes: &[usize], append: bool) -> Vec<usize> {
        let bs = self.bsz() as usize;
        let limit = if append { self.ctx.info.zasl_bytes } else { self.ctx.info.mdts_bytes };
        let cap_bytes = (self.zone_capacity() * self.bsz()) as usize;
        let mut out = Vec::new();
        for &s in sizes {
            if s % bs != 0 || s > limit || s > cap_bytes {
                let what = if append { "appends" } else { "commands" };
                self.skip(format!("{} {what}: larger than the device takes", size_label(s as u64)));
                continue;
            }
            out.push(s);
        }
        out
    }

    /// Queue depths that fit the queue (with `reserve` slots for other
    /// streams).
    fn depths_for(&mut self, qds: &[usize], reserve: usize) -> Vec<usize> {
        let cap = self.queue_capacity().saturating_sub(reserve);
        let mut out = Vec::new();
        for &d in qds {
            if d > cap {
                self.skip(format!("queue depth {d}: the queue holds {cap}"));
                continue;
            }
            out.push(d);
        }
        out
    }

    // ---- qd1 --------------------------------------------------------------

    fn qd1(&mut self) -> Result<(), CharacterizeError> {
        let writes = self.sizes_for(&self.plan.qd1_sizes.clone(), false);
        let appends = if self.can_append() {
            self.sizes_for(&self.plan.qd1_sizes.clone(), true)
        } else {
            Vec::new()
        };
        self.begin((writes.len() + appends.len()) as u64);
        for (op, sizes) in [("write", writes), ("append", appends)] {
            for bs in sizes {
                let zone = self.qd1_ramp(bs)?;
                let work = if op == "write" { Work::Write { zone } } else { Work::Append { zone } };
                let mut s =
                    [Stream::new(work, 1, bs).limit(self.plan.qd1_ops).until(self.deadline())];
                run_streams(&mut self.ctx, &mut s)?;
                let mut p = point("qd1", format!("qd1/{op}/{}", size_label(bs as u64)), op);
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(1);
                p.zones = Some(1);
                self.push_point(merged(p, &s));
                self.ctx.release_zones()?;
                self.step();
            }
        }
        Ok(())
    }

    /// The ramp before a QD 1 write or append point of `bs` bytes: a
    /// fresh zone written (QD 1, `bs` per command, not measured) with the
    /// plan's ramp data, which the point then goes on writing. `None`
    /// without a ramp.
    fn qd1_ramp(&mut self, bs: usize) -> Result<Option<WriteZone>, CharacterizeError> {
        let bsz = self.bsz();
        let per = (bs as u64 / bsz).max(1);
        let want = self.plan.qd1_ramp_bytes / bsz / per * per;
        if want == 0 {
            return Ok(None);
        }
        let (start, cap) = self.ctx.take_zone()?;
        let blocks = want.min(cap / 2 / per * per);
        if blocks == 0 {
            return Ok(Some(WriteZone { start, end: start + cap, next: start }));
        }
        let work = Work::Fill { next: start, end: start + blocks };
        let mut ramp = [Stream::new(work, 1, bs).unrecorded()];
        run_streams(&mut self.ctx, &mut ramp)?;
        Ok(Some(WriteZone { start, end: start + cap, next: start + blocks }))
    }

    // ---- intra_zone -------------------------------------------------------

    fn intra_zone(&mut self) -> Result<(), CharacterizeError> {
        if !self.can_append() {
            return Ok(());
        }
        let sizes = self.sizes_for(&self.plan.intra_sizes.clone(), true);
        let qds = self.depths_for(&self.plan.intra_qds.clone(), 0);
        self.begin((sizes.len() * qds.len()) as u64);
        for &bs in &sizes {
            for &qd in &qds {
                let ops = self.plan.intra_ops.max(qd as u64 * 8);
                let mut s = [Stream::new(Work::Append { zone: None }, qd, bs)
                    .limit(ops)
                    .until(self.deadline())];
                run_streams(&mut self.ctx, &mut s)?;
                let id = format!("intra_zone/append/{}/qd={qd}", size_label(bs as u64));
                let mut p = point("intra_zone", id, "append");
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(qd as u32);
                p.zones = Some(1);
                self.push_point(merged(p, &s));
                self.ctx.release_zones()?;
                self.step();
            }
        }
        Ok(())
    }

    // ---- inter_zone -------------------------------------------------------

    fn inter_zone(&mut self) -> Result<(), CharacterizeError> {
        let max = self.open_limit().min(self.queue_capacity()).min(self.ctx.pool.available() / 2);
        if max < self.open_limit() {
            self.skip(format!(
                "zone counts above {max}: not enough empty zones or queue slots for {}",
                self.open_limit()
            ));
        }
        let counts = doubling_to(max);
        let writes = self.sizes_for(&self.plan.inter_sizes.clone(), false);
        let appends = if self.can_append() {
            self.sizes_for(&self.plan.inter_sizes.clone(), true)
        } else {
            Vec::new()
        };
        self.begin(((writes.len() + appends.len()) * counts.len()) as u64);
        for (op, sizes) in [("write", writes), ("append", appends)] {
            for &bs in &sizes {
                for &k in &counts {
                    let per = self.plan.inter_ops.div_ceil(k as u64).max(8);
                    let deadline = self.deadline();
                    let mut streams: Vec<Stream> = (0..k)
                        .map(|_| {
                            let work = if op == "write" {
                                Work::Write { zone: None }
                            } else {
                                Work::Append { zone: None }
                            };
                            Stream::new(work, 1, bs).limit(per).until(deadline)
                        })
                        .collect();
                    run_streams(&mut self.ctx, &mut streams)?;
                    let id = format!("inter_zone/{op}/{}/zones={k}", size_label(bs as u64));
                    let mut p = point("inter_zone", id, op);
                    p.block_bytes = Some(bs as u64);
                    p.queue_depth = Some(k as u32);
                    p.zones = Some(k as u32);
                    self.push_point(merged(p, &streams));
                    self.ctx.release_zones()?;
                    self.step();
                }
            }
        }
        Ok(())
    }

    // ---- open -------------------------------------------------------------

    fn open(&mut self) -> Result<(), CharacterizeError> {
        let append = self.can_append();
        let samples = self.plan.open_samples;
        self.begin(samples as u64);
        let bs = self.bsz();
        let mut buf = Some(self.ctx.data_buffer(bs as usize)?);
        let mut got: BTreeMap<&'static str, Samples> = BTreeMap::new();
        let kinds: &[(&str, bool)] = if append {
            &[("write", false), ("write", true), ("append", false), ("append", true)]
        } else {
            &[("write", false), ("write", true)]
        };
        for _ in 0..samples {
            for &(op, explicit) in kinds {
                let (z, _) = self.ctx.take_zone()?;
                if explicit {
                    let t = self.sampled(|r| r.ctx.action(ZoneAction::Open, z))?;
                    got.entry("open/explicit_open").or_default().add(t, 0);
                }
                for nth in 0..2u64 {
                    let cmd = if op == "write" {
                        ZoneOp::Write { lba: z + nth, fua: false, placement: None }
                    } else {
                        ZoneOp::Append { zslba: z, fua: false }
                    };
                    let ((t, b), late) = self.sampled(|r| r.ctx.single(cmd, buf.take()))?;
                    buf = b;
                    let key = match (op, nth, explicit) {
                        ("write", 0, false) => "open/first_write/implicit",
                        ("write", 0, true) => "open/first_write/explicit",
                        ("write", _, false) => "open/next_write/implicit",
                        ("write", _, true) => "open/next_write/explicit",
                        (_, 0, false) => "open/first_append/implicit",
                        (_, 0, true) => "open/first_append/explicit",
                        (_, _, false) => "open/next_append/implicit",
                        (_, _, true) => "open/next_append/explicit",
                    };
                    got.entry(key).or_default().add((t, late), bs);
                }
                self.ctx.action(ZoneAction::Reset, z)?;
                self.ctx.pool.take_back(&[z]);
            }
            self.step();
        }
        for (id, s) in got {
            let parts: Vec<&str> = id.split('/').collect();
            let op = match parts[1] {
                "explicit_open" => "open",
                k if k.ends_with("write") => "write",
                _ => "append",
            };
            let mut p = point("open", id.to_string(), op);
            p.pattern = Some(match parts.get(2) {
                Some(v) => v.to_string(),
                None => "explicit".to_string(),
            });
            p.condition = Some(parts[1].to_string());
            if op != "open" {
                p.block_bytes = Some(bs);
            }
            p.queue_depth = Some(1);
            p.zones = Some(1);
            self.push_samples(&s, p);
        }
        Ok(())
    }

    // ---- zone_mgmt --------------------------------------------------------

    fn zone_mgmt(&mut self) -> Result<(), CharacterizeError> {
        let cap = self.zone_capacity();
        let occs = occupancies(cap);
        let (n, cheap_n) = (self.plan.mgmt_samples, self.plan.mgmt_samples_cheap);
        let full_n = self.plan.mgmt_samples_full.max(n);
        let count = |label: &str, blocks: u64, finished: bool| {
            if blocks == 0 || (blocks == 1 && !finished) {
                cheap_n
            } else if label == "full" && !finished {
                full_n
            } else {
                n
            }
        };
        let total: u64 = occs
            .iter()
            .flat_map(|&(l, b)| [count(l, b, false), count(l, b, true)])
            .map(u64::from)
            .sum();
        self.begin(total);
        // (op, variant, occupancy label) -> samples
        let mut got: BTreeMap<(String, &'static str), (Samples, u64, &'static str)> =
            BTreeMap::new();
        let mut add = |op: &str, occ: &'static str, blocks: u64, t: (u64, LatenessStats)| {
            let e = got
                .entry((op.to_string(), occ))
                .or_insert_with(|| (Samples::default(), blocks, occ));
            e.0.add(t, 0);
        };
        let mut close_after_write = Samples::default();
        let mut close_after_open = Samples::default();
        for sample in 0..n.max(cheap_n).max(full_n) {
            for &(label, blocks) in &occs {
                for finished in [false, true] {
                    if sample >= count(label, blocks, finished) {
                        continue;
                    }
                    let (z, zcap) = self.ctx.take_zone()?;
                    // Zones whose capacity differs: the same label, their own blocks.
                    let blocks = if label == "full" { zcap } else { blocks.min(zcap) };
                    if blocks == 0 {
                        let t = self.sampled(|r| r.ctx.action(ZoneAction::Open, z))?;
                        add("open", label, blocks, t);
                        let t = self.sampled(|r| r.ctx.action(ZoneAction::Close, z))?;
                        add("close", label, blocks, t);
                        close_after_open.add(t, 0);
                    } else {
                        self.ctx.fill(&[(z, z)], blocks)?;
                        if blocks < zcap {
                            let t = self.sampled(|r| r.ctx.action(ZoneAction::Close, z))?;
                            add("close", label, blocks, t);
                            close_after_write.add(t, 0);
                            self.mgmt_settle();
                            let t = self.sampled(|r| r.ctx.action(ZoneAction::Open, z))?;
                            add("open", label, blocks, t);
                        } else {
                            self.mgmt_settle();
                        }
                    }
                    if finished {
                        let t = self.sampled(|r| r.ctx.action(ZoneAction::Finish, z))?;
                        add("finish", label, blocks, t);
                        if blocks > 0 {
                            self.mgmt_settle();
                        }
                        let t = self.sampled(|r| r.ctx.action(ZoneAction::Reset, z))?;
                        add("reset_after_finish", label, blocks, t);
                    } else {
                        let t = self.sampled(|r| r.ctx.action(ZoneAction::Reset, z))?;
                        add("reset", label, blocks, t);
                    }
                    self.ctx.pool.take_back(&[z]);
                    self.step();
                }
            }
        }
        // Points in occupancy order, op by op.
        for op in ["open", "close", "finish", "reset", "reset_after_finish"] {
            for &(label, _) in &occs {
                let Some((s, blocks, occ)) = got.remove(&(op.to_string(), label)) else {
                    continue;
                };
                let base = if op == "reset_after_finish" { "reset" } else { op };
                let mut p = point("zone_mgmt", format!("zone_mgmt/{op}/{occ}"), base);
                if op == "reset_after_finish" {
                    p.pattern = Some("after_finish".into());
                } else if op == "reset" {
                    p.pattern = Some("unfinished".into());
                }
                p.occupancy = Some(blocks as f64 / cap as f64);
                p.occupancy_label = Some(occ.to_string());
                p.queue_depth = Some(1);
                p.zones = Some(1);
                self.push_samples(&s, p);
            }
        }
        for (cond, s) in [("after_write", close_after_write), ("after_open", close_after_open)] {
            if s.hist.is_empty() {
                continue;
            }
            let mut p = point("zone_mgmt", format!("zone_mgmt/close/{cond}"), "close");
            p.condition = Some(cond.into());
            p.queue_depth = Some(1);
            self.push_samples(&s, p);
        }
        Ok(())
    }

    /// Leaves the device idle for the plan's zone management settle time
    /// (device time: on a virtual clock it passes at once).
    fn mgmt_settle(&mut self) {
        if self.plan.mgmt_settle_ns > 0 {
            self.ctx.wait_ns(self.plan.mgmt_settle_ns);
        }
    }

    // ---- the read data set -------------------------------------------------

    /// Writes the zones the read experiments read, once; they stay Closed
    /// (active) until the end of the run.
    fn dataset(&mut self) -> Result<Vec<(u64, u64)>, CharacterizeError> {
        if let Some(d) = &self.dataset {
            return Ok(d.clone());
        }
        let zones = self.dataset_zones();
        let blocks = (self.plan.dataset_bytes / self.bsz()).clamp(1, self.zone_capacity());
        let mut starts = Vec::new();
        let mut smallest = u64::MAX;
        for _ in 0..zones {
            let (z, zcap) = self.ctx.take_zone()?;
            self.ctx.pool.pin(z);
            starts.push(z);
            smallest = smallest.min(zcap);
        }
        let blocks = blocks.min(smallest);
        let at: Vec<(u64, u64)> = starts.iter().map(|&z| (z, z)).collect();
        self.ctx.fill(&at, blocks)?;
        if blocks < smallest {
            for &z in &starts {
                self.ctx.action(ZoneAction::Close, z)?;
            }
        }
        let extents: Vec<(u64, u64)> = starts.iter().map(|&z| (z, blocks)).collect();
        tracing::info!(zones, blocks, "read data set written");
        self.settle(&extents)?;
        self.dataset = Some(extents.clone());
        Ok(extents)
    }

    /// Gives the device time to finish what writes left it to do (data in
    /// a write buffer reaching the media) before the next measurement: a
    /// Flush where the device has a volatile write cache, then reads of
    /// `extents` at queue depth 1, not measured, for the plan's settle
    /// time. (On a virtual clock, time passes only while commands are in
    /// flight, so waiting means keeping the device lightly busy.)
    fn settle(&mut self, extents: &[(u64, u64)]) -> Result<(), CharacterizeError> {
        if self.ctx.info.capabilities.volatile_write_cache {
            self.ctx.single(ZoneOp::Flush, None)?;
        }
        if self.plan.settle_ns == 0 || extents.is_empty() {
            return Ok(());
        }
        let until = self.ctx.now() + self.plan.settle_ns;
        let bs = self.bsz() as usize;
        let work = Work::RandomRead { extents: extents.to_vec() };
        let mut s = [Stream::new(work, 1, bs).until(until).unrecorded()];
        run_streams(&mut self.ctx, &mut s)
    }

    fn drop_dataset(&mut self) -> Result<(), CharacterizeError> {
        if let Some(d) = self.dataset.take() {
            let starts: Vec<u64> = d.iter().map(|e| e.0).collect();
            self.ctx.pool.unpin(&starts);
            self.ctx.reset_zones(&starts)?;
            self.ctx.pool.take_back(&starts);
        }
        Ok(())
    }

    /// Resets every zone that was usable at the start and is not Empty now.
    fn sweep(&mut self) -> Result<(), CharacterizeError> {
        let left = self.ctx.pool.not_empty_now(self.ctx.q.as_mut())?;
        if !left.is_empty() {
            tracing::info!(zones = left.len(), "final sweep resets zones left written");
            self.ctx.reset_zones(&left)?;
        }
        Ok(())
    }

    // ---- reads ------------------------------------------------------------

    fn reads(&mut self) -> Result<(), CharacterizeError> {
        let extents = self.dataset()?;
        let data_bytes = (extents[0].1 * self.bsz()) as usize;
        let qd1_sizes: Vec<usize> = self
            .sizes_for(&self.plan.qd1_sizes.clone(), false)
            .into_iter()
            .filter(|&s| s <= data_bytes)
            .collect();
        let rand_sizes: Vec<usize> = self
            .sizes_for(&self.plan.rand_read_sizes.clone(), false)
            .into_iter()
            .filter(|&s| s <= data_bytes)
            .collect();
        let seq = self.sizes_for(&[self.plan.seq_read_size], false);
        let seq: Vec<usize> = seq.into_iter().filter(|&s| s <= data_bytes).collect();
        let qds = self.depths_for(&self.plan.read_qds.clone(), 0);
        let seq_qds = self.depths_for(&self.plan.seq_read_qds.clone(), 0);
        let counts = doubling_to(extents.len());
        let steps = qd1_sizes.len()
            + rand_sizes.len() * qds.len()
            + seq.len() * seq_qds.len()
            + counts.len() * (1 + seq.len());
        self.begin(steps as u64);

        for &bs in &qd1_sizes {
            let mut s = [Stream::new(Work::RandomRead { extents: extents.clone() }, 1, bs)
                .limit(self.plan.qd1_read_ops)
                .until(self.deadline())];
            run_streams(&mut self.ctx, &mut s)?;
            let mut p = point("reads", format!("qd1/read/{}", size_label(bs as u64)), "read");
            p.pattern = Some("random".into());
            p.block_bytes = Some(bs as u64);
            p.queue_depth = Some(1);
            p.zones = Some(extents.len() as u32);
            self.push_point(merged(p, &s));
            self.step();
        }
        for &bs in &rand_sizes {
            for &qd in &qds {
                let ops = self.plan.read_ops.max(qd as u64 * 16);
                let mut s = [Stream::new(Work::RandomRead { extents: extents.clone() }, qd, bs)
                    .limit(ops)
                    .until(self.deadline())];
                run_streams(&mut self.ctx, &mut s)?;
                let id = format!("read_qd/random/{}/qd={qd}", size_label(bs as u64));
                let mut p = point("reads", id, "read");
                p.pattern = Some("random".into());
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(qd as u32);
                p.zones = Some(extents.len() as u32);
                self.push_point(merged(p, &s));
                self.step();
            }
        }
        for &bs in &seq {
            for &qd in &seq_qds {
                let ops = self.plan.seq_read_ops.max(qd as u64 * 16);
                let work = Work::SeqRead { extents: extents.clone(), index: 0, offset: 0 };
                let mut s = [Stream::new(work, qd, bs).limit(ops).until(self.deadline())];
                run_streams(&mut self.ctx, &mut s)?;
                let id = format!("read_qd/sequential/{}/qd={qd}", size_label(bs as u64));
                let mut p = point("reads", id, "read");
                p.pattern = Some("sequential".into());
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(qd as u32);
                p.zones = Some(extents.len() as u32);
                self.push_point(merged(p, &s));
                self.step();
            }
        }
        // By zone count: the same total depth spread over k zones.
        let small = self.bsz() as usize * (self.plan.rand_read_sizes[0] / self.bsz() as usize);
        let zone_cases: Vec<(&str, usize, usize, u64)> = std::iter::once((
            "random",
            small,
            self.plan.zone_read_qd.min(self.queue_capacity()),
            self.plan.read_ops,
        ))
        .chain(seq.iter().map(|&bs| {
            ("sequential", bs, self.plan.zone_seq_read_qd.min(self.queue_capacity()), {
                self.plan.seq_read_ops
            })
        }))
        .collect();
        for (pattern, bs, total_qd, ops) in zone_cases {
            if bs as u64 > extents[0].1 * self.bsz() {
                continue;
            }
            for &k in &counts {
                let total_qd = total_qd.max(k);
                let deadline = self.deadline();
                let mut streams: Vec<Stream> = (0..k)
                    .map(|j| {
                        let depth = total_qd / k + usize::from(j < total_qd % k);
                        let e = vec![extents[j]];
                        let work = if pattern == "random" {
                            Work::RandomRead { extents: e }
                        } else {
                            Work::SeqRead { extents: e, index: 0, offset: 0 }
                        };
                        let per = (ops * depth as u64).div_ceil(total_qd as u64).max(8);
                        Stream::new(work, depth, bs).limit(per).until(deadline)
                    })
                    .collect();
                run_streams(&mut self.ctx, &mut streams)?;
                let id = format!("read_zones/{pattern}/{}/zones={k}", size_label(bs as u64));
                let mut p = point("reads", id, "read");
                p.pattern = Some(pattern.into());
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(total_qd as u32);
                p.zones = Some(k as u32);
                self.push_point(merged(p, &streams));
                self.step();
            }
        }
        Ok(())
    }

    /// The write bandwidth measured so far (MiB/s), if any.
    fn write_bandwidth(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| matches!(p.op.as_str(), "write" | "append") && p.condition.is_none())
            .map(|p| p.mib_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .filter(|&v| v > 0.0)
    }

    // ---- read_under_write ---------------------------------------------------

    fn read_under_write(&mut self) -> Result<(), CharacterizeError> {
        let extents = self.dataset()?;
        let writers =
            2usize.min(self.active_limit().saturating_sub(extents.len())).min(self.open_limit());
        if writers == 0 {
            self.skip("the active zone limit leaves no zone to write beside the read data".into());
            return Ok(());
        }
        let wbs = self.sizes_for(&[self.plan.rw_write_size], false);
        let Some(&wbs) = wbs.first() else { return Ok(()) };
        let read_qds = self.depths_for(&self.plan.rw_read_qds.clone(), writers);
        let fractions = self.plan.rw_fractions.clone();
        self.begin((fractions.len() * read_qds.len()) as u64 + 1);
        // The write bandwidth the rates are fractions of: measured by the
        // earlier experiments, or here, unthrottled, without reads.
        let bw = match self.write_bandwidth() {
            Some(bw) => bw,
            None => {
                let until = self.ctx.now() + self.plan.rw_window_ns;
                let mut w: Vec<Stream> = (0..writers)
                    .map(|_| Stream::new(Work::Write { zone: None }, 1, wbs).until(until))
                    .collect();
                run_streams(&mut self.ctx, &mut w)?;
                let mut p = point(
                    "read_under_write",
                    format!("read_under_write/write/{}/alone", size_label(wbs as u64)),
                    "write",
                );
                p.block_bytes = Some(wbs as u64);
                p.queue_depth = Some(writers as u32);
                p.zones = Some(writers as u32);
                let p = merged(p, &w);
                let bw = p.mib_s;
                self.push_point(p);
                self.ctx.release_zones()?;
                bw
            }
        };
        self.step();
        for read_qd in read_qds {
            for &frac in &fractions {
                self.read_under_write_point(&extents, read_qd, frac, bw, (writers, wbs))?;
            }
        }
        Ok(())
    }

    /// One rate of `read_under_write`: reads at `read_qd` while `writers`
    /// zones are written in `wbs`-byte commands at `frac` of `bw`.
    fn read_under_write_point(
        &mut self,
        extents: &[(u64, u64)],
        read_qd: usize,
        frac: f64,
        bw: f64,
        (writers, wbs): (usize, usize),
    ) -> Result<(), CharacterizeError> {
        let rbs = self.plan.rw_read_size;
        self.settle(extents)?;
        let until = self.ctx.now() + self.plan.rw_window_ns;
        let mut streams =
            vec![Stream::new(Work::RandomRead { extents: extents.to_vec() }, read_qd, rbs)
                .until(until)];
        let unthrottled = frac >= 1.0;
        if frac > 0.0 {
            for _ in 0..writers {
                let mut w = Stream::new(Work::Write { zone: None }, 1, wbs).until(until);
                if !unthrottled {
                    w = w.rate_mib_s(bw * frac / writers as f64);
                }
                streams.push(w);
            }
        }
        run_streams(&mut self.ctx, &mut streams)?;
        let pct = (frac * 100.0).round();
        let target = (!unthrottled).then_some(bw * frac);
        let mut p = point(
            "read_under_write",
            format!("read_under_write/read/{}/qd={read_qd}/rate={pct}%", size_label(rbs as u64)),
            "read",
        );
        p.pattern = Some("random".into());
        p.condition = Some("under_writes".into());
        p.block_bytes = Some(rbs as u64);
        p.queue_depth = Some(read_qd as u32);
        p.zones = Some(extents.len() as u32);
        p.rate_fraction = Some(frac);
        p.target_mib_s = target;
        self.push_point(merged(p, &streams[..1]));
        if frac > 0.0 {
            let mut p = point(
                "read_under_write",
                format!(
                    "read_under_write/write/{}/qd={read_qd}/rate={pct}%",
                    size_label(wbs as u64)
                ),
                "write",
            );
            p.condition = Some("beside_reads".into());
            p.block_bytes = Some(wbs as u64);
            p.queue_depth = Some(writers as u32);
            p.zones = Some(writers as u32);
            p.rate_fraction = Some(frac);
            p.target_mib_s = target;
            self.push_point(merged(p, &streams[1..]));
        }
        self.ctx.release_zones()?;
        self.step();
        Ok(())
    }

    // ---- reset_interference -------------------------------------------------

    fn reset_interference(&mut self) -> Result<(), CharacterizeError> {
        let extents = self.dataset()?;
        let targets = MAX_RESET_TARGETS
            .min(self.active_limit().saturating_sub(extents.len() + 1))
            .min(self.ctx.pool.available().saturating_sub(2));
        if targets == 0 {
            self.skip("the active zone limit leaves no zone to reset beside the read data".into());
            return Ok(());
        }
        let cap = self.zone_capacity();
        let occ_blocks = ((cap as f64 * self.plan.ri_occupancy).round() as u64).clamp(1, cap);
        let mut kinds = vec!["idle", "read", "write"];
        if self.can_append() {
            kinds.push("append");
        }
        let bs = self.bsz() as usize;
        let rounds = self.plan.ri_rounds;
        self.begin(u64::from(rounds) * kinds.len() as u64);
        let mut baseline: BTreeMap<&str, Vec<Stream>> = BTreeMap::new();
        let mut under: BTreeMap<&str, Vec<Stream>> = BTreeMap::new();
        let mut resets: BTreeMap<&str, Vec<Stream>> = BTreeMap::new();
        let read_qd = self.plan.ri_read_qd.min(self.queue_capacity() - 1);
        let append_qd = self.plan.ri_append_qd.min(self.queue_capacity() - 1);
        for _ in 0..rounds {
            for &kind in &kinds {
                let mut zs = Vec::new();
                let mut smallest = u64::MAX;
                for _ in 0..targets {
                    let (z, zcap) = self.ctx.take_zone()?;
                    zs.push(z);
                    smallest = smallest.min(zcap);
                }
                let occ_blocks = occ_blocks.min(smallest);
                let at: Vec<(u64, u64)> = zs.iter().map(|&z| (z, z)).collect();
                self.ctx.fill(&at, occ_blocks)?;
                if occ_blocks < smallest {
                    for &z in &zs {
                        self.ctx.action(ZoneAction::Close, z)?;
                    }
                }
                self.settle(&extents)?;
                let fg = |extents: &Vec<(u64, u64)>| match kind {
                    "read" => {
                        Stream::new(Work::RandomRead { extents: extents.clone() }, read_qd, bs)
                    }
                    "write" => Stream::new(Work::Write { zone: None }, 1, bs),
                    _ => Stream::new(Work::Append { zone: None }, append_qd, bs),
                };
                if kind != "idle" {
                    let until = self.ctx.now() + self.plan.ri_baseline_ns;
                    let mut b = [fg(&extents).until(until)];
                    run_streams(&mut self.ctx, &mut b)?;
                    baseline.entry(kind).or_default().extend(b);
                }
                let ops = zs
                    .iter()
                    .map(|&z| ZoneOp::Zone { action: ZoneAction::Reset, target: Target::Zone(z) })
                    .collect();
                let mut s = vec![Stream::new(Work::Actions { ops }, 1, 0)];
                if kind != "idle" {
                    s.push(fg(&extents).background());
                }
                run_streams(&mut self.ctx, &mut s)?;
                let mut it = s.into_iter();
                resets.entry(kind).or_default().extend(it.next());
                under.entry(kind).or_default().extend(it);
                self.ctx.pool.take_back(&zs);
                self.ctx.release_zones()?;
                self.step();
            }
        }
        let label = |k: &str| if k == "idle" { "idle".to_string() } else { format!("under_{k}") };
        for &kind in &kinds {
            if let Some(s) = resets.get(kind) {
                let mut p = point(
                    "reset_interference",
                    format!("reset_interference/reset/{}", label(kind)),
                    "reset",
                );
                p.condition = Some(label(kind));
                p.occupancy = Some(occ_blocks as f64 / cap as f64);
                p.zones = Some(targets as u32);
                p.queue_depth = Some(1);
                self.push_point(merged_sequential(p, s));
            }
        }
        for &kind in &kinds[1..] {
            let qd = match kind {
                "read" => read_qd,
                "write" => 1,
                _ => append_qd,
            };
            for (cond, map) in [("baseline", &baseline), ("under_resets", &under)] {
                let Some(s) = map.get(kind) else { continue };
                let mut p =
                    point("reset_interference", format!("reset_interference/{kind}/{cond}"), kind);
                if kind == "read" {
                    p.pattern = Some("random".into());
                }
                p.condition = Some(cond.into());
                p.block_bytes = Some(bs as u64);
                p.queue_depth = Some(qd as u32);
                self.push_point(merged_sequential(p, s));
            }
        }
        Ok(())
    }
}

/// Streams that ran one after another: their elapsed times add up.
fn merged_sequential(p: Point, streams: &[Stream]) -> Point {
    let mut h = LatencyHistogram::new();
    let (mut ops, mut bytes, mut elapsed) = (0, 0, 0);
    for s in streams {
        h.merge(&s.hist);
        ops += s.ops;
        bytes += s.bytes;
        elapsed += s.elapsed();
    }
    measured(p, &h, ops, bytes, elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancies_cover_the_zone_without_repeats() {
        let o = occupancies(275_712);
        let labels: Vec<&str> = o.iter().map(|x| x.0).collect();
        assert_eq!(labels, ["empty", "1LBA", "6.25%", "12.5%", "25%", "50%", "full-1LBA", "full"]);
        assert_eq!(o[2].1, 17_232);
        assert_eq!(o[7].1, 275_712);
        // A tiny zone: 6.25% of 8 blocks is 0 (already "empty") and is left out.
        let o = occupancies(8);
        let blocks: Vec<u64> = o.iter().map(|x| x.1).collect();
        assert_eq!(blocks, [0, 1, 2, 4, 7, 8]);
    }

    #[test]
    fn doubling_series_ends_at_the_limit() {
        assert_eq!(doubling_to(14), [1, 2, 4, 8, 14]);
        assert_eq!(doubling_to(4), [1, 2, 4]);
        assert_eq!(doubling_to(1), [1]);
        assert!(doubling_to(0).is_empty());
    }
}
