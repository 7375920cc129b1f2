//! # zns-emulator
//!
//! An NVMe controller with the Zoned Namespace command set, in software and
//! in process. It consumes real 64-byte submission entries from queues in
//! host memory and posts real completion entries (phase tag, SQ head) to
//! completion queues, behind a register file with doorbells, exactly as a
//! PCIe controller would; a driver talks to it through [`Controller::mmio_read32`]
//! and friends and shares memory through [`host::ProcessMemory`].
//!
//! - [`zns`]: the zone state machine, exact to the specification's
//!   transition and error tables, with open/active resource limits.
//! - [`conv`]: the firmware of a conventional SSD (the `zn540-conv` and
//!   `small-conv` twins): a page-mapped FTL with garbage collection inside
//!   the device; with Flexible Data Placement (the `zn540-fdp` and
//!   `small-fdp` twins) each reclaim unit handle writes segments of its own
//!   (the controller's side of FDP: features, logs and I/O Management
//!   commands, in `fdp`).
//! - [`media`]: sparse RAM (default), file and null block stores.
//! - [`image`]: persistent devices whose data and zone state survive restarts.
//! - [`reference`]: the measured figures of the real drive a profile
//!   models (the ZN540's), read by the calibration and `zns characterize`.
//! - [`profile`]: device descriptions as TOML (`tiny`, `small`, `zn540`,
//!   `small-zone`).
//! - [`timing`] and [`clock`]: when commands complete. A profile with a
//!   `[timing]` table (`zn540`, `small-zone`) gets a mechanistic model of
//!   the drive (controller, link, write buffer, channels, dies) and each
//!   completion is posted when the controller's clock, virtual by default,
//!   reaches it; `tiny` and `small` complete every command at once.
//! - Faults: power cuts that drop unflushed writes, zones going read-only or
//!   offline, unrecoverable reads ([`Controller::power_cut`], [`Namespace`]).
//! - `exerciser` (feature `testkit`, for tests and the fuzz target):
//!   well-formed, mutated and random command sequences with their
//!   invariants checked.
//! - Data checksums ([`media::Checksummed`]): on device images every written
//!   block (and its metadata) carries a CRC32C bound to its LBA and its
//!   zone's write generation; a block that fails it reads as Unrecovered
//!   Read Error, counted in the SMART / Health log. An image whose zone
//!   state cannot be trusted opens read-only ([`image`]).
//!
//! ```
//! use zns_emulator::{Emulator, host::ProcessMemory};
//! let memory = ProcessMemory::new();
//! let ctrl = Emulator::builder("tiny").unwrap().build(memory).unwrap();
//! assert_eq!(ctrl.namespaces().len(), 2);
//! ```

use std::path::PathBuf;
use std::sync::Arc;

pub mod clock;
pub mod conv;
#[cfg(any(test, feature = "testkit"))]
pub mod exerciser;
pub mod harness;
pub mod host;
pub mod image;
pub mod media;
pub mod profile;
pub mod prp;
pub mod reference;
pub mod timing;
pub mod trace;
pub mod zns;

mod admin;
mod controller;
mod fdp;
mod io;
mod namespace;
mod queue;

pub use controller::{Controller, PAGE_SIZE};
pub use namespace::{Namespace, ZoneStateSink};

use clock::{Clock, ClockMode, Dilation};
use conv::Firmware;
use host::HostMemory;
use image::{DeviceImage, ImageError};
use media::{Checksummed, FileMedia, Media, MediaError, MediaGeometry, NullMedia, RamMedia};
use profile::{NamespaceKind, Profile, ProfileError};
use zns::{ZoneGeometry, Zones};

/// Where the emulated device keeps its blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaChoice {
    /// Sparse RAM: only written blocks take memory. The default.
    Ram,
    /// No data at all: zone state is kept, reads return zeros.
    Null,
    /// A device image file created with [`image::DeviceImage::create`];
    /// data and zone state survive restarts of the process.
    Image(PathBuf),
}

/// Failures building an emulated device.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The profile is unknown or invalid.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The device image could not be used.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The media could not be set up.
    #[error("media: {0}")]
    Media(#[from] MediaError),
    /// The timing model was asked for and the profile has none.
    #[error("profile {0:?} has no timing model (no [timing] table)")]
    NoTimingModel(String),
    /// The stored zone state does not fit the profile or is damaged.
    #[error("zone state of namespace {nsid}: {why}")]
    ZoneState {
        /// Namespace.
        nsid: u32,
        /// What is wrong.
        why: String,
    },
}

/// Entry point for building emulated controllers.
#[derive(Debug)]
pub struct Emulator;

