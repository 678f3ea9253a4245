//! `vigil`: the host API of Vigil, a Rust-native CUDA kernel framework with
//! a global-memory race sanitizer.
//!
//! The pieces, each a small typed handle whose fallible calls return
//! [`Result`]:
//!
//! - [`Context`]: a device (a CUDA GPU's primary context, or the CPU
//!   backend), its mode (plain or sanitized) and its attributes;
//!   [`Context::from_env`] picks the GPU when there is one and the CPU
//!   backend otherwise;
//! - [`Stream`] and [`Event`]: ordering, synchronisation, timing;
//! - [`DeviceBuffer`], [`DeviceSlice`], [`DeviceSliceMut`]: device memory;
//! - [`Module`]: PTX loaded on a device; [`KernelFn`] is a kernel in it whose
//!   PTX signature has been checked against its Rust declaration;
//! - [`Stream::launch`]: a typed launch. The argument tuple is checked
//!   against the kernel's parameter types at compile time, the values
//!   (buffer devices, non-empty pointers) and the [`LaunchConfig`] before
//!   any driver call, and the arguments are packed into one aligned
//!   [`ParamBuffer`] that the driver's `void*` array points into.
//!
//! ```ignore
//! use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
//! let ctx = Context::from_env()?; // the GPU if there is one, else the CPU
//! let stream = Stream::new(&ctx)?;
//! let module = Module::from_ptx(&ctx, KERNELS_PTX)?;
//! let axpy = module.kernel::<kernels::axpy>()?;
//! let x = DeviceBuffer::from_slice(&stream, &xs)?;
//! let mut y = DeviceBuffer::from_slice(&stream, &ys)?;
//! stream.launch(&axpy, LaunchConfig::for_num_elems(n, 256), (2.0f32, &x, &mut y))?;
//! let out = y.to_vec(&stream)?;
//! ```
//!
//! The driver is loaded at run time (cudarc, dynamic loading). Without a
//! driver library or a GPU every GPU entry point returns an error
//! ([`Error::DriverNotFound`], [`Error::NoDevice`]); nothing panics. The
//! CPU backend ([`Context::cpu`]) runs the same kernels and host code
//! without either; with the sanitizer on it reports races
//! ([`RaceReports`], [`Error::Races`]) through a [`CpuSanitizer`].
//! Argument packing ([`pack_args`], [`ParamBuffer`]) needs no GPU.
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod args;
mod context;
pub mod cpu;
pub mod cpu_sanitizer;
mod driver;
mod error;
mod event;
mod launch;
mod memory;
mod module;
mod params;
pub mod ptx;
mod report;
pub mod sanitize;
mod stream;
pub mod testing;
pub mod vmm;

pub use args::{pack_args, pack_values, ErasedView, KernelArg, KernelArgValue, KernelArgs};
pub use context::{
    Context, ContextBuilder, DeviceChoice, DeviceId, DeviceProps, LaunchVariant, ENV_DEVICE,
    ENV_SANITIZE,
};
pub use driver::{device_count, driver_version, gpu_available};
pub use error::{ArgProblem, Error, LaunchConfigError, Result};
pub use event::Event;
pub use launch::{check_params, check_params_on, DeviceLimits, Dim3, LaunchConfig};
pub use memory::{
    AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceSlice, DeviceSliceMut, HOST_ALIGN,
};
pub use module::{check_signature, Function, FunctionAttrs, KernelFn, Module};
pub use params::{KernelParams, ParamBuffer, ParamScalar, ParamSlot, SlotOrigin};
pub use report::{
    kind_name, PriorAccess, RaceAccess, RaceAllocation, RaceReport, RaceReports, SourceLocation,
};
pub use sanitize::{
    CpuSanitizer, EventId, HostAllocation, HostBufferAllocator, HostSync, LaunchInfo, StreamId,
    SystemAllocator,
};
pub use stream::Stream;

/// The kernel-side crate, re-exported so users name one dependency.
pub use vigil_device as device;
pub use vigil_device::include_ptx;
pub use vigil_device::Kernel;
/// The parameter ABI shared with the device side (`#[kernel]` emits
/// `ParamDesc`s; packed scalars are `PtxType`s).
pub use vigil_shared::params::{ParamCursor, ParamDesc, PtxType};
/// The vocabulary of race reports, shared with the engine.
pub use vigil_shared::{abi::ReportKind, AccessKind, Scope};

/// The raw CUDA driver API (cudarc's `driver::sys`), for calls Vigil does
/// not wrap. Every handle type exposes its raw value (`raw()`).
pub use cudarc::driver::sys;
