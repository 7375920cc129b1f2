//! NVMe in-band authentication with DH-HMAC-CHAP (NVMe base specification,
//! "Authentication"): the Authentication Send and Receive commands, the
//! messages they carry, the `DHHC-1` secret representation hosts and
//! controllers are configured with, and the responses each side computes.
//!
//! The exchange on one queue, after a Connect whose response asks for it
//! (AUTHREQ.ATR, [`CONNECT_AUTH_REQUIRED`]):
//!
//! | host sends (Authentication Send) | controller answers (Authentication Receive) |
//! |---|---|
//! | AUTH_Negotiate: hash functions and DH groups it offers | DH-HMAC-CHAP_Challenge: the chosen hash and group, C1, S1 |
//! | DH-HMAC-CHAP_Reply: R1 = HMAC(Kh, C1, S1, ...), and C2 if it wants the controller proven too | DH-HMAC-CHAP_Success1 (with R2 for C2), or AUTH_Failure1 |
//! | DH-HMAC-CHAP_Success2 (R2 was right) or AUTH_Failure2 | |
//!
//! Only the NULL DH group is spoken here: the responses are HMACs of the
//! challenges under the pre-shared secrets, without an ephemeral
//! Diffie-Hellman exchange (every Linux host offers it, and it is Linux
//! nvmet's default).

use hmac::{Mac, SimpleHmac};
use sha2::{Sha256, Sha384, Sha512};

use crate::fabrics::{FabricsType, FABRICS_OPCODE};
use crate::status::{Status, StatusCodeType};
use crate::SubmissionEntry;

/// SECP of the Authentication Send/Receive commands: DH-HMAC-CHAP.
pub const PROTOCOL_ID: u8 = 0xE9;

/// Connect response dword 0, AUTHREQ.ATR: the queue must authenticate
/// before any other command.
pub const CONNECT_AUTH_REQUIRED: u32 = 1 << 17;

/// 01h/91h Authentication Required: a command other than Connect and the
/// authentication commands on a queue that has not authenticated.
pub const AUTHENTICATION_REQUIRED: Status = Status::new(StatusCodeType::CommandSpecific, 0x91);

/// AUTH-TYPE of the common messages (AUTH_Negotiate, the failures).
pub const TYPE_COMMON: u8 = 0x00;
/// AUTH-TYPE of the DH-HMAC-CHAP messages.
pub const TYPE_DHCHAP: u8 = 0x01;

/// AUTH-ID of each message.
pub mod id {
    /// AUTH_Negotiate (common).
    pub const NEGOTIATE: u8 = 0x00;
    /// DH-HMAC-CHAP_Challenge.
    pub const CHALLENGE: u8 = 0x01;
    /// DH-HMAC-CHAP_Reply.
    pub const REPLY: u8 = 0x02;
    /// DH-HMAC-CHAP_Success1.
    pub const SUCCESS1: u8 = 0x03;
    /// DH-HMAC-CHAP_Success2.
    pub const SUCCESS2: u8 = 0x04;
    /// AUTH_Failure2 (common, host to controller).
    pub const FAILURE2: u8 = 0xF0;
    /// AUTH_Failure1 (common, controller to host).
    pub const FAILURE1: u8 = 0xF1;
}

/// The authentication protocol identifier of DH-HMAC-CHAP in AUTH_Negotiate.
pub const DHCHAP_AUTH_ID: u8 = 0x01;

/// DH group identifier of the NULL group (no Diffie-Hellman exchange).
pub const DHGROUP_NULL: u8 = 0x00;

/// Reason code explanations of AUTH_Failure1 and AUTH_Failure2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FailureReason {
    /// 01h Authentication failed (a response did not match).
    Failed = 0x01,
    /// 02h Authentication protocol not usable.
    NotUsable = 0x02,
    /// 03h Secure channel concatenation mismatch.
    ConcatMismatch = 0x03,
    /// 04h Hash function not usable.
    HashUnusable = 0x04,
    /// 05h DH group not usable.
    DhGroupUnusable = 0x05,
    /// 06h Incorrect payload.
    IncorrectPayload = 0x06,
    /// 07h Incorrect protocol message.
    IncorrectMessage = 0x07,
}

