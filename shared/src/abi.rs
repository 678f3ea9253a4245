//! `#[repr(C)]` layouts shared by the host, the PTX runtime and the CPU
//! backend, with compile-time size and offset assertions.
//!
//! Everything here is plain data ([`bytemuck::Pod`]): the host fills it with
//! ordinary writes and copies, the device reads it through atomics at the
//! word offsets the `*_WORD` constants name (the assertions tie the two).

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

use crate::memory_model::{AccessKind, Scope};

/// Bytes of user memory one shadow cell covers.
pub const WORD_BYTES: u64 = 4;
/// Bytes of shadow per 4-byte word in the common (compact) state.
pub const COMPACT_SHADOW_BYTES_PER_WORD: u64 = size_of::<crate::shadow::ShadowCell>() as u64;
/// Bytes of shadow per 4-byte word once inflated (the compact cell, now a
/// tagged pool index, plus its pool record), before any chain record.
pub const INFLATED_SHADOW_BYTES_PER_WORD: u64 =
    COMPACT_SHADOW_BYTES_PER_WORD + size_of::<InflatedRecord>() as u64;
/// Access clocks an inflated record keeps itself (reads and writes
/// together); older ones move to its chain of [`ChainRecord`]s.
pub const RECORD_ACCESS_SLOTS: usize = 8;
/// Access clocks one [`ChainRecord`] keeps.
pub const CHAIN_ACCESS_SLOTS: usize = 14;
/// Release heads an inflated record keeps. A word keeps one head per
/// class of releaser (device, scope) whatever the number of releasers (the
/// heads of one class are joined exactly), so 4 slots are exact for words
/// released from up to two devices; beyond, heads are merged into one
/// *wide* head that every acquirer acquires (counted in
/// [`PoolHeader::merged_heads`]: races may be missed, none invented).
pub const RECORD_RELEASE_SLOTS: usize = 4;
/// Thread-id bits of the engine: records, release heads and reports keep
/// 16-bit sanitizer thread ids, so at most [`MAX_THREADS`] sanitizer
/// threads over all devices (8 GPUs x 132 SMs x 32 CTA slots = 33,792 fit).
/// Compact cells keep fewer bits ([`crate::shadow::COMPACT_TID_BITS`]);
/// a clock with a larger id simply makes its word inflate.
pub const THREAD_ID_BITS: u32 = 16;
/// The most sanitizer threads (`num_threads`) the engine supports.
pub const MAX_THREADS: u32 = 1 << THREAD_ID_BITS;
/// Slots in a stream's ring of kernel exit clocks (docs/src/design/ordering.md).
pub const STREAM_RING_SLOTS: u32 = 3;

const _: () = assert!(
    COMPACT_SHADOW_BYTES_PER_WORD <= 8,
    "the compact budget is 8 bytes per word"
);

/// Per-device constants of the sanitizer, at the start of each device's
/// runtime-state region (see [`crate::address::global_state_of`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GlobalState {
    /// Base of the 1 TiB shadow/user reservation (1 TiB aligned).
    pub reserve_base: u64,
    /// Base of the per-device runtime-state reservation (device 0's region).
    pub globals_base: u64,
    /// Device address of the report buffer ([`ReportBufferHeader`] + records).
    pub report_buffer: u64,
    /// Device address of the inflated-record pool ([`PoolHeader`] + records).
    pub pool_base: u64,
    /// Seed of the random replacement of evicted access clocks.
    pub rng_seed: u32,
    /// SMs per device (sanitizer threads per device).
    pub num_sms: u32,
    /// Devices taking part.
    pub num_devices: u32,
    /// `num_sms * num_devices`: the length of every vector clock.
    pub num_threads: u32,
    /// Snapshots in each thread's clock buffer.
    pub clock_buffer_size: u32,
    /// Records the report buffer holds.
    pub report_capacity: u32,
    /// Records the inflated pool holds.
    pub pool_capacity: u32,
    /// Bytes of one thread state (header, clocks and clock buffer).
    pub thread_state_bytes: u32,
}
const _: () = assert!(size_of::<GlobalState>() == 64);
const _: () = assert!(offset_of!(GlobalState, reserve_base) == 0);
const _: () = assert!(offset_of!(GlobalState, globals_base) == 8);
const _: () = assert!(offset_of!(GlobalState, report_buffer) == 16);
const _: () = assert!(offset_of!(GlobalState, pool_base) == 24);
const _: () = assert!(offset_of!(GlobalState, rng_seed) == 32);
const _: () = assert!(offset_of!(GlobalState, num_threads) == 44);
const _: () = assert!(offset_of!(GlobalState, clock_buffer_size) == 48);
const _: () = assert!(offset_of!(GlobalState, thread_state_bytes) == 60);

