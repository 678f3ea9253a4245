//! The CUDA backend's sanitized launch seam: the GPU race sanitizer's
//! launches, stream and event clocks, and report collection
//! (docs/src/design/ordering.md). Decoding records into reports is shared
//! host code (`crate::sanitizer::decode`).
//!
//! One [`GpuSanitizer`] per device (process-wide, like the shadow
//! allocator it sits on) owns the device's [`GpuRuntime`] descriptor, its
//! per-SM slot table, the side table of earlier accesses, the SC-fence
//! clocks, every stream's clocks and a host-mapped report buffer per
//! sanitized context (named by the context's streams' clocks, so that
//! contexts sharing the device, such as parallel tests, neither fill each
//! other's buffer nor count each other's dropped reports). A
//! sanitized launch asks it for its hidden arguments
//! ([`GpuSanitizer::hidden_args`], [`HIDDEN_PARAMS`]); events, stream
//! waits and host synchronisations
//! feed the clock bookkeeping (`clocks`); a synchronisation collects the
//! records and decodes them into
//! [`RaceReport`](crate::sanitizer::report::RaceReport)s.
//!
//! Host-issued copies and fills are launches of the range-access entry,
//! planned like kernels (`range_checks`).
//!
//! - `group`: the sanitizers of a group of devices of one process.
//! - `slots`: how many sanitizer slots each SM gets.
//! - `clocks`: which clocks a launch acquires (pure bookkeeping).
//! - `device_memory`: the sanitizer's own device and mapped memory.
//! - `location`: source locations read back from device memory.
//! - `host_sites`: the host call sites of copies and fills, as tags.
//! - `range_checks`: copies and fills as launches of the range-access entry.
//! - `resolve`: what the records' numbers mean, for the shared decoder.
//! - `window`: the window shadow of large and dynamic shared arrays.

mod clocks;
mod device_memory;
mod group;
mod host_sites;
mod location;
mod range_checks;
mod resolve;
mod slots;
mod window;

pub(crate) use group::join_group;
use range_checks::RangeState;
pub(crate) use range_checks::{RangeCheck, RangeEntry};
pub(crate) use slots::slots_per_sm_fitting;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering as MemOrder};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use vigil_shared::abi::{PoolHeader, ReportBufferHeader};
use vigil_shared::block::{
    DivergenceRecord, GlobalTable, DIVERGENT_BARRIER_KIND, GLOBAL_LANES, SANITIZER_SHARED_BYTES,
    UNCHECKED_ARRAYS,
};
use vigil_shared::engine::sc_fence_words;
use vigil_shared::gpu::{
    GpuReportRecord, GpuRuntime, SideEntry, SmSlots, StreamClocks, HIDDEN_PARAMS, MAX_JOINS,
};

use super::device::CudaDevice;
use super::launch::SanitizedLaunch;
use super::stream::CudaStream;
use super::vmm::CachingPool;
use crate::error::{Error, Result};
use crate::launch_abi::params::{HiddenArgs, ParamBuffer};
use crate::sanitizer::barrier::decode_divergence;
use crate::sanitizer::decode::{decode_all, LaunchShape, PriorSite};
use crate::sanitizer::report::RaceReports;
use crate::types::{EventId, StreamId};
use vigil_shared::read_only::ReadOnlyRanges;

use clocks::{ClockBook, LaunchPlan};
use device_memory::{read_device, write_device, DeviceBlock, MappedBlock};
use host_sites::HostSites;
use location::{LocationCache, LocationLayout};
use resolve::{GpuResolver, LaunchHistory};
use window::WindowRegions;

/// log2 of the side table's entries on the smallest devices (32 MiB).
const SIDE_LOG2_MIN: u32 = 20;
/// log2 of the side table's entries on the largest (256 MiB).
const SIDE_LOG2_MAX: u32 = 23;

