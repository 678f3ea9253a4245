//! Race and error records: classification and the lock-free report buffer.
//!
//! The buffer is a [`ReportBufferHeader`] followed by [`RaceReport`]
//! records. A writer claims a slot with one `fetch_add` on `count` and fills
//! it; claims past `capacity` are counted but dropped. The host reads the
//! buffer after synchronising with the kernels that wrote it.

use core::sync::atomic::Ordering as MemOrder;

use crate::abi::{AccessSite, RaceReport, ReportBufferHeader, ReportKind};
use crate::atomic::{AtomicFamily, AtomicU32Ops};
use crate::memory_model::{AccessKind, Scope};
use crate::shadow::AccessClock;

/// The memory-model kind of a recorded access.
pub fn access_kind(a: &AccessClock, rmw: bool) -> AccessKind {
    match (a.atomic, a.write) {
        (false, false) => AccessKind::Read,
        (false, true) => AccessKind::Write,
        (true, false) => AccessKind::AtomicRead,
        (true, true) if rmw => AccessKind::AtomicRmw,
        (true, true) => AccessKind::AtomicWrite,
    }
}

/// Classifies a race between an earlier access and the current one.
pub fn classify(prior: &AccessClock, current: &AccessClock) -> ReportKind {
    if prior.atomic != current.atomic {
        ReportKind::AtomicNonAtomic
    } else if prior.atomic && prior.extent != current.extent {
        ReportKind::AtomicSizeMismatch
    } else if prior.atomic {
        ReportKind::ScopeMismatch
    } else if prior.write && current.write {
        ReportKind::WriteAfterWrite
    } else if prior.write {
        ReportKind::ReadAfterWrite
    } else {
        ReportKind::WriteAfterRead
    }
}

/// Identity of the current access, as the hooks know it.
#[derive(Clone, Copy, Debug)]
pub struct CurrentAccess<'s> {
    /// Address of the access.
    pub address: u64,
    /// Bytes.
    pub size: u32,
    /// Sanitizer thread.
    pub tid: u32,
    /// SMs per device (to split `tid` into device and SM).
    pub num_sms: u32,
    /// Memory-model kind.
    pub kind: AccessKind,
    /// Scope (atomics).
    pub scope: Scope,
    /// Source site.
    pub site: &'s AccessSite,
}

impl CurrentAccess<'_> {
    fn base(&self, kind: ReportKind, epoch: u32) -> RaceReport {
        let sms = self.num_sms.max(1);
        RaceReport {
            kind: kind as u32,
            size: self.size,
            address: self.address,
            site: *self.site,
            tid: self.tid,
            device: self.tid / sms,
            sm: self.tid % sms,
            epoch,
            access: RaceReport::pack_access(self.kind, self.scope),
            ..RaceReport::default()
        }
    }

    /// A race record naming the earlier access; `address` is the first
    /// byte both accesses touch (`current` and `prior` are their clocks on
    /// that byte's word).
    pub fn race(
        &self,
        address: u64,
        epoch: u32,
        prior: &AccessClock,
        current: &AccessClock,
    ) -> RaceReport {
        let mut r = self.base(classify(prior, current), epoch);
        r.address = address;
        r.prior_tid = prior.tid;
        r.prior_epoch = prior.epoch;
        r.prior_access = RaceReport::pack_access(access_kind(prior, false), prior.scope);
        r.overlap_mask = (prior.mask & current.mask) as u32;
        r
    }

    /// An error record.
    pub fn error(&self, kind: ReportKind, epoch: u32, detail: u32) -> RaceReport {
        let mut r = self.base(kind, epoch);
        r.detail = detail;
        r
    }
}

/// Appends `r` to the report buffer in `words` (empty slice: no buffer).
/// Returns false when the record was dropped for lack of room.
pub fn push_report<F: AtomicFamily>(words: &[F::U32], r: &RaceReport) -> bool {
    if words.len() < ReportBufferHeader::WORDS {
        return false;
    }
    let cap = words[1].load(MemOrder::Relaxed) as usize;
    let i = words[0].fetch_add(1, MemOrder::Relaxed) as usize;
    let at = ReportBufferHeader::WORDS + i * RaceReport::WORDS;
    if i >= cap || at + RaceReport::WORDS > words.len() {
        return false;
    }
    let src: &[u32; RaceReport::WORDS] = bytemuck::cast_ref(r);
    for (k, v) in src.iter().enumerate() {
        words[at + k].store(*v, MemOrder::Relaxed);
    }
    true
}

/// Reads record `i` back (host side, after synchronisation).
pub fn read_report<F: AtomicFamily>(words: &[F::U32], i: usize) -> Option<RaceReport> {
    let at = ReportBufferHeader::WORDS + i * RaceReport::WORDS;
    if at + RaceReport::WORDS > words.len() || i >= reports_written::<F>(words) {
        return None;
    }
    let mut out = [0u32; RaceReport::WORDS];
    for (k, v) in out.iter_mut().enumerate() {
        *v = words[at + k].load(MemOrder::Relaxed);
    }
    Some(bytemuck::cast(out))
}

/// Records actually stored (claims beyond capacity excluded).
pub fn reports_written<F: AtomicFamily>(words: &[F::U32]) -> usize {
    if words.len() < ReportBufferHeader::WORDS {
        return 0;
    }
    let n = words[0].load(MemOrder::Relaxed) as usize;
    let cap = words[1].load(MemOrder::Relaxed) as usize;
    n.min(cap)
        .min((words.len() - ReportBufferHeader::WORDS) / RaceReport::WORDS)
}
