//! Queue pair mechanics: wrap-around, back-pressure, doorbell batching,
//! deferred completions, owned buffers, PRP lists for large and unaligned
//! transfers.

mod common;

use common::{big_transfer_profile, pattern, Deadline, Rig};
use zns_driver::{ControllerOptions, DmaSlice, Error, QueueConfig};
use zns_emulator::profile::Profile;
use zns_spec::command::ReadWrite;
use zns_spec::regs::{cq_head_doorbell, sq_tail_doorbell};

#[test]
fn rings_wrap_around_many_times() {
    let rig = Rig::new("tiny");
    let ns = rig.nvm();
    for depth in [2u16, 3, 4, 7] {
        let mut q = rig.ctrl.create_queue_pair(depth).unwrap();
        let mut bufs: Vec<_> =
            (0..q.capacity()).map(|_| rig.ctrl.alloc_buffer(4096).unwrap()).collect();
        let mut done = 0u64;
        let mut next = 0u64;
        // Many passes over each ring, the queue kept full.
        let deadline = Deadline::start();
        while done < 3000 {
            deadline.check(format_args!("3000 completions at depth {depth}, {done} so far"));
            while let Some(mut b) = bufs.pop() {
                b.as_mut_slice()[..8].copy_from_slice(&next.to_le_bytes());
                let lba = next % ns.blocks;
                let cmd = ReadWrite::new(ns.nsid, lba, 1).write().unwrap();
                q.submit_owned(cmd, b, next).unwrap();
                next += 1;
            }
            assert!(q.is_full());
            q.ring();
            q.poll(usize::MAX, |c| {
                assert!(c.is_success(), "{}", c.status);
                bufs.push(c.buffer.unwrap());
                done += 1;
            });
        }
        // Blocking helpers interleave with the wrapped rings.
        let mut r = rig.ctrl.alloc_buffer(4096).unwrap();
        let last = next - 1;
        q.read(&ns, last % ns.blocks, &mut r).unwrap();
        assert_eq!(&r.as_slice()[..8], &last.to_le_bytes(), "depth {depth}");
    }
}

#[test]
fn full_queue_refuses_instead_of_overwriting() {
    let rig = Rig::new("tiny");
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    assert_eq!(q.capacity(), 7);
    assert_eq!(q.free_sq_slots(), 7);
    for i in 0..7u64 {
        let b = rig.ctrl.alloc_buffer(4096).unwrap();
        q.submit_owned(ReadWrite::new(ns.nsid, i, 1).read().unwrap(), b, i).unwrap();
    }
    assert_eq!(q.free_sq_slots(), 0);
    let b = rig.ctrl.alloc_buffer(4096).unwrap();
    let rejected = q.submit_owned(ReadWrite::new(ns.nsid, 7, 1).read().unwrap(), b, 7).unwrap_err();
    assert!(matches!(rejected.error, Error::QueueFull { .. }));
    assert_eq!(rejected.buffer.len(), 4096, "the buffer comes back");
    let e = q.submit_without_data(zns_spec::command::Flush { nsid: ns.nsid }.to_entry(), 8);
    assert!(matches!(e, Err(Error::QueueFull { .. })));
    // Nothing was rung yet: nothing completes.
    assert_eq!(q.poll(usize::MAX, |_| {}), 0);
    q.ring();
    let mut tags = Vec::new();
    let deadline = Deadline::start();
    while tags.len() < 7 {
        deadline.check(format_args!("7 completions, {} so far", tags.len()));
        q.poll(3, |c| tags.push(c.tag));
    }
    tags.sort();
    assert_eq!(tags, (0..7).collect::<Vec<_>>());
    assert_eq!(q.free_sq_slots(), 7, "SQ head learned from the completions");
    q.submit_owned(ReadWrite::new(ns.nsid, 7, 1).read().unwrap(), rejected.buffer, 7).unwrap();
    q.drain(|c| assert!(c.is_success())).unwrap();
    assert_eq!(q.outstanding(), 0);
}

#[test]
fn one_doorbell_write_per_batch() {
    let (rig, counting) = Rig::counting(Profile::by_name("tiny").unwrap());
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(16).unwrap();
    let dstrd = rig.ctrl.info().cap.dstrd();
    let (sq_db, cq_db) = (sq_tail_doorbell(q.qid(), dstrd), cq_head_doorbell(q.qid(), dstrd));
    counting.take();
    for i in 0..5u64 {
        let b = rig.ctrl.alloc_buffer(4096).unwrap();
        q.submit_owned(ReadWrite::new(ns.nsid, i, 1).read().unwrap(), b, i).unwrap();
    }
    assert!(counting.take().is_empty(), "submission alone writes no register");
    q.ring();
    q.ring();
    assert_eq!(counting.take(), vec![(sq_db, 5)], "one SQ tail write for the batch");
    let mut n = 0;
    let deadline = Deadline::start();
    while n < 5 {
        deadline.check(format_args!("5 completions, {n} so far"));
        n += q.poll(usize::MAX, |_| {});
    }
    // The emulator completes all five by the time of the first poll: one
    // CQ head write for the whole batch.
    assert_eq!(counting.take(), vec![(cq_db, 5)]);
    assert_eq!(q.poll(usize::MAX, |_| {}), 0);
    assert!(counting.take().is_empty(), "an empty poll writes no doorbell");
}

