//! `zns ublk` and `zns ftl ublk`: the device of `--device`, or the FTL on
//! it, as a local Linux block device through ublk (`zns-ublk`), until
//! SIGINT or SIGTERM removes it.
//!
//! `zns ublk` serves the device itself: a zoned namespace is a
//! host-managed zoned block device (`blkzone`, fio's zoned mode, btrfs,
//! zonefs), a conventional one a plain disk. `zns ftl ublk` serves the FTL
//! as a plain disk: a device that lives only in this process (`emu:`
//! without `file=`) is formatted at start, any other must hold an FTL
//! (`zns ftl format`); at the end the FTL is closed with a checkpoint.
//!
//! With `--id N` it serves device N: if that device exists and its
//! server was killed (the kernel keeps such a device, quiesced, since
//! every device is added with user recovery), it takes it over, and the
//! requests the device held are served; otherwise it adds device N.
//!
//! The first line printed is the block device's path alone
//! (`/dev/ublkb0`), for scripts; a description follows. Needs root and
//! the kernel's ublk driver (`modprobe ublk_drv`; Linux 6.6+ for zoned
//! devices). A timed emulator (`emu:zn540`) runs on the real clock
//! unless the URI says `clock=`, as under `zns serve`.

use clap::Args;

/// Arguments of `zns ublk` and `zns ftl ublk`.
#[derive(Debug, Args)]
pub struct UblkArgs {
    /// Trace every command and flash operation of the emu: device into
    /// FILE, written when the device is removed (JSON trace-event format
    /// for ui.perfetto.dev; the last events, see docs/observability.md).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// ublk queues (the block device's hardware queues), each served by
    /// a thread of its own.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Requests each queue holds at once.
    #[arg(long, default_value_t = 64, value_name = "D",
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub depth: u16,
    /// Serve ublk device number N (/dev/ublkbN). When it exists and its
    /// server is gone (killed), take it over: the requests it holds are
    /// served, on the queues and depth it has. Otherwise add it as N.
    #[arg(long, value_name = "N")]
    pub id: Option<u32>,
    /// Keep each queue's thread on the CPUs whose requests it serves (the
    /// kernel's queue map), instead of letting it run on any free CPU.
    #[arg(long)]
    pub pin_queues: bool,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

#[cfg(feature = "ublk")]
pub use imp::{run, run_ftl};

#[cfg(not(feature = "ublk"))]
pub use absent::{run, run_ftl};

/// A `zns` built without ublk (the default: libublk's bindings need
/// libclang to build) says how to get it.
#[cfg(not(feature = "ublk"))]
mod absent {
    use super::UblkArgs;

    const WHY: &str = "this zns was built without ublk: build it with \
        `cargo build --release -p zns-cli --features ublk` (needs libclang: \
        apt-get install libclang-dev)";

    /// `zns ublk`, unavailable in this build.
    pub fn run(_: &str, _: &UblkArgs, _: &mut dyn std::io::Write) -> anyhow::Result<()> {
        anyhow::bail!(WHY)
    }

    /// `zns ftl ublk`, unavailable in this build.
    pub fn run_ftl(_: &str, _: &UblkArgs, _: &mut dyn std::io::Write) -> anyhow::Result<()> {
        anyhow::bail!(WHY)
    }
}

#[cfg(feature = "ublk")]
mod imp {
    use super::UblkArgs;
    use crate::serve::{serving_uri, stop_flag};
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result};
    use zns_ftl::BlockDevice;
    use zns_ublk::{Config, Stats, Target, UblkDevice};

    use crate::ftl_serve::{open_for_serving, ZrwaArg};
    use crate::num::human_size;

    impl UblkArgs {
        fn config(&self) -> Config {
            Config {
                queues: self.queues,
                depth: self.depth,
                id: self.id,
                pin_queues: self.pin_queues,
                ..Config::default()
            }
        }
    }

    /// `zns ublk`: the device as a block device, zoned where it is.
    pub fn run(uri: &str, args: &UblkArgs, out: &mut dyn Write) -> Result<()> {
        let stop = stop_flag()?;
        let dev = zns_device::open(&serving_uri(uri))?;
        let mut metrics = crate::metrics::Plan::new(&args.metrics);
        let dev = metrics.device(dev);
        let info = dev.info().clone();
        let ublk = UblkDevice::start(Target::Zoned(dev), &args.config())
            .with_context(|| format!("serve {uri} through ublk"))?;
        writeln!(out, "{}", ublk.block_path().display())?;
        let bs = u64::from(info.block_size);
        let what = if ublk.zoned() {
            format!(
                "zoned (host-managed), {} zones of {} (capacity {})",
                info.zone_count,
                human_size(info.zone_size * bs),
                human_size(info.zone_capacity * bs)
            )
        } else {
            "a conventional namespace, not zoned".to_string()
        };
        taken_over(&ublk, out)?;
        writeln!(
            out,
            "{uri}: {what}, {} in {bs}-byte blocks; {} (SIGINT or SIGTERM removes it)",
            human_size(info.namespace_blocks * bs),
            queues(&ublk)
        )?;
        let metrics = metrics.start(out)?;
        out.flush()?;
        let result = wait_and_stop(ublk, &stop, out);
        drop(metrics);
        result
    }

