//! Every form of device URI, described once. `zns --help` prints these
//! rows, and the README and docs/cli.md carry them as a Markdown table; the
//! command line's tests check that both agree with this list, and the tests
//! below that every form parses and that every scheme, option and profile
//! the parser accepts is listed.

/// One form of device URI: what a user writes and what it opens.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UriForm {
    /// The form, placeholders in capitals (`emu:PROFILE,media=null|ram`).
    pub form: &'static str,
    /// What it opens, in Markdown (names in backticks).
    pub device: &'static str,
    /// A URI of this form; it parses.
    pub example: &'static str,
}

/// Every form of device URI the parser accepts, in the order help texts
/// list them.
pub const URI_FORMS: &[UriForm] = &[
    UriForm {
        form: "emu:",
        device: "the embedded emulator: the `zn540` profile, data in RAM (`emu` alone too)",
        example: "emu:",
    },
    UriForm {
        form: "emu:PROFILE",
        device: "a built-in profile: `tiny`, `small`, `small-zone`, `zn540`, the conventional \
                 twins `zn540-conv` and `small-conv`, and their Flexible Data Placement twins \
                 `zn540-fdp` and `small-fdp` (`zns emu profiles` describes each)",
        example: "emu:small-zone",
    },
    UriForm {
        form: "emu:profile=FILE.toml",
        device: "a profile read from a TOML file: one `zns emu fit` made from a \
                 characterization, or a built-in one printed by `zns emu show-profile` and edited",
        example: "emu:profile=my-drive.toml,media=null",
    },
    UriForm {
        form: "emu:PROFILE,op=PERCENT",
        device: "a conventional (or FDP) twin with `PERCENT` % over-provisioning (spare / \
                 exposed, 1 to 1000; the profiles have 7, an enterprise drive's 28); refused on ZNS \
                 profiles",
        example: "emu:zn540-conv,op=28",
    },
    UriForm {
        form: "emu:PROFILE,zrwa=SIZE/GRANULARITY/RESOURCES",
        device: "zone random write areas on the zoned namespace: windows of `SIZE` blocks \
                 committed in units of `GRANULARITY` blocks, on up to `RESOURCES` zones at once, \
                 with explicit commits (the built-in profiles have none)",
        example: "emu:tiny,zrwa=16/4/2",
    },
    UriForm {
        form: "emu:PROFILE,media=null|ram",
        device: "`null` keeps no data (reads return zeroes); `ram`, the default, keeps it in \
                 memory until the command ends",
        example: "emu:tiny,media=null",
    },
    UriForm {
        form: "emu:PROFILE,timing=on|off",
        device: "the timing model (default: on when the profile has one: `small-zone`, `zn540`, \
                 `zn540-conv`, `zn540-fdp`)",
        example: "emu:zn540,timing=off",
    },
    UriForm {
        form: "emu:PROFILE,clock=virtual|real",
        device: "the timed emulator's clock (default `virtual`; `zns serve` uses `real`)",
        example: "emu:zn540,clock=real",
    },
    UriForm {
        form: "emu:PROFILE,dilation=F",
        device: "the timed emulator's modelled durations stretched `F` times (`F` ≥ 1), for a \
                 host `F` times slower than the one the model stands for; figures measured on it \
                 are divided by `F` (`zns characterize` does)",
        example: "emu:zn540,clock=real,dilation=4",
    },
    UriForm {
        form: "emu:PROFILE,trace=FILE,trace_events=N",
        device: "a trace of every command, flash operation, channel transfer and zone state \
                 change of the timed emulator, written to `FILE` when the device closes (JSON \
                 trace-event format for ui.perfetto.dev), keeping the last `N` events (default \
                 500000); see observability.md",
        example: "emu:zn540,trace=run.json,trace_events=200000",
    },
    UriForm {
        form: "emu:PROFILE,zones=N",
        device: "the profile's zoned namespace cut (or grown) to `N` zones, geometry and timing \
                 unchanged",
        example: "emu:zn540,zones=16",
    },
    UriForm {
        form: "emu:PROFILE,metadata=N",
        device: "`N` bytes of separate per-LBA metadata per block (0: none; `small` has 16)",
        example: "emu:tiny,metadata=16",
    },
    UriForm {
        form: "emu:PROFILE,lba=BYTES",
        device: "`BYTES`-byte blocks, a power of two from 512 to 65536 (`lba=512`: the ZN540's \
                 512 B format), zone size and capacity in bytes unchanged",
        example: "emu:zn540,lba=512",
    },
    UriForm {
        form: "emu:file=PATH",
        device: "a persistent emulated device made by `zns emu create PATH`",
        example: "emu:file=dev.img",
    },
    UriForm {
        form: "emu:file=PATH,profile=NAME",
        device: "the same, checking that the image holds profile `NAME`",
        example: "emu:file=dev.img,profile=small",
    },
    UriForm {
        form: "pcie:DDDD:BB:DD.F",
        device: "the user-space driver on a PCIe NVMe controller (the function unbound from \
                 the kernel, or bound to `uio_pci_generic`: root; or bound to `vfio-pci`: access \
                 to its `/dev/vfio/N`)",
        example: "pcie:0000:00:04.0",
    },
    UriForm {
        form: "pcie:DDDD:BB:DD.F,transport=vfio|sysfs|auto",
        device: "the same through VFIO only (the function bound to `vfio-pci`, DMA through \
                 the IOMMU) or sysfs `resource0` and huge pages only; `auto` (the default) \
                 picks VFIO when the function is bound to `vfio-pci`",
        example: "pcie:0000:00:04.0,transport=vfio",
    },
    UriForm {
        form: "ng:/dev/ngXnY",
        device: "io_uring NVMe passthrough on the kernel's generic namespace device",
        example: "ng:/dev/ng0n1",
    },
    UriForm {
        form: "zbd:/dev/nvmeXnY",
        device: "the kernel's zoned block device: zone ioctls, data through io_uring",
        example: "zbd:/dev/nvme0n1",
    },
    UriForm {
        form: "zbd:/dev/nvmeXnY,io=uring|psync",
        device: "the same; `psync`: data through `pread`/`pwrite`",
        example: "zbd:/dev/nvme0n1,io=psync",
    },
    UriForm {
        form: "tcp:HOST:PORT/NQN[/NSID]",
        device: "a zoned namespace (the first, or `NSID`; an NVM namespace `NSID` names opens \
                 without zones) of an NVMe/TCP target: `zns serve`, Linux nvmet, SPDK",
        example: "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target",
    },
    UriForm {
        form: "tcp:HOST:PORT/NQN[/NSID],digest=header|data|both|none",
        device: "the same, with CRC32C digests on PDU headers, data or both",
        example: "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target/1,digest=both",
    },
    UriForm {
        form: "tcp:HOST:PORT/NQN[/NSID],poll_us=N",
        device: "the same; a queue waiting for the target spins on its socket for up to N µs \
                 before it sleeps: lower latency, one busy core per waiting queue",
        example: "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target,poll_us=50",
    },
    UriForm {
        form: "tcp:HOST:PORT/NQN[/NSID],hostnqn=NQN",
        device: "the same, connecting as host `NQN` (default `nqn.2014-08.io.znskit:host`)",
        example: "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target,hostnqn=nqn.2014-08.io.znskit:a",
    },
    UriForm {
        form: "tcp:...,dhchap_secret=DHHC-1:..[,dhchap_ctrl_secret=DHHC-1:..]",
        device: "the same, authenticating every queue with DH-HMAC-CHAP when the target asks \
                 (with the controller's secret, the target must prove itself too); the URI as \
                 shown, in errors and results, says `(hidden)` for secrets",
        example: "tcp:127.0.0.1:4420/nqn.2026-11.io.znskit:target,\
                  dhchap_secret=DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:,\
                  dhchap_ctrl_secret=DHHC-1:02:\
                  ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj9AQUJDREVGR0hJSktMTU5PhcdKRQ==:",
    },
    UriForm {
        form: "ezns:config=PATH,tenant=NAME",
        device: "a tenant namespace of elastic logical zones over the base device the \
                 configuration file names (crate `zns-ezns`, registered by `zns`)",
        example: "ezns:config=tenants.toml,tenant=a",
    },
];

