//! The GPU sanitizer's launch ABI: what the host hands a sanitized PTX
//! entry (`name__vigil`) and what the device hands back.
//!
//! A sanitized entry takes [`HIDDEN_PARAMS`] after the user's parameters:
//! the device's [`GpuRuntime`] (in device memory, one per device and
//! context), the launching stream's [`StreamClocks`], the kernel's number
//! on that stream, its context-wide launch id and its read-only ranges
//! ([`crate::read_only::ReadOnlyRanges`], as `u64` bounds).
//!
//! Sanitizer threads: every resident CTA claims one of
//! [`GpuRuntime::slots_per_sm`] slots of its SM at entry and releases it at
//! exit, so two live CTAs never share a thread state and occupancy is not
//! capped (docs/src/design/engine.md). Thread ids are
//! `tid = (rank * num_sms + smid) * slots + slot` ([`slot_tid`]). The
//! host writes `num_sms * slots` (sanitizer threads per device) as the
//! [`GlobalState`](crate::abi::GlobalState)'s `num_sms`, so the engine's
//! device of a tid is still `tid / num_sms` and a device region holds one
//! thread state per slot.
//!
//! Reports: the device writes [`GpuReportRecord`]s (the engine's record plus
//! the earlier access's [`SideEntry`]) into a host-mapped buffer with a
//! [`ReportBufferHeader`](crate::abi::ReportBufferHeader); claims past the
//! capacity are counted, never written. Each context has its own buffer,
//! named by its streams' [`StreamClocks::reports`]: one device's sanitized
//! contexts (parallel tests) neither fill each other's buffer nor get
//! each other's dropped counts.

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{RaceReport, WORD_BYTES};
use crate::atomic::{AtomicFamily, AtomicU32Ops};
use crate::clock::ThreadClocks;
use crate::params::{ParamDesc, PtxType};
use crate::{AccessKind, Scope};

/// Largest number of sanitizer slots per SM (resident CTAs per SM on
/// sm_90 is at most 32, and the slot mask is one `u32`).
pub const MAX_SLOTS_PER_SM: u32 = 32;

/// Thread ids the engine's common (compact) path represents.
pub const THREAD_ID_LIMIT: u32 = 1 << crate::shadow::COMPACT_TID_BITS;

/// Slots per SM for `num_sms` SMs on each of `num_devices` devices: as many
/// as the thread-id space allows, at most [`MAX_SLOTS_PER_SM`]; 0 when not
/// even one slot per SM fits.
pub const fn slots_per_sm(num_sms: u32, num_devices: u32) -> u32 {
    let sms = num_sms as u64 * num_devices as u64;
    if sms == 0 {
        return 0;
    }
    let s = THREAD_ID_LIMIT as u64 / sms;
    if s > MAX_SLOTS_PER_SM as u64 {
        MAX_SLOTS_PER_SM
    } else {
        s as u32
    }
}

/// The sanitizer thread of slot `slot` of SM `smid` on device `rank`.
#[inline(always)]
pub const fn slot_tid(rank: u32, smid: u32, num_sms: u32, slots: u32, slot: u32) -> u32 {
    (rank * num_sms + smid) * slots + slot
}

/// Where a sanitizer thread runs: the inverse of [`slot_tid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPlace {
    /// Device rank.
    pub device: u32,
    /// SM on that device.
    pub sm: u32,
    /// Slot on that SM.
    pub slot: u32,
}

impl SlotPlace {
    /// Splits `tid` for `num_sms` SMs with `slots` slots each.
    pub const fn of(tid: u32, num_sms: u32, slots: u32) -> SlotPlace {
        let slots = if slots == 0 { 1 } else { slots };
        let sms = if num_sms == 0 { 1 } else { num_sms };
        let sm_global = tid / slots;
        SlotPlace {
            device: sm_global / sms,
            sm: sm_global % sms,
            slot: tid % slots,
        }
    }
}

