//! Line summaries ([`vigil_shared::line`]) against the per-word engine and
//! the reference oracle: random programs mixing whole-line warp accesses
//! with partial, atomic and synchronising accesses of the same lines. The
//! summary must give every access the verdict the per-word engine gives
//! (and the oracle's, within capacity) and leave every word in the same
//! state. At scale: thousands of sanitizer threads, ids past the compact
//! cell's 11 bits, lines read by many threads at once.

mod common;

use std::cell::RefCell;

use common::*;
use proptest::prelude::*;
use vigil_shared::engine::{AtomicOpKind, Outcome};
use vigil_shared::{Ordering, Scope};

const LINES: u64 = 3;
const WORDS: usize = LINES as usize * 32;
const PROGRAMS: u32 = 3_000;

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Block), Just(Scope::Device), Just(Scope::System)]
}

fn ordering() -> impl Strategy<Value = Ordering> {
    prop_oneof![
        Just(Ordering::Relaxed),
        Just(Ordering::Acquire),
        Just(Ordering::Release),
        Just(Ordering::AcqRel),
    ]
}

/// One step over `LINES` lines by `threads` threads (`tid` picks from
/// them; at scale it favours the ends of the range, where the compact
/// widths end).
fn op(tid: BoxedStrategy<u32>) -> impl Strategy<Value = Op> {
    let whole = (tid.clone(), 0..LINES, any::<bool>()).prop_map(|(t, l, w)| line(t, l, w));
    let partial = (
        tid.clone(),
        0..LINES * 128,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8), Just(16), Just(64)],
        any::<bool>(),
    )
        .prop_map(|(t, addr, size, write)| {
            let addr = addr & !(u64::from(size) - 1);
            plain(t, addr, size, write)
        });
    let atomic = (
        tid.clone(),
        0..WORDS as u64,
        prop_oneof![
            Just(AtomicOpKind::Load),
            Just(AtomicOpKind::Store),
            Just(AtomicOpKind::Rmw)
        ],
        ordering(),
        scope(),
    )
        .prop_map(|(t, w, kind, ord, scope)| Op::Atomic {
            tid: t,
            addr: w * 4,
            size: 4,
            kind,
            ord: match (kind, ord) {
                (AtomicOpKind::Load, Ordering::Release | Ordering::AcqRel) => Ordering::Acquire,
                (AtomicOpKind::Store, Ordering::Acquire | Ordering::AcqRel) => Ordering::Release,
                _ => ord,
            },
            fail: Ordering::Relaxed,
            scope,
            succeeds: true,
        });
    let fence = (tid, ordering(), scope()).prop_map(|(t, o, s)| fence(t, o, s));
    // Whole lines, or a run of words that splits the lines at its ends.
    let freed = (0..WORDS as u64, 1..=WORDS as u64, any::<bool>()).prop_map(|(w, n, lines)| {
        let (w, n) = if lines {
            (w / 32 * 32, n.div_ceil(32) * 32)
        } else {
            (w, n)
        };
        free(w * 4, n.min(WORDS as u64 - w) * 4)
    });
    prop_oneof![
        10 => whole,
        5 => partial,
        3 => atomic,
        1 => fence,
        1 => Just(Op::Kernel),
        1 => freed,
    ]
}

#[derive(Default, Debug)]
struct Figures {
    programs: u32,
    lines: u32,
    summarised: u32,
    races: u32,
    exact_programs: u32,
}

