//! The platform layer: everything that differs between the GPU (PTX) build
//! and the host build sits behind the same small set of functions here.
//!
//! Both modules export: coordinates (`thread_idx`, ...), `sync_threads`,
//! `fence`, `smid`, plain `load`/`store`, the scoped atomics used by
//! [`crate::atomic`], shared memory and warp collectives. Asynchronous
//! copies, mbarriers and dependent launches have their own pair
//! (`ptx_async`: one instruction each; `host_async`: the CPU backend's
//! model), which [`crate::async_copy`] calls through `async_imp`.

pub(crate) mod copy_accesses;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host_async;
#[cfg(target_arch = "nvptx64")]
pub mod ptx;
#[cfg(target_arch = "nvptx64")]
pub mod ptx_async;

#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use host as imp;
#[cfg(target_arch = "nvptx64")]
pub(crate) use ptx as imp;

#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use host_async as async_imp;
#[cfg(target_arch = "nvptx64")]
pub(crate) use ptx_async as async_imp;
