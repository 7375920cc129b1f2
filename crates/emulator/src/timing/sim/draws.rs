//! Fixed pseudo-random draws: how long a program or an erase takes and
//! whether a housekeeping task runs before a command, each drawn from
//! what it acts on so that runs repeat exactly.

use super::zone::Prog;
use super::{Sim, ZoneKey, CONVENTIONAL};

/// A uniform number in [0, 1) from `x` (splitmix64 finalizer): fixed
/// pseudo-random draws that repeat run after run.
fn unit_interval(mut x: u64) -> f64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

impl Sim {
    /// tPROG of one program: the nominal time, varied by a fixed amount
    /// for its place (zone, unit) so runs repeat exactly.
    pub(super) fn program_time(&self, prog: &Prog) -> u64 {
        // A die's first program into an erase block opens the block.
        let k = prog.start / self.p.unit;
        let per_die = match prog.zone.1 {
            CONVENTIONAL => k / self.p.dies as u64,
            _ if self.is_segment(prog.zone) => k / self.p.dies as u64,
            _ => k / self.p.stripe as u64,
        };
        let pad = if self.is_striped(prog.zone) { self.layout(prog.zone).pad(k) } else { 0 };
        let opens = prog.start % self.p.unit == pad && per_die % self.p.units_per_block == 0;
        let open = if opens { self.p.block_open } else { 0 };
        let v = self.p.program_variation;
        if v == 0.0 {
            return self.p.program + open;
        }
        let mut x = (prog.zone.0 as u64) << 32 ^ prog.zone.1 as u64;
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (prog.start / self.p.unit);
        let u = unit_interval(x) * 2.0 - 1.0;
        (self.p.program as f64 * (1.0 + v * u)).round() as u64 + open
    }

    /// tBERS of the blocks of `zone` at this reset: `erase_us` × (1 + e),
    /// `e` uniform in [0, `erase_variation`), drawn from the zone and the
    /// number of resets so far (the wear of the blocks the zone held, the
    /// same for all of them).
    pub(super) fn erase_time(&mut self, zone: ZoneKey) -> u64 {
        self.resets += 1;
        let w = self.p.erase_variation;
        if w <= 0.0 {
            return self.p.erase;
        }
        let x = ((zone.0 as u64) << 32 ^ zone.1 as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ self.resets.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let e = unit_interval(x) * w;
        (self.p.erase as f64 * (1.0 + e)).round() as u64
    }

    /// Housekeeping the processing unit runs before the next data
    /// command's processing (the mapping and buffer bookkeeping the
    /// firmware defers and runs in batches): with probability
    /// `housekeeping_fraction` a task of exponentially distributed length,
    /// drawn from the data command's number.
    pub(super) fn housekeeping(&mut self) -> u64 {
        self.commands += 1;
        let (f, mean) = (self.p.housekeeping_fraction, self.p.housekeeping_mean);
        if f <= 0.0 || mean == 0 {
            return 0;
        }
        let u = unit_interval(self.commands.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        if u >= f {
            return 0;
        }
        // Given a task, u / f is uniform in [0, 1): an exponential draw.
        let e = -(1.0 - u / f).ln();
        (mean as f64 * e).round() as u64
    }
}
