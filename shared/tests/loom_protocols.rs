//! The lock and atomic protocols, model-checked with loom as ordinary
//! tests (no `--cfg loom` rebuild): the engine is generic over
//! [`AtomicFamily`], and here that family is loom's.

use loom::sync::atomic::{AtomicU32 as LU32, AtomicU64 as LU64};
use loom::sync::Arc;
use std::sync::atomic::Ordering as MemOrder;

use vigil_shared::abi::{
    thread_state_words, AccessSite, InflatedRecord, PoolHeader, CHAIN_ACCESS_SLOTS,
    RECORD_ACCESS_SLOTS,
};
use vigil_shared::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops, RecordLock};
use vigil_shared::clock::ThreadClocks;
use vigil_shared::engine::{AtomicOp, AtomicOpKind, Engine, EngineConfig, SliceMemory};
use vigil_shared::line;
use vigil_shared::shadow::{AccessClock, CellView, Pool, ShadowCell, WordState};
use vigil_shared::{Ordering, Scope};

struct A32(LU32);
struct A64(LU64);

impl AtomicU32Ops for A32 {
    fn load(&self, o: MemOrder) -> u32 {
        self.0.load(o)
    }
    fn store(&self, v: u32, o: MemOrder) {
        self.0.store(v, o)
    }
    fn compare_exchange(&self, c: u32, n: u32, s: MemOrder, f: MemOrder) -> Result<u32, u32> {
        self.0.compare_exchange(c, n, s, f)
    }
    fn fetch_add(&self, v: u32, o: MemOrder) -> u32 {
        self.0.fetch_add(v, o)
    }
    fn fetch_sub(&self, v: u32, o: MemOrder) -> u32 {
        self.0.fetch_sub(v, o)
    }
    fn fetch_max(&self, v: u32, o: MemOrder) -> u32 {
        self.0.fetch_max(v, o)
    }
}

impl AtomicU64Ops for A64 {
    fn load(&self, o: MemOrder) -> u64 {
        self.0.load(o)
    }
    fn store(&self, v: u64, o: MemOrder) {
        self.0.store(v, o)
    }
    fn compare_exchange(&self, c: u64, n: u64, s: MemOrder, f: MemOrder) -> Result<u64, u64> {
        self.0.compare_exchange(c, n, s, f)
    }
}

struct LoomAtomics;
impl AtomicFamily for LoomAtomics {
    type U32 = A32;
    type U64 = A64;
    fn fence(o: MemOrder) {
        loom::sync::atomic::fence(o)
    }
    fn spin() {
        loom::thread::yield_now()
    }
}

const CB: u32 = 2;

/// Engine memory built from loom atomics.
struct Mem {
    threads: u32,
    ts_words: usize,
    ts: Vec<A32>,
    shadow: Vec<A64>,
    pool: Vec<A32>,
}

impl Mem {
    fn new(threads: u32, words: usize, records: usize) -> Arc<Self> {
        let ts_words = thread_state_words(threads, CB);
        let z32 = |n: usize| (0..n).map(|_| A32(LU32::new(0))).collect::<Vec<_>>();
        let pool = z32(PoolHeader::WORDS + records * InflatedRecord::WORDS);
        pool[1].store(records as u32, MemOrder::Relaxed);
        let m = Mem {
            threads,
            ts_words,
            ts: z32(ts_words * threads as usize),
            shadow: (0..words).map(|_| A64(LU64::new(0))).collect(),
            pool,
        };
        m.with(|e| (0..threads).for_each(|t| e.init_thread(t)));
        Arc::new(m)
    }

    fn with<R>(&self, f: impl FnOnce(&Engine<'_, SliceMemory<'_, LoomAtomics>>) -> R) -> R {
        let mem = SliceMemory::<LoomAtomics> {
            thread_states: &self.ts,
            thread_state_words: self.ts_words,
            shadow: &self.shadow,
            pool: &self.pool,
            reports: &[],
            sc_fences: &[],
        };
        let cfg = EngineConfig {
            num_sms: self.threads,
            num_threads: self.threads,
            clock_buffer_size: CB,
            rng_seed: 1,
            real_base: 0,
            chain_records_per_word: u32::MAX,
            spill_snapshots: true,
        };
        f(&Engine::new(&mem, cfg))
    }

