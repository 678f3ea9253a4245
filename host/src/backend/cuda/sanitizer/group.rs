//! The GPU sanitizers of a group of devices of one process
//! (docs/src/design/groups.md):
//! what each device's sanitizer shares with the others beyond the runtime
//! state the shadow allocator wires up (`vmm::group`).
//!
//! - One race engine's memory, the first member's (record pool, snapshot
//!   arena, exit log, launch ring, site table, SC-fence accumulators,
//!   lane-to-device table): a shadow cell names a record, a head a
//!   snapshot and a launch, whichever device wrote it, and every member
//!   reads the same ones (peer access is on between a group's devices).
//! - Host clocks: a host wait of one member's context orders the other
//!   member contexts' later launches after what it waited for, as the
//!   host barrier of a group of processes does (the same
//!   `join_host_clock`).
//! - Launch names: serials and launch ids are unique in the process, so
//!   an earlier access's launch is looked up in the other members'
//!   histories.
//!
//! Lock order: a sanitizer's state lock is never held while another's is
//! taken (each step below takes one at a time).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// A group's other members, with their contexts' owners.
pub(super) type Peers = Vec<(Weak<GpuSanitizer>, u64)>;

use super::{as_bytes, lock, GpuSanitizer};
use crate::error::Result;
use crate::sanitizer::decode::LaunchShape;

/// Makes `members` (one sanitizer and context owner per device, the
/// group's first first) one group: every member runs the race engine on
/// the first's memory, and a host wait of any member's context orders
/// every member context's later launches. Call before the members'
/// kernels run (what a member's kernels left in its own memory before is
/// no longer read: races with those accesses may be missed, none
/// invented).
pub(crate) fn join_group(members: &[(Arc<GpuSanitizer>, u64)]) -> Result<()> {
    let Some((first, _)) = members.first() else {
        return Ok(());
    };
    let shared = *lock(&first.desc);
    for (m, owner) in members {
        let desc = {
            let mut d = lock(&m.desc);
            d.pool = shared.pool;
            d.pool_words = shared.pool_words;
            d.arena = shared.arena;
            d.arena_words = shared.arena_words;
            d.exits = shared.exits;
            d.exit_words = shared.exit_words;
            d.launches = shared.launches;
            d.launch_words = shared.launch_words;
            d.sites = shared.sites;
            d.site_words = shared.site_words;
            d.sc = shared.sc;
            d.sc_words = shared.sc_words;
            d.lane_devices = shared.lane_devices;
            *d
        };
        m.device.bind()?;
        m.runtime.write(as_bytes(&desc))?;
        let peers = members
            .iter()
            .filter(|(p, _)| !Arc::ptr_eq(p, m))
            .map(|(p, o)| (Arc::downgrade(p), *o))
            .collect();
        lock(&m.group).insert(*owner, peers);
    }
    Ok(())
}

impl GpuSanitizer {
    /// The other live members of the group of this device's context
    /// `owner`, with their contexts' owners.
    fn peers_of(&self, owner: u64) -> Vec<(Arc<GpuSanitizer>, u64)> {
        let group = lock(&self.group);
        let peers = group.get(&owner).map(Vec::as_slice).unwrap_or_default();
        peers
            .iter()
            .filter_map(|(p, o)| Some((p.upgrade()?, *o)))
            .collect()
    }

    /// The other live members of every group of this device's contexts.
    fn peers(&self) -> Vec<Arc<GpuSanitizer>> {
        let group = lock(&self.group);
        group
            .values()
            .flatten()
            .filter_map(|(p, _)| p.upgrade())
            .collect()
    }

    /// Joins `owner`'s host clock into its group's other members'.
    pub(super) fn share_host_clock(&self, owner: u64) -> Result<()> {
        let peers = self.peers_of(owner);
        if peers.is_empty() {
            return Ok(());
        }
        let clock = self.host_clock(owner);
        peers
            .iter()
            .try_for_each(|(p, o)| p.join_host_clock(*o, &clock))
    }

    /// The launches (id, shape, first serial) of the serials among
    /// `serials` that other members of the group remember.
    pub(super) fn peer_launches(
        &self,
        serials: impl Iterator<Item = u32>,
    ) -> HashMap<u32, (u32, LaunchShape, u32)> {
        let peers = self.peers();
        let mut found = HashMap::new();
        if peers.is_empty() {
            return found;
        }
        let serials: Vec<u32> = serials.filter(|&s| s != 0).collect();
        for p in peers {
            let st = lock(&p.state);
            for &s in &serials {
                if let Some(l) = st.launches.of_serial(s) {
                    if let Some(shape) = st.launches.shape(l.id) {
                        found.insert(s, (l.id, shape.clone(), l.base));
                    }
                }
            }
        }
        found
    }
}
