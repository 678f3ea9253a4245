//! Symmetric memory (docs/src/design/groups.md): a [`SymmetricGroup`] of ranks, one
//! device each, and [`Symmetric`] allocations with one buffer of the same
//! length per rank, which kernels reach directly on every rank (a
//! [`Peers`](crate::device::Peers) argument, or one peer's buffer through
//! [`Symmetric::peer`]).
//!
//! | group                          | devices                         | memory | sanitizer |
//! |--------------------------------|---------------------------------|--------|-----------|
//! | [`SymmetricGroup::cpu`]        | N simulated devices (CPU backend) | host memory, one address space | one race engine for all ranks (optional) |
//! | [`SymmetricGroup::new`], 1 context | one GPU or CPU context       | the context's | the context's |
//! | [`SymmetricGroup::new`], N GPUs | N CUDA devices, peer access enabled between each pair | plain: `cuMemAlloc` per device; sanitized: the process's shadow allocator, each buffer and its shadow open to every member | all sanitized or all plain |
//!
//! Ordering across ranks is the PTX memory model's: only
//! [`Scope::System`](crate::Scope::System) atomics and fences order work of
//! different devices; a [`Scope::Device`](crate::Scope::Device)
//! release/acquire pair used across devices orders nothing, and the
//! sanitizer reports it as a
//! [`ScopeMismatch`](crate::ReportKind::ScopeMismatch) on the flag (and
//! the data it was meant to guard as a race). Host synchronisation of a
//! member (or [`SymmetricGroup::synchronize`]) orders that member's
//! finished work before every later launch on every rank.

use super::builder::ContextBuilder;
use super::context::{races_to_result, Context};
use super::memory::DeviceBuffer;
use super::sanitized_group::SanitizedDevices;
use super::stream::Stream;
use crate::api::args::KernelArg;
use crate::api::proofs::LayoutParam;
use crate::backend::{group_cpu_sanitizers, CpuSanitizerParams, Vmm};
use crate::error::{ArgProblem, Error, GroupProblem, Result};
use crate::launch_abi::params::ParamBuffer;
use crate::sanitizer::report::RaceReports;
use crate::types::DeviceId;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::time::Duration;
use vigil_device::global::{GlobalSlice, GlobalSliceMut};
use vigil_device::{Peers, Sanitizer, MAX_RANKS};

/// The launch timeout of a simulated group's devices when the builder
/// sets none: a kernel spinning on a flag another device never sets is not
/// a livelock one device can prove, so only a timeout ends it.
pub const DEFAULT_GROUP_LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// A group of ranks, one device each, that share [`Symmetric`]
/// allocations.
///
/// ```no_run
/// # fn main() -> vigil::Result<()> {
/// use vigil::{Context, SymmetricGroup};
/// // Two simulated devices sharing one race engine.
/// let group = SymmetricGroup::cpu(2, Context::builder().sanitize(true))?;
/// let data = group.alloc::<u32>(1024)?;
/// group.run(|rank, ctx| {
///     // load the module on `ctx`, launch with `data.peers(rank)?` ...
///     # let _ = (rank, ctx, &data);
///     Ok(())
/// })?;
/// group.synchronize()?; // every rank's races, or Ok
/// # Ok(()) }
/// ```
pub struct SymmetricGroup {
    members: Vec<Member>,
    /// A sanitized group of several GPUs: the shadow allocator's side.
    sanitized: Option<SanitizedDevices>,
}

/// One rank: its context and the stream allocations are made on.
struct Member {
    ctx: Context,
    stream: Stream,
}

impl std::fmt::Debug for SymmetricGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.members.iter().map(|m| &m.ctx))
            .finish()
    }
}

fn check_world(world: usize) -> Result<()> {
    if (1..=MAX_RANKS).contains(&world) {
        Ok(())
    } else {
        Err(Error::Group(GroupProblem::Size {
            world,
            max: MAX_RANKS,
        }))
    }
}

/// The shadow allocator of `contexts` when they are all sanitized,
/// `None` when none is; [`GroupProblem::MixedSanitizer`] otherwise.
fn sanitized_vmm(contexts: &[Context]) -> Result<Option<Vmm>> {
    let sanitized = contexts.iter().position(Context::is_sanitized);
    let plain = contexts.iter().position(|c| !c.is_sanitized());
    match (sanitized, plain) {
        (Some(s), Some(p)) => Err(Error::Group(GroupProblem::MixedSanitizer {
            sanitized: s as u32,
            plain: p as u32,
        })),
        (Some(s), None) => Ok(contexts[s].sanitizer_pool().map(|p| p.vmm().clone())),
        _ => Ok(None),
    }
}

