//! A thread's `cp.async` copies in flight on the GPU: the queue the GPU
//! sanitizer keeps in the thread's local memory, so that a copy is
//! checked where the memory model lets it happen, anywhere between its
//! issue and the wait that completes it.
//!
//! A copy is checked three times. At its issue, as the issuing thread's
//! accesses (which catches another thread's unordered access made before
//! the issue, and leaves records for those made after it). While it is in
//! flight, every checked access of the issuing thread is compared with the
//! queue: a read or write of a destination in flight, or a write of a
//! source in flight, races with the copy although the thread's program
//! order puts it after the issue. At its completion (the thread's
//! `wait_group` or `wait_all` that covers its group, its return, or the
//! queue overflowing), as the completing thread's accesses made then:
//! another thread's access recorded in the same barrier interval is
//! unordered with the copy, whichever side of the issue it came on.
//!
//! Completing a copy early (the queue is full: its oldest copy completes
//! at the issue of the next) is sound: an access unordered with the
//! thread at any point between the issue and the real completion is
//! unordered with the copy. What the queue cannot see, an access by
//! another thread made in a barrier interval after the and
//! before the completion's, goes unreported; nothing is reported that
//! cannot happen.
//!
//! The queues live in device memory the host allocates when a launch of
//! a kernel that issues `cp.async` comes ([`QueueArea`]): a queue per
//! thread of each CTA region of each SM, so that a kernel without copies
//! pays nothing (a queue in every sanitized entry's local frame made
//! every CTA slower, with or without copies).
//!
//! Groups follow PTX: `commit_group` closes the copies issued since the
//! last one into a group; `wait_group N` completes every committed group
//! but the newest `N` (copies not committed yet stay in flight);
//! `wait_all` is a commit and `wait_group 0`.

use core::marker::PhantomData;

/// Copies a thread keeps in flight at most; one more completes its
/// oldest at once (a pipeline of `S` stages keeps `S - 1` groups of a
/// few copies each in flight).
pub const IN_FLIGHT: usize = 8;

/// `u64`s one copy takes in the queue.
pub const COPY_WORDS: usize = 7;

/// `u64`s of a thread's queue: a header (the copies' count and the open
/// group's number) and [`IN_FLIGHT`] copies, oldest first.
pub const QUEUE_WORDS: usize = 1 + IN_FLIGHT * COPY_WORDS;

/// Bytes of a thread's queue.
pub const QUEUE_BYTES: usize = 8 * QUEUE_WORDS;

/// The header's bits of the thread's open bulk group number.
const BULK_OPEN: u64 = 0xffff << 32;

/// Threads an SM holds at most (sm_90): the CTAs of `t` threads an SM
/// holds at once are at most this over `t`.
const SM_THREADS: u64 = 2048;

/// The layout of the device memory holding the threads' queues: a
/// header (threads per region, regions per SM, then reserved words),
/// then per SM and per CTA region ([`crate::gpu::REGIONS_PER_SM`] at
/// most) the CTA's list of bulk copies in flight and a queue for each
/// thread, interleaved by warp ([`QueueArea::thread_queue`]): the lanes
/// of a warp reading one word of their queues read 32 consecutive words,
/// as a thread's local memory is laid out. A region past `regions` (an SM holds
/// fewer CTAs of many threads than of few) and a CTA of more threads than
/// `threads` keep no queue: their copies are checked at their issue only.
/// Like the window shadow, the host replaces the area with a larger one
/// when a launch needs it, keeping the old one for kernels still running,
/// and the device reads the layout from the area it reads the address of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueArea {
    /// Queues per region: the most threads of a CTA the area serves.
    pub threads: u64,
    /// Regions per SM.
    pub regions: u64,
}

impl QueueArea {
    /// Bytes of the header.
    pub const HEADER: usize = 64;
    /// Byte offset of the header's threads per region.
    pub const THREADS_AT: usize = 0;
    /// Byte offset of the header's regions per SM.
    pub const REGIONS_AT: usize = 8;