/// Entries of [`ThreadStateHeader::acquired`].
pub const ACQUIRED_SNAPSHOTS: usize = 4;

/// A release snapshot a thread joined (see [`ThreadStateHeader::acquired`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AcquiredSnapshot {
    /// Bits 0..16: the releasing thread; bits 16..19: where the snapshot
    /// was joined ([`AcquiredSnapshot::CLOCK`],
    /// [`AcquiredSnapshot::PENDING_DEVICE`],
    /// [`AcquiredSnapshot::PENDING_SYSTEM`]); 0: an empty entry.
    pub joined: u32,
    /// The snapshot's token in the releaser's clock buffer.
    pub token: u32,
    /// The newest own epoch of the releaser joined with it.
    pub epoch: u32,
}
impl AcquiredSnapshot {
    /// u32 words of an entry.
    pub const WORDS: usize = size_of::<Self>() / 4;
    /// Joined into the vector clock.
    pub const CLOCK: u32 = 1 << 16;
    /// Joined into the same-device pending clock.
    pub const PENDING_DEVICE: u32 = 1 << 17;
    /// Joined into the other-device pending clock.
    pub const PENDING_SYSTEM: u32 = 1 << 18;
}
const _: () = assert!(size_of::<AcquiredSnapshot>() == 12);
const _: () = assert!(offset_of!(AcquiredSnapshot, epoch) == 8);

