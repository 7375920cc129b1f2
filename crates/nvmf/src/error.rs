//! Typed errors of the target.

use zns_spec::tcp::PduError;

/// Every failure of the target.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NvmfError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The connection failed or the host went away.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The host sent a PDU the transport forbids; the connection is
    /// terminated with a C2HTermReq saying why.
    #[error("NVMe/TCP protocol error: {0}")]
    Pdu(#[from] PduError),
    /// The host stopped sending in the middle of a PDU, or did not send
    /// its ICReq or Connect in time: the connection is closed.
    #[error("timed out: {0}")]
    Timeout(String),
    /// No command reached controller `cntlid` within its Keep Alive
    /// Timeout: the controller and its queues are torn down.
    #[error("controller {cntlid}: Keep Alive Timeout of {kato_ms} ms expired")]
    KeepAliveExpired {
        /// The controller.
        cntlid: u16,
        /// Its KATO.
        kato_ms: u32,
    },
    /// The subsystem given to the target is unusable.
    #[error("invalid subsystem: {0}")]
    Subsystem(String),
}

/// Result alias of the crate.
pub type Result<T, E = NvmfError> = std::result::Result<T, E>;

impl From<zns_nvme_tcp::TcpError> for NvmfError {
    fn from(e: zns_nvme_tcp::TcpError) -> Self {
        use zns_nvme_tcp::TcpError;
        match e {
            TcpError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                NvmfError::Timeout(e.to_string())
            }
            TcpError::Io(e) => NvmfError::Io(e),
            TcpError::Pdu(e) => NvmfError::Pdu(e),
            other => NvmfError::Io(std::io::Error::other(other.to_string())),
        }
    }
}
