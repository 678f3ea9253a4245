//! One block's race state: per-thread clocks, what the block acquired of
//! its own releases, and a compact per-word shadow of the words the block
//! touched in its current barrier interval. Pure data and rules (no
//! locks, no reports), so it is tested on its own.
//!
//! Two accesses by different threads of the block race when they overlap,
//! at least one writes, they are in the same barrier interval, not both
//! are atomic, and no warp collective or release the block acquired
//! orders them (see [`ThreadClock::orders`]).
//!
//! # Releases inside the block
//!
//! The race engine numbers the releases of a block (its CTA): its *epoch*
//! counts them, from 1, and every release (a releasing atomic write, a
//! release fence of any scope) ends the current epoch. Each access here
//! carries the epoch it was made in. The block keeps `known`, the latest
//! of its epochs some thread of it acquired: an acquire that reads a
//! release the block made (directly, or passed on through other blocks)
//! orders every access the block made up to that release, in the block's
//! release order, before every later access of the block; an acquire
//! that reads no such release orders nothing inside the block. `observed`
//! is the latest such epoch a relaxed read saw, which a later acquire
//! fence acquires.
//!
//! That is exact for two threads. With a third it is coarser: the epochs
//! order the block's releases, not its threads, so an access a third
//! thread made before the release counts as released with it, and what
//! one thread acquired counts for every thread of the block. That can
//! hide a race, never invent one.
//!
//! # Asynchronous copies
//!
//! A copy's accesses take place somewhere between its issue and the
//! completion a thread waits for. At the issue they are checked as the
//! issuing thread's (ordered after what it did before) and kept as
//! accesses *in flight* ([`Access::copy`]): until the completion they
//! are ordered before nothing, not even the issuer's own later accesses,
//! and no barrier or acquire forgets them. The completion
//! ([`BlockShadow::copy_completed`]) turns them into accesses of the
//! thread that saw it complete, made at that moment: from then on they
//! order like that thread's own.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::Location;
use vigil_shared::block::{word_mask, BlockAcquired};
use vigil_shared::AccessKind;

/// Accesses a word remembers per barrier interval. A write is checked
/// against all of them, so with several readers at least one differs from
/// the writer's thread; an overflowing word forgets its oldest read, which
/// can only hide a race.
pub(crate) const WAYS: usize = 4;

/// Bytes per shadow word.
pub(crate) const WORD: u64 = 4;

/// What one thread of the block knows: its barrier epoch (barriers it
/// arrived at) and its warp clock (one entry per lane of its warp, joined
/// by collectives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ThreadClock {
    /// Barriers the thread arrived at.
    pub(crate) epoch: u32,
    /// Lane clocks of the thread's warp as the thread knows them; its own
    /// entry counts the collectives it joined, from 1.
    pub(crate) warp: [u32; 32],
}

impl ThreadClock {
    /// The clock of thread `thread` (linear index in its block) at block start.
    pub(crate) fn new(thread: u32) -> Self {
        let mut warp = [0; 32];
        warp[(thread % 32) as usize] = 1;
        ThreadClock { epoch: 0, warp }
    }

    /// True when `prior` happened before this thread's next access, with
    /// `acquired` what its block acquired of its own releases: the
    /// same thread, an earlier barrier interval, a warp collective of its
    /// warp that this thread joined after `prior`'s thread did, or a
    /// release after it that the block acquired. A copy in flight is
    /// ordered before nothing.
    pub(crate) fn orders(&self, prior: &Access, me: u32, acquired: BlockAcquired) -> bool {
        prior.copy == 0 && self.orders_made(prior, me, acquired)
    }

    /// [`orders`](Self::orders) as if `prior` had been made by its thread
    /// at the moment it was recorded (for an access in flight: its issue).
    fn orders_made(&self, prior: &Access, me: u32, acquired: BlockAcquired) -> bool {
        prior.thread == me
            || prior.epoch != self.epoch
            || acquired.covers(prior.release_epoch)
            || (prior.thread / 32 == me / 32
                && self.warp[(prior.thread % 32) as usize] >= prior.clock)
    }
}

