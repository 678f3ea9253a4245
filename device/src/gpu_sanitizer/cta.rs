//! A CTA's sanitizer state: what its threads need to find the race
//! engine's memory, the launch's record and their own synchronisation
//! words, kept in the module's `.shared` block by the entry
//! (`super::entry`), and the CTA's geometry (its linear index, a thread's
//! lane, grid-stride loops).
//!
//! A CTA is one sanitizer thread, named by its serial (the launch's base
//! plus its linear block index; see `vigil_shared::race::serial`).

use core::sync::atomic::AtomicU32;

use vigil_shared::copies_in_flight::{CopyQueue, QueueArea};
use vigil_shared::gpu::GpuRuntime;
use vigil_shared::race::cta::CtaView;
use vigil_shared::race::memory::launch_record::{self, path_word};
use vigil_shared::race::serial::{HostOrder, LaneBounds};
use vigil_shared::race::sync::{CtaSync, SYNC_WORDS};
use vigil_shared::read_only::ReadOnlyRanges;

use super::memory::GpuMemory;
use super::report::Reporter;
use crate::arch::ptx as arch;

/// What every thread of a CTA needs to find its sanitizer state; it lives
/// in the module's `.shared` block (`arch::cta_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct CtaState {
    /// The device's [`GpuRuntime`].
    pub runtime: u64,
    /// The launch's record in the launch ring.
    pub record: u64,
    /// The runtime's `real_base`, kept so that an access finds its shadow
    /// without reading the runtime.
    pub real_base: u64,
    /// The CTA's serial (the same-block layer's "thread id").
    pub tid: u32,
    /// The launch's first serial.
    pub base: u32,
    /// Serials the launch owns.
    pub count: u32,
    /// Context-wide launch id (reports name the kernel by it).
    pub launch: u32,
    /// The launch's number in the ring (`LaneRef`).
    pub launch_ref: u32,
    /// The device's rank.
    pub device: u32,
    /// SM the CTA runs on.
    pub smid: u32,
    /// The bound of its own lane ([`HostOrder::own_bound`]): its base,
    /// or in a programmatic dependent launch, until a thread waits for the
    /// kernel before it, that kernel's.
    pub own_bound: u32,
    /// The regions of its SM it holds (the same-block layer's per-CTA
    /// memory), packed (`super::regions::HeldRegions`): none until a
    /// thread of the CTA needs them and claims them for the rest of the
    /// CTA's life. Other threads change it while the CTA runs: read it
    /// through `super::regions::held`, never from a copy of the state.
    pub regions: u32,
    /// Non-zero once a thread may have written the CTA's regions (its
    /// same-block table, window shadow, lane states or copies): an exit
    /// that finds it 0 gives them back without a release fence.
    pub region_used: u8,
    /// Non-zero once a thread took a general path of the race engine
    /// ([`note_general_path`]).
    pub general_path: u8,
    /// How many extension regions it asks for when it claims
    /// ([`vigil_shared::gpu::extensions_wanted`]).
    pub extensions_wanted: u8,
    /// Ranges no thread of the launch writes: reads inside them are
    /// read-only reads (`vigil_shared::read_only`).
    pub read_only: ReadOnlyRanges,
    /// The address of its part of the queue area: its list of bulk copies
    /// in flight (`super::bulk`), then its threads' queues of `cp.async`
    /// copies in flight at `QueueArea::QUEUES_AT` (`super::in_flight`,
    /// interleaved by warp: `QueueArea::thread_queue`); 0 when the launch
    /// keeps none, or the runtime's area has no room for the CTA.
    pub copies: u64,
    /// The launch's path word and what the host asks to be told there
    /// (`launch_record::PATH_WORD`; 0: nothing).
    pub path_word: u64,
}

/// Bytes of the `.shared` block: the state, then the synchronisation
/// words (`CtaSync`).
const STATE_BYTES: usize = core::mem::size_of::<CtaState>();
// `CtaState::current` loads it in 16-byte pieces.
const _: () = assert!(STATE_BYTES == 7 * 16 && core::mem::align_of::<CtaState>() <= 16);
const SYNC_OFFSET: usize = STATE_BYTES.next_multiple_of(4);
const _: () = assert!(SYNC_OFFSET + 4 * SYNC_WORDS <= vigil_shared::block::CTA_STATE_BYTES);

impl CtaState {
    /// The state the entry hook stored for this CTA, loaded from `.shared`
    /// directly, 16 bytes a load (the fields a caller does not use are
    /// not loaded).
    #[inline(always)]
    pub fn current() -> CtaState {
        macro_rules! chunks {
            ($($off:literal)*) => { [$(arch::cta_state_chunk::<$off>()),*] };
        }
        let chunks: [[u64; 2]; STATE_BYTES / 16] = chunks!(0 16 32 48 64 80 96);
        // SAFETY: the state's bytes, written by `enter` before the barrier
        // every thread passed; every field is an integer, valid for any
        // bits.
        unsafe { core::mem::transmute::<[[u64; 2]; STATE_BYTES / 16], CtaState>(chunks) }
    }

