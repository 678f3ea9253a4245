//! The release history beyond the clock buffer: snapshots that release
//! heads still name when their ring slot is needed again move into the
//! record pool, so a lagging acquirer reads the very snapshot it was
//! released, not the overflow clock.
//!
//! Every release head stored in a word's record holds one *reference* to
//! the snapshot it names (`Engine` takes and drops references when it
//! writes a record back: heads new to the record take one, heads gone
//! from it drop one). A ring slot's references are counted beside the
//! ring; when the slot is reused while references remain, its snapshot is
//! copied into [`SpillRecord`]s (a list per thread, searched by token) with
//! its count, and the records go back to the pool's free list when the
//! last reference goes. Only the owning thread creates heads naming its
//! snapshots, so a count can only rise under the owner's write lock: a
//! slot found unreferenced when reused stays unreferenced.
//!
//! The per-thread history lock guards the counts, the spilled list and the
//! announcement of a new ring head (so "in the ring" and "spilled" are
//! decided consistently). It comes after the thread-state and word locks
//! in the lock order and before only the pool's free-list lock. Releasers
//! without a pool (an empty slice, see [`ThreadClocks::with_pool`]), or a
//! pool with no record left, fall back to the overflow clock as before
//! (counted in [`coarsened`](crate::abi::ThreadStateHeader::coarsened)).
//! Spilled snapshots also give way to a word with release heads that finds
//! the pool full ([`ThreadClocks::drop_spilled`]): their readers coarsen
//! rather than that word failing.
//! The overflow clock still takes every overwritten snapshot, so a head
//! whose snapshot was overwritten before its reference was taken (within
//! the operation that made it, or between a release fence and the atomic
//! that makes the fence's head: fence tokens hold no reference) is only
//! coarsened.

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{
    PoolHeader, SpillRecord, ThreadStateHeader as H, RELEASE_HISTORY_FIXED_WORDS, SPILL_ENTRIES,
    THREAD_STATE_CLOCKS,
};
use crate::atomic::{AtomicFamily, AtomicU32Ops, SpinLock};
use crate::clock::ThreadClocks;
use crate::shadow::Pool;

/// The history lock's word within the release-history words.
const LOCK: usize = 0;
/// The first spilled snapshot's link (pool index + 1, 0: none).
const SPILLED: usize = 1;

