//! Vigil's benchmark suite: one program that measures, on one
//! GPU in one run, every suite kernel as Vigil compiles it, as nvcc
//! compiles its CUDA C++ twin (`benches/cuda/twins.cu`), with Vigil's
//! sanitizer on, and the twin under `compute-sanitizer`; plus the host
//! overheads of launching and allocating. It writes `bench-results.md` and
//! `bench-results.json`.
//!
//! Layers, bottom up: [`error`] and [`data`] (host arrays, device
//! buffers, reference checks); [`kernels`] (the two implementations);
//! [`cases`] (sizes, inputs, references, one launch per case); [`timing`];
//! [`device`] and [`budget`]; [`child`], time-boxed measuring children;
//! the runs ([`smoke`] on the CPU backend; [`suite`] on a GPU, or on the
//! CPU backend to try it; [`sanitized`], Vigil sanitized in a child;
//! [`tools`], the twins under compute-sanitizer in a child; [`overhead`]
//! and [`alloc`] for host costs); [`results`], what a run found; and
//! [`report`], which turns results into the table and the JSON (rewritten
//! after every case, so that a run ended from outside leaves its table).
//! [`all_reduce`] is the multi-GPU ring all-reduce's bus bandwidth, plain
//! and sanitized in one run (`--example all_reduce_bench`).
//!
//! ```text
//! scripts/prepare-bench.sh     # release build and CUDA sources into bench-run/
//! bash bench-run/run.sh        # on the GPU machine
//! cargo run -p vigil-bench -- --cpu-smoke
//! ```
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod all_reduce;
pub mod alloc;
pub mod budget;
pub mod cases;
pub mod child;
pub mod data;
pub mod device;
pub mod error;
pub mod kernels;
pub mod overhead;
pub mod report;
pub mod results;
pub mod ring_phases;
pub mod sanitized;
pub mod smoke;
pub mod suite;
pub mod timing;
pub mod tools;

pub use error::{BenchError, Result};
