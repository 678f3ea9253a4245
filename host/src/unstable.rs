//! Internals for Vigil's own tests, benchmarks and tools. **No stability
//! promise**: anything here may change in any release. A kernel author
//! needs none of it (the crate root has the whole user API).
//!
//! - [`cpu`]: the CPU backend's executor, its sanitizer hooks and its race
//!   sanitizer, for driving them without a [`Context`](crate::Context);
//! - [`vmm`]: the sanitizer's shadow-memory allocator on CUDA virtual
//!   memory, and the CUDA handles it takes;
//! - [`buddy_allocator`]: the buddy allocator both shadow allocators hand
//!   ranges out with, and its reference model;
//! - [`ptx`], [`launch_abi`]: the PTX `.entry` signature parser and the
//!   checks of packed arguments and Rust signatures against it;
//! - [`ptx_cut`]: the cut of a module to the entries one context launches;
//! - [`decode`]: the decoder from the engine's raw report records to
//!   [`RaceReport`](crate::RaceReport)s, for a sanitizer plugged in with
//!   [`ContextBuilder::cpu_sanitizer`](crate::ContextBuilder::cpu_sanitizer)
//!   or a GPU runtime's report buffer;
//! - [`env`](mod@env): every `VIGIL_*` variable the project reads, and the
//!   unknown-variable warning;
//! - [`testing`]: GPU-test helpers (`VIGIL_REQUIRE_GPU`);
//! - [`sys`]: the raw CUDA driver API (cudarc's `driver::sys`), for calls
//!   Vigil does not wrap; every handle type exposes its raw value (`raw()`).

pub use crate::launch_abi::{ptx, ptx_cut};

pub mod launch_abi {
    //! The launch ABI's checks and the parameter buffer's slot records:
    //! what the launch path runs before any driver call, callable alone.
    pub use crate::launch_abi::check::{check_params, check_params_on, check_signature};
    pub use crate::launch_abi::params::{KernelParams, ParamSlot, SlotOrigin};
}

/// The old name of [`launch_abi`](mod@launch_abi).
#[deprecated(note = "renamed `vigil::unstable::launch_abi`")]
pub mod abi {
    pub use super::launch_abi::*;
}
pub use crate::sanitizer::{decode, env};

pub mod buddy_allocator {
    //! The buddy allocator both shadow allocators hand ranges out with
    //! (`host/src/buddy_allocator.rs`), and its reference model.
    pub use crate::buddy_allocator::*;
}
pub mod testing;
/// The raw CUDA driver API (cudarc's `driver::sys`).
pub use cudarc::driver::sys;

pub mod cpu {
    //! The CPU backend's parts: the executor, the hooks a CPU context
    //! calls on its sanitizer, and the CPU race sanitizer.
    pub use crate::backend::cpu::executor::{self, *};
    pub use crate::backend::cpu::hooks;
    pub use crate::backend::cpu::sanitizer;
}

pub mod vmm {
    //! The shadow-memory allocator (docs/src/design/address-space.md) and the CUDA handles its
    //! calls accept besides a GPU [`Context`](crate::Context) and
    //! [`Stream`](crate::Stream).
    pub use crate::backend::cuda::vmm::*;
    pub use crate::backend::cuda::{AsCudaDevice, AsCudaStream, CudaDevice, CudaEvent, CudaStream};
}
