//! What a CTA knows of other CTAs beyond its launch's host order:
//! sorted lists of serial intervals with the epoch each is known up to,
//! kept as immutable *snapshots* in an arena.
//!
//! A CTA that never synchronised with another through memory knows only
//! its host order and needs none of this. Its first acquire merges what
//! the releaser knew into a new snapshot; the CTA then names that
//! snapshot ([`SnapRef`]). Snapshots never change once written, so
//! readers need no lock; a release hands out the releaser's current
//! snapshot by reference. Merging keeps intervals sorted and disjoint
//! and joins touching ones of equal epoch, so a grid barrier's knowledge
//! of a whole launch is one interval.
//!
//! Bounds: a snapshot holds at most [`MAX_INTERVALS`]; past that its
//! tail is *coarsened* (neighbouring intervals join at the larger epoch),
//! which can only hide races, and is counted. An arena with no room left
//! makes the merging CTA *omniscient* ([`SnapRef::ALL`]: every access
//! counts as ordered for it), counted likewise. The host resets the arena
//! (a new generation) only when every launch it holds snapshots of is
//! ordered before all later work, so stale references mean "nothing
//! beyond the host order" and are exact.
//!
//! ```text
//! arena words: | cursor | capacity | generation | lost | coarsened | pad.. | snapshots ...
//! snapshot:    | count | (lo, hi, epoch) * count
//! SnapRef:     | generation (8) | word offset (24) |   0: none, u32::MAX: all
//! ```

use core::sync::atomic::Ordering as MemOrder;

use super::serial::{lane_start, LaneBounds, Serial, LANES};
use crate::atomic::{AtomicFamily, AtomicU32Ops};

/// Intervals a snapshot holds at most before it is coarsened.
pub const MAX_INTERVALS: usize = 4096;

/// Header words of the arena.
pub const ARENA_HEADER_WORDS: usize = 8;

const OFFSET_BITS: u32 = 24;
const OFFSET_MASK: u32 = (1 << OFFSET_BITS) - 1;
/// Words of an arena a snapshot reference can reach (a longer arena uses
/// this many).
pub const MAX_ARENA_WORDS: usize = OFFSET_MASK as usize;

/// Arena header word indices.
pub mod header {
    /// Next free word (bump allocation).
    pub const CURSOR: usize = 0;
    /// Words in the arena.
    pub const CAPACITY: usize = 1;
    /// Generation (low 8 bits name snapshots).
    pub const GENERATION: usize = 2;
    /// Merges that found no room (the merging CTA became omniscient).
    pub const LOST: usize = 3;
    /// Snapshots whose tail was coarsened.
    pub const COARSENED: usize = 4;
    /// What the releases that could not leave their heads on their words
    /// (no pool record left) knew, joined ([`SnapRef`](super::SnapRef)).
    pub const LOST_RELEASES: usize = 5;
    /// The lock of [`LOST_RELEASES`].
    pub const LOST_LOCK: usize = 6;
}

/// A reference to a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SnapRef(pub u32);

impl SnapRef {
    /// Knows nothing beyond the host order.
    pub const NONE: SnapRef = SnapRef(0);
    /// Knows everything: history was lost (counted), so nothing is
    /// reported against this CTA's view.
    pub const ALL: SnapRef = SnapRef(u32::MAX);

    /// The snapshot at word `offset` of generation `generation`.
    #[inline(always)]
    pub const fn new(generation: u32, offset: u32) -> SnapRef {
        SnapRef((generation & 0xff) << OFFSET_BITS | (offset & OFFSET_MASK))
    }

    /// Whether it names no snapshot.
    #[inline(always)]
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The word offset.
    #[inline(always)]
    pub const fn offset(self) -> usize {
        (self.0 & OFFSET_MASK) as usize
    }

    /// The generation bits.
    #[inline(always)]
    pub const fn generation(self) -> u32 {
        self.0 >> OFFSET_BITS
    }
}

/// Serials `lo..hi` known up to `epoch` (accesses they made in an epoch
/// at most this one happen before the knower's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// First serial.
    pub lo: Serial,
    /// One past the last serial.
    pub hi: Serial,
    /// Epoch known.
    pub epoch: u32,
}

