//! The sanitized CPU device's memory: one virtual reservation holding the
//! user buffers, their shadow cells and the prior-access side table, so that
//! finding a word's shadow is pointer arithmetic, as on the GPU
//! (docs/src/design/address-space.md).
//!
//! ```text
//! base                      base + cap            base + 3 cap           base + 11 cap          base + 19 cap
//! | user memory (cap bytes) | shadow (8 B / word) | side plane 0 (32 B / w) | side plane 1 (32 B / w) |
//! ```
//!
//! The whole range is one `mmap(PROT_READ | PROT_WRITE, MAP_PRIVATE |
//! MAP_ANONYMOUS | MAP_NORESERVE)`: nothing is committed until touched,
//! untouched pages read as zero (the empty shadow state). Buffers are handed
//! out by the pure [`BuddyTree`] of the VMM allocator; freeing one gives
//! its pages back (`madvise(MADV_DONTNEED)`, which makes them read as zero
//! again), so a new buffer never inherits a freed one's shadow or side
//! table entries.

use crate::buddy_allocator::{BuddyError, BuddyTree};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering as MemOrder};
use std::sync::{Mutex, PoisonError, RwLock};
use vigil_shared::abi::{COMPACT_SHADOW_BYTES_PER_WORD, WORD_BYTES};

/// Accesses of each kind (write, read) the side table keeps per word: the
/// last ones of distinct clock slots, so a race with the second-last
/// accessor (the other block of a stencil, whose read the racing block's
/// own read followed) still finds its entry. Entry `k` of every word lives
/// in *plane* `k`, so words touched by one clock slot only (the common
/// case) touch plane 0 only.
pub(crate) const SIDE_ENTRIES: usize = 2;

/// Side-table bytes per 4-byte word and plane: the write's and the read's
/// [`SideEntry`], 16 bytes each.
const SIDE_PLANE_BYTES_PER_WORD: u64 = 32;
/// Looks [`Arena::read_side`] takes at an entry a note keeps changing.
const SIDE_READ_TRIES: u32 = 1024;

/// Side-table bytes per 4-byte word, all planes.
pub(crate) const SIDE_BYTES_PER_WORD: u64 = SIDE_ENTRIES as u64 * SIDE_PLANE_BYTES_PER_WORD;

/// Where an access came from, as the side table keeps it: the
/// `&'static Location` of the access (as a pointer) and who made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SideEntry {
    /// `&'static Location<'static>` as an address (0: none recorded; below
    /// 2^48, user-space addresses).
    pub loc: u64,
    /// The (virtual) SM, i.e. CPU worker, that ran the access (below 2^16).
    pub smid: u16,
    /// Linear block index (wrapping at 2^32).
    pub block: u32,
    /// Linear thread index in the block (below 1,024).
    pub thread: u16,
    /// Sanitizer thread (clock slot) of the access (below 2,048).
    pub tid: u16,
    /// The launch, as an index into the sanitizer's launch history (below 2,048).
    pub launch: u16,
}

impl SideEntry {
    /// The location word: the location's address and the SM above it.
    #[inline(always)]
    fn pack_loc(&self) -> u64 {
        self.loc & LOC_MASK | u64::from(self.smid) << 48
    }

    #[inline(always)]
    fn pack(&self) -> u64 {
        u64::from(self.block)
            | u64::from(self.thread & 0x3ff) << 32
            | u64::from(self.tid & 0x7ff) << 42
            | u64::from(self.launch & 0x7ff) << 53
    }

    #[inline(always)]
    fn unpack(loc: u64, meta: u64) -> Self {
        SideEntry {
            loc: loc & LOC_MASK,
            smid: (loc >> 48) as u16,
            block: meta as u32,
            thread: (meta >> 32) as u16 & 0x3ff,
            tid: (meta >> 42) as u16 & 0x7ff,
            launch: (meta >> 53) as u16 & 0x7ff,
        }
    }
}

/// Bits of a location word holding the location's address.
const LOC_MASK: u64 = (1 << 48) - 1;

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

/// The reservation: user memory, shadow and side table. See the module docs.
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
// threads share in it is accessed through atomics (shadow cells, side
// table) or handed to one owner (user buffers); the bookkeeping is behind
// locks.
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

