//! Reports and the side table: the device half of
//! docs/src/design/reports.md.
//!
//! After every checked access a thread notes who it was in the side table
//! (per word and sanitizer thread, its last write and its last read). When
//! the engine finds a race, the runtime copies the side entry of the
//! earlier access next to the engine's record into the host-mapped report
//! buffer; the host turns both into a two-sided report. Pure atomics over
//! memory, so the host build tests it.
//!
//! A note is on every checked access's path, a lookup only on a race's:
//! notes are relaxed stores (no fence: a release store costs a GPU-wide
//! `MEMBAR` and an `ERRBAR` per access), and a report that does not find
//! its earlier access at once looks again for a few microseconds
//! ([`SIDE_ENTRY_POLLS`]), so a note still on its way from another SM is
//! found. A note lost past that only leaves the report without its
//! earlier half; a lookup never waits longer and never takes an entry
//! whose key (word, thread, epoch) is not the race's.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::arch::imp as arch;
use vigil_shared::abi::{RaceReport, ReportBufferHeader};
use vigil_shared::gpu::{
    side_set, unpack_access, GpuReportRecord, GpuRuntime, SideEntry, SIDE_WAYS,
};

/// How often a report looks for the earlier access's side entry, with
/// [`arch::pause_for_note`] between two looks (about 16 µs in all on a
/// GPU): the note is a relaxed store that may still be in flight from
/// another SM when the race is found.
pub const SIDE_ENTRY_POLLS: u32 = 32;

/// The side table of a runtime and a context's report buffer.
pub struct Reporter<'r> {
    side: &'r [AtomicU64],
    side_log2: u32,
    reports: &'r [AtomicU32],
}

impl<'r> Reporter<'r> {
    /// The reporter of `rt`'s side table and the report buffer at
    /// `reports` (a context's, named by its streams' clocks).
    ///
    /// # Safety
    /// `rt.side_table` must hold `2^side_log2` entries (or be 0) and
    /// `reports` a [`ReportBufferHeader`] and `rt.report_capacity` records
    /// (or be 0), live for `'r`.
    #[inline(always)]
    pub unsafe fn new(rt: &'r GpuRuntime, reports: u64) -> Self {
        let side_len = (1usize << rt.side_log2) * SideEntry::U64S;
        let report_len =
            ReportBufferHeader::WORDS + rt.report_capacity as usize * GpuReportRecord::WORDS;
        // SAFETY: the caller guarantees both regions (or 0 for none).
        unsafe {
            Reporter {
                side: words_at(rt.side_table, side_len),
                side_log2: rt.side_log2,
                reports: words_at(reports, report_len),
            }
        }
    }

