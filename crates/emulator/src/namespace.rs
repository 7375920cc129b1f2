//! A namespace: its command set, zone state (when zoned), media and faults.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use zns_spec::CommandSetId;

use crate::conv::Firmware;
use crate::media::Media;
use crate::profile::{NamespaceKind, NamespaceProfile};
use crate::zns::Zones;

/// Where a zoned namespace's durable zone image goes whenever it changes
/// durably (flush, FUA, zone management). Used by file-backed devices.
pub trait ZoneStateSink: Send + Sync + std::fmt::Debug {
    /// Stores the image for namespace `nsid`.
    fn save(&self, nsid: u32, image: &[u8]) -> std::io::Result<()>;
}

/// One namespace of the emulated controller.
#[derive(Debug)]
pub struct Namespace {
    pub(crate) nsid: u32,
    pub(crate) profile: NamespaceProfile,
    pub(crate) zones: Option<Zones>,
    /// The firmware of a conventional namespace with a device-side FTL.
    pub(crate) ftl: Option<Firmware>,
    pub(crate) media: Arc<dyn Media>,
    pub(crate) sink: Option<Arc<dyn ZoneStateSink>>,
    /// Commands that would change data or zone state fail with Namespace
    /// is Write Protected: the device image's zone state could not be
    /// trusted, and writing would overwrite the evidence.
    pub(crate) write_protected: bool,
    /// Blocks that fail reads with Unrecovered Read Error until rewritten.
    bad_blocks: Mutex<BTreeSet<u64>>,
    has_bad_blocks: AtomicBool,
}

impl Namespace {
    /// Assembles a namespace; `zones` must be present exactly when the
    /// profile is zoned, `ftl` exactly when it has an FTL table.
    pub(crate) fn new(
        nsid: u32,
        profile: NamespaceProfile,
        zones: Option<Zones>,
        ftl: Option<Firmware>,
        media: Arc<dyn Media>,
        sink: Option<Arc<dyn ZoneStateSink>>,
    ) -> Self {
        debug_assert_eq!(zones.is_some(), profile.kind == NamespaceKind::Zoned);
        debug_assert_eq!(ftl.is_some(), profile.ftl.is_some());
        Namespace {
            nsid,
            profile,
            zones,
            ftl,
            media,
            sink,
            write_protected: false,
            bad_blocks: Mutex::new(BTreeSet::new()),
            has_bad_blocks: AtomicBool::new(false),
        }
    }

    /// Namespace identifier.
    pub fn nsid(&self) -> u32 {
        self.nsid
    }

    /// True for a zoned namespace.
    pub fn is_zoned(&self) -> bool {
        self.zones.is_some()
    }

    /// Command set identifier.
    pub fn csi(&self) -> CommandSetId {
        if self.is_zoned() {
            CommandSetId::Zoned
        } else {
            CommandSetId::Nvm
        }
    }

    /// The zone state, for zoned namespaces.
    pub fn zones(&self) -> Option<&Zones> {
        self.zones.as_ref()
    }

    /// The firmware of a conventional namespace with a device-side FTL
    /// (its statistics, its invariants).
    pub fn firmware(&self) -> Option<&Firmware> {
        self.ftl.as_ref()
    }

    /// The media holding the blocks (with a device-side FTL: the flash,
    /// addressed by physical block).
    pub fn media(&self) -> &Arc<dyn Media> {
        &self.media
    }

    /// Whether commands that would change data or zone state fail (an
    /// image opened read-only because its zone state could not be
    /// trusted).
    pub fn write_protected(&self) -> bool {
        self.write_protected
    }

    /// Size in logical blocks.
    pub fn capacity(&self) -> u64 {
        self.profile.capacity_blocks()
    }

    /// Logical block size in bytes.
    pub fn block_size(&self) -> usize {
        self.profile.block_size as usize
    }

    /// Metadata bytes per block.
    pub fn metadata_size(&self) -> usize {
        self.profile.metadata_size as usize
    }

    /// Marks `lba` as unreadable (Unrecovered Read Error) until it is written again.
    pub fn inject_read_error(&self, lba: u64) {
        self.bad_blocks.lock().insert(lba);
        self.has_bad_blocks.store(true, Ordering::Release);
    }

    /// True when a block of the range carries an injected read error.
    pub(crate) fn read_error_in(&self, lba: u64, blocks: u64) -> bool {
        self.has_bad_blocks.load(Ordering::Acquire)
            && self.bad_blocks.lock().range(lba..lba.saturating_add(blocks)).next().is_some()
    }

    /// Clears injected read errors in a range that was written.
    pub(crate) fn clear_read_errors(&self, lba: u64, blocks: u64) {
        if self.has_bad_blocks.load(Ordering::Acquire) {
            let mut b = self.bad_blocks.lock();
            let doomed: Vec<u64> = b.range(lba..lba.saturating_add(blocks)).copied().collect();
            for l in doomed {
                b.remove(&l);
            }
            self.has_bad_blocks.store(!b.is_empty(), Ordering::Release);
        }
    }

    /// Makes every completed write durable: zone write pointers, media, image.
    pub(crate) fn flush(&self) -> std::io::Result<()> {
        if let Some(z) = &self.zones {
            z.flush();
        }
        if let Some(f) = &self.ftl {
            f.commit();
        }
        self.media.sync().map_err(std::io::Error::other)?;
        self.persist()
    }

    /// Writes the durable zone image to the sink, if there is one.
    pub(crate) fn persist(&self) -> std::io::Result<()> {
        if let (Some(z), Some(sink)) = (&self.zones, &self.sink) {
            sink.save(self.nsid, &z.encode_durable())?;
        }
        Ok(())
    }

    /// Normal shutdown: flush, then open zones come back closed.
    pub(crate) fn shutdown(&self) {
        if let Err(e) = self.flush() {
            tracing::error!(nsid = self.nsid, error = %e, "flush at shutdown failed");
        }
    }
}
