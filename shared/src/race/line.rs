//! A warp's plain access of a whole 128-byte line, checked against the
//! line's header in one pass: the hot path of a streaming kernel.
//!
//! A line in line mode keeps one state for all its 32 words in the first
//! four cells of its shadow ([`super::desc`]): the last write, the
//! reads since, and both sites. A write checks both and installs itself
//! with one compare-exchange of cell 0 (then clears the reads); a read
//! checks the write and changes cell 1 only when the read state changes:
//! a CTA re-reading, or another CTA of a launch reading the line through
//! its read-only views, changes nothing and writes nothing.
//!
//! Accesses the host made globally ordered (every launch issued since
//! orders them: the launch's [`global`](super::cta::CtaView) bounds) are
//! forgotten as they are met.
//!
//! The header's version ties the reads to the write they followed: a
//! writer bumps it, so a reader that checked an older write cannot slip
//! into the new write's reads, and a writer whose clearing of the reads
//! fails sees exactly the readers that came before it.

use core::sync::atomic::Ordering as MemOrder;

use super::check::{found, settled_site, RaceFound};
use super::cta::CtaView;
use super::desc::{AccessDesc, CellTag, LineRead, LineWrite, ReadKind, SiteWord};
use super::entries::{check_all, insert, launch_verdict, LAUNCH};
use super::knowledge::Arena;
use super::memory::{HeaderCells, RaceMemory, U64Of};
use super::record::Pool;
use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::memory_model::Scope;

/// Words per line.
pub const LINE_WORDS: u64 = super::memory::LINE_WORDS;
/// Bytes per line.
pub const LINE_BYTES: u64 = 128;

/// The owner tag of a line's reader-set record (apart from any word's).
#[inline(always)]
pub const fn reads_owner(word0: u64) -> u64 {
    word0 | 1 << 63
}

/// What a line access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineOutcome {
    /// Checked and recorded; no race.
    Clean,
    /// Checked and recorded; it raced with an earlier access.
    Raced(RaceFound),
    /// The line is split: check each word ([`super::word`]).
    Split,
    /// A write raced and was not recorded: split the line and record it
    /// word by word (reports from that are this race again: drop them).
    RacedSplit(RaceFound),
}

/// The current access, as the line path needs it.
#[derive(Clone, Copy, Debug)]
pub struct LineAccess {
    /// A write (else a read).
    pub write: bool,
    /// A read through one of the launch's read-only views.
    pub read_only: bool,
    /// Its site.
    pub site: SiteWord,
}

/// The four header cells of the line starting at word `word0`.
struct Header<'m, M: RaceMemory + ?Sized> {
    c0: &'m U64Of<M>,
    c1: &'m U64Of<M>,
    c2: &'m U64Of<M>,
    c3: &'m U64Of<M>,
    /// Cells 0 and 1 load as one pair ([`HeaderCells::paired`]).
    paired: bool,
}

impl<M: RaceMemory + ?Sized> Header<'_, M> {
    /// Cells 0 and 1 (the write and the reads), each read relaxed, both
    /// issued before either is used: one paired load where the memory
    /// lays them out for it (as every [`RaceMemory`] does), so that the
    /// fast paths start with one round trip. The site cells are read
    /// right before the change they go with, as late as can be: a site
    /// noted late by the access before is then seen, and this one's note
    /// does not fail over it.
    #[inline(always)]
    fn access_cells(&self) -> [u64; 2] {
        if self.paired {
            // SAFETY: two consecutive live cells of the memory's shadow,
            // the first 16-aligned (`HeaderCells::paired`).
            unsafe { M::Atomics::load_pair_relaxed(self.c0) }
        } else {
            [self.c0, self.c1].map(|c| c.load(MemOrder::Relaxed))
        }
    }
}

