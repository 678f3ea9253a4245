//! The abstract atomics the sanitizer's protocols are written against, and
//! a spin lock built from them.
//!
//! Every protocol of the race engine (line headers, split words and their
//! records, the record pool, the snapshot arena, a CTA's synchronisation
//! state) and of the same-block layer goes through [`AtomicFamily`], so
//! one source runs on `core::sync::atomic` (PTX and the CPU backend) and,
//! in the tests, on `loom`'s model-checked atomics. The engine's lock
//! order is in [`crate::race::atomic`].

use core::sync::atomic::Ordering as MemOrder;

/// A 32-bit atomic word.
pub trait AtomicU32Ops {
    /// Atomic load.
    fn load(&self, order: MemOrder) -> u32;
    /// Atomic store.
    fn store(&self, value: u32, order: MemOrder);
    /// Strong compare-and-exchange.
    fn compare_exchange(
        &self,
        current: u32,
        new: u32,
        success: MemOrder,
        failure: MemOrder,
    ) -> Result<u32, u32>;
    /// Atomic add, returning the previous value.
    fn fetch_add(&self, value: u32, order: MemOrder) -> u32;
    /// Atomic subtract, returning the previous value.
    fn fetch_sub(&self, value: u32, order: MemOrder) -> u32;
    /// Atomic maximum, returning the previous value.
    fn fetch_max(&self, value: u32, order: MemOrder) -> u32;
}

/// A 64-bit atomic word (one compact shadow cell).
pub trait AtomicU64Ops {
    /// Atomic load.
    fn load(&self, order: MemOrder) -> u64;
    /// Atomic store.
    fn store(&self, value: u64, order: MemOrder);
    /// Strong compare-and-exchange.
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: MemOrder,
        failure: MemOrder,
    ) -> Result<u64, u64>;
    /// Atomic (wrapping) add, returning the previous value.
    fn fetch_add(&self, value: u64, order: MemOrder) -> u64;
    /// Atomic bitwise or, returning the previous value.
    fn fetch_or(&self, value: u64, order: MemOrder) -> u64;
    /// Atomic bitwise and, returning the previous value.
    fn fetch_and(&self, value: u64, order: MemOrder) -> u64;
}

/// A family of atomic types plus the two primitives the protocols need
/// besides them: a fence and a polite spin.
pub trait AtomicFamily {
    /// The 32-bit atomic of this family.
    type U32: AtomicU32Ops;
    /// The 64-bit atomic of this family.
    type U64: AtomicU64Ops;
    /// A memory fence.
    fn fence(order: MemOrder);
    /// Called in every spin loop (loom needs a yield here to terminate).
    fn spin();
    /// Spins a wait for another thread's very next step lasts before it
    /// gives up (a site noted right after the access it names: see
    /// `race::check::settled_site`). A GPU thread takes that step within
    /// a few hundred cycles; a host thread can lose its processor between
    /// the two steps for a whole time slice, so a family whose threads
    /// can be descheduled waits longer.
    const NEXT_STEP_SPINS: u32 = 4096;
    /// The cell at `first` and the one right after it, each read relaxed:
    /// two single-copy-atomic loads, not one snapshot of both. A platform
    /// with a paired load issues them as one access (one round trip where
    /// two dependent loads would take two).
    ///
    /// # Safety
    /// `first` and `first + 1` must be live cells of one allocation, and
    /// `first` 16-aligned.
    #[inline(always)]
    unsafe fn load_pair_relaxed(first: *const Self::U64) -> [u64; 2] {
        // SAFETY: forwarded from the caller.
        unsafe {
            [
                (*first).load(MemOrder::Relaxed),
                (*first.add(1)).load(MemOrder::Relaxed),
            ]
        }
    }
}

/// `core::sync::atomic`: what the PTX build and the CPU backend use.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreAtomics;

macro_rules! impl_core_u32 {
    ($t:ty) => {
        impl AtomicU32Ops for $t {
            #[inline(always)]
            fn load(&self, order: MemOrder) -> u32 {
                <$t>::load(self, order)
            }
            #[inline(always)]
            fn store(&self, value: u32, order: MemOrder) {
                <$t>::store(self, value, order)
            }
            #[inline(always)]
            fn compare_exchange(
                &self,
                current: u32,
                new: u32,
                success: MemOrder,
                failure: MemOrder,
            ) -> Result<u32, u32> {
                <$t>::compare_exchange(self, current, new, success, failure)
            }
            #[inline(always)]
            fn fetch_add(&self, value: u32, order: MemOrder) -> u32 {
                <$t>::fetch_add(self, value, order)
            }
            #[inline(always)]
            fn fetch_sub(&self, value: u32, order: MemOrder) -> u32 {
                <$t>::fetch_sub(self, value, order)
            }
            #[inline(always)]
            fn fetch_max(&self, value: u32, order: MemOrder) -> u32 {
                <$t>::fetch_max(self, value, order)
            }
        }
    };
}
impl_core_u32!(core::sync::atomic::AtomicU32);

impl AtomicU64Ops for core::sync::atomic::AtomicU64 {
    #[inline(always)]
    fn load(&self, order: MemOrder) -> u64 {
        core::sync::atomic::AtomicU64::load(self, order)
    }
    #[inline(always)]
    fn store(&self, value: u64, order: MemOrder) {
        core::sync::atomic::AtomicU64::store(self, value, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: MemOrder,
        failure: MemOrder,
    ) -> Result<u64, u64> {
        core::sync::atomic::AtomicU64::compare_exchange(self, current, new, success, failure)
    }
    #[inline(always)]
    fn fetch_add(&self, value: u64, order: MemOrder) -> u64 {
        core::sync::atomic::AtomicU64::fetch_add(self, value, order)
    }
    #[inline(always)]
    fn fetch_or(&self, value: u64, order: MemOrder) -> u64 {
        core::sync::atomic::AtomicU64::fetch_or(self, value, order)
    }
    #[inline(always)]
    fn fetch_and(&self, value: u64, order: MemOrder) -> u64 {
        core::sync::atomic::AtomicU64::fetch_and(self, value, order)
    }
}

impl AtomicFamily for CoreAtomics {
    type U32 = core::sync::atomic::AtomicU32;
    type U64 = core::sync::atomic::AtomicU64;
    #[inline(always)]
    fn fence(order: MemOrder) {
        core::sync::atomic::fence(order)
    }
    #[inline(always)]
    fn spin() {
        core::hint::spin_loop()
    }
}

/// A test-and-set spin lock in one 32-bit word (0 = free, 1 = held).
pub struct SpinLock;

impl SpinLock {
    /// Spins until the lock word is taken.
    #[inline]
    pub fn lock<F: AtomicFamily>(word: &F::U32) {
        while word
            .compare_exchange(0, 1, MemOrder::Acquire, MemOrder::Relaxed)
            .is_err()
        {
            F::spin();
        }
    }

    /// Releases a lock taken with [`SpinLock::lock`].
    #[inline]
    pub fn unlock<F: AtomicFamily>(word: &F::U32) {
        word.store(0, MemOrder::Release);
    }
}
