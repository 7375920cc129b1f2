//! The guest kernel: a Debian kernel package of one flavour (the cloud
//! kernel `linux-image-*-cloud-amd64-unsigned`, small and quick to boot,
//! or the generic `linux-image-*-amd64-unsigned`, which has every
//! filesystem, f2fs included) fetched with `apt-get download`, unpacked
//! with `dpkg -x` into a cache directory, and the modules the guest must
//! load (NVMe, unless it is built in) with their dependencies.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{run_checked, Error, Result};

/// Modules the guest needs, in the kernel's naming (`-` and `_` are the
/// same to the kernel).
pub const NEEDED_MODULES: &[&str] = &["nvme-core", "nvme"];

/// Modules a guest that binds controllers to `vfio-pci` loads beyond
/// those: VFIO, its type-1 IOMMU backend (a soft dependency the kernel's
/// `modprobe` would add; the guest has none) and the PCI driver.
pub const VFIO_MODULES: &[&str] = &["vfio", "vfio_iommu_type1", "vfio-pci"];

/// An unpacked kernel package.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The package name.
    pub package: String,
    /// The kernel image.
    pub vmlinuz: PathBuf,
    /// `lib/modules/VERSION` inside the unpacked package.
    pub modules_dir: PathBuf,
}

/// Which of Debian's kernel images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `linux-image-VERSION-cloud-amd64-unsigned`: virtio and NVMe drivers,
    /// btrfs, XFS, zonefs; no f2fs.
    Cloud,
    /// `linux-image-VERSION-amd64-unsigned`: Debian's generic kernel, every
    /// filesystem as a module (f2fs among them); larger, slower to unpack.
    Generic,
}

impl Flavour {
    /// The package name's end after the version.
    fn suffix(self) -> &'static str {
        match self {
            Flavour::Cloud => "-cloud-amd64-unsigned",
            Flavour::Generic => "-amd64-unsigned",
        }
    }

    /// `apt-cache search` pattern of this flavour's packages (the generic
    /// pattern also matches other flavours: [`package_version`] sorts them
    /// out).
    fn search_pattern(self) -> String {
        format!("^linux-image-.*{}$", self.suffix())
    }
}

/// The version part of a kernel package name of `flavour`:
/// `linux-image-6.12.117+deb12-cloud-amd64-unsigned` → `6.12.117+deb12`
/// (cloud), `linux-image-6.1.0-48-amd64-unsigned` → `6.1.0-48` (generic).
/// Another flavour's package (`-cloud-`, `-rt-`) is `None` for generic.
pub fn package_version(flavour: Flavour, name: &str) -> Option<&str> {
    let v = name.strip_prefix("linux-image-")?.strip_suffix(flavour.suffix())?;
    // A version's dash-separated parts start with a digit (6.1.0-48,
    // 6.12.117+deb12); a flavour name (cloud, rt) does not.
    v.split('-').all(|part| part.starts_with(|c: char| c.is_ascii_digit())).then_some(v)
}

/// Orders versions by their runs of digits (`6.12.1` after `6.1.0-56`).
pub fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// The newest kernel package of `flavour` among `apt-cache search`
/// output lines.
pub fn pick_package(flavour: Flavour, search_output: &str) -> Option<String> {
    search_output
        .lines()
        .filter_map(|l| l.split(" - ").next().map(str::trim))
        .filter(|n| package_version(flavour, n).is_some())
        .max_by_key(|n| version_key(package_version(flavour, n).unwrap_or_default()))
        .map(str::to_string)
}

/// The machine's Debian sources with the release's backports beside them
/// (a private list: the machine's apt configuration is left as it is),
/// its lists refreshed: newer kernels (ublk, zoned ublk, NVMe in-band
/// authentication) come from backports on a stable release. `None` when
/// no such list can be made or refreshed (offline, not Debian).
///
/// Lists refreshed within [`LISTS_FRESH`] are used as they are: one
/// `cargo xtask` run prepares a kernel for every guest it starts.
fn backports(cache: &Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (list, lists, _) = crate::vmtest::backports_sources(cache).ok()?;
    // The marker holds the sources it was refreshed from: other sources
    // need their own update.
    let marker = lists.join(".refreshed");
    let sources = std::fs::read(&list).ok()?;
    let fresh = std::fs::read(&marker).is_ok_and(|m| m == sources)
        && std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < LISTS_FRESH);
    if fresh {
        return Some((list, lists));
    }
    let ok = crate::vmtest::apt_with(&list, &lists)
        .arg("update")
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        // A marker that cannot be written only costs the next run an update.
        let _ = std::fs::write(&marker, &sources);
    }
    ok.then_some((list, lists))
}

