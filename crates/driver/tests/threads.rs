//! Many queue pairs on many threads at once.

mod common;

use std::sync::Arc;
use std::thread;

use common::{pattern, Deadline, Rig};
use zns_driver::{ControllerOptions, Error};
use zns_emulator::profile::Profile;
use zns_spec::command::{ReadWrite, ZoneAppend};

#[test]
fn queue_pairs_on_threads_run_concurrently() {
    // Tiny without zone resource limits: every thread keeps a zone open.
    let mut profile = Profile::by_name("tiny").unwrap();
    profile.namespaces[0].max_open = None;
    profile.namespaces[0].max_active = None;
    let rig = Arc::new(Rig::with_profile(profile, ControllerOptions::default()));
    let threads = 8u64;
    let per_thread = 1024 / threads; // conventional blocks per thread
    let mut handles = Vec::new();
    for t in 0..threads {
        // Created here, used on the thread: a queue pair is Send.
        let mut q = rig.ctrl.create_queue_pair(16).unwrap();
        let rig = Arc::clone(&rig);
        handles.push(thread::spawn(move || {
            let ns = rig.nvm();
            let z = rig.zns();
            let base = t * per_thread;
            for round in 0..4u64 {
                let mut free: Vec<_> =
                    (0..8).map(|_| rig.ctrl.alloc_buffer(4096).unwrap()).collect();
                let mut lba = base;
                let mut done = 0;
                let deadline = Deadline::start();
                while done < per_thread {
                    deadline.check(format_args!("thread {t}: {per_thread} writes, {done} so far"));
                    while lba < base + per_thread {
                        let Some(mut b) = free.pop() else { break };
                        b.as_mut_slice().copy_from_slice(&pattern(round, lba, 4096));
                        let cmd = ReadWrite::new(ns.nsid, lba, 1).write().unwrap();
                        q.submit_owned(cmd, b, lba).unwrap();
                        lba += 1;
                    }
                    q.ring();
                    q.poll(usize::MAX, |c| {
                        assert!(c.is_success(), "{}", c.status);
                        free.push(c.buffer.unwrap());
                        done += 1;
                    });
                }
                // Read back in MDTS-sized pieces (32 blocks on tiny).
                let mut r = rig.ctrl.alloc_buffer(32 * 4096).unwrap();
                for start in (base..base + per_thread).step_by(32) {
                    q.read(&ns, start, &mut r).unwrap();
                    for (i, block) in r.as_slice().chunks(4096).enumerate() {
                        let lba = start + i as u64;
                        assert!(block == pattern(round, lba, 4096), "thread {t} lba {lba}");
                    }
                }
            }
            // Appends into this thread's own zone: LBAs come back in order.
            let zslba = z.zone_lba(t).unwrap();
            for i in 0..8u64 {
                let mut b = rig.ctrl.alloc_buffer(4096).unwrap();
                b.fill(t as u8);
                let cmd = ZoneAppend::new(z.nsid, zslba, 1).to_entry().unwrap();
                q.submit_owned(cmd, b, i).unwrap();
            }
            let mut lbas = Vec::new();
            q.drain(|c| lbas.push(c.check().unwrap())).unwrap();
            lbas.sort();
            assert_eq!(lbas, (zslba..zslba + 8).collect::<Vec<_>>());
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn queue_ids_run_out_and_come_back() {
    let options = ControllerOptions { io_queue_pairs: 3, ..Default::default() };
    let rig = Rig::with_options("tiny", options);
    assert_eq!(rig.ctrl.info().io_queue_pairs, 3);
    let qs: Vec<_> = (0..3).map(|_| rig.ctrl.create_queue_pair(4).unwrap()).collect();
    let mut ids: Vec<_> = qs.iter().map(|q| q.qid()).collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3]);
    assert!(matches!(rig.ctrl.create_queue_pair(4), Err(Error::NoQueueIds { granted: 3 })));
    drop(qs);
    assert_eq!(rig.ctrl.free_queue_ids(), 3);
    // Deleted at the controller: the same IDs can be created again.
    let q = rig.ctrl.create_queue_pair(4).unwrap();
    assert!((1..=3).contains(&q.qid()));
}

#[test]
fn queue_pairs_are_created_from_many_threads() {
    let rig = Arc::new(Rig::new("tiny"));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let rig = Arc::clone(&rig);
            thread::spawn(move || {
                for _ in 0..20 {
                    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
                    let ns = rig.nvm();
                    q.flush(&ns).unwrap();
                    let _ = rig.ctrl.identify_controller().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(rig.ctrl.free_queue_ids(), rig.ctrl.info().io_queue_pairs as usize);
}
