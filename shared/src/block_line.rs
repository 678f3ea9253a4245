//! Line entries of the GPU's same-block table
//! ([`GlobalTable`](crate::block::GlobalTable)): one entry for a 128-byte
//! line that only one warp's whole-line accesses touched in the current
//! interval, in place of 32 word entries.
//!
//! A warp whose lanes tile a whole line in lane order (lane `k` touching
//! words `k * per .. (k + 1) * per`) gives every word of the line records
//! that differ only in their thread: word `j`'s is the first lane's with
//! `j / per` added to its thread. While the line's accesses in the
//! interval all come from the same lanes over the same words (a thread
//! reading and then writing its own elements, a loop over one tile), the
//! word records stay so: a thread never races with itself, so the
//! per-word protocol ([`WordRecords::access`](crate::block::WordRecords::access))
//! only ever replaces the write record and fills the first reader. The
//! line entry keeps those two records for the first lane and the layout
//! (the *run* mode); one compare-exchange of the warp's leader stands for
//! 32 lanes' probes, swaps and fences.
//!
//! Any other access to the line (another warp, a partial or scattered
//! access, an atomic) first *splits* the line: one compare-exchange marks
//! it split, keeping the run's records in the entry, after which every
//! access takes the per-word path, and a word entry of the line is
//! claimed holding the run's records for its word (its *snapshot*)
//! rather than none. A fresh line entry that a per-word access claims is
//! split at once, with no snapshot. Every access to a line looks at its
//! line entry before it claims a word entry, so no word entry of the line
//! exists in the interval while the line is in run mode, and the words
//! hold exactly what the per-word protocol would have given them:
//! verdicts do not change (`shared/tests/block_line.rs` drives both with
//! the same random accesses). Nothing is copied at a split, so a stencil
//! that reads its line whole and then shifted by a word pays for the
//! words it touches, not for all 32.

use core::sync::atomic::AtomicU64;

use crate::block::{reader_update, BlockRecord, TableWord};

/// Words per line.
pub const LINE_WORDS: u32 = 32;

/// Pauses a line access waits for its warp's update of the line; past
/// them it goes on word by word without the line's records (only
/// detection is lost; an update is a few stores, so this never runs out
/// in practice).
pub const LINE_WAITS: u32 = 1 << 12;

/// The mode word of a line entry: empty (claimed, untouched), split (with
/// or without a run's records to hand its words), or run mode (the run's
/// first thread and words per lane, and a busy bit while its warp updates
/// the records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineMode(pub u64);

impl LineMode {
    /// No access yet in the interval (a claimed entry's cleared word).
    pub const EMPTY: LineMode = LineMode(0);
    /// The word entries hold the line's records; no run came first.
    pub const SPLIT: LineMode = LineMode(1);
    const RUN: u64 = 1 << 63;
    const BUSY: u64 = 1 << 62;
    /// Split after a run: the entry's records are the run's, for the word
    /// entries claimed later.
    const SPLIT_RUN: u64 = 1 << 61;

    /// Run mode for runs whose first lane is thread `thread`, each lane
    /// touching `per` words.
    pub const fn run(thread: u32, per: u32) -> LineMode {
        LineMode(Self::RUN | (per as u64) << 16 | thread as u64)
    }

    /// The same run mode, locked by its warp while it updates the records.
    pub const fn busy(self) -> LineMode {
        LineMode(self.0 | Self::BUSY)
    }

    /// The split mode of a line in this run mode (its layout kept).
    pub const fn split_run(self) -> LineMode {
        LineMode(self.0 & !(Self::RUN | Self::BUSY) | Self::SPLIT_RUN)
    }

    /// True while its warp updates the run's records.
    pub const fn held(self) -> bool {
        self.0 & Self::BUSY != 0
    }

    /// True in run mode (held or not).
    pub const fn is_run(self) -> bool {
        self.0 & Self::RUN != 0
    }

    /// True once split (the word entries hold the line's records).
    pub const fn is_split(self) -> bool {
        self.0 == Self::SPLIT.0 || self.0 & Self::SPLIT_RUN != 0
    }

