//! [`DeviceAtomics`]: the engine's atomics on one GPU's memory, at device
//! scope.
//!
//! `core`'s atomics on nvptx are system-scoped: a relaxed load is an
//! `ld.relaxed.sys`, an acquire one invalidates the whole L1 and a release
//! store is a `MEMBAR.SYS` (which waits for the host's view too). The
//! sanitizer's shadow, pool and thread states are one device's memory,
//! touched only by that device's threads (a multi-GPU launch is refused),
//! so the engine's hooks run on `.gpu`-scoped PTX atomics instead, through
//! the platform layer's scoped atomics (`arch`). Device and system scope
//! both include every thread of the device, so these operations and
//! `core`'s on the same words (the CTA entry and exit's clock work) are
//! morally strong with each other: mixing them is sound.
//!
//! [`EngineAtomics`] is the one switch: a runtime that shares its shadow
//! between GPUs would set it to [`GpuAtomics`](super::memory::GpuAtomics).

use core::cell::UnsafeCell;
use core::sync::atomic::Ordering as MemOrder;

use vigil_shared::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops};
use vigil_shared::{Ordering, Scope};

use crate::arch::imp as arch;
use crate::atomic::sealed::{ArchAdd, ArchAnd, ArchAtomic, ArchMax, ArchOr};

/// The atomics the hooks' engine runs on (see the module docs).
pub type EngineAtomics = DeviceAtomics;

/// Device-scoped atomics (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAtomics;

/// A 32-bit word accessed with device-scoped atomics; the layout of a `u32`.
#[repr(transparent)]
#[derive(Debug, Default)]
pub struct DeviceU32(UnsafeCell<u32>);

/// A 64-bit word accessed with device-scoped atomics; the layout of a `u64`
/// (8-aligned: every 64-bit word of the runtime is).
#[repr(C, align(8))]
#[derive(Debug, Default)]
pub struct DeviceU64(UnsafeCell<u64>);

const _: () = assert!(core::mem::size_of::<DeviceU32>() == 4);
const _: () = assert!(core::mem::align_of::<DeviceU32>() == 4);
const _: () = assert!(core::mem::size_of::<DeviceU64>() == 8);
const _: () = assert!(core::mem::align_of::<DeviceU64>() == 8);

// SAFETY: every access goes through an atomic instruction.
unsafe impl Sync for DeviceU32 {}
// SAFETY: as above.
unsafe impl Sync for DeviceU64 {}

impl DeviceU32 {
    /// A word holding `v`.
    pub const fn new(v: u32) -> Self {
        DeviceU32(UnsafeCell::new(v))
    }
}

impl DeviceU64 {
    /// A word holding `v`.
    pub const fn new(v: u64) -> Self {
        DeviceU64(UnsafeCell::new(v))
    }
}

/// The platform layer's name of `core`'s ordering (an RMW's or a load's;
/// `SeqCst` is acquire-release, as the PTX atomics take it).
#[inline(always)]
fn order(o: MemOrder) -> Ordering {
    match o {
        MemOrder::Relaxed => Ordering::Relaxed,
        MemOrder::Acquire => Ordering::Acquire,
        MemOrder::Release => Ordering::Release,
        _ => Ordering::AcqRel,
    }
}

macro_rules! device_word {
    ($word:ty, $t:ty) => {
        impl $word {
            #[inline(always)]
            fn ptr(&self) -> *mut $t {
                self.0.get()
            }

            #[inline(always)]
            fn cas(&self, current: $t, new: $t, success: MemOrder) -> Result<$t, $t> {
                // SAFETY: `self` is a live, aligned word; all its accesses
                // are atomic.
                let found = unsafe {
                    <$t as ArchAtomic>::arch_cas(
                        self.ptr(),
                        current,
                        new,
                        order(success),
                        Scope::Device,
                    )
                };
                if found == current {
                    Ok(found)
                } else {
                    Err(found)
                }
            }

            #[inline(always)]
            fn get(&self, o: MemOrder) -> $t {
                // SAFETY: as in `cas`.
                unsafe { <$t as ArchAtomic>::arch_load(self.ptr(), order(o), Scope::Device) }
            }

            #[inline(always)]
            fn set(&self, v: $t, o: MemOrder) {
                // SAFETY: as in `cas`.
                unsafe { <$t as ArchAtomic>::arch_store(self.ptr(), v, order(o), Scope::Device) }
            }
        }
    };
}
device_word!(DeviceU32, u32);
device_word!(DeviceU64, u64);

