//! The GPU sanitizer's [`ReportResolver`]: what the numbers in its records
//! mean. Locations and file names are read back from the module's device
//! memory (cached), or are host call sites of copies and fills (tags, see
//! `host_sites`), launches come from the sanitizer's launch history,
//! thread ids split into device, SM and slot, and addresses into the
//! shadow allocator's allocations. Reports then go through the shared
//! decoder, like the CPU backend's.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use vigil_shared::gpu::SlotPlace;

use super::host_sites::HostSites;
use super::location::{LocationCache, LocationLayout};
use crate::sanitizer::decode::{LaunchShape, ReportResolver, ThreadPlace};
use crate::sanitizer::report::SourceLocation;

/// Launches remembered for naming kernels and blocks in reports.
const LAUNCH_HISTORY: usize = 4096;

/// The last [`LAUNCH_HISTORY`] launches by launch id.
/// (Each with the context that launched it, whose reports they are.)
#[derive(Debug, Default)]
pub(crate) struct LaunchHistory {
    by_id: HashMap<u32, (u64, LaunchShape)>,
    order: VecDeque<u32>,
}

impl LaunchHistory {
    /// Remembers launch `id` by context `owner`.
    pub fn insert(&mut self, id: u32, owner: u64, shape: LaunchShape) {
        if self.order.len() == LAUNCH_HISTORY {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
        self.order.push_back(id);
        self.by_id.insert(id, (owner, shape));
    }

    /// Launch `id`'s shape, if still remembered.
    pub fn shape(&self, id: u32) -> Option<&LaunchShape> {
        self.by_id.get(&id).map(|(_, s)| s)
    }

    /// The context that made launch `id`, if still remembered.
    pub fn owner(&self, id: u32) -> Option<u64> {
        self.by_id.get(&id).map(|(o, _)| *o)
    }
}

/// Resolves one collection's records.
pub(crate) struct GpuResolver<'a> {
    /// SMs per device.
    pub num_sms: u32,
    /// Slots per SM.
    pub slots: u32,
    /// Launches by id.
    pub launches: &'a LaunchHistory,
    /// Launches of the other devices of this device's group that the
    /// records name (launch ids are unique in the process).
    pub elsewhere: &'a HashMap<u32, LaunchShape>,
    /// How a `Location` is laid out (`None`: earlier locations unknown).
    pub layout: Option<LocationLayout>,
    /// Locations and file names read so far.
    pub locations: RefCell<&'a mut LocationCache>,
    /// Call sites of host-issued copies and fills, by tag.
    pub host_sites: &'a HostSites,
    /// Reads device memory.
    pub read: &'a dyn Fn(u64, usize) -> Option<Vec<u8>>,
    /// The allocation holding an address: `(base, size)`.
    pub allocation: &'a dyn Fn(u64) -> Option<(u64, u64)>,
}

