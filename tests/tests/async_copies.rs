//! Asynchronous copies (into shared arrays and a shared stack's tiles),
//! mbarriers, tensor copies and programmatic dependent launch through
//! real kernels, against host references: every
//! operation on each backend, sanitized (no report may come back: the
//! copies race with nothing) and plain. On the CPU backend, waits that
//! never complete end as livelocks naming the wait.

use vigil::unstable::cpu::CpuError;
use vigil::{
    Context, DeviceBuffer, DeviceTensorMap, DeviceTensorMapMut, Error, LaunchConfig, Module,
    Stream, Swizzle, TensorMapProblem, TiledLayout,
};
use vigil_kernels::async_copies as k;
use vigil_tests::{Rng, KERNELS_PTX};

fn setup(ctx: &Context) -> vigil::Result<(Stream, Module)> {
    Ok((Stream::new(ctx)?, Module::from_ptx(ctx, KERNELS_PTX)?))
}

/// Runs `check` as a sanitized test and as a plain one.
macro_rules! both {
    ($sanitized:ident, $plain:ident, $check:ident) => {
        #[vigil::test]
        fn $sanitized(ctx: &Context) -> vigil::Result<()> {
            $check(ctx)
        }
        #[vigil::test(plain)]
        fn $plain(ctx: &Context) -> vigil::Result<()> {
            $check(ctx)
        }
    };
}

both!(
    cp_async_of_each_size,
    cp_async_of_each_size_plain,
    check_cp_async_sizes
);
both!(
    cp_async_pipeline_with_zero_fill,
    cp_async_pipeline_with_zero_fill_plain,
    check_cp_async_pipeline
);
both!(
    bulk_copies_through_mbarriers_and_bulk_groups,
    bulk_copies_plain,
    check_bulk_pipeline
);
both!(
    mbarrier_phases_count_arrivals,
    mbarrier_phases_plain,
    check_mbarrier_rounds
);
both!(
    tensor_tiles_round_trip,
    tensor_tiles_round_trip_plain,
    check_tma_roundtrip
);
both!(
    tensor_boxes_of_rank_three,
    tensor_boxes_of_rank_three_plain,
    check_tma_3d
);
both!(
    copies_into_and_out_of_shared_stack_tiles,
    shared_stack_tile_copies_plain,
    check_stack_tile_copies
);
both!(
    dependent_launch_sees_its_primary,
    dependent_launch_plain,
    check_pdl
);

fn check_cp_async_sizes(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::cp_async_sizes>()?;
    let xs: Vec<u32> = (0..448).map(|i| 7 * i + 3).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, 448)?;
    stream.launch(&kernel, LaunchConfig::new(1, 64), (&x, &mut y))?;
    let got = y.to_vec(&stream)?;
    for (base, len) in [(0, 64), (64, 128), (192, 256)] {
        for j in 0..len {
            assert_eq!(
                got[base + j],
                xs[base + len - 1 - j],
                "element {}",
                base + j
            );
        }
    }
    Ok(())
}

fn check_cp_async_pipeline(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::cp_async_pipeline>()?;
    let tile = k::PIPE_TILE;
    // Whole tiles, a ragged tail, one partial tile; grids of fewer
    // blocks than tiles (each block streams several through its stages).
    for (n, blocks) in [(11 * tile, 3u32), (7 * tile + 37, 2), (45, 4)] {
        let xs = Rng::new(n as u64).f32s(n);
        let tiles = n.div_ceil(tile);
        let x = DeviceBuffer::from_slice(&stream, &xs)?;
        let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, tiles * tile)?;
        out.copy_from_host(&stream, &vec![f32::NAN; tiles * tile])?;
        stream.launch(
            &kernel,
            LaunchConfig::new(blocks, k::PIPE_THREADS),
            (&x, &mut out),
        )?;
        let got = out.to_vec(&stream)?;
        for (i, &g) in got.iter().enumerate() {
            let src = i / tile * tile + tile - 1 - i % tile;
            let want = if src < n { 3.0 * xs[src] } else { 0.0 };
            assert_eq!(g, want, "n={n} element {i}");
        }
    }
    Ok(())
}

