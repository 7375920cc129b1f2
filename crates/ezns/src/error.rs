//! Typed errors of the eZNS layer.

use zns_device::DeviceError;

/// Every failure of the eZNS layer outside the I/O path (whose commands
/// fail with [`DeviceError`] like any device's).
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EznsError {
    /// The configuration file is missing, does not parse or is inconsistent.
    #[error("eZNS configuration: {0}")]
    Config(String),
    /// The configuration does not fit the base device.
    #[error("eZNS configuration does not fit {device}: {reason}")]
    Fit {
        /// The base device's URI.
        device: String,
        /// What does not fit.
        reason: String,
    },
    /// An `ezns:` URI that does not parse.
    #[error("invalid device URI {uri:?}: {reason}")]
    Uri {
        /// The URI as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The named tenant is not in the configuration.
    #[error("no tenant {name:?} in {config} (tenants: {known})")]
    NoTenant {
        /// The name asked for.
        name: String,
        /// The configuration file.
        config: String,
        /// The tenants it has.
        known: String,
    },
    /// The base device holds data but no valid eZNS metadata, or metadata
    /// that does not decode: reported, never repaired or reformatted.
    #[error("eZNS metadata on {device}: {reason}")]
    Damaged {
        /// The base device's URI.
        device: String,
        /// What is wrong.
        reason: String,
    },
    /// The metadata on the device was written with another tenant layout.
    #[error("{device} holds eZNS namespaces of another configuration: {reason}")]
    Mismatch {
        /// The base device's URI.
        device: String,
        /// The difference.
        reason: String,
    },
    /// The base device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl EznsError {
    /// The message without the variant's prefix, for wrapping.
    pub fn reason(&self) -> String {
        match self {
            EznsError::Config(m) => m.clone(),
            other => other.to_string(),
        }
    }
}

impl From<EznsError> for DeviceError {
    fn from(e: EznsError) -> DeviceError {
        match e {
            EznsError::Device(d) => d,
            EznsError::Uri { uri, reason } => DeviceError::InvalidUri { uri, reason },
            other => DeviceError::Unsupported(other.to_string()),
        }
    }
}
