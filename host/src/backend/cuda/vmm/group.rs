//! The runtime state wired to a group (docs/src/design/groups.md): every rank's region
//! mapped at its rank's stride and reachable from every member's device
//! (imported from another process with [`Vmm::import_runtime_state`], or,
//! for several devices of this process, their own regions opened to each
//! other with [`Vmm::grant_runtime_state`]), one inflated-record pool for
//! the whole group, and the host clocks ranks publish at a group barrier.
//!
//! One pool: a shadow cell inflated by one rank holds an index that every
//! other rank follows, so every rank's `GlobalState` names rank 0's pool
//! (mapped at stride 0 in every process) instead of its own. Its free list
//! and records are device atomics like any pool's; the ranks of a group on
//! one GPU share them as the SMs of one device do.

use super::super::AsCudaDevice;
use super::layout::device_globals;
use super::physical::PhysOps;
use super::runtime_state::{self, RegionLayout};
use super::{lock, physical, Vmm, VmmError, VmmResult};
use vigil_shared::abi::GlobalState;

/// The rank whose inflated-record pool a group shares.
pub const POOL_RANK: u32 = 0;

/// Why a peer's runtime state cannot join this process's: the first field
/// that differs, with both values. Thread ids, clock lengths and record
/// layouts must agree across the group. Pure: tested on the CPU.
pub fn runtime_mismatch(own: &GlobalState, peer: &GlobalState) -> Option<String> {
    let fields = [
        ("threads per device", own.num_sms, peer.num_sms),
        ("ranks", own.num_devices, peer.num_devices),
        ("threads (clock entries)", own.num_threads, peer.num_threads),
        (
            "clock-buffer snapshots",
            own.clock_buffer_size,
            peer.clock_buffer_size,
        ),
        ("pool records", own.pool_capacity, peer.pool_capacity),
        (
            "thread-state bytes",
            own.thread_state_bytes,
            peer.thread_state_bytes,
        ),
    ];
    fields
        .iter()
        .find(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what}: {b}, here {a}"))
}

/// Where the group's pool lies in a process whose runtime-state
/// reservation starts at `globals_base`: in rank `pool_rank`'s region
/// (whose `GlobalState` is `owner`), at the offset its layout gives, the
/// same offset in every process. Pure: tested on the CPU.
pub fn group_pool_base(globals_base: u64, pool_rank: u32, owner: &GlobalState) -> u64 {
    device_globals(globals_base, pool_rank) + RegionLayout::of(owner).pool_offset
}

impl Vmm {
    /// Sets up `ctx`'s device here if no allocation or launch did yet:
    /// its runtime state made, with the configuration's rank.
    pub fn prepare_device(&self, ctx: &impl AsCudaDevice) -> VmmResult<()> {
        self.device(ctx.cuda_device()?).map(drop)
    }

    /// Unmaps rank `rank`'s imported region (a group's join undone). Only
    /// for a rank [`Vmm::import_runtime_state`] mapped: a device's own
    /// region is never given up while its kernels may run.
    pub(crate) fn forget_runtime_state(&self, rank: u32) -> VmmResult<()> {
        if lock(&self.shared.devices).values().any(|d| d.rank == rank) {
            return Ok(());
        }
        self.shared.home.bind()?;
        let taken = lock(&self.shared.runtime)
            .get_mut(rank as usize)
            .and_then(Option::take);
        taken.map_or(Ok(()), |rt| {
            physical::teardown(&physical::Cuda, &[rt.mapping])
        })
    }

    /// Points device `ordinal`'s `GlobalState` at rank `pool_rank`'s
    /// inflated-record pool (mapped here), the group's one pool. Call
    /// before the device's first sanitized launch (see
    /// [`Vmm::uses_group_pool`]).
    pub fn share_group_pool(&self, ordinal: usize, pool_rank: u32) -> VmmResult<()> {
        let own = self.runtime_of(ordinal)?;
        let (_, owner) = self.mapped_region(pool_rank)?;
        let mut g = own.global;
        g.pool_base = group_pool_base(self.globals_base(), pool_rank, &owner);
        g.pool_capacity = owner.pool_capacity;
        self.rewrite_global_state(ordinal, g)
    }