    /// Way `way` of the set of `tid`'s write (`write`) or read of `key`
    /// (a word, or a line's [`WordRun::key`]) in `epoch`.
    #[inline(always)]
    fn way(&self, key: u64, tid: u32, epoch: u32, write: bool, way: u64) -> Option<&'r Way> {
        let at =
            (side_set(key, tid, epoch, write, self.side_log2) + way) as usize * SideEntry::U64S;
        self.side.get(at..at + SideEntry::U64S)?.try_into().ok()
    }

    /// Notes an access to words `first..=last` by `e.tid` in `e.epoch`,
    /// one entry per word (see [`Reporter::place`]; `before(t, e)`: thread
    /// `t`'s accesses in epoch `e` happen before this one).
    #[inline(always)]
    pub fn note(
        &self,
        first: u64,
        last: u64,
        write: bool,
        e: SideEntry,
        before: impl Fn(u32, u32) -> bool,
    ) {
        for word in first..=last {
            let new = SideEntry {
                word: word as u32,
                ..e
            };
            let same = |held: &SideEntry| held.thread & RUN_TAG == 0 && held.word == word as u32;
            self.place(word, write, new, same, &before);
        }
    }

    /// Notes a warp's run of words (`e.thread` and `e.word` are replaced
    /// by the run's): one entry in the set of the run's line, where
    /// [`Reporter::prior_of`] finds it for each word of the run.
    #[inline(always)]
    pub fn note_run(
        &self,
        run: &WordRun,
        write: bool,
        e: SideEntry,
        before: impl Fn(u32, u32) -> bool,
    ) {
        let new = SideEntry {
            word: run.first as u32,
            thread: run.packed_thread(),
            ..e
        };
        let same = |held: &SideEntry| held.thread == new.thread && held.word == new.word;
        self.place(run.key(), write, new, same, &before);
    }

    /// Stores `new` into the set of `key`: into the way that holds an
    /// access of the same thread and epoch (`same`) already, unless it is
    /// this very one (then nothing is stored); else the first empty way or
    /// one of another launch whose access happens before this one
    /// (`before`: it can race with nothing this thread does later, and a
    /// launch still running on another stream keeps its notes, which its
    /// races with this launch need), else the way the key picks. A way is
    /// claimed by turning its location word into [`CLAIMED`] with a
    /// compare-exchange (two blocks noting into one set at once take
    /// different ways) and published by storing the location last, with
    /// the way's rewrite count ([`REWRITES`]) one up: a note that read a
    /// way before another took and rewrote it cannot claim it then, even
    /// when both notes are of one site.
    /// Readers skip claimed ways and check the key, so a half-written
    /// entry is only a miss that [`Reporter::prior_of`] polls past.
    #[inline(always)]
    fn place(
        &self,
        key: u64,
        write: bool,
        new: SideEntry,
        same: impl Fn(&SideEntry) -> bool,
        before: &impl Fn(u32, u32) -> bool,
    ) {
        let mut raw_new: [u64; SideEntry::U64S] = bytemuck::cast(new);
        // The way taken when every way holds another access of this
        // launch: the key's (found in the loop: an array indexed by a
        // run-time value would live in local memory).
        let mut last_resort = None;
        for way in 0..SIDE_WAYS {
            // One way at a time, relaxed: the first is usually the one
            // taken (one 32-byte sector, one round trip), and only the
            // choice of a way depends on what it holds; a way is claimed
            // by a compare-exchange on its location word.
            let Some(slot) = self.way(key, new.tid, new.epoch, write, way) else {
                return;
            };
            let raw = load_relaxed(slot);
            let held: SideEntry = bytemuck::cast(raw);
            let complete = held.location != 0 && held.location != CLAIMED;
            if complete && held.tid == new.tid && held.epoch == new.epoch && same(&held) {
                // Another access of this thread's epoch: the newest names
                // it (as the CPU backend's table does), rewritten under a
                // claim like a free way; this very access again (a loop
                // on one word): nothing to store.
                // Word by word: a slice comparison is a call of `memcmp`,
                // and any call in the access path costs every access.
                let again = raw[1] == raw_new[1]
                    && raw[2] == raw_new[2]
                    && raw[3] == raw_new[3]
                    && site(raw[0]) == new.location;
                if !again && claim(slot, raw[0]) {
                    raw_new[0] = rewritten(raw[0], new.location);
                    store_entry(slot, raw_new);
                }
                return;
            }
            let free = held.location == 0
                || (complete && held.launch != new.launch && before(held.tid, held.epoch));
            if free && claim(slot, raw[0]) {
                raw_new[0] = rewritten(raw[0], new.location);
                store_entry(slot, raw_new);
                return;
            }
            if complete && way == key % SIDE_WAYS {
                last_resort = Some((slot, raw[0]));
            }
        }
        if let Some((slot, location)) = last_resort {
            if claim(slot, location) {
                raw_new[0] = rewritten(location, new.location);
                store_entry(slot, raw_new);
            }
        }
    }

    /// The side entry of the earlier access `r` names, if the table still
    /// holds it (word, thread and epoch match: an entry an earlier launch
    /// left for a reused address has an older epoch): the word's own
    /// entry, or the run of its line that covers it, as the entry of the
    /// run's lane that touched the word.
    pub fn prior_of(&self, r: &RaceReport, first: u64, last: u64) -> SideEntry {
        let write = unpack_access(r.prior_access).0.writes();
        for poll in 0..SIDE_ENTRY_POLLS {
            if poll > 0 {
                arch::pause_for_note();
            }
            for word in first..=last {
                for key in [word, WordRun::key_of(word)] {
                    for way in 0..SIDE_WAYS {
                        let Some(slot) = self.way(key, r.prior_tid, r.prior_epoch, write, way)
                        else {
                            return SideEntry::default();
                        };
                        let Some(e) = load_entry(slot) else {
                            continue;
                        };
                        if e.tid != r.prior_tid || e.epoch != r.prior_epoch {
                            continue;
                        }
                        if let Some(found) = WordRun::entry_of_word(&e, word) {
                            return found;
                        }
                    }
                }
            }
        }
        SideEntry::default()
    }

    /// True when the report buffer has no room left: a report then only
    /// counts (see [`Reporter::push`]), and need not look up its earlier
    /// access (a racy kernel makes millions of reports).
    pub fn full(&self) -> bool {
        match self.reports {
            [next, cap, ..] => next.load(Ordering::Relaxed) >= cap.load(Ordering::Relaxed),
            _ => true,
        }
    }

    /// Appends a record; false when the buffer was full (the claim is
    /// still counted, so the host knows how many were dropped).
    pub fn push(&self, rec: &GpuReportRecord) -> bool {
        let w = self.reports;
        if w.len() < ReportBufferHeader::WORDS {
            return false;
        }
        let cap = w[1].load(Ordering::Relaxed) as usize;
        let i = w[0].fetch_add(1, Ordering::Relaxed) as usize;
        let at = ReportBufferHeader::WORDS + i * GpuReportRecord::WORDS;
        if i >= cap || at + GpuReportRecord::WORDS > w.len() {
            return false;
        }
        let src: &[u32; GpuReportRecord::WORDS] = bytemuck::cast_ref(rec);
        for (d, s) in w[at..].iter().zip(src) {
            d.store(*s, Ordering::Relaxed);
        }
        true
    }
}