impl<F: AtomicFamily> ThreadClocks<'_, F> {
    #[inline(always)]
    fn history_word(&self, i: usize) -> &F::U32 {
        let at = H::WORDS + (THREAD_STATE_CLOCKS + self.buffer_slots as usize) * self.num_threads;
        self.word(at + i)
    }

    /// The reference count of the ring slot of `token`.
    #[inline(always)]
    fn slot_refs(&self, token: u32) -> &F::U32 {
        let slot = ((token - 1) % self.buffer_slots) as usize;
        self.history_word(RELEASE_HISTORY_FIXED_WORDS + slot)
    }

    #[inline(always)]
    fn spill_pool(&self) -> Option<Pool<'_, F>> {
        (self.pool.len() >= PoolHeader::WORDS).then(|| Pool::new(self.pool))
    }

    /// Takes the history lock when the thread spills into a pool; returns
    /// whether it did.
    pub(crate) fn lock_history(&self) -> bool {
        if self.spill_pool().is_none() {
            return false;
        }
        SpinLock::lock::<F>(self.history_word(LOCK));
        true
    }

    /// Releases [`ThreadClocks::lock_history`].
    pub(crate) fn unlock_history(&self) {
        SpinLock::unlock::<F>(self.history_word(LOCK));
    }

    /// Under the write and history locks, before the slot of `token` is
    /// reused: spills the snapshot it held if references remain (as many
    /// records as the pool gives; none: the overflow clock stands in).
    // Cold (the ring wrapped under named snapshots): kept out of line so
    // the hooks that reach it stay small on the GPU.
    #[inline(never)]
    pub(crate) fn retire_slot(&self, token: u32) {
        let refs = self.slot_refs(token);
        let (held, victim) = (
            refs.load(MemOrder::Relaxed),
            token - self.buffer_slots.min(token),
        );
        refs.store(0, MemOrder::Relaxed);
        let Some(pool) = self.spill_pool() else {
            return;
        };
        if held == 0 || victim == 0 {
            return;
        }
        let Some(first) = pool.allocate_chain() else {
            return;
        };
        let rec = pool.record(first);
        rec[SpillRecord::TOKEN_WORD].store(victim, MemOrder::Relaxed);
        rec[SpillRecord::REFS_WORD].store(held, MemOrder::Relaxed);
        let (mut at, mut j) = (first, 0);
        while j < self.num_threads {
            if j > 0 {
                let Some(next) = pool.allocate_chain() else {
                    self.free_spilled(&pool, first);
                    return;
                };
                pool.set_chain_next(at, next + 1);
                at = next;
            }
            let rec = pool.record(at);
            for k in 0..SPILL_ENTRIES.min(self.num_threads - j) {
                let v = self.slot_word(victim, j + k).load(MemOrder::Relaxed);
                rec[SpillRecord::ENTRY_WORD + k].store(v, MemOrder::Relaxed);
            }
            j += SPILL_ENTRIES;
        }
        let list = self.history_word(SPILLED);
        rec[SpillRecord::NEXT_SNAPSHOT_WORD].store(list.load(MemOrder::Relaxed), MemOrder::Relaxed);
        list.store(first + 1, MemOrder::Relaxed);
    }

    /// Gives the records of the spilled snapshot starting at `first` back.
    fn free_spilled(&self, pool: &Pool<'_, F>, first: u32) {
        let mut link = first + 1;
        while link != 0 {
            let next = pool.chain_next(link - 1);
            pool.free(link - 1);
            link = next;
        }
    }

    /// Changes the reference count of this thread's snapshot `token` by
    /// `delta` (+1: a head naming it was stored, by the owner only; -1: one
    /// was dropped, by anyone), giving a spilled snapshot's records back
    /// when its last reference goes. A snapshot neither in the ring nor
    /// spilled has no count.
    // Cold (the ring wrapped under named snapshots): kept out of line so
    // the hooks that reach it stay small on the GPU.
    #[inline(never)]
    pub fn change_refs(&self, token: u32, delta: i32) {
        if token == 0 || !self.lock_history() {
            return;
        }
        let head = self.word(H::HEAD_WORD).load(MemOrder::Relaxed);
        let step = |w: &F::U32| {
            let v = w.load(MemOrder::Relaxed).saturating_add_signed(delta);
            w.store(v, MemOrder::Relaxed);
            v
        };
        if self.is_fresh(token, head) {
            step(self.slot_refs(token));
        } else if let Some(pool) = self.spill_pool() {
            if let Some((link, first)) = self.find_spilled(&pool, token) {
                let rec = pool.record(first);
                if step(&rec[SpillRecord::REFS_WORD]) == 0 {
                    let next = rec[SpillRecord::NEXT_SNAPSHOT_WORD].load(MemOrder::Relaxed);
                    link.store(next, MemOrder::Relaxed);
                    self.free_spilled(&pool, first);
                }
            }
        }
        self.unlock_history();
    }

    /// Under the history lock: spilled snapshot `token`'s first record, and
    /// the word linking to it (the list head or the previous snapshot's
    /// `next_snapshot`).
    fn find_spilled<'s>(&'s self, pool: &Pool<'s, F>, token: u32) -> Option<(&'s F::U32, u32)> {
        let mut link = self.history_word(SPILLED);
        loop {
            let first = link.load(MemOrder::Relaxed).checked_sub(1)?;
            let rec = pool.record(first);
            if rec[SpillRecord::TOKEN_WORD].load(MemOrder::Relaxed) == token {
                return Some((link, first));
            }
            link = &rec[SpillRecord::NEXT_SNAPSHOT_WORD];
        }
    }

    /// Reads spilled snapshot `token` into `sink`; false when it is not
    /// spilled (gone: the caller joins the overflow clock).
    // Cold (the ring wrapped under named snapshots): kept out of line so
    // the hooks that reach it stay small on the GPU.
    #[inline(never)]
    pub(crate) fn read_spilled(&self, token: u32, mut sink: impl FnMut(u32, u32)) -> bool {
        if !self.lock_history() {
            return false;
        }
        let found = self.spill_pool().and_then(|pool| {
            let (_, mut at) = self.find_spilled(&pool, token)?;
            let mut j = 0;
            while j < self.num_threads {
                let part = pool.record(at);
                for k in 0..SPILL_ENTRIES.min(self.num_threads - j) {
                    sink(
                        (j + k) as u32,
                        part[SpillRecord::ENTRY_WORD + k].load(MemOrder::Relaxed),
                    );
                }
                j += SPILL_ENTRIES;
                at = pool.chain_next(at).wrapping_sub(1);
            }
            Some(())
        });
        self.unlock_history();
        found.is_some()
    }

    /// Gives all of this thread's spilled snapshots back to the pool (their
    /// readers fall back to the overflow clock, which holds them); returns
    /// whether there were any.
    #[inline(never)]
    pub fn drop_spilled(&self) -> bool {
        if !self.lock_history() {
            return false;
        }
        let list = self.history_word(SPILLED);
        let mut link = list.load(MemOrder::Relaxed);
        let any = link != 0;
        list.store(0, MemOrder::Relaxed);
        if let Some(pool) = self.spill_pool() {
            while link != 0 {
                let next =
                    pool.record(link - 1)[SpillRecord::NEXT_SNAPSHOT_WORD].load(MemOrder::Relaxed);
                self.free_spilled(&pool, link - 1);
                link = next;
            }
        }
        self.unlock_history();
        any
    }

    /// Snapshots of this thread spilled into the pool (for tests and
    /// statistics).
    pub fn spilled_snapshots(&self) -> u32 {
        let Some(pool) = self.spill_pool() else {
            return 0;
        };
        let mut n = 0;
        let mut link = self.history_word(SPILLED).load(MemOrder::Relaxed);
        while link != 0 {
            n += 1;
            link = pool.record(link - 1)[SpillRecord::NEXT_SNAPSHOT_WORD].load(MemOrder::Relaxed);
        }
        n
    }
}
