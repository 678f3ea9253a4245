//! The lock and atomic protocols, model-checked with loom as ordinary
//! tests (no `--cfg loom` rebuild): the race engine and the same-block
//! layer are generic over [`AtomicFamily`], and here that family is
//! loom's.

use loom::sync::atomic::{AtomicU32 as LU32, AtomicU64 as LU64};
use loom::sync::Arc;
use std::sync::atomic::Ordering as MemOrder;

use vigil_shared::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops};
use vigil_shared::race::atomic::{atomic, AtomicOp, AtomicOpKind};
use vigil_shared::race::cta::{CtaView, LaneDevices};
use vigil_shared::race::desc::CellTag;
use vigil_shared::race::knowledge::{Arena, Interval, SnapRef};
use vigil_shared::race::line::{access_line, LineAccess, LineOutcome};
use vigil_shared::race::record::{Pool, RECORD_WORDS};
use vigil_shared::race::serial::{lane_start, HostOrder, LaneBounds, Serial};
use vigil_shared::race::sync::{CtaSync, SYNC_WORDS};
use vigil_shared::race::{access, RaceFound, SiteWord, SliceMemory};
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

/// `f` between two sequentially consistent fences when `o` is `SeqCst`:
/// loom takes a `SeqCst` access as acquire-release, which would let two
/// threads each miss the other's change where the engine relies on the
/// single order of its `SeqCst` accesses (a whole-line read and write at
/// once); the fences give the model that order.
fn seq_cst<T>(o: MemOrder, f: impl FnOnce() -> T) -> T {
    if o != MemOrder::SeqCst {
        return f();
    }
    loom::sync::atomic::fence(MemOrder::SeqCst);
    let r = f();
    loom::sync::atomic::fence(MemOrder::SeqCst);
    r
}

