//! `vigil-shared`: what the host and the device must agree on.
//!
//! Only constants, `#[repr(C)]` layouts, address arithmetic and the pure
//! happens-before engine live here: no I/O, no allocation, no intrinsics, so
//! the same code runs in a PTX kernel, in the CPU backend and in the tests.
//!
//! Sanitizer modules, one concern each: [`race`] (the race engine: who
//! accessed what and whether two accesses race, between CTAs, launches
//! and devices), [`block`] and [`block_line`] (races between the threads
//! of one block on the GPU; a 128-byte line one warp accesses whole keeps
//! one table entry), [`copies_in_flight`] (a thread's `cp.async` copies
//! between their issue and their completion, on the GPU), [`bulk_copies`]
//! (a CTA's bulk and tensor copies in flight, on the GPU), [`abi`] (the layouts host and device share: reports,
//! the per-device runtime region), [`address`] (reservations and shadow
//! addresses), [`atomic`] (abstract atomics), [`gpu`] (the GPU
//! sanitizer's launch ABI: hidden parameters, the runtime descriptor,
//! report records), [`read_only`] (a launch's read-only ranges),
//! [`regions`] (the word of an SM's held same-block regions and how
//! CTAs hand them on).
//! [`memory_model`] and [`params`] are the vocabulary and the kernel
//! parameter ABI every crate shares; [`proofs`] the layouts a kernel's
//! views declare and the launch's proof of them; [`tensor_map`]
//! tensor-copy descriptors and swizzles.
//!
//! How these pieces work together is described in the user guide's design
//! part: docs/src/design/address-space.md (the reservations and the
//! shadow), docs/src/design/memory-model.md (the rules the engine
//! applies), docs/src/design/engine.md (serials, lane bounds, line
//! headers, split words and pool records, snapshots of acquired
//! knowledge, release heads), docs/src/design/ordering.md (launches,
//! streams and events) and docs/src/design/block.md (races inside a
//! block).
//!
//! Two properties hold throughout: every bound on the engine's state (a
//! full record pool or snapshot arena, a coarsened snapshot, a launch
//! record overwritten) can only hide a race, never report one that cannot
//! happen, and each is counted for the host to report; and the same code
//! runs in a PTX kernel, in the CPU backend and in the tests against a
//! reference model (`shared/tests/`).
#![no_std]
#![warn(missing_docs)]

pub mod memory_model;
pub mod params;
pub mod proofs;
pub mod race;

pub mod abi;
pub mod address;
pub mod atomic;
pub mod block;
pub mod block_line;
pub mod bulk_copies;
pub mod copies_in_flight;
pub mod gpu;
pub mod read_only;
pub mod regions;
pub mod tensor_map;
#[cfg(test)]
mod test_rng;

pub use memory_model::{AccessKind, Ordering, Scope};
