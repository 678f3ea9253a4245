//! The race engine against the exact model: hand-written patterns for
//! each family (launch ordering, reads shared by many CTAs, lines and
//! words, atomics and release sequences, fences), and random programs at
//! the scale of a GPU (thousands of CTAs, many releasers into one word).

mod race_model;

use race_model::{compare, compare_with_pool, Harness, Rng, Step};
use vigil_shared::race::atomic::AtomicOpKind;
use vigil_shared::{Ordering, Scope};

use Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

fn launch(stream: usize, ctas: u32) -> Step {
    Step::Launch {
        stream,
        ctas,
        ro_words: 0,
    }
}
fn launch_ro(stream: usize, ctas: u32, ro_words: u64) -> Step {
    Step::Launch {
        stream,
        ctas,
        ro_words,
    }
}
fn plain(launch: usize, cta: u32, addr: u64, size: u32, write: bool) -> Step {
    Step::Plain {
        launch,
        cta,
        addr,
        size,
        write,
    }
}
fn line(launch: usize, cta: u32, line: u64, write: bool) -> Step {
    Step::Line {
        launch,
        cta,
        line,
        write,
    }
}
fn at(
    launch: usize,
    cta: u32,
    addr: u64,
    kind: AtomicOpKind,
    ordering: Ordering,
    scope: Scope,
) -> Step {
    Step::Atomic {
        launch,
        cta,
        addr,
        size: 4,
        kind,
        ordering,
        failure: Relaxed,
        scope,
        succeeds: true,
    }
}
fn fence(launch: usize, cta: u32, ordering: Ordering, scope: Scope) -> Step {
    Step::Fence {
        launch,
        cta,
        ordering,
        scope,
    }
}

#[test]
fn launches_on_one_stream_are_ordered_and_on_two_are_not() {
    let steps = [
        launch(0, 4),
        line(0, 1, 0, true),
        launch(0, 4),
        line(1, 2, 0, false),
        launch(1, 4),
        line(2, 0, 0, true),
    ];
    assert_eq!(compare(2, 1024, &[0, 0], &steps), 1);
}

#[test]
fn events_and_host_waits_order_streams() {
    let steps = [
        launch(0, 2),
        plain(0, 0, 8, 4, true),
        Step::Record {
            stream: 0,
            event: 0,
        },
        Step::Wait {
            stream: 1,
            event: 0,
        },
        launch(1, 2),
        plain(1, 1, 8, 4, false),
        launch(0, 1),
        plain(2, 0, 64, 4, true),
        Step::SyncStream { stream: 0 },
        launch(1, 1),
        plain(3, 0, 64, 4, true),
        launch(0, 1),
        plain(4, 0, 96, 4, true),
        launch(1, 1),
        plain(5, 0, 96, 4, false),
    ];
    assert_eq!(compare(2, 1024, &[0, 0], &steps), 1);
}

#[test]
fn ctas_of_one_launch_race_unless_they_synchronise() {
    let steps = [
        launch(0, 8),
        line(0, 3, 1, true),
        line(0, 4, 1, false),
        plain(0, 5, 4, 4, true),
        at(0, 5, 0, AtomicOpKind::Store, Release, Scope::Device),
        at(0, 6, 0, AtomicOpKind::Load, Acquire, Scope::Device),
        plain(0, 6, 4, 4, false),
        plain(0, 6, 8, 4, false),
    ];
    assert_eq!(compare(1, 1024, &[0], &steps), 1);
}

/// Forty CTAs read a word; thirty-nine announce it with a release, one
/// does not; the writer acquired the thirty-nine: it races with the one.
#[test]
fn a_writer_that_acquired_all_readers_but_one_races_with_that_one() {
    for silent in [0u32, 17, 39] {
        let mut steps = vec![launch(0, 41)];
        for c in 0..40 {
            steps.push(plain(0, c, 0, 4, false));
            if c != silent {
                steps.push(at(
                    0,
                    c,
                    64 + 4 * u64::from(c),
                    AtomicOpKind::Store,
                    Release,
                    Scope::Device,
                ));
            }
        }
        for c in 0..40 {
            if c != silent {
                steps.push(at(
                    0,
                    40,
                    64 + 4 * u64::from(c),
                    AtomicOpKind::Load,
                    Acquire,
                    Scope::Device,
                ));
            }
        }
        steps.push(plain(0, 40, 0, 4, true));
        assert_eq!(compare(1, 1024, &[0], &steps), 1, "silent reader {silent}");
    }
}