/// log2 of the side table's entries for a device of `total_memory`
/// bytes: about 1/256 of it, between [`SIDE_LOG2_MIN`] and
/// [`SIDE_LOG2_MAX`]. A streaming launch notes a run per warp and line,
/// millions of them, and a note reads its set's ways until one is free
/// (one of an older launch): a table that one launch fills makes every
/// note read all four. On an H100, 256 MiB against 32 MiB made a
/// sanitized copy 5 % faster (23.4 to 22.2 ms), and lets reports find
/// more earlier accesses.
fn side_log2(total_memory: usize) -> u32 {
    let want = total_memory / 256 / std::mem::size_of::<SideEntry>();
    let log2 = usize::BITS - 1 - want.max(1).leading_zeros();
    log2.clamp(SIDE_LOG2_MIN, SIDE_LOG2_MAX)
}
/// The owner id under which the host clock blocks of contexts gone wait
/// for the device to be idle (owner ids start at 1).
const RETIRED: u64 = 0;

/// Records a context's report buffer holds (128 bytes each).
const REPORT_CAPACITY: u32 = 1024;
/// log2 of the same-block table's entries per SM slot (40 bytes each:
/// 40 KiB a slot), the global words a block may touch in one barrier
/// interval before some go unchecked (`vigil_shared::block::GlobalTable`).
const BLOCK_TABLE_LOG2: u32 = 10;

/// What is guarded by the sanitizer's lock.
struct State {
    book: ClockBook,
    /// The value of each context's newest host clock (by owner id).
    host_clock: HashMap<u64, Vec<u32>>,
    /// Device blocks of the host clocks launches may still read, by owner,
    /// newest last (see `clocks`).
    host_clocks: HashMap<u64, Vec<DeviceBlock>>,
    streams: HashMap<StreamId, DeviceBlock>,
    launches: LaunchHistory,
    locations: LocationCache,
    /// The report buffer of each live context (by owner id).
    buffers: HashMap<u64, MappedBlock>,
    /// Buffers of contexts gone, for the next new context: freeing one
    /// while a kernel of its context may still run would fault it.
    spare: Vec<MappedBlock>,
    /// Call sites of the transfers checked so far.
    sites: HostSites,
    /// The range-access entry, or the transfer checks waiting for it.
    range: RangeState,
    /// The same-block table's header counts at the last collection:
    /// words it skipped (full), shared arrays left without a shadow.
    unchecked_seen: [u64; 2],
    /// The window shadow's device memory.
    window: WindowRegions,
}

/// The GPU sanitizer of one device.
pub(crate) struct GpuSanitizer {
    device: Arc<CudaDevice>,
    pool: Arc<CachingPool>,
    num_sms: u32,
    slots: u32,
    num_threads: u32,
    runtime: DeviceBlock,
    /// What `runtime` holds (rewritten when the device joins a group).
    desc: Mutex<GpuRuntime>,
    /// By owner of a context of this device in a sanitized group, the
    /// group's other members and their contexts' owners: that context's
    /// host waits order theirs too (`group`).
    group: Mutex<HashMap<u64, group::Peers>>,
    _slot_table: DeviceBlock,
    _side_table: DeviceBlock,
    block_table: DeviceBlock,
    _block_lanes: DeviceBlock,
    _sc_fences: DeviceBlock,
    layout: Option<LocationLayout>,
    state: Mutex<State>,
    /// The stream the runtime's own launches run on outside every user
    /// stream's order (`GpuSanitizer::with_own_stream`), made on first use.
    own_stream: Mutex<Option<CudaStream>>,
}

/// Launch ids, unique in the process: a race's earlier access may be
/// another device's (a group of devices shares its side table), and its
/// id must not name a launch of this one.
static NEXT_LAUNCH: AtomicU32 = AtomicU32::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn registry() -> &'static Mutex<HashMap<usize, Arc<GpuSanitizer>>> {
    static SANITIZERS: OnceLock<Mutex<HashMap<usize, Arc<GpuSanitizer>>>> = OnceLock::new();
    SANITIZERS.get_or_init(Default::default)
}

