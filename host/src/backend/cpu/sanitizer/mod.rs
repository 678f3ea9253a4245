//! The race sanitizer of the CPU backend: the happens-before engine of
//! `vigil-shared`, driven by the CPU executor's hooks, over shadow memory
//! in host memory. [`CpuRaceSanitizer`] implements both the per-thread
//! hooks ([`SanitizerRuntime`]) and the context's hook
//! ([`CpuSanitizer`](crate::CpuSanitizer)).
//!
//! # Design
//!
//! - **Memory** ([`CpuRaceSanitizer::alloc`]): sanitized buffers come from
//!   one `MAP_NORESERVE` reservation laid out as user memory, then its
//!   shadow (one 8-byte engine cell per 4-byte word, so a word's cell is
//!   `shadow_base + 8 * word`, the GPU's arithmetic) and a side table.
//!   The VMM's buddy tree hands out ranges; a free gives the pages back
//!   (`MADV_DONTNEED`), so the range's shadow and side table read as empty
//!   for the next buffer. Memory outside the arena is not checked.
//! - **Sanitizer threads.** The engine's unit is a sanitizer thread with a
//!   vector clock (an SM on the GPU). Here each block, when it starts,
//!   takes a *clock slot* out of [`CpuSanitizerConfig::threads`] (the next
//!   one round-robin over the whole context that no running block holds)
//!   and gives it back when it ends. Two running blocks never share a slot
//!   (the GPU's one-CTA-per-SM rule), and consecutive blocks, including
//!   those of consecutive kernels, get different slots whichever worker
//!   runs them, so verdicts do not depend on how the executor happened to
//!   spread blocks over its workers. A block that reuses a slot continues
//!   its clock: like two CTAs run one after the other on one GPU SM, it is
//!   ordered after the slot's earlier blocks, so races between blocks at
//!   least `threads` block starts apart can go unseen. A launch whose
//!   first block would take the slot the last launch's first block took
//!   starts one slot further, so the same block of two consecutive
//!   launches never shares a slot: before, every grid of a multiple of 64
//!   blocks put each block of the second launch on its twin's slot, which
//!   hid the simplest race between two streams (one grid launched on
//!   each, writing the same elements).
//! - **Kernels, streams, events, host synchronisation.** The context runs
//!   one operation at a time, so one ring of three clock slots (the
//!   engine's per-stream ring) serves every launch: at launch begin the
//!   clock the launch must acquire goes into the slot its CTAs join at
//!   entry (`Engine::kernel_entry`) and the exit slot is cleared; every CTA
//!   publishes into the exit slot at its end (`Engine::kernel_exit`). The
//!   host keeps, per stream, the clock of everything issued on it: at launch
//!   end it joins the launch's exit clock. An event record snapshots the
//!   recording stream's clock; a stream wait joins that snapshot into the
//!   waiting stream's clock (so its next launch acquires it). A host
//!   synchronisation joins what it waited for (every finished kernel, one
//!   stream's clock, or one event's) into a host clock that every later
//!   launch, on any stream, acquires. Kernels on unrelated streams are
//!   therefore unordered even though the CPU ran them one after the other.
//! - **Prior-access locations.** The engine keeps (thread, epoch) per
//!   access, not where it came from. A side table next to the shadow keeps,
//!   per word, the last two writes' and the last two reads'
//!   `&'static Location`, block, thread, virtual SM, clock slot and launch,
//!   of distinct clock slots of one launch (relaxed atomic stores after
//!   each hook; an access of a later launch replaces the newest entry). A
//!   race names the entry of the racing clock slot (the engine reports the
//!   first conflicting byte, so the entry is that of the right word): for a
//!   write the racing write is the last one of its slot (an earlier
//!   unordered write would have been reported first), for a read the
//!   slot's last read of the word, so a block's own read of a word does not
//!   hide the other block's read it races with. Block, thread, SM and
//!   kernel of the prior access are given only when the entry of the racing
//!   slot is found, and the kernel only for the last 2,048 launches. A
//!   report waits while the prior slot marks the word as in flight
//!   (`noting.rs`), even when an entry of that slot is there: the prior
//!   access writes its entry just after the engine recorded it, possibly on
//!   a worker the machine has descheduled in between, and the entry there
//!   meanwhile may be the slot's from an earlier launch (at most 200 ms;
//!   unmarked and missing, a short spin). An access notes its own entry
//!   and ends its mark *before* it reports: two accesses that race each
//!   other both report, and had each waited inside its own mark for the
//!   other's note, both would have waited the whole 200 ms and named a
//!   stale entry. The prior's entry as it was before the access's own note
//!   is kept for the report, in case that note replaced it (the same slot,
//!   or another launch's entry of the same kind).
//! - **Devices of a group** ([`CpuRaceSanitizer::group`], symmetric
//!   memory). N sanitizers share the engine's memory (arena, shadow, side
//!   table, thread states, pool, SC-fence clocks), the launch history and
//!   the host clocks; device `r` owns clock slots `r * threads` to
//!   `(r + 1) * threads - 1`, which makes `r` the engine's device of those
//!   threads (what [`Scope::Device`] includes). Each device keeps its own
//!   exit-clock ring, slot table, launch in progress, reports and
//!   block-race state, so each runs one launch at a time while different
//!   devices' launches run at once. What is said above of "the context"
//!   holds per device.
//! - **Reports** go to a bounded buffer
//!   ([`CpuSanitizerConfig::report_capacity`] records; more are counted as
//!   dropped, never a crash) and come back de-duplicated by kind and
//!   location pair as [`RaceReports`]. Records become reports through the
//!   decoder both backends share ([`crate::sanitizer::decode`]), with a
//!   resolver over host memory and the launch history (`resolve.rs`). In
//!   reports `smid` is the virtual SM (worker) that ran the access: the
//!   current access's from its worker, the prior access's from the side
//!   table entry it left (its `tid` is its clock slot, which names no SM;
//!   `smid` is `None` when the side table has no entry of that thread).

