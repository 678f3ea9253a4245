//! The two implementations of every suite kernel: Vigil's (typed launches
//! of PTX built from Rust) and the nvcc twin's (a cubin of
//! `benches/cuda/twins.cu`, launched through the raw driver API).

use crate::data::DevData;
use crate::error::{driver, BenchError, Result};
use std::collections::HashMap;
use std::ffi::CString;
use std::path::Path;
use vigil::unstable::launch_abi::check_params;
use vigil::unstable::ptx::{parse_entries, PtxEntry, PtxParam};
use vigil::unstable::sys;
use vigil::{Context, KernelFn, LaunchConfig, Module, ParamBuffer, Stream};
use vigil_bench_kernels::{block, pipelined, streaming, tiles};
use vigil_kernels::examples;

/// The PTX of `vigil-bench-kernels`, built by `vigil-build` in `build.rs`.
pub const BENCH_PTX: &str = vigil::include_ptx!("vigil-bench-kernels");

/// Every Vigil kernel of the suite, loaded on one context. On a sanitized
/// context a typed launch runs the sanitized variant (when the backend has
/// one, [`Context::launch_variant`]).
pub struct VigilKernels {
    /// `copy`.
    pub copy: KernelFn<streaming::copy>,
    /// `axpy` (the examples' kernel).
    pub axpy: KernelFn<examples::axpy>,
    /// `reduce_sum` (the examples' kernel).
    pub reduce_sum: KernelFn<examples::reduce_sum>,
    /// `histogram` (the examples' kernel).
    pub histogram: KernelFn<examples::histogram>,
    /// `counter`.
    pub counter: KernelFn<streaming::counter>,
    /// `stencil5`.
    pub stencil5: KernelFn<streaming::stencil5>,
    /// `transpose`.
    pub transpose: KernelFn<tiles::transpose>,
    /// `sgemm`.
    pub sgemm: KernelFn<tiles::sgemm>,
    /// `transpose_tma`.
    pub transpose_tma: KernelFn<pipelined::transpose_tma>,
    /// `sgemm_async`.
    pub sgemm_async: KernelFn<pipelined::sgemm_async>,
    /// `sgemm_tma`.
    pub sgemm_tma: KernelFn<pipelined::sgemm_tma>,
    /// `softmax`.
    pub softmax: KernelFn<block::softmax>,
    /// `scan`.
    pub scan: KernelFn<block::scan>,
}

impl VigilKernels {
    /// Loads the suite's two PTX modules on `ctx` and checks every kernel's
    /// signature.
    pub fn load(ctx: &Context) -> Result<VigilKernels> {
        let bench = Module::from_ptx(ctx, BENCH_PTX)?;
        let shared = Module::from_ptx(ctx, vigil_tests::KERNELS_PTX)?;
        Ok(VigilKernels {
            copy: bench.kernel()?,
            axpy: shared.kernel()?,
            reduce_sum: shared.kernel()?,
            histogram: shared.kernel()?,
            counter: bench.kernel()?,
            stencil5: bench.kernel()?,
            transpose: bench.kernel()?,
            sgemm: bench.kernel()?,
            transpose_tma: bench.kernel()?,
            sgemm_async: bench.kernel()?,
            sgemm_tma: bench.kernel()?,
            softmax: bench.kernel()?,
            scan: bench.kernel()?,
        })
    }
}

/// One argument of a twin's raw launch.
#[derive(Clone, Copy, Debug)]
pub enum RawArg {
    /// A device pointer.
    Ptr(u64),
    /// A 64-bit size.
    U64(u64),
    /// A float scalar.
    F32(f32),
}

impl RawArg {
    /// The twins' arguments for `scalars` followed by every buffer of
    /// `ins`, then of `outs`, each as pointer and length: the order
    /// `twins.cu` declares its parameters in, which mirrors the Vigil
    /// kernels' lowering (scalars first in every suite kernel).
    pub fn list(scalars: &[RawArg], ins: &[DevData], outs: &[DevData]) -> Vec<RawArg> {
        let buffers = ins
            .iter()
            .chain(outs)
            .flat_map(|b| [RawArg::Ptr(b.device_ptr()), RawArg::U64(b.len() as u64)]);
        scalars.iter().copied().chain(buffers).collect()
    }