/// Header of one sanitizer thread's state. In memory it is followed by
/// `num_threads` u32 each of: the vector clock, the pending clock acquired
/// by relaxed reads from same-device releasers, the same from other-device
/// releasers (both consumed by acquire fences), the *overflow clock* (the
/// join of every snapshot the ring overwrote), then `clock_buffer_size`
/// published snapshots (see [`crate::clock`]), then the release history's
/// [`RELEASE_HISTORY_FIXED_WORDS`] words and one reference count per
/// snapshot slot (see [`crate::history`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ThreadStateHeader {
    /// Reader/writer lock ([`crate::atomic::RwSpinLock`]).
    pub lock: u32,
    /// The sanitizer thread id (`device_rank * num_sms + smid`).
    pub tid: u32,
    /// Snapshots published so far; the last token issued (tokens start at 1).
    pub clock_head: u32,
    /// [`DIRTY`](ThreadStateHeader::DIRTY) / [`PUBLISHED`](ThreadStateHeader::PUBLISHED) /
    /// [`RING_CURRENT`](ThreadStateHeader::RING_CURRENT) /
    /// [`PENDING`](ThreadStateHeader::PENDING) /
    /// [`EXIT_PUBLISHED`](ThreadStateHeader::EXIT_PUBLISHED) flags.
    pub dirty: u32,
    /// Counter of the seeded eviction choices made by this thread.
    pub read_counter: u32,
    /// Token of the last release fence of scope device or wider (0: none).
    pub fence_token_device: u32,
    /// Token of the last release fence of scope system (0: none).
    pub fence_token_system: u32,
    /// Token of the last published snapshot (0: none).
    pub last_token: u32,
    /// Own epoch at the last release fence of scope device or wider.
    pub fence_epoch_device: u32,
    /// Own epoch at the last release fence of scope system.
    pub fence_epoch_system: u32,
    /// Acquires of this thread's releases that found their snapshot
    /// overwritten and not spilled into the pool (see [`crate::history`]),
    /// and used the overflow clock instead (precision lost).
    pub coarsened: u32,
    /// The launch whose inputs (the stream's previous kernel and join
    /// list) the vector clock already holds, plus one (0: none): a CTA
    /// following another of the same launch in this slot skips the join.
    pub joined_launch: u32,
    /// Release snapshots this thread joined lately, direct-mapped by
    /// releaser and token: an atomic that reads the same release again (a
    /// spinning poller) skips the join of `num_threads` entries (see
    /// [`crate::clock`]).
    pub acquired: [AcquiredSnapshot; ACQUIRED_SNAPSHOTS],
}
impl ThreadStateHeader {
    /// The vector clock changed since the last snapshot.
    pub const DIRTY: u32 = 1;
    /// The current epoch was published: the next access bumps it first.
    pub const PUBLISHED: u32 = 2;
    /// The stream ring slot of [`joined_launch`](Self::joined_launch)
    /// holds every entry of the vector clock but the own one: no other
    /// entry grew since this thread's last exit published it there, so the
    /// next exit in that launch publishes the own entry alone.
    pub const RING_CURRENT: u32 = 4;
    /// A pending clock holds something (a relaxed read from a release
    /// waiting for an acquire fence): the next CTA entry clears them.
    pub const PENDING: u32 = 8;
    /// The current epoch was published by CTA exits of
    /// [`joined_launch`](Self::joined_launch) alone (into its stream ring
    /// slot, which nothing reads before the launch ends), no snapshot
    /// since: the launch's next CTA in the slot goes on in this epoch
    /// rather than starting one (see [`crate::clock`]).
    pub const EXIT_PUBLISHED: u32 = 16;
    /// u32 words in the header.
    pub const WORDS: usize = size_of::<Self>() / 4;
    /// Word index of [`ThreadStateHeader::lock`].
    pub const LOCK_WORD: usize = offset_of!(Self, lock) / 4;
    /// Word index of [`ThreadStateHeader::tid`].
    pub const TID_WORD: usize = offset_of!(Self, tid) / 4;
    /// Word index of [`ThreadStateHeader::clock_head`].
    pub const HEAD_WORD: usize = offset_of!(Self, clock_head) / 4;
    /// Word index of [`ThreadStateHeader::dirty`].
    pub const DIRTY_WORD: usize = offset_of!(Self, dirty) / 4;
    /// Word index of [`ThreadStateHeader::read_counter`].
    pub const COUNTER_WORD: usize = offset_of!(Self, read_counter) / 4;
    /// Word index of [`ThreadStateHeader::fence_token_device`].
    pub const FENCE_DEVICE_WORD: usize = offset_of!(Self, fence_token_device) / 4;
    /// Word index of [`ThreadStateHeader::fence_token_system`].
    pub const FENCE_SYSTEM_WORD: usize = offset_of!(Self, fence_token_system) / 4;
    /// Word index of [`ThreadStateHeader::last_token`].
    pub const LAST_TOKEN_WORD: usize = offset_of!(Self, last_token) / 4;
    /// Word index of [`ThreadStateHeader::fence_epoch_device`].
    pub const FENCE_EPOCH_DEVICE_WORD: usize = offset_of!(Self, fence_epoch_device) / 4;
    /// Word index of [`ThreadStateHeader::fence_epoch_system`].
    pub const FENCE_EPOCH_SYSTEM_WORD: usize = offset_of!(Self, fence_epoch_system) / 4;
    /// Word index of [`ThreadStateHeader::coarsened`].
    pub const COARSENED_WORD: usize = offset_of!(Self, coarsened) / 4;
    /// Word index of [`ThreadStateHeader::joined_launch`].
    pub const JOINED_LAUNCH_WORD: usize = offset_of!(Self, joined_launch) / 4;
    /// Word index of the first [`AcquiredSnapshot`].
    pub const ACQUIRED_WORD: usize = offset_of!(Self, acquired) / 4;
}
const _: () = assert!(size_of::<ThreadStateHeader>() == 96);
const _: () = assert!(offset_of!(ThreadStateHeader, acquired) == 48);
const _: () = assert!(offset_of!(ThreadStateHeader, fence_epoch_device) == 32);
const _: () = assert!(offset_of!(ThreadStateHeader, coarsened) == 40);
const _: () = assert!(offset_of!(ThreadStateHeader, joined_launch) == 44);
const _: () = assert!(offset_of!(ThreadStateHeader, lock) == 0);
const _: () = assert!(offset_of!(ThreadStateHeader, clock_head) == 8);
const _: () = assert!(offset_of!(ThreadStateHeader, last_token) == 28);

/// Clocks of `num_threads` entries in a thread state besides its clock
/// buffer: the vector clock, two pending clocks, the overflow clock.
pub const THREAD_STATE_CLOCKS: usize = 4;

