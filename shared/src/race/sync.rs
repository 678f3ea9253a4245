//! Synchronisation between CTAs through memory: release heads on words,
//! a CTA's synchronisation state, acquiring, releasing and fences.
//!
//! A release (a releasing atomic write, or a relaxed one after a release
//! fence) leaves a *head* on each word it wrote: the releaser, its epoch
//! at the release, what it had acquired ([`SnapRef`]) and which launch it
//! was in (so an acquirer in another launch learns that launch's host
//! order too). An acquiring read of a word whose last write continues
//! the release sequence (an atomic on the very same bytes, morally
//! strong with the reader) merges every head whose scope includes it.
//!
//! A word keeps two heads, one per class (releasing device and scope);
//! heads of one class join into one (a snapshot of both), so any number
//! of releasers fit. A third class widens the second head to the system
//! scope (an over-approximation: counted, races may be missed).
//!
//! ```text
//! head word a: | valid | .. | device (8) | scope (2) | epoch (14) | serial |
//! head word b: | launch (LaneRef) | acquired (SnapRef) |
//! ```

use core::sync::atomic::Ordering as MemOrder;

use super::cta::CtaView;
use super::desc::MAX_EPOCH;
use super::knowledge::{lanes_beyond, Arena, Interval, Intervals, SnapRef};
use super::memory::{LaneRef, RaceMemory};
use super::record::Record;
use super::serial::{LaneBounds, Serial, LANES, NO_SERIAL};
use crate::atomic::{AtomicFamily, AtomicU32Ops};
use crate::memory_model::{Ordering, Scope};

/// The record slots of a word's two heads.
pub const HEAD_SLOTS: [usize; 2] = [1, 2];

const VALID: u64 = 1 << 63;
const ANY_DEVICE: u32 = 0xff;

/// A release head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The releaser ([`NO_SERIAL`] for joined heads, whose releasers are
    /// in `known`).
    pub serial: Serial,
    /// Its epoch at the release.
    pub epoch: u16,
    /// The release's scope (device or system).
    pub scope: Scope,
    /// The releaser's device (`ANY_DEVICE` for a widened head).
    pub device: u32,
    /// What it had acquired.
    pub known: SnapRef,
    /// Its launch (0 for joined heads).
    pub lanes: LaneRef,
}

impl Head {
    /// No head (a placeholder).
    pub const NONE: Head = Head {
        serial: NO_SERIAL,
        epoch: 0,
        scope: Scope::Block,
        device: 0,
        known: SnapRef::NONE,
        lanes: 0,
    };

    /// From a record slot; `None` when the slot holds none.
    pub fn from_slot(a: u64, b: u64) -> Option<Head> {
        (a & VALID != 0).then(|| Head {
            serial: a as u32,
            epoch: ((a >> 32) & u64::from(MAX_EPOCH)) as u16,
            scope: match (a >> 46) & 3 {
                0 => Scope::Block,
                1 => Scope::Device,
                _ => Scope::System,
            },
            device: ((a >> 48) & 0xff) as u32,
            known: SnapRef(b as u32),
            lanes: (b >> 32) as u32,
        })
    }

    /// As a record slot.
    pub fn to_slot(self) -> (u64, u64) {
        (
            VALID
                | u64::from(self.serial)
                | u64::from(self.epoch) << 32
                | (self.scope as u64) << 46
                | u64::from(self.device & 0xff) << 48,
            u64::from(self.known.0) | u64::from(self.lanes) << 32,
        )
    }

    /// Whether its scope includes `cta` (a head's scope names whom the
    /// release is visible to).
    #[inline(always)]
    pub fn reaches(&self, cta: &CtaView<'_>) -> bool {
        match self.scope {
            Scope::Block => self.serial == cta.serial,
            Scope::Device => self.device == ANY_DEVICE || self.device == cta.device,
            Scope::System => true,
        }
    }

    /// Whether an acquire of `scope` by `cta` includes the releaser.
    #[inline(always)]
    pub fn included_by(&self, cta: &CtaView<'_>, scope: Scope) -> bool {
        match scope {
            Scope::Block => self.serial != NO_SERIAL && self.serial == cta.serial,
            Scope::Device => self.device == ANY_DEVICE || self.device == cta.device,
            Scope::System => true,
        }
    }
}

