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
//! [`CpuExecutor`](crate::unstable::cpu::CpuExecutor).

use crate::api::context::Context;
use crate::api::globals::{DeviceGlobalRef, ModuleGlobals};
use crate::backend::{FunctionHandle, HostEntry, ModuleHandle};
use crate::error::{Error, Result};
use crate::launch_abi::check::check_signature;
use crate::launch_abi::ptx::{check_module, parse_entries, PtxEntry, PtxParam};
use crate::types::FunctionAttrs;
use cudarc::driver::sys;
use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use vigil_device::Kernel;
use vigil_shared::params::ParamDesc;

/// A PTX module loaded on one device. Cheap to clone; kernels looked up in
/// it keep it loaded.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    /// The copies of its device globals (dropped before the module's
    /// handle).
    globals: ModuleGlobals,
    /// The backend's module (dropped before the context).
    handle: ModuleHandle,
    ctx: Context,
    entries: Result<Vec<PtxEntry>>,
}

impl Module {
    /// JIT-compiles and loads PTX text on `ctx`'s device.
    ///
    /// A GPU context hands the driver only the entries its launches run
    /// ([`Context::launch_variant`]): a plain context the plain entries, a
    /// sanitized one the `name__vigil` entries, each with the functions
    /// and variables it reaches (the JIT never compiles code the context
    /// cannot launch). A sanitized context with a launch filter (some
    /// launches run plain) keeps both. Looking up an entry that was cut
    /// away is [`Error::EntryNotLoaded`].
    ///
    /// Every device global the PTX declares (`device_global!`) gets its
    /// own copy in the context's memory, which this module's kernels use
    /// ([`Module::global`]).
    ///
    /// On every backend the text is checked first: no NUL byte, a
    /// `.version` first, a `.target`, at least one `.entry`, balanced
    /// braces ([`Error::PtxText`] says what is wrong). A driver rejection
    /// then returns [`Error::PtxLoad`] with the JIT error log; the CPU
    /// backend parses the entry signatures but does not compile the text.
    pub fn from_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        if let Some(at) = ptx.find('\0') {
            return Err(Error::PtxText {
                message: format!("PTX text contains a NUL byte at offset {at}"),
            });
        }
        check_module(ptx)?;
        let entries = parse_entries(ptx);
        let handle =
            ctx.backend()
                .load_module(ptx, ctx.launch_variant(), ctx.launches_may_run_plain())?;
        let globals = ModuleGlobals::relocate(ctx, &handle, ptx)?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                globals,
                handle,
                ctx: ctx.clone(),
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