/// One remembered access to one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    /// Linear thread index in the block.
    pub(crate) thread: u32,
    /// The thread's barrier epoch at the access.
    pub(crate) epoch: u32,
    /// The thread's own warp-clock entry at the access.
    pub(crate) clock: u32,
    /// The block's access number.
    pub(crate) seq: u64,
    /// The block's release epoch at the access (see the module docs).
    pub(crate) release_epoch: u16,
    /// The bytes of the word it touched (bit `i`: byte `i`).
    pub(crate) bytes: u8,
    /// What it did.
    pub(crate) kind: AccessKind,
    /// Where in the kernel.
    pub(crate) location: &'static Location<'static>,
    /// For a shared-memory access, where the shared view it went through
    /// was allocated (views over the same bytes share the word).
    pub(crate) view: Option<&'static Location<'static>>,
    /// For an access of an asynchronous copy in flight, the block's
    /// number of the copy (from 1); 0 for every other access.
    pub(crate) copy: u32,
}

impl Access {
    /// True for an access of an asynchronous copy not completed yet.
    fn in_flight(&self) -> bool {
        self.copy != 0
    }
}

/// A word's accesses of the current barrier interval: the first `len` of
/// `accesses` (the others are stale copies, never read).
#[derive(Clone, Copy, Debug)]
struct Word {
    epoch: u32,
    len: u8,
    accesses: [Access; WAYS],
}

impl Word {
    /// A word whose only access of the interval is `first`.
    fn new(first: Access) -> Self {
        Word {
            epoch: first.epoch,
            len: 1,
            accesses: [first; WAYS],
        }
    }

    fn live(&self) -> &[Access] {
        &self.accesses[..self.len as usize]
    }

    /// Starts the interval `epoch`: forgets every access but the copies
    /// still in flight.
    fn keep_in_flight(&mut self, epoch: u32) {
        let mut n = 0;
        for i in 0..self.len as usize {
            if self.accesses[i].in_flight() {
                self.accesses[n] = self.accesses[i];
                n += 1;
            }
        }
        self.len = n as u8;
        self.epoch = epoch;
    }
}

/// What an access is, beside its thread and bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Made {
    /// What it does.
    pub(crate) kind: AccessKind,
    /// Where in the kernel.
    pub(crate) location: &'static Location<'static>,
    /// For shared memory, where the shared view it goes through was
    /// allocated.
    pub(crate) view: Option<&'static Location<'static>>,
    /// The block's release epoch at the access.
    pub(crate) release_epoch: u16,
}

/// A race between `prior` and the access being made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    /// The earlier access.
    pub(crate) prior: Access,
    /// The first byte both touch.
    pub(crate) address: u64,
}

/// A multiplicative hasher for word numbers (keys are `u64`s, not attacker-chosen).
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The state of the block running on one virtual SM.
#[derive(Default)]
pub(crate) struct BlockShadow {
    threads: Vec<ThreadClock>,
    words: HashMap<u64, Word, BuildHasherDefault<WordHasher>>,
    /// Accesses so far in the block.
    seq: u64,
    /// What the block acquired and observed of its own releases (the
    /// rule both backends share).
    acquired: BlockAcquired,
}

impl BlockShadow {
    /// Forgets the previous block (keeps the allocations).
    pub(crate) fn reset(&mut self) {
        self.threads.clear();
        self.words.clear();
        self.seq = 0;
        self.acquired = BlockAcquired::default();
    }

    /// Thread `t`'s clock, created at its start value on first use.
    pub(crate) fn thread(&mut self, t: u32) -> &mut ThreadClock {
        let t = t as usize;
        if self.threads.len() <= t {
            let from = self.threads.len() as u32;
            self.threads.extend((from..=t as u32).map(ThreadClock::new));
        }
        &mut self.threads[t]
    }

    /// Thread `t` arrives at a barrier.
    pub(crate) fn barrier(&mut self, t: u32) {
        self.thread(t).epoch += 1;
    }

    /// A thread of the block acquired the block's releases up to epoch
    /// `epoch`: every access the block made in that epoch or before is
    /// ordered before every later access of the block.
    pub(crate) fn acquired(&mut self, epoch: u16) {
        self.acquired.acquire(epoch);
    }

    /// A relaxed read of the block observed its releases up to `epoch`,
    /// which its next acquire fence acquires ([`Self::acquire_observed`]).
    pub(crate) fn observed(&mut self, epoch: u16) {
        self.acquired.observe(epoch);
    }

    /// An acquire fence: what the block's relaxed reads observed is
    /// acquired.
    pub(crate) fn acquire_observed(&mut self) {
        self.acquired.acquire_observed();
    }