#[test]
fn read_only_reads_of_a_whole_launch_race_with_an_unordered_writer_only() {
    let mut steps = vec![launch_ro(0, 300, 64)];
    for c in (0..300).rev() {
        steps.push(line(0, c, 0, false));
        steps.push(plain(0, c, 4 * u64::from(c % 32), 4, false));
    }
    // Ordered after: no race; another stream: a race.
    steps.push(launch(0, 1));
    steps.push(line(1, 0, 0, true));
    steps.push(launch_ro(1, 4, 64));
    steps.push(line(2, 1, 0, false));
    steps.push(launch(0, 1));
    steps.push(line(3, 0, 0, true));
    // Stream 1's reads race with stream 0's writes before and after them.
    assert_eq!(compare(2, 1024, &[0, 0], &steps), 2);
}

#[test]
fn a_partial_access_splits_a_line_without_losing_its_history() {
    let steps = [
        launch(0, 4),
        line(0, 0, 0, true),
        line(0, 1, 1, false),
        launch(1, 4),
        plain(1, 2, 6, 2, false),
        line(1, 3, 1, true),
        plain(1, 3, 128 + 8, 8, false),
        line(1, 1, 0, false),
    ];
    assert_eq!(compare(2, 1024, &[0, 0], &steps), 3);
}

#[test]
fn a_spin_lock_orders_its_critical_sections() {
    // Every CTA takes the lock (acquiring exchange), updates the data and
    // releases it; without the release the next holder races.
    for (release, expected) in [(Release, 0), (Relaxed, 10)] {
        let mut steps = vec![launch(0, 6)];
        for c in [3u32, 0, 5, 1, 4, 2] {
            steps.push(at(0, c, 0, AtomicOpKind::Rmw, Acquire, Scope::Device));
            steps.push(plain(0, c, 64, 4, false));
            steps.push(plain(0, c, 64, 4, true));
            steps.push(at(0, c, 0, AtomicOpKind::Store, release, Scope::Device));
        }
        assert_eq!(compare(1, 1024, &[0], &steps), expected, "{release:?}");
    }
}

/// A contended lock: while one CTA holds it, the others poll it with
/// failing compare-exchanges that acquire on failure, reading the same
/// release head again and again (the engine merges it once); when the
/// holder gives the lock back, the next poll reads a new head and learns
/// it. With a release, no critical section races with the next; with a
/// relaxed give, the next holder's polls learn nothing of the last one.
#[test]
fn a_contended_lock_learns_each_holder_once_and_misses_none() {
    let poll = |cta: u32| Step::Atomic {
        launch: 0,
        cta,
        addr: 0,
        size: 4,
        kind: AtomicOpKind::CompareExchange,
        ordering: Acquire,
        failure: Acquire,
        scope: Scope::Device,
        succeeds: false,
    };
    for (give, racy) in [(Release, false), (Relaxed, true)] {
        let holders = [3u32, 0, 5, 1, 4, 2];
        let mut steps = vec![launch(0, 6)];
        for (i, &c) in holders.iter().enumerate() {
            steps.push(at(0, c, 0, AtomicOpKind::Rmw, Acquire, Scope::Device));
            // Every CTA still waiting polls three times during the
            // critical section.
            for _ in 0..3 {
                steps.extend(holders[i + 1..].iter().map(|&w| poll(w)));
            }
            steps.push(plain(0, c, 64, 4, false));
            steps.push(plain(0, c, 64, 4, true));
            steps.push(at(0, c, 0, AtomicOpKind::Store, give, Scope::Device));
        }
        let raced = compare(1, 1024, &[0], &steps);
        assert_eq!(raced > 0, racy, "give {give:?}: {raced} races");
    }
}

#[test]
fn a_grid_barrier_of_fences_and_a_relaxed_counter() {
    let n = 64u32;
    let mut steps = vec![launch(0, n)];
    for c in 0..n {
        steps.push(plain(0, c, 128 + 4 * u64::from(c), 4, true));
        steps.push(fence(0, c, Release, Scope::Device));
        steps.push(at(0, c, 0, AtomicOpKind::Rmw, Relaxed, Scope::Device));
    }
    for c in 0..n {
        steps.push(at(0, c, 0, AtomicOpKind::Load, Relaxed, Scope::Device));
        steps.push(fence(0, c, Acquire, Scope::Device));
        steps.push(plain(0, c, 128 + 4 * u64::from((c + 1) % n), 4, false));
    }
    assert_eq!(compare(1, 2048, &[0], &steps), 0);
}