fn check_stack_tile_copies(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::stack_tile_copies>()?;
    let (tile, blocks) = (k::STACK_COPY_TILE, 3);
    let n = blocks * tile;
    let xs = Rng::new(5).f32s(n);
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    let mut z = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    stream.launch(
        &kernel,
        LaunchConfig::new(blocks as u32, k::STACK_COPY_THREADS),
        (&x, &mut y, &mut z),
    )?;
    let (ys, zs) = (y.to_vec(&stream)?, z.to_vec(&stream)?);
    for i in 0..n {
        let reversed = i / tile * tile + tile - 1 - i % tile;
        assert_eq!(ys[i], 2.0 * xs[reversed], "y[{i}]");
        assert_eq!(zs[i], xs[i] + 1.0, "z[{i}]");
    }
    Ok(())
}

fn check_bulk_pipeline(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::bulk_pipeline>()?;
    let tile = k::BULK_TILE;
    // Enough tiles per block to wrap each stage's phase parity twice.
    for (n, blocks) in [(9 * tile, 2u32), (5 * tile + 12, 1), (8, 3)] {
        let xs = Rng::new(n as u64 + 1).f32s(n);
        let x = DeviceBuffer::from_slice(&stream, &xs)?;
        let mut y = DeviceBuffer::from_slice(&stream, &vec![f32::NAN; n])?;
        stream.launch(
            &kernel,
            LaunchConfig::new(blocks, k::BULK_THREADS),
            (&x, &mut y),
        )?;
        let got = y.to_vec(&stream)?;
        for i in 0..n {
            assert_eq!(got[i], 2.0 * xs[i] + 1.0, "n={n} element {i}");
        }
    }
    Ok(())
}

fn check_mbarrier_rounds(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::mbarrier_rounds>()?;
    let (blocks, threads) = (3usize, 96usize);
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 2 * blocks * threads)?;
    stream.launch(
        &kernel,
        LaunchConfig::new(blocks as u32, threads as u32),
        (&mut out,),
    )?;
    let got = out.to_vec(&stream)?;
    for b in 0..blocks {
        for t in 0..threads {
            let want: u32 = (0..k::MB_ROUNDS)
                .map(|r| (1000 * r + (t + 1) % threads) as u32)
                .sum();
            let at = 2 * (b * threads + t);
            assert_eq!(got[at], want, "block {b} thread {t}");
            assert_eq!(got[at + 1], 1, "block {b} thread {t}: completed parity");
        }
    }
    Ok(())
}

fn check_tma_roundtrip(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::tma_tile_roundtrip>()?;
    let side = k::TMA_BOX;
    // `src` is 68 x 45 (ragged boxes at its right and bottom edges); `dst`
    // is 80 x 50 inside a 96 x 64 buffer (rows 96 apart): its boxes are
    // clipped at 80 x 50 and the rest of the buffer keeps its sentinel.
    let (sw, sh) = (68usize, 45usize);
    let (dw, dh, pitch, rows) = (80usize, 50usize, 96usize, 64usize);
    let xs = Rng::new(3).f32s(sw * sh);
    let src = DeviceBuffer::from_slice(&stream, &xs)?;
    for swizzle in [Swizzle::None, Swizzle::B128] {
        let mut dst = DeviceBuffer::from_slice(&stream, &vec![-1.0f32; pitch * rows])?;
        let src_map = DeviceTensorMap::tiled(
            &stream,
            &src,
            TiledLayout::new([sw as u64, sh as u64], [side as u32; 2]).swizzle(swizzle),
        )?;
        let mut dst_map = DeviceTensorMapMut::tiled(
            &stream,
            &mut dst,
            TiledLayout::new([dw as u64, dh as u64], [side as u32; 2])
                .strides([4, 4 * pitch as u64])
                .swizzle(swizzle),
        )?;
        assert_eq!(src_map.box_bytes(), 4 * side * side);
        let grid = (dw.div_ceil(side) as u32, dh.div_ceil(side) as u32);
        stream.launch(
            &kernel,
            LaunchConfig::new(grid, (32, 8)),
            (&src_map, &mut dst_map, swizzle as u32),
        )?;
        drop(dst_map);
        let got = dst.to_vec(&stream)?;
        for r in 0..rows {
            for c in 0..pitch {
                let g = got[r * pitch + c];
                let want = if r < dh && c < dw {
                    let v = if r < sh && c < sw {
                        xs[r * sw + c]
                    } else {
                        0.0
                    };
                    2.0 * v + (1000 * (r % side) + c % side) as f32
                } else {
                    -1.0
                };
                assert_eq!(g, want, "{swizzle:?}: row {r} column {c}");
            }
        }
    }
    Ok(())
}