    /// A warp collective of warp `warp` released `lanes` after `contributed`
    /// joined it: each released lane's warp clock becomes the join of the
    /// contributors' and its own entry advances.
    pub(crate) fn warp_joined(&mut self, warp: u32, lanes: u32, contributed: u32) {
        let base = warp as usize * 32;
        let members = contributed | lanes;
        if members == 0 {
            return;
        }
        self.thread(base as u32 + (31 - members.leading_zeros()));
        let end = (base + 32).min(self.threads.len());
        let clocks = &mut self.threads[base..end];
        let mut joined = [0u32; 32];
        for l in bits(members) {
            for (j, v) in joined.iter_mut().zip(&clocks[l as usize].warp) {
                *j = (*j).max(*v);
            }
        }
        for l in bits(lanes) {
            let c = &mut clocks[l as usize];
            c.warp = joined;
            c.warp[l as usize] += 1;
        }
    }

    /// Thread `t` accesses `size` bytes at `addr` (as `made` says); calls
    /// `race` with each earlier access of the interval (or copy in
    /// flight) it races with.
    pub(crate) fn access(
        &mut self,
        t: u32,
        addr: u64,
        size: u64,
        made: Made,
        race: impl FnMut(Conflict),
    ) {
        self.record(t, addr, size, made, 0, race)
    }

    /// Thread `t` issues an asynchronous copy that accesses `size` bytes
    /// at `addr` (as `made` says), the block's copy number `copy` (not
    /// 0): checked as `t`'s access, and kept in flight until
    /// [`copy_completed`](Self::copy_completed) names it.
    pub(crate) fn copy_issued(
        &mut self,
        t: u32,
        copy: u32,
        addr: u64,
        size: u64,
        made: Made,
        race: impl FnMut(Conflict),
    ) {
        debug_assert_ne!(copy, 0, "copy numbers start at 1");
        self.record(t, addr, size, made, copy, race)
    }

    /// Thread `t` saw copy `copy` complete, in the block's release epoch
    /// `release_epoch`: its accesses in flight to the `size` bytes at
    /// `addr` become `t`'s, made now. Nothing is checked: every access
    /// that could race with the copy met it in flight.
    pub(crate) fn copy_completed(
        &mut self,
        t: u32,
        copy: u32,
        addr: u64,
        size: u64,
        release_epoch: u16,
    ) {
        self.thread(t);
        let clock = &self.threads[t as usize];
        let acquired = self.acquired;
        for (word, _) in word_bytes(addr, size) {
            let Some(w) = self.words.get_mut(&word) else {
                continue;
            };
            if w.epoch != clock.epoch {
                w.keep_in_flight(clock.epoch);
            }
            while let Some(i) = w.live().iter().position(|p| p.copy == copy) {
                let p = w.accesses[i];
                w.accesses.copy_within(i + 1..w.len as usize, i);
                w.len -= 1;
                let done = Access {
                    thread: t,
                    epoch: clock.epoch,
                    clock: clock.warp[(t % 32) as usize],
                    release_epoch,
                    copy: 0,
                    ..p
                };
                remember(w, done, |q| clock.orders(q, t, acquired));
            }
        }
    }

    /// Records thread `t`'s access (of copy `copy` in flight, or a plain
    /// one with 0) and calls `race` with what it races with.
    fn record(
        &mut self,
        t: u32,
        addr: u64,
        size: u64,
        made: Made,
        copy: u32,
        mut race: impl FnMut(Conflict),
    ) {
        if size == 0 {
            return;
        }
        let seq = self.seq;
        self.seq += 1;
        self.thread(t);
        let clock = &self.threads[t as usize];
        let acquired = self.acquired;
        let me = Access {
            thread: t,
            epoch: clock.epoch,
            clock: clock.warp[(t % 32) as usize],
            seq,
            release_epoch: made.release_epoch,
            bytes: 0,
            kind: made.kind,
            location: made.location,
            view: made.view,
            copy,
        };
        for (word, bytes) in word_bytes(addr, size) {
            let cur = Access { bytes, ..me };
            let w = match self.words.entry(word) {
                Entry::Vacant(v) => {
                    v.insert(Word::new(cur));
                    continue;
                }
                Entry::Occupied(o) => o.into_mut(),
            };
            if w.epoch != clock.epoch {
                // An earlier interval: a barrier orders all of it but the
                // copies still in flight.
                w.keep_in_flight(clock.epoch);
                if w.len == 0 {
                    *w = Word::new(cur);
                    continue;
                }
            }
            for p in w.live() {
                if p.bytes & bytes != 0
                    && conflicts(p.kind, made.kind)
                    && !clock.orders(p, t, acquired)
                {
                    let first = (p.bytes & bytes).trailing_zeros();
                    race(Conflict {
                        prior: *p,
                        address: word * WORD + u64::from(first),
                    });
                }
            }
            // An access in flight stands for nothing before it: its
            // completion hands it to a thread that need not be ordered
            // after what its issuer was.
            remember(w, cur, |p| copy == 0 && clock.orders(p, t, acquired));
        }
    }
}