#[test]
fn last_block_reduction_with_and_without_release() {
    for (ordering, expected) in [(AcqRel, 0), (Relaxed, 1)] {
        let n = 32u32;
        let mut steps = vec![launch(0, n)];
        for c in 0..n {
            steps.push(plain(0, c, 128 + 4 * u64::from(c), 4, true));
            steps.push(at(0, c, 0, AtomicOpKind::Rmw, ordering, Scope::Device));
        }
        for c in 0..n {
            steps.push(plain(0, n - 1, 128 + 4 * u64::from(c), 4, false));
        }
        let raced = compare(1, 1024, &[0], &steps);
        if expected == 0 {
            assert_eq!(raced, 0);
        } else {
            assert!(raced >= 1);
        }
    }
}

#[test]
fn chained_flags_order_transitively() {
    let n = 200u32;
    let mut steps = vec![launch(0, n)];
    for c in 0..n {
        if c > 0 {
            steps.push(at(
                0,
                c,
                4 * u64::from(c - 1),
                AtomicOpKind::Load,
                Acquire,
                Scope::Device,
            ));
        }
        steps.push(plain(0, c, 1024, 4, false));
        steps.push(plain(0, c, 1024, 4, true));
        steps.push(at(
            0,
            c,
            4 * u64::from(c),
            AtomicOpKind::Store,
            Release,
            Scope::Device,
        ));
    }
    assert_eq!(compare(1, 2048, &[0], &steps), 0);
}

#[test]
fn mixed_width_and_scope_atomics() {
    let steps = [
        launch(0, 4),
        Step::Atomic {
            launch: 0,
            cta: 0,
            addr: 0,
            size: 8,
            kind: AtomicOpKind::Rmw,
            ordering: Relaxed,
            failure: Relaxed,
            scope: Scope::Device,
            succeeds: true,
        },
        at(0, 1, 0, AtomicOpKind::Rmw, Relaxed, Scope::Device),
        at(0, 2, 16, AtomicOpKind::Rmw, Relaxed, Scope::Device),
        at(0, 3, 16, AtomicOpKind::Rmw, Relaxed, Scope::Block),
        at(0, 1, 32, AtomicOpKind::Rmw, Relaxed, Scope::Device),
        at(0, 2, 32, AtomicOpKind::Rmw, Relaxed, Scope::Device),
        plain(0, 3, 32, 4, false),
    ];
    assert_eq!(compare(1, 1024, &[0], &steps), 3);
}

#[test]
fn seq_cst_fences_order_through_the_fence_order() {
    let steps = [
        launch(0, 2),
        plain(0, 0, 64, 4, true),
        fence(0, 0, SeqCst, Scope::Device),
        fence(0, 1, SeqCst, Scope::Device),
        plain(0, 1, 64, 4, false),
    ];
    assert_eq!(compare(1, 1024, &[0], &steps), 0);
}

#[test]
fn devices_scope_their_releases() {
    // Stream 1 runs on device 1: a device-scope release does not reach it.
    let steps = [
        launch(0, 1),
        launch(1, 1),
        plain(0, 0, 64, 4, true),
        at(0, 0, 0, AtomicOpKind::Store, Release, Scope::Device),
        at(1, 0, 0, AtomicOpKind::Load, Acquire, Scope::System),
        plain(1, 0, 64, 4, false),
        plain(0, 0, 128, 4, true),
        at(0, 0, 4, AtomicOpKind::Store, Release, Scope::System),
        at(1, 0, 4, AtomicOpKind::Load, Acquire, Scope::System),
        plain(1, 0, 128, 4, false),
    ];
    assert!(compare(2, 1024, &[0, 1], &steps) >= 1);
}

/// Two CTAs of one launch: a write and a read of the same bytes race
/// either way, two writes race, two reads and disjoint bytes do not, and
/// a CTA never races with itself.
#[test]
fn access_kinds_between_ctas() {
    use vigil_shared::abi::ReportKind;
    let mut h = Harness::new(1, 1024, 64, &[0]);
    let steps = [
        launch(0, 3),
        plain(0, 0, 0, 4, true),
        plain(0, 1, 0, 4, false),
        plain(0, 1, 4, 4, false),
        plain(0, 0, 4, 4, true),
        plain(0, 0, 8, 4, true),
        plain(0, 1, 8, 4, true),
        plain(0, 0, 12, 4, false),
        plain(0, 1, 12, 4, false),
        plain(0, 0, 16, 2, true),
        plain(0, 1, 18, 2, true),
        plain(0, 2, 20, 4, true),
        plain(0, 2, 20, 4, false),
        plain(0, 2, 20, 1, true),
    ];
    let kinds: Vec<Option<ReportKind>> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| h.step(i, s))
        .map(|v| v.race.map(|r| r.kind))
        .collect();
    use ReportKind::{ReadAfterWrite as Raw, WriteAfterRead as War, WriteAfterWrite as Waw};
    assert_eq!(
        kinds,
        [
            None,
            Some(Raw),
            None,
            Some(War),
            None,
            Some(Waw),
            None,
            None,
            None,
            None,
            None,
            None,
            None
        ]
    );
}

