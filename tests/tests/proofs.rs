//! Layouts a launch proves (`vigil_kernels::proofs`), on every backend
//! under Vigil's harness: each partition gives every thread or block the
//! part the host's model says (and, sanitized, no race is reported);
//! kernels indexing matrices, chunks, tiles and shared lengths without
//! checks compute what the host computes; a launch that cannot prove a
//! layout (parts that overlap, leave elements out or reach past the
//! buffer, a length or block shape other than declared) is refused before
//! it runs, naming the argument and the geometry; a partition another
//! argument aliases is proven in bounds but not exclusive; a per-thread
//! partition proven exclusive is what the sanitizer skips once it trusts
//! the types.

use vigil::{
    pack_proven_args, ArgProblem, Context, DeviceBuffer, Error, Kernel, LaunchConfig,
    LaunchConfigError, Module, Stream, SymmetricGroup,
};
use vigil_kernels::examples;
use vigil_kernels::proofs::{self as k, cell_mark, TILE_COLS, TILE_ROWS};
use vigil_shared::proofs::{ProofProblem, Unit};
use vigil_tests::{Rng, KERNELS_PTX};

fn setup(ctx: &Context) -> (Stream, Module) {
    let stream = Stream::new(ctx).expect("stream");
    let module = Module::from_ptx(ctx, KERNELS_PTX).expect("load vigil-kernels PTX");
    (stream, module)
}

/// A buffer of `n` words no kernel wrote (`u32::MAX` each).
fn poisoned(stream: &Stream, n: usize) -> DeviceBuffer<u32> {
    DeviceBuffer::from_slice(stream, &vec![u32::MAX; n]).unwrap()
}

#[vigil::test]
fn each_thread_owns_the_element_the_model_gives_it(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let elems = module.kernel::<k::thread_elems_owner>().unwrap();
    for n in [1usize, 255, 256, 1000] {
        let mut y = poisoned(&stream, n);
        stream
            .launch(&elems, LaunchConfig::for_num_elems(n, 128), (&mut y,))
            .unwrap();
        let want: Vec<u32> = (1..=n as u32).collect();
        assert_eq!(y.to_vec(&stream).unwrap(), want, "n={n}");
    }

    let stride = module.kernel::<k::grid_stride_owner>().unwrap();
    let (n, config) = (1000usize, LaunchConfig::new(3, 64));
    let mut y = poisoned(&stream, n);
    stream.launch(&stride, config, (&mut y,)).unwrap();
    let want: Vec<u32> = (0..n).map(|e| (e % 192) as u32 + 1).collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want);

    let cells = module.kernel::<k::thread_cells_owner>().unwrap();
    for (rows, cols) in [(1usize, 1usize), (7, 45), (33, 17)] {
        let mut y = poisoned(&stream, rows * cols);
        let grid = ((cols as u32).div_ceil(8), (rows as u32).div_ceil(4));
        stream
            .launch(
                &cells,
                LaunchConfig::new(grid, (8, 4)),
                (rows, cols, &mut y),
            )
            .unwrap();
        let want: Vec<u32> = (0..rows * cols)
            .map(|e| cell_mark(e % cols, e / cols))
            .collect();
        assert_eq!(y.to_vec(&stream).unwrap(), want, "{rows} x {cols}");
    }
}

