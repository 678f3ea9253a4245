//! The CUDA backend. Three layers, as in cudarc: cudarc's raw bindings
//! (`sys`), [`driver`] (the result layer: one typed function per driver
//! call, one error type; the only code that calls `sys`), and the handles
//! here that own driver resources, which call only [`driver`].
//!
//! - [`driver`]: loading `libcuda`, `cuInit`, every driver call;
//! - [`device`]: a retained primary context ([`CudaDevice`]) and its
//!   queries; whether there is a GPU at all;
//! - [`stream`], [`event`], [`module`]: owned driver handles; [`module`]
//!   also finds a kernel's plain and sanitized entries;
//! - [`memory`]: plain (`cuMemAlloc`) or shadow-allocator memory, copies, fills;
//! - `transfer_check`: a sanitized context's copies and fills as launches
//!   of the range-access entry;
//! - [`launch`]: `cuLaunchKernel` of the entry the front end picked, with
//!   the GPU sanitizer's hidden arguments for a sanitized one;
//! - [`sanitizer`]: the GPU race sanitizer's host side (runtime memory,
//!   hidden arguments, stream and event clocks, report collection);
//! - [`vmm`]: the sanitizer's shadow-memory allocator on CUDA virtual memory;
//! - [`peer`]: peer access between two devices;
//! - `wait`: waits bounded by the launch timeout.
//!
//! It depends on the shared pieces below it (types, error, launch ABI,
//! sanitizer configuration, the launch description), never on the front
//! end.

pub(crate) mod device;
pub(crate) mod driver;
pub(crate) mod event;
pub(crate) mod launch;
mod lean_build;
pub(crate) mod mapped;
mod memory;
pub(crate) mod module;
pub(crate) mod peer;
pub(crate) mod sanitizer;
pub(crate) mod stream;
mod tensor_map;
mod transfer_check;
pub mod vmm;
mod wait;

pub use device::CudaDevice;
pub use event::CudaEvent;
pub use stream::CudaStream;

use crate::error::Result;
use crate::sanitizer::config::SanitizerConfig;
use crate::types::DeviceId;
use std::sync::{Arc, Mutex};
use vmm::{CachingPool, Vmm};

/// The CUDA state of one context: its device and, in sanitized mode, the
/// shadow allocator every buffer comes from.
pub(crate) struct CudaBackend {
    device: Arc<CudaDevice>,
    pool: Option<Arc<CachingPool>>,
    /// This context's id among the device's sanitized contexts: its
    /// launches' reports come back to it (the GPU sanitizer is per device).
    owner: u64,
}

impl CudaBackend {
    /// Opens device `ordinal`; with `sanitize`, every buffer comes from the
    /// process-wide shadow allocator configured by `config`.
    pub(crate) fn open(
        ordinal: usize,
        sanitize: bool,
        config: SanitizerConfig,
    ) -> Result<CudaBackend> {
        let device = CudaDevice::open(ordinal)?;
        let pool = match sanitize {
            true => Some(sanitizer_pool(&device, config)?),
            false => None,
        };
        Ok(CudaBackend {
            device,
            pool,
            owner: crate::types::next_id(),
        })
    }

    /// The device.
    pub(crate) fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// The device's identity.
    pub(crate) fn device_id(&self) -> DeviceId {
        DeviceId::Cuda(self.device.ordinal())
    }

    /// The shadow allocator's pool (sanitized mode).
    pub(crate) fn pool(&self) -> Option<&CachingPool> {
        self.pool.as_deref()
    }

    /// The device's GPU race sanitizer, made on first use (sanitized mode).
    pub(crate) fn gpu_sanitizer(&self) -> Result<Arc<sanitizer::GpuSanitizer>> {
        let pool = self.pool.as_ref().ok_or(crate::error::Error::Unsupported {
            op: "a sanitized GPU launch",
            backend: self.device_id(),
            reason: "the context has no shadow allocator (build it with sanitize(true))",
        })?;
        sanitizer::for_device(&self.device, pool)
    }

    /// This context's id as the owner of its launches' reports.
    pub(crate) fn owner(&self) -> u64 {
        self.owner
    }

    /// The device's GPU race sanitizer if this context is sanitized and a
    /// sanitized launch made it (what events, waits and host
    /// synchronisations report to).
    pub(crate) fn sanitizer_if_any(&self) -> Option<Arc<sanitizer::GpuSanitizer>> {
        self.pool.as_ref()?;
        sanitizer::existing(&self.device)
    }
}

impl Drop for CudaBackend {
    /// The context is gone: its report buffer goes to the next sanitized
    /// context of the device.
    fn drop(&mut self) {
        if let Some(san) = self.sanitizer_if_any() {
            san.retire_owner(self.owner);
        }
    }
}

/// The process-wide shadow allocator of sanitized GPU contexts (docs/src/design/address-space.md:
/// one reservation per process, shared by every device). Created by the
/// first sanitized context with its configuration; a later context whose
/// configuration asks for other device-wide settings
/// ([`SanitizerConfig::same_device_state`]) replaces it while nothing has
/// been allocated, else gets [`VmmError::ConfigFrozen`](vmm::VmmError::ConfigFrozen).
fn sanitizer_pool(home: &Arc<CudaDevice>, config: SanitizerConfig) -> Result<Arc<CachingPool>> {
    static POOL: Mutex<Option<Arc<CachingPool>>> = Mutex::new(None);
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pool.as_ref() {
        if !p.vmm().config().same_device_state(&config) {
            p.vmm().set_config(config)?;
        }
        return Ok(p.clone());
    }
    let p = Arc::new(CachingPool::new(Vmm::new(home, config)?));
    *pool = Some(p.clone());
    Ok(p)
}

/// What the CUDA-only tools ([`vmm`](crate::unstable::vmm)) accept as a device: a GPU
/// [`Context`](crate::Context) or a [`CudaDevice`]. A CPU context is
/// [`Error::Unsupported`](crate::Error::Unsupported).
pub trait AsCudaDevice {
    /// The CUDA device behind `self`.
    fn cuda_device(&self) -> Result<&Arc<CudaDevice>>;
}

/// What the CUDA-only tools ([`vmm`](crate::unstable::vmm)) accept as a stream: a GPU
/// [`Stream`](crate::Stream) or a [`CudaStream`].
pub trait AsCudaStream {
    /// The CUDA stream behind `self`.
    fn cuda_stream(&self) -> Result<&CudaStream>;
}

impl AsCudaDevice for Arc<CudaDevice> {
    fn cuda_device(&self) -> Result<&Arc<CudaDevice>> {
        Ok(self)
    }
}

impl AsCudaStream for CudaStream {
    fn cuda_stream(&self) -> Result<&CudaStream> {
        Ok(self)
    }
}
