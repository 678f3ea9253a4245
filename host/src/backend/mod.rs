//! The backend interface: the ONE place that dispatches an operation to
//! the context's backend.
//!
//! [`Backend`] is an enum of the two backends ([`cuda`], [`cpu`]), and the
//! handles the front end keeps for streams, events, modules and functions
//! are enums with one variant per backend. Every `match` on them is in this
//! file; the front end calls a method here and never sees a variant. An
//! enum rather than a trait object: the set of backends is closed and
//! small, each handle stays a plain value (no `Box<dyn>` per stream or
//! event), a pairing of handles (an event recorded on a stream) is one
//! exhaustive `match` rather than a downcast, and adding an operation is
//! one method here plus one in each backend.

pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod launch;
pub(crate) mod transfer;

// The backend types the front end names in its public signatures (what a
// context reports, which sanitizer it takes, the CUDA-only tools' inputs):
// the front end imports them from here, never from a backend's folder.
pub(crate) use cpu::executor::{CpuExecutor, LaunchStats};
pub(crate) use cpu::hooks::{group_cpu_sanitizers, CpuSanitizer, CpuSanitizerParams};
pub(crate) use cpu::launch::HostEntry;
pub(crate) use cpu::CpuOptions;
pub(crate) use cuda::device::{device_count, gpu_available};
pub(crate) use cuda::vmm::{
    Allocation as VmmAllocation, CachingPool, ExportedAllocation, ExportedRuntimeState, Vmm,
};
pub(crate) use cuda::{AsCudaDevice, AsCudaStream, CudaDevice, CudaStream};
pub(crate) use launch::Launch;
pub(crate) use transfer::Transfer;

use crate::error::{Error, Result};
use crate::launch_abi::ptx_cut::cut_for;
use crate::sanitizer::config::SanitizerConfig;
use crate::sanitizer::report::RaceReports;
use crate::types::{
    DeviceId, DeviceProps, EventId, FunctionAttrs, LaunchConfig, LaunchVariant, StreamId,
    TensorElementType,
};
use cpu::executor::KernelEntry;
use cpu::globals::CpuModule;
use cpu::hooks::HostSync;
use cpu::{CpuBackend, CpuEvent};
use cuda::module::{CudaFunction, CudaKernel, CudaModule};
use cuda::sanitizer::HostWait;
use cuda::{CudaBackend, CudaEvent};
use cudarc::driver::sys;
use std::ffi::{CStr, CString};
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;
use vigil_shared::gpu::GLOBAL_SYMBOL_PREFIX;
use vigil_shared::tensor_map::{TensorMapBytes, TiledMap};

/// How a context reaches its device.
pub(crate) enum Backend {
    Cuda(CudaBackend),
    Cpu(CpuBackend),
}

/// A stream's backend half.
pub(crate) enum StreamHandle {
    Cuda(CudaStream),
    /// CPU work runs when issued; the stream is only its id.
    Cpu,
}

/// An event's backend half.
pub(crate) enum EventHandle {
    Cuda(CudaEvent),
    Cpu(CpuEvent),
}

/// A module's backend half.
pub(crate) enum ModuleHandle {
    /// Shared with the device's GPU sanitizer when it keeps the module's
    /// range-access entry.
    Cuda(Arc<CudaModule>),
    /// The CPU backend does not compile PTX (it runs the Rust body); it
    /// keeps where the module's device globals are.
    Cpu(Arc<CpuModule>),
}

/// A function's backend half: the kernel's entry points, looked up once
/// when the front end looks the kernel up.
pub(crate) enum FunctionHandle {
    /// The plain and the sanitized entry, as the module has them.
    Cuda(CudaKernel),
    /// The kernel's host code (its plain and checked entries), when the
    /// function came from a Rust kernel; the CPU backend can only launch
    /// those), and its module.
    Cpu(Option<HostEntry>, Arc<CpuModule>),
}

