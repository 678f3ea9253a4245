//! The GPU sanitizer's [`ReportResolver`]: what the numbers in its records
//! mean. Locations and file names are read back from the module's device
//! memory (cached), or are host call sites of copies and fills (tags, see
//! `host_sites`); launches and blocks come from the sanitizer's launch
//! history, by launch id or by serial; addresses from the shadow
//! allocator's allocations. Reports then go through the shared decoder,
//! like the CPU backend's.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};

use vigil_shared::abi::RaceReport as RawReport;
use vigil_shared::gpu::{PriorRecord, LAUNCH_RECORD_BYTES, LAUNCH_RING_SLOTS};
use vigil_shared::race::desc::{AccessDesc, SiteWord, LOCATION_BITS};
use vigil_shared::race::memory::launch_record;
use vigil_shared::race::serial::{lane_of, Serial};
use vigil_shared::race::LaneDevices;

use super::host_sites::HostSites;
use super::location::{LocationCache, LocationLayout};
use crate::sanitizer::decode::{LaunchShape, PriorSite, ReportResolver, ThreadPlace};
use crate::sanitizer::report::SourceLocation;

/// Launches remembered for naming kernels and blocks in reports.
const LAUNCH_HISTORY: usize = 4096;

/// One remembered launch.
#[derive(Clone, Debug)]
struct Remembered {
    owner: u64,
    shape: LaunchShape,
    base: Serial,
    count: u32,
    /// A copy's or fill's call-site tag.
    host_site: Option<u64>,
    /// Its number in the launch ring.
    ring: u32,
}

/// The launch a serial belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SerialLaunch {
    /// Its launch id.
    pub id: u32,
    /// Its first serial.
    pub base: Serial,
    /// A copy's or fill's call-site tag.
    pub host_site: Option<u64>,
    /// Its number in the launch ring.
    pub ring: u32,
}

/// The last [`LAUNCH_HISTORY`] launches, by launch id and by serial.
/// (Each with the context that launched it, whose reports they are.)
#[derive(Debug, Default)]
pub(crate) struct LaunchHistory {
    by_id: HashMap<u32, Remembered>,
    by_base: BTreeMap<Serial, u32>,
    order: VecDeque<u32>,
}

impl LaunchHistory {
    /// Remembers launch `id` by context `owner`, of serials `base..base +
    /// count` (a copy's or fill's call site `host_site`), number `ring` in
    /// the launch ring.
    #[allow(clippy::too_many_arguments)] // a launch's parts, as the planner has them
    pub fn insert(
        &mut self,
        id: u32,
        owner: u64,
        shape: LaunchShape,
        base: Serial,
        count: u32,
        host_site: Option<u64>,
        ring: u32,
    ) {
        if self.order.len() == LAUNCH_HISTORY {
            if let Some(old) = self.order.pop_front() {
                if let Some(r) = self.by_id.remove(&old) {
                    self.by_base.remove(&r.base);
                }
            }
        }
        self.order.push_back(id);
        self.by_base.insert(base, id);
        self.by_id.insert(
            id,
            Remembered {
                owner,
                shape,
                base,
                count,
                host_site,
                ring,
            },
        );
    }

    /// Launch `id`'s shape, if still remembered.
    pub fn shape(&self, id: u32) -> Option<&LaunchShape> {
        self.by_id.get(&id).map(|r| &r.shape)
    }

    /// The context that made launch `id`, if still remembered.
    pub fn owner(&self, id: u32) -> Option<u64> {
        self.by_id.get(&id).map(|r| r.owner)
    }

    /// The launch serial `s` belongs to, if still remembered.
    pub fn of_serial(&self, s: Serial) -> Option<SerialLaunch> {
        let (_, &id) = self.by_base.range(..=s).next_back()?;
        let r = self.by_id.get(&id)?;
        (s.wrapping_sub(r.base) < r.count.max(1)).then_some(SerialLaunch {
            id,
            base: r.base,
            host_site: r.host_site,
            ring: r.ring,
        })
    }
}

