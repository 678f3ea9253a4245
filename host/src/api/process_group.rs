//! Symmetric memory across processes (docs/src/design/groups.md, one process per rank,
//! the way multi-GPU jobs launch): a [`ProcessGroup`] is this process's
//! rank, and [`ProcessGroup::alloc`] is collective. Each rank allocates
//! its buffer from a virtual-memory allocator whose physical handles are
//! POSIX-file-descriptor shareable, exports it, meets the others at a
//! [`Rendezvous`] (which checks that every rank asked for the same size
//! and passes the descriptors over the socket with `SCM_RIGHTS`), and maps
//! every peer's buffer into its own address space, accessible from its
//! device. Ranks may share one GPU (several processes on one device) or
//! each have their own.
//!
//! Sanitized, the group is one race detector across its processes:
//!
//! - the buffers come from the sanitizer's own allocator, each with its
//!   shadow, so a peer's shadow is mapped next to the peer's data in every
//!   process and a kernel in any process checks and updates the one shadow
//!   of the word it touches;
//! - at [`ProcessGroup::join`] the sanitizer's runtime state is made for
//!   the group (this process's rank, clocks as long as every rank's
//!   threads, so thread ids are unique across the group) and the ranks
//!   exchange it: every rank's thread states (clocks, release snapshots)
//!   mapped at the rank's stride in every process, and rank 0's
//!   inflated-record pool shared by all (`vmm::group`);
//! - [`ProcessGroup::barrier`] carries happens-before: each rank publishes
//!   its host clock in its runtime state and joins the others'.
//!
//! A race names both ranks (as devices) and this process's access site;
//! the other process's access is named by its rank, SM and slot (its
//! source location and kernel live in that process's memory).
use super::context::Context;
use super::sanitized_group::join_runtime;
use super::stream::Stream;
use super::symmetric::PeersArg;
use crate::backend::{ExportedAllocation, ExportedRuntimeState, Vmm, VmmAllocation};
use crate::error::{Error, GroupProblem, Result};
use crate::ipc::{PeerShare, Rendezvous};
use crate::sanitizer::config::SanitizerConfig;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use vigil_device::MAX_RANKS;

/// This process's rank of a group of processes sharing symmetric
/// allocations through a Unix-socket rendezvous.
///
/// ```no_run
/// # fn main() -> vigil::Result<()> {
/// use vigil::{Context, ProcessGroup};
/// let (rank, world) = (0, 2); // e.g. from the launcher's environment
/// let group = ProcessGroup::join(Context::new(0)?, "/tmp/job-42.sock", rank, world)?;
/// // Every rank calls `alloc` in the same order with the same length.
/// let data = group.alloc::<f32>(1 << 20)?;
/// // launch kernels on `group.context()` with `data.peers()` ...
/// # let _ = data;
/// # Ok(()) }
/// ```
pub struct ProcessGroup {
    ctx: Context,
    stream: Stream,
    vmm: Vmm,
    rank: u32,
    world: u32,
    socket: PathBuf,
    timeout: Duration,
    /// Collective calls so far (a sanitized join, allocations and
    /// barriers): the `n`-th meets at `socket.n`.
    collectives: AtomicU32,
    /// The group shares the sanitizer's shadow and runtime state.
    sanitized: bool,
}

/// How long collective calls wait for every rank unless told otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The size a sanitized join announces at its rendezvous: this bit and
/// the runtime state's bytes. No allocation is that large, so a rank that
/// joined sanitized and one that did not fail their first rendezvous
/// alike (a size mismatch) instead of mistaking one call for the other.
const SANITIZED_JOIN: u64 = 1 << 63;

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("socket", &self.socket)
            .field("device", &self.ctx.device())
            .field("sanitized", &self.sanitized)
            .finish()
    }
}

impl ProcessGroup {
    /// Joins as rank `rank` of `world` processes that meet at socket paths
    /// starting with `socket` (one per collective call: `socket.0`,
    /// `socket.1`, ...), on `ctx`'s GPU.
    ///
    /// A plain context exchanges nothing until the first
    /// [`ProcessGroup::alloc`]. A sanitized one must join before its first
    /// allocation or launch ([`GroupProblem::SanitizerStarted`]), once per
    /// process ([`GroupProblem::AlreadyJoined`]): its sanitizer is set up
    /// for the group, and the ranks exchange their runtime states here,
    /// waiting up to 60 s for every rank ([`Error::Rendezvous`]); every
    /// rank must be sanitized then. On an error nothing of the peers stays
    /// mapped.
    pub fn join(
        ctx: Context,
        socket: impl Into<PathBuf>,
        rank: u32,
        world: u32,
    ) -> Result<ProcessGroup> {
        if world == 0 || world as usize > MAX_RANKS {
            return Err(Error::Group(GroupProblem::Size {
                world: world as usize,
                max: MAX_RANKS,
            }));
        }
        if rank >= world {
            return Err(Error::Group(GroupProblem::Rank { rank, world }));
        }
        if ctx.is_cpu() {
            return Err(Error::Group(GroupProblem::NotCuda {
                rank,
                device: ctx.device(),
            }));
        }
        let sanitized = ctx.is_sanitized();
        let vmm = match ctx.backend().sanitizer_pool() {
            Some(pool) => group_sanitizer(&ctx, pool.vmm(), rank, world)?,
            None => {
                let config = SanitizerConfig::builder().shareable_handles(true).build()?;
                Vmm::new(&ctx, config)?
            }
        };
        let stream = Stream::new(&ctx)?;
        let group = ProcessGroup {
            ctx,
            stream,
            vmm,
            rank,
            world,
            socket: socket.into(),
            timeout: DEFAULT_TIMEOUT,
            collectives: AtomicU32::new(0),
            sanitized,
        };
        if sanitized {
            group.join_runtime_states()?;
        }
        Ok(group)
    }

