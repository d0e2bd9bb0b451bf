//! `sin`, `cos`, `tan` by fdlibm's method: reduce `x` to `y0 + y1 = x - n pi/2` with
//! `|y0| <= pi/4` (a double-double), then evaluate fdlibm's kernels (`__kernel_sin`,
//! `__kernel_cos`, `__kernel_tan`: polynomials good to 2^-58 on [-pi/4, pi/4]) and pick by
//! `n mod 4`. The reduction must be exact enough for every finite `x`, or `sin(1e300)` would
//! be noise: below 2^20 pi/2 it is fdlibm's Cody-Waite reduction with pi/2 in three 33-bit
//! pieces (enough for any such double: no double there is closer than 2^-61 to a multiple of
//! pi/2); above, Payne-Hanek with 192 bits of 2/pi selected from a table by the exponent,
//! multiplied out in 64-bit integers (see [`payne_hanek`]). Results stay within 1 ulp of
//! `sin`/`cos` (a little more for `tan`).

use super::{E, F, I, R};
use crate::native::expr::ierr;
use inkwell::module::Linkage;
use inkwell::values::IntValue;
use inkwell::IntPredicate;

const PIO4: f64 = f64::from_bits(0x3fe9_21fb_5444_2d18);
const PIO4_LO: f64 = f64::from_bits(0x3c81_a626_3314_5c07);
const PIO2_HI: f64 = f64::from_bits(0x3ff9_21fb_5444_2d18);
const PIO2_LO: f64 = f64::from_bits(0x3c91_a626_3314_5c07);

/// `|x| <= pi/4` (high word): no reduction.
const IX_PIO4: i64 = 0x3fe9_21fb;
/// `|x| < 2^20 pi/2` (high word): Cody-Waite.
const IX_MEDIUM: i64 = 0x4139_21fb;
const IX_INF: i64 = 0x7ff0_0000;

/// The bits of 2/pi after the binary point, 64 to a word, after one word of zeros (so that
/// the 192-bit window of [`payne_hanek`] may start before the point): 1216 bits, for
/// exponents up to 1023.
const TWO_OVER_PI: [u64; 20] = [
    0,
    0xA2F9_836E_4E44_1529,
    0xFC27_57D1_F534_DDC0,
    0xDB62_9599_3C43_9041,
    0xFE51_63AB_DEBB_C561,
    0xB724_6E3A_424D_D2E0,
    0x0649_2EEA_09D1_921C,
    0xFE1D_EB1C_B129_A73E,
    0xE882_35F5_2EBB_4484,
    0xE99C_7026_B45F_7E41,
    0x3991_D639_8353_39F4,
    0x9C84_5F8B_BDF9_283B,
    0x1FF8_97FF_DE05_980F,
    0xEF2F_118B_5A0A_6D1F,
    0x6D36_7ECF_27CB_09B7,
    0x4F46_3F66_9E5F_EA2D,
    0x7527_BAC7_EBE5_F17B,
    0x3D07_39F7_8A52_92EA,
    0x6BFB_5FB1_1F8D_5D08,
    0x5603_3046_FC7B_6BAB,
];