/// Epoch of intervals every access of a serial lies in (host order).
pub const ALL_EPOCHS: u32 = u32::MAX;

/// A source of sorted, disjoint intervals.
pub trait Intervals {
    /// Number of intervals.
    fn len(&self) -> usize;
    /// Interval `i`.
    fn get(&self, i: usize) -> Interval;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A slice of intervals as a source.
pub struct List<'a>(pub &'a [Interval]);

impl Intervals for List<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Interval {
        self.0[i]
    }
}

/// The snapshot arena over `words` (a [`header`] then snapshots), and
/// the exit log beside it.
///
/// The *exit log* lists, for CTAs that ended knowing CTAs of other
/// launches, their serial and final snapshot: a launch the host ordered
/// after theirs inherits that knowledge (host order is transitive through
/// what a finished launch acquired), looked up only when an access is
/// about to be called unordered.
///
/// ```text
/// exit log: | count | capacity | lost | pad | (serial, SnapRef) * capacity
/// ```
pub struct Arena<'m, F: AtomicFamily> {
    words: &'m [F::U32],
    exits: &'m [F::U32],
    inherited: &'m [F::U32],
}

/// Header words of the exit log.
pub const EXIT_HEADER_WORDS: usize = 4;

/// A snapshot's intervals in the arena.
pub struct Snapshot<'m, F: AtomicFamily> {
    words: &'m [F::U32],
}

impl<F: AtomicFamily> Intervals for Snapshot<'_, F> {
    fn len(&self) -> usize {
        self.words
            .first()
            .map_or(0, |w| w.load(MemOrder::Relaxed) as usize)
    }
    fn get(&self, i: usize) -> Interval {
        let at = 1 + 3 * i;
        Interval {
            lo: self.words[at].load(MemOrder::Relaxed),
            hi: self.words[at + 1].load(MemOrder::Relaxed),
            epoch: self.words[at + 2].load(MemOrder::Relaxed),
        }
    }
}

impl<F: AtomicFamily> Snapshot<'_, F> {
    /// The first serial from `from` (below `to`) not known up to `e`, or
    /// `to`.
    pub fn first_unknown(&self, from: Serial, to: Serial, e: u32) -> Serial {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid).hi <= from {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut p = from;
        let mut i = lo;
        while p < to && i < self.len() {
            let iv = self.get(i);
            if iv.lo > p || iv.epoch < e {
                return p;
            }
            p = iv.hi;
            i += 1;
        }
        p.min(to)
    }

    /// The epoch `s` is known up to (0: not known).
    pub fn epoch_of(&self, s: Serial) -> u32 {
        // Binary search for the last interval starting at or below `s`.
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid).lo <= s {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return 0;
        }
        let iv = self.get(lo - 1);
        if s < iv.hi {
            iv.epoch
        } else {
            0
        }
    }
}

impl<'m, F: AtomicFamily> Arena<'m, F> {
    /// The arena in `words` (empty: no arena; every merge is lost) with
    /// the exit log in `exits` (empty: none) and the launch ring
    /// `launches`, whose records keep what each launch inherited from the
    /// log (computed by the first CTA that needs it).
    pub fn new(words: &'m [F::U32], exits: &'m [F::U32], inherited: &'m [F::U32]) -> Self {
        Arena {
            words,
            exits,
            inherited,
        }
    }

    /// Prepares `words` as an empty arena of generation `generation`
    /// (host side, with nothing running).
    pub fn init(words: &[F::U32], generation: u32) {
        if words.len() < ARENA_HEADER_WORDS {
            return;
        }
        words[header::CURSOR].store(ARENA_HEADER_WORDS as u32, MemOrder::Relaxed);
        words[header::CAPACITY].store(words.len().min(MAX_ARENA_WORDS) as u32, MemOrder::Relaxed);
        words[header::GENERATION].store(generation, MemOrder::Relaxed);
    }

    /// Prepares `exits` as an empty exit log (host side).
    pub fn init_exits(exits: &[F::U32]) {
        if exits.len() < EXIT_HEADER_WORDS {
            return;
        }
        for w in &exits[..EXIT_HEADER_WORDS] {
            w.store(0, MemOrder::Relaxed);
        }
        let cap = (exits.len() - EXIT_HEADER_WORDS) / 2;
        exits[1].store(cap as u32, MemOrder::Relaxed);
    }

