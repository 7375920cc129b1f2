//! What a scrape reads: for each namespace its command counters and zone
//! map, for each device its host and media bytes, write amplification,
//! late completions and a conventional twin's garbage collection, for
//! each FTL its figures. Everything here runs at scrape time, on the
//! scraping thread; the I/O path only bumps its queue's atomics.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use zns_device::{ZoneQueue, ZonedDevice};
use zns_emulator::trace::{DieBusy, TraceSink};
use zns_ftl::Ftl;
use zns_spec::log::{GetLogPage, LogPageId, OcpSmartLog, SmartLog};

use crate::family::Value::{self, Count, Gauge, Seconds};
use crate::family::{Families, Labels};
use crate::record::{status_label, DeviceMetrics, Opcode, LATENCY_BOUNDS};
use crate::zones::{ZoneMap, STATE_LABELS};

/// One namespace a scrape covers.
pub(crate) struct NamespaceSource {
    /// The `namespace` label.
    pub name: String,
    /// The device, not metered: the scrape's own commands are not counted.
    pub device: Arc<dyn ZonedDevice>,
    /// Its counters, when its commands go through a metered device.
    pub metrics: Option<Arc<DeviceMetrics>>,
    /// Whether this is the device's conventional namespace.
    pub conventional: bool,
    /// The scrape's queue for zone reports, made at the first scrape.
    pub queue: Mutex<Option<Box<dyn ZoneQueue>>>,
}

impl std::fmt::Debug for NamespaceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceSource").field("name", &self.name).finish_non_exhaustive()
    }
}

/// An FTL a scrape covers.
#[derive(Debug)]
pub(crate) struct FtlSource {
    /// The `ftl` label.
    pub name: String,
    pub ftl: Arc<Ftl>,
}

fn l(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|&(k, v)| (k, v.to_string())).collect()
}

/// Adds a sample to each family of `rows` (name, help, value), every one
/// with `labels`.
fn add_rows(
    f: &mut Families,
    labels: &Labels,
    rows: impl IntoIterator<Item = (&'static str, &'static str, Value)>,
) {
    for (name, help, v) in rows {
        f.add(name, help, labels.clone(), v);
    }
}

impl NamespaceSource {
    /// The zone map, through the scrape's own queue.
    pub fn zone_map(&self) -> Option<ZoneMap> {
        if self.conventional || !self.device.info().zoned {
            return None;
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_none() {
            *q = self.device.queue(2).map_err(|e| tracing::warn!("metrics: {e}")).ok();
        }
        let queue = q.as_mut()?;
        match ZoneMap::read(&self.name, self.device.as_ref(), queue.as_mut()) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!("metrics: zone report: {e}");
                // A fresh queue next time: this one may be broken.
                *q = None;
                None
            }
        }
    }

    /// Adds this namespace's samples.
    pub fn gather(&self, f: &mut Families) {
        let ns = self.name.as_str();
        let uri = self.device.info().uri.as_str();
        let kind =
            if self.conventional || !self.device.info().zoned { "conventional" } else { "zoned" };
        f.add(
            "zns_namespace_info",
            "A namespace served: its device URI and kind (zoned, conventional); value 1",
            l(&[("namespace", ns), ("device", uri), ("kind", kind)]),
            Gauge(1.0),
        );
        if let Some(m) = &self.metrics {
            gather_io(ns, m, f);
        }
        if let Some(map) = self.zone_map() {
            gather_zones(&map, f);
        }
    }
}

