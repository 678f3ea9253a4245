//! The engine against the reference oracle: random programs (property
//! test with printed figures) and named regression scenarios.

mod common;

use std::cell::RefCell;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use vigil_shared::abi::{COMPACT_SHADOW_BYTES_PER_WORD, INFLATED_SHADOW_BYTES_PER_WORD};
use vigil_shared::engine::{AtomicOpKind, Outcome};
use vigil_shared::{Ordering, Scope};

const WORDS: usize = 4;
const PROGRAMS: u32 = 10_000;

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
    let atomic = (
        tid.clone(),
        0..WORDS as u64,
        prop_oneof![4 => Just(4u32), 1 => Just(8)],
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
            |(tid, word, size, kind, o, acquire_fail, scope, succeeds)| {
                let addr = if size == 8 { (word & !1) * 4 } else { word * 4 };
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
    prop_oneof![10 => plain, 8 => atomic, 2 => fence, 1 => Just(Op::Kernel)]
}

fn program() -> impl Strategy<Value = Program> {
    (1u32..=3, 1u32..=3).prop_flat_map(|(sms, devices)| {
        prop::collection::vec(op(sms * devices), 1..40).prop_map(move |ops| Program {
            num_sms: sms,
            num_devices: devices,
            ops,
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
}

#[test]
fn engine_matches_oracle_on_random_programs() {
    let config = Config {
        cases: PROGRAMS,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
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
        if c.errors > 0 {
            return Ok(());
        }
        if c.evictions == 0 {
            f.exact_total += 1;
            f.exact += exact as u32;
            drop(f);
            prop_assert!(
                exact,
                "within capacity the engine must match the oracle exactly: {:?}",
                c.steps
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
    println!("programs with races: {}", f.racy_programs);
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
