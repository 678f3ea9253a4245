//! Turns the GPU sanitizer's report records into the same [`RaceReport`]s
//! the CPU backend produces (design 3.3): kind, address, allocation,
//! kernel, and both accesses with device, SM, block, thread and source
//! location. Pure: device memory is read through a callback, so the
//! decoding is tested without a GPU.

use std::collections::{HashMap, VecDeque};

use vigil_shared::abi::ReportKind;
use vigil_shared::gpu::{unpack_access, GpuReportRecord, SlotPlace};

use super::location::{LocationCache, LocationLayout};
use crate::sanitizer::report::{PriorAccess, RaceAccess, RaceAllocation, RaceReport};
use crate::types::Dim3;

/// Launches remembered for naming kernels and blocks in reports.
const LAUNCH_HISTORY: usize = 4096;

/// What a report needs to know about a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchRecord {
    /// Kernel name (the plain entry's).
    pub kernel: String,
    /// Grid extent.
    pub grid: Dim3,
    /// Block extent.
    pub block: Dim3,
}

/// The last [`LAUNCH_HISTORY`] launches by launch id.
#[derive(Debug, Default)]
pub(crate) struct LaunchHistory {
    by_id: HashMap<u32, LaunchRecord>,
    order: VecDeque<u32>,
}

impl LaunchHistory {
    /// Remembers launch `id`.
    pub fn insert(&mut self, id: u32, rec: LaunchRecord) {
        if self.order.len() == LAUNCH_HISTORY {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
        self.order.push_back(id);
        self.by_id.insert(id, rec);
    }

    /// Launch `id`, if still remembered.
    pub fn get(&self, id: u32) -> Option<&LaunchRecord> {
        self.by_id.get(&id)
    }
}

/// Everything decoding needs besides the record.
pub(crate) struct Decoder<'a> {
    /// SMs per device.
    pub num_sms: u32,
    /// Slots per SM.
    pub slots: u32,
    /// Launches by id.
    pub launches: &'a LaunchHistory,
    /// The `Location` layout (`None`: earlier locations are not resolved).
    pub layout: Option<LocationLayout>,
    /// Cached locations.
    pub locations: &'a mut LocationCache,
    /// Reads device memory.
    pub read: &'a mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    /// The allocation holding an address.
    pub allocation: &'a dyn Fn(u64) -> Option<RaceAllocation>,
}

