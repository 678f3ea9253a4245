//! The current CTA as the engine sees it, and the one rule of ordering:
//! an earlier access by serial `s` in epoch `e` happens before the
//! current CTA's accesses when `s` is the CTA itself, when the host
//! ordered `s`'s launch before the current one, or when the CTA acquired
//! knowledge of `s` up to `e` or later.

use super::desc::AccessDesc;
use super::knowledge::{Arena, SnapRef};
use super::serial::{lane_end, lane_of, HostOrder, LaneBounds, Serial, LANES};
use crate::atomic::AtomicFamily;
use crate::memory_model::Scope;

/// The device (rank) each lane's serials run on: lanes are rented by
/// streams, and a stream belongs to one device.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneDevices(pub [u8; LANES]);

impl Default for LaneDevices {
    fn default() -> Self {
        LaneDevices([0; LANES])
    }
}

impl LaneDevices {
    /// The device serial `s` ran on.
    #[inline(always)]
    pub fn of(&self, s: Serial) -> u32 {
        u32::from(self.0[lane_of(s)])
    }
}

/// The calling CTA: who it is, what it knows.
#[derive(Clone, Copy, Debug)]
pub struct CtaView<'a> {
    /// Its serial.
    pub serial: Serial,
    /// Its current epoch (releases so far, plus one).
    pub epoch: u16,
    /// The device (rank) it runs on.
    pub device: u32,
    /// What the host ordered before its launch.
    pub host: HostOrder<'a>,
    /// What the host had ordered before every launch issued since its
    /// launch was (the host's clock when it issued it): accesses below
    /// these bounds can never race again and are forgotten.
    pub global: &'a LaneBounds,
    /// Which device each lane runs on.
    pub devices: &'a LaneDevices,
    /// What it acquired ([`SnapRef::NONE`]: nothing).
    pub known: SnapRef,
    /// Its launch ([`LaneRef`](super::memory::LaneRef)): what the launch
    /// inherited from launches before it is cached under it.
    pub launch: u32,
    /// What the current operation's reads learned of this CTA's own
    /// releases (for the same-block check, which keeps it per block).
    pub own: OwnReleases,
}

/// The releases of its own CTA that one atomic read (or a group of one
/// warp's lanes reading one word together) came to know: the latest own
/// epoch it acquired and the latest it merely observed (a relaxed read,
/// which a later acquire fence turns into knowledge). The engine fills
/// it; the same-block layer keeps what its block's threads learned
/// (`crate::block::BlockAcquired`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnReleases {
    /// The latest own epoch acquired (0: none).
    pub acquired: u16,
    /// The latest own epoch observed without acquiring (0: none).
    pub observed: u16,
}