    /// Whether device `ordinal` already takes its inflated records from
    /// rank `pool_rank`'s pool (its own, or shared by an earlier join).
    pub fn uses_group_pool(&self, ordinal: usize, pool_rank: u32) -> VmmResult<bool> {
        let own = self.runtime_of(ordinal)?.global;
        let (_, owner) = self.mapped_region(pool_rank)?;
        Ok(own.pool_base == group_pool_base(self.globals_base(), pool_rank, &owner))
    }

    /// The first of `ranks` (mapped here) whose runtime state is laid out
    /// unlike device `ordinal`'s, with the field that differs (see
    /// [`runtime_mismatch`]); `None` when all agree.
    pub fn group_mismatch(
        &self,
        ordinal: usize,
        ranks: &[u32],
    ) -> VmmResult<Option<(u32, String)>> {
        let own = self.runtime_of(ordinal)?.global;
        for &rank in ranks {
            let (_, peer) = self.mapped_region(rank)?;
            if let Some(what) = runtime_mismatch(&own, &peer) {
                return Ok(Some((rank, what)));
            }
        }
        Ok(None)
    }

    /// The rank device `ordinal` has here (its runtime state made).
    pub fn rank_of_device(&self, ordinal: usize) -> VmmResult<u32> {
        self.runtime_of(ordinal).map(|r| r.rank)
    }

    /// Lets the devices `ordinals` of this process read and write rank
    /// `rank`'s region (another device's own, in a group of devices of
    /// one process): its thread states, pool and barrier clocks.
    pub fn grant_runtime_state(&self, rank: u32, ordinals: &[usize]) -> VmmResult<()> {
        let mapping = lock(&self.shared.runtime)
            .get(rank as usize)
            .copied()
            .flatten()
            .map(|r| r.mapping)
            .ok_or(VmmError::NoRuntimeState {
                ordinal: self.home_ordinal(),
            })?;
        self.shared.home.bind()?;
        physical::Cuda.set_access(mapping.va, mapping.bytes, ordinals)
    }

    /// Lets the devices `ordinals` of this process read and write the live
    /// allocation at `ptr` (another device's memory) and its shadow, so
    /// their kernels check and update the one shadow of every word.
    pub fn grant_access(&self, ptr: u64, ordinals: &[usize]) -> VmmResult<()> {
        let pair = {
            let st = lock(&self.shared.state);
            match st.live.get(&ptr) {
                Some(rec) => rec.pair,
                None => return Err(self.classify(&st, ptr)),
            }
        };
        self.shared.home.bind()?;
        for m in [pair.data, pair.shadow] {
            physical::Cuda.set_access(m.va, m.bytes, ordinals)?;
        }
        Ok(())
    }

    /// Publishes `clock` as device `ordinal`'s host clock of the group's
    /// barrier number `n` (in its own region).
    pub fn publish_barrier_clock(&self, ordinal: usize, n: u32, clock: &[u32]) -> VmmResult<()> {
        let rank = self.runtime_of(ordinal)?.rank;
        let va = self.barrier_clock_va(rank, n, clock.len())?;
        self.shared.home.bind()?;
        runtime_state::write(va, bytemuck::cast_slice(clock), ordinal)
    }

    /// The host clock rank `rank` published at barrier number `n`
    /// (`num_threads` entries).
    pub fn read_barrier_clock(&self, rank: u32, n: u32) -> VmmResult<Vec<u32>> {
        let (_, global) = self.mapped_region(rank)?;
        let len = global.num_threads as usize;
        let va = self.barrier_clock_va(rank, n, len)?;
        self.shared.home.bind()?;
        let bytes = runtime_state::read(va, 4 * len, self.home_ordinal())?;
        Ok(bytes
            .as_chunks::<4>()
            .0
            .iter()
            .map(|c| u32::from_ne_bytes(*c))
            .collect())
    }

    /// Address of rank `rank`'s barrier clock `n`, checked to hold `len`
    /// entries inside its mapping.
    fn barrier_clock_va(&self, rank: u32, n: u32, len: usize) -> VmmResult<u64> {
        let (va, global) = self.mapped_region(rank)?;
        let layout = RegionLayout::of(&global);
        let bytes = lock(&self.shared.runtime)
            .get(rank as usize)
            .copied()
            .flatten()
            .map_or(0, |r| r.mapping.bytes);
        let at = layout.barrier_clock(n);
        if len != global.num_threads as usize || at + layout.barrier_clock_bytes > bytes {
            return Err(VmmError::RuntimeStateTooLarge {
                ordinal: self.home_ordinal(),
                bytes: at + layout.barrier_clock_bytes,
                sms: global.num_sms,
                threads: global.num_threads,
                clock_buffer_size: global.clock_buffer_size,
                stride: bytes,
            });
        }
        Ok(va + at)
    }

