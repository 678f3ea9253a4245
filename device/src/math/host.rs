//! The host build of the math functions: `std`'s.

use super::Real;

macro_rules! real_with_std {
    ($($t:ty),*) => {$(
        impl Real for $t {
            #[inline(always)]
            fn sqrt(self) -> Self { <$t>::sqrt(self) }
            #[inline(always)]
            fn rsqrt(self) -> Self { 1.0 / <$t>::sqrt(self) }
            #[inline(always)]
            fn fma(self, a: Self, b: Self) -> Self { <$t>::mul_add(self, a, b) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { <$t>::min(self, other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { <$t>::max(self, other) }
            #[inline(always)]
            fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)]
            fn floor(self) -> Self { <$t>::floor(self) }
            #[inline(always)]
            fn ceil(self) -> Self { <$t>::ceil(self) }
        }
    )*};
}
real_with_std!(f32, f64);

#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    x.exp()
}
#[inline(always)]
pub(super) fn exp2(x: f32) -> f32 {
    x.exp2()
}
#[inline(always)]
pub(super) fn ln(x: f32) -> f32 {
    x.ln()
}
#[inline(always)]
pub(super) fn log2(x: f32) -> f32 {
    x.log2()
}
#[inline(always)]
pub(super) fn sin(x: f32) -> f32 {
    x.sin()
}
#[inline(always)]
pub(super) fn cos(x: f32) -> f32 {
    x.cos()
}
#[inline(always)]
pub(super) fn tanh(x: f32) -> f32 {
    x.tanh()
}
#[inline(always)]
pub(super) fn pow(x: f32, y: f32) -> f32 {
    x.powf(y)
}
