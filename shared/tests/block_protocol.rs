//! The GPU's block-race protocol (`vigil_shared::block`) against a simple
//! reference model: random sequences of one block's accesses, barriers and
//! warp collectives, run one at a time through the word records the GPU
//! runtime keeps, and through a list of every access of the interval.
//!
//! Soundness: every race the records report is a race of the model (two
//! threads, a write, not both atomic, one barrier interval, no collective
//! since the earlier access that holds both lanes). Completeness, for
//! plain accesses with no collectives: a word with a race in an interval
//! gets at least one report there.
//!
//! Divergent barriers: one barrier instance's slot-and-flag protocol, with
//! the threads arriving in any order from the exit or one of two calls,
//! flags exactly the instances whose threads came from different places,
//! and its report's groups hold each thread once, by its place.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use proptest::prelude::*;
use vigil_shared::block::{
    access_interval, barrier_site, barrier_slot, barrier_tag, block_stamp, divergence_group,
    race_kind, read_changes_nothing, slot_site, slot_tag, BlockRecord, LaneSync, ThreadGroup,
    WordRecords, EXIT_SITE,
};
use vigil_shared::AccessKind;

const THREADS: u32 = 40; // two warps, the second partial
const WORDS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Access {
        thread: u32,
        word: usize,
        kind: AccessKind,
    },
    Barrier,
    Collective {
        warp: u32,
        mask: u32,
    },
}

fn op(collectives: bool, atomics: bool) -> impl Strategy<Value = Op> {
    let kinds = if atomics {
        prop_oneof![
            Just(AccessKind::Read),
            Just(AccessKind::Write),
            Just(AccessKind::AtomicRmw),
            Just(AccessKind::AtomicRead)
        ]
        .boxed()
    } else {
        prop_oneof![Just(AccessKind::Read), Just(AccessKind::Write)].boxed()
    };
    let access = (0..THREADS, 0..WORDS, kinds).prop_map(|(thread, word, kind)| Op::Access {
        thread,
        word,
        kind,
    });
    let masks = prop_oneof![
        Just(u32::MAX),
        Just(0x0000_ffff),
        Just(0xffff_0000),
        any::<u32>()
    ];
    let collective = (0..2u32, masks).prop_map(|(warp, mask)| Op::Collective { warp, mask });
    if collectives {
        prop_oneof![8 => access, 1 => Just(Op::Barrier), 2 => collective].boxed()
    } else {
        prop_oneof![8 => access, 1 => Just(Op::Barrier)].boxed()
    }
}

/// One access of the model's interval: who, what, and its index in the run.
#[derive(Clone, Copy, Debug)]
struct Seen {
    thread: u32,
    kind: AccessKind,
    index: usize,
    word: usize,
}

/// A report: the earlier access's index, the current one's, and whether
/// its kind and record agree with the earlier access's kind.
type Reported = (usize, usize, bool);