    fn word(&self, w: usize) -> WordState {
        let head = self.shadow[line::head_word(w as u64) as usize].load(MemOrder::Acquire);
        let cell = line::state_cell(w as u64, head, self.shadow[w].load(MemOrder::Acquire));
        match cell.view() {
            CellView::Compact => WordState::from_compact(cell),
            CellView::Inflated(i) => WordState::from_record::<LoomAtomics>(
                Pool::<LoomAtomics>::new(&self.pool).record(i),
            ),
            CellView::Locked | CellView::Line => panic!("word {w} left locked"),
        }
    }

    fn has(&self, w: usize, tid: u32, write: bool) -> bool {
        let s = self.word(w);
        s.accesses[..s.len]
            .iter()
            .any(|a| a.tid == tid && a.write == write)
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = None;
    b.check(f);
}

/// [`model`] for long engine paths (chain walks, spills): two preemptions
/// cover the lock hand-offs.
fn long_model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.max_branches = 100_000;
    b.check(f);
}

#[test]
fn two_accesses_inflating_one_cell_lose_nothing() {
    model(|| {
        let m = Mem::new(3, 1, 3);
        // Thread 2 read the word: one more concurrent reader must inflate.
        m.with(|e| e.access(2, 0, 4, false, &AccessSite::default()));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let o = m.with(|e| e.access(t, 0, 4, false, &AccessSite::default()));
                    assert!(!o.is_race() && !o.is_error());
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(matches!(
            ShadowCell(m.shadow[0].load(MemOrder::Relaxed)).view(),
            CellView::Inflated(_)
        ));
        for t in 0..3 {
            assert!(m.has(0, t, false), "reader {t} lost");
        }
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        // Inflation claims the cell first: exactly one record, none wasted.
        assert_eq!(pool.wasted(), 0);
        assert_eq!(m.pool[0].load(MemOrder::Relaxed), 1);
    });
}

