//! NVMe/TCP transport PDUs: the 8-byte common header, connection
//! initialization (ICReq, ICResp), command and response capsules, data
//! transfer (H2CData, C2HData, R2T), termination requests, and the CRC32C
//! header and data digests.
//!
//! Every PDU starts with the common header: PDU-Type (0), FLAGS (1), HLEN
//! (2, the header length without digest), PDO (3, where data starts; 0 for
//! a PDU without data), PLEN (7:4, the whole PDU with digests). The
//! PDU-specific header follows up to HLEN; then the header digest (4
//! bytes, when enabled and the type carries one), padding up to PDO, the
//! data, and the data digest (4 bytes, when enabled).
//!
//! [`CommonHeader::layout`] checks a received header against the
//! connection's negotiated digests and limits and says where the data is;
//! its errors name the fatal error status and field offset a termination
//! request reports.

/// Size of the common header.
pub const COMMON_HEADER_SIZE: usize = 8;
/// Size of a digest.
pub const DIGEST_SIZE: usize = 4;
/// Header length of ICReq and ICResp (they never carry digests).
pub const IC_PDU_SIZE: usize = 128;
/// Header length of a command capsule: the common header and a 64-byte
/// submission entry.
pub const CAPSULE_CMD_HLEN: usize = 72;
/// Header length of a response capsule, of H2CData, C2HData and R2T, and
/// of termination requests.
pub const SHORT_HLEN: usize = 24;
/// Most bytes of the offending PDU a termination request carries.
pub const TERM_REQ_MAX_DATA: usize = 152 - SHORT_HLEN;

/// FLAGS bit 0 (HDGSTF): a header digest follows the header.
pub const FLAG_HDGST: u8 = 1 << 0;
/// FLAGS bit 1 (DDGSTF): a data digest follows the data.
pub const FLAG_DDGST: u8 = 1 << 1;
/// FLAGS bit 2 of H2CData and C2HData (LAST_PDU): the last data PDU of the
/// command (or of the R2T it answers).
pub const FLAG_DATA_LAST: u8 = 1 << 2;
/// FLAGS bit 3 of C2HData (SUCCESS): the command succeeded and no
/// response capsule follows.
pub const FLAG_DATA_SUCCESS: u8 = 1 << 3;

/// The PDU types.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PduType {
    /// 00h Initialize Connection Request (host to controller).
    IcReq,
    /// 01h Initialize Connection Response.
    IcResp,
    /// 02h Host to Controller Terminate Connection Request.
    H2cTermReq,
    /// 03h Controller to Host Terminate Connection Request.
    C2hTermReq,
    /// 04h Command Capsule.
    CapsuleCmd,
    /// 05h Response Capsule.
    CapsuleResp,
    /// 06h Host to Controller Data.
    H2cData,
    /// 07h Controller to Host Data.
    C2hData,
    /// 09h Ready to Transfer.
    R2t,
}

impl PduType {
    /// The PDU-Type byte.
    pub const fn raw(self) -> u8 {
        match self {
            PduType::IcReq => 0x00,
            PduType::IcResp => 0x01,
            PduType::H2cTermReq => 0x02,
            PduType::C2hTermReq => 0x03,
            PduType::CapsuleCmd => 0x04,
            PduType::CapsuleResp => 0x05,
            PduType::H2cData => 0x06,
            PduType::C2hData => 0x07,
            PduType::R2t => 0x09,
        }
    }

    /// From the PDU-Type byte; `None` for a reserved value.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => PduType::IcReq,
            0x01 => PduType::IcResp,
            0x02 => PduType::H2cTermReq,
            0x03 => PduType::C2hTermReq,
            0x04 => PduType::CapsuleCmd,
            0x05 => PduType::CapsuleResp,
            0x06 => PduType::H2cData,
            0x07 => PduType::C2hData,
            0x09 => PduType::R2t,
            _ => return None,
        })
    }

    /// The header length (HLEN) every PDU of this type has.
    pub const fn hlen(self) -> usize {
        match self {
            PduType::IcReq | PduType::IcResp => IC_PDU_SIZE,
            PduType::CapsuleCmd => CAPSULE_CMD_HLEN,
            _ => SHORT_HLEN,
        }
    }

    /// Whether the type carries a header digest when header digests are
    /// enabled (all but the connection and termination PDUs).
    pub const fn digested(self) -> bool {
        !matches!(
            self,
            PduType::IcReq | PduType::IcResp | PduType::H2cTermReq | PduType::C2hTermReq
        )
    }

    /// Whether the type may carry data (after PDO).
    pub const fn may_carry_data(self) -> bool {
        matches!(self, PduType::CapsuleCmd | PduType::H2cData | PduType::C2hData)
    }
}

