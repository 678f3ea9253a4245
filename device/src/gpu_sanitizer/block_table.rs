//! Races between threads of one CTA in global memory: the slot's
//! same-block table (`vigil_shared::block::GlobalTable`), with word
//! entries and line entries (`vigil_shared::block_line`).
//!
//! The engine sees a CTA as one sanitizer thread, so two of its threads
//! on one global word are checked here, against the CTA's barrier
//! intervals and warp collectives, with the records and rules of its
//! shared-memory shadows ([`super::block`]). A warp's whole-line run is
//! recorded by its leader in the line's entry; every other access splits
//! the line (if it is in run mode) before it checks its words.

use core::cell::Cell;
use core::panic::Location;
use core::sync::atomic::{AtomicU64, Ordering};

use vigil_shared::block::{claim_entry, BlockRecord, GlobalTable, TableWord, WordRecords, WORD};
use vigil_shared::block_line::{LineRecords, LineRun, LineSnapshot, LineStep, LINE_WORDS};
use vigil_shared::AccessKind;

use super::block::{at, Block, Checked, Counters, Records, Space};
use super::block_word::BlockWord;
use super::cta::CtaState;
use crate::arch::ptx as arch;

/// The bit that sets a line's table key and hash apart from every word's
/// (word indices are byte addresses over 4, below 2^62).
const LINE_KEY: u64 = 1 << 62;

/// The calling thread's access, about to be checked in its CTA slot's
/// same-block table.
pub(super) struct BlockTable {
    base: *mut u8,
    /// The CTA's own region of the table ...
    slot: usize,
    /// ... its first extension region ...
    extension: usize,
    /// ... and how many regions it holds, its own one included.
    regions: u32,
    table: GlobalTable,
    /// The owner tag of this block's entries in the thread's interval.
    tag: u64,
    checked: Checked,
}

impl BlockTable {
    /// The calling thread's access of `kind`, `size` bytes at `addr`, at
    /// `loc`; `None` when nothing is to be checked (no table, the slot
    /// past it, a one-thread block, an empty access, a read of the
    /// launch's read-only memory, which no thread of it writes, an access
    /// to a thread-owned partition, which only its owner touches).
    #[inline(always)]
    pub fn current(
        addr: usize,
        kind: AccessKind,
        size: usize,
        loc: &'static Location<'static>,
    ) -> Option<Self> {
        let cta = CtaState::current();
        let rt = cta.runtime();
        if rt.block_table == 0 || size == 0 || !super::regions::sm_has_regions(rt, cta.smid) {
            return None;
        }
        if cta
            .read_only
            .skips_block_check(addr as u64, size as u64, kind.writes())
        {
            return None;
        }
        let b = Block::current();
        if b.threads < 2 {
            return None;
        }
        // Claimed by the caller ([`super::regions::claim_if_unclaimed`]).
        let held = super::regions::held_if_claimed()?;
        let counters = Counters::get();
        // SAFETY: the counters' key slots.
        let keys = unsafe { counters.base.add(Counters::KEYS) };
        let checked = Checked::new(b, kind, size, Space::Global, keys, loc);
        Some(BlockTable {
            base: rt.block_table as *mut u8,
            slot: held.device_slot(cta.smid) as usize,
            extension: held.extension_slot(rt, cta.smid) as usize,
            regions: 1 + held.extensions,
            table: GlobalTable {
                log2: rt.block_table_log2,
            },
            tag: GlobalTable::tag(b.stamp, checked.interval),
            checked,
        })
    }

    /// What the lanes of a warp run must agree on for its leader to
    /// record it as one: the thread has a lane state, and its collective
    /// count and release epoch (one word) and interval (the record's
    /// fields besides the thread).
    #[inline(always)]
    pub fn run_fields(&self) -> Option<(u32, u32)> {
        let c = &self.checked;
        c.known
            .then_some((c.count | u32::from(c.epoch) << 16, c.interval))
    }

    /// The access at `addr` against the calling thread's copies in flight
    /// and its CTA's bulk copies (a line run its leader recorded checks no
    /// word of this lane).
    #[inline(always)]
    pub fn check_in_flight(&self, addr: usize) {
        self.checked.check_in_flight(addr);
    }

