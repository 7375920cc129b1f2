//! # zns-nvme-tcp
//!
//! NVMe/TCP framing, for both ends of a connection: znskit's host queue
//! pair (`zns-driver`'s `tcp` transport) and its target (`zns-nvmf`). The
//! PDU formats themselves are `zns-spec`'s; this crate moves them over a
//! socket, and depends on nothing else of znskit.
//!
//! | module | concern |
//! |---|---|
//! | `pdu` | [`PduReader`]: whole PDUs in, each header checked against its limits before its data is awaited, digests checked; [`write_pdu`] and [`write_pdu_header`] out |
//! | `input` | [`SocketInput`]: a connection's receive buffer that looks for input and fetches it in one system call, with deadlines for a peer that stops half way; [`precise_timers`] |
//!
//! Thread safety: everything here belongs to one connection and is used
//! by one thread at a time (`Send`).

mod input;
mod pdu;

pub use input::{precise_timers, SocketInput};
pub use pdu::{write_pdu, write_pdu_header, PduReader, Received, MAX_HLEN};

use zns_spec::tcp::PduError;
use zns_spec::Status;

/// Failures of the TCP transport.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TcpError {
    /// The connection failed or the peer went away.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent a PDU the transport forbids.
    #[error("NVMe/TCP protocol error: {0}")]
    Pdu(PduError),
    /// The target ended the connection with a termination request.
    #[error("the target terminated the connection (FES {fes:#x}, FEI {fei:#x})")]
    Terminated {
        /// Fatal error status.
        fes: u16,
        /// Fatal error information.
        fei: u32,
    },
    /// DH-HMAC-CHAP authentication failed or was refused.
    #[error("DH-HMAC-CHAP authentication: {0}")]
    Authentication(String),
    /// A Fabrics or admin command of the connection's set-up failed.
    #[error("{what}: {}", describe_failure(what, *status, *result))]
    Command {
        /// What was attempted.
        what: &'static str,
        /// The status.
        status: Status,
        /// Completion dword 0 (Connect's Invalid Parameters names a field).
        result: u32,
    },
}

/// Result alias of the transport.
pub type Result<T, E = TcpError> = std::result::Result<T, E>;

/// A failed set-up command's status by its name (Connect's own names for
/// Connect), and for Connect Invalid Parameters the field it names.
fn describe_failure(what: &str, status: Status, result: u32) -> String {
    use zns_spec::fabrics::connect_status;
    if what != "Fabrics Connect" {
        return status.to_string();
    }
    let Some(name) = connect_status::name(status) else { return status.to_string() };
    let code = format!("{name} (SCT {:X}h, SC {:02X}h)", status.sct.raw(), status.sc);
    if status != connect_status::INVALID_PARAMETERS {
        return code;
    }
    let (offset, in_data) = (result & 0xFFFF, result & (1 << 16) != 0);
    let field = match (in_data, offset) {
        (true, 16) => "CNTLID: the target has no such controller",
        (true, 256) => "SUBNQN: the target has no such subsystem",
        (true, 512) => "HOSTNQN",
        (false, 42) => "QID: beyond the queues the controller granted",
        (false, 44) => "SQSIZE",
        _ => "",
    };
    let place = if in_data { "of the Connect data" } else { "of the command" };
    format!("{code}: byte {offset} {place} {field}").trim_end().to_string()
}
