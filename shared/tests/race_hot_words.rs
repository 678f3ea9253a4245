//! Atomics hammering a few words (histograms, counters, spin locks) at the
//! scale of a GPU: the shared path (an atomic that would change nothing
//! in its word's record runs holding it shared) gives the verdicts of the
//! locked path, step by step, and the model's; and it is the path such
//! traffic takes.

mod race_model;

use race_model::{compare, compare_shared_path, Harness, Rng, Step};
use vigil_shared::race::atomic::AtomicOpKind;
use vigil_shared::race::desc::CellTag;
use vigil_shared::{Ordering, Scope};

use AtomicOpKind::{CompareExchange, Load, Rmw, Store};
use Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

/// Bytes of memory the programs use: data words, then the hot words.
const BYTES: usize = 1024;
/// The first hot word's byte address.
const HOT: u64 = 512;

fn launch(ctas: u32) -> Step {
    Step::Launch {
        stream: 0,
        ctas,
        ro_words: 0,
    }
}

fn plain(launch: usize, cta: u32, addr: u64, write: bool) -> Step {
    Step::Plain {
        launch,
        cta,
        addr,
        size: 4,
        write,
    }
}

#[allow(clippy::too_many_arguments)]
fn atomic(
    launch: usize,
    cta: u32,
    addr: u64,
    size: u32,
    kind: AtomicOpKind,
    ordering: Ordering,
    scope: Scope,
    succeeds: bool,
) -> Step {
    Step::Atomic {
        launch,
        cta,
        addr,
        size,
        kind,
        ordering,
        failure: Relaxed,
        scope,
        succeeds,
    }
}

fn add(launch: usize, cta: u32, addr: u64) -> Step {
    atomic(launch, cta, addr, 4, Rmw, Relaxed, Scope::Device, true)
}

/// `adds` relaxed adds per CTA into `bins` hot words by `ctas` CTAs,
/// resident 256 at a time (each wave's adds interleaved at random).
fn histogram(rng: &mut Rng, ctas: u32, bins: u64, adds: u32) -> Vec<Step> {
    let mut steps = Vec::new();
    for wave in (0..ctas).step_by(256) {
        let resident: Vec<u32> = (wave..(wave + 256).min(ctas)).collect();
        let mut left: Vec<u32> = vec![adds; resident.len()];
        let mut total = adds as usize * resident.len();
        while total > 0 {
            let i = rng.below(resident.len() as u64) as usize;
            if left[i] == 0 {
                continue;
            }
            left[i] -= 1;
            total -= 1;
            steps.push(add(0, resident[i], HOT + 4 * rng.below_high(bins)));
        }
    }
    steps
}

/// The record entries of the hot word at byte `addr` (its chain's used
/// slots besides the last write and the heads).
fn entries(h: &Harness, addr: u64) -> usize {
    let c = h.shadow()[(addr / 4) as usize].load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(CellTag::of(c), CellTag::Record);
    h.record_slots(c as u32)
        .iter()
        .skip(3)
        .filter(|(_, b)| b >> 32 != 0)
        .count()
}

/// A histogram of 1,024 CTAs into 16 bins, then a plain read of every bin
/// in the same launch (each races with the adds) or after the host waited
/// (none does): the same verdicts with and without the shared path, most
/// adds on the shared path, and each bin's record a few entries (the adds
/// of consecutive CTAs at one site share one).
#[test]
fn a_histogram_of_thousands_of_ctas_takes_the_shared_path() {
    let mut rng = Rng(7);
    let adds = histogram(&mut rng, 1024, 16, 64);
    for racy in [true, false] {
        let mut steps = vec![launch(1024)];
        steps.extend(adds.iter().cloned());
        let reader = if racy {
            (0, 17)
        } else {
            steps.push(Step::SyncAll);
            steps.push(launch(1));
            (1, 0)
        };
        for bin in 0..16 {
            steps.push(plain(reader.0, reader.1, HOT + 4 * bin, false));
        }
        let (raced, shared) = compare_shared_path(1, BYTES, &[0], &steps, false);
        assert_eq!(raced, if racy { 16 } else { 0 });
        // Each CTA's first add to a bin records it; later ones take the
        // shared path.
        assert!(
            shared * 2 > adds.len(),
            "{shared} of {} adds took the shared path",
            adds.len()
        );
    }
    let mut h = Harness::new(1, BYTES, 1 << 14, &[0]);
    h.step(0, &launch(1024));
    for (i, s) in adds.iter().enumerate() {
        // One site for every add, as one kernel line's.
        h.step(3 * i, s);
    }
    for bin in 0..16 {
        let n = entries(&h, HOT + 4 * bin);
        // One per run of CTAs that added to it (a few never did).
        assert!(n <= 32, "bin {bin} keeps {n} entries");
    }
}