impl CtaView<'_> {
    /// Whether `s`'s accesses in epoch `e` happen before this CTA's.
    #[inline(always)]
    pub fn orders<F: AtomicFamily>(&self, arena: &Arena<'_, F>, s: Serial, e: u16) -> bool {
        s == self.serial
            || self.host.orders(s)
            || (!self.known.is_none() && arena.epoch_of(self.known, s) >= u32::from(e))
            || {
                let inherited = arena.inherited(self.launch, |x| self.host.orders_once_waited(x));
                !inherited.is_none() && arena.epoch_of(inherited, s) >= u32::from(e)
            }
    }

    /// Whether the access `d` happens before this CTA's.
    #[inline(always)]
    pub fn orders_desc<F: AtomicFamily>(&self, arena: &Arena<'_, F>, d: AccessDesc) -> bool {
        d.is_none() || self.orders(arena, d.serial(), d.epoch())
    }

    /// The first of `count` serials from `lo` whose access in epoch `e`
    /// does not happen before this CTA's, if any.
    pub fn first_unordered<F: AtomicFamily>(
        &self,
        arena: &Arena<'_, F>,
        lo: Serial,
        count: u32,
        e: u16,
    ) -> Option<Serial> {
        let hi = lo.saturating_add(count);
        let e = u32::from(e);
        let mut inherited = None;
        let mut p = lo;
        while p < hi {
            // Host order: a prefix of each lane.
            let lane = lane_of(p);
            let bound = self.host.bound(lane);
            let lane_hi = lane_end(lane).min(hi);
            if p < bound {
                p = bound.min(lane_hi);
                continue;
            }
            if p == self.serial {
                p += 1;
                continue;
            }
            // What it acquired, and what its launch inherited.
            let q = if self.known.is_none() {
                p
            } else {
                arena.first_unknown(self.known, p, lane_hi, e)
            };
            if q != p {
                p = q;
                continue;
            }
            let inh = *inherited.get_or_insert_with(|| {
                arena.inherited(self.launch, |x| self.host.orders_once_waited(x))
            });
            let q = if inh.is_none() {
                p
            } else {
                arena.first_unknown(inh, p, lane_hi, e)
            };
            if q != p {
                p = q;
                continue;
            }
            return Some(p);
        }
        None
    }

    /// Whether `scope`, of an operation by the CTA `owner` on device
    /// `owner_device`, includes this CTA.
    #[inline(always)]
    pub fn included_by(&self, scope: Scope, owner: Serial, owner_device: u32) -> bool {
        match scope {
            Scope::Block => owner == self.serial,
            Scope::Device => owner_device == self.device,
            Scope::System => true,
        }
    }

    /// Whether this CTA's operation of `scope` includes `other` (on
    /// `other_device`).
    #[inline(always)]
    pub fn includes(&self, scope: Scope, other: Serial, other_device: u32) -> bool {
        match scope {
            Scope::Block => other == self.serial,
            Scope::Device => other_device == self.device,
            Scope::System => true,
        }
    }

    /// Whether two atomics, the earlier one `d` and the current one of
    /// `scope`, are morally strong: each one's scope includes the other's
    /// CTA (same bytes is the caller's part).
    #[inline(always)]
    pub fn morally_strong(&self, d: AccessDesc, scope: Scope) -> bool {
        let other = d.serial();
        let dev = self.devices.of(other);
        other == self.serial
            || (self.included_by(d.scope(), other, dev) && self.includes(scope, other, dev))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::atomic::CoreAtomics;
    use crate::race::knowledge::{Arena, Interval};
    use crate::race::serial::lane_start;
    use core::sync::atomic::AtomicU32;
    use std::vec::Vec;

    #[test]
    fn first_unordered_skips_host_and_acquired_knowledge() {
        let words: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
        Arena::<CoreAtomics>::init(&words, 1);
        let arena = Arena::<CoreAtomics>::new(&words, &[], &[]);
        let base = lane_start(2) + 1000;
        let known = arena.merge(
            SnapRef::NONE,
            SnapRef::NONE,
            &[Interval {
                lo: base + 10,
                hi: base + 20,
                epoch: 3,
            }],
        );
        let bounds = LaneBounds::NONE;
        let devices = LaneDevices::default();
        let cta = CtaView {
            serial: base + 5,
            epoch: 1,
            device: 0,
            host: HostOrder::new(base, 100, &bounds),
            global: &bounds,
            devices: &devices,
            known,
            launch: 0,
            own: OwnReleases::default(),
        };
        assert_eq!(cta.first_unordered(&arena, base - 500, 500, 1), None);
        assert_eq!(cta.first_unordered(&arena, base - 500, 502, 1), Some(base));
        assert_eq!(cta.first_unordered(&arena, base + 5, 1, 9), None);
        assert_eq!(cta.first_unordered(&arena, base + 10, 10, 3), None);
        assert_eq!(
            cta.first_unordered(&arena, base + 10, 10, 4),
            Some(base + 10)
        );
        assert_eq!(
            cta.first_unordered(&arena, base + 10, 11, 2),
            Some(base + 20)
        );
    }
}
