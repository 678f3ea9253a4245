//! Warp cooperation in the hooks. A sanitizer thread is a whole CTA, so
//! the lanes of a warp that make one access site's accesses together are
//! one thread of the race model: what they touch at once can be checked
//! once for all of them, exactly.
//!
//! Only lanes executing a hook together cooperate: a group is formed
//! among `activemask`'s lanes with `match.any` on the access site and a
//! key, so lanes that diverged, or that reached the hook from another
//! call site, never wait for each other.

use crate::arch::ptx as arch;
use crate::sanitizer::AtomicAccess;

/// The lanes executing this hook together with the same site and key.
#[derive(Clone, Copy, Debug)]
pub(super) struct Group {
    mask: u32,
    leader: u32,
    lane: u32,
}

impl Group {
    /// The group of this lane: active lanes with equal `keys` (the
    /// access site first).
    #[inline(always)]
    pub fn of<const N: usize>(keys: [u64; N]) -> Group {
        let active = arch::active_mask();
        let mut mask = active;
        for k in keys {
            mask &= arch::match_any_u64(active, k);
        }
        Group {
            mask,
            leader: mask.trailing_zeros(),
            lane: arch::lane_id(),
        }
    }

    /// This lane's share of a whole warp (every lane active: the caller
    /// checked `activemask`) cut into groups of `lanes` consecutive lanes
    /// (1, 2, 4, 8, 16 or 32), each led by its lowest lane.
    #[inline(always)]
    pub fn line_lanes(lanes: u32) -> Group {
        let lane = arch::lane_id();
        let leader = lane / lanes * lanes;
        Group {
            mask: (u32::MAX >> (32 - lanes)) << leader,
            leader,
            lane,
        }
    }

    /// How many lanes the group has.
    #[inline(always)]
    pub fn size(&self) -> u32 {
        self.mask.count_ones()
    }

    /// This lane is the group's only one.
    #[inline(always)]
    pub fn alone(&self) -> bool {
        self.size() == 1
    }

    /// This lane acts for the group (its lowest lane).
    #[inline(always)]
    pub fn is_leader(&self) -> bool {
        self.lane == self.leader
    }

    /// The lanes wait for each other (with memory ordering among them).
    #[inline(always)]
    pub fn sync(&self) {
        arch::sync_warp(self.mask);
    }

    /// True on every lane when `pred` holds on any.
    #[inline(always)]
    pub fn any(&self, pred: bool) -> bool {
        arch::vote_any(self.mask, pred)
    }

    /// True on every lane when `pred` holds on all.
    #[inline(always)]
    pub fn all(&self, pred: bool) -> bool {
        arch::vote_all(self.mask, pred)
    }

    /// True on every lane when every lane's `v` is the leader's.
    #[inline(always)]
    pub fn agree(&self, v: u32) -> bool {
        self.all(self.leaders(v) == v)
    }

    /// The leader's `flag`, on every lane.
    #[inline(always)]
    pub fn leader_says(&self, flag: bool) -> bool {
        self.leaders(u32::from(flag)) != 0
    }

    /// The leader's `bits`, on every lane.
    #[inline(always)]
    pub fn leader_bits(&self, bits: u32) -> u32 {
        self.leaders(bits)
    }

    #[inline(always)]
    fn leaders(&self, v: u32) -> u32 {
        arch::shfl_idx(self.mask, v, self.leader, 31)
    }
}

/// The grouping keys of an atomic besides its site: its address, and its
/// size and operation (one site's atomics are one operation, but a
/// generic site may be instantiated at several widths).
#[inline(always)]
pub(super) fn atomic_keys(a: &AtomicAccess) -> [u64; 2] {
    let op = (a.size as u64) << 16
        | u64::from(a.compare) << 12
        | u64::from(a.kind as u8) << 8
        | u64::from(a.ordering as u8) << 4
        | u64::from(a.scope as u8);
    [a.addr as u64, op]
}
