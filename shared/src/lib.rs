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
//! stream clocks, side table, report records).
//!
//! Where the sanitizer differs from design.md section 3 (as built):
//! - Shadow: an 8-byte compact cell per word (one write clock and one read
//!   clock with byte masks, 11-bit thread ids, 15-bit epochs; bit table in
//!   [`shadow`]) inflating into a 128-byte pooled record (8 access clocks
//!   with 32-bit epochs and 16-bit thread ids, 4 release heads, a link to
//!   chain records of 14 more clocks each) for rarer states, instead of a
//!   fixed 24-byte cell with a lock. Plain accesses
//!   update compact cells with one CAS and no lock; atomics lock their
//!   cells (compact cells via a LOCKED marker) in address order around the
//!   real operation.
//! - Line summaries ([`line`](mod@line)): a 128-byte line whose words all have one
//!   plain state keeps it in its first word's cell, so a warp's whole-line
//!   access is one compare-exchange, not 32; the line splits into per-word
//!   cells (for good, until the shadow is zeroed) at the first access
//!   that would make its words differ. Design 3.2 has no such level.
//! - Atomic sets ([`atomic_set`]): once a word's record fills with atomic
//!   writes of one class (byte mask, extent, scope, device), they move into
//!   an array of one epoch per sanitizer thread in the record pool, and a
//!   non-releasing read-modify-write of that class raises its own entry
//!   without the word's lock (the record's lock counts such raisers,
//!   [`atomic::RecordLock`]). Design 3.2 locks every atomic's cell; this is
//!   what keeps a counter that every thread bumps from serialising them.
//! - Thread ids: up to [`abi::MAX_THREADS`] (2^16) sanitizer threads;
//!   clocks of larger ids than the compact cell holds inflate their word.
//! - History: an earlier access clock is dropped only when the new access
//!   is ordered after it and at least as race-prone, and a word needing
//!   more than its record's 8 clocks chains records from the pool (given
//!   back when emptied), so verdicts equal an exact detector's while the
//!   pool has room (chains may fill all but an eighth of it). Only then is
//!   a seeded random non-latest-write clock evicted, counted. Chains and
//!   spilled snapshots are [`engine::EngineConfig::with_exact_history`]
//!   (the CPU backend's and the oracle's); the GPU runtime's
//!   [`engine::EngineConfig::from_globals`] keeps 8 clocks a word and the
//!   overflow clock ([`engine::RUNTIME_CHAIN_RECORDS_PER_WORD`] says why).
//! - Epochs advance lazily, only after the clock was published (release,
//!   release fence, kernel exit), not at every CTA entry, so they last.
//! - Release history scales with the program ([`clock`], [`engine`]): a
//!   release head carries the releaser's epoch, so releases between which
//!   only the own entry changed share one snapshot; heads of one class
//!   (releasing device, scope) on a word are joined into one derived
//!   snapshot, so any number of releasers fit a word's 4 head slots
//!   exactly (beyond 2 devices' worth of classes, heads merge into a wide
//!   head); a snapshot that heads still name when its ring slot is reused
//!   moves into the record pool ([`history`]: reference-counted, given
//!   back with its last head), and only when the pool has no room is it
//!   replaced by the releaser's overflow clock. Both losses only hide
//!   races, never invent them, and are counted; no capacity error remains.
//! - Freed memory gives its pool records back ([`reclaim`]); design.md
//!   leaves the pool's lifetime open (records would otherwise stay handed
//!   out for the sanitizer's life).
//! - Atomics race unless morally strong: scopes including each other's
//!   threads *and* the very same bytes (mixed-size atomics race).
//! - Release sequences keep one head per class with its own scope, so
//!   mixed-scope sequences are exact rather than rejected; release/acquire
//!   fences pair with relaxed atomics per the PTX model, and `fence.sc`
//!   also synchronises through per-device and system SC-fence clocks.
//! - Reads inside a launch's read-only views (shared borrows passed for
//!   `GlobalSlice`/`GlobalPtr`) skip the same-block check on the GPU
//!   ([`read_only`]): the launch's borrows prove no thread of it writes
//!   them. The engine still checks them against every other launch.
#![no_std]
#![warn(missing_docs)]

pub mod memory_model;
pub mod params;
pub mod race;

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

pub use memory_model::{AccessKind, Ordering, Scope};
