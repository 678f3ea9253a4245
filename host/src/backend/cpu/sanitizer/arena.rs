//! The sanitized CPU device's memory: one virtual reservation holding the
//! user buffers, their shadow cells and their sites, so that finding a
//! word's shadow is pointer arithmetic, as on the GPU
//! (docs/src/design/address-space.md): word `w`'s cell is at
//! `shadow_base + 8 * w`. The site plane keeps the site word of each
//! split word's inline access (the GPU hashes those into a table).
//!
//! ```text
//! base                      base + cap            base + 3 cap        base + 5 cap
//! | user memory (cap bytes) | shadow (8 B / word) | sites (8 B / word) |
//! ```
//!
//! The whole range is one `mmap(PROT_READ | PROT_WRITE, MAP_PRIVATE |
//! MAP_ANONYMOUS | MAP_NORESERVE)`: nothing is committed until touched,
//! untouched pages read as zero (the empty shadow state). Buffers are handed
//! out by the pure [`BuddyTree`] of the VMM allocator; freeing one gives
//! its pages back (`madvise(MADV_DONTNEED)`, which makes them read as zero
//! again), so a new buffer never inherits a freed one's shadow or sites.
//! [`Zeroed`] is the same kind of mapping for the engine's other tables.

use crate::buddy_allocator::{BuddyError, BuddyTree};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering as MemOrder};
use std::sync::{Mutex, PoisonError, RwLock};

/// Bytes of user memory a shadow cell covers.
const WORD_BYTES: u64 = 4;
/// Bytes of a shadow cell.
const CELL_BYTES: u64 = 8;

/// One live buffer of the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// A number naming the allocation (1, 2, ... in allocation order).
    pub id: u64,
    /// Address of its first byte.
    pub address: u64,
    /// Bytes requested.
    pub size: u64,
}

/// The reservation: user memory and its shadow. See the module docs.
pub(crate) struct Arena {
    base: *mut u8,
    /// User bytes the arena can hand out.
    capacity: u64,
    /// Bytes of the whole mapping.
    mapped: u64,
    buddy: Mutex<BuddyTree>,
    live: RwLock<BTreeMap<u64, Allocation>>,
    next_id: AtomicU64,
}

// SAFETY: the mapping is plain memory owned by the arena; everything the
// threads share in it is accessed through atomics (shadow cells) or
// handed to one owner (user buffers); the bookkeeping is behind locks.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

/// Why the arena could not be created or could not allocate.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    /// The reservation failed.
    #[error("reserving {bytes} bytes of address space for the CPU sanitizer failed: {reason}")]
    Reserve {
        /// Bytes asked for.
        bytes: u64,
        /// The OS error.
        reason: String,
    },
    /// The buddy tree refused (no room, bad size, unknown offset).
    #[error("sanitized CPU memory: {0}")]
    Buddy(#[from] BuddyError),
    /// A free of an address the arena did not hand out.
    #[error("sanitized CPU memory: {address:#x} is not the start of a live buffer")]
    NotAllocated {
        /// The address given.
        address: u64,
    },
}

