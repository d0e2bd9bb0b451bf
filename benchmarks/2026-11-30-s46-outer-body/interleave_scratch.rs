//! Scratch program (session 46): can the dense Outer tile body run beside the multiply that
//! feeds it? A 4 x 24 register-blocked multiply (rank 100, panels in the L1 cache, one core)
//! over 200000 blocks; mode 0 the multiply alone, mode 1 each block's body (`x * log(d +
//! 1e-15)`, Kahan-summed, as `log_body_scratch.rs`) after its multiply, mode 2 the previous
//! block's twelve body vectors interleaved with this block's multiply-adds (one every eight
//! rank steps). Build and run: `rustc -O -C target-cpu=native interleave_scratch.rs &&
//! ./interleave_scratch` (`interleave_scratch.txt`).
use std::arch::x86_64::*;
use std::time::Instant;
const K: usize = 100;
const MR: usize = 4; // rows of a block
const NV: usize = 3; // zmm vectors of columns (24 columns)
const NB: usize = MR * NV; // accumulator vectors

#[inline(always)]
unsafe fn logv(d: __m512d) -> __m512d {
    let x = _mm512_add_pd(d, _mm512_set1_pd(1e-15));
    let bits = _mm512_castpd_si512(x);
    let hx = _mm512_srli_epi64(bits, 32);
    let t = _mm512_add_epi64(hx, _mm512_set1_epi64(0x95f64 - (0x3ff00000)));
    let k = _mm512_srli_epi64(t, 20);
    let kd = _mm512_sub_pd(_mm512_castsi512_pd(_mm512_or_si512(k, _mm512_set1_epi64(0x4330000000000000))), _mm512_set1_pd(4503599627371519.0));
    let hi = _mm512_and_si512(_mm512_slli_epi64(t, 32), _mm512_set1_epi64(0x000fffff00000000));
    let m = _mm512_ternarylogic_epi64(hi, bits, _mm512_set1_epi64(0xffffffff), 0xf8);
    let xm = _mm512_castsi512_pd(_mm512_add_epi64(m, _mm512_set1_epi64(0x3fe6a09e00000000)));
    let f = _mm512_add_pd(xm, _mm512_set1_pd(-1.0));
    let s = _mm512_div_pd(f, _mm512_add_pd(f, _mm512_set1_pd(2.0)));
    let hfsq = _mm512_mul_pd(_mm512_mul_pd(f, _mm512_set1_pd(0.5)), f);
    let z = _mm512_mul_pd(s, s);
    let w = _mm512_mul_pd(z, z);
    let c = |v: f64| _mm512_set1_pd(v);
    let t1 = _mm512_mul_pd(w, _mm512_add_pd(c(3.999999999940941908e-01), _mm512_mul_pd(w, _mm512_add_pd(c(2.222219843214978396e-01), _mm512_mul_pd(w, c(1.531383769920937332e-01))))));
    let t2 = _mm512_mul_pd(z, _mm512_add_pd(c(6.666666666666735130e-01), _mm512_mul_pd(w, _mm512_add_pd(c(2.857142874366239149e-01), _mm512_mul_pd(w, _mm512_add_pd(c(1.818357216161805012e-01), _mm512_mul_pd(w, c(1.479819860511658591e-01))))))));
    let r = _mm512_add_pd(t2, t1);
    let lo = _mm512_mul_pd(kd, c(1.90821492927058770002e-10));
    let hi2 = _mm512_mul_pd(kd, c(6.93147180369123816490e-01));
    let inner = _mm512_add_pd(_mm512_mul_pd(s, _mm512_add_pd(hfsq, r)), lo);
    _mm512_add_pd(_mm512_add_pd(_mm512_sub_pd(inner, hfsq), f), hi2)
}

#[inline(always)]
unsafe fn body(d: __m512d, x: *const f64, s: &mut __m512d, c: &mut __m512d) {
    let g = _mm512_mul_pd(logv(d), _mm512_loadu_pd(x));
    let y = _mm512_sub_pd(g, *c); let t = _mm512_add_pd(*s, y); *c = _mm512_sub_pd(_mm512_sub_pd(t, *s), y); *s = t;
}

/// Blocks of MR x 24 cells: mode 0 multiply only (results summed plainly), 1 multiply then body,
/// 2 multiply with the previous block's body interleaved (one body vector every K/NB k-steps).
#[target_feature(enable = "avx512f")]
unsafe fn run(mode: usize, u: &[f64], v: &[f64], x: &[f64], blocks: usize) -> f64 {
    let mut s = _mm512_setzero_pd(); let mut cc = _mm512_setzero_pd();
    let mut prev = [_mm512_setzero_pd(); NB];
    let mut plain = _mm512_setzero_pd();
    for b in 0..blocks {
        let ub = &u[(b % 8) * MR * K..];
        let mut acc = [_mm512_setzero_pd(); NB];
        let every = K / NB; // k-steps per interleaved body vector
        let step = |kk: usize, acc: &mut [__m512d; NB]| {
            let vk = v.as_ptr().add(kk * 8 * NV);
            let v0 = _mm512_loadu_pd(vk); let v1 = _mm512_loadu_pd(vk.add(8)); let v2 = _mm512_loadu_pd(vk.add(16));
            for r in 0..MR {
                let a = _mm512_set1_pd(*ub.get_unchecked(r * K + kk));
                acc[r * NV] = _mm512_fmadd_pd(a, v0, acc[r * NV]);
                acc[r * NV + 1] = _mm512_fmadd_pd(a, v1, acc[r * NV + 1]);
                acc[r * NV + 2] = _mm512_fmadd_pd(a, v2, acc[r * NV + 2]);
            }
        };
        if mode == 2 && b > 0 {
            for q in 0..NB {
                for kk in q * every..(q + 1) * every { step(kk, &mut acc); }
                body(prev[q], x.as_ptr().add(q * 8), &mut s, &mut cc);
            }
            for kk in NB * every..K { step(kk, &mut acc); }
        } else {
            for kk in 0..K { step(kk, &mut acc); }
        }
        match mode {
            0 => { for q in 0..NB { plain = _mm512_add_pd(plain, acc[q]); } }
            1 => { for q in 0..NB { body(acc[q], x.as_ptr().add(q * 8), &mut s, &mut cc); } }
            _ => { prev = acc; }
        }
    }
    if mode == 2 { for q in 0..NB { body(prev[q], x.as_ptr().add(q * 8), &mut s, &mut cc); } }
    _mm512_reduce_add_pd(s) + _mm512_reduce_add_pd(plain)
}

fn main() {
    let u: Vec<f64> = (0..8 * MR * K).map(|i| 0.01 + (i % 17) as f64 * 0.001).collect();
    let v: Vec<f64> = (0..K * 8 * NV).map(|i| 0.02 + (i % 13) as f64 * 0.001).collect();
    let x: Vec<f64> = (0..NB * 8).map(|i| 1.0 + (i % 5) as f64).collect();
    let blocks = 200_000;
    for _ in 0..3 { for mode in 0..3 {
        let t = Instant::now(); let r = unsafe { run(mode, &u, &v, &x, blocks) }; let e = t.elapsed().as_secs_f64();
        let flops = (blocks * MR * 8 * NV * K * 2) as f64;
        println!("mode {mode}: {:.1} ms, multiply {:.1} GFLOP/s equivalent ({r:.6e})", e * 1e3, flops / e / 1e9);
    }}
}
