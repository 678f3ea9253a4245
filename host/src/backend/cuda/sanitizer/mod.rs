//! The CUDA backend's sanitized launch seam: the GPU race sanitizer's
//! launches, ordering bookkeeping and report collection
//! (docs/src/design/engine.md). Decoding records into reports is shared
//! host code (`crate::sanitizer::decode`).
//!
//! One [`GpuSanitizer`] per device (process-wide, like the shadow
//! allocator it sits on) owns the device's [`GpuRuntime`] descriptor,
//! which names the race engine's tables (record pool, snapshot arena, exit
//! log, launch ring, site table, SC-fence accumulators, lane-to-device
//! table) in the shadow allocator's runtime-state region of the device,
//! or of its group's first member (`vmm::runtime_state`), and a
//! host-mapped report buffer per sanitized context (named in each
//! launch's record, so that contexts sharing the device, such as parallel
//! tests, neither fill each other's buffer nor count each other's dropped
//! reports).
//!
//! A sanitized launch ([`GpuSanitizer::hidden_args`]) is planned by the
//! process's [`LaunchOrder`] (its serials and lane bounds), its record is
//! written into the launch ring on its stream just before it, and the
//! hidden arguments ([`HIDDEN_PARAMS`]) name the runtime, the record, its
//! base serial and its launch id. Events, stream waits and host waits go
//! to the same `LaunchOrder`; a synchronisation collects the records and
//! decodes them into [`RaceReport`](crate::sanitizer::report::RaceReport)s.
//!
//! Host-issued copies and fills are launches of the range-access entry of
//! one serial (`range_checks`).
//!
//! - `group`: the sanitizers of a group of devices of one process, and of
//!   a group of processes.
//! - `device_memory`: the sanitizer's own device and mapped memory.
//! - `location`: source locations read back from device memory.
//! - `locks`: the sanitizer's locks, which fail at once where a thread
//!   would wait for itself.
//! - `host_sites`: the host call sites of copies and fills, as tags.
//! - `range_checks`: copies and fills as launches of the range-access entry.
//! - `resolve`: what the records' numbers mean, for the shared decoder.
//! - `window`: the window shadow of large and dynamic shared arrays.
//! - `copy_queues`: the threads' queues of `cp.async` copies in flight.
//! - `growing`: a device region the runtime points to, grown by launches.

mod copy_queues;
mod device_memory;
mod group;
mod growing;
mod host_sites;
mod location;
mod locks;
mod range_checks;
mod renew;
mod resolve;
mod window;

pub(crate) use group::{join_group, join_process_order};
use range_checks::RangeState;
pub(crate) use range_checks::{RangeCheck, RangeEntry};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering as MemOrder};
use std::sync::{Arc, Mutex, OnceLock};

use vigil_shared::abi::ReportBufferHeader;
use vigil_shared::block::{
    DivergenceRecord, GlobalTable, DIVERGENT_BARRIER_KIND, GLOBAL_LANES, SANITIZER_SHARED_BYTES,
    UNCHECKED_ARRAYS,
};
use vigil_shared::gpu::{
    extensions_wanted, launch_flags, GpuReportRecord, GpuRuntime, EXTENSIONS_PER_SM, HIDDEN_PARAMS,
    LAUNCH_RECORD_BYTES, LAUNCH_RING_SLOTS, REGIONS_PER_SM,
};
use vigil_shared::race::cta::LaneDevices;
use vigil_shared::race::knowledge::header as arena_header;
use vigil_shared::race::memory::launch_record;
use vigil_shared::race::record::pool_header;
use vigil_shared::race::serial::{lane_of, LANES};

use super::device::CudaDevice;
use super::launch::SanitizedLaunch;
use super::stream::CudaStream;
use super::vmm::CachingPool;
use crate::error::{Error, Result};
use crate::launch_abi::params::{HiddenArgs, ParamBuffer};
use crate::sanitizer::barrier::decode_divergence;
use crate::sanitizer::decode::{decode_all, LaunchShape, PriorSite};
use crate::sanitizer::order::{launch_order, PlannedLaunch, Work};
use crate::sanitizer::report::RaceReports;
use crate::types::{EventId, StreamId};
use vigil_shared::read_only::ReadOnlyRanges;

