//! Block-shared memory: static arrays declared in the kernel body and the
//! launch's dynamic shared memory.
//!
//! Handles are plain raw-pointer views ([`SharedArray`], and
//! [`SharedSlice`] for the dynamic shared memory). Their loads,
//! stores and atomics tell the platform layer where they are
//! (`#[track_caller]`), which hands them to the sanitizer's
//! [`shared_access`](crate::Sanitizer::shared_access) hook when the
//! sanitized variant runs: on the CPU backend when a sanitizer runtime is
//! installed, on the GPU when the array carries a checking sanitizer type
//! `S` (a `#[kernel]` body's `shared_array!` and `dynamic_shared_array!`
//! carry the kernel's): a small array's sanitized storage has a shadow
//! beside it; larger arrays and the dynamic memory are checked through
//! the GPU sanitizer's window shadow in device memory.

use crate::arch::imp;
use crate::atomic::{Atomic, AtomicArith, AtomicBits, AtomicMinMax};
use crate::hooks::Active;
use crate::sanitizer::{Plain, Sanitizer, SharedAccess};
use crate::shared_stack::SharedTile;
use core::marker::PhantomData;
use core::panic::Location;
use vigil_shared::AccessKind;

/// A block-shared array of `N` elements of `T`, as returned by
/// [`shared_array!`](crate::shared_array!), checked by sanitizer `S`
/// (in a `#[kernel]` body, the kernel's; [`Plain`] elsewhere). A helper
/// function that takes one from a kernel names `S` too:
/// `fn f<S: Sanitizer>(a: SharedArray<f32, 32, S>)`.
///
/// Every thread of the block sees the same storage. It starts with
/// unspecified contents on the GPU (zeroed on the CPU backend). Its
/// atomics (`atomic_add` to `atomic_compare_exchange`) are relaxed at
/// block scope, like CUDA's `atomicMax_block` on shared memory: they never
/// race with each other, and `sync_threads` orders them with plain
/// accesses.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// `out[b]` = the largest element of block `b`'s part of `x`.
/// #[kernel]
/// pub fn block_max(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
///     let best = shared_array!(u32; 1);
///     if thread_idx().x == 0 {
///         best.store(0, 0);
///     }
///     sync_threads(); // the store before every thread's atomic
///     let i = global_index_x();
///     if i < x.len() {
///         best.atomic_max(0, x.load(i));
///     }
///     sync_threads(); // every atomic before the load
///     if thread_idx().x == 0 {
///         out.store(block_idx().x as usize, best.load(0));
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SharedArray<T, const N: usize, S = Plain> {
    ptr: *mut T,
    /// The array's shadow (sanitized GPU entries only; null elsewhere).
    shadow: *mut u8,
    /// The `shared_array!` expansion that declared it (reports name it).
    site: Option<&'static Location<'static>>,
    _t: PhantomData<(T, S)>,
}

