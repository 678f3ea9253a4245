//! Builds the kernel crate to PTX for `vigil::include_ptx!("my-kernels")`.
fn main() {
    vigil_build::PtxBuilder::new("../kernels").build_or_exit();
}
