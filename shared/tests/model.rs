//! The engine against the reference oracle: random programs (property
//! test with printed figures) and named regression scenarios.

mod common;

use std::cell::RefCell;

use common::*;
use proptest::prelude::*;
use vigil_shared::abi::{COMPACT_SHADOW_BYTES_PER_WORD, INFLATED_SHADOW_BYTES_PER_WORD};
use vigil_shared::engine::{AtomicOpKind, Outcome};
use vigil_shared::{Ordering, Scope};

const WORDS: usize = 4;
const PROGRAMS: u32 = 20_000;

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Block), Just(Scope::Device), Just(Scope::System)]
}

fn op(threads: u32) -> impl Strategy<Value = Op> {
    let tid = 0..threads;
    let plain = (
        tid.clone(),
        0..WORDS as u64 * 4,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
        any::<bool>(),
    )
        .prop_map(|(tid, addr, size, write)| {
            let addr = (addr & !(size as u64 - 1)).min(WORDS as u64 * 4 - size as u64);
            Op::Plain {
                tid,
                addr,
                size,
                write,
            }
        });
    // Mixed widths: 2-byte loads and stores (any half), 4- and 8-byte
    // atomics of every kind, overlapping each other.
    let atomic = (
        tid.clone(),
        0..WORDS as u64 * 2,
        prop_oneof![4 => Just(4u32), 1 => Just(8), 1 => Just(2)],
        prop_oneof![
            Just(AtomicOpKind::Load),
            Just(AtomicOpKind::Store),
            Just(AtomicOpKind::Rmw),
            Just(AtomicOpKind::CompareExchange)
        ],
        0..4u8,
        any::<bool>(),
        scope(),
        any::<bool>(),
    )
        .prop_map(
            |(tid, half, size, kind, o, acquire_fail, scope, succeeds)| {
                let word = half / 2;
                let addr = match size {
                    8 => (word & !1) * 4,
                    2 => half * 2,
                    _ => word * 4,
                };
                // PTX has 16-bit atomic loads and stores only.
                let kind = if size == 2 && !matches!(kind, AtomicOpKind::Load) {
                    AtomicOpKind::Store
                } else {
                    kind
                };
                let all = [
                    Ordering::Relaxed,
                    Ordering::Acquire,
                    Ordering::Release,
                    Ordering::AcqRel,
                ];
                let ord = match kind {
                    AtomicOpKind::Load => [Ordering::Relaxed, Ordering::Acquire][o as usize % 2],
                    AtomicOpKind::Store => [Ordering::Relaxed, Ordering::Release][o as usize % 2],
                    _ => all[o as usize],
                };
                let fail = if acquire_fail && ord.acquires() {
                    Ordering::Acquire
                } else {
                    Ordering::Relaxed
                };
                Op::Atomic {
                    tid,
                    addr,
                    size,
                    kind,
                    ord,
                    fail,
                    scope,
                    succeeds,
                }
            },
        );
    let fence = (
        tid,
        prop_oneof![
            Just(Ordering::Acquire),
            Just(Ordering::Release),
            Just(Ordering::AcqRel),
            Just(Ordering::SeqCst)
        ],
        scope(),
    )
        .prop_map(|(tid, ord, scope)| Op::Fence { tid, ord, scope });
    prop_oneof![10 => plain, 8 => atomic, 2 => fence, 1 => Just(Op::Kernel), 1 => freed_words(WORDS)]
}

/// Frees a random run of whole words among `words` (its records go back
/// to the pool; a later access starts a new history).
fn freed_words(words: usize) -> impl Strategy<Value = Op> {
    (0..words as u64, 1..=words as u64)
        .prop_map(move |(w, n)| free(w * 4, n.min(words as u64 - w) * 4))
}