#[vigil::test]
fn each_block_owns_the_chunk_or_tile_the_model_gives_it(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let chunks = module.kernel::<k::block_chunks_owner>().unwrap();
    let (chunk, blocks) = (37usize, 5u32);
    let mut y = poisoned(&stream, chunk * blocks as usize);
    stream
        .launch(&chunks, LaunchConfig::new(blocks, 32), (chunk, &mut y))
        .unwrap();
    let want: Vec<u32> = (0..chunk * blocks as usize)
        .map(|e| (e / chunk) as u32 + 1)
        .collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want);

    let (rows, cols) = (9usize, 29usize);
    let (tile_rows, tile_cols) = (
        rows.div_ceil(TILE_ROWS) as u32,
        cols.div_ceil(TILE_COLS) as u32,
    );
    let natural = module.kernel::<k::block_tiles_owner>().unwrap();
    let mut y = poisoned(&stream, rows * cols);
    let config = LaunchConfig::new((tile_cols, tile_rows), (8, 2));
    stream
        .launch(&natural, config, (rows, cols, &mut y))
        .unwrap();
    let want: Vec<u32> = (0..rows * cols)
        .map(|e| cell_mark(e % cols / TILE_COLS, e / cols / TILE_ROWS))
        .collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want, "natural tiles");

    let transposed = module.kernel::<k::block_tiles_transposed_owner>().unwrap();
    let mut y = poisoned(&stream, rows * cols);
    let config = LaunchConfig::new((tile_rows, tile_cols), (8, 2));
    stream
        .launch(&transposed, config, (rows, cols, &mut y))
        .unwrap();
    let want: Vec<u32> = (0..rows * cols)
        .map(|e| cell_mark(e / cols / TILE_ROWS, e % cols / TILE_COLS))
        .collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want, "transposed tiles");
}

#[vigil::test]
fn views_indexed_without_checks_compute_what_the_host_computes(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let mut rng = Rng::new(34);

    let (rows, cols) = (6usize, 300usize);
    let xs = rng.u32s(rows * cols, 1 << 20);
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut sums = poisoned(&stream, rows);
    let row_sums = module.kernel::<k::row_sums>().unwrap();
    stream
        .launch(
            &row_sums,
            LaunchConfig::new(rows as u32, 32),
            (cols, &x, &mut sums),
        )
        .unwrap();
    let want: Vec<u32> = xs
        .chunks(cols)
        .map(|r| r.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
        .collect();
    assert_eq!(sums.to_vec(&stream).unwrap(), want);

    let fs = rng.f32s(rows * cols);
    let x = DeviceBuffer::from_slice(&stream, &fs).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, rows * cols).unwrap();
    let scale = module.kernel::<k::scale_rows>().unwrap();
    stream
        .launch(
            &scale,
            LaunchConfig::new(rows as u32, 64),
            (cols, -2.5f32, &x, &mut y),
        )
        .unwrap();
    let want: Vec<f32> = fs.iter().map(|v| -2.5 * v).collect();
    assert_eq!(y.to_vec(&stream).unwrap(), want);

    let (rows, cols) = (13usize, 37usize);
    let fs = rng.f32s(rows * cols);
    let x = DeviceBuffer::from_slice(&stream, &fs).unwrap();
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, rows * cols).unwrap();
    let sum = module.kernel::<k::neighbour_sum>().unwrap();
    let grid = ((cols as u32).div_ceil(16), (rows as u32).div_ceil(4));
    stream
        .launch(
            &sum,
            LaunchConfig::new(grid, (16, 4)),
            (rows, cols, &x, &mut out),
        )
        .unwrap();
    let at = |r: usize, c: usize| fs[r * cols + c];
    let want: Vec<f32> = (0..rows * cols)
        .map(|e| {
            let (r, c) = (e / cols, e % cols);
            if r == 0 || c == 0 || r + 1 == rows || c + 1 == cols {
                at(r, c)
            } else {
                at(r, c - 1) + at(r, c + 1) + at(r - 1, c) + at(r + 1, c)
            }
        })
        .collect();
    assert_eq!(out.to_vec(&stream).unwrap(), want);

    let mut t = DeviceBuffer::<f32>::alloc_zeroed(&stream, rows * cols).unwrap();
    let transpose = module.kernel::<k::transpose_tiles>().unwrap();
    let side = k::TRANSPOSE_TILE as u32;
    let grid = ((cols as u32).div_ceil(side), (rows as u32).div_ceil(side));
    let block = (side, k::TRANSPOSE_ROWS as u32);
    stream
        .launch(
            &transpose,
            LaunchConfig::new(grid, block),
            (rows, cols, &x, &mut t),
        )
        .unwrap();
    let want: Vec<f32> = (0..rows * cols).map(|e| at(e % rows, e / rows)).collect();
    assert_eq!(t.to_vec(&stream).unwrap(), want);

    let us = rng.u32s(777, u32::MAX);
    let x = DeviceBuffer::from_slice(&stream, &us).unwrap();
    let mut y = poisoned(&stream, us.len());
    let copy = module.kernel::<k::copy_elems>().unwrap();
    stream
        .launch(
            &copy,
            LaunchConfig::for_num_elems(us.len(), 64),
            (&x, &mut y),
        )
        .unwrap();
    assert_eq!(y.to_vec(&stream).unwrap(), us);
}