mod arena;
mod block;
mod noting;
mod resolve;

pub use arena::{Allocation, ArenaError};

use super::block_races::BlockRaces;
use super::executor::{CpuError, LaunchStats};
use super::hooks::{
    CpuSanitizer, CpuSanitizerParams, HostAllocation, HostBufferAllocator, HostSync, LaunchInfo,
    TransferInfo,
};
use crate::backend::transfer::TransferKind;
use crate::sanitizer::decode::{decode_report, unpack_access, PriorSite};
use crate::sanitizer::report::{MemorySpace, RaceReport, RaceReports};
use crate::types::{EventId, StreamId};
use arena::{Arena, SideEntry, ZeroedWords};
use block::BlockAccess;
use noting::{Noting, NotingSlots};
use resolve::CpuResolver;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering as MemOrder};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use vigil_device::host_runtime::{AtomicAccess, SanitizerRuntime, SharedAccess, ThreadContext};
use vigil_device::Dim3;
use vigil_shared::abi::{
    thread_state_words, AccessSite, InflatedRecord, PoolHeader, RaceReport as RawReport,
    ReportKind, STREAM_RING_SLOTS,
};
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::engine::{sc_fence_words, Engine, EngineConfig, EngineMemory, Outcome};
use vigil_shared::{AccessKind, Ordering, Scope};

/// Bytes of a host-issued copy checked as one access: a racy copy gives
/// one report per chunk (de-duplicated into one), and the shadow of a
/// chunk after a race is still updated.
const TRANSFER_CHUNK: u64 = 64 << 10;

/// The `smid` a copy's or fill's accesses are reported with (it runs on
/// the host, not on a virtual SM).
const TRANSFER_SM: u32 = 0;

/// Launches whose shapes and names the sanitizer remembers (for naming
/// the kernel, block and thread of a prior access).
const LAUNCH_HISTORY: usize = 2048;

/// Polls of a word's side-table entry, when a race is reported, waiting
/// for the prior access's entry to appear when its slot's mark does not
/// say (see the module docs).
const SIDE_TABLE_WAIT_POLLS: u32 = 1 << 14;

