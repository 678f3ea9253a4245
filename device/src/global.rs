//! Typed handles to global memory.
//!
//! Kernel parameters that point into device memory are one of four handles:
//! [`GlobalPtr`] / [`GlobalPtrMut`] (one element, e.g. a flag or a counter)
//! and [`GlobalSlice`] / [`GlobalSliceMut`] (a bounded array). All accesses
//! go through their methods, which is where the sanitized variant of a
//! kernel observes them; `#[track_caller]` gives each access the kernel
//! author's source location.
//!
//! Handles are `Copy`, like pointers in CUDA: every thread holds its own copy
//! of the same pointer. Nothing here hands out Rust references into global
//! memory, so concurrent accesses from many threads are not Rust aliasing
//! violations; whether they race is what the sanitizer checks.

use crate::arch::imp;
use crate::atomic::{Atomic, AtomicArith, AtomicBits, AtomicMinMax};
use crate::hooks::Active;
use crate::sanitizer::{AtomicAccess, Plain, Sanitizer};
use core::marker::PhantomData;
use core::mem::size_of;
use core::panic::Location;
use vigil_shared::{AccessKind, Ordering, Scope};

/// Four elements aligned to 16 bytes, so that one access moves 16 bytes
/// (`ld.global.v4.f32` and friends). View a slice of 4-byte elements as
/// `Vec4`s with [`GlobalSlice::cast`].
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec4<T>(pub [T; 4]);

// SAFETY: `Vec4<T>` for 4-byte `T` is 16 bytes with no padding, and every
// bit pattern of four `T: Pod` is valid.
unsafe impl bytemuck::Zeroable for Vec4<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Vec4<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Zeroable for Vec4<u32> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Vec4<u32> {}
// SAFETY: as above.
unsafe impl bytemuck::Zeroable for Vec4<i32> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Vec4<i32> {}
const _: () = assert!(size_of::<Vec4<f32>>() == 16 && core::mem::align_of::<Vec4<f32>>() == 16);

/// An index past the end. On the GPU this traps at once (a panic would trap
/// too, after building a message nobody reads); on the host it panics with
/// the kernel author's source location.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn out_of_bounds(_index: usize, _len: usize) -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn out_of_bounds(index: usize, len: usize) -> ! {
    panic!("global index {index} out of bounds (len {len})")
}

/// Checks `index < len`: a branch to [`out_of_bounds`] (a predicated trap
/// and an `asm!` one measured no faster; docs/src/performance.md).
#[inline(always)]
#[track_caller]
pub(crate) fn check_index(index: usize, len: usize) {
    if index >= len {
        out_of_bounds(index, len)
    }
}

/// A plain load through the sanitizer. A spin-wait may repeat it: the
/// platform may let the block's other threads run first ([`imp::poll`]).
#[inline(always)]
#[track_caller]
unsafe fn plain_load<T: bytemuck::Pod>(p: *const T) -> T {
    let loc = Location::caller();
    imp::poll(p as usize, size_of::<T>(), loc);
    Active::access(p as usize, size_of::<T>(), AccessKind::Read, loc);
    // SAFETY: the caller guarantees `p` is in bounds and aligned.
    unsafe { imp::load(p) }
}

/// A plain store through the sanitizer.
#[inline(always)]
#[track_caller]
unsafe fn plain_store<T: bytemuck::Pod>(p: *mut T, v: T) {
    Active::access(
        p as usize,
        size_of::<T>(),
        AccessKind::Write,
        Location::caller(),
    );
    // SAFETY: the caller guarantees `p` is in bounds and aligned.
    unsafe { imp::store(p, v) }
}

/// An atomic through the sanitizer (`op` performs it and says whether it
/// wrote), then, in a checking variant, the block check with what it did
/// (a compare-exchange that did not write only read).
///
/// Every atomic but a store reads, so a spin-wait may repeat it: the
/// platform may let the block's other threads run first ([`imp::poll`]),
/// in plain and checking variants alike, before the sanitizer's hook.
#[inline(always)]
#[track_caller]
fn checked_atomic<R>(access: AtomicAccess, op: impl FnOnce() -> (R, bool)) -> R {
    let loc = Location::caller();
    if access.kind != AccessKind::AtomicWrite {
        imp::poll(access.addr, access.size, loc);
    }
    if !Active::ENABLED {
        return Active::atomic(access, loc, op);
    }
    let mut wrote = false;
    let r = Active::atomic(access, loc, || {
        let (r, w) = op();
        wrote = w;
        (r, w)
    });
    let kind = if access.kind.writes() && !wrote {
        AccessKind::AtomicRead
    } else {
        access.kind
    };
    Active::block_global_access(access.addr, access.size, kind, loc);
    r
}