    /// The arena header a renewal leaves, from the header `old`: empty,
    /// of the next generation, with no lost releases; the counts of lost
    /// precision are kept for the host to take. (Shared by [`renew`] and
    /// a host that writes the header into device memory itself.)
    ///
    /// [`renew`]: Self::renew
    pub fn renewed_header(old: &[u32; ARENA_HEADER_WORDS]) -> [u32; ARENA_HEADER_WORDS] {
        let mut h = *old;
        h[header::CURSOR] = ARENA_HEADER_WORDS as u32;
        h[header::GENERATION] = old[header::GENERATION].wrapping_add(1);
        h[header::LOST_RELEASES] = SnapRef::NONE.0;
        h[header::LOST_LOCK] = 0;
        h
    }

    /// Empties the arena `words` (a new generation), the exit log `exits`
    /// and the SC-fence accumulators `sc`, host side, with nothing
    /// running: call only once every serial that any of them may name is
    /// ordered before every launch still to come (the host's launch order
    /// says when), so that what they knew is known by host order anyway.
    /// References to the old generation's snapshots left elsewhere (the
    /// release heads on words) then read as knowing nothing. (Only after
    /// 256 renewals could one name a snapshot of a later generation: it
    /// can then only make an access count as ordered, never report one.)
    pub fn renew(words: &[F::U32], exits: &[F::U32], sc: &[F::U32]) {
        if let Some(head) = words.get(..ARENA_HEADER_WORDS) {
            let old: [u32; ARENA_HEADER_WORDS] =
                core::array::from_fn(|i| head[i].load(MemOrder::Relaxed));
            for (w, v) in head.iter().zip(Self::renewed_header(&old)) {
                w.store(v, MemOrder::Relaxed);
            }
        }
        if exits.len() >= EXIT_HEADER_WORDS {
            // The entries first, then the count: a log of no entries.
            for w in &exits[EXIT_HEADER_WORDS..] {
                w.store(0, MemOrder::Relaxed);
            }
            exits[0].store(0, MemOrder::Release);
        }
        for w in sc {
            w.store(0, MemOrder::Relaxed);
        }
    }

    /// Logs that CTA `serial` ended knowing `known`.
    pub fn log_exit(&self, serial: Serial, known: SnapRef) {
        if self.exits.len() < EXIT_HEADER_WORDS {
            return;
        }
        let cap = self.exits[1].load(MemOrder::Relaxed);
        let i = self.exits[0].fetch_add(1, MemOrder::Relaxed);
        if i >= cap {
            self.exits[2].fetch_add(1, MemOrder::Relaxed);
            return;
        }
        let at = EXIT_HEADER_WORDS + 2 * i as usize;
        self.exits[at + 1].store(known.0, MemOrder::Relaxed);
        self.exits[at].store(serial, MemOrder::Release);
    }

