//! Identify: the Controller or Namespace Structure (CNS) values and the data
//! structures the Identify command returns.
//!
//! Every structure here is 4 KiB on the wire. `to_bytes` produces the full
//! image (reserved bytes zero); `from_bytes` accepts any bit pattern. ASCII
//! string fields are space padded on the wire and exposed trimmed.

use crate::opcode::CommandSetId;
use crate::regs::Version;

/// Size of every Identify data structure.
pub const IDENTIFY_SIZE: usize = 4096;

/// Controller or Namespace Structure (Identify CDW10 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Cns {
    /// 00h: Identify Namespace data structure for the NVM command set.
    Namespace = 0x00,
    /// 01h: Identify Controller data structure.
    Controller = 0x01,
    /// 02h: active namespace ID list.
    ActiveNamespaces = 0x02,
    /// 03h: Namespace Identification Descriptor list.
    NamespaceIdDescriptors = 0x03,
    /// 05h: I/O Command Set specific Identify Namespace data structure.
    CsiNamespace = 0x05,
    /// 06h: I/O Command Set specific Identify Controller data structure.
    CsiController = 0x06,
    /// 07h: active namespace ID list of one I/O Command Set.
    CsiActiveNamespaces = 0x07,
    /// 08h: I/O Command Set Independent Identify Namespace data structure.
    IoCommandSetIndependentNamespace = 0x08,
    /// 1Ch: Identify I/O Command Set data structure (the command set vector).
    IoCommandSets = 0x1C,
}

impl Cns {
    /// Decodes a CNS value; `None` for values this crate does not serve.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => Self::Namespace,
            0x01 => Self::Controller,
            0x02 => Self::ActiveNamespaces,
            0x03 => Self::NamespaceIdDescriptors,
            0x05 => Self::CsiNamespace,
            0x06 => Self::CsiController,
            0x07 => Self::CsiActiveNamespaces,
            0x08 => Self::IoCommandSetIndependentNamespace,
            0x1C => Self::IoCommandSets,
            _ => return None,
        })
    }

    /// True for the CNS values whose answer depends on CDW11.CSI.
    pub const fn uses_csi(self) -> bool {
        matches!(self, Self::CsiNamespace | Self::CsiController | Self::CsiActiveNamespaces)
    }
}

/// A list or descriptor the decoder could not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdentifyError {
    /// A Namespace Identification Descriptor of a known type has the wrong length.
    #[error("namespace identifier type {nidt} has length {nidl}, expected {expected}")]
    DescriptorLength {
        /// Namespace Identifier Type.
        nidt: u8,
        /// Namespace Identifier Length found.
        nidl: u8,
        /// Length the type requires.
        expected: u8,
    },
    /// A descriptor extends past the end of the 4 KiB structure.
    #[error("namespace identification descriptor at byte {offset} runs past the end")]
    DescriptorOverrun {
        /// Byte offset of the descriptor header.
        offset: usize,
    },
}

// Little-endian field access. Callers pass fixed-size images and constant
// offsets, so the slices are always in bounds.

fn get16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn get32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn get64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

fn get128(b: &[u8], o: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[o..o + 16]);
    u128::from_le_bytes(a)
}

fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn put128(b: &mut [u8], o: usize, v: u128) {
    b[o..o + 16].copy_from_slice(&v.to_le_bytes());
}

fn array<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[o..o + N]);
    a
}

/// Writes `s` into `field` as space-padded ASCII, truncated to the field;
/// characters outside printable ASCII become `?`.
fn put_ascii(field: &mut [u8], s: &str) {
    field.fill(b' ');
    for (dst, c) in field.iter_mut().zip(s.chars()) {
        *dst = if c.is_ascii_graphic() || c == ' ' { c as u8 } else { b'?' };
    }
}

/// Reads a space- (or NUL-) padded ASCII field, trimmed at both ends.
fn get_ascii(field: &[u8]) -> String {
    String::from_utf8_lossy(field).trim_matches(|c| c == ' ' || c == '\0').to_string()
}

/// Writes `s` as a NUL-terminated UTF-8 string, truncated at a character
/// boundary so that the terminator fits.
fn put_nul_terminated(field: &mut [u8], s: &str) {
    field.fill(0);
    let mut end = s.len().min(field.len().saturating_sub(1));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    field[..end].copy_from_slice(&s.as_bytes()[..end]);
}

/// Reads a NUL-terminated UTF-8 string (the whole field if no terminator).
fn get_nul_terminated(field: &[u8]) -> String {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn zeroed() -> Box<[u8; IDENTIFY_SIZE]> {
    Box::new([0u8; IDENTIFY_SIZE])
}

/// Optional NVM Command Support (Identify Controller ONCS, bytes 521:520).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Oncs(pub u16);

impl Oncs {
    /// Bit 0: Compare.
    pub const COMPARE: u16 = 1 << 0;
    /// Bit 1: Write Uncorrectable.
    pub const WRITE_UNCORRECTABLE: u16 = 1 << 1;
    /// Bit 2: Dataset Management.
    pub const DATASET_MANAGEMENT: u16 = 1 << 2;
    /// Bit 3: Write Zeroes.
    pub const WRITE_ZEROES: u16 = 1 << 3;
    /// Bit 4: the Save field of Set Features and the Select field of Get Features.
    pub const SAVE_SELECT_FEATURES: u16 = 1 << 4;
    /// Bit 5: Reservations.
    pub const RESERVATIONS: u16 = 1 << 5;
    /// Bit 6: Timestamp feature.
    pub const TIMESTAMP: u16 = 1 << 6;
    /// Bit 7: Verify.
    pub const VERIFY: u16 = 1 << 7;
    /// Bit 8: Copy.
    pub const COPY: u16 = 1 << 8;

    /// True when every bit of `mask` is set.
    pub const fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }
}

/// A 32-byte power state descriptor (Identify Controller bytes 2048 onward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PowerStateDescriptor {
    /// MP (1:0): maximum power, in 0.01 W or 0.0001 W units per MXPS.
    pub max_power: u16,
    /// Byte 3: MXPS (bit 0) and NOPS (bit 1).
    pub flags: u8,
    /// ENLAT (7:4): entry latency in microseconds.
    pub entry_latency_us: u32,
    /// EXLAT (11:8): exit latency in microseconds.
    pub exit_latency_us: u32,
    /// Byte 12: RRT, relative read throughput (bits 4:0).
    pub rrt: u8,
    /// Byte 13: RRL, relative read latency (bits 4:0).
    pub rrl: u8,
    /// Byte 14: RWT, relative write throughput (bits 4:0).
    pub rwt: u8,
    /// Byte 15: RWL, relative write latency (bits 4:0).
    pub rwl: u8,
    /// IDLP (17:16): idle power.
    pub idle_power: u16,
    /// Byte 18: IPS, idle power scale (bits 7:6).
    pub ips: u8,
    /// ACTP (21:20): active power.
    pub active_power: u16,
    /// Byte 22: APW (bits 2:0) and APS (bits 7:6).
    pub apw_aps: u8,
}

impl PowerStateDescriptor {
    /// Size on the wire.
    pub const SIZE: usize = 32;
    /// Flags bit 0 MXPS: max power is in 0.0001 W units.
    pub const MXPS: u8 = 1 << 0;
    /// Flags bit 1 NOPS: non-operational state.
    pub const NOPS: u8 = 1 << 1;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        put16(&mut b, 0, self.max_power);
        b[3] = self.flags;
        put32(&mut b, 4, self.entry_latency_us);
        put32(&mut b, 8, self.exit_latency_us);
        b[12] = self.rrt;
        b[13] = self.rrl;
        b[14] = self.rwt;
        b[15] = self.rwl;
        put16(&mut b, 16, self.idle_power);
        b[18] = self.ips;
        put16(&mut b, 20, self.active_power);
        b[22] = self.apw_aps;
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 32]) -> Self {
        PowerStateDescriptor {
            max_power: get16(b, 0),
            flags: b[3],
            entry_latency_us: get32(b, 4),
            exit_latency_us: get32(b, 8),
            rrt: b[12],
            rrl: b[13],
            rwt: b[14],
            rwl: b[15],
            idle_power: get16(b, 16),
            ips: b[18],
            active_power: get16(b, 20),
            apw_aps: b[22],
        }
    }
}

