//! Command-line pieces the guest tasks share: the options of the QEMU
//! guest ([`GuestArgs`], flattened into each task's clap arguments), the
//! comma separated lists some options take ([`List`]), and [`parse_from`],
//! which turns clap's outcome into the tasks' [`Result`].

use std::fmt;
use std::time::Duration;

use clap::Parser;

use crate::vmtest::Options as VmOptions;
use crate::{fio_zbd, guest, Error, Result};

/// `--timeout`'s default, seconds: [`VmOptions::default`]'s.
const DEFAULT_TIMEOUT: &str = "900";

/// The guest's CPUs unless a task says otherwise ([`VmOptions`]'s default).
const DEFAULT_SMP: &str = "2";

/// The options of the QEMU guest that every guest task takes. A task
/// whose guest needs another default time sets it on its command:
/// `#[command(mut_arg("timeout", |a| a.default_value("1800")))]`; one
/// whose default depends on its other options removes it
/// (`a.default_value(None::<&str>)`) and asks for [`GuestArgs::vm_or`].
#[derive(Debug, Clone, clap::Args)]
pub struct GuestArgs {
    /// Give the guest this long, seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          default_value = DEFAULT_TIMEOUT)]
    timeout: Option<u64>,
    /// Kernel package (default: the newest Debian kernel of the task's
    /// flavour).
    #[arg(long, value_name = "PACKAGE")]
    kernel: Option<String>,
    /// Do not install missing packages or targets; fail instead.
    #[arg(long)]
    no_install: bool,
    /// Use KVM (software emulation otherwise: KVM inside some virtual
    /// machines fails to run the guest kernel)
    #[arg(long, verbatim_doc_comment)]
    kvm: bool,
    /// The guest's CPUs.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value = DEFAULT_SMP,
          value_parser = clap::value_parser!(u32).range(1..))]
    smp: Option<u32>,
    /// The guest's memory, as QEMU's -m takes it (a number of MiB, or
    /// with a K, M, G or T suffix)
    #[arg(long, value_name = "SIZE", verbatim_doc_comment,
          default_value_t = VmOptions::default().memory, value_parser = memory)]
    memory: String,
}

impl GuestArgs {
    /// `--smp`'s value where the user gave one, or where the task keeps
    /// its default (a task whose default depends on its other options
    /// removes it, as `cargo xtask apps` does).
    pub fn smp(&self) -> Option<u32> {
        self.smp
    }

    /// The guest's options (what the options do not set, as
    /// [`VmOptions::default`] has it).
    pub fn vm(&self) -> VmOptions {
        self.vm_or(VmOptions::default().timeout)
    }

    /// The guest's options, giving the guest `timeout` when `--timeout`
    /// has neither a value nor a default.
    pub fn vm_or(&self, timeout: Duration) -> VmOptions {
        let mut o = VmOptions::default();
        let secs = self.timeout.unwrap_or(timeout.as_secs());
        o.timeout = Duration::from_secs(secs.max(1));
        o.kernel = self.kernel.clone();
        o.install = !self.no_install;
        o.kvm = self.kvm;
        o.smp = self.smp.unwrap_or(o.smp);
        o.memory = self.memory.clone();
        o
    }
}

/// `--kernel`'s help in a task on Debian's cloud kernel (for
/// `#[command(mut_arg("kernel", cloud_kernel))]`).
pub fn cloud_kernel(a: clap::Arg) -> clap::Arg {
    a.help("Kernel package (default: newest linux-image-*-cloud-amd64-unsigned)")
}

/// `--kernel`'s help in a task on Debian's generic kernel.
pub fn generic_kernel(a: clap::Arg) -> clap::Arg {
    a.help(
        "Kernel package (default: newest linux-image-*-amd64-unsigned,\nDebian's generic kernel)",
    )
}

/// `--memory`: a number above 0, then at most one size suffix QEMU knows.
fn memory(s: &str) -> Result<String, String> {
    let digits = s.strip_suffix(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']).unwrap_or(s);
    let size = digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse::<u64>().ok());
    match size.flatten() {
        Some(n) if n > 0 => Ok(s.to_string()),
        _ => Err(format!("{s:?}: a size such as 1G, 2048M or 512 (MiB)")),
    }
}

/// A comma separated list taken as one value, so that a later option
/// replaces an earlier one rather than adding to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct List<T>(pub Vec<T>);

impl List<String> {
    /// The list of `names`.
    pub fn of(names: &[&str]) -> Self {
        List(names.iter().map(|n| n.to_string()).collect())
    }
}

impl<T> std::ops::Deref for List<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: fmt::Display> fmt::Display for List<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

/// `--parts`: the parts `list` names, each one of `known`, once each and
/// in the order of `known` (the order they run in).
pub fn parts(list: &str, known: &[&str]) -> Result<List<String>, String> {
    let named = guest::parse_parts(list, known)
        .map_err(|e| e.to_string().trim_start_matches("--parts: ").to_string())?;
    Ok(List(
        known.iter().filter(|k| named.iter().any(|n| n == *k)).map(|k| k.to_string()).collect(),
    ))
}

/// `--zbd-tests`: fio zbd test numbers and ranges, comma separated.
pub fn zbd_tests(s: &str) -> Result<List<u32>, String> {
    fio_zbd::parse_selection(s)
        .map(List)
        .ok_or_else(|| format!("{s:?}: not test numbers and ranges (1-29,33)"))
}

/// Parses `argv` (the program's name first) into `P`; `None` after
/// printing the help (or version) that was asked for.
pub fn parse_from<P: Parser>(argv: impl IntoIterator<Item = String>) -> Result<Option<P>> {
    settle(P::try_parse_from(argv), |e| {
        // A help that cannot be written (a closed pipe) leaves nothing to do.
        let _ = e.print();
    })
}