/// Words of a CTA's synchronisation state.
pub const SYNC_WORDS: usize = 16;
/// The word of a CTA's synchronisation state holding its epoch (read
/// without the lock by every check).
pub const EPOCH_WORD: usize = slot::EPOCH;
/// The word holding what it acquired ([`SnapRef`]).
pub const KNOWN_WORD: usize = slot::KNOWN;

mod slot {
    pub const LOCK: usize = 0;
    pub const EPOCH: usize = 1;
    pub const KNOWN: usize = 2;
    pub const OBSERVED: [usize; 2] = [3, 4];
    /// Release fences at device and system level: epoch (0: none) and
    /// what was known.
    pub const FENCE_EPOCH: [usize; 2] = [5, 7];
    pub const FENCE_KNOWN: [usize; 2] = [6, 8];
    /// The last head merged (its two words, as four halves).
    pub const MEMO: usize = 9;
    /// Epochs that saturated.
    pub const SATURATED: usize = 13;
    /// The word one of its threads is recording (a hint: see
    /// `CtaSync::claim_recording`).
    pub const RECORDING: usize = 14;
    /// Its epoch at its latest release fence of any scope (0: none): its
    /// later relaxed atomic writes release its epochs up to it to its own
    /// threads ([`write_heads`](super::write_heads)).
    pub const FENCE_BLOCK: usize = 15;
}

/// A CTA's synchronisation state: its epoch, what it acquired, what its
/// relaxed reads observed, its release fences. Lives in the CTA's shared
/// memory on a GPU, in the block's state on the CPU; changed under its
/// lock by one thread at a time.
pub struct CtaSync<'a, F: AtomicFamily> {
    words: &'a [F::U32],
}

impl<'a, F: AtomicFamily> CtaSync<'a, F> {
    /// The state in `words` ([`SYNC_WORDS`] long).
    pub fn new(words: &'a [F::U32]) -> Self {
        debug_assert!(words.len() >= SYNC_WORDS);
        CtaSync { words }
    }

    /// Resets it for a new CTA.
    pub fn init(&self) {
        for w in &self.words[..SYNC_WORDS] {
            w.store(0, MemOrder::Relaxed);
        }
        self.words[slot::EPOCH].store(u32::from(super::desc::FIRST_EPOCH), MemOrder::Relaxed);
    }

    // Relaxed: the lock orders what its holders do, and a check reading
    // the epoch or knowledge without it may see them a little late (the
    // CTA is one sanitizer thread: its threads' views need not agree at
    // every instant).
    fn get(&self, i: usize) -> u32 {
        self.words[i].load(MemOrder::Relaxed)
    }

    fn set(&self, i: usize, v: u32) {
        self.words[i].store(v, MemOrder::Relaxed);
    }

    fn lock(&self) {
        while self.words[slot::LOCK]
            .compare_exchange(0, 1, MemOrder::Acquire, MemOrder::Relaxed)
            .is_err()
        {
            F::spin();
        }
    }

    fn unlock(&self) {
        self.words[slot::LOCK].store(0, MemOrder::Release);
    }

    /// The current epoch.
    #[inline(always)]
    pub fn epoch(&self) -> u16 {
        self.get(slot::EPOCH) as u16
    }

    /// What it acquired.
    #[inline(always)]
    pub fn known(&self) -> SnapRef {
        SnapRef(self.get(slot::KNOWN))
    }

    /// Whether it made a release fence: its later atomic writes leave
    /// heads for it ([`write_heads`]).
    #[inline(always)]
    pub fn fenced(&self) -> bool {
        self.get(slot::FENCE_BLOCK) != 0
    }

    /// Marks the CTA as recording its access to the word tagged `tag`
    /// (nonzero) in the word's record, if it is recording none; false
    /// otherwise. A hint, never needed for exactness: its other threads
    /// that find that access missing wait for it rather than lock the
    /// record one after another to record the very same access.
    #[inline(always)]
    pub fn claim_recording(&self, tag: u32) -> bool {
        self.words[slot::RECORDING]
            .compare_exchange(0, tag, MemOrder::Relaxed, MemOrder::Relaxed)
            .is_ok()
    }

    /// The tag of the word the CTA is recording (0: none).
    #[inline(always)]
    pub fn recording(&self) -> u32 {
        self.get(slot::RECORDING)
    }

    /// Ends [`claim_recording`](Self::claim_recording)'s mark.
    #[inline(always)]
    pub fn end_recording(&self) {
        self.set(slot::RECORDING, 0);
    }

    /// Epochs that saturated (a CTA that released [`MAX_EPOCH`] times).
    pub fn saturated(&self) -> u32 {
        self.get(slot::SATURATED)
    }