/// The sanitizer of `device` (allocating from `pool`), made on first use;
/// one per device in the process, like the shadow allocator under it.
pub(crate) fn for_device(
    device: &Arc<CudaDevice>,
    pool: &Arc<CachingPool>,
) -> Result<Arc<GpuSanitizer>> {
    let mut reg = lock(registry());
    if let Some(s) = reg.get(&device.ordinal()) {
        return Ok(s.clone());
    }
    let s = Arc::new(GpuSanitizer::new(device, pool)?);
    reg.insert(device.ordinal(), s.clone());
    Ok(s)
}

/// The sanitizer of `device`, if a sanitized launch made it already.
pub(crate) fn existing(device: &CudaDevice) -> Option<Arc<GpuSanitizer>> {
    lock(registry()).get(&device.ordinal()).cloned()
}

fn as_bytes<T: bytemuck::Pod>(v: &T) -> &[u8] {
    bytemuck::bytes_of(v)
}

impl GpuSanitizer {
    fn new(device: &Arc<CudaDevice>, pool: &Arc<CachingPool>) -> Result<GpuSanitizer> {
        let vmm = pool.vmm();
        vmm.device(device)?;
        let ordinal = device.ordinal();
        let runtime_state = vmm.runtime_of(ordinal)?;
        let g = runtime_state.global;
        let num_sms = device.sm_count().max(1);
        let slots = (g.num_sms / num_sms).max(1);
        device.bind()?;
        let slot_table = DeviceBlock::zeroed(num_sms as usize * std::mem::size_of::<SmSlots>())?;
        let side_log2 = side_log2(device.props().total_memory);
        let side_table =
            DeviceBlock::zeroed((1usize << side_log2) * std::mem::size_of::<SideEntry>())?;
        let block_slots = num_sms * slots;
        let block_table = DeviceBlock::zeroed(
            GlobalTable {
                log2: BLOCK_TABLE_LOG2,
            }
            .bytes(block_slots as usize),
        )?;
        let block_lanes = DeviceBlock::zeroed(block_slots as usize * GLOBAL_LANES * 8)?;
        let sc_words = sc_fence_words(g.num_devices, g.num_threads);
        let sc_fences = DeviceBlock::zeroed(sc_words * 4)?;
        let desc = GpuRuntime {
            globals: vmm.runtime_state_ptr(ordinal)?,
            slot_table: slot_table.addr,
            side_table: side_table.addr,
            sc_fences: sc_fences.addr,
            sc_fence_words: sc_words as u32,
            side_log2,
            slots_per_sm: slots,
            // VIGIL_HALT_ON_ERROR: the racing thread traps after its record.
            flags: if vmm.config().halt_on_error() {
                GpuRuntime::HALT_ON_RACE
            } else {
                0
            },
            rank: runtime_state.rank,
            report_capacity: REPORT_CAPACITY,
            block_table: block_table.addr,
            block_table_log2: BLOCK_TABLE_LOG2,
            block_table_slots: block_slots,
            block_lanes: block_lanes.addr,
            // Made by the first launch that needs it (`window`).
            block_shadow: 0,
        };
        let runtime = DeviceBlock::zeroed(std::mem::size_of::<GpuRuntime>())?;
        runtime.write(as_bytes(&desc))?;
        Ok(GpuSanitizer {
            device: device.clone(),
            pool: pool.clone(),
            num_sms,
            slots,
            num_threads: g.num_threads,
            runtime,
            desc: Mutex::new(desc),
            group: Mutex::new(HashMap::new()),
            _slot_table: slot_table,
            _side_table: side_table,
            block_table,
            _block_lanes: block_lanes,
            _sc_fences: sc_fences,
            layout: LocationLayout::probe(),
            own_stream: Mutex::new(None),
            state: Mutex::new(State {
                book: ClockBook::new(g.num_threads),
                host_clock: HashMap::new(),
                host_clocks: HashMap::new(),
                streams: HashMap::new(),
                launches: LaunchHistory::default(),
                locations: LocationCache::default(),
                buffers: HashMap::new(),
                spare: Vec::new(),
                sites: HostSites::default(),
                range: RangeState::Waiting(Vec::new()),
                unchecked_seen: [0; 2],
                window: WindowRegions::default(),
            }),
        })
    }

