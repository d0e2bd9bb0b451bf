//! The lane primitives of `bodies.rs` on AVX-512 (AVX-512F alone): eight doubles a vector,
//! masks as bits.

use std::arch::x86_64::*;

type V = __m512d;
type M = __mmask8;
type I = __m512i;
const LANES: usize = 8;

#[inline(always)]
unsafe fn splat(v: f64) -> V {
    _mm512_set1_pd(v)
}
#[inline(always)]
unsafe fn load(p: *const f64) -> V {
    _mm512_loadu_pd(p)
}
#[inline(always)]
unsafe fn store(p: *mut f64, v: V) {
    _mm512_storeu_pd(p, v)
}
#[inline(always)]
unsafe fn add(a: V, b: V) -> V {
    _mm512_add_pd(a, b)
}
#[inline(always)]
unsafe fn sub(a: V, b: V) -> V {
    _mm512_sub_pd(a, b)
}
#[inline(always)]
unsafe fn mul(a: V, b: V) -> V {
    _mm512_mul_pd(a, b)
}
#[inline(always)]
unsafe fn div(a: V, b: V) -> V {
    _mm512_div_pd(a, b)
}
/// `a * b + c`, rounded once.
#[inline(always)]
unsafe fn fma(a: V, b: V, c: V) -> V {
    _mm512_fmadd_pd(a, b, c)
}
/// `c - a * b`, rounded once.
#[inline(always)]
unsafe fn fnma(a: V, b: V, c: V) -> V {
    _mm512_fnmadd_pd(a, b, c)
}
#[inline(always)]
unsafe fn lt(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, b)
}
#[inline(always)]
unsafe fn le(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_LE_OQ>(a, b)
}
#[inline(always)]
unsafe fn gt(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_GT_OQ>(a, b)
}
#[inline(always)]
unsafe fn ge(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_GE_OQ>(a, b)
}
#[inline(always)]
unsafe fn eq(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(a, b)
}
/// Lanes where either operand is NaN.
#[inline(always)]
unsafe fn unord(a: V, b: V) -> M {
    _mm512_cmp_pd_mask::<_CMP_UNORD_Q>(a, b)
}
#[inline(always)]
unsafe fn both(a: M, b: M) -> M {
    a & b
}
#[inline(always)]
unsafe fn either(a: M, b: M) -> M {
    a | b
}
/// `mask ? yes : no` per lane.
#[inline(always)]
unsafe fn pick(mask: M, yes: V, no: V) -> V {
    _mm512_mask_blend_pd(mask, no, yes)
}
/// Whether every lane of `mask` is set.
#[inline(always)]
unsafe fn all(mask: M) -> bool {
    mask == 0xff
}
/// `|x|`: the sign bit cleared.
#[inline(always)]
unsafe fn abs(x: V) -> V {
    float(iand(bits(x), i64::MAX))
}
/// `-x`: the sign bit flipped.
#[inline(always)]
unsafe fn neg(x: V) -> V {
    float(_mm512_xor_si512(bits(x), _mm512_set1_epi64(i64::MIN)))
}
/// The sign bit of each lane alone.
#[inline(always)]
unsafe fn sign_of(x: V) -> V {
    float(iand(bits(x), i64::MIN))
}
/// `z` with the sign bits of `sign` set.
#[inline(always)]
unsafe fn with_sign(z: V, sign: V) -> V {
    float(ior(bits(z), bits(sign)))
}
/// Each lane truncated toward zero, as a double (|x| < 2^31).
#[inline(always)]
unsafe fn trunc_int(x: V) -> V {
    _mm512_cvtepi32_pd(_mm512_cvttpd_epi32(x))
}
/// `2^k` for lanes holding integers `k` in the normal exponent range.
#[inline(always)]
unsafe fn pow2(k: V) -> V {
    let k = _mm512_cvtepi32_epi64(_mm512_cvttpd_epi32(k));
    let biased = _mm512_add_epi64(k, _mm512_set1_epi64(0x3ff));
    _mm512_castsi512_pd(_mm512_slli_epi64::<52>(biased))
}
#[inline(always)]
unsafe fn bits(x: V) -> I {
    _mm512_castpd_si512(x)
}
#[inline(always)]
unsafe fn float(i: I) -> V {
    _mm512_castsi512_pd(i)
}
#[inline(always)]
unsafe fn iadd(i: I, c: i64) -> I {
    _mm512_add_epi64(i, _mm512_set1_epi64(c))
}
#[inline(always)]
unsafe fn iand(i: I, c: i64) -> I {
    _mm512_and_si512(i, _mm512_set1_epi64(c))
}
#[inline(always)]
unsafe fn ior(a: I, b: I) -> I {
    _mm512_or_si512(a, b)
}
#[inline(always)]
unsafe fn srl32(i: I) -> I {
    _mm512_srli_epi64::<32>(i)
}
#[inline(always)]
unsafe fn srl20(i: I) -> I {
    _mm512_srli_epi64::<20>(i)
}
#[inline(always)]
unsafe fn sll32(i: I) -> I {
    _mm512_slli_epi64::<32>(i)
}

vector_math_bodies!("avx512f");
