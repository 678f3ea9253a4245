//! Shadow cells: the compact 8-byte encoding of a word's access history,
//! its inflated pool record, and the decoded [`WordState`] both turn into.
//!
//! # Compact cell (one `u64` per 4-byte word, updated with one 64-bit CAS)
//!
//! | bits    | field | meaning                                                   |
//! |---------|-------|-----------------------------------------------------------|
//! | 0..4    | WM    | bytes of the word the write clock covers (0: no write)    |
//! | 4..8    | RM    | bytes of the word the read clock covers (0: no read)      |
//! | 8..10   | WK    | write kind: 0 plain, 1 atomic.cta, 2 atomic.gpu, 3 .sys   |
//! | 10..12  | RK    | read kind, same encoding                                  |
//! | 12..23  | WT    | writer's sanitizer thread id (11 bits)                    |
//! | 23..38  | WE    | writer's epoch (15 bits)                                  |
//! | 38..49  | RT    | reader's thread id (11 bits)                              |
//! | 49..64  | RE    | reader's epoch (15 bits)                                  |
//!
//! With WM = RM = 0 the cell is not compact: all zero is the empty word;
//! bit 63 set means *inflated*, with the pool index in bits 12..44; bit 62
//! set means *locked* by an atomic in flight or an inflation in progress
//! (the holder keeps the old value and stores the new one to unlock),
//! except [`ShadowCell::EMPTY_SPLIT`] (bits 62 and 8: an empty word of a
//! split line); bits 62 and 63 clear mean a line's summary
//! ([`crate::line`]). A
//! word stays compact while it has at
//! most one write clock and one read clock (atomic or plain, any byte
//! masks), no release heads, thread ids below 2^11 and epochs below 2^15,
//! and each atomic clock still covers its whole extent within the word
//! and is at most 4 bytes wide; anything else inflates into an
//! [`InflatedRecord`] (128 bytes: 8 access clocks with 32-bit epochs and
//! 16-bit thread ids, 4 release heads, the last atomic writer). A record
//! whose word needs more access clocks chains [`ChainRecord`]s (14 clocks
//! each) from the same pool, walked one record at a time under the
//! record's lock and given back to the pool's free list once emptied.

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{
    ChainRecord, InflatedRecord, PoolHeader, ReleaseSlot, ScalarClock, RECORD_ACCESS_SLOTS,
    RECORD_RELEASE_SLOTS,
};
use crate::atomic::{AtomicFamily, AtomicU32Ops, SpinLock};
use crate::memory_model::Scope;

/// Thread-id bits of a compact clock: threads with larger ids (up to
/// [`crate::abi::MAX_THREADS`]) are exact too, their words inflate.
pub const COMPACT_TID_BITS: u32 = 11;
/// Epoch bits of a compact clock.
pub const COMPACT_EPOCH_BITS: u32 = 15;

const WM_SHIFT: u32 = 0;
const RM_SHIFT: u32 = 4;
const WK_SHIFT: u32 = 8;
const RK_SHIFT: u32 = 10;
const WT_SHIFT: u32 = 12;
const WE_SHIFT: u32 = WT_SHIFT + COMPACT_TID_BITS;
const RT_SHIFT: u32 = WE_SHIFT + COMPACT_EPOCH_BITS;
const RE_SHIFT: u32 = RT_SHIFT + COMPACT_TID_BITS;
const _: () = assert!(
    RE_SHIFT + COMPACT_EPOCH_BITS == 64,
    "the compact cell is exactly 64 bits"
);
const INFLATED_BIT: u64 = 1 << 63;
const LOCKED_BIT: u64 = 1 << 62;
const INDEX_SHIFT: u32 = 12;

/// One compact shadow cell (see the module docs for the bit layout).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ShadowCell(pub u64);
const _: () = assert!(core::mem::size_of::<ShadowCell>() == 8);

/// What a cell's raw value says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellView {
    /// A compact state (possibly empty).
    Compact,
    /// Inflated: the state lives in pool record `index`.
    Inflated(u32),
    /// Held by an atomic in flight (or a line split in progress).
    Locked,
    /// A line's head holding the whole line's summary
    /// ([`crate::line::LineSummary`]).
    Line,
}

impl ShadowCell {
    /// The empty word.
    pub const EMPTY: ShadowCell = ShadowCell(0);
    /// The locked marker.
    pub const LOCKED: ShadowCell = ShadowCell(LOCKED_BIT);
    /// An empty word of a split line: what an empty state encodes to, so
    /// that a line's head, once split, never reads as untouched again
    /// ([`crate::line`]).
    pub const EMPTY_SPLIT: ShadowCell = ShadowCell(LOCKED_BIT | 1 << 8);

