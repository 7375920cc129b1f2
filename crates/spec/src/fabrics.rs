//! NVMe over Fabrics: the Fabrics command (opcode 7Fh) and its types
//! (Connect, Property Get/Set, Disconnect), the Connect data, the status
//! codes specific to Connect, and the Discovery log page (LID 70h).
//!
//! A Fabrics command is a 64-byte entry: opcode 7Fh (byte 0), PSDT (byte 1
//! bits 7:6), CID (3:2), FCTYPE (4), SGL1 (39:24), type-specific fields
//! (63:40). In [`SubmissionEntry`] terms FCTYPE is the low byte of the
//! NSID dword and bytes 63:40 are CDW10..CDW15.

use crate::status::{Status, StatusCodeType};
use crate::SubmissionEntry;

/// Opcode of every Fabrics command (on the admin and the I/O queues).
pub const FABRICS_OPCODE: u8 = 0x7F;

/// The well-known NQN of a discovery subsystem.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

/// Log page identifier of the Discovery log page.
pub const LID_DISCOVERY: u8 = 0x70;

/// Most bytes an NQN takes (the field is 256 bytes, NUL terminated).
pub const NQN_MAX: usize = 223;

/// Fabrics command type (FCTYPE).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FabricsType {
    /// 00h Property Set.
    PropertySet,
    /// 01h Connect.
    Connect,
    /// 04h Property Get.
    PropertyGet,
    /// 05h Authentication Send.
    AuthenticationSend,
    /// 06h Authentication Receive.
    AuthenticationReceive,
    /// 08h Disconnect.
    Disconnect,
    /// Any other value.
    Unknown(u8),
}

impl FabricsType {
    /// The FCTYPE byte.
    pub const fn raw(self) -> u8 {
        match self {
            FabricsType::PropertySet => 0x00,
            FabricsType::Connect => 0x01,
            FabricsType::PropertyGet => 0x04,
            FabricsType::AuthenticationSend => 0x05,
            FabricsType::AuthenticationReceive => 0x06,
            FabricsType::Disconnect => 0x08,
            FabricsType::Unknown(v) => v,
        }
    }

    /// From the FCTYPE byte.
    pub const fn from_raw(v: u8) -> Self {
        match v {
            0x00 => FabricsType::PropertySet,
            0x01 => FabricsType::Connect,
            0x04 => FabricsType::PropertyGet,
            0x05 => FabricsType::AuthenticationSend,
            0x06 => FabricsType::AuthenticationReceive,
            0x08 => FabricsType::Disconnect,
            v => FabricsType::Unknown(v),
        }
    }

    /// The FCTYPE of a Fabrics entry (`None` when the opcode is not 7Fh).
    pub const fn of(sqe: &SubmissionEntry) -> Option<Self> {
        if sqe.opcode() != FABRICS_OPCODE {
            return None;
        }
        Some(Self::from_raw(sqe.nsid as u8))
    }
}

fn fabrics_entry(fctype: FabricsType) -> SubmissionEntry {
    SubmissionEntry::new(FABRICS_OPCODE, fctype.raw() as u32)
}

/// Connect (FCTYPE 01h): creates the admin queue (QID 0, and with it a
/// controller) or an I/O queue of an existing controller. The data (1024
/// bytes, [`ConnectData`]) travels in the command capsule.
///
/// RECFMT (41:40), QID (43:42), SQSIZE (45:44, 0's based), CATTR (46),
/// KATO (51:48, milliseconds).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectCommand {
    /// Record format (0).
    pub recfmt: u16,
    /// Queue to create: 0 for the admin queue.
    pub qid: u16,
    /// Submission queue size, 0's based.
    pub sqsize: u16,
    /// Connect attributes (bit 2: I/O queue with SQ flow control disabled).
    pub cattr: u8,
    /// Keep Alive Timeout in milliseconds (admin queue only; 0: none).
    pub kato_ms: u32,
}

impl ConnectCommand {
    /// The submission entry (the caller sets CID and the SGL).
    pub fn to_sqe(&self) -> SubmissionEntry {
        let mut e = fabrics_entry(FabricsType::Connect);
        e.cdw10 = self.recfmt as u32 | (self.qid as u32) << 16;
        e.cdw11 = self.sqsize as u32 | (self.cattr as u32) << 16;
        e.cdw12 = self.kato_ms;
        e
    }