/// A flag between two CTAs: a release store and an acquiring load of
/// device or system scope order the data; a relaxed flag does not, and
/// block scope does not either (the other CTA is outside it, so the flag's
/// two atomics race as well).
#[test]
fn message_passing_by_scope() {
    for (release, acquire, scope, expected) in [
        (Release, Acquire, Scope::Block, 2),
        (Release, Acquire, Scope::Device, 0),
        (Release, Acquire, Scope::System, 0),
        (Relaxed, Acquire, Scope::Device, 1),
        (Release, Relaxed, Scope::Device, 1),
        (AcqRel, AcqRel, Scope::Device, 0),
    ] {
        let kind = |o: Ordering| {
            if o == AcqRel {
                AtomicOpKind::Rmw
            } else {
                AtomicOpKind::Store
            }
        };
        let load = if acquire == AcqRel {
            AtomicOpKind::Rmw
        } else {
            AtomicOpKind::Load
        };
        let steps = [
            launch(0, 2),
            plain(0, 0, 64, 4, true),
            at(0, 0, 0, kind(release), release, scope),
            at(0, 1, 0, load, acquire, scope),
            plain(0, 1, 64, 4, false),
        ];
        let raced = compare(1, 1024, &[0], &steps);
        assert_eq!(raced, expected, "{release:?}/{acquire:?} at {scope:?}");
    }
}

/// What continues a release sequence: a read-modify-write by another CTA
/// does (the acquirer of its value learns the first release), a relaxed
/// store ends it; a failed compare-exchange is a read that acquires with
/// its failure ordering.
#[test]
fn release_sequences_and_failed_exchanges() {
    for (middle, expected) in [(AtomicOpKind::Rmw, 0), (AtomicOpKind::Store, 1)] {
        let steps = [
            launch(0, 3),
            plain(0, 0, 64, 4, true),
            at(0, 0, 0, AtomicOpKind::Store, Release, Scope::Device),
            at(0, 1, 0, middle, Relaxed, Scope::Device),
            at(0, 2, 0, AtomicOpKind::Load, Acquire, Scope::Device),
            plain(0, 2, 64, 4, false),
        ];
        assert_eq!(
            compare(1, 1024, &[0], &steps),
            expected,
            "{middle:?} in the middle"
        );
    }
    for (failure, expected) in [(Acquire, 0), (Relaxed, 1)] {
        let failed = Step::Atomic {
            launch: 0,
            cta: 1,
            addr: 0,
            size: 4,
            kind: AtomicOpKind::CompareExchange,
            ordering: AcqRel,
            failure,
            scope: Scope::Device,
            succeeds: false,
        };
        let steps = [
            launch(0, 2),
            plain(0, 0, 64, 4, true),
            at(0, 0, 0, AtomicOpKind::Store, Release, Scope::Device),
            failed,
            plain(0, 1, 64, 4, false),
        ];
        assert_eq!(
            compare(1, 1024, &[0], &steps),
            expected,
            "failure ordering {failure:?}"
        );
    }
}

/// A thousand CTAs each write their slot and release into one counter; a
/// last CTA acquires the counter and reads every slot: no race, unless
/// one CTA added relaxed (then its slot races, and only its slot).
#[test]
fn a_thousand_releasers_into_one_word() {
    let n = 1024u32;
    for silent in [None, Some(0u32), Some(517), Some(n - 1)] {
        let mut steps = vec![launch(0, n + 1)];
        for c in 0..n {
            steps.push(plain(0, c, 128 + 4 * u64::from(c), 4, true));
            let ordering = if Some(c) == silent { Relaxed } else { Release };
            steps.push(at(0, c, 0, AtomicOpKind::Rmw, ordering, Scope::Device));
        }
        steps.push(at(0, n, 0, AtomicOpKind::Load, Acquire, Scope::Device));
        for c in 0..n {
            steps.push(plain(0, n, 128 + 4 * u64::from(c), 4, false));
        }
        let expected = usize::from(silent.is_some());
        assert_eq!(
            compare(1, 8192, &[0], &steps),
            expected,
            "silent {silent:?}"
        );
    }
}