    /// A cell pointing at pool record `index`.
    #[inline(always)]
    pub const fn inflated(index: u32) -> ShadowCell {
        ShadowCell(INFLATED_BIT | (index as u64) << INDEX_SHIFT)
    }

    /// Classifies the raw value.
    #[inline(always)]
    pub const fn view(self) -> CellView {
        if self.0 & 0xff != 0 || self.0 == 0 || self.0 == Self::EMPTY_SPLIT.0 {
            CellView::Compact
        } else if self.0 & INFLATED_BIT != 0 {
            CellView::Inflated(((self.0 >> INDEX_SHIFT) & 0xffff_ffff) as u32)
        } else if self.0 & LOCKED_BIT != 0 {
            CellView::Locked
        } else {
            CellView::Line
        }
    }
}

impl ShadowCell {
    #[inline(always)]
    const fn field(self, shift: u32, bits: u32) -> u32 {
        ((self.0 >> shift) & ((1u64 << bits) - 1)) as u32
    }

    /// The write clock of a compact cell, if any.
    #[inline(always)]
    pub const fn write_clock(self) -> Option<AccessClock> {
        self.clock_at(WM_SHIFT, WK_SHIFT, WT_SHIFT, WE_SHIFT, true)
    }

    /// The read clock of a compact cell, if any.
    #[inline(always)]
    pub const fn read_clock(self) -> Option<AccessClock> {
        self.clock_at(RM_SHIFT, RK_SHIFT, RT_SHIFT, RE_SHIFT, false)
    }

    /// The clock whose mask, kind, tid and epoch fields start at the given
    /// shifts (the write and the read clock have the same shape).
    #[inline(always)]
    const fn clock_at(self, m: u32, k: u32, t: u32, e: u32, write: bool) -> Option<AccessClock> {
        let mask = self.field(m, 4) as u8;
        if mask == 0 {
            return None;
        }
        let k = self.field(k, 2);
        Some(AccessClock {
            tid: self.field(t, COMPACT_TID_BITS),
            epoch: self.field(e, COMPACT_EPOCH_BITS),
            mask,
            write,
            atomic: k != 0,
            scope: scope_from(k.saturating_sub(1) as u8),
            // A compact atomic clock covers exactly its extent.
            extent: if k != 0 { mask } else { 0 },
        })
    }

    /// Encodes a write clock and a read clock (masks 0: absent), or `None`
    /// when one does not fit the compact widths.
    #[inline(always)]
    pub const fn from_clocks(w: &AccessClock, r: &AccessClock) -> Option<ShadowCell> {
        const fn fits(a: &AccessClock) -> bool {
            a.mask == 0 || a.fits_compact()
        }
        if !fits(w) || !fits(r) {
            return None;
        }
        let mut v = 0u64;
        if w.mask != 0 {
            v |= (w.mask as u64) << WM_SHIFT
                | kind_bits(w.atomic, w.scope) << WK_SHIFT
                | (w.tid as u64) << WT_SHIFT
                | (w.epoch as u64) << WE_SHIFT;
        }
        if r.mask != 0 {
            v |= (r.mask as u64) << RM_SHIFT
                | kind_bits(r.atomic, r.scope) << RK_SHIFT
                | (r.tid as u64) << RT_SHIFT
                | (r.epoch as u64) << RE_SHIFT;
        }
        Some(ShadowCell(v))
    }
}

/// Kind bits of a compact clock: 0 plain, 1 + scope for atomics.
#[inline(always)]
const fn kind_bits(atomic: bool, scope: Scope) -> u64 {
    if atomic {
        1 + scope as u64
    } else {
        0
    }
}

#[inline(always)]
pub(crate) const fn scope_from(v: u8) -> Scope {
    match v {
        0 => Scope::Block,
        1 => Scope::Device,
        _ => Scope::System,
    }
}

/// Width class bits of [`AccessClock::extent`]: the atomic spans 8 bytes.
pub const EXTENT_WIDE8: u8 = 1 << 4;
/// Width class bits of [`AccessClock::extent`]: the atomic spans 16 bytes.
pub const EXTENT_WIDE16: u8 = 2 << 4;

/// The extent of a naturally aligned atomic of `size` bytes within one of
/// its words, given its byte mask there: the mask, plus a width class for
/// atomics wider than a word. Two atomics access the same memory location
/// (the PTX model's morally-strong condition) iff their extents are equal
/// on a word they share.
#[inline(always)]
pub const fn atomic_extent(size: u32, mask: u8) -> u8 {
    mask | match size {
        0..=4 => 0,
        5..=8 => EXTENT_WIDE8,
        _ => EXTENT_WIDE16,
    }
}

