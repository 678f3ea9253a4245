//! The sanitizer's shadow-memory allocator on CUDA virtual memory
//! (docs/src/design/address-space.md).
//!
//! - [`Vmm`] reserves one 1 TiB range aligned to 1 TiB (user memory in the
//!   upper half, its shadow in the lower half) and a second range for the
//!   per-device runtime state, hands out virtual blocks of the real half
//!   with a [`BuddyTree`](crate::buddy_allocator::BuddyTree), and backs each allocation with two
//!   physical handles (data and shadow), mapped, accessible, the shadow
//!   zeroed on the allocation's stream. Every step is undone exactly on
//!   failure ([`physical`]).
//! - [`CachingPool`] sits above it like PyTorch's caching allocator: freed
//!   blocks are kept per device and size class and reused, on the same
//!   stream at once, on another stream once an event recorded at the free
//!   has completed; a reused block's shadow is zeroed on its new stream.
//! - [`export`]: allocations and runtime state as POSIX file descriptors.
//! - [`group`]: the runtime state wired to a group of processes.
//! - [`SanitizerConfig`]: the settings, from a builder and `VIGIL_*` variables.
//!
//! Every address constant and formula comes from [`vigil_shared::address`]
//! through [`layout`], the one place this module names them.

mod error;
pub mod export;
pub mod group;
pub(crate) mod physical;
mod pool;
pub mod reservation;
pub mod runtime_state;

pub use crate::sanitizer::config::{self, ConfigError, SanitizerConfig, SanitizerConfigBuilder};
#[allow(deprecated)]
pub use crate::sanitizer::config::{VmmConfig, VmmConfigBuilder};
pub use error::{VmmError, VmmResult};
pub use export::{ExportedAllocation, ExportedRuntimeState};
pub use pool::{size_class, CachingPool, PoolStats};

use super::device::device_count;
use super::driver::virtual_memory;
use super::{AsCudaDevice, AsCudaStream, CudaDevice, CudaStream};
use crate::buddy_allocator::BuddyTree;
use cudarc::driver::sys;
use layout::*;
use physical::{Cuda, MappedPair, PairPlan};
use reservation::Reservation;
use runtime_state::DeviceRuntime;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use vigil_shared::abi::GlobalState;

pub mod layout {
    //! The address-space constants and formulas the allocator uses, all
    //! from [`vigil_shared::address`] (docs/src/design/address-space.md): the 1 TiB reservation,
    //! its real half at `reserve + 2^39` of which [`REAL_CAPACITY`]
    //! (256 GiB) is usable because each 4-byte word needs an 8-byte cell,
    //! and the per-device runtime-state stride.

    pub use vigil_shared::address::{
        device_globals, global_state_of, is_managed, real_base, reserve_base_of, shadow_address,
        shadow_bytes_for, MAX_DEVICES, PER_DEVICE_STATE_STRIDE, REAL_CAPACITY, REAL_OFFSET,
        RESERVE_BYTES, THREAD_STATES_OFFSET,
    };

    /// `x` rounded up to a multiple of `align` (a power of two).
    pub const fn round_up(x: u64, align: u64) -> u64 {
        (x + align - 1) & !(align - 1)
    }
}

/// Smallest virtual block the buddy tree hands out: the usual (and
/// minimum) VMM granularity of NVIDIA GPUs.
pub const MIN_BLOCK: u64 = 2 << 20;

/// One live allocation of the sanitizer's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// First byte of the user data (in the real half).
    pub ptr: u64,
    /// Bytes asked for.
    pub size: u64,
    /// Bytes mapped (the size rounded up to the allocation granularity).
    pub mapped_bytes: u64,
    /// First byte of its shadow (in the lower half).
    pub shadow_ptr: u64,
    /// Bytes of shadow mapped (8 per 4-byte word of `mapped_bytes`).
    pub shadow_bytes: u64,
    /// Device ordinal.
    pub device: usize,
}

