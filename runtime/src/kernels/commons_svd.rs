//! The singular value decomposition of SystemDS's `svd`, hand-written after the algorithm of
//! Apache Commons Math 3's `SingularValueDecomposition` (JAMA's: Householder bidiagonalization,
//! then implicit-shift QR steps on the bidiagonal form): SystemDS returns that algorithm's
//! singular vectors, whose signs (and, for a repeated singular value, whose basis) no rule but
//! the algorithm itself defines, so faer's decomposition cannot give them.
//!
//! The steps keep Commons Math's order of floating-point operations, including its `hypot`
//! (exponent-scaled), so the vectors come out as SystemDS's to the last bits or within a few
//! units of the last place, and their signs are SystemDS's.

/// Commons Math's relative threshold for negligible values, 2^-52.
const EPS: f64 = f64::EPSILON;
/// `U` (`r` x `p`), the singular values (`p`, descending) and `V` (`c` x `p`), row-major, of
/// the row-major `r` x `c` matrix `a`, `p = min(r, c)`: the compact decomposition.
pub fn commons_svd(a: &[f64], r: usize, c: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    assert_eq!(a.len(), r * c, "commons_svd: a holds r * c values");
    // Commons Math decomposes the transpose of a wide matrix, and swaps U and V back.
    let transposed = r < c;
    let (m, n) = if transposed { (c, r) } else { (r, c) };
    let mut x: Vec<Vec<f64>> = (0..m)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if transposed {
                        a[j * c + i]
                    } else {
                        a[i * c + j]
                    }
                })
                .collect()
        })
        .collect();
    let (u, s, v) = decompose(&mut x, m, n);
    let flat = |rows: &[Vec<f64>]| rows.iter().flatten().copied().collect::<Vec<f64>>();
    if transposed {
        (flat(&v), s, flat(&u))
    } else {
        (flat(&u), s, flat(&v))
    }
}

/// Commons Math's `FastMath.hypot`: sqrt(x^2 + y^2) after scaling both by the power of two
/// between their exponents, or the larger one alone where the other is negligible.
fn hypot(x: f64, y: f64) -> f64 {
    if x.is_infinite() || y.is_infinite() {
        return f64::INFINITY;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    let (ex, ey) = (exponent(x), exponent(y));
    if ex > ey + 27 {
        x.abs()
    } else if ey > ex + 27 {
        y.abs()
    } else {
        let middle = (ex + ey) / 2;
        let (sx, sy) = (scalb(x, -middle), scalb(y, -middle));
        scalb((sx * sx + sy * sy).sqrt(), middle)
    }
}

/// The unbiased exponent of `x` (`Math.getExponent`: -1023 for zero and subnormals).
fn exponent(x: f64) -> i32 {
    (((x.to_bits() >> 52) & 0x7ff) as i32) - 1023
}

/// `x * 2^k` (`Math.scalb`), exact where the result is normal.
fn scalb(x: f64, k: i32) -> f64 {
    // In two steps so that neither power of two over- or underflows for |k| <= 2098.
    let half = k / 2;
    x * pow2(half) * pow2(k - half)
}

fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        // A subnormal power of two.
        f64::from_bits(1u64 << (k + 1074).max(0))
    }
}

