//! Scalar numerics that every execution path shares: `exp` and `ln` by fdlibm's methods, in
//! Rust. The unfused kernels, the scalar instructions and the reference evaluator call these,
//! and generated code computes the very same operations on every lane (its vector library
//! states them operation for operation; `lafuse-codegen` tests that to the bit). So fused and
//! unfused execution agree to the bit on `exp`, `log`, `sigmoid` and `log(x, base)`, and no
//! result depends on the C library the binary links: a 1-ulp difference between two
//! implementations becomes a different answer downstream of an ill-conditioned step such as
//! `sin(exp(x))` at large `x`. Both stay within 1 ulp of the C library (tested below).
//!
//! This module holds the scalar functions only; the compiler's constant folder calls them as
//! the runtime does. Their vector forms over slices, for the unfused kernels, are in the
//! runtime's `kernels/vector_math/`.

/// Constants of [`ln`].
pub mod ln_consts {
    /// ln 2 split so that `k * LN2_HI` is exact for every exponent `k` (constants as bit
    /// patterns: exact, whatever the decimal printing).
    pub const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    /// The rest of ln 2.
    pub const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    /// Coefficients of the minimax polynomial R(z) ~ log((1+s)/(1-s)) / s - 2 in z = s^2
    /// on |s| <= 0.1716 (fdlibm's `Lg1..Lg7`).
    pub const LG: [f64; 7] = [
        f64::from_bits(0x3fe5_5555_5555_5593),
        f64::from_bits(0x3fd9_9999_9997_fa04),
        f64::from_bits(0x3fd2_4924_9422_9359),
        f64::from_bits(0x3fcc_71c5_1d8e_78af),
        f64::from_bits(0x3fc7_4664_96cb_03de),
        f64::from_bits(0x3fc3_9a09_d078_c69f),
        f64::from_bits(0x3fc2_f112_df3e_5244),
    ];
    /// 2^54, the scale that brings a subnormal into the normal range.
    pub const TWO_54: f64 = 18_014_398_509_481_984.0;
    /// Added to the high word so that mantissas at or above sqrt(2)/2's carry into the
    /// exponent: `0x3ff00000 - 0x3fe6a09e`.
    pub const HIGH_SHIFT: i64 = 0x3ff0_0000 - 0x3fe6_a09e;
    /// The high word of sqrt(2)/2, restored under the reduced mantissa.
    pub const SQRT_HALF_HIGH: i64 = 0x3fe6_a09e;
    /// 2^52 and its bits, for the vector forms: a double with 2^52's exponent holds the
    /// integers from 2^52 to 2^53 exactly, its mantissa bits the integer's low 52, so the
    /// biased exponent `e` becomes the double `e` as `bits(2^52 | e) - 2^52`, without the
    /// 64-bit lane conversion AVX2 lacks.
    pub const TWO_52: f64 = 4_503_599_627_370_496.0;
    pub const TWO_52_BITS: i64 = 0x4330_0000_0000_0000;
}

/// Defines `pub fn $name(x: f64) -> f64` as `$steps(x)`, whose fused steps are `mul_add`s:
/// where the binary's target lacks FMA (as baseline x86-64 does), a copy of `$steps` compiled
/// for the instruction runs on a CPU that has it, and elsewhere `mul_add` calls its `fma`
/// function, which rounds each step once as the instruction does (so the bits agree; tested).
macro_rules! fma_dispatched {
    ($(#[$doc:meta])* pub fn $name:ident => $steps:ident) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(x: f64) -> f64 {
            #[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
            {
                #[target_feature(enable = "fma")]
                unsafe fn with_fma_instructions(x: f64) -> f64 {
                    $steps(x)
                }
                if std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has the instruction.
                    return unsafe { with_fma_instructions(x) };
                }
            }
            $steps(x)
        }
    };
}

fma_dispatched! {
    /// The natural logarithm, by fdlibm's method (error below 1 ulp): `x = 2^k r` with `r` in
    /// [sqrt(2)/2, sqrt(2)), `f = r - 1`, `s = f / (2 + f)`, and
    /// `log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2))` with a degree-14 minimax polynomial `R`.
    ///
    /// The polynomial and the three steps that add a product are fused multiply-adds
    /// ([`ln_fused_steps`]): eight operations fewer on every lane of generated code, and one
    /// rounding where fdlibm has two (`k LN2_HI` is exact, so its step is fdlibm's to the bit).
    /// A CPU without the instruction gets the same bits from the `fma` function `mul_add` calls
    /// there (correctly rounded, slower).
    ///
    /// Every execution path's logarithm: the unfused kernels call it, and generated code's
    /// `lafuse_log_v*` compute these operations in this order on every lane (tested to the bit).
    /// Within 1 ulp of the C library's `log` (tested over every exponent).
    pub fn ln => ln_fused_steps
}

