//! The GPU's transcendental functions as short sequences over a few
//! primitive instructions ([`Primitives`]).
//!
//! They are written once, generic over the primitives, so the host can test
//! the range reductions and polynomials (with `std` standing in for the
//! instructions) while the GPU build runs them over inline PTX. Only `+`,
//! `-`, `*`, `/` (IEEE, rounded to nearest on both) and the primitives are
//! used, so a host test of a sequence sees the GPU's arithmetic.

/// The instructions the sequences are built on.
pub(super) trait Primitives {
    /// `a * b + c` with one rounding.
    fn fma(a: f32, b: f32, c: f32) -> f32;
    /// `x` rounded to the nearest integer, ties to even.
    fn rint(x: f32) -> f32;
    /// `2^r` for `|r| <= 0.5` (the hardware approximation on the GPU).
    fn ex2_reduced(r: f32) -> f32;
}

/// log2(e) rounded to `f32`, and the rest of it.
const LOG2_E_HI: f32 = core::f64::consts::LOG2_E as f32;
const LOG2_E_LO: f32 = (core::f64::consts::LOG2_E - LOG2_E_HI as f64) as f32;

/// `2^n` for an integer `n` in [-126, 127] from its exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `v * 2^n` for integer `n` in [-252, 254], rounding once: two exact
/// power-of-two factors, each within the normal range.
#[inline(always)]
fn scale(v: f32, n: f32) -> f32 {
    scale_by(v, n as i32)
}

/// [`scale`] for an `n` already an integer.
#[inline(always)]
fn scale_by(v: f32, n: i32) -> f32 {
    let half = n >> 1;
    v * pow2i(half) * pow2i(n - half)
}

/// 1.5 * 2^23: added to a value below 2^22 in magnitude, it leaves the
/// value rounded to the nearest integer in the sum's low mantissa bits.
const ROUNDING_MAGIC: f32 = 12_582_912.0;

/// `a * b` rounded once to the nearest integer, as a float and as an
/// integer (`|a * b| < 2^22`): one `fma` with [`ROUNDING_MAGIC`] does both
/// without a float-to-integer conversion (whose saturating Rust cast costs
/// six instructions). A NaN gives a NaN float and an arbitrary integer.
#[inline(always)]
fn round_product<P: Primitives>(a: f32, b: f32) -> (f32, i32) {
    let t = P::fma(a, b, ROUNDING_MAGIC);
    (
        t - ROUNDING_MAGIC,
        t.to_bits() as i32 - ROUNDING_MAGIC.to_bits() as i32,
    )
}

/// `2^x`: `x = n + r` with `r = x - n` exact, so the approximation only
/// sees `|r| <= 0.5` and the scaling is exact. A NaN flows through as a
/// NaN (`r` is one), with no branch.
#[inline(always)]
pub(super) fn exp2<P: Primitives>(x: f32) -> f32 {
    // Beyond these the result is 0 or infinity; clamping keeps `n` in
    // scale's range.
    let x = x.clamp(-200.0, 200.0);
    let (n, k) = round_product::<P>(x, 1.0);
    scale_by(P::ex2_reduced(x - n), k)
}

/// `e^x = 2^(x log2 e)`: `n`, the nearest integer to `x log2 e` (rounded
/// once), and the remainder `r = x log2 e - n` formed by `fma` with
/// log2 e in two parts, so the product's rounding (which would cost up to
/// ~50 ulp at `|x| = 88`) is not amplified. A NaN flows through.
#[inline(always)]
pub(super) fn exp<P: Primitives>(x: f32) -> f32 {
    let x = x.clamp(-120.0, 120.0);
    let (n, k) = round_product::<P>(x, LOG2_E_HI);
    let r = P::fma(x, LOG2_E_LO, P::fma(x, LOG2_E_HI, -n));
    scale_by(P::ex2_reduced(r), k)
}

// fdlibm's logf: ln(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f);
// the constants as fdlibm gives them, by their bits.
const LG1: f32 = f32::from_bits(0x3f2a_aaaa);
const LG2: f32 = f32::from_bits(0x3ecc_ce13);
const LG3: f32 = f32::from_bits(0x3e91_e9ee);
const LG4: f32 = f32::from_bits(0x3e78_9e26);

