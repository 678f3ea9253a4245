//! Kernels on a shared stack (`shared_stack!`): a GEMM whose output rows
//! get a softmax in the same kernel, its phases' tiles reusing one
//! region of dynamic shared memory, correct and with an unsynced reuse;
//! a small two-phase kernel and its hand-placed twin for the PTX
//! comparison; a stack too large for any device.

use vigil_device::math;
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;
use vigil_device::shared_stack::tile_bytes;

/// Rows of `a` (and of the output) per block of [`gemm_softmax()`].
pub const BM: usize = 128;
/// Columns of `b` and of the output: one block's tile covers whole rows,
/// so the softmax of a row needs no other block.
pub const BN: usize = 256;
/// Depth of one step of the GEMM (`k` is a multiple of it).
pub const BK: usize = 128;
/// Threads per block of [`gemm_softmax()`]: each computes an 8 x 8 part
/// of the block's `BM` x `BN` output tile (rows `8 * (t / 32) ..`, every
/// 32nd column from `t % 32`).
pub const GEMM_THREADS: u32 = 512;
const TM: usize = 8;
const TN: usize = 8;
const _: () = assert!((BM / TM) * (BN / TN) == GEMM_THREADS as usize && BN / TN == 32);

/// The GEMM phase's tiles: a `BM` x `BK` step of `a` (64 KiB) and a `BK`
/// x `BN` step of `b` (128 KiB).
pub const GEMM_TILES: [usize; 2] = [tile_bytes::<f32>(BM * BK), tile_bytes::<f32>(BK * BN)];
/// The softmax phase's tiles: the `BM` x `BN` output tile (128 KiB) and
/// each row's maximum and reciprocal sum (1 KiB).
pub const SOFTMAX_TILES: [usize; 2] = [tile_bytes::<f32>(BM * BN), tile_bytes::<f32>(2 * BM)];

const fn sum(tiles: &[usize]) -> usize {
    let (mut total, mut i) = (0, 0);
    while i < tiles.len() {
        total += tiles[i];
        i += 1;
    }
    total
}

/// The GEMM phase's shared memory (192 KiB).
pub const GEMM_PHASE: usize = sum(&GEMM_TILES);
/// The softmax phase's shared memory (129 KiB).
pub const SOFTMAX_PHASE: usize = sum(&SOFTMAX_TILES);

/// The shared memory a block of [`gemm_softmax()`] needs with its phases'
/// tiles on one stack: the larger phase (192 KiB).
pub const GEMM_SOFTMAX_STACK: usize = if GEMM_PHASE > SOFTMAX_PHASE {
    GEMM_PHASE
} else {
    SOFTMAX_PHASE
};

/// The shared memory the same tiles need laid out side by side, each for
/// the whole kernel (321 KiB: more than the 227 KiB an H100 or H200 gives
/// a block).
pub const GEMM_SOFTMAX_STATIC: usize = GEMM_PHASE + SOFTMAX_PHASE;

/// `out = softmax(a b)` row by row, for `a` of `grid.x * BM` rows and `k`
/// columns (a multiple of `BK`), `b` of `k` rows and `BN` columns: block
/// `x` computes rows `x * BM ..` in two phases on one shared stack. The
/// GEMM phase's tiles are popped with a barrier (`pop_synced`) before the
/// softmax phase's tiles take their bytes.
#[kernel]
pub fn gemm_softmax(a: GlobalSlice<f32>, b: GlobalSlice<f32>, out: GlobalSliceMut<f32>, k: u32) {
    let mut smem = shared_stack!(GEMM_SOFTMAX_STACK);
    gemm_softmax_tile::<_, true>(&mut smem, a, b, out, k as usize);
}

/// [`gemm_softmax()`] with the GEMM phase's tiles popped without a barrier
/// (`pop_unsynced`): threads that finished their last GEMM step write the
/// output tile over bytes other threads still read.
#[kernel]
pub fn gemm_softmax_unsynced(
    a: GlobalSlice<f32>,
    b: GlobalSlice<f32>,
    out: GlobalSliceMut<f32>,
    k: u32,
) {
    let mut smem = shared_stack!(GEMM_SOFTMAX_STACK);
    gemm_softmax_tile::<_, false>(&mut smem, a, b, out, k as usize);
}

