//! A launch's read-only ranges: device memory no thread of the launch
//! writes, known from the launch's borrows.
//!
//! A typed launch passes `&DeviceBuffer<T>` (or another shared view) for a
//! `GlobalSlice<T>` or `GlobalPtr<T>` parameter, and the host's borrow
//! rules then forbid any mutable view of those bytes among the launch's
//! arguments. So no thread of the launch writes them, and two threads of
//! one block cannot race on them: the GPU sanitizer's same-block check
//! (the CTA slot's table of global words, `vigil_shared::block`) skips
//! reads inside these ranges. Races with other launches, streams, copies
//! and devices are the engine's, which still sees every read.
//!
//! The host keeps the [`READ_ONLY_RANGES`] largest such views of a launch
//! and passes them as hidden parameters of the sanitized entry
//! ([`crate::gpu::HIDDEN_PARAMS`]); a launch with a `Peers` argument, an
//! untyped one, or a peer's slice keeps none (those can alias a buffer of
//! the same launch that it writes). Views built in the kernel with
//! `unsafe` (`from_raw_parts`) are trusted like the host's borrows: a
//! write through such a view to a launch-read-only buffer races with the
//! block's reads of it unchecked.
//!
//! The same slots also carry **thread-owned** ranges: a per-thread
//! partition the launch proved (`ThreadElemsMut`, `ThreadCellsMut`,
//! `GridStrideMut`: each element to one thread) and that no other argument
//! of the launch reaches. Only its owner touches an element there, so no
//! two threads of a block can race on it, reading or writing: the
//! same-block check skips every access inside. An owned range is marked
//! by [`OWNED`] in its start and end, so that [`ReadOnlyRanges::covers`] (what the
//! engine takes for a read of read-only memory) never matches it.

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

/// Read-only ranges a launch passes to its sanitized entry.
pub const READ_ONLY_RANGES: usize = 2;

/// The bit of a range's start that marks it thread-owned (device
/// addresses stay far below it).
pub const OWNED: u64 = 1 << 63;

/// Up to [`READ_ONLY_RANGES`] byte ranges `[start, end)` a launch only
/// reads; an empty range (`start == end`, the zero value) covers nothing.
///
/// ```
/// use vigil_shared::read_only::ReadOnlyRanges;
///
/// // Three read-only views; the two largest are kept.
/// let r = ReadOnlyRanges::largest([(0x1000, 64), (0x8000, 4096), (0x2000, 256)]);
/// assert!(r.covers(0x8000, 4));
/// assert!(r.covers(0x20fc, 4));
/// assert!(!r.covers(0x1000, 4)); // the smallest view was dropped
/// assert!(!r.covers(0x20fe, 4)); // past the end of its view
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ReadOnlyRanges {
    /// `[start, end)` byte addresses, largest first.
    pub ranges: [[u64; 2]; READ_ONLY_RANGES],
}
const _: () = assert!(size_of::<ReadOnlyRanges>() == 32);
const _: () = assert!(size_of::<ReadOnlyRanges>() == 8 * ReadOnlyRanges::WORDS);
const _: () = assert!(offset_of!(ReadOnlyRanges, ranges) == 0);

impl ReadOnlyRanges {
    /// No range: every access is checked.
    pub const NONE: ReadOnlyRanges = ReadOnlyRanges {
        ranges: [[0; 2]; READ_ONLY_RANGES],
    };

    /// The [`READ_ONLY_RANGES`] largest of `views` (`(address, bytes)`);
    /// empty views are skipped.
    pub fn largest(views: impl IntoIterator<Item = (u64, u64)>) -> ReadOnlyRanges {
        let mut kept = ReadOnlyRanges::NONE;
        for (addr, bytes) in views {
            kept.insert(addr, bytes);
        }
        kept
    }

    /// Adds the read-only view of `bytes` at `addr` if it is larger than
    /// one kept, dropping the smallest (an empty view changes nothing).
    pub fn insert(&mut self, addr: u64, bytes: u64) {
        self.keep([addr, addr.saturating_add(bytes)]);
    }

    /// Adds the thread-owned view of `bytes` at `addr` as
    /// [`insert`](Self::insert) adds a read-only one.
    pub fn insert_owned(&mut self, addr: u64, bytes: u64) {
        self.keep([addr | OWNED, addr.saturating_add(bytes) | OWNED]);
    }

    /// Keeps `new` if it is larger than a range kept.
    fn keep(&mut self, mut new: [u64; 2]) {
        // Insertion into the short array kept largest first.
        for slot in &mut self.ranges {
            if new[1] - new[0] > slot[1] - slot[0] {
                core::mem::swap(slot, &mut new);
            }
        }
    }