    /// Where thread `t`'s queue lies among its CTA's queues: the byte
    /// offset of its first word, and the `u64`s from each of its words to
    /// the next (word `w` of lane `l` of warp `k` is word
    /// `(k * QUEUE_WORDS + w) * 32 + l`).
    pub const fn thread_queue(t: u32) -> (u64, usize) {
        let (warp, lane) = (t as u64 / 32, t as u64 % 32);
        (8 * (warp * 32 * QUEUE_WORDS as u64 + lane), 32)
    }

    /// The area for CTAs of `threads` threads (queues for whole warps): a
    /// region for each CTA an SM can hold, at most
    /// [`crate::gpu::REGIONS_PER_SM`].
    pub const fn for_threads(threads: u64) -> QueueArea {
        let threads = if threads == 0 {
            32
        } else {
            threads.div_ceil(32) * 32
        };
        let regions = SM_THREADS / threads;
        let most = crate::gpu::REGIONS_PER_SM as u64;
        QueueArea {
            threads,
            regions: if regions == 0 {
                1
            } else if regions > most {
                most
            } else {
                regions
            },
        }
    }

    /// True when the area serves every CTA `other` does.
    pub const fn covers(&self, other: &QueueArea) -> bool {
        self.threads >= other.threads && self.regions >= other.regions
    }

    /// Byte offset of a CTA's first queue in its part of the area: the
    /// part starts with the CTA's list of bulk copies in flight
    /// ([`crate::bulk_copies`]).
    pub const QUEUES_AT: usize = crate::bulk_copies::LIST_BYTES;

    /// Bytes of one CTA's part: its bulk-copy list and its queues.
    const fn part_bytes(&self) -> u64 {
        Self::QUEUES_AT as u64 + self.threads * QUEUE_BYTES as u64
    }

    /// Bytes of the area for `sms` SMs.
    pub const fn bytes(&self, sms: u64) -> u64 {
        Self::HEADER as u64 + sms * self.regions * self.part_bytes()
    }

    /// Byte offset of the part of the CTA of `threads` threads in region
    /// `region` of SM `sm` (its bulk-copy list, then its first queue at
    /// [`QueueArea::QUEUES_AT`]), when the area has one for it.
    pub const fn cta_part(&self, sm: u32, region: u32, threads: u32) -> Option<u64> {
        if (region as u64) < self.regions && threads as u64 <= self.threads {
            let slot = sm as u64 * self.regions + region as u64;
            Some(Self::HEADER as u64 + slot * self.part_bytes())
        } else {
            None
        }
    }
}

/// One `cp.async` copy in flight: its shared destination (and the shared
/// array it falls in, as the same-block check names it), its global
/// source and where it was issued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InFlightCopy {
    /// Generic address of the destination's first byte.
    pub shared: u64,
    /// Bytes written there (4, 8 or 16).
    pub shared_bytes: u32,
    /// Generic address of the shared array's first byte.
    pub array: u64,
    /// The array's size in bytes.
    pub array_bytes: u32,
    /// The array's `.shared` shadow (0: checked through the window shadow).
    pub shadow: u64,
    /// The address of the `Location` the array's view was allocated at (0:
    /// unknown).
    pub site: u64,
    /// Generic address of the source's first byte.
    pub global: u64,
    /// Bytes read there (at most `shared_bytes`; 0 for a zero fill).
    pub global_bytes: u32,
    /// The address of the issuing site's `Location`.
    pub location: u64,
}

/// The largest size a queued copy's sides may have (one byte each in its
/// packed word).
const MAX_BYTES: u32 = 0xff;

impl InFlightCopy {
    /// The copy as `COPY_WORDS` words, in group `group`.
    fn pack(&self, group: u16) -> [u64; COPY_WORDS] {
        let sizes = u64::from(self.shared_bytes.min(MAX_BYTES))
            | u64::from(self.global_bytes.min(MAX_BYTES)) << 8
            | u64::from(group) << 16
            | u64::from(self.array_bytes) << 32;
        [
            self.shared,
            self.array,
            self.shadow,
            self.site,
            self.global,
            self.location,
            sizes,
        ]
    }

