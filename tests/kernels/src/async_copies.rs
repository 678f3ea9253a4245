//! Kernels that exercise every asynchronous-copy operation: `cp.async` of
//! each size with commit groups and zero-fill, bulk copies both ways with
//! mbarriers and bulk groups, mbarrier phases, tensor copies of rank 2
//! and 3 (with swizzle and out-of-bounds boxes), copies into and out of
//! a shared stack's tiles, and programmatic dependent launch; and kernels
//! whose waits never complete.

use vigil_device::async_copy::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, commit_group,
    fence_proxy_async_shared, wait_all, wait_group, Swizzle,
};
use vigil_device::grid_dependency;
use vigil_device::prelude::*;
use vigil_device::shared_stack::tile_bytes;

/// `y` = `x[0..448]` reversed within `[0, 64)`, `[64, 192)` and
/// `[192, 448)`, moved through shared memory by `cp.async` of 4, 8 and 16
/// bytes (one block of 64 threads).
#[kernel]
pub fn cp_async_sizes(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>) {
    let s4 = shared_array!(u32; 64);
    let s8 = shared_array!(u32; 128);
    let s16 = shared_array!(u32; 256);
    let t = thread_idx().x as usize;
    s4.copy_async::<4>(t, x, t);
    s8.copy_async::<8>(2 * t, x, 64 + 2 * t);
    s16.copy_async::<16>(4 * t, x, 192 + 4 * t);
    commit_group();
    wait_group::<0>();
    sync_threads();
    y.store(t, s4.load(63 - t));
    for k in 0..2 {
        y.store(64 + 2 * t + k, s8.load(127 - 2 * t - k));
    }
    for k in 0..4 {
        y.store(192 + 4 * t + k, s16.load(255 - 4 * t - k));
    }
}

/// Threads per block of [`cp_async_pipeline`](fn@cp_async_pipeline).
pub const PIPE_THREADS: u32 = 128;
/// Stages of [`cp_async_pipeline`](fn@cp_async_pipeline).
pub const PIPE_STAGES: usize = 3;
/// Elements per stage of [`cp_async_pipeline`](fn@cp_async_pipeline) (16 bytes per thread).
pub const PIPE_TILE: usize = 4 * PIPE_THREADS as usize;

/// For each tile of `PIPE_TILE` elements of `x` (the last one padded with
/// zeros), `out[tile + j] = 3 * x[tile + PIPE_TILE - 1 - j]`: tiles stream
/// through a `PIPE_STAGES`-deep `cp.async` pipeline (one group per tile,
/// `wait_group::<PIPE_STAGES - 1>`), the tail zero-filled. `out` holds
/// every tile whole. Blocks of `PIPE_THREADS`, any grid.
#[kernel]
pub fn cp_async_pipeline(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let stages = shared_array!(f32; PIPE_STAGES * PIPE_TILE);
    let t = thread_idx().x as usize;
    let n = x.len();
    let (first, step) = (block_idx().x as usize, grid_dim().x as usize);
    let tiles = n.div_ceil(PIPE_TILE);
    let count = if first < tiles {
        (tiles - first).div_ceil(step)
    } else {
        0
    };
    // Issues the block's `k`-th tile (an empty group past the last).
    let issue = |k: usize| {
        if k < count {
            let at = (first + k * step) * PIPE_TILE + 4 * t;
            let valid = n.saturating_sub(at).min(4);
            stages.copy_async_zfill::<16>((k % PIPE_STAGES) * PIPE_TILE + 4 * t, x, at, valid);
        }
        commit_group();
    };
    for k in 0..PIPE_STAGES - 1 {
        issue(k);
    }
    for k in 0..count {
        issue(k + PIPE_STAGES - 1);
        wait_group::<{ PIPE_STAGES as u32 - 1 }>();
        sync_threads();
        let (stage, base) = (
            (k % PIPE_STAGES) * PIPE_TILE,
            (first + k * step) * PIPE_TILE,
        );
        for e in 0..4 {
            let j = 4 * t + e;
            out.store(base + j, 3.0 * stages.load(stage + PIPE_TILE - 1 - j));
        }
        // Everyone has read the stage before the next issue overwrites it.
        sync_threads();
    }
    wait_all();
}

