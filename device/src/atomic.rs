//! Element types that support atomics, and which operations each supports.
//!
//! The operations themselves are methods of [`GlobalPtrMut`](crate::GlobalPtrMut)
//! (`atomic_add`, `atomic_compare_exchange`, ...) and, at block scope, of
//! [`SharedArray`](crate::shared_mem::SharedArray) and
//! [`SharedSlice`](crate::shared_mem::SharedSlice); these traits say which
//! element types they exist for, matching what PTX's `atom` accepts.

use vigil_shared::{Ordering, Scope};

pub(crate) mod sealed {
    use super::*;

    /// Load, store, exchange and compare-exchange, implemented per platform.
    pub trait ArchAtomic: Copy {
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_load(p: *const Self, o: Ordering, s: Scope) -> Self;
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_store(p: *mut Self, v: Self, o: Ordering, s: Scope);
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_exchange(p: *mut Self, v: Self, o: Ordering, s: Scope) -> Self;
        /// Returns the value found; the swap happened iff it equals `cmp`
        /// bitwise.
        ///
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_cas(p: *mut Self, cmp: Self, new: Self, o: Ordering, s: Scope) -> Self;
        /// [`arch_exchange`](ArchAtomic::arch_exchange) on block-shared
        /// memory, relaxed at block scope (see [`ArchAdd::arch_shared_add`]).
        ///
        /// # Safety
        /// `p` must be a valid, aligned (generic) address of block-shared memory.
        unsafe fn arch_shared_exchange(p: *mut Self, v: Self) -> Self;
        /// [`arch_cas`](ArchAtomic::arch_cas) on block-shared memory,
        /// relaxed at block scope.
        ///
        /// # Safety
        /// `p` must be a valid, aligned (generic) address of block-shared memory.
        unsafe fn arch_shared_cas(p: *mut Self, cmp: Self, new: Self) -> Self;
        /// A volatile load of global memory (`ld.volatile.global`; on the
        /// host a relaxed atomic load).
        ///
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_load_volatile(p: *const Self) -> Self;
        /// A volatile store to global memory (`st.volatile.global`; on the
        /// host a relaxed atomic store).
        ///
        /// # Safety
        /// `p` must be valid, aligned global memory.
        unsafe fn arch_store_volatile(p: *mut Self, v: Self);
        /// [`arch_load_volatile`](ArchAtomic::arch_load_volatile) on
        /// block-shared memory (`ld.volatile.shared`).
        ///
        /// # Safety
        /// `p` must be a valid, aligned (generic) address of block-shared memory.
        unsafe fn arch_shared_load_volatile(p: *const Self) -> Self;
        /// [`arch_store_volatile`](ArchAtomic::arch_store_volatile) on
        /// block-shared memory (`st.volatile.shared`).
        ///
        /// # Safety
        /// `p` must be a valid, aligned (generic) address of block-shared memory.
        unsafe fn arch_shared_store_volatile(p: *mut Self, v: Self);
    }

    macro_rules! arch_rmw_trait {
        ($($trait:ident :: $m:ident / $shared:ident),*) => {$(
            /// One read-modify-write operation, implemented per platform.
            pub trait $trait: Copy {
                /// Returns the previous value.
                ///
                /// # Safety
                /// `p` must be valid, aligned global memory.
                unsafe fn $m(p: *mut Self, v: Self, o: Ordering, s: Scope) -> Self;
                /// The same on block-shared memory, relaxed at block scope
                /// (what CUDA's `atomic*_block` on shared memory is): on the
                /// GPU an `atom.shared` on the address converted from
                /// generic to the shared window (an `atom.global` on a
                /// shared address faults the context with an address-space
                /// error). Returns the previous value.
                ///
                /// # Safety
                /// `p` must be a valid, aligned (generic) address of
                /// block-shared memory.
                unsafe fn $shared(p: *mut Self, v: Self) -> Self;
            }
        )*};
    }
    arch_rmw_trait!(
        ArchAdd::arch_add / arch_shared_add,
        ArchMin::arch_min / arch_shared_min,
        ArchMax::arch_max / arch_shared_max,
        ArchAnd::arch_and / arch_shared_and,
        ArchOr::arch_or / arch_shared_or,
        ArchXor::arch_xor / arch_shared_xor
    );

    /// Bitwise equality, for telling whether a compare-exchange swapped.
    pub trait BitEq: Copy {
        fn bit_eq(self, other: Self) -> bool;
    }

    /// Negation for `atomic_sub` (PTX has no `atom.sub`: it adds the negation).
    pub trait Negate: Copy {
        fn negate(self) -> Self;
    }
}

/// Element types with atomic load, store, exchange and compare-exchange:
/// `u32`, `i32`, `f32`, `u64`, `i64`, `f64`.
pub trait Atomic: bytemuck::Pod + sealed::ArchAtomic + sealed::BitEq {}

/// Element types with atomic add and sub: `u32`, `i32`, `u64`, `i64`, `f32`, `f64`.
pub trait AtomicArith: Atomic + sealed::ArchAdd + sealed::Negate {}

/// Element types with atomic min and max: `u32`, `i32`, `u64`, `i64`.
pub trait AtomicMinMax: Atomic + sealed::ArchMin + sealed::ArchMax {}

/// Element types with atomic and, or and xor: `u32`, `i32`, `u64`, `i64`.
pub trait AtomicBits: Atomic + sealed::ArchAnd + sealed::ArchOr + sealed::ArchXor {}

macro_rules! int_atomics {
    ($($t:ty),*) => {$(
        impl sealed::BitEq for $t { #[inline(always)] fn bit_eq(self, o: Self) -> bool { self == o } }
        impl sealed::Negate for $t { #[inline(always)] fn negate(self) -> Self { self.wrapping_neg() } }
        impl Atomic for $t {}
        impl AtomicArith for $t {}
        impl AtomicMinMax for $t {}
        impl AtomicBits for $t {}
    )*};
}
int_atomics!(u32, i32, u64, i64);

macro_rules! float_atomics {
    ($($t:ty),*) => {$(
        impl sealed::BitEq for $t { #[inline(always)] fn bit_eq(self, o: Self) -> bool { self.to_bits() == o.to_bits() } }
        impl sealed::Negate for $t { #[inline(always)] fn negate(self) -> Self { -self } }
        impl Atomic for $t {}
        impl AtomicArith for $t {}
    )*};
}
float_atomics!(f32, f64);
