//! The lane primitives of `bodies.rs` on AVX2: eight doubles a vector, held as two 4-lane
//! registers that every primitive applies to in turn, masks as vectors of all-ones or
//! all-zeros lanes.
//!
//! Why two registers: each body is one long dependency chain (`tanh`: about 120 cycles on
//! Zen 3, through `e^u - 1`'s division and its own), so a loop over it runs at as many
//! instructions a cycle as the out-of-order window holds over the chain's latency, about
//! two, whatever its resource bound (`llvm-mca -mcpu=znver3`: 69 cycles an iteration of
//! four lanes against a bound of 23). Unrolling the 4-lane loop changed nothing (measured).
//! Eight lanes a step share each constant's broadcast and spill less, so the window holds
//! more lanes: 12-16 % faster on `exp`, `log` and `tanh` over 1e6 cells. Each lane still
//! sees the same operations in the same order, so results do not change.

use std::arch::x86_64::*;

/// Eight doubles: lanes 0-3 in `.0`, 4-7 in `.1`.
#[derive(Clone, Copy)]
struct V(__m256d, __m256d);
type M = V;
/// Eight doubles' bits.
#[derive(Clone, Copy)]
struct I(__m256i, __m256i);
const LANES: usize = 8;

/// A primitive applied to both halves: `$body` once over each half of the operands.
macro_rules! paired {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $t:ident),+) -> $tr:ident = $body:expr) => {
        $(#[$doc])*
        #[inline(always)]
        unsafe fn $name($($arg: $t),+) -> $tr {
            $tr({ $(let $arg = $arg.0;)+ $body }, { $(let $arg = $arg.1;)+ $body })
        }
    };
}

#[inline(always)]
unsafe fn splat(v: f64) -> V {
    let h = _mm256_set1_pd(v);
    V(h, h)
}
#[inline(always)]
unsafe fn load(p: *const f64) -> V {
    V(_mm256_loadu_pd(p), _mm256_loadu_pd(p.add(4)))
}
#[inline(always)]
unsafe fn store(p: *mut f64, v: V) {
    _mm256_storeu_pd(p, v.0);
    _mm256_storeu_pd(p.add(4), v.1);
}
paired!(add(a: V, b: V) -> V = _mm256_add_pd(a, b));
paired!(sub(a: V, b: V) -> V = _mm256_sub_pd(a, b));
paired!(mul(a: V, b: V) -> V = _mm256_mul_pd(a, b));
paired!(div(a: V, b: V) -> V = _mm256_div_pd(a, b));
paired!(
    /// `a * b + c`, rounded once.
    fma(a: V, b: V, c: V) -> V = _mm256_fmadd_pd(a, b, c)
);
paired!(
    /// `c - a * b`, rounded once.
    fnma(a: V, b: V, c: V) -> V = _mm256_fnmadd_pd(a, b, c)
);
paired!(lt(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_LT_OQ>(a, b));
paired!(le(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_LE_OQ>(a, b));
paired!(gt(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_GT_OQ>(a, b));
paired!(ge(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_GE_OQ>(a, b));
paired!(eq(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_EQ_OQ>(a, b));
paired!(
    /// Lanes where either operand is NaN.
    unord(a: V, b: V) -> V = _mm256_cmp_pd::<_CMP_UNORD_Q>(a, b)
);
paired!(both(a: M, b: M) -> V = _mm256_and_pd(a, b));
paired!(either(a: M, b: M) -> V = _mm256_or_pd(a, b));
/// `mask ? yes : no` per lane.
#[inline(always)]
unsafe fn pick(mask: M, yes: V, no: V) -> V {
    V(
        _mm256_blendv_pd(no.0, yes.0, mask.0),
        _mm256_blendv_pd(no.1, yes.1, mask.1),
    )
}
/// Whether every lane of `mask` is set.
#[inline(always)]
unsafe fn all(mask: M) -> bool {
    _mm256_movemask_pd(_mm256_and_pd(mask.0, mask.1)) == 0b1111
}
paired!(
    /// `|x|`: the sign bit cleared.
    abs(x: V) -> V = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
);
paired!(
    /// `-x`: the sign bit flipped.
    neg(x: V) -> V = _mm256_xor_pd(x, _mm256_set1_pd(-0.0))
);
paired!(
    /// The sign bit of each lane alone.
    sign_of(x: V) -> V = _mm256_and_pd(x, _mm256_set1_pd(-0.0))
);
paired!(
    /// `z` with the sign bits of `sign` set.
    with_sign(z: V, sign: V) -> V = _mm256_or_pd(z, sign)
);
paired!(
    /// Each lane truncated toward zero, as a double (|x| < 2^31).
    trunc_int(x: V) -> V = _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(x))
);
paired!(
    /// `2^k` for lanes holding integers `k` in the normal exponent range.
    pow2(k: V) -> V = {
        let k = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(k));
        let biased = _mm256_add_epi64(k, _mm256_set1_epi64x(0x3ff));
        _mm256_castsi256_pd(_mm256_slli_epi64::<52>(biased))
    }
);
paired!(bits(x: V) -> I = _mm256_castpd_si256(x));
paired!(float(i: I) -> V = _mm256_castsi256_pd(i));
#[inline(always)]
unsafe fn iadd(i: I, c: i64) -> I {
    let c = _mm256_set1_epi64x(c);
    I(_mm256_add_epi64(i.0, c), _mm256_add_epi64(i.1, c))
}
#[inline(always)]
unsafe fn iand(i: I, c: i64) -> I {
    let c = _mm256_set1_epi64x(c);
    I(_mm256_and_si256(i.0, c), _mm256_and_si256(i.1, c))
}
paired!(ior(a: I, b: I) -> I = _mm256_or_si256(a, b));
paired!(srl32(i: I) -> I = _mm256_srli_epi64::<32>(i));
paired!(srl20(i: I) -> I = _mm256_srli_epi64::<20>(i));
paired!(sll32(i: I) -> I = _mm256_slli_epi64::<32>(i));

vector_math_bodies!("avx2,fma");
