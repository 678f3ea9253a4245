//! Named regression scenarios (the GSan test list and then some), each run
//! through both the engine and the reference oracle: the verdict of the
//! last access is asserted for both, and every access must agree.

mod common;

use common::*;
use vigil_shared::abi::{
    ReportKind, ThreadStateHeader, COMPACT_SHADOW_BYTES_PER_WORD, INFLATED_SHADOW_BYTES_PER_WORD,
};
use vigil_shared::engine::Outcome;
use vigil_shared::report::{read_report, reports_written};
use vigil_shared::{Ordering::*, Scope::*};

const DATA: u64 = 0;
const FLAG: u64 = 8;
const FLAG2: u64 = 12;

/// Runs `ops` on `sms` x `devices` threads through both detectors, checks
/// they agree on every access, and returns the last access's outcome.
fn run(sms: u32, devices: u32, ops: &[Op]) -> Outcome {
    let p = Program {
        num_sms: sms,
        num_devices: devices,
        ops: ops.to_vec(),
    };
    let c = compare(&p, 4);
    for (i, (oracle, engine)) in c.steps.iter().enumerate() {
        assert_eq!(
            !oracle.is_empty(),
            engine.is_race(),
            "access {i}: oracle {oracle:?}, engine {engine:?}"
        );
    }
    c.steps.last().unwrap().1
}

fn race_kind(o: Outcome) -> Option<ReportKind> {
    match o {
        Outcome::Race(r) => r.report_kind(),
        _ => None,
    }
}

// ----- RAW / WAR / WAW across threads ---------------------------------------------

#[test]
fn raw_across_threads() {
    let o = run(2, 1, &[plain(0, DATA, 4, true), plain(1, DATA, 4, false)]);
    assert_eq!(race_kind(o), Some(ReportKind::ReadAfterWrite));
    let Outcome::Race(r) = o else { unreachable!() };
    assert_eq!((r.tid, r.prior_tid, r.prior_epoch), (1, 0, 1));
}

#[test]
fn war_across_threads() {
    assert_eq!(
        race_kind(run(
            2,
            1,
            &[plain(0, DATA, 4, false), plain(1, DATA, 4, true)]
        )),
        Some(ReportKind::WriteAfterRead)
    );
}

#[test]
fn waw_across_threads() {
    assert_eq!(
        race_kind(run(
            2,
            1,
            &[plain(0, DATA, 4, true), plain(1, DATA, 4, true)]
        )),
        Some(ReportKind::WriteAfterWrite)
    );
}

#[test]
fn same_thread_and_read_read_do_not_race() {
    assert_eq!(
        run(
            2,
            1,
            &[
                plain(0, DATA, 4, true),
                plain(0, DATA, 4, false),
                plain(0, DATA, 4, true)
            ]
        ),
        Outcome::Clean
    );
    assert_eq!(
        run(2, 1, &[plain(0, DATA, 4, false), plain(1, DATA, 4, false)]),
        Outcome::Clean
    );
}

#[test]
fn disjoint_bytes_of_one_word_do_not_race() {
    assert_eq!(
        run(
            2,
            1,
            &[
                plain(0, DATA, 1, true),
                plain(1, DATA + 1, 1, true),
                plain(1, DATA + 2, 2, false)
            ]
        ),
        Outcome::Clean
    );
    assert_eq!(
        race_kind(run(
            2,
            1,
            &[plain(0, DATA, 2, true), plain(1, DATA + 1, 1, false)]
        )),
        Some(ReportKind::ReadAfterWrite)
    );
}

#[test]
fn kernel_boundary_orders_everything_before() {
    assert_eq!(
        run(
            2,
            2,
            &[plain(0, DATA, 4, true), Op::Kernel, plain(3, DATA, 4, true)]
        ),
        Outcome::Clean
    );
}

// ----- release/acquire pairs in each scope --------------------------------------

fn message_passing(
    producer: u32,
    consumer: u32,
    rel: vigil_shared::Scope,
    acq: vigil_shared::Scope,
) -> Vec<Op> {
    vec![
        plain(producer, DATA, 4, true),
        store(producer, FLAG, Release, rel),
        load(consumer, FLAG, Acquire, acq),
        plain(consumer, DATA, 4, false),
    ]
}