/// Notes `site` in header cell `cell` (2: the write's, 3: the reads'),
/// where it read `old` before the change it describes. A compare-exchange,
/// not a store: a split that took the line after that change turns the
/// header cells into word cells, which a late store would overwrite with
/// a site; the split's value wins and this site is lost (a report then
/// lacks the earlier location, never gains a false access).
#[inline(always)]
fn note_site<M: RaceMemory + ?Sized>(cell: &U64Of<M>, old: u64, site: SiteWord) {
    let _ = cell.compare_exchange(old, site.0, MemOrder::Relaxed, MemOrder::Relaxed);
}

/// The ordering of the fast paths' header changes and of their look at
/// the other cell after them (a write's at the reads, a read's at the
/// write), so that of a whole-line read and write at once one sees the
/// other: sequentially consistent. On the GPU relaxed does it at no cost:
/// the look is issued once the compare-exchange has returned, both were
/// performed in L2, the point of coherence of `.gpu` atomics, and the
/// header's cells share one 32-byte sector there; the general paths keep
/// acquire-release.
#[cfg(target_arch = "nvptx64")]
const MEET: MemOrder = MemOrder::Relaxed;
#[cfg(not(target_arch = "nvptx64"))]
const MEET: MemOrder = MemOrder::SeqCst;

/// Whether `s` is forgotten: ordered before every launch issued since
/// the current one was (and so before every access still to come).
#[inline(always)]
pub fn forgotten(cta: &CtaView<'_>, s: u32) -> bool {
    s < cta.global.0[super::serial::lane_of(s)]
}

/// The common cases of [`access_line`], decided in registers: a header in
/// line mode whose write and reads are this CTA's own or ordered by host
/// order (nothing acquired needs looking up), changed with at most one
/// compare-exchange. `None`: the general path decides (it also retries
/// what a concurrent change made this one give up on).
///
/// Relaxed throughout: a site is written by the access that won the
/// compare-exchange, right after it, and a reader trusts it only for that
/// access's serial, so a site seen late only leaves a report without its
/// earlier location.
#[inline(always)]
fn access_line_fast<M: RaceMemory + ?Sized>(
    h: &Header<'_, M>,
    cta: &CtaView<'_>,
    acc: LineAccess,
) -> Option<LineFast> {
    let [v0, v1] = h.access_cells();
    if CellTag::of(v0) != CellTag::Line {
        return None;
    }
    let w = LineWrite(v0);
    let ws = w.serial();
    if !(ws == 0 || ws == cta.serial || cta.host.orders(ws)) {
        return None;
    }
    let r = current_reads(w, LineRead(v1));
    let reader_ordered = |s: u32| s == cta.serial || cta.host.orders(s);
    if acc.write {
        match r.kind() {
            ReadKind::Empty => {
                if ws == cta.serial && w.epoch() == cta.epoch {
                    return Some(LineFast::Clean);
                }
            }
            ReadKind::Single | ReadKind::Launch if reader_ordered(r.payload()) => {}
            _ => return None,
        }
        let new = LineWrite::new(cta.serial, cta.epoch, w.version().wrapping_add(1));
        let s2 = h.c2.load(MemOrder::Relaxed);
        h.c0.compare_exchange(v0, new.0, MEET, MemOrder::Relaxed)
            .ok()?;
        note_site::<M>(h.c2, s2, acc.site);
        if h.c1.load(MEET) != v1 {
            return Some(LineFast::LateReads {
                before: w,
                reads: v1,
            });
        }
        return Some(LineFast::Clean);
    }
    let kind = if acc.read_only {
        ReadKind::Launch
    } else {
        ReadKind::Single
    };
    match r.kind() {
        ReadKind::Launch
            if acc.read_only && cta.host.owns(r.payload()) && cta.epoch <= r.epoch() =>
        {
            return Some(LineFast::Clean)
        }
        ReadKind::Single
            if !acc.read_only && r.payload() == cta.serial && cta.epoch <= r.epoch() =>
        {
            return Some(LineFast::Clean)
        }
        ReadKind::Empty => {}
        ReadKind::Single | ReadKind::Launch if reader_ordered(r.payload()) => {}
        _ => return None,
    }
    let mine = LineRead::new(kind, cta.serial, cta.epoch, w.version());
    let s3 = h.c3.load(MemOrder::Relaxed);
    h.c1.compare_exchange(v1, mine.0, MEET, MemOrder::Relaxed)
        .ok()?;
    note_site::<M>(h.c3, s3, acc.site);
    // A writer that replaced cell 0 after this read's check did not see
    // the read: the general path checks its write. (Sequentially
    // consistent with the writer's change of cell 0 and its look at cell
    // 1 after it: of a read and a write at once, one sees the other.)
    (h.c0.load(MEET) == v0).then_some(LineFast::Clean)
}

