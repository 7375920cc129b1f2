//! The `emu:` side of the driver backend: an emulated controller built
//! from a URI or a profile and brought up through the driver's emulated
//! transport; the emulator kept for the clock, the zone changes and the
//! tests' hooks. Built with the `emulator` feature only.

use std::sync::Arc;

use zns_driver::Controller;
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::profile::{NamespaceKind, Profile};
use zns_emulator::zns::ZrwaGeometry;
use zns_emulator::{Emulator, EmulatorError, MediaChoice};

use super::DriverDevice;
use crate::changes::EmulatedChanges;
use crate::error::{DeviceError, Result};
use crate::uri::{EmulatorMedia, EmulatorUri, Timing};

impl DriverDevice {
    /// Builds an emulated controller as `uri` describes and brings it up.
    /// `text` is the URI as given, kept for [`crate::DeviceInfo::uri`].
    pub fn open_emulator(uri: &EmulatorUri, text: &str) -> Result<Self> {
        let memory = ProcessMemory::new();
        let builder = match &uri.file {
            Some(path) => {
                let b = Emulator::open_image(path.clone())?;
                if let Some(spec) = &uri.profile {
                    // A profile file names its profile inside.
                    let want = if crate::uri::is_profile_file(spec) {
                        uri.load_profile().map_err(EmulatorError::from)?.name
                    } else {
                        spec.clone()
                    };
                    let have = &b.profile().name;
                    if *have != want {
                        return Err(DeviceError::uri(
                            text,
                            format!(
                                "the image {} holds a {have:?} device, not {want:?}",
                                path.display()
                            ),
                        ));
                    }
                }
                b
            }
            None => {
                let media = match uri.media.unwrap_or_default() {
                    EmulatorMedia::Ram => MediaChoice::Ram,
                    EmulatorMedia::Null => MediaChoice::Null,
                };
                let mut profile = uri.load_profile().map_err(EmulatorError::from)?;
                if uri.zones.is_some()
                    || uri.metadata.is_some()
                    || uri.lba.is_some()
                    || uri.op.is_some()
                    || uri.zrwa.is_some()
                {
                    apply_geometry(&mut profile, uri, text)?;
                }
                Emulator::with_profile(profile).media(media)
            }
        };
        let mut builder = builder;
        match uri.timing {
            Some(Timing::On) => builder = builder.timing(true),
            Some(Timing::Off) => builder = builder.timing(false),
            None => {}
        }
        if let Some(clock) = uri.clock {
            if !builder.timed() {
                return Err(DeviceError::uri(
                    text,
                    format!(
                        "clock={} needs the timing model, and the {:?} profile has none \
                         (or timing=off was given)",
                        clock.name(),
                        builder.profile().name
                    ),
                ));
            }
            builder = builder.clock(clock);
        }
        if let Some(d) = uri.dilation {
            if !builder.timed() {
                return Err(DeviceError::uri(
                    text,
                    format!(
                        "dilation={d} needs the timing model, and the {:?} profile has none",
                        builder.profile().name
                    ),
                ));
            }
            builder = builder.dilation(d);
        }
        let trace = match &uri.trace {
            Some(path) => Some(trace_file(&builder, uri, path, text)?),
            None => None,
        };
        let host: Arc<dyn HostMemory> = memory.clone();
        let emu = builder.build(host)?;
        if let Some(t) = trace {
            emu.add_trace_sink(t);
        }
        Self::from_emulator(emu, memory, text)
    }

    /// Builds an emulated controller from `profile` itself (timing on when
    /// the profile has a timing model, on the virtual clock) with `media`,
    /// and brings it up; `text` names the device in [`crate::DeviceInfo::uri`].
    /// For programs that make profiles (a fit trying candidates) without
    /// writing them to files.
    pub fn open_profile(profile: Profile, media: MediaChoice, text: &str) -> Result<Self> {
        let memory = ProcessMemory::new();
        let host: Arc<dyn HostMemory> = memory.clone();
        let emu = Emulator::with_profile(profile).media(media).build(host)?;
        Self::from_emulator(emu, memory, text)
    }

    /// Brings up the driver on an existing emulated controller whose host
    /// memory is `memory` (the one it was built with). After
    /// [`zns_emulator::Controller::power_cut`], drop every handle of the old
    /// device, then call this again to bring the controller back up.
    pub fn from_emulator(
        emulator: Arc<zns_emulator::Controller>,
        memory: Arc<ProcessMemory>,
        uri: &str,
    ) -> Result<Self> {
        let ctrl = Controller::emulated(Arc::clone(&emulator), Arc::clone(&memory))?;
        let mut dev = Self::from_controller(ctrl, uri)?;
        let shared = [Some(&mut dev.shared), dev.conventional.as_mut()];
        for shared in shared.into_iter().flatten().filter_map(Arc::get_mut) {
            let nsid = shared.info.nsid;
            shared.info.capabilities.stores_data = emulator
                .namespaces()
                .iter()
                .find(|n| n.nsid() == nsid)
                .is_none_or(|n| n.media().stores_data());
        }
        dev.changes = EmulatedChanges::new(&emulator, dev.shared.info.nsid);
        dev.emulator = Some(emulator);
        dev.memory = Some(memory);
        Ok(dev)
    }

    /// The emulated controller, for `emu:` devices.
    pub fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.emulator.as_ref()
    }

    /// The host memory the emulated controller reaches, for `emu:` devices
    /// (to bring it up again with [`DriverDevice::from_emulator`]).
    pub fn host_memory(&self) -> Option<&Arc<ProcessMemory>> {
        self.memory.as_ref()
    }
}

