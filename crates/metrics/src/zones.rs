//! The zone map of a zoned namespace: every zone's state and write
//! pointer, with the namespace's open and active limits. Scrapes count
//! states from it; `/zones` serves it as JSON for `zns top`.

use serde::{Deserialize, Serialize};
use zns_device::{ReportFilter, ZoneQueue, ZoneState, ZonedDevice};

use crate::error::MetricsError;

/// One zone: its state and how much of it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneEntry {
    /// Its state, as [`state_label`] names it.
    pub state: String,
    /// Blocks written (write pointer less zone start; capacity when full).
    pub written: u64,
}

/// A zoned namespace's zones and limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneMap {
    /// The namespace label of the metrics.
    pub namespace: String,
    /// The device URI.
    pub device: String,
    /// Blocks per zone.
    pub zone_size: u64,
    /// Writable blocks per zone.
    pub zone_capacity: u64,
    /// Max Open Resources; `None`: no limit.
    pub max_open: Option<u32>,
    /// Max Active Resources; `None`: no limit.
    pub max_active: Option<u32>,
    /// Every zone, in LBA order.
    pub zones: Vec<ZoneEntry>,
}

/// The label value of a zone state.
pub const fn state_label(s: ZoneState) -> &'static str {
    match s {
        ZoneState::Empty => "empty",
        ZoneState::ImplicitlyOpen => "implicitly_opened",
        ZoneState::ExplicitlyOpen => "explicitly_opened",
        ZoneState::Closed => "closed",
        ZoneState::ReadOnly => "read_only",
        ZoneState::Full => "full",
        ZoneState::Offline => "offline",
    }
}

/// The label values of the zone states, in [`ZoneState::ALL`] order.
pub const STATE_LABELS: [&str; 7] = {
    let mut l = [""; 7];
    let mut i = 0;
    while i < 7 {
        l[i] = state_label(ZoneState::ALL[i]);
        i += 1;
    }
    l
};

impl ZoneMap {
    /// Reads the zone map of `dev` through `queue` (one of `dev`'s).
    pub fn read(
        namespace: &str,
        dev: &dyn ZonedDevice,
        queue: &mut dyn ZoneQueue,
    ) -> Result<ZoneMap, MetricsError> {
        let info = dev.info();
        let zones = queue
            .report_zones(0, ReportFilter::All, usize::MAX)
            .map_err(|e| MetricsError::Device(info.uri.clone(), e))?;
        let zones = zones
            .iter()
            .map(|z| ZoneEntry { state: state_label(z.state).to_string(), written: z.written() })
            .collect();
        Ok(ZoneMap {
            namespace: namespace.to_string(),
            device: info.uri.clone(),
            zone_size: info.zone_size,
            zone_capacity: info.zone_capacity,
            max_open: info.max_open,
            max_active: info.max_active,
            zones,
        })
    }

    /// Zones in each state, in [`ZoneState::ALL`] order.
    pub fn counts(&self) -> [u64; 7] {
        let mut n = [0u64; 7];
        for z in &self.zones {
            if let Some(i) = STATE_LABELS.iter().position(|&l| l == z.state) {
                n[i] += 1;
            }
        }
        n
    }

    /// Open zones (implicitly and explicitly opened).
    pub fn open(&self) -> u64 {
        let n = self.counts();
        n[1] + n[2]
    }

    /// Active zones (open and closed).
    pub fn active(&self) -> u64 {
        self.open() + self.counts()[3]
    }
}