/// Commands, bytes and latencies by queue and opcode; completions by status.
fn gather_io(ns: &str, m: &DeviceMetrics, f: &mut Families) {
    for q in m.queues() {
        let queue = q.slot().to_string();
        for op in Opcode::ALL {
            let c = &q.ops[op as usize];
            let labels = l(&[("namespace", ns), ("queue", &queue), ("opcode", op.label())]);
            let n = c.commands.load(Ordering::Relaxed);
            let bytes = c.bytes.load(Ordering::Relaxed);
            let rows = [
                ("zns_commands", "Commands completed, by namespace, queue and opcode", Count(n)),
                (
                    "zns_bytes",
                    "Bytes of data commands moved between host and device, by namespace, \
                     queue and opcode",
                    Count(bytes),
                ),
            ];
            add_rows(f, &labels, rows);
            if n == 0 {
                continue;
            }
            let buckets: Vec<(f64, u64)> = c
                .buckets
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    (LATENCY_BOUNDS.get(i).copied().unwrap_or(f64::MAX), b.load(Ordering::Relaxed))
                })
                .collect();
            let count = buckets.iter().map(|b| b.1).sum();
            let sum = c.latency_ns.load(Ordering::Relaxed) as f64 / 1e9;
            f.add(
                "zns_command_latency_seconds",
                "Time from submission to completion on the device's clock, by namespace, queue \
                 and opcode",
                labels,
                Value::Histogram(sum, count, buckets),
            );
        }
        for (i, s) in q.statuses.iter().enumerate() {
            let n = s.load(Ordering::Relaxed);
            // Success always, so that error rates have a denominator.
            if n == 0 && i != zns_spec::StatusCode::Success as usize {
                continue;
            }
            f.add(
                "zns_completions",
                "Completions by namespace, queue and status (the specification's name)",
                l(&[("namespace", ns), ("queue", &queue), ("status", status_label(i))]),
                Count(n),
            );
        }
    }
}

/// Zones by state, open and active zones and their limits.
fn gather_zones(map: &ZoneMap, f: &mut Families) {
    let ns = map.namespace.as_str();
    for (state, n) in STATE_LABELS.iter().zip(map.counts()) {
        f.add(
            "zns_zones",
            "Zones by state",
            l(&[("namespace", ns), ("state", state)]),
            Gauge(n as f64),
        );
    }
    let written: u64 = map.zones.iter().map(|z| z.written).sum();
    // Gauges of the namespace; a limit the device does not set is left out.
    let rows = [
        ("zns_open_zones", "Open zones (implicitly and explicitly opened)", Some(map.open())),
        ("zns_active_zones", "Active zones (open and closed)", Some(map.active())),
        (
            "zns_max_open_zones",
            "Max Open Resources (absent: no limit)",
            map.max_open.map(u64::from),
        ),
        (
            "zns_max_active_zones",
            "Max Active Resources (absent: no limit)",
            map.max_active.map(u64::from),
        ),
        ("zns_zone_written_blocks", "Blocks below the write pointers of all zones", Some(written)),
    ];
    let gauges =
        rows.into_iter().filter_map(|(name, help, n)| Some((name, help, Gauge(n? as f64))));
    add_rows(f, &l(&[("namespace", ns)]), gauges);
}

/// A device a scrape covers, with the die-busy sink added to its timing
/// model (timed emulators only).
pub(crate) struct DeviceSource {
    pub device: Arc<dyn ZonedDevice>,
    die_busy: Option<Arc<DieBusy>>,
}

impl std::fmt::Debug for DeviceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSource").field("uri", &self.device.info().uri).finish_non_exhaustive()
    }
}

impl DeviceSource {
    /// `device`, counting its dies' busy time from now on when it is a
    /// timed emulator (a trace sink: one atomic add per flash operation).
    pub fn new(device: &Arc<dyn ZonedDevice>) -> Self {
        let die_busy = device.emulator().filter(|e| e.is_timed()).and_then(|e| {
            let t = e.profile().timing.as_ref()?;
            let sink = Arc::new(DieBusy::new((t.channels * t.dies_per_channel) as usize));
            e.add_trace_sink(Arc::clone(&sink) as Arc<dyn TraceSink>);
            Some(sink)
        });
        DeviceSource { device: Arc::clone(device), die_busy }
    }

    /// Adds this device's samples.
    pub fn gather(&self, f: &mut Families) {
        gather_device(self.device.as_ref(), f);
        let (Some(busy), Some(e)) = (&self.die_busy, self.device.emulator()) else { return };
        let uri = self.device.info().uri.as_str();
        f.add(
            "zns_model_time_seconds",
            "The timing model's time (its clock over the dilation factor): the denominator of die busy time",
            l(&[("device", uri)]),
            Gauge(e.clock().model_now_ns() as f64 / 1e9),
        );
        for (die, ns) in busy.busy_ns().into_iter().enumerate() {
            let die = die.to_string();
            f.add(
                "zns_die_busy_seconds",
                "Model time each die spent reading, programming or erasing since the metrics began",
                l(&[("device", uri), ("die", &die)]),
                Seconds(ns as f64 / 1e9),
            );
        }
    }
}

