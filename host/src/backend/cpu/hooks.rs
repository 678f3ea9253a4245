//! The sanitizer hook of the CPU backend: what a CPU [`Context`](crate::Context)
//! tells a [`CpuSanitizer`] and asks it for.
//!
//! A sanitized CPU context runs every launch through the kernel's checked
//! host entry ([`checked_entry`](super::executor::checked_entry)) with the
//! [`SanitizerRuntime`] that [`CpuSanitizer::runtime_for_launch`] returns,
//! and reports everything that orders work to the sanitizer: launches
//! (begin and end), allocations and frees, copies and fills (accesses of
//! their stream, [`CpuSanitizer::on_transfer`]), event records, stream
//! waits and host synchronisation. [`Context::synchronize`](crate::Context::synchronize)
//! and [`Stream::synchronize`](crate::Stream::synchronize) then collect
//! [`CpuSanitizer::take_reports`] and return them as
//! [`Error::Races`](crate::Error#variant.Races).
//!
//! # Ordering guarantee
//!
//! The CPU backend runs each operation (launch, copy, fill, event record,
//! stream wait) synchronously on the calling thread, in issue order, under
//! one lock per context. The calls a `CpuSanitizer` receives therefore form
//! one sequential history, in the order the operations took effect; the
//! per-thread hooks of a launch ([`SanitizerRuntime`]) all run between its
//! [`on_launch_begin`](CpuSanitizer::on_launch_begin) and
//! [`on_launch_end`](CpuSanitizer::on_launch_end). The happens-before
//! relation the sanitizer must use is still the stream/event one
//! (docs/src/design/ordering.md), not this execution order: two launches on unordered streams race
//! even though the CPU ran them one after the other.

use super::executor::{CpuError, LaunchStats};
use crate::backend::transfer::TransferKind;
use crate::error::{Error, Result};
use crate::sanitizer::config::SanitizerConfig;
use crate::sanitizer::report::RaceReports;
use crate::types::{EventId, LaunchConfig, StreamId};
use std::panic::Location;
use std::sync::Arc;
use vigil_device::host_runtime::SanitizerRuntime;
/// One launch, as the sanitizer sees it.
#[derive(Clone, Copy, Debug)]
pub struct LaunchInfo<'a> {
    /// The PTX entry name of the kernel.
    pub kernel: &'a str,
    /// Unique in the process, increasing in issue order.
    pub launch_id: u64,
    /// The stream it was launched on.
    pub stream: StreamId,
    /// Grid, block and dynamic shared memory.
    pub config: LaunchConfig,
    /// The executor's virtual SMs (blocks see `smid` below this).
    pub num_virtual_sms: u32,
}

/// An allocation of a CPU context (a [`DeviceBuffer`](crate::DeviceBuffer)'s
/// host memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostAllocation {
    /// Address of the first byte (the buffer's `device_ptr`).
    pub ptr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A host-issued copy or fill, as the sanitizer sees it: its device
/// reads and writes are accesses of `stream`, ordered like a launch on it
/// (after what the stream waited for; before its later work).
#[derive(Clone, Copy, Debug)]
pub struct TransferInfo {
    /// What it does (names the accesses in reports).
    pub kind: TransferKind,
    /// The stream it was issued on.
    pub stream: StreamId,
    /// The device range it reads, as (address, bytes).
    pub reads: Option<(u64, u64)>,
    /// The device range it writes, as (address, bytes).
    pub writes: Option<(u64, u64)>,
    /// Where the host code issued it (`#[track_caller]` through the copy
    /// methods).
    pub caller: &'static Location<'static>,
}

/// What the host waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostSync {
    /// Every stream of the context ([`Context::synchronize`](crate::Context::synchronize)).
    Context,
    /// One stream (its `synchronize`, or a copy to or from host memory,
    /// which waits for its stream).
    Stream(StreamId),
    /// The work before an event's last record ([`Event::synchronize`](crate::Event::synchronize)).
    Event(EventId),
}

