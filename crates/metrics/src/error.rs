//! Errors of the metrics exporter and its readers.

use zns_device::DeviceError;

/// What went wrong serving or reading metrics.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The metrics address could not be listened on.
    #[error("listen for metrics on {0}: {1}")]
    Listen(String, String),
    /// A device refused a scrape's command.
    #[error("{0}: {1}")]
    Device(String, #[source] DeviceError),
    /// An endpoint could not be read.
    #[error("{0}: {1}")]
    Fetch(String, String),
    /// An endpoint answered something that is not what it should be.
    #[error("{0}: {1}")]
    Malformed(String, String),
}