impl AtomicU64Ops for A64 {
    fn load(&self, o: MemOrder) -> u64 {
        seq_cst(o, || self.0.load(o))
    }
    fn store(&self, v: u64, o: MemOrder) {
        seq_cst(o, || self.0.store(v, o))
    }
    fn compare_exchange(&self, c: u64, n: u64, s: MemOrder, f: MemOrder) -> Result<u64, u64> {
        seq_cst(s, || self.0.compare_exchange(c, n, s, f))
    }
    fn fetch_add(&self, v: u64, o: MemOrder) -> u64 {
        seq_cst(o, || self.0.fetch_add(v, o))
    }
    fn fetch_or(&self, v: u64, o: MemOrder) -> u64 {
        seq_cst(o, || self.0.fetch_or(v, o))
    }
    fn fetch_and(&self, v: u64, o: MemOrder) -> u64 {
        seq_cst(o, || self.0.fetch_and(v, o))
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

// ----- the race engine (`vigil_shared::race`) ----------------------------

/// The engine's memory for one line of words, built from loom atomics.
struct Mem {
    shadow: Vec<A64>,
    /// The site table of split words (a race's earlier site is waited
    /// for: it must be there to be found).
    sites: Vec<A64>,
    pool: Vec<A64>,
    arena: Vec<A32>,
    syncs: Vec<Vec<A32>>,
}

/// CTAs `0..CTAS` of one launch.
const CTAS: u32 = 4;

fn zeroed32(n: usize) -> Vec<A32> {
    (0..n).map(|_| A32(LU32::new(0))).collect()
}

impl Mem {
    /// One line of shadow, `records` pool records.
    fn new(records: usize) -> Arc<Mem> {
        let pool: Vec<A64> = (0..(records + 1) * RECORD_WORDS)
            .map(|_| A64(LU64::new(0)))
            .collect();
        Pool::<LoomAtomics>::init(&pool);
        let arena = zeroed32(256);
        Arena::<LoomAtomics>::init(&arena, 1);
        let syncs: Vec<Vec<A32>> = (0..CTAS).map(|_| zeroed32(SYNC_WORDS)).collect();
        for w in &syncs {
            CtaSync::<LoomAtomics>::new(w).init();
        }
        Arc::new(Mem {
            shadow: (0..32).map(|_| A64(LU64::new(0))).collect(),
            sites: (0..2 * 256).map(|_| A64(LU64::new(0))).collect(),
            pool,
            arena,
            syncs,
        })
    }

    fn serial(cta: u32) -> Serial {
        lane_start(1) + cta
    }

    /// Runs `f` as CTA `cta`, knowing the CTAs `knows` up to epoch 1.
    fn with<R>(
        &self,
        cta: u32,
        knows: &[u32],
        f: impl FnOnce(&SliceMemory<'_, LoomAtomics>, &mut CtaView<'_>, &CtaSync<'_, LoomAtomics>) -> R,
    ) -> R {
        let mem = SliceMemory::<LoomAtomics> {
            shadow: &self.shadow,
            pool: &self.pool,
            arena: &self.arena,
            exits: &[],
            sites: &self.sites,
            launches: &[],
            sc: &[],
        };
        let arena = Arena::<LoomAtomics>::new(&self.arena, &[], &[]);
        let mut known = SnapRef::NONE;
        for &k in knows {
            let s = Self::serial(k);
            known = arena.merge(
                known,
                SnapRef::NONE,
                &[Interval {
                    lo: s,
                    hi: s + 1,
                    epoch: 1,
                }],
            );
        }
        let (bounds, devices) = (LaneBounds::NONE, LaneDevices::default());
        let sync = CtaSync::<LoomAtomics>::new(&self.syncs[cta as usize]);
        let mut view = CtaView {
            serial: Self::serial(cta),
            epoch: sync.epoch(),
            device: 0,
            host: HostOrder::new(lane_start(1), CTAS, &bounds),
            global: &bounds,
            devices: &devices,
            known: if known.is_none() { sync.known() } else { known },
            launch: 0,
            own: Default::default(),
        };
        f(&mem, &mut view, &sync)
    }

    /// CTA `cta`'s plain access of word `word`, knowing `knows`.
    fn access(&self, cta: u32, knows: &[u32], word: u64, write: bool) -> Option<RaceFound> {
        self.with(cta, knows, |mem, view, _| {
            let mut bounded = false;
            let site = SiteWord::new(view.serial, 8, 0, vigil_shared::race::SiteLanes::Single);
            let r = access(mem, view, word, 0, 4, write, false, site, &mut bounded);
            assert!(!bounded, "a check was bounded");
            r
        })
    }

    /// CTA `cta`'s whole-line access of the line (word by word if the
    /// line is split, as the hosts do); whether it found a race.
    fn line(&self, cta: u32, write: bool) -> bool {
        self.with(cta, &[], |mem, view, _| {
            let mut bounded = false;
            // A site of its own (a race's earlier site is waited for).
            let site = SiteWord::new(view.serial, 8, 0, vigil_shared::race::SiteLanes::Single);
            let acc = LineAccess {
                write,
                read_only: false,
                site,
            };
            match access_line(mem, view, 0, acc, &mut bounded) {
                LineOutcome::Clean => false,
                LineOutcome::Raced(_) => true,
                LineOutcome::Split | LineOutcome::RacedSplit(_) => {
                    access(mem, view, 0, 0, 128, write, false, site, &mut bounded).is_some()
                }
            }
        })
    }

    /// CTA `cta`'s atomic `kind` of word 0 at `ordering`, system scope;
    /// returns what it acquired and whether it ran on the shared path.
    fn atomic(&self, cta: u32, kind: AtomicOpKind, ordering: Ordering) -> (SnapRef, bool) {
        self.with(cta, &[], |mem, view, sync| {
            let op = AtomicOp {
                kind,
                ordering,
                failure_ordering: ordering,
                scope: Scope::System,
            };
            let mut bounded = false;
            let site = SiteWord::NONE;
            let (shared, race) =
                atomic(mem, view, sync, 0, 0, 0, 4, op, site, &mut bounded, || {
                    (self.held_shared(), true)
                });
            assert!(race.is_none() && !bounded);
            (sync.known(), shared)
        })
    }

    /// Whether word 0's record is held shared.
    fn held_shared(&self) -> bool {
        let c = self.shadow[0].load(MemOrder::Relaxed);
        CellTag::of(c) == CellTag::Record
            && Pool::<LoomAtomics>::new(&self.pool)
                .record(c as u32)
                .is_some_and(|r| r.is_shared())
    }
}

/// Two CTAs reading one word of a fresh line at once (each may split the
/// line, and the second makes the word's record): neither read is lost.
/// A writer that knows one reader races with the other.
#[test]
fn two_readers_splitting_a_line_lose_neither() {
    long_model(|| {
        let m = Mem::new(2);
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || m.access(1, &[], 0, false))
        };
        assert!(m.access(0, &[], 0, false).is_none());
        assert!(other.join().unwrap().is_none());
        let raced = m
            .access(2, &[0], 0, true)
            .expect("the write races with CTA 1's read");
        assert_eq!(raced.prior.serial(), Mem::serial(1));
    });
}

/// A whole-line write and another CTA's whole-line read of a fresh line
/// at once, both on the line's header: whichever comes second reports
/// the race (the reader registers in cell 1 and looks at cell 0 again;
/// the writer installs itself in cell 0 and must look at cell 1 again).
#[test]
fn a_whole_line_write_and_read_at_once_race() {
    long_model(|| {
        let m = Mem::new(2);
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || m.line(0, true))
        };
        let reader = m.line(1, false);
        let writer = writer.join().unwrap();
        assert!(
            reader || writer,
            "the write and the read race: neither saw it"
        );
    });
}