impl FailureReason {
    /// From the REASON CODE EXPLANATION byte.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::Failed,
            0x02 => Self::NotUsable,
            0x03 => Self::ConcatMismatch,
            0x04 => Self::HashUnusable,
            0x05 => Self::DhGroupUnusable,
            0x06 => Self::IncorrectPayload,
            0x07 => Self::IncorrectMessage,
            _ => return None,
        })
    }
}

/// A hash function of DH-HMAC-CHAP (and of a secret's transformation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hash {
    /// 01h SHA-256.
    Sha256,
    /// 02h SHA-384.
    Sha384,
    /// 03h SHA-512.
    Sha512,
}

impl Hash {
    /// Every hash function, in the order a controller prefers them.
    pub const ALL: [Hash; 3] = [Hash::Sha256, Hash::Sha384, Hash::Sha512];

    /// The identifier on the wire and in a `DHHC-1` secret.
    pub const fn raw(self) -> u8 {
        match self {
            Hash::Sha256 => 1,
            Hash::Sha384 => 2,
            Hash::Sha512 => 3,
        }
    }

    /// From its identifier.
    pub const fn from_raw(v: u8) -> Option<Hash> {
        Some(match v {
            1 => Hash::Sha256,
            2 => Hash::Sha384,
            3 => Hash::Sha512,
            _ => return None,
        })
    }

    /// Digest (and challenge) length in bytes.
    pub const fn digest_len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }

    /// HMAC under `key` of the concatenation of `parts`.
    pub fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes().to_vec()
        }
        match self {
            Hash::Sha256 => run::<SimpleHmac<Sha256>>(key, parts),
            Hash::Sha384 => run::<SimpleHmac<Sha384>>(key, parts),
            Hash::Sha512 => run::<SimpleHmac<Sha512>>(key, parts),
        }
    }
}

/// Why a `DHHC-1` secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not `DHHC-1:XX:BASE64:`.
    #[error("a DH-HMAC-CHAP secret is DHHC-1:XX:BASE64: (as nvme gen-dhchap-key makes it)")]
    Format,
    /// The transformation hash is not 00 to 03.
    #[error(
        "unknown secret transformation {0:02} (00: none, 01: SHA-256, 02: SHA-384, 03: SHA-512)"
    )]
    Transform(u8),
    /// The base64 part does not decode.
    #[error("the secret's key is not valid base64")]
    Base64,
    /// The key is not 32, 48 or 64 bytes.
    #[error("the secret's key is {0} bytes (32, 48 or 64 allowed)")]
    Length(usize),
    /// The CRC-32 after the key does not match it (a mistyped secret).
    #[error("the secret's CRC-32 does not match its key (mistyped?)")]
    Crc,
}

