//! Vector math primitives emitted as IR into the operator's module, operation for operation
//! as the runtime's scalar versions, so fused and unfused results are bit-identical.
//!
//! A call to a scalar library function per lane costs a call, spills of every live vector
//! register around it, and the loss of the loop's vectorization; the IR versions run on all
//! lanes at once and inline into the loop (an Outer operator's `log(U %*% t(V) + eps)`, a Cell
//! loop's `log(X)`).

use super::expr::{ierr, Fx};
use super::CodegenError;
use inkwell::values::VectorValue;
use inkwell::FloatPredicate;
use lafuse_runtime::ops::ln_consts as c;

/// Lane-wise natural logarithm: [`lafuse_runtime::ops::ln`] on every lane, with the same
/// operations in the same order (see there for the method and its error bound).
pub(crate) fn ln<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    let w = x.get_type().get_size();
    let b = &fx.b;
    let it = fx.ctx.i64_type().vec_type(w);
    let ic = |v: i64| {
        let s = fx.ctx.i64_type().const_int(v as u64, true);
        inkwell::types::VectorType::const_vector(&vec![s; w as usize])
    };
    let fc = |v: f64| fx.splat_const(v, w);

    // Subnormals are scaled into the normal range first (2^54 x, exponent - 54). Lanes that
    // are not positive and finite compute garbage here and are replaced at the end.
    let sub = fx.fcmp(FloatPredicate::OLT, x, fc(f64::MIN_POSITIVE))?;
    let xs = fx.select(sub, fx.fmul(x, fc(c::TWO_54))?, x)?;
    let k0 = b
        .build_select(sub, ic(-54), ic(0), "k0")
        .map_err(ierr)?
        .into_vector_value();
    let bits = b
        .build_bit_cast(xs, it, "bits")
        .map_err(ierr)?
        .into_vector_value();

    // Reduce to r in [sqrt(2)/2, sqrt(2)) with x = 2^k r.
    let hx = b
        .build_right_shift(bits, ic(32), false, "hi")
        .map_err(ierr)?;
    let hx = b.build_int_add(hx, ic(c::HIGH_SHIFT), "hx").map_err(ierr)?;
    let e = b.build_right_shift(hx, ic(20), false, "e").map_err(ierr)?;
    let k = b.build_int_sub(e, ic(0x3ff), "k").map_err(ierr)?;
    let k = b.build_int_add(k, k0, "k").map_err(ierr)?;
    let mant = b.build_and(hx, ic(0x000f_ffff), "m").map_err(ierr)?;
    let hr = b
        .build_int_add(mant, ic(c::SQRT_HALF_HIGH), "hr")
        .map_err(ierr)?;
    let hr = b.build_left_shift(hr, ic(32), "hr").map_err(ierr)?;
    let lo = b.build_and(bits, ic(0xffff_ffff), "lo").map_err(ierr)?;
    let rb = b.build_or(hr, lo, "rb").map_err(ierr)?;
    let r = b
        .build_bit_cast(rb, fx.vty(w), "r")
        .map_err(ierr)?
        .into_vector_value();

    // log(1 + f) = f - hfsq + s (hfsq + R(z)), s = f / (2 + f).
    let f = fx.fsub(r, fc(1.0))?;
    let hfsq = fx.fmul(fx.fmul(fc(0.5), f)?, f)?;
    let s = fx.fdiv(f, fx.fadd(fc(2.0), f)?)?;
    let z = fx.fmul(s, s)?;
    let ww = fx.fmul(z, z)?;
    let lg = |i: usize| fc(c::LG[i - 1]);
    // t1 = w (Lg2 + w (Lg4 + w Lg6)); t2 = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))).
    let t1 = fx.fmul(ww, fx.fadd(lg(4), fx.fmul(ww, lg(6))?)?)?;
    let t1 = fx.fmul(ww, fx.fadd(lg(2), t1)?)?;
    let t2 = fx.fmul(ww, fx.fadd(lg(5), fx.fmul(ww, lg(7))?)?)?;
    let t2 = fx.fmul(ww, fx.fadd(lg(3), t2)?)?;
    let t2 = fx.fmul(z, fx.fadd(lg(1), t2)?)?;
    let big_r = fx.fadd(t2, t1)?;
    let dk = b
        .build_signed_int_to_float(k, fx.vty(w), "dk")
        .map_err(ierr)?;
    // s (hfsq + R) + dk ln2_lo - hfsq + f + dk ln2_hi, left to right.
    let y = fx.fmul(s, fx.fadd(hfsq, big_r)?)?;
    let y = fx.fadd(y, fx.fmul(dk, fc(c::LN2_LO))?)?;
    let y = fx.fsub(y, hfsq)?;
    let y = fx.fadd(y, f)?;
    let y = fx.fadd(y, fx.fmul(dk, fc(c::LN2_HI))?)?;

    // Special lanes: log(±0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN.
    let y = fx.select(
        fx.fcmp(FloatPredicate::OEQ, x, fc(0.0))?,
        fc(f64::NEG_INFINITY),
        y,
    )?;
    let y = fx.select(fx.fcmp(FloatPredicate::OLT, x, fc(0.0))?, fc(f64::NAN), y)?;
    let y = fx.select(
        fx.fcmp(FloatPredicate::OEQ, x, fc(f64::INFINITY))?,
        fc(f64::INFINITY),
        y,
    )?;
    fx.select(fx.fcmp(FloatPredicate::UNO, x, x)?, x, y)
}
