//! [`VmmError`]: everything the sanitizer's shadow-memory allocator can
//! refuse, with the context needed to act on it (which driver call, which
//! sizes, which pointer).
//!
//! [`VmmError::Host`] carries the crate's [`Error`] and [`Error::Vmm`] a
//! `VmmError`: the allocator passes host-API failures (no driver, a failed
//! call) through unchanged. Both types live in this layer, so the mutual
//! reference is no import between layers.

use super::{ConfigError, Error};

/// Why an allocator operation failed. Bad input is always one of these,
/// never a panic or an abort.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VmmError {
    /// The driver could not be loaded or initialised, or a host-API call
    /// failed (see [`crate::Error::is_no_gpu`]).
    #[error(transparent)]
    Host(#[from] Error),

    /// A driver call returned an error.
    #[error("{call} failed: {result} ({code}) while {during}")]
    Driver {
        /// The driver function, e.g. `cuMemCreate`.
        call: &'static str,
        /// The `CUresult` name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        result: String,
        /// The numeric `CUresult`.
        code: u32,
        /// What the call was doing: sizes, addresses, device.
        during: String,
    },

    /// An allocation of zero bytes.
    #[error("cannot allocate zero bytes")]
    ZeroSize,

    /// An allocation larger than the usable real half.
    #[error(
        "cannot allocate {size} bytes: the sanitizer's real half holds at most {capacity} bytes"
    )]
    TooLarge {
        /// Bytes asked for.
        size: u64,
        /// Usable bytes of the real half.
        capacity: u64,
    },

    /// The real half has no free virtual block large enough.
    #[error(
        "no free virtual range of {needed} bytes for {size} bytes in the real half \
         (largest free range: {largest_free} bytes)"
    )]
    OutOfAddressSpace {
        /// Bytes asked for.
        size: u64,
        /// The power-of-two virtual block the request needs.
        needed: u64,
        /// The largest free virtual block.
        largest_free: u64,
    },

    /// A pointer outside this allocator's real half.
    #[error("{ptr:#x} was not allocated by this allocator (its real half is {real_start:#x}..{real_end:#x})")]
    ForeignPointer {
        /// The pointer given.
        ptr: u64,
        /// First byte of the real half.
        real_start: u64,
        /// One past the last usable byte of the real half.
        real_end: u64,
    },

    /// A pointer into the middle of a live allocation.
    #[error("{ptr:#x} points {} bytes into the allocation at {base:#x} ({size} bytes); free the base pointer", ptr - base)]
    InteriorPointer {
        /// The pointer given.
        ptr: u64,
        /// The allocation's base.
        base: u64,
        /// The allocation's requested size.
        size: u64,
    },

    /// A pointer that was allocated and has been freed already.
    #[error("double free of {ptr:#x}: it was already freed")]
    DoubleFree {
        /// The pointer given.
        ptr: u64,
    },

    /// A live allocation of the VMM layer handed to the caching pool.
    #[error(
        "{ptr:#x} was allocated with Vmm::alloc, not by this caching pool; free it with Vmm::free"
    )]
    NotFromPool {
        /// The pointer given.
        ptr: u64,
    },

    /// A pointer inside the real half that was never handed out.
    #[error("{ptr:#x} lies in the real half but was never allocated")]
    NotAllocated {
        /// The pointer given.
        ptr: u64,
    },

    /// The device cannot map memory into a reserved range.
    #[error(
        "device {ordinal} ({name}) does not support CUDA virtual memory management \
         (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0); the sanitizer needs it"
    )]
    NoVmmSupport {
        /// The device ordinal.
        ordinal: usize,
        /// The device's name.
        name: String,
    },

    /// Export/import was asked for but handles are not POSIX-fd shareable.
    #[error("cannot share memory of device {ordinal} as POSIX file descriptors: {reason}")]
    NotShareable {
        /// The device ordinal.
        ordinal: usize,
        /// Why (device attribute, or disabled in the configuration).
        reason: String,
    },

    /// The configuration was changed after the first allocation.
    #[error("the allocator configuration is frozen after the first allocation; {what} must be set before it")]
    ConfigFrozen {
        /// What the caller tried to change.
        what: String,
    },

    /// A configuration value (builder or `VIGIL_*` variable) is malformed.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The driver returned a reservation that is not aligned as asked.
    #[error("cuMemAddressReserve returned {base:#x} for {size} bytes, not aligned to {align:#x}")]
    MisalignedReservation {
        /// The base returned.
        base: u64,
        /// The size reserved.
        size: u64,
        /// The alignment asked for.
        align: u64,
    },

    /// A device's runtime state does not fit its region.
    #[error(
        "the runtime state of device {ordinal} needs {bytes} bytes, more than the {stride}-byte \
         per-device region; lower VIGIL_SHADOW_POOL_RECORDS"
    )]
    RuntimeStateTooLarge {
        /// The device ordinal.
        ordinal: usize,
        /// Bytes needed.
        bytes: u64,
        /// The per-device stride.
        stride: u64,
    },

    /// The device is not in the configured rank topology.
    #[error(
        "device {ordinal} has no rank in the configured topology (VIGIL_DEVICE_RANKS: {ranks:?})"
    )]
    NotInTopology {
        /// The device ordinal.
        ordinal: usize,
        /// The configured rank-to-ordinal list.
        ranks: Vec<usize>,
    },

    /// A runtime-state region is mapped already (import over an existing one).
    #[error("the runtime state of rank {rank} is already mapped in this allocator")]
    RuntimeStateExists {
        /// The device rank.
        rank: u32,
    },

    /// No runtime state exists for that device yet.
    #[error("device {ordinal} has no runtime state yet (allocate on it first)")]
    NoRuntimeState {
        /// The device ordinal.
        ordinal: usize,
    },

    /// The device's allocation granularity does not divide the allocator's
    /// minimum block (a mix of devices with different granularities).
    #[error("device {ordinal} has allocation granularity {granularity}, which does not divide the allocator's block of {min_block} bytes")]
    Granularity {
        /// The device ordinal.
        ordinal: usize,
        /// Its granularity.
        granularity: u64,
        /// The allocator's minimum block.
        min_block: u64,
    },

    /// The real half cannot be split into blocks of the device's
    /// granularity (a granularity that is not a power of two).
    #[error("cannot manage {capacity} bytes in blocks of {min_block} bytes (the granularity must be a power of two)")]
    Geometry {
        /// Usable bytes of the real half.
        capacity: u64,
        /// The block size asked for.
        min_block: u64,
    },

    /// An operation on a pointer of another device than the stream's.
    #[error("{op}: the allocation at {ptr:#x} belongs to device {expected}, the stream to device {found}")]
    WrongDevice {
        /// The operation.
        op: &'static str,
        /// The pointer.
        ptr: u64,
        /// The allocation's device.
        expected: usize,
        /// The stream's device.
        found: usize,
    },
}

impl VmmError {
    /// True when there is no driver or no device (tests skip on this).
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, VmmError::Host(e) if e.is_no_gpu())
    }
}

/// Result of the allocator.
pub type VmmResult<T> = Result<T, VmmError>;