#[test]
fn release_acquire_block_scope_only_orders_one_sm() {
    // Two SMs: a CTA-scope pair synchronises nothing across them.
    assert_eq!(
        race_kind(run(2, 1, &message_passing(0, 1, Block, Block))),
        Some(ReportKind::ReadAfterWrite)
    );
}

#[test]
fn release_acquire_device_scope() {
    assert_eq!(
        run(2, 2, &message_passing(0, 1, Device, Device)),
        Outcome::Clean
    );
    // Across devices a device-scope pair does not synchronise.
    assert!(run(2, 2, &message_passing(0, 2, Device, Device)).is_race());
}

#[test]
fn release_acquire_system_scope() {
    assert_eq!(
        run(2, 2, &message_passing(0, 3, System, System)),
        Outcome::Clean
    );
    // Both sides must include each other.
    assert!(run(2, 2, &message_passing(0, 3, System, Device)).is_race());
    assert_eq!(
        run(2, 2, &message_passing(0, 1, System, Device)),
        Outcome::Clean
    );
}

#[test]
fn acq_rel_rmw_pairs() {
    let ops = [
        plain(0, DATA, 4, true),
        rmw(0, FLAG, AcqRel, Device),
        rmw(1, FLAG, AcqRel, Device),
        plain(1, DATA, 4, true),
    ];
    assert_eq!(run(2, 1, &ops), Outcome::Clean);
}

// ----- relaxed and CTA-scope misuse ---------------------------------------------

#[test]
fn relaxed_flag_does_not_synchronise() {
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Relaxed, Device),
        load(1, FLAG, Acquire, Device),
        plain(1, DATA, 4, false),
    ];
    assert!(run(2, 1, &ops).is_race());
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        load(1, FLAG, Relaxed, Device),
        plain(1, DATA, 4, false),
    ];
    assert!(run(2, 1, &ops).is_race());
}

#[test]
fn cta_scope_atomics_race_across_sms() {
    let o = run(
        2,
        1,
        &[rmw(0, FLAG, Relaxed, Block), rmw(1, FLAG, Relaxed, Block)],
    );
    assert_eq!(race_kind(o), Some(ReportKind::ScopeMismatch));
}

#[test]
fn compatible_scope_atomics_do_not_race() {
    assert_eq!(
        run(
            2,
            2,
            &[rmw(0, FLAG, Relaxed, Device), rmw(1, FLAG, Relaxed, Device)]
        ),
        Outcome::Clean
    );
    assert!(run(
        2,
        2,
        &[rmw(0, FLAG, Relaxed, Device), rmw(2, FLAG, Relaxed, Device)]
    )
    .is_race());
    assert_eq!(
        run(
            2,
            2,
            &[rmw(0, FLAG, Relaxed, System), rmw(2, FLAG, Relaxed, System)]
        ),
        Outcome::Clean
    );
}

#[test]
fn atomic_and_plain_mix_races() {
    assert_eq!(
        race_kind(run(
            2,
            1,
            &[rmw(0, FLAG, Relaxed, Device), plain(1, FLAG, 4, false)]
        )),
        Some(ReportKind::AtomicNonAtomic)
    );
    // Two concurrent atomic writers, then a plain read ordered after only one.
    let ops = [
        store(0, FLAG, Relaxed, Device),
        store(1, FLAG, Relaxed, Device),
        plain(1, FLAG, 4, false),
    ];
    assert_eq!(
        race_kind(run(2, 1, &ops)),
        Some(ReportKind::AtomicNonAtomic)
    );
}

// ----- transitive release chains ------------------------------------------------

#[test]
fn transitive_release_chain() {
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        load(1, FLAG, Acquire, Device),
        store(1, FLAG2, Release, System),
        load(3, FLAG2, Acquire, System),
        plain(3, DATA, 4, true),
    ];
    assert_eq!(run(2, 2, &ops), Outcome::Clean);
    // Break the middle link: relaxed load.
    let mut broken = ops.to_vec();
    broken[2] = load(1, FLAG, Relaxed, Device);
    assert!(run(2, 2, &broken).is_race());
}