/// The interface a [`crate::DeviceBuffer`] needs from an allocator, so the
/// sanitized mode can route every buffer through the shadow allocator
/// (implemented by [`Vmm`] and [`CachingPool`]).
pub trait DeviceAllocator: Send + Sync {
    /// Allocates `size` bytes for work on `stream`.
    fn allocate(&self, stream: &CudaStream, size: u64) -> VmmResult<Allocation>;
    /// Frees the allocation at `ptr`; `stream` is the last stream that used it.
    fn deallocate(&self, ptr: u64, stream: &CudaStream) -> VmmResult<()>;
    /// Frees the allocation at `ptr` after waiting for its whole device, for
    /// owners that do not know the last stream (a buffer's `Drop`).
    fn deallocate_idle(&self, ptr: u64) -> VmmResult<()>;
}

pub(crate) struct Record {
    pub alloc: Allocation,
    pub pair: MappedPair,
    pub shareable: bool,
}

pub(crate) struct State {
    pub buddy: BuddyTree,
    pub live: HashMap<u64, Record>,
    pub freed: HashSet<u64>,
}

pub(crate) struct DeviceEntry {
    pub ctx: Arc<CudaDevice>,
    pub granularity: u64,
    pub shareable: bool,
    pub rank: u32,
}

pub(crate) struct Shared {
    pub config: Mutex<SanitizerConfig>,
    pub frozen: AtomicBool,
    /// Sanitized launches noted so far (see [`Vmm::note_sanitized_launch`]).
    pub launch_epoch: AtomicU64,
    /// Caching pools may skip resetting a clean shadow.
    pub lazy_reset: AtomicBool,
    pub state: Mutex<State>,
    pub devices: Mutex<HashMap<usize, Arc<DeviceEntry>>>,
    /// Indexed by rank.
    pub runtime: Mutex<Vec<Option<DeviceRuntime>>>,
    pub home: Arc<CudaDevice>,
    // Dropped after `Shared::drop` has unmapped everything mapped into them.
    pub runtime_reservation: Reservation,
    pub reservation: Reservation,
}

/// The shadow-memory allocator. Cheap to clone (shared); thread-safe.
/// See the module documentation.
#[derive(Clone)]
pub struct Vmm {
    pub(crate) shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the tree half-updated in
    // a way later calls could not detect (check_invariants); keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl fmt::Debug for Vmm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.shared.state);
        f.debug_struct("Vmm")
            .field("reserve_base", &format_args!("{:#x}", self.reserve_base()))
            .field("globals_base", &format_args!("{:#x}", self.globals_base()))
            .field("live", &st.live.len())
            .field("buddy", &st.buddy)
            .finish()
    }
}

fn device_attr(ctx: &CudaDevice, attr: sys::CUdevice_attribute) -> VmmResult<i32> {
    Ok(ctx.attribute(attr)?)
}

impl Vmm {
    /// Reserves the address space on `ctx`'s device with `config`. Fails
    /// with [`VmmError::NoVmmSupport`] on a device without virtual memory
    /// management. Nothing is mapped until the first allocation.
    pub fn new(ctx: &impl AsCudaDevice, config: SanitizerConfig) -> VmmResult<Vmm> {
        let ctx = ctx.cuda_device()?;
        ctx.bind()?;
        check_vmm_support(ctx)?;
        let reservation = Reservation::new(RESERVE_BYTES, RESERVE_BYTES)?;
        let runtime_reservation = Reservation::new(
            MAX_DEVICES * PER_DEVICE_STATE_STRIDE,
            PER_DEVICE_STATE_STRIDE,
        )?;
        let buddy = BuddyTree::new(REAL_CAPACITY, MIN_BLOCK).map_err(|_| VmmError::Geometry {
            capacity: REAL_CAPACITY,
            min_block: MIN_BLOCK,
        })?;
        Ok(Vmm {
            shared: Arc::new(Shared {
                config: Mutex::new(config),
                frozen: AtomicBool::new(false),
                launch_epoch: AtomicU64::new(0),
                lazy_reset: AtomicBool::new(false),
                state: Mutex::new(State {
                    buddy,
                    live: HashMap::new(),
                    freed: HashSet::new(),
                }),
                devices: Mutex::new(HashMap::new()),
                runtime: Mutex::new(vec![None; MAX_DEVICES as usize]),
                home: ctx.clone(),
                runtime_reservation,
                reservation,
            }),
        })
    }

