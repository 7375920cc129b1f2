//! Running one command on a device and comparing what two devices did:
//! the completion (status, Zone Append LBA, data read, report bytes) and
//! the zone report after it.

use std::fmt::Write as _;

use zns_device::{parse_report, Data, DeviceError, DeviceInfo, Status, Zone, ZoneOp, ZoneQueue};

use crate::generate::Cmd;
use crate::rng::mix;

/// How a command completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Successful Completion with the command's result (the LBA of a Zone
    /// Append, 0 otherwise).
    Done(u64),
    /// The device's error status.
    Failed(Status),
    /// The command did not complete with a status (refused before the
    /// device, or an operating-system error).
    Other(String),
}

impl Outcome {
    /// The status's name (`Success`, `Zone Invalid Write`, ...).
    pub fn name(&self) -> String {
        match self {
            Outcome::Done(_) => "Success".into(),
            Outcome::Failed(s) => s.name().map_or_else(|| format!("{s}"), str::to_string),
            Outcome::Other(e) => format!("error: {e}"),
        }
    }

    /// The status, for matching (`None` for [`Outcome::Other`]).
    pub fn status(&self) -> Option<Status> {
        match self {
            Outcome::Done(_) => Some(Status::SUCCESS),
            Outcome::Failed(s) => Some(*s),
            Outcome::Other(_) => None,
        }
    }
}

/// What one device did with one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Its completion.
    pub outcome: Outcome,
    /// Data it returned (reads and reports that succeeded).
    pub data: Option<Vec<u8>>,
}

impl Observed {
    /// `Success`, `Zone Is Full`, ... with a Zone Append's LBA.
    pub fn describe(&self) -> String {
        match (&self.outcome, self.data.is_some()) {
            (Outcome::Done(lba), false) if *lba != 0 => format!("Success (LBA {lba})"),
            (o, _) => o.name(),
        }
    }
}

/// Fills `buf` with the data of seed `fill` (different in every 8 bytes).
pub fn fill(buf: &mut [u8], fill: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let v = mix(fill ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Runs `cmd` on `q`.
pub fn execute(q: &mut dyn ZoneQueue, cmd: &Cmd) -> Observed {
    let outcome = |r: Result<u64, DeviceError>| match r {
        Ok(v) => Outcome::Done(v),
        Err(DeviceError::Nvme { status, .. }) => Outcome::Failed(status),
        Err(e) => Outcome::Other(e.to_string()),
    };
    match cmd.op.data_to_device() {
        None => Observed { outcome: outcome(q.execute(&cmd.op, Data::None)), data: None },
        Some(true) => match q.alloc(cmd.bytes) {
            Ok(mut b) => {
                fill(&mut b, cmd.fill);
                Observed { outcome: outcome(q.execute(&cmd.op, Data::ToDevice(&b))), data: None }
            }
            Err(e) => Observed { outcome: outcome(Err(e)), data: None },
        },
        Some(false) => match q.alloc(cmd.bytes) {
            Ok(mut b) => {
                let o = outcome(q.execute(&cmd.op, Data::FromDevice(&mut b)));
                let data = matches!(o, Outcome::Done(_)).then(|| b.to_vec());
                Observed { outcome: o, data }
            }
            Err(e) => Observed { outcome: outcome(Err(e)), data: None },
        },
    }
}

/// Every zone as a device reports it, with its descriptor extension.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The zones, in order.
    pub zones: Vec<Zone>,
    /// Each zone's descriptor extension (empty without extensions).
    pub ext: Vec<Vec<u8>>,
}

/// Reports every zone of the device (extended reports when it has
/// descriptor extensions), in commands of at most `max_bytes`.
pub fn snapshot(q: &mut dyn ZoneQueue, max_bytes: usize) -> Result<Snapshot, DeviceError> {
    let info: DeviceInfo = q.info().clone();
    let ext = info.capabilities.extension_bytes;
    let per = 64 + ext;
    let batch = ((max_bytes.saturating_sub(64)) / per).max(1) as u64;
    let mut s = Snapshot::default();
    let mut slba = 0;
    while (s.zones.len() as u64) < info.zone_count {
        let n = batch.min(info.zone_count - s.zones.len() as u64) as usize;
        let mut buf = q.alloc(64 + n * per)?;
        let op = ZoneOp::ReportZones {
            slba,
            filter: zns_device::ReportFilter::All,
            partial: true,
            extended: ext > 0,
        };
        q.execute(&op, Data::FromDevice(&mut buf))?;
        let r = parse_report(&buf, info.zone_size, (ext > 0).then_some(ext))?;
        if r.descriptors.is_empty() {
            return Err(DeviceError::InvalidArgument(format!(
                "the zone report from LBA {slba} is empty"
            )));
        }
        slba = r.descriptors.last().map_or(slba, |z| z.start + info.zone_size);
        s.zones.extend(r.descriptors);
        s.ext.extend(r.extensions);
    }
    Ok(s)
}

/// A zone in one line: `zone 3 ZSIO wp 49160 cap 15360 attrs 00h`.
pub fn zone_line(z: &Zone) -> String {
    let wp = z.write_pointer.map_or("-".to_string(), |w| w.to_string());
    format!(
        "zone {} {} wp {wp} cap {} attrs {:02x}h",
        z.index,
        z.state.abbreviation(),
        z.capacity,
        z.attributes.0
    )
}

/// The zones whose descriptors (or extensions) differ between `a` and `b`.
pub fn differing_zones(a: &Snapshot, b: &Snapshot) -> Vec<usize> {
    let n = a.zones.len().max(b.zones.len());
    (0..n).filter(|&i| a.zones.get(i) != b.zones.get(i) || a.ext.get(i) != b.ext.get(i)).collect()
}

/// The differences of two snapshots, one zone a line.
pub fn snapshot_diff(a: &Snapshot, b: &Snapshot, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    for i in differing_zones(a, b) {
        let line = |s: &Snapshot| match s.zones.get(i) {
            Some(z) => {
                let ext = match s.ext.get(i) {
                    Some(e) if e.iter().any(|&x| x != 0) => format!(" ext {:02x?}..", &e[..4]),
                    _ => String::new(),
                };
                format!("{}{ext}", zone_line(z))
            }
            None => "missing".into(),
        };
        let _ = writeln!(out, "    {a_name}: {}\n    {b_name}: {}", line(a), line(b));
    }
    out
}

/// Where two data buffers first differ.
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// How many zones are open and active.
pub fn counts(zones: &[Zone]) -> (usize, usize) {
    let open = zones.iter().filter(|z| z.state.is_open()).count();
    let active = zones.iter().filter(|z| z.state.is_active()).count();
    (open, active)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_depends_on_seed_and_offset() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        fill(&mut a, 1);
        fill(&mut b, 1);
        assert_eq!(a, b);
        fill(&mut b, 2);
        assert_ne!(a, b);
        assert_ne!(a[..8], a[8..16]);
        assert_eq!(first_difference(&a, &a), None);
        assert_eq!(first_difference(&a, &b), Some(0));
    }
}
