//! Peer-to-peer access between two CUDA devices of one process (a
//! symmetric group's members): `cuDeviceCanAccessPeer`, then
//! `cuCtxEnablePeerAccess` from the accessing device's primary context.

use super::device::CudaDevice;
use super::driver::context;
use crate::error::{Error, GroupProblem, Result};

/// Lets kernels on `from` read and write `to`'s memory (a no-op when
/// already enabled). [`GroupProblem::NoPeerAccess`] when the hardware
/// cannot.
pub(crate) fn enable_peer_access(from: &CudaDevice, to: &CudaDevice) -> Result<()> {
    if !context::device_can_access_peer(from.raw_device(), to.raw_device())? {
        return Err(Error::Group(GroupProblem::NoPeerAccess {
            from: from.ordinal(),
            to: to.ordinal(),
        }));
    }
    from.bind()?;
    // SAFETY: `to.raw()` is a live primary context retained by `to`.
    Ok(unsafe { context::ctx_enable_peer_access(to.raw()) }?)
}
