//! Giving a freed buffer's pool records back.
//!
//! A word keeps its inflated record for as long as its memory lives
//! (records never deflate), and the record names more of the pool: the
//! chain of older access clocks, an atomic set, and through its release
//! heads one reference each to snapshots that may have spilled into the
//! pool ([`crate::history`]). When the memory is freed nothing can reach
//! those any more, but zeroing the shadow alone would leave them handed
//! out: a long-lived sanitizer (a test binary running hundreds of
//! sanitized kernels in one process) would fill its pool, lose precision
//! and, for words with release heads, fail.
//!
//! [`Engine::reclaim_range`] is the free path's step before the shadow is
//! reset: every record of the range goes back to the pool's free list
//! (an atomic set's records one by one, so they serve any later record),
//! every head drops its snapshot reference, and every cell reads as an
//! untouched word. It assumes what a free means: no access to the range
//! is in flight or will come (other memory may be in use meanwhile; the
//! free list, the history counts and the record lock are shared safely).

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{atomic_set_records, InflatedRecord, WORD_BYTES};
use crate::atomic::{AtomicU64Ops, RecordLock};
use crate::engine::{Engine, EngineMemory};
use crate::line::{head_word, LINE_WORDS};
use crate::shadow::{CellView, ShadowCell, WordState};

impl<M: EngineMemory> Engine<'_, M> {
    /// Gives back every pool record of the words of `[addr, addr + bytes)`
    /// and leaves each word untouched (see the module docs: the memory is
    /// being freed). A line only partly inside is split first, so its
    /// words outside keep their states. Returns the records given back.
    pub fn reclaim_range(&self, addr: u64, bytes: u64) -> u32 {
        let Some(off) = addr.checked_sub(self.config().real_base) else {
            return 0;
        };
        if bytes == 0 {
            return 0;
        }
        let (first, end) = (off / WORD_BYTES, (off + bytes).div_ceil(WORD_BYTES));
        let whole = |w: u64| {
            let head = head_word(w);
            head >= first && head + LINE_WORDS <= end
        };
        for edge in [first, end - 1] {
            if !whole(edge) {
                self.split_line(edge);
            }
        }
        (first..end).map(|w| self.reclaim_word(w, whole(w))).sum()
    }

    /// [`Engine::reclaim_range`] for one word: its records go back to the
    /// pool and its cell reads as an empty word, untouched when its whole
    /// line is being freed (`whole_line`: a line's head takes the line's
    /// summary with it), else an empty word of a split line (the caller
    /// split it). The GPU's free path runs it word by word in parallel
    /// over whole lines. Returns the records given back.
    pub fn reclaim_word(&self, word: u64, whole_line: bool) -> u32 {
        let Some(cell) = self.mem().shadow_cell(word) else {
            return 0;
        };
        // Zero is an untouched line to a later whole-line access: a word of
        // a line that keeps other words must not read as one.
        let empty = if whole_line {
            ShadowCell::EMPTY
        } else {
            ShadowCell::EMPTY_SPLIT
        };
        let c = ShadowCell(cell.load(MemOrder::Acquire));
        let CellView::Inflated(i) = c.view() else {
            // Compact, a line's summary, or (only for an access the free
            // raced with, a bug of the program) locked: nothing pooled.
            if c != empty {
                cell.store(empty.0, MemOrder::Relaxed);
            }
            return 0;
        };
        let pool = self.pool();
        let rec = pool.record(i);
        // Raisers of the atomic set's fast path leave before the lock is
        // held (`RecordLock`); none can come after the free.
        RecordLock::lock::<M::Atomics>(&rec[InflatedRecord::LOCK_WORD]);
        let st = WordState::from_record::<M::Atomics>(rec);
        for h in &st.releases[..st.release_len] {
            self.change_head_refs(h, -1);
        }
        let mut given = 1;
        let mut link = st.chain;
        while link != 0 {
            let j = link - 1;
            link = pool.chain_next(j);
            pool.free(j);
            given += 1;
        }
        if let Some(set) = st.set.checked_sub(1) {
            let records = atomic_set_records(self.config().num_threads);
            pool.free_block(set, records);
            given += records;
        }
        cell.store(empty.0, MemOrder::Release);
        pool.free(i);
        given
    }

    /// The words of `[addr, addr + bytes)` when it is whole lines of
    /// managed memory (what the GPU's shadow-reclaim entry splits among
    /// its threads, each word then given to [`Engine::reclaim_word`] with
    /// `whole_line` set); `None` otherwise.
    pub fn whole_line_words(&self, addr: u64, bytes: u64) -> Option<core::ops::Range<u64>> {
        let off = addr.checked_sub(self.config().real_base)?;
        let line = LINE_WORDS * WORD_BYTES;
        (off.is_multiple_of(line) && bytes.is_multiple_of(line))
            .then(|| off / WORD_BYTES..(off + bytes) / WORD_BYTES)
    }
}