// ----- RMW release sequences ----------------------------------------------------

#[test]
fn rmw_continues_release_sequence() {
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        rmw(1, FLAG, Relaxed, Device),
        load(2, FLAG, Acquire, Device),
        plain(2, DATA, 4, false),
    ];
    assert_eq!(run(3, 1, &ops), Outcome::Clean);
}

#[test]
fn plain_or_relaxed_store_ends_release_sequence() {
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        store(1, FLAG, Relaxed, Device),
        load(2, FLAG, Acquire, Device),
        plain(2, DATA, 4, false),
    ];
    assert!(run(3, 1, &ops).is_race());
}

#[test]
fn mixed_scope_release_sequence_keeps_each_heads_scope() {
    // Release at device scope on device 0, continued by a system-scope RMW,
    // acquired at system scope on device 1: the head's scope excludes the
    // acquirer, so no synchronisation (GSan rejects this case).
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        rmw(1, FLAG, Relaxed, System),
        load(2, FLAG, Acquire, System),
        plain(2, DATA, 4, false),
    ];
    assert!(run(2, 2, &ops).is_race());
    // The same with a system-scope release synchronises through the RMW.
    let mut ok = ops.to_vec();
    ok[1] = store(0, FLAG, Release, System);
    assert_eq!(run(2, 2, &ok), Outcome::Clean);
    // A device-scope acq_rel RMW on device 0 adds its own head: the consumer
    // on device 0 then synchronises with both releasers.
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, System),
        plain(1, DATA + 4, 4, true),
        rmw(1, FLAG, AcqRel, Device),
        load(0, FLAG, Acquire, Device),
        plain(0, DATA + 4, 4, false),
    ];
    assert_eq!(run(2, 2, &ops), Outcome::Clean);
}

#[test]
fn failed_cas_is_a_read() {
    // A failed CAS reads: it races with a plain write, as an atomic read.
    assert_eq!(
        race_kind(run(
            2,
            1,
            &[
                plain(0, FLAG, 4, true),
                cas(1, FLAG, AcqRel, Relaxed, Device, false)
            ]
        )),
        Some(ReportKind::AtomicNonAtomic)
    );
    // ... and does not race with an earlier plain read.
    assert_eq!(
        run(
            2,
            1,
            &[
                plain(0, FLAG, 4, false),
                cas(1, FLAG, AcqRel, Relaxed, Device, false)
            ]
        ),
        Outcome::Clean
    );
    // With acquire failure ordering it acquires.
    let ops = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        cas(1, FLAG, AcqRel, Acquire, Device, false),
        plain(1, DATA, 4, true),
    ];
    assert_eq!(run(2, 1, &ops), Outcome::Clean);
}

// ----- fences -------------------------------------------------------------------

#[test]
fn fence_patterns_synchronise() {
    let ops = [
        plain(0, DATA, 4, true),
        fence(0, Release, Device),
        store(0, FLAG, Relaxed, Device),
        load(1, FLAG, Relaxed, Device),
        fence(1, Acquire, Device),
        plain(1, DATA, 4, false),
    ];
    assert_eq!(run(2, 1, &ops), Outcome::Clean);
    // A CTA-scope fence does not order across SMs.
    let mut cta = ops.to_vec();
    cta[4] = fence(1, Acquire, Block);
    assert!(run(2, 1, &cta).is_race());
    // Across devices the fence must be system scope.
    let mut dev = ops.to_vec();
    dev[3] = load(2, FLAG, Relaxed, System);
    dev[2] = store(0, FLAG, Relaxed, System);
    dev[4] = fence(2, SeqCst, Device);
    dev[5] = plain(2, DATA, 4, false);
    assert!(run(2, 2, &dev).is_race());
    dev[1] = fence(0, AcqRel, System);
    dev[4] = fence(2, SeqCst, System);
    assert_eq!(run(2, 2, &dev), Outcome::Clean);
}

