//! Test support: a reference oracle (exact happens-before, full vector
//! clocks, unbounded per-byte history) and a harness that runs the same
//! program through the engine over plain host memory.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, AtomicU64};

use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use vigil_shared::abi::{
    thread_state_words, AccessSite, InflatedRecord, PoolHeader, RaceReport, ReportBufferHeader,
    ThreadStateHeader,
};
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::clock::ThreadClocks;
use vigil_shared::engine::{
    sc_fence_words, AtomicOp, AtomicOpKind, Engine, EngineConfig, Outcome, SliceMemory,
};
use vigil_shared::line::{self, LineOutcome, LINE_BYTES, LINE_WORDS};
use vigil_shared::shadow::{CellView, Pool, ShadowCell, WordState};
use vigil_shared::{Ordering, Scope};

/// One step of a test program.
#[derive(Clone, Debug)]
pub enum Op {
    /// A plain access.
    Plain {
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
    },
    /// An atomic; `succeeds` says whether a compare-exchange succeeds.
    Atomic {
        tid: u32,
        addr: u64,
        size: u32,
        kind: AtomicOpKind,
        ord: Ordering,
        fail: Ordering,
        scope: Scope,
        succeeds: bool,
    },
    /// A fence.
    Fence {
        tid: u32,
        ord: Ordering,
        scope: Scope,
    },
    /// A grid-wide kernel boundary on the one stream.
    Kernel,
    /// A plain access of every byte of 128-byte line `line` by the lanes
    /// of one warp together (the GPU hook's whole-line run).
    Line { tid: u32, line: u64, write: bool },
    /// The words of `[addr, addr + bytes)` are freed (whole words, no
    /// access in flight): their history is forgotten, and the engine gives
    /// their pool records back ([`vigil_shared::reclaim`]).
    Free { addr: u64, bytes: u64 },
}

/// Frees `[addr, addr + bytes)`.
pub fn free(addr: u64, bytes: u64) -> Op {
    Op::Free { addr, bytes }
}

/// A program: its thread layout and steps.
#[derive(Clone, Debug)]
pub struct Program {
    pub num_sms: u32,
    pub num_devices: u32,
    pub ops: Vec<Op>,
}

impl Program {
    pub fn threads(&self) -> u32 {
        self.num_sms * self.num_devices
    }
}

pub fn plain(tid: u32, addr: u64, size: u32, write: bool) -> Op {
    Op::Plain {
        tid,
        addr,
        size,
        write,
    }
}
pub fn load(tid: u32, addr: u64, ord: Ordering, scope: Scope) -> Op {
    Op::Atomic {
        tid,
        addr,
        size: 4,
        kind: AtomicOpKind::Load,
        ord,
        fail: ord,
        scope,
        succeeds: false,
    }
}
pub fn store(tid: u32, addr: u64, ord: Ordering, scope: Scope) -> Op {
    Op::Atomic {
        tid,
        addr,
        size: 4,
        kind: AtomicOpKind::Store,
        ord,
        fail: ord,
        scope,
        succeeds: true,
    }
}
pub fn rmw(tid: u32, addr: u64, ord: Ordering, scope: Scope) -> Op {
    Op::Atomic {
        tid,
        addr,
        size: 4,
        kind: AtomicOpKind::Rmw,
        ord,
        fail: ord,
        scope,
        succeeds: true,
    }
}
pub fn cas(tid: u32, addr: u64, ord: Ordering, fail: Ordering, scope: Scope, succeeds: bool) -> Op {
    Op::Atomic {
        tid,
        addr,
        size: 4,
        kind: AtomicOpKind::CompareExchange,
        ord,
        fail,
        scope,
        succeeds,
    }
}
pub fn line(tid: u32, line: u64, write: bool) -> Op {
    Op::Line { tid, line, write }
}
pub fn fence(tid: u32, ord: Ordering, scope: Scope) -> Op {
    Op::Fence { tid, ord, scope }
}

