//! Per-device runtime state (docs/src/design/address-space.md): one
//! region per device rank at a fixed [`PER_DEVICE_STATE_STRIDE`] inside a
//! second reservation, so that a group's regions lie at the same offsets
//! in every process that maps them. This file is the one place the
//! region's layout is written down.
//!
//! ```text
//! 0                      a RegionHeader (64 bytes)
//! BARRIER_OFFSET         BARRIER_CLOCKS host clocks of LANES u32 each
//! TABLES_OFFSET          the race engine's tables, each 256-byte aligned:
//!                        record pool, snapshot arena, exit log, launch
//!                        ring, site table, SC-fence accumulators,
//!                        lane-to-device table
//! ```
//!
//! The engine's tables are what every device of a group must share (a
//! shadow cell names a pool record, a release head a snapshot and a
//! launch): they are made, zeroed and initialised once, in the region of
//! the group's [`TABLES_RANK`] (or of a device alone), and every other
//! member's sanitizer points at them there, mapped in its own process
//! ([`EngineTables::at`]). A process that is rank `r > 0` of a group of
//! processes has a region without tables: only its header and barrier
//! clocks. The device reads the tables through the `GpuRuntime`
//! descriptor's addresses only; the sizes it relies on (launch records,
//! ring slots, LANES) come from `vigil_shared` and are asserted below.

use super::super::driver::memory;
use super::error::VmmResult;
use super::layout::{device_globals, round_up, PER_DEVICE_STATE_STRIDE};
use super::physical::{Mapping, PhysOps, UndoStack};
use super::VmmError;
use bytemuck::{Pod, Zeroable};
use std::mem::size_of;
use vigil_shared::gpu::{GpuRuntime, LAUNCH_RECORD_BYTES, LAUNCH_RING_SLOTS};
use vigil_shared::race::cta::LaneDevices;
use vigil_shared::race::knowledge::{
    header as arena_header, ARENA_HEADER_WORDS, EXIT_HEADER_WORDS, MAX_ARENA_WORDS,
};
use vigil_shared::race::memory::MAX_SC_DEVICES;
use vigil_shared::race::record::{pool_header, POOL_HEADER_WORDS, RECORD_WORDS};
use vigil_shared::race::serial::{LaneBounds, LANES};
use vigil_shared::race::sync::SC_WORDS;

/// The rank whose region holds a group's engine tables.
pub const TABLES_RANK: u32 = 0;

/// Host clocks a region holds for a group's barriers: barrier `n`
/// publishes in clock `n % 2`, so a rank that went on to the next barrier
/// never overwrites the clock a slower rank is still reading (it cannot
/// reach barrier `n + 2` before every rank has left barrier `n`).
pub const BARRIER_CLOCKS: u64 = 2;
/// Offset of the barrier clocks.
pub const BARRIER_OFFSET: u64 = 256;
/// Bytes of one barrier clock: a host clock, one `u32` per lane.
pub const BARRIER_CLOCK_BYTES: u64 = size_of::<LaneBounds>() as u64;
/// Offset of the first engine table.
pub const TABLES_OFFSET: u64 = BARRIER_OFFSET + BARRIER_CLOCKS * BARRIER_CLOCK_BYTES;
/// Alignment of every table (the device's 128-bit atomics need 16).
pub const TABLE_ALIGN: u64 = 256;

/// Words of the snapshot arena (64 MiB).
pub const ARENA_WORDS: u64 = 16 << 20;
/// Exits the exit log holds.
pub const EXIT_ENTRIES: u64 = 1 << 16;
/// Entries of the site table of split words (16 MiB).
pub const SITE_ENTRIES: u64 = 1 << 20;

/// The header's format: a region of another build is refused by a join.
pub const REGION_FORMAT: u32 = 0x5647_0002;

const _: () = assert!(size_of::<RegionHeader>() as u64 <= BARRIER_OFFSET);
const _: () = assert!(TABLES_OFFSET.is_multiple_of(TABLE_ALIGN));
const _: () = assert!(BARRIER_CLOCK_BYTES == 4 * LANES as u64);
// The device writes a launch record's anchor as one u64 in place.
const _: () = assert!(LAUNCH_RECORD_BYTES.is_multiple_of(8));
const _: () = assert!(LAUNCH_RING_SLOTS.is_power_of_two());
const _: () = assert!(size_of::<LaneDevices>() == LANES);