    /// The hidden arguments of `sanitized`, about to be enqueued on
    /// `stream` (the launch's stream): plans its place in the stream's
    /// clocks, and enqueues the stream's join list on `stream` when it
    /// changed, so that it lands before the kernel starts.
    pub(crate) fn hidden_args(
        &self,
        sanitized: &SanitizedLaunch<'_>,
        stream: &CudaStream,
    ) -> Result<HiddenArgs> {
        let SanitizedLaunch {
            owner,
            launch,
            shared_window,
        } = *sanitized;
        let (stream_id, kernel, config) = (launch.stream, launch.kernel, &launch.config);
        let mut st = lock(&self.state);
        // A kernel without shared memory of its own needs no window shadow.
        if shared_window > SANITIZER_SHARED_BYTES as u64 {
            self.device.bind()?;
            let slots = u64::from(self.num_sms * self.slots);
            st.window.ensure(&self.runtime, slots, shared_window)?;
        }
        let shape = LaunchShape {
            kernel: kernel.to_owned(),
            grid: config.grid,
            block: config.block,
            host_issued: false,
        };
        let (plan, launch_id) = self.plan(&mut st, owner, stream_id, shape)?;
        if let Some(header) = &plan.write {
            self.device.bind()?;
            DeviceBlock::write_async(plan.stream_clocks, as_bytes(header), stream.raw())?;
        }
        drop(st);
        Ok(self.hidden(&plan, launch_id, launch.params.read_only_ranges()))
    }

    /// Plans a sanitized launch of `shape` on `stream_id` by `owner` (the
    /// stream's clocks made on its first): its place in the stream's
    /// clocks and its launch id.
    fn plan(
        &self,
        st: &mut State,
        owner: u64,
        stream_id: StreamId,
        shape: LaunchShape,
    ) -> Result<(LaunchPlan, u32)> {
        if !st.book.has_stream(stream_id) {
            self.device.bind()?;
            let reports = report_buffer(st, owner)?;
            let block = DeviceBlock::zeroed(StreamClocks::bytes(self.num_threads) as usize)?;
            block.write(as_bytes(&ClockBook::first_header(reports)))?;
            st.book.add_stream(stream_id, owner, block.addr, reports);
            st.streams.insert(stream_id, block);
        }
        let plan = st.book.launch(stream_id).ok_or(Error::Unsupported {
            op: "a sanitized GPU launch",
            backend: crate::types::DeviceId::Cuda(self.device.ordinal()),
            reason: "the stream has no sanitizer clocks",
        })?;
        let launch = NEXT_LAUNCH.fetch_add(1, MemOrder::Relaxed);
        st.launches.insert(launch, owner, shape);
        Ok((plan, launch))
    }

    /// `buf` with the hidden arguments of a launch planned as `plan`.
    fn with_hidden(&self, buf: &ParamBuffer, plan: &LaunchPlan, launch: u32) -> ParamBuffer {
        buf.with_hidden(&self.hidden(plan, launch, buf.read_only_ranges()))
    }

    /// The hidden arguments ([`HIDDEN_PARAMS`]) of a launch planned as
    /// `plan`, with launch id `launch` and the read-only ranges `read_only`.
    fn hidden(&self, plan: &LaunchPlan, launch: u32, read_only: ReadOnlyRanges) -> HiddenArgs {
        let ordinal = Some(self.device.ordinal());
        let mut args = HiddenArgs::new();
        args.pointer(self.runtime.addr, ordinal)
            .pointer(plan.stream_clocks, ordinal)
            .u32(plan.kernel)
            .u32(launch);
        for bound in read_only.words() {
            args.u64(bound);
        }
        debug_assert_eq!(args.len(), HIDDEN_PARAMS.len());
        args
    }