/// Two CTAs writing different words of a fresh line at once: one splits
/// the line while the other's word access may come in the middle of the
/// split (the line's first cell locked). Neither write is lost: a CTA
/// that knows neither writer races with each. The other word is one of
/// the header's cells (2) or not (5).
#[test]
fn writes_to_two_words_of_a_line_being_split_lose_neither() {
    for other_word in [2, 5] {
        long_model(move || {
            let m = Mem::new(2);
            let other = {
                let m = m.clone();
                loom::thread::spawn(move || m.access(1, &[], other_word, true))
            };
            assert!(m.access(0, &[], 0, true).is_none());
            assert!(other.join().unwrap().is_none());
            for (word, writer) in [(other_word, 1), (0, 0)] {
                let raced = m
                    .access(2, &[], word, false)
                    .unwrap_or_else(|| panic!("CTA {writer}'s write of word {word} was lost"));
                assert_eq!(raced.prior.serial(), Mem::serial(writer));
            }
        });
    }
}

/// A whole-line write racing another CTA's read of one word that splits
/// the line: one of them reports the race (whichever came second), and
/// the write stays on every word, so a CTA that knows the reader only
/// still races with it.
#[test]
fn a_line_split_racing_a_whole_line_write_loses_nothing() {
    long_model(|| {
        let m = Mem::new(2);
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || m.line(0, true))
        };
        let reader = m.access(1, &[], 3, false).is_some();
        let writer = writer.join().unwrap();
        assert!(
            reader || writer,
            "the write and the read race: neither saw it"
        );
        let raced = m
            .access(2, &[1], 5, false)
            .expect("the write is still on word 5");
        assert_eq!(raced.prior.serial(), Mem::serial(0));
    });
}

/// Two CTAs releasing into one word at once (read-modify-writes that
/// continue the release sequence): a later acquire learns both.
#[test]
fn concurrent_releasers_into_one_word_are_both_acquired() {
    long_model(|| {
        let m = Mem::new(2);
        let other = {
            let m = m.clone();
            loom::thread::spawn(move || m.atomic(1, AtomicOpKind::Rmw, Ordering::Release))
        };
        m.atomic(0, AtomicOpKind::Rmw, Ordering::Release);
        other.join().unwrap();
        let (known, _) = m.atomic(2, AtomicOpKind::Load, Ordering::Acquire);
        let arena = Arena::<LoomAtomics>::new(&m.arena, &[], &[]);
        for releaser in [0, 1] {
            assert!(
                arena.epoch_of(known, Mem::serial(releaser)) >= 1,
                "CTA {releaser}'s release was not acquired"
            );
        }
    });
}

