//! The race sanitizer of the CPU backend: the race engine of
//! `vigil-shared` (`vigil_shared::race`, docs/src/design/engine.md), the
//! one the GPU runs, driven by the CPU executor's hooks over shadow memory
//! in host memory. [`CpuRaceSanitizer`] implements both the per-thread
//! hooks ([`SanitizerRuntime`](vigil_device::host_runtime::SanitizerRuntime))
//! and the context's hook
//! ([`CpuSanitizer`](crate::CpuSanitizer)).
//!
//! # Design
//!
//! - **Memory** ([`CpuRaceSanitizer::alloc`]): sanitized buffers come from
//!   one `MAP_NORESERVE` reservation laid out as user memory, then its
//!   shadow (one 8-byte engine cell per 4-byte word, so a word's cell is
//!   `shadow_base + 8 * word`, the GPU's arithmetic). The VMM's buddy
//!   tree hands out ranges; a free gives the buffer's pool records back
//!   (`race::reclaim`) and its pages to the OS, so the range reads as
//!   empty for the next buffer. The engine's other tables (record pool,
//!   snapshot arena, exit log, launch ring, site table, SC-fence
//!   accumulators) are lazily committed host mappings (`memory`). Memory
//!   outside the arena is not checked.
//! - **Identity.** Every block of a launch is one CTA of the engine,
//!   named by its serial: the launch's first serial plus its linear block
//!   index. A copy or fill is a launch of one serial. A running block's
//!   state (its serial, its launch, the engine's `CtaSync` words) lives
//!   with the virtual SM that runs it (`cta`), set at block start; at its
//!   end the engine logs what it acquired of other launches.
//! - **Ordering.** Launches, event records, stream waits and host
//!   synchronisations go to the group's own
//!   launch order (`crate::sanitizer::order::LaunchOrder`) under this
//!   context's owner id, as the GPU's go to the process's: it hands each launch its serials
//!   and lane bounds, which go into the launch ring before its blocks run.
//!   Kernels on unrelated streams are therefore unordered even though the
//!   CPU ran them one after the other.
//! - **Checks** (`checks`): every thread's plain access goes to the
//!   engine word by word (`race::access`); atomics run their real
//!   operation while the engine holds the word's record
//!   (`race::atomic::atomic`); fences go to `race::sync::fence`. A copy
//!   or fill checks its whole lines through the line header
//!   (`race::line::access_line`) and its partial lines word by word.
//!   Races between threads of one block are the same-block layer's
//!   (`block_races`, `block`).
//! - **Sites.** Each access's site word (its serial, bits 3 to 22 of its
//!   `Location`'s address, its thread) travels in the shadow; the
//!   sanitizer keeps the `&'static Location`s it saw by those bits
//!   (`locations`), so a report names the earlier access's line, and
//!   never a wrong one.
//! - **Devices of a group** ([`CpuRaceSanitizer::group`], symmetric
//!   memory). N sanitizers share the engine's memory, the location table
//!   and the launch history; each has its own owner id in the launch
//!   order (its launches' lanes belong to its device, which is what
//!   [`Scope::Device`](vigil_shared::Scope::Device) includes) and its own launch in progress, running
//!   blocks, reports and same-block state, so each runs one launch at a
//!   time while different devices' launches run at once. A host
//!   synchronisation of one member orders every member's later launches.
//! - **Reports** go to a bounded buffer
//!   ([`CpuSanitizerConfig::report_capacity`] records; more are counted as
//!   dropped, never a crash) and come back de-duplicated by kind and
//!   location pair as [`RaceReports`], through the decoder both backends
//!   share ([`crate::sanitizer::decode`]); the earlier access's launch and
//!   block come from its serial (`report`). What the engine could not
//!   decide exactly (a full pool or arena, a bounded check) is counted in
//!   [`RaceReports::history_lost`].

mod arena;
mod atomics;
mod block;
mod checks;
mod cta;
mod locations;
mod memory;
mod report;

pub use arena::{Allocation, ArenaError};

