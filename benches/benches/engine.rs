//! Engine benchmarks, no GPU needed: the happens-before engine alone over
//! host memory (what every sanitized access runs, on the GPU and the CPU
//! backend), per access, for the access patterns the suite's kernels make.
//!
//! ```text
//! cargo bench -p vigil-bench --bench engine
//! ```

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering as MemOrder};

use divan::counter::ItemsCount;
use divan::Bencher;
use vigil_shared::abi::{thread_state_words, AccessSite, InflatedRecord, PoolHeader};
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::engine::{AtomicOp, AtomicOpKind, Engine, EngineConfig, SliceMemory};
use vigil_shared::line::{LineOutcome, LINE_WORDS};
use vigil_shared::{Ordering, Scope};

fn main() {
    divan::main();
}

/// Sanitizer threads (one device).
const THREADS: u32 = 32;
/// Words every pattern touches.
const WORDS: usize = 1 << 16;
/// The engine configurations benchmarked: the CPU backend's exact
/// history and the GPU runtime's bounded one.
const HISTORIES: [&str; 2] = ["exact", "bounded"];
/// Pool records (the GPU runtime's default is 65,536).
const RECORDS: usize = 4096;

/// Host memory for one engine.
struct Memory {
    cfg: EngineConfig,
    state_words: usize,
    states: Vec<AtomicU32>,
    shadow: Vec<AtomicU64>,
    pool: Vec<AtomicU32>,
    ring: Vec<AtomicU32>,
    kernel: u32,
}

fn zeroed32(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

impl Memory {
    /// The GPU runtime's configuration (`"bounded"` history) or the CPU
    /// backend's (`"exact"`).
    fn new(history: &str) -> Memory {
        let cfg = EngineConfig {
            num_sms: THREADS,
            num_threads: THREADS,
            clock_buffer_size: 16,
            rng_seed: 1,
            real_base: 0,
            chain_records_per_word: 0,
            spill_snapshots: false,
        };
        let cfg = if history == "bounded" {
            cfg
        } else {
            cfg.with_exact_history()
        };
        let state_words = thread_state_words(THREADS, cfg.clock_buffer_size);
        let pool = zeroed32(PoolHeader::WORDS + RECORDS * InflatedRecord::WORDS);
        pool[1].store(RECORDS as u32, MemOrder::Relaxed);
        let mut m = Memory {
            cfg,
            state_words,
            states: zeroed32(state_words * THREADS as usize),
            shadow: (0..WORDS).map(|_| AtomicU64::new(0)).collect(),
            pool,
            ring: zeroed32(3 * THREADS as usize),
            kernel: 0,
        };
        m.with(|e, _| (0..THREADS).for_each(|t| e.init_thread(t)));
        m.next_kernel();
        m
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&Engine<'_, SliceMemory<'_, CoreAtomics>>, &[AtomicU32]) -> R,
    ) -> R {
        let mem = SliceMemory::<CoreAtomics> {
            thread_states: &self.states,
            thread_state_words: self.state_words,
            shadow: &self.shadow,
            pool: &self.pool,
            reports: &[],
            sc_fences: &[],
        };
        f(&Engine::new(&mem, self.cfg), &self.ring)
    }

    /// A kernel boundary: every thread's accesses so far are ordered
    /// before every thread's next ones.
    fn next_kernel(&mut self) {
        let k = self.kernel;
        self.with(|e, ring| {
            (0..THREADS).for_each(|t| e.kernel_exit(t, ring, k));
            (0..THREADS).for_each(|t| e.kernel_entry(t, ring, k + 1));
        });
        self.kernel += 1;
    }
}

/// A copy's pattern: each word read by one thread, written by another
/// (blocks of 256 words per thread, as CTAs stream), once per kernel; the
/// cells hold the previous kernel's clocks.
#[divan::bench(args = HISTORIES)]
fn stream_read_write(bencher: Bencher, history: &str) {
    let mut m = Memory::new(history);
    let site = AccessSite::default();
    bencher
        .counter(ItemsCount::new(2 * WORDS / 2))
        .bench_local(|| {
            m.with(|e, _| {
                for w in 0..WORDS as u64 / 2 {
                    let t = (w / 256) as u32 % THREADS;
                    e.access(t, 4 * w, 4, false, &site);
                    e.access(t, 4 * (w + WORDS as u64 / 2), 4, true, &site);
                }
            });
            m.next_kernel();
        });
}

/// [`stream_read_write`] as warps make it: every line read and written
/// whole by one warp, checked through the line's summary
/// (`Engine::access_line`), counted per word as there.
#[divan::bench(args = HISTORIES)]
fn stream_lines(bencher: Bencher, history: &str) {
    let mut m = Memory::new(history);
    let site = AccessSite::default();
    let half = WORDS as u64 / 2;
    bencher
        .counter(ItemsCount::new(2 * WORDS / 2))
        .bench_local(|| {
            m.with(|e, _| {
                for w in (0..half).step_by(LINE_WORDS as usize) {
                    let t = (w / 256) as u32 % THREADS;
                    for (addr, write) in [(4 * w, false), (4 * (w + half), true)] {
                        if e.access_line(t, addr, 4, write, &site) == LineOutcome::PerWord {
                            for k in 0..LINE_WORDS {
                                e.access(t, addr + 4 * k, 4, write, &site);
                            }
                        }
                    }
                }
            });
            m.next_kernel();
        });
}

/// A stencil's or a tile's pattern: one thread reads words it read
/// already in this epoch (FastTrack's same-epoch case).
#[divan::bench(args = HISTORIES)]
fn same_epoch_reads(bencher: Bencher, history: &str) {
    let m = Memory::new(history);
    let site = AccessSite::default();
    m.with(|e, _| {
        for w in 0..WORDS as u64 {
            e.access(0, 4 * w, 4, false, &site);
        }
    });
    bencher.counter(ItemsCount::new(WORDS)).bench_local(|| {
        m.with(|e, _| {
            for w in 0..WORDS as u64 {
                e.access(0, 4 * w, 4, false, &site);
            }
        })
    });
}

/// A counter's pattern: every thread's relaxed device-scope atomic adds
/// on one word.
#[divan::bench(args = HISTORIES)]
fn hot_word_atomics(bencher: Bencher, history: &str) {
    let m = Memory::new(history);
    let site = AccessSite::default();
    let op = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
    const OPS: usize = 4096;
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        m.with(|e, _| {
            for i in 0..OPS as u32 {
                e.atomic(i % THREADS, 0, 4, op, &site, || true);
            }
        })
    });
}