macro_rules! handle_common {
    ($name:ident, $ptr:ty) => {
        impl<T, S> Clone for $name<T, S> {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, S> Copy for $name<T, S> {}
        impl<T, S> core::fmt::Debug for $name<T, S> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("ptr", &self.ptr)
                    .finish_non_exhaustive()
            }
        }
        impl<T, S> $name<T, S> {
            /// The raw address (for address arithmetic and debugging).
            #[inline(always)]
            pub fn as_ptr(&self) -> $ptr {
                self.ptr
            }
        }
    };
}

/// The constructor and length queries both slice handles share.
macro_rules! slice_common {
    ($name:ident, $ptr:ty) => {
        impl<T, S> $name<T, S> {
            /// A handle from a raw device pointer and a length in elements.
            ///
            /// # Safety
            /// `ptr` must be valid, aligned global memory for `len` elements for the whole launch.
            /// A handle that writes must not reach memory the launch was given as a shared
            /// borrow (`&buf` for a `GlobalSlice` or `GlobalPtr` parameter): the host's borrow
            /// promises that no thread of the launch writes it, and the GPU sanitizer relies on
            /// that when it leaves the block's own reads of it unchecked.
            #[inline(always)]
            pub const unsafe fn from_raw_parts(ptr: $ptr, len: usize) -> Self {
                $name {
                    ptr,
                    len,
                    _s: PhantomData,
                }
            }

            /// The number of elements.
            #[inline(always)]
            pub fn len(&self) -> usize {
                self.len
            }

            /// True when the slice holds no element.
            #[inline(always)]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
        }
    };
}

/// A read-only pointer to one element of global memory.
pub struct GlobalPtr<T, S = Plain> {
    ptr: *const T,
    _s: PhantomData<S>,
}
handle_common!(GlobalPtr, *const T);

/// A read-write pointer to one element of global memory, with atomics.
pub struct GlobalPtrMut<T, S = Plain> {
    ptr: *mut T,
    _s: PhantomData<S>,
}
handle_common!(GlobalPtrMut, *mut T);

/// A read-only array in global memory.
pub struct GlobalSlice<T, S = Plain> {
    ptr: *const T,
    len: usize,
    _s: PhantomData<S>,
}
handle_common!(GlobalSlice, *const T);
slice_common!(GlobalSlice, *const T);

/// A read-write array in global memory.
pub struct GlobalSliceMut<T, S = Plain> {
    ptr: *mut T,
    len: usize,
    _s: PhantomData<S>,
}
handle_common!(GlobalSliceMut, *mut T);
slice_common!(GlobalSliceMut, *mut T);

impl<T: bytemuck::Pod, S: Sanitizer> GlobalPtr<T, S> {
    /// A handle from a raw device pointer.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned global memory for one `T` for the whole launch.
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *const T) -> Self {
        GlobalPtr {
            ptr,
            _s: PhantomData,
        }
    }

    /// Reads the element.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self) -> T {
        // SAFETY: valid for one `T` (constructor's contract).
        unsafe { plain_load::<T>(self.ptr) }
    }

    /// Reads the element atomically with the given ordering (relaxed or
    /// acquire; a release part is ignored) and scope.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_load(&self, ordering: Ordering, scope: Scope) -> T
    where
        T: Atomic,
    {
        atomic_load::<T>(self.ptr, ordering, scope)
    }

    /// Reads the element with a volatile load (`ld.volatile.global`, CUDA's
    /// read through a `volatile` pointer): for the memory model a relaxed
    /// atomic load at system scope; see [`GlobalPtrMut::load_volatile`].
    #[inline(always)]
    #[track_caller]
    pub fn load_volatile(&self) -> T
    where
        T: Atomic,
    {
        volatile_load::<T>(self.ptr)
    }
}

#[inline(always)]
#[track_caller]
fn atomic_load<T: Atomic>(p: *const T, ordering: Ordering, scope: Scope) -> T {
    let ordering = if ordering.acquires() {
        Ordering::Acquire
    } else {
        Ordering::Relaxed
    };
    let access = AtomicAccess {
        addr: p as usize,
        size: size_of::<T>(),
        kind: AccessKind::AtomicRead,
        ordering,
        scope,
        compare: false,
    };
    // SAFETY: `p` is valid and aligned (handle invariant).
    checked_atomic(access, || {
        (unsafe { T::arch_load(p, ordering, scope) }, false)
    })
}

