//! The platform layer: everything that differs between the GPU (PTX) build
//! and the host build sits behind the same small set of functions here.
//!
//! Both modules export: coordinates (`thread_idx`, ...), `sync_threads`,
//! `fence`, `smid`, plain `load`/`store`, the scoped atomics used by
//! [`crate::atomic`], shared memory and warp collectives.

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(target_arch = "nvptx64")]
pub mod ptx;

#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use host as imp;
#[cfg(target_arch = "nvptx64")]
pub(crate) use ptx as imp;
