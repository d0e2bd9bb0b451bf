//! `x ^ y` with the runtime's semantics (`lafuse_core::ops::java_pow`): Java's special cases
//! (`y == 2` is `x * x`, `y` NaN gives NaN, `y == 0` gives 1, `|x| == 1` with infinite `y`
//! gives NaN), then C99 `pow`'s (zeros, infinities and negative bases by the parity of `y`),
//! and in general `|x|^y = e^(y ln|x|)`.
//!
//! `e^(y ln|x|)` with `ln|x|` rounded to a double would lose `|y ln|x||` ulp (hundreds near
//! overflow); so `ln|x|` is computed as a double-double ([`log_dd`], relative error about
//! 2^-64), multiplied by `y` with an `fma` for the product's low part, and the tail goes into
//! the reduced argument of `exp` ([`E::exp_dd`]). The result is within about 1 ulp (the
//! error of fdlibm's `exp` plus 0.2 ulp); `y = 1`, `-1` and `1/2` are exact as in C.

use super::{E, F, R};

const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// 2/3 as a double-double.
const TWO_THIRDS_HI: f64 = 2.0 / 3.0;
const TWO_THIRDS_LO: f64 = 3.700_743_415_417_188e-17;
/// `log(1+f) = 2 atanh(s)`, `s = f/(2+f)`: the coefficients `2/(2k+1)` of `s^(2k+1)` from
/// `s^5` on (`|s| < 0.1716`: the truncated terms are below 2^-70 of the sum).
const ATANH_TAIL: [f64; 11] = [
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
    2.0 / 21.0,
    2.0 / 23.0,
    2.0 / 25.0,
];

/// `a * b` as a double-double `(p, e)`, exactly.
fn two_prod<'c>(e: &E<'_, '_, 'c>, a: F<'c>, b: F<'c>) -> R<(F<'c>, F<'c>)> {
    let p = e.mul(a, b)?;
    Ok((p, e.fma(a, b, e.neg(p)?)?))
}

/// `ln(a)` for a positive finite `a` as a double-double `(hi, lo)` (garbage otherwise, which
/// the caller replaces). `a = 2^k m` with `m` in [sqrt(2)/2, sqrt(2)), `f = m - 1` (exact),
/// `ln(m) = 2s + 2/3 s^3 + s^5 P(s^2)` with `s = f/(2+f)`: `2s` and `2/3 s^3` in double-double,
/// the rest (below 2^-12 of the sum) in double.
fn log_dd<'c>(e: &E<'_, '_, 'c>, a: F<'c>) -> R<(F<'c>, F<'c>)> {
    // Subnormals are scaled into the normal range first.
    let sub = e.lt(a, e.c(f64::MIN_POSITIVE))?;
    let xs = e.sel(sub, e.mul(a, e.c(18_014_398_509_481_984.0))?, a)?;
    let k0 = e.isel(sub, e.i(-54), e.i(0))?;
    let bits = e.bits(xs)?;
    let hx = e.iadd(e.lshr(bits, e.i(32))?, e.i(0x3ff0_0000 - 0x3fe6_a09e))?;
    let k = e.iadd(e.isub(e.lshr(hx, e.i(20))?, e.i(0x3ff))?, k0)?;
    let hm = e.iadd(e.and(hx, e.i(0x000f_ffff))?, e.i(0x3fe6_a09e))?;
    let m = e.double_of(e.or(e.shl(hm, e.i(32))?, e.and(bits, e.i(0xffff_ffff))?)?)?;
    let f = e.sub(m, e.c(1.0))?;
    // s = f / (2 + f) = sh + sl.
    let d = e.add(e.c(2.0), f)?;
    let dl = e.add(e.sub(e.c(2.0), d)?, f)?;
    let sh = e.div(f, d)?;
    let rem = e.fma(e.neg(sh)?, d, f)?;
    let sl = e.div(e.sub(rem, e.mul(sh, dl)?)?, d)?;
    // s^2, s^3 and 2/3 s^3 as double-doubles.
    let (s2h, s2e) = two_prod(e, sh, sh)?;
    let s2l = e.add(s2e, e.mul(e.mul(e.c(2.0), sh)?, sl)?)?;
    let (s3h, s3e) = two_prod(e, s2h, sh)?;
    let s3l = e.add(s3e, e.add(e.mul(s2h, sl)?, e.mul(s2l, sh)?)?)?;
    let (t3h, t3e) = two_prod(e, e.c(TWO_THIRDS_HI), s3h)?;
    let t3l = e.add(
        t3e,
        e.add(
            e.mul(e.c(TWO_THIRDS_HI), s3l)?,
            e.mul(e.c(TWO_THIRDS_LO), s3h)?,
        )?,
    )?;
    let tail = e.mul(e.mul(s3h, s2h)?, e.poly(s2h, &ATANH_TAIL)?)?;
    // 2s + 2/3 s^3 (|2s| >= |2/3 s^3|: fast two-sum), plus the small terms.
    let two_s = e.mul(e.c(2.0), sh)?;
    let ah = e.add(two_s, t3h)?;
    let al = e.add(e.sub(two_s, ah)?, t3h)?;
    let small = e.add(e.add(e.mul(e.c(2.0), sl)?, t3l)?, tail)?;
    let al = e.add(al, small)?;
    // + k ln2: k LN2_HI is exact; two-sum with the logarithm of m.
    let kf = e.sitofp(k)?;
    let kh = e.mul(kf, e.c(LN2_HI))?;
    let kl = e.mul(kf, e.c(LN2_LO))?;
    let bh = e.add(kh, ah)?;
    let bv = e.sub(bh, kh)?;
    let be = e.add(e.sub(kh, e.sub(bh, bv)?)?, e.sub(ah, bv)?)?;
    let lo = e.add(e.add(be, al)?, kl)?;
    let hi = e.add(bh, lo)?;
    let lo = e.sub(lo, e.sub(hi, bh)?)?;
    Ok((hi, lo))
}