    /// Checks the access at `addr` word by word, each of its lines split
    /// first (a word entry claimed on a line a run kept takes the run's
    /// records for its word).
    #[inline(always)]
    pub fn words(&self, addr: usize) {
        let last = Cell::new(u64::MAX);
        let snapshot = Cell::new(None);
        self.checked.words(addr, addr, |w| {
            let w = w as u64;
            // A word with an entry of this interval is on a split line (a
            // word entry is only made once its line is): a hot word (a
            // counter, a histogram's bins) skips its line's entry. A word
            // whose probes are all other words' goes unchecked at once.
            match self.existing(w) {
                Probe::Found(e) => return Some(self.records(e)),
                Probe::Full => {
                    self.overflow(1);
                    return None;
                }
                Probe::Free => {}
            }
            let line = w / u64::from(LINE_WORDS);
            if line != last.get() {
                last.set(line);
                snapshot.set(self.line(line).and_then(|l| l.split(arch::backoff)));
            }
            let (write, first) = snapshot.get().map_or(
                (BlockRecord::EMPTY, BlockRecord::EMPTY),
                |s: LineSnapshot| s.word((w % u64::from(LINE_WORDS)) as u32),
            );
            let e = self.entry(w, [write.0, first.0, 0]);
            if e.is_none() {
                self.overflow(1);
            }
            e.map(|(e, _)| self.records(e))
        });
    }

    /// The leader's half of a warp's whole-line run of plain accesses from
    /// its own thread on, `per` words a lane, starting at `addr` (the
    /// line's first byte): recorded in the line's entry (`Recorded`), or
    /// left to the lanes word by word (`PerWord`).
    ///
    /// A line whose entry's probes are all taken goes unchecked, counted,
    /// and is `Recorded` for the lanes: its words' probes would mostly be
    /// taken too, and 32 lanes probing them cost a long-running block,
    /// whose interval fills the table, more than everything else.
    ///
    /// A line this run is the first access of in the interval (a stream's
    /// every line) has its entry claimed already holding the run.
    #[inline(always)]
    pub fn line_run(&self, addr: usize, per: u32) -> LineStep {
        let line = (addr / WORD) as u64 / u64::from(LINE_WORDS);
        let c = &self.checked;
        let run = LineRun {
            record: BlockRecord::new(c.thread, false, 0xf, c.count, c.epoch, c.location()),
            per,
            write: c.kind.writes(),
        };
        match self.line_entry(line, run.fresh_entry()) {
            None => {
                self.overflow(u64::from(LINE_WORDS));
                LineStep::Recorded
            }
            Some((_, true)) => LineStep::Recorded,
            Some((l, false)) => l.run_access(run, arch::backoff),
        }
    }

    /// The records of the entry at byte offset `e` (from [`Self::entry`]
    /// or [`Self::existing`]).
    #[inline(always)]
    fn records(&self, e: usize) -> Records {
        // SAFETY: `e` is an entry of the slot: live device memory of the
        // runtime, aligned.
        let [r0, r1, r2] = [2, 3, 4].map(|j| unsafe { at::<BlockWord>(self.base, e + 8 * j) });
        WordRecords {
            write: r0,
            first: r1,
            second: r2,
        }
    }

    /// Whether `word` has an entry in the current interval (nothing is
    /// claimed): its probes up to the first that is not a live entry of
    /// the block's interval.
    #[inline(always)]
    fn existing(&self, word: u64) -> Probe {
        let key = self.key(word);
        let slot = self.region(word);
        for i in 0..GlobalTable::PROBES {
            let (e, t, k) = self.probe(slot, word, i);
            if t.load_acquire() != self.tag {
                return Probe::Free;
            }
            if k.load_relaxed() == key {
                return Probe::Found(e);
            }
        }
        Probe::Full
    }

    /// The region of the table that keeps the entry named `name`: the
    /// CTA's own, or one of the extension regions it holds.
    #[inline(always)]
    fn region(&self, name: u64) -> usize {
        match GlobalTable::region(name, self.regions) {
            0 => self.slot,
            r => self.extension + r as usize - 1,
        }
    }

