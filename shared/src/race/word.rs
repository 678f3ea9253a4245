//! Words of a split line: each word's cell holds one access inline, or
//! names a pool record with the word's last write, its release heads and
//! the other accesses still worth remembering.
//!
//! A line splits the first time an access does not fit its header (part
//! of a line, sub-word bytes, an atomic): the splitter locks cell 0,
//! freezes the reads, writes every word's state and unlocks cell 0 as
//! word 0's cell. From then on each lane checks its own word, which for
//! a warp is one coalesced load, and a compare-exchange only where the
//! word's state changes.

use core::sync::atomic::Ordering as MemOrder;

use super::check::{conflicts, dominates, found, settled_site, RaceFound};
use super::cta::CtaView;
use super::desc::{AccessDesc, CellTag, LineRead, LineWrite, ReadKind, SiteWord, EMPTY_SPLIT};
use super::entries::{check_all, insert, is_launch, launch_verdict, LAUNCH};
use super::knowledge::Arena;
use super::line::{forgotten, reads_owner, LINE_WORDS};
use super::memory::{note_site, site_of, RaceMemory, U64Of};
use super::record::{Entry, Pool, Record, WORD_ENTRY_SLOTS};
use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::memory_model::Scope;

/// Slot of a word record holding the last write.
pub const LAST_WRITE: usize = 0;

const FROZEN: u64 = 3 << 62;

/// The first word of `word`'s line.
#[inline(always)]
pub const fn line_start(word: u64) -> u64 {
    word & !(LINE_WORDS - 1)
}

/// Splits the line starting at `word0` if it is in line mode. Returns
/// once it is split (by this thread or another).
pub fn split_line<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word0: u64,
    bounded: &mut bool,
) {
    let Some(c0) = mem.cell(word0) else {
        return;
    };
    loop {
        let v0 = c0.load(MemOrder::Acquire);
        match CellTag::of(v0) {
            CellTag::Line => {}
            CellTag::Locked => {
                M::Atomics::spin();
                continue;
            }
            _ => return,
        }
        if c0
            .compare_exchange(
                v0,
                CellTag::Locked.with(0),
                MemOrder::Acquire,
                MemOrder::Relaxed,
            )
            .is_err()
        {
            continue;
        }
        let (Some(c1), Some(c2), Some(c3)) = (
            mem.cell(word0 + 1),
            mem.cell(word0 + 2),
            mem.cell(word0 + 3),
        ) else {
            c0.store(EMPTY_SPLIT, MemOrder::Release);
            return;
        };
        // Freeze the reads: a reader still trying to change them fails.
        let mut v1 = c1.load(MemOrder::Acquire);
        while let Err(v) = c1.compare_exchange(v1, v1 | FROZEN, MemOrder::AcqRel, MemOrder::Relaxed)
        {
            v1 = v;
        }
        let w = LineWrite(v0);
        let r = LineRead(v1);
        let r = if r.version() == w.version() {
            r
        } else {
            LineRead::empty(w.version())
        };
        let write = (w.serial() != 0 && !forgotten(cta, w.serial())).then(|| w.desc());
        let read = match r.kind() {
            ReadKind::Single if !forgotten(cta, r.payload()) => Some(r.reader()),
            ReadKind::Launch if !forgotten(cta, r.payload()) => {
                Some(AccessDesc(r.reader().0 | LAUNCH))
            }
            _ => None,
        };
        // The write and the read note their sites right after changing
        // cells 0 and 1, and their notes still land while the line is
        // locked (cells 2 and 3 change only below): wait for them, or the
        // words would keep the accesses without their places.
        let site_of_cell = |d: Option<AccessDesc>, cell: &U64Of<M>| {
            let load = || SiteWord(cell.load(MemOrder::Relaxed));
            d.map_or_else(load, |d| settled_site::<M::Atomics>(d, load))
        };
        let wsite = site_of_cell(write, c2);
        let rsite = site_of_cell(read, c3);
        let set = (r.kind() == ReadKind::Set)
            .then(|| mem.pool().record(r.payload()))
            .flatten()
            .filter(|rec| rec.lock(reads_owner(word0)));
        let pool = mem.pool();
        // Cells 1.. first (cell 0 is the lock), then cell 0.
        for k in (0..LINE_WORDS).rev() {
            let word = word0 + k;
            let state = split_state(
                mem,
                &pool,
                word,
                write,
                wsite,
                read,
                rsite,
                set.as_ref(),
                bounded,
            );
            let value = if k == 0 && state == 0 {
                EMPTY_SPLIT
            } else {
                state
            };
            let Some(cell) = mem.cell(word) else {
                continue;
            };
            if k == 0 {
                cell.store(value, MemOrder::Release);
            } else {
                cell.store(value, MemOrder::Relaxed);
            }
        }
        if let Some(rec) = set {
            rec.kill();
            pool.free(rec);
        }
        return;
    }
}

