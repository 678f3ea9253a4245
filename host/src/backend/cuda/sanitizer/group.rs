//! The GPU sanitizers of a group of devices of one process
//! (docs/src/design/groups.md):
//! what each device's sanitizer shares with the others beyond the runtime
//! state the shadow allocator wires up (`vmm::group`).
//!
//! - One side table, the first member's: a race found on device 1 against
//!   device 0's earlier access finds that access's source location where
//!   device 0 noted it. (Entries are trusted only when word, thread and
//!   epoch match, so switching tables never shows a wrong one.)
//! - Host clocks: a host wait of one member's context orders the other
//!   member contexts' later launches after what it waited for, as the
//!   host barrier of a group of processes does (the same
//!   `join_host_clock`).
//! - Launch names: launch ids are unique in the process, so an earlier
//!   access's launch is looked up in the other members' histories.
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
/// group's first first) one group: every member notes earlier accesses in
/// the first's side table, and a host wait of any member's context orders
/// every member context's later launches. Call before the members'
/// kernels run (entries noted in a table left behind are lost to reports,
/// nothing else).
pub(crate) fn join_group(members: &[(Arc<GpuSanitizer>, u64)]) -> Result<()> {
    let Some((first, _)) = members.first() else {
        return Ok(());
    };
    let side_table = lock(&first.desc).side_table;
    for (m, owner) in members {
        let desc = {
            let mut d = lock(&m.desc);
            d.side_table = side_table;
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

    /// The shapes of the launches among `ids` that other members of the
    /// group remember.
    pub(super) fn peer_launches(
        &self,
        ids: impl Iterator<Item = u32>,
    ) -> HashMap<u32, LaunchShape> {
        let peers = self.peers();
        let mut found = HashMap::new();
        if peers.is_empty() {
            return found;
        }
        let ids: Vec<u32> = ids.filter(|&id| id != 0).collect();
        for p in peers {
            let st = lock(&p.state);
            for &id in &ids {
                if let Some(shape) = st.launches.shape(id) {
                    found.insert(id, shape.clone());
                }
            }
        }
        found
    }
}
