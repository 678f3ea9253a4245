//! Races between threads of one block on the GPU: the pure half of the
//! device runtime (`vigil_device::gpu_sanitizer::block`), so that the host
//! build tests it. It holds the packing of a remembered access
//! ([`BlockRecord`]) and of a lane's warp-collective state ([`LaneSync`]),
//! the ordering and conflict rules ([`race_between`]), the layout of a
//! shared array's shadow ([`ShadowLayout`]) and how a report of a race
//! inside a block travels in a [`GpuReportRecord`](crate::gpu::GpuReportRecord).
//!
//! The model is the CPU backend's (`backend/cpu/block_races`): two
//! accesses by different threads of a block race when they overlap, at
//! least one writes, not both are atomic, they fall in the same barrier
//! interval, and no warp collective both threads joined lies between them.
//! A thread's barrier interval is the number of `sync_threads` it passed
//! ([`LaneSync::barriers`]): a barrier lets no thread through before every
//! thread that has not exited arrived, so threads in different intervals
//! never run at once (threads that return early change nothing).

use crate::abi::ReportKind;
use crate::AccessKind;
use bytemuck::{Pod, Zeroable};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes per shadow word.
pub const WORD: usize = 4;

/// The bytes of the [`WORD`]-byte word at `word` that `lo..hi` covers (bit
/// `i`: byte `i`; the range must meet the word).
pub const fn word_mask(word: u64, lo: u64, hi: u64) -> u8 {
    let end = word + WORD as u64;
    let lo = if lo > word { lo } else { word };
    let hi = if hi < end { hi } else { end };
    (((1u32 << (hi - lo)) - 1) << (lo - word)) as u8
}

/// Records per shadow word: the interval's last write (or block-scope
/// atomic), its first reader, and a reader other than the first.
pub const RECORDS: usize = 3;

/// Distinct races (kind and both sites) an array's shadow remembers having
/// reported in its block, so a race every thread of a block repeats is one
/// record, not one per thread.
pub const REPORTED: usize = 8;

/// The largest `.shared` shadow a shared array gets (32 KiB: an array of
/// up to 1,167 words, 4,668 bytes), so that a sanitized entry still fits
/// a block's 48 KiB of static shared memory; a larger array is shadowed in
/// device memory ([`WindowShadow`]).
pub const MAX_SHADOW_BYTES: usize = 32 * 1024;

/// Threads per block at most (CUDA's limit).
pub const MAX_BLOCK_THREADS: usize = 1024;

/// Threads whose lane state ([`LaneSync`]) sits in the CTA's `.shared`
/// memory; the lane states of threads `SHARED_LANES..MAX_BLOCK_THREADS`
/// sit in the CTA slot's region of device memory
/// ([`GpuRuntime::block_lanes`](crate::gpu::GpuRuntime::block_lanes)). All
/// 1,024 in `.shared` took 8 KiB of a sanitized entry's static shared
/// memory (its whole sanitizer state was 8,432 bytes), so a plain kernel
/// within that of the 48 KiB limit could not load sanitized; now 2 KiB.
pub const SHARED_LANES: usize = 256;

/// Lane states per CTA slot in device memory.
pub const GLOBAL_LANES: usize = MAX_BLOCK_THREADS - SHARED_LANES;

/// Bytes of a sanitized entry's `.shared` CTA state (its sanitizer
/// thread, launch, slot and read-only ranges).
pub const CTA_STATE_BYTES: usize = 176;

/// Shared views (by allocation site) a CTA numbers for its window-shadow
/// records ([`BlockRecord::view`], [`view_number`]), so that a race
/// between two views over the same bytes (a stack tile pushed where a
/// popped one was) names both views' sites.
pub const VIEWS: usize = 7;

/// Bytes of a sanitized entry's `.shared` block-race counters: the last
/// mbarrier phase acquired and the epoch it acquired, the epoch the
/// block's threads acquired ([`BlockAcquired::known`]), the window
/// shadow's address, the [`REPORTED`] report keys, the [`VIEWS`] view
/// sites (`u32`s) and the epoch observed ([`BlockAcquired::observed`]).
pub const COUNTERS_BYTES: usize = 16 + 8 * REPORTED + 4 * (VIEWS + 1);

/// Byte offset in the block-race counters of the window shadow's address
/// (a `u64`) as the CTA read it when it claimed its regions: one region
/// for the whole CTA, even when the host replaces the runtime's while it
/// runs.
pub const WINDOW_AT: usize = 8;

/// Bytes of a sanitized entry's `.shared` lane states: a header and
/// [`SHARED_LANES`] `u64`s.
pub const LANES_BYTES: usize = 8 + 8 * SHARED_LANES;

/// The static shared memory a sanitized entry adds to its kernel's,
/// besides the shadows of its small arrays (2,472 bytes; 8,616 with all
/// 1,024 lane states in `.shared`).
pub const SANITIZER_SHARED_BYTES: usize =
    CTA_STATE_BYTES + COUNTERS_BYTES + LANES_BYTES + BarrierCheck::BYTES;
const _: () = assert!(SANITIZER_SHARED_BYTES == 2472);

/// Bits of a record's warp-collective count.
const COUNT_BITS: u32 = 16;
const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;
const COUNT_SHIFT: u32 = 16;
const THREAD_BITS: u32 = 11;
const BYTES_SHIFT: u32 = 12;

/// One remembered access to a shadow word, in one `u64` so that it is
/// updated atomically: the linear thread index plus one (0: empty, 11
/// bits), whether it was a block-scope atomic (1 bit), the bytes of the
/// word it touched (4 bits), the thread's warp-collective count at the
/// access ([`LaneSync::count`], low 16 bits), the CTA's release epoch at
/// the access (its low [`EPOCH_BITS`] bits: records of one interval lie
/// in one window of epochs, see [`access_interval`]), and the low 25 bits
/// of its `Location`'s address (the high bits are those of the current
/// access's: a module's locations lie within 16 MiB of each other). A
/// record of an access through a numbered shared view
/// ([`BlockRecord::with_view`]) keeps the view's number in the address's
/// low 3 bits, which a `Location`'s (8-aligned) leaves zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRecord(pub u64);

impl BlockRecord {
    /// No access.
    pub const EMPTY: BlockRecord = BlockRecord(0);

    /// Thread `thread`'s access (atomic or not) to the bytes `bytes` of
    /// the word (bit `i`: byte `i`) with collective count `count`, in the
    /// CTA's release epoch `epoch`, at the location whose address is
    /// `location`.
    pub const fn new(
        thread: u32,
        atomic: bool,
        bytes: u8,
        count: u32,
        epoch: u16,
        location: u64,
    ) -> Self {
        let meta = (thread + 1)
            | (atomic as u32) << THREAD_BITS
            | (bytes as u32 & 0xf) << BYTES_SHIFT
            | (count & COUNT_MASK) << COUNT_SHIFT;
        BlockRecord(
            meta as u64
                | ((epoch & EPOCH_MASK) as u64) << EPOCH_SHIFT
                | (location & LOCATION_MASK) << LOCATION_SHIFT,
        )
    }

    /// The CTA's release epoch at the access, given the epoch `now` of an
    /// access of the same interval (the window's high bits are both's).
    pub const fn epoch(self, now: u16) -> u16 {
        now & !EPOCH_MASK | ((self.0 >> EPOCH_SHIFT) as u16 & EPOCH_MASK)
    }

    /// The bytes of the word it touched (bit `i`: byte `i`).
    pub const fn bytes(self) -> u8 {
        ((self.0 as u32 >> BYTES_SHIFT) & 0xf) as u8
    }

    /// The same access over the bytes `bytes`.
    pub const fn with_bytes(self, bytes: u8) -> Self {
        let mask = 0xf_u64 << BYTES_SHIFT;
        BlockRecord(self.0 & !mask | ((bytes as u64 & 0xf) << BYTES_SHIFT))
    }

    /// The thread that made it; `None` when empty.
    pub const fn thread(self) -> Option<u32> {
        match self.0 as u32 & ((1 << THREAD_BITS) - 1) {
            0 => None,
            t => Some(t - 1),
        }
    }

    /// True for a block-scope atomic.
    pub const fn atomic(self) -> bool {
        (self.0 >> THREAD_BITS) & 1 == 1
    }

    /// The thread's collective count at the access (low 16 bits).
    pub const fn count(self) -> u32 {
        (self.0 as u32 >> COUNT_SHIFT) & COUNT_MASK
    }

