//! Vector clocks, epochs and the clock buffer of one sanitizer thread,
//! as views over the thread state's atomic words.
//!
//! A thread's *epoch* is its own entry of its vector clock. Epochs start at
//! 1 (0 means "no access") and advance lazily: publishing the clock (a
//! release, a release fence, a kernel exit) sets
//! [`PUBLISHED`](crate::abi::ThreadStateHeader::PUBLISHED), and the next access bumps the
//! epoch first, so accesses after a release are never covered by its
//! snapshot while back-to-back releases with nothing between them share one
//! epoch and one snapshot (the [`DIRTY`](crate::abi::ThreadStateHeader::DIRTY) bit says
//! whether the clock changed since the last snapshot).
//!
//! The clock buffer is a ring of `clock_buffer_size` snapshots. A release
//! stores a *token* (1-based publication count) in the shadow; an acquire
//! reads the snapshot back through a seqlock: the writer announces the new
//! head before overwriting a slot, the reader checks the head after reading,
//! and a snapshot already overwritten is a
//! [`ClockBufferExhausted`](crate::abi::ReportKind::ClockBufferExhausted)
//! error, never a guess.

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::ThreadStateHeader as H;
use crate::atomic::{AtomicFamily, AtomicU32Ops, RwSpinLock};

/// The largest epoch a thread may reach; one more is an
/// [`EpochOverflow`](crate::abi::ReportKind::EpochOverflow).
pub const MAX_EPOCH: u32 = u32::MAX - 1;

/// Which pending clock a relaxed read from a release feeds: the one an
/// acquire fence of device scope consumes (releaser on the same device) or
/// the one only a system-scope fence consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingLevel {
    /// Releaser on the reader's device.
    Device = 0,
    /// Releaser on another device.
    System = 1,
}

/// Why a clock operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockError {
    /// The thread's epoch would pass [`MAX_EPOCH`].
    EpochOverflow(u32),
    /// The snapshot named by the token was overwritten (or never existed).
    SnapshotGone(u32),
}

/// A view of one thread state: header, vector clock, pending clocks and
/// clock buffer, laid out as [`crate::abi::thread_state_words`] says.
pub struct ThreadClocks<'a, F: AtomicFamily> {
    words: &'a [F::U32],
    num_threads: usize,
    buffer_slots: u32,
}

impl<'a, F: AtomicFamily> ThreadClocks<'a, F> {
    /// A view over `words` (at least `thread_state_words(num_threads, buffer_slots)` long).
    #[inline]
    pub fn new(words: &'a [F::U32], num_threads: u32, buffer_slots: u32) -> Self {
        debug_assert!(words.len() >= crate::abi::thread_state_words(num_threads, buffer_slots));
        ThreadClocks {
            words,
            num_threads: num_threads as usize,
            buffer_slots,
        }
    }

    #[inline(always)]
    fn word(&self, i: usize) -> &F::U32 {
        &self.words[i]
    }

    #[inline(always)]
    fn header(&self, i: usize) -> u32 {
        self.word(i).load(MemOrder::Relaxed)
    }

    #[inline(always)]
    fn set_header(&self, i: usize, v: u32) {
        self.word(i).store(v, MemOrder::Relaxed)
    }

    /// The thread-state lock word.
    #[inline(always)]
    pub fn lock_word(&self) -> &F::U32 {
        self.word(H::LOCK_WORD)
    }

    /// The thread id stored in the header.
    #[inline(always)]
    pub fn tid(&self) -> u32 {
        self.header(H::TID_WORD)
    }

    /// Entry `j` of the vector clock.
    #[inline(always)]
    pub fn get(&self, j: u32) -> u32 {
        self.word(H::WORDS + j as usize).load(MemOrder::Relaxed)
    }

    #[inline(always)]
    fn set(&self, j: u32, v: u32) {
        self.word(H::WORDS + j as usize).store(v, MemOrder::Relaxed)
    }

    #[inline(always)]
    fn pending_word(&self, level: PendingLevel, j: usize) -> &F::U32 {
        self.word(H::WORDS + (1 + level as usize) * self.num_threads + j)
    }

    #[inline(always)]
    fn slot_word(&self, token: u32, j: usize) -> &F::U32 {
        let slot = ((token - 1) % self.buffer_slots) as usize;
        self.word(H::WORDS + (3 + slot) * self.num_threads + j)
    }

