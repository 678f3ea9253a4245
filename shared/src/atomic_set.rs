//! Atomic sets: the history of a word that only atomic writes of one class
//! touched, as one epoch per sanitizer thread, so that the many writers of
//! a hot counter or histogram bin record their accesses without its lock.
//!
//! Compatible atomics never race with each other; the history of such a
//! word exists only for later accesses that are not compatible (a plain
//! read of the final count, say). A record would keep every writer's clock
//! in order under the word's lock, and thousands of sanitizer threads
//! hitting one word serialise on it. Once a record fills with at least
//! half atomic writes of one *class* ([`AtomicSetClass`]: byte mask,
//! extent, scope and, for device scope, device), the engine moves those
//! into a set: an array of `num_threads` epochs in the record pool
//! ([`crate::abi::AtomicSetHeader`]), named from the record's `meta`; the
//! record keeps its other clocks (the plain write that zeroed a histogram,
//! say). Entry `t` holds the newest epoch at which thread `t` made such a
//! write, which subsumes its older ones: a later access ordered after the
//! newer write is ordered after the older.
//!
//! The fast path ([`crate::engine::Engine::atomic`]): a non-releasing
//! read-modify-write of the class, by a thread with no release fence
//! pending, on a word with a set, no chain and no release heads
//! ([`crate::abi::InflatedRecord::SET_FAST_PATH`]: nothing to continue or
//! end), checks itself against the record's other clocks (at most 8; it
//! cannot race with the set's) and, if it races with none, raises its own
//! entry with one `atomic max` instead of locking the record, or does
//! nothing at all when the entry already holds its epoch. For the raise
//! it enters the record's [`RecordLock`](crate::atomic::RecordLock) as a
//! *raiser* first (only while nobody holds or awaits the lock, and only if
//! the lock's version is still the one it read), then performs the
//! operation and checks the clocks inside; a compare-exchange that did
//! not write, or an access that races, leaves and is recorded under the
//! lock. A locker waits for the raisers inside to leave, so every raise is
//! in before anybody reads the entries under the lock, without a fence,
//! and no raiser waits for the lock once it has performed its operation
//! (which might be the one every other thread is waiting for). Under the lock, an access of
//! the class raises its entry too; any other access is checked against
//! every entry in use (`O(num_threads)`, skipped while none is), and
//! clears the entries it subsumes.
//!
//! Sets come from the pool's bump region, contiguous, within the share of
//! the pool chains may take ([`crate::shadow::Pool::allocate_block`]); a
//! word that gets none keeps its record and chain as before. A set stays
//! its word's for as long as the word's record: both go back to the pool
//! only when the word's buffer is freed ([`crate::reclaim`]), after every
//! access to it has finished (the GPU frees after synchronising the
//! device). The fast path reads a set without the lock, so a set's memory
//! must never become anything else while some thread may still be raising
//! an entry.

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{atomic_set_records, AtomicSetHeader, InflatedRecord};
use crate::atomic::{AtomicFamily, AtomicU32Ops};
use crate::memory_model::Scope;
use crate::shadow::{scope_from, AccessClock, Pool};

/// Clocks a record holds before its atomic writes of one class move into
/// a set (a full record), half of which must be of that class.
pub const SET_THRESHOLD: usize = crate::abi::RECORD_ACCESS_SLOTS;

/// What every entry of a set shares: the access clock of entry `t` is
/// `(t, epoch, mask, write, atomic, scope, extent)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicSetClass {
    /// Bytes of the word every entry covers.
    pub mask: u8,
    /// [`crate::shadow::atomic_extent`] of every entry.
    pub extent: u8,
    /// Scope of every entry (device or system).
    pub scope: Scope,
    /// The device of every entry's thread (meaningful for device scope).
    pub device: u32,
}

impl AtomicSetClass {
    /// The class of atomic write `a` by a thread of `device`, if such
    /// writes can share a set: device or system scope (block-scope atomics
    /// of different threads are not compatible), and the whole extent.
    #[inline(always)]
    pub fn of(a: &AccessClock, device: u32) -> Option<AtomicSetClass> {
        (a.atomic && a.write && a.scope >= Scope::Device && a.mask == a.extent & 0xf).then_some(
            AtomicSetClass {
                mask: a.mask,
                extent: a.extent,
                scope: a.scope,
                device: if a.scope == Scope::Device { device } else { 0 },
            },
        )
    }

    /// Whether access `n` of a thread of `device` belongs to the class
    /// (it can then only be a compatible atomic write with every entry).
    #[inline(always)]
    pub fn admits(&self, n: &AccessClock, device: u32) -> bool {
        AtomicSetClass::of(n, device) == Some(*self)
    }

