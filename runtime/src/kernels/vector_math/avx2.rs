//! The lane primitives of `bodies.rs` on AVX2: four doubles a vector, masks as vectors of
//! all-ones or all-zeros lanes.

use std::arch::x86_64::*;

type V = __m256d;
type M = __m256d;
type I = __m256i;
const LANES: usize = 4;

#[inline(always)]
unsafe fn splat(v: f64) -> V {
    _mm256_set1_pd(v)
}
#[inline(always)]
unsafe fn load(p: *const f64) -> V {
    _mm256_loadu_pd(p)
}
#[inline(always)]
unsafe fn store(p: *mut f64, v: V) {
    _mm256_storeu_pd(p, v)
}
#[inline(always)]
unsafe fn add(a: V, b: V) -> V {
    _mm256_add_pd(a, b)
}
#[inline(always)]
unsafe fn sub(a: V, b: V) -> V {
    _mm256_sub_pd(a, b)
}
#[inline(always)]
unsafe fn mul(a: V, b: V) -> V {
    _mm256_mul_pd(a, b)
}
#[inline(always)]
unsafe fn div(a: V, b: V) -> V {
    _mm256_div_pd(a, b)
}
#[inline(always)]
unsafe fn lt(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_LT_OQ>(a, b)
}
#[inline(always)]
unsafe fn le(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_LE_OQ>(a, b)
}
#[inline(always)]
unsafe fn gt(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_GT_OQ>(a, b)
}
#[inline(always)]
unsafe fn ge(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_GE_OQ>(a, b)
}
#[inline(always)]
unsafe fn eq(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_EQ_OQ>(a, b)
}
/// Lanes where either operand is NaN.
#[inline(always)]
unsafe fn unord(a: V, b: V) -> M {
    _mm256_cmp_pd::<_CMP_UNORD_Q>(a, b)
}
#[inline(always)]
unsafe fn both(a: M, b: M) -> M {
    _mm256_and_pd(a, b)
}
#[inline(always)]
unsafe fn either(a: M, b: M) -> M {
    _mm256_or_pd(a, b)
}
/// `mask ? yes : no` per lane.
#[inline(always)]
unsafe fn pick(mask: M, yes: V, no: V) -> V {
    _mm256_blendv_pd(no, yes, mask)
}
/// Whether every lane of `mask` is set.
#[inline(always)]
unsafe fn all(mask: M) -> bool {
    _mm256_movemask_pd(mask) == 0b1111
}
/// `|x|`: the sign bit cleared.
#[inline(always)]
unsafe fn abs(x: V) -> V {
    _mm256_andnot_pd(splat(-0.0), x)
}
/// `-x`: the sign bit flipped.
#[inline(always)]
unsafe fn neg(x: V) -> V {
    _mm256_xor_pd(x, splat(-0.0))
}
/// The sign bit of each lane alone.
#[inline(always)]
unsafe fn sign_of(x: V) -> V {
    _mm256_and_pd(x, splat(-0.0))
}
/// `z` with the sign bits of `sign` set.
#[inline(always)]
unsafe fn with_sign(z: V, sign: V) -> V {
    _mm256_or_pd(z, sign)
}
/// Each lane truncated toward zero, as a double (|x| < 2^31).
#[inline(always)]
unsafe fn trunc_int(x: V) -> V {
    _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(x))
}
/// `2^k` for lanes holding integers `k` in the normal exponent range.
#[inline(always)]
unsafe fn pow2(k: V) -> V {
    let k = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(k));
    let biased = _mm256_add_epi64(k, _mm256_set1_epi64x(0x3ff));
    _mm256_castsi256_pd(_mm256_slli_epi64::<52>(biased))
}
#[inline(always)]
unsafe fn bits(x: V) -> I {
    _mm256_castpd_si256(x)
}
#[inline(always)]
unsafe fn float(i: I) -> V {
    _mm256_castsi256_pd(i)
}
#[inline(always)]
unsafe fn iadd(i: I, c: i64) -> I {
    _mm256_add_epi64(i, _mm256_set1_epi64x(c))
}
#[inline(always)]
unsafe fn iand(i: I, c: i64) -> I {
    _mm256_and_si256(i, _mm256_set1_epi64x(c))
}
#[inline(always)]
unsafe fn ior(a: I, b: I) -> I {
    _mm256_or_si256(a, b)
}
#[inline(always)]
unsafe fn srl32(i: I) -> I {
    _mm256_srli_epi64::<32>(i)
}
#[inline(always)]
unsafe fn srl20(i: I) -> I {
    _mm256_srli_epi64::<20>(i)
}
#[inline(always)]
unsafe fn sll32(i: I) -> I {
    _mm256_slli_epi64::<32>(i)
}

vector_math_bodies!("avx2");
