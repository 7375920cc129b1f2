//! Media kept in a regular file.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Media, MediaError, MediaGeometry};

/// Zeros for the fallback path of [`FileMedia::deallocate`] on file systems
/// that cannot punch holes.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Media stored in two regions of a regular, ideally sparse, file.
///
/// Block `lba` lives at byte `data_offset + lba * block_size` and its
/// metadata at `metadata_offset + lba * metadata_size`. Everything else in
/// the file (headers, zone state, other regions) belongs to the caller and
/// is never touched. All I/O is positioned (`pread`/`pwrite`), so the file
/// offset is neither used nor moved and the caller may share the file.
///
/// Bytes beyond the end of the file read as zeros, so a freshly created
/// empty file is a valid, fully unwritten medium; writes extend the file as
/// needed. [`Media::deallocate`] punches holes
/// (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`) and falls back to writing
/// zeros where the file system cannot. [`Media::sync`] is `fdatasync`.
///
/// # Thread safety
///
/// `FileMedia` is `Send + Sync` and takes no locks: concurrent requests are
/// independent positioned system calls. Requests on disjoint ranges never
/// interfere; a read racing a write on the same blocks may observe a mix of
/// old and new bytes, as with a real file.
#[derive(Debug)]
pub struct FileMedia {
    file: File,
    geometry: MediaGeometry,
    data_offset: u64,
    metadata_offset: u64,
    /// Cleared once the file system reports that it cannot punch holes.
    punch_holes: AtomicBool,
}

impl FileMedia {
    /// Uses `file` (opened for reading and writing) as a medium of the given
    /// geometry, data at `data_offset` and metadata at `metadata_offset`
    /// (ignored when the geometry has no metadata).
    ///
    /// Fails if the geometry is invalid, or if the two regions overlap or end
    /// past the largest file offset. Nothing is read or written.
    pub fn new(
        file: File,
        geometry: MediaGeometry,
        data_offset: u64,
        metadata_offset: u64,
    ) -> Result<Self, MediaError> {
        geometry.validate()?;
        let region_end = |offset: u64, len: u64, what: &str| match offset.checked_add(len) {
            Some(end) if end <= i64::MAX as u64 => Ok(end),
            _ => Err(MediaError::InvalidLayout(format!(
                "{what} region of {len} bytes at offset {offset} ends past the largest file offset"
            ))),
        };
        let data_end = region_end(data_offset, geometry.data_bytes(), "data")?;
        if geometry.metadata_size != 0 {
            let meta_end = region_end(metadata_offset, geometry.metadata_bytes(), "metadata")?;
            if metadata_offset < data_end && data_offset < meta_end {
                return Err(MediaError::InvalidLayout(format!(
                    "data region {data_offset}..{data_end} overlaps metadata region \
                     {metadata_offset}..{meta_end}"
                )));
            }
        }
        Ok(Self {
            file,
            geometry,
            data_offset,
            metadata_offset,
            punch_holes: AtomicBool::new(true),
        })
    }

    /// The underlying file, for the caller's own regions.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Gives the file back.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Byte offset of block 0's data in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Byte offset of block 0's metadata in the file.
    pub fn metadata_offset(&self) -> u64 {
        self.metadata_offset
    }

    fn data_pos(&self, lba: u64) -> u64 {
        self.data_offset + lba * u64::from(self.geometry.block_size)
    }

    fn metadata_pos(&self, lba: u64) -> u64 {
        self.metadata_offset + lba * u64::from(self.geometry.metadata_size)
    }