    /// Its `Location`'s address, given the address `near` of another
    /// location of the same module (of a record made without a view
    /// number: [`BlockRecord::access_location`] reads one made with it).
    pub const fn location(self, near: u64) -> u64 {
        near_bits(self.location_bits(), near)
    }

    /// The low 25 bits of the location word.
    const fn location_bits(self) -> u32 {
        ((self.0 >> LOCATION_SHIFT) & LOCATION_MASK) as u32
    }

    /// Its `Location`'s address, given the address `near` of another
    /// location of the same module, for a record that may carry a view
    /// number: [`BlockRecord::location`] without the number's bits.
    pub const fn access_location(self, near: u64) -> u64 {
        near_bits(self.location_bits() & !VIEW_MASK, near)
    }

    /// The same access through shared view number `view` (1 to [`VIEWS`],
    /// from [`view_number`]; 0: none). The record's location must be a
    /// `Location`'s address (8-aligned), whose low 3 bits take the number.
    pub const fn with_view(self, view: u32) -> Self {
        let mask = (VIEW_MASK as u64) << LOCATION_SHIFT;
        BlockRecord(self.0 & !mask | ((view & VIEW_MASK) as u64) << LOCATION_SHIFT)
    }

    /// The number of the shared view it went through (0: none or unknown).
    pub const fn view(self) -> u32 {
        self.location_bits() & VIEW_MASK
    }
}

/// Bits of the release epoch a [`BlockRecord`] keeps.
pub const EPOCH_BITS: u32 = 7;
const EPOCH_MASK: u16 = (1 << EPOCH_BITS) - 1;
const EPOCH_SHIFT: u32 = 32;
const LOCATION_SHIFT: u32 = EPOCH_SHIFT + EPOCH_BITS;
const LOCATION_MASK: u64 = (1 << (64 - LOCATION_SHIFT)) - 1;
const _: () = assert!(64 - LOCATION_SHIFT == 25);

/// The address whose low 25 bits are `low`, given the address `near` of
/// another static of the same module (within 16 MiB of it).
const fn near_bits(low: u32, near: u64) -> u64 {
    let unused = 32 - (64 - LOCATION_SHIFT);
    let delta = (low.wrapping_sub(near as u32) << unused) as i32 >> unused;
    near.wrapping_add(delta as i64 as u64)
}

/// The bits of a record's location word that hold its view number.
const VIEW_MASK: u32 = 7;
const _: () = assert!(VIEWS as u32 <= VIEW_MASK);

/// The address whose low 32 bits are `low`, given the address `near` of
/// another static of the same module (within 2 GiB of it).
pub const fn near_address(low: u32, near: u64) -> u64 {
    let delta = low.wrapping_sub(near as u32) as i32;
    near.wrapping_add(delta as i64 as u64)
}

/// The number (1 to `sites.len()`) under which a CTA's view table
/// `sites` holds the shared view allocated at the `Location` whose
/// address's low 32 bits are `site`, claiming a free entry for it (an
/// entry goes from 0 to a site once per CTA and stays). 0 when `site` is
/// 0 or every entry holds another site: that view's records name none.
pub fn view_number(sites: &[AtomicU32], site: u32) -> u32 {
    if site == 0 || sites.is_empty() {
        return 0;
    }
    let start = (site >> 3) as usize % sites.len();
    for i in 0..sites.len() {
        let j = (start + i) % sites.len();
        let held = match sites[j].load(Ordering::Relaxed) {
            0 => match sites[j].compare_exchange(0, site, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => site,
                Err(other) => other,
            },
            held => held,
        };
        if held == site {
            return j as u32 + 1;
        }
    }
    0
}

/// What a thread knows of its synchronisation, in one `u64`: how many
/// warp collectives it joined (bits 0..16), how many barriers it passed
/// (bits 16..32), and the member mask of its last collective (high 32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneSync(pub u64);

impl LaneSync {
    /// Collectives joined (low 16 bits).
    pub const fn count(self) -> u32 {
        self.0 as u32 & COUNT_MASK
    }

    /// Barriers passed (low 16 bits).
    pub const fn barriers(self) -> u32 {
        (self.0 as u32 >> 16) & 0xffff
    }

    /// Member mask of the last collective.
    pub const fn last_mask(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The state after joining one more collective, of member mask `mask`.
    pub const fn joined(self, mask: u32) -> LaneSync {
        let counts = (self.count() + 1) & COUNT_MASK | self.barriers() << 16;
        LaneSync(counts as u64 | (mask as u64) << 32)
    }

    /// The state after passing one more barrier.
    pub const fn passed_barrier(self) -> LaneSync {
        let counts = self.count() | ((self.barriers() + 1) & 0xffff) << 16;
        LaneSync(counts as u64 | (self.last_mask() as u64) << 32)
    }
}

/// True when `prior` (an access of the current barrier interval) is
/// ordered before thread `me`'s next access, `prior_lane` being the
/// current state of `prior`'s thread: it is `me`'s own, or its thread
/// joined, after it, a warp collective whose mask holds `me`'s lane (a
/// `.sync` collective completes only when every lane of its mask reached
/// it). With only the last mask known, two or more collectives since
/// count as ordering (this may hide a race, never invent one).
pub fn ordered(prior: BlockRecord, me: u32, prior_lane: LaneSync) -> bool {
    let Some(p) = prior.thread() else {
        return true;
    };
    if p == me {
        return true;
    }
    if p / 32 != me / 32 {
        return false;
    }
    match prior_lane.count().wrapping_sub(prior.count()) & COUNT_MASK {
        0 => false,
        1 => prior_lane.last_mask() & (1 << (me % 32)) != 0,
        _ => true,
    }
}

/// The kind of a race between an earlier access `prior` and the current
/// one `current`, whatever their order in time.
pub fn race_kind(prior: AccessKind, current: AccessKind) -> ReportKind {
    if prior.is_atomic() || current.is_atomic() {
        ReportKind::AtomicNonAtomic
    } else if !current.writes() {
        ReportKind::ReadAfterWrite
    } else if prior.writes() {
        ReportKind::WriteAfterWrite
    } else {
        ReportKind::WriteAfterRead
    }
}

/// What a record stands for: a write record's access is a plain write or
/// a block-scope read-modify-write; a reader record's a plain read.
pub fn record_kind(record: BlockRecord, write_record: bool) -> AccessKind {
    match (write_record, record.atomic()) {
        (true, true) => AccessKind::AtomicRmw,
        (true, false) => AccessKind::Write,
        (false, _) => AccessKind::Read,
    }
}

/// The race, if any, between `prior` (a record of the current barrier
/// interval; `write_record` says which slot it came from) and `current`,
/// thread `current.thread()`'s access of kind `kind`; `prior_lane` gives
/// the current collective state of the prior's thread (asked only for the
/// same warp), and `released` whether the block acquired a release of its
/// own made after `prior` ([`BlockAcquired::orders`]; asked only of a
/// conflicting prior that no collective orders).
pub fn race_between(
    prior: BlockRecord,
    write_record: bool,
    current: BlockRecord,
    kind: AccessKind,
    prior_lane: impl Fn(u32) -> LaneSync,
    released: impl Fn(BlockRecord) -> bool,
) -> Option<ReportKind> {
    let (p, me) = (prior.thread()?, current.thread()?);
    let prior_kind = record_kind(prior, write_record);
    let conflict = (prior_kind.writes() || kind.writes())
        && !(prior_kind.is_atomic() && kind.is_atomic())
        && prior.bytes() & current.bytes() != 0;
    if !conflict || p == me {
        return None;
    }
    let lane = if p / 32 == me / 32 {
        prior_lane(p)
    } else {
        LaneSync::default()
    };
    (!ordered(prior, me, lane) && !released(prior)).then(|| race_kind(prior_kind, kind))
}

/// How a plain read `me` updates a word's reader records `first` and
/// `second`: `Some((slot, new))` stores `new` into slot 1 or 2, `None`
/// stores nothing. The first record holds the interval's first reader;
/// the second, once another thread read, the first reader that is not the
/// first record's thread. A thread's record grows to the bytes it read;
/// once its bytes are there, a read by it (or by a third thread, once the
/// second is taken) writes nothing, so a word many threads read costs
/// loads only. A writer that is not the first reader races with it, and
/// one that is races with the second (readers ordered before the writer
/// aside).
pub fn reader_update(
    first: BlockRecord,
    second: BlockRecord,
    me: BlockRecord,
) -> Option<(usize, BlockRecord)> {
    let grow = |slot: usize, own: BlockRecord| {
        (own.bytes() & me.bytes() != me.bytes())
            .then(|| (slot, me.with_bytes(own.bytes() | me.bytes())))
    };
    match (first.thread(), second.thread()) {
        (None, _) => Some((1, me)),
        (t, _) if t == me.thread() => grow(1, first),
        (_, None) => Some((2, me)),
        (_, t) if t == me.thread() => grow(2, second),
        _ => None,
    }
}

/// Whether a plain read `me` of a word whose records of the current
/// interval are `write`, `first` and `second` is one that
/// [`WordRecords::access`] would neither record nor report: the write
/// record is empty or `me`'s thread's own (a thread never races with
/// itself) and the reader records hold the read already
/// ([`reader_update`]). A caller that sees this can skip the protocol
/// (the GPU's common read of a tile).
pub fn read_changes_nothing(
    write: BlockRecord,
    first: BlockRecord,
    second: BlockRecord,
    me: BlockRecord,
) -> bool {
    write.thread().is_none_or(|t| Some(t) == me.thread())
        && reader_update(first, second, me).is_none()
}

/// One shadow word's [`RECORDS`] records of the current interval (its
/// last write or block-scope atomic, its first reader, a reader other than
/// the first), and the protocol every access follows on them.
///
/// `W` is the records' word: on the GPU one at the CTA's scope (only the
/// CTA that holds the shadow touches it while it runs, and `core`'s
/// atomics are system-scoped there), `core`'s atomic on the host.
#[derive(Debug)]
pub struct WordRecords<'a, W: TableWord = AtomicU64> {
    /// The interval's last write (or atomic standing for earlier atomics).
    pub write: &'a W,
    /// Its first reader.
    pub first: &'a W,
    /// A reader other than the first.
    pub second: &'a W,
}

