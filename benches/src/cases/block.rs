//! Cases of the block-cooperative and atomic kernels: `reduce_sum`,
//! `histogram256`, `histogram16`, `softmax`, `scan`.

use super::{Case, Class, Output, Reset, Scale, Work};
use crate::data::{BufferList, Expect, HostData};
use crate::kernels::{Impl, RawArg};
use vigil::LaunchConfig;
use vigil_bench_kernels::block::{SCAN_BLOCK, SOFTMAX_BLOCK};
use vigil_kernels::examples::REDUCE_BLOCK;
use vigil_tests::Rng;

/// The sum of 2^26 floats: one partial per block (two blocks per SM, grid
/// stride), then one block folds the partials.
pub fn reduce_sum(scale: Scale, sms: u32, rng: &mut Rng) -> Case {
    let n = scale.pick(1 << 26, 5003);
    let x = rng.f32s(n);
    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let magnitude: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    let blocks = (2 * sms).max(1);
    let (first, second) = (
        LaunchConfig::new(blocks, REDUCE_BLOCK),
        LaunchConfig::new(1, REDUCE_BLOCK),
    );
    Case {
        name: "reduce_sum",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{n} f32"),
        work: Work::Bytes(4 * n as u64),
        inputs: vec![HostData::F32(x)],
        outputs: vec![
            Output::f32s(blocks as usize, None),
            Output::f32s(
                1,
                Some(Expect {
                    want: HostData::F32(vec![want as f32]),
                    at: None,
                    tol: 1e-6,
                    scale: magnitude.max(f64::MIN_POSITIVE),
                }),
            ),
        ],
        launch: Box::new(move |imp, s, ins, outs| {
            let (partials, total) = outs.split_at_mut(1);
            match imp {
                Impl::Vigil(k) => {
                    s.launch(&k.reduce_sum, first, (ins.f32(0)?, partials.f32_mut(0)?))?;
                    Ok(s.launch(&k.reduce_sum, second, (partials.f32(0)?, total.f32_mut(0)?))?)
                }
                Impl::Twin(t) => {
                    // SAFETY: twins.cu declares `reduce_sum` as (x, x_len,
                    // partials, partials_len), like the Vigil kernel.
                    unsafe { t.launch("reduce_sum", first, s, &[], ins, partials) }?;
                    // SAFETY: as above, reducing the partials into the total.
                    unsafe { t.launch("reduce_sum", second, s, &[], partials, total) }
                }
            }
        }),
    }
}

/// 2^26 random words counted into 256 bins with global atomics.
pub fn histogram256(scale: Scale, sms: u32, rng: &mut Rng) -> Case {
    histogram("histogram256", 256, false, scale, sms, rng)
}

/// 2^26 random words counted into 16 bins: every bin is hot.
pub fn histogram16(scale: Scale, sms: u32, rng: &mut Rng) -> Case {
    histogram("histogram16", 16, true, scale, sms, rng)
}

fn histogram(
    name: &'static str,
    bins: usize,
    contended: bool,
    scale: Scale,
    sms: u32,
    rng: &mut Rng,
) -> Case {
    let n = scale.pick(1 << 26, 5003);
    let data = rng.u32s(n, u32::MAX);
    let mut counts = vec![0u32; bins];
    for &d in &data {
        counts[d as usize % bins] += 1;
    }
    let cfg = LaunchConfig::for_grid_stride(n, 256, 8 * sms.max(1));
    Case {
        name,
        class: Class::Atomics { contended },
        size: format!("{n} u32, {bins} bins"),
        work: Work::Bytes(4 * n as u64),
        inputs: vec![HostData::U32(data)],
        outputs: vec![Output::u32s(
            bins,
            Reset::Zero,
            Some(Expect::exact(HostData::U32(counts))),
        )],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => Ok(s.launch(&k.histogram, cfg, (ins.u32(0)?, outs.u32_mut(0)?))?),
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `histogram` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("histogram", cfg, s, &[], ins, outs) }
            }
        }),
    }
}

/// Row softmax of a 65,536 x 1,024 matrix, one block per row.
pub fn softmax(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (rows, cols) = scale.pick((65536, 1024), (5, 300));
    let x: Vec<f32> = rng.f32s(rows * cols).iter().map(|v| 4.0 * v).collect();
    let want = softmax_reference(cols, &x);
    let cfg = LaunchConfig::new(rows as u32, SOFTMAX_BLOCK);
    Case {
        name: "softmax",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{rows} x {cols} f32"),
        work: Work::Bytes(8 * (rows * cols) as u64),
        inputs: vec![HostData::F32(x)],
        outputs: vec![Output::f32s(rows * cols, Some(Expect::close(want, 1e-5)))],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => {
                Ok(s.launch(&k.softmax, cfg, (cols, ins.f32(0)?, outs.f32_mut(0)?))?)
            }
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `softmax` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("softmax", cfg, s, &[RawArg::U64(cols as u64)], ins, outs) }
            }
        }),
    }
}

fn softmax_reference(cols: usize, x: &[f32]) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| (v / sum) as f32)
        })
        .collect()
}

/// Inclusive prefix sums of 2^26 small integers within blocks of 1,024.
pub fn scan(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let n = scale.pick(1 << 26, 3000);
    let x = rng.u32s(n, 16);
    let want: Vec<u32> = x
        .chunks(SCAN_BLOCK as usize)
        .flat_map(|block| {
            block.iter().scan(0u32, |acc, &v| {
                *acc = acc.wrapping_add(v);
                Some(*acc)
            })
        })
        .collect();
    let cfg = LaunchConfig::for_num_elems(n, SCAN_BLOCK);
    Case {
        name: "scan",
        class: Class::Memory {
            sanitizer_target: true,
        },
        size: format!("{n} u32, blocks of {SCAN_BLOCK}"),
        work: Work::Bytes(8 * n as u64),
        inputs: vec![HostData::U32(x)],
        outputs: vec![Output::u32s(
            n,
            Reset::Poison,
            Some(Expect::exact(HostData::U32(want))),
        )],
        launch: Box::new(move |imp, s, ins, outs| match imp {
            Impl::Vigil(k) => Ok(s.launch(&k.scan, cfg, (ins.u32(0)?, outs.u32_mut(0)?))?),
            Impl::Twin(t) => {
                // SAFETY: twins.cu declares `scan` with these scalars, then
                // the case's buffers (pointer, length), like the Vigil kernel.
                unsafe { t.launch("scan", cfg, s, &[], ins, outs) }
            }
        }),
    }
}
