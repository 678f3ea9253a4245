//! What a kernel's parameters ask a launch to prove, and the proofs.
//!
//! A `#[kernel]` view parameter may declare a *layout*: the shape of the
//! memory it views (`#[shape(rows, cols)]`), a length it shares with
//! another view (`#[same_len(y)]`), or a *partition* that gives each
//! thread or block of the launch its own part (`ThreadElemsMut`,
//! `BlockTilesMut`, ...). The device code then indexes that memory without
//! a check per access, because the host proved, before the launch, that
//! every part it hands out lies inside the buffer, and, for a partition,
//! that no two threads or blocks get the same element and that the parts
//! cover the buffer.
//!
//! This module is the one definition both sides use: [`ParamLayout`] is
//! what `#[kernel]` records per parameter (in `Kernel::LAYOUTS`), the
//! `*_origin` and [`Geometry`] functions are how the device maps a thread
//! or block to its part, and [`check`] is the host's proof, pure and
//! tested against a brute-force model of that mapping
//! (`shared/tests/proofs.rs`).

use core::fmt;

/// A size a layout is declared with: a scalar parameter of the kernel, a
/// constant, or another view parameter's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// The value of the kernel's scalar parameter number `n` (0-based).
    Param(u16),
    /// A constant.
    Const(u64),
    /// The length (in elements) of the kernel's view parameter number `n`.
    LenOf(u16),
}

/// Which block coordinate picks a tile's row in a [`Layout::BlockTiles`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileOrder {
    /// Block `(x, y)` takes the tile in tile-row `y`, tile-column `x`: the
    /// grid lies over the matrix as it is stored.
    Natural,
    /// Block `(x, y)` takes the tile in tile-row `x`, tile-column `y` (the
    /// output of a transpose whose input is read in natural order).
    Transposed,
}

/// What a view parameter's memory looks like to the launch, with its
/// sizes as `E` ([`Extent`] when declared, `u64` once a launch resolved
/// them). Elements are row-major; every part is in elements of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout<E = Extent> {
    /// The view has exactly `len` elements (the same as another view's).
    SameLen {
        /// The length it must have.
        len: E,
    },
    /// A `rows` x `cols` matrix at the start of the view.
    Matrix {
        /// Rows.
        rows: E,
        /// Columns (the row stride).
        cols: E,
    },
    /// Element `i` to the thread whose `global_index_x()` is `i`, in a
    /// launch that extends in x only.
    ThreadElems,
    /// Cell `(row, col)` of a `rows` x `cols` matrix to the thread at
    /// `row = block.y * block_dim.y + thread.y`,
    /// `col = block.x * block_dim.x + thread.x`, in a launch that does not
    /// extend in z.
    ThreadCells {
        /// Rows.
        rows: E,
        /// Columns.
        cols: E,
    },
    /// Elements `g`, `g + s`, `g + 2s`, ... to the thread whose
    /// `global_index_x()` is `g`, with `s = grid_stride_x()`, in a launch
    /// that extends in x only.
    GridStride,
    /// Elements `[b * chunk, (b + 1) * chunk)` to block `b` of a grid that
    /// extends in x only.
    BlockChunks {
        /// Elements per block.
        chunk: E,
    },
    /// The `tile_rows` x `tile_cols` tiles of a `rows` x `cols` matrix,
    /// one per block of a grid that does not extend in z; a tile on the
    /// matrix's last row or column of tiles is cut at its edge.
    BlockTiles {
        /// Rows of the matrix.
        rows: E,
        /// Columns of the matrix.
        cols: E,
        /// Rows of a tile.
        tile_rows: E,
        /// Columns of a tile.
        tile_cols: E,
        /// Which block takes which tile.
        order: TileOrder,
    },
}

impl<E: Copy> Layout<E> {
    /// The same layout with every size mapped by `f`, or `f`'s first
    /// error (a launch resolves [`Extent`]s to values).
    pub fn try_map<R, X>(self, mut f: impl FnMut(E) -> Result<R, X>) -> Result<Layout<R>, X> {
        Ok(match self {
            Layout::SameLen { len } => Layout::SameLen { len: f(len)? },
            Layout::Matrix { rows, cols } => Layout::Matrix {
                rows: f(rows)?,
                cols: f(cols)?,
            },
            Layout::ThreadElems => Layout::ThreadElems,
            Layout::ThreadCells { rows, cols } => Layout::ThreadCells {
                rows: f(rows)?,
                cols: f(cols)?,
            },
            Layout::GridStride => Layout::GridStride,
            Layout::BlockChunks { chunk } => Layout::BlockChunks { chunk: f(chunk)? },
            Layout::BlockTiles {
                rows,
                cols,
                tile_rows,
                tile_cols,
                order,
            } => Layout::BlockTiles {
                rows: f(rows)?,
                cols: f(cols)?,
                tile_rows: f(tile_rows)?,
                tile_cols: f(tile_cols)?,
                order,
            },
        })
    }