/// [`ln`]'s operations: fdlibm's method with fused multiply-adds (`mul_add`, one rounding)
/// in `R`'s two polynomials, in adding `z P2(w)` to `t1`, `s (hfsq + R)` to `k LN2_LO` and
/// `k LN2_HI` to the rest.
#[inline(always)]
fn ln_fused_steps(x: f64) -> f64 {
    use ln_consts::*;
    if !(x > 0.0 && x < f64::INFINITY) {
        return if x.is_nan() || x == f64::INFINITY {
            x
        } else if x == 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::NAN
        };
    }
    let (xs, k0) = if x < f64::MIN_POSITIVE {
        (x * TWO_54, -54)
    } else {
        (x, 0)
    };
    let bits = xs.to_bits() as i64;
    let hx = (bits >> 32) + HIGH_SHIFT;
    let k = (hx >> 20) - 0x3ff + k0;
    let r =
        f64::from_bits((((hx & 0x000f_ffff) + SQRT_HALF_HIGH) << 32 | (bits & 0xffff_ffff)) as u64);
    let f = r - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * w.mul_add(w.mul_add(LG[5], LG[3]), LG[1]);
    let p2 = w.mul_add(w.mul_add(w.mul_add(LG[6], LG[4]), LG[2]), LG[0]);
    let big_r = z.mul_add(p2, t1);
    let dk = k as f64;
    let a = s.mul_add(hfsq + big_r, dk * LN2_LO);
    dk.mul_add(LN2_HI, a - hfsq + f)
}

/// Constants of [`exp`].
pub mod exp_consts {
    /// ln 2 split in two ([`super::ln_consts`]): `k * LN2_HI` is exact for every
    /// `|k| <= 1100`.
    pub use super::ln_consts::{LN2_HI, LN2_LO};
    /// 1 / ln 2.
    pub const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
    /// Coefficients of the minimax polynomial for `x (e^x + 1) / (e^x - 1)` on
    /// |x| <= ln2 / 2 (fdlibm's `P1..P5`).
    pub const P: [f64; 5] = [
        f64::from_bits(0x3fc5_5555_5555_553e),
        f64::from_bits(0xbf66_c16c_16be_bd93),
        f64::from_bits(0x3f11_566a_af25_de2c),
        f64::from_bits(0xbebb_bd41_c5d2_6bf1),
        f64::from_bits(0x3e66_3769_72be_a4d0),
    ];
    /// Above this, `e^x` overflows to infinity.
    pub const OVERFLOW: f64 = 709.782_712_893_384;
    /// Below this, `e^x` underflows to 0.
    pub const UNDERFLOW: f64 = -745.133_219_101_941_1;
    /// High words of |x| that select the reduction: above `HALF_LN2_HIGH` (|x| > ln2/2)
    /// reduce by k ln 2, from `THREE_HALF_LN2_HIGH` (|x| >= 1.5 ln2) with k by rounding, and
    /// at most `TINY_HIGH` (|x| <= 2^-28) return `1 + x`.
    pub const HALF_LN2_HIGH: i64 = 0x3fd6_2e42;
    pub const THREE_HALF_LN2_HIGH: i64 = 0x3ff0_a2b2;
    pub const TINY_HIGH: i64 = 0x3e30_0000;
    /// Clamps keeping the main path's integer conversion in range for special lanes.
    pub const CLAMP_HI: f64 = 710.0;
    pub const CLAMP_LO: f64 = -746.0;
    /// `2^1023` and `2^-969` (= 2^-1022 * 2^53): the first step of scaling by 2^k when `k` is
    /// beyond the normal exponent range (a second step is never needed for |x| in range).
    pub const TWO_1023: f64 = f64::from_bits(0x7fe0_0000_0000_0000);
    pub const TWO_M969: f64 = f64::from_bits(0x0360_0000_0000_0000);
    /// The open range of arguments whose `k` lies in [-1021, 1023]: `2^k` is a normal double
    /// and `e^x` neither overflows nor underflows, so the vector forms compute a vector whose
    /// lanes all lie here without the clamps, the two-step scaling or the special lanes.
    pub const ORDINARY_LO: f64 = -708.0;
    pub const ORDINARY_HI: f64 = 709.0;
}

