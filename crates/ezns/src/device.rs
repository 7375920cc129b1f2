//! Tenant namespaces as devices, the instance registry and the `ezns:`
//! URI scheme.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use zns_device::{DeviceError, DeviceInfo, IoBuffer, ZoneQueue, ZonedDevice};

use crate::config::{Config, EznsUri};
use crate::error::EznsError;
use crate::queue::TenantQueue;
use crate::runtime::Ezns;
use crate::status::Status;

/// One eZNS instance: a base device and the tenant namespaces on it.
///
/// Thread safety: `Send + Sync`; share it as `Arc<Instance>`. Every tenant
/// device keeps the instance alive.
#[derive(Debug, Clone)]
pub struct Instance {
    ez: Arc<Ezns>,
}

impl Instance {
    /// Brings an instance up on `base` with `config` (whose `device` field
    /// is then only informative): formats an all-empty device, recovers
    /// one that holds an instance of the same tenant layout, refuses
    /// anything else.
    pub fn open(base: Arc<dyn ZonedDevice>, config: Config) -> Result<Instance, EznsError> {
        let ez = crate::open::open(base, config, None, &|name| format!("ezns:tenant={name}"))?;
        Ok(Instance { ez })
    }

    /// The instance of the configuration file `path`, shared with every
    /// other opener of the same file in this process (so tenants of one
    /// device share one instance), or a new one on the file's base device.
    pub fn open_config(path: &Path) -> Result<Instance, EznsError> {
        Instance::open_config_mapped(path, &|uri| uri.to_string())
    }

    /// As [`Instance::open_config`], but a new instance opens its base
    /// device at `map(URI)`, the file's URI as the opener wants it (`zns
    /// serve` puts a timed emulator on the real clock, as it does for the
    /// devices it serves directly). An instance already up is returned as
    /// it is: every tenant of one file shares one base device.
    pub fn open_config_mapped(
        path: &Path,
        map: &dyn Fn(&str) -> String,
    ) -> Result<Instance, EznsError> {
        let key = path
            .canonicalize()
            .map_err(|e| EznsError::Config(format!("cannot read {}: {e}", path.display())))?;
        let mut guard = REGISTRY.lock();
        let reg = guard.get_or_insert_with(HashMap::new);
        if let Some(ez) = reg.get(&key).and_then(Weak::upgrade) {
            return Ok(Instance { ez });
        }
        let config = Config::load(path)?;
        let base = zns_device::open(&map(&config.device))?;
        let shown = path.display().to_string();
        let ez = crate::open::open(base, config, Some(key.clone()), &|name| {
            format!("ezns:config={shown},tenant={name}")
        })?;
        reg.retain(|_, w| w.strong_count() > 0);
        reg.insert(key, Arc::downgrade(&ez));
        Ok(Instance { ez })
    }

    /// The tenant named `name` as a zoned device.
    pub fn tenant(&self, name: &str) -> Result<Arc<TenantDevice>, EznsError> {
        let t = self.ez.tenants.iter().position(|t| t.name == name).ok_or_else(|| {
            EznsError::NoTenant {
                name: name.to_string(),
                config: self
                    .ez
                    .key
                    .as_ref()
                    .map_or("the configuration".into(), |k| k.display().to_string()),
                known: self
                    .ez
                    .tenants
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })?;
        Ok(Arc::new(TenantDevice { ez: Arc::clone(&self.ez), t }))
    }

    /// Every tenant's name.
    pub fn tenant_names(&self) -> Vec<String> {
        self.ez.tenants.iter().map(|t| t.name.clone()).collect()
    }

    /// The base device.
    pub fn base(&self) -> &Arc<dyn ZonedDevice> {
        &self.ez.base
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.ez.config
    }

    /// A snapshot of tenants, stripes, lent spares and scheduler windows.
    pub fn status(&self) -> Status {
        crate::status::snapshot(&self.ez)
    }

    /// What bringing the instance up found and did (formatting, or the
    /// recovery of every logical zone).
    pub fn recovery(&self) -> &crate::RecoveryReport {
        &self.ez.recovery
    }

    /// Runs the control queue and the arbiter once (normally every poll
    /// of any tenant queue does, and on a real clock the background pump
    /// every `pump_us`): for idle periods and tests.
    pub fn pump(&self) {
        crate::pump::once(&self.ez);
    }
}

/// Live instances by canonical configuration path.
static REGISTRY: Mutex<Option<HashMap<PathBuf, Weak<Ezns>>>> = Mutex::new(None);

/// A tenant namespace: a zoned device of logical zones.
///
/// Thread safety: `Send + Sync`, like every [`ZonedDevice`]; each thread
/// makes its own queue.
#[derive(Debug)]
pub struct TenantDevice {
    ez: Arc<Ezns>,
    t: usize,
}

impl TenantDevice {
    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.ez.tenants[self.t].name
    }

    /// The instance the tenant belongs to.
    pub fn instance(&self) -> Instance {
        Instance { ez: Arc::clone(&self.ez) }
    }

    /// A queue of the concrete type.
    pub fn tenant_queue(&self, depth: usize) -> zns_device::Result<TenantQueue> {
        TenantQueue::new(Arc::clone(&self.ez), self.t, depth)
    }
}

impl ZonedDevice for TenantDevice {
    fn info(&self) -> &DeviceInfo {
        &self.ez.tenants[self.t].info
    }

    fn queue(&self, depth: usize) -> zns_device::Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(self.tenant_queue(depth)?))
    }

    fn alloc(&self, len: usize) -> zns_device::Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.ez.base.emulator()
    }

    /// Every tenant's blocks are on the base device.
    fn media_device(&self) -> Option<Arc<dyn ZonedDevice>> {
        Some(Arc::clone(&self.ez.base))
    }

    fn now_ns(&self) -> u64 {
        self.ez.base.now_ns()
    }

    fn clock_name(&self) -> &'static str {
        self.ez.base.clock_name()
    }

    fn wait_ns(&self, ns: u64) {
        self.ez.base.wait_ns(ns)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Opens the tenant an `ezns:config=PATH,tenant=NAME` URI names.
pub fn open(uri: &str) -> Result<Arc<TenantDevice>, EznsError> {
    let u: EznsUri = uri.parse()?;
    Instance::open_config(&u.config)?.tenant(&u.tenant)
}

fn opener(uri: &str) -> zns_device::Result<Arc<dyn ZonedDevice>> {
    match open(uri) {
        Ok(d) => Ok(d),
        Err(EznsError::Uri { uri, reason }) => Err(DeviceError::InvalidUri { uri, reason }),
        Err(EznsError::Device(d)) => Err(d),
        Err(e) => Err(DeviceError::Unavailable { uri: uri.to_string(), reason: e.to_string() }),
    }
}

/// Registers the `ezns:` scheme with `zns_device::open`, so every tool
/// that opens devices by URI opens tenants. Idempotent.
pub fn register() {
    zns_device::uri::register_scheme("ezns", "ezns:config=PATH,tenant=NAME", opener);
}