/// u32 words of one thread state: header, vector clock, two pending
/// clocks, overflow clock, clock buffer.
///
/// Memory: a device holds one state per sanitizer thread of its own, each
/// about `4 * (THREAD_STATE_CLOCKS + clock_buffer_size) * num_threads`
/// bytes. For 132 SMs x 16 CTA slots (2,112 sanitizer threads per GPU) and
/// the default 32 snapshots: 2,112 x 36 x 2,112 x 4 B = 613 MiB on one
/// GPU; with 8 such GPUs (16,896 threads, every clock 8 times longer)
/// 4.8 GiB per GPU, 38.3 GiB in all. With 8 snapshots (enough once
/// releases share snapshots): 204 MiB, and 1.6 GiB per GPU (12.8 GiB in
/// all). Release heads and derived snapshots need nothing more: heads live
/// in the word's pooled record, derived snapshots in the buffer. A
/// snapshot still named by a head when its slot is reused moves to the
/// record pool (`ceil(num_threads / 28)` records: 76 for 2,112 threads,
/// 604 for 16,896), given back when the last head naming it goes.
pub const fn thread_state_words(num_threads: u32, clock_buffer_size: u32) -> usize {
    ThreadStateHeader::WORDS
        + (THREAD_STATE_CLOCKS + clock_buffer_size as usize) * num_threads as usize
        + RELEASE_HISTORY_FIXED_WORDS
        + clock_buffer_size as usize
}

/// u32 words of a thread state's release history besides its reference
/// counts: a spin lock, then the pool index + 1 of the first snapshot
/// spilled into the pool (0: none).
pub const RELEASE_HISTORY_FIXED_WORDS: usize = 2;

/// Clock entries one [`SpillRecord`] holds.
pub const SPILL_ENTRIES: usize = 28;

/// A pool record holding part of a snapshot spilled out of its thread's
/// clock buffer because release heads still named it when its slot was
/// needed again (see [`crate::history`]). A snapshot of `num_threads`
/// entries takes `ceil(num_threads / SPILL_ENTRIES)` records linked through
/// `next`; the first one's `token`, `refs` and `next_snapshot` describe it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SpillRecord {
    /// Pool index + 1 of the snapshot's next record (0: the last); links
    /// the pool's free list too, like [`ChainRecord::next`].
    pub next: u32,
    /// First record: the snapshot's clock-buffer token.
    pub token: u32,
    /// First record: release heads naming the snapshot.
    pub refs: u32,
    /// First record: pool index + 1 of the thread's next spilled snapshot.
    pub next_snapshot: u32,
    /// Clock entries `k * SPILL_ENTRIES ..` of the snapshot (record `k`).
    pub entries: [u32; SPILL_ENTRIES],
}
impl SpillRecord {
    /// Word index of `next`.
    pub const NEXT_WORD: usize = offset_of!(Self, next) / 4;
    /// Word index of `token`.
    pub const TOKEN_WORD: usize = offset_of!(Self, token) / 4;
    /// Word index of `refs`.
    pub const REFS_WORD: usize = offset_of!(Self, refs) / 4;
    /// Word index of `next_snapshot`.
    pub const NEXT_SNAPSHOT_WORD: usize = offset_of!(Self, next_snapshot) / 4;
    /// Word index of the first entry.
    pub const ENTRY_WORD: usize = offset_of!(Self, entries) / 4;
}
const _: () = assert!(size_of::<SpillRecord>() == 128);
const _: () = assert!(offset_of!(SpillRecord, next) == offset_of!(ChainRecord, next));
const _: () = assert!(offset_of!(SpillRecord, entries) == 16);

/// Bytes of one thread state, rounded up to 16 bytes.
pub const fn thread_state_bytes(num_threads: u32, clock_buffer_size: u32) -> u64 {
    ((thread_state_words(num_threads, clock_buffer_size) as u64 * 4) + 15) & !15
}

