//! The happens-before engine: the hooks a GPU runtime or the CPU backend
//! calls for every global access, atomic, fence and kernel boundary.
//!
//! # Model
//!
//! A *sanitizer thread* is an SM (`tid = device_rank * num_sms + smid`)
//! with a vector clock. Access `b` by `u` is ordered after an earlier
//! access `a` iff `VC_u[a.tid] >= a.epoch`. Two accesses race when they
//! overlap in at least one byte, at least one writes, they are unordered,
//! and they are not both atomics whose scopes include each other's threads
//! (block: same SM; device: same device; system: all).
//!
//! Each word keeps a set of access clocks. A new access `n` removes the
//! bytes of an earlier clock `a` only when `a` is ordered before `n` *and*
//! every future access racing with `a` would also race with `n` (`n` writes
//! or `a` only read; `n` is plain, or `a` is an atomic of at least `n`'s
//! scope on `n`'s thread or device). That rule keeps exactly the clocks an
//! exact detector with unbounded history needs. A record keeps its word's 8
//! newest clocks; older ones move to a chain of pool records (14 clocks
//! each, linked by pool index, walked one record at a time under the
//! record's lock; a chain record emptied by later accesses goes back to the
//! pool's free list). So the engine agrees with an exact detector on every
//! access while the pool has room: chains may take all but an eighth of
//! the pool (rounded up; that stays for words that inflate). Only when no
//! record is left is a seeded random clock other than the newest write of
//! any byte evicted (precision lost, counted in
//! [`crate::abi::PoolHeader::evictions`], never a false report). A word
//! with `h` clocks needs `1 + ceil((h - 8) / 14)` records of 128 bytes: a
//! counter hit by 4,096 sanitizer threads' compatible atomics, 293 records
//! (37 KiB); the default GPU pool of 65,536 records (8 MiB per device)
//! holds about 800,000 chained clocks. An access walks all its word's
//! clocks, so it costs O(h) under the word's lock: only words with long
//! histories pay, and a compact word never has a chain.
//!
//! Synchronisation follows the PTX model: a release (or a release fence
//! followed by an atomic write) publishes the clock into the thread's clock
//! buffer and leaves a *release head* (thread, scope, token, epoch) on the
//! word; read-modify-writes morally strong with the previous write continue
//! the release sequence; any other write ends it. An atomic read morally
//! strong with the last write joins every head whose scope and its own
//! include each other (acquire), and records every head whose scope
//! includes it in a pending clock that a later acquire fence joins (the
//! fence pattern). A failed compare-exchange is an atomic read with the
//! failure ordering. `fence.sc` is `fence.acq_rel` plus the SC-fence
//! order: it synchronises with every earlier SC fence whose scope and its
//! own include each other's threads (see `Engine::sc_fence`). Block-scope
//! fences order nothing across sanitizer threads: no-ops.
//!
//! Morally strong means: scopes including each other's threads and the
//! same bytes ([`crate::shadow::atomic_extent`]); atomics overlapping
//! without covering the same bytes race
//! ([`ReportKind::AtomicSizeMismatch`]) and do not synchronise.
//!
//! # Release history at scale
//!
//! Acquirers treat all heads of one *class* (releasing device, scope)
//! alike, so a word keeps one head per class: a new head of a class
//! present is joined with it into a *derived* snapshot in the new
//! releaser's buffer (`Engine::add_head`). Any number of releasers into one
//! word (fences plus relaxed RMWs, release RMWs) thus need at most two
//! heads per device, exactly. A word released from more classes than its
//! record's slots merges all into one *wide* head every acquirer acquires
//! (counted in [`crate::abi::PoolHeader::merged_heads`]). Each head stored
//! in a record holds a reference to its snapshot (taken and dropped when
//! the record is written back, `Engine::write_back`), and a snapshot still
//! referenced when its ring slot is reused moves into the record pool
//! ([`crate::history`]), so lagging acquirers stay exact while the pool
//! has room. Only an acquire whose snapshot is in neither joins the
//! releaser's overflow clock (counted per releaser, see [`crate::clock`]).
//! Both losses make acquirers ordered after more than the model says:
//! races can be missed, never invented.
//!
//! Reports name the first byte both accesses touch.
//!
//! A word that needs a record when the pool is full stays compact with its
//! newest write and read clocks, the older ones dropped (counted in
//! [`crate::abi::PoolHeader::degraded`]: races may be missed, none
//! invented). A plain write followed by an ordered atomic of another thread
//! is such a word: an atomic unordered with the write races with it but not
//! with the first atomic, so exactness needs both write clocks.
//!
//! Errors (epoch overflow, a full pool for a word with release heads) come
//! back as [`Outcome::Error`] records of their own kinds, never as race
//! verdicts.
//!
//! Lock order: the thread's own state lock, then cells in ascending word
//! order (a record's lock covers its chain), then the pool's free-list
//! lock (see [`crate::atomic`]).

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{
    AccessSite, GlobalState, InflatedRecord, RaceReport, ReportKind, CHAIN_ACCESS_SLOTS,
    RECORD_ACCESS_SLOTS, RECORD_RELEASE_SLOTS, WORD_BYTES,
};
use crate::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops, RecordLock, SpinLock};
use crate::atomic_set::{AtomicSet, AtomicSetClass, SET_THRESHOLD};
use crate::clock::{ClockError, FenceRelease, PendingLevel, ThreadClocks};
use crate::line;
use crate::memory_model::{AccessKind, Ordering, Scope};
use crate::report::{push_report, CurrentAccess};
use crate::shadow::{
    atomic_extent, AccessClock, CellView, LastAtomicWrite, Pool, ReleaseHead, ShadowCell, WordState,
};

/// The 32-bit atomic of a memory's family.
pub type U32Of<M> = <<M as EngineMemory>::Atomics as AtomicFamily>::U32;
/// The 64-bit atomic of a memory's family.
pub type U64Of<M> = <<M as EngineMemory>::Atomics as AtomicFamily>::U64;

/// Where the engine finds its state. The GPU runtime implements it over
/// the reservations (address arithmetic in [`crate::address`]); the CPU
/// backend and the tests use [`SliceMemory`].
pub trait EngineMemory {
    /// The atomics the memory is made of.
    type Atomics: AtomicFamily;
    /// The words of thread `tid`'s state ([`crate::abi::thread_state_words`] long).
    fn thread_state(&self, tid: u32) -> &[U32Of<Self>];
    /// The shadow cell of word `word` (counted from the real base), or
    /// `None` for memory the sanitizer does not manage.
    fn shadow_cell(&self, word: u64) -> Option<&U64Of<Self>>;
    /// The inflated-record pool ([`crate::abi::PoolHeader`] + records).
    fn pool(&self) -> &[U32Of<Self>];
    /// The report buffer (empty: reports are only returned).
    fn reports(&self) -> &[U32Of<Self>];
    /// The SC-fence clocks ([`sc_fence_words`] words: one accumulator per
    /// device, then the system one, each a lock word and a clock). Empty:
    /// `fence.sc` acts as `fence.acq_rel` (no SC-order synchronisation).
    fn sc_fence_clocks(&self) -> &[U32Of<Self>] {
        &[]
    }
}

/// u32 words of the SC-fence clocks for `num_devices` devices and
/// `num_threads` sanitizer threads: `num_devices + 1` accumulators of one
/// lock word and one vector clock each.
pub const fn sc_fence_words(num_devices: u32, num_threads: u32) -> usize {
    (num_devices as usize + 1) * (1 + num_threads as usize)
}

/// Engine memory made of slices: all thread states back to back, the shadow
/// cells of words `0..shadow.len()`, the pool and the report buffer.
pub struct SliceMemory<'a, F: AtomicFamily> {
    /// Thread states, `thread_state_words` each, in tid order.
    pub thread_states: &'a [F::U32],
    /// Words per thread state.
    pub thread_state_words: usize,
    /// Shadow cells.
    pub shadow: &'a [F::U64],
    /// Inflated-record pool.
    pub pool: &'a [F::U32],
    /// Report buffer.
    pub reports: &'a [F::U32],
    /// SC-fence clocks ([`sc_fence_words`] long; empty to leave them out).
    pub sc_fences: &'a [F::U32],
}

impl<F: AtomicFamily> EngineMemory for SliceMemory<'_, F> {
    type Atomics = F;
    #[inline(always)]
    fn thread_state(&self, tid: u32) -> &[F::U32] {
        let at = tid as usize * self.thread_state_words;
        &self.thread_states[at..at + self.thread_state_words]
    }
    #[inline(always)]
    fn shadow_cell(&self, word: u64) -> Option<&F::U64> {
        self.shadow.get(usize::try_from(word).ok()?)
    }
    #[inline(always)]
    fn pool(&self) -> &[F::U32] {
        self.pool
    }
    #[inline(always)]
    fn reports(&self) -> &[F::U32] {
        self.reports
    }
    #[inline(always)]
    fn sc_fence_clocks(&self) -> &[F::U32] {
        self.sc_fences
    }
}