/// The longest a report waits for a prior entry its slot is still noting
/// (two workers each reporting the other's access in flight, on different
/// words, would otherwise wait for each other).
const SIDE_TABLE_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Settings of a [`CpuRaceSanitizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSanitizerConfig {
    /// Bytes of sanitized memory the arena can hand out (a power of two).
    pub capacity: u64,
    /// Smallest buffer block (a power of two; buffers are aligned to it).
    pub min_block: u64,
    /// Clock slots (sanitizer threads), at most 2,047 and at least the
    /// executor's worker count. See the module docs.
    pub threads: u32,
    /// Snapshots in each clock slot's clock buffer.
    pub clock_buffer_size: u32,
    /// Inflated shadow records (128 bytes each, committed when used).
    pub pool_records: u32,
    /// Race records kept between collections; more are counted, not kept.
    pub report_capacity: usize,
    /// Seed of the engine's random evictions.
    pub seed: u32,
    /// Stop a launch at its first race (see [`CpuRaceSanitizer::take_halt`]).
    pub halt_on_error: bool,
}

impl Default for CpuSanitizerConfig {
    fn default() -> Self {
        CpuSanitizerConfig {
            capacity: 16 << 30,
            min_block: 64 << 10,
            threads: 64,
            clock_buffer_size: 32,
            pool_records: 1 << 22,
            report_capacity: 1024,
            seed: 0x5eed,
            halt_on_error: false,
        }
    }
}

impl CpuSanitizerConfig {
    /// The settings a context's parameters ask for: the VMM configuration's
    /// seed, clock-buffer size and pool size, and at least one clock slot
    /// per virtual SM.
    pub fn from_params(p: &CpuSanitizerParams) -> Self {
        let d = CpuSanitizerConfig::default();
        CpuSanitizerConfig {
            threads: d.threads.max(p.num_virtual_sms).min(2047),
            clock_buffer_size: p.config.clock_buffer_size(),
            pool_records: p.config.shadow_pool_records().max(1 << 16),
            seed: p.config.seed(),
            halt_on_error: p.config.halt_on_error(),
            ..d
        }
    }
}

/// Why a [`CpuRaceSanitizer`] could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CpuSanitizerError {
    /// A setting out of range.
    #[error("CPU sanitizer setting `{name}` = {value} is invalid: expected {accepted}")]
    Config {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: u64,
        /// What is accepted.
        accepted: &'static str,
    },
    /// Memory could not be reserved or allocated.
    #[error(transparent)]
    Arena(#[from] ArenaError),
}

/// The engine's memory: thread states, the arena's shadow, the pool and
/// the SC-fence clocks. Reports do not go through the engine's buffer (the
/// hooks collect them with their source locations instead).
struct Memory {
    arena: Arena,
    thread_states: Box<[AtomicU32]>,
    thread_state_words: usize,
    pool: ZeroedWords,
    sc_fences: Box<[AtomicU32]>,
}

impl EngineMemory for Memory {
    type Atomics = CoreAtomics;
    #[inline(always)]
    fn thread_state(&self, tid: u32) -> &[AtomicU32] {
        let at = tid as usize * self.thread_state_words;
        &self.thread_states[at..at + self.thread_state_words]
    }
    #[inline(always)]
    fn shadow_cell(&self, word: u64) -> Option<&AtomicU64> {
        self.arena.shadow_cell(word)
    }
    #[inline(always)]
    fn pool(&self) -> &[AtomicU32] {
        &self.pool
    }
    #[inline(always)]
    fn reports(&self) -> &[AtomicU32] {
        &[]
    }
    #[inline(always)]
    fn sc_fence_clocks(&self) -> &[AtomicU32] {
        &self.sc_fences
    }
}

fn zeroed(n: usize) -> Box<[AtomicU32]> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

/// What the sanitizer remembers of a launch.
#[derive(Clone, Debug)]
struct LaunchRecord {
    kernel: String,
    grid: crate::Dim3,
    block: crate::Dim3,
    /// A host-issued copy or fill, not a kernel.
    host_issued: bool,
}

impl Default for LaunchRecord {
    fn default() -> Self {
        LaunchRecord {
            kernel: String::new(),
            grid: crate::Dim3::new(1, 1, 1),
            block: crate::Dim3::new(1, 1, 1),
            host_issued: false,
        }
    }
}

/// Host-side clocks (see the module docs), changed only between launches
/// of a device. Shared by the devices of a group: stream and event ids are
/// unique in the process, and the host clock is the host program's (a
/// synchronisation with one device orders later launches on every device).
#[derive(Default)]
struct HostClocks {
    /// Per stream: the clock of everything issued on it.
    streams: HashMap<StreamId, Vec<u32>>,
    /// Per event: the clock its last record captured.
    events: HashMap<EventId, Vec<u32>>,
    /// Per device rank: the exit clocks of its finished kernels, joined.
    finished: Vec<Vec<u32>>,
    /// What every later launch acquires (host synchronisation).
    host: Vec<u32>,
    /// Per device rank: the stream of its launch in progress.
    current: Vec<Option<StreamId>>,
}

/// The CPU backend's race sanitizer of one (simulated) device. See the
/// [module docs](self). The members of a group
/// ([`CpuRaceSanitizer::group`]) share the engine's memory (shadow, thread
/// states, pool), the launch history and the host clocks; the rest is the
/// device's own.
pub struct CpuRaceSanitizer {
    mem: Arc<Memory>,
    cfg: EngineConfig,
    /// This device's rank in its group (0 alone).
    rank: u32,
    /// The first clock slot of this device (`rank * cfg.num_sms`).
    first_slot: u32,
    /// The group's launch counter: engine kernel ids, unique in the group.
    launch_counter: Arc<AtomicU32>,
    /// Clock slots of this device held by a running block (by slot minus
    /// `first_slot`).
    busy: Box<[AtomicBool]>,
    /// The next slot to try.
    next_slot: AtomicU32,
    /// `next_slot` when the last launch began.
    launch_base: AtomicU32,
    /// The clock slot of the block each virtual SM runs, by `smid`.
    slot_of_sm: Box<[AtomicU32]>,
    /// The engine's ring of kernel exit clocks (3 slots).
    ring: Box<[AtomicU32]>,
    /// The engine kernel id of this device's launch in progress.
    kernel_id: AtomicU32,
    launches: Arc<Mutex<Vec<LaunchRecord>>>,
    host: Arc<Mutex<HostClocks>>,
    reports: Mutex<Vec<RaceReport>>,
    report_capacity: usize,
    dropped: AtomicUsize,
    halt_on_error: bool,
    /// A kernel hook stopped the launch in progress at a race.
    halted: AtomicBool,
    /// Races between threads of one block, per virtual SM.
    block: BlockRaces,
    /// The group's slots' accesses between the engine and the side table.
    noting: Arc<NotingSlots>,
}

impl std::fmt::Debug for CpuRaceSanitizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuRaceSanitizer")
            .field("threads", &self.cfg.num_threads)
            .field("live_buffers", &self.mem.arena.live_count())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `a = max(a, b)` entry by entry.
fn join(a: &mut [u32], b: &[u32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// Linear index of `i` in `extent`, x fastest.
fn linear(i: Dim3, extent: Dim3) -> u64 {
    u64::from(i.x) + u64::from(extent.x) * (u64::from(i.y) + u64::from(extent.y) * u64::from(i.z))
}

impl CpuRaceSanitizer {
    /// A sanitizer with the default settings.
    pub fn new() -> Result<Self, CpuSanitizerError> {
        Self::with_config(&CpuSanitizerConfig::default())
    }

    /// A sanitizer with the given settings.
    pub fn with_config(c: &CpuSanitizerConfig) -> Result<Self, CpuSanitizerError> {
        let mut one = Self::group(c, 1)?;
        Ok(one.remove(0))
    }

    /// The sanitizers of `world` simulated devices that share one engine
    /// (docs/src/design/groups.md): one shadow, so an access by device 0 to device 1's
    /// buffer is checked against device 1's kernels' accesses, and one
    /// thread-id space, where device `r`'s clock slots are
    /// `r * threads .. (r + 1) * threads` (the engine's device of a thread,
    /// which decides what a [`Scope::Device`] atomic or fence orders). A
    /// buffer allocated through any of them is in the shared arena. Each
    /// device runs one launch at a time; launches of different devices may
    /// run at once (from different host threads).
    pub fn group(
        c: &CpuSanitizerConfig,
        world: u32,
    ) -> Result<Vec<CpuRaceSanitizer>, CpuSanitizerError> {
        let bad = |name, value: u64, accepted| CpuSanitizerError::Config {
            name,
            value,
            accepted,
        };
        if !(1..2048).contains(&c.threads) {
            return Err(bad("threads", c.threads.into(), "1..=2047"));
        }
        let total = u64::from(c.threads) * u64::from(world);
        if world == 0 || total >= 2048 {
            return Err(bad(
                "threads * devices",
                total,
                "1..=2047 clock slots over the group's devices",
            ));
        }
        if !(1..=4096).contains(&c.clock_buffer_size) {
            return Err(bad(
                "clock_buffer_size",
                c.clock_buffer_size.into(),
                "1..=4096",
            ));
        }
        if !c.capacity.is_power_of_two() || c.capacity < c.min_block {
            return Err(bad(
                "capacity",
                c.capacity,
                "a power of two, at least min_block",
            ));
        }
        let arena = Arena::new(c.capacity, c.min_block)?;
        let slots = c.threads;
        let n = slots * world;
        let words = thread_state_words(n, c.clock_buffer_size);
        let pool =
            ZeroedWords::new(PoolHeader::WORDS + c.pool_records as usize * InflatedRecord::WORDS)?;
        pool[1].store(c.pool_records, MemOrder::Relaxed);
        let cfg = EngineConfig {
            num_sms: slots,
            num_threads: n,
            clock_buffer_size: c.clock_buffer_size,
            rng_seed: c.seed,
            real_base: arena.real_base(),
            chain_records_per_word: u32::MAX,
            spill_snapshots: true,
        };
        let mem = Arc::new(Memory {
            arena,
            thread_states: zeroed(words * n as usize),
            thread_state_words: words,
            pool,
            sc_fences: zeroed(sc_fence_words(world, n)),
        });
        let engine = Engine::new(&*mem, cfg);
        for tid in 0..n {
            engine.init_thread(tid);
        }
        let launches = Arc::new(Mutex::new(vec![LaunchRecord::default(); LAUNCH_HISTORY]));
        let host = Arc::new(Mutex::new(HostClocks {
            finished: vec![vec![0; n as usize]; world as usize],
            host: vec![0; n as usize],
            current: vec![None; world as usize],
            ..HostClocks::default()
        }));
        let launch_counter = Arc::new(AtomicU32::new(0));
        let noting = Arc::new(NotingSlots::new(n as usize));
        Ok((0..world)
            .map(|rank| CpuRaceSanitizer {
                mem: Arc::clone(&mem),
                cfg,
                rank,
                first_slot: rank * slots,
                launch_counter: Arc::clone(&launch_counter),
                busy: (0..slots).map(|_| AtomicBool::new(false)).collect(),
                next_slot: AtomicU32::new(0),
                launch_base: AtomicU32::new(0),
                slot_of_sm: zeroed(slots as usize),
                ring: zeroed(STREAM_RING_SLOTS as usize * n as usize),
                kernel_id: AtomicU32::new(0),
                launches: Arc::clone(&launches),
                host: Arc::clone(&host),
                reports: Mutex::new(Vec::new()),
                report_capacity: c.report_capacity,
                dropped: AtomicUsize::new(0),
                halt_on_error: c.halt_on_error,
                halted: AtomicBool::new(false),
                block: BlockRaces::new(slots as usize),
                noting: Arc::clone(&noting),
            })
            .collect())
    }

    #[inline(always)]
    fn engine(&self) -> Engine<'_, Memory> {
        Engine::new(&*self.mem, self.cfg)
    }

    /// Clock slots (sanitizer threads) of this device.
    pub fn threads(&self) -> u32 {
        self.cfg.num_sms
    }

    /// This device's rank in its group (0 for a sanitizer of its own).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The device rank of clock slot `tid`.
    fn device_of(&self, tid: u32) -> u32 {
        tid / self.cfg.num_sms.max(1)
    }

    /// Allocates a sanitized buffer of `size` bytes (zeroed, empty shadow).
    pub fn alloc(&self, size: u64) -> Result<Allocation, ArenaError> {
        self.mem.arena.alloc(size)
    }

    /// Frees a buffer from [`CpuRaceSanitizer::alloc`] by its address; its
    /// memory, shadow and side-table entries are reset.
    ///
    /// # Safety
    /// No kernel may be running on the buffer, and nothing may use its
    /// memory afterwards.
    pub unsafe fn free(&self, address: u64) -> Result<(), ArenaError> {
        // Its pool records go back first (`vigil_shared::reclaim`): the
        // shadow is discarded below, and a long-lived context would fill
        // its pool with dead buffers' records. A pool never used has none.
        if let Some(a) = self.allocation_of(address).filter(|a| a.address == address) {
            if self.mem.pool[PoolHeader::NEXT_WORD].load(MemOrder::Relaxed) != 0 {
                self.engine().reclaim_range(a.address, a.size);
            }
        }
        self.mem.arena.free(address)
    }

    /// The live buffer containing `address`, if any.
    pub fn allocation_of(&self, address: u64) -> Option<Allocation> {
        self.mem.arena.allocation_of(address)
    }

    /// Starts a launch of `kernel` (grid and block shape) on `stream`:
    /// call before `CpuExecutor::launch` (with `self` as the runtime) and
    /// [`CpuRaceSanitizer::end_launch`] after it. Launches must not
    /// overlap.
    pub fn begin_launch(
        &self,
        stream: StreamId,
        kernel: &str,
        grid: crate::Dim3,
        block: crate::Dim3,
    ) {
        self.shift_launch_base();
        let n = self.cfg.num_threads as usize;
        let k = self.launch_counter.fetch_add(1, MemOrder::Relaxed) + 1;
        self.kernel_id.store(k, MemOrder::Relaxed);
        lock(&self.launches)[k as usize % LAUNCH_HISTORY] = LaunchRecord {
            kernel: kernel.to_owned(),
            grid,
            block,
            host_issued: false,
        };
        let mut h = lock(&self.host);
        let host = h.host.clone();
        let clock = h.streams.entry(stream).or_insert_with(|| vec![0; n]);
        join(clock, &host);
        let entry = ((k - 1) % STREAM_RING_SLOTS) as usize;
        let exit = (k % STREAM_RING_SLOTS) as usize;
        for (j, v) in clock.iter().enumerate() {
            self.ring[entry * n + j].store(*v, MemOrder::Relaxed);
            self.ring[exit * n + j].store(0, MemOrder::Relaxed);
        }
        h.current[self.rank as usize] = Some(stream);
    }

    /// Starts a launch's blocks one slot further when they would start on
    /// the slot the last launch's started on: block `k` of two consecutive
    /// launches then never shares a slot (a grid of a multiple of the slot
    /// count would otherwise put each block on its twin's slot, ordered
    /// after it).
    fn shift_launch_base(&self) {
        let n = self.cfg.num_sms;
        let mut start = self.next_slot.load(MemOrder::Relaxed);
        if start % n == self.launch_base.load(MemOrder::Relaxed) % n {
            start = start.wrapping_add(1);
            self.next_slot.store(start, MemOrder::Relaxed);
        }
        self.launch_base.store(start, MemOrder::Relaxed);
    }

    /// Ends the launch begun last: its exit clock becomes part of its
    /// stream's clock. Call also after a failed launch.
    pub fn end_launch(&self) {
        let n = self.cfg.num_threads as usize;
        let exit = (self.kernel_id.load(MemOrder::Relaxed) % STREAM_RING_SLOTS) as usize;
        let clock: Vec<u32> = (0..n)
            .map(|j| self.ring[exit * n + j].load(MemOrder::Relaxed))
            .collect();
        let mut h = lock(&self.host);
        let rank = self.rank as usize;
        join(&mut h.finished[rank], &clock);
        if let Some(s) = h.current[rank].take() {
            join(h.streams.entry(s).or_insert_with(|| vec![0; n]), &clock);
        }
    }

    /// Records `event` at the current end of `stream`.
    pub fn record_event(&self, event: EventId, stream: StreamId) {
        let mut h = lock(&self.host);
        let clock = h
            .streams
            .get(&stream)
            .cloned()
            .unwrap_or_else(|| h.host.clone());
        h.events.insert(event, clock);
    }

    /// Orders `stream`'s later launches after `event`'s last record.
    pub fn wait_event(&self, stream: StreamId, event: EventId) {
        let n = self.cfg.num_threads as usize;
        let mut h = lock(&self.host);
        if let Some(ev) = h.events.get(&event).cloned() {
            join(h.streams.entry(stream).or_insert_with(|| vec![0; n]), &ev);
        }
    }

    /// The host waited for `sync`: every later launch is ordered after
    /// what it waited for.
    pub fn host_sync(&self, sync: HostSync) {
        let mut h = lock(&self.host);
        let waited = match sync {
            HostSync::Context => Some(h.finished[self.rank as usize].clone()),
            HostSync::Stream(s) => h.streams.get(&s).cloned(),
            HostSync::Event(e) => h.events.get(&e).cloned(),
        };
        if let Some(w) = waited {
            join(&mut h.host, &w);
        }
    }

    /// Takes the reports found since the last call, de-duplicated.
    pub fn take(&self) -> RaceReports {
        let raw = std::mem::take(&mut *lock(&self.reports));
        let mut out: RaceReports = raw.into_iter().collect();
        out.add_dropped(self.dropped.swap(0, MemOrder::Relaxed) as u64);
        out.add_history_lost(self.take_history_lost());
        out
    }

    /// Takes the pool header's precision-loss counts since the last call
    /// ([`PoolHeader::history_lost`]), clearing them (a group's devices
    /// share one pool: each count goes to the device that takes it first).
    fn take_history_lost(&self) -> u64 {
        let pool = &self.mem.pool;
        let mut header = PoolHeader::default();
        let counters: &mut [u32] = bytemuck::cast_slice_mut(std::slice::from_mut(&mut header));
        for w in PoolHeader::LOST_HISTORY_BYTES.step_by(4).map(|b| b / 4) {
            counters[w] = pool[w].swap(0, MemOrder::Relaxed);
        }
        header.history_lost()
    }

    /// Takes a free clock slot of this device, preferring the next one
    /// round-robin.
    fn claim_slot(&self) -> u32 {
        let n = self.cfg.num_sms;
        loop {
            let start = self.next_slot.fetch_add(1, MemOrder::Relaxed);
            for i in 0..n {
                let s = start.wrapping_add(i) % n;
                if !self.busy[s as usize].swap(true, MemOrder::Acquire) {
                    return self.first_slot + s;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Gives back a slot from [`CpuRaceSanitizer::claim_slot`].
    fn release_slot(&self, slot: u32) {
        self.busy[(slot - self.first_slot) as usize].store(false, MemOrder::Release);
    }

    /// The clock slot of the block running on `smid`.
    #[inline(always)]
    fn slot(&self, smid: u32) -> u32 {
        self.slot_of_sm[smid as usize].load(MemOrder::Relaxed)
    }

    #[inline(always)]
    fn site(&self, t: &ThreadContext<'_>, loc: &'static Location<'static>) -> AccessSite {
        AccessSite {
            file_ptr: loc.file().as_ptr() as u64,
            file_len: loc.file().len() as u32,
            line: loc.line(),
            col: loc.column(),
            view_site: 0,
            kernel_id: self.kernel_id.load(MemOrder::Relaxed),
            block: linear(t.block_idx, t.grid_dim) as u32,
            thread: t.linear_thread_index(),
            prior_view_site: 0,
        }
    }

    /// Marks slot `tid` as noting the words of the `size` bytes at `addr`
    /// (inside the arena) until the guard drops: call it before the
    /// engine sees the access, and drop the guard after [`Self::note`].
    #[inline(always)]
    fn mark_in_flight(&self, tid: u32, addr: u64, size: usize) -> Noting<'_> {
        let base = self.cfg.real_base;
        if addr < base || size == 0 {
            return Noting::unmarked();
        }
        let (first, last) = ((addr - base) / 4, (addr - base + size as u64 - 1) / 4);
        self.noting.begin(tid, first, last)
    }

    /// Records the access in the side table (after the engine saw it).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn note(
        &self,
        site: &AccessSite,
        smid: u32,
        tid: u32,
        addr: usize,
        size: usize,
        write: bool,
        loc: &'static Location<'static>,
    ) {
        let base = self.cfg.real_base;
        let addr = addr as u64;
        if addr < base || size == 0 {
            return;
        }
        let entry = SideEntry {
            loc: loc as *const Location<'static> as u64,
            smid: smid as u16,
            block: site.block,
            thread: site.thread as u16,
            tid: tid as u16,
            launch: (site.kernel_id as usize % LAUNCH_HISTORY) as u16,
        };
        let (first, last) = ((addr - base) / 4, (addr - base + size as u64 - 1) / 4);
        for word in first..=last {
            self.mem.arena.note_access(word, write, entry);
        }
    }

    /// Turns an engine record into a report (through the shared decoder)
    /// and stores it, or counts it; `smid` is the virtual SM the reporting
    /// access ran on.
    #[cold]
    #[inline(never)]
    fn report(&self, r: &RawReport, smid: u32, before_note: Option<SideEntry>) {
        if lock(&self.reports).len() >= self.report_capacity {
            self.dropped.fetch_add(1, MemOrder::Relaxed);
            return;
        }
        let side = match self.side_word(r) {
            None => None,
            // This access's own note replaced its slot's entry.
            Some(_) if r.prior_tid == r.tid => before_note,
            Some(word) => self.wait_for_prior_entry(r, word, before_note),
        };
        let prior = side.map(|e| PriorSite {
            location: e.loc,
            tid: u32::from(e.tid),
            block: e.block,
            thread: u32::from(e.thread),
            launch: u32::from(e.launch),
            sm: Some(u32::from(e.smid)),
        });
        let launches = lock(&self.launches);
        let resolver = CpuResolver {
            sanitizer: self,
            launches: &launches,
            current: (r.tid, smid),
        };
        let report = decode_report(r, prior.as_ref(), &resolver);
        drop(launches);
        let mut reports = lock(&self.reports);
        match report {
            Some(report) if reports.len() < self.report_capacity => reports.push(report),
            _ => {
                self.dropped.fetch_add(1, MemOrder::Relaxed);
            }
        }
    }

    /// The side-table word of a race record's address; `None` for an error
    /// record or an address outside the arena.
    fn side_word(&self, r: &RawReport) -> Option<u64> {
        let is_error = r.report_kind().is_none_or(ReportKind::is_error);
        let base = self.cfg.real_base;
        (r.address >= base && !is_error).then(|| (r.address - base) / 4)
    }

    /// The side entry of `word` for `r`'s prior access: its slot's newest
    /// of the prior's kind, else the newest of any slot.
    fn prior_entry(&self, r: &RawReport, word: u64) -> Option<SideEntry> {
        let (prior_access, _) = unpack_access(r.prior_access);
        self.mem
            .arena
            .last_access(word, prior_access.writes(), r.prior_tid)
    }

    /// The prior access's side entry of `word` for a report of another
    /// slot's access, which has noted its own entry already; `before_note`
    /// is the prior slot's entry as it was before that note.
    fn wait_for_prior_entry(
        &self,
        r: &RawReport,
        word: u64,
        before_note: Option<SideEntry>,
    ) -> Option<SideEntry> {
        let of_prior = |e: &SideEntry| u32::from(e.tid) == r.prior_tid;
        // The prior access notes the side table just after the engine
        // recorded it: when it runs on another worker, its entry may still
        // be on its way. While its slot says it is noting this word, wait,
        // even when an entry of that slot is there already: clock slots go
        // from block to block, so that entry may be the slot's from an
        // earlier launch (a stress run named a blocking copy as the prior
        // of a kernel write this way). Unmarked, look a few times. No wait
        // is inside a mark, so two accesses reporting each other never wait
        // for each other.
        let started = std::time::Instant::now();
        let mut polls = 0u32;
        let side = loop {
            let in_flight = self.noting.covers(r.prior_tid, word);
            if in_flight && started.elapsed() <= SIDE_TABLE_WAIT_LIMIT {
                std::thread::yield_now();
                continue;
            }
            let side = self.prior_entry(r, word);
            if side.as_ref().is_some_and(of_prior) || in_flight || polls >= SIDE_TABLE_WAIT_POLLS {
                break side;
            }
            polls += 1;
            std::hint::spin_loop();
        };
        match side {
            Some(e) if of_prior(&e) => Some(e),
            // This access's note may have pushed the prior's entry out;
            // failing that, the newest other slot's entry (never this
            // access's own), as it is now or was before the note.
            _ => before_note
                .filter(of_prior)
                .or(side.filter(|e| u32::from(e.tid) != r.tid))
                .or(before_note),
        }
    }

    /// Ends an access the engine has checked, in the order its report
    /// relies on (see the module docs): when `out` is a race, the prior
    /// access's side entry as it is now ([`Self::prior_entry`]), which the
    /// access's own note may replace; then that note (`note`); then the end
    /// of its in-flight mark. Returns the race record with that entry, to
    /// report afterwards.
    #[inline(always)]
    fn note_before_report(
        &self,
        noting: Noting<'_>,
        out: Outcome,
        note: impl FnOnce(),
    ) -> Option<(RawReport, Option<SideEntry>)> {
        let race = match out {
            Outcome::Race(r) | Outcome::Error(r) => {
                let before = self
                    .side_word(&r)
                    .and_then(|word| self.prior_entry(&r, word));
                Some((r, before))
            }
            _ => None,
        };
        note();
        drop(noting);
        race
    }

    /// Reports a race [`Self::note_before_report`] returned (after the access noted its
    /// own entry) and halts if so configured.
    #[inline(always)]
    fn outcome(&self, t: &ThreadContext<'_>, race: Option<(RawReport, Option<SideEntry>)>) {
        if let Some((r, before)) = race {
            self.report(&r, t.smid, before);
            if self.halt_on_error {
                self.halt();
            }
        }
    }

    /// Stops the launch in progress: unwinds the racing thread's block
    /// (the executor starts no further block), flagged so that the
    /// backend ends the launch without an error ([`CpuRaceSanitizer::take_halt`]).
    #[cold]
    #[inline(never)]
    fn halt(&self) -> ! {
        self.halted.store(true, MemOrder::Relaxed);
        panic!("vigil: the sanitizer stopped the launch at its first race (halt on error)");
    }

    /// True once after a launch that a race stopped (halt on error).
    pub fn take_halt(&self) -> bool {
        self.halted.swap(false, MemOrder::Relaxed)
    }

    /// Checks a host-issued copy or fill as accesses of `stream`: a
    /// one-thread "launch" named after the transfer (`host-to-device copy
    /// on stream #2`), ordered on its stream like a kernel, reading and
    /// writing the device ranges at `caller`. Races are reported, never
    /// halted on (the host thread is not a kernel thread to unwind).
    pub fn transfer(
        &self,
        stream: StreamId,
        kind: TransferKind,
        reads: Option<(u64, u64)>,
        writes: Option<(u64, u64)>,
        caller: &'static Location<'static>,
    ) {
        let one = crate::Dim3::new(1, 1, 1);
        self.begin_launch(stream, &kind.on_stream(stream), one, one);
        let k = self.kernel_id.load(MemOrder::Relaxed);
        lock(&self.launches)[k as usize % LAUNCH_HISTORY].host_issued = true;
        let slot = self.claim_slot();
        self.engine().kernel_entry(slot, &self.ring, k);
        let site = AccessSite {
            file_ptr: caller.file().as_ptr() as u64,
            file_len: caller.file().len() as u32,
            line: caller.line(),
            col: caller.column(),
            kernel_id: k,
            ..AccessSite::default()
        };
        let ranges = reads.map(|r| (r, false)).into_iter();
        for ((addr, bytes), write) in ranges.chain(writes.map(|w| (w, true))) {
            let end = addr.saturating_add(bytes);
            let mut at = addr;
            while at < end {
                let size = (end - at).min(TRANSFER_CHUNK) as usize;
                let noting = self.mark_in_flight(slot, at, size);
                let out = self.engine().access(slot, at, size as u32, write, &site);
                let race = self.note_before_report(noting, out, || {
                    self.note(&site, TRANSFER_SM, slot, at as usize, size, write, caller)
                });
                if let Some((r, before)) = race {
                    self.report(&r, TRANSFER_SM, before);
                }
                at += size as u64;
            }
        }
        self.engine().kernel_exit(slot, &self.ring, k);
        self.release_slot(slot);
        self.end_launch();
    }
}