/// A write racing with an earlier write keeps both sides: a later read in
/// the racer's same epoch still races with the first writer, on a split
/// word and on a whole line alike.
#[test]
fn a_same_epoch_access_after_a_racing_write_still_races() {
    let steps = [
        launch(0, 2),
        plain(0, 0, 0, 4, true),
        plain(0, 1, 0, 4, true),
        plain(0, 1, 0, 4, false),
        line(0, 0, 1, true),
        line(0, 1, 1, true),
        line(0, 1, 1, false),
    ];
    assert_eq!(compare(1, 1024, &[0], &steps), 4);
}

/// A pool too small for the program: the engine may miss races (counted),
/// never report one the model does not have.
#[test]
fn a_small_pool_only_misses_and_counts_it() {
    for seed in 0..60u64 {
        let steps = program(5000 + seed, 2, 300, 16);
        compare_with_pool(3, 2, 1024, &[0, 0], &steps);
    }
}

/// A release whose word finds no pool record left cannot leave its heads
/// there: what it knew still reaches whoever reads the value, acquiring
/// at once or through a later fence (counted), so nothing is reported
/// that the model does not have.
#[test]
fn a_release_without_a_record_still_orders_its_acquirer() {
    for fenced in [false, true] {
        let mut steps = vec![
            launch(0, 3),
            // Two readers of one word take the pool's one record.
            plain(0, 0, 256, 4, false),
            plain(0, 1, 256, 4, false),
            plain(0, 0, 64, 4, true),
            at(0, 0, 0, AtomicOpKind::Store, Release, Scope::Device),
        ];
        if fenced {
            steps.push(at(0, 1, 0, AtomicOpKind::Load, Relaxed, Scope::Device));
            steps.push(fence(0, 1, Acquire, Scope::Device));
        } else {
            steps.push(at(0, 1, 0, AtomicOpKind::Load, Acquire, Scope::Device));
        }
        steps.push(plain(0, 1, 64, 4, false));
        assert_eq!(
            compare_with_pool(1, 1, 1024, &[0], &steps),
            0,
            "fenced {fenced}"
        );
    }
}

/// Lines freed (reclaimed) give their records back: the same reads every
/// round (one kernel line read by eight CTAs: a record per word) never
/// find the pool full.
#[test]
fn freed_lines_give_every_record_back() {
    let mut h = Harness::new(1, 1024, 80, &[0]);
    // The step index names the site: every read is made at one site.
    let site = 0;
    for round in 0..10 {
        h.step(site, &launch(0, 8));
        for c in 0..8 {
            for w in 0..64u64 {
                let v = h.step(site, &plain(round, c, 4 * w, 4, false)).unwrap();
                assert!(
                    v.race.is_none() && !v.bounded,
                    "round {round}, CTA {c}, word {w}: {v:?}"
                );
            }
        }
        assert_eq!(h.pool_exhausted(), 0, "round {round}: the pool ran out");
        h.step(site, &Step::SyncAll);
        assert_eq!(h.reclaim(0..2), 64, "round {round}: records given back");
    }
}

// ----- random programs ------------------------------------------------------

