//! The NBD wire format: magics, option and command codes, flags, errors,
//! and the fixed-size messages of both phases (all big-endian).
//!
//! Values follow the NBD protocol document (`doc/proto.md` of the
//! reference implementation).

/// `NBDMAGIC`: the first eight bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle negotiation, and the prefix of every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Prefix of every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Prefix of every request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Prefix of every simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags the server sends.
pub mod handshake {
    /// The server speaks fixed newstyle (options get replies).
    pub const FIXED_NEWSTYLE: u16 = 1 << 0;
    /// The 124 zero bytes after `NBD_OPT_EXPORT_NAME` may be left out.
    pub const NO_ZEROES: u16 = 1 << 1;
}

/// Client flags, the answer to the handshake flags.
pub mod client {
    /// The client speaks fixed newstyle.
    pub const FIXED_NEWSTYLE: u32 = 1 << 0;
    /// The client wants no zero padding after `NBD_OPT_EXPORT_NAME`.
    pub const NO_ZEROES: u32 = 1 << 1;
    /// Every flag this server understands; any other closes the connection.
    pub const KNOWN: u32 = FIXED_NEWSTYLE | NO_ZEROES;
}

/// Option codes of the negotiation phase.
pub mod opt {
    /// Choose an export by name and end negotiation (no reply on error).
    pub const EXPORT_NAME: u32 = 1;
    /// End the session.
    pub const ABORT: u32 = 2;
    /// List the exports.
    pub const LIST: u32 = 3;
    /// Upgrade to TLS.
    pub const STARTTLS: u32 = 5;
    /// Describe an export.
    pub const INFO: u32 = 6;
    /// Describe an export and enter transmission on it.
    pub const GO: u32 = 7;
    /// Ask for structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;

    /// The option's name in the protocol document, for logs.
    pub fn name(code: u32) -> &'static str {
        match code {
            EXPORT_NAME => "NBD_OPT_EXPORT_NAME",
            ABORT => "NBD_OPT_ABORT",
            LIST => "NBD_OPT_LIST",
            4 => "NBD_OPT_PEEK_EXPORT",
            STARTTLS => "NBD_OPT_STARTTLS",
            INFO => "NBD_OPT_INFO",
            GO => "NBD_OPT_GO",
            STRUCTURED_REPLY => "NBD_OPT_STRUCTURED_REPLY",
            9 => "NBD_OPT_LIST_META_CONTEXT",
            10 => "NBD_OPT_SET_META_CONTEXT",
            11 => "NBD_OPT_EXTENDED_HEADERS",
            _ => "unknown option",
        }
    }
}

/// Option reply types.
pub mod rep {
    /// The option succeeded (and ends its replies).
    pub const ACK: u32 = 1;
    /// One export of `NBD_OPT_LIST`.
    pub const SERVER: u32 = 2;
    /// One item of information of `NBD_OPT_INFO` / `NBD_OPT_GO`.
    pub const INFO: u32 = 3;
    const ERR: u32 = 1 << 31;
    /// The option is not supported.
    pub const ERR_UNSUP: u32 = ERR | 1;
    /// The server does not allow the option (policy, not ability).
    pub const ERR_POLICY: u32 = ERR | 2;
    /// The option is malformed.
    pub const ERR_INVALID: u32 = ERR | 3;
    /// The server requires TLS first (`NBD_OPT_STARTTLS`).
    pub const ERR_TLS_REQD: u32 = ERR | 5;
    /// The export does not exist.
    pub const ERR_UNKNOWN: u32 = ERR | 6;
    /// The server is shutting down.
    pub const ERR_SHUTDOWN: u32 = ERR | 7;
    /// The option's data is longer than the server accepts.
    pub const ERR_TOO_BIG: u32 = ERR | 9;
}