    /// Decodes a Connect entry.
    pub fn from_sqe(e: &SubmissionEntry) -> Self {
        ConnectCommand {
            recfmt: e.cdw10 as u16,
            qid: (e.cdw10 >> 16) as u16,
            sqsize: e.cdw11 as u16,
            cattr: (e.cdw11 >> 16) as u8,
            kato_ms: e.cdw12,
        }
    }
}

/// The 1024 bytes of Connect data: HOSTID (15:0), CNTLID (17:16), SUBNQN
/// (511:256), HOSTNQN (767:512).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ConnectData {
    /// Host identifier (a UUID).
    pub host_id: [u8; 16],
    /// Controller ID: FFFFh asks for any (dynamic model) on the admin
    /// queue; an I/O queue names the controller its admin Connect got.
    pub cntlid: u16,
    /// NQN of the subsystem to connect to.
    pub subnqn: String,
    /// NQN of the host.
    pub hostnqn: String,
}

impl ConnectData {
    /// Size on the wire.
    pub const SIZE: usize = 1024;
    /// CNTLID of a Connect that takes any controller (dynamic model).
    pub const ANY_CONTROLLER: u16 = 0xFFFF;

    /// The wire image; NQNs longer than [`NQN_MAX`] bytes are cut.
    pub fn to_bytes(&self) -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[0..16].copy_from_slice(&self.host_id);
        b[16..18].copy_from_slice(&self.cntlid.to_le_bytes());
        put_nqn(&mut b[256..512], &self.subnqn);
        put_nqn(&mut b[512..768], &self.hostnqn);
        b
    }

    /// Parses a wire image; an NQN field without a NUL in its 256 bytes,
    /// or with bytes that are not printable ASCII, is refused with the
    /// offset of the bad field (for Connect Invalid Parameters).
    pub fn from_bytes(b: &[u8; 1024]) -> Result<Self, u16> {
        let mut host_id = [0u8; 16];
        host_id.copy_from_slice(&b[0..16]);
        Ok(ConnectData {
            host_id,
            cntlid: u16::from_le_bytes([b[16], b[17]]),
            subnqn: get_nqn(&b[256..512]).ok_or(256u16)?,
            hostnqn: get_nqn(&b[512..768]).ok_or(512u16)?,
        })
    }
}

fn put_nqn(field: &mut [u8], s: &str) {
    let n = s.len().min(NQN_MAX).min(field.len() - 1);
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

fn get_nqn(field: &[u8]) -> Option<String> {
    let end = field.iter().position(|&c| c == 0)?;
    let s = &field[..end];
    if s.iter().all(|c| c.is_ascii_graphic()) {
        Some(String::from_utf8_lossy(s).into_owned())
    } else {
        None
    }
}

/// The CQE result of a successful Connect: CNTLID in DW0 bits 15:0.
pub const fn connect_result(cntlid: u16) -> u32 {
    cntlid as u32
}

/// The CQE DW0 of Connect Invalid Parameters: IPO (bytes 1:0), the byte
/// offset of the bad field; IATTR (byte 2) bit 0: in the data (1) or in
/// the entry (0).
pub const fn connect_invalid_parameter(offset: u16, in_data: bool) -> u32 {
    offset as u32 | (in_data as u32) << 16
}

/// Property size: ATTRIB bits 2:0 (0h: 4 bytes, 1h: 8 bytes).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PropertyGet {
    /// Byte offset in the register map (CAP 0h, VS 8h, CC 14h, CSTS 1Ch ...).
    pub offset: u32,
    /// An 8-byte property (CAP); otherwise 4 bytes.
    pub eight_bytes: bool,
}

impl PropertyGet {
    /// The submission entry (the caller sets CID); the value comes back in
    /// CQE DW0 (and DW1 for 8 bytes).
    pub fn to_sqe(&self) -> SubmissionEntry {
        let mut e = fabrics_entry(FabricsType::PropertyGet);
        e.cdw10 = self.eight_bytes as u32;
        e.cdw11 = self.offset;
        e
    }

    /// Decodes a Property Get entry; `None` for a reserved size.
    pub fn from_sqe(e: &SubmissionEntry) -> Option<Self> {
        Some(PropertyGet { offset: e.cdw11, eight_bytes: property_size(e.cdw10)? })
    }
}

/// Property Set: ATTRIB (40), OFST (47:44), VALUE (55:48).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PropertySet {
    /// Byte offset in the register map.
    pub offset: u32,
    /// An 8-byte property; otherwise 4 bytes.
    pub eight_bytes: bool,
    /// The value.
    pub value: u64,
}