use super::mapped::MappedBlock;
use copy_queues::CopyQueues;
use device_memory::{read_device, write_device, DeviceBlock};
use host_sites::HostSites;
use location::{LocationCache, LocationLayout};
use resolve::{GpuResolver, LaunchHistory};
use window::WindowRegions;

/// Records a context's report buffer holds (128 bytes each).
const REPORT_CAPACITY: u32 = 1024;
/// log2 of the same-block table's entries per region (40 bytes each: 40
/// KiB a region), the global words a block may touch in one barrier
/// interval before some go unchecked (`vigil_shared::block::GlobalTable`).
const BLOCK_TABLE_LOG2: u32 = 10;
/// What is guarded by the sanitizer's lock.
struct State {
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
    /// The threads' queues of copies in flight.
    copy_queues: CopyQueues,
    /// The lane-to-device table as the device has it.
    lane_devices: LaneDevices,
    /// The launch order's renewal the engine's memory was last emptied
    /// for (`renew`).
    renewed: u64,
}

/// The GPU sanitizer of one device.
pub(crate) struct GpuSanitizer {
    device: Arc<CudaDevice>,
    pool: Arc<CachingPool>,
    num_sms: u32,
    /// This device's rank (in its group; 0 alone).
    rank: u32,
    runtime: DeviceBlock,
    /// What `runtime` holds (rewritten when the device joins a group).
    desc: Mutex<GpuRuntime>,
    /// By owner of a context of this device in a sanitized group, the
    /// group's other members and their contexts' owners: that context's
    /// host waits order theirs too (`group`).
    group: Mutex<HashMap<u64, group::Peers>>,
    block_table: DeviceBlock,
    _block_lanes: DeviceBlock,
    layout: Option<LocationLayout>,
    state: Mutex<State>,
    /// The stream the runtime's own launches run on outside every user
    /// stream's order (`GpuSanitizer::with_own_stream`), made on first use.
    own_stream: Mutex<Option<CudaStream>>,
}

/// Launch ids, unique in the process: a race's earlier access may be
/// another device's (a group of devices shares its memory), and its id
/// must not name a launch of this one.
static NEXT_LAUNCH: AtomicU32 = AtomicU32::new(1);

use locks::lock;

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

