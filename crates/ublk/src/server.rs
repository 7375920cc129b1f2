//! The ublk server: adds the device to the kernel through libublk, serves
//! each ublk queue on a thread of its own, and removes the device.
//!
//! Data moves by `UBLK_F_USER_COPY` (which zoned ublk devices require):
//! a queue's thread reads a write's data from the ublk character device
//! (`/dev/ublkcN`) at the request's offset and writes a read's data
//! there. Each request is carried out by its queue's handler, blocking
//! until the device completes it.

use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use libublk::ctrl::{UblkCtrl, UblkCtrlBuilder};
use libublk::io::{UblkDev, UblkIOCtx, UblkQueue};
use libublk::{sys, BufDesc, BufDescList, UblkFlags, UblkIORes};
use zns_block::BlockDevice;
use zns_device::ZonedDevice;

use crate::error::{Error, Result, CREATE};
use crate::handler::{BlockHandler, Counters, DataPort, Done, Handler, Stats, ZonedHandler};
use crate::layout::Layout;
use crate::recovery::{self, Plan};
use crate::request::Request;
use crate::CONTROL_PATH;

/// What a ublk device serves.
///
/// Thread safety: `Send + Sync` (both kinds of device are).
#[derive(Clone)]
pub enum Target {
    /// A zoned device (zoned where its namespace is; a conventional
    /// namespace is a plain disk), each ublk queue with a
    /// [`zns_device::ZoneQueue`] of its own.
    Zoned(Arc<dyn ZonedDevice>),
    /// A block device (the FTL), shared by the ublk queues, named for
    /// messages.
    Block {
        /// The device.
        device: Arc<dyn BlockDevice>,
        /// What to call it in messages ("FTL on emu:small").
        name: String,
    },
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Zoned(d) => f.debug_tuple("Zoned").field(&d.info().uri).finish(),
            Target::Block { name, .. } => f.debug_struct("Block").field("name", name).finish(),
        }
    }
}

/// How the ublk device is set up.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// ublk queues (hardware queues of the block device), each served by
    /// a thread of its own: 1 to 64.
    pub queues: u16,
    /// Requests each queue holds at once: 1 to 4096.
    pub depth: u16,
    /// The largest request in bytes (capped at one device command).
    pub max_request_bytes: u32,
    /// The target name ublk records for the device.
    pub name: String,
    /// The device number N (`/dev/ublkbN`) to serve; `None` lets the
    /// kernel choose. When device N exists and its server is gone
    /// (killed: the device waits, quiesced), [`UblkDevice::start`] takes
    /// it over (user recovery) with the queues and depth it has;
    /// otherwise it adds device N.
    pub id: Option<u32>,
    /// Keep each queue's thread on the CPUs whose requests the queue
    /// serves (libublk's placement, from the kernel's queue map). Off by
    /// default: a request then wakes its queue's thread on whichever CPU
    /// is free, so the server runs beside the application instead of
    /// taking turns with it on the application's CPU (with one
    /// application thread, every request of its CPU goes to one queue).
    pub pin_queues: bool,
}

impl Default for Config {
    /// One queue of depth 64, requests of up to 512 KiB.
    fn default() -> Self {
        Config {
            queues: 1,
            depth: 64,
            max_request_bytes: 512 << 10,
            name: "znskit".into(),
            id: None,
            pin_queues: false,
        }
    }
}

impl Config {
    fn check(&self) -> Result<()> {
        if !(1..=64).contains(&self.queues) {
            return Err(Error::Config(format!("{} queues (1 to 64)", self.queues)));
        }
        if !(1..=4096).contains(&self.depth) {
            return Err(Error::Config(format!("queue depth {} (1 to 4096)", self.depth)));
        }
        if self.max_request_bytes > 32 << 20 {
            return Err(Error::Config(format!(
                "requests of {} bytes (at most 32 MiB)",
                self.max_request_bytes
            )));
        }
        Ok(())
    }
}

