//! The engine against the reference oracle at scale: random programs with
//! up to 4,096 sanitizer threads releasing into one hot word (the
//! threadFenceReduction and grid-barrier patterns, every release and
//! acquire style), up to 4,096 bumping one counter (its atomic set, mixed
//! with other atomics and plain accesses), and producers publishing long
//! chains of releases before lagging consumers acquire them. Prints its figures; the test profile
//! checks a dozen programs, `VIGIL_SCALE_PROGRAMS=N` (best with
//! `--release`) as many as asked. At the default pool the engine must find
//! every race the oracle sees; on a tiny pool it may miss (counted) races,
//! never report a false one.

mod common;

use std::cell::RefCell;

use common::*;
use proptest::prelude::*;
use vigil_shared::engine::{Outcome, RUNTIME_CHAIN_RECORDS_PER_WORD};
use vigil_shared::{Ordering, Scope};

/// Snapshots per thread in these programs (small, so that 4,096 threads
/// fit in memory: every clock has 4,096 entries).
const CLOCK_BUFFER_AT_SCALE: u32 = 4;
/// The counter (hot word) of the hot-word programs.
const HOT: u64 = 0;

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Device), Just(Scope::System), Just(Scope::Block)]
}

/// How a releaser publishes into the hot word, or a producer its flag.
#[derive(Clone, Copy, Debug)]
enum Release {
    /// `fence.<ord>.<scope>` then a relaxed RMW (threadFenceReduction).
    FenceThenRelaxedRmw(Ordering, Scope),
    /// A release or acq_rel RMW.
    Rmw(Ordering, Scope),
    /// A release store (ends the release sequence of the others).
    Store(Scope),
    /// A relaxed RMW without a fence (publishes nothing).
    RelaxedRmw(Scope),
}

fn release() -> impl Strategy<Value = Release> {
    let fence_ord = prop_oneof![
        Just(Ordering::Release),
        Just(Ordering::AcqRel),
        Just(Ordering::SeqCst)
    ];
    let rmw_ord = prop_oneof![Just(Ordering::Release), Just(Ordering::AcqRel)];
    prop_oneof![
        6 => (fence_ord, scope()).prop_map(|(o, s)| Release::FenceThenRelaxedRmw(o, s)),
        4 => (rmw_ord, scope()).prop_map(|(o, s)| Release::Rmw(o, s)),
        1 => scope().prop_map(Release::Store),
        1 => scope().prop_map(Release::RelaxedRmw),
    ]
}

impl Release {
    fn push(self, ops: &mut Vec<Op>, tid: u32, addr: u64) {
        match self {
            Release::FenceThenRelaxedRmw(o, s) => {
                ops.push(fence(tid, o, s));
                ops.push(rmw(tid, addr, Ordering::Relaxed, s));
            }
            Release::Rmw(o, s) => ops.push(rmw(tid, addr, o, s)),
            Release::Store(s) => ops.push(store(tid, addr, Ordering::Release, s)),
            Release::RelaxedRmw(s) => ops.push(rmw(tid, addr, Ordering::Relaxed, s)),
        }
    }
}

/// How a consumer acquires.
#[derive(Clone, Copy, Debug)]
enum Acquire {
    Load(Scope),
    RelaxedLoadThenFence(Scope, Scope),
    Rmw(Scope),
    RelaxedLoad(Scope),
}

fn acquire() -> impl Strategy<Value = Acquire> {
    prop_oneof![
        3 => scope().prop_map(Acquire::Load),
        3 => (scope(), scope()).prop_map(|(a, b)| Acquire::RelaxedLoadThenFence(a, b)),
        2 => scope().prop_map(Acquire::Rmw),
        1 => scope().prop_map(Acquire::RelaxedLoad),
    ]
}

impl Acquire {
    fn push(self, ops: &mut Vec<Op>, tid: u32, addr: u64) {
        match self {
            Acquire::Load(s) => ops.push(load(tid, addr, Ordering::Acquire, s)),
            Acquire::RelaxedLoadThenFence(s, f) => {
                ops.push(load(tid, addr, Ordering::Relaxed, s));
                ops.push(fence(tid, Ordering::Acquire, f));
            }
            Acquire::Rmw(s) => ops.push(rmw(tid, addr, Ordering::AcqRel, s)),
            Acquire::RelaxedLoad(s) => ops.push(load(tid, addr, Ordering::Relaxed, s)),
        }
    }
}

