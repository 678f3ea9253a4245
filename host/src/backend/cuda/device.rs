//! [`CudaDevice`]: one retained primary context of a CUDA device, and
//! everything asked of the device itself (attributes, memory, waits).

use super::driver::{self, drv};
use crate::error::{Error, Result};
use crate::types::{DeviceLimits, DeviceProps};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
        let count = driver::device_count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                reason: "the driver reports 0 devices".to_owned(),
            });
        }
        if ordinal >= count {
            return Err(Error::InvalidDevice { ordinal, count });
        }
        let mut device: sys::CUdevice = 0;
        // SAFETY: `device` is a valid out-pointer; the ordinal is in range.
        drv!(cuDeviceGet(&mut device, ordinal as i32))?;
        let props = query_props(device)?;
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; `device` came from cuDeviceGet.
        drv!(cuDevicePrimaryCtxRetain(&mut raw, device))?;
        let dev = Arc::new(CudaDevice {
            ordinal,
            device,
            raw,
            props,
            kept_modules: Mutex::new(Vec::new()),
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
        let r = driver::query("cuStreamQuery", || unsafe {
            sys::cuStreamQuery(std::ptr::null_mut())
        });
        match r {
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
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `cur` is a valid out-pointer.
        drv!(cuCtxGetCurrent(&mut cur))?;
        if cur != self.raw {
            // SAFETY: `raw` is a live primary context retained by `self`.
            drv!(cuCtxSetCurrent(self.raw))?;
        }
        Ok(())
    }

    /// Destroys one of the device's objects from a `Drop`: binds, runs
    /// `destroy`, and reports a failure on stderr (a drop cannot return it).
    pub(crate) fn destroy(&self, what: &str, destroy: impl FnOnce() -> Result<()>) {
        if let Err(e) = self.bind().and_then(|()| destroy()) {
            eprintln!("vigil: destroying {what}: {e}");
        }
    }

    /// Queries a device attribute.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        get_attr(self.device, attr)
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out-pointers; the context is current.
        drv!(cuMemGetInfo_v2(&mut free, &mut total))?;
        Ok((free, total))
    }

    /// Waits until all work on the device has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the context is current on this thread.
        drv!(cuCtxSynchronize())
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
        let mut now = 0usize;
        // SAFETY: valid out-pointer; the context is current.
        drv!(cuCtxGetLimit(&mut now, limit))?;
        if now < need {
            for bytes in [need.next_multiple_of(step.max(1)), need] {
                // SAFETY: a plain limit value; the context is current.
                if drv!(cuCtxSetLimit(limit, bytes)).is_ok() {
                    break;
                }
            }
            // SAFETY: as above.
            drv!(cuCtxGetLimit(&mut now, limit))?;
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
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let kept = std::mem::take(
            self.kept_modules
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for raw in kept {
            // SAFETY: a module `keep_module` took over from its `CudaModule`,
            // which no longer unloads it; unloaded once, here.
            self.destroy("a module", || drv!(cuModuleUnload(raw)));
        }
        // SAFETY: releases the reference retained in `CudaDevice::open`.
        if let Err(e) = drv!(cuDevicePrimaryCtxRelease_v2(self.device)) {
            eprintln!(
                "vigil: releasing the primary context of device {}: {e}",
                self.ordinal
            );
        }
    }
}

fn get_attr(device: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: `v` is a valid out-pointer; `device` came from cuDeviceGet.
    drv!(cuDeviceGetAttribute(&mut v, attr, device))?;
    Ok(v)
}

fn query_props(device: sys::CUdevice) -> Result<DeviceProps> {
    use sys::CUdevice_attribute::*;
    let attr = |a| get_attr(device, a).map(|v| v.max(0) as u32);
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: `name` is a writable buffer of the length passed.
    drv!(cuDeviceGetName(
        name.as_mut_ptr(),
        name.len() as i32,
        device
    ))?;
    // SAFETY: the driver NUL-terminates within the buffer; the last byte is
    // still 0 from the initialiser in any case.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut total_memory = 0usize;
    // SAFETY: valid out-pointer and device.
    drv!(cuDeviceTotalMem_v2(&mut total_memory, device))?;
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
