//! Scratch program (session 47, from session 46's `log_body_scratch.rs`): the dense Outer
//! tile body's instruction mix, `x * log(d + 1e-15)` summed, on one core over 2048 cells in
//! the L1 cache: `base` as the LLVM tile entry computed it before 426526c (no fused
//! multiply-adds), `fma` with the fused multiply-adds of `lafuse_core::math::ln` since then
//! (no ordinary-lane check), `fma+fpclass` the same with a one-instruction lane check, and
//! `fma+fpclass-nokahan` without the compensated sum. Build and run: `rustc -O -C
//! target-cpu=native outer_body_fma_scratch.rs && ./outer_body_fma_scratch`
//! (`outer_body_fma_scratch.txt`; the last lines of `main` run the variants).
use std::arch::x86_64::*;
use std::time::Instant;
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
#[target_feature(enable = "avx512f")]
unsafe fn run(x: &[f64], tile: &[f64], reps: usize, kahan: bool, check: bool) -> f64 {
    let mut s = _mm512_setzero_pd(); let mut cc = _mm512_setzero_pd();
    let mut fallback = 0usize;
    for _ in 0..reps {
        let mut j = 0;
        while j < x.len() {
            let d = _mm512_loadu_pd(tile.as_ptr().add(j));
            if check {
                let a = _mm512_add_pd(d, _mm512_set1_pd(1e-15));
                let ok = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(a, _mm512_set1_pd(2.2250738585072014e-308)) & _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, _mm512_set1_pd(f64::INFINITY));
                if ok != 0xff { fallback += 1; }
            }
            let g = _mm512_mul_pd(logv(d), _mm512_loadu_pd(x.as_ptr().add(j)));
            if kahan {
                let y = _mm512_sub_pd(g, cc); let t = _mm512_add_pd(s, y); cc = _mm512_sub_pd(_mm512_sub_pd(t, s), y); s = t;
            } else { s = _mm512_add_pd(s, g); }
            j += 8;
        }
    }
    _mm512_reduce_add_pd(s) + fallback as f64
}

#[inline(always)]
unsafe fn logv_fma(d: __m512d) -> __m512d {
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
    let t1 = _mm512_mul_pd(w, _mm512_fmadd_pd(w, _mm512_fmadd_pd(w, c(1.531383769920937332e-01), c(2.222219843214978396e-01)), c(3.999999999940941908e-01)));
    let t2 = _mm512_mul_pd(z, _mm512_fmadd_pd(w, _mm512_fmadd_pd(w, _mm512_fmadd_pd(w, c(1.479819860511658591e-01), c(1.818357216161805012e-01)), c(2.857142874366239149e-01)), c(6.666666666666735130e-01)));
    let r = _mm512_add_pd(t2, t1);
    let inner = _mm512_fmadd_pd(s, _mm512_add_pd(hfsq, r), _mm512_mul_pd(kd, c(1.90821492927058770002e-10)));
    _mm512_fmadd_pd(kd, c(6.93147180369123816490e-01), _mm512_add_pd(_mm512_sub_pd(inner, hfsq), f))
}
#[target_feature(enable = "avx512f,avx512dq,fma")]
unsafe fn run2(x: &[f64], tile: &[f64], reps: usize, kahan: bool, fpc: bool) -> f64 {
    let mut s = _mm512_setzero_pd(); let mut cc = _mm512_setzero_pd();
    let mut fallback = 0usize;
    for _ in 0..reps {
        let mut j = 0;
        while j < x.len() {
            let d = _mm512_loadu_pd(tile.as_ptr().add(j));
            let a = _mm512_add_pd(d, _mm512_set1_pd(1e-15));
            if fpc {
                if _mm512_fpclass_pd_mask::<0xff>(a) != 0 { fallback += 1; }
            } else {
                let ok = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(a, _mm512_set1_pd(2.2250738585072014e-308)) & _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, _mm512_set1_pd(f64::INFINITY));
                if ok != 0xff { fallback += 1; }
            }
            let g = _mm512_mul_pd(logv_fma(d), _mm512_loadu_pd(x.as_ptr().add(j)));
            if kahan {
                let y = _mm512_sub_pd(g, cc); let t = _mm512_add_pd(s, y); cc = _mm512_sub_pd(_mm512_sub_pd(t, s), y); s = t;
            } else { s = _mm512_add_pd(s, g); }
            j += 8;
        }
    }
    _mm512_reduce_add_pd(s) + fallback as f64
}
fn main() {
    let n = 2048; let reps = 20000;
    let x: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64).collect();
    let tile: Vec<f64> = (0..n).map(|i| 20.0 + (i % 13) as f64).collect();
    for _ in 0..3 {
        for (name, kahan, check, f) in [("base", true, true, 0), ("fma", true, false, 1), ("fma+fpclass", true, true, 1), ("fma+fpclass-nokahan", false, true, 1)] {
            let t = Instant::now();
            let r = unsafe { if f == 0 { run(&x, &tile, reps, kahan, check) } else { run2(&x, &tile, reps, kahan, check) } };
            let e = t.elapsed().as_secs_f64();
            println!("{name}: {:.2} ns per vector ({r})", e * 1e9 / (reps * n / 8) as f64);
        }
    }
}