/// One access clock: who accessed which bytes of the word, when, how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessClock {
    /// Sanitizer thread.
    pub tid: u32,
    /// Epoch of the thread at the access.
    pub epoch: u32,
    /// Bytes of the word (bit i = byte i).
    pub mask: u8,
    /// The access wrote.
    pub write: bool,
    /// The access was atomic.
    pub atomic: bool,
    /// Scope of the atomic (Block for plain accesses).
    pub scope: Scope,
    /// For atomics, [`atomic_extent`]: which bytes of the word the atomic
    /// covered, plus its width class (kept when later accesses take bytes
    /// off `mask`); 0 for plain accesses.
    pub extent: u8,
}

impl AccessClock {
    /// No access.
    pub const NONE: AccessClock = AccessClock {
        tid: 0,
        epoch: 0,
        mask: 0,
        write: false,
        atomic: false,
        scope: Scope::Block,
        extent: 0,
    };

    /// Same access apart from the byte mask.
    #[inline(always)]
    pub fn same_access(&self, o: &AccessClock) -> bool {
        self.tid == o.tid
            && self.epoch == o.epoch
            && self.write == o.write
            && self.atomic == o.atomic
            && self.scope == o.scope
            && self.extent == o.extent
    }

    /// Fits a compact cell: small id and epoch, and an atomic covers its
    /// whole extent, at most one word.
    #[inline(always)]
    pub const fn fits_compact(&self) -> bool {
        self.tid < 1 << COMPACT_TID_BITS
            && self.epoch < 1 << COMPACT_EPOCH_BITS
            && (!self.atomic || self.extent == self.mask)
    }

    fn to_scalar(self) -> ScalarClock {
        let mut flags = ScalarClock::VALID | self.mask << ScalarClock::MASK_SHIFT;
        if self.write {
            flags |= ScalarClock::WRITE;
        }
        if self.atomic {
            flags |= ScalarClock::ATOMIC;
        }
        ScalarClock {
            epoch: self.epoch,
            tid: self.tid as u16,
            scope: self.scope as u8 | self.extent << ScalarClock::EXTENT_SHIFT,
            flags,
        }
    }

    fn from_scalar(s: ScalarClock) -> AccessClock {
        AccessClock {
            tid: s.tid as u32,
            epoch: s.epoch,
            mask: s.flags >> ScalarClock::MASK_SHIFT,
            write: s.flags & ScalarClock::WRITE != 0,
            atomic: s.flags & ScalarClock::ATOMIC != 0,
            scope: scope_from(s.scope & 3),
            extent: s.scope >> ScalarClock::EXTENT_SHIFT,
        }
    }
}

/// A release head: a release (or a release fence followed by an atomic
/// write) whose release sequence the word's current value continues. What
/// an acquirer joins is the snapshot `token` of thread `tid`, with entry
/// `tid` raised to `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseHead {
    /// Releasing thread (for a derived head, the last one).
    pub tid: u32,
    /// Scope of the release (of the fence, for a fence pattern).
    pub scope: Scope,
    /// Clock-buffer token of the snapshot in `tid`'s buffer.
    pub token: u32,
    /// Own epoch of `tid` at the release.
    pub epoch: u32,
    /// The snapshot joins other releasers' heads of the same class (it is
    /// not `tid`'s clock at some point).
    pub derived: bool,
    /// Heads of several classes merged: every acquirer acquires it.
    pub wide: bool,
}

impl ReleaseHead {
    const NONE: ReleaseHead = ReleaseHead {
        tid: 0,
        scope: Scope::Block,
        token: 0,
        epoch: 0,
        derived: false,
        wide: false,
    };
}

/// The last atomic write of a word (release sequences continue only
/// through read-modify-writes morally strong with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastAtomicWrite {
    /// Writer.
    pub tid: u32,
    /// Its scope.
    pub scope: Scope,
    /// Its extent ([`atomic_extent`]).
    pub extent: u8,
}

/// The decoded state of one word, compact or inflated alike. One more
/// access slot than a record keeps, so an update can overflow by one before
/// eviction picks a victim.
#[derive(Clone, Copy, Debug)]
pub struct WordState {
    /// Access clocks, oldest first.
    pub accesses: [AccessClock; RECORD_ACCESS_SLOTS + 1],
    /// Used entries of `accesses`.
    pub len: usize,
    /// Release heads.
    pub releases: [ReleaseHead; RECORD_RELEASE_SLOTS + 1],
    /// Used entries of `releases`.
    pub release_len: usize,
    /// The last write if it was atomic (None after a plain write or none).
    pub last_atomic_write: Option<LastAtomicWrite>,
    /// An access clock of this word was evicted at some point.
    pub lossy: bool,
    /// Pool index + 1 of the first [`ChainRecord`] holding older access
    /// clocks (0: none; always 0 for a compact word).
    pub chain: u32,
    /// Pool index + 1 of the word's atomic set, more access clocks
    /// ([`crate::atomic_set`]; 0: none, always for a compact word).
    pub set: u32,
}

