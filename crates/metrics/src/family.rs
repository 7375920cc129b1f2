//! Metric families gathered at a scrape, then encoded in the Prometheus
//! text exposition format by `prometheus-client`: every source adds its
//! samples to the family of their name, so each family is described once
//! however many namespaces and queues it covers.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// The labels of one sample.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// A sample's value.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// A counter of events or bytes.
    Count(u64),
    /// A counter of seconds.
    Seconds(f64),
    /// A gauge.
    Gauge(f64),
    /// A histogram: sum, count and per-bucket (upper bound, count) pairs,
    /// the last bound `f64::MAX` for +Inf.
    Histogram(f64, u64, Vec<(f64, u64)>),
}

/// One family: name (without `_total`, which the encoder adds to
/// counters), help, and samples.
#[derive(Debug)]
pub(crate) struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Labels, Value)>,
}

/// The families of one scrape, in the order first seen.
#[derive(Debug, Default)]
pub(crate) struct Families(Vec<Family>);

impl Families {
    /// Adds a sample to family `name`.
    pub fn add(&mut self, name: &'static str, help: &'static str, labels: Labels, v: Value) {
        let i = match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family { name, help, samples: Vec::new() });
                self.0.len() - 1
            }
        };
        self.0[i].samples.push((labels, v));
    }

    /// Encodes every family.
    pub fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            let Some((_, first)) = f.samples.first() else { continue };
            let kind = match first {
                Value::Count(_) | Value::Seconds(_) => MetricType::Counter,
                Value::Gauge(_) => MetricType::Gauge,
                Value::Histogram(..) => MetricType::Histogram,
            };
            let mut m = encoder.encode_descriptor(f.name, f.help, None, kind)?;
            for (labels, v) in &f.samples {
                let e = m.encode_family(labels)?;
                match v {
                    Value::Count(n) => ConstCounter::new(*n).encode(e)?,
                    Value::Seconds(s) => ConstCounter::new(*s).encode(e)?,
                    Value::Gauge(g) => ConstGauge::new(*g).encode(e)?,
                    Value::Histogram(sum, count, buckets) => {
                        let mut e = e;
                        e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                            *sum, *count, buckets, None,
                        )?
                    }
                }
            }
        }
        Ok(())
    }
}
