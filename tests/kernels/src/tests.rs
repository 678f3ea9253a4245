//! Kernels that exercise each part of the device API, for the GPU tests.

use vigil_device::prelude::*;

/// The memory ordering numbered `sel` (0 relaxed, 1 acquire, 2 release, 3 acq_rel).
#[inline(always)]
pub fn ordering_from(sel: u32) -> Ordering {
    match sel {
        1 => Ordering::Acquire,
        2 => Ordering::Release,
        3 => Ordering::AcqRel,
        _ => Ordering::Relaxed,
    }
}

/// The scope numbered `sel` (0 block, 1 device, 2 system).
#[inline(always)]
pub fn scope_from(sel: u32) -> Scope {
    match sel {
        0 => Scope::Block,
        2 => Scope::System,
        _ => Scope::Device,
    }
}

/// Expected final slot values of `atomic_ops_*` for `threads` threads, from
/// initial slots `[0, threads, MAX, 0, 0, 0, 0, !0, 0]` (min starts at the
/// type's maximum), in the order of the kernel's operations.
pub const ATOMIC_SLOTS: usize = 9;

macro_rules! atomic_ops_kernel {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        /// Every thread applies each atomic operation once, with the ordering
        /// and scope selected by `order_sel` / `scope_sel`, to its slot:
        /// 0 add 1, 1 sub 1, 2 min(tid), 3 max(tid), 4 exchange(tid+1),
        /// 5 compare-exchange increment loop, 6 or bit, 7 and-not bit, 8 xor bit
        /// (bit = 1 << (tid % bits)). Slot 9.. records each thread's exchange result.
        #[kernel]
        pub fn $name(slots: GlobalSliceMut<$t>, order_sel: u32, scope_sel: u32) {
            let o = ordering_from(order_sel);
            let s = scope_from(scope_sel);
            let tid = global_index_x();
            let threads = grid_stride_x();
            if tid >= threads {
                return;
            }
            let me = tid as $t;
            let bits = (core::mem::size_of::<$t>() * 8) as usize;
            let bit: $t = (1 as $t) << (tid % bits);
            slots.at(0).atomic_add(1, o, s);
            slots.at(1).atomic_sub(1, o, s);
            slots.at(2).atomic_min(me, o, s);
            slots.at(3).atomic_max(me, o, s);
            let old = slots.at(4).atomic_exchange(me + 1, o, s);
            let mut cur = slots.at(5).atomic_load(o, s);
            loop {
                match slots.at(5).atomic_compare_exchange(cur, cur + 1, o, s) {
                    Ok(_) => break,
                    Err(seen) => cur = seen,
                }
            }
            slots.at(6).atomic_or(bit, o, s);
            slots.at(7).atomic_and(!bit, o, s);
            slots.at(8).atomic_xor(bit, o, s);
            if 9 + tid < slots.len() {
                slots.at(9 + tid).atomic_store(old, o, s);
            }
        }
    };
}
atomic_ops_kernel!(atomic_ops_u32, u32);
atomic_ops_kernel!(atomic_ops_i32, i32);
atomic_ops_kernel!(atomic_ops_u64, u64);
atomic_ops_kernel!(atomic_ops_i64, i64);

macro_rules! shared_atomic_ops_kernel {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        /// `atomic_ops_*`'s operations on a block-shared array (relaxed,
        /// block scope): thread 0 sets the slots to `[0, threads, MAX, 0, 0,
        /// 0, 0, !0, 0]` (the block's threads), then every thread applies
        /// each operation once; after a barrier block `b`'s slots go to
        /// `out[b * ATOMIC_SLOTS..]`, and each thread's exchange result to
        /// `seen[global index]`. The compare-exchange loop starts from a
        /// guess of 0, so most of its exchanges fail (atomic reads).
        #[kernel]
        pub fn $name(out: GlobalSliceMut<$t>, seen: GlobalSliceMut<$t>) {
            let slots = shared_array!($t; ATOMIC_SLOTS);
            let t = thread_idx().x as usize;
            let threads = block_dim().x as usize;
            if t == 0 {
                let init: [$t; ATOMIC_SLOTS] = [0, threads as $t, <$t>::MAX, 0, 0, 0, 0, !0, 0];
                for (i, v) in init.into_iter().enumerate() {
                    slots.store(i, v);
                }
            }
            sync_threads();
            let me = t as $t;
            let bits = (core::mem::size_of::<$t>() * 8) as usize;
            let bit: $t = (1 as $t) << (t % bits);
            slots.atomic_add(0, 1);
            slots.atomic_sub(1, 1);
            slots.atomic_min(2, me);
            slots.atomic_max(3, me);
            let old = slots.atomic_exchange(4, me + 1);
            let mut cur = 0;
            while let Err(found) = slots.atomic_compare_exchange(5, cur, cur + 1) {
                cur = found;
            }
            slots.atomic_or(6, bit);
            slots.atomic_and(7, !bit);
            slots.atomic_xor(8, bit);
            sync_threads();
            let b = block_idx().x as usize;
            if t < ATOMIC_SLOTS {
                out.store(b * ATOMIC_SLOTS + t, slots.load(t));
            }
            seen.store(global_index_x(), old);
        }
    };
}
shared_atomic_ops_kernel!(shared_atomic_ops_u32, u32);
shared_atomic_ops_kernel!(shared_atomic_ops_i32, i32);
shared_atomic_ops_kernel!(shared_atomic_ops_u64, u64);
shared_atomic_ops_kernel!(shared_atomic_ops_i64, i64);

