//! The FDP mode's lockstep run: sequences of random commands on the peer
//! and the reference, each followed by both sides' FDP state, every
//! difference matched against the catalogue or counted unexplained; then
//! the placement check, which fails the run when placed writes did not
//! reach the handles they named.

use std::collections::BTreeMap;
use std::io::Write;

use super::command::{FdpCmd, FdpOp};
use super::compare::{differences, observe, state, FdpState, Seen};
use super::divergence::{explain, repair, Case, DIVERGENCES};
use super::generate;
use super::reference::FdpGeometry;
use super::target::Target;
use crate::compare::Outcome;
use crate::rng::Rng;
use crate::run::Config;

/// Counts of an FDP run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Sequences run.
    pub sequences: u64,
    /// Commands compared.
    pub commands: u64,
    /// Commands by kind.
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Identical completions by status.
    pub by_status: BTreeMap<String, u64>,
    /// Accepted divergences by identifier.
    pub accepted: BTreeMap<&'static str, u64>,
    /// Accepted divergences after which a Reclaim Unit Handle Update
    /// brought the two sides' handles together again.
    pub repaired: u64,
    /// Blocks written through each placement handle (placed writes that
    /// succeeded on both sides).
    pub placed: BTreeMap<u16, u64>,
    /// Differences nothing explains.
    pub unexplained: u64,
}

/// One side of an FDP comparison and its state as last read.
pub struct FdpSide<'a> {
    /// The side.
    pub target: &'a mut dyn Target,
    /// Its FDP state after the last command.
    pub state: FdpState,
}