    fn bump_epoch(&self) {
        let e = self.get(slot::EPOCH);
        if e >= u32::from(MAX_EPOCH) {
            self.set(slot::SATURATED, self.get(slot::SATURATED) + 1);
        } else {
            self.set(slot::EPOCH, e + 1);
        }
    }
}

/// The intervals a head adds besides its snapshot: its releaser up to
/// its epoch and its launch's host order beyond `ours`. `None` when its
/// launch's bounds are no longer held.
fn head_extra<M: RaceMemory + ?Sized>(
    mem: &M,
    h: &Head,
    ours: &LaneBounds,
    out: &mut [Interval],
) -> Option<usize> {
    let mut n = 0;
    if h.serial != NO_SERIAL {
        out[0] = Interval {
            lo: h.serial,
            hi: h.serial + 1,
            epoch: u32::from(h.epoch),
        };
        n = 1;
    }
    if h.lanes != 0 {
        let theirs = mem.lanes(h.lanes)?;
        n += lanes_beyond(&theirs, ours, &mut out[n..]);
    }
    sort_intervals(&mut out[..n]);
    Some(n)
}

/// Sorts a short list of disjoint intervals by start.
fn sort_intervals(v: &mut [Interval]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1].lo > v[j].lo {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// `known` joined with head `h` (the head's releaser, its snapshot and
/// its launch's host order). A head whose launch is no longer held makes
/// the result omniscient (counted).
#[inline(never)]
fn merge_head<M: RaceMemory + ?Sized>(
    mem: &M,
    known: SnapRef,
    h: &Head,
    ours: &LaneBounds,
) -> SnapRef {
    let arena = mem.arena();
    let mut extra = [Interval {
        lo: 0,
        hi: 0,
        epoch: 0,
    }; LANES + 1];
    let Some(n) = head_extra(mem, h, ours, &mut extra) else {
        arena.count_lost();
        return SnapRef::ALL;
    };
    let mut merged = arena.merge(known, h.known, &extra[..n]);
    // What the releaser's launch inherited from launches before it.
    if h.lanes != 0 {
        if let Some(theirs) = mem.lanes(h.lanes) {
            let inherited = arena.inherited(h.lanes, |x| x < theirs.0[super::serial::lane_of(x)]);
            merged = arena.merge(merged, inherited, &[]);
        }
    }
    merged
}

/// The end of a CTA: if it acquired knowledge of CTAs outside its launch,
/// the exit log keeps it for the launches the host orders after this
/// one (what a CTA learnt of its own launch they order anyway).
pub fn cta_exit<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &CtaView<'_>,
    sync: &CtaSync<'_, S>,
) {
    let known = sync.known();
    if known.is_none() {
        return;
    }
    let arena = mem.arena();
    let (lo, hi) = (cta.host.base, cta.host.base.saturating_add(cta.host.count));
    let outside = match arena.snapshot(known) {
        None => known == SnapRef::ALL,
        Some(snap) => (0..snap.len()).any(|i| {
            let iv = snap.get(i);
            iv.lo < lo || iv.hi > hi
        }),
    };
    if outside {
        arena.log_exit(cta.serial, known);
    }
}

/// The CTA's own knowledge as a self-contained snapshot (for joined
/// heads and SC fences, read by CTAs of any launch): what it acquired,
/// itself up to `epoch`, and its launch's host order.
fn self_contained<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    known: SnapRef,
    epoch: u16,
) -> SnapRef {
    let mut extra = [Interval {
        lo: 0,
        hi: 0,
        epoch: 0,
    }; LANES + 1];
    // The launch's bounds hold its own lane's too (its base).
    let mut n = lanes_beyond(cta.host.bounds, &LaneBounds::NONE, &mut extra);
    extra[n] = Interval {
        lo: cta.serial,
        hi: cta.serial + 1,
        epoch: u32::from(epoch),
    };
    n += 1;
    sort_intervals(&mut extra[..n]);
    mem.arena().merge(known, SnapRef::NONE, &extra[..n])
}

/// A view of the CTA as of its synchronisation state.
pub fn refresh<F: AtomicFamily>(cta: &mut CtaView<'_>, sync: &CtaSync<'_, F>) {
    cta.epoch = sync.epoch();
    cta.known = sync.known();
}

