//! A CTA's bulk and tensor copies in flight on the GPU: the list the GPU
//! sanitizer keeps beside its threads' `cp.async` queues, so that such a
//! copy is checked where the memory model lets it happen, anywhere
//! between its issue and the completion a thread observes.
//!
//! Unlike a `cp.async`, a bulk copy is not one thread's alone: a copy into
//! shared memory completes on an mbarrier phase, and every thread that
//! waits for that phase sees its data, so the copy stays in a list the
//! whole CTA reads. A copy is checked
//!
//! - at its issue, as the issuing thread's accesses (which finds an
//!   access made before the issue that it races with);
//! - while it is in flight, against every checked access of every thread
//!   of the CTA ([`BulkList::overlapping`]): a read or a write of bytes
//!   the copy writes, or a write of bytes it reads, races with it whatever
//!   the program order or the barriers between say (a barrier does not
//!   complete a copy);
//! - at its completion, as the completing thread's accesses made then
//!   (the global side, against other CTAs): a copy into shared memory
//!   completes at the first wait that returns for its mbarrier phase
//!   ([`BulkList::complete_phase`]; the other waiters of the phase wait
//!   until that check is done, so that nothing they do afterwards counts
//!   as earlier than it), a copy out to global memory at its issuing
//!   thread's `cp.async.bulk.wait_group` that covers its bulk group
//!   ([`BulkList::complete_groups`]; `.read` ends only the copy's read of
//!   shared memory).
//!
//! A copy's phase is named at its issue by the parity of its mbarrier's
//! current phase: a wait for that parity returns only once the phase has
//! completed, since the phase the copy was issued in is the current one
//! or an earlier one. What is not kept is not checked in flight: a copy
//! that finds the list full (counted by the caller), a tensor copy's
//! global side (compared with no access in flight, only checked again at
//! its completion), and a copy whose issuing thread returned, which
//! completes there. Each of these can hide a race, never report one that
//! cannot happen.

use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::copies_in_flight::first_byte_within;
use crate::tensor_map::MAX_RANK;
use core::sync::atomic::Ordering as MemOrder;

/// Copies a CTA keeps in flight at most (a pipeline of 4 stages that
/// loads two tiles a stage and stores one keeps about 9).
pub const BULK_IN_FLIGHT: usize = 16;

/// `u64`s one copy takes in the list.
pub const ENTRY_WORDS: usize = 9;

/// `u64`s of a CTA's list: the mask of the entries in use, a reserved
/// word (so that what follows stays 16-aligned), and the entries.
pub const LIST_WORDS: usize = 2 + BULK_IN_FLIGHT * ENTRY_WORDS;

/// Bytes of a CTA's list.
pub const LIST_BYTES: usize = 8 * LIST_WORDS;

// The queues that follow a CTA's list start 16-aligned, and the mask has
// a bit for each entry.
const _: () = assert!(LIST_BYTES.is_multiple_of(16) && BULK_IN_FLIGHT <= 64);

/// The name of an mbarrier's phase, as the sanitizer's block check and
/// this list know it: the barrier's offset in the shared window (below
/// 256 KiB, 8-aligned: its generic address's low bits are the same) and
/// the phase's parity, 16 bits.
pub const fn phase_key(address: u64, parity: u32) -> u16 {
    ((address >> 3) & 0x7fff) as u16 | ((parity & 1) << 15) as u16
}

/// How a bulk copy completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A copy into shared memory (`cp.async.bulk` or a tensor load),
    /// complete once a wait returns for its mbarrier phase: the phase's
    /// key (the barrier and the parity, as
    /// `Sanitizer::block_acquire` names it).
    Phase(u16),
    /// A copy out to global memory (a bulk or tensor store), in its
    /// issuing thread's bulk group of this number (the groups that thread
    /// committed before it, modulo 2^16).
    Group(u16),
}