use super::block_races::BlockRaces;
use super::executor::{CpuError, LaunchStats};
use super::hooks::{
    CpuSanitizer, CpuSanitizerParams, HostAllocation, HostBufferAllocator, HostSync, LaunchInfo,
    TransferInfo,
};
use crate::backend::transfer::TransferKind;
use crate::sanitizer::decode::LaunchShape;
use crate::sanitizer::launches::{LaunchHistory, Remembered};
use crate::sanitizer::order::{LaunchOrder, OrderError, Owner, Work};
use crate::sanitizer::report::{RaceReport, RaceReports};
use crate::types::{EventId, StreamId};
use arena::Arena;
use cta::{CtaSlots, LaunchState};
use locations::Locations;
use memory::{EngineMemory, RingRecord};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering as MemOrder};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use vigil_shared::race::memory::MAX_SC_DEVICES;

/// Launches whose shapes and names the sanitizer remembers (for naming
/// the kernel and block of an earlier access).
const LAUNCH_HISTORY: usize = 4096;

/// Settings of a [`CpuRaceSanitizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSanitizerConfig {
    /// Bytes of sanitized memory the arena can hand out (a power of two).
    pub capacity: u64,
    /// Smallest buffer block (a power of two; buffers are aligned to it).
    pub min_block: u64,
    /// Virtual SMs (executor workers) the sanitizer keeps a running
    /// block's state for: at least the executor's.
    pub virtual_sms: u32,
    /// Pool records (128 bytes each, committed when used): the words and
    /// lines whose shadow holds more than one access.
    pub pool_records: u32,
    /// Race records kept between collections; more are counted, not kept.
    pub report_capacity: usize,
    /// Stop a launch at its first race (see [`CpuRaceSanitizer::take_halt`]).
    pub halt_on_error: bool,
}

impl Default for CpuSanitizerConfig {
    fn default() -> Self {
        CpuSanitizerConfig {
            capacity: 16 << 30,
            min_block: 64 << 10,
            virtual_sms: 64,
            pool_records: 1 << 22,
            report_capacity: 1024,
            halt_on_error: false,
        }
    }
}

impl CpuSanitizerConfig {
    /// The settings a context's parameters ask for: the VMM configuration's
    /// pool size (the GPU's) and halt setting, and block state for every
    /// virtual SM.
    pub fn from_params(p: &CpuSanitizerParams) -> Self {
        let d = CpuSanitizerConfig::default();
        CpuSanitizerConfig {
            virtual_sms: d.virtual_sms.max(p.num_virtual_sms),
            pool_records: p.config.shadow_pool_records(),
            halt_on_error: p.config.halt_on_error(),
            ..d
        }
    }
}

/// Why a [`CpuRaceSanitizer`] could not be set up or could not check an
/// operation.
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
    /// A launch, copy or fill could not be given serials.
    #[error(transparent)]
    Order(#[from] OrderError),
}

impl From<CpuSanitizerError> for crate::Error {
    fn from(e: CpuSanitizerError) -> crate::Error {
        crate::Error::Sanitizer {
            message: e.to_string(),
        }
    }
}

/// What the devices of a group share.
struct Shared {
    mem: EngineMemory,
    locations: Locations,
    /// Launches by id and serial; each with the rank of its device.
    launches: Mutex<LaunchHistory<u32>>,
    /// Launch ids (unique in the group; what reports name launches by).
    next_launch: AtomicU32,
    /// Launch numbers in the ring.
    next_ring: AtomicU32,
    /// The owner ids of the group's members still alive.
    owners: Mutex<Vec<Owner>>,
    /// The group's launch order: its serials name only accesses to its
    /// own memory, so other contexts' work neither holds back its
    /// renewals nor what it may forget.
    order: Mutex<LaunchOrder>,
}

/// The CPU backend's race sanitizer of one (simulated) device. See the
/// [module docs](self). The members of a group
/// ([`CpuRaceSanitizer::group`]) share the engine's memory and the launch
/// history; the rest is the device's own.
pub struct CpuRaceSanitizer {
    shared: Arc<Shared>,
    /// This device's rank in its group (0 alone).
    rank: u32,
    /// Its owner id in the launch order.
    owner: Owner,
    /// The launch in progress.
    current: Mutex<Option<Arc<LaunchState>>>,
    /// The block each virtual SM runs.
    ctas: CtaSlots,
    reports: Mutex<Vec<RaceReport>>,
    report_capacity: usize,
    dropped: AtomicUsize,
    /// Accesses whose check was bounded (counted, never reported).
    bounded: AtomicU64,
    halt_on_error: bool,
    /// A kernel hook stopped the launch in progress at a race.
    halted: AtomicBool,
    /// Races between threads of one block, per virtual SM.
    block: BlockRaces,
}

