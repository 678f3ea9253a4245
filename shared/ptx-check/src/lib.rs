//! A PTX kernel that drives `vigil-shared`'s engine over memory passed in
//! by pointer: a plain access, an atomic (with the real `atom.add` done
//! under the cell locks) and a fence. It exists to prove the engine builds
//! for `nvptx64-nvidia-cuda` and that `ptxas` accepts the result; the host
//! build of the same function ([`check_hooks`]) is what the GPU runtime's
//! wrapper will look like.
#![cfg_attr(
    target_arch = "nvptx64",
    no_std,
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]
#![warn(missing_docs)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering as MemOrder};

use vigil_shared::abi::{thread_state_words, AccessSite, GlobalState};
use vigil_shared::atomic::{AtomicFamily, CoreAtomics};
use vigil_shared::engine::{AtomicOp, AtomicOpKind, Engine, EngineConfig, Outcome, SliceMemory};
use vigil_shared::{Ordering, Scope};

/// Raw device memory of the sanitizer, as the runtime hands it to a kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawSanitizerMemory {
    /// The device's constants.
    pub globals: *const GlobalState,
    /// All thread states, back to back.
    pub thread_states: *const AtomicU32,
    /// Shadow cells of the checked range, word 0 at `globals.reserve_base + 2^39`.
    pub shadow: *const AtomicU64,
    /// Shadow cells available.
    pub shadow_cells: u64,
    /// Inflated-record pool.
    pub pool: *const AtomicU32,
    /// Pool words.
    pub pool_words: u64,
    /// Report buffer.
    pub reports: *const AtomicU32,
    /// Report buffer words.
    pub report_words: u64,
    /// SC-fence clocks (`sc_fence_words` long).
    pub sc_fences: *const AtomicU32,
    /// SC-fence clock words.
    pub sc_fence_words: u64,
}

/// Runs a plain access, an atomic add on `data` and a fence through the
/// engine as sanitizer thread `tid`; returns a bit set of outcomes (bit 0:
/// race, bit 1: error).
///
/// # Safety
/// Every pointer of `mem` must be valid for the length it states (the
/// thread states for `globals.num_threads` states) for the whole call, and
/// `data` must point to a live `u32`.
pub unsafe fn check_hooks(
    mem: &RawSanitizerMemory,
    tid: u32,
    addr: u64,
    write: bool,
    data: *const AtomicU32,
) -> u32 {
    // SAFETY: the caller guarantees `globals` is valid.
    let g = unsafe { &*mem.globals };
    let ts_words = thread_state_words(g.num_threads, g.clock_buffer_size);
    // SAFETY: the caller guarantees each region is valid for its length,
    // and atomics may alias freely with other threads' views.
    let slices = unsafe {
        (
            core::slice::from_raw_parts(mem.thread_states, ts_words * g.num_threads as usize),
            core::slice::from_raw_parts(mem.shadow, mem.shadow_cells as usize),
            core::slice::from_raw_parts(mem.pool, mem.pool_words as usize),
            core::slice::from_raw_parts(mem.reports, mem.report_words as usize),
            core::slice::from_raw_parts(mem.sc_fences, mem.sc_fence_words as usize),
        )
    };
    let memory = SliceMemory::<CoreAtomics> {
        thread_states: slices.0,
        thread_state_words: ts_words,
        shadow: slices.1,
        pool: slices.2,
        reports: slices.3,
        sc_fences: slices.4,
    };
    let engine = Engine::new(&memory, EngineConfig::from_globals(g));
    let site = AccessSite {
        line: line!(),
        ..AccessSite::default()
    };
    let mut bits = 0;
    let mut note = |o: Outcome| {
        bits |= o.is_race() as u32 | (o.is_error() as u32) << 1;
    };
    note(engine.access(tid, addr, 4, write, &site));
    let op = AtomicOp::new(AtomicOpKind::Rmw, Ordering::AcqRel, Scope::Device);
    // SAFETY: the caller guarantees `data` is valid.
    let data = unsafe { &*data };
    note(engine.atomic(tid, addr + 4, 4, op, &site, || {
        data.fetch_add(1, MemOrder::Relaxed);
        true
    }));
    engine.fence(tid, Ordering::SeqCst, Scope::System);
    bits
}

