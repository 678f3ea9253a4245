//! The GPU sanitizer's launch ABI: what the host hands a sanitized PTX
//! entry (`name__vigil`) and what the device hands back.
//!
//! A sanitized entry takes [`HIDDEN_PARAMS`] after the user's parameters:
//! the device's [`GpuRuntime`] (in device memory, written once by the
//! host), the launch's record in the launch ring
//! ([`crate::race::memory::launch_record`]: its serials, the lane bounds
//! of its host order and of what may be forgotten), its first serial, its
//! context-wide launch id, the extension regions each of its CTAs asks
//! for (below), the record's fields a CTA's entry keeps (the launch's
//! serial count, flags, lane reference, device rank, the bound of its
//! own lane and its entry's path word) and the runtime's `real_base`,
//! so that a CTA's entry reads them from the constant bank instead of
//! waiting for device memory, and its read-only ranges
//! ([`crate::read_only::ReadOnlyRanges`], as `u64` bounds).
//!
//! Sanitizer threads are CTAs: CTA `b` (linear block index) of a launch
//! is serial `base + b` ([`crate::race::serial`]), or `base` for every
//! CTA of a launch that owns one serial (the range-access entry: a copy
//! is one access). The CTA's entry writes its state into `.shared`
//! memory; no slot is claimed and no clock joined.
//!
//! The same-block layer keeps per-CTA state in device memory, in one of
//! [`REGIONS_PER_SM`] regions of the CTA's SM, which no other resident
//! CTA shares: a CTA claims one when one of its threads first needs it
//! (at entry when its threads keep state there from the start, when it
//! checks its shared memory through the window shadow, or when CTAs of
//! an earlier launch of its kernel claimed theirs:
//! [`launch_flags::CLAIM_AT_ENTRY`]; waiting for one if none is free: an
//! SM holds at most that many CTAs). Its
//! same-block table may also spread over some of the SM's
//! [`EXTENSIONS_PER_SM`] extension regions, as many as the launch asks
//! for (`__vigil_extensions`) and are free at the claim, claimed without
//! waiting: a launch with few CTAs per SM gives each a larger table.
//!
//! Reports: the device writes [`GpuReportRecord`]s (the engine's record
//! plus the earlier access's [`PriorRecord`]) into a host-mapped buffer
//! with a [`ReportBufferHeader`](crate::abi::ReportBufferHeader); claims
//! past the capacity are counted, never written. Each context has its
//! own buffer, named in its launches' records.

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

use crate::abi::{RaceReport, WORD_BYTES};
use crate::params::{ParamDesc, PtxType};
use crate::{AccessKind, Scope};

/// Regions of per-CTA same-block state per SM: one per CTA an SM can
/// hold at once (32 from sm_70 on). A CTA claims a free one of its SM in
/// the region masks ([`GpuRuntime::REGION_MASKS_AT`]) when it first needs
/// it and frees it at exit.
pub const REGIONS_PER_SM: u32 = 32;

/// Extension regions of the same-block table per SM, beside its
/// [`REGIONS_PER_SM`] regions: the host asks each CTA of a launch to
/// claim as many as leave the same share to each of the launch's CTAs an
/// SM can hold ([`extensions_wanted`]).
pub const EXTENSIONS_PER_SM: u32 = 32;

/// Extension regions a CTA of a launch asks for when `resident` of its
/// CTAs fit on one SM: an equal share of [`EXTENSIONS_PER_SM`] (whole
/// shares tile the mask from its first region: [`extension_mask`]).
pub const fn extensions_wanted(resident: u32) -> u32 {
    EXTENSIONS_PER_SM / if resident == 0 { 1 } else { resident }
}

/// The extension regions a CTA asks for: `wanted` of them (at most
/// [`EXTENSIONS_PER_SM`]), the share of its `guess` (the region it tries
/// first) among the whole shares of `wanted` that tile the mask from its
/// first region, so that CTAs resident together ask for disjoint shares.
pub const fn extension_mask(guess: u32, wanted: u32) -> u32 {
    let wanted = if wanted < EXTENSIONS_PER_SM {
        wanted
    } else {
        EXTENSIONS_PER_SM
    };
    if wanted == 0 {
        return 0;
    }
    run_mask(guess % (EXTENSIONS_PER_SM / wanted) * wanted, wanted)
}