/// Fatal error status (FES) of a termination request.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FatalError {
    /// 01h Invalid PDU Header Field (FEI: the field's byte offset).
    InvalidHeaderField,
    /// 02h PDU Sequence Error.
    SequenceError,
    /// 03h Header Digest Error.
    HeaderDigest,
    /// 04h Data Transfer Out of Range.
    DataOutOfRange,
    /// 05h Data Transfer Limit Exceeded: a PDU carries more data than the
    /// receiver allows (MAXH2CDATA, the in-capsule data size).
    DataLimitExceeded,
    /// 06h Unsupported Parameter (FEI: the field's byte offset).
    UnsupportedParameter,
}

impl FatalError {
    /// The FES value.
    pub const fn raw(self) -> u16 {
        match self {
            FatalError::InvalidHeaderField => 1,
            FatalError::SequenceError => 2,
            FatalError::HeaderDigest => 3,
            FatalError::DataOutOfRange => 4,
            FatalError::DataLimitExceeded => 5,
            FatalError::UnsupportedParameter => 6,
        }
    }

    /// From the FES value.
    pub const fn from_raw(v: u16) -> Option<Self> {
        Some(match v {
            1 => FatalError::InvalidHeaderField,
            2 => FatalError::SequenceError,
            3 => FatalError::HeaderDigest,
            4 => FatalError::DataOutOfRange,
            5 => FatalError::DataLimitExceeded,
            6 => FatalError::UnsupportedParameter,
            _ => return None,
        })
    }
}

/// A PDU that breaks the transport's rules: the connection must end.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PduError {
    /// A reserved PDU-Type.
    #[error("unknown PDU type {0:#04x}")]
    UnknownType(u8),
    /// A PDU type the receiver does not accept in this direction or state.
    #[error("unexpected {0:?} PDU")]
    Unexpected(PduType),
    /// HLEN is not the type's fixed header length.
    #[error("{pdu:?} PDU with HLEN {hlen} (must be {expected})")]
    HeaderLength {
        /// The type.
        pdu: PduType,
        /// HLEN received.
        hlen: u8,
        /// HLEN of the type.
        expected: usize,
    },
    /// The HDGSTF or DDGSTF flag disagrees with what the connection negotiated.
    #[error("{pdu:?} PDU digest flags {flags:#04x} disagree with the negotiated digests")]
    DigestFlags {
        /// The type.
        pdu: PduType,
        /// FLAGS received.
        flags: u8,
    },
    /// PDO does not fit the header, or a PDU without data names one.
    #[error("{pdu:?} PDU with data offset {pdo} (header ends at {header_end})")]
    DataOffset {
        /// The type.
        pdu: PduType,
        /// PDO received.
        pdo: u8,
        /// Where header and header digest end.
        header_end: usize,
    },
    /// PLEN is shorter than the parts it must hold, or longer than allowed.
    #[error("{pdu:?} PDU with PLEN {plen} (allowed {min}..={max})")]
    PduLength {
        /// The type.
        pdu: PduType,
        /// PLEN received.
        plen: u32,
        /// Least PLEN this header allows.
        min: usize,
        /// Most PLEN this connection accepts.
        max: usize,
    },
    /// The header digest does not match the header.
    #[error("{pdu:?} PDU header digest {got:#010x}, computed {computed:#010x}")]
    HeaderDigest {
        /// The type.
        pdu: PduType,
        /// Digest received.
        got: u32,
        /// Digest of the received header.
        computed: u32,
    },
    /// The PDU carries more data than the receiver allows for its type
    /// (MAXH2CDATA for H2CData, the in-capsule data size for a command
    /// capsule, the largest transfer asked for on the host).
    #[error("{pdu:?} PDU with {len} bytes of data (at most {max} allowed)")]
    DataLimit {
        /// The type.
        pdu: PduType,
        /// Data bytes the PDU's PLEN implies.
        len: usize,
        /// Most data bytes allowed.
        max: usize,
    },
    /// The data digest does not match the data.
    #[error("{pdu:?} PDU data digest {got:#010x}, computed {computed:#010x}")]
    DataDigest {
        /// The type.
        pdu: PduType,
        /// Digest received.
        got: u32,
        /// Digest of the received data.
        computed: u32,
    },
    /// A field of the PDU-specific header holds a value the receiver
    /// cannot accept.
    #[error("{what} (byte {offset} of the PDU)")]
    Field {
        /// What is wrong.
        what: &'static str,
        /// The field's byte offset.
        offset: u32,
        /// Unsupported (rather than invalid).
        unsupported: bool,
    },
    /// Data outside the range the command or R2T allows.
    #[error("data offset {offset} + length {len} outside the {limit} bytes expected")]
    DataOutOfRange {
        /// DATAO received.
        offset: u32,
        /// DATAL received.
        len: u32,
        /// Bytes the transfer allows.
        limit: u32,
    },
}

