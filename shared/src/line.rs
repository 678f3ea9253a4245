//! Line summaries: one shadow cell standing for a whole 128-byte line.
//!
//! The lanes of a warp that read or write a whole line at once (a
//! coalesced copy, axpy, a reduction's loads) are one sanitizer thread
//! making one access of 32 words at one epoch: every word of the line ends
//! up with the same state. So a line whose words all have the same plain
//! state keeps it once, in its first word's cell (the line's *head*), and
//! such a whole-line access checks and updates that one cell with one
//! compare-exchange ([`Engine::access_line`]) instead of 32.
//!
//! # States of a line (read from its head cell)
//!
//! | head value                               | line is   | the other 31 cells |
//! |------------------------------------------|-----------|--------------------|
//! | `0`                                      | untouched (a summary of nothing) | zero, ignored |
//! | a [`LineSummary`] (bit table below)      | summarised: every word has [`LineSummary::cell`] | zero, ignored |
//! | anything else ([`ShadowCell::EMPTY_SPLIT`], compact, inflated, locked) | split: the head is word 0's own cell | each word's own cell |
//!
//! | bits   | field of a summary                          |
//! |--------|---------------------------------------------|
//! | 0..8   | zero (tells a summary from a compact cell)  |
//! | 8      | a write clock is present                    |
//! | 9..20  | writer's sanitizer thread id (11 bits)      |
//! | 20..35 | writer's epoch (15 bits)                    |
//! | 35     | a read clock is present                     |
//! | 36..47 | reader's thread id                          |
//! | 47..62 | reader's epoch                              |
//! | 62, 63 | zero (tells a summary from locked, inflated)|
//!
//! Both clocks are plain and cover every byte of every word, so the
//! compact rules give every word the same result: a whole-line access
//! keeps the summary whenever the result is again such a state.
//!
//! # Splitting
//!
//! Any other access of a summarised line (part of a line, an atomic, a
//! result that needs two read clocks) first *splits* it
//! (`Engine::split_line`): it locks the head, stores the summary's cell
//! into words 1 to 31, and releases the head holding word 0's cell. A split
//! line stays split until the host zeroes the shadow. A split is needed
//! only when a word's own cell could be stale: a per-word access that
//! finds its (non-head) cell zero, or the head a summary, checks the head
//! first (with acquire, pairing with the splitter's release); one that
//! finds its cell non-zero knows the line is split. An access of part of
//! a summarised line that the summary already covers (FastTrack's
//! same-epoch case) changes nothing and splits nothing
//! (`Engine::line_covers`).

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{AccessSite, WORD_BYTES};
use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::engine::{Engine, EngineMemory, Outcome, U64Of};
use crate::shadow::{AccessClock, CellView, ShadowCell, COMPACT_EPOCH_BITS, COMPACT_TID_BITS};

/// Words in a line.
pub const LINE_WORDS: u64 = 32;
/// Bytes in a line.
pub const LINE_BYTES: u64 = LINE_WORDS * WORD_BYTES;
/// The byte mask of a whole word.
const FULL_WORD: u8 = 0xf;

const W_VALID: u32 = 8;
const W_TID: u32 = 9;
const W_EPOCH: u32 = W_TID + COMPACT_TID_BITS;
const R_VALID: u32 = W_EPOCH + COMPACT_EPOCH_BITS;
const R_TID: u32 = R_VALID + 1;
const R_EPOCH: u32 = R_TID + COMPACT_TID_BITS;
const _: () = assert!(
    R_EPOCH + COMPACT_EPOCH_BITS == 62,
    "a summary leaves the low byte and the two top bits zero"
);

/// The first word of `word`'s line (its head).
#[inline(always)]
pub const fn head_word(word: u64) -> u64 {
    word & !(LINE_WORDS - 1)
}

