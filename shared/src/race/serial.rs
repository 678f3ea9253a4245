//! Who made an access, and which launches the host already ordered.
//!
//! Every CTA of a sanitized launch is one sanitizer thread, named by its
//! *serial*: the launch's base serial plus its linear block index. The
//! host hands each launch a contiguous range of serials; a host-issued
//! copy or fill is one serial. Serial 0 names nobody (an empty record).
//!
//! Serials are grouped in [`LANES`] *lanes* of [`LANE_SERIALS`] each. A
//! stream takes its serials from the one lane it rents, in issue order,
//! so that everything the host knows about ordering between launches is
//! a bound per lane: serial `s` of lane `k` happens before a launch iff
//! `s < bound[k]` in the launch's [`HostOrder`] (for the launch's own
//! lane the bound is its base: every earlier launch of its stream). The
//! host keeps these bounds as vector clocks over lanes (streams, events,
//! host waits) and writes each launch's into device memory.
//!
//! ```text
//! serial:  | lane (6 bits) | index in the lane (26 bits) |
//!            owner stream's launches, in issue order ->
//! ```

/// A CTA's (or a host-issued transfer's) identity.
pub type Serial = u32;

/// Serial 0: no access.
pub const NO_SERIAL: Serial = 0;

/// Bits of a serial's index inside its lane.
pub const LANE_SHIFT: u32 = 26;
/// Serials per lane.
pub const LANE_SERIALS: u32 = 1 << LANE_SHIFT;
/// Lanes (the serial space is `LANES * LANE_SERIALS` = 2^32).
pub const LANES: usize = 1 << (32 - LANE_SHIFT);

const _: () = assert!(LANES * LANE_SERIALS as usize == 1 << 32);

/// The lane serial `s` belongs to.
#[inline(always)]
pub const fn lane_of(s: Serial) -> usize {
    (s >> LANE_SHIFT) as usize
}

/// The first serial of lane `k` (lane 0 starts at 1: serial 0 is nobody).
#[inline(always)]
pub const fn lane_start(k: usize) -> Serial {
    if k == 0 {
        1
    } else {
        (k as u32) << LANE_SHIFT
    }
}

/// One past the last serial of lane `k` (`u32::MAX` for the last lane,
/// whose final serial is never handed out).
#[inline(always)]
pub const fn lane_end(k: usize) -> Serial {
    if k + 1 == LANES {
        u32::MAX
    } else {
        ((k as u32) + 1) << LANE_SHIFT
    }
}

/// What the host ordered before a launch: per lane, the serials below the
/// bound happen before every CTA of the launch. The launch's own lane's
/// bound is its base serial, so its own CTAs and later launches are not
/// ordered by it.
///
/// The table lives in device memory on a GPU ([`LaneBounds`], written by
/// the host before the launch) and in the launch's state on the CPU.
#[derive(Clone, Copy, Debug)]
pub struct HostOrder<'t> {
    /// The launch's first serial.
    pub base: Serial,
    /// Serials the launch owns (`base..base + count`).
    pub count: u32,
    /// Per-lane bounds.
    pub bounds: &'t LaneBounds,
    /// The bound of the launch's own lane: its base, or, for a CTA of a
    /// launch that may start before the launch before it on its stream
    /// has finished (programmatic dependent launch) and that has not
    /// waited for it yet, that launch's own bound.
    pub own_bound: Serial,
}

impl<'t> HostOrder<'t> {
    /// The host order of the launch of `count` serials from `base` with
    /// per-lane bounds `bounds`, ordered after all of its own lane below
    /// `base`.
    #[inline(always)]
    pub fn new(base: Serial, count: u32, bounds: &'t LaneBounds) -> Self {
        HostOrder {
            base,
            count,
            bounds,
            own_bound: base,
        }
    }

    /// The bound in lane `lane`: serials below it happen before this launch.
    #[inline(always)]
    pub fn bound(&self, lane: usize) -> Serial {
        if lane == lane_of(self.base) {
            self.own_bound
        } else {
            self.bounds.0[lane]
        }
    }

    /// Whether an access by `s` happens before every access of this
    /// launch by host ordering (stream order, events, host waits).
    #[inline(always)]
    pub fn orders(&self, s: Serial) -> bool {
        s < self.bound(lane_of(s))
    }

    /// Whether `s` happens before the launch once its CTAs waited for
    /// the launch before it ([`HostOrder::own_bound`] aside): what the
    /// launch inherits from the CTAs that exited before it is decided
    /// once, by this order, so a CTA that has not waited may count as
    /// knowing what they knew (which can hide a race, never invent one).
    #[inline(always)]
    pub fn orders_once_waited(&self, s: Serial) -> bool {
        let lane = lane_of(s);
        s < if lane == lane_of(self.base) {
            self.base
        } else {
            self.bounds.0[lane]
        }
    }

    /// Whether `s` is a CTA of this launch.
    #[inline(always)]
    pub fn owns(&self, s: Serial) -> bool {
        s.wrapping_sub(self.base) < self.count
    }
}

/// Per-lane bounds of a [`HostOrder`] (256 bytes, `u32` per lane).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneBounds(pub [u32; LANES]);

const _: () = assert!(core::mem::size_of::<LaneBounds>() == 4 * LANES);

impl Default for LaneBounds {
    fn default() -> Self {
        LaneBounds::NONE
    }
}

impl LaneBounds {
    /// Nothing ordered: every bound at its lane's start.
    pub const NONE: LaneBounds = {
        let mut b = [0u32; LANES];
        let mut k = 0;
        while k < LANES {
            b[k] = lane_start(k);
            k += 1;
        }
        LaneBounds(b)
    };

    /// Joins `other` into `self` (a bound only grows).
    pub fn join(&mut self, other: &LaneBounds) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = (*a).max(*b);
        }
    }

    /// Whether every serial `self` orders, `other` orders too.
    pub fn covered_by(&self, other: &LaneBounds) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a <= b)
    }

    /// The lanes whose bound is above the lane's start, as the serial
    /// ranges they order (what a published snapshot carries of its
    /// launch's host order).
    pub fn ordered_ranges(&self) -> impl Iterator<Item = (Serial, Serial)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|&(k, &b)| b > lane_start(k))
            .map(|(k, &b)| (lane_start(k), b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_ordered_after_its_streams_earlier_serials_only() {
        let mut bounds = LaneBounds::NONE;
        bounds.0[3] = lane_start(3) + 10;
        let own = lane_start(1) + 100;
        let order = HostOrder::new(own, 4, &bounds);
        assert!(order.orders(own - 1));
        assert!(!order.orders(own));
        assert!(!order.orders(own + 3));
        assert!(order.owns(own + 3) && !order.owns(own + 4) && !order.owns(own - 1));
        assert!(order.orders(lane_start(3) + 9));
        assert!(!order.orders(lane_start(3) + 10));
        assert!(!order.orders(lane_start(5)));
        assert!(!order.orders(NO_SERIAL + 1) || lane_of(own) == 0);
    }

    #[test]
    fn bounds_join_and_cover() {
        let mut a = LaneBounds::NONE;
        let mut b = LaneBounds::NONE;
        a.0[2] += 5;
        b.0[7] += 9;
        assert!(!a.covered_by(&b));
        let mut j = a;
        j.join(&b);
        assert!(a.covered_by(&j) && b.covered_by(&j));
        let ranges: [(Serial, Serial); 2] = [
            (lane_start(2), lane_start(2) + 5),
            (lane_start(7), lane_start(7) + 9),
        ];
        assert!(j.ordered_ranges().eq(ranges));
    }
}