/// The PTX parameters a sanitized entry takes after the user's.
pub const HIDDEN_PARAMS: &[ParamDesc] = &[
    ParamDesc {
        name: "__vigil_runtime",
        rust_type: "*const GpuRuntime",
        parts: &[PtxType::Ptr],
    },
    ParamDesc {
        name: "__vigil_stream",
        rust_type: "*const StreamClocks",
        parts: &[PtxType::Ptr],
    },
    ParamDesc {
        name: "__vigil_kernel",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_launch",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_read_only_0_start",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "__vigil_read_only_0_end",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "__vigil_read_only_1_start",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "__vigil_read_only_1_end",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
];
const _: () = assert!(HIDDEN_PARAMS.len() == 4 + 2 * crate::read_only::READ_ONLY_RANGES);

/// Suffix of a sanitized entry's name (`axpy` -> `axpy__vigil`).
pub const SANITIZED_SUFFIX: &str = "__vigil";

/// Per-device sanitizer runtime, in device memory, written once by the
/// host. Every pointer is a device address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuRuntime {
    /// This device's [`GlobalState`](crate::abi::GlobalState) (its
    /// runtime-state region; thread states follow at
    /// [`THREAD_STATES_OFFSET`](crate::address::THREAD_STATES_OFFSET)).
    pub globals: u64,
    /// [`SmSlots`] per SM of this device.
    pub slot_table: u64,
    /// Side table: [`SideEntry`] x `2^side_log2`.
    pub side_table: u64,
    /// SC-fence clocks (`sc_fence_words` u32; 0: none).
    pub sc_fences: u64,
    /// u32 words at `sc_fences`.
    pub sc_fence_words: u32,
    /// log2 of the side table's entries.
    pub side_log2: u32,
    /// Slots per SM ([`slots_per_sm`]).
    pub slots_per_sm: u32,
    /// [`GpuRuntime::HALT_ON_RACE`], ...
    pub flags: u32,
    /// This device's rank.
    pub rank: u32,
    /// Records every context's report buffer holds (in device memory, so
    /// that a report does not read it over the bus from the buffer).
    pub report_capacity: u32,
    /// The same-block table of global words: a header then, per
    /// sanitizer thread (SM slot), `2^block_table_log2` entries (see
    /// [`crate::block::GlobalTable`]); 0: none, same-block global races
    /// go unchecked.
    pub block_table: u64,
    /// log2 of a slot's entries in `block_table`.
    pub block_table_log2: u32,
    /// Slots the table has entries for (SMs x slots per SM).
    pub block_table_slots: u32,
    /// Lane states of threads past [`crate::block::SHARED_LANES`]: per
    /// slot ([`block_table_slots`](Self::block_table_slots)),
    /// [`crate::block::GLOBAL_LANES`] `u64`s; 0: none, those threads'
    /// shared and same-block accesses go unchecked.
    pub block_lanes: u64,
    /// The window shadow ([`crate::block::WindowShadow`]) of the
    /// shared memory `.shared` shadows do not cover, per slot; 0: none
    /// yet. The host replaces it with a larger one when a launch needs it.
    pub block_shadow: u64,
}
impl GpuRuntime {
    /// Trap the kernel after the first race or error it records.
    pub const HALT_ON_RACE: u32 = 1;
}
const _: () = assert!(size_of::<GpuRuntime>() == 88);
const _: () = assert!(offset_of!(GpuRuntime, globals) == 0);
const _: () = assert!(offset_of!(GpuRuntime, slot_table) == 8);
const _: () = assert!(offset_of!(GpuRuntime, side_table) == 16);
const _: () = assert!(offset_of!(GpuRuntime, sc_fences) == 24);
const _: () = assert!(offset_of!(GpuRuntime, sc_fence_words) == 32);
const _: () = assert!(offset_of!(GpuRuntime, slots_per_sm) == 40);
const _: () = assert!(offset_of!(GpuRuntime, flags) == 44);
const _: () = assert!(offset_of!(GpuRuntime, rank) == 48);
const _: () = assert!(offset_of!(GpuRuntime, report_capacity) == 52);
const _: () = assert!(offset_of!(GpuRuntime, block_table) == 56);
const _: () = assert!(offset_of!(GpuRuntime, block_table_log2) == 64);
const _: () = assert!(offset_of!(GpuRuntime, block_lanes) == 72);
const _: () = assert!(offset_of!(GpuRuntime, block_shadow) == 80);

/// The slots of one SM: a busy mask and a round-robin hint, so that CTAs
/// running one after another on an SM take different slots (and thread
/// states) while slots last.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SmSlots {
    /// Bit `s` set: slot `s` is held by a live CTA.
    pub busy: u32,
    /// Claims so far (the next claim starts looking at `next % slots`).
    pub next: u32,
}
impl SmSlots {
    /// u32 words per SM.
    pub const WORDS: usize = size_of::<Self>() / 4;
}
const _: () = assert!(size_of::<SmSlots>() == 8);