/// A property-test runner of `cases` cases that draws the same programs
/// on every run (no persisted failures: a failure prints its program).
pub fn deterministic_runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

// ----- the oracle -----------------------------------------------------------

#[derive(Clone, Debug)]
struct Acc {
    tid: u32,
    epoch: u32,
    write: bool,
    atomic: bool,
    scope: Scope,
    /// The bytes the whole access covered: atomics are morally strong only
    /// when they cover exactly the same bytes.
    range: (u64, u32),
}

#[derive(Clone, Debug, Default)]
struct WordSync {
    /// Release heads: releasing thread, scope, its clock at the release.
    heads: Vec<(u32, Scope, Vec<u32>)>,
    /// The last write, if atomic: thread, scope and bytes.
    last_atomic: Option<(u32, Scope, (u64, u32))>,
}

/// Exact happens-before detector: every access ever made to every byte is
/// kept, every release keeps a full copy of the releaser's clock.
pub struct Oracle {
    sms: u32,
    n: usize,
    vc: Vec<Vec<u32>>,
    history: Vec<Vec<Acc>>,
    sync: Vec<WordSync>,
    /// Per thread, per scope (block, device, system): the clock at the last
    /// release fence of at least that scope.
    fence_clock: Vec<[Option<Vec<u32>>; 3]>,
    /// Per thread: the join of the releases its atomic reads observed, by
    /// whether the releaser is on the reader's device (an acquire fence of
    /// device scope takes the first, of system scope both; block-scope
    /// fences acquire only the reader's own releases, which it contains).
    observed: Vec<[Vec<u32>; 2]>,
    /// Join release heads of one class (releasing device, scope) into one
    /// (exact, since acquirers treat them alike; lets the oracle follow
    /// thousands of releasers into one word). Off: one head per release.
    pub join_heads: bool,
    /// Every SC fence so far, in SC order: thread, scope, clock after it.
    sc_fences: Vec<(u32, Scope, Vec<u32>)>,
}

fn join(dst: &mut [u32], src: &[u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = (*d).max(*s);
    }
}

impl Oracle {
    pub fn new(sms: u32, devices: u32, bytes: usize) -> Self {
        let n = (sms * devices) as usize;
        let vc = (0..n)
            .map(|t| (0..n).map(|j| if j == t { 1 } else { 0 }).collect())
            .collect();
        Oracle {
            sms,
            n,
            vc,
            history: vec![Vec::new(); bytes],
            sync: vec![WordSync::default(); bytes / 4],
            fence_clock: vec![[None, None, None]; n],
            observed: vec![[vec![0; n], vec![0; n]]; n],
            join_heads: false,
            sc_fences: Vec::new(),
        }
    }

    fn includes(&self, scope: Scope, owner: u32, other: u32) -> bool {
        match scope {
            Scope::Block => owner == other,
            Scope::Device => owner / self.sms == other / self.sms,
            Scope::System => true,
        }
    }

    fn morally_strong(&self, a: u32, sa: Scope, b: u32, sb: Scope) -> bool {
        a == b || (self.includes(sa, a, b) && self.includes(sb, b, a))
    }

    /// Checks and records an access; returns the threads of every earlier
    /// access it races with.
    fn access(
        &mut self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        atomic: bool,
        scope: Scope,
    ) -> Vec<u32> {
        let mut racing = Vec::new();
        let epoch = self.vc[tid as usize][tid as usize];
        for b in addr..addr + size as u64 {
            for a in &self.history[b as usize] {
                let ordered = self.vc[tid as usize][a.tid as usize] >= a.epoch;
                let compatible = a.atomic
                    && atomic
                    && a.range == (addr, size)
                    && self.includes(a.scope, a.tid, tid)
                    && self.includes(scope, tid, a.tid);
                if (a.write || write) && !ordered && !compatible {
                    racing.push(a.tid);
                }
            }
            self.history[b as usize].push(Acc {
                tid,
                epoch,
                write,
                atomic,
                scope,
                range: (addr, size),
            });
        }
        racing
    }

