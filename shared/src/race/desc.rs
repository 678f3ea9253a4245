//! The 64-bit words the shadow is made of: access descriptors, the
//! line header's write and read words, and site words.
//!
//! ```text
//! AccessDesc (a word cell's inline access, a record's entry):
//!  63 62 | 61 60 | 59  | 58  | 57 56 | 55 54 | 53..50 | 49 48 | 47  | 46  | 45..32 | 31..0
//!   tag  | spare | spr | lch | part  | size  | bytes  | scope | atm | wr  | epoch  | serial
//!
//! (`lch`: a launch read, `super::entries::LAUNCH`; `spr`: a sparse
//! entry, [`SPARSE`]; both only in record entries.)
//!
//! LineWrite (cell 0 of a line in line mode; tag 00):
//!  63 62 | 61..54 | 53..46  | 45..32 | 31..0
//!   00   | spare  | version | epoch  | serial
//!
//! LineRead (cell 1 of a line in line mode):
//!  63..56 | 55 54 | 53..46  | 45..32 | 31..0
//!  spare  | kind  | version | epoch  | serial, or record index (SET)
//!
//! SiteWord (cells 2 and 3 of a line in line mode; a record's sites):
//!  63..32 | 31..12               | 11..2  | 1 0
//!  serial | location (20 bits)   | thread | lanes
//! ```
//!
//! An epoch counts the releases its CTA made before the access; it
//! saturates at [`MAX_EPOCH`] (later accesses share it: counted, races
//! may then be missed, never invented).

use super::serial::{Serial, NO_SERIAL};
use crate::memory_model::{AccessKind, Scope};

/// Epoch bits in a descriptor.
pub const EPOCH_BITS: u32 = 14;
/// The largest epoch a descriptor holds.
pub const MAX_EPOCH: u16 = (1 << EPOCH_BITS) - 1;
/// A CTA's first epoch (0 marks "no epoch" in knowledge lookups).
pub const FIRST_EPOCH: u16 = 1;

const EPOCH_SHIFT: u32 = 32;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const WRITE_BIT: u64 = 1 << 46;
const ATOMIC_BIT: u64 = 1 << 47;
const SCOPE_SHIFT: u32 = 48;
const BYTES_SHIFT: u32 = 50;
const SIZE_SHIFT: u32 = 54;
const PART_SHIFT: u32 = 56;
const TAG_SHIFT: u32 = 62;

/// The descriptor bit of a *sparse* record entry: its first and last
/// serials made the access, the serials between them may not have. A
/// word that many CTAs reach in no particular order (a hot atomic's
/// word, a value every block reads) keeps one entry per access instead of
/// a chain that grows with the grid; a later access unordered with either
/// end races with a real access, and one ordered with both ends but not
/// with a serial between them is undecided (counted, not reported).
pub const SPARSE: u64 = 1 << 59;

/// What a word cell holds (its top two bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellTag {
    /// Cell 0: the line is in line mode (cells 0..4 are its header).
    /// Any other cell of a split line: an empty word.
    Line = 0,
    /// A split line's word with one access inline ([`AccessDesc`]).
    Inline = 1,
    /// A split line's word whose state is a pool record.
    Record = 2,
    /// Being changed by one thread: wait and read again.
    Locked = 3,
}

impl CellTag {
    /// The tag of a cell's value.
    #[inline(always)]
    pub const fn of(cell: u64) -> CellTag {
        match cell >> TAG_SHIFT {
            0 => CellTag::Line,
            1 => CellTag::Inline,
            2 => CellTag::Record,
            _ => CellTag::Locked,
        }
    }

    /// `payload` (the low 62 bits) under this tag.
    #[inline(always)]
    pub const fn with(self, payload: u64) -> u64 {
        (payload & ((1 << TAG_SHIFT) - 1)) | (self as u64) << TAG_SHIFT
    }
}

/// An empty word of a split line. Cell 0 cannot be all zero (that is a
/// line header), so an empty split word is an inline access by nobody.
pub const EMPTY_SPLIT: u64 = (CellTag::Inline as u64) << TAG_SHIFT;

