//! Scalar numerics that every execution path shares: `exp` and `ln` by fdlibm's methods, in
//! Rust. The unfused kernels, the scalar instructions and the reference evaluator call these,
//! and generated code computes the very same operations on every lane (its vector library
//! states them operation for operation; `lafuse-codegen` tests that to the bit). So fused and
//! unfused execution agree to the bit on `exp`, `log`, `sigmoid` and `log(x, base)`, and no
//! result depends on the C library the binary links: a 1-ulp difference between two
//! implementations becomes a different answer downstream of an ill-conditioned step such as
//! `sin(exp(x))` at large `x`. Both stay within 1 ulp of the C library (tested below).

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
}

/// The natural logarithm, by fdlibm's method (error below 1 ulp): `x = 2^k r` with `r` in
/// [sqrt(2)/2, sqrt(2)), `f = r - 1`, `s = f / (2 + f)`, and
/// `log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2))` with a degree-14 minimax polynomial `R`.
///
/// Every execution path's logarithm: the unfused kernels call it, and generated code's
/// `lafuse_log_v*` compute these operations in this order on every lane (tested to the bit).
/// Within 1 ulp of the C library's `log` (tested over every exponent).
#[inline]
pub fn ln(x: f64) -> f64 {
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
    let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
    let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
    let big_r = t2 + t1;
    let dk = k as f64;
    s * (hfsq + big_r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
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
}

/// `e^x`, by fdlibm's method (error below 1 ulp): `x = k ln2 + r` with |r| <= ln2/2 (`r` kept
/// as `hi - lo` for precision), `e^r = 1 + r + r c / (2 - c)` with a degree-10 minimax
/// rational correction `c`, and the result scaled by `2^k` in at most two exact steps.
///
/// Every execution path's exponential: the unfused kernels call it, and generated code's
/// `lafuse_exp_v*` compute these operations in this order on every lane (each case computed,
/// then chosen; tested to the bit). Within 1 ulp of the C library's `exp` (tested over the
/// whole range).
#[inline]
pub fn exp(x: f64) -> f64 {
    use exp_consts::*;
    // Special lanes are computed on a clamped stand-in and replaced at the end.
    let xc = if x.is_nan() {
        0.0
    } else {
        x.clamp(CLAMP_LO, CLAMP_HI)
    };
    let hx = ((xc.to_bits() >> 32) & 0x7fff_ffff) as i64;
    let half = if xc < 0.0 { -0.5 } else { 0.5 };
    let k_round = (INV_LN2 * xc + half) as i64;
    let k_one = if xc < 0.0 { -1 } else { 1 };
    let k = if hx >= THREE_HALF_LN2_HIGH {
        k_round
    } else if hx > HALF_LN2_HIGH {
        k_one
    } else {
        0
    };
    let kf = k as f64;
    let hi = xc - kf * LN2_HI;
    let lo = kf * LN2_LO;
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * (P[0] + rr * (P[1] + rr * (P[2] + rr * (P[3] + rr * P[4]))));
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

/// The functions that have a four-lane form for slices: the unfused kernels map dense data
/// through it, at the speed of a vectorized C library, with results equal to the scalar
/// function's to the bit (the same operations in the same order on every lane; no fused
/// multiply-add, as in the scalar code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vectorized {
    Exp,
    Ln,
    Sigmoid,
}

impl Vectorized {
    /// The scalar function.
    #[inline]
    pub fn scalar(self, x: f64) -> f64 {
        match self {
            Vectorized::Exp => exp(x),
            Vectorized::Ln => ln(x),
            Vectorized::Sigmoid => sigmoid(x),
        }
    }

    /// `dst[i] = f(src[i])`.
    ///
    /// # Panics
    /// If the slices' lengths differ.
    pub fn map(self, src: &[f64], dst: &mut [f64]) {
        assert_eq!(
            src.len(),
            dst.len(),
            "Vectorized::map: slice lengths differ"
        );
        // SAFETY: both pointers are valid for `len` elements, and `src` and `dst` do not
        // overlap (a shared and a mutable borrow).
        unsafe { map_raw(self, src.as_ptr(), dst.as_mut_ptr(), src.len()) }
    }

    /// `buf[i] = f(buf[i])`.
    pub fn map_in_place(self, buf: &mut [f64]) {
        let p = buf.as_mut_ptr();
        // SAFETY: `p` is valid for `len` elements; each element is read before it is written,
        // through raw pointers only.
        unsafe { map_raw(self, p, p, buf.len()) }
    }
}

/// `dst[i] = f(src[i])` for `i < len`, through raw pointers (`src == dst` allowed): four lanes
/// at a time where the CPU has AVX2, the scalar function for the rest.
///
/// # Safety
/// `src` must be valid for `len` reads and `dst` for `len` writes; they are either equal or
/// do not overlap.
unsafe fn map_raw(f: Vectorized, src: *const f64, dst: *mut f64, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return avx2::map(f, src, dst, len);
    }
    for i in 0..len {
        *dst.add(i) = f.scalar(*src.add(i));
    }
}