/// The `k` of the reduction `x = k ln2 + r` that [`exp`] and `tanh`'s `e^u - 1` share (both
/// fdlibm's, by the high word of `|x|`): `x / ln2` rounded from 1.5 ln2 on, +-1 above ln2 / 2,
/// else 0. Finite `x` below 1100 in magnitude.
#[inline]
fn ln2_multiple(x: f64) -> i64 {
    use exp_consts::*;
    let hx = ((x.to_bits() >> 32) & 0x7fff_ffff) as i64;
    if hx >= THREE_HALF_LN2_HIGH {
        (INV_LN2 * x + if x < 0.0 { -0.5 } else { 0.5 }) as i64
    } else if hx > HALF_LN2_HIGH {
        if x < 0.0 {
            -1
        } else {
            1
        }
    } else {
        0
    }
}

fma_dispatched! {
    /// `e^x`, by fdlibm's method (error below 1 ulp): `x = k ln2 + r` with |r| <= ln2/2 (`r` kept
    /// as `hi - lo` for precision), `e^r = 1 + r + r c / (2 - c)` with a degree-10 minimax
    /// rational correction `c`, and the result scaled by `2^k` in at most two exact steps. The
    /// correction's polynomial, `c` and `hi` are fused multiply-adds, as in [`ln`].
    ///
    /// Every execution path's exponential: the unfused kernels call it, and generated code's
    /// `lafuse_exp_v*` compute these operations in this order on every lane (each case computed,
    /// then chosen; tested to the bit). Within 1 ulp of the C library's `exp` (tested over the
    /// whole range).
    pub fn exp => exp_fused_steps
}

/// [`exp`]'s operations.
#[inline(always)]
fn exp_fused_steps(x: f64) -> f64 {
    use exp_consts::*;
    // Special lanes are computed on a clamped stand-in and replaced at the end.
    let xc = if x.is_nan() {
        0.0
    } else {
        x.clamp(CLAMP_LO, CLAMP_HI)
    };
    let hx = ((xc.to_bits() >> 32) & 0x7fff_ffff) as i64;
    let k = ln2_multiple(xc);
    let kf = k as f64;
    // `kf * LN2_HI` is exact, so `hi` is fdlibm's to the bit.
    let hi = (-kf).mul_add(LN2_HI, xc);
    let lo = kf * LN2_LO;
    let r = hi - lo;
    let rr = r * r;
    let p = rr.mul_add(
        rr.mul_add(rr.mul_add(rr.mul_add(P[4], P[3]), P[2]), P[1]),
        P[0],
    );
    let c = (-rr).mul_add(p, r);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    // y * 2^k: one exact pre-scaling step when 2^k alone is not a normal double.
    let (pre, k2) = if k > 1023 {
        (TWO_1023, k - 1023)
    } else if k < -1022 {
        (TWO_M969, k + 969)
    } else {
        (1.0, k)
    };
    let scaled = (y * pre) * f64::from_bits(((0x3ff + k2) as u64) << 52);
    let tiny = 1.0 + xc;
    let out = if hx <= TINY_HIGH { tiny } else { scaled };
    if x.is_nan() {
        x
    } else if x > OVERFLOW {
        f64::INFINITY
    } else if x < UNDERFLOW {
        0.0
    } else {
        out
    }
}

/// The logistic function `1 / (1 + e^-x)`, with [`exp`] (generated code computes the same
/// operations).
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}

/// Constants of [`tanh`] and of the `e^u - 1` it is computed from.
pub mod tanh_consts {
    /// The reduction of `e^u - 1` is [`super::exp`]'s.
    pub use super::exp_consts::{HALF_LN2_HIGH, INV_LN2, LN2_HI, LN2_LO, THREE_HALF_LN2_HIGH};
    /// Coefficients of fdlibm's rational approximation of `e^r - 1` on |r| <= ln2 / 2
    /// (`expm1`'s `Q1..Q5`).
    pub const Q: [f64; 5] = [
        f64::from_bits(0xbfa1_1111_1111_10f4),
        f64::from_bits(0x3f5a_01a0_19fe_5585),
        f64::from_bits(0xbf14_ce19_9eaa_dbb7),
        f64::from_bits(0x3ed0_cfca_86e6_5239),
        f64::from_bits(0xbe8a_fdb7_6e09_c32d),
    ];
    /// Below this magnitude `tanh(x)` is `x` (2^-55).
    pub const TINY: f64 = f64::from_bits(0x3c80_0000_0000_0000);
    /// From this magnitude on `tanh(x)` is `±1` in double precision.
    pub const SATURATED: f64 = 22.0;
}