#[test]
fn overlapping_cells_locked_in_opposite_orders_do_not_deadlock() {
    model(|| {
        let m = Mem::new(2, 2, 2);
        let orders = [[0u64, 1], [1, 0]];
        let handles: Vec<_> = (0..2u32)
            .map(|t| {
                let m = m.clone();
                loom::thread::spawn(move || {
                    m.with(|e| {
                        let mut locked = e.lock_words(orders[t as usize]);
                        for w in locked.iter_mut().flatten() {
                            w.state.push(AccessClock {
                                tid: t,
                                epoch: 1,
                                mask: 0b1111,
                                write: true,
                                atomic: true,
                                scope: Scope::Device,
                                extent: 0b1111,
                            });
                        }
                        e.unlock_words(locked).unwrap();
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for w in 0..2 {
            for t in 0..2 {
                assert!(m.has(w, t, true), "update of thread {t} on word {w} lost");
            }
        }
    });
}

#[test]
fn overlapping_multi_cell_atomics_serialise_with_memory() {
    model(|| {
        let m = Mem::new(2, 3, 4);
        let data = Arc::new(LU32::new(0));
        let handles: Vec<_> = [(0u32, 0u64, 8u32), (1, 4, 4)]
            .into_iter()
            .map(|(t, addr, size)| {
                let (m, data) = (m.clone(), data.clone());
                loom::thread::spawn(move || {
                    let op = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
                    m.with(|e| {
                        e.atomic(t, addr, size, op, &AccessSite::default(), || {
                            data.fetch_add(1, MemOrder::Relaxed);
                            true
                        })
                    })
                })
            })
            .collect();
        let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // Not the same bytes, so not morally strong: whichever came second
        // reports the race, never both, never an error.
        assert_eq!(outcomes.iter().filter(|o| o.is_race()).count(), 1);
        assert!(outcomes.iter().all(|o| !o.is_error()));
        assert_eq!(data.load(MemOrder::Relaxed), 2);
        assert!(m.has(0, 0, true) && m.has(1, 0, true) && m.has(1, 1, true));
    });
}

#[test]
fn thread_state_lock_never_shows_a_torn_clock() {
    model(|| {
        let m = Mem::new(3, 1, 0);
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || {
                let c = ThreadClocks::<LoomAtomics>::new(&m.ts[..m.ts_words], 3, CB);
                c.lock_exclusive();
                c.join_entry(1, 7);
                c.join_entry(2, 7);
                c.unlock_exclusive();
            })
        };
        let c = ThreadClocks::<LoomAtomics>::new(&m.ts[..m.ts_words], 3, CB);
        c.lock_shared_fresh(0).unwrap();
        let (a, b) = (c.get(1), c.get(2));
        c.unlock_shared();
        assert_eq!(a, b, "reader saw half a clock update");
        writer.join().unwrap();
        assert_eq!((c.get(1), c.get(2)), (7, 7));
    });
}

#[test]
fn clock_buffer_reader_never_accepts_an_overwritten_snapshot_and_falls_back_to_a_superset() {
    model(|| {
        let m = Mem::new(3, 1, 0);
        let owner = ThreadClocks::<LoomAtomics>::new(&m.ts[..m.ts_words], 3, CB);
        owner.lock_exclusive();
        owner.join_entry(1, 3);
        owner.join_entry(2, 3);
        let first = owner.publish();
        owner.unlock_exclusive();
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || {
                let c = ThreadClocks::<LoomAtomics>::new(&m.ts[..m.ts_words], 3, CB);
                // CB more publications overwrite the first snapshot's slot.
                for v in 5..5 + CB {
                    c.lock_exclusive();
                    c.join_entry(1, v);
                    c.join_entry(2, v);
                    c.publish();
                    c.unlock_exclusive();
                }
            })
        };
        let mut seen = [u32::MAX; 3];
        if owner
            .read_snapshot(first, |j, v| seen[j as usize] = v)
            .is_ok()
        {
            assert_eq!(seen, [1, 3, 3], "accepted a torn or newer snapshot");
        }
        // What an acquire of that release joins contains the snapshot,
        // whether read back or replaced by the overflow clock.
        let mut joined = [0u32; 3];
        owner.read_release(first, 1, |j, v| {
            joined[j as usize] = joined[j as usize].max(v)
        });
        assert!(joined[1] >= 3 && joined[2] >= 3, "lost {joined:?}");
        writer.join().unwrap();
    });
}

/// Engine memory with SC-fence clocks, for the SC-order model.
struct ScMem {
    base: Arc<Mem>,
    sc: Vec<A32>,
}

#[test]
fn concurrent_sc_fences_are_totally_ordered() {
    model(|| {
        let m = Arc::new(ScMem {
            base: Mem::new(2, 1, 0),
            sc: (0..vigil_shared::engine::sc_fence_words(1, 2))
                .map(|_| A32(LU32::new(0)))
                .collect(),
        });
        let run = |m: &ScMem, t: u32| {
            let b = &m.base;
            let mem = SliceMemory::<LoomAtomics> {
                thread_states: &b.ts,
                thread_state_words: b.ts_words,
                shadow: &b.shadow,
                pool: &b.pool,
                reports: &[],
                sc_fences: &m.sc,
            };
            let cfg = EngineConfig {
                num_sms: 2,
                num_threads: 2,
                clock_buffer_size: CB,
                rng_seed: 1,
                real_base: 0,
                chain_records_per_word: u32::MAX,
                spill_snapshots: true,
            };
            let e = Engine::new(&mem, cfg);
            e.fence(t, Ordering::SeqCst, Scope::Device);
            e.clock_entry(t, 1 - t)
        };
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || run(&m, 1))
        };
        let saw_1 = run(&m, 0);
        let saw_0 = other.join().unwrap();
        // Whichever fence came second in SC order acquired the first's clock.
        assert!(
            saw_0 >= 1 || saw_1 >= 1,
            "two SC fences ordered neither way"
        );
    });
}

#[test]
fn plain_access_and_atomic_on_one_cell_both_land_and_race() {
    model(|| {
        let m = Mem::new(2, 1, 2);
        let atomic = {
            let m = m.clone();
            loom::thread::spawn(move || {
                let op = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
                m.with(|e| e.atomic(0, 0, 4, op, &AccessSite::default(), || true))
            })
        };
        let plain = m.with(|e| e.access(1, 0, 4, true, &AccessSite::default()));
        let atomic = atomic.join().unwrap();
        // Whichever came second saw the first: exactly one race report.
        assert_eq!(plain.is_race() as u32 + atomic.is_race() as u32, 1);
        assert!(m.has(0, 0, true) && m.has(0, 1, true));
    });
}