    /// The logged exits (serial, snapshot), those fully written.
    pub fn exits(&self) -> impl Iterator<Item = (Serial, SnapRef)> + '_ {
        let n = if self.exits.len() < EXIT_HEADER_WORDS {
            0
        } else {
            let count = self.exits[0].load(MemOrder::Acquire);
            count.min(self.exits[1].load(MemOrder::Relaxed)) as usize
        };
        (0..n).filter_map(move |i| {
            let at = EXIT_HEADER_WORDS + 2 * i;
            let serial = self.exits[at].load(MemOrder::Acquire);
            (serial != 0).then(|| (serial, SnapRef(self.exits[at + 1].load(MemOrder::Relaxed))))
        })
    }

    /// What launch `launch` (a [`LaneRef`](super::memory::LaneRef)) whose
    /// host order is `orders` inherited from the exit log: the union of
    /// the logged snapshots of CTAs of launches it orders. Computed once
    /// per launch (its launches ended before it began, so the entries
    /// that apply are all logged by then).
    pub fn inherited(&self, launch: u32, orders: impl Fn(Serial) -> bool) -> SnapRef {
        const UNKNOWN: u32 = 0;
        const COMPUTING: u32 = 1;
        const DONE: u32 = 2;
        if self.exits.len() < EXIT_HEADER_WORDS || self.exits[0].load(MemOrder::Acquire) == 0 {
            return SnapRef::NONE;
        }
        let Some(rec) = super::memory::launch_record::get::<F>(self.inherited, launch) else {
            return self.compute_inherited(&orders);
        };
        let words = &rec[super::memory::launch_record::INHERITED_STATE
            ..=super::memory::launch_record::INHERITED];
        loop {
            match words[0].load(MemOrder::Acquire) {
                DONE => return SnapRef(words[1].load(MemOrder::Relaxed)),
                UNKNOWN => {
                    if words[0]
                        .compare_exchange(UNKNOWN, COMPUTING, MemOrder::Acquire, MemOrder::Relaxed)
                        .is_ok()
                    {
                        let r = self.compute_inherited(&orders);
                        words[1].store(r.0, MemOrder::Relaxed);
                        words[0].store(DONE, MemOrder::Release);
                        return r;
                    }
                }
                _ => F::spin(),
            }
        }
    }

    fn compute_inherited(&self, orders: &impl Fn(Serial) -> bool) -> SnapRef {
        let mut acc = SnapRef::NONE;
        for (x, known) in self.exits() {
            if orders(x) {
                acc = self.merge(acc, known, &[]);
            }
        }
        acc
    }

    fn generation(&self) -> u32 {
        self.words
            .get(header::GENERATION)
            .map_or(0, |w| w.load(MemOrder::Relaxed))
    }

    fn count(&self, which: usize) {
        if let Some(w) = self.words.get(which) {
            w.fetch_add(1, MemOrder::Relaxed);
        }
    }

    /// The snapshot `r` names, if it is one of this generation.
    pub fn snapshot(&self, r: SnapRef) -> Option<Snapshot<'m, F>> {
        if r.is_none() || r == SnapRef::ALL || r.generation() != self.generation() & 0xff {
            return None;
        }
        let words = self.words.get(r.offset()..)?;
        Some(Snapshot { words })
    }

    /// The epoch snapshot `r` knows `s` up to (0: not known; all epochs
    /// for [`SnapRef::ALL`]).
    pub fn epoch_of(&self, r: SnapRef, s: Serial) -> u32 {
        if r == SnapRef::ALL {
            return ALL_EPOCHS;
        }
        self.snapshot(r).map_or(0, |snap| snap.epoch_of(s))
    }

    /// The first serial from `from` (below `to`) that snapshot `r` does
    /// not know up to `e`, or `to`.
    pub fn first_unknown(&self, r: SnapRef, from: Serial, to: Serial, e: u32) -> Serial {
        if r == SnapRef::ALL {
            return to;
        }
        self.snapshot(r)
            .map_or(from, |snap| snap.first_unknown(from, to, e))
    }

    /// Counts a merge that found no room.
    pub fn count_lost(&self) {
        self.count(header::LOST);
    }

    /// What releases that lost their heads knew, joined
    /// ([`SnapRef::NONE`]: none was lost).
    #[inline(always)]
    pub fn lost_releases(&self) -> SnapRef {
        self.words
            .get(header::LOST_RELEASES)
            .map_or(SnapRef::NONE, |w| SnapRef(w.load(MemOrder::Acquire)))
    }

    /// Joins `known` into [`lost_releases`](Self::lost_releases) (a
    /// release whose heads found no record; counted).
    pub fn lose_release(&self, known: SnapRef) {
        let (Some(lock), Some(acc)) = (
            self.words.get(header::LOST_LOCK),
            self.words.get(header::LOST_RELEASES),
        ) else {
            return;
        };
        self.count_lost();
        while lock
            .compare_exchange(0, 1, MemOrder::Acquire, MemOrder::Relaxed)
            .is_err()
        {
            F::spin();
        }
        let joined = self.merge(SnapRef(acc.load(MemOrder::Relaxed)), known, &[]);
        acc.store(joined.0, MemOrder::Release);
        lock.store(0, MemOrder::Release);
    }

    /// Words for a snapshot of up to `n` intervals, or `None` when full.
    fn alloc(&self, n: usize) -> Option<usize> {
        let need = u32::try_from(1 + 3 * n).ok()?;
        let cap = self.words.get(header::CAPACITY)?.load(MemOrder::Relaxed);
        let at = self.words[header::CURSOR].fetch_add(need, MemOrder::Relaxed);
        (at.checked_add(need)? <= cap).then_some(at as usize)
    }

    /// A new snapshot: the union (largest epoch per serial) of `a`, `b`
    /// and `extra`, or `a` itself when `b` and `extra` add nothing to
    /// it. [`SnapRef::ALL`] in, or no room left: [`SnapRef::ALL`].
    #[inline(never)]
    pub fn merge(&self, a: SnapRef, b: SnapRef, extra: &[Interval]) -> SnapRef {
        if a == SnapRef::ALL || b == SnapRef::ALL {
            return SnapRef::ALL;
        }
        let empty = List(&[]);
        let extra = List(extra);
        let sa = self.snapshot(a);
        let sb = self.snapshot(b);
        let la: &dyn Intervals = match &sa {
            Some(s) => s,
            None => &empty,
        };
        let lb: &dyn Intervals = match &sb {
            Some(s) => s,
            None => &empty,
        };
        let a_ref = if sa.is_some() { a } else { SnapRef::NONE };
        if covers(la, lb) && covers(la, &extra) {
            return a_ref;
        }
        let bound = 2 * (la.len() + lb.len() + extra.len());
        let n = bound.min(MAX_INTERVALS);
        let Some(at) = self.alloc(n) else {
            self.count_lost();
            return SnapRef::ALL;
        };
        let out = &self.words[at..at + 1 + 3 * n];
        let mut written = 0usize;
        let mut coarsened = false;
        union(&[la, lb, &extra], |iv| {
            if written > 0 {
                let p = 1 + 3 * (written - 1);
                let last_hi = out[p + 1].load(MemOrder::Relaxed);
                let last_epoch = out[p + 2].load(MemOrder::Relaxed);
                if last_hi == iv.lo && last_epoch == iv.epoch {
                    out[p + 1].store(iv.hi, MemOrder::Relaxed);
                    return;
                }
                if written == n {
                    // Coarsen: the last interval swallows this one.
                    out[p + 1].store(iv.hi, MemOrder::Relaxed);
                    out[p + 2].store(last_epoch.max(iv.epoch), MemOrder::Relaxed);
                    coarsened = true;
                    return;
                }
            }
            let p = 1 + 3 * written;
            out[p].store(iv.lo, MemOrder::Relaxed);
            out[p + 1].store(iv.hi, MemOrder::Relaxed);
            out[p + 2].store(iv.epoch, MemOrder::Relaxed);
            written += 1;
        });
        out[0].store(written as u32, MemOrder::Relaxed);
        if coarsened {
            self.count(header::COARSENED);
        }
        // Publish the contents before the reference can travel.
        F::fence(MemOrder::Release);
        SnapRef::new(self.generation(), at as u32)
    }
}