/// A share of `wanted` extension regions (one of the whole shares that
/// tile the mask, as [`extension_mask`]'s) that lies wholly in `free`,
/// the lowest; 0 when there is none: where a CTA whose own share was
/// taken tries next.
pub const fn free_share(free: u32, wanted: u32) -> u32 {
    if wanted == 0 || wanted > EXTENSIONS_PER_SM {
        return 0;
    }
    let mut at = 0;
    while at + wanted <= EXTENSIONS_PER_SM {
        let m = run_mask(at, wanted);
        if free & m == m {
            return m;
        }
        at += wanted;
    }
    0
}

/// The extension regions a CTA keeps of `got` (those its claim found
/// free): the lowest run of consecutive ones, as `(first, count)`.
pub const fn extension_run(got: u32) -> (u32, u32) {
    if got == 0 {
        return (0, 0);
    }
    let first = got.trailing_zeros();
    (first, (got >> first).trailing_ones())
}

/// The mask of regions `first .. first + count`.
pub const fn run_mask(first: u32, count: u32) -> u32 {
    if count >= 32 {
        u32::MAX
    } else {
        ((1 << count) - 1) << first
    }
}

/// SMs the region masks ([`GpuRuntime::REGION_MASKS_AT`]) cover: more than any
/// GPU's `%smid` reaches, which may exceed its SM count.
pub const REGION_MASK_SMS: u32 = 1024;