/// The problem of a launch refused for argument `name`.
fn refused(result: vigil::Result<()>, name: &str) -> ArgProblem {
    match result {
        Err(Error::Argument {
            name: got, problem, ..
        }) if got == name => *problem,
        other => panic!("expected argument `{name}` refused, got {other:?}"),
    }
}

/// The geometry problem of a refused layout.
fn layout_problem(problem: ArgProblem) -> ProofProblem {
    match problem {
        ArgProblem::Layout { problem, .. } => problem,
        other => panic!("expected a layout problem, got {other:?}"),
    }
}

#[vigil::test(cpu, plain)]
fn partitions_that_would_overlap_are_refused_before_the_launch(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let elems = module.kernel::<k::thread_elems_owner>().unwrap();
    let mut y = poisoned(&stream, 512);
    // A second row of blocks, or of threads, would own the same elements.
    let e = stream.launch(&elems, LaunchConfig::new((2, 2), 256), (&mut y,));
    let problem = refused(e, "y");
    assert_eq!(
        layout_problem(problem.clone()),
        ProofProblem::Overlap {
            unit: Unit::Threads,
            dim: "grid.y",
            extent: 2
        }
    );
    assert_eq!(
        problem.to_string(),
        "its parts would overlap: the launch has grid.y = 2, and threads that differ only there \
         would own the same part (the partition needs grid.y = 1) (launch: grid 2 x 2 x 1, \
         block 256 x 1 x 1)"
    );
    let e = stream.launch(&elems, LaunchConfig::new(2, (128, 2)), (&mut y,));
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::Overlap { dim: "block.y", .. }
    ));

    let chunks = module.kernel::<k::block_chunks_owner>().unwrap();
    let e = stream.launch(&chunks, LaunchConfig::new((4, 2), 32), (128usize, &mut y));
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::Overlap {
            unit: Unit::Blocks,
            dim: "grid.y",
            ..
        }
    ));

    let tiles = module.kernel::<k::block_tiles_owner>().unwrap();
    let config = LaunchConfig::new((2, 4, 2), (8, 2));
    let e = stream.launch(&tiles, config, (16usize, 16usize, &mut y));
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::Overlap { dim: "grid.z", .. }
    ));

    let cells = module.kernel::<k::thread_cells_owner>().unwrap();
    let config = LaunchConfig::new((2, 2), (8, 8, 2));
    let e = stream.launch(&cells, config, (16usize, 16usize, &mut y));
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::Overlap { dim: "block.z", .. }
    ));
    // Nothing ran.
    assert!(y.to_vec(&stream).unwrap().iter().all(|&v| v == u32::MAX));
}

