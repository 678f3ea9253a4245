//! `vigil_device::math` in a kernel, on the GPU and on the CPU backend
//! (each test runs on both under Vigil's harness, sanitized), on the same
//! inputs, each result against an `f64` reference within the error
//! bound the math module documents (`vigil_device::math::bounds`).
//!
//! Inputs are random bit patterns (so every binade, subnormals included, is
//! hit) and uniform values, in each function's documented domain, plus the
//! special values (zeros, infinities, NaN); sin and cos also get the `f32`
//! values nearest their zeros up to the documented argument
//! ([`bounds::sin_cos_near_zeros`]), where the range reduction is hardest.
//!
//! A bound of N ulp is from the correctly rounded result (as CUDA's and
//! the PTX ISA's are), so a result up to N + 1/2 ulp from the exact value
//! passes: the worst figures printed are distances from the exact value.

use vigil::device::math::bounds::{self, ErrorBound};
use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use vigil_kernels::math::{math_f32, math_f64, MathOp};
use vigil_tests::{Rng, KERNELS_PTX};

/// Inputs per function: enough to meet each function's worst cases on the
/// GPU; the CPU backend (coroutines per thread) gets fewer.
fn input_count(ctx: &Context) -> usize {
    if ctx.is_cpu() {
        1 << 13
    } else {
        1 << 20
    }
}

/// The domain each function's bound is documented for.
fn domain(op: MathOp) -> (f32, f32) {
    let m = bounds::SIN_COS_MAX_ARG;
    match op {
        MathOp::Sqrt | MathOp::Rsqrt | MathOp::Ln | MathOp::Log2 => (0.0, f32::MAX),
        MathOp::Exp => (-110.0, 100.0),
        MathOp::Exp2 => (-160.0, 140.0),
        MathOp::Sin | MathOp::Cos => (-m, m),
        MathOp::Tanh => (-20.0, 20.0),
        MathOp::Pow => (-1e4, 1e4),
        _ => (-1e30, 1e30),
    }
}

/// The documented bound of `op` on `f32`.
fn bound(op: MathOp) -> ErrorBound {
    match op {
        MathOp::Sqrt => bounds::SQRT,
        MathOp::Rsqrt => bounds::RSQRT,
        MathOp::Fma => bounds::FMA,
        MathOp::Exp => bounds::EXP,
        MathOp::Exp2 => bounds::EXP2,
        MathOp::Ln => bounds::LN,
        MathOp::Log2 => bounds::LOG2,
        MathOp::Sin | MathOp::Cos => bounds::SIN_COS,
        MathOp::Tanh => bounds::TANH,
        MathOp::Pow => bounds::POW,
        MathOp::Min | MathOp::Max | MathOp::Abs | MathOp::Floor | MathOp::Ceil => bounds::EXACT,
    }
}

/// The exact value (as far as `f64` goes) of `op(x, y, z)`.
fn reference(op: MathOp, x: f64, y: f64, z: f64) -> f64 {
    match op {
        MathOp::Sqrt => x.sqrt(),
        MathOp::Rsqrt => 1.0 / x.sqrt(),
        // The product of two f32 is exact in f64.
        MathOp::Fma => x * y + z,
        MathOp::Min => x.min(y),
        MathOp::Max => x.max(y),
        MathOp::Abs => x.abs(),
        MathOp::Floor => x.floor(),
        MathOp::Ceil => x.ceil(),
        MathOp::Exp => x.exp(),
        MathOp::Exp2 => x.exp2(),
        MathOp::Ln => x.ln(),
        MathOp::Log2 => x.log2(),
        MathOp::Sin => x.sin(),
        MathOp::Cos => x.cos(),
        MathOp::Tanh => x.tanh(),
        MathOp::Pow => x.powf(y),
    }
}

/// `n` values in `[lo, hi]`: half random bit patterns, half uniform, then
/// the special values.
fn values(rng: &mut Rng, n: usize, (lo, hi): (f32, f32)) -> Vec<f32> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n / 2 {
        let v = f32::from_bits(rng.next_u64() as u32);
        if v >= lo && v <= hi {
            out.push(v);
        }
    }
    while out.len() < n {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        out.push((lo as f64 + u * (hi as f64 - lo as f64)) as f32);
    }
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    out.extend(specials);
    out
}

/// Exponents for `pow`: integers (odd and even, for negative bases), halves
/// and a few others, small enough that most results are finite.
fn pow_exponents(rng: &mut Rng, n: usize) -> Vec<f32> {
    let picks = [-7.0f32, -2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0, 7.25];
    (0..n)
        .map(|_| picks[(rng.next_u64() % picks.len() as u64) as usize])
        .collect()
}