/// The PTX parameters a sanitized entry takes after the user's.
pub const HIDDEN_PARAMS: &[ParamDesc] = &[
    ParamDesc {
        name: "__vigil_runtime",
        rust_type: "*const GpuRuntime",
        parts: &[PtxType::Ptr],
    },
    ParamDesc {
        name: "__vigil_launch_record",
        rust_type: "*const u32",
        parts: &[PtxType::Ptr],
    },
    ParamDesc {
        name: "__vigil_base",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_launch",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_extensions",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_count",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_flags",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_tag",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_device",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_own_bound",
        rust_type: "u32",
        parts: &[PtxType::B32],
    },
    ParamDesc {
        name: "__vigil_path_word",
        rust_type: "u64",
        parts: &[PtxType::B64],
    },
    ParamDesc {
        name: "__vigil_real_base",
        rust_type: "u64",
        parts: &[PtxType::B64],
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
const _: () = assert!(HIDDEN_PARAMS.len() == 12 + 2 * crate::read_only::READ_ONLY_RANGES);

/// Suffix of a sanitized entry's name (`axpy` -> `axpy__vigil`).
pub const SANITIZED_SUFFIX: &str = "__vigil";

/// The prefix of a device global's PTX symbol (`vigil_global_NAME`, for
/// a `device_global!` named `NAME`).
pub const GLOBAL_SYMBOL_PREFIX: &str = "vigil_global_";

/// Bytes before a device global's value in its symbol: a `u64` slot that
/// holds where the loading context put the value (0: in place), then the
/// value's size in bytes as a `u64` (the symbol's own size counts the
/// value's padding).
pub const GLOBAL_VALUE_OFFSET: usize = 16;

/// The line between the two builds of a kernel crate in the PTX that
/// `vigil_build` writes: above it the plain build (the plain entries),
/// below it the sanitized build (`--cfg vigil_sanitized`: the
/// `name__vigil` entries and the sanitizer's own). Each part is a whole
/// PTX module; a text without the line is one module serving both.
pub const SANITIZED_BUILD_LINE: &str = "// vigil: the sanitized build of this kernel crate follows";

/// The plain and the sanitized part of `ptx` (see
/// [`SANITIZED_BUILD_LINE`]); `None` for a text of one part.
pub fn split_builds(ptx: &str) -> Option<(&str, &str)> {
    let at = ptx.find(SANITIZED_BUILD_LINE)?;
    Some((&ptx[..at], &ptx[at + SANITIZED_BUILD_LINE.len()..]))
}

/// Per-device sanitizer runtime, in device memory, written once by the
/// host. Every pointer is a device address; a length of 0 turns its part
/// off (counted where that hides races).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuRuntime {
    /// The real (user) half's first byte: word `w`'s shadow cell is at
    /// the reservation's shadow half, by [`crate::address`].
    pub real_base: u64,
    /// The record pool ([`crate::race::record`], `u64` words).
    pub pool: u64,
    /// `u64` words of the pool.
    pub pool_words: u64,
    /// The snapshot arena ([`crate::race::knowledge`], `u32` words).
    pub arena: u64,
    /// The exit log (`u32` words).
    pub exits: u64,
    /// The launch ring ([`crate::race::memory::launch_record`]).
    pub launches: u64,
    /// The site table of split words (pairs of `u64`).
    pub sites: u64,
    /// SC-fence accumulators (`u32`).
    pub sc: u64,
    /// The lane-to-device table ([`crate::race::LaneDevices`], 64 bytes).
    pub lane_devices: u64,
    /// `u32` words of the arena.
    pub arena_words: u32,
    /// `u32` words of the exit log.
    pub exit_words: u32,
    /// `u32` words of the launch ring.
    pub launch_words: u32,
    /// `u64` words of the site table.
    pub site_words: u32,
    /// `u32` words of the SC-fence accumulators.
    pub sc_words: u32,
    /// [`GpuRuntime::HALT_ON_RACE`], ...
    pub flags: u32,
    /// This device's rank.
    pub rank: u32,
    /// Records every context's report buffer holds.
    pub report_capacity: u32,
    /// The same-block table of global words: a header then, per region
    /// ([`REGIONS_PER_SM`] per SM, then [`EXTENSIONS_PER_SM`] extension
    /// regions per SM), `2^block_table_log2` entries (see
    /// [`crate::block::GlobalTable`]); 0: none, same-block global races
    /// go unchecked.
    pub block_table: u64,
    /// log2 of a region's entries in `block_table`.
    pub block_table_log2: u32,
    /// Regions the table has entries for (SMs x [`REGIONS_PER_SM`]).
    pub block_table_slots: u32,
    /// Lane states of threads past [`crate::block::SHARED_LANES`]: per
    /// region, [`crate::block::GLOBAL_LANES`] `u64`s; 0: none, those
    /// threads' shared and same-block accesses go unchecked.
    pub block_lanes: u64,
    /// The window shadow ([`crate::block::WindowShadow`]) of the shared
    /// memory `.shared` shadows do not cover, per region; 0: none yet.
    /// The host replaces it with a larger one when a launch needs it.
    pub block_shadow: u64,
    /// The threads' queues of `cp.async` copies in flight
    /// ([`crate::copies_in_flight::QueueArea`]), per region; 0: none yet.
    /// The host replaces it with a larger one when a launch needs it.
    pub copy_queues: u64,
}
impl GpuRuntime {
    /// Trap the kernel after the first race or error it records.
    pub const HALT_ON_RACE: u32 = 1;
    /// Where the region masks start, in bytes from the runtime's own
    /// address: they follow the descriptor in its allocation, so that a
    /// CTA's entry addresses its SM's masks from its parameters alone and
    /// issues its claim without loading the runtime first. One `u64` per
    /// SM ([`REGION_MASK_SMS`] of them, SM `s` at `s % REGION_MASK_SMS`):
    /// its held regions and held extension regions
    /// ([`crate::regions::masks_bits`]).
    pub const REGION_MASKS_AT: usize = 256;
    /// Bytes of the runtime's allocation: the descriptor, then the
    /// region masks.
    pub const ALLOCATION_BYTES: usize = Self::REGION_MASKS_AT + REGION_MASK_SMS as usize * 8;
    /// Regions per SM (what the same-block layer indexes by).
    pub const fn regions_per_sm(&self) -> u32 {
        REGIONS_PER_SM
    }
}
const _: () = assert!(size_of::<GpuRuntime>() == 144);
const _: () = assert!(size_of::<GpuRuntime>() <= GpuRuntime::REGION_MASKS_AT);
const _: () = assert!(GpuRuntime::REGION_MASKS_AT % 8 == 0);
const _: () = assert!(offset_of!(GpuRuntime, real_base) == 0);
const _: () = assert!(offset_of!(GpuRuntime, pool) == 8);
const _: () = assert!(offset_of!(GpuRuntime, lane_devices) == 64);
const _: () = assert!(offset_of!(GpuRuntime, arena_words) == 72);
const _: () = assert!(offset_of!(GpuRuntime, report_capacity) == 100);
const _: () = assert!(offset_of!(GpuRuntime, block_table) == 104);
const _: () = assert!(offset_of!(GpuRuntime, block_lanes) == 120);
const _: () = assert!(offset_of!(GpuRuntime, copy_queues) == 136);

/// Bytes of a launch's record ([`crate::race::memory::launch_record`]).
pub const LAUNCH_RECORD_BYTES: usize = 4 * crate::race::memory::launch_record::WORDS;
// The anchor is a `u64` the device writes in place.
const _: () =
    assert!(LAUNCH_RECORD_BYTES % 8 == 0 && crate::race::memory::launch_record::ANCHOR % 2 == 0);

/// Launch records the ring holds: a release head naming a launch older
/// than this many launches of its device loses what that launch's host
/// order was (counted; the acquirer then misses races, never invents
/// them).
pub const LAUNCH_RING_SLOTS: u32 = 1 << 16;

/// Flags of a launch record.
pub mod launch_flags {
    /// Every CTA of the launch is its one serial (a copy or fill).
    pub const ONE_SERIAL: u32 = 1;
    /// The launch's kernel issues asynchronous copies: each thread keeps
    /// its `cp.async` copies in flight (`crate::copies_in_flight`).
    pub const COPIES_IN_FLIGHT: u32 = 2;
    /// Each CTA claims its same-block regions at entry, not when a thread
    /// first needs them: the kernel checks its shared memory through the
    /// window shadow (whose slot is the CTA's region), or CTAs of an
    /// earlier launch of the entry claimed them in their body
    /// (`crate::race::memory::launch_record::path_word`), where a claim
    /// costs more (the CTA's warps wait for it one by one, not at the
    /// entry's barrier).
    pub const CLAIM_AT_ENTRY: u32 = 4;
}

/// The earlier access of a race, as the device saw it: its descriptor
/// ([`crate::race::AccessDesc`]), its site word
/// ([`crate::race::SiteWord`]; 0 when it was overwritten), and the word
/// raced on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PriorRecord {
    /// The earlier access.
    pub desc: u64,
    /// Its site.
    pub site: u64,
    /// The word raced on (index from the real base).
    pub word: u64,
    /// The current access's `Location` address, in full (the earlier
    /// site keeps only its low bits; the host completes them from the
    /// earlier launch's module).
    pub location: u64,
}
const _: () = assert!(size_of::<PriorRecord>() == 32);

