//! Pool records: the state of a word (or a line's reads) that one inline
//! descriptor cannot hold, in fixed 128-byte records of 64-bit words.
//!
//! ```text
//! record: | header | owner | slot 0 | slot 1 | ... | slot 6 |     (16 words)
//! header: | next record (32) | waiting (14) | readers (16) | live | lock |
//! slot:   | word a | word b |
//! ```
//!
//! A word's record keeps its last write in slot 0 (descriptor, site), its
//! release heads in slots 1 and 2 ([`super::sync`]) and other accesses in
//! slots 3 to 6; a line's reader set keeps accesses in all seven. Entries
//! past a record's slots go to chained records, up to
//! [`MAX_CHAIN_RECORDS`]; past that an access joins the nearest entry of
//! the same access, which becomes sparse ([`SPARSE`](super::desc::SPARSE)).
//! An access entry is a descriptor naming the first of `count`
//! consecutive serials that made the same access (same kind, bytes, epoch
//! and site), and the site; a sparse entry's first and last serials made
//! it, those between may not have.
//!
//! A record is locked (bit 0 of its header) by whoever changes it; its
//! `owner` (the word whose cell points to it, as [`owner_key`], which
//! every process of a group computes alike) lets a thread that found the
//! record through a stale cell notice it was freed and reused.
//!
//! A word's record is also a reader-writer lock: an atomic that changes
//! nothing in it (`super::atomic`'s shared path) holds it *shared*
//! (`readers`) around its real operation, any number at once, and a
//! thread that changes it waits for them. A thread about to lock a
//! word's record counts itself in `waiting` first ([`Record::lock_word`])
//! and new readers stay out while anyone waits, so a stream of shared
//! holders never starves a writer. Nor does a queue of writers starve
//! the readers: a writer that unlocks while others wait opens a *read
//! phase* (a flag beside the owner), in which new readers come in
//! despite the waiters, until a waiter that has let them in for a while
//! closes it. Without it a hot word's record can fall into a convoy that
//! feeds itself: readers kept out by a waiter give up, become waiters in
//! turn, and every atomic on the word locks the record one after
//! another for the rest of the launch. Those two counts change by blind
//! additions, which only a record that cannot be freed under the adder
//! may take: a word's record lives until its memory is freed, when no
//! access is in flight ([`super::reclaim`]); a line's reader set (freed
//! while stale cells may still name it) is locked by compare-exchange
//! only ([`Record::lock`]).

use core::sync::atomic::Ordering as MemOrder;

use super::desc::AccessDesc;
use super::serial::Serial;
use crate::atomic::{AtomicFamily, AtomicU64Ops};

/// 64-bit words per record.
pub const RECORD_WORDS: usize = 16;
/// Two-word slots per record.
pub const SLOTS: usize = 7;
/// Slots of a word's record that hold access entries (3..7).
pub const WORD_ENTRY_SLOTS: core::ops::Range<usize> = 3..7;
/// Words of the aligned span within which a record's owner names its
/// word: the processes of a group map one shadow at different offsets of
/// their reservations, each a multiple of the allocation granularity (2
/// MiB or more), so a word's index differs from process to process but
/// its place in a 2 MiB span does not. An owner is [`owner_key`] of the
/// caller's: the same in every process.
pub const OWNER_SPAN_WORDS: u64 = (2 << 20) / 4;

/// What a record keeps of an owner (a word index, or a line's reader set,
/// bit 63): its flag bit and the word's place in its [`OWNER_SPAN_WORDS`]
/// span. Two words of one span never share it; a record reused by a word
/// of another span with the same place passes the owner check, which the
/// callers that can meet a reused record back with a check of their own
/// (a reader set is still its line's set of the write it was made for).
#[inline(always)]
pub const fn owner_key(owner: u64) -> u64 {
    owner & (1 << 63 | (OWNER_SPAN_WORDS - 1))
}

/// Records one chain of entries may take before accesses join the nearest
/// entry of the same access as sparse entries: what a check walks is
/// bounded whatever the number of CTAs.
pub const MAX_CHAIN_RECORDS: usize = 3;
/// Header words of the pool.
pub const POOL_HEADER_WORDS: usize = RECORD_WORDS;