/// A live ublk device: `/dev/ublkbN` serving a [`Target`] until
/// [`UblkDevice::stop`] (or drop) removes it.
///
/// Thread safety: `Send + Sync`; the serving happens on threads of its
/// own.
pub struct UblkDevice {
    id: u32,
    zoned: bool,
    recovered: bool,
    queues: u16,
    depth: u16,
    layout: Layout,
    ctrl: Arc<UblkCtrl>,
    /// Each queue's.
    counters: Vec<Arc<Counters>>,
    server: Option<JoinHandle<Result<()>>>,
}

impl std::fmt::Debug for UblkDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UblkDevice").field("id", &self.id).field("zoned", &self.zoned).finish()
    }
}

impl UblkDevice {
    /// Adds a ublk device serving `target` and starts it, or takes over
    /// device [`Config::id`] when its server is gone: when this returns,
    /// [`UblkDevice::block_path`] is a block device (zoned, host-managed,
    /// where the target is). Needs root and the kernel's `ublk_drv`
    /// (Linux 6.5+ for the user copy it relies on, 6.6+ for zoned
    /// devices): without it the error is [`Error::KernelLacksUblk`], not
    /// a bare errno. A device it adds has user recovery where the driver
    /// has it: if this process is killed, the device waits for another
    /// server to take it over (see [`Config::id`]).
    pub fn start(target: Target, config: &Config) -> Result<UblkDevice> {
        config.check()?;
        let layout = match &target {
            Target::Zoned(d) => Layout::zoned_device(d.info(), config.max_request_bytes)?,
            Target::Block { device, name } => {
                Layout::block_device(name, device.as_ref(), config.max_request_bytes)?
            }
        };
        check_control(Path::new(CONTROL_PATH))?;
        let zoned = layout.zoned.is_some();
        let features = libublk::ctrl::UblkCtrl::get_features();
        check_features(features, zoned)?;
        let params = layout.params();
        let plan = match config.id {
            None => Plan::Add(None),
            Some(id) => {
                let existing = recovery::probe(id)?;
                let alive =
                    existing.as_ref().is_some_and(|e| recovery::process_alive(e.server_pid));
                recovery::plan(id, existing.as_ref(), alive, &params)?
            }
        };
        // A device taken over keeps the queues and depth it was added
        // with: the kernel's queues wait for exactly those.
        let (queues, depth) = match &plan {
            Plan::Recover { existing, .. } => (existing.queues, existing.depth),
            Plan::Add(_) => (config.queues, config.depth),
        };
        let counters: Vec<Arc<Counters>> =
            (0..queues).map(|_| Arc::new(Counters::default())).collect();
        let handlers = handlers(&target, &layout, depth, &counters)?;
        let recovered = matches!(plan, Plan::Recover { .. });
        let builder = UblkCtrlBuilder::default().name(&config.name).nr_queues(queues).depth(depth);
        let ctrl = match plan {
            Plan::Recover { id, existing: e } => {
                let ctrl = builder
                    .id(id as i32)
                    .io_buf_bytes(e.io_buf_bytes)
                    .ctrl_flags(e.flags)
                    .dev_flags(UblkFlags::UBLK_DEV_F_RECOVER_DEV)
                    .build()
                    .map_err(|e| Error::from_libublk("open the ublk device to take it over", e))?;
                // START_USER_RECOVERY: libublk retries while the driver
                // says EBUSY (the dead server's files not yet released,
                // the device not yet quiesced), for up to 30 s.
                let what = "take over the ublk device (START_USER_RECOVERY)";
                let r = ctrl.start_user_recover().map_err(|e| Error::from_libublk(what, e))?;
                if r < 0 {
                    return Err(Error::Kernel { what, errno: -r });
                }
                tracing::debug!("ublk device {id}: taking it over");
                ctrl
            }
            Plan::Add(id) => builder
                .id(id.map_or(-1, |n| n as i32))
                .io_buf_bytes(layout.io_buf_bytes())
                .ctrl_flags(add_flags(features, zoned))
                .dev_flags(UblkFlags::UBLK_DEV_F_ADD_DEV)
                .build()
                .map_err(|e| Error::from_libublk(CREATE, e))?,
        };
        let ctrl = Arc::new(ctrl);
        let (tx, rx) = mpsc::channel();
        let server = {
            let ctrl = Arc::clone(&ctrl);
            let params = layout.params();
            let handlers = Arc::new(Mutex::new(handlers));
            let pin = config.pin_queues;
            std::thread::Builder::new()
                .name("ublk-server".into())
                .spawn(move || serve(&ctrl, params, handlers, pin, tx))
                .map_err(|e| Error::Server(format!("cannot start: {e}")))?
        };
        match rx.recv() {
            Ok(id) => Ok(UblkDevice {
                id,
                zoned,
                recovered,
                queues,
                depth,
                layout,
                ctrl,
                counters,
                server: Some(server),
            }),
            // The server ended before the device started: its error.
            Err(_) => match server.join() {
                Ok(Err(e)) => Err(e),
                Ok(Ok(())) => Err(Error::Server("ended before the device started".into())),
                Err(_) => Err(Error::Server("panicked while starting the device".into())),
            },
        }
    }