#[test]
fn sc_fences_order_plain_accesses() {
    // Two fence.sc with scopes covering each other: one precedes the other
    // in SC order, so the accesses around them are ordered (no flag needed).
    let sc = |dev_scope| {
        vec![
            plain(0, DATA, 4, true),
            fence(0, SeqCst, dev_scope),
            fence(1, SeqCst, dev_scope),
            plain(1, DATA, 4, true),
        ]
    };
    assert_eq!(run(2, 1, &sc(Device)), Outcome::Clean);
    // acq_rel fences alone order nothing.
    let mut acq_rel = sc(Device);
    acq_rel[1] = fence(0, AcqRel, Device);
    assert!(run(2, 1, &acq_rel).is_race());
    // Across devices both need system scope.
    let cross = |s0, s1| {
        vec![
            plain(0, DATA, 4, true),
            fence(0, SeqCst, s0),
            fence(2, SeqCst, s1),
            plain(2, DATA, 4, true),
        ]
    };
    assert!(run(2, 2, &cross(Device, System)).is_race());
    assert!(run(2, 2, &cross(System, Device)).is_race());
    assert_eq!(run(2, 2, &cross(System, System)), Outcome::Clean);
    // A device-scope SC fence pairs with a system one on its own device.
    let mut mixed = cross(System, System);
    mixed[2] = fence(1, SeqCst, Device);
    mixed[3] = plain(1, DATA, 4, true);
    assert_eq!(run(2, 2, &mixed), Outcome::Clean);
}

// ----- budget, capacity and errors ---------------------------------------------

#[test]
fn common_states_stay_compact() {
    assert_eq!(COMPACT_SHADOW_BYTES_PER_WORD, 8);
    assert_eq!(INFLATED_SHADOW_BYTES_PER_WORD, 136);
    let mut h = Harness::new(2, 1, 4, 16);
    // Written by one thread, read since by one other; plain and atomic.
    for op in [
        plain(0, DATA, 4, true),
        Op::Kernel,
        plain(1, DATA, 4, false),
        rmw(0, FLAG, Relaxed, Device),
        load(1, FLAG, Acquire, Device),
    ] {
        h.step(&op);
    }
    assert_eq!(h.pool_used(), 0, "common states must not inflate");
    // Two concurrent readers inflate.
    h.step(&plain(0, DATA, 4, false));
    assert_eq!(h.pool_used(), 1);
    // A release needs a release head: inflates too.
    h.step(&store(0, FLAG2, Release, Device));
    assert_eq!(h.pool_used(), 2);
}

/// Nine unordered readers on one word, then a write by a tenth thread
/// ordered after none.
fn nine_readers_then_a_writer() -> Program {
    let mut ops: Vec<Op> = (0..9).map(|t| plain(t, DATA, 4, false)).collect();
    ops.push(plain(9, DATA, 4, true));
    Program {
        num_sms: 10,
        num_devices: 1,
        ops,
    }
}

#[test]
fn a_long_access_history_grows_a_chain_and_stays_exact() {
    // The ninth reader overflows the record: its oldest clock moves to a
    // chain record, nothing is evicted, the writer races with all nine.
    let c = compare(&nine_readers_then_a_writer(), 4);
    assert_eq!(c.precision_lost, 0);
    assert!(c.steps.iter().all(|(o, e)| o.is_empty() != e.is_race()));
    let mut racing = c.steps.last().unwrap().0.clone();
    racing.sort_unstable();
    racing.dedup();
    assert_eq!(
        racing,
        (0..9).collect::<Vec<_>>(),
        "the oracle's racing readers"
    );

    // A write ordered after every reader subsumes them: the chain record
    // goes back to the pool, and the next long history reuses it.
    let mut h = Harness::new(11, 1, 4, 16);
    for t in 0..9 {
        h.step(&plain(t, DATA, 4, false));
    }
    assert_eq!((h.pool_used(), h.pool_in_use()), (2, 2));
    h.step(&Op::Kernel);
    assert_eq!(h.step(&plain(9, DATA, 4, true)), Some(Outcome::Clean));
    assert_eq!((h.pool_used(), h.pool_in_use()), (2, 1));
    h.step(&Op::Kernel);
    for t in 0..9 {
        assert_eq!(h.step(&plain(t, DATA, 4, false)), Some(Outcome::Clean));
    }
    assert_eq!((h.pool_used(), h.pool_in_use()), (2, 2));
    assert_eq!(h.evictions(), 0);
}

