//! [`FunctionAttrs`]: what a backend reports about one compiled kernel.

/// Attributes of a compiled kernel (`cuFuncGetAttribute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionAttrs {
    /// The most threads per block this kernel can launch with (register use
    /// may make it lower than the device's limit).
    pub max_threads_per_block: u32,
    /// Static shared memory in bytes.
    pub static_shared_bytes: u32,
    /// Registers per thread.
    pub num_regs: u32,
}
