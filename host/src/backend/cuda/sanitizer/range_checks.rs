//! Host-issued copies and fills as accesses of their stream on the GPU.
//!
//! A transfer in a sanitized context is a launch of the range-access entry
//! ([`RANGE_ACCESS_ENTRY`](vigil_shared::gpu::RANGE_ACCESS_ENTRY), in
//! every kernel crate's PTX) on the transfer's stream, just before it
//! ([`GpuSanitizer::prepare_transfer`]), planned like a kernel launch of
//! one serial: streams, events and host synchronisations order it. The
//! entry comes from the first module loaded on the device that has it
//! ([`GpuSanitizer::offer_module`]); transfers before that are planned at
//! once (their records written then: no kernel of the device has run)
//! and queued, and run when it arrives, one after the other, each waited
//! for. The call site travels as a tag (`host_sites`).

use std::ffi::CStr;
use std::panic::Location;
use std::sync::Arc;

use vigil_shared::gpu::{
    range_access_blocks, shadow_reclaim_blocks, RANGE_ACCESS_PARAMS, RANGE_BLOCK_THREADS,
    SHADOW_RECLAIM_PARAMS,
};

use super::{lock, GpuSanitizer, RecordPlan};
use crate::backend::cuda::module::{CudaFunction, CudaModule};
use crate::backend::cuda::stream::CudaStream;
use crate::backend::transfer::TransferKind;
use crate::error::{Error, Result};
use crate::launch_abi::params::ParamBuffer;
use crate::sanitizer::decode::LaunchShape;
use crate::sanitizer::order::Work;
use crate::types::{LaunchConfig, StreamId};

/// The range-access entry as a module looks it up: by its plain name,
/// which in a sanitized module finds `name__vigil`.
const RANGE_ACCESS_LOOKUP: &CStr = c"vigil_range_access";

/// The shadow-reclaim entry as a module looks it up (see
/// [`RANGE_ACCESS_LOOKUP`]).
const SHADOW_RECLAIM_LOOKUP: &CStr = c"vigil_shadow_reclaim";

/// The range-access entry of a module loaded on this device (kept loaded
/// for as long as the sanitizer lives), with the shadow-reclaim entry
/// beside it.
pub(crate) struct RangeEntry {
    _module: Arc<CudaModule>,
    /// The entry.
    pub func: CudaFunction,
    /// The shadow-reclaim entry (`None` in a module built before it
    /// existed: freed buffers then keep their records).
    pub reclaim: Option<CudaFunction>,
}

/// One launch of the range-access entry: a host-issued copy or fill.
pub(crate) struct RangeCheck {
    /// What reports call it (`memset on stream #2`).
    pub name: String,
    /// Its grid.
    pub config: LaunchConfig,
    /// The ranges it reads and writes (`(address, bytes)`).
    ranges: [(u64, u64); 2],
    /// The call site's tag, line and column.
    site: (u64, u32, u32),
    /// Its serial, bounds and ring record (written when it was planned).
    plan: RecordPlan,
}

impl RangeCheck {
    /// Nothing left to enqueue before it runs: its record was written
    /// when it was planned.
    pub fn write_header(&mut self, _stream: &CudaStream) -> Result<()> {
        Ok(())
    }

    /// Checks nothing of `[base, base + bytes)` any more (the memory was
    /// freed before the check could run); still runs, for its clocks.
    fn forget(&mut self, base: u64, bytes: u64) {
        for r in &mut self.ranges {
            if r.0 < base.saturating_add(bytes) && base < r.0.saturating_add(r.1) {
                *r = (0, 0);
            }
        }
    }
}

/// Where the device's range-access entry stands.
pub(super) enum RangeState {
    /// No module with the entry loaded yet: the planned checks, in order.
    Waiting(Vec<RangeCheck>),
    /// The entry came; the module load that brought it runs the checks
    /// that waited, and checks planned meanwhile queue behind them.
    Flushing(Arc<RangeEntry>, Vec<RangeCheck>),
    /// The entry: every check runs on its transfer's stream.
    Ready(Arc<RangeEntry>),
}