    /// The ranges as the hidden parameters' `u64`s, in order.
    pub fn words(&self) -> [u64; Self::WORDS] {
        bytemuck::cast(*self)
    }

    /// The ranges from the hidden parameters' `u64`s.
    pub fn from_words(words: [u64; Self::WORDS]) -> ReadOnlyRanges {
        bytemuck::cast(words)
    }

    /// The hidden parameters' `u64`s of the ranges ([`words`](Self::words)).
    pub const WORDS: usize = 2 * READ_ONLY_RANGES;

    /// The word of the ranges that thread `lane` of a CTA of `lanes`
    /// threads stores in its CTA's state at a sanitized entry, if any: one
    /// each for the first threads of the second warp when there is one,
    /// so that the first thread, which waits for the entry's round trip,
    /// does not also carry them, or else for the first warp's threads
    /// after the first. In a CTA of at most [`WORDS`](Self::WORDS) threads
    /// none does: its first thread stores them all.
    ///
    /// ```
    /// use vigil_shared::read_only::ReadOnlyRanges;
    ///
    /// assert_eq!(ReadOnlyRanges::word_stored_by(33, 256), Some(1));
    /// assert_eq!(ReadOnlyRanges::word_stored_by(0, 256), None);
    /// assert_eq!(ReadOnlyRanges::word_stored_by(1, 8), Some(0));
    /// assert_eq!(ReadOnlyRanges::word_stored_by(0, 2), None);
    /// ```
    #[inline(always)]
    pub const fn word_stored_by(lane: u32, lanes: u32) -> Option<usize> {
        let words = Self::WORDS as u32;
        let first = if lanes >= 32 + words {
            32
        } else if !Self::stored_by_first_thread(lanes) {
            1
        } else {
            return None;
        };
        if lane >= first && lane - first < words {
            Some((lane - first) as usize)
        } else {
            None
        }
    }

    /// Whether a CTA of `lanes` threads is too small to share the
    /// ranges' words out ([`word_stored_by`](Self::word_stored_by)): its
    /// first thread stores them all at entry.
    ///
    /// ```
    /// use vigil_shared::read_only::ReadOnlyRanges;
    ///
    /// assert!(ReadOnlyRanges::stored_by_first_thread(ReadOnlyRanges::WORDS as u32));
    /// assert!(!ReadOnlyRanges::stored_by_first_thread(32));
    /// ```
    #[inline(always)]
    pub const fn stored_by_first_thread(lanes: u32) -> bool {
        lanes <= Self::WORDS as u32
    }

    /// Whether the `size` bytes at `addr` lie inside one of the
    /// thread-owned ranges.
    #[inline(always)]
    pub fn owned_covers(&self, addr: u64, size: u64) -> bool {
        // An access with the bit set is no device address: covered by none.
        addr & OWNED == 0 && self.covers(addr | OWNED, size)
    }

    /// Whether the same-block check skips an access of `size` bytes at
    /// `addr` (`writes`: a write): a read of read-only memory, or any
    /// access to a thread-owned range.
    #[inline(always)]
    pub fn skips_block_check(&self, addr: u64, size: u64, writes: bool) -> bool {
        (!writes && self.covers(addr, size)) || self.owned_covers(addr, size)
    }