/// How options combine, said after the list.
pub const URI_OPTIONS_NOTE: &str =
    "Options combine, separated by commas (`emu:zn540,zones=16,clock=real`); \
     an unknown or repeated option is an error.";

/// The forms as a Markdown table, `| URI | device |`, one row per form,
/// `|` inside a cell escaped.
pub fn markdown_table() -> String {
    let mut s = String::from("| URI | device |\n|---|---|\n");
    for f in URI_FORMS {
        s += &format!("| `{}` | {} |\n", f.form.replace('|', "\\|"), f.device.replace('|', "\\|"));
    }
    s
}

/// The forms as plain text for a help screen: each form, then what it
/// opens, then [`URI_OPTIONS_NOTE`]; no Markdown.
pub fn help_text() -> String {
    let mut s = String::new();
    for f in URI_FORMS {
        s += &format!("  {}\n      {}\n", f.form, plain(f.device));
    }
    s += &plain(URI_OPTIONS_NOTE);
    s
}

/// `text` without Markdown's backticks.
pub fn plain(text: &str) -> String {
    text.replace('`', "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uri::{DeviceUri, EMULATOR_OPTIONS, SCHEMES, ZONED_BLOCK_OPTIONS};
    use zns_emulator::profile::Profile;

    fn row(form: &str) -> &'static UriForm {
        URI_FORMS.iter().find(|f| f.form == form).unwrap_or_else(|| panic!("no row {form}"))
    }

    #[test]
    fn every_example_parses_as_its_form() {
        // Layered schemes parse once their crate registers them.
        fn opener(uri: &str) -> crate::Result<std::sync::Arc<dyn crate::ZonedDevice>> {
            Err(crate::DeviceError::uri(uri, "test opener"))
        }
        crate::uri::register_scheme("ezns", "ezns:config=PATH,tenant=NAME", opener);
        for f in URI_FORMS {
            let u: DeviceUri = f.example.parse().unwrap_or_else(|e| panic!("{}: {e}", f.example));
            let scheme = f.form.split(':').next().unwrap();
            assert!(f.example.starts_with(&format!("{scheme}:")), "{f:?}");
            let kind = match u {
                DeviceUri::Emulator(_) => "emu",
                DeviceUri::Pcie(_) => "pcie",
                DeviceUri::Passthrough(_) => "ng",
                DeviceUri::ZonedBlock(_) => "zbd",
                DeviceUri::Tcp(_) => "tcp",
                DeviceUri::Layered { .. } => "ezns",
            };
            assert_eq!(kind, scheme, "{f:?}");
            // Each option of the form is in the example.
            for opt in f.form.split(',').skip(1) {
                let key = opt.split('=').next().unwrap();
                assert!(f.example.contains(&format!(",{key}=")), "{f:?}");
            }
        }
    }

    #[test]
    fn every_scheme_option_and_profile_is_listed() {
        for scheme in SCHEMES {
            assert!(
                URI_FORMS.iter().any(|f| f.form.starts_with(&format!("{scheme}:"))),
                "{scheme}"
            );
        }
        let emu_keys: Vec<&str> = URI_FORMS
            .iter()
            .filter(|f| f.form.starts_with("emu:"))
            .flat_map(|f| f.form[4..].split(','))
            .filter_map(|o| o.split_once('=').map(|(k, _)| k))
            .collect();
        for key in EMULATOR_OPTIONS {
            assert!(emu_keys.contains(key), "emu option {key} is not listed");
        }
        for key in ZONED_BLOCK_OPTIONS {
            assert!(URI_FORMS.iter().any(|f| f.form.starts_with("zbd:") && f.form.contains(key)));
        }
        assert!(URI_FORMS.iter().any(|f| f.form.starts_with("tcp:") && f.form.contains("digest=")));
        let profiles = row("emu:PROFILE").device;
        let listed = profiles.matches('`').count() / 2 - 1; // minus `zns emu profiles`
        assert_eq!(listed, Profile::built_in_names().count(), "{profiles}");
        let timing = row("emu:PROFILE,timing=on|off").device;
        for name in Profile::built_in_names() {
            assert!(profiles.contains(&format!("`{name}`")), "profile {name} not listed");
            let timed = Profile::by_name(name).unwrap().timing.is_some();
            assert_eq!(timing.contains(&format!("`{name}`")), timed, "timing of {name}");
        }
    }

    #[test]
    fn the_table_and_the_help_text_carry_every_form() {
        let table = markdown_table();
        assert_eq!(table.lines().count(), URI_FORMS.len() + 2);
        assert!(table.contains("| `emu:PROFILE,media=null\\|ram` | `null` keeps"), "{table}");
        let help = help_text();
        for f in URI_FORMS {
            assert!(help.contains(&format!("  {}\n      {}\n", f.form, plain(f.device))));
        }
        assert!(!help.contains('`'), "{help}");
    }
}
