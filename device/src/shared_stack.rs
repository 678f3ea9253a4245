//! A stack allocator over the launch's dynamic shared memory: scoped,
//! typed tiles that a kernel's later phases reuse.
//!
//! A kernel whose phases need different tiles (a GEMM's input tiles, then
//! its output tile for a softmax) needs, with one `shared_array!` per tile,
//! the sum of all of them for the whole kernel. With a [`SharedStack`] each
//! phase pushes its tiles and pops them when it is done, and the next
//! phase's tiles take the same bytes: the block needs the largest phase,
//! not the sum.
//!
//! - [`shared_stack!`](crate::shared_stack!) declares the stack with its
//!   capacity in bytes, a constant. In a `#[kernel]` body the attribute
//!   puts that capacity in the kernel's `Kernel::DYNAMIC_SHARED_BYTES`, and
//!   a typed launch gives the launch that much dynamic shared memory (an
//!   error names the shortfall when the device cannot provide it). The
//!   stack owns the dynamic shared memory: a kernel with a stack does not
//!   also use `dynamic_shared_array!`.
//! - [`SharedStack::push`] hands out a [`SharedTile`] of `N` elements of
//!   `T` (the same accessors as a `shared_array!`: loads, stores, atomics
//!   at block scope). A tile's size and alignment are checked when the
//!   kernel compiles (a tile larger than the capacity, an element aligned
//!   past [`TILE_ALIGN`]); pushes and pops are bookkeeping the compiler
//!   folds away when the sizes are constants, so a plain entry's
//!   instructions are those of hand-placed offsets.
//! - Pops are LIFO: a pop takes the tile (or a tuple of tiles, top first),
//!   so a popped tile cannot be touched again.
//!
//! Reusing bytes needs a barrier: a tile pushed where a popped one was is
//! safe only when every thread's last access to the old tile happens
//! before any thread's first access to the new one.
//! [`SharedStack::pop_synced`] waits at a block barrier first, which makes
//! that so; [`SharedStack::pop_unsynced`] does not, and is right only when
//! a barrier of the kernel's own lies between (for example at the end of
//! a loop). The sanitizer checks it either way: accesses through tiles
//! are shared-memory accesses, keyed by their bytes, so an unsynced reuse
//! is reported as a race between the old tile's access and the new
//! tile's, each with its tile's push site.
//!
//! ```no_run
//! use vigil_device::prelude::*;
//!
//! /// Two 1 KiB tiles, then one 2 KiB tile over the same bytes.
//! const STACK_BYTES: usize = 2048;
//!
//! #[kernel]
//! pub fn two_phases(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
//!     let mut smem = shared_stack!(STACK_BYTES);
//!     let t = thread_idx().x as usize; // 256 threads
//!     let sums = smem.push::<f32, 256>();
//!     let squares = smem.push::<f32, 256>();
//!     sums.store(t, x.load(t));
//!     squares.store(t, x.load(t) * x.load(t));
//!     sync_threads();
//!     let v = sums.load(255 - t) + squares.load(t);
//!     smem.pop_synced((squares, sums)); // every thread is done with both
//!     let wide = smem.push::<f32, 512>(); // the same bytes
//!     wide.store(2 * t, v);
//!     wide.store(2 * t + 1, -v);
//!     sync_threads();
//!     out.store(t, wide.load(511 - 2 * t));
//! }
//! ```

use crate::arch::imp;
// The tiles' accessors (`checked_accessors!`) name these bounds.
use crate::atomic::{Atomic, AtomicArith, AtomicBits, AtomicMinMax};
use crate::hooks::Active;
use crate::sanitizer::{Plain, Sanitizer};
use crate::shared_mem::{checked_accessors, Elements};
use core::marker::PhantomData;
use core::panic::Location;

/// Alignment of every tile's first byte: the dynamic shared memory's base
/// is aligned to it, and every tile takes a multiple of it
/// ([`tile_bytes`]), so 16-byte vector accesses work in any tile.
pub const TILE_ALIGN: usize = 16;