/// The load, store and compare-exchange both words' trait impls share.
macro_rules! word_ops {
    ($v:ty) => {
        #[inline(always)]
        fn load(&self, order: MemOrder) -> $v {
            self.get(order)
        }
        #[inline(always)]
        fn store(&self, value: $v, order: MemOrder) {
            self.set(value, order)
        }
        #[inline(always)]
        fn compare_exchange(
            &self,
            current: $v,
            new: $v,
            success: MemOrder,
            _failure: MemOrder,
        ) -> Result<$v, $v> {
            self.cas(current, new, success)
        }
    };
}

impl AtomicU32Ops for DeviceU32 {
    word_ops!(u32);
    #[inline(always)]
    fn fetch_add(&self, value: u32, o: MemOrder) -> u32 {
        // SAFETY: as in `cas`.
        unsafe { <u32 as ArchAdd>::arch_add(self.ptr(), value, order(o), Scope::Device) }
    }
    #[inline(always)]
    fn fetch_sub(&self, value: u32, o: MemOrder) -> u32 {
        self.fetch_add(value.wrapping_neg(), o)
    }
    #[inline(always)]
    fn fetch_max(&self, value: u32, o: MemOrder) -> u32 {
        // SAFETY: as in `cas`.
        unsafe { <u32 as ArchMax>::arch_max(self.ptr(), value, order(o), Scope::Device) }
    }
}

impl AtomicU64Ops for DeviceU64 {
    word_ops!(u64);
    #[inline(always)]
    fn fetch_add(&self, value: u64, o: MemOrder) -> u64 {
        // SAFETY: as in `cas`.
        unsafe { <u64 as ArchAdd>::arch_add(self.ptr(), value, order(o), Scope::Device) }
    }
    #[inline(always)]
    fn fetch_or(&self, value: u64, o: MemOrder) -> u64 {
        // SAFETY: as in `cas`.
        unsafe { <u64 as ArchOr>::arch_or(self.ptr(), value, order(o), Scope::Device) }
    }
    #[inline(always)]
    fn fetch_and(&self, value: u64, o: MemOrder) -> u64 {
        // SAFETY: as in `cas`.
        unsafe { <u64 as ArchAnd>::arch_and(self.ptr(), value, order(o), Scope::Device) }
    }
}