enum Verdict {
    Same,
    Accepted(&'static str),
    Different,
}

/// Runs the sequences `cfg` asks for, printing differences (and with
/// `verbose` every command) to `out`.
pub fn run(
    peer: &mut FdpSide<'_>,
    ours: &mut FdpSide<'_>,
    g: &FdpGeometry,
    cfg: &Config,
    out: &mut dyn Write,
) -> Result<Tally, String> {
    let mut t = Tally::default();
    let progress_every = (cfg.count / 4).max(1);
    for k in cfg.first..cfg.first + cfg.count {
        if t.unexplained >= cfg.max_differences {
            break;
        }
        t.sequences += 1;
        let mut rng = Rng::for_sequence(cfg.seed, k);
        let len = rng.range(cfg.min_len, cfg.max_len);
        for i in 1..=len {
            let cmd = generate::next(&mut rng, g, &peer.state);
            let p = observe(peer.target, g, &cmd, peer.state.clone())?;
            let o = observe(ours.target, g, &cmd, ours.state.clone())?;
            t.commands += 1;
            *t.by_kind.entry(cmd.kind()).or_default() += 1;
            let differ = differences(&p, &o);
            let case = Case { g, cmd: &cmd, peer: &p, ours: &o, differ: &differ };
            let verdict = if differ.is_empty() {
                *t.by_status.entry(p.reply.outcome.name()).or_default() += 1;
                count_placed(&mut t, &cmd, &p, g);
                Verdict::Same
            } else if let Some(d) = explain(&case) {
                if let Some(cmds) = repair(d.id, &case) {
                    for (on_peer, c) in cmds {
                        let side: &mut dyn Target =
                            if on_peer { &mut *peer.target } else { &mut *ours.target };
                        let (q, sqe, data) = c.entry(side.nsid(), g.block_size);
                        side.run(q, &sqe, &data);
                    }
                    t.repaired += 1;
                }
                Verdict::Accepted(d.id)
            } else {
                Verdict::Different
            };
            peer.state = state(peer.target, g)?;
            ours.state = state(ours.target, g)?;
            if cfg.verbose {
                let _ = writeln!(
                    out,
                    "  {k}.{i:<3} {}: {} | {}{}",
                    cmd.describe(),
                    p.reply.outcome.name(),
                    o.reply.outcome.name(),
                    match verdict {
                        Verdict::Same => String::new(),
                        Verdict::Accepted(id) => format!("  [accepted: {id}]"),
                        Verdict::Different => "  [DIFFERENT]".into(),
                    }
                );
            }
            match verdict {
                Verdict::Same => {}
                Verdict::Accepted(id) => *t.accepted.entry(id).or_default() += 1,
                Verdict::Different => {
                    t.unexplained += 1;
                    let _ = writeln!(
                        out,
                        "DIFF sequence {k} command {i} (replay: zns-differential --fdp --seed {:#x} \
                         --sequence {k} --verbose {}): {}",
                        cfg.seed,
                        peer.target.name(),
                        cmd.describe()
                    );
                    let _ = write!(out, "{}", detail(&case, peer.target.name()));
                }
            }
            if peer.state.ruamw != ours.state.ruamw {
                let _ = writeln!(
                    out,
                    "differential: the handles stay apart after sequence {k} command {i}: {:?} \
                     vs {:?}",
                    peer.state.ruamw, ours.state.ruamw
                );
                t.unexplained += 1;
                return Ok(t);
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

fn count_placed(t: &mut Tally, cmd: &FdpCmd, p: &Seen, g: &FdpGeometry) {
    if let (FdpOp::Write { blocks, placement: Some(h), .. }, Outcome::Done(_)) =
        (&cmd.op, &p.reply.outcome)
    {
        if *h < g.handles {
            *t.placed.entry(*h).or_default() += *blocks as u64;
        }
    }
}

/// Both completions, the aspects that differ, and the handles and
/// counters of both sides before and after.
fn detail(c: &Case<'_>, peer: &str) -> String {
    let names: Vec<&str> = c.differ.iter().map(|a| a.name()).collect();
    let mut s = format!(
        "  {peer}: {}\n  emu: {}\n  differ: {}\n",
        c.peer.reply.outcome.name(),
        c.ours.reply.outcome.name(),
        names.join(", ")
    );
    if let (Some(a), Some(b)) = (&c.peer.reply.data, &c.ours.reply.data) {
        if let Some(at) = crate::compare::first_difference(a, b) {
            s.push_str(&format!("  data differ from byte {at} (of {} / {})\n", a.len(), b.len()));
        }
    }
    for (name, side) in [(peer, c.peer), ("emu", c.ours)] {
        let st = &side.after.stats;
        s.push_str(&format!(
            "  {name}: RUAMW {:?} -> {:?}; HBMW {} MBMW {} MBE {}\n",
            side.before.ruamw.iter().map(|d| d.2).collect::<Vec<_>>(),
            side.after.ruamw.iter().map(|d| d.2).collect::<Vec<_>>(),
            st.host_bytes_written,
            st.media_bytes_written,
            st.media_bytes_erased
        ));
    }
    s
}

/// The tally, a few lines each starting with `differential:`.
pub fn summary(t: &Tally, peer: &str, seed: u64) -> String {
    let join = |m: &BTreeMap<&'static str, u64>| {
        m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
    };
    let mut statuses: Vec<(&String, &u64)> = t.by_status.iter().collect();
    statuses.sort_by(|a, b| b.1.cmp(a.1));
    let statuses: Vec<String> = statuses.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let placed: Vec<String> = t.placed.iter().map(|(h, n)| format!("{h}: {n}")).collect();
    let mut explained = String::new();
    for d in DIVERGENCES.iter().filter(|d| t.accepted.contains_key(d.id)) {
        explained.push_str(&format!("differential:   {}: {}\n", d.id, d.title));
    }
    format!(
        "differential: {peer} vs emu (FDP), seed {seed:#x}: {} sequences, {} commands, each \
         followed by both sides' reclaim unit handle status and FDP statistics\n\
         differential: commands: {}\n\
         differential: identical completions: {}\n\
         differential: blocks placed per handle: {}\n\
         differential: accepted divergences: {} (after {} of them a reclaim unit handle update \
         brought the handles together again)\n{explained}\
         differential: {} unexplained differences\n",
        t.sequences,
        t.commands,
        join(&t.by_kind),
        statuses.join(", "),
        if placed.is_empty() { "none".into() } else { placed.join(", ") },
        if t.accepted.is_empty() { "none".into() } else { join(&t.accepted) },
        t.repaired,
        t.unexplained
    )
}

/// The placement check: on `t`, for every placement handle, a write of a
/// few blocks placed on it (inside its current reclaim unit) must take
/// exactly that many blocks off that handle's RUAMW and no other's, and
/// add exactly their bytes to HBMW, as read back through the same path.
/// Returns one line per handle, or what went wrong.
pub fn placement_check(
    t: &mut dyn Target,
    g: &FdpGeometry,
    seed: u64,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut rng = Rng::for_sequence(seed, u64::MAX);
    let unit = (g.block_size + g.metadata_size as usize) as u128;
    for h in 0..g.handles {
        let mut before = state(t, g)?;
        let mut left = before.available(h).ok_or(format!("handle {h} has no status"))?;
        if left < 2 {
            // Too little room to stay inside the unit: a fresh one first.
            let up = FdpCmd { op: FdpOp::IoMgmtSend { mo: 1, pids: vec![h] }, fill: 0 };
            let (q, sqe, data) = up.entry(t.nsid(), g.block_size);
            t.run(q, &sqe, &data);
            before = state(t, g)?;
            left = before.available(h).ok_or(format!("handle {h} has no status"))?;
        }
        let blocks = rng.range(1, left.saturating_sub(1).min(g.max_blocks).clamp(1, 8));
        let lba = rng.below(g.blocks - blocks);
        let cmd = FdpCmd {
            op: FdpOp::Write { lba, blocks: blocks as u32, fua: false, placement: Some(h) },
            fill: rng.next(),
        };
        let seen = observe(t, g, &cmd, before)?;
        if !matches!(seen.reply.outcome, Outcome::Done(_)) {
            return Err(format!("the placed write to handle {h}: {}", seen.reply.outcome.name()));
        }
        for (b, a) in seen.before.ruamw.iter().zip(&seen.after.ruamw) {
            let want = if b.0 == h { b.2 - blocks } else { b.2 };
            if a.2 != want {
                return Err(format!(
                    "{blocks} blocks placed with identifier {h}: placement handle {} went from \
                     RUAMW {} to {} (expected {want})",
                    b.0, b.2, a.2
                ));
            }
        }
        let host = seen.grew(|s| s.host_bytes_written);
        if host != (blocks as u128 * unit) as i128 {
            return Err(format!("{blocks} blocks placed on handle {h}: HBMW grew by {host} bytes"));
        }
        lines.push(format!("handle {h}: {blocks} blocks, RUAMW {} -> {}", left, left - blocks));
    }
    Ok(lines)
}
