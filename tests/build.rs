//! Builds the `vigil-kernels` crate to PTX and embeds it (VIGIL_PTX_VIGIL_KERNELS).
fn main() {
    if let Err(e) = vigil_build::PtxBuilder::new("kernels").build() {
        panic!("{e}");
    }
}