/// What the common cases of a line access decided ([`line_fast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFast {
    /// Checked and recorded; no race.
    Clean,
    /// Not a common case: [`line_rest`] decides.
    General,
    /// The write was recorded, replacing `before`, but the reads changed
    /// from `reads` since it checked them: [`line_rest`] checks the late
    /// ones.
    LateReads {
        /// The write it replaced.
        before: LineWrite,
        /// Cell 1 as it checked it.
        reads: u64,
    },
}

/// The four header cells of the line at `word0`, `None` past the shadow.
#[inline(always)]
fn header<M: RaceMemory + ?Sized>(mem: &M, word0: u64) -> Option<Header<'_, M>> {
    let HeaderCells {
        cells: [c0, c1, c2, c3],
        paired,
    } = mem.header_cells(word0)?;
    Some(Header::<M> {
        c0,
        c1,
        c2,
        c3,
        paired,
    })
}

/// Checks and records `acc` of the whole line starting at word `word0`
/// (a multiple of [`LINE_WORDS`]).
#[inline(always)]
pub fn access_line<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word0: u64,
    acc: LineAccess,
    bounded: &mut bool,
) -> LineOutcome {
    let fast = line_fast(mem, cta, word0, acc);
    line_rest(mem, cta, word0, acc, fast, bounded)
}

/// The common cases of [`access_line`], decided in registers with the
/// header's cells and at most one compare-exchange: nothing it takes
/// leaves the caller's registers, so that a hook inlined at the access
/// site keeps them there (the rest, [`line_rest`], goes out of line).
#[inline(always)]
pub fn line_fast<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word0: u64,
    acc: LineAccess,
) -> LineFast {
    match header(mem, word0) {
        Some(h) => access_line_fast(&h, cta, acc).unwrap_or(LineFast::General),
        None => LineFast::Clean,
    }
}

/// What [`line_fast`] left of [`access_line`]: the general path, or the
/// check of reads that came late to a recorded write.
#[inline(always)]
pub fn line_rest<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    word0: u64,
    acc: LineAccess,
    fast: LineFast,
    bounded: &mut bool,
) -> LineOutcome {
    let Some(h) = header(mem, word0) else {
        return LineOutcome::Clean;
    };
    match fast {
        LineFast::Clean => LineOutcome::Clean,
        LineFast::General => access_line_general(mem, cta, &h, word0, acc, bounded),
        LineFast::LateReads { before, reads } => done(late_reads(
            mem,
            cta,
            &mem.arena(),
            &h,
            before,
            reads,
            word0,
            bounded,
        )),
    }
}

/// [`access_line`] beyond its common cases: out of line, so that the
/// common ones keep few registers.
#[inline(never)]
fn access_line_general<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    h: &Header<'_, M>,
    word0: u64,
    acc: LineAccess,
    bounded: &mut bool,
) -> LineOutcome {
    if acc.write {
        write_line(mem, cta, h, word0, acc.site, bounded)
    } else {
        read_line(mem, cta, h, word0, acc, bounded)
    }
}

/// The write of header cell 0's value, unless there is none or it is
/// forgotten.
#[inline(always)]
fn live_write(cta: &CtaView<'_>, w: LineWrite) -> Option<AccessDesc> {
    let s = w.serial();
    (s != 0 && !forgotten(cta, s)).then(|| w.desc())
}

