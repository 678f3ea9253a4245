//! Atomic operations: the word's record is locked around the real
//! operation, so what the operation read and what the shadow says it read
//! agree; then its reads acquire, its race checks run, and its writes
//! leave release heads.
//!
//! An atomic's words always have records (heads live there). Several
//! words (an 8- or 16-byte atomic) are locked in address order, the one
//! lock order of the engine, so two atomics never wait on each other in
//! a cycle.
//!
//! # The shared path
//!
//! Most atomics on a hot word (a histogram's bins, a counter every thread
//! adds to) would change nothing: the word's record already holds this
//! CTA's very access. Such an operation holds the record *shared*
//! ([`Record::share`]) instead of locked, any number at once, and does
//! only its real operation there (a record being locked, or awaited by
//! a locker, it waits for a little first: [`SHARE_PATIENCE`]). It
//! qualifies, checked while it holds the record shared and before the
//! real operation (so one that does not still locks the record before it
//! runs), when
//!
//! - it is one word's, and releases nothing: not a releasing write, no
//!   release fence of its CTA pending (its write would leave heads);
//! - the record's release heads, if any, stay: it is not a store, and a
//!   write continues their release sequence (it is morally strong with
//!   the last write); a read then takes them while it still holds the
//!   record (a spin lock's pollers); no release has lost its heads (a
//!   read would take those);
//! - (if it may write) the last write is an atomic on the same bytes,
//!   extent and scope made on the CTA's device;
//! - an entry or the last write already covers the CTA's serial with
//!   this access (same kind, bytes, extent, scope and epoch; a write's
//!   entry also stands for a compare-exchange's failed read), or (not
//!   for a compare-exchange, which does not know yet whether it writes)
//!   an entry of the same access at the same source location starts
//!   below the serial, which it then widens up to itself without the lock
//!   ([`Record::widen_shared`]: a counter's CTAs, arriving in about
//!   serial order, each widen one entry instead of locking the record in
//!   turn);
//! - and it races with nothing the record holds.
//!
//! An atomic that qualifies but for its own access missing (the CTA's
//! first on the word in this epoch) locks the record to add it; the
//! CTA's other threads that find it missing meanwhile wait for that one
//! (`CtaSync::claim_recording`, a hint) and then take the shared path,
//! rather than lock the record one after another to add the same access.
//! An atomic that must lock a record held or awaited by someone else
//! does not queue at once: it tries the shared path again, up to
//! [`LOCK_TRIES`] times, since what the holder changes (an entry it can
//! widen) often lets it through.
//!
//! This is exact: every later verdict is the one the locked path would
//! have given. The locked path would make three changes. (1) It would
//! name this access the last write and move the former last write `X`
//! into the entries: both are then remembered either way, only in other
//! slots. The last write's slot is special in two places only. A later
//! atomic read follows it to decide whether it continues the release
//! sequence, which matters only to heads, and heads appear only with a
//! locked write that then names itself the last write; and a later write
//! drops it or keeps it by the history rule, which keeps every access
//! some later access could race with, wherever it sits. `X` and this
//! access differ only in serial (same bytes, extent and scope, same
//! device), so whichever is named, the same later accesses are morally
//! strong with it. (2) It would drop this CTA's own earlier entries that
//! its access dominates, and (3) it would add its access (or a failed
//! compare-exchange's read) again: the covering entry is the same access
//! in the same epoch, so every later access racing with this one races
//! with that entry, which no later access removes without being
//! remembered in its place (the history rule is transitive); a write
//! covering a read conflicts with all the read conflicts with, at the
//! same serial and epoch. Reads acquire nothing without heads or lost
//! releases, and no race is skipped: the checks ran against the very
//! record the locked path would have checked, which no one could change
//! while it was held shared. What may differ is which of two racing
//! earlier accesses a report names, and the covering entry's site (an
//! access of the same serial, kind and word).

