//! `#[repr(C)]` layouts shared by the host, the PTX runtime and the CPU
//! backend, with compile-time size and offset assertions.
//!
//! Everything here is plain data ([`bytemuck::Pod`]): the host fills it with
//! ordinary writes and copies, the device reads it through atomics at the
//! word offsets the `*_WORD` constants name (the assertions tie the two).

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

use crate::memory_model::{AccessKind, Scope};

/// Bytes of user memory one shadow cell covers.
pub const WORD_BYTES: u64 = 4;
/// Bytes of shadow per 4-byte word: one cell of the race engine
/// ([`crate::race::desc`]).
pub const COMPACT_SHADOW_BYTES_PER_WORD: u64 = size_of::<u64>() as u64;
/// What a report record says.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// A read unordered with an earlier write.
    ReadAfterWrite = 1,
    /// A write unordered with an earlier read.
    WriteAfterRead = 2,
    /// A write unordered with an earlier write.
    WriteAfterWrite = 3,
    /// An atomic and a plain access, unordered, at least one writing.
    AtomicNonAtomic = 4,
    /// Two atomics whose scopes do not include each other's threads.
    ScopeMismatch = 5,
    /// Two atomics that overlap without covering the same bytes (not
    /// morally strong in the PTX model, whatever their scopes).
    AtomicSizeMismatch = 6,
    /// Error: a thread's epoch can no longer be represented.
    EpochOverflow = 16,
    /// Error: an acquire needed a snapshot its releaser already overwrote.
    /// No longer emitted; the code stays reserved.
    ClockBufferExhausted = 17,
    /// Error: the shadow record pool was full. No longer emitted (an
    /// allocation that finds the pool full is counted in its header,
    /// [`pool_header::EXHAUSTED`](crate::race::record::pool_header::EXHAUSTED),
    /// and reported as history lost); the code stays reserved.
    ShadowPoolExhausted = 18,
    /// Error: a word needed more release heads than a record keeps. No
    /// longer emitted; the code stays reserved.
    ReleaseSlotsExhausted = 19,
}
impl ReportKind {
    /// The kind from its `u32` value.
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::ReadAfterWrite,
            2 => Self::WriteAfterRead,
            3 => Self::WriteAfterWrite,
            4 => Self::AtomicNonAtomic,
            5 => Self::ScopeMismatch,
            6 => Self::AtomicSizeMismatch,
            16 => Self::EpochOverflow,
            17 => Self::ClockBufferExhausted,
            18 => Self::ShadowPoolExhausted,
            19 => Self::ReleaseSlotsExhausted,
            _ => return None,
        })
    }

    /// True for the error kinds (not race verdicts).
    pub const fn is_error(self) -> bool {
        self as u32 >= 16
    }
}

/// Where an access comes from: passed by the instrumented kernel (or the
/// CPU backend) with every hook and copied into reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AccessSite {
    /// Pointer to the UTF-8 file name (from `#[track_caller]`), 0 if none.
    pub file_ptr: u64,
    /// Length of the file name in bytes.
    pub file_len: u32,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub col: u32,
    /// For a race inside a block on shared memory: the low 32 bits of the
    /// address of the `Location` where the shared view of this access was
    /// allocated (its `shared_array!`, or a stack tile's push); the high
    /// bits are those of the earlier access's `Location` (one module's
    /// statics lie within 2 GiB). 0: unknown, or not such a race.
    pub view_site: u32,
    /// Kernel (launch) id.
    pub kernel_id: u32,
    /// Linear block index in the grid.
    pub block: u32,
    /// Linear thread index in the block.
    pub thread: u32,
    /// As [`AccessSite::view_site`], for the earlier access's view.
    pub prior_view_site: u32,
}
const _: () = assert!(size_of::<AccessSite>() == 40);

/// One record in the report buffer: a race or an engine error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RaceReport {
    /// [`ReportKind`] as u32.
    pub kind: u32,
    /// Bytes of the current access.
    pub size: u32,
    /// For races, the first byte both accesses touch; for errors, the
    /// address of the current access.
    pub address: u64,
    /// The current access's source site.
    pub site: AccessSite,
    /// Current sanitizer thread.
    pub tid: u32,
    /// Current device rank.
    pub device: u32,
    /// Current SM.
    pub sm: u32,
    /// Current epoch.
    pub epoch: u32,
    /// Current access: [`AccessKind`] in bits 0..8, [`Scope`] in bits 8..16.
    pub access: u32,
    /// Earlier access's sanitizer thread.
    pub prior_tid: u32,
    /// Earlier access's epoch.
    pub prior_epoch: u32,
    /// Earlier access: [`AccessKind`] in bits 0..8, [`Scope`] in bits 8..16.
    pub prior_access: u32,
    /// Byte mask (within the first racing word) the two accesses share.
    pub overlap_mask: u32,
    /// For errors: the value that did not fit (epoch, token, ...).
    pub detail: u32,
}
const _: () = assert!(size_of::<RaceReport>() == 96);
const _: () = assert!(offset_of!(RaceReport, site) == 16);
const _: () = assert!(offset_of!(RaceReport, tid) == 56);
const _: () = assert!(offset_of!(RaceReport, prior_tid) == 76);

impl RaceReport {
    /// u32 words in a record.
    pub const WORDS: usize = size_of::<Self>() / 4;

    /// The record's kind, if it is a known one.
    pub fn report_kind(&self) -> Option<ReportKind> {
        ReportKind::from_u32(self.kind)
    }

    /// Packs an access kind and scope the way `access`/`prior_access` hold them.
    pub const fn pack_access(kind: AccessKind, scope: Scope) -> u32 {
        kind as u32 | (scope as u32) << 8
    }
}

/// Header of the report buffer; records follow at [`ReportBufferHeader::WORDS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ReportBufferHeader {
    /// Records claimed so far (may exceed `capacity`; the rest were dropped).
    pub count: u32,
    /// Records the buffer holds.
    pub capacity: u32,
    /// Reserved, zero.
    pub reserved: [u32; 2],
}
impl ReportBufferHeader {
    /// u32 words in the header.
    pub const WORDS: usize = size_of::<Self>() / 4;
}
const _: () = assert!(size_of::<ReportBufferHeader>() == 16);