/// The bytes a tile of `n` elements of `T` takes on a stack: its size
/// rounded up to [`TILE_ALIGN`]. A kernel's phases add these up to find
/// its stack's capacity (the largest phase).
///
/// ```
/// use vigil_device::shared_stack::tile_bytes;
/// assert_eq!(tile_bytes::<f32>(256), 1024);
/// assert_eq!(tile_bytes::<u8>(3), 16);
/// ```
pub const fn tile_bytes<T>(n: usize) -> usize {
    match core::mem::size_of::<T>().checked_mul(n) {
        Some(bytes) => bytes.next_multiple_of(TILE_ALIGN),
        None => panic!("a tile's size overflows usize"),
    }
}

/// A stack of tiles over the launch's dynamic shared memory, `CAPACITY`
/// bytes, checked by sanitizer `S` (in a `#[kernel]` body, the kernel's).
/// Made by [`shared_stack!`](crate::shared_stack!); see the
/// [module docs](self).
///
/// Every thread of the block holds its own copy of the bookkeeping, so
/// every thread must push and pop the same tiles in the same order (as it
/// must reach the same barriers). A helper takes the stack by `&mut`:
/// `fn phase<S: Sanitizer>(smem: &mut SharedStack<4096, S>)`.
#[derive(Debug)]
pub struct SharedStack<const CAPACITY: usize, S = Plain> {
    base: *mut u8,
    /// Bytes in use: the end of the top tile.
    top: usize,
    _s: PhantomData<S>,
}

impl<const CAPACITY: usize, S: Sanitizer> SharedStack<CAPACITY, S> {
    #[doc(hidden)]
    /// The stack over the launch's dynamic shared memory (what
    /// [`shared_stack!`](crate::shared_stack!) expands to). On the CPU
    /// backend a launch that gave less than `CAPACITY` bytes panics here;
    /// on the GPU an access past the launch's shared window faults.
    #[inline(always)]
    #[track_caller]
    pub fn __new() -> Self {
        const {
            assert!(
                CAPACITY <= u32::MAX as usize,
                "a shared stack's capacity must fit a launch's 32-bit dynamic shared memory size"
            )
        };
        let (base, bytes) = crate::shared_mem::dynamic_shared::<u8>();
        #[cfg(not(target_arch = "nvptx64"))]
        if bytes < CAPACITY {
            launch_too_small(bytes, CAPACITY);
        }
        #[cfg(target_arch = "nvptx64")]
        let _ = bytes;
        SharedStack {
            base,
            top: 0,
            _s: PhantomData,
        }
    }

    /// The stack's capacity in bytes.
    pub const fn capacity(&self) -> usize {
        CAPACITY
    }

    /// The bytes its tiles take now (the top tile's end).
    pub const fn used(&self) -> usize {
        self.top
    }

