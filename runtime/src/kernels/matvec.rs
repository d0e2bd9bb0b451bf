//! Dot products of rows with a vector (`X %*% v`), four rows at a time, in a fixed summation
//! order that no instruction set changes: eight lanes a row, combined in one order, then the
//! tail. An add waits about four cycles for the previous one into the same accumulator, so the
//! loop keeps eight or more independent sums (four rows' lanes) to run at the rate the core
//! can add.

/// The lanes of a dot product: independent running sums, combined in one fixed order.
const LANES: usize = 8;

/// Dot product with 8 independent lanes (vectorises; fixed combination order).
#[inline]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    const L: usize = LANES;
    let mut acc = [0.0f64; L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (p, q) in xc.zip(yc) {
        for l in 0..L {
            acc[l] += p[l] * q[l];
        }
    }
    let mut s = combine(acc);
    for (p, q) in xr.iter().zip(yr) {
        s += p * q;
    }
    s
}

/// A dot product's eight lanes summed in [`dot`]'s order.
#[inline(always)]
fn combine(l: [f64; 8]) -> f64 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// [`dot`] of four rows with one vector at once: each row's sum is formed exactly as `dot`
/// forms it (eight lanes, combined as `dot` combines them, then the tail), but the four rows'
/// independent accumulators let one row's adds proceed while another's wait for their
/// previous add (one row alone is bound by the add's latency). Written with intrinsics:
/// LLVM's vectoriser turned the portable form into vectors across the four rows, with a
/// shuffle per value. Every row is `y.len()` long.
pub(crate) fn dot4(rows: [&[f64]; 4], y: &[f64]) -> [f64; 4] {
    let n = y.len();
    assert!(rows.iter().all(|r| r.len() == n), "dot4: rows as long as y");
    #[cfg(target_arch = "x86_64")]
    {
        // The columns the vector loops cover: whole chunks of eight lanes.
        let whole = n - n % LANES;
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above); every row and `y` hold
            // `whole` values, a multiple of eight.
            return unsafe { dot4_avx512(rows, y, whole) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above); lengths as for AVX-512.
            return unsafe { dot4_avx2(rows, y, whole) };
        }
    }
    rows.map(|r| dot(r, y))
}

/// The tails of [`dot4`]'s rows after the whole chunks of eight: `dot`'s serial adds.
#[inline(always)]
fn finish(rows: [&[f64]; 4], y: &[f64], lanes: [[f64; 8]; 4], whole: usize) -> [f64; 4] {
    let mut out = [0.0; 4];
    for ((o, l), row) in out.iter_mut().zip(lanes).zip(rows) {
        let mut s = combine(l);
        for j in whole..y.len() {
            s += row[j] * y[j];
        }
        *o = s;
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot4_avx512(rows: [&[f64]; 4], y: &[f64], whole: usize) -> [f64; 4] {
    use std::arch::x86_64::*;
    const L: usize = LANES;
    let mut acc = [_mm512_setzero_pd(); 4];
    let mut c = 0;
    while c < whole {
        // SAFETY: `c + L <= whole`, which every row and `y` hold (`dot4`).
        let q = _mm512_loadu_pd(y.as_ptr().add(c));
        for (a, row) in acc.iter_mut().zip(rows) {
            let p = _mm512_loadu_pd(row.as_ptr().add(c));
            *a = _mm512_add_pd(*a, _mm512_mul_pd(p, q));
        }
        c += L;
    }
    let mut lanes = [[0.0f64; L]; 4];
    for (l, a) in lanes.iter_mut().zip(acc) {
        // SAFETY: `l` holds the eight lanes.
        _mm512_storeu_pd(l.as_mut_ptr(), a);
    }
    finish(rows, y, lanes, whole)
}

/// [`dot4_avx512`] in two four-lane halves: lanes 0-3 and 4-7 of each row accumulate apart,
/// eight independent sums in all, with a multiply then an add (never fused) as `dot` forms them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot4_avx2(rows: [&[f64]; 4], y: &[f64], whole: usize) -> [f64; 4] {
    use std::arch::x86_64::*;
    const L: usize = LANES;
    let mut low = [_mm256_setzero_pd(); 4];
    let mut high = [_mm256_setzero_pd(); 4];
    let mut c = 0;
    while c < whole {
        // SAFETY: `c + L <= whole`, which every row and `y` hold (`dot4`).
        let (ql, qh) = (
            _mm256_loadu_pd(y.as_ptr().add(c)),
            _mm256_loadu_pd(y.as_ptr().add(c + 4)),
        );
        for r in 0..4 {
            let p = rows[r].as_ptr().add(c);
            low[r] = _mm256_add_pd(low[r], _mm256_mul_pd(_mm256_loadu_pd(p), ql));
            high[r] = _mm256_add_pd(high[r], _mm256_mul_pd(_mm256_loadu_pd(p.add(4)), qh));
        }
        c += L;
    }
    let mut lanes = [[0.0f64; L]; 4];
    for (r, l) in lanes.iter_mut().enumerate() {
        // SAFETY: `l` holds the eight lanes, four from each half.
        _mm256_storeu_pd(l.as_mut_ptr(), low[r]);
        _mm256_storeu_pd(l.as_mut_ptr().add(4), high[r]);
    }
    finish(rows, y, lanes, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with NaN, infinities, signed zeros and subnormals among ordinary ones.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                match (i * 7 + seed as usize) % 41 {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => -0.0,
                    3 => 5e-324,
                    4 => f64::NEG_INFINITY,
                    _ => u * 1e3,
                }
            })
            .collect()
    }

    /// The same bits, or both NaN (which NaN an add of two NaNs keeps depends on its operands'
    /// order, which the compiler may swap).
    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn four_rows_at_once_are_four_dot_products_to_the_bit() {
        for n in [0, 1, 7, 8, 9, 16, 23, 100] {
            let rows: Vec<Vec<f64>> = (0..4).map(|r| values(n, 11 + r)).collect();
            let y = values(n, 5);
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &y);
            for (r, g) in got.iter().enumerate() {
                let want = dot(&rows[r], &y);
                assert!(same(*g, want), "row {r} of length {n}: {g} vs {want}");
            }
        }
    }
}
