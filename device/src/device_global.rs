//! Device globals: module-level variables in device memory, as CUDA's
//! `__device__` variables, declared with [`device_global!`](crate::device_global!).
//!
//! A kernel reaches one through [`DeviceGlobal::ptr`] (a scalar) or
//! [`DeviceGlobal::slice`] (an array): ordinary global handles, so every
//! load, store, volatile access and atomic on it is checked like any
//! buffer's. The host reads and writes it by name
//! (`Module::global::<T>("NAME")`).
//!
//! Each global is a symbol `vigil_global_NAME` of the kernel crate's PTX
//! (on the CPU backend, a registered host static): an 8-byte slot, the
//! value's size, then the value. Loading a module puts every global's value in an
//! allocation of the loading context (shadowed like any buffer when the
//! context is sanitized, one per module as CUDA gives each module load
//! its own) and writes its address into the slot, which the handles
//! follow; a slot left at 0 means the value in place.

use crate::global::{GlobalPtrMut, GlobalSliceMut};
use core::cell::UnsafeCell;
use vigil_shared::gpu::GLOBAL_VALUE_OFFSET;

/// A module-level variable of type `T` in device memory: declare one with
/// [`device_global!`](crate::device_global!).
#[repr(C)]
pub struct DeviceGlobal<T> {
    /// Where the loading context put the value: its address, or 0 for
    /// `value` itself.
    relocated: UnsafeCell<u64>,
    /// `size_of::<T>()`, for the host.
    bytes: u64,
    value: UnsafeCell<T>,
}

// The host finds the value after the slot, whatever `T`.
const _: () = assert!(core::mem::offset_of!(DeviceGlobal<u32>, value) == GLOBAL_VALUE_OFFSET);
const _: () = assert!(core::mem::offset_of!(DeviceGlobal<[u64; 4]>, value) == GLOBAL_VALUE_OFFSET);
const _: () = assert!(core::mem::offset_of!(DeviceGlobal<u8>, bytes) == 8);

// SAFETY: the cells are only read and written through global handles,
// whose accesses are the kernel's (and the sanitizer's) business, as for
// any buffer; the slot is written by the host before any launch.
unsafe impl<T: Send> Sync for DeviceGlobal<T> {}

impl<T> DeviceGlobal<T> {
    #[doc(hidden)]
    /// A global starting at `value` (what [`device_global!`](crate::device_global!) expands to).
    pub const fn __new(value: T) -> Self {
        assert!(
            core::mem::align_of::<T>() <= GLOBAL_VALUE_OFFSET,
            "a device global's type is aligned to at most 16 bytes"
        );
        DeviceGlobal {
            relocated: UnsafeCell::new(0),
            bytes: core::mem::size_of::<T>() as u64,
            value: UnsafeCell::new(value),
        }
    }

    /// The value's address for the running launch.
    #[inline(always)]
    fn address(&'static self) -> *mut T {
        // SAFETY: the slot is a valid, aligned `u64`; the host writes it
        // before the module's first launch and never again.
        let slot = unsafe { self.relocated.get().read_volatile() };
        if slot == 0 {
            crate::arch::imp::relocated(self.value.get())
        } else {
            slot as *mut T
        }
    }
}

impl<T: bytemuck::Pod> DeviceGlobal<T> {
    /// The global as a pointer for loads, stores, volatile accesses and
    /// atomics, checked like any buffer's.
    ///
    /// ```no_run
    /// use vigil_device::prelude::*;
    ///
    /// device_global! {
    ///     /// Raised by the block that finished first.
    ///     pub static DONE: u32 = 0;
    /// }
    ///
    /// #[kernel]
    /// pub fn finish() {
    ///     if thread_idx().x == 0 {
    ///         DONE.ptr().atomic_store(1, Ordering::Release, Scope::Device);
    ///     }
    /// }
    /// ```
    #[inline(always)]
    pub fn ptr(&'static self) -> GlobalPtrMut<T> {
        // SAFETY: the value (where the host put it, or in place) is valid
        // and aligned for one `T` for as long as the module is loaded.
        unsafe { GlobalPtrMut::from_raw(self.address()) }
    }
}

impl<T: bytemuck::Pod, const N: usize> DeviceGlobal<[T; N]> {
    /// The global array as a slice for loads, stores, volatile accesses
    /// and atomics, checked like any buffer's.
    #[inline(always)]
    pub fn slice(&'static self) -> GlobalSliceMut<T> {
        // SAFETY: as in `ptr`: `N` elements of `T`.
        unsafe { GlobalSliceMut::from_raw_parts(self.address() as *mut T, N) }
    }
}

/// Declares device globals: module-level variables in device memory
/// that kernels read and write through [`DeviceGlobal::ptr`] or
/// [`DeviceGlobal::slice`], and the host by name
/// (`Module::global::<T>("NAME")`). Types are `bytemuck::Pod`, aligned to
/// at most 16 bytes; names are unique in their kernel crate.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// device_global! {
///     /// A lock: 0 free, 1 held.
///     pub static LOCK: u32 = 0;
///     /// One counter per bin.
///     pub static BINS: [u32; 16] = [0; 16];
/// }
///
/// #[kernel]
/// pub fn count(x: GlobalSlice<u32>) {
///     let i = global_index_x();
///     if i < x.len() {
///         BINS.slice().at((x.load(i) % 16) as usize).atomic_add(1, Ordering::Relaxed, Scope::Device);
///     }
/// }
/// ```
#[macro_export]
macro_rules! device_global {
    ($($(#[$meta:meta])* $vis:vis static $name:ident: $t:ty = $init:expr;)*) => {$(
        $(#[$meta])*
        // The symbol the host looks up (`vigil_shared::gpu::GLOBAL_SYMBOL_PREFIX`).
        #[cfg_attr(target_arch = "nvptx64", export_name = concat!("vigil_global_", stringify!($name)))]
        $vis static $name: $crate::device_global::DeviceGlobal<$t> =
            $crate::device_global::DeviceGlobal::__new($init);
        $crate::__register_global!($name, $t);
    )*};
}

/// On the host, registers a device global for the CPU backend's module
/// loads (`inventory`); nothing in the PTX builds.
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_global {
    ($name:ident, $t:ty) => {
        $crate::__inventory::submit! {
            $crate::device_global::HostGlobal {
                name: stringify!($name),
                symbol: || &$name as *const $crate::device_global::DeviceGlobal<$t> as *const u8,
                bytes: core::mem::size_of::<$t>(),
            }
        }
    };
}

#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_global {
    ($name:ident, $t:ty) => {};
}

/// A device global as the CPU backend finds it: its name, its host
/// static (the value `GLOBAL_VALUE_OFFSET` bytes in) and the value's
/// size.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Debug)]
pub struct HostGlobal {
    /// The name it was declared with (`NAME`; its PTX symbol is
    /// `vigil_global_NAME`).
    pub name: &'static str,
    /// The host static.
    pub symbol: fn() -> *const u8,
    /// The value's size in bytes.
    pub bytes: usize,
}

#[cfg(not(target_arch = "nvptx64"))]
inventory::collect!(HostGlobal);

/// Every device global of the program's kernel crates (the CPU backend's).
#[cfg(not(target_arch = "nvptx64"))]
pub fn host_globals() -> impl Iterator<Item = &'static HostGlobal> {
    inventory::iter::<HostGlobal>.into_iter()
}
