//! The reference: znskit's emulator built with the geometry and limits of
//! the device under comparison, read from its own Identify data.

use std::sync::Arc;

use zns_device::{DeviceError, DeviceInfo, DriverDevice, ZonedDevice};
use zns_emulator::host::ProcessMemory;
use zns_emulator::profile::Profile;
use zns_emulator::Emulator;

/// Log2 of `bytes` in 4 KiB pages, rounded down, at least 1.
fn pages_log2(bytes: usize) -> u8 {
    let pages = (bytes / 4096).max(2);
    (usize::BITS - 1 - pages.leading_zeros()) as u8
}

/// MDTS and ZASL of the device as powers of two of 4 KiB pages: from its
/// Identify data (the controller's own limits, not a backend's cap), else
/// from the limits the backend reports.
pub fn transfer_log2(info: &DeviceInfo) -> (u8, u8) {
    let (mdts, zasl) = match &info.identify {
        Some(id) => {
            let mdts = match id.controller.mdts {
                0 => 9,
                m => m.min(9),
            };
            let zasl = match id.zns_controller.zasl {
                0 => mdts,
                z => z.min(mdts),
            };
            (mdts, zasl)
        }
        None => {
            let mdts = pages_log2(info.mdts_bytes).min(9);
            (mdts, pages_log2(info.zasl_bytes).min(mdts))
        }
    };
    (mdts.max(1), zasl.max(1))
}

/// An emulator profile (TOML) with the zoned namespace of `info`: block
/// size, zone count, size and capacity, open and active limits, descriptor
/// extensions, reads across zone boundaries, MDTS, ZASL, volatile write
/// cache, Copy limits and zone random write areas.
pub fn profile_toml(info: &DeviceInfo) -> Result<String, DeviceError> {
    let c = &info.capabilities;
    if c.variable_zone_capacity {
        return Err(DeviceError::Unsupported(
            "zone capacities differ between zones: an emulator profile has one capacity".into(),
        ));
    }
    let (mdts, zasl) = transfer_log2(info);
    let mut t = String::new();
    t.push_str("name = \"differential\"\n");
    t.push_str(&format!(
        "description = \"the geometry and limits of {}\"\n\n",
        info.uri.replace(['"', '\\'], "_")
    ));
    t.push_str("[controller]\nserial = \"ZNSKIT-DIFF\"\nmodel = \"znskit reference\"\n");
    t.push_str(&format!(
        "mdts_log2 = {mdts}\nzasl_log2 = {zasl}\nvolatile_write_cache = {}\n\n",
        c.volatile_write_cache
    ));
    t.push_str("[[namespace]]\nkind = \"zoned\"\n");
    t.push_str(&format!(
        "block_size = {}\nzones = {}\nzone_size = {}\nzone_capacity = {}\n",
        info.block_size, info.zone_count, info.zone_size, info.zone_capacity
    ));
    if let Some(o) = info.max_open {
        t.push_str(&format!("max_open = {o}\n"));
    }
    if let Some(a) = info.max_active {
        t.push_str(&format!("max_active = {a}\n"));
    }
    t.push_str(&format!(
        "descriptor_extension_bytes = {}\nread_across_zone_boundaries = {}\n",
        c.extension_bytes, c.read_across_zone_boundaries
    ));
    if let Some(cl) = &c.copy {
        t.push_str(&format!(
            "copy_max_range_blocks = {}\ncopy_max_blocks = {}\ncopy_max_ranges = {}\n",
            cl.max_range_blocks.clamp(1, u16::MAX as u32),
            cl.max_blocks.max(1),
            cl.max_ranges.clamp(1, 256)
        ));
    }
    // A table of its own: last, so the keys above stay the namespace's.
    if let Some(w) = &c.zrwa {
        t.push_str(&format!(
            "\n[namespace.zrwa]\nsize = {}\nflush_granularity = {}\nresources = {}\n\
             explicit_flush = {}\n",
            w.size,
            w.flush_granularity,
            zrwa_resources(info, w.resources),
            w.explicit_flush
        ));
    }
    Ok(t)
}

/// The ZRWA resources of the device, when Identify states `stated`: QEMU's
/// controller puts the count itself in NUMZRWA, which the specification
/// makes 0's based (docs/differential.md, `qemu-numzrwa`), so it has one
/// fewer than the field says.
fn zrwa_resources(info: &DeviceInfo, stated: u64) -> u64 {
    match info.model.as_str() {
        "QEMU NVMe Ctrl" => stated.saturating_sub(1).max(1),
        _ => stated,
    }
}

/// A new emulated device (RAM media, no timing model) with the geometry
/// and limits of `info`.
pub fn open(info: &DeviceInfo) -> Result<Arc<dyn ZonedDevice>, DeviceError> {
    let text = profile_toml(info)?;
    let profile =
        Profile::from_toml(&text).map_err(|e| DeviceError::Emulator(Box::new(e.into())))?;
    let memory = ProcessMemory::new();
    let emu = Emulator::with_profile(profile).build(memory.clone())?;
    Ok(Arc::new(DriverDevice::from_emulator(emu, memory, "emu:differential")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_logs_round_down() {
        assert_eq!(pages_log2(512 << 10), 7);
        assert_eq!(pages_log2(124 << 10), 4);
        assert_eq!(pages_log2(4096), 1);
    }
}
