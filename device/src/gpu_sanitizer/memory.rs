//! The race engine's memory on the GPU: [`RaceMemory`] over the device
//! addresses a [`GpuRuntime`] names. Pure address arithmetic (no
//! intrinsics), so the host build tests it over ordinary memory.

use core::marker::PhantomData;

use vigil_shared::address::{is_managed, REAL_CAPACITY, REAL_OFFSET};
use vigil_shared::atomic::AtomicFamily;
use vigil_shared::gpu::GpuRuntime;
use vigil_shared::race::cta::LaneDevices;
use vigil_shared::race::line::LINE_WORDS;
use vigil_shared::race::memory::{HeaderCells, RaceMemory, U32Of, U64Of};

use super::device_atomics::DeviceAtomics;

/// An atomic family whose words are plain `u32`s and `u64`s in memory, so
/// that the runtime's device memory can be viewed as them.
///
/// # Safety
/// `U32` and `U64` must have the size and alignment of `u32` and `u64`
/// and access their value only atomically.
pub unsafe trait WordAtomics: AtomicFamily {}

// SAFETY: `DeviceU32`/`DeviceU64` are transparent `u32`/8-aligned `u64`
// cells accessed only through atomics (checked at compile time there).
unsafe impl WordAtomics for DeviceAtomics {}
// SAFETY: `core`'s atomics have their integer's size and alignment (on
// nvptx64 and the 64-bit hosts the crate builds for).
unsafe impl WordAtomics for vigil_shared::atomic::CoreAtomics {}

/// A device's sanitizer memory, read from its [`GpuRuntime`], whose words
/// the engine accesses with the atomics `F`.
pub struct GpuMemory<'r, F = DeviceAtomics> {
    runtime: &'r GpuRuntime,
    /// The runtime's `real_base`, kept apart so that a CTA that keeps it
    /// ([`GpuMemory::with_real_base`]) finds a shadow cell with no load
    /// of the runtime.
    real_base: u64,
    atomics: PhantomData<F>,
}

/// `len` words of type `T` at device address `addr` (empty for 0).
///
/// # Safety
/// The range must be live memory of `T`s for `'r`.
#[inline(always)]
unsafe fn slice<'r, T>(addr: u64, len: u64) -> &'r [T] {
    if addr == 0 || len == 0 {
        return &[];
    }
    // SAFETY: forwarded from the caller.
    unsafe { core::slice::from_raw_parts(addr as *const T, len as usize) }
}

impl<'r, F: WordAtomics> GpuMemory<'r, F> {
    /// The memory a runtime describes.
    ///
    /// # Safety
    /// `runtime` and every address in it must be valid device memory laid
    /// out as `vigil_shared::gpu` says, for `'r`.
    #[inline(always)]
    pub unsafe fn new(runtime: &'r GpuRuntime) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe { Self::with_real_base(runtime, runtime.real_base) }
    }

    /// [`GpuMemory::new`] with the runtime's `real_base` as read before.
    ///
    /// # Safety
    /// As [`GpuMemory::new`], and `real_base` must be `runtime.real_base`.
    #[inline(always)]
    pub unsafe fn with_real_base(runtime: &'r GpuRuntime, real_base: u64) -> Self {
        GpuMemory {
            runtime,
            real_base,
            atomics: PhantomData,
        }
    }

    /// The runtime.
    #[inline(always)]
    pub fn runtime(&self) -> &'r GpuRuntime {
        self.runtime
    }

    /// True for an address of the reservation's user half: every other
    /// address (local, shared, another allocator's) is skipped.
    #[inline(always)]
    pub fn manages(&self, addr: u64) -> bool {
        is_managed(addr, self.real_base.wrapping_sub(REAL_OFFSET))
    }

    /// The index of the word holding managed address `addr`.
    #[inline(always)]
    pub fn word_of(&self, addr: u64) -> u64 {
        (addr - self.real_base) / 4
    }

    /// Which device each lane runs on.
    #[inline(always)]
    pub fn lane_devices(&self) -> &'r LaneDevices {
        // SAFETY: the host writes the table once, 16-aligned, for the
        // runtime's life.
        unsafe { &*(self.runtime.lane_devices as *const LaneDevices) }
    }
}

