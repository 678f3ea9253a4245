//! Where the engine finds its state: the shadow cells, the record pool,
//! the snapshot arena, the site table of split words, the launches' lane
//! bounds and the SC-fence accumulators. The GPU runtime implements it
//! over its reservations, the CPU backend over host mappings (with a site
//! for every word instead of a hashed table), the tests over slices
//! ([`SliceMemory`]).

use core::sync::atomic::Ordering as MemOrder;

use super::desc::SiteWord;
use super::knowledge::Arena;
use super::record::Pool;
use super::serial::{LaneBounds, Serial, LANES};
use crate::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops};

/// Devices the SC-fence accumulators have room for ([`super::sync::SC_WORDS`]
/// per device and scope).
pub const MAX_SC_DEVICES: usize = 32;

/// The 32-bit atomic of a memory.
pub type U32Of<M> = <<M as RaceMemory>::Atomics as AtomicFamily>::U32;
/// The 64-bit atomic of a memory.
pub type U64Of<M> = <<M as RaceMemory>::Atomics as AtomicFamily>::U64;

/// Words per line (the line path's, [`super::line::LINE_WORDS`]).
pub(super) const LINE_WORDS: u64 = 32;

/// Cells of a line's header ([`RaceMemory::header_cells`]).
pub const HEADER_CELLS: usize = 4;

/// The header cells of one line, in order.
pub struct HeaderCells<'m, U> {
    /// Cells 0 to 3: the write, the reads, the write's site, the reads'.
    pub cells: [&'m U; HEADER_CELLS],
    /// Whether cells 0 and 1 are consecutive in memory, the first
    /// 16-aligned: then they load as one pair.
    pub paired: bool,
}

/// The engine's memory.
pub trait RaceMemory {
    /// The atomics it is made of.
    type Atomics: AtomicFamily;

    /// The shadow cell of word `word` (counted from the real base), or
    /// `None` for memory the sanitizer does not manage.
    fn cell(&self, word: u64) -> Option<&U64Of<Self>>;

    /// The first [`HEADER_CELLS`] shadow cells of the line of word
    /// `word` (lines are 32 words from word 0), `None` past the shadow.
    /// Default: cell by cell, each checked, paired when they happen to be
    /// consecutive; a memory that lays every line's cells out
    /// consecutively answers with one check.
    #[inline(always)]
    fn header_cells(&self, word: u64) -> Option<HeaderCells<'_, U64Of<Self>>> {
        let word0 = word & !(LINE_WORDS - 1);
        let cells = [
            self.cell(word0)?,
            self.cell(word0 + 1)?,
            self.cell(word0 + 2)?,
            self.cell(word0 + 3)?,
        ];
        let first: *const U64Of<Self> = cells[0];
        let paired = core::ptr::eq(cells[1], first.wrapping_add(1)) && first as usize % 16 == 0;
        Some(HeaderCells { cells, paired })
    }

    /// The record pool's words.
    fn pool_words(&self) -> &[U64Of<Self>];

    /// The snapshot arena's words.
    fn arena_words(&self) -> &[U32Of<Self>];

    /// The exit log ([`Arena`]'s; empty: none).
    fn exit_words(&self) -> &[U32Of<Self>] {
        &[]
    }

    /// The site table of split words (pairs of words; empty: none).
    fn site_words(&self) -> &[U64Of<Self>];

    /// Notes the site of the access `site` names to split word `word`
    /// (before the access becomes visible in the word's cell). Default:
    /// a hashed slot of [`site_words`](RaceMemory::site_words), shared by
    /// the words that hash to it.
    #[inline(always)]
    fn note_site(&self, word: u64, site: SiteWord) {
        note_hashed_site::<Self::Atomics>(self.site_words(), word, site);
    }

    /// The site last noted for `serial`'s access to split word `word`, if
    /// it is still there ([`SiteWord::NONE`] if not).
    #[inline(always)]
    fn site_of(&self, word: u64, serial: Serial) -> SiteWord {
        hashed_site_of::<Self::Atomics>(self.site_words(), word, serial)
    }

    /// The ring of launch records ([`launch_record`](mod@launch_record)
    /// words each).
    fn launch_words(&self) -> &[U32Of<Self>];

    /// The lane bounds of the launch `r` names ([`LaneRef`]), if its
    /// record is still in the ring.
    fn lanes(&self, r: LaneRef) -> Option<LaneBounds> {
        let rec = launch_record::<Self::Atomics>(self.launch_words(), r)?;
        let mut b = LaneBounds::NONE;
        for (d, w) in b.0.iter_mut().zip(&rec[launch_record::BOUNDS..]) {
            *d = w.load(MemOrder::Relaxed);
        }
        Some(b)
    }

    /// The SC-fence accumulators ([`super::sync::SC_WORDS`] per device
    /// and scope; empty: `fence.sc` orders like `fence.acq_rel`).
    fn sc_words(&self) -> &[U32Of<Self>] {
        &[]
    }

    /// The record pool.
    #[inline(always)]
    fn pool(&self) -> Pool<'_, Self::Atomics> {
        Pool::new(self.pool_words())
    }

    /// The snapshot arena.
    #[inline(always)]
    fn arena(&self) -> Arena<'_, Self::Atomics> {
        Arena::new(self.arena_words(), self.exit_words(), self.launch_words())
    }
}

