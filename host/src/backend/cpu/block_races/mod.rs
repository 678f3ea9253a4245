//! Races between threads of one block on the CPU backend: shared memory,
//! and global memory touched by two threads of a block (the engine in
//! [`super::sanitizer`] sees a whole block as one sanitizer thread, so it
//! orders those by program order and cannot see them).
//!
//! Each virtual SM runs one block at a time, all of whose threads are
//! coroutines on the SM's worker, so the state is per SM ([`BlockRaces`]),
//! behind an uncontended lock. It follows the block's barrier intervals
//! (every thread's `sync_threads` arrivals; the executor releases a barrier
//! only when every live thread waits at it, or fails the block), the warp
//! collectives the executor releases, and which of its own releases the
//! block acquired (the race engine numbers a block's releases by epochs:
//! an acquire that reads a release of the block orders every access the
//! block made up to it before every later access of the block; one that
//! reads no release of the block orders nothing in it). The per-word
//! rules are in [`shadow`]. Shared memory and global memory use
//! the same table, keyed by address: a block's shared arrays live in its
//! worker's host memory, away from the sanitizer's arena, so their words
//! never meet. Only words the block touches have an entry, so a kernel
//! pays for the shared arrays it uses, and a block's table starts empty.

mod shadow;

use shadow::BlockShadow;
pub(crate) use shadow::{Conflict, Made};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The block-level race state of every virtual SM.
pub(crate) struct BlockRaces {
    sms: Box<[Mutex<BlockShadow>]>,
}

impl BlockRaces {
    /// State for `sms` virtual SMs.
    pub(crate) fn new(sms: usize) -> Self {
        BlockRaces {
            sms: (0..sms).map(|_| Mutex::default()).collect(),
        }
    }

    fn sm(&self, smid: u32) -> MutexGuard<'_, BlockShadow> {
        self.sms[smid as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A block starts on `smid`: its table and clocks start empty.
    pub(crate) fn block_start(&self, smid: u32) {
        self.sm(smid).reset();
    }

    /// Thread `thread` (linear index) of the block on `smid` accesses
    /// `size` bytes at `addr` (as `made` says); returns the earlier
    /// accesses of its barrier interval, and the copies in flight, it
    /// races with (none, usually: no allocation then).
    pub(crate) fn access(
        &self,
        smid: u32,
        thread: u32,
        addr: u64,
        size: u64,
        made: Made,
    ) -> Vec<Conflict> {
        let mut races = Vec::new();
        self.sm(smid)
            .access(thread, addr, size, made, |c| races.push(c));
        races
    }

    /// Thread `thread` of the block on `smid` issues the block's
    /// asynchronous copy number `copy`, which accesses `size` bytes at
    /// `addr` (as `made` says) some time before it completes: checked
    /// now as the thread's access, then in flight. Returns what it races
    /// with.
    pub(crate) fn copy_issued(
        &self,
        smid: u32,
        thread: u32,
        copy: u32,
        addr: u64,
        size: u64,
        made: Made,
    ) -> Vec<Conflict> {
        let mut races = Vec::new();
        self.sm(smid)
            .copy_issued(thread, copy, addr, size, made, |c| races.push(c));
        races
    }

    /// Thread `thread` of the block on `smid` saw copy `copy` complete in
    /// the block's release epoch `release_epoch`: its accesses to the
    /// `size` bytes at `addr` are the thread's from now on.
    pub(crate) fn copy_completed(
        &self,
        smid: u32,
        thread: u32,
        copy: u32,
        addr: u64,
        size: u64,
        release_epoch: u16,
    ) {
        self.sm(smid)
            .copy_completed(thread, copy, addr, size, release_epoch);
    }

    /// Thread `thread` of the block on `smid` arrives at a barrier.
    pub(crate) fn barrier(&self, smid: u32, thread: u32) {
        self.sm(smid).barrier(thread);
    }

    /// A thread of the block on `smid` acquired the block's releases up
    /// to epoch `epoch` (0: none).
    pub(crate) fn acquired(&self, smid: u32, epoch: u16) {
        self.sm(smid).acquired(epoch);
    }

    /// A relaxed read of the block on `smid` observed its releases up to
    /// epoch `epoch` (0: none), for its next acquire fence.
    pub(crate) fn observed(&self, smid: u32, epoch: u16) {
        self.sm(smid).observed(epoch);
    }

    /// An acquire fence of a thread of the block on `smid`: what its
    /// relaxed reads observed is acquired.
    pub(crate) fn acquire_observed(&self, smid: u32) {
        self.sm(smid).acquire_observed();
    }

    /// A warp collective of the block on `smid` released `lanes` of warp
    /// `warp` (see [`BlockShadow::warp_joined`]).
    pub(crate) fn warp_joined(&self, smid: u32, warp: u32, lanes: u32, contributed: u32) {
        self.sm(smid).warp_joined(warp, lanes, contributed);
    }
}

/// The report kind of a race between an earlier access `prior` and the
/// current access `current` (the GPU runtime's rule too).
pub(crate) use vigil_shared::block::race_kind;
