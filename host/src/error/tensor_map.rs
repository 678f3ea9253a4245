//! What can be wrong with a tensor map, found before any driver call.

/// Why a tensor map cannot describe its buffer
/// ([`Error::TensorMap`](super::Error::TensorMap)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorMapProblem {
    /// A dimension of the tensor is 0 or past 2^32.
    #[error("dimension {dim} has {value} elements (1 to 2^32)")]
    Dim {
        /// Which dimension (0 innermost).
        dim: usize,
        /// Its extent.
        value: u64,
    },
    /// A dimension of the box is 0 or past 256.
    #[error("box dimension {dim} has {value} elements (1 to 256)")]
    BoxDim {
        /// Which dimension (0 innermost).
        dim: usize,
        /// Its extent.
        value: u32,
    },
    /// A box row is not a whole number of 16-byte units.
    #[error("a box row is {bytes} bytes, not a multiple of 16")]
    BoxRow {
        /// Bytes of one row of the box.
        bytes: u64,
    },
    /// A box row is longer than the swizzle's span.
    #[error("a box row is {bytes} bytes, more than the {span}-byte span of its swizzle")]
    SwizzleSpan {
        /// Bytes of one row of the box.
        bytes: u64,
        /// The swizzle's span.
        span: u64,
    },
    /// The innermost stride is not one element.
    #[error("dimension 0 must be contiguous: its stride is {stride} bytes, an element is {elem}")]
    InnerStride {
        /// The stride given.
        stride: u64,
        /// The element size.
        elem: u64,
    },
    /// An outer stride is not a multiple of 16 bytes or is past 2^40.
    #[error("dimension {dim}'s stride of {stride} bytes is not a multiple of 16 below 2^40")]
    Stride {
        /// Which dimension.
        dim: usize,
        /// Its stride in bytes.
        stride: u64,
    },
    /// The buffer's address is not 16-byte aligned.
    #[error("the buffer at {addr:#x} is not 16-byte aligned")]
    Misaligned {
        /// Its address.
        addr: u64,
    },
    /// The tensor reaches past the end of its buffer.
    #[error("the tensor spans {needed} bytes, its buffer holds {len}")]
    TooLarge {
        /// Bytes from the first element to one past the last.
        needed: u64,
        /// Bytes in the buffer.
        len: u64,
    },
}