/// A word's record held shared around one operation on a value while
/// another thread locks it around another operation and changes the
/// record: the shared holder sees the record before the change exactly
/// when its operation came first in the value's order (what an atomic on
/// the shared path read and what the record said agree), and never half
/// a change.
#[test]
fn a_shared_hold_and_a_lock_of_a_word_record_exclude_each_other() {
    model(|| {
        let m = Mem::new(1);
        let value = Arc::new(LU32::new(0));
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        let rec = pool.allocate(0).unwrap();
        rec.unlock();
        let writer = {
            let (m, value) = (m.clone(), value.clone());
            loom::thread::spawn(move || {
                let rec = Pool::<LoomAtomics>::new(&m.pool).record(1).unwrap();
                assert!(rec.lock_word(0));
                value.fetch_add(1, MemOrder::Relaxed);
                rec.set_slot(3, 1, 1);
                rec.unlock();
            })
        };
        if rec.share(0) {
            let seen = rec.slot(3);
            let before = value.fetch_add(1, MemOrder::Relaxed);
            rec.unshare();
            assert!(seen == (0, 0) || seen == (1, 1), "half a change: {seen:?}");
            assert_eq!(
                seen == (1, 1),
                before == 1,
                "the record and the value disagree"
            );
        }
        writer.join().unwrap();
        // Nobody holds it now: it locks at once.
        assert!(rec.lock_word(0));
        rec.unlock();
    });
}

/// A thread unlocks a word's record while another waits to lock it, then
/// tries to hold it shared: the read phase the unlock opens may let it
/// in ahead of the waiter, and still the two never hold the record at
/// once (a writer beside anyone, a reader beside a writer).
#[test]
fn a_read_phase_keeps_a_waiting_writer_alone() {
    const WRITER_IN: u32 = 1 << 16;
    long_model(|| {
        let m = Mem::new(1);
        let inside = Arc::new(LU32::new(0));
        let pool = Pool::<LoomAtomics>::new(&m.pool);
        // Made locked: this thread is the first writer.
        let rec = pool.allocate(0).unwrap();
        let waiter = {
            let (m, inside) = (m.clone(), inside.clone());
            loom::thread::spawn(move || {
                let rec = Pool::<LoomAtomics>::new(&m.pool).record(1).unwrap();
                // A one-spin window: the model tries every order anyway.
                assert!(rec.lock_word_after(0, 1));
                let before = inside.fetch_add(WRITER_IN, MemOrder::Relaxed);
                assert_eq!(before, 0, "a writer beside another holder");
                inside.fetch_sub(WRITER_IN, MemOrder::Relaxed);
                rec.unlock();
            })
        };
        assert_eq!(inside.fetch_add(WRITER_IN, MemOrder::Relaxed), 0);
        inside.fetch_sub(WRITER_IN, MemOrder::Relaxed);
        rec.unlock();
        if rec.share_within(0, 1) {
            let before = inside.fetch_add(1, MemOrder::Relaxed);
            assert!(before < WRITER_IN, "a reader beside a writer");
            inside.fetch_sub(1, MemOrder::Relaxed);
            rec.unshare();
        }
        waiter.join().unwrap();
        // Nobody holds it or waits for it now: it locks at once.
        assert_eq!(rec.try_lock_word(0), Some(true));
        rec.unlock();
    });
}

/// A CTA whose add a word's record already holds adds again (on the
/// shared path) while another adds for the first time (locking the
/// record): neither is lost, and a CTA that knows the first races with
/// the second only.
#[test]
fn a_shared_add_beside_a_locked_add_loses_nothing() {
    long_model(|| {
        let m = Mem::new(2);
        m.atomic(0, AtomicOpKind::Rmw, Ordering::Relaxed);
        m.atomic(1, AtomicOpKind::Rmw, Ordering::Relaxed);
        assert!(m.atomic(1, AtomicOpKind::Rmw, Ordering::Relaxed).1);
        let first = {
            let m = m.clone();
            loom::thread::spawn(move || m.atomic(2, AtomicOpKind::Rmw, Ordering::Relaxed))
        };
        m.atomic(0, AtomicOpKind::Rmw, Ordering::Relaxed);
        first.join().unwrap();
        let raced = m
            .access(3, &[0, 1], 0, false)
            .expect("the read races with CTA 2's add");
        assert_eq!(raced.prior.serial(), Mem::serial(2));
    });
}

