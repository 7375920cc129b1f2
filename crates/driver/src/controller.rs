//! The controller handle: bring-up on creation, identification results,
//! I/O queue pairs on demand, shutdown when the last user lets go.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zns_spec::regs::{self, Cap};

use crate::admin;
use crate::bringup;
use crate::dma::{DmaBuffer, DmaPool};
use crate::error::{Error, Result};
use crate::namespace::{ControllerInfo, Namespace};
use crate::queue::{Health, QueueConfig, QueueOwner, QueuePair, QueueSetup};
#[cfg(feature = "emulator")]
use crate::transport::EmulatedTransport;
use crate::transport::Transport;

/// Choices made at bring-up.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Admin queue entries (at most 64: one page per ring).
    pub admin_depth: u16,
    /// I/O queue pairs to ask for (Set Features Number of Queues).
    pub io_queue_pairs: u16,
    /// Cap on one command's transfer in bytes, below the controller's MDTS;
    /// sizes each command's PRP list pages.
    pub max_transfer: usize,
    /// Timeout of blocking commands (admin and the I/O helpers).
    pub timeout: Duration,
    /// Chunk size of the DMA buffer pool.
    pub pool_chunk: usize,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            admin_depth: 32,
            io_queue_pairs: 64,
            max_transfer: 2 << 20,
            timeout: Duration::from_secs(30),
            pool_chunk: DmaPool::DEFAULT_CHUNK,
        }
    }
}

struct Shared {
    transport: Arc<dyn Transport>,
    health: Arc<Health>,
    admin: Mutex<QueuePair>,
    pool: DmaPool,
    info: ControllerInfo,
    namespaces: Vec<Namespace>,
    free_qids: Mutex<Vec<u16>>,
    options: ControllerOptions,
    shut_down: AtomicBool,
}

impl Shared {
    fn shutdown_timeout(&self) -> Duration {
        // RTD3E (microseconds) when reported, at least 5 s.
        let rtd3e = Duration::from_micros(self.info.identify.rtd3e as u64);
        rtd3e.max(Duration::from_secs(5))
    }

    fn shutdown(&self) -> Result<()> {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // Queue pairs still alive become unusable; their drop skips deletion.
        let ready = bringup::ready_timeout(self.info.cap);
        let mut r = Ok(());
        self.health.stop_with(|| {
            r = bringup::shutdown(self.transport.as_ref(), self.shutdown_timeout(), ready);
        });
        match &r {
            Ok(()) => {
                tracing::info!(transport = %self.transport.describe(), "controller shut down")
            }
            Err(e) => tracing::error!(error = %e, "controller shutdown failed"),
        }
        r
    }
}