/// A DH-HMAC-CHAP secret: the key and the hash (if any) that transforms it
/// with the NQN of the side it belongs to before use.
///
/// Thread safety: plain data. Its `Debug` shows no key byte.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: Vec<u8>,
    transform: Option<Hash>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("key_len", &self.key.len())
            .field("transform", &self.transform)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// A secret of `key` (32, 48 or 64 bytes), transformed with `transform`.
    pub fn new(key: Vec<u8>, transform: Option<Hash>) -> Result<Secret, SecretError> {
        if ![32, 48, 64].contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(Secret { key, transform })
    }

    /// Parses `DHHC-1:XX:BASE64:`, BASE64 being the key followed by its
    /// CRC-32 (little-endian).
    pub fn parse(s: &str) -> Result<Secret, SecretError> {
        use base64::Engine;
        let rest = s.trim().strip_prefix("DHHC-1:").ok_or(SecretError::Format)?;
        let (xx, rest) = rest.split_once(':').ok_or(SecretError::Format)?;
        let b64 = rest.strip_suffix(':').unwrap_or(rest);
        if xx.len() != 2 || b64.contains(':') {
            return Err(SecretError::Format);
        }
        let t: u8 = xx.parse().map_err(|_| SecretError::Format)?;
        let transform = match t {
            0 => None,
            t => Some(Hash::from_raw(t).ok_or(SecretError::Transform(t))?),
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| SecretError::Base64)?;
        let Some(n) = bytes.len().checked_sub(4) else {
            return Err(SecretError::Length(0));
        };
        let (key, crc) = bytes.split_at(n);
        if ![32, 48, 64].contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        if crc32(key).to_le_bytes() != crc {
            return Err(SecretError::Crc);
        }
        Ok(Secret { key: key.to_vec(), transform })
    }

    /// The key in use by the side named `nqn`: the key itself, or
    /// HMAC(key, NQN || "NVMe-over-Fabrics") with the transformation hash.
    pub fn transformed(&self, nqn: &str) -> Vec<u8> {
        match self.transform {
            None => self.key.clone(),
            Some(h) => h.hmac(&self.key, &[nqn.as_bytes(), b"NVMe-over-Fabrics"]),
        }
    }
}

impl std::fmt::Display for Secret {
    /// The `DHHC-1:XX:BASE64:` representation.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use base64::Engine;
        let mut b = self.key.clone();
        b.extend_from_slice(&crc32(&self.key).to_le_bytes());
        let b64 = base64::engine::general_purpose::STANDARD.encode(b);
        write!(f, "DHHC-1:{:02}:{b64}:", self.transform.map_or(0, Hash::raw))
    }
}

/// CRC-32 (ISO-HDLC, as zlib computes it) of `b`.
fn crc32(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, b) as u32
}

/// The host's response R1 to challenge C1 (sequence number S1,
/// transaction `tid`), keyed with the host's transformed secret.
pub fn host_response(
    h: Hash,
    key: &[u8],
    challenge: &[u8],
    seqnum: u32,
    tid: u16,
    hostnqn: &str,
    subnqn: &str,
) -> Vec<u8> {
    response(h, key, challenge, seqnum, tid, (b"HostHost", hostnqn, subnqn))
}

/// The controller's response R2 to the host's challenge C2 (sequence
/// number S2), keyed with the controller's transformed secret.
pub fn controller_response(
    h: Hash,
    key: &[u8],
    challenge: &[u8],
    seqnum: u32,
    tid: u16,
    hostnqn: &str,
    subnqn: &str,
) -> Vec<u8> {
    response(h, key, challenge, seqnum, tid, (b"Controller", subnqn, hostnqn))
}

/// HMAC(key, C || S || T_ID || SC_C (0) || role || own NQN || 0 || peer NQN):
/// both responses, which differ in the role string and the NQNs' order.
fn response(
    h: Hash,
    key: &[u8],
    challenge: &[u8],
    seqnum: u32,
    tid: u16,
    (role, own, peer): (&[u8], &str, &str),
) -> Vec<u8> {
    h.hmac(
        key,
        &[
            challenge,
            &seqnum.to_le_bytes(),
            &tid.to_le_bytes(),
            &[0],
            role,
            own.as_bytes(),
            &[0],
            peer.as_bytes(),
        ],
    )
}

/// Authentication Send (FCTYPE 05h, TL: bytes sent) or Receive (FCTYPE
/// 06h, AL: bytes the host takes) of DH-HMAC-CHAP messages.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthCommand {
    /// Send (host to controller) or Receive.
    pub send: bool,
    /// SECP ([`PROTOCOL_ID`]).
    pub secp: u8,
    /// SPSP0 and SPSP1 (both 01h).
    pub spsp: [u8; 2],
    /// TL (Send) or AL (Receive).
    pub length: u32,
}

