//! Tensor copies: kernel parameters naming a tensor map built on the
//! host, and the box loads and stores through them
//! (`cp.async.bulk.tensor`).
//!
//! The map lives in device memory and the parameter carries its address
//! (and the box's element count, for the bounds checks): the Rust PTX
//! backend cannot pass the map by value as CUDA C++'s
//! `const __grid_constant__ CUtensorMap` (rustc rejects a 64-byte-aligned
//! kernel parameter, and a 16-byte-aligned one would misalign the map),
//! and a map in global memory only needs the tensor-map proxy's acquire
//! fence, which the kernel's entry issues once per thread before the body
//! runs.

use super::mbarrier::Mbarrier;
use crate::arch::async_imp;
use crate::hooks::Active;
use crate::sanitizer::{Plain, Sanitizer};
use crate::shared_mem::{Elements, SharedBuffer};
use core::marker::PhantomData;
use core::mem::size_of;
use vigil_shared::tensor_map::MAX_RANK;
use vigil_shared::AccessKind;

/// Bytes the innermost coordinate of a box, times the element size, must
/// be a multiple of: the tensor-copy unit faults otherwise (an illegal
/// instruction on an H100 or H200, whatever the map's box or swizzle).
pub const INNER_COORDINATE_ALIGN: usize = 16;

/// The coordinates of a box of `T`s, padded to five. Panics (traps on
/// the GPU, as the hardware would) when the innermost one does not start
/// at a multiple of [`INNER_COORDINATE_ALIGN`] bytes.
#[inline(always)]
#[track_caller]
fn box_origin<T, const D: usize>(coords: [i32; D]) -> [i32; MAX_RANK] {
    const {
        assert!(
            D >= 1 && D <= MAX_RANK,
            "a tensor map has 1 to 5 dimensions"
        )
    };
    let inner = i64::from(coords[0]) * size_of::<T>() as i64;
    if inner % INNER_COORDINATE_ALIGN as i64 != 0 {
        inner_coordinate_misaligned(coords[0], size_of::<T>());
    }
    let mut c = [0; MAX_RANK];
    c[..D].copy_from_slice(&coords);
    c
}

#[cold]
#[inline(never)]
#[track_caller]
fn inner_coordinate_misaligned(coord: i32, size: usize) -> ! {
    panic!(
        "a tensor copy's innermost coordinate {coord} starts {} bytes in: it must be a multiple of {INNER_COORDINATE_ALIGN} bytes",
        i64::from(coord) * size as i64
    )
}

/// The handle's parts and the operations both kinds of map have.
macro_rules! map_common {
    ($name:ident) => {
        impl<T, const D: usize, S> Clone for $name<T, D, S> {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, const D: usize, S> Copy for $name<T, D, S> {}
        impl<T, const D: usize, S> core::fmt::Debug for $name<T, D, S> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("map", &self.map)
                    .field("box_len", &self.box_len)
                    .finish()
            }
        }

        impl<T: bytemuck::Pod, const D: usize, S: Sanitizer> $name<T, D, S> {
            /// A handle from the address of a tensor map in device memory
            /// and its box's element count.
            ///
            /// # Safety
            /// `map` must point to a tensor map of rank `D` over elements
            /// of `T` (64-byte aligned, in device memory, for the whole
            /// launch) whose box holds `box_len` elements, over memory the
            /// launch may access as the handle does (read; read and write
            /// for the `Mut` form); on a GPU the calling thread must have
            /// acquired it through the tensor-map proxy (what a kernel
            /// entry does for its parameters).
            #[inline(always)]
            pub const unsafe fn from_raw_parts(map: *const u8, box_len: usize) -> Self {
                $name {
                    map,
                    box_len,
                    _t: PhantomData,
                }
            }

            #[doc(hidden)]
            /// The handle of a kernel parameter: the tensor-map proxy's
            /// acquire of the map (`fence.proxy.tensormap::generic.acquire.sys`,
            /// as CUDA requires for a map copied to global memory), then
            /// [`from_raw_parts`](Self::from_raw_parts).
            ///
            /// # Safety
            /// As `from_raw_parts`, without the acquire.
            #[inline(always)]
            pub unsafe fn __from_param(map: *const u8, box_len: usize) -> Self {
                // SAFETY: the caller's contract: a tensor map's address.
                unsafe {
                    async_imp::fence_tensormap_acquire(map);
                    Self::from_raw_parts(map, box_len)
                }
            }

            /// The address of the map.
            #[inline(always)]
            pub fn as_ptr(&self) -> *const u8 {
                self.map
            }

            /// Elements in one box.
            #[inline(always)]
            pub fn box_len(&self) -> usize {
                self.box_len
            }

            /// Bytes in one box: what a load of it adds to its mbarrier's
            /// transaction count.
            #[inline(always)]
            pub fn box_bytes(&self) -> u32 {
                (self.box_len * size_of::<T>()) as u32
            }

            /// Starts loading the box whose first element is at `coords`
            /// (innermost dimension first; negative or past the end is
            /// allowed: elements outside the tensor read as zero; the
            /// innermost coordinate times the element size a multiple of
            /// [`INNER_COORDINATE_ALIGN`] bytes) into
            /// elements `i..i + box_len()` of `dst`, completing on `bar`
            /// with [`box_bytes`](Self::box_bytes) transaction bytes
            /// (`cp.async.bulk.tensor.Dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`).
            /// The destination must be 128-byte aligned, or aligned to
            /// the map's [`Swizzle`](crate::async_copy::Swizzle) pattern,
            /// which then lays the box out. Panics (traps on the GPU) when
            /// the box runs past the end of `dst` or the innermost
            /// coordinate is misaligned.
            #[inline(always)]
            #[track_caller]
            pub fn load_tile(
                &self,
                dst: &impl SharedBuffer<T, S>,
                i: usize,
                coords: [i32; D],
                bar: Mbarrier<S>,
            ) {
                let shared = Elements::of(dst).span(i, self.box_len, AccessKind::Write);
                // SAFETY: the box fits the buffer (checked above); the map
                // is the handle's (its invariant); `bar` is an mbarrier of
                // the block.
                unsafe {
                    async_imp::tensor_to_shared::<Active, D>(
                        shared,
                        self.map,
                        box_origin::<T, D>(coords),
                        bar.address(),
                    )
                }
            }
        }
    };
}