impl<F: WordAtomics> RaceMemory for GpuMemory<'_, F> {
    type Atomics = F;

    #[inline(always)]
    fn cell(&self, word: u64) -> Option<&F::U64> {
        if word >= REAL_CAPACITY / 4 {
            return None;
        }
        let reserve = self.real_base.wrapping_sub(REAL_OFFSET);
        // SAFETY: the shadow half maps one 8-byte cell per word of every
        // live allocation (the caller only asks for managed words).
        Some(unsafe { &*((reserve + 8 * word) as *const F::U64) })
    }

    /// One check for the line: its cells are consecutive, its first
    /// 256-aligned (the reservation is 16-aligned), and a line inside the
    /// shadow has all of them in it (the capacity is whole lines).
    #[inline(always)]
    fn header_cells(&self, word: u64) -> Option<HeaderCells<'_, F::U64>> {
        const _: () = assert!((REAL_CAPACITY / 4).is_multiple_of(LINE_WORDS));
        let first: *const F::U64 = self.cell(word & !(LINE_WORDS - 1))?;
        // SAFETY: the line's first word is inside the shadow, and so are
        // all its words' cells (above).
        let cells = core::array::from_fn(|i| unsafe { &*first.add(i) });
        Some(HeaderCells {
            cells,
            paired: true,
        })
    }

    #[inline(always)]
    fn pool_words(&self) -> &[U64Of<Self>] {
        // SAFETY: the runtime names a live pool of this many words.
        unsafe { slice(self.runtime.pool, self.runtime.pool_words) }
    }

    #[inline(always)]
    fn arena_words(&self) -> &[U32Of<Self>] {
        // SAFETY: as above.
        unsafe { slice(self.runtime.arena, u64::from(self.runtime.arena_words)) }
    }

    #[inline(always)]
    fn exit_words(&self) -> &[U32Of<Self>] {
        // SAFETY: as above.
        unsafe { slice(self.runtime.exits, u64::from(self.runtime.exit_words)) }
    }

    #[inline(always)]
    fn site_words(&self) -> &[U64Of<Self>] {
        // SAFETY: as above.
        unsafe { slice(self.runtime.sites, u64::from(self.runtime.site_words)) }
    }

    #[inline(always)]
    fn launch_words(&self) -> &[U32Of<Self>] {
        // SAFETY: as above.
        unsafe { slice(self.runtime.launches, u64::from(self.runtime.launch_words)) }
    }

    #[inline(always)]
    fn sc_words(&self) -> &[U32Of<Self>] {
        // SAFETY: as above.
        unsafe { slice(self.runtime.sc, u64::from(self.runtime.sc_words)) }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;
    use vigil_shared::atomic::CoreAtomics;

    #[test]
    fn cells_are_the_shadow_of_their_words() {
        let shadow: Vec<u64> = std::vec![0; 64];
        let real_base = shadow.as_ptr() as u64 + REAL_OFFSET;
        let rt = GpuRuntime {
            real_base,
            ..GpuRuntime::default()
        };
        // SAFETY: only cells 0..64 are touched, inside `shadow`.
        let mem = unsafe { GpuMemory::<CoreAtomics>::new(&rt) };
        let c = mem.cell(5).unwrap() as *const _ as u64;
        assert_eq!(c, shadow.as_ptr() as u64 + 40);
        assert!(mem.manages(real_base) && !mem.manages(real_base - 1));
        assert_eq!(mem.word_of(real_base + 17), 4);
        assert!(mem.pool_words().is_empty() && mem.arena_words().is_empty());
    }

    /// A line's header is the first four cells of its words, found from
    /// any of its words, paired (the layout a paired load needs), and
    /// none past the shadow.
    #[test]
    fn a_lines_header_is_its_first_four_cells_from_any_of_its_words() {
        // Two lines of cells, the first 256-aligned as the reservation's
        // are.
        let backing: Vec<u64> = std::vec![0; 2 * LINE_WORDS as usize + 32];
        let skip = backing.as_ptr().align_offset(256);
        let shadow = &backing[skip..];
        let real_base = shadow.as_ptr() as u64 + REAL_OFFSET;
        let rt = GpuRuntime {
            real_base,
            ..GpuRuntime::default()
        };
        // SAFETY: only the cells of words 0..64 are touched, inside
        // `shadow`.
        let mem = unsafe { GpuMemory::<CoreAtomics>::new(&rt) };
        for word in [0, 1, 31, 32, 45, 63] {
            let h = mem.header_cells(word).unwrap();
            let first = word / LINE_WORDS * LINE_WORDS;
            for (i, c) in h.cells.iter().enumerate() {
                let want: *const _ = mem.cell(first + i as u64).unwrap();
                assert!(core::ptr::eq(*c, want), "word {word}, cell {i}");
            }
            assert!(h.paired);
            assert_eq!(h.cells[0] as *const _ as usize % 16, 0);
        }
        assert!(mem.header_cells(REAL_CAPACITY / 4).is_none());
    }
}