impl PduError {
    /// The fatal error status and information a termination request
    /// reporting this error carries.
    pub fn fatal(&self) -> (FatalError, u32) {
        match self {
            PduError::UnknownType(_) => (FatalError::InvalidHeaderField, 0),
            PduError::Unexpected(_) => (FatalError::SequenceError, 0),
            PduError::HeaderLength { .. } => (FatalError::InvalidHeaderField, 2),
            PduError::DigestFlags { .. } => (FatalError::InvalidHeaderField, 1),
            PduError::DataOffset { .. } => (FatalError::InvalidHeaderField, 3),
            PduError::PduLength { .. } => (FatalError::InvalidHeaderField, 4),
            PduError::HeaderDigest { .. } => (FatalError::HeaderDigest, 0),
            // Not fatal where the command is known (the target answers
            // Transient Transport Error); fatal only where it is not.
            PduError::DataDigest { .. } => (FatalError::InvalidHeaderField, 0),
            PduError::DataLimit { .. } => (FatalError::DataLimitExceeded, 0),
            PduError::Field { offset, unsupported, .. } => (
                if *unsupported {
                    FatalError::UnsupportedParameter
                } else {
                    FatalError::InvalidHeaderField
                },
                *offset,
            ),
            PduError::DataOutOfRange { .. } => (FatalError::DataOutOfRange, 0),
        }
    }
}

/// CRC32C of `bytes`, as header and data digests carry it (little-endian
/// on the wire): [`crate::crc::crc32c`].
#[inline]
pub fn digest(bytes: &[u8]) -> u32 {
    crate::crc::crc32c(bytes)
}

/// CRC32C continued over more bytes (a data digest over data sent in pieces).
#[inline]
pub fn digest_append(crc: u32, bytes: &[u8]) -> u32 {
    crate::crc::crc32c_append(crc, bytes)
}

/// Which digests a connection negotiated (ICReq DGST, accepted by ICResp).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Digests {
    /// Header digests on every PDU that carries one.
    pub header: bool,
    /// Data digests on every PDU with data.
    pub data: bool,
}

impl Digests {
    /// The DGST byte of ICReq / ICResp.
    pub const fn raw(self) -> u8 {
        self.header as u8 | (self.data as u8) << 1
    }

    /// From the DGST byte (reserved bits ignored).
    pub const fn from_raw(v: u8) -> Self {
        Digests { header: v & 1 != 0, data: v & 2 != 0 }
    }
}

/// The 8-byte common header.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommonHeader {
    /// PDU type.
    pub pdu_type: PduType,
    /// FLAGS.
    pub flags: u8,
    /// Header length without digest.
    pub hlen: u8,
    /// Data offset (0: no data).
    pub pdo: u8,
    /// Length of the whole PDU.
    pub plen: u32,
}

/// Where a received PDU's parts are, from its common header.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PduLayout {
    /// A header digest follows the header.
    pub header_digest: bool,
    /// Offset of the data (`plen` when there is none).
    pub data_offset: usize,
    /// Bytes of data.
    pub data_len: usize,
    /// A data digest follows the data.
    pub data_digest: bool,
}