/// The first bytes of a region: who made it and how it is laid out (what
/// a group's join compares).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RegionHeader {
    /// [`REGION_FORMAT`].
    pub format: u32,
    /// The device's rank.
    pub rank: u32,
    /// Ranks of its group (devices of the process, or processes).
    pub world: u32,
    /// Serial lanes (the barrier clocks' length).
    pub lanes: u32,
    /// Records of the engine's record pool (0 without tables).
    pub pool_records: u32,
    /// 1 when the region holds the engine's tables.
    pub tables: u32,
    /// Bytes of the region used.
    pub bytes: u64,
    /// Base of the owner's 1 TiB shadow/user reservation.
    pub reserve_base: u64,
    /// Base of the owner's runtime-state reservation.
    pub globals_base: u64,
    /// Zero.
    pub reserved: [u32; 4],
}
const _: () = assert!(size_of::<RegionHeader>() == 64);

/// Where one table lies in a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// Offset from the region's start.
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Span {
    fn end(&self) -> u64 {
        self.offset + self.bytes
    }
}

/// The engine's tables in a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableLayout {
    /// The record pool: a header record, then `pool_records` records.
    pub pool: Span,
    /// The snapshot arena.
    pub arena: Span,
    /// The exit log.
    pub exits: Span,
    /// The launch ring ([`LAUNCH_RING_SLOTS`] records).
    pub ring: Span,
    /// The site table of split words.
    pub sites: Span,
    /// The SC-fence accumulators.
    pub sc: Span,
    /// The lane-to-device table.
    pub lane_devices: Span,
}

impl TableLayout {
    /// The tables for `pool_records` records, from [`TABLES_OFFSET`].
    pub fn new(pool_records: u32) -> TableLayout {
        let mut at = TABLES_OFFSET;
        let mut next = |bytes: u64| {
            let span = Span { offset: at, bytes };
            at = round_up(at + bytes, TABLE_ALIGN);
            span
        };
        TableLayout {
            pool: next((u64::from(pool_records) + 1) * RECORD_WORDS as u64 * 8),
            arena: next(ARENA_WORDS * 4),
            exits: next((EXIT_HEADER_WORDS as u64 + 2 * EXIT_ENTRIES) * 4),
            ring: next(u64::from(LAUNCH_RING_SLOTS) * LAUNCH_RECORD_BYTES as u64),
            sites: next(SITE_ENTRIES * 16),
            sc: next((MAX_SC_DEVICES * 2 * SC_WORDS * 4) as u64),
            lane_devices: next(size_of::<LaneDevices>() as u64),
        }
    }

    /// Every table, in address order.
    pub fn spans(&self) -> [Span; 7] {
        [
            self.pool,
            self.arena,
            self.exits,
            self.ring,
            self.sites,
            self.sc,
            self.lane_devices,
        ]
    }

    /// The tables' initial headers, as `(offset, bytes)`: the pool's next
    /// record and capacity, the arena's cursor, capacity and generation,
    /// the exit log's capacity. Everything else starts zero.
    pub fn headers(&self) -> Vec<(u64, Vec<u8>)> {
        let mut pool = [0u64; POOL_HEADER_WORDS];
        pool[pool_header::NEXT] = 1;
        pool[pool_header::CAPACITY] = self.pool.bytes / (RECORD_WORDS as u64 * 8);
        let mut arena = [0u32; ARENA_HEADER_WORDS];
        arena[arena_header::CURSOR] = ARENA_HEADER_WORDS as u32;
        arena[arena_header::CAPACITY] = (self.arena.bytes / 4).min(MAX_ARENA_WORDS as u64) as u32;
        arena[arena_header::GENERATION] = 1;
        let mut exits = [0u32; EXIT_HEADER_WORDS];
        exits[1] = EXIT_ENTRIES as u32;
        vec![
            (self.pool.offset, bytemuck::cast_slice(&pool).to_vec()),
            (self.arena.offset, bytemuck::cast_slice(&arena).to_vec()),
            (self.exits.offset, bytemuck::cast_slice(&exits).to_vec()),
        ]
    }
}

/// A region's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionLayout {
    /// The engine's tables, if the region holds them.
    pub tables: Option<TableLayout>,
    /// Bytes used.
    pub used_bytes: u64,
}