/// Whether `a` knows every serial of `b` at least as far.
pub fn covers(a: &dyn Intervals, b: &dyn Intervals) -> bool {
    let mut i = 0;
    for j in 0..b.len() {
        let iv = b.get(j);
        let mut pos = iv.lo;
        while pos < iv.hi {
            while i < a.len() && a.get(i).hi <= pos {
                i += 1;
            }
            if i == a.len() {
                return false;
            }
            let c = a.get(i);
            if c.lo > pos || c.epoch < iv.epoch {
                return false;
            }
            pos = c.hi;
        }
    }
    true
}

/// Emits the union of sorted, disjoint lists (largest epoch per serial)
/// in order, as maximal pieces of constant epoch.
pub fn union(lists: &[&dyn Intervals; 3], mut emit: impl FnMut(Interval)) {
    let mut idx = [0usize; 3];
    let mut pos: Option<Serial> = None;
    loop {
        // Skip intervals wholly behind the sweep.
        for (k, l) in lists.iter().enumerate() {
            while idx[k] < l.len() && pos.is_some_and(|p| l.get(idx[k]).hi <= p) {
                idx[k] += 1;
            }
        }
        let heads = |k: usize| (idx[k] < lists[k].len()).then(|| lists[k].get(idx[k]));
        let start = match pos {
            Some(p) => p,
            None => match (0..3).filter_map(heads).map(|iv| iv.lo).min() {
                Some(lo) => lo,
                None => return,
            },
        };
        // The epoch at `start`, and where it may change next.
        let mut epoch = 0u32;
        let mut next = u32::MAX;
        let mut any = false;
        for iv in (0..3).filter_map(heads) {
            any = true;
            if iv.lo <= start {
                epoch = epoch.max(iv.epoch);
                next = next.min(iv.hi);
            } else {
                next = next.min(iv.lo);
            }
        }
        if !any {
            return;
        }
        if epoch > 0 && next > start {
            emit(Interval {
                lo: start,
                hi: next,
                epoch,
            });
        }
        if next == u32::MAX {
            return;
        }
        pos = Some(next);
    }
}

