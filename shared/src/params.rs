//! The kernel parameter ABI: how each Rust kernel parameter lowers to PTX
//! `.param` scalars and where each scalar sits in a packed parameter buffer.
//!
//! The `#[kernel]` macro, the host's launch packing and the CPU backend's
//! unpacking all use [`ParamCursor`], so the three cannot disagree about an
//! offset.

/// A PTX parameter scalar type. Pointers are `.u64` in PTX.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtxType {
    /// `.u8` / `.s8` / `.b8` (also `bool`).
    B8,
    /// `.u16` / `.s16` / `.b16`.
    B16,
    /// `.u32` / `.s32` / `.b32`.
    B32,
    /// `.u64` / `.s64` / `.b64`.
    B64,
    /// `.f32`.
    F32,
    /// `.f64`.
    F64,
    /// A global pointer (`.u64`).
    Ptr,
}

impl PtxType {
    /// Size in bytes of the scalar in the parameter buffer.
    pub const fn size(self) -> usize {
        match self {
            PtxType::B8 => 1,
            PtxType::B16 => 2,
            PtxType::B32 | PtxType::F32 => 4,
            PtxType::B64 | PtxType::F64 | PtxType::Ptr => 8,
        }
    }

    /// Alignment in bytes (PTX scalars are naturally aligned).
    pub const fn align(self) -> usize {
        self.size()
    }

    /// True when a PTX `.param` declared as `ptx` accepts this scalar:
    /// same size, and floats only where the PTX expects floats or bits.
    pub const fn matches_ptx_decl(self, ptx: PtxType) -> bool {
        match (self, ptx) {
            (PtxType::F32, PtxType::F32) | (PtxType::F64, PtxType::F64) => true,
            (PtxType::F32, PtxType::B32) | (PtxType::F64, PtxType::B64) => true,
            (PtxType::F32, _) | (PtxType::F64, _) => false,
            (_, PtxType::F32) | (_, PtxType::F64) => false,
            (a, b) => a.size() == b.size(),
        }
    }

    /// A short PTX-like name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            PtxType::B8 => ".b8",
            PtxType::B16 => ".b16",
            PtxType::B32 => ".b32",
            PtxType::B64 => ".b64",
            PtxType::F32 => ".f32",
            PtxType::F64 => ".f64",
            PtxType::Ptr => ".u64 (pointer)",
        }
    }
}

/// How one Rust-level kernel parameter lowers to PTX parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamDesc {
    /// The parameter's name in the kernel's source.
    pub name: &'static str,
    /// The parameter's Rust type as written in the kernel's source.
    pub rust_type: &'static str,
    /// The PTX scalars it lowers to, in order (a slice is pointer + length).
    pub parts: &'static [PtxType],
}

/// Walks a packed parameter buffer: each scalar at the next offset aligned
/// to its own alignment, as `cuLaunchKernel`'s `kernelParams` entries and
/// the PTX `.param` list expect them in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParamCursor {
    offset: usize,
}

impl ParamCursor {
    /// A cursor at the start of a buffer.
    pub const fn new() -> Self {
        ParamCursor { offset: 0 }
    }

    /// Reserves room for one scalar and returns its offset.
    #[inline(always)]
    pub const fn next(&mut self, ty: PtxType) -> usize {
        let align = ty.align();
        let at = (self.offset + align - 1) & !(align - 1);
        self.offset = at + ty.size();
        at
    }

    /// Bytes used so far.
    pub const fn len(&self) -> usize {
        self.offset
    }

    /// True before the first scalar.
    pub const fn is_empty(&self) -> bool {
        self.offset == 0
    }
}

/// Offsets of every scalar of a parameter list, and the total size; used by
/// tests and by error messages.
pub fn packed_size(params: &[ParamDesc]) -> usize {
    let mut c = ParamCursor::new();
    for p in params {
        for &t in p.parts {
            c.next(t);
        }
    }
    c.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_scalars_are_aligned_in_order() {
        let mut c = ParamCursor::new();
        assert_eq!(c.next(PtxType::B8), 0);
        assert_eq!(c.next(PtxType::Ptr), 8);
        assert_eq!(c.next(PtxType::B16), 16);
        assert_eq!(c.next(PtxType::F32), 20);
        assert_eq!(c.next(PtxType::B8), 24);
        assert_eq!(c.next(PtxType::F64), 32);
        assert_eq!(c.len(), 40);
    }

    #[test]
    fn float_params_only_match_float_or_bit_decls() {
        assert!(PtxType::F32.matches_ptx_decl(PtxType::F32));
        assert!(PtxType::F32.matches_ptx_decl(PtxType::B32));
        assert!(!PtxType::B32.matches_ptx_decl(PtxType::F32));
        assert!(!PtxType::F32.matches_ptx_decl(PtxType::F64));
        assert!(PtxType::Ptr.matches_ptx_decl(PtxType::B64));
        assert!(!PtxType::B32.matches_ptx_decl(PtxType::B64));
    }

    #[test]
    fn packed_size_counts_slice_parts() {
        const P: [ParamDesc; 2] = [
            ParamDesc {
                name: "a",
                rust_type: "f32",
                parts: &[PtxType::F32],
            },
            ParamDesc {
                name: "x",
                rust_type: "GlobalSlice<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
        ];
        assert_eq!(packed_size(&P), 24);
    }
}
