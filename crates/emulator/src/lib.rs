//! # zns-emulator
//!
//! An NVMe controller with the Zoned Namespace command set, in software.
//! (crate docs in progress)

pub mod media;
pub mod zns;