    /// [`Vmm::new`] with [`SanitizerConfig::from_env`].
    pub fn from_env(ctx: &impl AsCudaDevice) -> VmmResult<Vmm> {
        Vmm::new(ctx, SanitizerConfig::from_env()?)
    }

    /// The configuration in force.
    pub fn config(&self) -> SanitizerConfig {
        lock(&self.shared.config).clone()
    }

    /// Replaces the configuration; [`VmmError::ConfigFrozen`] after the
    /// first allocation (or runtime-state import).
    pub fn set_config(&self, config: SanitizerConfig) -> VmmResult<()> {
        let mut c = lock(&self.shared.config);
        if self.shared.frozen.load(Ordering::Acquire) {
            return Err(VmmError::ConfigFrozen {
                what: format!("the configuration ({config:?})"),
            });
        }
        *c = config;
        Ok(())
    }

    fn freeze(&self) -> SanitizerConfig {
        let c = lock(&self.shared.config);
        self.shared.frozen.store(true, Ordering::Release);
        c.clone()
    }

    /// Base of the 1 TiB reservation (1 TiB aligned; the shadow half).
    pub fn reserve_base(&self) -> u64 {
        self.shared.reservation.base()
    }

    /// First byte of the real half.
    pub fn real_base(&self) -> u64 {
        real_base(self.reserve_base())
    }

    /// Base of the runtime-state reservation (rank 0's region).
    pub fn globals_base(&self) -> u64 {
        self.shared.runtime_reservation.base()
    }

    /// Number of live allocations.
    pub fn live_allocations(&self) -> usize {
        lock(&self.shared.state).live.len()
    }

    /// Bytes of the real half handed out (virtual, power-of-two blocks).
    pub fn reserved_bytes(&self) -> u64 {
        lock(&self.shared.state).buddy.used_bytes()
    }

    /// The live allocation containing `ptr`, if any.
    pub fn lookup(&self, ptr: u64) -> Option<Allocation> {
        let st = lock(&self.shared.state);
        let off = ptr.checked_sub(self.real_base())?;
        let block = st.buddy.lookup(off)?;
        let rec = st.live.get(&(self.real_base() + block.offset))?;
        (ptr < rec.alloc.ptr + rec.alloc.mapped_bytes).then_some(rec.alloc)
    }

    /// The device entry of `ctx`, set up on first use: VMM support,
    /// granularity, handle type, rank, runtime state.
    pub(crate) fn device(&self, ctx: &Arc<CudaDevice>) -> VmmResult<Arc<DeviceEntry>> {
        let ordinal = ctx.ordinal();
        let mut devices = lock(&self.shared.devices);
        if let Some(d) = devices.get(&ordinal) {
            return Ok(d.clone());
        }
        let config = self.freeze();
        ctx.bind()?;
        check_vmm_support(ctx)?;
        let shareable = config.shareable_handles()
            && device_attr(ctx, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)? != 0;
        let granularity = granularity(ordinal, shareable)?;
        if !granularity.is_power_of_two() || !MIN_BLOCK.is_multiple_of(granularity) {
            return Err(VmmError::Granularity {
                ordinal,
                granularity,
                min_block: MIN_BLOCK,
            });
        }
        let count = device_count()?;
        let (rank, num_ranks) =
            config
                .rank_of(ordinal, count)
                .ok_or_else(|| VmmError::NotInTopology {
                    ordinal,
                    ranks: config
                        .device_ranks()
                        .map(<[usize]>::to_vec)
                        .unwrap_or_else(|| (0..count).collect()),
                })?;
        {
            let mut runtime = lock(&self.shared.runtime);
            if runtime[rank as usize].is_none() {
                let params = runtime_state::DeviceParams {
                    ordinal,
                    rank,
                    num_ranks,
                    // One thread state per sanitizer slot of every SM.
                    num_sms: ctx.sm_count()
                        * super::sanitizer::slots_per_sm_fitting(
                            ctx.sm_count(),
                            num_ranks,
                            config.clock_buffer_size(),
                            config.shadow_pool_records(),
                        ),
                    clock_buffer_size: config.clock_buffer_size(),
                    pool_records: config.shadow_pool_records(),
                    seed: config.seed(),
                    granularity,
                    shareable,
                    reserve_base: self.reserve_base(),
                    globals_base: self.globals_base(),
                };
                runtime[rank as usize] = Some(runtime_state::create(&Cuda, &params)?);
            }
        }
        let entry = Arc::new(DeviceEntry {
            ctx: ctx.clone(),
            granularity,
            shareable,
            rank,
        });
        devices.insert(ordinal, entry.clone());
        Ok(entry)
    }