#[test]
fn plain_access_without_the_lock_beside_a_clock_change_of_its_own_thread() {
    model(|| {
        let m = Mem::new(2, 2, 2);
        // Thread 1 releases word 1; then two GPU threads of sanitizer thread
        // 0 run at once: one acquires word 1 (a clock change under the write
        // lock), the other reads word 0 without the lock.
        let release = AtomicOp::new(AtomicOpKind::Store, Ordering::Release, Scope::Device);
        m.with(|e| e.atomic(1, 4, 4, release, &AccessSite::default(), || true));
        let acquirer = {
            let m = m.clone();
            loom::thread::spawn(move || {
                let acquire = AtomicOp::new(AtomicOpKind::Load, Ordering::Acquire, Scope::Device);
                m.with(|e| e.atomic(0, 4, 4, acquire, &AccessSite::default(), || false))
            })
        };
        let plain = m.with(|e| e.access(0, 0, 4, false, &AccessSite::default()));
        let acquired = acquirer.join().unwrap();
        assert!(
            !plain.is_race() && !plain.is_error() && !acquired.is_race() && !acquired.is_error()
        );
        assert!(m.has(0, 0, false));
        assert_eq!(m.with(|e| e.clock_entry(0, 1)), 1, "the acquire was lost");
    });
}

#[test]
fn concurrent_releasers_into_one_word_are_both_acquired() {
    model(|| {
        let m = Mem::new(3, 1, 2);
        // Threads 0 and 1 each write their epoch's worth, release-fence and
        // bump word 0 relaxed, at the same time: the second joins the
        // first's head into a derived snapshot.
        let bump = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.with(|e| {
                    e.fence(1, Ordering::Release, Scope::Device);
                    e.atomic(1, 0, 4, bump, &AccessSite::default(), || true)
                })
            })
        };
        m.with(|e| {
            e.fence(0, Ordering::Release, Scope::Device);
            e.atomic(0, 0, 4, bump, &AccessSite::default(), || true)
        });
        other.join().unwrap();
        let acquire = AtomicOp::new(AtomicOpKind::Load, Ordering::Acquire, Scope::Device);
        let o = m.with(|e| e.atomic(2, 0, 4, acquire, &AccessSite::default(), || false));
        assert!(!o.is_race() && !o.is_error());
        // Epoch 1 of both releasers is in the acquirer's clock.
        assert_eq!(
            m.with(|e| (e.clock_entry(2, 0), e.clock_entry(2, 1))),
            (1, 1)
        );
    });
}

#[test]
fn the_pool_free_list_hands_a_record_to_one_owner_at_a_time() {
    model(|| {
        let m = Mem::new(1, 0, 2);
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        // Record 0 given back: one taker pops it, the other bumps record 1
        // or, after the first gave it back, pops it again.
        let first = pool.allocate().unwrap();
        pool.free(first);
        let own = |m: &Mem| {
            let pool = Pool::<LoomAtomics>::new(&m.pool);
            let i = pool.allocate().expect("a record for each taker");
            // Zeroed, and no other owner touches it while it is held.
            let mark = &pool.record(i)[5];
            assert_eq!(mark.0.fetch_add(1, MemOrder::Relaxed), 0);
            mark.0.fetch_sub(1, MemOrder::Relaxed);
            pool.free(i);
        };
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || own(&m))
        };
        own(&m);
        other.join().unwrap();
        assert_eq!(pool.in_use(), 0);
    });
}

#[test]
fn concurrent_readers_growing_one_chain_keep_every_clock() {
    long_model(|| {
        let readers = RECORD_ACCESS_SLOTS as u32 + 2;
        let m = Mem::new(readers, 1, 3);
        // A full record of unordered readers; the last two read at once,
        // each spilling one clock into the same chain.
        for t in 0..readers - 2 {
            m.with(|e| e.access(t, 0, 4, false, &AccessSite::default()));
        }
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.with(|e| e.access(readers - 1, 0, 4, false, &AccessSite::default()))
            })
        };
        let o = m.with(|e| e.access(readers - 2, 0, 4, false, &AccessSite::default()));
        assert!(!o.is_race() && !o.is_error());
        other.join().unwrap();
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        let st = m.word(0);
        let mut tids: Vec<u32> = st.accesses[..st.len].iter().map(|a| a.tid).collect();
        let mut link = st.chain;
        while link != 0 {
            tids.extend(
                (0..CHAIN_ACCESS_SLOTS)
                    .filter_map(|s| pool.chain_clock(link - 1, s).map(|a| a.tid)),
            );
            link = pool.chain_next(link - 1);
        }
        tids.sort_unstable();
        assert_eq!(tids, (0..readers).collect::<Vec<_>>());
        assert_eq!((pool.in_use(), pool.evictions()), (2, 0));
    });
}

const RELEASE: AtomicOp = AtomicOp::new(AtomicOpKind::Store, Ordering::Release, Scope::Device);
const ACQUIRE: AtomicOp = AtomicOp::new(AtomicOpKind::Load, Ordering::Acquire, Scope::Device);