const LOCK: u64 = 1;
const LIVE: u64 = 2;
/// One shared holder (16 bits from bit 2).
const READER: u64 = 1 << 2;
const READERS: u64 = 0xffff << 2;
/// One thread waiting to lock a word's record (14 bits from bit 18).
const WAITER: u64 = 1 << 18;
const WAITERS: u64 = 0x3fff << 18;
/// In the owner word, beside its key: new readers may come in although
/// threads wait to lock (see the module docs).
const READ_PHASE: u64 = 1 << 62;
/// Spins a waiter leaves a read phase open before it closes it: a few of
/// the readers' own polling intervals (they spin alike while they wait
/// to come in), no more, since a spin lock's hand-offs pay it each time.
pub const READ_WINDOW: u32 = 8;

/// Pool header word indices.
pub mod pool_header {
    /// Next never-used record.
    pub const NEXT: usize = 0;
    /// Records in the pool.
    pub const CAPACITY: usize = 1;
    /// Free-list head (record index; bit 63: the list's lock).
    pub const FREE: usize = 2;
    /// Allocations that found the pool full.
    pub const EXHAUSTED: usize = 3;
}

const FREE_LOCK: u64 = 1 << 63;

/// The record pool over `words` (a header, then records; record 0 is the
/// header itself, so index 0 means "none").
pub struct Pool<'m, F: AtomicFamily> {
    words: &'m [F::U64],
}

impl<'m, F: AtomicFamily> Pool<'m, F> {
    /// The pool in `words`.
    pub fn new(words: &'m [F::U64]) -> Self {
        Pool { words }
    }

    /// Prepares `words` as an empty pool (host side).
    pub fn init(words: &[F::U64]) {
        if words.len() < POOL_HEADER_WORDS {
            return;
        }
        for w in &words[..POOL_HEADER_WORDS] {
            w.store(0, MemOrder::Relaxed);
        }
        words[pool_header::NEXT].store(1, MemOrder::Relaxed);
        words[pool_header::CAPACITY].store((words.len() / RECORD_WORDS) as u64, MemOrder::Relaxed);
    }