/// The two phases of [`gemm_softmax()`] on `smem` (`SYNCED`: pop the GEMM
/// tiles with a barrier).
#[inline(always)]
fn gemm_softmax_tile<S: Sanitizer, const SYNCED: bool>(
    smem: &mut SharedStack<GEMM_SOFTMAX_STACK, S>,
    a: GlobalSlice<f32, S>,
    b: GlobalSlice<f32, S>,
    out: GlobalSliceMut<f32, S>,
    k: usize,
) {
    let t = thread_idx().x as usize;
    let threads = GEMM_THREADS as usize;
    let (tx, ty) = (t % 32, t / 32);
    let row0 = block_idx().x as usize * BM;

    // The GEMM: each step's tiles of `a` and `b` in shared memory, the
    // output in registers.
    let a_tile = smem.push::<f32, { BM * BK }>(); // @push-a
    let b_tile = smem.push::<f32, { BK * BN }>(); // @push-b
    let mut acc = [[0f32; TN]; TM];
    let mut k0 = 0;
    while k0 < k {
        if k0 > 0 {
            sync_threads(); // the last step's reads before this step's stores
        }
        let mut e = t;
        while e < BM * BK {
            a_tile.store(e, a.load((row0 + e / BK) * k + k0 + e % BK));
            e += threads;
        }
        let mut e = t;
        while e < BK * BN {
            b_tile.store(e, b.load((k0 + e / BN) * BN + e % BN));
            e += threads;
        }
        sync_threads();
        for kk in 0..BK {
            let mut av = [0f32; TM];
            for (i, v) in av.iter_mut().enumerate() {
                *v = a_tile.load((ty * TM + i) * BK + kk); // @read-a
            }
            // Index loops: LLVM unrolls them and keeps `acc` in registers
            // (with iterators over `acc` it stayed in local memory).
            #[allow(clippy::needless_range_loop)]
            for j in 0..TN {
                let bv = b_tile.load(kk * BN + tx + 32 * j); // @read-b
                for i in 0..TM {
                    acc[i][j] = math::fma(av[i], bv, acc[i][j]);
                }
            }
        }
        k0 += BK;
    }
    // No barrier ends the last step: popping the tiles provides it (or,
    // unsynced, does not).
    if SYNCED {
        smem.pop_synced((b_tile, a_tile));
    } else {
        smem.pop_unsynced((b_tile, a_tile));
    }

    // The softmax, over the bytes the GEMM's tiles used.
    let c_tile = smem.push::<f32, { BM * BN }>(); // @push-c
    let stats = smem.push::<f32, { 2 * BM }>(); // @push-stats
    for (i, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            c_tile.store((ty * TM + i) * BN + tx + 32 * j, *v); // @write-c
        }
    }
    sync_threads();
    let (warp, lane) = (t / 32, t % 32);
    let mut r = warp;
    while r < BM {
        let mut m = f32::NEG_INFINITY;
        for q in 0..BN / 32 {
            m = math::max(m, c_tile.load(r * BN + lane + 32 * q));
        }
        let mut d = 16;
        while d > 0 {
            m = math::max(m, warp::shfl_xor(warp::FULL_MASK, m, d));
            d /= 2;
        }
        let mut total = 0.0;
        for q in 0..BN / 32 {
            total += math::exp(c_tile.load(r * BN + lane + 32 * q) - m);
        }
        let mut d = 16;
        while d > 0 {
            total += warp::shfl_xor(warp::FULL_MASK, total, d);
            d /= 2;
        }
        if lane == 0 {
            stats.store(2 * r, m);
            stats.store(2 * r + 1, 1.0 / total);
        }
        r += threads / 32;
    }
    sync_threads();
    let mut e = t;
    while e < BM * BN {
        let q = e / BN;
        let (m, inv) = (stats.load(2 * q), stats.load(2 * q + 1));
        out.store(
            (row0 + q) * BN + e % BN,
            math::exp(c_tile.load(e) - m) * inv,
        );
        e += threads;
    }
    // Nothing reuses these bytes before the kernel ends.
    smem.pop_unsynced((stats, c_tile));
}