    /// Pushes a tile of `N` elements of `T` on top of the stack. Its
    /// contents are whatever the bytes held (the previous tile's values,
    /// or unspecified at the kernel's start).
    ///
    /// A tile larger than the stack's capacity, or of an element type
    /// aligned to more than [`TILE_ALIGN`], does not compile. Tiles that
    /// together pass the capacity panic here (on the GPU: trap); with
    /// constant sizes the compiler decides that check.
    ///
    /// ```compile_fail
    /// use vigil_device::prelude::*;
    ///
    /// fn phase<S: Sanitizer>(smem: &mut SharedStack<1024, S>) {
    ///     // 2,048 bytes on a 1,024-byte stack: a compile error.
    ///     let too_big = smem.push::<f32, 512>();
    ///     smem.pop_unsynced(too_big);
    /// }
    ///
    /// fn main() {
    ///     phase::<Plain>(&mut shared_stack!(1024));
    /// }
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use = "a pushed tile is used and then popped"]
    pub fn push<T: bytemuck::Pod, const N: usize>(&mut self) -> SharedTile<T, N, S> {
        const {
            assert!(
                core::mem::size_of::<T>() > 0,
                "a shared tile's element type takes bytes"
            );
            assert!(
                core::mem::align_of::<T>() <= TILE_ALIGN,
                "a shared tile's element type must be aligned to at most TILE_ALIGN (16) bytes"
            );
            assert!(
                tile_bytes::<T>(N) <= CAPACITY,
                "a shared tile larger than its stack's capacity"
            );
        }
        let below = self.top;
        // Tiles take multiples of `TILE_ALIGN`, so `below` is aligned.
        let end = below + tile_bytes::<T>(N);
        if end > CAPACITY {
            stack_overflow(below, end - below, CAPACITY);
        }
        self.top = end;
        let tile = SharedTile {
            ptr: self.base.wrapping_add(below) as *mut T,
            below,
            end,
            site: Location::caller(),
            _t: PhantomData,
        };
        if Active::ENABLED {
            imp::shared_declared::<Active>(|| tile.elements().declaration());
        }
        tile
    }

    /// Waits at a block barrier (`sync_threads`, at the caller's line),
    /// then pops `tiles` (a tile, or a tuple of tiles from the top down):
    /// every thread's accesses to them happen before any thread's access
    /// to a tile pushed on their bytes later. Every thread of the block
    /// must call it, as it must reach any barrier.
    ///
    /// Panics (traps on the GPU) when `tiles` are not the top of the stack.
    #[inline(always)]
    #[track_caller]
    pub fn pop_synced(&mut self, tiles: impl Tiles<S>) {
        crate::sync::sync_threads();
        self.release(tiles);
    }

    /// Pops `tiles` (a tile, or a tuple of tiles from the top down)
    /// without waiting: a tile pushed on their bytes later races with
    /// threads still using them, unless a barrier the kernel reaches
    /// after its last access to them and before its first access to the
    /// new tile orders them (a `sync_threads` at the end of a loop). The
    /// sanitizer reports a reuse that no barrier orders.
    ///
    /// Panics (traps on the GPU) when `tiles` are not the top of the stack.
    #[inline(always)]
    #[track_caller]
    pub fn pop_unsynced(&mut self, tiles: impl Tiles<S>) {
        self.release(tiles);
    }

    #[inline(always)]
    #[track_caller]
    fn release(&mut self, tiles: impl Tiles<S>) {
        match tiles.release(self.top) {
            Some(top) => self.top = top,
            None => popped_out_of_order(self.top),
        }
    }
}

