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
//!
//! A group of processes (`ProcessGroup`) shares the engine tables of its
//! first rank's runtime-state region, mapped in every process
//! (`vmm::runtime_state`); each process's launch order rents serial lanes
//! and launch-ring slots of its rank only, and the group's barrier joins
//! every rank's host clock ([`GpuSanitizer::group_barrier`]). A launch of
//! another process is not in this process's history: a race with it is
//! named by the other access's rank, without its kernel or line.
//!
//! Lock order: a sanitizer's state lock is never held while another's is
//! taken (each step below takes one at a time).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// A group's other members, with their contexts' owners.
pub(super) type Peers = Vec<(Weak<GpuSanitizer>, u64)>;

use super::device_memory::read_device;
use super::resolve::SerialLaunch;
use super::{as_bytes, lock, GpuSanitizer};
use crate::backend::cuda::vmm::runtime_state::EngineTables;
use crate::error::{Error, GroupProblem, Result};
use crate::sanitizer::decode::LaunchShape;
use crate::sanitizer::order::launch_order;
use vigil_shared::race::serial::LaneBounds;
use vigil_shared::race::LaneDevices;

/// Makes the process's launch order that of rank `rank` of `world`
/// processes sharing one race engine: it rents that rank's serial lanes
/// and launch-ring slots only. Before the process's first sanitized
/// launch ([`GroupProblem::SanitizerStarted`] after).
pub(crate) fn join_process_order(rank: u32, world: u32) -> Result<()> {
    lock(launch_order())
        .join_processes(rank as usize, world as usize)
        .map_err(|e| {
            Error::Group(GroupProblem::SanitizerStarted {
                rank,
                reason: e.to_string(),
            })
        })
}

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
    let shared = first.tables();
    for (m, owner) in members {
        m.use_tables(&shared)?;
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
    /// The engine tables this device works on.
    pub(crate) fn tables(&self) -> EngineTables {
        EngineTables::of(&self.desc())
    }

    /// Points this device's descriptor at `tables` (before its kernels
    /// run: what they left in other tables is no longer read).
    fn use_tables(&self, tables: &EngineTables) -> Result<()> {
        let desc = {
            let mut d = lock(&self.desc);
            tables.name_in(&mut d);
            *d
        };
        self.device.bind()?;
        self.runtime.write(as_bytes(&desc))
    }

    /// Points this device's descriptor at the engine tables the shadow
    /// allocator names for it: in a group of processes, the first rank's
    /// (imported by the join).
    pub(crate) fn use_allocator_tables(&self) -> Result<()> {
        let tables = self.pool.vmm().engine_tables(self.device.ordinal())?;
        if tables != self.tables() {
            self.use_tables(&tables)?;
        }
        Ok(())
    }

    /// A group barrier of processes: `owner`'s later launches are ordered
    /// after `all` (every rank's host clock, joined), and what it covers
    /// may be forgotten.
    pub fn group_barrier(&self, owner: u64, all: &[u32]) -> Result<()> {
        let mut bounds = LaneBounds::NONE;
        for (b, c) in bounds.0.iter_mut().zip(all) {
            *b = (*b).max(*c);
        }
        lock(launch_order()).group_barrier(owner, &bounds);
        Ok(())
    }

    /// The lane-to-device table as the device has it (a group's: other
    /// members' and processes' lanes included); this process's view if it
    /// cannot be read.
    pub(super) fn lane_devices(&self) -> LaneDevices {
        let table = self.desc().lane_devices;
        let read = self
            .device
            .bind()
            .ok()
            .and_then(|()| read_device(table, std::mem::size_of::<LaneDevices>()).ok());
        match read.and_then(|b| <[u8; vigil_shared::race::serial::LANES]>::try_from(b).ok()) {
            Some(lanes) => LaneDevices(lanes),
            None => *lock(launch_order()).devices(),
        }
    }

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

    /// The launches (and their shapes) of the serials among `serials`
    /// that other members of the group remember.
    pub(super) fn peer_launches(
        &self,
        serials: impl Iterator<Item = u32>,
    ) -> HashMap<u32, (SerialLaunch, LaunchShape)> {
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
                        found.insert(s, (l, shape.clone()));
                    }
                }
            }
        }
        found
    }
}