impl AuthCommand {
    /// A DH-HMAC-CHAP Send of `length` bytes.
    pub const fn send(length: u32) -> AuthCommand {
        AuthCommand { send: true, secp: PROTOCOL_ID, spsp: [1, 1], length }
    }

    /// A DH-HMAC-CHAP Receive of up to `length` bytes.
    pub const fn receive(length: u32) -> AuthCommand {
        AuthCommand { send: false, secp: PROTOCOL_ID, spsp: [1, 1], length }
    }

    /// The submission entry (data pointer left to the transport).
    pub fn to_sqe(&self) -> SubmissionEntry {
        let fctype = if self.send {
            FabricsType::AuthenticationSend
        } else {
            FabricsType::AuthenticationReceive
        };
        let mut e = SubmissionEntry::new(FABRICS_OPCODE, fctype.raw() as u32);
        e.cdw10 =
            (self.spsp[0] as u32) << 8 | (self.spsp[1] as u32) << 16 | (self.secp as u32) << 24;
        e.cdw11 = self.length;
        e
    }

    /// Decodes an Authentication Send or Receive entry.
    pub fn from_sqe(e: &SubmissionEntry) -> Option<AuthCommand> {
        let send = match FabricsType::of(e)? {
            FabricsType::AuthenticationSend => true,
            FabricsType::AuthenticationReceive => false,
            _ => return None,
        };
        Some(AuthCommand {
            send,
            secp: (e.cdw10 >> 24) as u8,
            spsp: [(e.cdw10 >> 8) as u8, (e.cdw10 >> 16) as u8],
            length: e.cdw11,
        })
    }

    /// SECP, SPSP0 and SPSP1 name DH-HMAC-CHAP.
    pub fn is_dhchap(&self) -> bool {
        self.secp == PROTOCOL_ID && self.spsp == [1, 1]
    }
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Shorter than its fields say.
    #[error("authentication message shorter than its fields")]
    Short,
    /// Not the message expected (AUTH-TYPE / AUTH-ID).
    #[error("unexpected authentication message (type {0:#04x}, id {1:#04x})")]
    Unexpected(u8, u8),
    /// A length field out of range.
    #[error("authentication message field out of range")]
    Field,
}

fn header(b: &mut Vec<u8>, auth_type: u8, auth_id: u8, tid: u16) {
    b.extend_from_slice(&[auth_type, auth_id, 0, 0]);
    b.extend_from_slice(&tid.to_le_bytes());
}

fn check(b: &[u8], auth_type: u8, auth_id: u8, min: usize) -> Result<u16, MessageError> {
    if b.len() < 6 {
        return Err(MessageError::Short);
    }
    if b[0] != auth_type || b[1] != auth_id {
        return Err(MessageError::Unexpected(b[0], b[1]));
    }
    if b.len() < min {
        return Err(MessageError::Short);
    }
    Ok(u16::from_le_bytes([b[4], b[5]]))
}

/// The AUTH-TYPE and AUTH-ID of a message, if it has them.
pub fn kind(b: &[u8]) -> Option<(u8, u8)> {
    Some((*b.first()?, *b.get(1)?))
}

/// AUTH_Negotiate with one DH-HMAC-CHAP protocol descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiate {
    /// Transaction identifier.
    pub tid: u16,
    /// SC_C: secure channel concatenation (0: none).
    pub sc_c: u8,
    /// Hash function identifiers offered (up to 30).
    pub hashes: Vec<u8>,
    /// DH group identifiers offered (up to 30).
    pub dh_groups: Vec<u8>,
}