/// Resolves one collection's records.
pub(crate) struct GpuResolver<'a> {
    /// Launches by id and serial.
    pub launches: &'a LaunchHistory,
    /// Launches of the other devices of this device's group that the
    /// records name, by serial (their ring numbers index the group's
    /// shared launch ring).
    pub elsewhere: &'a HashMap<Serial, (SerialLaunch, LaunchShape)>,
    /// How a `Location` is laid out (`None`: earlier locations unknown).
    pub layout: Option<LocationLayout>,
    /// Locations and file names read so far.
    pub locations: RefCell<&'a mut LocationCache>,
    /// Call sites of host-issued copies and fills, by tag.
    pub host_sites: &'a HostSites,
    /// Reads device memory.
    pub read: &'a dyn Fn(u64, usize) -> Option<Vec<u8>>,
    /// The launch ring's device address.
    pub ring: u64,
    /// The allocation holding an address: `(base, size)`.
    pub allocation: &'a dyn Fn(u64) -> Option<(u64, u64)>,
    /// The device (group rank) each serial lane's launches run on.
    pub devices: LaneDevices,
}

impl GpuResolver<'_> {
    /// What the record's earlier access was, from its site word: its
    /// launch and block (by serial), its thread, and its `Location` (the
    /// site keeps the low bits of the address over 8: completed from the
    /// earlier launch's anchor, or for a launch of this device from the
    /// current access's, and checked by reading the `Location` back; 0
    /// when neither gives one). `None` when the site word is not the
    /// access's or its launch is forgotten.
    pub fn prior_site(&self, raw: &RawReport, prior: &PriorRecord) -> Option<PriorSite> {
        let desc = AccessDesc(prior.desc);
        let site = SiteWord(prior.site);
        let serial = desc.serial();
        if !site.belongs_to(serial) {
            return None;
        }
        let (l, own) = match self.launches.of_serial(serial) {
            Some(l) => (l, true),
            None => (self.elsewhere.get(&serial)?.0, false),
        };
        let (launch, base, host_site) = (l.id, l.base, l.host_site);
        let offset = ((prior.word * 4) % 128) as u32
            + u32::from(raw.overlap_mask.trailing_zeros().min(3) as u8);
        let location = match host_site {
            Some(tag) => tag,
            None => {
                // The earlier launch's own module first (its anchor in the
                // group's ring), then, for this device's launches, the
                // current access's (the same kernel, most often). Another
                // device's module lies elsewhere: the current access's
                // address would complete the bits into a wrong `Location`.
                let bits = site.location_bits();
                // Unknown (0): the report still names the launch, block
                // and thread.
                self.anchor(l.ring)
                    .and_then(|near| self.complete_location(bits, near))
                    .or_else(|| {
                        (own && !HostSites::is_tag(prior.location))
                            .then(|| self.complete_location(bits, prior.location))
                            .flatten()
                    })
                    .unwrap_or(0)
            }
        };
        Some(PriorSite {
            location,
            tid: serial,
            block: if host_site.is_some() {
                0
            } else {
                serial - base
            },
            thread: if host_site.is_some() {
                0
            } else {
                site.thread_at(offset)
            },
            launch,
            sm: None,
        })
    }

    /// The `Location` address launch `r`'s CTAs noted in its ring record,
    /// if the slot still holds that launch.
    fn anchor(&self, r: u32) -> Option<u64> {
        let slot = self.ring + u64::from(r % LAUNCH_RING_SLOTS) * LAUNCH_RECORD_BYTES as u64;
        let words = (self.read)(slot, 4 * (launch_record::ANCHOR + 2))?;
        let word = |i: usize| u32::from_le_bytes([0, 1, 2, 3].map(|b| words[4 * i + b]));
        let anchor = u64::from(word(launch_record::ANCHOR))
            | u64::from(word(launch_record::ANCHOR + 1)) << 32;
        (word(launch_record::TAG) == r && anchor != 0).then_some(anchor)
    }

    /// The full address of a `Location` of which `bits` are address bits
    /// 3.. (up to [`LOCATION_BITS`]) and `near` is a `Location` address of
    /// the same module: the candidate in `near`'s window, or the next or
    /// the previous one, that reads back as a `Location`.
    fn complete_location(&self, bits: u32, near: u64) -> Option<u64> {
        let window = 1u64 << (LOCATION_BITS + 3);
        let base = near & !(window - 1);
        let low = u64::from(bits) << 3;
        [base, base.wrapping_add(window), base.wrapping_sub(window)]
            .into_iter()
            .map(|b| b | low)
            .find(|&addr| self.location(addr).is_some())
    }
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
        self.launches.shape(launch).cloned().or_else(|| {
            self.elsewhere
                .values()
                .find(|(l, _)| l.id == launch)
                .map(|(_, s)| s.clone())
        })
    }

    fn place(&self, tid: u32) -> ThreadPlace {
        // A serial names a CTA, not where it ran: its lane says which
        // device of the group ran it (the lane's latest renter: a lane
        // moves to another device only once its work has ended); the
        // current access's SM is in its record, the earlier one's is not
        // kept.
        ThreadPlace {
            device: u32::from(self.devices.0[lane_of(tid)]),
            sm: None,
        }
    }

    fn allocation(&self, address: u64) -> Option<(u64, u64)> {
        (self.allocation)(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Dim3;
    use std::panic::Location;
    use vigil_shared::race::desc::SiteLanes;
    use vigil_shared::race::serial::lane_start;

    #[test]
    fn an_earlier_access_is_placed_on_the_device_its_lane_ran_on() {
        let (launches, elsewhere) = (LaunchHistory::default(), HashMap::new());
        let (mut locations, host_sites) = (LocationCache::default(), HostSites::default());
        let mut devices = LaneDevices::default();
        devices.0[3] = 2;
        let resolver = GpuResolver {
            launches: &launches,
            elsewhere: &elsewhere,
            layout: None,
            locations: RefCell::new(&mut locations),
            host_sites: &host_sites,
            read: &|_, _| None,
            ring: 0,
            allocation: &|_| None,
            devices,
        };
        assert_eq!(resolver.place(lane_start(3) + 5).device, 2);
        assert_eq!(resolver.place(lane_start(4)).device, 0);
        assert_eq!(resolver.place(lane_start(3) + 5).sm, None);
    }

    /// Two GPUs load one module at different addresses: an earlier access
    /// made on the other GPU is located from that launch's anchor (its
    /// own module's `Location`, in the group's launch ring), never by
    /// completing its bits with the current access's module, where they
    /// name an unrelated `Location`.
    #[test]
    fn another_gpus_earlier_access_is_located_in_its_own_module() {
        let layout = LocationLayout::probe().expect("this compiler's Location is probeable");
        let (earlier, unrelated) = (Location::caller(), Location::caller());
        let size = layout.size();
        let bytes = |l: &Location<'_>| {
            // SAFETY: the bytes of a live `Location` value.
            unsafe { std::slice::from_raw_parts((l as *const Location<'_>).cast::<u8>(), size) }
                .to_vec()
        };
        // The same 20 address bits in each GPU's copy of the module.
        let window = 1u64 << (LOCATION_BITS + 3);
        let low = 0x1234u64 << 3;
        let (gpu0, gpu1) = (0x7000_0000_0000u64, 0x9000_0000_0000u64);
        let (at0, at1) = (gpu0 + 5 * window + low, gpu1 + 9 * window + low);
        let ring = 0x5000_0000_0000u64;
        let slot = 7u32;
        let mut record = vec![0u8; LAUNCH_RECORD_BYTES];
        let mut put =
            |word: usize, v: u32| record[4 * word..4 * word + 4].copy_from_slice(&v.to_le_bytes());
        put(launch_record::TAG, slot);
        // The anchor: another `Location` of GPU 0's module, in its window.
        let anchor = gpu0 + 5 * window + 0x40;
        put(launch_record::ANCHOR, anchor as u32);
        put(launch_record::ANCHOR + 1, (anchor >> 32) as u32);
        let file = earlier.file();
        let memory: HashMap<u64, Vec<u8>> = [
            (at0, bytes(earlier)),
            (at1, bytes(unrelated)),
            (
                ring + u64::from(slot % LAUNCH_RING_SLOTS) * LAUNCH_RECORD_BYTES as u64,
                record,
            ),
        ]
        .into();
        let read = |addr: u64, len: usize| -> Option<Vec<u8>> {
            if addr == file.as_ptr() as u64 && len == file.len() {
                return Some(file.as_bytes().to_vec());
            }
            memory.get(&addr).map(|b| b[..len.min(b.len())].to_vec())
        };
        let shape = LaunchShape {
            kernel: "k".to_owned(),
            grid: Dim3::new(4, 1, 1),
            block: Dim3::new(32, 1, 1),
            host_issued: false,
        };
        let serial = lane_start(2) + 3;
        let peer = SerialLaunch {
            id: 11,
            base: lane_start(2),
            host_site: None,
            ring: slot,
        };
        let elsewhere: HashMap<Serial, (SerialLaunch, LaunchShape)> =
            [(serial, (peer, shape))].into();
        let (launches, host_sites) = (LaunchHistory::default(), HostSites::default());
        let mut locations = LocationCache::default();
        let resolver = GpuResolver {
            launches: &launches,
            elsewhere: &elsewhere,
            layout: Some(layout),
            locations: RefCell::new(&mut locations),
            host_sites: &host_sites,
            read: &read,
            ring,
            allocation: &|_| None,
            devices: LaneDevices::default(),
        };
        let prior = PriorRecord {
            desc: AccessDesc::plain(serial, 1, true, 4).0,
            site: SiteWord::new(serial, at0, 5, SiteLanes::Single).0,
            word: 0,
            // The current access, on GPU 1.
            location: at1 - low + 0x80,
        };
        let raw = RawReport {
            overlap_mask: 0xf,
            ..Default::default()
        };
        let site = resolver
            .prior_site(&raw, &prior)
            .expect("the earlier access");
        assert_eq!(site.location, at0);
        assert_eq!(
            resolver.location(site.location),
            Some(SourceLocation::from_std(earlier))
        );
        assert_eq!((site.launch, site.block, site.thread), (11, 3, 5));
        // Without the anchor (its ring slot reused), no location rather
        // than the unrelated one; the launch, block and thread stay.
        let mut locations = LocationCache::default();
        let resolver = GpuResolver {
            ring: ring + 0x1000_0000,
            locations: RefCell::new(&mut locations),
            ..resolver
        };
        let site = resolver
            .prior_site(&raw, &prior)
            .expect("the earlier access");
        assert_eq!((site.location, site.launch, site.block), (0, 11, 3));
    }

    #[test]
    fn serials_find_their_launch_and_block() {
        let mut h = LaunchHistory::default();
        let shape = LaunchShape {
            kernel: "k".to_owned(),
            grid: Dim3::new(8, 1, 1),
            block: Dim3::new(32, 1, 1),
            host_issued: false,
        };
        h.insert(3, 1, shape.clone(), 100, 8, None, 5);
        h.insert(4, 1, shape, 108, 1, Some(7), 6);
        let of = |s| h.of_serial(s).map(|l| (l.id, l.base, l.host_site, l.ring));
        assert_eq!(of(100), Some((3, 100, None, 5)));
        assert_eq!(of(107), Some((3, 100, None, 5)));
        assert_eq!(of(108), Some((4, 108, Some(7), 6)));
        assert_eq!(h.of_serial(109), None);
        assert_eq!(h.of_serial(99), None);
    }
}