impl CommonHeader {
    /// Parses the first 8 bytes of a PDU.
    pub fn from_bytes(b: &[u8; 8]) -> Result<Self, PduError> {
        let pdu_type = PduType::from_raw(b[0]).ok_or(PduError::UnknownType(b[0]))?;
        Ok(CommonHeader {
            pdu_type,
            flags: b[1],
            hlen: b[2],
            pdo: b[3],
            plen: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        })
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 8] {
        let p = self.plen.to_le_bytes();
        [self.pdu_type.raw(), self.flags, self.hlen, self.pdo, p[0], p[1], p[2], p[3]]
    }

    /// A header for a PDU of `pdu_type` carrying `data_len` bytes of data
    /// right after the header (and its digest), with the digests the
    /// connection negotiated; `extra_flags` adds LAST_PDU or SUCCESS.
    pub fn new(pdu_type: PduType, digests: Digests, data_len: usize, extra_flags: u8) -> Self {
        let hlen = pdu_type.hlen();
        let hd = digests.header && pdu_type.digested();
        let dd = digests.data && data_len > 0 && pdu_type.may_carry_data();
        let header_end = hlen + if hd { DIGEST_SIZE } else { 0 };
        let (pdo, plen) = if data_len > 0 {
            (header_end, header_end + data_len + if dd { DIGEST_SIZE } else { 0 })
        } else {
            (0, header_end)
        };
        let flags = extra_flags | if hd { FLAG_HDGST } else { 0 } | if dd { FLAG_DDGST } else { 0 };
        CommonHeader { pdu_type, flags, hlen: hlen as u8, pdo: pdo as u8, plen: plen as u32 }
    }

    /// Checks the header against the connection's negotiated `digests`
    /// and the most data it accepts in one PDU (`max_data`), and returns
    /// where the parts are. Termination requests carry the offending
    /// header as their data, without digests.
    pub fn layout(&self, digests: Digests, max_data: usize) -> Result<PduLayout, PduError> {
        let t = self.pdu_type;
        let expected = t.hlen();
        if self.hlen as usize != expected {
            return Err(PduError::HeaderLength { pdu: t, hlen: self.hlen, expected });
        }
        let hd = t.digested() && digests.header;
        let has_hd = self.flags & FLAG_HDGST != 0;
        let has_dd = self.flags & FLAG_DDGST != 0;
        let plen = self.plen as usize;
        if !t.digested() {
            if has_hd || has_dd {
                return Err(PduError::DigestFlags { pdu: t, flags: self.flags });
            }
            // IC PDUs are exactly their header; a termination request
            // carries up to TERM_REQ_MAX_DATA bytes after it.
            let max = match t {
                PduType::IcReq | PduType::IcResp => expected,
                _ => expected + TERM_REQ_MAX_DATA,
            };
            if plen < expected || plen > max || self.pdo != 0 {
                return Err(PduError::PduLength { pdu: t, plen: self.plen, min: expected, max });
            }
            return Ok(PduLayout {
                header_digest: false,
                data_offset: expected,
                data_len: plen - expected,
                data_digest: false,
            });
        }
        if has_hd != hd || (has_dd && !digests.data) {
            return Err(PduError::DigestFlags { pdu: t, flags: self.flags });
        }
        let header_end = expected + if hd { DIGEST_SIZE } else { 0 };
        if self.pdo == 0 {
            if plen != header_end || has_dd {
                return Err(self.length_error(header_end, header_end));
            }
            if t == PduType::H2cData || t == PduType::C2hData {
                return Err(PduError::DataOffset { pdu: t, pdo: 0, header_end });
            }
            return Ok(PduLayout {
                header_digest: hd,
                data_offset: plen,
                data_len: 0,
                data_digest: false,
            });
        }
        let pdo = self.pdo as usize;
        if !t.may_carry_data() || pdo < header_end {
            return Err(PduError::DataOffset { pdu: t, pdo: self.pdo, header_end });
        }
        let dd = digests.data;
        if dd != has_dd {
            return Err(PduError::DigestFlags { pdu: t, flags: self.flags });
        }
        let tail = if dd { DIGEST_SIZE } else { 0 };
        if plen <= pdo + tail {
            return Err(self.length_error(pdo + tail + 1, pdo + max_data + tail));
        }
        // Checked before any byte of the data is read or buffered.
        let len = plen - pdo - tail;
        if len > max_data {
            return Err(PduError::DataLimit { pdu: t, len, max: max_data });
        }
        Ok(PduLayout { header_digest: hd, data_offset: pdo, data_len: len, data_digest: dd })
    }

