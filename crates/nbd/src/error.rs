//! Typed errors of the NBD server and client.

/// Every failure of the server and the client.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NbdError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The connection failed or the peer went away.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the protocol; its connection is closed.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The peer began a message (an option, or a request with its payload)
    /// and did not send the rest in time, or did not finish negotiating in
    /// time; its connection is closed.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A read failed on the device after its reply header and part of its
    /// data had been sent: simple replies cannot report that, so the
    /// connection is closed.
    #[error(
        "read of {length} bytes at byte {offset} failed after part of its data was sent: {source}"
    )]
    ReadAborted {
        /// Byte offset of the read request.
        offset: u64,
        /// Byte length of the read request.
        length: u32,
        /// The device's error.
        #[source]
        source: zns_block::BlockError,
    },
    /// TLS could not be set up (a certificate or key unusable), or a
    /// client's TLS failed or was missing where the server requires it.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The exports given to the server are unusable.
    #[error("invalid export: {0}")]
    Export(String),
    /// The server answered an option with an error (client side).
    #[error("server refused {option}: {reply}{}", if message.is_empty() { String::new() } else { format!(" ({message})") })]
    Refused {
        /// The option's name.
        option: &'static str,
        /// The reply type's name.
        reply: &'static str,
        /// The server's message, if any.
        message: String,
    },
    /// The server answered a command with an error (client side).
    #[error("server returned {name} ({errno}) for {command}")]
    Command {
        /// The command's name.
        command: &'static str,
        /// The errno value.
        errno: u32,
        /// The errno's name.
        name: &'static str,
    },
}

/// Result alias of the crate.
pub type Result<T, E = NbdError> = std::result::Result<T, E>;

/// The name of an errno value of the NBD protocol.
pub fn errno_name(errno: u32) -> &'static str {
    use crate::wire::errno::*;
    match errno {
        0 => "success",
        EPERM => "EPERM",
        EIO => "EIO",
        12 => "ENOMEM",
        EINVAL => "EINVAL",
        ENOSPC => "ENOSPC",
        EOVERFLOW => "EOVERFLOW",
        ENOTSUP => "ENOTSUP",
        ESHUTDOWN => "ESHUTDOWN",
        _ => "unknown error",
    }
}