impl CpuRaceSanitizer {
    /// The block-level check of a global access inside the arena (memory
    /// outside it is not checked, as for the engine).
    #[inline(always)]
    fn check_global_in_block(
        &self,
        t: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        scope: Scope,
        loc: &'static Location<'static>,
    ) {
        if (addr as u64) < self.cfg.real_base {
            return;
        }
        let a = BlockAccess {
            addr: addr as u64,
            size: size as u64,
            kind,
            scope,
            space: MemorySpace::Global,
            array: None,
            view: None,
        };
        self.check_in_block(t, a, loc);
    }
}

impl SanitizerRuntime for CpuRaceSanitizer {
    fn block_start(&self, smid: u32, _block_idx: Dim3) {
        assert!(
            (smid as usize) < self.slot_of_sm.len(),
            "vigil: the CPU sanitizer has {} clock slots, fewer than the executor's virtual SMs; \
             configure at least one slot per worker",
            self.slot_of_sm.len()
        );
        let slot = self.claim_slot();
        self.slot_of_sm[smid as usize].store(slot, MemOrder::Relaxed);
        let k = self.kernel_id.load(MemOrder::Relaxed);
        self.engine().kernel_entry(slot, &self.ring, k);
        self.block.block_start(smid);
    }

    fn block_end(&self, smid: u32, _block_idx: Dim3) {
        let slot = self.slot(smid);
        let k = self.kernel_id.load(MemOrder::Relaxed);
        self.engine().kernel_exit(slot, &self.ring, k);
        self.release_slot(slot);
    }

