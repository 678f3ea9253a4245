//! The one error type of the host API.
//!
//! Every fallible call returns [`Result`]. Variants carry enough context to
//! act on without a debugger: which driver call failed and its `CUresult`,
//! which kernel, which argument (index, name, Rust type), which range.

mod cpu;
mod group;
mod report;
mod tensor_map;
mod vmm;

pub use crate::sanitizer::barrier::DivergentBarrier;
pub use cpu::{CpuError, SpinningThread, StalledBlock};
pub use group::GroupProblem;
pub use report::ErrorReport;
pub use tensor_map::TensorMapProblem;
pub use vmm::{VmmError, VmmResult};

use crate::ipc::RendezvousError;
use crate::sanitizer::config::ConfigError;
use crate::sanitizer::report::RaceReports;
use crate::types::{DeviceId, Dim3, LaunchConfigError, PtxParam};
use std::time::Duration;
use vigil_shared::params::PtxType;
use vigil_shared::proofs::ProofProblem;

/// `std::result::Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the host API.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library (`libcuda.so.1`) could not be loaded.
    #[error(
        "CUDA driver library not found (searched: {searched}); install the NVIDIA driver \
         or put libcuda.so.1 on the loader path"
    )]
    DriverNotFound {
        /// The library names that were tried.
        searched: String,
    },

    /// The driver loaded but there is no usable CUDA device.
    #[error("no CUDA device: {reason}")]
    NoDevice {
        /// What the driver said.
        reason: String,
    },

    /// A device ordinal past the number of devices.
    #[error("CUDA device {ordinal} does not exist ({count} device(s) present)")]
    InvalidDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices there are.
        count: usize,
    },

    /// A driver call returned an error.
    #[error("{call} failed: {name} ({code})")]
    Driver {
        /// The driver function, e.g. `cuMemAlloc_v2`.
        call: &'static str,
        /// The `CUresult` name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        name: String,
        /// The numeric `CUresult`.
        code: u32,
    },

    /// A tensor map that cannot describe its buffer (checked before the
    /// driver sees it; what the driver refuses is [`Error::Driver`] of
    /// `cuTensorMapEncodeTiled`).
    #[error("invalid tensor map: {0}")]
    TensorMap(TensorMapProblem),

    /// A kernel trapped or faulted (an out-of-bounds index traps, so does a
    /// sanitized kernel whose sanitizer ran out of room). The driver then
    /// fails every later call on the context with the same error.
    #[error(
        "{call}: a kernel faulted ({name}, {code}); the CUDA context is now unusable: \
         every later call on it fails, so end the process (or reset the device) to use the GPU again"
    )]
    KernelFault {
        /// The driver function that reported it, e.g. `cuCtxSynchronize`.
        call: &'static str,
        /// The `CUresult` name, e.g. `CUDA_ERROR_ILLEGAL_INSTRUCTION`.
        name: String,
        /// The numeric `CUresult`.
        code: u32,
    },

    /// A driver entry point could not be called (a missing symbol in an old
    /// driver library: the dynamic loader panicked and the panic was caught).
    #[error("{call}: the CUDA driver library could not provide it: {message}")]
    DriverSymbol {
        /// The driver function.
        call: &'static str,
        /// The loader's message.
        message: String,
    },

    /// The driver rejected PTX text; `log` is the JIT compiler's error log.
    #[error("loading PTX failed: {name} ({code}); JIT log:\n{log}")]
    PtxLoad {
        /// The `CUresult` name.
        name: String,
        /// The numeric `CUresult`.
        code: u32,
        /// The JIT error log (may be empty).
        log: String,
    },

    /// A sanitized module did not load because an entry's static shared
    /// memory is over the device's limit: its kernel's own, the GPU
    /// sanitizer's state
    /// ([`SANITIZER_SHARED_BYTES`](vigil_shared::block::SANITIZER_SHARED_BYTES),
    /// 2,472 bytes) and the shadows of its shared arrays of up to 4,668
    /// bytes (7 bytes of shadow per byte; larger arrays are shadowed in
    /// device memory). The plain module loads; `log` is the JIT's.
    #[error(
        "the sanitized entry {entry} needs more static shared memory than the          device allows (the kernel's own, {added} bytes of sanitizer state and          the shadows of its small shared arrays); run it unsanitized, or make          a small shared array larger than 4,668 bytes so that its shadow moves          to device memory. JIT log:\n{log}"
    )]
    SanitizedSharedMemory {
        /// The sanitized entry (`name__vigil`).
        entry: String,
        /// Bytes of static shared memory the sanitizer adds to every entry.
        added: usize,
        /// The JIT error log.
        log: String,
    },

    /// PTX text that cannot be handed to the driver or parsed for entry
    /// signatures.
    #[error("malformed PTX: {message}")]
    PtxText {
        /// What is wrong.
        message: String,
    },

    /// A kernel launch (`cuLaunchKernel`) failed.
    #[error("launching kernel `{kernel}` failed: {name} ({code})")]
    Launch {
        /// The PTX entry point.
        kernel: String,
        /// The `CUresult` name.
        name: String,
        /// The numeric `CUresult`.
        code: u32,
    },

    /// The module has no entry point of that name.
    #[error(
        "kernel `{kernel}` not found in the PTX module (entry points: {})",
        list(available)
    )]
    KernelNotFound {
        /// The entry point looked up.
        kernel: String,
        /// The entry points the PTX declares.
        available: Vec<String>,
    },

    /// The module declares no device global of this name.
    #[error(
        "device global `{name}` not found in the module (device globals: {})",
        list(available)
    )]
    GlobalNotFound {
        /// The name looked up.
        name: String,
        /// The device globals the module declares.
        available: Vec<String>,
    },

    /// A device global looked up as elements of a type whose size does
    /// not divide the global's.
    #[error(
        "device global `{name}` is {bytes} bytes, not a whole number of {elem_size}-byte elements"
    )]
    GlobalType {
        /// The global.
        name: String,
        /// Its size in bytes.
        bytes: usize,
        /// The size of the element type asked for.
        elem_size: usize,
    },

    /// The PTX declares the entry, but this GPU context did not load it:
    /// a context loads only the entries its launch variant runs (plain
    /// entries in a plain context, `name__vigil` entries in a sanitized one).
    #[error(
        "entry `{kernel}` is in the PTX but not loaded in this {variant:?} GPU context \
         (a context JIT-compiles only the entries its launches run)"
    )]
    EntryNotLoaded {
        /// The entry point looked up.
        kernel: String,
        /// The context's launch variant.
        variant: crate::types::LaunchVariant,
    },

    /// The Rust declaration of a kernel and its PTX entry disagree on the
    /// number of PTX parameters (stale PTX, or the wrong module).
    #[error(
        "kernel `{kernel}`: Rust signature lowers to {expected} PTX parameter(s) but the PTX \
         entry declares {found} (stale or mismatched PTX?)"
    )]
    SignatureCount {
        /// The PTX entry point.
        kernel: String,
        /// PTX scalars the Rust side passes.
        expected: usize,
        /// PTX parameters the entry declares.
        found: usize,
    },

    /// The Rust declaration of a kernel parameter and its PTX `.param`
    /// disagree on a scalar type.
    #[error(
        "kernel `{kernel}`: parameter {index} `{name}: {rust_type}` passes {} but PTX parameter \
         {ptx_index} `{}` is declared `{}` (stale or mismatched PTX?)",
        expected.name(), ptx.name, ptx.decl
    )]
    SignatureType {
        /// The PTX entry point.
        kernel: String,
        /// Index of the Rust-level parameter (hidden parameters count on
        /// after the user parameters).
        index: usize,
        /// Its name in the kernel source.
        name: &'static str,
        /// Its Rust type as written.
        rust_type: &'static str,
        /// The PTX scalar the Rust side passes.
        expected: PtxType,
        /// Index of the PTX `.param`.
        ptx_index: usize,
        /// The PTX `.param` (name and declaration, e.g. `.u64 .ptr .align 1`).
        ptx: Box<PtxParam>,
    },

    /// The arguments of a launch do not fill the kernel's parameter list.
    #[error("kernel `{kernel}`: {given} {what}(s) given but the kernel takes {expected}")]
    ArgumentCount {
        /// The kernel.
        kernel: String,
        /// What is counted: `argument` or `PTX scalar`.
        what: &'static str,
        /// How many were given.
        given: usize,
        /// How many the kernel takes.
        expected: usize,
    },

    /// One argument of a launch is unusable.
    #[error("kernel `{kernel}`: argument {index} `{name}: {rust_type}`: {problem}")]
    Argument {
        /// The kernel.
        kernel: String,
        /// Index of the argument.
        index: usize,
        /// The parameter's name (or `?` when unknown, e.g. in untyped launches).
        name: String,
        /// The parameter's Rust type as written (or its PTX type).
        rust_type: String,
        /// What is wrong with it.
        problem: Box<ArgProblem>,
    },

    /// A launch configuration the device cannot run.
    #[error("kernel `{kernel}`: invalid launch configuration: {problem}")]
    LaunchConfig {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        problem: LaunchConfigError,
    },

    /// A range outside a device buffer or slice.
    #[error("range {start}..{end} out of bounds for a device slice of length {len}")]
    OutOfBounds {
        /// First element of the range.
        start: usize,
        /// One past the last element of the range.
        end: usize,
        /// Length of the slice.
        len: usize,
    },

    /// A copy between two sides of different lengths.
    #[error("{op}: length mismatch: destination has {dst} element(s), source has {src}")]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Destination length in elements.
        dst: usize,
        /// Source length in elements.
        src: usize,
    },

    /// An object used with a stream, buffer or module of another device.
    #[error("{op}: object belongs to {found}, but the stream/context is on {expected}")]
    WrongDevice {
        /// The operation.
        op: &'static str,
        /// The device of the stream or context used.
        expected: DeviceId,
        /// The device of the object passed.
        found: DeviceId,
    },

    /// A byte size that does not fit in `usize`.
    #[error("size overflow: {count} element(s) of {elem_size} byte(s)")]
    SizeOverflow {
        /// Element count.
        count: usize,
        /// Element size in bytes.
        elem_size: usize,
    },

    /// The shadow-memory allocator of a sanitized GPU context refused
    /// (see [`VmmError`]). Host-API errors the allocator passes through
    /// ([`VmmError::Host`]) convert back to themselves, not to this variant.
    #[error("sanitizer allocator: {0}")]
    Vmm(Box<VmmError>),

    /// A `VIGIL_*` variable or builder option with a value it does not
    /// accept; the error names the variable, the value and what is accepted.
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),

    /// A kernel failed on the CPU backend (a panicking thread, a deadlock,
    /// an invalid configuration, or a resource the executor could not get).
    #[error("CPU backend: {0}")]
    Cpu(CpuError),

    /// Threads of a block diverged at a `sync_threads` (see
    /// [`DivergentBarrier`]): the CPU backend fails the launch with it, a
    /// sanitized GPU context returns it from the next synchronisation.
    #[error("{0}")]
    DivergentBarrier(DivergentBarrier),

    /// The sanitizer found data races (or engine errors); returned by
    /// [`Context::synchronize`](crate::Context::synchronize) and
    /// [`Stream::synchronize`](crate::Stream::synchronize) of a sanitized
    /// context. The context stays usable.
    #[error("{0}")]
    Races(RaceReports),

    /// An operation the context's backend cannot do (e.g. a driver
    /// attribute on the CPU backend, an untyped launch without host code).
    #[error("{op} is not supported on {backend}: {reason}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The device it was tried on.
        backend: DeviceId,
        /// Why, and what to do instead.
        reason: &'static str,
    },

    /// A symmetric group or allocation was refused.
    #[error("symmetric group: {0}")]
    Group(GroupProblem),

    /// A group of processes could not meet (exchange its allocations'
    /// file descriptors).
    #[error("rendezvous: {0}")]
    Rendezvous(#[from] RendezvousError),

    /// The CPU sanitizer failed (e.g. its shadow arena is full).
    #[error("CPU sanitizer: {message}")]
    Sanitizer {
        /// What went wrong.
        message: String,
    },

    /// The CPU backend could not allocate host memory for a buffer.
    #[error("the CPU backend could not allocate {bytes} bytes of host memory")]
    HostOutOfMemory {
        /// Bytes asked for.
        bytes: usize,
    },

    /// A wait on a GPU did not finish within the launch timeout
    /// (`VIGIL_LAUNCH_TIMEOUT`,
    /// [`ContextBuilder::launch_timeout`](crate::ContextBuilder::launch_timeout)).
    /// The kernel may still be running; the context may be unusable until
    /// it ends. (On the CPU backend the launch itself fails, with
    /// [`CpuError::Timeout`].)
    #[error(
        "{op} on {backend} did not finish within {limit:?} (VIGIL_LAUNCH_TIMEOUT): a kernel may \
         still be running, and the context may be unusable until it ends"
    )]
    Timeout {
        /// The wait, e.g. `Stream::synchronize`.
        op: &'static str,
        /// The device.
        backend: DeviceId,
        /// The limit.
        limit: Duration,
    },

    /// Timing between two events that cannot be timed (not recorded yet, or
    /// created without timing).
    #[error("cannot time between these events: {reason}")]
    EventTiming {
        /// What is wrong.
        reason: &'static str,
    },
}

