//! The suite's one error type: what failed, with enough context to print
//! it in a table cell and move on to the next measurement.

/// Why a measurement, a check or a run step failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A Vigil call failed (load, launch, copy, synchronisation, races).
    #[error("{0}")]
    Vigil(#[from] vigil::Error),
    /// A raw driver call (the nvcc twins' path) failed.
    #[error("{call} failed: {code:?}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// What it returned.
        code: vigil::unstable::sys::CUresult,
    },
    /// A result disagreed with the reference.
    #[error("{case}: {what}")]
    Mismatch {
        /// The suite case.
        case: String,
        /// What disagreed, and by how much.
        what: String,
    },
    /// A case's buffer is not of the type its launch expects (a bug in the
    /// case table, reported instead of panicking).
    #[error("buffer {index} of a case is {found}, the launch expects {expected}")]
    BufferType {
        /// Position in the case's inputs or outputs.
        index: usize,
        /// The element type the launch wanted.
        expected: &'static str,
        /// The element type the buffer holds.
        found: &'static str,
    },
    /// A file or a child process could not be used.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A command-line or tool-output problem.
    #[error("{0}")]
    Usage(String),
}

/// The suite's result type.
pub type Result<T> = std::result::Result<T, BenchError>;

/// Turns a raw driver status into a [`Result`].
pub fn driver(call: &'static str, code: vigil::unstable::sys::CUresult) -> Result<()> {
    match code {
        vigil::unstable::sys::CUresult::CUDA_SUCCESS => Ok(()),
        code => Err(BenchError::Driver { call, code }),
    }
}
