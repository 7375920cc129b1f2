//! Bring-up and identification against the emulator.

mod common;

use common::Rig;
use zns_spec::CommandSetId;

#[test]
fn brings_up_and_identifies_the_tiny_profile() {
    let rig = Rig::new("tiny");
    let info = rig.ctrl.info();
    assert!(info.io_command_sets, "CC.CSS = 110b when CAP.CSS bit 6 is set");
    assert!(info.command_set_profile.is_some());
    assert_eq!(info.identify.model_number, "znskit emulated ZNS SSD (tiny)");
    assert_eq!(info.identify.serial_number, "ZNSKIT-TINY-0001");
    assert_eq!(info.max_transfer, 4096 << 5);
    assert_eq!(info.zone_append_limit, Some(4096 << 4));
    assert!(info.io_queue_pairs >= 1);
    let ns = rig.ctrl.namespaces();
    assert_eq!(ns.len(), 2);
    let z = rig.zns();
    assert_eq!(z.nsid, 1);
    assert_eq!(z.command_set, CommandSetId::Zoned);
    assert_eq!(z.block_size, 4096);
    let zi = z.zoned.as_ref().unwrap();
    assert_eq!(zi.zone_size, 64);
    assert_eq!(zi.zone_count, 16);
    assert_eq!(zi.max_open, Some(4));
    assert_eq!(zi.max_active, Some(6));
    assert_eq!(zi.extension_bytes, 64);
    assert_eq!(zi.append_limit, 4096 << 4);
    let n = rig.nvm();
    assert_eq!(n.command_set, CommandSetId::Nvm);
    assert_eq!(n.blocks, 1024);
}

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zns_driver::{Controller, ControllerOptions, DmaMemory, EmulatedTransport, Error, Transport};
use zns_emulator::host::ProcessMemory;
use zns_emulator::Emulator;
use zns_spec::command::IdentifyCmd;
use zns_spec::features::FeatureId;
use zns_spec::identify::NamespaceIdDescriptorList;
use zns_spec::regs::{self, Csts};

#[test]
fn admin_commands_after_bring_up() {
    let rig = Rig::new("tiny");
    let c = &rig.ctrl;
    assert_eq!(c.identify_controller().unwrap().cntlid, c.info().identify.cntlid);
    assert_eq!(c.active_namespace_ids(None).unwrap(), vec![1, 2]);
    assert_eq!(c.active_namespace_ids(Some(CommandSetId::Zoned)).unwrap(), vec![1]);
    assert_eq!(c.active_namespace_ids(Some(CommandSetId::Nvm)).unwrap(), vec![2]);
    assert_eq!(c.namespace_descriptors(1).unwrap().command_set(), Some(CommandSetId::Zoned));
    let raw = c.identify(IdentifyCmd::ns_id_descriptors(2)).unwrap();
    let list = NamespaceIdDescriptorList::from_bytes(&raw).unwrap();
    assert_eq!(list.command_set(), Some(CommandSetId::Nvm));
    let v = c.io_command_set_vector().unwrap();
    let (index, mask) = c.info().command_set_profile.unwrap();
    assert_eq!(v.combination(index), mask);
    assert_eq!(c.identify_zns_controller().unwrap().zasl, 4);
    assert_eq!(c.identify_zns_namespace(1).unwrap().max_open, Some(4));
    assert_eq!(c.identify_namespace(2).unwrap().nsze, 1024);
    // Features: the profile index reads back; the write cache toggles.
    assert_eq!(c.get_feature(FeatureId::IoCommandSetProfile).unwrap(), index as u32);
    c.set_feature(FeatureId::VolatileWriteCache, 0).unwrap();
    assert_eq!(c.get_feature(FeatureId::VolatileWriteCache).unwrap() & 1, 0);
    c.set_feature(FeatureId::VolatileWriteCache, 1).unwrap();
    assert_eq!(c.get_feature(FeatureId::VolatileWriteCache).unwrap() & 1, 1);
    // Logs.
    let errors = c.error_log(4).unwrap();
    assert_eq!(errors.len(), 4);
    assert_eq!(c.error_log(256).unwrap().len(), 256);
    let changed = c.changed_zone_list(1).unwrap();
    assert!(changed.zones.is_empty() && !changed.overflow);
}