/// The atomic read-modify-write methods of [`checked_accessors`]: each
/// `doc, name, bound, |p, v| op` becomes `pub fn name(&self, i, v) -> T`
/// (relaxed at block scope, returning the previous value), running `op` on
/// element `i`'s address.
macro_rules! shared_rmw_methods {
    ($($(#[$doc:meta])* $name:ident, $bound:ident, |$p:ident, $v:ident| $op:expr;)*) => {$(
        $(#[$doc])*
        /// relaxed at block scope (order other threads' accesses with
        /// `sync_threads`), and returns the previous value. Atomics on
        /// the same element never race with each other. Panics (traps on
        /// the GPU) when `i` is past the end.
        #[inline(always)]
        #[track_caller]
        pub fn $name(&self, i: usize, v: T) -> T
        where
            T: $bound,
        {
            // SAFETY: `rmw` passes element `i`'s in-bounds, aligned
            // address of block-shared storage, which the op requires.
            self.elements().rmw(i, |$p| unsafe {
                let $v = v;
                $op
            })
        }
    )*};
}
pub(crate) use shared_rmw_methods;

/// The element accessors of a shared-memory handle with an `elements()`
/// method and a `ptr` field ([`SharedArray`], [`SharedSlice`] and the
/// shared stack's tiles): one implementation, [`Elements`]'s, behind all.
macro_rules! checked_accessors {
    () => {
        /// Reads element `i`. Panics (traps on the GPU) when `i` is past
        /// the end.
        #[inline(always)]
        #[track_caller]
        pub fn load(&self, i: usize) -> T {
            self.elements().load(i)
        }

        /// Writes element `i`. Panics (traps on the GPU) when `i` is past
        /// the end.
        #[inline(always)]
        #[track_caller]
        pub fn store(&self, i: usize, v: T) {
            self.elements().store(i, v)
        }

        $crate::shared_mem::shared_rmw_methods! {
            /// Adds `v` to element `i` atomically (`atomicAdd_block` on
            /// shared memory),
            atomic_add, AtomicArith, |p, v| T::arch_shared_add(p, v);
            /// Subtracts `v` from element `i` atomically (an add of `-v`),
            atomic_sub, AtomicArith, |p, v| T::arch_shared_add(p, v.negate());
            /// Stores the minimum of element `i` and `v` atomically,
            atomic_min, AtomicMinMax, |p, v| T::arch_shared_min(p, v);
            /// Stores the maximum of element `i` and `v` atomically,
            atomic_max, AtomicMinMax, |p, v| T::arch_shared_max(p, v);
            /// Atomic bitwise and of element `i` with `v`,
            atomic_and, AtomicBits, |p, v| T::arch_shared_and(p, v);
            /// Atomic bitwise or of element `i` with `v`,
            atomic_or, AtomicBits, |p, v| T::arch_shared_or(p, v);
            /// Atomic bitwise xor of element `i` with `v`,
            atomic_xor, AtomicBits, |p, v| T::arch_shared_xor(p, v);
            /// Replaces element `i` with `v` atomically,
            atomic_exchange, Atomic, |p, v| T::arch_shared_exchange(p, v);
        }

        /// Reads element `i` with a volatile load (`ld.volatile.shared`,
        /// CUDA's read through a `volatile __shared__` pointer). The PTX
        /// memory model treats it as a relaxed atomic load (at system
        /// scope, which for shared memory is the block), and so does the
        /// sanitizer: volatile accesses and atomics of the array never race
        /// with each other, a plain access races with them unless a
        /// barrier orders the two, and they order nothing by themselves.
        /// On the CPU backend a thread that keeps polling it lets the
        /// block's other threads run. Panics (traps on the GPU) when `i`
        /// is past the end.
        #[inline(always)]
        #[track_caller]
        pub fn load_volatile(&self, i: usize) -> T
        where
            T: Atomic,
        {
            self.elements().load_volatile(i)
        }

        /// Writes element `i` with a volatile store (`st.volatile.shared`):
        /// a relaxed atomic store for the memory model and the sanitizer
        /// (see `load_volatile`). Panics (traps on the GPU) when `i` is
        /// past the end.
        #[inline(always)]
        #[track_caller]
        pub fn store_volatile(&self, i: usize, v: T)
        where
            T: Atomic,
        {
            self.elements().store_volatile(i, v)
        }

        /// Replaces element `i` with `new` if it equals `current`
        /// (bitwise), atomically at block scope (relaxed: order other
        /// threads' accesses with `sync_threads`). Returns `Ok(previous)`
        /// when it swapped, `Err(found)` when not; a failed exchange is an
        /// atomic read for the sanitizer. Panics (traps on the GPU) when
        /// `i` is past the end.
        #[inline(always)]
        #[track_caller]
        pub fn atomic_compare_exchange(&self, i: usize, current: T, new: T) -> Result<T, T>
        where
            T: Atomic,
        {
            self.elements().compare_exchange(i, current, new)
        }

        /// The raw pointer to element 0.
        pub const fn as_ptr(&self) -> *mut T {
            self.ptr
        }
    };
}
pub(crate) use checked_accessors;

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedArray<T, N, S> {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` must point to block-shared storage of `N` aligned elements.
    pub const unsafe fn from_raw(ptr: *mut u8) -> Self {
        SharedArray {
            ptr: ptr as *mut T,
            shadow: core::ptr::null_mut(),
            site: None,
            _t: PhantomData,
        }
    }

    #[doc(hidden)]
    /// This expansion's storage (key `K`, `BYTES` bytes aligned to
    /// `ALIGN`), with a `SHADOW`-byte shadow beside it when `S` checks
    /// (without one, a checking `S` is told of the declaration: the GPU
    /// checks such arrays through its window shadow).
    ///
    /// # Safety
    /// `BYTES` must be `__bytes::<T, N>()`, `ALIGN` a power of two at
    /// least `__align::<T>()`, `SHADOW` `__shadow_bytes::<T, N>()`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn __declare<
        K: 'static,
        const BYTES: usize,
        const ALIGN: usize,
        const SHADOW: usize,
    >() -> Self {
        // SAFETY: forwarded; `__storage` is this expansion's storage.
        unsafe { Self::__declare_in::<K, BYTES, ALIGN, SHADOW>(__storage::<K, BYTES, ALIGN>) }
    }

    #[doc(hidden)]
    /// [`__declare`](Self::__declare) with the plain storage from
    /// `plain` (a `#[kernel]` body's array: its module-scope `.shared`
    /// symbol, whose address needs no call).
    ///
    /// # Safety
    /// As `__declare`; `plain` returns `BYTES` bytes of block-shared
    /// storage aligned to `ALIGN`, this expansion's own.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn __declare_in<
        K: 'static,
        const BYTES: usize,
        const ALIGN: usize,
        const SHADOW: usize,
    >(
        plain: impl FnOnce() -> *mut u8,
    ) -> Self {
        let (ptr, shadow) = if Active::ENABLED && SHADOW > 0 {
            __storage_checked::<K, BYTES, ALIGN, SHADOW>()
        } else if Active::ENABLED {
            (__storage_window::<K, BYTES, ALIGN>(), core::ptr::null_mut())
        } else {
            (plain(), core::ptr::null_mut())
        };
        let array = SharedArray {
            ptr: imp::assume_shared(ptr as *mut T),
            shadow,
            site: Some(Location::caller()),
            _t: PhantomData,
        };
        if Active::ENABLED && shadow.is_null() && BYTES > 0 {
            imp::shared_declared::<Active>(|| array.elements().declaration());
        }
        array
    }

    /// The elements as the checked accessors see them.
    #[inline(always)]
    pub(crate) fn elements(&self) -> Elements<T, S> {
        Elements {
            ptr: self.ptr,
            len: N,
            shadow: self.shadow,
            site: self.site,
            _s: PhantomData,
        }
    }

    /// The number of elements.
    pub const fn len(&self) -> usize {
        N
    }

    /// True when `N == 0`.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    checked_accessors!();
}

/// The launch's dynamic shared memory as a block-shared slice of `T`
/// (`extern __shared__ T smem[];`), as returned by
/// [`dynamic_shared_array!`](crate::dynamic_shared_array!), checked by
/// sanitizer `S` like a [`SharedArray`]: its length is the whole elements
/// the launch's dynamic shared memory holds.
///
/// Every thread of the block sees the same storage. It starts with
/// unspecified contents on the GPU (zeroed on the CPU backend).
#[derive(Clone, Copy, Debug)]
pub struct SharedSlice<T, S = Plain> {
    ptr: *mut T,
    len: usize,
    /// The `dynamic_shared_array!` expansion that made it.
    site: Option<&'static Location<'static>>,
    _t: PhantomData<(T, S)>,
}

impl<T: bytemuck::Pod, S: Sanitizer> SharedSlice<T, S> {
    #[doc(hidden)]
    /// The launch's dynamic shared memory (what
    /// [`dynamic_shared_array!`](crate::dynamic_shared_array!) expands to);
    /// a checking `S` is told of it (the GPU checks it through its window
    /// shadow).
    #[inline(always)]
    #[track_caller]
    pub fn __dynamic() -> Self {
        let (ptr, bytes) = imp::dynamic_shared();
        let slice = SharedSlice {
            ptr: imp::assume_shared(ptr as *mut T),
            len: bytes / core::mem::size_of::<T>().max(1),
            site: Some(Location::caller()),
            _t: PhantomData,
        };
        if Active::ENABLED && slice.len > 0 {
            imp::shared_declared::<Active>(|| slice.elements().declaration());
        }
        slice
    }

    /// The elements as the checked accessors see them (no `.shared`
    /// shadow: dynamic shared memory's size is the launch's).
    #[inline(always)]
    pub(crate) fn elements(&self) -> Elements<T, S> {
        Elements {
            ptr: self.ptr,
            len: self.len,
            shadow: core::ptr::null_mut(),
            site: self.site,
            _s: PhantomData,
        }
    }

    /// The number of elements.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True when the launch has no dynamic shared memory for one `T`.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    checked_accessors!();
}

/// Block-shared storage that asynchronous copies and tensor copies move
/// data into or out of: a [`SharedArray`], a [`SharedSlice`] or a shared
/// stack's [`SharedTile`] (sealed).
pub trait SharedBuffer<T: bytemuck::Pod, S: Sanitizer>: sealed::SharedParts<T> {}

pub(crate) mod sealed {
    use core::panic::Location;

    /// A shared buffer's raw parts: element 0, the length in elements, the
    /// `.shared` shadow (null: none) and the view's allocation site.
    pub trait SharedParts<T> {
        #[allow(clippy::type_complexity)]
        fn shared_parts(&self) -> (*mut T, usize, *mut u8, Option<&'static Location<'static>>);
    }
}

/// A shared buffer's [`sealed::SharedParts`], from its elements.
macro_rules! shared_parts_from_elements {
    () => {
        #[inline(always)]
        fn shared_parts(&self) -> (*mut T, usize, *mut u8, Option<&'static Location<'static>>) {
            let e = self.elements();
            (e.ptr, e.len, e.shadow, e.site)
        }
    };
}

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> sealed::SharedParts<T>
    for SharedArray<T, N, S>
{
    shared_parts_from_elements!();
}
impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedBuffer<T, S> for SharedArray<T, N, S> {}

impl<T: bytemuck::Pod, S: Sanitizer> sealed::SharedParts<T> for SharedSlice<T, S> {
    shared_parts_from_elements!();
}
impl<T: bytemuck::Pod, S: Sanitizer> SharedBuffer<T, S> for SharedSlice<T, S> {}

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> sealed::SharedParts<T>
    for SharedTile<T, N, S>
{
    shared_parts_from_elements!();
}
impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedBuffer<T, S> for SharedTile<T, N, S> {}

impl<T: bytemuck::Pod, S: Sanitizer> Elements<T, S> {
    /// The elements of `buffer`.
    #[inline(always)]
    pub(crate) fn of(buffer: &impl SharedBuffer<T, S>) -> Self {
        let (ptr, len, shadow, site) = buffer.shared_parts();
        Elements {
            ptr,
            len,
            shadow,
            site,
            _s: PhantomData,
        }
    }
}

/// `len` elements of block-shared storage, their `.shared` shadow (null:
/// none) and the view's allocation site, checked by `S`: the one
/// implementation of the accessors of [`SharedArray`], [`SharedSlice`]
/// and the shared stack's tiles.
pub(crate) struct Elements<T, S> {
    pub(crate) ptr: *mut T,
    pub(crate) len: usize,
    pub(crate) shadow: *mut u8,
    pub(crate) site: Option<&'static Location<'static>>,
    pub(crate) _s: PhantomData<S>,
}

impl<T: bytemuck::Pod, S: Sanitizer> Elements<T, S> {
    /// Elements `i..i + count` as one access of `kind`, as the sanitizer
    /// sees it (an asynchronous copy's shared side). Panics (traps on the
    /// GPU) when the range runs past the end.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn span(&self, i: usize, count: usize, kind: AccessKind) -> SharedAccess {
        assert!(
            count <= self.len && i <= self.len - count,
            "shared array range out of bounds"
        );
        SharedAccess {
            size: core::mem::size_of::<T>() * count,
            ..self.access(i, kind)
        }
    }

    /// Element `i`'s access of `kind` as the sanitizer sees it.
    #[inline(always)]
    fn access(&self, i: usize, kind: AccessKind) -> SharedAccess {
        SharedAccess {
            addr: self.ptr.wrapping_add(i) as usize,
            size: core::mem::size_of::<T>(),
            kind,
            array: self.ptr as usize,
            array_bytes: core::mem::size_of::<T>() * self.len,
            shadow: self.shadow as usize,
            site: self.site,
        }
    }

    /// The declaration of the storage: an access of no bytes.
    #[inline(always)]
    pub(crate) fn declaration(&self) -> SharedAccess {
        SharedAccess {
            size: 0,
            ..self.access(0, AccessKind::Write)
        }
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn load(&self, i: usize) -> T {
        check_shared_index(i, self.len);
        imp::shared_access::<Active>(|| self.access(i, AccessKind::Read));
        // Not volatile: barriers and warp collectives are compiler fences
        // (neither is `nomem`), so plain accesses keep CUDA's ordering
        // while the compiler may batch and schedule them (sgemm's tile
        // loop ran 1.5x slower with volatile ones).
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).read() }
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn store(&self, i: usize, v: T) {
        check_shared_index(i, self.len);
        imp::shared_access::<Active>(|| self.access(i, AccessKind::Write));
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).write(v) }
    }

    /// A read of element `i` that a spin-wait may repeat: the platform may
    /// let the block's other threads run first (see `arch::host::poll`).
    #[inline(always)]
    #[track_caller]
    fn poll(&self, i: usize) {
        let p = self.ptr.wrapping_add(i) as usize;
        imp::poll(
            p,
            core::mem::size_of::<T>(),
            core::panic::Location::caller(),
        );
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn load_volatile(&self, i: usize) -> T
    where
        T: Atomic,
    {
        check_shared_index(i, self.len);
        self.poll(i);
        imp::shared_access::<Active>(|| self.access(i, AccessKind::AtomicRead));
        // SAFETY: in bounds of the block's storage (checked above) and
        // aligned (the storage is aligned for `T`).
        unsafe { T::arch_shared_load_volatile(self.ptr.add(i)) }
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn store_volatile(&self, i: usize, v: T)
    where
        T: Atomic,
    {
        check_shared_index(i, self.len);
        imp::shared_access::<Active>(|| self.access(i, AccessKind::AtomicWrite));
        // SAFETY: as in `load_volatile`.
        unsafe { T::arch_shared_store_volatile(self.ptr.add(i), v) }
    }

    /// Runs the atomic `op` on element `i`'s address (in bounds, aligned
    /// for `T`) and returns what it returns; an atomic write of the
    /// element for the sanitizer.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn rmw(&self, i: usize, op: impl FnOnce(*mut T) -> T) -> T {
        check_shared_index(i, self.len);
        self.poll(i);
        imp::shared_access::<Active>(|| self.access(i, AccessKind::AtomicRmw));
        // In bounds of the block's storage (checked above) and aligned
        // (the storage is aligned for `T`).
        op(self.ptr.wrapping_add(i))
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn compare_exchange(&self, i: usize, current: T, new: T) -> Result<T, T>
    where
        T: Atomic,
    {
        check_shared_index(i, self.len);
        self.poll(i);
        // SAFETY: in bounds of the block's storage (checked above) and
        // aligned (the storage is aligned for `T`).
        let found = unsafe { T::arch_shared_cas(self.ptr.add(i), current, new) };
        // Checked after the exchange, whose outcome decides the kind.
        let swapped = found.bit_eq(current);
        let kind = if swapped {
            AccessKind::AtomicRmw
        } else {
            AccessKind::AtomicRead
        };
        imp::shared_access::<Active>(|| self.access(i, kind));
        if swapped {
            Ok(found)
        } else {
            Err(found)
        }
    }
}

/// Declares a block-shared array and evaluates to its [`SharedArray`] handle:
/// `let tile = shared_array!(f32; 256);`
///
/// `shared_array!(f32; 1024; align 1024)` aligns the array to 1,024 bytes
/// (a power of two, at least the default of 16): a tensor copy's
/// destination needs 128, a swizzled one the swizzle's whole pattern
/// (see [`Swizzle`](crate::async_copy::Swizzle)).
///
/// Each expansion of the macro is one array per block, however often the
/// line runs. Inside a `#[kernel]` body the attribute makes it
/// `shared_array!(@sanitizer S; f32; 256)`, the array of the kernel's
/// sanitizer `S` (on the GPU, the sanitized entry's array has a shadow).
#[macro_export]
macro_rules! shared_array {
    (@sanitizer $s:ty; @symbol $sym:literal; $t:ty; $n:expr; align $a:expr) => {{
        // A `#[kernel]` body's array: the plain entry's storage is the
        // module-scope `.shared` array `$sym` the attribute declared for
        // this expansion (`__shared_symbol!`), whose address is a
        // constant: an out-of-line storage function costs a call per
        // thread.
        struct __VigilSharedKey;
        // SAFETY: the sizes are the ones `__declare_in` asks for, and the
        // symbol is this expansion's own storage of that size.
        unsafe {
            $crate::shared_mem::SharedArray::<$t, { $n }, $s>::__declare_in::<
                __VigilSharedKey,
                { $crate::shared_mem::__bytes::<$t, { $n }>() },
                { $crate::shared_mem::__align_at_least::<$t>($a) },
                { $crate::shared_mem::__shadow_bytes::<$t, { $n }>() },
            >(|| $crate::__shared_symbol_address!(
                $sym,
                __VigilSharedKey,
                { $crate::shared_mem::__bytes::<$t, { $n }>() },
                { $crate::shared_mem::__align_at_least::<$t>($a) }
            ))
        }
    }};
    (@sanitizer $s:ty; @symbol $sym:literal; $t:ty; $n:expr) => {
        $crate::shared_array!(@sanitizer $s; @symbol $sym; $t; $n; align 0)
    };
    (@sanitizer $s:ty; $t:ty; $n:expr; align $a:expr) => {{
        // A type of its own per expansion: the storage function is
        // monomorphised once per key, so each expansion is one array, and
        // the non-inlined function keeps LLVM from splitting it in two.
        struct __VigilSharedKey;
        // SAFETY: the sizes are the ones `__declare` asks for.
        unsafe {
            $crate::shared_mem::SharedArray::<$t, { $n }, $s>::__declare::<
                __VigilSharedKey,
                { $crate::shared_mem::__bytes::<$t, { $n }>() },
                { $crate::shared_mem::__align_at_least::<$t>($a) },
                { $crate::shared_mem::__shadow_bytes::<$t, { $n }>() },
            >()
        }
    }};
    (@sanitizer $s:ty; $t:ty; $n:expr) => {
        $crate::shared_array!(@sanitizer $s; $t; $n; align 0)
    };
    ($t:ty; $n:expr; align $a:expr) => {
        $crate::shared_array!(@sanitizer $crate::Plain; $t; $n; align $a)
    };
    ($t:ty; $n:expr) => {
        $crate::shared_array!(@sanitizer $crate::Plain; $t; $n; align 0)
    };
}

/// Views the launch's dynamic shared memory as a [`SharedSlice`] of `T`:
/// `let buf = dynamic_shared_array!(f32);` (its length is the whole `T`s
/// the launch's dynamic shared memory holds).
///
/// Inside a `#[kernel]` body the attribute makes it
/// `dynamic_shared_array!(@sanitizer S; f32)`, the slice of the kernel's
/// sanitizer `S`, checked like a [`SharedArray`] (on the GPU through the
/// sanitizer's window shadow, which the host sizes from the launch).
/// [`dynamic_shared`] is the unchecked raw view.
#[macro_export]
macro_rules! dynamic_shared_array {
    (@sanitizer $s:ty; $t:ty) => {
        $crate::shared_mem::SharedSlice::<$t, $s>::__dynamic()
    };
    ($t:ty) => {
        $crate::dynamic_shared_array!(@sanitizer $crate::Plain; $t)
    };
}

/// Declares the module-scope `.shared` array `$sym` of `$bytes` bytes
/// aligned to `$align` (in a kernel crate, which need not enable inline
/// assembly itself). Host builds declare nothing.
#[doc(hidden)]
#[macro_export]
#[cfg_attr(
    target_arch = "nvptx64",
    allow_internal_unstable(asm_experimental_arch)
)]
macro_rules! __shared_symbol {
    ($sym:literal, $align:expr, $bytes:expr) => {
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(
            concat!(".shared .align {a} .b8 ", $sym, "[{n}];"),
            a = const $align,
            n = const $bytes,
        );
    };
}