/// Identify Controller data structure (CNS 01h), the fields znskit uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdentifyController {
    /// VID (1:0): PCI vendor ID.
    pub vid: u16,
    /// SSVID (3:2): PCI subsystem vendor ID.
    pub ssvid: u16,
    /// SN (23:4): serial number.
    pub serial_number: String,
    /// MN (63:24): model number.
    pub model_number: String,
    /// FR (71:64): firmware revision.
    pub firmware_revision: String,
    /// RAB (72): recommended arbitration burst.
    pub rab: u8,
    /// IEEE (75:73): organization unique identifier.
    pub ieee: [u8; 3],
    /// CMIC (76): multi-path I/O and namespace sharing capabilities.
    pub cmic: u8,
    /// MDTS (77): maximum data transfer size, a power of two in units of
    /// CAP.MPSMIN; 0 = no limit.
    pub mdts: u8,
    /// CNTLID (79:78): controller ID.
    pub cntlid: u16,
    /// VER (83:80): version.
    pub ver: Version,
    /// RTD3R (87:84): RTD3 resume latency, microseconds.
    pub rtd3r: u32,
    /// RTD3E (91:88): RTD3 entry latency, microseconds.
    pub rtd3e: u32,
    /// OAES (95:92): optional asynchronous events supported.
    pub oaes: u32,
    /// CTRATT (99:96): controller attributes
    /// ([`IdentifyController::CTRATT_ENDURANCE_GROUPS`],
    /// [`IdentifyController::CTRATT_FDPS`]).
    pub ctratt: u32,
    /// CNTRLTYPE (111): controller type.
    pub cntrltype: u8,
    /// OACS (257:256): optional admin command support.
    pub oacs: u16,
    /// ACL (258): abort command limit, 0's based.
    pub acl: u8,
    /// AERL (259): asynchronous event request limit, 0's based.
    pub aerl: u8,
    /// FRMW (260): firmware updates.
    pub frmw: u8,
    /// LPA (261): log page attributes.
    pub lpa: u8,
    /// ELPE (262): error log page entries, 0's based.
    pub elpe: u8,
    /// NPSS (263): number of power states supported, 0's based.
    pub npss: u8,
    /// ENDGIDMAX (341:340): the largest endurance group identifier.
    pub endgidmax: u16,
    /// SQES (512): required (3:0) and maximum (7:4) SQ entry size, log2.
    pub sqes: u8,
    /// CQES (513): required (3:0) and maximum (7:4) CQ entry size, log2.
    pub cqes: u8,
    /// MAXCMD (515:514): maximum outstanding commands.
    pub maxcmd: u16,
    /// NN (519:516): number of namespaces (highest valid NSID).
    pub nn: u32,
    /// ONCS (521:520): optional NVM command support.
    pub oncs: Oncs,
    /// FUSES (523:522): fused operation support.
    pub fuses: u16,
    /// FNA (524): format NVM attributes.
    pub fna: u8,
    /// VWC (525): volatile write cache.
    pub vwc: u8,
    /// AWUN (527:526): atomic write unit normal, 0's based blocks.
    pub awun: u16,
    /// AWUPF (529:528): atomic write unit power fail, 0's based blocks.
    pub awupf: u16,
    /// ICSVSCC (530): I/O command set vendor specific command configuration.
    pub icsvscc: u8,
    /// NWPC (531): namespace write protection capabilities.
    pub nwpc: u8,
    /// ACWU (533:532): atomic compare and write unit, 0's based blocks.
    pub acwu: u16,
    /// OCFS (535:534): copy descriptor formats supported (bit n = format n).
    pub ocfs: u16,
    /// SGLS (539:536): SGL support.
    pub sgls: u32,
    /// MNAN (543:540): maximum number of allowed namespaces.
    pub mnan: u32,
    /// SUBNQN (1023:768): NVM subsystem NVMe qualified name.
    pub subnqn: String,
    /// IOCCSZ (1795:1792), NVMe over Fabrics: I/O queue command capsule
    /// size in 16-byte units (the 64-byte entry plus in-capsule data).
    pub ioccsz: u32,
    /// IORCSZ (1799:1796), NVMe over Fabrics: I/O queue response capsule
    /// size in 16-byte units.
    pub iorcsz: u32,
    /// ICDOFF (1801:1800), NVMe over Fabrics: in-capsule data offset in
    /// 16-byte units after the submission entry.
    pub icdoff: u16,
    /// FCATT (1802), NVMe over Fabrics: controller attributes (bit 0:
    /// static controller model).
    pub fcatt: u8,
    /// MSDBD (1803), NVMe over Fabrics: most SGL data block descriptors in
    /// one command capsule.
    pub msdbd: u8,
    /// OFCS (1805:1804), NVMe over Fabrics: optional fabric commands
    /// supported (bit 0: Disconnect).
    pub ofcs: u16,
    /// PSD0..PSD31 (3071:2048): power state descriptors; NPSS + 1 are valid.
    pub power_states: [PowerStateDescriptor; 32],
}

impl IdentifyController {
    /// CNTRLTYPE 1h: I/O controller.
    pub const CNTRLTYPE_IO: u8 = 1;
    /// CNTRLTYPE 2h: discovery controller.
    pub const CNTRLTYPE_DISCOVERY: u8 = 2;
    /// CNTRLTYPE 3h: administrative controller.
    pub const CNTRLTYPE_ADMIN: u8 = 3;
    /// OCFS bit 0: Copy source range descriptor format 0h.
    pub const OCFS_FORMAT0: u16 = 1 << 0;
    /// VWC bit 0: a volatile write cache is present.
    pub const VWC_PRESENT: u8 = 1 << 0;
    /// CTRATT bit 4 (EGS): endurance groups supported.
    pub const CTRATT_ENDURANCE_GROUPS: u32 = 1 << 4;
    /// CTRATT bit 19 (FDPS): Flexible Data Placement supported.
    pub const CTRATT_FDPS: u32 = 1 << 19;

    /// Maximum data transfer in bytes given the minimum memory page size;
    /// `None` for no limit (MDTS 0, or a size beyond `u64`).
    pub const fn max_transfer_bytes(&self, mpsmin_bytes: u64) -> Option<u64> {
        if self.mdts == 0 || self.mdts >= 64 {
            return None;
        }
        mpsmin_bytes.checked_mul(1 << self.mdts)
    }

    /// The wire image.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut bx = zeroed();
        let b = &mut bx[..];
        put16(b, 0, self.vid);
        put16(b, 2, self.ssvid);
        put_ascii(&mut b[4..24], &self.serial_number);
        put_ascii(&mut b[24..64], &self.model_number);
        put_ascii(&mut b[64..72], &self.firmware_revision);
        b[72] = self.rab;
        b[73..76].copy_from_slice(&self.ieee);
        b[76] = self.cmic;
        b[77] = self.mdts;
        put16(b, 78, self.cntlid);
        put32(b, 80, self.ver.0);
        put32(b, 84, self.rtd3r);
        put32(b, 88, self.rtd3e);
        put32(b, 92, self.oaes);
        put32(b, 96, self.ctratt);
        b[111] = self.cntrltype;
        put16(b, 256, self.oacs);
        b[258] = self.acl;
        b[259] = self.aerl;
        b[260] = self.frmw;
        b[261] = self.lpa;
        b[262] = self.elpe;
        b[263] = self.npss;
        put16(b, 340, self.endgidmax);
        b[512] = self.sqes;
        b[513] = self.cqes;
        put16(b, 514, self.maxcmd);
        put32(b, 516, self.nn);
        put16(b, 520, self.oncs.0);
        put16(b, 522, self.fuses);
        b[524] = self.fna;
        b[525] = self.vwc;
        put16(b, 526, self.awun);
        put16(b, 528, self.awupf);
        b[530] = self.icsvscc;
        b[531] = self.nwpc;
        put16(b, 532, self.acwu);
        put16(b, 534, self.ocfs);
        put32(b, 536, self.sgls);
        put32(b, 540, self.mnan);
        put_nul_terminated(&mut b[768..1024], &self.subnqn);
        put32(b, 1792, self.ioccsz);
        put32(b, 1796, self.iorcsz);
        put16(b, 1800, self.icdoff);
        b[1802] = self.fcatt;
        b[1803] = self.msdbd;
        put16(b, 1804, self.ofcs);
        for (i, psd) in self.power_states.iter().enumerate() {
            let o = 2048 + i * PowerStateDescriptor::SIZE;
            b[o..o + PowerStateDescriptor::SIZE].copy_from_slice(&psd.to_bytes());
        }
        bx
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut power_states = [PowerStateDescriptor::default(); 32];
        for (i, psd) in power_states.iter_mut().enumerate() {
            *psd = PowerStateDescriptor::from_bytes(&array(b, 2048 + i * 32));
        }
        IdentifyController {
            vid: get16(b, 0),
            ssvid: get16(b, 2),
            serial_number: get_ascii(&b[4..24]),
            model_number: get_ascii(&b[24..64]),
            firmware_revision: get_ascii(&b[64..72]),
            rab: b[72],
            ieee: array(b, 73),
            cmic: b[76],
            mdts: b[77],
            cntlid: get16(b, 78),
            ver: Version(get32(b, 80)),
            rtd3r: get32(b, 84),
            rtd3e: get32(b, 88),
            oaes: get32(b, 92),
            ctratt: get32(b, 96),
            cntrltype: b[111],
            oacs: get16(b, 256),
            acl: b[258],
            aerl: b[259],
            frmw: b[260],
            lpa: b[261],
            elpe: b[262],
            npss: b[263],
            endgidmax: get16(b, 340),
            sqes: b[512],
            cqes: b[513],
            maxcmd: get16(b, 514),
            nn: get32(b, 516),
            oncs: Oncs(get16(b, 520)),
            fuses: get16(b, 522),
            fna: b[524],
            vwc: b[525],
            awun: get16(b, 526),
            awupf: get16(b, 528),
            icsvscc: b[530],
            nwpc: b[531],
            acwu: get16(b, 532),
            ocfs: get16(b, 534),
            sgls: get32(b, 536),
            mnan: get32(b, 540),
            subnqn: get_nul_terminated(&b[768..1024]),
            ioccsz: get32(b, 1792),
            iorcsz: get32(b, 1796),
            icdoff: get16(b, 1800),
            fcatt: b[1802],
            msdbd: b[1803],
            ofcs: get16(b, 1804),
            power_states,
        }
    }
}