#[test]
fn shutdown_then_a_second_bring_up_sees_the_data() {
    let memory = ProcessMemory::new();
    let emu = Emulator::builder("tiny").unwrap().build(memory.clone()).unwrap();
    let transport: Arc<dyn Transport> =
        Arc::new(EmulatedTransport::new(emu.clone(), memory.clone()));
    let ctrl = Controller::new(transport.clone(), ControllerOptions::default()).unwrap();
    let ns = ctrl.namespace(2).unwrap().clone();
    let mut q = ctrl.create_queue_pair(8).unwrap();
    let mut w = ctrl.alloc_buffer(4096).unwrap();
    w.fill(0x5A);
    q.write(&ns, 9, &w).unwrap();
    q.flush(&ns).unwrap();
    ctrl.shutdown().unwrap();
    assert!(!emu.is_ready());
    assert!(ctrl.is_failed());
    let mut r = ctrl.alloc_buffer(4096).unwrap();
    assert!(matches!(q.read(&ns, 9, &mut r), Err(Error::ControllerFailed)));
    assert!(matches!(ctrl.identify_controller(), Err(Error::ControllerFailed)));
    drop(q);
    drop(ctrl);

    let ctrl = Controller::new(transport, ControllerOptions::default()).unwrap();
    assert!(emu.is_ready());
    let mut q = ctrl.create_queue_pair(8).unwrap();
    q.read(&ns, 9, &mut r).unwrap();
    assert!(r.as_slice().iter().all(|&b| b == 0x5A));
    drop(q);
    drop(ctrl);
    assert!(!emu.is_ready(), "the last handle shuts the controller down");
}

/// Swallows SQ tail doorbell writes of I/O queues while `hang` is set.
#[derive(Debug)]
struct Hanging {
    inner: EmulatedTransport,
    hang: AtomicBool,
}

impl Transport for Hanging {
    fn read32(&self, offset: u32) -> u32 {
        self.inner.read32(offset)
    }
    fn read64(&self, offset: u32) -> u64 {
        self.inner.read64(offset)
    }
    fn write32(&self, offset: u32, value: u32) {
        let io_sq_doorbell = offset >= 0x1008 && (offset - 0x1000).is_multiple_of(8);
        if !(io_sq_doorbell && self.hang.load(Ordering::SeqCst)) {
            self.inner.write32(offset, value)
        }
    }
    fn write64(&self, offset: u32, value: u64) {
        self.inner.write64(offset, value)
    }
    fn poll(&self, cqid: u16) {
        self.inner.poll(cqid)
    }
    fn allocate_dma(&self, len: usize) -> zns_driver::Result<DmaMemory> {
        self.inner.allocate_dma(len)
    }
    fn describe(&self) -> String {
        "hanging emulator".into()
    }
}

#[test]
fn a_command_that_never_completes_times_out_and_resets_the_controller() {
    let memory = ProcessMemory::new();
    let emu = Emulator::builder("tiny").unwrap().build(memory.clone()).unwrap();
    let hanging = Arc::new(Hanging {
        inner: EmulatedTransport::new(emu.clone(), memory),
        hang: AtomicBool::new(false),
    });
    let options = ControllerOptions { timeout: Duration::from_millis(50), ..Default::default() };
    let ctrl = Controller::new(hanging.clone(), options).unwrap();
    let ns = ctrl.namespace(2).unwrap().clone();
    let mut q = ctrl.create_queue_pair(8).unwrap();
    let mut other = ctrl.create_queue_pair(8).unwrap();
    q.flush(&ns).unwrap();
    hanging.hang.store(true, Ordering::SeqCst);
    let mut r = ctrl.alloc_buffer(4096).unwrap();
    let e = q.read(&ns, 0, &mut r).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(ctrl.is_failed());
    assert!(!Csts(hanging.read32(regs::offset::CSTS)).rdy(), "the controller was reset");
    assert!(matches!(other.flush(&ns), Err(Error::ControllerFailed)));
    drop(q);
    drop(other);
}
