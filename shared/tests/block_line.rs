//! Line entries of the same-block table (`vigil_shared::block_line`)
//! against the per-word records alone: random sequences of one block's
//! accesses to one 128-byte line (warps' whole-line runs of 1, 2 or 4
//! words a lane, single threads' plain and atomic accesses, warp
//! collectives, new intervals) run through both, one at a time. Every
//! access must report the same races with the same records, and after
//! every step the line's words must hold the same records (a run-mode
//! line's, and a split line's words whose entries are not claimed yet,
//! as the run's snapshot gives them).

use core::sync::atomic::{AtomicU64, Ordering};
use proptest::prelude::*;
use vigil_shared::block::{BlockRecord, LaneSync, WordRecords};
use vigil_shared::block_line::{
    LineMode, LineRecords, LineRun, LineSnapshot, LineStep, LINE_WORDS,
};
use vigil_shared::AccessKind;

/// The largest block (32 warps): the lane states cover every thread a
/// program may name.
const MAX_THREADS: u32 = 1024;

#[derive(Clone, Debug)]
enum Op {
    /// The lanes of warp `warp` from lane `offset` on, each touching
    /// `per` words of the line in lane order, all plain reads or writes.
    Run {
        warp: u32,
        offset: u32,
        per: u32,
        write: bool,
        location: u64,
    },
    /// One thread's access to one word.
    Word {
        thread: u32,
        word: u32,
        kind: AccessKind,
        location: u64,
    },
    /// The lanes of `mask` in warp `warp` join a collective.
    Collective { warp: u32, mask: u32 },
    /// A barrier: a new interval (every entry and record is fresh).
    Barrier,
}

/// A step of a block of `threads` threads.
fn op(threads: u32) -> impl Strategy<Value = Op> {
    let per = prop_oneof![Just(1u32), Just(2), Just(4)];
    let run = (0..threads / 32, per, 0..2u32, any::<bool>(), 0..4u64).prop_map(
        |(warp, per, half, write, location)| Op::Run {
            warp,
            // A run of fewer than 32 lanes may start half-way.
            offset: if per == 1 { 0 } else { half * 32 / per },
            per,
            write,
            location,
        },
    );
    let kinds = prop_oneof![
        3 => Just(AccessKind::Read),
        3 => Just(AccessKind::Write),
        1 => Just(AccessKind::AtomicRmw),
        1 => Just(AccessKind::AtomicRead),
    ];
    let word =
        (0..threads, 0..LINE_WORDS, kinds, 0..4u64).prop_map(|(thread, word, kind, location)| {
            Op::Word {
                thread,
                word,
                kind,
                location,
            }
        });
    let masks = prop_oneof![
        Just(u32::MAX),
        Just(0x0000_ffff),
        Just(0x5555_5555),
        any::<u32>()
    ];
    prop_oneof![
        6 => run,
        3 => word,
        1 => (0..threads / 32, masks).prop_map(|(warp, mask)| Op::Collective { warp, mask }),
        1 => Just(Op::Barrier),
    ]
}

/// 32 words' records (write, first reader, second reader), and whether
/// each word's entry is claimed (the table's side; the reference's are
/// always there).
#[derive(Default)]
struct Words {
    records: [[AtomicU64; 3]; LINE_WORDS as usize],
    claimed: [std::cell::Cell<bool>; LINE_WORDS as usize],
}

impl Words {
    fn records(&self, j: u32) -> WordRecords<'_> {
        let [write, first, second] = &self.records[j as usize];
        WordRecords {
            write,
            first,
            second,
        }
    }

    fn get(&self, j: u32) -> [u64; 3] {
        self.records[j as usize]
            .each_ref()
            .map(|r| r.load(Ordering::Relaxed))
    }

    fn clear(&self) {
        for j in 0..LINE_WORDS {
            self.records(j).clear();
            self.claimed[j as usize].set(false);
        }
    }

    /// Word `j`'s records as a split line's word entry is claimed with.
    fn claim(&self, j: u32, snapshot: Option<LineSnapshot>) {
        if self.claimed[j as usize].replace(true) {
            return;
        }
        let (write, first) =
            snapshot.map_or((BlockRecord::EMPTY, BlockRecord::EMPTY), |s| s.word(j));
        let r = self.records(j);
        r.write.store(write.0, Ordering::Relaxed);
        r.first.store(first.0, Ordering::Relaxed);
        r.second.store(0, Ordering::Relaxed);
    }
}

/// A race as both sides report it: the word, the prior record, whether
/// it was the write record, and the kind.
type Race = (u32, u64, bool, u32);

/// `thread`'s access `kind` to word `j` through `words`; its races into `out`.
fn word_access(
    words: &Words,
    j: u32,
    me: BlockRecord,
    kind: AccessKind,
    lanes: &[LaneSync],
    out: &mut Vec<Race>,
) {
    words.records(j).access(
        me,
        kind,
        || {},
        |p| lanes[p as usize],
        |_| false,
        |prior, write_record, k| out.push((j, prior.0, write_record, k as u32)),
    );
}

/// The records a run's lane `k` (thread `base + k`) makes.
fn lane_record(base: u32, k: u32, count: u32, location: u64) -> BlockRecord {
    BlockRecord::new(base + k, false, 0xf, count, 1, location)
}