/// How long refreshed backports lists are used without another update.
const LISTS_FRESH: std::time::Duration = std::time::Duration::from_secs(3600);

/// `apt-cache` (or `apt-get` with `tool` "apt-get") on the backports list
/// when there is one, else on the machine's sources.
fn apt_tool(tool: &str, bp: Option<&(std::path::PathBuf, std::path::PathBuf)>) -> Command {
    let mut c = Command::new(tool);
    if let Some((list, lists)) = bp {
        c.arg("-o").arg(format!("Dir::Etc::sourcelist={}", list.display()));
        c.args(["-o", "Dir::Etc::sourceparts=-"]);
        c.arg("-o").arg(format!("Dir::State::lists={}", lists.display()));
    }
    c
}

fn search_packages(
    flavour: Flavour,
    bp: Option<&(std::path::PathBuf, std::path::PathBuf)>,
) -> Result<String> {
    let out = apt_tool("apt-cache", bp)
        .args(["search", "--names-only", &flavour.search_pattern()])
        .output()
        .map_err(|e| Error::new(format!("apt-cache: {e}")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Finds (or fetches) the kernel package `wanted` (the newest of
/// `flavour` when `None`) unpacked under `cache`.
pub fn prepare(
    cache: &Path,
    flavour: Flavour,
    wanted: Option<&str>,
    may_install: bool,
) -> Result<Kernel> {
    fs::create_dir_all(cache).map_err(|e| Error::io(cache, e))?;
    let bp = if may_install { backports(cache) } else { None };
    let bp = bp.as_ref();
    let package = match wanted {
        Some(p) => p.to_string(),
        None => {
            let mut found = pick_package(flavour, &search_packages(flavour, bp)?);
            if found.is_none() && may_install {
                run_checked(Command::new("apt-get").arg("update"), "apt-get update")?;
                found = pick_package(flavour, &search_packages(flavour, None)?);
            }
            match found {
                Some(p) => p,
                // Offline: whatever was unpacked before.
                None => cached_packages(cache, flavour)
                    .into_iter()
                    .max_by_key(|n| version_key(package_version(flavour, n).unwrap_or_default()))
                    .ok_or_else(|| {
                        Error::new(format!(
                            "no linux-image-*{} package is known to apt (run apt-get update) \
                             and none is cached",
                            flavour.suffix()
                        ))
                    })?,
            }
        }
    };
    let root = cache.join(&package);
    if let Some(k) = find_unpacked(&root, &package) {
        return Ok(k);
    }
    println!("vmtest: fetching {package}");
    let dl = cache.join("download");
    fs::create_dir_all(&dl).map_err(|e| Error::io(&dl, e))?;
    let download = || {
        run_checked(
            apt_tool("apt-get", bp).arg("download").arg(&package).current_dir(&dl),
            &format!("apt-get download {package}"),
        )
    };
    if download().is_err() && may_install {
        // A package list older than the archive names files it no longer has.
        run_checked(Command::new("apt-get").arg("update"), "apt-get update")?;
        download()?;
    }
    let deb = fs::read_dir(&dl)
        .map_err(|e| Error::io(&dl, e))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .ok_or_else(|| Error::new(format!("apt-get download left no {package}_*.deb")))?;
    let tmp = cache.join(format!("{package}.partial"));
    let _ = fs::remove_dir_all(&tmp);
    run_checked(Command::new("dpkg").arg("-x").arg(&deb).arg(&tmp), "dpkg -x")?;
    fs::rename(&tmp, &root).map_err(|e| Error::io(&root, e))?;
    let _ = fs::remove_file(&deb);
    find_unpacked(&root, &package)
        .ok_or_else(|| Error::new(format!("{package} holds no boot/vmlinuz-* and modules")))
}

fn cached_packages(cache: &Path, flavour: Flavour) -> Vec<String> {
    fs::read_dir(cache)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| package_version(flavour, n).is_some())
                .collect()
        })
        .unwrap_or_default()
}

fn find_unpacked(root: &Path, package: &str) -> Option<Kernel> {
    let boot = root.join("boot");
    let vmlinuz = fs::read_dir(&boot).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("vmlinuz-"))
    })?;
    let version = vmlinuz.file_name()?.to_str()?.strip_prefix("vmlinuz-")?.to_string();
    let modules_dir = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| root.join(d).join(&version))
        .find(|d| d.is_dir())?;
    Some(Kernel { package: package.to_string(), vmlinuz, modules_dir })
}

