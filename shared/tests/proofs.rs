//! The launch's proof of a view's layout (`proofs::check`) against a
//! brute-force model: every thread (or block) of a small launch takes the
//! part the device's mapping gives it, and the layout holds exactly when
//! the declared matrix fits the view, every part lies inside it, and, for
//! a partition, no element is taken twice and every element is taken.

use proptest::prelude::*;
use std::collections::HashSet;
use vigil_shared::proofs::{check, tile_origin, Geometry, Layout, ProofProblem, TileOrder};

/// The parts of a launch: for each thread or block, the elements it takes;
/// `None` when a part would start outside the declared matrix.
fn parts(layout: Layout<u64>, g: Geometry) -> Vec<Option<Vec<u64>>> {
    let [gx, gy, gz] = g.grid.map(u64::from);
    let [bx_dim, by_dim, bz_dim] = g.block.map(u64::from);
    let mut out = Vec::new();
    for _bz in 0..gz {
        for by in 0..gy {
            for bx in 0..gx {
                if layout.parts_per_block() {
                    out.push(block_part(layout, bx, by));
                    continue;
                }
                for _tz in 0..bz_dim {
                    for ty in 0..by_dim {
                        for tx in 0..bx_dim {
                            let x = bx * bx_dim + tx;
                            let y = by * by_dim + ty;
                            out.push(Some(thread_part(layout, x, y, gx * bx_dim)));
                        }
                    }
                }
            }
        }
    }
    out
}

fn thread_part(layout: Layout<u64>, x: u64, y: u64, stride: u64) -> Vec<u64> {
    match layout {
        Layout::ThreadElems => vec![x],
        Layout::GridStride => (x..64).step_by(stride as usize).collect(),
        Layout::ThreadCells { rows, cols } if y < rows && x < cols => vec![y * cols + x],
        Layout::ThreadCells { .. } => vec![],
        _ => unreachable!("not a per-thread layout"),
    }
}

fn block_part(layout: Layout<u64>, bx: u64, by: u64) -> Option<Vec<u64>> {
    match layout {
        Layout::BlockChunks { chunk } => Some((bx * chunk..(bx + 1) * chunk).collect()),
        Layout::BlockTiles {
            rows,
            cols,
            tile_rows,
            tile_cols,
            order,
        } => {
            let (r0, c0) = tile_origin(order, bx, by, tile_rows, tile_cols);
            if r0 >= rows || c0 >= cols {
                return None;
            }
            let mut v = Vec::new();
            for r in r0..(r0 + tile_rows).min(rows) {
                for c in c0..(c0 + tile_cols).min(cols) {
                    v.push(r * cols + c);
                }
            }
            Some(v)
        }
        _ => unreachable!("not a per-block layout"),
    }
}

/// The model's verdict: the layout holds for a view of `len` elements.
fn holds(layout: Layout<u64>, len: u64, writes: bool, g: Geometry) -> bool {
    // Per-thread layouts only stop at the view's end.
    let limit = match layout {
        Layout::ThreadElems | Layout::GridStride => len,
        Layout::ThreadCells { rows, cols } | Layout::BlockTiles { rows, cols, .. } => {
            if rows * cols > len {
                return false;
            }
            rows * cols
        }
        _ => len,
    };
    let mut taken = HashSet::new();
    for part in parts(layout, g) {
        let Some(part) = part else { return false };
        for e in part {
            if matches!(layout, Layout::ThreadElems | Layout::GridStride) && e >= len {
                continue; // a thread past the end takes nothing
            }
            if e >= limit {
                return false;
            }
            if !taken.insert(e) && writes {
                return false;
            }
        }
    }
    !writes || (0..limit).all(|e| taken.contains(&e))
}

fn geometry() -> impl Strategy<Value = Geometry> {
    ([1u32..=3, 1..=3, 1..=2], [1u32..=4, 1..=3, 1..=2])
        .prop_map(|(grid, block)| Geometry { grid, block })
}