    /// The ublk device number N (`/dev/ublkbN`, `/dev/ublkcN`).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The block device: `/dev/ublkbN`.
    pub fn block_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/ublkb{}", self.id))
    }

    /// The character device the server serves it through: `/dev/ublkcN`.
    pub fn char_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/ublkc{}", self.id))
    }

    /// True when the block device is zoned (host-managed).
    pub fn zoned(&self) -> bool {
        self.zoned
    }

    /// True when this server took the device over from a server that was
    /// gone (user recovery), false when it added the device.
    pub fn recovered(&self) -> bool {
        self.recovered
    }

    /// The device's queues (a device taken over keeps its own).
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// Requests each queue holds (a device taken over keeps its own).
    pub fn depth(&self) -> u16 {
        self.depth
    }

    /// What the kernel was told about the device.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// What the device has served so far.
    pub fn stats(&self) -> Stats {
        self.snapshot()
    }

    fn snapshot(&self) -> Stats {
        self.counters.iter().fold(Stats::default(), |sum, c| sum + c.snapshot())
    }

    /// Stops the device and removes it: the block and character devices
    /// are gone when this returns, and every queue's handler (with its
    /// reference to the target) is dropped. Requests in flight complete
    /// first; users of the block device see it disappear (unmount it
    /// first). Returns what it served.
    pub fn stop(mut self) -> Result<Stats> {
        self.shut_down()?;
        Ok(self.snapshot())
    }

    fn shut_down(&mut self) -> Result<()> {
        let Some(server) = self.server.take() else { return Ok(()) };
        // This thread sends STOP_DEV now, and DEL_DEV when it drops the
        // control.
        control_ring()?;
        // STOP_DEV: the queues see their commands aborted and end, and
        // the server's thread returns.
        let killed = self.ctrl.kill_dev();
        let served = server.join().map_err(|_| Error::Server("panicked".into()))?;
        killed.map_err(|e| Error::from_libublk("stop the ublk device", e))?;
        // DEL_DEV, now that nothing else holds the device: a control that
        // took a device over would not delete it when dropped.
        self.ctrl.del_dev().map_err(|e| Error::from_libublk("delete the ublk device", e))?;
        tracing::debug!("ublk device {} stopped and deleted", self.id);
        served
    }
}

impl Drop for UblkDevice {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            tracing::warn!("ublk device {}: {e}", self.id);
        }
    }
}

