//! # zns-nbd
//!
//! An NBD (Network Block Device) server for znskit's block devices: the
//! host FTL ([`zns_ftl::Ftl`]) exported this way is a disk that QEMU
//! (`-blockdev driver=nbd`), the Linux kernel (`nbd-client`), `qemu-img`,
//! `qemu-io` and libnbd use unmodified, so ext4, XFS and SQLite run on an
//! emulated or real ZNS SSD.
//!
//! ```no_run
//! use std::sync::Arc;
//! use zns_ftl::{Ftl, FtlConfig};
//! use zns_nbd::{Export, NbdServer, ServerConfig};
//! let ftl = Ftl::format(zns_device::open("emu:small").unwrap(), FtlConfig::default()).unwrap();
//! let server = NbdServer::bind(
//!     "127.0.0.1:10809",
//!     vec![Export::new("ftl", Arc::new(ftl))],
//!     ServerConfig::default(),
//! )
//! .unwrap();
//! // qemu-io -f raw nbd://127.0.0.1:10809/ftl ...
//! server.stop();
//! ```
//!
//! What is spoken: fixed newstyle negotiation with `NBD_OPT_GO`, `INFO`,
//! `LIST`, `ABORT` and `EXPORT_NAME` (name, description and block sizes
//! offered); in transmission `READ`, `WRITE` (with `FUA`), `FLUSH`, `TRIM`,
//! `WRITE_ZEROES` (with `NO_HOLE`) and `DISC`, simple replies, several
//! connections per export (`CAN_MULTI_CONN`). With a [`TlsConfig`] the
//! server requires TLS (`NBD_OPT_STARTTLS`, x509 certificates, optionally
//! client certificates; see [`tls`]). Not spoken: structured replies and
//! block status (refused as unsupported, which clients handle).
//!
//! Limits a client meets (see [`server`]): requests of up to
//! [`MAX_PAYLOAD`] are streamed in [`CHUNK`]s, so a connection holds about
//! a chunk of payload whatever it asks for; a message begun must arrive
//! whole within [`ServerConfig::stall_timeout`] and negotiation must end
//! within twice that, while a connection idle between requests stays open.
//!
//! The protocol is written here rather than taken from a crate: the Rust
//! NBD crates available speak only the old handshake or leave out FUA,
//! TRIM, WRITE_ZEROES and `NBD_OPT_GO`, which filesystems over QEMU need.
//!
//! | module | concern |
//! |---|---|
//! | [`wire`] | magics, codes, flags and fixed-size messages |
//! | `negotiate` | the handshake and the options |
//! | `transmit` | the requests, payloads in pieces of at most a chunk |
//! | `session` | a connection as a session of the event-driven server: each message acted on once buffered whole, deadlines, bounded output |
//! | `transport` | the socket or TLS over it, without waiting |
//! | [`tls`] | TLS settings |
//! | [`server`] | listening, the worker pool, shutdown, counters |
//! | [`client`] | a small client for tests and benchmarks |

#![warn(missing_docs)]

pub mod client;
mod error;
mod export;
mod negotiate;
pub mod server;
mod session;
pub mod tls;
mod transmit;
mod transport;
pub mod wire;

pub use client::{export_info, list_exports, ExportInfo, NbdClient};
pub use error::{errno_name, NbdError, Result};
pub use export::{Export, CHUNK, MAX_PAYLOAD};
pub use server::{NbdServer, ServerConfig, ServerStats};
pub use tls::{TlsConfig, TlsError};