/// The location word of a side-table way being written by the note that
/// claimed it (no `Location` lives at the top of the address space).
const CLAIMED: u64 = u64::MAX;

/// Bits 48..56 of a way's location word: how often the way was written
/// (mod 256). Every note of one access site has the same location, so
/// without them a note that read a way free could claim it after another
/// note had claimed and filled it (the word read back the same) and
/// overwrite that note: measured on an H100, about one run in ten of
/// 1,024 blocks' off-by-one 16-byte tiles lost a race's earlier half so.
/// Locations are device addresses below 2^48 or host-site tags
/// ([`HOST_SITE_TAG`]: bit 63 and a small index).
///
/// [`HOST_SITE_TAG`]: vigil_shared::gpu::HOST_SITE_TAG
const REWRITES: u64 = 0xff << 48;

/// The site a (complete) way's location word names.
#[inline(always)]
fn site(location_word: u64) -> u64 {
    location_word & !REWRITES
}

/// The location word of a note of `site` written into a way whose word
/// was `held`: its rewrite count one up.
#[inline(always)]
fn rewritten(held: u64, site: u64) -> u64 {
    let count = (held & REWRITES).wrapping_add(1 << 48) & REWRITES;
    site | count
}

/// Tag bit of a run entry's `thread` field (block threads are < 2^16).
const RUN_TAG: u32 = 1 << 31;

/// Words of one line of the side table's run entries: the shadow's line
/// ([`vigil_shared::line`]), so a run that takes a line's summary is noted
/// as one entry too.
pub const RUN_LINE_WORDS: u64 = vigil_shared::line::LINE_WORDS;

/// A warp's run of consecutive words, noted as one side entry: lanes
/// `thread..thread + lanes` of one access site and kind each touched
/// `words_per_lane` consecutive words, in lane order from word `first`
/// on, all within one [`RUN_LINE_WORDS`] line. The lanes of a CTA are one
/// sanitizer thread, so the entry is exact for each word: its lane is
/// `thread + (word - first) / words_per_lane`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordRun {
    /// First word.
    pub first: u64,
    /// Linear block thread index of the lane that touched `first`.
    pub thread: u32,
    /// Lanes in the run (at most 32).
    pub lanes: u32,
    /// Words each lane touched (1 to 4).
    pub words_per_lane: u32,
}

