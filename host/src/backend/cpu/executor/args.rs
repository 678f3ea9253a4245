//! Host memory as kernel arguments: on the CPU device a global pointer is
//! a host address, so a slice of host memory can be passed where a kernel
//! takes a `GlobalSlice` / `GlobalSliceMut`.

use crate::launch_abi::params::ParamBuffer;

/// Packs host slices into a [`ParamBuffer`] for [`CpuExecutor::launch`](super::CpuExecutor::launch).
///
/// Each pushes the slice's address and length (the two PTX scalars of a
/// `GlobalSlice<T>` parameter). The buffer does not borrow the slice: the
/// caller keeps it alive and untouched until the launch returns (part of
/// `launch`'s safety contract).
pub trait HostArgs {
    /// Packs `s` for a `GlobalSlice<T>` parameter.
    fn push_host_slice<T: bytemuck::Pod>(&mut self, s: &[T]) -> &mut Self;
    /// Packs `s` for a `GlobalSliceMut<T>` parameter.
    fn push_host_slice_mut<T: bytemuck::Pod>(&mut self, s: &mut [T]) -> &mut Self;
}

impl HostArgs for ParamBuffer {
    fn push_host_slice<T: bytemuck::Pod>(&mut self, s: &[T]) -> &mut Self {
        self.push_pointer(s.as_ptr().expose_provenance() as u64, None);
        self.push(s.len() as u64);
        self
    }

    fn push_host_slice_mut<T: bytemuck::Pod>(&mut self, s: &mut [T]) -> &mut Self {
        // The address must come from the mutable borrow: the kernel writes
        // through it, which a pointer derived from a shared borrow forbids
        // (and the optimiser exploits).
        self.push_pointer(s.as_mut_ptr().expose_provenance() as u64, None);
        self.push(s.len() as u64);
        self
    }
}