/// `x = 2^k (1 + f)` with `1 + f` in [sqrt(2)/2, sqrt(2)], or the result
/// itself for zero, negative, infinite, NaN and 1.
#[inline(always)]
fn log_reduce(x: f32) -> Result<(f32, f32), f32> {
    let mut ix = x.to_bits();
    let mut k = 0i32;
    let mut x = x;
    if ix < 0x0080_0000 || ix >> 31 != 0 {
        if ix << 1 == 0 {
            return Err(f32::NEG_INFINITY);
        }
        if ix >> 31 != 0 {
            return Err(f32::NAN);
        }
        // Subnormal: scale into the normal range.
        k -= 25;
        x *= pow2i(25);
        ix = x.to_bits();
    } else if ix >= 0x7f80_0000 {
        return Err(x);
    } else if ix == 0x3f80_0000 {
        return Err(0.0);
    }
    ix += 0x3f80_0000 - 0x3f35_04f3;
    k += (ix >> 23) as i32 - 0x7f;
    ix = (ix & 0x007f_ffff) + 0x3f35_04f3;
    Ok((f32::from_bits(ix) - 1.0, k as f32))
}

/// `s (f^2/2 + R(s^2))`, the polynomial part shared by `ln` and `log2`.
#[inline(always)]
fn log_tail(f: f32, hfsq: f32) -> f32 {
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * LG4);
    let t2 = z * (LG1 + w * LG3);
    s * (hfsq + t2 + t1)
}

/// The natural logarithm (fdlibm's `logf`, within 1 ulp).
#[inline(always)]
pub(super) fn ln(x: f32) -> f32 {
    const LN2_HI: f32 = f32::from_bits(0x3f31_7180);
    const LN2_LO: f32 = f32::from_bits(0x3717_f7d1);
    match log_reduce(x) {
        Err(special) => special,
        Ok((f, k)) => {
            let hfsq = 0.5 * f * f;
            log_tail(f, hfsq) + k * LN2_LO - hfsq + f + k * LN2_HI
        }
    }
}

/// The base-2 logarithm (fdlibm's `log2f`: `f - f^2/2` split so that its
/// high part times the high part of 1/ln 2 is exact).
#[inline(always)]
pub(super) fn log2(x: f32) -> f32 {
    const IVLN2_HI: f32 = f32::from_bits(0x3fb8_b000);
    const IVLN2_LO: f32 = f32::from_bits(0xb938_9ad4);
    match log_reduce(x) {
        Err(special) => special,
        Ok((f, k)) => {
            let hfsq = 0.5 * f * f;
            let hi = f32::from_bits((f - hfsq).to_bits() & 0xffff_f000);
            let lo = f - hi - hfsq + log_tail(f, hfsq);
            (lo + hi) * IVLN2_LO + lo * IVLN2_HI + hi * IVLN2_HI + k
        }
    }
}

/// pi/4 with its low 24 bits cleared (29 significant bits), so that its
/// product with any octant count below 2^24 is exact in `f64`.
const PI_4_HI: f64 = f64::from_bits(core::f64::consts::FRAC_PI_4.to_bits() & !0xff_ffff);
/// The rest of pi/4 rounded to `f64` (about 2^-31): the two parts carry
/// pi/4 to about 2^-84.
const PI_4_LO: f64 = 4.960_467_898_402_702e-10;