    /// Whether atomic `n` of a thread of `device` is compatible with every
    /// entry whatever its thread (atomics of the same extent whose scopes
    /// include each other's threads): then it races with none, and an
    /// access that does not write subsumes none either.
    #[inline(always)]
    pub fn compatible_with(&self, n: &AccessClock, device: u32) -> bool {
        n.atomic
            && n.extent == self.extent
            && match (self.scope, n.scope) {
                (_, Scope::Block) => false,
                (Scope::Device, _) => device == self.device,
                (_, Scope::System) => true,
                // A device-scope atomic does not include entries of other
                // devices' threads.
                _ => false,
            }
    }

    /// The access clock of entry `tid` holding `epoch`.
    #[inline(always)]
    pub fn clock(&self, tid: u32, epoch: u32) -> AccessClock {
        AccessClock {
            tid,
            epoch,
            mask: self.mask,
            write: true,
            atomic: true,
            scope: self.scope,
            extent: self.extent,
        }
    }

    const fn encode(&self) -> u32 {
        self.mask as u32 & 0xf
            | (self.extent as u32 & 0x3f) << 4
            | (self.scope as u32) << 10
            | (self.device & 0xffff) << 16
    }

    const fn decode(v: u32) -> AtomicSetClass {
        AtomicSetClass {
            mask: (v & 0xf) as u8,
            extent: ((v >> 4) & 0x3f) as u8,
            scope: scope_from(((v >> 10) & 3) as u8),
            device: v >> 16,
        }
    }
}

/// A view of one atomic set in the pool.
pub struct AtomicSet<'a, F: AtomicFamily> {
    header: &'a [F::U32],
    entries: &'a [F::U32],
}

impl<'a, F: AtomicFamily> AtomicSet<'a, F> {
    /// The set whose header is pool record `index`, of `num_threads`
    /// entries; `None` when the pool does not hold it (a corrupt index).
    #[inline(always)]
    pub fn open(pool: &Pool<'a, F>, index: u32, num_threads: u32) -> Option<Self> {
        let words = pool.block(index, atomic_set_records(num_threads))?;
        let (header, rest) = words.split_at(InflatedRecord::WORDS);
        Some(AtomicSet {
            header,
            entries: &rest[..num_threads as usize],
        })
    }

    /// Claims a set of `num_threads` entries, all empty, for `class`: its
    /// pool index and the set, or `None` when the pool has no room for it.
    pub fn create(
        pool: &Pool<'a, F>,
        class: AtomicSetClass,
        num_threads: u32,
    ) -> Option<(u32, Self)> {
        let records = atomic_set_records(num_threads);
        let index = pool.allocate_block(records)?;
        let set = Self::open(pool, index, num_threads)?;
        set.header[AtomicSetHeader::CLASS_WORD].store(class.encode(), MemOrder::Relaxed);
        set.header[AtomicSetHeader::RECORDS_WORD].store(records, MemOrder::Relaxed);
        Some((index, set))
    }

    /// The class every entry shares.
    #[inline(always)]
    pub fn class(&self) -> AtomicSetClass {
        AtomicSetClass::decode(self.header[AtomicSetHeader::CLASS_WORD].load(MemOrder::Relaxed))
    }

    /// Entry `tid`: the newest epoch of its writes (0: none).
    #[inline(always)]
    pub fn entry(&self, tid: u32) -> u32 {
        self.entries
            .get(tid as usize)
            .map_or(0, |e| e.load(MemOrder::Relaxed))
    }

    /// Entries in use (see [`AtomicSetHeader::used`]).
    #[inline(always)]
    pub fn used(&self) -> u32 {
        self.header[AtomicSetHeader::USED_WORD].load(MemOrder::Relaxed)
    }

    /// Records a write of the class by `tid` at `epoch`.
    #[inline(always)]
    pub fn raise(&self, tid: u32, epoch: u32) {
        if let Some(e) = self.entries.get(tid as usize) {
            if e.fetch_max(epoch, MemOrder::Relaxed) == 0 {
                self.header[AtomicSetHeader::USED_WORD].fetch_add(1, MemOrder::Relaxed);
            }
        }
    }

    /// Empties entry `tid` (its word's lock held).
    #[inline(always)]
    pub fn clear(&self, tid: u32) {
        if let Some(e) = self.entries.get(tid as usize) {
            if e.load(MemOrder::Relaxed) != 0 {
                e.store(0, MemOrder::Relaxed);
                self.header[AtomicSetHeader::USED_WORD].fetch_sub(1, MemOrder::Relaxed);
            }
        }
    }