    /// The copy and its group from its words.
    fn unpack(w: &[u64]) -> (InFlightCopy, u16) {
        let sizes = w[6];
        let copy = InFlightCopy {
            shared: w[0],
            shared_bytes: (sizes & 0xff) as u32,
            array: w[1],
            array_bytes: (sizes >> 32) as u32,
            shadow: w[2],
            site: w[3],
            global: w[4],
            global_bytes: (sizes >> 8 & 0xff) as u32,
            location: w[5],
        };
        (copy, (sizes >> 16) as u16)
    }

    /// Its destination's (`shared`) or source's first byte and size.
    pub fn side(&self, shared: bool) -> (u64, u32) {
        if shared {
            (self.shared, self.shared_bytes)
        } else {
            (self.global, self.global_bytes)
        }
    }

    /// The first byte of `lo..hi` this copy's destination (`shared`) or
    /// source (otherwise) covers, if any.
    pub fn overlap(&self, shared: bool, lo: u64, hi: u64) -> Option<u64> {
        first_byte_within(self.side(shared), lo, hi)
    }
}

/// The first byte of `lo..hi` inside the `bytes` bytes from `start` (a
/// copy's side), if any.
pub fn first_byte_within((start, bytes): (u64, u32), lo: u64, hi: u64) -> Option<u64> {
    let end = start.saturating_add(u64::from(bytes));
    let first = lo.max(start);
    (first < hi.min(end)).then_some(first)
}

/// A thread's queue of copies in flight, over its [`QUEUE_WORDS`] words
/// (the GPU sanitizer's in the [`QueueArea`], interleaved with the other
/// threads' of its CTA; see the module docs for what the queue does).
pub struct CopyQueue<'a> {
    /// The queue's first word ...
    base: *mut u64,
    /// ... and how many words on its next one is.
    stride: usize,
    words: PhantomData<&'a mut u64>,
}

impl<'a> CopyQueue<'a> {
    /// The queue the words hold (written by [`CopyQueue::clear`] or by
    /// this type's methods only).
    pub fn new(words: &'a mut [u64; QUEUE_WORDS]) -> CopyQueue<'a> {
        CopyQueue {
            base: words.as_mut_ptr(),
            stride: 1,
            words: PhantomData,
        }
    }

    /// The queue whose word `i` is at `base + i * stride`.
    ///
    /// # Safety
    /// Those [`QUEUE_WORDS`] words must be valid, aligned `u64`s that
    /// nothing else reads or writes while the queue lives.
    pub unsafe fn strided(base: *mut u64, stride: usize) -> CopyQueue<'a> {
        CopyQueue {
            base,
            stride,
            words: PhantomData,
        }
    }

    /// Word `i` (`i < QUEUE_WORDS`).
    fn word(&self, i: usize) -> u64 {
        debug_assert!(i < QUEUE_WORDS);
        // SAFETY: one of the queue's words (`new`, `strided`).
        unsafe { self.base.add(i * self.stride).read() }
    }

    /// Writes word `i` (`i < QUEUE_WORDS`).
    fn set(&mut self, i: usize, v: u64) {
        debug_assert!(i < QUEUE_WORDS);
        // SAFETY: one of the queue's words (`new`, `strided`), which only
        // this queue reaches.
        unsafe { self.base.add(i * self.stride).write(v) }
    }

    /// Empties the queue and numbers its open group and open bulk group 0
    /// (a thread's queue at its start: only the header is written).
    pub fn clear(&mut self) {
        self.set(0, 0);
    }

    /// Copies in flight.
    pub fn len(&self) -> usize {
        (self.word(0) & 0xff) as usize
    }

    /// True when no copy is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open group's number (the groups committed so far, modulo 2^16).
    fn open(&self) -> u16 {
        (self.word(0) >> 16) as u16
    }

    /// Writes the count and the open group, keeping the bulk group's
    /// number.
    fn set_header(&mut self, len: usize, open: u16) {
        let bulk = self.word(0) & BULK_OPEN;
        self.set(0, len as u64 | u64::from(open) << 16 | bulk);
    }

    /// The thread's open bulk group's number (its bulk groups committed
    /// so far, modulo 2^16), which numbers its bulk and tensor stores in
    /// flight (`crate::bulk_copies`); kept in the queue's header, which
    /// only the thread reaches.
    pub fn bulk_open(&self) -> u16 {
        ((self.word(0) & BULK_OPEN) >> 32) as u16
    }

