//! Races the engine found, as reports: the current access's record
//! ([`RawReport`]) and the earlier access's site, through the decoder both
//! backends share. The earlier access is named by its serial: its launch
//! (the history by serial range) and block (the serial less the launch's
//! first), and by its site word: its thread and `Location` (the location
//! table). [`CpuResolver`] says what the numbers mean.

use super::cta::Cta;
use super::{lock, CpuRaceSanitizer};
use crate::sanitizer::decode::{
    decode_report, LaunchShape, PriorSite, ReportResolver, ThreadPlace,
};
use crate::sanitizer::launches::LaunchHistory;
use crate::sanitizer::report::SourceLocation;
use std::panic::Location;
use std::sync::atomic::Ordering as MemOrder;
use vigil_device::host_runtime::ThreadContext;
use vigil_shared::abi::{AccessSite, RaceReport as RawReport};
use vigil_shared::race::line::LINE_BYTES;
use vigil_shared::race::serial::Serial;
use vigil_shared::race::RaceFound;
use vigil_shared::{AccessKind, Scope};

/// The access that found a race.
pub(super) struct Current<'a> {
    /// Its CTA.
    pub(super) cta: &'a Cta,
    /// Its thread (linear index in the block).
    pub(super) thread: u32,
    /// The virtual SM it ran on.
    pub(super) smid: u32,
    /// Where it was made.
    pub(super) loc: &'static Location<'static>,
    /// What it did, at which scope, on how many bytes.
    pub(super) access: AccessKind,
    pub(super) scope: Scope,
    pub(super) size: u32,
}

impl<'a> Current<'a> {
    /// The access of `size` bytes of thread `t` of `cta` at `loc`.
    pub(super) fn of_thread(
        cta: &'a Cta,
        t: &ThreadContext<'_>,
        loc: &'static Location<'static>,
        access: AccessKind,
        scope: Scope,
        size: usize,
    ) -> Self {
        Current {
            cta,
            thread: t.linear_thread_index(),
            smid: t.smid,
            loc,
            access,
            scope,
            size: size as u32,
        }
    }
}

impl CpuRaceSanitizer {
    /// Turns a race the engine found into a report (through the shared
    /// decoder) and keeps it, or counts it when the buffer is full.
    #[cold]
    #[inline(never)]
    pub(super) fn report_race(&self, r: RaceFound, c: &Current<'_>) {
        if lock(&self.reports).len() >= self.report_capacity {
            self.dropped.fetch_add(1, MemOrder::Relaxed);
            return;
        }
        let file = c.loc.file();
        let first_byte = r.overlap.trailing_zeros().min(3);
        let raw = RawReport {
            kind: r.kind as u32,
            size: c.size,
            address: self.shared.mem.arena.real_base() + 4 * r.word + u64::from(first_byte),
            site: AccessSite {
                file_ptr: file.as_ptr() as u64,
                file_len: file.len() as u32,
                line: c.loc.line(),
                col: c.loc.column(),
                view_site: 0,
                kernel_id: c.cta.launch.id,
                block: c.cta.block,
                thread: c.thread,
                prior_view_site: 0,
            },
            tid: c.cta.serial,
            device: self.rank,
            sm: c.smid,
            epoch: u32::from(c.cta.sync().epoch()),
            access: RawReport::pack_access(c.access, c.scope),
            prior_tid: r.prior.serial(),
            prior_epoch: u32::from(r.prior.epoch()),
            prior_access: RawReport::pack_access(r.prior.access_kind(), r.prior.scope()),
            overlap_mask: u32::from(r.overlap),
            detail: 0,
        };
        let launches = lock(&self.shared.launches);
        let prior = self.prior_site(&launches, &r);
        let resolver = CpuResolver {
            sanitizer: self,
            launches: &launches,
            current: (c.cta.serial, c.smid),
        };
        let report = decode_report(&raw, prior.as_ref(), &resolver).map(|mut report| {
            if r.prior_site == vigil_shared::race::SiteWord::NONE {
                // The earlier site was overwritten: its thread is unknown.
                report.prior.thread = None;
            }
            report
        });
        drop(launches);
        let mut reports = lock(&self.reports);
        match report {
            Some(report) if reports.len() < self.report_capacity => reports.push(report),
            _ => {
                self.dropped.fetch_add(1, MemOrder::Relaxed);
            }
        }
    }

    /// The earlier access of `r` as the decoder takes it: its launch and
    /// block from its serial, its thread and location from its site word
    /// (when it still has one). `None` when its launch is forgotten.
    fn prior_site(&self, launches: &LaunchHistory<u32>, r: &RaceFound) -> Option<PriorSite> {
        let serial = r.prior.serial();
        let (launch, l) = launches.of_serial(serial)?;
        let site = r.prior_site;
        let known = site.belongs_to(serial);
        let location = known
            .then(|| self.shared.locations.get(site.location_bits()))
            .flatten()
            .map_or(0, |loc| loc as *const Location<'static> as u64);
        // The byte of the line the race is on, which names the lane of a
        // warp's whole-line access.
        let offset = ((r.word * 4) % LINE_BYTES) as u32 + r.overlap.trailing_zeros().min(3);
        let kernel = !l.shape.host_issued;
        Some(PriorSite {
            location,
            tid: serial,
            block: if kernel { serial - l.base } else { 0 },
            thread: if kernel && known {
                site.thread_at(offset)
            } else {
                0
            },
            launch,
            sm: None,
        })
    }
}

/// Resolves one report's numbers (built per report, under the launch
/// history's lock).
struct CpuResolver<'a> {
    sanitizer: &'a CpuRaceSanitizer,
    launches: &'a LaunchHistory<u32>,
    /// The reporting access's serial and the virtual SM it ran on (what
    /// an earlier access ran on is not kept).
    current: (Serial, u32),
}

impl ReportResolver for CpuResolver<'_> {
    fn location(&self, location: u64) -> Option<SourceLocation> {
        if location == 0 {
            return None;
        }
        // SAFETY: the only source of these addresses is the location
        // table (`CpuRaceSanitizer::prior_site`), which holds addresses of
        // `&'static Location<'static>` values.
        let l: &'static Location<'static> = unsafe { &*(location as *const Location<'static>) };
        Some(SourceLocation::from_std(l))
    }

    fn file_name(&self, ptr: u64, len: u32) -> Option<String> {
        if ptr == 0 {
            return None;
        }
        // SAFETY: the CPU sanitizer's records, the only source of these,
        // take `file_ptr`/`file_len` from a `&'static Location`'s file
        // name (`report_race`): live, UTF-8, `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }

    fn launch(&self, launch: u32) -> Option<LaunchShape> {
        self.launches.get(launch).map(|r| r.shape.clone())
    }

    fn place(&self, tid: u32) -> ThreadPlace {
        if tid == self.current.0 {
            return ThreadPlace {
                device: self.sanitizer.rank,
                sm: Some(self.current.1),
            };
        }
        ThreadPlace {
            device: self.launches.of_serial(tid).map_or(0, |(_, l)| l.extra),
            sm: None,
        }
    }

    fn allocation(&self, address: u64) -> Option<(u64, u64)> {
        self.sanitizer
            .allocation_of(address)
            .map(|a| (a.address, a.size))
    }
}