/// Where a CPU context's buffers live: zeroed host memory handed out by
/// address. [`SystemAllocator`] (the process heap) unless the context's
/// [`CpuSanitizer::allocator`] supplies its own (e.g. an arena with the
/// shadow at a fixed offset).
pub trait HostBufferAllocator: Send + Sync {
    /// `size > 0` zeroed bytes aligned to at least `align` (a power of
    /// two); returns the address of the first byte.
    fn allocate(&self, size: u64, align: u64) -> Result<u64>;

    /// Frees an allocation.
    ///
    /// # Safety
    /// `ptr` came from [`allocate`](HostBufferAllocator::allocate) of this
    /// allocator with `size` and `align`, is freed once, and nothing uses
    /// it any more.
    unsafe fn deallocate(&self, ptr: u64, size: u64, align: u64) -> Result<()>;
}

/// The process heap (`std::alloc`), the CPU backend's default allocator.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemAllocator;

fn heap_layout(size: u64, align: u64) -> Result<std::alloc::Layout> {
    let bad = Error::HostOutOfMemory {
        bytes: usize::try_from(size).unwrap_or(usize::MAX),
    };
    let (size, align) = match (usize::try_from(size), usize::try_from(align)) {
        (Ok(s), Ok(a)) => (s, a),
        _ => return Err(bad),
    };
    std::alloc::Layout::from_size_align(size, align).map_err(|_| bad)
}

impl HostBufferAllocator for SystemAllocator {
    fn allocate(&self, size: u64, align: u64) -> Result<u64> {
        let layout = heap_layout(size, align)?;
        if layout.size() == 0 {
            return Err(Error::HostOutOfMemory { bytes: 0 });
        }
        // SAFETY: the layout has a non-zero size (checked above).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(Error::HostOutOfMemory {
                bytes: layout.size(),
            });
        }
        // Kernels and copies reach the memory through this address.
        Ok(p.expose_provenance() as u64)
    }

    unsafe fn deallocate(&self, ptr: u64, size: u64, align: u64) -> Result<()> {
        let layout = heap_layout(size, align)?;
        let p = std::ptr::with_exposed_provenance_mut::<u8>(ptr as usize);
        // SAFETY: allocated by `allocate` with this layout (the caller's
        // contract).
        unsafe { std::alloc::dealloc(p, layout) };
        Ok(())
    }
}

