//! `zns ftl serve`: the FTL on `--device` exported over NBD, so QEMU, the
//! kernel's `nbd-client`, `qemu-img` and `qemu-io` use it as a disk.
//!
//! The server runs until SIGINT or SIGTERM; it then closes every
//! connection and closes the FTL, which writes a checkpoint (the next open
//! needs no log replay). A device that exists only in this process
//! (`emu:` without `file=`) is formatted at start; any other must hold an
//! FTL already (`zns ftl format`). A device image is locked while served:
//! a second server, or any other command, on it is refused.
//!
//! With `--tls-cert` and `--tls-key` every client must use TLS (x509; with
//! `--tls-ca` also a client certificate that CA signed); clients without
//! it are refused (`NBD_REP_ERR_TLS_REQD`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use zns_ftl::{BlockDevice, Ftl, FtlConfig, ZrwaUse};
use zns_nbd::{Export, NbdServer, ServerConfig, TlsConfig};

use crate::ftl::{open_error, process_private};
use crate::num::human_size;

/// Arguments of `zns ftl serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the `listening on`
    /// line says which). Anything but loopback exposes the disk to the
    /// network: without TLS and `--tls-ca`, unencrypted and to anyone.
    #[arg(long, default_value = "127.0.0.1:10809", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Export name clients select (the empty name selects it too).
    #[arg(long, default_value = "ftl", value_name = "NAME")]
    pub export: String,
    /// Refuse writes, trims and zeroing (EPERM).
    #[arg(long)]
    pub read_only: bool,
    /// Connections open at once; more are closed at accept. An idle one
    /// costs its socket and a few hundred bytes, no thread.
    #[arg(long, default_value_t = 1024, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Worker threads: how many connections carry out requests at the
    /// same moment (the others wait in the poller, for their client or a
    /// worker).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub workers: u64,
    /// A client must send a request or option whole within this many
    /// seconds once it has begun, and take each reply within it; past it
    /// the connection is closed (an idle client is never closed).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub stall_timeout: f64,
    /// Whether the FTL's metadata log writes into the device's zone random
    /// write areas: auto where commits need no padding (a flush
    /// granularity of one block), on wherever the device has suitable ones
    /// (commits then pad to the granularity), off never (docs/ftl.md).
    #[arg(long, value_enum, default_value = "auto")]
    pub zrwa: ZrwaArg,
    /// Require TLS of every client, with this certificate (PEM: the
    /// server's certificate first, then any intermediates); needs
    /// --tls-key. Clients without TLS are refused.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With TLS, require every client to present a certificate signed by
    /// this certificate authority (PEM), as QEMU's `verify-peer=on`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

impl ServeArgs {
    /// The TLS settings the flags ask for, if any.
    fn tls(&self) -> Result<Option<TlsConfig>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else { return Ok(None) };
        let config =
            TlsConfig::from_pem_files(cert, key, self.tls_ca.as_deref()).context("set up TLS")?;
        Ok(Some(config))
    }
}

/// Use of zone random write areas by the FTL's metadata log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ZrwaArg {
    /// Where commits need no padding.
    Auto,
    /// Wherever the device has ZRWAs the log can use.
    On,
    /// Never.
    Off,
}

impl ZrwaArg {
    /// The FTL's setting.
    pub fn config(self) -> FtlConfig {
        let zrwa = match self {
            ZrwaArg::Auto => ZrwaUse::Auto,
            ZrwaArg::On => ZrwaUse::On,
            ZrwaArg::Off => ZrwaUse::Off,
        };
        FtlConfig { zrwa, ..FtlConfig::default() }
    }
}

/// Opens the FTL to serve with `config`: formats a process-private device,
/// recovers any other.
pub(crate) fn open_for_serving(uri: &str, config: FtlConfig) -> Result<(Ftl, bool)> {
    let private = process_private(uri)?;
    let dev = zns_device::open(uri)?;
    if private {
        let ftl = Ftl::format(dev, config).with_context(|| format!("format an FTL on {uri}"))?;
        return Ok((ftl, true));
    }
    let ftl = Ftl::open(dev, config).map_err(|e| open_error(uri, e, true))?;
    Ok((ftl, false))
}

