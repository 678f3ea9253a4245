//! [`BlockWord`]: a word of the CTA's same-block shadows (the same-block
//! table's entries, the window shadow, shared arrays' shadows), accessed
//! at the CTA's scope.
//!
//! Only the CTA that holds a slot touches its words while it runs, and
//! the next holder acquires the slot from the last one's release
//! (`entry::claim_region`), so the CTA's scope orders every access that
//! must be ordered. It is also cheaper: `core`'s atomics are
//! system-scoped (an `ld.relaxed.sys` goes to the L2 every time, an
//! `ld.acquire.sys` invalidates the whole L1), which a CTA-scoped access
//! need not do.

use core::sync::atomic::AtomicU64;

use vigil_shared::block::TableWord;

use crate::arch::ptx as arch;

/// A same-block shadow word, at the CTA's scope (see the module docs).
/// Its relaxed operations take a generic address (shared or global
/// memory); its acquire and release ones, global memory only (the
/// table's tags and line modes).
#[repr(transparent)]
pub(super) struct BlockWord(AtomicU64);

impl TableWord for BlockWord {
    #[inline(always)]
    fn load_acquire(&self) -> u64 {
        arch::load_acquire_block(&self.0)
    }
    #[inline(always)]
    fn load_relaxed(&self) -> u64 {
        arch::load_relaxed_cta(&self.0)
    }
    #[inline(always)]
    fn store_relaxed(&self, value: u64) {
        arch::store_relaxed_cta(&self.0, value)
    }
    #[inline(always)]
    fn store_release(&self, value: u64) {
        arch::store_release_block(&self.0, value)
    }
    #[inline(always)]
    fn cas_acquire(&self, current: u64, new: u64) -> bool {
        arch::compare_exchange_acquire_block(&self.0, current, new) == current
    }
    #[inline(always)]
    fn cas_relaxed(&self, current: u64, new: u64) -> bool {
        arch::compare_exchange_relaxed_cta(&self.0, current, new) == current
    }
    #[inline(always)]
    fn swap_relaxed(&self, value: u64) -> u64 {
        arch::exchange_relaxed_cta(&self.0, value)
    }
}
