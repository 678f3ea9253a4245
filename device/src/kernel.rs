//! What `#[kernel]` generates and what the host needs to launch it.
//!
//! `#[kernel] fn name(params...) { body }` becomes
//! - `fn name<S: Sanitizer>(params...)`: the body, generic over the sanitizer,
//!   whose `shared_array!`s, `sync_threads()` calls and `warp::*`
//!   collectives get `S` too (so that the GPU's sanitized entry sees them;
//!   with `S = Plain` each is the same code as written);
//! - an `extern "ptx-kernel"` entry point exported as `name` in the PTX
//!   build (the plain variant: `name::<Plain>`);
//! - a launch marker `struct name {}` implementing [`Kernel`], which carries
//!   the parameter list for the host's type and ABI checks, the dynamic
//!   shared memory its shared stack needs and, in host builds, the
//!   per-thread entry the CPU backend runs.

use crate::global::{GlobalPtr, GlobalPtrMut, GlobalSlice, GlobalSliceMut};
use crate::matrix::GlobalMatrix;
use crate::partition::{
    BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut, GridStrideMut, ThreadCellsMut,
    ThreadElemsMut,
};
use crate::peers::{Peers, MAX_RANKS};
#[cfg(not(target_arch = "nvptx64"))]
use vigil_shared::params::ParamCursor;
use vigil_shared::params::{ParamDesc, PtxType};
use vigil_shared::proofs::ParamLayout;

/// A kernel compiled by `#[kernel]`, as the host sees it.
pub trait Kernel: 'static {
    /// The PTX entry point of the plain variant.
    const NAME: &'static str;
    /// The parameters as written in the source, with their PTX lowering.
    const PARAMS: &'static [ParamDesc];
    /// The parameter types (with the `Plain` sanitizer) as a tuple: the
    /// host checks launch arguments against it at compile time.
    type Params;
    /// The dynamic shared memory the kernel needs, in bytes: the capacity
    /// of the [`shared_stack!`](crate::shared_stack!) its body declares (0
    /// without one). A typed launch gives the kernel at least this much,
    /// or fails with an error naming it when the device cannot.
    const DYNAMIC_SHARED_BYTES: usize = 0;
    /// The layouts the kernel's view parameters declare (`#[same_len]`,
    /// `#[shape]`, partitions): a typed launch proves each before it runs
    /// ([`vigil_shared::proofs::check`]), and the body indexes those views
    /// without checks that the proof makes redundant.
    const LAYOUTS: &'static [ParamLayout] = &[];
    /// The block shape the kernel is written for
    /// (`#[kernel(block = (x, y))]`): a typed launch with another block is
    /// refused, and the body may rely on `block_dim()` being it.
    const BLOCK_SHAPE: Option<[u32; 3]> = None;

    /// Runs the body as the calling CPU thread, reading the arguments from a
    /// packed parameter buffer laid out by [`ParamCursor`]. The CPU backend
    /// calls it once per GPU thread after installing the thread's context.
    ///
    /// # Safety
    /// `params` must hold this kernel's parameters, packed in order, and
    /// every pointer in it must be valid for the accesses the body makes.
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn run_host<S: crate::Sanitizer>(params: &[u8]);
}

/// A type that can be a kernel parameter: how it lowers to PTX `.param`
/// scalars. The `#[kernel]` entry (and, in host builds, the CPU backend's
/// entry, which reads the same scalars back with [`HostPart`]) builds the
/// parameter from those scalars.
///
/// # Safety
/// `PARTS` must describe exactly the scalars the `#[kernel]` entry
/// declares for this type, in order.
pub unsafe trait KernelParam: Copy {
    /// The PTX scalars this parameter lowers to, in order.
    const PARTS: &'static [PtxType];
}

/// One scalar of a kernel entry's parameter list, read back from a packed
/// buffer by the CPU backend's entry (what `#[kernel]`'s `run_host` reads
/// its parameters with).
///
/// # Safety
/// `read` must consume exactly one scalar of the PTX type this Rust type
/// is declared as in a `#[kernel]` entry.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub unsafe trait HostPart: Sized {
    /// Reads the scalar at the cursor's next offset.
    ///
    /// # Safety
    /// The buffer must hold this scalar there (a pointer must be valid as
    /// the handle built from it requires).
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self;
}

