//! Controller bring-up: reset, admin queues, command set selection, enable,
//! then discovery (Identify Controller, I/O command set profile, active
//! namespaces and their Identify data, Number of Queues); and the register
//! side of shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_spec::command::IdentifyCmd;
use zns_spec::identify::{IdentifyController, IoCommandSetVector};
use zns_spec::regs::{self, Aqa, Cap, Cc, Csts, Version};
use zns_spec::CommandSetId;

use crate::admin;
use crate::controller::ControllerOptions;
use crate::dma::{DmaPool, DMA_PAGE};
use crate::error::{Error, Result};
use crate::namespace::{ControllerInfo, Namespace, ZonedInfo};
use crate::queue::{Health, QueueConfig, QueuePair, QueueSetup};
use crate::transport::Transport;

/// CC.MPS for 4 KiB pages: 2^(12 + 0).
const MPS_4K: u8 = 0;
/// IOSQES: 64-byte submission entries (2^6).
const IOSQES: u8 = 6;
/// IOCQES: 16-byte completion entries (2^4).
const IOCQES: u8 = 4;
/// Largest admin queue AQA encodes (12-bit 0's based sizes).
const MAX_ADMIN_ENTRIES: u16 = 4096;
/// Admin queues must fit one page each: they are not assumed contiguous
/// beyond it. 64 entries of 64 bytes fill one 4 KiB page.
const MAX_ADMIN_DEPTH: u16 = (DMA_PAGE / 64) as u16;

/// Largest transfer of one admin command; longer log pages are read in
/// pieces.
pub(crate) const ADMIN_MAX_TRANSFER: usize = 64 << 10;

/// How long CSTS.RDY may take to follow CC.EN (CAP.TO, at least 500 ms).
pub(crate) fn ready_timeout(cap: Cap) -> Duration {
    Duration::from_millis(cap.timeout_ms().max(500) as u64)
}

