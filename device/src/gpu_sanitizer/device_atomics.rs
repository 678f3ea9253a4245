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
use crate::atomic::sealed::{ArchAdd, ArchAtomic, ArchMax};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::abi::{thread_state_words, AccessSite, InflatedRecord, PoolHeader};
    use vigil_shared::atomic::SpinLock;
    use vigil_shared::engine::{Engine, EngineConfig, Outcome, SliceMemory};

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
        // Two sanitizer threads on the device's atomics: unordered writes
        // of one word race; a write and a read of other words in one
        // thread do not.
        let cfg = EngineConfig {
            num_sms: 2,
            num_threads: 2,
            clock_buffer_size: 4,
            rng_seed: 1,
            real_base: 0,
            chain_records_per_word: 0,
            spill_snapshots: false,
        };
        let state_words = thread_state_words(2, 4);
        let words32 = |n: usize| (0..n).map(|_| DeviceU32::new(0)).collect::<Vec<_>>();
        let states = words32(2 * state_words);
        let shadow = (0..64).map(|_| DeviceU64::new(0)).collect::<Vec<_>>();
        let pool = words32(PoolHeader::WORDS + 8 * InflatedRecord::WORDS);
        pool[1].store(8, MemOrder::Relaxed);
        let mem = SliceMemory::<DeviceAtomics> {
            thread_states: &states,
            thread_state_words: state_words,
            shadow: &shadow,
            pool: &pool,
            reports: &[],
            sc_fences: &[],
        };
        let engine = Engine::new(&mem, cfg);
        engine.init_thread(0);
        engine.init_thread(1);
        let site = AccessSite::default();
        assert!(matches!(
            engine.access(0, 8, 4, true, &site),
            Outcome::Clean
        ));
        assert!(matches!(
            engine.access(0, 12, 4, false, &site),
            Outcome::Clean
        ));
        assert!(matches!(
            engine.access(0, 8, 4, true, &site),
            Outcome::Clean
        ));
        assert!(engine.access(1, 8, 4, true, &site).is_race());
        assert!(engine.access(1, 12, 4, false, &site) == Outcome::Clean);
    }
}