    /// Runs `f` on the sanitizer's own stream (made on first use, then
    /// kept): the runtime's launches that no user stream orders, the
    /// transfer checks that waited for the range-access entry and the
    /// shadow reclaims of freed buffers. One caller at a time.
    pub(crate) fn with_own_stream<R>(&self, f: impl FnOnce(&CudaStream) -> Result<R>) -> Result<R> {
        let mut own = lock(&self.own_stream);
        let stream = match &mut *own {
            Some(s) => s,
            none => none.insert(CudaStream::new(&self.device)?),
        };
        f(stream)
    }

    /// The context `owner` is gone: its report buffer waits for the next
    /// new context (a kernel of `owner` may still be running and write
    /// it; the next owner's collection discards what it writes then, see
    /// [`owned_records`]).
    pub fn retire_owner(&self, owner: u64) {
        let mut st = lock(&self.state);
        st.book.forget_owner(owner);
        st.host_clock.remove(&owner);
        // Its launches may still read its host clocks: they go once the
        // device is idle (`fold_host_wait`).
        if let Some(blocks) = st.host_clocks.remove(&owner) {
            st.host_clocks.entry(RETIRED).or_default().extend(blocks);
        }
        if let Some(buffer) = st.buffers.remove(&owner) {
            st.spare.push(buffer);
        }
    }

    /// Reads and clears `owner`'s report buffer (call after synchronising
    /// with every kernel that may write it) and decodes its records. All
    /// of the buffer's claims are `owner`'s launches', so the claims it
    /// could not hold count as `owner`'s dropped reports.
    fn collect(&self, owner: u64) -> RaceReports {
        let mut st = lock(&self.state);
        let (read, claimed) = match st.buffers.get(&owner) {
            Some(buffer) => take_records(buffer),
            None => (Vec::new(), 0),
        };
        let dropped = u64::from(claimed) - read.len() as u64;
        let mut records = owned_records(&st.launches, read, owner);
        let [words, arrays] = self.unchecked_since(&mut st.unchecked_seen);
        let lost = self.take_history_lost();
        if records.is_empty() && dropped == 0 && words == 0 && arrays == 0 && lost == 0 {
            return RaceReports::new();
        }
        let divergent: Vec<DivergenceRecord> = records
            .iter()
            .filter(|r| r.report.kind == DIVERGENT_BARRIER_KIND)
            .map(|r| bytemuck::cast(*r))
            .collect();
        records.retain(|r| r.report.kind != DIVERGENT_BARRIER_KIND);
        let priors: Vec<Option<PriorSite>> = records
            .iter()
            .map(|r| {
                let e = &r.prior;
                (e.location != 0).then_some(PriorSite {
                    location: e.location,
                    tid: e.tid,
                    block: e.block,
                    thread: e.thread,
                    launch: e.launch,
                    sm: None,
                })
            })
            .collect();
        // Earlier accesses by another device of a group name its launches
        // (asked for without this lock held: no two sanitizers' locks are
        // ever held together).
        drop(st);
        let elsewhere = self.peer_launches(records.iter().map(|r| r.prior.launch));
        let mut st = lock(&self.state);
        let State {
            launches,
            locations,
            sites,
            ..
        } = &mut *st;
        let device = &self.device;
        let read = |addr: u64, len: usize| {
            device.bind().ok()?;
            read_device(addr, len).ok()
        };
        let vmm = self.pool.vmm();
        let allocation = |addr: u64| vmm.lookup(addr).map(|a| (a.ptr, a.size));
        let resolver = GpuResolver {
            num_sms: self.num_sms,
            slots: self.slots,
            launches,
            elsewhere: &elsewhere,
            layout: self.layout,
            locations: std::cell::RefCell::new(locations),
            host_sites: sites,
            read: &read,
            allocation: &allocation,
        };
        let mut out = decode_all(
            records
                .iter()
                .map(|r| &r.report)
                .zip(priors.iter().map(Option::as_ref)),
            records.len() as u64 + dropped,
            &resolver,
        );
        for d in &divergent {
            out.push_divergent_barrier(decode_divergence(d, &resolver));
        }
        out.add_unchecked_words(words);
        out.add_unchecked_arrays(arrays);
        out.add_history_lost(lost);
        out
    }