fn layout() -> impl Strategy<Value = Layout<u64>> {
    let order = prop_oneof![Just(TileOrder::Natural), Just(TileOrder::Transposed)];
    prop_oneof![
        Just(Layout::ThreadElems),
        Just(Layout::GridStride),
        (0u64..=8, 0u64..=8).prop_map(|(rows, cols)| Layout::ThreadCells { rows, cols }),
        (0u64..=6).prop_map(|chunk| Layout::BlockChunks { chunk }),
        (0u64..=8, 0u64..=8, 1u64..=4, 1u64..=4, order).prop_map(
            |(rows, cols, tile_rows, tile_cols, order)| Layout::BlockTiles {
                rows,
                cols,
                tile_rows,
                tile_cols,
                order,
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// The proof accepts exactly the launches the model says are safe.
    #[test]
    fn proof_agrees_with_the_model(
        layout in layout(),
        len in 0u64..=40,
        writes in any::<bool>(),
        g in geometry(),
    ) {
        // Per-thread layouts exist only as partitions.
        let writes = writes || !layout.parts_per_block();
        let verdict = check(layout, len, writes, g);
        prop_assert_eq!(
            verdict.is_ok(),
            holds(layout, len, writes, g),
            "{:?} len {} writes {} {:?}: {:?}", layout, len, writes, g, verdict
        );
    }
}

#[test]
fn bounds_only_layouts() {
    let g = Geometry {
        grid: [7, 5, 3],
        block: [2, 2, 2],
    };
    let same = Layout::SameLen { len: 10 };
    assert_eq!(check(same, 10, false, g), Ok(()));
    assert_eq!(
        check(same, 11, false, g),
        Err(ProofProblem::LengthMismatch {
            len: 11,
            expected: 10
        })
    );
    let m = Layout::Matrix { rows: 3, cols: 4 };
    assert_eq!(check(m, 12, false, g), Ok(()));
    assert_eq!(
        check(m, 11, false, g),
        Err(ProofProblem::TooShort {
            len: 11,
            needed: 12
        })
    );
    let huge = Layout::Matrix {
        rows: u64::MAX,
        cols: 2,
    };
    assert_eq!(check(huge, 11, false, g), Err(ProofProblem::Overflow));
}

#[test]
fn tiles_need_rows_and_columns_and_an_exact_grid() {
    let tiles = |tile_rows, tile_cols| Layout::BlockTiles {
        rows: 64,
        cols: 96,
        tile_rows,
        tile_cols,
        order: TileOrder::Transposed,
    };
    let g = Geometry {
        grid: [2, 3, 1],
        block: [32, 8, 1],
    };
    // Transposed: grid.x walks the 2 tile rows, grid.y the 3 tile columns.
    assert_eq!(check(tiles(32, 32), 64 * 96, true, g), Ok(()));
    assert_eq!(
        check(tiles(0, 32), 64 * 96, true, g),
        Err(ProofProblem::EmptyTile)
    );
    let wide = Geometry {
        grid: [3, 3, 1],
        ..g
    };
    assert_eq!(
        check(tiles(32, 32), 64 * 96, false, wide),
        Err(ProofProblem::PastEnd {
            blocks: 3,
            max: 2,
            dim: "grid.x"
        })
    );
    let short = Geometry {
        grid: [2, 2, 1],
        ..g
    };
    // A reader may leave tiles out; a writer may not.
    assert_eq!(check(tiles(32, 32), 64 * 96, false, short), Ok(()));
    assert!(matches!(
        check(tiles(32, 32), 64 * 96, true, short),
        Err(ProofProblem::NotCovered {
            covered: 2,
            len: 3,
            ..
        })
    ));
}

#[test]
fn problems_read_as_sentences() {
    let overlap = ProofProblem::Overlap {
        unit: vigil_shared::proofs::Unit::Blocks,
        dim: "grid.z",
        extent: 2,
    };
    assert_eq!(
        overlap.to_string(),
        "its parts would overlap: the launch has grid.z = 2, and blocks that differ only there \
         would own the same part (the partition needs grid.z = 1)"
    );
}
