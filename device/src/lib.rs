//! `vigil-device`: the API a Vigil kernel is written against.
//!
//! A kernel is a Rust function marked [`kernel`](macro@kernel). It reads its coordinates
//! from [`thread_idx`], [`block_idx`] and friends, touches global memory only
//! through the typed handles in [`global`] (`load`, `store`, volatile
//! accesses, and atomics with an explicit [`Ordering`] and [`Scope`]), the
//! matrices of [`matrix`] and the partitions of [`partition`] (indexed by
//! the proven indices of [`bounded`], which need no check per access) and
//! the module-level variables of [`device_global!`], and
//! may use block-shared memory ([`shared_array!`],
//! [`dynamic_shared_array!`], [`dynamic_shared`], and the scoped tiles of a
//! [`shared_stack!`]), barriers ([`sync_threads`]),
//! fences ([`thread_fence`]) and warp collectives ([`warp`]), asynchronous copies,
//! mbarriers and tensor copies ([`async_copy`]) and programmatic dependent
//! launch ([`grid_dependency`]).
//!
//! The same source builds for `nvptx64-nvidia-cuda` (the PTX a GPU runs) and
//! for the host (the CPU backend). Platform specifics live in one small
//! module per platform (`arch::ptx`, `arch::host`); everything else is
//! platform-neutral.
//!
//! Every global access is generic over a [`Sanitizer`]: [`Plain`] compiles
//! to nothing, so the plain entry point costs what a hand-written kernel
//! costs; the sanitized variant of the same body calls the race detector at
//! each access, with the caller's source location from `#[track_caller]`.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        asm_experimental_arch,
        stdarch_nvptx,
        link_llvm_intrinsics,
        allow_internal_unstable
    )
)]
#![warn(missing_docs)]

mod arch;
pub mod async_copy;
pub mod atomic;
pub mod bounded;
pub mod device_global;
pub mod global;
pub mod gpu_sanitizer;
pub mod grid_dependency;
pub mod hooks;
pub mod index;
pub mod kernel;
pub mod math;
pub mod matrix;
pub mod partition;
pub mod peers;
pub mod sanitizer;
pub mod shared_mem;
pub mod shared_stack;
pub mod sync;
pub mod timer;
pub mod warp;

/// The interface between kernels and the CPU backend's executor: the
/// executor implements these traits and installs a
/// [`ThreadContext`](host_runtime::ThreadContext) per GPU thread with
/// [`set_current`](host_runtime::set_current) (or
/// [`enter_thread`](host_runtime::enter_thread) around a call).
#[cfg(not(target_arch = "nvptx64"))]
pub mod host_runtime {
    pub use crate::arch::host::{
        enter_thread, set_current, AsyncCopies, BlockRuntime, CopyAccess, SanitizerRuntime,
        ThreadContext, WarpOp,
    };
    pub use crate::arch::host_async::thread_returned;
    pub use crate::sanitizer::{AtomicAccess, Checked, SharedAccess};
}

pub use atomic::{Atomic, AtomicArith, AtomicBits, AtomicMinMax};
pub use bounded::{Idx, Indices, Point};
pub use device_global::DeviceGlobal;
pub use global::{GlobalPtr, GlobalPtrMut, GlobalSlice, GlobalSliceMut, Vec4};
pub use index::{block_dim, block_idx, grid_dim, sm_id, thread_idx, Dim3};
pub use kernel::{Kernel, KernelParam};
pub use matrix::{GlobalMatrix, GlobalMatrixMut};
pub use partition::{
    BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut, GridStrideMut, ThreadCellsMut,
    ThreadElemsMut,
};
pub use peers::{group_barrier, group_barrier_at, Peers, MAX_RANKS};
pub use sanitizer::{Plain, Sanitizer};
pub use shared_mem::dynamic_shared;
pub use shared_stack::{SharedStack, SharedTile};
#[allow(deprecated)]
pub use sync::fence;
pub use sync::{sync_threads, thread_fence};
pub use vigil_macros::{include_ptx, kernel};
pub use vigil_shared::{AccessKind, Ordering, Scope};

#[doc(hidden)]
pub use vigil_shared as __shared;

#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
pub use inventory as __inventory;

/// The items given, in the plain PTX build and on the host (a `#[kernel]`'s
/// plain entry); nothing in the sanitized PTX build
/// ([`sanitizer::Active`]).
#[cfg(not(vigil_sanitized))]
#[doc(hidden)]
#[macro_export]
macro_rules! __in_plain_build {
    ($($item:item)*) => { $($item)* };
}

#[cfg(vigil_sanitized)]
#[doc(hidden)]
#[macro_export]
macro_rules! __in_plain_build {
    ($($item:item)*) => {};
}

/// The items given, in the sanitized PTX build and on the host (a
/// `#[kernel]`'s sanitized entry); nothing in the plain PTX build
/// ([`sanitizer::Active`]).
#[cfg(any(vigil_sanitized, not(target_arch = "nvptx64")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __in_sanitized_build {
    ($($item:item)*) => { $($item)* };
}

#[cfg(not(any(vigil_sanitized, not(target_arch = "nvptx64"))))]
#[doc(hidden)]
#[macro_export]
macro_rules! __in_sanitized_build {
    ($($item:item)*) => {};
}

/// Everything a kernel usually needs, for `use vigil_device::prelude::*;`.
pub mod prelude {
    pub use crate::async_copy::{Mbarrier, TensorMap, TensorMapMut};
    pub use crate::bounded::{Idx, Point};
    pub use crate::device_global::DeviceGlobal;
    pub use crate::global::{GlobalPtr, GlobalPtrMut, GlobalSlice, GlobalSliceMut, Vec4};
    pub use crate::index::{
        block_dim, block_idx, global_index_x, grid_dim, grid_stride_x, sm_id, thread_idx, Dim3,
    };
    pub use crate::matrix::{GlobalMatrix, GlobalMatrixMut};
    pub use crate::partition::{
        BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut, GridStrideMut, ThreadCellsMut,
        ThreadElemsMut,
    };
    pub use crate::peers::{group_barrier, group_barrier_at, Peers};
    pub use crate::sanitizer::{Plain, Sanitizer};
    pub use crate::shared_mem::dynamic_shared;
    pub use crate::shared_stack::{SharedStack, SharedTile};
    #[allow(deprecated)]
    pub use crate::sync::fence;
    pub use crate::sync::{sync_threads, thread_fence};
    pub use crate::warp;
    pub use crate::{
        device_global, dynamic_shared_array, kernel, mbarriers, shared_array, shared_stack,
    };
    pub use vigil_shared::{Ordering, Scope};
}

/// Kernels cannot unwind; a panic in the PTX build (an out-of-bounds index,
/// an explicit `panic!`) traps, which the host sees as a launch failure.
#[cfg(all(target_arch = "nvptx64", not(feature = "custom-panic-handler")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}
