//! Which words each clock slot is between recording in the engine and
//! noting in the side table.
//!
//! A slot's access reaches the engine first and the side table just after
//! (the side table keeps the entry a report of this access itself needs).
//! A report on another worker can therefore find the engine's record of
//! the prior access before its side-table entry. Rather than poll a fixed
//! number of times, which a busy machine can outlast (the prior's worker
//! descheduled between the two steps), the reporter waits while the prior
//! slot says it is still noting the reported word.
//!
//! Ordering: the mark is stored, then a release fence, before the engine
//! sees the access; the reporter, having seen the engine's record, issues
//! an acquire fence before it reads the mark. So it reads the mark or a
//! later value; the mark is cleared with a release store after the note,
//! so a cleared mark means the entry is visible.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Bits of a mark that hold how many words follow its first.
const SPAN_BITS: u32 = 24;

/// Per clock slot of a device group: the words the slot's access in
/// flight covers, from its engine record until its side-table note.
pub(super) struct NotingSlots {
    /// By slot: `(first word + 1) << SPAN_BITS | (last - first)`, 0 when
    /// the slot has no access in flight.
    marks: Box<[AtomicU64]>,
}

/// Clears a slot's mark when the access has been noted (dropped).
pub(super) struct Noting<'a> {
    mark: Option<&'a AtomicU64>,
}

impl Noting<'_> {
    /// A guard that marks nothing (an access outside the checked memory).
    pub(super) fn unmarked() -> Self {
        Noting { mark: None }
    }
}

impl NotingSlots {
    /// Marks for `slots` clock slots, none in flight.
    pub(super) fn new(slots: usize) -> Self {
        NotingSlots {
            marks: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks slot `tid` as having an access of the words `first..=last` in
    /// flight, until the returned guard drops. A slot outside the group,
    /// or a span too long to mark, is not marked (its reporters fall back
    /// to a bounded wait).
    pub(super) fn begin(&self, tid: u32, first: u64, last: u64) -> Noting<'_> {
        let span = last - first;
        let mark = self
            .marks
            .get(tid as usize)
            .filter(|_| span < (1 << SPAN_BITS) && first < (1 << (64 - SPAN_BITS)) - 1);
        if let Some(m) = mark {
            m.store(((first + 1) << SPAN_BITS) | span, Ordering::Relaxed);
            // The mark before the engine's record of the access.
            fence(Ordering::Release);
        }
        Noting { mark }
    }

    /// True when slot `tid` has an access of `word` in flight. Call it
    /// after seeing the engine's record of that slot's access.
    pub(super) fn covers(&self, tid: u32, word: u64) -> bool {
        fence(Ordering::Acquire);
        let Some(m) = self.marks.get(tid as usize) else {
            return false;
        };
        let mark = m.load(Ordering::Acquire);
        let first = (mark >> SPAN_BITS).wrapping_sub(1);
        mark != 0 && (first..=first + (mark & ((1 << SPAN_BITS) - 1))).contains(&word)
    }
}

impl Drop for Noting<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.mark {
            m.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NotingSlots;

    #[test]
    fn a_slot_covers_its_access_words_until_the_note() {
        let slots = NotingSlots::new(4);
        let noting = slots.begin(2, 10, 13);
        assert!(slots.covers(2, 10) && slots.covers(2, 13));
        assert!(!slots.covers(2, 9) && !slots.covers(2, 14));
        assert!(!slots.covers(1, 10), "another slot");
        assert!(!slots.covers(9, 10), "a slot outside the group");
        drop(noting);
        assert!(!slots.covers(2, 10));
    }

    #[test]
    fn word_zero_and_a_slot_outside_the_group() {
        let slots = NotingSlots::new(1);
        let noting = slots.begin(0, 0, 0);
        assert!(slots.covers(0, 0) && !slots.covers(0, 1));
        drop(noting);
        let outside = slots.begin(5, 0, 0);
        assert!(!slots.covers(5, 0));
        drop(outside);
    }

    #[test]
    fn the_largest_markable_word_and_span() {
        let slots = NotingSlots::new(1);
        let top = (1u64 << (64 - super::SPAN_BITS)) - 2;
        let noting = slots.begin(0, top, top);
        assert!(slots.covers(0, top), "the largest markable word");
        drop(noting);
        let past = slots.begin(0, top + 1, top + 1);
        assert!(!slots.covers(0, top + 1), "past it: not marked");
        drop(past);
        let long = slots.begin(0, 0, 1 << super::SPAN_BITS);
        assert!(!slots.covers(0, 0), "a span too long: not marked");
        drop(long);
    }
}