/// A scalar clock: one access (or one release) of one thread.
///
/// For accesses `epoch` is the thread's epoch at the access; for a release
/// head ([`ScalarClock::RELEASE`] set) it is a token naming a snapshot in the
/// thread's clock buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ScalarClock {
    /// Epoch, or clock-buffer token for a release head.
    pub epoch: u32,
    /// Sanitizer thread id.
    pub tid: u16,
    /// Bits 0..2: [`Scope`] of the atomic (`as u8`); bits 2..8: the
    /// atomic's extent ([`crate::shadow::AccessClock::extent`]). Zero for
    /// plain accesses.
    pub scope: u8,
    /// Bit 0 valid, bit 1 write, bit 2 atomic, bit 3 release, bits 4..8 the
    /// byte mask within the word.
    pub flags: u8,
}
impl ScalarClock {
    /// The slot is in use.
    pub const VALID: u8 = 1;
    /// The access wrote.
    pub const WRITE: u8 = 2;
    /// The access was atomic.
    pub const ATOMIC: u8 = 4;
    /// `epoch` is a clock-buffer token of a release.
    pub const RELEASE: u8 = 8;
    /// Shift of the byte mask in `flags`.
    pub const MASK_SHIFT: u8 = 4;
    /// Shift of the extent in `scope`.
    pub const EXTENT_SHIFT: u8 = 2;
}
const _: () = assert!(size_of::<ScalarClock>() == 8);
const _: () = assert!(offset_of!(ScalarClock, tid) == 4);
const _: () = assert!(offset_of!(ScalarClock, flags) == 7);

/// A release head as a record keeps it: the releaser, its scope, the
/// snapshot (clock-buffer token) and the releaser's epoch at the release
/// (the snapshot may predate it; see [`crate::clock`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ReleaseSlot {
    /// Own epoch of the releaser at the release.
    pub epoch: u32,
    /// Clock-buffer token of the snapshot.
    pub token: u32,
    /// Releasing sanitizer thread.
    pub tid: u16,
    /// [`Scope`] of the release (`as u8`).
    pub scope: u8,
    /// Bit 0 valid, bit 1 derived (the snapshot joins other releasers'),
    /// bit 2 wide (merged heads: every acquirer acquires it).
    pub flags: u8,
}
impl ReleaseSlot {
    /// The slot is in use.
    pub const VALID: u8 = 1;
    /// The snapshot is a join made for this word, not the releaser's clock.
    pub const DERIVED: u8 = 2;
    /// Merged heads of several classes (precision lost).
    pub const WIDE: u8 = 4;
}
const _: () = assert!(size_of::<ReleaseSlot>() == 12);
const _: () = assert!(offset_of!(ReleaseSlot, tid) == 8);

/// The inflated form of a shadow cell, kept in a separate pool and found
/// from the compact cell's tagged index (see [`crate::shadow`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct InflatedRecord {
    /// The record's lock, which also counts the atomic-set fast path's
    /// raisers and versions every hold ([`crate::atomic::RecordLock`]).
    pub lock: u32,
    /// Bit 0: an access clock was evicted from this record (precision
    /// lost). Bit 1 ([`InflatedRecord::SET_FAST_PATH`]): the word has an
    /// atomic set, no chain and no release head, so the set's class may
    /// raise its entries without the lock. Bits 2..32: pool index + 1 of the word's
    /// [`AtomicSetHeader`] (0: none; see [`crate::atomic_set`]).
    pub meta: u32,
    /// Last write of the word for release-sequence continuation: bit 31
    /// valid, bits 24..30 extent, bits 16..18 scope, bits 0..16 tid.
    pub last_write: u32,
    /// Pool index + 1 of the first [`ChainRecord`] holding the word's older
    /// access clocks (0: none). The record's lock covers its whole chain.
    pub chain: u32,
    /// The newest access clocks (reads and writes), oldest first.
    pub accesses: [ScalarClock; RECORD_ACCESS_SLOTS],
    /// Release heads whose release sequence the word's value continues.
    pub releases: [ReleaseSlot; RECORD_RELEASE_SLOTS],
}
impl InflatedRecord {
    /// u32 words in a record.
    pub const WORDS: usize = size_of::<Self>() / 4;
    /// Word index of the lock.
    pub const LOCK_WORD: usize = offset_of!(Self, lock) / 4;
    /// Word index of `meta`.
    pub const META_WORD: usize = offset_of!(Self, meta) / 4;
    /// Word index of `last_write`.
    pub const LAST_WRITE_WORD: usize = offset_of!(Self, last_write) / 4;
    /// Word index of `chain`.
    pub const CHAIN_WORD: usize = offset_of!(Self, chain) / 4;
    /// Word index of the first access clock.
    pub const ACCESS_WORD: usize = offset_of!(Self, accesses) / 4;
    /// Word index of the first release head.
    pub const RELEASE_WORD: usize = offset_of!(Self, releases) / 4;
    /// `meta` bit: an access clock was evicted.
    pub const LOSSY: u32 = 1;
    /// `meta` bit: the set's fast path is open (an atomic set, no chain,
    /// no release head).
    pub const SET_FAST_PATH: u32 = 2;
    /// Shift of the atomic set's pool index + 1 in `meta`.
    pub const SET_SHIFT: u32 = 2;
}
const _: () = assert!(size_of::<InflatedRecord>() == 128);
const _: () = assert!(offset_of!(InflatedRecord, accesses) == 16);
const _: () = assert!(offset_of!(InflatedRecord, releases) == 80);
const _: () = assert!(size_of::<ReleaseSlot>() * RECORD_RELEASE_SLOTS == 48);
const _: () = assert!(offset_of!(InflatedRecord, chain) == 12);

