//! Tests of the kernel API through real kernels: every example against a
//! host reference, every atomic operation in every ordering and scope,
//! shared memory, warp collectives and edge launch shapes.
//!
//! Each check is written once, as a `#[vigil::test] fn(&Context)`, and
//! Vigil's harness runs it per backend, sanitized: `gpu::*` on a CUDA GPU
//! (reported as skipped without one, a failure with `VIGIL_REQUIRE_GPU=1`)
//! and `cpu::*` on the CPU backend, so the two suites cannot drift. Where a
//! size only matters for the GPU (millions of threads), the CPU runs a
//! smaller one of the same shape.

use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use vigil_kernels::{examples, tests as k};
use vigil_tests::{Rng, KERNELS_PTX};

fn setup(ctx: &Context) -> (Stream, Module) {
    let stream = Stream::new(ctx).expect("stream");
    let module = Module::from_ptx(ctx, KERNELS_PTX).expect("load vigil-kernels PTX");
    (stream, module)
}

#[vigil::test]
fn axpy_matches_cpu_for_awkward_sizes(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<examples::axpy>().unwrap();
    let mut rng = Rng::new(1);
    let largest = if ctx.is_cpu() { 1 << 18 } else { 1 << 20 };
    for n in [1usize, 31, 255, 257, 1000, 65_537, largest] {
        let (xs, ys) = (rng.f32s(n), rng.f32s(n));
        let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
        let mut y = DeviceBuffer::from_slice(&stream, &ys).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::for_num_elems(n, 256),
                (-0.75f32, &x, &mut y),
            )
            .unwrap();
        let got = y.to_vec(&stream).unwrap();
        for i in 0..n {
            assert_eq!(got[i], -0.75 * xs[i] + ys[i], "n={n} i={i}");
        }
    }
}

#[vigil::test]
fn reduce_sum_matches_cpu(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<examples::reduce_sum>().unwrap();
    for n in [1usize, 1023, 1025, 3 << 20] {
        let xs = Rng::new(n as u64).f32s(n);
        let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
        let blocks = ctx.sm_count();
        let mut partials = DeviceBuffer::<f32>::alloc_zeroed(&stream, blocks as usize).unwrap();
        let mut total = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::new(blocks, examples::REDUCE_BLOCK),
                (&x, &mut partials),
            )
            .unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::new(1, examples::REDUCE_BLOCK),
                (&partials, &mut total),
            )
            .unwrap();
        let got = total.to_vec(&stream).unwrap()[0] as f64;
        let want: f64 = xs.iter().map(|&v| v as f64).sum();
        let scale: f64 = xs.iter().map(|&v| (v as f64).abs()).sum::<f64>().max(1.0);
        assert!(
            (got - want).abs() <= 1e-6 * scale,
            "n={n}: got {got}, want {want}"
        );
    }
}

#[vigil::test]
fn histogram_matches_cpu(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<examples::histogram>().unwrap();
    for (n, bins) in [(1usize, 1usize), (1000, 7), (1 << 20, 256)] {
        let values = Rng::new(n as u64).u32s(n, 1 << 16);
        let data = DeviceBuffer::from_slice(&stream, &values).unwrap();
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, bins).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::for_grid_stride(n, 128, 64),
                (&data, &mut out),
            )
            .unwrap();
        let mut want = vec![0u32; bins];
        values.iter().for_each(|v| want[*v as usize % bins] += 1);
        assert_eq!(out.to_vec(&stream).unwrap(), want, "n={n} bins={bins}");
    }
}

/// The launch for atomics in `scope`: block-scope atomics are only atomic
/// among one block's threads, so that case runs one block.
fn atomic_launch(scope_sel: u32) -> (LaunchConfig, usize) {
    if scope_sel == 0 {
        (LaunchConfig::new(1, 256), 256)
    } else {
        (LaunchConfig::new(4, 96), 384)
    }
}