/// The dimensions of the rank-3 tensor the `tma_box_3d` tests load from.
const DIMS_3D: [usize; 3] = [8, 5, 3];

/// That tensor's values (`1, 2, ...`), on the device and on the host.
fn tma_3d_source(stream: &Stream) -> vigil::Result<(DeviceBuffer<u32>, Vec<u32>)> {
    let xs: Vec<u32> = (1..=DIMS_3D.iter().product::<usize>() as u32).collect();
    Ok((DeviceBuffer::from_slice(stream, &xs)?, xs))
}

/// The map of `k::BOX_3D` boxes over that tensor.
fn tma_3d_map<'a>(
    stream: &Stream,
    src: &'a DeviceBuffer<u32>,
) -> vigil::Result<DeviceTensorMap<'a, u32, 3>> {
    DeviceTensorMap::tiled(
        stream,
        src,
        TiledLayout::new(DIMS_3D.map(|d| d as u64), k::BOX_3D),
    )
}

fn check_tma_3d(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::tma_box_3d>()?;
    let (src, xs) = tma_3d_source(&stream)?;
    let dims = DIMS_3D;
    let [bx, by, bz] = k::BOX_3D.map(|b| b as usize);
    let map = tma_3d_map(&stream, &src)?;
    let grid = (3u32, 2u32, 3u32);
    let blocks = (grid.0 * grid.1 * grid.2) as usize;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 24 * blocks)?;
    // The first boxes start 16 bytes before the tensor (a negative
    // innermost coordinate, aligned as the hardware requires).
    stream.launch(&kernel, LaunchConfig::new(grid, 32), (&map, &mut out, -4))?;
    let got = out.to_vec(&stream)?;
    for z in 0..grid.2 as i64 {
        for y in 0..grid.1 as i64 {
            for x in 0..grid.0 as i64 {
                let linear = ((z * grid.1 as i64 + y) * grid.0 as i64 + x) as usize;
                let at = [4 * x - 4, 3 * y, 2 * z - 1];
                for e in 0..24 {
                    let (i, j, l) = (
                        at[0] + (e % bx) as i64,
                        at[1] + (e / bx % by) as i64,
                        at[2] + (e / (bx * by) % bz) as i64,
                    );
                    let inside = [i, j, l]
                        .iter()
                        .zip(dims)
                        .all(|(&c, d)| c >= 0 && c < d as i64);
                    let want = if inside {
                        xs[((l * dims[1] as i64 + j) * dims[0] as i64 + i) as usize]
                    } else {
                        0
                    };
                    assert_eq!(
                        got[24 * linear + e],
                        want,
                        "block ({x}, {y}, {z}) element {e}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// A box whose innermost coordinate starts 8 bytes into a 16-byte unit
/// (which faults on the GPU) is refused, naming the rule and the call.
#[vigil::test(cpu)]
fn a_misaligned_innermost_coordinate_is_refused(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::tma_box_3d>()?;
    let (src, _) = tma_3d_source(&stream)?;
    let map = tma_3d_map(&stream, &src)?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 24)?;
    let err = stream
        .launch(&kernel, LaunchConfig::new(1, 32), (&map, &mut out, 2))
        .unwrap_err();
    match &err {
        Error::Cpu(CpuError::KernelPanic {
            message, location, ..
        }) => {
            assert!(message.contains("multiple of 16 bytes"), "{err}");
            assert!(message.contains("coordinate 2 starts 8 bytes"), "{err}");
            let at = location.as_deref().unwrap_or_default();
            assert!(at.contains("async_copies.rs"), "{err}");
        }
        other => panic!("expected a kernel panic, got: {other}"),
    }
    Ok(())
}

fn check_pdl(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let primary = module.kernel::<k::pdl_primary>()?;
    let dependent = module.kernel::<k::pdl_dependent>()?;
    let n = 1 << 16;
    let xs = Rng::new(9).f32s(n);
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    let mut z = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    let cfg = LaunchConfig::for_num_elems(n, 256).with_programmatic_stream_serialization();
    for round in 0..3 {
        stream.launch(&primary, cfg, (&x, &mut y))?;
        stream.launch(&dependent, cfg, (&y, &mut z))?;
        let got = z.to_vec(&stream)?;
        for i in 0..n {
            assert_eq!(got[i], 2.0 * (xs[i] + 1.0), "round {round} element {i}");
        }
    }
    Ok(())
}

/// The livelock a CPU launch of `kernel` ends with, which must name a
/// wait of `async_copies.rs`.
fn assert_livelock(err: Error) {
    let msg = err.to_string();
    match &err {
        Error::Cpu(CpuError::Livelock { blocks, .. }) => {
            let t = &blocks[0].spinning[0];
            assert_eq!(t.bytes, 8, "{msg}");
            assert!(t.location.contains("async_copies.rs:"), "{msg}");
        }
        other => panic!("expected a livelock, got: {other}"),
    }
}

#[vigil::test(cpu)]
fn a_wait_for_an_arrival_that_never_comes_is_a_livelock(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::mbarrier_missing_arrival>()?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64)?;
    let err = stream
        .launch(&kernel, LaunchConfig::new(1, 64), (&mut out,))
        .unwrap_err();
    assert_livelock(err);
    Ok(())
}

#[vigil::test(cpu)]
fn a_wait_for_bytes_no_copy_delivers_is_a_livelock(ctx: &Context) -> vigil::Result<()> {
    let (stream, module) = setup(ctx)?;
    let kernel = module.kernel::<k::mbarrier_missing_bytes>()?;
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 16])?;
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, 32)?;
    let err = stream
        .launch(&kernel, LaunchConfig::new(1, 32), (&x, &mut out))
        .unwrap_err();
    assert_livelock(err);
    Ok(())
}

#[vigil::test]
fn a_tensor_map_that_cannot_fit_its_buffer_is_refused(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, 64 * 64)?;
    let refused = |layout: TiledLayout<2>| match DeviceTensorMap::tiled(&stream, &x, layout) {
        Err(Error::TensorMap(p)) => p,
        Err(e) => panic!("expected a tensor map problem, got: {e}"),
        Ok(_) => panic!("{layout:?} accepted"),
    };
    assert_eq!(
        refused(TiledLayout::new([64, 65], [32, 32])),
        TensorMapProblem::TooLarge {
            needed: 4 * 64 * 65,
            len: 4 * 64 * 64
        }
    );
    assert_eq!(
        refused(TiledLayout::new([64, 64], [3, 32])),
        TensorMapProblem::BoxRow { bytes: 12 }
    );
    assert!(matches!(
        refused(TiledLayout::new([64, 64], [64, 8]).swizzle(Swizzle::B64)),
        TensorMapProblem::SwizzleSpan { .. }
    ));
    let ok = DeviceTensorMap::tiled(&stream, &x, TiledLayout::new([64, 64], [32, 8]))?;
    assert_eq!((ok.box_len(), ok.box_bytes()), (256, 1024));
    Ok(())
}

vigil::test_main!();
