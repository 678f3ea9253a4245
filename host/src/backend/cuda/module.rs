//! [`CudaModule`] (PTX loaded by the driver's JIT) and [`CudaFunction`]
//! (one entry point of it, with its attributes).

use super::device::CudaDevice;
use super::driver::{call_raw, drv};
use crate::error::{Error, Result};
use crate::types::{FunctionAttrs, LaunchVariant};
use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use vigil_shared::gpu::SANITIZED_SUFFIX;

const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module; unloaded on drop. The front end keeps it alive (in
/// an `Arc`) while any function of it exists.
pub(crate) struct CudaModule {
    device: Arc<CudaDevice>,
    raw: sys::CUmodule,
    /// The launch variant whose entries it was loaded with.
    variant: LaunchVariant,
}

// SAFETY: a CUmodule may be used from any thread (the driver API is
// thread-safe); the module is immutable after loading.
unsafe impl Send for CudaModule {}
// SAFETY: as above.
unsafe impl Sync for CudaModule {}

impl CudaModule {
    /// JIT-compiles NUL-terminated PTX (cut for `variant`) on `device`,
    /// with at most `max_registers` registers per thread when given; a
    /// compile failure is [`Error::PtxLoad`] with the JIT's log.
    pub(crate) fn load(
        device: &Arc<CudaDevice>,
        image: &CStr,
        variant: LaunchVariant,
        max_registers: Option<u32>,
    ) -> Result<CudaModule> {
        device.bind()?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = vec![
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver reads option values as pointer-sized words: a pointer
        // for the buffer, an integer for its size (updated to bytes written).
        let mut values: Vec<*mut c_void> =
            vec![log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
        if let Some(n) = max_registers {
            options.push(sys::CUjit_option::CU_JIT_MAX_REGISTERS);
            values.push(n as usize as *mut c_void);
        }
        let mut raw: sys::CUmodule = std::ptr::null_mut();
        let r = call_raw("cuModuleLoadDataEx", || {
            // SAFETY: `image` is NUL-terminated PTX; `options` and `values`
            // are arrays of equal length that outlive the call; `log` is
            // writable for `JIT_LOG_BYTES` bytes; the context is current.
            unsafe {
                sys::cuModuleLoadDataEx(
                    &mut raw,
                    image.as_ptr().cast(),
                    options.len() as u32,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                )
            }
        })?;
        if r != sys::CUresult::CUDA_SUCCESS {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(Error::PtxLoad {
                name: format!("{r:?}"),
                code: r as u32,
                log: String::from_utf8_lossy(&log[..end]).trim_end().to_owned(),
            });
        }
        Ok(CudaModule {
            device: device.clone(),
            raw,
            variant,
        })
    }

    /// Looks up entry `name` and queries its attributes, with its
    /// sanitized variant (`name__vigil`) when the module has one. A module
    /// loaded for a sanitized context holds only the `name__vigil` entries
    /// (see [`cut_for`](crate::abi::ptx_cut::cut_for)): there the function
    /// is the sanitized entry itself, the only one such a context launches.
    /// An entry the module was cut without is [`Error::EntryNotLoaded`].
    pub(crate) fn function(&self, name: &CStr) -> Result<CudaFunction> {
        let mut sanitized = name.to_bytes().to_vec();
        sanitized.extend_from_slice(SANITIZED_SUFFIX.as_bytes());
        let sanitized = match std::ffi::CString::new(sanitized) {
            Ok(s) => self.lookup(&s)?,
            Err(_) => None,
        };
        let primary = match (self.lookup(name)?, sanitized) {
            (Some(raw), _) => raw,
            (None, Some(raw)) => raw,
            (None, None) => {
                return Err(Error::EntryNotLoaded {
                    kernel: name.to_string_lossy().into_owned(),
                    variant: self.variant,
                })
            }
        };
        let mut f = self.with_attrs(primary)?;
        f.sanitized = sanitized
            .map(|raw| self.with_attrs(raw).map(Box::new))
            .transpose()?;
        Ok(f)
    }

    /// The raw function `name`, or `None` when the module has no such entry.
    fn lookup(&self, name: &CStr) -> Result<Option<sys::CUfunction>> {
        self.device.bind()?;
        let mut raw: sys::CUfunction = std::ptr::null_mut();
        let r = call_raw("cuModuleGetFunction", || {
            // SAFETY: valid out-pointer, live module, NUL-terminated name.
            unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, name.as_ptr()) }
        })?;
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(Some(raw)),
            sys::CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            r => Err(super::driver::driver_error("cuModuleGetFunction", r)),
        }
    }

    /// A function of this module with its attributes queried.
    fn with_attrs(&self, raw: sys::CUfunction) -> Result<CudaFunction> {
        let attr = |a: sys::CUfunction_attribute| -> Result<u32> {
            let mut v = 0i32;
            // SAFETY: valid out-pointer; `raw` is a live function.
            drv!(cuFuncGetAttribute(&mut v, a, raw))?;
            Ok(v.max(0) as u32)
        };
        use sys::CUfunction_attribute::*;
        let attrs = FunctionAttrs {
            max_threads_per_block: attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_shared_bytes: attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            num_regs: attr(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        };
        Ok(CudaFunction {
            raw,
            attrs,
            dyn_smem_optin: AtomicU32::new(0),
            sanitized: None,
        })
    }
}

impl Drop for CudaModule {
    fn drop(&mut self) {
        self.device.destroy("a module", || {
            // SAFETY: `raw` was loaded in `load` and is unloaded once; every
            // function of it is dropped before (the front end's `Arc`).
            drv!(cuModuleUnload(self.raw))
        });
    }
}

/// One entry point of a [`CudaModule`].
pub(crate) struct CudaFunction {
    raw: sys::CUfunction,
    attrs: FunctionAttrs,
    /// The dynamic shared memory this function has been opted in to.
    dyn_smem_optin: AtomicU32,
    /// The kernel's sanitized entry (`name__vigil`), if the module has it.
    sanitized: Option<Box<CudaFunction>>,
}

// SAFETY: a CUfunction may be used from any thread (the driver API is
// thread-safe); the only mutable state is an atomic.
unsafe impl Send for CudaFunction {}
// SAFETY: as above.
unsafe impl Sync for CudaFunction {}

impl CudaFunction {
    /// The raw `CUfunction`.
    pub(crate) fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// What the driver reports about the function.
    pub(crate) fn attrs(&self) -> FunctionAttrs {
        self.attrs
    }

    /// The kernel's sanitized entry, if its module has one.
    pub(crate) fn sanitized(&self) -> Option<&CudaFunction> {
        self.sanitized.as_deref()
    }

    /// Opts the function in to `bytes` of dynamic shared memory when that
    /// is above the device's default per-block limit (the context is
    /// current; `bytes` was validated against the opt-in limit).
    pub(crate) fn ensure_dynamic_smem(&self, bytes: u32, default_limit: u32) -> Result<()> {
        if bytes.saturating_add(self.attrs.static_shared_bytes) <= default_limit
            || bytes <= self.dyn_smem_optin.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        // SAFETY: `raw` is a live function; the value was validated against
        // the device's opt-in limit by the caller.
        drv!(cuFuncSetAttribute(
            self.raw,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32
        ))?;
        self.dyn_smem_optin.fetch_max(bytes, Ordering::Relaxed);
        Ok(())
    }
}