impl RegionLayout {
    /// A region with the engine's tables (`pool_records` records) or
    /// without.
    pub fn new(pool_records: u32, tables: bool) -> RegionLayout {
        let tables = tables.then(|| TableLayout::new(pool_records));
        let used_bytes = tables.map_or(TABLES_OFFSET, |t| t.lane_devices.end());
        RegionLayout { tables, used_bytes }
    }

    /// The layout of the region whose header is `h`.
    pub fn of(h: &RegionHeader) -> RegionLayout {
        RegionLayout::new(h.pool_records, h.tables != 0)
    }

    /// Offset of the clock barrier `n` publishes in.
    pub fn barrier_clock(n: u32) -> u64 {
        BARRIER_OFFSET + u64::from(n) % BARRIER_CLOCKS * BARRIER_CLOCK_BYTES
    }

    /// True when the region fits the per-device stride.
    pub fn fits(&self) -> bool {
        self.used_bytes <= PER_DEVICE_STATE_STRIDE
    }
}

/// The device addresses of a group's engine tables, as this process maps
/// them: what a `GpuRuntime` descriptor names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineTables {
    /// The record pool.
    pub pool: u64,
    /// `u64` words of the pool.
    pub pool_words: u64,
    /// The snapshot arena.
    pub arena: u64,
    /// `u32` words of the arena.
    pub arena_words: u32,
    /// The exit log.
    pub exits: u64,
    /// `u32` words of the exit log.
    pub exit_words: u32,
    /// The launch ring.
    pub launches: u64,
    /// `u32` words of the ring.
    pub launch_words: u32,
    /// The site table.
    pub sites: u64,
    /// `u64` words of the site table.
    pub site_words: u32,
    /// The SC-fence accumulators.
    pub sc: u64,
    /// `u32` words of the accumulators.
    pub sc_words: u32,
    /// The lane-to-device table.
    pub lane_devices: u64,
}

impl EngineTables {
    /// The tables laid out as `t` in the region at device address `base`.
    pub fn at(base: u64, t: &TableLayout) -> EngineTables {
        EngineTables {
            pool: base + t.pool.offset,
            pool_words: t.pool.bytes / 8,
            arena: base + t.arena.offset,
            arena_words: (t.arena.bytes / 4) as u32,
            exits: base + t.exits.offset,
            exit_words: (t.exits.bytes / 4) as u32,
            launches: base + t.ring.offset,
            launch_words: (t.ring.bytes / 4) as u32,
            sites: base + t.sites.offset,
            site_words: (t.sites.bytes / 8) as u32,
            sc: base + t.sc.offset,
            sc_words: (t.sc.bytes / 4) as u32,
            lane_devices: base + t.lane_devices.offset,
        }
    }

    /// The tables `desc` names.
    pub fn of(desc: &GpuRuntime) -> EngineTables {
        EngineTables {
            pool: desc.pool,
            pool_words: desc.pool_words,
            arena: desc.arena,
            arena_words: desc.arena_words,
            exits: desc.exits,
            exit_words: desc.exit_words,
            launches: desc.launches,
            launch_words: desc.launch_words,
            sites: desc.sites,
            site_words: desc.site_words,
            sc: desc.sc,
            sc_words: desc.sc_words,
            lane_devices: desc.lane_devices,
        }
    }

    /// Points `desc` at these tables.
    pub fn name_in(&self, desc: &mut GpuRuntime) {
        desc.pool = self.pool;
        desc.pool_words = self.pool_words;
        desc.arena = self.arena;
        desc.arena_words = self.arena_words;
        desc.exits = self.exits;
        desc.exit_words = self.exit_words;
        desc.launches = self.launches;
        desc.launch_words = self.launch_words;
        desc.sites = self.sites;
        desc.site_words = self.site_words;
        desc.sc = self.sc;
        desc.sc_words = self.sc_words;
        desc.lane_devices = self.lane_devices;
    }
}

/// What a device's runtime state needs to be created.
pub(crate) struct DeviceParams {
    pub ordinal: usize,
    pub rank: u32,
    pub num_ranks: u32,
    /// The region holds the engine's tables.
    pub tables: bool,
    pub pool_records: u32,
    pub granularity: u64,
    pub shareable: bool,
    pub reserve_base: u64,
    pub globals_base: u64,
}