/// Thread 0's first snapshot, named by word 0's head; thread 2 publishes
/// twice (words 1 and 2) for thread 0 to acquire.
fn name_a_snapshot(m: &Mem) {
    let site = AccessSite::default();
    m.with(|e| {
        e.atomic(0, 0, 4, RELEASE, &site, || true);
        e.atomic(2, 4, 4, RELEASE, &site, || true);
        e.atomic(2, 8, 4, RELEASE, &site, || true);
    });
}

/// Thread 0 acquires thread 2's publications, each followed by a release
/// (words 3 and 4): two new snapshots, the second reusing the first one's
/// slot (a buffer of 2).
fn reuse_its_slot(m: &Mem) {
    let site = AccessSite::default();
    m.with(|e| {
        e.atomic(0, 4, 4, ACQUIRE, &site, || false);
        e.atomic(0, 12, 4, RELEASE, &site, || true);
        e.atomic(0, 8, 4, ACQUIRE, &site, || false);
        e.atomic(0, 16, 4, RELEASE, &site, || true);
    });
}

#[test]
fn a_spill_racing_with_the_last_reference_leaks_nothing() {
    long_model(|| {
        let m = Mem::new(3, 5, 8);
        name_a_snapshot(&m);
        // Thread 1 ends word 0's release sequence (dropping the last
        // reference) while the slot is reused.
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || m.with(|e| e.access(1, 0, 4, true, &AccessSite::default())))
        };
        reuse_its_slot(&m);
        other.join().unwrap();
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        // Spilled or not, the snapshot is gone with its last head: only
        // the five words' records remain.
        assert_eq!(pool.in_use(), 5);
    });
}

#[test]
fn a_lagging_acquire_racing_with_a_spill_reads_the_snapshot_exactly() {
    long_model(|| {
        let m = Mem::new(3, 5, 8);
        name_a_snapshot(&m);
        // Thread 1 acquires word 0 while the slot is reused: it reads the
        // snapshot from the ring or from the pool, exactly, unless the slot
        // was overwritten under its read (then the overflow clock stands
        // in, counted).
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.with(|e| e.atomic(1, 0, 4, ACQUIRE, &AccessSite::default(), || false))
            })
        };
        reuse_its_slot(&m);
        let o = other.join().unwrap();
        assert!(!o.is_race() && !o.is_error());
        let clocks = ThreadClocks::<LoomAtomics>::new(&m.ts[..m.ts_words], 3, CB);
        let acquired = m.with(|e| e.clock_entry(1, 0));
        assert!(acquired >= 1, "thread 0's release was not acquired");
        assert!(acquired == 1 || clocks.coarsened() > 0, "{acquired}");
    });
}

// ----- the same-block table's entry claim (`vigil_shared::block::claim_entry`)

impl vigil_shared::block::TableWord for A64 {
    fn load_acquire(&self) -> u64 {
        self.0.load(MemOrder::Acquire)
    }
    fn load_relaxed(&self) -> u64 {
        self.0.load(MemOrder::Relaxed)
    }
    fn store_relaxed(&self, v: u64) {
        self.0.store(v, MemOrder::Relaxed)
    }
    fn store_release(&self, v: u64) {
        self.0.store(v, MemOrder::Release)
    }
    fn cas_acquire(&self, c: u64, n: u64) -> bool {
        self.0
            .compare_exchange(c, n, MemOrder::Acquire, MemOrder::Relaxed)
            .is_ok()
    }
}

/// One table entry (tag, key, one record word) holding an earlier
/// interval's word and a record of it.
struct Entry {
    tag: A64,
    key: A64,
    record: A64,
}

const STALE_RECORD: u64 = 0xdead;

impl Entry {
    fn stale() -> Arc<Entry> {
        let old = vigil_shared::block::GlobalTable::tag(7, 1);
        Arc::new(Entry {
            tag: A64(LU64::new(old)),
            key: A64(LU64::new(42 ^ old)),
            record: A64(LU64::new(STALE_RECORD)),
        })
    }

    /// Claims the entry for `key` in interval `tag`; on success records
    /// `me` and returns the record it found first (never the stale one).
    fn claim(&self, tag: u64, key: u64, me: u64) -> Option<u64> {
        let won = vigil_shared::block::claim_entry(
            &self.tag,
            &self.key,
            tag,
            key,
            || self.record.0.store(0, MemOrder::Relaxed),
            loom::thread::yield_now,
        );
        won.then(|| self.record.0.fetch_or(me, MemOrder::Relaxed))
    }
}

