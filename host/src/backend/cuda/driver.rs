//! The one door to the CUDA driver: loading the library, `cuInit`, and
//! turning `CUresult`s into [`Error`]s.
//!
//! cudarc loads `libcuda` lazily and panics when the library or a symbol is
//! missing. Vigil never lets that panic escape: [`init`] probes for the
//! library first (and caches the outcome), and every call goes through
//! [`call`], which catches a loader panic and returns it as an error.

use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

pub use sys::CUresult;

/// Runs one raw driver call, catching a panic of cudarc's dynamic loader
/// (missing library or symbol) and returning it as [`Error::DriverSymbol`].
pub(crate) fn call_raw(name: &'static str, f: impl FnOnce() -> CUresult) -> Result<CUresult> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".to_owned());
        Error::DriverSymbol {
            call: name,
            message,
        }
    })
}

/// The error for a failed driver call: [`Error::KernelFault`] for the
/// sticky errors a faulting kernel leaves on its context, else
/// [`Error::Driver`].
pub(crate) fn driver_error(call: &'static str, r: CUresult) -> Error {
    use CUresult::*;
    let (name, code) = (format!("{r:?}"), r as u32);
    match r {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ASSERT => Error::KernelFault { call, name, code },
        _ => Error::Driver { call, name, code },
    }
}

/// Runs one driver call and maps a non-success result to [`Error::Driver`].
pub(crate) fn check(name: &'static str, f: impl FnOnce() -> CUresult) -> Result<()> {
    match call_raw(name, f)? {
        CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(driver_error(name, r)),
    }
}

/// Runs a call an older driver may lack (through [`check`]): `Ok(false)`
/// when the library has no such symbol.
pub(crate) fn newer_call(name: &'static str, f: impl FnOnce() -> CUresult) -> Result<bool> {
    match check(name, f) {
        Ok(()) => Ok(true),
        Err(Error::DriverSymbol { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs a query call (`cuStreamQuery`, `cuEventQuery`): `Ok(true)` when
/// the work is done, `Ok(false)` while it is not ready, else the error.
pub(crate) fn query(name: &'static str, f: impl FnOnce() -> CUresult) -> Result<bool> {
    match call_raw(name, f)? {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        r => Err(driver_error(name, r)),
    }
}

/// `drv!(cuFoo(args...))`: calls `sys::cuFoo` through [`check`], with the
/// function's name in the error. The expansion contains the `unsafe` block;
/// the caller writes the `// SAFETY:` comment for the call above the macro.
macro_rules! drv {
    ($f:ident ( $($arg:expr),* $(,)? )) => {
        $crate::backend::cuda::driver::check(stringify!($f), || {
            // SAFETY: the caller of `drv!` states why the arguments are valid.
            unsafe { ::cudarc::driver::sys::$f($($arg),*) }
        })
    };
}
pub(crate) use drv;

/// Loads the driver library and runs `cuInit(0)` once per process; later
/// calls return the cached outcome.
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
    match call_raw("cuInit", || unsafe { sys::cuInit(0) })? {
        CUresult::CUDA_SUCCESS => {}
        CUresult::CUDA_ERROR_NO_DEVICE => {
            return Err(Error::NoDevice {
                reason: "cuInit returned CUDA_ERROR_NO_DEVICE (driver present, no GPU visible)"
                    .to_owned(),
            })
        }
        r => {
            return Err(Error::NoDevice {
                reason: format!("cuInit failed: {r:?} ({})", r as u32),
            })
        }
    }
    Ok(())
}

/// The number of CUDA devices, after loading and initialising the driver.
///
/// Returns [`Error::DriverNotFound`] when there is no driver library and
/// [`Error::NoDevice`] when the driver sees no device.
pub fn device_count() -> Result<usize> {
    init()?;
    let mut n = 0i32;
    // SAFETY: `n` is a valid out-pointer for the duration of the call.
    drv!(cuDeviceGetCount(&mut n))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// `Ok(())` when this process can run CUDA kernels (driver loaded, at least
/// one device), else the reason as an error ([`Error::is_no_gpu`] is true
/// for "no driver" and "no device"). GPU tests use it to skip.
pub fn gpu_available() -> Result<()> {
    match device_count()? {
        0 => Err(Error::NoDevice {
            reason: "the driver reports 0 devices".to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The driver's CUDA version as `(major, minor)`, e.g. `(13, 0)`.
pub fn driver_version() -> Result<(u32, u32)> {
    init()?;
    let mut v = 0i32;
    // SAFETY: `v` is a valid out-pointer for the duration of the call.
    drv!(cuDriverGetVersion(&mut v))?;
    let v = v.max(0) as u32;
    Ok((v / 1000, (v % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trap is told apart from other failures, and says the context is
    /// gone.
    #[test]
    fn a_trapped_kernel_is_a_kernel_fault() {
        let e = driver_error("cuCtxSynchronize", CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION);
        assert!(matches!(e, Error::KernelFault { .. }), "{e:?}");
        assert!(e.to_string().contains("context is now unusable"), "{e}");
        assert_eq!(e.driver_code(), Some(715));
        let oom = driver_error("cuMemAlloc_v2", CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        assert!(matches!(oom, Error::Driver { .. }), "{oom:?}");
    }
}