/// Runs `p` through the summary engine, the per-word engine and the
/// oracle; checks verdicts and final states.
fn check(p: &Program, clock_buffer: u32, f: &mut Figures) -> Result<(), TestCaseError> {
    let mut oracle = Oracle::new(p.num_sms, p.num_devices, WORDS * 4);
    oracle.join_heads = p.threads() > 64;
    let new = || Harness::with_clock_buffer(p.num_sms, p.num_devices, WORDS, 4096, clock_buffer);
    let (mut summary, mut words) = (new(), new());
    words.lines_as_words = true;
    let mut exact = true;
    for (i, op) in p.ops.iter().enumerate() {
        let o = oracle.step(op);
        let (s, w) = (summary.step(op), words.step(op));
        if matches!(op, Op::Line { .. }) {
            f.lines += 1;
        }
        let (Some(o), Some(s), Some(w)) = (o, s, w) else {
            continue;
        };
        prop_assert_eq!(
            s.is_race(),
            w.is_race(),
            "step {}: {:?}: summary {:?}, per word {:?}",
            i,
            op,
            s,
            w
        );
        prop_assert_eq!(s.is_error(), w.is_error());
        if let Outcome::Race(r) = s {
            f.races += 1;
            prop_assert!(
                o.contains(&r.prior_tid),
                "false positive at step {}: {:?}, oracle {:?}",
                i,
                r,
                o
            );
        }
        exact &= o.is_empty() != s.is_race();
    }
    f.programs += 1;
    f.summarised += summary.lines_summarised;
    prop_assert_eq!(summary.word_states(), words.word_states());
    if summary.evictions() + summary.merged_heads() + summary.coarsened() == 0 {
        f.exact_programs += 1;
        prop_assert!(exact, "within capacity the verdicts must be the oracle's");
    }
    Ok(())
}

fn run(
    programs: u32,
    strategy: impl Strategy<Value = Program>,
    clock_buffer: u32,
    name: &str,
) -> Figures {
    let mut runner = deterministic_runner(programs);
    let figures = RefCell::new(Figures::default());
    let result = runner.run(&strategy, |p| {
        check(&p, clock_buffer, &mut figures.borrow_mut())
    });
    let f = figures.into_inner();
    println!("{name}: {f:?}");
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    f
}

#[test]
fn summaries_match_the_per_word_engine_on_random_programs() {
    let program = (1u32..=4, 1u32..=2).prop_flat_map(|(sms, devices)| {
        let tid = (0..sms * devices).boxed();
        prop::collection::vec(op(tid), 1..40).prop_map(move |ops| Program {
            num_sms: sms,
            num_devices: devices,
            ops,
        })
    });
    let f = run(PROGRAMS, program, CLOCK_BUFFER, "small");
    // The generator must exercise both halves: summaries kept and split.
    assert!(f.summarised * 5 > f.lines, "{f:?}");
    assert!(f.summarised < f.lines, "{f:?}");
    assert!(f.races > 0 && f.exact_programs > f.programs / 2, "{f:?}");
}

/// 2,200 sanitizer threads (a GPU's SM slots): ids on both sides of the
/// compact cell's 2,048, programs where many threads read one line
/// (the summary cannot hold two readers: the line splits and its words
/// inflate), and kernels in between.
#[test]
fn summaries_match_at_the_scale_of_a_gpu() {
    const SMS: u32 = 1100;
    let tid = prop_oneof![0u32..8, 2040u32..2056, 2192u32..2200, 0u32..2200].boxed();
    let program = prop::collection::vec(op(tid), 20..120).prop_map(|ops| Program {
        num_sms: SMS,
        num_devices: 2,
        ops,
    });
    let f = run(6, program, 4, "scale");
    assert!(f.summarised > 0 && f.races > 0, "{f:?}");
}

/// Many readers of one line, then a writer: the summary must split to
/// keep every reader, and the write race with each unordered reader.
#[test]
fn many_readers_split_a_line_and_race_with_a_writer() {
    let mut ops: Vec<Op> = (0..64).map(|t| line(t * 33, 1, false)).collect();
    ops.push(line(5, 1, true));
    ops.push(plain(7, 128 + 60, 4, true));
    let p = Program {
        num_sms: 2200,
        num_devices: 1,
        ops,
    };
    let mut f = Figures::default();
    check(&p, 4, &mut f).unwrap();
    assert_eq!(f.races, 2, "{f:?}");
    // Only the first reader's access was summarised; the second split it.
    assert_eq!(f.summarised, 1, "{f:?}");
}