/// `bytes` of fresh, lazily committed, zeroed memory.
fn map_zeroed(bytes: u64) -> Result<*mut u8, ArenaError> {
    let len = usize::try_from(bytes).map_err(|_| ArenaError::Reserve {
        bytes,
        reason: "larger than the address space".into(),
    })?;
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(ArenaError::Reserve {
            bytes,
            reason: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(p.cast())
}

impl Arena {
    /// Reserves an arena for `capacity` bytes of user memory, handed out
    /// in blocks of at least `min_block` bytes (both powers of two).
    pub(crate) fn new(capacity: u64, min_block: u64) -> Result<Self, ArenaError> {
        let buddy = BuddyTree::new(capacity, min_block)?;
        let mapped = capacity + 2 * (capacity / WORD_BYTES * CELL_BYTES);
        Ok(Arena {
            base: map_zeroed(mapped)?,
            capacity,
            mapped,
            buddy: Mutex::new(buddy),
            live: RwLock::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    /// Address of user byte 0 (the engine's real base).
    pub(crate) fn real_base(&self) -> u64 {
        self.base as u64
    }

    /// Shadow words (4-byte words of user memory) the arena covers.
    pub(crate) fn words(&self) -> u64 {
        self.capacity / WORD_BYTES
    }

    /// The shadow cell of word `word` (counted from the real base).
    #[inline(always)]
    pub(crate) fn shadow_cell(&self, word: u64) -> Option<&AtomicU64> {
        if word >= self.words() {
            return None;
        }
        // SAFETY: the shadow region starts at `base + capacity` and holds
        // `words()` cells of 8 bytes (8-aligned: the mapping is page
        // aligned and the capacity a power of two); `word` is in range.
        // The cells live as long as the arena and are only used atomically.
        Some(unsafe {
            &*(self.base.add(self.capacity as usize) as *const AtomicU64).add(word as usize)
        })
    }

    /// The site cell of word `word` (counted from the real base).
    #[inline(always)]
    pub(crate) fn site_cell(&self, word: u64) -> Option<&AtomicU64> {
        if word >= self.words() {
            return None;
        }
        let plane = self.capacity + self.words() * CELL_BYTES;
        // SAFETY: the site plane starts after the shadow and holds
        // `words()` 8-byte cells (8-aligned, as the shadow); `word` is in
        // range. They live as long as the arena and are only used
        // atomically.
        Some(unsafe { &*(self.base.add(plane as usize) as *const AtomicU64).add(word as usize) })
    }

    /// Hands out `size` bytes (at least one); the memory reads as zero the
    /// first time and its shadow is empty.
    pub(crate) fn alloc(&self, size: u64) -> Result<Allocation, ArenaError> {
        let block = self
            .buddy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .alloc(size.max(1))?;
        let a = Allocation {
            id: self.next_id.fetch_add(1, MemOrder::Relaxed),
            address: self.real_base() + block.offset,
            size,
        };
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(a.address, a.clone());
        Ok(a)
    }

    /// The words (from the real base) of the block holding the live
    /// buffer that starts at `address`: the shadow its free clears.
    pub(crate) fn block_words(&self, address: u64) -> Option<std::ops::Range<u64>> {
        if !self
            .live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&address)
        {
            return None;
        }
        let block = self
            .buddy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lookup(address - self.real_base())?;
        Some(block.offset / WORD_BYTES..block.end() / WORD_BYTES)
    }

    /// Frees the buffer starting at `address`: its data, shadow and sites
    /// read as zero afterwards.
    pub(crate) fn free(&self, address: u64) -> Result<(), ArenaError> {
        if self
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&address)
            .is_none()
        {
            return Err(ArenaError::NotAllocated { address });
        }
        let offset = address - self.real_base();
        let block = self
            .buddy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .free(offset)?;
        self.discard(block.offset, block.size);
        for plane in [self.capacity, self.capacity + self.words() * CELL_BYTES] {
            self.discard(
                plane + block.offset / WORD_BYTES * CELL_BYTES,
                block.size / WORD_BYTES * CELL_BYTES,
            );
        }
        Ok(())
    }

    /// Zeroes `len` bytes at mapping offset `at` (see [`discard`]).
    fn discard(&self, at: u64, len: u64) {
        // SAFETY: `[at, at + len)` lies inside the mapping, which no thread
        // uses while its buffer is being freed.
        unsafe { discard(self.base, at, len) }
    }

    /// The live allocation containing `address`, if any.
    pub(crate) fn allocation_of(&self, address: u64) -> Option<Allocation> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        let (_, a) = live.range(..=address).next_back()?;
        (address < a.address + a.size.max(1)).then(|| a.clone())
    }

    /// Live buffers.
    pub(crate) fn live_count(&self) -> usize {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Zeroes `len` bytes at offset `at` of the private anonymous mapping at
/// `base`: whole pages go back to the OS (they read as zero again), the
/// partial pages at the ends are filled with zeros.
///
/// # Safety
/// `[base + at, base + at + len)` lies inside such a mapping and nothing
/// else uses it meanwhile.
unsafe fn discard(base: *mut u8, at: u64, len: u64) {
    const PAGE: u64 = 4096;
    let end = at + len;
    let (lo, hi) = (at.next_multiple_of(PAGE), end / PAGE * PAGE);
    let zero = |from: u64, to: u64| {
        if to > from {
            // SAFETY: inside the range the caller vouches for.
            unsafe { std::ptr::write_bytes(base.add(from as usize), 0, (to - from) as usize) }
        }
    };
    if hi > lo {
        zero(at, lo);
        // SAFETY: a page-aligned range inside the caller's private
        // anonymous mapping; MADV_DONTNEED makes it read as zero afterwards.
        let rc = unsafe {
            libc::madvise(
                base.add(lo as usize).cast(),
                (hi - lo) as usize,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            zero(lo, hi);
        }
        zero(hi, end);
    } else {
        zero(at, end);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; nothing refers
        // to it any more (the arena is being dropped).
        unsafe { libc::munmap(self.base.cast(), self.mapped as usize) };
    }
}

/// An atomic type whose all-zero bytes are a valid value (zero).
pub(crate) trait ZeroValid: Sized {}
impl ZeroValid for AtomicU32 {}
impl ZeroValid for AtomicU64 {}
impl ZeroValid for AtomicUsize {}

/// A zero-filled array of atomics in its own lazily committed mapping
/// (the engine's tables: large, mostly untouched).
pub(crate) struct Zeroed<T: ZeroValid> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the elements are atomics, only accessed through `&T`.
unsafe impl<T: ZeroValid + Sync> Send for Zeroed<T> {}
// SAFETY: as above.
unsafe impl<T: ZeroValid + Sync> Sync for Zeroed<T> {}

impl<T: ZeroValid> Zeroed<T> {
    /// `len` zeroed elements.
    pub(crate) fn new(len: usize) -> Result<Self, ArenaError> {
        let bytes = (len.max(1) * std::mem::size_of::<T>()) as u64;
        Ok(Zeroed {
            ptr: map_zeroed(bytes)?.cast(),
            len,
        })
    }

    fn bytes(&self) -> usize {
        self.len.max(1) * std::mem::size_of::<T>()
    }
}

impl<T: ZeroValid> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` zero-initialised elements (valid: `ZeroValid`),
        // page aligned, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: ZeroValid> Drop for Zeroed<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, no longer referenced.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_resets_memory_and_shadow() {
        let a = Arena::new(1 << 24, 1 << 16).unwrap();
        let b = a.alloc(100).unwrap();
        assert_eq!(b.address % (1 << 16), 0);
        let word = (b.address - a.real_base()) / 4;
        a.shadow_cell(word).unwrap().store(7, MemOrder::Relaxed);
        a.site_cell(word).unwrap().store(8, MemOrder::Relaxed);
        assert_eq!(a.allocation_of(b.address + 99).map(|x| x.id), Some(b.id));
        assert_eq!(a.allocation_of(b.address + 100), None);
        assert_eq!(a.block_words(b.address), Some(word..word + (1 << 14)));
        a.free(b.address).unwrap();
        assert!(a.free(b.address).is_err());
        let c = a.alloc(100).unwrap();
        assert_eq!(c.address, b.address);
        assert_eq!(a.shadow_cell(word).unwrap().load(MemOrder::Relaxed), 0);
        assert_eq!(a.site_cell(word).unwrap().load(MemOrder::Relaxed), 0);
        assert_eq!(a.live_count(), 1);
    }

    #[test]
    fn large_free_discards_whole_pages() {
        let a = Arena::new(1 << 26, 1 << 16).unwrap();
        let b = a.alloc(1 << 20).unwrap();
        let last = (b.address - a.real_base()) / 4 + (1 << 18) - 1;
        a.shadow_cell(last).unwrap().store(9, MemOrder::Relaxed);
        a.free(b.address).unwrap();
        assert_eq!(a.shadow_cell(last).unwrap().load(MemOrder::Relaxed), 0);
        assert!(a.shadow_cell(a.words()).is_none());
    }

    #[test]
    fn zeroed_tables_start_at_zero() {
        let t = Zeroed::<AtomicU64>::new(1 << 12).unwrap();
        assert!(t.iter().all(|w| w.load(MemOrder::Relaxed) == 0));
        t[(1 << 12) - 1].store(4, MemOrder::Relaxed);
        assert_eq!(t[(1 << 12) - 1].load(MemOrder::Relaxed), 4);
    }
}
