//! Reading the metadata log back, damage included.
//!
//! Every page of a metadata zone has the sequence number of the zone's
//! first page plus its offset (pages are written in order, one sequence
//! number each, and a zone is never written out of order), so one page
//! that decodes places its whole zone in the log, and a damaged page still
//! has a known place: its neighbours tell what it can have held.
//!
//! - The header pages (one, or two with
//!   [`crate::journal::FEATURE_BACKUP_HEADER`]) hold no records.
//! - A checkpoint is a Begin record (the last record of its page), then
//!   only chunk pages, header pages and empty padding pages, then its End
//!   page: nothing between a checkpoint's Begin page and its End page
//!   carries records. A damaged page just before a checkpoint's first
//!   page (past headers and padding) is its Begin page, and a damaged page
//!   just after its last chunk, followed by a page of the same mount, is
//!   its End page (the mount writes the End right after the chunks, and
//!   stops at any failure).
//! - Pages before the Begin page of the checkpoint loaded are superseded
//!   by it (the checkpoint's chunks were read after every change those
//!   pages record).
//!
//! Any other damaged page after the checkpoint may have held records:
//! what it changed is unknown.

use std::collections::HashMap;

use crate::journal::{Body, Page, PageError, Record};

/// One block of the metadata log as read, at its place in the log.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Metadata zone.
    pub zone: u32,
    /// Block inside the zone.
    pub offset: u32,
    /// Page sequence number (read, or known from the zone's other pages).
    pub seq: u64,
    /// The page, or why it does not decode.
    pub page: Result<Page, PageError>,
    /// Pages missing from the log before this zone (no block holds them).
    pub missing: bool,
}

impl Slot {
    /// The records of a page that decodes as log records.
    pub fn records(&self) -> Option<&[Record]> {
        match &self.page {
            Ok(Page { body: Body::Log(r), .. }) => Some(r),
            _ => None,
        }
    }

    /// Whether the page decodes.
    pub fn is_ok(&self) -> bool {
        self.page.is_ok()
    }
}

/// What a damaged page of the log held, as far as its place tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A header page (the superblock or its copy): no records.
    Header,
    /// Before the Begin record of the checkpoint loaded: not needed.
    Superseded,
    /// The Begin page of the checkpoint loaded: records before the Begin
    /// record are in the checkpoint, none follow it.
    LoadedBegin,
    /// A chunk or padding page of a checkpoint, or its End page: no
    /// records.
    Checkpoint,
    /// May have held records after the checkpoint loaded: unknown.
    Unknown,
}

impl Role {
    /// What the damage means, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Role::Header => "a header copy (the superblock is read from an intact copy)",
            Role::Superseded => "older than the checkpoint loaded (not needed)",
            Role::LoadedBegin => "the Begin page of the checkpoint loaded (its changes are in it)",
            Role::Checkpoint => "a page of a checkpoint (no map changes)",
            Role::Unknown => "the map changes it held are unknown",
        }
    }
}

/// Where a checkpoint is in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// Checkpoint id.
    pub id: u64,
    /// The slot of its Begin page; the record's index there when the page
    /// decodes (`None`: the damaged page the Begin record was in).
    pub begin: (usize, Option<usize>),
    /// The slot of its End page, when known.
    pub end: Option<usize>,
    /// Its chunks are all there: it can be loaded.
    pub complete: bool,
}

/// Whether `slot` is a header position of its zone.
fn header_slot(s: &Slot, header_pages: u32) -> bool {
    !s.missing && s.offset < header_pages
}

/// Whether `slot` is a page that holds nothing between a Begin record and
/// the first chunk: a header, or empty padding.
fn filler(s: &Slot, header_pages: u32) -> bool {
    match &s.page {
        Ok(Page { body: Body::Header(_), .. }) => true,
        Ok(Page { body: Body::Log(r), .. }) => r.is_empty(),
        Ok(_) => false,
        Err(_) => header_slot(s, header_pages),
    }
}

