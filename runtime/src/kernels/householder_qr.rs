//! The QR decomposition of SystemDS's `qr`, hand-written after the algorithm of Apache Commons
//! Math 3's `QRDecomposition` (Householder reflections, column by column): SystemDS returns that
//! algorithm's Householder vectors `H` and its `R`, whose signs and scaling belong to the
//! algorithm (the sign of each reflection is opposite to the sign of the column's diagonal
//! entry; `H` holds each reflector divided by minus its diagonal entry of `R`), so a library's
//! QR (faer's blocked Householder form) cannot give them.
//!
//! The floating-point operations keep Commons Math's order, so the results are SystemDS's to the
//! last bits. Like SystemDS, nothing is checked: NaN and infinities go through the arithmetic,
//! and a zero column gives a zero diagonal entry of `R` and infinite or NaN entries of `H`.

/// `H` and `R` (both `m` x `n`, row-major) of the row-major `m` x `n` matrix `a`.
pub fn householder_qr(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(a.len(), m * n, "householder_qr: a holds m * n values");
    // Column-major working copy: `cols[c]` is column c (Commons Math's transposed `qrt`).
    let mut cols: Vec<Vec<f64>> = (0..n)
        .map(|c| (0..m).map(|r| a[r * n + c]).collect())
        .collect();
    let steps = m.min(n);
    let mut diag = vec![0.0; steps];
    for k in 0..steps {
        reflect(&mut cols, k, &mut diag);
    }
    let mut r = vec![0.0; m * n];
    for row in 0..steps {
        r[row * n + row] = diag[row];
        for col in row + 1..n {
            r[row * n + col] = cols[col][row];
        }
    }
    let mut h = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..(i + 1).min(n) {
            h[i * n + j] = cols[j][i] / -diag[j];
        }
    }
    (h, r)
}

/// The reflection of step `k`: column k below the diagonal becomes the reflector `v = x - a e`
/// (its diagonal entry of R, `a`, goes to `diag[k]`) and the columns right of it are reflected.
fn reflect(cols: &mut [Vec<f64>], k: usize, diag: &mut [f64]) {
    let (left, right) = cols.split_at_mut(k + 1);
    let v = &mut left[k];
    let mut norm_sq = 0.0;
    for &x in &v[k..] {
        norm_sq += x * x;
    }
    let a = if v[k] > 0.0 {
        -norm_sq.sqrt()
    } else {
        norm_sq.sqrt()
    };
    diag[k] = a;
    if a == 0.0 {
        return;
    }
    v[k] -= a;
    // |v|^2 = -2 a v[k], so the reflection of x subtracts (-<x, v> / (a v[k])) v.
    for x in right.iter_mut() {
        let mut alpha = 0.0;
        for (xr, vr) in x[k..].iter().zip(&v[k..]) {
            alpha -= xr * vr;
        }
        alpha /= a * v[k];
        for (xr, vr) in x[k..].iter_mut().zip(&v[k..]) {
            *xr -= alpha * vr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(h: &[f64], r: &[f64], m: usize, n: usize) -> Vec<f64> {
        // Q = (I - v1 v1'/..)(...) rebuilt from H: column j of H is v_j / -r_jj, and the
        // reflection is I - 2 v v' / |v|^2, which is invariant under scaling v.
        let mut q: Vec<f64> = (0..m * m)
            .map(|x| if x / m == x % m { 1.0 } else { 0.0 })
            .collect();
        for j in (0..m.min(n)).rev() {
            let v: Vec<f64> = (0..m)
                .map(|i| if i >= j { h[i * n + j] } else { 0.0 })
                .collect();
            let vv: f64 = v.iter().map(|x| x * x).sum();
            if vv == 0.0 {
                continue;
            }
            for c in 0..m {
                let d: f64 = (0..m).map(|i| v[i] * q[i * m + c]).sum();
                for i in 0..m {
                    q[i * m + c] -= 2.0 * d / vv * v[i];
                }
            }
        }
        (0..m * n)
            .map(|x| (0..m).map(|t| q[(x / n) * m + t] * r[t * n + x % n]).sum())
            .collect()
    }

    #[test]
    fn q_times_r_gives_back_the_matrix_for_tall_wide_and_square_inputs() {
        // Full-rank inputs (a rank-deficient one has a zero diagonal entry of R, where H is
        // NaN, as in SystemDS).
        let mut x = 7u64;
        let a: Vec<f64> = (0..12)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        for (m, n) in [(4, 3), (3, 4), (2, 6), (6, 2), (1, 1), (12, 1), (1, 12)] {
            let a = &a[..m * n];
            let (h, r) = householder_qr(a, m, n);
            let back = product(&h, &r, m, n);
            for (x, y) in back.iter().zip(a) {
                assert!((x - y).abs() < 1e-12, "{m}x{n}: {back:?}");
            }
            for i in 0..m {
                for j in 0..i.min(n) {
                    assert_eq!(r[i * n + j], 0.0, "{m}x{n}: R is upper triangular");
                }
            }
        }
    }

    #[test]
    fn signs_and_scaling_are_commons_maths() {
        // Values printed by SystemDS 3.4 for qr(matrix("4 1 2 1 3 0.5 2 0.5 5 1 1 1", 4, 3)).
        let a = [4.0, 1.0, 2.0, 1.0, 3.0, 0.5, 2.0, 0.5, 5.0, 1.0, 1.0, 1.0];
        let (h, r) = householder_qr(&a, 4, 3);
        let round = |v: &[f64]| -> Vec<f64> { v.iter().map(|x| (x * 1e3).round() / 1e3).collect() };
        assert_eq!(
            round(&r),
            [-4.690, -1.919, -4.157, 0.0, -2.751, 0.355, 0.0, 0.0, -3.583, 0.0, 0.0, 0.0]
        );
        assert_eq!(
            round(&h),
            [1.853, 0.0, 0.0, 0.213, 1.968, 0.0, 0.426, -0.062, 1.995, 0.213, 0.241, 0.101]
        );
        // A negative 1x1: the reflection's sign follows the entry's.
        assert_eq!(householder_qr(&[-2.0], 1, 1), (vec![2.0], vec![2.0]));
    }

    #[test]
    fn a_zero_column_gives_a_zero_diagonal_and_non_finite_reflector_entries() {
        let (h, r) = householder_qr(&[0.0, 1.0, 0.0, 2.0], 2, 2);
        assert_eq!(r[0], 0.0);
        assert!(h[0].is_nan(), "0 / -0 as in SystemDS: {h:?}");
        assert_eq!(householder_qr(&[], 0, 3), (vec![], vec![]));
    }
}
