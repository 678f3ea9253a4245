//! Race-engine benchmarks, no GPU needed: the engine alone
//! (`vigil_shared::race`) over host memory, what every sanitized access
//! runs on the GPU and the CPU backend, per access, for the patterns the
//! suite's kernels make.
//!
//! ```text
//! cargo bench -p vigil-bench --bench engine
//! ```

use std::sync::atomic::{AtomicU32, AtomicU64};

use divan::counter::ItemsCount;
use divan::Bencher;
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::race::atomic::{atomic, AtomicOp, AtomicOpKind};
use vigil_shared::race::cta::{CtaView, LaneDevices};
use vigil_shared::race::knowledge::Arena;
use vigil_shared::race::line::{access_line, LineAccess, LineOutcome, LINE_WORDS};
use vigil_shared::race::record::{Pool, RECORD_WORDS};
use vigil_shared::race::serial::{lane_start, HostOrder, LaneBounds, Serial};
use vigil_shared::race::sync::{CtaSync, SYNC_WORDS};
use vigil_shared::race::{access, SiteLanes, SiteWord, SliceMemory};
use vigil_shared::{Ordering, Scope};

fn main() {
    divan::main();
}

/// Words every pattern touches (256 KiB of data).
const WORDS: usize = 1 << 16;
/// CTAs of each launch.
const CTAS: u32 = 64;
/// Pool records.
const RECORDS: usize = 1 << 16;

/// The engine's memory, and the launches of one stream, each ordered
/// after the last by the host (a stream's launches, the host waiting
/// between them: what came before is forgotten).
struct Engine {
    shadow: Vec<AtomicU64>,
    pool: Vec<AtomicU64>,
    arena: Vec<AtomicU32>,
    sync: Vec<AtomicU32>,
    bounds: LaneBounds,
    devices: LaneDevices,
    base: Serial,
}

fn zeroed32(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}
fn zeroed64(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl Engine {
    fn new() -> Engine {
        let pool = zeroed64((RECORDS + 1) * RECORD_WORDS);
        Pool::<CoreAtomics>::init(&pool);
        let arena = zeroed32(1 << 20);
        Arena::<CoreAtomics>::init(&arena, 1);
        let mut e = Engine {
            shadow: zeroed64(WORDS),
            pool,
            arena,
            sync: zeroed32(SYNC_WORDS),
            bounds: LaneBounds::NONE,
            devices: LaneDevices::default(),
            base: lane_start(1),
        };
        e.next_launch();
        e
    }

    /// The next launch on the stream.
    fn next_launch(&mut self) {
        self.base += CTAS;
        self.bounds.0[1] = self.base;
    }

    fn mem(&self) -> SliceMemory<'_, CoreAtomics> {
        SliceMemory {
            shadow: &self.shadow,
            pool: &self.pool,
            arena: &self.arena,
            exits: &[],
            sites: &[],
            launches: &[],
            sc: &[],
        }
    }

    /// CTA `cta` of the current launch (a fresh synchronisation state:
    /// what it acquired is not carried from one call to the next).
    fn cta(&self, cta: u32) -> CtaView<'_> {
        let sync = CtaSync::<CoreAtomics>::new(&self.sync);
        CtaView {
            serial: self.base + cta,
            epoch: sync.epoch(),
            device: 0,
            host: HostOrder::new(self.base, CTAS, &self.bounds),
            global: &self.bounds,
            devices: &self.devices,
            known: sync.known(),
            launch: 0,
            own: Default::default(),
        }
    }
}

/// The CTA a streaming kernel's word `w` belongs to (blocks of 256 words).
fn cta_of(w: u64) -> u32 {
    (w / 256) as u32 % CTAS
}

fn site(serial: Serial) -> SiteWord {
    SiteWord::new(serial, 0x1000, 0, SiteLanes::Four)
}