/// A pool record continuing an [`InflatedRecord`]'s access history: a word
/// needing more access clocks than its record keeps links records like
/// this one from the same pool (see [`crate::engine`]), and gives each
/// back to the pool's free list once its clocks are gone. A free record
/// links the free list through `next` too.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ChainRecord {
    /// Pool index + 1 of the next record of the chain (0: the last).
    pub next: u32,
    /// Reserved, zero.
    pub reserved: [u32; 3],
    /// Access clocks, in no particular order (unused slots not valid).
    pub accesses: [ScalarClock; CHAIN_ACCESS_SLOTS],
}
impl ChainRecord {
    /// Word index of `next`.
    pub const NEXT_WORD: usize = offset_of!(Self, next) / 4;
    /// Word index of the first access clock.
    pub const ACCESS_WORD: usize = offset_of!(Self, accesses) / 4;
}
const _: () = assert!(size_of::<ChainRecord>() == size_of::<InflatedRecord>());
const _: () = assert!(offset_of!(ChainRecord, next) == 0);
const _: () = assert!(offset_of!(ChainRecord, accesses) == 16);

/// The first record of an *atomic set* (see [`crate::atomic_set`]): the
/// history of a word that only atomic writes of one class touched, one
/// epoch per sanitizer thread. The entries (`u32`, indexed by thread id,
/// 0: no access) fill the [`atomic_set_records`]`(num_threads) - 1`
/// records that follow it in the pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AtomicSetHeader {
    /// The class every entry shares: bits 0..4 the byte mask, 4..10 the
    /// atomic extent, 10..12 the scope, 16..32 the device (of every entry,
    /// for device scope).
    pub class: u32,
    /// Records the set occupies, this one included.
    pub records: u32,
    /// Entries in use (non-zero): raised from zero by whoever raises one,
    /// lowered under the word's lock by whoever clears one.
    pub used: u32,
    /// Reserved, zero.
    pub reserved: [u32; 29],
}
impl AtomicSetHeader {
    /// Word index of `class`.
    pub const CLASS_WORD: usize = offset_of!(Self, class) / 4;
    /// Word index of `records`.
    pub const RECORDS_WORD: usize = offset_of!(Self, records) / 4;
    /// Word index of `used`.
    pub const USED_WORD: usize = offset_of!(Self, used) / 4;
}
const _: () = assert!(size_of::<AtomicSetHeader>() == size_of::<InflatedRecord>());
const _: () = assert!(offset_of!(AtomicSetHeader, records) == 4);
const _: () = assert!(offset_of!(AtomicSetHeader, used) == 8);

/// Pool records an atomic set of `num_threads` entries occupies: its
/// header and one `u32` per thread.
pub const fn atomic_set_records(num_threads: u32) -> u32 {
    1 + (num_threads * 4).div_ceil(size_of::<InflatedRecord>() as u32)
}

