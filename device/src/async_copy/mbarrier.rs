//! mbarriers: barriers in shared memory that count arrivals and the bytes
//! of the asynchronous copies that complete on them, phase by phase.

use crate::arch::{async_imp, imp};
use crate::hooks::Active;
use crate::sanitizer::{Plain, Sanitizer, SharedAccess};
use crate::shared_mem::SharedArray;
use core::marker::PhantomData;
use core::panic::Location;
use vigil_shared::{AccessKind, Ordering, Scope};

/// `N` mbarriers in the block's shared memory, as declared by
/// [`mbarriers!`](crate::mbarriers!); [`Mbarriers::get`] hands out one.
#[derive(Clone, Copy, Debug)]
pub struct Mbarriers<const N: usize, S = Plain> {
    words: SharedArray<u64, N, S>,
}

impl<const N: usize, S: Sanitizer> Mbarriers<N, S> {
    #[doc(hidden)]
    /// The barriers stored in `words` (what `mbarriers!` expands to).
    #[inline(always)]
    pub fn __from_words(words: SharedArray<u64, N, S>) -> Self {
        Mbarriers { words }
    }

    /// Barrier `i`. Panics (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> Mbarrier<S> {
        let word = self.words.elements().span(i, 1, AccessKind::AtomicRmw);
        Mbarrier {
            word,
            _s: PhantomData,
        }
    }

    /// The number of barriers.
    pub const fn len(&self) -> usize {
        N
    }

    /// True when `N == 0`.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }
}

/// One mbarrier of the block (`cuda::barrier` / CUTLASS's
/// `ClusterTransactionBarrier` at block scope).
///
/// A phase completes when its arrivals (the `count` of [`init`](Self::init))
/// are in and the transaction bytes expected in it
/// ([`arrive_expect_tx`](Self::arrive_expect_tx),
/// [`expect_tx`](Self::expect_tx)) have been delivered by the bulk and
/// tensor copies completing on the barrier; the next phase then starts.
/// Threads wait for a phase by its parity ([`wait_parity`](Self::wait_parity)):
/// phase 0, 2, 4, ... has parity 0, phase 1, 3, ... parity 1, and a wait
/// for the parity of the phase before the current one returns at once.
/// An arrival releases the arriving thread's earlier accesses (at block
/// scope) and a wait that returns acquires them.
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::async_copy::fence_proxy_async_shared;
///
/// /// Block `b` copies its 1,024 elements of `x` into shared memory with one
/// /// bulk copy and writes their sum to `out[b]`.
/// #[kernel]
/// pub fn tile_sum(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
///     let tile = shared_array!(f32; 1024; align 128);
///     let full = mbarriers!(1);
///     let bar = full.get(0);
///     let b = block_idx().x as usize;
///     if thread_idx().x == 0 {
///         bar.init(1);
///         fence_proxy_async_shared(); // the init, before the copy's bytes
///         bar.arrive_expect_tx(4 * 1024);
///         tile.copy_bulk_from(0, x, b * 1024, 1024, bar);
///     }
///     sync_threads(); // the init, before anyone waits
///     bar.wait_parity(0);
///     if thread_idx().x == 0 {
///         let mut s = 0.0;
///         for i in 0..1024 {
///             s += tile.load(i);
///         }
///         out.store(b, s);
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Mbarrier<S = Plain> {
    /// Its 8 bytes, as the sanitizer sees an atomic access of them.
    word: SharedAccess,
    _s: PhantomData<S>,
}

impl<S: Sanitizer> Mbarrier<S> {
    /// Its generic address.
    #[inline(always)]
    pub(crate) fn address(&self) -> usize {
        self.word.addr
    }

    /// The sanitizer's view of an access of `kind` to the barrier.
    #[inline(always)]
    #[track_caller]
    fn seen(&self, kind: AccessKind) {
        imp::shared_access::<Active>(|| SharedAccess { kind, ..self.word })
    }

