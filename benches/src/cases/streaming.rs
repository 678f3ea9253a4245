//! Cases of the one-element-per-thread kernels: `copy`, `axpy`,
//! `stencil5`, `counter`.

use super::{Case, Class, Output, Reset, Scale, Work};
use crate::data::{BufferList, Expect, HostData};
use crate::kernels::{Impl, RawArg};
use vigil::LaunchConfig;
use vigil_bench_kernels::streaming::{STENCIL_CENTRE, STENCIL_NEIGHBOUR};
use vigil_tests::Rng;

const BLOCK: u32 = 256;

/// `y = x` over 2^26 floats.
pub fn copy(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let n = scale.pick(1 << 26, 4099);
    let x = rng.f32s(n);
    let cfg = LaunchConfig::for_num_elems(n, BLOCK);
    Case {
        name: "copy",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{n} f32"),
        work: Work::Bytes(8 * n as u64),
        outputs: vec![Output::f32s(
            n,
            Some(Expect::exact(HostData::F32(x.clone()))),
        )],
        inputs: vec![HostData::F32(x)],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => Ok(s.launch(&k.copy, cfg, (ins.f32(0)?, outs.f32_mut(0)?))?),
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `copy` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("copy", cfg, s, &[], ins, outs) }
            }
        }),
    }
}

/// `y = a * x + y` in place over 2^26 floats.
pub fn axpy(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    const A: f32 = 1.5;
    let n = scale.pick(1 << 26, 4099);
    let (x, y) = (rng.f32s(n), rng.f32s(n));
    let want = x.iter().zip(&y).map(|(x, y)| A * x + y).collect();
    let cfg = LaunchConfig::for_num_elems(n, BLOCK);
    Case {
        name: "axpy",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{n} f32"),
        work: Work::Bytes(12 * n as u64),
        inputs: vec![HostData::F32(x)],
        outputs: vec![Output {
            initial: HostData::F32(y),
            reset: Reset::Initial,
            // nvcc contracts `a * x + y` into one FMA; Rust does not.
            expect: Some(Expect::close(want, 1e-6)),
        }],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => Ok(s.launch(&k.axpy, cfg, (A, ins.f32(0)?, outs.f32_mut(0)?))?),
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `axpy` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("axpy", cfg, s, &[RawArg::F32(A)], ins, outs) }
            }
        }),
    }
}

/// A 5-point stencil over an 8192 x 8192 grid.
pub fn stencil5(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (w, h) = scale.pick((8192, 8192), (67, 45));
    let x = rng.f32s(w * h);
    let want = stencil_reference(w, h, &x);
    let cfg = LaunchConfig::new(((w as u32).div_ceil(32), (h as u32).div_ceil(8)), (32, 8));
    Case {
        name: "stencil5",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{h} x {w} f32"),
        work: Work::Bytes(8 * (w * h) as u64),
        inputs: vec![HostData::F32(x)],
        outputs: vec![Output::f32s(w * h, Some(Expect::close(want, 1e-6)))],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => {
                Ok(s.launch(&k.stencil5, cfg, (w, h, ins.f32(0)?, outs.f32_mut(0)?))?)
            }
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `stencil5` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe {
                    t.launch(
                        "stencil5",
                        cfg,
                        s,
                        &[RawArg::U64(w as u64), RawArg::U64(h as u64)],
                        ins,
                        outs,
                    )
                }
            }
        }),
    }
}

fn stencil_reference(w: usize, h: usize, x: &[f32]) -> Vec<f32> {
    (0..w * h)
        .map(|i| {
            let (r, c) = (i / w, i % w);
            if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
                x[i]
            } else {
                let around = x[i - 1] + x[i + 1] + x[i - w] + x[i + w];
                STENCIL_CENTRE * x[i] + STENCIL_NEIGHBOUR * around
            }
        })
        .collect()
}

/// 2^24 threads each add 1 to one word.
pub fn counter(scale: Scale, _sms: u32, _rng: &mut Rng) -> Case {
    let n = scale.pick(1usize << 24, 5000);
    let cfg = LaunchConfig::for_num_elems(n, BLOCK);
    let want = HostData::U32(vec![n as u32]);
    Case {
        name: "counter",
        class: Class::Atomics { contended: true },
        size: format!("{n} threads, 1 word"),
        work: Work::Atomics(n as u64),
        inputs: Vec::new(),
        outputs: vec![Output::u32s(1, Reset::Zero, Some(Expect::exact(want)))],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => Ok(s.launch(&k.counter, cfg, (n, outs.u32_mut(0)?))?),
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `counter` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("counter", cfg, s, &[RawArg::U64(n as u64)], ins, outs) }
            }
        }),
    }
}
