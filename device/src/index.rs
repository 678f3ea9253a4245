//! Thread, block and grid coordinates.

use crate::arch::imp;

/// A three-dimensional extent or coordinate, as CUDA's `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// The x component.
    pub x: u32,
    /// The y component.
    pub y: u32,
    /// The z component.
    pub z: u32,
}

impl Dim3 {
    /// A coordinate or extent from its three components.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// The number of elements in an extent (`x * y * z`), widened so it cannot overflow.
    pub const fn volume(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl From<u32> for Dim3 {
    /// A 1-D extent `(x, 1, 1)`.
    fn from(x: u32) -> Dim3 {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    /// A 2-D extent `(x, y, 1)`.
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3::new(x, y, z)
    }
}

impl From<[u32; 3]> for Dim3 {
    fn from([x, y, z]: [u32; 3]) -> Dim3 {
        Dim3::new(x, y, z)
    }
}

/// The SM this thread's block runs on (`%smid`; a virtual SM on the CPU
/// backend). Only stable for the block's lifetime; for diagnostics and
/// tests, not for indexing work.
#[inline(always)]
pub fn sm_id() -> u32 {
    imp::smid()
}

/// This thread's index within its block (`threadIdx`).
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    imp::thread_idx()
}

/// This block's index within the grid (`blockIdx`).
#[inline(always)]
pub fn block_idx() -> Dim3 {
    imp::block_idx()
}

/// The number of threads per block (`blockDim`).
#[inline(always)]
pub fn block_dim() -> Dim3 {
    imp::block_dim()
}

/// The number of blocks in the grid (`gridDim`).
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    imp::grid_dim()
}

/// `blockIdx.x * blockDim.x + threadIdx.x`, the usual flat index of a 1-D launch.
#[inline(always)]
pub fn global_index_x() -> usize {
    imp::block_idx_x() as usize * imp::block_dim_x() as usize + imp::thread_idx_x() as usize
}

/// `gridDim.x * blockDim.x`, the step of a grid-stride loop.
#[inline(always)]
pub fn grid_stride_x() -> usize {
    imp::grid_dim_x() as usize * imp::block_dim_x() as usize
}

/// What a `#[kernel(block = (x, y, z))]` entry tells the compiler before
/// its body runs: the block is `x` x `y` x `z` threads, so
/// `thread_idx().x < x` and so on (a shared array indexed by a thread's
/// coordinates then needs no check, and loops over `block_dim()` have a
/// known count). A typed launch refuses any other block
/// (`LaunchConfigError::BlockShape`); on the CPU backend a launch that
/// bypassed that check stops here with a panic.
#[doc(hidden)]
#[inline(always)]
pub fn __assume_block_shape(x: u32, y: u32, z: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the host launched this entry with exactly this block
    // (a typed launch checks it; an unchecked one promises it).
    unsafe {
        use core::hint::assert_unchecked;
        assert_unchecked(imp::block_dim_x() == x);
        assert_unchecked(imp::block_dim_y() == y);
        assert_unchecked(imp::block_dim_z() == z);
        assert_unchecked(imp::thread_idx_x() < x);
        assert_unchecked(imp::thread_idx_y() < y);
        assert_unchecked(imp::thread_idx_z() < z);
    }
    #[cfg(not(target_arch = "nvptx64"))]
    assert_eq!(
        block_dim(),
        Dim3::new(x, y, z),
        "vigil: a kernel declared for this block shape was launched with another"
    );
}
