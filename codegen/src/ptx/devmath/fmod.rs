//! `x % y` (C's `fmod`, the runtime's `%%`): exact in IEEE arithmetic, so computed exactly, by
//! musl's method: long division of the two 53-bit significands, one bit of the exponent
//! difference per step, in integers. The loop runs `exponent(x) - exponent(y)` times: a few
//! for ordinary operands, at most about 2100 for the extreme ones.

use super::{E, F, R};
use crate::native::expr::ierr;
use inkwell::IntPredicate;

const SIGN: i64 = i64::MIN;
const HIDDEN: i64 = 1 << 52;
const MANTISSA: i64 = HIDDEN - 1;

/// The significand of `|x|` (`ax`, its bits) as an integer with bit 52 set and its exponent
/// `e` so that `|x| = m 2^(e - 1075)`; subnormals are normalized first.
fn normalize<'c>(
    e: &E<'_, '_, 'c>,
    ax: inkwell::values::IntValue<'c>,
) -> R<(inkwell::values::IntValue<'c>, inkwell::values::IntValue<'c>)> {
    let ex = e.lshr(ax, e.i(52))?;
    let sub = e.icmp(IntPredicate::EQ, ex, e.i(0))?;
    // A subnormal's significand shifted up until bit 52 is set (0 stays 0); no shift for a
    // normal one (whose count would be negative).
    let sh = e.isel(sub, e.isub(e.ctlz(ax)?, e.i(11))?, e.i(0))?;
    let m_sub = e.shl(ax, sh)?;
    let e_sub = e.isub(e.i(1), sh)?;
    let m_norm = e.or(e.and(ax, e.i(MANTISSA))?, e.i(HIDDEN))?;
    Ok((e.isel(sub, m_sub, m_norm)?, e.isel(sub, e_sub, ex)?))
}

pub(super) fn fmod<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let (x, y) = (args[0], args[1]);
    let ctx = e.fx.ctx;
    let i64t = ctx.i64_type();
    let ux = e.bits(x)?;
    let uy = e.bits(y)?;
    let sx = e.and(ux, e.i(SIGN))?;
    let ax = e.and(ux, e.i(i64::MAX))?;
    let ay = e.and(uy, e.i(i64::MAX))?;
    let inf = e.i(f64::INFINITY.to_bits() as i64);
    // NaN for y = 0, y NaN, x infinite or NaN.
    let nan = e.or(
        e.or(
            e.icmp(IntPredicate::EQ, ay, e.i(0))?,
            e.icmp(IntPredicate::SGT, ay, inf)?,
        )?,
        e.icmp(IntPredicate::SGE, ax, inf)?,
    )?;
    let smaller = e.icmp(IntPredicate::SLT, ax, ay)?;
    let equal = e.icmp(IntPredicate::EQ, ax, ay)?;
    let special = e.or(e.or(nan, smaller)?, equal)?;
    let (mx, ex) = normalize(e, ax)?;
    let (my, ey) = normalize(e, ay)?;
    // Special lanes skip the loop.
    let ex = e.isel(special, ey, ex)?;

    // for (; ex > ey; ex--) { if (mx >= my) mx -= my; mx <<= 1; }
    let entry = e
        .b()
        .get_insert_block()
        .ok_or_else(|| ierr("fmod: no block"))?;
    let head = ctx.append_basic_block(e.fx.func, "fmod_head");
    let body = ctx.append_basic_block(e.fx.func, "fmod_body");
    let done = ctx.append_basic_block(e.fx.func, "fmod_done");
    e.b().build_unconditional_branch(head).map_err(ierr)?;
    e.b().position_at_end(head);
    let m_phi = e.b().build_phi(i64t, "m").map_err(ierr)?;
    let e_phi = e.b().build_phi(i64t, "e").map_err(ierr)?;
    let m = m_phi.as_basic_value().into_int_value();
    let k = e_phi.as_basic_value().into_int_value();
    let more = e.icmp(IntPredicate::SGT, k, ey)?;
    e.b()
        .build_conditional_branch(more, body, done)
        .map_err(ierr)?;
    e.b().position_at_end(body);
    let d = e.isub(m, my)?;
    let m1 = e.isel(e.icmp(IntPredicate::SGE, d, e.i(0))?, d, m)?;
    let m_next = e.shl(m1, e.i(1))?;
    let k_next = e.isub(k, e.i(1))?;
    e.b().build_unconditional_branch(head).map_err(ierr)?;
    m_phi.add_incoming(&[(&mx, entry), (&m_next, body)]);
    e_phi.add_incoming(&[(&ex, entry), (&k_next, body)]);

    e.b().position_at_end(done);
    let d = e.isub(m, my)?;
    let m2 = e.isel(e.icmp(IntPredicate::SGE, d, e.i(0))?, d, m)?;
    let zero = e.icmp(IntPredicate::EQ, m2, e.i(0))?;
    // Renormalize (bit 52 set again), then rebuild the double: a normal one, or a subnormal
    // one shifted right (exactly: the remainder is a multiple of the smaller operand's ulp).
    let sh = e.isub(e.ctlz(m2)?, e.i(11))?;
    let m3 = e.shl(m2, sh)?;
    let k3 = e.isub(k, sh)?;
    let normal = e.icmp(IntPredicate::SGT, k3, e.i(0))?;
    let rn = e.or(e.isub(m3, e.i(HIDDEN))?, e.shl(k3, e.i(52))?)?;
    let down = e.isub(e.i(1), k3)?;
    let down = e.isel(e.icmp(IntPredicate::SGT, down, e.i(63))?, e.i(63), down)?;
    let down = e.isel(normal, e.i(0), down)?;
    let rs = e.lshr(m3, down)?;
    let r = e.double_of(e.or(e.isel(normal, rn, rs)?, sx)?)?;
    let signed_zero = e.mul(e.c(0.0), x)?;
    let r = e.sel(e.or(zero, equal)?, signed_zero, r)?;
    let r = e.sel(smaller, x, r)?;
    e.sel(nan, e.c(f64::NAN), r)
}