    /// Allocates `size` bytes for work on `stream`: a virtual block of the
    /// real half, data and shadow handles mapped, the shadow zeroed on
    /// `stream`. The first allocation on a device also creates its runtime
    /// state and freezes the configuration.
    pub fn alloc(&self, stream: &impl AsCudaStream, size: u64) -> VmmResult<Allocation> {
        let stream = stream.cuda_stream()?;
        check_size(size)?;
        let ctx = stream.device();
        let dev = self.device(ctx)?;
        let ordinal = ctx.ordinal();
        let mapped = round_up(size, dev.granularity);
        let real = self.real_base();
        let block = lock(&self.shared.state)
            .buddy
            .alloc(mapped)
            .map_err(|e| VmmError::from_buddy(e, real, real + REAL_CAPACITY))?;
        let guard = BlockGuard {
            vmm: self,
            offset: Some(block.offset),
        };
        let ptr = real + block.offset;
        ctx.bind()?;
        let pair = physical::map_pair(
            &Cuda,
            &PairPlan {
                ordinal,
                data_va: ptr,
                data_bytes: mapped,
                shadow_va: shadow_address(ptr),
                shadow_bytes: shadow_bytes_for(mapped),
                shareable: dev.shareable,
                access: &[ordinal],
                stream: stream.raw(),
            },
        )?;
        guard.disarm();
        let alloc = Allocation {
            ptr,
            size,
            mapped_bytes: mapped,
            shadow_ptr: pair.shadow.va,
            shadow_bytes: pair.shadow.bytes,
            device: ordinal,
        };
        let mut st = lock(&self.shared.state);
        st.freed.remove(&ptr);
        st.live.insert(
            ptr,
            Record {
                alloc,
                pair,
                shareable: dev.shareable,
            },
        );
        Ok(alloc)
    }

    /// Takes the live record of `ptr` out of the table, or says precisely
    /// why `ptr` cannot be freed.
    pub(crate) fn take_record(&self, ptr: u64) -> VmmResult<Record> {
        let mut st = lock(&self.shared.state);
        if let Some(rec) = st.live.remove(&ptr) {
            return Ok(rec);
        }
        Err(self.classify(&st, ptr))
    }

    fn classify(&self, st: &State, ptr: u64) -> VmmError {
        let real = self.real_base();
        if !(real..real + REAL_CAPACITY).contains(&ptr) {
            return VmmError::ForeignPointer {
                ptr,
                real_start: real,
                real_end: real + REAL_CAPACITY,
            };
        }
        if let Some(block) = st.buddy.lookup(ptr - real) {
            let base = real + block.offset;
            let size = st.live.get(&base).map_or(block.size, |r| r.alloc.size);
            return VmmError::InteriorPointer { ptr, base, size };
        }
        if st.freed.contains(&ptr) {
            VmmError::DoubleFree { ptr }
        } else {
            VmmError::NotAllocated { ptr }
        }
    }