/// `words` little-endian `u32`s as bytes.
fn u32_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl GpuSanitizer {
    fn new(device: &Arc<CudaDevice>, pool: &Arc<CachingPool>) -> Result<GpuSanitizer> {
        let vmm = pool.vmm();
        vmm.device(device)?;
        let ordinal = device.ordinal();
        let runtime_state = vmm.runtime_of(ordinal)?;
        let num_sms = device.sm_count().max(1);
        device.bind()?;
        let regions = num_sms * REGIONS_PER_SM;
        // Every SM's regions, then its extension regions.
        let block_table = DeviceBlock::zeroed(
            GlobalTable {
                log2: BLOCK_TABLE_LOG2,
            }
            .bytes((regions + num_sms * EXTENSIONS_PER_SM) as usize),
        )?;
        let block_lanes = DeviceBlock::zeroed(regions as usize * GLOBAL_LANES * 8)?;
        // The device's own region's, or a group of processes' first rank's.
        let tables = vmm.engine_tables(ordinal)?;
        let mut desc = GpuRuntime {
            real_base: vigil_shared::address::real_base(vmm.reserve_base()),
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
            block_table_slots: regions,
            block_lanes: block_lanes.addr,
            // Made by the first launch that needs it (`window`).
            block_shadow: 0,
            // Made by the first launch that keeps copies in flight.
            copy_queues: 0,
            ..GpuRuntime::default()
        };
        tables.name_in(&mut desc);
        // The descriptor, then the region masks and the extension masks
        // (`GpuRuntime::REGION_MASKS_AT`), zeroed: no region held.
        let runtime = DeviceBlock::zeroed(GpuRuntime::ALLOCATION_BYTES)?;
        runtime.write(as_bytes(&desc))?;
        Ok(GpuSanitizer {
            device: device.clone(),
            pool: pool.clone(),
            num_sms,
            rank: runtime_state.rank,
            runtime,
            desc: Mutex::new(desc),
            group: Mutex::new(HashMap::new()),
            block_table,
            _block_lanes: block_lanes,
            layout: LocationLayout::probe(),
            own_stream: Mutex::new(None),
            state: Mutex::new(State {
                launches: LaunchHistory::default(),
                locations: LocationCache::default(),
                buffers: HashMap::new(),
                spare: Vec::new(),
                sites: HostSites::default(),
                range: RangeState::Waiting(Vec::new()),
                unchecked_seen: [0; 2],
                window: WindowRegions::default(),
                copy_queues: CopyQueues::default(),
                lane_devices: LaneDevices::default(),
                renewed: 0,
            }),
        })
    }

    /// The hidden arguments of `sanitized`, about to be enqueued on
    /// `stream` (the launch's stream): plans its serials and lane bounds,
    /// and enqueues the launch's record on `stream`, so that it lands
    /// before the kernel starts.
    pub(crate) fn hidden_args(
        &self,
        sanitized: &SanitizedLaunch<'_>,
        stream: &CudaStream,
    ) -> Result<HiddenArgs> {
        let SanitizedLaunch {
            owner,
            launch,
            shared_window,
            ..
        } = *sanitized;
        let (stream_id, kernel, config) = (launch.stream, launch.kernel, &launch.config);
        let mut st = lock(&self.state);
        // A kernel without shared memory of its own needs no window shadow.
        if shared_window > SANITIZER_SHARED_BYTES as u64 {
            self.device.bind()?;
            st.window
                .ensure(&self.runtime, u64::from(self.num_sms), shared_window)?;
        }
        if sanitized.copies_in_flight {
            let threads = config.block.x * config.block.y * config.block.z;
            self.device.bind()?;
            st.copy_queues
                .ensure(&self.runtime, u64::from(self.num_sms), u64::from(threads))?;
        }
        let shape = LaunchShape {
            kernel: kernel.to_owned(),
            grid: config.grid,
            block: config.block,
            host_issued: false,
        };
        let blocks = u64::from(config.grid.x) * u64::from(config.grid.y) * u64::from(config.grid.z);
        let work = Work::kernel(config.programmatic_stream_serialization);
        let mut planned = self.plan(&mut st, owner, stream_id, shape, blocks, work, None)?;
        planned.extensions = extensions_wanted(sanitized.resident);
        if sanitized.copies_in_flight {
            planned.flags |= launch_flags::COPIES_IN_FLIGHT;
        }
        // A block that checks its shared memory through the window shadow
        // needs its regions (the shadow's slot is its region's) from its
        // first shared access, as does one of an entry whose blocks
        // claimed theirs before: it claims them at entry, while its other
        // warps wait at the entry's barrier, not in a hook that warps of
        // the block enter one at a time.
        if sanitized.path.claim_at_entry {
            planned.flags |= launch_flags::CLAIM_AT_ENTRY;
        }
        planned.path_word = sanitized.path.record;
        self.device.bind()?;
        self.enqueue_record(&mut st, &planned, Some(stream))?;
        drop(st);
        Ok(self.hidden(&planned, launch.params.read_only_ranges()))
    }

    /// Plans a sanitized launch of `shape` (`blocks` CTAs, or one serial
    /// for a transfer) of `work` on `stream_id` by `owner`: its serials,
    /// lane bounds, ring record and launch id.
    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        st: &mut State,
        owner: u64,
        stream_id: StreamId,
        shape: LaunchShape,
        blocks: u64,
        work: Work,
        host_site: Option<u64>,
    ) -> Result<RecordPlan> {
        let reports = report_buffer(st, owner)?;
        let (flags, count) = if work == Work::Transfer {
            (launch_flags::ONE_SERIAL, 1)
        } else {
            (0, u32::try_from(blocks).unwrap_or(u32::MAX))
        };
        let (planned, r) = {
            let mut order = lock(launch_order());
            let planned = order
                .launch(stream_id, owner, self.rank, count, work)
                .map_err(|e| Error::Sanitizer {
                    message: e.to_string(),
                })?;
            // Ring numbers are the process's (a group's members share a
            // ring), in this rank's share of it (a group of processes).
            (planned, order.next_ring(LAUNCH_RING_SLOTS))
        };
        let launch = NEXT_LAUNCH.fetch_add(1, MemOrder::Relaxed);
        st.launches.insert(
            launch,
            owner,
            shape,
            planned.base,
            planned.count,
            host_site,
            r,
        );
        Ok(RecordPlan {
            planned,
            launch,
            lane_ref: r,
            flags,
            reports,
            extensions: 0,
            path_word: 0,
        })
    }

    /// What the device's `GpuRuntime` holds now, as a copy: no caller
    /// keeps the descriptor's lock past this call.
    fn desc(&self) -> GpuRuntime {
        *lock(&self.desc)
    }

    /// The device address of launch `r`'s ring slot (in the group's ring).
    fn ring_slot(&self, r: u32) -> u64 {
        self.desc().launches + u64::from(r % LAUNCH_RING_SLOTS) * LAUNCH_RECORD_BYTES as u64
    }

    /// Writes `plan`'s record into its ring slot on `stream` (or at once,
    /// synchronously, when no stream orders it yet), and the lane-device
    /// table if a lane changed devices (the caller bound the context).
    fn enqueue_record(
        &self,
        st: &mut State,
        plan: &RecordPlan,
        stream: Option<&CudaStream>,
    ) -> Result<()> {
        // Only the lanes this process rented changed: the table is shared
        // with the group's other processes, whose lanes they write.
        let devices = *lock(launch_order()).devices();
        let table = self.desc().lane_devices;
        for (k, (now, was)) in devices
            .0
            .iter()
            .zip(st.lane_devices.0.iter_mut())
            .enumerate()
        {
            if now != was {
                *was = *now;
                let at = table + k as u64;
                match stream {
                    Some(s) => DeviceBlock::write_async(at, &[*now], s.raw())?,
                    None => write_device(at, &[*now])?,
                }
            }
        }
        let words = plan.record(self.rank);
        let bytes = u32_bytes(&words);
        match stream {
            Some(s) => DeviceBlock::write_async(self.ring_slot(plan.lane_ref), &bytes, s.raw()),
            None => write_device(self.ring_slot(plan.lane_ref), &bytes),
        }
    }

    /// `buf` with the hidden arguments of a launch planned as `plan`.
    fn with_hidden(&self, buf: &ParamBuffer, plan: &RecordPlan) -> ParamBuffer {
        buf.with_hidden(&self.hidden(plan, buf.read_only_ranges()))
    }

    /// The hidden arguments ([`HIDDEN_PARAMS`]) of a launch planned as
    /// `plan`, with the read-only ranges `read_only`.
    fn hidden(&self, plan: &RecordPlan, read_only: ReadOnlyRanges) -> HiddenArgs {
        let ordinal = Some(self.device.ordinal());
        let mut args = HiddenArgs::new();
        args.pointer(self.runtime.addr, ordinal)
            .pointer(self.ring_slot(plan.lane_ref), ordinal)
            .u32(plan.planned.base)
            .u32(plan.launch)
            .u32(plan.extensions);
        plan.push_entry_fields(&mut args, self.rank, self.desc().real_base);
        for bound in read_only.words() {
            args.u64(bound);
        }
        debug_assert_eq!(args.len(), HIDDEN_PARAMS.len());
        args
    }

    /// Runs `f` on the sanitizer's own stream (made on first use, then
    /// kept): the transfer checks that waited for the range-access entry
    /// and the shadow reclaims of freed buffers. One caller at a time.
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
        lock(launch_order()).drop_owner(owner);
        let mut st = lock(&self.state);
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
        let (read, claimed, bounded) = match st.buffers.get(&owner) {
            Some(buffer) => take_records(buffer),
            None => (Vec::new(), 0, 0),
        };
        let dropped = u64::from(claimed) - read.len() as u64;
        let mut records = owned_records(&st.launches, read, owner);
        let [words, arrays] = self.unchecked_since(&mut st.unchecked_seen);
        let lost = self.take_history_lost() + u64::from(bounded);
        self.renew_if_idle(&mut st);
        if records.is_empty() && dropped == 0 && words == 0 && arrays == 0 && lost == 0 {
            return RaceReports::new();
        }
        let divergent: Vec<DivergenceRecord> = records
            .iter()
            .filter(|r| r.report.kind == DIVERGENT_BARRIER_KIND)
            .map(|r| bytemuck::cast(*r))
            .collect();
        records.retain(|r| r.report.kind != DIVERGENT_BARRIER_KIND);
        // Earlier accesses by another device of a group name its launches
        // (asked for without this lock held: no two sanitizers' locks are
        // ever held together).
        drop(st);
        let elsewhere = self.peer_launches(records.iter().map(|r| r.report.prior_tid));
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
        // Read before the resolver: a lock taken in a field of its
        // literal is held to the end of the statement.
        let ring = self.desc().launches;
        let devices = self.lane_devices();
        let resolver = GpuResolver {
            launches,
            elsewhere: &elsewhere,
            layout: self.layout,
            locations: std::cell::RefCell::new(locations),
            host_sites: sites,
            read: &read,
            ring,
            allocation: &allocation,
            devices,
        };
        let priors: Vec<Option<PriorSite>> = records
            .iter()
            .map(|r| resolver.prior_site(&r.report, &r.prior))
            .collect();
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

    /// Takes the engine's precision-loss counts (pool allocations that
    /// found it full, merges that found the arena full or coarsened a
    /// snapshot, exits the log could not hold) and clears them on the
    /// device. A kernel still
    /// running may count between the read and the clear, which loses
    /// those counts (they only say that, and about how much, precision
    /// was lost). A failed read or write counts nothing.
    fn take_history_lost(&self) -> u64 {
        if self.device.bind().is_err() {
            return 0;
        }
        let mut lost = 0u64;
        // The tables this device works on (a group's shared ones: another
        // member may take a count first).
        let d = self.desc();
        let counters: [(u64, usize); 4] = [
            (d.pool + 8 * pool_header::EXHAUSTED as u64, 8),
            (d.arena + 4 * arena_header::LOST as u64, 4),
            (d.arena + 4 * arena_header::COARSENED as u64, 4),
            (d.exits + 8, 4),
        ];
        for (addr, len) in counters {
            let Ok(bytes) = read_device(addr, len) else {
                continue;
            };
            let mut v = [0u8; 8];
            v[..len].copy_from_slice(&bytes);
            let n = u64::from_le_bytes(v);
            if n > 0 && write_device(addr, &vec![0; len]).is_ok() {
                lost += n;
            }
        }
        lost
    }

    /// What the same-block table's header counted since the last call
    /// (`seen` holding the counts then): word accesses it skipped (it was
    /// full), and shared arrays declared too large for a shadow
    /// (`vigil_shared::block::UNCHECKED_ARRAYS`). A read that fails
    /// counts nothing.
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