macro_rules! check_int_atomics {
    ($name:ident, $kernel:path, $t:ty) => {
        #[vigil::test]
        fn $name(ctx: &Context) {
            let (stream, module) = setup(ctx);
            let kernel = module.kernel::<$kernel>().unwrap();
            let bits = (std::mem::size_of::<$t>() * 8) as usize;
            for order in 0..4u32 {
                for scope in 0..3u32 {
                    let (cfg, threads) = atomic_launch(scope);
                    let mut init = vec![0 as $t; k::ATOMIC_SLOTS + threads];
                    init[1] = threads as $t;
                    init[2] = <$t>::MAX;
                    init[7] = !0;
                    let mut slots = DeviceBuffer::from_slice(&stream, &init).unwrap();
                    stream
                        .launch(&kernel, cfg, (&mut slots, order, scope))
                        .unwrap();
                    let got = slots.to_vec(&stream).unwrap();
                    let ctx = format!("{} order={order} scope={scope}", stringify!($t));
                    assert_eq!(got[0], threads as $t, "add {ctx}");
                    assert_eq!(got[1], 0, "sub {ctx}");
                    assert_eq!(got[2], 0, "min {ctx}");
                    assert_eq!(got[3], (threads - 1) as $t, "max {ctx}");
                    // Exchange: the old values seen plus the final value are 0..=threads exactly once.
                    let mut seen: Vec<$t> = got[k::ATOMIC_SLOTS..].to_vec();
                    seen.push(got[4]);
                    seen.sort();
                    assert_eq!(
                        seen,
                        (0..=threads as $t).collect::<Vec<_>>(),
                        "exchange {ctx}"
                    );
                    assert_eq!(got[5], threads as $t, "compare-exchange {ctx}");
                    let mut or = 0 as $t;
                    let mut xor = 0 as $t;
                    for t in 0..threads {
                        or |= (1 as $t) << (t % bits);
                        xor ^= (1 as $t) << (t % bits);
                    }
                    assert_eq!(got[6], or, "or {ctx}");
                    assert_eq!(got[7], !or, "and {ctx}");
                    assert_eq!(got[8], xor, "xor {ctx}");
                }
            }
        }
    };
}
check_int_atomics!(
    atomics_u32_every_op_ordering_and_scope,
    k::atomic_ops_u32,
    u32
);
check_int_atomics!(
    atomics_i32_every_op_ordering_and_scope,
    k::atomic_ops_i32,
    i32
);
check_int_atomics!(
    atomics_u64_every_op_ordering_and_scope,
    k::atomic_ops_u64,
    u64
);
check_int_atomics!(
    atomics_i64_every_op_ordering_and_scope,
    k::atomic_ops_i64,
    i64
);

macro_rules! check_float_atomics {
    ($name:ident, $kernel:path, $t:ty) => {
        #[vigil::test]
        fn $name(ctx: &Context) {
            let (stream, module) = setup(ctx);
            let kernel = module.kernel::<$kernel>().unwrap();
            for order in 0..4u32 {
                for scope in 0..3u32 {
                    let (cfg, threads) = atomic_launch(scope);
                    let mut slots = DeviceBuffer::<$t>::alloc_zeroed(&stream, 4).unwrap();
                    stream
                        .launch(&kernel, cfg, (&mut slots, order, scope))
                        .unwrap();
                    let got = slots.to_vec(&stream).unwrap();
                    let ctx = format!("{} order={order} scope={scope}", stringify!($t));
                    assert_eq!(got[0], 1.5 * threads as $t, "add {ctx}");
                    assert_eq!(got[1], -0.5 * threads as $t, "sub {ctx}");
                    assert_eq!(got[2], threads as $t, "compare-exchange {ctx}");
                    assert!(
                        got[3] >= 0.0 && got[3] < threads as $t && got[3].fract() == 0.0,
                        "exchange {ctx}: {}",
                        got[3]
                    );
                }
            }
        }
    };
}
check_float_atomics!(atomics_f32_every_ordering_and_scope, k::atomic_ops_f32, f32);
check_float_atomics!(atomics_f64_every_ordering_and_scope, k::atomic_ops_f64, f64);

/// Blocks and threads of the shared-memory atomics tests: three warps a
/// block (not a multiple of the bit width, so xor leaves some bits set).
const SHARED_ATOMICS: (u32, u32) = (4, 96);

