//! The user guide's samples, run on every backend by Vigil's harness: on
//! the CPU backend always, on each GPU when the machine has one, with the
//! race sanitizer on. The guide includes parts of this file between its
//! `ANCHOR` comments.

use vigil::{
    Context, DeviceBuffer, DeviceTensorMap, Error, LaunchConfig, MemorySpace, Module, RaceReports,
    ReportKind, Stream, SymmetricGroup, TiledLayout,
};
use vigil_guide::PTX;
use vigil_guide_kernels::{atomics, fast_safe, memory, races, shared, warp};

// ANCHOR: axpy_test
use vigil_guide_kernels::first::axpy;

#[vigil::test]
fn axpy_matches_the_host(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<axpy>()?;
    let n = 10_000;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys = vec![1.0f32; n];
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::from_slice(&stream, &ys)?;
    let config = LaunchConfig::for_num_elems(n, 256);
    stream.launch(&kernel, config, (2.0f32, &x, &mut y))?;
    let got = y.to_vec(&stream)?;
    for ((got, x), y) in got.iter().zip(&xs).zip(&ys) {
        assert_eq!(*got, 2.0 * x + y);
    }
    Ok(())
}
// ANCHOR_END: axpy_test

/// The sanitizer's reports from a synchronisation of `ctx`: the races, or
/// none.
fn reports_of(ctx: &Context) -> vigil::Result<RaceReports> {
    match ctx.synchronize() {
        Ok(()) => Ok(RaceReports::new()),
        Err(Error::Races(reports)) => Ok(reports),
        Err(e) => Err(e),
    }
}

/// Skips a test that needs the sanitizer when `VIGIL_SANITIZE=0` turned it off.
fn needs_the_sanitizer(ctx: &Context) {
    if !ctx.is_sanitized() {
        vigil::testing::skip("needs the race sanitizer (VIGIL_SANITIZE is off)");
    }
}

// ANCHOR: race_test
#[vigil::test]
fn the_racy_count_is_reported(ctx: &Context) -> vigil::Result<()> {
    needs_the_sanitizer(ctx);
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let values: Vec<i32> = (0..4096).map(|i| i % 7 - 3).collect();
    let x = DeviceBuffer::from_slice(&stream, &values)?;
    let config = LaunchConfig::for_num_elems(values.len(), 256);

    let mut count = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let racy = module.kernel::<races::count_positive_racy>()?;
    stream.launch(&racy, config, (&x, &mut count))?;
    match ctx.synchronize() {
        Err(Error::Races(reports)) => {
            println!("{reports}");
            let first = &reports.reports()[0];
            assert_eq!(first.kernel, "count_positive_racy");
            let at = first.current.location.as_ref().expect("a source line");
            assert!(at.file.ends_with("races.rs"), "{at}");
        }
        other => panic!("expected the race to be reported, got {other:?}"),
    }

    let mut count = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let fixed = module.kernel::<races::count_positive>()?;
    stream.launch(&fixed, config, (&x, &mut count))?;
    ctx.synchronize()?; // no race: Ok
    let positive = values.iter().filter(|&&v| v > 0).count() as u32;
    assert_eq!(count.to_vec(&stream)?, [positive]);
    Ok(())
}
// ANCHOR_END: race_test

#[vigil::test]
fn a_missing_barrier_is_a_shared_memory_race(ctx: &Context) -> vigil::Result<()> {
    needs_the_sanitizer(ctx);
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<races::rotate_racy>()?;
    let x = DeviceBuffer::from_slice(&stream, &(0..64).collect::<Vec<u32>>())?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64)?;
    stream.launch(&kernel, LaunchConfig::new(1, 64), (&x, &mut out))?;
    let reports = reports_of(ctx)?;
    let report = reports
        .iter()
        .next()
        .expect("a report of the missing barrier");
    assert_eq!(report.space, MemorySpace::Shared);
    assert!(report.prior.same_block);
    assert!(matches!(
        report.kind,
        ReportKind::ReadAfterWrite | ReportKind::WriteAfterRead
    ));
    Ok(())
}

