//! Device time: the clock every latency and throughput figure is taken on.
//!
//! A latency is `now_ns` right after its completion was polled minus
//! `now_ns` right before it was submitted; a throughput is completed
//! commands over device time elapsed. On a virtual-clock emulator device
//! time is simulated (polling with nothing due jumps it to the next
//! completion), so figures do not depend on how busy the host is; on every
//! other device it is a monotonic wall clock.
//!
//! Both come from the device layer: `ZonedDevice::now_ns` and
//! `ZonedDevice::clock_name`; the suite reads time nowhere else.

use zns_device::ZonedDevice;

/// Device time in nanoseconds (see the module documentation).
#[inline]
pub fn now_ns(dev: &dyn ZonedDevice) -> u64 {
    dev.now_ns()
}

/// The device's clock: `"virtual"` (simulated time) or `"real"`.
pub fn clock_name(dev: &dyn ZonedDevice) -> &'static str {
    dev.clock_name()
}

/// True when device time only advances as the device completes commands:
/// a host that waits with nothing outstanding would wait forever.
pub fn is_virtual(dev: &dyn ZonedDevice) -> bool {
    clock_name(dev) == "virtual"
}
