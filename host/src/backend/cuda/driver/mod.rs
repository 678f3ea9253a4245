//! The CUDA driver's result layer: every call into the driver library in
//! the crate, one typed function per driver call, grouped by area, with
//! one error type ([`DriverError`]).
//!
//! The CUDA backend is layered as cudarc's driver module is:
//!
//! - `sys`: cudarc's raw bindings (`cudarc::driver::sys`), called from
//!   this folder only;
//! - `result` (this folder): each function makes one driver call and
//!   returns what it produced, or a [`DriverError`] naming the call;
//!   calls whose other outcomes are answers (a query's `NOT_READY`, a
//!   lookup's `NOT_FOUND`, an entry point an older driver lacks) return
//!   them as values;
//! - `safe`: the handles of `backend/cuda/` that own driver resources
//!   (`CudaDevice`, `CudaStream`, `CudaEvent`, `CudaModule`, the shadow
//!   allocator, the GPU sanitizer's memory), which call only this layer.
//!
//! cudarc loads `libcuda` lazily and panics when the library or a symbol
//! is missing. Vigil never lets that panic escape: [`init`] probes for the
//! library first (and caches the outcome), and every call goes through
//! one function that catches a loader panic and returns it as
//! [`Failure::Unavailable`].
//!
//! - [`context`]: devices, their primary contexts, limits and peers;
//! - [`stream`]: streams and events;
//! - [`module`]: JIT compilation, modules, functions and launches;
//! - [`memory`]: device allocations, copies, fills and mapped host memory;
//! - [`tensor_map`]: tensor-copy descriptors;
//! - [`virtual_memory`]: reservations, physical memory, mappings and their
//!   export as file descriptors.

mod error;

pub(crate) mod context;
pub(crate) mod memory;
pub(crate) mod module;
pub(crate) mod stream;
pub(crate) mod tensor_map;
pub(crate) mod virtual_memory;

pub(crate) use error::{DriverError, DriverResult, Failure};

use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUresult};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Runs one raw driver call, catching a panic of cudarc's dynamic loader
/// (missing library or symbol) and returning it as
/// [`Failure::Unavailable`].
fn call(name: &'static str, f: impl FnOnce() -> CUresult) -> DriverResult<CUresult> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".to_owned());
        DriverError::unavailable(name, message)
    })
}

/// Runs one driver call: `Ok(())` on `CUDA_SUCCESS`, else the error.
fn check(name: &'static str, f: impl FnOnce() -> CUresult) -> DriverResult<()> {
    match call(name, f)? {
        CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(DriverError::new(name, r)),
    }
}

/// Runs a call an older driver may lack: `Ok(false)` when the library has
/// no such entry point.
fn check_if_present(name: &'static str, f: impl FnOnce() -> CUresult) -> DriverResult<bool> {
    match check(name, f) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.failure, Failure::Unavailable(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs a query (`cuStreamQuery`, `cuEventQuery`): `Ok(true)` when the
/// work is done, `Ok(false)` while it is not ready, else the error.
fn query(name: &'static str, f: impl FnOnce() -> CUresult) -> DriverResult<bool> {
    match call(name, f)? {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        r => Err(DriverError::new(name, r)),
    }
}

/// Loads the driver library and runs `cuInit(0)` once per process; later
/// calls return the cached outcome: [`Error::DriverNotFound`] without a
/// library, [`Error::NoDevice`] when the driver sees no device.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(init_once).clone()
}

fn init_once() -> Result<()> {
    // SAFETY: `is_culib_present` only tries `dlopen` on a fixed list of
    // names and drops what it opened.
    let present = catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
    if !present {
        let searched = catch_unwind(|| cudarc::get_lib_name_candidates("cuda"))
            .map(|mut v| {
                let mut seen = std::collections::HashSet::new();
                v.retain(|name| seen.insert(name.clone()));
                v.join(", ")
            })
            .unwrap_or_else(|_| "libcuda.so".to_owned());
        return Err(Error::DriverNotFound { searched });
    }
    // SAFETY: `cuInit` takes flags (must be 0) and nothing else.
    match call("cuInit", || unsafe { sys::cuInit(0) })? {
        CUresult::CUDA_SUCCESS => Ok(()),
        CUresult::CUDA_ERROR_NO_DEVICE => Err(Error::NoDevice {
            reason: "cuInit returned CUDA_ERROR_NO_DEVICE (driver present, no GPU visible)"
                .to_owned(),
        }),
        r => Err(Error::NoDevice {
            reason: format!("cuInit failed: {r:?} ({})", r as u32),
        }),
    }
}