impl From<VmmError> for Error {
    fn from(e: VmmError) -> Error {
        match e {
            VmmError::Host(e) => e,
            e => Error::Vmm(Box::new(e)),
        }
    }
}

/// A CPU launch's failure; a divergent barrier is the backend-neutral
/// [`Error::DivergentBarrier`], as a GPU context reports it.
impl From<CpuError> for Error {
    fn from(e: CpuError) -> Error {
        match e {
            CpuError::DivergentBarrier(d) => Error::DivergentBarrier(d),
            e => Error::Cpu(e),
        }
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}

impl Error {
    /// The numeric `CUresult` when the error came from the driver.
    pub fn driver_code(&self) -> Option<u32> {
        match self {
            Error::Driver { code, .. }
            | Error::KernelFault { code, .. }
            | Error::PtxLoad { code, .. }
            | Error::Launch { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the error says that this machine cannot run CUDA at all
    /// (no driver library, no device), as opposed to a failure of one call.
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::DriverNotFound { .. } | Error::NoDevice { .. })
    }

    /// The race reports when the error is [`Error::Races`].
    pub fn races(&self) -> Option<&RaceReports> {
        match self {
            Error::Races(r) => Some(r),
            _ => None,
        }
    }
}

/// What is wrong with one launch argument.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgProblem {
    /// A pointer parameter (one element) given an empty buffer.
    #[error("a pointer parameter needs at least one element, the buffer is empty")]
    EmptyForPointer,
    /// The argument's memory lives on another device than the launch.
    #[error("buffer is on {found}, the launch is on {expected}")]
    WrongDevice {
        /// The launch's device.
        expected: DeviceId,
        /// The buffer's device.
        found: DeviceId,
    },
    /// The scalars an argument packed differ from what its parameter type
    /// lowers to (a faulty `KernelArg` implementation) or from the PTX.
    #[error("packs {} but the parameter expects {}", types(got), types(expected))]
    Abi {
        /// Scalars the parameter type lowers to.
        expected: Vec<PtxType>,
        /// Scalars the argument packed.
        got: Vec<PtxType>,
    },
    /// An untyped argument whose scalar does not match the PTX declaration.
    #[error("passes {} but PTX parameter {ptx_index} `{ptx_name}` is declared `{ptx_decl}`", given.name())]
    PtxType {
        /// The scalar passed.
        given: PtxType,
        /// Index of the PTX `.param`.
        ptx_index: usize,
        /// Name of the PTX `.param`.
        ptx_name: String,
        /// Its declaration.
        ptx_decl: String,
    },
    /// The launch cannot prove the layout the parameter declares (its
    /// `#[shape]`, `#[chunk]`, `#[tile]` or partition) for its grid and
    /// block: a part would lie outside the buffer, two threads or blocks
    /// would own the same part, or the parts would leave elements out.
    #[error("{problem} (launch: grid {}, block {})", dims(*grid), dims(*block))]
    Layout {
        /// What fails.
        problem: ProofProblem,
        /// The launch's grid.
        grid: Dim3,
        /// The launch's block.
        block: Dim3,
    },
    /// A `#[same_len(other)]` view whose length differs from `other`'s.
    #[error(
        "has {len} elements, but is declared #[same_len({other})] and `{other}` has {other_len}"
    )]
    LengthMismatch {
        /// The view it must be as long as.
        other: String,
        /// Its length.
        len: u64,
        /// The other view's length.
        other_len: u64,
    },
    /// The kernel's declared layout names a parameter the launch did not
    /// pack as a size (a `Kernel` implementation written by hand that
    /// disagrees with its parameters).
    #[error("its declared layout reads parameter {param}, which holds no size or length")]
    LayoutParam {
        /// The parameter the layout names.
        param: usize,
    },
}

/// `x x y x z`, the way a launch's extents read in messages.
pub(crate) fn dims(d: Dim3) -> String {
    format!("{} x {} x {}", d.x, d.y, d.z)
}

fn types(v: &[PtxType]) -> String {
    let names: Vec<&str> = v.iter().map(|t| t.name()).collect();
    format!("[{}]", names.join(", "))
}
