use lafuse_runtime::kernels;
use lafuse_runtime::ops::{AggOp, BinaryOp, Direction, UnaryOp};
use lafuse_runtime::Matrix;
use std::time::Instant;

fn t<T>(name: &str, bytes: f64, mut f: impl FnMut() -> T) -> T {
    let mut best = f64::MAX;
    let mut r = None;
    for _ in 0..3 {
        let s = Instant::now();
        let x = f();
        best = best.min(s.elapsed().as_secs_f64());
        r = Some(x);
    }
    println!("{name:40} {:8.2} ms  {:6.2} GB/s", best * 1e3, bytes / best / 1e9);
    r.unwrap()
}

fn main() {
    let n = 100_000_000usize;
    let a = Matrix::from_dense_values(10_000, 10_000, (0..n).map(|i| (i % 1000) as f64 * 0.5 + 1.0).collect()).unwrap();
    let b = Matrix::from_dense_values(10_000, 10_000, (0..n).map(|i| (i % 777) as f64 + 2.0).collect()).unwrap();
    let av = a.to_dense().values;
    use rayon::prelude::*;
    t("baseline: par plain sum (read)", 8.0 * n as f64, || av.par_chunks(1 << 16).map(|c| c.iter().sum::<f64>()).sum::<f64>());
    t("baseline: par 8-lane sum (read)", 8.0 * n as f64, || av.par_chunks(1 << 16).map(|c| { let mut acc = [0.0f64; 8]; for ch in c.chunks_exact(8) { for l in 0..8 { acc[l] += ch[l]; } } acc.iter().sum::<f64>() }).sum::<f64>());
    let small = &av[..1 << 15];
    let s = Instant::now();
    let mut tot = 0.0;
    for _ in 0..1000 { tot += kernels::aggregate::kahan_sum(small, |x| x).sum; }
    println!("in-cache kahan: {:.2} Gcells/s ({tot})", 1000.0 * 32768.0 / s.elapsed().as_secs_f64() / 1e9);
    t("baseline: par copy into fresh vec HUGE", 16.0 * n as f64, || { let mut o = vec![0.0; n]; unsafe { let p = o.as_mut_ptr() as usize; let a = (p + (1<<21) - 1) & !((1<<21)-1); let e = (p + n*8) & !((1<<21)-1); if e > a { libc::madvise(a as *mut libc::c_void, e - a, libc::MADV_HUGEPAGE); } } o.par_chunks_mut(1<<16).zip(av.par_chunks(1<<16)).for_each(|(o, a)| o.copy_from_slice(a)); o });
    t("baseline: par copy into fresh vec", 16.0 * n as f64, || { let mut o = vec![0.0; n]; o.par_chunks_mut(1<<16).zip(av.par_chunks(1<<16)).for_each(|(o, a)| o.copy_from_slice(a)); o });
    let mut reuse = vec![1.0; n];
    t("baseline: par copy into reused vec", 16.0 * n as f64, || { reuse.par_chunks_mut(1<<16).zip(av.par_chunks(1<<16)).for_each(|(o, a)| o.copy_from_slice(a)); });
    let mut reuse = vec![1.0; n];
    let bv = b.to_dense().values;
    t("baseline: par add into reused vec", 24.0 * n as f64, || { reuse.par_chunks_mut(1<<16).zip(av.par_chunks(1<<16).zip(bv.par_chunks(1<<16))).for_each(|(o, (a, b))| for ((o, a), b) in o.iter_mut().zip(a).zip(b) { *o = a + b }); });
    t("binary add", 24.0 * n as f64, || kernels::binary(&a, &b, BinaryOp::Add).unwrap());
    let mut best = f64::MAX;
    for _ in 0..3 { let c = a.clone(); let s = Instant::now(); let r = kernels::binary_owned(c, &b, BinaryOp::Add).unwrap(); best = best.min(s.elapsed().as_secs_f64()); drop(r); }
    println!("{:40} {:8.2} ms  {:6.2} GB/s", "binary_owned add", best * 1e3, 24.0 * n as f64 / best / 1e9);
    t("binary mul", 24.0 * n as f64, || kernels::binary(&a, &b, BinaryOp::Mul).unwrap());
    t("binary_scalar mul", 16.0 * n as f64, || kernels::binary_scalar(&a, 2.0, BinaryOp::Mul, false).unwrap());
    t("unary exp", 16.0 * n as f64, || kernels::unary(&a, UnaryOp::Exp).unwrap());
    let Matrix::Dense(ad) = &a else { panic!() };
    t("8-lane plain over a", 8.0 * n as f64, || ad.values.par_chunks(1 << 15).map(|c| { let mut acc = [0.0f64; 8]; for ch in c.chunks_exact(8) { for l in 0..8 { acc[l] += ch[l]; } } acc.iter().sum::<f64>() }).sum::<f64>());
    t("kahan_sum blocks over a", 8.0 * n as f64, || ad.values.par_chunks(1 << 15).map(|c| kernels::aggregate::kahan_sum(c, |x| x).sum).collect::<Vec<_>>());
    t("kahan_sum blocks over av", 8.0 * n as f64, || av.par_chunks(1 << 15).map(|c| kernels::aggregate::kahan_sum(c, |x| x).sum).collect::<Vec<_>>());
    t("8-lane plain over av", 8.0 * n as f64, || av.par_chunks(1 << 15).map(|c| { let mut acc = [0.0f64; 8]; for ch in c.chunks_exact(8) { for l in 0..8 { acc[l] += ch[l]; } } acc.iter().sum::<f64>() }).sum::<f64>());
    t("sum full", 8.0 * n as f64, || kernels::aggregate(&a, AggOp::Sum, Direction::Full).unwrap());
    t("sumsq full", 8.0 * n as f64, || kernels::aggregate(&a, AggOp::SumSq, Direction::Full).unwrap());
    t("min full", 8.0 * n as f64, || kernels::aggregate(&a, AggOp::Min, Direction::Full).unwrap());
    t("rowSums", 8.0 * n as f64, || kernels::aggregate(&a, AggOp::Sum, Direction::Row).unwrap());
    t("colSums", 8.0 * n as f64, || kernels::aggregate(&a, AggOp::Sum, Direction::Col).unwrap());
    t("var full", 16.0 * n as f64, || kernels::aggregate(&a, AggOp::Var, Direction::Full).unwrap());
    let v = Matrix::from_dense_values(10_000, 1, vec![1.5; 10_000]).unwrap();
    t("matvec 10k x 10k", 8.0 * n as f64, || kernels::matmul(&a, &v).unwrap());
    t("transpose 10k", 16.0 * n as f64, || kernels::transpose(&a).unwrap());
    drop(b);
    let m = Matrix::from_dense_values(2000, 2000, (0..4_000_000).map(|i| (i % 13) as f64).collect()).unwrap();
    let s = Instant::now();
    let _ = kernels::matmul(&m, &m).unwrap();
    let e = s.elapsed().as_secs_f64();
    println!("dgemm 2000^3: {:.1} ms {:.1} GFLOPS", e * 1e3, 2.0 * 8e9 / e / 1e9);
    let x = Matrix::from_dense_values(100_000, 200, (0..20_000_000).map(|i| (i % 17) as f64).collect()).unwrap();
    let s = Instant::now();
    let _ = kernels::tsmm(&x).unwrap();
    let e = s.elapsed().as_secs_f64();
    println!("tsmm 100k x 200: {:.1} ms {:.1} GFLOPS(useful half)", e * 1e3, 100_000.0 * 200.0 * 200.0 / e / 1e9);
    let sp = Matrix::Sparse(kernels::binary_scalar(&x, 15.5, BinaryOp::Gt, false).unwrap().into_sparse());
    println!("sparse nnz {}", sp.nnz());
    t("sparse sum", 12.0 * sp.nnz() as f64, || kernels::aggregate(&sp, AggOp::Sum, Direction::Full).unwrap());
    t("sparse x dense-mul", 12.0 * sp.nnz() as f64, || kernels::binary(&sp, &x, BinaryOp::Mul).unwrap());
    let w = Matrix::from_dense_values(200, 10, vec![0.5; 2000]).unwrap();
    t("sparse %*% dense", 12.0 * sp.nnz() as f64, || kernels::matmul(&sp, &w).unwrap());
}
