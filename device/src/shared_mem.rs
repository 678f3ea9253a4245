//! Block-shared memory: static arrays declared in the kernel body and the
//! launch's dynamic shared memory.
//!
//! Handles are plain raw-pointer views ([`SharedArray`]). Their loads,
//! stores and atomics tell the platform layer where they are
//! (`#[track_caller]`), which hands them to the sanitizer's
//! [`shared_access`](crate::Sanitizer::shared_access) hook when the
//! sanitized variant runs (on the CPU backend, when a sanitizer runtime is
//! installed; on the GPU the hook is not wired yet, see ARCHITECTURE.md).

use crate::arch::imp;
use crate::atomic::AtomicArith;
use crate::sanitizer::SharedAccess;
use core::marker::PhantomData;
use vigil_shared::AccessKind;

/// A block-shared array of `N` elements of `T`, as returned by [`shared_array!`](crate::shared_array!).
///
/// Every thread of the block sees the same storage. It starts with
/// unspecified contents on the GPU (zeroed on the CPU backend).
#[derive(Clone, Copy, Debug)]
pub struct SharedArray<T, const N: usize> {
    ptr: *mut T,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod, const N: usize> SharedArray<T, N> {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` must point to block-shared storage of `N` aligned elements.
    pub const unsafe fn from_raw(ptr: *mut u8) -> Self {
        SharedArray {
            ptr: ptr as *mut T,
            _t: PhantomData,
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

    /// Element `i`'s access of `kind` as the sanitizer sees it.
    #[inline(always)]
    fn access(&self, i: usize, kind: AccessKind) -> SharedAccess {
        SharedAccess {
            addr: self.ptr.wrapping_add(i) as usize,
            size: core::mem::size_of::<T>(),
            kind,
            array: self.ptr as usize,
            array_bytes: core::mem::size_of::<T>() * N,
        }
    }

    /// Reads element `i`. Panics (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        assert!(i < N, "shared array index out of bounds");
        imp::shared_access(|| self.access(i, AccessKind::Read));
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).read_volatile() }
    }

    /// Writes element `i`. Panics (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: T) {
        assert!(i < N, "shared array index out of bounds");
        imp::shared_access(|| self.access(i, AccessKind::Write));
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).write_volatile(v) }
    }

    /// Adds `v` to element `i` atomically (relaxed, block scope:
    /// `atomicAdd_block` on shared memory) and returns the previous value.
    /// Atomics on the same element never race with each other. Panics
    /// (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_add(&self, i: usize, v: T) -> T
    where
        T: AtomicArith,
    {
        assert!(i < N, "shared array index out of bounds");
        imp::shared_access(|| self.access(i, AccessKind::AtomicRmw));
        // SAFETY: in bounds of the block's storage (checked above) and
        // aligned (the storage is aligned for `T`).
        unsafe { T::arch_shared_add(self.ptr.add(i), v) }
    }

    /// The raw pointer to element 0.
    pub const fn as_ptr(&self) -> *mut T {
        self.ptr
    }
}

/// Declares a block-shared array and evaluates to its [`SharedArray`] handle:
/// `let tile = shared_array!(f32; 256);`
///
/// Each expansion of the macro is one array per block, however often the
/// line runs.
#[macro_export]
macro_rules! shared_array {
    ($t:ty; $n:expr) => {{
        // A type of its own per expansion: the storage function is
        // monomorphised once per key, so each expansion is one array, and
        // the non-inlined function keeps LLVM from splitting it in two.
        struct __VigilSharedKey;
        // SAFETY: the pointer is this expansion's block-shared storage for `[$t; $n]`.
        unsafe {
            $crate::shared_mem::SharedArray::<$t, { $n }>::from_raw(
                $crate::shared_mem::__storage::<
                    __VigilSharedKey,
                    { $crate::shared_mem::__bytes::<$t, { $n }>() },
                    { $crate::shared_mem::__align::<$t>() },
                >(),
            )
        }
    }};
}

#[doc(hidden)]
#[inline(never)]
#[cfg(target_arch = "nvptx64")]
pub fn __storage<K: 'static, const BYTES: usize, const ALIGN: usize>() -> *mut u8 {
    let p: u64;
    // SAFETY: declares block-scoped shared storage and takes its generic address.
    unsafe {
        core::arch::asm!(
            "{{ .shared .align {a} .b8 vigil_smem[{n}]; cvta.shared.u64 {p}, vigil_smem; }}",
            a = const ALIGN,
            n = const BYTES,
            p = out(reg64) p,
            options(nomem, nostack),
        )
    };
    p as *mut u8
}

#[doc(hidden)]
#[inline(never)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __storage<K: 'static, const BYTES: usize, const ALIGN: usize>() -> *mut u8 {
    crate::arch::host::static_shared(core::any::TypeId::of::<K>(), BYTES, ALIGN)
}

#[doc(hidden)]
pub const fn __bytes<T, const N: usize>() -> usize {
    core::mem::size_of::<[T; N]>()
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
/// its size in bytes.
#[inline(always)]
pub fn dynamic_shared<T: bytemuck::Pod>() -> (*mut T, usize) {
    let (p, bytes) = crate::arch::imp::dynamic_shared();
    (p as *mut T, bytes / core::mem::size_of::<T>().max(1))
}