/// fdlibm's `__rem_pio2` for `|x| < 2^20 pi/2` (`medium`): `n = rint(x 2/pi)`, then `x - n
/// pi/2` with pi/2 in up to three pieces, a further piece only where cancellation took the
/// bits of the previous one (all three computed, the right one selected).
fn medium<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<(I<'c>, F<'c>, F<'c>)> {
    const TO_INT: f64 = 1.5 / f64::EPSILON;
    const INV_PIO2: f64 = f64::from_bits(0x3fe4_5f30_6dc9_c883);
    const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5440_0000);
    const PIO2_1T: f64 = f64::from_bits(0x3dd0_b461_1a62_6331);
    const PIO2_2: f64 = f64::from_bits(0x3dd0_b461_1a60_0000);
    const PIO2_2T: f64 = f64::from_bits(0x3ba3_198a_2e03_7073);
    const PIO2_3: f64 = f64::from_bits(0x3ba3_198a_2e00_0000);
    const PIO2_3T: f64 = f64::from_bits(0x397b_839a_2520_49c1);
    // rint(x 2/pi) by the 1.5 2^52 trick (round to nearest).
    let fnn = e.sub(e.add(e.mul(x, e.c(INV_PIO2))?, e.c(TO_INT))?, e.c(TO_INT))?;
    let n = e.fptosi(fnn, e.i64t())?;
    let expo = |v: F<'c>| -> R<I<'c>> { e.and(e.lshr(e.bits(v)?, e.i(52))?, e.i(0x7ff)) };
    let ex = e.lshr(e.ix(x)?, e.i(20))?;
    // One round: good to 85 bits.
    let r1 = e.sub(x, e.mul(fnn, e.c(PIO2_1))?)?;
    let w1 = e.mul(fnn, e.c(PIO2_1T))?;
    let y1 = e.sub(r1, w1)?;
    // Further rounds: t - fn p exactly as r + w (118, then 151 bits).
    let round = |t: F<'c>, p: f64, pt: f64| -> R<(F<'c>, F<'c>, F<'c>)> {
        let w = e.mul(fnn, e.c(p))?;
        let r = e.sub(t, w)?;
        let w = e.sub(e.mul(fnn, e.c(pt))?, e.sub(e.sub(t, r)?, w)?)?;
        Ok((r, w, e.sub(r, w)?))
    };
    let (r2, w2, y2) = round(r1, PIO2_2, PIO2_2T)?;
    let (r3, w3, y3) = round(r2, PIO2_3, PIO2_3T)?;
    let second = e.icmp(IntPredicate::SGT, e.isub(ex, expo(y1)?)?, e.i(16))?;
    let third = e.and(
        second,
        e.icmp(IntPredicate::SGT, e.isub(ex, expo(y2)?)?, e.i(49))?,
    )?;
    let r = e.sel(third, r3, e.sel(second, r2, r1)?)?;
    let w = e.sel(third, w3, e.sel(second, w2, w1)?)?;
    let y0 = e.sel(third, y3, e.sel(second, y2, y1)?)?;
    let y1 = e.sub(e.sub(r, y0)?, w)?;
    Ok((n, y0, y1))
}

/// The table of 2/pi as a private constant of the module.
fn table<'c>(e: &E<'_, '_, 'c>) -> inkwell::values::GlobalValue<'c> {
    const NAME: &str = "lafuse_devmath_two_over_pi";
    if let Some(g) = e.fx.module.get_global(NAME) {
        return g;
    }
    let i64t = e.i64t();
    let words: Vec<IntValue<'c>> = TWO_OVER_PI
        .iter()
        .map(|&w| i64t.const_int(w, false))
        .collect();
    let ty = i64t.array_type(TWO_OVER_PI.len() as u32);
    let g = e.fx.module.add_global(ty, None, NAME);
    g.set_linkage(Linkage::Private);
    g.set_constant(true);
    g.set_unnamed_addr(true);
    g.set_initializer(&i64t.const_array(&words));
    g
}