#[vigil::test]
fn f32_functions_are_within_their_documented_bounds(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let module = Module::from_ptx(ctx, KERNELS_PTX).unwrap();
    let kernel = module.kernel::<math_f32>().unwrap();
    let mut rng = Rng::new(0x6d61_7468);
    let n = input_count(ctx);
    let mut failures = Vec::new();
    for op in MathOp::ALL {
        let mut xs = values(&mut rng, n, domain(op));
        if matches!(op, MathOp::Sin | MathOp::Cos) {
            // Every zero on the GPU; on the CPU backend (slower, and `std`
            // there) every 8th, which still spans the whole argument range.
            let step = if ctx.is_cpu() { 8 } else { 1 };
            xs.extend(bounds::sin_cos_near_zeros().step_by(step));
        }
        let len = xs.len();
        let ys = match op {
            MathOp::Pow => pow_exponents(&mut rng, len),
            _ => values(&mut rng, len - 7, domain(op)),
        };
        let zs = values(&mut rng, len - 7, domain(op));
        let bufs = [&xs, &ys, &zs].map(|v| DeviceBuffer::from_slice(&stream, v).unwrap());
        let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, len).unwrap();
        let config = LaunchConfig::for_num_elems(len, 256);
        stream
            .launch(
                &kernel,
                config,
                (op as u32, &bufs[0], &bufs[1], &bufs[2], &mut out),
            )
            .unwrap();
        let got = out.to_vec(&stream).unwrap();
        let b = bound(op);
        let mut worst = 0.0f64;
        for i in 0..len {
            let exact = reference(op, xs[i] as f64, ys[i] as f64, zs[i] as f64);
            worst = worst.max(ErrorBound::ulps(got[i], exact));
            if !b.admits(got[i], exact) && failures.len() < 20 {
                failures.push(format!(
                    "{op:?}({:e}, {:e}, {:e}) = {:e}, exact {exact:e}: {} ulp, bound {}",
                    xs[i],
                    ys[i],
                    zs[i],
                    got[i],
                    ErrorBound::ulps(got[i], exact),
                    b.ulp
                ));
            }
        }
        println!(
            "{} {op:?}: worst {worst:.3} ulp from exact over {len} inputs (bound {} ulp from the correctly rounded result)",
            ctx.name(),
            b.ulp
        );
    }
    assert!(
        failures.is_empty(),
        "outside the documented bound on {}:\n{}",
        ctx.name(),
        failures.join("\n")
    );
}

#[vigil::test]
fn f64_instruction_functions_are_exact_or_correctly_rounded(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let module = Module::from_ptx(ctx, KERNELS_PTX).unwrap();
    let kernel = module.kernel::<math_f64>().unwrap();
    let mut rng = Rng::new(0x0066_3634);
    let n = input_count(ctx);
    for &op in MathOp::REAL {
        // f64 inputs: f32 bit patterns widened plus a random low half, in the f32 domain.
        let widen = |v: Vec<f32>, rng: &mut Rng| -> Vec<f64> {
            v.into_iter()
                .map(|x| {
                    let w = x as f64;
                    if w.is_finite() && w != 0.0 {
                        f64::from_bits(w.to_bits() ^ (rng.next_u64() & 0x1fff_ffff))
                    } else {
                        w
                    }
                })
                .collect()
        };
        let xs = values(&mut rng, n, domain(op));
        let xs = widen(xs, &mut rng);
        let len = xs.len();
        let ys = widen(values(&mut rng, len - 7, domain(op)), &mut rng);
        let zs = widen(values(&mut rng, len - 7, domain(op)), &mut rng);
        let bufs = [&xs, &ys, &zs].map(|v| DeviceBuffer::from_slice(&stream, v).unwrap());
        let mut out = DeviceBuffer::<f64>::alloc_zeroed(&stream, len).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::for_num_elems(len, 256),
                (op as u32, &bufs[0], &bufs[1], &bufs[2], &mut out),
            )
            .unwrap();
        let got = out.to_vec(&stream).unwrap();
        for i in 0..len {
            let (x, y, z) = (xs[i], ys[i], zs[i]);
            // The host's own f64 functions are the reference: sqrt, fma,
            // min/max, abs, floor, ceil are exact or correctly rounded in
            // both; rsqrt is `1 / sqrt` in both.
            let want = match op {
                MathOp::Sqrt => x.sqrt(),
                MathOp::Rsqrt => 1.0 / x.sqrt(),
                MathOp::Fma => x.mul_add(y, z),
                MathOp::Min => x.min(y),
                MathOp::Max => x.max(y),
                MathOp::Abs => x.abs(),
                MathOp::Floor => x.floor(),
                MathOp::Ceil => x.ceil(),
                other => unreachable!("{other:?} is not a Real operation"),
            };
            let same = want.to_bits() == got[i].to_bits()
                || (want.is_nan() && got[i].is_nan())
                || (want == 0.0 && got[i] == 0.0);
            assert!(
                same,
                "f64 {op:?}({x:e}, {y:e}, {z:e}) on {}: {:e}, want {want:e}",
                ctx.name(),
                got[i]
            );
        }
    }
}

vigil::test_main!();