impl GpuSanitizer {
    /// Plans the check of a host-issued `kind` transfer on `stream` that
    /// reads and writes the given device ranges (`(address, bytes)`),
    /// issued at `caller`: a launch of the range-access entry, named after
    /// the transfer. Returns it with the entry to launch it on `stream`
    /// now, before the transfer (its header enqueued); or queues it until
    /// a module brings the entry ([`GpuSanitizer::offer_module`]).
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_transfer(
        &self,
        owner: u64,
        stream: &CudaStream,
        stream_id: StreamId,
        kind: TransferKind,
        reads: Option<(u64, u64)>,
        writes: Option<(u64, u64)>,
        caller: &'static Location<'static>,
    ) -> Result<Option<(Arc<RangeEntry>, RangeCheck)>> {
        let (reads, writes) = (reads.unwrap_or((0, 0)), writes.unwrap_or((0, 0)));
        let config = LaunchConfig::new(range_access_blocks(reads, writes), RANGE_BLOCK_THREADS);
        let name = kind.on_stream(stream_id);
        let mut st = lock(&self.state);
        let site = st.sites.tag(caller);
        let shape = LaunchShape {
            kernel: name.clone(),
            grid: config.grid,
            block: config.block,
            host_issued: true,
        };
        let plan = self.plan(
            &mut st,
            owner,
            stream_id,
            shape,
            1,
            Work::Transfer,
            Some(site),
        )?;
        self.device.bind()?;
        let ready = matches!(st.range, RangeState::Ready(_));
        self.enqueue_record(&mut st, &plan, ready.then_some(stream))?;
        let check = RangeCheck {
            name,
            config,
            ranges: [reads, writes],
            site: (site, caller.line(), caller.column()),
            plan,
        };
        match &mut st.range {
            RangeState::Ready(entry) => Ok(Some((entry.clone(), check))),
            RangeState::Waiting(queue) | RangeState::Flushing(_, queue) => {
                queue.push(check);
                Ok(None)
            }
        }
    }

    /// The arguments of `check`'s launch ([`RANGE_ACCESS_PARAMS`], then
    /// the hidden ones).
    pub fn range_args(&self, check: &RangeCheck) -> ParamBuffer {
        let mut user = ParamBuffer::with_capacity(48, RANGE_ACCESS_PARAMS.len());
        let ordinal = Some(self.device.ordinal());
        for (i, (addr, bytes)) in check.ranges.into_iter().enumerate() {
            user.begin_arg(2 * i);
            user.push_pointer(addr, ordinal);
            user.begin_arg(2 * i + 1);
            user.push(bytes);
        }
        let (site, line, column) = check.site;
        user.begin_arg(4);
        user.push(site);
        user.begin_arg(5);
        user.push(line);
        user.begin_arg(6);
        user.push(column);
        self.with_hidden(&user, &check.plan)
    }

    /// `[base, base + bytes)` is being freed: checks still waiting for
    /// the entry no longer look at it (the block's shadow is reset before
    /// it is reused; a late check must not write it again).
    pub fn forget_waiting(&self, base: u64, bytes: u64) {
        if let RangeState::Waiting(queue) | RangeState::Flushing(_, queue) =
            &mut lock(&self.state).range
        {
            for check in queue {
                check.forget(base, bytes);
            }
        }
    }

