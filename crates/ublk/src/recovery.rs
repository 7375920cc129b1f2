//! Taking over a ublk device whose server is gone (`UBLK_F_USER_RECOVERY`).
//!
//! Every device the server adds has user recovery with reissue
//! (`UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE`, where the
//! driver has them): when the server dies (`kill -9`, a crash), the kernel
//! keeps `/dev/ublkbN`, quiesces it (`UBLK_S_DEV_QUIESCED`) and holds new
//! requests; the requests the dead server had taken are queued again.
//! A new server asked for the same device number finds it here, checks
//! that it serves the same geometry, and takes it over
//! (`START_USER_RECOVERY`, then `END_USER_RECOVERY` once its queues wait):
//! the held and reissued requests then reach it.
//!
//! The functions that decide are pure and unit-tested; [`probe`] asks
//! the driver.

use std::path::Path;

use libublk::ctrl::UblkCtrl;
use libublk::sys;

use crate::error::{Error, Result};

/// What the driver says of an existing device.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Existing {
    /// `UBLK_S_DEV_*`.
    pub state: u16,
    /// The flags it was added with (`UBLK_F_*`).
    pub flags: u64,
    /// The process that served it last.
    pub server_pid: i32,
    /// Queues and their depth.
    pub queues: u16,
    /// Requests per queue.
    pub depth: u16,
    /// The largest request buffer it was added with.
    pub io_buf_bytes: u32,
    /// Its parameters (`GET_PARAMS`).
    pub params: sys::ublk_params,
}

/// What a server asked for device number N does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Plan {
    /// The device does not exist: add it (with this number, or any when
    /// `None`).
    Add(Option<u32>),
    /// Device `id` exists and its server is gone: take it over, as the
    /// driver described it.
    Recover {
        /// The device number.
        id: u32,
        /// What the driver said of it.
        existing: Existing,
    },
}

/// The device number's sysfs entry: present while the device exists.
fn exists(id: u32) -> bool {
    Path::new(&format!("/sys/class/ublk-char/ublkc{id}")).exists()
}

/// Asks the driver about device `id`: `None` when there is no such
/// device.
pub(crate) fn probe(id: u32) -> Result<Option<Existing>> {
    if !exists(id) {
        return Ok(None);
    }
    let what = "look up the ublk device";
    let ctrl = UblkCtrl::new_simple(id as i32).map_err(|e| Error::from_libublk(what, e))?;
    let info = ctrl.dev_info();
    let mut params = sys::ublk_params::default();
    ctrl.get_params(&mut params).map_err(|e| Error::from_libublk("read its parameters", e))?;
    Ok(Some(Existing {
        state: info.state,
        flags: info.flags,
        server_pid: info.ublksrv_pid,
        queues: info.nr_hw_queues,
        depth: info.queue_depth,
        io_buf_bytes: info.max_io_buf_bytes,
        params,
    }))
}

/// True while process `pid` exists.
pub(crate) fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; kill only checks that the process
    // exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Decides what to do with device `id`, given what the driver said of it
/// (`None`: it does not exist) and whether its last server process is
/// alive; `ours` are the parameters this server would give it.
pub(crate) fn plan(
    id: u32,
    existing: Option<&Existing>,
    server_alive: bool,
    ours: &sys::ublk_params,
) -> Result<Plan> {
    let Some(e) = existing else { return Ok(Plan::Add(Some(id))) };
    let refuse = |reason: String| Err(Error::Takeover { id, reason });
    if e.flags & u64::from(sys::UBLK_F_USER_RECOVERY) == 0 {
        return refuse(
            "it was added without user recovery (UBLK_F_USER_RECOVERY); delete it \
             (UBLK_CMD_DEL_DEV) first"
                .into(),
        );
    }
    match u32::from(e.state) {
        sys::UBLK_S_DEV_QUIESCED => {}
        // The driver notices a dead server when its io_uring is torn
        // down, a moment after the process is gone: START_USER_RECOVERY
        // waits for that.
        sys::UBLK_S_DEV_LIVE if !server_alive => {}
        sys::UBLK_S_DEV_LIVE => {
            return refuse(format!("it is live, served by process {}", e.server_pid));
        }
        sys::UBLK_S_DEV_DEAD => {
            return refuse(
                "it is stopped, not waiting for a server; delete it (UBLK_CMD_DEL_DEV) first"
                    .into(),
            );
        }
        s => return refuse(format!("it is in state {s}, which cannot be taken over")),
    }
    same_geometry(&e.params, ours).map_err(|reason| Error::Takeover { id, reason })?;
    Ok(Plan::Recover { id, existing: *e })
}