#[inline(never)]
fn write_line<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    h: &Header<'_, M>,
    word0: u64,
    site: SiteWord,
    bounded: &mut bool,
) -> LineOutcome {
    let arena = mem.arena();
    let me = AccessDesc::plain(cta.serial, cta.epoch, true, 0xf);
    loop {
        let v0 = h.c0.load(MemOrder::Acquire);
        match CellTag::of(v0) {
            CellTag::Line => {}
            CellTag::Locked => {
                M::Atomics::spin();
                continue;
            }
            _ => return LineOutcome::Split,
        }
        let w = LineWrite(v0);
        let v1 = h.c1.load(MemOrder::Acquire);
        let r = current_reads(w, LineRead(v1));
        if w.serial() == cta.serial && w.epoch() == cta.epoch && r.kind() == ReadKind::Empty {
            return LineOutcome::Clean;
        }
        let mut race = live_write(cta, w)
            .filter(|d| !cta.orders_desc(&arena, *d))
            .map(|d| {
                found(
                    d,
                    settled_site::<M::Atomics>(d, || SiteWord(h.c2.load(MemOrder::Relaxed))),
                    me,
                    word0,
                )
            });
        if race.is_none() {
            race = check_reads(mem, cta, &arena, h, r, me, word0, bounded);
        }
        if let Some(found) = race {
            // Keep both sides of a race: the words remember what the
            // header would drop.
            return LineOutcome::RacedSplit(found);
        }
        let version = w.version().wrapping_add(1);
        let new = LineWrite::new(cta.serial, cta.epoch, version);
        let s2 = h.c2.load(MemOrder::Relaxed);
        if h.c0
            .compare_exchange(v0, new.0, MemOrder::SeqCst, MemOrder::Relaxed)
            .is_err()
        {
            continue;
        }
        note_site::<M>(h.c2, s2, site);
        let race = if r.kind() == ReadKind::Set || h.c1.load(MemOrder::SeqCst) != v1 {
            late_reads(mem, cta, &arena, h, w, v1, word0, bounded)
        } else {
            None
        };
        return done(race);
    }
}

/// After the write that replaced `w` in cell 0, where it had checked the
/// reads of cell 1's value `v1`: the reads of `w` that got into cell 1
/// since are checked here (a reader that registered after the write
/// looked at cell 1, and looked at cell 0 again before the write changed
/// it, saw neither; one that looks after the write's change checks it
/// itself). A reader set of `w`'s is cleared, to give its record back;
/// other reads of `w` are left, reading as none (an old version).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn late_reads<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    h: &Header<'_, M>,
    w: LineWrite,
    v1: u64,
    word0: u64,
    bounded: &mut bool,
) -> Option<RaceFound> {
    let me = AccessDesc::plain(cta.serial, cta.epoch, true, 0xf);
    let version = w.version().wrapping_add(1);
    let mut race = None;
    let mut cur = v1;
    let mut seen = h.c1.load(MemOrder::SeqCst);
    loop {
        if seen != cur {
            if LineRead(seen).version() == version {
                return race;
            }
            if race.is_none() {
                let late = current_reads(w, LineRead(seen));
                race = check_reads(mem, cta, arena, h, late, me, word0, bounded);
            }
            cur = seen;
        }
        // A split froze the reads (it takes them), or no set to give back.
        if CellTag::of(cur) == CellTag::Locked
            || current_reads(w, LineRead(cur)).kind() != ReadKind::Set
        {
            return race;
        }
        let empty = LineRead::empty(version);
        match h
            .c1
            .compare_exchange(cur, empty.0, MemOrder::AcqRel, MemOrder::Relaxed)
        {
            Ok(_) => {
                free_reads(mem, LineRead(cur), w.version(), word0);
                return race;
            }
            Err(v) => seen = v,
        }
    }
}

/// The reads of cell 1's value belonging to write `w` (a read word of
/// another version is a writer's leftover: no reads yet).
#[inline(always)]
fn current_reads(w: LineWrite, r: LineRead) -> LineRead {
    if r.version() == w.version() {
        r
    } else {
        LineRead::empty(w.version())
    }
}