impl WordState {
    /// The empty word.
    pub const EMPTY: WordState = WordState {
        accesses: [AccessClock::NONE; RECORD_ACCESS_SLOTS + 1],
        len: 0,
        releases: [ReleaseHead::NONE; RECORD_RELEASE_SLOTS + 1],
        release_len: 0,
        last_atomic_write: None,
        lossy: false,
        chain: 0,
        set: 0,
    };

    /// Appends an access clock (caller keeps `len` within bounds).
    #[inline]
    pub fn push(&mut self, a: AccessClock) {
        self.accesses[self.len] = a;
        self.len += 1;
    }

    /// Removes access clock `i`, keeping the order.
    #[inline]
    pub fn remove(&mut self, i: usize) {
        let mut k = i;
        while k + 1 < self.len {
            self.accesses[k] = self.accesses[k + 1];
            k += 1;
        }
        self.len -= 1;
    }

    /// Removes release head `i`, keeping the order.
    #[inline]
    pub fn remove_release(&mut self, i: usize) {
        let mut k = i;
        while k + 1 < self.release_len {
            self.releases[k] = self.releases[k + 1];
            k += 1;
        }
        self.release_len -= 1;
    }

    /// Decodes a compact cell (caller checked [`CellView::Compact`]).
    pub fn from_compact(c: ShadowCell) -> WordState {
        let mut s = WordState::EMPTY;
        if let Some(w) = c.write_clock() {
            s.push(w);
        }
        if let Some(r) = c.read_clock() {
            s.push(r);
        }
        s
    }

    /// Encodes the state compactly if it fits (see the module docs).
    pub fn to_compact(&self) -> Option<ShadowCell> {
        if self.release_len != 0 || self.lossy || self.chain != 0 || self.set != 0 {
            return None;
        }
        let mut v = 0u64;
        let (mut have_w, mut have_r) = (false, false);
        for a in &self.accesses[..self.len] {
            if !a.fits_compact() {
                return None;
            }
            let k = kind_bits(a.atomic, a.scope);
            if a.write {
                if have_w {
                    return None;
                }
                have_w = true;
                v |= (a.mask as u64) << WM_SHIFT
                    | k << WK_SHIFT
                    | (a.tid as u64) << WT_SHIFT
                    | (a.epoch as u64) << WE_SHIFT;
            } else {
                if have_r {
                    return None;
                }
                have_r = true;
                v |= (a.mask as u64) << RM_SHIFT
                    | k << RK_SHIFT
                    | (a.tid as u64) << RT_SHIFT
                    | (a.epoch as u64) << RE_SHIFT;
            }
        }
        Some(if v == 0 {
            ShadowCell::EMPTY_SPLIT
        } else {
            ShadowCell(v)
        })
    }

    /// The compact cell closest to this state, for when the pool has no
    /// record left: the newest write clock and the newest read clock that
    /// fit a compact cell, the older clocks dropped. Dropping access clocks
    /// only removes checks (races with them may be missed, none invented).
    /// `None` when the word has release heads: a compact cell cannot keep
    /// them, and an acquirer that lost them would report false races.
    pub fn to_compact_dropping_clocks(&self) -> Option<ShadowCell> {
        // A compact word has no chain, and a word with a chain is inflated
        // already: this never has chained clocks to drop.
        debug_assert_eq!(self.chain | self.set, 0);
        if self.release_len != 0 {
            return None;
        }
        let mut kept = WordState::EMPTY;
        let (mut write, mut read) = (false, false);
        for a in self.accesses[..self.len].iter().rev() {
            let taken = if a.write { &mut write } else { &mut read };
            if !*taken && a.fits_compact() {
                *taken = true;
                kept.push(*a);
            }
        }
        kept.to_compact()
    }