impl Decoder<'_> {
    /// The report a record describes (`None` for an unknown kind).
    pub fn decode(&mut self, rec: &GpuReportRecord) -> Option<RaceReport> {
        let r = &rec.report;
        let kind = ReportKind::from_u32(r.kind)?;
        let launch = self.launches.get(r.site.kernel_id);
        let here = SlotPlace::of(r.tid, self.num_sms, self.slots);
        let (access, scope) = unpack_access(r.access);
        let current = RaceAccess {
            access,
            scope,
            device: here.device,
            smid: here.sm,
            block: Dim3::from_linear(
                u64::from(r.site.block),
                launch.map_or(Dim3::new(0, 0, 0), |l| l.grid),
            ),
            thread: Dim3::from_linear(
                u64::from(r.site.thread),
                launch.map_or(Dim3::new(0, 0, 0), |l| l.block),
            ),
            location: self.locations.site(
                r.site.file_ptr,
                r.site.file_len as usize,
                r.site.line,
                r.site.col,
                self.read,
            ),
        };
        let there = SlotPlace::of(r.prior_tid, self.num_sms, self.slots);
        let (prior_access, prior_scope) = unpack_access(r.prior_access);
        let mut prior = PriorAccess {
            access: prior_access,
            scope: prior_scope,
            tid: r.prior_tid,
            device: there.device,
            smid: there.sm,
            epoch: r.prior_epoch,
            block: None,
            thread: None,
            kernel: None,
            location: None,
        };
        let side = &rec.prior;
        if !kind.is_error() && side.location != 0 {
            prior.location = self
                .locations
                .location(side.location, self.layout, self.read);
            if let Some(l) = self.launches.get(side.launch) {
                prior.block = Some(Dim3::from_linear(u64::from(side.block), l.grid));
                prior.thread = Some(Dim3::from_linear(u64::from(side.thread), l.block));
                prior.kernel = Some(l.kernel.clone());
            }
        }
        Some(RaceReport {
            kind,
            address: r.address,
            size: r.size,
            allocation: (self.allocation)(r.address),
            kernel: launch.map_or_else(
                || format!("launch #{}", r.site.kernel_id),
                |l| l.kernel.clone(),
            ),
            current,
            prior,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;
    use vigil_shared::abi::{AccessSite, RaceReport as RawReport};
    use vigil_shared::gpu::{slot_tid, SideEntry};
    use vigil_shared::{AccessKind, Scope};

    /// A record decodes to both accesses' device, SM, block, thread and
    /// location, with device memory simulated by host memory.
    #[test]
    fn a_record_names_both_accesses() {
        let (sms, slots) = (132, 15);
        let mut launches = LaunchHistory::default();
        let rec = |k: &str| LaunchRecord {
            kernel: k.to_owned(),
            grid: Dim3::new(4, 2, 1),
            block: Dim3::new(32, 2, 1),
        };
        launches.insert(7, rec("writer"));
        launches.insert(8, rec("reader"));
        let prior_loc = Location::caller();
        let file = "kernels/src/races.rs";
        let raw = GpuReportRecord {
            report: RawReport {
                kind: ReportKind::ReadAfterWrite as u32,
                size: 4,
                address: 0x1000_0010,
                site: AccessSite {
                    file_ptr: file.as_ptr() as u64,
                    file_len: file.len() as u32,
                    line: 12,
                    col: 5,
                    kernel_id: 8,
                    block: 5,
                    thread: 33,
                    ..AccessSite::default()
                },
                tid: slot_tid(0, 3, sms, slots, 2),
                access: RawReport::pack_access(AccessKind::Read, Scope::Block),
                prior_tid: slot_tid(0, 130, sms, slots, 14),
                prior_epoch: 3,
                prior_access: RawReport::pack_access(AccessKind::Write, Scope::Block),
                ..RawReport::default()
            },
            prior: SideEntry {
                location: prior_loc as *const Location<'_> as u64,
                block: 1,
                thread: 2,
                launch: 7,
                ..SideEntry::default()
            },
        };
        let mut read = |addr: u64, len: usize| {
            // SAFETY: the test only passes addresses of live host data.
            Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec())
        };
        let mut cache = LocationCache::default();
        let mut d = Decoder {
            num_sms: sms,
            slots,
            launches: &launches,
            layout: LocationLayout::probe(),
            locations: &mut cache,
            read: &mut read,
            allocation: &|a| {
                Some(RaceAllocation {
                    base: 0x1000_0000,
                    size: 64,
                    offset: a - 0x1000_0000,
                })
            },
        };
        let r = d.decode(&raw).unwrap();
        assert_eq!(r.kind, ReportKind::ReadAfterWrite);
        assert_eq!(r.kernel, "reader");
        assert_eq!(r.allocation.unwrap().offset, 0x10);
        assert_eq!((r.current.device, r.current.smid), (0, 3));
        assert_eq!(r.current.block, Dim3::new(1, 1, 0));
        assert_eq!(r.current.thread, Dim3::new(1, 1, 0));
        let cur = r.current.location.unwrap();
        assert_eq!((cur.file.as_str(), cur.line, cur.column), (file, 12, 5));
        assert_eq!((r.prior.smid, r.prior.epoch), (130, 3));
        assert_eq!(r.prior.kernel.as_deref(), Some("writer"));
        assert_eq!(r.prior.block, Some(Dim3::new(1, 0, 0)));
        assert_eq!(r.prior.thread, Some(Dim3::new(2, 0, 0)));
        assert_eq!(
            r.prior.location,
            Some(crate::sanitizer::report::SourceLocation::from_std(
                prior_loc
            ))
        );
    }
}