    /// `Ok` when `ptr` is a live allocation's base, else why it is not.
    pub(crate) fn check_live(&self, ptr: u64) -> VmmResult<()> {
        let st = lock(&self.shared.state);
        if st.live.contains_key(&ptr) {
            Ok(())
        } else {
            Err(self.classify(&st, ptr))
        }
    }

    /// Waits until all work on device `ordinal` has finished.
    pub(crate) fn sync_device(&self, ordinal: usize) -> VmmResult<()> {
        let ctx = lock(&self.shared.devices)
            .get(&ordinal)
            .map(|d| d.ctx.clone());
        match ctx {
            Some(ctx) => Ok(ctx.synchronize()?),
            None => Err(VmmError::NoRuntimeState { ordinal }),
        }
    }

    /// Frees the allocation at `ptr` after waiting for its whole device
    /// (when the last stream that used it is not known).
    pub fn free_idle(&self, ptr: u64) -> VmmResult<()> {
        let rec = self.take_record(ptr)?;
        if let Err(e) = self.sync_device(rec.alloc.device) {
            self.restore_record(rec);
            return Err(e);
        }
        self.release_record(rec)
    }

    /// Puts a record back (a free that could not wait for its stream).
    pub(crate) fn restore_record(&self, rec: Record) {
        lock(&self.shared.state).live.insert(rec.alloc.ptr, rec);
    }

    /// Frees the allocation at `ptr` after waiting for `stream` (the last
    /// stream that used it): unmaps, releases, coalesces. Double frees,
    /// foreign and interior pointers are typed errors.
    pub fn free(&self, ptr: u64, stream: &impl AsCudaStream) -> VmmResult<()> {
        let stream = stream.cuda_stream()?;
        let rec = self.take_record(ptr)?;
        if let Err(e) = stream.synchronize() {
            self.restore_record(rec);
            return Err(e.into());
        }
        self.release_record(rec)
    }

    /// Unmaps and releases a record whose users have all finished, and
    /// returns its block to the tree. If unmapping fails the virtual block
    /// stays out of the tree (never handed out again while possibly mapped).
    pub(crate) fn release_record(&self, rec: Record) -> VmmResult<()> {
        let ctx = lock(&self.shared.devices)
            .get(&rec.alloc.device)
            .map(|d| d.ctx.clone());
        if let Some(ctx) = ctx {
            ctx.bind()?;
        }
        physical::teardown(&Cuda, &[rec.pair.data, rec.pair.shadow])?;
        let mut st = lock(&self.shared.state);
        let offset = rec.alloc.ptr - self.real_base();
        // The block was handed out for this record and not freed since.
        if let Err(e) = st.buddy.free(offset) {
            eprintln!(
                "vigil: returning {:#x} to the buddy tree: {e}",
                rec.alloc.ptr
            );
        }
        st.freed.insert(rec.alloc.ptr);
        Ok(())
    }

    /// Zeroes, on `stream`, the shadow of the first `alloc.size` bytes of a
    /// live allocation (the caching pool does this before handing a block
    /// out again: whatever its next user may access legitimately starts
    /// clean; a later, larger reuse of the block resets more).
    pub fn reset_shadow(&self, alloc: &Allocation, stream: &impl AsCudaStream) -> VmmResult<()> {
        let stream = stream.cuda_stream()?;
        let found = stream.device().ordinal();
        if found != alloc.device {
            return Err(VmmError::WrongDevice {
                op: "reset_shadow",
                ptr: alloc.ptr,
                expected: alloc.device,
                found,
            });
        }
        stream.device().bind()?;
        let bytes = shadow_bytes_for(alloc.size).min(alloc.shadow_bytes);
        physical::PhysOps::zero_async(&Cuda, alloc.shadow_ptr, bytes, stream.raw())
    }