impl Negotiate {
    /// Encoded: 8 bytes of header and a 64-byte descriptor.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(72);
        header(&mut b, TYPE_COMMON, id::NEGOTIATE, self.tid);
        b.extend_from_slice(&[self.sc_c, 1]);
        let (h, d) = (self.hashes.len().min(30), self.dh_groups.len().min(30));
        b.extend_from_slice(&[DHCHAP_AUTH_ID, 0, h as u8, d as u8]);
        let mut ids = [0u8; 60];
        ids[..h].copy_from_slice(&self.hashes[..h]);
        ids[30..30 + d].copy_from_slice(&self.dh_groups[..d]);
        b.extend_from_slice(&ids);
        b
    }

    /// Decodes the first protocol descriptor, which must be DH-HMAC-CHAP.
    pub fn from_bytes(b: &[u8]) -> Result<Negotiate, MessageError> {
        let tid = check(b, TYPE_COMMON, id::NEGOTIATE, 8 + 64)?;
        let (napd, d) = (b[7], &b[8..72]);
        if napd == 0 || d[0] != DHCHAP_AUTH_ID {
            return Err(MessageError::Field);
        }
        let (halen, dhlen) = (d[2] as usize, d[3] as usize);
        if halen > 30 || dhlen > 30 {
            return Err(MessageError::Field);
        }
        Ok(Negotiate {
            tid,
            sc_c: b[6],
            hashes: d[4..4 + halen].to_vec(),
            dh_groups: d[34..34 + dhlen].to_vec(),
        })
    }
}

/// DH-HMAC-CHAP_Challenge (NULL DH group: no DH value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// Transaction identifier.
    pub tid: u16,
    /// The hash function chosen.
    pub hash: u8,
    /// The DH group chosen.
    pub dh_group: u8,
    /// S1.
    pub seqnum: u32,
    /// C1 (the hash's length).
    pub challenge: Vec<u8>,
    /// The controller's DH value (empty for the NULL group).
    pub dh_value: Vec<u8>,
}

impl Challenge {
    /// Encoded.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.challenge.len() + self.dh_value.len());
        header(&mut b, TYPE_DHCHAP, id::CHALLENGE, self.tid);
        b.extend_from_slice(&[self.challenge.len() as u8, 0, self.hash, self.dh_group]);
        b.extend_from_slice(&(self.dh_value.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.seqnum.to_le_bytes());
        b.extend_from_slice(&self.challenge);
        b.extend_from_slice(&self.dh_value);
        b
    }

    /// Decodes.
    pub fn from_bytes(b: &[u8]) -> Result<Challenge, MessageError> {
        let tid = check(b, TYPE_DHCHAP, id::CHALLENGE, 16)?;
        let hl = b[6] as usize;
        let dhvlen = u16::from_le_bytes([b[10], b[11]]) as usize;
        if b.len() < 16 + hl + dhvlen {
            return Err(MessageError::Short);
        }
        Ok(Challenge {
            tid,
            hash: b[8],
            dh_group: b[9],
            seqnum: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
            challenge: b[16..16 + hl].to_vec(),
            dh_value: b[16 + hl..16 + hl + dhvlen].to_vec(),
        })
    }
}

/// DH-HMAC-CHAP_Reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Transaction identifier.
    pub tid: u16,
    /// R1.
    pub response: Vec<u8>,
    /// C2, when the host asks the controller to prove itself.
    pub challenge: Option<Vec<u8>>,
    /// S2 (meaningful with a challenge).
    pub seqnum: u32,
    /// The host's DH value (empty for the NULL group).
    pub dh_value: Vec<u8>,
}

impl Reply {
    /// Encoded: R1, then C2 (zeros without one), then the DH value.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hl = self.response.len();
        let mut b = Vec::with_capacity(16 + 2 * hl + self.dh_value.len());
        header(&mut b, TYPE_DHCHAP, id::REPLY, self.tid);
        b.extend_from_slice(&[hl as u8, 0, self.challenge.is_some() as u8, 0]);
        b.extend_from_slice(&(self.dh_value.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.seqnum.to_le_bytes());
        b.extend_from_slice(&self.response);
        match &self.challenge {
            Some(c) => b.extend_from_slice(c),
            None => b.resize(b.len() + hl, 0),
        }
        b.extend_from_slice(&self.dh_value);
        b
    }