/// Header of the inflated-record pool; records ([`InflatedRecord`]s and
/// [`ChainRecord`]s alike) follow at [`PoolHeader::WORDS`],
/// [`InflatedRecord::WORDS`] words each.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PoolHeader {
    /// Records handed out by the bump allocator (given-back ones are
    /// reused from the free list first).
    pub next: u32,
    /// Records the pool holds.
    pub capacity: u32,
    /// Access clocks evicted so far because no record was left for a
    /// word's chain (precision lost), over all records.
    pub evictions: u32,
    /// Records allocated but never published (0: inflation claims the
    /// cell before allocating).
    pub wasted: u32,
    /// Release heads merged into wide heads because a word had more
    /// classes of releasers than [`RECORD_RELEASE_SLOTS`] (precision lost).
    pub merged_heads: u32,
    /// Accesses to words that needed a record when the pool was full: the
    /// word stayed compact with its newest write and read clocks that fit
    /// and the older ones dropped (precision lost: races with the dropped
    /// clocks may be missed, none invented).
    pub degraded: u32,
    /// The free list of records given back (emptied [`ChainRecord`]s):
    /// `reserved[0]` its spin lock, `reserved[1]` the pool index + 1 of its
    /// first record (0: empty), linked through [`ChainRecord::next`]. Zero
    /// at start (the name stays for the hosts that build the header).
    pub reserved: [u32; 2],
}
impl PoolHeader {
    /// u32 words in the header.
    pub const WORDS: usize = size_of::<Self>() / 4;
    /// Word index of [`PoolHeader::next`].
    pub const NEXT_WORD: usize = offset_of!(Self, next) / 4;
    /// Word index of [`PoolHeader::capacity`].
    pub const CAPACITY_WORD: usize = offset_of!(Self, capacity) / 4;
    /// Word index of [`PoolHeader::evictions`].
    pub const EVICTIONS_WORD: usize = offset_of!(Self, evictions) / 4;
    /// Word index of [`PoolHeader::wasted`].
    pub const WASTED_WORD: usize = offset_of!(Self, wasted) / 4;
    /// Word index of the free list's spin lock.
    pub const FREE_LOCK_WORD: usize = offset_of!(Self, reserved) / 4;
    /// Word index of the free list's first record (index + 1).
    pub const FREE_HEAD_WORD: usize = Self::FREE_LOCK_WORD + 1;
    /// Word index of [`PoolHeader::merged_heads`].
    pub const MERGED_WORD: usize = offset_of!(Self, merged_heads) / 4;
    /// Word index of [`PoolHeader::degraded`].
    pub const DEGRADED_WORD: usize = offset_of!(Self, degraded) / 4;
    /// Where the header's counters stop counting (they stay there until a
    /// host takes them): they say that precision was lost and roughly how
    /// much, and an atomic on one address per access of a hot word cost a
    /// sanitized GEMM about a tenth of its time on an H100.
    pub const COUNT_CAP: u32 = 1 << 16;
    /// Byte range of the counters a host takes at each collection
    /// ([`PoolHeader::history_lost`]): `evictions` to `degraded` (with
    /// `wasted`, always 0, between).
    pub const LOST_HISTORY_BYTES: core::ops::Range<usize> =
        offset_of!(Self, evictions)..offset_of!(Self, degraded) + 4;

    /// Accesses that lost part of a word's history, as these counts say:
    /// access clocks evicted, release heads merged, accesses kept compact
    /// with older clocks dropped. Races with what was lost can be missed;
    /// none is invented.
    pub const fn history_lost(&self) -> u64 {
        self.evictions as u64 + self.merged_heads as u64 + self.degraded as u64
    }
}
const _: () = assert!(size_of::<PoolHeader>() == 32);
const _: () = assert!(offset_of!(PoolHeader, merged_heads) == 16);
const _: () = assert!(offset_of!(PoolHeader, degraded) == 20);
const _: () = assert!(offset_of!(PoolHeader, reserved) == 24);

/// What a report record says.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// A read unordered with an earlier write.
    ReadAfterWrite = 1,
    /// A write unordered with an earlier read.
    WriteAfterRead = 2,
    /// A write unordered with an earlier write.
    WriteAfterWrite = 3,
    /// An atomic and a plain access, unordered, at least one writing.
    AtomicNonAtomic = 4,
    /// Two atomics whose scopes do not include each other's threads.
    ScopeMismatch = 5,
    /// Two atomics that overlap without covering the same bytes (not
    /// morally strong in the PTX model, whatever their scopes).
    AtomicSizeMismatch = 6,
    /// Error: a thread's epoch can no longer be represented.
    EpochOverflow = 16,
    /// Error: an acquire needed a snapshot its releaser already overwrote.
    /// No longer emitted (the overflow clock stands in, counted in
    /// [`ThreadStateHeader::coarsened`]); the code stays reserved.
    ClockBufferExhausted = 17,
    /// Error: the inflated-record pool is full and the word has release
    /// heads (a word without them stays compact with older clocks dropped,
    /// counted in [`PoolHeader::degraded`]).
    ShadowPoolExhausted = 18,
    /// Error: a word needed more release heads than a record keeps. No
    /// longer emitted (heads are joined per class, then merged, counted in
    /// [`PoolHeader::merged_heads`]); the code stays reserved.
    ReleaseSlotsExhausted = 19,
}
impl ReportKind {
    /// The kind from its `u32` value.
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::ReadAfterWrite,
            2 => Self::WriteAfterRead,
            3 => Self::WriteAfterWrite,
            4 => Self::AtomicNonAtomic,
            5 => Self::ScopeMismatch,
            6 => Self::AtomicSizeMismatch,
            16 => Self::EpochOverflow,
            17 => Self::ClockBufferExhausted,
            18 => Self::ShadowPoolExhausted,
            19 => Self::ReleaseSlotsExhausted,
            _ => return None,
        })
    }

    /// True for the error kinds (not race verdicts).
    pub const fn is_error(self) -> bool {
        self as u32 >= 16
    }
}

