//! # zns-spec
//!
//! Wire formats of the NVMe base, NVM and Zoned Namespace command sets, shared
//! by every znskit layer: submission and completion entries, opcodes, status
//! codes with their specification names, controller registers, Identify data
//! structures, zone descriptors and reports, Copy source ranges, log pages,
//! asynchronous events, typed command builders, Flexible Data Placement
//! (directive fields, log pages, features, I/O Management commands), and
//! NVMe over Fabrics: SGL
//! descriptors, Fabrics commands, the Discovery log page and the NVMe/TCP
//! PDUs.
//!
//! This crate does no I/O and knows no backend. Every structure has a wire
//! image (`to_bytes`/`from_bytes`) whose layout is pinned by tests.

#[cfg(not(target_endian = "little"))]
compile_error!("znskit supports little-endian hosts only (NVMe structures are little-endian)");

pub mod auth;
pub mod command;
pub mod copy;
pub mod cqe;
pub mod crc;
pub mod event;
pub mod fabrics;
pub mod fdp;
pub mod features;
pub mod identify;
pub mod log;
pub mod opcode;
pub mod regs;
pub mod sgl;
pub mod sqe;
pub mod status;
pub mod tcp;
pub mod zone;

pub use cqe::CompletionEntry;
pub use opcode::{AdminOpcode, CommandSetId, DataDirection, IoOpcode};
pub use sqe::SubmissionEntry;
pub use status::{Status, StatusCode, StatusCodeType, StatusField};
pub use zone::{
    ReportFilter, ReportHeader, ZoneAttributes, ZoneDescriptor, ZoneReceiveAction, ZoneSendAction,
    ZoneState, ZoneType,
};