/// An LBA format descriptor (4 bytes, Identify Namespace LBAF0..LBAF63).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LbaFormat {
    /// MS (15:0): metadata bytes per logical block.
    pub metadata_size: u16,
    /// LBADS (23:16): logical block data size, log2 of bytes; 0 = unused format.
    pub lba_data_size_log2: u8,
    /// RP (25:24): relative performance (0 best, 3 degraded).
    pub relative_performance: u8,
}

impl LbaFormat {
    /// A format with `block_size` data bytes (rounded down to a power of two)
    /// and no metadata.
    pub const fn with_block_size(block_size: u32) -> Self {
        let log2 = if block_size == 0 { 0 } else { 31 - block_size.leading_zeros() };
        LbaFormat { metadata_size: 0, lba_data_size_log2: log2 as u8, relative_performance: 0 }
    }

    /// Logical block data size in bytes; `None` when LBADS is below 9 (unused
    /// or unsupported) or too large to represent.
    pub const fn data_size(self) -> Option<u64> {
        if self.lba_data_size_log2 < 9 || self.lba_data_size_log2 >= 64 {
            None
        } else {
            Some(1 << self.lba_data_size_log2)
        }
    }

    /// The wire image.
    pub const fn to_bytes(self) -> [u8; 4] {
        let ms = self.metadata_size.to_le_bytes();
        [ms[0], ms[1], self.lba_data_size_log2, self.relative_performance & 3]
    }

    /// Parses a wire image.
    pub const fn from_bytes(b: &[u8; 4]) -> Self {
        LbaFormat {
            metadata_size: u16::from_le_bytes([b[0], b[1]]),
            lba_data_size_log2: b[2],
            relative_performance: b[3] & 3,
        }
    }
}

/// Identify Namespace data structure for the NVM command set (CNS 00h).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifyNamespace {
    /// NSZE (7:0): namespace size in logical blocks.
    pub nsze: u64,
    /// NCAP (15:8): namespace capacity in logical blocks.
    pub ncap: u64,
    /// NUSE (23:16): namespace utilization in logical blocks.
    pub nuse: u64,
    /// NSFEAT (24): namespace features.
    pub nsfeat: u8,
    /// NLBAF (25): number of LBA formats, 0's based.
    pub nlbaf: u8,
    /// FLBAS (26): formatted LBA size (see [`IdentifyNamespace::format_index`]).
    pub flbas: u8,
    /// MC (27): metadata capabilities.
    pub mc: u8,
    /// DPC (28): end-to-end data protection capabilities.
    pub dpc: u8,
    /// DPS (29): end-to-end data protection type settings.
    pub dps: u8,
    /// NMIC (30): namespace multi-path I/O and sharing capabilities.
    pub nmic: u8,
    /// RESCAP (31): reservation capabilities.
    pub rescap: u8,
    /// FPI (32): format progress indicator.
    pub fpi: u8,
    /// DLFEAT (33): deallocate logical block features.
    pub dlfeat: u8,
    /// NAWUN (35:34): namespace atomic write unit normal, 0's based.
    pub nawun: u16,
    /// NAWUPF (37:36): namespace atomic write unit power fail, 0's based.
    pub nawupf: u16,
    /// NACWU (39:38): namespace atomic compare and write unit, 0's based.
    pub nacwu: u16,
    /// NABSN (41:40): namespace atomic boundary size normal, 0's based.
    pub nabsn: u16,
    /// NABO (43:42): namespace atomic boundary offset.
    pub nabo: u16,
    /// NABSPF (45:44): namespace atomic boundary size power fail, 0's based.
    pub nabspf: u16,
    /// NOIOB (47:46): namespace optimal I/O boundary in logical blocks.
    pub noiob: u16,
    /// NVMCAP (63:48): NVM capacity in bytes.
    pub nvmcap: u128,
    /// NPWG (65:64): preferred write granularity, 0's based blocks.
    pub npwg: u16,
    /// NPWA (67:66): preferred write alignment, 0's based blocks.
    pub npwa: u16,
    /// NPDG (69:68): preferred deallocate granularity, 0's based blocks.
    pub npdg: u16,
    /// NPDA (71:70): preferred deallocate alignment, 0's based blocks.
    pub npda: u16,
    /// NOWS (73:72): optimal write size, 0's based blocks.
    pub nows: u16,
    /// MSSRL (75:74): maximum single source range length (Copy), in blocks.
    pub mssrl: u16,
    /// MCL (79:76): maximum copy length, in blocks.
    pub mcl: u32,
    /// MSRC (80): maximum source range count (Copy), 0's based.
    pub msrc: u8,
    /// NULBAF (82): number of unique attribute LBA formats.
    pub nulbaf: u8,
    /// ANAGRPID (95:92): ANA group identifier.
    pub anagrpid: u32,
    /// NSATTR (99): namespace attributes (bit 0 write protected).
    pub nsattr: u8,
    /// NVMSETID (101:100): NVM set identifier.
    pub nvmsetid: u16,
    /// ENDGID (103:102): endurance group identifier.
    pub endgid: u16,
    /// NGUID (119:104): namespace globally unique identifier.
    pub nguid: [u8; 16],
    /// EUI64 (127:120): IEEE extended unique identifier.
    pub eui64: [u8; 8],
    /// LBAF0..LBAF63 (383:128): LBA formats.
    pub lbaf: [LbaFormat; 64],
}

impl Default for IdentifyNamespace {
    fn default() -> Self {
        Self::from_bytes(&[0u8; IDENTIFY_SIZE])
    }
}

impl IdentifyNamespace {
    /// FLBAS bit 4: metadata is transferred at the end of each logical block.
    pub const FLBAS_EXTENDED_METADATA: u8 = 1 << 4;

    /// Encodes FLBAS for format `index` (0..=63; higher bits ignored).
    pub const fn encode_flbas(index: u8, extended_metadata: bool) -> u8 {
        (index & 0xF) | ((index >> 4) & 3) << 5 | (extended_metadata as u8) << 4
    }

    /// Index of the current LBA format: FLBAS bits 3:0, with bits 6:5 as
    /// index bits 5:4.
    pub const fn format_index(&self) -> u8 {
        (self.flbas & 0xF) | ((self.flbas >> 5) & 3) << 4
    }

    /// FLBAS bit 4: metadata at the end of each logical block (extended LBA).
    pub const fn metadata_extended(&self) -> bool {
        self.flbas & Self::FLBAS_EXTENDED_METADATA != 0
    }

    /// The LBA format the namespace is formatted with.
    pub const fn current_lba_format(&self) -> LbaFormat {
        self.lbaf[self.format_index() as usize]
    }

    /// Logical block size in bytes; `None` if the current format is unusable.
    pub const fn block_size(&self) -> Option<u64> {
        self.current_lba_format().data_size()
    }