impl SymmetricGroup {
    /// `world` simulated devices on the CPU backend, each a context made
    /// by `builder` (its sanitizer switch and settings, CPU workers, launch
    /// timeout; the device choice is ignored). Sanitized, the devices share
    /// one race engine and shadow, so an access by device 0 to device 1's
    /// buffer is checked against device 1's kernels' accesses; reports name
    /// the device of each access. Each device has its own executor, so
    /// kernels of different ranks run at once (launch them from
    /// [`SymmetricGroup::run`]); a kernel spinning on a flag that another
    /// rank never sets ends at the launch timeout
    /// ([`DEFAULT_GROUP_LAUNCH_TIMEOUT`] when the builder sets none).
    pub fn cpu(world: usize, builder: ContextBuilder) -> Result<SymmetricGroup> {
        check_world(world)?;
        let workers = match builder.workers() {
            0 => crate::backend::CpuExecutor::default_workers(),
            n => n,
        };
        let timeout = builder.timeout().unwrap_or(DEFAULT_GROUP_LAUNCH_TIMEOUT);
        let builder = builder
            .cpu()
            .cpu_workers(workers)
            .launch_timeout(Some(timeout))
            .peer_group();
        let sanitizers = if builder.is_sanitized() {
            let params = CpuSanitizerParams {
                num_virtual_sms: workers as u32,
                config: builder.config().backend_settings(),
            };
            group_cpu_sanitizers(&params, world as u32)?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None; world]
        };
        let contexts = sanitizers
            .into_iter()
            .map(|s| match s {
                Some(s) => builder.clone().cpu_sanitizer(s).build(),
                None => builder.clone().build(),
            })
            .collect::<Result<Vec<_>>>()?;
        Self::with_members(contexts, None)
    }

    /// A group of the given contexts, rank `r` being `contexts[r]`: one
    /// context (of any backend), or CUDA devices, each a different one,
    /// between which peer access is enabled both ways (refused with
    /// [`GroupProblem::NoPeerAccess`] where the hardware has none).
    ///
    /// Several GPUs are all plain or all sanitized
    /// ([`GroupProblem::MixedSanitizer`]). Sanitized, they are one race
    /// detector, as a [`ProcessGroup`](crate::ProcessGroup) is across
    /// processes: every member's sanitizer runtime state (thread clocks,
    /// release snapshots) is opened to every member at its rank's stride,
    /// every member takes inflated shadow records from rank 0's pool, each
    /// [`SymmetricGroup::alloc`] buffer's data and shadow are opened to
    /// every member (so a kernel on device 0 writing device 1's buffer
    /// updates the shadow device 1's kernels check), and a race's earlier
    /// access is found with its source location whichever device made it.
    /// A member's device must not have run sanitized work before with
    /// another record pool ([`GroupProblem::SanitizerStarted`]); build the
    /// group first. Without virtual memory management on a device, the
    /// shadow allocator's error.
    ///
    /// Load every member's modules before the first copy into a group's
    /// buffer: a sanitized device checks copies made before its first
    /// module only when that module arrives, which may be after another
    /// member's kernel touched the buffer.
    pub fn new(contexts: Vec<Context>) -> Result<SymmetricGroup> {
        check_world(contexts.len())?;
        if contexts.len() > 1 {
            for (rank, ctx) in contexts.iter().enumerate() {
                if ctx.is_cpu() {
                    return Err(Error::Group(GroupProblem::NotCuda {
                        rank: rank as u32,
                        device: ctx.device(),
                    }));
                }
                if let Some(first) = contexts[..rank]
                    .iter()
                    .position(|c| c.device() == ctx.device())
                {
                    return Err(Error::Group(GroupProblem::SameDevice {
                        first: first as u32,
                        second: rank as u32,
                        device: ctx.device(),
                    }));
                }
            }
            for a in &contexts {
                for b in contexts.iter().filter(|b| b.device() != a.device()) {
                    a.backend().enable_peer_access(b.backend())?;
                }
            }
            let sanitized = sanitized_vmm(&contexts)?
                .map(|vmm| SanitizedDevices::join(vmm, &contexts))
                .transpose()?;
            return Self::with_members(contexts, sanitized);
        }
        Self::with_members(contexts, None)
    }

    fn with_members(
        contexts: Vec<Context>,
        sanitized: Option<SanitizedDevices>,
    ) -> Result<SymmetricGroup> {
        let members = contexts
            .into_iter()
            .map(|ctx| {
                let stream = Stream::new(&ctx)?;
                Ok(Member { ctx, stream })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SymmetricGroup { members, sanitized })
    }

    /// The number of ranks.
    pub fn world(&self) -> u32 {
        self.members.len() as u32
    }

    fn member(&self, rank: u32) -> Result<&Member> {
        self.members
            .get(rank as usize)
            .ok_or(Error::Group(GroupProblem::Rank {
                rank,
                world: self.world(),
            }))
    }

    /// Rank `rank`'s context.
    pub fn context(&self, rank: u32) -> Result<&Context> {
        Ok(&self.member(rank)?.ctx)
    }

    /// Rank `rank`'s stream, on which [`SymmetricGroup::alloc`] makes its
    /// buffers (usable for copies of them too).
    pub fn stream(&self, rank: u32) -> Result<&Stream> {
        Ok(&self.member(rank)?.stream)
    }

    /// One zeroed buffer of `len` elements per rank. The zeroing is
    /// finished (and, sanitized, ordered before every later launch of every
    /// rank) when this returns.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<Symmetric<T>> {
        let buffers = self
            .members
            .iter()
            .map(|m| match &self.sanitized {
                Some(s) => s.alloc(&m.stream, len),
                None => DeviceBuffer::alloc_zeroed(&m.stream, len),
            })
            .collect::<Result<Vec<_>>>()?;
        for m in &self.members {
            m.stream.synchronize()?;
        }
        Ok(Symmetric { buffers, len })
    }

    /// Runs `f(rank, context)` for every rank at once, each on its own
    /// host thread (kernels of different ranks that wait for each other
    /// must all be running), and returns the results in rank order, or the
    /// lowest rank's error. A panic in `f` is resumed here.
    pub fn run<R, F>(&self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(u32, &Context) -> Result<R> + Sync,
    {
        let f = &f;
        let outcomes: Vec<std::thread::Result<Result<R>>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .members
                .iter()
                .enumerate()
                .map(|(rank, m)| s.spawn(move || f(rank as u32, &m.ctx)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    }

    /// The host's group barrier: waits until the work issued so far on
    /// every rank has finished (each bounded by its context's launch
    /// timeout), then returns the races every rank found since the last
    /// collection as one [`Error::Races`]. Sanitized, everything waited for
    /// is ordered before every later launch of every rank.
    pub fn synchronize(&self) -> Result<()> {
        let mut reports = RaceReports::new();
        for m in &self.members {
            match m.ctx.synchronize() {
                Ok(()) => {}
                Err(Error::Races(r)) => reports.merge(r),
                Err(e) => return Err(e),
            }
        }
        races_to_result(reports)
    }

    /// Takes every rank's races found since the last collection, without
    /// waiting.
    pub fn take_reports(&self) -> RaceReports {
        let mut reports = RaceReports::new();
        for m in &self.members {
            reports.merge(m.ctx.take_reports());
        }
        reports
    }
}

/// One buffer of `len` elements per rank of a [`SymmetricGroup`].
pub struct Symmetric<T: Pod> {
    buffers: Vec<DeviceBuffer<T>>,
    len: usize,
}

impl<T: Pod> std::fmt::Debug for Symmetric<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symmetric")
            .field("len", &self.len)
            .field("world", &self.buffers.len())
            .finish()
    }
}