pub(super) fn pow<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let (x, y) = (args[0], args[1]);
    let inf = e.c(f64::INFINITY);
    let nan = e.c(f64::NAN);
    let ax = e.abs(x)?;
    // |x|^y = e^(y ln|x|), the product y (lh + ll) as ph + pl.
    let (lh, ll) = log_dd(e, ax)?;
    let (ph, pe) = two_prod(e, y, lh)?;
    let pl = e.add(pe, e.mul(y, ll)?)?;
    // Far out of exp's range (or infinite) the tail does not matter (and could be NaN).
    let pl = e.sel(e.lt(e.abs(ph)?, e.c(800.0))?, pl, e.c(0.0))?;
    let mag = e.exp_dd(ph, pl)?;

    // Parity of y: an integer when floor(y) == y, odd when y/2 is not one.
    let y_int = e.eq(e.floor(y)?, y)?;
    let half = e.mul(y, e.c(0.5))?;
    let y_odd = e.and(
        y_int,
        e.fcmp(inkwell::FloatPredicate::UNE, e.floor(half)?, half)?,
    )?;
    // Negative x: the sign by parity, NaN for a non-integer y.
    let signed = e.sel(y_odd, e.neg(mag)?, mag)?;
    let r = e.sel(e.lt(x, e.c(0.0))?, e.sel(y_int, signed, nan)?, mag)?;
    // x = +-0 or +-inf: 0 or inf, negative for a negative x and an odd y.
    let y_pos = e.gt(y, e.c(0.0))?;
    let x_zero = e.eq(x, e.c(0.0))?;
    let x_inf = e.eq(ax, inf)?;
    let to_inf = e.or(e.and(x_zero, e.not(y_pos)?)?, e.and(x_inf, y_pos)?)?;
    let edge = e.sel(to_inf, inf, e.c(0.0))?;
    let edge = e.sel(e.and(e.sign_bit(x)?, y_odd)?, e.neg(edge)?, edge)?;
    let r = e.sel(e.or(x_zero, x_inf)?, edge, r)?;
    // y = +-inf: inf where |x| > 1 and y > 0 or |x| < 1 and y < 0, else 0; NaN at |x| == 1
    // (Java).
    let y_inf = e.eq(e.abs(y)?, inf)?;
    let grows = e.icmp(inkwell::IntPredicate::EQ, e.gt(ax, e.c(1.0))?, y_pos)?;
    let at_inf = e.sel(grows, inf, e.c(0.0))?;
    let at_inf = e.sel(e.eq(ax, e.c(1.0))?, nan, at_inf)?;
    let r = e.sel(y_inf, at_inf, r)?;
    // Exact cases of C's pow: x^1, x^-1 = 1/x, x^(1/2) = sqrt(x) for x > 0.
    let r = e.sel(e.eq(y, e.c(1.0))?, x, r)?;
    let r = e.sel(e.eq(y, e.c(-1.0))?, e.div(e.c(1.0), x)?, r)?;
    let sqrt_case = e.and(e.eq(y, e.c(0.5))?, e.gt(x, e.c(0.0))?)?;
    let r = e.sel(sqrt_case, e.sqrt(x)?, r)?;
    // NaN operands; Java's own cases last (they take precedence).
    let r = e.sel(e.is_nan(x)?, nan, r)?;
    let r = e.sel(e.is_nan(y)?, nan, r)?;
    let r = e.sel(e.eq(y, e.c(0.0))?, e.c(1.0), r)?;
    e.sel(e.eq(y, e.c(2.0))?, e.mul(x, x)?, r)
}
