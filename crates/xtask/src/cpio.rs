//! A writer of `newc` cpio archives (the format the kernel unpacks as an
//! initramfs): directories, regular files, symbolic links and device
//! nodes, owned by root.

use std::io::{self, Write};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Builds a `newc` archive in memory.
#[derive(Debug, Default)]
pub struct Archive {
    out: Vec<u8>,
    next_ino: u32,
    finished: bool,
}

impl Archive {
    /// An empty archive.
    pub fn new() -> Self {
        Archive { out: Vec::new(), next_ino: 1, finished: false }
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        assert!(!self.finished, "entry after the trailer");
        let name = name.trim_start_matches('/');
        let ino = self.next_ino;
        self.next_ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let fields = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: reproducible archives
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    /// A directory (mode 0755).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, (0, 0), b"");
    }

    /// A regular file with permission bits `perm`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, S_IFREG | (perm & 0o7777), (0, 0), data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    /// A character device node.
    pub fn char_device(&mut self, name: &str, perm: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | (perm & 0o7777), (major, minor), b"");
    }

    /// Appends the trailer and returns the archive's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), b"");
        self.finished = true;
        // The kernel reads archives in 512-byte blocks.
        while !self.out.len().is_multiple_of(512) {
            self.out.push(0);
        }
        self.out
    }

    /// Writes the finished archive to `w`.
    pub fn write_to(self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks a newc archive: (name, mode, rdev major, rdev minor, data).
    fn entries(b: &[u8]) -> Vec<(String, u32, u32, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut o = 0;
        loop {
            assert_eq!(&b[o..o + 6], b"070701", "magic at {o}");
            let field = |i: usize| {
                let s = std::str::from_utf8(&b[o + 6 + 8 * i..o + 14 + 8 * i]).unwrap();
                u32::from_str_radix(s, 16).unwrap()
            };
            let (mode, size, rmaj, rmin, namesize) =
                (field(1), field(6) as usize, field(9), field(10), field(11) as usize);
            let name_start = o + 110;
            let name = std::str::from_utf8(&b[name_start..name_start + namesize - 1]).unwrap();
            assert_eq!(b[name_start + namesize - 1], 0);
            let data_start = (name_start + namesize).next_multiple_of(4);
            let data = b[data_start..data_start + size].to_vec();
            o = (data_start + size).next_multiple_of(4);
            if name == "TRAILER!!!" {
                break;
            }
            out.push((name.to_string(), mode, rmaj, rmin, data));
        }
        out
    }

    #[test]
    fn archives_round_trip_through_a_newc_reader() {
        let mut a = Archive::new();
        a.dir("/bin");
        a.file("/init", 0o755, b"#!/bin/sh\necho hi\n");
        a.symlink("bin/sh", "busybox");
        a.char_device("dev/console", 0o600, 5, 1);
        a.file("odd", 0o644, b"12345");
        let b = a.finish();
        assert_eq!(b.len() % 512, 0);
        let e = entries(&b);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, ["bin", "init", "bin/sh", "dev/console", "odd"]);
        assert_eq!(e[0].1, 0o040755);
        assert_eq!((e[1].1, e[1].4.as_slice()), (0o100755, &b"#!/bin/sh\necho hi\n"[..]));
        assert_eq!((e[2].1, e[2].4.as_slice()), (0o120777, &b"busybox"[..]));
        assert_eq!((e[3].1, e[3].2, e[3].3), (0o020600, 5, 1));
        assert_eq!(e[4].4, b"12345");
    }
}
