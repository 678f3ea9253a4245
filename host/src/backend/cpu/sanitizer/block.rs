//! The CPU sanitizer's side of races inside a block: its hooks hand
//! accesses (each with its block's release epoch), barriers, what the
//! block acquired of its own releases and warp collectives to the per-SM
//! [`BlockRaces`](crate::backend::cpu::block_races::BlockRaces) state, and
//! its conflicts become [`RaceReport`]s in the same buffer as the
//! engine's (so `synchronize()` returns them as `Error::Races`).

use super::{lock, CpuRaceSanitizer};
use crate::backend::cpu::block_races::{race_kind, Conflict, Made};
use crate::sanitizer::decode::unlinear;
use crate::sanitizer::report::{
    MemorySpace, PriorAccess, RaceAccess, RaceAllocation, RaceReport, SourceLocation,
};
use std::panic::Location;
use std::sync::atomic::Ordering as MemOrder;
use vigil_device::host_runtime::{SharedAccess, ThreadContext};
use vigil_shared::{AccessKind, Scope};

/// One access as the block-level check sees it.
pub(super) struct BlockAccess {
    pub(super) addr: u64,
    pub(super) size: u64,
    pub(super) kind: AccessKind,
    pub(super) scope: Scope,
    pub(super) space: MemorySpace,
    /// For shared memory, the array (first byte, size in bytes).
    pub(super) array: Option<(u64, u64)>,
    /// For shared memory, where the view was allocated.
    pub(super) view: Option<&'static Location<'static>>,
    /// The block's release epoch at the access.
    pub(super) release_epoch: u16,
}

impl BlockAccess {
    /// A shared-memory access made in the block's release epoch `epoch`.
    pub(super) fn shared(access: SharedAccess, epoch: u16) -> BlockAccess {
        BlockAccess {
            addr: access.addr as u64,
            size: access.size as u64,
            kind: access.kind,
            scope: Scope::Block,
            space: MemorySpace::Shared,
            array: Some((access.array as u64, access.array_bytes as u64)),
            view: access.site,
            release_epoch: epoch,
        }
    }

    /// What the per-word check keeps of it, made at `location`.
    pub(super) fn made(&self, location: &'static Location<'static>) -> Made {
        Made {
            kind: self.kind,
            location,
            view: self.view,
            release_epoch: self.release_epoch,
        }
    }
}

impl CpuRaceSanitizer {
    /// Checks `a` by thread `t` against the other threads of its block's
    /// barrier interval (and the copies in flight), and reports what it
    /// races with.
    #[inline]
    pub(super) fn check_in_block(
        &self,
        t: &ThreadContext<'_>,
        a: BlockAccess,
        loc: &'static Location<'static>,
    ) {
        let conflicts =
            self.block
                .access(t.smid, t.linear_thread_index(), a.addr, a.size, a.made(loc));
        if !conflicts.is_empty() {
            self.report_in_block(t, &a, loc, &conflicts);
        }
    }

    /// Stores one report per conflict (or counts it when the buffer is
    /// full), then halts if configured to.
    #[cold]
    #[inline(never)]
    pub(super) fn report_in_block(
        &self,
        t: &ThreadContext<'_>,
        a: &BlockAccess,
        loc: &'static Location<'static>,
        conflicts: &[Conflict],
    ) {
        // The block's CTA: its serial names it, its launch the kernel.
        let (serial, kernel) = self
            .ctas
            .with(t.smid, |cta| (cta.serial, cta.launch.shape.kernel.clone()))
            .unwrap_or_default();
        for c in conflicts {
            let allocation = match a.array {
                Some((base, size)) => Some((base, size)),
                None => self.allocation_of(c.address).map(|x| (x.address, x.size)),
            }
            .map(|(base, size)| RaceAllocation {
                base,
                size,
                offset: c.address - base,
                site: None,
            });
            let report = RaceReport {
                kind: race_kind(c.prior.kind, a.kind),
                address: c.address,
                size: a.size as u32,
                allocation,
                space: a.space,
                kernel: kernel.clone(),
                current: RaceAccess {
                    access: a.kind,
                    scope: a.scope,
                    device: self.rank,
                    smid: t.smid,
                    block: t.block_idx,
                    thread: t.thread_idx,
                    location: Some(SourceLocation::from_std(loc)),
                    shared_view: a.view.map(SourceLocation::from_std),
                    host_issued: false,
                },
                prior: PriorAccess {
                    access: c.prior.kind,
                    scope: Scope::Block,
                    tid: serial,
                    device: self.rank,
                    smid: Some(t.smid),
                    epoch: c.prior.epoch,
                    block: Some(t.block_idx),
                    thread: Some(unlinear(u64::from(c.prior.thread), t.block_dim)),
                    kernel: Some(kernel.clone()),
                    location: Some(SourceLocation::from_std(c.prior.location)),
                    shared_view: c.prior.view.map(SourceLocation::from_std),
                    host_issued: false,
                    same_block: true,
                },
            };
            let mut reports = lock(&self.reports);
            if reports.iter().any(|r| repeats_in_block(r, &report)) {
                // One record per block, kind and both sites, as on the
                // GPU: a race every thread of a block repeats (a tile
                // reused without a barrier) is one finding, not thousands.
                continue;
            }
            if reports.len() < self.report_capacity {
                reports.push(report);
            } else {
                self.dropped.fetch_add(1, MemOrder::Relaxed);
            }
        }
        if self.halt_on_error {
            self.halt();
        }
    }
}

/// True when `new`, a race inside a block, repeats `kept`: the same
/// kernel, block, kind and both source locations (the GPU's sanitizer
/// keeps one record per block for those too).
fn repeats_in_block(kept: &RaceReport, new: &RaceReport) -> bool {
    kept.prior.same_block
        && kept.kind == new.kind
        && kept.current.block == new.current.block
        && kept.current.location == new.current.location
        && kept.prior.location == new.prior.location
        && kept.kernel == new.kernel
}