/// The floating-point atomics on a block-shared array (relaxed, block
/// scope): per thread, slot 0 += 1.5, slot 1 -= 0.5, slot 2 + 1 by a
/// compare-exchange loop, slot 3 exchanged with the thread's index; block
/// `b`'s four slots go to `out[4b..]` after a barrier.
macro_rules! shared_atomic_float_kernel {
    ($name:ident, $t:ty) => {
        #[doc = concat!("Shared-memory float atomics on `", stringify!($t), "` (see the macro).")]
        #[kernel]
        pub fn $name(out: GlobalSliceMut<$t>) {
            let slots = shared_array!($t; 4);
            let t = thread_idx().x as usize;
            if t < 4 {
                slots.store(t, 0.0);
            }
            sync_threads();
            slots.atomic_add(0, 1.5);
            slots.atomic_sub(1, 0.5);
            let mut cur = 0.0;
            while let Err(found) = slots.atomic_compare_exchange(2, cur, cur + 1.0) {
                cur = found;
            }
            slots.atomic_exchange(3, t as $t);
            sync_threads();
            if t < 4 {
                out.store(4 * block_idx().x as usize + t, slots.load(t));
            }
        }
    };
}
shared_atomic_float_kernel!(shared_atomic_ops_f32, f32);
shared_atomic_float_kernel!(shared_atomic_ops_f64, f64);

macro_rules! atomic_float_kernel {
    ($name:ident, $t:ty) => {
        /// Floating-point atomics: slot 0 += 1.5 and slot 1 -= 0.5 per
        /// thread (add/sub), slot 2 a compare-exchange loop adding 1,
        /// slot 3 exchange; ordering and scope selected as in `atomic_ops_u32`.
        #[kernel]
        pub fn $name(slots: GlobalSliceMut<$t>, order_sel: u32, scope_sel: u32) {
            let o = ordering_from(order_sel);
            let s = scope_from(scope_sel);
            slots.at(0).atomic_add(1.5, o, s);
            slots.at(1).atomic_sub(0.5, o, s);
            let mut cur = slots.at(2).atomic_load(o, s);
            loop {
                match slots.at(2).atomic_compare_exchange(cur, cur + 1.0, o, s) {
                    Ok(_) => break,
                    Err(seen) => cur = seen,
                }
            }
            slots.at(3).atomic_exchange(global_index_x() as $t, o, s);
        }
    };
}
atomic_float_kernel!(atomic_ops_f32, f32);
atomic_float_kernel!(atomic_ops_f64, f64);

/// Reverses each block's chunk of `x` into `y` through a static shared
/// array (1,024 elements) and, separately, through dynamic shared memory:
/// `y[b*n + t] = x[b*n + n-1-t]` and `z` likewise. Needs `blockDim.x <= 1024`
/// and at least `blockDim.x * 4` bytes of dynamic shared memory.
#[kernel]
pub fn shared_reverse(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, z: GlobalSliceMut<u32>) {
    let tile = shared_array!(u32; 1024);
    let (dynamic, dyn_len) = dynamic_shared::<u32>();
    let n = block_dim().x as usize;
    let t = thread_idx().x as usize;
    let base = block_idx().x as usize * n;
    let v = if base + t < x.len() {
        x.load(base + t)
    } else {
        0
    };
    tile.store(t, v);
    if t < dyn_len {
        // SAFETY: `t < dyn_len` elements of this block's dynamic shared memory.
        unsafe { dynamic.add(t).write_volatile(v ^ 0xffff_ffff) };
    }
    sync_threads();
    let src = n - 1 - t;
    if base + t < y.len() {
        y.store(base + t, tile.load(src));
    }
    if base + t < z.len() && src < dyn_len {
        // SAFETY: `src < dyn_len` elements of this block's dynamic shared memory.
        z.store(
            base + t,
            unsafe { dynamic.add(src).read_volatile() } ^ 0xffff_ffff,
        );
    }
}