    /// Decodes.
    pub fn from_bytes(b: &[u8]) -> Result<Reply, MessageError> {
        let tid = check(b, TYPE_DHCHAP, id::REPLY, 16)?;
        let hl = b[6] as usize;
        let cvalid = b[8] != 0;
        let dhvlen = u16::from_le_bytes([b[10], b[11]]) as usize;
        if b.len() < 16 + 2 * hl + dhvlen {
            return Err(MessageError::Short);
        }
        Ok(Reply {
            tid,
            seqnum: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
            response: b[16..16 + hl].to_vec(),
            challenge: cvalid.then(|| b[16 + hl..16 + 2 * hl].to_vec()),
            dh_value: b[16 + 2 * hl..16 + 2 * hl + dhvlen].to_vec(),
        })
    }
}

/// DH-HMAC-CHAP_Success1: the host is authenticated; R2 when it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Success1 {
    /// Transaction identifier.
    pub tid: u16,
    /// The hash length.
    pub hash_len: u8,
    /// R2, the controller's response to C2.
    pub response: Option<Vec<u8>>,
}

impl Success1 {
    /// Encoded.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.hash_len as usize);
        header(&mut b, TYPE_DHCHAP, id::SUCCESS1, self.tid);
        b.extend_from_slice(&[self.hash_len, 0, self.response.is_some() as u8]);
        b.extend_from_slice(&[0; 7]);
        if let Some(r) = &self.response {
            b.extend_from_slice(r);
        }
        b
    }

    /// Decodes.
    pub fn from_bytes(b: &[u8]) -> Result<Success1, MessageError> {
        let tid = check(b, TYPE_DHCHAP, id::SUCCESS1, 16)?;
        let hl = b[6];
        let response = if b[8] & 1 != 0 {
            let end = 16 + hl as usize;
            Some(b.get(16..end).ok_or(MessageError::Short)?.to_vec())
        } else {
            None
        };
        Ok(Success1 { tid, hash_len: hl, response })
    }
}

/// DH-HMAC-CHAP_Success2: the controller is authenticated too.
pub fn success2(tid: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    header(&mut b, TYPE_DHCHAP, id::SUCCESS2, tid);
    b.resize(16, 0);
    b
}

/// AUTH_Failure1 (controller) or AUTH_Failure2 (host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// [`id::FAILURE1`] or [`id::FAILURE2`].
    pub auth_id: u8,
    /// Transaction identifier.
    pub tid: u16,
    /// The reason code explanation.
    pub reason: u8,
}

