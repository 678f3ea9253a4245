//! Time inside a kernel: the device's global timer.

use crate::arch::imp;

/// Nanoseconds on the device's global timer (CUDA's `%globaltimer`): a
/// clock every SM of one GPU shares, so that two stamps of one thread,
/// block or launch on that GPU give the time between them. It counts in
/// nanoseconds but ticks more coarsely (about a microsecond on recent
/// GPUs); stamps of two GPUs do not compare. On the CPU backend:
/// nanoseconds of the host's monotonic clock since the process first
/// read it.
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::timer::global_timer;
///
/// #[kernel]
/// pub fn timed(out: GlobalSliceMut<u64>) {
///     let start = global_timer();
///     sync_threads();
///     if thread_idx().x == 0 {
///         out.store(block_idx().x as usize, global_timer() - start);
///     }
/// }
/// ```
#[inline(always)]
pub fn global_timer() -> u64 {
    imp::global_timer()
}