/// The generic address of the module-scope `.shared` array `$sym`
/// ([`__shared_symbol!`](crate::__shared_symbol!)); on the host, the
/// storage of key `$key` (the CPU backend's block-shared memory).
#[doc(hidden)]
#[macro_export]
#[cfg_attr(
    target_arch = "nvptx64",
    allow_internal_unstable(asm_experimental_arch)
)]
macro_rules! __shared_symbol_address {
    ($sym:literal, $key:ty, $bytes:expr, $align:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        let p = {
            let p: u64;
            // SAFETY: takes the address of a module-scope shared array: no
            // memory access, no precondition.
            unsafe {
                ::core::arch::asm!(
                    concat!("cvta.shared.u64 {p}, ", $sym, ";"),
                    p = out(reg64) p,
                    options(pure, nomem, nostack),
                )
            };
            p as *mut u8
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let p = $crate::shared_mem::__storage::<$key, { $bytes }, { $align }>();
        p
    }};
}

/// A function that declares one `.shared` array named `$symbol` per
/// monomorphisation (block-scoped: per key `K`, one array per block) and
/// returns its generic address.
macro_rules! shared_storage {
    ($(#[$doc:meta])* $name:ident => $symbol:literal) => {
        $(#[$doc])*
        #[doc(hidden)]
        #[inline(never)]
        #[cfg(target_arch = "nvptx64")]
        pub fn $name<K: 'static, const BYTES: usize, const ALIGN: usize>() -> *mut u8 {
            let p: u64;
            // SAFETY: declares block-scoped shared storage and takes its
            // generic address.
            unsafe {
                core::arch::asm!(
                    concat!(
                        "{{ .shared .align {a} .b8 ", $symbol, "[{n}]; cvta.shared.u64 {p}, ",
                        $symbol, "; }}"
                    ),
                    a = const ALIGN,
                    n = const BYTES,
                    p = out(reg64) p,
                    options(nomem, nostack),
                )
            };
            p as *mut u8
        }
    };
}

shared_storage!(
    /// An array's storage (a plain entry's, or a sanitized one's checked
    /// by a `.shared` shadow: see `__storage_checked`).
    __storage => "vigil_smem"
);

#[doc(hidden)]
#[inline(never)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __storage<K: 'static, const BYTES: usize, const ALIGN: usize>() -> *mut u8 {
    crate::arch::host::static_shared(core::any::TypeId::of::<K>(), BYTES, ALIGN)
}

