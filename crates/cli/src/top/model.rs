//! What `zns top` shows, computed from two readings of a metrics
//! exposition (a served device's endpoint, or a device read in process):
//! the zone map, open and active zones against their limits, command
//! rates and latency percentiles over the interval, host and media bytes,
//! write amplification, late completions, an FTL's figures.

use std::time::Instant;

use zns_metrics::parse::Sample;
use zns_metrics::ZoneMap;

/// One reading of a source.
#[derive(Debug, Clone)]
pub struct Reading {
    /// When it was taken.
    pub at: Instant,
    /// The exposition's samples.
    pub samples: Vec<Sample>,
    /// The zone maps of the zoned namespaces.
    pub zones: Vec<ZoneMap>,
}

impl Reading {
    /// The sum of the samples named `name` whose labels include `labels`;
    /// `None` when there is none.
    pub fn total(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut found = None;
        for s in self.matching(name, labels) {
            *found.get_or_insert(0.0) += s.value;
        }
        found
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
    }

    /// The cumulative latency buckets of `opcode`, summed over queues and
    /// namespaces: (upper bound in seconds, commands at or below it).
    fn latency(&self, opcode: &str) -> Vec<(f64, f64)> {
        let mut out: Vec<(f64, f64)> = Vec::new();
        for s in self.matching("zns_command_latency_seconds_bucket", &[("opcode", opcode)]) {
            let le = match s.label("le") {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().unwrap_or(f64::INFINITY),
                None => continue,
            };
            match out.iter_mut().find(|(b, _)| *b == le) {
                Some(e) => e.1 += s.value,
                None => out.push((le, s.value)),
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

/// The opcodes whose rates `zns top` shows, in order.
pub const OPCODES: [(&str, &str); 4] = [
    ("read", "read"),
    ("write", "write"),
    ("zone_append", "append"),
    ("zone_management_send", "zone mgmt"),
];

/// Rates of one opcode over the interval.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRate {
    /// What the row is called.
    pub name: &'static str,
    /// Commands per second.
    pub iops: f64,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Latency percentiles 50, 99 and 99.9 (seconds), when commands
    /// completed in the interval.
    pub percentiles: Option<[f64; 3]>,
}

/// Zone counts and limits of the namespace shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Zones {
    /// The map.
    pub map: ZoneMap,
    /// Zones in each state ([`zns_metrics::STATE_LABELS`] order).
    pub counts: [u64; 7],
}

/// An FTL's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct FtlView {
    /// Blocks users wrote.
    pub user_blocks: f64,
    /// Blocks garbage collection relocated.
    pub gc_blocks: f64,
    /// Device blocks (metadata included) over user blocks.
    pub waf: f64,
}

/// Everything one frame shows.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// What is watched (the device URI or the endpoint).
    pub source: String,
    /// The zoned namespace shown, if any.
    pub zones: Option<Zones>,
    /// Rates over the interval, per opcode (SMART reads and writes when
    /// the source does not count commands itself).
    pub rates: Vec<OpRate>,
    /// The interval the rates cover (seconds); `None` on a first reading.
    pub interval: Option<f64>,
    /// Host bytes written.
    pub host_written: Option<f64>,
    /// Media bytes written.
    pub media_written: Option<f64>,
    /// Media bytes written over host bytes written.
    pub waf: Option<f64>,
    /// Late completions and timed completions (real-clock emulators).
    pub late: Option<(f64, f64)>,
    /// The FTL's figures, when an FTL is served.
    pub ftl: Option<FtlView>,
    /// Busy time of each die over the interval, a fraction of the model's
    /// time (`zns_die_busy_seconds` over `zns_model_time_seconds`): timed
    /// emulators only, and only once two readings exist.
    pub die_busy: Option<Vec<f64>>,
}

/// Quantile `q` of cumulative buckets, interpolated inside its bucket as
/// Prometheus's `histogram_quantile` does.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, n) in buckets {
        if n >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let inside = n - prev.1;
            let frac = if inside > 0.0 { (rank - prev.1) / inside } else { 1.0 };
            return Some(prev.0 + (le - prev.0) * frac);
        }
        prev = (le, n);
    }
    Some(prev.0)
}

