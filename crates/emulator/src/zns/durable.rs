//! The volatile write cache model: Flush, power cuts, and the durable zone
//! image a file-backed device keeps.
//!
//! Each zone keeps a durable extent next to its written extent. Flush makes
//! every zone's written extent durable; a FUA write makes its zone durable
//! up to the end of that write; a zone that becomes Full (filled, finished,
//! excursion) is durable, and so are zone management changes and
//! controller-initiated ones. A power cut may lose any suffix of a zone's
//! undurable blocks. Blocks a zone random write area holds uncommitted are
//! never durable: a power cut loses all of them and the ZRWA itself (a
//! power-on image has no ZRWA); committed ones are durable.
//!
//! Image format (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `ZNSKZONE` |
//! | 2 | version (1) |
//! | 2 | reserved (0) |
//! | 8 | zone size |
//! | 8 | zone capacity |
//! | 4 | zones |
//! | 4 | max open (0 = no limit) |
//! | 4 | max active (0 = no limit) |
//! | 4 | descriptor extension bytes |
//! | 1 | read across zone boundaries (0 or 1) |
//! | 3 | reserved (0) |
//! | per zone | state (1), attributes (1), write generation (2), written blocks (8), extension |
//! | 4 | CRC-32C of everything before |
//!
//! The write generation of a zone (see [`crate::media::Generations`]) took
//! two bytes that were reserved and zero before; a zone that never saw a
//! reset since generations exist is in generation 0, so older images read
//! the same.

use zns_spec::{ZoneAttributes, ZoneState};

use super::geometry::{GeometryError, ZoneGeometry};
use super::resources::Resources;
use super::zone::{Zone, KNOWN_ATTRIBUTES};
use super::Zones;

const MAGIC: &[u8; 8] = b"ZNSKZONE";
const VERSION: u16 = 1;
const HEADER: usize = 48;
const ZONE_FIXED: usize = 12;

/// Why a durable zone image was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurableError {
    /// The geometry passed in is itself invalid.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// The image is shorter or longer than its geometry requires.
    #[error("image is {actual} bytes, expected {expected}")]
    Length {
        /// Bytes the geometry requires.
        expected: usize,
        /// Bytes supplied.
        actual: usize,
    },
    /// Not a zone image.
    #[error("not a znskit zone image (bad magic)")]
    Magic,
    /// A version this code does not read.
    #[error("unsupported zone image version {0}")]
    Version(u16),
    /// The checksum does not match the contents.
    #[error("zone image checksum mismatch")]
    Checksum,
    /// The image was written for another geometry.
    #[error("zone image geometry differs from the namespace geometry")]
    GeometryMismatch,
    /// A zone's recorded state cannot exist after a power cycle.
    #[error("zone {zone}: {reason}")]
    Zone {
        /// Zone index.
        zone: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// More Closed zones than Max Active Resources allows.
    #[error("{active} active zones exceed max active {max}")]
    TooManyActive {
        /// Closed zones in the image.
        active: u32,
        /// Max Active Resources.
        max: u32,
    },
}

impl Zones {
    /// Flush: every zone's written extent becomes durable.
    pub fn flush(&self) {
        for m in self.zones.iter() {
            let mut z = m.lock();
            z.durable_wp = z.wp;
        }
    }

