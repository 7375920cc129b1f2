//! The FDP mode (`--fdp`): a namespace with Flexible Data Placement
//! compared with znskit's emulator configured alike (the same size, block
//! format, placement handles and reclaim unit size, read from the peer's
//! own Identify data, FDP feature, configuration page and handle status).
//!
//! Commands: writes with and without a placement identifier (ones the
//! namespace has and lacks), reads, Flush, I/O Management Receive
//! (Reclaim Unit Handle Status) and Send (Reclaim Unit Handle Update),
//! Get Log Page 20h-23h and Get Features 1Dh and 1Eh. After each, both
//! completions, the data, every handle's RUAMW and how the FDP statistics
//! grew must agree, or the difference must be one the catalogue explains
//! (docs/differential.md). The run ends with the placement check.

pub mod command;
pub mod compare;
pub mod divergence;
pub mod generate;
pub mod ng;
pub mod reference;
pub mod run;
pub mod target;

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use target::{DriverTarget, Target};

use crate::run::Config;

/// Opens the side `uri` names: `ng:/dev/ngXnY` through the kernel's
/// passthrough, anything else through the device API's user-space driver.
pub fn open(uri: &str) -> Result<Box<dyn Target>, String> {
    if let Some(path) = uri.strip_prefix("ng:") {
        return Ok(Box::new(ng::NgTarget::open(Path::new(path), uri).map_err(|e| e.to_string())?));
    }
    let dev = zns_device::open(uri).map_err(|e| e.to_string())?;
    Ok(Box::new(DriverTarget::new(dev, uri).map_err(|e| e.to_string())?))
}

/// Runs the FDP comparison on `peer`; `Ok(false)` when a difference is
/// unexplained or the placement check fails.
pub fn differential(cfg: &Config, peer: &mut dyn Target) -> Result<bool, String> {
    let start = Instant::now();
    let uri = peer.name().to_string();
    let g = reference::describe(peer).map_err(|e| e.to_string())?;
    let mut ours = reference::open(&g).map_err(|e| e.to_string())?;
    let ours_g = reference::describe(&mut ours).map_err(|e| format!("the reference: {e}"))?;
    let mut g = g;
    g.max_blocks = g.max_blocks.min(ours_g.max_blocks);
    check_alike(&g, &ours_g)?;
    println!(
        "differential: {uri} (FDP): namespace {} of {} blocks of {} bytes, endurance group {}, {} \
         placement handles, reclaim units of {} blocks, commands up to {} blocks; seed {:#x}, {} \
         sequences of {}..{} commands",
        peer.nsid(),
        g.blocks,
        g.block_size,
        g.endgid,
        g.handles,
        g.ru_blocks,
        g.max_blocks,
        cfg.seed,
        cfg.count,
        cfg.min_len,
        cfg.max_len
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut p = run::FdpSide { state: compare::state(peer, &g)?, target: peer };
    let mut o = run::FdpSide { state: compare::state(&mut ours, &g)?, target: &mut ours };
    let tally = run::run(&mut p, &mut o, &g, cfg, &mut out)?;
    let _ = write!(out, "{}", run::summary(&tally, &uri, cfg.seed));
    let check = run::placement_check(p.target, &g, cfg.seed);
    let placed = match &check {
        Ok(lines) => {
            for l in lines {
                let _ = writeln!(out, "differential: placement check: {l}");
            }
            true
        }
        Err(e) => {
            let _ = writeln!(out, "differential: FAIL placement check on {uri}: {e}");
            false
        }
    };
    let api = match api_check(&uri, &g) {
        Ok(line) => {
            let _ = writeln!(out, "differential: device API check: {line}");
            true
        }
        Err(e) => {
            let _ = writeln!(out, "differential: FAIL device API check on {uri}: {e}");
            false
        }
    };
    let pass = tally.unexplained == 0 && placed && api;
    let _ = writeln!(
        out,
        "differential: {} {uri} in {:.1} s",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64()
    );
    Ok(pass)
}

/// The device API's view of the peer's namespace: `zns_device::open`
/// must find its FDP configuration (as many handles as the peer
/// described), and one block written with `ZoneQueue::write_placed` on
/// the last placement handle must take one block off that handle's
/// reclaim unit and no other's, as the API's Reclaim Unit Handle Status
/// shows. Through `ng:` that is the kernel's io_uring passthrough carrying
/// the placement from the device API.
fn api_check(uri: &str, g: &reference::FdpGeometry) -> Result<String, String> {
    let dev = zns_device::open(uri).map_err(|e| format!("open: {e}"))?;
    let fdp = dev.info().fdp.clone().ok_or("the device API found no FDP configuration")?;
    if fdp.handles.len() != g.handles as usize || !fdp.enabled {
        return Err(format!(
            "the device API found {} handles (enabled: {}), the peer described {}",
            fdp.handles.len(),
            fdp.enabled,
            g.handles
        ));
    }
    let h = g.handles - 1;
    let pid = fdp.placement_id(h, 0).ok_or(format!("handle {h} has no placement identifier"))?;
    let mut q = dev.queue(4).map_err(|e| e.to_string())?;
    let available = |q: &mut dyn zns_device::ZoneQueue| -> Result<Vec<(u16, u64)>, String> {
        let s = q.ruh_status().map_err(|e| format!("Reclaim Unit Handle Status: {e}"))?;
        Ok(s.descriptors.iter().map(|d| (d.pid, d.available_blocks)).collect())
    };
    let mut before = available(q.as_mut())?;
    if before.iter().any(|&(p, a)| p == pid && a < 2) {
        q.ruh_update(&[pid]).map_err(|e| format!("Reclaim Unit Handle Update: {e}"))?;
        before = available(q.as_mut())?;
    }
    let buf = q.alloc(g.block_size).map_err(|e| e.to_string())?;
    q.write_placed(0, &buf, pid).map_err(|e| format!("a placed write: {e}"))?;
    let after = available(q.as_mut())?;
    let want: Vec<(u16, u64)> =
        before.iter().map(|&(p, a)| (p, if p == pid { a - 1 } else { a })).collect();
    if after != want {
        return Err(format!(
            "one block placed on identifier {pid}: handles' available blocks went from \
             {before:?} to {after:?}"
        ));
    }
    Ok(format!(
        "{} handles discovered; one block placed on identifier {pid} took one block off its \
         reclaim unit only",
        fdp.handles.len()
    ))
}

/// The reference must have what it was built with.
fn check_alike(peer: &reference::FdpGeometry, ours: &reference::FdpGeometry) -> Result<(), String> {
    let shape =
        |g: &reference::FdpGeometry| (g.blocks, g.block_size, g.handles, g.ruhs, g.ru_blocks);
    if shape(peer) != shape(ours) {
        return Err(format!(
            "the reference's FDP geometry differs from the peer's: {:?} vs {:?} (blocks, block \
             size, handles, reclaim unit handles, reclaim unit blocks)",
            shape(ours),
            shape(peer)
        ));
    }
    Ok(())
}
