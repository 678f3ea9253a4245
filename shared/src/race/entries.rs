//! Access entries in a record chain: checking a current access against
//! all of them, and adding one while dropping those it makes useless.
//!
//! An entry covers `count` consecutive serials that made the same access
//! (kind, bytes, epoch, site). A *launch* entry (the [`LAUNCH`] bit)
//! stands for reads through a launch's read-only views by any of its
//! CTAs, named by one of them: host order is decided per launch, so it
//! is ordered before a CTA exactly when that one reader is by host order.

use super::check::{conflicts, dominates, found, RaceFound};
use super::cta::CtaView;
use super::desc::{AccessDesc, SiteWord, SPARSE};
use super::knowledge::Arena;
use super::record::{Entry, Pool, Record, MAX_CHAIN_RECORDS, SLOTS};
use crate::atomic::AtomicFamily;
use crate::memory_model::Scope;

/// The descriptor bit of a launch entry (and of a word's inline launch
/// read).
pub const LAUNCH: u64 = 1 << 58;

/// Whether `d` is a launch read.
#[inline(always)]
pub const fn is_launch(d: AccessDesc) -> bool {
    d.0 & LAUNCH != 0
}

/// What checking an entry against the current access found.
pub enum EntryVerdict {
    /// No race.
    Clean,
    /// A race with a real earlier access.
    Race(RaceFound),
    /// A launch read that this CTA knows only part of, or a sparse entry
    /// it is ordered after at both ends but not between: undecidable
    /// here, not reported (counted by the caller).
    Bounded,
}

impl EntryVerdict {
    /// The race, if any; an undecided check sets `bounded`.
    #[inline(always)]
    pub fn race(self, bounded: &mut bool) -> Option<RaceFound> {
        match self {
            EntryVerdict::Clean => None,
            EntryVerdict::Race(r) => Some(r),
            EntryVerdict::Bounded => {
                *bounded = true;
                None
            }
        }
    }
}

/// Checks entry `e` against the current access `me` (of `scope`) on
/// `word`.
pub fn check_entry<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    e: Entry,
    me: AccessDesc,
    scope: Scope,
    word: u64,
) -> EntryVerdict {
    if e.is_empty() || !conflicts(cta, e.desc, me, scope) {
        return EntryVerdict::Clean;
    }
    if is_launch(e.desc) {
        return launch_verdict(
            cta,
            arena,
            e.desc,
            SiteWord::for_serial(e.site, e.desc.serial()),
            me,
            word,
        );
    }
    let (lo, epoch) = (e.desc.serial(), e.desc.epoch());
    let Some(first) = cta.first_unordered(arena, lo, e.count, epoch) else {
        return EntryVerdict::Clean;
    };
    // A sparse entry's serials between its ends may not have made the
    // access: only its ends are named.
    let last = e.end().wrapping_sub(1);
    let witness = if !e.desc.is_sparse() || first == lo {
        first
    } else if !cta.orders(arena, last, epoch) {
        last
    } else {
        return EntryVerdict::Bounded;
    };
    let desc = AccessDesc(e.desc.with_serial(witness).0 & !SPARSE);
    EntryVerdict::Race(found(desc, SiteWord::for_serial(e.site, witness), me, word))
}

/// The verdict on a launch read named by reader `d` (site `site`).
pub fn launch_verdict<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    d: AccessDesc,
    site: SiteWord,
    me: AccessDesc,
    word: u64,
) -> EntryVerdict {
    // The named reader's epoch is its own: whether this CTA knows it
    // says nothing of the launch's other readers.
    let reader = d.serial();
    if cta.host.orders(reader) {
        return EntryVerdict::Clean;
    }
    if !cta.orders(arena, reader, d.epoch()) {
        return EntryVerdict::Race(found(d, site, me, word));
    }
    // It acquired from this reader: whether it knows every other reader
    // of the launch is not decidable from one name.
    EntryVerdict::Bounded
}