    /// Simulates losing power, then powering on again.
    ///
    /// Every zone with undurable blocks keeps a uniformly random prefix of
    /// them: its write pointer rolls back to a point in `[durable, current]`
    /// (a multi-block write may be torn). What a zone random write area
    /// holds uncommitted is lost, and the ZRWA is released. Then the power-on rules apply:
    /// open and closed zones come back Closed, or Empty when nothing is
    /// written and no descriptor extension is valid; the resource counts are
    /// recounted and the Changed Zone List (volatile) is cleared.
    ///
    /// Returns the `(lba, blocks)` ranges whose writes were lost; reads no
    /// longer see them, and the caller may deallocate them.
    pub fn power_cut<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Vec<(u64, u64)> {
        let mut res = self.resources.lock();
        let mut dropped = Vec::new();
        for m in self.zones.iter() {
            let mut z = m.lock();
            let top = z.visible_end();
            if z.durable_wp < top {
                let keep = rng.gen_range(z.durable_wp..=z.wp);
                if keep < top {
                    dropped.push((keep, top - keep));
                }
                z.wp = keep;
            }
            z.durable_wp = z.wp;
            z.window_end = z.wp;
            z.attrs.0 &= !ZoneAttributes::ZRWA_VALID;
            let state = z.power_on_state();
            if state == ZoneState::Empty {
                z.clear();
            }
            z.state = state;
        }
        // The trace outlives a power cut.
        *res = Resources { trace: res.trace.take(), ..Resources::default() };
        for m in self.zones.iter() {
            if m.lock().state == ZoneState::Closed {
                res.active += 1;
            }
        }
        let mut c = self.changed.lock();
        c.order.clear();
        c.listed.fill(false);
        dropped
    }

    /// The durable zone image: what survives the worst power cut now
    /// (every zone rolled back to its durable extent, in power-on form),
    /// with attributes and descriptor extensions. Versioned and checksummed;
    /// read back with [`Zones::decode_durable`].
    pub fn encode_durable(&self) -> Vec<u8> {
        let g = &self.geometry;
        let mut out = Vec::with_capacity(image_len(g));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&g.zone_size.to_le_bytes());
        out.extend_from_slice(&g.zone_capacity.to_le_bytes());
        out.extend_from_slice(&g.zones.to_le_bytes());
        out.extend_from_slice(&g.max_open.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&g.max_active.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&(g.descriptor_extension_bytes as u32).to_le_bytes());
        out.push(g.read_across_boundaries as u8);
        out.extend_from_slice(&[0; 3]);
        debug_assert_eq!(out.len(), HEADER);

