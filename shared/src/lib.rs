//! `vigil-shared`: what the host and the device must agree on.
//!
//! Only constants, `#[repr(C)]` layouts, address arithmetic and the pure
//! happens-before engine live here: no I/O, no allocation, no intrinsics, so
//! the same code runs in a PTX kernel, in the CPU backend and in the tests.
#![no_std]
#![warn(missing_docs)]

pub mod memory_model;
pub mod params;

pub use memory_model::{AccessKind, Ordering, Scope};