    /// Decodes an inflated record held in `words` (its lock held by the caller).
    pub fn from_record<F: AtomicFamily>(words: &[F::U32]) -> WordState {
        let mut s = WordState::EMPTY;
        let w = |i: usize| words[i].load(MemOrder::Relaxed);
        let meta = w(InflatedRecord::META_WORD);
        s.lossy = meta & InflatedRecord::LOSSY != 0;
        s.set = meta >> InflatedRecord::SET_SHIFT;
        s.chain = w(InflatedRecord::CHAIN_WORD);
        let lw = w(InflatedRecord::LAST_WRITE_WORD);
        if lw & (1 << 31) != 0 {
            s.last_atomic_write = Some(LastAtomicWrite {
                tid: lw & 0xffff,
                scope: scope_from((lw >> 16) as u8 & 3),
                extent: (lw >> 24) as u8 & 0x3f,
            });
        }
        for i in 0..RECORD_ACCESS_SLOTS {
            if let Some(a) = Self::record_clock::<F>(words, i) {
                s.push(a);
            }
        }
        let (heads, len) = Self::heads_of_record::<F>(words);
        s.releases[..RECORD_RELEASE_SLOTS].copy_from_slice(&heads);
        s.release_len = len;
        s
    }

    /// Access clock `slot` of the record in `words`, if the slot is in use
    /// (slots are filled from the first: the first empty one ends them).
    #[inline(always)]
    pub fn record_clock<F: AtomicFamily>(words: &[F::U32], slot: usize) -> Option<AccessClock> {
        let sc = read_scalar::<F>(words, InflatedRecord::ACCESS_WORD + 2 * slot);
        (sc.flags & ScalarClock::VALID != 0).then(|| AccessClock::from_scalar(sc))
    }

    /// The release heads of the record in `words` (its lock held by the
    /// caller) and how many there are.
    pub fn heads_of_record<F: AtomicFamily>(
        words: &[F::U32],
    ) -> ([ReleaseHead; RECORD_RELEASE_SLOTS], usize) {
        let w = |i: usize| words[i].load(MemOrder::Relaxed);
        let mut heads = [ReleaseHead::NONE; RECORD_RELEASE_SLOTS];
        let mut len = 0;
        for i in 0..RECORD_RELEASE_SLOTS {
            let at = InflatedRecord::RELEASE_WORD + RELEASE_SLOT_WORDS * i;
            let meta = w(at + 2);
            let flags = (meta >> 24) as u8;
            if flags & ReleaseSlot::VALID != 0 {
                heads[len] = ReleaseHead {
                    tid: meta & 0xffff,
                    scope: scope_from((meta >> 16) as u8 & 3),
                    token: w(at + 1),
                    epoch: w(at),
                    derived: flags & ReleaseSlot::DERIVED != 0,
                    wide: flags & ReleaseSlot::WIDE != 0,
                };
                len += 1;
            }
        }
        (heads, len)
    }

    /// Writes the state into record `words` (lock held, or record private).
    /// The caller has trimmed `len` and `release_len` to the record's slots.
    pub fn to_record<F: AtomicFamily>(&self, words: &[F::U32]) {
        let fast_path = self.set != 0 && self.release_len == 0 && self.chain == 0;
        let mut meta = self.set << InflatedRecord::SET_SHIFT;
        if self.lossy {
            meta |= InflatedRecord::LOSSY;
        }
        if fast_path {
            meta |= InflatedRecord::SET_FAST_PATH;
        }
        words[InflatedRecord::META_WORD].store(meta, MemOrder::Relaxed);
        let lw = match self.last_atomic_write {
            Some(l) => {
                1 << 31 | (l.extent as u32 & 0x3f) << 24 | (l.scope as u32) << 16 | (l.tid & 0xffff)
            }
            None => 0,
        };
        words[InflatedRecord::LAST_WRITE_WORD].store(lw, MemOrder::Relaxed);
        words[InflatedRecord::CHAIN_WORD].store(self.chain, MemOrder::Relaxed);
        for i in 0..RECORD_ACCESS_SLOTS {
            let sc = if i < self.len {
                self.accesses[i].to_scalar()
            } else {
                ScalarClock::default()
            };
            write_scalar::<F>(words, InflatedRecord::ACCESS_WORD + 2 * i, sc);
        }
        for i in 0..RECORD_RELEASE_SLOTS {
            let at = InflatedRecord::RELEASE_WORD + RELEASE_SLOT_WORDS * i;
            let (epoch, token, meta) = if i < self.release_len {
                let h = self.releases[i];
                let flags = ReleaseSlot::VALID
                    | if h.derived { ReleaseSlot::DERIVED } else { 0 }
                    | if h.wide { ReleaseSlot::WIDE } else { 0 };
                (
                    h.epoch,
                    h.token,
                    (h.tid & 0xffff) | (h.scope as u32) << 16 | (flags as u32) << 24,
                )
            } else {
                (0, 0, 0)
            };
            words[at].store(epoch, MemOrder::Relaxed);
            words[at + 1].store(token, MemOrder::Relaxed);
            words[at + 2].store(meta, MemOrder::Relaxed);
        }
    }
}

