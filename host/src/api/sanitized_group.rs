//! The sanitizer's side of a group (docs/src/design/groups.md), one mechanism for both
//! kinds: a group of processes ([`ProcessGroup`](super::process_group::ProcessGroup),
//! whose peers' runtime states are imported over the rendezvous) and a
//! group of GPUs of one process ([`SymmetricGroup`](super::symmetric::SymmetricGroup),
//! whose devices share the process's one shadow allocator, so each
//! device's region already lies at its rank's stride and only needs
//! opening to the others).
//!
//! Either way, once every rank's region is mapped and reachable,
//! [`join_runtime`] checks that each is laid out like this device's (the
//! same region format, group size and serial lanes). In one process,
//! [`SanitizedDevices`] also opens every member's buffers and shadow to
//! every member, and joins the devices' GPU sanitizers (one set of engine
//! tables, the first member's; a host wait on a member orders every
//! member's later launches, as a group of processes' barrier does with
//! the same host clocks). A group of processes shares the engine tables
//! of its first rank's region instead (`ProcessGroup::join`).

use super::context::Context;
use super::memory::DeviceBuffer;
use super::stream::Stream;
use crate::backend::{Backend, Vmm};
use crate::error::{Error, GroupProblem, Result};
use bytemuck::Pod;

/// Checks that device `ordinal` (sanitizer rank `own`) can join a group
/// whose other ranks `peers` are mapped in `vmm` and reachable from the
/// device: [`GroupProblem::RuntimeMismatch`] if one is laid out otherwise.
pub(crate) fn join_runtime(vmm: &Vmm, ordinal: usize, own: u32, peers: &[u32]) -> Result<()> {
    match vmm.group_mismatch(ordinal, peers)? {
        Some((rank, what)) => Err(Error::Group(GroupProblem::RuntimeMismatch {
            rank,
            own,
            what,
        })),
        None => Ok(()),
    }
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
    /// allocator): every member's runtime state opened to every member,
    /// checked alike, the GPU sanitizers joined on the first member's
    /// engine tables. A member other than the first whose device ran
    /// sanitized work on other tables is refused
    /// ([`GroupProblem::SanitizerStarted`]): its shadow may name records
    /// of those.
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
        let first = contexts[0].backend().sanitizer_tables();
        for (member, (ctx, &own)) in contexts.iter().zip(&ranks).enumerate() {
            // A member already on the first's tables (an earlier group of
            // the same devices) may join again.
            let tables = ctx.backend().sanitizer_tables();
            if member > 0 && tables.is_some() && tables != first {
                return Err(Error::Group(GroupProblem::SanitizerStarted {
                    rank: member as u32,
                    reason: format!(
                        "device {} ran sanitized work with engine tables of its own",
                        ctx.ordinal()
                    ),
                }));
            }
            let peers: Vec<u32> = ranks.iter().copied().filter(|&r| r != own).collect();
            join_runtime(&vmm, ctx.ordinal(), own, &peers)?;
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
