//! The race engine's memory on the CPU (`vigil_shared::race::RaceMemory`):
//! the arena's shadow cells and site plane, and the engine's tables as
//! lazily committed host mappings: the record pool, the snapshot arena,
//! the exit log, the launch ring and the SC-fence accumulators. The same
//! tables the GPU keeps in device memory, of the same sizes, but for the
//! sites of split words: one per word here, where every plain access is
//! checked word by word, instead of the GPU's hashed table.

use super::arena::{Arena, ArenaError, Zeroed};
use super::atomics::HostAtomics;
use super::lock;
use crate::sanitizer::order::LaunchOrder;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering as MemOrder};
use std::sync::Mutex;
use vigil_shared::gpu::LAUNCH_RING_SLOTS;
use vigil_shared::race::knowledge::{
    header as arena_header, Arena as Snapshots, EXIT_HEADER_WORDS,
};
use vigil_shared::race::memory::{launch_record, LaneRef, MAX_SC_DEVICES};
use vigil_shared::race::record::{pool_header, Pool, RECORD_WORDS};
use vigil_shared::race::serial::{LaneBounds, Serial, LANES};
use vigil_shared::race::sync::SC_WORDS;
use vigil_shared::race::{RaceMemory, SiteWord};

/// Words of the snapshot arena (64 MiB, the most a snapshot reference
/// can name).
const ARENA_WORDS: usize = 1 << 24;
/// Exits the exit log holds.
const EXIT_ENTRIES: usize = 1 << 16;

/// The engine's memory of one sanitizer (shared by a group's devices).
pub(super) struct EngineMemory {
    pub(super) arena: Arena,
    pool: Zeroed<AtomicU64>,
    snapshots: Zeroed<AtomicU32>,
    exits: Zeroed<AtomicU32>,
    ring: Zeroed<AtomicU32>,
    sc: Zeroed<AtomicU32>,
    /// The launch order's renewal the knowledge tables were last emptied
    /// for ([`EngineMemory::renew_if_idle`]).
    renewed: AtomicU64,
}

/// What one launch's ring record holds.
pub(super) struct RingRecord<'a> {
    /// The launch's number in the ring.
    pub(super) lane_ref: LaneRef,
    /// Its first serial and how many it owns.
    pub(super) base: Serial,
    pub(super) count: u32,
    /// The device (rank) it runs on.
    pub(super) device: u32,
    /// Its launch id (what reports name it by).
    pub(super) launch_id: u32,
    /// What the host ordered before it, and what may be forgotten.
    pub(super) bounds: &'a LaneBounds,
    pub(super) global: &'a LaneBounds,
}

impl EngineMemory {
    /// The arena `arena` with empty tables: a pool of `pool_records`
    /// records.
    pub(super) fn new(arena: Arena, pool_records: usize) -> Result<EngineMemory, ArenaError> {
        let pool = Zeroed::new((pool_records + 1) * RECORD_WORDS)?;
        Pool::<HostAtomics>::init(&pool);
        let snapshots = Zeroed::new(ARENA_WORDS)?;
        Snapshots::<HostAtomics>::init(&snapshots, 1);
        let exits = Zeroed::new(EXIT_HEADER_WORDS + 2 * EXIT_ENTRIES)?;
        Snapshots::<HostAtomics>::init_exits(&exits);
        Ok(EngineMemory {
            arena,
            pool,
            snapshots,
            exits,
            ring: Zeroed::new(LAUNCH_RING_SLOTS as usize * launch_record::WORDS)?,
            sc: Zeroed::new(MAX_SC_DEVICES * 2 * SC_WORDS)?,
            renewed: AtomicU64::new(0),
        })
    }

    /// Empties the knowledge tables (snapshot arena, exit log, SC-fence
    /// accumulators) if the launch order renewed since they were last
    /// emptied: everything they name is then ordered before all later
    /// work, and no launch runs (`LaunchOrder::renew`). Without it they
    /// only fill, and a full arena makes every CTA that needs a snapshot
    /// know everything (no race between blocks reported any more).
    pub(super) fn renew_if_idle(&self, order: &Mutex<LaunchOrder>) {
        // Held until the tables are empty: no launch is planned meanwhile.
        let mut order = lock(order);
        if let Some(renewal) = order.renew() {
            if self.renewed.swap(renewal, MemOrder::Relaxed) != renewal {
                Snapshots::<HostAtomics>::renew(&self.snapshots, &self.exits, &self.sc);
            }
        }
    }