impl ReportResolver for GpuResolver<'_> {
    fn location(&self, location: u64) -> Option<SourceLocation> {
        if HostSites::is_tag(location) {
            return self.host_sites.location(location);
        }
        let mut read = |a: u64, l: usize| (self.read)(a, l);
        self.locations
            .borrow_mut()
            .location(location, self.layout, &mut read)
    }

    fn file_name(&self, ptr: u64, len: u32) -> Option<String> {
        if HostSites::is_tag(ptr) {
            return self.host_sites.file(ptr);
        }
        let mut read = |a: u64, l: usize| (self.read)(a, l);
        self.locations
            .borrow_mut()
            .file(ptr, len as usize, &mut read)
    }

    fn launch(&self, launch: u32) -> Option<LaunchShape> {
        self.launches
            .shape(launch)
            .or_else(|| self.elsewhere.get(&launch))
            .cloned()
    }

    fn place(&self, tid: u32) -> ThreadPlace {
        let p = SlotPlace::of(tid, self.num_sms, self.slots);
        ThreadPlace {
            device: p.device,
            sm: Some(p.sm),
        }
    }

    fn allocation(&self, address: u64) -> Option<(u64, u64)> {
        (self.allocation)(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitizer::decode::{decode_report, PriorSite};
    use crate::types::Dim3;
    use std::panic::Location;
    use vigil_shared::abi::{AccessSite, RaceReport as RawReport, ReportKind};
    use vigil_shared::gpu::slot_tid;
    use vigil_shared::{AccessKind, Scope};

    const SMS: u32 = 132;
    const SLOTS: u32 = 15;

    /// Device memory simulated by host memory (a tag is never read).
    fn host_memory(addr: u64, len: usize) -> Option<Vec<u8>> {
        assert!(!HostSites::is_tag(addr), "a tag read as device memory");
        // SAFETY: the tests only pass addresses of live host data.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec())
    }

    /// A resolver for an H100's SMs and slots over host memory.
    fn resolver<'a>(
        launches: &'a LaunchHistory,
        cache: &'a mut LocationCache,
        host_sites: &'a HostSites,
        allocation: &'a dyn Fn(u64) -> Option<(u64, u64)>,
    ) -> GpuResolver<'a> {
        GpuResolver {
            num_sms: SMS,
            slots: SLOTS,
            launches,
            // A test's few bytes, for the test's whole run.
            elsewhere: Box::leak(Box::default()),
            layout: LocationLayout::probe(),
            locations: RefCell::new(cache),
            host_sites,
            read: &host_memory,
            allocation,
        }
    }

    /// A GPU record decodes to both accesses' device, SM, block, thread and
    /// location, device memory simulated by host memory.
    #[test]
    fn a_gpu_record_names_both_accesses() {
        let (sms, slots) = (SMS, SLOTS);
        let mut launches = LaunchHistory::default();
        let shape = |k: &str| LaunchShape {
            kernel: k.to_owned(),
            grid: Dim3::new(4, 2, 1),
            block: Dim3::new(32, 2, 1),
            host_issued: false,
        };
        launches.insert(7, 1, shape("writer"));
        launches.insert(8, 2, shape("reader"));
        assert_eq!((launches.owner(7), launches.owner(9)), (Some(1), None));
        let prior_loc = Location::caller();
        let file = "kernels/src/races.rs";
        let raw = RawReport {
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
        };
        let prior = PriorSite {
            location: prior_loc as *const Location<'_> as u64,
            tid: raw.prior_tid,
            block: 1,
            thread: 2,
            launch: 7,
            sm: None,
        };
        let mut cache = LocationCache::default();
        let sites = HostSites::default();
        let resolver = resolver(&launches, &mut cache, &sites, &|_| Some((0x1000_0000, 64)));
        let r = decode_report(&raw, Some(&prior), &resolver).unwrap();
        assert_eq!(r.kind, ReportKind::ReadAfterWrite);
        assert_eq!(r.kernel, "reader");
        assert_eq!(r.allocation.unwrap().offset, 0x10);
        assert_eq!((r.current.device, r.current.smid), (0, 3));
        assert_eq!(r.current.block, Dim3::new(1, 1, 0));
        assert_eq!(r.current.thread, Dim3::new(1, 1, 0));
        let cur = r.current.location.unwrap();
        assert_eq!((cur.file.as_str(), cur.line, cur.column), (file, 12, 5));
        assert_eq!((r.prior.smid, r.prior.epoch), (Some(130), 3));
        assert_eq!(r.prior.kernel.as_deref(), Some("writer"));
        assert_eq!(r.prior.block, Some(Dim3::new(1, 0, 0)));
        assert_eq!(r.prior.thread, Some(Dim3::new(2, 0, 0)));
        assert_eq!(r.prior.location, Some(SourceLocation::from_std(prior_loc)));
    }

    /// A range check's record: the copy's side is named by its transfer
    /// and host call site (a tag, not device memory), on no SM, whichever
    /// side of the race it is.
    #[test]
    fn a_host_issued_side_is_named_by_its_call_site() {
        let (sms, slots) = (SMS, SLOTS);
        let one = Dim3::new(1, 1, 1);
        let mut launches = LaunchHistory::default();
        let shape = |k: &str, host_issued| LaunchShape {
            kernel: k.to_owned(),
            grid: one,
            block: one,
            host_issued,
        };
        launches.insert(3, 1, shape("memset on stream #4", true));
        launches.insert(4, 1, shape("write_one", false));
        let mut sites = HostSites::default();
        let call = Location::caller();
        let tag = sites.tag(call);
        let kernel_loc = Location::caller();
        let mut cache = LocationCache::default();
        let resolver = resolver(&launches, &mut cache, &sites, &|_| None);
        let file = kernel_loc.file();
        let (copy_tid, kernel_tid) = (slot_tid(0, 5, sms, slots, 0), slot_tid(0, 9, sms, slots, 1));
        // The copy is the current access; the kernel wrote before.
        let raw = RawReport {
            kind: ReportKind::WriteAfterWrite as u32,
            size: 4,
            address: 0x1000,
            site: AccessSite {
                file_ptr: tag,
                file_len: 0,
                line: call.line(),
                col: call.column(),
                kernel_id: 3,
                ..AccessSite::default()
            },
            tid: copy_tid,
            access: RawReport::pack_access(AccessKind::Write, Scope::Block),
            prior_tid: kernel_tid,
            prior_access: RawReport::pack_access(AccessKind::Write, Scope::Block),
            ..RawReport::default()
        };
        let kernel_prior = PriorSite {
            location: kernel_loc as *const Location<'_> as u64,
            tid: kernel_tid,
            launch: 4,
            ..PriorSite::default()
        };
        let r = decode_report(&raw, Some(&kernel_prior), &resolver).unwrap();
        assert_eq!(r.kernel, "memset on stream #4");
        assert!(r.current.host_issued && !r.prior.host_issued);
        assert_eq!(r.current.location, Some(SourceLocation::from_std(call)));
        assert_eq!(r.prior.kernel.as_deref(), Some("write_one"));
        assert_eq!(r.prior.smid, Some(9));
        assert_eq!(r.prior.location.as_ref().unwrap().file, file);
        assert!(r
            .to_string()
            .contains("the host-issued memset on stream #4"));
        // The kernel is the current access; the copy came first.
        let raw = RawReport {
            site: AccessSite {
                file_ptr: file.as_ptr() as u64,
                file_len: file.len() as u32,
                line: kernel_loc.line(),
                col: kernel_loc.column(),
                kernel_id: 4,
                ..AccessSite::default()
            },
            tid: kernel_tid,
            prior_tid: copy_tid,
            ..raw
        };
        let copy_prior = PriorSite {
            location: tag,
            tid: copy_tid,
            launch: 3,
            ..PriorSite::default()
        };
        let r = decode_report(&raw, Some(&copy_prior), &resolver).unwrap();
        assert_eq!(r.kernel, "write_one");
        assert!(r.prior.host_issued && !r.current.host_issued);
        assert_eq!(r.prior.kernel.as_deref(), Some("memset on stream #4"));
        assert_eq!(r.prior.location, Some(SourceLocation::from_std(call)));
        assert_eq!(r.prior.smid, None, "a copy runs on no SM");
        assert!(r
            .to_string()
            .contains("the host-issued memset on stream #4"));
    }
}