impl std::fmt::Debug for CpuRaceSanitizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuRaceSanitizer")
            .field("rank", &self.rank)
            .field("virtual_sms", &self.ctas.len())
            .field("live_buffers", &self.shared.mem.arena.live_count())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CpuRaceSanitizer {
    /// Devices a group can have at most (the engine keeps SC-fence
    /// accumulators for that many).
    pub const MAX_DEVICES: u32 = MAX_SC_DEVICES as u32;

    /// A sanitizer with the default settings.
    pub fn new() -> Result<Self, CpuSanitizerError> {
        Self::with_config(&CpuSanitizerConfig::default())
    }

    /// A sanitizer with the given settings.
    pub fn with_config(c: &CpuSanitizerConfig) -> Result<Self, CpuSanitizerError> {
        let mut one = Self::group(c, 1)?;
        Ok(one.remove(0))
    }

    /// The sanitizers of `world` simulated devices (at most
    /// [`MAX_DEVICES`](Self::MAX_DEVICES)) that share one engine
    /// (docs/src/design/engine.md): one shadow, so an access by device 0
    /// to device 1's buffer is checked against device 1's kernels'
    /// accesses, and one launch history. Device `r`'s launches run on
    /// serial lanes of device `r`, which decides what a device-scope
    /// atomic or fence orders. A buffer allocated through any of them is
    /// in the shared arena. Each device runs one launch at a time;
    /// launches of different devices may run at once (from different host
    /// threads).
    pub fn group(
        c: &CpuSanitizerConfig,
        world: u32,
    ) -> Result<Vec<CpuRaceSanitizer>, CpuSanitizerError> {
        let bad = |name, value: u64, accepted| CpuSanitizerError::Config {
            name,
            value,
            accepted,
        };
        if !(1..=1 << 16).contains(&c.virtual_sms) {
            return Err(bad("virtual_sms", c.virtual_sms.into(), "1..=65536"));
        }
        if !(1..=Self::MAX_DEVICES).contains(&world) {
            return Err(bad("devices", world.into(), "1..=32 devices in a group"));
        }
        if !c.capacity.is_power_of_two() || c.capacity < c.min_block {
            return Err(bad(
                "capacity",
                c.capacity,
                "a power of two, at least min_block",
            ));
        }
        if c.pool_records == 0 || c.pool_records >= u32::MAX / 2 {
            return Err(bad("pool_records", c.pool_records.into(), "1..2^31"));
        }
        let arena = Arena::new(c.capacity, c.min_block)?;
        let owners: Vec<Owner> = (0..world).map(|_| crate::types::next_id()).collect();
        let shared = Arc::new(Shared {
            mem: EngineMemory::new(arena, c.pool_records as usize)?,
            locations: Locations::new()?,
            launches: Mutex::new(LaunchHistory::new(LAUNCH_HISTORY)),
            next_launch: AtomicU32::new(1),
            next_ring: AtomicU32::new(1),
            owners: Mutex::new(owners.clone()),
            order: Mutex::new(LaunchOrder::new()),
        });
        Ok(owners
            .into_iter()
            .enumerate()
            .map(|(rank, owner)| CpuRaceSanitizer {
                shared: Arc::clone(&shared),
                rank: rank as u32,
                owner,
                current: Mutex::new(None),
                ctas: CtaSlots::new(c.virtual_sms as usize),
                reports: Mutex::new(Vec::new()),
                report_capacity: c.report_capacity,
                dropped: AtomicUsize::new(0),
                bounded: AtomicU64::new(0),
                halt_on_error: c.halt_on_error,
                halted: AtomicBool::new(false),
                block: BlockRaces::new(c.virtual_sms as usize),
            })
            .collect())
    }

    /// Virtual SMs this device keeps block state for.
    pub fn virtual_sms(&self) -> u32 {
        self.ctas.len() as u32
    }

    /// This device's rank in its group (0 for a sanitizer of its own).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Allocates a sanitized buffer of `size` bytes (zeroed, empty shadow).
    pub fn alloc(&self, size: u64) -> Result<Allocation, ArenaError> {
        self.shared.mem.arena.alloc(size)
    }

    /// Frees a buffer from [`CpuRaceSanitizer::alloc`] by its address; its
    /// memory and shadow are reset and its shadow's pool records go back.
    ///
    /// # Safety
    /// No kernel may be running on the buffer, and nothing may use its
    /// memory afterwards.
    pub unsafe fn free(&self, address: u64) -> Result<(), ArenaError> {
        let mem = &self.shared.mem;
        // The records go back first: the shadow is discarded below, and a
        // long-lived context would fill its pool with dead buffers'
        // records. A pool never used has none.
        if let Some(words) = mem.arena.block_words(address).filter(|_| mem.pool_used()) {
            for word0 in words.step_by(vigil_shared::race::line::LINE_WORDS as usize) {
                vigil_shared::race::reclaim::reclaim_line(mem, word0);
            }
        }
        mem.arena.free(address)
    }

    /// The live buffer containing `address`, if any.
    pub fn allocation_of(&self, address: u64) -> Option<Allocation> {
        self.shared.mem.arena.allocation_of(address)
    }

    /// Plans a launch of `count` serials named `shape` on `stream`: its
    /// serials, lane bounds and ring record, remembered in the history.
    fn plan(
        &self,
        stream: StreamId,
        shape: LaunchShape,
        count: u32,
        work: Work,
    ) -> Result<LaunchState, CpuSanitizerError> {
        let (planned, devices) = {
            let mut order = lock(&self.shared.order);
            let planned = order.launch(stream, self.owner, self.rank, count, work)?;
            (planned, *order.devices())
        };
        let id = self.shared.next_launch.fetch_add(1, MemOrder::Relaxed);
        let lane_ref = self.shared.next_ring.fetch_add(1, MemOrder::Relaxed).max(1);
        self.shared.mem.write_record(&RingRecord {
            lane_ref,
            base: planned.base,
            count: planned.count,
            device: self.rank,
            launch_id: id,
            bounds: &planned.bounds,
            global: &planned.global,
        });
        lock(&self.shared.launches).insert(
            id,
            Remembered {
                shape: shape.clone(),
                base: planned.base,
                count: planned.count,
                extra: self.rank,
            },
        );
        Ok(LaunchState {
            id,
            lane_ref,
            base: planned.base,
            count: planned.count,
            bounds: planned.bounds,
            global: planned.global,
            devices,
            shape,
        })
    }

    /// Starts a launch of `kernel` (grid and block shape) on `stream`:
    /// call before `CpuExecutor::launch` (with `self` as the runtime) and
    /// [`CpuRaceSanitizer::end_launch`] after it. Launches of one device
    /// must not overlap.
    pub fn begin_launch(
        &self,
        stream: StreamId,
        kernel: &str,
        grid: crate::Dim3,
        block: crate::Dim3,
    ) -> Result<(), CpuSanitizerError> {
        self.begin(stream, kernel, grid, block, false)
    }

    /// [`begin_launch`](Self::begin_launch), for a launch with
    /// programmatic stream serialisation when `programmatic`: until a
    /// block calls `grid_dependency::wait()`, its accesses are not
    /// ordered after the kernel before it on its stream.
    fn begin(
        &self,
        stream: StreamId,
        kernel: &str,
        grid: crate::Dim3,
        block: crate::Dim3,
        programmatic: bool,
    ) -> Result<(), CpuSanitizerError> {
        let blocks = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
        let shape = LaunchShape {
            kernel: kernel.to_owned(),
            grid,
            block,
            host_issued: false,
        };
        let count = u32::try_from(blocks).map_err(|_| OrderError::TooManyCtas(blocks))?;
        let launch = self.plan(stream, shape, count, Work::kernel(programmatic))?;
        *lock(&self.current) = Some(Arc::new(launch));
        Ok(())
    }

    /// Ends the launch begun last. Call also after a failed launch.
    pub fn end_launch(&self) {
        lock(&self.current).take();
    }

    /// Records `event` at the current end of `stream`.
    pub fn record_event(&self, event: EventId, stream: StreamId) {
        lock(&self.shared.order).record(event, stream);
    }

    /// Orders `stream`'s later launches after `event`'s last record.
    pub fn wait_event(&self, stream: StreamId, event: EventId) {
        lock(&self.shared.order).wait(stream, event, self.owner);
    }

    /// The host waited for `sync`: every later launch of every device of
    /// the group is ordered after what it waited for.
    pub fn host_sync(&self, sync: HostSync) {
        let mut order = lock(&self.shared.order);
        match sync {
            HostSync::Context => order.sync_owner(self.owner),
            HostSync::Stream(s) => order.sync_stream(self.owner, s),
            HostSync::Event(e) => order.sync_event(self.owner, e),
        }
        let clock = order.host_clock(self.owner);
        for &peer in lock(&self.shared.owners)
            .iter()
            .filter(|&&o| o != self.owner)
        {
            order.join_host(peer, &clock);
        }
    }

    /// Takes the reports found since the last call, de-duplicated, with
    /// the counts of lost precision.
    pub fn take(&self) -> RaceReports {
        let raw = std::mem::take(&mut *lock(&self.reports));
        let mut out: RaceReports = raw.into_iter().collect();
        out.add_dropped(self.dropped.swap(0, MemOrder::Relaxed) as u64);
        out.add_history_lost(self.bounded.swap(0, MemOrder::Relaxed) + self.shared.mem.take_lost());
        self.shared.mem.renew_if_idle(&self.shared.order);
        out
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

    /// Checks a host-issued copy or fill as accesses of `stream`: a launch
    /// of one serial named after the transfer (`host-to-device copy on
    /// stream #2`), ordered on its stream like a kernel, reading and
    /// writing the device ranges at `caller`. Races are reported, never
    /// halted on (the host thread is not a kernel thread to unwind).
    pub fn transfer(
        &self,
        stream: StreamId,
        kind: TransferKind,
        reads: Option<(u64, u64)>,
        writes: Option<(u64, u64)>,
        caller: &'static Location<'static>,
    ) -> Result<(), CpuSanitizerError> {
        let one = crate::Dim3::new(1, 1, 1);
        let shape = LaunchShape {
            kernel: kind.on_stream(stream),
            grid: one,
            block: one,
            host_issued: true,
        };
        let launch = self.plan(stream, shape, 1, Work::Transfer)?;
        self.check_transfer(launch, reads, writes, caller);
        Ok(())
    }
}

impl Drop for CpuRaceSanitizer {
    /// The device's context is gone: its host clock no longer bounds what
    /// the engine may forget, and its group's host waits no longer reach it.
    fn drop(&mut self) {
        lock(&self.shared.order).drop_owner(self.owner);
        lock(&self.shared.owners).retain(|&o| o != self.owner);
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
    fn runtime_for_launch(
        &self,
        _launch: &LaunchInfo<'_>,
    ) -> &dyn vigil_device::host_runtime::SanitizerRuntime {
        self
    }

    fn on_launch_begin(&self, launch: &LaunchInfo<'_>) -> crate::Result<()> {
        self.begin(
            launch.stream,
            launch.kernel,
            launch.config.grid,
            launch.config.block,
            launch.config.programmatic_stream_serialization,
        )
        .map_err(Into::into)
    }

    fn on_launch_end(&self, _launch: &LaunchInfo<'_>, _outcome: Result<&LaunchStats, &CpuError>) {
        self.end_launch();
    }

    fn on_transfer(&self, t: &TransferInfo) -> crate::Result<()> {
        self.transfer(t.stream, t.kind, t.reads, t.writes, t.caller)
            .map_err(Into::into)
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

    fn on_stream_drop(&self, stream: StreamId) {
        lock(&self.shared.order).drop_stream(stream);
    }

    fn take_reports(&self) -> RaceReports {
        self.take()
    }
}