#[test]
fn over_capacity_still_catches_the_writer_race() {
    // A pool of one record has none for a chain: eviction (counted) loses
    // some readers, never the race.
    let c = compare_in(&nine_readers_then_a_writer(), 4, 1, CLOCK_BUFFER);
    assert!(c.precision_lost > 0);
    assert_eq!(c.errors, 0);
    assert!(c.steps.last().unwrap().1.is_race());
}

#[test]
fn reports_reach_the_buffer_with_prior_thread_and_epoch() {
    let mut h = Harness::new(2, 1, 4, 16);
    h.step(&plain(0, DATA, 4, true));
    h.step(&Op::Kernel);
    h.step(&store(0, FLAG, Release, Device));
    h.step(&plain(0, DATA + 4, 4, true)); // epoch 3 after the release
    h.step(&plain(1, DATA + 4, 2, false));
    assert_eq!(
        reports_written::<vigil_shared::atomic::CoreAtomics>(h.reports()),
        1
    );
    let r = read_report::<vigil_shared::atomic::CoreAtomics>(h.reports(), 0).unwrap();
    assert_eq!(r.report_kind(), Some(ReportKind::ReadAfterWrite));
    assert_eq!(
        (
            r.address,
            r.size,
            r.tid,
            r.prior_tid,
            r.prior_epoch,
            r.overlap_mask
        ),
        (4, 2, 1, 0, 3, 0b0011)
    );
}

#[test]
fn epoch_overflow_is_an_error_not_a_verdict() {
    let mut h = Harness::new(2, 1, 4, 16);
    // Drive thread 0's epoch to the limit by hand, published.
    h.set_thread_word(0, ThreadStateHeader::WORDS, vigil_shared::clock::MAX_EPOCH);
    h.set_thread_word(
        0,
        ThreadStateHeader::DIRTY_WORD,
        ThreadStateHeader::PUBLISHED,
    );
    match h.step(&plain(0, DATA, 4, true)).unwrap() {
        Outcome::Error(r) => assert_eq!(r.report_kind(), Some(ReportKind::EpochOverflow)),
        o => panic!("expected an epoch overflow error, got {o:?}"),
    }
}

/// Runs `ops` on `threads` threads of one device over `words` words through
/// both detectors; returns the comparison.
fn run_wide(threads: u32, words: usize, ops: Vec<Op>) -> Comparison {
    compare(
        &Program {
            num_sms: threads,
            num_devices: 1,
            ops,
        },
        words,
    )
}

/// One producer publishes 4,096 tiles (data word, then a release store of
/// the tile's own flag) before a lagging consumer acquires the first flag:
/// only the producer's own entry changes between the releases, so they
/// share one snapshot and the engine stays exact.
#[test]
fn lagging_consumer_of_4096_releases_is_exact() {
    const TILES: u64 = 4096;
    let mut ops = Vec::new();
    for t in 0..TILES {
        ops.push(plain(0, 8 * t, 4, true));
        ops.push(store(0, 8 * t + 4, Release, Device));
    }
    for t in [0, 1, TILES / 2, TILES - 1] {
        ops.push(load(1, 8 * t + 4, Acquire, Device));
        ops.push(plain(1, 8 * t, 4, false));
    }
    // A tile written again after its release races with the reader.
    ops.push(plain(0, 8, 4, true));
    let c = run_wide(2, 2 * TILES as usize, ops);
    assert_eq!((c.errors, c.precision_lost), (0, 0));
    for (i, (oracle, engine)) in c.steps.iter().enumerate() {
        assert_eq!(!oracle.is_empty(), engine.is_race(), "access {i}");
    }
    assert!(c.steps.last().unwrap().1.is_race());
    assert_eq!(c.steps.iter().filter(|s| s.1.is_race()).count(), 1);
}