/// A kernel parameter naming a tensor map of rank `D` over elements of
/// `T` that the kernel loads boxes from ([`TensorMap::load_tile`]); the
/// host passes a `vigil::DeviceTensorMap` for it.
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::async_copy::{fence_proxy_async_shared, TensorMap};
///
/// /// Block (bx, by) adds up its 32 x 32 tile of `x` (through a tensor map
/// /// with 32 x 32 boxes) into `out[by * gridDim.x + bx]`.
/// #[kernel]
/// pub fn tile_sums(x: TensorMap<f32, 2>, out: GlobalSliceMut<f32>) {
///     let tile = shared_array!(f32; 1024; align 128);
///     let bars = mbarriers!(1);
///     let bar = bars.get(0);
///     let (bx, by) = (block_idx().x, block_idx().y);
///     if thread_idx().x == 0 {
///         bar.init(1);
///         fence_proxy_async_shared();
///         bar.arrive_expect_tx(x.box_bytes());
///         x.load_tile(&tile, 0, [32 * bx as i32, 32 * by as i32], bar);
///         bar.wait_parity(0);
///         let s = (0..1024).map(|i| tile.load(i)).sum();
///         out.store((by * grid_dim().x + bx) as usize, s);
///     }
/// }
/// ```
pub struct TensorMap<T, const D: usize, S = Plain> {
    map: *const u8,
    box_len: usize,
    _t: PhantomData<(T, S)>,
}
map_common!(TensorMap);

/// A kernel parameter naming a tensor map the kernel loads boxes from
/// and stores boxes to ([`TensorMapMut::store_tile`]); the host passes a
/// `vigil::DeviceTensorMapMut` for it.
pub struct TensorMapMut<T, const D: usize, S = Plain> {
    map: *const u8,
    box_len: usize,
    _t: PhantomData<(T, S)>,
}
map_common!(TensorMapMut);

impl<T: bytemuck::Pod, const D: usize, S: Sanitizer> TensorMapMut<T, D, S> {
    /// Starts storing elements `i..i + box_len()` of `src` as the box
    /// whose first element is at `coords` (elements that fall outside the
    /// tensor are not written), in the calling thread's open bulk group
    /// (`cp.async.bulk.tensor.Dd.global.shared::cta.tile.bulk_group`):
    /// commit and wait as for
    /// [`copy_bulk_to`](crate::shared_mem::SharedArray::copy_bulk_to).
    /// The block's writes to `src` need
    /// [`fence_proxy_async_shared`](crate::async_copy::fence_proxy_async_shared)
    /// and a barrier before it. Alignment, of the destination and of the
    /// innermost coordinate, as for [`load_tile`](Self::load_tile).
    #[inline(always)]
    #[track_caller]
    pub fn store_tile(&self, src: &impl SharedBuffer<T, S>, i: usize, coords: [i32; D]) {
        let shared = Elements::of(src).span(i, self.box_len, AccessKind::Read);
        // SAFETY: the box lies inside the buffer (checked above); the map
        // is the handle's, over writable memory (its invariant).
        unsafe {
            async_imp::tensor_to_global::<Active, D>(shared, self.map, box_origin::<T, D>(coords))
        }
    }

    /// A load-only view of the same map.
    #[inline(always)]
    pub fn as_const(&self) -> TensorMap<T, D, S> {
        TensorMap {
            map: self.map,
            box_len: self.box_len,
            _t: PhantomData,
        }
    }
}
