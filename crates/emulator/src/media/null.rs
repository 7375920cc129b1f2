//! Media that store nothing.

use super::{Media, MediaError, MediaGeometry};

/// A medium that stores nothing: writes succeed after the usual checks and
/// are discarded, reads return zeros.
///
/// Used to measure the overhead of the software stack alone, and for long
/// simulations where contents do not matter. [`Media::stores_data`] is
/// `false` so that callers (and tests) can tell that read-back verification
/// is meaningless.
///
/// # Thread safety
///
/// `NullMedia` holds no mutable state; any number of threads may use it at
/// once.
#[derive(Clone, Copy, Debug)]
pub struct NullMedia {
    geometry: MediaGeometry,
}

impl NullMedia {
    /// Creates a null medium of the given geometry.
    pub fn new(geometry: MediaGeometry) -> Result<Self, MediaError> {
        geometry.validate()?;
        Ok(Self { geometry })
    }
}

impl Media for NullMedia {
    fn geometry(&self) -> MediaGeometry {
        self.geometry
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.geometry.check_data(lba, buf.len())?;
        buf.fill(0);
        Ok(())
    }

    fn write(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.geometry.check_data(lba, data.len())?;
        Ok(())
    }

    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.geometry.check_metadata(lba, buf.len())?;
        buf.fill(0);
        Ok(())
    }

    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.geometry.check_metadata(lba, data.len())?;
        Ok(())
    }

    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError> {
        self.geometry.check_range(lba, blocks)
    }

    fn sync(&self) -> Result<(), MediaError> {
        Ok(())
    }

    fn stores_data(&self) -> bool {
        false
    }

    /// Always 0.
    fn resident_bytes(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media() -> NullMedia {
        NullMedia::new(MediaGeometry::new(4096, 8, 904 * 524_288).unwrap()).unwrap()
    }

    #[test]
    fn null_media_reads_zeros_after_writes() {
        let m = media();
        assert!(!m.stores_data());
        m.write(10, &[0xab; 3 * 4096]).unwrap();
        m.write_metadata(10, &[0xcd; 3 * 8]).unwrap();
        let mut buf = vec![0xffu8; 3 * 4096];
        m.read(10, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let mut meta = vec![0xffu8; 3 * 8];
        m.read_metadata(10, &mut meta).unwrap();
        assert!(meta.iter().all(|&b| b == 0));
        m.deallocate(0, 904 * 524_288).unwrap();
        m.sync().unwrap();
        assert_eq!(m.resident_bytes(), 0);
    }

    #[test]
    fn null_media_checks_requests() {
        let m = media();
        let end = m.geometry().blocks;
        assert!(matches!(m.write(end, &[0; 4096]), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.read(end - 1, &mut [0; 8192]), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.write(0, &[0; 100]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.read_metadata(0, &mut [0; 4]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.deallocate(1, end), Err(MediaError::OutOfRange { .. })));
        let plain = NullMedia::new(MediaGeometry::new(512, 0, 8).unwrap()).unwrap();
        assert!(matches!(plain.write_metadata(0, &[0; 8]), Err(MediaError::NoMetadata)));
        assert!(matches!(
            NullMedia::new(MediaGeometry { block_size: 3000, metadata_size: 0, blocks: 1 }),
            Err(MediaError::InvalidGeometry(_))
        ));
    }
}
