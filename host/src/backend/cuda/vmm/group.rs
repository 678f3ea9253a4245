//! The runtime state wired to a group (docs/src/design/groups.md): every
//! rank's region mapped at its rank's stride and reachable from every
//! member's device (imported from another process with
//! [`Vmm::import_runtime_state`], or, for several devices of this
//! process, their own regions opened to each other with
//! [`Vmm::grant_runtime_state`]), the engine's tables of the group found
//! in its [`TABLES_RANK`]'s region ([`Vmm::engine_tables`]), and the host
//! clocks ranks publish at a group barrier.

use super::super::AsCudaDevice;
use super::physical::PhysOps;
use super::runtime_state::{self, EngineTables, RegionHeader, RegionLayout, TABLES_RANK};
use super::{lock, physical, Vmm, VmmError, VmmResult};
use vigil_shared::race::serial::LANES;

/// Why a peer's runtime state cannot join this process's: the first field
/// that differs, with both values. The region format, the group's size,
/// the serial lanes and the record pool must agree across the group.
/// Pure: tested on the CPU.
pub fn runtime_mismatch(own: &RegionHeader, peer: &RegionHeader) -> Option<String> {
    let fields = [
        ("region format", own.format, peer.format),
        ("ranks", own.world, peer.world),
        ("serial lanes", own.lanes, peer.lanes),
    ];
    fields
        .iter()
        .find(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what}: {b:#x}, here {a:#x}"))
}

/// Why a peer's region, mapped as `mapped` bytes (the size its owner
/// announced: each rank's region has its own, only the tables rank's
/// holds the engine's tables), cannot hold what its header says it holds.
/// Pure: tested on the CPU.
pub fn mapped_mismatch(peer: &RegionHeader, mapped: u64) -> Option<String> {
    let used = RegionLayout::of(peer).used_bytes;
    (used > mapped).then(|| format!("region bytes: {used:#x} laid out, {mapped:#x} shared"))
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

    /// The engine's tables device `ordinal`'s sanitizer works on, as
    /// mapped here: in a group of processes, those of rank
    /// [`TABLES_RANK`]'s region (imported by the group's join; until then
    /// [`VmmError::NoRuntimeState`]), otherwise the device's own.
    pub fn engine_tables(&self, ordinal: usize) -> VmmResult<EngineTables> {
        let own = self.runtime_of(ordinal)?;
        let in_processes = self.config().process_rank().is_some_and(|p| p.world > 1);
        let holder = if in_processes {
            lock(&self.shared.runtime)
                .get(TABLES_RANK as usize)
                .copied()
                .flatten()
                .ok_or(VmmError::NoRuntimeState { ordinal })?
        } else {
            own
        };
        holder.tables().ok_or(VmmError::NoRuntimeState { ordinal })
    }

    /// The first of `ranks` (mapped here) whose runtime state is laid out
    /// unlike device `ordinal`'s, with the field that differs (see
    /// [`runtime_mismatch`]); `None` when all agree.
    pub fn group_mismatch(
        &self,
        ordinal: usize,
        ranks: &[u32],
    ) -> VmmResult<Option<(u32, String)>> {
        let own = self.runtime_of(ordinal)?.header;
        for &rank in ranks {
            let peer = self.mapped_runtime(rank)?;
            let what = runtime_mismatch(&own, &peer.header)
                .or_else(|| mapped_mismatch(&peer.header, peer.mapping.bytes));
            if let Some(what) = what {
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
    /// one process): its engine tables and barrier clocks.
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

    /// Publishes `clock` (a host clock, one bound per lane) as device
    /// `ordinal`'s host clock of the group's barrier number `n` (in its
    /// own region).
    pub fn publish_barrier_clock(&self, ordinal: usize, n: u32, clock: &[u32]) -> VmmResult<()> {
        let rank = self.runtime_of(ordinal)?.rank;
        let va = self.barrier_clock_va(rank, n)?;
        let mut lanes = [0u32; LANES];
        for (l, c) in lanes.iter_mut().zip(clock) {
            *l = *c;
        }
        self.shared.home.bind()?;
        runtime_state::write(va, bytemuck::cast_slice(&lanes), ordinal)
    }

    /// The host clock rank `rank` published at barrier number `n` (one
    /// bound per lane).
    pub fn read_barrier_clock(&self, rank: u32, n: u32) -> VmmResult<Vec<u32>> {
        let va = self.barrier_clock_va(rank, n)?;
        self.shared.home.bind()?;
        let bytes = runtime_state::read(va, 4 * LANES, self.home_ordinal())?;
        Ok(bytes
            .as_chunks::<4>()
            .0
            .iter()
            .map(|c| u32::from_ne_bytes(*c))
            .collect())
    }

    /// Address of rank `rank`'s barrier clock `n` (every region has both).
    fn barrier_clock_va(&self, rank: u32, n: u32) -> VmmResult<u64> {
        let region = self.mapped_runtime(rank)?;
        Ok(region.mapping.va + RegionLayout::barrier_clock(n))
    }

    /// Rank `rank`'s region as mapped here.
    fn mapped_runtime(&self, rank: u32) -> VmmResult<runtime_state::DeviceRuntime> {
        lock(&self.shared.runtime)
            .get(rank as usize)
            .copied()
            .flatten()
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
    use vigil_shared::race::serial::LANES;

    fn header(world: u32, tables: bool) -> RegionHeader {
        RegionHeader {
            format: runtime_state::REGION_FORMAT,
            world,
            lanes: LANES as u32,
            tables: u32::from(tables),
            pool_records: if tables { 1 << 16 } else { 0 },
            ..RegionHeader::default()
        }
    }

    /// Same format, group size and lanes: joinable, whatever the
    /// addresses and whether the region holds the tables; another group
    /// size or build: refused, naming the field and both values.
    #[test]
    fn peers_join_only_with_the_same_layout() {
        let own = header(2, true);
        let mut peer = header(2, false);
        peer.reserve_base = 5 << 40;
        peer.rank = 1;
        assert_eq!(runtime_mismatch(&own, &peer), None);
        assert_eq!(
            runtime_mismatch(&own, &header(4, false)).as_deref(),
            Some("ranks: 0x4, here 0x2")
        );
        let mut old = header(2, true);
        old.format = 0x5647_0001;
        assert_eq!(
            runtime_mismatch(&own, &old).as_deref(),
            Some("region format: 0x56470001, here 0x56470002")
        );
    }

    /// Each rank shares its own region's bytes (only the tables rank's
    /// holds the tables): a region is usable when its mapping holds
    /// what its header lays out, whatever the other ranks' sizes.
    #[test]
    fn a_region_must_hold_what_its_header_lays_out() {
        let granule = 2u64 << 20;
        let with = header(2, true);
        let without = header(2, false);
        let used = |h: &RegionHeader| RegionLayout::of(h).used_bytes;
        let rounded = |h: &RegionHeader| used(h).div_ceil(granule) * granule;
        assert!(rounded(&without) < rounded(&with));
        assert_eq!(mapped_mismatch(&with, rounded(&with)), None);
        assert_eq!(mapped_mismatch(&without, rounded(&without)), None);
        assert_eq!(mapped_mismatch(&without, rounded(&with)), None);
        assert_eq!(
            mapped_mismatch(&with, rounded(&without)),
            Some(format!(
                "region bytes: {:#x} laid out, {:#x} shared",
                used(&with),
                rounded(&without)
            ))
        );
    }
}