/// One bulk or tensor copy in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkCopy {
    /// When it completes.
    pub completion: Completion,
    /// The issuing thread (its index in the CTA).
    pub thread: u32,
    /// Generic address of the shared side's first byte.
    pub shared: u64,
    /// Bytes of the shared side.
    pub shared_bytes: u32,
    /// Generic address of the global side's first byte; for a tensor
    /// copy, whose global side is not one range, its tensor map's.
    pub global: u64,
    /// Bytes of the global side (0 for a tensor copy: its rows are not
    /// compared with accesses in flight, only checked again at the
    /// completion).
    pub global_bytes: u32,
    /// The address of the issuing site's `Location`.
    pub location: u64,
    /// A tensor copy's box coordinates (innermost first), `None` for a
    /// bulk copy.
    pub tensor: Option<[i32; MAX_RANK]>,
}

/// An entry's state, in the low bits of its status word.
const STATE: u64 = 3;
/// Unused, or being written by the thread that claimed it.
const FREE: u64 = 0;
/// In flight: checked against every access.
const IN_FLIGHT: u64 = 1;
/// Being completed by one thread; the phase's other waiters wait.
const COMPLETING: u64 = 2;
/// A store's read of its shared source is over (`wait_group.read`).
const SOURCE_READ: u64 = 4;
/// The generation (one more at every claim) in the status word's high half.
const GENERATION: u64 = 1 << 32;

/// The kind bit of the completion word: a store.
const STORE: u64 = 1 << 63;
/// The completion word's bit of a tensor copy.
const TENSOR: u64 = 1 << 62;

impl BulkCopy {
    /// True for a copy into shared memory.
    pub fn into_shared(&self) -> bool {
        matches!(self.completion, Completion::Phase(_))
    }

    /// Whether the copy writes its `shared` side (or else its global one).
    pub fn writes(&self, shared: bool) -> bool {
        shared == self.into_shared()
    }

    /// The first byte of `lo..hi` at which an access (to shared memory
    /// when `shared`, writing when `write`) races with this copy in
    /// flight: bytes the copy writes, or bytes it reads that the access
    /// writes (`source_read`: a store no longer reads its shared side).
    pub fn races_with(
        &self,
        source_read: bool,
        shared: bool,
        write: bool,
        lo: u64,
        hi: u64,
    ) -> Option<u64> {
        let copy_writes = self.writes(shared);
        if !copy_writes && (!write || (shared && source_read)) {
            return None;
        }
        first_byte_within(self.side(shared), lo, hi)
    }

    /// Its shared side's (`shared`) or global side's first byte and size.
    pub fn side(&self, shared: bool) -> (u64, u32) {
        if shared {
            (self.shared, self.shared_bytes)
        } else {
            (self.global, self.global_bytes)
        }
    }

    fn pack(&self) -> [u64; ENTRY_WORDS - 1] {
        let (store, key) = match self.completion {
            Completion::Phase(k) => (0, k),
            Completion::Group(g) => (STORE, g),
        };
        let tensor = if self.tensor.is_some() { TENSOR } else { 0 };
        let c = self.tensor.unwrap_or_default().map(|x| u64::from(x as u32));
        [
            store | tensor | u64::from(self.thread) << 16 | u64::from(key),
            self.shared,
            self.global,
            u64::from(self.shared_bytes) | u64::from(self.global_bytes) << 32,
            self.location,
            c[0] | c[1] << 32,
            c[2] | c[3] << 32,
            c[4],
        ]
    }

    fn unpack(w: [u64; ENTRY_WORDS - 1]) -> BulkCopy {
        let key = w[0] as u16;
        BulkCopy {
            completion: if w[0] & STORE != 0 {
                Completion::Group(key)
            } else {
                Completion::Phase(key)
            },
            thread: (w[0] >> 16) as u32,
            shared: w[1],
            shared_bytes: w[3] as u32,
            global: w[2],
            global_bytes: (w[3] >> 32) as u32,
            location: w[4],
            tensor: (w[0] & TENSOR != 0)
                .then(|| [w[5], w[5] >> 32, w[6], w[6] >> 32, w[7]].map(|x| x as u32 as i32)),
        }
    }
}