/// The intervals `theirs` orders beyond `ours`, lane by lane (what a
/// CTA learns of another launch's host order when it acquires from one
/// of its CTAs), in serial order, appended to `out`; returns how many.
pub fn lanes_beyond(theirs: &LaneBounds, ours: &LaneBounds, out: &mut [Interval]) -> usize {
    let mut n = 0;
    for k in 0..LANES {
        let lo = ours.0[k].max(lane_start(k));
        let hi = theirs.0[k];
        if hi > lo && n < out.len() {
            out[n] = Interval {
                lo,
                hi,
                epoch: ALL_EPOCHS,
            };
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU32;
    use std::vec::Vec;

    fn arena_words(n: usize) -> Vec<AtomicU32> {
        let w: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        Arena::<CoreAtomics>::init(&w, 1);
        w
    }

    fn iv(lo: u32, hi: u32, epoch: u32) -> Interval {
        Interval { lo, hi, epoch }
    }

    fn list(a: &Arena<'_, CoreAtomics>, r: SnapRef) -> Vec<Interval> {
        let s = a.snapshot(r).unwrap();
        (0..s.len()).map(|i| s.get(i)).collect()
    }

    #[test]
    fn a_renewed_arena_has_room_again_and_forgets_the_old_generation() {
        let w = arena_words(64);
        let exits: Vec<AtomicU32> = (0..EXIT_HEADER_WORDS + 8)
            .map(|_| AtomicU32::new(0))
            .collect();
        Arena::<CoreAtomics>::init_exits(&exits);
        let sc: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(7)).collect();
        let a = Arena::<CoreAtomics>::new(&w, &exits, &[]);
        let old = a.merge(SnapRef::NONE, SnapRef::NONE, &[iv(10, 20, 1)]);
        a.log_exit(15, old);
        a.lose_release(old);
        // Full: a merge that finds no room knows everything (counted).
        let wide: Vec<Interval> = (0..20).map(|i| iv(100 + 2 * i, 101 + 2 * i, 1)).collect();
        assert_eq!(a.merge(SnapRef::NONE, SnapRef::NONE, &wide), SnapRef::ALL);
        let lost = w[header::LOST].load(MemOrder::Relaxed);
        assert!(lost > 0);
        Arena::<CoreAtomics>::renew(&w, &exits, &sc);
        assert_eq!(
            a.epoch_of(old, 15),
            0,
            "an old snapshot reads as knowing nothing"
        );
        assert_eq!(a.exits().count(), 0);
        assert!(a.lost_releases().is_none());
        assert!(sc.iter().all(|x| x.load(MemOrder::Relaxed) == 0));
        assert_eq!(
            w[header::LOST].load(MemOrder::Relaxed),
            lost,
            "counts are kept"
        );
        let new = a.merge(SnapRef::NONE, SnapRef::NONE, &wide[..8]);
        assert_ne!(new, SnapRef::ALL);
        assert_eq!(a.epoch_of(new, 100), 1);
    }

    #[test]
    fn merges_keep_the_largest_epoch_and_join_touching_intervals() {
        let w = arena_words(1 << 12);
        let a = Arena::<CoreAtomics>::new(&w, &[], &[]);
        let r1 = a.merge(
            SnapRef::NONE,
            SnapRef::NONE,
            &[iv(10, 20, 1), iv(30, 31, 4)],
        );
        assert_eq!(list(&a, r1), [iv(10, 20, 1), iv(30, 31, 4)]);
        let r2 = a.merge(r1, SnapRef::NONE, &[iv(15, 30, 2)]);
        assert_eq!(list(&a, r2), [iv(10, 15, 1), iv(15, 30, 2), iv(30, 31, 4)]);
        let r3 = a.merge(r2, r1, &[iv(10, 15, 2)]);
        assert_eq!(list(&a, r3), [iv(10, 30, 2), iv(30, 31, 4)]);
        // Nothing new: the same snapshot comes back.
        assert_eq!(a.merge(r3, r1, &[iv(12, 13, 1)]), r3);
        assert_eq!(a.epoch_of(r3, 29), 2);
        assert_eq!(a.epoch_of(r3, 30), 4);
        assert_eq!(a.epoch_of(r3, 31), 0);
        assert_eq!(a.epoch_of(r3, 9), 0);
        assert_eq!(a.epoch_of(SnapRef::ALL, 9), ALL_EPOCHS);
    }

    #[test]
    fn a_full_arena_makes_the_merger_omniscient() {
        let w = arena_words(ARENA_HEADER_WORDS + 4);
        let a = Arena::<CoreAtomics>::new(&w, &[], &[]);
        assert_eq!(
            a.merge(SnapRef::NONE, SnapRef::NONE, &[iv(1, 2, 1), iv(5, 6, 1)]),
            SnapRef::ALL
        );
        assert_eq!(w[header::LOST].load(MemOrder::Relaxed), 1);
    }

    #[test]
    fn stale_generations_are_empty() {
        let w = arena_words(1 << 10);
        let a = Arena::<CoreAtomics>::new(&w, &[], &[]);
        let r = a.merge(SnapRef::NONE, SnapRef::NONE, &[iv(1, 2, 1)]);
        Arena::<CoreAtomics>::init(&w, 2);
        assert_eq!(Arena::<CoreAtomics>::new(&w, &[], &[]).epoch_of(r, 1), 0);
    }

    #[test]
    fn lanes_beyond_names_only_what_is_new() {
        let mut ours = LaneBounds::NONE;
        let mut theirs = LaneBounds::NONE;
        ours.0[1] = lane_start(1) + 10;
        theirs.0[1] = lane_start(1) + 25;
        theirs.0[4] = lane_start(4) + 3;
        theirs.0[2] = lane_start(2);
        let mut out = [iv(0, 0, 0); 8];
        let n = lanes_beyond(&theirs, &ours, &mut out);
        assert_eq!(
            &out[..n],
            &[
                iv(lane_start(1) + 10, lane_start(1) + 25, ALL_EPOCHS),
                iv(lane_start(4), lane_start(4) + 3, ALL_EPOCHS)
            ]
        );
    }

    /// The union against a per-serial reference over random lists.
    #[test]
    fn union_matches_a_pointwise_maximum() {
        let mut seed = 0x1234_5678u32;
        let mut rnd = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed % m
        };
        for _ in 0..300 {
            let mut lists: Vec<Vec<Interval>> = Vec::new();
            for _ in 0..3 {
                let mut l = Vec::new();
                let mut p = rnd(5);
                for _ in 0..rnd(6) {
                    let lo = p + rnd(4);
                    let hi = lo + 1 + rnd(5);
                    l.push(iv(lo, hi, 1 + rnd(3)));
                    p = hi;
                }
                lists.push(l);
            }
            let mut reference = [0u32; 128];
            for l in &lists {
                for x in l {
                    for s in x.lo..x.hi {
                        reference[s as usize] = reference[s as usize].max(x.epoch);
                    }
                }
            }
            let mut got = [0u32; 128];
            let mut last_hi = 0;
            union(
                &[&List(&lists[0]), &List(&lists[1]), &List(&lists[2])],
                |x| {
                    assert!(x.lo >= last_hi && x.lo < x.hi);
                    last_hi = x.hi;
                    for s in x.lo..x.hi {
                        got[s as usize] = x.epoch;
                    }
                },
            );
            assert_eq!(got, reference);
        }
    }
}