    /// True for the layouts that hand each thread or block a part (the
    /// others only bound the view).
    pub const fn has_parts(&self) -> bool {
        matches!(
            self,
            Layout::ThreadElems
                | Layout::ThreadCells { .. }
                | Layout::GridStride
                | Layout::BlockChunks { .. }
                | Layout::BlockTiles { .. }
        )
    }

    /// True when the parts belong to blocks (the threads of a block share
    /// their block's part); false for per-thread parts.
    pub const fn parts_per_block(&self) -> bool {
        matches!(self, Layout::BlockChunks { .. } | Layout::BlockTiles { .. })
    }
}

/// One view parameter's declared layout, as `#[kernel]` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamLayout {
    /// The parameter's index (0-based, in the kernel's parameter list).
    pub param: u16,
    /// Its layout.
    pub layout: Layout,
    /// True for a partition the kernel writes through (`...Mut`): its
    /// parts must be pairwise disjoint and cover the view. A read-only
    /// view's parts need only lie inside it.
    pub writes: bool,
}

/// A launch's grid and block, in blocks and threads per dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
}

/// Which units of the launch a problem is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Threads.
    Threads,
    /// Blocks.
    Blocks,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Threads => "threads",
            Unit::Blocks => "blocks",
        })
    }
}

/// Why a launch cannot prove a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofProblem {
    /// The view's length is not the one it is declared to share.
    LengthMismatch {
        /// The view's length.
        len: u64,
        /// The length it must have.
        expected: u64,
    },
    /// The declared matrix (or the blocks' parts) needs more elements than
    /// the view has.
    TooShort {
        /// The view's length.
        len: u64,
        /// Elements the layout reaches.
        needed: u64,
    },
    /// A declared size overflows 64 bits.
    Overflow,
    /// A tile with no rows or no columns.
    EmptyTile,
    /// Two units of the launch would own the same part: the launch extends
    /// in a dimension the partition does not tell them apart by.
    Overlap {
        /// Threads or blocks.
        unit: Unit,
        /// The dimension, e.g. `block.y` or `grid.z`.
        dim: &'static str,
        /// Its extent in the launch.
        extent: u32,
    },
    /// The parts leave elements of the view to no one.
    NotCovered {
        /// Elements (or rows, columns) the launch's parts reach.
        covered: u64,
        /// Elements (or rows, columns) there are.
        len: u64,
        /// What is counted.
        what: &'static str,
    },
    /// The grid has blocks beyond the last tile (or chunk) of the view.
    PastEnd {
        /// Blocks the dimension has.
        blocks: u32,
        /// Blocks it may have at most.
        max: u64,
        /// The grid dimension, e.g. `grid.x`.
        dim: &'static str,
    },
}

impl fmt::Display for ProofProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProofProblem::LengthMismatch { len, expected } => write!(
                f,
                "has {len} elements, but is declared to have as many as another view ({expected})"
            ),
            ProofProblem::TooShort { len, needed } => write!(
                f,
                "has {len} elements, but its declared layout reaches {needed}"
            ),
            ProofProblem::Overflow => f.write_str("its declared sizes overflow 64 bits"),
            ProofProblem::EmptyTile => f.write_str("its tiles have no rows or no columns"),
            ProofProblem::Overlap { unit, dim, extent } => write!(
                f,
                "its parts would overlap: the launch has {dim} = {extent}, and {unit} that differ \
                 only there would own the same part (the partition needs {dim} = 1)"
            ),
            ProofProblem::NotCovered { covered, len, what } => write!(
                f,
                "its parts do not cover it: the launch reaches {covered} of its {len} {what}"
            ),
            ProofProblem::PastEnd { blocks, max, dim } => write!(
                f,
                "the launch has {dim} = {blocks} blocks, but it has parts for {max} (one per block)"
            ),
        }
    }
}

/// The first row and column of the tile block `(bx, by)` takes.
#[inline(always)]
pub const fn tile_origin(
    order: TileOrder,
    bx: u64,
    by: u64,
    tile_rows: u64,
    tile_cols: u64,
) -> (u64, u64) {
    match order {
        TileOrder::Natural => (by * tile_rows, bx * tile_cols),
        TileOrder::Transposed => (bx * tile_rows, by * tile_cols),
    }
}

/// The grid extents, in x and y, whose blocks pick tile rows and tile
/// columns under `order`: `(rows_dim, cols_dim)` as `(index, name)`.
const fn tile_dims(order: TileOrder) -> ((usize, &'static str), (usize, &'static str)) {
    match order {
        TileOrder::Natural => ((1, "grid.y"), (0, "grid.x")),
        TileOrder::Transposed => ((0, "grid.x"), (1, "grid.y")),
    }
}

const GRID_DIMS: [&str; 3] = ["grid.x", "grid.y", "grid.z"];
const BLOCK_DIMS: [&str; 3] = ["block.x", "block.y", "block.z"];

