//! Files from Debian's source packages (test scripts the guest runs, as
//! fio's `t/zbd` and nvme-cli's `tests/`), fetched at test time with
//! `apt-get source --download-only` through a sources list of their own
//! (`deb-src` entries for the archives the machine's `deb` entries name;
//! the machine's apt configuration is left as it is), unpacked with
//! `dpkg-source -x` (Debian's patches applied) and cached under the
//! target directory. Nothing of them is kept in the repository.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::vmtest;
use crate::{run_checked, Error, Result};

/// The source package and version of installed binary package `binary`
/// (`fio`: `fio`, `3.33-3`).
pub fn installed(binary: &str) -> Result<(String, String)> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${source:Package} ${source:Version}", binary])
        .output()
        .map_err(|e| Error::new(format!("dpkg-query: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.split_once(' ') {
        Some((p, v)) if out.status.success() && !p.is_empty() && !v.trim().is_empty() => {
            Ok((p.to_string(), v.trim().to_string()))
        }
        _ => Err(Error::new(format!(
            "{binary} is not installed as a Debian package (dpkg-query -W {binary})"
        ))),
    }
}

/// Fetches `package` at `version` and copies `files` (paths in its tree;
/// `DIR/*.EXT` for every file of `DIR` with that extension) into `dest`,
/// flat.
pub fn fetch(
    cache: &Path,
    package: &str,
    version: &str,
    files: &[&str],
    dest: &Path,
    install: bool,
) -> Result<()> {
    println!("xtask: fetching the {package} {version} source package");
    if vmtest::which("dpkg-source").is_none() {
        if !install {
            return Err(Error::new("dpkg-source is missing (apt-get install dpkg-dev)"));
        }
        vmtest::apt_install(&["dpkg-dev".to_string()], None)?;
    }
    let codename = vmtest::codename()?;
    let entries = vmtest::source_entries(&vmtest::configured_sources(), &codename)
        .ok_or_else(|| Error::new(format!("no apt source of Debian {codename} configured")))?;
    let (list, lists) = vmtest::private_sources(cache, "sources", &entries)?;
    let work = cache.join(format!("{package}-source")).join("download");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    run_checked(vmtest::apt_with(&list, &lists).arg("update"), "apt-get update (deb-src)")?;
    run_checked(
        vmtest::apt_with(&list, &lists)
            .args(["source", "--download-only", &format!("{package}={version}")])
            .current_dir(&work),
        &format!("apt-get source {package}={version}"),
    )?;
    let upstream = version.split_once(':').map_or(version, |(_, v)| v);
    let dsc = work.join(format!("{package}_{upstream}.dsc"));
    let tree = work.join("tree");
    run_checked(
        Command::new("dpkg-source").arg("-x").arg(&dsc).arg(&tree),
        &format!("dpkg-source -x {}", dsc.display()),
    )?;
    let partial = dest.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, e))?;
    for f in files {
        for from in expand(&tree, f)? {
            let name = from.file_name().expect("a file name");
            fs::copy(&from, partial.join(name)).map_err(|e| Error::io(&from, e))?;
        }
    }
    let _ = fs::remove_dir_all(dest);
    fs::rename(&partial, dest).map_err(|e| Error::io(dest, e))?;
    let _ = fs::remove_dir_all(&work);
    Ok(())
}

/// The files `pattern` names in `tree`: itself, or for `DIR/*.EXT` every
/// file of `DIR` ending in `.EXT` (at least one).
fn expand(tree: &Path, pattern: &str) -> Result<Vec<std::path::PathBuf>> {
    let Some((dir, ext)) = pattern.split_once("/*.") else { return Ok(vec![tree.join(pattern)]) };
    let d = tree.join(dir);
    let mut out: Vec<_> = fs::read_dir(&d)
        .map_err(|e| Error::io(&d, e))?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(Error::new(format!("{}: no *.{ext} file", d.display())));
    }
    Ok(out)
}