    /// Probe `i` of the entry named `name` in region `slot`
    /// ([`region`](Self::region)): its byte offset, tag word and key word.
    #[inline(always)]
    fn probe(
        &self,
        slot: usize,
        name: u64,
        i: usize,
    ) -> (usize, &'static BlockWord, &'static BlockWord) {
        let e = self.table.entry(slot, name, i);
        // SAFETY: `slot` is the CTA's region (below `block_table_slots`)
        // or one of the extension regions it holds on its SM (after
        // them), and `entry` stays in the slot's entries: live device
        // memory of the runtime, aligned.
        let [t, k] = [0, 1].map(|j| unsafe { at::<BlockWord>(self.base, e + 8 * j) });
        (e, t, k)
    }

    /// Counts `words` words that found no entry in the table's header.
    #[inline(always)]
    fn overflow(&self, words: u64) {
        // SAFETY: the table's header starts with the overflow count.
        unsafe { at::<AtomicU64>(self.base, 0) }.fetch_add(words, Ordering::Relaxed);
    }

    /// The table key of `name`: it names the entry and the tag, so a stale
    /// entry of the same name from an earlier interval never matches.
    #[inline(always)]
    fn key(&self, name: u64) -> u64 {
        name ^ self.tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The entry of `line` in the current interval (claimed empty if it
    /// had none).
    #[inline(always)]
    fn line(&self, line: u64) -> Option<LineRecords<'static, BlockWord, BlockWord>> {
        self.line_entry(line, [0; 3]).map(|(l, _)| l)
    }

    /// The entry of `line` in the current interval, and whether this call
    /// claimed it (holding `fresh`: `[write, first, mode]`).
    #[inline(always)]
    fn line_entry(
        &self,
        line: u64,
        fresh: [u64; 3],
    ) -> Option<(LineRecords<'static, BlockWord, BlockWord>, bool)> {
        let (e, claimed) = self.entry(LINE_KEY | line, fresh)?;
        // SAFETY: as in `records`.
        let records = unsafe {
            LineRecords {
                write: at(self.base, e + 16),
                first: at(self.base, e + 24),
                mode: at(self.base, e + 32),
            }
        };
        Some((records, claimed))
    }

    /// The byte offset of the entry named (and hashed by) `name` (a word,
    /// or a line with [`LINE_KEY`]) in the current interval, and whether
    /// this call claimed it (its three record words set to `fresh`);
    /// `None` when its probes are all taken (the caller counts what goes
    /// unchecked).
    fn entry(&self, name: u64, fresh: [u64; 3]) -> Option<(usize, bool)> {
        let key = self.key(name);
        let slot = self.region(name);
        for i in 0..GlobalTable::PROBES {
            let (e, t, k) = self.probe(slot, name, i);
            let r = self.records(e);
            let claimed = Cell::new(false);
            // Word by word: an array's by-value iterator would live in
            // local memory.
            let clear = || {
                claimed.set(true);
                // The CTA writes its regions from here on: every later
                // write is to an entry it claimed in its interval.
                super::cta::mark_region_used();
                r.write.store_relaxed(fresh[0]);
                r.first.store_relaxed(fresh[1]);
                r.second.store_relaxed(fresh[2]);
            };
            // Only this CTA touches its slot's entries while it runs (the
            // slot's hand-over orders an earlier CTA's), so CTA-scope
            // ordering suffices ([`BlockWord`]).
            if claim_entry(t, k, self.tag, key, clear, arch::backoff) {
                return Some((e, claimed.get()));
            }
        }
        None
    }
}

/// What a word's probes found ([`BlockTable::existing`]).
enum Probe {
    /// Its entry, at this byte offset.
    Found(usize),
    /// A probe no live entry holds: the word can claim one.
    Free,
    /// Every probe holds another word's live entry: it can claim none
    /// this interval.
    Full,
}

/// A global-memory access by the calling thread that is not part of a
/// warp's whole-line run (an atomic, or a plain access the hooks did not
/// group), checked against the other threads of its block word by word.
#[inline(never)]
pub(super) fn global_access(
    addr: usize,
    size: usize,
    kind: AccessKind,
    loc: &'static Location<'static>,
) {
    super::regions::claim_if_unclaimed();
    if let Some(t) = BlockTable::current(addr, kind, size, loc) {
        t.words(addr);
    }
}
