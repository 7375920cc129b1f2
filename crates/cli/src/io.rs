//! `zns read`, `zns write` and `zns append`: data between files (or
//! stdin/stdout) and the device, in commands of at most the device's
//! transfer limit (MDTS) or Zone Append limit (ZASL). Every range is
//! checked against the namespace before the first command (see
//! [`crate::range`]).

use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use zns_device::{Data, ZoneOp, ZoneQueue, ZonedDevice};

use crate::num::parse_num;
use crate::range::{check_range, check_read, AppendZone};

/// Arguments of `zns read`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// First LBA (decimal or 0x hex).
    #[arg(long, value_parser = parse_num)]
    pub lba: u64,
    /// Blocks to read.
    #[arg(long, default_value = "1", value_parser = parse_num)]
    pub blocks: u64,
    /// Where the data goes; `-` is stdout.
    #[arg(long, short, default_value = "-")]
    pub output: PathBuf,
    /// Also read the blocks' per-LBA metadata into this file (the
    /// namespace's format must have separate metadata).
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
}

/// Arguments of `zns write`.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// First LBA: the write pointer of the zone to write (any LBA on a
    /// conventional namespace).
    #[arg(long, value_parser = parse_num)]
    pub lba: u64,
    /// Data to write; `-` is stdin. Padded with zeroes to whole blocks.
    #[arg(long, short, default_value = "-")]
    pub input: PathBuf,
    /// Force Unit Access: durable when the command completes.
    #[arg(long)]
    pub fua: bool,
    /// Flexible Data Placement: write through this placement handle
    /// (reclaim group 0), so the device keeps the data in its reclaim
    /// units. Only on a namespace with FDP enabled (`zns fdp status`).
    #[arg(long, value_name = "N")]
    pub placement: Option<u16>,
    /// Per-LBA metadata to write with the blocks, from this file: at most
    /// blocks × metadata size bytes, padded with zeroes (the namespace's
    /// format must have separate metadata).
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
}

/// Arguments of `zns append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The zone to append to: --zone N or --zone-start SLBA.
    #[command(flatten)]
    pub zone: AppendZone,
    /// Data to append; `-` is stdin. Padded with zeroes to whole blocks.
    #[arg(long, short, default_value = "-")]
    pub input: PathBuf,
}

/// "1 block", "3 blocks".
pub fn plural(blocks: u64) -> String {
    if blocks == 1 {
        "1 block".to_string()
    } else {
        format!("{blocks} blocks")
    }
}

fn is_stdio(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

/// Reads the input, padded with zeroes to whole blocks.
fn input(path: &std::path::Path, block_size: usize) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    if is_stdio(path) {
        std::io::stdin().lock().read_to_end(&mut data).context("read stdin")?;
    } else {
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut data))
            .with_context(|| format!("read {}", path.display()))?;
    }
    if data.is_empty() {
        bail!("no data to write: {} is empty", if is_stdio(path) { "stdin" } else { "the input" });
    }
    data.resize(data.len().next_multiple_of(block_size), 0);
    Ok(data)
}

/// Checks that `blocks` blocks at `lba` fit in the zone holding `lba` from
/// its write pointer on (on a conventional namespace: in the namespace),
/// so a write split into several commands is refused before any of them
/// changes the device.
fn check_fits(q: &mut dyn ZoneQueue, lba: u64, blocks: u64, what: &str) -> Result<()> {
    let info = q.info();
    if !info.zoned {
        let end = info.blocks();
        if lba.checked_add(blocks).is_none_or(|e| e > end) {
            bail!(
                "{what} of {blocks} blocks at LBA {lba:#x} does not fit: the namespace ends at \
                 LBA {end:#x}; nothing was written"
            );
        }
        return Ok(());
    }
    let z = q.zone(lba)?;
    if lba + blocks > z.end() {
        bail!(
            "{what} of {blocks} blocks at LBA {lba:#x} does not fit: zone {} (LBA {:#x}) takes \
             blocks up to LBA {:#x}; nothing was written",
            z.index,
            z.start,
            z.end()
        );
    }
    Ok(())
}

/// Refuses metadata on a device without it, naming why.
fn metadata_size(dev: &dyn ZonedDevice) -> Result<usize> {
    let info = dev.info();
    if !info.capabilities.metadata {
        if info.metadata_size == 0 {
            bail!("--metadata: the namespace's LBA format has no per-LBA metadata");
        }
        bail!(
            "--metadata: the {} backend does not pass per-LBA metadata (emu: and pcie: do)",
            info.backend
        );
    }
    Ok(info.metadata_size as usize)
}

