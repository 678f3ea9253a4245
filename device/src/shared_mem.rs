//! Block-shared memory: static arrays declared in the kernel body and the
//! launch's dynamic shared memory.
//!
//! Shared memory is not checked by the global-memory sanitizer; handles to
//! it are plain raw-pointer views ([`SharedArray`]).

use core::marker::PhantomData;

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

    /// Reads element `i`. Panics (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        assert!(i < N, "shared array index out of bounds");
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).read_volatile() }
    }

    /// Writes element `i`. Panics (traps on the GPU) when `i >= N`.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: T) {
        assert!(i < N, "shared array index out of bounds");
        // SAFETY: in bounds of the block's storage (checked above).
        unsafe { self.ptr.add(i).write_volatile(v) }
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