/// Payne-Hanek reduction of a finite `|x| >= 2^20 pi/2`. With `|x| = m 2^q` (`m` the 53-bit
/// significand), the bits of 2/pi of weight `2^-i` for `i < q - 1` add multiples of 4 to
/// `x 2/pi`, which do not change `n mod 4`: so the product `m W` with the 192 bits `W` of 2/pi
/// from bit `q - 1` on holds, from its bit 190 up, `n mod 4`, and below it the fraction to at
/// least 2^-137 (76 bits more than the 2^-61 that a double's fraction can come close to 0).
/// The fraction's top 128 bits, taken signed (so that it lies in [-1/2, 1/2)), times pi/2 in
/// double-double arithmetic give `y0 + y1`.
fn payne_hanek<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<(I<'c>, F<'c>, F<'c>)> {
    let ctx = e.fx.ctx;
    let i128t = ctx.i128_type();
    let i64t = e.i64t();
    let ux = e.bits(x)?;
    let ax = e.and(ux, e.i(i64::MAX))?;
    let m = e.or(e.and(ax, e.i((1 << 52) - 1))?, e.i(1 << 52))?;
    // Bit position of the window in the table: (exponent - 1075) - 1 + 64 (the zero word).
    let p0 = e.isub(e.lshr(ax, e.i(52))?, e.i(1013))?;
    let k = e.lshr(p0, e.i(6))?;
    let s = e.zext(e.and(p0, e.i(63))?, i128t)?;
    let g = table(e);
    let word = |j: i64| -> R<I<'c>> {
        let idx = e.iadd(k, e.i(j))?;
        // SAFETY: p0 <= 1033 for a finite double, so idx <= 19 < the table's 20 words.
        let p = unsafe {
            e.b()
                .build_in_bounds_gep(g.as_pointer_value(), &[e.i(0), idx], "w")
        }
        .map_err(ierr)?;
        let v = e.b().build_load(p, "w").map_err(ierr)?;
        e.zext(v.into_int_value(), i128t)
    };
    let c128 = |v: u64| i128t.const_int(v, false);
    let g0 = word(0)?;
    let g1 = word(1)?;
    let g2 = word(2)?;
    let g3 = word(3)?;
    // 64 bits of the table from bit s of word a on.
    let pair = |a: I<'c>, b: I<'c>| -> R<I<'c>> {
        let ab = e.or(e.shl(a, c128(64))?, b)?;
        e.lshr(e.shl(ab, s)?, c128(64))
    };
    let low = |v: I<'c>| -> R<I<'c>> { e.and(v, c128(u64::MAX)) };
    let high = |v: I<'c>| -> R<I<'c>> { e.lshr(v, c128(64)) };
    let m128 = e.zext(m, i128t)?;
    let p_lo = e.imul(m128, pair(g2, g3)?)?;
    let p_mid = e.imul(m128, pair(g1, g2)?)?;
    let p_hi = e.imul(m128, pair(g0, g1)?)?;
    // m W = d3 2^192 + d2 2^128 + d1 2^64 + d0 (d3 only adds multiples of 4).
    let s1 = e.iadd(low(p_mid)?, high(p_lo)?)?;
    let d1 = low(s1)?;
    let s2 = e.iadd(e.iadd(low(p_hi)?, high(p_mid)?)?, high(s1)?)?;
    let d2 = low(s2)?;
    let quadrant = e.and(e.lshr(d2, c128(62))?, c128(3))?;
    // The fraction: bits 62..190 of m W.
    let frac = e.or(
        e.shl(e.and(d2, c128((1 << 62) - 1))?, c128(66))?,
        e.or(e.shl(d1, c128(2))?, e.lshr(low(p_lo)?, c128(62))?)?,
    )?;
    let upper = e.lshr(frac, c128(127))?;
    let q = e.trunc(e.iadd(quadrant, upper)?, i64t)?;
    let above_half = e.icmp(IntPredicate::EQ, upper, c128(1))?;
    let a = e.isel(above_half, e.isub(c128(0), frac)?, frac)?;
    // |fraction| 2^128 = a: normalize, then a 53-bit head and a 64-bit tail as doubles.
    let lead = e.ctlz(e.trunc(high(a)?, i64t)?)?;
    let nrm = e.shl(a, e.zext(lead, i128t)?)?;
    let nh = e.trunc(high(nrm)?, i64t)?;
    let nl = e.trunc(nrm, i64t)?;
    let head = e.lshr(nh, e.i(11))?;
    let tail = e.or(e.shl(nh, e.i(53))?, e.lshr(nl, e.i(11))?)?;
    let fh = e.mul(e.uitofp(head)?, e.pow2(e.isub(e.i(-53), lead)?)?)?;
    let fl = e.mul(e.uitofp(tail)?, e.pow2(e.isub(e.i(-117), lead)?)?)?;
    // (fh + fl) (PIO2_HI + PIO2_LO) as a double-double.
    let ph = e.mul(fh, e.c(PIO2_HI))?;
    let pe = e.fma(fh, e.c(PIO2_HI), e.neg(ph)?)?;
    let t = e.add(
        pe,
        e.add(e.mul(fh, e.c(PIO2_LO))?, e.mul(fl, e.c(PIO2_HI))?)?,
    )?;
    let y0 = e.add(ph, t)?;
    let y1 = e.sub(t, e.sub(y0, ph)?)?;
    // Signs: of the fraction, then of x.
    let flip = e.xor(above_half, e.sign_bit(x)?)?;
    let y0 = e.sel(flip, e.neg(y0)?, y0)?;
    let y1 = e.sel(flip, e.neg(y1)?, y1)?;
    let n = e.isel(e.sign_bit(x)?, e.isub(e.i(0), q)?, q)?;
    Ok((n, y0, y1))
}

