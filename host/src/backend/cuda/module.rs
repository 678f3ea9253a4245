//! [`CudaModule`] (PTX loaded by the driver's JIT) and [`CudaFunction`]
//! (one entry point of it, with its attributes).

use super::device::CudaDevice;
use super::driver::memory as driver_memory;
use super::driver::{module as driver, DriverError};
use crate::error::{Error, Result};
use crate::launch_abi::ptx_cut::entries_reaching;
use crate::types::{FunctionAttrs, LaunchVariant};
use cudarc::driver::sys;
use std::collections::HashSet;
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use vigil_shared::block::WINDOW_ARRAY_SYMBOL;

/// The PTX every asynchronous copy instruction starts with.
const ASYNC_COPY_INSTRUCTION: &str = "cp.async.";

/// Which entries of a sanitized module hold a piece of PTX (an
/// instruction, a symbol) in their code or in a function they call: what
/// it asks of a launch (copies kept in flight, the window shadow) is
/// asked of their launches only, so that the module's other kernels pay
/// nothing for it.
enum EntrySet {
    /// Every entry (the PTX holds an item the cut does not understand).
    All,
    /// These entries, by name.
    These(HashSet<String>),
}

impl EntrySet {
    /// The entries of the sanitized module `text` (none when not
    /// `sanitized`) that reach `needle`.
    fn reaching(text: &str, sanitized: bool, needle: &str) -> EntrySet {
        if sanitized && text.contains(needle) {
            entries_reaching(text, needle).map_or(EntrySet::All, EntrySet::These)
        } else {
            EntrySet::These(HashSet::new())
        }
    }

    /// Whether entry `name` is one of them.
    fn holds(&self, name: &CStr) -> bool {
        match self {
            EntrySet::All => true,
            EntrySet::These(names) => name.to_str().is_ok_and(|n| names.contains(n)),
        }
    }
}
use vigil_shared::gpu::{GLOBAL_VALUE_OFFSET, SANITIZED_SUFFIX};

use super::lean_build::{LeanBuild, LeanTwin, PathRequest, PathWord};
use crate::sanitizer::config::LEAN_SANITIZED_REGISTERS;