    /// Resets the state of thread `tid`: epoch 1, everything else empty.
    /// Not concurrent with any other use of the state.
    pub fn init(&self, tid: u32) {
        for w in self.words.iter().take(crate::abi::thread_state_words(
            self.num_threads as u32,
            self.buffer_slots,
        )) {
            w.store(0, MemOrder::Relaxed);
        }
        self.set_header(H::TID_WORD, tid);
        self.set(tid, 1);
        self.set_header(H::DIRTY_WORD, H::DIRTY);
    }

    /// Takes the read side of the thread-state lock, first bumping the
    /// epoch if it was published (plain accesses run under this).
    pub fn lock_shared_fresh(&self, tid: u32) -> Result<(), ClockError> {
        loop {
            RwSpinLock::read_lock::<F>(self.lock_word());
            if self.header(H::DIRTY_WORD) & H::PUBLISHED == 0 {
                return Ok(());
            }
            RwSpinLock::read_unlock::<F>(self.lock_word());
            RwSpinLock::write_lock::<F>(self.lock_word());
            let r = self.fresh_epoch(tid);
            RwSpinLock::write_unlock::<F>(self.lock_word());
            r?;
        }
    }

    /// Releases [`ThreadClocks::lock_shared_fresh`].
    #[inline]
    pub fn unlock_shared(&self) {
        RwSpinLock::read_unlock::<F>(self.lock_word());
    }

    /// Prepares a plain access without holding the lock across it: starts a
    /// new epoch if the current one was published (under the write lock,
    /// once per publication) and returns the epoch to record.
    ///
    /// Plain accesses then read vector-clock entries without the lock. A
    /// clock change made concurrently by another GPU thread of the same
    /// sanitizer thread may be seen in part; each entry only grows, and
    /// that thread is unordered with this access unless the program orders
    /// them (a barrier, or an atomic, which takes the write lock), in which
    /// case the change is complete and visible: a partial view can only
    /// hide a race between GPU threads of one SM, which the sanitizer
    /// cannot see anyway, never invent one.
    pub fn fresh_epoch_unlocked(&self, tid: u32) -> Result<u32, ClockError> {
        if self.word(H::DIRTY_WORD).load(MemOrder::Relaxed) & H::PUBLISHED != 0 {
            RwSpinLock::write_lock::<F>(self.lock_word());
            let r = self.fresh_epoch(tid);
            RwSpinLock::write_unlock::<F>(self.lock_word());
            r?;
        }
        Ok(self.get(tid))
    }

    /// Takes the write side and bumps a published epoch (clock changes run under this).
    pub fn lock_exclusive_fresh(&self, tid: u32) -> Result<(), ClockError> {
        RwSpinLock::write_lock::<F>(self.lock_word());
        let r = self.fresh_epoch(tid);
        if r.is_err() {
            RwSpinLock::write_unlock::<F>(self.lock_word());
        }
        r
    }

    /// Takes the write side without touching the epoch.
    #[inline]
    pub fn lock_exclusive(&self) {
        RwSpinLock::write_lock::<F>(self.lock_word());
    }

    /// Releases the write side.
    #[inline]
    pub fn unlock_exclusive(&self) {
        RwSpinLock::write_unlock::<F>(self.lock_word());
    }

    /// Under the write lock: if the current epoch was published, start a new one.
    fn fresh_epoch(&self, tid: u32) -> Result<(), ClockError> {
        let flags = self.header(H::DIRTY_WORD);
        if flags & H::PUBLISHED != 0 {
            let e = self.get(tid);
            if e >= MAX_EPOCH {
                return Err(ClockError::EpochOverflow(e));
            }
            self.set(tid, e + 1);
            self.set_header(H::DIRTY_WORD, H::DIRTY);
        }
        Ok(())
    }

    /// Under the write lock: marks the current epoch published without a
    /// snapshot (a kernel exit publishes into the stream ring instead).
    pub fn mark_published(&self) {
        let flags = self.header(H::DIRTY_WORD);
        self.set_header(H::DIRTY_WORD, flags | H::PUBLISHED);
    }

    /// Under the write lock: publishes the vector clock into the clock
    /// buffer and returns its token; reuses the last token when the clock
    /// has not changed since.
    pub fn publish(&self) -> u32 {
        let flags = self.header(H::DIRTY_WORD);
        let last = self.header(H::LAST_TOKEN_WORD);
        if flags & H::DIRTY == 0 && last != 0 {
            self.set_header(H::DIRTY_WORD, flags | H::PUBLISHED);
            return last;
        }
        let token = self.header(H::HEAD_WORD).wrapping_add(1).max(1);
        // Announce first (seqlock): a reader of the snapshot this slot held
        // sees the new head after its read and reports the snapshot gone.
        self.word(H::HEAD_WORD).store(token, MemOrder::Relaxed);
        F::fence(MemOrder::Release);
        for j in 0..self.num_threads {
            let v = self.get(j as u32);
            self.slot_word(token, j).store(v, MemOrder::Relaxed);
        }
        self.set_header(H::LAST_TOKEN_WORD, token);
        self.set_header(H::DIRTY_WORD, H::PUBLISHED);
        token
    }