use super::check::RaceFound;
use super::cta::CtaView;
use super::desc::{AccessDesc, CellTag, SiteWord, SizeClass};
use super::entries::{check_entry, same_site};
use super::memory::{site_of, LaneRef, RaceMemory};
use super::record::{Entry, Record, WORD_ENTRY_SLOTS};
use super::sync::{
    add_head, clear_heads, has_heads, lose_heads, read_heads, read_lost_heads, released,
    write_heads, CtaSync, Head,
};
use super::word::{
    check_last_write, check_record, line_start, record_update, split_cell, LAST_WRITE,
};
use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::memory_model::{Ordering, Scope};
use core::sync::atomic::Ordering as MemOrder;

/// What an atomic operation does if it succeeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOpKind {
    /// `ld.<sem>`.
    Load,
    /// `st.<sem>`.
    Store,
    /// A read-modify-write that always writes (`atom.add`, `atom.exch`...).
    Rmw,
    /// `atom.cas`: writes only when it succeeds (`perform` says).
    CompareExchange,
}

/// An atomic operation as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicOp {
    /// What it does.
    pub kind: AtomicOpKind,
    /// Its ordering.
    pub ordering: Ordering,
    /// A failed compare-exchange's ordering.
    pub failure_ordering: Ordering,
    /// Its scope.
    pub scope: Scope,
}

/// Most words one atomic covers (16 bytes).
pub const MAX_ATOMIC_WORDS: usize = 4;

/// Spins an atomic whose CTA's access is missing from the record waits
/// for another thread of its CTA recording it (`CtaSync::claim_recording`)
/// before it locks the record itself.
pub const RECORDING_PATIENCE: u32 = 1024;

/// Times an atomic that would change its word's record tries to lock it
/// while someone else holds it or waits for it, trying the shared path
/// again in between, before it queues for the lock.
pub const LOCK_TRIES: u32 = 64;

/// Spins an atomic waits for a record's lockers before it locks the
/// record itself ([`Record::share_within`]). Long: an atomic that gives up
/// waiting becomes a locker that the next ones wait for, and on a hot
/// word that feeds itself until every atomic locks the record in turn.
/// Bounded all the same, so a thread never waits on a record for good.
pub const SHARE_PATIENCE: u32 = 512;

/// The byte mask of `[offset, offset + size)` within word `k` of an
/// access starting at byte `offset` of its first word.
#[inline(always)]
pub const fn word_bytes(offset: u32, size: u32, k: u32) -> u8 {
    let word_lo = 4 * k;
    let start = offset.saturating_sub(word_lo);
    let end_abs = offset + size;
    let end = if end_abs >= word_lo + 4 {
        4
    } else {
        end_abs.saturating_sub(word_lo)
    };
    let mut mask = 0u8;
    let mut b = start;
    while b < end {
        mask |= 1 << b;
        b += 1;
    }
    mask
}

