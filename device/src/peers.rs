//! Symmetric memory in a kernel: [`Peers`], every rank's buffer of one
//! symmetric allocation, and [`group_barrier`] (or [`group_barrier_at`],
//! one of several over one buffer), the barrier of a group of devices over
//! per-rank flags.
//!
//! A symmetric allocation gives every rank (device) of a group a buffer of
//! the same length. A kernel on rank `r` receives all of them as one
//! [`Peers`] argument: [`Peers::local`] is its own buffer,
//! [`Peers::peer`]`(p)` rank `p`'s, reached directly (peer-to-peer
//! memory). Accesses to a peer's buffer are ordinary global accesses: the
//! sanitizer checks them against that rank's own kernels. Ordering across
//! devices needs [`Scope::System`] release/acquire (or a system-scope
//! fence): a [`Scope::Device`] atomic only orders threads of one device.
//!
//! ```ignore
//! #[kernel]
//! pub fn put_next(data: Peers<u32>) {
//!     let next = (data.rank() + 1) % data.world();
//!     data.peer(next).store(thread_idx().x as usize, data.rank());
//! }
//! ```

use crate::global::{out_of_bounds, GlobalSliceMut};
use crate::sanitizer::{Plain, Sanitizer};
use core::marker::PhantomData;
use vigil_shared::{Ordering, Scope};

/// The most ranks a [`Peers`] argument carries (a kernel parameter has a
/// fixed size: one pointer per rank).
pub const MAX_RANKS: usize = 8;

/// Every rank's buffer of one symmetric allocation, as a kernel on rank
/// [`Peers::rank`] sees them: `world` buffers of `len` elements each.
///
/// Lowered to PTX as [`MAX_RANKS`] pointers (unused ones null), the length
/// (`u64`), the rank and the world size (`u32` each).
pub struct Peers<T, S = Plain> {
    ptrs: [*mut T; MAX_RANKS],
    len: usize,
    rank: u32,
    world: u32,
    _s: PhantomData<S>,
}

impl<T, S> Clone for Peers<T, S> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, S> Copy for Peers<T, S> {}

impl<T, S> core::fmt::Debug for Peers<T, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Peers")
            .field("ptrs", &&self.ptrs[..(self.world as usize).min(MAX_RANKS)])
            .field("len", &self.len)
            .field("rank", &self.rank)
            .field("world", &self.world)
            .finish()
    }
}

impl<T, S> Peers<T, S> {
    /// The handle from each rank's buffer (`ptrs[..world]`), their common
    /// length in elements, this kernel's rank and the group's size.
    ///
    /// # Safety
    /// `world <= MAX_RANKS`, `rank < world`, and each of `ptrs[..world]`
    /// must be valid, aligned global memory for `len` elements, reachable
    /// from this device, for the whole launch.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(
        ptrs: [*mut T; MAX_RANKS],
        len: usize,
        rank: u32,
        world: u32,
    ) -> Self {
        Peers {
            ptrs,
            len,
            rank,
            world,
            _s: PhantomData,
        }
    }

    /// This kernel's rank in the group.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    #[inline(always)]
    pub fn world(&self) -> u32 {
        self.world
    }

    /// Elements in each rank's buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffers hold no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw pointers (`world` of them used).
    #[inline(always)]
    pub fn as_ptrs(&self) -> [*mut T; MAX_RANKS] {
        self.ptrs
    }

    /// Rank `rank`'s buffer. Panics (traps on the GPU) when `rank >= world`
    /// (as an index out of bounds).
    #[inline(always)]
    #[track_caller]
    pub fn peer(&self, rank: u32) -> GlobalSliceMut<T, S> {
        if rank >= self.world || rank as usize >= MAX_RANKS {
            // A peer past the group is an index past the array of peers.
            out_of_bounds(rank as usize, self.world as usize)
        }
        // SAFETY: a rank below `world` has a buffer of `len` elements
        // (`from_raw_parts`' contract).
        unsafe { GlobalSliceMut::from_raw_parts(self.ptrs[rank as usize], self.len) }
    }

    /// This rank's own buffer.
    #[inline(always)]
    #[track_caller]
    pub fn local(&self) -> GlobalSliceMut<T, S> {
        self.peer(self.rank)
    }
}

/// A barrier of every rank of a group, inside a kernel: called by one
/// thread on each rank with the same `generation` (1 for the first
/// barrier over `flags`, then 2, 3, ...), it returns on each rank once
/// every rank has called it, and orders everything each rank did before
/// it before everything any rank does after it.
///
/// `flags` is a symmetric buffer of at least `world` zeroed `u32`s, used
/// only by this barrier: rank `r` writes slot `r` of every rank's buffer
/// (a system-scope release store of `generation`), then waits until every
/// slot of its own buffer holds at least `generation` (system-scope
/// acquire loads). The other threads of a block wait for the calling one
/// with [`sync_threads`](crate::sync_threads) before and after.
///
/// ```ignore
/// if thread_idx().x == 0 {
///     group_barrier(&flags, 1);
/// }
/// sync_threads();
/// ```
#[inline(always)]
#[track_caller]
pub fn group_barrier<S: Sanitizer>(flags: &Peers<u32, S>, generation: u32) {
    group_barrier_at(flags, 0, generation);
}

/// [`group_barrier`] over the `world` flags of `flags` that start at
/// element `first`: several barriers over one symmetric buffer, each with
/// its own flags (the blocks of a multi-block kernel, block `b` of every
/// rank meeting at `first = b * world`).
#[inline(always)]
#[track_caller]
pub fn group_barrier_at<S: Sanitizer>(flags: &Peers<u32, S>, first: usize, generation: u32) {
    let me = first + flags.rank() as usize;
    for p in 0..flags.world() {
        flags
            .peer(p)
            .at(me)
            .atomic_store(generation, Ordering::Release, Scope::System);
    }
    let mine = flags.local();
    for p in 0..flags.world() as usize {
        let slot = mine.at(first + p);
        while slot.atomic_load(Ordering::Acquire, Scope::System) < generation {
            crate::arch::imp::backoff();
        }
    }
}

// `#[kernel]` declares this many pointer parameters for a `Peers` argument.
const _: () = assert!(MAX_RANKS == 8);
