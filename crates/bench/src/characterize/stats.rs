//! Latency histograms and the statistics drawn from them.
//!
//! Every latency is recorded in nanoseconds of device time into an
//! HdrHistogram with three significant digits (0.1 % resolution at every
//! magnitude, from 1 ns to an hour and beyond: it grows as needed). From a
//! histogram come the summary statistics of `results.json`, a fixed ladder
//! of percentiles, the points of its complementary CDF for plots, and its
//! compact serialized form (HdrHistogram V2 with deflate, base64), from
//! which any other statistic can be recomputed later.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentiles listed for every histogram in `results.json`.
pub const PERCENTILE_LADDER: &[f64] =
    &[0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999, 100.0];

/// Significant decimal digits kept by every histogram.
const SIGFIG: u8 = 3;

/// Latencies in nanoseconds.
///
/// Thread safety: plain data; one owner records into it.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // 1 ns to 1000 s up front; auto-resize covers anything longer.
        let mut h = Histogram::new_with_bounds(1, 1_000_000_000_000, SIGFIG)
            .expect("static bounds are valid");
        h.auto(true);
        LatencyHistogram { h }
    }

    /// Records one latency (0 counts as 1 ns: the histogram starts there).
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both auto-resize, so adding cannot fail for lack of range.
        let _ = self.h.add(&other.h);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// Sum of the recorded values, in ns (to the histogram's resolution).
    pub fn sum_ns(&self) -> f64 {
        self.h.mean() * self.h.len() as f64
    }

    /// The value at percentile `p` (0..=100), ns.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile((p / 100.0).clamp(0.0, 1.0))
    }

    /// Summary statistics in microseconds.
    pub fn stats(&self) -> LatencyStats {
        let us = |ns: u64| ns as f64 / 1000.0;
        if self.h.is_empty() {
            return LatencyStats::default();
        }
        LatencyStats {
            count: self.h.len(),
            min_us: us(self.h.min()),
            mean_us: self.h.mean() / 1000.0,
            stdev_us: self.h.stdev() / 1000.0,
            p50_us: us(self.percentile(50.0)),
            p90_us: us(self.percentile(90.0)),
            p95_us: us(self.percentile(95.0)),
            p99_us: us(self.percentile(99.0)),
            p99_9_us: us(self.percentile(99.9)),
            p99_99_us: us(self.percentile(99.99)),
            max_us: us(self.h.max()),
        }
    }

    /// `[percentile, ns]` for every entry of [`PERCENTILE_LADDER`].
    pub fn ladder(&self) -> Vec<[f64; 2]> {
        if self.h.is_empty() {
            return Vec::new();
        }
        PERCENTILE_LADDER.iter().map(|&p| [p, self.percentile(p) as f64]).collect()
    }

    /// The complementary CDF as a step curve for plotting: points
    /// `(ns, P(latency > ns))`, starting at `(smallest, 1)`, dropping at
    /// each recorded value to the fraction still above it, and ending at
    /// the largest value before the fraction reaches 0 (which a logarithmic
    /// axis cannot show). At most about `max_points` points, spread evenly
    /// on log scales.
    pub fn ccdf(&self, max_points: usize) -> Vec<(f64, f64)> {
        let total = self.h.len();
        let mut all = Vec::new();
        let mut below = 0u64;
        let mut prev = 1.0;
        for v in self.h.iter_recorded() {
            below += v.count_since_last_iteration();
            let value = self.h.highest_equivalent(v.value_iterated_to()) as f64;
            all.push((value, prev));
            let above = total - below;
            if above == 0 {
                break;
            }
            prev = above as f64 / total as f64;
            all.push((value, prev));
        }
        thin_log(&all, max_points)
    }

    /// The compact serialized form: HdrHistogram V2 with deflate, base64.
    pub fn to_base64(&self) -> String {
        let mut bytes = Vec::new();
        match V2DeflateSerializer::new().serialize(&self.h, &mut bytes) {
            Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
            Err(e) => {
                tracing::warn!(error = ?e, "histogram does not serialize");
                String::new()
            }
        }
    }

    /// Decodes [`LatencyHistogram::to_base64`]; `None` for anything else.
    pub fn from_base64(text: &str) -> Option<LatencyHistogram> {
        if text.is_empty() {
            return None;
        }
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
        let mut h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).ok()?;
        h.auto(true);
        Some(LatencyHistogram { h })
    }
}