/// Most join sources a stream's next kernel takes (events waited on, host
/// synchronisations); more are merged by the host keeping the newest.
pub const MAX_JOINS: usize = 30;

/// A stream's clocks, in device memory: the join list its next kernel
/// acquires (written by the host in stream order before a launch) and the
/// ring of kernel exit clocks (docs/src/design/ordering.md), `3 * num_threads` u32 after
/// the header.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct StreamClocks {
    /// Join sources in `joins`.
    pub join_count: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The report buffer (host-mapped: a
    /// [`ReportBufferHeader`](crate::abi::ReportBufferHeader), then its
    /// capacity of [`GpuReportRecord`]s) of the context that owns the
    /// stream (0: none, reports are lost).
    pub reports: u64,
    /// Device addresses of `num_threads`-entry clocks to join at entry
    /// (ring slots of other streams, event clocks).
    pub joins: [u64; MAX_JOINS],
}
impl StreamClocks {
    /// Bytes before the ring.
    pub const RING_OFFSET: u64 = size_of::<Self>() as u64;
    /// Bytes of a stream's clocks for `num_threads` threads.
    pub const fn bytes(num_threads: u32) -> u64 {
        Self::RING_OFFSET + 4 * crate::abi::STREAM_RING_SLOTS as u64 * num_threads as u64
    }
    /// Device address of ring slot `slot` of the clocks at `base`.
    pub const fn ring_slot(base: u64, num_threads: u32, slot: u32) -> u64 {
        base + Self::RING_OFFSET + 4 * slot as u64 * num_threads as u64
    }
}
const _: () = assert!(size_of::<StreamClocks>() == 16 + 8 * MAX_JOINS);
const _: () = assert!(offset_of!(StreamClocks, reports) == 8);
const _: () = assert!(offset_of!(StreamClocks, joins) == 16);
const _: () = assert!(StreamClocks::RING_OFFSET % 16 == 0);

/// What a sanitizer thread last read (or wrote) of a word in one epoch,
/// for the "earlier access" half of a report: noted with every checked
/// access, looked up when a race names an earlier access. A hash table
/// keyed by word, thread *and* epoch, so that a lookup finds the race's
/// own earlier access however many other threads (or later blocks of the
/// same CTA slot) touched the word since (a hot atomic, an in-place
/// stencil); an entry is trusted only when all three match the engine's
/// record, so a stale entry of a reused address is never shown.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SideEntry {
    /// Device address of the access's `core::panic::Location` (0: empty).
    pub location: u64,
    /// Word index (from the real base), low 32 bits.
    pub word: u32,
    /// Sanitizer thread.
    pub tid: u32,
    /// Its epoch at the access.
    pub epoch: u32,
    /// Linear block index.
    pub block: u32,
    /// Linear thread index in the block.
    pub thread: u32,
    /// Launch id of the kernel.
    pub launch: u32,
}
impl SideEntry {
    /// u64 words in an entry.
    pub const U64S: usize = size_of::<Self>() / 8;
}
const _: () = assert!(size_of::<SideEntry>() == 32);
const _: () = assert!(offset_of!(SideEntry, word) == 8);
const _: () = assert!(offset_of!(SideEntry, launch) == 28);

/// Entries of one side-table set: an access's entry goes to one of the
/// ways of its set, so that it survives up to `SIDE_WAYS - 1` later notes
/// of other accesses hashing to the same set (a report of a kernel whose
/// every block races looks up hundreds of entries; a lone slot per key
/// lost a fraction of a percent of them, and with them some reports'
/// earlier half).
pub const SIDE_WAYS: u64 = 4;

/// The first entry of the side-table set of sanitizer thread `tid`'s
/// write (`write`) or read of `word` in `epoch`, in a table of `2^log2`
/// entries; the set is that entry and the next `SIDE_WAYS - 1`. Keyed by
/// the epoch too: a CTA slot's next block (a new epoch) touching the same
/// word leaves the earlier block's entry in place.
#[inline(always)]
pub const fn side_set(word: u64, tid: u32, epoch: u32, write: bool, log2: u32) -> u64 {
    // Fibonacci hashing of (word, thread, epoch) picks a pair of sets:
    // reads, then writes.
    let who = (tid as u64) | (epoch as u64) << 32;
    let key = word ^ who.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    let pair_bits = log2.saturating_sub(3);
    let pair = if pair_bits == 0 {
        0
    } else {
        key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - pair_bits)
    };
    (pair << 1 | write as u64) * SIDE_WAYS
}

