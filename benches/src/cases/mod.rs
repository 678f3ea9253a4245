//! The suite's cases: for each kernel, its size, fresh random inputs, the
//! host reference of its outputs, and one launch function that runs either
//! implementation ([`Impl`]) on the same buffers.

mod block;
mod pipelined;
mod streaming;
mod tiles;

use crate::data::{DevData, Expect, HostData};
use crate::error::Result;
use crate::kernels::Impl;
use vigil::Stream;
use vigil_tests::Rng;

/// How large the problems are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Large enough to fill an H100 (hundreds of MB per streaming buffer).
    Full,
    /// Small, odd sizes (partial blocks and tiles) for the CPU backend.
    Smoke,
}

impl Scale {
    /// `full` or `smoke`, whichever this is.
    pub fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Scale::Full => full,
            Scale::Smoke => smoke,
        }
    }
}

/// What limits a kernel, which decides the targets it is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Limited by memory bandwidth; `sanitizer_target` marks the kernels
    /// the sanitizer's bandwidth targets name (copy, axpy, stencil, softmax,
    /// reduce, scan).
    Memory {
        /// Held to sanitized/plain <= 5x and 10x faster than memcheck.
        sanitizer_target: bool,
    },
    /// Limited by atomics; `contended` marks the same-word ones (the
    /// 16-bin histogram and the counter), held to sanitized/plain <= 50x.
    Atomics {
        /// Many threads update few words.
        contended: bool,
    },
    /// Limited by arithmetic.
    Compute,
}

impl Class {
    /// A short label for the table.
    pub fn label(self) -> &'static str {
        match self {
            Class::Memory { .. } => "memory",
            Class::Atomics { contended: true } => "contended atomics",
            Class::Atomics { contended: false } => "atomics",
            Class::Compute => "compute",
        }
    }
}

/// The work one run does, for its rate.
#[derive(Clone, Copy, Debug)]
pub enum Work {
    /// The fewest bytes a run moves through device memory (each input read
    /// once, each output written once).
    Bytes(u64),
    /// Floating-point operations.
    Flops(u64),
    /// Atomic operations.
    Atomics(u64),
}

/// How an output buffer is reset before a checked run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// Filled with values no kernel writes (NaN, `u32::MAX`), so that an
    /// element left unwritten fails the check.
    Poison,
    /// Zeroed (counters, histograms).
    Zero,
    /// Set back to [`Output::initial`] (an in-place update such as `axpy`'s `y`).
    Initial,
}

/// One output of a case.
#[derive(Clone, Debug)]
pub struct Output {
    /// The buffer's contents when allocated (its type and length too).
    pub initial: HostData,
    /// How it is reset before a checked run.
    pub reset: Reset,
    /// The reference after one run (`None` for scratch such as partial sums).
    pub expect: Option<Expect>,
}

impl Output {
    /// An output of `len` `f32`s, poisoned before each checked run.
    pub fn f32s(len: usize, expect: Option<Expect>) -> Output {
        Output {
            initial: HostData::F32(vec![0.0; len]),
            reset: Reset::Poison,
            expect,
        }
    }

    /// An output of `len` `u32`s, reset as `reset` says.
    pub fn u32s(len: usize, reset: Reset, expect: Option<Expect>) -> Output {
        Output {
            initial: HostData::U32(vec![0; len]),
            reset,
            expect,
        }
    }
}

/// A case's launch: one run of implementation `Impl` on inputs `ins` and
/// outputs `outs` (one or more kernel launches).
pub type LaunchFn = Box<dyn Fn(Impl<'_>, &Stream, &[DevData], &mut [DevData]) -> Result<()>>;

/// One kernel of the suite at one size, with its inputs and references.
pub struct Case {
    /// The kernel's name in the table (`histogram256`, `sgemm`, ...).
    pub name: &'static str,
    /// What limits it.
    pub class: Class,
    /// The problem size, for the table.
    pub size: String,
    /// The work of one run.
    pub work: Work,
    /// Host inputs, uploaded once per context.
    pub inputs: Vec<HostData>,
    /// Outputs, their initial contents and references.
    pub outputs: Vec<Output>,
    /// Runs it once.
    pub launch: LaunchFn,
}

/// A case's constructor: the scale, the device's multiprocessor count (for
/// grid-stride grids) and the random source of its inputs.
pub type CaseFn = fn(Scale, u32, &mut Rng) -> Case;

/// Every case of the suite, by name, in table order.
pub const CASES: [(&str, CaseFn); 14] = [
    ("copy", streaming::copy),
    ("axpy", streaming::axpy),
    ("reduce_sum", block::reduce_sum),
    ("histogram256", block::histogram256),
    ("histogram16", block::histogram16),
    ("stencil5", streaming::stencil5),
    ("transpose", tiles::transpose),
    ("sgemm", tiles::sgemm),
    ("transpose_tma", pipelined::transpose_tma),
    ("sgemm_async", pipelined::sgemm_async),
    ("sgemm_tma", pipelined::sgemm_tma),
    ("softmax", block::softmax),
    ("scan", block::scan),
    ("counter", streaming::counter),
];

/// The cases' names, in table order.
pub const NAMES: [&str; CASES.len()] = {
    let mut names = [""; CASES.len()];
    let mut i = 0;
    while i < CASES.len() {
        names[i] = CASES[i].0;
        i += 1;
    }
    names
};

/// The cases `only` selects, in table order.
pub fn selected(only: &[String]) -> Vec<&'static str> {
    CASES
        .iter()
        .map(|&(name, _)| name)
        .filter(|name| only.is_empty() || only.iter().any(|o| o == name))
        .collect()
}