    /// Packs `args` for a launch (pointers without a device: the twins'
    /// launches check types and count, not devices).
    pub fn pack(args: &[RawArg]) -> ParamBuffer {
        let mut buf = ParamBuffer::with_capacity(8 * args.len(), args.len());
        for (i, arg) in args.iter().enumerate() {
            buf.begin_arg(i);
            match *arg {
                RawArg::Ptr(p) => buf.push_pointer(p, None),
                RawArg::U64(v) => buf.push(v),
                RawArg::F32(v) => buf.push(v),
            };
        }
        buf
    }
}

/// The nvcc twins: a cubin (or PTX) loaded with `cuModuleLoadData`, its
/// entry points looked up once, and, when nvcc's PTX of them is at hand,
/// their parameter lists (checked against the Vigil kernels' at load and
/// against every launch's arguments).
pub struct Twins {
    ctx: Context,
    module: sys::CUmodule,
    functions: HashMap<String, sys::CUfunction>,
    params: HashMap<String, Vec<PtxParam>>,
}

/// The twins' parameter lists from nvcc's PTX of `twins.cu`, after checking
/// that each twin takes the same scalars as the Vigil kernel of its name
/// (`twins.cu` mirrors the Vigil kernels' lowering; a drift would pass
/// wrong arguments).
pub fn twin_signatures(twins_ptx: &str) -> Result<HashMap<String, Vec<PtxParam>>> {
    let twins = parse_entries(twins_ptx)?;
    let mut vigil = parse_entries(BENCH_PTX)?;
    vigil.extend(parse_entries(vigil_tests::KERNELS_PTX)?);
    let find = |entries: &[PtxEntry], name: &str, whose: &str| {
        entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.params.clone())
            .ok_or_else(|| BenchError::Usage(format!("{whose} has no entry `{name}`")))
    };
    // The PTX type (`.u64`, `.f32`) of each parameter; nvcc and rustc
    // differ in the qualifiers after it.
    let types = |params: &[PtxParam]| -> Vec<String> {
        params
            .iter()
            .map(|p| p.decl.split_whitespace().next().unwrap_or("").to_owned())
            .collect()
    };
    let mut out = HashMap::new();
    for name in Twins::NAMES {
        let (t, v) = (
            find(&twins, name, "twins.cu")?,
            find(&vigil, name, "Vigil")?,
        );
        if types(&t) != types(&v) {
            return Err(BenchError::Usage(format!(
                "twin `{name}` takes ({}), the Vigil kernel ({})",
                types(&t).join(", "),
                types(&v).join(", ")
            )));
        }
        out.insert(name.to_owned(), t);
    }
    Ok(out)
}

impl Twins {
    /// The entry points `twins.cu` defines.
    pub const NAMES: [&'static str; 13] = [
        "copy",
        "axpy",
        "reduce_sum",
        "histogram",
        "counter",
        "stencil5",
        "transpose",
        "sgemm",
        "transpose_tma",
        "sgemm_async",
        "sgemm_tma",
        "softmax",
        "scan",
    ];

    /// Loads `image` (the bytes of a cubin, or PTX text) on `ctx`'s GPU;
    /// `ptx`, nvcc's PTX of the same source, adds the signature checks
    /// ([`twin_signatures`]).
    pub fn load(ctx: &Context, image: &[u8], ptx: Option<&str>) -> Result<Twins> {
        let params = match ptx {
            Some(text) => twin_signatures(text)?,
            None => HashMap::new(),
        };
        ctx.bind()?;
        let mut bytes = image.to_vec();
        bytes.push(0); // PTX text must be NUL-terminated; a cubin ignores it.
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `module` is a valid out-pointer, `bytes` a live image the
        // driver copies before returning; the context is current.
        driver("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, bytes.as_ptr().cast())
        })?;
        let mut twins = Twins {
            ctx: ctx.clone(),
            module,
            functions: HashMap::new(),
            params,
        };
        for name in Self::NAMES {
            let c_name = CString::new(name).map_err(|e| BenchError::Usage(e.to_string()))?;
            let mut f: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: `f` is a valid out-pointer; `module` was loaded above.
            driver("cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&mut f, twins.module, c_name.as_ptr())
            })?;
            twins.functions.insert(name.to_owned(), f);
        }
        Ok(twins)
    }

    /// Loads the cubin at `path`, with nvcc's PTX beside it (same name,
    /// `.ptx`) for the signature checks when it is there.
    pub fn from_files(ctx: &Context, path: &Path) -> Result<Twins> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| BenchError::Io {
                what: format!("reading {}", p.display()),
                source,
            })
        };
        let image = read(path)?;
        let ptx_path = path.with_extension("ptx");
        let ptx = match ptx_path.exists() {
            true => Some(String::from_utf8_lossy(&read(&ptx_path)?).into_owned()),
            false => None,
        };
        Twins::load(ctx, &image, ptx.as_deref())
    }

    /// True when the twins' parameter lists were checked against the
    /// Vigil kernels' (nvcc's PTX was given to [`Twins::load`]).
    pub fn signatures_checked(&self) -> bool {
        !self.params.is_empty()
    }

    /// Launches twin `name` on `stream` through `cuLaunchKernel` with
    /// `scalars`, then each buffer of `ins` and of `outs` ([`RawArg::list`]).
    ///
    /// # Safety
    /// The twin is CUDA C++ with no bounds checks: its parameter list must
    /// be `scalars` and then the buffers, as `twins.cu` declares it for the
    /// case that calls this (the buffers themselves are live, of the
    /// stream's context, and passed with their lengths).
    pub unsafe fn launch(
        &self,
        name: &str,
        config: LaunchConfig,
        stream: &Stream,
        scalars: &[RawArg],
        ins: &[DevData],
        outs: &[DevData],
    ) -> Result<()> {
        let args = RawArg::list(scalars, ins, outs);
        let f = *self
            .functions
            .get(name)
            .ok_or_else(|| BenchError::Usage(format!("no twin named `{name}`")))?;
        let buf = RawArg::pack(&args);
        if let Some(params) = self.params.get(name) {
            check_params(name, &buf, params, &[], None)?;
        }
        // SAFETY: `f` is a function of this module; the caller vouches
        // for the arguments.
        unsafe { raw_launch(f, config, stream, &buf) }
    }
}

