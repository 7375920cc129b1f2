//! Sequences of random commands run on the peer and on the reference in
//! lockstep, compared after every command, and the tally.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use zns_device::{DeviceError, Target, ZoneAction, ZoneOp, ZoneQueue};

use crate::compare::{
    differing_zones, execute, first_difference, snapshot, snapshot_diff, zone_line, Observed,
};
use crate::divergence::{explain, repair, Case};
use crate::generate::{Cmd, Geometry, Sequence};
use crate::rng::Rng;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seed of the run.
    pub seed: u64,
    /// First sequence number.
    pub first: u64,
    /// Sequences to run.
    pub count: u64,
    /// Fewest random commands in a sequence.
    pub min_len: u64,
    /// Most random commands in a sequence.
    pub max_len: u64,
    /// Print every command.
    pub verbose: bool,
    /// Stop after this many unexplained differences.
    pub max_differences: u64,
}

/// One side of the comparison.
pub struct Side {
    /// Name in the output (the URI).
    pub name: String,
    /// Its queue.
    pub q: Box<dyn ZoneQueue>,
    /// Time spent in its commands.
    pub busy: Duration,
}

/// Counts of a run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Sequences run.
    pub sequences: u64,
    /// Commands compared (the resets between sequences included).
    pub commands: u64,
    /// Commands by kind.
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Completions by status (as both sides returned them).
    pub by_status: BTreeMap<String, u64>,
    /// Accepted divergences by identifier.
    pub accepted: BTreeMap<&'static str, u64>,
    /// Sequences ended early by an accepted divergence that left the two
    /// sides in different states that zone actions cannot reconcile.
    pub cut_short: u64,
    /// Accepted divergences after which zone actions on the reference
    /// brought it to the peer's zone states, and the sequence went on.
    pub repaired: u64,
    /// Differences nothing explains.
    pub unexplained: u64,
}