/// The cell that says `word`'s state, given its line's head value and
/// its own cell's: the summary's cell while the line is summarised, else
/// its own (a test's or a debugger's view of the shadow).
#[inline]
pub const fn state_cell(word: u64, head: u64, own: u64) -> ShadowCell {
    match LineSummary::of_head(head) {
        Some(s) => s.cell(),
        None if word == head_word(word) => ShadowCell(head),
        None => ShadowCell(own),
    }
}

/// A whole line's shared state: at most one plain write clock and one
/// plain read clock, each covering every byte (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSummary(u64);

impl LineSummary {
    /// The untouched line.
    pub const EMPTY: LineSummary = LineSummary(0);

    /// The summary a head cell holds, or `None` when the line is split
    /// (or its head locked: a split in progress, or an atomic on word 0).
    #[inline(always)]
    pub const fn of_head(raw: u64) -> Option<LineSummary> {
        match ShadowCell(raw).view() {
            CellView::Line => Some(LineSummary(raw)),
            CellView::Compact if raw == 0 => Some(LineSummary::EMPTY),
            _ => None,
        }
    }

    /// The head value.
    #[inline(always)]
    pub const fn raw(self) -> u64 {
        self.0
    }

    #[inline(always)]
    const fn field(self, shift: u32, bits: u32) -> u32 {
        ((self.0 >> shift) & ((1 << bits) - 1)) as u32
    }

    #[inline(always)]
    const fn clock(self, valid: u32, tid: u32, epoch: u32, write: bool) -> AccessClock {
        AccessClock {
            tid: self.field(tid, COMPACT_TID_BITS),
            epoch: self.field(epoch, COMPACT_EPOCH_BITS),
            mask: if self.0 >> valid & 1 != 0 {
                FULL_WORD
            } else {
                0
            },
            write,
            ..AccessClock::NONE
        }
    }

    /// The compact cell every word of the line has.
    #[inline(always)]
    pub const fn cell(self) -> ShadowCell {
        let w = self.clock(W_VALID, W_TID, W_EPOCH, true);
        let r = self.clock(R_VALID, R_TID, R_EPOCH, false);
        match ShadowCell::from_clocks(&w, &r) {
            Some(c) => c,
            // Unreachable: the fields have the compact widths.
            None => ShadowCell::EMPTY,
        }
    }

    /// The summary of a line whose every word has cell `c`, if a summary
    /// can say it: `c` compact, with plain clocks covering every byte.
    #[inline(always)]
    pub const fn from_cell(c: ShadowCell) -> Option<LineSummary> {
        if !matches!(c.view(), CellView::Compact) {
            return None;
        }
        let mut v = 0u64;
        if let Some(w) = c.write_clock() {
            if w.atomic || w.mask != FULL_WORD {
                return None;
            }
            v |= 1 << W_VALID | (w.tid as u64) << W_TID | (w.epoch as u64) << W_EPOCH;
        }
        if let Some(r) = c.read_clock() {
            if r.atomic || r.mask != FULL_WORD {
                return None;
            }
            v |= 1 << R_VALID | (r.tid as u64) << R_TID | (r.epoch as u64) << R_EPOCH;
        }
        Some(LineSummary(v))
    }
}

/// What [`Engine::access_line`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineOutcome {
    /// The line's summary checked and recorded the access for every word.
    Done(Outcome),
    /// The line is split (or the access would split it: it has been): the
    /// access must be checked word by word.
    PerWord,
}

impl<'m, M: EngineMemory> Engine<'m, M> {
    /// A plain access by `tid` of every byte of the line holding `addr`
    /// (the warp's lanes together), reported, if it races, as the access
    /// of `size` bytes at `addr` (one lane's). Checks the line's summary
    /// with the compact rules and keeps it with one compare-exchange; a
    /// line that is split, or that this access would make non-uniform,
    /// comes back as [`LineOutcome::PerWord`] (split now, if it was not).
    #[inline(always)]
    pub fn access_line(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        site: &AccessSite,
    ) -> LineOutcome {
        self.access_line_noted(tid, addr, size, write, site, |_| {})
    }