    /// Words per lane of a run mode, or of a split one that followed a run.
    pub const fn per(self) -> u32 {
        (self.0 >> 16 & 0xff) as u32
    }
}

/// A warp's whole-line access, as its first lane's record (every lane's
/// record but the thread is the same: the caller checks it) and the words
/// each lane touched (1 to 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRun {
    /// The first lane's record for the line's first word.
    pub record: BlockRecord,
    /// Words each lane touched.
    pub per: u32,
    /// True for plain writes, false for plain reads.
    pub write: bool,
}

impl LineRun {
    /// The run mode this run keeps its line in.
    pub fn mode(&self) -> LineMode {
        LineMode::run(self.record.thread().unwrap_or(0), self.per)
    }

    /// The words of an entry that this run is the first access of, in
    /// [`LineRecords`]' order `[write, first, mode]`: what
    /// [`LineRecords::run_access`] leaves in an empty entry. A thread
    /// that claims a line's entry for this run writes them as the claim's
    /// contents (no one sees the entry before the claim's release), and
    /// the run is recorded without a second compare-exchange.
    pub fn fresh_entry(&self) -> [u64; 3] {
        let (write, first) = if self.write {
            (self.record, BlockRecord::EMPTY)
        } else {
            let first = reader_update(BlockRecord::EMPTY, BlockRecord::EMPTY, self.record)
                .map_or(BlockRecord::EMPTY, |(_, new)| new);
            (BlockRecord::EMPTY, first)
        };
        [write.0, first.0, self.mode().0]
    }
}

/// The records of a run-mode line, which a word entry of the line is
/// claimed holding once the line is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSnapshot {
    /// The first lane's write record (empty if none).
    pub write: BlockRecord,
    /// The first lane's reader record (empty if none).
    pub first: BlockRecord,
    /// Words per lane.
    pub per: u32,
}

impl LineSnapshot {
    /// Word `j`'s records (write, first reader; the second reader is
    /// empty): the first lane's, made by lane `j / per`.
    pub fn word(&self, j: u32) -> (BlockRecord, BlockRecord) {
        let shift = |r: BlockRecord| {
            if r.thread().is_some() {
                BlockRecord(r.0 + u64::from(j / self.per.max(1)))
            } else {
                r
            }
        };
        (shift(self.write), shift(self.first))
    }
}

/// What a line access leaves to its lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineStep {
    /// The line entry recorded the whole run: nothing else to do.
    Recorded,
    /// The line is split (or its entry could not be waited for): each
    /// lane checks its own words.
    PerWord,
}

/// A line entry: its mode word and the first lane's write and reader
/// records.
///
/// `W` is the mode's word and `R` the records' (see
/// [`WordRecords`](crate::block::WordRecords)).
pub struct LineRecords<'a, W: TableWord, R: TableWord = AtomicU64> {
    /// The mode ([`LineMode`]).
    pub mode: &'a W,
    /// The run's write record (its first lane's).
    pub write: &'a R,
    /// The run's reader record (its first lane's).
    pub first: &'a R,
}