/// A CTA's list of bulk copies in flight, over its [`LIST_WORDS`] words
/// (zero: empty), shared by the CTA's threads.
///
/// Word 0 is the mask of the entries in use; entry `i` is a status word
/// (state, whether a store has read its source, generation) and the
/// copy's words. A thread claims an entry by its mask bit, writes the
/// copy and publishes it with a release of the status; a reader reads the
/// status, the copy and the status again, and keeps the copy only if the
/// status did not change (a completed entry claimed again in between is
/// skipped, as if completed).
pub struct BulkList<'a, F: AtomicFamily> {
    words: &'a [F::U64],
}

impl<'a, F: AtomicFamily> BulkList<'a, F> {
    /// The list the words hold (at least [`LIST_WORDS`]; zero at first,
    /// then written by this type's methods only).
    pub fn new(words: &'a [F::U64]) -> BulkList<'a, F> {
        debug_assert!(words.len() >= LIST_WORDS);
        BulkList { words }
    }

    fn mask(&self) -> &F::U64 {
        &self.words[0]
    }

    fn status(&self, i: usize) -> &F::U64 {
        &self.words[2 + i * ENTRY_WORDS]
    }

    /// True when a copy may be in flight (one load).
    #[inline(always)]
    pub fn any(&self) -> bool {
        self.mask().load(MemOrder::Relaxed) != 0
    }

    /// Puts `copy` in flight; false when the list is full (the copy is
    /// then checked at its issue only).
    pub fn issue(&self, copy: &BulkCopy) -> bool {
        let all = (1u64 << BULK_IN_FLIGHT) - 1;
        let i = loop {
            let free = !self.mask().load(MemOrder::Relaxed) & all;
            if free == 0 {
                return false;
            }
            let i = free.trailing_zeros() as usize;
            if self.mask().fetch_or(1 << i, MemOrder::Acquire) & (1 << i) == 0 {
                break i;
            }
        };
        // A reader that sees these words sees the status the entry's last
        // completion left (and so does not take them for that copy's).
        F::fence(MemOrder::Release);
        let status = self.status(i).load(MemOrder::Relaxed);
        for (k, w) in copy.pack().into_iter().enumerate() {
            self.words[3 + i * ENTRY_WORDS + k].store(w, MemOrder::Relaxed);
        }
        let next = (status & !(GENERATION - 1)).wrapping_add(GENERATION) | IN_FLIGHT;
        self.status(i).store(next, MemOrder::Release);
        true
    }

    /// Entry `i`'s status and copy when its state is one of `states`
    /// (bits `1 << state`) and it stayed so while read.
    fn read(&self, i: usize, states: u64) -> Option<(u64, BulkCopy)> {
        let status = self.status(i).load(MemOrder::Acquire);
        if states & 1 << (status & STATE) == 0 {
            return None;
        }
        let mut w = [0; ENTRY_WORDS - 1];
        for (k, v) in w.iter_mut().enumerate() {
            *v = self.words[3 + i * ENTRY_WORDS + k].load(MemOrder::Relaxed);
        }
        F::fence(MemOrder::Acquire);
        // Acquire: a completer that sees the entry freed here goes on
        // after its check.
        let again = self.status(i).load(MemOrder::Acquire);
        // A store's source may be read to the end meanwhile: that alone
        // leaves the copy what it was.
        (again & !SOURCE_READ == status & !SOURCE_READ).then(|| (again, BulkCopy::unpack(w)))
    }

    /// Entry `i` in flight or being completed, read again while it changes
    /// under the reader; `None` once it is free (a completer's check of
    /// it is then over).
    fn settled(&self, i: usize) -> Option<(u64, BulkCopy)> {
        loop {
            if let Some(entry) = self.read(i, 1 << IN_FLIGHT | 1 << COMPLETING) {
                return Some(entry);
            }
            if self.status(i).load(MemOrder::Acquire) & STATE == FREE {
                return None;
            }
            F::spin();
        }
    }

    /// The entries in use, as a mask.
    fn used(&self) -> u64 {
        self.mask().load(MemOrder::Acquire)
    }

    /// A copy in flight that an access of `lo..hi` (to shared memory when
    /// `shared`, writing when `write`) races with, and the first byte
    /// they share.
    pub fn overlapping(
        &self,
        shared: bool,
        write: bool,
        lo: u64,
        hi: u64,
    ) -> Option<(BulkCopy, u64)> {
        let mut used = self.used();
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            if !self.may_race(i, shared, write, lo, hi) {
                continue;
            }
            if let Some((status, c)) = self.read(i, 1 << IN_FLIGHT) {
                let source_read = status & SOURCE_READ != 0;
                if let Some(at) = c.races_with(source_read, shared, write, lo, hi) {
                    return Some((c, at));
                }
            }
        }
        None
    }

