//! What the scenario suites (`race_scenarios.rs`, `scale_scenarios.rs`)
//! share: how a backend's sanitized context is made, the bench every case
//! runs on, and the lookup of `// @marker` lines in the kernels' sources.
#![allow(dead_code)] // each suite uses its part

use vigil::{Context, DeviceBuffer, Kernel, KernelFn, Module, Stream};
use vigil_tests::KERNELS_PTX;

/// Makes a sanitized context with `workers` CPU workers (ignored on a GPU),
/// or `None` when the backend is not available here (the case is skipped).
pub type MakeContext = fn(usize) -> Option<Context>;

/// A sanitized CPU context (the built-in CPU sanitizer).
pub fn cpu_context(workers: usize) -> Option<Context> {
    Some(
        Context::builder()
            .cpu()
            .sanitize(true)
            .cpu_workers(workers)
            .build()
            .expect("a sanitized CPU context"),
    )
}

/// The line of `source` (the text of kernel file `file`) that carries
/// `// @marker`; the marker must be unique.
pub fn marker_line(source: &str, file: &str, marker: &str) -> u32 {
    let tag = format!("// @{marker}");
    let mut found = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&tag));
    let (i, _) = found
        .next()
        .unwrap_or_else(|| panic!("no `{tag}` marker in {file}"));
    assert!(found.next().is_none(), "marker `{tag}` is not unique");
    i as u32 + 1
}

/// A sanitized context, a stream and the kernels' module.
pub struct Bench {
    pub ctx: Context,
    pub stream: Stream,
    pub module: Module,
    /// CPU workers asked for.
    pub workers: usize,
}

impl Bench {
    pub fn new(make: MakeContext, workers: usize) -> Option<Bench> {
        let ctx = make(workers)?;
        let stream = Stream::new(&ctx).expect("stream");
        let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
        Some(Bench {
            ctx,
            stream,
            module,
            workers,
        })
    }

    pub fn kernel<K: Kernel>(&self) -> KernelFn<K> {
        self.module.kernel::<K>().expect("kernel in the module")
    }

    /// `n` zeroed `u32`s.
    pub fn zeros(&self, n: usize) -> DeviceBuffer<u32> {
        self.zeros_of(n)
    }

    /// `n` zeroed elements of `T`.
    pub fn zeros_of<T: bytemuck::Pod>(&self, n: usize) -> DeviceBuffer<T> {
        DeviceBuffer::alloc_zeroed(&self.stream, n).expect("buffer")
    }

    pub fn sync(&self) -> vigil::Result<()> {
        self.ctx.synchronize()
    }
}