    /// Where rank `rank`'s region is mapped here, and its `GlobalState`.
    fn mapped_region(&self, rank: u32) -> VmmResult<(u64, GlobalState)> {
        lock(&self.shared.runtime)
            .get(rank as usize)
            .copied()
            .flatten()
            .map(|r| (r.mapping.va, r.global))
            .ok_or(VmmError::NoRuntimeState {
                ordinal: self.home_ordinal(),
            })
    }

    fn home_ordinal(&self) -> usize {
        self.shared.home.ordinal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vigil_shared::address::{thread_state_address, PER_DEVICE_STATE_STRIDE};

    fn state(sms: u32, ranks: u32) -> GlobalState {
        GlobalState {
            num_sms: sms,
            num_devices: ranks,
            num_threads: sms * ranks,
            clock_buffer_size: 32,
            pool_capacity: 1 << 16,
            thread_state_bytes: 4096,
            ..GlobalState::default()
        }
    }

    /// Same layout: joinable, whatever the addresses; another SM count or
    /// group size: refused, naming the field and both values.
    #[test]
    fn peers_join_only_with_the_same_layout() {
        let own = state(132 * 7, 2);
        let mut peer = own;
        peer.pool_base = 0x1234;
        peer.reserve_base = 5 << 40;
        assert_eq!(runtime_mismatch(&own, &peer), None);
        let other = state(114 * 7, 2);
        assert_eq!(
            runtime_mismatch(&own, &other).as_deref(),
            Some("threads per device: 798, here 924")
        );
        let bigger = state(132 * 7, 4);
        assert_eq!(
            runtime_mismatch(&own, &bigger).as_deref(),
            Some("ranks: 4, here 2")
        );
    }

    proptest! {
        /// The address plan of a group, whatever its size and layout: every
        /// rank's thread states lie in its own region, below the pool; the
        /// group's pool, computed in any process and for any pooling rank,
        /// is where that rank's creation put it (rank 0's: its
        /// `GlobalState`'s `pool_base`, relative to that process's
        /// reservation), ends before the barrier clocks, and the two
        /// barrier clocks are disjoint and inside the region.
        #[test]
        fn the_group_address_plan_never_overlaps(
            sms in 1u32..200,
            world in 1u32..=8,
            cb in 1u32..=64,
            records in 0u32..=(1 << 16),
            base_a in 1u64..64,
            base_b in 1u64..64,
        ) {
            let n = sms * world;
            let layout = RegionLayout::new(sms, n, cb, records);
            prop_assume!(layout.fits());
            let owner = GlobalState {
                num_sms: sms,
                num_devices: world,
                num_threads: n,
                clock_buffer_size: cb,
                pool_capacity: records,
                thread_state_bytes: layout.thread_state_bytes as u32,
                pool_base: layout.pool_offset,
                ..GlobalState::default()
            };
            let stride = PER_DEVICE_STATE_STRIDE;
            for base in [base_a * 32 * stride, base_b * 32 * stride] {
                prop_assert_eq!(group_pool_base(base, POOL_RANK, &owner), base + owner.pool_base);
                // A group of devices of one process pools in its first
                // member's region, whatever that device's rank.
                for pool_rank in 0..world {
                    prop_assert_eq!(
                        group_pool_base(base, pool_rank, &owner),
                        device_globals(base, pool_rank) + layout.pool_offset
                    );
                }
                for tid in [0, sms - 1, n / 2, n - 1] {
                    let (rank, local) = (tid / sms, tid % sms);
                    let at = thread_state_address(base, rank, local, n, cb);
                    let region = device_globals(base, rank);
                    prop_assert!(at >= region + super::super::layout::THREAD_STATES_OFFSET);
                    prop_assert!(at + layout.thread_state_bytes <= region + layout.pool_offset);
                }
            }
            prop_assert!(layout.pool_offset < layout.barrier_offset);
            prop_assert!(layout.barrier_clock(0) + layout.barrier_clock_bytes <= layout.barrier_clock(1));
            prop_assert!(layout.barrier_clock(1) + layout.barrier_clock_bytes <= layout.used_bytes);
        }
    }
}