    /// [`access_line`](Self::access_line), calling `note` with the epoch
    /// the access carries before anything in the shadow can show it (a
    /// runtime notes the access's site there), on every path. The line's
    /// head and the thread's epoch are read together, before the note: on
    /// a GPU their round trips overlap.
    #[inline(always)]
    pub fn access_line_noted(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        site: &AccessSite,
        note: impl FnOnce(u32),
    ) -> LineOutcome {
        let clocks = self.clocks(tid);
        let head = self
            .word_span(addr, size)
            .and_then(|(first, _)| Some((first, self.mem().shadow_cell(head_word(first))?)));
        let Some((first, head)) = head else {
            note(clocks.next_access_epoch(tid));
            return LineOutcome::Done(Outcome::Clean);
        };
        // Relaxed: a summary is self-contained, like a compact cell.
        let mut h = head.load(MemOrder::Relaxed);
        // An epoch that needs the general path's errors is checked there.
        let fresh = clocks.fresh_epoch_unlocked(tid);
        note(match fresh {
            Ok(epoch) => epoch,
            Err(_) => clocks.next_access_epoch(tid),
        });
        let Ok(epoch) = fresh else {
            return LineOutcome::PerWord;
        };
        let n = AccessClock {
            tid,
            epoch,
            mask: FULL_WORD,
            write,
            ..AccessClock::NONE
        };
        loop {
            let Some(s) = LineSummary::of_head(h) else {
                return LineOutcome::PerWord;
            };
            let next = self
                .plain_compact(s.cell(), &n, &clocks)
                .and_then(|(c, race)| Some((LineSummary::from_cell(c)?, race)));
            let Some((new, race)) = next else {
                self.split_line(head_word(first));
                return LineOutcome::PerWord;
            };
            if new.raw() != h {
                if let Err(now) =
                    head.compare_exchange(h, new.raw(), MemOrder::Relaxed, MemOrder::Relaxed)
                {
                    h = now;
                    continue;
                }
            }
            let Some(prior) = race else {
                return LineOutcome::Done(Outcome::Clean);
            };
            let cur = self.plain_access(tid, addr, size, write, site);
            let mut r = cur.race(addr, epoch, &prior, &n);
            r.overlap_mask = u32::from(self.byte_mask(addr, size, first));
            self.emit(r);
            return LineOutcome::Done(Outcome::Race(r));
        }
    }

