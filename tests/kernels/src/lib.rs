//! Kernels for Vigil's examples and tests, written as a user writes them:
//! built to PTX by `vigil-build` and, unchanged, for the host (CPU backend).
#![cfg_attr(
    target_arch = "nvptx64",
    no_std,
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

pub mod async_copies;
pub mod async_races;
pub mod block_races;
pub mod examples;
pub mod globals;
pub mod hangs;
pub mod helpers;
pub mod math;
pub mod proofs;
pub mod races;
pub mod scale_races;
pub mod shared_stack;
pub mod spin_waits;
pub mod symmetric;
pub mod tests;
