//! [`Module`]: PTX loaded on a device, and the kernels in it
//! ([`KernelFn`] typed, [`Function`] untyped).
//!
//! Trust model: Vigil's typed launches are safe on the premise that the PTX
//! was compiled from the kernel's Rust source (the build helper embeds it),
//! so that the kernel only touches memory through its bounds-checked
//! handles. Loading a module checks what can be checked (the entry exists,
//! its parameter list matches the Rust declaration scalar by scalar); it
//! cannot check what hand-written PTX does.
//!
//! On the CPU backend the PTX is not compiled: [`Module::from_ptx`] only
//! parses its entry signatures, so a stale or mismatched PTX fails the same
//! checks as on a GPU, and [`Module::kernel`] returns a [`KernelFn`] whose
//! launches run the kernel's Rust body (`K::run_host`) on the
//! [`CpuExecutor`](crate::cpu::CpuExecutor).

use crate::context::Context;
use crate::cpu::{checked_entry, plain_entry, KernelEntry};
use crate::driver::{call_raw, drv};
use crate::error::{Error, Result};
use crate::ptx::{parse_entries, PtxEntry, PtxParam};
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use vigil_device::Kernel;
use vigil_shared::params::ParamDesc;

/// Size of the JIT error log buffer handed to `cuModuleLoadDataEx`.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A PTX module loaded on one device. Cheap to clone; kernels looked up in
/// it keep it loaded.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    ctx: Context,
    /// The loaded module; `None` on the CPU backend.
    raw: Option<sys::CUmodule>,
    entries: Result<Vec<PtxEntry>>,
}

// SAFETY: a CUmodule may be used from any thread (the driver API is
// thread-safe); the module is immutable after loading.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Module {
    /// JIT-compiles and loads PTX text on `ctx`'s device.
    ///
    /// A driver rejection returns [`Error::PtxLoad`] with the JIT error log.
    /// On the CPU backend the text is checked (no NUL) and its entry
    /// signatures parsed, but not compiled.
    pub fn from_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        let image = CString::new(ptx).map_err(|e| Error::PtxText {
            message: format!(
                "PTX text contains a NUL byte at offset {}",
                e.nul_position()
            ),
        })?;
        let entries = parse_entries(ptx);
        let raw = match ctx.cuda_device() {
            Some(_) => Some(load(ctx, &image)?),
            None => None,
        };
        Ok(Module {
            inner: Arc::new(ModuleInner {
                ctx: ctx.clone(),
                raw,
                entries,
            }),
        })
    }

    /// The module's context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The entry points and their parameter lists, as parsed from the PTX.
    pub fn entries(&self) -> Result<&[PtxEntry]> {
        self.inner.entries.as_deref().map_err(Clone::clone)
    }

    /// Looks up a kernel by name without a Rust signature; launch it with
    /// [`Stream::launch_dynamic`](crate::Stream::launch_dynamic).
    pub fn function(&self, name: &str) -> Result<Function> {
        let entry = self.entry(name)?;
        Function::new(self, entry, None)
    }

    /// Looks up the plain entry point of kernel `K` and checks its PTX
    /// parameter list against `K::PARAMS` (count, then every scalar).
    pub fn kernel<K: Kernel>(&self) -> Result<KernelFn<K>> {
        self.kernel_variant::<K>(K::NAME, &[])
    }

    /// Looks up another entry point compiled from kernel `K` (e.g. its
    /// sanitized variant), whose parameters are `K::PARAMS` followed by
    /// `hidden`; checks the PTX signature against both. A typed
    /// [`Stream::launch`](crate::Stream::launch) fills only the user
    /// arguments, so variants with hidden parameters are launched with
    /// [`Stream::launch_packed`](crate::Stream::launch_packed).
    pub fn kernel_variant<K: Kernel>(
        &self,
        entry: &str,
        hidden: &[ParamDesc],
    ) -> Result<KernelFn<K>> {
        let e = self.entry(entry)?;
        check_signature(entry, K::PARAMS, hidden, &e.params)?;
        Ok(KernelFn {
            func: Function::new(self, e, Some(HostEntry::of::<K>()))?,
            _kernel: PhantomData,
        })
    }

    fn entry(&self, name: &str) -> Result<&PtxEntry> {
        let entries = self.entries()?;
        entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| Error::KernelNotFound {
                kernel: name.to_owned(),
                available: entries.iter().map(|e| e.name.clone()).collect(),
            })
    }
}