/// A launch as planned for its ring record.
pub(crate) struct RecordPlan {
    planned: PlannedLaunch,
    launch: u32,
    lane_ref: u32,
    flags: u32,
    reports: u64,
    /// Extension regions of the same-block table each CTA asks for
    /// (`vigil_shared::gpu::extensions_wanted`).
    extensions: u32,
    /// Its entry's path word with what its CTAs are to tell there
    /// (`launch_record::PATH_WORD`; 0: nothing).
    path_word: u64,
}

impl RecordPlan {
    /// A plan of no launch, for tests of what carries one.
    #[cfg(test)]
    pub(crate) fn for_test() -> RecordPlan {
        RecordPlan {
            planned: PlannedLaunch {
                base: 1,
                count: 1,
                bounds: vigil_shared::race::serial::LaneBounds::NONE,
                global: vigil_shared::race::serial::LaneBounds::NONE,
            },
            launch: 1,
            lane_ref: 1,
            flags: 0,
            reports: 0,
            extensions: 0,
            path_word: 0,
        }
    }

    /// Appends to `args` what a CTA's entry keeps of the launch's record
    /// for device `rank`, in [`HIDDEN_PARAMS`]' order (its serials, flags,
    /// lane reference, rank, the bound of its own lane, its path word),
    /// and the runtime's `real_base`: the entry reads them as parameters
    /// instead of loading the record.
    fn push_entry_fields(&self, args: &mut HiddenArgs, rank: u32, real_base: u64) {
        args.u32(self.planned.count)
            .u32(self.flags)
            .u32(self.lane_ref)
            .u32(rank)
            .u32(self.planned.bounds.0[lane_of(self.planned.base)])
            .u64(self.path_word)
            .u64(real_base);
    }

