//! The ring all-reduce bandwidth harness (`vigil_bench::all_reduce`) on
//! the CPU backend: two and three simulated devices, plain and sanitized,
//! tiny buffers. It checks every rank's sums against the host's (an error
//! otherwise) and, sanitized, that no race is reported; a group of one
//! device is refused, never given a figure; one launch times each step.

use std::time::Duration;
use vigil::{Context, SymmetricGroup};
use vigil_bench::all_reduce::{measure, AllReducePlan};
use vigil_bench::ring_phases::measure_phases;

fn group(world: usize, sanitize: bool) -> SymmetricGroup {
    let builder = Context::builder()
        .sanitize(sanitize)
        .cpu_workers(1)
        .launch_timeout(Some(Duration::from_secs(120)));
    SymmetricGroup::cpu(world, builder).expect("a simulated group")
}

#[test]
fn the_harness_sums_right_and_times_every_launch_plain_and_sanitized() {
    for world in [2, 3] {
        for sanitize in [false, true] {
            let plan = AllReducePlan::smoke(world * 40 + 1);
            let r = measure(&group(world, sanitize), &plan)
                .unwrap_or_else(|e| panic!("world {world}, sanitized {sanitize}: {e}"));
            assert_eq!((r.world, r.sanitized), (world as u32, sanitize));
            // Rounded down to whole chunks: 40 elements of 4 bytes per rank.
            assert_eq!(r.bytes, (world * 40 * 4) as u64);
            assert_eq!(r.launches, 2, "two batches of one launch");
            assert!(r.median_ms > 0.0 && r.bus_gbps() > 0.0, "{r:?}");
        }
    }
}

#[test]
fn a_group_of_one_device_gets_no_figure() {
    let e = measure(&group(1, false), &AllReducePlan::smoke(64)).unwrap_err();
    assert!(e.to_string().contains("at least two devices"), "{e}");
}

#[test]
fn one_launch_is_timed_step_by_step_plain_and_sanitized() {
    for world in [2, 3] {
        for sanitize in [false, true] {
            let plan = AllReducePlan::smoke(world * 40);
            let steps = measure_phases(&group(world, sanitize), &plan)
                .unwrap_or_else(|e| panic!("world {world}, sanitized {sanitize}: {e}"));
            assert_eq!(steps.len(), 2 * (world - 1), "scatter and gather steps");
            for s in &steps {
                assert!(s.loop_median_ms <= s.loop_max_ms, "{s:?}");
                assert!(s.barrier_median_ms <= s.barrier_max_ms, "{s:?}");
                assert!(s.loop_max_ms > 0.0 || s.barrier_max_ms > 0.0, "{s:?}");
            }
        }
    }
}
