//! Tensor maps (the descriptors of `cp.async.bulk.tensor`): their size,
//! the shared-memory swizzles, and the layout the CPU backend writes into
//! the descriptor's 128 bytes.
//!
//! On a GPU the descriptor is the driver's (`cuTensorMapEncodeTiled`),
//! opaque to Vigil. On the CPU backend the host writes a [`TiledMap`] into
//! the same 128 bytes and the device crate's host build reads it back to
//! perform a tensor copy, element by element, as the hardware would:
//! the box at the given coordinates, row-major with the first dimension
//! innermost, elements outside the tensor read as zero and not written.
//!
//! On both backends the host writes the [`TiledMap`] once more right after
//! the descriptor ([`DESCRIPTION_OFFSET`]): there a sanitized GPU kernel
//! reads which global memory a tensor copy touches, which the driver's
//! descriptor does not say.

/// Bytes of a tensor map.
pub const TENSOR_MAP_BYTES: usize = 128;

/// Where Vigil's description of a map ([`TiledMap::encode`]) sits, from
/// the map's first byte: right after the descriptor.
pub const DESCRIPTION_OFFSET: usize = TENSOR_MAP_BYTES;

/// Bytes the host allocates per map: the descriptor, then its description.
pub const TENSOR_MAP_WITH_DESCRIPTION: usize = DESCRIPTION_OFFSET + TENSOR_MAP_BYTES;

/// The alignment a tensor map needs in memory.
pub const TENSOR_MAP_ALIGN: usize = 64;

/// The most dimensions a tensor map has.
pub const MAX_RANK: usize = 5;

/// The most elements of a box along one dimension.
pub const MAX_BOX_DIM: u32 = 256;

/// A tensor map's 128 bytes, aligned as the hardware needs them.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapBytes(pub [u64; 16]);

const _: () = assert!(core::mem::size_of::<TensorMapBytes>() == TENSOR_MAP_BYTES);
const _: () = assert!(core::mem::align_of::<TensorMapBytes>() == TENSOR_MAP_ALIGN);

/// How a tensor copy lays a box out in shared memory: rows as they are
/// ([`Swizzle::None`]), or with the 16-byte chunks of each 128-byte line
/// permuted by the line's index so that reading a column of a tile
/// touches many banks (`CU_TENSOR_MAP_SWIZZLE_32B/64B/128B`).
///
/// With a swizzle, the byte at offset `o` of the box (unswizzled, as rows
/// follow each other) lands at [`Swizzle::apply`]`(o)`: bits 4.. of the
/// chunk index are XORed with the line index (`o / 128`) modulo 2, 4 or
/// 8. The box's rows must then be at most the swizzle's span (32, 64 or
/// 128 bytes) and the shared destination aligned to
/// [`Swizzle::alignment`].
///
/// ```
/// use vigil_shared::tensor_map::Swizzle;
/// // Row 1 of a 32 x f32 tile: its first chunk (bytes 128..144) moves
/// // to chunk 1 of the line.
/// assert_eq!(Swizzle::B128.apply(128), 128 + 16);
/// assert_eq!(Swizzle::None.apply(128), 128);
/// ```
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// Rows as they are.
    #[default]
    None = 0,
    /// 32-byte span: chunk bit 0 XOR line bit 0.
    B32 = 1,
    /// 64-byte span: chunk bits 0..2 XOR line bits 0..2.
    B64 = 2,
    /// 128-byte span: chunk bits 0..3 XOR line bits 0..3.
    B128 = 3,
}

impl Swizzle {
    /// The swizzle numbered `n` (its `repr`), if any.
    pub const fn from_u8(n: u8) -> Option<Swizzle> {
        match n {
            0 => Some(Swizzle::None),
            1 => Some(Swizzle::B32),
            2 => Some(Swizzle::B64),
            3 => Some(Swizzle::B128),
            _ => None,
        }
    }