/// A small deterministic generator (programs must be reproducible).
/// A random program of about `len` steps over `streams` streams, with
/// launches of up to `max_ctas` CTAs; `sync_words` words at the end of
/// the 1 KiB take the atomics, so that many CTAs release into them.
fn program(seed: u64, streams: usize, len: usize, max_ctas: u32) -> Vec<Step> {
    use std::collections::BTreeSet;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut steps = Vec::new();
    // Per launch: stream, CTAs, read-only words, open.
    let mut launches: Vec<(usize, u32, u64, bool)> = Vec::new();
    let mut stream_sets: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); streams];
    let mut events: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); 4];
    let orderings = [Relaxed, Acquire, Release, AcqRel, SeqCst];
    let scopes = [Scope::Block, Scope::Device, Scope::Device, Scope::System];
    let close = |launches: &mut Vec<(usize, u32, u64, bool)>, set: &BTreeSet<usize>| {
        for &l in set {
            launches[l].3 = false;
        }
    };
    while steps.len() < len {
        let open: Vec<usize> = (0..launches.len()).filter(|&l| launches[l].3).collect();
        let r = rng.below(100);
        if open.is_empty() || r < 6 {
            let stream = rng.below(streams as u64) as usize;
            let ctas = rng
                .pick(&[1, 2, 3, 8, 33, max_ctas.max(1)])
                .min(max_ctas.max(1));
            let ro_words = if rng.below(3) == 0 { 64 } else { 0 };
            let id = launches.len();
            // Launches ordered before it have finished: they make no more
            // accesses (a stream runs its launches one after the other).
            let before = stream_sets[stream].clone();
            close(&mut launches, &before);
            launches.push((stream, ctas, ro_words, true));
            stream_sets[stream].insert(id);
            steps.push(Step::Launch {
                stream,
                ctas,
                ro_words,
            });
            continue;
        }
        if r < 9 {
            let stream = rng.below(streams as u64) as usize;
            let event = rng.below(4) as usize;
            if rng.below(2) == 0 {
                events[event] = stream_sets[stream].clone();
                steps.push(Step::Record { stream, event });
            } else {
                let ev = events[event].clone();
                stream_sets[stream].extend(ev);
                steps.push(Step::Wait { stream, event });
            }
            continue;
        }
        if r < 11 {
            if rng.below(4) == 0 {
                let all: BTreeSet<usize> = (0..launches.len()).collect();
                close(&mut launches, &all);
                steps.push(Step::SyncAll);
            } else {
                let stream = rng.below(streams as u64) as usize;
                let set = stream_sets[stream].clone();
                close(&mut launches, &set);
                steps.push(Step::SyncStream { stream });
            }
            continue;
        }
        let launch = rng.pick(&open);
        let (_, ctas, ro_words, _) = launches[launch];
        // Many releasers: CTAs spread over the whole launch.
        let cta = rng.below(u64::from(ctas)) as u32;
        let k = rng.below(100);
        if k < 25 {
            let line = rng.below(6);
            let write = rng.below(3) == 0 && line * 32 >= ro_words;
            steps.push(Step::Line {
                launch,
                cta,
                line,
                write,
            });
        } else if k < 60 {
            let size = rng.pick(&[1u32, 2, 4, 4, 8]);
            let addr = rng.below(768 / u64::from(size)) * u64::from(size);
            let write = rng.below(3) == 0 && addr / 4 >= ro_words;
            steps.push(Step::Plain {
                launch,
                cta,
                addr,
                size,
                write,
            });
        } else if k < 90 {
            let size = rng.pick(&[4u32, 4, 4, 8]);
            // Mostly the sync words; sometimes data words (mixing).
            let addr = if rng.below(5) == 0 {
                256 + rng.below(128) / u64::from(size) * u64::from(size)
            } else {
                768 + rng.below(256 / u64::from(size)) * u64::from(size)
            };
            let kind = rng.pick(&[
                AtomicOpKind::Load,
                AtomicOpKind::Store,
                AtomicOpKind::Rmw,
                AtomicOpKind::CompareExchange,
            ]);
            let ordering = match kind {
                AtomicOpKind::Load => rng.pick(&[Relaxed, Acquire]),
                AtomicOpKind::Store => rng.pick(&[Relaxed, Release]),
                _ => rng.pick(&orderings[..4]),
            };
            steps.push(Step::Atomic {
                launch,
                cta,
                addr,
                size,
                kind,
                ordering,
                failure: rng.pick(&[Relaxed, Acquire]),
                scope: rng.pick(&scopes),
                succeeds: rng.below(2) == 0,
            });
        } else {
            steps.push(Step::Fence {
                launch,
                cta,
                ordering: rng.pick(&orderings),
                scope: rng.pick(&scopes),
            });
        }
    }
    steps
}

#[test]
fn random_programs_agree_with_the_model() {
    let mut raced = 0;
    for seed in 0..300u64 {
        let streams = 1 + (seed % 3) as usize;
        let devices: Vec<u32> = (0..streams as u32)
            .map(|s| s % (1 + (seed % 2) as u32))
            .collect();
        let steps = program(seed, streams, 200, 8);
        println!("seed {seed}");
        raced += compare(streams, 1024, &devices, &steps);
    }
    assert!(
        raced > 100,
        "the programs raced too rarely to test anything ({raced})"
    );
}

/// Thousands of CTAs per launch, many releasing into the same words.
#[test]
fn random_programs_at_gpu_scale_agree_with_the_model() {
    for seed in 0..12u64 {
        let streams = 1 + (seed % 2) as usize;
        let devices = vec![0; streams];
        let steps = program(1000 + seed, streams, 3000, 4096);
        println!("seed {}", 1000 + seed);
        compare(streams, 1024, &devices, &steps);
    }
}

