//! The abstract atomics the sanitizer's protocols are written against, and
//! the two locks built from them.
//!
//! Every protocol (the thread-state reader/writer lock, the lock-free shadow
//! cell update and its inflation, the multi-cell atomic path, the clock
//! buffer's seqlock) goes through [`AtomicFamily`], so one source runs on
//! `core::sync::atomic` (PTX and the CPU backend) and, in the tests, on
//! `loom`'s model-checked atomics.
//!
//! Lock order (documented once, relied on everywhere): a sanitizer thread's
//! own [`ThreadStateHeader`](crate::abi::ThreadStateHeader) lock, then shadow
//! cells / inflated records in ascending address order (a record's lock
//! covers its chain records), then one thread's release-history lock (see
//! [`crate::history`]; never two at once), then the pool's free-list lock
//! (a leaf: its holder takes no other lock), the lock-free pool allocator
//! and the report buffer. Nothing waits for a lock that comes earlier in that order while
//! holding a later one, so no cycle can form.

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

/// A test-and-set spin lock in one 32-bit word (0 = free, 1 = held); used
/// for the pool's free list.
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

/// The lock of an inflated shadow record, in one 32-bit word that also
/// admits *raisers*: the atomic-set fast path ([`crate::atomic_set`])
/// raising an entry without the lock. Bit 0: held. Bit 1: a locker waits
/// for raisers to leave. Bits 2..18: raisers inside. Bits 18..32: the
/// version, advanced by every hold.
///
/// A locker takes the word only when no raiser is inside, and a raiser
/// enters only when the word is neither held nor awaited and still has the
/// version it read before it looked at the record: both on this one word,
/// so the raiser's entry is either in before the lock is taken (the
/// raiser's exit is a release the lock's acquire reads) or not written at
/// all (the raiser takes the locked path instead). No fence is needed.
pub struct RecordLock;

impl RecordLock {
    const HELD: u32 = 1;
    const WAITING: u32 = 2;
    const RAISER: u32 = 1 << 2;
    const RAISERS: u32 = 0xffff << 2;
    const VERSION: u32 = 1 << 18;

    /// Spins until the lock is taken (waiting for raisers inside to
    /// leave); returns the word as it was taken.
    #[inline]
    pub fn lock<F: AtomicFamily>(word: &F::U32) -> u32 {
        loop {
            let v = word.load(MemOrder::Relaxed);
            let next = if v & Self::HELD != 0 {
                None
            } else if v & Self::RAISERS != 0 {
                // Keep new raisers out until those inside have left.
                Some((v | Self::WAITING, false))
            } else {
                Some(((v | Self::HELD) & !Self::WAITING, true))
            };
            if let Some((n, taken)) = next {
                let ok = n == v
                    || word
                        .compare_exchange(v, n, MemOrder::Acquire, MemOrder::Relaxed)
                        .is_ok();
                if ok && taken {
                    return v;
                }
            }
            F::spin();
        }
    }

    /// Releases a lock taken with [`RecordLock::lock`], advancing the
    /// version (raisers that tried to enter meanwhile may still be
    /// counted: they leave on their own).
    #[inline]
    pub fn unlock<F: AtomicFamily>(word: &F::U32) {
        word.fetch_add(Self::VERSION.wrapping_sub(Self::HELD), MemOrder::Release);
    }

    /// The version of a word read from the lock.
    #[inline(always)]
    pub const fn version(v: u32) -> u32 {
        v / Self::VERSION
    }

    /// Whether a raiser may try to enter the word read as `seen`.
    #[inline(always)]
    pub const fn open(seen: u32) -> bool {
        seen & (Self::HELD | Self::WAITING) == 0
    }

    /// Enters as a raiser if the word is still open at `seen`'s version;
    /// false (and nothing changed) otherwise. A raiser that entered must
    /// [`RecordLock::leave`].
    #[inline]
    pub fn enter<F: AtomicFamily>(word: &F::U32, seen: u32) -> bool {
        let v = word.fetch_add(Self::RAISER, MemOrder::Acquire);
        if Self::open(v) && Self::version(v) == Self::version(seen) {
            return true;
        }
        word.fetch_sub(Self::RAISER, MemOrder::Relaxed);
        false
    }

    /// Leaves after [`RecordLock::enter`], publishing what the raiser wrote
    /// to the next locker.
    #[inline]
    pub fn leave<F: AtomicFamily>(word: &F::U32) {
        word.fetch_sub(Self::RAISER, MemOrder::Release);
    }
}

/// A reader/writer spin lock in one 32-bit word: bit 31 is the writer, the
/// low bits count readers. Clock changes of a sanitizer thread (acquire,
/// release, epoch bump, kernel hand-off, every atomic and fence) take the
/// write side; the read side gives a consistent view of the clock to
/// whoever needs one (the engine's plain accesses do without it, see
/// [`crate::clock::ThreadClocks::fresh_epoch_unlocked`], because 256 GPU
/// threads taking a shared lock per access cost more than the check).
pub struct RwSpinLock;

impl RwSpinLock {
    /// The writer bit.
    pub const WRITER: u32 = 1 << 31;

    /// Takes the lock shared.
    #[inline]
    pub fn read_lock<F: AtomicFamily>(word: &F::U32) {
        loop {
            let s = word.load(MemOrder::Relaxed);
            if s & Self::WRITER == 0
                && word
                    .compare_exchange(s, s + 1, MemOrder::Acquire, MemOrder::Relaxed)
                    .is_ok()
            {
                return;
            }
            F::spin();
        }
    }

    /// Releases a shared hold.
    #[inline]
    pub fn read_unlock<F: AtomicFamily>(word: &F::U32) {
        word.fetch_sub(1, MemOrder::Release);
    }

    /// Takes the lock exclusively (waits for readers to drain).
    #[inline]
    pub fn write_lock<F: AtomicFamily>(word: &F::U32) {
        while word
            .compare_exchange(0, Self::WRITER, MemOrder::Acquire, MemOrder::Relaxed)
            .is_err()
        {
            F::spin();
        }
    }

    /// Releases an exclusive hold.
    #[inline]
    pub fn write_unlock<F: AtomicFamily>(word: &F::U32) {
        // Readers cannot enter while the writer bit is set, so the word is
        // exactly WRITER here.
        word.store(0, MemOrder::Release);
    }
}