impl WordRun {
    /// The run of a warp's lanes as each of them sees it: this lane's
    /// `thread` and `(first, last)` words, and the same for the group's
    /// lowest lane (`leader`), `lanes` lanes in the group, `offset` of
    /// this lane from the leader. `None` unless the group's accesses tile
    /// one line in lane order (every lane checks its own part; the group
    /// agrees through a vote).
    #[inline(always)]
    pub fn of_lane(
        words: (u64, u64),
        thread: u32,
        leader: (u64, u32),
        offset: u32,
        lanes: u32,
    ) -> Option<WordRun> {
        let per = (words.1 - words.0 + 1) as u32;
        let run = WordRun {
            first: leader.0,
            thread: leader.1,
            lanes,
            words_per_lane: per,
        };
        let fits = per <= 4
            && lanes <= 32
            && thread.wrapping_sub(leader.1) == offset
            && leader.1 < 1 << 16
            && words.0.wrapping_sub(leader.0) == u64::from(offset * per)
            && leader.0 / RUN_LINE_WORDS
                == (leader.0 + u64::from(lanes * per) - 1) / RUN_LINE_WORDS;
        fits.then_some(run)
    }

    /// The run covers every word of its line: the lanes' accesses are one
    /// whole-line access ([`vigil_shared::engine::Engine::access_line`]).
    #[inline(always)]
    pub fn whole_line(&self) -> bool {
        self.first == vigil_shared::line::head_word(self.first)
            && u64::from(self.lanes * self.words_per_lane) == RUN_LINE_WORDS
    }

    /// The side-table key of the runs of `word`'s line (apart from every
    /// word key: words are below 2^62).
    #[inline(always)]
    pub fn key_of(word: u64) -> u64 {
        (1 << 63) | (word / RUN_LINE_WORDS)
    }

    /// This run's side-table key.
    #[inline(always)]
    pub fn key(&self) -> u64 {
        Self::key_of(self.first)
    }

    /// The entry's `thread` field: tag, words per lane, lanes, thread.
    #[inline(always)]
    fn packed_thread(&self) -> u32 {
        RUN_TAG | self.words_per_lane << 24 | self.lanes << 16 | self.thread
    }

    /// What entry `e` (key already matched) says about `word`: a word
    /// entry for it as it is; a run entry covering it as the entry of the
    /// lane that touched it; else `None`.
    #[inline(always)]
    fn entry_of_word(e: &SideEntry, word: u64) -> Option<SideEntry> {
        if e.thread & RUN_TAG == 0 {
            return (e.word == word as u32).then_some(*e);
        }
        let per = (e.thread >> 24 & 0x7f).max(1);
        let lanes = e.thread >> 16 & 0xff;
        let k = (word as u32).wrapping_sub(e.word);
        (k < lanes * per).then(|| SideEntry {
            word: word as u32,
            thread: (e.thread & 0xffff) + k / per,
            ..*e
        })
    }
}

/// One way of the side table: an entry's words.
type Way = [AtomicU64; SideEntry::U64S];