    /// The wire image.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut bx = zeroed();
        let b = &mut bx[..];
        put64(b, 0, self.nsze);
        put64(b, 8, self.ncap);
        put64(b, 16, self.nuse);
        b[24] = self.nsfeat;
        b[25] = self.nlbaf;
        b[26] = self.flbas;
        b[27] = self.mc;
        b[28] = self.dpc;
        b[29] = self.dps;
        b[30] = self.nmic;
        b[31] = self.rescap;
        b[32] = self.fpi;
        b[33] = self.dlfeat;
        put16(b, 34, self.nawun);
        put16(b, 36, self.nawupf);
        put16(b, 38, self.nacwu);
        put16(b, 40, self.nabsn);
        put16(b, 42, self.nabo);
        put16(b, 44, self.nabspf);
        put16(b, 46, self.noiob);
        put128(b, 48, self.nvmcap);
        put16(b, 64, self.npwg);
        put16(b, 66, self.npwa);
        put16(b, 68, self.npdg);
        put16(b, 70, self.npda);
        put16(b, 72, self.nows);
        put16(b, 74, self.mssrl);
        put32(b, 76, self.mcl);
        b[80] = self.msrc;
        b[82] = self.nulbaf;
        put32(b, 92, self.anagrpid);
        b[99] = self.nsattr;
        put16(b, 100, self.nvmsetid);
        put16(b, 102, self.endgid);
        b[104..120].copy_from_slice(&self.nguid);
        b[120..128].copy_from_slice(&self.eui64);
        for (i, f) in self.lbaf.iter().enumerate() {
            b[128 + 4 * i..132 + 4 * i].copy_from_slice(&f.to_bytes());
        }
        bx
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut lbaf = [LbaFormat::default(); 64];
        for (i, f) in lbaf.iter_mut().enumerate() {
            *f = LbaFormat::from_bytes(&array(b, 128 + 4 * i));
        }
        IdentifyNamespace {
            nsze: get64(b, 0),
            ncap: get64(b, 8),
            nuse: get64(b, 16),
            nsfeat: b[24],
            nlbaf: b[25],
            flbas: b[26],
            mc: b[27],
            dpc: b[28],
            dps: b[29],
            nmic: b[30],
            rescap: b[31],
            fpi: b[32],
            dlfeat: b[33],
            nawun: get16(b, 34),
            nawupf: get16(b, 36),
            nacwu: get16(b, 38),
            nabsn: get16(b, 40),
            nabo: get16(b, 42),
            nabspf: get16(b, 44),
            noiob: get16(b, 46),
            nvmcap: get128(b, 48),
            npwg: get16(b, 64),
            npwa: get16(b, 66),
            npdg: get16(b, 68),
            npda: get16(b, 70),
            nows: get16(b, 72),
            mssrl: get16(b, 74),
            mcl: get32(b, 76),
            msrc: b[80],
            nulbaf: b[82],
            anagrpid: get32(b, 92),
            nsattr: b[99],
            nvmsetid: get16(b, 100),
            endgid: get16(b, 102),
            nguid: array(b, 104),
            eui64: array(b, 120),
            lbaf,
        }
    }
}

/// A ZNS LBA format extension (16 bytes, one per LBA format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ZoneFormatExtension {
    /// ZSZE (7:0): zone size in logical blocks.
    pub zone_size: u64,
    /// ZDES (8): zone descriptor extension size, in 64-byte units.
    pub zdes: u8,
}

impl ZoneFormatExtension {
    /// Zone descriptor extension size in bytes.
    pub const fn extension_bytes(self) -> u32 {
        self.zdes as u32 * 64
    }
}

/// Encodes a 0's based resource limit where all ones means no limit.
const fn encode_limit(v: Option<u32>) -> u32 {
    match v {
        None => u32::MAX,
        Some(n) => n.saturating_sub(1),
    }
}

/// Decodes a 0's based resource limit where all ones means no limit.
const fn decode_limit(raw: u32) -> Option<u32> {
    if raw == u32::MAX {
        None
    } else {
        Some(raw + 1)
    }
}

/// ZNS I/O Command Set specific Identify Namespace (CNS 05h, CSI 02h).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZnsNamespace {
    /// ZOC (1:0): zone operation characteristics.
    pub zoc: u16,
    /// OZCS (3:2): optional zoned command support.
    pub ozcs: u16,
    /// MAR (7:4): maximum active resources, as a count; `None` = no limit.
    /// A count of 0 cannot be expressed and encodes as 1.
    pub max_active: Option<u32>,
    /// MOR (11:8): maximum open resources, as a count; `None` = no limit.
    /// A count of 0 cannot be expressed and encodes as 1.
    pub max_open: Option<u32>,
    /// RRL (15:12): reset recommended limit, seconds.
    pub rrl: u32,
    /// FRL (19:16): finish recommended limit, seconds.
    pub frl: u32,
    /// RRL1, RRL2, RRL3 (31:20): further reset recommended limits.
    pub rrl_n: [u32; 3],
    /// FRL1, FRL2, FRL3 (43:32): further finish recommended limits.
    pub frl_n: [u32; 3],
    /// NUMZRWA (47:44): number of ZRWA resources, 0's based.
    pub numzrwa: u32,
    /// ZRWAFG (49:48): ZRWA flush granularity, in logical blocks.
    pub zrwafg: u16,
    /// ZRWASZ (51:50): ZRWA size, in logical blocks.
    pub zrwasz: u16,
    /// ZRWACAP (52): ZRWA capability (bit 0 explicit ZRWA flush).
    pub zrwacap: u8,
    /// LBAFE0..LBAFE63 (from 2816): per LBA format zone size and extension size.
    pub lbafe: [ZoneFormatExtension; 64],
}

impl Default for ZnsNamespace {
    fn default() -> Self {
        Self::from_bytes(&[0u8; IDENTIFY_SIZE])
    }
}

impl ZnsNamespace {
    /// ZOC bit 0: variable zone capacity.
    pub const ZOC_VARIABLE_CAPACITY: u16 = 1 << 0;
    /// ZOC bit 1: zone active excursions.
    pub const ZOC_ZONE_ACTIVE_EXCURSIONS: u16 = 1 << 1;
    /// OZCS bit 0: reads may cross zone boundaries.
    pub const OZCS_READ_ACROSS_BOUNDARIES: u16 = 1 << 0;
    /// OZCS bit 1: zone random write areas supported.
    pub const OZCS_ZRWA: u16 = 1 << 1;
    /// ZRWACAP bit 0: explicit ZRWA flush supported.
    pub const ZRWACAP_EXPLICIT_FLUSH: u8 = 1 << 0;
    /// Byte offset of LBAFE0.
    pub const LBAFE_OFFSET: usize = 2816;

    /// ZOC bit 0.
    pub const fn variable_capacity(&self) -> bool {
        self.zoc & Self::ZOC_VARIABLE_CAPACITY != 0
    }

    /// ZOC bit 1.
    pub const fn zone_active_excursions(&self) -> bool {
        self.zoc & Self::ZOC_ZONE_ACTIVE_EXCURSIONS != 0
    }

    /// OZCS bit 0.
    pub const fn read_across_boundaries(&self) -> bool {
        self.ozcs & Self::OZCS_READ_ACROSS_BOUNDARIES != 0
    }

    /// OZCS bit 1.
    pub const fn zrwa_supported(&self) -> bool {
        self.ozcs & Self::OZCS_ZRWA != 0
    }

    /// ZRWACAP bit 0: the host may commit a zone random write area with
    /// Flush Explicit ZRWA Range.
    pub const fn zrwa_explicit_flush(&self) -> bool {
        self.zrwacap & Self::ZRWACAP_EXPLICIT_FLUSH != 0
    }

    /// ZRWA resources as a count (NUMZRWA is 0's based); 0 when zone random
    /// write areas are not supported.
    pub const fn zrwa_resources(&self) -> u64 {
        if self.zrwa_supported() {
            self.numzrwa as u64 + 1
        } else {
            0
        }
    }

    /// Zone geometry of the namespace's current LBA format.
    pub const fn current_zone_format(&self, ns: &IdentifyNamespace) -> ZoneFormatExtension {
        self.lbafe[ns.format_index() as usize]
    }

