//! Cases of the shared-memory tile kernels: `transpose` and `sgemm`.

use super::{Case, Class, LaunchFn, Output, Scale, Work};
use crate::data::{BufferList, Expect, HostData};
use crate::kernels::{Impl, RawArg, VigilKernels};
use vigil::{DeviceBuffer, Kernel, KernelArgs, KernelFn, LaunchConfig};
use vigil_bench_kernels::tiles::{SGEMM_TILE, TILE, TRANSPOSE_ROWS};
use vigil_tests::Rng;

/// A transpose case `name` of a random `h` x `w` matrix run by `launch`,
/// with the exact reference.
pub(super) fn transpose_case(
    name: &'static str,
    (w, h): (usize, usize),
    rng: &mut Rng,
    launch: LaunchFn,
) -> Case {
    let x = rng.f32s(w * h);
    let want: Vec<f32> = (0..w * h).map(|i| x[(i % h) * w + i / h]).collect();
    Case {
        name,
        class: Class::Memory {
            sanitizer_target: false,
        },
        size: format!("{h} x {w} f32"),
        work: Work::Bytes(8 * (w * h) as u64),
        inputs: vec![HostData::F32(x)],
        outputs: vec![Output::f32s(
            w * h,
            Some(Expect::exact(HostData::F32(want))),
        )],
        launch,
    }
}

/// Transpose of an 8192 x 8192 matrix.
pub fn transpose(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (w, h) = scale.pick((8192, 8192), (70, 33));
    let cfg = LaunchConfig::new(
        ((w as u32).div_ceil(TILE), (h as u32).div_ceil(TILE)),
        (TILE, TRANSPOSE_ROWS),
    );
    let launch: LaunchFn = Box::new(move |imp, s, ins, outs| match imp {
        Impl::Vigil(k) => Ok(s.launch(&k.transpose, cfg, (w, h, ins.f32(0)?, outs.f32_mut(0)?))?),
        Impl::Twin(t) => {
            // SAFETY: twins.cu declares `transpose` with these scalars, then
            // the case's buffers (pointer, length), like the Vigil kernel.
            unsafe {
                t.launch(
                    "transpose",
                    cfg,
                    s,
                    &[RawArg::U64(w as u64), RawArg::U64(h as u64)],
                    ins,
                    outs,
                )
            }
        }
    });
    transpose_case("transpose", (w, h), rng, launch)
}

/// Random `a` (`m` x `k`) and `b` (`k` x `n`) and the output `c` of
/// `c = a * b` with its host reference (at full scale 512 random elements
/// of `c`): the inputs and output of every SGEMM case.
fn sgemm_problem(
    scale: Scale,
    (m, n, k): (usize, usize, usize),
    rng: &mut Rng,
) -> (Vec<HostData>, Output) {
    let (a, b) = (rng.f32s(m * k), rng.f32s(k * n));
    let at: Option<Vec<usize>> = match scale {
        Scale::Full => Some(
            (0..512)
                .map(|_| (rng.next_u64() % (m * n) as u64) as usize)
                .collect(),
        ),
        Scale::Smoke => None,
    };
    let element = |i: usize| -> f32 {
        let (r, c) = (i / n, i % n);
        (0..k)
            .map(|j| f64::from(a[r * k + j]) * f64::from(b[j * n + c]))
            .sum::<f64>() as f32
    };
    let want = match &at {
        Some(at) => at.iter().map(|&i| element(i)).collect(),
        None => (0..m * n).map(element).collect(),
    };
    let mut c = Output::f32s(m * n, None);
    c.expect = Some(Expect {
        want: HostData::F32(want),
        at,
        tol: 1e-5,
        // A sum of `k` products of uniform [-1, 1) values is about sqrt(k).
        scale: (k as f64).sqrt(),
    });
    (vec![HostData::F32(a), HostData::F32(b)], c)
}

/// An SGEMM case `name` of `m` x `n` x `k` run by `launch`, on the
/// inputs and reference of [`sgemm_problem`].
pub(super) fn sgemm_case(
    name: &'static str,
    scale: Scale,
    (m, n, k): (usize, usize, usize),
    rng: &mut Rng,
    launch: LaunchFn,
) -> Case {
    let (inputs, c) = sgemm_problem(scale, (m, n, k), rng);
    Case {
        name,
        class: Class::Compute,
        size: format!("{m} x {n} x {k} f32"),
        work: Work::Flops(2 * (m * n * k) as u64),
        inputs,
        outputs: vec![c],
        launch,
    }
}

/// The arguments of every SGEMM kernel: `(m, n, k, a, b, c)`, whatever
/// views of the buffers its parameters are.
pub(super) type SgemmArgs<'a> = (
    usize,
    usize,
    usize,
    &'a DeviceBuffer<f32>,
    &'a DeviceBuffer<f32>,
    &'a mut DeviceBuffer<f32>,
);

/// The launch of an SGEMM kernel that takes `(m, n, k, a, b, c)`: Vigil's
/// (`kernel` picks it) or the twin called `twin`.
pub(super) fn sgemm_launch<K>(
    kernel: fn(&VigilKernels) -> &KernelFn<K>,
    twin: &'static str,
    (m, n, k): (usize, usize, usize),
    cfg: LaunchConfig,
) -> LaunchFn
where
    K: Kernel,
    for<'a> SgemmArgs<'a>: KernelArgs<K::Params>,
{
    Box::new(move |imp, s, ins, outs| match imp {
        Impl::Vigil(kf) => Ok(s.launch(
            kernel(kf),
            cfg,
            (m, n, k, ins.f32(0)?, ins.f32(1)?, outs.f32_mut(0)?),
        )?),
        Impl::Twin(t) => {
            let sizes = [m, n, k].map(|v| RawArg::U64(v as u64));
            // SAFETY: twins.cu declares the twin with these scalars, then
            // the case's buffers (pointer, length), like the Vigil kernel.
            unsafe { t.launch(twin, cfg, s, &sizes, ins, outs) }
        }
    })
}

/// `c = a * b` for 2048 x 2048 matrices (at full scale the host reference
/// covers 512 random elements of `c`).
pub fn sgemm(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (m, n, k) = scale.pick((2048, 2048, 2048), (40, 72, 50));
    let cfg = LaunchConfig::new(
        (
            (n as u32).div_ceil(SGEMM_TILE),
            (m as u32).div_ceil(SGEMM_TILE),
        ),
        (SGEMM_TILE, SGEMM_TILE),
    );
    let launch = sgemm_launch(|k| &k.sgemm, "sgemm", (m, n, k), cfg);
    sgemm_case("sgemm", scale, (m, n, k), rng, launch)
}