/// Information types of `NBD_REP_INFO`.
pub mod info {
    /// Size and transmission flags.
    pub const EXPORT: u16 = 0;
    /// The export's canonical name.
    pub const NAME: u16 = 1;
    /// A human-readable description.
    pub const DESCRIPTION: u16 = 2;
    /// Minimum, preferred and maximum block sizes.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Transmission flags, per export.
pub mod tx {
    /// Always set: the other flags are meaningful.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// Writes are refused.
    pub const READ_ONLY: u16 = 1 << 1;
    /// `NBD_CMD_FLUSH` is supported.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// `NBD_CMD_FLAG_FUA` is supported.
    pub const SEND_FUA: u16 = 1 << 3;
    /// `NBD_CMD_TRIM` is supported.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_CMD_WRITE_ZEROES` is supported.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// A flush on any connection covers writes completed on all of them.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// Command types of the transmission phase.
pub mod cmd {
    /// Read.
    pub const READ: u16 = 0;
    /// Write.
    pub const WRITE: u16 = 1;
    /// Disconnect.
    pub const DISC: u16 = 2;
    /// Flush.
    pub const FLUSH: u16 = 3;
    /// Trim (discard).
    pub const TRIM: u16 = 4;
    /// Write zeroes.
    pub const WRITE_ZEROES: u16 = 6;
}

/// Command flags.
pub mod cmd_flag {
    /// Force unit access: durable before the reply.
    pub const FUA: u16 = 1 << 0;
    /// `NBD_CMD_WRITE_ZEROES` must write, not punch a hole.
    pub const NO_HOLE: u16 = 1 << 1;
    /// Every flag this server understands.
    pub const KNOWN: u16 = FUA | NO_HOLE;
}

/// Error values of replies (Linux errno values, by the protocol).
pub mod errno {
    /// Operation not permitted (a write to a read-only export).
    pub const EPERM: u32 = 1;
    /// Input/output error.
    pub const EIO: u32 = 5;
    /// Invalid argument.
    pub const EINVAL: u32 = 22;
    /// No space left (a write past the end, or the FTL is full).
    pub const ENOSPC: u32 = 28;
    /// Value too large (a request above the maximum payload).
    pub const EOVERFLOW: u32 = 75;
    /// Operation not supported.
    pub const ENOTSUP: u32 = 95;
    /// The server is shutting down.
    pub const ESHUTDOWN: u32 = 108;
}

/// Bytes of a request header.
pub const REQUEST_LEN: usize = 28;
/// Bytes of an option header: magic, option code, data length.
pub const OPTION_LEN: usize = 16;

/// One transmission-phase request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`cmd_flag`).
    pub flags: u16,
    /// Command type (`cmd`).
    pub kind: u16,
    /// The client's cookie, echoed in the reply.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub length: u32,
}

impl Request {
    /// Decodes a header; `None` when the magic is wrong.
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Option<Request> {
        if be32(&b[0..4]) != REQUEST_MAGIC {
            return None;
        }
        Some(Request {
            flags: be16(&b[4..6]),
            kind: be16(&b[6..8]),
            cookie: be64(&b[8..16]),
            offset: be64(&b[16..24]),
            length: be32(&b[24..28]),
        })
    }

    /// Encodes the header (what a client sends).
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }
}

/// A simple reply header: magic, error, cookie.
pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// An option reply header: magic, option, reply type, data length.
pub fn option_reply(option: u32, reply: u32, len: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..8].copy_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    b[8..12].copy_from_slice(&option.to_be_bytes());
    b[12..16].copy_from_slice(&reply.to_be_bytes());
    b[16..20].copy_from_slice(&len.to_be_bytes());
    b
}

/// A big-endian `u16` from two bytes.
pub fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// A big-endian `u32` from four bytes.
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A big-endian `u64` from eight bytes.
pub fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[0..8].try_into().expect("eight bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_spell_their_names() {
        assert_eq!(&NBD_MAGIC.to_be_bytes(), b"NBDMAGIC");
        assert_eq!(&IHAVEOPT.to_be_bytes(), b"IHAVEOPT");
    }

    #[test]
    fn requests_round_trip_and_bad_magic_is_refused() {
        let r = Request { flags: 1, kind: cmd::WRITE, cookie: 0xdead, offset: 4096, length: 512 };
        let b = r.encode();
        assert_eq!(Request::decode(&b), Some(r));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(Request::decode(&bad), None);
    }

    #[test]
    fn replies_have_their_magics_first() {
        let r = simple_reply(errno::EINVAL, 7);
        assert_eq!(be32(&r[0..4]), SIMPLE_REPLY_MAGIC);
        assert_eq!(be32(&r[4..8]), 22);
        assert_eq!(be64(&r[8..16]), 7);
        let o = option_reply(opt::GO, rep::ERR_UNKNOWN, 3);
        assert_eq!(be64(&o[0..8]), OPT_REPLY_MAGIC);
        assert_eq!(be32(&o[12..16]), 0x8000_0006);
    }
}
