use std::time::Instant;
fn rnd(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n).map(|_| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 11) as f64) / (1u64 << 53) as f64 }).collect()
}
/// C (m x n, strides rsc,csc) = A (m x k row-major) * B (k x n, strides rsb, csb)
fn mm_mmul(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], rsb: isize, csb: isize, c: &mut [f64], rsc: isize, csc: isize) {
    unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(), rsb, csb, 0.0, c.as_mut_ptr(), rsc, csc); }
}
fn mm_faer(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], rsb: isize, csb: isize, c: &mut [f64], rsc: isize, csc: isize, par: faer::Par) {
    use faer::{MatRef, MatMut, Accum};
    let a = unsafe { MatRef::from_raw_parts(a.as_ptr(), m, k, k as isize, 1) };
    let b = unsafe { MatRef::from_raw_parts(b.as_ptr(), k, n, rsb, csb) };
    let c = unsafe { MatMut::from_raw_parts_mut(c.as_mut_ptr(), m, n, rsc, csc) };
    faer::linalg::matmul::matmul(c, Accum::Replace, a, b, 1.0, par);
}
fn time<F: FnMut()>(mut f: F, reps: usize) -> f64 {
    f();
    let mut best = f64::MAX;
    for _ in 0..3 { let t = Instant::now(); for _ in 0..reps { f(); } best = best.min(t.elapsed().as_secs_f64() / reps as f64); }
    best * 1e3
}
fn main() {
    let shapes: &[(&str, usize, usize, usize, bool, bool)] = &[
        // name, m, k, n, b transposed (B given as n x k), c transposed (written column-major)
        ("X W1t -> t", 500, 100, 512, true, true),   // t(W1 %*% t(X)): W1 500x100, t(X)
        ("X W1t", 512, 100, 500, true, false),
        ("H W4t -> t", 100, 500, 512, true, true),
        ("H W4t", 512, 500, 100, true, false),
        ("D W4", 512, 100, 500, false, false),
        ("tD H", 100, 512, 500, false, false),
        ("XtX 1e4x100", 100, 10000, 100, false, false),
        ("X v 1e4x100xr20", 10000, 100, 20, false, false),
        ("UVt 2000x20x100", 2000, 20, 100, true, false),
        ("big 2000", 2000, 2000, 2000, false, false),
    ];
    let pool2 = faer::Par::rayon(2);
    for &(name, m, k, n, bt, ct) in shapes {
        let a = rnd(m * k, 1); let b = rnd(k * n, 2);
        let mut c = vec![0.0; m * n];
        let (rsb, csb) = if bt { (1, k as isize) } else { (n as isize, 1) };
        let (rsc, csc) = if ct { (1, m as isize) } else { (n as isize, 1) };
        let reps = (2e8 / (m * k * n) as f64).max(1.0) as usize;
        let fl = 2.0 * (m * k * n) as f64 / 1e6;
        let t1 = time(|| mm_mmul(m, k, n, &a, &b, rsb, csb, &mut c, rsc, csc), reps);
        let c1 = c.clone();
        let t2 = time(|| mm_faer(m, k, n, &a, &b, rsb, csb, &mut c, rsc, csc, pool2), reps);
        let t3 = time(|| mm_faer(m, k, n, &a, &b, rsb, csb, &mut c, rsc, csc, faer::Par::Seq), reps);
        let diff = c1.iter().zip(&c).map(|(x, y)| (x - y).abs() / x.abs().max(1e-300)).fold(0.0, f64::max);
        if ct {
            // swapped: C^T (n x m row-major) = B^T (n x k) * A^T (k x m)
            let mut c2 = vec![0.0; m * n];
            let (rsbt, csbt) = (csb, rsb); // B^T strides
            let t4 = time(|| unsafe { matrixmultiply::dgemm(n, k, m, 1.0, b.as_ptr(), rsbt, csbt, a.as_ptr(), 1, k as isize, 0.0, c2.as_mut_ptr(), m as isize, 1) }, reps);
            let same = c1.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits());
            println!("   swapped mmul {t4:8.3} ms ({:5.1} GF) bits-identical {same}", fl / t4);
        }
        println!("{name:18} mmul {t1:8.3} ms ({:5.1} GF)  faer2 {t2:8.3} ({:5.1})  faer1 {t3:8.3} ({:5.1})  reldiff {diff:.1e}", fl / t1, fl / t2, fl / t3);
    }
}