/// A generated program and the figure it exercises.
#[derive(Clone, Debug)]
struct ScaleProgram {
    program: Program,
    words: usize,
    /// Threads that released into the hot word (0 for chains).
    hot_releasers: u32,
    /// Releases a producer published before the consumer's first acquire.
    chain: u32,
}

fn threads() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        4 => Just((64u32, 1u32)),
        2 => Just((256, 2)),
        1 => Just((4096, 1)),
        1 => Just((2048, 2)),
    ]
}

/// Every thread but the last writes its partial result, then releases
/// into the hot word in its own style; the last thread acquires and reads
/// every partial. Some releasers write their partial again afterwards (a
/// real race for the reader), others read it (never a race).
fn hot_word() -> impl Strategy<Value = ScaleProgram> {
    threads().prop_flat_map(|(sms, devices)| {
        let n = sms * devices;
        let styles = prop::collection::vec(release(), n as usize - 1);
        let late = prop::collection::vec(0..n - 1, 0..3);
        (styles, acquire(), late).prop_map(move |(styles, acq, late)| {
            let consumer = n - 1;
            let partial = |t: u32| 4 * (1 + u64::from(t));
            let mut ops = Vec::new();
            for (t, style) in styles.iter().enumerate() {
                let t = t as u32;
                ops.push(plain(t, partial(t), 4, true));
                style.push(&mut ops, t, HOT);
            }
            for &t in &late {
                ops.push(plain(t, partial(t), 4, t % 2 == 0));
            }
            acq.push(&mut ops, consumer, HOT);
            for t in 0..consumer {
                ops.push(plain(consumer, partial(t), 4, false));
            }
            ScaleProgram {
                program: Program {
                    num_sms: sms,
                    num_devices: devices,
                    ops,
                },
                words: n as usize + 1,
                hot_releasers: n - 1,
                chain: 0,
            }
        })
    })
}