    /// Takes the record pool header's precision-loss counts
    /// ([`PoolHeader::history_lost`]) and clears them on the device. A
    /// kernel still running may count between the read and the clear,
    /// which loses those counts (they only say that, and about how much,
    /// precision was lost); a group's shared pool's counts go to the
    /// member that takes them first. A failed read or write counts
    /// nothing.
    fn take_history_lost(&self) -> u64 {
        let Ok(g) = self.pool.vmm().global_state(self.device.ordinal()) else {
            return 0;
        };
        if g.pool_base == 0 || self.device.bind().is_err() {
            return 0;
        }
        let Ok(bytes) = read_device(g.pool_base, std::mem::size_of::<PoolHeader>()) else {
            return 0;
        };
        let lost = bytemuck::pod_read_unaligned::<PoolHeader>(&bytes).history_lost();
        let counters = PoolHeader::LOST_HISTORY_BYTES;
        if lost > 0
            && write_device(
                g.pool_base + counters.start as u64,
                &vec![0; counters.len()],
            )
            .is_err()
        {
            return 0;
        }
        lost
    }

    /// What the same-block table's header counted since the last call
    /// (`seen` holding the counts then): word accesses it skipped (it was
    /// full), and shared arrays declared too large for a shadow
    /// (`vigil_shared::block::UNCHECKED_ARRAYS`). The header is read with
    /// a plain copy, which waits for no stream (they are non-blocking): a
    /// kernel still running may add more, counted next time. A read that
    /// fails counts nothing.
    fn unchecked_since(&self, seen: &mut [u64; 2]) -> [u64; 2] {
        let mut new = [0; 2];
        if self.device.bind().is_err() {
            return new;
        }
        let Ok(bytes) = read_device(self.block_table.addr, UNCHECKED_ARRAYS + 8) else {
            return new;
        };
        for (i, at) in [0, UNCHECKED_ARRAYS].into_iter().enumerate() {
            let mut word = [0; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            let now = u64::from_le_bytes(word);
            new[i] = now.saturating_sub(seen[i]);
            seen[i] = now.max(seen[i]);
        }
        new
    }
}

/// `into[j] = max(into[j], clock[j])` for the entries both have.
fn join_into(into: &mut [u32], clock: &[u32]) {
    for (h, &c) in into.iter_mut().zip(clock) {
        *h = (*h).max(c);
    }
}

/// The report buffer of `owner`, made (or taken from the spares, emptied)
/// on its first sanitized launch; its device address.
fn report_buffer(st: &mut State, owner: u64) -> Result<u64> {
    if let Some(b) = st.buffers.get(&owner) {
        return Ok(b.device);
    }
    let buffer = match st.spare.pop() {
        Some(b) => {
            b.words()[0].store(0, MemOrder::Relaxed);
            b
        }
        None => {
            let b = MappedBlock::zeroed(
                std::mem::size_of::<ReportBufferHeader>()
                    + REPORT_CAPACITY as usize * std::mem::size_of::<GpuReportRecord>(),
            )?;
            b.words()[1].store(REPORT_CAPACITY, MemOrder::Relaxed);
            b
        }
    };
    let device = buffer.device;
    st.buffers.insert(owner, buffer);
    Ok(device)
}

/// Reads and empties a report buffer: its records and how many were
/// claimed (more than it holds when some were dropped).
fn take_records(buffer: &MappedBlock) -> (Vec<GpuReportRecord>, u32) {
    let words = buffer.words();
    let claimed = words[0].swap(0, MemOrder::Relaxed);
    let stored = claimed.min(REPORT_CAPACITY) as usize;
    let records = (0..stored)
        .map(|i| {
            let at = ReportBufferHeader::WORDS + i * GpuReportRecord::WORDS;
            let mut raw = [0u32; GpuReportRecord::WORDS];
            for (d, w) in raw.iter_mut().zip(&words[at..]) {
                *d = w.load(MemOrder::Relaxed);
            }
            bytemuck::cast::<_, GpuReportRecord>(raw)
        })
        .collect();
    (records, claimed)
}

/// `records` (read from `owner`'s buffer) less those another context's
/// kernel wrote: a straggler of the context gone that had the buffer
/// before (see [`GpuSanitizer::retire_owner`]). A record whose launch is
/// no longer known is `owner`'s.
fn owned_records(
    launches: &LaunchHistory,
    mut records: Vec<GpuReportRecord>,
    owner: u64,
) -> Vec<GpuReportRecord> {
    records.retain(|rec| {
        launches
            .owner(rec.report.site.kernel_id)
            .is_none_or(|by| by == owner)
    });
    records
}

// ----- what the backend's dispatch reports ---------------------------------

/// What the host waited for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum HostWait {
    /// One stream.
    Stream(StreamId),
    /// One event.
    Event(EventId),
    /// The whole device.
    All,
}

