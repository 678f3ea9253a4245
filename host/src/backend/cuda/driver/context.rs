//! Devices, their primary contexts, context limits and peer access.

use super::{call, check, DriverError, DriverResult};
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdevice_attribute, CUlimit, CUresult};
use std::ffi::CStr;

/// `cuDeviceGetCount`: how many devices the driver sees.
pub(crate) fn device_get_count() -> DriverResult<usize> {
    let mut n = 0i32;
    // SAFETY: `n` is a valid out-pointer for the duration of the call.
    check("cuDeviceGetCount", || unsafe {
        sys::cuDeviceGetCount(&mut n)
    })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// `cuDriverGetVersion`: the driver's CUDA version, e.g. 13000 for 13.0.
pub(crate) fn driver_get_version() -> DriverResult<u32> {
    let mut v = 0i32;
    // SAFETY: `v` is a valid out-pointer for the duration of the call.
    check("cuDriverGetVersion", || unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok(v.max(0) as u32)
}

/// `cuDeviceGet`: the device of ordinal `ordinal`.
pub(crate) fn device_get(ordinal: usize) -> DriverResult<CUdevice> {
    let mut device: CUdevice = 0;
    let ordinal = i32::try_from(ordinal).unwrap_or(i32::MAX);
    // SAFETY: `device` is a valid out-pointer; the driver checks the ordinal.
    check("cuDeviceGet", || unsafe {
        sys::cuDeviceGet(&mut device, ordinal)
    })?;
    Ok(device)
}

/// `cuDeviceGetAttribute`: one attribute of `device`.
pub(crate) fn device_get_attribute(
    device: CUdevice,
    attr: CUdevice_attribute,
) -> DriverResult<i32> {
    let mut v = 0i32;
    // SAFETY: `v` is a valid out-pointer; the driver checks `device`.
    check("cuDeviceGetAttribute", || unsafe {
        sys::cuDeviceGetAttribute(&mut v, attr, device)
    })?;
    Ok(v)
}

/// `cuDeviceGetName`: the device's name.
pub(crate) fn device_get_name(device: CUdevice) -> DriverResult<String> {
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: `name` is a writable buffer of the length passed.
    check("cuDeviceGetName", || unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device)
    })?;
    // SAFETY: the driver NUL-terminates within the buffer; the last byte is
    // still 0 from the initialiser in any case.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// `cuDeviceTotalMem`: the device's global memory in bytes.
pub(crate) fn device_total_mem(device: CUdevice) -> DriverResult<usize> {
    let mut bytes = 0usize;
    // SAFETY: valid out-pointer; the driver checks `device`.
    check("cuDeviceTotalMem_v2", || unsafe {
        sys::cuDeviceTotalMem_v2(&mut bytes, device)
    })?;
    Ok(bytes)
}

/// `cuDeviceCanAccessPeer`: whether kernels on `device` can access
/// `peer`'s memory.
pub(crate) fn device_can_access_peer(device: CUdevice, peer: CUdevice) -> DriverResult<bool> {
    let mut can = 0i32;
    // SAFETY: `can` is a valid out-pointer; the driver checks both devices.
    check("cuDeviceCanAccessPeer", || unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, device, peer)
    })?;
    Ok(can != 0)
}

/// `cuDevicePrimaryCtxRetain`: retains `device`'s primary context.
pub(crate) fn primary_ctx_retain(device: CUdevice) -> DriverResult<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer; the driver checks `device`.
    check("cuDevicePrimaryCtxRetain", || unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
    })?;
    Ok(ctx)
}

/// `cuDevicePrimaryCtxRelease`: releases one reference to `device`'s
/// primary context.
///
/// # Safety
/// The caller retained it ([`primary_ctx_retain`]) and releases that
/// reference once, with nothing of the context used through it afterwards.
pub(crate) unsafe fn primary_ctx_release(device: CUdevice) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuDevicePrimaryCtxRelease_v2", || unsafe {
        sys::cuDevicePrimaryCtxRelease_v2(device)
    })
}

/// `cuCtxGetCurrent`: the calling thread's current context (null: none).
pub(crate) fn ctx_get_current() -> DriverResult<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check("cuCtxGetCurrent", || unsafe {
        sys::cuCtxGetCurrent(&mut ctx)
    })?;
    Ok(ctx)
}

/// `cuCtxSetCurrent`: makes `ctx` current on the calling thread.
///
/// # Safety
/// `ctx` is a live context (one the caller holds a reference to).
pub(crate) unsafe fn ctx_set_current(ctx: CUcontext) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuCtxSetCurrent", || unsafe { sys::cuCtxSetCurrent(ctx) })
}

/// `cuCtxSynchronize`: waits for all work of the current context.
pub(crate) fn ctx_synchronize() -> DriverResult<()> {
    // SAFETY: no arguments; without a current context the driver says so.
    check("cuCtxSynchronize", || unsafe { sys::cuCtxSynchronize() })
}

/// `cuCtxGetLimit`: one limit of the current context.
pub(crate) fn ctx_get_limit(limit: CUlimit) -> DriverResult<usize> {
    let mut value = 0usize;
    // SAFETY: valid out-pointer.
    check("cuCtxGetLimit", || unsafe {
        sys::cuCtxGetLimit(&mut value, limit)
    })?;
    Ok(value)
}

/// `cuCtxSetLimit`: sets one limit of the current context.
pub(crate) fn ctx_set_limit(limit: CUlimit, value: usize) -> DriverResult<()> {
    // SAFETY: plain values; the driver checks them.
    check("cuCtxSetLimit", || unsafe {
        sys::cuCtxSetLimit(limit, value)
    })
}

/// `cuMemGetInfo`: free and total memory of the current context's device.
pub(crate) fn mem_get_info() -> DriverResult<(usize, usize)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both are valid out-pointers.
    check("cuMemGetInfo_v2", || unsafe {
        sys::cuMemGetInfo_v2(&mut free, &mut total)
    })?;
    Ok((free, total))
}

/// `cuCtxEnablePeerAccess`: lets kernels of the current context access
/// `peer`'s memory; enabling it again is no error.
///
/// # Safety
/// `peer` is a live context.
pub(crate) unsafe fn ctx_enable_peer_access(peer: CUcontext) -> DriverResult<()> {
    let name = "cuCtxEnablePeerAccess";
    // SAFETY: the caller's contract; the flags must be 0.
    match call(name, || unsafe { sys::cuCtxEnablePeerAccess(peer, 0) })? {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        r => Err(DriverError::new(name, r)),
    }
}