    fn access(
        &self,
        t: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        let tid = self.slot(t.smid);
        let site = self.site(t, loc);
        let write = kind.writes();
        let noting = self.mark_in_flight(tid, addr as u64, size);
        let out = self
            .engine()
            .access(tid, addr as u64, size as u32, write, &site);
        let race = self.note_before_report(noting, out, || {
            self.note(&site, t.smid, tid, addr, size, write, loc)
        });
        self.outcome(t, race);
        self.check_global_in_block(t, addr, size, kind, Scope::Block, loc);
    }

    fn atomic(
        &self,
        t: &ThreadContext<'_>,
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    ) {
        let tid = self.slot(t.smid);
        let site = self.site(t, loc);
        let mut wrote = false;
        let noting = self.mark_in_flight(tid, access.addr as u64, access.size);
        let out = self.engine().atomic(
            tid,
            access.addr as u64,
            access.size as u32,
            access.engine_op(),
            &site,
            || {
                wrote = op();
                wrote
            },
        );
        let race = self.note_before_report(noting, out, || {
            self.note(&site, t.smid, tid, access.addr, access.size, wrote, loc)
        });
        self.outcome(t, race);
        self.check_global_in_block(t, access.addr, access.size, access.kind, access.scope, loc);
        if access.ordering.acquires() {
            self.block.acquire(t.smid, t.linear_thread_index());
        }
    }