/// [`exp`] and [`ln`] on four lanes with AVX2 intrinsics, operation for operation: every
/// branch of the scalar code is computed and the lane's case chosen with a blend, as the
/// generated code does.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::exp_consts as e;
    use super::ln_consts as l;
    use super::Vectorized;
    use std::arch::x86_64::*;

    /// See [`super::map_raw`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn map(f: Vectorized, src: *const f64, dst: *mut f64, len: usize) {
        let whole = len - len % 4;
        let mut i = 0;
        while i < whole {
            let x = _mm256_loadu_pd(src.add(i));
            let y = match f {
                Vectorized::Exp => exp4(x),
                Vectorized::Ln => ln4(x),
                Vectorized::Sigmoid => {
                    let neg = _mm256_xor_pd(x, splat(-0.0));
                    _mm256_div_pd(splat(1.0), _mm256_add_pd(splat(1.0), exp4(neg)))
                }
            };
            _mm256_storeu_pd(dst.add(i), y);
            i += 4;
        }
        for j in whole..len {
            *dst.add(j) = f.scalar(*src.add(j));
        }
    }

    #[inline(always)]
    unsafe fn splat(v: f64) -> __m256d {
        _mm256_set1_pd(v)
    }

    /// `mask ? yes : no` per lane.
    #[inline(always)]
    unsafe fn pick(mask: __m256d, yes: __m256d, no: __m256d) -> __m256d {
        _mm256_blendv_pd(no, yes, mask)
    }

    /// The smallest double whose high word is `high` (for non-negative doubles, the high
    /// word's order is the value's, so `high_word(|x|) >= h` is `|x| >= at_high(h)`).
    fn at_high(high: i64) -> f64 {
        f64::from_bits((high as u64) << 32)
    }

    /// [`super::exp`] on four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn exp4(x: __m256d) -> __m256d {
        let nan = _mm256_cmp_pd::<_CMP_UNORD_Q>(x, x);
        let lo_edge = splat(e::CLAMP_LO);
        let hi_edge = splat(e::CLAMP_HI);
        let xc = pick(
            _mm256_cmp_pd::<_CMP_LT_OQ>(x, lo_edge),
            lo_edge,
            pick(_mm256_cmp_pd::<_CMP_GT_OQ>(x, hi_edge), hi_edge, x),
        );
        let xc = pick(nan, splat(0.0), xc);
        let ax = _mm256_andnot_pd(splat(-0.0), xc);
        let big = _mm256_cmp_pd::<_CMP_GE_OQ>(ax, splat(at_high(e::THREE_HALF_LN2_HIGH)));
        let mid = _mm256_cmp_pd::<_CMP_GE_OQ>(ax, splat(at_high(e::HALF_LN2_HIGH + 1)));
        let tiny = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, splat(at_high(e::TINY_HIGH + 1)));
        let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(xc, splat(0.0));
        let half = pick(neg, splat(-0.5), splat(0.5));
        // `(INV_LN2 * xc + half) as i64`: |k| < 1100, so a 32-bit truncation is the same.
        let t = _mm256_add_pd(_mm256_mul_pd(splat(e::INV_LN2), xc), half);
        let k_round = _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(t));
        let k_one = pick(neg, splat(-1.0), splat(1.0));
        let kf = pick(big, k_round, pick(mid, k_one, splat(0.0)));
        let hi = _mm256_sub_pd(xc, _mm256_mul_pd(kf, splat(e::LN2_HI)));
        let lo = _mm256_mul_pd(kf, splat(e::LN2_LO));
        let r = _mm256_sub_pd(hi, lo);
        let rr = _mm256_mul_pd(r, r);
        let mut p = _mm256_add_pd(splat(e::P[3]), _mm256_mul_pd(rr, splat(e::P[4])));
        p = _mm256_add_pd(splat(e::P[2]), _mm256_mul_pd(rr, p));
        p = _mm256_add_pd(splat(e::P[1]), _mm256_mul_pd(rr, p));
        p = _mm256_add_pd(splat(e::P[0]), _mm256_mul_pd(rr, p));
        let c = _mm256_sub_pd(r, _mm256_mul_pd(rr, p));
        let q = _mm256_div_pd(_mm256_mul_pd(r, c), _mm256_sub_pd(splat(2.0), c));
        let y = _mm256_add_pd(splat(1.0), _mm256_add_pd(_mm256_sub_pd(q, lo), hi));
        let over = _mm256_cmp_pd::<_CMP_GT_OQ>(kf, splat(1023.0));
        let under = _mm256_cmp_pd::<_CMP_LT_OQ>(kf, splat(-1022.0));
        let pre = pick(
            over,
            splat(e::TWO_1023),
            pick(under, splat(e::TWO_M969), splat(1.0)),
        );
        let k2 = pick(
            over,
            _mm256_sub_pd(kf, splat(1023.0)),
            pick(under, _mm256_add_pd(kf, splat(969.0)), kf),
        );
        let k2 = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(k2));
        let biased = _mm256_add_epi64(k2, _mm256_set1_epi64x(0x3ff));
        let pow2 = _mm256_castsi256_pd(_mm256_slli_epi64::<52>(biased));
        let scaled = _mm256_mul_pd(_mm256_mul_pd(y, pre), pow2);
        let out = pick(tiny, _mm256_add_pd(splat(1.0), xc), scaled);
        let out = pick(
            _mm256_cmp_pd::<_CMP_LT_OQ>(x, splat(e::UNDERFLOW)),
            splat(0.0),
            out,
        );
        let out = pick(
            _mm256_cmp_pd::<_CMP_GT_OQ>(x, splat(e::OVERFLOW)),
            splat(f64::INFINITY),
            out,
        );
        pick(nan, x, out)
    }

    /// [`super::ln`] on four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn ln4(x: __m256d) -> __m256d {
        let valid = _mm256_and_pd(
            _mm256_cmp_pd::<_CMP_GT_OQ>(x, splat(0.0)),
            _mm256_cmp_pd::<_CMP_LT_OQ>(x, splat(f64::INFINITY)),
        );
        // Other lanes compute on a stand-in and take their special value at the end.
        let xv = pick(valid, x, splat(1.0));
        let sub = _mm256_cmp_pd::<_CMP_LT_OQ>(xv, splat(f64::MIN_POSITIVE));
        let xs = pick(sub, _mm256_mul_pd(xv, splat(l::TWO_54)), xv);
        let k0 = pick(sub, splat(-54.0), splat(0.0));
        let bits = _mm256_castpd_si256(xs);
        let hx = _mm256_add_epi64(
            _mm256_srli_epi64::<32>(bits),
            _mm256_set1_epi64x(l::HIGH_SHIFT),
        );
        // `k = (hx >> 20) - 0x3ff + k0` as a double: `hx >> 20` is a small non-negative
        // integer, turned into a double exactly through the bits of 2^52 + it.
        let two52 = splat(4_503_599_627_370_496.0);
        let e_bits = _mm256_or_si256(_mm256_srli_epi64::<20>(hx), _mm256_castpd_si256(two52));
        let exponent = _mm256_sub_pd(_mm256_castsi256_pd(e_bits), two52);
        let dk = _mm256_add_pd(_mm256_sub_pd(exponent, splat(1023.0)), k0);
        let mantissa_high = _mm256_add_epi64(
            _mm256_and_si256(hx, _mm256_set1_epi64x(0x000f_ffff)),
            _mm256_set1_epi64x(l::SQRT_HALF_HIGH),
        );
        let r = _mm256_castsi256_pd(_mm256_or_si256(
            _mm256_slli_epi64::<32>(mantissa_high),
            _mm256_and_si256(bits, _mm256_set1_epi64x(0xffff_ffff)),
        ));
        let f = _mm256_sub_pd(r, splat(1.0));
        let hfsq = _mm256_mul_pd(_mm256_mul_pd(splat(0.5), f), f);
        let s = _mm256_div_pd(f, _mm256_add_pd(splat(2.0), f));
        let z = _mm256_mul_pd(s, s);
        let w = _mm256_mul_pd(z, z);
        let lg = |i: usize| splat(l::LG[i]);
        let t1 = _mm256_mul_pd(
            w,
            _mm256_add_pd(
                lg(1),
                _mm256_mul_pd(w, _mm256_add_pd(lg(3), _mm256_mul_pd(w, lg(5)))),
            ),
        );
        let inner = _mm256_add_pd(lg(4), _mm256_mul_pd(w, lg(6)));
        let inner = _mm256_add_pd(lg(2), _mm256_mul_pd(w, inner));
        let t2 = _mm256_mul_pd(z, _mm256_add_pd(lg(0), _mm256_mul_pd(w, inner)));
        let big_r = _mm256_add_pd(t2, t1);
        let a = _mm256_mul_pd(s, _mm256_add_pd(hfsq, big_r));
        let a = _mm256_add_pd(a, _mm256_mul_pd(dk, splat(l::LN2_LO)));
        let a = _mm256_sub_pd(a, hfsq);
        let a = _mm256_add_pd(a, f);
        let out = _mm256_add_pd(a, _mm256_mul_pd(dk, splat(l::LN2_HI)));
        // NaN and +inf give themselves, zeros -inf, negatives NaN.
        let keeps = _mm256_or_pd(
            _mm256_cmp_pd::<_CMP_UNORD_Q>(x, x),
            _mm256_cmp_pd::<_CMP_EQ_OQ>(x, splat(f64::INFINITY)),
        );
        let zero = _mm256_cmp_pd::<_CMP_EQ_OQ>(x, splat(0.0));
        let special = pick(
            keeps,
            x,
            pick(zero, splat(f64::NEG_INFINITY), splat(f64::NAN)),
        );
        pick(valid, out, special)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn ln_is_within_one_ulp_of_the_c_library_everywhere() {
        // Random bit patterns over every positive exponent (subnormals included), values
        // near 1 where the result is tiny, and exact powers of two.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
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
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
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

    /// Doubles of every kind: random bit patterns (both signs, subnormals, NaN payloads,
    /// infinities), every reduction case of `exp`, values near 1 for `ln`, and the edges.
    fn every_kind_of_double() -> Vec<f64> {
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut xs: Vec<f64> = (0..40_000).map(|_| f64::from_bits(next())).collect();
        xs.extend(
            (0..40_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1500.0 - 750.0),
        );
        xs.extend((0..10_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0));
        xs.extend((0..10_000).map(|i| 1.0 + (i as f64 - 5000.0) * 1e-10));
        xs.extend((-1074..1024).map(|e| 2f64.powi(e)));
        xs.extend((-60..0).map(|e| -(2f64.powi(e))));
        xs.extend([
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            709.782712893383,
            709.8,
            -745.13,
            -745.2,
            0.34657359027997264,
            1.0397207708399179,
            -1.0397207708399179,
            1.0,
        ]);
        xs
    }

    #[test]
    fn slices_map_to_the_bit_of_the_scalar_functions() {
        let xs = every_kind_of_double();
        for f in [Vectorized::Exp, Vectorized::Ln, Vectorized::Sigmoid] {
            let mut out = vec![0.0; xs.len()];
            f.map(&xs, &mut out);
            let mut in_place = xs.clone();
            f.map_in_place(&mut in_place);
            for (i, &x) in xs.iter().enumerate() {
                let want = f.scalar(x);
                for (what, got) in [("map", out[i]), ("map_in_place", in_place[i])] {
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{f:?} {what}({x:e}) = {got:e}, scalar {want:e}"
                    );
                }
            }
            // Every length around the four-lane step, so the scalar tail is covered.
            for len in 0..11 {
                let mut out = vec![0.0; len];
                f.map(&xs[..len], &mut out);
                for (o, &x) in out.iter().zip(&xs[..len]) {
                    assert!(o.to_bits() == f.scalar(x).to_bits() || o.is_nan());
                }
            }
        }
        assert_eq!(sigmoid(0.0), 0.5);
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