/// JIT-compiles and loads PTX on `ctx`'s GPU (`cuModuleLoadDataEx`),
/// returning the JIT error log on failure.
fn load(ctx: &Context, image: &CString) -> Result<sys::CUmodule> {
    ctx.bind()?;
    let mut log = vec![0u8; JIT_LOG_BYTES];
    let mut options = vec![
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads option values as pointer-sized words: a pointer
    // for the buffer, an integer for its size (updated to bytes written).
    let mut values: Vec<*mut c_void> = vec![log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
    if ctx.launch_variant() == crate::context::LaunchVariant::Sanitized {
        // Sanitized entries call the race detector: capped registers keep
        // 1024-thread blocks launchable and more CTAs resident.
        options.push(sys::CUjit_option::CU_JIT_MAX_REGISTERS);
        values.push(crate::gpu_sanitizer::MAX_REGISTERS as usize as *mut c_void);
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
    Ok(raw)
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = match &self.inner.entries {
            Ok(v) => v.iter().map(|e| e.name.as_str()).collect(),
            Err(_) => Vec::new(),
        };
        f.debug_struct("Module")
            .field("device", &self.inner.ctx.device())
            .field("entries", &names)
            .finish()
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let Some(raw) = self.raw else { return };
        let r = self.ctx.bind().and_then(|()| {
            // SAFETY: `raw` was loaded in `from_ptx` and is unloaded once;
            // every `Function` holds the `Arc`, so none outlives it.
            drv!(cuModuleUnload(raw))
        });
        if let Err(e) = r {
            eprintln!("vigil: unloading a module: {e}");
        }
    }
}

/// Checks a Rust parameter list (plus hidden parameters) against a PTX
/// entry's `.param` list. Pure: no GPU needed.
pub fn check_signature(
    kernel: &str,
    params: &[ParamDesc],
    hidden: &[ParamDesc],
    ptx: &[PtxParam],
) -> Result<()> {
    let expected: usize = params.iter().chain(hidden).map(|p| p.parts.len()).sum();
    if expected != ptx.len() {
        return Err(Error::SignatureCount {
            kernel: kernel.to_owned(),
            expected,
            found: ptx.len(),
        });
    }
    let scalars = params
        .iter()
        .chain(hidden)
        .enumerate()
        .flat_map(|(index, p)| p.parts.iter().map(move |&t| (index, p, t)));
    for (ptx_index, ((index, p, t), decl)) in scalars.zip(ptx).enumerate() {
        if !decl.accepts(t) {
            return Err(Error::SignatureType {
                kernel: kernel.to_owned(),
                index,
                name: p.name,
                rust_type: p.rust_type,
                expected: t,
                ptx_index,
                ptx: Box::new(decl.clone()),
            });
        }
    }
    Ok(())
}

/// Attributes of a compiled kernel (`cuFuncGetAttribute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionAttrs {
    /// The most threads per block this kernel can launch with (register use
    /// may make it lower than the device's limit).
    pub max_threads_per_block: u32,
    /// Static shared memory in bytes.
    pub static_shared_bytes: u32,
    /// Registers per thread.
    pub num_regs: u32,
}

/// The host entry points of a kernel (what the CPU backend runs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostEntry {
    /// `K::run_host::<Plain>`.
    pub(crate) plain: KernelEntry,
    /// `K::run_host::<Checked>`.
    pub(crate) checked: KernelEntry,
}

