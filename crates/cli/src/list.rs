//! `zns list`: what devices a user can open, and with which URI.

use std::io::Write;

use anyhow::Result;
use zns_device::discovery::{self, USER_SPACE_DRIVERS};
use zns_emulator::profile::Profile;

pub fn run(out: &mut dyn Write) -> Result<()> {
    writeln!(out, "Emulated devices (in process; add ,media=null to keep no data):")?;
    for name in Profile::built_in_names() {
        let p = Profile::by_name(name)?;
        writeln!(out, "  {:<14} {}", format!("emu:{name}"), p.description)?;
    }
    writeln!(out, "  {:<14} a persistent device made by `zns emu create PATH`", "emu:file=PATH")?;

    writeln!(out, "\nNVMe controllers driven by the kernel (/sys/class/nvme):")?;
    let ctrls = discovery::kernel_controllers();
    if ctrls.is_empty() {
        writeln!(out, "  none")?;
    }
    for c in &ctrls {
        writeln!(
            out,
            "  {:<8} {} {}  {} (serial {}, firmware {})",
            c.name, c.transport, c.address, c.model, c.serial, c.firmware
        )?;
        for n in &c.namespaces {
            let generic =
                n.generic_device.as_deref().map(|g| format!(" /dev/{g}")).unwrap_or_default();
            let kind = if n.is_zoned() { "zoned (host-managed)" } else { "conventional" };
            let size = match (n.sectors, n.logical_block_size) {
                (Some(s), Some(b)) => {
                    format!(", {} blocks of {b} bytes", s * 512 / u64::from(b.max(1)))
                }
                _ => String::new(),
            };
            writeln!(out, "    /dev/{}{generic}: {kind}{size}", n.block_device)?;
        }
    }

    writeln!(out, "\nNVMe PCI functions (class 0108h) for the user-space driver:")?;
    let funcs = discovery::pci_functions();
    if funcs.is_empty() {
        writeln!(out, "  none")?;
    }
    for f in &funcs {
        let binding = f.driver.as_deref().unwrap_or("no driver");
        let how = if f.driver.as_deref() == Some("vfio-pci") {
            format!("open with --device {} (access to its /dev/vfio/N)", f.uri())
        } else if f.usable_by_user_space_driver() {
            format!("open with --device {} (as root)", f.uri())
        } else {
            format!(
                "bound to {binding}: unbind it (or bind it to {}) to use {}",
                USER_SPACE_DRIVERS.join(" or "),
                f.uri()
            )
        };
        writeln!(out, "  {}  {:04x}:{:04x}  {binding:<16} {how}", f.address, f.vendor, f.device)?;
    }
    Ok(())
}
