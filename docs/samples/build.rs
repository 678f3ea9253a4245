//! Builds the guide's kernel crate to PTX, for
//! `vigil::include_ptx!("vigil-guide-kernels")`.
fn main() {
    vigil_build::PtxBuilder::new("kernels").build_or_exit();
}