pub fn run(uri: &str, args: &ServeArgs, out: &mut dyn Write) -> Result<()> {
    let stop = crate::serve::stop_flag()?;
    // Before the FTL opens: a bad certificate costs no recovery.
    let tls = args.tls()?;
    let (ftl, formatted) = open_for_serving(uri, args.zrwa.config())?;
    let ftl = Arc::new(ftl);
    let (size, bs) = (ftl.capacity_bytes(), ftl.block_size());
    let export = Export::new(args.export.clone(), Arc::clone(&ftl) as Arc<dyn BlockDevice>)
        .with_description(format!("znskit FTL on {uri}"))
        .read_only(args.read_only);
    let config = ServerConfig {
        max_connections: args.max_connections as usize,
        workers: args.workers as usize,
        stall_timeout: crate::serve::stall_timeout(args.stall_timeout)?,
        tls: tls.clone(),
    };
    let server = NbdServer::bind(args.listen.as_str(), vec![export], config)
        .with_context(|| format!("serve {uri} over NBD"))?;
    let addr = server.local_addr();
    if formatted {
        writeln!(out, "formatted a new FTL on {uri} (it lives as long as this server)")?;
    }
    let tls_note = match &tls {
        None => "",
        Some(t) if t.requires_client_certificates() => {
            ", TLS required with a client certificate signed by --tls-ca"
        }
        Some(_) => ", TLS required",
    };
    writeln!(
        out,
        "listening on {addr} export {:?}: {} ({size} bytes, {bs}-byte blocks){}{tls_note}",
        args.export,
        human_size(size),
        if args.read_only { ", read-only" } else { "" }
    )?;
    match &tls {
        None => writeln!(
            out,
            "  qemu-io -f raw nbd://{addr}/{}    (SIGINT or SIGTERM stops)",
            args.export
        )?,
        Some(t) => {
            writeln!(
                out,
                "  qemu-io --object tls-creds-x509,id=tls0,endpoint=client,dir=DIR --image-opts \
                 driver=nbd,host={},port={},export={},tls-creds=tls0    (SIGINT or SIGTERM stops)",
                addr.ip(),
                addr.port(),
                args.export
            )?;
            writeln!(out, "  nbdinfo 'nbds://{addr}/{}?tls-certificates=DIR'", args.export)?;
            let client = if t.requires_client_certificates() {
                ", client-cert.pem and client-key.pem (a certificate --tls-ca signed, its key)"
            } else {
                ""
            };
            writeln!(out, "  where DIR holds ca-cert.pem (the CA that signed --tls-cert){client}")?;
        }
    }
    let mut metrics = crate::metrics::Plan::new(&args.metrics);
    metrics.ftl(&ftl);
    let metrics = metrics.start(out)?;
    out.flush()?;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = server.stop();
    // The endpoint holds the FTL: it stops before the FTL closes.
    drop(metrics);
    let ftl = Arc::try_unwrap(ftl)
        .map_err(|_| anyhow::anyhow!("the FTL is still in use after the server stopped"))?;
    let st = ftl.stats();
    ftl.close().context("close the FTL (write its checkpoint)")?;
    if st.zrwa_commits > 0 {
        writeln!(
            out,
            "metadata log in zone random write areas: {} commits, {} pages of padding",
            st.zrwa_commits, st.zrwa_pad_blocks
        )?;
    }
    let tls_refused = match tls {
        Some(_) => format!(", {} refused for want of TLS", stats.tls_refused),
        None => String::new(),
    };
    writeln!(
        out,
        "stopped after {:.1} s: {} connections ({} refused, {} closed for protocol errors, {} \
         for stalls{tls_refused}), {} requests ({} failed), {} read, {} written; checkpoint written",
        started.elapsed().as_secs_f64(),
        stats.connections,
        stats.refused,
        stats.protocol_errors,
        stats.timeouts,
        stats.requests,
        stats.errors,
        human_size(stats.bytes_read),
        human_size(stats.bytes_written),
    )?;
    Ok(())
}