shared_storage!(
    /// The storage of a sanitized entry's array without a `.shared`
    /// shadow: on the GPU a declaration named `vigil_smem_window`
    /// (`vigil_shared::block::WINDOW_ARRAY_SYMBOL`), by which the host
    /// knows that the module needs the window shadow.
    __storage_window => "vigil_smem_window"
);

/// On the host the CPU backend's runtime checks every array: the storage
/// is the plain one.
#[doc(hidden)]
#[inline(always)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __storage_window<K: 'static, const BYTES: usize, const ALIGN: usize>() -> *mut u8 {
    __storage::<K, BYTES, ALIGN>()
}

/// The storage of a sanitized entry's array and its shadow: on the GPU a
/// second `.shared` declaration of `SHADOW` bytes beside the array (only
/// sanitized entries declare it, so only they pay for it).
#[doc(hidden)]
#[inline(never)]
#[cfg(target_arch = "nvptx64")]
pub fn __storage_checked<
    K: 'static,
    const BYTES: usize,
    const ALIGN: usize,
    const SHADOW: usize,
>() -> (*mut u8, *mut u8) {
    let (p, q): (u64, u64);
    // SAFETY: declares block-scoped shared storage and its shadow and
    // takes their generic addresses.
    unsafe {
        core::arch::asm!(
            "{{ .shared .align {a} .b8 vigil_smem[{n}]; .shared .align 8 .b8 vigil_smem_shadow[{m}]; cvta.shared.u64 {p}, vigil_smem; cvta.shared.u64 {q}, vigil_smem_shadow; }}",
            a = const ALIGN,
            n = const BYTES,
            m = const SHADOW,
            p = out(reg64) p,
            q = out(reg64) q,
            options(nomem, nostack),
        )
    };
    (p as *mut u8, q as *mut u8)
}