/// Two CTAs adding for the first time at once while the record already
/// holds an earlier CTA's add as an entry: each widens that entry up to
/// itself on the shared path, without the lock, and the entry's ends stay
/// CTAs that added, so a reader that knows all but the last races with
/// the last, and one that knows them all with none.
#[test]
fn two_ctas_widening_one_entry_keep_its_ends_real() {
    long_model(|| {
        let m = Mem::new(2);
        m.atomic(0, AtomicOpKind::Rmw, Ordering::Relaxed);
        m.atomic(1, AtomicOpKind::Rmw, Ordering::Relaxed);
        let second = {
            let m = m.clone();
            loom::thread::spawn(move || m.atomic(2, AtomicOpKind::Rmw, Ordering::Relaxed).1)
        };
        let third = m.atomic(3, AtomicOpKind::Rmw, Ordering::Relaxed).1;
        let second = second.join().unwrap();
        assert!(second && third, "a first add locked the record");
        let raced = m
            .access(1, &[0, 2], 0, false)
            .expect("the read races with CTA 3's add");
        assert_eq!(raced.prior.serial(), Mem::serial(3));
        assert!(m.access(1, &[0, 2, 3], 0, false).is_none());
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
    fn cas_relaxed(&self, c: u64, n: u64) -> bool {
        self.0
            .compare_exchange(c, n, MemOrder::Relaxed, MemOrder::Relaxed)
            .is_ok()
    }
    fn swap_relaxed(&self, v: u64) -> u64 {
        self.0.swap(v, MemOrder::Relaxed)
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
            |_| false,
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
            record: BlockRecord::new(0, false, 0xf, 0, 1, location),
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
                    let me = BlockRecord::new(3, false, 0xf, 0, 1, 2);
                    return e.word_access(3, me, AccessKind::Write);
                }
                Vec::new()
            })
        };
        e.claim(3, e.line().split(loom::thread::yield_now));
        let reader = BlockRecord::new(40, false, 0xf, 0, 1, 3);
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

// ----- a CTA's bulk copies in flight (`vigil_shared::bulk_copies`) --------

mod bulk {
    use super::*;
    use vigil_shared::bulk_copies::{BulkCopy, BulkList, Completion, LIST_WORDS};

    fn list_words() -> Arc<Vec<A64>> {
        Arc::new((0..LIST_WORDS).map(|_| A64(LU64::new(0))).collect())
    }

    /// A copy of 64 bytes at `n * 64` into shared memory, completing on
    /// phase `key`; every field says `n`, so a torn read shows.
    fn copy(n: u64, key: u16) -> BulkCopy {
        BulkCopy {
            completion: Completion::Phase(key),
            thread: n as u32,
            shared: 64 * n,
            shared_bytes: 64,
            global: 0x1000 * n,
            global_bytes: 64 * n as u32,
            location: 8 * n,
            tensor: None,
        }
    }

    /// Two waiters of one phase: its copy is checked again exactly once,
    /// and neither waiter goes on before that check is done.
    #[test]
    fn two_waiters_of_a_phase_check_its_copy_once_and_after_it() {
        model(|| {
            let w = list_words();
            let checks = Arc::new(LU32::new(0));
            BulkList::<LoomAtomics>::new(&w).issue(&copy(1, 4));
            let waiter = {
                let (w, checks) = (w.clone(), checks.clone());
                loom::thread::spawn(move || {
                    BulkList::<LoomAtomics>::new(&w).complete_phase(4, |_| {
                        checks.fetch_add(1, MemOrder::Relaxed);
                    });
                    checks.load(MemOrder::Relaxed)
                })
            };
            let list = BulkList::<LoomAtomics>::new(&w);
            list.complete_phase(4, |_| {
                checks.fetch_add(1, MemOrder::Relaxed);
            });
            let mine = checks.load(MemOrder::Relaxed);
            let theirs = waiter.join().unwrap();
            assert_eq!((mine, theirs), (1, 1), "one check, before both go on");
            assert!(!list.any(), "the copy left the list");
        });
    }

    /// A reader never sees a copy made of two copies' words while an
    /// entry is completed and claimed again.
    #[test]
    fn a_reader_never_sees_a_torn_copy() {
        model(|| {
            let w = list_words();
            BulkList::<LoomAtomics>::new(&w).issue(&copy(1, 4));
            let writer = {
                let w = w.clone();
                loom::thread::spawn(move || {
                    let list = BulkList::<LoomAtomics>::new(&w);
                    list.complete_phase(4, |_| {});
                    list.issue(&copy(2, 5));
                })
            };
            let list = BulkList::<LoomAtomics>::new(&w);
            // Bytes 64..192 cover both copies' shared sides.
            if let Some((c, _)) = list.overlapping(true, false, 64, 192) {
                assert!(c == copy(1, 4) || c == copy(2, 5), "torn: {c:?}");
            }
            writer.join().unwrap();
            assert_eq!(
                list.overlapping(true, false, 64, 192).map(|(c, _)| c),
                Some(copy(2, 5))
            );
        });
    }
}

