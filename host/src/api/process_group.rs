//! Symmetric memory across processes (design 3.4, one process per rank,
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
//! Plain contexts only, for now: see [`GroupProblem::SanitizedProcesses`].

use super::context::Context;
use super::stream::Stream;
use super::symmetric::PeersArg;
use crate::backend::{ExportedAllocation, Transfer, Vmm, VmmAllocation};
use crate::error::{Error, GroupProblem, Result};
use crate::ipc::Rendezvous;
use crate::sanitizer::config::VmmConfig;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::panic::Location;
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
    /// Collective calls so far (allocations and barriers): the `n`-th
    /// meets at `socket.n`.
    collectives: AtomicU32,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("socket", &self.socket)
            .field("device", &self.ctx.device())
            .finish()
    }
}

impl ProcessGroup {
    /// Joins as rank `rank` of `world` processes that meet at socket paths
    /// starting with `socket` (one per collective call, allocation or
    /// barrier: `socket.0`, `socket.1`, ...), on `ctx`'s GPU. `ctx` must be a plain CUDA
    /// context. Nothing is exchanged until the first
    /// [`ProcessGroup::alloc`].
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
        if ctx.is_sanitized() {
            return Err(Error::Group(GroupProblem::SanitizedProcesses));
        }
        let config = VmmConfig::builder().shareable_handles(true).build()?;
        let vmm = Vmm::new(&ctx, config)?;
        let stream = Stream::new(&ctx)?;
        Ok(ProcessGroup {
            ctx,
            stream,
            vmm,
            rank,
            world,
            socket: socket.into(),
            timeout: Duration::from_secs(60),
            collectives: AtomicU32::new(0),
        })
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
    /// that never came, or one that died).
    pub fn barrier(&self) -> Result<()> {
        self.ctx.synchronize()?;
        self.rendezvous().exchange(0, &[])?;
        Ok(())
    }

    /// The rendezvous of the next collective call.
    fn rendezvous(&self) -> Rendezvous {
        let n = self.collectives.fetch_add(1, Ordering::Relaxed);
        let mut path = self.socket.clone().into_os_string();
        path.push(format!(".{n}"));
        Rendezvous::new(PathBuf::from(path), self.rank, self.world).timeout(self.timeout)
    }

    /// Collective: every rank calls it, in the same order, with the same
    /// `len`. Returns one zeroed buffer of `len` elements per rank, every
    /// one mapped here. Each rank's buffer is zeroed before the exchange,
    /// so a peer never sees it unzeroed. On any error (a size mismatch, a
    /// rank that never came or died: [`Error::Rendezvous`]) nothing stays
    /// allocated or mapped, and the received descriptors are closed.
    #[track_caller]
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
        self.ctx.backend().transfer(
            self.stream.handle(),
            Transfer::Zero {
                dst: own.ptr,
                bytes,
            },
            Location::caller(),
            self.ctx.launch_timeout(),
        )?;
        self.stream.synchronize()?;
        let export = self.vmm.export(own.ptr)?;
        let shares = self.rendezvous().exchange(
            bytes as u64,
            &[export.data_fd.as_fd(), export.shadow_fd.as_fd()],
        )?;
        let mut ptrs = [0; MAX_RANKS];
        ptrs[self.rank as usize] = own.ptr;
        for share in shares {
            let [data_fd, shadow_fd]: [_; 2] = share.fds.try_into().map_err(|fds: Vec<_>| {
                Error::Group(GroupProblem::Descriptors {
                    rank: share.rank,
                    count: fds.len(),
                })
            })?;
            let peer = self.vmm.import(
                &self.ctx,
                &ExportedAllocation {
                    device: self.ctx.ordinal(),
                    size: share.size,
                    mapped_bytes: own.mapped_bytes,
                    shadow_bytes: own.shadow_bytes,
                    data_fd,
                    shadow_fd,
                },
            )?;
            buffers.allocations.push(peer);
            ptrs[share.rank as usize] = peer.ptr;
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