    fn fence(
        &self,
        t: &ThreadContext<'_>,
        ordering: Ordering,
        scope: Scope,
        _loc: &'static Location<'static>,
    ) {
        self.engine().fence(self.slot(t.smid), ordering, scope);
        if ordering.acquires() {
            self.block.acquire(t.smid, t.linear_thread_index());
        }
    }

    fn shared_access(
        &self,
        t: &ThreadContext<'_>,
        access: SharedAccess,
        loc: &'static Location<'static>,
    ) {
        let a = BlockAccess {
            addr: access.addr as u64,
            size: access.size as u64,
            kind: access.kind,
            scope: Scope::Block,
            space: MemorySpace::Shared,
            array: Some((access.array as u64, access.array_bytes as u64)),
            view: access.site,
        };
        self.check_in_block(t, a, loc);
    }

    fn barrier(&self, t: &ThreadContext<'_>, _loc: &'static Location<'static>) {
        self.block.barrier(t.smid, t.linear_thread_index());
    }

    fn warp_joined(&self, smid: u32, warp: u32, lanes: u32, contributed: u32) {
        self.block.warp_joined(smid, warp, lanes, contributed);
    }
}

/// Buffers of a sanitized CPU context come from the arena (aligned to
/// [`CpuSanitizerConfig::min_block`], at least 64 KiB by default).
impl HostBufferAllocator for CpuRaceSanitizer {
    fn allocate(&self, size: u64, align: u64) -> crate::Result<u64> {
        let oom = || crate::Error::HostOutOfMemory {
            bytes: usize::try_from(size).unwrap_or(usize::MAX),
        };
        let a = self.alloc(size).map_err(|_| oom())?;
        if a.address % align.max(1) != 0 {
            // SAFETY: just allocated, never handed out.
            let _ = unsafe { self.free(a.address) };
            return Err(oom());
        }
        Ok(a.address)
    }