#[vigil::test]
fn scale_and_add_vec4(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let n = 4096;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut data = DeviceBuffer::from_slice(&stream, &xs)?;
    // ANCHOR: scale_launch
    // 8 blocks of 128 threads cover all 4096 elements: the loop strides.
    let scale = module.kernel::<memory::scale>()?;
    stream.launch(&scale, LaunchConfig::new(8, 128), (3.0f32, &mut data))?;
    // ANCHOR_END: scale_launch
    let scaled = data.to_vec(&stream)?;
    assert!(scaled.iter().zip(&xs).all(|(s, x)| *s == 3.0 * x));

    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    let add = module.kernel::<memory::add_vec4>()?;
    let config = LaunchConfig::for_num_elems(n / 4, 128);
    stream.launch(&add, config, (&x, &data, &mut out))?;
    let sums = out.to_vec(&stream)?;
    assert!(sums.iter().zip(&xs).all(|(s, x)| *s == 4.0 * x));
    Ok(())
}

#[vigil::test]
fn first_index_finds_the_smallest(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<memory::first_index>()?;
    let xs: Vec<u32> = (0..3000).map(|i| i % 1000).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut found = DeviceBuffer::from_slice(&stream, &[u32::MAX])?;
    let config = LaunchConfig::for_num_elems(xs.len(), 256);
    stream.launch(&kernel, config, (&x, 777u32, &mut found))?;
    assert_eq!(found.to_vec(&stream)?, [777]);
    Ok(())
}

#[vigil::test]
fn block_sums_and_reversed_blocks(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let n = 1000;
    let xs: Vec<f32> = (0..n).map(|i| (i % 10) as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let config = LaunchConfig::for_num_elems(n, shared::BLOCK as u32);
    let mut sums = DeviceBuffer::<f32>::alloc_zeroed(&stream, config.grid.x as usize)?;
    let block_sum = module.kernel::<shared::block_sum>()?;
    stream.launch(&block_sum, config, (&x, &mut sums))?;
    let want: Vec<f32> = xs.chunks(shared::BLOCK).map(|c| c.iter().sum()).collect();
    assert_eq!(sums.to_vec(&stream)?, want);

    // ANCHOR: reverse_launch
    let threads = 128u32;
    let values: Vec<u32> = (0..4 * threads).collect();
    let mut data = DeviceBuffer::from_slice(&stream, &values)?;
    let reverse = module.kernel::<shared::reverse_blocks>()?;
    let bytes = threads * std::mem::size_of::<u32>() as u32;
    let config = LaunchConfig::new(4, threads).with_shared_mem(bytes);
    stream.launch(&reverse, config, (&mut data,))?;
    // ANCHOR_END: reverse_launch
    let want: Vec<u32> = values
        .chunks(threads as usize)
        .flat_map(|c| c.iter().rev().copied())
        .collect();
    assert_eq!(data.to_vec(&stream)?, want);
    Ok(())
}

#[vigil::test]
fn histogram_counts_every_value(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<atomics::histogram>()?;
    let xs: Vec<u32> = (0..5000u32).map(|i| (i * 7) % 16).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut bins = DeviceBuffer::<u32>::alloc_zeroed(&stream, 16)?;
    let config = LaunchConfig::for_num_elems(xs.len(), 256);
    stream.launch(&kernel, config, (&x, &mut bins))?;
    let mut want = [0u32; 16];
    xs.iter().for_each(|&v| want[v as usize] += 1);
    assert_eq!(bins.to_vec(&stream)?, want);
    Ok(())
}

/// Runs `handoff` with flag orderings `set` and `wait` at `scope` (codes
/// of `atomics::ordering_of`, `atomics::scope_of`) and returns the
/// reports and what block 1 read.
fn handoff(ctx: &Context, set: u32, wait: u32, scope: u32) -> vigil::Result<(RaceReports, u32)> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<atomics::handoff>()?;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let args = (&mut data, &mut flag, &mut out, set, wait, scope);
    stream.launch(&kernel, LaunchConfig::new(2, 1), args)?;
    let reports = reports_of(ctx)?;
    Ok((reports, out.to_vec(&stream)?[0]))
}

#[vigil::test]
fn release_and_acquire_order_the_handoff(ctx: &Context) -> vigil::Result<()> {
    needs_the_sanitizer(ctx);
    let (reports, read) = handoff(ctx, 2, 1, 1)?;
    assert!(reports.is_empty(), "{reports}");
    assert_eq!(read, 42);
    // A relaxed flag orders nothing: the data is a race.
    let (reports, _) = handoff(ctx, 0, 0, 1)?;
    println!("{reports}");
    assert!(reports.iter().any(|r| r.kind == ReportKind::ReadAfterWrite));
    // Block scope does not cover two blocks.
    let (reports, _) = handoff(ctx, 2, 1, 0)?;
    assert!(!reports.is_empty());
    Ok(())
}

