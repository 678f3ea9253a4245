//! Per-device runtime state (docs/src/design/address-space.md): one region per device rank at a
//! fixed [`PER_DEVICE_STATE_STRIDE`] inside a second reservation aligned to
//! the stride, so masking a thread-state pointer gives the device's
//! [`GlobalState`].
//!
//! A region holds, from its start: the `GlobalState`; at
//! [`THREAD_STATES_OFFSET`] the thread states of the device's SMs
//! (`thread_state_bytes(num_threads, clock_buffer_size)` each, initialised
//! by [`ThreadClocks::init`]: epoch 1, everything else empty); then,
//! 256-byte aligned, the inflated-record pool (a [`PoolHeader`] and
//! `shadow_pool_records` records); then, 256-byte aligned, the
//! [`BARRIER_CLOCKS`] clocks a group of processes publishes its host
//! clock in at a barrier (see `group`). The rest of the mapping is zero. The
//! report buffer lives in host-mapped memory owned by the reporting code;
//! [`super::Vmm::set_report_buffer`] writes its address into the
//! `GlobalState`.

use super::super::driver::memory;
use super::error::VmmResult;
use super::layout::{round_up, PER_DEVICE_STATE_STRIDE, THREAD_STATES_OFFSET};
use super::physical::{Mapping, PhysOps, UndoStack};
use super::VmmError;
use std::sync::atomic::AtomicU32;
use vigil_shared::abi::{thread_state_bytes, GlobalState, InflatedRecord, PoolHeader};
use vigil_shared::address::{device_globals, sanitizer_tid};
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::clock::ThreadClocks;

/// Host clocks a region holds for a group's barriers: barrier `n`
/// publishes in clock `n % 2`, so a rank that went on to the next barrier
/// never overwrites the clock a slower rank is still reading (it cannot
/// reach barrier `n + 2` before every rank has left barrier `n`).
pub const BARRIER_CLOCKS: u64 = 2;

/// Sizes of one device's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionLayout {
    /// Bytes of one thread state.
    pub thread_state_bytes: u64,
    /// Offset of the inflated-record pool.
    pub pool_offset: u64,
    /// Offset of the barrier clocks ([`BARRIER_CLOCKS`] of `num_threads`
    /// u32 each).
    pub barrier_offset: u64,
    /// Bytes of one barrier clock.
    pub barrier_clock_bytes: u64,
    /// Bytes used (GlobalState, thread states, pool, barrier clocks).
    pub used_bytes: u64,
}

impl RegionLayout {
    /// The layout for `num_sms` thread states of `num_threads` clocks with
    /// `clock_buffer_size` snapshots, and `pool_records` inflated records.
    pub fn new(
        num_sms: u32,
        num_threads: u32,
        clock_buffer_size: u32,
        pool_records: u32,
    ) -> RegionLayout {
        let tsb = thread_state_bytes(num_threads, clock_buffer_size);
        let pool_offset = round_up(THREAD_STATES_OFFSET + num_sms as u64 * tsb, 256);
        let pool_bytes = std::mem::size_of::<PoolHeader>() as u64
            + pool_records as u64 * std::mem::size_of::<InflatedRecord>() as u64;
        let barrier_offset = round_up(pool_offset + pool_bytes, 256);
        let barrier_clock_bytes = 4 * num_threads as u64;
        RegionLayout {
            thread_state_bytes: tsb,
            pool_offset,
            barrier_offset,
            barrier_clock_bytes,
            used_bytes: barrier_offset + BARRIER_CLOCKS * barrier_clock_bytes,
        }
    }

    /// The layout of the region whose `GlobalState` is `g`.
    pub fn of(g: &GlobalState) -> RegionLayout {
        RegionLayout::new(
            g.num_sms,
            g.num_threads,
            g.clock_buffer_size,
            g.pool_capacity,
        )
    }

    /// Offset of the clock barrier `n` publishes in.
    pub fn barrier_clock(&self, n: u32) -> u64 {
        self.barrier_offset + u64::from(n) % BARRIER_CLOCKS * self.barrier_clock_bytes
    }

    /// True when the region fits the per-device stride.
    pub fn fits(&self) -> bool {
        self.used_bytes <= PER_DEVICE_STATE_STRIDE
    }
}

/// What a device's runtime state needs to be created.
pub(crate) struct DeviceParams {
    pub ordinal: usize,
    pub rank: u32,
    pub num_ranks: u32,
    pub num_sms: u32,
    pub clock_buffer_size: u32,
    pub pool_records: u32,
    pub seed: u32,
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
    pub global: GlobalState,
}

/// The host image of a region's initialised prefix (GlobalState, thread
/// states, pool header), as bytes. Pure: tested on the CPU.
pub(crate) fn region_image(global: &GlobalState, layout: &RegionLayout, rank: u32) -> Vec<u8> {
    let prefix = layout.pool_offset + std::mem::size_of::<PoolHeader>() as u64;
    let words: Vec<AtomicU32> = (0..prefix / 4).map(|_| AtomicU32::new(0)).collect();
    let ts_words = (layout.thread_state_bytes / 4) as usize;
    for sm in 0..global.num_sms {
        let at = (THREAD_STATES_OFFSET / 4) as usize + sm as usize * ts_words;
        ThreadClocks::<CoreAtomics>::new(
            &words[at..at + ts_words],
            global.num_threads,
            global.clock_buffer_size,
        )
        .init(sanitizer_tid(rank, sm, global.num_sms));
    }
    let mut bytes: Vec<u8> = words
        .into_iter()
        .flat_map(|w| w.into_inner().to_ne_bytes())
        .collect();
    bytes[..std::mem::size_of::<GlobalState>()].copy_from_slice(bytemuck::bytes_of(global));
    let header = PoolHeader {
        next: 0,
        capacity: global.pool_capacity,
        evictions: 0,
        wasted: 0,
        merged_heads: 0,
        degraded: 0,
        reserved: [0; 2],
    };
    let at = layout.pool_offset as usize;
    bytes[at..at + std::mem::size_of::<PoolHeader>()].copy_from_slice(bytemuck::bytes_of(&header));
    bytes
}