/// Where an access comes from: passed by the instrumented kernel (or the
/// CPU backend) with every hook and copied into reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AccessSite {
    /// Pointer to the UTF-8 file name (from `#[track_caller]`), 0 if none.
    pub file_ptr: u64,
    /// Length of the file name in bytes.
    pub file_len: u32,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub col: u32,
    /// For a race inside a block on shared memory: the low 32 bits of the
    /// address of the `Location` where the shared view of this access was
    /// allocated (its `shared_array!`, or a stack tile's push); the high
    /// bits are those of the earlier access's `Location` (one module's
    /// statics lie within 2 GiB). 0: unknown, or not such a race.
    pub view_site: u32,
    /// Kernel (launch) id.
    pub kernel_id: u32,
    /// Linear block index in the grid.
    pub block: u32,
    /// Linear thread index in the block.
    pub thread: u32,
    /// As [`AccessSite::view_site`], for the earlier access's view.
    pub prior_view_site: u32,
}
const _: () = assert!(size_of::<AccessSite>() == 40);

/// One record in the report buffer: a race or an engine error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RaceReport {
    /// [`ReportKind`] as u32.
    pub kind: u32,
    /// Bytes of the current access.
    pub size: u32,
    /// For races, the first byte both accesses touch; for errors, the
    /// address of the current access.
    pub address: u64,
    /// The current access's source site.
    pub site: AccessSite,
    /// Current sanitizer thread.
    pub tid: u32,
    /// Current device rank.
    pub device: u32,
    /// Current SM.
    pub sm: u32,
    /// Current epoch.
    pub epoch: u32,
    /// Current access: [`AccessKind`] in bits 0..8, [`Scope`] in bits 8..16.
    pub access: u32,
    /// Earlier access's sanitizer thread.
    pub prior_tid: u32,
    /// Earlier access's epoch.
    pub prior_epoch: u32,
    /// Earlier access: [`AccessKind`] in bits 0..8, [`Scope`] in bits 8..16.
    pub prior_access: u32,
    /// Byte mask (within the first racing word) the two accesses share.
    pub overlap_mask: u32,
    /// For errors: the value that did not fit (epoch, token, ...).
    pub detail: u32,
}
const _: () = assert!(size_of::<RaceReport>() == 96);
const _: () = assert!(offset_of!(RaceReport, site) == 16);
const _: () = assert!(offset_of!(RaceReport, tid) == 56);
const _: () = assert!(offset_of!(RaceReport, prior_tid) == 76);

impl RaceReport {
    /// u32 words in a record.
    pub const WORDS: usize = size_of::<Self>() / 4;

    /// The record's kind, if it is a known one.
    pub fn report_kind(&self) -> Option<ReportKind> {
        ReportKind::from_u32(self.kind)
    }

    /// Packs an access kind and scope the way `access`/`prior_access` hold them.
    pub const fn pack_access(kind: AccessKind, scope: Scope) -> u32 {
        kind as u32 | (scope as u32) << 8
    }
}

/// Header of the report buffer; records follow at [`ReportBufferHeader::WORDS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ReportBufferHeader {
    /// Records claimed so far (may exceed `capacity`; the rest were dropped).
    pub count: u32,
    /// Records the buffer holds.
    pub capacity: u32,
    /// Reserved, zero.
    pub reserved: [u32; 2],
}
impl ReportBufferHeader {
    /// u32 words in the header.
    pub const WORDS: usize = size_of::<Self>() / 4;
}
const _: () = assert!(size_of::<ReportBufferHeader>() == 16);