/// One report of the GPU sanitizer: the race record and the earlier
/// access.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuReportRecord {
    /// The race (current access, kinds).
    pub report: RaceReport,
    /// The earlier access (all zero for an error, or a same-block race
    /// whose record carries it in `report`).
    pub prior: PriorRecord,
}
impl GpuReportRecord {
    /// u32 words in a record.
    pub const WORDS: usize = size_of::<Self>() / 4;
}
const _: () = assert!(size_of::<GpuReportRecord>() == 128);
const _: () = assert!(offset_of!(GpuReportRecord, prior) == 96);

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
/// ([`crate::race::reclaim`]): a sanitized context launches it when a buffer is
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

    /// CTAs resident together ask for disjoint shares, as large as an
    /// equal split allows, that cover at most the extension mask; what a
    /// claim keeps is a run of the regions it found free.
    #[test]
    fn extension_shares_are_disjoint_and_runs_are_kept() {
        assert_eq!(extensions_wanted(0), 32);
        assert_eq!(extensions_wanted(1), 32);
        assert_eq!(extensions_wanted(2), 16);
        assert_eq!(extensions_wanted(3), 10);
        assert_eq!(extensions_wanted(5), 6);
        assert_eq!(extensions_wanted(8), 4);
        assert_eq!(extensions_wanted(32), 1);
        assert_eq!(extensions_wanted(33), 0);
        for resident in 1..=32 {
            let wanted = extensions_wanted(resident);
            let mut seen = 0u32;
            // Any guesses, as long as they are distinct among the whole
            // shares: the SM's warp slots over the CTA's warps.
            for guess in 0..2 * resident {
                let m = extension_mask(guess, wanted);
                assert_eq!(m.count_ones(), wanted, "{resident} resident");
                if guess < 32 / wanted {
                    assert_eq!(seen & m, 0, "{resident} resident: guess {guess}");
                }
                seen |= m;
            }
            assert!(wanted * resident <= 32 && (wanted + 1) * resident > 32);
        }
        assert_eq!(extension_mask(5, 0), 0);
        assert_eq!(extension_run(0), (0, 0));
        assert_eq!(extension_run(0b1110_1100), (2, 2));
        assert_eq!(extension_run(u32::MAX), (0, 32));
        assert_eq!(run_mask(2, 2), 0b1100);
        assert_eq!(run_mask(0, 32), u32::MAX);
        assert_eq!(free_share(0xFFFF_0000, 16), 0xFFFF_0000);
        assert_eq!(free_share(0x0FFF_FFF0, 16), 0, "no aligned share is free");
        assert_eq!(free_share(0x0FFF_FFF0, 8), 0x0000_FF00);
        assert_eq!(free_share(0x3FFF_FFC0, 6), 0x0000_0FC0);
        assert_eq!(free_share(0xC000_0000, 6), 0, "no whole share is free");
        assert_eq!(free_share(u32::MAX, 32), u32::MAX);
        assert_eq!(free_share(u32::MAX, 0), 0);
        for got in [1u32, 0b1011_0110, 0xF000_0000, 0x8000_0001] {
            let (first, count) = extension_run(got);
            assert_eq!(run_mask(first, count) & !got, 0, "kept only what it got");
        }
    }
}