    /// Initialises the barrier for `count` arrivals per phase (1 to
    /// 2^20 - 1), in phase 0 (`mbarrier.init.shared::cta.b64`). One thread
    /// initialises; a [`sync_threads`](crate::sync_threads) shows the
    /// barrier to the others, and
    /// [`fence_proxy_async_shared`](crate::async_copy::fence_proxy_async_shared)
    /// to the copies that will complete on it.
    #[inline(always)]
    #[track_caller]
    pub fn init(&self, count: u32) {
        self.seen(AccessKind::Write);
        Active::mbarrier_arrival(phase_key(self.address(), 0));
        // SAFETY: the handle's word is an mbarrier's 8 aligned bytes of
        // the block's shared memory.
        unsafe { async_imp::mbarrier_init(self.address(), count) }
    }

    /// Arrives: one of the phase's `count` arrivals
    /// (`mbarrier.arrive.shared::cta.b64`, release at block scope).
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        self.seen(AccessKind::AtomicRmw);
        Active::mbarrier_arrival(phase_key(self.address(), 0));
        // SAFETY: as in `init`.
        unsafe { async_imp::mbarrier_arrive(self.address()) }
    }

    /// Adds `bytes` to the phase's expected transaction bytes, then
    /// arrives (`mbarrier.arrive.expect_tx.shared::cta.b64`): the thread
    /// that issues a phase's copies usually does this once with their
    /// total size.
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx(&self, bytes: u32) {
        self.seen(AccessKind::AtomicRmw);
        Active::mbarrier_arrival(phase_key(self.address(), 0));
        // SAFETY: as in `init`.
        unsafe { async_imp::mbarrier_arrive_expect_tx(self.address(), bytes) }
    }

    /// Adds `bytes` to the phase's expected transaction bytes without
    /// arriving (`mbarrier.expect_tx.relaxed.cta.shared::cta.b64`).
    #[inline(always)]
    #[track_caller]
    pub fn expect_tx(&self, bytes: u32) {
        self.seen(AccessKind::AtomicRmw);
        // SAFETY: as in `init`.
        unsafe { async_imp::mbarrier_expect_tx(self.address(), bytes) }
    }

    /// True once the phase of parity `parity` (0 or 1) has completed
    /// (`mbarrier.try_wait.parity.shared::cta.b64`, acquire at block scope
    /// when it returns true). May wait a little before it says false.
    #[inline(always)]
    #[track_caller]
    pub fn try_wait_parity(&self, parity: u32) -> bool {
        self.seen(AccessKind::AtomicRmw);
        // SAFETY: as in `init`.
        let done = unsafe { async_imp::mbarrier_try_wait_parity(self.address(), parity) };
        if done {
            // The copies and arrivals of the phase happened before what the
            // thread does next: an acquire for the sanitizer's block checks.
            let loc = Location::caller();
            Active::fence(Ordering::Acquire, Scope::Block, loc);
            Active::block_acquire(phase_key(self.address(), parity));
        }
        done
    }

    /// Waits until the phase of parity `parity` has completed (a loop on
    /// [`try_wait_parity`](Self::try_wait_parity)). A wait for a phase
    /// that never completes hangs on the GPU; the CPU backend ends the
    /// launch with a livelock error naming this line.
    #[inline(always)]
    #[track_caller]
    pub fn wait_parity(&self, parity: u32) {
        while !self.try_wait_parity(parity) {}
    }
}

/// The name of an mbarrier's phase for the sanitizer
/// ([`Sanitizer::block_acquire`], `vigil_shared::bulk_copies::phase_key`).
#[inline(always)]
fn phase_key(address: usize, parity: u32) -> u32 {
    u32::from(vigil_shared::bulk_copies::phase_key(address as u64, parity))
}

/// Declares `N` mbarriers in the block's shared memory and evaluates to
/// their [`Mbarriers`] handle: `let full = mbarriers!(STAGES);`. Each
/// needs an [`init`](Mbarrier::init) before use. Inside a `#[kernel]`
/// body they carry the kernel's sanitizer, as a
/// [`shared_array!`](crate::shared_array!) does.
#[macro_export]
macro_rules! mbarriers {
    (@sanitizer $s:ty; $n:expr) => {
        $crate::async_copy::Mbarriers::<{ $n }, $s>::__from_words(
            $crate::shared_array!(@sanitizer $s; u64; $n),
        )
    };
    ($n:expr) => {
        $crate::mbarriers!(@sanitizer $crate::Plain; $n)
    };
}