/// An atomic's size class: what "the very same bytes" compares besides
/// the byte mask (an 8-byte atomic and a 4-byte one on its low word race).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeClass {
    /// 4 bytes (or a plain access).
    Four = 0,
    /// 8 bytes: two words.
    Eight = 1,
    /// 16 bytes: four words.
    Sixteen = 2,
    /// Fewer than 4 bytes.
    Sub = 3,
}

impl SizeClass {
    /// The class of an atomic of `size` bytes.
    #[inline(always)]
    pub const fn of(size: u32) -> SizeClass {
        match size {
            4 => SizeClass::Four,
            8 => SizeClass::Eight,
            16 => SizeClass::Sixteen,
            _ => SizeClass::Sub,
        }
    }
}

/// One access as a word's shadow remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AccessDesc(pub u64);

impl AccessDesc {
    /// No access.
    pub const NONE: AccessDesc = AccessDesc(0);

    /// A plain access by `serial` in `epoch` of the bytes `bytes` (bit
    /// `i`: byte `i` of the word).
    #[inline(always)]
    pub const fn plain(serial: Serial, epoch: u16, write: bool, bytes: u8) -> AccessDesc {
        AccessDesc(
            serial as u64
                | ((epoch as u64) & EPOCH_MASK) << EPOCH_SHIFT
                | if write { WRITE_BIT } else { 0 }
                | ((bytes as u64) & 0xf) << BYTES_SHIFT,
        )
    }

    /// An atomic access: `write` when it wrote; `size` and `part` (which
    /// word of the atomic this is) make "the very same bytes".
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub const fn atomic(
        serial: Serial,
        epoch: u16,
        write: bool,
        bytes: u8,
        scope: Scope,
        size: SizeClass,
        part: u8,
    ) -> AccessDesc {
        AccessDesc(
            AccessDesc::plain(serial, epoch, write, bytes).0
                | ATOMIC_BIT
                | (scope as u64) << SCOPE_SHIFT
                | (size as u64) << SIZE_SHIFT
                | ((part as u64) & 3) << PART_SHIFT,
        )
    }

    /// The serial ([`NO_SERIAL`]: no access).
    #[inline(always)]
    pub const fn serial(self) -> Serial {
        self.0 as u32
    }

    /// Whether it names nobody.
    #[inline(always)]
    pub const fn is_none(self) -> bool {
        self.serial() == NO_SERIAL
    }

    /// The epoch.
    #[inline(always)]
    pub const fn epoch(self) -> u16 {
        ((self.0 >> EPOCH_SHIFT) & EPOCH_MASK) as u16
    }

    /// Whether it wrote.
    #[inline(always)]
    pub const fn is_write(self) -> bool {
        self.0 & WRITE_BIT != 0
    }

    /// Whether it was atomic.
    #[inline(always)]
    pub const fn is_atomic(self) -> bool {
        self.0 & ATOMIC_BIT != 0
    }

    /// The memory-model kind of the access (an atomic that wrote, a
    /// read-modify-write too, is an atomic write).
    #[inline(always)]
    pub const fn access_kind(self) -> AccessKind {
        match (self.is_atomic(), self.is_write()) {
            (false, false) => AccessKind::Read,
            (false, true) => AccessKind::Write,
            (true, false) => AccessKind::AtomicRead,
            (true, true) => AccessKind::AtomicWrite,
        }
    }

    /// An atomic's scope (plain accesses: `Block`).
    #[inline(always)]
    pub const fn scope(self) -> Scope {
        match (self.0 >> SCOPE_SHIFT) & 3 {
            0 => Scope::Block,
            1 => Scope::Device,
            _ => Scope::System,
        }
    }

    /// The bytes of the word it touched.
    #[inline(always)]
    pub const fn bytes(self) -> u8 {
        ((self.0 >> BYTES_SHIFT) & 0xf) as u8
    }