/// One report of the GPU sanitizer: the engine's record and what the side
/// table knew about the earlier access when the race was found.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuReportRecord {
    /// The engine's record.
    pub report: RaceReport,
    /// The earlier access (all zero when the side table had lost it).
    pub prior: SideEntry,
}
impl GpuReportRecord {
    /// u32 words in a record.
    pub const WORDS: usize = size_of::<Self>() / 4;
}
const _: () = assert!(size_of::<GpuReportRecord>() == 128);
const _: () = assert!(offset_of!(GpuReportRecord, prior) == 96);

/// Lane `lane` of `lanes`' share of a CTA entry: joins entries `lane`,
/// `lane + lanes`, ... of clock `src` (`num_threads` entries: a stream
/// ring slot or a join source) into thread `tid`'s vector clock, except
/// its own entry. The CTA's threads together do what
/// [`Engine::kernel_entry`](crate::engine::Engine::kernel_entry) does for
/// one clock, each on distinct entries; one of them holds the thread
/// state's write lock for all.
pub fn join_clock_part<F: AtomicFamily>(
    clocks: &ThreadClocks<'_, F>,
    tid: u32,
    src: &[F::U32],
    lane: u32,
    lanes: u32,
) {
    let mut j = lane;
    while j < clocks.num_threads() {
        if j != tid {
            if let Some(v) = src.get(j as usize) {
                clocks.join_entry(j, v.load(MemOrder::Relaxed));
            }
        }
        j += lanes.max(1);
    }
}

/// Lane `lane` of `lanes`' share of a CTA exit: `dst[j] = max(dst[j],
/// VC[j])` for entries `lane`, `lane + lanes`, ... (what
/// [`Engine::kernel_exit`](crate::engine::Engine::kernel_exit) does before
/// marking the clock published, which one lane does after all shares).
pub fn publish_clock_part<F: AtomicFamily>(
    clocks: &ThreadClocks<'_, F>,
    dst: &[F::U32],
    lane: u32,
    lanes: u32,
) {
    let mut j = lane;
    while j < clocks.num_threads() {
        if let Some(d) = dst.get(j as usize) {
            d.fetch_max(clocks.get(j), MemOrder::Relaxed);
        }
        j += lanes.max(1);
    }
}

/// Lane `lane` of `lanes`' share of a CTA exit's publication into the
/// launch's ring slot `ring`: the whole clock ([`publish_clock_part`])
/// unless `current` ([`ThreadClocks::ring_current`], read by every lane
/// before the barrier that precedes [`finish_cta_exit`]), when an earlier
/// CTA of the launch in this slot already published every entry but the
/// own one.
pub fn publish_cta_exit_part<F: AtomicFamily>(
    clocks: &ThreadClocks<'_, F>,
    ring: &[F::U32],
    lane: u32,
    lanes: u32,
    current: bool,
) {
    if !current {
        publish_clock_part(clocks, ring, lane, lanes);
    }
}

/// The end of a CTA exit, by one thread holding thread `tid`'s write lock
/// after every lane's [`publish_cta_exit_part`]: the own entry when
/// `current` (the rest is there already), then the epoch is published and
/// the ring current.
pub fn finish_cta_exit<F: AtomicFamily>(
    clocks: &ThreadClocks<'_, F>,
    tid: u32,
    ring: &[F::U32],
    current: bool,
) {
    // The own entry and the flags are read together (one round trip on a
    // GPU while the block's slot waits), and nothing changes either in
    // between: the write lock is held.
    let own = clocks.get(tid);
    clocks.mark_exit_published();
    if current {
        if let Some(d) = ring.get(tid as usize) {
            d.fetch_max(own, MemOrder::Relaxed);
        }
    }
}