impl Emulator {
    /// A builder for a built-in profile by name (`tiny`, `small`, `zn540`).
    pub fn builder(profile: &str) -> Result<EmulatorBuilder, EmulatorError> {
        Ok(EmulatorBuilder::new(Profile::by_name(profile)?, MediaChoice::Ram))
    }

    /// A builder for a profile value.
    pub fn with_profile(profile: Profile) -> EmulatorBuilder {
        EmulatorBuilder::new(profile, MediaChoice::Ram)
    }

    /// A builder for an existing device image; its profile comes from the image.
    pub fn open_image(path: impl Into<PathBuf>) -> Result<EmulatorBuilder, EmulatorError> {
        let path = path.into();
        let img = DeviceImage::open(&path)?;
        Ok(EmulatorBuilder::new(img.profile, MediaChoice::Image(path)))
    }
}

/// Configures and builds a [`Controller`].
#[derive(Debug)]
pub struct EmulatorBuilder {
    profile: Profile,
    media: MediaChoice,
    timing: Option<bool>,
    clock: ClockMode,
    dilation: Dilation,
}

impl EmulatorBuilder {
    fn new(profile: Profile, media: MediaChoice) -> Self {
        EmulatorBuilder {
            profile,
            media,
            timing: None,
            clock: ClockMode::Virtual,
            dilation: Dilation::NONE,
        }
    }

    /// Switches the timing model on or off. By default it is on exactly
    /// when the profile has one (a `[timing]` table); asking for it on a
    /// profile without one fails at [`EmulatorBuilder::build`].
    pub fn timing(mut self, on: bool) -> Self {
        self.timing = Some(on);
        self
    }

    /// The clock of a timed controller: virtual (the default) or real.
    pub fn clock(mut self, mode: ClockMode) -> Self {
        self.clock = mode;
        self
    }

    /// Stretches every modelled duration by a factor (see
    /// [`clock`](crate::clock#dilation)); no effect without a timing model.
    pub fn dilation(mut self, dilation: Dilation) -> Self {
        self.dilation = dilation;
        self
    }

    /// Whether the built controller will have a timing model.
    pub fn timed(&self) -> bool {
        self.timing.unwrap_or(self.profile.timing.is_some())
    }

    /// Chooses the media (RAM by default).
    pub fn media(mut self, media: MediaChoice) -> Self {
        self.media = media;
        self
    }

