//! Math for kernels: `sqrt`, `exp`, `sin`, ... with the same source on the
//! GPU and on the host.
//!
//! `core` (all a PTX build has) has no `f32::sqrt` or `f32::exp`, so kernels
//! call these functions instead. On the GPU each one is a PTX instruction or
//! a short sequence built on one (`sequences.rs`); on the host (the CPU
//! backend) each one is `std`'s.
//!
//! ```
//! use vigil_device::math;
//! // A numerically safe softmax term and an RMS normalisation factor.
//! let (x, max, sum_sq, n) = (1.5f32, 2.0f32, 8.0f32, 2.0f32);
//! let e = math::exp(x - max);
//! let inv_rms = math::rsqrt(sum_sq / n + 1e-6);
//! assert!((e - 0.606_530_66).abs() < 1e-6 && (inv_rms - 0.5).abs() < 1e-6);
//! ```
//!
//! # Accuracy on the GPU
//!
//! The error of each function's GPU result in ulps from the correctly
//! rounded result (the measure of CUDA's tables and of the PTX ISA), as the
//! [`ErrorBound`] in [`bounds`] that the tests check (`tests/tests/math.rs`,
//! on the GPU and on the CPU backend, against an `f64` reference), beside
//! CUDA's own (CUDA C Programming Guide, "Mathematical Functions", default
//! flags):
//!
//! | function | GPU lowering | Vigil bound | CUDA |
//! | --- | --- | --- | --- |
//! | [`sqrt`] | `sqrt.rn` | 0 ulp (correctly rounded) | `sqrtf` 0 ulp |
//! | [`rsqrt`] | `rsqrt.approx.f32`; f64: `div.rn(1, sqrt.rn)` | 2 ulp; f64 1 ulp | `rsqrtf` 2 ulp |
//! | [`exp2`] | `ex2.approx.f32` on `x - rint(x)`, exact scaling by 2^n | 2 ulp | `exp2f` 2 ulp |
//! | [`exp`] | `fma` range reduction to `2^r`, then as `exp2` | 3 ulp | `expf` 2 ulp |
//! | [`ln`], [`log2`] | polynomial in `f/(2+f)` (fdlibm's `logf`) | 1 ulp | `logf`, `log2f` 1 ulp |
//! | [`sin`], [`cos`] | two-part Cody-Waite reduction by pi/4 in `f64` (remainder to 2^-58), minimax polynomials | 2 ulp for `\|x\| <= 8192`, near the zeros too (host run of the sequence: 1.48 ulp from exact, 0.99 at the zeros); larger `\|x\|` is not reduced exactly | `sinf`, `cosf` 2 ulp (all `x`) |
//! | [`tanh`] | odd Taylor polynomial below 0.55, else `1 - 2/(exp(2x)+1)` | 3 ulp | `tanhf` 2 ulp |
//! | [`pow`] | `2^(y log2 x)` with `log2` and the product in `f64`, then as `exp2` | 3 ulp | `powf` 4 ulp |
//! | [`fma`] | `fma.rn` | 0 ulp | `fmaf` 0 ulp |
//! | [`min`], [`max`], [`abs`], [`floor`], [`ceil`] | `min`, `max`, `abs`, `cvt.rmi`, `cvt.rpi` | exact | exact |
//!
//! A bound of N ulp is from the correctly rounded result, so a result
//! passes when it is within N + 1/2 ulp of the exact value; the tests print
//! distances from the exact value. `exp2`'s worst on an H100, 2.055 from
//! the exact value, is 2 ulp from the correctly rounded result (which lies
//! 0.055 ulp from the exact value on the same side): within its bound.
//!
//! `pow` carries `log2(x)` and `y * log2(x)` in `f64` (as CUDA carries them
//! in double-`f32`), which is slow on GPUs with few FP64 units; `sin` and
//! `cos` reduce their argument in `f64` for the same reason (near a zero
//! of either, the whole result comes from the reduction's cancellation).
//! NaN and infinity follow C's rules. Subnormal inputs
//! and results are kept (no flush to zero). On the host every function is
//! `std`'s (the platform's libm, within about 1 ulp; `rsqrt` is
//! `1 / sqrt`), so host and GPU results of the same kernel can differ by
//! the GPU bound plus the host's own error; the tests hold both to the
//! GPU bound.
//!
//! `sqrt`, `rsqrt`, `fma`, `min`, `max`, `abs`, `floor` and `ceil` take `f32`
//! or `f64` ([`Real`]); the transcendental functions take `f32`.

