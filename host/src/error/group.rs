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
    /// A group of several GPUs mixes sanitized and plain contexts: the
    /// sanitizer checks every access to the group's memory or none.
    #[error(
        "rank {sanitized} is sanitized and rank {plain} is not: the contexts of a group of \
         GPUs are all sanitized or all plain"
    )]
    MixedSanitizer {
        /// A sanitized member's rank.
        sanitized: u32,
        /// A plain member's rank.
        plain: u32,
    },
    /// A sanitized context joins a group before its sanitizer starts: its
    /// runtime state is made for the group (a group of processes: its
    /// rank, clocks as long as the whole group's threads; a group of
    /// devices of one process: the group's one record pool), which cannot
    /// change once its kernels have used it.
    #[error(
        "rank {rank}: a sanitized context joins a group before its sanitizer starts \
         (a group of processes: before its first allocation or launch; a group of GPUs of one \
         process: before its device's first sanitized launch): {reason}"
    )]
    SanitizerStarted {
        /// The joining rank.
        rank: u32,
        /// What the shadow allocator said.
        reason: String,
    },
    /// This process's sanitizer is wired to a group of processes already
    /// (peers' runtime state mapped at their ranks); a process is one rank
    /// of one sanitized group.
    #[error(
        "this process already joined a sanitized group of processes (rank {rank} of it is mapped)"
    )]
    AlreadyJoined {
        /// A rank already mapped.
        rank: u32,
    },
    /// A rank's sanitizer runtime state is not laid out like this
    /// process's (another GPU model or sanitizer configuration), so thread
    /// ids and clocks would not agree across the group.
    #[error("rank {rank}'s sanitizer runtime state differs from rank {own}'s: {what}")]
    RuntimeMismatch {
        /// The differing rank.
        rank: u32,
        /// This process's rank.
        own: u32,
        /// Which field differs, and the two values.
        what: String,
    },
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
    /// descriptors than the collective call's (an allocation's two, data
    /// and shadow handles; a sanitized join's one, the runtime state).
    #[error("rank {rank} shared {count} file descriptors, not {expected}")]
    Descriptors {
        /// The sharing rank.
        rank: u32,
        /// The descriptors it shared.
        count: usize,
        /// The descriptors the call shares.
        expected: usize,
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