/// A device's own figures: host and media bytes, write amplification,
/// late completions, a conventional twin's garbage collection.
fn gather_device(dev: &dyn ZonedDevice, f: &mut Families) {
    let uri = dev.info().uri.as_str();
    let d = l(&[("device", uri)]);
    let host = host_bytes(dev);
    if let Some((written, read)) = host {
        let rows = [
            ("zns_host_written_bytes", "Bytes the host wrote (Write, Zone Append)", Count(written)),
            ("zns_host_read_bytes", "Bytes the host read", Count(read)),
        ];
        add_rows(f, &d, rows);
    }
    if let Some(s) = smart_log(dev) {
        let rows = [
            (
                "zns_host_read_commands",
                "Read commands the controller completed (SMART)",
                Count(s.host_read_commands as u64),
            ),
            (
                "zns_host_write_commands",
                "Write commands the controller completed (SMART)",
                Count(s.host_write_commands as u64),
            ),
        ];
        add_rows(f, &d, rows);
    }
    if let Some(m) = ocp_log(dev) {
        let (w, r) = (m.media_bytes_written as u64, m.media_bytes_read as u64);
        let rows = [
            (
                "zns_media_written_bytes",
                "Bytes programmed into the media (OCP C0h), the device's own garbage \
                 collection included",
                Count(w),
            ),
            ("zns_media_read_bytes", "Bytes read from the media (OCP C0h)", Count(r)),
        ];
        add_rows(f, &d, rows);
        if let Some((hw, _)) = host.filter(|h| h.0 > 0) {
            f.add(
                "zns_write_amplification",
                "Media bytes written over host bytes written",
                d.clone(),
                Gauge(w as f64 / hw as f64),
            );
        }
    }
    let Some(e) = dev.emulator() else { return };
    if let Some(late) = e.lateness() {
        let rows = [
            ("zns_timed_completions", "Completions the timing model posted", Count(late.delivered)),
            (
                "zns_late_completions",
                "Completions posted more than the lateness threshold after their due time \
                 on the real clock",
                Count(late.late),
            ),
            (
                "zns_completion_lateness_seconds",
                "Sum of the delays past due times",
                Seconds(late.sum_ns as f64 / 1e9),
            ),
            (
                "zns_completion_lateness_max_seconds",
                "Longest delay past a due time",
                Gauge(late.max_ns as f64 / 1e9),
            ),
        ];
        add_rows(f, &d, rows);
    }
    for ns in e.namespaces() {
        let Some(fw) = ns.firmware() else { continue };
        let s = fw.stats();
        let nsid = ns.nsid().to_string();
        let rows = [
            (
                "zns_twin_host_blocks",
                "Blocks the host wrote to a conventional twin's firmware",
                Count(s.host_blocks),
            ),
            (
                "zns_twin_gc_moved_blocks",
                "Blocks a conventional twin's garbage collection moved",
                Count(s.gc_blocks),
            ),
            (
                "zns_twin_gc_victims",
                "Segments a conventional twin's garbage collection reclaimed",
                Count(s.victims),
            ),
            (
                "zns_twin_free_segments",
                "Free segments of a conventional twin",
                Gauge(s.free_segments as f64),
            ),
            (
                "zns_twin_max_erases",
                "Erases of a conventional twin's most erased segment",
                Gauge(s.max_erases as f64),
            ),
        ];
        add_rows(f, &l(&[("device", uri), ("nsid", &nsid)]), rows);
    }
}

/// Host bytes written and read: exact from an emulator, else the SMART
/// log's data units (512,000 bytes each).
fn host_bytes(dev: &dyn ZonedDevice) -> Option<(u64, u64)> {
    if let Some(e) = dev.emulator() {
        return Some(e.host_bytes());
    }
    let s = smart_log(dev)?;
    Some(((s.data_units_written * 512_000) as u64, (s.data_units_read * 512_000) as u64))
}

