//! `atan`, `asin`, `acos` by fdlibm's methods, every branch computed and the right one
//! selected (no divergence on a GPU, nothing but arithmetic and `sqrt`):
//! `atan` reduces `|x|` to one of five intervals around 0, 1/2, 1, 3/2 and infinity and adds
//! a degree-22 odd polynomial to `atan` of the interval's point (in two parts); `asin` and
//! `acos` use a rational approximation `R(z)` of `(asin(x) - x)/x^3` on [0, 1/2] and
//! `asin(x) = pi/2 - 2 asin(sqrt((1 - x)/2))` above, with `sqrt` split into head and tail
//! where the subtraction would cancel. All within 1 ulp.

use super::{E, F, I, R};
use inkwell::values::IntValue;
use inkwell::IntPredicate;

const PIO2_HI: f64 = f64::from_bits(0x3ff9_21fb_5444_2d18);
const PIO2_LO: f64 = f64::from_bits(0x3c91_a626_3314_5c07);

pub(super) fn atan<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    const ATANHI: [f64; 4] = [
        f64::from_bits(0x3fdd_ac67_0561_bb4f),
        f64::from_bits(0x3fe9_21fb_5444_2d18),
        f64::from_bits(0x3fef_730b_d281_f69b),
        f64::from_bits(0x3ff9_21fb_5444_2d18),
    ];
    const ATANLO: [f64; 4] = [
        f64::from_bits(0x3c7a_2b7f_222f_65e2),
        f64::from_bits(0x3c81_a626_3314_5c07),
        f64::from_bits(0x3c70_0788_7af0_cbbd),
        f64::from_bits(0x3c91_a626_3314_5c07),
    ];
    const AT_EVEN: [f64; 6] = [
        f64::from_bits(0x3fd5_5555_5555_550d),
        f64::from_bits(0x3fc2_4924_9200_83ff),
        f64::from_bits(0x3fb7_45cd_c54c_206e),
        f64::from_bits(0x3fb1_0d66_a0d0_3d51),
        f64::from_bits(0x3fa9_7b4b_2476_0deb),
        f64::from_bits(0x3f90_ad3a_e322_da11),
    ];
    const AT_ODD: [f64; 5] = [
        -f64::from_bits(0x3fc9_9999_9998_ebc4),
        -f64::from_bits(0x3fbc_71c6_fe23_1671),
        -f64::from_bits(0x3fb3_b0f2_af74_9a6d),
        -f64::from_bits(0x3fad_de2d_52de_fd9a),
        -f64::from_bits(0x3fa2_b444_2c6a_6c2f),
    ];
    let x = args[0];
    let ix = e.ix(x)?;
    let a = e.abs(x)?;
    let below = |v: i64| -> R<I<'c>> { e.icmp(IntPredicate::SLT, ix, e.i(v)) };
    // Interval: id -1 below 7/16, 0 below 11/16, 1 below 19/16, 2 below 39/16, 3 above.
    let (b0, b1, b2, b3) = (
        below(0x3fdc_0000)?,
        below(0x3fe6_0000)?,
        below(0x3ff3_0000)?,
        below(0x4003_8000)?,
    );
    let pick = |v: [F<'c>; 5]| -> R<F<'c>> {
        let r = e.sel(b3, v[3], v[4])?;
        let r = e.sel(b2, v[2], r)?;
        let r = e.sel(b1, v[1], r)?;
        e.sel(b0, v[0], r)
    };
    // The reduced argument t = num / den.
    let num = pick([
        x,
        e.sub(e.mul(e.c(2.0), a)?, e.c(1.0))?,
        e.sub(a, e.c(1.0))?,
        e.sub(a, e.c(1.5))?,
        e.c(-1.0),
    ])?;
    let den = pick([
        e.c(1.0),
        e.add(e.c(2.0), a)?,
        e.add(a, e.c(1.0))?,
        e.add(e.c(1.0), e.mul(e.c(1.5), a)?)?,
        a,
    ])?;
    let t = e.div(num, den)?;
    let z = e.mul(t, t)?;
    let w = e.mul(z, z)?;
    let s1 = e.mul(z, e.poly(w, &AT_EVEN)?)?;
    let s2 = e.mul(w, e.poly(w, &AT_ODD)?)?;
    let ts = e.mul(t, e.add(s1, s2)?)?;
    let small = e.sub(t, ts)?;
    let hi = pick([
        e.c(0.0),
        e.c(ATANHI[0]),
        e.c(ATANHI[1]),
        e.c(ATANHI[2]),
        e.c(ATANHI[3]),
    ])?;
    let lo = pick([
        e.c(0.0),
        e.c(ATANLO[0]),
        e.c(ATANLO[1]),
        e.c(ATANLO[2]),
        e.c(ATANLO[3]),
    ])?;
    // hi - ((t (s1 + s2) - lo) - t), with the sign of x.
    let big = e.sub(hi, e.sub(e.sub(ts, lo)?, t)?)?;
    let big = e.copysign(big, x)?;
    let r = e.sel(b0, small, big)?;
    // |x| < 2^-27: x; |x| >= 2^66: +-pi/2; NaN: x.
    let r = e.sel(below(0x3e40_0000)?, x, r)?;
    let r = e.sel(
        e.icmp(IntPredicate::SGE, ix, e.i(0x4410_0000))?,
        e.copysign(e.c(ATANHI[3]), x)?,
        r,
    )?;
    e.sel(e.is_nan(x)?, x, r)
}