/// What one command showed.
enum Verdict {
    Same,
    Accepted { id: &'static str, resync: bool },
    Different,
}

/// Runs the sequences `cfg` asks for on `peer` and `ours`, printing
/// differences (and with `verbose`, every command) to `out`.
pub fn run(
    peer: &mut Side,
    ours: &mut Side,
    g: &Geometry,
    cfg: &Config,
    out: &mut dyn Write,
) -> Result<Tally, DeviceError> {
    let mut t = Tally::default();
    let max_report = g.max_blocks as usize * g.block_size;
    let progress_every = (cfg.count / 4).max(1);
    for k in cfg.first..cfg.first + cfg.count {
        if t.unexplained >= cfg.max_differences {
            break;
        }
        t.sequences += 1;
        let mut rng = Rng::for_sequence(cfg.seed, k);
        let peer_name = peer.name.clone();
        let replay = |i: u64| {
            format!(
                "sequence {k} command {i} (replay: zns-differential --seed {:#x} --sequence {k} \
                 --verbose {})",
                cfg.seed, peer_name
            )
        };
        let reset = Cmd {
            op: ZoneOp::Zone { action: ZoneAction::Reset, target: Target::All },
            bytes: 0,
            fill: 0,
        };
        let p = timed(peer, &reset);
        let o = timed(ours, &reset);
        let mut before = snapshot(peer.q.as_mut(), max_report)?;
        let ours_before = snapshot(ours.q.as_mut(), max_report)?;
        t.commands += 1;
        if p != o || before != ours_before {
            t.unexplained += 1;
            let _ = writeln!(out, "DIFF {}: {}", replay(0), reset.describe(g.block_size));
            let _ = writeln!(
                out,
                "  {}: {}\n  {}: {}",
                peer.name,
                p.describe(),
                ours.name,
                o.describe()
            );
            let _ = write!(out, "{}", snapshot_diff(&before, &ours_before, &peer.name, &ours.name));
            continue;
        }
        let mut seq = Sequence::new(&mut rng, g);
        let len = rng.range(cfg.min_len, cfg.max_len) + seq.prologue_left() as u64;
        if cfg.verbose {
            let _ = writeln!(out, "sequence {k}: {len} commands");
        }
        for i in 1..=len {
            let cmd = seq.next(&mut rng, g, &before.zones);
            let p = timed(peer, &cmd);
            let o = timed(ours, &cmd);
            let peer_after = snapshot(peer.q.as_mut(), max_report)?;
            let ours_after = snapshot(ours.q.as_mut(), max_report)?;
            t.commands += 1;
            *t.by_kind.entry(cmd.op.kind().name()).or_default() += 1;
            let case = Case {
                g,
                cmd: &cmd,
                before: &before,
                peer: &p,
                peer_after: &peer_after,
                ours: &o,
                ours_after: &ours_after,
            };
            let verdict = if p == o && peer_after == ours_after {
                *t.by_status.entry(p.outcome.name()).or_default() += 1;
                Verdict::Same
            } else if let Some(d) = explain(&case) {
                let mut resync = peer_after != ours_after;
                if resync {
                    if let Some(cmds) = repair(d.id, &case) {
                        let all_done = cmds.iter().all(|c| {
                            matches!(timed(ours, c).outcome, crate::compare::Outcome::Done(_))
                        });
                        let now = snapshot(ours.q.as_mut(), max_report)?;
                        if all_done && now == peer_after {
                            t.repaired += 1;
                            resync = false;
                        }
                    }
                }
                Verdict::Accepted { id: d.id, resync }
            } else {
                Verdict::Different
            };
            if cfg.verbose {
                let _ = writeln!(
                    out,
                    "  {i:3} {}: {} | {}{}",
                    cmd.describe(g.block_size),
                    p.describe(),
                    o.describe(),
                    match &verdict {
                        Verdict::Same => String::new(),
                        Verdict::Accepted { id, .. } => format!("  [accepted: {id}]"),
                        Verdict::Different => "  [DIFFERENT]".into(),
                    }
                );
            }
            match verdict {
                Verdict::Same => before = peer_after,
                Verdict::Accepted { id, resync } => {
                    *t.accepted.entry(id).or_default() += 1;
                    if resync {
                        t.cut_short += 1;
                        break;
                    }
                    before = peer_after;
                }
                Verdict::Different => {
                    t.unexplained += 1;
                    let _ = writeln!(out, "DIFF {}: {}", replay(i), cmd.describe(g.block_size));
                    let _ = write!(out, "{}", explain_difference(&case, &peer.name, &ours.name));
                    break;
                }
            }
        }
        if !cfg.verbose && t.sequences % progress_every == 0 && t.sequences < cfg.count {
            let _ = writeln!(
                out,
                "differential: {}/{} sequences, {} commands, {} unexplained",
                t.sequences, cfg.count, t.commands, t.unexplained
            );
        }
    }
    Ok(t)
}

fn timed(side: &mut Side, cmd: &Cmd) -> Observed {
    let start = Instant::now();
    let r = execute(side.q.as_mut(), cmd);
    side.busy += start.elapsed();
    r
}

/// The details of an unexplained difference: both completions, the zone
/// the command addressed before it, and every zone that differs after it.
fn explain_difference(c: &Case<'_>, peer: &str, ours: &str) -> String {
    let mut s = String::new();
    let lba = c.cmd.op.lba().filter(|l| *l < c.g.blocks);
    if let Some(z) = lba.and_then(|l| c.before.zones.get((l / c.g.zone_size) as usize)) {
        s.push_str(&format!("  before: {}\n", zone_line(z)));
    }
    let (open, active) = crate::compare::counts(&c.before.zones);
    s.push_str(&format!("  before: {open} open, {active} active zones\n"));
    s.push_str(&format!("  {peer}: {}\n  {ours}: {}\n", c.peer.describe(), c.ours.describe()));
    if let (Some(a), Some(b)) = (&c.peer.data, &c.ours.data) {
        if let Some(at) = first_difference(a, b) {
            s.push_str(&format!("  data differ from byte {at} (of {} / {})\n", a.len(), b.len()));
        }
    }
    if !differing_zones(c.peer_after, c.ours_after).is_empty() {
        s.push_str("  zones after:\n");
        s.push_str(&snapshot_diff(c.peer_after, c.ours_after, peer, ours));
    }
    s
}

/// The tally, a few lines each starting with `differential:`.
pub fn summary(t: &Tally, peer: &Side, ours: &Side, seed: u64) -> String {
    let kinds: Vec<String> = t.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let mut statuses: Vec<(&String, &u64)> = t.by_status.iter().collect();
    statuses.sort_by(|a, b| b.1.cmp(a.1));
    let statuses: Vec<String> = statuses.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let accepted: Vec<String> = t.accepted.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let mut explained = String::new();
    for d in crate::divergence::DIVERGENCES.iter().filter(|d| t.accepted.contains_key(d.id)) {
        explained.push_str(&format!("differential:   {}: {}\n", d.id, d.title));
    }
    format!(
        "differential: {} vs {}, seed {seed:#x}: {} sequences, {} commands, {} zone reports \
         compared ({:.1} s on the peer, {:.1} s on the reference)\n\
         differential: commands: {}\n\
         differential: identical completions: {}\n\
         differential: accepted divergences: {} (after {} of them zone actions on the reference \
         matched the peer's zone states again; after {} the sequence ended)\n{explained}\
         differential: {} unexplained differences\n",
        peer.name,
        ours.name,
        t.sequences,
        t.commands,
        t.commands * 2,
        peer.busy.as_secs_f64(),
        ours.busy.as_secs_f64(),
        kinds.join(", "),
        statuses.join(", "),
        if accepted.is_empty() { "none".to_string() } else { accepted.join(", ") },
        t.repaired,
        t.cut_short,
        t.unexplained
    )
}

/// The geometry both devices share, or why they cannot be compared.
pub fn geometry(peer: &dyn ZoneQueue, ours: &dyn ZoneQueue) -> Result<Geometry, String> {
    let (a, b) = (peer.info(), ours.info());
    let same = (a.block_size, a.zone_count, a.zone_size, a.zone_capacity, a.max_open, a.max_active)
        == (b.block_size, b.zone_count, b.zone_size, b.zone_capacity, b.max_open, b.max_active)
        && a.capabilities.extension_bytes == b.capabilities.extension_bytes;
    if !same {
        return Err(format!(
            "the reference's geometry differs from the peer's: {} zones of {}/{} blocks, \
             open/active {:?}/{:?} vs {} zones of {}/{} blocks, open/active {:?}/{:?}",
            a.zone_count,
            a.zone_size,
            a.zone_capacity,
            a.max_open,
            a.max_active,
            b.zone_count,
            b.zone_size,
            b.zone_capacity,
            b.max_open,
            b.max_active
        ));
    }
    let bs = a.block_size as usize;
    let max_blocks = (a.mdts_bytes.min(b.mdts_bytes) / bs).max(1) as u64;
    Ok(Geometry {
        zones: a.zone_count,
        zone_size: a.zone_size,
        blocks: a.blocks(),
        block_size: bs,
        max_blocks,
        max_append_blocks: ((a.zasl_bytes.min(b.zasl_bytes) / bs).max(1) as u64).min(max_blocks),
        ext: a.capabilities.extension_bytes,
        max_open: a.max_open,
        max_active: a.max_active,
        write_zeroes: a.capabilities.write_zeroes && b.capabilities.write_zeroes,
        zrwa: match (&a.capabilities.zrwa, &b.capabilities.zrwa) {
            // Resources may differ: the reference has what the peer has,
            // which is not always what its Identify states (qemu-numzrwa).
            (Some(x), Some(y))
                if (x.size, x.flush_granularity) == (y.size, y.flush_granularity)
                    && x.explicit_flush
                    && y.explicit_flush =>
            {
                Some((x.size, x.flush_granularity))
            }
            _ => None,
        },
    })
}