    /// The longest box row it allows, in bytes (`None`: no limit).
    pub const fn span(self) -> Option<usize> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    /// The alignment a shared destination or source needs: 128 bytes,
    /// or the whole pattern (8 lines of 32, 64 or 128 bytes' worth of
    /// 128-byte lines: 256, 512, 1024).
    pub const fn alignment(self) -> usize {
        match self {
            Swizzle::None => 128,
            Swizzle::B32 => 256,
            Swizzle::B64 => 512,
            Swizzle::B128 => 1024,
        }
    }

    /// Where the byte at unswizzled offset `offset` of a box lands.
    #[inline(always)]
    pub const fn apply(self, offset: usize) -> usize {
        let lines = match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 3,
            Swizzle::B128 => 7,
        };
        offset ^ (((offset >> 7) & lines) << 4)
    }
}

/// A tiled tensor map as the CPU backend encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledMap {
    /// Address of element 0.
    pub base: u64,
    /// Dimensions in use (1 to [`MAX_RANK`]).
    pub rank: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Elements along each dimension, innermost first (unused: 1).
    pub dims: [u64; MAX_RANK],
    /// Bytes between consecutive indices of each dimension (`strides[0]`
    /// is `elem_bytes`).
    pub strides: [u64; MAX_RANK],
    /// Elements of the box along each dimension (unused: 1).
    pub box_dims: [u32; MAX_RANK],
    /// The shared-memory layout of a box.
    pub swizzle: Swizzle,
}

/// One row of a box (its innermost dimension) as a copy moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoxRow {
    /// Unswizzled byte offset of the row's first element in the box.
    pub shared_offset: usize,
    /// Address of the row's first element in the tensor, as if in bounds.
    pub global: u64,
    /// The row's elements inside the tensor: `first..end` (empty when the
    /// row lies outside it).
    pub first: usize,
    /// See [`BoxRow::first`].
    pub end: usize,
}

impl TiledMap {
    /// The first word of an encoded map ("VIGILTMP").
    pub const MAGIC: u64 = u64::from_le_bytes(*b"VIGILTMP");

    /// The descriptor bytes of this map.
    pub fn encode(&self) -> TensorMapBytes {
        let mut w = [0u64; 16];
        w[0] = Self::MAGIC;
        w[1] = self.base;
        w[2] = u64::from(self.rank)
            | (u64::from(self.elem_bytes) << 8)
            | ((self.swizzle as u64) << 16);
        w[3..8].copy_from_slice(&self.dims);
        w[8..13].copy_from_slice(&self.strides);
        let b = self.box_dims.map(u64::from);
        w[13] = b[0] | (b[1] << 16) | (b[2] << 32) | (b[3] << 48);
        w[14] = b[4];
        TensorMapBytes(w)
    }

    /// The map encoded in `bytes`, or `None` when they are not a map the
    /// CPU backend encoded (a driver's descriptor, or garbage).
    pub fn decode(bytes: &TensorMapBytes) -> Option<TiledMap> {
        let w = &bytes.0;
        if w[0] != Self::MAGIC {
            return None;
        }
        let rank = (w[2] & 0xff) as u32;
        let swizzle = Swizzle::from_u8(((w[2] >> 16) & 0xff) as u8)?;
        if rank == 0 || rank as usize > MAX_RANK {
            return None;
        }
        let mut dims = [0u64; MAX_RANK];
        dims.copy_from_slice(&w[3..8]);
        let mut strides = [0u64; MAX_RANK];
        strides.copy_from_slice(&w[8..13]);
        let box_dims = [
            (w[13] & 0xffff) as u32,
            ((w[13] >> 16) & 0xffff) as u32,
            ((w[13] >> 32) & 0xffff) as u32,
            ((w[13] >> 48) & 0xffff) as u32,
            (w[14] & 0xffff) as u32,
        ];
        Some(TiledMap {
            base: w[1],
            rank,
            elem_bytes: ((w[2] >> 8) & 0xff) as u32,
            dims,
            strides,
            box_dims,
            swizzle,
        })
    }

    /// Elements in one box.
    pub fn box_elems(&self) -> usize {
        self.box_dims.iter().map(|&b| b as usize).product()
    }