/// The sanitizer of a CPU context. Implemented by the CPU sanitizer runtime
/// (race engine over host shadow memory); the context calls it as the
/// [module documentation](self) says. Every method but
/// [`runtime_for_launch`](CpuSanitizer::runtime_for_launch) and
/// [`take_reports`](CpuSanitizer::take_reports) has an empty default.
pub trait CpuSanitizer: Send + Sync {
    /// The runtime the executor installs in every GPU thread of `launch`
    /// (called after [`on_launch_begin`](CpuSanitizer::on_launch_begin)).
    fn runtime_for_launch(&self, launch: &LaunchInfo<'_>) -> &dyn SanitizerRuntime;

    /// A launch is about to run: it is ordered after everything before it
    /// on its stream and after the events its stream waited for.
    fn on_launch_begin(&self, launch: &LaunchInfo<'_>) {
        let _ = launch;
    }

    /// The launch has finished (or failed: its blocks that ran keep their
    /// effects, as on a GPU).
    fn on_launch_end(&self, launch: &LaunchInfo<'_>, outcome: Result<&LaunchStats, &CpuError>) {
        let _ = (launch, outcome);
    }

    /// A buffer was allocated (its memory is zeroed; its shadow must
    /// start clean).
    fn on_alloc(&self, alloc: HostAllocation) {
        let _ = alloc;
    }

    /// A buffer is about to be freed (the address may be reused by a later
    /// allocation).
    fn on_free(&self, alloc: HostAllocation) {
        let _ = alloc;
    }

    /// A copy or fill is about to run on its stream (a copy to or from
    /// host memory is followed by [`on_host_sync`](CpuSanitizer::on_host_sync)
    /// of its stream, as it waits for it).
    fn on_transfer(&self, transfer: &TransferInfo) {
        let _ = transfer;
    }

    /// `true` once after a launch that the sanitizer stopped at its first
    /// race (halt on error: it unwound the racing block): the backend then
    /// ends the launch without an error and the next synchronisation
    /// returns the race.
    fn take_halt(&self) -> bool {
        false
    }

    /// `event` was recorded at the current end of `stream`.
    fn on_event_record(&self, event: EventId, stream: StreamId) {
        let _ = (event, stream);
    }

    /// Work issued on `stream` from now on waits for `event`'s last record.
    fn on_stream_wait(&self, stream: StreamId, event: EventId) {
        let _ = (stream, event);
    }

    /// The host waited for `sync`: work issued after this, on any stream,
    /// is ordered after the work waited for.
    fn on_host_sync(&self, sync: HostSync) {
        let _ = sync;
    }

    /// The reports found since the last call (de-duplicated, with the count
    /// of reports that could not be recorded).
    fn take_reports(&self) -> RaceReports;

    /// The allocator of the context's buffers, when the sanitizer keeps
    /// them itself (default: `None`, the process heap; the sanitizer still
    /// hears of every buffer through [`on_alloc`](CpuSanitizer::on_alloc)
    /// and [`on_free`](CpuSanitizer::on_free)).
    fn allocator(&self) -> Option<&dyn HostBufferAllocator> {
        None
    }
}

/// What the built-in CPU sanitizer is created from.
#[derive(Clone, Debug)]
pub struct CpuSanitizerParams {
    /// Virtual SMs of the context's executor (sanitizer threads).
    pub num_virtual_sms: u32,
    /// The sanitizer settings (seed, clock-buffer size, ...).
    pub config: SanitizerConfig,
}

/// The CPU sanitizer a context gets when the sanitizer is switched on
/// (`VIGIL_SANITIZE=1`, [`ContextBuilder::sanitize`](crate::ContextBuilder::sanitize))
/// and none is supplied with
/// [`ContextBuilder::cpu_sanitizer`](crate::ContextBuilder::cpu_sanitizer).
///
/// It is [`CpuRaceSanitizer`](super::sanitizer::CpuRaceSanitizer) with
/// the settings `params` give; `None` (said on stderr) when its memory
/// cannot be reserved, and the context then reports
/// [`Error::Unsupported`](crate::Error::Unsupported).
pub(crate) fn default_cpu_sanitizer(params: &CpuSanitizerParams) -> Option<Arc<dyn CpuSanitizer>> {
    match group_cpu_sanitizers(params, 1) {
        Ok(mut one) => one.pop(),
        Err(e) => {
            eprintln!("vigil: the CPU sanitizer could not start: {e}");
            None
        }
    }
}

/// The sanitizers of a group of `world` simulated devices sharing one race
/// engine ([`CpuRaceSanitizer::group`](super::sanitizer::CpuRaceSanitizer::group)),
/// by rank, with the settings `params` give each device.
pub(crate) fn group_cpu_sanitizers(
    params: &CpuSanitizerParams,
    world: u32,
) -> Result<Vec<Arc<dyn CpuSanitizer>>> {
    use super::sanitizer::{CpuRaceSanitizer, CpuSanitizerConfig};
    let group =
        CpuRaceSanitizer::group(&CpuSanitizerConfig::from_params(params), world).map_err(|e| {
            Error::Sanitizer {
                message: e.to_string(),
            }
        })?;
    Ok(group
        .into_iter()
        .map(|s| Arc::new(s) as Arc<dyn CpuSanitizer>)
        .collect())
}