#[vigil::test]
fn fences_order_relaxed_flags(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<atomics::fenced_handoff>()?;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let args = (&mut data, &mut flag, &mut out);
    stream.launch(&kernel, LaunchConfig::new(2, 1), args)?;
    ctx.synchronize()?;
    assert_eq!(out.to_vec(&stream)?, [42]);
    Ok(())
}

#[vigil::test]
fn warp_sum_and_votes(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let xs: Vec<u32> = (0..1000).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let config = LaunchConfig::for_num_elems(xs.len(), 128);
    let mut total = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    stream.launch(
        &module.kernel::<warp::warp_sum>()?,
        config,
        (&x, &mut total),
    )?;
    assert_eq!(total.to_vec(&stream)?, [xs.iter().sum::<u32>()]);
    let mut even = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    stream.launch(
        &module.kernel::<warp::count_even>()?,
        config,
        (&x, &mut even),
    )?;
    assert_eq!(even.to_vec(&stream)?, [500]);
    Ok(())
}

#[vigil::test]
fn gelu_is_within_its_bound(ctx: &Context) -> vigil::Result<()> {
    use vigil_guide_kernels::math::gelu;
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<gelu>()?;
    let xs: Vec<f32> = (-400..400).map(|i| i as f32 / 50.0).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, xs.len())?;
    let config = LaunchConfig::for_num_elems(xs.len(), 256);
    stream.launch(&kernel, config, (&x, &mut y))?;
    for (x, y) in xs.iter().zip(y.to_vec(&stream)?) {
        let x = *x as f64;
        let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        let want = 0.5 * x * (1.0 + inner.tanh());
        assert!(
            (y as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
            "gelu({x}) = {y}, want {want}"
        );
    }
    Ok(())
}

// ANCHOR: group_test
use vigil::Symmetric;
use vigil_guide_kernels::groups::pass_right;

#[vigil::test(cpu)]
fn every_rank_receives_from_its_left(_ctx: &Context) -> vigil::Result<()> {
    let world = 3;
    let group = SymmetricGroup::cpu(world, Context::builder().sanitize(true))?;
    let data: Symmetric<u32> = group.alloc(world)?;
    let flags: Symmetric<u32> = group.alloc(world)?;
    let out: Symmetric<u32> = group.alloc(world)?;
    group.run(|rank, ctx| {
        let kernel = Module::from_ptx(ctx, PTX)?.kernel::<pass_right>()?;
        let stream = Stream::new(ctx)?;
        let args = (
            data.peers(rank)?,
            flags.peers(rank)?,
            out.peer(rank, rank)?,
            1u32,
        );
        stream.launch(&kernel, LaunchConfig::new(1, 32), args)?;
        stream.synchronize()
    })?;
    group.synchronize()?; // every rank's races, or Ok
    for rank in 0..world as u32 {
        let left = (rank + world as u32 - 1) % world as u32;
        let got = out.buffer(rank)?.to_vec(group.stream(rank)?)?;
        assert_eq!(got[left as usize], left + 1, "rank {rank}: {got:?}");
    }
    Ok(())
}
// ANCHOR_END: group_test

#[vigil::test]
fn proven_views_compute_what_checked_ones_do(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let n = 1000;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n])?;
    let mut z = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n])?;
    let config = LaunchConfig::for_num_elems(n, 256);
    let checked = module.kernel::<fast_safe::axpy_checked>()?;
    stream.launch(&checked, config, (2.0f32, &x, &mut y))?;
    let axpy = module.kernel::<fast_safe::axpy_proven>()?;
    stream.launch(&axpy, config, (2.0f32, &x, &mut z))?;
    assert_eq!(y.to_vec(&stream)?, z.to_vec(&stream)?);

    let (rows, cols) = (20, 50);
    let xs: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 + 1.0).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, rows * cols)?;
    let blur = module.kernel::<fast_safe::blur_rows>()?;
    let grid = ((cols as u32).div_ceil(16), (rows as u32).div_ceil(16));
    stream.launch(
        &blur,
        LaunchConfig::new(grid, (16, 16)),
        (rows, cols, &x, &mut out),
    )?;
    let blurred = out.to_vec(&stream)?;
    for (i, v) in blurred.iter().enumerate() {
        let c = i % cols;
        let want = if c == 0 || c + 1 == cols {
            xs[i]
        } else {
            (xs[i - 1] + xs[i] + xs[i + 1]) / 3.0
        };
        assert_eq!(*v, want, "cell {i}");
    }

    let normalize = module.kernel::<fast_safe::normalize_rows>()?;
    stream.launch(
        &normalize,
        LaunchConfig::new(rows as u32, 64),
        (cols, &x, &mut out),
    )?;
    let normalized = out.to_vec(&stream)?;
    for (row, got) in xs.chunks(cols).zip(normalized.chunks(cols)) {
        let top = row.iter().cloned().fold(f32::MIN, f32::max);
        assert!(row.iter().zip(got).all(|(x, g)| *g == x / top));
    }

    let transpose = module.kernel::<fast_safe::transpose>()?;
    let tile = fast_safe::TILE as u32;
    let grid = ((cols as u32).div_ceil(tile), (rows as u32).div_ceil(tile));
    let block = (tile, fast_safe::ROWS as u32);
    stream.launch(
        &transpose,
        LaunchConfig::new(grid, block),
        (rows, cols, &x, &mut out),
    )?;
    let t = out.to_vec(&stream)?;
    assert!((0..rows * cols).all(|i| t[i] == xs[(i % rows) * cols + i / rows]));
    Ok(())
}