/// Two threads of a block on one word in one interval: whichever claims
/// the entry, any thread that gets it sees the earlier interval's record
/// cleared (a stale record could pair with a new access as a false race).
#[test]
fn a_claimed_entry_never_shows_an_earlier_intervals_record() {
    model(|| {
        let e = Entry::stale();
        let tag = vigil_shared::block::GlobalTable::tag(9, 2);
        let key = 5 ^ tag;
        let other = {
            let e = e.clone();
            loom::thread::spawn(move || e.claim(tag, key, 1))
        };
        let mine = e.claim(tag, key, 2);
        let theirs = other.join().unwrap();
        for seen in [mine, theirs].into_iter().flatten() {
            assert_ne!(seen & STALE_RECORD, STALE_RECORD, "a stale record was seen");
        }
        assert!(mine.is_some() || theirs.is_some(), "nobody got the entry");
    });
}

/// Two words of one interval on one entry: exactly one gets it, the
/// other goes to its next probe (two words never share records).
#[test]
fn two_words_never_share_an_entry() {
    model(|| {
        let e = Entry::stale();
        let tag = vigil_shared::block::GlobalTable::tag(9, 2);
        let other = {
            let e = e.clone();
            loom::thread::spawn(move || e.claim(tag, 5 ^ tag, 1))
        };
        let mine = e.claim(tag, 6 ^ tag, 2);
        let theirs = other.join().unwrap();
        assert!(
            mine.is_some() != theirs.is_some(),
            "one word gets the entry: {mine:?} {theirs:?}"
        );
        let got = mine.or(theirs).unwrap();
        assert_ne!(got, STALE_RECORD);
    });
}

/// A whole-line write (the line's summary, or word by word once the line
/// is split) racing another thread's read of one word that splits the
/// line, copying the summary of thread 2's earlier read of the whole line
/// into every word: whichever goes first, no word loses the write or
/// thread 2's read (a word that missed the copy would lose it), the new
/// read stays on its word, and the write races with thread 2's read.
#[test]
fn a_line_split_racing_a_whole_line_write_loses_nothing() {
    long_model(|| {
        let words = line::LINE_WORDS as usize;
        let m = Mem::new(3, words, 4);
        m.with(|e| e.access_line(2, 0, 4, false, &AccessSite::default()));
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.with(|e| {
                    let site = AccessSite::default();
                    match e.access_line(0, 0, 4, true, &site) {
                        line::LineOutcome::Done(o) => o.is_race(),
                        // Lanes 4 to 6 (of 32: loom could not explore
                        // them all) check their words.
                        line::LineOutcome::PerWord => (4..=6)
                            .map(|w| e.access(0, 4 * w, 4, true, &site).is_race())
                            .fold(false, |a, b| a | b),
                    }
                })
            })
        };
        let reader = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.with(|e| e.access(1, 20, 4, false, &AccessSite::default()))
            })
        };
        assert!(
            writer.join().unwrap(),
            "the write raced with thread 2's read"
        );
        assert!(!reader.join().unwrap().is_error());
        for w in 4..=6 {
            assert!(m.has(w, 0, true), "the write lost on word {w}");
        }
        for w in 0..words {
            assert!(m.has(w, 2, false), "thread 2's read lost on word {w}");
        }
        assert!(m.has(5, 1, false), "the read lost");
        assert!(!m.has(4, 1, false) && !m.has(6, 1, false));
    });
}