/// Fails with [`Error::KernelLacksUblk`] when `control` (the ublk
/// control device) is missing, with [`Error::PermissionDenied`] when the
/// caller may not open it.
pub fn check_control(control: &Path) -> Result<()> {
    match std::fs::OpenOptions::new().read(true).write(true).open(control) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::KernelLacksUblk {
            control: control.to_path_buf(),
            running: crate::error::running_kernel(),
        }),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            Err(Error::PermissionDenied { path: control.to_path_buf() })
        }
        Err(e) => Err(Error::Kernel {
            what: "open the ublk control device",
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        }),
    }
}

/// Checks the driver's features (`UBLK_U_CMD_GET_FEATURES`, Linux 6.5+;
/// `None` before) for what the device needs: user copy always, zoned
/// devices for a zoned target.
fn check_features(features: Option<u64>, zoned: bool) -> Result<()> {
    let has = |f: u32| features.is_some_and(|x| x & u64::from(f) != 0);
    if !has(sys::UBLK_F_USER_COPY) {
        return Err(Error::KernelLacksFeature {
            feature: "UBLK_F_USER_COPY",
            needs: "Linux 6.5 or later",
            running: crate::error::running_kernel(),
        });
    }
    if zoned && !has(sys::UBLK_F_ZONED) {
        return Err(Error::KernelLacksFeature {
            feature: "UBLK_F_ZONED",
            needs: "Linux 6.6 or later, built with CONFIG_BLK_DEV_ZONED (serve a conventional \
                    device, or the FTL with `zns ftl ublk`, on this one)",
            running: crate::error::running_kernel(),
        });
    }
    Ok(())
}

/// The flags of a device this server adds: user copy (the data path),
/// zoned for a zoned target, and user recovery with reissue where the
/// driver has them (`features`), so that a killed server's device waits
/// for the next one and the requests the dead one had taken are sent
/// again.
fn add_flags(features: Option<u64>, zoned: bool) -> u64 {
    let recovery = u64::from(sys::UBLK_F_USER_RECOVERY | sys::UBLK_F_USER_RECOVERY_REISSUE);
    let mut flags = u64::from(sys::UBLK_F_USER_COPY) | (features.unwrap_or(0) & recovery);
    if zoned {
        flags |= u64::from(sys::UBLK_F_ZONED);
    }
    flags
}

/// A handler for each queue of `depth`, counting in the queue's own of
/// `counters`, in queue order.
fn handlers(
    target: &Target,
    layout: &Layout,
    depth: u16,
    counters: &[Arc<Counters>],
) -> Result<Vec<Option<Box<dyn Handler>>>> {
    let bytes = layout.max_request_bytes as usize;
    counters
        .iter()
        .map(|counters| -> Result<Option<Box<dyn Handler>>> {
            Ok(Some(match target {
                Target::Zoned(dev) => {
                    let q = dev.queue(usize::from(depth)).map_err(|source| Error::Device {
                        what: "create a device queue",
                        source,
                    })?;
                    let discard = layout.discard_sectors > 0;
                    let h =
                        ZonedHandler::new(q, layout.geometry, bytes, discard, Arc::clone(counters))
                            .map_err(|source| Error::Device {
                                what: "allocate a buffer",
                                source,
                            })?;
                    Box::new(h)
                }
                Target::Block { device, .. } => Box::new(BlockHandler::new(
                    Arc::clone(device),
                    layout.geometry,
                    bytes,
                    Arc::clone(counters),
                )),
            }))
        })
        .collect()
}

type Handlers = Arc<Mutex<Vec<Option<Box<dyn Handler>>>>>;