/// Runs the atomic `op` of `size` bytes starting at byte `offset` of word
/// `first` (`perform` does it and says whether it wrote), checking and
/// recording it for `cta`. Returns the operation's result and the first
/// race found. `lanes` names the CTA's launch for the heads it leaves.
/// Takes the shared path when it qualifies (see the module docs), else
/// [`atomic_locked`].
#[allow(clippy::too_many_arguments)]
pub fn atomic<M: RaceMemory + ?Sized, R, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    lanes: LaneRef,
    first: u64,
    offset: u32,
    size: u32,
    op: AtomicOp,
    site: SiteWord,
    bounded: &mut bool,
    perform: impl FnOnce() -> (R, bool),
) -> (R, Option<RaceFound>) {
    let mut recording = false;
    let mut locked = None;
    if offset + size.max(1) <= 4 {
        // The CTA's tag of this word (collisions only cost waits).
        let tag = (first as u32).wrapping_add(1).max(1);
        let mut patience = RECORDING_PATIENCE;
        let mut tries = LOCK_TRIES;
        loop {
            match shared_hold(mem, cta, sync, first, offset, size, op, site, bounded) {
                Hold::Shared((rec, take_heads)) => {
                    // The record already says all this operation would
                    // add: it runs holding the record shared, so no change
                    // to the record falls between what it reads and what
                    // the record says (the heads it then takes included).
                    let (result, wrote) = perform();
                    if take_heads {
                        let ordering = match op.kind {
                            AtomicOpKind::CompareExchange if !wrote => op.failure_ordering,
                            _ => op.ordering,
                        };
                        read_heads(mem, cta, sync, &rec, ordering.acquires(), op.scope);
                    }
                    rec.unshare();
                    if recording {
                        sync.end_recording();
                    }
                    return (result, None);
                }
                // The CTA's access is missing: one of its threads records
                // it while the others wait for it.
                Hold::Missing if !recording && sync.claim_recording(tag) => recording = true,
                Hold::Missing if !recording && sync.recording() == tag && patience > 0 => {
                    patience -= 1;
                    S::spin();
                    continue;
                }
                Hold::Missing | Hold::No => {}
            }
            // Lock the record only if nobody holds it or waits for it:
            // while someone does, what they change may let this operation
            // take the shared path after all (the CTAs of a launch that
            // all reach a fresh word at once need a lock each only until
            // an entry they can widen is there).
            if tries == 0 {
                break;
            }
            tries -= 1;
            match lock_record(mem, cta, first, bounded, false) {
                Locking::Locked(rec) => {
                    locked = Some(rec);
                    break;
                }
                Locking::Busy => S::spin(),
                Locking::NoRecord => break,
            }
        }
    }
    let out = atomic_locked_from(
        mem, cta, sync, lanes, first, offset, size, op, site, bounded, locked, perform,
    );
    if recording {
        sync.end_recording();
    }
    out
}

/// What [`shared_hold`] found (`T`: the record held, or nothing yet).
enum Hold<T> {
    /// The record, held shared: the operation changes nothing there.
    Shared(T),
    /// The operation would change nothing but add the CTA's access.
    Missing,
    /// It takes the locked path.
    No,
}

/// [`atomic`] with its words' records locked, whether or not the shared
/// path would do (the reference the shared path is tested against).
#[allow(clippy::too_many_arguments)]
pub fn atomic_locked<M: RaceMemory + ?Sized, R, S: AtomicFamily>(
    mem: &M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    lanes: LaneRef,
    first: u64,
    offset: u32,
    size: u32,
    op: AtomicOp,
    site: SiteWord,
    bounded: &mut bool,
    perform: impl FnOnce() -> (R, bool),
) -> (R, Option<RaceFound>) {
    atomic_locked_from(
        mem, cta, sync, lanes, first, offset, size, op, site, bounded, None, perform,
    )
}