/// The PTX entry point: one sanitizer thread per block, as `blockIdx.x`.
///
/// # Safety
/// As [`check_hooks`]; `out` must be valid for one `u32` per block.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn vigil_engine_check(
    mem: RawSanitizerMemory,
    addr: u64,
    write: u32,
    data: *const AtomicU32,
    out: *mut u32,
) {
    // SAFETY: reading a special register has no preconditions.
    let block = unsafe { core::arch::nvptx::_block_idx_x() } as u32;
    // SAFETY: forwarded from this kernel's contract.
    let bits = unsafe { check_hooks(&mem, block, addr, write != 0, data) };
    // SAFETY: `out` holds one u32 per block.
    unsafe { out.add(block as usize).write(bits) };
}

/// Sets up thread state `blockIdx.x` (epoch 1, empty clocks): one block
/// per sanitizer thread, one thread per block doing the work.
///
/// # Safety
/// `thread_states` must hold `gridDim.x` thread states for `num_threads`
/// threads and `clock_buffer_size` snapshots.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn vigil_engine_init(
    thread_states: *const AtomicU32,
    num_threads: u32,
    clock_buffer_size: u32,
) {
    // SAFETY: reading special registers has no preconditions.
    let (block, thread) = unsafe {
        (
            core::arch::nvptx::_block_idx_x() as u32,
            core::arch::nvptx::_thread_idx_x(),
        )
    };
    if thread != 0 {
        return;
    }
    let words = thread_state_words(num_threads, clock_buffer_size);
    // SAFETY: the caller guarantees one state per block.
    let state =
        unsafe { core::slice::from_raw_parts(thread_states.add(block as usize * words), words) };
    vigil_shared::clock::ThreadClocks::<CoreAtomics>::new(state, num_threads, clock_buffer_size)
        .init(block);
}

/// What [`stress_body`] does per iteration.
pub mod stress_mode {
    /// Each GPU thread reads then writes word `gid + k * total` in round
    /// `k` through the engine (a streaming kernel): race-free.
    pub const STREAM: u32 = 0;
    /// Each GPU thread adds one to a shared counter with a relaxed
    /// device-scope atomic through the engine: race-free.
    pub const ATOMIC: u32 = 1;
    /// Every GPU thread writes one of 32 words shared by all blocks: racy.
    pub const RACY: u32 = 2;
    /// [`STREAM`]'s memory traffic without the engine (baseline).
    pub const PLAIN_STREAM: u32 = 3;
    /// [`ATOMIC`]'s memory traffic without the engine (baseline).
    pub const PLAIN_ATOMIC: u32 = 4;
    /// Flag: run the engine on device-scope (`.gpu`) atomics instead of
    /// `core`'s system-scope ones (what a single-GPU runtime would use).
    pub const GPU_SCOPE: u32 = 0x100;
}