    /// The same access over the bytes `bytes`.
    #[inline(always)]
    pub const fn with_bytes(self, bytes: u8) -> AccessDesc {
        AccessDesc(self.0 & !(0xf << BYTES_SHIFT) | ((bytes as u64) & 0xf) << BYTES_SHIFT)
    }

    /// An atomic's size class and part: with the byte mask, what makes
    /// two atomics' bytes the very same.
    #[inline(always)]
    pub const fn extent(self) -> u8 {
        ((self.0 >> SIZE_SHIFT) & 0xf) as u8
    }

    /// The descriptor without its tag bits (what a record entry holds).
    #[inline(always)]
    pub const fn untagged(self) -> AccessDesc {
        AccessDesc(self.0 & ((1 << TAG_SHIFT) - 1))
    }

    /// The same access with a (saturated) epoch of `epoch`.
    #[inline(always)]
    pub const fn with_epoch(self, epoch: u16) -> AccessDesc {
        AccessDesc(
            self.0 & !(EPOCH_MASK << EPOCH_SHIFT) | ((epoch as u64) & EPOCH_MASK) << EPOCH_SHIFT,
        )
    }

    /// Everything but serial, epoch and the [`SPARSE`] mark: accesses
    /// with the same key and epoch by adjacent serials share a record
    /// entry.
    #[inline(always)]
    pub const fn key(self) -> u64 {
        self.0 & !(u32::MAX as u64) & !(EPOCH_MASK << EPOCH_SHIFT) & !SPARSE
    }

    /// Whether it is a sparse entry's first access ([`SPARSE`]).
    #[inline(always)]
    pub const fn is_sparse(self) -> bool {
        self.0 & SPARSE != 0
    }

    /// The same access, marked [`SPARSE`].
    #[inline(always)]
    pub const fn sparse(self) -> AccessDesc {
        AccessDesc(self.0 | SPARSE)
    }

    /// The same access by `serial`.
    #[inline(always)]
    pub const fn with_serial(self, serial: Serial) -> AccessDesc {
        AccessDesc(self.0 & !(u32::MAX as u64) | serial as u64)
    }
}

/// Version bits of a line's header words: a read word belongs to the
/// write word of its version, so a reader never adds itself to the reads
/// of a write it did not check.
pub const VERSION_BITS: u32 = 8;
const VERSION_SHIFT: u32 = 46;
const VERSION_MASK: u64 = (1 << VERSION_BITS) - 1;

/// Cell 0 of a line in line mode: the last write of the whole line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LineWrite(pub u64);

impl LineWrite {
    /// A whole-line write by `serial` in `epoch`, header version `version`.
    #[inline(always)]
    pub const fn new(serial: Serial, epoch: u16, version: u8) -> LineWrite {
        LineWrite(
            serial as u64
                | ((epoch as u64) & EPOCH_MASK) << EPOCH_SHIFT
                | (version as u64) << VERSION_SHIFT,
        )
    }
    /// The writer ([`NO_SERIAL`]: never written).
    #[inline(always)]
    pub const fn serial(self) -> Serial {
        self.0 as u32
    }
    /// The writer's epoch.
    #[inline(always)]
    pub const fn epoch(self) -> u16 {
        ((self.0 >> EPOCH_SHIFT) & EPOCH_MASK) as u16
    }
    /// The header's version.
    #[inline(always)]
    pub const fn version(self) -> u8 {
        ((self.0 >> VERSION_SHIFT) & VERSION_MASK) as u8
    }
    /// The access it records, as a descriptor (all four bytes of a word).
    #[inline(always)]
    pub const fn desc(self) -> AccessDesc {
        AccessDesc::plain(self.serial(), self.epoch(), true, 0xf)
    }
}

/// What a line's reads since its last write are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// None.
    Empty = 0,
    /// All by one CTA (`serial`, its latest `epoch`).
    Single = 1,
    /// By CTAs of one launch through its read-only views (`serial` one of
    /// them, `epoch` the largest): no CTA of that launch writes the line.
    Launch = 2,
    /// Any other set: `serial` is a pool record holding its entries.
    Set = 3,
}