impl<T: Pod> Symmetric<T> {
    /// Elements in each rank's buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffers hold no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of ranks.
    pub fn world(&self) -> u32 {
        self.buffers.len() as u32
    }

    fn rank_error(&self, rank: u32) -> Error {
        Error::Group(GroupProblem::Rank {
            rank,
            world: self.world(),
        })
    }

    /// Rank `rank`'s buffer (on rank `rank`'s device).
    pub fn buffer(&self, rank: u32) -> Result<&DeviceBuffer<T>> {
        self.buffers
            .get(rank as usize)
            .ok_or_else(|| self.rank_error(rank))
    }

    /// Rank `rank`'s buffer, mutably (for copies from the host).
    pub fn buffer_mut(&mut self, rank: u32) -> Result<&mut DeviceBuffer<T>> {
        let err = self.rank_error(rank);
        self.buffers.get_mut(rank as usize).ok_or(err)
    }

    /// The kernel argument for a `Peers<T>` parameter of a kernel on rank
    /// `rank`: every rank's buffer, `rank` and the world size.
    ///
    /// Symmetric memory is shared on purpose: every rank's kernels may
    /// read and write every buffer at once, and whether they are ordered
    /// is what the sanitizer checks.
    pub fn peers(&self, rank: u32) -> Result<PeersArg<'_, T>> {
        let local = self.buffer(rank)?.context().device();
        let mut ptrs = [0; MAX_RANKS];
        for (p, b) in ptrs.iter_mut().zip(&self.buffers) {
            *p = b.device_ptr();
        }
        Ok(PeersArg::new(ptrs, self.len, rank, self.world(), local))
    }

    /// Rank `rank`'s buffer as a kernel on rank `local` reaches it: the
    /// argument for a `GlobalSlice<T>` or `GlobalSliceMut<T>` parameter of
    /// a kernel launched on `local`'s device.
    pub fn peer(&self, local: u32, rank: u32) -> Result<PeerSlice<'_, T>> {
        let device = self.buffer(local)?.context().device();
        Ok(PeerSlice {
            ptr: self.buffer(rank)?.device_ptr(),
            len: self.len,
            local: device,
            _data: PhantomData,
        })
    }
}

