//! Device allocations, copies and fills, and page-locked host memory
//! mapped into the device's address space.

use super::{check, DriverResult};
use cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use std::ffi::c_void;

/// `cuMemAlloc`: `bytes` of device memory of the current context.
pub(crate) fn mem_alloc(bytes: usize) -> DriverResult<CUdeviceptr> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out-pointer.
    check("cuMemAlloc_v2", || unsafe {
        sys::cuMemAlloc_v2(&mut ptr, bytes)
    })?;
    Ok(ptr)
}

/// `cuMemFree`: frees an allocation of [`mem_alloc`] (after the work that
/// uses it).
///
/// # Safety
/// `ptr` came from [`mem_alloc`], is freed once and not used afterwards.
pub(crate) unsafe fn mem_free(ptr: CUdeviceptr) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemFree_v2", || unsafe { sys::cuMemFree_v2(ptr) })
}

/// `cuMemcpyHtoD`: copies `src` to device address `dst` (synchronous
/// for the host; a pageable copy may still be in flight on the legacy
/// stream when it returns).
///
/// # Safety
/// `dst..dst + src.len()` is device memory of the current context that no
/// kernel uses meanwhile.
pub(crate) unsafe fn memcpy_htod(dst: CUdeviceptr, src: &[u8]) -> DriverResult<()> {
    // SAFETY: `src` is readable for its length; the caller's contract.
    check("cuMemcpyHtoD_v2", || unsafe {
        sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len())
    })
}

/// `cuMemcpyDtoH`: copies device memory at `src` into `dst`.
///
/// # Safety
/// `src..src + dst.len()` is device memory of the current context.
pub(crate) unsafe fn memcpy_dtoh(dst: &mut [u8], src: CUdeviceptr) -> DriverResult<()> {
    // SAFETY: `dst` is writable for its length; the caller's contract.
    check("cuMemcpyDtoH_v2", || unsafe {
        sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len())
    })
}

/// `cuMemcpyHtoDAsync`: copies `len` bytes at host address `src` to
/// device address `dst` in `stream`'s order.
///
/// # Safety
/// `src` is readable for `len` bytes until the copy has run (pageable
/// memory is staged before the call returns); `dst..dst + len` is live
/// device memory; `stream` is a live stream of the current context.
pub(crate) unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    len: usize,
    stream: CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemcpyHtoDAsync_v2", || unsafe {
        sys::cuMemcpyHtoDAsync_v2(dst, src, len, stream)
    })
}

/// `cuMemcpyDtoHAsync`: copies `len` bytes of device memory at `src` to
/// host address `dst` in `stream`'s order.
///
/// # Safety
/// `dst` is writable for `len` bytes until the copy has run;
/// `src..src + len` is live device memory; `stream` is a live stream of
/// the current context.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    len: usize,
    stream: CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemcpyDtoHAsync_v2", || unsafe {
        sys::cuMemcpyDtoHAsync_v2(dst, src, len, stream)
    })
}

/// `cuMemcpyDtoDAsync`: copies `len` bytes between device addresses in
/// `stream`'s order.
///
/// # Safety
/// Both ranges are live device memory; `stream` is a live stream of the
/// current context.
pub(crate) unsafe fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    len: usize,
    stream: CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemcpyDtoDAsync_v2", || unsafe {
        sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream)
    })
}

/// `cuMemsetD8`: sets `len` bytes at `dst` to `value` (on the legacy
/// stream, which may still run it when the call returns).
///
/// # Safety
/// `dst..dst + len` is device memory of the current context that no kernel
/// uses meanwhile.
pub(crate) unsafe fn memset_d8(dst: CUdeviceptr, value: u8, len: usize) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemsetD8_v2", || unsafe {
        sys::cuMemsetD8_v2(dst, value, len)
    })
}

/// `cuMemsetD8Async`: sets `len` bytes at `dst` to `value` in `stream`'s
/// order.
///
/// # Safety
/// `dst..dst + len` is live device memory; `stream` is a live stream of
/// the current context.
pub(crate) unsafe fn memset_d8_async(
    dst: CUdeviceptr,
    value: u8,
    len: usize,
    stream: CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemsetD8Async", || unsafe {
        sys::cuMemsetD8Async(dst, value, len, stream)
    })
}

/// `cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`: `bytes` of
/// page-locked host memory mapped into the device's address space.
pub(crate) fn mem_host_alloc_mapped(bytes: usize) -> DriverResult<*mut c_void> {
    let mut host: *mut c_void = std::ptr::null_mut();
    // SAFETY: `host` is a valid out-pointer; the flags are a valid value.
    check("cuMemHostAlloc", || unsafe {
        sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP)
    })?;
    Ok(host)
}

/// `cuMemHostGetDevicePointer`: the device address of mapped host memory.
///
/// # Safety
/// `host` came from [`mem_host_alloc_mapped`] and is live.
pub(crate) unsafe fn mem_host_get_device_pointer(host: *mut c_void) -> DriverResult<CUdeviceptr> {
    let mut device: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the caller's contract; the flags must be 0.
    check("cuMemHostGetDevicePointer_v2", || unsafe {
        sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
    })?;
    Ok(device)
}

/// `cuMemFreeHost`: frees memory of [`mem_host_alloc_mapped`].
///
/// # Safety
/// `host` came from [`mem_host_alloc_mapped`], is freed once, and neither
/// the host nor a kernel uses it afterwards.
pub(crate) unsafe fn mem_free_host(host: *mut c_void) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemFreeHost", || unsafe { sys::cuMemFreeHost(host) })
}