impl<W: TableWord> Clone for WordRecords<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W: TableWord> Copy for WordRecords<'_, W> {}

impl<W: TableWord> WordRecords<'_, W> {
    /// Thread `me.thread()`'s access of kind `kind` (`me` its record for
    /// this word): records it and calls `race` with each record it races
    /// with (the record, whether it is the write record, the kind).
    ///
    /// A plain write swaps itself into the write record and then reads the
    /// readers; a plain read updates a reader record ([`reader_update`],
    /// often not at all) and then reads the write record; `fence` after an
    /// update (a `fence.sc.cta` on the GPU) makes at least one of two racing
    /// accesses see the other (a read that stores nothing is covered by the
    /// fence after the store it relies on). An atomic replaces only an empty or atomic
    /// write record (a plain write stays for later accesses to race with);
    /// an atomic load is not remembered (a later plain write is not
    /// checked against it: only detection is lost). `lane` and `released`
    /// are [`race_between`]'s.
    #[allow(clippy::too_many_arguments)]
    pub fn access(
        &self,
        me: BlockRecord,
        kind: AccessKind,
        fence: impl Fn(),
        lane: impl Fn(u32) -> LaneSync,
        released: impl Fn(BlockRecord) -> bool,
        mut race: impl FnMut(BlockRecord, bool, ReportKind),
    ) {
        if me.thread().is_none() {
            return;
        }
        let mut check = |prior: u64, write_record: bool| {
            let prior = BlockRecord(prior);
            if let Some(k) = race_between(prior, write_record, me, kind, &lane, &released) {
                race(prior, write_record, k);
            }
        };
        match kind {
            AccessKind::Read => {
                // A lost compare-exchange means another reader got there
                // first: decide again (a few times; then give up, which
                // only loses detection).
                for _ in 0..4 {
                    let (f, s) = (self.first.load_relaxed(), self.second.load_relaxed());
                    let Some((slot, new)) = reader_update(BlockRecord(f), BlockRecord(s), me)
                    else {
                        break;
                    };
                    let (rec, old) = if slot == 1 {
                        (self.first, f)
                    } else {
                        (self.second, s)
                    };
                    if rec.cas_relaxed(old, new.0) {
                        fence();
                        break;
                    }
                }
                check(self.write.load_relaxed(), true);
            }
            AccessKind::AtomicRead => check(self.write.load_relaxed(), true),
            _ => {
                let p = self.write.load_relaxed();
                // The same access again (a thread's loop on one word):
                // its record, and the fence after it, are there already.
                let prior = if p == me.0 {
                    p
                } else if kind.is_atomic() {
                    let q = BlockRecord(p);
                    if q.thread().is_none() || q.atomic() {
                        self.write.cas_relaxed(p, me.0);
                    }
                    fence();
                    p
                } else {
                    let prior = self.write.swap_relaxed(me.0);
                    fence();
                    prior
                };
                check(prior, true);
                check(self.first.load_relaxed(), false);
                check(self.second.load_relaxed(), false);
            }
        }
    }

    /// Forgets every record (a new interval).
    pub fn clear(&self) {
        for r in [self.write, self.first, self.second] {
            r.store_relaxed(0);
        }
    }
}

/// The layout of a shared array's shadow (in the block's `.shared`
/// memory beside the array, only in sanitized entries): a header (the
/// block's stamp as `u32` and a pad, then [`REPORTED`] `u64` report keys),
/// [`RECORDS`] `u64` records per word, then a `u32` per word: its barrier
/// interval plus one (0: never touched in this block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShadowLayout {
    /// Shadow words (4-byte words of the array).
    pub words: usize,
}

impl ShadowLayout {
    /// Bytes of the header.
    pub const HEADER: usize = 8 + 8 * REPORTED;

    /// The layout for an array of `array_bytes` bytes.
    pub const fn of(array_bytes: usize) -> ShadowLayout {
        ShadowLayout {
            words: array_bytes.div_ceil(WORD),
        }
    }

    /// Byte offset of word `w`'s record `r`.
    pub const fn record(&self, w: usize, r: usize) -> usize {
        Self::HEADER + (w * RECORDS + r) * 8
    }

    /// Byte offset of word `w`'s interval.
    pub const fn interval(&self, w: usize) -> usize {
        Self::HEADER + self.words * RECORDS * 8 + w * 4
    }

    /// Bytes of the whole shadow (a multiple of 8).
    pub const fn bytes(&self) -> usize {
        self.interval(self.words).next_multiple_of(8)
    }
}

/// The shadow of the shared memory a `.shared` shadow does not cover
/// (arrays over [`MAX_SHADOW_BYTES`] of shadow, dynamic shared memory),
/// in device memory: per CTA slot, one entry per 4-byte word of the CTA's
/// shared window (the word at window offset `4w` is entry `w`; the slot
/// covers the window's first [`words`](Self::words) words). An entry is a
/// tag ([`WindowShadow::tag`]: the block's stamp and the word's interval)
/// and the word's [`RECORDS`] records, the same records and rules as a
/// `.shared` shadow's: an entry whose tag is not the current one holds an
/// earlier interval's or an earlier block's records and is cleared before
/// use, so nothing is cleared at a block's start.
///
/// The region starts with a header (its `u64` word count per slot, its
/// `u64` count of slots per SM, then reserved words), so that a device
/// that reads the region's address also reads the layout of that very
/// region: the host grows the region (a new one) when a launch's shared
/// window needs more, and keeps the old one alive for kernels still
/// running on it. Slot `r` of SM `s` (the CTA's region) is slot
/// `s * regions + r`; a CTA whose region is past `regions` (an SM holds
/// fewer CTAs with large windows than with small ones) goes unchecked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowShadow {
    /// Words of the shared window each slot covers.
    pub words: u64,
    /// Slots per SM.
    pub regions: u64,
}

impl WindowShadow {
    /// Bytes of the header.
    pub const HEADER: usize = 64;
    /// Bytes of an entry: tag and records.
    pub const ENTRY: usize = 8 + RECORDS * 8;
    /// Byte offset of the header's words per slot.
    pub const WORDS_AT: usize = 0;
    /// Byte offset of the header's slots per SM.
    pub const REGIONS_AT: usize = 8;

    /// The layout covering `window` bytes of shared window per slot, for
    /// `regions` slots per SM.
    pub const fn covering(window: u64, regions: u64) -> WindowShadow {
        WindowShadow {
            words: window.div_ceil(WORD as u64),
            regions,
        }
    }

    /// Bytes of the region for `sms` SMs.
    pub const fn bytes(&self, sms: u64) -> u64 {
        Self::HEADER as u64 + sms * self.regions * self.words * Self::ENTRY as u64
    }