    /// The wire image.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut bx = zeroed();
        let b = &mut bx[..];
        put16(b, 0, self.zoc);
        put16(b, 2, self.ozcs);
        put32(b, 4, encode_limit(self.max_active));
        put32(b, 8, encode_limit(self.max_open));
        put32(b, 12, self.rrl);
        put32(b, 16, self.frl);
        for i in 0..3 {
            put32(b, 20 + 4 * i, self.rrl_n[i]);
            put32(b, 32 + 4 * i, self.frl_n[i]);
        }
        put32(b, 44, self.numzrwa);
        put16(b, 48, self.zrwafg);
        put16(b, 50, self.zrwasz);
        b[52] = self.zrwacap;
        for (i, e) in self.lbafe.iter().enumerate() {
            let o = Self::LBAFE_OFFSET + 16 * i;
            put64(b, o, e.zone_size);
            b[o + 8] = e.zdes;
        }
        bx
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut lbafe = [ZoneFormatExtension::default(); 64];
        for (i, e) in lbafe.iter_mut().enumerate() {
            let o = Self::LBAFE_OFFSET + 16 * i;
            *e = ZoneFormatExtension { zone_size: get64(b, o), zdes: b[o + 8] };
        }
        ZnsNamespace {
            zoc: get16(b, 0),
            ozcs: get16(b, 2),
            max_active: decode_limit(get32(b, 4)),
            max_open: decode_limit(get32(b, 8)),
            rrl: get32(b, 12),
            frl: get32(b, 16),
            rrl_n: [get32(b, 20), get32(b, 24), get32(b, 28)],
            frl_n: [get32(b, 32), get32(b, 36), get32(b, 40)],
            numzrwa: get32(b, 44),
            zrwafg: get16(b, 48),
            zrwasz: get16(b, 50),
            zrwacap: b[52],
            lbafe,
        }
    }
}

/// ZNS I/O Command Set specific Identify Controller (CNS 06h, CSI 02h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ZnsController {
    /// ZASL (0): zone append size limit, a power of two in units of the
    /// minimum memory page size; 0 = the MDTS limit applies.
    pub zasl: u8,
}

impl ZnsController {
    /// Zone Append size limit in bytes, given CAP.MPSMIN in bytes and the
    /// MDTS limit in bytes (`None` = no limit). `None` means no limit (or a
    /// limit beyond `u64`).
    pub const fn zasl_bytes(&self, mpsmin_bytes: u64, mdts_bytes: Option<u64>) -> Option<u64> {
        if self.zasl == 0 {
            return mdts_bytes;
        }
        if self.zasl >= 64 {
            return None;
        }
        mpsmin_bytes.checked_mul(1 << self.zasl)
    }

    /// The wire image.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = zeroed();
        b[0] = self.zasl;
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        ZnsController { zasl: b[0] }
    }
}

/// Identify I/O Command Set data structure (CNS 1Ch): 512 command set
/// combinations of 8 bytes, bit n of each set when CSI n is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoCommandSetVector {
    /// The combinations, by index.
    pub combinations: Box<[u64; 512]>,
}

impl Default for IoCommandSetVector {
    fn default() -> Self {
        IoCommandSetVector { combinations: Box::new([0u64; 512]) }
    }
}

impl IoCommandSetVector {
    /// Number of combinations.
    pub const COMBINATIONS: usize = 512;

    /// The bit of command set `csi` in a combination.
    pub const fn bit(csi: CommandSetId) -> u64 {
        1 << csi as u8
    }

    /// A vector whose combination 0 is NVM plus Zoned Namespace.
    pub fn nvm_and_zns() -> Self {
        let mut v = Self::default();
        v.combinations[0] = Self::bit(CommandSetId::Nvm) | Self::bit(CommandSetId::Zoned);
        v
    }

    /// Combination `index`; 0 (empty) outside the vector.
    pub fn combination(&self, index: u16) -> u64 {
        self.combinations.get(index as usize).copied().unwrap_or(0)
    }

    /// Sets combination `index`; false (and no change) outside the vector.
    pub fn set_combination(&mut self, index: u16, mask: u64) -> bool {
        match self.combinations.get_mut(index as usize) {
            Some(c) => {
                *c = mask;
                true
            }
            None => false,
        }
    }

    /// Whether combination `index` includes command set `csi`.
    pub fn contains(&self, index: u16, csi: CommandSetId) -> bool {
        self.combination(index) & Self::bit(csi) != 0
    }

    /// The wire image.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = zeroed();
        for (i, c) in self.combinations.iter().enumerate() {
            put64(&mut b[..], 8 * i, *c);
        }
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut v = Self::default();
        for (i, c) in v.combinations.iter_mut().enumerate() {
            *c = get64(b, 8 * i);
        }
        v
    }
}

/// Active namespace ID list (CNS 02h and 07h): up to 1024 NSIDs in increasing
/// order, terminated by a zero entry when shorter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ActiveNamespaceList {
    /// The NSIDs.
    pub ids: Vec<u32>,
}

impl ActiveNamespaceList {
    /// Most NSIDs one list holds.
    pub const MAX_ENTRIES: usize = 1024;

    /// The wire image: the first 1024 NSIDs (a zero NSID ends the list early).
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = zeroed();
        for (i, id) in self.ids.iter().take(Self::MAX_ENTRIES).enumerate() {
            put32(&mut b[..], 4 * i, *id);
        }
        b
    }

    /// Parses a wire image, stopping at the first zero entry.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let ids = (0..Self::MAX_ENTRIES).map(|i| get32(b, 4 * i)).take_while(|&id| id != 0);
        ActiveNamespaceList { ids: ids.collect() }
    }
}

/// One Namespace Identification Descriptor (CNS 03h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamespaceIdDescriptor {
    /// NIDT 1h: IEEE extended unique identifier (8 bytes).
    Eui64([u8; 8]),
    /// NIDT 2h: namespace globally unique identifier (16 bytes).
    Nguid([u8; 16]),
    /// NIDT 3h: namespace UUID (16 bytes).
    Uuid([u8; 16]),
    /// NIDT 4h: command set identifier (1 byte).
    Csi(u8),
}

impl NamespaceIdDescriptor {
    /// Size of the descriptor header (type, length, 2 reserved bytes).
    pub const HEADER_SIZE: usize = 4;

    /// NIDT: the type byte.
    pub const fn nidt(&self) -> u8 {
        match self {
            Self::Eui64(_) => 1,
            Self::Nguid(_) => 2,
            Self::Uuid(_) => 3,
            Self::Csi(_) => 4,
        }
    }

    /// NIDL: the length of the value.
    pub const fn nidl(&self) -> u8 {
        match self {
            Self::Eui64(_) => 8,
            Self::Nguid(_) | Self::Uuid(_) => 16,
            Self::Csi(_) => 1,
        }
    }

    /// The length a known type requires; `None` for other types.
    pub const fn length_of(nidt: u8) -> Option<u8> {
        match nidt {
            1 => Some(8),
            2 | 3 => Some(16),
            4 => Some(1),
            _ => None,
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Self::Eui64(v) => v,
            Self::Nguid(v) | Self::Uuid(v) => v,
            Self::Csi(v) => core::slice::from_ref(v),
        }
    }
}

/// The Namespace Identification Descriptor list (CNS 03h).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceIdDescriptorList {
    /// The descriptors, in order.
    pub descriptors: Vec<NamespaceIdDescriptor>,
}

impl NamespaceIdDescriptorList {
    /// The command set named by the first CSI descriptor.
    pub fn command_set(&self) -> Option<CommandSetId> {
        self.descriptors.iter().find_map(|d| match d {
            NamespaceIdDescriptor::Csi(v) => CommandSetId::from_raw(*v),
            _ => None,
        })
    }

