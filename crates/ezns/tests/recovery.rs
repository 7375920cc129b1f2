//! Restarts and power cuts: every logical zone comes back with a write
//! pointer at the end of what all its columns hold, the data below it as
//! written, everything flushed (or written with FUA) below it, and the zone
//! writable from there on.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zns_device::{ReportFilter, ZoneOp, ZoneQueue, ZoneState, ZonedDevice};
use zns_ezns::{Config, Instance};

/// What a logical zone holds, block by block (a tag per block), and how
/// much of it must survive a power cut.
#[derive(Debug, Clone, Default)]
struct Model {
    blocks: Vec<u64>,
    durable: usize,
    finished: bool,
}

fn block(tag: u64, bs: usize) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    for (i, c) in b.chunks_mut(8).enumerate() {
        c.copy_from_slice(&(tag ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
    b
}

fn tag_of(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// An emulated device that outlives the instances on it, so a power cut
/// finds its volatile cache as the instance left it (dropping the device
/// shuts the controller down, which would flush it).
struct Rig {
    emu: Arc<zns_emulator::Controller>,
    memory: Arc<zns_emulator::host::ProcessMemory>,
    base: Option<Arc<dyn ZonedDevice>>,
    config: Config,
}

impl Rig {
    fn new() -> Rig {
        let (emu, memory) = common::emulator();
        let base = Some(common::base(&emu, &memory));
        Rig { emu, memory, base, config: Config::from_toml(common::CONFIG).unwrap() }
    }

    fn up(&mut self) -> Instance {
        let base = self.base.get_or_insert_with(|| common::base(&self.emu, &self.memory)).clone();
        Instance::open(base, self.config.clone()).expect("recovery")
    }

    /// Cuts power (every instance on the device must be gone).
    fn cut(&mut self, seed: u64) {
        self.emu.power_cut(seed);
        self.base = None;
    }
}

/// Checks a tenant against its model after recovery; returns the model
/// trimmed to what survived.
fn check(dev: &dyn ZonedDevice, models: &mut [Model], exact: bool) {
    let info = dev.info().clone();
    let bs = info.block_size as usize;
    let mut q = dev.queue(4).unwrap();
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX).unwrap();
    for (z, m) in zones.iter().zip(models.iter_mut()) {
        let wp = match z.state {
            ZoneState::Empty => 0,
            ZoneState::Closed => z.write_pointer.unwrap() - z.start,
            ZoneState::Full => info.zone_capacity,
            s => panic!("zone {} came back {s}", z.index),
        };
        if m.finished {
            assert_eq!(z.state, ZoneState::Full, "finished zone {}", z.index);
            continue;
        }
        let wp = wp as usize;
        assert!(
            wp >= m.durable,
            "zone {}: write pointer {wp} below the durable {}",
            z.index,
            m.durable
        );
        assert!(
            wp <= m.blocks.len(),
            "zone {}: write pointer {wp} past the {} written",
            z.index,
            m.blocks.len()
        );
        if exact {
            assert_eq!(wp, m.blocks.len(), "zone {} after a clean restart", z.index);
        }
        if wp > 0 {
            let mut buf = dev.alloc(wp * bs).unwrap();
            let mut done = 0;
            while done < wp {
                let n = (wp - done).min(info.max_transfer_blocks() as usize);
                let mut part = dev.alloc(n * bs).unwrap();
                q.read(z.start + done as u64, &mut part).unwrap();
                buf[done * bs..(done + n) * bs].copy_from_slice(&part);
                done += n;
            }
            for (i, b) in buf.chunks(bs).enumerate() {
                assert_eq!(tag_of(b), m.blocks[i], "zone {} block {i} of {wp}", z.index);
            }
        }
        m.blocks.truncate(wp);
        m.durable = wp;
        if wp as u64 == info.zone_capacity {
            m.finished = true;
        }
    }
}

/// Random writes, appends, FUA writes, flushes, finishes and resets on
/// both tenants, some asynchronous and still in flight at the cut.
fn workload(
    inst: &Instance,
    models: &mut HashMap<String, Vec<Model>>,
    rng: &mut SmallRng,
    ops: usize,
    next_tag: &mut u64,
) {
    let devs: Vec<_> = ["a", "b"].iter().map(|n| inst.tenant(n).unwrap()).collect();
    let mut queues: Vec<Box<dyn ZoneQueue>> = devs.iter().map(|d| d.queue(16).unwrap()).collect();
    let info = devs[0].info().clone();
    let bs = info.block_size as usize;
    let cap = info.zone_capacity as usize;
    for _ in 0..ops {
        let t = rng.gen_range(0..2);
        let name = ["a", "b"][t];
        let active = devs[t].info().max_active.unwrap() as usize;
        let q = queues[t].as_mut();
        let m = models.get_mut(name).unwrap();
        // Stay within the active limit: only the first `active` zones.
        let z = rng.gen_range(0..active);
        let zslba = z as u64 * info.zone_size;
        let model = &mut m[z];
        let roll = rng.gen_range(0..100);
        if model.finished || roll < 3 {
            q.zone_action(zns_device::ZoneAction::Reset, zns_device::Target::Zone(zslba)).unwrap();
            *model = Model::default();
            continue;
        }
        if roll < 6 && !model.blocks.is_empty() {
            q.zone_action(zns_device::ZoneAction::Finish, zns_device::Target::Zone(zslba)).unwrap();
            model.finished = true;
            model.durable = model.blocks.len();
            continue;
        }
        if roll < 12 {
            q.flush().unwrap();
            for mm in m.iter_mut() {
                mm.durable = mm.blocks.len();
            }
            continue;
        }
        let left = cap - model.blocks.len();
        let n = rng.gen_range(1..=9usize).min(left);
        let mut data = dev_buf(devs[t].as_ref(), n * bs);
        let tags: Vec<u64> = (0..n).map(|i| *next_tag + i as u64).collect();
        *next_tag += n as u64;
        for (i, &tg) in tags.iter().enumerate() {
            data[i * bs..(i + 1) * bs].copy_from_slice(&block(tg, bs));
        }
        let fua = roll < 20;
        let at = zslba + model.blocks.len() as u64;
        if roll < 60 {
            let r = if fua { q.write_fua(at, &data) } else { q.write(at, &data) };
            if let Err(e) = r {
                panic!("write of {n} at {at} (zone {z} of {name}): {e}\n{}", inst.status());
            }
        } else {
            let lba = match q.append(zslba, &data) {
                Ok(l) => l,
                Err(e) => {
                    panic!("append of {n} to {zslba} (zone {z} of {name}): {e}\n{}", inst.status())
                }
            };
            assert_eq!(lba, at);
        }
        model.blocks.extend(tags);
        if fua {
            model.durable = model.blocks.len();
        }
        if model.blocks.len() == cap {
            model.finished = true;
            model.durable = cap;
        }
    }
    // A few writes still in flight at the cut: not acknowledged, so the
    // model only allows them (they may or may not survive).
    for (t, name) in ["a", "b"].iter().enumerate() {
        let m = models.get_mut(*name).unwrap();
        if let Some((z, model)) = m
            .iter_mut()
            .enumerate()
            .find(|(z, mm)| *z < 3 && !mm.finished && mm.blocks.len() + 4 <= cap)
        {
            let zslba = z as u64 * info.zone_size;
            let at = zslba + model.blocks.len() as u64;
            let mut data = dev_buf(devs[t].as_ref(), 4 * bs);
            let tags: Vec<u64> = (0..4).map(|i| *next_tag + i).collect();
            *next_tag += 4;
            for (i, &tg) in tags.iter().enumerate() {
                data[i * bs..(i + 1) * bs].copy_from_slice(&block(tg, bs));
            }
            queues[t]
                .submit(ZoneOp::Write { lba: at, fua: false, placement: None }, Some(data), 1)
                .unwrap();
            queues[t].ring();
            model.blocks.extend(tags);
        }
    }
}

fn dev_buf(dev: &dyn ZonedDevice, len: usize) -> zns_device::IoBuffer {
    dev.alloc(len).unwrap()
}

#[test]
fn clean_restart_keeps_every_zone() {
    let mut rig = Rig::new();
    let mut models: HashMap<String, Vec<Model>> =
        ["a", "b"].iter().map(|n| (n.to_string(), vec![Model::default(); 10])).collect();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut tag = 1;
    {
        let inst = rig.up();
        workload(&inst, &mut models, &mut rng, 300, &mut tag);
        // Let the writes left in flight complete.
        for n in ["a", "b"] {
            inst.tenant(n).unwrap().queue(1).unwrap().flush().unwrap();
        }
    }
    let inst = rig.up();
    for n in ["a", "b"] {
        let m = models.get_mut(n).unwrap();
        for mm in m.iter_mut() {
            mm.durable = mm.blocks.len();
        }
        check(inst.tenant(n).unwrap().as_ref(), m, true);
    }
    // And it goes on: the restarted instance takes writes at each zone's
    // write pointer.
    workload(&inst, &mut models, &mut rng, 100, &mut tag);
}

#[test]
fn power_cuts_leave_consistent_write_pointers() {
    let mut rig = Rig::new();
    let mut models: HashMap<String, Vec<Model>> =
        ["a", "b"].iter().map(|n| (n.to_string(), vec![Model::default(); 10])).collect();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut tag = 1;
    let mut restriped = 0;
    for cycle in 0..30 {
        {
            let inst = rig.up();
            restriped += inst.recovery().restriped;
            for n in ["a", "b"] {
                check(inst.tenant(n).unwrap().as_ref(), models.get_mut(n).unwrap(), false);
            }
            workload(&inst, &mut models, &mut rng, 60, &mut tag);
            // The writes left in flight complete as the queues go, but
            // nothing flushes them: the cut tears the stripes they wrote.
        }
        rig.cut(cycle);
    }
    let inst = rig.up();
    for n in ["a", "b"] {
        check(inst.tenant(n).unwrap().as_ref(), models.get_mut(n).unwrap(), false);
    }
    restriped += inst.recovery().restriped;
    eprintln!("{restriped} torn stripes restriped over 30 power cuts");
    assert!(restriped > 0, "no power cut tore a stripe");
    let s = inst.status();
    assert_eq!(s.internal_failures, 0);
    assert!(s.device_active <= s.device_limit);
}

#[test]
fn a_device_with_foreign_data_or_another_layout_is_refused() {
    let (emu, memory) = common::emulator();
    {
        let dev = common::base(&emu, &memory);
        let mut q = dev.queue(2).unwrap();
        q.write(5 * dev.info().zone_size, &dev.alloc(4096).unwrap()).unwrap();
    }
    let config = Config::from_toml(common::CONFIG).unwrap();
    let e = Instance::open(common::base(&emu, &memory), config.clone()).unwrap_err().to_string();
    assert!(e.contains("no complete eZNS journal"), "{e}");
    let (emu, memory) = common::emulator();
    drop(Instance::open(common::base(&emu, &memory), config.clone()).unwrap());
    let other = Config::from_toml(&common::CONFIG.replace("zones = 10", "zones = 12")).unwrap();
    let e = Instance::open(common::base(&emu, &memory), other).unwrap_err().to_string();
    assert!(e.contains("another configuration"), "{e}");
    // The refusals changed nothing: the right configuration still opens.
    Instance::open(common::base(&emu, &memory), config).unwrap();
}