const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module; unloaded on drop. The front end keeps it alive (in
/// an `Arc`) while any function of it exists.
pub(crate) struct CudaModule {
    device: Arc<CudaDevice>,
    raw: sys::CUmodule,
    /// The launch variant whose entries it was loaded with.
    variant: LaunchVariant,
    /// A sanitized module whose PTX declares a shared array checked
    /// through the GPU sanitizer's window shadow
    /// ([`WINDOW_ARRAY_SYMBOL`]).
    window_arrays: bool,
    /// The sanitized entries that use such an array.
    window_entries: EntrySet,
    /// The sanitized entries that issue asynchronous copies: their
    /// launches keep each thread's `cp.async` copies in flight
    /// (`vigil_shared::gpu::launch_flags::COPIES_IN_FLIGHT`).
    copy_entries: EntrySet,
    /// A sanitized module's lean build (`super::lean_build`): for entries
    /// that take the race engine's line paths only, and for blocks its
    /// register cap does not fit.
    lean: Option<Arc<LeanBuild>>,
    /// The plain build's module beside a sanitized one whose plain
    /// entries it lacks, for a context that runs some launches plain
    /// ([`with_plain_twin`](Self::with_plain_twin)).
    plain_twin: Option<Box<CudaModule>>,
}

// SAFETY: a CUmodule may be used from any thread (the driver API is
// thread-safe); the module is immutable after loading.
unsafe impl Send for CudaModule {}
// SAFETY: as above.
unsafe impl Sync for CudaModule {}

impl CudaModule {
    /// JIT-compiles NUL-terminated PTX (cut for `variant`) on `device`,
    /// with at most `max_registers` registers per thread when given; a
    /// compile failure is [`Error::PtxLoad`] with the JIT's log. A
    /// sanitized module capped above [`LEAN_SANITIZED_REGISTERS`] gets a
    /// lean build beside it (`super::lean_build`), on which its entries
    /// start when `lean_first`.
    ///
    /// A plain module is compiled whole-program (`cuModuleLoadDataEx`),
    /// exactly as nvcc would, so plain kernels keep their speed. A
    /// sanitized module goes through the JIT linker (`cuLink*`), which
    /// compiles the PTX as relocatable code: every `__vigil` entry calls
    /// the same large engine functions, and whole-program compilation
    /// re-optimises them inside each entry (about 100 s for the test
    /// kernels' 44 entries on sm_90, against 3 s relocatable).
    pub(crate) fn load(
        device: &Arc<CudaDevice>,
        image: &CStr,
        variant: LaunchVariant,
        max_registers: Option<u32>,
        lean_first: bool,
    ) -> Result<CudaModule> {
        device.bind()?;
        let mut jit = JitOptions::new(max_registers);
        let raw = match variant {
            LaunchVariant::Plain => jit.load_whole_program(image)?,
            LaunchVariant::Sanitized => jit.link_relocatable(image).map_err(shared_overflow)?,
        };
        // SAFETY: `raw` was just loaded in the current context.
        let functions = unsafe { driver::module_functions(raw) }?.unwrap_or_default();
        preload_functions(&functions)?;
        // Its launches must never grow the stack (which waits for every
        // kernel then running): reserved now for the neediest function.
        let need = functions
            .iter()
            .map(|&f| local_bytes(f))
            .try_fold(0, |most, bytes| bytes.map(|b| most.max(b)))?;
        device.reserve_stack(need, stack_step(variant))?;
        let text = image.to_string_lossy();
        let sanitized = variant == LaunchVariant::Sanitized;
        let window_arrays = sanitized && text.contains(WINDOW_ARRAY_SYMBOL);
        let window_entries = EntrySet::reaching(&text, sanitized, WINDOW_ARRAY_SYMBOL);
        let copy_entries = EntrySet::reaching(&text, sanitized, ASYNC_COPY_INSTRUCTION);
        let lean = match (variant, max_registers) {
            (LaunchVariant::Sanitized, Some(n)) if n > LEAN_SANITIZED_REGISTERS => {
                Some(Arc::new(LeanBuild::new(device, image, lean_first)?))
            }
            _ => None,
        };
        Ok(CudaModule {
            device: device.clone(),
            raw,
            variant,
            window_arrays,
            window_entries,
            copy_entries,
            lean,
            plain_twin: None,
        })
    }

    /// This sanitized module with `plain`, loaded from the plain build of
    /// the same kernel crate, serving the plain entries it lacks.
    pub(crate) fn with_plain_twin(mut self, plain: CudaModule) -> CudaModule {
        self.plain_twin = Some(Box::new(plain));
        self
    }

    /// Looks up kernel `name`'s entries and queries their attributes: its
    /// plain entry `name` and its sanitized entry `name__vigil`, each
    /// where the module has it. A module loaded for a sanitized context
    /// holds only the `name__vigil` entries and the plain entries without
    /// one (both, when a launch filter runs some launches plain), a plain
    /// context's only the plain entries (see
    /// [`cut_for`](crate::launch_abi::ptx_cut::cut_for)). A kernel the module
    /// was cut without is [`Error::EntryNotLoaded`].
    pub(crate) fn kernel(&self, name: &CStr) -> Result<CudaKernel> {
        let mut sanitized = name.to_bytes().to_vec();
        sanitized.extend_from_slice(SANITIZED_SUFFIX.as_bytes());
        let (sanitized, copies_in_flight, uses_window_arrays) = match CString::new(sanitized) {
            Ok(s) => (
                self.lookup(&s)?,
                self.copy_entries.holds(&s),
                self.window_entries.holds(&s),
            ),
            Err(_) => (None, false, false),
        };
        let plain = match (self.lookup(name)?, &self.plain_twin) {
            (Some(raw), _) => Some(self.with_attrs(raw)?),
            (None, Some(twin)) => twin
                .lookup(name)?
                .map(|raw| twin.with_attrs(raw))
                .transpose()?,
            (None, None) => None,
        };
        if plain.is_none() && sanitized.is_none() {
            return Err(Error::EntryNotLoaded {
                kernel: name.to_string_lossy().into_owned(),
                variant: self.variant,
            });
        }
        let sanitized = match sanitized {
            Some(raw) => {
                let mut f = self.with_attrs(raw)?;
                f.copies_in_flight = copies_in_flight;
                f.uses_window_arrays = uses_window_arrays;
                f.lean = self
                    .lean
                    .clone()
                    .map(|build| Box::new(LeanTwin::new(build, name)));
                f.path_word = f.lean.as_ref().and_then(|twin| twin.path_word());
                Some(f)
            }
            None => None,
        };
        Ok(CudaKernel {
            name: name.to_string_lossy().into_owned(),
            plain,
            sanitized,
        })
    }

    /// The function the module runs for entry `name`: its sanitized entry
    /// `name__vigil` where the module has one, else `name` itself (how the
    /// GPU sanitizer looks up its own entries).
    pub(crate) fn function(&self, name: &CStr) -> Result<CudaFunction> {
        let kernel = self.kernel(name)?;
        let found = kernel.sanitized.or(kernel.plain);
        found.ok_or_else(|| Error::EntryNotLoaded {
            kernel: name.to_string_lossy().into_owned(),
            variant: self.variant,
        })
    }

    /// Moves device global `symbol` (a `vigil_global_` variable: a slot,
    /// the value's size, then the value, `GLOBAL_VALUE_OFFSET` bytes in) to where `place`
    /// puts it, given its value as loaded, and points this module's slot
    /// and its plain twin's there. `None` when the module has no such
    /// variable.
    pub(crate) fn relocate_global(
        &self,
        symbol: &CStr,
        place: &mut dyn FnMut(&[u8]) -> Result<u64>,
    ) -> Result<Option<u64>> {
        let Some((at, bytes)) = self.global_symbol(symbol)? else {
            return Ok(None);
        };
        if bytes < GLOBAL_VALUE_OFFSET {
            return Ok(None);
        }
        let mut header = [0u8; GLOBAL_VALUE_OFFSET];
        // SAFETY: the symbol's first bytes (slot and size), in this live
        // module of the (current) context; no kernel of it has run yet.
        unsafe { driver_memory::memcpy_dtoh(&mut header, at) }?;
        let size = u64::from_ne_bytes(header[8..16].try_into().expect("8 bytes"));
        let size = usize::try_from(size).map_or(0, |s| s.min(bytes - GLOBAL_VALUE_OFFSET));
        let mut value = vec![0u8; size];
        // SAFETY: as above: the value, past the header.
        unsafe { driver_memory::memcpy_dtoh(&mut value, at + GLOBAL_VALUE_OFFSET as u64) }?;
        let to = place(&value)?;
        // SAFETY: the symbol's first 8 bytes, its slot, in this live
        // module; no kernel of it has run yet.
        unsafe { driver_memory::memcpy_htod(at, &to.to_ne_bytes()) }?;
        if let Some(twin) = &self.plain_twin {
            twin.point_global(symbol, to)?;
        }
        if let Some(lean) = &self.lean {
            lean.point_global(symbol, to)?;
        }
        Ok(Some(to))
    }

    /// The address and size of module-scope variable `symbol`.
    fn global_symbol(&self, symbol: &CStr) -> Result<Option<(u64, usize)>> {
        self.device.bind()?;
        // SAFETY: `raw` is a live module of the (current) context.
        Ok(unsafe { driver::module_get_global(self.raw, symbol) }?)
    }

    /// Writes `to` into device global `symbol`'s slot, if this module has
    /// the global.
    pub(super) fn point_global(&self, symbol: &CStr, to: u64) -> Result<()> {
        if let Some((at, _)) = self.global_symbol(symbol)? {
            // SAFETY: the symbol's first 8 bytes, its slot, in this live
            // module; no kernel of it has run yet.
            unsafe { driver_memory::memcpy_htod(at, &to.to_ne_bytes()) }?;
        }
        Ok(())
    }

    /// The raw function `name`, or `None` when the module has no such entry.
    fn lookup(&self, name: &CStr) -> Result<Option<sys::CUfunction>> {
        self.device.bind()?;
        // SAFETY: `raw` is a live module of the (current) context.
        Ok(unsafe { driver::module_get_function(self.raw, name) }?)
    }

    /// A function of this module with its attributes queried.
    fn with_attrs(&self, raw: sys::CUfunction) -> Result<CudaFunction> {
        let attr = |a: sys::CUfunction_attribute| -> Result<u32> {
            // SAFETY: `raw` is a function of this live module.
            let v = unsafe { driver::func_get_attribute(raw, a) }?;
            Ok(v.max(0) as u32)
        };
        use sys::CUfunction_attribute::*;
        let attrs = FunctionAttrs {
            max_threads_per_block: attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_shared_bytes: attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            num_regs: attr(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        };
        // Reserved at the load already where the driver lists a module's
        // functions; this covers drivers that cannot (before CUDA 12.4).
        self.device
            .reserve_stack(local_bytes(raw)?, stack_step(self.variant))?;
        Ok(CudaFunction {
            raw,
            attrs,
            dyn_smem_optin: AtomicU32::new(0),
            resident: AtomicU64::new(0),
            window_arrays: self.window_arrays,
            uses_window_arrays: false,
            copies_in_flight: false,
            lean: None,
            path_word: None,
        })
    }
}

impl Drop for CudaModule {
    fn drop(&mut self) {
        if matches!(self.variant, LaunchVariant::Sanitized) {
            // Reports may still name its locations: unloaded with the device.
            self.device.keep_module(self.raw);
            return;
        }
        self.device.destroy("a module", || {
            // SAFETY: `raw` was loaded in `load` and is unloaded once; every
            // function of it is dropped before (the front end's `Arc`).
            unsafe { driver::module_unload(self.raw) }
        });
    }
}

/// The JIT options of one module load: an error log buffer and an
/// optional register cap, as the parallel arrays the driver reads.
struct JitOptions {
    log: Vec<u8>,
    options: Vec<sys::CUjit_option>,
    values: Vec<*mut c_void>,
}

impl JitOptions {
    fn new(max_registers: Option<u32>) -> JitOptions {
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
        JitOptions {
            log,
            options,
            values,
        }
    }

    /// A JIT call's failure as [`Error::PtxLoad`], with the JIT's log.
    fn failed(&self, e: DriverError) -> Error {
        let Some(r) = e.result() else {
            return e.into();
        };
        let end = self
            .log
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.log.len());
        Error::PtxLoad {
            name: format!("{r:?}"),
            code: r as u32,
            log: String::from_utf8_lossy(&self.log[..end])
                .trim_end()
                .to_owned(),
        }
    }

    /// Whole-program JIT of `image` (the context is current).
    fn load_whole_program(&mut self, image: &CStr) -> Result<sys::CUmodule> {
        // SAFETY: the values are what their options expect: `log` is
        // writable for the `JIT_LOG_BYTES` the size option gives.
        unsafe { driver::module_load_data_ex(image, &mut self.options, &mut self.values) }
            .map_err(|e| self.failed(e))
    }

    /// Relocatable JIT of `image` through the driver's linker, then the
    /// linked cubin loaded (the context is current).
    fn link_relocatable(&mut self, image: &CStr) -> Result<sys::CUmodule> {
        // SAFETY: as in `load_whole_program`; `self` (the log) outlives the
        // session, destroyed below.
        let state = unsafe { driver::link_create(&mut self.options, &mut self.values) }
            .map_err(|e| self.failed(e))?;
        let linked = self.link_into(state, image);
        // SAFETY: `state` was created above and is destroyed once, after
        // the cubin it owns was loaded (or the link failed).
        let destroyed = unsafe { driver::link_destroy(state) };
        let raw = linked?;
        destroyed?;
        Ok(raw)
    }

    fn link_into(&mut self, state: sys::CUlinkState, image: &CStr) -> Result<sys::CUmodule> {
        // SAFETY: `state` is live (destroyed by the caller after this).
        unsafe { driver::link_add_ptx(state, image, c"vigil_module.ptx") }
            .map_err(|e| self.failed(e))?;
        // SAFETY: as above.
        let (cubin, _) = unsafe { driver::link_complete(state) }.map_err(|e| self.failed(e))?;
        // SAFETY: `cubin` is the linked image `state` owns (alive until
        // `cuLinkDestroy`); the context is current.
        Ok(unsafe { driver::module_load_data(cubin) }?)
    }
}

/// Loads `functions` onto the device now. Under the driver's lazy loading
/// (the default since CUDA 12.2) a function is otherwise loaded at its
/// first use, and that load waits for kernels already running: a kernel
/// launched on one stream to end one that spins on another would never
/// start. Drivers before CUDA 12.4 have no `cuFuncLoad`; there functions
/// load as the driver decides.
fn preload_functions(functions: &[sys::CUfunction]) -> Result<()> {
    // Every function, used or not: one loaded at its first use is what
    // waits for the kernels then running.
    for &f in functions {
        // SAFETY: `f` is a function of a live module.
        if !unsafe { driver::func_load(f) }? {
            break;
        }
    }
    Ok(())
}

/// The local memory (stack) each thread of `function` needs, in bytes.
fn local_bytes(function: sys::CUfunction) -> Result<usize> {
    let local = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
    // SAFETY: `function` is a function of a live module.
    let v = unsafe { driver::func_get_attribute(function, local) }?;
    Ok(v.max(0) as usize)
}

/// A sanitized module reserves its stack in steps of this many bytes:
/// every sanitized entry calls the same engine, so the next module's
/// entries (and a lean build's) usually fit what one reserved,
/// and their loads do not grow it again.
const SANITIZED_STACK_STEP: usize = 1024;

/// The step [`CudaDevice::reserve_stack`] rounds a `variant` module's
/// stack to: a plain module reserves exactly what it needs.
fn stack_step(variant: LaunchVariant) -> usize {
    match variant {
        LaunchVariant::Plain => 1,
        LaunchVariant::Sanitized => SANITIZED_STACK_STEP,
    }
}

/// A sanitized module's load failure as [`Error::SanitizedSharedMemory`]
/// when the JIT's log says an entry uses too much shared data (what the
/// sanitizer's static shared memory can cause), else as it was.
fn shared_overflow(e: Error) -> Error {
    match e {
        Error::PtxLoad { log, .. } if log.contains("too much shared data") => {
            Error::SanitizedSharedMemory {
                entry: overflowing_entry(&log).unwrap_or("?").to_owned(),
                added: vigil_shared::block::SANITIZER_SHARED_BYTES,
                log,
            }
        }
        e => e,
    }
}

/// The entry a ptxas "Entry function 'name' uses too much shared data"
/// line names.
fn overflowing_entry(log: &str) -> Option<&str> {
    let line = log.lines().find(|l| l.contains("too much shared data"))?;
    let (_, rest) = line.split_once("Entry function '")?;
    rest.split_once('\'').map(|(name, _)| name)
}

/// One entry point of a [`CudaModule`].
pub(crate) struct CudaFunction {
    raw: sys::CUfunction,
    attrs: FunctionAttrs,
    /// The dynamic shared memory this function has been opted in to.
    dyn_smem_optin: AtomicU32,
    /// The last [`resident_blocks`](Self::resident_blocks) answer: the
    /// block's threads, its dynamic shared memory and the blocks an SM
    /// holds, packed by [`ResidentBlocks`]; 0 when none yet.
    resident: AtomicU64,
    /// Whether its module declares arrays the window shadow checks.
    window_arrays: bool,
    /// Whether it (a sanitized entry) uses such an array.
    uses_window_arrays: bool,
    /// Whether it issues asynchronous copies (a sanitized entry).
    copies_in_flight: bool,
    /// For a sanitized entry: its twin in the module's lean build.
    lean: Option<Box<LeanTwin>>,
    /// For a sanitized entry (either build) whose launches tell the host
    /// what they took: its path word.
    path_word: Option<PathWord>,
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

    /// The function a launch of this entry with blocks of `threads`
    /// threads runs: this one, or its twin in the module's lean build
    /// (`super::lean_build` says when). The caller checks the
    /// configuration against the function returned.
    pub(crate) fn for_block(&self, threads: u64) -> Result<&CudaFunction> {
        match &self.lean {
            Some(twin) => twin.pick(self, threads),
            None => Ok(self),
        }
    }

    /// What a sanitized launch of this function with `dynamic` bytes of
    /// dynamic shared memory asks of its entry's path word
    /// (`launch_record::path_word`: nothing when it has none), and
    /// whether its blocks claim their regions at entry: a block of an
    /// earlier launch claimed them, or it checks shared memory through
    /// the window shadow from its first access (it has dynamic shared
    /// memory, or uses an array declared without a `.shared` shadow).
    pub(crate) fn path_request(&self, dynamic: u32) -> PathRequest {
        let window = self.uses_window_arrays || dynamic > 0;
        self.path_word
            .map_or(PathRequest::without_word(window), |w| w.request(window))
    }

    /// Makes this function's launches tell the host what they took, in
    /// `word`.
    pub(super) fn set_path_word(&mut self, word: Option<PathWord>) {
        self.path_word = word;
    }

    /// How many blocks of `threads` threads with `dynamic` bytes of
    /// dynamic shared memory one SM holds at once (the context is
    /// current): the driver's occupancy, remembered for the last shape
    /// asked (a kernel is launched with one shape, mostly).
    pub(crate) fn resident_blocks(&self, threads: u32, dynamic: u32) -> Result<u32> {
        let last = ResidentBlocks(self.resident.load(Ordering::Relaxed));
        if let Some(blocks) = last.answer(threads, dynamic) {
            return Ok(blocks);
        }
        // SAFETY: `raw` is a live function of the current context.
        let blocks = unsafe { driver::max_active_blocks(self.raw, threads, dynamic) }?;
        self.resident.store(
            ResidentBlocks::of(threads, dynamic, blocks).0,
            Ordering::Relaxed,
        );
        Ok(blocks)
    }

    /// The shared window a sanitized launch of this entry with `dynamic`
    /// bytes of dynamic shared memory needs the window shadow to cover
    /// (its static and dynamic shared memory), or 0 when nothing of it
    /// can go through the window shadow: no dynamic shared memory, and
    /// no array of the module declared without a `.shared` shadow.
    pub(crate) fn shared_window(&self, dynamic: u32) -> u64 {
        if self.window_arrays || dynamic > 0 {
            u64::from(self.attrs.static_shared_bytes) + u64::from(dynamic)
        } else {
            0
        }
    }

    /// Whether a sanitized launch of this entry keeps its threads'
    /// `cp.async` copies in flight (its module issues some).
    pub(crate) fn copies_in_flight(&self) -> bool {
        self.copies_in_flight
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
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: `raw` is a live function; the value was validated against
        // the device's opt-in limit by the caller.
        unsafe { driver::func_set_attribute(self.raw, attr, bytes as i32) }?;
        self.dyn_smem_optin.fetch_max(bytes, Ordering::Relaxed);
        Ok(())
    }
}

/// A kernel's entry points in a loaded module, looked up together when
/// the front end looks the kernel up: its plain entry and its sanitized
/// entry (`name__vigil`), each where the module has it.
pub(crate) struct CudaKernel {
    /// The kernel's name (its plain entry's).
    name: String,
    plain: Option<CudaFunction>,
    sanitized: Option<CudaFunction>,
}

impl CudaKernel {
    /// The entry a `variant` launch runs, and the variant that entry is: a
    /// sanitized launch of a kernel without a sanitized entry
    /// (hand-written PTX) runs its plain entry, unchecked.
    fn for_variant(&self, variant: LaunchVariant) -> Result<(&CudaFunction, LaunchVariant)> {
        let found = match (variant, &self.sanitized, &self.plain) {
            (LaunchVariant::Sanitized, Some(s), _) => Some((s, LaunchVariant::Sanitized)),
            (_, _, Some(p)) => Some((p, LaunchVariant::Plain)),
            (LaunchVariant::Plain, _, None) => None,
            (LaunchVariant::Sanitized, None, None) => None,
        };
        found.ok_or_else(|| Error::EntryNotLoaded {
            kernel: self.name.clone(),
            variant,
        })
    }

    /// What a `variant` launch of the kernel is held to, as the front end
    /// reports it ([`Function::attrs`](crate::Function::attrs)): its
    /// entry's attributes, except that a sanitized entry with a lean
    /// twin launches blocks of up to `device_max` threads (the twin takes
    /// those the entry cannot).
    pub(crate) fn attrs(&self, variant: LaunchVariant, device_max: u32) -> Result<FunctionAttrs> {
        let (f, _) = self.for_variant(variant)?;
        let mut a = f.attrs;
        if f.lean.is_some() {
            a.max_threads_per_block = a.max_threads_per_block.max(device_max);
        }
        Ok(a)
    }

    /// The raw function a `variant` launch runs (null when the module has
    /// none for it).
    pub(crate) fn raw(&self, variant: LaunchVariant) -> sys::CUfunction {
        self.for_variant(variant)
            .map_or(std::ptr::null_mut(), |(f, _)| f.raw)
    }

    /// The entry a `variant` launch of blocks of `threads` threads runs,
    /// and its variant: [`CudaKernel::for_variant`], then the build a
    /// sanitized entry runs the launch from ([`CudaFunction::for_block`]:
    /// its lean twin for blocks it cannot launch and while its launches
    /// stay on the race engine's line paths). The launch's configuration is checked against
    /// the attributes of the function returned. A sanitized launch that
    /// runs a plain entry says so once per kernel on stderr.
    pub(crate) fn entry(
        &self,
        variant: LaunchVariant,
        threads: u64,
    ) -> Result<(&CudaFunction, LaunchVariant)> {
        let (f, runs) = self.for_variant(variant)?;
        if runs != variant {
            warn_unchecked_once(&self.name);
        }
        Ok((f.for_block(threads)?, runs))
    }
}

/// Says once per kernel name that a sanitized context launched `kernel`
/// without checking it (it has no `name__vigil` entry).
fn warn_unchecked_once(kernel: &str) {
    use std::collections::HashSet;
    static WARNED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut warned = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if warned.insert(kernel.to_owned()) {
        eprintln!(
            "vigil: kernel `{kernel}` has no sanitized entry (`{kernel}{SANITIZED_SUFFIX}`, emitted by \
             #[kernel]); it runs unchecked: the race sanitizer does not see its accesses"
        );
    }
}

/// One remembered occupancy answer: threads (bits 0-15), dynamic shared
/// bytes (16-47) and blocks (48-63), or 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ResidentBlocks(u64);

impl ResidentBlocks {
    /// The answer `blocks` for a block of `threads` with `dynamic` bytes.
    fn of(threads: u32, dynamic: u32, blocks: u32) -> ResidentBlocks {
        ResidentBlocks(
            u64::from(threads.min(0xffff))
                | u64::from(dynamic) << 16
                | u64::from(blocks.min(0xffff)) << 48,
        )
    }

    /// The blocks it remembers for `threads` and `dynamic`, if it is
    /// their answer.
    fn answer(self, threads: u32, dynamic: u32) -> Option<u32> {
        (self.0 != 0 && ResidentBlocks::of(threads, dynamic, 0).0 == self.0 & ((1 << 48) - 1))
            .then_some((self.0 >> 48) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_memory_overflow_names_the_entry() {
        let log = "ptxas error   : Entry function 'near__vigil' uses too much shared data \
                   (0xc8f0 bytes, 0xc000 max)";
        let e = shared_overflow(Error::PtxLoad {
            name: "CUDA_ERROR_INVALID_PTX".into(),
            code: 218,
            log: log.into(),
        });
        match &e {
            Error::SanitizedSharedMemory { entry, added, .. } => {
                assert_eq!((entry.as_str(), *added), ("near__vigil", 2472));
            }
            other => panic!("not a shared-memory error: {other:?}"),
        }
        assert!(e.to_string().contains("near__vigil"), "{e}");
        let other = shared_overflow(Error::PtxLoad {
            name: "CUDA_ERROR_INVALID_PTX".into(),
            code: 218,
            log: "ptxas error: syntax".into(),
        });
        assert!(matches!(other, Error::PtxLoad { .. }));
    }

    #[test]
    fn a_remembered_occupancy_answers_its_own_shape_only() {
        let r = super::ResidentBlocks::of(256, 4096, 2);
        assert_eq!(r.answer(256, 4096), Some(2));
        assert_eq!(r.answer(512, 4096), None);
        assert_eq!(r.answer(256, 0), None);
        assert_eq!(
            super::ResidentBlocks(0).answer(0, 0),
            None,
            "nothing remembered yet"
        );
        assert_eq!(
            super::ResidentBlocks::of(1024, 0, 0).answer(1024, 0),
            Some(0)
        );
    }
}
