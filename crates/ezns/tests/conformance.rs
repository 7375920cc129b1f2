//! The device conformance suite (the one every backend runs) on tenant
//! namespaces: logical zones keep the ZNS state machine, reports, limits
//! and queue semantics, in elastic and in static mode.

mod common;
#[path = "../../device/tests/conformance/mod.rs"]
mod conformance;

macro_rules! suite {
    ($name:ident, $config:expr, $tenant:literal) => {
        mod $name {
            use super::conformance as c;

            fn dev() -> std::sync::Arc<dyn zns_device::ZonedDevice> {
                super::common::instance(&$config).tenant($tenant).expect("tenant")
            }

            #[test]
            fn geometry_and_full_report() {
                c::geometry_and_full_report(dev().as_ref());
            }
            #[test]
            fn zone_state_transitions() {
                c::zone_state_transitions(dev().as_ref());
            }
            #[test]
            fn select_all_actions() {
                c::select_all_actions(dev().as_ref());
            }
            #[test]
            fn invalid_transitions_and_targets() {
                c::invalid_transitions_and_targets(dev().as_ref());
            }
            #[test]
            fn write_append_read_round_trips() {
                c::write_append_read_round_trips(dev().as_ref());
            }
            #[test]
            fn plain_memory_buffers() {
                c::plain_memory_buffers(dev().as_ref());
            }
            #[test]
            fn report_filters_and_partial_reports() {
                c::report_filters_and_partial_reports(dev().as_ref());
            }
            #[test]
            fn write_errors_reach_the_caller() {
                c::write_errors_reach_the_caller(dev().as_ref());
            }
            #[test]
            fn resource_limits() {
                c::resource_limits(dev().as_ref());
            }
            #[test]
            fn write_zeroes_and_flush() {
                c::write_zeroes_and_flush(dev().as_ref());
            }
            #[test]
            fn copy() {
                c::copy(dev().as_ref());
            }
            #[test]
            fn zone_extensions() {
                c::zone_extensions(dev().as_ref());
            }
            #[test]
            fn async_at_depth() {
                c::async_at_depth(dev().as_ref());
            }
            #[test]
            fn blocking_calls_keep_async_completions() {
                c::blocking_calls_keep_async_completions(dev().as_ref());
            }
            #[test]
            fn queue_full() {
                c::queue_full(dev().as_ref());
            }
            #[test]
            fn bad_submissions_return_the_buffer() {
                c::bad_submissions_return_the_buffer(dev().as_ref());
            }
            #[test]
            fn queues_on_several_threads() {
                c::queues_on_several_threads(dev().as_ref());
            }
            #[test]
            fn per_lba_metadata() {
                c::per_lba_metadata(dev().as_ref());
            }
            #[test]
            fn every_check_in_order_on_one_device() {
                c::run_all(dev().as_ref());
            }
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