/// The words `size` bytes at `addr` touch, each with the bytes of it
/// they touch (bit `i`: byte `i`).
fn word_bytes(addr: u64, size: u64) -> impl Iterator<Item = (u64, u8)> {
    let end = addr + size;
    (addr / WORD..end.div_ceil(WORD)).map(move |word| (word, word_mask(word * WORD, addr, end)))
}

/// True when an access of kind `a` and one of kind `b` to the same bytes
/// can race: one writes, and not both are atomic.
fn conflicts(a: AccessKind, b: AccessKind) -> bool {
    (a.writes() || b.writes()) && !(a.is_atomic() && b.is_atomic())
}

/// True when `cur`, made after `prior` and ordered after it, stands for it
/// from now on: every later access that conflicts with `prior` conflicts
/// with `cur` (and one ordered after `cur` is ordered after `prior`). A
/// plain write stands for anything, an atomic write for atomics, a plain
/// read for its own thread's plain reads.
fn supersedes(cur: &Access, prior: &Access) -> bool {
    match (cur.kind.is_atomic(), cur.kind.writes()) {
        (false, true) => true,
        (true, true) => prior.kind.is_atomic(),
        (false, false) => prior.thread == cur.thread && prior.kind == AccessKind::Read,
        (true, false) => prior.thread == cur.thread && prior.kind == cur.kind,
    }
}

/// Adds `cur` to the word, dropping the accesses it covers, is ordered
/// after (`ordered`) and [`supersedes`] (a racy one stays: a later access
/// ordered after `cur` may still race with it). A full word forgets its
/// oldest read (or, with none, its oldest access).
fn remember(w: &mut Word, cur: Access, ordered: impl Fn(&Access) -> bool) {
    let covered = |p: &Access| p.bytes & !cur.bytes == 0 && ordered(p) && supersedes(&cur, p);
    let mut n = 0;
    for i in 0..w.len as usize {
        let p = w.accesses[i];
        if !covered(&p) {
            w.accesses[n] = p;
            n += 1;
        }
    }
    if n == WAYS {
        let drop = w
            .accesses
            .iter()
            .position(|p| !p.kind.writes())
            .unwrap_or(0);
        w.accesses.copy_within(drop + 1.., drop);
        n -= 1;
    }
    w.accesses[n] = cur;
    w.len = (n + 1) as u8;
}