/// `x - n pi/2 = y0 + y1` for any `x` (garbage for infinities and NaN, which the callers
/// replace): `n = 0` up to pi/4, Cody-Waite below 2^20 pi/2, Payne-Hanek (in a block of its
/// own, branched to) above.
fn rem_pio2<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<(I<'c>, F<'c>, F<'c>)> {
    let ctx = e.fx.ctx;
    let ix = e.ix(x)?;
    let huge = e.and(
        e.icmp(IntPredicate::SGE, ix, e.i(IX_MEDIUM))?,
        e.icmp(IntPredicate::SLT, ix, e.i(IX_INF))?,
    )?;
    let med_block = ctx.append_basic_block(e.fx.func, "rem_medium");
    let ph_block = ctx.append_basic_block(e.fx.func, "rem_large");
    let merge = ctx.append_basic_block(e.fx.func, "rem_done");
    e.b()
        .build_conditional_branch(huge, ph_block, med_block)
        .map_err(ierr)?;

    e.b().position_at_end(med_block);
    // Not huge: medium, or infinite or NaN (reduced as 0, replaced by the callers).
    let xm = e.sel(e.icmp(IntPredicate::SLT, ix, e.i(IX_MEDIUM))?, x, e.c(0.0))?;
    let (n1, a1, b1) = medium(e, xm)?;
    let small = e.icmp(IntPredicate::SLE, ix, e.i(IX_PIO4))?;
    let n1 = e.isel(small, e.i(0), n1)?;
    let a1 = e.sel(small, x, a1)?;
    let b1 = e.sel(small, e.c(0.0), b1)?;
    let med_end = e.b().get_insert_block().ok_or_else(|| ierr("no block"))?;
    e.b().build_unconditional_branch(merge).map_err(ierr)?;

    e.b().position_at_end(ph_block);
    let (n2, a2, b2) = payne_hanek(e, x)?;
    let ph_end = e.b().get_insert_block().ok_or_else(|| ierr("no block"))?;
    e.b().build_unconditional_branch(merge).map_err(ierr)?;

    e.b().position_at_end(merge);
    let n = e.b().build_phi(e.i64t(), "n").map_err(ierr)?;
    n.add_incoming(&[(&n1, med_end), (&n2, ph_end)]);
    let f64t = ctx.f64_type();
    let y0 = e.b().build_phi(f64t, "y0").map_err(ierr)?;
    y0.add_incoming(&[(&a1, med_end), (&a2, ph_end)]);
    let y1 = e.b().build_phi(f64t, "y1").map_err(ierr)?;
    y1.add_incoming(&[(&b1, med_end), (&b2, ph_end)]);
    Ok((
        n.as_basic_value().into_int_value(),
        y0.as_basic_value().into_float_value(),
        y1.as_basic_value().into_float_value(),
    ))
}

/// fdlibm's `__kernel_sin(x, y, 1)` on [-pi/4, pi/4].
fn k_sin<'c>(e: &E<'_, '_, 'c>, x: F<'c>, y: F<'c>) -> R<F<'c>> {
    const S: [f64; 6] = [
        -f64::from_bits(0x3fc5_5555_5555_5549),
        f64::from_bits(0x3f81_1111_1110_f8a6),
        -f64::from_bits(0x3f2a_01a0_19c1_61d5),
        f64::from_bits(0x3ec7_1de3_57b1_fe7d),
        -f64::from_bits(0x3e5a_e5e6_8a2b_9ceb),
        f64::from_bits(0x3de5_d93a_5acf_d57c),
    ];
    let z = e.mul(x, x)?;
    let w = e.mul(z, z)?;
    // r = S2 + z (S3 + z S4) + z w (S5 + z S6)
    let r = e.add(
        e.add(e.c(S[1]), e.mul(z, e.poly(z, &S[2..4])?)?)?,
        e.mul(e.mul(z, w)?, e.poly(z, &S[4..6])?)?,
    )?;
    let v = e.mul(z, x)?;
    // x - ((z (y/2 - v r) - y) - v S1)
    let inner = e.sub(e.mul(e.c(0.5), y)?, e.mul(v, r)?)?;
    let inner = e.sub(e.sub(e.mul(z, inner)?, y)?, e.mul(v, e.c(S[0]))?)?;
    e.sub(x, inner)
}