    /// The slot of region `region` of SM `sm`, when the layout has one.
    pub const fn slot(&self, sm: u32, region: u32) -> Option<u64> {
        if (region as u64) < self.regions {
            Some(sm as u64 * self.regions + region as u64)
        } else {
            None
        }
    }

    /// Byte offset of word `w`'s entry of slot `slot` (`w < words`).
    pub const fn entry(&self, slot: u64, w: u64) -> u64 {
        Self::HEADER as u64 + (slot * self.words + w) * Self::ENTRY as u64
    }

    /// True when the slot covers the window bytes `start..start + len`.
    pub const fn covers(&self, start: u64, len: u64) -> bool {
        start.saturating_add(len) <= self.words * WORD as u64
    }

    /// The tag of the block stamped `stamp` in access interval `interval`
    /// (never 0: the stamp is odd).
    pub const fn tag(stamp: u32, interval: u32) -> u64 {
        (stamp as u64) << 32 | interval as u64
    }
}
const _: () = assert!(WindowShadow::ENTRY == 32 && WindowShadow::HEADER % 32 == 0);

/// The name of the `.shared` storage of an array that a sanitized entry
/// checks through the [`WindowShadow`] (no `.shared` shadow beside it):
/// the host gives a sanitized module whose PTX declares one a window
/// shadow for every launch with shared memory of its own, and only
/// launches with dynamic shared memory otherwise.
pub const WINDOW_ARRAY_SYMBOL: &str = "vigil_smem_window";

/// The stamp of one block of one launch in the headers of its shadows:
/// shared memory starts with whatever an earlier block left, so a shadow
/// whose header is not its block's stamp is cleared before use. Odd;
/// [`busy`] of it (even) marks a shadow being cleared.
pub const fn block_stamp(launch: u32, block: u32) -> u32 {
    (launch.wrapping_mul(0x9E37_79B1) ^ block.wrapping_mul(0x85EB_CA77).rotate_left(13)) | 1
}

/// The header of a shadow while its block's thread clears it.
pub const fn busy(stamp: u32) -> u32 {
    stamp & !1
}

/// The key under which an array's shadow remembers a reported race (never
/// 0): the same for the race seen from either of its accesses (a write
/// after a read is the read after that write; two writes in either order
/// are one race), so that a race reported where its second access was
/// made and again where it was checked once more (a copy completing) is
/// one report.
pub const fn report_key(kind: ReportKind, current_location: u64, prior_location: u64) -> u64 {
    let (current, prior) = (current_location as u32 as u64, prior_location as u32 as u64);
    let (kind, first, second) = match kind {
        ReportKind::WriteAfterRead => (ReportKind::ReadAfterWrite, prior, current),
        ReportKind::ReadAfterWrite => (kind, current, prior),
        _ if current <= prior => (kind, current, prior),
        _ => (kind, prior, current),
    };
    (first << 32 | second) ^ (kind as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// The interval of a thread's accesses: the barriers it passed
/// ([`LaneSync::barriers`]) and the window of the CTA's release epochs
/// (`epoch >> EPOCH_BITS`) it is in, plus one (0: never touched). A
/// record keeps its epoch's low [`EPOCH_BITS`] bits, which the window
/// completes; a new window forgets the records of the last one, which
/// can hide a race, never invent one. Intervals 65,536 barriers apart
/// could meet; a record that old is long gone in practice.
pub const fn access_interval(barriers: u32, epoch: u16) -> u32 {
    (barriers << 16 | (epoch >> EPOCH_BITS) as u32).wrapping_add(1)
}

/// What the threads of a block acquired of the block's own releases (its
/// CTA's release epochs, `vigil_shared::race::sync`), for the same-block
/// check: an access in epoch `e` happens before every later access of the
/// block once one of its threads acquired a release of epoch `e` or later.
///
/// An acquiring read learns the epochs the engine says it read
/// ([`OwnReleases`](crate::race::OwnReleases)): a release by a thread of
/// the block, directly or passed on through other blocks. A relaxed read
/// only observes them, and a later acquire fence of the block acquires
/// what was observed. Exact between two threads; with a third thread it
/// is coarser than the memory model (a release covers every access the
/// block made before it, not only the releasing thread's), which can hide
/// a race, never invent one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockAcquired {
    /// The latest own epoch acquired (0: none).
    pub known: u16,
    /// The latest own epoch observed by a relaxed read (0: none).
    pub observed: u16,
}

impl BlockAcquired {
    /// Whether an access made in epoch `epoch` is ordered before later
    /// accesses of the block by what it acquired.
    pub const fn covers(self, epoch: u16) -> bool {
        epoch <= self.known
    }

    /// Whether `prior`, a record of the current interval, is ordered
    /// before later accesses by what the block acquired, `now` being the
    /// epoch of an access of that interval.
    pub const fn orders(self, prior: BlockRecord, now: u16) -> bool {
        self.covers(prior.epoch(now))
    }

    /// A thread of the block acquired the block's releases up to `epoch`.
    pub fn acquire(&mut self, epoch: u16) {
        self.known = self.known.max(epoch);
    }

    /// A relaxed read of the block observed its releases up to `epoch`.
    pub fn observe(&mut self, epoch: u16) {
        self.observed = self.observed.max(epoch);
    }

    /// An acquire fence: what the block's relaxed reads observed is
    /// acquired.
    pub fn acquire_observed(&mut self) {
        self.known = self.known.max(self.observed);
    }
}

/// The table of global words a block touched in its current interval, in
/// per-SM-slot device memory (a CTA holds one slot while it runs): a
/// header (`u64` overflow count: accesses whose word found no entry),
/// then per slot `2^log2` entries of [`GlobalTable::ENTRY_U64S`] `u64`s:
/// the owner tag ([`GlobalTable::tag`]: block stamp and interval), the
/// word index, and the word's [`RECORDS`] records. An entry of another
/// tag is free: a block's entries die with its interval, nothing is
/// cleared. A word looks at [`GlobalTable::PROBES`] entries from its hash
/// and, finding neither its own nor a free one, goes unchecked and is
/// counted: a full table loses detection, never invents a race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalTable {
    /// log2 of a slot's entries.
    pub log2: u32,
}

impl GlobalTable {
    /// Bytes of the header.
    pub const HEADER: usize = 64;
    /// `u64`s per entry: tag, word, records.
    pub const ENTRY_U64S: usize = 2 + RECORDS;
    /// Entries a word looks at.
    pub const PROBES: usize = 8;

    /// Bytes of the table for `slots` slots.
    pub const fn bytes(&self, slots: usize) -> usize {
        Self::HEADER + slots * (1 << self.log2) * Self::ENTRY_U64S * 8
    }

    /// Which of a CTA's `regions` regions (its own, then its extension
    /// regions) holds the entry named `word`: the high bits of the hash
    /// whose low bits pick the entry ([`entry`](Self::entry)), so that
    /// every region is filled alike.
    pub const fn region(word: u64, regions: u32) -> u32 {
        let h = word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        ((h * regions as u64) >> 32) as u32
    }

    /// Byte offset of probe `i` of `word`'s entry in slot `slot`.
    pub const fn entry(&self, slot: usize, word: u64, i: usize) -> usize {
        let mask = (1u64 << self.log2) - 1;
        let h = word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let e = (h.wrapping_add(i as u64) & mask) as usize;
        Self::HEADER + (slot * (1 << self.log2) + e) * Self::ENTRY_U64S * 8
    }

    /// The tag of a block's (stamp) entries in one interval (never 0;
    /// bit 63 clear, so that no tag is a [`claiming`](Self::claiming)
    /// marker).
    pub const fn tag(stamp: u32, interval: u32) -> u64 {
        ((stamp as u64) << 32 | interval as u64) & !Self::CLAIMING
    }

    /// Bit 63 of a tag word: the entry is being claimed (its key written,
    /// its records cleared) for the word and interval whose key the other
    /// bits hold; the claimer then stores the tag, with release order.
    pub const CLAIMING: u64 = 1 << 63;

    /// The marker an entry holds while claimed for the word and interval
    /// whose entry key is `key`.
    pub const fn claiming(key: u64) -> u64 {
        key | Self::CLAIMING
    }
}