/// A producer publishes `k` tiles (data, then a release of the tile's own
/// flag), acquiring from a helper between some of them (a new snapshot per
/// release then); consumers on every device acquire sampled flags later
/// and read the tiles; the producer may write a tile again after its
/// release (a real race).
fn chain() -> impl Strategy<Value = ScaleProgram> {
    (
        threads(),
        prop_oneof![3 => 1u32..64, 1 => Just(4096u32)],
        0..4u32,
        release(),
        acquire(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 1..8),
        prop::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(
            |((sms, devices), k, acquire_every, rel, acq, reads, rewrite)| {
                let n = sms * devices;
                let (producer, helper) = (0, 1);
                let data = |t: u32| 8 * (1 + u64::from(t));
                let flag = |t: u32| data(t) + 4;
                let mut ops = Vec::new();
                for t in 0..k {
                    ops.push(plain(producer, data(t), 4, true));
                    // Acquiring between releases forces distinct snapshots
                    // (only for short chains: the buffer is small here).
                    if acquire_every != 0 && k < 64 && t % acquire_every == 0 {
                        ops.push(store(helper, HOT, Ordering::Release, Scope::Device));
                        ops.push(load(producer, HOT, Ordering::Acquire, Scope::Device));
                    }
                    rel.push(&mut ops, producer, flag(t));
                }
                if let Some(i) = rewrite {
                    ops.push(plain(producer, data(i.index(k as usize) as u32), 4, true));
                }
                for (i, far) in reads {
                    let t = i.index(k as usize) as u32;
                    let consumer = if far { n - 1 } else { 2 % n };
                    acq.push(&mut ops, consumer, flag(t));
                    ops.push(plain(consumer, data(t), 4, false));
                }
                ScaleProgram {
                    program: Program {
                        num_sms: sms,
                        num_devices: devices,
                        ops,
                    },
                    words: 2 * (k as usize + 1),
                    hot_releasers: 0,
                    chain: k,
                }
            },
        )
}

/// A hot counter (a histogram bin, a grid-wide count): bumped by every
/// thread with relaxed read-modify-writes (or compare-exchanges) of one
/// scope, which the engine keeps in an atomic set, with (one program in
/// three: none) failed compare-exchanges, bumps of the
/// other scope or with acquire ordering, relaxed loads and plain accesses
/// (real races) by random threads among them; the counter may first be
/// zeroed by a plain write every thread is ordered after (a clock the
/// set's fast path checks itself against); every bumper may release a
/// flag that the consumer acquires before it reads the total plainly
/// (ordered after every bump then), and bumps once more.
fn counter() -> impl Strategy<Value = ScaleProgram> {
    (
        threads(),
        prop_oneof![Just(Scope::Device), Just(Scope::System)],
        any::<bool>(),
        prop_oneof![Just(0u8), Just(16), Just(64)],
        any::<bool>(),
    )
        .prop_flat_map(|((sms, devices), scope, acquire_all, noise, zeroed)| {
            let n = sms * devices;
            let kinds = if noise == 0 { 7..8 } else { 0..noise };
            let bumps = prop::collection::vec((0..n - 1, kinds), n as usize..2 * n as usize);
            (Just((sms, devices, scope, acquire_all, zeroed)), bumps)
        })
        .prop_map(|((sms, devices, scope, acquire_all, zeroed), bumps)| {
            let n = sms * devices;
            let consumer = n - 1;
            let other = if scope == Scope::Device {
                Scope::System
            } else {
                Scope::Device
            };
            const FLAG: u64 = 4;
            const ZEROED: u64 = 8;
            let mut ops = Vec::new();
            if zeroed {
                ops.push(plain(consumer, HOT, 4, true));
                ops.push(store(consumer, ZEROED, Ordering::Release, Scope::System));
                for t in 0..consumer {
                    ops.push(load(t, ZEROED, Ordering::Acquire, Scope::System));
                }
            }
            for (t, kind) in bumps {
                ops.push(match kind {
                    0 => rmw(t, HOT, Ordering::Acquire, scope),
                    1 => rmw(t, HOT, Ordering::Relaxed, other),
                    2 => load(t, HOT, Ordering::Relaxed, scope),
                    3 => plain(t, HOT, 4, t % 2 == 0),
                    4 | 5 => rmw(t, HOT, Ordering::Relaxed, scope),
                    // The GPU's and the CPU backend's form of every
                    // read-modify-write; one that fails only reads.
                    6 => cas(t, HOT, Ordering::Relaxed, Ordering::Relaxed, scope, false),
                    _ => cas(t, HOT, Ordering::Relaxed, Ordering::Relaxed, scope, true),
                });
            }
            if acquire_all {
                for t in 0..consumer {
                    ops.push(rmw(t, FLAG, Ordering::Release, Scope::System));
                }
                ops.push(load(consumer, FLAG, Ordering::Acquire, Scope::System));
            }
            ops.push(plain(consumer, HOT, 4, false));
            ops.push(rmw(consumer, HOT, Ordering::Relaxed, scope));
            ScaleProgram {
                program: Program {
                    num_sms: sms,
                    num_devices: devices,
                    ops,
                },
                words: 3,
                hot_releasers: n - 1,
                chain: 0,
            }
        })
}

#[derive(Default)]
struct Figures {
    programs: u32,
    false_positives: u32,
    capacity_reports: u32,
    oracle_races: u32,
    found: u32,
    /// Programs whose engine lost precision somewhere (access clocks
    /// evicted, release heads merged, snapshots coarsened).
    lossy_programs: u32,
    /// Programs where a race the oracle saw was missed without any loss
    /// counted (must stay 0: every miss is a counted one).
    uncounted_misses: u32,
    release_lossy_programs: u32,
    evictions: u32,
    max_hot_threads: u32,
    max_chain: u32,
    /// Programs that ended with a word's history in an atomic set.
    set_programs: u32,
    /// Pool records frees gave back.
    records_reclaimed: u32,
}

impl Figures {
    fn print(&self) {
        println!("programs checked: {}", self.programs);
        println!(
            "sanitizer threads on a hot word: up to {}",
            self.max_hot_threads
        );
        println!(
            "releases outstanding before a consumer: up to {}",
            self.max_chain
        );
        println!(
            "programs whose counter moved into an atomic set: {}",
            self.set_programs
        );
        println!("false positives: {}", self.false_positives);
        println!("capacity reports: {}", self.capacity_reports);
        let rate = if self.oracle_races == 0 {
            100.0
        } else {
            100.0 * f64::from(self.found) / f64::from(self.oracle_races)
        };
        println!(
            "oracle races found: {rate:.1}% ({} of {}) overall",
            self.found, self.oracle_races
        );
        println!(
            "access clocks evicted: {}; programs with precision loss: {}/{} \
             (release history, buffer of {CLOCK_BUFFER_AT_SCALE} snapshots: {})",
            self.evictions, self.lossy_programs, self.programs, self.release_lossy_programs
        );
    }
}

/// Words an atomic of `p` touches.
fn atomic_words(p: &Program) -> usize {
    let mut words: Vec<u64> = p
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::Atomic { addr, .. } => Some(addr / 4),
            _ => None,
        })
        .collect();
    words.sort_unstable();
    words.dedup();
    words.len()
}