        // The resources lock freezes every zone's state while we read them.
        let _res = self.resources.lock();
        for (index, m) in self.zones.iter().enumerate() {
            let mut z: Zone = m.lock().clone();
            z.wp = z.durable_wp;
            z.attrs.0 &= !ZoneAttributes::ZRWA_VALID;
            let state = z.power_on_state();
            if state == ZoneState::Empty {
                z.clear();
            }
            out.push(state as u8);
            out.push(z.attrs.0);
            out.extend_from_slice(&self.generations.get(index as u32).to_le_bytes());
            out.extend_from_slice(&(z.wp - z.start).to_le_bytes());
            out.extend_from_slice(&z.ext);
        }
        let crc = crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Rebuilds the zones from an image made by [`Zones::encode_durable`]
    /// for the same geometry. Every field is checked; a damaged or foreign
    /// image is an error, never a panic.
    pub fn decode_durable(geometry: ZoneGeometry, image: &[u8]) -> Result<Zones, DurableError> {
        geometry.validate()?;
        let g = &geometry;
        let expected = image_len(g);
        if image.len() < 10 || &image[..8] != MAGIC {
            return Err(DurableError::Magic);
        }
        let version = u16::from_le_bytes([image[8], image[9]]);
        if version != VERSION {
            return Err(DurableError::Version(version));
        }
        if image.len() != expected {
            return Err(DurableError::Length { expected, actual: image.len() });
        }
        let (body, tail) = image.split_at(expected - 4);
        if crc32c(body) != u32::from_le_bytes(tail.try_into().expect("4 bytes")) {
            return Err(DurableError::Checksum);
        }
        let u32_at = |o: usize| u32::from_le_bytes(body[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
        let same = u16::from_le_bytes([body[10], body[11]]) == 0
            && u64_at(12) == g.zone_size
            && u64_at(20) == g.zone_capacity
            && u32_at(28) == g.zones
            && u32_at(32) == g.max_open.unwrap_or(0)
            && u32_at(36) == g.max_active.unwrap_or(0)
            && u32_at(40) as usize == g.descriptor_extension_bytes
            && body[44] == g.read_across_boundaries as u8
            && body[45..48] == [0; 3];
        if !same {
            return Err(DurableError::GeometryMismatch);
        }

        let zones = Zones::new(geometry.clone())?;
        let mut active = 0u32;
        let stride = ZONE_FIXED + g.descriptor_extension_bytes;
        for index in 0..g.zones {
            let at = HEADER + index as usize * stride;
            let bad = |reason| DurableError::Zone { zone: index, reason };
            let state = ZoneState::from_raw(body[at]).ok_or(bad("reserved zone state"))?;
            let attrs = ZoneAttributes(body[at + 1]);
            let written = u64_at(at + 4);
            let ext = &body[at + ZONE_FIXED..at + stride];
            let generation = u16::from_le_bytes([body[at + 2], body[at + 3]]);
            if attrs.0 & !KNOWN_ATTRIBUTES != 0 {
                return Err(bad("unknown attribute bits"));
            }
            if attrs.has(ZoneAttributes::ZRWA_VALID) {
                return Err(bad("zone random write area in a power-on image"));
            }
            if written > g.zone_capacity {
                return Err(bad("write pointer past the zone capacity"));
            }
            let zdev = attrs.has(ZoneAttributes::EXTENSION_VALID);
            if zdev && g.descriptor_extension_bytes == 0 {
                return Err(bad("ZDEV without descriptor extension support"));
            }
            if !zdev && ext.iter().any(|&b| b != 0) {
                return Err(bad("extension data without ZDEV"));
            }
            match state {
                ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen => {
                    return Err(bad("open zone in a power-on image"));
                }
                ZoneState::Empty | ZoneState::Offline if written != 0 || attrs.0 != 0 => {
                    return Err(bad("Empty or Offline zone with data or attributes"));
                }
                ZoneState::Closed if written == g.zone_capacity => {
                    return Err(bad("Closed zone at capacity"));
                }
                ZoneState::Closed if written == 0 && !zdev => {
                    return Err(bad("Closed zone with nothing written and no extension"));
                }
                ZoneState::Closed => active += 1,
                _ => {}
            }
            if attrs.has(ZoneAttributes::FINISHED_BY_CONTROLLER) && state != ZoneState::Full {
                return Err(bad("Zone Finished by Controller outside Full"));
            }
            let mut z = zones.lock(index);
            z.state = state;
            z.attrs = attrs;
            z.wp = z.start + written;
            z.durable_wp = z.wp;
            z.ext.copy_from_slice(ext);
            drop(z);
            zones.generations.set(index, generation);
        }
        if let Some(max) = g.max_active {
            if active > max {
                return Err(DurableError::TooManyActive { active, max });
            }
        }
        zones.resources.lock().active = active;
        Ok(zones)
    }
}

/// What the data of one zone proves about it, for [`Zones::amended`]: how
/// many blocks from its start hold current data, and in which write
/// generation they were written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProvenZone {
    /// Zone index.
    pub zone: u32,
    /// Blocks written from the zone's start.
    pub written: u64,
    /// Their write generation.
    pub generation: u16,
    /// The zone was reset after the state amended: its attributes and
    /// descriptor extension go.
    pub reset: bool,
}

impl Zones {
    /// This power-on zone state with the zones in `proven` changed to what
    /// their data proves: a zone reset since (its attributes and descriptor
    /// extension go) holds `written` blocks of its new generation; another
    /// holds `written` blocks, its attributes kept. Either way it is Empty, Closed or Full by its
    /// count. What leaves no data (Finish, Offline, attributes set later)
    /// cannot be proven and is not changed.
    ///
    /// Errors: a count past the zone capacity, a zone that cannot hold data
    /// (Read Only, Offline), more Closed zones than Max Active Resources.
    pub fn amended(&self, proven: &[ProvenZone]) -> Result<Zones, DurableError> {
        let g = self.geometry.clone();
        let mut out = Zones::decode_durable(g.clone(), &self.encode_durable())?;
        if !self.generations.advancing() {
            out.fix_generations();
        }
        for p in proven {
            let bad = |reason| DurableError::Zone { zone: p.zone, reason };
            if p.zone >= g.zones {
                return Err(DurableError::GeometryMismatch);
            }
            if p.written > g.zone_capacity {
                return Err(bad("write pointer past the zone capacity"));
            }
            let mut z = out.lock(p.zone);
            if matches!(z.state, ZoneState::ReadOnly | ZoneState::Offline) {
                return Err(bad("data proven in a Read Only or Offline zone"));
            }
            if p.reset {
                z.clear();
            }
            z.wp = z.start + p.written;
            z.durable_wp = z.wp;
            z.window_end = z.wp;
            let zdev = z.attrs.has(ZoneAttributes::EXTENSION_VALID);
            z.state = match p.written {
                w if w == g.zone_capacity => ZoneState::Full,
                0 if !zdev => ZoneState::Empty,
                _ => ZoneState::Closed,
            };
            if z.state != ZoneState::Full {
                z.attrs.0 &= !ZoneAttributes::FINISHED_BY_CONTROLLER;
            }
            drop(z);
            out.generations.set(p.zone, p.generation);
        }
        // Everything checked again as a stored state would be.
        let image = out.encode_durable();
        let mut z = Zones::decode_durable(g, &image)?;
        if !self.generations.advancing() {
            z.fix_generations();
        }
        Ok(z)
    }
}

impl Zones {
    /// A power-on zone state rebuilt from how many blocks each zone holds
    /// (`written[i]` from zone `i`'s start): Empty, Closed or Full by that
    /// count, no attributes, no descriptor extensions. A device image's
    /// repair uses it when no valid zone state is left and its data
    /// checksums still tell which blocks were written.
    ///
    /// Errors: a count per zone missing or past the zone capacity, more
    /// partly written (Closed) zones than Max Active Resources.
    pub fn rebuilt(geometry: ZoneGeometry, written: &[u64]) -> Result<Zones, DurableError> {
        Zones::rebuilt_in(geometry, written, &vec![0; written.len()])
    }