/// A module file to put in the initramfs: its name and uncompressed bytes.
#[derive(Debug, Clone)]
pub struct Module {
    /// File name (`nvme-core.ko`).
    pub name: String,
    /// The module.
    pub bytes: Vec<u8>,
}

fn normalize(name: &str) -> String {
    name.replace('_', "-")
}

/// Whether `modules.builtin` (its text) lists module `name`.
pub fn is_builtin(modules_builtin: &str, name: &str) -> bool {
    let want = normalize(name);
    modules_builtin.lines().any(|l| {
        Path::new(l.trim())
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".ko"))
            .is_some_and(|n| normalize(n) == want)
    })
}

/// The `depends=` list in a module's `.modinfo` strings.
pub fn module_depends(bytes: &[u8]) -> Vec<String> {
    let key = b"depends=";
    let Some(at) = bytes.windows(key.len()).position(|w| w == key) else { return Vec::new() };
    let rest = &bytes[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn find_module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let want = normalize(name);
    let mut stack = vec![dir.join("kernel")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let n = e.file_name().to_string_lossy().into_owned();
            let stem = n.split(".ko").next().unwrap_or_default();
            if n.contains(".ko") && normalize(stem) == want {
                return Some(p);
            }
        }
    }
    None
}

fn decompress(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    match tool {
        None => fs::read(path).map_err(|e| Error::io(path, e)),
        Some(t) => {
            let out = Command::new(t)
                .arg("-dc")
                .arg(path)
                .output()
                .map_err(|e| Error::new(format!("{t} -dc {}: {e}", path.display())))?;
            if !out.status.success() {
                return Err(Error::new(format!("{t} -dc {} failed", path.display())));
            }
            Ok(out.stdout)
        }
    }
}

/// The modules of [`NEEDED_MODULES`] that are not built in, with their
/// dependencies, in load order.
pub fn modules_to_load(k: &Kernel) -> Result<Vec<Module>> {
    modules_for(k, NEEDED_MODULES, &[])
}

/// [`NEEDED_MODULES`] and [`VFIO_MODULES`] that are not built in, with
/// their dependencies, in load order.
pub fn vfio_modules_to_load(k: &Kernel) -> Result<Vec<Module>> {
    let all: Vec<&str> = NEEDED_MODULES.iter().chain(VFIO_MODULES).copied().collect();
    modules_for(k, &all, &[])
}