    /// Record `i`'s words.
    #[inline(always)]
    pub fn record(&self, i: u32) -> Option<Record<'m, F>> {
        let at = (i as usize).checked_mul(RECORD_WORDS)?;
        if i == 0 {
            return None;
        }
        let words = self.words.get(at..at + RECORD_WORDS)?;
        Some(Record { words })
    }

    /// Allocations that found the pool full.
    pub fn exhausted(&self) -> u64 {
        self.words
            .get(pool_header::EXHAUSTED)
            .map_or(0, |w| w.load(MemOrder::Relaxed))
    }

    /// A fresh record owned by `owner`, locked by the caller; `None` when
    /// the pool is full (counted).
    pub fn allocate(&self, owner: u64) -> Option<Record<'m, F>> {
        let i = self.pop_free().or_else(|| self.bump());
        let Some(rec) = i.and_then(|i| self.record(i)) else {
            if let Some(w) = self.words.get(pool_header::EXHAUSTED) {
                bump_counter::<F>(w);
            }
            return None;
        };
        for w in &rec.words[2..] {
            w.store(0, MemOrder::Relaxed);
        }
        rec.words[1].store(owner_key(owner), MemOrder::Relaxed);
        rec.words[0].store(LOCK | LIVE, MemOrder::Relaxed);
        Some(rec)
    }

    /// The next never-used record. (One addition per call would be
    /// cheaper under contention, but measured on an H200 it made a
    /// histogram's sanitized launches many times slower than this loop.)
    fn bump(&self) -> Option<u32> {
        let next = self.words.get(pool_header::NEXT)?;
        let cap = self.words[pool_header::CAPACITY].load(MemOrder::Relaxed);
        let mut cur = next.load(MemOrder::Relaxed);
        loop {
            if cur >= cap {
                return None;
            }
            match next.compare_exchange(cur, cur + 1, MemOrder::Relaxed, MemOrder::Relaxed) {
                Ok(_) => return u32::try_from(cur).ok(),
                Err(v) => cur = v,
            }
        }
    }

    fn lock_free_list(&self) -> Option<(&'m F::U64, u64)> {
        let head = self.words.get(pool_header::FREE)?;
        loop {
            let v = head.load(MemOrder::Relaxed);
            if v & FREE_LOCK == 0
                && head
                    .compare_exchange(v, v | FREE_LOCK, MemOrder::Acquire, MemOrder::Relaxed)
                    .is_ok()
            {
                return Some((head, v));
            }
            F::spin();
        }
    }

    fn pop_free(&self) -> Option<u32> {
        let head = self.words.get(pool_header::FREE)?;
        if head.load(MemOrder::Relaxed) == 0 {
            return None;
        }
        let (head, v) = self.lock_free_list()?;
        let i = v as u32;
        let next = self.record(i).map_or(0, |r| r.next());
        head.store(u64::from(next), MemOrder::Release);
        (i != 0).then_some(i)
    }

    /// Gives record `i` (and its chain) back. The caller holds its lock
    /// and has unlinked it from its owner.
    pub fn free(&self, rec: Record<'m, F>) {
        let mut cur = Some(rec);
        while let Some(r) = cur {
            let next = r.next();
            let i = self.index(&r);
            r.words[1].store(0, MemOrder::Relaxed);
            if let Some((head, v)) = self.lock_free_list() {
                r.words[0].store((v & !FREE_LOCK) << 32, MemOrder::Relaxed);
                head.store(u64::from(i), MemOrder::Release);
            }
            cur = self.record(next);
        }
    }

    /// The index of record `r`.
    pub fn index(&self, r: &Record<'m, F>) -> u32 {
        let base = self.words.as_ptr() as usize;
        let at = r.words.as_ptr() as usize;
        ((at - base) / (RECORD_WORDS * core::mem::size_of::<F::U64>())) as u32
    }
}

fn bump_counter<F: AtomicFamily>(w: &F::U64) {
    w.fetch_add(1, MemOrder::Relaxed);
}

/// One record.
pub struct Record<'m, F: AtomicFamily> {
    words: &'m [F::U64],
}

impl<F: AtomicFamily> Clone for Record<'_, F> {
    fn clone(&self) -> Self {
        Record { words: self.words }
    }
}

impl<'m, F: AtomicFamily> Record<'m, F> {
    /// Whether the record, its header read as `h`, is live and `owner`'s.
    #[inline(always)]
    fn is_for(&self, h: u64, owner: u64) -> bool {
        h & LIVE != 0 && self.owned_by(owner)
    }

    /// Whether the owner word names `owner` (its read phase aside).
    #[inline(always)]
    fn owned_by(&self, owner: u64) -> bool {
        self.words[1].load(MemOrder::Relaxed) & !READ_PHASE == owner_key(owner)
    }

    /// Whether a read phase is open (see the module docs).
    #[inline(always)]
    fn read_phase(&self) -> bool {
        self.words[1].load(MemOrder::Relaxed) & READ_PHASE != 0
    }

    /// Locks the record if it is live and owned by `owner`; false when it
    /// was freed or reused meanwhile (start over from the shadow cell).
    /// By compare-exchange only: for records that may be freed under the
    /// caller (a line's reader set); a word's record takes
    /// [`lock_word`](Self::lock_word).
    pub fn lock(&self, owner: u64) -> bool {
        loop {
            let h = self.words[0].load(MemOrder::Relaxed);
            if !self.is_for(h, owner) {
                return false;
            }
            if h & (LOCK | READERS) == 0
                && self.words[0]
                    .compare_exchange(h, h | LOCK, MemOrder::Acquire, MemOrder::Relaxed)
                    .is_ok()
            {
                if self.owned_by(owner) {
                    return true;
                }
                self.unlock();
                return false;
            }
            F::spin();
        }
    }

