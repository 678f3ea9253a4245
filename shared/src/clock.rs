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
//! One publication does not start an epoch: a GPU CTA's exit into its
//! launch's stream ring slot, when the slot's next CTA is of the same
//! launch ([`ThreadClocks::enter_cta`]). Nothing reads that ring slot
//! before the launch has ended (the stream's next kernel, an event, a
//! host synchronisation), and then every CTA of the launch is done, so
//! the next CTA's accesses may share the epoch. A slot's epoch then grows
//! by one per launch (and per release), not per CTA: compact cells and
//! line summaries hold epochs below `2^15`, and a grid of 262,144 small
//! CTAs (about 130 per slot of an H100's 1,980) passed that after some
//! 250 launches, after which every access of the slot took the general
//! path.
//!
//! The clock buffer is a ring of `clock_buffer_size` snapshots. A release
//! stores a *token* (1-based publication count) and the releaser's epoch in
//! the shadow; an acquire joins the snapshot with the releaser's entry
//! raised to that epoch. So a release after which only the own entry
//! changed reuses the last snapshot (the [`DIRTY`](crate::abi::ThreadStateHeader::DIRTY)
//! bit tracks changes of the other entries only): a thread publishing
//! thousands of releases without acquiring in between needs one snapshot.
//! The engine also publishes *derived* snapshots (joins of several
//! releasers' heads of one word, [`ThreadClocks::begin_snapshot`]).
//!
//! An acquire reads the snapshot back through a seqlock: the writer
//! announces the new head before overwriting a slot, the reader checks the
//! head after reading. Before a slot is overwritten, a snapshot that
//! release heads still name is copied into the record pool (see
//! [`crate::history`]), where such a reader finds it; and every snapshot
//! is joined into the thread's *overflow clock*, so a reader that finds
//! its snapshot in neither (the pool was full, or no pool was given) joins
//! the overflow clock instead: it contains the snapshot, so the acquire
//! can only be ordered after more than it should (races missed, never
//! invented); such acquires are counted in
//! [`coarsened`](crate::abi::ThreadStateHeader::coarsened).

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{AcquiredSnapshot, ThreadStateHeader as H, ACQUIRED_SNAPSHOTS};
use crate::atomic::{AtomicFamily, AtomicU32Ops, RwSpinLock};

/// The largest epoch a thread may reach; one more is an
/// [`EpochOverflow`](crate::abi::ReportKind::EpochOverflow).
pub const MAX_EPOCH: u32 = u32::MAX - 1;

/// The epoch after a published epoch `e`, or the overflow an access
/// reports.
#[inline(always)]
fn next_epoch(e: u32) -> Result<u32, ClockError> {
    if e >= MAX_EPOCH {
        Err(ClockError::EpochOverflow(e))
    } else {
        Ok(e + 1)
    }
}

/// The flags that say how the current epoch was published; a new epoch
/// clears both.
const EPOCH_PUBLISHED: u32 = H::PUBLISHED | H::EXIT_PUBLISHED;

/// Whether a CTA of launch `launch` entering a slot whose flags and
/// joined-launch word are `flags` and `joined` goes on in the slot's
/// epoch: only that launch's CTA exits published it.
#[inline(always)]
const fn continues_epoch(flags: u32, joined: u32, launch: u32) -> bool {
    joined == launch_memo(launch) && flags & EPOCH_PUBLISHED == EPOCH_PUBLISHED
}

/// What a thread state's joined-launch word holds once the slot's clock
/// joined launch `launch` (0 means none yet).
#[inline(always)]
const fn launch_memo(launch: u32) -> u32 {
    launch.wrapping_add(1)
}

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

/// A release fence's publication: snapshot token and own epoch (token 0:
/// no such fence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceRelease {
    /// Clock-buffer token.
    pub token: u32,
    /// Own epoch at the fence.
    pub epoch: u32,
}