/// Gives a replaced reader set's record back.
fn free_reads<M: RaceMemory + ?Sized>(mem: &M, r: LineRead, version: u8, word0: u64) {
    if r.kind() != ReadKind::Set || r.version() != version {
        return;
    }
    let pool = mem.pool();
    if let Some(rec) = pool.record(r.payload()) {
        if rec.lock(reads_owner(word0)) {
            rec.kill();
            pool.free(rec);
        }
    }
}

/// The first race of the reads `r` with the write `me`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn check_reads<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    h: &Header<'_, M>,
    r: LineRead,
    me: AccessDesc,
    word0: u64,
    bounded: &mut bool,
) -> Option<RaceFound> {
    match r.kind() {
        ReadKind::Empty => None,
        ReadKind::Single => {
            let d = r.reader();
            (!forgotten(cta, d.serial()) && !cta.orders_desc(arena, d)).then(|| {
                found(
                    d,
                    settled_site::<M::Atomics>(d, || SiteWord(h.c3.load(MemOrder::Relaxed))),
                    me,
                    word0,
                )
            })
        }
        ReadKind::Launch => {
            let d = r.reader();
            if forgotten(cta, d.serial()) {
                return None;
            }
            let site = SiteWord(h.c3.load(MemOrder::Relaxed));
            launch_verdict(cta, arena, AccessDesc(d.0 | LAUNCH), site, me, word0).race(bounded)
        }
        ReadKind::Set => {
            let pool = mem.pool();
            let rec = pool.record(r.payload())?;
            if !rec.lock(reads_owner(word0)) {
                return None;
            }
            let race = check_all(cta, arena, &pool, &rec, 0, me, Scope::Block, word0, bounded);
            rec.unlock();
            race
        }
    }
}

#[inline(never)]
fn read_line<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    h: &Header<'_, M>,
    word0: u64,
    acc: LineAccess,
    bounded: &mut bool,
) -> LineOutcome {
    let arena = mem.arena();
    let me = AccessDesc::plain(cta.serial, cta.epoch, false, 0xf);
    let me_kind = if acc.read_only {
        ReadKind::Launch
    } else {
        ReadKind::Single
    };
    loop {
        let v0 = h.c0.load(MemOrder::Acquire);
        match CellTag::of(v0) {
            CellTag::Line => {}
            CellTag::Locked => {
                M::Atomics::spin();
                continue;
            }
            _ => return LineOutcome::Split,
        }
        let w = LineWrite(v0);
        let race = live_write(cta, w)
            .filter(|d| !cta.orders_desc(&arena, *d))
            .map(|d| {
                found(
                    d,
                    settled_site::<M::Atomics>(d, || SiteWord(h.c2.load(MemOrder::Relaxed))),
                    me,
                    word0,
                )
            });
        let v1 = h.c1.load(MemOrder::Acquire);
        let r = current_reads(w, LineRead(v1));
        let mine = LineRead::new(me_kind, cta.serial, cta.epoch, w.version());
        let next = match r.kind() {
            ReadKind::Empty => Some(mine),
            ReadKind::Single => {
                let a = r.reader();
                if a.serial() == cta.serial {
                    (cta.epoch > a.epoch() || acc.read_only).then_some(mine)
                } else if forgotten(cta, a.serial()) || cta.orders_desc(&arena, a) {
                    Some(mine)
                } else {
                    None
                }
            }
            ReadKind::Launch => {
                let a = r.payload();
                if acc.read_only && cta.host.owns(a) {
                    if cta.epoch <= r.epoch() {
                        return done(race);
                    }
                    Some(mine)
                } else if forgotten(cta, a) || cta.host.orders(a) {
                    Some(mine)
                } else {
                    None
                }
            }
            ReadKind::Set => None,
        };
        match next {
            Some(n) if n == r => return done(race),
            Some(n) => {
                let s3 = h.c3.load(MemOrder::Relaxed);
                if h.c1
                    .compare_exchange(v1, n.0, MemOrder::AcqRel, MemOrder::Relaxed)
                    .is_ok()
                {
                    note_site::<M>(h.c3, s3, acc.site);
                    free_reads(mem, LineRead(v1), w.version(), word0);
                    return done(race.or_else(|| overtaken(cta, &arena, h, v0, me, word0)));
                }
            }
            None => match add_to_set(mem, cta, &arena, h, word0, w, v1, r, me, acc) {
                Some(true) => return done(race),
                Some(false) => {
                    *bounded = true;
                    return done(race);
                }
                None => {}
            },
        }
        M::Atomics::spin();
    }
}