/// fdlibm's `__kernel_cos(x, y)` on [-pi/4, pi/4].
fn k_cos<'c>(e: &E<'_, '_, 'c>, x: F<'c>, y: F<'c>) -> R<F<'c>> {
    const C: [f64; 6] = [
        f64::from_bits(0x3fa5_5555_5555_554c),
        -f64::from_bits(0x3f56_c16c_16c1_5177),
        f64::from_bits(0x3efa_01a0_19cb_1590),
        -f64::from_bits(0x3e92_7e4f_809c_52ad),
        f64::from_bits(0x3e21_ee9e_bdb4_b1c4),
        -f64::from_bits(0x3da8_fae9_be88_38d4),
    ];
    let z = e.mul(x, x)?;
    let w = e.mul(z, z)?;
    // r = z (C1 + z (C2 + z C3)) + w w (C4 + z (C5 + z C6))
    let r = e.add(
        e.mul(z, e.poly(z, &C[0..3])?)?,
        e.mul(e.mul(w, w)?, e.poly(z, &C[3..6])?)?,
    )?;
    let hz = e.mul(e.c(0.5), z)?;
    let w = e.sub(e.c(1.0), hz)?;
    // w + (((1 - w) - hz) + (z r - x y))
    let corr = e.sub(e.sub(e.c(1.0), w)?, hz)?;
    e.add(w, e.add(corr, e.sub(e.mul(z, r)?, e.mul(x, y)?)?)?)
}

/// fdlibm's `__kernel_tan(x, y, odd)`: `tan(x + y)`, or `-1/tan(x + y)` where `odd`.
fn k_tan<'c>(e: &E<'_, '_, 'c>, x: F<'c>, y: F<'c>, odd: I<'c>) -> R<F<'c>> {
    const T: [f64; 13] = [
        f64::from_bits(0x3fd5_5555_5555_5563),
        f64::from_bits(0x3fc1_1111_1110_fe7a),
        f64::from_bits(0x3fab_a1ba_1bb3_41fe),
        f64::from_bits(0x3f96_64f4_8406_d637),
        f64::from_bits(0x3f82_26e3_e96e_8493),
        f64::from_bits(0x3f6d_6d22_c956_0328),
        f64::from_bits(0x3f57_dbc8_fee0_8315),
        f64::from_bits(0x3f43_44d8_f2f2_6501),
        f64::from_bits(0x3f30_26f7_1a8d_1068),
        f64::from_bits(0x3f14_7e88_a037_92a6),
        f64::from_bits(0x3f12_b80f_32f0_a7e9),
        -f64::from_bits(0x3ef3_75cb_db60_5373),
        f64::from_bits(0x3efb_2a70_74bf_7ad4),
    ];
    // |x| >= 0.6744: tan(pi/4 - x') instead, x' = pi/4 - |x| (+ tail).
    let big = e.icmp(IntPredicate::SGE, e.ix(x)?, e.i(0x3FE5_9428))?;
    let neg = e.sign_bit(x)?;
    let xa = e.sel(neg, e.neg(x)?, x)?;
    let ya = e.sel(neg, e.neg(y)?, y)?;
    let xb = e.add(e.sub(e.c(PIO4), xa)?, e.sub(e.c(PIO4_LO), ya)?)?;
    let x = e.sel(big, xb, x)?;
    let y = e.sel(big, e.c(0.0), y)?;
    let z = e.mul(x, x)?;
    let w = e.mul(z, z)?;
    let even: Vec<f64> = [1, 3, 5, 7, 9, 11].iter().map(|&i| T[i]).collect();
    let oddc: Vec<f64> = [2, 4, 6, 8, 10, 12].iter().map(|&i| T[i]).collect();
    let r = e.poly(w, &even)?;
    let v = e.mul(z, e.poly(w, &oddc)?)?;
    let s = e.mul(z, x)?;
    // r = y + z (s (r + v) + y) + s T0
    let r = e.add(
        e.add(y, e.mul(z, e.add(e.mul(s, e.add(r, v)?)?, y)?)?)?,
        e.mul(s, e.c(T[0]))?,
    )?;
    let w = e.add(x, r)?;
    // Big: (1 - 2 odd) - 2 (x + (r - w^2 / (w + (1 - 2 odd)))), with the sign of x.
    let sg = e.sel(odd, e.c(-1.0), e.c(1.0))?;
    let vb = e.sub(
        sg,
        e.mul(
            e.c(2.0),
            e.add(x, e.sub(r, e.div(e.mul(w, w)?, e.add(w, sg)?)?)?)?,
        )?,
    )?;
    let big_r = e.sel(neg, e.neg(vb)?, vb)?;
    // Odd: -1/(x + r) computed accurately from split parts.
    let w0 = e.zero_low(w)?;
    let v = e.sub(r, e.sub(w0, x)?)?;
    let a = e.div(e.c(-1.0), w)?;
    let a0 = e.zero_low(a)?;
    let odd_r = e.add(
        a0,
        e.mul(a, e.add(e.add(e.c(1.0), e.mul(a0, w0)?)?, e.mul(a0, v)?)?)?,
    )?;
    e.sel(big, big_r, e.sel(odd, odd_r, w)?)
}