    /// `zns ftl ublk`: the FTL on the device as a plain block device.
    pub fn run_ftl(uri: &str, args: &UblkArgs, out: &mut dyn Write) -> Result<()> {
        let stop = stop_flag()?;
        let (ftl, formatted) = open_for_serving(uri, ZrwaArg::Auto.config())?;
        let ftl = Arc::new(ftl);
        let target = Target::Block {
            device: Arc::clone(&ftl) as Arc<dyn BlockDevice>,
            name: format!("the FTL on {uri}"),
        };
        let ublk = match UblkDevice::start(target, &args.config()) {
            Ok(u) => u,
            Err(e) => {
                close_ftl(ftl)?;
                return Err(
                    anyhow::Error::new(e).context(format!("serve the FTL on {uri} through ublk"))
                );
            }
        };
        writeln!(out, "{}", ublk.block_path().display())?;
        if formatted {
            writeln!(out, "formatted a new FTL on {uri} (it lives as long as this process)")?;
        }
        taken_over(&ublk, out)?;
        writeln!(
            out,
            "the FTL on {uri}: {} in {}-byte blocks; {} (SIGINT or SIGTERM removes it, then \
             closes the FTL with a checkpoint)",
            human_size(ftl.capacity_bytes()),
            ftl.block_size(),
            queues(&ublk)
        )?;
        let mut metrics = crate::metrics::Plan::new(&args.metrics);
        metrics.ftl(&ftl);
        let metrics = metrics.start(out)?;
        out.flush()?;
        let result = wait_and_stop(ublk, &stop, out);
        // The endpoint holds the FTL: it stops before the FTL closes.
        drop(metrics);
        close_ftl(ftl)?;
        writeln!(out, "checkpoint written")?;
        result
    }

    fn queues(ublk: &UblkDevice) -> String {
        describe_queues(ublk.queues(), ublk.depth())
    }

    fn describe_queues(queues: u16, depth: u16) -> String {
        let s = if queues == 1 { "" } else { "s" };
        format!("{queues} queue{s} of depth {depth}")
    }

    /// Says so when the device was taken over from a server that was gone.
    fn taken_over(ublk: &UblkDevice, out: &mut dyn Write) -> Result<()> {
        if ublk.recovered() {
            writeln!(
                out,
                "took over {} from a server that was gone (user recovery): the requests it \
                 held are served now",
                ublk.block_path().display()
            )?;
        }
        Ok(())
    }

    /// Waits for SIGINT or SIGTERM, then removes the device and says what
    /// it served.
    fn wait_and_stop(ublk: UblkDevice, stop: &AtomicBool, out: &mut dyn Write) -> Result<()> {
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let path = ublk.block_path();
        let stats: Stats = ublk.stop().context("remove the ublk device")?;
        writeln!(
            out,
            "removed {} after {:.1} s: {} requests ({} failed), {} read, {} written",
            path.display(),
            started.elapsed().as_secs_f64(),
            stats.requests,
            stats.failed,
            human_size(stats.bytes_read),
            human_size(stats.bytes_written)
        )?;
        Ok(())
    }

    /// Closes the FTL (its checkpoint) once the ublk device has let go of it.
    fn close_ftl(ftl: Arc<zns_ftl::Ftl>) -> Result<()> {
        let ftl = Arc::try_unwrap(ftl).map_err(|_| {
            anyhow::anyhow!("the FTL is still in use after the ublk device stopped")
        })?;
        ftl.close().context("close the FTL (write its checkpoint)")
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn timed_emulators_run_on_the_real_clock_and_queues_are_described() {
            assert_eq!(serving_uri("emu:zn540"), "emu:zn540,clock=real");
            assert_eq!(serving_uri("emu:small"), "emu:small");
            assert_eq!(serving_uri("emu:zn540,clock=virtual"), "emu:zn540,clock=virtual");
            assert_eq!(serving_uri("pcie:0000:00:04.0"), "pcie:0000:00:04.0");
            assert_eq!(describe_queues(1, 64), "1 queue of depth 64");
            assert_eq!(describe_queues(4, 32), "4 queues of depth 32");
            let c = UblkArgs {
                trace: None,
                queues: 2,
                depth: 16,
                id: Some(3),
                pin_queues: true,
                metrics: crate::metrics::MetricsArgs { metrics: None },
            }
            .config();
            assert_eq!((c.queues, c.depth, c.id, c.pin_queues), (2, 16, Some(3), true));
        }
    }
}