/// After a reader changed cell 1: a writer that replaced cell 0 (`v0`
/// when the reader looked) in between did not see this read, so the
/// reader checks that write.
#[inline(always)]
fn overtaken<M: RaceMemory + ?Sized>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    h: &Header<'_, M>,
    v0: u64,
    me: AccessDesc,
    word0: u64,
) -> Option<RaceFound> {
    let now = h.c0.load(MemOrder::Acquire);
    if now == v0 || CellTag::of(now) != CellTag::Line {
        return None;
    }
    live_write(cta, LineWrite(now))
        .filter(|d| !cta.orders_desc(arena, *d))
        .map(|d| {
            found(
                d,
                settled_site::<M::Atomics>(d, || SiteWord(h.c2.load(MemOrder::Relaxed))),
                me,
                word0,
            )
        })
}

#[inline(always)]
fn done(race: Option<RaceFound>) -> LineOutcome {
    race.map_or(LineOutcome::Clean, LineOutcome::Raced)
}

/// Adds the read `me` to the line's reader set, making one from the
/// reads `r` when they are a single reader or a launch. `None`: the
/// header changed, start over; `Some(false)`: no record was left.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn add_to_set<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    arena: &Arena<'_, M::Atomics>,
    h: &Header<'_, M>,
    word0: u64,
    w: LineWrite,
    v1: u64,
    r: LineRead,
    me: AccessDesc,
    acc: LineAccess,
) -> Option<bool> {
    let pool: Pool<'_, M::Atomics> = mem.pool();
    let owner = reads_owner(word0);
    let me = if acc.read_only {
        AccessDesc(me.0 | LAUNCH)
    } else {
        me
    };
    if r.kind() == ReadKind::Set {
        let rec = pool.record(r.payload())?;
        if !rec.lock(owner) {
            return None;
        }
        // Still this line's set of this write?
        if h.c1.load(MemOrder::Acquire) != v1 || h.c0.load(MemOrder::Acquire) != w.0 {
            rec.unlock();
            return None;
        }
        let ok = insert(cta, arena, &pool, &rec, 0, me, acc.site, owner, true);
        rec.unlock();
        return Some(ok);
    }
    let Some(rec) = pool.allocate(owner) else {
        return Some(false);
    };
    let first = if r.kind() == ReadKind::Launch {
        AccessDesc(r.reader().0 | LAUNCH)
    } else {
        r.reader()
    };
    let first_site = SiteWord(h.c3.load(MemOrder::Relaxed));
    let site = if first_site.belongs_to(first.serial()) {
        first_site.site()
    } else {
        0
    };
    let (a, b) = super::record::Entry {
        desc: first,
        count: 1,
        site,
    }
    .to_slot();
    rec.set_slot(0, a, b);
    insert(cta, arena, &pool, &rec, 0, me, acc.site, owner, true);
    rec.unlock();
    let set = LineRead::new(ReadKind::Set, pool.index(&rec), 0, w.version());
    if h.c1
        .compare_exchange(v1, set.0, MemOrder::AcqRel, MemOrder::Relaxed)
        .is_ok()
    {
        Some(true)
    } else {
        if rec.lock(owner) {
            rec.kill();
            pool.free(rec);
        }
        None
    }
}