    /// `cp.async.bulk.commit_group`: the next bulk group is open.
    pub fn bulk_commit(&mut self) {
        let next = u64::from(self.bulk_open().wrapping_add(1)) << 32;
        let header = self.word(0) & !BULK_OPEN | next;
        self.set(0, header);
    }

    /// Copy `i` (0: the oldest) and its group.
    fn entry(&self, i: usize) -> (InFlightCopy, u16) {
        let at = 1 + i * COPY_WORDS;
        let mut w = [0u64; COPY_WORDS];
        for (k, x) in w.iter_mut().enumerate() {
            *x = self.word(at + k);
        }
        InFlightCopy::unpack(&w)
    }

    /// Copy `i` in flight, 0 the oldest.
    pub fn get(&self, i: usize) -> Option<InFlightCopy> {
        (i < self.len()).then(|| self.entry(i).0)
    }

    /// Adds `copy` to the open group; when the queue was full, its oldest
    /// copy leaves it first and is returned, for the caller to complete.
    pub fn push(&mut self, copy: InFlightCopy) -> Option<InFlightCopy> {
        let evicted = if self.len() == IN_FLIGHT {
            self.pop_front()
        } else {
            None
        };
        let (len, open) = (self.len(), self.open());
        let at = 1 + len * COPY_WORDS;
        for (k, w) in copy.pack(open).into_iter().enumerate() {
            self.set(at + k, w);
        }
        self.set_header(len + 1, open);
        evicted
    }

    /// `commit_group`: the open group's copies form a committed group.
    pub fn commit(&mut self) {
        self.set_header(self.len(), self.open().wrapping_add(1));
    }

    /// The oldest copy that `wait_group newest` completes (every
    /// committed group but the newest `newest`), taken out of the queue;
    /// `None` once there is none. Called until `None`.
    pub fn complete_next(&mut self, newest: u32) -> Option<InFlightCopy> {
        // Groups grow in issue order: if the oldest copy stays, all stay.
        if self.is_empty() {
            return None;
        }
        let (_, group) = self.entry(0);
        let age = u32::from(self.open().wrapping_sub(group));
        if age > newest {
            self.pop_front()
        } else {
            None
        }
    }