/// `Err` with the first difference when `theirs` (the existing device's
/// parameters) do not describe the device `ours` do: a server must not
/// take over a block device of another size, block size or zone layout.
pub(crate) fn same_geometry(
    theirs: &sys::ublk_params,
    ours: &sys::ublk_params,
) -> std::result::Result<(), String> {
    let zoned = |p: &sys::ublk_params| p.types & sys::UBLK_PARAM_TYPE_ZONED != 0;
    let fields: [(&str, u64, u64); 7] = [
        ("zoned", u64::from(zoned(theirs)), u64::from(zoned(ours))),
        ("sectors", theirs.basic.dev_sectors, ours.basic.dev_sectors),
        (
            "logical block shift",
            u64::from(theirs.basic.logical_bs_shift),
            u64::from(ours.basic.logical_bs_shift),
        ),
        (
            "largest request in sectors",
            theirs.basic.max_sectors.into(),
            ours.basic.max_sectors.into(),
        ),
        ("zone sectors", theirs.basic.chunk_sectors.into(), ours.basic.chunk_sectors.into()),
        (
            "max open zones",
            if zoned(theirs) { theirs.zoned.max_open_zones.into() } else { 0 },
            if zoned(ours) { ours.zoned.max_open_zones.into() } else { 0 },
        ),
        (
            "max active zones",
            if zoned(theirs) { theirs.zoned.max_active_zones.into() } else { 0 },
            if zoned(ours) { ours.zoned.max_active_zones.into() } else { 0 },
        ),
    ];
    match fields.iter().find(|(_, a, b)| a != b) {
        None => Ok(()),
        Some((name, a, b)) => {
            Err(format!("it has {name} {a}, the device served here {b}: another device"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    fn params(uri: &str) -> sys::ublk_params {
        let dev = zns_device::open(uri).unwrap();
        Layout::zoned_device(dev.info(), 512 << 10).unwrap().params()
    }

    fn existing(state: u32, flags: u32, params: sys::ublk_params) -> Existing {
        Existing {
            state: state as u16,
            flags: u64::from(flags),
            server_pid: 4242,
            queues: 2,
            depth: 32,
            io_buf_bytes: 256 << 10,
            params,
        }
    }

    #[test]
    fn a_missing_device_is_added_under_its_number() {
        let ours = params("emu:tiny");
        assert!(matches!(plan(3, None, false, &ours).unwrap(), Plan::Add(Some(3))));
    }

    #[test]
    fn a_quiesced_device_or_one_whose_server_died_is_taken_over() {
        let ours = params("emu:tiny");
        let rec = sys::UBLK_F_USER_RECOVERY | sys::UBLK_F_USER_RECOVERY_REISSUE;
        let q = existing(sys::UBLK_S_DEV_QUIESCED, rec, ours);
        let p = plan(1, Some(&q), false, &ours).unwrap();
        assert!(matches!(p, Plan::Recover { id: 1, existing } if existing.depth == 32));
        let live = existing(sys::UBLK_S_DEV_LIVE, rec, ours);
        assert!(matches!(plan(1, Some(&live), false, &ours).unwrap(), Plan::Recover { id: 1, .. }));
    }

    #[test]
    fn a_device_that_cannot_be_taken_over_says_why() {
        let ours = params("emu:tiny");
        let rec = sys::UBLK_F_USER_RECOVERY;
        let live = existing(sys::UBLK_S_DEV_LIVE, rec, ours);
        let e = plan(1, Some(&live), true, &ours).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot take over ublk device 1: it is live, served by process 4242"
        );
        let dead = existing(sys::UBLK_S_DEV_DEAD, rec, ours);
        let e = plan(1, Some(&dead), false, &ours).unwrap_err();
        assert!(e.to_string().contains("it is stopped"), "{e}");
        let plain = existing(sys::UBLK_S_DEV_QUIESCED, 0, ours);
        let e = plan(1, Some(&plain), false, &ours).unwrap_err();
        assert!(e.to_string().contains("without user recovery"), "{e}");
    }

    #[test]
    fn another_geometry_is_refused() {
        let tiny = params("emu:tiny");
        let small = params("emu:small");
        let rec = sys::UBLK_F_USER_RECOVERY;
        let q = existing(sys::UBLK_S_DEV_QUIESCED, rec, tiny);
        let e = plan(2, Some(&q), false, &small).unwrap_err();
        assert!(matches!(e, Error::Takeover { id: 2, .. }));
        assert!(e.to_string().contains("it has sectors 8192, the device served here"), "{e}");
        assert!(same_geometry(&tiny, &tiny).is_ok());
        let mut other = tiny;
        other.zoned.max_open_zones += 1;
        assert!(same_geometry(&tiny, &other).unwrap_err().contains("max open zones"));
        let conv = params("emu:small-conv");
        assert!(same_geometry(&conv, &small).unwrap_err().starts_with("it has zoned 0"));
    }

    #[test]
    fn this_process_is_alive_and_no_process_zero() {
        assert!(process_alive(std::process::id() as i32));
        assert!(!process_alive(0) && !process_alive(-1));
    }
}