/// fdlibm's `R(z)`: `(asin(sqrt z) - sqrt z) / sqrt(z)^3` on [0, 1/4], rational.
fn asin_r<'c>(e: &E<'_, '_, 'c>, z: F<'c>) -> R<F<'c>> {
    const PS: [f64; 6] = [
        f64::from_bits(0x3fc5_5555_5555_5555),
        -f64::from_bits(0x3fd4_d612_03eb_6f7d),
        f64::from_bits(0x3fc9_c155_0e88_4455),
        -f64::from_bits(0x3fa4_8228_b568_8f3b),
        f64::from_bits(0x3f49_efe0_7501_b288),
        f64::from_bits(0x3f02_3de1_0dfd_f709),
    ];
    const QS: [f64; 5] = [
        1.0,
        -f64::from_bits(0x4003_3a27_1c8a_2d4b),
        f64::from_bits(0x4000_2ae5_9c59_8ac8),
        -f64::from_bits(0x3fe6_066c_1b8d_0159),
        f64::from_bits(0x3fb3_b8c5_b12e_9282),
    ];
    let p = e.mul(z, e.poly(z, &PS)?)?;
    let q = e.poly(z, &QS)?;
    e.div(p, q)
}

/// For `|x| >= 1`: `one` at `|x| == 1` (by sign: `at_plus`, `at_minus`), NaN above and for NaN.
fn at_one<'c>(e: &E<'_, '_, 'c>, x: F<'c>, at_plus: F<'c>, at_minus: F<'c>, r: F<'c>) -> R<F<'c>> {
    let ix = e.ix(x)?;
    let r = e.sel(
        e.icmp(IntPredicate::SGE, ix, e.i(0x3ff0_0000))?,
        e.c(f64::NAN),
        r,
    )?;
    let r = e.sel(e.eq(x, e.c(1.0))?, at_plus, r)?;
    e.sel(e.eq(x, e.c(-1.0))?, at_minus, r)
}

/// What `asin` and `acos` of `x` both start from: `x`'s high word, whether `|x| < 1/2`,
/// `zb = (1 - |x|) / 2`, `R(z)` of `z = x^2` below 1/2 and of `zb` above, and `sqrt(zb)`.
struct Halves<'c> {
    ix: I<'c>,
    small: IntValue<'c>,
    zb: F<'c>,
    r: F<'c>,
    s: F<'c>,
}

