//! Hand-written kernel declarations (what `#[kernel]` generates) shared by
//! the CPU and GPU tests, and the PTX they match.
#![allow(dead_code)]

use vigil::device::global::{GlobalSlice, GlobalSliceMut};
use vigil::device::Sanitizer;
use vigil::Kernel;
use vigil_shared::params::{ParamDesc, PtxType};

pub const AXPY_PTX: &str = include_str!("../data/axpy.ptx");

// ---------------------------------------------------------------------------
// Hand-written kernels (what `#[kernel]` generates).

pub const SLICE: &[PtxType] = &[PtxType::Ptr, PtxType::B64];
pub const PTR: &[PtxType] = &[PtxType::Ptr];

pub const fn desc(
    name: &'static str,
    rust_type: &'static str,
    parts: &'static [PtxType],
) -> ParamDesc {
    ParamDesc {
        name,
        rust_type,
        parts,
    }
}

/// `fn axpy(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>)`
#[allow(non_camel_case_types)]
pub struct axpy {}
impl Kernel for axpy {
    const NAME: &'static str = "axpy";
    const PARAMS: &'static [ParamDesc] = &[
        desc("a", "f32", &[PtxType::F32]),
        desc("x", "GlobalSlice<f32>", SLICE),
        desc("y", "GlobalSliceMut<f32>", SLICE),
    ];
    type Params = (f32, GlobalSlice<f32>, GlobalSliceMut<f32>);
    unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
}

/// Same Rust name as `axpy`, but declares `n: u32` where the PTX has a float.
#[allow(non_camel_case_types)]
pub struct axpy_stale {}
impl Kernel for axpy_stale {
    const NAME: &'static str = "axpy";
    const PARAMS: &'static [ParamDesc] = &[
        desc("n", "u32", &[PtxType::B32]),
        desc("x", "GlobalSlice<f32>", SLICE),
        desc("y", "GlobalSliceMut<f32>", SLICE),
    ];
    type Params = (u32, GlobalSlice<f32>, GlobalSliceMut<f32>);
    unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
}