/// What the current atomic read of a head-bearing word does with the
/// heads it sees (called under the CTA's sync lock): every head that
/// reaches it is observed (for a later acquire fence), and merged at once
/// when the read acquires and its scope includes the releaser.
#[inline(never)]
fn take_head<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    h: &Head,
    acquires: bool,
    scope: Scope,
) {
    // Every scope includes the CTA's own threads, so what a head says of
    // the CTA's own releases is learned whatever its scope and class.
    let own = own_epoch(mem, cta, h);
    if own != 0 {
        if acquires {
            cta.own.acquired = cta.own.acquired.max(own);
        } else {
            cta.own.observed = cta.own.observed.max(own);
        }
    }
    if !h.reaches(cta) {
        return;
    }
    let (a, b) = h.to_slot();
    let memo = [a as u32, (a >> 32) as u32, b as u32, (b >> 32) as u32];
    // The memo is the last head the CTA acquired: what it knows and what
    // it observed hold that head already, and both only grow. A poll
    // that fails over and over (a contended lock) reads the same head
    // each time and learns nothing new.
    if (0..4).all(|i| sync.get(slot::MEMO + i) == memo[i]) {
        return;
    }
    let other = usize::from(h.device != cta.device && h.device != ANY_DEVICE);
    let obs = SnapRef(sync.get(slot::OBSERVED[other]));
    sync.set(
        slot::OBSERVED[other],
        merge_head(mem, obs, h, cta.host.bounds).0,
    );
    if acquires && h.included_by(cta, scope) {
        let known = merge_head(mem, cta.known, h, cta.host.bounds);
        sync.set(slot::KNOWN, known.0);
        cta.known = known;
        for (i, m) in memo.iter().enumerate() {
            sync.set(slot::MEMO + i, *m);
        }
    }
}

/// The latest epoch of `cta`'s own releases that head `h` stands for (0:
/// none): its own when `cta` made it, else what its snapshot knows of
/// `cta` (a release that another CTA acquired and passed on).
#[inline(always)]
fn own_epoch<M: RaceMemory + ?Sized>(mem: &M, cta: &CtaView<'_>, h: &Head) -> u16 {
    let mine = if h.serial == cta.serial { h.epoch } else { 0 };
    let passed = if h.known.is_none() {
        0
    } else {
        mem.arena()
            .epoch_of(h.known, cta.serial)
            .min(u32::from(MAX_EPOCH)) as u16
    };
    mine.max(passed)
}

/// An atomic read of the word whose record is `rec` (locked by the
/// caller), continuing its release sequence (`chain`): observes and, if
/// it `acquires` at `scope`, acquires its heads.
#[inline(never)]
pub fn read_heads<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    rec: &Record<'_, M::Atomics>,
    acquires: bool,
    scope: Scope,
) {
    sync.lock();
    refresh(cta, sync);
    for s in HEAD_SLOTS {
        let (a, b) = rec.slot(s);
        if let Some(h) = Head::from_slot(a, b) {
            take_head(mem, cta, sync, &h, acquires, scope);
        }
    }
    sync.unlock();
}

/// An atomic read of a word that holds no release heads, once some
/// release lost its heads (its word had no pool record left: see
/// [`lose_heads`]): it may have read that release's value, so it takes
/// what every lost release knew as one system-scope head (learning too
/// much can only hide races). Called with the CTA's lock free.
#[inline(never)]
pub fn read_lost_heads<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    acquires: bool,
    scope: Scope,
) {
    let lost = mem.arena().lost_releases();
    if lost.is_none() {
        return;
    }
    let h = Head {
        serial: NO_SERIAL,
        epoch: 0,
        scope: Scope::System,
        device: ANY_DEVICE,
        known: lost,
        lanes: 0,
    };
    sync.lock();
    refresh(cta, sync);
    take_head(mem, cta, sync, &h, acquires, scope);
    sync.unlock();
}

/// The heads `heads` could not be left on their word (no pool record):
/// what they knew joins the lost releases every later atomic read of a
/// word without heads takes ([`read_lost_heads`]). Counted.
pub fn lose_heads<M: RaceMemory + ?Sized>(mem: &M, heads: &[Head]) {
    let none = LaneBounds::NONE;
    let mut known = SnapRef::NONE;
    for h in heads {
        known = merge_head(mem, known, h, &none);
    }
    mem.arena().lose_release(known);
}