    /// Notes that a sanitized kernel is about to be enqueued: from now on
    /// any shadow may change. The sanitized launch path calls this before
    /// every launch; [`CachingPool`]s with lazy reset rely on it.
    pub fn note_sanitized_launch(&self) {
        self.shared.launch_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Lets caching pools skip the shadow reset of a reused block when no
    /// sanitized launch was noted since its shadow was last zeroed. Only
    /// correct when every sanitized launch calls
    /// [`Vmm::note_sanitized_launch`]; off by default.
    pub fn set_lazy_shadow_reset(&self, on: bool) {
        self.shared.lazy_reset.store(on, Ordering::Release);
    }

    /// Whether lazy shadow reset is on.
    pub fn lazy_shadow_reset(&self) -> bool {
        self.shared.lazy_reset.load(Ordering::Acquire)
    }

    /// The number of sanitized launches noted so far.
    pub fn shadow_epoch(&self) -> u64 {
        self.shared.launch_epoch.load(Ordering::Acquire)
    }

    /// Whether the configuration keeps freed blocks in caching pools.
    pub fn caching(&self) -> bool {
        lock(&self.shared.config).caching()
    }

    /// The `GlobalState` written for device `ordinal`.
    pub fn global_state(&self, ordinal: usize) -> VmmResult<GlobalState> {
        self.runtime_of(ordinal).map(|r| r.global)
    }

    /// Device address of device `ordinal`'s `GlobalState` (its region).
    pub fn runtime_state_ptr(&self, ordinal: usize) -> VmmResult<u64> {
        self.runtime_of(ordinal).map(|r| r.mapping.va)
    }

    pub(crate) fn runtime_of(&self, ordinal: usize) -> VmmResult<DeviceRuntime> {
        let rank = lock(&self.shared.devices).get(&ordinal).map(|d| d.rank);
        let runtime = lock(&self.shared.runtime);
        rank.and_then(|r| runtime[r as usize])
            .ok_or(VmmError::NoRuntimeState { ordinal })
    }

    /// Points device `ordinal`'s `GlobalState` at a report buffer of
    /// `capacity` records at device address `addr` (host-mapped memory
    /// owned by the reporting code).
    pub fn set_report_buffer(&self, ordinal: usize, addr: u64, capacity: u32) -> VmmResult<()> {
        let mut g = self.runtime_of(ordinal)?.global;
        g.report_buffer = addr;
        g.report_capacity = capacity;
        self.rewrite_global_state(ordinal, g)
    }

    /// Writes `g` as device `ordinal`'s `GlobalState` (its region's first
    /// bytes, and the copy kept here).
    pub(crate) fn rewrite_global_state(&self, ordinal: usize, g: GlobalState) -> VmmResult<()> {
        let rank = self.runtime_of(ordinal)?.rank as usize;
        let ctx = lock(&self.shared.devices)
            .get(&ordinal)
            .map(|d| d.ctx.clone());
        let mut runtime = lock(&self.shared.runtime);
        let rt = runtime[rank]
            .as_mut()
            .ok_or(VmmError::NoRuntimeState { ordinal })?;
        if let Some(ctx) = ctx {
            ctx.bind()?;
        }
        runtime_state::write(rt.mapping.va, bytemuck::bytes_of(&g), ordinal)?;
        rt.global = g;
        Ok(())
    }

    /// Zeroes the data of a live allocation on `stream`: the allocator's
    /// own initialisation, like its shadow's, not an access the sanitizer
    /// checks (nothing can have accessed a fresh allocation yet).
    pub fn zero_data(&self, alloc: &Allocation, stream: &impl AsCudaStream) -> VmmResult<()> {
        let stream = stream.cuda_stream()?;
        stream.device().bind()?;
        physical::PhysOps::zero_async(&Cuda, alloc.ptr, alloc.mapped_bytes, stream.raw())
    }
}

impl DeviceAllocator for Vmm {
    fn allocate(&self, stream: &CudaStream, size: u64) -> VmmResult<Allocation> {
        self.alloc(stream, size)
    }
    fn deallocate(&self, ptr: u64, stream: &CudaStream) -> VmmResult<()> {
        self.free(ptr, stream)
    }
    fn deallocate_idle(&self, ptr: u64) -> VmmResult<()> {
        self.free_idle(ptr)
    }
}

/// [`VmmError::ZeroSize`] or [`VmmError::TooLarge`] for a size no
/// allocation can have.
pub(crate) fn check_size(size: u64) -> VmmResult<()> {
    if size == 0 {
        return Err(VmmError::ZeroSize);
    }
    if size > REAL_CAPACITY {
        return Err(VmmError::TooLarge {
            size,
            capacity: REAL_CAPACITY,
        });
    }
    Ok(())
}

/// Returns a virtual block to the tree unless disarmed (the first undo
/// step of an allocation, outside the driver's undo stack).
struct BlockGuard<'a> {
    vmm: &'a Vmm,
    offset: Option<u64>,
}