/// The server's thread: sets the parameters, starts a thread per queue,
/// starts the device (sending its number on `started`), and returns when
/// the device has been stopped and its queues have ended.
fn serve(
    ctrl: &UblkCtrl,
    params: sys::ublk_params,
    handlers: Handlers,
    pin: bool,
    started: mpsc::Sender<u32>,
) -> Result<()> {
    // The queue threads inherit this thread's signal mask.
    block_signals();
    control_ring()?;
    let tgt_init = move |dev: &mut UblkDev| {
        dev.tgt.dev_size = params.basic.dev_sectors << 9;
        dev.tgt.params = params;
        Ok(())
    };
    let queue = move |qid: u16, dev: &UblkDev| {
        let handler = handlers.lock().ok().and_then(|mut h| h.get_mut(usize::from(qid))?.take());
        match handler {
            Some(h) => serve_queue(qid, dev, h, pin),
            None => tracing::error!("ublk queue {qid}: no handler"),
        }
    };
    let device = move |ctrl: &UblkCtrl| {
        let _ = started.send(ctrl.dev_info().dev_id);
    };
    ctrl.run_target(tgt_init, queue, device)
        .map(drop)
        .map_err(|e| Error::from_libublk("start the ublk device", e))
}

/// Serves queue `qid` until the device stops.
/// Unless `pin`, the queue's thread may run on any CPU (see
/// [`Config::pin_queues`]).
fn serve_queue(qid: u16, dev: &UblkDev, mut handler: Box<dyn Handler>, pin: bool) {
    let cdev = match char_device(dev) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("ublk queue {qid}: the character device: {e}");
            return;
        }
    };
    let queue = match UblkQueue::new(qid, dev)
        .and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(None)))
    {
        Ok(q) => q,
        Err(e) => {
            tracing::error!("ublk queue {qid}: {e}");
            return;
        }
    };
    let mut placed = pin;
    queue.wait_and_handle_io(|q: &UblkQueue, tag: u16, _: &UblkIOCtx| {
        // libublk pins the thread from its own thread once the queue
        // thread has started, racing with anything done before; the
        // first request comes only after the device has started, when
        // that is done.
        if !placed {
            placed = true;
            if let Err(e) = unpin_thread() {
                tracing::debug!("ublk queue {qid}: staying on its CPUs: {e}");
            }
        }
        let iod = q.get_iod(tag);
        let mut port =
            UserCopy { cdev: &cdev, pos: UblkIOCtx::ublk_user_copy_pos(q.get_qid(), tag, 0) };
        let done = match Request::decode(iod.op_flags, iod.start_sector, iod.nr_sectors) {
            Ok(request) => handler.handle(&request, &mut port),
            Err(errno) => Done { res: -errno, append_sector: None },
        };
        let buf = match done.append_sector {
            Some(sector) if done.res >= 0 => BufDesc::ZonedAppendLba(sector),
            _ => BufDesc::Slice(&[]),
        };
        if let Err(e) = q.complete_io_cmd_unified(tag, buf, Ok(UblkIORes::Result(done.res))) {
            tracing::error!("ublk queue {qid} tag {tag}: completing the request: {e}");
        }
    });
    tracing::debug!("ublk queue {qid} ended");
}

/// Lets the calling thread run on every CPU.
fn unpin_thread() -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within
    // it for indices below CPU_SETSIZE; sched_setaffinity reads the set
    // of the size given (CPUs the machine lacks are ignored).
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The ublk character device libublk opened (a second open is refused),
/// as a file of this queue's own.
fn char_device(dev: &UblkDev) -> io::Result<File> {
    // SAFETY: `tgt.fds[0]` is the descriptor of the character device that
    // `dev` holds open (libublk's `UblkDev::cdev_file`) for as long as
    // `dev` lives, which outlives this borrow; the borrow only duplicates
    // it.
    let fd = unsafe { BorrowedFd::borrow_raw(dev.tgt.fds[0]) };
    Ok(File::from(fd.try_clone_to_owned()?))
}

/// A request's data through the character device (`UBLK_F_USER_COPY`):
/// the request's bytes are at `pos`.
struct UserCopy<'a> {
    cdev: &'a File,
    pos: u64,
}

impl DataPort for UserCopy<'_> {
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.cdev.read_exact_at(buf, self.pos)
    }

    fn deliver(&mut self, buf: &[u8]) -> io::Result<()> {
        self.cdev.write_all_at(buf, self.pos)
    }
}

