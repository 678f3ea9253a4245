//! The atomics the CPU backend's race engine runs on: `core`'s, with a
//! spin that gives the processor away now and then.
//!
//! The backend's block threads can outnumber the cores (a loaded CI
//! machine runs several test processes at once), and the engine's waits
//! are for another thread's next step: a record lock, or the site an
//! access notes right after installing itself, which a racing access
//! waits for a bounded number of spins before reporting without it. A
//! pure spin can use up that bound while the thread it waits for is not
//! running; yielding every few spins lets it run.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering as MemOrder};
use vigil_shared::atomic::{AtomicFamily, CoreAtomics};

/// `core`'s atomics, with a yielding [`AtomicFamily::spin`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HostAtomics;

/// Spins between two yields of the processor.
const SPINS_PER_YIELD: u32 = 64;

thread_local! {
    /// The calling thread's spins since its last yield.
    static SPINS: Cell<u32> = const { Cell::new(0) };
}

impl AtomicFamily for HostAtomics {
    type U32 = AtomicU32;
    type U64 = AtomicU64;
    /// 4,096 yields: a time slice of the thread it waits for, and more
    /// (with 4,096 spins, a worker descheduled between installing its
    /// access and noting its site left a report without its earlier
    /// location about once in 30 runs of the scale suite's tile
    /// scenarios on two cores).
    const NEXT_STEP_SPINS: u32 = 1 << 18;

    #[inline(always)]
    fn fence(order: MemOrder) {
        CoreAtomics::fence(order)
    }

    #[inline]
    fn spin() {
        let turn = SPINS.with(|n| {
            let next = (n.get() + 1) % SPINS_PER_YIELD;
            n.set(next);
            next == 0
        });
        if turn {
            std::thread::yield_now();
        } else {
            core::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_yields_every_few_spins_and_keeps_count_per_thread() {
        SPINS.with(|n| n.set(0));
        for _ in 0..SPINS_PER_YIELD - 1 {
            HostAtomics::spin();
        }
        assert_eq!(SPINS.with(Cell::get), SPINS_PER_YIELD - 1);
        HostAtomics::spin();
        assert_eq!(SPINS.with(Cell::get), 0, "the yield restarts the count");
        std::thread::spawn(|| assert_eq!(SPINS.with(Cell::get), 0))
            .join()
            .unwrap();
    }
}