/// The indices of the set bits of `m`, lowest first.
fn bits(mut m: u32) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        let l = m.trailing_zeros();
        m &= m.wrapping_sub(1);
        (l < 32).then_some(l)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Threads of the generated blocks: three lanes of warp 0, one of warp 1.
    const THREADS: [u32; 4] = [0, 1, 2, 33];

    #[derive(Clone, Debug)]
    enum Step {
        Access {
            t: u32,
            addr: u64,
            size: u64,
            kind: AccessKind,
        },
        Barrier,
        Warp {
            lanes: u32,
        },
        /// The block releases: its epoch advances.
        Release,
        /// The block acquires its releases up to `back` epochs before its
        /// current one.
        Acquire {
            back: u16,
        },
        /// A relaxed read observes the releases up to `back` epochs before
        /// the current one.
        Observe {
            back: u16,
        },
        /// An acquire fence: what was observed is acquired.
        Fence,
        /// Thread `t` issues a copy that reads or writes the bytes.
        CopyIssue {
            t: u32,
            addr: u64,
            size: u64,
            kind: AccessKind,
        },
        /// Thread `waiter` sees the `pick`-th copy in flight (modulo their
        /// number) complete.
        CopyComplete {
            pick: usize,
            waiter: u32,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        let thread = proptest::sample::select(THREADS.to_vec());
        let kind = proptest::sample::select(vec![
            AccessKind::Read,
            AccessKind::Write,
            AccessKind::AtomicRmw,
        ]);
        let access = (thread.clone(), 0u64..12, 0usize..3, kind).prop_map(|(t, a, s, kind)| {
            let size = [1u64, 2, 4][s];
            Step::Access {
                t,
                addr: a / size * size,
                size,
                kind,
            }
        });
        let copy_kind = proptest::sample::select(vec![AccessKind::Read, AccessKind::Write]);
        let issue = (thread.clone(), 0u64..3, copy_kind).prop_map(|(t, a, kind)| Step::CopyIssue {
            t,
            addr: 4 * a,
            size: 4,
            kind,
        });
        let complete =
            (0usize..4, thread).prop_map(|(pick, waiter)| Step::CopyComplete { pick, waiter });
        prop_oneof![
            8 => access,
            2 => issue,
            2 => complete,
            1 => Just(Step::Barrier),
            2 => (1u32..8).prop_map(|lanes| Step::Warp { lanes }),
            2 => Just(Step::Release),
            1 => (0u16..3).prop_map(|back| Step::Acquire { back }),
            1 => (0u16..3).prop_map(|back| Step::Observe { back }),
            1 => Just(Step::Fence),
        ]
    }

    /// The reference: every access kept with its release epoch,
    /// happens-before by barriers and collectives as explicit sets of
    /// earlier accesses each thread is ordered after, and the block's
    /// acquired and observed epochs.
    struct Reference {
        /// Thread, address, size, kind, release epoch, and the copy number
        /// while in flight (0: none).
        accesses: Vec<(u32, u64, u64, AccessKind, u16, u32)>,
        known: Vec<BTreeSet<usize>>,
        epoch: u16,
        acquired: u16,
        observed: u16,
    }

    impl Reference {
        fn slot(t: u32) -> usize {
            THREADS.iter().position(|&x| x == t).unwrap()
        }

        /// The earlier accesses an access by `t` races with (by index);
        /// records it, in flight as copy `copy` unless that is 0 (known
        /// to nobody until it completes).
        fn access(
            &mut self,
            t: u32,
            addr: u64,
            size: u64,
            kind: AccessKind,
            copy: u32,
        ) -> BTreeSet<usize> {
            let me = Self::slot(t);
            let races = self
                .accesses
                .iter()
                .enumerate()
                .filter(|(i, &(pt, pa, ps, pk, pe, pc))| {
                    (pc != 0 || pt != t)
                        && pa < addr + size
                        && addr < pa + ps
                        && conflicts(pk, kind)
                        && !self.known[me].contains(i)
                        && (pc != 0 || pe > self.acquired)
                })
                .map(|(i, _)| i)
                .collect();
            if copy == 0 {
                self.known[me].insert(self.accesses.len());
            }
            self.accesses.push((t, addr, size, kind, self.epoch, copy));
            races
        }

        /// Copy `copy` completes, seen by `waiter`: its accesses become
        /// the waiter's, made now.
        fn complete(&mut self, copy: u32, waiter: u32) {
            let epoch = self.epoch;
            for (i, a) in self.accesses.iter_mut().enumerate() {
                if a.5 == copy {
                    *a = (waiter, a.1, a.2, a.3, epoch, 0);
                    self.known[Self::slot(waiter)].insert(i);
                }
            }
        }

        /// Every access but the copies in flight.
        fn everything(&self) -> BTreeSet<usize> {
            (0..self.accesses.len())
                .filter(|&i| self.accesses[i].5 == 0)
                .collect()
        }
    }

    proptest! {
        /// Until a word holds `WAYS` accesses (after which it may forget
        /// one), an access is reported racing exactly when the reference
        /// finds an earlier access it races with, and every access it is
        /// reported racing with is one of those.
        #[test]
        fn agrees_with_a_reference_that_keeps_every_access(
            steps in proptest::collection::vec(step(), 1..40)
        ) {
            let loc = Location::caller();
            let mut shadow = BlockShadow::default();
            let mut reference = Reference {
                accesses: Vec::new(),
                known: vec![BTreeSet::new(); THREADS.len()],
                epoch: 1,
                acquired: 0,
                observed: 0,
            };
            let mut in_flight: Vec<u32> = Vec::new();
            let mut copies = 0;
            for s in steps {
                match s {
                    Step::Access { t, addr, size, kind } | Step::CopyIssue { t, addr, size, kind } => {
                        let copy = if matches!(s, Step::CopyIssue { .. }) {
                            copies += 1;
                            in_flight.push(copies);
                            copies
                        } else {
                            0
                        };
                        let want = reference.access(t, addr, size, kind, copy);
                        let mut got = Vec::new();
                        let made = Made { kind, location: loc, view: None, release_epoch: reference.epoch };
                        let report = |c: Conflict| got.push(c.prior.seq as usize);
                        match copy {
                            0 => shadow.access(t, addr, size, made, report),
                            c => shadow.copy_issued(t, c, addr, size, made, report),
                        }
                        prop_assert_eq!(got.is_empty(), want.is_empty(), "got {:?}, want {:?}", got, want);
                        for g in &got {
                            prop_assert!(want.contains(g), "reported {} not in {:?}", g, want);
                        }
                    }
                    Step::CopyComplete { pick, waiter } => {
                        if in_flight.is_empty() {
                            continue;
                        }
                        let copy = in_flight.remove(pick % in_flight.len());
                        let ranges: Vec<(u64, u64)> = reference
                            .accesses
                            .iter()
                            .filter(|a| a.5 == copy)
                            .map(|a| (a.1, a.2))
                            .collect();
                        reference.complete(copy, waiter);
                        for (addr, size) in ranges {
                            shadow.copy_completed(waiter, copy, addr, size, reference.epoch);
                        }
                    }
                    Step::Barrier => {
                        for t in THREADS {
                            shadow.barrier(t);
                        }
                        let all = reference.everything();
                        reference.known.iter_mut().for_each(|k| *k = all.clone());
                    }
                    Step::Warp { lanes } => {
                        shadow.warp_joined(0, lanes, lanes);
                        let members: Vec<usize> = (0..3).filter(|l| lanes & (1 << l) != 0).collect();
                        let union: BTreeSet<usize> = members.iter().flat_map(|&l| reference.known[l].clone()).collect();
                        for l in members {
                            reference.known[l] = union.clone();
                        }
                    }
                    Step::Release => reference.epoch += 1,
                    Step::Acquire { back } => {
                        let e = reference.epoch.saturating_sub(back);
                        shadow.acquired(e);
                        reference.acquired = reference.acquired.max(e);
                    }
                    Step::Observe { back } => {
                        let e = reference.epoch.saturating_sub(back);
                        shadow.observed(e);
                        reference.observed = reference.observed.max(e);
                    }
                    Step::Fence => {
                        shadow.acquire_observed();
                        reference.acquired = reference.acquired.max(reference.observed);
                    }
                }
                if shadow.words.values().any(|w| w.len as usize == WAYS) {
                    break;
                }
            }
        }
    }

    /// The conflicts of thread `t` writing (`write`) or reading the word
    /// at `addr` in release epoch `epoch`, as the prior accesses' threads.
    fn touch(shadow: &mut BlockShadow, t: u32, addr: u64, write: bool, epoch: u16) -> Vec<u32> {
        let kind = if write {
            AccessKind::Write
        } else {
            AccessKind::Read
        };
        let mut got = Vec::new();
        let loc = Location::caller();
        let made = Made {
            kind,
            location: loc,
            view: None,
            release_epoch: epoch,
        };
        shadow.access(t, addr, 4, made, |c| got.push(c.prior.thread));
        got
    }

    /// What the block acquired orders the accesses of that epoch and
    /// before, not those of a later epoch.
    #[test]
    fn known_covers_its_epoch_and_earlier_ones() {
        let mut shadow = BlockShadow::default();
        assert!(touch(&mut shadow, 32, 0, true, 1).is_empty());
        assert!(touch(&mut shadow, 33, 4, true, 2).is_empty());
        assert!(touch(&mut shadow, 34, 8, true, 3).is_empty());
        shadow.acquired(2);
        assert_eq!(shadow.acquired.known, 2);
        assert!(touch(&mut shadow, 0, 0, false, 4).is_empty());
        assert!(touch(&mut shadow, 0, 4, false, 4).is_empty());
        assert_eq!(touch(&mut shadow, 0, 8, false, 4), [34]);
        // Acquiring an older epoch later keeps the latest.
        shadow.acquired(1);
        assert_eq!(shadow.acquired.known, 2);
    }

    /// Nothing acquired (an acquire that read no release of the block):
    /// another thread's access in the first epoch races.
    #[test]
    fn nothing_acquired_orders_nothing() {
        let mut shadow = BlockShadow::default();
        assert!(touch(&mut shadow, 32, 0, true, 1).is_empty());
        shadow.acquired(0);
        assert_eq!(touch(&mut shadow, 0, 0, false, 1), [32]);
    }

    /// What a relaxed read observed is acquired by the next acquire fence
    /// only.
    #[test]
    fn observed_waits_for_a_fence() {
        let mut shadow = BlockShadow::default();
        assert!(touch(&mut shadow, 32, 0, true, 1).is_empty());
        assert!(touch(&mut shadow, 32, 4, true, 1).is_empty());
        shadow.observed(1);
        assert_eq!(shadow.acquired.known, 0);
        assert_eq!(touch(&mut shadow, 0, 0, false, 2), [32]);
        shadow.acquire_observed();
        assert_eq!(shadow.acquired.known, 1);
        assert!(touch(&mut shadow, 0, 4, false, 2).is_empty());
    }

    /// Barriers and warp collectives order as before, whatever was
    /// acquired; a new block forgets what the last one acquired.
    #[test]
    fn barriers_and_collectives_order_without_releases() {
        let mut shadow = BlockShadow::default();
        assert!(touch(&mut shadow, 1, 0, true, 5).is_empty());
        shadow.warp_joined(0, 0b11, 0b11);
        assert!(touch(&mut shadow, 0, 0, false, 5).is_empty());
        assert!(touch(&mut shadow, 32, 4, true, 5).is_empty());
        for t in [0, 1, 32] {
            shadow.barrier(t);
        }
        assert!(touch(&mut shadow, 0, 4, false, 5).is_empty());
        shadow.acquired(3);
        shadow.reset();
        assert_eq!(shadow.acquired.known, 0);
        assert!(touch(&mut shadow, 32, 0, true, 1).is_empty());
        assert_eq!(touch(&mut shadow, 0, 0, false, 1), [32]);
    }

    /// Thread `t` issues copy `copy` writing the word at `addr`: the
    /// threads of the accesses it races with.
    fn issue(shadow: &mut BlockShadow, t: u32, copy: u32, addr: u64) -> Vec<u32> {
        let made = Made {
            kind: AccessKind::Write,
            location: Location::caller(),
            view: None,
            release_epoch: 1,
        };
        let mut got = Vec::new();
        shadow.copy_issued(t, copy, addr, 4, made, |c| got.push(c.prior.thread));
        got
    }

    /// The issuer's own read of a copy's destination races with the copy
    /// until the copy completes, and not after.
    #[test]
    fn a_copy_in_flight_races_with_its_own_issuer() {
        let mut shadow = BlockShadow::default();
        assert!(touch(&mut shadow, 0, 0, false, 1).is_empty());
        // The issuer's earlier read is ordered before its copy.
        assert!(issue(&mut shadow, 0, 1, 0).is_empty());
        assert_eq!(touch(&mut shadow, 0, 0, false, 1), [0]);
        shadow.copy_completed(0, 1, 0, 4, 1);
        assert!(touch(&mut shadow, 0, 0, false, 1).is_empty());
        // Another thread, with no barrier since the completion, races.
        assert_eq!(touch(&mut shadow, 1, 0, false, 1), [0]);
    }

    /// A barrier orders neither way across a copy in flight; after its
    /// completion, one does.
    #[test]
    fn a_copy_in_flight_outlives_barriers() {
        let mut shadow = BlockShadow::default();
        assert!(issue(&mut shadow, 0, 1, 0).is_empty());
        for t in [0, 1] {
            shadow.barrier(t);
        }
        shadow.acquired(5);
        assert_eq!(touch(&mut shadow, 1, 0, false, 1), [0]);
        shadow.copy_completed(0, 1, 0, 4, 1);
        for t in [0, 1] {
            shadow.barrier(t);
        }
        assert!(touch(&mut shadow, 1, 0, false, 6).is_empty());
        // A second copy to the same word meets that read (made after the
        // release the block acquired).
        assert_eq!(issue(&mut shadow, 0, 2, 0), [1]);
    }

    /// Two copies in flight to the same bytes race with each other, even
    /// from one thread.
    #[test]
    fn two_copies_in_flight_race() {
        let mut shadow = BlockShadow::default();
        assert!(issue(&mut shadow, 0, 1, 0).is_empty());
        assert_eq!(issue(&mut shadow, 0, 2, 0), [0]);
    }
}