/// Claims a way whose location word holds `held` for a note.
#[inline(always)]
fn claim(slot: &Way, held: u64) -> bool {
    slot[0]
        .compare_exchange(held, CLAIMED, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

/// Reads a complete entry (a report's cold path): its location word,
/// the rest, and the location word again, with acquire fences between,
/// so that a way claimed or rewritten while it is read is a miss (`None`),
/// as is an empty or claimed one.
fn load_entry(slot: &Way) -> Option<SideEntry> {
    let location = slot[0].load(Ordering::Relaxed);
    if location == 0 || location == CLAIMED {
        return None;
    }
    core::sync::atomic::fence(Ordering::Acquire);
    let raw = load_relaxed(slot);
    core::sync::atomic::fence(Ordering::Acquire);
    let unchanged = raw[0] == location && slot[0].load(Ordering::Relaxed) == location;
    unchanged.then(|| SideEntry {
        location: site(location),
        ..bytemuck::cast(raw)
    })
}

/// Reads an entry with relaxed loads only (a note choosing its way).
#[inline(always)]
fn load_relaxed(slot: &Way) -> [u64; SideEntry::U64S] {
    core::array::from_fn(|i| slot[i].load(Ordering::Relaxed))
}

/// Writes an entry into a way claimed for it, its location word last,
/// all relaxed: no fence on the access path. Until the location lands,
/// readers see the way claimed; one that sees the location before the
/// rest checks the key (word, thread, epoch) the rest holds, which a
/// claimed way's earlier contents (empty, another launch's: epochs are
/// never reused, or another key's) cannot match, and polls again. (This leans on a thread's
/// stores to one 32-byte sector reaching L2 in order, as the claim's
/// compare-exchange and the stores after it do; the PTX model alone does
/// not promise that, and the release store that did cost every access a
/// GPU-wide fence.)
#[inline(always)]
fn store_entry(slot: &Way, v: [u64; SideEntry::U64S]) {
    // Over slices: an array's by-value iterator would live in local memory.
    for (w, x) in slot[1..].iter().zip(&v[1..]) {
        w.store(*x, Ordering::Relaxed);
    }
    slot[0].store(v[0], Ordering::Relaxed);
}

/// `len` atomics at device address `addr`; none for address 0.
///
/// # Safety
/// A non-zero `addr` must be valid for `len` elements for `'r`.
#[inline(always)]
unsafe fn words_at<'r, A>(addr: u64, len: usize) -> &'r [A] {
    if addr == 0 {
        return &[];
    }
    // SAFETY: forwarded from the caller; atomics alias freely.
    unsafe { core::slice::from_raw_parts(addr as *const A, len) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::AccessKind;

    /// Every earlier access happens before the note (launches one after
    /// another on one stream).
    fn done(_tid: u32, _epoch: u32) -> bool {
        true
    }

    fn words32(n: usize) -> Vec<AtomicU32> {
        (0..n).map(|_| AtomicU32::new(0)).collect()
    }

    #[test]
    fn records_past_capacity_are_counted_not_written() {
        let buf = words32(ReportBufferHeader::WORDS + 2 * GpuReportRecord::WORDS + 5);
        buf[1].store(2, Ordering::Relaxed);
        let rt = GpuRuntime {
            report_capacity: 2,
            ..GpuRuntime::default()
        };
        // SAFETY: `buf` holds a header and two records.
        let rep = unsafe { Reporter::new(&rt, buf.as_ptr() as u64) };
        let rec = |k| GpuReportRecord {
            report: RaceReport {
                kind: k,
                ..RaceReport::default()
            },
            ..GpuReportRecord::default()
        };
        assert!(!rep.full());
        assert!(rep.push(&rec(1)));
        assert!(rep.push(&rec(2)));
        assert!(rep.full());
        assert!(!rep.push(&rec(3)));
        assert_eq!(buf[0].load(Ordering::Relaxed), 3);
        let tail = ReportBufferHeader::WORDS + 2 * GpuReportRecord::WORDS;
        assert!(buf[tail..].iter().all(|w| w.load(Ordering::Relaxed) == 0));
        assert_eq!(
            buf[ReportBufferHeader::WORDS + GpuReportRecord::WORDS].load(Ordering::Relaxed),
            2
        );
        // A stream without a buffer: every report is lost, none is written.
        // SAFETY: no buffer (0).
        let none = unsafe { Reporter::new(&rt, 0) };
        assert!(none.full());
        assert!(!none.push(&rec(4)));
    }

    /// A zeroed side table of `2^log2` entries and the runtime naming it.
    struct SideTable {
        _words: Vec<AtomicU64>,
        rt: GpuRuntime,
    }

    impl SideTable {
        fn new(log2: u32) -> SideTable {
            let words: Vec<AtomicU64> = (0..(1usize << log2) * SideEntry::U64S)
                .map(|_| AtomicU64::new(0))
                .collect();
            // The vector's buffer does not move when the vector does.
            let rt = GpuRuntime {
                side_table: words.as_ptr() as u64,
                side_log2: log2,
                ..GpuRuntime::default()
            };
            SideTable { _words: words, rt }
        }

        fn reporter(&self) -> Reporter<'_> {
            // SAFETY: the table holds `2^side_log2` entries for as long as
            // the reporter borrows `self`.
            unsafe { Reporter::new(&self.rt, 0) }
        }
    }

    #[test]
    fn a_race_finds_its_earlier_access_in_the_side_table() {
        let table = SideTable::new(6);
        let rep = table.reporter();
        let e = |tid, block| SideEntry {
            location: 0x1000,
            tid,
            block,
            ..SideEntry::default()
        };
        rep.note(10, 11, true, e(3, 7), done);
        rep.note(10, 10, false, e(4, 8), done);
        let race = |prior_tid, kind: AccessKind| RaceReport {
            prior_tid,
            prior_access: kind as u32,
            ..RaceReport::default()
        };
        let w = rep.prior_of(&race(3, AccessKind::Write), 11, 11);
        assert_eq!((w.block, w.word), (7, 11));
        let r = rep.prior_of(&race(4, AccessKind::Read), 10, 10);
        assert_eq!(r.block, 8);
        // A second write of word 10 by the same thread and epoch, at
        // another site: the report names the newer one.
        rep.note(
            10,
            10,
            true,
            SideEntry {
                location: 0x1800,
                ..e(3, 7)
            },
            done,
        );
        let w = rep.prior_of(&race(3, AccessKind::Write), 10, 10);
        assert_eq!((w.location, w.word), (0x1800, 10));
        // A thread the table does not hold for the word: no guess.
        assert_eq!(
            rep.prior_of(&race(9, AccessKind::Write), 10, 11),
            SideEntry::default()
        );
    }

    #[test]
    fn another_blocks_access_survives_the_word_owners_own() {
        let table = SideTable::new(16);
        let rep = table.reporter();
        let at = |tid, block| SideEntry {
            location: 0x2000 + u64::from(tid),
            tid,
            block,
            ..SideEntry::default()
        };
        // In-place stencil: block 1 reads word 5 (its neighbour's), then
        // block 0 reads its own word 5; block 0's write races with block
        // 1's read, which the report must still name.
        rep.note(5, 5, false, at(1, 1), done);
        rep.note(5, 5, false, at(0, 0), done);
        // A hot atomic word: one u32 atomic, then 200 other threads' u64s.
        rep.note(9, 9, true, at(700, 3), done);
        for tid in 0..200 {
            rep.note(9, 10, true, at(1000 + tid, 4), done);
        }
        let race = |prior_tid, kind: AccessKind| RaceReport {
            prior_tid,
            prior_access: kind as u32,
            ..RaceReport::default()
        };
        let p = rep.prior_of(&race(1, AccessKind::Read), 5, 5);
        assert_eq!((p.tid, p.block, p.word), (1, 1, 5));
        let p = rep.prior_of(&race(700, AccessKind::Write), 9, 10);
        assert_eq!((p.tid, p.block, p.word), (700, 3, 9));
        // The slot's next block (a later epoch) reads word 5 too: the
        // report of the first block's read still finds that read.
        rep.note(
            5,
            5,
            false,
            SideEntry {
                epoch: 1,
                ..at(1, 6)
            },
            done,
        );
        let p = rep.prior_of(&race(1, AccessKind::Read), 5, 5);
        assert_eq!((p.block, p.epoch), (1, 0));
    }

    /// Launch 6 on another stream notes words while launch 5 still runs
    /// (not ordered before it), into a table small enough that their sets
    /// meet: each of launch 5's notes is still found. Had launch 6 been
    /// ordered after launch 5 (one stream), its notes would take launch
    /// 5's ways, as the first ones free.
    #[test]
    fn a_running_launchs_notes_survive_another_streams() {
        let (first, second) = (0..200u64, 1000..1200u64);
        let noted = |other_stream: bool| {
            let table = SideTable::new(14);
            let rep = table.reporter();
            let at = |word: u64, tid: u32, launch: u32| SideEntry {
                location: 0x5000 + word,
                tid,
                epoch: 1,
                launch,
                ..SideEntry::default()
            };
            for w in first.clone() {
                rep.note(w, w, true, at(w, (w % 100) as u32, 5), done);
            }
            for w in second.clone() {
                let e = at(w, 100 + (w % 100) as u32, 6);
                rep.note(w, w, true, e, |_, _| !other_stream);
            }
            first
                .clone()
                .filter(|&w| {
                    let race = RaceReport {
                        prior_tid: (w % 100) as u32,
                        prior_epoch: 1,
                        prior_access: AccessKind::Write as u32,
                        ..RaceReport::default()
                    };
                    rep.prior_of(&race, w, w).location == 0x5000 + w
                })
                .count()
        };
        assert_eq!(noted(true), first.clone().count());
        assert!(noted(false) < first.count(), "the sets never met");
    }

    #[test]
    fn every_block_of_a_racy_kernel_finds_its_earlier_access() {
        // A last-block reduction without release: 1,024 blocks each write
        // their partial (and note it), 2,000 other accesses note after
        // them, then the last block's 1,024 racing reads all look theirs up.
        let table = SideTable::new(16);
        let rep = table.reporter();
        let at = |tid: u32, epoch: u32, block: u32| SideEntry {
            location: 0x3000,
            tid,
            epoch,
            block,
            launch: 5,
            ..SideEntry::default()
        };
        for b in 0..1024u32 {
            rep.note(
                u64::from(b),
                u64::from(b),
                true,
                at(b % 500, 1 + b / 500, b),
                done,
            );
        }
        for k in 0..2000u32 {
            rep.note(
                5000 + u64::from(k),
                5000 + u64::from(k),
                k % 2 == 0,
                at(k % 500, 9, 0),
                done,
            );
        }
        for b in 0..1024u32 {
            let race = RaceReport {
                prior_tid: b % 500,
                prior_epoch: 1 + b / 500,
                prior_access: AccessKind::Write as u32,
                ..RaceReport::default()
            };
            let p = rep.prior_of(&race, u64::from(b), u64::from(b));
            assert_eq!((p.location, p.block), (0x3000, b), "block {b}'s write lost");
        }
    }

    /// Four blocks (sanitizer threads 0 to 3, blocks 1 to 4) note a write
    /// of word 7 at `epoch` in launch `launch` at the same moment; returns
    /// what a race against each one's write finds.
    fn four_blocks_note_at_once(rep: &Reporter<'_>, epoch: u32, launch: u32) -> Vec<SideEntry> {
        let start = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for tid in 0..4u32 {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let e = SideEntry {
                        location: 0x4000,
                        tid,
                        epoch,
                        block: tid + 1,
                        launch,
                        ..SideEntry::default()
                    };
                    rep.note(7, 7, true, e, done);
                });
            }
        });
        (0..4u32)
            .map(|tid| {
                let race = RaceReport {
                    prior_tid: tid,
                    prior_epoch: epoch,
                    prior_access: AccessKind::Write as u32,
                    ..RaceReport::default()
                };
                rep.prior_of(&race, 7, 7)
            })
            .collect()
    }

    #[test]
    fn blocks_noting_into_one_set_at_once_take_different_ways() {
        // A table of one set pair: every key lands in the same set of 4
        // ways. Four blocks note at the same moment; all four are found.
        for round in 0..200u32 {
            let table = SideTable::new(3);
            let found = four_blocks_note_at_once(&table.reporter(), round, round);
            for (tid, e) in (0..).zip(&found) {
                assert_eq!(e.block, tid + 1, "round {round}");
            }
        }
    }

    #[test]
    fn blocks_taking_ways_an_earlier_launch_left_at_the_same_site_keep_every_note() {
        // As above, but every way holds an earlier launch's note of the
        // same site (the same location word: a kernel launched again, or
        // another width of one generic kernel). Two blocks that read one
        // such way free must not both take it: the second's claim of what
        // it read must fail once the first has written its own note there.
        let mut lost = 0;
        for _ in 0..2000 {
            let table = SideTable::new(3);
            let rep = table.reporter();
            for tid in 10..14u32 {
                let old = SideEntry {
                    location: 0x4000,
                    tid,
                    epoch: 1,
                    launch: 1,
                    ..SideEntry::default()
                };
                rep.note(7, 7, true, old, done);
            }
            for (tid, e) in (0..).zip(four_blocks_note_at_once(&rep, 2, 2)) {
                if e.block != tid + 1 {
                    lost += 1;
                } else {
                    assert_eq!(e.location, 0x4000, "the site, without the way's count");
                }
            }
        }
        assert_eq!(lost, 0, "notes lost to a way taken twice");
    }

    #[test]
    fn a_report_finds_notes_still_in_flight_and_never_a_mix_of_two() {
        // One thread notes 2,000 writes (each its own sanitizer thread and
        // epoch) while another looks each one up as soon as it can, often
        // before the note landed: the lookups poll until it does, and what
        // they find is exactly that note, never fields of two.
        let table = SideTable::new(16);
        let rep = table.reporter();
        let n = 2000u32;
        let note = |i: u32| SideEntry {
            location: 0x6000 + u64::from(i) * 8,
            word: 3 * i,
            tid: i % 700,
            epoch: 1 + i / 700,
            block: 10_000 + i,
            thread: i % 256,
            launch: 4,
        };
        let start = std::sync::Barrier::new(2);
        let lost = std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                for i in 0..n {
                    let e = note(i);
                    rep.note(u64::from(e.word), u64::from(e.word), true, e, done);
                }
            });
            start.wait();
            let mut lost = 0;
            for i in 0..n {
                let e = note(i);
                let race = RaceReport {
                    prior_tid: e.tid,
                    prior_epoch: e.epoch,
                    prior_access: AccessKind::Write as u32,
                    ..RaceReport::default()
                };
                let found = rep.prior_of(&race, u64::from(e.word), u64::from(e.word));
                if found == SideEntry::default() {
                    lost += 1;
                } else {
                    assert_eq!(found, e, "note {i}");
                }
            }
            lost
        });
        // A note lost past the polls is one whose writer was descheduled
        // that long: rare.
        assert!(lost <= n / 50, "{lost} of {n} notes lost");
    }

    /// Lanes `0..lanes` of a warp (block threads `base..`), each touching
    /// `per` words from `first + lane * per`: the run every lane computes.
    fn warp_run(first: u64, base: u32, lanes: u32, per: u32) -> Option<WordRun> {
        let mut runs = (0..lanes).map(|lane| {
            let w = first + u64::from(lane * per);
            WordRun::of_lane(
                (w, w + u64::from(per) - 1),
                base + lane,
                (first, base),
                lane,
                lanes,
            )
        });
        let run = runs.next().flatten();
        // The group agrees (the hook's vote): all lanes or none.
        runs.all(|r| r == run).then_some(run).flatten()
    }

    #[test]
    fn a_warps_run_names_the_lane_of_each_word() {
        // Warps of every width and words per lane, at every offset of a
        // line, with some words also noted on their own by other threads:
        // each word of a run finds the lane that touched it, a word just
        // outside finds nothing of the run's thread.
        let table = SideTable::new(16);
        let rep = table.reporter();
        let mut runs = 0;
        for (k, per) in [1u32, 2, 4].into_iter().enumerate() {
            for lanes in 2..=32u32 {
                for offset in [0u64, 1, 3, 8] {
                    let tid = 100 + runs;
                    let first = 4096 * (1 + runs as u64) + offset;
                    let base = 64 * k as u32 + lanes;
                    let Some(run) = warp_run(first, base, lanes, per) else {
                        // Only runs leaving the line are refused.
                        assert!(offset + u64::from(lanes * per) > RUN_LINE_WORDS);
                        continue;
                    };
                    runs += 1;
                    let e = SideEntry {
                        location: 0x5000,
                        tid,
                        block: 9,
                        launch: 1,
                        ..SideEntry::default()
                    };
                    rep.note_run(&run, true, e, done);
                    rep.note(first, first, true, SideEntry { tid: tid + 1, ..e }, done);
                    let race = RaceReport {
                        prior_tid: tid,
                        prior_access: AccessKind::Write as u32,
                        ..RaceReport::default()
                    };
                    let n = u64::from(lanes * per);
                    for w in first..first + n {
                        let p = rep.prior_of(&race, w, w);
                        let lane = ((w - first) / u64::from(per)) as u32;
                        assert_eq!((p.word, p.thread, p.block), (w as u32, base + lane, 9));
                    }
                    assert_eq!(
                        rep.prior_of(&race, first + n, first + n),
                        SideEntry::default()
                    );
                    let read = RaceReport {
                        prior_access: AccessKind::Read as u32,
                        ..race
                    };
                    assert_eq!(rep.prior_of(&read, first, first), SideEntry::default());
                }
            }
        }
        assert!(runs > 150, "{runs}");
    }

    #[test]
    fn lanes_that_do_not_tile_a_line_in_order_make_no_run() {
        // Lane 1 touches word 5 instead of 4 (a gap), or lane order is
        // not thread order, or words leave the line: no run.
        let gap = WordRun::of_lane((5, 5), 11, (3, 10), 1, 2);
        assert_eq!(gap, None);
        let swapped = WordRun::of_lane((4, 4), 12, (3, 10), 1, 2);
        assert_eq!(swapped, None);
        assert_eq!(warp_run(30, 0, 4, 1), None);
        assert_eq!(
            warp_run(28, 0, 4, 1),
            Some(WordRun {
                first: 28,
                thread: 0,
                lanes: 4,
                words_per_lane: 1
            })
        );
    }
}
