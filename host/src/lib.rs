//! `vigil`: the host API of Vigil, a Rust-native CUDA kernel framework with
//! a global-memory race sanitizer.
//!
//! The pieces, each a small typed handle whose fallible calls return
//! [`Result`]:
//!
//! - [`Context`]: a device (a CUDA GPU's primary context, or the CPU
//!   backend), its mode (plain or sanitized) and its attributes;
//!   [`Context::from_env`] picks the GPU when there is one and the CPU
//!   backend otherwise; [`ContextBuilder`] sets the same options in code;
//! - [`Stream`] and [`Event`]: ordering, synchronisation, timing;
//! - [`DeviceBuffer`], [`DeviceSlice`], [`DeviceSliceMut`]: device memory;
//! - [`Module`]: PTX loaded on a device; [`KernelFn`] is a kernel in it whose
//!   PTX signature has been checked against its Rust declaration;
//! - [`Stream::launch`]: a typed launch. The argument tuple is checked
//!   against the kernel's parameter types at compile time, the values
//!   (buffer devices, non-empty pointers) and the [`LaunchConfig`] before
//!   any driver call, and the arguments are packed into one aligned
//!   [`ParamBuffer`] that the driver's `void*` array points into;
//! - [`RaceReports`]: what the sanitizer found, returned by
//!   [`Context::synchronize`] as [`Error::Races`].
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
//! ([`RaceReports`], [`Error::Races`]).
//!
//! # The API at a glance
//!
//! | to | use |
//! |----|-----|
//! | open a device | [`Context`] ([`Context::from_env`], [`Context::cpu`], [`Context::new`]), [`ContextBuilder`], [`DeviceChoice`], [`ENV_DEVICE`], [`ENV_SANITIZE`], [`ENV_LAUNCH_TIMEOUT`] |
//! | order and time work | [`Stream`], [`Event`] |
//! | hold device memory | [`DeviceBuffer`], [`DeviceSlice`], [`DeviceSliceMut`], [`AsDeviceSlice`], [`AsDeviceSliceMut`] |
//! | load and launch kernels | [`Module`], [`KernelFn`], [`Kernel`], [`LaunchConfig`], [`Dim3`], [`Stream::launch`] |
//! | launch without a Rust signature | [`Function`], [`KernelArgValue`] with [`Stream::launch_dynamic`], [`ParamBuffer`] with [`Stream::launch_packed`] |
//! | read races | [`RaceReports`], [`RaceReport`], [`Error::Races`]; settings: [`SanitizerConfig`] |
//! | control the sanitizer | report files ([`ReportFormat`], [`ReportDocument`]), [`Suppressions`], [`LaunchFilter`], [`ContextBuilder::exit_code`] |
//! | plug in another CPU sanitizer | [`CpuSanitizer`] (with [`ContextBuilder::cpu_sanitizer`]), [`HostBufferAllocator`] |
//! | handle errors | [`Error`], [`Result`], [`ArgProblem`], [`LaunchConfigError`]; [`ErrorReport`] prints one with its causes |
//! | test kernels on every backend | [`macro@test`] (`#[vigil::test]`), [`test_main!`], [`testing`] |
//!
//! Everything a kernel author needs is at the crate root. Vigil's own
//! tests and benchmarks reach the internals (the CPU executor, the shadow
//! allocator, PTX parsing, the raw driver API) through [`unstable`], which
//! makes no stability promise.
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

// Layers, bottom up (ARCHITECTURE.md; `tests/layers.rs` checks that a
// layer imports only from layers below it): `types`, `ipc` and
// `buddy_allocator` (leaves); `sanitizer` (the sanitizers' shared host
// side); `error`; `launch_abi` (how a launch's arguments are packed and
// checked); `backend` (the launch and transfer descriptions, the CUDA and
// CPU backends, then the dispatch point); `api` (the front end);
// `testing` (the harness) and `unstable`.
mod api;
mod backend;
mod buddy_allocator;
mod error;
pub mod ipc;
mod launch_abi;
mod sanitizer;
pub mod testing;
mod types;
pub mod unstable;

pub use api::args::{pack_args, pack_values, ErasedView, KernelArg, KernelArgValue, KernelArgs};
pub use api::builder::{
    ContextBuilder, DeviceChoice, ENV_DEVICE, ENV_LAUNCH_TIMEOUT, ENV_SANITIZE,
};
pub use api::context::Context;
pub use api::event::Event;
pub use api::globals::DeviceGlobalRef;
pub use api::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceSlice, DeviceSliceMut};
pub use api::module::{Function, KernelFn, Module};
pub use api::process_group::{ProcessGroup, ProcessSymmetric};
pub use api::proofs::{pack_proven_args, LayoutParam, ReadLayoutParam};
pub use api::stream::Stream;
pub use api::symmetric::{
    PeerSlice, PeersArg, Symmetric, SymmetricGroup, DEFAULT_GROUP_LAUNCH_TIMEOUT,
};
pub use api::tensor_map::{DeviceTensorMap, DeviceTensorMapMut, TiledLayout};
pub use backend::cpu::hooks::{
    CpuSanitizer, HostAllocation, HostBufferAllocator, HostSync, LaunchInfo, SystemAllocator,
    TransferInfo,
};
pub use backend::cpu::memory::HOST_ALIGN;
pub use backend::cuda::device::{device_count, driver_version, gpu_available};
pub use backend::transfer::TransferKind;
pub use error::{
    ArgProblem, DivergentBarrier, Error, ErrorReport, GroupProblem, Result, TensorMapProblem,
};
pub use launch_abi::params::{PackedView, ParamBuffer, ParamScalar, ProvenView};
pub use sanitizer::config::{ConfigError, ProcessRank, SanitizerConfig, SanitizerConfigBuilder};
#[allow(deprecated)]
pub use sanitizer::config::{VmmConfig, VmmConfigBuilder};
pub use sanitizer::launch_filter::{KernelPattern, LaunchFilter};
pub use sanitizer::report::{
    kind_name, DetectionBounds, MemorySpace, PriorAccess, RaceAccess, RaceAllocation, RaceReport,
    RaceReports, SourceLocation,
};
pub use sanitizer::report_json::{
    ReportDocument, ReportReadError, REPORT_FORMAT, REPORT_FORMAT_VERSION,
};
pub use sanitizer::sarif::SARIF_SCHEMA;
pub use sanitizer::sink::ReportFormat;
pub use sanitizer::suppressions::{SuppressionError, Suppressions};
pub use types::{
    DeviceId, DeviceLimits, DeviceProps, Dim3, EventId, FunctionAttrs, LaunchConfig,
    LaunchConfigError, LaunchVariant, StreamId, TensorElement, TensorElementType,
};

pub use vigil_test_macros::test;

/// The kernel-side crate, re-exported so users name one dependency.
pub use vigil_device as device;
pub use vigil_device::include_ptx;
pub use vigil_device::Kernel;
/// The parameter ABI shared with the device side (`#[kernel]` emits
/// `ParamDesc`s; packed scalars are `PtxType`s).
pub use vigil_shared::params::{ParamCursor, ParamDesc, PtxType};
/// How a tensor copy lays a box out in shared memory.
pub use vigil_shared::tensor_map::Swizzle;
/// The vocabulary of race reports, shared with the engine.
pub use vigil_shared::{abi::ReportKind, AccessKind, Scope};