/// The operations [`claim_entry`] needs on an entry's tag and key words,
/// at the orders it needs: on the GPU the CTA's scope (only the CTA
/// holding the slot touches it), on the host `core`'s or loom's atomics.
pub trait TableWord {
    /// An acquiring load.
    fn load_acquire(&self) -> u64;
    /// A relaxed load.
    fn load_relaxed(&self) -> u64;
    /// A relaxed store.
    fn store_relaxed(&self, value: u64);
    /// A releasing store.
    fn store_release(&self, value: u64);
    /// An acquiring compare-and-swap from `current` to `new`; true when
    /// it swapped.
    fn cas_acquire(&self, current: u64, new: u64) -> bool;
    /// A relaxed compare-and-swap from `current` to `new`; true when it
    /// swapped.
    fn cas_relaxed(&self, current: u64, new: u64) -> bool;
    /// A relaxed swap: the value it replaced.
    fn swap_relaxed(&self, value: u64) -> u64;
}

/// `core`'s atomic at the orders the methods name (system scope on the
/// GPU: the device runtime uses its own CTA-scoped word; this serves the
/// host's tests and benchmarks).
impl TableWord for AtomicU64 {
    fn load_acquire(&self) -> u64 {
        self.load(Ordering::Acquire)
    }
    fn load_relaxed(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
    fn store_relaxed(&self, value: u64) {
        self.store(value, Ordering::Relaxed)
    }
    fn store_release(&self, value: u64) {
        self.store(value, Ordering::Release)
    }
    fn cas_acquire(&self, current: u64, new: u64) -> bool {
        self.compare_exchange(current, new, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
    fn cas_relaxed(&self, current: u64, new: u64) -> bool {
        self.compare_exchange(current, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
    fn swap_relaxed(&self, value: u64) -> u64 {
        self.swap(value, Ordering::Relaxed)
    }
}

/// Waits [`claim_entry`] allows for a claim of the same word in flight.
pub const CLAIM_WAITS: u32 = 64;

/// Finds or claims the same-block table entry with tag word `t` and key
/// word `k` for the word whose entry key is `key`, in the interval
/// `tag`: true when the entry is (now) the word's, its records ready
/// (`clear` empties them on a claim; `pause` waits a moment).
///
/// A claim marks the tag word [`GlobalTable::claiming`] for its key with
/// a CAS, writes the key, clears the records, then stores the tag with
/// release order; a thread that finds the tag acquires it, so it sees the
/// key and the cleared records. A thread that finds the entry being
/// claimed for its own word and interval waits (at most [`CLAIM_WAITS`]
/// pauses) for the claimer: the threads of a block on one hot word then
/// share one entry rather than each claiming the next probe, which filled
/// the probes and lost their checks. A claim for another word, the wait
/// running out, or the entry being another word's gives false: the
/// caller tries the next probe.
#[inline(always)]
pub fn claim_entry<W: TableWord>(
    t: &W,
    k: &W,
    tag: u64,
    key: u64,
    clear: impl Fn(),
    pause: impl Fn(),
) -> bool {
    let mine = GlobalTable::claiming(key);
    let mut waits = 0;
    loop {
        let found = t.load_acquire();
        if found == tag {
            return k.load_relaxed() == key;
        }
        if found & GlobalTable::CLAIMING != 0 {
            if found != mine || waits == CLAIM_WAITS {
                return false;
            }
            waits += 1;
            pause();
            continue;
        }
        if t.cas_acquire(found, mine) {
            k.store_relaxed(key);
            clear();
            t.store_release(tag);
            return true;
        }
        // Another thread changed the entry first: look at it again.
    }
}

/// Byte offset, in the same-block table's header ([`GlobalTable::HEADER`]
/// bytes; the overflow count is its first `u64`), of the `u64` count of
/// shared arrays (and dynamic shared views) declared without a `.shared`
/// shadow ([`MAX_SHADOW_BYTES`]) that the [`WindowShadow`] does not cover
/// either, once per array declaration and block: their accesses go
/// unchecked.
pub const UNCHECKED_ARRAYS: usize = 8;

/// A shared array's size and a byte offset in it, as one `u32` (the
/// record's `report.detail`): 16 bits each, enough for the 48 KiB of
/// static shared memory a block may declare; larger values saturate and
/// [`unpack_array`] then says nothing.
pub const fn pack_array(bytes: usize, offset: usize) -> u32 {
    let b = if bytes > 0xffff { 0 } else { bytes as u32 };
    b | (if offset > 0xffff { 0 } else { offset as u32 }) << 16
}

/// The array size and offset [`pack_array`] packed; `None` when unknown.
pub const fn unpack_array(detail: u32) -> Option<(u64, u64)> {
    let (bytes, offset) = ((detail & 0xffff) as u64, (detail >> 16) as u64);
    if bytes == 0 || offset >= bytes {
        None
    } else {
        Some((bytes, offset))
    }
}

// Divergent barriers (synccheck's job) on the GPU: every thread at a
// `sync_threads` notes, before it arrives, which call it arrives at (its
// *site*: the low 24 bits of the call's `Location` address,
// `barrier_site`). The first arrival of each barrier instance claims
// the CTA's barrier slot with `barrier_slot`; a later arrival that
// finds another site there sets the instance's divergence mark
// (`instance_marks`) before it arrives, so every thread sees it once
// past the barrier. The CTA's exit is a barrier too, so that a thread
// that returned early is seen: a warp whose threads all arrive there
// together sets the barrier's reduction predicate and touches nothing
// else; a warp that arrives in parts counts its threads into the
// instance's marks instead (a diverged warp's reduction is not
// reliable). The threads at a `sync_threads` learn from both that the
// instance was divergent. The exit's threads never claim the slot: the
// reporting thread finds them by their lane states
// (`DivergenceRecord::RETURNED`).

/// Bits of a site in the barrier slot.
const SITE_BITS: u32 = 24;

/// A barrier call's site: the low 24 bits of its `Location`'s address
/// (8-aligned, so bit 0, which the mask clears, is 0 anyway; a module's
/// locations lie within 16 MiB of each other, so two calls never share a
/// site).
pub const fn barrier_site(location: u64) -> u32 {
    location as u32 & ((1 << SITE_BITS) - 2)
}

/// The tag of barrier instance `barriers` (barriers passed before it) of
/// the block stamped `stamp`: 40 bits, never 0, so that slot and mark
/// values of earlier instances, or what an earlier CTA left in shared
/// memory, practically never match it.
pub const fn barrier_tag(stamp: u32, barriers: u32) -> u64 {
    let x = ((stamp as u64) << 16 | (barriers & 0xffff) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> SITE_BITS) | 1
}

/// The barrier slot's value for the first arrival at site `site` of the
/// instance tagged `tag`.
pub const fn barrier_slot(tag: u64, site: u32) -> u64 {
    tag << SITE_BITS | (site & ((1 << SITE_BITS) - 1)) as u64
}

/// The tag of a barrier slot's value.
pub const fn slot_tag(slot: u64) -> u64 {
    slot >> SITE_BITS
}

/// The site of a barrier slot's value.
pub const fn slot_site(slot: u64) -> u32 {
    (slot & ((1 << SITE_BITS) - 1)) as u32
}

/// Bits of an instance's marks that count the threads of diverged warps
/// that arrived from the CTA's exit (the bit below them: a thread found
/// another `sync_threads` call in the barrier slot).
const EXIT_COUNT_BITS: u32 = SITE_BITS - 1;

/// An instance's marks: what the threads of the barrier instance tagged
/// `tag` left for one another before arriving, `exits` threads of warps
/// that reached the CTA's exit in parts (the barrier's own count is not
/// reliable inside a diverged warp), and whether a thread found the
/// barrier slot holding another `sync_threads` call (`divergent`). The
/// tag makes an earlier instance's marks read as none.
pub const fn instance_marks(tag: u64, exits: u32, divergent: bool) -> u64 {
    // The barrier slot's packing, with the marks where the slot keeps a
    // site.
    let exits = exits & ((1 << EXIT_COUNT_BITS) - 1);
    barrier_slot(tag, exits << 1 | divergent as u32)
}

/// `seen` (a marks word) with `exits` more exit arrivals and, if
/// `divergent`, the divergence mark, for the instance tagged `tag`: an
/// earlier instance's marks are replaced, not added to.
pub const fn add_marks(seen: u64, tag: u64, exits: u32, divergent: bool) -> u64 {
    instance_marks(
        tag,
        marked_exits(seen, tag) + exits,
        marked_divergent(seen, tag) || divergent,
    )
}

/// The exit arrivals the marks `marks` count for the instance tagged
/// `tag` (0 when they are another instance's).
pub const fn marked_exits(marks: u64, tag: u64) -> u32 {
    if slot_tag(marks) == tag {
        slot_site(marks) >> 1
    } else {
        0
    }
}

/// True when the marks `marks` say the instance tagged `tag` had threads
/// at two `sync_threads` calls.
pub const fn marked_divergent(marks: u64, tag: u64) -> bool {
    slot_tag(marks) == tag && slot_site(marks) & 1 == 1
}

/// Which group of a divergence report a thread at the `sync_threads` at
/// `site` belongs to, when the instance's first arrival was at `first`:
/// [`DivergenceRecord::FIRST`] (the same call) or
/// [`DivergenceRecord::OTHER`] (another one). The threads that returned
/// are [`DivergenceRecord::RETURNED`], found by the reporting thread.
pub const fn divergence_group(first: u32, site: u32) -> usize {
    if site == first {
        DivergenceRecord::FIRST
    } else {
        DivergenceRecord::OTHER
    }
}

/// The threads of one group of a divergence report: how many, the lowest
/// and highest linear index, and which of threads 0..64 are in it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct ThreadGroup {
    /// Threads in the group.
    pub count: u32,
    /// Lowest thread index (`u32::MAX` when empty).
    pub first: u32,
    /// Highest thread index.
    pub last: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Bit `t`: thread `t` (< 64) is in the group.
    pub low: u64,
}

impl Default for ThreadGroup {
    fn default() -> Self {
        ThreadGroup::EMPTY
    }
}

impl ThreadGroup {
    /// No thread.
    pub const EMPTY: ThreadGroup = ThreadGroup {
        count: 0,
        first: u32::MAX,
        last: 0,
        reserved: 0,
        low: 0,
    };

    /// The group with thread `t` added (the device does the same with
    /// atomics: add, min, max, or).
    pub const fn with(self, t: u32) -> ThreadGroup {
        ThreadGroup {
            count: self.count + 1,
            first: if t < self.first { t } else { self.first },
            last: if t > self.last { t } else { self.last },
            reserved: 0,
            low: self.low | if t < 64 { 1 << t } else { 0 },
        }
    }

    /// Every thread of the group, when the record knows them all (they
    /// are below 64, or a run from `first` to `last`): thread `t` is in
    /// it when `contains(t)`. `None` when only the count, the first and
    /// the last are known.
    pub const fn exact(&self) -> Option<ThreadSet> {
        if self.count == 0 {
            Some(ThreadSet::Low(0))
        } else if self.last < 64 {
            Some(ThreadSet::Low(self.low))
        } else if self.last - self.first + 1 == self.count {
            Some(ThreadSet::Run(self.first, self.last))
        } else {
            None
        }
    }
}

/// A set of threads a [`ThreadGroup`] knows exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadSet {
    /// The threads whose bits are set (all below 64).
    Low(u64),
    /// Threads `first..=last`.
    Run(u32, u32),
}

impl ThreadSet {
    /// True when thread `t` is in the set.
    pub const fn contains(&self, t: u32) -> bool {
        match *self {
            ThreadSet::Low(m) => t < 64 && m >> t & 1 == 1,
            ThreadSet::Run(a, b) => a <= t && t <= b,
        }
    }
}

/// Byte offsets of a CTA's divergent-barrier state in its `.shared`
/// memory (only sanitized entries have it): the barrier slot
/// ([`barrier_slot`] of the instance's first arrival), two instance
/// marks (of even and odd instances: [`instance_marks`]), and, once an
/// instance is divergent, the groups of its report: the header (the
/// block's stamp, so that an earlier CTA's leftovers are cleared once),
/// the threads counted so far, the [`DivergenceRecord`] fields `mixed`,
/// `first`, `other` and `groups`.
#[derive(Clone, Copy, Debug)]
pub struct BarrierCheck;

impl BarrierCheck {
    /// The barrier slot (`u64`).
    pub const SLOT: usize = 0;
    /// The marks of even instances (`u64`: [`instance_marks`]).
    pub const MARKS: usize = 8;
    /// The report's header (`u32`: the block's stamp).
    pub const HEADER: usize = 16;
    /// Threads that counted themselves into the report (`u32`).
    pub const DONE: usize = 20;
    /// [`DivergenceRecord::mixed`] (`u32`).
    pub const MIXED: usize = 24;
    /// [`DivergenceRecord::first`] (`u64`).
    pub const FIRST: usize = 32;
    /// [`DivergenceRecord::other`] (`u64`).
    pub const OTHER: usize = 40;
    /// The three [`ThreadGroup`]s.
    pub const GROUPS: usize = 48;
    /// The marks of odd instances (`u64`).
    pub const ODD_MARKS: usize = Self::GROUPS + 3 * core::mem::size_of::<ThreadGroup>();
    /// Bytes of the whole state.
    pub const BYTES: usize = Self::ODD_MARKS + 8;

    /// Byte offset of group `g`'s field at `field` (an offset in
    /// [`ThreadGroup`]).
    pub const fn group(g: usize, field: usize) -> usize {
        Self::GROUPS + g * core::mem::size_of::<ThreadGroup>() + field
    }

    /// Byte offset of the marks of the instance that follows `barriers`
    /// barriers. Two words, so that an instance's marks stay until every
    /// thread of it has read them: the next instance's are written by
    /// threads that passed it, and the one after needs every reader of
    /// it to arrive first.
    pub const fn marks(barriers: u32) -> usize {
        if barriers % 2 == 0 {
            Self::MARKS
        } else {
            Self::ODD_MARKS
        }
    }
}
const _: () = assert!(
    BarrierCheck::GROUPS % 8 == 0 && BarrierCheck::ODD_MARKS % 8 == 0 && BarrierCheck::BYTES == 128
);

/// The [`RaceReport::kind`](crate::abi::RaceReport::kind) of a
/// [`DivergenceRecord`] (outside [`ReportKind`]'s values).
pub const DIVERGENT_BARRIER_KIND: u32 = 64;

/// A divergent barrier of one CTA, as the GPU writes it into the report
/// buffer in place of a [`GpuReportRecord`](crate::gpu::GpuReportRecord)
/// (same size; `kind` and `kernel_id` where a race record has them): the
/// barrier instance's first arrival's call, another call threads waited at,
/// and the threads of each group ([`divergence_group`]). Written once per
/// CTA, by the last thread to count itself after the barrier.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct DivergenceRecord {
    /// [`DIVERGENT_BARRIER_KIND`].
    pub kind: u32,
    /// 1 when the [`OTHER`](Self::OTHER) group's threads waited at more
    /// than one call ([`other`](Self::other) names one of them).
    pub mixed: u32,
    /// `Location` address of the first arrival's `sync_threads` (the
    /// CTA's exit claims no slot: its threads are the
    /// [`RETURNED`](Self::RETURNED) group).
    pub first: u64,
    /// `Location` address of a call the [`OTHER`](Self::OTHER) group waited
    /// at (0: none).
    pub other: u64,
    /// Threads in the block.
    pub threads: u32,
    /// Linear block index in the grid.
    pub block: u32,
    /// Device rank.
    pub device: u32,
    /// SM.
    pub sm: u32,
    /// Launch id (where a race record's `site.kernel_id` is).
    pub kernel_id: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The threads at [`first`](Self::first), elsewhere, and at the exit.
    pub groups: [ThreadGroup; 3],
    /// Reserved, zero.
    pub tail: [u32; 2],
}

impl DivergenceRecord {
    /// Group of the threads at the first arrival's call.
    pub const FIRST: usize = 0;
    /// Group of the threads at another call.
    pub const OTHER: usize = 1;
    /// Group of the threads that reached the CTA's exit instead.
    pub const RETURNED: usize = 2;
}
const _: () = assert!(core::mem::size_of::<DivergenceRecord>() == 128);
const _: () = assert!(
    core::mem::offset_of!(DivergenceRecord, kernel_id)
        == core::mem::offset_of!(crate::gpu::GpuReportRecord, report)
            + core::mem::offset_of!(crate::abi::RaceReport, site)
            + core::mem::offset_of!(crate::abi::AccessSite, kernel_id)
);

/// Where a race inside a block happened, in bits 16..24 of a
/// [`RaceReport::access`](crate::abi::RaceReport::access) (0: a race
/// between blocks, as the engine reports). For [`BlockSpace::Shared`]
/// the record's `report.detail` is the shared array's size and the
/// first racing byte's offset in it ([`pack_array`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum BlockSpace {
    /// A block's shared memory.
    Shared = 1,
    /// Global memory, between threads of one block.
    Global = 2,
}

/// Bit position of the [`BlockSpace`] in an access word.
pub const SPACE_SHIFT: u32 = 16;

impl BlockSpace {
    /// `access` (an access word) marked as a race inside a block in `self`.
    pub const fn mark(self, access: u32) -> u32 {
        access | (self as u32) << SPACE_SHIFT
    }