    /// Takes the range-access entry from `module` if the device has none
    /// yet and the module has it; returns it with the checks that waited
    /// for it, in the order they were planned. The caller runs them, each
    /// to its end before the next, then the ones planned meanwhile
    /// ([`GpuSanitizer::take_flushing`]) until none is left; until then
    /// new checks still queue. `None` when nothing changed.
    pub fn offer_module(
        &self,
        module: &Arc<CudaModule>,
    ) -> Result<Option<(Arc<RangeEntry>, Vec<RangeCheck>)>> {
        let mut st = lock(&self.state);
        if !matches!(st.range, RangeState::Waiting(_)) {
            return Ok(None);
        }
        let func = match module.function(RANGE_ACCESS_LOOKUP) {
            Ok(f) => f,
            Err(Error::EntryNotLoaded { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let reclaim = match module.function(SHADOW_RECLAIM_LOOKUP) {
            Ok(f) => Some(f),
            Err(Error::EntryNotLoaded { .. }) => None,
            Err(e) => return Err(e),
        };
        let entry = Arc::new(RangeEntry {
            _module: module.clone(),
            func,
            reclaim,
        });
        let next = RangeState::Flushing(entry.clone(), Vec::new());
        let RangeState::Waiting(queued) = std::mem::replace(&mut st.range, next) else {
            return Ok(None); // checked above, under the same lock
        };
        if queued.is_empty() {
            st.range = RangeState::Ready(entry.clone());
        }
        Ok(Some((entry, queued)))
    }

    /// The device's entries, once a module brought them (before that, no
    /// sanitized work ran on the device).
    pub fn entries(&self) -> Option<Arc<RangeEntry>> {
        match &lock(&self.state).range {
            RangeState::Ready(e) | RangeState::Flushing(e, _) => Some(e.clone()),
            RangeState::Waiting(_) => None,
        }
    }

    /// The launch of the shadow-reclaim entry over the freed block at
    /// `addr` of `bytes` (line-aligned): its grid and arguments
    /// ([`SHADOW_RECLAIM_PARAMS`]).
    pub fn reclaim_launch(&self, addr: u64, bytes: u64) -> (LaunchConfig, ParamBuffer) {
        let mut args = ParamBuffer::with_capacity(24, SHADOW_RECLAIM_PARAMS.len());
        let ordinal = Some(self.device.ordinal());
        args.begin_arg(0);
        args.push_pointer(self.runtime.addr, ordinal);
        args.begin_arg(1);
        args.push_pointer(addr, ordinal);
        args.begin_arg(2);
        args.push(bytes);
        let config = LaunchConfig::new(shadow_reclaim_blocks(bytes), RANGE_BLOCK_THREADS);
        (config, args)
    }

    /// The checks planned while the waiting ones ran; when there are none,
    /// the entry is ready for every later transfer.
    pub fn take_flushing(&self) -> Vec<RangeCheck> {
        let mut st = lock(&self.state);
        match &mut st.range {
            RangeState::Flushing(entry, queue) if queue.is_empty() => {
                st.range = RangeState::Ready(entry.clone());
                Vec::new()
            }
            RangeState::Flushing(_, queue) => std::mem::take(queue),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::gpu::{RANGE_ACCESS_ENTRY, SANITIZED_SUFFIX};

    /// A check that waited for the entry forgets exactly the ranges that
    /// overlap freed memory, and still runs (for its clocks).
    #[test]
    fn a_waiting_check_forgets_freed_ranges() {
        let mut check = RangeCheck {
            name: "device-to-device copy on stream #1".to_owned(),
            config: LaunchConfig::new(1, 1),
            ranges: [(0x1000, 0x100), (0x2000, 0x100)],
            site: (0, 1, 1),
            plan: RecordPlan::for_test(),
        };
        check.forget(0x1100, 0x100); // adjacent: kept
        assert_eq!(check.ranges, [(0x1000, 0x100), (0x2000, 0x100)]);
        check.forget(0x2080, 0x1000); // overlaps the written range
        assert_eq!(check.ranges, [(0x1000, 0x100), (0, 0)]);
        check.forget(0x0, 0x1001);
        assert_eq!(check.ranges, [(0, 0), (0, 0)]);
    }

    #[test]
    fn the_range_access_lookup_finds_the_shared_entry() {
        let lookup = RANGE_ACCESS_LOOKUP.to_str().unwrap();
        assert_eq!(format!("{lookup}{SANITIZED_SUFFIX}"), RANGE_ACCESS_ENTRY);
    }
}
