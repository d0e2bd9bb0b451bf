//! The eigendecomposition of a symmetric matrix, hand-written after the algorithm of Apache
//! Commons Math 3's `EigenDecomposition` (Householder reduction to tridiagonal form, then the
//! implicit QL iteration): SystemDS's `eigen` returns that algorithm's eigenvectors, whose
//! signs (and, for a repeated eigenvalue, whose basis of the eigenspace) no rule but the
//! algorithm itself defines, so faer's decomposition cannot give them.
//!
//! The steps keep Commons Math's order of floating-point operations, so that the vectors come
//! out as SystemDS's to the last bits, not only up to sign.

/// Commons Math's `Precision.EPSILON`: 2^-53, half of `f64::EPSILON`.
pub const COMMONS_EPSILON: f64 = f64::EPSILON / 2.0;

/// Commons Math's limit on QL iterations per eigenvalue.
const MAX_ITERATIONS: u32 = 30;

/// The QL iteration needed more than 30 steps for one eigenvalue (Commons Math's
/// `MaxCountExceededException`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotConverged;

/// The eigenvalues of the symmetric `n` x `n` matrix `a` (row-major; only its upper triangle
/// is read, as in Commons Math) in descending order, and the row-major `n` x `n` matrix whose
/// column `j` is the eigenvector of value `j`.
pub fn symmetric_eigen(a: &[f64], n: usize) -> Result<(Vec<f64>, Vec<f64>), NotConverged> {
    assert_eq!(a.len(), n * n, "symmetric_eigen: a holds n * n values");
    if n == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut h = a.to_vec();
    let (main, secondary) = tridiagonalize(&mut h, n);
    let mut z = householder_product(&h, &secondary, n);
    let values = implicit_ql(main, &secondary, &mut z, n)?;
    Ok((values, z))
}

/// Reduces `h` to tridiagonal form in place by Householder reflections applied from both
/// sides; returns the main and secondary diagonals. Row `k` of `h` keeps the vector of the
/// `k`-th reflection (its entries right of the diagonal).
fn tridiagonalize(h: &mut [f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut main = vec![0.0; n];
    let mut secondary = vec![0.0; n - 1];
    let mut z = vec![0.0; n];
    for k in 0..n - 1 {
        let row = k * n;
        main[k] = h[row + k];
        let mut norm_sqr = 0.0;
        for j in k + 1..n {
            norm_sqr += h[row + j] * h[row + j];
        }
        // The sign opposite to the first entry avoids cancellation in `v = x - a e1`.
        let a = if h[row + k + 1] > 0.0 {
            -norm_sqr.sqrt()
        } else {
            norm_sqr.sqrt()
        };
        secondary[k] = a;
        if a == 0.0 {
            continue;
        }
        h[row + k + 1] -= a;
        let beta = -1.0 / (a * h[row + k + 1]);
        // z = beta A v, reading only the upper triangle of the trailing block.
        z[k + 1..n].fill(0.0);
        for i in k + 1..n {
            let h_ki = h[row + i];
            let mut z_i = h[i * n + i] * h_ki;
            for j in i + 1..n {
                let h_ij = h[i * n + j];
                z_i += h_ij * h[row + j];
                z[j] += h_ij * h_ki;
            }
            z[i] = beta * (z[i] + z_i);
        }
        // z -= (beta v'z / 2) v
        let mut gamma = 0.0;
        for i in k + 1..n {
            gamma += z[i] * h[row + i];
        }
        gamma *= beta / 2.0;
        for i in k + 1..n {
            z[i] -= gamma * h[row + i];
        }
        // A -= v z' + z v', upper triangle only.
        for i in k + 1..n {
            for j in i..n {
                h[i * n + j] -= h[row + i] * z[j] + z[i] * h[row + j];
            }
        }
    }
    main[n - 1] = h[n * n - 1];
    (main, secondary)
}

/// The orthogonal `Q` (row-major) with `A = Q T Q'`, accumulated from the reflections that
/// [`tridiagonalize`] left in `h`, last one first (Commons Math builds `Q'` and transposes it).
fn householder_product(h: &[f64], secondary: &[f64], n: usize) -> Vec<f64> {
    let mut qt = vec![0.0; n * n];
    for k in (1..n).rev() {
        let hk = (k - 1) * n;
        qt[k * n + k] = 1.0;
        if h[hk + k] == 0.0 {
            continue;
        }
        let inv = 1.0 / (secondary[k - 1] * h[hk + k]);
        let mut beta = 1.0 / secondary[k - 1];
        qt[k * n + k] = 1.0 + beta * h[hk + k];
        for i in k + 1..n {
            qt[k * n + i] = beta * h[hk + i];
        }
        for j in k + 1..n {
            beta = 0.0;
            for i in k + 1..n {
                beta += qt[j * n + i] * h[hk + i];
            }
            beta *= inv;
            qt[j * n + k] = beta * h[hk + k];
            for i in k + 1..n {
                qt[j * n + i] += beta * h[hk + i];
            }
        }
    }
    qt[0] = 1.0;
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            q[i * n + j] = qt[j * n + i];
        }
    }
    q
}

