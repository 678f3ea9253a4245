//! The benchmark suite's Vigil kernels, written as a user writes them. Each
//! has a CUDA C++ twin of the same name in `benches/cuda/twins.cu` that does
//! the same work the same way, so that the suite compares compilers and
//! launch paths, not algorithms. `axpy`, `reduce_sum` and `histogram` are
//! the examples' kernels (`vigil-kernels`), not repeated here.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, stdarch_nvptx))]

pub mod block;
pub mod cost;
pub mod pipelined;
pub mod streaming;
pub mod tiles;