/// Runs `ops`; returns the reports, and the model's true racing pairs
/// (earlier index, later index).
fn run(ops: &[Op]) -> (Vec<Reported>, Vec<(usize, usize)>) {
    // Per word: its interval, as the runtime keeps it, and its records.
    let records: Vec<(AtomicU32, [AtomicU64; 3])> =
        (0..WORDS).map(|_| Default::default()).collect();
    let mut lanes = vec![LaneSync::default(); THREADS as usize];
    let mut interval: Vec<Seen> = Vec::new();
    // Collectives of the interval: (position in the run, warp, mask).
    let mut collectives: Vec<(usize, u32, u32)> = Vec::new();
    let (mut reported, mut truth) = (Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Barrier => {
                for l in lanes.iter_mut() {
                    *l = l.passed_barrier();
                }
                interval.clear();
                collectives.clear();
            }
            Op::Collective { warp, mask } => {
                for l in 0..32 {
                    let t = warp * 32 + l;
                    if mask & (1 << l) != 0 && t < THREADS {
                        lanes[t as usize] = lanes[t as usize].joined(mask);
                    }
                }
                collectives.push((i, warp, mask));
            }
            Op::Access { thread, word, kind } => {
                let me = BlockRecord::new(
                    thread,
                    kind.is_atomic() && kind != AccessKind::AtomicRead,
                    0xf,
                    lanes[thread as usize].count(),
                    1,
                    i as u64,
                );
                let (word_interval, r) = &records[word];
                let recs = WordRecords {
                    write: &r[0],
                    first: &r[1],
                    second: &r[2],
                };
                let now = access_interval(lanes[thread as usize].barriers(), 0);
                if word_interval.load(Ordering::Relaxed) != now {
                    recs.clear();
                    word_interval.store(now, Ordering::Relaxed);
                }
                let before = r.each_ref().map(|c| c.load(Ordering::Relaxed));
                let [w, f, s] = before.map(BlockRecord);
                let skippable = kind == AccessKind::Read && read_changes_nothing(w, f, s, me);
                let reports_before = reported.len();
                recs.access(
                    me,
                    kind,
                    || {},
                    |p| lanes[p as usize],
                    |_| false,
                    |prior, write_record, k| {
                        let prior_index = prior.location(0) as usize;
                        let prior_kind = match ops[prior_index] {
                            Op::Access { kind, .. } => kind,
                            _ => unreachable!("a record of a non-access"),
                        };
                        let ok =
                            k == race_kind(prior_kind, kind) && write_record == prior_kind.writes();
                        reported.push((prior_index, i, ok));
                    },
                );
                if skippable {
                    // What the GPU skips at the access must be what the
                    // protocol would have left alone.
                    assert_eq!(r.each_ref().map(|c| c.load(Ordering::Relaxed)), before);
                    assert_eq!(reported.len(), reports_before, "a skipped read reported");
                }
                for s in interval.iter().filter(|s| s.word == word) {
                    let conflict = (s.kind.writes() || kind.writes())
                        && !(s.kind.is_atomic() && kind.is_atomic());
                    let ordered = s.thread / 32 == thread / 32
                        && collectives.iter().any(|&(at, warp, mask)| {
                            at > s.index
                                && warp == thread / 32
                                && mask & (1 << (s.thread % 32)) != 0
                                && mask & (1 << (thread % 32)) != 0
                        });
                    if s.thread != thread && conflict && !ordered {
                        truth.push((s.index, i));
                    }
                }
                interval.push(Seen {
                    thread,
                    kind,
                    index: i,
                    word,
                });
            }
        }
    }
    (reported, truth)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_report_is_a_race_of_the_model(ops in prop::collection::vec(op(true, true), 1..80)) {
        let (reported, truth) = run(&ops);
        for (prior, current, kind_ok) in reported {
            prop_assert!(kind_ok, "wrong kind or record for {prior} -> {current}");
            prop_assert!(
                truth.contains(&(prior, current)),
                "invented race {prior} -> {current} in {ops:?}"
            );
        }
    }

    #[test]
    fn a_word_with_a_plain_race_is_reported(ops in prop::collection::vec(op(false, false), 1..80)) {
        let (reported, truth) = run(&ops);
        // Intervals are the stretches between barriers.
        let interval_of = |i: usize| ops[..i].iter().filter(|o| matches!(o, Op::Barrier)).count();
        let word_of = |i: usize| match ops[i] {
            Op::Access { word, .. } => word,
            _ => unreachable!(),
        };
        for &(a, b) in &truth {
            let (iv, w) = (interval_of(b), word_of(b));
            prop_assert!(
                reported.iter().any(|&(_, c, _)| interval_of(c) == iv && word_of(c) == w),
                "race {a} -> {b} on word {w} went unreported in {ops:?}"
            );
        }
    }
}

/// One barrier instance of a block whose thread `t` arrives from
/// `sites[t]` (0: the exit, else a call), in the order `order`, through the
/// slot-and-flag protocol of the GPU's checked barrier: returns whether
/// the flag was raised and the report's groups.
fn barrier_instance(sites: &[u8], order: &[usize]) -> (bool, [ThreadGroup; 3]) {
    let site = |s: u8| {
        if s == 0 {
            EXIT_SITE
        } else {
            barrier_site(0x7f00_0000_1000 + 0x18 * u64::from(s))
        }
    };
    let tag = barrier_tag(block_stamp(7, 3), 5);
    // A slot left by an earlier instance.
    let mut slot = barrier_slot(barrier_tag(block_stamp(7, 3), 4), site(1));
    let mut flag = false;
    for &t in order {
        let mine = barrier_slot(tag, site(sites[t]));
        if slot_tag(slot) != tag {
            slot = mine;
        }
        flag |= slot != mine;
    }
    let first = slot_site(slot);
    let mut groups = [ThreadGroup::EMPTY; 3];
    for (t, &s) in sites.iter().enumerate() {
        let g = divergence_group(first, site(s));
        groups[g] = groups[g].with(t as u32);
    }
    (flag, groups)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The flag is raised exactly when the threads came from different
    /// places, and the groups hold every thread once: by its site, and
    /// exactly where the record can name its threads.
    #[test]
    fn a_barrier_instance_flags_exactly_divergence(
        (sites, order) in (1usize..200).prop_flat_map(|n| (
            prop::collection::vec(0u8..3, n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
        ))
    ) {
        let (flag, groups) = barrier_instance(&sites, &order);
        prop_assert_eq!(flag, sites.iter().any(|&s| s != sites[0]));
        let first = sites[order[0]];
        prop_assert_eq!(groups.iter().map(|g| g.count as usize).sum::<usize>(), sites.len());
        for (t, &s) in sites.iter().enumerate() {
            let want = if s == first { 0 } else if s == 0 { 2 } else { 1 };
            for (g, group) in groups.iter().enumerate() {
                if let Some(set) = group.exact() {
                    prop_assert_eq!(set.contains(t as u32), g == want, "thread {} group {}", t, g);
                }
                if g == want {
                    prop_assert!(group.first <= t as u32 && t as u32 <= group.last);
                }
            }
        }
    }
}