    /// The wire image; descriptors that no longer fit in 4 KiB are dropped
    /// (at least 204 always fit).
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = zeroed();
        let mut o = 0;
        for d in &self.descriptors {
            let len = d.nidl() as usize;
            let end = o + NamespaceIdDescriptor::HEADER_SIZE + len;
            if end > IDENTIFY_SIZE {
                break;
            }
            b[o] = d.nidt();
            b[o + 1] = d.nidl();
            b[o + 4..end].copy_from_slice(d.value());
            o = end;
        }
        b
    }

    /// Parses a wire image, stopping at a descriptor of type 0 (or the end).
    /// Descriptors of unknown types are skipped using their length.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Result<Self, IdentifyError> {
        let mut descriptors = Vec::new();
        let mut o = 0;
        while o + NamespaceIdDescriptor::HEADER_SIZE <= IDENTIFY_SIZE {
            let (nidt, nidl) = (b[o], b[o + 1]);
            if nidt == 0 {
                break;
            }
            let start = o + NamespaceIdDescriptor::HEADER_SIZE;
            let end = start + nidl as usize;
            if end > IDENTIFY_SIZE {
                return Err(IdentifyError::DescriptorOverrun { offset: o });
            }
            if let Some(expected) = NamespaceIdDescriptor::length_of(nidt) {
                if nidl != expected {
                    return Err(IdentifyError::DescriptorLength { nidt, nidl, expected });
                }
                let v = &b[start..end];
                descriptors.push(match nidt {
                    1 => NamespaceIdDescriptor::Eui64(array(v, 0)),
                    2 => NamespaceIdDescriptor::Nguid(array(v, 0)),
                    3 => NamespaceIdDescriptor::Uuid(array(v, 0)),
                    _ => NamespaceIdDescriptor::Csi(v[0]),
                });
            }
            o = end;
        }
        Ok(NamespaceIdDescriptorList { descriptors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(b: &[u8], off: usize, want: &[u8]) {
        assert_eq!(&b[off..off + want.len()], want, "bytes at offset {off}");
    }

    #[test]
    fn cns_values() {
        let all = [
            (Cns::Namespace, 0x00),
            (Cns::Controller, 0x01),
            (Cns::ActiveNamespaces, 0x02),
            (Cns::NamespaceIdDescriptors, 0x03),
            (Cns::CsiNamespace, 0x05),
            (Cns::CsiController, 0x06),
            (Cns::CsiActiveNamespaces, 0x07),
            (Cns::IoCommandSetIndependentNamespace, 0x08),
            (Cns::IoCommandSets, 0x1C),
        ];
        for (c, v) in all {
            assert_eq!(c as u8, v);
            assert_eq!(Cns::from_raw(v), Some(c));
        }
        assert_eq!(Cns::from_raw(0x04), None);
        assert_eq!(Cns::from_raw(0xFF), None);
        assert!(Cns::CsiNamespace.uses_csi() && !Cns::Namespace.uses_csi());
    }

    fn sample_controller() -> IdentifyController {
        let mut power_states = [PowerStateDescriptor::default(); 32];
        power_states[0] = PowerStateDescriptor {
            max_power: 0x09C4,
            flags: PowerStateDescriptor::MXPS,
            entry_latency_us: 0x1020_3040,
            exit_latency_us: 0x5060_7080,
            rrt: 1,
            rrl: 2,
            rwt: 3,
            rwl: 4,
            idle_power: 0x0A0B,
            ips: 0x40,
            active_power: 0x0C0D,
            apw_aps: 0x82,
        };
        power_states[31].max_power = 0x7777;
        IdentifyController {
            vid: 0x1B36,
            ssvid: 0x1AF4,
            serial_number: "ZNSKIT-0001".into(),
            model_number: "znskit emulated ZNS".into(),
            firmware_revision: "1.0".into(),
            rab: 6,
            ieee: [0x11, 0x22, 0x33],
            cmic: 0x0A,
            mdts: 5,
            cntlid: 0x0102,
            ver: Version::V2_0_0,
            rtd3r: 0x0A0B_0C0D,
            rtd3e: 0x1A1B_1C1D,
            oaes: 0x2A2B_2C2D,
            ctratt: 0x3A3B_3C3D,
            cntrltype: IdentifyController::CNTRLTYPE_IO,
            oacs: 0x4142,
            acl: 3,
            aerl: 4,
            frmw: 0x17,
            lpa: 0x0E,
            elpe: 63,
            npss: 1,
            endgidmax: 0x5A5B,
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: 0x5152,
            nn: 0x6162_6364,
            oncs: Oncs(Oncs::COPY | Oncs::WRITE_ZEROES | Oncs::SAVE_SELECT_FEATURES),
            fuses: 0x7172,
            fna: 0x07,
            vwc: 0x05,
            awun: 0x8182,
            awupf: 0x9192,
            icsvscc: 0x01,
            nwpc: 0x03,
            acwu: 0xA1A2,
            ocfs: IdentifyController::OCFS_FORMAT0,
            sgls: 0xB1B2_B3B4,
            mnan: 0xC1C2_C3C4,
            subnqn: "nqn.2024-01.io.znskit:ctrl0".into(),
            ioccsz: 0xD1D2_D3D4,
            iorcsz: 0xE1E2_E3E4,
            icdoff: 0xF1F2,
            fcatt: 0x01,
            msdbd: 0x02,
            ofcs: 0x0001,
            power_states,
        }
    }

    #[test]
    fn controller_fields_sit_at_their_offsets() {
        let c = sample_controller();
        let b = c.to_bytes();
        at(&b[..], 0, &0x1B36u16.to_le_bytes());
        at(&b[..], 2, &0x1AF4u16.to_le_bytes());
        at(&b[..], 4, b"ZNSKIT-0001         ");
        at(&b[..], 24, b"znskit emulated ZNS                     ");
        at(&b[..], 64, b"1.0     ");
        at(&b[..], 72, &[6, 0x11, 0x22, 0x33, 0x0A, 5]);
        at(&b[..], 78, &0x0102u16.to_le_bytes());
        at(&b[..], 80, &0x0002_0000u32.to_le_bytes());
        at(&b[..], 84, &0x0A0B_0C0Du32.to_le_bytes());
        at(&b[..], 88, &0x1A1B_1C1Du32.to_le_bytes());
        at(&b[..], 92, &0x2A2B_2C2Du32.to_le_bytes());
        at(&b[..], 96, &0x3A3B_3C3Du32.to_le_bytes());
        at(&b[..], 340, &0x5A5Bu16.to_le_bytes());
        // FDPS is CTRATT bit 19, EGS bit 4.
        assert_eq!(IdentifyController::CTRATT_FDPS, 0x0008_0000);
        assert_eq!(IdentifyController::CTRATT_ENDURANCE_GROUPS, 0x10);
        at(&b[..], 111, &[1]);
        at(&b[..], 256, &0x4142u16.to_le_bytes());
        at(&b[..], 258, &[3, 4, 0x17, 0x0E, 63, 1]);
        at(&b[..], 512, &[0x66, 0x44]);
        at(&b[..], 514, &0x5152u16.to_le_bytes());
        at(&b[..], 516, &0x6162_6364u32.to_le_bytes());
        at(&b[..], 520, &0x0118u16.to_le_bytes());
        at(&b[..], 522, &0x7172u16.to_le_bytes());
        at(&b[..], 524, &[0x07, 0x05]);
        at(&b[..], 526, &0x8182u16.to_le_bytes());
        at(&b[..], 528, &0x9192u16.to_le_bytes());
        at(&b[..], 530, &[0x01, 0x03]);
        at(&b[..], 532, &0xA1A2u16.to_le_bytes());
        at(&b[..], 534, &0x0001u16.to_le_bytes());
        at(&b[..], 536, &0xB1B2_B3B4u32.to_le_bytes());
        at(&b[..], 540, &0xC1C2_C3C4u32.to_le_bytes());
        at(&b[..], 768, b"nqn.2024-01.io.znskit:ctrl0\0");
        at(&b[..], 1792, &0xD1D2_D3D4u32.to_le_bytes());
        at(&b[..], 1796, &0xE1E2_E3E4u32.to_le_bytes());
        at(&b[..], 1800, &[0xF2, 0xF1, 0x01, 0x02, 0x01, 0x00]);
        at(&b[..], 2048, &0x09C4u16.to_le_bytes());
        at(&b[..], 2050, &[0, 1]);
        at(&b[..], 2052, &0x1020_3040u32.to_le_bytes());
        at(&b[..], 2056, &0x5060_7080u32.to_le_bytes());
        at(&b[..], 2060, &[1, 2, 3, 4, 0x0B, 0x0A, 0x40, 0, 0x0D, 0x0C, 0x82, 0]);
        at(&b[..], 2048 + 31 * 32, &0x7777u16.to_le_bytes());
        // Everything not written above stays zero.
        assert!(b[100..111].iter().chain(&b[112..256]).all(|&x| x == 0));
        assert!(b[264..340].iter().chain(&b[342..512]).chain(&b[544..768]).all(|&x| x == 0));
        assert!(b[1024..1792].iter().chain(&b[1806..2048]).all(|&x| x == 0));
        assert!(b[3072..].iter().all(|&x| x == 0));
        assert_eq!(IdentifyController::from_bytes(&b), c);
    }

    #[test]
    fn controller_strings_trim_and_sanitize() {
        let c = IdentifyController {
            serial_number: "this serial number is far too long".into(),
            model_number: "caf\u{e9}".into(),
            ..Default::default()
        };
        let b = c.to_bytes();
        at(&b[..], 4, b"this serial number i");
        at(&b[..], 24, b"caf? ");
        let mut raw = *b;
        raw[64..72].copy_from_slice(b"  2.1\0\0\0");
        let back = IdentifyController::from_bytes(&raw);
        assert_eq!(back.serial_number, "this serial number i");
        assert_eq!(back.firmware_revision, "2.1");
        assert_eq!(back.subnqn, "");
        // A 300-byte NQN keeps its terminator.
        let long = IdentifyController { subnqn: "q".repeat(300), ..Default::default() };
        let b = long.to_bytes();
        assert_eq!(b[1023], 0);
        assert_eq!(IdentifyController::from_bytes(&b).subnqn.len(), 255);
    }

    #[test]
    fn controller_transfer_limit() {
        let mut c = IdentifyController::default();
        assert_eq!(c.max_transfer_bytes(4096), None);
        c.mdts = 5;
        assert_eq!(c.max_transfer_bytes(4096), Some(128 * 1024));
        c.mdts = 63;
        assert_eq!(c.max_transfer_bytes(4096), None);
        assert!(Oncs(0x1FF).has(Oncs::COPY | Oncs::VERIFY));
        assert_eq!(Oncs::COPY, 0x100);
    }

    #[test]
    fn lba_format_bits() {
        let f =
            LbaFormat { metadata_size: 0x0810, lba_data_size_log2: 12, relative_performance: 2 };
        assert_eq!(f.to_bytes(), [0x10, 0x08, 12, 2]);
        assert_eq!(LbaFormat::from_bytes(&f.to_bytes()), f);
        assert_eq!(LbaFormat::from_bytes(&[0, 0, 9, 0xFF]).relative_performance, 3);
        assert_eq!(f.data_size(), Some(4096));
        assert_eq!(LbaFormat::default().data_size(), None);
        assert_eq!(LbaFormat::from_bytes(&[0, 0, 200, 0]).data_size(), None);
        assert_eq!(LbaFormat::with_block_size(512).lba_data_size_log2, 9);
        assert_eq!(LbaFormat::with_block_size(4096).lba_data_size_log2, 12);
    }

    fn sample_namespace() -> IdentifyNamespace {
        let mut lbaf = [LbaFormat::default(); 64];
        lbaf[0] = LbaFormat::with_block_size(512);
        lbaf[1] = LbaFormat::with_block_size(4096);
        lbaf[63] = LbaFormat { metadata_size: 8, lba_data_size_log2: 12, relative_performance: 1 };
        IdentifyNamespace {
            nsze: 0x0102_0304_0506_0708,
            ncap: 0x1112_1314_1516_1718,
            nuse: 0x2122_2324_2526_2728,
            nsfeat: 0x31,
            nlbaf: 0x32,
            flbas: IdentifyNamespace::encode_flbas(1, false),
            mc: 0x33,
            dpc: 0x34,
            dps: 0x35,
            nmic: 0x36,
            rescap: 0x37,
            fpi: 0x38,
            dlfeat: 0x39,
            nawun: 0x4142,
            nawupf: 0x4344,
            nacwu: 0x4546,
            nabsn: 0x4748,
            nabo: 0x494A,
            nabspf: 0x4B4C,
            noiob: 0x4D4E,
            nvmcap: 0x5152_5354_5556_5758_595A_5B5C_5D5E_5F60,
            npwg: 0x6162,
            npwa: 0x6364,
            npdg: 0x6566,
            npda: 0x6768,
            nows: 0x696A,
            mssrl: 0x7172,
            mcl: 0x7374_7576,
            msrc: 0x77,
            nulbaf: 0x78,
            anagrpid: 0x8182_8384,
            nsattr: 0x01,
            nvmsetid: 0x9192,
            endgid: 0x9394,
            nguid: [0xA0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xAF],
            eui64: [0xE0, 1, 2, 3, 4, 5, 6, 0xE7],
            lbaf,
        }
    }

    #[test]
    fn namespace_fields_sit_at_their_offsets() {
        let n = sample_namespace();
        let b = n.to_bytes();
        at(&b[..], 0, &0x0102_0304_0506_0708u64.to_le_bytes());
        at(&b[..], 8, &0x1112_1314_1516_1718u64.to_le_bytes());
        at(&b[..], 16, &0x2122_2324_2526_2728u64.to_le_bytes());
        at(&b[..], 24, &[0x31, 0x32, 0x01, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39]);
        at(&b[..], 34, &0x4142u16.to_le_bytes());
        at(&b[..], 36, &0x4344u16.to_le_bytes());
        at(&b[..], 38, &0x4546u16.to_le_bytes());
        at(&b[..], 40, &0x4748u16.to_le_bytes());
        at(&b[..], 42, &0x494Au16.to_le_bytes());
        at(&b[..], 44, &0x4B4Cu16.to_le_bytes());
        at(&b[..], 46, &0x4D4Eu16.to_le_bytes());
        at(&b[..], 48, &0x5152_5354_5556_5758_595A_5B5C_5D5E_5F60u128.to_le_bytes());
        at(&b[..], 64, &0x6162u16.to_le_bytes());
        at(&b[..], 66, &0x6364u16.to_le_bytes());
        at(&b[..], 68, &0x6566u16.to_le_bytes());
        at(&b[..], 70, &0x6768u16.to_le_bytes());
        at(&b[..], 72, &0x696Au16.to_le_bytes());
        at(&b[..], 74, &0x7172u16.to_le_bytes());
        at(&b[..], 76, &0x7374_7576u32.to_le_bytes());
        at(&b[..], 80, &[0x77, 0, 0x78, 0]);
        at(&b[..], 92, &0x8182_8384u32.to_le_bytes());
        at(&b[..], 99, &[0x01]);
        at(&b[..], 100, &0x9192u16.to_le_bytes());
        at(&b[..], 102, &0x9394u16.to_le_bytes());
        at(&b[..], 104, &n.nguid);
        at(&b[..], 120, &n.eui64);
        at(&b[..], 128, &[0, 0, 9, 0]);
        at(&b[..], 132, &[0, 0, 12, 0]);
        at(&b[..], 128 + 63 * 4, &[8, 0, 12, 1]);
        assert!(b[84..92].iter().chain(&b[96..99]).all(|&x| x == 0));
        assert!(b[384..].iter().all(|&x| x == 0));
        assert_eq!(IdentifyNamespace::from_bytes(&b), n);
    }

    #[test]
    fn namespace_format_index_uses_upper_bits() {
        let mut n = sample_namespace();
        assert_eq!(n.format_index(), 1);
        assert_eq!(n.block_size(), Some(4096));
        n.flbas = IdentifyNamespace::encode_flbas(63, true);
        assert_eq!(n.flbas, 0b0111_1111);
        assert_eq!(n.format_index(), 63);
        assert!(n.metadata_extended());
        assert_eq!(n.current_lba_format().metadata_size, 8);
        n.flbas = IdentifyNamespace::encode_flbas(17, false);
        assert_eq!(n.flbas, 0b0010_0001);
        assert_eq!(n.format_index(), 17);
        assert_eq!(n.block_size(), None);
        assert_eq!(IdentifyNamespace::default().format_index(), 0);
    }

    #[test]
    fn zns_namespace_fields_sit_at_their_offsets() {
        let mut lbafe = [ZoneFormatExtension::default(); 64];
        lbafe[0] = ZoneFormatExtension { zone_size: 0x0102_0304_0506_0708, zdes: 2 };
        lbafe[63] = ZoneFormatExtension { zone_size: 0x8000, zdes: 0x11 };
        let z = ZnsNamespace {
            zoc: ZnsNamespace::ZOC_VARIABLE_CAPACITY | ZnsNamespace::ZOC_ZONE_ACTIVE_EXCURSIONS,
            ozcs: ZnsNamespace::OZCS_READ_ACROSS_BOUNDARIES,
            max_active: Some(14),
            max_open: None,
            rrl: 0x2122_2324,
            frl: 0x3132_3334,
            rrl_n: [0x4142_4344, 0x4546_4748, 0x494A_4B4C],
            frl_n: [0x5152_5354, 0x5556_5758, 0x595A_5B5C],
            numzrwa: 0x6162_6364,
            zrwafg: 0x7172,
            zrwasz: 0x7374,
            zrwacap: ZnsNamespace::ZRWACAP_EXPLICIT_FLUSH,
            lbafe,
        };
        let b = z.to_bytes();
        at(&b[..], 0, &[0x03, 0, 0x01, 0]);
        at(&b[..], 4, &13u32.to_le_bytes());
        at(&b[..], 8, &u32::MAX.to_le_bytes());
        at(&b[..], 12, &0x2122_2324u32.to_le_bytes());
        at(&b[..], 16, &0x3132_3334u32.to_le_bytes());
        at(&b[..], 20, &0x4142_4344u32.to_le_bytes());
        at(&b[..], 24, &0x4546_4748u32.to_le_bytes());
        at(&b[..], 28, &0x494A_4B4Cu32.to_le_bytes());
        at(&b[..], 32, &0x5152_5354u32.to_le_bytes());
        at(&b[..], 36, &0x5556_5758u32.to_le_bytes());
        at(&b[..], 40, &0x595A_5B5Cu32.to_le_bytes());
        at(&b[..], 44, &0x6162_6364u32.to_le_bytes());
        at(&b[..], 48, &0x7172u16.to_le_bytes());
        at(&b[..], 50, &0x7374u16.to_le_bytes());
        at(&b[..], 52, &[1]);
        at(&b[..], 2816, &0x0102_0304_0506_0708u64.to_le_bytes());
        at(&b[..], 2824, &[2]);
        at(&b[..], 2816 + 63 * 16, &0x8000u64.to_le_bytes());
        at(&b[..], 2816 + 63 * 16 + 8, &[0x11]);
        assert!(b[53..2816].iter().all(|&x| x == 0));
        assert!(b[2825..2832].iter().all(|&x| x == 0));
        assert!(b[3840..].iter().all(|&x| x == 0));
        let back = ZnsNamespace::from_bytes(&b);
        assert_eq!(back, z);
        assert!(back.variable_capacity() && back.zone_active_excursions());
        assert!(back.read_across_boundaries() && !back.zrwa_supported());
        assert!(back.zrwa_explicit_flush());
        assert_eq!(back.zrwa_resources(), 0, "NUMZRWA means nothing without ZRWASUP");
        let zrwa = ZnsNamespace { ozcs: ZnsNamespace::OZCS_ZRWA, numzrwa: 3, ..back };
        let b = ZnsNamespace::from_bytes(&zrwa.to_bytes());
        assert!(b.zrwa_supported() && !b.read_across_boundaries());
        assert_eq!(b.zrwa_resources(), 4);
        assert_eq!(back.lbafe[0].extension_bytes(), 128);
        let ns = IdentifyNamespace { flbas: 0x7F, ..Default::default() };
        assert_eq!(back.current_zone_format(&ns).zone_size, 0x8000);
    }

    #[test]
    fn zns_resource_limits() {
        let mut z =
            ZnsNamespace { max_active: Some(1), max_open: Some(u32::MAX), ..Default::default() };
        let b = z.to_bytes();
        at(&b[..], 4, &0u32.to_le_bytes());
        at(&b[..], 8, &0xFFFF_FFFEu32.to_le_bytes());
        assert_eq!(ZnsNamespace::from_bytes(&b), z);
        z.max_active = Some(0);
        assert_eq!(ZnsNamespace::from_bytes(&z.to_bytes()).max_active, Some(1));
        assert_eq!(ZnsNamespace::from_bytes(&[0xFF; 4096]).max_open, None);
    }

    #[test]
    fn zns_controller_and_append_limit() {
        let c = ZnsController { zasl: 5 };
        let b = c.to_bytes();
        at(&b[..], 0, &[5]);
        assert!(b[1..].iter().all(|&x| x == 0));
        assert_eq!(ZnsController::from_bytes(&b), c);
        assert_eq!(c.zasl_bytes(4096, Some(1 << 20)), Some(128 * 1024));
        assert_eq!(ZnsController { zasl: 0 }.zasl_bytes(4096, Some(1 << 20)), Some(1 << 20));
        assert_eq!(ZnsController { zasl: 0 }.zasl_bytes(4096, None), None);
        assert_eq!(ZnsController { zasl: 60 }.zasl_bytes(4096, None), None);
        assert_eq!(ZnsController { zasl: 200 }.zasl_bytes(4096, None), None);
    }

    #[test]
    fn command_set_vector() {
        let mut v = IoCommandSetVector::nvm_and_zns();
        assert!(v.contains(0, CommandSetId::Nvm) && v.contains(0, CommandSetId::Zoned));
        assert!(!v.contains(0, CommandSetId::KeyValue) && !v.contains(1, CommandSetId::Nvm));
        assert!(v.set_combination(511, 0x0102_0304_0506_0708));
        assert!(!v.set_combination(512, 1));
        assert_eq!(v.combination(600), 0);
        let b = v.to_bytes();
        at(&b[..], 0, &0b101u64.to_le_bytes());
        at(&b[..], 511 * 8, &0x0102_0304_0506_0708u64.to_le_bytes());
        assert!(b[8..511 * 8].iter().all(|&x| x == 0));
        assert_eq!(IoCommandSetVector::from_bytes(&b), v);
    }

    #[test]
    fn active_namespace_list() {
        let l = ActiveNamespaceList { ids: vec![1, 2, 0x0A0B_0C0D] };
        let b = l.to_bytes();
        at(&b[..], 0, &1u32.to_le_bytes());
        at(&b[..], 4, &2u32.to_le_bytes());
        at(&b[..], 8, &0x0A0B_0C0Du32.to_le_bytes());
        assert!(b[12..].iter().all(|&x| x == 0));
        assert_eq!(ActiveNamespaceList::from_bytes(&b), l);
        let full = ActiveNamespaceList { ids: (1..=1100).collect() };
        assert_eq!(ActiveNamespaceList::from_bytes(&full.to_bytes()).ids.len(), 1024);
    }

    #[test]
    fn namespace_id_descriptors() {
        let l = NamespaceIdDescriptorList {
            descriptors: vec![
                NamespaceIdDescriptor::Eui64([1, 2, 3, 4, 5, 6, 7, 8]),
                NamespaceIdDescriptor::Nguid([0x20; 16]),
                NamespaceIdDescriptor::Uuid([0x30; 16]),
                NamespaceIdDescriptor::Csi(CommandSetId::Zoned as u8),
            ],
        };
        let b = l.to_bytes();
        at(&b[..], 0, &[1, 8, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        at(&b[..], 12, &[2, 16, 0, 0]);
        at(&b[..], 16, &[0x20; 16]);
        at(&b[..], 32, &[3, 16, 0, 0]);
        at(&b[..], 36, &[0x30; 16]);
        at(&b[..], 52, &[4, 1, 0, 0, 2]);
        assert!(b[57..].iter().all(|&x| x == 0));
        let back = NamespaceIdDescriptorList::from_bytes(&b).unwrap();
        assert_eq!(back, l);
        assert_eq!(back.command_set(), Some(CommandSetId::Zoned));
    }

    #[test]
    fn namespace_id_descriptor_errors_and_unknown_types() {
        let mut b = [0u8; 4096];
        b[0..4].copy_from_slice(&[1, 7, 0, 0]);
        assert_eq!(
            NamespaceIdDescriptorList::from_bytes(&b),
            Err(IdentifyError::DescriptorLength { nidt: 1, nidl: 7, expected: 8 })
        );
        // Unknown type 9 with a 2-byte value is skipped.
        b[0..10].copy_from_slice(&[9, 2, 0, 0, 0xAA, 0xBB, 4, 1, 0, 0]);
        b[10] = 0;
        let l = NamespaceIdDescriptorList::from_bytes(&b).unwrap();
        assert_eq!(l.descriptors, vec![NamespaceIdDescriptor::Csi(0)]);
        let mut b = [0u8; 4096];
        b[0..4].copy_from_slice(&[9, 255, 0, 0]);
        b[259..263].copy_from_slice(&[9, 255, 0, 0]);
        // Skips from 0 to 259, 259 to 518, then type 0 ends the list.
        assert!(NamespaceIdDescriptorList::from_bytes(&b).unwrap().descriptors.is_empty());
        let mut b = [0u8; 4096];
        b[4092..4096].copy_from_slice(&[2, 16, 0, 0]);
        let mut o = 0;
        while o < 4092 {
            b[o..o + 4].copy_from_slice(&[9, 0, 0, 0]);
            o += 4;
        }
        assert_eq!(
            NamespaceIdDescriptorList::from_bytes(&b),
            Err(IdentifyError::DescriptorOverrun { offset: 4092 })
        );
        // Every byte pattern parses without panicking.
        for fill in [0u8, 1, 4, 0xFF] {
            let _ = NamespaceIdDescriptorList::from_bytes(&[fill; 4096]);
        }
    }
}
