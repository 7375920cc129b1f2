//! What the emulated drive did during a run, from its trace events
//! ([`zns_emulator::trace`]): each die's busy time over the run and each
//! zone's state over it, for the report's utilization timeline and zone
//! state map.
//!
//! Time is cut into at most [`MAX_BUCKETS`] equal buckets: they start at
//! 100 µs of model time and double (neighbours merged) whenever the run
//! outgrows them, so memory stays bounded however long the run. Zone
//! transitions are kept up to [`MAX_TRANSITIONS`]; later ones are counted
//! as dropped.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use zns_device::ZonedDevice;
use zns_emulator::trace::{TraceEvent, TraceSink};
use zns_spec::ZoneState;

/// Most time buckets of a run.
pub const MAX_BUCKETS: usize = 240;

/// Most zone transitions kept.
pub const MAX_TRANSITIONS: usize = 1_000_000;

/// Most rows of the zone state map (zones are binned beyond).
pub const MAX_ZONE_ROWS: usize = 64;

/// The first bucket width, ns.
const FIRST_BUCKET_NS: u64 = 100_000;

/// Die utilization and zone states over a run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    /// Model time of the first bucket's start, ns.
    pub start_ns: u64,
    /// Width of a bucket, ns.
    pub bucket_ns: u64,
    /// Per die, per bucket: the fraction of the bucket the die was busy
    /// (reading, programming, erasing), 0 to 1.
    pub die_busy: Vec<Vec<f64>>,
    /// The zone state map: rows of zones, top to bottom.
    pub zone_rows: Vec<ZoneRow>,
    /// Zones whose state changed during the run.
    pub zones_touched: u64,
    /// Zone transitions past [`MAX_TRANSITIONS`], not drawn.
    pub transitions_dropped: u64,
}

/// One row of the zone state map.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneRow {
    /// First zone of the row.
    pub first_zone: u32,
    /// Last zone of the row (the same for a row of one zone).
    pub last_zone: u32,
    /// A letter per bucket: the state at the bucket's end of the row's
    /// most active zone (`E` empty, `I` implicitly opened, `X` explicitly
    /// opened, `C` closed, `F` full, `R` read only, `O` offline).
    pub states: String,
}

/// The letter of a state in [`ZoneRow::states`].
pub fn state_letter(s: ZoneState) -> char {
    match s {
        ZoneState::Empty => 'E',
        ZoneState::ImplicitlyOpen => 'I',
        ZoneState::ExplicitlyOpen => 'X',
        ZoneState::Closed => 'C',
        ZoneState::Full => 'F',
        ZoneState::ReadOnly => 'R',
        _ => 'O',
    }
}

/// How much a state tells of a zone's activity: a row shows its busiest
/// zone.
fn rank(c: char) -> u8 {
    match c {
        'X' => 6,
        'I' => 5,
        'C' => 4,
        'F' => 3,
        'R' => 2,
        'O' => 1,
        _ => 0,
    }
}

#[derive(Debug)]
struct State {
    start: u64,
    bucket: u64,
    busy: Vec<Vec<u64>>,
    transitions: Vec<(u64, u32, ZoneState)>,
    dropped: u64,
    end: u64,
}

impl State {
    /// Widens the buckets until `t` falls in one.
    fn cover(&mut self, t: u64) {
        while t.saturating_sub(self.start) >= self.bucket * MAX_BUCKETS as u64 {
            self.bucket *= 2;
            for d in &mut self.busy {
                let merged: Vec<u64> = d.chunks(2).map(|p| p.iter().sum()).collect();
                *d = merged;
                d.resize(MAX_BUCKETS, 0);
            }
        }
        self.end = self.end.max(t);
    }

    /// Adds die `die`'s busy span `[a, b)`.
    fn busy(&mut self, die: u32, a: u64, b: u64) {
        let (a, b) = (a.max(self.start), b.max(self.start));
        if b <= a || die as usize >= self.busy.len() {
            return;
        }
        self.cover(b - 1);
        let (mut t, w) = (a - self.start, self.bucket);
        let end = b - self.start;
        while t < end {
            let i = (t / w) as usize;
            let next = ((t / w + 1) * w).min(end);
            self.busy[die as usize][i] += next - t;
            t = next;
        }
    }
}

/// A trace sink gathering a run's [`Activity`].
///
/// Thread safety: `Send + Sync`; one mutex, a leaf.
pub struct Recorder {
    nsid: u32,
    state: Mutex<State>,
}

impl TraceSink for Recorder {
    fn event(&self, event: &TraceEvent) {
        let mut s = self.lock();
        match *event {
            TraceEvent::Flash { die, start_ns, end_ns, .. } => s.busy(die, start_ns, end_ns),
            TraceEvent::ZoneState { at_ns, nsid, zone, to, .. } if nsid == self.nsid => {
                if s.transitions.len() < MAX_TRANSITIONS {
                    s.cover(at_ns);
                    s.transitions.push((at_ns, zone, to));
                } else {
                    s.dropped += 1;
                }
            }
            _ => {}
        }
    }
}