    fn length_error(&self, min: usize, max: usize) -> PduError {
        PduError::PduLength { pdu: self.pdu_type, plen: self.plen, min, max }
    }
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn ic_header(t: PduType) -> [u8; IC_PDU_SIZE] {
    let mut b = [0u8; IC_PDU_SIZE];
    let ch = CommonHeader {
        pdu_type: t,
        flags: 0,
        hlen: IC_PDU_SIZE as u8,
        pdo: 0,
        plen: IC_PDU_SIZE as u32,
    };
    b[..8].copy_from_slice(&ch.to_bytes());
    b
}

/// ICReq: PFV (9:8), HPDA (10), DGST (11), MAXR2T (15:12, 0's based).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcReq {
    /// PDU format version (0).
    pub pfv: u16,
    /// Host PDU data alignment: data in C2H PDUs starts at a multiple of
    /// `(hpda + 1) * 4` bytes.
    pub hpda: u8,
    /// Digests the host asks for.
    pub digests: Digests,
    /// Most outstanding R2Ts per command the host accepts, 0's based.
    pub maxr2t: u32,
}

impl IcReq {
    /// The whole 128-byte PDU.
    pub fn to_bytes(&self) -> [u8; IC_PDU_SIZE] {
        let mut b = ic_header(PduType::IcReq);
        b[8..10].copy_from_slice(&self.pfv.to_le_bytes());
        b[10] = self.hpda;
        b[11] = self.digests.raw();
        b[12..16].copy_from_slice(&self.maxr2t.to_le_bytes());
        b
    }

    /// Parses the whole PDU (the common header already checked).
    pub fn from_bytes(b: &[u8; IC_PDU_SIZE]) -> Self {
        IcReq {
            pfv: le16(b, 8),
            hpda: b[10],
            digests: Digests::from_raw(b[11]),
            maxr2t: le32(b, 12),
        }
    }
}

/// ICResp: PFV (9:8), CPDA (10), DGST (11), MAXH2CDATA (15:12).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcResp {
    /// PDU format version (0).
    pub pfv: u16,
    /// Controller PDU data alignment: data in H2C PDUs starts at a
    /// multiple of `(cpda + 1) * 4` bytes.
    pub cpda: u8,
    /// Digests the connection uses.
    pub digests: Digests,
    /// Most data bytes in one H2CData PDU (at least 4096).
    pub maxh2cdata: u32,
}

impl IcResp {
    /// The whole 128-byte PDU.
    pub fn to_bytes(&self) -> [u8; IC_PDU_SIZE] {
        let mut b = ic_header(PduType::IcResp);
        b[8..10].copy_from_slice(&self.pfv.to_le_bytes());
        b[10] = self.cpda;
        b[11] = self.digests.raw();
        b[12..16].copy_from_slice(&self.maxh2cdata.to_le_bytes());
        b
    }

    /// Parses the whole PDU (the common header already checked).
    pub fn from_bytes(b: &[u8; IC_PDU_SIZE]) -> Self {
        IcResp {
            pfv: le16(b, 8),
            cpda: b[10],
            digests: Digests::from_raw(b[11]),
            maxh2cdata: le32(b, 12),
        }
    }
}

/// The PDU-specific header of H2CData and C2HData (bytes 23:8): CCCID
/// (9:8), TTAG (11:10; H2CData only), DATAO (15:12), DATAL (19:16).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Command capsule CID the data belongs to.
    pub cccid: u16,
    /// Transfer tag of the R2T this answers (H2CData; 0 in C2HData).
    pub ttag: u16,
    /// Offset of this PDU's data within the command's data.
    pub datao: u32,
    /// Bytes of data in this PDU.
    pub datal: u32,
}