    /// The profile that will be built.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Builds the controller, attached to `host` memory. The controller
    /// starts disabled (CC.EN = 0), as after power-on.
    pub fn build(self, host: Arc<dyn HostMemory>) -> Result<Arc<Controller>, EmulatorError> {
        self.profile.validate()?;
        let timed = self.timed();
        if timed && self.profile.timing.is_none() {
            return Err(EmulatorError::NoTimingModel(self.profile.name.clone()));
        }
        if let (MediaChoice::Image(p), Some(nsid)) = (&self.media, ftl_namespace(&self.profile)) {
            return Err(EmulatorError::Image(ImageError::Invalid {
                path: p.display().to_string(),
                why: format!(
                    "namespace {nsid} is a conventional SSD with a device-side FTL, whose map \
                     device images do not hold"
                ),
            }));
        }
        let image = match &self.media {
            MediaChoice::Image(p) => Some(DeviceImage::open(p)?),
            _ => None,
        };
        if let Some(img) = &image {
            if img.profile != self.profile {
                return Err(EmulatorError::Image(ImageError::Invalid {
                    path: img_path(&self.media),
                    why: "the profile differs from the one stored in the image".into(),
                }));
            }
        }
        // Zone states first: the media's checksums are bound to the zones'
        // write generations.
        let mut seqs = Vec::new();
        let mut zone_states = Vec::new();
        let mut read_only = false;
        for (i, p) in self.profile.namespaces.iter().enumerate() {
            let nsid = i as u32 + 1;
            let stored = match &image {
                Some(img) if p.kind == NamespaceKind::Zoned => Some(img.load_zone_state(nsid)?),
                _ => None,
            };
            read_only |= stored.as_ref().is_some_and(|s| s.read_only.is_some());
            seqs.push(stored.as_ref().map_or(0, |s| s.sequence));
            let zones = match p.kind {
                NamespaceKind::Conventional => None,
                NamespaceKind::Zoned => {
                    let g = zone_geometry(p);
                    let payload = stored.and_then(|s| s.payload);
                    let mut z = match payload {
                        // An empty record: the fresh state a new image starts with.
                        Some(bytes) if !bytes.is_empty() => Zones::decode_durable(g, &bytes)
                            .map_err(|e| {
                                // A record that passed its slot checksum
                                // and still does not decode: name the image.
                                EmulatorError::Image(ImageError::Invalid {
                                    path: img_path(&self.media),
                                    why: format!(
                                        "namespace {nsid}: its zone state does not decode ({e}); \
                                         the image is not opened"
                                    ),
                                })
                            })?,
                        _ => Zones::new(g)
                            .map_err(|e| EmulatorError::ZoneState { nsid, why: e.to_string() })?,
                    };
                    // Images made before generations: every checksum is of
                    // generation 0, and stays so.
                    if image.as_ref().is_some_and(|img| !img.generations()) {
                        z.fix_generations();
                    }
                    Some(z)
                }
            };
            zone_states.push(zones);
        }
        let mut namespaces = Vec::new();
        let mut states = Vec::new();
        for ((i, p), zones) in self.profile.namespaces.iter().enumerate().zip(zone_states) {
            let nsid = i as u32 + 1;
            let geometry =
                MediaGeometry::new(p.block_size, p.metadata_size as u32, p.media_blocks())?;
            let generations = zones.as_ref().map(|z| Arc::clone(z.generations()));
            let media: Arc<dyn Media> = match (&self.media, &image) {
                // No data, nothing to check.
                (MediaChoice::Null, _) => Arc::new(NullMedia::new(geometry)?),
                (MediaChoice::Image(_), Some(img)) => {
                    let l = img.layouts[i];
                    let file = img.file()?;
                    let m = FileMedia::new(file, geometry, l.data_offset, l.metadata_offset)?;
                    match (l.checksum_offset, l.metadata_checksum_offset) {
                        (Some(at), md) => {
                            let mut c = Checksummed::in_file(m, &img.file()?, at)?;
                            if let Some(md) = md {
                                c = c.metadata_in_file(&img.file()?, md)?;
                            }
                            Arc::new(bind(c, &generations))
                        }
                        (None, _) => Arc::new(m),
                    }
                }
                _ => {
                    let m = RamMedia::new(geometry)?;
                    match self.profile.controller.data_checksums {
                        Some(true) => Arc::new(bind(Checksummed::in_memory(m)?, &generations)),
                        _ => Arc::new(m),
                    }
                }
            };
            states.push((nsid, p.clone(), media, zones));
        }
        // An image whose zone state cannot be trusted is never written:
        // no sink, and every command that would change it fails.
        let sink: Option<Arc<dyn ZoneStateSink>> = match &image {
            Some(img) if !read_only => Some(Arc::new(img.sink(seqs)?)),
            _ => None,
        };
        for (nsid, p, media, zones) in states {
            let ftl = match &p.ftl {
                Some(f) => {
                    let fw =
                        Firmware::new(f, p.block_size, p.metadata_size, Arc::clone(&media), timed)?;
                    Some(match &p.fdp {
                        Some(d) => fw.with_fdp(d, nsid),
                        None => fw,
                    })
                }
                None => None,
            };
            let mut ns = Namespace::new(nsid, p, zones, ftl, media, sink.clone());
            ns.write_protected = read_only;
            namespaces.push(ns);
        }
        let clock = if timed {
            Clock::dilated(self.clock, self.dilation)
        } else {
            Clock::new(ClockMode::Real)
        };
        Ok(Controller::with_namespaces(self.profile, host, namespaces, timed, clock))
    }
}

/// Binds a checksummed medium to its zones' write generations, if it has zones.
fn bind<M: Media>(c: Checksummed<M>, g: &Option<Arc<media::Generations>>) -> Checksummed<M> {
    match g {
        Some(g) => c.with_generations(Arc::clone(g)),
        None => c,
    }
}

/// The first namespace of `profile` with a device-side FTL.
pub fn ftl_namespace(profile: &Profile) -> Option<u32> {
    profile.namespaces.iter().position(|n| n.ftl.is_some()).map(|i| i as u32 + 1)
}

fn img_path(m: &MediaChoice) -> String {
    match m {
        MediaChoice::Image(p) => p.display().to_string(),
        _ => String::new(),
    }
}

/// The zone geometry a namespace profile describes.
pub fn zone_geometry(p: &profile::NamespaceProfile) -> ZoneGeometry {
    ZoneGeometry {
        zone_size: p.zone_size,
        zone_capacity: p.zone_capacity,
        zones: p.zones,
        max_open: p.max_open,
        max_active: p.max_active,
        descriptor_extension_bytes: p.descriptor_extension_bytes,
        read_across_boundaries: p.read_across_zone_boundaries,
        zrwa: p.zrwa,
    }
}