/// The constants the engine needs (a subset of [`GlobalState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// SMs per device.
    pub num_sms: u32,
    /// Sanitizer threads in all.
    pub num_threads: u32,
    /// Snapshots per clock buffer.
    pub clock_buffer_size: u32,
    /// Seed of evictions.
    pub rng_seed: u32,
    /// Address of shadow word 0.
    pub real_base: u64,
    /// Chain records one word's access history may take from the pool
    /// before its clocks are evicted (counted: races may be missed, none
    /// invented). Walking the chain is part of every access to the word,
    /// so this bounds the cost of a word thousands of sanitizer threads
    /// hit (a histogram bin, a counter) as much as its memory.
    pub chain_records_per_word: u32,
    /// Whether a snapshot still referenced when its ring slot is reused
    /// is copied into the pool ([`crate::history`]) rather than its
    /// acquirers joining the overflow clock (counted coarsening).
    pub spill_snapshots: bool,
}

/// The GPU runtime's [`EngineConfig::chain_records_per_word`]: no chain.
/// Measured on an H100, a chained history made a racing or atomic word
/// that thousands of sanitizer threads hit several times slower (the
/// demo's racy counter past two minutes, a 256-bin histogram 2x) and its
/// records and spilled snapshots exhausted the pool in the atomics tests;
/// the runtime keeps the bounded history (8 clocks, then counted
/// evictions) until warp-level checks make hot words cheap.
pub const RUNTIME_CHAIN_RECORDS_PER_WORD: u32 = 0;

impl EngineConfig {
    /// The configuration a device's [`GlobalState`] describes, with the
    /// GPU runtime's bounded history ([`RUNTIME_CHAIN_RECORDS_PER_WORD`],
    /// no snapshot spills).
    pub const fn from_globals(g: &GlobalState) -> Self {
        EngineConfig {
            num_sms: g.num_sms,
            num_threads: g.num_threads,
            clock_buffer_size: g.clock_buffer_size,
            rng_seed: g.rng_seed,
            real_base: crate::address::real_base(g.reserve_base),
            chain_records_per_word: RUNTIME_CHAIN_RECORDS_PER_WORD,
            spill_snapshots: false,
        }
    }

    /// This configuration with the exact history: chains and spilled
    /// snapshots grow from the pool with no cap but the pool itself (the
    /// CPU backend's and the oracle tests' configuration).
    pub const fn with_exact_history(self) -> Self {
        EngineConfig {
            chain_records_per_word: u32::MAX,
            spill_snapshots: true,
            ..self
        }
    }
}

/// What an atomic does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOpKind {
    /// `ld.<ordering>.<scope>`.
    Load,
    /// `st.<ordering>.<scope>`.
    Store,
    /// `atom.<op>` / `red.<op>`: always reads and writes.
    Rmw,
    /// `atom.cas`: a read-modify-write when it succeeds, an atomic read
    /// with the failure ordering when it fails.
    CompareExchange,
}

/// An atomic operation's kind, orderings and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicOp {
    /// What it does.
    pub kind: AtomicOpKind,
    /// Ordering (of the success case, for compare-exchange).
    pub ordering: Ordering,
    /// Ordering of a failed compare-exchange.
    pub failure_ordering: Ordering,
    /// Scope.
    pub scope: Scope,
}

impl AtomicOp {
    /// An atomic with one ordering for both outcomes.
    pub const fn new(kind: AtomicOpKind, ordering: Ordering, scope: Scope) -> Self {
        AtomicOp {
            kind,
            ordering,
            failure_ordering: ordering,
            scope,
        }
    }
}

/// The result of a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No race.
    Clean,
    /// A race; the record was also pushed to the report buffer.
    Race(RaceReport),
    /// The engine could not decide (see [`ReportKind::is_error`]); pushed too.
    Error(RaceReport),
}

impl Outcome {
    /// True for [`Outcome::Race`].
    pub fn is_race(&self) -> bool {
        matches!(self, Outcome::Race(_))
    }

    /// True for [`Outcome::Error`].
    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Error(_))
    }
}

/// How a locked word is held.
#[derive(Clone, Copy, Debug)]
enum Held {
    /// Compact cell set to LOCKED; the old value to restore on failure.
    Compact(u64),
    /// Inflated record `index`, its lock held.
    Record(u32),
}

/// One word locked by [`Engine::lock_words`]: its decoded state, to be
/// changed and written back by [`Engine::unlock_words`].
#[derive(Clone, Copy, Debug)]
pub struct LockedWord {
    /// Word index.
    pub word: u64,
    /// Decoded state.
    pub state: WordState,
    held: Held,
}

/// Where [`Engine::access`]'s common case hands a plain access over to
/// the general path: the words before `word` were checked, clean.
#[derive(Clone, Copy, Debug)]
enum Resume {
    /// Nothing done yet (the epoch could not be had without the general
    /// path's error handling).
    Start,
    /// Word `word` needs the general path.
    At { word: u64, epoch: u32 },
    /// Word `word` was checked and updated, racing with `prior`.
    Raced {
        word: u64,
        epoch: u32,
        prior: AccessClock,
    },
}

/// The engine over one memory.
pub struct Engine<'m, M: EngineMemory> {
    mem: &'m M,
    cfg: EngineConfig,
}