/// Threads per block of [`bulk_pipeline`](fn@bulk_pipeline).
pub const BULK_THREADS: u32 = 256;
/// Stages of [`bulk_pipeline`](fn@bulk_pipeline).
pub const BULK_STAGES: usize = 2;
/// Elements per tile of [`bulk_pipeline`](fn@bulk_pipeline).
pub const BULK_TILE: usize = 1024;

/// `y = 2 * x + 1` through shared memory: thread 0 loads each tile with a
/// bulk copy completing on the stage's mbarrier (`arrive_expect_tx` on
/// even tiles, `expect_tx` + `arrive` on odd ones), every thread waits on
/// the stage's phase, writes its results to a staging tile, and thread 0
/// stores that with a bulk copy in a bulk group. `x.len()` must be a
/// multiple of 4. Blocks of `BULK_THREADS`, any grid.
#[kernel]
pub fn bulk_pipeline(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    // The stages, then the staging tile, in one array (one array over the
    // GPU sanitizer's limit for a `.shared` shadow is checked through its
    // device-memory shadow: two that each fit would not fit together).
    let stages = shared_array!(f32; (BULK_STAGES + 1) * BULK_TILE; align 128);
    let staged = BULK_STAGES * BULK_TILE;
    let full = mbarriers!(BULK_STAGES);
    let t = thread_idx().x as usize;
    let n = x.len();
    let (first, step) = (block_idx().x as usize, grid_dim().x as usize);
    let tiles = n.div_ceil(BULK_TILE);
    let count = if first < tiles {
        (tiles - first).div_ceil(step)
    } else {
        0
    };
    let tile = |k: usize| {
        let base = (first + k * step) * BULK_TILE;
        (base, (n - base).min(BULK_TILE))
    };
    let produce = |k: usize| {
        if k < count {
            let s = k % BULK_STAGES;
            let bar = full.get(s);
            let (base, len) = tile(k);
            let bytes = 4 * len as u32;
            if k % 2 == 0 {
                bar.arrive_expect_tx(bytes);
                stages.copy_bulk_from(s * BULK_TILE, x, base, len, bar);
            } else {
                bar.expect_tx(bytes);
                stages.copy_bulk_from(s * BULK_TILE, x, base, len, bar);
                bar.arrive();
            }
        }
    };
    if t == 0 {
        for s in 0..BULK_STAGES {
            full.get(s).init(1);
        }
        fence_proxy_async_shared();
    }
    sync_threads();
    if t == 0 {
        for k in 0..BULK_STAGES {
            produce(k);
        }
    }
    for k in 0..count {
        let s = k % BULK_STAGES;
        full.get(s).wait_parity(((k / BULK_STAGES) & 1) as u32);
        let (base, len) = tile(k);
        let mut j = t;
        while j < len {
            stages.store(staged + j, 2.0 * stages.load(s * BULK_TILE + j) + 1.0);
            j += BULK_THREADS as usize;
        }
        fence_proxy_async_shared();
        sync_threads();
        if t == 0 {
            stages.copy_bulk_to(staged, y, base, len);
            bulk_commit_group();
            // Everyone has read stage `s`: it takes the tile after next.
            produce(k + BULK_STAGES);
            bulk_wait_group_read::<0>();
        }
        // The staging tile has been read before anyone writes it again.
        sync_threads();
    }
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// Rounds of [`mbarrier_rounds`](fn@mbarrier_rounds).
pub const MB_ROUNDS: usize = 5;

/// Each thread of block `b` stores `1000 * round + t` in its slot, arrives
/// at an mbarrier counting the whole block, waits for the round's phase
/// and adds its neighbour's slot: `out[2 * (b * n + t)]` is the sum over
/// `MB_ROUNDS` rounds of `1000 * round + (t + 1) % n`, and
/// `out[2 * (b * n + t) + 1]` is 1 when a wait for the last completed
/// phase's parity returns at once. At most 256 threads per block.
#[kernel]
pub fn mbarrier_rounds(out: GlobalSliceMut<u32>) {
    let slots = shared_array!(u32; 256);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let (t, n) = (thread_idx().x as usize, block_dim().x as usize);
    if t == 0 {
        bar.init(n as u32);
    }
    sync_threads();
    let mut acc = 0u32;
    for round in 0..MB_ROUNDS {
        slots.store(t, (1000 * round + t) as u32);
        bar.arrive();
        bar.wait_parity((round & 1) as u32);
        acc = acc.wrapping_add(slots.load((t + 1) % n));
        sync_threads();
    }
    let at = 2 * (block_idx().x as usize * n + t);
    out.store(at, acc);
    let done = bar.try_wait_parity(((MB_ROUNDS - 1) & 1) as u32);
    out.store(at + 1, u32::from(done));
}

/// Side of the boxes of [`tma_tile_roundtrip`](fn@tma_tile_roundtrip).
pub const TMA_BOX: usize = 32;

/// Block `(bx, by)` loads the 32 x 32 box at `(32 bx, 32 by)` of `src`
/// into shared memory (laid out with the swizzle numbered `swizzle`, as
/// both maps are), and stores to the same box of `dst` the value
/// `2 v + 1000 r + c` for the element `v` at row `r`, column `c` of the
/// box (elements outside `src` read as 0, outside `dst` are not written).
/// Blocks of 32 x 8 threads.
#[kernel]
pub fn tma_tile_roundtrip(src: TensorMap<f32, 2>, dst: TensorMapMut<f32, 2>, swizzle: u32) {
    // The loaded tile, then the result (one array: see `bulk_pipeline`).
    let tiles = shared_array!(f32; 2 * TMA_BOX * TMA_BOX; align 1024);
    let result = TMA_BOX * TMA_BOX;
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let layout = Swizzle::from_u8(swizzle as u8).unwrap_or_default();
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let first = tx == 0 && ty == 0;
    let at = [
        (TMA_BOX as u32 * block_idx().x) as i32,
        (TMA_BOX as u32 * block_idx().y) as i32,
    ];
    if first {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(src.box_bytes());
        src.load_tile(&tiles, 0, at, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    let mut r = ty;
    while r < TMA_BOX {
        let i = layout.apply(4 * (r * TMA_BOX + tx)) / 4;
        tiles.store(result + i, 2.0 * tiles.load(i) + (1000 * r + tx) as f32);
        r += 8;
    }
    fence_proxy_async_shared();
    sync_threads();
    if first {
        dst.store_tile(&tiles, result, at);
        bulk_commit_group();
        bulk_wait_group::<0>();
    }
}

/// The box of [`tma_box_3d`](fn@tma_box_3d), innermost first.
pub const BOX_3D: [u32; 3] = [4, 3, 2];

/// Block `(bx, by, bz)` loads the box of `src` whose first element is at
/// `(4 bx + inner, 3 by, 2 bz - 1)` and writes its 24 elements, in box
/// order, to `out[24 * linear_block..]`. Blocks of 32 threads.
#[kernel]
pub fn tma_box_3d(src: TensorMap<u32, 3>, out: GlobalSliceMut<u32>, inner: i32) {
    let boxed = shared_array!(u32; 24; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    let (b, g) = (block_idx(), grid_dim());
    if t == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(src.box_bytes());
        let at = [4 * b.x as i32 + inner, 3 * b.y as i32, 2 * b.z as i32 - 1];
        src.load_tile(&boxed, 0, at, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    let linear = ((b.z * g.y + b.y) * g.x + b.x) as usize;
    if t < 24 {
        out.store(24 * linear + t, boxed.load(t));
    }
}

/// `y[i] = x[i] + 1`, letting its dependent launch start early.
#[kernel]
pub fn pdl_primary(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    grid_dependency::launch_dependents();
    let i = global_index_x();
    if i < y.len() {
        y.store(i, x.load(i) + 1.0);
    }
}

/// `z[i] = 2 * y[i]` where `y` is the primary's output: waits for it.
#[kernel]
pub fn pdl_dependent(y: GlobalSlice<f32>, z: GlobalSliceMut<f32>) {
    let i = global_index_x();
    grid_dependency::wait();
    if i < z.len() {
        z.store(i, 2.0 * y.load(i));
    }
}

/// Threads per block of [`stack_tile_copies`](fn@stack_tile_copies).
pub const STACK_COPY_THREADS: u32 = 64;
/// Elements each block of [`stack_tile_copies`](fn@stack_tile_copies)
/// moves (16 bytes per thread).
pub const STACK_COPY_TILE: usize = 4 * STACK_COPY_THREADS as usize;
/// The shared stack of [`stack_tile_copies`](fn@stack_tile_copies): two
/// tiles of `STACK_COPY_TILE` floats.
pub const STACK_COPY_STACK: usize = 2 * tile_bytes::<f32>(STACK_COPY_TILE);

/// Asynchronous copies into and out of a shared stack's tiles, block `b`
/// owning elements `b * STACK_COPY_TILE ..` of `x`, `y` and `z`. First
/// phase: `cp.async` stages its part of `x` in one tile, the threads
/// write `y[i] = 2 * x[reversed i]` to a second tile, and a bulk store
/// moves that to `y`. Second phase, on the first phase's bytes after
/// `pop_synced`: a bulk load of the same part of `x` completing on an
/// mbarrier, then `z[i] = x[i] + 1`. Blocks of `STACK_COPY_THREADS`.
#[kernel]
pub fn stack_tile_copies(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>, z: GlobalSliceMut<f32>) {
    const N: usize = STACK_COPY_TILE;
    let mut smem = shared_stack!(STACK_COPY_STACK);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    let base = block_idx().x as usize * N;

    let staged = smem.push::<f32, N>();
    staged.copy_async::<16>(4 * t, x, base + 4 * t);
    commit_group();
    wait_all();
    sync_threads();
    let reversed = smem.push::<f32, N>();
    for j in 4 * t..4 * t + 4 {
        reversed.store(j, 2.0 * staged.load(N - 1 - j));
    }
    fence_proxy_async_shared();
    sync_threads();
    if t == 0 {
        reversed.copy_bulk_to(0, y, base, N);
        bulk_commit_group();
        // The store has read the tile before its bytes are pushed again.
        bulk_wait_group_read::<0>();
    }
    smem.pop_synced((reversed, staged));

    let loaded = smem.push::<f32, N>();
    if t == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx((4 * N) as u32);
        loaded.copy_bulk_from(0, x, base, N, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    for j in 4 * t..4 * t + 4 {
        z.store(base + j, loaded.load(j) + 1.0);
    }
    if t == 0 {
        bulk_wait_group::<0>();
    }
    smem.pop_unsynced(loaded);
}

/// Waits on an mbarrier that expects one arrival more than the block
/// makes: the phase never completes.
#[kernel]
pub fn mbarrier_missing_arrival(out: GlobalSliceMut<u32>) {
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    if thread_idx().x == 0 {
        bar.init(block_dim().x + 1);
    }
    sync_threads();
    bar.arrive();
    bar.wait_parity(0);
    out.store(thread_idx().x as usize, 1);
}

/// Waits on an mbarrier that expects 64 transaction bytes while the bulk
/// copy completing on it delivers 32: the phase never completes.
#[kernel]
pub fn mbarrier_missing_bytes(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let tile = shared_array!(f32; 16; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    if thread_idx().x == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(64);
        tile.copy_bulk_from(0, x, 0, 8, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    out.store(thread_idx().x as usize, tile.load(0));
}

// The codegen test's pairs: each `#[kernel]` below and its hand-written
// twin (the instructions CUDA C++ writes for the same operations, with
// the same bounds checks) must compile to the same PTX.

/// One thread's `cp.async` of 16 bytes into dynamic shared memory, a
/// commit and a wait for all but the newest group.
#[kernel]
pub fn codegen_cp_async(x: GlobalSlice<f32>) {
    let tile = dynamic_shared_array!(f32);
    let t = 4 * thread_idx().x as usize;
    tile.copy_async::<16>(t, x, t);
    commit_group();
    wait_group::<1>();
}

/// A bulk load completing on an mbarrier, then a bulk store in a bulk
/// group, by thread 0; every thread waits for the load's phase.
#[kernel]
pub fn codegen_bulk(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let tile = shared_array!(f32; 256; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    if thread_idx().x == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(1024);
        tile.copy_bulk_from(0, x, 0, 256, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    if thread_idx().x == 0 {
        tile.copy_bulk_to(0, y, 0, 256);
        bulk_commit_group();
        bulk_wait_group::<0>();
    }
}

/// A tensor load and a tensor store of one box by thread 0.
#[kernel]
pub fn codegen_tensor(src: TensorMap<f32, 2>, dst: TensorMapMut<f32, 2>) {
    let tile = shared_array!(f32; 1024; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let at = [(32 * block_idx().x) as i32, 0];
    if thread_idx().x == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(src.box_bytes());
        src.load_tile(&tile, 0, at, bar);
        bar.wait_parity(0);
        dst.store_tile(&tile, 0, at);
        bulk_commit_group();
        bulk_wait_group_read::<0>();
    }
}

/// A dependent launch's wait and its own dependents' release.
#[kernel]
pub fn codegen_grid_dependency(y: GlobalSliceMut<f32>) {
    grid_dependency::wait();
    let i = global_index_x();
    if i < y.len() {
        y.store(i, 1.0);
    }
    grid_dependency::launch_dependents();
}

/// The hand-written twins, as CUDA C++ spells the operations in inline
/// PTX (`__cvta_generic_to_shared` for shared operands); coordinates and
/// shared storage come from `vigil_device` as in the kernels, so only the
/// operations under test differ.
#[cfg(target_arch = "nvptx64")]
mod handwritten {
    use core::arch::asm;
    use core::arch::nvptx::{_syncthreads, trap};

    use vigil_device::shared_array;

    // The tiles of the twins of `codegen_bulk` and `codegen_tensor` at
    // module scope, as `#[kernel]` declares a body's arrays of a constant
    // type and length (their addresses need no call).
    vigil_device::__shared_symbol!(
        "vigil_array_codegen_bulk_handwritten_0",
        { vigil_device::shared_mem::__align_at_least::<f32>(128) },
        { vigil_device::shared_mem::__bytes::<f32, 256>() }
    );
    vigil_device::__shared_symbol!(
        "vigil_array_codegen_tensor_handwritten_0",
        { vigil_device::shared_mem::__align_at_least::<f32>(128) },
        { vigil_device::shared_mem::__bytes::<f32, 1024>() }
    );

    /// `__cvta_generic_to_shared(p)`: the address as an integer, as CUDA
    /// C++ hands pointers to inline PTX.
    #[inline(always)]
    fn smem<T>(p: *const T) -> u32 {
        let r: u64;
        // SAFETY: an address conversion.
        unsafe {
            asm!("cvta.to.shared.u64 {r}, {a};", r = out(reg64) r, a = in(reg64) p as usize as u64, options(pure, nomem, nostack))
        };
        r as u32
    }

    /// A global pointer as CUDA C++'s `"l"` operand takes it.
    #[inline(always)]
    fn gmem<T>(p: *const T) -> u64 {
        p as usize as u64
    }

    /// `vigil_device`'s check of elements `j..j + count` of a slice of
    /// `len` (a trap when outside).
    #[inline(always)]
    fn check_range(j: usize, count: usize, len: usize) {
        if count > len || j > len - count {
            // SAFETY: `trap` has no preconditions.
            unsafe { trap() }
        }
    }

    #[inline(always)]
    unsafe fn try_wait(bar: u32, parity: u32) -> bool {
        let done: u32;
        // SAFETY: `bar` is an initialised mbarrier.
        unsafe {
            asm!("{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {q}; selp.u32 {r}, 1, 0, p; }}",
                r = out(reg32) done, b = in(reg32) bar, q = in(reg32) parity, options(nostack))
        };
        done != 0
    }

    /// # Safety
    /// `x` must point to `x_len` elements of device memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn codegen_cp_async_handwritten(x: *const f32, x_len: usize) {
        let (tile, len) = vigil_device::shared_mem::dynamic_shared::<f32>();
        let t = 4 * vigil_device::thread_idx().x as usize;
        assert!(4 <= len && t <= len - 4, "shared array range out of bounds");
        check_range(t, 4, x_len);
        let d = smem(tile.wrapping_add(t));
        let s = gmem(x.wrapping_add(t));
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) d, s = in(reg64) s, options(nostack));
        asm!("cp.async.commit_group;", options(nostack));
        asm!("cp.async.wait_group {n};", n = const 1, options(nostack));
    }

    /// # Safety
    /// `x` and `y` must point to `x_len` and `y_len` elements of device memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn codegen_bulk_handwritten(
        x: *const f32,
        x_len: usize,
        y: *mut f32,
        y_len: usize,
    ) {
        let tile = shared_array!(@sanitizer vigil_device::Plain; @symbol "vigil_array_codegen_bulk_handwritten_0"; f32; 256; align 128).as_ptr();
        let bar = shared_array!(u64; 1).as_ptr();
        if vigil_device::thread_idx().x == 0 {
            asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) smem(bar), c = in(reg32) 1, options(nostack));
            asm!("fence.proxy.async.shared::cta;", options(nostack));
            asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {t};", b = in(reg32) smem(bar), t = in(reg32) 1024, options(nostack));
            check_range(0, 256, x_len);
            asm!("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
                d = in(reg32) smem(tile), s = in(reg64) gmem(x), n = in(reg32) 1024, b = in(reg32) smem(bar), options(nostack));
        }
        _syncthreads();
        while !try_wait(smem(bar), 0) {}
        if vigil_device::thread_idx().x == 0 {
            check_range(0, 256, y_len);
            asm!("cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
                d = in(reg64) gmem(y), s = in(reg32) smem(tile), n = in(reg32) 1024, options(nostack));
            asm!("cp.async.bulk.commit_group;", options(nostack));
            asm!("cp.async.bulk.wait_group {n};", n = const 0, options(nostack));
        }
    }

    /// # Safety
    /// `src` and `dst` must point to tensor maps (in device memory) of rank
    /// 2 over `f32`s whose boxes hold `src_box` and `dst_box` elements.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn codegen_tensor_handwritten(
        src: *const u8,
        src_box: usize,
        dst: *const u8,
        dst_box: usize,
    ) {
        asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) src, options(nostack));
        asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) dst, options(nostack));
        let tile = shared_array!(@sanitizer vigil_device::Plain; @symbol "vigil_array_codegen_tensor_handwritten_0"; f32; 1024; align 128).as_ptr();
        let bar = shared_array!(u64; 1).as_ptr();
        let (x, y) = ((32 * vigil_device::block_idx().x) as i32, 0i32);
        if vigil_device::thread_idx().x == 0 {
            asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) smem(bar), c = in(reg32) 1, options(nostack));
            asm!("fence.proxy.async.shared::cta;", options(nostack));
            asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {t};", b = in(reg32) smem(bar), t = in(reg32) (src_box * 4) as u32, options(nostack));
            assert!(
                src_box <= 1024 && 0 <= 1024 - src_box,
                "shared array range out of bounds"
            );
            asm!("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
                d = in(reg32) smem(tile), m = in(reg64) src, x = in(reg32) x, y = in(reg32) y, b = in(reg32) smem(bar), options(nostack));
            while !try_wait(smem(bar), 0) {}
            assert!(
                dst_box <= 1024 && 0 <= 1024 - dst_box,
                "shared array range out of bounds"
            );
            asm!("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{m}, {{{x}, {y}}}], [{s}];",
                s = in(reg32) smem(tile), m = in(reg64) dst, x = in(reg32) x, y = in(reg32) y, options(nostack));
            asm!("cp.async.bulk.commit_group;", options(nostack));
            asm!("cp.async.bulk.wait_group.read {n};", n = const 0, options(nostack));
        }
    }

    /// # Safety
    /// `y` must point to `y_len` elements of device memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn codegen_grid_dependency_handwritten(
        y: *mut f32,
        y_len: usize,
    ) {
        asm!("griddepcontrol.wait;", options(nostack));
        let i = vigil_device::index::global_index_x();
        if i < y_len {
            *y.add(i) = 1.0;
        }
        asm!("griddepcontrol.launch_dependents;", options(nostack));
    }
}
