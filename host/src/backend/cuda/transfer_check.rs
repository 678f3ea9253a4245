//! A sanitized context's host-issued copies and fills as accesses of
//! their stream: each is a launch of the range-access entry on the
//! transfer's stream just before the transfer (copies and fills are
//! accesses, docs/src/design/ordering.md), planned by the GPU sanitizer like a kernel launch, so
//! stream order, events and host synchronisations order it exactly as
//! they order kernels. A plain context never comes here.

use std::panic::Location;
use std::sync::Arc;

use super::module::CudaModule;
use super::sanitizer::{GpuSanitizer, RangeCheck, RangeEntry};
use super::stream::CudaStream;
use super::CudaBackend;
use crate::backend::transfer::Transfer;
use crate::error::Result;
use crate::types::StreamId;

impl CudaBackend {
    /// Checks `op`, about to be enqueued on `stream`, as reads and writes
    /// of its device ranges made at `caller`. Before any module with the
    /// range-access entry was loaded on the device, the check is planned
    /// now and runs when one is ([`CudaBackend::offer_module`]).
    pub(super) fn check_transfer(
        &self,
        (stream, id): (&CudaStream, StreamId),
        op: &Transfer<'_>,
        caller: &'static Location<'static>,
    ) -> Result<()> {
        let san = self.gpu_sanitizer()?;
        let (reads, writes) = (op.device_reads(), op.device_writes());
        let planned =
            san.prepare_transfer(self.owner(), stream, id, op.kind(), reads, writes, caller)?;
        match planned {
            Some((entry, check)) => self.launch_check(&san, &entry, &check, stream),
            None => Ok(()),
        }
    }

    /// Offers a module just loaded to the device's GPU sanitizer (in a
    /// sanitized context): the first with the range-access entry gives it
    /// to every later transfer check, and the checks planned before run
    /// now, in order, each finished before the next starts and before this
    /// returns, on a stream of their own (no kernel has run on the device
    /// before: kernels come from modules, and every `#[kernel]` module has
    /// the entry). A module without it (hand-written PTX) changes nothing.
    pub(crate) fn offer_module(&self, module: &Arc<CudaModule>) -> Result<()> {
        if self.pool().is_none() {
            return Ok(());
        }
        let san = self.gpu_sanitizer()?;
        let Some((entry, mut batch)) = san.offer_module(module)? else {
            return Ok(());
        };
        // After a failure the rest is dropped, but the entry still becomes
        // ready: later transfers are checked, not queued for ever.
        let mut ran = Ok(());
        while !batch.is_empty() {
            if ran.is_ok() {
                ran = self.run_waiting(&san, &entry, batch);
            }
            batch = san.take_flushing();
        }
        ran
    }

    /// Enqueues `check` on `stream`: the range-access entry with the
    /// arguments the sanitizer built for it.
    fn launch_check(
        &self,
        san: &GpuSanitizer,
        entry: &RangeEntry,
        check: &RangeCheck,
        stream: &CudaStream,
    ) -> Result<()> {
        let args = san.range_args(check);
        self.note_shadow_writes();
        self.enqueue(&entry.func, stream, &check.name, check.config, &args)
    }

    /// Runs checks that waited for the entry, one at a time.
    fn run_waiting(
        &self,
        san: &GpuSanitizer,
        entry: &RangeEntry,
        batch: Vec<RangeCheck>,
    ) -> Result<()> {
        san.with_own_stream(|own| {
            for mut check in batch {
                check.write_header(own)?;
                self.launch_check(san, entry, &check, own)?;
                // The next check may join this one's exit clock.
                own.synchronize()?;
            }
            Ok(())
        })
    }
}
