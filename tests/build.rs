//! Builds the `vigil-kernels` crate to PTX, for `vigil::include_ptx!("vigil-kernels")`.
fn main() {
    vigil_build::PtxBuilder::new("kernels").build_or_exit();
}
