//! [`Context`]: one CUDA device and its primary context.

use crate::driver::{self, drv};
use crate::error::{Error, Result};
use crate::launch::DeviceLimits;
use cudarc::driver::sys;
use std::ffi::CStr;
use std::fmt;
use std::sync::Arc;

/// A handle to one CUDA device and its primary context.
///
/// Cheap to clone (reference counted); every stream, buffer and module keeps
/// its context alive. Methods make the context current on the calling thread
/// before each driver call, so a `Context` may be used from any thread.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    ordinal: usize,
    device: sys::CUdevice,
    raw: sys::CUcontext,
    props: DeviceProps,
}

/// What [`Context`] reports about its device (queried once at creation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)`.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Total global memory in bytes.
    pub total_memory: usize,
    /// Launch limits (threads, dimensions, shared memory).
    pub limits: DeviceLimits,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver API
// is thread-safe); `Context` makes it current before each use and owns one
// reference to the primary context, released on drop.
unsafe impl Send for Inner {}
// SAFETY: as above; `Inner` is immutable after creation.
unsafe impl Sync for Inner {}

impl Context {
    /// Opens device `ordinal` (retains its primary context).
    ///
    /// Fails with [`Error::DriverNotFound`] when there is no driver library,
    /// [`Error::NoDevice`] when there is no device and
    /// [`Error::InvalidDevice`] when `ordinal` is past the last device.
    /// Never panics.
    pub fn new(ordinal: usize) -> Result<Context> {
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
        let ctx = Context {
            inner: Arc::new(Inner {
                ordinal,
                device,
                raw,
                props,
            }),
        };
        ctx.bind()?;
        Ok(ctx)
    }

    /// Opens device 0.
    pub fn default_device() -> Result<Context> {
        Context::new(0)
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// Everything queried about the device.
    pub fn props(&self) -> &DeviceProps {
        &self.inner.props
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.inner.props.name
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.props.compute_capability
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.inner.props.sm_count
    }

    /// Total global memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.inner.props.total_memory
    }

    /// Maximum threads per block.
    pub fn max_threads_per_block(&self) -> u32 {
        self.inner.props.limits.max_threads_per_block
    }

    /// Maximum shared memory per block in bytes without opting in (48 KiB).
    pub fn max_shared_mem_per_block(&self) -> u32 {
        self.inner.props.limits.max_shared_mem_per_block
    }

    /// Maximum shared memory per block in bytes with opt-in (Vigil opts in
    /// automatically when a launch asks for more than the default).
    pub fn max_shared_mem_per_block_optin(&self) -> u32 {
        self.inner.props.limits.max_shared_mem_per_block_optin
    }

    /// Launch limits of the device.
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.props.limits
    }

    /// Queries any device attribute (raw driver enum).
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        get_attr(self.inner.device, attr)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`).
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out-pointers; the context is current.
        drv!(cuMemGetInfo_v2(&mut free, &mut total))?;
        Ok((free, total))
    }

    /// Waits until all work on the device (every stream) has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the context is current on this thread.
        drv!(cuCtxSynchronize())
    }

    /// Makes this context current on the calling thread (a no-op when it
    /// already is). Every method calls it; code that calls the driver
    /// directly through [`Context::raw`] should too.
    pub fn bind(&self) -> Result<()> {
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `cur` is a valid out-pointer.
        drv!(cuCtxGetCurrent(&mut cur))?;
        if cur != self.inner.raw {
            // SAFETY: `raw` is a live primary context retained by `self`.
            drv!(cuCtxSetCurrent(self.inner.raw))?;
        }
        Ok(())
    }

    /// The raw `CUcontext` (for driver calls Vigil does not wrap).
    pub fn raw(&self) -> sys::CUcontext {
        self.inner.raw
    }

    /// The raw `CUdevice`.
    pub fn raw_device(&self) -> sys::CUdevice {
        self.inner.device
    }

    /// Checks that an object of device `found` may be used here.
    pub(crate) fn expect_device(&self, op: &'static str, found: usize) -> Result<()> {
        if found == self.inner.ordinal {
            Ok(())
        } else {
            Err(Error::WrongDevice {
                op,
                expected: self.inner.ordinal,
                found,
            })
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.props.name)
            .field("compute_capability", &self.inner.props.compute_capability)
            .finish()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: releases the reference retained in `Context::new`.
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