pub mod bounds;
#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(target_arch = "nvptx64")]
mod ptx;
// The GPU's sequences; the host build compiles them only to test them.
#[cfg(any(target_arch = "nvptx64", test))]
mod sequences;

#[cfg(not(target_arch = "nvptx64"))]
use host as imp;
#[cfg(target_arch = "nvptx64")]
use ptx as imp;

pub use bounds::ErrorBound;

/// A floating-point type the instruction-level functions accept (`f32`, `f64`).
pub trait Real: Copy + sealed::Sealed {
    /// The square root, correctly rounded.
    fn sqrt(self) -> Self;
    /// `1 / sqrt(self)`.
    fn rsqrt(self) -> Self;
    /// `self * a + b` with one rounding.
    fn fma(self, a: Self, b: Self) -> Self;
    /// The smaller of two values; a NaN operand yields the other.
    fn min(self, other: Self) -> Self;
    /// The larger of two values; a NaN operand yields the other.
    fn max(self, other: Self) -> Self;
    /// The absolute value.
    fn abs(self) -> Self;
    /// The largest integer not above `self`.
    fn floor(self) -> Self;
    /// The smallest integer not below `self`.
    fn ceil(self) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The square root of `x`, correctly rounded (NaN for `x < 0`).
#[inline(always)]
pub fn sqrt<T: Real>(x: T) -> T {
    x.sqrt()
}

/// `1 / sqrt(x)` (see the accuracy table).
#[inline(always)]
pub fn rsqrt<T: Real>(x: T) -> T {
    x.rsqrt()
}

/// `a * b + c` with a single rounding.
#[inline(always)]
pub fn fma<T: Real>(a: T, b: T, c: T) -> T {
    a.fma(b, c)
}

/// The smaller of `a` and `b`; if one is NaN, the other.
#[inline(always)]
pub fn min<T: Real>(a: T, b: T) -> T {
    a.min(b)
}

/// The larger of `a` and `b`; if one is NaN, the other.
#[inline(always)]
pub fn max<T: Real>(a: T, b: T) -> T {
    a.max(b)
}

/// `|x|`.
#[inline(always)]
pub fn abs<T: Real>(x: T) -> T {
    x.abs()
}

/// The largest integer not above `x`.
#[inline(always)]
pub fn floor<T: Real>(x: T) -> T {
    x.floor()
}

/// The smallest integer not below `x`.
#[inline(always)]
pub fn ceil<T: Real>(x: T) -> T {
    x.ceil()
}

/// `e^x` (within [`bounds::EXP`] on the GPU).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    imp::exp(x)
}

/// `2^x` (within [`bounds::EXP2`] on the GPU).
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    imp::exp2(x)
}

/// The natural logarithm (within [`bounds::LN`] on the GPU).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    imp::ln(x)
}

/// The base-2 logarithm (within [`bounds::LOG2`] on the GPU).
#[inline(always)]
pub fn log2(x: f32) -> f32 {
    imp::log2(x)
}

/// The sine of `x` radians (within [`bounds::SIN_COS`] on the GPU for `|x| <= 8192`).
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    imp::sin(x)
}

/// The cosine of `x` radians (within [`bounds::SIN_COS`] on the GPU for `|x| <= 8192`).
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    imp::cos(x)
}

/// The hyperbolic tangent (within [`bounds::TANH`] on the GPU).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    imp::tanh(x)
}

/// `x^y` with C's rules for signs, zeros, infinities and NaN (within
/// [`bounds::POW`] on the GPU).
#[inline(always)]
pub fn pow(x: f32, y: f32) -> f32 {
    imp::pow(x, y)
}