/// One device's mapped runtime state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceRuntime {
    pub ordinal: usize,
    pub rank: u32,
    pub mapping: Mapping,
    pub header: RegionHeader,
}

impl DeviceRuntime {
    /// The engine's tables in this region, if it holds them.
    pub fn tables(&self) -> Option<EngineTables> {
        let layout = RegionLayout::of(&self.header);
        let t = layout.tables?;
        (layout.used_bytes <= self.mapping.bytes).then(|| EngineTables::at(self.mapping.va, &t))
    }
}

/// The header of the region `p` describes, and its layout. Pure: tested
/// on the CPU.
pub(crate) fn header(p: &DeviceParams) -> (RegionHeader, RegionLayout) {
    let layout = RegionLayout::new(p.pool_records, p.tables);
    let header = RegionHeader {
        format: REGION_FORMAT,
        rank: p.rank,
        world: p.num_ranks,
        lanes: LANES as u32,
        pool_records: if p.tables { p.pool_records } else { 0 },
        tables: u32::from(p.tables),
        bytes: layout.used_bytes,
        reserve_base: p.reserve_base,
        globals_base: p.globals_base,
        reserved: [0; 4],
    };
    (header, layout)
}

/// Creates, maps, zeroes and initialises the runtime state of one
/// device; undone exactly on failure.
pub(crate) fn create<O: PhysOps>(ops: &O, p: &DeviceParams) -> VmmResult<DeviceRuntime> {
    let (header, layout) = header(p);
    if !layout.fits() {
        return Err(VmmError::RuntimeStateTooLarge {
            ordinal: p.ordinal,
            bytes: layout.used_bytes,
            stride: PER_DEVICE_STATE_STRIDE,
        });
    }
    let base = device_globals(p.globals_base, p.rank);
    let bytes = round_up(layout.used_bytes, p.granularity);
    let mut undo = UndoStack::new(ops);
    let mapping = undo.create_and_map(p.ordinal, base, bytes, p.shareable, &[p.ordinal])?;
    // SAFETY: the range was just mapped read/write for this device and the
    // caller made its context current; nothing else uses it yet.
    unsafe { memory::memset_d8(base, 0, bytes as usize) }.map_err(|e| {
        e.during(|| {
            format!(
                "zeroing the {bytes}-byte runtime state of device {} at {base:#x}",
                p.ordinal
            )
        })
    })?;
    write(base, bytemuck::bytes_of(&header), p.ordinal)?;
    for (offset, image) in layout.tables.iter().flat_map(TableLayout::headers) {
        write(base + offset, &image, p.ordinal)?;
    }
    undo.commit();
    Ok(DeviceRuntime {
        ordinal: p.ordinal,
        rank: p.rank,
        mapping,
        header,
    })
}

/// Synchronous device-to-host copy of `len` bytes from `src`.
pub(crate) fn read(src: u64, len: usize, ordinal: usize) -> VmmResult<Vec<u8>> {
    let mut out = vec![0u8; len];
    // SAFETY: `src..src+len` is mapped for the current device (the
    // caller's context).
    unsafe { memory::memcpy_dtoh(&mut out, src) }.map_err(|e| {
        e.during(|| format!("reading {len} bytes of runtime state of device {ordinal} at {src:#x}"))
    })?;
    Ok(out)
}