    /// The module's device global `name` (a `device_global!` of the
    /// kernel crate) as elements of `T`, to read and write from the host.
    /// The module's kernels use the same copy; another load of the PTX
    /// (in this context or another) has its own.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// # let ctx = vigil::Context::builder().cpu().build()?;
    /// # let stream = vigil::Stream::new(&ctx)?;
    /// # let module = vigil::Module::from_ptx(&ctx, "")?;
    /// let done = module.global::<u32>("DONE")?;
    /// done.write(&stream, &[0])?;
    /// // ... launch kernels that set it ...
    /// assert_eq!(done.read(&stream)?, [1]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::GlobalNotFound`] when the module declares no such global,
    /// [`Error::GlobalType`] when its size is not a whole number of `T`.
    pub fn global<T: bytemuck::Pod>(&self, name: &str) -> Result<DeviceGlobalRef<'_, T>> {
        self.inner.globals.get(&self.inner.ctx, name)
    }

    /// Looks up a kernel by name without a Rust signature; launch it with
    /// [`Stream::launch_dynamic`](crate::Stream::launch_dynamic).
    pub fn function(&self, name: &str) -> Result<Function> {
        let entry = self.entry(name)?;
        Function::new(self, entry, None)
    }

    /// Looks up the plain entry point of kernel `K` and checks its PTX
    /// parameter list against `K::PARAMS` (count, then every scalar).
    /// When the PTX has the kernel's sanitized entry (`name__vigil`, what a
    /// sanitized GPU context launches), its parameters are checked too:
    /// `K::PARAMS` followed by the GPU sanitizer's hidden ones.
    pub fn kernel<K: Kernel>(&self) -> Result<KernelFn<K>> {
        let sanitized = format!("{}{}", K::NAME, vigil_shared::gpu::SANITIZED_SUFFIX);
        if let Ok(e) = self.entry(&sanitized) {
            check_signature(
                &sanitized,
                K::PARAMS,
                vigil_shared::gpu::HIDDEN_PARAMS,
                &e.params,
            )?;
        }
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

/// A kernel entry point without a Rust signature (checked at launch against
/// the parsed PTX parameter list).
///
/// Looking a function up finds its entries on the backend once: on a GPU
/// its plain entry and its sanitized entry (`name__vigil`) as far as the
/// module has them, on the CPU backend its host code. A launch picks the
/// one its [`LaunchVariant`](crate::LaunchVariant) runs.
pub struct Function {
    /// The backend's entries (on the CPU backend, the kernel's host code
    /// when it came from a Rust kernel, [`Module::kernel`]).
    handle: FunctionHandle,
    module: Module,
    name: String,
    params: Vec<PtxParam>,
    attrs: FunctionAttrs,
}

impl Function {
    fn new(module: &Module, entry: &PtxEntry, host: Option<HostEntry>) -> Result<Function> {
        let name_c = CString::new(entry.name.as_str()).map_err(|_| Error::PtxText {
            message: format!("entry name `{}` contains NUL", entry.name),
        })?;
        let ctx = &module.inner.ctx;
        let (handle, attrs) =
            ctx.backend()
                .function(&module.inner.handle, &name_c, host, ctx.launch_variant())?;
        Ok(Function {
            handle,
            module: module.clone(),
            name: entry.name.clone(),
            params: entry.params.clone(),
            attrs,
        })
    }
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

    /// Register and shared-memory attributes of the entry this context's
    /// launches run (on a GPU the sanitized entry in a sanitized context;
    /// `max_threads_per_block` is the most a launch may ask for).
    pub fn attrs(&self) -> &FunctionAttrs {
        &self.attrs
    }

    /// The attributes of the entry a launch with blocks of `threads`
    /// threads runs now: [`attrs`](Self::attrs)' entry, or, for a
    /// sanitized GPU entry, its module's lean build where the launch runs
    /// from that (blocks the capped build cannot launch; and, with
    /// [`SanitizerConfigBuilder::lean_entries`](crate::SanitizerConfigBuilder::lean_entries),
    /// until one of the entry's launches takes a general path of the race
    /// engine). A lean build made only for large blocks is compiled here
    /// if this is its first use.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// # let ctx = vigil::Context::new(0)?;
    /// # let module = vigil::Module::from_ptx(&ctx, "")?;
    /// let f = module.function("copy")?;
    /// let regs = f.attrs_for_block(256)?.num_regs;
    /// println!("a launch of 256-thread blocks runs with {regs} registers a thread");
    /// # Ok(())
    /// # }
    /// ```
    pub fn attrs_for_block(&self, threads: u32) -> Result<FunctionAttrs> {
        let ctx = &self.module.inner.ctx;
        ctx.backend()
            .entry_attrs(&self.handle, ctx.launch_variant(), u64::from(threads))
    }

    /// The module the function lives in.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The raw `CUfunction` of the entry this context's launches run
    /// (for a sanitized entry, its build at the context's register cap;
    /// a sanitized launch may run the entry's lean build instead:
    /// [`SanitizerConfigBuilder::lean_entries`](crate::SanitizerConfigBuilder::lean_entries));
    /// null on the CPU backend.
    pub fn raw(&self) -> sys::CUfunction {
        let ctx = &self.module.inner.ctx;
        ctx.backend()
            .function_raw(&self.handle, ctx.launch_variant())
    }

    /// The backend's half of the function.
    pub(crate) fn handle(&self) -> &FunctionHandle {
        &self.handle
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