/// `cuLaunchKernel` of `f` with `buf`'s parameters on `stream`: no
/// checks, the baseline a typed launch is compared with.
///
/// # Safety
/// `f` must be a live function of the stream's context whose parameter
/// list `buf` matches, with pointers the kernel may access as it does.
pub unsafe fn raw_launch(
    f: sys::CUfunction,
    config: LaunchConfig,
    stream: &Stream,
    buf: &ParamBuffer,
) -> Result<()> {
    let mut params = buf.kernel_params();
    let (g, b) = (config.grid, config.block);
    // SAFETY: `params` holds one pointer per kernel parameter into `buf`,
    // which outlives the call (the driver copies the values); the caller
    // vouches for `f` and the values.
    driver("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            f,
            g.x,
            g.y,
            g.z,
            b.x,
            b.y,
            b.z,
            config.shared_mem_bytes,
            stream.raw(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}

impl Drop for Twins {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: the module was loaded by `Twins::load` and is unloaded
            // once; its functions are not used after this.
            unsafe { sys::cuModuleUnload(self.module) };
        }
    }
}

/// Which implementation a case's launch runs.
#[derive(Clone, Copy)]
pub enum Impl<'a> {
    /// Vigil's kernels (plain or sanitized, as the context decides).
    Vigil(&'a VigilKernels),
    /// The nvcc twins.
    Twin(&'a Twins),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twins_that_mirror_the_vigil_kernels_pass_the_signature_check() {
        // Vigil's own PTX mirrors itself exactly.
        let both = format!("{BENCH_PTX}\n{}", vigil_tests::KERNELS_PTX);
        let params = twin_signatures(&both).expect("the Vigil kernels mirror themselves");
        assert_eq!(params.len(), Twins::NAMES.len());
        // What a launch of `axpy` packs passes the launch-time check...
        let axpy = RawArg::pack(&[
            RawArg::F32(2.0),
            RawArg::Ptr(0x1000),
            RawArg::U64(4),
            RawArg::Ptr(0x2000),
            RawArg::U64(4),
        ]);
        check_params("axpy", &axpy, &params["axpy"], &[], None).expect("axpy's arguments");
        // ...and a missing length does not.
        let short = RawArg::pack(&[RawArg::F32(2.0), RawArg::Ptr(0x1000), RawArg::Ptr(0x2000)]);
        assert!(check_params("axpy", &short, &params["axpy"], &[], None).is_err());
    }

    #[test]
    fn a_twin_whose_parameters_drift_is_refused_by_name() {
        let twins = ".visible .entry copy(.param .u64 copy_param_0, .param .u64 copy_param_1)";
        let err = twin_signatures(twins).expect_err("copy lost its lengths");
        assert!(
            err.to_string().contains("twin `copy` takes (.u64, .u64)"),
            "{err}"
        );
    }
}