/// One word's cell after its line splits.
#[allow(clippy::too_many_arguments)]
fn split_state<M: RaceMemory + ?Sized>(
    mem: &M,
    pool: &Pool<'_, M::Atomics>,
    word: u64,
    write: Option<AccessDesc>,
    wsite: SiteWord,
    read: Option<AccessDesc>,
    rsite: SiteWord,
    set: Option<&Record<'_, M::Atomics>>,
    bounded: &mut bool,
) -> u64 {
    let needs_record = set.is_some() || (write.is_some() && read.is_some());
    if !needs_record {
        return match (write, read) {
            (Some(d), _) => {
                note_site(mem, word, wsite);
                CellTag::Inline.with(d.0)
            }
            (_, Some(d)) => {
                note_site(mem, word, rsite);
                CellTag::Inline.with(d.0)
            }
            _ => 0,
        };
    }
    let Some(rec) = pool.allocate(word) else {
        *bounded = true;
        return write.map_or(0, |d| {
            note_site(mem, word, wsite);
            CellTag::Inline.with(d.0)
        });
    };
    if let Some(d) = write {
        let site = if wsite.belongs_to(d.serial()) {
            wsite.site()
        } else {
            0
        };
        let (a, b) = Entry {
            desc: d,
            count: 1,
            site,
        }
        .to_slot();
        rec.set_slot(LAST_WRITE, a, b);
    }
    let mut slot = WORD_ENTRY_SLOTS.start;
    if let Some(d) = read {
        let site = if rsite.belongs_to(d.serial()) {
            rsite.site()
        } else {
            0
        };
        let (a, b) = Entry {
            desc: d,
            count: 1,
            site,
        }
        .to_slot();
        rec.set_slot(slot, a, b);
        slot += 1;
    }
    if let Some(src) = set {
        // Copy the reader set's entries (chaining as needed).
        let mut cur: Option<Record<'_, M::Atomics>> = Some(src.clone());
        let mut dst = rec.clone();
        while let Some(r) = cur {
            for s in 0..super::record::SLOTS {
                let (a, b) = r.slot(s);
                if Entry::from_slot(a, b).is_empty() {
                    continue;
                }
                if slot == super::record::SLOTS {
                    let Some(next) = pool.allocate(word) else {
                        *bounded = true;
                        break;
                    };
                    next.unlock();
                    dst.set_next(pool.index(&next));
                    dst = next;
                    slot = 0;
                }
                dst.set_slot(slot, a, b);
                slot += 1;
            }
            cur = pool.record(r.next());
        }
    }
    rec.unlock();
    CellTag::Record.with(u64::from(pool.index(&rec)))
}

/// The common cases of [`access_word`], decided in registers: a split
/// line's word holding nothing, this CTA's own access, or one the host
/// ordered that this access makes useless, changed with one
/// compare-exchange. `None`: the general path decides.
#[inline(always)]
fn access_word_fast<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word: u64,
    me: AccessDesc,
    site: SiteWord,
) -> Option<Option<RaceFound>> {
    let c0 = mem.cell(line_start(word))?;
    // A line in line mode, or being split (its cells not yet the words'):
    // the general path splits it or waits for the split.
    if matches!(
        CellTag::of(c0.load(MemOrder::Relaxed)),
        CellTag::Line | CellTag::Locked
    ) {
        return None;
    }
    let cell = mem.cell(word)?;
    let c = cell.load(MemOrder::Relaxed);
    if !matches!(CellTag::of(c), CellTag::Line | CellTag::Inline) {
        return None;
    }
    let d = AccessDesc(c).untagged();
    let ds = d.serial();
    // Another read of this launch's read-only bytes, or this very access
    // again: nothing to check or change.
    let same_launch_read =
        is_launch(me) && is_launch(d) && cta.host.owns(ds) && me.bytes() & !d.bytes() == 0;
    let again = ds == me.serial() && d.epoch() == me.epoch() && d.key() == me.key();
    let replace = if d.is_none() {
        true
    } else if same_launch_read || again {
        return Some(None);
    } else {
        (ds == cta.serial || cta.host.orders(ds)) && dominates(me, d)
    };
    if !replace {
        return None;
    }
    cell.compare_exchange(
        c,
        CellTag::Inline.with(me.0),
        MemOrder::Relaxed,
        MemOrder::Relaxed,
    )
    .ok()?;
    note_site(mem, word, site);
    Some(None)
}