/// Replays one random program, printing the steps that touched the bytes
/// of step `VIGIL_REPLAY_STEP` (for debugging a failing seed:
/// `VIGIL_SEED=n VIGIL_REPLAY_STEP=i cargo test -p vigil-shared --test race_engine replay -- --nocapture --ignored`).
#[test]
#[ignore]
fn replay() {
    let seed: u64 = std::env::var("VIGIL_SEED").unwrap().parse().unwrap();
    let upto: usize = std::env::var("VIGIL_REPLAY_STEP").unwrap().parse().unwrap();
    let len: usize = std::env::var("VIGIL_REPLAY_LEN").map_or(200, |v| v.parse().unwrap());
    let ctas: u32 = std::env::var("VIGIL_REPLAY_CTAS").map_or(8, |v| v.parse().unwrap());
    let streams: usize = std::env::var("VIGIL_REPLAY_STREAMS")
        .map_or(1 + (seed % 3) as usize, |v| v.parse().unwrap());
    let steps = program(seed, streams, len, ctas);
    let span = |s: &Step| match *s {
        Step::Plain { addr, size, .. } | Step::Atomic { addr, size, .. } => {
            Some((addr, addr + u64::from(size)))
        }
        Step::Line { line, .. } => Some((line * 128, line * 128 + 128)),
        _ => None,
    };
    let (lo, hi) = span(&steps[upto]).unwrap();
    for (i, s) in steps.iter().enumerate().take(upto + 1) {
        let shown = match span(s) {
            Some((a, b)) => a < hi && lo < b || matches!(s, Step::Atomic { .. }),
            None => true,
        };
        if shown {
            println!("{i}: {s:?}");
        }
    }
}

/// Debug: runs a random program through the engine alone, printing the
/// cell of word `VIGIL_REPLAY_WORD` after each step that touches it.
#[test]
#[ignore]
fn trace_word() {
    let seed: u64 = std::env::var("VIGIL_SEED").unwrap().parse().unwrap();
    let word: u64 = std::env::var("VIGIL_REPLAY_WORD").unwrap().parse().unwrap();
    let upto: usize = std::env::var("VIGIL_REPLAY_STEP").unwrap().parse().unwrap();
    let len: usize = std::env::var("VIGIL_REPLAY_LEN").map_or(200, |v| v.parse().unwrap());
    let ctas: u32 = std::env::var("VIGIL_REPLAY_CTAS").map_or(8, |v| v.parse().unwrap());
    let streams: usize = std::env::var("VIGIL_REPLAY_STREAMS")
        .map_or(1 + (seed % 3) as usize, |v| v.parse().unwrap());
    let steps = program(seed, streams, len, ctas);
    let devices = vec![0; streams];
    let pool: usize = std::env::var("VIGIL_REPLAY_POOL").map_or(1 << 14, |v| v.parse().unwrap());
    let mut h = race_model::Harness::new(streams, 1024, pool, &devices);
    for (i, s) in steps.iter().enumerate().take(upto + 1) {
        let v = h.step(i, s);
        let c = h.shadow()[word as usize].load(std::sync::atomic::Ordering::Relaxed);
        let c0 = h.shadow()[(word & !31) as usize].load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "{i}: {s:?} -> {:?} cell {c:#x} line0 {c0:#x}",
            v.map(|v| v.race.map(|r| r.prior.serial()))
        );
        if let Ok(spec) = std::env::var("VIGIL_REPLAY_SEES") {
            let v: Vec<u64> = spec.split(',').map(|x| x.parse().unwrap()).collect();
            if v[0] as usize == i {
                println!(
                    "    sees: {:?}",
                    h.sees(v[1] as usize, v[2] as u32, v[3] as u32)
                );
            }
        }
        if c >> 62 == 2 {
            for (a, b) in h.record_slots(c as u32) {
                if a != 0 {
                    println!("    slot {a:#x} {b:#x} serial {}", a as u32);
                }
            }
        }
    }
}

#[test]
fn a_buffer_copied_out_after_every_launch_stays_race_free() {
    // A stencil's pattern: each launch reads its input lines (aligned and
    // one word off), writes its output lines; a copy out (one launch
    // reading the output through a read-only view) follows it on the
    // same stream, a hundred times over.
    let mut steps = Vec::new();
    let mut launches = 0;
    for i in 0..120u32 {
        steps.push(launch(0, 4));
        let k = launches;
        launches += 1;
        for c in 0..4u32 {
            steps.push(line(k, c, u64::from(c), false));
            steps.push(plain(
                k,
                c,
                128 * u64::from(c) + 4 + 4 * u64::from(i % 8),
                4,
                false,
            ));
            steps.push(line(k, c, 4 + u64::from(c), true));
        }
        steps.push(launch_ro(0, 2, 64));
        let k = launches;
        launches += 1;
        for c in 0..2u32 {
            for l in 0..4u64 {
                steps.push(line(k, c, 4 + l, false));
            }
        }
    }
    assert_eq!(compare(1, 1024, &[0], &steps), 0);
}

/// Runs `step` (an atomic) and returns what it read of its own CTA's
/// releases.
fn own(h: &mut Harness, step: Step) -> vigil_shared::race::OwnReleases {
    h.step(0, &step);
    h.own
}