    /// The space an access word is marked with, if any.
    pub const fn of(access: u32) -> Option<BlockSpace> {
        match (access >> SPACE_SHIFT) & 0xff {
            1 => Some(BlockSpace::Shared),
            2 => Some(BlockSpace::Global),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_its_epoch_within_the_window_and_its_location() {
        let loc = 0x7f00_1234_5678_u64 & !7;
        for epoch in [1u16, 5, 127, 128, 129, 1000, 16383] {
            let r = BlockRecord::new(700, true, 0b0110, 0xbeef, epoch, loc).with_view(5);
            // Any access of the same window completes the epoch.
            let now = epoch | 0x7f;
            assert_eq!(r.epoch(now), epoch);
            assert_eq!(r.epoch(epoch & !0x7f), epoch);
            assert_eq!(r.thread(), Some(700));
            assert!(r.atomic());
            assert_eq!(r.bytes(), 0b0110);
            assert_eq!(r.count(), 0xbeef);
            assert_eq!(r.view(), 5);
            assert_eq!(r.access_location(loc + 0x40_0000), loc);
            assert_eq!(r.access_location(loc - 0x40_0000), loc);
        }
    }

    #[test]
    fn an_acquired_release_orders_the_accesses_of_its_epoch_and_before_only() {
        let acquired = BlockAcquired {
            known: 130,
            observed: 0,
        };
        let at = |e| BlockRecord::new(40, false, 0xf, 0, e, 0x1000);
        assert!(acquired.orders(at(129), 131));
        assert!(acquired.orders(at(130), 131));
        assert!(!acquired.orders(at(131), 131));
        assert!(!BlockAcquired::default().orders(at(1), 1));
        // Through `race_between`: the same conflict, ordered or not by
        // what the block acquired.
        let me = BlockRecord::new(3, false, 0xf, 0, 131, 0x2000);
        let lane = |_| LaneSync::default();
        let race = |prior| {
            race_between(prior, true, me, AccessKind::Read, lane, |p| {
                acquired.orders(p, 131)
            })
        };
        assert_eq!(race(at(130)), None);
        assert_eq!(race(at(131)), Some(ReportKind::ReadAfterWrite));
    }

    #[test]
    fn a_new_window_of_epochs_is_a_new_interval() {
        assert_eq!(access_interval(2, 127), access_interval(2, 0));
        assert_ne!(access_interval(2, 128), access_interval(2, 127));
        assert_ne!(access_interval(3, 5), access_interval(2, 5));
    }

    #[test]
    fn records_keep_every_field() {
        for (t, atomic, count) in [(0, false, 0), (1023, true, COUNT_MASK), (31, false, 7)] {
            let near = 0x7f00_1234_0000u64;
            let loc = near + 0x5_4320;
            let r = BlockRecord::new(t, atomic, 0b1010, count, 1, loc);
            assert_eq!(
                (r.thread(), r.atomic(), r.count()),
                (Some(t), atomic, count)
            );
            assert_eq!(r.bytes(), 0b1010);
            let wider = r.with_bytes(0b1111);
            assert_eq!(
                (wider.bytes(), wider.thread(), wider.count()),
                (0b1111, Some(t), count)
            );
            assert_eq!(r.location(near), loc);
            // A location below `near` too.
            assert_eq!(r.location(loc + 0x10_0000), loc);
            assert_eq!(r.view(), 0);
            for view in 1..=VIEWS as u32 {
                let v = r.with_view(view);
                assert_eq!(
                    (v.view(), v.access_location(near), v.thread(), v.count()),
                    (view, loc, Some(t), count)
                );
                assert_eq!(v.bytes(), 0b1010);
                assert_eq!(v.with_view(0), r);
            }
        }
        assert_eq!(BlockRecord::EMPTY.thread(), None);
    }

    /// Views get distinct numbers while the table has room, the same
    /// number again, and 0 once it is full of other sites.
    #[test]
    fn views_are_numbered_once_each() {
        let table: [AtomicU32; VIEWS] = Default::default();
        let sites: [u32; VIEWS + 1] = core::array::from_fn(|i| 0x4000_0008 + 24 * i as u32);
        let numbers: [u32; VIEWS] = core::array::from_fn(|i| view_number(&table, sites[i]));
        for (i, n) in numbers.iter().enumerate() {
            assert!((1..=VIEWS as u32).contains(n));
            assert_eq!(table[*n as usize - 1].load(Ordering::Relaxed), sites[i]);
            assert_eq!(view_number(&table, sites[i]), *n);
            assert!(!numbers[..i].contains(n), "{numbers:?}");
        }
        assert_eq!(view_number(&table, sites[VIEWS]), 0);
        assert_eq!(view_number(&table, 0), 0);
        assert_eq!(
            near_address(0x1234_5678, 0x7f00_1200_0000),
            0x7f00_1234_5678
        );
    }

    /// The ordering rule against a reference: a list of every collective
    /// (its lanes) each thread joined.
    #[test]
    fn collectives_order_exactly_their_lanes_or_hide_only() {
        let masks = [u32::MAX, 0x0000_ffff, 0xffff_0000, 0b11, 1 << 5 | 1 << 9];
        for &first in &masks {
            for &second in &masks {
                for joined in 0..=2usize {
                    let (p, me) = (5u32, 9u32);
                    let prior = BlockRecord::new(p, false, 0xf, 0, 1, 0);
                    let mut lane = LaneSync::default();
                    let seq = [first, second];
                    for m in &seq[..joined] {
                        lane = lane.joined(*m);
                    }
                    // Reference: some collective after the access holds `me`.
                    let truth = seq[..joined].iter().any(|m| m & (1 << me) != 0);
                    let got = ordered(prior, me, lane);
                    if joined <= 1 {
                        assert_eq!(got, truth, "{seq:x?} {joined}");
                    } else {
                        assert!(got || !truth, "invented a race: {seq:x?}");
                    }
                }
            }
        }
        // Other warps are never ordered by collectives; one's own access always is.
        let prior = BlockRecord::new(3, false, 0xf, 0, 1, 0);
        assert!(!ordered(prior, 35, LaneSync(0).joined(u32::MAX).joined(1)));
        assert!(ordered(prior, 3, LaneSync::default()));
    }

    #[test]
    fn conflicts_need_a_write_and_a_plain_access() {
        let lane = |_| LaneSync::default();
        let w = BlockRecord::new(1, false, 0b11, 0, 1, 0);
        let a = BlockRecord::new(1, true, 0b11, 0, 1, 0);
        let me = BlockRecord::new(40, false, 0b10, 0, 1, 0);
        let k = |p, wr, c| race_between(p, wr, me, c, lane, |_| false);
        assert_eq!(
            k(w, true, AccessKind::Read),
            Some(ReportKind::ReadAfterWrite)
        );
        assert_eq!(
            k(w, true, AccessKind::Write),
            Some(ReportKind::WriteAfterWrite)
        );
        assert_eq!(
            k(w, false, AccessKind::Write),
            Some(ReportKind::WriteAfterRead)
        );
        assert_eq!(k(w, false, AccessKind::Read), None);
        assert_eq!(k(a, true, AccessKind::AtomicRmw), None);
        assert_eq!(
            k(a, true, AccessKind::Write),
            Some(ReportKind::AtomicNonAtomic)
        );
        assert_eq!(
            k(w, false, AccessKind::AtomicRmw),
            Some(ReportKind::AtomicNonAtomic)
        );
        let own = BlockRecord::new(1, false, 0xf, 0, 1, 0);
        assert_eq!(
            race_between(w, true, own, AccessKind::Write, lane, |_| false),
            None
        );
        let other_bytes = BlockRecord::new(40, false, 0b1100, 0, 1, 0);
        assert_eq!(
            race_between(w, true, other_bytes, AccessKind::Write, lane, |_| false),
            None
        );
    }

    #[test]
    fn a_writer_always_meets_a_reader_of_another_thread() {
        // Readers in any order: the writer races with one unless every
        // reader was the writer itself.
        for readers in [&[1u32, 2][..], &[2, 1, 3], &[1, 1], &[4, 1, 1, 4]] {
            let mut slots = [BlockRecord::EMPTY; RECORDS];
            for &r in readers {
                let me = BlockRecord::new(r, false, 0xf, 0, 1, 0);
                if let Some((slot, new)) = reader_update(slots[1], slots[2], me) {
                    slots[slot] = new;
                }
            }
            for writer in 1..=4 {
                let races = (1..3).any(|s| {
                    let w = BlockRecord::new(writer, false, 0xf, 0, 1, 0);
                    race_between(
                        slots[s],
                        false,
                        w,
                        AccessKind::Write,
                        |_| LaneSync::default(),
                        |_| false,
                    )
                    .is_some()
                });
                assert_eq!(
                    races,
                    readers.iter().any(|&r| r != writer),
                    "{readers:?} {writer}"
                );
            }
        }
    }

    #[test]
    fn layout_and_markers() {
        let l = ShadowLayout::of(33 * 32 * 4);
        assert_eq!(l.words, 1056);
        assert_eq!(l.record(0, 0), ShadowLayout::HEADER);
        assert_eq!(l.interval(0), ShadowLayout::HEADER + 1056 * 24);
        assert_eq!(l.bytes() % 8, 0);
        assert!(l.bytes() >= l.interval(1055) + 4);
        assert_eq!(ShadowLayout::of(2).words, 1);
        assert_eq!(
            BlockSpace::of(BlockSpace::Shared.mark(0x0104)),
            Some(BlockSpace::Shared)
        );
        assert_eq!(BlockSpace::of(0x0104), None);
        let s = block_stamp(7, 3);
        assert_eq!((s & 1, busy(s) & 1), (1, 0));
        let l = LaneSync::default().joined(7).passed_barrier().joined(9);
        assert_eq!((l.count(), l.barriers(), l.last_mask()), (2, 1, 9));
        let wrapped = LaneSync(0xffff_ffff).joined(1).passed_barrier();
        assert_eq!((wrapped.count(), wrapped.barriers()), (0, 0));
        assert_ne!(report_key(ReportKind::WriteAfterRead, 0, 0), 0);
        assert_eq!(word_mask(8, 6, 10), 0b0011);
        assert_eq!(word_mask(8, 9, 11), 0b0110);
        assert_eq!(word_mask(8, 0, 100), 0b1111);
        // A race is one key from either side.
        assert_eq!(
            report_key(ReportKind::WriteAfterRead, 0x10, 0x20),
            report_key(ReportKind::ReadAfterWrite, 0x20, 0x10)
        );
        assert_eq!(
            report_key(ReportKind::WriteAfterWrite, 0x10, 0x20),
            report_key(ReportKind::WriteAfterWrite, 0x20, 0x10)
        );
        assert_ne!(
            report_key(ReportKind::ReadAfterWrite, 0x10, 0x20),
            report_key(ReportKind::ReadAfterWrite, 0x20, 0x10)
        );
        assert_eq!(unpack_array(pack_array(4096, 12)), Some((4096, 12)));
        assert_ne!(access_interval(0, 0), 0);
        assert_ne!(access_interval(1, 0), access_interval(0, 1));
        let t = GlobalTable { log2: 4 };
        assert_eq!(t.bytes(2), GlobalTable::HEADER + 2 * 16 * 40);
        for w in 0..100u64 {
            for i in 0..GlobalTable::PROBES {
                let e = t.entry(1, w, i);
                assert!(e >= GlobalTable::HEADER + 16 * 40 && e + 40 <= t.bytes(2));
                assert_eq!((e - GlobalTable::HEADER) % 40, 0);
            }
        }
        assert_eq!(unpack_array(pack_array(1 << 20, 12)), None);
    }

    /// A CTA's words and lines spread over all of its regions, about
    /// evenly, whatever their number; one region takes everything.
    #[test]
    fn entries_spread_over_a_ctas_regions() {
        for regions in [1u32, 2, 3, 5, 17, 33] {
            let mut count = [0u32; 33];
            let names = 4096u64 * u64::from(regions);
            for w in 0..names {
                // Consecutive words and consecutive lines alike.
                for name in [w, (1 << 62) | w] {
                    let r = GlobalTable::region(name, regions);
                    assert!(r < regions);
                    count[r as usize] += 1;
                }
            }
            let mean = (2 * names / u64::from(regions)) as u32;
            for &c in &count[..regions as usize] {
                assert!(
                    c > mean * 9 / 10 && c < mean * 11 / 10,
                    "{regions}: {c} of {mean}"
                );
            }
        }
    }

    #[test]
    fn window_entries_tile_the_region() {
        let w = WindowShadow::covering(4097, 2);
        assert_eq!(w.words, 1025);
        let sms = 3;
        // Entries are consecutive: each one 32 bytes after the last, from
        // the header to the region's end, SM by SM and region by region.
        let mut next = WindowShadow::HEADER as u64;
        for sm in 0..sms {
            for region in 0..2 {
                let slot = w.slot(sm, region).unwrap();
                for word in 0..w.words {
                    assert_eq!(w.entry(slot, word), next);
                    next += WindowShadow::ENTRY as u64;
                }
            }
        }
        assert_eq!(next, w.bytes(u64::from(sms)));
        assert_eq!(w.slot(0, 2), None);
        assert!(w.covers(4096, 4) && w.covers(0, 4100) && !w.covers(4097, 4));
        assert!(!w.covers(u64::MAX, 1));
        // Tags differ by block and by interval, and are never empty.
        let (a, b) = (block_stamp(1, 0), block_stamp(1, 1));
        assert_ne!(WindowShadow::tag(a, 1), WindowShadow::tag(b, 1));
        assert_ne!(WindowShadow::tag(a, 1), WindowShadow::tag(a, 2));
        assert_ne!(WindowShadow::tag(a, 0), 0);
    }

    /// Marks added in any order by the threads of one instance give the
    /// sum of their exits and whether any saw a divergence; an earlier
    /// instance's marks, or what an earlier CTA left, count for nothing.
    #[test]
    fn instance_marks_add_up_within_their_instance() {
        let stamp = block_stamp(7, 3);
        for barriers in [0u32, 1, 2, 65_535] {
            let tag = barrier_tag(stamp, barriers);
            let earlier = barrier_tag(stamp, barriers.wrapping_sub(2));
            for (stale, parts) in [
                (0u64, &[(3u32, false), (0, true), (1_024, false)][..]),
                (instance_marks(earlier, 7, true), &[(0, false)][..]),
                (
                    instance_marks(earlier, 5, false),
                    &[(32, false), (31, false)][..],
                ),
            ] {
                assert_eq!(marked_exits(stale, tag), 0);
                assert!(!marked_divergent(stale, tag));
                let marks = parts.iter().fold(stale, |m, &(exits, divergent)| {
                    add_marks(m, tag, exits, divergent)
                });
                let exits: u32 = parts.iter().map(|p| p.0).sum();
                let divergent = parts.iter().any(|p| p.1);
                assert_eq!(marked_exits(marks, tag), exits);
                assert_eq!(marked_divergent(marks, tag), divergent);
                assert_eq!(slot_tag(marks), tag);
            }
        }
        // A block's every thread fits the count.
        let tag = barrier_tag(stamp, 9);
        let all = instance_marks(tag, MAX_BLOCK_THREADS as u32, true);
        assert_eq!(marked_exits(all, tag), MAX_BLOCK_THREADS as u32);
        assert_ne!(BarrierCheck::marks(4), BarrierCheck::marks(5));
        assert_eq!(BarrierCheck::marks(4), BarrierCheck::marks(6));
    }

    #[test]
    fn barrier_slots_keep_tag_and_site() {
        for loc in [0x7f00_0000_0008u64, 0x7f00_00ff_fff8, 0x1_0000_0000] {
            let site = barrier_site(loc);
            let tag = barrier_tag(block_stamp(3, 9), 17);
            let slot = barrier_slot(tag, site);
            assert_eq!((slot_tag(slot), slot_site(slot)), (tag, site));
        }
        // Two calls less than 16 MiB apart have different sites.
        assert_ne!(
            barrier_site(0x7f00_00ff_fff8),
            barrier_site(0x7f00_0100_0010)
        );
        // Instances and blocks get different tags, never 0.
        let s = block_stamp(3, 9);
        assert_ne!(barrier_tag(s, 0), barrier_tag(s, 1));
        assert_ne!(barrier_tag(s, 0), barrier_tag(block_stamp(3, 10), 0));
        assert_ne!(barrier_tag(s, 0), 0);
    }
}