/// The heads an atomic write by `cta` leaves on a word (its release at
/// `scope` if `releases`, and one per release fence since), in `out`;
/// returns how many.
///
/// A release or release fence at block scope leaves a block-scope head
/// for the CTA's own threads (the same-block check orders by it), unless
/// a head of a wider scope already names a later epoch of the CTA.
#[inline(never)]
pub fn write_heads<F: AtomicFamily>(
    cta: &CtaView<'_>,
    sync: &CtaSync<'_, F>,
    lanes: LaneRef,
    releases: bool,
    scope: Scope,
    out: &mut [Head; 3],
) -> usize {
    let mut n = 0;
    for (level, s) in [(0, Scope::Device), (1, Scope::System)] {
        let e = sync.get(slot::FENCE_EPOCH[level]);
        if e != 0 {
            out[n] = Head {
                serial: cta.serial,
                epoch: e as u16,
                scope: s,
                device: cta.device,
                known: SnapRef(sync.get(slot::FENCE_KNOWN[level])),
                lanes,
            };
            n += 1;
        }
    }
    if releases && scope != Scope::Block {
        out[n] = Head {
            serial: cta.serial,
            epoch: cta.epoch,
            scope,
            device: cta.device,
            known: cta.known,
            lanes,
        };
        n += 1;
    }
    let wider = out[..n].iter().map(|h| h.epoch).max().unwrap_or(0);
    let block = if releases && scope == Scope::Block {
        cta.epoch
    } else {
        sync.get(slot::FENCE_BLOCK) as u16
    };
    if block > wider {
        out[n] = Head {
            serial: cta.serial,
            epoch: block,
            scope: Scope::Block,
            device: cta.device,
            known: SnapRef::NONE,
            lanes,
        };
        n += 1;
    }
    n
}

/// Puts head `h` on the word whose record is `rec` (locked by the
/// caller): into its class's slot (joined with the head there), a free
/// slot, or the second slot widened to the system scope. Returns whether
/// it widened (a bound: an acquirer of another scope or device then
/// learns what it could not, which can only hide races).
pub fn add_head<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    rec: &Record<'_, M::Atomics>,
    h: Head,
) -> bool {
    let mut free = None;
    for s in HEAD_SLOTS {
        let (a, b) = rec.slot(s);
        match Head::from_slot(a, b) {
            None => {
                if free.is_none() {
                    free = Some(s);
                }
            }
            Some(old) if old.scope == h.scope && old.device == h.device => {
                let joined = join_heads(mem, cta, &old, &h);
                let (a, b) = joined.to_slot();
                rec.set_slot(s, a, b);
                return false;
            }
            Some(_) => {}
        }
    }
    if let Some(s) = free {
        let (a, b) = h.to_slot();
        rec.set_slot(s, a, b);
        return false;
    }
    // A third class: widen the second head to cover both.
    let s = HEAD_SLOTS[1];
    let (a, b) = rec.slot(s);
    let old = Head::from_slot(a, b).unwrap_or(h);
    let mut joined = join_heads(mem, cta, &old, &h);
    joined.scope = Scope::System;
    joined.device = ANY_DEVICE;
    let (a, b) = joined.to_slot();
    rec.set_slot(s, a, b);
    true
}

/// One head standing for both: the later release of one CTA replaces its
/// earlier one; otherwise a joined head knows both releasers.
#[inline(never)]
fn join_heads<M: RaceMemory + ?Sized>(mem: &M, cta: &CtaView<'_>, old: &Head, new: &Head) -> Head {
    if old.serial == new.serial
        && old.serial != NO_SERIAL
        && old.lanes == new.lanes
        && new.epoch >= old.epoch
    {
        let arena = mem.arena();
        let known = arena.merge(new.known, old.known, &[]);
        return Head { known, ..*new };
    }
    let none = LaneBounds::NONE;
    let a = merge_head(mem, old.known, old, &none);
    let joined = merge_head(mem, a, new, &none);
    let _ = cta;
    Head {
        serial: NO_SERIAL,
        epoch: 0,
        scope: new.scope,
        device: new.device,
        known: joined,
        lanes: 0,
    }
}

/// Whether a word's record holds a release head.
pub fn has_heads<F: AtomicFamily>(rec: &Record<'_, F>) -> bool {
    HEAD_SLOTS.iter().any(|&s| rec.slot(s).0 & VALID != 0)
}

/// Clears a word's heads (a write that does not continue its release
/// sequence).
pub fn clear_heads<F: AtomicFamily>(rec: &Record<'_, F>) {
    for s in HEAD_SLOTS {
        rec.set_slot(s, 0, 0);
    }
}