/// A counter every warp of 1,024 CTAs adds to, then one plain read: in
/// the launch it races with every other CTA's add; after a wait with none.
#[test]
fn a_counter_of_thousands_of_ctas_takes_the_shared_path() {
    let mut rng = Rng(11);
    let adds = histogram(&mut rng, 1024, 1, 8);
    for racy in [true, false] {
        let mut steps = vec![launch(1024)];
        steps.extend(adds.iter().cloned());
        if racy {
            steps.push(plain(0, 1023, HOT, false));
        } else {
            steps.push(Step::SyncAll);
            steps.push(launch(1));
            steps.push(plain(1, 0, HOT, true));
        }
        let (raced, shared) = compare_shared_path(1, BYTES, &[0], &steps, false);
        assert_eq!(raced, usize::from(racy));
        assert!(shared * 2 > adds.len(), "{shared} of {} adds", adds.len());
    }
}

/// Threads of 64 CTAs (several per CTA, sharing its state) adding to one
/// word at once on real threads, after each CTA's first add: every add
/// runs once, a CTA that knows none of them races with them and one
/// after the host waited does not; the record keeps one entry.
#[test]
fn threads_adding_at_once_keep_their_verdicts() {
    let mut h = Harness::new(1, BYTES, 1 << 14, &[0]);
    h.step(0, &launch(66));
    for c in 0..64 {
        h.step(0, &add(0, c, HOT));
    }
    let threads: Vec<u32> = (0..64).chain([0, 0, 1, 1, 7, 7, 7]).collect();
    assert_eq!(h.concurrent_adds(0, &threads, 200, HOT), 200 * 71);
    // A CTA that adds for the first time, several threads at once.
    assert_eq!(h.concurrent_adds(0, &[64, 64, 64, 64], 50, HOT), 200);
    assert!(entries(&h, HOT) <= 2, "{} entries", entries(&h, HOT));
    let v = h.step(1, &plain(0, 65, HOT, false)).unwrap();
    assert!(v.race.is_some() && !v.bounded);
    h.step(2, &Step::SyncAll);
    h.step(3, &launch(1));
    let v = h.step(4, &plain(1, 0, HOT, true)).unwrap();
    assert!(v.race.is_none() && !v.bounded);
}

/// A random program of about `len` steps: CTAs of launches of up to
/// 4,096, a window of 32 of them moving through the launch (so that
/// each adds several times), mostly adding into four hot
/// words, with atomic loads, failing and succeeding compare-exchanges,
/// stores, releasing adds, fences, other scopes and sizes mixed in; with
/// `racy`, plain accesses of the hot words and of data words in the
/// launch too (otherwise only after the host waited).
fn hot_program(seed: u64, len: usize, racy: bool) -> Vec<Step> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ctas = rng.pick(&[64u32, 512, 4096]);
    let mut steps = vec![launch(ctas)];
    let mut l = 0;
    let mut wave = 0u32;
    while steps.len() < len {
        if rng.below(200) == 0 {
            wave = (wave + 16) % ctas;
        }
        let cta = (wave + rng.below(32) as u32) % ctas;
        let addr = HOT + 4 * rng.below_high(4);
        let k = rng.below_high(1000);
        let step = if k < 700 {
            add(l, cta, addr)
        } else if k < 780 {
            let o = rng.pick(&[Relaxed, Acquire]);
            atomic(l, cta, addr, 4, Load, o, Scope::Device, true)
        } else if k < 830 {
            let succeeds = rng.below(2) == 0;
            atomic(
                l,
                cta,
                addr,
                4,
                CompareExchange,
                Relaxed,
                Scope::Device,
                succeeds,
            )
        } else if k < 850 {
            // Ends any release sequence: the heads go.
            atomic(l, cta, addr, 4, Store, Relaxed, Scope::Device, true)
        } else if k < 855 {
            let o = rng.pick(&[Release, AcqRel]);
            atomic(l, cta, addr, 4, Rmw, o, Scope::Device, true)
        } else if k < 865 {
            Step::Fence {
                launch: l,
                cta,
                ordering: rng.pick(&[Release, Acquire, AcqRel, SeqCst]),
                scope: rng.pick(&[Scope::Device, Scope::System]),
            }
        } else if k < 880 {
            // System scope is morally strong with device scope on one
            // device; block scope is not, across CTAs.
            let scope = if racy {
                rng.pick(&[Scope::Block, Scope::System])
            } else {
                Scope::System
            };
            atomic(l, cta, addr, 4, Rmw, Relaxed, scope, true)
        } else if k < 890 {
            if !racy {
                continue;
            }
            atomic(
                l,
                cta,
                HOT + 8 * rng.below(2),
                8,
                Rmw,
                Relaxed,
                Scope::Device,
                true,
            )
        } else if k < 920 {
            if !racy {
                continue;
            }
            plain(l, cta, addr, rng.below(3) == 0)
        } else if k < 990 {
            if !racy {
                continue;
            }
            plain(l, cta, 4 * rng.below(64), rng.below(2) == 0)
        } else {
            // The host waits; a launch of one CTA reads every hot word
            // plainly and resets one (ordered after all of the last
            // launch and before all of the next).
            steps.push(Step::SyncAll);
            steps.push(launch(1));
            l += 1;
            for w in 0..4 {
                steps.push(plain(l, 0, HOT + 4 * w, false));
            }
            steps.push(plain(l, 0, HOT + 4 * rng.below(4), true));
            steps.push(Step::SyncAll);
            ctas = rng.pick(&[64u32, 512, 4096]);
            steps.push(launch(ctas));
            l += 1;
            wave = 0;
            continue;
        };
        steps.push(step);
    }
    steps
}