/// On the host the CPU backend's runtime keeps its own shadow: the
/// storage is the plain one.
#[doc(hidden)]
#[inline(always)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __storage_checked<
    K: 'static,
    const BYTES: usize,
    const ALIGN: usize,
    const SHADOW: usize,
>() -> (*mut u8, *mut u8) {
    (__storage::<K, BYTES, ALIGN>(), core::ptr::null_mut())
}

/// The shadow's size for `[T; N]`, or 0 past `MAX_SHADOW_BYTES` (no
/// `.shared` shadow: on the GPU the array is checked through the window
/// shadow in device memory), so that a sanitized entry still fits a
/// block's 48 KiB of static shared memory next to a large array.
#[doc(hidden)]
pub const fn __shadow_bytes<T, const N: usize>() -> usize {
    let bytes = vigil_shared::block::ShadowLayout::of(core::mem::size_of::<[T; N]>()).bytes();
    if bytes > vigil_shared::block::MAX_SHADOW_BYTES {
        0
    } else {
        bytes
    }
}

#[doc(hidden)]
pub const fn __bytes<T, const N: usize>() -> usize {
    core::mem::size_of::<[T; N]>()
}

/// The alignment of a `shared_array!(T; N; align a)`: `a` or `T`'s
/// default, whichever is larger (`a` = 0: the default).
#[doc(hidden)]
pub const fn __align_at_least<T>(a: usize) -> usize {
    assert!(
        a == 0 || a.is_power_of_two(),
        "shared_array! alignment must be a power of two"
    );
    let d = __align::<T>();
    if a > d {
        a
    } else {
        d
    }
}