    /// Calls `f` with each row of the box whose first element sits at
    /// `coords` (innermost first; unused ones ignored), in box order.
    pub fn for_each_row(&self, coords: [i32; MAX_RANK], mut f: impl FnMut(BoxRow)) {
        let rank = self.rank as usize;
        let inner = self.box_dims[0] as usize;
        let row_bytes = inner * self.elem_bytes as usize;
        let rows: usize = self.box_dims[1..rank].iter().map(|&b| b as usize).product();
        // The innermost dimension's in-bounds part is the same for every row.
        let x0 = i64::from(coords[0]);
        let first = (-x0).clamp(0, inner as i64) as usize;
        let end = (self.dims[0] as i64 - x0).clamp(0, inner as i64) as usize;
        for r in 0..rows {
            // Row `r`'s index along each outer dimension.
            let mut rest = r;
            let mut inside = true;
            let mut global = self.base as i64 + x0 * i64::from(self.elem_bytes);
            for d in 1..rank {
                let b = self.box_dims[d] as usize;
                let c = i64::from(coords[d]) + (rest % b) as i64;
                rest /= b;
                inside &= c >= 0 && (c as u64) < self.dims[d];
                global += c * self.strides[d] as i64;
            }
            let (first, end) = if inside {
                (first, end.max(first))
            } else {
                (0, 0)
            };
            f(BoxRow {
                shared_offset: r * row_bytes,
                global: global as u64,
                first,
                end,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn map_2d(width: u64, height: u64, bw: u32, bh: u32) -> TiledMap {
        TiledMap {
            base: 0x10_0000,
            rank: 2,
            elem_bytes: 4,
            dims: [width, height, 1, 1, 1],
            strides: [4, width * 4, 0, 0, 0],
            box_dims: [bw, bh, 1, 1, 1],
            swizzle: Swizzle::B64,
        }
    }

    #[test]
    fn a_map_survives_its_encoding() {
        let m = map_2d(100, 37, 16, 8);
        assert_eq!(TiledMap::decode(&m.encode()), Some(m));
        let mut garbage = m.encode();
        garbage.0[0] ^= 1;
        assert_eq!(TiledMap::decode(&garbage), None);
    }

    #[test]
    fn rows_outside_the_tensor_are_clipped() {
        // A 16 x 8 box at (-4, 34) of a 100 x 37 tensor: 4 columns left of
        // it, rows 37.. below it.
        let mut rows = Vec::new();
        map_2d(100, 37, 16, 8).for_each_row([-4, 34, 0, 0, 0], |r| rows.push(r));
        assert_eq!(rows.len(), 8);
        assert_eq!((rows[0].first, rows[0].end), (4, 16));
        assert_eq!(rows[0].global, 0x10_0000 + 34 * 400 - 16);
        assert_eq!(rows[2].shared_offset, 2 * 64);
        assert_eq!((rows[2].first, rows[2].end), (4, 16));
        assert!(rows[3..].iter().all(|r| r.first == r.end), "rows 37..41");
        // At the right edge: columns 96..100 of 96..112.
        let mut right = Vec::new();
        map_2d(100, 37, 16, 8).for_each_row([96, 0, 0, 0, 0], |r| right.push(r));
        assert_eq!((right[0].first, right[0].end), (0, 4));
    }

    #[test]
    fn swizzles_permute_chunks_within_their_pattern() {
        for s in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let a = s.alignment();
            let mut seen = [false; 1024];
            for o in 0..a {
                let t = s.apply(o);
                assert!(t < a, "{s:?} moves {o} out of its pattern");
                assert_eq!(t % 16, o % 16, "{s:?} keeps bytes inside a chunk");
                assert!(!seen[t], "{s:?} maps two bytes to {t}");
                seen[t] = true;
            }
        }
        // A column of a 32 x f32 tile touches 8 chunk positions with B128.
        let chunks: std::collections::BTreeSet<usize> = (0..8)
            .map(|r| Swizzle::B128.apply(r * 128) % 128 / 16)
            .collect();
        assert_eq!(chunks.len(), 8);
    }
}