    unsafe fn deallocate(&self, ptr: u64, _size: u64, _align: u64) -> crate::Result<()> {
        // SAFETY: forwarded from the caller (the buffer is no longer used).
        unsafe { self.free(ptr) }.map_err(|_| crate::Error::Unsupported {
            op: "freeing a sanitized CPU buffer",
            backend: crate::DeviceId::Cpu,
            reason: "the address is not a live buffer of the CPU sanitizer's arena",
        })
    }
}

impl CpuSanitizer for CpuRaceSanitizer {
    fn runtime_for_launch(&self, _launch: &LaunchInfo<'_>) -> &dyn SanitizerRuntime {
        self
    }

    fn on_launch_begin(&self, launch: &LaunchInfo<'_>) {
        self.begin_launch(
            launch.stream,
            launch.kernel,
            launch.config.grid,
            launch.config.block,
        );
    }

    fn on_launch_end(&self, _launch: &LaunchInfo<'_>, _outcome: Result<&LaunchStats, &CpuError>) {
        self.end_launch();
    }

    fn on_transfer(&self, t: &TransferInfo) {
        self.transfer(t.stream, t.kind, t.reads, t.writes, t.caller);
    }

    fn take_halt(&self) -> bool {
        CpuRaceSanitizer::take_halt(self)
    }

    fn on_free(&self, alloc: HostAllocation) {
        // Buffers of the arena are reset by `deallocate`; others are not checked.
        let _ = alloc;
    }

    fn allocator(&self) -> Option<&dyn HostBufferAllocator> {
        Some(self)
    }

    fn on_event_record(&self, event: EventId, stream: StreamId) {
        self.record_event(event, stream);
    }

    fn on_stream_wait(&self, stream: StreamId, event: EventId) {
        self.wait_event(stream, event);
    }

    fn on_host_sync(&self, sync: HostSync) {
        self.host_sync(sync);
    }

    fn take_reports(&self) -> RaceReports {
        self.take()
    }
}