    /// Adds a release head to word `w` (joined into its class's head when
    /// [`Oracle::join_heads`] is on).
    fn add_head(&mut self, w: usize, tid: u32, scope: Scope, clock: Vec<u32>) {
        let sms = self.sms;
        let heads = &mut self.sync[w].heads;
        if self.join_heads {
            if let Some(h) = heads
                .iter_mut()
                .find(|h| h.1 == scope && h.0 / sms == tid / sms)
            {
                join(&mut h.2, &clock);
                return;
            }
        }
        heads.push((tid, scope, clock));
    }

    fn bump(&mut self, tid: u32) {
        self.vc[tid as usize][tid as usize] += 1;
    }

    /// Runs one step; for accesses returns the racing earlier threads.
    pub fn step(&mut self, op: &Op) -> Option<Vec<u32>> {
        match *op {
            Op::Line { tid, line, write } => self.step(&plain(tid, line * LINE_BYTES, 128, write)),
            Op::Plain {
                tid,
                addr,
                size,
                write,
            } => {
                let r = self.access(tid, addr, size, write, false, Scope::Block);
                if write {
                    for w in addr / 4..=(addr + size as u64 - 1) / 4 {
                        self.sync[w as usize] = WordSync::default();
                    }
                }
                Some(r)
            }
            Op::Atomic {
                tid,
                addr,
                size,
                kind,
                ord,
                fail,
                scope,
                succeeds,
            } => {
                let (reads, writes, rmw, ord) = match kind {
                    AtomicOpKind::Load => (true, false, false, ord),
                    AtomicOpKind::Store => (false, true, false, ord),
                    AtomicOpKind::Rmw => (true, true, true, ord),
                    AtomicOpKind::CompareExchange if succeeds => (true, true, true, ord),
                    AtomicOpKind::CompareExchange => (true, false, false, fail),
                };
                let words: Vec<usize> = (addr / 4..=(addr + size as u64 - 1) / 4)
                    .map(|w| w as usize)
                    .collect();
                let chain: Vec<bool> = words
                    .iter()
                    .map(|&w| {
                        matches!(self.sync[w].last_atomic, Some((t, s, r))
                        if r == (addr, size) && self.morally_strong(t, s, tid, scope))
                    })
                    .collect();
                if reads {
                    let mut acquired = vec![0; self.n];
                    let mut seen = [vec![0; self.n], vec![0; self.n]];
                    for (i, &w) in words.iter().enumerate() {
                        if !chain[i] {
                            continue;
                        }
                        for (ht, hs, snap) in &self.sync[w].heads {
                            // (An acquirer's own releases are in its clock.)
                            if !self.includes(*hs, *ht, tid) {
                                continue;
                            }
                            let other_device = (*ht / self.sms != tid / self.sms) as usize;
                            join(&mut seen[other_device], snap);
                            if ord.acquires() && self.includes(scope, tid, *ht) {
                                join(&mut acquired, snap);
                            }
                        }
                    }
                    for (o, s) in self.observed[tid as usize].iter_mut().zip(&seen) {
                        join(o, s);
                    }
                    join(&mut self.vc[tid as usize], &acquired);
                }
                let r = self.access(tid, addr, size, writes, true, scope);
                if writes {
                    let own = ord.releases().then(|| self.vc[tid as usize].clone());
                    for (i, &w) in words.iter().enumerate() {
                        if !(rmw && chain[i]) {
                            self.sync[w].heads.clear();
                        }
                        for (level, s) in [Scope::Block, Scope::Device, Scope::System]
                            .into_iter()
                            .enumerate()
                        {
                            if let Some(c) = self.fence_clock[tid as usize][level].clone() {
                                self.add_head(w, tid, s, c);
                            }
                        }
                        if let Some(c) = &own {
                            self.add_head(w, tid, scope, c.clone());
                        }
                        self.sync[w].last_atomic = Some((tid, scope, (addr, size)));
                    }
                    if own.is_some() {
                        self.bump(tid);
                    }
                }
                Some(r)
            }
            Op::Fence { tid, ord, scope } => {
                if ord.acquires() && scope != Scope::Block {
                    let [same, other] = self.observed[tid as usize].clone();
                    join(&mut self.vc[tid as usize], &same);
                    if scope == Scope::System {
                        join(&mut self.vc[tid as usize], &other);
                    }
                }
                if ord == Ordering::SeqCst {
                    let mut acquired = vec![0; self.n];
                    for (t, s, snap) in &self.sc_fences {
                        if self.morally_strong(*t, *s, tid, scope) {
                            join(&mut acquired, snap);
                        }
                    }
                    join(&mut self.vc[tid as usize], &acquired);
                    let c = self.vc[tid as usize].clone();
                    let sms = self.sms;
                    // Joined per class like release heads (a block-scope SC
                    // fence orders only its own thread: not kept then).
                    let class = self
                        .sc_fences
                        .iter_mut()
                        .find(|f| f.1 == scope && f.0 / sms == tid / sms);
                    match class {
                        Some(f) if self.join_heads => join(&mut f.2, &c),
                        _ if self.join_heads && scope == Scope::Block => {}
                        _ => self.sc_fences.push((tid, scope, c)),
                    }
                }
                if ord.releases() {
                    let c = self.vc[tid as usize].clone();
                    for slot in self.fence_clock[tid as usize]
                        .iter_mut()
                        .take(scope as usize + 1)
                    {
                        *slot = Some(c.clone());
                    }
                    self.bump(tid);
                }
                None
            }
            Op::Free { addr, bytes } => {
                let end = (addr + bytes).min(self.history.len() as u64);
                for b in addr..end {
                    self.history[b as usize].clear();
                }
                for w in addr / 4..end.div_ceil(4) {
                    self.sync[w as usize] = WordSync::default();
                }
                None
            }
            Op::Kernel => {
                let mut all = vec![0; self.n];
                for c in &self.vc {
                    join(&mut all, c);
                }
                for t in 0..self.n {
                    self.vc[t] = all.clone();
                    self.vc[t][t] += 1;
                    self.fence_clock[t] = [None, None, None];
                    self.observed[t] = [vec![0; self.n], vec![0; self.n]];
                }
                None
            }
        }
    }
}