/// Every checkpoint of `slots` whose Begin page is known (found or
/// inferred), in log order.
pub(crate) fn checkpoints(slots: &[Slot], header_pages: u32) -> Vec<Span> {
    let mut first = HashMap::<u64, usize>::new();
    let mut last_chunk = HashMap::<u64, usize>::new();
    let mut chunks = HashMap::<u64, u64>::new();
    let mut ends = HashMap::<u64, (usize, u64)>::new();
    let mut begins = HashMap::<u64, (usize, usize)>::new();
    for (i, s) in slots.iter().enumerate() {
        match &s.page {
            Ok(Page { body: Body::Chunk { ckpt, .. }, .. }) => {
                first.entry(*ckpt).or_insert(i);
                last_chunk.insert(*ckpt, i);
                *chunks.entry(*ckpt).or_default() += 1;
            }
            Ok(Page { body: Body::End { ckpt, chunks: n }, .. }) => {
                first.entry(*ckpt).or_insert(i);
                ends.insert(*ckpt, (i, *n));
            }
            Ok(Page { body: Body::Log(records), .. }) => {
                for (r, rec) in records.iter().enumerate() {
                    if let Record::CheckpointBegin { id } = rec {
                        begins.insert(*id, (i, r));
                    }
                }
            }
            _ => {}
        }
    }
    let mut ids: Vec<u64> = begins.keys().chain(first.keys()).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out = Vec::new();
    for id in ids {
        let begin = match begins.get(&id) {
            Some(&(i, r)) => (i, Some(r)),
            None => {
                // The Begin page is the first page before the checkpoint's
                // first one that is not a header or padding: damaged here.
                let Some(&f) = first.get(&id) else { continue };
                match (0..f).rev().find(|&i| !filler(&slots[i], header_pages)) {
                    Some(i) if !slots[i].is_ok() && !slots[i].missing => (i, None),
                    _ => continue,
                }
            }
        };
        let after_chunks = last_chunk.get(&id).copied().unwrap_or(begin.0);
        let end = match ends.get(&id) {
            Some(&(i, _)) if i > begin.0 => Some(i),
            Some(_) => continue,
            None => inferred_end(slots, after_chunks, header_pages),
        };
        let complete = end.is_some_and(|e| {
            let between_intact = slots[begin.0 + 1..e]
                .iter()
                .all(|s| s.is_ok() || (header_slot(s, header_pages) && !s.missing));
            let count_ok =
                ends.get(&id).is_none_or(|&(_, n)| chunks.get(&id).copied().unwrap_or(0) == n);
            between_intact && count_ok
        });
        out.push(Span { id, begin, end, complete });
    }
    out.sort_by_key(|s| s.begin.0);
    out
}

/// The End page of a checkpoint whose last chunk (or Begin page) is at
/// `last`, when it is damaged: the next page that is not a header, if a
/// page of the same mount follows it.
fn inferred_end(slots: &[Slot], last: usize, header_pages: u32) -> Option<usize> {
    let generation = slots[last].page.as_ref().ok()?.generation;
    let e = (last + 1..slots.len()).find(|&i| !header_slot(&slots[i], header_pages))?;
    if slots[e].is_ok() || slots[e].missing {
        return None;
    }
    let next = slots[e + 1..].iter().find(|s| !header_slot(s, header_pages))?;
    (next.page.as_ref().ok()?.generation == generation).then_some(e)
}

/// What the damaged slot `i` can have held, given the checkpoint loaded
/// (`loaded`: its Begin slot) and every checkpoint span.
pub(crate) fn role(slots: &[Slot], i: usize, loaded: usize, spans: &[Span], hp: u32) -> Role {
    let s = &slots[i];
    if header_slot(s, hp) {
        return Role::Header;
    }
    if i < loaded {
        return Role::Superseded;
    }
    if i == loaded {
        return Role::LoadedBegin;
    }
    let inside = spans.iter().any(|c| c.end.is_some_and(|e| i > c.begin.0 && i <= e));
    if inside && !s.missing {
        return Role::Checkpoint;
    }
    Role::Unknown
}
