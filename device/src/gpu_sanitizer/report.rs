//! The report buffer: a race found becomes a [`GpuReportRecord`] (the
//! current access in full, the earlier one as the shadow named it), pushed
//! into the launching context's host-mapped buffer. Pure atomics over
//! memory, so the host build tests it.
//!
//! The buffer's header counts claims (a full buffer's are counted, never
//! written) and, in its first reserved word, accesses whose check the
//! engine could not decide or whose history it could not keep (what the
//! host reports as bounded detection).

use core::sync::atomic::{AtomicU32, Ordering};

use vigil_shared::abi::ReportBufferHeader;
use vigil_shared::gpu::{GpuReportRecord, GpuRuntime};

/// Word of the report buffer's header counting bounded checks.
pub const BOUNDED_WORD: usize = 2;

/// A context's report buffer.
pub struct Reporter<'r> {
    reports: &'r [AtomicU32],
}

impl<'r> Reporter<'r> {
    /// The report buffer at `reports` of `rt.report_capacity` records.
    ///
    /// # Safety
    /// `reports` must hold a [`ReportBufferHeader`] and
    /// `rt.report_capacity` records (or be 0), live for `'r`.
    #[inline(always)]
    pub unsafe fn new(rt: &GpuRuntime, reports: u64) -> Self {
        let len = ReportBufferHeader::WORDS + rt.report_capacity as usize * GpuReportRecord::WORDS;
        let reports = if reports == 0 {
            &[][..]
        } else {
            // SAFETY: the caller guarantees the region.
            unsafe { core::slice::from_raw_parts(reports as *const AtomicU32, len) }
        };
        Reporter { reports }
    }

    /// True when no record fits any more: a race is then only counted.
    pub fn full(&self) -> bool {
        match self.reports {
            [next, cap, ..] => next.load(Ordering::Relaxed) >= cap.load(Ordering::Relaxed),
            _ => true,
        }
    }

    /// Appends a record; false when the buffer was full (the claim is
    /// still counted, so the host knows how many were dropped).
    pub fn push(&self, rec: &GpuReportRecord) -> bool {
        let w = self.reports;
        if w.len() < ReportBufferHeader::WORDS {
            return false;
        }
        let cap = w[1].load(Ordering::Relaxed) as usize;
        let i = w[0].fetch_add(1, Ordering::Relaxed) as usize;
        let at = ReportBufferHeader::WORDS + i * GpuReportRecord::WORDS;
        if i >= cap || at + GpuReportRecord::WORDS > w.len() {
            return false;
        }
        let src: &[u32; GpuReportRecord::WORDS] = bytemuck::cast_ref(rec);
        for (d, s) in w[at..].iter().zip(src) {
            d.store(*s, Ordering::Relaxed);
        }
        true
    }

    /// Counts a race that finds the buffer full, as [`Reporter::push`]
    /// counts its claims: the host reports how many were dropped.
    pub fn count_dropped(&self) {
        if let Some(next) = self.reports.first() {
            next.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an access whose check was bounded.
    pub fn count_bounded(&self) {
        if let Some(w) = self.reports.get(BOUNDED_WORD) {
            w.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn records_past_the_capacity_are_counted_not_written() {
        let rt = GpuRuntime {
            report_capacity: 2,
            ..GpuRuntime::default()
        };
        let buf: Vec<AtomicU32> = (0..ReportBufferHeader::WORDS + 2 * GpuReportRecord::WORDS)
            .map(|_| AtomicU32::new(0))
            .collect();
        buf[1].store(2, Ordering::Relaxed);
        // SAFETY: `buf` holds the header and two records.
        let rep = unsafe { Reporter::new(&rt, buf.as_ptr() as u64) };
        let mut r = GpuReportRecord::default();
        r.report.kind = 1;
        assert!(rep.push(&r) && rep.push(&r) && !rep.push(&r));
        assert!(rep.full());
        assert_eq!(buf[0].load(Ordering::Relaxed), 3);
        rep.count_bounded();
        assert_eq!(buf[BOUNDED_WORD].load(Ordering::Relaxed), 1);
        // SAFETY: no buffer at all.
        let none = unsafe { Reporter::new(&rt, 0) };
        assert!(!none.push(&r) && none.full());
    }
}