/// Threads per block of [`stack_phases()`].
pub const PHASES_THREADS: u32 = 256;

/// [`stack_phases()`]'s stack: its first phase's two 1 KiB tiles, then
/// its second phase's one 2 KiB tile on the same bytes.
pub const PHASES_STACK: usize = 2048;

/// Two phases on a stack, one block of [`PHASES_THREADS`] threads:
/// `out[t] = -(x[255 - t] + t)`, through a first phase's two tiles and a
/// second phase's tile on their bytes. Its plain entry is the PTX of
/// [`stack_phases_hand_placed()`], which places the same tiles at fixed
/// offsets of the dynamic shared memory.
#[kernel]
pub fn stack_phases(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let mut smem = shared_stack!(PHASES_STACK);
    let t = thread_idx().x as usize;
    let sums = smem.push::<f32, 256>();
    let counts = smem.push::<u32, 256>();
    sums.store(t, x.load(t));
    counts.store(t, t as u32);
    sync_threads();
    let (s, c) = (sums.load(255 - t), counts.load(255 - t));
    smem.pop_synced((counts, sums));
    let v = s + c as f32;
    let spread = smem.push::<f32, 512>();
    spread.store(2 * t, v);
    spread.store(2 * t + 1, -v);
    sync_threads();
    out.store(t, spread.load(511 - 2 * t));
}

/// [`stack_phases()`] with its tiles placed by hand: shared views at fixed
/// offsets of the dynamic shared memory (`sums` at 0, `counts` at 1,024,
/// `spread` at 0). Launch with [`PHASES_STACK`] bytes of dynamic shared
/// memory.
#[kernel]
pub fn stack_phases_hand_placed<S: Sanitizer>(x: GlobalSlice<f32, S>, out: GlobalSliceMut<f32, S>) {
    let (base, _) = dynamic_shared::<u8>();
    let t = thread_idx().x as usize;
    // SAFETY (each view): inside the launch's dynamic shared memory,
    // aligned for its elements.
    let sums = unsafe { SharedArray::<f32, 256, S>::from_raw(base) };
    let counts = unsafe { SharedArray::<u32, 256, S>::from_raw(base.wrapping_add(1024)) };
    sums.store(t, x.load(t));
    counts.store(t, t as u32);
    sync_threads();
    let (s, c) = (sums.load(255 - t), counts.load(255 - t));
    sync_threads();
    let v = s + c as f32;
    let spread = unsafe { SharedArray::<f32, 512, S>::from_raw(base) };
    spread.store(2 * t, v);
    spread.store(2 * t + 1, -v);
    sync_threads();
    out.store(t, spread.load(511 - 2 * t));
}

/// A stack larger than any device gives a block (240 KiB; an H100 or H200
/// gives 227 KiB): a typed launch fails with the shortfall before it runs.
pub const TOO_BIG_STACK: usize = 240 * 1024;

/// Writes `out[0]` through a small tile of a [`TOO_BIG_STACK`]-byte stack.
#[kernel]
pub fn stack_too_big(out: GlobalSliceMut<f32>) {
    let mut smem = shared_stack!(TOO_BIG_STACK);
    let one = smem.push::<f32, 1>();
    one.store(0, 1.0);
    out.store(0, one.load(0));
    smem.pop_unsynced(one);
}

/// Capacity of [`stack_script()`]'s stack.
pub const SCRIPT_STACK: usize = 4096;

/// Tiles [`stack_script()`] holds at most.
pub const SCRIPT_DEPTH: usize = 8;

/// The bytes of the tiles [`stack_script()`] pushes, by class (`ops`
/// values 0 to 3): 16 `u8`, 12 `f32`, 64 `u32`, 100 `f64`.
pub const SCRIPT_TILES: [usize; 4] = [
    tile_bytes::<u8>(16),
    tile_bytes::<f32>(12),
    tile_bytes::<u32>(64),
    tile_bytes::<f64>(100),
];

/// A tile of one of [`SCRIPT_TILES`]' classes.
enum ScriptTile<S> {
    Bytes(SharedTile<u8, 16, S>),
    Floats(SharedTile<f32, 12, S>),
    Words(SharedTile<u32, 64, S>),
    Doubles(SharedTile<f64, 100, S>),
}