impl GpuSanitizer {
    /// `event` was recorded on `owner`'s `stream`.
    pub fn on_event_record(&self, owner: u64, event: EventId, stream: StreamId) {
        lock(&self.state).book.record(event, stream, owner);
    }

    /// `owner`'s `stream` waits for `event`.
    pub fn on_stream_wait(&self, owner: u64, stream: StreamId, event: EventId) {
        let book = &mut lock(&self.state).book;
        let before = book.dropped_joins();
        book.wait(stream, event, owner);
        if before == 0 && book.dropped_joins() > 0 {
            eprintln!(
                "vigil: a stream waited on events of more than {MAX_JOINS} other streams \
                 without a kernel in between; the oldest of those orderings were dropped, \
                 so a later race report on that stream may be a false alarm"
            );
        }
    }

    /// `owner`'s host waited: its later work is ordered after what it
    /// waited for. The exit clocks of the work waited for (done, so final)
    /// are folded with `owner`'s host clock into a new host clock block,
    /// under the state lock, before any later launch can be planned to
    /// join it. Blocks of older host clocks go once the whole device is
    /// idle. In a group of devices of this process, the new host clock is
    /// joined into every other member's: the host waited, so its later
    /// launches on any rank come after what it waited for.
    pub fn on_host_wait(&self, owner: u64, wait: HostWait) -> Result<()> {
        if self.fold_host_wait(owner, wait)? {
            self.share_host_clock(owner)?;
        }
        Ok(())
    }