/// `zones=`, `metadata=`, `lba=` and `op=` of an `emu:` URI, applied to
/// the profile's zoned namespace, or to its conventional namespace with a
/// device-side FTL when it has no zoned one (a conventional twin:
/// `zones=N` gives it the flash of `N` zones of its ZNS twin).
fn apply_geometry(profile: &mut Profile, uri: &EmulatorUri, text: &str) -> Result<()> {
    let name = profile.name.clone();
    let target = match profile.namespaces.iter().position(|ns| ns.kind == NamespaceKind::Zoned) {
        Some(i) => Some(i),
        None => profile.namespaces.iter().position(|ns| ns.ftl.is_some()),
    };
    let Some(i) = target else {
        return Err(DeviceError::uri(
            text,
            format!(
                "zones=, metadata=, lba= and op= need a zoned namespace or a conventional twin's; \
                 {name:?} has neither"
            ),
        ));
    };
    let ns = &mut profile.namespaces[i];
    if let (Some(_), None) = (uri.op, &ns.ftl) {
        return Err(DeviceError::uri(
            text,
            format!(
                "op= is the over-provisioning of a conventional twin's firmware; {name:?} is a \
                 ZNS profile (its host FTL takes --op)"
            ),
        ));
    }
    if let Some(n) = uri.zones {
        match &mut ns.ftl {
            Some(f) => f.flash_zones = n,
            None => ns.zones = n,
        }
    }
    if let Some(m) = uri.metadata {
        ns.metadata_size = m;
    }
    if let (Some(op), Some(f)) = (uri.op, &mut ns.ftl) {
        f.over_provisioning = op as f64 / 100.0;
    }
    if let Some(b) = uri.lba {
        ns.set_block_size(b).map_err(|e| DeviceError::uri(text, format!("lba={b}: {e}")))?;
    }
    if let Some(z) = uri.zrwa {
        if ns.kind != NamespaceKind::Zoned {
            return Err(DeviceError::uri(
                text,
                format!("zrwa= needs a zoned namespace; {name:?} has none"),
            ));
        }
        // In blocks of the final block size: after lba=.
        ns.zrwa = Some(ZrwaGeometry {
            size: z.size,
            flush_granularity: z.flush_granularity,
            resources: z.resources,
            explicit_flush: true,
        });
    }
    profile.validate().map_err(|e| DeviceError::uri(text, e.to_string()))
}

/// The trace file `uri` asks for: the timing model must run, and the
/// file must be writable now (it is written when the device closes).
fn trace_file(
    builder: &zns_emulator::EmulatorBuilder,
    uri: &EmulatorUri,
    path: &std::path::Path,
    text: &str,
) -> Result<Arc<dyn zns_emulator::trace::TraceSink>> {
    let Some(timing) = builder.profile().timing.as_ref().filter(|_| builder.timed()) else {
        return Err(DeviceError::uri(
            text,
            format!(
                "trace= needs the timing model, and the {:?} profile has none (or timing=off \
                 was given)",
                builder.profile().name
            ),
        ));
    };
    if let Err(e) = std::fs::File::create(path) {
        return Err(DeviceError::uri(text, format!("trace file {}: {e}", path.display())));
    }
    let events = uri.trace_events.unwrap_or(crate::trace::DEFAULT_TRACE_EVENTS);
    Ok(Arc::new(crate::trace::TraceFile::new(path, events, timing.channels)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn emulator_clocks_follow_the_uri() {
        let dev = crate::open("emu:zn540").unwrap();
        assert_eq!(dev.clock_name(), "virtual");
        let mut q = dev.queue(4).unwrap();
        let buf = dev.alloc(4096).unwrap();
        q.write(0, &buf).unwrap();
        let t0 = dev.now_ns();
        q.write(1, &buf).unwrap();
        // The model's QD 1 write of 4 KiB: about 11.4 µs in virtual time
        // (a controller housekeeping task may delay it), the same on every
        // run.
        let took = dev.now_ns() - t0;
        assert!((10_000..16_000).contains(&took), "{took} ns");
        let again = crate::open("emu:zn540").unwrap();
        let mut q2 = again.queue(4).unwrap();
        let buf2 = again.alloc(4096).unwrap();
        q2.write(0, &buf2).unwrap();
        let t2 = again.now_ns();
        q2.write(1, &buf2).unwrap();
        assert_eq!(again.now_ns() - t2, took, "virtual time is deterministic");
        let t1 = dev.now_ns();
        dev.wait_ns(1_000_000);
        assert_eq!(dev.now_ns() - t1, 1_000_000);
        assert_eq!(crate::open("emu:zn540,timing=off").unwrap().clock_name(), "real");
        assert_eq!(crate::open("emu:zn540,clock=real").unwrap().clock_name(), "real");
        let tiny = crate::open("emu:tiny").unwrap();
        assert_eq!(tiny.clock_name(), "real");
        let a = tiny.now_ns();
        assert!(tiny.now_ns() >= a);
        let e = crate::open("emu:tiny,timing=on").unwrap_err().to_string();
        assert!(e.contains("no timing model"), "{e}");
        let e = crate::open("emu:tiny,clock=virtual").unwrap_err().to_string();
        assert!(e.contains("needs the timing model"), "{e}");
    }
}