    /// Locks a word's record (live until its memory is freed: see the
    /// module docs) if it is live and owned by `owner`: counts itself
    /// waiting, which keeps new shared holders out, then takes the lock
    /// once the shared holders are gone.
    pub fn lock_word(&self, owner: u64) -> bool {
        self.lock_word_after(owner, READ_WINDOW)
    }

    /// [`lock_word`](Self::lock_word), leaving an open read phase to
    /// readers for `window` spins before it closes it.
    pub fn lock_word_after(&self, owner: u64, window: u32) -> bool {
        let h = self.words[0].load(MemOrder::Relaxed);
        if !self.is_for(h, owner) {
            return false;
        }
        self.words[0].fetch_add(WAITER, MemOrder::Relaxed);
        let mut left = window;
        loop {
            let h = self.words[0].load(MemOrder::Relaxed);
            if !self.is_for(h, owner) {
                self.words[0].fetch_add(WAITER.wrapping_neg(), MemOrder::Relaxed);
                return false;
            }
            if self.read_phase() {
                // Readers the last writer kept out come in first; then
                // this waiter closes the phase and waits for them.
                if left > 0 {
                    left -= 1;
                    F::spin();
                    continue;
                }
                self.words[1].fetch_and(!READ_PHASE, MemOrder::Relaxed);
            } else {
                // Every phase gets its whole window, however many this
                // waiter sat through (else the second of two waiters
                // would close each later phase at once).
                left = window;
            }
            if h & (LOCK | READERS) == 0 {
                if self.words[0]
                    .compare_exchange(h, (h - WAITER) | LOCK, MemOrder::Acquire, MemOrder::Relaxed)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            F::spin();
        }
    }

    /// Locks a word's record if it is live, owned by `owner`, and nobody
    /// holds it, holds it shared or waits for it: `Some(true)`; someone
    /// does: `Some(false)` (nothing held, nothing counted); freed or reused
    /// meanwhile: `None`. For a thread that would rather try the shared
    /// path again than queue ([`lock_word`](Self::lock_word) queues).
    pub fn try_lock_word(&self, owner: u64) -> Option<bool> {
        let h = self.words[0].load(MemOrder::Relaxed);
        if !self.is_for(h, owner) {
            return None;
        }
        Some(
            h & (LOCK | READERS | WAITERS) == 0
                && self.words[0]
                    .compare_exchange(h, h | LOCK, MemOrder::Acquire, MemOrder::Relaxed)
                    .is_ok(),
        )
    }

    /// Holds a word's record shared if it is live, owned by `owner`,
    /// unlocked and nobody waits to lock it; false otherwise (nothing
    /// held). A shared holder reads the record and changes nothing in
    /// it; [`unshare`](Self::unshare) lets it go.
    #[inline(always)]
    pub fn share(&self, owner: u64) -> bool {
        let h = self.words[0].load(MemOrder::Relaxed);
        if h & LOCK != 0 || h & LIVE == 0 || (h & WAITERS != 0 && !self.read_phase()) {
            return false;
        }
        let h = self.words[0].fetch_add(READER, MemOrder::Acquire);
        if h & LOCK != 0 || !self.is_for(h, owner) {
            self.unshare();
            return false;
        }
        true
    }

    /// [`share`](Self::share), waiting up to `patience` spins while a
    /// thread holds it locked or waits to (rather than lock it too: its
    /// critical section is everyone's wait, a spin only the spinner's).
    pub fn share_within(&self, owner: u64, patience: u32) -> bool {
        let mut left = patience;
        loop {
            if self.share(owner) {
                return true;
            }
            let h = self.words[0].load(MemOrder::Relaxed);
            if left == 0 || h & LIVE == 0 || h & (LOCK | WAITERS) == 0 {
                return false;
            }
            left -= 1;
            F::spin();
        }
    }

    /// Whether someone holds it shared now.
    pub fn is_shared(&self) -> bool {
        self.words[0].load(MemOrder::Relaxed) & READERS != 0
    }

    /// Lets a shared hold go.
    #[inline(always)]
    pub fn unshare(&self) {
        self.words[0].fetch_add(READER.wrapping_neg(), MemOrder::Release);
    }

    /// Unlocks it, opening a read phase if threads wait to lock it.
    pub fn unlock(&self) {
        if self.words[0].load(MemOrder::Relaxed) & WAITERS != 0 {
            self.words[1].fetch_or(READ_PHASE, MemOrder::Relaxed);
        }
        self.words[0].fetch_add(LOCK.wrapping_neg(), MemOrder::Release);
    }

    /// Marks it dead (before it is freed; the caller holds the lock).
    pub fn kill(&self) {
        self.words[0].fetch_add(LIVE.wrapping_neg(), MemOrder::Relaxed);
    }

    /// The chained record (0: none).
    pub fn next(&self) -> u32 {
        (self.words[0].load(MemOrder::Relaxed) >> 32) as u32
    }

    /// Chains record `i` after this one (the caller holds the lock; the
    /// low half may change meanwhile: waiting threads count there).
    pub fn set_next(&self, i: u32) {
        let old = u64::from(self.next()) << 32;
        self.words[0].fetch_add((u64::from(i) << 32).wrapping_sub(old), MemOrder::Relaxed);
    }

    /// Slot `s`'s two words.
    #[inline(always)]
    pub fn slot(&self, s: usize) -> (u64, u64) {
        let at = 2 + 2 * s;
        (
            self.words[at].load(MemOrder::Relaxed),
            self.words[at + 1].load(MemOrder::Relaxed),
        )
    }

    /// Sets slot `s`.
    #[inline(always)]
    pub fn set_slot(&self, s: usize, a: u64, b: u64) {
        let at = 2 + 2 * s;
        self.words[at].store(a, MemOrder::Relaxed);
        self.words[at + 1].store(b, MemOrder::Relaxed);
    }

    /// Widens the entry in slot `s` (read as `seen`) up to `serial`, above
    /// its end, without the lock: for a holder of the record *shared*, the
    /// one change shared holders make, each only ever widening an entry up
    /// to its own serial, so the entry's last serial stays one that made
    /// the access. A widening that leaves a gap marks the entry sparse
    /// first, so no reader sees serials claimed that are not. False when
    /// the slot no longer holds that entry.
    pub fn widen_shared(&self, s: usize, seen: Entry, serial: Serial) -> bool {
        let at = 2 + 2 * s;
        let (wa, wb) = (&self.words[at], &self.words[at + 1]);
        let mut cur = seen;
        loop {
            if cur.desc.key() != seen.desc.key()
                || cur.desc.serial() != seen.desc.serial()
                || cur.site != seen.site
                || cur.count == 0
            {
                return false;
            }
            if cur.covers(serial) {
                return true;
            }
            let count = serial.wrapping_sub(cur.desc.serial()).wrapping_add(1);
            if count <= cur.count {
                // Below its first serial: not this one's to widen.
                return false;
            }
            if cur.end() != serial && !cur.desc.is_sparse() {
                let a = cur.desc.0;
                if wa
                    .compare_exchange(a, cur.desc.sparse().0, MemOrder::Relaxed, MemOrder::Relaxed)
                    .is_err()
                {
                    cur = Entry::from_slot(wa.load(MemOrder::Relaxed), wb.load(MemOrder::Relaxed));
                    continue;
                }
                cur.desc = cur.desc.sparse();
            }
            let (_, b) = cur.to_slot();
            let (_, nb) = Entry { count, ..cur }.to_slot();
            match wb.compare_exchange(b, nb, MemOrder::Relaxed, MemOrder::Relaxed) {
                Ok(_) => return true,
                Err(v) => {
                    cur = Entry::from_slot(wa.load(MemOrder::Relaxed), v);
                }
            }
        }
    }
}

/// An access entry: `count` consecutive serials from `desc`'s made the
/// same access at `site`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The first serial's access.
    pub desc: AccessDesc,
    /// Serials covered (at least 1 for a used entry).
    pub count: u32,
    /// The site (a [`SiteWord`](super::desc::SiteWord)'s low half).
    pub site: u32,
}

