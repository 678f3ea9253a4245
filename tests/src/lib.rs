//! Shared pieces of Vigil's examples and GPU tests: the embedded PTX of
//! `vigil-kernels`, deterministic random data, and bandwidth arithmetic.

/// The PTX of the `vigil-kernels` crate, built by `vigil-build` in `build.rs`.
pub const KERNELS_PTX: &str = include_str!(env!("VIGIL_PTX_VIGIL_KERNELS"));