const KIND_SHIFT: u32 = 54;

/// Cell 1 of a line in line mode: the reads since its last write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LineRead(pub u64);

impl LineRead {
    /// Reads of `kind` of header version `version`.
    #[inline(always)]
    pub const fn new(kind: ReadKind, payload: u32, epoch: u16, version: u8) -> LineRead {
        LineRead(
            payload as u64
                | ((epoch as u64) & EPOCH_MASK) << EPOCH_SHIFT
                | (version as u64) << VERSION_SHIFT
                | (kind as u64) << KIND_SHIFT,
        )
    }
    /// No reads, of version `version`.
    #[inline(always)]
    pub const fn empty(version: u8) -> LineRead {
        LineRead::new(ReadKind::Empty, 0, 0, version)
    }
    /// The kind.
    #[inline(always)]
    pub const fn kind(self) -> ReadKind {
        match (self.0 >> KIND_SHIFT) & 3 {
            0 => ReadKind::Empty,
            1 => ReadKind::Single,
            2 => ReadKind::Launch,
            _ => ReadKind::Set,
        }
    }
    /// The serial (single, launch) or record index (set).
    #[inline(always)]
    pub const fn payload(self) -> u32 {
        self.0 as u32
    }
    /// The epoch (single: the reader's latest; launch: the largest).
    #[inline(always)]
    pub const fn epoch(self) -> u16 {
        ((self.0 >> EPOCH_SHIFT) & EPOCH_MASK) as u16
    }
    /// The header version it belongs to.
    #[inline(always)]
    pub const fn version(self) -> u8 {
        ((self.0 >> VERSION_SHIFT) & VERSION_MASK) as u8
    }
    /// The single reader as a descriptor.
    #[inline(always)]
    pub const fn reader(self) -> AccessDesc {
        AccessDesc::plain(self.payload(), self.epoch(), false, 0xf)
    }
}

/// How many lanes of a warp a site's access covered in its line, and so
/// which thread touched a given byte: `Single` is one thread; the others
/// are a warp's whole-line run of 4-, 8- or 16-byte elements, `thread`
/// being the one that touched the line's first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteLanes {
    /// One thread.
    Single = 0,
    /// Lanes of 4-byte elements.
    Four = 1,
    /// Lanes of 8-byte elements.
    Eight = 2,
    /// Lanes of 16-byte elements.
    Sixteen = 3,
}

/// Bits of a site word's location index.
pub const LOCATION_BITS: u32 = 20;
/// Bits of a site word's thread.
pub const THREAD_BITS: u32 = 10;

/// Where an access was made: its serial (to validate the word against
/// the descriptor it describes), its source location (the low bits of the
/// `Location`'s address over 8, which the host completes from the
/// launch's module, or a host-issued transfer's index), and its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SiteWord(pub u64);

impl SiteWord {
    /// Nothing recorded.
    pub const NONE: SiteWord = SiteWord(0);

    /// The site of `serial`'s access at `location` (an address, or a
    /// transfer index) by `thread` covering `lanes`.
    #[inline(always)]
    pub const fn new(serial: Serial, location: u64, thread: u32, lanes: SiteLanes) -> SiteWord {
        let loc = (location >> 3) & ((1 << LOCATION_BITS) - 1);
        let thread = thread as u64 & ((1 << THREAD_BITS) - 1);
        SiteWord((serial as u64) << 32 | loc << 12 | thread << 2 | lanes as u64)
    }

    /// The site as a 32-bit value (what record entries keep).
    #[inline(always)]
    pub const fn site(self) -> u32 {
        self.0 as u32
    }

    /// The same site under `serial`.
    #[inline(always)]
    pub const fn for_serial(site: u32, serial: Serial) -> SiteWord {
        SiteWord((serial as u64) << 32 | site as u64)
    }

