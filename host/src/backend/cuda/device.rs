//! [`CudaDevice`]: the CUDA context of one device (its retained primary
//! context, or a context of its own after a fault), and everything asked
//! of the device itself (attributes, memory, waits).

use super::driver::{self, drv};
use crate::error::{Error, Result};
use crate::types::{DeviceLimits, DeviceProps};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::sync::Arc;

/// The CUDA context of one device. Shared (`Arc`) by the context, its
/// streams, events, modules and the shadow allocator, so the CUDA context
/// outlives every object made on it.
pub struct CudaDevice {
    ordinal: usize,
    device: sys::CUdevice,
    raw: sys::CUcontext,
    /// How `raw` was obtained, so that drop gives it back the same way.
    origin: ContextOrigin,
    props: DeviceProps,
}

/// Where a [`CudaDevice`]'s CUDA context came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContextOrigin {
    /// The device's primary context (shared with the CUDA runtime and
    /// other libraries in the process), retained.
    Primary,
    /// A context created for this device because the primary one was left
    /// unusable by a kernel fault (a sticky error stays until every user
    /// of the primary context lets go of it); destroyed on drop.
    Own,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver API
// is thread-safe); `CudaDevice` makes it current before each use and owns
// one reference to the primary context, released on drop.
unsafe impl Send for CudaDevice {}
// SAFETY: as above; `CudaDevice` is immutable after creation.
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
        let primary = Arc::new(CudaDevice {
            ordinal,
            device,
            raw,
            origin: ContextOrigin::Primary,
            props,
        });
        primary.bind()?;
        if !primary.has_sticky_fault() {
            return Ok(primary);
        }
        // An earlier context's kernel fault poisoned the primary context
        // for the whole process; a context of our own is unaffected by it.
        let props = primary.props.clone();
        drop(primary);
        // The poisoned context must not stay current while the new one is
        // made (the driver reports a current context's sticky error).
        // SAFETY: a null context unbinds the calling thread.
        drv!(cuCtxSetCurrent(std::ptr::null_mut()))?;
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; `device` came from
        // cuDeviceGet; flags 0 (automatic scheduling).
        drv!(cuCtxCreate_v2(&mut raw, 0, device))?;
        let own = Arc::new(CudaDevice {
            ordinal,
            device,
            raw,
            origin: ContextOrigin::Own,
            props,
        });
        own.bind()?;
        Ok(own)
    }

    /// Whether a faulted kernel left a sticky error on this (current)
    /// context: the legacy stream's query returns it without waiting.
    fn has_sticky_fault(&self) -> bool {
        // SAFETY: the null stream is the current context's legacy stream.
        let r = driver::query("cuStreamQuery", || unsafe {
            sys::cuStreamQuery(std::ptr::null_mut())
        });
        matches!(r, Err(Error::KernelFault { .. }))
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

    /// True for the device's primary context; false for a context of its
    /// own, made because a kernel fault had poisoned the primary one.
    pub fn is_primary(&self) -> bool {
        self.origin == ContextOrigin::Primary
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

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let released = match self.origin {
            // SAFETY: releases the reference retained in `CudaDevice::open`.
            ContextOrigin::Primary => drv!(cuDevicePrimaryCtxRelease_v2(self.device)),
            // SAFETY: `raw` was created in `CudaDevice::open`, is destroyed
            // once, and every object made on it holds this `Arc`.
            ContextOrigin::Own => drv!(cuCtxDestroy_v2(self.raw)),
        };
        if let Err(e) = released {
            eprintln!(
                "vigil: releasing the CUDA context of device {}: {e}",
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