/// Checks and records the access `me` (one word's part of it: `me`'s
/// bytes) of split word `word`, by the CTA `cta`, made at `site`; `scope`
/// for an atomic. Splits the word's line first if need be.
#[inline(always)]
pub fn access_word<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word: u64,
    me: AccessDesc,
    scope: Scope,
    site: SiteWord,
    bounded: &mut bool,
) -> Option<RaceFound> {
    if !me.is_atomic() {
        if let Some(out) = access_word_fast(mem, cta, word, me, site) {
            return out;
        }
    }
    access_word_general(mem, cta, word, me, scope, site, bounded)
}

/// [`access_word`] beyond its common cases, out of line.
#[inline(never)]
fn access_word_general<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word: u64,
    me: AccessDesc,
    scope: Scope,
    site: SiteWord,
    bounded: &mut bool,
) -> Option<RaceFound> {
    let cell = split_cell(mem, cta, word, bounded)?;
    let arena = mem.arena();
    loop {
        let c = cell.load(MemOrder::Acquire);
        match CellTag::of(c) {
            CellTag::Locked => M::Atomics::spin(),
            CellTag::Line | CellTag::Inline => {
                if let Some(out) =
                    inline_step(mem, cta, &arena, cell, c, word, me, scope, site, bounded)
                {
                    return out;
                }
            }
            CellTag::Record => {
                let pool = mem.pool();
                let rec = pool.record(c as u32)?;
                if rec.lock_word(word) {
                    let out = record_step(
                        mem, cta, &arena, &pool, &rec, word, me, scope, site, bounded,
                    );
                    rec.unlock();
                    return out;
                }
            }
        }
    }
}

/// Ensures `word`'s line is split, by this thread or another (a split
/// in progress, its first cell locked, is waited for: until it ends the
/// word's cell is not yet the word's, and a change made to it then would
/// be overwritten), and returns the word's cell.
pub fn split_cell<'m, M: RaceMemory + ?Sized>(
    mem: &'m M,
    cta: &CtaView<'_>,
    word: u64,
    bounded: &mut bool,
) -> Option<&'m U64Of<M>> {
    let c0 = mem.cell(line_start(word))?;
    if matches!(
        CellTag::of(c0.load(MemOrder::Acquire)),
        CellTag::Line | CellTag::Locked
    ) {
        split_line(mem, cta, line_start(word), bounded);
    }
    mem.cell(word)
}

/// One try at an inline word: `Some(outcome)` when done, `None` to
/// start over (the cell changed).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn inline_step<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    cell: &U64Of<M>,
    c: u64,
    word: u64,
    me: AccessDesc,
    scope: Scope,
    site: SiteWord,
    bounded: &mut bool,
) -> Option<Option<RaceFound>> {
    let d = AccessDesc(c).untagged();
    let d = if d.is_none() || forgotten(cta, d.serial()) {
        AccessDesc::NONE
    } else {
        d
    };
    let mut race = None;
    if !d.is_none() && conflicts(cta, d, me, scope) {
        if is_launch(d) {
            race = launch_verdict(cta, arena, d, site_of(mem, word, d.serial()), me, word)
                .race(bounded);
        } else if !cta.orders_desc(arena, d) {
            race = Some(found(
                d,
                settled_site::<M::Atomics>(d, || site_of(mem, word, d.serial())),
                me,
                word,
            ));
        }
    }
    let next = if d.is_none() {
        Some(me)
    } else if is_launch(me)
        && is_launch(d)
        && cta.host.owns(d.serial())
        && me.bytes() & !d.bytes() == 0
    {
        // Another read of this launch's read-only bytes: the reader named
        // stands for all of them.
        return Some(race);
    } else if is_launch(me)
        && is_launch(d)
        && cta.host.owns(d.serial())
        && d.bytes() & !me.bytes() == 0
    {
        // This read covers the named one's bytes: name this one.
        Some(me)
    } else if d.serial() == me.serial() && d.epoch() == me.epoch() && d.key() == me.key() {
        return Some(race);
    } else if dominates(me, d)
        && (cta.orders_desc(arena, d) || (is_launch(d) && cta.host.orders(d.serial())))
    {
        Some(me)
    } else {
        None
    };
    match next {
        Some(n) => {
            cell.compare_exchange(
                c,
                CellTag::Inline.with(n.0),
                MemOrder::AcqRel,
                MemOrder::Relaxed,
            )
            .ok()?;
            if n.serial() == me.serial() {
                note_site(mem, word, site);
            }
            Some(race)
        }
        None => {
            // Two accesses to remember: a record.
            let pool = mem.pool();
            let Some(rec) = pool.allocate(word) else {
                *bounded = true;
                // Keep the current access (the older one is lost, counted).
                cell.compare_exchange(
                    c,
                    CellTag::Inline.with(me.0),
                    MemOrder::AcqRel,
                    MemOrder::Relaxed,
                )
                .ok()?;
                note_site(mem, word, site);
                return Some(race);
            };
            let dsite = site_of(mem, word, d.serial()).site();
            let old = Entry {
                desc: d,
                count: 1,
                site: dsite,
            };
            if d.is_write() {
                let (a, b) = old.to_slot();
                rec.set_slot(LAST_WRITE, a, b);
            } else {
                let (a, b) = old.to_slot();
                rec.set_slot(WORD_ENTRY_SLOTS.start, a, b);
            }
            record_update(cta, arena, &pool, &rec, word, me, site, bounded);
            rec.unlock();
            if cell
                .compare_exchange(
                    c,
                    CellTag::Record.with(u64::from(pool.index(&rec))),
                    MemOrder::AcqRel,
                    MemOrder::Relaxed,
                )
                .is_ok()
            {
                Some(race)
            } else {
                if rec.lock(word) {
                    rec.kill();
                    pool.free(rec);
                }
                None
            }
        }
    }
}