pub fn read(dev: &dyn ZonedDevice, args: &ReadArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    let bs = info.block_size as usize;
    if args.blocks == 0 {
        bail!("--blocks must be at least 1");
    }
    check_read(info, args.lba, args.blocks)?;
    let mut q = dev.queue(2)?;
    let per = info.max_transfer_blocks();
    let mut sink: Box<dyn Write + '_> = if is_stdio(&args.output) {
        Box::new(out)
    } else {
        let f = File::create(&args.output)
            .with_context(|| format!("create {}", args.output.display()))?;
        Box::new(std::io::BufWriter::new(f))
    };
    let mut meta_sink = match &args.metadata {
        Some(path) => {
            let ms = metadata_size(dev)?;
            let f = File::create(path).with_context(|| format!("create {}", path.display()))?;
            Some((ms, std::io::BufWriter::new(f)))
        }
        None => None,
    };
    let mut buf = dev.alloc((per.min(args.blocks) as usize) * bs)?;
    let mut done = 0;
    while done < args.blocks {
        let n = per.min(args.blocks - done);
        buf.set_len(n as usize * bs)?;
        if let Some((ms, _)) = &meta_sink {
            buf.attach_metadata(dev.alloc(n as usize * ms)?);
        }
        q.read(args.lba + done, &mut buf)?;
        sink.write_all(&buf)?;
        if let (Some((_, w)), Some(meta)) = (&mut meta_sink, buf.detach_metadata()) {
            w.write_all(&meta)?;
        }
        done += n;
    }
    sink.flush()?;
    if let Some((_, mut w)) = meta_sink {
        w.flush()?;
    }
    Ok(())
}

pub fn write(dev: &dyn ZonedDevice, args: &WriteArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    let bs = info.block_size as usize;
    let data = input(&args.input, bs)?;
    let blocks = (data.len() / bs) as u64;
    let what = format!("write of {} at LBA {:#x}", plural(blocks), args.lba);
    check_range(info, &what, args.lba, blocks, "nothing was written")?;
    let placement = match args.placement {
        Some(h) => Some(placement(dev, h)?),
        None => None,
    };
    let per = info.max_transfer_blocks();
    let mut q = dev.queue(2)?;
    if blocks > per {
        check_fits(q.as_mut(), args.lba, blocks, "write")?;
    }
    let meta = match &args.metadata {
        Some(path) => {
            let ms = metadata_size(dev)?;
            let mut m = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
            let want = blocks as usize * ms;
            if m.len() > want {
                bail!(
                    "--metadata: {} bytes for {} of {ms} bytes of metadata each ({want} bytes)",
                    m.len(),
                    plural(blocks)
                );
            }
            m.resize(want, 0);
            Some((ms, m))
        }
        None => None,
    };
    let mut buf = dev.alloc((per.min(blocks) as usize) * bs)?;
    for (i, chunk) in data.chunks(per as usize * bs).enumerate() {
        buf.set_len(chunk.len())?;
        buf.copy_from_slice(chunk);
        if let Some((ms, m)) = &meta {
            let n = chunk.len() / bs;
            let first = i * per as usize;
            let mut mb = dev.alloc(n * ms)?;
            mb.copy_from_slice(&m[first * ms..(first + n) * ms]);
            buf.attach_metadata(mb);
        }
        let lba = args.lba + i as u64 * per;
        // One command a chunk: a chunk is at most the transfer limit.
        let op = ZoneOp::Write { lba, fua: args.fua, placement };
        q.execute(&op, Data::ToDevice(&buf))?;
    }
    match args.placement {
        Some(h) => writeln!(
            out,
            "wrote {} at LBA {:#x} through placement handle {h}",
            plural(blocks),
            args.lba
        )?,
        None => writeln!(out, "wrote {} at LBA {:#x}", plural(blocks), args.lba)?,
    }
    Ok(())
}

/// The placement identifier of `--placement HANDLE`, refused with the
/// reason on a namespace without Flexible Data Placement enabled.
fn placement(dev: &dyn ZonedDevice, handle: u16) -> Result<u16> {
    let info = dev.info();
    match &info.fdp {
        Some(f) if f.enabled => {
            crate::fdp::placement_id(f, handle).with_context(|| format!("--placement {handle}"))
        }
        Some(f) => bail!(
            "--placement {handle}: Flexible Data Placement is disabled in endurance group {} of \
             {} namespace {}; nothing was written",
            f.endurance_group,
            info.uri,
            info.nsid
        ),
        None => bail!(
            "--placement {handle}: {} namespace {} has no Flexible Data Placement (`zns identify` \
             shows what it reports); nothing was written",
            info.uri,
            info.nsid
        ),
    }
}

pub fn append(dev: &dyn ZonedDevice, args: &AppendArgs, out: &mut dyn Write) -> Result<()> {
    let info = dev.info();
    let bs = info.block_size as usize;
    let data = input(&args.input, bs)?;
    let blocks = (data.len() / bs) as u64;
    let per = info.max_append_blocks();
    if info.zone_count == 0 {
        bail!(
            "zone append: the device has no zones (a conventional namespace): nothing was written"
        );
    }
    let zslba = args.zone.resolve(info)?;
    let index = zslba / info.zone_size;
    let mut q = dev.queue(2)?;
    if blocks > per {
        let z = q.zone(zslba)?;
        let wp = z.write_pointer.unwrap_or(z.end());
        check_fits(q.as_mut(), wp.max(zslba), blocks, "zone append")?;
    }
    let mut buf = dev.alloc((per.min(blocks) as usize) * bs)?;
    let mut landed: Vec<(u64, u64)> = Vec::new();
    for chunk in data.chunks(per as usize * bs) {
        buf.set_len(chunk.len())?;
        buf.copy_from_slice(chunk);
        let lba = q.append(zslba, &buf)?;
        let n = (chunk.len() / bs) as u64;
        match landed.last_mut() {
            Some((start, len)) if *start + *len == lba => *len += n,
            _ => landed.push((lba, n)),
        }
    }
    for (lba, n) in landed {
        writeln!(out, "appended {} to zone {index} at LBA {lba:#x}", plural(n))?;
    }
    Ok(())
}