impl FenceRelease {
    /// No fence.
    pub const NONE: FenceRelease = FenceRelease { token: 0, epoch: 0 };
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
    pub(crate) words: &'a [F::U32],
    pub(crate) num_threads: usize,
    pub(crate) buffer_slots: u32,
    /// The record pool snapshots still named by heads spill into (empty:
    /// they are only joined into the overflow clock).
    pub(crate) pool: &'a [F::U32],
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
            pool: &[],
        }
    }

    /// The same view, spilling snapshots still named by release heads into
    /// record pool `pool` ([`crate::abi::PoolHeader`] + records) when their
    /// slot is needed again, instead of only joining them into the
    /// overflow clock (see [`crate::history`]).
    #[inline]
    pub fn with_pool(self, pool: &'a [F::U32]) -> Self {
        ThreadClocks { pool, ..self }
    }

    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> &F::U32 {
        &self.words[i]
    }

    /// Word `i` of the state read, or 0 past its end (a thread id no
    /// state has: `debug_assert`ed). Not a panic: a GPU access path pays
    /// for every call it contains, taken or not, and a bounds check's
    /// panic is one.
    #[inline(always)]
    fn load(&self, i: usize) -> u32 {
        debug_assert!(i < self.words.len(), "thread-state word {i} past the state");
        self.words.get(i).map_or(0, |w| w.load(MemOrder::Relaxed))
    }

    /// Word `i` of the state written; nothing past its end (as [`Self::load`]).
    #[inline(always)]
    fn store(&self, i: usize, v: u32) {
        debug_assert!(i < self.words.len(), "thread-state word {i} past the state");
        if let Some(w) = self.words.get(i) {
            w.store(v, MemOrder::Relaxed)
        }
    }

    #[inline(always)]
    fn header(&self, i: usize) -> u32 {
        self.load(i)
    }

    #[inline(always)]
    fn set_header(&self, i: usize, v: u32) {
        self.store(i, v)
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
        self.load(H::WORDS + j as usize)
    }

    #[inline(always)]
    fn set(&self, j: u32, v: u32) {
        self.store(H::WORDS + j as usize, v)
    }

    #[inline(always)]
    fn pending_word(&self, level: PendingLevel, j: usize) -> &F::U32 {
        self.word(H::WORDS + (1 + level as usize) * self.num_threads + j)
    }

    #[inline(always)]
    fn overflow_word(&self, j: usize) -> &F::U32 {
        self.word(H::WORDS + 3 * self.num_threads + j)
    }

    #[inline(always)]
    pub(crate) fn slot_word(&self, token: u32, j: usize) -> &F::U32 {
        let slot = ((token - 1) % self.buffer_slots) as usize;
        self.word(H::WORDS + (crate::abi::THREAD_STATE_CLOCKS + slot) * self.num_threads + j)
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
        // Both loads before the branch: on a GPU they are in flight at once.
        let dirty = self.header(H::DIRTY_WORD);
        let epoch = self.get(tid);
        if dirty & H::PUBLISHED == 0 {
            return Ok(epoch);
        }
        RwSpinLock::write_lock::<F>(self.lock_word());
        let r = self.fresh_epoch(tid);
        RwSpinLock::write_unlock::<F>(self.lock_word());
        r?;
        Ok(self.get(tid))
    }

    /// The epoch thread `tid`'s next access will record, without changing
    /// anything: the current one, or the next when the current was
    /// published ([`ThreadClocks::fresh_epoch_unlocked`] starts it).
    pub fn next_access_epoch(&self, tid: u32) -> u32 {
        let e = self.get(tid);
        let published = self.header(H::DIRTY_WORD) & H::PUBLISHED != 0;
        if published && e < MAX_EPOCH {
            e + 1
        } else {
            e
        }
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
            let next = next_epoch(e)?;
            self.set(tid, next);
            // Only the own entry changed: the last snapshot still serves
            // (heads carry the epoch), so DIRTY is left as it was.
            self.set_header(H::DIRTY_WORD, flags & !EPOCH_PUBLISHED);
        }
        Ok(())
    }

    /// Under the write lock: marks the current epoch published without a
    /// snapshot (a kernel exit publishes into the stream ring instead).
    pub fn mark_published(&self) {
        let flags = self.header(H::DIRTY_WORD);
        self.set_header(H::DIRTY_WORD, (flags & !H::EXIT_PUBLISHED) | H::PUBLISHED);
    }

    /// Under the write lock, at a CTA's entry into launch `launch`: true
    /// when the clock must join the launch's inputs (the stream's previous
    /// kernel and join list), false when an earlier CTA of the same launch
    /// in this slot already joined them (joins only grow entries, so
    /// joining again would change nothing). A new launch also means a new
    /// stream ring slot, which holds nothing of this clock yet.
    pub fn enter_launch(&self, launch: u32) -> bool {
        let memo = launch_memo(launch);
        if self.header(H::JOINED_LAUNCH_WORD) == memo {
            return false;
        }
        self.set_header(H::JOINED_LAUNCH_WORD, memo);
        let flags = self.header(H::DIRTY_WORD);
        self.set_header(H::DIRTY_WORD, flags & !H::RING_CURRENT);
        true
    }

    /// Under the write lock, at a CTA's entry into launch `launch`: true
    /// when the current epoch was published by that launch's CTA exits
    /// alone ([`H::EXIT_PUBLISHED`]: its earlier CTAs in this slot, no
    /// release since), which it then unmarks, so that this CTA goes on in
    /// the epoch (see the module docs).
    pub fn continue_exit_epoch(&self, launch: u32) -> bool {
        let flags = self.header(H::DIRTY_WORD);
        let go_on = continues_epoch(flags, self.header(H::JOINED_LAUNCH_WORD), launch);
        if go_on {
            self.set_header(H::DIRTY_WORD, flags & !EPOCH_PUBLISHED);
        }
        go_on
    }

    /// Under the write lock, at a CTA's entry into launch `launch`: what
    /// [`continue_exit_epoch`](Self::continue_exit_epoch), unless it goes
    /// on in the epoch [`fresh_epoch`](Self::lock_exclusive_fresh) (an
    /// epoch that would overflow is left for the accesses to report),
    /// [`reset_fence_state`](Self::reset_fence_state) and
    /// [`enter_launch`](Self::enter_launch) do one after another, with
    /// the flags, the epoch and the joined launch read once, together (on
    /// a GPU, one round trip while the block waits, not five), and the
    /// flags written once. Returns `enter_launch`'s answer.
    pub fn enter_cta(&self, tid: u32, launch: u32) -> bool {
        let before = self.header(H::DIRTY_WORD);
        let epoch = self.get(tid);
        let joined = self.header(H::JOINED_LAUNCH_WORD);
        self.enter_cta_from(tid, launch, before, epoch, joined)
    }

    /// The CTA entry of a GPU slot's claimer, which holds the thread state
    /// alone until its block runs (nothing else takes the lock then): a
    /// state never used as `tid`'s is initialised (the host only zeroes
    /// thread states), then [`enter_cta`](Self::enter_cta), with the
    /// owner, flags, epoch and joined launch read once, together (one
    /// round trip while the block waits, and no lock's).
    pub fn enter_claimed_cta(&self, tid: u32, launch: u32) -> bool {
        let owner = self.header(H::TID_WORD);
        let before = self.header(H::DIRTY_WORD);
        let epoch = self.get(tid);
        let joined = self.header(H::JOINED_LAUNCH_WORD);
        if owner != tid || epoch == 0 {
            self.init(tid);
            return self.enter_cta(tid, launch);
        }
        self.enter_cta_from(tid, launch, before, epoch, joined)
    }

    /// [`enter_cta`](Self::enter_cta) from its three header reads.
    #[inline(always)]
    fn enter_cta_from(&self, tid: u32, launch: u32, before: u32, epoch: u32, joined: u32) -> bool {
        let memo = launch_memo(launch);
        let join = joined != memo;
        let mut flags = before;
        if continues_epoch(flags, joined, launch) {
            flags &= !EPOCH_PUBLISHED;
        } else if flags & H::PUBLISHED != 0 {
            if let Ok(next) = next_epoch(epoch) {
                self.set(tid, next);
                flags &= !EPOCH_PUBLISHED;
            }
        }
        self.set_fence_tokens(FenceRelease::NONE, FenceRelease::NONE);
        if flags & H::PENDING != 0 {
            self.clear_pending();
            flags &= !H::PENDING;
        }
        if join {
            self.set_header(H::JOINED_LAUNCH_WORD, memo);
            flags &= !H::RING_CURRENT;
        }
        if flags != before {
            self.set_header(H::DIRTY_WORD, flags);
        }
        join
    }

    /// True when the current launch's ring slot already holds every entry
    /// but the own one (see [`H::RING_CURRENT`]): a CTA exit then
    /// publishes the own entry alone. Read by all of a CTA's threads
    /// between its exit barriers, while nothing writes the flags.
    #[inline]
    pub fn ring_current(&self) -> bool {
        self.header(H::DIRTY_WORD) & H::RING_CURRENT != 0
    }

    /// Under the write lock, after a CTA exit published the clock into the
    /// current launch's ring slot: marks the epoch published (by the
    /// launch's exits alone, [`H::EXIT_PUBLISHED`], unless a snapshot
    /// published it first) and the ring current.
    pub fn mark_exit_published(&self) {
        let flags = self.header(H::DIRTY_WORD);
        // Published already and not by an exit: a snapshot (a release)
        // has this epoch, and the next CTA must not go on in it.
        let exit_only = if flags & H::PUBLISHED == 0 || flags & H::EXIT_PUBLISHED != 0 {
            H::EXIT_PUBLISHED
        } else {
            0
        };
        self.set_header(
            H::DIRTY_WORD,
            flags | H::PUBLISHED | H::RING_CURRENT | exit_only,
        );
    }

    /// Under the write lock: publishes the vector clock into the clock
    /// buffer and returns its token (heads pair it with the current epoch);
    /// reuses the last token when no entry but the own one changed since.
    pub fn publish(&self) -> u32 {
        let flags = self.header(H::DIRTY_WORD);
        let last = self.header(H::LAST_TOKEN_WORD);
        let flags = flags & !H::EXIT_PUBLISHED;
        if flags & H::DIRTY == 0 && self.is_fresh(last, self.header(H::HEAD_WORD)) {
            self.set_header(H::DIRTY_WORD, flags | H::PUBLISHED);
            return last;
        }
        let token = self.begin_snapshot();
        for j in 0..self.num_threads {
            let v = self.get(j as u32);
            self.slot_word(token, j).store(v, MemOrder::Relaxed);
        }
        self.set_header(H::LAST_TOKEN_WORD, token);
        // The snapshot is the clock now; the other flags stand.
        self.set_header(H::DIRTY_WORD, (flags & !H::DIRTY) | H::PUBLISHED);
        token
    }

    /// Under the write lock: claims the next slot of the buffer for a new
    /// snapshot and returns its token; the caller fills the slot with
    /// [`ThreadClocks::slot_store`] / [`ThreadClocks::slot_max`] before the
    /// token becomes visible to any reader. The snapshot the slot held goes
    /// into the overflow clock first.
    pub fn begin_snapshot(&self) -> u32 {
        let token = self.header(H::HEAD_WORD).wrapping_add(1).max(1);
        if token > self.buffer_slots {
            for j in 0..self.num_threads {
                let v = self.slot_word(token, j).load(MemOrder::Relaxed);
                self.overflow_word(j).fetch_max(v, MemOrder::Relaxed);
            }
        }
        // The old snapshot moves to the pool if heads still name it; the
        // history lock makes the move and the announcement one step for
        // reference holders.
        let history = self.lock_history();
        if history {
            self.retire_slot(token);
        }
        // Announce (seqlock) after the overflow clock (and the pool) took
        // the old snapshot: a reader that sees the new head falls back to
        // them.
        F::fence(MemOrder::Release);
        self.word(H::HEAD_WORD).store(token, MemOrder::Relaxed);
        F::fence(MemOrder::Release);
        if history {
            self.unlock_history();
        }
        token
    }

    /// Entry `j` of snapshot `token` (being filled) set to `v`.
    #[inline(always)]
    pub fn slot_store(&self, token: u32, j: u32, v: u32) {
        self.slot_word(token, j as usize)
            .store(v, MemOrder::Relaxed)
    }

    /// Entry `j` of snapshot `token` (being filled) raised to `v`.
    #[inline(always)]
    pub fn slot_max(&self, token: u32, j: u32, v: u32) {
        let w = self.slot_word(token, j as usize);
        if v > w.load(MemOrder::Relaxed) {
            w.store(v, MemOrder::Relaxed);
        }
    }

    #[inline(always)]
    pub(crate) fn is_fresh(&self, token: u32, head: u32) -> bool {
        token != 0 && token <= head && head - token < self.buffer_slots
    }

    /// Reads snapshot `token` of *this* thread state (another thread's,
    /// typically) and hands each entry to `sink`. Lock-free; fails when the
    /// slot was (or may have been) overwritten meanwhile.
    pub fn read_snapshot(
        &self,
        token: u32,
        mut sink: impl FnMut(u32, u32),
    ) -> Result<(), ClockError> {
        if !self.is_fresh(token, self.word(H::HEAD_WORD).load(MemOrder::Acquire)) {
            return Err(ClockError::SnapshotGone(token));
        }
        for j in 0..self.num_threads {
            sink(j as u32, self.slot_word(token, j).load(MemOrder::Relaxed));
        }
        F::fence(MemOrder::Acquire);
        if !self.is_fresh(token, self.header(H::HEAD_WORD)) {
            return Err(ClockError::SnapshotGone(token));
        }
        Ok(())
    }

    /// What a release head of this thread (snapshot `token`, own `epoch`)
    /// carries, entry by entry into `sink` (entries may come twice; sinks
    /// join). A snapshot gone from the ring is read from the pool when it
    /// was spilled there; when it is gone from both (or was overwritten
    /// while read), the overflow clock, which contains it, stands in
    /// (counted); returns false then.
    pub fn read_release(&self, token: u32, epoch: u32, mut sink: impl FnMut(u32, u32)) -> bool {
        let exact = if self.is_fresh(token, self.word(H::HEAD_WORD).load(MemOrder::Acquire)) {
            // A slot overwritten while read may have handed newer entries
            // to the sink: not exact then (counted), even if spilled.
            self.read_snapshot(token, &mut sink).is_ok()
        } else {
            // Gone before any entry was read: the pool copy is exact.
            self.read_spilled(token, &mut sink)
        };
        if !exact {
            // Pairs with the release fence before the head announcement
            // that made the snapshot gone: the overflow clock holds it.
            F::fence(MemOrder::Acquire);
            for j in 0..self.num_threads {
                sink(j as u32, self.overflow_word(j).load(MemOrder::Relaxed));
            }
            self.word(H::COARSENED_WORD).fetch_add(1, MemOrder::Relaxed);
        }
        sink(self.tid(), epoch);
        exact
    }

    /// Acquires that used the overflow clock for one of this thread's
    /// releases (see [`ThreadClocks::read_release`]).
    pub fn coarsened(&self) -> u32 {
        self.header(H::COARSENED_WORD)
    }

    /// Under the write lock: `VC[j] = max(VC[j], v)`; marks the clock dirty
    /// (and the stream ring no longer current) when it grew.
    #[inline]
    pub fn join_entry(&self, j: u32, v: u32) {
        if v > self.get(j) {
            self.set(j, v);
            let flags = self.header(H::DIRTY_WORD);
            self.set_header(H::DIRTY_WORD, (flags | H::DIRTY) & !H::RING_CURRENT);
        }
    }

    /// Under the write lock: joins entry `j` of a pending clock.
    #[inline]
    pub fn join_pending(&self, level: PendingLevel, j: u32, v: u32) {
        let w = self.pending_word(level, j as usize);
        if v > w.load(MemOrder::Relaxed) {
            w.store(v, MemOrder::Relaxed);
            let flags = self.header(H::DIRTY_WORD);
            if flags & H::PENDING == 0 {
                self.set_header(H::DIRTY_WORD, flags | H::PENDING);
            }
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
    /// one CTA never pairs with an atomic of another). The pending clocks
    /// are cleared only when something was put in them (most CTAs never
    /// read from a release without acquiring), so an entry is `O(1)`.
    pub fn reset_fence_state(&self) {
        self.set_fence_tokens(FenceRelease::NONE, FenceRelease::NONE);
        let flags = self.header(H::DIRTY_WORD);
        if flags & H::PENDING == 0 {
            return;
        }
        self.clear_pending();
        self.set_header(H::DIRTY_WORD, flags & !H::PENDING);
    }

    /// Under the write lock: whether this thread already joined release
    /// snapshot `token` of `releaser` with own epoch `epoch` or newer into
    /// the pending clock of `level` and, with `clock`, into the vector
    /// clock. A snapshot never changes once a head names it (a token is
    /// issued once), and the vector clock only grows, so joining it again
    /// would change nothing; the pending clocks are cleared at a CTA
    /// entry, and the memo with them.
    #[inline]
    pub fn acquired_before(
        &self,
        releaser: u32,
        token: u32,
        epoch: u32,
        level: PendingLevel,
        clock: bool,
    ) -> bool {
        let need = Self::joined_bits(level, clock);
        self.acquired_entry(releaser, token)
            .is_some_and(|(_, joined, noted)| joined & need == need && noted >= epoch)
    }

    /// Under the write lock: notes that release snapshot `token` of
    /// `releaser` (own epoch `epoch`) was joined as
    /// [`ThreadClocks::acquired_before`] asks.
    #[inline]
    pub fn note_acquired(
        &self,
        releaser: u32,
        token: u32,
        epoch: u32,
        level: PendingLevel,
        clock: bool,
    ) {
        let bits = Self::joined_bits(level, clock);
        match self.acquired_entry(releaser, token) {
            // Only the epoch may differ (releases that changed only the own
            // entry share a snapshot); an entry's bits hold for its epoch.
            Some((at, joined, noted)) if epoch == noted => self.set_header(at, joined | bits),
            Some((at, _, noted)) if epoch > noted => {
                self.set_header(at, releaser | bits);
                self.set_header(at + 2, epoch);
            }
            Some(_) => {}
            None => {
                let at = Self::acquired_at(releaser, token);
                self.set_header(at, releaser | bits);
                self.set_header(at + 1, token);
                self.set_header(at + 2, epoch);
            }
        }
    }

    /// The memo entry of `(releaser, token)` if it holds that snapshot:
    /// its header word, where it was joined and its epoch.
    #[inline(always)]
    fn acquired_entry(&self, releaser: u32, token: u32) -> Option<(usize, u32, u32)> {
        let at = Self::acquired_at(releaser, token);
        let joined = self.header(at);
        (joined != 0 && joined & 0xffff == releaser && self.header(at + 1) == token)
            .then(|| (at, joined, self.header(at + 2)))
    }

    /// The header word of the memo entry of `(releaser, token)`.
    #[inline(always)]
    fn acquired_at(releaser: u32, token: u32) -> usize {
        let slot = (releaser ^ token) as usize % ACQUIRED_SNAPSHOTS;
        H::ACQUIRED_WORD + slot * AcquiredSnapshot::WORDS
    }

    #[inline(always)]
    fn joined_bits(level: PendingLevel, clock: bool) -> u32 {
        let pending = match level {
            PendingLevel::Device => AcquiredSnapshot::PENDING_DEVICE,
            PendingLevel::System => AcquiredSnapshot::PENDING_SYSTEM,
        };
        pending | if clock { AcquiredSnapshot::CLOCK } else { 0 }
    }

    /// Zeroes every pending entry (both levels).
    fn clear_pending(&self) {
        for k in 0..ACQUIRED_SNAPSHOTS * AcquiredSnapshot::WORDS {
            self.set_header(H::ACQUIRED_WORD + k, 0);
        }
        for j in 0..self.num_threads {
            self.pending_word(PendingLevel::Device, j)
                .store(0, MemOrder::Relaxed);
            self.pending_word(PendingLevel::System, j)
                .store(0, MemOrder::Relaxed);
        }
    }

    /// The last release fences: `(device or wider, system)`.
    #[inline]
    pub fn fence_tokens(&self) -> (FenceRelease, FenceRelease) {
        (
            FenceRelease {
                token: self.header(H::FENCE_DEVICE_WORD),
                epoch: self.header(H::FENCE_EPOCH_DEVICE_WORD),
            },
            FenceRelease {
                token: self.header(H::FENCE_SYSTEM_WORD),
                epoch: self.header(H::FENCE_EPOCH_SYSTEM_WORD),
            },
        )
    }

    /// Under the write lock: records the last release fences.
    #[inline]
    pub fn set_fence_tokens(&self, device: FenceRelease, system: FenceRelease) {
        self.set_header(H::FENCE_DEVICE_WORD, device.token);
        self.set_header(H::FENCE_EPOCH_DEVICE_WORD, device.epoch);
        self.set_header(H::FENCE_SYSTEM_WORD, system.token);
        self.set_header(H::FENCE_EPOCH_SYSTEM_WORD, system.epoch);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::thread_state_words;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU32;

    /// The acquire memo answers only for what was joined where, at that
    /// epoch or newer, and forgets its pending joins with the pending
    /// clocks (a CTA entry).
    #[test]
    fn the_acquire_memo_holds_what_was_joined_and_no_more() {
        const N: u32 = 4;
        let words: [AtomicU32; 2 * (H::WORDS + 4 * N as usize + 4)] =
            core::array::from_fn(|_| AtomicU32::new(0));
        assert!(words.len() >= thread_state_words(N, 1));
        let c = ThreadClocks::<CoreAtomics>::new(&words, N, 1);
        c.init(0);
        let (dev, sys) = (PendingLevel::Device, PendingLevel::System);
        assert!(!c.acquired_before(2, 7, 3, dev, false));
        c.note_acquired(2, 7, 3, dev, false);
        c.join_pending(dev, 2, 3);
        assert!(c.acquired_before(2, 7, 3, dev, false));
        assert!(c.acquired_before(2, 7, 2, dev, false), "an older epoch");
        assert!(!c.acquired_before(2, 7, 4, dev, false), "a newer epoch");
        assert!(!c.acquired_before(2, 7, 3, dev, true), "not in the clock");
        assert!(!c.acquired_before(2, 7, 3, sys, false), "another level");
        assert!(!c.acquired_before(3, 7, 3, dev, false), "another releaser");
        assert!(!c.acquired_before(2, 11, 3, dev, false), "another token");
        // Joined into the clock at a newer epoch: the older bits go.
        c.note_acquired(2, 7, 5, sys, true);
        assert!(c.acquired_before(2, 7, 5, sys, true));
        assert!(!c.acquired_before(2, 7, 5, dev, false));
        // An older join changes nothing.
        c.note_acquired(2, 7, 4, dev, false);
        assert!(!c.acquired_before(2, 7, 4, dev, false));
        assert!(c.acquired_before(2, 7, 4, sys, true));
        // A CTA entry clears the pending clocks, and the memo with them.
        c.reset_fence_state();
        assert!(!c.acquired_before(2, 7, 5, sys, true));
    }
}
