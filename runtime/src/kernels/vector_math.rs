//! The runtime's `exp`, `ln`, `sigmoid` and `tanh` ([`crate::math`]) over slices, four lanes at a time
//! with AVX2 where the CPU has it: the unfused kernels map dense data through these, with
//! results equal to the scalar functions' to the bit. (Kept apart from `math.rs`, which the
//! compiler's constant folder compiles too and which holds the scalar functions only.)

use crate::math::{exp, ln, sigmoid, tanh};

/// The functions that have a four-lane form for slices: the unfused kernels map dense data
/// through it, at the speed of a vectorized C library, with results equal to the scalar
/// function's to the bit (the same operations in the same order on every lane; no fused
/// multiply-add, as in the scalar code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vectorized {
    Exp,
    Ln,
    Sigmoid,
    Tanh,
}

impl Vectorized {
    /// The scalar function.
    #[inline]
    pub(crate) fn scalar(self, x: f64) -> f64 {
        match self {
            Vectorized::Exp => exp(x),
            Vectorized::Ln => ln(x),
            Vectorized::Sigmoid => sigmoid(x),
            Vectorized::Tanh => tanh(x),
        }
    }

    /// `dst[i] = f(src[i])`.
    ///
    /// # Panics
    /// If the slices' lengths differ.
    pub(crate) fn map(self, src: &[f64], dst: &mut [f64]) {
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
    pub(crate) fn map_in_place(self, buf: &mut [f64]) {
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

/// [`exp`], [`ln`] and [`tanh`] on four lanes with AVX2 intrinsics, operation for operation: every
/// branch of the scalar code is computed and the lane's case chosen with a blend, as the
/// generated code does.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Vectorized;
    use crate::math::exp_consts as e;
    use crate::math::ln_consts as l;
    use crate::math::tanh_consts as th;
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
                Vectorized::Tanh => tanh4(x),
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

    /// [`crate::math::exp`] on four lanes.
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

    /// The powers `2^k` of lanes holding small integers `k` (as doubles).
    #[inline(always)]
    unsafe fn pow2(kf: __m256d) -> __m256d {
        let k = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(kf));
        let biased = _mm256_add_epi64(k, _mm256_set1_epi64x(0x3ff));
        _mm256_castsi256_pd(_mm256_slli_epi64::<52>(biased))
    }

    /// `e^u - 1` on four lanes of `u` in `[-2, 0]` or `[2, 44]`: the core's `expm1_for_tanh`
    /// operation for operation, every case computed and the lane's chosen.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn expm1_for_tanh4(u: __m256d) -> __m256d {
        let au = _mm256_andnot_pd(splat(-0.0), u);
        let big = _mm256_cmp_pd::<_CMP_GE_OQ>(au, splat(at_high(th::THREE_HALF_LN2_HIGH)));
        let mid = _mm256_cmp_pd::<_CMP_GE_OQ>(au, splat(at_high(th::HALF_LN2_HIGH + 1)));
        let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(u, splat(0.0));
        let half = pick(neg, splat(-0.5), splat(0.5));
        let t = _mm256_add_pd(_mm256_mul_pd(splat(th::INV_LN2), u), half);
        let k_round = _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(t));
        let k_one = pick(neg, splat(-1.0), splat(1.0));
        let kf = pick(big, k_round, pick(mid, k_one, splat(0.0)));
        let hi = _mm256_sub_pd(u, _mm256_mul_pd(kf, splat(th::LN2_HI)));
        let lo = _mm256_mul_pd(kf, splat(th::LN2_LO));
        let x = _mm256_sub_pd(hi, lo);
        let c = _mm256_sub_pd(_mm256_sub_pd(hi, x), lo);
        let hfx = _mm256_mul_pd(splat(0.5), x);
        let hxs = _mm256_mul_pd(x, hfx);
        let q = |i: usize| splat(th::Q[i]);
        let mut p = _mm256_add_pd(q(3), _mm256_mul_pd(hxs, q(4)));
        p = _mm256_add_pd(q(2), _mm256_mul_pd(hxs, p));
        p = _mm256_add_pd(q(1), _mm256_mul_pd(hxs, p));
        p = _mm256_add_pd(q(0), _mm256_mul_pd(hxs, p));
        let r1 = _mm256_add_pd(splat(1.0), _mm256_mul_pd(hxs, p));
        let t = _mm256_sub_pd(splat(3.0), _mm256_mul_pd(r1, hfx));
        let e = _mm256_mul_pd(
            hxs,
            _mm256_div_pd(
                _mm256_sub_pd(r1, t),
                _mm256_sub_pd(splat(6.0), _mm256_mul_pd(x, t)),
            ),
        );
        let k0 = _mm256_sub_pd(x, _mm256_sub_pd(_mm256_mul_pd(x, e), hxs));
        let e = _mm256_sub_pd(_mm256_mul_pd(x, _mm256_sub_pd(e, c)), c);
        let e = _mm256_sub_pd(e, hxs);
        let two_k = pow2(kf);
        let two_minus_k = pow2(_mm256_sub_pd(splat(0.0), kf));
        let e_minus_x = _mm256_sub_pd(e, x);
        let k_minus_one = _mm256_sub_pd(_mm256_mul_pd(splat(0.5), _mm256_sub_pd(x, e)), splat(0.5));
        let far = _mm256_sub_pd(
            _mm256_mul_pd(_mm256_sub_pd(splat(1.0), e_minus_x), two_k),
            splat(1.0),
        );
        let below_20 = _mm256_mul_pd(
            _mm256_sub_pd(_mm256_sub_pd(splat(1.0), two_minus_k), e_minus_x),
            two_k,
        );
        let from_20 = _mm256_mul_pd(
            _mm256_add_pd(_mm256_sub_pd(x, _mm256_add_pd(e, two_minus_k)), splat(1.0)),
            two_k,
        );
        let y = pick(
            _mm256_cmp_pd::<_CMP_LT_OQ>(kf, splat(20.0)),
            below_20,
            from_20,
        );
        let is_far = _mm256_or_pd(
            _mm256_cmp_pd::<_CMP_LE_OQ>(kf, splat(-2.0)),
            _mm256_cmp_pd::<_CMP_GT_OQ>(kf, splat(56.0)),
        );
        let y = pick(is_far, far, y);
        let y = pick(_mm256_cmp_pd::<_CMP_EQ_OQ>(kf, splat(-1.0)), k_minus_one, y);
        pick(_mm256_cmp_pd::<_CMP_EQ_OQ>(kf, splat(0.0)), k0, y)
    }

    /// [`crate::math::tanh`] on four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn tanh4(x: __m256d) -> __m256d {
        let sign = _mm256_and_pd(x, splat(-0.0));
        let a = _mm256_andnot_pd(splat(-0.0), x);
        // NaN and saturated lanes compute on a stand-in and are replaced at the end.
        let in_range = _mm256_cmp_pd::<_CMP_LT_OQ>(a, splat(th::SATURATED));
        let ac = pick(in_range, a, splat(1.0));
        let big = _mm256_cmp_pd::<_CMP_GE_OQ>(ac, splat(1.0));
        let u = pick(
            big,
            _mm256_mul_pd(splat(2.0), ac),
            _mm256_mul_pd(splat(-2.0), ac),
        );
        let t = expm1_for_tanh4(u);
        let numerator = pick(big, splat(2.0), _mm256_xor_pd(t, splat(-0.0)));
        let q = _mm256_div_pd(numerator, _mm256_add_pd(t, splat(2.0)));
        let z = pick(big, _mm256_sub_pd(splat(1.0), q), q);
        let z = pick(in_range, z, splat(1.0));
        let z = _mm256_or_pd(z, sign);
        let keep = _mm256_or_pd(
            _mm256_cmp_pd::<_CMP_LT_OQ>(a, splat(th::TINY)),
            _mm256_cmp_pd::<_CMP_UNORD_Q>(x, x),
        );
        pick(keep, x, z)
    }

    /// [`crate::math::ln`] on four lanes.
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

    /// Doubles of every kind: random bit patterns (both signs, subnormals, NaN payloads,
    /// infinities), every reduction case of `exp` and of `tanh`'s `e^u - 1`, values near 1
    /// for `ln`, and the edges.
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
        xs.extend((0..20_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 50.0 - 25.0));
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
        for f in [
            Vectorized::Exp,
            Vectorized::Ln,
            Vectorized::Sigmoid,
            Vectorized::Tanh,
        ] {
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
        assert_eq!(tanh(0.5).to_bits(), 0x3fdd_9353_d756_8af3);
    }
}