/// A message-passing chain over `hops`: the first thread writes a data
/// word, each hop releases a flag (release store, release/acq_rel RMW, a
/// release fence then a relaxed store, or a plain relaxed store), optionally
/// another thread continues the release sequence with a relaxed RMW or
/// breaks it with a relaxed store, and the next thread acquires (acquire
/// load or RMW, relaxed load then acquire fence, failed CAS with acquire
/// failure ordering, or a relaxed load); the last thread then touches the
/// data. Every choice of scope and style is random, so the chain is
/// race-free or not depending on the memory model.
fn motif(threads: u32) -> impl Strategy<Value = Vec<Op>> {
    let hop = (
        0..threads,
        0..5u8,
        0..5u8,
        scope(),
        scope(),
        scope(),
        0..threads,
        0..4u8,
    );
    (
        0..threads,
        0..WORDS as u64,
        1..WORDS as u64,
        prop_oneof![Just(1u32), Just(2), Just(4)],
        any::<bool>(),
        prop::collection::vec(hop, 1..4),
    )
        .prop_map(|(first, data, flag_off, size, last_writes, hops)| {
            let flag = (data + flag_off) % WORDS as u64 * 4;
            let data = data * 4;
            let mut ops = vec![Op::Plain {
                tid: first,
                addr: data,
                size,
                write: true,
            }];
            let mut from = first;
            for (to, rel, acq, s_rel, s_acq, s_mid, mid, middle) in hops {
                match rel {
                    0 => ops.push(store(from, flag, Ordering::Release, s_rel)),
                    1 => ops.push(rmw(
                        from,
                        flag,
                        if s_rel == Scope::Block {
                            Ordering::Release
                        } else {
                            Ordering::AcqRel
                        },
                        s_rel,
                    )),
                    2 => {
                        ops.push(fence(from, Ordering::Release, s_rel));
                        ops.push(store(from, flag, Ordering::Relaxed, s_mid));
                    }
                    3 => ops.push(rmw(from, flag, Ordering::Release, s_rel)),
                    _ => ops.push(store(from, flag, Ordering::Relaxed, s_rel)),
                }
                match middle {
                    0 => ops.push(rmw(mid, flag, Ordering::Relaxed, s_mid)),
                    1 => ops.push(store(mid, flag, Ordering::Relaxed, s_mid)),
                    _ => {}
                }
                match acq {
                    0 => ops.push(load(to, flag, Ordering::Acquire, s_acq)),
                    1 => ops.push(rmw(to, flag, Ordering::Acquire, s_acq)),
                    2 => {
                        ops.push(load(to, flag, Ordering::Relaxed, s_acq));
                        ops.push(fence(to, Ordering::Acquire, s_mid));
                    }
                    3 => ops.push(cas(
                        to,
                        flag,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                        s_acq,
                        false,
                    )),
                    _ => ops.push(load(to, flag, Ordering::Relaxed, s_acq)),
                }
                from = to;
            }
            ops.push(Op::Plain {
                tid: from,
                addr: data,
                size,
                write: last_writes,
            });
            ops
        })
}

/// Many threads reading one word (plain or atomic, any bytes), then one
/// writing it: pushes words past the record's capacity.
fn readers(threads: u32) -> impl Strategy<Value = Vec<Op>> {
    let read = (
        0..threads,
        0..4u64,
        prop_oneof![Just(1u32), Just(2), Just(4)],
        any::<bool>(),
        scope(),
    );
    (
        0..WORDS as u64,
        prop::collection::vec(read, 4..14),
        0..threads,
        any::<bool>(),
    )
        .prop_map(|(word, reads, writer, atomic_write)| {
            let mut ops: Vec<Op> = reads
                .into_iter()
                .map(|(tid, off, size, atomic, scope)| {
                    if atomic {
                        load(tid, word * 4, Ordering::Relaxed, scope)
                    } else {
                        let off = (off & !(size as u64 - 1)).min(4 - size as u64);
                        Op::Plain {
                            tid,
                            addr: word * 4 + off,
                            size,
                            write: false,
                        }
                    }
                })
                .collect();
            ops.push(if atomic_write {
                rmw(writer, word * 4, Ordering::Relaxed, Scope::Device)
            } else {
                plain(writer, word * 4, 4, true)
            });
            ops
        })
}

fn program() -> impl Strategy<Value = Program> {
    (1u32..=3, 1u32..=3).prop_flat_map(|(sms, devices)| {
        let n = sms * devices;
        let segment = prop_oneof![
            3 => prop::collection::vec(op(n), 1..12),
            3 => motif(n),
            1 => readers(n),
        ];
        let segments = prop_oneof![
            2 => prop::collection::vec(segment.clone(), 1..5),
            1 => motif(n).prop_map(|m| vec![m]),
        ];
        segments.prop_map(move |segments| Program {
            num_sms: sms,
            num_devices: devices,
            ops: segments.into_iter().flatten().collect(),
        })
    })
}