/// A producer that acquires between its releases needs a snapshot per
/// release, so its buffer wraps before a lagging consumer acquires its
/// first flag; a word written after that release races with the
/// consumer's read. Returns the program and its words.
fn producer_outrunning_its_buffer() -> (Program, usize) {
    let n = u64::from(CLOCK_BUFFER) + 4;
    let mut ops = vec![plain(0, 0, 4, true), store(0, 4, Release, Device)];
    // Written after the first release: racy for a reader of the first flag.
    ops.push(plain(0, 8, 4, true));
    for t in 1..=n {
        ops.push(store(2, 12, Release, Device));
        ops.push(load(0, 12, Acquire, Device));
        ops.push(store(0, 16 + 4 * t, Release, Device));
    }
    ops.push(load(1, 4, Acquire, Device));
    ops.push(plain(1, 0, 4, false));
    ops.push(plain(1, 8, 4, false));
    let p = Program {
        num_sms: 3,
        num_devices: 1,
        ops,
    };
    (p, 24 + 4 * n as usize)
}

/// The first flag's head still names the overwritten snapshot: it moved to
/// the pool, the lagging acquire reads it exactly, and it goes back to the
/// pool once no head names it.
#[test]
fn a_snapshot_still_named_when_its_slot_is_reused_spills_into_the_pool() {
    let (p, words) = producer_outrunning_its_buffer();
    let c = compare(&p, words);
    assert_eq!((c.errors, c.precision_lost), (0, 0));
    for (i, (oracle, engine)) in c.steps.iter().enumerate() {
        assert_eq!(!oracle.is_empty(), engine.is_race(), "access {i}");
    }
    assert!(c.steps.last().unwrap().1.is_race(), "the race is found");

    let mut h = Harness::new(3, 1, words, 4096);
    for op in &p.ops {
        h.step(op);
    }
    // Every flag's head names its own snapshot: the ring of 64 wrapped
    // five times under named snapshots (the first five flags').
    assert_eq!(h.spilled_snapshots(), 5);
    let in_use = h.pool_in_use();
    // A plain write ends the first flag's release sequence: its head goes,
    // and with it the spilled snapshot (one record for three threads).
    h.step(&plain(1, 4, 4, true));
    assert_eq!((h.spilled_snapshots(), h.pool_in_use()), (4, in_use - 1));
}

/// A word with release heads finding the pool full takes the records of
/// spilled snapshots rather than failing (their acquirers would coarsen).
#[test]
fn spilled_snapshots_give_way_to_a_word_with_release_heads() {
    let (p, words) = producer_outrunning_its_buffer();
    let extra = 24;
    let mut h = Harness::new(3, 1, words + extra, 96);
    for op in &p.ops {
        h.step(op);
    }
    assert_eq!(h.spilled_snapshots(), 5);
    // New flags fill the pool; those finding it full take the spilled
    // snapshots' records.
    for k in 0..extra {
        let o = h.step(&store(2, 4 * (words + k) as u64, Release, Device));
        assert!(!o.unwrap().is_error(), "flag {k}");
    }
    assert_eq!((h.spilled_snapshots(), h.pool_used()), (0, 96));
}

/// With no pool record to spare, the overwritten snapshot is only in the
/// overflow clock: no error and no false report, only (counted) races
/// missed against accesses made after that release.
#[test]
fn overwritten_snapshot_degrades_to_the_overflow_clock() {
    let (p, words) = producer_outrunning_its_buffer();
    // One record per word with release heads, none for a spill.
    let c = compare_in(
        &p,
        words,
        2 + u64::from(CLOCK_BUFFER) as usize + 4,
        CLOCK_BUFFER,
    );
    assert_eq!(c.errors, 0);
    assert!(c.precision_lost > 0, "the snapshot was not overwritten");
    for (i, (oracle, engine)) in c.steps.iter().enumerate() {
        assert!(
            oracle.len() >= engine.is_race() as usize,
            "access {i}: false report"
        );
    }
    let last = c.steps.len() - 1;
    assert!(c.steps[last - 1].0.is_empty() && !c.steps[last - 1].1.is_race());
    assert!(!c.steps[last].0.is_empty(), "the oracle sees the race");
    assert!(!c.steps[last].1.is_race(), "missed, as documented");
}

