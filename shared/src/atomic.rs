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
/// for raisers to leave. Bit 2: a locker that waited too long takes the
/// next turn ([`RecordLock::PATIENCE`]). Bits 3..18: raisers inside. Bits
/// 18..32: the version, advanced by every hold.
///
/// A locker takes the word only when no raiser is inside, and a raiser
/// enters only when the word is neither held nor awaited and still has the
/// version it read before it looked at the record: both on this one word,
/// so the raiser's entry is either in before the lock is taken (the
/// raiser's exit is a release the lock's acquire reads) or not written at
/// all (the raiser takes the locked path instead). No fence is needed.
///
/// Lockers that find the word held look again after a pause, and the
/// first to look once it is free takes it: on a GPU that is not a fair
/// draw. Measured on an H100, a spin lock's holder (its release store
/// locks the lock word's record once) waited 3 s, until 63 other blocks
/// polling that word gave up: their polls took the record in turn every
/// 200 µs or so, the holder's never. Hence the next-turn bit: a locker
/// that has looked [`RecordLock::PATIENCE`] times sets it (if nobody else
/// has), and from then on no other locker takes the word before it.
pub struct RecordLock;

/// What a locker does on reading the lock word ([`RecordLock::step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStep {
    /// Look again later: the word is held, or another locker has the next
    /// turn.
    Wait,
    /// Claim the next turn (set the bit), then look again.
    ClaimTurn,
    /// Keep new raisers out (set the waiting bit) until those inside have
    /// left.
    AwaitRaisers,
    /// Take the word.
    Take,
}

impl RecordLock {
    const HELD: u32 = 1;
    const WAITING: u32 = 2;
    const NEXT_TURN: u32 = 4;
    const RAISER: u32 = 1 << 3;
    const RAISERS: u32 = 0x7fff << 3;
    const VERSION: u32 = 1 << 18;

    /// Looks at a held word (about half a microsecond each on an H100,
    /// with the pause) before a locker claims the next turn: far more than
    /// 64 lockers taking turns need, so that only a locker the others keep
    /// passing by claims it.
    pub const PATIENCE: u32 = 4096;

    /// Spins until the lock is taken (waiting for raisers inside to
    /// leave); returns the word as it was taken.
    #[inline]
    pub fn lock<F: AtomicFamily>(word: &F::U32) -> u32 {
        Self::lock_with_patience::<F>(word, Self::PATIENCE)
    }

    /// [`RecordLock::lock`] claiming the next turn after `patience` looks
    /// (tests use a small one).
    #[inline]
    pub fn lock_with_patience<F: AtomicFamily>(word: &F::U32, patience: u32) -> u32 {
        let mut looks = 0u32;
        let mut my_turn = false;
        loop {
            let v = word.load(MemOrder::Relaxed);
            let flag = |bit: u32, order: MemOrder| {
                v & bit != 0
                    || word
                        .compare_exchange(v, v | bit, order, MemOrder::Relaxed)
                        .is_ok()
            };
            match Self::step(v, my_turn, looks >= patience) {
                LockStep::Wait => {}
                LockStep::ClaimTurn => my_turn = flag(Self::NEXT_TURN, MemOrder::Relaxed),
                LockStep::AwaitRaisers => {
                    flag(Self::WAITING, MemOrder::Relaxed);
                }
                LockStep::Take => {
                    let taken = (v | Self::HELD) & !(Self::WAITING | Self::NEXT_TURN);
                    if word
                        .compare_exchange(v, taken, MemOrder::Acquire, MemOrder::Relaxed)
                        .is_ok()
                    {
                        return v;
                    }
                }
            }
            looks = looks.saturating_add(1);
            F::spin();
        }
    }

    /// What a locker that read `v` does: `my_turn` when it set the
    /// next-turn bit, `impatient` when it has looked long enough to.
    #[inline(always)]
    pub const fn step(v: u32, my_turn: bool, impatient: bool) -> LockStep {
        let turn_taken = v & Self::NEXT_TURN != 0;
        if v & Self::HELD != 0 || (turn_taken && !my_turn) {
            if impatient && !turn_taken {
                LockStep::ClaimTurn
            } else {
                LockStep::Wait
            }
        } else if v & Self::RAISERS != 0 {
            LockStep::AwaitRaisers
        } else {
            LockStep::Take
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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::sync::atomic::AtomicU32;

    const HELD: u32 = RecordLock::HELD;
    const TURN: u32 = RecordLock::NEXT_TURN;

    /// Every lock word a locker can read: held or not, waiting or not,
    /// turn claimed or not, with and without raisers, at two versions.
    fn words() -> impl Iterator<Item = u32> {
        (0..8u32).flat_map(|flags| {
            [0, RecordLock::RAISER, 3 * RecordLock::RAISER]
                .into_iter()
                .flat_map(move |r| [0, 5 * RecordLock::VERSION].map(|ver| flags | r | ver))
        })
    }

    #[test]
    fn only_the_turn_owner_takes_a_word_whose_turn_is_claimed() {
        for v in words() {
            for impatient in [false, true] {
                let other = RecordLock::step(v, false, impatient);
                if v & TURN != 0 {
                    assert_eq!(
                        other,
                        LockStep::Wait,
                        "{v:#x}: a locker passed the turn owner"
                    );
                }
                if v & (HELD | TURN) == 0 {
                    assert_ne!(other, LockStep::Wait, "{v:#x}: a free word was passed by");
                }
                let owner = RecordLock::step(v, true, impatient);
                if v & HELD == 0 {
                    assert_ne!(owner, LockStep::Wait, "{v:#x}: the turn owner waited");
                }
            }
        }
    }

    #[test]
    fn a_patient_locker_never_claims_a_turn_and_an_impatient_one_claims_a_free_turn() {
        for v in words() {
            assert_ne!(RecordLock::step(v, false, false), LockStep::ClaimTurn);
            let expect_claim = v & HELD != 0 && v & TURN == 0;
            assert_eq!(
                RecordLock::step(v, false, true) == LockStep::ClaimTurn,
                expect_claim,
                "{v:#x}"
            );
        }
    }

    /// A lock held by another locker, then given up: a locker that claimed
    /// the turn meanwhile takes it before one that did not, and taking
    /// clears the turn and keeps the version.
    #[test]
    fn the_turn_owner_takes_the_word_once_it_is_given_up() {
        let word = AtomicU32::new(0);
        let before = RecordLock::lock::<CoreAtomics>(&word);
        assert_eq!(before, 0);
        // Impatient at once: it claims the turn while the word is held.
        let owner = std::thread::scope(|s| {
            let owner = s.spawn(|| RecordLock::lock_with_patience::<CoreAtomics>(&word, 0));
            while word.load(MemOrder::Relaxed) & TURN == 0 {
                std::thread::yield_now();
            }
            assert_eq!(
                RecordLock::step(word.load(MemOrder::Relaxed) & !HELD, false, false),
                LockStep::Wait,
                "another locker would take the freed word"
            );
            RecordLock::unlock::<CoreAtomics>(&word);
            owner.join().unwrap()
        });
        assert_eq!(owner & TURN, TURN, "taken from the claimed word");
        let now = word.load(MemOrder::Relaxed);
        assert_eq!(now & (HELD | TURN), HELD, "held, turn given up: {now:#x}");
        assert_eq!(RecordLock::version(now), 1, "one hold before this one");
        RecordLock::unlock::<CoreAtomics>(&word);
    }
}
