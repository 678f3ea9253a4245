//! Device globals of a module (`vigil_device::device_global!`): found in
//! the PTX at load, given a copy in the loading context's memory, read and
//! written from the host by name ([`Module::global`](crate::Module::global)).

use crate::api::context::Context;
use crate::api::memory::{DeviceBuffer, DeviceSliceMut};
use crate::api::stream::Stream;
use crate::backend::ModuleHandle;
use crate::error::{Error, Result};
use crate::launch_abi::ptx_cut::variables_named;
use bytemuck::Pod;
use std::marker::PhantomData;
use vigil_shared::gpu::{split_builds, GLOBAL_SYMBOL_PREFIX};

/// The device globals of one loaded module: each one's copy in the
/// context's memory, which the module's kernels use (a GPU module's
/// symbol points to it; the CPU backend's launches are told).
pub(crate) struct ModuleGlobals {
    /// (name, the copy of its value), in the order the PTX declares them.
    copies: Vec<(String, DeviceBuffer<u8>)>,
}

impl ModuleGlobals {
    /// Gives every device global `ptx` declares a copy in `ctx`'s memory,
    /// starting with the value the module was loaded with, and points
    /// `module` at the copies. Each module load has its own, as CUDA gives
    /// each loaded module its own `__device__` variables; a sanitized
    /// context checks them like any buffer.
    pub(crate) fn relocate(ctx: &Context, module: &ModuleHandle, ptx: &str) -> Result<Self> {
        let names = global_names(ptx);
        let mut copies = Vec::new();
        if names.is_empty() {
            return Ok(ModuleGlobals { copies });
        }
        let stream = Stream::new(ctx)?;
        ctx.backend()
            .relocate_globals(module, &names, &mut |name, value| {
                let copy = DeviceBuffer::from_slice(&stream, value)?;
                let at = copy.device_ptr();
                copies.push((name.to_owned(), copy));
                Ok(at)
            })?;
        stream.synchronize()?;
        Ok(ModuleGlobals { copies })
    }

    /// Global `name` as elements of `T`.
    pub(crate) fn get<'m, T: Pod>(
        &'m self,
        ctx: &'m Context,
        name: &str,
    ) -> Result<DeviceGlobalRef<'m, T>> {
        let Some((_, copy)) = self.copies.iter().find(|(n, _)| n == name) else {
            return Err(Error::GlobalNotFound {
                name: name.to_owned(),
                available: self.copies.iter().map(|(n, _)| n.clone()).collect(),
            });
        };
        let (bytes, elem_size) = (copy.len(), std::mem::size_of::<T>());
        if elem_size == 0 || bytes % elem_size != 0 {
            return Err(Error::GlobalType {
                name: name.to_owned(),
                bytes,
                elem_size,
            });
        }
        Ok(DeviceGlobalRef {
            ctx,
            ptr: copy.device_ptr(),
            len: bytes / elem_size,
            _elem: PhantomData,
        })
    }
}

/// The names of the device globals `ptx` declares, each once. A text of
/// two builds declares them in both: its plain part, a fraction of the
/// text, is read.
pub(crate) fn global_names(ptx: &str) -> Vec<String> {
    let declared = split_builds(ptx).map_or(ptx, |(plain, _)| plain);
    variables_named(declared, GLOBAL_SYMBOL_PREFIX)
        .into_iter()
        .map(|symbol| symbol[GLOBAL_SYMBOL_PREFIX.len()..].to_owned())
        .collect()
}

/// A device global of a loaded module, as `len()` elements of `T`, for
/// the host: [`read`](Self::read) and [`write`](Self::write) copy on a
/// stream, like a buffer's copies (and, in a sanitized context, are
/// checked against the module's kernels like them).
///
/// Kernels reach the global by itself (`NAME.ptr()`, `NAME.slice()`), not
/// as an argument.
pub struct DeviceGlobalRef<'m, T> {
    ctx: &'m Context,
    ptr: u64,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> DeviceGlobalRef<'_, T> {
    /// How many `T` the global holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn view(&self) -> DeviceSliceMut<'_, T> {
        // SAFETY: the module's copy of the global, `len` whole `T`s (checked
        // when the reference was made), aligned (an allocation), alive as
        // long as the module that lends `self`.
        unsafe { DeviceSliceMut::from_raw(self.ctx, self.ptr, self.len) }
    }

    /// Copies the global's value to the host once `stream` reaches the copy.
    #[track_caller]
    pub fn read(&self, stream: &Stream) -> Result<Vec<T>> {
        self.view().to_vec(stream)
    }

    /// Copies `values` (exactly [`len`](Self::len) of them) into the
    /// global once `stream` reaches the copy; returns when it is done.
    #[track_caller]
    pub fn write(&self, stream: &Stream, values: &[T]) -> Result<()> {
        self.view().copy_from_host(stream, values)
    }
}

#[cfg(test)]
mod tests {
    use super::global_names;

    #[test]
    fn globals_are_the_prefixed_variables_each_once() {
        let ptx = "\
.version 8.3
.visible .global .align 8 .b8 vigil_global_FLAG[24] = {0};
.global .align 4 .u32 counter;
.visible .global .align 8 .b8 vigil_global_BINS[48];
.visible .entry k()
{
\tld.global.u32 %r1, [vigil_global_FLAG+16];
\tret;
}
// vigil: the sanitized build of this kernel crate follows
.version 8.3
.visible .global .align 8 .b8 vigil_global_FLAG[24] = {0};
";
        assert_eq!(global_names(ptx), ["FLAG", "BINS"]);
    }
}