/// Walks the entries of the chain at `rec` (slots `first..` of the first
/// record, all slots of chained ones) until `f` returns `Some`.
pub fn for_each<'m, F: AtomicFamily, T>(
    pool: &Pool<'m, F>,
    rec: &Record<'m, F>,
    first: usize,
    mut f: impl FnMut(&Record<'m, F>, usize, Entry) -> Option<T>,
) -> Option<T> {
    let mut cur = Some(rec.clone());
    let mut from = first;
    while let Some(r) = cur {
        for s in from..SLOTS {
            let (a, b) = r.slot(s);
            if let Some(t) = f(&r, s, Entry::from_slot(a, b)) {
                return Some(t);
            }
        }
        from = 0;
        cur = pool.record(r.next());
    }
    None
}

/// The first race of the chain's entries with `me`; `bounded` is set
/// when an entry could not be decided.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub fn check_all<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    pool: &Pool<'_, F>,
    rec: &Record<'_, F>,
    first: usize,
    me: AccessDesc,
    scope: Scope,
    word: u64,
    bounded: &mut bool,
) -> Option<RaceFound> {
    for_each(pool, rec, first, |_, _, e| {
        check_entry(cta, arena, e, me, scope, word).race(bounded)
    })
}

/// Whether an entry made at `entry_site` stands for the access `me` made
/// at `site` (same descriptor key): the very same site, or for an atomic
/// the same source location. Atomics by consecutive serials at one
/// location so share an entry whichever of their threads made them (a
/// hot word's atomics by every CTA of a launch are one entry, not one per
/// CTA); such an entry names its first serial's thread.
#[inline(always)]
pub fn same_site(me: AccessDesc, entry_site: u32, site: u32) -> bool {
    entry_site == site
        || (me.is_atomic()
            && SiteWord(u64::from(entry_site)).location_bits()
                == SiteWord(u64::from(site)).location_bits())
}