/// What a volatile access of a `T` at `addr` is for the sanitizer: the PTX
/// memory model treats `ld.volatile` and `st.volatile` as relaxed atomics
/// at system scope, so they never race with each other and race with
/// plain accesses they are not ordered with.
#[inline(always)]
fn volatile_access<T>(addr: usize, kind: AccessKind) -> AtomicAccess {
    AtomicAccess {
        addr,
        size: size_of::<T>(),
        kind,
        ordering: Ordering::Relaxed,
        scope: Scope::System,
        compare: false,
    }
}

/// A volatile load (`ld.volatile.global`) through the sanitizer.
#[inline(always)]
#[track_caller]
fn volatile_load<T: Atomic>(p: *const T) -> T {
    let access = volatile_access::<T>(p as usize, AccessKind::AtomicRead);
    // SAFETY: `p` is valid and aligned (handle invariant).
    checked_atomic(access, || (unsafe { T::arch_load_volatile(p) }, false))
}

/// A volatile store (`st.volatile.global`) through the sanitizer.
#[inline(always)]
#[track_caller]
fn volatile_store<T: Atomic>(p: *mut T, v: T) {
    let access = volatile_access::<T>(p as usize, AccessKind::AtomicWrite);
    // SAFETY: `p` is valid and aligned (handle invariant).
    checked_atomic(access, || (unsafe { T::arch_store_volatile(p, v) }, true))
}

impl<T: bytemuck::Pod, S: Sanitizer> GlobalPtrMut<T, S> {
    /// A handle from a raw device pointer.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned global memory for one `T` for the whole launch.
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *mut T) -> Self {
        GlobalPtrMut {
            ptr,
            _s: PhantomData,
        }
    }

    /// Reads the element.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self) -> T {
        // SAFETY: valid for one `T` (constructor's contract).
        unsafe { plain_load::<T>(self.ptr) }
    }

    /// Writes the element.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, v: T) {
        // SAFETY: valid for one `T` (constructor's contract).
        unsafe { plain_store::<T>(self.ptr, v) }
    }

    /// A read-only view of the same element.
    #[inline(always)]
    pub fn as_const(&self) -> GlobalPtr<T, S> {
        GlobalPtr {
            ptr: self.ptr,
            _s: PhantomData,
        }
    }

    #[inline(always)]
    #[track_caller]
    fn rmw(
        &self,
        compare: bool,
        ordering: Ordering,
        scope: Scope,
        op: impl FnOnce(*mut T) -> (T, bool),
    ) -> T {
        let ordering = if ordering == Ordering::SeqCst {
            Ordering::AcqRel
        } else {
            ordering
        };
        let access = AtomicAccess {
            addr: self.ptr as usize,
            size: size_of::<T>(),
            kind: AccessKind::AtomicRmw,
            ordering,
            scope,
            compare,
        };
        checked_atomic(access, || op(self.ptr))
    }
}

