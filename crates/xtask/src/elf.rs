//! Just enough ELF to tell whether an executable is statically linked (it
//! has no `PT_INTERP` program header, so it runs without a dynamic loader
//! in a bare initramfs).

/// `PT_INTERP`: the program header naming the dynamic loader.
const PT_INTERP: u32 = 3;

/// Whether `bytes` is a 64-bit little-endian ELF executable without a
/// dynamic loader; `Err` when it is not such an ELF file at all.
pub fn is_static_executable(bytes: &[u8]) -> Result<bool, String> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    let phoff = u64_at(0x20) as usize;
    let phentsize = u16_at(0x36) as usize;
    let phnum = u16_at(0x38) as usize;
    if phentsize < 56 || phoff.saturating_add(phentsize * phnum) > bytes.len() {
        return Err("truncated program headers".into());
    }
    Ok((0..phnum).all(|i| u32_at(phoff + i * phentsize) != PT_INTERP))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 * types.len()];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            b[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    #[test]
    fn tells_static_from_dynamic() {
        assert_eq!(is_static_executable(&elf(&[1, 1, 4])), Ok(true));
        assert_eq!(is_static_executable(&elf(&[6, 3, 1])), Ok(false));
        assert!(is_static_executable(b"#!/bin/sh\n").is_err());
        let mut short = elf(&[1, 1]);
        short.truncate(100);
        assert!(is_static_executable(&short).is_err());
        // This test binary itself is an ELF file, static or not.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(is_static_executable(&me).is_ok());
    }
}