/// Adds `me` (made at `site`) to the chain: drops entries it makes
/// useless (ordered before the current CTA, whose access `me` is, and
/// dominated by it), widens a neighbouring entry of the same access
/// (joining the entries on both sides when it closes the gap between
/// them), or takes a free slot, chaining a record when there is none.
/// False when the pool had no record left (the access is then not
/// remembered: counted by the caller). With `prune` off (re-adding an
/// older access on behalf of the current CTA) nothing is dropped. The
/// caller holds the chain's lock.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub fn insert<'m, F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    pool: &Pool<'m, F>,
    rec: &Record<'m, F>,
    first: usize,
    me: AccessDesc,
    site: SiteWord,
    owner: u64,
    prune: bool,
) -> bool {
    let serial = me.serial();
    let mut free: Option<(Record<'m, F>, usize)> = None;
    // Entries of the same access ending just below `serial` and starting
    // just above it.
    let mut below: Option<(Record<'m, F>, usize, Entry)> = None;
    let mut above: Option<(Record<'m, F>, usize, Entry)> = None;
    // The same access's entry nearest to `serial` (its gap), which it
    // joins as a sparse entry once the chain is at its bound.
    let mut nearest: Option<(Record<'m, F>, usize, Entry, u32)> = None;
    let mut records = 0;
    let mut done = false;
    let mut last = rec.clone();
    for_each(pool, rec, first, |r, s, e| {
        last = r.clone();
        if s == SLOTS - 1 {
            records += 1;
        }
        if e.is_empty() {
            if free.is_none() {
                free = Some((r.clone(), s));
            }
            return None::<()>;
        }
        if done {
            return None;
        }
        let same_access = e.desc.key() == me.key() && same_site(me, e.site, site.site());
        if is_launch(me) && is_launch(e.desc) && cta.host.owns(e.desc.serial()) {
            // A launch entry of this launch: its named reader stands for
            // every read of bytes it covers; a read covering its bytes
            // takes the name.
            if me.bytes() & !e.desc.bytes() == 0 {
                done = true;
            } else if e.desc.bytes() & !me.bytes() == 0 {
                let (a, b) = Entry {
                    desc: me.untagged(),
                    count: 1,
                    site: site.site(),
                }
                .to_slot();
                r.set_slot(s, a, b);
                done = true;
            }
            return None;
        }
        if e.covers(serial) && same_access && e.desc.epoch() >= me.epoch() {
            done = true;
            return None;
        }
        let whole_entry_ordered = !is_launch(e.desc)
            && cta
                .first_unordered(arena, e.desc.serial(), e.count, e.desc.epoch())
                .is_none();
        let launch_ordered = is_launch(e.desc) && cta.host.orders(e.desc.serial());
        if prune && (whole_entry_ordered || launch_ordered) && dominates(me, e.desc) {
            r.set_slot(s, 0, 0);
            if free.is_none() {
                free = Some((r.clone(), s));
            }
            return None;
        }
        if same_access && !is_launch(me) && e.desc.epoch() == me.epoch() {
            if e.end() == serial && below.is_none() {
                below = Some((r.clone(), s, e));
            } else if serial.wrapping_add(1) == e.desc.serial() && above.is_none() {
                above = Some((r.clone(), s, e));
            }
            let gap = if serial < e.desc.serial() {
                e.desc.serial() - serial
            } else {
                serial - e.end().wrapping_sub(1)
            };
            // Only within the current launch: forgetting goes by launch.
            let this_launch = cta.host.owns(e.desc.serial()) && cta.host.owns(serial);
            if this_launch && nearest.as_ref().is_none_or(|n| gap < n.3) {
                nearest = Some((r.clone(), s, e, gap));
            }
        }
        None
    });
    if done {
        return true;
    }
    match (below, above) {
        (Some((r, s, lo)), above) => {
            // Widen the entry below; the one above joins it (a sparse one
            // makes the whole sparse).
            let mut count = lo.count + 1;
            let mut desc = lo.desc;
            if let Some((ra, sa, hi)) = above {
                count += hi.count;
                if hi.desc.is_sparse() {
                    desc = desc.sparse();
                }
                ra.set_slot(sa, 0, 0);
            }
            let (a, b) = Entry { desc, count, ..lo }.to_slot();
            r.set_slot(s, a, b);
            return true;
        }
        (None, Some((r, s, hi))) => {
            // It now starts at this serial: its site is this access's.
            let grown = Entry {
                desc: hi.desc.with_serial(serial),
                count: hi.count + 1,
                site: site.site(),
            };
            let (a, b) = grown.to_slot();
            r.set_slot(s, a, b);
            return true;
        }
        (None, None) => {}
    }
    let entry = Entry {
        desc: me.untagged(),
        count: 1,
        site: site.site(),
    };
    let (a, b) = entry.to_slot();
    if let Some((r, s)) = free {
        r.set_slot(s, a, b);
        return true;
    }
    if records >= MAX_CHAIN_RECORDS {
        if let Some((r, s, e, _)) = nearest {
            // The chain is at its bound: the nearest entry of the same
            // access stretches over this serial, sparse.
            let joined = if serial < e.desc.serial() {
                Entry {
                    desc: e.desc.with_serial(serial).sparse(),
                    count: e.end().wrapping_sub(serial),
                    site: site.site(),
                }
            } else {
                Entry {
                    desc: e.desc.sparse(),
                    count: serial.wrapping_sub(e.desc.serial()).wrapping_add(1),
                    ..e
                }
            };
            let (a, b) = joined.to_slot();
            r.set_slot(s, a, b);
            return true;
        }
    }
    let Some(next) = pool.allocate(owner) else {
        return false;
    };
    next.set_slot(0, a, b);
    next.unlock();
    last.set_next(pool_index(pool, &next));
    true
}

fn pool_index<F: AtomicFamily>(pool: &Pool<'_, F>, r: &Record<'_, F>) -> u32 {
    pool.index(r)
}