// ----- the hand-over of an SM's same-block regions (`vigil_shared::regions`)

mod regions {
    use super::*;
    use loom::cell::UnsafeCell;
    use vigil_shared::regions::{
        claim_once, claim_region, give_back, ClaimWord, ExtensionShare, UNCLAIMED,
    };

    /// The extension region every CTA of the model asks for first (a CTA
    /// that finds it taken tries the others).
    const SHARE: ExtensionShare = ExtensionShare { mask: 1, wanted: 1 };

    /// One SM's masks word and the memory of its extension region 0.
    struct Sm {
        word: A64,
        memory: UnsafeCell<u64>,
    }

    impl Sm {
        /// An SM whose CTA in region 0 holds the extension.
        fn held() -> Arc<Sm> {
            Arc::new(Sm {
                word: A64(LU64::new(vigil_shared::regions::masks_bits(Some(0), 1))),
                memory: UnsafeCell::new(0),
            })
        }

        /// A CTA trying region `r` that reads the extension if it gets it,
        /// and then writes `value` there (if any): what it read.
        fn cta(&self, r: u32, value: Option<u64>) -> Option<u64> {
            let (region, before) = claim_region::<LoomAtomics>(&self.word, r, SHARE);
            assert_eq!(region, r, "region {r} is free");
            let (first, count) = SHARE.keep::<LoomAtomics>(&self.word, before, true);
            // A CTA that found extension 0 taken keeps another one (its
            // second try), whose memory is not the one modelled here.
            let kept = count != 0 && first == 0;
            // SAFETY: loom checks that no other thread accesses the cell
            // at once (the claim is the mutual exclusion under test).
            let seen = kept.then(|| self.memory.with(|m| unsafe { *m }));
            if let (true, Some(v)) = (kept, value) {
                // SAFETY: as above.
                self.memory.with_mut(|m| unsafe { *m = v });
            }
            give_back::<LoomAtomics>(&self.word, region, first, count, value.is_some());
            seen
        }

        /// The extension's holder (region 0) writes 7 there and exits.
        fn last_writer(sm: &Arc<Sm>) -> loom::thread::JoinHandle<()> {
            let sm = sm.clone();
            loom::thread::spawn(move || {
                // SAFETY: the extension is this thread's (`held`).
                sm.memory.with_mut(|m| unsafe { *m = 7 });
                give_back::<LoomAtomics>(&sm.word, 0, 0, 1, true);
            })
        }
    }

    /// The extension's holder writes and exits while another CTA of the SM
    /// enters in another region: when the newcomer gets the extension, it
    /// sees the write.
    #[test]
    fn an_extensions_next_holder_sees_its_last_holders_writes() {
        model(|| {
            let sm = Sm::held();
            let holder = Sm::last_writer(&sm);
            if let Some(seen) = sm.cta(1, None) {
                assert_eq!(seen, 7);
            }
            holder.join().unwrap();
        });
    }

    /// Through a holder that wrote nothing (and so gave the extension back
    /// relaxed), the next holder still sees the last write.
    #[test]
    fn a_holder_that_wrote_nothing_passes_the_last_write_on() {
        model(|| {
            let sm = Sm::held();
            let holder = Sm::last_writer(&sm);
            let reader = {
                let sm = sm.clone();
                loom::thread::spawn(move || sm.cta(1, None))
            };
            if let Some(seen) = sm.cta(2, None) {
                assert_eq!(seen, 7);
            }
            if let Some(seen) = reader.join().unwrap() {
                assert_eq!(seen, 7);
            }
            holder.join().unwrap();
        });
    }

    /// Two CTAs that write in the extension in turn never touch it at once,
    /// and the second sees the first's write.
    #[test]
    fn two_writers_of_an_extension_follow_each_other() {
        model(|| {
            let sm = Arc::new(Sm {
                word: A64(LU64::new(0)),
                memory: UnsafeCell::new(0),
            });
            let first = {
                let sm = sm.clone();
                loom::thread::spawn(move || sm.cta(0, Some(1)))
            };
            let second = sm.cta(1, Some(2));
            match (first.join().unwrap(), second) {
                (Some(a), Some(b)) => assert!(a == 2 || b == 1, "neither saw the other"),
                (Some(_), None) | (None, Some(_)) => {}
                (None, None) => panic!("one of them gets the free extension"),
            }
        });
    }