impl BlockGuard<'_> {
    fn disarm(mut self) {
        self.offset = None;
    }
}

impl Drop for BlockGuard<'_> {
    fn drop(&mut self) {
        if let Some(off) = self.offset {
            if let Err(e) = lock(&self.vmm.shared.state).buddy.free(off) {
                eprintln!("vigil: undoing a virtual block: {e}");
            }
        }
    }
}

fn check_vmm_support(ctx: &CudaDevice) -> VmmResult<()> {
    let supported = device_attr(
        ctx,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    )?;
    if supported == 0 {
        return Err(VmmError::NoVmmSupport {
            ordinal: ctx.ordinal(),
            name: ctx.name().to_owned(),
        });
    }
    Ok(())
}

/// The minimum allocation granularity of device `ordinal`.
fn granularity(ordinal: usize, shareable: bool) -> VmmResult<u64> {
    let prop = physical::alloc_prop(ordinal, shareable);
    let minimum = sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
    let g = virtual_memory::allocation_granularity(&prop, minimum).map_err(|e| {
        e.during(|| format!("querying the allocation granularity of device {ordinal}"))
    })?;
    Ok(g as u64)
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Wait for every device, then unmap and release everything mapped
        // into the reservations before they are freed.
        let devices: Vec<Arc<DeviceEntry>> = lock(&self.devices).values().cloned().collect();
        for d in &devices {
            if let Err(e) = d.ctx.synchronize() {
                eprintln!(
                    "vigil: synchronising device {} before freeing its shadow memory: {e}",
                    d.ctx.ordinal()
                );
            }
        }
        let _ = self.home.bind();
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut mappings: Vec<physical::Mapping> = st
            .live
            .drain()
            .flat_map(|(_, r)| [r.pair.data, r.pair.shadow])
            .collect();
        let runtime = self.runtime.get_mut().unwrap_or_else(|p| p.into_inner());
        mappings.extend(
            runtime
                .iter_mut()
                .filter_map(Option::take)
                .map(|r| r.mapping),
        );
        if let Err(e) = physical::teardown(&Cuda, &mappings) {
            eprintln!("vigil: freeing the shadow allocator's memory: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::layout::*;

    #[test]
    fn layout_matches_design() {
        assert_eq!(RESERVE_BYTES, 1 << 40);
        assert_eq!(REAL_OFFSET, 1 << 39);
        assert_eq!(REAL_CAPACITY, 256 << 30);
        // The shadow of the whole usable real half fills the lower half.
        assert_eq!(shadow_bytes_for(REAL_CAPACITY), REAL_OFFSET);
        let r = 5 << 40;
        assert_eq!(shadow_address(real_base(r) + (2 << 20)), r + (4 << 20));
        assert_eq!(round_up(1, 2 << 20), 2 << 20);
        assert_eq!(round_up(2 << 20, 2 << 20), 2 << 20);
        assert_eq!(PER_DEVICE_STATE_STRIDE, 1 << 30);
    }
}