/// `Overlap` unless every listed grid and block dimension is 1.
fn single(g: &Geometry, grid: &[usize], block: &[usize], unit: Unit) -> Result<(), ProofProblem> {
    for &d in block {
        if g.block[d] != 1 {
            return Err(ProofProblem::Overlap {
                unit,
                dim: BLOCK_DIMS[d],
                extent: g.block[d],
            });
        }
    }
    for &d in grid {
        if g.grid[d] != 1 {
            return Err(ProofProblem::Overlap {
                unit,
                dim: GRID_DIMS[d],
                extent: g.grid[d],
            });
        }
    }
    Ok(())
}

fn mul(a: u64, b: u64) -> Result<u64, ProofProblem> {
    a.checked_mul(b).ok_or(ProofProblem::Overflow)
}

/// `NotCovered` unless `covered >= len`.
fn covers(covered: u64, len: u64, what: &'static str) -> Result<(), ProofProblem> {
    if covered >= len {
        Ok(())
    } else {
        Err(ProofProblem::NotCovered { covered, len, what })
    }
}

/// `TooShort` unless `needed <= len`.
fn fits(needed: u64, len: u64) -> Result<(), ProofProblem> {
    if needed <= len {
        Ok(())
    } else {
        Err(ProofProblem::TooShort { len, needed })
    }
}

/// Proves `layout` (sizes resolved) for a view of `len` elements under
/// launch geometry `g`: every part a thread or block takes lies inside
/// the view, and, when `writes`, no two threads (or blocks, for per-block
/// parts) take the same element and every element of the view (of its
/// matrix, for the 2-D layouts) is someone's.
///
/// ```
/// use vigil_shared::proofs::{check, Geometry, Layout, ProofProblem};
///
/// // One element per thread: 4 blocks of 256 threads cover 1,000 elements.
/// let g = Geometry { grid: [4, 1, 1], block: [256, 1, 1] };
/// assert_eq!(check(Layout::ThreadElems, 1000, true, g), Ok(()));
/// // 3 blocks do not.
/// let short = Geometry { grid: [3, 1, 1], ..g };
/// assert!(matches!(
///     check(Layout::ThreadElems, 1000, true, short),
///     Err(ProofProblem::NotCovered { covered: 768, len: 1000, .. })
/// ));
/// // A second row of blocks would own the same elements again.
/// let tall = Geometry { grid: [4, 2, 1], ..g };
/// assert!(matches!(
///     check(Layout::ThreadElems, 1000, true, tall),
///     Err(ProofProblem::Overlap { dim: "grid.y", .. })
/// ));
/// ```
pub fn check(layout: Layout<u64>, len: u64, writes: bool, g: Geometry) -> Result<(), ProofProblem> {
    let [gx, gy, _] = g.grid.map(u64::from);
    let [bx, by, _] = g.block.map(u64::from);
    match layout {
        Layout::SameLen { len: expected } => {
            if len != expected {
                return Err(ProofProblem::LengthMismatch { len, expected });
            }
        }
        Layout::Matrix { rows, cols } => fits(mul(rows, cols)?, len)?,
        Layout::ThreadElems => {
            if len > 0 {
                single(&g, &[1, 2], &[1, 2], Unit::Threads)?;
            }
            covers(mul(gx, bx)?, len, "elements")?;
        }
        Layout::GridStride => {
            if len > 0 {
                single(&g, &[1, 2], &[1, 2], Unit::Threads)?;
            }
        }
        Layout::ThreadCells { rows, cols } => {
            let cells = mul(rows, cols)?;
            fits(cells, len)?;
            if cells > 0 {
                single(&g, &[2], &[2], Unit::Threads)?;
                covers(mul(gy, by)?, rows, "rows")?;
                covers(mul(gx, bx)?, cols, "columns")?;
            }
        }
        Layout::BlockChunks { chunk } => {
            fits(mul(gx, chunk)?, len)?;
            if writes {
                if chunk > 0 {
                    single(&g, &[1, 2], &[], Unit::Blocks)?;
                }
                covers(gx * chunk, len, "elements")?;
            }
        }
        Layout::BlockTiles {
            rows,
            cols,
            tile_rows,
            tile_cols,
            order,
        } => {
            fits(mul(rows, cols)?, len)?;
            if tile_rows == 0 || tile_cols == 0 {
                return Err(ProofProblem::EmptyTile);
            }
            let ((rdim, rname), (cdim, cname)) = tile_dims(order);
            let tiles = [
                (rows.div_ceil(tile_rows), rdim, rname),
                (cols.div_ceil(tile_cols), cdim, cname),
            ];
            // Every block's tile starts inside the matrix.
            for (max, dim, name) in tiles {
                if u64::from(g.grid[dim]) > max {
                    return Err(ProofProblem::PastEnd {
                        blocks: g.grid[dim],
                        max,
                        dim: name,
                    });
                }
            }
            if writes {
                single(&g, &[2], &[], Unit::Blocks)?;
                for (max, dim, _) in tiles {
                    let what = if dim == rdim {
                        "tile rows"
                    } else {
                        "tile columns"
                    };
                    covers(u64::from(g.grid[dim]), max, what)?;
                }
            }
        }
    }
    Ok(())
}
