//! Builds the `vigil-bench-kernels` crate to PTX, for
//! `vigil::include_ptx!("vigil-bench-kernels")`.
fn main() {
    vigil_build::PtxBuilder::new("kernels").build_or_exit();
}