// ----- the engine harness -----------------------------------------------------

pub const CLOCK_BUFFER: u32 = 64;

/// Host memory for the engine: thread states, shadow, pool, reports, one
/// stream ring.
pub struct Harness {
    pub cfg: EngineConfig,
    ts_words: usize,
    ts: Vec<AtomicU32>,
    shadow: Vec<AtomicU64>,
    pool: Vec<AtomicU32>,
    reports: Vec<AtomicU32>,
    sc: Vec<AtomicU32>,
    ring: Vec<AtomicU32>,
    kernel: u32,
    /// Runs [`Op::Line`] word by word, never through the line's summary
    /// (the reference the summary is checked against).
    pub lines_as_words: bool,
    /// [`Op::Line`]s the line's summary checked whole.
    pub lines_summarised: u32,
    /// Pool records [`Op::Free`]s gave back.
    pub records_reclaimed: u32,
    /// Atomic sets of the words when they were freed.
    pub atomic_sets_freed: u32,
}

fn zeroed32(n: usize) -> Vec<AtomicU32> {
    let v = vec![0u32; n];
    // SAFETY: AtomicU32 has the size, alignment and bit validity of u32,
    // and the vector is moved, not shared (zeroed allocation: fast even
    // for the gigabyte-sized states of 4,096-thread programs).
    unsafe {
        let mut v = std::mem::ManuallyDrop::new(v);
        Vec::from_raw_parts(v.as_mut_ptr().cast::<AtomicU32>(), v.len(), v.capacity())
    }
}

impl Harness {
    pub fn new(sms: u32, devices: u32, words: usize, pool_records: usize) -> Self {
        Self::with_clock_buffer(sms, devices, words, pool_records, CLOCK_BUFFER)
    }