/// A launch, as a release head names it so that an acquirer in another
/// launch learns what the host ordered before the releaser: the launch's
/// number (1, 2, ...; 0: none), whose record sits in slot `r % slots` of
/// the launch ring and carries `r` as its tag.
pub type LaneRef = u32;

/// The words of one launch's record in the launch ring: written by the
/// host before the launch, read by its CTAs and by later acquirers.
///
/// ```text
/// | tag (LaneRef) | inherited: state, snapshot | base | count | device | launch id | flags |
/// | reports (u64) | anchor (u64) | path word (u64) | pad (2 words) | bounds: LANES words | global: LANES words |
/// ```
pub mod launch_record {
    use super::LANES;
    /// The launch's [`LaneRef`](super::LaneRef) (validates a slot).
    pub const TAG: usize = 0;
    /// What it inherited ([`Arena::inherited`](super::Arena::inherited)):
    /// state (0 not computed, 1 computing, 2 done).
    pub const INHERITED_STATE: usize = 1;
    /// ... and the snapshot.
    pub const INHERITED: usize = 2;
    /// First serial.
    pub const BASE: usize = 3;
    /// Serials.
    pub const COUNT: usize = 4;
    /// Device rank.
    pub const DEVICE: usize = 5;
    /// The context's launch id (reports name the kernel by it).
    pub const LAUNCH_ID: usize = 6;
    /// Flags.
    pub const FLAGS: usize = 7;
    /// The device address of its context's report buffer (two words,
    /// low first; a GPU's).
    pub const REPORTS: usize = 8;
    /// The address of a `Location` of the launched kernel's module (two
    /// words, low first; its CTAs write it, 0 until one does): what
    /// completes the low address bits of its sites' locations.
    pub const ANCHOR: usize = 10;
    /// The device address of its entry's path word, a word of host
    /// memory its CTAs set to tell the host what they took (two words,
    /// low first; 0: the host does not ask): whether one took a general
    /// path of the race engine, so that the host knows whether the
    /// entry fits a lower register cap, and whether one claimed its
    /// same-block regions in its body, so that the entry's later
    /// launches claim them at entry ([`path_word`]).
    pub const PATH_WORD: usize = 12;
    /// Lane bounds of its host order.
    pub const BOUNDS: usize = 16;
    /// Lane bounds of what may be forgotten.
    pub const GLOBAL: usize = BOUNDS + LANES;
    /// Words per record.
    pub const WORDS: usize = GLOBAL + LANES;

    /// What an entry's path word ([`PATH_WORD`]) says, and what the host
    /// asks its launch to tell there. Each answer is a byte of the word,
    /// set by a plain store of 1 by any CTA that has it to tell, so that
    /// CTAs telling different answers never overwrite each other; what
    /// the host asks rides in the low bits of the word's address (a
    /// word's address is 4-aligned), so that a launch tells only what
    /// the host does not know yet, and a kernel's launches stop writing
    /// host memory once it knows everything.
    pub mod path_word {
        /// The byte a CTA sets when it took a general path of the race
        /// engine.
        pub const GENERAL_PATH_BYTE: u64 = 0;
        /// The byte a CTA sets when it claimed its same-block regions.
        pub const CLAIMED_REGIONS_BYTE: u64 = 1;
        /// In the word: a CTA took a general path.
        pub const GENERAL_PATH: u32 = 1 << (8 * GENERAL_PATH_BYTE);
        /// In the word: a CTA claimed its same-block regions.
        pub const CLAIMED_REGIONS: u32 = 1 << (8 * CLAIMED_REGIONS_BYTE);
        /// In the record's address: tell whether a CTA took a general
        /// path.
        pub const TELL_GENERAL_PATH: u64 = 1;
        /// In the record's address: tell whether a CTA claimed its
        /// same-block regions.
        pub const TELL_CLAIMED_REGIONS: u64 = 2;
        /// The bits of the record's value that are the word's address.
        pub const ADDRESS: u64 = !3;
    }

    use crate::atomic::AtomicFamily;
    /// The record of launch `r` in `ring`, if its slot still holds it.
    pub fn get<F: AtomicFamily>(ring: &[F::U32], r: super::LaneRef) -> Option<&[F::U32]> {
        use crate::atomic::AtomicU32Ops;
        let slots = ring.len() / WORDS;
        if r == 0 || slots == 0 {
            return None;
        }
        let at = (r as usize % slots) * WORDS;
        let rec = &ring[at..at + WORDS];
        (rec[TAG].load(core::sync::atomic::Ordering::Acquire) == r).then_some(rec)
    }
}
use launch_record::get as launch_record;

