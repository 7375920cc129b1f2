//! The measured figures of the real drives profiles model: one file per
//! drive (`reference/zn540.toml`, the Western Digital Ultrastar DC ZN540
//! the `zn540` profile models), read by the emulator's calibration
//! (`timing::calibration`) and by `zns characterize`'s comparison
//! (`zns-bench`), so a figure is written down once.
//!
//! Each figure is named as `zns characterize`'s `results.json` names it
//! (`qd1/write/4KiB:mean_us`, `zone_mgmt/reset/full:p50_us`, ...) and
//! belongs to one LBA format (`lba_bytes`, 4096 unless given).

use std::sync::OnceLock;

use serde::Deserialize;

/// The ZN540's reference file, as text (TOML).
pub const ZN540_TOML: &str = include_str!("../reference/zn540.toml");

/// The figures of a reference file, as far as the emulator reads them.
#[derive(Debug, Deserialize)]
struct File {
    figure: Vec<Figure>,
}

/// One figure of a reference file.
#[derive(Debug, Deserialize)]
struct Figure {
    name: String,
    value: f64,
    lba_bytes: Option<u32>,
}

/// The ZN540's figure `name` measured with `lba_bytes`-byte blocks, if
/// the reference has it.
pub fn zn540(name: &str, lba_bytes: u32) -> Option<f64> {
    static FIGURES: OnceLock<Vec<Figure>> = OnceLock::new();
    let figures = FIGURES.get_or_init(|| {
        // Built in and checked by a test: it parses.
        toml::from_str::<File>(ZN540_TOML).map(|f| f.figure).unwrap_or_default()
    });
    figures
        .iter()
        .find(|f| f.name == name && f.lba_bytes.unwrap_or(4096) == lba_bytes)
        .map(|f| f.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zn540_file_parses_and_its_figures_are_found_by_name_and_format() {
        let file: File = toml::from_str(ZN540_TOML).unwrap();
        assert!(file.figure.len() > 70, "{}", file.figure.len());
        assert_eq!(zn540("qd1/write/4KiB:mean_us", 4096), Some(11.36));
        assert_eq!(zn540("qd1/write/4KiB:mean_us", 512), Some(19.8));
        assert_eq!(zn540("zone_mgmt/reset/full:p50_us", 4096), Some(15970.0));
        assert_eq!(zn540("no/such:figure", 4096), None);
    }
}