impl View {
    /// The frame of `now`, with rates since `before` when given; the
    /// zoned namespace shown is `namespace`, or the first.
    pub fn new(
        source: &str,
        now: &Reading,
        before: Option<&Reading>,
        namespace: Option<&str>,
    ) -> View {
        let zones = now
            .zones
            .iter()
            .find(|m| namespace.is_none_or(|n| m.namespace == n))
            .map(|m| Zones { map: m.clone(), counts: m.counts() });
        let interval =
            before.map(|b| now.at.duration_since(b.at).as_secs_f64()).filter(|s| *s > 0.0);
        let host_written = now.total("zns_host_written_bytes_total", &[]);
        let media_written = now.total("zns_media_written_bytes_total", &[]);
        let waf = match (host_written, media_written) {
            (Some(h), Some(m)) if h > 0.0 => Some(m / h),
            _ => None,
        };
        let late = now
            .total("zns_late_completions_total", &[])
            .zip(now.total("zns_timed_completions_total", &[]));
        let ftl = now.total("zns_ftl_user_written_blocks_total", &[]).map(|user| FtlView {
            user_blocks: user,
            gc_blocks: now.total("zns_ftl_gc_copied_blocks_total", &[]).unwrap_or(0.0),
            waf: now.total("zns_ftl_write_amplification_total", &[]).unwrap_or(0.0),
        });
        View {
            source: source.to_string(),
            zones,
            rates: rates(now, before, interval),
            interval,
            host_written,
            media_written,
            waf,
            late,
            ftl,
            die_busy: before.and_then(|b| die_busy(now, b)),
        }
    }
}

/// Each die's busy fraction between two readings of the first device
/// that reports its dies.
fn die_busy(now: &Reading, before: &Reading) -> Option<Vec<f64>> {
    let model = now.samples.iter().find(|s| s.name == "zns_model_time_seconds")?;
    let device = model.label("device")?;
    let dt = model.value - before.total("zns_model_time_seconds", &[("device", device)])?;
    if dt <= 0.0 {
        return None;
    }
    let mut dies: Vec<(usize, f64)> = now
        .matching("zns_die_busy_seconds_total", &[("device", device)])
        .filter_map(|s| {
            let die = s.label("die")?;
            let then = before.total(s.name.as_str(), &[("device", device), ("die", die)])?;
            Some((die.parse().ok()?, ((s.value - then) / dt).clamp(0.0, 1.0)))
        })
        .collect();
    if dies.is_empty() {
        return None;
    }
    dies.sort_by_key(|d| d.0);
    Some(dies.into_iter().map(|d| d.1).collect())
}

/// Command rates: from the source's own counters where it has them, else
/// from the SMART command counts (reads and writes only).
fn rates(now: &Reading, before: Option<&Reading>, interval: Option<f64>) -> Vec<OpRate> {
    let per_s = |name: &str, labels: &[(&str, &str)]| -> f64 {
        match (before, interval) {
            (Some(b), Some(dt)) => {
                let d =
                    now.total(name, labels).unwrap_or(0.0) - b.total(name, labels).unwrap_or(0.0);
                d.max(0.0) / dt
            }
            _ => 0.0,
        }
    };
    if now.total("zns_commands_total", &[]).is_none() {
        return [
            ("read", "zns_host_read_commands_total"),
            ("write", "zns_host_write_commands_total"),
        ]
        .into_iter()
        .filter(|(_, n)| now.total(n, &[]).is_some())
        .map(|(name, n)| OpRate { name, iops: per_s(n, &[]), bytes_per_s: 0.0, percentiles: None })
        .collect();
    }
    OPCODES
        .iter()
        .map(|&(op, name)| {
            let l = [("opcode", op)];
            let mut buckets = now.latency(op);
            if let Some(b) = before {
                let old = b.latency(op);
                for (le, n) in &mut buckets {
                    *n -= old.iter().find(|o| o.0 == *le).map_or(0.0, |o| o.1);
                }
            }
            let percentiles = [0.5, 0.99, 0.999].map(|q| quantile(q, &buckets));
            OpRate {
                name,
                iops: per_s("zns_commands_total", &l),
                bytes_per_s: per_s("zns_bytes_total", &l),
                percentiles: match percentiles {
                    [Some(a), Some(b), Some(c)] => Some([a, b, c]),
                    _ => None,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let b = [(0.001, 50.0), (0.002, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(quantile(0.5, &b), Some(0.001));
        assert!((quantile(0.75, &b).unwrap() - 0.0015).abs() < 1e-12);
        assert_eq!(quantile(0.5, &[(0.001, 0.0)]), None);
        // Past the last finite bound: that bound.
        assert_eq!(quantile(0.99, &[(0.001, 1.0), (f64::INFINITY, 10.0)]), Some(0.001));
    }
}