#[derive(Default)]
struct Figures {
    programs: u32,
    false_positives: u32,
    exact: u32,
    exact_total: u32,
    over_capacity: u32,
    over_races: u32,
    over_detected: u32,
    errors: u32,
    racy_programs: u32,
    accesses: u32,
}

#[test]
fn engine_matches_oracle_on_random_programs() {
    let mut runner = deterministic_runner(PROGRAMS);
    let figures = RefCell::new(Figures::default());
    let result = runner.run(&program(), |p| {
        let c = compare(&p, WORDS);
        let mut f = figures.borrow_mut();
        f.programs += 1;
        if c.errors > 0 {
            f.errors += 1;
        }
        let mut fp = 0;
        let mut exact = true;
        let (mut races, mut detected) = (0, 0);
        for (i, (oracle, engine)) in c.steps.iter().enumerate() {
            let o = !oracle.is_empty();
            let e = engine.is_race();
            if let Outcome::Race(r) = engine {
                if !o || !oracle.contains(&r.prior_tid) {
                    fp += 1;
                    f.false_positives += fp;
                    drop(f);
                    prop_assert!(
                        false,
                        "false positive at access {i}: engine {r:?}, oracle {oracle:?}"
                    );
                    unreachable!();
                }
            }
            races += o as u32;
            detected += (o && e) as u32;
            exact &= o == e;
        }
        f.false_positives += fp;
        f.racy_programs += (races > 0) as u32;
        f.accesses += c.steps.len() as u32;
        if c.errors > 0 {
            return Ok(());
        }
        if c.precision_lost == 0 {
            f.exact_total += 1;
            f.exact += exact as u32;
            drop(f);
            prop_assert!(
                exact,
                "within capacity the engine must match the oracle exactly: {:?}\nprogram {:?}",
                c.steps,
                p
            );
        } else {
            f.over_capacity += 1;
            f.over_races += races;
            f.over_detected += detected;
        }
        Ok(())
    });
    let f = figures.into_inner();
    println!("programs checked: {}", f.programs);
    println!("accesses checked: {}", f.accesses);
    println!(
        "programs with races: {} (race-free: {})",
        f.racy_programs,
        f.programs - f.racy_programs
    );
    println!("false positives: {}", f.false_positives);
    println!("exact matches: {}/{}", f.exact, f.exact_total);
    println!("over-capacity programs: {}", f.over_capacity);
    let rate = if f.over_races == 0 {
        100.0
    } else {
        100.0 * f.over_detected as f64 / f.over_races as f64
    };
    println!("over-capacity detection rate: {rate:.1}%");
    println!("programs with engine errors: {}", f.errors);
    println!("shadow bytes per word: compact {COMPACT_SHADOW_BYTES_PER_WORD}, inflated {INFLATED_SHADOW_BYTES_PER_WORD}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(f.programs >= PROGRAMS);
    assert_eq!(f.false_positives, 0);
    assert_eq!(f.errors, 0);
}

/// Random programs on a pool of at most one record: words that would need
/// more stay compact with older clocks dropped. Until the first engine
/// error (a word with release heads finding no record), every race the
/// engine reports is one the oracle sees, with the same earlier thread.
#[test]
fn a_full_pool_degrades_without_false_positives() {
    const FULL_POOL_PROGRAMS: u32 = 2_000;
    let mut runner = deterministic_runner(FULL_POOL_PROGRAMS);
    let (programs, degraded) = (RefCell::new(0u32), RefCell::new(0u32));
    let result = runner.run(&(program(), 0usize..=1), |(p, pool)| {
        let c = compare_in(&p, WORDS, pool, 32);
        *programs.borrow_mut() += 1;
        *degraded.borrow_mut() += (c.degraded > 0) as u32;
        for (i, (oracle, engine)) in c.steps.iter().enumerate() {
            if engine.is_error() {
                break;
            }
            if let Outcome::Race(r) = engine {
                prop_assert!(
                    oracle.contains(&r.prior_tid),
                    "false positive at access {i} on a full pool: engine {r:?}, oracle {oracle:?}"
                );
            }
        }
        Ok(())
    });
    let (programs, degraded) = (programs.into_inner(), degraded.into_inner());
    println!("full-pool programs checked: {programs}, degraded: {degraded}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(degraded > 0, "no program reached the degraded path");
}