    /// [`GpuSanitizer::on_host_wait`] on this device: true when the host
    /// clock changed.
    fn fold_host_wait(&self, owner: u64, wait: HostWait) -> Result<bool> {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let fold = match wait {
            HostWait::Stream(id) => st.book.sync_stream(id, owner),
            HostWait::Event(id) => st.book.sync_event(id),
            HostWait::All => st.book.sync_all(owner),
        };
        if matches!(wait, HostWait::All) {
            // The whole device is idle (a context synchronisation waits
            // for every context's work): no launch still reads an older
            // host clock of any context.
            for blocks in st.host_clocks.values_mut() {
                let keep = blocks.len().saturating_sub(1);
                blocks.drain(..keep);
            }
            st.host_clocks.remove(&RETIRED);
        }
        if fold.is_empty() {
            return Ok(false);
        }
        if st.range.has_unrun_checks() {
            // A queued transfer check's exit clock is not written yet.
            st.book.keep_sources(owner, &fold);
            return Ok(false);
        }
        self.device.bind()?;
        let n = self.num_threads as usize;
        let host = st.host_clock.entry(owner).or_insert_with(|| vec![0; n]);
        for source in &fold {
            let bytes = read_device(source.addr, n * 4)?;
            let clock: Vec<u32> = bytes
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| u32::from_le_bytes(*c))
                .collect();
            join_into(host, &clock);
        }
        Self::adopt_host_clock(st, owner, &fold)?;
        Ok(true)
    }

    /// Writes `owner`'s host clock into a new device block that its every
    /// later launch joins, in place of the sources `folded` into it.
    fn adopt_host_clock(st: &mut State, owner: u64, folded: &[clocks::Source]) -> Result<()> {
        let clock = &st.host_clock[&owner];
        let block = DeviceBlock::zeroed(clock.len() * 4)?;
        block.write(bytemuck::cast_slice(clock))?;
        st.book.adopt_host_clock(owner, block.addr, folded);
        st.host_clocks.entry(owner).or_default().push(block);
        Ok(())
    }

    /// `owner`'s host clock: what every kernel its host has waited for
    /// had seen at its exit (`num_threads` entries), what a group of
    /// processes' barrier publishes.
    pub fn host_clock(&self, owner: u64) -> Vec<u32> {
        let st = lock(&self.state);
        (st.host_clock.get(&owner).cloned()).unwrap_or_else(|| vec![0; self.num_threads as usize])
    }

    /// Orders every later launch of `owner` after `clock` (another
    /// process's host clock, published at a group barrier this process has
    /// passed, or a group member's): joined into `owner`'s host clock.
    pub fn join_host_clock(&self, owner: u64, clock: &[u32]) -> Result<()> {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let n = self.num_threads as usize;
        let host = st.host_clock.entry(owner).or_insert_with(|| vec![0; n]);
        let before = host.clone();
        join_into(host, clock);
        if *host == before {
            return Ok(());
        }
        self.device.bind()?;
        Self::adopt_host_clock(st, owner, &[])
    }

    /// The races of `owner`'s launches found since its last collection
    /// (call after a synchronisation with every kernel that may still
    /// report), from `owner`'s own report buffer: contexts sharing the
    /// device never take each other's reports.
    pub fn take_reports(&self, owner: u64) -> RaceReports {
        self.collect(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Dim3;

    /// The side table is about 1/256 of the device's memory, from 32 MiB
    /// (small devices) to 256 MiB (an 80 GB H100).
    #[test]
    fn the_side_table_grows_with_the_device() {
        let gib = 1usize << 30;
        let bytes = |total| (1usize << side_log2(total)) * std::mem::size_of::<SideEntry>();
        assert_eq!(bytes(0), 32 << 20);
        assert_eq!(bytes(4 * gib), 32 << 20);
        assert_eq!(bytes(8 * gib), 32 << 20);
        assert_eq!(bytes(16 * gib), 64 << 20);
        assert_eq!(bytes(24 * gib), 64 << 20);
        assert_eq!(bytes(32 * gib), 128 << 20);
        assert_eq!(bytes(80 * gib), 256 << 20);
        assert_eq!(bytes(141 * gib), 256 << 20);
        assert_eq!(bytes(usize::MAX), 256 << 20);
    }

    /// A context's buffer holds its own launches' records, and those of a
    /// straggler kernel of the context gone that had the buffer before: a
    /// collection keeps its own (and those of launches no longer known),
    /// never another context's.
    #[test]
    fn a_collection_keeps_its_own_records_only() {
        let mut launches = LaunchHistory::default();
        let shape = LaunchShape {
            kernel: "k".to_owned(),
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(1, 1, 1),
            host_issued: false,
        };
        launches.insert(1, 10, shape.clone());
        launches.insert(2, 20, shape);
        let rec = |launch: u32, line: u32| {
            let mut r = GpuReportRecord::default();
            r.report.site.kernel_id = launch;
            r.report.site.line = line;
            r
        };
        let lines =
            |v: Vec<GpuReportRecord>| v.iter().map(|r| r.report.site.line).collect::<Vec<_>>();
        let read = vec![rec(1, 1), rec(2, 2), rec(9, 3), rec(1, 4)];
        assert_eq!(lines(owned_records(&launches, read.clone(), 10)), [1, 3, 4]);
        assert_eq!(lines(owned_records(&launches, read, 20)), [2, 3]);
    }
}
