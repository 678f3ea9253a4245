//! When two accesses race, and what a race is called.
//!
//! Two accesses to overlapping bytes race when at least one writes, they
//! are not both atomics on the very same bytes whose scopes include each
//! other's CTAs (morally strong, in the PTX model's words), and the
//! earlier one does not happen before the current one ([`CtaView::orders`]).

use super::cta::CtaView;
use super::desc::{AccessDesc, SiteWord};
use super::knowledge::Arena;
use crate::abi::ReportKind;
use crate::atomic::AtomicFamily;
use crate::memory_model::Scope;

/// A race found: the earlier access and what both were.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaceFound {
    /// What kind of race.
    pub kind: ReportKind,
    /// The earlier access (its serial is one that really raced).
    pub prior: AccessDesc,
    /// Where the earlier access was made, if known ([`SiteWord::NONE`]
    /// when its site was overwritten since).
    pub prior_site: SiteWord,
    /// The racing word (index from the real base).
    pub word: u64,
    /// Bytes of that word both touched.
    pub overlap: u8,
}

/// Whether `earlier` and `current` (of scope `scope` for an atomic) would
/// race if unordered: overlapping bytes, a write, not morally strong.
#[inline(always)]
pub fn conflicts(
    cta: &CtaView<'_>,
    earlier: AccessDesc,
    current: AccessDesc,
    scope: Scope,
) -> bool {
    if earlier.is_none() || earlier.bytes() & current.bytes() == 0 {
        return false;
    }
    if !earlier.is_write() && !current.is_write() {
        return false;
    }
    !(earlier.is_atomic()
        && current.is_atomic()
        && earlier.bytes() == current.bytes()
        && earlier.extent() == current.extent()
        && cta.morally_strong(earlier, scope))
}

/// Whether `earlier` races with the current access `current`.
#[inline(always)]
pub fn races<F: AtomicFamily>(
    cta: &CtaView<'_>,
    arena: &Arena<'_, F>,
    earlier: AccessDesc,
    current: AccessDesc,
    scope: Scope,
) -> bool {
    conflicts(cta, earlier, current, scope) && !cta.orders_desc(arena, earlier)
}

/// The name of a race between `prior` and `current`.
pub fn classify(prior: AccessDesc, current: AccessDesc) -> ReportKind {
    if prior.is_atomic() != current.is_atomic() {
        ReportKind::AtomicNonAtomic
    } else if prior.is_atomic()
        && (prior.extent() != current.extent() || prior.bytes() != current.bytes())
    {
        ReportKind::AtomicSizeMismatch
    } else if prior.is_atomic() {
        ReportKind::ScopeMismatch
    } else if prior.is_write() && current.is_write() {
        ReportKind::WriteAfterWrite
    } else if prior.is_write() {
        ReportKind::ReadAfterWrite
    } else {
        ReportKind::WriteAfterRead
    }
}

/// The site of `prior`, read by `load`. The access that installed `prior`
/// writes its site just after installing it, so a race found in between
/// (two CTAs racing at that very moment) waits for the site, a bounded
/// number of reads ([`AtomicFamily::NEXT_STEP_SPINS`]): a report is
/// rare, its earlier access's place is what the user needs.
#[cold]
pub fn settled_site<F: AtomicFamily>(prior: AccessDesc, load: impl Fn() -> SiteWord) -> SiteWord {
    for _ in 0..F::NEXT_STEP_SPINS {
        let site = load();
        if site.belongs_to(prior.serial()) {
            return site;
        }
        F::spin();
    }
    SiteWord::NONE
}

/// The race between `prior` (made at `site`) and `current` on `word`.
pub fn found(prior: AccessDesc, site: SiteWord, current: AccessDesc, word: u64) -> RaceFound {
    RaceFound {
        kind: classify(prior, current),
        prior,
        prior_site: if site.belongs_to(prior.serial()) {
            site
        } else {
            SiteWord::NONE
        },
        word,
        overlap: prior.bytes() & current.bytes(),
    }
}

/// Whether `later` (ordered after `earlier`, same word) makes `earlier`
/// useless for every future check: any future access racing with
/// `earlier` also races with `later`. True when `later` covers its bytes,
/// is at least as prone (a write, or a read replacing a read) and is
/// plain, or an atomic of the same CTA, bytes, extent and scope (another
/// CTA's could differ from it in which atomics are morally strong).
#[inline(always)]
pub fn dominates(later: AccessDesc, earlier: AccessDesc) -> bool {
    if earlier.is_none() {
        return true;
    }
    if later.bytes() & earlier.bytes() != earlier.bytes() {
        return false;
    }
    if earlier.is_write() && !later.is_write() {
        return false;
    }
    if later.is_atomic() {
        earlier.is_atomic()
            && later.serial() == earlier.serial()
            && later.extent() == earlier.extent()
            && later.bytes() == earlier.bytes()
            && later.scope() == earlier.scope()
    } else {
        true
    }
}