/// Own releases acquired up to `acquired` and observed up to `observed`.
fn known(acquired: u16, observed: u16) -> vigil_shared::race::OwnReleases {
    vigil_shared::race::OwnReleases { acquired, observed }
}

/// An atomic read says which of its own CTA's releases it read, for the
/// same-block check: a release at block or device scope (or a relaxed
/// write after a release fence of the CTA) read by an acquire names the
/// epoch the release ended; a relaxed read only observes it; a relaxed
/// write with no fence before it releases nothing; a release passed on
/// through another CTA's release is named too.
#[test]
fn an_atomic_read_names_the_releases_of_its_own_cta_it_read() {
    let mut h = Harness::new(1, 1024, 64, &[0]);
    let store = AtomicOpKind::Store;
    let load = AtomicOpKind::Load;
    h.step(0, &launch(0, 2));
    // CTA 0 starts in epoch 1; a release ends it.
    own(&mut h, at(0, 0, 0, store, Release, Scope::Block));
    assert_eq!(
        own(&mut h, at(0, 0, 0, load, Acquire, Scope::Block)),
        known(1, 0)
    );
    assert_eq!(
        own(&mut h, at(0, 0, 0, load, Relaxed, Scope::Block)),
        known(0, 1)
    );
    // Epoch 2: a relaxed store with no fence releases nothing.
    own(&mut h, at(0, 0, 4, store, Relaxed, Scope::Device));
    assert_eq!(
        own(&mut h, at(0, 0, 4, load, Acquire, Scope::Device)),
        known(0, 0)
    );
    // A block-scope release fence ends epoch 2; a relaxed store after it
    // releases up to it.
    h.step(0, &fence(0, 0, Release, Scope::Block));
    own(&mut h, at(0, 0, 8, store, Relaxed, Scope::Block));
    assert_eq!(
        own(&mut h, at(0, 0, 8, load, Acquire, Scope::Block)),
        known(2, 0)
    );
    // Epoch 3: CTA 0 releases at device scope; CTA 1 acquires it and
    // releases; CTA 0 reading CTA 1's release learns its own epoch 3.
    own(&mut h, at(0, 0, 12, store, Release, Scope::Device));
    assert_eq!(
        own(&mut h, at(0, 1, 12, load, Acquire, Scope::Device)),
        known(0, 0)
    );
    own(&mut h, at(0, 1, 16, store, Release, Scope::Device));
    assert_eq!(
        own(&mut h, at(0, 0, 16, load, Acquire, Scope::Device)),
        known(3, 0)
    );
    // Another CTA's read of CTA 0's block-scope release learns nothing.
    assert_eq!(
        own(&mut h, at(0, 1, 0, load, Acquire, Scope::Device)),
        known(0, 0)
    );
    assert!(!h.bounded);
}

/// What a read learns of its own CTA's releases follows release
/// sequences and ignores scope: a read-modify-write by another CTA keeps
/// the release it continues, a plain atomic store ends it; a block-scope
/// release is read by a device-scope acquire of its own CTA; a relaxed
/// read observes what an acquiring one would have acquired.
#[test]
fn own_releases_follow_release_sequences_whatever_the_scope() {
    let mut h = Harness::new(1, 1024, 64, &[0]);
    let (store, load, rmw) = (AtomicOpKind::Store, AtomicOpKind::Load, AtomicOpKind::Rmw);
    h.step(0, &launch(0, 2));
    // Epoch 1 ends with a block-scope release; a device-scope acquire of
    // the same CTA reads it.
    own(&mut h, at(0, 0, 0, store, Release, Scope::Block));
    assert_eq!(
        own(&mut h, at(0, 0, 0, load, Acquire, Scope::Device)),
        known(1, 0)
    );
    // Epoch 2 ends with a device-scope release that CTA 1 continues with
    // a relaxed add: the sequence still carries CTA 0's release.
    own(&mut h, at(0, 0, 4, store, Release, Scope::Device));
    own(&mut h, at(0, 1, 4, rmw, Relaxed, Scope::Device));
    assert_eq!(
        own(&mut h, at(0, 0, 4, load, Relaxed, Scope::Device)),
        known(0, 2)
    );
    assert_eq!(
        own(&mut h, at(0, 0, 4, load, Acquire, Scope::Device)),
        known(2, 0)
    );
    // A relaxed store by CTA 1 ends the sequence: nothing of CTA 0's is
    // left to read.
    own(&mut h, at(0, 1, 4, store, Relaxed, Scope::Device));
    assert_eq!(
        own(&mut h, at(0, 0, 4, load, Acquire, Scope::Device)),
        known(0, 0)
    );
    assert!(!h.bounded);
}
