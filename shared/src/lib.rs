//! `vigil-shared`: what the host and the device must agree on.
//!
//! Only constants, `#[repr(C)]` layouts, address arithmetic and the pure
//! happens-before engine live here: no I/O, no allocation, no intrinsics, so
//! the same code runs in a PTX kernel, in the CPU backend and in the tests.
//!
//! Sanitizer modules, one concern each: [`abi`] (layouts), [`address`]
//! (reservations and shadow addresses), [`atomic`] (abstract atomics and
//! locks), [`clock`] (vector clocks, epochs, clock buffers), [`shadow`]
//! (compact cells and inflated records), [`engine`] (the detection
//! algorithm and its hooks), [`report`] (race records and the buffer).
#![no_std]
#![warn(missing_docs)]

pub mod memory_model;
pub mod params;

pub mod abi;
pub mod address;
pub mod atomic;
pub mod clock;
pub mod engine;
pub mod report;
pub mod shadow;

pub use memory_model::{AccessKind, Ordering, Scope};