    /// Exchanges the sanitizer's runtime state with every rank: each
    /// peer's region mapped at its rank, checked to be laid out like this
    /// one, then the group's one pool adopted. Undone on any error.
    fn join_runtime_states(&self) -> Result<()> {
        let ordinal = self.ctx.ordinal();
        self.vmm.prepare_device(&self.ctx)?;
        let own = self.vmm.export_runtime_state(ordinal)?;
        let (_, rendezvous) = self.rendezvous();
        let shares = rendezvous.exchange(SANITIZED_JOIN | own.bytes, &[own.fd.as_fd()])?;
        let mut imported = ImportedRanks {
            vmm: &self.vmm,
            ranks: Vec::new(),
        };
        for share in shares {
            let (rank, size) = (share.rank, share.size);
            let [fd] = descriptors(share)?;
            let peer = ExportedRuntimeState {
                rank,
                // The exporter's ordinal does not travel; the region is
                // reached from this device.
                device: ordinal,
                bytes: size & !SANITIZED_JOIN,
                // Not sent either: the import reads the owner's back.
                global: own.global,
                fd,
            };
            self.vmm.import_runtime_state(&self.ctx, &peer)?;
            imported.ranks.push(peer.rank);
        }
        join_runtime(
            &self.vmm,
            ordinal,
            self.rank,
            &imported.ranks,
            crate::backend::POOL_RANK,
        )?;
        imported.ranks.clear();
        Ok(())
    }

    /// How long [`ProcessGroup::alloc`] waits for every rank (default 60 s;
    /// past it, [`Error::Rendezvous`] names the ranks that never came).
    pub fn timeout(mut self, timeout: Duration) -> ProcessGroup {
        self.timeout = timeout;
        self
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> u32 {
        self.world
    }

    /// This rank's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The stream allocations are zeroed on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The host's group barrier, collective: waits until this rank's
    /// work on its context has finished (bounded by the context's launch
    /// timeout), then until every rank has called it (bounded by
    /// [`ProcessGroup::timeout`]; [`Error::Rendezvous`] names the ranks
    /// that never came, or one that died). Sanitized, it orders: every
    /// rank's later launches come after every rank's work before it.
    /// Races found meanwhile stay for the context's next collection.
    pub fn barrier(&self) -> Result<()> {
        self.ctx.backend().synchronize(self.ctx.launch_timeout())?;
        let (n, rendezvous) = self.rendezvous();
        if self.sanitized {
            let clock = self.ctx.backend().host_clock()?;
            self.vmm
                .publish_barrier_clock(self.ctx.ordinal(), n, &clock)?;
        }
        rendezvous.exchange(0, &[])?;
        if self.sanitized {
            let mut joined = Vec::new();
            for peer in (0..self.world).filter(|&r| r != self.rank) {
                let clock = self.vmm.read_barrier_clock(peer, n)?;
                joined.resize(clock.len(), 0);
                for (j, c) in joined.iter_mut().zip(clock) {
                    *j = (*j).max(c);
                }
            }
            self.ctx.backend().join_host_clock(&joined)?;
        }
        Ok(())
    }

    /// The number and rendezvous of the next collective call.
    fn rendezvous(&self) -> (u32, Rendezvous) {
        let n = self.collectives.fetch_add(1, Ordering::Relaxed);
        let mut path = self.socket.clone().into_os_string();
        path.push(format!(".{n}"));
        let r = Rendezvous::new(PathBuf::from(path), self.rank, self.world).timeout(self.timeout);
        (n, r)
    }

    /// Collective: every rank calls it, in the same order, with the same
    /// `len`. Returns one zeroed buffer of `len` elements per rank, every
    /// one mapped here. Each rank's buffer is zeroed before the exchange,
    /// so a peer never sees it unzeroed. On any error (a size mismatch, a
    /// rank that never came or died: [`Error::Rendezvous`]) nothing stays
    /// allocated or mapped, and the received descriptors are closed.
    /// Races found meanwhile stay for the context's next collection.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<ProcessSymmetric<'_, T>> {
        let bytes =
            len.checked_mul(size_of::<T>())
                .filter(|&b| b > 0)
                .ok_or(Error::SizeOverflow {
                    count: len,
                    elem_size: size_of::<T>(),
                })?;
        let mut buffers = Mapped {
            vmm: &self.vmm,
            stream: &self.stream,
            allocations: Vec::new(),
        };
        let own = self.vmm.alloc(&self.stream, bytes as u64)?;
        buffers.allocations.push(own);
        // The allocator's own zeroing (a sanitized group checks no access
        // here: the buffer is new, and the exchange orders it before any
        // rank's use).
        self.vmm.zero_data(&own, &self.stream)?;
        self.stream.wait_idle()?;
        let export = self.vmm.export(own.ptr)?;
        let shares = self.rendezvous().1.exchange(
            bytes as u64,
            &[export.data_fd.as_fd(), export.shadow_fd.as_fd()],
        )?;
        let mut ptrs = [0; MAX_RANKS];
        ptrs[self.rank as usize] = own.ptr;
        for share in shares {
            let (rank, size) = (share.rank, share.size);
            let [data_fd, shadow_fd] = descriptors(share)?;
            let peer = self.vmm.import(
                &self.ctx,
                &ExportedAllocation {
                    device: self.ctx.ordinal(),
                    size,
                    mapped_bytes: own.mapped_bytes,
                    shadow_bytes: own.shadow_bytes,
                    data_fd,
                    shadow_fd,
                },
            )?;
            buffers.allocations.push(peer);
            ptrs[rank as usize] = peer.ptr;
        }
        Ok(ProcessSymmetric {
            group: self,
            ptrs,
            len,
            mapped: buffers,
            _data: PhantomData,
        })
    }
}

