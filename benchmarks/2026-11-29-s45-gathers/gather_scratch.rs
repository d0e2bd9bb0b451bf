//! Scratch program behind `lafuse_runtime::kernels::gather` (session 45): a walk over a CSR
//! 1e4 x 1000 `X` (one non-zero in `PER` cells) summing `x * y` and `x * z` for two dense
//! 1e4 x 1000 matrices `Y`, `Z` read at `X`'s non-zeros, one core, caches flushed before each
//! timing. Mode 0 walks the rows; modes 1-3 walk chunks of 4, 8 or 16 rows and, before each,
//! prefetch the next chunk's gathered lines with `HINT` (`T1`: into the L2; `T0`: the L1).
//! Build and run: `rustc -O -C target-cpu=native gather_scratch.rs && ./gather_scratch 100`
//! (sparsity 0.01; 10 for 0.1). Edit HINT to compare the hints.
use std::arch::x86_64::*;
use std::time::Instant;

const HINT: i32 = _MM_HINT_T1;

fn main() {
    let (rows, cols) = (10_000usize, 1000usize);
    let per: u64 = std::env::args().nth(1).map_or(100, |s| s.parse().unwrap());
    let (mut idx, mut vals, mut rp, mut seed) = (Vec::new(), Vec::new(), vec![0usize], 7u64);
    for _ in 0..rows {
        for c in 0..cols as u32 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (seed >> 33) % per == 0 {
                idx.push(c);
                vals.push(1.0 + c as f64 * 1e-3);
            }
        }
        rp.push(idx.len());
    }
    let y: Vec<f64> = (0..rows * cols).map(|k| (k % 97) as f64).collect();
    let z: Vec<f64> = (0..rows * cols).map(|k| (k % 89) as f64).collect();
    let flush: Vec<f64> = vec![1.0; 64 << 20];
    for mode in 0..4 {
        for _ in 0..4 {
            let fl: f64 = flush.iter().step_by(8).sum();
            let t = Instant::now();
            let (mut s1, mut s2) = (0.0, 0.0);
            let chunk = [8usize, 4, 8, 16][mode];
            let ahead = if mode == 0 { 0 } else { chunk };
            let mut r = 0;
            while r < rows {
                let e = (r + chunk).min(rows);
                if ahead > 0 {
                    for i in (r + ahead).min(rows)..(e + ahead).min(rows) {
                        for p in rp[i]..rp[i + 1] {
                            let at = i * cols + idx[p] as usize;
                            unsafe {
                                _mm_prefetch::<HINT>(y.as_ptr().add(at) as *const i8);
                                _mm_prefetch::<HINT>(z.as_ptr().add(at) as *const i8);
                            }
                        }
                    }
                }
                for i in r..e {
                    for p in rp[i]..rp[i + 1] {
                        let at = i * cols + idx[p] as usize;
                        s1 += vals[p] * y[at];
                        s2 += vals[p] * z[at];
                    }
                }
                r = e;
            }
            let el = t.elapsed();
            let ns = el.as_nanos() as f64 / idx.len() as f64;
            println!("mode {mode} chunk {chunk} ahead {ahead} {el:?} {ns:.2} ns a non-zero ({s1} {s2} {})", fl > 0.0);
        }
    }
}
