//! The sanitizer's side of a group (docs/src/design/groups.md), one mechanism for both
//! kinds: a group of processes ([`ProcessGroup`](super::process_group::ProcessGroup),
//! whose peers' runtime states are imported over the rendezvous) and a
//! group of GPUs of one process ([`SymmetricGroup`](super::symmetric::SymmetricGroup),
//! whose devices share the process's one shadow allocator, so each
//! device's region already lies at its rank's stride and only needs
//! opening to the others).
//!
//! Either way, once every rank's region is mapped and reachable,
//! [`join_runtime`] checks that each is laid out like this device's (thread
//! ids and clocks agree across the group) and points this device at the
//! group's one inflated-record pool. In one process, [`SanitizedDevices`]
//! also opens every member's buffers and shadow to every member, and joins
//! the devices' GPU sanitizers (one side table; a host wait on a member
//! orders every member's later launches, as a group of processes'
//! barrier does with the same host clocks).

use super::context::Context;
use super::memory::DeviceBuffer;
use super::stream::Stream;
use crate::backend::{Backend, Vmm};
use crate::error::{Error, GroupProblem, Result};
use bytemuck::Pod;

/// Joins device `ordinal` (sanitizer rank `own`) to a group whose other
/// ranks `peers` are mapped in `vmm` and reachable from the device:
/// [`GroupProblem::RuntimeMismatch`] if one is laid out otherwise, else
/// the device takes its inflated records from rank `pool_rank`'s pool.
/// Call before the device's first sanitized launch.
pub(crate) fn join_runtime(
    vmm: &Vmm,
    ordinal: usize,
    own: u32,
    peers: &[u32],
    pool_rank: u32,
) -> Result<()> {
    if let Some((rank, what)) = vmm.group_mismatch(ordinal, peers)? {
        return Err(Error::Group(GroupProblem::RuntimeMismatch {
            rank,
            own,
            what,
        }));
    }
    vmm.share_group_pool(ordinal, pool_rank)?;
    Ok(())
}

/// The sanitizer's state of a group of several GPUs of one process.
#[derive(Clone, Debug)]
pub(crate) struct SanitizedDevices {
    /// The process's shadow allocator (every member's).
    vmm: Vmm,
    /// The members' device ordinals, in rank order.
    ordinals: Vec<usize>,
}

impl SanitizedDevices {
    /// Joins the sanitized GPU contexts `contexts` (rank order; peer
    /// access already enabled between them; `vmm` their shadow
    /// allocator): every member's runtime
    /// state opened to every member, checked alike, one record pool (the
    /// first member's), the GPU sanitizers joined. A member whose device
    /// ran sanitized work with a record pool of its own is refused
    /// ([`GroupProblem::SanitizerStarted`]): its shadow may name records
    /// of that pool.
    pub(crate) fn join(vmm: Vmm, contexts: &[Context]) -> Result<SanitizedDevices> {
        let ordinals: Vec<usize> = contexts.iter().map(Context::ordinal).collect();
        let mut ranks = Vec::with_capacity(contexts.len());
        for ctx in contexts {
            vmm.prepare_device(ctx)?;
            ranks.push(vmm.rank_of_device(ctx.ordinal())?);
        }
        for &rank in &ranks {
            vmm.grant_runtime_state(rank, &ordinals)?;
        }
        let pool_rank = ranks[0];
        for (member, (ctx, &own)) in contexts.iter().zip(&ranks).enumerate() {
            if !vmm.uses_group_pool(ctx.ordinal(), pool_rank)? && ctx.backend().sanitizer_started()
            {
                return Err(Error::Group(GroupProblem::SanitizerStarted {
                    rank: member as u32,
                    reason: format!(
                        "device {} ran sanitized work with its own record pool",
                        ctx.ordinal()
                    ),
                }));
            }
            let peers: Vec<u32> = ranks.iter().copied().filter(|&r| r != own).collect();
            join_runtime(&vmm, ctx.ordinal(), own, &peers, pool_rank)?;
        }
        let backends: Vec<&Backend> = contexts.iter().map(Context::backend).collect();
        Backend::join_sanitizer_group(&backends)?;
        Ok(SanitizedDevices { vmm, ordinals })
    }

    /// `len` elements on `stream`'s device, zeroed by the allocator (like
    /// a group of processes' buffers: no access is checked, the shadow is
    /// clean) and, with their shadow, open to every member's device.
    /// Finished when this returns.
    pub(crate) fn alloc<T: Pod>(&self, stream: &Stream, len: usize) -> Result<DeviceBuffer<T>> {
        let buffer = DeviceBuffer::alloc(stream, len)?;
        if !buffer.is_empty() {
            // A typed error if the buffer were not an allocation of its own.
            self.vmm.grant_access(buffer.device_ptr(), &self.ordinals)?;
            if let Some(a) = self.vmm.lookup(buffer.device_ptr()) {
                self.vmm.zero_data(&a, stream)?;
            }
        }
        stream.synchronize()?;
        Ok(buffer)
    }
}