/// clap's outcome as the tasks' [`Result`]: `None` after `show`ing the
/// help or version asked for, an [`Error`] with clap's message otherwise.
pub fn settle<P>(
    parsed: Result<P, clap::Error>,
    show: impl FnOnce(&clap::Error),
) -> Result<Option<P>> {
    match parsed {
        Ok(p) => Ok(Some(p)),
        Err(e) if !e.use_stderr() => {
            show(&e);
            Ok(None)
        }
        Err(e) => Err(Error::new(e.to_string().trim_end().to_string())),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Parses `args` as the options of a task (no program name); a help
    /// asked for is checked for its usage line rather than printed.
    pub(crate) fn parse<P: Parser>(args: &[&str]) -> Result<Option<P>> {
        let argv = std::iter::once("xtask").chain(args.iter().copied());
        settle(P::try_parse_from(argv), |e| {
            let help = e.to_string();
            assert!(help.contains("Usage: xtask [OPTIONS]"), "{help}");
        })
    }

    #[derive(Debug, Parser)]
    #[command(args_override_self = true, mut_arg("timeout", |a| a.default_value("600")))]
    struct Task {
        #[command(flatten)]
        guest: GuestArgs,
        #[arg(long, value_parser = |s: &str| parts(s, &["a", "b", "c"]))]
        parts: Option<List<String>>,
        #[arg(long, value_parser = zbd_tests)]
        zbd_tests: Option<List<u32>>,
    }

    #[derive(Debug, Parser)]
    struct Plain {
        #[command(flatten)]
        guest: GuestArgs,
    }

    #[derive(Debug, Parser)]
    #[command(mut_arg("timeout", |a| a.default_value(None::<&str>)))]
    struct Later {
        #[command(flatten)]
        guest: GuestArgs,
    }

    #[test]
    fn the_timeout_defaults_to_the_vm_options_or_to_what_the_task_resolves() {
        let p: Plain = parse(&[]).unwrap().unwrap();
        assert_eq!(p.guest.vm().timeout, VmOptions::default().timeout);
        let l: Later = parse(&[]).unwrap().unwrap();
        assert_eq!(l.guest.vm_or(Duration::from_secs(77)).timeout, Duration::from_secs(77));
        let l: Later = parse(&["--timeout", "5"]).unwrap().unwrap();
        assert_eq!(l.guest.vm_or(Duration::from_secs(77)).timeout, Duration::from_secs(5));
    }

    #[test]
    fn the_guest_options_fill_the_vm_options_with_the_tasks_timeout() {
        let t: Task = parse(&[]).unwrap().unwrap();
        let (vm, d) = (t.guest.vm(), VmOptions::default());
        assert_eq!(vm.timeout, Duration::from_secs(600), "the task's default");
        assert_eq!((vm.kernel, vm.install, vm.kvm), (None, true, false));
        assert_eq!((vm.smp, vm.memory.as_str()), (d.smp, d.memory.as_str()));
        let t: Task = parse(&[
            "--timeout",
            "0",
            "--kernel",
            "linux-image-6.1.0-9-amd64-unsigned",
            "--no-install",
            "--kvm",
            "--smp",
            "4",
            "--memory",
            "2G",
        ])
        .unwrap()
        .unwrap();
        let vm = t.guest.vm();
        assert_eq!(vm.timeout, Duration::from_secs(1), "at least a second");
        assert_eq!(vm.kernel.as_deref(), Some("linux-image-6.1.0-9-amd64-unsigned"));
        assert_eq!((vm.install, vm.kvm, vm.smp, vm.memory.as_str()), (false, true, 4, "2G"));
    }

    #[test]
    fn bad_guest_options_are_errors_that_name_the_option() {
        for (args, name) in [
            (&["--timeout", "soon"][..], "--timeout"),
            (&["--timeout", "-5"], "--timeout"),
            (&["--smp", "0"], "--smp"),
            (&["--smp", "two"], "--smp"),
            (&["--memory", "lots"], "--memory"),
            (&["--memory", "1GB"], "--memory"),
            (&["--memory", "0"], "--memory"),
            (&["--memory", "0G"], "--memory"),
            (&["--memory", "+1G"], "--memory"),
            (&["--memory", "G"], "--memory"),
            (&["--kernel"], "--kernel"),
            (&["--frobnicate"], "--frobnicate"),
        ] {
            let e = parse::<Task>(args).unwrap_err().to_string();
            assert!(e.contains(name), "{args:?}: {e}");
        }
        for ok in ["512", "2048M", "1g", "4T"] {
            assert!(parse::<Task>(&["--memory", ok]).is_ok(), "{ok}");
        }
    }

    #[test]
    fn lists_are_one_value_checked_and_a_later_option_replaces_them() {
        let t: Task = parse(&["--parts", "c,a,c", "--zbd-tests", "7,1-3"]).unwrap().unwrap();
        assert_eq!(t.parts.as_deref(), Some(&["a".to_string(), "c".to_string()][..]));
        assert_eq!(t.zbd_tests.unwrap().0, [1, 2, 3, 7]);
        let t: Task = parse(&["--parts", "a", "--parts", "b"]).unwrap().unwrap();
        assert_eq!(t.parts.unwrap().to_string(), "b");
        let e = parse::<Task>(&["--parts", "a,d"]).unwrap_err().to_string();
        assert!(e.contains("unknown part \"d\""), "{e}");
        for bad in ["x", "3-1", "1,,2"] {
            assert!(parse::<Task>(&["--zbd-tests", bad]).is_err(), "{bad}");
        }
        assert!(parse::<Task>(&["--help"]).unwrap().is_none());
    }
}