#[vigil::test(cpu, plain)]
fn layouts_the_launch_cannot_cover_or_hold_are_refused(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let mut y = poisoned(&stream, 1000);

    let elems = module.kernel::<k::thread_elems_owner>().unwrap();
    let e = stream.launch(&elems, LaunchConfig::new(3, 256), (&mut y,));
    assert_eq!(
        layout_problem(refused(e, "y")),
        ProofProblem::NotCovered {
            covered: 768,
            len: 1000,
            what: "elements"
        }
    );

    // 8 chunks of 100 leave 200 elements to no one; 11 reach past the end.
    let chunks = module.kernel::<k::block_chunks_owner>().unwrap();
    let e = stream.launch(&chunks, LaunchConfig::new(8, 32), (100usize, &mut y));
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::NotCovered { covered: 800, .. }
    ));
    let e = stream.launch(&chunks, LaunchConfig::new(11, 32), (100usize, &mut y));
    assert_eq!(
        layout_problem(refused(e, "y")),
        ProofProblem::TooShort {
            len: 1000,
            needed: 1100
        }
    );

    // A 40 x 30 matrix does not fit 1,000 elements.
    let cells = module.kernel::<k::thread_cells_owner>().unwrap();
    let e = stream.launch(
        &cells,
        LaunchConfig::new((4, 10), (8, 4)),
        (40usize, 30usize, &mut y),
    );
    assert_eq!(
        layout_problem(refused(e, "y")),
        ProofProblem::TooShort {
            len: 1000,
            needed: 1200
        }
    );

    // One block per tile of a 20 x 48 matrix in 4 x 8 tiles: 6 x 5 blocks.
    let tiles = module.kernel::<k::block_tiles_owner>().unwrap();
    let (rows, cols) = (20usize, 48usize);
    let e = stream.launch(
        &tiles,
        LaunchConfig::new((7, 5), (8, 2)),
        (rows, cols, &mut y),
    );
    assert_eq!(
        layout_problem(refused(e, "y")),
        ProofProblem::PastEnd {
            blocks: 7,
            max: 6,
            dim: "grid.x"
        }
    );
    let e = stream.launch(
        &tiles,
        LaunchConfig::new((6, 4), (8, 2)),
        (rows, cols, &mut y),
    );
    assert!(matches!(
        layout_problem(refused(e, "y")),
        ProofProblem::NotCovered {
            covered: 4,
            len: 5,
            what: "tile rows"
        }
    ));
    stream
        .launch(
            &tiles,
            LaunchConfig::new((6, 5), (8, 2)),
            (rows, cols, &mut y),
        )
        .unwrap();

    // `#[same_len(y)]`: `x` must be exactly as long as `y`.
    let x = DeviceBuffer::<u32>::alloc_zeroed(&stream, 999).unwrap();
    let copy = module.kernel::<k::copy_elems>().unwrap();
    let e = stream.launch(&copy, LaunchConfig::for_num_elems(1000, 64), (&x, &mut y));
    let problem = refused(e, "x");
    assert_eq!(
        problem,
        ArgProblem::LengthMismatch {
            other: "y".into(),
            len: 999,
            other_len: 1000
        }
    );
    assert_eq!(
        problem.to_string(),
        "has 999 elements, but is declared #[same_len(y)] and `y` has 1000"
    );
}

#[vigil::test(cpu, plain)]
fn a_kernel_written_for_one_block_shape_refuses_another(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let transpose = module.kernel::<k::transpose_tiles>().unwrap();
    let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, 32 * 32).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, 32 * 32).unwrap();
    let e = stream.launch(
        &transpose,
        LaunchConfig::new((2, 2), (16, 8)),
        (32usize, 32usize, &x, &mut y),
    );
    match e {
        Err(Error::LaunchConfig {
            problem: LaunchConfigError::BlockShape { declared, given },
            ..
        }) => {
            assert_eq!((declared.x, declared.y, declared.z), (16, 4, 1));
            assert_eq!((given.x, given.y), (16, 8));
        }
        other => panic!("expected a block shape refusal, got {other:?}"),
    }
    assert_eq!(
        k::transpose_tiles::BLOCK_SHAPE,
        Some([k::TRANSPOSE_TILE as u32, k::TRANSPOSE_ROWS as u32, 1])
    );
}