/// Random hot-word programs through the model and both paths.
#[test]
fn random_hot_word_programs_agree_with_the_locked_path_and_the_model() {
    let (raced, shared) = run_programs(0..8, 2000, true);
    assert!(raced > 50, "the racy programs raced too rarely ({raced})");
    assert!(
        shared > 1000,
        "too few atomics took the shared path ({shared})"
    );
}

/// Longer ones (most CTAs adding many times), through both paths only.
#[test]
fn long_hot_word_programs_agree_with_the_locked_path() {
    let (raced, shared) = run_programs(100..106, 30_000, false);
    assert!(raced > 50, "the racy programs raced too rarely ({raced})");
    assert!(
        shared > 10_000,
        "too few atomics took the shared path ({shared})"
    );
}

/// Runs the programs of `seeds` of `len` steps (even seeds racy, odd ones
/// race-free, which must report nothing); returns the races and the
/// atomics that took the shared path.
fn run_programs(seeds: std::ops::Range<u64>, len: usize, with_model: bool) -> (usize, usize) {
    let (mut raced, mut shared) = (0, 0);
    for seed in seeds {
        let racy = seed % 2 == 0;
        let steps = hot_program(seed, len, racy);
        println!("seed {seed}");
        let (r, s) = compare_shared_path(1, BYTES, &[0], &steps, with_model);
        if !racy {
            assert_eq!(r, 0, "seed {seed}: a race-free program raced");
        }
        raced += r;
        shared += s;
    }
    (raced, shared)
}

/// Prints a race-free program (`VIGIL_SEED`) up to its first race, for
/// debugging: `VIGIL_SEED=n cargo test -p vigil-shared --test
/// race_hot_words first_race -- --ignored --nocapture`.
#[test]
#[ignore]
fn first_race() {
    let seed: u64 = std::env::var("VIGIL_SEED").unwrap().parse().unwrap();
    let steps = hot_program(seed, 2000, seed % 2 == 0);
    let mut h = Harness::new(1, BYTES, 1 << 14, &[0]);
    for (i, s) in steps.iter().enumerate() {
        if h.step(i, s).is_some_and(|v| v.race.is_some()) {
            for (j, t) in steps.iter().enumerate().take(i + 1) {
                println!("{j}: {t:?}");
            }
            return;
        }
    }
}

/// `ctas` CTAs of launch 0 reading the hot word once each, in no
/// particular order.
fn shuffled_reads(rng: &mut Rng, ctas: u32) -> Vec<Step> {
    let mut order: Vec<u32> = (0..ctas).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order.into_iter().map(|c| plain(0, c, HOT, false)).collect()
}

/// A word read by thousands of CTAs of one launch in no particular order:
/// its record stays a few records long whatever the grid (reads join
/// sparse entries past the chain's bound), a write by a CTA that knows
/// none of the readers races with one that really read (the model checks
/// the name), and a write after the host waited races with none.
#[test]
fn a_word_read_by_thousands_of_ctas_keeps_a_bounded_record() {
    let mut rng = Rng(5);
    for racy in [true, false] {
        let mut steps = vec![launch(601)];
        steps.extend(shuffled_reads(&mut rng, 600));
        if racy {
            steps.push(plain(0, 600, HOT, true));
        } else {
            steps.push(Step::SyncAll);
            steps.push(launch(1));
            steps.push(plain(1, 0, HOT, true));
        }
        assert_eq!(compare(1, BYTES, &[0], &steps), usize::from(racy));
    }
    let mut h = Harness::new(1, BYTES, 1 << 14, &[0]);
    h.step(0, &launch(4096));
    for (i, s) in shuffled_reads(&mut rng, 4096).iter().enumerate() {
        // One site for every read, as one kernel line's.
        h.step(3 * i, s);
    }
    let n = entries(&h, HOT);
    let bound = vigil_shared::race::record::MAX_CHAIN_RECORDS * 7;
    assert!(n <= bound, "the word keeps {n} entries");
}
