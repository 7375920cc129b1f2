//! [`Exporter`]: the namespaces, devices and FTLs one process serves,
//! rendered in the OpenMetrics text format (which Prometheus scrapes)
//! and as zone maps.

use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use zns_device::ZonedDevice;
use zns_ftl::Ftl;

use crate::collect::{DeviceSource, FtlSource, NamespaceSource};
use crate::family::Families;
use crate::metered::MeteredDevice;
use crate::zones::ZoneMap;

/// The sources of one process's metrics.
#[derive(Debug, Default)]
struct Sources {
    namespaces: Vec<NamespaceSource>,
    devices: Vec<DeviceSource>,
    ftls: Vec<FtlSource>,
}

impl Sources {
    fn families(&self) -> Families {
        let mut f = Families::default();
        for ns in &self.namespaces {
            ns.gather(&mut f);
        }
        for d in &self.devices {
            d.gather(&mut f);
        }
        for ftl in &self.ftls {
            ftl.gather(&mut f);
        }
        f
    }
}

/// The registry's view of the sources: gathered afresh at every scrape.
#[derive(Debug)]
struct Scrape(Arc<Sources>);

impl Collector for Scrape {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.families().encode(encoder)
    }
}

/// Builds an [`Exporter`]: add the namespaces, devices and FTLs served.
#[derive(Debug, Default)]
pub struct ExporterBuilder {
    sources: Sources,
}

impl ExporterBuilder {
    /// Nothing yet.
    pub fn new() -> Self {
        ExporterBuilder::default()
    }

    fn device(&mut self, dev: &Arc<dyn ZonedDevice>) {
        let uri = &dev.info().uri;
        if !self.sources.devices.iter().any(|d| d.device.info().uri == *uri) {
            self.sources.devices.push(DeviceSource::new(dev));
        }
    }

    fn namespace(
        &mut self,
        name: &str,
        dev: &Arc<dyn ZonedDevice>,
        metrics: Option<Arc<crate::DeviceMetrics>>,
        conventional: bool,
    ) {
        self.device(dev);
        self.sources.namespaces.push(NamespaceSource {
            name: name.to_string(),
            device: Arc::clone(dev),
            metrics,
            conventional,
            queue: Mutex::new(None),
        });
    }

    /// The namespace of a metered device (its zoned namespace, or the
    /// device itself when it is not zoned), labelled `name`: its commands
    /// by queue, its zones, the device's own figures.
    pub fn metered(&mut self, name: &str, dev: &Arc<MeteredDevice>) -> &mut Self {
        self.namespace(name, dev.inner(), Some(Arc::clone(dev.metrics())), false);
        self
    }

    /// The conventional namespace of a metered device, labelled `name`.
    pub fn metered_conventional(&mut self, name: &str, dev: &Arc<MeteredDevice>) -> &mut Self {
        let m = Arc::clone(dev.conventional_metrics());
        self.namespace(name, dev.inner(), Some(m), true);
        self
    }

    /// A device whose commands are not counted (its zones and own
    /// figures only), labelled `name`.
    pub fn device_only(&mut self, name: &str, dev: &Arc<dyn ZonedDevice>) -> &mut Self {
        self.namespace(name, dev, None, false);
        self
    }

    /// An FTL, labelled `name`: its figures, and its device's zones and
    /// own figures under the namespace label `name`.
    pub fn ftl(&mut self, name: &str, ftl: &Arc<Ftl>) -> &mut Self {
        self.namespace(name, ftl.device(), None, false);
        self.sources.ftls.push(FtlSource { name: name.to_string(), ftl: Arc::clone(ftl) });
        self
    }

    /// The exporter.
    pub fn build(self) -> Exporter {
        let sources = Arc::new(self.sources);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(Arc::clone(&sources))));
        Exporter { sources, registry }
    }
}

/// Renders the metrics of the namespaces, devices and FTLs it was built
/// with, reading them at each call.
///
/// Thread safety: `Send + Sync`; scrapes may run on any thread.
#[derive(Debug)]
pub struct Exporter {
    sources: Arc<Sources>,
    registry: Registry,
}

impl Exporter {
    /// Every metric now, in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; a collector error would be ours.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("metrics: encoding failed: {e}");
        }
        out
    }

    /// The zone map of every zoned namespace now.
    pub fn zone_maps(&self) -> Vec<ZoneMap> {
        self.sources.namespaces.iter().filter_map(NamespaceSource::zone_map).collect()
    }
}