/// The modules `required` and `optional` name that are not built in, with
/// their dependencies, in load order; an optional module the kernel lacks
/// is left out.
pub fn modules_for(k: &Kernel, required: &[&str], optional: &[&str]) -> Result<Vec<Module>> {
    let builtin = fs::read_to_string(k.modules_dir.join("modules.builtin")).unwrap_or_default();
    let mut order: Vec<Module> = Vec::new();
    fn visit(
        k: &Kernel,
        builtin: &str,
        name: &str,
        order: &mut Vec<Module>,
        depth: u32,
    ) -> Result<()> {
        let file = format!("{}.ko", normalize(name));
        if depth > 16 || is_builtin(builtin, name) || order.iter().any(|m| m.name == file) {
            return Ok(());
        }
        let path = find_module_file(&k.modules_dir, name).ok_or_else(|| {
            Error::new(format!(
                "module {name} is neither built into {} nor shipped in it",
                k.package
            ))
        })?;
        let bytes = decompress(&path)?;
        for dep in module_depends(&bytes) {
            visit(k, builtin, &dep, order, depth + 1)?;
        }
        order.push(Module { name: file, bytes });
        Ok(())
    }
    for m in required {
        visit(k, &builtin, m, &mut order, 0)?;
    }
    for m in optional {
        if find_module_file(&k.modules_dir, m).is_some() {
            visit(k, &builtin, m, &mut order, 0)?;
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_newest_cloud_kernel() {
        let out = "linux-image-6.1.0-47-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                   linux-image-6.12.117+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud\n\
                   linux-image-6.12.9+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud\n\
                   linux-image-6.1.0-56-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                   linux-image-cloud-amd64 - Linux for x86-64 cloud (meta-package)\n";
        assert_eq!(
            pick_package(Flavour::Cloud, out).as_deref(),
            Some("linux-image-6.12.117+deb12-cloud-amd64-unsigned")
        );
        assert_eq!(pick_package(Flavour::Cloud, "nothing here\n"), None);
        assert_eq!(
            package_version(Flavour::Cloud, "linux-image-6.1.0-56-cloud-amd64-unsigned"),
            Some("6.1.0-56")
        );
        assert!(version_key("6.12.1") > version_key("6.1.0-56"));
        // Only cloud kernels here: no generic one.
        assert_eq!(pick_package(Flavour::Generic, out), None);
    }

    #[test]
    fn picks_the_newest_generic_kernel_among_other_flavours() {
        let out = "linux-image-6.1.0-47-amd64-unsigned - Linux 6.1 for 64-bit PCs\n\
                   linux-image-6.1.0-48-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                   linux-image-6.1.0-48-rt-amd64-unsigned - Linux 6.1 for 64-bit PCs, PREEMPT_RT\n\
                   linux-image-6.1.0-48-amd64-unsigned - Linux 6.1 for 64-bit PCs\n\
                   linux-image-6.1.0-9-amd64-unsigned - Linux 6.1 for 64-bit PCs\n";
        assert_eq!(
            pick_package(Flavour::Generic, out).as_deref(),
            Some("linux-image-6.1.0-48-amd64-unsigned")
        );
        assert_eq!(
            pick_package(Flavour::Cloud, out).as_deref(),
            Some("linux-image-6.1.0-48-cloud-amd64-unsigned")
        );
        let generic = |n| package_version(Flavour::Generic, n);
        assert_eq!(generic("linux-image-6.12.117+deb12-amd64-unsigned"), Some("6.12.117+deb12"));
        assert_eq!(generic("linux-image-6.1.0-48-rt-amd64-unsigned"), None);
        assert_eq!(generic("linux-image-6.1.0-48-cloud-amd64-unsigned"), None);
        assert_eq!(generic("linux-image-amd64-unsigned"), None);
    }

    #[test]
    fn finds_builtin_modules_and_dependencies() {
        let builtin = "kernel/drivers/nvme/host/nvme-core.ko\nkernel/drivers/nvme/host/nvme.ko\n";
        assert!(is_builtin(builtin, "nvme_core"));
        assert!(is_builtin(builtin, "nvme"));
        assert!(!is_builtin(builtin, "nvme-tcp"));
        let mut modinfo =
            b"\x00license=GPL\x00depends=nvme-core,nvme-auth\x00vermagic=6.1\x00".to_vec();
        assert_eq!(module_depends(&modinfo), vec!["nvme-core", "nvme-auth"]);
        modinfo = b"license=GPL\x00depends=\x00".to_vec();
        assert!(module_depends(&modinfo).is_empty());
        assert!(module_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn loads_modules_from_an_unpacked_package() {
        let dir = tempfile::tempdir().unwrap();
        let mods = dir.path().join("lib/modules/6.1.0-test");
        let host = mods.join("kernel/drivers/nvme/host");
        fs::create_dir_all(&host).unwrap();
        fs::write(host.join("nvme-core.ko"), b"\x00depends=\x00").unwrap();
        fs::write(host.join("nvme.ko"), b"\x00depends=nvme-core\x00").unwrap();
        fs::write(mods.join("modules.builtin"), "kernel/lib/crc-t10dif.ko\n").unwrap();
        let k = Kernel {
            package: "test".into(),
            vmlinuz: dir.path().join("boot/vmlinuz-6.1.0-test"),
            modules_dir: mods.clone(),
        };
        let order: Vec<String> = modules_to_load(&k).unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(order, ["nvme-core.ko", "nvme.ko"]);
        fs::write(
            mods.join("modules.builtin"),
            "kernel/drivers/nvme/host/nvme.ko\nkernel/drivers/nvme/host/nvme-core.ko\n",
        )
        .unwrap();
        assert!(modules_to_load(&k).unwrap().is_empty());
    }
}