    pub fn with_clock_buffer(
        sms: u32,
        devices: u32,
        words: usize,
        pool_records: usize,
        clock_buffer: u32,
    ) -> Self {
        let n = sms * devices;
        let cfg = EngineConfig {
            num_sms: sms,
            num_threads: n,
            clock_buffer_size: clock_buffer,
            rng_seed: 0x5eed,
            real_base: 0,
            // The oracle tests check exactness while memory allows: only
            // the pool bounds a word's chain here (the runtimes' default
            // cap is checked on its own, `compare_capped`).
            chain_records_per_word: u32::MAX,
            spill_snapshots: true,
        };
        let ts_words = thread_state_words(n, clock_buffer);
        let pool = zeroed32(PoolHeader::WORDS + pool_records * InflatedRecord::WORDS);
        pool[1].store(pool_records as u32, std::sync::atomic::Ordering::Relaxed);
        let reports = zeroed32(ReportBufferHeader::WORDS + 64 * RaceReport::WORDS);
        reports[1].store(64, std::sync::atomic::Ordering::Relaxed);
        let h = Harness {
            cfg,
            ts_words,
            ts: zeroed32(ts_words * n as usize),
            shadow: (0..words).map(|_| AtomicU64::new(0)).collect(),
            pool,
            reports,
            sc: zeroed32(sc_fence_words(devices, n)),
            ring: zeroed32(3 * n as usize),
            kernel: 1,
            lines_as_words: false,
            lines_summarised: 0,
            records_reclaimed: 0,
            atomic_sets_freed: 0,
        };
        h.with(|e, ring| {
            for t in 0..n {
                e.init_thread(t);
                e.kernel_entry(t, ring, 1);
            }
        });
        h
    }

    pub fn with<R>(
        &self,
        f: impl FnOnce(&Engine<'_, SliceMemory<'_, CoreAtomics>>, &[AtomicU32]) -> R,
    ) -> R {
        let mem = SliceMemory::<CoreAtomics> {
            thread_states: &self.ts,
            thread_state_words: self.ts_words,
            shadow: &self.shadow,
            pool: &self.pool,
            reports: &self.reports,
            sc_fences: &self.sc,
        };
        let e = Engine::new(&mem, self.cfg);
        f(&e, &self.ring)
    }

    pub fn evictions(&self) -> u32 {
        Pool::<CoreAtomics>::new(&self.pool).evictions()
    }

    /// Release heads merged into wide heads.
    pub fn merged_heads(&self) -> u32 {
        Pool::<CoreAtomics>::new(&self.pool).merged_heads()
    }

    /// Accesses kept compact with older clocks dropped (full pool).
    pub fn degraded(&self) -> u32 {
        Pool::<CoreAtomics>::new(&self.pool).degraded()
    }

    /// Words whose history has an atomic set.
    pub fn atomic_sets(&self) -> u32 {
        let pool = Pool::<CoreAtomics>::new(&self.pool);
        let load = |w: &AtomicU64| ShadowCell(w.load(std::sync::atomic::Ordering::Relaxed));
        self.shadow
            .iter()
            .filter(|w| match load(w).view() {
                CellView::Inflated(i) => {
                    WordState::from_record::<CoreAtomics>(pool.record(i)).set != 0
                }
                _ => false,
            })
            .count() as u32
    }