/// `e^u - 1` by fdlibm's `expm1`, for `u` in `[-2, 0]` or `[2, 44]`: the arguments
/// [`tanh`] passes (the reduction's `k` is then 0, -1, -2, -3 or 3..=63, so the cases of
/// `expm1` for `k = 1`, overflow and saturation at -1 never arise and are left out). The same
/// `k` as [`exp`]'s; `u = k ln2 + r`, `r` kept as `x - c` for precision, and
/// `e^r - 1 = r + r^2/2 + ...` corrected by a rational approximation in `r^2/2`.
#[inline]
fn expm1_for_tanh(u: f64) -> f64 {
    use tanh_consts::*;
    let k = ln2_multiple(u);
    let kf = k as f64;
    let hi = u - kf * LN2_HI;
    let lo = kf * LN2_LO;
    let x = hi - lo;
    let c = (hi - x) - lo;
    let hfx = 0.5 * x;
    let hxs = x * hfx;
    let r1 = 1.0 + hxs * (Q[0] + hxs * (Q[1] + hxs * (Q[2] + hxs * (Q[3] + hxs * Q[4]))));
    let t = 3.0 - r1 * hfx;
    let e = hxs * ((r1 - t) / (6.0 - x * t));
    if k == 0 {
        return x - (x * e - hxs);
    }
    let e = x * (e - c) - c;
    let e = e - hxs;
    // 2^k and 2^-k are normal doubles for every k that arises.
    let two_k = f64::from_bits(((0x3ff + k) as u64) << 52);
    let two_minus_k = f64::from_bits(((0x3ff - k) as u64) << 52);
    if k == -1 {
        0.5 * (x - e) - 0.5
    } else if k <= -2 || k > 56 {
        (1.0 - (e - x)) * two_k - 1.0
    } else if k < 20 {
        ((1.0 - two_minus_k) - (e - x)) * two_k
    } else {
        ((x - (e + two_minus_k)) + 1.0) * two_k
    }
}