/// The sanitizer's allocator of a sanitized context, configured for
/// rank `rank` of `world` (POSIX-fd shareable handles, so its shadow and
/// runtime state can be exported) before its runtime state exists.
fn group_sanitizer(ctx: &Context, vmm: &Vmm, rank: u32, world: u32) -> Result<Vmm> {
    let want = vmm
        .config()
        .into_builder()
        .process_rank(ctx.ordinal(), rank, world)
        .shareable_handles(true)
        .build()?;
    if vmm.config() != want {
        vmm.set_config(want).map_err(|e| {
            Error::Group(GroupProblem::SanitizerStarted {
                rank,
                reason: e.to_string(),
            })
        })?;
    }
    if let Some(peer) = (0..world).find(|&r| r != rank && vmm.runtime_state_of_rank(r).is_some()) {
        return Err(Error::Group(GroupProblem::AlreadyJoined { rank: peer }));
    }
    Ok(vmm.clone())
}

/// A peer's `N` descriptors, or [`GroupProblem::Descriptors`].
fn descriptors<const N: usize>(share: PeerShare) -> Result<[OwnedFd; N]> {
    let rank = share.rank;
    share.fds.try_into().map_err(|fds: Vec<_>| {
        Error::Group(GroupProblem::Descriptors {
            rank,
            count: fds.len(),
            expected: N,
        })
    })
}

/// Peers' runtime states mapped by a sanitized join so far, unmapped when
/// dropped unless the join completed (it empties the list).
struct ImportedRanks<'v> {
    vmm: &'v Vmm,
    ranks: Vec<u32>,
}

impl Drop for ImportedRanks<'_> {
    fn drop(&mut self) {
        for &rank in &self.ranks {
            if let Err(e) = self.vmm.forget_runtime_state(rank) {
                eprintln!("vigil: unmapping rank {rank}'s runtime state: {e}");
            }
        }
    }
}

/// Allocations of one collective allocation, freed (unmapped, handles
/// released) when dropped: on every error path of
/// [`ProcessGroup::alloc`], and with the [`ProcessSymmetric`].
struct Mapped<'g> {
    vmm: &'g Vmm,
    stream: &'g Stream,
    allocations: Vec<VmmAllocation>,
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        for a in self.allocations.drain(..) {
            if let Err(e) = self.vmm.free(a.ptr, self.stream) {
                eprintln!("vigil: freeing a symmetric buffer at {:#x}: {e}", a.ptr);
            }
        }
    }
}

/// One buffer per rank of a [`ProcessGroup`], every one mapped in this
/// process ([`ProcessGroup::alloc`]). Dropping it unmaps them here (wait
/// for the kernels that use it first: the drop waits for the group's
/// stream only).
pub struct ProcessSymmetric<'g, T> {
    group: &'g ProcessGroup,
    ptrs: [u64; MAX_RANKS],
    len: usize,
    mapped: Mapped<'g>,
    _data: PhantomData<T>,
}

impl<T> std::fmt::Debug for ProcessSymmetric<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessSymmetric")
            .field("len", &self.len)
            .field("mapped", &self.mapped.allocations.len())
            .finish()
    }
}

impl<T: Pod> ProcessSymmetric<'_, T> {
    /// Elements in each rank's buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffers hold no element (never: `alloc` refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The kernel argument for a `Peers<T>` parameter of a kernel of this
    /// rank: every rank's buffer as mapped here.
    pub fn peers(&self) -> PeersArg<'_, T> {
        PeersArg::new(
            self.ptrs,
            self.len,
            self.group.rank,
            self.group.world,
            self.group.ctx.device(),
        )
    }
}