    /// Makes `len` bytes at `offset` read as zeros, releasing their space if
    /// the file system allows.
    fn release(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if self.punch_holes.load(Ordering::Relaxed) {
            match punch_hole(&self.file, offset, len) {
                Ok(()) => return Ok(()),
                Err(e) if is_unsupported(&e) => self.punch_holes.store(false, Ordering::Relaxed),
                Err(e) => return Err(e),
            }
        }
        // Fallback: overwrite with zeros, but only up to the end of the file;
        // beyond it everything reads as zeros already.
        let end = (offset + len).min(self.file.metadata()?.len());
        let mut pos = offset;
        while pos < end {
            let n = (end - pos).min(ZEROS.len() as u64) as usize;
            self.file.write_all_at(&ZEROS[..n], pos)?;
            pos += n as u64;
        }
        Ok(())
    }
}

/// `pread` until `buf` is full; whatever lies past the end of the file reads
/// as zeros.
fn read_zero_filled(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => {
                buf.fill(0);
                break;
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether an error from [`punch_hole`] means "not supported here" rather
/// than a real failure.
fn is_unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == libc::EOPNOTSUPP || code == libc::ENOSYS)
        || e.kind() == io::ErrorKind::Unsupported
}

/// Deallocates `len` bytes at `offset` without changing the file size.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;

    let invalid = |_| io::Error::from(io::ErrorKind::InvalidInput);
    let offset = libc::off_t::try_from(offset).map_err(invalid)?;
    let len = libc::off_t::try_from(len).map_err(invalid)?;
    loop {
        // SAFETY: `fallocate` takes only integers and touches no memory of
        // ours. The descriptor comes from `file`, which is borrowed for the
        // whole call and therefore open.
        let rc = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset,
                len,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Hole punching is Linux-only; elsewhere deallocation writes zeros.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn punch_hole(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

impl Media for FileMedia {
    fn geometry(&self) -> MediaGeometry {
        self.geometry
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.geometry.check_data(lba, buf.len())?;
        read_zero_filled(&self.file, buf, self.data_pos(lba))?;
        Ok(())
    }

    fn write(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.geometry.check_data(lba, data.len())?;
        self.file.write_all_at(data, self.data_pos(lba))?;
        Ok(())
    }

    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.geometry.check_metadata(lba, buf.len())?;
        read_zero_filled(&self.file, buf, self.metadata_pos(lba))?;
        Ok(())
    }

    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.geometry.check_metadata(lba, data.len())?;
        self.file.write_all_at(data, self.metadata_pos(lba))?;
        Ok(())
    }

    /// Punches holes over the data and the metadata of the range (falling
    /// back to writing zeros). The file size never changes.
    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError> {
        self.geometry.check_range(lba, blocks)?;
        self.release(self.data_pos(lba), blocks * u64::from(self.geometry.block_size))?;
        if self.geometry.metadata_size != 0 {
            let len = blocks * u64::from(self.geometry.metadata_size);
            self.release(self.metadata_pos(lba), len)?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), MediaError> {
        self.file.sync_data()?;
        Ok(())
    }

    fn stores_data(&self) -> bool {
        true
    }

    /// Disk space allocated to the whole file (`st_blocks * 512`), which
    /// includes whatever the caller keeps outside the data and metadata
    /// regions; 0 if the file cannot be queried.
    fn resident_bytes(&self) -> u64 {
        self.file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::sync::Arc;

    const HEADER: &[u8] = b"caller-owned header";

    fn geometry() -> MediaGeometry {
        MediaGeometry::new(4096, 16, 1024).unwrap()
    }

    /// Layout used by the tests: a 4 KiB header, data, then metadata.
    fn open(file: File) -> FileMedia {
        let g = geometry();
        FileMedia::new(file, g, 4096, 4096 + g.data_bytes()).unwrap()
    }

    fn with_header() -> File {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(HEADER, 0).unwrap();
        file
    }

    fn fill(len: usize, tag: u8) -> Vec<u8> {
        (0..len).map(|i| (tag ^ (i as u8)) | 0x40).collect()
    }

    fn header_intact(m: &FileMedia) -> bool {
        let mut buf = vec![0; HEADER.len()];
        m.file().read_exact_at(&mut buf, 0).unwrap();
        buf == HEADER
    }

    #[test]
    fn file_unwritten_reads_zero() {
        let m = open(with_header());
        let mut buf = vec![0xffu8; 4096 * 1024];
        m.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let mut meta = vec![0xffu8; 16 * 1024];
        m.read_metadata(0, &mut meta).unwrap();
        assert!(meta.iter().all(|&b| b == 0));
        // Reading straddling the end of a short file.
        m.write(3, &fill(4096, 1)).unwrap();
        let mut buf = vec![0xffu8; 3 * 4096];
        m.read(2, &mut buf).unwrap();
        assert!(buf[..4096].iter().all(|&b| b == 0));
        assert_eq!(&buf[4096..8192], &fill(4096, 1)[..]);
        assert!(buf[8192..].iter().all(|&b| b == 0));
        assert!(header_intact(&m));
    }

    #[test]
    fn file_round_trip_data_and_metadata() {
        let m = open(with_header());
        let data = fill(40 * 4096, 5);
        m.write(15, &data).unwrap();
        let meta = fill(40 * 16, 6);
        m.write_metadata(15, &meta).unwrap();
        let mut back = vec![0; data.len()];
        m.read(15, &mut back).unwrap();
        assert_eq!(back, data);
        let mut back = vec![0; meta.len()];
        m.read_metadata(15, &mut back).unwrap();
        assert_eq!(back, meta);
        // The last block and its metadata.
        m.write(1023, &fill(4096, 7)).unwrap();
        m.write_metadata(1023, &fill(16, 8)).unwrap();
        let mut one = vec![0; 4096];
        m.read(1023, &mut one).unwrap();
        assert_eq!(one, fill(4096, 7));
        assert!(header_intact(&m));
    }

    #[test]
    fn file_contents_survive_reopening() {
        let named = tempfile::NamedTempFile::new().unwrap();
        let reopen = || OpenOptions::new().read(true).write(true).open(named.path()).unwrap();
        {
            let file = reopen();
            file.write_all_at(HEADER, 0).unwrap();
            let m = open(file);
            m.write(100, &fill(8 * 4096, 9)).unwrap();
            m.write_metadata(100, &fill(8 * 16, 10)).unwrap();
            m.deallocate(102, 2).unwrap();
            m.sync().unwrap();
        }
        let m = open(reopen());
        let mut data = vec![0; 8 * 4096];
        m.read(100, &mut data).unwrap();
        let mut expected = fill(8 * 4096, 9);
        expected[2 * 4096..4 * 4096].fill(0);
        assert_eq!(data, expected);
        let mut meta = vec![0; 8 * 16];
        m.read_metadata(100, &mut meta).unwrap();
        let mut expected = fill(8 * 16, 10);
        expected[2 * 16..4 * 16].fill(0);
        assert_eq!(meta, expected);
        assert!(header_intact(&m));
    }

    #[test]
    fn file_deallocate_zeroes_and_releases() {
        let m = open(with_header());
        m.write(0, &fill(1024 * 4096, 11)).unwrap();
        m.write_metadata(0, &fill(1024 * 16, 12)).unwrap();
        m.sync().unwrap();
        let full = m.resident_bytes();
        assert!(full >= 1024 * 4096, "{full}");
        let len_before = m.file().metadata().unwrap().len();

        m.deallocate(1, 1022).unwrap();
        let mut data = vec![0; 1024 * 4096];
        m.read(0, &mut data).unwrap();
        let expected = fill(1024 * 4096, 11);
        assert_eq!(&data[..4096], &expected[..4096]);
        assert!(data[4096..1023 * 4096].iter().all(|&b| b == 0));
        assert_eq!(&data[1023 * 4096..], &expected[1023 * 4096..]);
        let mut meta = vec![0; 1024 * 16];
        m.read_metadata(0, &mut meta).unwrap();
        assert!(meta[16..1023 * 16].iter().all(|&b| b == 0));
        assert_eq!(&meta[..16], &fill(1024 * 16, 12)[..16]);

        assert_eq!(m.file().metadata().unwrap().len(), len_before);
        assert!(header_intact(&m));
        if m.punch_holes.load(Ordering::Relaxed) {
            let after = m.resident_bytes();
            assert!(after < full - 1000 * 4096, "{full} -> {after}");
        }
    }

    #[test]
    fn file_deallocate_fallback_writes_zeros() {
        let m = open(with_header());
        m.punch_holes.store(false, Ordering::Relaxed);
        m.write(0, &fill(4 * 4096, 13)).unwrap();
        m.write_metadata(0, &fill(4 * 16, 14)).unwrap();
        let len_before = m.file().metadata().unwrap().len();
        // Range reaching past the end of the file: the file must not grow.
        m.deallocate(1, 1000).unwrap();
        assert_eq!(m.file().metadata().unwrap().len(), len_before);
        let mut data = vec![0xffu8; 4 * 4096];
        m.read(0, &mut data).unwrap();
        assert_eq!(&data[..4096], &fill(4096, 13)[..]);
        assert!(data[4096..].iter().all(|&b| b == 0));
        let mut meta = vec![0xffu8; 4 * 16];
        m.read_metadata(0, &mut meta).unwrap();
        assert!(meta[16..].iter().all(|&b| b == 0));
        assert!(header_intact(&m));
    }

    #[test]
    fn file_rejects_bad_requests_and_layouts() {
        let m = open(with_header());
        let mut buf = vec![0; 4096];
        assert!(matches!(m.read(1024, &mut buf), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.write(1023, &[0; 8192]), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.write(0, &[0; 512]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.write_metadata(0, &[0; 8]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.deallocate(1, 1024), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.deallocate(u64::MAX, 1), Err(MediaError::OutOfRange { .. })));

        let g = geometry();
        let overlap = FileMedia::new(tempfile::tempfile().unwrap(), g, 0, g.data_bytes() - 16);
        assert!(matches!(overlap, Err(MediaError::InvalidLayout(_))));
        let too_far = FileMedia::new(tempfile::tempfile().unwrap(), g, i64::MAX as u64 - 4096, 0);
        assert!(matches!(too_far, Err(MediaError::InvalidLayout(_))));
        // Without metadata the metadata offset is irrelevant.
        let plain = MediaGeometry::new(4096, 0, 16).unwrap();
        let m = FileMedia::new(tempfile::tempfile().unwrap(), plain, 0, 0).unwrap();
        assert!(matches!(m.read_metadata(0, &mut [0; 16]), Err(MediaError::NoMetadata)));
    }

    #[test]
    fn file_io_errors_are_reported() {
        // A read-only descriptor: writes fail with an I/O error, not a panic.
        let named = tempfile::NamedTempFile::new().unwrap();
        let file = File::open(named.path()).unwrap();
        let m = open(file);
        assert!(matches!(m.write(0, &[1; 4096]), Err(MediaError::Io(_))));
    }

    #[test]
    fn file_concurrent_writers_on_different_ranges() {
        let m = Arc::new(open(with_header()));
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..16u64 {
                        let lba = (i * 8 + t) * 8;
                        m.write(lba, &fill(8 * 4096, lba as u8)).unwrap();
                        m.write_metadata(lba, &fill(8 * 16, !(lba as u8))).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for lba in (0..1024).step_by(8) {
            let mut data = vec![0; 8 * 4096];
            m.read(lba, &mut data).unwrap();
            assert_eq!(data, fill(8 * 4096, lba as u8), "lba {lba}");
            let mut meta = vec![0; 8 * 16];
            m.read_metadata(lba, &mut meta).unwrap();
            assert_eq!(meta, fill(8 * 16, !(lba as u8)), "lba {lba}");
        }
        assert!(header_intact(&m));
    }
}