#[test]
fn completions_of_async_commands_survive_blocking_calls() {
    let rig = Rig::new("tiny");
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let mut w = rig.ctrl.alloc_buffer(4096).unwrap();
    w.fill(0x77);
    q.write(&ns, 40, &w).unwrap();
    let b = rig.ctrl.alloc_buffer(4096).unwrap();
    q.submit_owned(ReadWrite::new(ns.nsid, 40, 1).read().unwrap(), b, 99).unwrap();
    q.ring();
    // A blocking command completes while the async read's completion waits.
    q.flush(&ns).unwrap();
    assert_eq!(q.outstanding(), 1);
    let mut got = None;
    q.poll(usize::MAX, |c| got = Some(c));
    let c = got.expect("the async completion was kept");
    assert_eq!(c.tag, 99);
    assert!(c.buffer.unwrap().as_slice().iter().all(|&x| x == 0x77));
}

#[test]
fn prp_lists_for_large_and_unaligned_buffers() {
    let rig = Rig::with_profile(big_transfer_profile(), ControllerOptions::default());
    assert_eq!(rig.ctrl.info().max_transfer, 2 << 20);
    let ns = rig.nvm();
    let mut q = rig.ctrl.create_queue_pair(8).unwrap();
    let mut lba = 0;
    for blocks in [1usize, 2, 3, 17, 64, 255, 256, 511, 512] {
        let len = blocks * 4096;
        let data = pattern(blocks as u64, lba, len);
        // Write from a buffer starting 4 bytes into a page, read into one
        // starting 2 KiB in: PRP1 offsets, PRP2 pages and lists.
        for (woff, roff) in [(0usize, 0usize), (4, 2048), (4092, 8)] {
            if len + woff.max(roff) > 2 << 20 {
                continue; // beyond MDTS once shifted
            }
            let mut w = rig.ctrl.alloc_buffer(len + 4096).unwrap();
            w.as_mut_slice()[woff..woff + len].copy_from_slice(&data);
            let cmd = ReadWrite::new(ns.nsid, lba, blocks as u32).write().unwrap();
            // SAFETY: `w` outlives the command, which completes in `drain`.
            unsafe { q.submit(cmd, Some(w.slice(woff..woff + len).unwrap()), 1).unwrap() };
            q.drain(|c| assert!(c.is_success(), "write {blocks} blocks at +{woff}: {}", c.status))
                .unwrap();
            let r = rig.ctrl.pool().alloc_zeroed(len + 4096).unwrap();
            let cmd = ReadWrite::new(ns.nsid, lba, blocks as u32).read().unwrap();
            let slice: DmaSlice<'_> = r.slice(roff..roff + len).unwrap();
            // SAFETY: `r` is not accessed until the read completes in `drain`.
            unsafe { q.submit(cmd, Some(slice), 2).unwrap() };
            q.drain(|c| assert!(c.is_success(), "read {blocks} blocks at +{roff}: {}", c.status))
                .unwrap();
            assert!(r.as_slice()[roff..roff + len] == data[..], "{blocks} blocks, +{woff}/+{roff}");
            assert!(r.as_slice()[..roff].iter().all(|&b| b == 0), "nothing before the slice");
            assert!(r.as_slice()[roff + len..].iter().all(|&b| b == 0), "nothing after it");
        }
        lba += blocks as u64;
    }
    // Beyond the queue's limit, and a start that is not dword aligned.
    let big = rig.ctrl.alloc_buffer((2 << 20) + 4096).unwrap();
    let cmd = ReadWrite::new(ns.nsid, 0, 513).write().unwrap();
    let e = q.submit_owned(cmd, big, 0).unwrap_err();
    assert!(matches!(e.error, Error::TransferTooLarge { .. }), "{}", e.error);
    let b = rig.ctrl.alloc_buffer(8192).unwrap();
    // SAFETY: the submission is refused, nothing is outstanding.
    let r = unsafe { q.submit(cmd, Some(b.slice(2..4098).unwrap()), 0) };
    assert!(matches!(r, Err(Error::Misaligned { .. })));
}

#[test]
fn queue_config_caps_the_transfer() {
    let rig = Rig::with_profile(big_transfer_profile(), ControllerOptions::default());
    let mut cfg = QueueConfig::new(4);
    cfg.max_transfer = 8192;
    let mut q = rig.ctrl.create_queue_pair_with(cfg).unwrap();
    assert_eq!(q.max_transfer(), 8192);
    let ns = rig.nvm();
    let mut r = rig.ctrl.alloc_buffer(12288).unwrap();
    assert!(matches!(q.read(&ns, 0, &mut r), Err(Error::TransferTooLarge { .. })));
    let mut r = rig.ctrl.alloc_buffer(8192).unwrap();
    q.read(&ns, 0, &mut r).unwrap();
    assert!(rig.ctrl.create_queue_pair(1).is_err());
    assert!(rig.ctrl.create_queue_pair(257).is_err(), "beyond CAP.MQES");
}