    /// The oldest copy, committed or not, taken out of the queue (the
    /// thread returns: its copies complete).
    pub fn pop_front(&mut self) -> Option<InFlightCopy> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        let (first, _) = self.entry(0);
        for k in 1 + COPY_WORDS..1 + len * COPY_WORDS {
            let w = self.word(k);
            self.set(k - COPY_WORDS, w);
        }
        self.set_header(len - 1, self.open());
        Some(first)
    }

    /// The oldest copy in flight whose destination (`shared`) or source
    /// (otherwise) overlaps `lo..hi`, and the first byte they share.
    pub fn overlapping(&self, shared: bool, lo: u64, hi: u64) -> Option<(InFlightCopy, u64)> {
        (0..self.len()).find_map(|i| {
            let (c, _) = self.entry(i);
            c.overlap(shared, lo, hi).map(|at| (c, at))
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::VecDeque;
    use std::vec::Vec;

    fn copy(n: u64) -> InFlightCopy {
        InFlightCopy {
            shared: 0x1000 + 16 * n,
            shared_bytes: 16,
            array: 0x1000,
            array_bytes: 4096,
            shadow: 0x9000,
            site: 0x7700,
            global: 0x10_0000 + 16 * n,
            global_bytes: (n % 17) as u32,
            location: 0x5500 + 8 * n,
        }
    }

    #[test]
    fn an_area_holds_a_queue_for_every_thread_an_sm_holds() {
        let a = QueueArea::for_threads(256);
        assert_eq!((a.threads, a.regions), (256, 8));
        let part = (QueueArea::QUEUES_AT + 256 * QUEUE_BYTES) as u64;
        assert_eq!(a.bytes(132), 64 + 132 * 8 * part);
        assert_eq!(
            QueueArea::for_threads(32).regions,
            32,
            "at most one per region"
        );
        assert_eq!(QueueArea::for_threads(1024).regions, 2);
        assert_eq!(QueueArea::for_threads(1000).regions, 2);
        assert_eq!(QueueArea::for_threads(48).threads, 64, "whole warps");
        // Regions of one SM, then the next SM's, without overlap: each a
        // list of bulk copies, then the queues.
        let q = |sm, r| a.cta_part(sm, r, 256).unwrap();
        assert_eq!(q(0, 0) % 16, 0);
        assert_eq!(q(0, 1) - q(0, 0), part);
        assert_eq!(q(1, 0), q(0, 7) + part);
        assert_eq!(q(131, 7) + part, a.bytes(132));
        assert_eq!(a.cta_part(0, 8, 256), None, "a region past the area");
        assert_eq!(a.cta_part(0, 0, 257), None, "a CTA larger than its queues");
        // The queues of a CTA's threads tile its part of the area after
        // the list: each word of each thread once.
        let mut seen = std::vec![false; 64 * QUEUE_WORDS];
        for t in 0..64 {
            let (at, stride) = QueueArea::thread_queue(t);
            for w in 0..QUEUE_WORDS {
                let word = at as usize / 8 + w * stride;
                assert!(!std::mem::replace(&mut seen[word], true), "{t} {w}");
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert!(!QueueArea::for_threads(128).covers(&QueueArea::for_threads(256)));
        let both = QueueArea {
            threads: 256,
            regions: 16,
        };
        assert!(both.covers(&QueueArea::for_threads(128)) && both.covers(&a));
    }

    #[test]
    fn a_copy_round_trips_through_its_words() {
        let c = copy(9);
        let (back, group) = InFlightCopy::unpack(&c.pack(0xbeef));
        assert_eq!((back, group), (c, 0xbeef));
    }

    #[test]
    fn overlap_is_the_first_shared_byte() {
        let c = copy(0);
        assert_eq!(c.overlap(true, 0x1008, 0x1020), Some(0x1008));
        assert_eq!(c.overlap(true, 0x0ff0, 0x1001), Some(0x1000));
        assert_eq!(c.overlap(true, 0x1010, 0x1020), None);
        assert_eq!(
            c.overlap(false, 0x10_0000, 0x10_0004),
            None,
            "no source bytes"
        );
        let c = copy(1);
        assert_eq!(c.overlap(false, 0x10_0000, 0x10_0014), Some(0x10_0010));
    }

    #[test]
    fn a_wait_leaves_the_open_and_newest_groups_in_flight() {
        let mut w = [0u64; QUEUE_WORDS];
        let mut q = CopyQueue::new(&mut w);
        q.clear();
        q.push(copy(0));
        q.commit();
        q.push(copy(1));
        q.commit();
        q.push(copy(2));
        assert_eq!(q.complete_next(1), Some(copy(0)));
        assert_eq!(q.complete_next(1), None, "the newest group stays");
        assert_eq!(q.complete_next(0), Some(copy(1)));
        assert_eq!(q.complete_next(0), None, "the open group stays");
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_front(), Some(copy(2)));
        assert!(q.is_empty());
    }

    #[test]
    fn the_bulk_group_number_is_kept_beside_the_copies() {
        let mut w = [0u64; QUEUE_WORDS];
        let mut q = CopyQueue::new(&mut w);
        q.clear();
        q.bulk_commit();
        q.bulk_commit();
        q.push(copy(1));
        q.commit();
        q.push(copy(2));
        assert_eq!(q.complete_next(0), Some(copy(1)));
        assert_eq!(q.pop_front(), Some(copy(2)));
        assert_eq!(q.bulk_open(), 2, "copies and groups leave it as it was");
        for _ in 0..0xffff {
            q.bulk_commit();
        }
        assert_eq!((q.bulk_open(), q.len()), (1, 0), "it wraps alone");
        q.clear();
        assert_eq!(q.bulk_open(), 0);
    }

    #[test]
    fn a_full_queue_completes_its_oldest_copy() {
        let mut w = [0u64; QUEUE_WORDS];
        let mut q = CopyQueue::new(&mut w);
        q.clear();
        for n in 0..IN_FLIGHT as u64 {
            assert_eq!(q.push(copy(n)), None);
        }
        assert_eq!(q.push(copy(99)), Some(copy(0)));
        assert_eq!(q.len(), IN_FLIGHT);
        assert_eq!(q.overlapping(true, 0x1000, 0x1010), None);
        assert_eq!(q.overlapping(true, 0x1014, 0x1018), Some((copy(1), 0x1014)));
    }

    /// The PTX model of one thread's `cp.async` groups, as the CPU
    /// backend keeps it: an open list and committed groups, oldest first.
    #[derive(Default)]
    struct Reference {
        open: Vec<u64>,
        groups: VecDeque<Vec<u64>>,
    }

    /// Every sequence of issues, commits, waits and returns completes
    /// each copy exactly once, no earlier than the reference model (only
    /// an overflow completes one earlier, and only the oldest), and the
    /// queue's overlaps are the reference's copies in flight.
    #[test]
    fn the_queue_completes_what_the_ptx_model_completes() {
        let mut rng = crate::test_rng::XorShift::new(0x9e37_79b9_7f4a_7c15u64);
        let mut next = |m: u64| rng.below(m);
        for case in 0..2_000 {
            // Every other case a queue interleaved with 4 others' (a
            // thread's in the GPU's area), whose words must stay apart.
            let stride = if case % 2 == 0 { 1 } else { 5 };
            let mut w = std::vec![u64::MAX; QUEUE_WORDS * stride];
            // SAFETY: `QUEUE_WORDS` words `stride` apart inside `w`, which
            // only the queue reaches while it lives.
            let mut q = unsafe { CopyQueue::strided(w.as_mut_ptr().add(stride / 2), stride) };
            q.clear();
            let mut r = Reference::default();
            let mut issued = 0u64;
            let mut done: Vec<u64> = Vec::new();
            let steps = 1 + next(60);
            for _ in 0..steps {
                match next(10) {
                    0..=4 => {
                        let n = issued;
                        issued += 1;
                        if let Some(old) = q.push(copy(n)) {
                            // An overflow completes the oldest copy in
                            // flight, whatever its group.
                            let oldest = r
                                .groups
                                .iter()
                                .flatten()
                                .chain(r.open.iter())
                                .copied()
                                .min()
                                .expect("a copy in flight");
                            assert_eq!(old, copy(oldest));
                            for g in r.groups.iter_mut() {
                                g.retain(|&c| c != oldest);
                            }
                            r.open.retain(|&c| c != oldest);
                            done.push(oldest);
                        }
                        r.open.push(n);
                    }
                    5 | 6 => {
                        q.commit();
                        r.groups.push_back(core::mem::take(&mut r.open));
                    }
                    7 | 8 => {
                        let newest = next(3) as u32;
                        let mut got = Vec::new();
                        while let Some(c) = q.complete_next(newest) {
                            got.push(c);
                        }
                        let older = r.groups.len().saturating_sub(newest as usize);
                        let want: Vec<u64> = r.groups.drain(..older).flatten().collect();
                        assert_eq!(got, want.iter().map(|&n| copy(n)).collect::<Vec<_>>());
                        done.extend(want);
                    }
                    _ => {
                        let mut got = Vec::new();
                        while let Some(c) = q.pop_front() {
                            got.push(c);
                        }
                        let want: Vec<u64> = core::mem::take(&mut r.groups)
                            .into_iter()
                            .flatten()
                            .chain(core::mem::take(&mut r.open))
                            .collect();
                        assert_eq!(got, want.iter().map(|&n| copy(n)).collect::<Vec<_>>());
                        done.extend(want);
                    }
                }
                let in_flight: Vec<u64> = r
                    .groups
                    .iter()
                    .flatten()
                    .chain(r.open.iter())
                    .copied()
                    .collect();
                assert_eq!(q.len(), in_flight.len());
                for (i, &n) in in_flight.iter().enumerate() {
                    assert_eq!(q.get(i), Some(copy(n)));
                }
            }
            let mut seen = done.clone();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), done.len(), "a copy completed twice");
            // The queue is done with: the words around it are as they were.
            for (i, &x) in w.iter().enumerate() {
                if i % stride != stride / 2 {
                    assert_eq!(x, u64::MAX, "word {i} is another queue's");
                }
            }
        }
    }
}