/// The record pool a program runs on.
#[derive(Clone, Copy, Debug)]
enum PoolSize {
    /// One record per word, at least 4,096: room for every access chain
    /// and spilled snapshot the programs here need.
    Default,
    /// One record per word an atomic touches: every word that may have
    /// release heads gets its record, nothing is left for chains and
    /// spilled snapshots but what those words leave.
    AtomicWords,
    /// This many records (hot-word programs only: a chain program needs a
    /// record per flag).
    Tiny(usize),
}

/// Runs `programs` random scale programs (hot words and chains) on `pool`
/// and compares each with the oracle. Fails on a false positive, a
/// capacity report, or a missed race in a program that lost no precision
/// (every miss must be a counted one).
fn check_programs(programs: u32, pool: PoolSize) -> Figures {
    check_programs_with(programs, pool, false)
}

/// [`check_programs`]; with `again_after_free`, each program runs, its
/// words are freed, it runs again on the same engine, and its words are
/// freed again: every record must then be back in the pool.
fn check_programs_with(programs: u32, pool: PoolSize, again_after_free: bool) -> Figures {
    let mut runner = deterministic_runner(programs);
    let figures = RefCell::new(Figures::default());
    let strategy = match pool {
        PoolSize::Tiny(_) => hot_word().boxed(),
        _ => prop_oneof![hot_word(), chain(), counter()].boxed(),
    };
    let result = runner.run(&strategy, |sp| {
        let records = match pool {
            PoolSize::Default => sp.words.max(4096),
            PoolSize::AtomicWords => atomic_words(&sp.program),
            PoolSize::Tiny(n) => n,
        };
        let program = if again_after_free {
            let freed = [Op::Kernel, free(0, sp.words as u64 * 4)];
            let p = &sp.program.ops;
            Program {
                ops: [p, &freed[..], p, &freed[..]].concat(),
                ..sp.program.clone()
            }
        } else {
            sp.program.clone()
        };
        let c = compare_in(&program, sp.words, records, CLOCK_BUFFER_AT_SCALE);
        if again_after_free {
            prop_assert_eq!(c.pool_in_use, 0, "records still handed out after the frees");
            prop_assert_eq!(c.spilled_snapshots, 0, "snapshots still spilled");
        }
        let mut f = figures.borrow_mut();
        f.records_reclaimed += c.records_reclaimed;
        f.programs += 1;
        f.max_hot_threads = f.max_hot_threads.max(sp.hot_releasers + 1);
        f.max_chain = f.max_chain.max(sp.chain);
        f.capacity_reports += c.errors as u32;
        f.set_programs += (c.atomic_sets != 0) as u32;
        let mut fp = 0;
        let (mut races, mut found) = (0, 0);
        for (oracle, engine) in &c.steps {
            match engine {
                Outcome::Race(r) if oracle.is_empty() || !oracle.contains(&r.prior_tid) => fp += 1,
                _ => {}
            }
            races += !oracle.is_empty() as u32;
            found += (!oracle.is_empty() && engine.is_race()) as u32;
        }
        f.oracle_races += races;
        f.found += found;
        f.false_positives += fp;
        f.evictions += c.precision_lost - c.release_precision_lost;
        f.lossy_programs += (c.precision_lost != 0) as u32;
        f.release_lossy_programs += (c.release_precision_lost != 0) as u32;
        let uncounted = found < races && c.precision_lost == 0;
        f.uncounted_misses += uncounted as u32;
        drop(f);
        prop_assert_eq!(fp, 0, "false positive: {:?}", sp.program.ops.len());
        prop_assert_eq!(c.errors, 0, "capacity report");
        prop_assert!(
            !uncounted,
            "a run without precision loss must match the oracle"
        );
        Ok(())
    });
    let f = figures.into_inner();
    f.print();
    if let Err(e) = result {
        panic!("{e}");
    }
    f
}