#[doc(hidden)]
pub const fn __align<T>() -> usize {
    let a = core::mem::align_of::<T>();
    if a > 16 {
        a
    } else {
        16
    }
}

/// The launch's dynamic shared memory viewed as `T`s, with the number of
/// whole elements it holds (`extern __shared__ T smem[];`). The launch sets
/// its size in bytes. Accesses through the raw pointer are not checked:
/// [`dynamic_shared_array!`](crate::dynamic_shared_array!) is the checked
/// view.
#[inline(always)]
pub fn dynamic_shared<T: bytemuck::Pod>() -> (*mut T, usize) {
    let (p, bytes) = crate::arch::imp::dynamic_shared();
    let p = crate::arch::imp::assume_shared(p as *mut T);
    (p, bytes / core::mem::size_of::<T>().max(1))
}

/// Checks `i < len` for a shared view: a branch to
/// [`shared_out_of_bounds`], as global handles check theirs.
#[inline(always)]
#[track_caller]
fn check_shared_index(i: usize, len: usize) {
    if i >= len {
        shared_out_of_bounds(i, len)
    }
}

/// A shared index past the end. On the GPU this traps at once (a panic
/// would trap too, after building a message nobody reads); on the host it
/// panics with the kernel author's source location.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn shared_out_of_bounds(_index: usize, _len: usize) -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn shared_out_of_bounds(index: usize, len: usize) -> ! {
    panic!("shared array index {index} out of bounds (len {len})")
}