impl DataHeader {
    /// Bytes 23:8 of the PDU.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.cccid.to_le_bytes());
        b[2..4].copy_from_slice(&self.ttag.to_le_bytes());
        b[4..8].copy_from_slice(&self.datao.to_le_bytes());
        b[8..12].copy_from_slice(&self.datal.to_le_bytes());
        b
    }

    /// From bytes 23:8 of the PDU.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        DataHeader { cccid: le16(b, 0), ttag: le16(b, 2), datao: le32(b, 4), datal: le32(b, 8) }
    }
}

/// R2T's PDU-specific header (bytes 23:8): CCCID (9:8), TTAG (11:10), R2TO
/// (15:12), R2TL (19:16).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct R2t {
    /// Command capsule CID the transfer belongs to.
    pub cccid: u16,
    /// Transfer tag the host's H2CData PDUs echo.
    pub ttag: u16,
    /// Offset of the requested data within the command's data.
    pub r2to: u32,
    /// Bytes requested.
    pub r2tl: u32,
}

impl R2t {
    /// Bytes 23:8 of the PDU.
    pub fn to_bytes(&self) -> [u8; 16] {
        DataHeader { cccid: self.cccid, ttag: self.ttag, datao: self.r2to, datal: self.r2tl }
            .to_bytes()
    }

    /// From bytes 23:8 of the PDU.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let d = DataHeader::from_bytes(b);
        R2t { cccid: d.cccid, ttag: d.ttag, r2to: d.datao, r2tl: d.datal }
    }
}

/// A termination request's PDU-specific header (bytes 23:8): FES (9:8),
/// FEI (13:10); the offending PDU header follows as data.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermReq {
    /// Fatal error status (raw, so reserved values survive a round trip).
    pub fes: u16,
    /// Fatal error information (the offending field's offset, or a
    /// limit, depending on FES).
    pub fei: u32,
}