/// One launch after another on the stream, each reading the words of one
/// half and writing the same words of the other, `step` words at a time
/// through `check` (which asserts the access is clean).
fn stream(
    bencher: Bencher,
    step: u64,
    check: impl Fn(&SliceMemory<'_, CoreAtomics>, &CtaView<'_>, u64, bool, &mut bool),
) {
    let mut e = Engine::new();
    CtaSync::<CoreAtomics>::new(&e.sync).init();
    let half = WORDS as u64 / 2;
    bencher.counter(ItemsCount::new(WORDS)).bench_local(|| {
        {
            let mem = e.mem();
            let mut bounded = false;
            for w in (0..half).step_by(step as usize) {
                let view = e.cta(cta_of(w));
                for (word, write) in [(w, false), (w + half, true)] {
                    check(&mem, &view, word, write, &mut bounded);
                }
            }
        }
        e.next_launch();
    });
}

/// A copy as warps make it: each line of one half read whole and the
/// same line of the other half written whole (the lines hold the last
/// launch's accesses), through the line headers.
#[divan::bench]
fn stream_lines(bencher: Bencher) {
    stream(bencher, LINE_WORDS, |mem, view, word, write, bounded| {
        let acc = LineAccess {
            write,
            read_only: false,
            site: site(view.serial),
        };
        assert_eq!(
            access_line(mem, view, word, acc, bounded),
            LineOutcome::Clean
        );
    });
}

/// [`stream_lines`] as the CPU backend checks it: every thread's word on
/// its own (the lines split into words at the first launch).
#[divan::bench]
fn stream_words(bencher: Bencher) {
    stream(bencher, 1, |mem, view, word, write, bounded| {
        let r = access(
            mem,
            view,
            word,
            0,
            4,
            write,
            false,
            site(view.serial),
            bounded,
        );
        assert!(r.is_none());
    });
}

/// Split words read by many CTAs of one launch (a table every block
/// reads): records of entries, one per run of CTAs with one site, and a
/// CTA re-reading its own words.
#[divan::bench]
fn split_words_read_by_every_cta(bencher: Bencher) {
    let mut e = Engine::new();
    CtaSync::<CoreAtomics>::new(&e.sync).init();
    const TABLE: u64 = 1024;
    bencher
        .counter(ItemsCount::new(TABLE as usize * CTAS as usize))
        .bench_local(|| {
            {
                let mem = e.mem();
                let mut bounded = false;
                for c in 0..CTAS {
                    let view = e.cta(c);
                    for w in 0..TABLE {
                        let s = SiteWord::new(view.serial, 0x2000, 0, SiteLanes::Single);
                        let r = access(&mem, &view, w, 0, 4, false, false, s, &mut bounded);
                        assert!(r.is_none());
                    }
                }
            }
            e.next_launch();
        });
}

/// A counter's pattern: every CTA's relaxed device-scope adds on one
/// word, through the word's record locked around the operation.
#[divan::bench]
fn contended_atomic(bencher: Bencher) {
    let e = Engine::new();
    const OPS: u32 = 4096;
    let op = AtomicOp {
        kind: AtomicOpKind::Rmw,
        ordering: Ordering::Relaxed,
        failure_ordering: Ordering::Relaxed,
        scope: Scope::Device,
    };
    let counter = AtomicU32::new(0);
    bencher
        .counter(ItemsCount::new(OPS as usize))
        .bench_local(|| {
            let mem = e.mem();
            let sync = CtaSync::<CoreAtomics>::new(&e.sync);
            sync.init();
            let mut bounded = false;
            for i in 0..OPS {
                let mut view = e.cta(i % CTAS);
                let at = site(view.serial);
                let ((), race) = atomic(
                    &mem,
                    &mut view,
                    &sync,
                    0,
                    0,
                    0,
                    4,
                    op,
                    at,
                    &mut bounded,
                    || {
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        ((), true)
                    },
                );
                assert!(race.is_none());
            }
        });
}