/// The implicit QL iteration on the tridiagonal matrix (`main`, `secondary`), rotating the
/// columns of `z` along; returns the eigenvalues in descending order, `z`'s columns sorted
/// alike.
fn implicit_ql(
    main: Vec<f64>,
    secondary: &[f64],
    z: &mut [f64],
    n: usize,
) -> Result<Vec<f64>, NotConverged> {
    let mut d = main;
    let mut e = vec![0.0; n];
    e[..n - 1].copy_from_slice(secondary);
    // Entries negligible next to the largest are set to zero first.
    let largest = d.iter().chain(&e).fold(0.0f64, |m, x| m.max(x.abs()));
    if largest != 0.0 {
        for x in d.iter_mut().chain(e.iter_mut()) {
            if x.abs() <= COMMONS_EPSILON * largest {
                *x = 0.0;
            }
        }
    }
    for j in 0..n {
        let mut iterations = 0;
        loop {
            // The first negligible off-diagonal entry at or after j splits the matrix.
            let mut m = j;
            while m < n - 1 {
                let delta = d[m].abs() + d[m + 1].abs();
                if e[m].abs() + delta == delta {
                    break;
                }
                m += 1;
            }
            if m == j {
                break;
            }
            if iterations == MAX_ITERATIONS {
                return Err(NotConverged);
            }
            iterations += 1;
            // Wilkinson's shift.
            let mut q = (d[j + 1] - d[j]) / (2.0 * e[j]);
            let mut t = (1.0 + q * q).sqrt();
            q = if q < 0.0 {
                d[m] - d[j] + e[j] / (q - t)
            } else {
                d[m] - d[j] + e[j] / (q + t)
            };
            let (mut u, mut s, mut c) = (0.0, 1.0, 1.0);
            let mut underflow = false;
            for i in (j..m).rev() {
                let mut p = s * e[i];
                let h = c * e[i];
                if p.abs() >= q.abs() {
                    c = q / p;
                    t = (c * c + 1.0).sqrt();
                    e[i + 1] = p * t;
                    s = 1.0 / t;
                    c *= s;
                } else {
                    s = p / q;
                    t = (s * s + 1.0).sqrt();
                    e[i + 1] = q * t;
                    c = 1.0 / t;
                    s *= c;
                }
                if e[i + 1] == 0.0 {
                    d[i + 1] -= u;
                    e[m] = 0.0;
                    underflow = true;
                    break;
                }
                q = d[i + 1] - u;
                t = (d[i] - q) * s + 2.0 * c * h;
                u = s * t;
                d[i + 1] = q + u;
                q = c * t - h;
                for row in z.chunks_exact_mut(n) {
                    p = row[i + 1];
                    row[i + 1] = s * row[i] + c * p;
                    row[i] = c * row[i] - s * p;
                }
            }
            // Commons Math restarts here only if the last `t` was zero, which a square root
            // of at least 1 never is; kept so the steps stay its steps.
            if underflow && t == 0.0 {
                continue;
            }
            d[j] -= u;
            e[j] = q;
            e[m] = 0.0;
        }
    }
    // Selection sort, descending: equal values keep Commons Math's column order.
    for i in 0..n {
        let mut k = i;
        let mut p = d[i];
        for (jj, &v) in d.iter().enumerate().skip(i + 1) {
            if v > p {
                k = jj;
                p = v;
            }
        }
        if k != i {
            d[k] = d[i];
            d[i] = p;
            for row in z.chunks_exact_mut(n) {
                row.swap(i, k);
            }
        }
    }
    let largest = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if largest != 0.0 {
        for x in d.iter_mut() {
            if x.abs() < COMMONS_EPSILON * largest {
                *x = 0.0;
            }
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_by_one_matrix_is_its_own_eigenvalue() {
        let (values, vectors) = symmetric_eigen(&[-3.5], 1).unwrap();
        assert_eq!((values, vectors), (vec![-3.5], vec![1.0]));
    }

    #[test]
    fn a_diagonal_matrix_keeps_the_unit_vectors_sorted_descending() {
        let a = [2.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0];
        let (values, vectors) = symmetric_eigen(&a, 3).unwrap();
        assert_eq!(values, vec![5.0, 2.0, -1.0]);
        assert_eq!(vectors, vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn the_vectors_are_orthonormal_and_reconstruct_the_matrix() {
        let n = 7;
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in i..n {
                let v = ((i * 31 + j * 17) % 13) as f64 - 6.0 + 0.25 * i as f64;
                a[i * n + j] = v;
                a[j * n + i] = v;
            }
        }
        let (values, v) = symmetric_eigen(&a, n).unwrap();
        assert!(values.windows(2).all(|w| w[0] >= w[1]));
        for i in 0..n {
            for j in 0..n {
                let back: f64 = (0..n)
                    .map(|k| v[i * n + k] * values[k] * v[j * n + k])
                    .sum();
                let dot: f64 = (0..n).map(|k| v[k * n + i] * v[k * n + j]).sum();
                assert!((back - a[i * n + j]).abs() < 1e-12, "{i} {j}");
                assert!((dot - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
    }
}