    /// Reads snapshot `token` of *this* thread state (another thread's,
    /// typically) and hands each entry to `sink`. Lock-free; fails when the
    /// slot was (or may have been) overwritten meanwhile.
    pub fn read_snapshot(
        &self,
        token: u32,
        mut sink: impl FnMut(u32, u32),
    ) -> Result<(), ClockError> {
        let fresh = |head: u32| token != 0 && token <= head && head - token < self.buffer_slots;
        if !fresh(self.word(H::HEAD_WORD).load(MemOrder::Acquire)) {
            return Err(ClockError::SnapshotGone(token));
        }
        for j in 0..self.num_threads {
            sink(j as u32, self.slot_word(token, j).load(MemOrder::Relaxed));
        }
        F::fence(MemOrder::Acquire);
        if !fresh(self.word(H::HEAD_WORD).load(MemOrder::Relaxed)) {
            return Err(ClockError::SnapshotGone(token));
        }
        Ok(())
    }

    /// Under the write lock: `VC[j] = max(VC[j], v)`; marks the clock dirty
    /// when it grew.
    #[inline]
    pub fn join_entry(&self, j: u32, v: u32) {
        if v > self.get(j) {
            self.set(j, v);
            let flags = self.header(H::DIRTY_WORD);
            self.set_header(H::DIRTY_WORD, flags | H::DIRTY);
        }
    }

    /// Under the write lock: joins entry `j` of a pending clock.
    #[inline]
    pub fn join_pending(&self, level: PendingLevel, j: u32, v: u32) {
        let w = self.pending_word(level, j as usize);
        if v > w.load(MemOrder::Relaxed) {
            w.store(v, MemOrder::Relaxed);
        }
    }

    /// Under the write lock: joins a pending clock into the vector clock
    /// (what an acquire fence does).
    pub fn acquire_pending(&self, level: PendingLevel) {
        for j in 0..self.num_threads {
            let v = self.pending_word(level, j).load(MemOrder::Relaxed);
            self.join_entry(j as u32, v);
        }
    }

    /// Under the write lock: forgets fence state at a CTA entry (a fence in
    /// one CTA never pairs with an atomic of another).
    pub fn reset_fence_state(&self) {
        self.set_header(H::FENCE_DEVICE_WORD, 0);
        self.set_header(H::FENCE_SYSTEM_WORD, 0);
        for j in 0..self.num_threads {
            self.pending_word(PendingLevel::Device, j)
                .store(0, MemOrder::Relaxed);
            self.pending_word(PendingLevel::System, j)
                .store(0, MemOrder::Relaxed);
        }
    }

    /// Tokens of the last release fences: `(device or wider, system)`.
    #[inline]
    pub fn fence_tokens(&self) -> (u32, u32) {
        (
            self.header(H::FENCE_DEVICE_WORD),
            self.header(H::FENCE_SYSTEM_WORD),
        )
    }

    /// Under the write lock: records a release fence's token.
    #[inline]
    pub fn set_fence_tokens(&self, device: u32, system: u32) {
        self.set_header(H::FENCE_DEVICE_WORD, device);
        self.set_header(H::FENCE_SYSTEM_WORD, system);
    }

    /// Next value of the seeded eviction counter.
    #[inline]
    pub fn next_counter(&self) -> u32 {
        self.word(H::COUNTER_WORD).fetch_add(1, MemOrder::Relaxed)
    }

    /// Vector clock length.
    #[inline(always)]
    pub fn num_threads(&self) -> u32 {
        self.num_threads as u32
    }
}

/// `dst[j] = max(dst[j], src[j])` over two atomic clocks (event hand-off:
/// an event records a stream's clock; a wait joins it into the waiting
/// stream's ring slot).
pub fn join_clock<F: AtomicFamily>(dst: &[F::U32], src: &[F::U32]) {
    for (d, s) in dst.iter().zip(src.iter()) {
        d.fetch_max(s.load(MemOrder::Relaxed), MemOrder::Relaxed);
    }
}
