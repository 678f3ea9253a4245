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
use crate::peers::{Peers, MAX_RANKS};
#[cfg(not(target_arch = "nvptx64"))]
use vigil_shared::params::ParamCursor;
use vigil_shared::params::{ParamDesc, PtxType};

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
/// scalars and (in host builds) how it is read back from a packed buffer.
///
/// # Safety
/// `PARTS` must describe exactly the scalars `read` consumes and the PTX
/// entry point declares for this type.
pub unsafe trait KernelParam: Copy {
    /// The PTX scalars this parameter lowers to, in order.
    const PARTS: &'static [PtxType];

    /// Reads the parameter from a packed buffer at `cursor`.
    ///
    /// # Safety
    /// The buffer must hold this parameter's scalars at the cursor's next
    /// offsets, and pointers in it must be valid as the handle requires.
    #[cfg(not(target_arch = "nvptx64"))]
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
        // SAFETY: one scalar of the matching PTX type, read at its offset.
        unsafe impl KernelParam for $t {
            const PARTS: &'static [PtxType] = &[PtxType::$ptx];
            #[cfg(not(target_arch = "nvptx64"))]
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

#[cfg(not(target_arch = "nvptx64"))]
fn read_ptr(buf: &[u8], cursor: &mut ParamCursor) -> usize {
    u64::from_ne_bytes(read_scalar(buf, cursor, PtxType::Ptr)) as usize
}

#[cfg(not(target_arch = "nvptx64"))]
fn read_len(buf: &[u8], cursor: &mut ParamCursor) -> usize {
    u64::from_ne_bytes(read_scalar(buf, cursor, PtxType::B64)) as usize
}

// SAFETY: one pointer, read as one pointer.
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for GlobalPtr<T, S> {
    const PARTS: &'static [PtxType] = &[PtxType::Ptr];
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
        // SAFETY: the caller guarantees the pointer is valid.
        unsafe { GlobalPtr::from_raw(read_ptr(buf, cursor) as *const T) }
    }
}

// SAFETY: one pointer, read as one pointer.
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for GlobalPtrMut<T, S> {
    const PARTS: &'static [PtxType] = &[PtxType::Ptr];
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
        // SAFETY: the caller guarantees the pointer is valid.
        unsafe { GlobalPtrMut::from_raw(read_ptr(buf, cursor) as *mut T) }
    }
}

// SAFETY: pointer then length, read in that order.
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for GlobalSlice<T, S> {
    const PARTS: &'static [PtxType] = &[PtxType::Ptr, PtxType::B64];
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
        let p = read_ptr(buf, cursor);
        // SAFETY: the caller guarantees the pointer is valid for the length.
        unsafe { GlobalSlice::from_raw_parts(p as *const T, read_len(buf, cursor)) }
    }
}

// SAFETY: pointer then length, read in that order.
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for GlobalSliceMut<T, S> {
    const PARTS: &'static [PtxType] = &[PtxType::Ptr, PtxType::B64];
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
        let p = read_ptr(buf, cursor);
        // SAFETY: the caller guarantees the pointer is valid for the length.
        unsafe { GlobalSliceMut::from_raw_parts(p as *mut T, read_len(buf, cursor)) }
    }
}

/// Tensor-map parameters: the map's address, then its box's element count.
macro_rules! tensor_map_param {
    ($($map:ident),*) => {$(
        // SAFETY: pointer then length, read in that order.
        unsafe impl<T: bytemuck::Pod, const D: usize, S: crate::Sanitizer> KernelParam
            for crate::async_copy::$map<T, D, S>
        {
            const PARTS: &'static [PtxType] = &[PtxType::Ptr, PtxType::B64];
            #[cfg(not(target_arch = "nvptx64"))]
            unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
                let p = read_ptr(buf, cursor);
                // SAFETY: the caller guarantees the map and its box size.
                unsafe { Self::from_raw_parts(p as *const u8, read_len(buf, cursor)) }
            }
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
// read in that order (the order `#[kernel]`'s entry declares them).
unsafe impl<T: bytemuck::Pod, S: crate::Sanitizer> KernelParam for Peers<T, S> {
    const PARTS: &'static [PtxType] = &PEERS_PARTS;
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe fn read(buf: &[u8], cursor: &mut ParamCursor) -> Self {
        let ptrs = core::array::from_fn(|_| read_ptr(buf, cursor) as *mut T);
        let len = read_len(buf, cursor);
        let rank = u32::from_ne_bytes(read_scalar(buf, cursor, PtxType::B32));
        let world = u32::from_ne_bytes(read_scalar(buf, cursor, PtxType::B32));
        // SAFETY: the caller guarantees the pointers are valid; the host
        // packs `rank < world <= MAX_RANKS`.
        unsafe { Peers::from_raw_parts(ptrs, len, rank, world) }
    }
}
