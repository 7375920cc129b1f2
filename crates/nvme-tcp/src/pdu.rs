//! NVMe/TCP PDU framing over a byte stream: reading a PDU's header, its
//! digest and data (checked against the negotiated digests and the data
//! limit), and writing PDUs with their digests.
//!
//! Buffers are owned by the connection and reused: a PDU read allocates
//! nothing once the data buffer has grown to the largest PDU seen.

use std::io::{Read, Write};

use zns_spec::tcp::{self, CommonHeader, Digests, PduError, PduType, DIGEST_SIZE};

use crate::{Result, TcpError};

/// The longest PDU header (ICReq/ICResp: 128 bytes; a command capsule's
/// is 72).
pub const MAX_HLEN: usize = tcp::IC_PDU_SIZE;

/// One received PDU: its common header, the rest of its header, and its
/// data (in the reader's buffer).
///
/// Thread safety: plain data.
#[derive(Debug)]
pub struct Received {
    /// The common header.
    pub ch: CommonHeader,
    /// The whole header (`ch.hlen` bytes, common header included).
    pub header: [u8; MAX_HLEN],
    /// Bytes of data now in [`PduReader::data`].
    pub data_len: usize,
}

impl Received {
    /// Bytes 8.. of the header (the PDU-specific part).
    pub fn specific(&self) -> &[u8] {
        &self.header[8..self.ch.hlen as usize]
    }
}

/// Reads PDUs, checking them against the connection's digests and data
/// limits before any data is buffered.
///
/// Thread safety: `Send`; one per connection.
#[derive(Debug, Default)]
pub struct PduReader {
    /// Digests in force (none until ICReq/ICResp).
    pub digests: Digests,
    /// Most data bytes one data PDU (H2CData, C2HData) may carry.
    pub max_data: usize,
    /// Most data bytes one command capsule may carry (the in-capsule data
    /// size a target offers; a host never receives capsules).
    pub max_capsule_data: usize,
    data: Vec<u8>,
    /// The last PDU read whose data failed its digest: framing held, so
    /// the receiver may answer for the command it names and go on.
    damaged: Option<Received>,
}

impl PduReader {
    /// A reader for a connection with no digests yet and `max_data` bytes
    /// of data allowed per PDU of any type.
    pub fn new(max_data: usize) -> PduReader {
        PduReader { max_data, max_capsule_data: max_data, ..PduReader::default() }
    }

    /// The data of the last PDU read.
    pub fn data(&self, len: usize) -> &[u8] {
        &self.data[..len]
    }

    /// After a [`PduError::DataDigest`]: the PDU whose data was damaged
    /// (header intact, whole PDU consumed), once.
    pub fn take_damaged(&mut self) -> Option<Received> {
        self.damaged.take()
    }

    /// The data limit of PDUs of type `t`.
    fn limit(&self, t: PduType) -> usize {
        match t {
            PduType::CapsuleCmd => self.max_capsule_data,
            _ => self.max_data,
        }
    }

    /// The length of the PDU `buffered` begins with, once its common
    /// header is there (`None` before), after the checks [`PduReader::read`]
    /// makes of that header: a PDU the transport forbids is refused before
    /// any more of it is awaited.
    pub fn pdu_len(&self, buffered: &[u8]) -> std::result::Result<Option<usize>, PduError> {
        let Some(head) = buffered.get(..8) else { return Ok(None) };
        let ch = CommonHeader::from_bytes(head.try_into().expect("8 bytes"))?;
        ch.layout(self.digests, self.limit(ch.pdu_type))?;
        Ok(Some(ch.plen as usize))
    }