/// [`atomic_locked`], the first word's record already locked when
/// `locked` holds it.
#[allow(clippy::too_many_arguments)]
fn atomic_locked_from<'m, M: RaceMemory + ?Sized, R, S: AtomicFamily>(
    mem: &'m M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    lanes: LaneRef,
    first: u64,
    offset: u32,
    size: u32,
    op: AtomicOp,
    site: SiteWord,
    bounded: &mut bool,
    mut locked: Option<Record<'m, M::Atomics>>,
    perform: impl FnOnce() -> (R, bool),
) -> (R, Option<RaceFound>) {
    let n = ((offset + size.max(1)).div_ceil(4) as usize).min(MAX_ATOMIC_WORDS);
    let mut recs: [Option<Record<'_, M::Atomics>>; MAX_ATOMIC_WORDS] = [None, None, None, None];
    for (k, slot) in recs.iter_mut().enumerate().take(n) {
        *slot = match locked.take() {
            Some(rec) => Some(rec),
            None => match lock_record(mem, cta, first + k as u64, bounded, true) {
                Locking::Locked(rec) => Some(rec),
                Locking::Busy | Locking::NoRecord => None,
            },
        };
    }
    if op.kind != AtomicOpKind::Load && recs[..n].iter().any(Option::is_none) {
        // A word without a record cannot keep this write's heads: what
        // they would say joins the lost releases before the value can be
        // read (as if it wrote, and at its success ordering: knowing too
        // much only hides races).
        super::sync::refresh(cta, sync);
        let mut heads = [Head::NONE; 3];
        let n = write_heads(
            cta,
            sync,
            lanes,
            op.ordering.releases(),
            op.scope,
            &mut heads,
        );
        if n > 0 {
            lose_heads(mem, &heads[..n]);
            *bounded = true;
        }
    }
    let (result, wrote) = perform();
    let (reads, writes, rmw, ordering) = match op.kind {
        AtomicOpKind::Load => (true, false, false, op.ordering),
        AtomicOpKind::Store => (false, true, false, op.ordering),
        AtomicOpKind::Rmw => (true, true, true, op.ordering),
        AtomicOpKind::CompareExchange if wrote => (true, true, true, op.ordering),
        AtomicOpKind::CompareExchange => (true, false, false, op.failure_ordering),
    };
    super::sync::refresh(cta, sync);
    let class = SizeClass::of(size);
    let desc = |k: usize, c: &CtaView<'_>| {
        AccessDesc::atomic(
            c.serial,
            c.epoch,
            writes,
            word_bytes(offset, size, k as u32),
            op.scope,
            class,
            k as u8,
        )
    };
    // Which words' last writes continue a release sequence this reads.
    let mut chain = [false; MAX_ATOMIC_WORDS];
    for k in 0..n {
        if let Some(rec) = &recs[k] {
            let (a, b) = rec.slot(LAST_WRITE);
            chain[k] = continues_sequence(cta, Entry::from_slot(a, b).desc, desc(k, cta), op.scope);
        }
    }
    if reads {
        for k in 0..n {
            if let (Some(rec), true) = (&recs[k], chain[k]) {
                read_heads(mem, cta, sync, rec, ordering.acquires(), op.scope);
            }
        }
        // A word without heads may hold the value of a release whose
        // heads were lost.
        if recs[..n]
            .iter()
            .any(|r| r.as_ref().is_none_or(|r| !has_heads(r)))
        {
            read_lost_heads(mem, cta, sync, ordering.acquires(), op.scope);
        }
    }
    let arena = mem.arena();
    let pool = mem.pool();
    let mut race = None;
    for (k, rec) in recs.iter().enumerate().take(n) {
        let me = desc(k, cta);
        if let Some(rec) = rec {
            if race.is_none() {
                race = check_record(
                    cta,
                    &arena,
                    &pool,
                    rec,
                    first + k as u64,
                    me,
                    op.scope,
                    bounded,
                );
            }
        }
    }
    let mut heads = [Head::NONE; 3];
    let releases = writes && ordering.releases();
    let nheads = if writes {
        write_heads(cta, sync, lanes, releases, op.scope, &mut heads)
    } else {
        0
    };
    for k in 0..n {
        let me = desc(k, cta);
        let word = first + k as u64;
        if let Some(rec) = &recs[k] {
            if writes {
                if !(rmw && chain[k]) {
                    clear_heads(rec);
                }
                for h in &heads[..nheads] {
                    if add_head(mem, cta, rec, *h) {
                        *bounded = true;
                    }
                }
            }
            record_update(cta, &arena, &pool, rec, word, me, site, bounded);
            rec.unlock();
        }
    }
    if releases {
        released(cta, sync);
    }
    (result, race)
}