    /// Writes a launch's record into its ring slot (before any of its
    /// CTAs runs).
    pub(super) fn write_record(&self, r: &RingRecord<'_>) {
        let slots = self.ring.len() / launch_record::WORDS;
        let at = (r.lane_ref as usize % slots) * launch_record::WORDS;
        let rec = &self.ring[at..at + launch_record::WORDS];
        let relaxed = MemOrder::Relaxed;
        // The tag goes first: a reader of the old launch's slot no longer
        // trusts it while it changes.
        rec[launch_record::TAG].store(0, MemOrder::Release);
        for w in &rec[1..] {
            w.store(0, relaxed);
        }
        rec[launch_record::BASE].store(r.base, relaxed);
        rec[launch_record::COUNT].store(r.count, relaxed);
        rec[launch_record::DEVICE].store(r.device, relaxed);
        rec[launch_record::LAUNCH_ID].store(r.launch_id, relaxed);
        for k in 0..LANES {
            rec[launch_record::BOUNDS + k].store(r.bounds.0[k], relaxed);
            rec[launch_record::GLOBAL + k].store(r.global.0[k], relaxed);
        }
        rec[launch_record::TAG].store(r.lane_ref, MemOrder::Release);
    }

    /// Whether a pool record was ever handed out (a freed buffer's shadow
    /// then needs no reclaim: it names none).
    pub(super) fn pool_used(&self) -> bool {
        self.pool[pool_header::NEXT].load(MemOrder::Relaxed) > 1
    }

    /// Takes the engine's counts of lost precision since the last call,
    /// clearing them: pool allocations that found it full, snapshot
    /// merges that found the arena full or coarsened a snapshot, exits the
    /// log could not hold. (A group's devices share the tables: each count
    /// goes to the device that takes it first.)
    pub(super) fn take_lost(&self) -> u64 {
        let pool = self.pool[pool_header::EXHAUSTED].swap(0, MemOrder::Relaxed);
        let arena = [arena_header::LOST, arena_header::COARSENED]
            .map(|w| u64::from(self.snapshots[w].swap(0, MemOrder::Relaxed)));
        let exits = u64::from(self.exits[2].swap(0, MemOrder::Relaxed));
        pool + arena[0] + arena[1] + exits
    }
}

impl RaceMemory for EngineMemory {
    type Atomics = HostAtomics;

    #[inline(always)]
    fn cell(&self, word: u64) -> Option<&AtomicU64> {
        self.arena.shadow_cell(word)
    }
    #[inline(always)]
    fn pool_words(&self) -> &[AtomicU64] {
        &self.pool
    }
    #[inline(always)]
    fn arena_words(&self) -> &[AtomicU32] {
        &self.snapshots
    }
    #[inline(always)]
    fn exit_words(&self) -> &[AtomicU32] {
        &self.exits
    }
    fn site_words(&self) -> &[AtomicU64] {
        &[]
    }
    #[inline(always)]
    fn note_site(&self, word: u64, site: SiteWord) {
        if let Some(c) = self.arena.site_cell(word) {
            c.store(site.0, MemOrder::Relaxed);
        }
    }
    #[inline(always)]
    fn site_of(&self, word: u64, serial: Serial) -> SiteWord {
        self.arena
            .site_cell(word)
            .map(|c| SiteWord(c.load(MemOrder::Relaxed)))
            .filter(|s| s.belongs_to(serial))
            .unwrap_or(SiteWord::NONE)
    }
    #[inline(always)]
    fn launch_words(&self) -> &[AtomicU32] {
        &self.ring
    }
    #[inline(always)]
    fn sc_words(&self) -> &[AtomicU32] {
        &self.sc
    }
}