    /// Reads one whole PDU.
    pub fn read<R: Read>(&mut self, r: &mut R) -> Result<Received> {
        self.damaged = None;
        let mut header = [0u8; MAX_HLEN];
        r.read_exact(&mut header[..8])?;
        let ch = CommonHeader::from_bytes(header[..8].try_into().expect("8 bytes"))
            .map_err(TcpError::Pdu)?;
        let layout = ch.layout(self.digests, self.limit(ch.pdu_type)).map_err(TcpError::Pdu)?;
        let hlen = ch.hlen as usize;
        r.read_exact(&mut header[8..hlen])?;
        let mut consumed = hlen;
        if layout.header_digest {
            let mut d = [0u8; DIGEST_SIZE];
            r.read_exact(&mut d)?;
            consumed += DIGEST_SIZE;
            let got = u32::from_le_bytes(d);
            let computed = tcp::digest(&header[..hlen]);
            if got != computed {
                return Err(TcpError::Pdu(PduError::HeaderDigest {
                    pdu: ch.pdu_type,
                    got,
                    computed,
                }));
            }
        }
        // Padding up to PDO (hosts align data to CPDA; ours is 0, but
        // honour any PDO the layout check accepted).
        let mut pad = layout.data_offset.saturating_sub(consumed);
        if layout.data_len > 0 {
            while pad > 0 {
                let mut skip = [0u8; 64];
                let n = pad.min(skip.len());
                r.read_exact(&mut skip[..n])?;
                pad -= n;
            }
        }
        if self.data.len() < layout.data_len {
            self.data.resize(layout.data_len, 0);
        }
        r.read_exact(&mut self.data[..layout.data_len])?;
        if layout.data_digest {
            let mut d = [0u8; DIGEST_SIZE];
            r.read_exact(&mut d)?;
            let got = u32::from_le_bytes(d);
            let computed = tcp::digest(&self.data[..layout.data_len]);
            if got != computed {
                self.damaged = Some(Received { ch, header, data_len: layout.data_len });
                return Err(TcpError::Pdu(PduError::DataDigest {
                    pdu: ch.pdu_type,
                    got,
                    computed,
                }));
            }
        }
        Ok(Received { ch, header, data_len: layout.data_len })
    }
}

/// Writes one PDU: `specific` (header bytes 8..hlen), then `data` with
/// the digests in force.
pub fn write_pdu<W: Write>(
    w: &mut W,
    digests: Digests,
    pdu_type: PduType,
    extra_flags: u8,
    specific: &[u8],
    data: &[u8],
) -> Result<()> {
    let data_digest = write_pdu_header(w, digests, pdu_type, extra_flags, specific, data.len())?;
    if !data.is_empty() {
        w.write_all(data)?;
        if data_digest {
            w.write_all(&tcp::digest(data).to_le_bytes())?;
        }
    }
    Ok(())
}

/// Writes the header of a PDU that carries `data_len` bytes of data (its
/// header digest too): the data, and after it its digest when this
/// returns `true`, are the caller's to write. For a sender that hands
/// the data to the socket from where it lies instead of copying it.
pub fn write_pdu_header<W: Write>(
    w: &mut W,
    digests: Digests,
    pdu_type: PduType,
    extra_flags: u8,
    specific: &[u8],
    data_len: usize,
) -> Result<bool> {
    let ch = CommonHeader::new(pdu_type, digests, data_len, extra_flags);
    let mut header = [0u8; MAX_HLEN];
    let hlen = ch.hlen as usize;
    header[..8].copy_from_slice(&ch.to_bytes());
    header[8..hlen].copy_from_slice(specific);
    w.write_all(&header[..hlen])?;
    if ch.flags & tcp::FLAG_HDGST != 0 {
        w.write_all(&tcp::digest(&header[..hlen]).to_le_bytes())?;
    }
    Ok(data_len > 0 && ch.flags & tcp::FLAG_DDGST != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdus_round_trip_with_digests_and_damage_is_caught() {
        let digests = Digests { header: true, data: true };
        let mut wire = Vec::new();
        let specific = [7u8; 16];
        write_pdu(&mut wire, digests, PduType::H2cData, tcp::FLAG_DATA_LAST, &specific, b"hello")
            .unwrap();
        let mut r = PduReader::new(4096);
        r.digests = digests;
        let p = r.read(&mut &wire[..]).unwrap();
        assert_eq!(p.ch.pdu_type, PduType::H2cData);
        assert_eq!(p.specific(), &specific);
        assert_eq!(r.data(p.data_len), b"hello");
        let mut bad = wire.clone();
        let n = bad.len();
        bad[n - 6] ^= 1; // a data byte
        assert!(matches!(r.read(&mut &bad[..]), Err(TcpError::Pdu(PduError::DataDigest { .. }))));
        let damaged = r.take_damaged().expect("the damaged PDU is kept");
        assert_eq!(damaged.specific(), &specific, "its header is intact");
        assert!(r.take_damaged().is_none(), "once");
        let mut bad = wire;
        bad[10] ^= 1; // a header byte
        assert!(matches!(r.read(&mut &bad[..]), Err(TcpError::Pdu(PduError::HeaderDigest { .. }))));
    }
}
