//! The user guide's code samples. The guide (`docs/src`) includes its
//! code from this crate and its kernel crate (`kernels/`), so every sample
//! a reader sees is built by `cargo build` and run by `cargo test`
//! (`tests/guide.rs`).

/// The PTX of the guide's kernels, built by `build.rs`.
pub const PTX: &str = vigil::include_ptx!("vigil-guide-kernels");
