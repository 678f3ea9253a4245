//! `vigil-shared`: what the host and the device must agree on.
//!
//! Only constants, `#[repr(C)]` layouts, address arithmetic and the pure
//! happens-before engine live here: no I/O, no allocation, no intrinsics, so
//! the same code runs in a PTX kernel, in the CPU backend and in the tests.
//!
//! Sanitizer modules, one concern each: [`abi`] (layouts), [`address`]
//! (reservations and shadow addresses), [`atomic`] (abstract atomics and
//! locks), [`clock`] (vector clocks, epochs, clock buffers), [`shadow`]
//! (compact cells and inflated records), [`line`](mod@line) (one cell summarising a
//! 128-byte line that warps access whole), [`atomic_set`] (one epoch per
//! thread for a word's atomic writes of one class), [`engine`] (the detection
//! algorithm and its hooks), [`history`] (snapshots spilled into the
//! record pool), [`report`] (race records and the buffer), [`block`] and
//! [`block_line`] (races between the threads of one block on the GPU; a
//! 128-byte line one warp accesses whole keeps one table entry),
//! [`gpu`] (the GPU sanitizer's launch ABI: hidden parameters, slots,
//! stream clocks, side table, report records), [`read_only`] (a launch's
//! read-only ranges), [`reclaim`] (a freed buffer's records back to the
//! pool), [`tensor_map`] (tensor-copy descriptors and swizzles).
//! [`memory_model`] and [`params`] are the vocabulary and the
//! kernel parameter ABI every crate shares; [`proofs`] the layouts a
//! kernel's views declare and the launch's proof of them.
//!
//! How these pieces work together is described in the user guide's design
//! part: docs/src/design/address-space.md (the reservations and the
//! shadow), docs/src/design/memory-model.md (the rules the engine
//! applies), docs/src/design/engine.md (its state: compact cells and
//! pooled records, line summaries, atomic sets, clocks and release
//! history), docs/src/design/ordering.md (launches, streams and events)
//! and docs/src/design/block.md (races inside a block).
//!
//! Two properties hold throughout: every bound on the engine's state
//! (a full record pool, an evicted clock, a merged release head) can only
//! hide a race, never report one that cannot happen, and each is counted
//! in [`abi::PoolHeader`] for the host to report; and the same code runs
//! in a PTX kernel, in the CPU backend and in the tests against a
//! reference model (`shared/tests/`).
#![no_std]
#![warn(missing_docs)]

pub mod memory_model;
pub mod params;
pub mod proofs;

pub mod abi;
pub mod address;
pub mod atomic;
pub mod atomic_set;
pub mod block;
pub mod block_line;
pub mod clock;
pub mod engine;
pub mod gpu;
pub mod history;
pub mod line;
pub mod read_only;
pub mod reclaim;
pub mod report;
pub mod shadow;
pub mod tensor_map;

pub use memory_model::{AccessKind, Ordering, Scope};