/// Defines an atomic read-modify-write method on `GlobalPtrMut` in terms of its arch operation.
macro_rules! rmw_method {
    ($(#[$doc:meta])* $name:ident, $bound:ident, |$p:ident, $v:ident, $o:ident, $s:ident| $op:expr) => {
        $(#[$doc])*
        #[inline(always)]
        #[track_caller]
        pub fn $name(&self, v: T, ordering: Ordering, scope: Scope) -> T
        where
            T: $bound,
        {
            self.rmw(false, ordering, scope, |$p| {
                let ($v, $o, $s) = (v, normalise_rmw(ordering), scope);
                // SAFETY: `p` is valid and aligned (handle invariant).
                (unsafe { $op }, true)
            })
        }
    };
}

#[inline(always)]
fn normalise_rmw(o: Ordering) -> Ordering {
    if o == Ordering::SeqCst {
        Ordering::AcqRel
    } else {
        o
    }
}

impl<T: bytemuck::Pod, S: Sanitizer> GlobalPtrMut<T, S> {
    /// Reads the element atomically (relaxed or acquire; a release part is ignored).
    #[inline(always)]
    #[track_caller]
    pub fn atomic_load(&self, ordering: Ordering, scope: Scope) -> T
    where
        T: Atomic,
    {
        atomic_load::<T>(self.ptr, ordering, scope)
    }

    /// Reads the element with a volatile load (`ld.volatile.global`, CUDA's
    /// read through a `volatile` pointer). The PTX memory model treats it
    /// as a relaxed atomic load at system scope, and so does the
    /// sanitizer: volatile accesses never race with each other or with
    /// atomics, a plain access they are not ordered with races with them,
    /// and they order nothing by themselves (pair them with fences to
    /// publish data). On the CPU backend it is a relaxed atomic load, and
    /// a thread that keeps polling it lets the block's other threads run.
    ///
    /// ```no_run
    /// use vigil_device::prelude::*;
    ///
    /// /// Block 0 publishes `data[0]`; block 1 polls the flag, then reads it.
    /// #[kernel]
    /// pub fn hand_off<S: Sanitizer>(
    ///     data: GlobalSliceMut<u32, S>,
    ///     flag: GlobalPtrMut<u32, S>,
    ///     out: GlobalSliceMut<u32, S>,
    /// ) {
    ///     if block_idx().x == 0 {
    ///         data.store(0, 42);
    ///         fence::<S>(Ordering::Release, Scope::Device);
    ///         flag.store_volatile(1);
    ///     } else {
    ///         while flag.load_volatile() == 0 {}
    ///         fence::<S>(Ordering::Acquire, Scope::Device);
    ///         out.store(0, data.load(0));
    ///     }
    /// }
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn load_volatile(&self) -> T
    where
        T: Atomic,
    {
        volatile_load::<T>(self.ptr)
    }

    /// Writes the element with a volatile store (`st.volatile.global`): for
    /// the memory model a relaxed atomic store at system scope; see
    /// [`GlobalPtrMut::load_volatile`].
    #[inline(always)]
    #[track_caller]
    pub fn store_volatile(&self, v: T)
    where
        T: Atomic,
    {
        volatile_store::<T>(self.ptr, v)
    }

    /// Writes the element atomically (relaxed or release; an acquire part is ignored).
    #[inline(always)]
    #[track_caller]
    pub fn atomic_store(&self, v: T, ordering: Ordering, scope: Scope)
    where
        T: Atomic,
    {
        let ordering = if ordering.releases() {
            Ordering::Release
        } else {
            Ordering::Relaxed
        };
        let access = AtomicAccess {
            addr: self.ptr as usize,
            size: size_of::<T>(),
            kind: AccessKind::AtomicWrite,
            ordering,
            scope,
            compare: false,
        };
        // SAFETY: valid and aligned (handle invariant).
        checked_atomic(access, || {
            (unsafe { T::arch_store(self.ptr, v, ordering, scope) }, true)
        })
    }

    rmw_method!(
        /// Atomically adds `v`, returning the previous value (`atom.add`).
        atomic_add,
        AtomicArith,
        |p, v, o, s| T::arch_add(p, v, o, s)
    );
    rmw_method!(
        /// Atomically subtracts `v`, returning the previous value (an `atom.add` of `-v`).
        atomic_sub,
        AtomicArith,
        |p, v, o, s| T::arch_add(p, v.negate(), o, s)
    );
    rmw_method!(
        /// Atomically stores the minimum of the element and `v`, returning the previous value.
        atomic_min,
        AtomicMinMax,
        |p, v, o, s| T::arch_min(p, v, o, s)
    );
    rmw_method!(
        /// Atomically stores the maximum of the element and `v`, returning the previous value.
        atomic_max,
        AtomicMinMax,
        |p, v, o, s| T::arch_max(p, v, o, s)
    );
    rmw_method!(
        /// Atomically replaces the element with `v`, returning the previous value (`atom.exch`).
        atomic_exchange,
        Atomic,
        |p, v, o, s| T::arch_exchange(p, v, o, s)
    );
    rmw_method!(
        /// Atomic bitwise and, returning the previous value.
        atomic_and,
        AtomicBits,
        |p, v, o, s| T::arch_and(p, v, o, s)
    );
    rmw_method!(
        /// Atomic bitwise or, returning the previous value.
        atomic_or,
        AtomicBits,
        |p, v, o, s| T::arch_or(p, v, o, s)
    );
    rmw_method!(
        /// Atomic bitwise xor, returning the previous value.
        atomic_xor,
        AtomicBits,
        |p, v, o, s| T::arch_xor(p, v, o, s)
    );

    /// Atomically replaces the element with `new` if it equals `current`
    /// (bitwise). Returns `Ok(previous)` when it swapped, `Err(found)` when
    /// not; a failed exchange is an atomic read for the sanitizer.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_compare_exchange(
        &self,
        current: T,
        new: T,
        ordering: Ordering,
        scope: Scope,
    ) -> Result<T, T>
    where
        T: Atomic,
    {
        let found = self.rmw(true, ordering, scope, |p| {
            // SAFETY: valid and aligned (handle invariant).
            let found = unsafe { T::arch_cas(p, current, new, normalise_rmw(ordering), scope) };
            (found, found.bit_eq(current))
        });
        if found.bit_eq(current) {
            Ok(found)
        } else {
            Err(found)
        }
    }
}

impl<T: bytemuck::Pod, S: Sanitizer> GlobalSlice<T, S> {
    /// Reads element `i`. Panics (traps on the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        check_index(i, self.len);
        // SAFETY: in bounds (checked above).
        unsafe { plain_load::<T>(self.ptr.add(i)) }
    }

    /// Reads element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_unchecked(&self, i: usize) -> T {
        // SAFETY: forwarded from the caller.
        unsafe { plain_load::<T>(self.ptr.add(i)) }
    }

    /// Reads element `i` with a volatile load (`ld.volatile.global`): a
    /// relaxed atomic load at system scope for the memory model and the
    /// sanitizer (see [`GlobalPtrMut::load_volatile`]). Panics (traps on
    /// the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn load_volatile(&self, i: usize) -> T
    where
        T: Atomic,
    {
        self.at(i).load_volatile()
    }

    /// A handle to element `i`. Panics (traps on the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> GlobalPtr<T, S> {
        check_index(i, self.len);
        GlobalPtr {
            ptr: self.ptr.wrapping_add(i),
            _s: PhantomData,
        }
    }

    /// The same bytes viewed as `U`s, when the address is aligned for `U`
    /// and the byte length is a whole number of `U`s; `None` otherwise.
    #[inline(always)]
    pub fn cast<U: bytemuck::Pod>(&self) -> Option<GlobalSlice<U, S>> {
        let (ptr, len) = cast_parts::<T, U>(self.ptr as usize, self.len)?;
        Some(GlobalSlice {
            ptr: ptr as *const U,
            len,
            _s: PhantomData,
        })
    }
}