/// JAMA's decomposition of the `m` x `n` matrix `a` (`m >= n`), overwritten: `U` (m x n),
/// the singular values and `V` (n x n).
#[allow(clippy::needless_range_loop)]
fn decompose(a: &mut [Vec<f64>], m: usize, n: usize) -> (Vec<Vec<f64>>, Vec<f64>, Vec<Vec<f64>>) {
    // Commons Math's absolute threshold for negligible values.
    let tiny = pow2(-966);
    let mut s = vec![0.0; n];
    let mut u = vec![vec![0.0; n]; m];
    let mut v = vec![vec![0.0; n]; n];
    let mut e = vec![0.0; n];
    let mut work = vec![0.0; m];
    let nct = (m.saturating_sub(1)).min(n);
    let nrt = n.saturating_sub(2);
    for k in 0..nct.max(nrt) {
        if k < nct {
            // The k-th column's transformation; its diagonal entry goes to s[k].
            s[k] = 0.0;
            for i in k..m {
                s[k] = hypot(s[k], a[i][k]);
            }
            if s[k] != 0.0 {
                if a[k][k] < 0.0 {
                    s[k] = -s[k];
                }
                for i in k..m {
                    a[i][k] /= s[k];
                }
                a[k][k] += 1.0;
            }
            s[k] = -s[k];
        }
        for j in k + 1..n {
            if k < nct && s[k] != 0.0 {
                let mut t = 0.0;
                for i in k..m {
                    t += a[i][k] * a[i][j];
                }
                t = -t / a[k][k];
                for i in k..m {
                    a[i][j] += t * a[i][k];
                }
            }
            // Row k of A, for the row transformation below.
            e[j] = a[k][j];
        }
        if k < nct {
            for i in k..m {
                u[i][k] = a[i][k];
            }
        }
        if k < nrt {
            // The k-th row's transformation; its super-diagonal entry goes to e[k].
            e[k] = 0.0;
            for i in k + 1..n {
                e[k] = hypot(e[k], e[i]);
            }
            if e[k] != 0.0 {
                if e[k + 1] < 0.0 {
                    e[k] = -e[k];
                }
                for i in k + 1..n {
                    e[i] /= e[k];
                }
                e[k + 1] += 1.0;
            }
            e[k] = -e[k];
            if k + 1 < m && e[k] != 0.0 {
                for w in work.iter_mut().take(m).skip(k + 1) {
                    *w = 0.0;
                }
                for j in k + 1..n {
                    for i in k + 1..m {
                        work[i] += e[j] * a[i][j];
                    }
                }
                for j in k + 1..n {
                    let t = -e[j] / e[k + 1];
                    for i in k + 1..m {
                        a[i][j] += t * work[i];
                    }
                }
            }
            for i in k + 1..n {
                v[i][k] = e[i];
            }
        }
    }
    // The bidiagonal matrix of order p.
    let mut p = n;
    if nct < n {
        s[nct] = a[nct][nct];
    }
    if m < p {
        s[p - 1] = 0.0;
    }
    if nrt + 1 < p {
        e[nrt] = a[nrt][p - 1];
    }
    e[p - 1] = 0.0;
    // U.
    for j in nct..n {
        for row in u.iter_mut() {
            row[j] = 0.0;
        }
        u[j][j] = 1.0;
    }
    for k in (0..nct).rev() {
        if s[k] != 0.0 {
            for j in k + 1..n {
                let mut t = 0.0;
                for i in k..m {
                    t += u[i][k] * u[i][j];
                }
                t = -t / u[k][k];
                for i in k..m {
                    u[i][j] += t * u[i][k];
                }
            }
            for i in k..m {
                u[i][k] = -u[i][k];
            }
            u[k][k] += 1.0;
            // As JAMA: rows above k - 1 (not k) are cleared; row k - 1 is 0 already.
            for i in 0..k.saturating_sub(1) {
                u[i][k] = 0.0;
            }
        } else {
            for row in u.iter_mut() {
                row[k] = 0.0;
            }
            u[k][k] = 1.0;
        }
    }
    // V.
    for k in (0..n).rev() {
        if k < nrt && e[k] != 0.0 {
            for j in k + 1..n {
                let mut t = 0.0;
                for i in k + 1..n {
                    t += v[i][k] * v[i][j];
                }
                t = -t / v[k + 1][k];
                for i in k + 1..n {
                    v[i][j] += t * v[i][k];
                }
            }
        }
        for row in v.iter_mut() {
            row[k] = 0.0;
        }
        v[k][k] = 1.0;
    }
    // The QR steps on the bidiagonal form.
    let pp = p.saturating_sub(1);
    while p > 0 {
        // Find k: e[k] negligible (k = -1 when none), scanning down from p - 2.
        let mut k: isize = p as isize - 2;
        while k >= 0 {
            let ku = k as usize;
            let threshold = tiny + EPS * (s[ku].abs() + s[ku + 1].abs());
            // Not greater (NaN included) ends the scan, so a NaN cannot loop forever
            // (Commons Math's MATH-947).
            if e[ku].abs().partial_cmp(&threshold) != Some(std::cmp::Ordering::Greater) {
                e[ku] = 0.0;
                break;
            }
            k -= 1;
        }
        let kase;
        if k == p as isize - 2 {
            kase = 4;
        } else {
            let mut ks: isize = p as isize - 1;
            while ks >= k {
                if ks == k {
                    break;
                }
                let ksu = ks as usize;
                let t = (if ks != p as isize { e[ksu].abs() } else { 0.0 })
                    + (if ks != k + 1 { e[ksu - 1].abs() } else { 0.0 });
                if s[ksu].abs() <= tiny + EPS * t {
                    s[ksu] = 0.0;
                    break;
                }
                ks -= 1;
            }
            if ks == k {
                kase = 3;
            } else if ks == p as isize - 1 {
                kase = 1;
            } else {
                kase = 2;
                k = ks;
            }
        }
        let k = (k + 1) as usize;
        match kase {
            // Deflate a negligible s[p - 1].
            1 => {
                let mut f = e[p - 2];
                e[p - 2] = 0.0;
                for j in (k..=p - 2).rev() {
                    let mut t = hypot(s[j], f);
                    let cs = s[j] / t;
                    let sn = f / t;
                    s[j] = t;
                    if j != k {
                        f = -sn * e[j - 1];
                        e[j - 1] *= cs;
                    }
                    for row in v.iter_mut() {
                        t = cs * row[j] + sn * row[p - 1];
                        row[p - 1] = -sn * row[j] + cs * row[p - 1];
                        row[j] = t;
                    }
                }
            }
            // Split at a negligible s[k - 1].
            2 => {
                let mut f = e[k - 1];
                e[k - 1] = 0.0;
                for j in k..p {
                    let mut t = hypot(s[j], f);
                    let cs = s[j] / t;
                    let sn = f / t;
                    s[j] = t;
                    f = -sn * e[j];
                    e[j] *= cs;
                    for row in u.iter_mut() {
                        t = cs * row[j] + sn * row[k - 1];
                        row[k - 1] = -sn * row[j] + cs * row[k - 1];
                        row[j] = t;
                    }
                }
            }
            // One QR step.
            3 => {
                let max_pm = s[p - 1].abs().max(s[p - 2].abs());
                let scale = max_pm.max(e[p - 2].abs()).max(s[k].abs()).max(e[k].abs());
                let sp = s[p - 1] / scale;
                let spm1 = s[p - 2] / scale;
                let epm1 = e[p - 2] / scale;
                let sk = s[k] / scale;
                let ek = e[k] / scale;
                let b = ((spm1 + sp) * (spm1 - sp) + epm1 * epm1) / 2.0;
                let c = (sp * epm1) * (sp * epm1);
                let mut shift = 0.0;
                if b != 0.0 || c != 0.0 {
                    shift = (b * b + c).sqrt();
                    if b < 0.0 {
                        shift = -shift;
                    }
                    shift = c / (b + shift);
                }
                let mut f = (sk + sp) * (sk - sp) + shift;
                let mut g = sk * ek;
                for j in k..p - 1 {
                    let mut t = hypot(f, g);
                    let mut cs = f / t;
                    let mut sn = g / t;
                    if j != k {
                        e[j - 1] = t;
                    }
                    f = cs * s[j] + sn * e[j];
                    e[j] = cs * e[j] - sn * s[j];
                    g = sn * s[j + 1];
                    s[j + 1] *= cs;
                    for row in v.iter_mut() {
                        t = cs * row[j] + sn * row[j + 1];
                        row[j + 1] = -sn * row[j] + cs * row[j + 1];
                        row[j] = t;
                    }
                    t = hypot(f, g);
                    cs = f / t;
                    sn = g / t;
                    s[j] = t;
                    f = cs * e[j] + sn * s[j + 1];
                    s[j + 1] = -sn * e[j] + cs * s[j + 1];
                    g = sn * e[j + 1];
                    e[j + 1] *= cs;
                    if j < m - 1 {
                        for row in u.iter_mut() {
                            t = cs * row[j] + sn * row[j + 1];
                            row[j + 1] = -sn * row[j] + cs * row[j + 1];
                            row[j] = t;
                        }
                    }
                }
                e[p - 2] = f;
            }
            // Convergence: s[k] made non-negative, then moved to its place in the order.
            _ => {
                if s[k] <= 0.0 {
                    s[k] = if s[k] < 0.0 { -s[k] } else { 0.0 };
                    for row in v.iter_mut().take(pp + 1) {
                        row[k] = -row[k];
                    }
                }
                let mut k = k;
                while k < pp {
                    if s[k] >= s[k + 1] {
                        break;
                    }
                    s.swap(k, k + 1);
                    if k < n - 1 {
                        for row in v.iter_mut() {
                            row.swap(k, k + 1);
                        }
                    }
                    if k < m - 1 {
                        for row in u.iter_mut() {
                            row.swap(k, k + 1);
                        }
                    }
                    k += 1;
                }
                p -= 1;
            }
        }
    }
    (u, s, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect()
    }

    #[test]
    fn u_s_vt_gives_back_the_matrix_with_orthonormal_columns_and_descending_values() {
        for (r, c) in [
            (4, 3),
            (3, 4),
            (7, 2),
            (2, 7),
            (1, 1),
            (5, 5),
            (1, 6),
            (6, 1),
        ] {
            let a = lcg(r * c, (r * 31 + c) as u64);
            let (u, s, v) = commons_svd(&a, r, c);
            let p = r.min(c);
            assert_eq!((u.len(), s.len(), v.len()), (r * p, p, c * p));
            assert!(s.windows(2).all(|w| w[0] >= w[1]) && s.iter().all(|&x| x >= 0.0));
            for i in 0..r {
                for j in 0..c {
                    let back: f64 = (0..p).map(|t| u[i * p + t] * s[t] * v[j * p + t]).sum();
                    assert!((back - a[i * c + j]).abs() < 1e-12, "{r}x{c} ({i},{j})");
                }
            }
            for (m, rows) in [(&u, r), (&v, c)] {
                for x in 0..p {
                    for y in 0..p {
                        let d: f64 = (0..rows).map(|i| m[i * p + x] * m[i * p + y]).sum();
                        let want = if x == y { 1.0 } else { 0.0 };
                        assert!((d - want).abs() < 1e-12, "{r}x{c}: columns {x}, {y}");
                    }
                }
            }
        }
    }

    #[test]
    fn signs_are_commons_maths() {
        // SystemDS 3.4's svd(matrix("4 1 2 1 3 0.5 2 0.5 5 1 1 1", 4, 3)), to 12 digits.
        let a = [4.0, 1.0, 2.0, 1.0, 3.0, 0.5, 2.0, 0.5, 5.0, 1.0, 1.0, 1.0];
        let (u, s, v) = commons_svd(&a, 4, 3);
        let round =
            |x: &[f64]| -> Vec<f64> { x.iter().map(|v| (v * 1e12).round() / 1e12).collect() };
        assert_eq!(round(&s), [7.022109810189, 3.120540534682, 2.110023835186]);
        assert_eq!(
            round(&u[..3]),
            [0.600943335641, 0.27700271736, -0.741109809679]
        );
        assert_eq!(
            round(&v[..3]),
            [0.617298694575, 0.293199912963, -0.730052143833]
        );
    }

    #[test]
    fn hypot_scales_as_commons_math_does() {
        assert_eq!(hypot(3.0, 4.0), 5.0);
        assert_eq!(hypot(0.0, 0.0), 0.0);
        assert_eq!(hypot(-1e300, 1e300), 1e300 * 2f64.sqrt());
        assert_eq!(hypot(1.0, 1e-20), 1.0, "the smaller is negligible");
        assert!(hypot(f64::NAN, 1.0).is_nan());
        assert_eq!(hypot(f64::NAN, f64::NEG_INFINITY), f64::INFINITY);
        assert_eq!(scalb(1.5, -1074 + 1), 1.5 * pow2(-1073));
    }
}