/// Keeps the first and last points and those that move at least
/// `1/max_points` of the log range on either axis since the last kept one.
fn thin_log(points: &[(f64, f64)], max_points: usize) -> Vec<(f64, f64)> {
    if points.len() <= max_points.max(2) {
        return points.to_vec();
    }
    let lx = |p: &(f64, f64)| p.0.max(1e-12).ln();
    let ly = |p: &(f64, f64)| p.1.max(1e-300).ln();
    let (first, last) = (points[0], points[points.len() - 1]);
    let step_x = (lx(&last) - lx(&first)).abs() / max_points as f64;
    let step_y = (ly(&last) - ly(&first)).abs() / max_points as f64;
    let mut out = vec![first];
    for p in &points[1..points.len() - 1] {
        let k = out[out.len() - 1];
        if (lx(p) - lx(&k)).abs() >= step_x || (ly(p) - ly(&k)).abs() >= step_y {
            out.push(*p);
        }
    }
    out.push(last);
    out
}

/// Summary statistics of one histogram, in microseconds.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Latencies recorded.
    pub count: u64,
    /// Smallest.
    pub min_us: f64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Standard deviation.
    pub stdev_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// 99.99th percentile.
    pub p99_99_us: f64,
    /// Largest.
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(n: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for v in 1..=n {
            h.record(v * 1000);
        }
        h
    }

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let h = uniform(10_000);
        let s = h.stats();
        assert_eq!(s.count, 10_000);
        let close = |a: f64, b: f64| (a - b).abs() / b < 0.002;
        assert!(close(s.p50_us, 5000.0), "{s:?}");
        assert!(close(s.p95_us, 9500.0), "{s:?}");
        assert!(close(s.p99_us, 9900.0), "{s:?}");
        assert!(close(s.p99_9_us, 9990.0), "{s:?}");
        assert!(close(s.mean_us, 5000.5), "{s:?}");
        assert!(close(s.min_us, 1.0) && close(s.max_us, 10_000.0), "{s:?}");
        let ladder = h.ladder();
        assert_eq!(ladder.len(), PERCENTILE_LADDER.len());
        assert!(ladder.windows(2).all(|w| w[0][1] <= w[1][1]));
    }

    #[test]
    fn zero_and_empty() {
        let mut h = LatencyHistogram::new();
        assert!(h.is_empty());
        assert_eq!(h.stats(), LatencyStats::default());
        assert!(h.ladder().is_empty() && h.ccdf(10).is_empty());
        h.record(0);
        assert_eq!(h.percentile(50.0), 1);
    }

    #[test]
    fn ccdf_points_fall_and_match_the_distribution() {
        let h = uniform(1000);
        let c = h.ccdf(10_000);
        // A step at every value: (v, fraction above the previous value),
        // then (v, fraction above v) for every value but the largest.
        assert_eq!(c.len(), 1999);
        assert_eq!(c[0], (1000.0, 1.0));
        for pair in c[1..].chunks(2) {
            let (ns, frac) = pair[0];
            let v = (ns / 1000.0).round();
            let want = (1000.0 - v) / 1000.0;
            assert!((frac - want).abs() < 0.0015, "{ns} {frac} {want}");
        }
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1));
        assert!(c.iter().all(|p| p.1 > 0.0 && p.1 <= 1.0));
        let last = c[c.len() - 1];
        assert!((last.0 - 1_000_000.0).abs() < 1000.0 && (last.1 - 0.001).abs() < 1e-9);
    }

    #[test]
    fn ccdf_of_a_constant_is_one_point_and_a_tail_drops() {
        let mut h = LatencyHistogram::new();
        for _ in 0..100 {
            h.record(11_000);
        }
        assert_eq!(h.ccdf(100), vec![(11_000.0 + 7.0, 1.0)]);
        h.record(50_000);
        let c = h.ccdf(100);
        // 1 at 11 µs, dropping to 1/101, which holds out to 50 µs.
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].1, 1.0);
        assert!((c[1].1 - 1.0 / 101.0).abs() < 1e-12 && c[1].0 == c[0].0);
        assert!((c[2].0 - 50_000.0).abs() < 50.0 && c[2].1 == c[1].1);
    }

    #[test]
    fn ccdf_thins_to_a_bounded_number_of_points() {
        let mut h = LatencyHistogram::new();
        for v in 1..=200_000u64 {
            h.record(v * 37);
        }
        let c = h.ccdf(100);
        assert!(c.len() <= 210 && c.len() > 50, "{}", c.len());
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1));
    }

    #[test]
    fn serialized_form_round_trips() {
        let mut h = uniform(5000);
        h.record(3_000_000_000);
        let text = h.to_base64();
        assert!(!text.is_empty());
        let back = LatencyHistogram::from_base64(&text).expect("decodes");
        assert_eq!(back.len(), h.len());
        assert_eq!(back.stats(), h.stats());
        assert!(LatencyHistogram::from_base64("not base64!").is_none());
        assert!(LatencyHistogram::from_base64("").is_none());
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = uniform(100);
        a.merge(&uniform(100));
        assert_eq!(a.len(), 200);
        assert!((a.stats().p50_us - 50.0).abs() < 0.1);
    }
}