    /// [`Zones::rebuilt`] with each zone's write generation (what its
    /// blocks' checksums were made in).
    pub fn rebuilt_in(
        geometry: ZoneGeometry,
        written: &[u64],
        generations: &[u16],
    ) -> Result<Zones, DurableError> {
        let zones = Zones::new(geometry.clone())?;
        let g = &geometry;
        if written.len() != g.zones as usize || generations.len() != written.len() {
            return Err(DurableError::GeometryMismatch);
        }
        let mut active = 0u32;
        for (index, &w) in written.iter().enumerate() {
            let index = index as u32;
            if w > g.zone_capacity {
                let reason = "write pointer past the zone capacity";
                return Err(DurableError::Zone { zone: index, reason });
            }
            let state = match w {
                0 => ZoneState::Empty,
                w if w == g.zone_capacity => ZoneState::Full,
                _ => {
                    active += 1;
                    ZoneState::Closed
                }
            };
            let mut z = zones.lock(index);
            z.state = state;
            z.wp = z.start + w;
            z.durable_wp = z.wp;
            drop(z);
            zones.generations.set(index, generations[index as usize]);
        }
        if let Some(max) = g.max_active {
            if active > max {
                return Err(DurableError::TooManyActive { active, max });
            }
        }
        zones.resources.lock().active = active;
        Ok(zones)
    }
}

/// Bytes of an image for geometry `g`.
fn image_len(g: &ZoneGeometry) -> usize {
    HEADER + g.zones as usize * (ZONE_FIXED + g.descriptor_extension_bytes) + 4
}

/// CRC-32C (Castagnoli), reflected, as iSCSI and ext4 use it.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}