/// The atomic-set fast path (`vigil_shared::atomic_set`) against a locked
/// access that reads the entries: a relaxed read-modify-write raising its
/// entry without the word's lock, and a plain write unordered with it (and
/// ordered after every other entry), at once. Whichever comes second must
/// see the first: at least one reports the race (both, when the write read
/// the raised entry while the raise, finding the version moved on, records
/// itself again under the lock), and both accesses stay in the word's
/// history.
#[test]
fn an_atomic_set_raise_racing_a_locked_reader_is_seen_by_one_of_them() {
    long_model(|| {
        let threads = 11;
        let m = Mem::new(threads, 2, 32);
        let site = AccessSite::default();
        let rmw = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
        let release = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Release, Scope::Device);
        let acquire = AtomicOp::new(AtomicOpKind::Load, Ordering::Acquire, Scope::Device);
        // Threads 0 to 8 bump word 0 (the ninth moves the record's clocks
        // into a set), then release through word 1; thread 9 acquires them.
        m.with(|e| {
            for t in 0..9 {
                assert!(!e.atomic(t, 0, 4, rmw, &site, || true).is_race());
                e.atomic(t, 4, 4, release, &site, || true);
            }
            e.atomic(9, 4, 4, acquire, &site, || false);
        });
        assert_eq!(m.word(0).len, 0, "the word's history is its set");
        // The bump as the GPU makes every read-modify-write: a
        // compare-exchange that says afterwards that it wrote.
        let cas = AtomicOp::new(
            AtomicOpKind::CompareExchange,
            Ordering::Relaxed,
            Scope::Device,
        );
        let bump = {
            let m = m.clone();
            loom::thread::spawn(move || m.with(|e| e.atomic(10, 0, 4, cas, &site, || true)))
        };
        let write = m.with(|e| e.access(9, 0, 4, true, &site));
        let bump = bump.join().unwrap();
        assert!(
            write.is_race() || bump.is_race(),
            "the race was missed: write {write:?}, bump {bump:?}"
        );
        assert!(!write.is_error() && !bump.is_error());
        assert!(m.has(0, 9, true), "the write is recorded");
        let st = m.word(0);
        let in_set = m.with(|e| e.atomic_set(&st).is_some_and(|s| s.entry(10) != 0));
        assert!(in_set || m.has(0, 10, true), "the bump is recorded");
    });
}

/// The record lock's protocol alone (`RecordLock`): a raiser that entered
/// at the version it saw first has its write seen by a locker that came
/// after that version, and a locker never sees a raise half made.
#[test]
fn a_raiser_inside_the_record_lock_is_seen_by_the_next_locker() {
    model(|| {
        let word = Arc::new(A32(LU32::new(0)));
        let data = Arc::new(A32(LU32::new(0)));
        let raiser = {
            let (word, data) = (word.clone(), data.clone());
            loom::thread::spawn(move || {
                let seen = word.load(MemOrder::Acquire);
                if !RecordLock::open(seen) || !RecordLock::enter::<LoomAtomics>(&word, seen) {
                    return None;
                }
                data.store(1, MemOrder::Relaxed);
                data.store(2, MemOrder::Relaxed);
                RecordLock::leave::<LoomAtomics>(&word);
                Some(seen)
            })
        };
        let before = RecordLock::lock::<LoomAtomics>(&word);
        let saw = data.load(MemOrder::Relaxed);
        RecordLock::unlock::<LoomAtomics>(&word);
        let entered = raiser.join().unwrap();
        assert!(saw != 1, "the locker saw a raise half made");
        match entered {
            // Entered at the version the lock was taken at: before it.
            Some(seen) if RecordLock::version(seen) == RecordLock::version(before) => {
                assert_eq!(saw, 2, "a raise inside was not waited for")
            }
            // Entered after the unlock, or never.
            _ => assert_eq!(saw, 0),
        }
    });
}

/// A locker that claims the next turn (no patience) and one that does
/// not exclude each other and both get the lock, with a raiser about:
/// every increment made under the lock is kept.
#[test]
fn lockers_claiming_the_next_turn_exclude_each_other_and_all_get_through() {
    long_model(|| {
        let word = Arc::new(A32(LU32::new(0)));
        let count = Arc::new(A32(LU32::new(0)));
        let increment = |word: &A32, count: &A32, patience: u32| {
            RecordLock::lock_with_patience::<LoomAtomics>(word, patience);
            let v = count.load(MemOrder::Relaxed);
            count.store(v + 1, MemOrder::Relaxed);
            RecordLock::unlock::<LoomAtomics>(word);
        };
        let impatient: Vec<_> = (0..1)
            .map(|_| {
                let (word, count) = (word.clone(), count.clone());
                loom::thread::spawn(move || increment(&word, &count, 0))
            })
            .collect();
        let raiser = {
            let word = word.clone();
            loom::thread::spawn(move || {
                let seen = word.load(MemOrder::Acquire);
                if RecordLock::open(seen) && RecordLock::enter::<LoomAtomics>(&word, seen) {
                    RecordLock::leave::<LoomAtomics>(&word);
                }
            })
        };
        increment(&word, &count, RecordLock::PATIENCE);
        for t in impatient {
            t.join().unwrap();
        }
        raiser.join().unwrap();
        assert_eq!(count.load(MemOrder::Relaxed), 2, "an increment was lost");
        let w = word.load(MemOrder::Relaxed);
        assert_eq!(w & 7, 0, "left held, awaited or claimed: {w:#x}");
        assert_eq!(RecordLock::version(w), 2);
    });
}