#[vigil::test(cpu, plain)]
fn a_launch_that_cannot_prove_a_layout_is_refused(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let axpy = module.kernel::<fast_safe::axpy_proven>()?;
    let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1000)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1000)?;
    // ANCHOR: refused
    // Three blocks of 256 threads leave 232 elements of `y` to no one.
    let e = stream
        .launch(&axpy, LaunchConfig::new(3, 256), (2.0f32, &x, &mut y))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel `axpy_proven`: argument 2 `y: ThreadElemsMut<f32>`: its parts do not cover it: the \
         launch reaches 768 of its 1000 elements (launch: grid 3 x 1 x 1, block 256 x 1 x 1)"
    );
    // ANCHOR_END: refused
    Ok(())
}

// ANCHOR: test_main
use vigil_guide_kernels::async_copies;

#[vigil::test]
fn staged_scale_matches_the_host(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<async_copies::staged_scale>()?;
    let xs: Vec<f32> = (0..7 * async_copies::TILE).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, xs.len())?;
    stream.launch(&kernel, LaunchConfig::new(3, 256), (0.5f32, &x, &mut y))?;
    for (got, x) in y.to_vec(&stream)?.iter().zip(&xs) {
        assert_eq!(*got, 0.5 * x);
    }
    Ok(())
}

#[vigil::test]
fn tile_sums_match_the_host(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let kernel = module.kernel::<async_copies::tile_sums>()?;
    // ANCHOR: tensor_map
    let (width, height) = (96, 64);
    let xs: Vec<f32> = (0..width * height).map(|i| (i % 7) as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    // Dimensions and box innermost first: rows of `width` elements.
    let layout = TiledLayout::new([width as u64, height as u64], [32, 32]);
    let map = DeviceTensorMap::tiled(&stream, &x, layout)?;
    let mut sums = DeviceBuffer::<f32>::alloc_zeroed(&stream, 6)?;
    stream.launch(&kernel, LaunchConfig::new((3, 2), 64), (&map, &mut sums))?;
    // ANCHOR_END: tensor_map
    let got = sums.to_vec(&stream)?;
    for (b, got) in got.iter().enumerate() {
        let (bx, by) = (b % 3, b / 3);
        let want: f32 = (0..32)
            .flat_map(|r| (0..32).map(move |c| (r, c)))
            .map(|(r, c)| xs[(32 * by + r) * width + 32 * bx + c])
            .sum();
        assert_eq!(*got, want, "tile {b}");
    }
    Ok(())
}

#[vigil::test]
fn a_dependent_launch_sees_its_primary(ctx: &Context) -> vigil::Result<()> {
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, PTX)?;
    let (plus_one, twice) = (
        module.kernel::<async_copies::plus_one>()?,
        module.kernel::<async_copies::twice>()?,
    );
    let n = 4096;
    let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n])?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    let mut z = DeviceBuffer::<f32>::alloc_zeroed(&stream, n)?;
    // ANCHOR: dependent_launch
    let config = LaunchConfig::for_num_elems(n, 256).with_programmatic_stream_serialization();
    stream.launch(&plus_one, config, (&x, &mut y))?;
    stream.launch(&twice, config, (&y, &mut z))?;
    // ANCHOR_END: dependent_launch
    assert!(z.to_vec(&stream)?.iter().all(|&v| v == 4.0));
    Ok(())
}

vigil::test_main!();
// ANCHOR_END: test_main