    /// Whether the `size` bytes at `addr` lie inside one of the read-only
    /// ranges.
    #[inline(always)]
    pub fn covers(&self, addr: u64, size: u64) -> bool {
        let end = addr.wrapping_add(size);
        // Branch-free: both compares of both ranges, then one test. An
        // empty range, an empty access and one wrapping around cover
        // nothing.
        let inside = |r: [u64; 2]| (addr >= r[0]) & (end <= r[1]) & (end > addr);
        inside(self.ranges[0]) | inside(self.ranges[1])
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn every_word_is_stored_once_at_entry() {
        for lanes in 1..=1024u32 {
            let mut stores = [0u32; ReadOnlyRanges::WORDS];
            for lane in 0..lanes {
                if let Some(w) = ReadOnlyRanges::word_stored_by(lane, lanes) {
                    assert_ne!(lane, 0, "the first thread stores no single word");
                    stores[w] += 1;
                }
            }
            let expected = u32::from(!ReadOnlyRanges::stored_by_first_thread(lanes));
            assert_eq!(stores, [expected; ReadOnlyRanges::WORDS], "{lanes} threads");
        }
    }

    #[test]
    fn none_covers_nothing() {
        assert!(!ReadOnlyRanges::NONE.covers(0, 4));
        assert!(!ReadOnlyRanges::NONE.covers(0, 0));
        assert!(!ReadOnlyRanges::largest([(0x100, 0x40)]).covers(0x100, 0));
    }

    #[test]
    fn keeps_the_largest_views_in_any_order() {
        let views = [(100, 10), (1000, 500), (0, 0), (5000, 40), (200, 300)];
        // Every order of the same views keeps the same two.
        for rot in 0..views.len() {
            let mut v = views;
            v.rotate_left(rot);
            let r = ReadOnlyRanges::largest(v);
            assert_eq!(r.ranges, [[1000, 1500], [200, 500]], "rotation {rot}");
        }
    }

    #[test]
    fn covers_only_whole_accesses_inside_a_range() {
        let r = ReadOnlyRanges::largest([(0x100, 0x40), (0x400, 0x10)]);
        assert!(r.covers(0x100, 4));
        assert!(r.covers(0x13c, 4));
        assert!(!r.covers(0x13e, 4), "straddles the end");
        assert!(!r.covers(0xfc, 8), "straddles the start");
        assert!(r.covers(0x400, 16));
        assert!(!r.covers(0x410, 1));
        assert!(!r.covers(u64::MAX - 1, 4), "wraps around");
    }

    proptest::proptest! {
        /// Against a reference: the kept ranges are views of the input,
        /// their sizes those of a sort of the non-empty views by size,
        /// largest first (ties may keep either view), and an access is
        /// covered when it lies whole inside one of them. Small sizes
        /// make ties, overlaps and empty views common.
        #[test]
        fn keeps_the_largest_sizes_of_the_views(
            views in proptest::collection::vec((0u64..256, 0u64..6), 0..10),
            probes in proptest::collection::vec((0u64..264, 0u64..6), 1..32),
        ) {
            let mut ranges: Vec<[u64; 2]> = views
                .iter()
                .filter(|&&(_, len)| len > 0)
                .map(|&(addr, len)| [addr, addr + len])
                .collect();
            let mut sizes: Vec<u64> = ranges.iter().map(|r| r[1] - r[0]).collect();
            sizes.sort_by_key(|&n| core::cmp::Reverse(n));
            sizes.resize(sizes.len().max(READ_ONLY_RANGES), 0);
            let kept = ReadOnlyRanges::largest(views.iter().copied());
            let kept_sizes: Vec<u64> = kept.ranges.iter().map(|r| r[1] - r[0]).collect();
            proptest::prop_assert_eq!(&kept_sizes[..], &sizes[..READ_ONLY_RANGES]);
            for r in kept.ranges.iter().filter(|r| r[1] > r[0]) {
                // Each kept range is a distinct view of the input.
                let at = ranges.iter().position(|v| v == r);
                proptest::prop_assert!(at.is_some(), "{:?} is no view", r);
                ranges.swap_remove(at.unwrap_or_default());
            }
            for (addr, size) in probes {
                let want = size > 0
                    && kept.ranges.iter().any(|r| addr >= r[0] && addr + size <= r[1]);
                proptest::prop_assert_eq!(kept.covers(addr, size), want, "{}+{}", addr, size);
            }
        }
    }

    #[test]
    fn owned_ranges_are_apart_from_read_only_ones() {
        let mut r = ReadOnlyRanges::NONE;
        r.insert(0x1000, 0x100);
        r.insert_owned(0x8000, 0x40);
        assert!(r.covers(0x1000, 4) && !r.owned_covers(0x1000, 4));
        assert!(r.owned_covers(0x8000, 4) && r.owned_covers(0x803c, 4));
        assert!(!r.covers(0x8000, 4), "an owned range is not read-only");
        assert!(!r.owned_covers(0x803e, 4), "straddles the end");
        assert!(!r.owned_covers(0x8000 | OWNED, 4), "no device address");
        // The same-block check skips reads of read-only memory and every
        // access to owned memory.
        assert!(r.skips_block_check(0x1000, 4, false) && !r.skips_block_check(0x1000, 4, true));
        assert!(r.skips_block_check(0x8000, 4, true) && r.skips_block_check(0x8000, 4, false));
        assert!(!r.skips_block_check(0x4000, 4, false));
        // The largest two views are kept, of either kind.
        r.insert_owned(0x20000, 0x200);
        assert!(r.covers(0x1000, 4) && r.owned_covers(0x201fc, 4));
        assert!(!r.owned_covers(0x8000, 4), "the smallest view was dropped");
    }

    #[test]
    fn round_trips_through_the_hidden_words() {
        let r = ReadOnlyRanges::largest([(8, 8), (64, 32)]);
        assert_eq!(ReadOnlyRanges::from_words(r.words()), r);
    }
}