/// Launches shared-atomics kernel `K` with `args` on [`SHARED_ATOMICS`]
/// and synchronises, which must report no race.
fn run_shared_atomics<K: vigil::Kernel, A: vigil::KernelArgs<K::Params>>(
    ctx: &Context,
    stream: &Stream,
    module: &Module,
    args: A,
) {
    let kernel = module.kernel::<K>().unwrap();
    let (blocks, threads) = SHARED_ATOMICS;
    stream
        .launch(&kernel, LaunchConfig::new(blocks, threads), args)
        .unwrap();
    ctx.synchronize()
        .expect("no race: the slots are only touched by atomics");
}

macro_rules! check_shared_int_atomics {
    ($name:ident, $kernel:path, $t:ty) => {
        #[vigil::test]
        fn $name(ctx: &Context) {
            let (stream, module) = setup(ctx);
            let (blocks, threads) = SHARED_ATOMICS;
            let slots = k::ATOMIC_SLOTS;
            let mut out =
                DeviceBuffer::<$t>::alloc_zeroed(&stream, blocks as usize * slots).unwrap();
            let mut seen =
                DeviceBuffer::<$t>::alloc_zeroed(&stream, (blocks * threads) as usize).unwrap();
            run_shared_atomics::<$kernel, _>(ctx, &stream, &module, (&mut out, &mut seen));
            let (out, seen) = (out.to_vec(&stream).unwrap(), seen.to_vec(&stream).unwrap());
            let bits = <$t>::BITS;
            let (mut or, mut xor) = (0 as $t, 0 as $t);
            for t in 0..threads {
                or |= (1 as $t) << (t % bits);
                xor ^= (1 as $t) << (t % bits);
            }
            let n = threads as $t;
            for (b, got) in out.chunks(slots).enumerate() {
                let what = format!("{} block {b}", stringify!($t));
                assert_eq!(got[..4], [n, 0, 0, n - 1], "add, sub, min, max: {what}");
                assert_eq!(got[5], n, "compare-exchange: {what}");
                assert_eq!(got[6..], [or, !or, xor], "or, and, xor: {what}");
                // The block's exchanges form one chain from 0.
                let t = threads as usize;
                let mut chain = seen[b * t..(b + 1) * t].to_vec();
                chain.push(got[4]);
                chain.sort();
                assert_eq!(chain, (0..=n).collect::<Vec<$t>>(), "exchange: {what}");
            }
        }
    };
}
check_shared_int_atomics!(shared_atomics_u32_every_op, k::shared_atomic_ops_u32, u32);
check_shared_int_atomics!(shared_atomics_i32_every_op, k::shared_atomic_ops_i32, i32);
check_shared_int_atomics!(shared_atomics_u64_every_op, k::shared_atomic_ops_u64, u64);
check_shared_int_atomics!(shared_atomics_i64_every_op, k::shared_atomic_ops_i64, i64);

macro_rules! check_shared_float_atomics {
    ($name:ident, $kernel:path, $t:ty) => {
        #[vigil::test]
        fn $name(ctx: &Context) {
            let (stream, module) = setup(ctx);
            let (blocks, threads) = SHARED_ATOMICS;
            let mut out = DeviceBuffer::<$t>::alloc_zeroed(&stream, 4 * blocks as usize).unwrap();
            run_shared_atomics::<$kernel, _>(ctx, &stream, &module, (&mut out,));
            let n = threads as $t;
            for (b, got) in out.to_vec(&stream).unwrap().chunks(4).enumerate() {
                let what = format!("{} block {b}", stringify!($t));
                assert_eq!(
                    got[..3],
                    [1.5 * n, -0.5 * n, n],
                    "add, sub, compare-exchange: {what}"
                );
                assert!(
                    got[3] >= 0.0 && got[3] < n && got[3].fract() == 0.0,
                    "exchange: {what}"
                );
            }
        }
    };
}
check_shared_float_atomics!(shared_atomics_f32, k::shared_atomic_ops_f32, f32);
check_shared_float_atomics!(shared_atomics_f64, k::shared_atomic_ops_f64, f64);