    /// Splits `word`'s line if it is summarised (see the module docs):
    /// afterwards every word's own cell is its state. Returns at once for
    /// a split line; waits while the head is locked. Inlined: on a GPU a
    /// call site in the whole-line path costs every access, taken or not.
    #[inline(always)]
    pub(crate) fn split_line(&self, word: u64) {
        let line = head_word(word);
        let Some(head) = self.mem().shadow_cell(line) else {
            return;
        };
        loop {
            // Acquire: pairs with a splitter's release of the head, so the
            // words it stored are seen by what follows.
            let h = head.load(MemOrder::Acquire);
            match ShadowCell(h).view() {
                CellView::Locked => M::Atomics::spin(),
                CellView::Line => {
                    if head
                        .compare_exchange(
                            h,
                            ShadowCell::LOCKED.0,
                            MemOrder::Acquire,
                            MemOrder::Relaxed,
                        )
                        .is_err()
                    {
                        continue;
                    }
                    let cell = LineSummary(h).cell();
                    for w in line + 1..line + LINE_WORDS {
                        if let Some(c) = self.mem().shadow_cell(w) {
                            c.store(cell.0, MemOrder::Relaxed);
                        }
                    }
                    head.store(cell.0, MemOrder::Release);
                    return;
                }
                CellView::Compact if h == 0 => {
                    // Nothing to copy: the other cells are zero, empty.
                    if head
                        .compare_exchange(
                            0,
                            ShadowCell::EMPTY_SPLIT.0,
                            MemOrder::AcqRel,
                            MemOrder::Relaxed,
                        )
                        .is_ok()
                    {
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// Whether a per-word access of `word` that read `cell` must split the
    /// line first: the cell is a summary (the head), or zero where it may
    /// stand for a summary (a non-head word).
    #[inline(always)]
    pub(crate) fn needs_split(word: u64, cell: u64) -> bool {
        (cell == 0 && word != head_word(word)) || matches!(ShadowCell(cell).view(), CellView::Line)
    }

    /// For an access `n` of part of a summarised line: `Some(race)` when
    /// the summary already records it (its clock of `n`'s kind is `n`'s
    /// thread and epoch: FastTrack's same epoch), so the line stays as it
    /// is; `None` when the line must be split for it.
    #[inline(always)]
    pub(crate) fn line_covers(
        &self,
        head: &U64Of<M>,
        n: &AccessClock,
        clocks: &crate::clock::ThreadClocks<'m, M::Atomics>,
    ) -> Option<Option<AccessClock>> {
        let s = LineSummary::of_head(head.load(MemOrder::Relaxed))?;
        Self::same_epoch(s.cell(), n, clocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_model::Scope;

    fn clock(tid: u32, epoch: u32, write: bool) -> AccessClock {
        AccessClock {
            tid,
            epoch,
            mask: FULL_WORD,
            write,
            ..AccessClock::NONE
        }
    }

    #[test]
    fn summaries_round_trip_through_their_cell() {
        let none = AccessClock::NONE;
        for (w, r) in [
            (none, none),
            (clock(3, 7, true), none),
            (none, clock(2047, 32767, false)),
            (clock(2047, 1, true), clock(0, 32767, false)),
        ] {
            let c = ShadowCell::from_clocks(&w, &r).unwrap();
            let s = LineSummary::from_cell(c).expect("whole-word plain clocks summarise");
            assert_eq!(s.cell(), c);
            assert_eq!(LineSummary::of_head(s.raw()), Some(s));
            assert_eq!(s.raw() & 0xff, 0);
            assert_eq!(s.raw() >> 62, 0);
        }
    }

    #[test]
    fn only_uniform_plain_states_summarise() {
        let part = AccessClock {
            mask: 0b0011,
            ..clock(1, 1, true)
        };
        let c = ShadowCell::from_clocks(&part, &AccessClock::NONE).unwrap();
        assert_eq!(LineSummary::from_cell(c), None);
        let atomic = AccessClock {
            atomic: true,
            extent: FULL_WORD,
            scope: Scope::Device,
            ..clock(1, 1, true)
        };
        let c = ShadowCell::from_clocks(&atomic, &AccessClock::NONE).unwrap();
        assert_eq!(LineSummary::from_cell(c), None);
        assert_eq!(LineSummary::from_cell(ShadowCell::LOCKED), None);
        assert_eq!(LineSummary::from_cell(ShadowCell::inflated(5)), None);
    }

    #[test]
    fn heads_of_split_lines_are_not_summaries() {
        let c = ShadowCell::from_clocks(&clock(1, 1, true), &AccessClock::NONE).unwrap();
        assert_eq!(LineSummary::of_head(c.0), None);
        assert_eq!(LineSummary::of_head(ShadowCell::EMPTY_SPLIT.0), None);
        assert_eq!(LineSummary::of_head(ShadowCell::LOCKED.0), None);
        assert_eq!(LineSummary::of_head(ShadowCell::inflated(0).0), None);
        assert_eq!(LineSummary::of_head(0), Some(LineSummary::EMPTY));
        assert_eq!(ShadowCell::EMPTY_SPLIT.view(), CellView::Compact);
        assert_eq!(ShadowCell::EMPTY_SPLIT.write_clock(), None);
        assert_eq!(ShadowCell::EMPTY_SPLIT.read_clock(), None);
    }

    #[test]
    fn words_find_their_head() {
        assert_eq!(head_word(0), 0);
        assert_eq!(head_word(31), 0);
        assert_eq!(head_word(32), 32);
        assert_eq!(head_word(70), 64);
    }
}
