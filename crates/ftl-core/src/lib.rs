//! # zns-ftl-core
//!
//! The parts of a flash translation layer that znskit's two FTLs share:
//! the host-side FTL over a ZNS device (`zns-ftl`) and the firmware of the
//! emulator's conventional SSD (`zns-emulator`). Neither depends on the
//! other; both depend on this crate, which depends on nothing of znskit.
//!
//! | module | concern |
//! |---|---|
//! | [`packed`] | [`PackedArray`]: arrays of small integers packed into atomic words |
//! | [`map`] | [`PageMap`]: logical → physical and physical → logical, valid blocks per erase unit |
//! | [`victim`] | [`VictimPolicy`] and [`select`]: which erase unit garbage collection reclaims |
//!
//! ```
//! use zns_ftl_core::{select, Candidate, PageMap, VictimPolicy};
//! // 8 logical blocks on 12 physical ones, 4 to an erase unit.
//! let map = PageMap::new(8, 12, 4);
//! for l in 0..4 {
//!     map.assign(l, l); // unit 0 full
//! }
//! map.assign(0, 4); // rewritten: block 0 of unit 0 is garbage now
//! let units = (0..2).map(|u| Candidate {
//!     id: u,
//!     valid: map.valid(u),
//!     capacity: 4,
//!     birth: 0,
//!     written_at: 0,
//!     resets: 0,
//! });
//! // Unit 1 is not full; only unit 0 is offered here, and it has garbage.
//! assert_eq!(select(VictimPolicy::Greedy, 5, units.take(1)), Some(0));
//! ```

#![warn(missing_docs)]

pub mod map;
pub mod packed;
pub mod victim;

pub use map::PageMap;
pub use packed::PackedArray;
pub use victim::{lifetime_score, select, Candidate, UnknownPolicy, VictimPolicy};