impl HostEntry {
    fn of<K: Kernel>() -> HostEntry {
        HostEntry {
            plain: plain_entry::<K>(),
            checked: checked_entry::<K>(),
        }
    }
}

/// A kernel entry point without a Rust signature (checked at launch against
/// the parsed PTX parameter list).
pub struct Function {
    module: Module,
    /// The CUDA function; null on the CPU backend.
    raw: sys::CUfunction,
    /// The kernel's host code, when the function came from a Rust kernel
    /// ([`Module::kernel`]); the CPU backend can only launch those.
    host: Option<HostEntry>,
    name: String,
    params: Vec<PtxParam>,
    attrs: FunctionAttrs,
    /// Dynamic shared memory the function is currently allowed (0: the
    /// device default, no opt-in done yet).
    dyn_smem_optin: AtomicU32,
}

// SAFETY: a CUfunction may be used from any thread (the driver API is
// thread-safe); the only mutable state is an atomic.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Function {
    fn new(module: &Module, entry: &PtxEntry, host: Option<HostEntry>) -> Result<Function> {
        let name_c = CString::new(entry.name.as_str()).map_err(|_| Error::PtxText {
            message: format!("entry name `{}` contains NUL", entry.name),
        })?;
        let (raw, attrs) = match module.inner.raw {
            Some(m) => cuda_function(&module.inner.ctx, m, &name_c)?,
            // The CPU backend: the device's limits, no static shared memory
            // to account for (the executor gives each block its own).
            None => (
                std::ptr::null_mut(),
                FunctionAttrs {
                    max_threads_per_block: module.inner.ctx.max_threads_per_block(),
                    static_shared_bytes: 0,
                    num_regs: 0,
                },
            ),
        };
        Ok(Function {
            module: module.clone(),
            raw,
            host,
            name: entry.name.clone(),
            params: entry.params.clone(),
            attrs,
            dyn_smem_optin: AtomicU32::new(0),
        })
    }
}

/// Looks a function up in a loaded CUDA module, with its attributes.
fn cuda_function(
    ctx: &Context,
    module: sys::CUmodule,
    name_c: &CString,
) -> Result<(sys::CUfunction, FunctionAttrs)> {
    ctx.bind()?;
    let mut raw: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointer, live module, NUL-terminated name.
    drv!(cuModuleGetFunction(&mut raw, module, name_c.as_ptr()))?;
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
    Ok((raw, attrs))
}

impl Function {
    /// The entry point's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The PTX parameter list.
    pub fn params(&self) -> &[PtxParam] {
        &self.params
    }

    /// Register and shared-memory attributes.
    pub fn attrs(&self) -> &FunctionAttrs {
        &self.attrs
    }

    /// The module the function lives in.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The raw `CUfunction`; null on the CPU backend.
    pub fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// The kernel's host code (set for functions of [`Module::kernel`]).
    pub(crate) fn host_entry(&self) -> Option<HostEntry> {
        self.host
    }

    /// Raises the function's dynamic shared memory limit to `bytes` when a
    /// launch needs more than the device default (opt-in, once per size).
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

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("params", &self.params.len())
            .field("attrs", &self.attrs)
            .finish()
    }
}

/// Kernel `K` in a loaded module, its PTX signature checked against `K`'s
/// Rust declaration. Launch it with [`Stream::launch`](crate::Stream::launch).
pub struct KernelFn<K: Kernel> {
    func: Function,
    _kernel: PhantomData<fn() -> K>,
}

impl<K: Kernel> KernelFn<K> {
    /// The untyped function (for [`Stream::launch_packed`](crate::Stream::launch_packed)).
    pub fn function(&self) -> &Function {
        &self.func
    }

    /// The entry point's name.
    pub fn name(&self) -> &str {
        &self.func.name
    }
}

impl<K: Kernel> fmt::Debug for KernelFn<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KernelFn").field(&self.func).finish()
    }
}
