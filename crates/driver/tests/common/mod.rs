//! Shared setup of the driver's integration tests: an emulated controller
//! from a built-in profile, brought up by the driver.

#![allow(dead_code)]

use std::fmt::Display;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zns_driver::{
    Controller, ControllerOptions, DmaMemory, EmulatedTransport, Namespace, Transport,
};
use zns_emulator::host::ProcessMemory;
use zns_emulator::profile::Profile;
use zns_emulator::Emulator;

/// A brought-up driver over a fresh emulator built from `profile`.
pub struct Rig {
    pub ctrl: Controller,
    pub emu: Arc<zns_emulator::Controller>,
    pub memory: Arc<ProcessMemory>,
}

impl Rig {
    pub fn new(profile: &str) -> Rig {
        Rig::with_options(profile, ControllerOptions::default())
    }

    pub fn with_options(profile: &str, options: ControllerOptions) -> Rig {
        Rig::with_profile(Profile::by_name(profile).expect("profile"), options)
    }

    pub fn with_profile(profile: Profile, options: ControllerOptions) -> Rig {
        let memory = ProcessMemory::new();
        let emu = Emulator::with_profile(profile).build(memory.clone()).expect("emulator");
        let t: Arc<dyn Transport> = Arc::new(EmulatedTransport::new(emu.clone(), memory.clone()));
        let ctrl = Controller::new(t, options).expect("bring-up");
        Rig { ctrl, emu, memory }
    }

    /// Like `with_profile`, with every doorbell write recorded.
    pub fn counting(profile: Profile) -> (Rig, Arc<Counting>) {
        let memory = ProcessMemory::new();
        let emu = Emulator::with_profile(profile).build(memory.clone()).expect("emulator");
        let counting = Arc::new(Counting {
            inner: EmulatedTransport::new(emu.clone(), memory.clone()),
            doorbells: Mutex::new(Vec::new()),
        });
        let t: Arc<dyn Transport> = counting.clone();
        let ctrl = Controller::new(t, ControllerOptions::default()).expect("bring-up");
        (Rig { ctrl, emu, memory }, counting)
    }

    /// The first zoned namespace.
    pub fn zns(&self) -> Namespace {
        self.ctrl.zoned_namespace().expect("zoned namespace").clone()
    }

    /// The first conventional namespace.
    pub fn nvm(&self) -> Namespace {
        self.ctrl.namespaces().iter().find(|n| !n.is_zoned()).expect("NVM namespace").clone()
    }
}

/// A deterministic byte pattern for block `lba` of a test.
pub fn pattern(seed: u64, lba: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lba.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The tiny profile with a larger transfer limit and a bigger conventional
/// namespace, for PRP list tests.
pub fn big_transfer_profile() -> Profile {
    let mut p = Profile::by_name("tiny").expect("tiny");
    p.controller.mdts_log2 = 9;
    p.controller.zasl_log2 = 9;
    p.namespaces[1].blocks = 8192;
    p
}

/// A transport that records doorbell writes (offset, value).
#[derive(Debug)]
pub struct Counting {
    inner: EmulatedTransport,
    pub doorbells: Mutex<Vec<(u32, u32)>>,
}

impl Counting {
    /// Doorbell writes recorded since the last call.
    pub fn take(&self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.doorbells.lock())
    }
}

impl Transport for Counting {
    fn read32(&self, offset: u32) -> u32 {
        self.inner.read32(offset)
    }
    fn read64(&self, offset: u32) -> u64 {
        self.inner.read64(offset)
    }
    fn write32(&self, offset: u32, value: u32) {
        if offset >= 0x1000 {
            self.doorbells.lock().push((offset, value));
        }
        self.inner.write32(offset, value)
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
        "counting emulator".into()
    }
}

/// A bound on a loop polling for completions: the emulated controller
/// gives them within microseconds, so one that never comes is a bug that
/// must fail the test rather than hang it. Generous, for a loaded machine.
pub struct Deadline(Instant);

impl Deadline {
    pub const PATIENCE: Duration = Duration::from_secs(60);

    pub fn start() -> Deadline {
        Deadline(Instant::now())
    }

    /// Fails the test, naming `what` it waited for, once the time is up.
    #[track_caller]
    pub fn check(&self, what: impl Display) {
        assert!(self.0.elapsed() < Self::PATIENCE, "{what}: not within {:?}", Self::PATIENCE);
    }
}
