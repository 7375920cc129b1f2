//! The device conformance suite (the one every backend runs) on tenant
//! namespaces: logical zones keep the ZNS state machine, reports, limits
//! and queue semantics, in elastic and in static mode.

mod common;
#[path = "../../device/tests/conformance/mod.rs"]
#[macro_use]
mod conformance;

macro_rules! suite {
    ($name:ident, $config:expr, $tenant:literal) => {
        mod $name {
            use super::conformance as c;

            fn dev() -> std::sync::Arc<dyn zns_device::ZonedDevice> {
                super::common::instance(&$config).tenant($tenant).expect("tenant")
            }

            suite_tests!();
        }
    };
}

suite!(elastic, crate::common::CONFIG, "a");
suite!(
    elastic_second_tenant,
    crate::common::CONFIG.replace("active_zones = 6", "active_zones = 5"),
    "a"
);
suite!(static_striping, format!("mode = \"static\"\n{}", crate::common::CONFIG), "a");