fn cast_parts<T, U>(addr: usize, len: usize) -> Option<(usize, usize)> {
    let bytes = len * size_of::<T>();
    if size_of::<U>() == 0
        || !addr.is_multiple_of(core::mem::align_of::<U>())
        || !bytes.is_multiple_of(size_of::<U>())
    {
        return None;
    }
    Some((addr, bytes / size_of::<U>()))
}

impl<T: bytemuck::Pod, S: Sanitizer> GlobalSliceMut<T, S> {
    /// Reads element `i`. Panics (traps on the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        self.as_const().load(i)
    }

    /// Writes element `i`. Panics (traps on the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: T) {
        check_index(i, self.len);
        // SAFETY: in bounds (checked above).
        unsafe { plain_store::<T>(self.ptr.add(i), v) }
    }

    /// Writes element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn store_unchecked(&self, i: usize, v: T) {
        // SAFETY: forwarded from the caller.
        unsafe { plain_store::<T>(self.ptr.add(i), v) }
    }

    /// Reads element `i` with a volatile load; see
    /// [`GlobalSlice::load_volatile`].
    #[inline(always)]
    #[track_caller]
    pub fn load_volatile(&self, i: usize) -> T
    where
        T: Atomic,
    {
        self.as_const().load_volatile(i)
    }

    /// Writes element `i` with a volatile store (`st.volatile.global`): a
    /// relaxed atomic store at system scope for the memory model and the
    /// sanitizer (see [`GlobalPtrMut::load_volatile`]). Panics (traps on
    /// the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn store_volatile(&self, i: usize, v: T)
    where
        T: Atomic,
    {
        self.at(i).store_volatile(v)
    }

    /// A handle to element `i`, for atomics. Panics (traps on the GPU) when `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> GlobalPtrMut<T, S> {
        check_index(i, self.len);
        GlobalPtrMut {
            ptr: self.ptr.wrapping_add(i),
            _s: PhantomData,
        }
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub fn as_const(&self) -> GlobalSlice<T, S> {
        GlobalSlice {
            ptr: self.ptr,
            len: self.len,
            _s: PhantomData,
        }
    }

    /// The same bytes viewed as `U`s; see [`GlobalSlice::cast`].
    #[inline(always)]
    pub fn cast<U: bytemuck::Pod>(&self) -> Option<GlobalSliceMut<U, S>> {
        let (ptr, len) = cast_parts::<T, U>(self.ptr as usize, self.len)?;
        Some(GlobalSliceMut {
            ptr: ptr as *mut U,
            len,
            _s: PhantomData,
        })
    }
}