/// The SMART / Health page, when the backend reads log pages.
fn smart_log(dev: &dyn ZonedDevice) -> Option<SmartLog> {
    let b = dev.log_page(GetLogPage::new(LogPageId::SmartHealth, 0xFFFF_FFFF, 128)).ok()?;
    Some(SmartLog::from_bytes(b.as_slice().try_into().ok()?))
}

/// The OCP extended SMART page, when the device has one.
fn ocp_log(dev: &dyn ZonedDevice) -> Option<OcpSmartLog> {
    let b = dev.log_page(GetLogPage::new(LogPageId::OcpSmartExtended, 0xFFFF_FFFF, 128)).ok()?;
    let log = OcpSmartLog::from_bytes(b.as_slice().try_into().ok()?);
    log.guid_matches().then_some(log)
}

impl FtlSource {
    /// Adds the FTL's figures.
    pub fn gather(&self, f: &mut Families) {
        let s = self.ftl.stats();
        let t = l(&[("ftl", &self.name)]);
        let counts: [(&'static str, &'static str, u64); 15] = [
            ("zns_ftl_user_written_blocks", "Blocks users wrote", s.user_blocks_written),
            ("zns_ftl_user_read_blocks", "Blocks users read", s.user_blocks_read),
            ("zns_ftl_user_writes", "Write requests", s.user_writes),
            ("zns_ftl_user_reads", "Read requests", s.user_reads),
            ("zns_ftl_user_flushes", "Flush requests", s.user_flushes),
            ("zns_ftl_discarded_blocks", "Blocks discarded", s.blocks_discarded),
            (
                "zns_ftl_data_written_blocks",
                "Data blocks written to the device (user data and GC copies)",
                s.data_blocks_written,
            ),
            ("zns_ftl_gc_copied_blocks", "Blocks garbage collection relocated", s.gc_blocks_copied),
            ("zns_ftl_gc_victims", "Zones garbage collection reclaimed", s.gc_victims),
            (
                "zns_ftl_meta_written_blocks",
                "Metadata blocks written (log pages, checkpoints, zone headers)",
                s.meta_blocks_written,
            ),
            ("zns_ftl_checkpoints", "Checkpoints written", s.checkpoints),
            ("zns_ftl_device_flushes", "Flush commands sent to the device", s.device_flushes),
            ("zns_ftl_zone_resets", "Zone resets", s.zone_resets),
            ("zns_ftl_zone_finishes", "Zone finishes", s.zone_finishes),
            (
                "zns_ftl_user_waits",
                "Times a user write waited for garbage collection to free a zone",
                s.user_waits,
            ),
        ];
        add_rows(f, &t, counts.map(|(name, help, v)| (name, help, Count(v))));
        f.add(
            "zns_ftl_gc_seconds",
            "Time garbage collection spent relocating and resetting",
            t.clone(),
            Seconds(s.gc_seconds),
        );
        let gauges: [(&'static str, &'static str, f64); 4] = [
            ("zns_ftl_logical_blocks", "Blocks the FTL exposes", s.logical_blocks as f64),
            (
                "zns_ftl_mapped_blocks",
                "Logical blocks mapped (valid on the device)",
                s.valid_blocks as f64,
            ),
            ("zns_ftl_write_amplification", "Device data blocks over user blocks", s.waf),
            (
                "zns_ftl_write_amplification_total",
                "Device blocks, metadata included, over user blocks",
                s.waf_total,
            ),
        ];
        add_rows(f, &t, gauges.map(|(name, help, v)| (name, help, Gauge(v))));
        let p = &s.pools;
        for (pool, n) in [
            ("free", p.free),
            ("open", p.open),
            ("full", p.full),
            ("victim", p.victim),
            ("meta", p.meta),
            ("unusable", p.unusable),
        ] {
            f.add(
                "zns_ftl_zones",
                "The FTL's zones by pool",
                l(&[("ftl", &self.name), ("pool", pool)]),
                Gauge(n as f64),
            );
        }
    }
}
