//! The handshake and option haggling of fixed newstyle negotiation.
//!
//! The server speaks first (`NBDMAGIC IHAVEOPT` and its flags); the
//! client answers with its flags and sends options until one of them
//! (`NBD_OPT_EXPORT_NAME` or `NBD_OPT_GO`) selects an export and starts
//! the transmission phase, or `NBD_OPT_ABORT` ends the session.
//!
//! A server that requires TLS refuses every option but `NBD_OPT_STARTTLS`
//! and `NBD_OPT_ABORT` until the client has started it (see [`crate::tls`]).
//!
//! Each option (and the client's flags) must arrive whole within the stall
//! timeout of its first byte, like a request; the whole phase must end
//! within [`NEGOTIATION_STALLS`] stall timeouts of the connection's start
//! (the session keeps both deadlines), so a peer that connects and sends
//! nothing, or idles between options, does not hold its connection
//! either. The session hands this module whole options only.

use std::io::Write;
use std::sync::Arc;

use crate::error::{NbdError, Result};
use crate::export::Export;
use crate::tls::TlsError;
use crate::wire::{self, handshake, info, opt, rep};

/// The longest option the server reads: a 4096-byte name plus room for
/// information requests. A longer one closes the connection.
const MAX_OPTION: u32 = 16 * 1024;

/// Options one connection may send before it must choose an export.
const MAX_OPTIONS: usize = 256;

/// Negotiation must end within this many stall timeouts of the
/// connection's start: real clients take milliseconds, and two stall
/// timeouts leave a slow link room for an option or two, each of which may
/// take a stall timeout.
pub(crate) const NEGOTIATION_STALLS: u32 = 2;

/// The outcome of a successful negotiation.
#[derive(Debug)]
pub(crate) struct Session {
    /// The chosen export.
    pub export: Arc<Export>,
    /// The client asked for block sizes (`NBD_OPT_GO` with
    /// `NBD_INFO_BLOCK_SIZE`) and so promised to respect them; requests
    /// that do not are refused rather than emulated.
    pub respects_block_size: bool,
}

/// Where a connection stands with TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    /// The server has no TLS: `NBD_OPT_STARTTLS` is unsupported.
    Off,
    /// The server requires TLS and the client has not started it: every
    /// option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` is refused.
    Required,
    /// Negotiation goes on inside TLS.
    Active,
}

/// How a round of options ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// An export was chosen: the transmission phase begins.
    Go(Session),
    /// `NBD_OPT_STARTTLS` was acknowledged: the TLS handshake follows, and
    /// then [`Negotiation::options`] again inside TLS.
    StartTls,
    /// The client aborted or went away.
    End,
}

/// The negotiation phase of one connection.
#[derive(Debug)]
pub(crate) struct Negotiation {
    exports: Vec<Arc<Export>>,
    tls: Tls,
    fixed: bool,
    no_zeroes: bool,
    /// Options received so far, TLS or not.
    options: usize,
    /// Some option was refused with `NBD_REP_ERR_TLS_REQD`.
    pub(crate) refused_for_tls: bool,
}

/// The server's greeting: `NBDMAGIC`, `IHAVEOPT` and its handshake flags.
pub(crate) fn greeting() -> Vec<u8> {
    let mut g = Vec::with_capacity(18);
    g.extend_from_slice(&wire::NBD_MAGIC.to_be_bytes());
    g.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
    g.extend_from_slice(&(handshake::FIXED_NEWSTYLE | handshake::NO_ZEROES).to_be_bytes());
    g
}

/// Bytes of the client's flags, which answer the greeting.
pub(crate) const CLIENT_FLAGS_LEN: usize = 4;

/// The code and data length an option header announces, checked: the
/// magic, and at most [`MAX_OPTION`] bytes of data.
pub(crate) fn option_header(h: &[u8]) -> Result<(u32, usize)> {
    if wire::be64(&h[0..8]) != wire::IHAVEOPT {
        return Err(NbdError::Protocol("option without the IHAVEOPT magic".into()));
    }
    let option = wire::be32(&h[8..12]);
    let len = wire::be32(&h[12..16]);
    if len > MAX_OPTION {
        return Err(NbdError::Protocol(format!(
            "{} carries {len} bytes, more than the {MAX_OPTION} accepted",
            opt::name(option)
        )));
    }
    Ok((option, len as usize))
}