/// Per thread, eight warp-collective results into `out[tid*8 ..]`:
/// shfl_down(lane,1), shfl_up(lane,1), shfl_xor(lane,1), shfl(lane, 0)
/// (broadcast of lane 0's value + 100), ballot(lane odd), any(lane == 5),
/// all(lane < 32), and a 64-bit shuffle_xor by 2 of (lane << 32 | lane),
/// stored as 0 when both halves came from lane ^ 2.
#[kernel]
pub fn warp_ops(out: GlobalSliceMut<u32>) {
    let tid = global_index_x();
    let lane = warp::lane_id();
    let base = tid * 8;
    if base + 8 > out.len() {
        return;
    }
    let m = warp::FULL_MASK;
    out.store(base, warp::shfl_down(m, lane, 1));
    out.store(base + 1, warp::shfl_up(m, lane, 1));
    out.store(base + 2, warp::shfl_xor(m, lane, 1));
    out.store(base + 3, warp::shfl(m, lane + 100, 0));
    out.store(base + 4, warp::ballot(m, lane % 2 == 1));
    out.store(base + 5, warp::any(m, lane == 5) as u32);
    out.store(base + 6, warp::all(m, lane < 32) as u32);
    let wide = ((lane as u64) << 32) | lane as u64;
    let x = warp::shfl_xor(m, wide, 2);
    let from = lane ^ 2;
    out.store(base + 7, (((x >> 32) as u32) ^ from) | ((x as u32) ^ from));
}

/// Writes `linear + 1` at each thread's linear index in a 3-D launch
/// (x fastest), so the host can check that every thread of any launch shape
/// ran exactly once with the right coordinates.
#[kernel]
pub fn index_map(out: GlobalSliceMut<u32>) {
    let (t, b, bd, gd) = (thread_idx(), block_idx(), block_dim(), grid_dim());
    let block_linear = (b.z as u64 * gd.y as u64 + b.y as u64) * gd.x as u64 + b.x as u64;
    let thread_linear = (t.z as u64 * bd.y as u64 + t.y as u64) * bd.x as u64 + t.x as u64;
    let linear = (block_linear * bd.volume() + thread_linear) as usize;
    if linear < out.len() {
        let prev = out
            .at(linear)
            .atomic_add(linear as u32 + 1, Ordering::Relaxed, Scope::Device);
        if prev != 0 {
            // A second visit leaves a wrong value behind for the host to see.
            out.at(linear)
                .atomic_add(1, Ordering::Relaxed, Scope::Device);
        }
    }
}

/// Writes each thread's `blockIdx.x` into `out[global index]`: with a grid
/// wider than 65,535 blocks the high block indices must appear.
#[kernel]
pub fn block_ids(out: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < out.len() {
        out.store(i, block_idx().x);
    }
}

/// The word `fill_pattern` writes at index `i` for `seed`: a value the host
/// recomputes to check where data landed.
#[inline(always)]
pub fn pattern(i: usize, seed: u32) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ seed
}

/// `out[i] = pattern(i, seed)` over a grid-stride loop.
#[kernel]
pub fn fill_pattern(out: GlobalSliceMut<u32>, seed: u32) {
    let mut i = global_index_x();
    while i < out.len() {
        out.store(i, pattern(i, seed));
        i += grid_stride_x();
    }
}

/// `dst[i] = src[i] + 1` over a grid-stride loop (up to the shorter length).
#[kernel]
pub fn copy_inc(src: GlobalSlice<u32>, dst: GlobalSliceMut<u32>) {
    let n = src.len().min(dst.len());
    let mut i = global_index_x();
    while i < n {
        dst.store(i, src.load(i).wrapping_add(1));
        i += grid_stride_x();
    }
}
