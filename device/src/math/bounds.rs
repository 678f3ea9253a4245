//! The documented error of each GPU math function, as data the tests check.

/// How far a result may be from the correctly rounded one, in units in
/// the last place (`f32`), the measure of CUDA's accuracy tables and of the
/// PTX ISA ("2 ulp from correctly rounded result").
///
/// ```
/// use vigil_device::math::bounds;
/// let exact = core::f64::consts::E;
/// assert!(bounds::EXP.admits(2.718_282_f32, exact));
/// assert!(!bounds::EXP.admits(2.72_f32, exact));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorBound {
    /// Allowed distance from the correctly rounded result, in units in the
    /// last place (`f32`); 0 for correctly rounded or exact functions.
    pub ulp: f64,
}

impl ErrorBound {
    /// A bound of `ulp` units in the last place.
    pub const fn ulp(ulp: f64) -> Self {
        ErrorBound { ulp }
    }

    /// Whether `got` can be within the bound, given `exact`, an `f64`
    /// reference: `|got - exact| <= (ulp + 1/2)` ulps (the correctly rounded
    /// result is itself within half an ulp of the exact value), plus the
    /// reference's own rounding (2^-52 of it). NaN must meet NaN, an
    /// infinite or overflowing exact value needs the same infinity, and a
    /// result below the smallest normal is measured in the subnormal ulp
    /// (2^-149).
    pub fn admits(&self, got: f32, exact: f64) -> bool {
        if exact.is_nan() || got.is_nan() {
            return exact.is_nan() && got.is_nan();
        }
        let rounded = exact as f32;
        if rounded.is_infinite() {
            return got == rounded;
        }
        let diff = got as f64 - exact;
        let diff = if diff < 0.0 { -diff } else { diff };
        let magnitude = if exact < 0.0 { -exact } else { exact };
        diff <= (self.ulp + 0.5) * ulp_of(rounded) + magnitude * f64::EPSILON
    }

    /// The distance of `got` from the exact value `exact`, in ulps of `exact`
    /// rounded to `f32` (for reports: up to `ulp + 0.5` passes; infinite
    /// where [`admits`](Self::admits) needs equality).
    pub fn ulps(got: f32, exact: f64) -> f64 {
        let rounded = exact as f32;
        if got == rounded || (got.is_nan() && exact.is_nan()) {
            return 0.0;
        }
        if rounded.is_infinite() || got.is_nan() || exact.is_nan() {
            return f64::INFINITY;
        }
        let diff = got as f64 - exact;
        (if diff < 0.0 { -diff } else { diff }) / ulp_of(rounded)
    }
}

/// The spacing of `f32` values at `v`: `2^(exponent(v) - 23)`, at least 2^-149.
fn ulp_of(v: f32) -> f64 {
    let exponent = ((v.to_bits() >> 23) & 0xff) as i32;
    let e = if exponent == 0 {
        -149
    } else {
        exponent - 127 - 23
    };
    // 2^e for e in [-149, 104]: exact as an f64 built from its exponent bits.
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// [`sqrt`](super::sqrt): `sqrt.rn`, correctly rounded.
pub const SQRT: ErrorBound = ErrorBound::ulp(0.0);
/// [`rsqrt`](super::rsqrt) on `f32`: `rsqrt.approx.f32` (PTX ISA: relative
/// error 2^-22.9, at most 2.14 ulp from the exact value).
pub const RSQRT: ErrorBound = ErrorBound::ulp(2.0);
/// [`exp2`](super::exp2): `ex2.approx.f32` (PTX ISA: 2 ulp from the
/// correctly rounded result over its full range).
pub const EXP2: ErrorBound = ErrorBound::ulp(2.0);
/// [`exp`](super::exp).
pub const EXP: ErrorBound = ErrorBound::ulp(3.0);
/// [`ln`](super::ln).
pub const LN: ErrorBound = ErrorBound::ulp(1.0);
/// [`log2`](super::log2).
pub const LOG2: ErrorBound = ErrorBound::ulp(1.0);
/// [`sin`](super::sin) and [`cos`](super::cos), for `|x| <= 8192`.
pub const SIN_COS: ErrorBound = ErrorBound::ulp(2.0);
/// The largest `|x|` for which [`SIN_COS`] holds.
pub const SIN_COS_MAX_ARG: f32 = 8192.0;
/// [`tanh`](super::tanh).
pub const TANH: ErrorBound = ErrorBound::ulp(3.0);
/// [`fma`](super::fma): `fma.rn`, one rounding.
pub const FMA: ErrorBound = ErrorBound::ulp(0.0);
/// `min`, `max`, `abs`, `floor`, `ceil`: exact.
pub const EXACT: ErrorBound = ErrorBound::ulp(0.0);

/// [`pow`](super::pow).
pub const POW: ErrorBound = ErrorBound::ulp(3.0);

/// The arguments where [`SIN_COS`] is hardest to meet: for every multiple
/// `k pi/2` up to [`SIN_COS_MAX_ARG`] (a zero of sin or of cos), the `f32`
/// nearest to it and its two neighbours on each side, of both signs. There
/// the result is tiny and all of it comes from the range reduction's
/// cancellation, so tests run these besides random inputs.
///
/// ```
/// use vigil_device::math::bounds;
/// let xs: Vec<f32> = bounds::sin_cos_near_zeros().collect();
/// assert!(xs.contains(&core::f32::consts::PI));
/// assert!(xs.iter().all(|x| x.abs() <= bounds::SIN_COS_MAX_ARG));
/// ```
pub fn sin_cos_near_zeros() -> impl Iterator<Item = f32> {
    let last = (SIN_COS_MAX_ARG as f64 / core::f64::consts::FRAC_PI_2) as u32;
    (1..=last).flat_map(|k| {
        let nearest = (k as f64 * core::f64::consts::FRAC_PI_2) as f32;
        (-2i32..=2)
            .map(move |d| f32::from_bits(nearest.to_bits().wrapping_add_signed(d)))
            .filter(|x| *x <= SIN_COS_MAX_ARG)
            .flat_map(|x| [x, -x])
    })
}