    /// The launch's record ([`launch_record`]) for device `rank`.
    fn record(&self, rank: u32) -> Vec<u32> {
        let mut w = vec![0u32; launch_record::WORDS];
        w[launch_record::TAG] = self.lane_ref;
        w[launch_record::BASE] = self.planned.base;
        w[launch_record::COUNT] = self.planned.count;
        w[launch_record::DEVICE] = rank;
        w[launch_record::LAUNCH_ID] = self.launch;
        w[launch_record::FLAGS] = self.flags;
        w[launch_record::REPORTS] = self.reports as u32;
        w[launch_record::REPORTS + 1] = (self.reports >> 32) as u32;
        w[launch_record::PATH_WORD] = self.path_word as u32;
        w[launch_record::PATH_WORD + 1] = (self.path_word >> 32) as u32;
        w[launch_record::BOUNDS..launch_record::BOUNDS + LANES]
            .copy_from_slice(&self.planned.bounds.0);
        w[launch_record::GLOBAL..launch_record::GLOBAL + LANES]
            .copy_from_slice(&self.planned.global.0);
        w
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
            b.words()[2].store(0, MemOrder::Relaxed);
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

/// Reads and empties a report buffer: its records, how many were claimed
/// (more than it holds when some were dropped) and the bounded checks it
/// counted.
fn take_records(buffer: &MappedBlock) -> (Vec<GpuReportRecord>, u32, u32) {
    let words = buffer.words();
    let claimed = words[0].swap(0, MemOrder::Relaxed);
    let bounded = words[2].swap(0, MemOrder::Relaxed);
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
    (records, claimed, bounded)
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
    pub fn on_event_record(&self, _owner: u64, event: EventId, stream: StreamId) {
        lock(launch_order()).record(event, stream);
    }

    /// `owner`'s `stream` waits for `event`.
    pub fn on_stream_wait(&self, owner: u64, stream: StreamId, event: EventId) {
        lock(launch_order()).wait(stream, event, owner);
    }

    /// `owner`'s host waited: its later work is ordered after what it
    /// waited for. In a group of devices of this process, the other member
    /// contexts' later launches too: the host waited, so its later launches
    /// on any rank come after what it waited for.
    pub fn on_host_wait(&self, owner: u64, wait: HostWait) -> Result<()> {
        {
            let mut order = lock(launch_order());
            match wait {
                HostWait::Stream(id) => order.sync_stream(owner, id),
                HostWait::Event(id) => order.sync_event(owner, id),
                HostWait::All => order.sync_owner(owner),
            }
        }
        self.share_host_clock(owner)
    }

    /// `owner`'s host clock: what its host has waited for, per lane (what
    /// a group of processes' barrier publishes).
    pub fn host_clock(&self, owner: u64) -> Vec<u32> {
        lock(launch_order()).host_clock(owner).0.to_vec()
    }

    /// Orders every later launch of `owner` after `clock` (another
    /// process's or a group member's host clock, per lane).
    pub fn join_host_clock(&self, owner: u64, clock: &[u32]) -> Result<()> {
        let mut bounds = vigil_shared::race::serial::LaneBounds::NONE;
        for (b, c) in bounds.0.iter_mut().zip(clock) {
            *b = *c;
        }
        lock(launch_order()).join_host(owner, &bounds);
        Ok(())
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

    /// A CTA's entry reads the record's fields it keeps from the hidden
    /// parameters, not from the ring: they say what the record says.
    #[test]
    fn the_entry_fields_say_what_the_record_says() {
        let base = (3 << vigil_shared::race::serial::LANE_SHIFT) + 17;
        let mut bounds = vigil_shared::race::serial::LaneBounds::NONE;
        for (i, b) in bounds.0.iter_mut().enumerate() {
            *b = 1000 + i as u32;
        }
        let plan = RecordPlan {
            planned: PlannedLaunch {
                base,
                count: 40,
                bounds,
                global: vigil_shared::race::serial::LaneBounds::NONE,
            },
            launch: 5,
            lane_ref: 77,
            flags: launch_flags::COPIES_IN_FLIGHT | launch_flags::CLAIM_AT_ENTRY,
            reports: 0xdead_0000,
            extensions: 2,
            path_word: 0x7f00_1234_5678_0002,
        };
        let (rank, real_base) = (2, 0x7000_0000_0000);
        let mut fields = HiddenArgs::new();
        plan.push_entry_fields(&mut fields, rank, real_base);
        let rec = plan.record(rank);
        let word = |at: usize| u64::from(rec[at]) | u64::from(rec[at + 1]) << 32;
        let mut expected = HiddenArgs::new();
        expected
            .u32(rec[launch_record::COUNT])
            .u32(rec[launch_record::FLAGS])
            .u32(rec[launch_record::TAG])
            .u32(rec[launch_record::DEVICE])
            .u32(rec[launch_record::BOUNDS + 3])
            .u64(word(launch_record::PATH_WORD))
            .u64(real_base);
        assert_eq!(fields, expected);
        assert_eq!(rec[launch_record::BOUNDS + 3], 1003);
        // In the entry's order: after the runtime, the record, the base,
        // the launch id and the extensions; before the read-only ranges.
        let names: Vec<&str> = HIDDEN_PARAMS[5..5 + fields.len()]
            .iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(
            names,
            [
                "__vigil_count",
                "__vigil_flags",
                "__vigil_tag",
                "__vigil_device",
                "__vigil_own_bound",
                "__vigil_path_word",
                "__vigil_real_base"
            ]
        );
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
        launches.insert(1, 10, shape.clone(), 100, 1, None, 1);
        launches.insert(2, 20, shape, 101, 1, None, 2);
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

    /// A launch's record holds its serials, report buffer and bounds where
    /// the device reads them.
    #[test]
    fn a_record_is_laid_out_as_the_device_reads_it() {
        let mut bounds = vigil_shared::race::serial::LaneBounds::NONE;
        bounds.0[3] = 77;
        let plan = RecordPlan {
            planned: PlannedLaunch {
                base: 1000,
                count: 12,
                bounds,
                global: vigil_shared::race::serial::LaneBounds::NONE,
            },
            launch: 5,
            lane_ref: 9,
            flags: launch_flags::ONE_SERIAL,
            reports: 0x1234_5678_9abc,
            extensions: 0,
            path_word: 0x7f00_0000_1004,
        };
        let w = plan.record(2);
        assert_eq!(w.len() * 4, LAUNCH_RECORD_BYTES);
        assert_eq!(w[launch_record::TAG], 9);
        assert_eq!(
            (w[launch_record::BASE], w[launch_record::COUNT]),
            (1000, 12)
        );
        assert_eq!(w[launch_record::DEVICE], 2);
        assert_eq!(w[launch_record::BOUNDS + 3], 77);
        assert_eq!(
            u64::from(w[launch_record::REPORTS]) | u64::from(w[launch_record::REPORTS + 1]) << 32,
            0x1234_5678_9abc
        );
        let word = |at: usize| u64::from(w[at]) | u64::from(w[at + 1]) << 32;
        assert_eq!(word(launch_record::PATH_WORD), 0x7f00_0000_1004);
        assert_eq!(word(launch_record::ANCHOR), 0, "the CTAs write the anchor");
    }
}