// ----- the same-block table's line entries (`vigil_shared::block_line`)

/// A line entry (loom's mode word; its records and the line's word
/// records are plain atomics, read and written under the mode's
/// protocol) and one word's records.
struct LineEntry {
    mode: A64,
    write: std::sync::atomic::AtomicU64,
    first: std::sync::atomic::AtomicU64,
    words: Vec<[std::sync::atomic::AtomicU64; 3]>,
    claimed: Vec<std::sync::atomic::AtomicBool>,
}

impl LineEntry {
    fn line(&self) -> vigil_shared::block_line::LineRecords<'_, A64> {
        vigil_shared::block_line::LineRecords {
            mode: &self.mode,
            write: &self.write,
            first: &self.first,
        }
    }

    fn records(&self, j: usize) -> vigil_shared::block::WordRecords<'_> {
        let [write, first, second] = &self.words[j];
        vigil_shared::block::WordRecords {
            write,
            first,
            second,
        }
    }

    /// Word `j`'s entry claimed after the line's split, holding the
    /// snapshot's records (only the first claim writes: `claimed`).
    fn claim(&self, j: usize, s: Option<vigil_shared::block_line::LineSnapshot>) {
        if self.claimed[j].swap(true, MemOrder::Relaxed) {
            return;
        }
        let (w, f) = s.map_or(Default::default(), |s| s.word(j as u32));
        self.words[j][0].store(w.0, MemOrder::Relaxed);
        self.words[j][1].store(f.0, MemOrder::Relaxed);
        self.words[j][2].store(0, MemOrder::Relaxed);
    }

    /// Thread `me`'s access of kind `kind` to word `j`; the threads of
    /// the records it races with.
    fn word_access(
        &self,
        j: usize,
        me: vigil_shared::block::BlockRecord,
        kind: vigil_shared::AccessKind,
    ) -> Vec<u32> {
        let mut raced = Vec::new();
        self.records(j).access(
            me,
            kind,
            || std::sync::atomic::fence(MemOrder::SeqCst),
            |_| vigil_shared::block::LaneSync::default(),
            |prior, _, _| raced.extend(prior.thread()),
        );
        raced
    }
}

/// Warp 0's whole-line write (recorded in run mode) and then its whole
/// line write again from another site (an update of the entry under its
/// busy bit), racing thread 40's read of word 3 that splits the line and
/// claims the word's entry from the run's snapshot: whichever goes first,
/// the read and lane 3's write race, and the word keeps lane 3's write.
#[test]
fn a_line_split_racing_a_run_update_loses_nothing() {
    use vigil_shared::block::BlockRecord;
    use vigil_shared::block_line::{LineRun, LineStep, LINE_WORDS};
    use vigil_shared::AccessKind;
    model(|| {
        let e = Arc::new(LineEntry {
            mode: A64(LU64::new(0)),
            write: Default::default(),
            first: Default::default(),
            words: (0..LINE_WORDS).map(|_| Default::default()).collect(),
            claimed: (0..LINE_WORDS).map(|_| Default::default()).collect(),
        });
        let run = |location| LineRun {
            record: BlockRecord::new(0, false, 0xf, 0, location),
            per: 1,
            write: true,
        };
        let first = e.line().run_access(run(1), loom::thread::yield_now);
        assert_eq!(first, LineStep::Recorded);
        let owner = {
            let e = e.clone();
            loom::thread::spawn(move || {
                let step = e.line().run_access(run(2), loom::thread::yield_now);
                if step == LineStep::PerWord {
                    e.claim(3, e.line().split(loom::thread::yield_now));
                    let me = BlockRecord::new(3, false, 0xf, 0, 2);
                    return e.word_access(3, me, AccessKind::Write);
                }
                Vec::new()
            })
        };
        e.claim(3, e.line().split(loom::thread::yield_now));
        let reader = BlockRecord::new(40, false, 0xf, 0, 3);
        let mut raced = e.word_access(3, reader, AccessKind::Read);
        raced.extend(owner.join().unwrap());
        raced.sort_unstable();
        raced.dedup();
        assert!(
            !raced.is_empty() && raced.iter().all(|t| [3, 40].contains(t)),
            "the read and lane 3's write race, and nothing else: {raced:?}"
        );
        let kept = BlockRecord(e.words[3][0].load(MemOrder::Relaxed));
        assert_eq!(kept.thread(), Some(3), "lane 3's write is kept");
    });
}