/// The body of the GPU stress kernel for GPU thread `gid` of sanitizer
/// thread `tid`: `iters` rounds of the accesses [`stress_mode`] names on
/// `data` (word `w` at address `real_base + 4 w`), through the engine.
/// Returns outcome bits as [`check_hooks`] does.
///
/// # Safety
/// As [`check_hooks`]; `data` must hold `total_threads * iters + 1` words
/// (the last is the counter).
pub unsafe fn stress_body(
    mem: &RawSanitizerMemory,
    tid: u32,
    gid: u32,
    total_threads: u32,
    mode: u32,
    iters: u32,
    data: *const AtomicU32,
) -> u32 {
    let words = total_threads as usize * iters as usize;
    // SAFETY: the caller guarantees `data` holds total_threads * iters + 1 words.
    let data = unsafe { core::slice::from_raw_parts(data, words + 1) };
    let counter = &data[words];
    // Round k touches word gid + k * total_threads: coalesced, streaming.
    let word = |k: u32| gid as usize + k as usize * total_threads as usize;
    match mode {
        stress_mode::PLAIN_STREAM => {
            for k in 0..iters {
                let w = &data[word(k)];
                w.store(k + w.load(MemOrder::Relaxed), MemOrder::Relaxed);
            }
            return 0;
        }
        stress_mode::PLAIN_ATOMIC => {
            for _ in 0..iters {
                counter.fetch_add(1, MemOrder::Relaxed);
            }
            return 0;
        }
        _ => {}
    }
    #[cfg(target_arch = "nvptx64")]
    if mode & stress_mode::GPU_SCOPE != 0 {
        // SAFETY: forwarded from the caller; GpuU32/GpuU64 are plain words.
        return unsafe {
            stress_engine::<gpu_atomics::GpuAtomics>(
                mem,
                tid,
                gid,
                total_threads,
                mode & !stress_mode::GPU_SCOPE,
                iters,
                data,
                words,
            )
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe { stress_engine::<CoreAtomics>(mem, tid, gid, total_threads, mode, iters, data, words) }
}

/// The engine rounds of [`stress_body`] over atomic family `F`.
///
/// # Safety
/// As [`stress_body`]; `F`'s atomics must be plain 4- and 8-byte words.
#[allow(clippy::too_many_arguments)]
unsafe fn stress_engine<F: AtomicFamily>(
    mem: &RawSanitizerMemory,
    tid: u32,
    gid: u32,
    total_threads: u32,
    mode: u32,
    iters: u32,
    data: &[AtomicU32],
    words: usize,
) -> u32 {
    let counter = &data[words];
    let word = |k: u32| gid as usize + k as usize * total_threads as usize;
    // SAFETY: forwarded from the caller.
    let g = unsafe { &*mem.globals };
    let ts_words = thread_state_words(g.num_threads, g.clock_buffer_size);
    // SAFETY: forwarded from the caller.
    let memory = unsafe {
        SliceMemory::<F> {
            thread_states: core::slice::from_raw_parts(
                mem.thread_states.cast::<F::U32>(),
                ts_words * g.num_threads as usize,
            ),
            thread_state_words: ts_words,
            shadow: core::slice::from_raw_parts(
                mem.shadow.cast::<F::U64>(),
                mem.shadow_cells as usize,
            ),
            pool: core::slice::from_raw_parts(mem.pool.cast::<F::U32>(), mem.pool_words as usize),
            reports: core::slice::from_raw_parts(
                mem.reports.cast::<F::U32>(),
                mem.report_words as usize,
            ),
            sc_fences: core::slice::from_raw_parts(
                mem.sc_fences.cast::<F::U32>(),
                mem.sc_fence_words as usize,
            ),
        }
    };
    let engine = Engine::new(&memory, EngineConfig::from_globals(g));
    let real = vigil_shared::address::real_base(g.reserve_base);
    let site = AccessSite {
        line: line!(),
        thread: gid,
        block: tid,
        ..AccessSite::default()
    };
    let op = AtomicOp::new(AtomicOpKind::Rmw, Ordering::Relaxed, Scope::Device);
    let mut bits = 0;
    let mut note = |o: Outcome| bits |= o.is_race() as u32 | (o.is_error() as u32) << 1;
    for k in 0..iters {
        match mode {
            stress_mode::STREAM => {
                let at = real + 4 * word(k) as u64;
                note(engine.access(tid, at, 4, false, &site));
                let v = data[word(k)].load(MemOrder::Relaxed);
                note(engine.access(tid, at, 4, true, &site));
                data[word(k)].store(k + v, MemOrder::Relaxed);
            }
            stress_mode::ATOMIC => {
                note(
                    engine.atomic(tid, real + 4 * words as u64, 4, op, &site, || {
                        counter.fetch_add(1, MemOrder::Relaxed);
                        true
                    }),
                );
            }
            _ => {
                let w = (gid + k) % 32;
                note(engine.access(tid, real + 4 * w as u64, 4, true, &site));
                data[w as usize].store(k, MemOrder::Relaxed);
            }
        }
    }
    bits
}

/// The GPU stress kernel: block `b` is sanitizer thread `b`; every GPU
/// thread runs [`stress_body`] and stores its outcome bits in `out`.
///
/// # Safety
/// As [`stress_body`]; `out` holds one u32 per GPU thread.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn vigil_engine_stress(
    mem: *const RawSanitizerMemory,
    mode: u32,
    iters: u32,
    data: *const AtomicU32,
    out: *mut u32,
) {
    // SAFETY: reading special registers has no preconditions.
    let (block, thread, block_dim, grid_dim) = unsafe {
        use core::arch::nvptx::*;
        (
            _block_idx_x() as u32,
            _thread_idx_x() as u32,
            _block_dim_x() as u32,
            _grid_dim_x() as u32,
        )
    };
    let gid = block * block_dim + thread;
    // SAFETY: forwarded from this kernel's contract.
    let bits = unsafe { stress_body(&*mem, block, gid, block_dim * grid_dim, mode, iters, data) };
    // SAFETY: `out` holds one u32 per GPU thread.
    unsafe { out.add(gid as usize).write(bits) };
}

/// An [`AtomicFamily`] of device-scope PTX atomics (`ld/st/atom .gpu`),
/// which are cheaper than `core`'s `.sys` ones when one GPU is checked.
#[cfg(target_arch = "nvptx64")]
pub mod gpu_atomics {
    use core::arch::asm;
    use core::cell::UnsafeCell;
    use core::sync::atomic::Ordering as MemOrder;
    use vigil_shared::atomic::{AtomicFamily, AtomicU32Ops, AtomicU64Ops};

    /// A 32-bit word accessed with `.gpu` atomics.
    #[repr(transparent)]
    pub struct GpuU32(UnsafeCell<u32>);
    /// A 64-bit word accessed with `.gpu` atomics.
    #[repr(transparent)]
    pub struct GpuU64(UnsafeCell<u64>);
    // SAFETY: every access goes through a PTX atomic instruction.
    unsafe impl Sync for GpuU32 {}
    // SAFETY: as above.
    unsafe impl Sync for GpuU64 {}

    /// The family.
    pub struct GpuAtomics;

    macro_rules! cas_sem {
        ($s:expr, $f:expr) => {
            match ($s, $f) {
                (MemOrder::Relaxed, MemOrder::Relaxed) => 0,
                (MemOrder::Acquire, _) | (MemOrder::Relaxed, _) => 1,
                (MemOrder::Release, MemOrder::Relaxed) => 2,
                _ => 3,
            }
        };
    }

    /// `load`, `store` and `compare_exchange` of one word width: `$u` is the
    /// width's `.uN` spelling (loads, stores), `$b` its `.bN` one (`cas`).
    macro_rules! word_ops {
        ($t:ty, $reg:ident, $u:literal, $b:literal) => {
            #[inline(always)]
            fn load(&self, o: MemOrder) -> $t {
                let v: $t;
                let p = self.0.get();
                // SAFETY: `p` is a valid, aligned global word.
                unsafe {
                    if o == MemOrder::Relaxed {
                        asm!(concat!("ld.relaxed.gpu.", $u, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p);
                    } else {
                        asm!(concat!("ld.acquire.gpu.", $u, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p);
                    }
                }
                v
            }
            #[inline(always)]
            fn store(&self, v: $t, o: MemOrder) {
                let p = self.0.get();
                // SAFETY: as in `load`.
                unsafe {
                    if o == MemOrder::Relaxed {
                        asm!(concat!("st.relaxed.gpu.", $u, " [{p}], {v};"), v = in($reg) v, p = in(reg64) p);
                    } else {
                        asm!(concat!("st.release.gpu.", $u, " [{p}], {v};"), v = in($reg) v, p = in(reg64) p);
                    }
                }
            }
            #[inline(always)]
            fn compare_exchange(&self, c: $t, n: $t, s: MemOrder, f: MemOrder) -> Result<$t, $t> {
                let old: $t;
                let p = self.0.get();
                macro_rules! cas {
                    ($sem:literal) => {
                        asm!(concat!("atom.", $sem, ".gpu.cas.", $b, " {o}, [{p}], {c}, {n};"), o = out($reg) old, p = in(reg64) p, c = in($reg) c, n = in($reg) n)
                    };
                }
                // SAFETY: as in `load`.
                unsafe {
                    match cas_sem!(s, f) {
                        0 => cas!("relaxed"),
                        1 => cas!("acquire"),
                        2 => cas!("release"),
                        _ => cas!("acq_rel"),
                    }
                }
                if old == c {
                    Ok(old)
                } else {
                    Err(old)
                }
            }
        };
    }

    /// A read-modify-write in relaxed or acq_rel form (`$op` = `add.u32`, ...).
    macro_rules! rmw_u32 {
        ($name:ident, $op:literal) => {
            #[inline(always)]
            fn $name(&self, v: u32, o: MemOrder) -> u32 {
                let old: u32;
                let p = self.0.get();
                // SAFETY: as in `load`.
                unsafe {
                    if o == MemOrder::Relaxed {
                        asm!(concat!("atom.relaxed.gpu.", $op, " {o}, [{p}], {v};"), o = out(reg32) old, p = in(reg64) p, v = in(reg32) v);
                    } else {
                        asm!(concat!("atom.acq_rel.gpu.", $op, " {o}, [{p}], {v};"), o = out(reg32) old, p = in(reg64) p, v = in(reg32) v);
                    }
                }
                old
            }
        };
    }

    impl AtomicU32Ops for GpuU32 {
        word_ops!(u32, reg32, "u32", "b32");
        rmw_u32!(fetch_add, "add.u32");
        rmw_u32!(fetch_max, "max.u32");
        #[inline(always)]
        fn fetch_sub(&self, v: u32, o: MemOrder) -> u32 {
            self.fetch_add(v.wrapping_neg(), o)
        }
    }

    impl AtomicU64Ops for GpuU64 {
        word_ops!(u64, reg64, "u64", "b64");
    }

    impl AtomicFamily for GpuAtomics {
        type U32 = GpuU32;
        type U64 = GpuU64;
        #[inline(always)]
        fn fence(o: MemOrder) {
            // SAFETY: a fence has no operands.
            unsafe {
                if o == MemOrder::SeqCst {
                    asm!("fence.sc.gpu;");
                } else {
                    asm!("fence.acq_rel.gpu;");
                }
            }
        }
        #[inline(always)]
        fn spin() {}
    }
}

/// PTX has no unwinding: a panic (a failed bounds check) traps the kernel.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no other effect.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::abi::{InflatedRecord, PoolHeader, RaceReport, ReportBufferHeader};

    #[test]
    fn host_build_of_the_kernel_body_detects_a_race() {
        let (n, cb) = (2u32, 4u32);
        let g = GlobalState {
            num_sms: 2,
            num_devices: 1,
            num_threads: n,
            clock_buffer_size: cb,
            rng_seed: 1,
            ..GlobalState::default()
        };
        let z32 = |k: usize| (0..k).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        let ts = z32(thread_state_words(n, cb) * n as usize);
        let shadow: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        let pool = z32(PoolHeader::WORDS + 4 * InflatedRecord::WORDS);
        pool[1].store(4, MemOrder::Relaxed);
        let reports = z32(ReportBufferHeader::WORDS + 4 * RaceReport::WORDS);
        reports[1].store(4, MemOrder::Relaxed);
        let sc = z32(vigil_shared::engine::sc_fence_words(1, n));
        let mem = RawSanitizerMemory {
            globals: &g,
            thread_states: ts.as_ptr(),
            shadow: shadow.as_ptr(),
            shadow_cells: shadow.len() as u64,
            pool: pool.as_ptr(),
            pool_words: pool.len() as u64,
            reports: reports.as_ptr(),
            report_words: reports.len() as u64,
            sc_fences: sc.as_ptr(),
            sc_fence_words: sc.len() as u64,
        };
        let data = AtomicU32::new(0);
        let real = vigil_shared::address::real_base(0);
        let memory = SliceMemory::<CoreAtomics> {
            thread_states: &ts,
            thread_state_words: thread_state_words(n, cb),
            shadow: &shadow,
            pool: &pool,
            reports: &reports,
            sc_fences: &[],
        };
        let engine = Engine::new(&memory, EngineConfig::from_globals(&g));
        engine.init_thread(0);
        engine.init_thread(1);
        // SAFETY: every pointer above outlives the calls.
        unsafe {
            assert_eq!(check_hooks(&mem, 0, real, true, &data), 0);
            assert_eq!(
                check_hooks(&mem, 1, real, false, &data),
                1,
                "plain read after an unordered write races"
            );
        }
        assert_eq!(data.load(MemOrder::Relaxed), 2);
    }
}
