//! The NVMe/TCP transport: a host queue pair over one TCP connection, on
//! the PDU framing of `zns-nvme-tcp` (which znskit's target shares).
//!
//! Unlike the PCIe transports there are no queues in memory and no
//! doorbells: a queue is a connection, a command travels in a capsule
//! (its data in the capsule or, when large, in H2CData PDUs the target
//! asks for with R2T), data for the host arrives in C2HData PDUs and the
//! completion in a response capsule.

mod auth;
mod host;

pub use auth::HostAuth;
pub use host::{data_completion, Event, TcpQueuePair, DEFAULT_MAX_DATA, IN_CAPSULE_LIMIT};
/// The framing both ends use, from `zns-nvme-tcp`.
pub use zns_nvme_tcp::{
    precise_timers, write_pdu, write_pdu_header, PduReader, Received, Result, SocketInput,
    TcpError, MAX_HLEN,
};
