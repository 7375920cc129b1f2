//! `--metrics ADDR:PORT` of `zns serve`, `zns ftl serve`, `zns ublk` and
//! `zns ftl ublk`: the served devices' commands counted by queue, and an
//! HTTP endpoint (`/metrics` for Prometheus, `/zones` for `zns top`)
//! serving them with each device's zones and figures, each FTL's figures
//! (docs/observability.md).

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use zns_device::ZonedDevice;
use zns_ftl::Ftl;
use zns_metrics::{ExporterBuilder, MeteredDevice, MetricsServer};

/// The address `--metrics` without a value listens on.
pub const DEFAULT_METRICS: &str = "127.0.0.1:9464";

/// The `--metrics` flag.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve live metrics over HTTP on this address (without a value:
    /// 127.0.0.1:9464; port 0 picks a free one): GET /metrics in the
    /// Prometheus (OpenMetrics) text format, GET /zones the zone maps as
    /// JSON for `zns top --metrics`. Anything but loopback exposes them
    /// to the network, without authentication.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1,
          default_missing_value = DEFAULT_METRICS)]
    pub metrics: Option<String>,
}

/// What a server's metrics will cover, gathered while it opens its
/// devices: namespaces are numbered as the server numbers them.
pub struct Plan {
    addr: Option<String>,
    builder: ExporterBuilder,
    nsid: u32,
}

impl Plan {
    /// Metrics at `args`' address, or none.
    pub fn new(args: &MetricsArgs) -> Plan {
        Plan { addr: args.metrics.clone(), builder: ExporterBuilder::new(), nsid: 1 }
    }

    /// `dev`, metered when metrics are asked for; its namespaces (the
    /// zoned one, then a conventional one if the device has one) take the
    /// next numbers.
    pub fn device(&mut self, dev: Arc<dyn ZonedDevice>) -> Arc<dyn ZonedDevice> {
        let first = self.nsid;
        self.nsid += 1 + u32::from(dev.info().zoned && dev.conventional().is_some());
        if self.addr.is_none() {
            return dev;
        }
        let metered = MeteredDevice::wrap(dev);
        self.builder.metered(&first.to_string(), &metered);
        if metered.info().zoned && metered.conventional().is_some() {
            self.builder.metered_conventional(&(first + 1).to_string(), &metered);
        }
        metered
    }

    /// An FTL served as the next namespace.
    pub fn ftl(&mut self, ftl: &Arc<Ftl>) {
        self.builder.ftl(&self.nsid.to_string(), ftl);
        self.nsid += 1;
    }

    /// Starts the endpoint, if asked for, and says where it is.
    pub fn start(self, out: &mut dyn Write) -> Result<Option<MetricsServer>> {
        let Some(addr) = self.addr else { return Ok(None) };
        let exporter = Arc::new(self.builder.build());
        let server =
            MetricsServer::start(&addr, exporter).with_context(|| format!("--metrics {addr}"))?;
        writeln!(out, "  metrics on http://{}/metrics", server.local_addr())?;
        Ok(Some(server))
    }
}
