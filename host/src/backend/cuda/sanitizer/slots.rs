//! How many sanitizer slots (thread states) each SM of a device gets: as
//! many as the engine's thread-id space allows (docs/src/design/engine.md), fewer only
//! when the device's runtime-state region cannot hold their thread states.

use vigil_shared::gpu::slots_per_sm;

use crate::backend::cuda::vmm::runtime_state::RegionLayout;

/// Slots per SM for `num_sms` SMs on each of `num_ranks` devices with
/// `clock_buffer_size` snapshots per thread and `pool_records` inflated
/// records: the most the id space allows whose region fits, at least 1
/// (a region that does not fit even then is the allocator's error).
pub(crate) fn slots_per_sm_fitting(
    num_sms: u32,
    num_ranks: u32,
    clock_buffer_size: u32,
    pool_records: u32,
) -> u32 {
    let fits = |s: u32| {
        let threads = num_sms * s;
        RegionLayout::new(
            threads,
            threads * num_ranks,
            clock_buffer_size,
            pool_records,
        )
        .fits()
    };
    (1..=slots_per_sm(num_sms, num_ranks).max(1))
        .rev()
        .find(|&s| fits(s))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::gpu::THREAD_ID_LIMIT;

    #[test]
    fn an_h100_gets_every_slot_the_id_space_allows() {
        let s = slots_per_sm_fitting(132, 1, 32, 1 << 16);
        assert_eq!(s, THREAD_ID_LIMIT / 132);
    }

    #[test]
    fn a_big_clock_buffer_falls_back_to_fewer_slots() {
        let full = slots_per_sm(132, 1);
        let s = slots_per_sm_fitting(132, 1, 256, 1 << 16);
        assert!(s >= 1 && s < full, "{s} of {full}");
        let threads = 132 * s;
        assert!(RegionLayout::new(threads, threads, 256, 1 << 16).fits());
    }
}