impl Recorder {
    /// The state (a sink that panicked left it as it was).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts gathering on `dev` when it is an emulator with a timing
    /// model in this process (none otherwise).
    pub fn attach(dev: &dyn ZonedDevice) -> Option<Arc<Recorder>> {
        let emu = dev.emulator().filter(|e| e.is_timed())?;
        let dies = emu.profile().timing.as_ref()?.dies() as usize;
        let start = emu.clock().model_now_ns();
        let state = State {
            start,
            bucket: FIRST_BUCKET_NS,
            busy: vec![vec![0; MAX_BUCKETS]; dies],
            transitions: Vec::new(),
            dropped: 0,
            end: start,
        };
        let r = Arc::new(Recorder { nsid: dev.info().nsid, state: Mutex::new(state) });
        emu.add_trace_sink(r.clone());
        Some(r)
    }

    /// Stops gathering on `dev` and gives what was gathered.
    pub fn finish(self: Arc<Self>, dev: &dyn ZonedDevice) -> Activity {
        if let Some(emu) = dev.emulator() {
            let sink: Arc<dyn TraceSink> = self.clone();
            emu.remove_trace_sink(&sink);
        }
        let s = self.lock();
        let used = (s.end.saturating_sub(s.start) / s.bucket + 1).min(MAX_BUCKETS as u64) as usize;
        let die_busy = s
            .busy
            .iter()
            .map(|d| {
                let f = |ns: u64| (ns as f64 / s.bucket as f64 * 1000.0).round() / 1000.0;
                d[..used].iter().map(|&ns| f(ns).min(1.0)).collect()
            })
            .collect();
        let (zone_rows, zones_touched) = zone_rows(&s, used);
        Activity {
            start_ns: s.start,
            bucket_ns: s.bucket,
            die_busy,
            zone_rows,
            zones_touched,
            transitions_dropped: s.dropped,
        }
    }
}

/// The zone state map: each touched zone's state at each bucket's end,
/// binned into at most [`MAX_ZONE_ROWS`] rows.
fn zone_rows(s: &State, used: usize) -> (Vec<ZoneRow>, u64) {
    let mut zones: Vec<u32> = s.transitions.iter().map(|t| t.1).collect();
    zones.sort_unstable();
    zones.dedup();
    let mut grid: Vec<Vec<char>> = vec![vec!['E'; used]; zones.len()];
    let mut by_time = s.transitions.clone();
    // Stable: transitions at the same time keep their order.
    by_time.sort_by_key(|t| t.0);
    for &(at, zone, to) in &by_time {
        let row = zones.binary_search(&zone).expect("zone listed");
        let from = ((at.saturating_sub(s.start)) / s.bucket) as usize;
        for c in &mut grid[row][from.min(used)..] {
            *c = state_letter(to);
        }
    }
    let per_row = zones.len().div_ceil(MAX_ZONE_ROWS).max(1);
    let rows = zones
        .chunks(per_row)
        .zip(grid.chunks(per_row))
        .map(|(zs, g)| ZoneRow {
            first_zone: zs[0],
            last_zone: zs[zs.len() - 1],
            states: (0..used)
                .map(|b| g.iter().map(|r| r[b]).max_by_key(|&c| rank(c)).unwrap_or('E'))
                .collect(),
        })
        .collect();
    (rows, zones.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            start: 1000,
            bucket: FIRST_BUCKET_NS,
            busy: vec![vec![0; MAX_BUCKETS]; 2],
            transitions: Vec::new(),
            dropped: 0,
            end: 1000,
        }
    }

    #[test]
    fn busy_time_splits_over_buckets_and_buckets_widen_to_fit() {
        let mut s = state();
        // 150 µs from 50 µs in: half of bucket 0, all of bucket 1.
        s.busy(1, 1000 + 50_000, 1000 + 200_000);
        assert_eq!((s.busy[1][0], s.busy[1][1], s.busy[1][2]), (50_000, 100_000, 0));
        // Past 240 buckets: they double, merged pairwise.
        s.busy(0, 1000 + 30_000_000, 1000 + 30_000_100);
        assert_eq!(s.bucket, 2 * FIRST_BUCKET_NS);
        assert_eq!(s.busy[1][0], 150_000);
        assert_eq!(s.busy[0][150], 100);
    }

    #[test]
    fn zone_rows_show_each_zones_state_at_each_bucket_end() {
        let mut s = state();
        let b = FIRST_BUCKET_NS;
        s.transitions = vec![
            (1000 + b / 2, 7, ZoneState::ImplicitlyOpen),
            (1000 + 2 * b + 1, 7, ZoneState::Full),
            (1000 + b, 3, ZoneState::ExplicitlyOpen),
            (1000 + 3 * b, 3, ZoneState::Empty),
        ];
        s.end = 1000 + 4 * b;
        let (rows, touched) = zone_rows(&s, 5);
        assert_eq!(touched, 2);
        assert_eq!(rows[0], ZoneRow { first_zone: 3, last_zone: 3, states: "EXXEE".into() });
        assert_eq!(rows[1], ZoneRow { first_zone: 7, last_zone: 7, states: "IIFFF".into() });
    }
}
