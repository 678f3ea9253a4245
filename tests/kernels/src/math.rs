//! `vigil_device::math` in a kernel, for the accuracy tests: one kernel per
//! float type applies the function numbered `op` to each element.

use vigil_device::math;
use vigil_device::prelude::*;

/// The functions [`math_f32`](fn@math_f32) and [`math_f64`](fn@math_f64) apply, by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum MathOp {
    /// `sqrt(x)`
    Sqrt,
    /// `rsqrt(x)`
    Rsqrt,
    /// `fma(x, y, z)`
    Fma,
    /// `min(x, y)`
    Min,
    /// `max(x, y)`
    Max,
    /// `abs(x)`
    Abs,
    /// `floor(x)`
    Floor,
    /// `ceil(x)`
    Ceil,
    /// `exp(x)` (f32 only)
    Exp,
    /// `exp2(x)` (f32 only)
    Exp2,
    /// `ln(x)` (f32 only)
    Ln,
    /// `log2(x)` (f32 only)
    Log2,
    /// `sin(x)` (f32 only)
    Sin,
    /// `cos(x)` (f32 only)
    Cos,
    /// `tanh(x)` (f32 only)
    Tanh,
    /// `pow(x, y)` (f32 only)
    Pow,
}

impl MathOp {
    /// Every operation, in number order.
    pub const ALL: [MathOp; 16] = [
        MathOp::Sqrt,
        MathOp::Rsqrt,
        MathOp::Fma,
        MathOp::Min,
        MathOp::Max,
        MathOp::Abs,
        MathOp::Floor,
        MathOp::Ceil,
        MathOp::Exp,
        MathOp::Exp2,
        MathOp::Ln,
        MathOp::Log2,
        MathOp::Sin,
        MathOp::Cos,
        MathOp::Tanh,
        MathOp::Pow,
    ];

    /// The operations [`math_f64`](fn@math_f64) supports (those generic
    /// over `Real`): the first eight.
    pub const REAL: &[MathOp] = Self::ALL.split_at(8).0;
}

/// The `Real` operations on any float type; `None` for the f32-only ones.
#[inline(always)]
fn apply_real<T: math::Real>(op: u32, x: T, y: T, z: T) -> Option<T> {
    Some(match op {
        0 => math::sqrt(x),
        1 => math::rsqrt(x),
        2 => math::fma(x, y, z),
        3 => math::min(x, y),
        4 => math::max(x, y),
        5 => math::abs(x),
        6 => math::floor(x),
        7 => math::ceil(x),
        _ => return None,
    })
}

/// `out[i] = op(x[i], y[i], z[i])` for the operation numbered `op` ([`MathOp`]).
#[kernel]
pub fn math_f32(
    op: u32,
    x: GlobalSlice<f32>,
    y: GlobalSlice<f32>,
    z: GlobalSlice<f32>,
    out: GlobalSliceMut<f32>,
) {
    let i = global_index_x();
    if i >= out.len() {
        return;
    }
    let (a, b, c) = (x.load(i), y.load(i), z.load(i));
    let r = match apply_real(op, a, b, c) {
        Some(r) => r,
        None => match op {
            8 => math::exp(a),
            9 => math::exp2(a),
            10 => math::ln(a),
            11 => math::log2(a),
            12 => math::sin(a),
            13 => math::cos(a),
            14 => math::tanh(a),
            15 => math::pow(a, b),
            _ => f32::NAN,
        },
    };
    out.store(i, r);
}

/// `out[i] = op(x[i], y[i], z[i])` for a [`MathOp::REAL`] operation; NaN for others.
#[kernel]
pub fn math_f64(
    op: u32,
    x: GlobalSlice<f64>,
    y: GlobalSlice<f64>,
    z: GlobalSlice<f64>,
    out: GlobalSliceMut<f64>,
) {
    let i = global_index_x();
    if i >= out.len() {
        return;
    }
    let r = apply_real(op, x.load(i), y.load(i), z.load(i)).unwrap_or(f64::NAN);
    out.store(i, r);
}