fn check(ops: &[Op]) -> Result<(usize, usize), TestCaseError> {
    let reference = Words::default();
    let (words, write, first, mode) = (
        Words::default(),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    );
    let line = LineRecords {
        mode: &mode,
        write: &write,
        first: &first,
    };
    let mut lanes = vec![LaneSync::default(); MAX_THREADS as usize];
    let (mut recorded, mut races) = (0, 0);
    for (i, op) in ops.iter().enumerate() {
        let (mut want, mut got) = (Vec::new(), Vec::new());
        match *op {
            Op::Barrier => {
                for l in lanes.iter_mut() {
                    *l = l.passed_barrier();
                }
                reference.clear();
                words.clear();
                for w in [&write, &first, &mode] {
                    w.store(0, Ordering::Relaxed);
                }
            }
            Op::Collective { warp, mask } => {
                for l in 0..32 {
                    if mask & (1 << l) != 0 {
                        let t = (warp * 32 + l) as usize;
                        lanes[t] = lanes[t].joined(mask);
                    }
                }
            }
            Op::Run {
                warp,
                offset,
                per,
                write: writes,
                location,
            } => {
                let base = warp * 32 + offset;
                let lanes_in_run = LINE_WORDS / per;
                // The device records a run as one only when its lanes
                // agree on the count; here they do when nothing split them.
                let count = lanes[base as usize].count();
                let same = (0..lanes_in_run).all(|k| lanes[(base + k) as usize].count() == count);
                let kind = if writes {
                    AccessKind::Write
                } else {
                    AccessKind::Read
                };
                let per_lane = |words: &Words, table: bool, out: &mut Vec<Race>| {
                    for k in 0..lanes_in_run {
                        let me = BlockRecord::new(
                            base + k,
                            false,
                            0xf,
                            lanes[(base + k) as usize].count(),
                            1,
                            location,
                        );
                        for j in k * per..(k + 1) * per {
                            if table {
                                words.claim(j, line.split(|| {}));
                            }
                            word_access(words, j, me, kind, &lanes, out);
                        }
                    }
                };
                per_lane(&reference, false, &mut want);
                let step = if same {
                    let run = LineRun {
                        record: lane_record(base, 0, count, location),
                        per,
                        write: writes,
                    };
                    line.run_access(run, || {})
                } else {
                    LineStep::PerWord
                };
                if step == LineStep::PerWord {
                    per_lane(&words, true, &mut got);
                } else {
                    recorded += 1;
                }
            }
            Op::Word {
                thread,
                word,
                kind,
                location,
            } => {
                let me = BlockRecord::new(
                    thread,
                    kind.is_atomic() && kind != AccessKind::AtomicRead,
                    0xf,
                    lanes[thread as usize].count(),
                    1,
                    location,
                );
                word_access(&reference, word, me, kind, &lanes, &mut want);
                words.claim(word, line.split(|| {}));
                word_access(&words, word, me, kind, &lanes, &mut got);
            }
        }
        want.sort_unstable();
        got.sort_unstable();
        prop_assert_eq!(&got, &want, "races of step {} ({:?})", i, op);
        races += want.len();
        // The words as the line stands: a run-mode line's, and a split
        // line's unclaimed words, as the run's snapshot gives them.
        let m = LineMode(mode.load(Ordering::Relaxed));
        let snapshot = LineSnapshot {
            write: BlockRecord(write.load(Ordering::Relaxed)),
            first: BlockRecord(first.load(Ordering::Relaxed)),
            per: m.per(),
        };
        for j in 0..LINE_WORDS {
            let state = if m.is_run()
                || (m.is_split() && m != LineMode::SPLIT && !words.claimed[j as usize].get())
            {
                let (w, f) = snapshot.word(j);
                [w.0, f.0, 0]
            } else if words.claimed[j as usize].get() {
                words.get(j)
            } else {
                [0; 3]
            };
            prop_assert_eq!(
                state,
                reference.get(j),
                "word {} after step {} ({:?})",
                j,
                i,
                op
            );
        }
    }
    Ok((recorded, races))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// The line entry reports exactly the per-word records' races and
    /// leaves the words exactly as they would be.
    #[test]
    fn line_entries_give_the_per_word_verdicts(ops in prop::collection::vec(op(128), 1..60)) {
        check(&ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// The same in the largest block: 32 warps, up to 200 steps on one
    /// line, thread ids up to 1,023.
    #[test]
    fn line_entries_give_the_per_word_verdicts_in_a_1024_thread_block(
        ops in prop::collection::vec(op(MAX_THREADS), 1..200)
    ) {
        check(&ops)?;
    }
}

/// The common cases, deterministically: one warp's loop over its line
/// stays in one entry; another warp's access splits it and races with
/// every word it overlaps.
#[test]
fn a_warps_own_line_stays_one_entry_until_another_warp_touches_it() {
    let run = |warp, write| Op::Run {
        warp,
        offset: 0,
        per: 1,
        write,
        location: 1,
    };
    let ops = [run(0, false), run(0, true), run(0, false), run(0, true)];
    let (recorded, races) = check(&ops).expect("same verdicts");
    assert_eq!((recorded, races), (4, 0));
    let mut ops = ops.to_vec();
    ops.push(run(1, false));
    let (recorded, races) = check(&ops).expect("same verdicts");
    // The second warp's read races with each word's write.
    assert_eq!((recorded, races), (4, 32));
    ops.push(Op::Word {
        thread: 70,
        word: 3,
        kind: AccessKind::Write,
        location: 2,
    });
    let (_, races) = check(&ops).expect("same verdicts");
    // A third thread's write races with the word's write and both readers.
    assert_eq!(races, 32 + 3);
}