impl Failure {
    /// Encoded (reason code 01h, "authentication failure").
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8);
        header(&mut b, TYPE_COMMON, self.auth_id, self.tid);
        b.extend_from_slice(&[0x01, self.reason]);
        b
    }

    /// Decodes either failure message.
    pub fn from_bytes(b: &[u8]) -> Result<Failure, MessageError> {
        let auth_id = *b.get(1).ok_or(MessageError::Short)?;
        let tid = check(b, TYPE_COMMON, auth_id, 8)?;
        if auth_id != id::FAILURE1 && auth_id != id::FAILURE2 {
            return Err(MessageError::Unexpected(b[0], auth_id));
        }
        Ok(Failure { auth_id, tid, reason: b[7] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_round_trip_and_damage_is_named() {
        let s = Secret::new((0..32).collect(), Some(Hash::Sha256)).unwrap();
        let text = s.to_string();
        assert!(text.starts_with("DHHC-1:01:") && text.ends_with(':'), "{text}");
        assert_eq!(Secret::parse(&text).unwrap(), s);
        // One changed character of the base64 part breaks its CRC.
        let mut bad: Vec<char> = text.chars().collect();
        bad[12] = if bad[12] == 'A' { 'B' } else { 'A' };
        let bad: String = bad.into_iter().collect();
        assert!(matches!(Secret::parse(&bad), Err(SecretError::Crc | SecretError::Base64)));
        assert_eq!(Secret::parse("DHHC-1:07:AAAA:"), Err(SecretError::Transform(7)));
        assert_eq!(Secret::parse("DHHC-2:00:AAAA:"), Err(SecretError::Format));
        assert!(matches!(Secret::parse("DHHC-1:00:AAAAAAAA:"), Err(SecretError::Length(2))));
        assert!(!format!("{s:?}").contains("31"), "Debug shows no key bytes");
    }

    #[test]
    fn the_transformation_and_responses_follow_their_definitions() {
        let key: Vec<u8> = (0..32).collect();
        let s = Secret::new(key.clone(), Some(Hash::Sha256)).unwrap();
        let t = s.transformed("nqn.host");
        let mut concat = b"nqn.host".to_vec();
        concat.extend_from_slice(b"NVMe-over-Fabrics");
        assert_eq!(t, Hash::Sha256.hmac(&key, &[&concat]));
        assert_eq!(Secret::new(key.clone(), None).unwrap().transformed("x"), key);
        let c = [7u8; 32];
        let r1 = host_response(Hash::Sha256, &t, &c, 5, 9, "nqn.host", "nqn.sub");
        let mut m = c.to_vec();
        m.extend_from_slice(&[5, 0, 0, 0, 9, 0, 0]);
        m.extend_from_slice(b"HostHostnqn.host\0nqn.sub");
        assert_eq!(r1, Hash::Sha256.hmac(&t, &[&m]));
        let r2 = controller_response(Hash::Sha512, &t, &c, 5, 9, "nqn.host", "nqn.sub");
        assert_eq!(r2.len(), 64);
        assert_ne!(r2[..32], r1[..]);
        // RFC 4231 test case 2: HMAC-SHA-256 with key "Jefe".
        let h = Hash::Sha256.hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(h[..4], [0x5b, 0xdc, 0xc1, 0x46]);
    }

    #[test]
    fn messages_round_trip() {
        let n = Negotiate { tid: 3, sc_c: 0, hashes: vec![1, 2, 3], dh_groups: vec![0, 1, 2] };
        let b = n.to_bytes();
        assert_eq!(b.len(), 72);
        assert_eq!(Negotiate::from_bytes(&b).unwrap(), n);
        let c = Challenge {
            tid: 3,
            hash: 1,
            dh_group: 0,
            seqnum: 77,
            challenge: vec![9; 32],
            dh_value: vec![],
        };
        assert_eq!(Challenge::from_bytes(&c.to_bytes()).unwrap(), c);
        let r = Reply {
            tid: 3,
            response: vec![1; 32],
            challenge: Some(vec![2; 32]),
            seqnum: 78,
            dh_value: vec![],
        };
        assert_eq!(r.to_bytes().len(), 16 + 64);
        assert_eq!(Reply::from_bytes(&r.to_bytes()).unwrap(), r);
        let s = Success1 { tid: 3, hash_len: 32, response: Some(vec![4; 32]) };
        assert_eq!(Success1::from_bytes(&s.to_bytes()).unwrap(), s);
        let f = Failure { auth_id: id::FAILURE1, tid: 3, reason: FailureReason::Failed as u8 };
        assert_eq!(Failure::from_bytes(&f.to_bytes()).unwrap(), f);
        assert_eq!(kind(&success2(3)), Some((TYPE_DHCHAP, id::SUCCESS2)));
        // Lengths from the wire are checked.
        let mut short = r.to_bytes();
        short[6] = 200;
        assert_eq!(Reply::from_bytes(&short), Err(MessageError::Short));
        assert!(Challenge::from_bytes(&b).is_err(), "a Negotiate is not a Challenge");
    }

    #[test]
    fn the_commands_carry_secp_spsp_and_the_length() {
        let e = AuthCommand::send(72).to_sqe();
        assert_eq!(e.cdw10, 0xE901_0100);
        let c = AuthCommand::from_sqe(&e).unwrap();
        assert!(c.send && c.is_dhchap() && c.length == 72);
        assert!(!AuthCommand::from_sqe(&AuthCommand::receive(4096).to_sqe()).unwrap().send);
    }
}