/// Creates, maps and writes the runtime state of one device; undone
/// exactly on failure.
pub(crate) fn create<O: PhysOps>(ops: &O, p: &DeviceParams) -> VmmResult<DeviceRuntime> {
    let num_threads = p.num_sms * p.num_ranks;
    let layout = RegionLayout::new(p.num_sms, num_threads, p.clock_buffer_size, p.pool_records);
    if !layout.fits() {
        return Err(VmmError::RuntimeStateTooLarge {
            ordinal: p.ordinal,
            bytes: layout.used_bytes,
            sms: p.num_sms,
            threads: num_threads,
            clock_buffer_size: p.clock_buffer_size,
            stride: PER_DEVICE_STATE_STRIDE,
        });
    }
    let base = device_globals(p.globals_base, p.rank);
    let global = GlobalState {
        reserve_base: p.reserve_base,
        globals_base: p.globals_base,
        report_buffer: 0,
        pool_base: base + layout.pool_offset,
        rng_seed: p.seed,
        num_sms: p.num_sms,
        num_devices: p.num_ranks,
        num_threads,
        clock_buffer_size: p.clock_buffer_size,
        report_capacity: 0,
        pool_capacity: p.pool_records,
        thread_state_bytes: layout.thread_state_bytes as u32,
    };
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
    let image = region_image(&global, &layout, p.rank);
    write(base, &image, p.ordinal)?;
    undo.commit();
    Ok(DeviceRuntime {
        ordinal: p.ordinal,
        rank: p.rank,
        mapping,
        global,
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
    use std::mem::size_of;
    use vigil_shared::abi::ThreadStateHeader;

    #[test]
    fn h100_region_fits_and_image_is_initialised() {
        let (sms, ranks, cb) = (132u32, 1u32, 32u32);
        let layout = RegionLayout::new(sms, sms * ranks, cb, 1 << 16);
        assert!(layout.fits());
        assert_eq!(layout.pool_offset % 256, 0);
        let g = GlobalState {
            num_sms: sms,
            num_devices: ranks,
            num_threads: sms * ranks,
            clock_buffer_size: cb,
            pool_capacity: 1 << 16,
            ..Default::default()
        };
        let img = region_image(&g, &layout, 0);
        let back: GlobalState = bytemuck::pod_read_unaligned(&img[..64]);
        assert_eq!(back, g);
        // SM 5's thread state: tid 5, own epoch 1.
        let at = (THREAD_STATES_OFFSET + 5 * layout.thread_state_bytes) as usize;
        let word =
            |i: usize| u32::from_ne_bytes(img[at + 4 * i..at + 4 * i + 4].try_into().unwrap());
        assert_eq!(word(ThreadStateHeader::TID_WORD), 5);
        assert_eq!(word(ThreadStateHeader::WORDS + 5), 1);
        assert_eq!(word(ThreadStateHeader::WORDS + 4), 0);
        let ph: PoolHeader = bytemuck::pod_read_unaligned(
            &img[layout.pool_offset as usize..][..size_of::<PoolHeader>()],
        );
        assert_eq!(ph.capacity, 1 << 16);
    }

    /// The barrier clocks follow the pool without overlapping it, the two
    /// alternate, and a layout recomputed from the region's `GlobalState`
    /// is the one it was made with.
    #[test]
    fn barrier_clocks_follow_the_pool_and_alternate() {
        let layout = RegionLayout::new(132 * 7, 132 * 7 * 2, 32, 1 << 16);
        let pool_end = layout.pool_offset
            + (size_of::<PoolHeader>() + (1 << 16) * size_of::<InflatedRecord>()) as u64;
        assert!(layout.barrier_offset >= pool_end);
        assert_eq!(layout.barrier_offset % 256, 0);
        assert_eq!(layout.barrier_clock_bytes, 4 * 132 * 7 * 2);
        assert_eq!(layout.barrier_clock(0), layout.barrier_offset);
        assert_eq!(layout.barrier_clock(2), layout.barrier_clock(0));
        assert_eq!(
            layout.barrier_clock(3),
            layout.barrier_offset + layout.barrier_clock_bytes
        );
        assert_eq!(
            layout.used_bytes,
            layout.barrier_clock(1) + layout.barrier_clock_bytes
        );
        assert!(layout.fits());
        let g = GlobalState {
            num_sms: 132 * 7,
            num_threads: 132 * 7 * 2,
            clock_buffer_size: 32,
            pool_capacity: 1 << 16,
            ..Default::default()
        };
        assert_eq!(RegionLayout::of(&g), layout);
    }

    #[test]
    fn eight_h200s_with_a_big_clock_buffer_do_not_fit() {
        let layout = RegionLayout::new(132, 132 * 8, 4096, 0);
        assert!(!layout.fits());
    }
}