    /// Why the claim is an acquire: a newcomer that set its bits with a
    /// relaxed read-modify-write would read the extension racing with its
    /// last holder's write, which loom reports.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn a_relaxed_claim_is_not_handed_the_extension() {
        model(|| {
            let sm = Sm::held();
            let holder = Sm::last_writer(&sm);
            let before = sm.word.0.fetch_or(
                vigil_shared::regions::masks_bits(Some(1), 1),
                MemOrder::Relaxed,
            );
            if vigil_shared::regions::held_extensions(before) & 1 == 0 {
                // SAFETY: loom checks the access (the race under test).
                let _ = sm.memory.with(|m| unsafe { *m });
            }
            holder.join().unwrap();
        });
    }

    /// A CTA's word of the regions it holds, published with a release
    /// (or, to show why, relaxed).
    struct Word {
        word: LU32,
        release: bool,
    }

    impl ClaimWord for Word {
        fn load_acquire(&self) -> u32 {
            self.word.load(MemOrder::Acquire)
        }
        fn cas_relaxed(&self, current: u32, new: u32) -> bool {
            self.word
                .compare_exchange(current, new, MemOrder::Relaxed, MemOrder::Relaxed)
                .is_ok()
        }
        fn store_release(&self, value: u32) {
            let order = if self.release {
                MemOrder::Release
            } else {
                MemOrder::Relaxed
            };
            self.word.store(value, order)
        }
        fn wait(&self) {
            loom::thread::yield_now()
        }
    }

    /// Two threads of one CTA in region 1 need its regions at once, while
    /// the extension's last holder writes and exits: what both hold, how
    /// many claims were made, and what each read of the extension.
    fn two_threads_at_first_need(release: bool) -> ([u32; 2], u32, [Option<u64>; 2]) {
        let sm = Sm::held();
        let holder = Sm::last_writer(&sm);
        let word = Arc::new(Word {
            word: LU32::new(UNCLAIMED),
            release,
        });
        let claims = Arc::new(LU32::new(0));
        let thread = {
            let (sm, word, claims) = (sm.clone(), word.clone(), claims.clone());
            move || {
                let held = claim_once(&*word, || {
                    claims.fetch_add(1, MemOrder::Relaxed);
                    let (region, before) = claim_region::<LoomAtomics>(&sm.word, 1, SHARE);
                    let (first, count) = SHARE.keep::<LoomAtomics>(&sm.word, before, true);
                    region | first << 8 | count << 16
                });
                let kept = held >> 16 != 0 && (held >> 8) & 0xff == 0;
                // SAFETY: loom checks the access: the extension is the
                // CTA's once claimed, and its last holder's write is
                // ordered before the claim.
                let seen = kept.then(|| sm.memory.with(|m| unsafe { *m }));
                (held, seen)
            }
        };
        let other = loom::thread::spawn(thread.clone());
        let (a, seen_a) = thread();
        let (b, seen_b) = other.join().unwrap();
        holder.join().unwrap();
        ([a, b], claims.load(MemOrder::Relaxed), [seen_a, seen_b])
    }

    /// Threads of one CTA that need its regions at once: one claim, the
    /// same regions for both, and both see the extension's last write.
    #[test]
    fn threads_needing_their_regions_at_once_claim_once_and_see_the_last_write() {
        model(|| {
            let ([a, b], claims, seen) = two_threads_at_first_need(true);
            assert_eq!(a, b, "both threads hold the regions of the one claim");
            assert_eq!(claims, 1, "the CTA claims once");
            for s in seen.into_iter().flatten() {
                assert_eq!(s, 7);
            }
        });
    }

    /// Why the claimer publishes with a release: a thread that read the
    /// regions from a relaxed store would read the extension racing with
    /// its last holder's write, which loom reports.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn a_relaxed_publication_does_not_hand_the_regions_on() {
        model(|| {
            let _ = two_threads_at_first_need(false);
        });
    }
}