    /// The runtime it points to.
    #[inline(always)]
    pub fn runtime(&self) -> &'static GpuRuntime {
        // SAFETY: the host passes a live runtime for the whole launch.
        unsafe { &*(self.runtime as *const GpuRuntime) }
    }

    /// The race engine's memory.
    #[inline(always)]
    pub fn memory(&self) -> GpuMemory<'static> {
        // SAFETY: the host passes a live runtime for the whole launch;
        // `real_base` is its own, read at entry.
        unsafe { GpuMemory::with_real_base(self.runtime(), self.real_base) }
    }

    /// The calling thread's queue of `cp.async` copies in flight, when the
    /// launch keeps them.
    #[inline(always)]
    pub fn copy_queue(&self) -> Option<CopyQueue<'static>> {
        if self.copies == 0 {
            return None;
        }
        let (at, stride) = QueueArea::thread_queue(lane().0);
        let at = self.copies + QueueArea::QUEUES_AT as u64 + at;
        // SAFETY: a non-zero `copies` is the CTA's part of the runtime's
        // live queue area (`copies_part_of`), its threads' queues from
        // `QUEUES_AT`; only the calling thread reaches its own words while
        // the CTA holds its region, and no caller keeps two queues at once.
        Some(unsafe { CopyQueue::strided(at as *mut u64, stride) })
    }

    /// The report buffer.
    #[inline(always)]
    pub fn reporter(&self) -> Reporter<'static> {
        // SAFETY: the host passes a live runtime and a report buffer that
        // lives as long as its context.
        unsafe { Reporter::new(self.runtime(), self.reports()) }
    }

    /// The launching context's report buffer, from the launch's record
    /// (read where a report or a count is written, not at entry).
    #[inline(always)]
    pub fn reports(&self) -> u64 {
        let rec = record_words(self.record);
        u64::from(rec[launch_record::REPORTS]) | u64::from(rec[launch_record::REPORTS + 1]) << 32
    }

    /// The launch's lane bounds (its host order).
    #[inline(always)]
    pub fn bounds(&self) -> &'static LaneBounds {
        // SAFETY: the record (in the launch ring) holds the bounds at this
        // word, 16-aligned; the host wrote it before the launch.
        unsafe { &*((self.record + 4 * launch_record::BOUNDS as u64) as *const LaneBounds) }
    }

    /// The lane bounds of what may be forgotten.
    #[inline(always)]
    pub fn global(&self) -> &'static LaneBounds {
        // SAFETY: as in `bounds`.
        unsafe { &*((self.record + 4 * launch_record::GLOBAL as u64) as *const LaneBounds) }
    }

    /// The CTA's synchronisation state.
    #[inline(always)]
    pub fn sync(&self) -> CtaSync<'static, vigil_shared::atomic::CoreAtomics> {
        CtaSync::new(sync_words())
    }

    /// The engine's view of this CTA, as of its synchronisation state.
    #[inline(always)]
    pub fn view<'a>(&'a self, mem: &GpuMemory<'static>) -> CtaView<'a> {
        const KNOWN_AT: usize = SYNC_OFFSET + 4 * vigil_shared::race::sync::KNOWN_WORD;
        CtaView {
            serial: self.tid,
            // Relaxed: what another thread of the CTA acquired reaches
            // this one's checks when it reaches them (a CTA is one
            // sanitizer thread).
            epoch: cta_epoch(),
            device: self.device,
            host: HostOrder {
                own_bound: self.own_bound,
                ..HostOrder::new(self.base, self.count, self.bounds())
            },
            global: self.global(),
            devices: mem.lane_devices(),
            known: vigil_shared::race::knowledge::SnapRef(arch::cta_state_word::<KNOWN_AT>()),
            launch: self.launch_ref,
            own: Default::default(),
        }
    }
}

/// The words of the launch record at `record`.
#[inline(always)]
pub(super) fn record_words(record: u64) -> &'static [u32] {
    // SAFETY: the host passes the launch's record in its launch ring, live
    // for the launch, its words written before the launch.
    unsafe { core::slice::from_raw_parts(record as *const u32, launch_record::WORDS) }
}

/// A thread of the CTA waited for the kernels its launch depends on
/// (`griddepcontrol.wait`): the CTA's own lane is bounded by its base
/// from now on. The waiting thread's later checks read its own store;
/// another thread's may read the old bound a little longer, which can
/// only report more.
#[inline(always)]
pub(super) fn prerequisites_waited() {
    let at = core::mem::offset_of!(CtaState, own_bound);
    // SAFETY: the CTA's `.shared` block holds its `CtaState` (written at
    // entry, before the barrier every thread passed); `own_bound` is a
    // 4-aligned `u32` of it.
    unsafe {
        let state = arch::cta_state();
        let base = (state.add(core::mem::offset_of!(CtaState, base)) as *const u32).read_volatile();
        (state.add(at) as *mut u32).write_volatile(base)
    }
}