    /// Whether entry `i` may be a copy in flight that the access races
    /// with, from the five words that say so (read relaxed: a filter in
    /// front of [`BulkList::read`], which most accesses of a kernel with
    /// copies in flight elsewhere never reach).
    fn may_race(&self, i: usize, shared: bool, write: bool, lo: u64, hi: u64) -> bool {
        let status = self.status(i).load(MemOrder::Relaxed);
        if status & STATE != IN_FLIGHT {
            return false;
        }
        let mut w = [0; ENTRY_WORDS - 1];
        for (k, v) in w.iter_mut().take(4).enumerate() {
            *v = self.words[3 + i * ENTRY_WORDS + k].load(MemOrder::Relaxed);
        }
        let source_read = status & SOURCE_READ != 0;
        BulkCopy::unpack(w)
            .races_with(source_read, shared, write, lo, hi)
            .is_some()
    }

    /// Frees entry `i` (its completer's or its issuer's), whose status is
    /// `status`.
    fn free(&self, i: usize, status: u64) {
        self.status(i)
            .store(status & !(GENERATION - 1) | FREE, MemOrder::Release);
        self.mask().fetch_and(!(1 << i), MemOrder::Release);
    }

    /// Takes entry `i`, in flight with `status`, to complete it: its
    /// status while this thread completes it, or `None` when another
    /// thread took it first.
    fn take(&self, i: usize, status: u64) -> Option<u64> {
        let mine = status & !STATE | COMPLETING;
        self.status(i)
            .compare_exchange(status, mine, MemOrder::Acquire, MemOrder::Relaxed)
            .ok()
            .map(|_| mine)
    }