/// u32 words of one [`ReleaseSlot`] (little-endian: epoch, token, then
/// tid, scope and flags in one word).
const RELEASE_SLOT_WORDS: usize = core::mem::size_of::<ReleaseSlot>() / 4;

#[inline(always)]
fn read_scalar<F: AtomicFamily>(words: &[F::U32], at: usize) -> ScalarClock {
    let w0 = words[at].load(MemOrder::Relaxed);
    let w1 = words[at + 1].load(MemOrder::Relaxed);
    // Little-endian field order of ScalarClock: tid (2 bytes), scope, flags.
    ScalarClock {
        epoch: w0,
        tid: w1 as u16,
        scope: (w1 >> 16) as u8,
        flags: (w1 >> 24) as u8,
    }
}

#[inline(always)]
fn write_scalar<F: AtomicFamily>(words: &[F::U32], at: usize, s: ScalarClock) {
    words[at].store(s.epoch, MemOrder::Relaxed);
    words[at + 1].store(
        s.tid as u32 | (s.scope as u32) << 16 | (s.flags as u32) << 24,
        MemOrder::Relaxed,
    );
}

/// Chain records leave this fraction of the pool (1/N, rounded up) to
/// words that inflate, so long access histories cannot starve words with
/// release heads of their record.
pub const INFLATION_HEADROOM_DIVISOR: u32 = 8;

/// The inflated-record pool: a [`PoolHeader`] and records, bump-allocated,
/// with a free list of the chain records given back.
pub struct Pool<'a, F: AtomicFamily> {
    words: &'a [F::U32],
}

impl<'a, F: AtomicFamily> Pool<'a, F> {
    /// A view of the pool in `words`.
    #[inline]
    pub fn new(words: &'a [F::U32]) -> Self {
        Pool { words }
    }