/// After an atomic write that released: the CTA's next epoch.
pub fn released<F: AtomicFamily>(cta: &mut CtaView<'_>, sync: &CtaSync<'_, F>) {
    sync.lock();
    sync.bump_epoch();
    refresh(cta, sync);
    sync.unlock();
}

/// An acquire whose releases the engine cannot name (an mbarrier phase,
/// a fence that may have read a release through shared memory): returns
/// the CTA's epoch until now, every access of which the acquiring thread's
/// block check then orders before what follows, and starts the next epoch
/// so that accesses from here on are not covered.
///
/// It takes no lock (every waiting thread of an mbarrier phase calls it at
/// once): a compare-exchange moves the epoch past the one it read, unless
/// another thread already did. A locked bump that overwrites it only
/// merges two epochs that both begin after `e`, which is all either
/// needs; a saturated epoch stays (its releases share the last number).
pub fn acquire_everything<F: AtomicFamily>(cta: &mut CtaView<'_>, sync: &CtaSync<'_, F>) -> u16 {
    let word = &sync.words[slot::EPOCH];
    let e = word.load(MemOrder::Relaxed);
    if e < u32::from(MAX_EPOCH) {
        let _ = word.compare_exchange(e, e + 1, MemOrder::Relaxed, MemOrder::Relaxed);
    }
    cta.epoch = sync.epoch();
    e as u16
}

/// Words per SC-fence accumulator (a lock and a snapshot).
pub const SC_WORDS: usize = 2;

/// A fence of `ordering` and `scope` by `cta`.
pub fn fence<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    ordering: Ordering,
    scope: Scope,
) {
    sync.lock();
    refresh(cta, sync);
    let arena = mem.arena();
    if ordering.acquires() && scope != Scope::Block {
        let mut known = arena.merge(cta.known, SnapRef(sync.get(slot::OBSERVED[0])), &[]);
        if scope == Scope::System {
            known = arena.merge(known, SnapRef(sync.get(slot::OBSERVED[1])), &[]);
        }
        sync.set(slot::KNOWN, known.0);
        cta.known = known;
    }
    if ordering == Ordering::SeqCst && scope != Scope::Block {
        sc_fence(mem, cta, sync, scope, &arena);
    }
    if ordering.releases() {
        for (level, s) in [(0, Scope::Device), (1, Scope::System)] {
            if scope as u32 >= s as u32 {
                sync.set(slot::FENCE_EPOCH[level], u32::from(cta.epoch));
                sync.set(slot::FENCE_KNOWN[level], cta.known.0);
            }
        }
        sync.set(slot::FENCE_BLOCK, u32::from(cta.epoch));
        sync.bump_epoch();
    }
    refresh(cta, sync);
    sync.unlock();
}

/// `fence.sc`: acquires the SC fences before it that are morally strong
/// with it (per device and scope accumulators), then joins itself in.
fn sc_fence<M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    scope: Scope,
    arena: &Arena<'_, M::Atomics>,
) {
    let words = mem.sc_words();
    let devices = words.len() / (2 * SC_WORDS);
    let acc = |device: usize, level: usize| {
        let at = (device * 2 + level) * SC_WORDS;
        words.get(at..at + SC_WORDS)
    };
    let me = cta.device as usize;
    // Device-scope fences of this device; system-scope ones of this
    // device, or of every device for a system-scope fence.
    let mut known = cta.known;
    for d in 0..devices {
        for level in 0..2 {
            let wanted = if d == me {
                true
            } else {
                level == 1 && scope == Scope::System
            };
            if !wanted {
                continue;
            }
            if let Some(a) = acc(d, level) {
                let r = SnapRef(a[1].load(MemOrder::Acquire));
                known = arena.merge(known, r, &[]);
            }
        }
    }
    cta.known = known;
    sync.set(slot::KNOWN, known.0);
    let level = usize::from(scope == Scope::System);
    if let Some(a) = acc(me, level) {
        while a[0]
            .compare_exchange(0, 1, MemOrder::Acquire, MemOrder::Relaxed)
            .is_err()
        {
            M::Atomics::spin();
        }
        let mine = self_contained(mem, cta, cta.known, cta.epoch);
        let joined = arena.merge(SnapRef(a[1].load(MemOrder::Relaxed)), mine, &[]);
        a[1].store(joined.0, MemOrder::Relaxed);
        a[0].store(0, MemOrder::Release);
    }
}