/// The access kind and scope of a [`RaceReport`]'s `access` or
/// `prior_access` (the inverse of [`RaceReport::pack_access`]).
pub const fn unpack_access(v: u32) -> (AccessKind, Scope) {
    let kind = match v & 0xff {
        0 => AccessKind::Read,
        1 => AccessKind::Write,
        2 => AccessKind::AtomicRead,
        3 => AccessKind::AtomicWrite,
        _ => AccessKind::AtomicRmw,
    };
    let scope = match (v >> 8) & 0xff {
        0 => Scope::Block,
        1 => Scope::Device,
        _ => Scope::System,
    };
    (kind, scope)
}

/// The sanitized entry that checks a host-issued copy or fill: every
/// kernel crate's PTX has it (`vigil-device` defines it), and a sanitized
/// context launches it on the transfer's stream just before the transfer,
/// so the transfer's device ranges are accesses ordered like a kernel on
/// that stream. Its parameters are [`RANGE_ACCESS_PARAMS`], then
/// [`HIDDEN_PARAMS`].
pub const RANGE_ACCESS_ENTRY: &str = "vigil_range_access__vigil";

/// The range-access entry's own parameters: the range it reads and the
/// range it writes (address and bytes; 0 bytes for none) and the host
/// call site: a tag the host resolves (reported as the access's file and
/// location), with its line and column.
pub const RANGE_ACCESS_PARAMS: &[ParamDesc] = &[
    ParamDesc {
        name: "read_addr",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "read_bytes",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "write_addr",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "write_bytes",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "site",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "line",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "column",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
];

/// The entry that gives a freed buffer's pool records back
/// ([`crate::reclaim`]): a sanitized context launches it when a buffer is
/// freed, once no work of the device can touch the buffer any more, over
/// the buffer's whole lines. Every kernel crate's PTX has it beside
/// [`RANGE_ACCESS_ENTRY`]; it runs no sanitizer thread (no hidden
/// parameters: only [`SHADOW_RECLAIM_PARAMS`]).
pub const SHADOW_RECLAIM_ENTRY: &str = "vigil_shadow_reclaim__vigil";

/// The shadow-reclaim entry's parameters: the device's [`GpuRuntime`] and
/// the freed range (line-aligned address and bytes).
pub const SHADOW_RECLAIM_PARAMS: &[ParamDesc] = &[
    ParamDesc {
        name: "runtime",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "addr",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "bytes",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
];

/// The grid (blocks of [`RANGE_BLOCK_THREADS`]) of a shadow-reclaim
/// launch over `bytes`: one thread per word, at most
/// [`RANGE_MAX_BLOCKS`], at least one block (the entry loops
/// grid-stride).
pub const fn shadow_reclaim_blocks(bytes: u64) -> u32 {
    runtime_grid(bytes / WORD_BYTES)
}

/// Blocks of [`RANGE_BLOCK_THREADS`] for one thread per item of `items`,
/// at most [`RANGE_MAX_BLOCKS`], at least one (the runtime's entries loop
/// grid-stride, so any grid is right).
const fn runtime_grid(items: u64) -> u32 {
    let blocks = items.div_ceil(RANGE_BLOCK_THREADS as u64);
    if blocks == 0 {
        1
    } else if blocks > RANGE_MAX_BLOCKS {
        RANGE_MAX_BLOCKS as u32
    } else {
        blocks as u32
    }
}

/// The bit that marks a `site` (and the side entries of its accesses) as
/// a host call site the host resolves, not the device address of a
/// `Location`: user-space addresses never have it. Host-issued accesses
/// never halt on a race (the copy is not a kernel thread to stop).
pub const HOST_SITE_TAG: u64 = 1 << 63;

/// Bytes of a range one thread of the range-access entry checks as one
/// access (one 16-byte-aligned unit: a warp's units tile four 128-byte
/// lines, so the warp's accesses take the hooks' line-run path, and a
/// whole warp's shadow updates are coalesced).
pub const RANGE_UNIT_BYTES: u64 = 16;

/// Threads per block of a range-access launch.
pub const RANGE_BLOCK_THREADS: u32 = 256;

/// Blocks a range-access launch has at most (enough to fill a large GPU
/// several times over; the threads then loop grid-stride).
pub const RANGE_MAX_BLOCKS: u64 = 2048;

/// The 16-byte units (aligned to 16 bytes in memory) a range of `bytes`
/// at `addr` touches.
pub const fn range_units(addr: u64, bytes: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    (addr + bytes - 1) / RANGE_UNIT_BYTES - addr / RANGE_UNIT_BYTES + 1
}

/// Unit `unit` of the range `[addr, addr + bytes)`: its start and length,
/// the range clipped to the unit's 16 aligned bytes.
pub const fn range_unit(addr: u64, bytes: u64, unit: u64) -> (u64, u32) {
    let aligned = (addr / RANGE_UNIT_BYTES + unit) * RANGE_UNIT_BYTES;
    let start = if aligned > addr { aligned } else { addr };
    let end_aligned = aligned + RANGE_UNIT_BYTES;
    let end = if end_aligned < addr + bytes {
        end_aligned
    } else {
        addr + bytes
    };
    (start, (end - start) as u32)
}

/// The grid (blocks of [`RANGE_BLOCK_THREADS`]) that checks the ranges
/// `reads` and `writes` (address, bytes): one thread per unit of the
/// longer, at most [`RANGE_MAX_BLOCKS`], at least one block. The entry
/// loops grid-stride, so any grid is right.
pub const fn range_access_blocks(reads: (u64, u64), writes: (u64, u64)) -> u32 {
    let (r, w) = (
        range_units(reads.0, reads.1),
        range_units(writes.0, writes.1),
    );
    runtime_grid(if r > w { r } else { w })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes' shares of a CTA entry and exit, all done, equal the
    /// engine's single-threaded kernel entry and exit.
    #[test]
    fn cta_shares_equal_the_engines_kernel_boundaries() {
        use crate::abi::thread_state_words;
        use crate::atomic::CoreAtomics;
        use crate::engine::{Engine, EngineConfig, EngineMemory, SliceMemory};
        use core::sync::atomic::AtomicU32;
        const N: u32 = 7;
        const WORDS: usize = thread_state_words(N, 2);
        let make = || -> [AtomicU32; 7 * WORDS] { core::array::from_fn(|_| AtomicU32::new(0)) };
        let (ts_a, ts_b) = (make(), make());
        let ring: [AtomicU32; 3 * 7] =
            core::array::from_fn(|i| AtomicU32::new((i as u32 * 5) % 11));
        let mem = |ts| SliceMemory::<CoreAtomics> {
            thread_states: ts,
            thread_state_words: thread_state_words(N, 2),
            shadow: &[],
            pool: &[],
            reports: &[],
            sc_fences: &[],
        };
        let cfg = EngineConfig {
            num_sms: N,
            num_threads: N,
            clock_buffer_size: 2,
            rng_seed: 1,
            real_base: 0,
            chain_records_per_word: crate::engine::RUNTIME_CHAIN_RECORDS_PER_WORD,
            spill_snapshots: false,
        };
        let (ma, mb) = (mem(&ts_a[..]), mem(&ts_b[..]));
        let (ea, eb) = (Engine::new(&ma, cfg), Engine::new(&mb, cfg));
        let tid = 3;
        ea.init_thread(tid);
        eb.init_thread(tid);
        // Entry of kernel 2 joins ring slot 1.
        ea.kernel_entry(tid, &ring, 2);
        let clocks = ThreadClocks::<CoreAtomics>::new(mb.thread_state(tid), N, 2);
        for lane in 0..3 {
            join_clock_part(&clocks, tid, &ring[7..14], lane, 3);
        }
        for j in 0..N {
            assert_eq!(ea.clock_entry(tid, j), eb.clock_entry(tid, j), "entry {j}");
        }
        assert!(eb.clock_entry(tid, 0) > 0, "something was joined");
        // Exit of kernel 2 publishes into ring slot 2.
        let out_a: [AtomicU32; 3 * 7] = core::array::from_fn(|_| AtomicU32::new(1));
        let out_b: [AtomicU32; 3 * 7] = core::array::from_fn(|_| AtomicU32::new(1));
        ea.kernel_exit(tid, &out_a, 2);
        for lane in 0..2 {
            publish_clock_part(&clocks, &out_b[14..], lane, 2);
        }
        for (a, b) in out_a.iter().zip(&out_b) {
            assert_eq!(a.load(MemOrder::Relaxed), b.load(MemOrder::Relaxed));
        }
    }

    /// The units of a range tile it exactly, each inside one aligned
    /// 16-byte block, whatever the range's alignment.
    #[test]
    fn range_units_tile_the_range() {
        for addr in [0u64, 1, 3, 4, 15, 16, 17, 4096 + 12] {
            for bytes in [0u64, 1, 4, 15, 16, 17, 31, 32, 100, 4096, 4099] {
                let mut next = addr;
                for u in 0..range_units(addr, bytes) {
                    let (start, size) = range_unit(addr, bytes, u);
                    assert_eq!(start, next, "units follow each other");
                    assert!(size >= 1 && size as u64 <= RANGE_UNIT_BYTES);
                    assert_eq!(
                        start / 16,
                        (start + size as u64 - 1) / 16,
                        "one aligned block"
                    );
                    next = start + size as u64;
                }
                assert_eq!(next, addr + bytes, "the units cover the range");
            }
        }
        assert_eq!(range_access_blocks((0, 0), (0, 0)), 1);
        assert_eq!(
            range_access_blocks((0, 1 << 30), (0, 16)),
            RANGE_MAX_BLOCKS as u32
        );
        assert_eq!(range_access_blocks((0, 4096), (0, 0)), 1);
        assert_eq!(range_access_blocks((8, 4096), (0, 0)), 2, "257 units");
    }

    #[test]
    fn access_packing_round_trips() {
        for kind in [
            AccessKind::Read,
            AccessKind::Write,
            AccessKind::AtomicRead,
            AccessKind::AtomicWrite,
            AccessKind::AtomicRmw,
        ] {
            for scope in [Scope::Block, Scope::Device, Scope::System] {
                assert_eq!(
                    unpack_access(RaceReport::pack_access(kind, scope)),
                    (kind, scope)
                );
            }
        }
    }

    #[test]
    fn slots_fill_the_thread_id_space() {
        // An H100: 132 SMs, 2048 ids -> 15 slots.
        assert_eq!(slots_per_sm(132, 1), THREAD_ID_LIMIT / 132);
        assert!(slots_per_sm(132, 1) * 132 <= THREAD_ID_LIMIT);
        assert_eq!(slots_per_sm(2, 1), MAX_SLOTS_PER_SM);
        assert_eq!(slots_per_sm(THREAD_ID_LIMIT + 1, 1), 0);
        assert_eq!(slots_per_sm(0, 1), 0);
    }

    #[test]
    fn slot_tids_round_trip() {
        let (sms, slots) = (132, 15);
        let mut seen = [u32::MAX; 2 * 3 * 3];
        let mut n = 0;
        for rank in 0..2 {
            for sm in [0, 1, 131] {
                for slot in [0, 7, 14] {
                    let tid = slot_tid(rank, sm, sms, slots, slot);
                    assert!(!seen.contains(&tid));
                    seen[n] = tid;
                    n += 1;
                    assert_eq!(
                        SlotPlace::of(tid, sms, slots),
                        SlotPlace {
                            device: rank,
                            sm,
                            slot
                        }
                    );
                    // The engine's device split agrees.
                    assert_eq!(tid / (sms * slots), rank);
                }
            }
        }
    }

    #[test]
    fn side_sets_stay_in_the_table_and_split_reads_from_writes() {
        for log2 in [3, 10, 20] {
            for word in [0u64, 1, 2, 1 << 30, u64::MAX / 7] {
                for tid in [0, 1, 2111, 65_535] {
                    let r = side_set(word, tid, 7, false, log2);
                    let w = side_set(word, tid, 7, true, log2);
                    assert!(r + SIDE_WAYS <= 1 << log2 && w + SIDE_WAYS <= 1 << log2);
                    assert_ne!(r, w);
                    assert_eq!((r % SIDE_WAYS, w % SIDE_WAYS), (0, 0));
                }
            }
        }
    }

    #[test]
    fn threads_on_one_hot_word_rarely_fill_a_side_set() {
        // 2,112 sanitizer threads (132 SMs x 16 slots) writing one word, in
        // the smallest table the host allocates (2^20 entries; larger
        // devices get up to 2^23): no set gets more keys
        // than it has ways, so every report finds its earlier access.
        let mut sets = [0u64; 2112];
        for (tid, i) in sets.iter_mut().enumerate() {
            *i = side_set(0x1234_5678, tid as u32, 1, true, 20);
        }
        sets.sort_unstable();
        let fullest = sets
            .chunk_by(|a, b| a == b)
            .map(<[u64]>::len)
            .max()
            .unwrap_or(0);
        assert!(fullest as u64 <= SIDE_WAYS, "a set holds {fullest} keys");
    }
}