/// Polls CSTS until `done` holds for it; fails on timeout, on a vanished
/// device (all ones), and on CFS when `fatal_is_error`.
fn wait_csts(
    t: &dyn Transport,
    timeout: Duration,
    what: &'static str,
    fatal_is_error: bool,
    done: impl Fn(Csts) -> bool,
) -> Result<()> {
    let start = Instant::now();
    loop {
        let raw = t.read32(regs::offset::CSTS);
        if raw == u32::MAX {
            return Err(Error::Unsupported(
                "controller registers read all ones (device gone?)".into(),
            ));
        }
        let csts = Csts(raw);
        if fatal_is_error && csts.cfs() {
            return Err(Error::ControllerFatal);
        }
        if done(csts) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout { what, after: start.elapsed() });
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Clears CC.EN and waits for CSTS.RDY = 0.
pub(crate) fn disable(t: &dyn Transport, timeout: Duration) -> Result<()> {
    let cc = Cc(t.read32(regs::offset::CC));
    if cc.en() {
        t.write32(regs::offset::CC, cc.with_en(false).0);
    }
    wait_csts(t, timeout, "CSTS.RDY to clear", false, |c| !c.rdy())
}

/// Normal shutdown: CC.SHN = 01b, wait for CSTS.SHST = 10b; then disable.
pub(crate) fn shutdown(
    t: &dyn Transport,
    shutdown_timeout: Duration,
    ready: Duration,
) -> Result<()> {
    let cc = Cc(t.read32(regs::offset::CC));
    if cc.en() {
        t.write32(regs::offset::CC, cc.with_shn(Cc::SHN_NORMAL).0);
        wait_csts(t, shutdown_timeout, "CSTS.SHST = shutdown complete", false, |c| {
            c.shst() == Csts::SHST_COMPLETE
        })?;
    }
    disable(t, ready)
}

/// The CC value that enables the controller with `css`.
pub(crate) fn enable_value(css: u8) -> Cc {
    Cc(0)
        .with_css(css)
        .with_mps(MPS_4K)
        .with_ams(0)
        .with_iosqes(IOSQES)
        .with_iocqes(IOCQES)
        .with_en(true)
}

/// CC.CSS for a controller's CAP.CSS: all I/O command sets when it can
/// select them, else the NVM command set.
pub(crate) fn select_css(cap: Cap) -> Result<u8> {
    if cap.supports_io_command_sets() {
        Ok(Cc::CSS_ALL_IO_SETS)
    } else if cap.supports_nvm() {
        Ok(Cc::CSS_NVM)
    } else {
        Err(Error::Unsupported(format!("CAP.CSS {:#04x} offers no I/O command set", cap.css())))
    }
}

/// Resets the controller, installs the admin queues and enables it with
/// the right command set selection. Returns the admin queue pair.
pub(crate) fn enable(
    transport: &Arc<dyn Transport>,
    cap: Cap,
    options: &ControllerOptions,
    health: &Arc<Health>,
) -> Result<QueuePair> {
    let t = transport.as_ref();
    if cap.0 == u64::MAX {
        return Err(Error::Unsupported("CAP reads all ones (device gone?)".into()));
    }
    if cap.min_page_size() > DMA_PAGE as u64 || cap.max_page_size() < DMA_PAGE as u64 {
        return Err(Error::Unsupported(format!(
            "controller page sizes {}..={} exclude 4 KiB",
            cap.min_page_size(),
            cap.max_page_size()
        )));
    }
    let timeout = ready_timeout(cap);
    let css = select_css(cap)?;
    disable(t, timeout)?;
    let depth = options
        .admin_depth
        .clamp(2, MAX_ADMIN_DEPTH)
        .min(MAX_ADMIN_ENTRIES)
        .min(cap.max_queue_entries().min(u16::MAX as u32) as u16);
    let setup = QueueSetup {
        transport: Arc::clone(transport),
        qid: 0,
        config: QueueConfig { depth, max_transfer: ADMIN_MAX_TRANSFER, timeout: options.timeout },
        page_size: DMA_PAGE,
        dstrd: cap.dstrd(),
        health: Arc::clone(health),
    };
    let admin = QueuePair::allocate(&setup)?;
    let aqa = Aqa(0).with_asqs(depth - 1).with_acqs(depth - 1);
    t.write32(regs::offset::AQA, aqa.0);
    t.write64(regs::offset::ASQ, admin.sq_bus_addr());
    t.write64(regs::offset::ACQ, admin.cq_bus_addr());
    let cc = enable_value(css);
    t.write32(regs::offset::CC, cc.0);
    if let Err(e) = wait_csts(t, timeout, "CSTS.RDY to set", true, |c| c.rdy()) {
        // Stop the controller before the admin queue memory goes away.
        let _ = disable(t, timeout);
        return Err(e);
    }
    tracing::debug!(
        transport = %transport.describe(),
        version = %Version(t.read32(regs::offset::VS)),
        css,
        admin_depth = depth,
        "controller enabled"
    );
    Ok(admin)
}

/// The index of the I/O command set combination to select: the first one
/// with ZNS (preferring one that also has NVM), else the first with NVM.
pub(crate) fn pick_command_set_profile(v: &IoCommandSetVector) -> Option<(u16, u64)> {
    let n = IoCommandSetVector::COMBINATIONS as u16;
    let nvm = IoCommandSetVector::bit(CommandSetId::Nvm);
    let zns = IoCommandSetVector::bit(CommandSetId::Zoned);
    let find = |want: u64| (0..n).find(|&i| v.combination(i) & want == want);
    find(nvm | zns).or_else(|| find(zns)).or_else(|| find(nvm)).map(|i| (i, v.combination(i)))
}

/// Selects an I/O command set combination with ZNS (Identify CNS 1Ch, Set
/// Features 19h). A controller that refuses either keeps its default.
fn select_command_sets(
    admin: &mut QueuePair,
    pool: &DmaPool,
    ic: &IdentifyController,
) -> Result<Option<(u16, u64)>> {
    // CNTID names this controller; some controllers only accept 0 here.
    let mut first = admin::identify_raw(admin, pool, IdentifyCmd::io_command_sets(ic.cntlid));
    if ic.cntlid != 0 && matches!(&first, Err(Error::Nvme(_))) {
        first = admin::identify_raw(admin, pool, IdentifyCmd::io_command_sets(0));
    }
    let raw = match first {
        Ok(raw) => raw,
        Err(Error::Nvme(e)) => {
            tracing::warn!(status = %e, "Identify I/O Command Set (CNS 1Ch) refused");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let vector = IoCommandSetVector::from_bytes(&raw);
    let Some((index, mask)) = pick_command_set_profile(&vector) else {
        tracing::warn!("no I/O command set combination with NVM or ZNS");
        return Ok(None);
    };
    let f = zns_spec::command::Features::set_io_command_set_profile(index)
        .map_err(|e| Error::Command(e.to_string()))?;
    match admin::set_features(admin, f) {
        Ok(_) => Ok(Some((index, mask))),
        Err(Error::Nvme(e)) => {
            tracing::warn!(status = %e, index, "Set Features I/O Command Set Profile refused");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Active namespaces and their command sets: CNS 07h per command set when
/// command sets are enabled, CNS 02h otherwise or as the fallback.
fn active_namespaces(
    admin: &mut QueuePair,
    pool: &DmaPool,
    io_sets: bool,
) -> Result<BTreeMap<u32, Option<CommandSetId>>> {
    let mut found = BTreeMap::new();
    if io_sets {
        let mut ok = true;
        for csi in [CommandSetId::Nvm, CommandSetId::Zoned] {
            match admin::active_namespace_ids(admin, pool, Some(csi)) {
                Ok(ids) => found.extend(ids.into_iter().map(|id| (id, Some(csi)))),
                Err(Error::Nvme(e)) => {
                    tracing::debug!(status = %e, ?csi, "CNS 07h refused; falling back to CNS 02h");
                    ok = false;
                }
                Err(e) => return Err(e),
            }
        }
        if ok {
            return Ok(found);
        }
    }
    for id in admin::active_namespace_ids(admin, pool, None)? {
        found.entry(id).or_insert(None);
    }
    Ok(found)
}

/// Identify data of one namespace; `None` when it turns out inactive.
fn identify_namespace(
    admin: &mut QueuePair,
    pool: &DmaPool,
    nsid: u32,
    csi: Option<CommandSetId>,
    max_transfer: usize,
    append_limit: usize,
) -> Result<Option<Namespace>> {
    let id = admin::identify_namespace(admin, pool, nsid)?;
    if id.nsze == 0 {
        return Ok(None);
    }
    let csi = match csi {
        Some(c) => c,
        None => match admin::namespace_descriptors(admin, pool, nsid) {
            Ok(list) => list.command_set().unwrap_or(CommandSetId::Nvm),
            Err(Error::Nvme(_)) => CommandSetId::Nvm,
            Err(e) => return Err(e),
        },
    };
    let block_size = id.block_size().ok_or_else(|| {
        Error::Malformed(format!(
            "namespace {nsid}: LBA format {} has no data size",
            id.format_index()
        ))
    })? as usize;
    let zoned = if csi == CommandSetId::Zoned {
        let zns = admin::identify_zns_namespace(admin, pool, nsid)?;
        let fmt = zns.current_zone_format(&id);
        if fmt.zone_size == 0 {
            return Err(Error::Malformed(format!("namespace {nsid}: zone size 0")));
        }
        Some(ZonedInfo {
            zone_size: fmt.zone_size,
            zone_count: id.nsze / fmt.zone_size,
            extension_bytes: fmt.extension_bytes() as usize,
            max_open: zns.max_open,
            max_active: zns.max_active,
            append_limit: append_limit.min(max_transfer),
            identify: zns,
        })
    } else {
        None
    };
    Ok(Some(Namespace {
        nsid,
        command_set: csi,
        block_size,
        metadata_size: id.current_lba_format().metadata_size,
        blocks: id.nsze,
        capacity: id.ncap,
        max_transfer,
        identify: id,
        zoned,
    }))
}

/// Identify Controller, command set selection, namespaces, queues.
pub(crate) fn discover(
    admin: &mut QueuePair,
    pool: &DmaPool,
    cap: Cap,
    transport: &dyn Transport,
    options: &ControllerOptions,
) -> Result<(ControllerInfo, Vec<Namespace>)> {
    let ic = admin::identify_controller(admin, pool)?;
    let mdts_bytes = ic.max_transfer_bytes(cap.min_page_size());
    let max_transfer = mdts_bytes
        .map_or(options.max_transfer, |m| {
            (m.min(usize::MAX as u64) as usize).min(options.max_transfer)
        })
        .max(DMA_PAGE);
    let io_sets = Cc(transport.read32(regs::offset::CC)).css() == Cc::CSS_ALL_IO_SETS;
    let profile = if io_sets { select_command_sets(admin, pool, &ic)? } else { None };
    let ids = active_namespaces(admin, pool, io_sets)?;
    let zasl = if io_sets && ids.values().any(|c| *c != Some(CommandSetId::Nvm)) {
        match admin::identify_zns_controller(admin, pool) {
            Ok(z) => z.zasl_bytes(cap.min_page_size(), mdts_bytes),
            Err(Error::Nvme(e)) => {
                tracing::debug!(status = %e, "no ZNS Identify Controller data");
                mdts_bytes
            }
            Err(e) => return Err(e),
        }
    } else {
        mdts_bytes
    };
    let append_limit = zasl.map_or(max_transfer, |z| (z.min(usize::MAX as u64)) as usize);
    let mut namespaces = Vec::new();
    for (nsid, csi) in ids {
        if let Some(ns) = identify_namespace(admin, pool, nsid, csi, max_transfer, append_limit)? {
            namespaces.push(ns);
        }
    }
    let granted = admin::set_number_of_queues(admin, options.io_queue_pairs.max(1))?;
    let info = ControllerInfo {
        cap,
        version: Version(transport.read32(regs::offset::VS)),
        page_size: DMA_PAGE,
        max_transfer,
        mdts_bytes,
        zone_append_limit: zasl.map(|z| (z.min(usize::MAX as u64) as usize).min(max_transfer)),
        io_command_sets: io_sets,
        command_set_profile: profile,
        io_queue_pairs: granted,
        identify: ic,
    };
    tracing::info!(
        model = %info.identify.model_number,
        namespaces = namespaces.len(),
        io_queue_pairs = granted,
        max_transfer,
        "controller discovered"
    );
    Ok((info, namespaces))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_value_fields() {
        let cc = enable_value(Cc::CSS_ALL_IO_SETS);
        assert!(cc.en());
        assert_eq!(cc.css(), 0b110);
        assert_eq!(cc.mps(), 0);
        assert_eq!(cc.io_sq_entry_size(), 64);
        assert_eq!(cc.io_cq_entry_size(), 16);
        assert_eq!(cc.shn(), 0);
    }

    #[test]
    fn css_selection() {
        let both = Cap(0).with_css(Cap::CSS_NVM | Cap::CSS_IO_COMMAND_SETS);
        assert_eq!(select_css(both).unwrap(), Cc::CSS_ALL_IO_SETS);
        assert_eq!(select_css(Cap(0).with_css(Cap::CSS_NVM)).unwrap(), Cc::CSS_NVM);
        assert!(select_css(Cap(0).with_css(Cap::CSS_ADMIN_ONLY)).is_err());
    }

    #[test]
    fn profile_prefers_nvm_plus_zns() {
        let nvm = IoCommandSetVector::bit(CommandSetId::Nvm);
        let zns = IoCommandSetVector::bit(CommandSetId::Zoned);
        let mut v = IoCommandSetVector::default();
        v.set_combination(0, nvm);
        v.set_combination(1, zns);
        v.set_combination(2, nvm | zns);
        assert_eq!(pick_command_set_profile(&v), Some((2, nvm | zns)));
        v.set_combination(2, 0);
        assert_eq!(pick_command_set_profile(&v), Some((1, zns)));
        v.set_combination(1, 0);
        assert_eq!(pick_command_set_profile(&v), Some((0, nvm)));
        assert_eq!(pick_command_set_profile(&IoCommandSetVector::default()), None);
    }

    #[test]
    fn ready_timeout_has_a_floor() {
        assert_eq!(ready_timeout(Cap(0)), Duration::from_millis(500));
        assert_eq!(ready_timeout(Cap(0).with_to(20)), Duration::from_secs(10));
    }
}