impl PropertySet {
    /// The submission entry (the caller sets CID).
    pub fn to_sqe(&self) -> SubmissionEntry {
        let mut e = fabrics_entry(FabricsType::PropertySet);
        e.cdw10 = self.eight_bytes as u32;
        e.cdw11 = self.offset;
        e.cdw12 = self.value as u32;
        e.cdw13 = (self.value >> 32) as u32;
        e
    }

    /// Decodes a Property Set entry; `None` for a reserved size.
    pub fn from_sqe(e: &SubmissionEntry) -> Option<Self> {
        Some(PropertySet {
            offset: e.cdw11,
            eight_bytes: property_size(e.cdw10)?,
            value: e.cdw12 as u64 | (e.cdw13 as u64) << 32,
        })
    }
}

fn property_size(attrib: u32) -> Option<bool> {
    match attrib & 0x7 {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Disconnect (FCTYPE 08h): deletes the queue it is sent on (the admin
/// queue: the whole association).
pub fn disconnect_sqe() -> SubmissionEntry {
    fabrics_entry(FabricsType::Disconnect)
}

/// Status codes specific to Connect (SCT 1h). They share values with
/// other commands' specific codes, so they are kept apart from
/// [`crate::StatusCode`], whose lookup is by value alone.
pub mod connect_status {
    use super::*;

    /// 01h/80h Connect Incompatible Format.
    pub const INCOMPATIBLE_FORMAT: Status = Status::new(StatusCodeType::CommandSpecific, 0x80);
    /// 01h/81h Connect Controller Busy.
    pub const CONTROLLER_BUSY: Status = Status::new(StatusCodeType::CommandSpecific, 0x81);
    /// 01h/82h Connect Invalid Parameters.
    pub const INVALID_PARAMETERS: Status = Status::new(StatusCodeType::CommandSpecific, 0x82);
    /// 01h/83h Connect Restart Discovery.
    pub const RESTART_DISCOVERY: Status = Status::new(StatusCodeType::CommandSpecific, 0x83);
    /// 01h/84h Connect Invalid Host.
    pub const INVALID_HOST: Status = Status::new(StatusCodeType::CommandSpecific, 0x84);

    /// The specification's name of a status a Connect completed with;
    /// `None` for statuses that are not Connect-specific.
    pub fn name(s: Status) -> Option<&'static str> {
        if s.sct != StatusCodeType::CommandSpecific {
            return None;
        }
        Some(match s.sc {
            0x80 => "Connect Incompatible Format",
            0x81 => "Connect Controller Busy",
            0x82 => "Connect Invalid Parameters",
            0x83 => "Connect Restart Discovery",
            0x84 => "Connect Invalid Host",
            _ => return None,
        })
    }
}

/// Transport type (TRTYPE) 3h: TCP.
pub const TRTYPE_TCP: u8 = 3;
/// Address family (ADRFAM) 1h: IPv4.
pub const ADRFAM_IPV4: u8 = 1;
/// Address family 2h: IPv6.
pub const ADRFAM_IPV6: u8 = 2;
/// Subsystem type 2h: an NVM subsystem.
pub const SUBTYPE_NVM: u8 = 2;
/// Subsystem type 3h: the discovery subsystem answering (current discovery subsystem).
pub const SUBTYPE_CURRENT_DISCOVERY: u8 = 3;
/// TREQ: secure channel not required (bits 1:0 = 10b).
pub const TREQ_SECURE_NOT_REQUIRED: u8 = 0b10;
/// TREQ bit 2: the controller can disable SQ flow control (a host may set
/// [`CATTR_DISABLE_SQ_FLOW_CONTROL`] in its Connect).
pub const TREQ_DISABLE_SQ_FLOW_CONTROL: u8 = 1 << 2;
/// Connect CATTR bit 2: disable SQ flow control on the queue. The host
/// then never waits for SQHD; the controller reports no SQ head (FFFFh)
/// and, over TCP, may complete a read with its last C2HData PDU (SUCCESS
/// flag) instead of a response capsule.
pub const CATTR_DISABLE_SQ_FLOW_CONTROL: u8 = 1 << 2;
/// SQHD of a completion on a queue with SQ flow control disabled.
pub const SQHD_NOT_REPORTED: u16 = 0xFFFF;

/// One 1024-byte Discovery log page entry: TRTYPE (0), ADRFAM (1),
/// SUBTYPE (2), TREQ (3), PORTID (5:4), CNTLID (7:6), ASQSZ (9:8), EFLAGS
/// (11:10), TRSVCID (63:32), SUBNQN (511:256), TRADDR (767:512), TSAS
/// (1023:768; TCP: SECTYPE in byte 0).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DiscoveryEntry {
    /// Transport type ([`TRTYPE_TCP`]).
    pub trtype: u8,
    /// Address family ([`ADRFAM_IPV4`], [`ADRFAM_IPV6`]).
    pub adrfam: u8,
    /// Subsystem type ([`SUBTYPE_NVM`], [`SUBTYPE_CURRENT_DISCOVERY`]).
    pub subtype: u8,
    /// Transport requirements.
    pub treq: u8,
    /// Port identifier.
    pub portid: u16,
    /// Controller ID (FFFFh: dynamic model).
    pub cntlid: u16,
    /// Admin queue size the host may use.
    pub asqsz: u16,
    /// Entry flags.
    pub eflags: u16,
    /// Transport service identifier (the TCP port, in decimal).
    pub trsvcid: String,
    /// Subsystem NQN.
    pub subnqn: String,
    /// Transport address (the IP address, as text).
    pub traddr: String,
}

impl DiscoveryEntry {
    /// Size on the wire.
    pub const SIZE: usize = 1024;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[0] = self.trtype;
        b[1] = self.adrfam;
        b[2] = self.subtype;
        b[3] = self.treq;
        b[4..6].copy_from_slice(&self.portid.to_le_bytes());
        b[6..8].copy_from_slice(&self.cntlid.to_le_bytes());
        b[8..10].copy_from_slice(&self.asqsz.to_le_bytes());
        b[10..12].copy_from_slice(&self.eflags.to_le_bytes());
        put_padded(&mut b[32..64], &self.trsvcid);
        put_nqn(&mut b[256..512], &self.subnqn);
        put_padded(&mut b[512..768], &self.traddr);
        b
    }

    /// Parses a wire image (text fields are trimmed of padding).
    pub fn from_bytes(b: &[u8; 1024]) -> Self {
        DiscoveryEntry {
            trtype: b[0],
            adrfam: b[1],
            subtype: b[2],
            treq: b[3],
            portid: u16::from_le_bytes([b[4], b[5]]),
            cntlid: u16::from_le_bytes([b[6], b[7]]),
            asqsz: u16::from_le_bytes([b[8], b[9]]),
            eflags: u16::from_le_bytes([b[10], b[11]]),
            trsvcid: get_padded(&b[32..64]),
            subnqn: get_padded(&b[256..512]),
            traddr: get_padded(&b[512..768]),
        }
    }
}