impl Entry {
    /// An unused slot.
    pub const EMPTY: Entry = Entry {
        desc: AccessDesc::NONE,
        count: 0,
        site: 0,
    };

    /// From a slot's two words.
    #[inline(always)]
    pub const fn from_slot(a: u64, b: u64) -> Entry {
        Entry {
            desc: AccessDesc(a),
            count: (b >> 32) as u32,
            site: b as u32,
        }
    }

    /// As a slot's two words.
    #[inline(always)]
    pub const fn to_slot(self) -> (u64, u64) {
        (self.desc.0, (self.count as u64) << 32 | self.site as u64)
    }

    /// Whether the slot is unused.
    #[inline(always)]
    pub const fn is_empty(self) -> bool {
        self.count == 0
    }

    /// Whether it covers serial `s`.
    #[inline(always)]
    pub const fn covers(self, s: Serial) -> bool {
        s.wrapping_sub(self.desc.serial()) < self.count
    }

    /// One past its last serial.
    #[inline(always)]
    pub const fn end(self) -> Serial {
        self.desc.serial().wrapping_add(self.count)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    /// The words of an empty pool of `records` records (its header one).
    fn pool_words(records: usize) -> Vec<AtomicU64> {
        let words: Vec<AtomicU64> = (0..RECORD_WORDS * records)
            .map(|_| AtomicU64::new(0))
            .collect();
        Pool::<CoreAtomics>::init(&words);
        words
    }

    #[test]
    fn records_are_allocated_locked_owned_and_recycled() {
        let words = pool_words(4);
        let pool = Pool::<CoreAtomics>::new(&words);
        let a = pool.allocate(100).unwrap();
        a.set_slot(3, 7, 8);
        a.unlock();
        assert!(a.lock(100));
        assert!(!{
            a.unlock();
            a.lock(101)
        });
        let b = pool.allocate(200).unwrap();
        let c = pool.allocate(300).unwrap();
        assert!(pool.allocate(400).is_none());
        assert_eq!(pool.exhausted(), 1);
        b.set_next(pool.index(&c));
        b.kill();
        pool.free(b);
        // Its chain went back too: two records to hand out again.
        let d = pool.allocate(500).unwrap();
        let e = pool.allocate(600).unwrap();
        assert!(pool.allocate(700).is_none());
        assert_eq!(d.slot(3), (0, 0));
        e.unlock();
        assert!(!e.lock(300), "a reused record is not its old owner's");
        assert!(a.lock(100));
    }

    #[test]
    fn trying_to_lock_a_busy_record_takes_nothing() {
        let words = pool_words(2);
        let pool = Pool::<CoreAtomics>::new(&words);
        let a = pool.allocate(9).unwrap();
        // Locked (a fresh record is its maker's).
        assert_eq!(a.try_lock_word(9), Some(false));
        a.unlock();
        // Held shared.
        assert!(a.share(9));
        assert_eq!(a.try_lock_word(9), Some(false));
        a.unshare();
        // Awaited: a thread counted itself waiting (a shared holder keeps
        // it from locking), and a try does not jump the queue.
        assert!(a.share(9));
        let header = &words[RECORD_WORDS];
        header.fetch_add(WAITER, MemOrder::Relaxed);
        assert_eq!(a.try_lock_word(9), Some(false));
        assert!(!a.share(9), "new shared holders stay out while one waits");
        header.fetch_sub(WAITER, MemOrder::Relaxed);
        a.unshare();
        // Free: it locks, and nothing was left counted.
        assert_eq!(a.try_lock_word(9), Some(true));
        a.unlock();
        assert_eq!(
            header.load(MemOrder::Relaxed) & (LOCK | READERS | WAITERS),
            0
        );
    }

    #[test]
    fn a_writer_unlocking_with_others_waiting_lets_readers_in_first() {
        let words = pool_words(2);
        let pool = Pool::<CoreAtomics>::new(&words);
        let a = pool.allocate(9).unwrap();
        // Another thread waits to lock it while its maker holds it.
        let header = &words[RECORD_WORDS];
        header.fetch_add(WAITER, MemOrder::Relaxed);
        assert!(!a.share(9), "locked");
        a.unlock();
        // The unlock opened a read phase: a reader comes in despite the
        // waiter, and its owner still reads as the record's.
        assert!(a.share(9), "a read phase lets readers in");
        assert_eq!(a.try_lock_word(9), Some(false));
        a.unshare();
        // A second waiter leaves the phase open for its window, closes
        // it, and locks; readers stay out again while the first waits.
        assert!(a.lock_word_after(9, 3));
        a.unlock();
        assert!(a.share(9), "the unlock reopened it for the first waiter");
        a.unshare();
        header.fetch_sub(WAITER, MemOrder::Relaxed);
        assert!(a.lock_word_after(9, 0));
        a.unlock();
        assert!(a.share(9), "nobody waits");
        a.unshare();
        assert_eq!(
            header.load(MemOrder::Relaxed) & (LOCK | READERS | WAITERS),
            0
        );
    }

    #[test]
    fn threads_sharing_and_locking_one_record_keep_writers_alone() {
        // Real threads, each alternating shared holds and locks of one
        // word's record (waiting, trying, and through read phases): a
        // writer never overlaps anyone, and every thread finishes.
        use std::sync::atomic::AtomicU32;
        const WRITER: u32 = 1 << 16;
        let words = pool_words(2);
        let pool = Pool::<CoreAtomics>::new(&words);
        pool.allocate(5).unwrap().unlock();
        let inside = AtomicU32::new(0);
        // Counted, not asserted, inside: a thread that panicked holding
        // the lock would leave the others waiting for good.
        let overlaps = AtomicU32::new(0);
        let (pool, inside, overlaps) = (&pool, &inside, &overlaps);
        std::thread::scope(|s| {
            for t in 0..4u32 {
                s.spawn(move || {
                    let rec = pool.record(1).unwrap();
                    for i in 0..5_000u32 {
                        let locked = match (i + t) % 4 {
                            0 => rec.lock_word(5),
                            1 => rec.try_lock_word(5) == Some(true),
                            _ => false,
                        };
                        if locked {
                            if inside.fetch_add(WRITER, MemOrder::Relaxed) != 0 {
                                overlaps.fetch_add(1, MemOrder::Relaxed);
                            }
                            inside.fetch_sub(WRITER, MemOrder::Relaxed);
                            rec.unlock();
                        } else if rec.share_within(5, 64) {
                            if inside.fetch_add(1, MemOrder::Relaxed) >= WRITER {
                                overlaps.fetch_add(1, MemOrder::Relaxed);
                            }
                            inside.fetch_sub(1, MemOrder::Relaxed);
                            rec.unshare();
                        }
                    }
                });
            }
        });
        assert_eq!(
            overlaps.load(MemOrder::Relaxed),
            0,
            "a writer beside another holder"
        );
        let header = words[RECORD_WORDS].load(MemOrder::Relaxed);
        assert_eq!(header & (LOCK | READERS | WAITERS), 0);
    }

    #[test]
    fn a_word_mapped_at_two_offsets_owns_one_record() {
        let words = pool_words(2);
        let pool = Pool::<CoreAtomics>::new(&words);
        // One process sees the word at index 5 + 3 spans, another at 5 +
        // 7 spans (their reservations map the buffer at other offsets).
        let a = pool.allocate(5 + 3 * OWNER_SPAN_WORDS).unwrap();
        a.unlock();
        assert!(a.lock_word(5 + 7 * OWNER_SPAN_WORDS));
        a.unlock();
        assert!(a.share(5 + 7 * OWNER_SPAN_WORDS));
        a.unshare();
        assert_eq!(a.try_lock_word(6), None, "another word of the span");
        assert_eq!(a.try_lock_word(5), Some(true));
        a.unlock();
    }

    #[test]
    fn entries_round_trip() {
        let e = Entry {
            desc: AccessDesc::plain(10, 2, false, 0xf),
            count: 5,
            site: 0xabcd,
        };
        let (x, y) = e.to_slot();
        assert_eq!(Entry::from_slot(x, y), e);
        assert!(e.covers(14) && !e.covers(15) && !e.covers(9));
        assert_eq!(e.end(), 15);
        assert!(Entry::EMPTY.is_empty());
    }
}
