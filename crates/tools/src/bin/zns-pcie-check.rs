//! `zns-pcie-check`: checks of the user-space driver on real PCIe
//! controllers that a check of one device cannot make.
//!
//! ```text
//! zns-pcie-check pcie:BDF[,transport=...] [pcie:BDF[,transport=...] ...]
//! ```
//!
//! With every controller open in this one process at once (through VFIO,
//! each in its own IOMMU container, the same I/O virtual addresses map
//! different memory), it writes a pattern of its own to the start of the
//! last zone of each controller's first zoned namespace and reads every
//! pattern back; then it resets the first controller while its I/O queue
//! pair exists, checks that the old queue pair reports the reset, that the
//! data written before the reset reads back through a new queue pair, that
//! the controller takes writes after it, and that the other controllers
//! were not disturbed. The last zone of each namespace is reset: use
//! scratch devices only. Prints `PASS`/`FAIL` lines and a summary; exits 1
//! on any failure.

use std::process::ExitCode;

use clap::Parser;

use zns_device::DeviceUri;
use zns_driver::transport::open_pci_with;
use zns_driver::{Controller, ControllerOptions, Error, Namespace, QueuePair};

/// Opens every controller at once; writes, reads back and resets the
/// first controller with an I/O queue pair open. Resets the last zone of
/// each controller's first zoned namespace: use scratch devices only.
#[derive(Debug, Parser)]
#[command(name = "zns-pcie-check", version)]
struct Args {
    /// The controllers: pcie:BDF[,transport=vfio|sysfs|auto].
    #[arg(value_name = "URI", required = true)]
    uris: Vec<String>,
}

/// Blocks written to each controller before the reset.
const BLOCKS: u32 = 8;

/// One open controller, its zoned namespace and a queue pair.
struct Open {
    uri: String,
    ctrl: Controller,
    ns: Namespace,
    zone: u64,
    queue: QueuePair,
    pattern: u8,
}

fn open(uri: &str, pattern: u8) -> Result<Open, String> {
    let DeviceUri::Pcie(p) = uri.parse::<DeviceUri>().map_err(|e| e.to_string())? else {
        return Err(format!("{uri}: not a pcie: URI"));
    };
    let transport = open_pci_with(&p.addr.to_string(), p.binding).map_err(|e| e.to_string())?;
    let description = transport.describe();
    let ctrl = Controller::new(transport, ControllerOptions::default())
        .map_err(|e| format!("bring-up: {e}"))?;
    let ns = ctrl.zoned_namespace().ok_or("no zoned namespace")?.clone();
    let zones = ns.zoned.as_ref().map(|z| z.zone_count).unwrap_or(0);
    let zone = zones.checked_sub(1).and_then(|z| ns.zone_lba(z)).ok_or("no zones")?;
    let queue = ctrl.create_queue_pair(32).map_err(|e| format!("queue pair: {e}"))?;
    println!(
        "device {uri}: {description}, {}, namespace {}, last zone at LBA {zone}",
        ctrl.info().identify.model_number.trim(),
        ns.nsid
    );
    Ok(Open { uri: uri.to_string(), ctrl, ns, zone, queue, pattern })
}

/// Writes `BLOCKS` blocks of the device's pattern at the start of its zone.
fn write_pattern(d: &mut Open) -> Result<(), Error> {
    d.queue.reset_zone(&d.ns, d.zone)?;
    let mut data = d.ctrl.alloc_buffer(BLOCKS as usize * d.ns.block_size)?;
    data.fill(d.pattern);
    d.queue.write(&d.ns, d.zone, &data)?;
    d.queue.flush(&d.ns)
}

/// Reads `blocks` blocks at `lba` and checks they all hold `pattern`.
fn expect_pattern(
    ctrl: &Controller,
    q: &mut QueuePair,
    ns: &Namespace,
    lba: u64,
    blocks: u32,
    pattern: u8,
) -> Result<(), String> {
    let mut back = ctrl.alloc_buffer(blocks as usize * ns.block_size).map_err(|e| e.to_string())?;
    q.read(ns, lba, &mut back).map_err(|e| format!("read: {e}"))?;
    match back.as_slice().iter().position(|&b| b != pattern) {
        None => Ok(()),
        Some(at) => Err(format!(
            "byte {at} after LBA {lba} is {:#04x}, expected {pattern:#04x}",
            back.as_slice()[at]
        )),
    }
}

/// Resets `d`'s controller with its queue pair open; returns the handle
/// after the reset.
fn reset_with_queue_open(d: &mut Open) -> Result<Controller, String> {
    let after = d.ctrl.reset().map_err(|e| format!("reset: {e}"))?;
    let mut buf = after.alloc_buffer(d.ns.block_size).map_err(|e| e.to_string())?;
    match d.queue.read(&d.ns, d.zone, &mut buf) {
        Err(Error::ControllerReset) => {}
        other => return Err(format!("the old queue pair answered {other:?}, not the reset")),
    }
    let mut q = after.create_queue_pair(32).map_err(|e| format!("queue pair after reset: {e}"))?;
    expect_pattern(&after, &mut q, &d.ns, d.zone, BLOCKS, d.pattern)
        .map_err(|e| format!("data written before the reset: {e}"))?;
    let mut more = after.alloc_buffer(d.ns.block_size).map_err(|e| e.to_string())?;
    more.fill(!d.pattern);
    let lba = d.zone + BLOCKS as u64;
    q.write(&d.ns, lba, &more).map_err(|e| format!("write after the reset: {e}"))?;
    expect_pattern(&after, &mut q, &d.ns, lba, 1, !d.pattern)?;
    Ok(after)
}

fn report(ok: &mut u32, failed: &mut u32, what: &str, r: Result<(), String>) {
    match r {
        Ok(()) => {
            *ok += 1;
            println!("PASS {what}");
        }
        Err(e) => {
            *failed += 1;
            println!("FAIL {what}: {e}");
        }
    }
}

fn main() -> ExitCode {
    let uris = Args::parse().uris;
    let (mut ok, mut failed) = (0u32, 0u32);
    let mut devs = Vec::new();
    for (i, uri) in uris.iter().enumerate() {
        let r = open(uri, 0xA1 + i as u8).map(|d| devs.push(d));
        report(&mut ok, &mut failed, &format!("{uri} open"), r);
    }
    for d in &mut devs {
        let r = write_pattern(d).map_err(|e| e.to_string());
        report(&mut ok, &mut failed, &format!("{} write", d.uri), r);
    }
    // Every controller's data, read with all of them open.
    for d in &mut devs {
        let r = expect_pattern(&d.ctrl, &mut d.queue, &d.ns, d.zone, BLOCKS, d.pattern);
        report(
            &mut ok,
            &mut failed,
            &format!("{} read back with {} open", d.uri, devs_len(&uris)),
            r,
        );
    }
    if let Some((first, rest)) = devs.split_first_mut() {
        let r = reset_with_queue_open(first).map(|_| ());
        report(&mut ok, &mut failed, &format!("{} reset with a queue pair open", first.uri), r);
        for d in rest {
            let r = expect_pattern(&d.ctrl, &mut d.queue, &d.ns, d.zone, BLOCKS, d.pattern);
            let what = format!("{} undisturbed by the reset of {}", d.uri, first.uri);
            report(&mut ok, &mut failed, &what, r);
        }
    }
    println!("pcie-check: {ok} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn devs_len(uris: &[String]) -> String {
    match uris.len() {
        1 => "1 controller".into(),
        n => format!("{n} controllers"),
    }
}