/// A word with a record: check `me` against the last write and every
/// entry, then record it. The caller holds the record's lock.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn record_step<M: RaceMemory + ?Sized>(
    _mem: &M,
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    pool: &Pool<'_, M::Atomics>,
    rec: &Record<'_, M::Atomics>,
    word: u64,
    me: AccessDesc,
    scope: Scope,
    site: SiteWord,
    bounded: &mut bool,
) -> Option<RaceFound> {
    let race = check_record(cta, arena, pool, rec, word, me, scope, bounded);
    record_update(cta, arena, pool, rec, word, me, site, bounded);
    race
}

/// The first race of `me` with the record's last write and entries.
#[allow(clippy::too_many_arguments)]
pub fn check_record<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    pool: &Pool<'_, F>,
    rec: &Record<'_, F>,
    word: u64,
    me: AccessDesc,
    scope: Scope,
    bounded: &mut bool,
) -> Option<RaceFound> {
    let (a, b) = rec.slot(LAST_WRITE);
    if let Some(race) = check_last_write(cta, arena, Entry::from_slot(a, b), me, scope, word) {
        return Some(race);
    }
    check_all(
        cta,
        arena,
        pool,
        rec,
        WORD_ENTRY_SLOTS.start,
        me,
        scope,
        word,
        bounded,
    )
}

/// The race of `me` with a record's last write `w`, if they race.
#[inline(always)]
pub fn check_last_write<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    w: Entry,
    me: AccessDesc,
    scope: Scope,
    word: u64,
) -> Option<RaceFound> {
    (!w.is_empty()
        && !forgotten(cta, w.desc.serial())
        && conflicts(cta, w.desc, me, scope)
        && !cta.orders_desc(arena, w.desc))
    .then(|| {
        found(
            w.desc,
            SiteWord::for_serial(w.site, w.desc.serial()),
            me,
            word,
        )
    })
}

/// Records `me` in the word's record: a write becomes the last write
/// (the one it replaces kept as an entry unless it made it useless); a
/// read joins the entries. A plain write also ends release sequences
/// (the heads go).
#[allow(clippy::too_many_arguments)]
pub fn record_update<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    pool: &Pool<'_, F>,
    rec: &Record<'_, F>,
    word: u64,
    me: AccessDesc,
    site: SiteWord,
    bounded: &mut bool,
) {
    if me.is_write() {
        let (a, b) = rec.slot(LAST_WRITE);
        let old = Entry::from_slot(a, b);
        let keep_old = !old.is_empty()
            && !forgotten(cta, old.desc.serial())
            && !(dominates(me, old.desc) && cta.orders_desc(arena, old.desc));
        let (na, nb) = Entry {
            desc: me.untagged(),
            count: 1,
            site: site.site(),
        }
        .to_slot();
        rec.set_slot(LAST_WRITE, na, nb);
        if !me.is_atomic() {
            rec.set_slot(1, 0, 0);
            rec.set_slot(2, 0, 0);
        }
        // Entries the write makes useless go.
        super::entries::for_each(pool, rec, WORD_ENTRY_SLOTS.start, |r, s, e| {
            if !e.is_empty()
                && (forgotten(cta, e.end().wrapping_sub(1))
                    || (dominates(me, e.desc)
                        && !is_launch(e.desc)
                        && cta
                            .first_unordered(arena, e.desc.serial(), e.count, e.desc.epoch())
                            .is_none()))
            {
                r.set_slot(s, 0, 0);
            }
            None::<()>
        });
        if keep_old
            && !insert(
                cta,
                arena,
                pool,
                rec,
                WORD_ENTRY_SLOTS.start,
                old.desc,
                SiteWord::for_serial(old.site, old.desc.serial()),
                word,
                false,
            )
        {
            *bounded = true;
        }
    } else if !insert(
        cta,
        arena,
        pool,
        rec,
        WORD_ENTRY_SLOTS.start,
        me,
        site,
        word,
        true,
    ) {
        *bounded = true;
    }
}
