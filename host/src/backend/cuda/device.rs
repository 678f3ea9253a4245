//! [`CudaDevice`]: one retained primary context of a CUDA device, and
//! everything asked of the device itself (attributes, memory, waits), and
//! the driver's own questions: is there a GPU, how many, which version.

use super::driver::{self, context, module, stream, DriverResult};
use crate::error::{Error, Result};
use crate::types::{DeviceLimits, DeviceProps};
use cudarc::driver::sys;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The number of CUDA devices, after loading and initialising the driver.
///
/// Returns [`Error::DriverNotFound`] when there is no driver library and
/// [`Error::NoDevice`] when the driver sees no device.
pub fn device_count() -> Result<usize> {
    driver::init()?;
    Ok(context::device_get_count()?)
}

/// `Ok(())` when this process can run CUDA kernels (driver loaded, at least
/// one device), else the reason as an error ([`Error::is_no_gpu`] is true
/// for "no driver" and "no device"). GPU tests use it to skip.
pub fn gpu_available() -> Result<()> {
    match device_count()? {
        0 => Err(Error::NoDevice {
            reason: "the driver reports 0 devices".to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The driver's CUDA version as `(major, minor)`, e.g. `(13, 0)`.
pub fn driver_version() -> Result<(u32, u32)> {
    driver::init()?;
    let v = context::driver_get_version()?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// A retained primary context of one CUDA device. Shared (`Arc`) by the
/// context, its streams, events, modules and the shadow allocator, so the
/// primary context outlives every object made on it.
pub struct CudaDevice {
    ordinal: usize,
    device: sys::CUdevice,
    raw: sys::CUcontext,
    props: DeviceProps,
    /// Sanitized modules dropped by the front end, unloaded with the
    /// device ([`CudaDevice::keep_module`]).
    kept_modules: Mutex<Vec<sys::CUmodule>>,
    /// Memory the device may still write after its owner dropped it
    /// (a kernel of a dropped module still running), freed with the
    /// device ([`CudaDevice::keep_until_drop`]).
    kept_memory: Mutex<Vec<Box<dyn Send>>>,
    /// The per-thread stack (`CU_LIMIT_STACK_SIZE`) the context was last
    /// seen to have, in bytes ([`CudaDevice::reserve_stack`]); 0 before.
    stack: AtomicUsize,
    /// Held while the stack limit is read and raised.
    stack_change: Mutex<()>,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver API
// is thread-safe); `CudaDevice` makes it current before each use and owns
// one reference to the primary context, released on drop.
unsafe impl Send for CudaDevice {}
// SAFETY: as above; `CudaDevice` is immutable after creation but for the
// modules it keeps, behind a mutex.
unsafe impl Sync for CudaDevice {}

impl CudaDevice {
    /// Opens device `ordinal`: retains its primary context and queries its
    /// properties. [`Error::DriverNotFound`], [`Error::NoDevice`] or
    /// [`Error::InvalidDevice`] when there is no such device.
    pub(crate) fn open(ordinal: usize) -> Result<Arc<CudaDevice>> {
        let count = device_count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                reason: "the driver reports 0 devices".to_owned(),
            });
        }
        if ordinal >= count {
            return Err(Error::InvalidDevice { ordinal, count });
        }
        let device = context::device_get(ordinal)?;
        let props = query_props(device)?;
        let raw = context::primary_ctx_retain(device)?;
        let dev = Arc::new(CudaDevice {
            ordinal,
            device,
            raw,
            props,
            kept_modules: Mutex::new(Vec::new()),
            kept_memory: Mutex::new(Vec::new()),
            stack: AtomicUsize::new(0),
            stack_change: Mutex::new(()),
        });
        dev.bind()?;
        // A kernel fault earlier in this process poisons the primary
        // context for good (the driver refuses even a new context then):
        // say so now, as the typed fault, rather than at a later call.
        dev.sticky_fault()?;
        Ok(dev)
    }

    /// `Err(Error::KernelFault)` when a faulted kernel left a sticky error
    /// on this (current) context: the legacy stream's query returns it
    /// without waiting.
    fn sticky_fault(&self) -> Result<()> {
        // SAFETY: the null stream is the current context's legacy stream.
        let r = unsafe { stream::stream_query(std::ptr::null_mut()) };
        match r.map_err(Error::from) {
            Err(e @ Error::KernelFault { .. }) => Err(e),
            _ => Ok(()),
        }
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// What was queried about the device at creation.
    pub fn props(&self) -> &DeviceProps {
        &self.props
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.props.name
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.props.sm_count
    }

    /// The raw `CUcontext`.
    pub fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// The raw `CUdevice`.
    pub fn raw_device(&self) -> sys::CUdevice {
        self.device
    }

    /// Makes the primary context current on the calling thread (a no-op
    /// when it already is). Every driver call of the backend does this first.
    pub fn bind(&self) -> Result<()> {
        if context::ctx_get_current()? != self.raw {
            // SAFETY: `raw` is a live primary context retained by `self`.
            unsafe { context::ctx_set_current(self.raw) }?;
        }
        Ok(())
    }

    /// Destroys one of the device's objects from a `Drop`: binds, runs
    /// `destroy`, and reports a failure on stderr (a drop cannot return it).
    pub(crate) fn destroy(&self, what: &str, destroy: impl FnOnce() -> DriverResult<()>) {
        if let Err(e) = self.bind().and_then(|()| Ok(destroy()?)) {
            eprintln!("vigil: destroying {what}: {e}");
        }
    }

    /// Queries a device attribute.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        Ok(context::device_get_attribute(self.device, attr)?)
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        Ok(context::mem_get_info()?)
    }

    /// Waits until all work on the device has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        Ok(context::ctx_synchronize()?)
    }
}

impl CudaDevice {
    /// Makes the context's per-thread stack (`CU_LIMIT_STACK_SIZE`) at
    /// least `need` bytes, rounded up to a multiple of `step`, when it is
    /// smaller. The driver grows the stack by itself at a launch that
    /// needs more, and that launch call blocks until every kernel then
    /// running has ended: a kernel launched to end one that waits for it
    /// on another stream would start only once the waiter gave up (a
    /// sanitized setter needing 16 bytes more than its waiter did). Module
    /// loads call this with the most any of their functions needs, so that
    /// their launches never grow it.
    /// A stack the device has no memory for is left to the launch (which
    /// grows it or fails with the driver's error, as without this).
    pub(crate) fn reserve_stack(&self, need: usize, step: usize) -> Result<()> {
        if need <= self.stack.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one = self.stack_change.lock().unwrap_or_else(|e| e.into_inner());
        self.bind()?;
        let limit = sys::CUlimit::CU_LIMIT_STACK_SIZE;
        let mut now = context::ctx_get_limit(limit)?;
        if now < need {
            for bytes in [need.next_multiple_of(step.max(1)), need] {
                if context::ctx_set_limit(limit, bytes).is_ok() {
                    break;
                }
            }
            now = context::ctx_get_limit(limit)?;
        }
        self.stack.fetch_max(now, Ordering::AcqRel);
        Ok(())
    }

    /// Keeps a sanitized module loaded until the device is dropped, instead
    /// of unloading it with its `Module`: its memory holds the
    /// `Location`s and file names that reports name, for its kernels'
    /// races collected after the module was dropped and for earlier
    /// accesses the side table remembers.
    pub(crate) fn keep_module(&self, raw: sys::CUmodule) {
        self.kept_modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(raw);
    }

    /// Keeps `memory` until the device drops: host memory its kernels
    /// write, which a launch still running may write after its owner
    /// (a module) is gone.
    pub(crate) fn keep_until_drop(&self, memory: Box<dyn Send>) {
        self.kept_memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(memory);
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let memory = std::mem::take(
            self.kept_memory
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        if !memory.is_empty() {
            self.destroy("kept memory", || {
                drop(memory);
                Ok(())
            });
        }
        let kept = std::mem::take(
            self.kept_modules
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for raw in kept {
            // SAFETY: a module `keep_module` took over from its `CudaModule`,
            // which no longer unloads it; unloaded once, here.
            self.destroy("a module", || unsafe { module::module_unload(raw) });
        }
        // SAFETY: releases the reference retained in `CudaDevice::open`.
        if let Err(e) = unsafe { context::primary_ctx_release(self.device) } {
            eprintln!(
                "vigil: releasing the primary context of device {}: {e}",
                self.ordinal
            );
        }
    }
}

fn query_props(device: sys::CUdevice) -> Result<DeviceProps> {
    use sys::CUdevice_attribute::*;
    let attr = |a| context::device_get_attribute(device, a).map(|v| v.max(0) as u32);
    let name = context::device_get_name(device)?;
    let total_memory = context::device_total_mem(device)?;
    let limits = DeviceLimits {
        max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dim: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dim: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_mem_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_mem_per_block_optin: attr(
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
    };
    Ok(DeviceProps {
        name,
        compute_capability: (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory,
        limits,
    })
}