/// `x = j pi/4 + r` for `0 <= ax < 2^24 pi/4`, `|r| <= pi/4` (about):
/// `j` as an octant in 0..8 and `r` by a two-part Cody-Waite reduction in
/// `f64`. `ax - j PI_4_HI` is exact; the product `j PI_4_LO` (below 2^-7)
/// rounds by at most 2^-60 and the constants' truncation costs
/// `j 2^-84`, so the remainder's absolute error stays below 2^-58, far
/// below the `f32` ulp (2^-52) of the smallest remainder of an `f32`
/// argument up to 8192 (4.19e-9, at `x = 252.89821`, near 161 pi/2); it
/// is then rounded once to `f32`.
///
/// Near a zero of sin or cos the remainder is tiny (about 2^-23 at
/// `|x| = 8192`, far less than the f32 ulp of `x`), so every bit of it
/// comes from cancellation: a reduction in `f32` parts, even with `fma`,
/// rounds an intermediate of size ~`j 2^-25` and loses the result's
/// relative accuracy (4.6 ulp was seen at `x = -7231.9463`).
#[inline(always)]
fn trig_reduce(ax: f32) -> (u32, f32) {
    const FOUR_OVER_PI: f64 = 4.0 * core::f64::consts::FRAC_1_PI;
    let x = ax as f64;
    let mut j = (x * FOUR_OVER_PI) as u32;
    // An odd octant rounds up, so the remainder is centred on a multiple of pi/2.
    j += j & 1;
    let y = j as f64;
    let r = (x - y * PI_4_HI) - y * PI_4_LO;
    (j & 7, r as f32)
}

/// sin(r) for `|r| <= pi/4` (Cephes' minimax coefficients).
#[inline(always)]
fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * r + r
}

/// cos(r) for `|r| <= pi/4` (Cephes' minimax coefficients).
#[inline(always)]
fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0
}

/// The sine.
#[inline(always)]
pub(super) fn sin(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (j, r) = trig_reduce(x.abs());
    // Octants 0/4: sin r, 2/6: cos r; the second half of the circle negates.
    let v = if j & 2 != 0 { cos_poly(r) } else { sin_poly(r) };
    let negate = (j >= 4) != (x < 0.0);
    if negate {
        -v
    } else {
        v
    }
}

/// The cosine.
#[inline(always)]
pub(super) fn cos(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (j, r) = trig_reduce(x.abs());
    // Octants 0: cos r, 2: -sin r, 4: -cos r, 6: sin r.
    let v = if j & 2 != 0 { sin_poly(r) } else { cos_poly(r) };
    if j == 2 || j == 4 {
        -v
    } else {
        v
    }
}

/// The hyperbolic tangent: the odd Taylor series below 0.55 (where
/// `1 - 2/(e^2x + 1)` would cancel), that form up to 9.1, and ±1 beyond.
#[inline(always)]
pub(super) fn tanh<P: Primitives>(x: f32) -> f32 {
    let a = x.abs();
    if a.is_nan() {
        return x + x;
    }
    let t = if a < 0.55 {
        // Coefficients of x^3 .. x^19: 2^(2n)(2^(2n)-1)B_2n/(2n)!.
        let z = a * a;
        let p = -443_861_162.0 / 1_856_156_927_625.0;
        let p = p * z + 6_404_582.0 / 10_854_718_875.0;
        let p = p * z - 929_569.0 / 638_512_875.0;
        let p = p * z + 21_844.0 / 6_081_075.0;
        let p = p * z - 1_382.0 / 155_925.0;
        let p = p * z + 62.0 / 2_835.0;
        let p = p * z - 17.0 / 315.0;
        let p = p * z + 2.0 / 15.0;
        let p = p * z - 1.0 / 3.0;
        P::fma(a * z, p, a)
    } else if a < 9.1 {
        1.0 - 2.0 / (exp::<P>(2.0 * a) + 1.0)
    } else {
        1.0
    };
    if x < 0.0 {
        -t
    } else {
        t
    }
}

/// `log2(x)` in `f64` arithmetic for `pow`, whose result amplifies the
/// error of the logarithm by `|y|`: the same reduction as [`log2`] (exact
/// in `f32`), then fdlibm's `log` polynomial in `f64`.
#[inline(always)]
fn log2_wide(x: f32) -> f64 {
    const LG: [f64; 7] = [
        6.666_666_666_666_735e-1,
        3.999_999_999_940_942e-1,
        2.857_142_874_366_239e-1,
        2.222_219_843_214_978_4e-1,
        1.818_357_216_161_805e-1,
        1.531_383_769_920_937_3e-1,
        1.479_819_860_511_658_6e-1,
    ];
    match log_reduce(x) {
        Err(special) => special as f64,
        Ok((f, k)) => {
            let f = f as f64;
            let s = f / (2.0 + f);
            let z = s * s;
            let r = z
                * (LG[0]
                    + z * (LG[1]
                        + z * (LG[2] + z * (LG[3] + z * (LG[4] + z * (LG[5] + z * LG[6]))))));
            let hfsq = 0.5 * f * f;
            let ln1p = f - hfsq + s * (hfsq + r);
            k as f64 + ln1p * core::f64::consts::LOG2_E
        }
    }
}

