//! The state one zone carries, guarded by that zone's own lock.

use zns_spec::{ZoneAttributes, ZoneDescriptor, ZoneState, ZoneType};

/// Attribute bits this layer ever sets; everything else stays zero.
pub(crate) const KNOWN_ATTRIBUTES: u8 = ZoneAttributes::FINISHED_BY_CONTROLLER
    | ZoneAttributes::FINISH_RECOMMENDED
    | ZoneAttributes::RESET_RECOMMENDED
    | ZoneAttributes::ZRWA_VALID
    | ZoneAttributes::EXTENSION_VALID;

/// One zone: state, write pointer, attributes, extension and how much of
/// it is durable.
///
/// `wp` is the written extent (absolute LBA one past the last written
/// block). It is kept in every state, including Full and Read Only where
/// the descriptor reports the write pointer as invalid, because reads use
/// it to decide which blocks are visible: blocks at or past `wp` read as
/// zeros, except those a zone random write area holds below `window_end`.
///
/// With a ZRWA (attribute ZRWAV) `wp` is the committed write pointer the
/// descriptor reports, and `window_end` one past the highest block written
/// into the window and not yet committed. Without pending window blocks
/// `window_end <= wp` (it is then meaningless).
#[derive(Debug, Clone)]
pub(crate) struct Zone {
    /// ZSLBA (immutable).
    pub start: u64,
    /// Zone state.
    pub state: ZoneState,
    /// Written extent (the write pointer while it is valid).
    pub wp: u64,
    /// Everything below this LBA survives a power cut.
    pub durable_wp: u64,
    /// One past the highest block written into the zone random write area
    /// (blocks from `wp` to here are readable but not committed); at most
    /// `wp` when nothing is pending.
    pub window_end: u64,
    /// Zone attributes (ZFC, FZR, RZR, ZDEV).
    pub attrs: ZoneAttributes,
    /// Zone descriptor extension; meaningful while ZDEV is set, all zeros
    /// otherwise. Empty when extensions are not supported.
    pub ext: Box<[u8]>,
}

impl Zone {
    /// An Empty zone starting at `start`.
    pub fn new(start: u64, ext_bytes: usize) -> Self {
        Zone {
            start,
            state: ZoneState::Empty,
            wp: start,
            durable_wp: start,
            window_end: start,
            attrs: ZoneAttributes::default(),
            ext: vec![0; ext_bytes].into_boxed_slice(),
        }
    }

    /// Forgets contents, attributes and extension (entering Empty or
    /// Offline). The caller changes the state.
    pub fn clear(&mut self) {
        self.wp = self.start;
        self.durable_wp = self.start;
        self.window_end = self.start;
        self.attrs = ZoneAttributes::default();
        self.ext.fill(0);
    }

    /// True when the zone holds a zone random write area (ZRWAV).
    pub fn has_zrwa(&self) -> bool {
        self.attrs.has(ZoneAttributes::ZRWA_VALID)
    }

    /// One past the last readable block: the write pointer, or the end of
    /// what the zone random write area holds beyond it.
    pub fn visible_end(&self) -> u64 {
        self.wp.max(self.window_end)
    }

    /// True when the zone descriptor extension is valid.
    pub fn has_extension(&self) -> bool {
        self.attrs.has(ZoneAttributes::EXTENSION_VALID)
    }

    /// The state this zone comes back in after a power cycle, given the
    /// write pointer it then has: open zones are closed, and an active zone
    /// with nothing written and no valid extension is Empty.
    pub fn power_on_state(&self) -> ZoneState {
        if self.state.is_active() {
            if self.wp == self.start && !self.has_extension() {
                ZoneState::Empty
            } else {
                ZoneState::Closed
            }
        } else {
            self.state
        }
    }

    /// The 64-byte descriptor a report returns for this zone.
    pub fn descriptor(&self, capacity: u64) -> ZoneDescriptor {
        ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state: self.state,
            attrs: self.attrs,
            attrs_info: 0,
            capacity,
            start: self.start,
            write_pointer: if self.state.has_write_pointer() {
                self.wp
            } else {
                ZoneDescriptor::INVALID_WRITE_POINTER
            },
        }
    }

    /// A snapshot for callers outside the lock.
    pub fn info(&self, index: u32) -> ZoneInfo {
        ZoneInfo {
            index,
            start: self.start,
            state: self.state,
            written_extent: self.wp,
            window_end: self.visible_end(),
            durable_extent: self.durable_wp,
            attrs: self.attrs,
        }
    }
}

/// A snapshot of one zone, including what the descriptor does not show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneInfo {
    /// Zone index.
    pub index: u32,
    /// ZSLBA.
    pub start: u64,
    /// Zone state.
    pub state: ZoneState,
    /// One past the last written block, kept in every state (the write
    /// pointer while it is valid). Blocks from here on read as zeros.
    pub written_extent: u64,
    /// One past the last readable block: `written_extent`, or beyond it
    /// the end of the uncommitted blocks a zone random write area holds.
    pub window_end: u64,
    /// One past the last block that survives a power cut.
    pub durable_extent: u64,
    /// Zone attributes.
    pub attrs: ZoneAttributes,
}