fn halves<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<Halves<'c>> {
    let ix = e.ix(x)?;
    let small = e.icmp(IntPredicate::SLT, ix, e.i(0x3fe0_0000))?;
    let zb = e.mul(e.sub(e.c(1.0), e.abs(x)?)?, e.c(0.5))?;
    let z = e.sel(small, e.mul(x, x)?, zb)?;
    Ok(Halves {
        ix,
        small,
        zb,
        r: asin_r(e, z)?,
        s: e.sqrt(zb)?,
    })
}

pub(super) fn asin<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let Halves {
        ix,
        small,
        zb,
        r,
        s,
    } = halves(e, x)?;
    let below_half = e.add(x, e.mul(x, r)?)?;
    // |x| > 0.975: pi/2 - (2 (s + s r) - pio2_lo).
    let near_one = e.sub(
        e.c(PIO2_HI),
        e.sub(e.mul(e.c(2.0), e.add(s, e.mul(s, r)?)?)?, e.c(PIO2_LO))?,
    )?;
    // Else with s = f + c: pi/4 - (2 s r - (pio2_lo - 2c) - (pi/4 - 2f)).
    let f = e.zero_low(s)?;
    let c = e.div(e.sub(zb, e.mul(f, f)?)?, e.add(s, f)?)?;
    let pio4 = e.c(0.5 * PIO2_HI);
    let mid = e.sub(
        pio4,
        e.sub(
            e.sub(
                e.mul(e.mul(e.c(2.0), s)?, r)?,
                e.sub(e.c(PIO2_LO), e.mul(e.c(2.0), c)?)?,
            )?,
            e.sub(pio4, e.mul(e.c(2.0), f)?)?,
        )?,
    )?;
    let above = e.sel(
        e.icmp(IntPredicate::SGE, ix, e.i(0x3fef_3333))?,
        near_one,
        mid,
    )?;
    let above = e.copysign(above, x)?;
    let r = e.sel(small, below_half, above)?;
    // |x| < 2^-26: x.
    let r = e.sel(e.icmp(IntPredicate::SLT, ix, e.i(0x3e50_0000))?, x, r)?;
    let r = at_one(e, x, e.c(PIO2_HI), e.c(-PIO2_HI), r)?;
    e.sel(e.is_nan(x)?, x, r)
}

pub(super) fn acos<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let Halves {
        ix,
        small,
        zb,
        r,
        s,
    } = halves(e, x)?;
    // |x| < 1/2: pi/2 - (x - (pio2_lo - x R)).
    let below_half = e.sub(e.c(PIO2_HI), e.sub(x, e.sub(e.c(PIO2_LO), e.mul(x, r)?)?)?)?;
    // x < -1/2: 2 (pi/2 - (s + (R s - pio2_lo))).
    let w = e.sub(e.mul(r, s)?, e.c(PIO2_LO))?;
    let negative = e.mul(e.c(2.0), e.sub(e.c(PIO2_HI), e.add(s, w)?)?)?;
    // x > 1/2: 2 (f + (R s + c)) with s = f + c.
    let f = e.zero_low(s)?;
    let c = e.div(e.sub(zb, e.mul(f, f)?)?, e.add(s, f)?)?;
    let positive = e.mul(e.c(2.0), e.add(f, e.add(e.mul(r, s)?, c)?)?)?;
    let above = e.sel(e.sign_bit(x)?, negative, positive)?;
    let r = e.sel(small, below_half, above)?;
    // |x| <= 2^-57: pi/2.
    let r = e.sel(
        e.icmp(IntPredicate::SLE, ix, e.i(0x3c60_0000))?,
        e.c(PIO2_HI),
        r,
    )?;
    let r = at_one(e, x, e.c(0.0), e.c(2.0 * PIO2_HI), r)?;
    e.sel(e.is_nan(x)?, x, r)
}