/// The CTA's current release epoch (relaxed: as [`CtaState::view`]).
#[inline(always)]
pub(super) fn cta_epoch() -> u16 {
    const AT: usize = SYNC_OFFSET + 4 * vigil_shared::race::sync::EPOCH_WORD;
    arch::cta_state_word::<AT>() as u16
}

/// The CTA's synchronisation words, in its `.shared` block.
#[inline(always)]
pub(super) fn sync_words() -> &'static [AtomicU32] {
    // SAFETY: the `.shared` block holds SYNC_WORDS words at SYNC_OFFSET,
    // 4-aligned, for the CTA's life.
    unsafe {
        core::slice::from_raw_parts(
            arch::cta_state().add(SYNC_OFFSET) as *const AtomicU32,
            SYNC_WORDS,
        )
    }
}

/// Notes in the CTA's state that the calling thread is about to write
/// the CTA's regions (`CtaState::region_used`): the exit then gives them
/// back with a release.
#[inline(always)]
pub(super) fn mark_region_used() {
    // SAFETY: the CTA's shared block holds its `CtaState`, written by the
    // entry before the barrier every thread passed; every writer stores
    // the same value, read by the exit's first thread after the exit
    // barrier.
    unsafe {
        core::ptr::write_volatile(
            &raw mut (*(arch::cta_state() as *mut CtaState)).region_used,
            1,
        )
    };
}

/// Notes in the CTA's state that the calling thread took a general path
/// of the race engine (`CtaState::general_path`): one whose registers a
/// lean build spills. The exit then tells the host, where the launch
/// asks ([`tell_paths`]).
#[inline(always)]
pub(super) fn note_general_path() {
    // SAFETY: as in `mark_region_used`: every writer stores the same
    // value, read by the exit's first thread after the exit barrier.
    unsafe {
        core::ptr::write_volatile(
            &raw mut (*(arch::cta_state() as *mut CtaState)).general_path,
            1,
        )
    };
}

/// Tells the host, in the launch's path word, what the CTA took that
/// the host asked about (`launch_record::path_word`): a general path of
/// the race engine, and a claim of its same-block regions (`claimed`).
/// The exit's first thread, after the exit barrier: a store to host
/// memory, made only by the CTAs that have something to tell.
#[inline(always)]
pub(super) fn tell_paths(st: &CtaState, claimed: bool) {
    let at = st.path_word & path_word::ADDRESS;
    let tell = |asked: u64, took: bool, byte: u64| {
        if st.path_word & asked != 0 && took {
            // SAFETY: the host passes the device address of a live word
            // of mapped host memory, 4-aligned; every writer of one of
            // its bytes stores the same value, and the host only reads.
            unsafe { core::ptr::write_volatile((at + byte) as *mut u8, 1) };
        }
    };
    tell(
        path_word::TELL_GENERAL_PATH,
        st.general_path != 0,
        path_word::GENERAL_PATH_BYTE,
    );
    tell(
        path_word::TELL_CLAIMED_REGIONS,
        claimed,
        path_word::CLAIMED_REGIONS_BYTE,
    );
}

/// This thread's linear index in the block and the block's size.
#[inline(always)]
pub(super) fn lane() -> (u32, u32) {
    let (t, d) = (arch::thread_idx(), arch::block_dim());
    ((t.z * d.y + t.y) * d.x + t.x, d.x * d.y * d.z)
}

/// This thread's indices of `0..n` in a grid-stride loop over the whole
/// grid (the runtime's own entries: range access, shadow reclaim).
#[inline(always)]
pub(super) fn grid_stride(n: u64) -> GridStride {
    let (lane, lanes) = lane();
    let g = arch::grid_dim();
    let threads = u64::from(lanes) * u64::from(g.x * g.y * g.z);
    let first = u64::from(linear_block()) * u64::from(lanes) + u64::from(lane);
    GridStride {
        next: first,
        end: n,
        stride: threads.max(1),
    }
}

/// The iterator of [`grid_stride`] (a plain loop: `step_by` doubles the
/// entries' code with its checks).
pub(super) struct GridStride {
    next: u64,
    end: u64,
    stride: u64,
}

impl Iterator for GridStride {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        let i = self.next;
        (i < self.end).then(|| {
            self.next = i.saturating_add(self.stride);
            i
        })
    }
}

/// The calling thread's block, as a linear index in the grid.
#[inline(always)]
pub(super) fn linear_block() -> u32 {
    let (b, g) = (arch::block_idx(), arch::grid_dim());
    (b.z * g.y + b.y) * g.x + b.x
}