impl Arena {
    /// Reserves an arena for `capacity` bytes of user memory, handed out
    /// in blocks of at least `min_block` bytes (both powers of two).
    pub(crate) fn new(capacity: u64, min_block: u64) -> Result<Self, ArenaError> {
        let buddy = BuddyTree::new(capacity, min_block)?;
        let mapped = capacity
            + capacity / WORD_BYTES * COMPACT_SHADOW_BYTES_PER_WORD
            + capacity / WORD_BYTES * SIDE_BYTES_PER_WORD;
        let len = usize::try_from(mapped).map_err(|_| ArenaError::Reserve {
            bytes: mapped,
            reason: "larger than the address space".into(),
        })?;
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choosing; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ArenaError::Reserve {
                bytes: mapped,
                reason: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(Arena {
            base: p.cast(),
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

    /// The side-table entry `plane` of `word`'s writes (or reads):
    /// `[location, meta]`.
    #[inline(always)]
    fn side(&self, word: u64, plane: usize, write: bool) -> Option<&[AtomicU64; 2]> {
        if word >= self.words() {
            return None;
        }
        let start = self.capacity
            + self.capacity / WORD_BYTES * COMPACT_SHADOW_BYTES_PER_WORD
            + plane as u64 * self.words() * SIDE_PLANE_BYTES_PER_WORD
            + word * SIDE_PLANE_BYTES_PER_WORD
            + if write { 0 } else { 16 };
        // SAFETY: plane `plane` (< SIDE_ENTRIES) of the side region starts
        // after the shadow and holds `words()` pairs of 16-byte entries,
        // 8-aligned; `word` is in range; only atomics touch it.
        Some(unsafe { &*(self.base.add(start as usize) as *const [AtomicU64; 2]) })
    }

    /// Records `entry` as the newest write (or read) of `word`: it replaces
    /// the newest entry when that one is of the same clock slot, else the
    /// newest moves down a plane and the oldest goes. The newest entry's
    /// location is cleared while its block and thread change and stored
    /// last, so [`Arena::last_access`] never pairs one access's location
    /// with another's block and thread (on a 16-core machine a report
    /// named a kernel write's block with a memset's line); the lower
    /// planes stay best effort.
    #[inline(always)]
    pub(crate) fn note_access(&self, word: u64, write: bool, entry: SideEntry) {
        let Some(newest) = self.side(word, 0, write) else {
            return;
        };
        // Swaps, not loads then stores: a load of a page never touched
        // maps the zero page and the store faults it again.
        let old_loc = newest[0].swap(0, MemOrder::Relaxed);
        let old_meta = newest[1].swap(entry.pack(), MemOrder::Release);
        newest[0].store(entry.pack_loc(), MemOrder::Release);
        // Keep the replaced entry in the next plane only when it is another
        // slot's of the same launch (two blocks racing): an empty entry, one
        // of this slot or of an earlier launch just goes, so words each
        // launch touches from one block never touch plane 1.
        let old = SideEntry::unpack(old_loc, old_meta);
        if old_loc != 0 && old.tid != entry.tid && old.launch == entry.launch {
            for k in (2..SIDE_ENTRIES).rev() {
                if let (Some(to), Some(from)) =
                    (self.side(word, k, write), self.side(word, k - 1, write))
                {
                    to[0].store(from[0].load(MemOrder::Relaxed), MemOrder::Relaxed);
                    to[1].store(from[1].load(MemOrder::Relaxed), MemOrder::Relaxed);
                }
            }
            if let Some(next) = self.side(word, 1, write) {
                next[0].store(old_loc, MemOrder::Relaxed);
                next[1].store(old_meta, MemOrder::Relaxed);
            }
        }
    }

    /// The newest write (or read) recorded for `word` by clock slot `tid`,
    /// or else the newest one of any slot.
    pub(crate) fn last_access(&self, word: u64, write: bool, tid: u32) -> Option<SideEntry> {
        let mut newest = None;
        for k in 0..SIDE_ENTRIES {
            let s = self.side(word, k, write)?;
            let Some((loc, meta)) = Self::read_side(s) else {
                continue;
            };
            let e = SideEntry::unpack(loc, meta);
            if u32::from(e.tid) == tid {
                return Some(e);
            }
            newest = newest.or(Some(e));
        }
        newest
    }

    /// An entry's location and meta as one note left them, `None` when it
    /// is empty (or still being noted after many looks: a reader then
    /// reports without it rather than wait on a descheduled writer).
    #[inline(always)]
    fn read_side(s: &[AtomicU64; 2]) -> Option<(u64, u64)> {
        for _ in 0..SIDE_READ_TRIES {
            let loc = s[0].load(MemOrder::Acquire);
            if loc == 0 {
                return None;
            }
            let meta = s[1].load(MemOrder::Acquire);
            if s[0].load(MemOrder::Acquire) == loc {
                return Some((loc, meta));
            }
            std::hint::spin_loop();
        }
        None
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

    /// Frees the buffer starting at `address`: its data, shadow and side
    /// table entries read as zero afterwards.
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
        let words = |bytes: u64| bytes / WORD_BYTES;
        let shadow0 = self.capacity;
        let side0 = shadow0 + words(self.capacity) * COMPACT_SHADOW_BYTES_PER_WORD;
        self.discard(block.offset, block.size);
        self.discard(
            shadow0 + words(block.offset) * COMPACT_SHADOW_BYTES_PER_WORD,
            words(block.size) * COMPACT_SHADOW_BYTES_PER_WORD,
        );
        for plane in 0..SIDE_ENTRIES as u64 {
            self.discard(
                side0
                    + plane * words(self.capacity) * SIDE_PLANE_BYTES_PER_WORD
                    + words(block.offset) * SIDE_PLANE_BYTES_PER_WORD,
                words(block.size) * SIDE_PLANE_BYTES_PER_WORD,
            );
        }
        Ok(())
    }

    /// Zeroes `len` bytes at mapping offset `at`: whole pages go back to
    /// the OS (they read as zero again), the partial pages at the ends are
    /// filled with zeros.
    fn discard(&self, at: u64, len: u64) {
        const PAGE: u64 = 4096;
        let end = at + len;
        let (lo, hi) = (at.next_multiple_of(PAGE), end / PAGE * PAGE);
        let zero = |from: u64, to: u64| {
            if to > from {
                // SAFETY: `[from, to)` lies inside the mapping, which no
                // thread uses while its buffer is being freed.
                unsafe {
                    std::ptr::write_bytes(self.base.add(from as usize), 0, (to - from) as usize)
                }
            }
        };
        if hi > lo {
            zero(at, lo);
            // SAFETY: a page-aligned range inside our private anonymous
            // mapping; MADV_DONTNEED makes it read as zero afterwards.
            let rc = unsafe {
                libc::madvise(
                    self.base.add(lo as usize).cast(),
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

/// A zero-filled array of atomic words in its own lazily committed
/// mapping (for the inflated-record pool: large, mostly untouched).
pub(crate) struct ZeroedWords {
    ptr: *mut AtomicU32,
    len: usize,
}

// SAFETY: the words are only accessed through atomics.
unsafe impl Send for ZeroedWords {}
// SAFETY: as above.
unsafe impl Sync for ZeroedWords {}

impl ZeroedWords {
    /// `len` zeroed words.
    pub(crate) fn new(len: usize) -> Result<Self, ArenaError> {
        let bytes = len.max(1) * 4;
        // SAFETY: a fresh anonymous private mapping; nothing else is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ArenaError::Reserve {
                bytes: bytes as u64,
                reason: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(ZeroedWords { ptr: p.cast(), len })
    }
}

impl std::ops::Deref for ZeroedWords {
    type Target = [AtomicU32];
    fn deref(&self) -> &[AtomicU32] {
        // SAFETY: `len` zero-initialised (valid) atomics, page aligned,
        // alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for ZeroedWords {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, no longer referenced.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1) * 4) };
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; nothing refers
        // to it any more (the arena is being dropped).
        unsafe { libc::munmap(self.base.cast(), self.mapped as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_resets_shadow_and_side_table() {
        let a = Arena::new(1 << 24, 1 << 16).unwrap();
        let b = a.alloc(100).unwrap();
        assert_eq!(b.address % (1 << 16), 0);
        let word = (b.address - a.real_base()) / 4;
        a.shadow_cell(word).unwrap().store(7, MemOrder::Relaxed);
        let e = SideEntry {
            loc: 0x1234,
            smid: 7,
            block: 3,
            thread: 1023,
            tid: 2047,
            launch: 2047,
        };
        a.note_access(word, true, e);
        assert_eq!(a.last_access(word, true, 2047), Some(e));
        assert_eq!(a.last_access(word, false, 2047), None);
        // A read by slot 1, then by slot 2, then slot 2 again: slot 1's
        // entry is still there.
        for (tid, block) in [(1, 10), (2, 20), (2, 21)] {
            a.note_access(word, false, SideEntry { tid, block, ..e });
        }
        assert_eq!(a.last_access(word, false, 1).map(|e| e.block), Some(10));
        assert_eq!(a.last_access(word, false, 2).map(|e| e.block), Some(21));
        assert_eq!(a.last_access(word, false, 5).map(|e| e.block), Some(21));
        assert_eq!(a.allocation_of(b.address + 99).map(|x| x.id), Some(b.id));
        assert_eq!(a.allocation_of(b.address + 100), None);
        a.free(b.address).unwrap();
        assert!(a.free(b.address).is_err());
        let c = a.alloc(100).unwrap();
        assert_eq!(c.address, b.address);
        assert_eq!(a.shadow_cell(word).unwrap().load(MemOrder::Relaxed), 0);
        assert_eq!(a.last_access(word, true, 2047), None);
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
}