/// The result for infinities and NaN (`x - x`: NaN), else `r`.
fn finite_or_nan<'c>(e: &E<'_, '_, 'c>, ix: I<'c>, x: F<'c>, r: F<'c>) -> R<F<'c>> {
    let nonfinite = e.icmp(IntPredicate::SGE, ix, e.i(IX_INF))?;
    e.sel(nonfinite, e.sub(x, x)?, r)
}

/// `n mod 4` as selectors `(n & 1, n & 2)`.
fn quadrant<'c>(e: &E<'_, '_, 'c>, n: I<'c>) -> R<(I<'c>, I<'c>)> {
    let one = e.icmp(IntPredicate::NE, e.and(n, e.i(1))?, e.i(0))?;
    let two = e.icmp(IntPredicate::NE, e.and(n, e.i(2))?, e.i(0))?;
    Ok((one, two))
}

pub(super) fn sin<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let (n, y0, y1) = rem_pio2(e, x)?;
    let ix = e.ix(x)?;
    let (one, two) = quadrant(e, n)?;
    // n = 0: S, 1: C, 2: -S, 3: -C.
    let r = e.sel(one, k_cos(e, y0, y1)?, k_sin(e, y0, y1)?)?;
    let r = e.sel(two, e.neg(r)?, r)?;
    // |x| < 2^-26: x (also keeps -0).
    let r = e.sel(e.icmp(IntPredicate::SLT, ix, e.i(0x3e50_0000))?, x, r)?;
    finite_or_nan(e, ix, x, r)
}

pub(super) fn cos<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let (n, y0, y1) = rem_pio2(e, x)?;
    let ix = e.ix(x)?;
    let (one, two) = quadrant(e, n)?;
    // n = 0: C, 1: -S, 2: -C, 3: S.
    let r = e.sel(one, e.neg(k_sin(e, y0, y1)?)?, k_cos(e, y0, y1)?)?;
    let r = e.sel(two, e.neg(r)?, r)?;
    let r = e.sel(
        e.icmp(IntPredicate::SLT, ix, e.i(0x3e46_a09e))?,
        e.c(1.0),
        r,
    )?;
    finite_or_nan(e, ix, x, r)
}

pub(super) fn tan<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let (n, y0, y1) = rem_pio2(e, x)?;
    let ix = e.ix(x)?;
    let (odd, _) = quadrant(e, n)?;
    let r = k_tan(e, y0, y1, odd)?;
    let r = e.sel(e.icmp(IntPredicate::SLT, ix, e.i(0x3e40_0000))?, x, r)?;
    finite_or_nan(e, ix, x, r)
}