    /// The serial it belongs to.
    #[inline(always)]
    pub const fn serial(self) -> Serial {
        (self.0 >> 32) as u32
    }

    /// The location bits (an address's bits 3..23, or a transfer index).
    #[inline(always)]
    pub const fn location_bits(self) -> u32 {
        (self.0 as u32 >> 12) & ((1 << LOCATION_BITS) - 1)
    }

    /// The thread.
    #[inline(always)]
    pub const fn thread(self) -> u32 {
        (self.0 as u32 >> 2) & ((1 << THREAD_BITS) - 1)
    }

    /// The lanes it covered.
    #[inline(always)]
    pub const fn lanes(self) -> SiteLanes {
        match self.0 & 3 {
            0 => SiteLanes::Single,
            1 => SiteLanes::Four,
            2 => SiteLanes::Eight,
            _ => SiteLanes::Sixteen,
        }
    }

    /// The thread that touched byte `offset` of the line (a whole-line
    /// run's lane), or the one thread.
    #[inline(always)]
    pub const fn thread_at(self, offset: u32) -> u32 {
        let per = match self.lanes() {
            SiteLanes::Single => return self.thread(),
            SiteLanes::Four => 4,
            SiteLanes::Eight => 8,
            SiteLanes::Sixteen => 16,
        };
        self.thread() + offset / per
    }

    /// Whether it describes `serial`'s access.
    #[inline(always)]
    pub const fn belongs_to(self, serial: Serial) -> bool {
        serial != NO_SERIAL && self.serial() == serial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_round_trip() {
        let d = AccessDesc::atomic(
            0xdead_beef,
            77,
            true,
            0b0110,
            Scope::Device,
            SizeClass::Eight,
            1,
        );
        assert_eq!(d.serial(), 0xdead_beef);
        assert_eq!(d.epoch(), 77);
        assert!(d.is_write() && d.is_atomic());
        assert_eq!(d.scope(), Scope::Device);
        assert_eq!(d.bytes(), 0b0110);
        assert_eq!(CellTag::of(CellTag::Inline.with(d.0)), CellTag::Inline);
        assert_eq!(AccessDesc(CellTag::Inline.with(d.0)).untagged(), d);
        assert_eq!(d.with_serial(5).key(), d.key());
        assert_ne!(d.with_bytes(1).key(), d.key());
        assert_eq!(d.with_epoch(MAX_EPOCH).epoch(), MAX_EPOCH);
        let p = AccessDesc::plain(3, 1, false, 0xf);
        assert!(!p.is_write() && !p.is_atomic() && p.scope() == Scope::Block);
        assert_eq!(CellTag::of(EMPTY_SPLIT), CellTag::Inline);
        assert!(AccessDesc(EMPTY_SPLIT).untagged().is_none());
    }

    #[test]
    fn line_words_round_trip() {
        let w = LineWrite::new(9, 3, 200);
        assert_eq!((w.serial(), w.epoch(), w.version()), (9, 3, 200));
        assert_eq!(CellTag::of(w.0), CellTag::Line);
        let r = LineRead::new(ReadKind::Launch, 12, MAX_EPOCH, 200);
        assert_eq!(r.kind(), ReadKind::Launch);
        assert_eq!((r.payload(), r.epoch(), r.version()), (12, MAX_EPOCH, 200));
        assert_eq!(LineRead::empty(7).kind(), ReadKind::Empty);
    }

    #[test]
    fn site_words_name_the_thread_of_each_byte() {
        let s = SiteWord::new(42, 0x7f00_1234_5678, 64, SiteLanes::Eight);
        assert!(s.belongs_to(42) && !s.belongs_to(43));
        assert_eq!(
            s.location_bits(),
            ((0x7f00_1234_5678u64 >> 3) & 0xf_ffff) as u32
        );
        assert_eq!(s.thread_at(0), 64);
        assert_eq!(s.thread_at(17), 66);
        assert_eq!(SiteWord::for_serial(s.site(), 42), s);
        assert!(!SiteWord::NONE.belongs_to(0));
    }
}