/// The hyperbolic tangent by fdlibm's method (the one Java's `StrictMath.tanh` ports, so
/// SystemDS's results agree to the bit): `x` itself below 2^-55, `±1` from 22 on, else from
/// `t = e^(2|x|) - 1` as `1 - 2 / (t + 2)` (|x| >= 1) or from `t = e^(-2|x|) - 1` as
/// `-t / (t + 2)`, where neither cancels. Within 3 ulps of the C library's `tanh` (fdlibm's
/// bound; tested).
///
/// Every execution path's `tanh`: the unfused kernels call it, and generated code's
/// `lafuse_tanh_v*` compute these operations in this order on every lane.
#[inline]
pub fn tanh(x: f64) -> f64 {
    use tanh_consts::*;
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    if a < TINY {
        return x;
    }
    let z = if a >= SATURATED {
        1.0
    } else if a >= 1.0 {
        1.0 - 2.0 / (expm1_for_tanh(2.0 * a) + 2.0)
    } else {
        let t = expm1_for_tanh(-2.0 * a);
        -t / (t + 2.0)
    };
    if x < 0.0 {
        -z
    } else {
        z
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator of 64-bit patterns from `seed` (not zero).
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Distance in units in the last place between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn ln_is_within_one_ulp_of_the_c_library_everywhere() {
        // Random bit patterns over every positive exponent (subnormals included), values
        // near 1 where the result is tiny, and exact powers of two.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut xs: Vec<f64> = (0..200_000)
            .map(|_| f64::from_bits(next() >> 1))
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        xs.extend((0..100_000).map(|i| 1.0 + (i as f64 - 50_000.0) * 1e-9));
        xs.extend((0..100_000).map(|i| 0.7 + i as f64 * 7e-6));
        xs.extend((-1074..1024).map(|e| 2f64.powi(e)));
        xs.extend([
            f64::MIN_POSITIVE,
            f64::MAX,
            5e-324,
            1.0,
            2.0,
            0.5,
            std::f64::consts::E,
        ]);
        let mut worst = 0;
        for &x in &xs {
            let (got, want) = (ln(x), x.ln());
            if got == 0.0 || want == 0.0 {
                assert_eq!(got, want, "ln({x:e})");
                continue;
            }
            assert_eq!(got.is_sign_negative(), want.is_sign_negative(), "ln({x:e})");
            let d = ulps(got, want);
            assert!(
                d <= 1,
                "ln({x:e}) = {got:e}, C library {want:e}: {d} ulps apart"
            );
            worst = worst.max(d);
        }
        assert!(worst <= 1);
        assert_eq!(ln(1.0).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn exp_is_within_one_ulp_of_the_c_library_everywhere() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        // Uniform over the whole finite range of results, every reduction case, tiny
        // arguments, the overflow and underflow edges, and subnormal results.
        let mut xs: Vec<f64> = (0..200_000)
            .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1460.0 - 750.0)
            .collect();
        xs.extend((0..50_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0));
        xs.extend((0..2_000).map(|i| (i as f64 - 1000.0) * 1e-12));
        xs.extend((-60..0).map(|e| 2f64.powi(e)));
        xs.extend((-60..0).map(|e| -(2f64.powi(e))));
        xs.extend([
            0.0,
            -0.0,
            709.78,
            709.782712893383,
            -708.39,
            -708.4,
            -744.0,
            -745.0,
            -745.13,
        ]);
        xs.extend([
            0.34657359027997264,
            0.346_573_590_279_972_7,
            1.0397207708399179,
            -1.0397207708399179,
        ]);
        for &x in &xs {
            let (got, want) = (exp(x), x.exp());
            assert!(
                ulps(got, want) <= 1,
                "exp({x:e}) = {got:e}, C library {want:e}: {} ulps apart",
                ulps(got, want)
            );
        }
    }

    #[test]
    fn tanh_is_within_three_ulps_of_the_c_library_everywhere() {
        let mut next = xorshift(0x5851_f42d_4c95_7f2du64);
        let uniform =
            |r: u64, lo: f64, hi: f64| lo + (r >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo);
        // Every case: tiny, below and above 1, each of the reduction's k, near saturation.
        let mut xs: Vec<f64> = (0..200_000).map(|_| uniform(next(), -25.0, 25.0)).collect();
        xs.extend((0..100_000).map(|_| uniform(next(), -1.5, 1.5)));
        xs.extend((0..20_000).map(|_| uniform(next(), -0.4, 0.4)));
        xs.extend((-80..5).map(|e| 2f64.powi(e)));
        xs.extend((-80..5).map(|e| -(2f64.powi(e))));
        xs.extend([
            1.0,
            -1.0,
            0.17328679513998632,
            0.5198603854199589,
            21.999999999999996,
        ]);
        for &x in &xs {
            let (got, want) = (tanh(x), x.tanh());
            assert_eq!(
                got.is_sign_negative(),
                want.is_sign_negative(),
                "tanh({x:e})"
            );
            let d = ulps(got, want);
            // fdlibm's own bound (StrictMath is 3 ulps from glibc at 0.537644364341233).
            assert!(
                d <= 3,
                "tanh({x:e}) = {got:e}, C library {want:e}: {d} ulps apart"
            );
        }
    }

    #[test]
    fn tanh_special_values() {
        assert!(tanh(f64::NAN).is_nan());
        assert_eq!(tanh(f64::INFINITY), 1.0);
        assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
        assert_eq!(tanh(22.0), 1.0);
        assert_eq!(tanh(-30.0), -1.0);
        assert_eq!(tanh(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(tanh(1e-300), 1e-300);
        assert_eq!(tanh(5e-324), 5e-324);
    }

    /// `StrictMath.tanh` of OpenJDK 17 (`Double.doubleToRawLongBits`), over every case of the
    /// method: tiny, each reduction `k` of `e^u - 1` (0, -1, -2..-3, 3..19, 20..56, above 56).
    const STRICT_MATH_TANH: &[(f64, u64)] = &[
        (1.0e-17, 0x3c670ef54646d497),
        (-3.0e-9, 0xbe29c511dc3a41df),
        (0.01, 0x3f847ab48ae4595e),
        (-0.1, 0xbfb983d7795f413a),
        (0.25, 0x3fcf597ea69a1c86),
        (0.3, 0x3fd2a4dda7d914fa),
        (-0.34657359027997264, 0xbfd5555555555555),
        (0.35, 0x3fd5872d4a8651d6),
        (0.5, 0x3fdd9353d7568af3),
        (-0.6, 0xbfe12f8292d2ccfc),
        (0.75, 0x3fe45323e552f228),
        (0.9, 0x3fe6ebe982d6605d),
        (0.999, 0x3fe85b89494cdea1),
        (1.0, 0x3fe85efab514f394),
        (-1.0, 0xbfe85efab514f394),
        (1.0001, 0x3fe85f52c690c452),
        (1.25, 0x3feb2523bb6b2dee),
        (-1.5, 0xbfecf6f9786df577),
        (2.0, 0x3feed9505e1bc3d4),
        (2.5, 0x3fef9258260a71c2),
        (3.0, 0x3fefd77d111a0b00),
        (-4.2, 0xbfeffc510cd4c09b),
        (5.5, 0x3fefffb9f2fc1e91),
        (7.0, 0x3feffffc832750f2),
        (9.75, 0x3feffffffc59e429),
        (-10.0, 0xbfeffffffdc96f35),
        (12.5, 0x3feffffffffc2eb9),
        (15.0, 0x3feffffffffff96a),
        (18.0, 0x3feffffffffffffc),
        (-19.9, 0xbff0000000000000),
        (21.5, 0x3ff0000000000000),
        (21.999999999999996, 0x3ff0000000000000),
        (0.17328679513998632, 0x3fc5f619980c4337),
        (0.5198603854199589, 0x3fde90df15b89be4),
        (-0.7, 0xbfe356fb17af2e92),
    ];

    /// Values of Java's `StrictMath.tanh` (fdlibm, what SystemDS computes), printed as bits
    /// by a JDK: the ported method agrees to the bit.
    #[test]
    fn tanh_agrees_with_fdlibm() {
        for (x, bits) in STRICT_MATH_TANH {
            assert_eq!(tanh(*x).to_bits(), *bits, "tanh({x:e})");
        }
    }

    #[test]
    fn exp_special_values() {
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        // fdlibm's e^1 is one ulp above the correctly rounded e (the C library's).
        assert!(ulps(exp(1.0), std::f64::consts::E) <= 1);
    }

    /// `ln` and `exp` round each fused multiply-add once: on these arguments fdlibm's
    /// statements with separately rounded products and sums give another last bit.
    #[test]
    fn ln_and_exp_round_their_fused_steps_once() {
        let at = |bits: u64| f64::from_bits(bits);
        assert_eq!(ln(at(0x3fe6_dfbe_9c6d_a6b6)), -0.335_734_910_347_822_6);
        assert_eq!(ln(at(0x3ff4_3d58_cacf_c3cc)), 0.235_054_143_359_257_06);
        assert_eq!(exp(at(0xbfd0_7c00_f41d_c5d0)), 0.772_928_611_852_525_3);
        assert_eq!(exp(at(0xbfef_521c_df07_ec32)), 0.375_771_688_110_323_13);
    }

    /// Where the CPU has FMA, `ln` and `exp` run their steps as the instruction; compiled
    /// without it (this crate's baseline target), the same steps call the `fma` function
    /// `mul_add` falls back to, as on a CPU without the instruction: both round once, so the
    /// bits agree.
    #[test]
    fn the_instruction_and_the_c_library_fma_give_the_same_bits() {
        let mut next = xorshift(0x0123_4567_89ab_cdefu64);
        for i in 0..200_000 {
            let x = match i % 3 {
                0 => f64::from_bits(next() >> 1),
                1 => 0.5 + (next() >> 11) as f64 / (1u64 << 53) as f64,
                _ => ((next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1500.0,
            };
            let (a, b) = (ln(x), ln_fused_steps(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "ln({x:e})"
            );
            let (a, b) = (exp(x), exp_fused_steps(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "exp({x:e})"
            );
        }
    }

    #[test]
    fn ln_special_values() {
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(-0.0), f64::NEG_INFINITY);
        assert!(ln(-1e-300).is_nan());
        assert!(ln(f64::NEG_INFINITY).is_nan());
        assert!(ln(f64::NAN).is_nan());
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert_eq!(ln(5e-324), 5e-324f64.ln());
    }
}