/// `2^t` for an `f64` exponent: `t = n + r` with `r` rounded to `f32` only
/// after the integer part is gone (|r| <= 0.5, so that costs < 0.4 ulp).
#[inline(always)]
fn exp2_wide<P: Primitives>(t: f64) -> f32 {
    if t.is_nan() {
        return f32::NAN;
    }
    let t = t.clamp(-250.0, 250.0);
    let n = P::rint(t as f32);
    scale(P::ex2_reduced((t - n as f64) as f32), n)
}

/// `x^y = 2^(y log2 |x|)` with `y log2 |x|` in `f64`, and C's rules:
/// `x^0 = 1^y = 1`, a finite negative `x` needs an integer `y` (odd `y`
/// keeps the sign), else NaN.
#[inline(always)]
pub(super) fn pow<P: Primitives>(x: f32, y: f32) -> f32 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if x.is_nan() || y.is_nan() {
        return x + y;
    }
    let ax = x.abs();
    let magnitude = exp2_wide::<P>(y as f64 * log2_wide(ax));
    // An `ax` of 1 with infinite `y` gives 0 * inf above; C says 1.
    let magnitude = if ax == 1.0 { 1.0 } else { magnitude };
    let y_is_integer = P::rint(y) == y;
    // Every f32 of magnitude >= 2^24 is even.
    let y_is_odd = y_is_integer && y.abs() < 16_777_216.0 && (y as i32) & 1 == 1;
    let negative = x.is_sign_negative();
    // A finite negative base has no real power of non-integer order; -0 and
    // -inf have one (C: pow(-0, 0.5) = 0, pow(-inf, 0.5) = inf).
    if negative && !y_is_integer && ax != 0.0 && ax.is_finite() {
        return f32::NAN;
    }
    if negative && y_is_odd {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    //! The sequences with `std` standing in for the instructions, against
    //! `f64` references, within the bounds the module documents (less the
    //! instruction's own error, which only a GPU can show).
    use super::super::bounds::{self, ErrorBound};
    use super::*;

    /// `std` in place of the PTX instructions; `ex2_reduced` correctly rounded.
    struct Std;
    impl Primitives for Std {
        fn fma(a: f32, b: f32, c: f32) -> f32 {
            a.mul_add(b, c)
        }
        fn rint(x: f32) -> f32 {
            x.round_ties_even()
        }
        fn ex2_reduced(r: f32) -> f32 {
            (r as f64).exp2() as f32
        }
    }

    /// Every 997th f32 bit pattern in [lo, hi] (both signs when lo < 0):
    /// about two million inputs per sign spread over each binade.
    fn inputs(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        (0..u32::MAX / 997)
            .map(|i| f32::from_bits(i * 997))
            .flat_map(|v| [v, -v])
            .filter(move |v| *v >= lo && *v <= hi)
    }

    fn check(
        name: &str,
        bound: ErrorBound,
        xs: impl Iterator<Item = f32>,
        f: impl Fn(f32) -> (f32, f64),
    ) {
        let mut worst = (0.0f64, 0.0f32);
        for x in xs {
            let (got, exact) = f(x);
            assert!(
                bound.admits(got, exact),
                "{name}({x:e}) = {got:e}, exact {exact:e}: {} ulp > {}",
                ErrorBound::ulps(got, exact),
                bound.ulp
            );
            let u = ErrorBound::ulps(got, exact);
            if u > worst.0 {
                worst = (u, x);
            }
        }
        println!("{name}: worst {:.3} ulp at {:e}", worst.0, worst.1);
    }

    #[test]
    fn exp_and_exp2_over_their_whole_range() {
        check("exp2", bounds::EXP2, inputs(-160.0, 140.0), |x| {
            (exp2::<Std>(x), (x as f64).exp2())
        });
        check("exp", bounds::EXP, inputs(-110.0, 100.0), |x| {
            (exp::<Std>(x), (x as f64).exp())
        });
    }

    #[test]
    fn logarithms_over_every_binade() {
        check("ln", bounds::LN, inputs(0.0, f32::MAX), |x| {
            (ln(x), (x as f64).ln())
        });
        check("log2", bounds::LOG2, inputs(0.0, f32::MAX), |x| {
            (log2(x), (x as f64).log2())
        });
    }

    #[test]
    fn sin_and_cos_up_to_the_documented_argument() {
        let m = bounds::SIN_COS_MAX_ARG;
        check("sin", bounds::SIN_COS, inputs(-m, m), |x| {
            (sin(x), (x as f64).sin())
        });
        check("cos", bounds::SIN_COS, inputs(-m, m), |x| {
            (cos(x), (x as f64).cos())
        });
    }

    #[test]
    fn sin_and_cos_near_their_zeros() {
        check(
            "sin near zeros",
            bounds::SIN_COS,
            bounds::sin_cos_near_zeros(),
            |x| (sin(x), (x as f64).sin()),
        );
        check(
            "cos near zeros",
            bounds::SIN_COS,
            bounds::sin_cos_near_zeros(),
            |x| (cos(x), (x as f64).cos()),
        );
    }

    #[test]
    fn tanh_on_both_sides_of_each_formula() {
        check("tanh", bounds::TANH, inputs(-20.0, 20.0), |x| {
            (tanh::<Std>(x), (x as f64).tanh())
        });
    }

    #[test]
    fn pow_over_a_grid_of_bases_and_exponents() {
        let ys = [
            -40.0f32, -7.0, -2.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0, 7.25, 31.0,
        ];
        for y in ys {
            let xs = inputs(-1e4, 1e4).step_by(61);
            let worst = xs
                .map(|x| {
                    let (got, exact) = (pow::<Std>(x, y), (x as f64).powf(y as f64));
                    assert!(
                        bounds::POW.admits(got, exact),
                        "pow({x:e}, {y}) = {got:e}, exact {exact:e}"
                    );
                    ErrorBound::ulps(got, exact)
                })
                .fold(0.0f64, f64::max);
            println!("pow(x, {y}): worst {worst:.3} ulp");
        }
    }

    #[test]
    fn special_values_follow_c() {
        assert!(exp::<Std>(f32::NAN).is_nan() && exp2::<Std>(f32::NAN).is_nan());
        assert_eq!(exp::<Std>(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp::<Std>(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp2::<Std>(-149.0), f32::from_bits(1));
        assert_eq!(exp2::<Std>(128.0), f32::INFINITY);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert!(ln(-1.0).is_nan() && log2(-0.5).is_nan() && ln(f32::NAN).is_nan());
        assert_eq!(log2(f32::INFINITY), f32::INFINITY);
        assert_eq!(log2(f32::from_bits(1)), -149.0);
        assert!(sin(f32::INFINITY).is_nan() && cos(f32::NAN).is_nan());
        assert_eq!(tanh::<Std>(f32::NEG_INFINITY), -1.0);
        assert_eq!(pow::<Std>(-2.0, 3.0), -8.0);
        assert_eq!(pow::<Std>(-2.0, 2.0), 4.0);
        assert!(pow::<Std>(-2.0, 0.5).is_nan());
        assert_eq!(pow::<Std>(f32::NAN, 0.0), 1.0);
        assert_eq!(pow::<Std>(1.0, f32::NAN), 1.0);
        assert_eq!(pow::<Std>(0.0, -1.0), f32::INFINITY);
        assert_eq!(pow::<Std>(0.0, 2.0), 0.0);
        assert_eq!(pow::<Std>(-1.0, f32::INFINITY), 1.0);
        assert_eq!(pow::<Std>(-0.0, 0.5), 0.0);
        assert_eq!(pow::<Std>(f32::NEG_INFINITY, 0.5), f32::INFINITY);
        assert_eq!(pow::<Std>(-0.0, 3.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(
            pow::<Std>(f32::NEG_INFINITY, -3.0).to_bits(),
            (-0.0f32).to_bits()
        );
    }
}