/// The random source of case `name`'s inputs for a run seeded `seed`: the
/// same in every process of the run (the compute-sanitizer children too),
/// whichever cases are selected.
pub fn case_rng(seed: u64, name: &str) -> Rng {
    // FNV-1a of the name, so that every case draws its own inputs.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Rng::new(seed ^ h)
}

/// The constructor of the case called `name`.
pub fn find(name: &str) -> Option<CaseFn> {
    CASES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, make)| make)
}

/// A case's buffers on one context.
pub struct Instance {
    /// Inputs, in the case's order.
    pub ins: Vec<DevData>,
    /// Outputs, in the case's order.
    pub outs: Vec<DevData>,
}

impl Case {
    /// Uploads the inputs and allocates the outputs on `stream`'s context.
    pub fn instantiate(&self, stream: &Stream) -> Result<Instance> {
        let ins = self
            .inputs
            .iter()
            .map(|d| d.upload(stream))
            .collect::<Result<Vec<_>>>()?;
        let outs = self
            .outputs
            .iter()
            .map(|o| o.initial.upload(stream))
            .collect::<Result<Vec<_>>>()?;
        Ok(Instance { ins, outs })
    }

    /// Runs `imp` once on `inst` from freshly initialised outputs and
    /// checks every output against its reference; returns the outputs and
    /// the largest scaled error.
    pub fn run_checked(
        &self,
        imp: Impl<'_>,
        stream: &Stream,
        inst: &mut Instance,
    ) -> Result<(Vec<HostData>, f64)> {
        self.reset(stream, inst)?;
        self.run(imp, stream, inst)?;
        self.check(stream, inst)
    }

    /// Initialises every output as its [`Reset`] says, before a checked run.
    pub fn reset(&self, stream: &Stream, inst: &mut Instance) -> Result<()> {
        for (o, buf) in self.outputs.iter().zip(inst.outs.iter_mut()) {
            match o.reset {
                Reset::Poison => buf.poison(stream)?,
                Reset::Zero => buf.zero(stream)?,
                Reset::Initial => buf.set(stream, &o.initial)?,
            }
        }
        Ok(())
    }

    /// Downloads every output after one run from [`Case::reset`] outputs
    /// and checks it against its reference; returns the outputs and the
    /// largest scaled error.
    pub fn check(&self, stream: &Stream, inst: &Instance) -> Result<(Vec<HostData>, f64)> {
        let mut worst = 0.0f64;
        let mut got = Vec::with_capacity(inst.outs.len());
        for (i, (o, buf)) in self.outputs.iter().zip(&inst.outs).enumerate() {
            let data = buf.download(stream)?;
            if let Some(e) = &o.expect {
                worst = worst.max(e.check(self.name, i, &data)?);
            }
            got.push(data);
        }
        Ok((got, worst))
    }

    /// Runs `imp` once without resetting or checking (for timing).
    pub fn run(&self, imp: Impl<'_>, stream: &Stream, inst: &mut Instance) -> Result<()> {
        (self.launch)(imp, stream, &inst.ins, &mut inst.outs)
    }

    /// The scale Vigil's and the twin's outputs are compared at: the
    /// first checked output's.
    pub fn compare_scale(&self) -> f64 {
        self.outputs
            .iter()
            .find_map(|o| o.expect.as_ref().map(|e| e.scale))
            .unwrap_or(1.0)
    }
}