/// Holds the record of word `first` shared when `op` (of `size` bytes
/// from byte `offset`, within the word) would change nothing there nor
/// in the CTA's state, and race with nothing; otherwise nothing is held
/// (the caller locks the record, before the real operation). See the
/// module docs for why skipping the record's update then is exact.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn shared_hold<'m, M: RaceMemory + ?Sized, S: AtomicFamily>(
    mem: &'m M,
    cta: &mut CtaView<'_>,
    sync: &CtaSync<'_, S>,
    word: u64,
    offset: u32,
    size: u32,
    op: AtomicOp,
    site: SiteWord,
    bounded: &mut bool,
) -> Hold<(Record<'m, M::Atomics>, bool)> {
    let may_write = op.kind != AtomicOpKind::Load;
    let may_read = op.kind != AtomicOpKind::Store;
    // A write that leaves heads changes the record and the CTA's epoch; a
    // read of a word without heads takes the lost releases, if any.
    if may_write && (op.ordering.releases() || sync.fenced()) {
        return Hold::No;
    }
    if may_read && !mem.arena().lost_releases().is_none() {
        return Hold::No;
    }
    // A split line's word with a record (no split, no record to make).
    let (Some(c0), Some(cell)) = (mem.cell(line_start(word)), mem.cell(word)) else {
        return Hold::No;
    };
    if matches!(
        CellTag::of(c0.load(MemOrder::Relaxed)),
        CellTag::Line | CellTag::Locked
    ) {
        return Hold::No;
    }
    let c = cell.load(MemOrder::Acquire);
    let pool = mem.pool();
    let rec = match (CellTag::of(c), pool.record(c as u32)) {
        (CellTag::Record, Some(rec)) => rec,
        _ => return Hold::No,
    };
    if !rec.share_within(word, SHARE_PATIENCE) {
        return Hold::No;
    }
    super::sync::refresh(cta, sync);
    let found = changes_nothing(mem, cta, &rec, word, offset, size, op, site, bounded);
    if let Hold::Shared(take_heads) = found {
        return Hold::Shared((rec, take_heads));
    }
    rec.unshare();
    match found {
        Hold::Missing => Hold::Missing,
        _ => Hold::No,
    }
}

/// Whether the record `rec` of `word` (held shared) already says all that
/// `op` would add ([`Hold::Shared`], with whether it reads heads there):
/// heads only where it continues their release sequence without a store
/// (a read-modify-write or a read of a last write it is morally strong
/// with); a write's last write an atomic of the same bytes, extent and
/// scope on the CTA's device; the CTA's access there already (same kind,
/// bytes, extent, scope and epoch: an entry or the last write covering
/// its serial, or an entry of the same access below it that it widens
/// up to its serial, [`Record::widen_shared`]), else [`Hold::Missing`];
/// and no race with anything in it.
#[allow(clippy::too_many_arguments)]
fn changes_nothing<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    rec: &Record<'_, M::Atomics>,
    word: u64,
    offset: u32,
    size: u32,
    op: AtomicOp,
    site: SiteWord,
    bounded: &mut bool,
) -> Hold<bool> {
    let may_write = op.kind != AtomicOpKind::Load;
    let (bytes, class) = (word_bytes(offset, size, 0), SizeClass::of(size));
    let write = AccessDesc::atomic(cta.serial, cta.epoch, true, bytes, op.scope, class, 0);
    let read = AccessDesc::atomic(cta.serial, cta.epoch, false, bytes, op.scope, class, 0);
    let (a, b) = rec.slot(LAST_WRITE);
    let last = Entry::from_slot(a, b);
    let heads = has_heads(rec);
    let chain = continues_sequence(cta, last.desc, write, op.scope);
    if heads && (op.kind == AtomicOpKind::Store || (may_write && !chain)) {
        return Hold::No;
    }
    if may_write
        && (last.is_empty()
            || last.desc.key() != write.key()
            || cta.devices.of(last.desc.serial()) != cta.device)
    {
        return Hold::No;
    }
    // A write conflicts with all that its read would, and its entry
    // stands for a compare-exchange's failed read.
    let me = if may_write { write } else { read };
    let mine = |e: Entry| {
        !e.is_empty()
            && e.desc.epoch() == cta.epoch
            && (e.desc.key() == write.key() || (!may_write && e.desc.key() == read.key()))
    };
    let arena = mem.arena();
    if check_last_write(cta, &arena, last, me, op.scope, word).is_some() {
        return Hold::No;
    }
    let mut covered = mine(last) && last.covers(cta.serial);
    let mut widen = None;
    let pool = mem.pool();
    let raced = super::entries::for_each(&pool, rec, WORD_ENTRY_SLOTS.start, |r, s, e| {
        if !covered && mine(e) {
            if e.covers(cta.serial) {
                covered = true;
            } else if widen.is_none()
                // A compare-exchange does not know yet whether it writes.
                && op.kind != AtomicOpKind::CompareExchange
                && e.desc.key() == me.key()
                && e.desc.serial() < cta.serial
                // Entries span one launch's serials (forgetting goes by
                // launch).
                && cta.host.owns(e.desc.serial())
                && same_site(me, e.site, site.site())
            {
                widen = Some((r.clone(), s, e));
            }
        }
        check_entry(cta, &arena, e, me, op.scope, word).race(bounded)
    });
    if raced.is_some() {
        return Hold::No;
    }
    if !covered && !widen.is_some_and(|(r, s, e)| r.widen_shared(s, e, cta.serial)) {
        return Hold::Missing;
    }
    // (A store with heads went to the locked path above.)
    Hold::Shared(heads && chain)
}

