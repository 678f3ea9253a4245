//! CUDA virtual memory management: address reservations, physical
//! memory, mappings and access, and physical memory shared as POSIX file
//! descriptors.

use super::{check, DriverResult};
use cudarc::driver::sys::{
    self, CUdeviceptr, CUmemAccessDesc, CUmemAllocationGranularity_flags,
    CUmemAllocationHandleType, CUmemAllocationProp, CUmemGenericAllocationHandle,
};
use std::os::fd::RawFd;

/// `cuMemAddressReserve`: `size` bytes of device virtual addresses
/// aligned to `align`, at an address the driver chooses.
pub(crate) fn address_reserve(size: usize, align: usize) -> DriverResult<CUdeviceptr> {
    let mut base: CUdeviceptr = 0;
    // SAFETY: `base` is a valid out-pointer; a fixed address of 0 lets the
    // driver choose.
    check("cuMemAddressReserve", || unsafe {
        sys::cuMemAddressReserve(&mut base, size, align, 0, 0)
    })?;
    Ok(base)
}

/// `cuMemAddressFree`: frees a reservation.
///
/// # Safety
/// `base` and `size` are a reservation of [`address_reserve`], freed once,
/// with nothing mapped into it any more.
pub(crate) unsafe fn address_free(base: CUdeviceptr, size: usize) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemAddressFree", || unsafe {
        sys::cuMemAddressFree(base, size)
    })
}

/// `cuMemCreate`: `bytes` of physical memory with the properties `prop`.
pub(crate) fn mem_create(
    bytes: usize,
    prop: &CUmemAllocationProp,
) -> DriverResult<CUmemGenericAllocationHandle> {
    let mut handle: CUmemGenericAllocationHandle = 0;
    // SAFETY: `handle` is a valid out-pointer and `prop` a fully
    // initialised property struct, both live for the call.
    check("cuMemCreate", || unsafe {
        sys::cuMemCreate(&mut handle, bytes, prop, 0)
    })?;
    Ok(handle)
}

/// `cuMemRelease`: releases one reference to physical memory (freed when
/// no mapping and no reference is left).
///
/// # Safety
/// The caller owns that reference (from [`mem_create`] or
/// [`import_from_fd`]) and releases it once.
pub(crate) unsafe fn mem_release(handle: CUmemGenericAllocationHandle) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemRelease", || unsafe { sys::cuMemRelease(handle) })
}

/// `cuMemMap`: maps `bytes` of `handle`'s physical memory at `va`.
///
/// # Safety
/// `va..va + bytes` lies in a reservation the caller owns and is not
/// mapped; `handle` is live.
pub(crate) unsafe fn mem_map(
    va: CUdeviceptr,
    bytes: usize,
    handle: CUmemGenericAllocationHandle,
) -> DriverResult<()> {
    // SAFETY: the caller's contract; offset and flags must be 0.
    check("cuMemMap", || unsafe {
        sys::cuMemMap(va, bytes, 0, handle, 0)
    })
}

/// `cuMemUnmap`: unmaps `bytes` at `va`.
///
/// # Safety
/// `va..va + bytes` is exactly one mapping the caller made, which no
/// kernel uses any more.
pub(crate) unsafe fn mem_unmap(va: CUdeviceptr, bytes: usize) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemUnmap", || unsafe { sys::cuMemUnmap(va, bytes) })
}

/// `cuMemSetAccess`: grants the accesses `access` describes to the mapped
/// range `va..va + bytes`.
///
/// # Safety
/// The range is mapped by the caller.
pub(crate) unsafe fn mem_set_access(
    va: CUdeviceptr,
    bytes: usize,
    access: &[CUmemAccessDesc],
) -> DriverResult<()> {
    // SAFETY: `access` holds `access.len()` initialised descriptors; the
    // caller's contract.
    check("cuMemSetAccess", || unsafe {
        sys::cuMemSetAccess(va, bytes, access.as_ptr(), access.len())
    })
}

/// `cuMemGetAllocationGranularity`: the granularity of physical memory
/// with the properties `prop`.
pub(crate) fn allocation_granularity(
    prop: &CUmemAllocationProp,
    which: CUmemAllocationGranularity_flags,
) -> DriverResult<usize> {
    let mut granularity = 0usize;
    // SAFETY: valid out-pointer; `prop` is initialised.
    check("cuMemGetAllocationGranularity", || unsafe {
        sys::cuMemGetAllocationGranularity(&mut granularity, prop, which)
    })?;
    Ok(granularity)
}

const POSIX_FD: CUmemAllocationHandleType =
    CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

/// `cuMemExportToShareableHandle`: `handle`'s physical memory as a new
/// POSIX file descriptor, which the caller owns.
///
/// # Safety
/// `handle` is live and was created shareable as a POSIX file descriptor.
pub(crate) unsafe fn export_to_fd(handle: CUmemGenericAllocationHandle) -> DriverResult<RawFd> {
    let mut fd: RawFd = -1;
    // SAFETY: for POSIX descriptors the out-parameter is an `int`, which
    // `fd` is; the caller's contract.
    check("cuMemExportToShareableHandle", || unsafe {
        sys::cuMemExportToShareableHandle((&mut fd as *mut RawFd).cast(), handle, POSIX_FD, 0)
    })?;
    Ok(fd)
}

/// `cuMemImportFromShareableHandle`: a new reference to the physical
/// memory behind POSIX file descriptor `fd` (which stays the caller's).
///
/// # Safety
/// `fd` is an open descriptor of exported CUDA physical memory.
pub(crate) unsafe fn import_from_fd(fd: RawFd) -> DriverResult<CUmemGenericAllocationHandle> {
    let mut handle: CUmemGenericAllocationHandle = 0;
    // SAFETY: for POSIX descriptors the OS handle is the descriptor's value
    // cast to a pointer; the driver does not take ownership of it.
    check("cuMemImportFromShareableHandle", || unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut handle,
            fd as isize as *mut std::ffi::c_void,
            POSIX_FD,
        )
    })?;
    Ok(handle)
}