#[test]
fn engine_matches_oracle_at_scale() {
    let programs = std::env::var("VIGIL_SCALE_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let f = check_programs(programs, PoolSize::Default);
    assert_eq!(f.false_positives, 0);
    assert_eq!(f.capacity_reports, 0);
    assert_eq!(f.evictions, 0, "the access history grows from the pool");
    assert_eq!(f.found, f.oracle_races, "every race the oracle sees");
    assert!(f.max_hot_threads >= 4096, "no 4,096-thread hot word drawn");
    assert!(f.set_programs > 0, "no counter drawn");
}

/// Freed memory gives its records back: every program (4,096-thread hot
/// words, long release chains with spilled snapshots, counters with atomic
/// sets) runs, has its words freed, runs again on the same engine and is
/// freed again. Both runs match the oracle, and at the end no record is
/// handed out and no snapshot spilled (without the frees giving records
/// back, a long-lived sanitizer fills its pool).
#[test]
fn freed_memory_gives_every_record_back() {
    let f = check_programs_with(12, PoolSize::Default, true);
    assert_eq!(f.false_positives, 0);
    assert_eq!(f.capacity_reports, 0);
    assert_eq!(f.found, f.oracle_races, "every race the oracle sees");
    assert!(f.records_reclaimed > 0, "no program used the pool");
    assert!(f.max_hot_threads >= 4096, "no 4,096-thread hot word drawn");
    assert!(f.set_programs > 0, "no counter's atomic set drawn");
}

/// Hot-word programs on a pool of 4 records (the hot word's record and a
/// short chain, then counted evictions), and all programs on a pool of one
/// record per word an atomic touches (spilled snapshots give way to those
/// words: counted coarsening). The engine may miss races then, never report a false one,
/// and every miss is counted.
#[test]
fn a_small_pool_only_misses_and_counts_it() {
    let tiny = check_programs(8, PoolSize::Tiny(4));
    let per_word = check_programs(8, PoolSize::AtomicWords);
    for f in [&tiny, &per_word] {
        assert_eq!(f.false_positives, 0);
        assert_eq!(f.capacity_reports, 0);
        assert_eq!(f.uncounted_misses, 0);
    }
    assert!(tiny.evictions > 0, "no program outgrew the tiny pool");
    assert!(per_word.lossy_programs > 0, "no program outgrew the pool");
}

/// The GPU runtime's bounded history ([`RUNTIME_CHAIN_RECORDS_PER_WORD`])
/// on a word hit by 4,095 threads' relaxed read-modify-writes, then a plain
/// write unordered with all of them. Of one scope, the writes share an
/// atomic set (`vigil_shared::atomic_set`): exact, whatever the cap.
/// Alternating device and system scope they have no class in common, so
/// the word outgrows the cap, and the engine then only misses races, each
/// counted.
#[test]
fn the_default_chain_cap_only_misses_and_counts_it() {
    let n = 4096u32;
    for mixed in [false, true] {
        let mut ops = Vec::new();
        for t in 0..n - 1 {
            let scope = if mixed && t % 2 == 1 {
                Scope::System
            } else {
                Scope::Device
            };
            ops.push(rmw(t, HOT, Ordering::Relaxed, scope));
        }
        // The oracle sees a race with each; the engine must report at
        // least one, and no more than the oracle.
        ops.push(plain(n - 1, HOT, 4, true));
        let p = Program {
            num_sms: n,
            num_devices: 1,
            ops,
        };
        let c = compare_capped(
            &p,
            2,
            4096,
            CLOCK_BUFFER_AT_SCALE,
            RUNTIME_CHAIN_RECORDS_PER_WORD,
        );
        let (oracle, engine) = c.steps.last().expect("the write");
        assert!(
            !oracle.is_empty() && engine.is_race(),
            "the write's race is found (mixed scopes: {mixed})"
        );
        for (o, e) in &c.steps {
            assert!(!e.is_race() || !o.is_empty(), "a false report");
            assert!(!e.is_error(), "a capacity report");
        }
        assert_eq!(
            c.precision_lost > 0,
            mixed,
            "precision lost {} (mixed scopes: {mixed})",
            c.precision_lost
        );
    }
}

/// The hot-word pattern of the issue at 4,096 threads, every style, on one
/// device: no capacity report, and exact.
#[test]
fn four_thousand_releasers_into_one_word() {
    for style in [
        Release::FenceThenRelaxedRmw(Ordering::SeqCst, Scope::Device),
        Release::Rmw(Ordering::Release, Scope::Device),
    ] {
        let n = 4096;
        let mut ops = Vec::new();
        for t in 0..n - 1 {
            ops.push(plain(t, 4 * (1 + u64::from(t)), 4, true));
            style.push(&mut ops, t, HOT);
        }
        ops.push(load(n - 1, HOT, Ordering::Relaxed, Scope::Device));
        ops.push(fence(n - 1, Ordering::Acquire, Scope::Device));
        for t in 0..n - 1 {
            ops.push(plain(n - 1, 4 * (1 + u64::from(t)), 4, false));
        }
        let p = Program {
            num_sms: n,
            num_devices: 1,
            ops,
        };
        let c = compare_with(&p, n as usize + 1, CLOCK_BUFFER_AT_SCALE);
        // The counter's 4,095 compatible atomics need 4,095 access clocks:
        // a chain from the pool, exact; the release history stays exact.
        assert_eq!((c.errors, c.precision_lost), (0, 0), "{style:?}");
        assert!(
            c.steps.iter().all(|(o, e)| o.is_empty() && !e.is_race()),
            "{style:?}"
        );
    }
}

/// The atomic set's same-epoch case against a clock that came later:
/// threads bump a counter until its clocks move into a set, a plain write
/// unordered with them lands, and a bumper bumps again in the same epoch.
/// That bump races with the write (the oracle says so), although the set
/// already holds its thread's epoch: each bump and the final plain read
/// give the oracle's verdict.
#[test]
fn a_same_epoch_bump_after_a_racing_write_still_races() {
    let n = 16u32;
    for cas in [false, true] {
        let bump = |t: u32| {
            if cas {
                common::cas(
                    t,
                    HOT,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                    Scope::Device,
                    true,
                )
            } else {
                rmw(t, HOT, Ordering::Relaxed, Scope::Device)
            }
        };
        let mut ops: Vec<Op> = (0..n - 2).map(bump).collect();
        ops.push(plain(n - 2, HOT, 4, true));
        ops.extend([bump(0), bump(3), bump(0)]);
        ops.push(plain(n - 1, HOT, 4, false));
        let p = Program {
            num_sms: n,
            num_devices: 1,
            ops,
        };
        let c = compare_with(&p, 1, CLOCK_BUFFER_AT_SCALE);
        assert_eq!(c.atomic_sets, 1, "the bumps moved into a set");
        for (i, (oracle, engine)) in c.steps.iter().enumerate() {
            assert_eq!(
                !oracle.is_empty(),
                engine.is_race(),
                "step {i} (compare-exchange: {cas}): oracle {oracle:?}, engine {engine:?}"
            );
        }
    }
}