/// Notes the site of `serial`'s access to split word `word` (before the
/// access becomes visible in the word's cell).
#[inline(always)]
pub fn note_site<M: RaceMemory + ?Sized>(mem: &M, word: u64, site: SiteWord) {
    mem.note_site(word, site);
}

/// The site noted for `serial`'s access to split word `word`, if it is
/// still there.
#[inline(always)]
pub fn site_of<M: RaceMemory + ?Sized>(mem: &M, word: u64, serial: Serial) -> SiteWord {
    mem.site_of(word, serial)
}

/// [`RaceMemory::note_site`] in a hashed table of (word, site) pairs.
#[inline(always)]
pub fn note_hashed_site<F: AtomicFamily>(table: &[F::U64], word: u64, site: SiteWord) {
    if table.len() < 2 {
        return;
    }
    let at = 2 * site_slot(word, table.len() / 2);
    table[at].store(word.wrapping_add(1), MemOrder::Relaxed);
    table[at + 1].store(site.0, MemOrder::Relaxed);
}

/// [`RaceMemory::site_of`] in a hashed table of (word, site) pairs.
pub fn hashed_site_of<F: AtomicFamily>(table: &[F::U64], word: u64, serial: Serial) -> SiteWord {
    if table.len() < 2 {
        return SiteWord::NONE;
    }
    let at = 2 * site_slot(word, table.len() / 2);
    let site = SiteWord(table[at + 1].load(MemOrder::Relaxed));
    if table[at].load(MemOrder::Relaxed) == word.wrapping_add(1) && site.belongs_to(serial) {
        site
    } else {
        SiteWord::NONE
    }
}

#[inline(always)]
fn site_slot(word: u64, slots: usize) -> usize {
    // Fibonacci hashing: neighbouring words land far apart.
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize % slots
}

/// Engine memory made of slices.
pub struct SliceMemory<'a, F: AtomicFamily> {
    /// Shadow cells of words `0..shadow.len()`.
    pub shadow: &'a [F::U64],
    /// The record pool.
    pub pool: &'a [F::U64],
    /// The snapshot arena.
    pub arena: &'a [F::U32],
    /// The exit log.
    pub exits: &'a [F::U32],
    /// The site table.
    pub sites: &'a [F::U64],
    /// The launch ring ([`launch_record`](mod@launch_record)).
    pub launches: &'a [F::U32],
    /// SC-fence accumulators.
    pub sc: &'a [F::U32],
}

impl<F: AtomicFamily> RaceMemory for SliceMemory<'_, F> {
    type Atomics = F;

    #[inline(always)]
    fn cell(&self, word: u64) -> Option<&F::U64> {
        self.shadow.get(usize::try_from(word).ok()?)
    }
    fn pool_words(&self) -> &[F::U64] {
        self.pool
    }
    fn arena_words(&self) -> &[F::U32] {
        self.arena
    }
    fn exit_words(&self) -> &[F::U32] {
        self.exits
    }
    fn site_words(&self) -> &[F::U64] {
        self.sites
    }
    fn launch_words(&self) -> &[F::U32] {
        self.launches
    }
    fn sc_words(&self) -> &[F::U32] {
        self.sc
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    /// The default finds a line's header cell by cell from any of its
    /// words, pairs cells 0 and 1 where they lie consecutively from a
    /// 16-aligned cell, and finds none where a cell is past the shadow.
    #[test]
    fn the_default_header_is_the_lines_first_four_cells() {
        let cells: Vec<AtomicU64> = (0..2 * LINE_WORDS + 2).map(AtomicU64::new).collect();
        // A shadow whose first cell is 16-aligned, and one that is not.
        let aligned = cells.as_ptr() as usize % 16 / 8;
        for (skip, paired) in [(aligned, true), (aligned + 1, false)] {
            let mem = SliceMemory::<CoreAtomics> {
                shadow: &cells[skip..skip + 2 * LINE_WORDS as usize],
                pool: &[],
                arena: &[],
                exits: &[],
                sites: &[],
                launches: &[],
                sc: &[],
            };
            for word in [0, 3, 31, 32, 63] {
                let h = mem.header_cells(word).unwrap();
                let first = word / LINE_WORDS * LINE_WORDS;
                let values = h.cells.map(|c| c.load(MemOrder::Relaxed));
                let want: [u64; HEADER_CELLS] =
                    core::array::from_fn(|i| (skip as u64) + first + i as u64);
                assert_eq!(values, want, "word {word}");
                assert_eq!(h.paired, paired, "skip {skip}");
            }
            assert!(mem.header_cells(2 * LINE_WORDS).is_none());
        }
    }
}
