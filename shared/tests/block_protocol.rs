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
//! Divergent barriers: one barrier instance's slot, marks and exit count,
//! with up to 700 threads arriving in any order from the exit or one of
//! two calls (whole warps at the exit and warps shared with a call), lets
//! the threads at a call find exactly the instances whose threads came
//! from different places and count every exit arrival, and its report's
//! groups hold each thread once, by its place.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use proptest::prelude::*;
use vigil_shared::block::{
    access_interval, add_marks, barrier_site, barrier_slot, barrier_tag, block_stamp,
    divergence_group, instance_marks, marked_divergent, marked_exits, race_kind,
    read_changes_nothing, slot_site, slot_tag, BlockRecord, DivergenceRecord, LaneSync,
    ThreadGroup, WordRecords,
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

/// What the threads of one barrier instance leave for one another and
/// what the report then holds ([`barrier_instance`]).
struct InstanceSeen {
    /// What the threads at a `sync_threads` call decide after the
    /// barrier: divergent or not (`None`: no thread was at a call).
    divergent: Option<bool>,
    /// The exit arrivals they count (whole warps by the barrier's
    /// reduction, the rest by the instance's marks).
    exits: u32,
    /// The report's groups.
    groups: [ThreadGroup; 3],
}

/// One barrier instance of a block whose thread `t` arrives from
/// `sites[t]` (0: the exit, else a call), in the order `order`, through
/// the GPU's checked barrier: a thread at a call claims or compares the
/// barrier slot and marks the instance divergent on another site; a warp
/// whose threads all come from the exit is counted by the barrier's
/// reduction, and the exit's threads of other warps count themselves into
/// the instance's marks. The marks and the slot start with what an
/// earlier instance of the same parity left.
fn barrier_instance(sites: &[u8], order: &[usize]) -> InstanceSeen {
    let site = |s: u8| barrier_site(0x7f00_0000_1000 + 0x18 * u64::from(s));
    let stamp = block_stamp(7, 3);
    let tag = barrier_tag(stamp, 5);
    let mut slot = barrier_slot(barrier_tag(stamp, 4), site(1));
    let mut marks = instance_marks(barrier_tag(stamp, 3), 9, true);
    let whole_warp_at_exit = |t: usize| {
        let w = t / 32 * 32;
        sites[w..(w + 32).min(sites.len())].iter().all(|&s| s == 0)
    };
    let mut whole = 0;
    for &t in order {
        if sites[t] == 0 {
            if whole_warp_at_exit(t) {
                whole += 1;
            } else {
                marks = add_marks(marks, tag, 1, false);
            }
            continue;
        }
        let mine = barrier_slot(tag, site(sites[t]));
        if slot_tag(slot) != tag {
            slot = mine;
        }
        if slot != mine {
            marks = add_marks(marks, tag, 0, true);
        }
    }
    let exits = whole + marked_exits(marks, tag);
    let divergent = sites
        .iter()
        .any(|&s| s != 0)
        .then(|| exits != 0 || marked_divergent(marks, tag));
    let first = slot_site(slot);
    let mut groups = [ThreadGroup::EMPTY; 3];
    for (t, &s) in sites.iter().enumerate() {
        let g = if s == 0 {
            DivergenceRecord::RETURNED
        } else {
            divergence_group(first, site(s))
        };
        groups[g] = groups[g].with(t as u32);
    }
    InstanceSeen {
        divergent,
        exits,
        groups,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The threads at a call find the instance divergent exactly when the
    /// threads came from different places, whichever arrived first and
    /// however the exit's threads fill their warps; they count every exit
    /// arrival (so the report waits for exactly the threads at calls), and
    /// the groups hold every thread once: by its site, and exactly where
    /// the record can name its threads.
    #[test]
    fn a_barrier_instance_finds_exactly_divergence(
        (sites, order) in (1usize..700).prop_flat_map(|n| (
            prop_oneof![
                prop::collection::vec(0u8..3, n),
                // Long runs of one site: whole warps at the exit, and
                // warps the exit and a call share.
                prop::collection::vec((0u8..3, 1usize..80), 1..20).prop_map(move |runs| {
                    runs.iter().flat_map(|&(s, k)| std::iter::repeat_n(s, k)).cycle().take(n).collect()
                }),
            ],
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
        ))
    ) {
        let seen = barrier_instance(&sites, &order);
        let at_calls: Vec<u8> = sites.iter().copied().filter(|&s| s != 0).collect();
        let expected = (!at_calls.is_empty()).then(|| sites.iter().any(|&s| s != sites[0]));
        prop_assert_eq!(seen.divergent, expected);
        let returned = sites.iter().filter(|&&s| s == 0).count();
        prop_assert_eq!(seen.exits as usize, returned);
        let groups = seen.groups;
        prop_assert_eq!(groups.iter().map(|g| g.count as usize).sum::<usize>(), sites.len());
        let first = order.iter().map(|&t| sites[t]).find(|&s| s != 0);
        for (t, &s) in sites.iter().enumerate() {
            let want = if s == 0 { 2 } else if Some(s) == first { 0 } else { 1 };
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