    /// Every entry in use, as access clocks (tests and reports).
    pub fn clocks(&self) -> impl Iterator<Item = AccessClock> + '_ {
        let class = self.class();
        (0..self.entries.len() as u32).filter_map(move |t| {
            let e = self.entry(t);
            (e != 0).then(|| class.clock(t, e))
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::PoolHeader;
    use crate::atomic::CoreAtomics;
    use core::sync::atomic::AtomicU32;
    use std::vec;
    use std::vec::Vec;

    fn pool_words(records: u32) -> Vec<AtomicU32> {
        let n = PoolHeader::WORDS + records as usize * InflatedRecord::WORDS;
        let words: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        words[PoolHeader::CAPACITY_WORD].store(records, MemOrder::Relaxed);
        words
    }

    /// The class of whole-word atomic writes of `scope` on `device`.
    fn word_class(scope: Scope, device: u32) -> AtomicSetClass {
        AtomicSetClass {
            mask: 0xf,
            extent: 0xf,
            scope,
            device,
        }
    }

    #[test]
    fn a_set_keeps_each_threads_newest_epoch_and_its_class() {
        let words = pool_words(64);
        let pool = Pool::<CoreAtomics>::new(&words);
        let class = word_class(Scope::Device, 3);
        let (_, set) = AtomicSet::create(&pool, class, 100).expect("room for a set");
        assert_eq!(set.class(), class);
        set.raise(7, 5);
        set.raise(7, 3);
        set.raise(99, 1);
        assert_eq!(set.entry(7), 5);
        assert_eq!(set.used(), 2);
        let clocks: Vec<_> = set.clocks().collect();
        assert_eq!(clocks, vec![class.clock(7, 5), class.clock(99, 1)]);
        set.clear(7);
        set.clear(7);
        assert_eq!(set.entry(7), 0);
        assert_eq!(set.used(), 1);
        // Out-of-range threads change nothing and read as empty.
        set.raise(100, 9);
        assert_eq!(set.entry(100), 0);
    }

    #[test]
    fn sets_come_from_the_chains_share_of_the_pool() {
        // 4,096 threads: 129 records a set; a pool of 300 leaves room for
        // two within all but an eighth of it.
        let words = pool_words(300);
        let pool = Pool::<CoreAtomics>::new(&words);
        let class = word_class(Scope::System, 0);
        let (a, _) = AtomicSet::create(&pool, class, 4096).expect("first set");
        let (b, _) = AtomicSet::create(&pool, class, 4096).expect("second set");
        assert!(AtomicSet::create(&pool, class, 4096).is_none());
        assert_eq!(pool.in_use(), 2 * atomic_set_records(4096));
        assert_eq!(b, a + atomic_set_records(4096));
        // The eighth left over still serves single records.
        assert!(pool.allocate().is_some());
    }

    /// A whole-word device-scope atomic write by thread 1.
    fn device_write() -> AccessClock {
        AccessClock {
            tid: 1,
            epoch: 1,
            mask: 0xf,
            write: true,
            atomic: true,
            scope: Scope::Device,
            extent: 0xf,
        }
    }

    #[test]
    fn only_whole_extent_atomic_writes_of_wide_scopes_have_a_class() {
        let w = device_write();
        assert!(AtomicSetClass::of(&w, 0).is_some());
        let block = AccessClock {
            scope: Scope::Block,
            ..w
        };
        let read = AccessClock { write: false, ..w };
        let plain = AccessClock { atomic: false, ..w };
        let partial = AccessClock { mask: 0x3, ..w };
        for a in [block, read, plain, partial] {
            assert!(AtomicSetClass::of(&a, 0).is_none(), "{a:?}");
        }
        // Device scope: the class names the device; system scope does not.
        let c = AtomicSetClass::of(&w, 2).unwrap();
        assert!(!c.admits(&w, 1));
        let sys = AccessClock {
            scope: Scope::System,
            ..w
        };
        let cs = AtomicSetClass::of(&sys, 2).unwrap();
        assert!(cs.admits(&sys, 5));
    }

    #[test]
    fn compatible_atomics_are_those_whose_scopes_include_every_entry() {
        let w = device_write();
        let device_class = AtomicSetClass::of(&w, 2).unwrap();
        let load = AccessClock { write: false, ..w };
        let sys_load = AccessClock {
            scope: Scope::System,
            ..load
        };
        // Device entries of device 2: any wide-scope atomic of device 2.
        assert!(device_class.compatible_with(&load, 2));
        assert!(device_class.compatible_with(&sys_load, 2));
        assert!(!device_class.compatible_with(&load, 3));
        // System entries (any device): only system-scope atomics.
        let system_class = AtomicSetClass::of(
            &AccessClock {
                scope: Scope::System,
                ..w
            },
            0,
        )
        .unwrap();
        assert!(system_class.compatible_with(&sys_load, 7));
        assert!(!system_class.compatible_with(&load, 0));
        // Never a plain access, a block-scope atomic or another extent.
        let plain = AccessClock {
            atomic: false,
            extent: 0,
            ..load
        };
        let block = AccessClock {
            scope: Scope::Block,
            ..load
        };
        let half = AccessClock {
            mask: 0x3,
            extent: 0x3,
            ..load
        };
        for n in [plain, block, half] {
            assert!(!device_class.compatible_with(&n, 2), "{n:?}");
        }
    }
}
