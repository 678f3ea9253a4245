//! The user guide's kernels (`docs/src`), one module per chapter, written
//! as a user writes them: built to PTX by `vigil-build` and, unchanged,
//! for the host (the CPU backend). The guide includes them between their
//! `ANCHOR` comments.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod async_copies;
pub mod atomics;
pub mod fast_safe;
pub mod first;
pub mod groups;
pub mod math;
pub mod memory;
pub mod races;
pub mod shared;
pub mod warp;
