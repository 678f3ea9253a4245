//! The GPU sanitizers of a group of devices of one process (design 3.4):
//! what each device's sanitizer shares with the others beyond the runtime
//! state the shadow allocator wires up (`vmm::group`).
//!
//! - One side table, the first member's: a race found on device 1 against
//!   device 0's earlier access finds that access's source location where
//!   device 0 noted it. (Entries are trusted only when word, thread and
//!   epoch match, so switching tables never shows a wrong one.)
//! - Host clocks: a host wait on one member orders the other members'
//!   later launches after what it waited for, as the host barrier of a
//!   group of processes does (the same `join_host_clock`).
//! - Launch names: launch ids are unique in the process, so an earlier
//!   access's launch is looked up in the other members' histories.
//!
//! Lock order: a sanitizer's state lock is never held while another's is
//! taken (each step below takes one at a time).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use super::{as_bytes, lock, GpuSanitizer};
use crate::error::Result;
use crate::sanitizer::decode::LaunchShape;

/// Makes `members` (one per device, the group's first first) one group:
/// every member notes earlier accesses in the first's side table, and
/// host waits on any order every member's later launches. Call before
/// the members' kernels run (entries noted in a table left behind are
/// lost to reports, nothing else).
pub(crate) fn join_group(members: &[Arc<GpuSanitizer>]) -> Result<()> {
    let Some(first) = members.first() else {
        return Ok(());
    };
    let side_table = lock(&first.desc).side_table;
    for m in members {
        let desc = {
            let mut d = lock(&m.desc);
            d.side_table = side_table;
            *d
        };
        m.device.bind()?;
        m.runtime.write(as_bytes(&desc))?;
        *lock(&m.group) = members
            .iter()
            .filter(|p| !Arc::ptr_eq(p, m))
            .map(Arc::downgrade)
            .collect();
    }
    Ok(())
}

impl GpuSanitizer {
    /// The other live members of this device's group.
    fn peers(&self) -> Vec<Arc<GpuSanitizer>> {
        lock(&self.group).iter().filter_map(Weak::upgrade).collect()
    }

    /// Joins this device's host clock into every other member's.
    pub(super) fn share_host_clock(&self) -> Result<()> {
        let peers = self.peers();
        if peers.is_empty() {
            return Ok(());
        }
        let clock = self.host_clock();
        peers.iter().try_for_each(|p| p.join_host_clock(&clock))
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