/// Sets up libublk's control ring for the calling thread, unless it has
/// one: libublk sends control commands (STOP_DEV, DEL_DEV, ...) through
/// a ring of the calling thread's own, which only the thread that built
/// the control has.
fn control_ring() -> Result<()> {
    libublk::ublk_init_ctrl_task_ring(|ring| {
        if ring.is_none() {
            let r = io_uring::IoUring::<io_uring::squeue::Entry128>::builder()
                .build(16)
                .map_err(libublk::UblkError::IOError)?;
            *ring = Some(r);
        }
        Ok(())
    })
    .map_err(|e| Error::from_libublk("set up the ublk control ring", e))
}

/// Blocks every asynchronous signal in the calling thread (and the
/// threads it starts): libublk ends a queue when its wait for requests is
/// interrupted (`io_uring_enter` fails with EINTR, which it does not
/// retry), so a SIGINT meant for the application must reach another
/// thread. Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL) stay deliverable.
fn block_signals() {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset initializes the set it is given; sigdelset and
    // pthread_sigmask take that initialized set; a null old-set pointer
    // is allowed. None of them can fail with valid signal numbers.
    unsafe {
        libc::sigfillset(set.as_mut_ptr());
        for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
            libc::sigdelset(set.as_mut_ptr(), s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_control_device_says_to_load_ublk_drv() {
        let e = check_control(Path::new("/nonexistent/ublk-control")).unwrap_err();
        assert!(matches!(e, Error::KernelLacksUblk { .. }));
        let m = e.to_string();
        assert!(m.starts_with("/nonexistent/ublk-control is missing: "), "{m}");
        for words in
            ["modprobe ublk_drv", "as root", "Linux 6.5 or later", "6.6 or later for zoned"]
        {
            assert!(m.contains(words), "{words:?} not in {m}");
        }
        assert!(m.ends_with(&format!("this kernel is {})", crate::error::running_kernel())));
    }

    #[test]
    fn driver_features_are_checked() {
        let copy = u64::from(sys::UBLK_F_USER_COPY);
        let zoned = u64::from(sys::UBLK_F_ZONED);
        assert!(check_features(Some(copy | zoned), true).is_ok());
        assert!(check_features(Some(copy), false).is_ok());
        let e = check_features(Some(copy), true).unwrap_err();
        assert!(e.to_string().contains("UBLK_F_ZONED: Linux 6.6 or later"), "{e}");
        let e = check_features(None, false).unwrap_err();
        assert!(e.to_string().contains("UBLK_F_USER_COPY"), "{e}");
    }

    #[test]
    fn added_devices_have_user_recovery_where_the_driver_does() {
        let copy = u64::from(sys::UBLK_F_USER_COPY);
        let zoned = u64::from(sys::UBLK_F_ZONED);
        let rec = u64::from(sys::UBLK_F_USER_RECOVERY | sys::UBLK_F_USER_RECOVERY_REISSUE);
        assert_eq!(add_flags(Some(copy | zoned | rec), true), copy | zoned | rec);
        assert_eq!(add_flags(Some(copy | rec), false), copy | rec);
        assert_eq!(add_flags(Some(copy | zoned), true), copy | zoned);
        assert_eq!(add_flags(None, false), copy);
    }

    #[test]
    fn a_device_can_be_handed_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<UblkDevice>();
        send_sync::<Target>();
    }

    #[test]
    fn configurations_are_checked() {
        assert!(Config::default().check().is_ok());
        let c = Config { queues: 0, ..Config::default() };
        assert!(c.check().unwrap_err().to_string().contains("0 queues"));
        let c = Config { depth: 5000, ..Config::default() };
        assert!(c.check().is_err());
        let c = Config { max_request_bytes: 64 << 20, ..Config::default() };
        assert!(c.check().is_err());
    }
}
