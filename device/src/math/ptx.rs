//! The GPU build of the math functions: PTX instructions (inline PTX) and
//! the sequences built on them.

use super::sequences::{self, Primitives};
use super::Real;
use core::arch::asm;

/// One PTX instruction `insn dst, src..;` on registers of class `reg`.
macro_rules! ptx_op {
    ($($insn:literal)+ => $reg:ident, $t:ty; $($arg:ident),+) => {{
        let r: $t;
        // SAFETY: a pure arithmetic instruction on registers; no memory, no side effects.
        unsafe {
            asm!(
                concat!($($insn,)+ " {ptx_result}", $(", {", stringify!($arg), "}"),+, ";"),
                ptx_result = out($reg) r,
                $($arg = in($reg) $arg,)+
                options(pure, nomem, nostack),
            )
        };
        r
    }};
}

macro_rules! real_with_ptx {
    ($($t:ty, $reg:ident, $suffix:literal);*) => {$(
        impl Real for $t {
            #[inline(always)]
            fn sqrt(self) -> Self { let x = self; ptx_op!("sqrt.rn" $suffix => $reg, $t; x) }
            #[inline(always)]
            fn rsqrt(self) -> Self { Rsqrt::rsqrt(self) }
            #[inline(always)]
            fn fma(self, a: Self, b: Self) -> Self { let x = self; ptx_op!("fma.rn" $suffix => $reg, $t; x, a, b) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { let x = self; ptx_op!("min" $suffix => $reg, $t; x, other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { let x = self; ptx_op!("max" $suffix => $reg, $t; x, other) }
            #[inline(always)]
            fn abs(self) -> Self { let x = self; ptx_op!("abs" $suffix => $reg, $t; x) }
            #[inline(always)]
            fn floor(self) -> Self { let x = self; ptx_op!("cvt.rmi" $suffix $suffix => $reg, $t; x) }
            #[inline(always)]
            fn ceil(self) -> Self { let x = self; ptx_op!("cvt.rpi" $suffix $suffix => $reg, $t; x) }
        }
    )*};
}
real_with_ptx!(f32, reg32, ".f32"; f64, reg64, ".f64");

/// `rsqrt` per type: the hardware approximation for `f32`; `f64` has none
/// worth its error, so `1 / sqrt` with both steps correctly rounded.
trait Rsqrt {
    fn rsqrt(self) -> Self;
}
impl Rsqrt for f32 {
    #[inline(always)]
    fn rsqrt(self) -> f32 {
        let x = self;
        ptx_op!("rsqrt.approx.f32" => reg32, f32; x)
    }
}
impl Rsqrt for f64 {
    #[inline(always)]
    fn rsqrt(self) -> f64 {
        1.0 / Real::sqrt(self)
    }
}

/// The instructions the sequences use.
struct Ptx;
impl Primitives for Ptx {
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        Real::fma(a, b, c)
    }
    #[inline(always)]
    fn rint(x: f32) -> f32 {
        ptx_op!("cvt.rni.f32.f32" => reg32, f32; x)
    }
    #[inline(always)]
    fn ex2_reduced(r: f32) -> f32 {
        // `.ftz`: with |r| <= 0.5 neither `r` nor `2^r` is subnormal, so
        // flushing changes nothing, and ptxas drops the subnormal scaling
        // (three instructions) the plain form needs.
        ptx_op!("ex2.approx.ftz.f32" => reg32, f32; r)
    }
}

#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    sequences::exp::<Ptx>(x)
}
#[inline(always)]
pub(super) fn exp2(x: f32) -> f32 {
    sequences::exp2::<Ptx>(x)
}
#[inline(always)]
pub(super) fn ln(x: f32) -> f32 {
    sequences::ln(x)
}
#[inline(always)]
pub(super) fn log2(x: f32) -> f32 {
    sequences::log2(x)
}
#[inline(always)]
pub(super) fn sin(x: f32) -> f32 {
    sequences::sin(x)
}
#[inline(always)]
pub(super) fn cos(x: f32) -> f32 {
    sequences::cos(x)
}
#[inline(always)]
pub(super) fn tanh(x: f32) -> f32 {
    sequences::tanh::<Ptx>(x)
}
#[inline(always)]
pub(super) fn pow(x: f32, y: f32) -> f32 {
    sequences::pow::<Ptx>(x, y)
}