impl Negotiation {
    /// The negotiation of a client that sent `client_flags`. With
    /// `tls_required` the client must start TLS before anything else.
    pub(crate) fn new(
        client_flags: &[u8],
        exports: Vec<Arc<Export>>,
        tls_required: bool,
    ) -> Result<Negotiation> {
        let client_flags = wire::be32(client_flags);
        if client_flags & !wire::client::KNOWN != 0 {
            return Err(NbdError::Protocol(format!("unknown client flags {client_flags:#x}")));
        }
        Ok(Negotiation {
            exports,
            tls: if tls_required { Tls::Required } else { Tls::Off },
            fixed: client_flags & wire::client::FIXED_NEWSTYLE != 0,
            no_zeroes: client_flags & wire::client::NO_ZEROES != 0,
            options: 0,
            refused_for_tls: false,
        })
    }

    /// Negotiation goes on inside TLS from now on.
    pub(crate) fn tls_started(&mut self) {
        self.tls = Tls::Active;
    }

    /// Answers one option (its replies appended to `w`): `None` while no
    /// export is chosen, TLS not started and the session not ended.
    pub(crate) fn option(
        &mut self,
        option: u32,
        data: &[u8],
        w: &mut Vec<u8>,
    ) -> Result<Option<Outcome>> {
        if self.options >= MAX_OPTIONS {
            return Err(NbdError::Protocol(format!(
                "no export chosen after {MAX_OPTIONS} options"
            )));
        }
        self.options += 1;
        tracing::debug!(option = opt::name(option), len = data.len(), "NBD option");
        let exports = &self.exports;
        match option {
            opt::EXPORT_NAME if self.tls == Tls::Required => {
                return Err(TlsError::NotStarted.into());
            }
            opt::EXPORT_NAME => {
                return Ok(Some(match export_name(w, exports, data, self.no_zeroes)? {
                    Some(session) => Outcome::Go(session),
                    None => Outcome::End,
                }));
            }
            opt::ABORT => {
                // The client may already have closed; the ACK is a courtesy.
                reply(w, option, rep::ACK, &[])?;
                return Ok(Some(Outcome::End));
            }
            _ if !self.fixed => {
                return Err(NbdError::Protocol(format!(
                    "{} from a client that does not speak fixed newstyle",
                    opt::name(option)
                )));
            }
            opt::STARTTLS => match self.tls {
                Tls::Off => reply(w, option, rep::ERR_UNSUP, b"TLS is not supported")?,
                Tls::Active => reply(w, option, rep::ERR_INVALID, b"TLS is already active")?,
                Tls::Required if !data.is_empty() => {
                    reply(w, option, rep::ERR_INVALID, b"NBD_OPT_STARTTLS carries no data")?
                }
                Tls::Required => {
                    reply(w, option, rep::ACK, &[])?;
                    return Ok(Some(Outcome::StartTls));
                }
            },
            _ if self.tls == Tls::Required => {
                self.refused_for_tls = true;
                let msg = "this server requires TLS: send NBD_OPT_STARTTLS first";
                reply(w, option, rep::ERR_TLS_REQD, msg.as_bytes())?;
            }
            opt::LIST => list(w, exports, data)?,
            opt::INFO | opt::GO => {
                if let Some(session) = info_or_go(w, exports, option, data)? {
                    return Ok(Some(Outcome::Go(session)));
                }
            }
            _ => {
                let msg = format!("{} is not supported", opt::name(option));
                reply(w, option, rep::ERR_UNSUP, msg.as_bytes())?;
            }
        }
        Ok(None)
    }
}

/// Sends one option reply.
fn reply<W: Write>(w: &mut W, option: u32, kind: u32, data: &[u8]) -> Result<()> {
    w.write_all(&wire::option_reply(option, kind, data.len() as u32))?;
    w.write_all(data)?;
    Ok(())
}

/// The export a name selects: the empty name is the default export, the
/// first one.
fn find<'a>(exports: &'a [Arc<Export>], name: &[u8]) -> Option<&'a Arc<Export>> {
    if name.is_empty() {
        return exports.first();
    }
    exports.iter().find(|e| e.name.as_bytes() == name)
}

fn unknown_export(exports: &[Arc<Export>], name: &[u8]) -> String {
    let names: Vec<&str> = exports.iter().map(|e| e.name.as_str()).collect();
    format!("no export named {:?}; exports: {}", String::from_utf8_lossy(name), names.join(", "))
}