/// A tile of `N` elements of `T` on a [`SharedStack`], checked by
/// sanitizer `S`, with the accessors of a
/// [`SharedArray`](crate::shared_mem::SharedArray): `load`, `store`,
/// the atomics at block scope (relaxed) and the asynchronous copies
/// ([`async_copy`](crate::async_copy)).
///
/// Not `Copy`: popping takes the tile, so that it cannot be used after
/// its bytes went to another tile. A helper borrows it:
/// `fn f<S: Sanitizer>(t: &SharedTile<f32, 256, S>)`.
#[derive(Debug)]
pub struct SharedTile<T, const N: usize, S = Plain> {
    ptr: *mut T,
    /// The stack's top before the push (what popping restores).
    below: usize,
    /// The stack's top after the push (popping checks it is the top).
    end: usize,
    /// The push that made it (reports name it).
    site: &'static Location<'static>,
    _t: PhantomData<(T, S)>,
}

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedTile<T, N, S> {
    /// The elements as the checked accessors see them (no `.shared`
    /// shadow: on the GPU dynamic shared memory is checked through the
    /// sanitizer's window shadow, keyed by shared address).
    #[inline(always)]
    pub(crate) fn elements(&self) -> Elements<T, S> {
        Elements {
            ptr: self.ptr,
            len: N,
            shadow: core::ptr::null_mut(),
            site: Some(self.site),
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

    /// The offset of its first byte in the launch's dynamic shared memory.
    pub const fn offset(&self) -> usize {
        self.below
    }

    /// Where it was pushed.
    pub const fn site(&self) -> &'static Location<'static> {
        self.site
    }

    checked_accessors!();
}

mod sealed {
    pub trait Sealed {}
}

/// What [`SharedStack::pop_synced`] and [`SharedStack::pop_unsynced`]
/// take: a [`SharedTile`], or a tuple of up to four, the top one first
/// (`(b, a)` after `a` then `b` were pushed).
pub trait Tiles<S>: sealed::Sealed {
    /// The stack's top once these are popped from a stack whose top is
    /// `top`, or `None` when they are not its top.
    #[doc(hidden)]
    fn release(self, top: usize) -> Option<usize>;
}

impl<T, const N: usize, S> sealed::Sealed for SharedTile<T, N, S> {}

impl<T, const N: usize, S> Tiles<S> for SharedTile<T, N, S> {
    #[inline(always)]
    fn release(self, top: usize) -> Option<usize> {
        (top == self.end).then_some(self.below)
    }
}

macro_rules! tuple_tiles {
    ($($t:ident),+) => {
        impl<$($t: sealed::Sealed),+> sealed::Sealed for ($($t,)+) {}

        impl<S, $($t: Tiles<S>),+> Tiles<S> for ($($t,)+) {
            #[inline(always)]
            #[allow(non_snake_case)]
            fn release(self, top: usize) -> Option<usize> {
                let ($($t,)+) = self;
                $(let top = $t.release(top)?;)+
                Some(top)
            }
        }
    };
}
tuple_tiles!(A, B);
tuple_tiles!(A, B, C);
tuple_tiles!(A, B, C, D);

/// A push past the capacity. On the GPU this traps; on the host it panics
/// at the kernel author's push.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn stack_overflow(_at: usize, _bytes: usize, _capacity: usize) -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn stack_overflow(at: usize, bytes: usize, capacity: usize) -> ! {
    panic!(
        "shared stack overflow: a {bytes}-byte tile pushed at byte {at} passes the stack's \
         capacity of {capacity} bytes"
    )
}

/// A pop of tiles that are not the stack's top.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn popped_out_of_order(_top: usize) -> ! {
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn popped_out_of_order(top: usize) -> ! {
    panic!(
        "shared stack: popped tiles that are not its top (the top tile ends at byte {top}); \
         pop tiles in the reverse order of their pushes"
    )
}

/// A launch that gave a stack less dynamic shared memory than its capacity.
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn launch_too_small(bytes: usize, capacity: usize) -> ! {
    panic!(
        "shared stack of {capacity} bytes, but the launch gave {bytes} bytes of dynamic shared \
         memory: a typed launch of a #[kernel] whose body declares the stack gives it its \
         capacity; an untyped launch must ask for at least that much"
    )
}

/// Declares the block's shared stack over the launch's dynamic shared
/// memory, with its capacity in bytes (a constant expression), and
/// evaluates to its [`SharedStack`]: `let mut smem = shared_stack!(64 * 1024);`.
///
/// Inside a `#[kernel]` body the attribute makes it
/// `shared_stack!(@sanitizer S; ...)`, the stack of the kernel's sanitizer
/// `S`, and sets the kernel's `Kernel::DYNAMIC_SHARED_BYTES` to the
/// capacity (so the expression must be a constant the kernel's module
/// sees), which a typed launch provides. A kernel body declares at most
/// one stack and no `dynamic_shared_array!` beside it (both would alias
/// the stack's bytes):
///
/// ```compile_fail
/// use vigil_device::prelude::*;
///
/// #[kernel]
/// pub fn two_stacks(out: GlobalSliceMut<f32>) {
///     let mut first = shared_stack!(1024);
///     let mut second = shared_stack!(1024); // error: one stack per kernel
/// }
/// ```
///
/// ```compile_fail
/// use vigil_device::prelude::*;
///
/// #[kernel]
/// pub fn stack_and_view(out: GlobalSliceMut<f32>) {
///     let mut smem = shared_stack!(1024);
///     let raw = dynamic_shared_array!(f32); // error: it would alias the stack
/// }
/// ```
#[macro_export]
macro_rules! shared_stack {
    (@sanitizer $s:ty; $bytes:expr) => {
        $crate::shared_stack::SharedStack::<{ $bytes }, $s>::__new()
    };
    ($bytes:expr) => {
        $crate::shared_stack!(@sanitizer $crate::Plain; $bytes)
    };
}