#[vigil::test]
fn static_and_dynamic_shared_memory_are_per_block(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::shared_reverse>().unwrap();
    let (blocks, threads) = (6usize, 256usize);
    let xs = Rng::new(7).u32s(blocks * threads, u32::MAX);
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, xs.len()).unwrap();
    let mut z = DeviceBuffer::<u32>::alloc_zeroed(&stream, xs.len()).unwrap();
    let cfg =
        LaunchConfig::new(blocks as u32, threads as u32).with_shared_mem((threads * 4) as u32);
    stream.launch(&kernel, cfg, (&x, &mut y, &mut z)).unwrap();
    let want: Vec<u32> = (0..blocks * threads)
        .map(|i| xs[(i / threads) * threads + threads - 1 - i % threads])
        .collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want, "static shared");
    assert_eq!(z.to_vec(&stream).unwrap(), want, "dynamic shared");
}

#[vigil::test]
fn warp_shuffles_and_votes_follow_cuda(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::warp_ops>().unwrap();
    let threads = 64usize;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, threads * 8).unwrap();
    stream
        .launch(&kernel, LaunchConfig::new(1, threads as u32), (&mut out,))
        .unwrap();
    let got = out.to_vec(&stream).unwrap();
    let odd_lanes: u32 = (0..32).filter(|l| l % 2 == 1).fold(0, |m, l| m | 1 << l);
    for t in 0..threads {
        let lane = (t % 32) as u32;
        let v = &got[t * 8..t * 8 + 8];
        assert_eq!(
            v[0],
            if lane == 31 { 31 } else { lane + 1 },
            "shfl_down lane {lane}"
        );
        assert_eq!(
            v[1],
            if lane == 0 { 0 } else { lane - 1 },
            "shfl_up lane {lane}"
        );
        assert_eq!(v[2], lane ^ 1, "shfl_xor lane {lane}");
        assert_eq!(v[3], 100, "shfl broadcast lane {lane}");
        assert_eq!(v[4], odd_lanes, "ballot lane {lane}");
        assert_eq!(v[5], 1, "any lane {lane}");
        assert_eq!(v[6], 1, "all lane {lane}");
        assert_eq!(v[7], 0, "64-bit shfl_xor lane {lane}");
    }
}

// Sanitized: the 65,539 words a memset and then one atomic each touch need
// more records than the CPU sanitizer's pool (65,536) holds; the words
// beyond stay compact with the memset's clock dropped (counted), no error.
#[vigil::test]
fn every_thread_of_edge_launch_shapes_runs_once(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::index_map>().unwrap();
    type Extent = (u32, u32, u32);
    let shapes: [(Extent, Extent); 6] = [
        ((1, 1, 1), (1, 1, 1)),
        ((3, 2, 2), (5, 3, 2)),
        ((7, 1, 1), (100, 1, 1)),
        ((2, 3, 4), (8, 8, 4)),
        ((1, 1, 1), (1024, 1, 1)),
        ((65_536 + 3, 1, 1), (33, 1, 1)),
    ];
    for (i, (grid, mut block)) in shapes.into_iter().enumerate() {
        if ctx.is_cpu() && i == 5 {
            // The same grid with one-thread blocks: millions of threads
            // only cost time on the CPU.
            block = (1, 1, 1);
        }
        let cfg = LaunchConfig::new(grid, block);
        let total = cfg.total_threads() as usize;
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, total).unwrap();
        stream.launch(&kernel, cfg, (&mut out,)).unwrap();
        let got = out.to_vec(&stream).unwrap();
        let bad = (0..total).filter(|&i| got[i] != i as u32 + 1).count();
        assert_eq!(
            bad, 0,
            "grid {grid:?} block {block:?}: {bad} of {total} threads missing or repeated"
        );
    }
}

#[vigil::test]
fn grids_wider_than_65535_blocks_reach_every_block(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::block_ids>().unwrap();
    let (blocks, threads) = (200_000usize, if ctx.is_cpu() { 1 } else { 32usize });
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, blocks * threads).unwrap();
    stream
        .launch(
            &kernel,
            LaunchConfig::new(blocks as u32, threads as u32),
            (&mut out,),
        )
        .unwrap();
    let got = out.to_vec(&stream).unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b as usize == i / threads));
}

vigil::test_main!();