impl TermReq {
    /// Bytes 23:8 of the PDU.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.fes.to_le_bytes());
        b[2..6].copy_from_slice(&self.fei.to_le_bytes());
        b
    }

    /// From bytes 23:8 of the PDU.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        TermReq { fes: le16(b, 0), fei: le32(b, 2) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Digests = Digests { header: true, data: true };
    const NONE: Digests = Digests { header: false, data: false };

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(digest(b"123456789"), 0xE306_9283);
        // Pieces of every size, as data digests over R2T bursts see them.
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let whole = crate::crc::crc32c(&data);
        assert_eq!(digest(&data), whole);
        for cut in [0usize, 1, 15, 16, 63, 64, 255, 4096, 8999, 9000] {
            assert_eq!(digest_append(digest(&data[..cut]), &data[cut..]), whole, "cut {cut}");
        }
        assert_eq!(digest_append(digest(b"1234"), b"56789"), 0xE306_9283);
    }

    #[test]
    fn ic_pdus_sit_at_their_offsets() {
        let r = IcReq { pfv: 0, hpda: 0, digests: BOTH, maxr2t: 0 };
        let b = r.to_bytes();
        assert_eq!(&b[..8], &[0x00, 0, 128, 0, 128, 0, 0, 0]);
        assert_eq!(b[11], 3);
        assert_eq!(IcReq::from_bytes(&b), r);
        let p = IcResp {
            pfv: 0,
            cpda: 0,
            digests: Digests { header: true, data: false },
            maxh2cdata: 131072,
        };
        let b = p.to_bytes();
        assert_eq!(&b[..4], &[0x01, 0, 128, 0]);
        assert_eq!(b[11], 1);
        assert_eq!(&b[12..16], &131072u32.to_le_bytes());
        assert_eq!(IcResp::from_bytes(&b), p);
        let ch = CommonHeader::from_bytes(&b[..8].try_into().unwrap()).unwrap();
        let l = ch.layout(BOTH, 0).unwrap();
        assert_eq!((l.data_offset, l.data_len, l.header_digest), (128, 0, false));
    }

    #[test]
    fn data_headers_sit_at_their_offsets() {
        let d = DataHeader { cccid: 0x0102, ttag: 0x0304, datao: 0x0506_0708, datal: 0x090A_0B0C };
        let b = d.to_bytes();
        assert_eq!(&b[..12], &[2, 1, 4, 3, 8, 7, 6, 5, 0x0C, 0x0B, 0x0A, 9]);
        assert_eq!(DataHeader::from_bytes(&b), d);
        let r = R2t { cccid: 9, ttag: 1, r2to: 4096, r2tl: 8192 };
        assert_eq!(R2t::from_bytes(&r.to_bytes()), r);
        let t = TermReq { fes: 3, fei: 0x1122_3344 };
        assert_eq!(&t.to_bytes()[..6], &[3, 0, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(TermReq::from_bytes(&t.to_bytes()), t);
        assert_eq!(
            FatalError::from_raw(FatalError::DataLimitExceeded.raw()),
            Some(FatalError::DataLimitExceeded)
        );
    }

    #[test]
    fn new_headers_lay_out_digests_and_data() {
        let h = CommonHeader::new(PduType::CapsuleCmd, BOTH, 4096, 0);
        assert_eq!((h.hlen, h.pdo, h.plen), (72, 76, 76 + 4096 + 4));
        assert_eq!(h.flags, FLAG_HDGST | FLAG_DDGST);
        let l = h.layout(BOTH, 8192).unwrap();
        assert_eq!(
            l,
            PduLayout { header_digest: true, data_offset: 76, data_len: 4096, data_digest: true }
        );
        let h = CommonHeader::new(PduType::CapsuleResp, NONE, 0, 0);
        assert_eq!((h.hlen, h.pdo, h.plen, h.flags), (24, 0, 24, 0));
        let h = CommonHeader::new(PduType::C2hData, NONE, 512, FLAG_DATA_LAST | FLAG_DATA_SUCCESS);
        assert_eq!((h.pdo, h.plen, h.flags), (24, 536, 0x0C));
        assert_eq!(CommonHeader::from_bytes(&h.to_bytes()), Ok(h));
        let h = CommonHeader::new(PduType::R2t, BOTH, 0, 0);
        assert_eq!((h.pdo, h.plen, h.flags), (0, 28, FLAG_HDGST));
        assert!(h.layout(BOTH, 0).is_ok());
    }

    #[test]
    fn malformed_headers_are_named() {
        assert_eq!(
            CommonHeader::from_bytes(&[0x08, 0, 24, 0, 24, 0, 0, 0]),
            Err(PduError::UnknownType(8))
        );
        let mut h = CommonHeader::new(PduType::CapsuleCmd, NONE, 0, 0);
        h.hlen = 24;
        assert!(matches!(h.layout(NONE, 0), Err(PduError::HeaderLength { expected: 72, .. })));
        let h = CommonHeader::new(PduType::CapsuleCmd, NONE, 0, 0);
        assert!(matches!(h.layout(BOTH, 0), Err(PduError::DigestFlags { .. })));
        let h = CommonHeader::new(PduType::H2cData, NONE, 8192, 0);
        let e = h.layout(NONE, 4096).unwrap_err();
        assert!(matches!(e, PduError::DataLimit { len: 8192, max: 4096, .. }), "{e}");
        assert_eq!(e.fatal(), (FatalError::DataLimitExceeded, 0));
        let mut h = CommonHeader::new(PduType::CapsuleCmd, NONE, 16, 0);
        h.pdo = 40;
        assert!(matches!(h.layout(NONE, 4096), Err(PduError::DataOffset { header_end: 72, .. })));
        let mut h = CommonHeader::new(PduType::CapsuleResp, NONE, 0, 0);
        h.plen = 4;
        assert!(h.layout(NONE, 0).is_err());
        let mut h = CommonHeader::new(PduType::H2cData, NONE, 0, 0);
        h.plen = 24;
        assert!(matches!(h.layout(NONE, 4096), Err(PduError::DataOffset { .. })));
        let term = CommonHeader {
            pdu_type: PduType::H2cTermReq,
            flags: 0,
            hlen: 24,
            pdo: 0,
            plen: 24 + 72,
        };
        assert_eq!(term.layout(BOTH, 0).unwrap().data_len, 72);
        let term = CommonHeader { plen: 24 + 200, ..term };
        assert!(term.layout(BOTH, 0).is_err());
    }
}
