//! [`DriverError`]: the one error of the driver's result layer, and its
//! one mapping into each error type the backend returns ([`Error`] for
//! the host API, [`VmmError`] with what the shadow allocator was doing).

use crate::error::{Error, VmmError};
use cudarc::driver::sys::CUresult;
use std::fmt;

/// `Result` with [`DriverError`].
pub(crate) type DriverResult<T> = std::result::Result<T, DriverError>;

/// A driver call that failed: which call, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DriverError {
    /// The driver function, e.g. `cuMemAlloc_v2`.
    pub(crate) call: &'static str,
    /// What the driver said.
    pub(crate) failure: Failure,
}

/// How a driver call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The call returned this `CUresult`.
    Returned(CUresult),
    /// The driver library could not provide the entry point (an older
    /// driver; cudarc's loader said this).
    Unavailable(String),
}

impl DriverError {
    pub(super) fn new(call: &'static str, result: CUresult) -> DriverError {
        DriverError {
            call,
            failure: Failure::Returned(result),
        }
    }

    pub(super) fn unavailable(call: &'static str, message: String) -> DriverError {
        DriverError {
            call,
            failure: Failure::Unavailable(message),
        }
    }

    /// The `CUresult` the call returned, if it ran.
    pub(crate) fn result(&self) -> Option<CUresult> {
        match self.failure {
            Failure::Returned(r) => Some(r),
            Failure::Unavailable(_) => None,
        }
    }

    /// The error of a kernel launch that the driver refused:
    /// [`Error::Launch`], naming the kernel.
    pub(crate) fn for_launch(self, kernel: &str) -> Error {
        match self.result() {
            Some(r) => Error::Launch {
                kernel: kernel.to_owned(),
                name: format!("{r:?}"),
                code: r as u32,
            },
            None => self.into(),
        }
    }

    /// The shadow allocator's error for this failure, saying what it was
    /// doing (`during`, only evaluated for a call that returned an error).
    pub(crate) fn during(self, during: impl FnOnce() -> String) -> VmmError {
        match self.result() {
            Some(r) => VmmError::Driver {
                call: self.call,
                result: format!("{r:?}"),
                code: r as u32,
                during: during(),
            },
            None => VmmError::Host(self.into()),
        }
    }
}

/// As the host API's error says it.
impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Error::from(self.clone()).fmt(f)
    }
}

impl std::error::Error for DriverError {}

/// The host API's error for a failed driver call: [`Error::KernelFault`]
/// for the sticky errors a faulting kernel leaves on its context,
/// [`Error::DriverSymbol`] for an entry point the library lacks, else
/// [`Error::Driver`].
impl From<DriverError> for Error {
    fn from(e: DriverError) -> Error {
        use CUresult::*;
        let call = e.call;
        let r = match e.failure {
            Failure::Returned(r) => r,
            Failure::Unavailable(message) => return Error::DriverSymbol { call, message },
        };
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trap is told apart from other failures, and says the context is
    /// gone.
    #[test]
    fn a_trapped_kernel_is_a_kernel_fault() {
        let trap = DriverError::new("cuCtxSynchronize", CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION);
        let e = Error::from(trap);
        assert!(matches!(e, Error::KernelFault { .. }), "{e:?}");
        assert!(e.to_string().contains("context is now unusable"), "{e}");
        assert_eq!(e.driver_code(), Some(715));
        let oom = Error::from(DriverError::new(
            "cuMemAlloc_v2",
            CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        ));
        assert!(matches!(oom, Error::Driver { .. }), "{oom:?}");
    }

    /// The allocator's error says what it was doing; a missing entry point
    /// passes through as the host API's error.
    #[test]
    fn the_allocator_error_carries_its_context() {
        let e = DriverError::new("cuMemMap", CUresult::CUDA_ERROR_OUT_OF_MEMORY)
            .during(|| "mapping 2 MiB".to_owned());
        assert!(e.is_out_of_memory(), "{e:?}");
        assert!(e.to_string().contains("while mapping 2 MiB"), "{e}");
        let missing = DriverError::unavailable("cuMemMap", "no symbol".to_owned())
            .during(|| unreachable!("only a returned error is described"));
        assert!(
            matches!(missing, VmmError::Host(Error::DriverSymbol { .. })),
            "{missing:?}"
        );
    }

    /// A refused launch names the kernel.
    #[test]
    fn a_refused_launch_names_the_kernel() {
        let e = DriverError::new("cuLaunchKernel", CUresult::CUDA_ERROR_INVALID_VALUE)
            .for_launch("axpy");
        assert!(
            matches!(&e, Error::Launch { kernel, .. } if kernel == "axpy"),
            "{e:?}"
        );
    }
}