    /// A wait returned for the mbarrier phase `key`: each copy into
    /// shared memory that completes on it is checked again (`recheck`)
    /// by the one waiter that takes it, then leaves the list; a waiter
    /// that finds one being checked waits until it has left.
    pub fn complete_phase(&self, key: u16, mut recheck: impl FnMut(&BulkCopy)) {
        let mut used = self.used();
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            let Some((status, c)) = self.settled(i) else {
                continue;
            };
            if c.completion != Completion::Phase(key) {
                continue;
            }
            if status & STATE == IN_FLIGHT {
                if let Some(mine) = self.take(i, status) {
                    recheck(&c);
                    self.free(i, mine);
                    continue;
                }
            }
            // Another thread is checking it: what this one does next
            // comes after that check.
            let busy = status & !STATE | COMPLETING;
            while self.status(i).load(MemOrder::Acquire) == busy {
                F::spin();
            }
        }
    }

    /// Thread `thread`'s `cp.async.bulk.wait_group newest` (`.read` when
    /// `read`), its open bulk group numbered `open`: its stores in every
    /// committed group but the newest `newest` stop reading their shared
    /// sources, and without `.read` complete (`recheck`) and leave the
    /// list.
    pub fn complete_groups(
        &self,
        thread: u32,
        open: u16,
        newest: u32,
        read: bool,
        recheck: impl FnMut(&BulkCopy),
    ) {
        self.complete_issued(thread, recheck, |c| match c.completion {
            Completion::Group(group) => {
                (u32::from(open.wrapping_sub(group)) > newest).then_some(read)
            }
            Completion::Phase(_) => None,
        })
    }

    /// Thread `thread` returns: the copies it issued that are still in
    /// flight complete (`recheck`) and leave the list, so that the list is
    /// empty once the CTA's threads have all returned. A load nobody
    /// waited for completes there too (any time between its issue and
    /// the end of the CTA is a time it may take place at).
    pub fn complete_thread(&self, thread: u32, recheck: impl FnMut(&BulkCopy)) {
        self.complete_issued(thread, recheck, |_| Some(false))
    }

    /// The copies thread `thread` issued: `ends(copy)` says whether one
    /// ends (`Some`) and whether only its read of shared memory (`true`,
    /// a store's). A store's entry changes only by its issuing thread; a
    /// load's, taken here, may be taken by a waiter of its phase first.
    fn complete_issued(
        &self,
        thread: u32,
        mut recheck: impl FnMut(&BulkCopy),
        ends: impl Fn(&BulkCopy) -> Option<bool>,
    ) {
        let mut used = self.used();
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            let Some((status, c)) = self.read(i, 1 << IN_FLIGHT) else {
                continue;
            };
            if c.thread != thread {
                continue;
            }
            match ends(&c) {
                Some(true) => {
                    self.status(i).fetch_or(SOURCE_READ, MemOrder::Release);
                }
                Some(false) => {
                    if let Some(mine) = self.take(i, status) {
                        recheck(&c);
                        self.free(i, mine);
                    }
                }
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    fn words() -> Vec<AtomicU64> {
        (0..LIST_WORDS).map(|_| AtomicU64::new(0)).collect()
    }

    fn load(n: u64, key: u16) -> BulkCopy {
        BulkCopy {
            completion: Completion::Phase(key),
            thread: 0,
            shared: 0x1000 + 0x400 * n,
            shared_bytes: 0x400,
            global: 0x10_0000 + 0x400 * n,
            global_bytes: 0x400,
            location: 0x5500 + 8 * n,
            tensor: None,
        }
    }

    fn store(n: u64, thread: u32, group: u16) -> BulkCopy {
        BulkCopy {
            completion: Completion::Group(group),
            thread,
            ..load(n, 0)
        }
    }

    #[test]
    fn a_copy_packs_into_its_words_and_back() {
        let tensor = BulkCopy {
            global: 0x7000,
            global_bytes: 0,
            tensor: Some([-3, 0, i32::MAX, i32::MIN, 17]),
            ..load(2, 5)
        };
        for c in [load(3, 0x8123), store(5, 1023, 0xffff), tensor] {
            assert_eq!(BulkCopy::unpack(c.pack()), c);
        }
    }

    #[test]
    fn what_races_with_a_load_and_a_store_in_flight() {
        let l = load(0, 1);
        let (s, g) = (l.shared, l.global);
        // A load writes its shared side and reads its global one.
        assert_eq!(l.races_with(false, true, false, s + 4, s + 8), Some(s + 4));
        assert_eq!(l.races_with(false, true, true, s - 4, s + 4), Some(s));
        assert_eq!(l.races_with(false, false, false, g, g + 4), None);
        assert_eq!(l.races_with(false, false, true, g + 8, g + 12), Some(g + 8));
        assert_eq!(l.races_with(false, true, true, s + 0x400, s + 0x404), None);
        // A store reads its shared side (until `.read`) and writes its
        // global one.
        let st = store(0, 0, 0);
        assert_eq!(st.races_with(false, true, false, s, s + 4), None);
        assert_eq!(st.races_with(false, true, true, s, s + 4), Some(s));
        assert_eq!(st.races_with(true, true, true, s, s + 4), None);
        assert_eq!(st.races_with(true, false, false, g, g + 4), Some(g));
        assert_eq!(
            st.races_with(false, false, true, g + 0x3fc, g + 0x404),
            Some(g + 0x3fc)
        );
    }

    #[test]
    fn a_phase_wait_completes_only_its_copies_once() {
        let w = words();
        let list = BulkList::<CoreAtomics>::new(&w);
        assert!(!list.any());
        assert!(list.issue(&load(0, 1)));
        assert!(list.issue(&load(1, 2)));
        let hit = list.overlapping(true, false, 0x1000, 0x1004);
        assert_eq!(hit, Some((load(0, 1), 0x1000)));
        let mut done = Vec::new();
        list.complete_phase(1, |c| done.push(*c));
        assert_eq!(done, [load(0, 1)]);
        assert_eq!(list.overlapping(true, false, 0x1000, 0x1004), None);
        list.complete_phase(1, |c| done.push(*c));
        assert_eq!(done.len(), 1, "a second wait for the phase finds nothing");
        assert!(list.overlapping(true, false, 0x1400, 0x1404).is_some());
        list.complete_phase(2, |c| done.push(*c));
        assert!(!list.any());
    }

    #[test]
    fn bulk_groups_complete_as_ptx_counts_them() {
        let w = words();
        let list = BulkList::<CoreAtomics>::new(&w);
        // Thread 7's groups 0 and 1, thread 8's group 0.
        list.issue(&store(0, 7, 0));
        list.issue(&store(1, 7, 1));
        list.issue(&store(2, 8, 0));
        let mut done = Vec::new();
        // Thread 7 has committed 2 groups and one more (empty): its open
        // group is 3, so `wait_group.read 1` ends both groups' reads.
        list.complete_groups(7, 3, 1, true, |c| done.push(*c));
        assert!(done.is_empty());
        let (s0, s1) = (store(0, 7, 0).shared, store(1, 7, 1).shared);
        assert_eq!(list.overlapping(true, true, s0, s0 + 4), None);
        assert_eq!(list.overlapping(true, true, s1, s1 + 4), None);
        let g1 = store(1, 7, 1).global;
        assert!(list.overlapping(false, false, g1, g1 + 4).is_some());
        // `wait_group 2`: group 0 only (the newest two are 1 and 2).
        list.complete_groups(7, 3, 2, false, |c| done.push(*c));
        assert_eq!(done, [store(0, 7, 0)]);
        list.complete_thread(7, |c| done.push(*c));
        assert_eq!(done, [store(0, 7, 0), store(1, 7, 1)]);
        // Thread 8's store is its own, and so is a load it issued.
        let s2 = store(2, 8, 0).shared;
        assert!(list.overlapping(true, true, s2, s2 + 4).is_some());
        list.issue(&BulkCopy {
            thread: 8,
            ..load(3, 1)
        });
        list.complete_thread(8, |c| done.push(*c));
        assert_eq!(done.len(), 4);
        assert!(!list.any(), "every thread returned: the list is empty");
    }

    /// The list against a plain model of the same copies (each a copy
    /// and whether its source was read), over random sequences of issues,
    /// phase waits, bulk group commits and waits (`.read` or not), returns
    /// and accesses, by four threads of a CTA of 1,024, with many copies
    /// on few phases and bytes.
    #[test]
    fn the_list_keeps_what_a_model_of_the_copies_keeps() {
        let mut rng = crate::test_rng::XorShift::new(0x2545_f491_4f6c_dd1du64);
        let mut next = |m: u64| rng.below(m);
        for _case in 0..1_000 {
            let w = words();
            let list = BulkList::<CoreAtomics>::new(&w);
            let mut model: Vec<(BulkCopy, bool)> = Vec::new();
            // Each thread's open bulk group.
            let mut open = [0u16; 4];
            for _ in 0..1 + next(80) {
                // Four threads of a CTA of 1,024.
                let who = next(4) as usize;
                let thread = [0, 1, 767, 1023][who];
                let range = |n: u64| (0x1000 + 0x40 * (n % 12), 0x10_0000 + 0x40 * (n % 9));
                match next(12) {
                    0..=3 => {
                        let (shared, global) = range(next(64));
                        let store = next(2) == 0;
                        let c = BulkCopy {
                            completion: if store {
                                Completion::Group(open[who])
                            } else {
                                Completion::Phase(next(3) as u16)
                            },
                            thread,
                            shared,
                            shared_bytes: 0x40 * (1 + next(2) as u32),
                            global,
                            global_bytes: 0x40,
                            location: 8 * next(100),
                            tensor: None,
                        };
                        let c = if next(4) == 0 {
                            BulkCopy {
                                global_bytes: 0,
                                tensor: Some([next(9) as i32 - 4, 0, 0, 0, 1]),
                                ..c
                            }
                        } else {
                            c
                        };
                        let kept = list.issue(&c);
                        assert_eq!(kept, model.len() < BULK_IN_FLIGHT);
                        if kept {
                            model.push((c, false));
                        }
                    }
                    4 | 5 => {
                        let key = next(3) as u16;
                        let mut done = Vec::new();
                        list.complete_phase(key, |c| done.push(*c));
                        let mut want: Vec<BulkCopy> = model
                            .iter()
                            .filter(|(c, _)| c.completion == Completion::Phase(key))
                            .map(|(c, _)| *c)
                            .collect();
                        model.retain(|(c, _)| c.completion != Completion::Phase(key));
                        done.sort_by_key(|c| (c.location, c.shared, c.global));
                        want.sort_by_key(|c| (c.location, c.shared, c.global));
                        assert_eq!(done, want);
                    }
                    6 => open[who] = open[who].wrapping_add(1),
                    7 | 8 => {
                        let (newest, read) = (next(3) as u32, next(2) == 0);
                        let mut done = Vec::new();
                        let now = open[who];
                        list.complete_groups(thread, now, newest, read, |c| done.push(*c));
                        let ends = |c: &BulkCopy| match c.completion {
                            Completion::Group(g) => {
                                c.thread == thread && u32::from(now.wrapping_sub(g)) > newest
                            }
                            Completion::Phase(_) => false,
                        };
                        let mut want = Vec::new();
                        for (c, source_read) in model.iter_mut() {
                            if ends(c) {
                                *source_read = true;
                                if !read {
                                    want.push(*c);
                                }
                            }
                        }
                        if !read {
                            model.retain(|(c, _)| !ends(c));
                        }
                        done.sort_by_key(|c| (c.location, c.shared, c.global));
                        want.sort_by_key(|c| (c.location, c.shared, c.global));
                        assert_eq!(done, want);
                    }
                    9 => {
                        let mut done = 0;
                        list.complete_thread(thread, |c| {
                            assert_eq!(c.thread, thread);
                            done += 1;
                        });
                        let before = model.len();
                        model.retain(|(c, _)| c.thread != thread);
                        assert_eq!(done, before - model.len());
                    }
                    _ => {
                        let (shared, write) = (next(2) == 0, next(2) == 0);
                        let (s, g) = range(next(64));
                        let lo = if shared { s } else { g } + 4 * next(24);
                        let hi = lo + 4 * (1 + next(4));
                        let got = list.overlapping(shared, write, lo, hi);
                        let races = |(c, read): &(BulkCopy, bool)| {
                            c.races_with(*read, shared, write, lo, hi)
                                .map(|at| (*c, at))
                        };
                        match got {
                            Some(hit) => assert!(
                                model.iter().filter_map(races).any(|m| m == hit),
                                "{hit:?} is no copy in flight that races"
                            ),
                            None => assert!(model.iter().all(|m| races(m).is_none())),
                        }
                    }
                }
                assert_eq!(list.any(), !model.is_empty());
            }
            // The CTA's threads return: every copy completes, once.
            let mut left = 0;
            for thread in [0, 1, 767, 1023] {
                list.complete_thread(thread, |_| left += 1);
            }
            assert_eq!((left, list.any()), (model.len(), false));
        }
    }

    #[test]
    fn a_full_list_refuses_and_a_freed_entry_is_reused() {
        let w = words();
        let list = BulkList::<CoreAtomics>::new(&w);
        for n in 0..BULK_IN_FLIGHT as u64 {
            assert!(list.issue(&load(n, n as u16)));
        }
        assert!(!list.issue(&load(99, 99)));
        list.complete_phase(5, |_| {});
        assert!(list.issue(&load(99, 99)));
        let c = load(99, 99);
        assert_eq!(
            list.overlapping(true, false, c.shared, c.shared + 1),
            Some((c, c.shared))
        );
    }
}