impl QueueOwner for Shared {
    fn delete_queue_pair(&self, qid: u16) -> bool {
        if self.shut_down.load(Ordering::SeqCst) {
            // Shut down (and disabled): the controller no longer touches queues.
            return true;
        }
        if self.health.failed() {
            // Reset after a timeout; the memory is safe only if the reset took.
            self.health.stop_with(|| {});
            let csts = zns_spec::regs::Csts(self.transport.read32(regs::offset::CSTS));
            return !csts.rdy();
        }
        let r = admin::delete_io_queue_pair(&mut self.admin.lock(), qid);
        match r {
            Ok(()) => {
                self.free_qids.lock().push(qid);
                tracing::debug!(qid, "I/O queue pair deleted");
                true
            }
            Err(e) => {
                tracing::error!(qid, error = %e, "deleting I/O queue pair failed; leaking its memory");
                false
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// A brought-up NVMe controller.
///
/// Thread safety: `Send + Sync` and cheap to clone (shared state). Admin
/// commands from several threads are serialized by a lock on the admin
/// queue; I/O goes through [`QueuePair`]s, one per thread, created here.
/// The controller is shut down (CC.SHN) when the last handle and the last
/// queue pair are gone, or by [`Controller::shutdown`].
#[derive(Clone)]
pub struct Controller {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("transport", &self.shared.transport.describe())
            .field("model", &self.shared.info.identify.model_number)
            .field("namespaces", &self.shared.namespaces.len())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Brings up the controller behind `transport`: reset, admin queues,
    /// command set selection, enable, Identify, namespaces, queue count.
    pub fn new(transport: Arc<dyn Transport>, options: ControllerOptions) -> Result<Self> {
        let cap = Cap(transport.read64(regs::offset::CAP));
        let health = Health::new(Arc::clone(&transport), bringup::ready_timeout(cap));
        let mut admin = bringup::enable(&transport, cap, &options, &health)?;
        let pool = DmaPool::new(Arc::clone(&transport), options.pool_chunk);
        let (info, namespaces) =
            match bringup::discover(&mut admin, &pool, cap, transport.as_ref(), &options) {
                Ok(found) => found,
                Err(e) => {
                    // Stop the controller before the admin queue memory goes.
                    let _ = bringup::disable(transport.as_ref(), bringup::ready_timeout(cap));
                    return Err(e);
                }
            };
        let free_qids = (1..=info.io_queue_pairs).rev().collect();
        Ok(Controller {
            shared: Arc::new(Shared {
                transport,
                health,
                admin: Mutex::new(admin),
                pool,
                info,
                namespaces,
                free_qids: Mutex::new(free_qids),
                options,
                shut_down: AtomicBool::new(false),
            }),
        })
    }

    /// Brings up an in-process emulated controller with default options
    /// (feature `emulator`, on by default).
    #[cfg(feature = "emulator")]
    pub fn emulated(
        controller: Arc<zns_emulator::Controller>,
        memory: Arc<zns_emulator::host::ProcessMemory>,
    ) -> Result<Self> {
        let t: Arc<dyn Transport> = Arc::new(EmulatedTransport::new(controller, memory));
        Self::new(t, ControllerOptions::default())
    }

    /// Runs `f` with the admin queue locked.
    pub(crate) fn with_admin<R>(
        &self,
        f: impl FnOnce(&mut QueuePair, &DmaPool) -> Result<R>,
    ) -> Result<R> {
        if self.shared.shut_down.load(Ordering::SeqCst) {
            return Err(self.shared.health.error());
        }
        let mut q = self.shared.admin.lock();
        f(&mut q, &self.shared.pool)
    }

    /// What bring-up learned about the controller.
    pub fn info(&self) -> &ControllerInfo {
        &self.shared.info
    }

    /// The active namespaces, by ascending NSID.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.shared.namespaces
    }

    /// The active namespace `nsid`.
    pub fn namespace(&self, nsid: u32) -> Option<&Namespace> {
        self.shared.namespaces.iter().find(|n| n.nsid == nsid)
    }

    /// The first zoned namespace.
    pub fn zoned_namespace(&self) -> Option<&Namespace> {
        self.shared.namespaces.iter().find(|n| n.is_zoned())
    }

    /// The transport.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.shared.transport
    }

    /// The DMA buffer pool shared by this controller's users.
    pub fn pool(&self) -> &DmaPool {
        &self.shared.pool
    }

    /// Allocates a DMA buffer from the pool.
    pub fn alloc_buffer(&self, len: usize) -> Result<DmaBuffer> {
        self.shared.pool.alloc(len)
    }

    /// I/O queue identifiers not in use.
    pub fn free_queue_ids(&self) -> usize {
        self.shared.free_qids.lock().len()
    }

    /// Creates an I/O queue pair with `depth` entries per ring and the
    /// controller's transfer limit; hand it to the thread that will use it.
    pub fn create_queue_pair(&self, depth: u16) -> Result<QueuePair> {
        let mut config = QueueConfig::new(depth);
        config.timeout = self.shared.options.timeout;
        self.create_queue_pair_with(config)
    }

    /// Creates an I/O queue pair shaped by `config` (its transfer limit is
    /// capped at the controller's).
    pub fn create_queue_pair_with(&self, mut config: QueueConfig) -> Result<QueuePair> {
        let cap = self.shared.info.cap;
        let max_depth = cap.max_queue_entries().min(u16::MAX as u32) as u16;
        if config.depth < 2 || config.depth > max_depth {
            return Err(Error::InvalidArgument(format!(
                "queue depth {} outside 2..={max_depth} (CAP.MQES)",
                config.depth
            )));
        }
        config.max_transfer = config.max_transfer.min(self.shared.info.max_transfer);
        let qid = self
            .shared
            .free_qids
            .lock()
            .pop()
            .ok_or(Error::NoQueueIds { granted: self.shared.info.io_queue_pairs })?;
        match self.create_with_qid(qid, config) {
            Ok(q) => Ok(q),
            Err(e) => {
                self.shared.free_qids.lock().push(qid);
                Err(e)
            }
        }
    }

    fn create_with_qid(&self, qid: u16, config: QueueConfig) -> Result<QueuePair> {
        let setup = QueueSetup {
            transport: Arc::clone(&self.shared.transport),
            qid,
            config,
            page_size: self.shared.info.page_size,
            dstrd: self.shared.info.cap.dstrd(),
            health: Arc::clone(&self.shared.health),
        };
        let mut qp = QueuePair::allocate(&setup)?;
        let (cq, sq) = (qp.cq_bus_addr(), qp.sq_bus_addr());
        self.with_admin(|a, _| admin::create_io_queue_pair(a, qid, config.depth, cq, sq))?;
        qp.set_owner(Arc::clone(&self.shared) as Arc<dyn QueueOwner>);
        tracing::debug!(qid, depth = config.depth, "I/O queue pair created");
        Ok(qp)
    }

    /// Shuts the controller down now (CC.SHN normal, wait for SHST
    /// complete, then disable). Queue pairs still alive become unusable.
    pub fn shutdown(&self) -> Result<()> {
        let _admin = self.shared.admin.lock();
        self.shared.shutdown()
    }

    /// Resets the controller (CC.EN to 0, then a full bring-up) and returns
    /// the handle of the controller after the reset.
    ///
    /// A reset makes the controller forget every queue, the admin queue
    /// included, and stops its DMA. So this handle, its clones and every
    /// queue pair created from it stop working: their commands fail with
    /// [`Error::ControllerReset`] (so do blocking waits for commands that
    /// were in flight: the controller will not complete them), and
    /// dropping them frees their memory and buffers without deleting
    /// anything at the controller. Create new queue pairs from the returned
    /// handle. Data the controller completed before the reset stays on the
    /// media (what a write cache held is the device's business: Flush
    /// first to be sure).
    pub fn reset(&self) -> Result<Controller> {
        let admin = self.shared.admin.lock();
        let shared = &self.shared;
        if shared.shut_down.swap(true, Ordering::SeqCst) {
            return Err(shared.health.error());
        }
        shared.health.mark_reset();
        let ready = bringup::ready_timeout(shared.info.cap);
        let mut stopped = Ok(());
        shared.health.stop_with(|| stopped = bringup::disable(shared.transport.as_ref(), ready));
        drop(admin);
        stopped?;
        tracing::info!(transport = %shared.transport.describe(), "controller reset");
        Controller::new(Arc::clone(&shared.transport), shared.options.clone())
    }

    /// True once the controller failed (command timeout) or shut down.
    pub fn is_failed(&self) -> bool {
        self.shared.health.failed()
    }
}