#[inline(always)]
fn mix(seed: u32, tid: u32, counter: u32) -> u32 {
    // splitmix64 finaliser: cheap, reproducible for a given seed.
    let mut z = (seed as u64) << 32 ^ (tid as u64) << 16 ^ counter as u64;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

impl<'m, M: EngineMemory> Engine<'m, M> {
    /// An engine over `mem` with the given constants.
    pub fn new(mem: &'m M, cfg: EngineConfig) -> Self {
        Engine { mem, cfg }
    }

    /// The constants.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The memory.
    #[inline(always)]
    pub(crate) fn mem(&self) -> &'m M {
        self.mem
    }

    #[inline(always)]
    pub(crate) fn clocks(&self, tid: u32) -> ThreadClocks<'m, M::Atomics> {
        let clocks = ThreadClocks::new(
            self.mem.thread_state(tid),
            self.cfg.num_threads,
            self.cfg.clock_buffer_size,
        );
        if self.cfg.spill_snapshots {
            clocks.with_pool(self.mem.pool())
        } else {
            clocks
        }
    }

    #[inline(always)]
    pub(crate) fn pool(&self) -> Pool<'m, M::Atomics> {
        Pool::new(self.mem.pool())
    }

    #[inline(always)]
    fn device(&self, tid: u32) -> u32 {
        tid / self.cfg.num_sms.max(1)
    }

    /// True when `scope`, taken by thread `owner`, includes thread `other`.
    #[inline(always)]
    pub fn includes(&self, scope: Scope, owner: u32, other: u32) -> bool {
        match scope {
            Scope::Block => owner == other,
            Scope::Device => self.device(owner) == self.device(other),
            Scope::System => true,
        }
    }

    #[inline(always)]
    fn mutual(&self, a_tid: u32, a_scope: Scope, b_tid: u32, b_scope: Scope) -> bool {
        a_tid == b_tid
            || (self.includes(a_scope, a_tid, b_tid) && self.includes(b_scope, b_tid, a_tid))
    }

    /// Sets up thread `tid`'s state (epoch 1, empty clocks). Call once per
    /// thread before any hook, with nothing else using the state.
    pub fn init_thread(&self, tid: u32) {
        self.clocks(tid).init(tid);
    }

    /// The current epoch of thread `tid`.
    pub fn epoch(&self, tid: u32) -> u32 {
        self.clocks(tid).get(tid)
    }

    /// The epoch thread `tid`'s next access will carry (the runtime notes
    /// an access's site before the access, under this epoch).
    pub fn next_access_epoch(&self, tid: u32) -> u32 {
        self.clocks(tid).next_access_epoch(tid)
    }

    /// Entry `j` of thread `tid`'s vector clock.
    pub fn clock_entry(&self, tid: u32, j: u32) -> u32 {
        self.clocks(tid).get(j)
    }

    // ----- the per-word algorithm -------------------------------------------

    /// Could `a` and `n` both be atomics that may not race?
    #[inline(always)]
    fn compatible(&self, a: &AccessClock, n: &AccessClock) -> bool {
        a.atomic
            && n.atomic
            && a.extent == n.extent
            && self.includes(a.scope, a.tid, n.tid)
            && self.includes(n.scope, n.tid, a.tid)
    }

    /// Do `a` and `n` race, given whether `a` is ordered before `n`: they
    /// overlap, one writes, and they are not compatible atomics.
    #[inline(always)]
    fn conflicts(&self, a: &AccessClock, n: &AccessClock, ordered: bool) -> bool {
        a.mask & n.mask != 0 && (a.write || n.write) && !ordered && !self.compatible(a, n)
    }

    /// Does every future race with `a` imply one with `n`, given `a` is
    /// ordered before `n`?
    #[inline(always)]
    fn subsumes(&self, n: &AccessClock, a: &AccessClock) -> bool {
        (n.write || !a.write)
            && (!n.atomic
                || (a.atomic
                    && a.extent == n.extent
                    && a.scope >= n.scope
                    && (a.tid == n.tid
                        || (self.device(a.tid) == self.device(n.tid) && a.scope >= Scope::Device))))
    }

    /// Checks `n` against the word's clocks and records it. Returns the
    /// first racing earlier clock and whether a clock was evicted. Older
    /// clocks live in the record's chain (walked first, one record at a
    /// time); when the record overflows, its oldest clock moves there, and
    /// only when the pool has no record for it is a clock evicted.
    fn record_access(
        &self,
        st: &mut WordState,
        n: AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> (Option<AccessClock>, bool) {
        let mut race = None;
        // Bytes of earlier clocks of the very same access merge into the new
        // one after the loop (checks use the access's own bytes only).
        let mut merged = 0u8;
        let in_set = st.set != 0 && self.check_set(st, &n, clocks, &mut race, &mut merged);
        let (room, chained) = if st.chain != 0 {
            self.check_chain(st, &n, clocks, &mut race, &mut merged)
        } else {
            (None, 0)
        };
        let mut i = 0;
        while i < st.len {
            if !self.check_clock(&mut st.accesses[i], &n, clocks, &mut race, &mut merged) {
                st.remove(i);
                continue;
            }
            i += 1;
        }
        if in_set || self.make_set(st, &n) {
            return (race, false);
        }
        st.push(AccessClock {
            mask: n.mask | merged,
            ..n
        });
        if st.len <= RECORD_ACCESS_SLOTS || self.spill(st, room, chained) {
            return (race, false);
        }
        // Full pool: evict, never the newest clock, never the latest write
        // of a byte.
        let mut protected = [false; RECORD_ACCESS_SLOTS + 1];
        protected[st.len - 1] = true;
        for byte in 0..4 {
            if let Some(k) = (0..st.len)
                .rev()
                .find(|&k| st.accesses[k].write && st.accesses[k].mask & (1 << byte) != 0)
            {
                protected[k] = true;
            }
        }
        let candidates = protected[..st.len].iter().filter(|p| !**p).count() as u32;
        let pick = mix(self.cfg.rng_seed, n.tid, clocks.next_counter()) % candidates.max(1);
        let victim = (0..st.len)
            .filter(|&k| !protected[k])
            .nth(pick as usize)
            .unwrap_or(0);
        st.remove(victim);
        st.lossy = true;
        (race, true)
    }

    /// [`Engine::record_access`] on the word's atomic set (see
    /// [`crate::atomic_set`]): an access of the set's class raises its own
    /// entry (it cannot race with any) and returns true; another atomic
    /// compatible with every entry (a poller's load, say) leaves the set as
    /// it is (an entry it could subsume only stands for more than the
    /// history needs); any other access is checked against every entry in
    /// use, and clears those it subsumes.
    fn check_set(
        &self,
        st: &mut WordState,
        n: &AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
        race: &mut Option<AccessClock>,
        merged: &mut u8,
    ) -> bool {
        let Some(set) = self.atomic_set(st) else {
            return false;
        };
        let class = set.class();
        if class.admits(n, self.device(n.tid)) {
            set.raise(n.tid, n.epoch);
            return true;
        }
        if class.compatible_with(n, self.device(n.tid)) {
            return false;
        }
        // Raisers without the lock left before it was taken (see
        // `RecordLock`): their entries are all in.
        if set.used() == 0 {
            return false;
        }
        for t in 0..self.cfg.num_threads {
            let e = set.entry(t);
            if e == 0 {
                continue;
            }
            // An entry that loses only some bytes stays whole: it then
            // stands for more than the history needs, which can change
            // which earlier access a report names, never whether one is made.
            let mut a = class.clock(t, e);
            if !self.check_clock(&mut a, n, clocks, race, merged) {
                set.clear(t);
            }
        }
        false
    }

    /// The atomic set of a word's decoded state, if it has one (for
    /// inspection: its entries are more access clocks of the word).
    pub fn atomic_set(&self, st: &WordState) -> Option<AtomicSet<'m, M::Atomics>> {
        self.set_at(st.set)
    }

    /// The atomic set a record names by `link` (pool index + 1, 0: none).
    #[inline(always)]
    fn set_at(&self, link: u32) -> Option<AtomicSet<'m, M::Atomics>> {
        AtomicSet::open(&self.pool(), link.checked_sub(1)?, self.cfg.num_threads)
    }

    /// Moves a full record's atomic writes of `n`'s class into a new atomic
    /// set, with `n`, when they are at least half of the record (and the
    /// pool has room); the other clocks stay. True when `n` is recorded
    /// there.
    fn make_set(&self, st: &mut WordState, n: &AccessClock) -> bool {
        if st.set != 0 || st.chain != 0 || st.len < SET_THRESHOLD {
            return false;
        }
        let Some(class) = AtomicSetClass::of(n, self.device(n.tid)) else {
            return false;
        };
        let admitted = |a: &AccessClock| class.admits(a, self.device(a.tid));
        let members = st.accesses[..st.len].iter().filter(|a| admitted(a)).count();
        if 2 * members < SET_THRESHOLD {
            return false;
        }
        let Some((index, set)) = AtomicSet::create(&self.pool(), class, self.cfg.num_threads)
        else {
            return false;
        };
        set.raise(n.tid, n.epoch);
        let mut i = 0;
        while i < st.len {
            let a = st.accesses[i];
            if admitted(&a) {
                set.raise(a.tid, a.epoch);
                st.remove(i);
            } else {
                i += 1;
            }
        }
        st.set = index + 1;
        true
    }

    /// Checks new access `n` against earlier clock `a`: notes `a` in `race`
    /// if it is the first racing one, takes off `a` the bytes `n` subsumes,
    /// and merges `a` into `n` (`merged`) when it is the same access.
    /// Returns whether `a` keeps any byte.
    #[inline(always)]
    fn check_clock(
        &self,
        a: &mut AccessClock,
        n: &AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
        race: &mut Option<AccessClock>,
        merged: &mut u8,
    ) -> bool {
        let overlap = a.mask & n.mask != 0;
        let ordered = clocks.get(a.tid) >= a.epoch;
        if race.is_none() && self.conflicts(a, n, ordered) {
            *race = Some(*a);
        }
        if ordered && overlap && self.subsumes(n, a) {
            a.mask &= !n.mask;
        }
        if a.same_access(n) {
            // The same access apart from bytes merges into the new clock,
            // which takes the newest position.
            *merged |= a.mask;
            a.mask = 0;
        }
        a.mask != 0
    }

    /// [`Engine::check_clock`] over the clocks of `st`'s chain, record by
    /// record (the word's lock held), writing back what changed and giving
    /// emptied records back to the pool. Returns a free slot of the chain.
    fn check_chain(
        &self,
        st: &mut WordState,
        n: &AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
        race: &mut Option<AccessClock>,
        merged: &mut u8,
    ) -> (Option<(u32, usize)>, u32) {
        let pool = self.pool();
        let mut room = None;
        let mut prev = None;
        let mut records = 0;
        let mut link = st.chain;
        while link != 0 {
            let i = link - 1;
            link = pool.chain_next(i);
            let (mut live, mut free_slot) = (false, None);
            for slot in 0..CHAIN_ACCESS_SLOTS {
                let Some(mut a) = pool.chain_clock(i, slot) else {
                    free_slot = free_slot.or(Some(slot));
                    continue;
                };
                let mask = a.mask;
                if self.check_clock(&mut a, n, clocks, race, merged) {
                    live = true;
                    if a.mask != mask {
                        pool.set_chain_clock(i, slot, Some(a));
                    }
                } else {
                    pool.set_chain_clock(i, slot, None);
                    free_slot = free_slot.or(Some(slot));
                }
            }
            if live {
                room = room.or(free_slot.map(|slot| (i, slot)));
                prev = Some(i);
                records += 1;
                continue;
            }
            match prev {
                None => st.chain = link,
                Some(p) => pool.set_chain_next(p, link),
            }
            pool.free(i);
        }
        (room, records)
    }

    /// Moves the oldest clock of an overflowing record into its chain: into
    /// `room` (a free chain slot), or a new chain record in front. False
    /// when the word's chain already has `chained` =
    /// [`EngineConfig::chain_records_per_word`] records or the pool has no
    /// record for it.
    fn spill(&self, st: &mut WordState, room: Option<(u32, usize)>, chained: u32) -> bool {
        let pool = self.pool();
        let (i, slot) = match room {
            Some(r) => r,
            None if chained >= self.cfg.chain_records_per_word => return false,
            None => {
                let Some(i) = pool.allocate_chain() else {
                    return false;
                };
                pool.set_chain_next(i, st.chain);
                st.chain = i + 1;
                (i, 0)
            }
        };
        pool.set_chain_clock(i, slot, Some(st.accesses[0]));
        st.remove(0);
        true
    }

    /// The common case of [`Engine::record_access`] for a plain access on a
    /// compact cell, in registers: the same rules on at most two clocks.
    /// Returns the new cell and the racing clock, or `None` when the result
    /// does not stay compact (the caller then takes the general path).
    #[inline(always)]
    pub(crate) fn plain_compact(
        &self,
        c: ShadowCell,
        n: &AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> Option<(ShadowCell, Option<AccessClock>)> {
        if let Some(same) = Self::same_epoch(c, n, clocks) {
            return Some((c, same));
        }
        let mut w = c.write_clock().unwrap_or(AccessClock::NONE);
        let mut r = c.read_clock().unwrap_or(AccessClock::NONE);
        let mut race = None;
        let mut merged = 0u8;
        // Called on each clock in turn, not looped over an array of the
        // two: on a GPU that array (and both clocks) would live in local
        // memory.
        let mut check = |a: &mut AccessClock| {
            if a.mask == 0 {
                return;
            }
            let overlap = a.mask & n.mask != 0;
            let ordered = clocks.get(a.tid) >= a.epoch;
            // A plain access is never compatible with anything.
            if race.is_none() && overlap && (a.write || n.write) && !ordered {
                race = Some(*a);
            }
            if ordered && overlap && (n.write || !a.write) {
                a.mask &= !n.mask;
            }
            if a.same_access(n) {
                merged |= a.mask;
                a.mask = 0;
            }
        };
        check(&mut w);
        check(&mut r);
        // The new clock takes the slot of its kind, if that is free: by
        // value, not through a reference to one of the two (on a GPU that
        // put both clocks in local memory).
        let clock = AccessClock {
            mask: n.mask | merged,
            ..*n
        };
        let (w, r) = match (n.write, w.mask, r.mask) {
            (true, 0, _) => (clock, r),
            (false, _, 0) => (w, clock),
            _ => return None,
        };
        Some((ShadowCell::from_clocks(&w, &r)?, race))
    }

    /// FastTrack's same-epoch case of [`Engine::plain_compact`]: the cell's
    /// plain clock of `n`'s kind is `n`'s thread in `n`'s epoch and covers
    /// `n`'s bytes, so the cell stays as it is (`n` merges into that
    /// clock), and only the other clock can race: a write (for a read `n`)
    /// unordered with `n`. `Some(race)` then, without touching the cell;
    /// `None` when the general rules must run (a write meeting a read of
    /// its bytes, which it would take over).
    #[inline(always)]
    pub(crate) fn same_epoch(
        c: ShadowCell,
        n: &AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> Option<Option<AccessClock>> {
        let (own, other) = if n.write {
            (c.write_clock()?, c.read_clock())
        } else {
            (c.read_clock()?, c.write_clock())
        };
        if own.tid != n.tid || own.epoch != n.epoch || own.atomic || own.mask & n.mask != n.mask {
            return None;
        }
        match other {
            Some(o) if o.mask & n.mask != 0 => {
                // A write never meets its own epoch's read here (`None`).
                (!n.write).then(|| (clocks.get(o.tid) < o.epoch).then_some(o))
            }
            _ => Some(None),
        }
    }

    /// Writes `st` into record `rec` (its lock held, or the record still
    /// private), taking a snapshot reference for each release head new to
    /// the record and dropping one for each head gone from it (see
    /// [`crate::history`]). Out of line: four paths write records back.
    #[inline(never)]
    fn write_back(&self, st: &WordState, rec: &[U32Of<M>]) {
        let (old, old_len) = WordState::heads_of_record::<M::Atomics>(rec);
        let mut kept = [false; RECORD_RELEASE_SLOTS];
        for h in &st.releases[..st.release_len] {
            let same = |k: &usize| !kept[*k] && old[*k].tid == h.tid && old[*k].token == h.token;
            match (0..old_len).find(same) {
                Some(k) => kept[k] = true,
                None => self.change_head_refs(h, 1),
            }
        }
        for (h, _) in old[..old_len].iter().zip(kept).filter(|(_, k)| !k) {
            self.change_head_refs(h, -1);
        }
        st.to_record::<M::Atomics>(rec);
    }

    /// Takes (`delta` 1) or drops (-1) the reference a record's release
    /// head holds to the snapshot it names.
    #[inline(always)]
    pub(crate) fn change_head_refs(&self, h: &ReleaseHead, delta: i32) {
        if h.tid < self.cfg.num_threads {
            self.clocks(h.tid).change_refs(h.token, delta);
        }
    }

    // ----- locking words --------------------------------------------------

    fn lock_word(&self, word: u64) -> Option<LockedWord> {
        let cell = self.mem.shadow_cell(word)?;
        loop {
            let c = cell.load(MemOrder::Acquire);
            match ShadowCell(c).view() {
                CellView::Locked => M::Atomics::spin(),
                CellView::Line => self.split_line(word),
                CellView::Inflated(i) => {
                    let rec = self.pool().record(i);
                    RecordLock::lock::<M::Atomics>(&rec[InflatedRecord::LOCK_WORD]);
                    let state = WordState::from_record::<M::Atomics>(rec);
                    return Some(LockedWord {
                        word,
                        state,
                        held: Held::Record(i),
                    });
                }
                CellView::Compact => {
                    if cell
                        .compare_exchange(
                            c,
                            ShadowCell::LOCKED.0,
                            MemOrder::Acquire,
                            MemOrder::Relaxed,
                        )
                        .is_ok()
                    {
                        return Some(LockedWord {
                            word,
                            state: WordState::from_compact(ShadowCell(c)),
                            held: Held::Compact(c),
                        });
                    }
                }
            }
        }
    }

    fn unlock_word(&self, w: &mut LockedWord) -> Result<(), ReportKind> {
        // `Engine::add_head` keeps heads within the record's slots.
        debug_assert!(w.state.release_len <= RECORD_RELEASE_SLOTS);
        let Some(cell) = self.mem.shadow_cell(w.word) else {
            return Ok(());
        };
        match w.held {
            Held::Compact(old) => match w.state.to_compact() {
                Some(c) => cell.store(c.0, MemOrder::Release),
                None => match self.pool().allocate().or_else(|| {
                    // Heads cannot be dropped: spilled snapshots give way.
                    let heads = w.state.release_len != 0;
                    (heads && self.reclaim_spilled())
                        .then(|| self.pool().allocate())
                        .flatten()
                }) {
                    Some(i) => {
                        self.write_back(&w.state, self.pool().record(i));
                        cell.store(ShadowCell::inflated(i).0, MemOrder::Release);
                    }
                    None => match w.state.to_compact_dropping_clocks() {
                        Some(c) => {
                            cell.store(c.0, MemOrder::Release);
                            self.pool().note_degraded();
                        }
                        None => {
                            cell.store(old, MemOrder::Release);
                            return Err(ReportKind::ShadowPoolExhausted);
                        }
                    },
                },
            },
            Held::Record(i) => {
                let rec = self.pool().record(i);
                self.write_back(&w.state, rec);
                RecordLock::unlock::<M::Atomics>(&rec[InflatedRecord::LOCK_WORD]);
            }
        }
        Ok(())
    }

    /// Gives every snapshot spilled into the pool back, for a word with
    /// release heads that finds the pool full (it cannot stay compact):
    /// acquirers of those snapshots fall back to their releasers' overflow
    /// clocks, which hold them (counted). Visits every thread: only on
    /// this path, which otherwise reports `ShadowPoolExhausted`.
    #[inline(never)]
    fn reclaim_spilled(&self) -> bool {
        let mut freed = false;
        for t in 0..self.cfg.num_threads {
            freed |= self.clocks(t).drop_spilled();
        }
        freed
    }

    /// Locks the cells of `words` in ascending order (whatever order they
    /// are given in; duplicates and unmanaged words yield `None`), so two
    /// multi-cell atomics can never wait on each other in a cycle.
    pub fn lock_words<const N: usize>(&self, mut words: [u64; N]) -> [Option<LockedWord>; N] {
        words.sort_unstable();
        // Split first, holding no cell: a split waits for a locked head.
        for w in words {
            if self.mem.shadow_cell(w).is_some() {
                self.split_line(w);
            }
        }
        let mut out = [None; N];
        for i in 0..N {
            if i > 0 && words[i] == words[i - 1] {
                continue;
            }
            out[i] = self.lock_word(words[i]);
        }
        out
    }

    /// Writes back and unlocks words locked by [`Engine::lock_words`], in
    /// reverse order; returns the first error (a full pool).
    pub fn unlock_words<const N: usize>(
        &self,
        mut locked: [Option<LockedWord>; N],
    ) -> Result<(), ReportKind> {
        let mut result = Ok(());
        for w in locked.iter_mut().rev().flatten() {
            if let Err(e) = self.unlock_word(w) {
                result = result.and(Err(e));
            }
        }
        result
    }

    // ----- hooks ---------------------------------------------------------

    pub(crate) fn emit(&self, r: RaceReport) {
        push_report::<M::Atomics>(self.mem.reports(), &r);
    }

    fn error_outcome(
        &self,
        cur: &CurrentAccess<'_>,
        kind: ReportKind,
        epoch: u32,
        detail: u32,
    ) -> Outcome {
        let r = cur.error(kind, epoch, detail);
        self.emit(r);
        Outcome::Error(r)
    }

    /// Splits `[addr, addr + size)` into words: `(first word, last word)`,
    /// or `None` for unmanaged memory.
    #[inline(always)]
    pub(crate) fn word_span(&self, addr: u64, size: u32) -> Option<(u64, u64)> {
        if addr < self.cfg.real_base || size == 0 {
            return None;
        }
        let off = addr - self.cfg.real_base;
        Some((off / WORD_BYTES, (off + size as u64 - 1) / WORD_BYTES))
    }

    #[inline(always)]
    pub(crate) fn byte_mask(&self, addr: u64, size: u32, word: u64) -> u8 {
        let start = self.cfg.real_base + word * WORD_BYTES;
        let lo = addr.max(start) - start;
        let hi = (addr + size as u64).min(start + WORD_BYTES) - start;
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u8
    }

    /// The first byte two clocks of word `word` share: the address a race
    /// report names.
    #[inline(always)]
    fn conflict_address(&self, word: u64, prior: &AccessClock, n: &AccessClock) -> u64 {
        let shared = (prior.mask & n.mask).max(1);
        self.cfg.real_base + word * WORD_BYTES + shared.trailing_zeros() as u64
    }

    /// A plain (non-atomic) read or write of `size` bytes at `addr` by
    /// sanitizer thread `tid`. Takes no lock on the thread state (see
    /// [`ThreadClocks::fresh_epoch_unlocked`]) and none on compact cells:
    /// one 64-bit CAS per word, none when nothing changes.
    ///
    /// The common case (compact cells that stay compact, no race) runs
    /// here, in registers; the first word that needs more, and every word
    /// after it, go to the general path (`access_from`), out of line, so
    /// that its reports and records cost the common case neither stack nor
    /// spills. The words before it were checked exactly as there: the
    /// same compact rules, and clean.
    #[inline(always)]
    pub fn access(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        site: &AccessSite,
    ) -> Outcome {
        let Some((first, last)) = self.word_span(addr, size) else {
            return Outcome::Clean;
        };
        let clocks = self.clocks(tid);
        let Ok(epoch) = clocks.fresh_epoch_unlocked(tid) else {
            return self.access_from(tid, addr, size, write, site, Resume::Start);
        };
        let mut word = first;
        while word <= last {
            let n = self.plain_clock(tid, epoch, addr, size, word, write);
            match self.plain_word_compact(word, n, &clocks) {
                Some(None) => word += 1,
                Some(Some(prior)) => {
                    let resume = Resume::Raced { word, epoch, prior };
                    return self.access_from(tid, addr, size, write, site, resume);
                }
                None => {
                    let resume = Resume::At { word, epoch };
                    return self.access_from(tid, addr, size, write, site, resume);
                }
            }
        }
        Outcome::Clean
    }

    /// The access clock of a plain access of `size` bytes at `addr` on
    /// `word`.
    #[inline(always)]
    fn plain_clock(
        &self,
        tid: u32,
        epoch: u32,
        addr: u64,
        size: u32,
        word: u64,
        write: bool,
    ) -> AccessClock {
        AccessClock {
            tid,
            epoch,
            mask: self.byte_mask(addr, size, word),
            write,
            atomic: false,
            scope: Scope::Block,
            extent: 0,
        }
    }

    /// A plain access of `size` bytes at `addr` by `tid`, as its reports
    /// name it.
    pub(crate) fn plain_access<'s>(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        site: &'s AccessSite,
    ) -> CurrentAccess<'s> {
        CurrentAccess {
            address: addr,
            size,
            tid,
            num_sms: self.cfg.num_sms,
            kind: if write {
                AccessKind::Write
            } else {
                AccessKind::Read
            },
            scope: Scope::Block,
            site,
        }
    }

    /// [`Engine::access`] where the common case left it (`resume`): the
    /// general path.
    #[inline(never)]
    fn access_from(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        write: bool,
        site: &AccessSite,
        resume: Resume,
    ) -> Outcome {
        let cur = self.plain_access(tid, addr, size, write, site);
        let Some((first, last)) = self.word_span(addr, size) else {
            return Outcome::Clean;
        };
        let clocks = self.clocks(tid);
        let (from, epoch, mut outcome) = match resume {
            Resume::Start => match clocks.fresh_epoch_unlocked(tid) {
                Ok(e) => (first, e, Outcome::Clean),
                Err(ClockError::EpochOverflow(e)) | Err(ClockError::SnapshotGone(e)) => {
                    return self.error_outcome(&cur, ReportKind::EpochOverflow, e, e);
                }
            },
            Resume::At { word, epoch } => (word, epoch, Outcome::Clean),
            Resume::Raced { word, epoch, prior } => {
                let n = self.plain_clock(tid, epoch, addr, size, word, write);
                let at = self.conflict_address(word, &prior, &n);
                (
                    word + 1,
                    epoch,
                    Outcome::Race(cur.race(at, epoch, &prior, &n)),
                )
            }
        };
        for word in from..=last {
            let n = self.plain_clock(tid, epoch, addr, size, word, write);
            match self.plain_word(word, n, &clocks) {
                Ok(Some(prior)) if !matches!(outcome, Outcome::Race(_)) => {
                    let at = self.conflict_address(word, &prior, &n);
                    outcome = Outcome::Race(cur.race(at, epoch, &prior, &n));
                }
                Ok(_) => {}
                Err(kind) => {
                    if let Outcome::Race(r) = outcome {
                        self.emit(r);
                    }
                    return self.error_outcome(&cur, kind, epoch, word as u32);
                }
            }
        }
        if let Outcome::Race(r) = outcome {
            self.emit(r);
        }
        outcome
    }

    /// One word of a plain access: the common case (a compact cell that
    /// stays compact: one load and at most one compare-exchange) here,
    /// everything else in [`Engine::plain_word_general`], out of line.
    #[inline(always)]
    fn plain_word(
        &self,
        word: u64,
        n: AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> Result<Option<AccessClock>, ReportKind> {
        match self.plain_word_compact(word, n, clocks) {
            Some(race) => Ok(race),
            None => match self.mem.shadow_cell(word) {
                Some(cell) => self.plain_word_general(word, cell, n, clocks),
                None => Ok(None),
            },
        }
    }

    /// [`Engine::plain_word`] when the word's cell is compact and stays
    /// compact (or the word is not managed): `Some` with the racing
    /// clock, if any, the cell updated; `None` (nothing changed) when the
    /// general path must run.
    #[inline(always)]
    fn plain_word_compact(
        &self,
        word: u64,
        n: AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> Option<Option<AccessClock>> {
        let Some(cell) = self.mem.shadow_cell(word) else {
            return Some(None);
        };
        loop {
            // Relaxed: a compact cell is self-contained (see below).
            let c = cell.load(MemOrder::Relaxed);
            if ShadowCell(c).view() != CellView::Compact || Self::needs_split(word, c) {
                return None;
            }
            let (new, race) = self.plain_compact(ShadowCell(c), &n, clocks)?;
            if new.0 == c
                || cell
                    .compare_exchange(c, new.0, MemOrder::Relaxed, MemOrder::Relaxed)
                    .is_ok()
            {
                return Some(race);
            }
        }
    }

    /// [`Engine::plain_word`] on any cell: locked, inflated, or compact
    /// with a result that needs the general rules or a record.
    #[inline(never)]
    fn plain_word_general(
        &self,
        word: u64,
        cell: &U64Of<M>,
        n: AccessClock,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> Result<Option<AccessClock>, ReportKind> {
        let pool = self.pool();
        let mut split = false;
        let result = loop {
            // Relaxed: a compact cell is self-contained (no other memory is
            // published with it), so the common path needs no fence.
            let c = cell.load(MemOrder::Relaxed);
            if !split && Self::needs_split(word, c) {
                // The line's summary may be this word's state: the access
                // changes nothing if the summary covers it, else the line
                // splits and the cell is read again.
                if let Some(head) = self.mem.shadow_cell(line::head_word(word)) {
                    if let Some(race) = self.line_covers(head, &n, clocks) {
                        break Ok(race);
                    }
                }
                self.split_line(word);
                split = true;
                continue;
            }
            match ShadowCell(c).view() {
                CellView::Locked => M::Atomics::spin(),
                CellView::Line => {
                    self.split_line(word);
                }
                CellView::Inflated(i) => {
                    // Pairs with the inflater's release store: the record's
                    // first contents were written before the tag.
                    M::Atomics::fence(MemOrder::Acquire);
                    let rec = pool.record(i);
                    RecordLock::lock::<M::Atomics>(&rec[InflatedRecord::LOCK_WORD]);
                    let mut st = WordState::from_record::<M::Atomics>(rec);
                    let (race, evicted) = self.record_access(&mut st, n, clocks);
                    if n.write {
                        // A plain write ends every release sequence.
                        st.release_len = 0;
                        st.last_atomic_write = None;
                    }
                    self.write_back(&st, rec);
                    RecordLock::unlock::<M::Atomics>(&rec[InflatedRecord::LOCK_WORD]);
                    if evicted {
                        pool.note_eviction();
                    }
                    break Ok(race);
                }
                CellView::Compact => {
                    if let Some((new, race)) = self.plain_compact(ShadowCell(c), &n, clocks) {
                        if new.0 == c
                            || cell
                                .compare_exchange(c, new.0, MemOrder::Relaxed, MemOrder::Relaxed)
                                .is_ok()
                        {
                            break Ok(race);
                        }
                        continue;
                    }
                    let mut st = WordState::from_compact(ShadowCell(c));
                    let (race, evicted) = self.record_access(&mut st, n, clocks);
                    match st.to_compact() {
                        Some(new) => {
                            if new.0 == c
                                || cell
                                    .compare_exchange(
                                        c,
                                        new.0,
                                        MemOrder::Relaxed,
                                        MemOrder::Relaxed,
                                    )
                                    .is_ok()
                            {
                                break Ok(race);
                            }
                        }
                        None => {
                            // Full pool (no record to claim the cell for):
                            // keep the word compact with its older clocks
                            // dropped (counted), in one compare-exchange.
                            if pool.exhausted() {
                                if let Some(d) = st.to_compact_dropping_clocks() {
                                    if cell
                                        .compare_exchange(
                                            c,
                                            d.0,
                                            MemOrder::Relaxed,
                                            MemOrder::Relaxed,
                                        )
                                        .is_ok()
                                    {
                                        pool.note_degraded();
                                        break Ok(race);
                                    }
                                    continue;
                                }
                            }
                            // Claim the cell before taking a record, so that
                            // threads inflating one word at once do not each
                            // burn a record: the losers see LOCKED and retry.
                            // Relaxed: the compact value claimed carries no
                            // other memory; only the record, if one is
                            // taken, is published (by the release store of
                            // its tag).
                            if cell
                                .compare_exchange(
                                    c,
                                    ShadowCell::LOCKED.0,
                                    MemOrder::Relaxed,
                                    MemOrder::Relaxed,
                                )
                                .is_err()
                            {
                                continue;
                            }
                            let Some(i) = pool.allocate() else {
                                // Full pool: keep the word compact with its
                                // older clocks dropped (counted), or fail
                                // when it has release heads. A compact value
                                // publishes nothing else: relaxed stores (a
                                // release is a system-wide fence on a GPU,
                                // paid by every such access of a kernel
                                // whose words outgrow the pool).
                                break match st.to_compact_dropping_clocks() {
                                    Some(d) => {
                                        cell.store(d.0, MemOrder::Relaxed);
                                        pool.note_degraded();
                                        Ok(race)
                                    }
                                    None => {
                                        cell.store(c, MemOrder::Relaxed);
                                        Err(ReportKind::ShadowPoolExhausted)
                                    }
                                };
                            };
                            self.write_back(&st, pool.record(i));
                            cell.store(ShadowCell::inflated(i).0, MemOrder::Release);
                            if evicted {
                                pool.note_eviction();
                            }
                            break Ok(race);
                        }
                    }
                }
            }
        };
        result
    }

    /// A naturally aligned atomic of `size` bytes at `addr` (4 or 8 in PTX;
    /// an 8-byte one spans two cells, locked in address order; access
    /// clocks are per byte, release heads per word). `perform` does
    /// the real operation while the word's cells are locked, so the shadow
    /// sees atomics in the order memory does, and returns whether it wrote
    /// (false for a load or a failed compare-exchange).
    pub fn atomic(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        op: AtomicOp,
        site: &AccessSite,
        perform: impl FnOnce() -> bool,
    ) -> Outcome {
        // Whichever path runs first performs the operation; the locked
        // path after a fast path that gave up gets the result it had.
        let mut perform = Some(perform);
        let mut wrote = None;
        let mut run = || *wrote.get_or_insert_with(|| perform.take().is_some_and(|f| f()));
        if self.atomic_in_set(tid, addr, size, op, &mut run) {
            return Outcome::Clean;
        }
        self.atomic_locked(tid, addr, size, op, site, run)
    }

    /// The atomic-set fast path of [`Engine::atomic`] (see
    /// [`crate::atomic_set`]): a non-releasing read-modify-write (or
    /// compare-exchange that wrote) of one word with an atomic set of its
    /// class, by a thread with no release fence pending, raises its entry
    /// without the word's lock.
    /// True when it is done (clean: it races with no entry); false when
    /// the locked path must record it (`run` may have performed it).
    #[inline(always)]
    fn atomic_in_set(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        op: AtomicOp,
        run: &mut impl FnMut() -> bool,
    ) -> bool {
        // A compare-exchange is the GPU's form of every read-modify-write
        // (it says afterwards whether it wrote); one that did not write is
        // a read, left to the locked path.
        let rmw = matches!(op.kind, AtomicOpKind::Rmw | AtomicOpKind::CompareExchange);
        if !rmw || op.ordering.releases() || op.scope < Scope::Device {
            return false;
        }
        let Some((word, last)) = self.word_span(addr, size) else {
            return false;
        };
        let Some(cell) = self.mem.shadow_cell(word).filter(|_| word == last) else {
            return false;
        };
        let CellView::Inflated(i) = ShadowCell(cell.load(MemOrder::Acquire)).view() else {
            return false;
        };
        let rec = self.pool().record(i);
        let lock = &rec[InflatedRecord::LOCK_WORD];
        let meta = &rec[InflatedRecord::META_WORD];
        // Most atomics' words have no set: they learn it before anything
        // of the thread's state is read.
        if meta.load(MemOrder::Relaxed) & InflatedRecord::SET_FAST_PATH == 0 {
            return false;
        }
        let clocks = self.clocks(tid);
        let (device_fence, system_fence) = clocks.fence_tokens();
        if device_fence.token | system_fence.token != 0 {
            // The write would start release sequences.
            return false;
        }
        let Ok(epoch) = clocks.fresh_epoch_unlocked(tid) else {
            return false;
        };
        let mask = self.byte_mask(addr, size, word);
        let n = AccessClock {
            tid,
            epoch,
            mask,
            write: true,
            atomic: true,
            scope: op.scope,
            extent: atomic_extent(size, mask),
        };
        // A raiser performs its operation either on the same epoch's
        // shortcut (nothing to raise) or inside the lock as a raiser: never
        // before waiting for the lock. A raiser that had performed and then
        // waited could be the very thread that took the program's own lock
        // (a spin lock's taker), and every poller, holding the word's lock
        // in turn for each poll, kept it waiting (on an H100 a relaxed spin
        // lock of 24 blocks did not finish in 25 s). Raisers that find the
        // lock held look again rather than take it: raisers that took it
        // after a while formed a convoy on a counter every thread of a
        // 16M-thread grid adds to (each found the lock held by the one
        // before; 18 ms became more than 20 s).
        loop {
            let seen = lock.load(MemOrder::Acquire);
            let meta = meta.load(MemOrder::Relaxed);
            if meta & InflatedRecord::SET_FAST_PATH == 0 {
                return false;
            }
            let Some(set) = self.set_at(meta >> InflatedRecord::SET_SHIFT) else {
                return false;
            };
            if !set.class().admits(&n, self.device(tid)) {
                return false;
            }
            // The word's other clocks (the set's cannot race with `n`): a
            // race with one is the locked path's to report, also when the
            // set holds this access already.
            let clean = || {
                (0..RECORD_ACCESS_SLOTS)
                    .map_while(|k| WordState::record_clock::<M::Atomics>(rec, k))
                    .all(|a| !self.conflicts(&a, &n, clocks.get(a.tid) >= a.epoch))
            };
            if set.entry(tid) >= epoch {
                // FastTrack's same epoch: the set holds this access already.
                return run() && clean();
            }
            if !RecordLock::open(seen) || !RecordLock::enter::<M::Atomics>(lock, seen) {
                M::Atomics::spin();
                continue;
            }
            // Inside, no locker holds the word: its clocks stay as read.
            let raised = run() && clean();
            if raised {
                set.raise(tid, epoch);
            }
            RecordLock::leave::<M::Atomics>(lock);
            return raised;
        }
    }

    /// [`Engine::atomic`] under the lock of the words it touches.
    fn atomic_locked(
        &self,
        tid: u32,
        addr: u64,
        size: u32,
        op: AtomicOp,
        site: &AccessSite,
        perform: impl FnOnce() -> bool,
    ) -> Outcome {
        let mut cur = CurrentAccess {
            address: addr,
            size,
            tid,
            num_sms: self.cfg.num_sms,
            kind: AccessKind::AtomicRead,
            scope: op.scope,
            site,
        };
        let clocks = self.clocks(tid);
        if let Err(ClockError::EpochOverflow(e)) | Err(ClockError::SnapshotGone(e)) =
            clocks.lock_exclusive_fresh(tid)
        {
            perform();
            return self.error_outcome(&cur, ReportKind::EpochOverflow, e, e);
        }
        let Some((first, last)) = self.word_span(addr, size) else {
            perform();
            clocks.unlock_exclusive();
            return Outcome::Clean;
        };
        let mut locked = self.lock_words([first, last]);
        let wrote = perform();
        let (kind, ordering) = match op.kind {
            AtomicOpKind::Load => (AccessKind::AtomicRead, op.ordering),
            AtomicOpKind::Store => (AccessKind::AtomicWrite, op.ordering),
            AtomicOpKind::Rmw => (AccessKind::AtomicRmw, op.ordering),
            AtomicOpKind::CompareExchange if wrote => (AccessKind::AtomicRmw, op.ordering),
            AtomicOpKind::CompareExchange => (AccessKind::AtomicRead, op.failure_ordering),
        };
        cur.kind = kind;
        let reads = kind != AccessKind::AtomicWrite;
        let writes = kind.writes();
        let mut error: Option<(ReportKind, u32)> = None;
        let mut acquired = [[false; RECORD_RELEASE_SLOTS + 1]; 2];
        let mut chain = [false; 2];
        let extent = |lw: &LockedWord| atomic_extent(size, self.byte_mask(addr, size, lw.word));

        // Acquire: join (or note as pending) the release heads read. Only
        // an atomic morally strong with the last write (scopes including
        // each other, the very same bytes) reads from its release sequence.
        for (w, lw) in locked.iter().enumerate() {
            let Some(lw) = lw else { continue };
            let st = &lw.state;
            let ext = extent(lw);
            chain[w] = matches!(st.last_atomic_write, Some(l)
                if l.extent == ext && self.mutual(l.tid, l.scope, tid, op.scope));
            if !reads || !chain[w] {
                continue;
            }
            for (k, h) in st.releases[..st.release_len].iter().enumerate() {
                if h.tid >= self.cfg.num_threads || !(h.wide || self.includes(h.scope, h.tid, tid))
                {
                    continue;
                }
                // A block-scope acquire synchronises with its own thread's
                // releases only, which its clock already contains (derived
                // heads of its own may carry others'). A wide head stands
                // for heads of any device and scope: it is acquired as if
                // it were of this thread's device.
                let now = ordering.acquires()
                    && op.scope != Scope::Block
                    && (h.wide || self.includes(op.scope, tid, h.tid));
                let level = if h.wide || self.device(h.tid) == self.device(tid) {
                    PendingLevel::Device
                } else {
                    PendingLevel::System
                };
                // A poller reading the same release again joined it already.
                if !clocks.acquired_before(h.tid, h.token, h.epoch, level, now) {
                    self.clocks(h.tid).read_release(h.token, h.epoch, |j, v| {
                        clocks.join_pending(level, j, v);
                        if now {
                            clocks.join_entry(j, v);
                        }
                    });
                    clocks.note_acquired(h.tid, h.token, h.epoch, level, now);
                }
                acquired[w][k] = now;
            }
        }

        // Check and record the access itself (after the acquire: it is
        // ordered after what it acquired).
        let epoch = clocks.get(tid);
        let mut race = None;
        let mut evictions = 0;
        for lw in locked.iter_mut().flatten() {
            let mask = self.byte_mask(addr, size, lw.word);
            let n = AccessClock {
                tid,
                epoch,
                mask,
                write: writes,
                atomic: true,
                scope: op.scope,
                extent: atomic_extent(size, mask),
            };
            let (prior, evicted) = self.record_access(&mut lw.state, n, &clocks);
            evictions += evicted as u32;
            if let (None, Some(p)) = (race, prior) {
                race = Some(cur.race(self.conflict_address(lw.word, &p, &n), epoch, &p, &n));
            }
        }

        // Release: continue, end or start release sequences.
        if writes {
            let own = if ordering.releases() && op.scope >= Scope::Device {
                Some(clocks.publish())
            } else {
                None
            };
            let (fence_device, fence_system) = clocks.fence_tokens();
            for (w, lw) in locked.iter_mut().enumerate() {
                let Some(lw) = lw else { continue };
                let ext = extent(lw);
                let st = &mut lw.state;
                let acq = &mut acquired[w];
                if !(kind == AccessKind::AtomicRmw && chain[w]) {
                    st.release_len = 0;
                }
                let mut heads = [None; 3];
                if fence_system.token != 0 {
                    heads[0] = Some((Scope::System, fence_system.token, fence_system.epoch));
                }
                if fence_device.token != 0 && fence_device != fence_system {
                    heads[1] = Some((Scope::Device, fence_device.token, fence_device.epoch));
                }
                if let Some(token) = own {
                    heads[2] = Some((op.scope, token, epoch));
                }
                for (i, (scope, token, epoch)) in heads.into_iter().flatten().enumerate() {
                    let n = ReleaseHead {
                        tid,
                        scope,
                        token,
                        epoch,
                        derived: false,
                        wide: false,
                    };
                    // Only the own release's snapshot postdates the acquire.
                    let after_acquire = own.is_some() && i + 1 == heads.iter().flatten().count();
                    self.add_head(st, acq, n, after_acquire, &clocks);
                }
                st.last_atomic_write = Some(LastAtomicWrite {
                    tid,
                    scope: op.scope,
                    extent: ext,
                });
            }
        }

        for _ in 0..evictions {
            self.pool().note_eviction();
        }
        if let Err(e) = self.unlock_words(locked) {
            error = error.or(Some((e, first as u32)));
        }
        clocks.unlock_exclusive();
        if let Some(r) = race {
            self.emit(r);
        }
        match (error, race) {
            (Some((k, d)), _) => self.error_outcome(&cur, k, epoch, d),
            (None, Some(r)) => Outcome::Race(r),
            (None, None) => Outcome::Clean,
        }
    }

    /// The class of a head: acquirers treat heads of one releasing device
    /// and one scope alike (the same inclusion and pending level), so such
    /// heads can be joined into one without changing any verdict.
    #[inline(always)]
    fn same_class(&self, a: &ReleaseHead, b: &ReleaseHead) -> bool {
        !a.wide && !b.wide && a.scope == b.scope && self.device(a.tid) == self.device(b.tid)
    }

    /// Adds release head `n` of thread `n.tid` (the caller, holding its
    /// write lock) to a word: drops the heads `n` contains (earlier plain
    /// releases of the same thread of at most its scope, and, when `n`'s
    /// snapshot was taken after this operation's acquire, heads of its class
    /// that were acquired); joins `n` with the head of its class (a derived
    /// snapshot in `n.tid`'s buffer); and when the word has more classes
    /// than slots, merges every head into one wide head (counted: an
    /// acquirer may then acquire more than it read, so races may be missed,
    /// never invented).
    fn add_head(
        &self,
        st: &mut WordState,
        acquired: &mut [bool; RECORD_RELEASE_SLOTS + 1],
        n: ReleaseHead,
        after_acquire: bool,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) {
        let plain_of_n = |h: &ReleaseHead| h.tid == n.tid && !h.derived && !h.wide;
        let mut k = 0;
        while k < st.release_len {
            let h = st.releases[k];
            if plain_of_n(&h) && h.token >= n.token && h.epoch >= n.epoch && h.scope >= n.scope {
                return; // already covered
            }
            let contained =
                (plain_of_n(&h) && n.token >= h.token && n.epoch >= h.epoch && h.scope <= n.scope)
                    || (after_acquire && acquired[k] && self.same_class(&h, &n));
            if contained {
                st.remove_release(k);
                let mut j = k;
                while j + 1 < acquired.len() {
                    acquired[j] = acquired[j + 1];
                    j += 1;
                }
                continue;
            }
            k += 1;
        }
        if let Some(k) = (0..st.release_len).find(|&k| self.same_class(&st.releases[k], &n)) {
            let h = st.releases[k];
            st.releases[k] = self.derive_head(n, &[h], false, clocks);
            return;
        }
        if st.release_len < RECORD_RELEASE_SLOTS {
            st.releases[st.release_len] = n;
            acquired[st.release_len] = false;
            st.release_len += 1;
            return;
        }
        let all = st.releases;
        let merged = self.derive_head(n, &all[..st.release_len], true, clocks);
        for _ in 0..st.release_len {
            self.pool().note_merge();
        }
        st.releases[0] = merged;
        st.release_len = 1;
        acquired[0] = false;
    }

    /// Publishes into `n.tid`'s clock buffer (the caller's, under its write
    /// lock) the join of what head `n` and `others` carry, and returns the
    /// head naming it.
    fn derive_head(
        &self,
        n: ReleaseHead,
        others: &[ReleaseHead],
        wide: bool,
        clocks: &ThreadClocks<'m, M::Atomics>,
    ) -> ReleaseHead {
        let token = clocks.begin_snapshot();
        for j in 0..self.cfg.num_threads {
            clocks.slot_store(token, j, 0);
        }
        clocks.read_release(n.token, n.epoch, |j, v| clocks.slot_max(token, j, v));
        let mut scope = n.scope;
        for h in others {
            if h.tid < self.cfg.num_threads {
                self.clocks(h.tid)
                    .read_release(h.token, h.epoch, |j, v| clocks.slot_max(token, j, v));
            }
            scope = scope.max(h.scope);
        }
        ReleaseHead {
            token,
            scope: if wide { Scope::System } else { scope },
            derived: true,
            wide: wide || others.iter().any(|h| h.wide),
            ..n
        }
    }

    /// A memory fence (`fence.<ordering>.<scope>`; `SeqCst` is `fence.sc`,
    /// what `membar`/`__threadfence` are) by thread `tid`. An acquire fence
    /// joins what earlier relaxed reads saw released; an SC fence also
    /// synchronises with earlier SC fences; a release fence publishes the
    /// clock so later atomic writes carry it.
    pub fn fence(&self, tid: u32, ordering: Ordering, scope: Scope) {
        if scope == Scope::Block || ordering == Ordering::Relaxed {
            return;
        }
        let clocks = self.clocks(tid);
        clocks.lock_exclusive();
        if ordering.acquires() {
            clocks.acquire_pending(PendingLevel::Device);
            if scope == Scope::System {
                clocks.acquire_pending(PendingLevel::System);
            }
        }
        if ordering == Ordering::SeqCst {
            self.sc_fence(tid, scope, &clocks);
        }
        if ordering.releases() {
            let this = FenceRelease {
                token: clocks.publish(),
                epoch: clocks.get(tid),
            };
            let (_, system) = clocks.fence_tokens();
            clocks.set_fence_tokens(this, if scope == Scope::System { this } else { system });
        }
        clocks.unlock_exclusive();
    }

    /// The SC-order part of `fence.sc`: SC fences are totally ordered (here:
    /// by who takes the accumulator locks first), and an earlier SC fence
    /// synchronises with a later one when their scopes include each other's
    /// threads. Accumulator `d` joins the clocks of SC fences on device `d`
    /// of device or system scope; the last one joins system-scope SC fences.
    /// A device-scope fence acquires its device's accumulator, a system-scope
    /// one also the system accumulator; then each publishes into the ones it
    /// belongs to. Lock order: thread state, device accumulator, system one.
    fn sc_fence(&self, tid: u32, scope: Scope, clocks: &ThreadClocks<'m, M::Atomics>) {
        let words = self.mem.sc_fence_clocks();
        let n = self.cfg.num_threads as usize;
        let devices = self.cfg.num_threads / self.cfg.num_sms.max(1);
        if words.len() < sc_fence_words(devices, self.cfg.num_threads) {
            return;
        }
        let stride = 1 + n;
        let dev = self.device(tid) as usize;
        let device_acc = &words[dev * stride..(dev + 1) * stride];
        let system_acc = &words[devices as usize * stride..(devices as usize + 1) * stride];
        let system = scope == Scope::System;
        SpinLock::lock::<M::Atomics>(&device_acc[0]);
        if system {
            SpinLock::lock::<M::Atomics>(&system_acc[0]);
        }
        for j in 0..n {
            clocks.join_entry(j as u32, device_acc[1 + j].load(MemOrder::Relaxed));
            if system {
                clocks.join_entry(j as u32, system_acc[1 + j].load(MemOrder::Relaxed));
            }
        }
        for j in 0..n {
            let v = clocks.get(j as u32);
            device_acc[1 + j].fetch_max(v, MemOrder::Relaxed);
            if system {
                system_acc[1 + j].fetch_max(v, MemOrder::Relaxed);
            }
        }
        if system {
            SpinLock::unlock::<M::Atomics>(&system_acc[0]);
        }
        SpinLock::unlock::<M::Atomics>(&device_acc[0]);
    }

    /// CTA entry of kernel `kernel_id` (counted from 1 per stream) on
    /// thread `tid`: joins the exit clocks of the stream's previous kernel
    /// from `ring` (3 slots of `num_threads` u32) and forgets fence state.
    pub fn kernel_entry(&self, tid: u32, ring: &[U32Of<M>], kernel_id: u32) {
        let clocks = self.clocks(tid);
        let n = self.cfg.num_threads as usize;
        clocks.lock_exclusive();
        clocks.reset_fence_state();
        if kernel_id > 0 {
            let slot = ((kernel_id - 1) % crate::abi::STREAM_RING_SLOTS) as usize;
            for j in 0..n {
                if j as u32 != tid {
                    clocks.join_entry(j as u32, ring[slot * n + j].load(MemOrder::Relaxed));
                }
            }
        }
        clocks.unlock_exclusive();
    }

    /// CTA exit of kernel `kernel_id` on thread `tid`: publishes the clock
    /// into the ring slot of this kernel (`red.max` per entry); the next
    /// access starts a new epoch.
    pub fn kernel_exit(&self, tid: u32, ring: &[U32Of<M>], kernel_id: u32) {
        let clocks = self.clocks(tid);
        let n = self.cfg.num_threads as usize;
        let slot = (kernel_id % crate::abi::STREAM_RING_SLOTS) as usize;
        clocks.lock_exclusive();
        for j in 0..n {
            ring[slot * n + j].fetch_max(clocks.get(j as u32), MemOrder::Relaxed);
        }
        clocks.mark_published();
        clocks.unlock_exclusive();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU32;

    /// The compact fast path (and its same-epoch case) and the general
    /// path agree on every compact state and plain access they both handle.
    #[test]
    fn compact_fast_path_matches_the_general_path() {
        const N: u32 = 3;
        let words = crate::abi::thread_state_words(N, 2);
        let ts: [AtomicU32; 3 * (crate::abi::ThreadStateHeader::WORDS + 6 * 3 + 4)] =
            core::array::from_fn(|_| AtomicU32::new(0));
        assert_eq!(ts.len(), words * N as usize);
        let mem = SliceMemory::<CoreAtomics> {
            thread_states: &ts,
            thread_state_words: words,
            shadow: &[],
            pool: &[],
            reports: &[],
            sc_fences: &[],
        };
        let cfg = EngineConfig {
            num_sms: 1,
            num_threads: N,
            clock_buffer_size: 2,
            rng_seed: 1,
            real_base: 0,
            chain_records_per_word: u32::MAX,
            spill_snapshots: true,
        };
        let e = Engine::new(&mem, cfg);
        for t in 0..N {
            e.init_thread(t);
        }
        // Thread 0 has seen thread 1 up to epoch 2 and thread 2 up to 0.
        let c0 = e.clocks(0);
        c0.lock_exclusive();
        c0.join_entry(1, 2);
        c0.unlock_exclusive();
        let clock = |i: u32, write: bool| {
            let mask = [0b0001, 0b0011, 0b1100, 0b1111, 0b0110][(i / 9 % 5) as usize];
            let atomic = i / 45 % 2 == 1;
            AccessClock {
                tid: i % 3,
                epoch: 1 + (i / 3) % 3,
                mask,
                write,
                atomic,
                scope: [Scope::Block, Scope::Device, Scope::System][(i / 90 % 3) as usize],
                extent: if atomic { mask } else { 0 },
            }
        };
        let (mut checked, mut same_epoch) = (0, 0);
        for wi in 0..271u32 {
            for ri in 0..271u32 {
                let mut st = WordState::EMPTY;
                if wi < 270 {
                    st.push(clock(wi, true));
                }
                if ri < 270 {
                    st.push(clock(ri, false));
                }
                let Some(cell) = st.to_compact() else {
                    continue;
                };
                for ni in 0..90u32 {
                    let mut n = clock(ni, ni % 2 == 0);
                    n.tid = 0;
                    n.epoch = 1;
                    n.atomic = false;
                    n.scope = Scope::Block;
                    n.extent = 0;
                    let mut general = WordState::from_compact(cell);
                    let (race, _) = e.record_access(&mut general, n, &c0);
                    if let Some(same_race) =
                        Engine::<SliceMemory<CoreAtomics>>::same_epoch(cell, &n, &c0)
                    {
                        // FastTrack's case: the cell stays, the verdict holds.
                        assert_eq!(general.to_compact(), Some(cell), "{cell:?} {n:?}");
                        assert_eq!(same_race, race, "state {cell:?} access {n:?}");
                        same_epoch += 1;
                    }
                    if let Some((fast, fast_race)) = e.plain_compact(cell, &n, &c0) {
                        assert_eq!(
                            Some(fast),
                            general.to_compact(),
                            "state {cell:?} access {n:?}"
                        );
                        assert_eq!(fast_race, race, "state {cell:?} access {n:?}");
                        checked += 1;
                    } else {
                        assert!(
                            general.to_compact().is_none(),
                            "fast path gave up on {cell:?} {n:?}"
                        );
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
        assert!(same_epoch > 1_000, "{same_epoch}");
    }
}