#[test]
fn a_full_pool_keeps_words_without_heads_compact_and_counts_it() {
    // Two concurrent readers need a record; with none left the word keeps
    // the newest read (counted), and the writer racing with both is still
    // caught.
    let mut h = Harness::new(3, 1, 4, 0);
    h.step(&plain(0, DATA, 4, false));
    assert_eq!(h.step(&plain(1, DATA, 4, false)), Some(Outcome::Clean));
    assert_eq!(h.degraded(), 1);
    match h.step(&plain(2, DATA, 4, true)).unwrap() {
        Outcome::Race(r) => assert_eq!(r.prior_tid, 1),
        o => panic!("expected the write to race, got {o:?}"),
    }
    // A memset-like plain write then an ordered atomic from another thread
    // (two write clocks) degrades too, and atomics after it stay clean.
    let mut h = Harness::new(3, 1, 4, 0);
    h.step(&plain(0, FLAG, 4, true));
    h.step(&Op::Kernel);
    assert_eq!(h.step(&rmw(1, FLAG, Relaxed, Device)), Some(Outcome::Clean));
    assert_eq!(h.step(&rmw(2, FLAG, Relaxed, Device)), Some(Outcome::Clean));
    assert!(h.degraded() >= 1);
}

#[test]
fn pool_exhaustion_with_release_heads_is_an_error_not_a_verdict() {
    // A release head cannot be dropped (an acquirer would then report
    // false races): with no record left that is an error.
    let mut h = Harness::new(3, 1, 4, 0);
    match h.step(&store(0, FLAG, Release, Device)).unwrap() {
        Outcome::Error(r) => assert_eq!(r.report_kind(), Some(ReportKind::ShadowPoolExhausted)),
        o => panic!("expected a pool error, got {o:?}"),
    }
}

// ----- spinning acquirers --------------------------------------------------------

/// A poller joins a release it reads again only once
/// (`ThreadClocks::acquired_before`), yet misses nothing: the same
/// snapshot released again at a later epoch (a release that changed only
/// the releaser's own entry shares its snapshot) is joined again, and a
/// relaxed poll's pending join does not stand for an acquire's.
#[test]
fn a_poller_joins_each_release_once_and_misses_none() {
    const DATA2: u64 = 4;
    // Polls, then the same flag released again after a second write.
    let again = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        load(1, FLAG, Acquire, Device),
        load(1, FLAG, Acquire, Device),
        load(1, FLAG, Acquire, Device),
        plain(1, DATA, 4, false),
        plain(0, DATA2, 4, true),
        store(0, FLAG, Release, Device),
        load(1, FLAG, Acquire, Device),
        plain(1, DATA2, 4, false),
    ];
    assert!(matches!(run(2, 1, &again), Outcome::Clean));
    // Without the second release the second write races with the read.
    let unpublished = [&again[..7], &again[8..]].concat();
    assert_eq!(
        race_kind(run(2, 1, &unpublished)),
        Some(ReportKind::ReadAfterWrite)
    );
    // Relaxed polls (pending joins), then an acquiring one.
    let relaxed_first = [
        plain(0, DATA, 4, true),
        store(0, FLAG, Release, Device),
        load(1, FLAG, Relaxed, Device),
        load(1, FLAG, Relaxed, Device),
        load(1, FLAG, Acquire, Device),
        plain(1, DATA, 4, false),
    ];
    assert!(matches!(run(2, 1, &relaxed_first), Outcome::Clean));
    // Relaxed polls only: nothing acquired, the read races.
    let relaxed_only = [&relaxed_first[..4], &relaxed_first[5..]].concat();
    assert_eq!(
        race_kind(run(2, 1, &relaxed_only)),
        Some(ReportKind::ReadAfterWrite)
    );
    // Relaxed polls, then an acquire fence: the pending join serves it.
    let fenced = [
        &relaxed_first[..4],
        &[fence(1, Acquire, Device), plain(1, DATA, 4, false)][..],
    ]
    .concat();
    assert!(matches!(run(2, 1, &fenced), Outcome::Clean));
}