/// Synchronous host-to-device copy of `bytes` to `dst`.
pub(crate) fn write(dst: u64, bytes: &[u8], ordinal: usize) -> VmmResult<()> {
    // SAFETY: `dst..dst+len` is mapped for the current device (the
    // caller's context), and no kernel of it runs during the setup.
    unsafe { memory::memcpy_htod(dst, bytes) }.map_err(|e| {
        e.during(|| {
            format!(
                "writing {} bytes of runtime state of device {ordinal} at {dst:#x}",
                bytes.len()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitizer::config::MAX_SHADOW_POOL_RECORDS;
    use proptest::prelude::*;

    fn params(pool_records: u32, tables: bool) -> DeviceParams {
        DeviceParams {
            ordinal: 0,
            rank: 1,
            num_ranks: 2,
            tables,
            pool_records,
            granularity: 2 << 20,
            shareable: true,
            reserve_base: 1 << 40,
            globals_base: 3 << 40,
        }
    }

    proptest! {
        /// Whatever the pool's size: the header, the barrier clocks and
        /// every table are disjoint, in order, aligned, inside the region,
        /// and a region's layout is recomputed alike from its header.
        #[test]
        fn the_region_layout_never_overlaps(records in 0u32..=MAX_SHADOW_POOL_RECORDS) {
            let (h, layout) = header(&params(records, true));
            prop_assert!(layout.fits());
            prop_assert_eq!(RegionLayout::of(&h), layout);
            let t = layout.tables.unwrap();
            let mut end = BARRIER_OFFSET + BARRIER_CLOCKS * BARRIER_CLOCK_BYTES;
            for s in t.spans() {
                prop_assert!(s.offset >= end && s.offset % TABLE_ALIGN == 0 && s.bytes > 0);
                end = s.end();
            }
            prop_assert_eq!(end, layout.used_bytes);
            prop_assert!(RegionLayout::barrier_clock(1) + BARRIER_CLOCK_BYTES <= TABLES_OFFSET);
            let e = EngineTables::at(1 << 30, &t);
            prop_assert_eq!(e.pool_words, (u64::from(records) + 1) * RECORD_WORDS as u64);
            prop_assert_eq!(e.launch_words as usize * 4, LAUNCH_RING_SLOTS as usize * LAUNCH_RECORD_BYTES);
            let mut desc = GpuRuntime::default();
            e.name_in(&mut desc);
            prop_assert_eq!(EngineTables::of(&desc), e);
        }
    }

    /// A region without tables is its header and barrier clocks only;
    /// the two barrier clocks alternate.
    #[test]
    fn a_region_without_tables_holds_its_barrier_clocks_only() {
        let (h, layout) = header(&params(1 << 16, false));
        assert_eq!((h.tables, h.pool_records), (0, 0));
        assert_eq!(layout.tables, None);
        assert_eq!(layout.used_bytes, TABLES_OFFSET);
        assert_eq!(RegionLayout::barrier_clock(0), BARRIER_OFFSET);
        assert_eq!(RegionLayout::barrier_clock(2), BARRIER_OFFSET);
        assert_eq!(
            RegionLayout::barrier_clock(3),
            BARRIER_OFFSET + BARRIER_CLOCK_BYTES
        );
        assert_eq!(
            (h.format, h.lanes, h.world),
            (REGION_FORMAT, LANES as u32, 2)
        );
    }

    /// The initial headers are what the engine's own initialisation
    /// writes into empty tables.
    #[test]
    fn the_tables_start_empty() {
        use std::sync::atomic::{AtomicU32, AtomicU64};
        use vigil_shared::atomic::CoreAtomics;
        use vigil_shared::race::knowledge::Arena;
        use vigil_shared::race::record::Pool;
        let t = TableLayout::new(64);
        let pool: Vec<AtomicU64> = (0..t.pool.bytes / 8).map(|_| Default::default()).collect();
        Pool::<CoreAtomics>::init(&pool);
        let arena: Vec<AtomicU32> = (0..t.arena.bytes / 4).map(|_| Default::default()).collect();
        Arena::<CoreAtomics>::init(&arena, 1);
        let exits: Vec<AtomicU32> = (0..t.exits.bytes / 4).map(|_| Default::default()).collect();
        Arena::<CoreAtomics>::init_exits(&exits);
        let pool: Vec<u64> = pool.into_iter().map(AtomicU64::into_inner).collect();
        let [arena, exits] = [arena, exits].map(|w| {
            w.into_iter()
                .map(AtomicU32::into_inner)
                .collect::<Vec<u32>>()
        });
        let want: [(u64, &[u8]); 3] = [
            (
                t.pool.offset,
                bytemuck::cast_slice(&pool[..POOL_HEADER_WORDS]),
            ),
            (
                t.arena.offset,
                bytemuck::cast_slice(&arena[..ARENA_HEADER_WORDS]),
            ),
            (
                t.exits.offset,
                bytemuck::cast_slice(&exits[..EXIT_HEADER_WORDS]),
            ),
        ];
        let got = t.headers();
        assert!(got.iter().map(|(at, b)| (*at, b.as_slice())).eq(want));
    }
}