impl<W: TableWord, R: TableWord> LineRecords<'_, W, R> {
    /// A warp's whole-line access `run`: recorded in the entry when the
    /// line is empty or in this run's mode, else the line is split and
    /// the lanes go word by word. `pause` waits a moment.
    pub fn run_access(&self, run: LineRun, pause: impl Fn()) -> LineStep {
        let own = run.mode();
        let me = run.record;
        for _ in 0..LINE_WAITS {
            let m = LineMode(self.mode.load_acquire());
            if m.is_split() {
                return LineStep::PerWord;
            }
            if m.held() {
                pause();
                continue;
            }
            if m == LineMode::EMPTY {
                if self.mode.cas_acquire(m.0, own.busy().0) {
                    self.record(run, BlockRecord::EMPTY);
                    self.mode.store_release(own.0);
                    return LineStep::Recorded;
                }
                continue;
            }
            if m != own {
                // Another warp's run, or the same lanes over other words.
                if self.mode.cas_acquire(m.0, m.split_run().0) {
                    return LineStep::PerWord;
                }
                continue;
            }
            // This run's mode: the per-word protocol changes a record only
            // when it is not this access's already.
            let first = BlockRecord(self.first.load_relaxed());
            let unchanged = if run.write {
                self.write.load_relaxed() == me.0
            } else {
                reader_update(first, BlockRecord::EMPTY, me).is_none()
            };
            if unchanged {
                return LineStep::Recorded;
            }
            if self.mode.cas_acquire(m.0, own.busy().0) {
                self.record(run, first);
                self.mode.store_release(own.0);
                return LineStep::Recorded;
            }
        }
        LineStep::PerWord
    }

    /// Makes the line split before a word entry of it is claimed, and
    /// returns the run's records for that entry when a run came first
    /// (`None`: the entry starts empty).
    pub fn split(&self, pause: impl Fn()) -> Option<LineSnapshot> {
        for _ in 0..LINE_WAITS {
            let m = LineMode(self.mode.load_acquire());
            if m.is_split() {
                return self.snapshot(m);
            }
            if m.held() {
                pause();
                continue;
            }
            let split = if m.is_run() {
                m.split_run()
            } else {
                LineMode::SPLIT
            };
            if self.mode.cas_acquire(m.0, split.0) {
                return self.snapshot(split);
            }
        }
        None
    }

    /// The run's records, as the per-word protocol leaves them after
    /// `run` (the lanes are the records' threads: no race).
    fn record(&self, run: LineRun, first: BlockRecord) {
        if run.write {
            self.write.store_relaxed(run.record.0);
        } else if let Some((_, new)) = reader_update(first, BlockRecord::EMPTY, run.record) {
            self.first.store_relaxed(new.0);
        }
    }

    /// The records a split line `m` hands its word entries, if a run
    /// came first (they never change once split).
    fn snapshot(&self, m: LineMode) -> Option<LineSnapshot> {
        (m != LineMode::SPLIT).then(|| LineSnapshot {
            write: BlockRecord(self.write.load_relaxed()),
            first: BlockRecord(self.first.load_relaxed()),
            per: m.per(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry claimed holding a run's fresh words is the entry an empty
    /// one becomes after the run.
    #[test]
    fn a_fresh_entry_is_an_empty_entry_after_the_run() {
        for write in [false, true] {
            for per in [1, 2, 4] {
                let run = LineRun {
                    record: BlockRecord::new(96, false, 0xf, 2, 1, 0x1234),
                    per,
                    write,
                };
                let words = [0u64; 3].map(AtomicU64::new);
                let [w, f, m] = &words;
                let entry = LineRecords {
                    write: w,
                    first: f,
                    mode: m,
                };
                assert_eq!(entry.run_access(run, || {}), LineStep::Recorded);
                assert_eq!(words.map(|x| x.into_inner()), run.fresh_entry());
            }
        }
    }

    #[test]
    fn a_snapshot_gives_each_word_its_lanes_records() {
        let w = BlockRecord::new(64, false, 0xf, 3, 1, 0x1234);
        let s = LineSnapshot {
            write: w,
            first: BlockRecord::EMPTY,
            per: 2,
        };
        assert_eq!(s.word(0).0.thread(), Some(64));
        assert_eq!(s.word(1).0.thread(), Some(64));
        assert_eq!(s.word(31).0.thread(), Some(79));
        assert_eq!(s.word(31).0.count(), 3);
        assert_eq!(s.word(31).0.location(0x1000), 0x1234);
        assert_eq!(s.word(5).1, BlockRecord::EMPTY);
    }

    #[test]
    fn run_modes_name_the_lanes_and_layout() {
        let m = LineMode::run(96, 4);
        assert!(m.is_run() && !m.held() && m.busy().held() && !m.is_split());
        assert_eq!(m.per(), 4);
        assert_ne!(LineMode::run(96, 2), m);
        let s = m.busy().split_run();
        assert!(s.is_split() && !s.is_run() && !s.held() && s.per() == 4);
        assert!(LineMode::SPLIT.is_split() && !LineMode::EMPTY.is_split());
    }
}