/// Every rank's buffer of a [`Symmetric`] allocation, for a kernel on one
/// rank ([`Symmetric::peers`]): the host argument of a
/// [`Peers`](crate::device::Peers) parameter.
#[derive(Clone, Copy, Debug)]
pub struct PeersArg<'a, T> {
    ptrs: [u64; MAX_RANKS],
    len: usize,
    rank: u32,
    world: u32,
    /// The device the kernel runs on (peers' pointers are reachable from
    /// it).
    local: DeviceId,
    _data: PhantomData<&'a T>,
}

impl<T> PeersArg<'_, T> {
    /// Every rank's buffer (`ptrs[..world]`, each of `len` elements and
    /// reachable from `local`, live for the borrow), for a kernel of rank
    /// `rank` on `local`.
    pub(crate) fn new(
        ptrs: [u64; MAX_RANKS],
        len: usize,
        rank: u32,
        world: u32,
        local: DeviceId,
    ) -> Self {
        PeersArg {
            ptrs,
            len,
            rank,
            world,
            local,
            _data: PhantomData,
        }
    }
}

// SAFETY: `MAX_RANKS` pointers (each rank's live buffer of `len`
// elements, borrowed from the `Symmetric` for `'a`; null past `world`),
// the length, the rank and the world size: `Peers::PARTS` in order.
// Writes through it to buffers other launches also use are the shared
// memory symmetric allocations exist for (see `Symmetric::peers`).
unsafe impl<T: Pod, S: Sanitizer> KernelArg<Peers<T, S>> for PeersArg<'_, T> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        // Its own rank's buffer may also be passed as a slice.
        buf.note_aliasing();
        let bytes = (self.len * std::mem::size_of::<T>()) as u64;
        for (rank, &p) in self.ptrs.iter().enumerate() {
            let device = (rank < self.world as usize).then_some(self.local);
            buf.push_pointer_on(p, device);
            if device.is_some() {
                buf.note_view(p, bytes, true);
            }
        }
        buf.push(self.len as u64);
        buf.push(self.rank);
        buf.push(self.world);
        Ok(())
    }
}

/// One rank's buffer as a kernel on another rank reaches it
/// ([`Symmetric::peer`]).
#[derive(Clone, Copy, Debug)]
pub struct PeerSlice<'a, T> {
    ptr: u64,
    len: usize,
    local: DeviceId,
    _data: PhantomData<&'a T>,
}

impl<T> PeerSlice<'_, T> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        // Shared, yet writable: another argument may be the same buffer.
        buf.note_aliasing();
        buf.push_pointer_on(self.ptr, Some(self.local));
        buf.push(self.len as u64);
        buf.note_view(self.ptr, (self.len * std::mem::size_of::<T>()) as u64, true);
        Ok(())
    }
}

// SAFETY: a live buffer of `len` elements (borrowed for `'a`), reachable
// from the local device, packed as pointer and length.
unsafe impl<T: Pod, S: Sanitizer> KernelArg<GlobalSlice<T, S>> for PeerSlice<'_, T> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        PeerSlice::pack(self, buf)
    }
}

// SAFETY: as above; shared on purpose, like `PeersArg`.
unsafe impl<T: Pod, S: Sanitizer> KernelArg<GlobalSliceMut<T, S>> for PeerSlice<'_, T> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        PeerSlice::pack(self, buf)
    }
}

// SAFETY: as above, for a parameter with a declared layout (a partition
// of a peer's buffer is exclusive only while no other argument of the
// launch reaches it; other ranks' launches are the sanitizer's).
unsafe impl<T: Pod, P: LayoutParam<Elem = T>> KernelArg<P> for PeerSlice<'_, T> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        PeerSlice::pack(self, buf)
    }
}