/// Whether an atomic `me` of `scope` after the word's last write `last`
/// continues the release sequence the word's heads stand for: the very
/// same bytes and extent, morally strong with it.
#[inline(always)]
fn continues_sequence(cta: &CtaView<'_>, last: AccessDesc, me: AccessDesc, scope: Scope) -> bool {
    !last.is_none()
        && last.is_atomic()
        && last.bytes() == me.bytes()
        && last.extent() == me.extent()
        && cta.morally_strong(last, scope)
}

/// What [`lock_record`] got.
enum Locking<'m, F: AtomicFamily> {
    /// The record, locked.
    Locked(Record<'m, F>),
    /// Someone held it or waited for it (only when not waiting).
    Busy,
    /// No record: the pool is full (counted; the word then goes
    /// unrecorded for this operation, and a release's heads join the lost
    /// releases, which reads of words without heads take).
    NoRecord,
}

/// Locks the record of split word `word`, making one from its inline
/// access if it has none; waits for its holders if `wait`, else gives up
/// at once when it is held or awaited ([`Record::try_lock_word`]).
#[inline(never)]
fn lock_record<'m, M: RaceMemory + ?Sized>(
    mem: &'m M,
    cta: &CtaView<'_>,
    word: u64,
    bounded: &mut bool,
    wait: bool,
) -> Locking<'m, M::Atomics> {
    let Some(cell) = split_cell(mem, cta, word, bounded) else {
        return Locking::NoRecord;
    };
    let pool = mem.pool();
    loop {
        let c = cell.load(MemOrder::Acquire);
        match CellTag::of(c) {
            CellTag::Locked => M::Atomics::spin(),
            CellTag::Record => {
                let Some(rec) = pool.record(c as u32) else {
                    return Locking::NoRecord;
                };
                let got = if wait {
                    Some(rec.lock_word(word))
                } else {
                    rec.try_lock_word(word)
                };
                match got {
                    Some(true) => return Locking::Locked(rec),
                    Some(false) if !wait => return Locking::Busy,
                    _ => {}
                }
            }
            CellTag::Line | CellTag::Inline => {
                let d = AccessDesc(c).untagged();
                let Some(rec) = pool.allocate(word) else {
                    *bounded = true;
                    return Locking::NoRecord;
                };
                if !d.is_none() {
                    let e = Entry {
                        desc: d,
                        count: 1,
                        site: site_of(mem, word, d.serial()).site(),
                    };
                    let (a, b) = e.to_slot();
                    let slot = if d.is_write() {
                        LAST_WRITE
                    } else {
                        WORD_ENTRY_SLOTS.start
                    };
                    rec.set_slot(slot, a, b);
                }
                let tagged = CellTag::Record.with(u64::from(pool.index(&rec)));
                if cell
                    .compare_exchange(c, tagged, MemOrder::AcqRel, MemOrder::Relaxed)
                    .is_ok()
                {
                    return Locking::Locked(rec);
                }
                rec.kill();
                pool.free(rec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::word_bytes;

    #[test]
    fn byte_masks_per_word() {
        assert_eq!(word_bytes(0, 4, 0), 0xf);
        assert_eq!(word_bytes(0, 8, 1), 0xf);
        assert_eq!(word_bytes(2, 2, 0), 0b1100);
        assert_eq!(word_bytes(1, 1, 0), 0b0010);
        assert_eq!(word_bytes(0, 16, 3), 0xf);
    }
}
