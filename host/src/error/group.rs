//! [`GroupProblem`]: why a symmetric group or one of its allocations was
//! refused.

use crate::types::DeviceId;

/// Why a [`SymmetricGroup`](crate::SymmetricGroup) or a
/// [`Symmetric`](crate::Symmetric) allocation was refused
/// ([`Error::Group`](crate::Error::Group)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupProblem {
    /// A group has 1 to [`MAX_RANKS`](crate::device::MAX_RANKS) ranks.
    #[error("a group has 1 to {max} ranks, not {world}")]
    Size {
        /// The ranks asked for.
        world: usize,
        /// The most a kernel's `Peers` argument carries.
        max: usize,
    },
    /// The members of a group of several contexts must be CUDA devices
    /// (simulated devices come from `SymmetricGroup::cpu`, which makes
    /// them share one race engine).
    #[error(
        "rank {rank} is on {device}: a group of several contexts is made of CUDA devices; \
         use SymmetricGroup::cpu for simulated devices"
    )]
    NotCuda {
        /// The member's rank.
        rank: u32,
        /// Its device.
        device: DeviceId,
    },
    /// Two ranks on the same device.
    #[error("ranks {first} and {second} are both on {device}")]
    SameDevice {
        /// The lower rank.
        first: u32,
        /// The higher rank.
        second: u32,
        /// Their device.
        device: DeviceId,
    },
    /// Sanitized contexts of several GPUs in one group: each peer's shadow
    /// would have to be mapped into every device's reservation, which is
    /// not built yet (plain contexts work as peer-to-peer memory).
    #[error(
        "a sanitized group of {world} GPUs needs every peer's shadow mapped into each device's \
         reservation, which is not built yet; use plain contexts (peer-to-peer memory) or one GPU"
    )]
    SanitizedGpus {
        /// The ranks asked for.
        world: usize,
    },
    /// A sanitized context in a group of processes: each process's
    /// shadow and runtime state would have to be shared with the others,
    /// which is not built yet (plain contexts work as shared memory).
    #[error(
        "a sanitized context cannot join a group of processes yet: the shadow and the \
         sanitizer's runtime state are not shared across processes; use a plain context"
    )]
    SanitizedProcesses,
    /// The hardware gives device `from` no access to device `to`'s memory
    /// (`cuDeviceCanAccessPeer`).
    #[error("CUDA device {from} cannot access the memory of device {to}")]
    NoPeerAccess {
        /// The accessing device's ordinal.
        from: usize,
        /// The accessed device's ordinal.
        to: usize,
    },
    /// A rank of a group of processes shared another number of file
    /// descriptors than an allocation's two (data and shadow handles).
    #[error("rank {rank} shared {count} file descriptors for an allocation, not 2")]
    Descriptors {
        /// The sharing rank.
        rank: u32,
        /// The descriptors it shared.
        count: usize,
    },
    /// A rank past the group.
    #[error("rank {rank} out of range (world {world})")]
    Rank {
        /// The rank asked for.
        rank: u32,
        /// The group's size.
        world: u32,
    },
}