/// `NBD_OPT_EXPORT_NAME`: no reply on an unknown name, the connection just
/// closes (the protocol offers nothing else).
fn export_name<W: Write>(
    w: &mut W,
    exports: &[Arc<Export>],
    name: &[u8],
    no_zeroes: bool,
) -> Result<Option<Session>> {
    let Some(export) = find(exports, name) else {
        return Err(NbdError::Protocol(unknown_export(exports, name)));
    };
    w.write_all(&export.size().to_be_bytes())?;
    w.write_all(&export.transmission_flags().to_be_bytes())?;
    if !no_zeroes {
        w.write_all(&[0u8; 124])?;
    }
    w.flush()?;
    Ok(Some(Session { export: Arc::clone(export), respects_block_size: false }))
}

/// `NBD_OPT_LIST`: one `NBD_REP_SERVER` per export, then an ACK.
fn list<W: Write>(w: &mut W, exports: &[Arc<Export>], data: &[u8]) -> Result<()> {
    if !data.is_empty() {
        return reply(w, opt::LIST, rep::ERR_INVALID, b"NBD_OPT_LIST carries no data");
    }
    for e in exports {
        let mut d = Vec::with_capacity(4 + e.name.len());
        d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
        d.extend_from_slice(e.name.as_bytes());
        reply(w, opt::LIST, rep::SERVER, &d)?;
    }
    reply(w, opt::LIST, rep::ACK, &[])
}

/// `NBD_OPT_INFO` and `NBD_OPT_GO`: parse the name and the information
/// requests, answer with the export's size, flags and block sizes (always:
/// the protocol lets a server send them unasked), then an ACK.
fn info_or_go<W: Write>(
    w: &mut W,
    exports: &[Arc<Export>],
    option: u32,
    data: &[u8],
) -> Result<Option<Session>> {
    let Some((name, requests)) = parse_info_request(data) else {
        let msg = format!("{} data is malformed", opt::name(option));
        reply(w, option, rep::ERR_INVALID, msg.as_bytes())?;
        return Ok(None);
    };
    let Some(export) = find(exports, name) else {
        reply(w, option, rep::ERR_UNKNOWN, unknown_export(exports, name).as_bytes())?;
        return Ok(None);
    };
    let mut d = Vec::with_capacity(64);
    d.extend_from_slice(&info::EXPORT.to_be_bytes());
    d.extend_from_slice(&export.size().to_be_bytes());
    d.extend_from_slice(&export.transmission_flags().to_be_bytes());
    reply(w, option, rep::INFO, &d)?;
    if requests.contains(&info::NAME) {
        info_string(w, option, info::NAME, &export.name)?;
    }
    if requests.contains(&info::DESCRIPTION) && !export.description.is_empty() {
        info_string(w, option, info::DESCRIPTION, &export.description)?;
    }
    let (min, preferred, max) = export.block_sizes();
    d.clear();
    d.extend_from_slice(&info::BLOCK_SIZE.to_be_bytes());
    for v in [min, preferred, max] {
        d.extend_from_slice(&v.to_be_bytes());
    }
    reply(w, option, rep::INFO, &d)?;
    reply(w, option, rep::ACK, &[])?;
    if option != opt::GO {
        return Ok(None);
    }
    w.flush()?;
    let respects_block_size = requests.contains(&info::BLOCK_SIZE);
    Ok(Some(Session { export: Arc::clone(export), respects_block_size }))
}

fn info_string<W: Write>(w: &mut W, option: u32, kind: u16, s: &str) -> Result<()> {
    let mut d = Vec::with_capacity(2 + s.len());
    d.extend_from_slice(&kind.to_be_bytes());
    d.extend_from_slice(s.as_bytes());
    reply(w, option, rep::INFO, &d)
}

/// Splits `NBD_OPT_INFO`/`GO` data into the name and the requested
/// information types; `None` when the lengths do not add up.
fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_len = wire::be32(data.get(0..4)?) as usize;
    let name = data.get(4..4usize.checked_add(name_len)?)?;
    let rest = &data[4 + name_len..];
    let n = wire::be16(rest.get(0..2)?) as usize;
    let reqs = &rest[2..];
    if reqs.len() != 2 * n {
        return None;
    }
    Some((name, reqs.chunks_exact(2).map(wire::be16).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_requests_parse_and_bad_lengths_do_not() {
        let mut d = vec![0, 0, 0, 3];
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&[0, 2, 0, 3, 0, 1]);
        let (name, reqs) = parse_info_request(&d).unwrap();
        assert_eq!(name, b"abc");
        assert_eq!(reqs, vec![3, 1]);
        assert!(parse_info_request(&d[..d.len() - 1]).is_none());
        assert!(parse_info_request(&[0xff, 0xff, 0xff, 0xff, 0, 0]).is_none());
        assert!(parse_info_request(&[]).is_none());
    }
}
