//! Peer-to-peer access between two CUDA devices of one process (a
//! symmetric group's members): `cuDeviceCanAccessPeer`, then
//! `cuCtxEnablePeerAccess` from the accessing device's primary context.

use super::device::CudaDevice;
use super::driver::{call_raw, driver_error, drv};
use crate::error::{Error, GroupProblem, Result};
use cudarc::driver::sys::{self, CUresult};

/// Lets kernels on `from` read and write `to`'s memory (a no-op when
/// already enabled). [`GroupProblem::NoPeerAccess`] when the hardware
/// cannot.
pub(crate) fn enable_peer_access(from: &CudaDevice, to: &CudaDevice) -> Result<()> {
    let mut can = 0;
    // SAFETY: `can` is a valid out-pointer; both are live devices.
    drv!(cuDeviceCanAccessPeer(
        &mut can,
        from.raw_device(),
        to.raw_device()
    ))?;
    if can == 0 {
        return Err(Error::Group(GroupProblem::NoPeerAccess {
            from: from.ordinal(),
            to: to.ordinal(),
        }));
    }
    from.bind()?;
    let call = "cuCtxEnablePeerAccess";
    // SAFETY: `to.raw()` is a live primary context retained by `to`; the
    // flags must be 0.
    match call_raw(call, || unsafe { sys::cuCtxEnablePeerAccess(to.raw(), 0) })? {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        r => Err(driver_error(call, r)),
    }
}
