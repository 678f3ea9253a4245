//! The race engine: who accessed what, and whether two accesses race.
//!
//! Every CTA of a sanitized launch is one sanitizer thread, named by a
//! serial the host hands out ([`serial`]); the host decides which
//! launches are ordered before which and tells each launch as per-lane
//! bounds, so a CTA checks "did this earlier access happen before me?"
//! with one comparison in the common case ([`cta`]). Knowledge a CTA
//! gains by synchronising with other CTAs through memory is built only
//! when it acquires, as sorted serial intervals ([`knowledge`], [`sync`]).
//!
//! The shadow of each 128-byte line is 32 eight-byte cells (two bytes of
//! shadow per byte of data). A line that warps access whole keeps one
//! header in its first four cells ([`line`](mod@line)): the last write, the reads
//! since, and both sites; a warp's whole-line access checks it with one
//! load and changes it with at most one compare-exchange. Any other
//! access splits the line into per-word cells ([`word`]), each holding one
//! access inline or naming a pool record ([`record`], [`entries`]) with
//! the word's last write, its release heads and the other accesses still
//! worth remembering. Atomics lock their words' records around the real
//! operation, or hold a record shared when the operation would change
//! nothing in it (a hot word's atomics: [`atomic`]).
//!
//! The rules ([`check`]): two accesses to overlapping bytes race when
//! one writes, they are not morally strong atomics, and the earlier does
//! not happen before the later. What the engine cannot decide exactly it
//! counts and does not report: it may then miss a race, never invent one.
//!
//! Layout of the memory it works on: [`memory`]; the 64-bit words:
//! [`desc`].
//!
//! Code size is a cost of its own on the GPU: the driver compiles a
//! kernel's sanitized entry with everything it calls at the kernel's
//! first sanitized launch. Only the common cases (`line::line_fast`,
//! `access_word_fast`) are inlined into the hooks; the general paths and
//! what they share (a record's steps, entry lists, head reads and joins,
//! snapshot merges, record locks) are `#[inline(never)]`, one copy each
//! per module, which cut ptxas's time on a kernel's call graph several
//! times over (`benches/results/`).

pub mod atomic;
pub mod check;
pub mod cta;
pub mod desc;
pub mod entries;
pub mod knowledge;
pub mod line;
pub mod memory;
pub mod reclaim;
pub mod record;
pub mod serial;
pub mod sync;
pub mod word;

pub use check::RaceFound;
pub use cta::{CtaView, LaneDevices, OwnReleases};
pub use desc::{AccessDesc, SiteLanes, SiteWord};
pub use memory::{RaceMemory, SliceMemory};
pub use serial::{HostOrder, LaneBounds, Serial};

use crate::memory_model::Scope;

/// A plain access of `size` bytes starting at byte `offset` of word
/// `first` (a read through a read-only view when `read_only`), checked
/// word by word; returns the first race.
#[allow(clippy::too_many_arguments)]
pub fn access<M: RaceMemory + ?Sized>(
    mem: &M,
    cta: &CtaView<'_>,
    first: u64,
    offset: u32,
    size: u32,
    write: bool,
    read_only: bool,
    site: SiteWord,
    bounded: &mut bool,
) -> Option<RaceFound> {
    let n = (offset + size.max(1)).div_ceil(4);
    let mut race = None;
    for k in 0..n {
        let bytes = atomic::word_bytes(offset, size, k);
        let mut me = AccessDesc::plain(cta.serial, cta.epoch, write, bytes);
        if read_only && !write {
            me = AccessDesc(me.0 | entries::LAUNCH);
        }
        let r = word::access_word(
            mem,
            cta,
            first + u64::from(k),
            me,
            Scope::Block,
            site,
            bounded,
        );
        race = race.or(r);
    }
    race
}