// TRSVCID and TRADDR are ASCII strings padded with spaces.
fn put_padded(field: &mut [u8], s: &str) {
    field.fill(b' ');
    let n = s.len().min(field.len());
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

fn get_padded(field: &[u8]) -> String {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).trim_end().to_string()
}

/// The Discovery log page header (1024 bytes): GENCTR (7:0), NUMREC
/// (15:8), RECFMT (17:16); entries follow at 1024-byte strides.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DiscoveryHeader {
    /// Generation counter: changes when the entries change.
    pub genctr: u64,
    /// Number of entries.
    pub numrec: u64,
    /// Record format (0).
    pub recfmt: u16,
}

impl DiscoveryHeader {
    /// Size on the wire.
    pub const SIZE: usize = 1024;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[0..8].copy_from_slice(&self.genctr.to_le_bytes());
        b[8..16].copy_from_slice(&self.numrec.to_le_bytes());
        b[16..18].copy_from_slice(&self.recfmt.to_le_bytes());
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 1024]) -> Self {
        let q = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        DiscoveryHeader { genctr: q(0), numrec: q(8), recfmt: u16::from_le_bytes([b[16], b[17]]) }
    }
}

/// The whole Discovery log page for `entries`.
pub fn discovery_log_page(genctr: u64, entries: &[DiscoveryEntry]) -> Vec<u8> {
    let header = DiscoveryHeader { genctr, numrec: entries.len() as u64, recfmt: 0 };
    let mut page = Vec::with_capacity(DiscoveryHeader::SIZE * (1 + entries.len()));
    page.extend_from_slice(&header.to_bytes());
    for e in entries {
        page.extend_from_slice(&e.to_bytes());
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_fields_sit_at_their_offsets() {
        let c = ConnectCommand { recfmt: 0, qid: 3, sqsize: 127, cattr: 0x4, kato_ms: 15_000 };
        let mut e = c.to_sqe();
        e.set_cid(0x1234);
        let b = e.to_bytes();
        assert_eq!(b[0], 0x7F);
        assert_eq!(&b[2..4], &0x1234u16.to_le_bytes());
        assert_eq!(b[4], 0x01);
        assert_eq!(&b[40..48], &[0, 0, 3, 0, 127, 0, 4, 0]);
        assert_eq!(&b[48..52], &15_000u32.to_le_bytes());
        assert_eq!(FabricsType::of(&e), Some(FabricsType::Connect));
        assert_eq!(ConnectCommand::from_sqe(&SubmissionEntry::from_bytes(&b)), c);
    }

    #[test]
    fn connect_data_round_trips_and_refuses_bad_nqns() {
        let d = ConnectData {
            host_id: [7; 16],
            cntlid: ConnectData::ANY_CONTROLLER,
            subnqn: "nqn.2024-01.io.znskit:zn540".into(),
            hostnqn: "nqn.2014-08.org.nvmexpress:uuid:1".into(),
        };
        let mut b = d.to_bytes();
        assert_eq!(&b[16..18], &[0xFF, 0xFF]);
        assert_eq!(&b[256..263], b"nqn.202");
        assert_eq!(&b[512..519], b"nqn.201");
        assert_eq!(ConnectData::from_bytes(&b), Ok(d));
        b[256..512].fill(b'x');
        assert_eq!(ConnectData::from_bytes(&b), Err(256));
        b[256] = 0;
        b[512] = 0x01;
        assert_eq!(ConnectData::from_bytes(&b), Err(512));
    }

    #[test]
    fn properties_encode_size_offset_and_value() {
        let g = PropertyGet { offset: 0, eight_bytes: true };
        let e = g.to_sqe();
        assert_eq!(e.to_bytes()[4], 0x04);
        assert_eq!(e.to_bytes()[40], 1);
        assert_eq!(PropertyGet::from_sqe(&e), Some(g));
        let s = PropertySet { offset: 0x14, eight_bytes: false, value: 0x46_0001 };
        let e = s.to_sqe();
        let b = e.to_bytes();
        assert_eq!((b[4], b[40]), (0x00, 0));
        assert_eq!(&b[44..48], &0x14u32.to_le_bytes());
        assert_eq!(&b[48..56], &0x46_0001u64.to_le_bytes());
        assert_eq!(PropertySet::from_sqe(&e), Some(s));
        let mut bad = e;
        bad.cdw10 = 2;
        assert_eq!(PropertySet::from_sqe(&bad), None);
        assert_eq!(disconnect_sqe().to_bytes()[4], 0x08);
    }

    #[test]
    fn connect_statuses_have_their_names() {
        assert_eq!(
            connect_status::name(connect_status::INVALID_HOST),
            Some("Connect Invalid Host")
        );
        assert_eq!(connect_invalid_parameter(256, true), 0x1_0100);
        assert_eq!(connect_status::name(Status::new(StatusCodeType::Generic, 0x82)), None);
    }

    #[test]
    fn discovery_entries_sit_at_their_offsets() {
        let e = DiscoveryEntry {
            trtype: TRTYPE_TCP,
            adrfam: ADRFAM_IPV4,
            subtype: SUBTYPE_NVM,
            treq: TREQ_SECURE_NOT_REQUIRED,
            portid: 1,
            cntlid: 0xFFFF,
            asqsz: 32,
            eflags: 0,
            trsvcid: "4420".into(),
            subnqn: "nqn.2024-01.io.znskit:zn540".into(),
            traddr: "127.0.0.1".into(),
        };
        let b = e.to_bytes();
        assert_eq!(&b[0..12], &[3, 1, 2, 2, 1, 0, 0xFF, 0xFF, 32, 0, 0, 0]);
        assert_eq!(&b[32..38], b"4420  ");
        assert_eq!(&b[512..522], b"127.0.0.1 ");
        assert_eq!(DiscoveryEntry::from_bytes(&b), e);
        let page = discovery_log_page(5, &[e.clone(), e]);
        assert_eq!(page.len(), 3 * 1024);
        let mut h = [0u8; 1024];
        h.copy_from_slice(&page[..1024]);
        assert_eq!(
            DiscoveryHeader::from_bytes(&h),
            DiscoveryHeader { genctr: 5, numrec: 2, recfmt: 0 }
        );
    }
}