/// The entry point one launch runs, picked from its function's entries
/// ([`Backend::entry`]) before the launch is checked.
pub(crate) struct LaunchEntry<'f> {
    run: EntryHandle<'f>,
    /// The variant the entry is (a sanitized launch of a kernel without a
    /// sanitized entry runs the plain one).
    pub(crate) variant: LaunchVariant,
    /// What the launch's configuration is checked against.
    pub(crate) attrs: FunctionAttrs,
}

enum EntryHandle<'f> {
    Cuda(&'f CudaFunction),
    /// The host entry of the launch's variant; none for a function looked
    /// up by name, which has no host code (refused when launched, after
    /// the launch's checks); and the function's module.
    Cpu(Option<KernelEntry>, &'f CpuModule),
}

/// Opens a GPU backend (`sanitize`: buffers from the shadow allocator).
pub(crate) fn open_cuda(
    ordinal: usize,
    sanitize: bool,
    config: SanitizerConfig,
) -> Result<Backend> {
    Ok(Backend::Cuda(CudaBackend::open(ordinal, sanitize, config)?))
}

/// Opens a CPU backend.
pub(crate) fn open_cpu(options: CpuOptions) -> Result<Backend> {
    Ok(Backend::Cpu(CpuBackend::open(options)?))
}

impl Backend {
    /// The error for a handle of the other backend (cannot happen through
    /// the front end, which checks devices first).
    fn foreign(&self, op: &'static str) -> Error {
        Error::Unsupported {
            op,
            backend: self.device_id(),
            reason: "the handle belongs to another backend",
        }
    }

    /// The error for a GPU-only operation on the CPU backend.
    pub(crate) fn gpu_only(&self, op: &'static str) -> Error {
        Error::Unsupported {
            op,
            backend: self.device_id(),
            reason: "it is a CUDA driver operation",
        }
    }

    pub(crate) fn device_id(&self) -> DeviceId {
        match self {
            Backend::Cuda(c) => c.device_id(),
            Backend::Cpu(_) => DeviceId::Cpu,
        }
    }

    pub(crate) fn props(&self) -> &DeviceProps {
        match self {
            Backend::Cuda(c) => c.device().props(),
            Backend::Cpu(c) => c.props(),
        }
    }

    /// True in sanitized mode (GPU: shadow allocator; CPU: a sanitizer).
    pub(crate) fn is_sanitized(&self) -> bool {
        match self {
            Backend::Cuda(c) => c.pool().is_some(),
            Backend::Cpu(c) => c.sanitizer().is_some(),
        }
    }

    /// Whether the backend can run the sanitized kernel variant (both can:
    /// the CPU's checked host entry, the GPU's `name__vigil` entry).
    pub(crate) fn runs_sanitized_launches(&self) -> bool {
        true
    }

    pub(crate) fn cuda_device(&self) -> Option<&Arc<CudaDevice>> {
        match self {
            Backend::Cuda(c) => Some(c.device()),
            Backend::Cpu(_) => None,
        }
    }

    pub(crate) fn sanitizer_pool(&self) -> Option<&CachingPool> {
        match self {
            Backend::Cuda(c) => c.pool(),
            Backend::Cpu(_) => None,
        }
    }

    pub(crate) fn cpu_executor(&self) -> Option<&CpuExecutor> {
        match self {
            Backend::Cuda(_) => None,
            Backend::Cpu(c) => Some(c.executor()),
        }
    }

    pub(crate) fn last_cpu_launch(&self) -> Option<LaunchStats> {
        match self {
            Backend::Cuda(_) => None,
            Backend::Cpu(c) => c.last_launch(),
        }
    }

    fn cuda(&self, op: &'static str) -> Result<&Arc<CudaDevice>> {
        self.cuda_device().ok_or_else(|| self.gpu_only(op))
    }

    /// Lets kernels on this device reach `peer`'s memory: CUDA peer
    /// access; nothing on the CPU backend (one address space). Devices of
    /// different backends cannot be peers.
    pub(crate) fn enable_peer_access(&self, peer: &Backend) -> Result<()> {
        match (self, peer) {
            (Backend::Cuda(a), Backend::Cuda(b)) => {
                cuda::peer::enable_peer_access(a.device(), b.device())
            }
            (Backend::Cpu(_), Backend::Cpu(_)) => Ok(()),
            _ => Err(self.foreign("enabling peer access")),
        }
    }

    pub(crate) fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        self.cuda("Context::attribute")?.attribute(attr)
    }

    pub(crate) fn memory_info(&self) -> Result<(usize, usize)> {
        self.cuda("Context::memory_info")?.memory_info()
    }

    pub(crate) fn bind(&self) -> Result<()> {
        self.cuda("Context::bind")?.bind()
    }

    /// Waits for all work of the device (the host's wait is noted by the
    /// CPU sanitizer).
    /// On a GPU, gives up after `timeout` ([`Error::Timeout`]).
    pub(crate) fn synchronize(&self, timeout: Option<Duration>) -> Result<()> {
        match self {
            Backend::Cuda(c) => {
                c.synchronize_within(timeout)?;
                if let Some(s) = c.sanitizer_if_any() {
                    s.on_host_wait(c.owner(), HostWait::All)?;
                }
                Ok(())
            }
            Backend::Cpu(c) => {
                c.host_sync(HostSync::Context);
                Ok(())
            }
        }
    }

    /// The engine tables this context's GPU sanitizer works on, if it
    /// started.
    pub(crate) fn sanitizer_tables(&self) -> Option<cuda::vmm::runtime_state::EngineTables> {
        match self {
            Backend::Cuda(c) => c.sanitizer_if_any().map(|s| s.tables()),
            Backend::Cpu(_) => None,
        }
    }

    /// Makes the GPU sanitizers of `members` (sanitized GPU contexts of
    /// this process, each on its own device, the group's first first) one
    /// group: one side table, host waits shared
    /// (`cuda::sanitizer::group`).
    pub(crate) fn join_sanitizer_group(members: &[&Backend]) -> Result<()> {
        let sanitizers = members
            .iter()
            .map(|b| match b {
                Backend::Cuda(c) => Ok((c.gpu_sanitizer()?, c.owner())),
                Backend::Cpu(_) => Err(b.gpu_only("a sanitized group of GPUs")),
            })
            .collect::<Result<Vec<_>>>()?;
        cuda::sanitizer::join_group(&sanitizers)
    }

    /// Starts this context's GPU sanitizer as rank `rank` of `world`
    /// processes sharing one race engine: its launches take serials and
    /// launch-ring slots of that rank only, and it works on the engine's
    /// tables of the group's first rank (imported by the join). Refused
    /// ([`crate::error::GroupProblem::SanitizerStarted`]) once it planned
    /// sanitized work alone.
    pub(crate) fn join_sanitizer_processes(&self, rank: u32, world: u32) -> Result<()> {
        match self {
            Backend::Cuda(c) => {
                // The order first: nothing may plan a launch as this
                // process alone once its sanitizer works on the group's
                // tables.
                cuda::sanitizer::join_process_order(rank, world)?;
                c.gpu_sanitizer()?.use_allocator_tables()
            }
            Backend::Cpu(_) => Err(self.gpu_only("a sanitized group of processes")),
        }
    }

    /// Orders this context's later sanitized launches after `all` (every
    /// rank's host clock at a group barrier of processes, joined), and
    /// lets the engine forget what it covers.
    pub(crate) fn group_barrier(&self, all: &[u32]) -> Result<()> {
        match self {
            Backend::Cuda(c) => c.gpu_sanitizer()?.group_barrier(c.owner(), all),
            Backend::Cpu(_) => Err(self.gpu_only("a group of processes' barrier")),
        }
    }

    /// This context's host clock in the GPU sanitizer (what a group of
    /// processes' barrier publishes; the sanitizer is made if no launch
    /// made it).
    pub(crate) fn host_clock(&self) -> Result<Vec<u32>> {
        match self {
            Backend::Cuda(c) => Ok(c.gpu_sanitizer()?.host_clock(c.owner())),
            Backend::Cpu(_) => Err(self.gpu_only("a group of processes' barrier")),
        }
    }

    /// The races found since the last collection.
    pub(crate) fn take_reports(&self) -> RaceReports {
        match self {
            Backend::Cuda(c) => c
                .sanitizer_if_any()
                .map_or_else(RaceReports::new, |s| s.take_reports(c.owner())),
            Backend::Cpu(c) => c.take_reports(),
        }
    }

    /// The stream `id` is gone: the sanitizer's launch order may give its
    /// serial lane to another stream once its work is waited for.
    pub(crate) fn drop_stream(&self, id: StreamId) {
        match self {
            Backend::Cuda(_) => crate::sanitizer::order::launch_order()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .drop_stream(id),
            Backend::Cpu(c) => c.notify(|s| s.on_stream_drop(id)),
        }
    }

    pub(crate) fn new_stream(&self) -> Result<StreamHandle> {
        match self {
            Backend::Cuda(c) => Ok(StreamHandle::Cuda(CudaStream::new(c.device())?)),
            Backend::Cpu(_) => Ok(StreamHandle::Cpu),
        }
    }

    /// Blocks until the stream's work has finished; on a GPU, at most
    /// `timeout` ([`Error::Timeout`]).
    pub(crate) fn stream_wait_idle(
        &self,
        stream: &StreamHandle,
        id: StreamId,
        timeout: Option<Duration>,
    ) -> Result<()> {
        match (self, stream) {
            (Backend::Cuda(c), StreamHandle::Cuda(s)) => {
                s.synchronize_within(timeout)?;
                if let Some(san) = c.sanitizer_if_any() {
                    san.on_host_wait(c.owner(), HostWait::Stream(id))?;
                }
                Ok(())
            }
            (Backend::Cpu(c), StreamHandle::Cpu) => {
                c.host_sync(HostSync::Stream(id));
                Ok(())
            }
            _ => Err(self.foreign("Stream::synchronize")),
        }
    }

    pub(crate) fn stream_is_idle(&self, stream: &StreamHandle) -> Result<bool> {
        match stream {
            StreamHandle::Cuda(s) => s.is_idle(),
            StreamHandle::Cpu => Ok(true),
        }
    }

    /// Makes later work on `stream` wait for `event`'s last record.
    pub(crate) fn stream_wait_event(
        &self,
        stream: (&StreamHandle, StreamId),
        event: (&EventHandle, EventId),
    ) -> Result<()> {
        match (self, stream.0, event.0) {
            (Backend::Cuda(c), StreamHandle::Cuda(s), EventHandle::Cuda(e)) => {
                s.wait_event(e)?;
                if let Some(san) = c.sanitizer_if_any() {
                    san.on_stream_wait(c.owner(), stream.1, event.1);
                }
                Ok(())
            }
            (Backend::Cpu(c), StreamHandle::Cpu, EventHandle::Cpu(_)) => {
                c.notify(|s| s.on_stream_wait(stream.1, event.1));
                Ok(())
            }
            _ => Err(self.foreign("Stream::wait_event")),
        }
    }

    pub(crate) fn stream_raw(&self, stream: &StreamHandle) -> sys::CUstream {
        match stream {
            StreamHandle::Cuda(s) => s.raw(),
            StreamHandle::Cpu => std::ptr::null_mut(),
        }
    }

    /// The CUDA stream behind a handle, for the CUDA-only tools.
    pub(crate) fn cuda_stream<'s>(&self, stream: &'s StreamHandle) -> Result<&'s CudaStream> {
        match stream {
            StreamHandle::Cuda(s) => Ok(s),
            StreamHandle::Cpu => Err(self.gpu_only("a CUDA stream")),
        }
    }

    pub(crate) fn new_event(&self, timed: bool) -> Result<EventHandle> {
        match self {
            Backend::Cuda(c) => Ok(EventHandle::Cuda(CudaEvent::new(c.device(), timed)?)),
            Backend::Cpu(_) => Ok(EventHandle::Cpu(CpuEvent::new(timed))),
        }
    }

    /// Records `event` at the current end of `stream`.
    pub(crate) fn event_record(
        &self,
        event: (&EventHandle, EventId),
        stream: (&StreamHandle, StreamId),
    ) -> Result<()> {
        match (self, event.0, stream.0) {
            (Backend::Cuda(c), EventHandle::Cuda(e), StreamHandle::Cuda(s)) => {
                e.record(s)?;
                if let Some(san) = c.sanitizer_if_any() {
                    san.on_event_record(c.owner(), event.1, stream.1);
                }
                Ok(())
            }
            (Backend::Cpu(c), EventHandle::Cpu(e), StreamHandle::Cpu) => {
                let _q = c.queue();
                e.record();
                if let Some(s) = c.sanitizer() {
                    s.on_event_record(event.1, stream.1);
                }
                Ok(())
            }
            _ => Err(self.foreign("Event::record")),
        }
    }

    pub(crate) fn event_synchronize(
        &self,
        event: &EventHandle,
        id: EventId,
        timeout: Option<Duration>,
    ) -> Result<()> {
        match (self, event) {
            (Backend::Cuda(c), EventHandle::Cuda(e)) => {
                e.synchronize_within(timeout)?;
                if let Some(san) = c.sanitizer_if_any() {
                    san.on_host_wait(c.owner(), HostWait::Event(id))?;
                }
                Ok(())
            }
            (Backend::Cpu(_), EventHandle::Cuda(_)) => Err(self.foreign("Event::synchronize")),
            (Backend::Cpu(c), EventHandle::Cpu(_)) => {
                c.host_sync(HostSync::Event(id));
                Ok(())
            }
            (Backend::Cuda(_), EventHandle::Cpu(_)) => Err(self.foreign("Event::synchronize")),
        }
    }

    pub(crate) fn event_is_complete(&self, event: &EventHandle) -> Result<bool> {
        match event {
            EventHandle::Cuda(e) => e.is_complete(),
            EventHandle::Cpu(_) => Ok(true),
        }
    }

    pub(crate) fn event_elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        match (start, end) {
            (EventHandle::Cuda(a), EventHandle::Cuda(b)) => a.elapsed_ms(b),
            (EventHandle::Cpu(a), EventHandle::Cpu(b)) => a.elapsed_ms(b),
            // Same device (checked by the caller) means same backend.
            _ => Err(Error::EventTiming {
                reason: "the events belong to different backends",
            }),
        }
    }

    pub(crate) fn event_raw(&self, event: &EventHandle) -> sys::CUevent {
        match event {
            EventHandle::Cuda(e) => e.raw(),
            EventHandle::Cpu(_) => std::ptr::null_mut(),
        }
    }

    /// Loads PTX without NUL bytes for contexts that launch `variant`: the
    /// CUDA backend JIT-compiles only what that variant runs
    /// ([`cut_for`]), or the whole text when a sanitized context's launch
    /// filter sends some launches to the plain entries (`plain_too`); the
    /// CPU backend keeps nothing (it runs the kernels' Rust bodies).
    pub(crate) fn load_module(
        &self,
        ptx: &str,
        variant: LaunchVariant,
        plain_too: bool,
    ) -> Result<ModuleHandle> {
        match self {
            Backend::Cuda(c) => {
                let builds = vigil_shared::gpu::split_builds(ptx);
                let text = match (variant, plain_too, builds) {
                    (LaunchVariant::Sanitized, true, None) => std::borrow::Cow::Borrowed(ptx),
                    _ => cut_for(ptx, variant),
                };
                let image = nul_free(text.into_owned())?;
                // Sanitized contexts launch the `__vigil` entries: capped
                // registers keep them launchable with large blocks.
                let config = c.pool().map(|p| p.vmm().config());
                let cap = config.as_ref().map(|c| c.sanitized_registers());
                let lean_first = config.is_some_and(|c| c.lean_entries());
                let mut module = CudaModule::load(c.device(), &image, variant, cap, lean_first)?;
                if let (LaunchVariant::Sanitized, true, Some(_)) = (variant, plain_too, builds) {
                    // The plain entries come from the plain build's module.
                    let plain = nul_free(cut_for(ptx, LaunchVariant::Plain).into_owned())?;
                    let twin =
                        CudaModule::load(c.device(), &plain, LaunchVariant::Plain, None, false)?;
                    module = module.with_plain_twin(twin);
                }
                let module = Arc::new(module);
                // A sanitized context checks copies with the module's
                // range-access entry, if the device has none yet.
                c.offer_module(&module)?;
                Ok(ModuleHandle::Cuda(module))
            }
            Backend::Cpu(_) => Ok(ModuleHandle::Cpu(Arc::default())),
        }
    }

    /// Gives each device global of `names` (declared by `module`'s PTX) a
    /// copy where `place` puts it, given its name and initial value, and
    /// points the module's launches there.
    pub(crate) fn relocate_globals(
        &self,
        module: &ModuleHandle,
        names: &[String],
        place: &mut dyn FnMut(&str, &[u8]) -> Result<u64>,
    ) -> Result<()> {
        match module {
            ModuleHandle::Cuda(m) => {
                for name in names {
                    let symbol =
                        CString::new(format!("{GLOBAL_SYMBOL_PREFIX}{name}")).map_err(|_| {
                            Error::PtxText {
                                message: format!("device global name `{name}` contains NUL"),
                            }
                        })?;
                    m.relocate_global(&symbol, &mut |value| place(name, value))?;
                }
                Ok(())
            }
            ModuleHandle::Cpu(m) => m.relocate(names, place),
        }
    }

    /// Kernel `name` of `module`, with `host` (the kernel's Rust body, when
    /// known): its entries, and the attributes a `variant` launch of it is
    /// held to.
    pub(crate) fn function(
        &self,
        module: &ModuleHandle,
        name: &CStr,
        host: Option<HostEntry>,
        variant: LaunchVariant,
    ) -> Result<(FunctionHandle, FunctionAttrs)> {
        match module {
            ModuleHandle::Cuda(m) => {
                let kernel = m.kernel(name)?;
                let attrs = kernel.attrs(variant, self.props().limits.max_threads_per_block)?;
                Ok((FunctionHandle::Cuda(kernel), attrs))
            }
            ModuleHandle::Cpu(m) => Ok((FunctionHandle::Cpu(host, m.clone()), self.cpu_attrs())),
        }
    }

    /// What a CPU launch is held to: the device's limits, no static shared
    /// memory to account for (the executor gives each block its own).
    fn cpu_attrs(&self) -> FunctionAttrs {
        FunctionAttrs {
            max_threads_per_block: self.props().limits.max_threads_per_block,
            static_shared_bytes: 0,
            num_regs: 0,
        }
    }

    /// The raw `CUfunction` a `variant` launch of `func` runs; null on the
    /// CPU backend.
    pub(crate) fn function_raw(
        &self,
        func: &FunctionHandle,
        variant: LaunchVariant,
    ) -> sys::CUfunction {
        match func {
            FunctionHandle::Cuda(k) => k.raw(variant),
            FunctionHandle::Cpu(..) => std::ptr::null_mut(),
        }
    }

    /// The attributes of the entry a `variant` launch of `func` with
    /// blocks of `threads` threads runs now ([`Backend::entry`]'s).
    pub(crate) fn entry_attrs(
        &self,
        func: &FunctionHandle,
        variant: LaunchVariant,
        threads: u64,
    ) -> Result<FunctionAttrs> {
        match func {
            FunctionHandle::Cuda(k) => Ok(k.entry(variant, threads)?.0.attrs()),
            FunctionHandle::Cpu(..) => Ok(self.cpu_attrs()),
        }
    }

    /// The entry a `variant` launch of `func` named `kernel` with `config`
    /// runs, with the attributes to check the configuration against.
    pub(crate) fn entry<'f>(
        &self,
        func: &'f FunctionHandle,
        variant: LaunchVariant,
        config: &LaunchConfig,
    ) -> Result<LaunchEntry<'f>> {
        match func {
            FunctionHandle::Cuda(k) => {
                let (f, variant) = k.entry(variant, config.block_threads())?;
                Ok(LaunchEntry {
                    run: EntryHandle::Cuda(f),
                    variant,
                    attrs: f.attrs(),
                })
            }
            FunctionHandle::Cpu(host, module) => {
                let run = host.map(|host| match variant {
                    LaunchVariant::Plain => host.plain,
                    LaunchVariant::Sanitized => host.checked,
                });
                Ok(LaunchEntry {
                    run: EntryHandle::Cpu(run, module),
                    variant,
                    attrs: self.cpu_attrs(),
                })
            }
        }
    }

    /// Allocates `bytes > 0` bytes for work on `stream`.
    pub(crate) fn allocate(
        &self,
        stream: &StreamHandle,
        bytes: usize,
        align: usize,
    ) -> Result<u64> {
        match (self, stream) {
            (Backend::Cuda(c), StreamHandle::Cuda(s)) => c.allocate(s, bytes),
            (Backend::Cpu(c), StreamHandle::Cpu) => c.allocate(bytes, align),
            _ => Err(self.foreign("DeviceBuffer::alloc")),
        }
    }

    /// The descriptor of the tensor map `map` (validated by the front end)
    /// over elements of `element`, as this backend's tensor copies read
    /// it: the driver's on a GPU, the CPU backend's own encoding
    /// ([`TiledMap::encode`]) on the host.
    pub(crate) fn encode_tensor_map(
        &self,
        map: &TiledMap,
        element: TensorElementType,
    ) -> Result<TensorMapBytes> {
        match self {
            Backend::Cuda(c) => c.encode_tensor_map(map, element),
            Backend::Cpu(_) => Ok(map.encode()),
        }
    }

    /// Frees what [`Backend::allocate`] returned.
    ///
    /// # Safety
    /// `ptr` came from `allocate` on this backend with `bytes` and `align`,
    /// and is released once, with no view of it left.
    pub(crate) unsafe fn release(&self, ptr: u64, bytes: usize, align: usize) -> Result<()> {
        match self {
            // SAFETY: the caller's contract.
            Backend::Cuda(c) => unsafe { c.release(ptr) },
            // SAFETY: the caller's contract.
            Backend::Cpu(c) => unsafe { c.release(ptr, bytes, align) },
        }
    }

    /// Runs a copy or fill on `stream`; one that touches host memory
    /// returns when the stream has reached it (the host slice is only
    /// borrowed for the call).
    /// `caller` is where the host code issued it (the sanitizers name it).
    pub(crate) fn transfer(
        &self,
        stream: (&StreamHandle, StreamId),
        op: Transfer<'_>,
        caller: &'static Location<'static>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let waits = op.touches_host();
        match (self, stream.0) {
            (Backend::Cuda(c), StreamHandle::Cuda(s)) => c.transfer((s, stream.1), op, caller)?,
            (Backend::Cpu(c), StreamHandle::Cpu) => c.transfer(stream.1, op, caller)?,
            _ => return Err(self.foreign("a copy")),
        }
        if waits {
            self.stream_wait_idle(stream.0, stream.1, timeout)
        } else {
            Ok(())
        }
    }

    /// Runs `launch` (checked by the front end) with `entry` on `stream`.
    pub(crate) fn launch(
        &self,
        entry: &LaunchEntry<'_>,
        stream: &StreamHandle,
        launch: &Launch<'_>,
    ) -> Result<()> {
        debug_assert_eq!(entry.variant, launch.variant);
        match (self, &entry.run, stream) {
            (Backend::Cuda(c), EntryHandle::Cuda(func), StreamHandle::Cuda(stream)) => {
                c.launch(func, stream, launch)
            }
            (Backend::Cpu(c), EntryHandle::Cpu(run, module), StreamHandle::Cpu) => {
                let run = run.ok_or(Error::Unsupported {
                    op: "an untyped launch",
                    backend: DeviceId::Cpu,
                    reason: "the CPU backend runs a kernel's Rust body, and this function \
                             was looked up by name; use Module::kernel::<K>() and Stream::launch",
                })?;
                c.launch(run, module.globals(), launch)
            }
            _ => Err(self.foreign("launch")),
        }
    }
}

/// `text` as the driver reads PTX, or [`Error::PtxText`] at its first NUL
/// byte.
fn nul_free(text: String) -> Result<CString> {
    CString::new(text).map_err(|e| Error::PtxText {
        message: format!(
            "PTX text contains a NUL byte at offset {}",
            e.nul_position()
        ),
    })
}