impl AtomicFamily for DeviceAtomics {
    type U32 = DeviceU32;
    type U64 = DeviceU64;
    #[inline(always)]
    fn fence(o: MemOrder) {
        arch::fence(order(o), Scope::Device)
    }
    #[inline(always)]
    fn spin() {
        arch::backoff()
    }
    #[inline(always)]
    unsafe fn load_pair_relaxed(first: *const DeviceU64) -> [u64; 2] {
        // SAFETY: forwarded from the caller; `DeviceU64` is an 8-aligned
        // `u64` cell.
        unsafe { arch::load_relaxed_pair(first as *const u64) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::atomic::SpinLock;

    #[test]
    fn a_paired_load_reads_both_cells_as_they_are() {
        #[repr(C, align(16))]
        struct Pair([DeviceU64; 2]);
        let p = Pair([DeviceU64::new(7), DeviceU64::new(9)]);
        p.0[1].store(11, MemOrder::Relaxed);
        // SAFETY: two consecutive live cells, the first 16-aligned.
        let [a, b] = unsafe { DeviceAtomics::load_pair_relaxed(p.0.as_ptr()) };
        assert_eq!([a, b], [7, 11]);
        // The default of the trait (what the CPU backend runs) agrees.
        let q = Pair([DeviceU64::new(3), DeviceU64::new(4)]);
        #[repr(C, align(16))]
        struct CorePair([core::sync::atomic::AtomicU64; 2]);
        let cells = CorePair([3.into(), 4.into()]);
        // SAFETY: as above; two consecutive `core` atomics.
        let core_pair = unsafe {
            <vigil_shared::atomic::CoreAtomics as AtomicFamily>::load_pair_relaxed(cells.0.as_ptr())
        };
        // SAFETY: as above.
        let device_pair = unsafe { DeviceAtomics::load_pair_relaxed(q.0.as_ptr()) };
        assert_eq!(core_pair, device_pair);
    }

    #[test]
    fn words_behave_as_atomics() {
        let w = DeviceU32::new(5);
        assert_eq!(w.fetch_add(3, MemOrder::Relaxed), 5);
        assert_eq!(w.fetch_sub(2, MemOrder::Release), 8);
        assert_eq!(w.fetch_max(4, MemOrder::Relaxed), 6);
        assert_eq!(w.fetch_max(9, MemOrder::Relaxed), 6);
        assert_eq!(
            w.compare_exchange(1, 2, MemOrder::Acquire, MemOrder::Relaxed),
            Err(9)
        );
        assert_eq!(
            w.compare_exchange(9, 2, MemOrder::Acquire, MemOrder::Relaxed),
            Ok(9)
        );
        assert_eq!(w.load(MemOrder::Acquire), 2);
        w.store(0, MemOrder::Release);
        SpinLock::lock::<DeviceAtomics>(&w);
        assert_eq!(w.load(MemOrder::Relaxed), 1);
        SpinLock::unlock::<DeviceAtomics>(&w);
        assert_eq!(w.load(MemOrder::Relaxed), 0);
        let d = DeviceU64::new(u64::MAX - 1);
        assert_eq!(
            d.compare_exchange(u64::MAX - 1, 7, MemOrder::AcqRel, MemOrder::Relaxed),
            Ok(u64::MAX - 1)
        );
        d.store(1 << 40, MemOrder::Release);
        assert_eq!(d.load(MemOrder::Relaxed), 1 << 40);
    }

    #[test]
    fn the_engine_on_device_atomics_finds_races_and_order() {
        // Two CTAs of one launch on the device's atomics: unordered writes
        // of one word race; a write and a read of other words by one CTA
        // do not.
        use vigil_shared::race::cta::{CtaView, LaneDevices};
        use vigil_shared::race::knowledge::Arena;
        use vigil_shared::race::record::{Pool, RECORD_WORDS};
        use vigil_shared::race::serial::{lane_start, HostOrder, LaneBounds};
        use vigil_shared::race::{access, SiteWord, SliceMemory};
        let words32 = |n: usize| (0..n).map(|_| DeviceU32::new(0)).collect::<Vec<_>>();
        let words64 = |n: usize| (0..n).map(|_| DeviceU64::new(0)).collect::<Vec<_>>();
        let (shadow, pool, arena) = (words64(64), words64(9 * RECORD_WORDS), words32(1024));
        Pool::<DeviceAtomics>::init(&pool);
        Arena::<DeviceAtomics>::init(&arena, 1);
        let mem = SliceMemory::<DeviceAtomics> {
            shadow: &shadow,
            pool: &pool,
            arena: &arena,
            exits: &[],
            sites: &[],
            launches: &[],
            sc: &[],
        };
        let (bounds, devices) = (LaneBounds::NONE, LaneDevices::default());
        let base = lane_start(1);
        let cta = |serial| CtaView {
            serial,
            epoch: 1,
            device: 0,
            host: HostOrder::new(base, 2, &bounds),
            global: &bounds,
            devices: &devices,
            known: vigil_shared::race::knowledge::SnapRef::NONE,
            launch: 0,
            own: Default::default(),
        };
        let run = |serial, word, write| {
            let mut bounded = false;
            access(
                &mem,
                &cta(serial),
                word,
                0,
                4,
                write,
                false,
                SiteWord::NONE,
                &mut bounded,
            )
        };
        assert!(run(base, 2, true).is_none());
        assert!(run(base, 3, false).is_none());
        assert!(run(base, 2, true).is_none());
        assert!(run(base + 1, 2, true).is_some());
        assert!(run(base + 1, 3, false).is_none());
    }
}