    #[inline(always)]
    fn header(&self, i: usize) -> Option<&'a F::U32> {
        self.words
            .get(i)
            .filter(|_| self.words.len() >= PoolHeader::WORDS)
    }

    /// Records that fit in the memory and the header's capacity.
    #[inline]
    pub fn capacity(&self) -> u32 {
        let by_len =
            (self.words.len().saturating_sub(PoolHeader::WORDS) / InflatedRecord::WORDS) as u32;
        self.header(PoolHeader::CAPACITY_WORD)
            .map_or(0, |c| by_len.min(c.load(MemOrder::Relaxed)))
    }

    /// No record is left to allocate (none given back, none new): a
    /// snapshot, for callers that would otherwise claim a word first.
    #[inline]
    pub fn exhausted(&self) -> bool {
        self.counter(PoolHeader::FREE_HEAD_WORD) == 0
            && self.counter(PoolHeader::NEXT_WORD) >= self.capacity()
    }

    /// Claims a fresh record (zeroed): one given back, else a new one;
    /// `None` when the pool is full.
    pub fn allocate(&self) -> Option<u32> {
        let next = self.header(PoolHeader::NEXT_WORD)?;
        let i = match self.pop_free() {
            Some(i) => i,
            None => {
                // Check first so a full pool's counter does not keep growing.
                if next.load(MemOrder::Relaxed) >= self.capacity() {
                    return None;
                }
                let i = next.fetch_add(1, MemOrder::Relaxed);
                if i >= self.capacity() {
                    return None;
                }
                i
            }
        };
        for w in self.record(i) {
            w.store(0, MemOrder::Relaxed);
        }
        Some(i)
    }

    /// Claims a record for an access-history chain: like
    /// [`Pool::allocate`], but new records only while more than
    /// 1/[`INFLATION_HEADROOM_DIVISOR`] of the pool (rounded up) is left.
    pub fn allocate_chain(&self) -> Option<u32> {
        let next = self.header(PoolHeader::NEXT_WORD)?;
        let free = self.header(PoolHeader::FREE_HEAD_WORD)?;
        if free.load(MemOrder::Relaxed) == 0 && next.load(MemOrder::Relaxed) >= self.chain_limit() {
            return None;
        }
        self.allocate()
    }

    /// The bump index below which new records may go to chains and atomic
    /// sets: all but 1/[`INFLATION_HEADROOM_DIVISOR`] of the pool (rounded
    /// up), left to words that inflate.
    fn chain_limit(&self) -> u32 {
        let cap = self.capacity();
        cap - cap.div_ceil(INFLATION_HEADROOM_DIVISOR)
    }

    /// Claims `records` contiguous records (zeroed) from the bump region,
    /// within the share chains may take (see [`Pool::allocate_chain`]);
    /// the first one's index, or `None` when they do not fit.
    pub fn allocate_block(&self, records: u32) -> Option<u32> {
        let next = self.header(PoolHeader::NEXT_WORD)?;
        let limit = self.chain_limit();
        let mut at = next.load(MemOrder::Relaxed);
        loop {
            if at.checked_add(records)? > limit {
                return None;
            }
            match next.compare_exchange(at, at + records, MemOrder::Relaxed, MemOrder::Relaxed) {
                Ok(_) => break,
                Err(now) => at = now,
            }
        }
        for w in self.block(at, records)? {
            w.store(0, MemOrder::Relaxed);
        }
        Some(at)
    }

    /// The words of the `records` records from `first`, if the pool holds
    /// them.
    #[inline(always)]
    pub fn block(&self, first: u32, records: u32) -> Option<&'a [F::U32]> {
        let at = PoolHeader::WORDS + first as usize * InflatedRecord::WORDS;
        self.words
            .get(at..at + records as usize * InflatedRecord::WORDS)
    }

    /// Pops the free list (under its lock, a leaf in the lock order).
    fn pop_free(&self) -> Option<u32> {
        let head = self.header(PoolHeader::FREE_HEAD_WORD)?;
        if head.load(MemOrder::Relaxed) == 0 {
            return None;
        }
        let lock = &self.words[PoolHeader::FREE_LOCK_WORD];
        SpinLock::lock::<F>(lock);
        let first = head.load(MemOrder::Relaxed);
        if first != 0 {
            let rest = self.chain_next(first - 1);
            head.store(rest, MemOrder::Relaxed);
        }
        SpinLock::unlock::<F>(lock);
        first.checked_sub(1)
    }

    /// Gives record `i` back (no longer referenced by anyone).
    pub fn free(&self, i: u32) {
        self.free_block(i, 1);
    }

    /// Gives the `records` records from `first` back (a record, or an
    /// atomic set's block, no longer referenced by anyone), one free-list
    /// entry each, in one hold of the list's lock.
    pub fn free_block(&self, first: u32, records: u32) {
        let Some(head) = self.header(PoolHeader::FREE_HEAD_WORD) else {
            return;
        };
        if records == 0 || self.block(first, records).is_none() {
            return;
        }
        // Linked among themselves first: the lock covers only the splice.
        for i in first..first + records - 1 {
            self.set_chain_next(i, i + 2);
        }
        let lock = &self.words[PoolHeader::FREE_LOCK_WORD];
        SpinLock::lock::<F>(lock);
        self.set_chain_next(first + records - 1, head.load(MemOrder::Relaxed));
        head.store(first + 1, MemOrder::Relaxed);
        SpinLock::unlock::<F>(lock);
    }

    /// The words of record `i`.
    #[inline(always)]
    pub fn record(&self, i: u32) -> &'a [F::U32] {
        let at = PoolHeader::WORDS + i as usize * InflatedRecord::WORDS;
        &self.words[at..at + InflatedRecord::WORDS]
    }

    /// The link (index + 1, 0: none) after chain record `i`.
    #[inline(always)]
    pub fn chain_next(&self, i: u32) -> u32 {
        self.record(i)[ChainRecord::NEXT_WORD].load(MemOrder::Relaxed)
    }

    /// Sets the link after chain record `i`.
    #[inline(always)]
    pub fn set_chain_next(&self, i: u32, link: u32) {
        self.record(i)[ChainRecord::NEXT_WORD].store(link, MemOrder::Relaxed);
    }

    /// Access clock `slot` of chain record `i`, if the slot is in use.
    #[inline(always)]
    pub fn chain_clock(&self, i: u32, slot: usize) -> Option<AccessClock> {
        let sc = read_scalar::<F>(self.record(i), ChainRecord::ACCESS_WORD + 2 * slot);
        (sc.flags & ScalarClock::VALID != 0).then(|| AccessClock::from_scalar(sc))
    }

    /// Sets (or with `None` frees) access clock `slot` of chain record `i`.
    #[inline(always)]
    pub fn set_chain_clock(&self, i: u32, slot: usize, a: Option<AccessClock>) {
        let sc = a.map_or(ScalarClock::default(), AccessClock::to_scalar);
        write_scalar::<F>(self.record(i), ChainRecord::ACCESS_WORD + 2 * slot, sc);
    }

    /// Counts one more in header counter `i`, up to [`PoolHeader::COUNT_CAP`]:
    /// past it a counter is only read, since a word that every block hits
    /// would otherwise take one atomic on one address per access.
    #[inline]
    fn count(&self, i: usize) {
        if let Some(w) = self.header(i) {
            if w.load(MemOrder::Relaxed) < PoolHeader::COUNT_CAP {
                w.fetch_add(1, MemOrder::Relaxed);
            }
        }
    }

    #[inline]
    fn counter(&self, i: usize) -> u32 {
        self.header(i).map_or(0, |w| w.load(MemOrder::Relaxed))
    }

    /// Counts evicted access clocks.
    #[inline]
    pub fn note_eviction(&self) {
        self.count(PoolHeader::EVICTIONS_WORD);
    }

    /// Counts records lost to an inflation race (none since inflation
    /// claims the cell first; kept for the ABI's counter).
    #[inline]
    pub fn note_wasted(&self) {
        self.count(PoolHeader::WASTED_WORD);
    }

    /// Counts release heads merged into a wide head.
    #[inline]
    pub fn note_merge(&self) {
        self.count(PoolHeader::MERGED_WORD);
    }

    /// Counts an access kept compact with older clocks dropped (the pool
    /// was full).
    #[inline]
    pub fn note_degraded(&self) {
        self.count(PoolHeader::DEGRADED_WORD);
    }

    /// Accesses degraded so far (see [`PoolHeader::degraded`]).
    pub fn degraded(&self) -> u32 {
        self.counter(PoolHeader::DEGRADED_WORD)
    }

    /// Release heads merged so far.
    pub fn merged_heads(&self) -> u32 {
        self.counter(PoolHeader::MERGED_WORD)
    }

    /// Evictions so far.
    pub fn evictions(&self) -> u32 {
        self.counter(PoolHeader::EVICTIONS_WORD)
    }

    /// Records wasted so far.
    pub fn wasted(&self) -> u32 {
        self.counter(PoolHeader::WASTED_WORD)
    }

    /// Records handed out and not given back (a walk of the free list:
    /// for tests and statistics, with no engine operation in flight).
    pub fn in_use(&self) -> u32 {
        let handed = self.counter(PoolHeader::NEXT_WORD).min(self.capacity());
        let mut free = 0;
        let mut link = self.counter(PoolHeader::FREE_HEAD_WORD);
        while link != 0 && free < handed {
            free += 1;
            link = self.chain_next(link - 1);
        }
        handed - free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_round_trip() {
        let mut s = WordState::EMPTY;
        s.push(AccessClock {
            tid: 2047,
            epoch: 32767,
            mask: 0b1111,
            write: true,
            atomic: true,
            scope: Scope::System,
            extent: 0b1111,
        });
        s.push(AccessClock {
            tid: 5,
            epoch: 9,
            mask: 0b0010,
            write: false,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        });
        let c = s.to_compact().unwrap();
        assert_eq!(c.view(), CellView::Compact);
        let d = WordState::from_compact(c);
        assert_eq!(&d.accesses[..2], &s.accesses[..2]);
        assert_eq!(d.len, 2);
    }

    #[test]
    fn what_does_not_fit_inflates() {
        let mut s = WordState::EMPTY;
        s.push(AccessClock {
            tid: 2048,
            epoch: 1,
            mask: 1,
            write: true,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        });
        assert!(s.to_compact().is_none());
        let mut s = WordState::EMPTY;
        s.push(AccessClock {
            tid: 1,
            epoch: 1 << 15,
            mask: 1,
            write: false,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        });
        assert!(s.to_compact().is_none());
        let mut s = WordState::EMPTY;
        s.push(AccessClock {
            tid: 1,
            epoch: 1,
            mask: 1,
            write: false,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        });
        s.push(AccessClock {
            tid: 2,
            epoch: 1,
            mask: 1,
            write: false,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        });
        assert!(s.to_compact().is_none());
        let mut s = WordState::EMPTY;
        s.releases[0] = ReleaseHead {
            tid: 1,
            scope: Scope::Device,
            token: 1,
            epoch: 1,
            derived: false,
            wide: false,
        };
        s.release_len = 1;
        assert!(s.to_compact().is_none());
    }

    #[test]
    fn special_cells() {
        assert_eq!(ShadowCell::EMPTY.view(), CellView::Compact);
        assert_eq!(ShadowCell::LOCKED.view(), CellView::Locked);
        assert_eq!(ShadowCell::inflated(0).view(), CellView::Inflated(0));
        assert_eq!(
            ShadowCell::inflated(u32::MAX).view(),
            CellView::Inflated(u32::MAX)
        );
        // An empty state never encodes to zero (a line head's "untouched").
        assert_eq!(WordState::EMPTY.to_compact(), Some(ShadowCell::EMPTY_SPLIT));
        assert_eq!(ShadowCell::EMPTY_SPLIT.view(), CellView::Compact);
        assert_eq!(ShadowCell(1 << 20).view(), CellView::Line);
    }
}