    /// Acquires that found their snapshot overwritten (all threads).
    pub fn coarsened(&self) -> u32 {
        (0..self.cfg.num_threads)
            .map(|t| {
                self.ts[t as usize * self.ts_words + ThreadStateHeader::COARSENED_WORD]
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum()
    }

    /// Records handed out by the bump allocator so far.
    pub fn pool_used(&self) -> u32 {
        self.pool[PoolHeader::NEXT_WORD].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Snapshots spilled into the pool, over all threads.
    pub fn spilled_snapshots(&self) -> u32 {
        (0..self.cfg.num_threads as usize)
            .map(|t| {
                let words = &self.ts[t * self.ts_words..(t + 1) * self.ts_words];
                ThreadClocks::<CoreAtomics>::new(
                    words,
                    self.cfg.num_threads,
                    self.cfg.clock_buffer_size,
                )
                .with_pool(&self.pool)
                .spilled_snapshots()
            })
            .sum()
    }

    /// Records handed out and not given back to the free list.
    pub fn pool_in_use(&self) -> u32 {
        Pool::<CoreAtomics>::new(&self.pool).in_use()
    }

    /// Every word's decoded state (through its line's summary while the
    /// line has one), in a form two harnesses compare.
    pub fn word_states(&self) -> Vec<String> {
        let load = |w: usize| self.shadow[w].load(std::sync::atomic::Ordering::Relaxed);
        (0..self.shadow.len())
            .map(|w| {
                let head = load(line::head_word(w as u64) as usize);
                let cell = line::state_cell(w as u64, head, load(w));
                let st = match cell.view() {
                    CellView::Compact => WordState::from_compact(cell),
                    CellView::Inflated(i) => WordState::from_record::<CoreAtomics>(
                        Pool::<CoreAtomics>::new(&self.pool).record(i),
                    ),
                    v => return format!("word {w}: {v:?}"),
                };
                let set: Vec<_> = self.with(|e, _| {
                    e.atomic_set(&st)
                        .map(|s| s.clocks().collect())
                        .unwrap_or_default()
                });
                format!(
                    "{:?} {:?} {:?} {} {:?}",
                    &st.accesses[..st.len],
                    &st.releases[..st.release_len],
                    st.last_atomic_write,
                    st.lossy,
                    set
                )
            })
            .collect()
    }

    /// Overwrites word `i` of thread `tid`'s state (tests of error paths).
    pub fn set_thread_word(&self, tid: u32, i: usize, v: u32) {
        self.ts[tid as usize * self.ts_words + i].store(v, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn reports(&self) -> &[AtomicU32] {
        &self.reports
    }

    /// Runs one step; for accesses returns the engine's outcome.
    pub fn step(&mut self, op: &Op) -> Option<Outcome> {
        let site = AccessSite::default();
        match *op {
            Op::Line { tid, line, write } => Some(self.with(|e, _| {
                let addr = line * LINE_BYTES;
                if !self.lines_as_words {
                    // The runtime notes the access under the epoch it will
                    // carry: exactly once, on every path.
                    let expected = e.next_access_epoch(tid);
                    let mut noted = Vec::new();
                    let line = e.access_line_noted(tid, addr, 4, write, &site, |ep| noted.push(ep));
                    assert_eq!(noted, [expected], "the note of a whole-line access");
                    if let LineOutcome::Done(o) = line {
                        return (o, 1);
                    }
                }
                // As the GPU's lanes: each checks its own word.
                let mut out = Outcome::Clean;
                for k in 0..LINE_WORDS {
                    let o = e.access(tid, addr + 4 * k, 4, write, &site);
                    if matches!(out, Outcome::Clean) {
                        out = o;
                    }
                }
                (out, 0)
            }))
            .map(|(o, summarised)| {
                self.lines_summarised += summarised;
                o
            }),
            Op::Plain {
                tid,
                addr,
                size,
                write,
            } => Some(self.with(|e, _| e.access(tid, addr, size, write, &site))),
            Op::Atomic {
                tid,
                addr,
                size,
                kind,
                ord,
                fail,
                scope,
                succeeds,
            } => {
                let op = AtomicOp {
                    kind,
                    ordering: ord,
                    failure_ordering: fail,
                    scope,
                };
                let wrote = match kind {
                    AtomicOpKind::Load => false,
                    AtomicOpKind::CompareExchange => succeeds,
                    _ => true,
                };
                Some(self.with(|e, _| e.atomic(tid, addr, size, op, &site, || wrote)))
            }
            Op::Fence { tid, ord, scope } => {
                self.with(|e, _| e.fence(tid, ord, scope));
                None
            }
            Op::Free { addr, bytes } => {
                self.atomic_sets_freed += self.atomic_sets();
                let given = self.with(|e, _| e.reclaim_range(addr, bytes));
                self.records_reclaimed += given;
                None
            }
            Op::Kernel => {
                let k = self.kernel;
                let n = self.cfg.num_threads;
                self.with(|e, ring| {
                    for t in 0..n {
                        e.kernel_exit(t, ring, k);
                    }
                    for t in 0..n {
                        e.kernel_entry(t, ring, k + 1);
                    }
                });
                self.kernel += 1;
                None
            }
        }
    }
}

/// Per-access verdicts of both detectors on one program.
pub struct Comparison {
    /// For each access: the oracle's racing threads, and the engine's outcome.
    pub steps: Vec<(Vec<u32>, Outcome)>,
    /// Access clocks evicted, release heads merged, snapshots coarsened:
    /// the engine's documented precision losses (0: it must be exact).
    pub precision_lost: u32,
    /// Of those, the release-history ones (heads merged, snapshots
    /// coarsened), not the access-history evictions.
    pub release_precision_lost: u32,
    /// Accesses kept compact with older clocks dropped (full pool).
    pub degraded: u32,
    /// Words whose history had an atomic set when freed or at the end.
    pub atomic_sets: u32,
    pub errors: usize,
    /// Pool records handed out at the end, and given back by frees.
    pub pool_in_use: u32,
    pub records_reclaimed: u32,
    /// Snapshots spilled into the pool at the end.
    pub spilled_snapshots: u32,
}

pub fn compare(p: &Program, words: usize) -> Comparison {
    compare_with(p, words, CLOCK_BUFFER)
}

/// [`compare`] with `clock_buffer` snapshots per thread and a pool of one
/// record per word.
pub fn compare_with(p: &Program, words: usize, clock_buffer: u32) -> Comparison {
    compare_in(p, words, words.max(4096), clock_buffer)
}

/// [`compare_with`] on a pool of `pool` records.
pub fn compare_in(p: &Program, words: usize, pool: usize, clock_buffer: u32) -> Comparison {
    compare_capped(p, words, pool, clock_buffer, u32::MAX)
}

/// [`compare_in`] with at most `chain_cap` chain records per word (the
/// GPU runtime's [`EngineConfig::chain_records_per_word`]), and without
/// spilled snapshots unless the cap is `u32::MAX`.
pub fn compare_capped(
    p: &Program,
    words: usize,
    pool: usize,
    clock_buffer: u32,
    chain_cap: u32,
) -> Comparison {
    let mut oracle = Oracle::new(p.num_sms, p.num_devices, words * 4);
    // Small programs (the random-program test) keep one head per release
    // in the oracle, which cross-checks the engine's joins; large ones
    // could not afford it.
    oracle.join_heads = p.threads() > 64;
    let mut engine =
        Harness::with_clock_buffer(p.num_sms, p.num_devices, words, pool, clock_buffer);
    engine.cfg.chain_records_per_word = chain_cap;
    // A capped history is the GPU runtime's: no spilled snapshots either.
    engine.cfg.spill_snapshots = chain_cap == u32::MAX;
    let mut steps = Vec::new();
    for op in &p.ops {
        let o = oracle.step(op);
        let e = engine.step(op);
        if let (Some(o), Some(e)) = (o, e) {
            steps.push((o, e));
        }
    }
    let errors = steps.iter().filter(|(_, e)| e.is_error()).count();
    Comparison {
        steps,
        precision_lost: engine.evictions() + engine.merged_heads() + engine.coarsened(),
        release_precision_lost: engine.merged_heads() + engine.coarsened(),
        degraded: engine.degraded(),
        atomic_sets: engine.atomic_sets() + engine.atomic_sets_freed,
        errors,
        pool_in_use: engine.pool_in_use(),
        records_reclaimed: engine.records_reclaimed,
        spilled_snapshots: engine.spilled_snapshots(),
    }
}