#[vigil::test(cpu, plain)]
fn a_partition_another_argument_aliases_is_proven_but_not_exclusive(ctx: &Context) {
    let (stream, _module) = setup(ctx);
    let config = LaunchConfig::for_num_elems(64, 32);
    // Two buffers: `y`'s partition is each thread's own.
    let x = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64).unwrap();
    let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, 64).unwrap();
    let buf = pack_proven_args::<k::copy_elems, _>(&config, (&x, &mut y)).unwrap();
    let y_proof = buf.proven_views().iter().find(|p| p.arg == 1).unwrap();
    assert!(y_proof.writes && y_proof.exclusive, "{y_proof:?}");
    assert_eq!(y_proof.view.addr, y.device_ptr());

    // One symmetric buffer passed twice (a peer's slice is shared on
    // purpose): `x` reads what `y` partitions.
    let group = SymmetricGroup::cpu(1, Context::builder()).unwrap();
    let sym = group.alloc::<u32>(64).unwrap();
    let peer = sym.peer(0, 0).unwrap();
    let buf = pack_proven_args::<k::copy_elems, _>(&config, (peer, peer)).unwrap();
    let y_proof = buf.proven_views().iter().find(|p| p.arg == 1).unwrap();
    assert!(y_proof.writes && !y_proof.exclusive, "{y_proof:?}");
    // Its geometry is still proven: a bad one is still refused.
    let tall = LaunchConfig::new((2, 2), 32);
    assert!(pack_proven_args::<k::copy_elems, _>(&tall, (peer, peer)).is_err());
    // And the launch runs (each thread copies its element onto itself).
    let s = group.stream(0).unwrap();
    let copy = Module::from_ptx(group.context(0).unwrap(), KERNELS_PTX)
        .unwrap()
        .kernel::<k::copy_elems>()
        .unwrap();
    s.launch(&copy, config, (peer, peer)).unwrap();
    group.synchronize().unwrap();
}

/// What the sanitizer may skip once it trusts the types
/// (`trust_partitions`, the context's `trust_types`): every per-thread
/// partition a launch proves exclusive is owned, whatever its layout
/// (each element, each matrix cell, each grid-stride element has one
/// owning thread); a per-block part is not (its block's threads share
/// it); nothing is owned before the launch trusts the proof.
#[vigil::test(cpu, plain)]
fn every_proven_per_thread_partition_is_owned_once_trusted(ctx: &Context) {
    let (stream, _module) = setup(ctx);
    let (rows, cols) = (8usize, 64usize);
    let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, rows * cols).unwrap();
    let (at, bytes) = (y.device_ptr(), 4 * (rows * cols) as u64);
    let owned = |mut buf: vigil::ParamBuffer| {
        let before = buf.read_only_ranges().owned_covers(at, bytes);
        buf.trust_partitions(true);
        let r = buf.read_only_ranges();
        assert!(!before, "owned before the launch trusts its proofs");
        // Owned is not read-only: the owner writes there.
        assert!(!r.covers(at, 4));
        r.owned_covers(at, bytes)
    };
    let elems = LaunchConfig::for_num_elems(rows * cols, 128);
    let buf = pack_proven_args::<k::thread_elems_owner, _>(&elems, (&mut y,)).unwrap();
    assert!(owned(buf), "ThreadElemsMut");
    let cells = LaunchConfig::new((2, 2), (32, 4));
    let buf = pack_proven_args::<k::thread_cells_owner, _>(&cells, (rows, cols, &mut y)).unwrap();
    assert!(owned(buf), "ThreadCellsMut");
    let stride = LaunchConfig::new(3, 32);
    let buf = pack_proven_args::<k::grid_stride_owner, _>(&stride, (&mut y,)).unwrap();
    assert!(owned(buf), "GridStrideMut");
    let chunks = LaunchConfig::new(4, 32);
    let n = rows * cols / 4;
    let buf = pack_proven_args::<k::block_chunks_owner, _>(&chunks, (n, &mut y)).unwrap();
    assert!(!owned(buf), "BlockChunksMut is its block's, not a thread's");
}

#[vigil::test]
fn the_examples_partitions_hold_for_their_launches(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let axpy = module.kernel::<examples::axpy>().unwrap();
    let n = 1000;
    let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &vec![2.0f32; n]).unwrap();
    stream
        .launch(
            &axpy,
            LaunchConfig::for_num_elems(n, 256),
            (3.0f32, &x, &mut y),
        )
        .unwrap();
    assert!(y.to_vec(&stream).unwrap().iter().all(|&v| v == 5.0));
    // `reduce_sum` takes one partial per block.
    let reduce = module.kernel::<examples::reduce_sum>().unwrap();
    let mut partials = DeviceBuffer::<f32>::alloc_zeroed(&stream, 3).unwrap();
    let e = stream.launch(
        &reduce,
        LaunchConfig::new(4, examples::REDUCE_BLOCK),
        (&x, &mut partials),
    );
    assert!(matches!(refused(e, "partials"), ArgProblem::Layout { .. }));
}

vigil::test_main!();