#[cfg(not(target_arch = "nvptx64"))]
fn read_scalar<const N: usize>(buf: &[u8], cursor: &mut ParamCursor, ty: PtxType) -> [u8; N] {
    let at = cursor.next(ty);
    buf.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .unwrap_or_else(|| {
            panic!(
                "vigil: parameter buffer too short ({} bytes, need {})",
                buf.len(),
                at + N
            )
        })
}

macro_rules! scalar_param {
    ($($t:ty => $ptx:ident),* $(,)?) => {$(
        // SAFETY: one scalar of the matching PTX type.
        unsafe impl KernelParam for $t {
            const PARTS: &'static [PtxType] = &[PtxType::$ptx];
        }
        // SAFETY: one scalar of the matching PTX type, read at its offset.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl HostPart for $t {
            unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
                <$t>::from_ne_bytes(read_scalar(buf, cursor, PtxType::$ptx))
            }
        }
    )*};
}
scalar_param! {
    u8 => B8, i8 => B8, u16 => B16, i16 => B16, u32 => B32, i32 => B32,
    u64 => B64, i64 => B64, usize => B64, isize => B64, f32 => F32, f64 => F64,
}

macro_rules! pointer_part {
    ($($ptr:ty),*) => {$(
        // SAFETY: one pointer, read as one pointer.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl<T> HostPart for $ptr {
            unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
                u64::from_ne_bytes(read_scalar(buf, cursor, PtxType::Ptr)) as usize as $ptr
            }
        }
    )*};
}
pointer_part!(*const T, *mut T);

/// `KernelParam` for handles: each lowers to `$parts`.
macro_rules! handle_param {
    ($parts:expr => $($handle:ident),* $(,)?) => {$(
        // SAFETY: the `#[kernel]` entry declares a handle's pointer (and
        // the length of the ones that have one) in this order.
        unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for $handle<T, S> {
            const PARTS: &'static [PtxType] = $parts;
        }
    )*};
}
handle_param!(&[PtxType::Ptr] => GlobalPtr, GlobalPtrMut);
// Every view with a length lowers as a slice does, whatever its layout:
// the layout's sizes come from other parameters or constants.
handle_param!(&[PtxType::Ptr, PtxType::B64] =>
    GlobalSlice, GlobalSliceMut, GlobalMatrix, ThreadElemsMut, ThreadCellsMut, GridStrideMut,
    BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut,
);

/// Tensor-map parameters: the map's address, then its box's element count.
macro_rules! tensor_map_param {
    ($($map:ident),*) => {$(
        // SAFETY: the `#[kernel]` entry declares the map's pointer, then
        // the box's element count.
        unsafe impl<T: bytemuck::Pod, const D: usize, S: crate::Sanitizer> KernelParam
            for crate::async_copy::$map<T, D, S>
        {
            const PARTS: &'static [PtxType] = &[PtxType::Ptr, PtxType::B64];
        }
    )*};
}
tensor_map_param!(TensorMap, TensorMapMut);

/// The PTX scalars of a [`Peers`] argument: one pointer per possible rank,
/// the length, the rank and the world size.
const PEERS_PARTS: [PtxType; MAX_RANKS + 3] = {
    let mut parts = [PtxType::Ptr; MAX_RANKS + 3];
    parts[MAX_RANKS] = PtxType::B64;
    parts[MAX_RANKS + 1] = PtxType::B32;
    parts[MAX_RANKS + 2] = PtxType::B32;
    parts
};

// SAFETY: `MAX_RANKS` pointers, the length, the rank and the world size,
// in the order `#[kernel]`'s entry declares them.
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for Peers<T, S> {
    const PARTS: &'static [PtxType] = &PEERS_PARTS;
}

/// Marks the plain entry of a `#[kernel(no_runtime_checks)]`: a PTX comment
/// the build helper finds (`vigil_build`), which then fails the build if
/// the entry keeps a `trap` (a check the compiler could not remove).
#[doc(hidden)]
#[inline(always)]
pub fn __no_runtime_checks_marker() {
    crate::arch::imp::no_runtime_checks_marker();
}