impl<S: Sanitizer> ScriptTile<S> {
    /// Fills every element with `mark`; returns the tile's offset.
    fn fill(&self, mark: u8) -> usize {
        match self {
            ScriptTile::Bytes(t) => fill(t, mark),
            ScriptTile::Floats(t) => fill(t, f32::from(mark)),
            ScriptTile::Words(t) => fill(t, u32::from(mark)),
            ScriptTile::Doubles(t) => fill(t, f64::from(mark)),
        }
    }

    /// True when every element still holds `mark`.
    fn holds(&self, mark: u8) -> bool {
        match self {
            ScriptTile::Bytes(t) => holds(t, mark),
            ScriptTile::Floats(t) => holds(t, f32::from(mark)),
            ScriptTile::Words(t) => holds(t, u32::from(mark)),
            ScriptTile::Doubles(t) => holds(t, f64::from(mark)),
        }
    }

    fn pop<const C: usize>(self, smem: &mut SharedStack<C, S>) {
        match self {
            ScriptTile::Bytes(t) => smem.pop_unsynced(t),
            ScriptTile::Floats(t) => smem.pop_unsynced(t),
            ScriptTile::Words(t) => smem.pop_unsynced(t),
            ScriptTile::Doubles(t) => smem.pop_unsynced(t),
        }
    }
}

fn fill<T: bytemuck::Pod, const N: usize, S: Sanitizer>(t: &SharedTile<T, N, S>, v: T) -> usize {
    for i in 0..N {
        t.store(i, v);
    }
    t.offset()
}

fn holds<T: bytemuck::Pod + PartialEq, const N: usize, S: Sanitizer>(
    t: &SharedTile<T, N, S>,
    v: T,
) -> bool {
    (0..N).all(|i| t.load(i) == v)
}

/// Runs a script of pushes and pops on a stack, one thread: `ops[i]` 0 to
/// 3 pushes a tile of that class of [`SCRIPT_TILES`] and fills it with its
/// depth, 4 pops the top tile. `out[i]` gets a push's tile offset, or for
/// a pop 1 when the tile still held its fill (no other tile overlapped
/// it), else 0. The script keeps to [`SCRIPT_DEPTH`] tiles and the
/// stack's capacity.
#[kernel]
pub fn stack_script<S: Sanitizer>(ops: GlobalSlice<u32, S>, out: GlobalSliceMut<u32, S>) {
    let mut smem = shared_stack!(SCRIPT_STACK);
    let mut held: [Option<ScriptTile<S>>; SCRIPT_DEPTH] = core::array::from_fn(|_| None);
    let mut depth = 0;
    for i in 0..ops.len() {
        let result = match ops.load(i) {
            4 => {
                depth -= 1;
                let tile = held[depth].take().expect("a tile to pop");
                let kept = tile.holds(depth as u8 + 1);
                tile.pop(&mut smem);
                kept as usize
            }
            class => {
                let tile = match class {
                    0 => ScriptTile::Bytes(smem.push()),
                    1 => ScriptTile::Floats(smem.push()),
                    2 => ScriptTile::Words(smem.push()),
                    _ => ScriptTile::Doubles(smem.push()),
                };
                let offset = tile.fill(depth as u8 + 1);
                held[depth] = Some(tile);
                depth += 1;
                offset
            }
        };
        out.store(i, result as u32);
    }
}

/// Misuses of a stack, one thread: `mode` 0 pops the lower of two tiles
/// first, 1 pushes three 1 KiB tiles on a 2 KiB stack. Each panics on
/// the CPU backend (traps on a GPU) at the offending call.
#[kernel]
pub fn stack_misuse(out: GlobalSliceMut<u32>, mode: u32) {
    let mut smem = shared_stack!(PHASES_STACK);
    let a = smem.push::<u32, 256>();
    let b = smem.push::<u32, 256>();
    a.store(0, 1);
    b.store(0, 2);
    if mode == 0 {
        smem.pop_unsynced(a); // @pop-out-of-order
        smem.pop_unsynced(b);
    } else {
        let c = smem.push::<u32, 256>(); // @push-past-capacity
        c.store(0, 3);
        smem.pop_unsynced((c, b, a));
    }
    out.store(0, 1);
}
