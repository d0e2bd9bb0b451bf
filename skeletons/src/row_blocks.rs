//! The two plan-independent block primitives of the dense Row entry points, which generated
//! code of either backend calls by name: the products of a block of main rows with a
//! transposed matrix (`X[i, ] %*% B`, hoisted out of the row loop) and the deferred
//! outer-product updates of a block (`t(X) %*% S`). Each value is computed in a fixed order
//! that does not depend on the instruction set, the blocking or the backend:
//!
//! * a dot product is one accumulator of [`LANES`] lanes over the row in order (fused
//!   multiply-adds), its lanes summed as a halving tree, then a scalar fused multiply-add
//!   tail added last;
//! * an update adds its rows to each element in row order, each as a multiply then an add.
//!
//! They were LLVM libraries built at a Row operator's first compilation (36 ms of LLVM's
//! time in every process); written here, they cost no compilation, and Cranelift's entry
//! points call them as LLVM's do.

/// Lanes of a dot product's accumulator (the backends' vector width `W`).
pub const LANES: usize = 8;

/// Rows of a block: the dense entry's blocks of rows (the backends' `ROW_BLOCK`).
pub const BLOCK_ROWS: usize = 8;

/// How many blocks ahead the block primitives prefetch the main input's rows, into the L2: the
/// dot products of a block fetch the first half of that block's rows and its outer-product
/// updates the second half, so that memory reads are in flight in both phases. (When the dot
/// products fetched the whole next block, memory idled while a block's updates ran from the
/// cache: `row_mm` at 1e5×1e3 reached 66-69 % of a same-process read of `X` when memory was
/// fast, 70-72 % with the halves; two blocks ahead measured the same as one.)
const PREFETCH_BLOCKS: usize = 1;

/// `o[q * cols + c] = x[q * stride ..] · bt[c * l ..]` (length `l`) for `q < rows`, `c < cols`.
///
/// # Safety
/// `x` holds `rows` rows of `l` values `stride` apart, `bt` holds `cols` rows of `l`
/// values, `o` has room for `rows * cols` values and overlaps neither; all counts are
/// non-negative.
pub unsafe extern "C" fn lafuse_row_dot_rows(
    x: *const f64,
    stride: i64,
    bt: *const f64,
    l: i64,
    cols: i64,
    rows: i64,
    o: *mut f64,
) {
    let (stride, l, cols, rows) = (stride as usize, l as usize, cols as usize, rows as usize);
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; the caller's bounds.
        return unsafe { dot_rows::<Avx2>(x, stride, bt, l, cols, rows, o) };
    }
    // SAFETY: the caller's bounds.
    unsafe { dot_rows::<Portable>(x, stride, bt, l, cols, rows, o) }
}

/// For each of `cols` rows of the partial `o` (`len` values each, `o + c * len`), with the
/// scales `s_c = s + c`: `o_c[j] += s_c[r * ss] * x[r * stride + j]` for the `rows` rows in
/// order. A full block updates two partial rows per pass over the block (then the odd one),
/// each element loaded and stored once; a short block goes row by row.
///
/// # Safety
/// `o` holds `cols * len` values, `x` holds `rows` rows of `len` values `stride` apart, `s`
/// holds the scales addressed above; `o` overlaps neither.
pub unsafe extern "C" fn lafuse_row_axpy_rows(
    o: *mut f64,
    x: *const f64,
    stride: i64,
    s: *const f64,
    ss: i64,
    cols: i64,
    rows: i64,
    len: i64,
) {
    let (stride, ss, cols, rows, len) = (
        stride as usize,
        ss as usize,
        cols as usize,
        rows as usize,
        len as usize,
    );
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; the caller's bounds.
        return unsafe { axpy_rows::<Avx2>(o, x, stride, s, ss, cols, rows, len) };
    }
    // SAFETY: the caller's bounds.
    unsafe { axpy_rows::<Portable>(o, x, stride, s, ss, cols, rows, len) }
}

#[cfg(target_arch = "x86_64")]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// The inner loops, for a full block or one row: the same values in the same order on every
/// implementation, only faster on some.
trait Kernels {
    /// The dot products of every row `xs[q]` with every vector `bs[t]` over `len` values,
    /// each one accumulator of [`LANES`] lanes in order, its lanes summed as a halving tree,
    /// then a scalar tail added last. With `ahead`, the first half of the rows prefetch
    /// their line `ahead` values on (the next block's; the updates prefetch the other half),
    /// so that memory reads stay in flight while this block is computed from the cache.
    ///
    /// # Safety
    /// Every `xs[q]` and `bs[t]` holds `len` values.
    unsafe fn dot<const NR: usize, const NC: usize>(
        xs: &[*const f64; NR],
        bs: &[*const f64; NC],
        len: usize,
        ahead: Option<usize>,
    ) -> [[f64; NC]; NR];

    /// The updates of the partial rows `os` by a full block of rows `xs` with the scales
    /// `sv[t][r]`: each element loaded once, the rows added in order (a multiply, then an
    /// add), stored once; the second half of the rows of the block `ahead` values on
    /// prefetched a line per step.
    ///
    /// # Safety
    /// Every `os[t]` and `xs[r]` holds `len` values; `os` overlaps no `xs`.
    unsafe fn update<const NC: usize>(
        os: &[*mut f64; NC],
        xs: &[*const f64; BLOCK_ROWS],
        sv: &[[f64; BLOCK_ROWS]; NC],
        len: usize,
        ahead: usize,
    );
}

/// [`lafuse_row_dot_rows`] over kernels `K`: a full block's rows with two columns per pass
/// (then the odd one), a short block's row by row; no value depends on which.
///
/// # Safety
/// As [`lafuse_row_dot_rows`], and `K` runs on this CPU.
#[allow(clippy::too_many_arguments)]
unsafe fn dot_rows<K: Kernels>(
    x: *const f64,
    stride: usize,
    bt: *const f64,
    l: usize,
    cols: usize,
    rows: usize,
    o: *mut f64,
) {
    if rows == BLOCK_ROWS {
        let xs: [*const f64; BLOCK_ROWS] = std::array::from_fn(|q| x.wrapping_add(q * stride));
        let ahead = Some(stride * BLOCK_ROWS * PREFETCH_BLOCKS);
        let mut c = 0;
        while c + 2 <= cols {
            let bs = [bt.wrapping_add(c * l), bt.wrapping_add((c + 1) * l)];
            // SAFETY: the caller's bounds.
            let v = unsafe { K::dot(&xs, &bs, l, ahead) };
            for (q, row) in v.iter().enumerate() {
                // SAFETY: `q < rows`, `c + 1 < cols`.
                unsafe {
                    o.add(q * cols + c)
                        .copy_from_nonoverlapping(row.as_ptr(), 2)
                };
            }
            c += 2;
        }
        if c < cols {
            // SAFETY: the caller's bounds.
            let v = unsafe { K::dot(&xs, &[bt.wrapping_add(c * l)], l, ahead) };
            for (q, row) in v.iter().enumerate() {
                // SAFETY: `q < rows`, `c < cols`.
                unsafe { *o.add(q * cols + c) = row[0] };
            }
        }
    } else {
        for q in 0..rows {
            let xs = [x.wrapping_add(q * stride)];
            for c in 0..cols {
                // SAFETY: the caller's bounds.
                let v = unsafe { K::dot(&xs, &[bt.wrapping_add(c * l)], l, None) };
                // SAFETY: `q < rows`, `c < cols`.
                unsafe { *o.add(q * cols + c) = v[0][0] };
            }
        }
    }
}

/// [`lafuse_row_axpy_rows`] over kernels `K`.
///
/// # Safety
/// As [`lafuse_row_axpy_rows`], and `K` runs on this CPU.
#[allow(clippy::too_many_arguments)]
unsafe fn axpy_rows<K: Kernels>(
    o: *mut f64,
    x: *const f64,
    stride: usize,
    s: *const f64,
    ss: usize,
    cols: usize,
    rows: usize,
    len: usize,
) {
    if rows == BLOCK_ROWS {
        let xs: [*const f64; BLOCK_ROWS] = std::array::from_fn(|r| x.wrapping_add(r * stride));
        let ahead = stride * BLOCK_ROWS * PREFETCH_BLOCKS;
        // SAFETY (of the scales' reads): the caller's bounds.
        let scales = |c: usize| -> [f64; BLOCK_ROWS] {
            std::array::from_fn(|r| unsafe { *s.add(c + ss * r) })
        };
        let mut c = 0;
        while c + 2 <= cols {
            let os = [o.wrapping_add(c * len), o.wrapping_add((c + 1) * len)];
            // SAFETY: the caller's bounds.
            unsafe { K::update(&os, &xs, &[scales(c), scales(c + 1)], len, ahead) };
            c += 2;
        }
        if c < cols {
            // SAFETY: the caller's bounds.
            unsafe { K::update(&[o.wrapping_add(c * len)], &xs, &[scales(c)], len, ahead) };
        }
    } else {
        for c in 0..cols {
            let oc = o.wrapping_add(c * len);
            for r in 0..rows {
                // SAFETY: the caller's bounds.
                unsafe {
                    let sr = *s.add(c + ss * r);
                    let xr = x.add(r * stride);
                    for j in 0..len {
                        *oc.add(j) += sr * *xr.add(j);
                    }
                }
            }
        }
    }
}

/// Plain Rust: correct on any CPU (its fused multiply-adds are `f64::mul_add`).
struct Portable;

impl Kernels for Portable {
    unsafe fn dot<const NR: usize, const NC: usize>(
        xs: &[*const f64; NR],
        bs: &[*const f64; NC],
        len: usize,
        _ahead: Option<usize>,
    ) -> [[f64; NC]; NR] {
        let mut out = [[0.0f64; NC]; NR];
        for q in 0..NR {
            for t in 0..NC {
                let mut acc = [0.0f64; LANES];
                let mut j = 0;
                while j + LANES <= len {
                    for (k, a) in acc.iter_mut().enumerate() {
                        // SAFETY: `j + k < len`.
                        let (x, b) = unsafe { (*xs[q].add(j + k), *bs[t].add(j + k)) };
                        *a = x.mul_add(b, *a);
                    }
                    j += LANES;
                }
                // SAFETY: the caller's bounds.
                out[q][t] = sum_lanes(acc) + unsafe { dot_tail(xs[q], bs[t], j, len) };
            }
        }
        out
    }

    unsafe fn update<const NC: usize>(
        os: &[*mut f64; NC],
        xs: &[*const f64; BLOCK_ROWS],
        sv: &[[f64; BLOCK_ROWS]; NC],
        len: usize,
        _ahead: usize,
    ) {
        // SAFETY: the caller's bounds.
        unsafe { update_tail(os, xs, sv, 0, len) }
    }
}

/// The scalar tail of a dot product: `Σ x[j] * b[j]` for `j` in `from..len`, in order, as
/// fused multiply-adds into an accumulator of its own.
///
/// # Safety
/// `x` and `b` hold `len` values.
#[inline(always)]
unsafe fn dot_tail(x: *const f64, b: *const f64, from: usize, len: usize) -> f64 {
    let mut tail = 0.0f64;
    for j in from..len {
        // SAFETY: `j < len`.
        let (x, b) = unsafe { (*x.add(j), *b.add(j)) };
        tail = x.mul_add(b, tail);
    }
    tail
}

/// The updates of elements `from..len` of the partial rows `os` ([`Kernels::update`]), one
/// element at a time.
///
/// # Safety
/// As [`Kernels::update`].
#[inline(always)]
unsafe fn update_tail<const NC: usize>(
    os: &[*mut f64; NC],
    xs: &[*const f64; BLOCK_ROWS],
    sv: &[[f64; BLOCK_ROWS]; NC],
    from: usize,
    len: usize,
) {
    for t in 0..NC {
        for j in from..len {
            // SAFETY: `j < len`.
            unsafe {
                let mut a = *os[t].add(j);
                for (r, xr) in xs.iter().enumerate() {
                    a += sv[t][r] * *xr.add(j);
                }
                *os[t].add(j) = a;
            }
        }
    }
}

/// The lanes of `v` summed as a halving tree: `v[l] += v[l + h]` for `h` = 4, 2, 1.
fn sum_lanes(mut v: [f64; LANES]) -> f64 {
    let mut h = LANES / 2;
    while h > 0 {
        for l in 0..h {
            v[l] += v[l + h];
        }
        h /= 2;
    }
    v[0]
}

/// AVX2 with FMA: an accumulator of [`LANES`] lanes is two vectors of four (`lo`, `hi`).
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx2 {
    unsafe fn dot<const NR: usize, const NC: usize>(
        xs: &[*const f64; NR],
        bs: &[*const f64; NC],
        len: usize,
        ahead: Option<usize>,
    ) -> [[f64; NC]; NR] {
        // SAFETY: `Avx2` runs only where the CPU has AVX2 and FMA; the caller's bounds.
        unsafe { avx2::dot(xs, bs, len, ahead) }
    }

    unsafe fn update<const NC: usize>(
        os: &[*mut f64; NC],
        xs: &[*const f64; BLOCK_ROWS],
        sv: &[[f64; BLOCK_ROWS]; NC],
        len: usize,
        ahead: usize,
    ) {
        // SAFETY: as above.
        unsafe { avx2::update(os, xs, sv, len, ahead) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BLOCK_ROWS, LANES};
    use std::arch::x86_64::*;

    /// [`super::Kernels::dot`] a group of rows at a time (each product is its own
    /// accumulator, so grouping changes no value): four rows against one vector, two against
    /// two, so that a group's accumulators stay in registers and each load of a vector serves
    /// the group.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot<const NR: usize, const NC: usize>(
        xs: &[*const f64; NR],
        bs: &[*const f64; NC],
        len: usize,
        ahead: Option<usize>,
    ) -> [[f64; NC]; NR] {
        let mut out = [[0.0f64; NC]; NR];
        let mut q = 0;
        // SAFETY (of every group): the caller's bounds.
        if NC == 1 {
            while q + 4 <= NR {
                let v = unsafe {
                    dot_group::<4, NC>(xs[q..q + 4].try_into().unwrap(), bs, len, ahead, q, NR)
                };
                out[q..q + 4].copy_from_slice(&v);
                q += 4;
            }
        }
        while q + 2 <= NR {
            let v = unsafe {
                dot_group::<2, NC>(xs[q..q + 2].try_into().unwrap(), bs, len, ahead, q, NR)
            };
            out[q..q + 2].copy_from_slice(&v);
            q += 2;
        }
        while q < NR {
            let v = unsafe { dot_group::<1, NC>([xs[q]], bs, len, ahead, q, NR) };
            out[q] = v[0];
            q += 1;
        }
        out
    }

    /// The products of the `G` rows `xs` (rows `first..` of a block of `nr`) with `bs`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_group<const G: usize, const NC: usize>(
        xs: [*const f64; G],
        bs: &[*const f64; NC],
        len: usize,
        ahead: Option<usize>,
        first: usize,
        nr: usize,
    ) -> [[f64; NC]; G] {
        let mut lo = [[_mm256_setzero_pd(); NC]; G];
        let mut hi = [[_mm256_setzero_pd(); NC]; G];
        let mut j = 0;
        while j + LANES <= len {
            if let Some(d) = ahead {
                for (g, x) in xs.iter().enumerate() {
                    if first + g < nr / 2 {
                        _mm_prefetch::<_MM_HINT_T1>(x.wrapping_add(d + j).cast::<i8>());
                    }
                }
            }
            // SAFETY: `j + LANES <= len` values of each.
            unsafe {
                for t in 0..NC {
                    let b = bs[t].add(j);
                    let (bl, bh) = (_mm256_loadu_pd(b), _mm256_loadu_pd(b.add(4)));
                    for g in 0..G {
                        let x = xs[g].add(j);
                        lo[g][t] = _mm256_fmadd_pd(_mm256_loadu_pd(x), bl, lo[g][t]);
                        hi[g][t] = _mm256_fmadd_pd(_mm256_loadu_pd(x.add(4)), bh, hi[g][t]);
                    }
                }
            }
            j += LANES;
        }
        let mut out = [[0.0f64; NC]; G];
        for g in 0..G {
            for t in 0..NC {
                // SAFETY: the caller's bounds.
                let tail = unsafe { super::dot_tail(xs[g], bs[t], j, len) };
                out[g][t] = sum_lanes(lo[g][t], hi[g][t]) + tail;
            }
        }
        out
    }

    /// The halving tree of [`super::sum_lanes`] over lanes `lo ++ hi`: `lo + hi` is its
    /// first level, the halves of that the second, their two lanes the last.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sum_lanes(lo: __m256d, hi: __m256d) -> f64 {
        let four = _mm256_add_pd(lo, hi);
        let two = _mm_add_pd(
            _mm256_castpd256_pd128(four),
            _mm256_extractf128_pd::<1>(four),
        );
        _mm_cvtsd_f64(_mm_add_sd(two, _mm_unpackhi_pd(two, two)))
    }

    /// [`super::Kernels::update`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn update<const NC: usize>(
        os: &[*mut f64; NC],
        xs: &[*const f64; BLOCK_ROWS],
        sv: &[[f64; BLOCK_ROWS]; NC],
        len: usize,
        ahead: usize,
    ) {
        let mut j = 0;
        while j + LANES <= len {
            for xr in &xs[BLOCK_ROWS / 2..] {
                _mm_prefetch::<_MM_HINT_T1>(xr.wrapping_add(ahead + j).cast::<i8>());
            }
            // One partial row at a time (its elements see the rows in the same order), so that
            // its accumulators and scales stay in registers.
            for t in 0..NC {
                // SAFETY: `j + LANES <= len` values of each row.
                unsafe {
                    let o = os[t].add(j);
                    let (mut lo, mut hi) = (_mm256_loadu_pd(o), _mm256_loadu_pd(o.add(4)));
                    for (r, xr) in xs.iter().enumerate() {
                        let x = xr.add(j);
                        let s = _mm256_set1_pd(sv[t][r]);
                        lo = _mm256_add_pd(lo, _mm256_mul_pd(s, _mm256_loadu_pd(x)));
                        hi = _mm256_add_pd(hi, _mm256_mul_pd(s, _mm256_loadu_pd(x.add(4))));
                    }
                    _mm256_storeu_pd(o, lo);
                    _mm256_storeu_pd(o.add(4), hi);
                }
            }
            j += LANES;
        }
        // SAFETY: the caller's bounds.
        unsafe { super::update_tail(os, xs, sv, j, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with NaN, infinities, signed zeros and mixed magnitudes at fixed places.
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|k| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64;
                match k % 97 {
                    13 => f64::NAN,
                    29 => f64::INFINITY,
                    41 => f64::NEG_INFINITY,
                    53 => -0.0,
                    _ => (u - 0.5) * 10f64.powi((k % 7) as i32 - 3),
                }
            })
            .collect()
    }

    /// The dot product by the module's definition: lanes in order, a halving tree, the tail.
    fn reference_dot(x: &[f64], b: &[f64]) -> f64 {
        let mut acc = [0.0; LANES];
        let full = x.len() / LANES * LANES;
        for j in (0..full).step_by(LANES) {
            for k in 0..LANES {
                acc[k] = x[j + k].mul_add(b[j + k], acc[k]);
            }
        }
        let mut tail = 0.0f64;
        for j in full..x.len() {
            tail = x[j].mul_add(b[j], tail);
        }
        sum_lanes(acc) + tail
    }

    /// Equal to the bit, every NaN alike (which NaN an operation returns of two depends on
    /// its operands' order, which compilers may swap).
    fn same_bits(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    }

    /// Every kernel this CPU runs gives each product the bits of its definition, for full
    /// and short blocks, odd and even column counts and lengths around the lane count.
    #[test]
    fn dot_rows_has_the_bits_of_its_definition_on_every_kernel() {
        for len in [0usize, 1, 7, 8, 9, 31, 1003] {
            for cols in [1usize, 2, 3] {
                for rows in [BLOCK_ROWS, 3] {
                    let stride = len + 5;
                    let x = values(rows * stride, 7 + len as u64);
                    let bt = values(cols * len, 11 + cols as u64);
                    let want: Vec<f64> = (0..rows * cols)
                        .map(|k| {
                            let (q, c) = (k / cols, k % cols);
                            reference_dot(
                                &x[q * stride..q * stride + len],
                                &bt[c * len..(c + 1) * len],
                            )
                        })
                        .collect();
                    let mut portable = vec![f64::NAN; rows * cols];
                    // SAFETY: the sizes above.
                    unsafe {
                        dot_rows::<Portable>(
                            x.as_ptr(),
                            stride,
                            bt.as_ptr(),
                            len,
                            cols,
                            rows,
                            portable.as_mut_ptr(),
                        )
                    };
                    assert!(
                        same_bits(&portable, &want),
                        "portable, len {len} cols {cols} rows {rows}"
                    );
                    let mut public = vec![f64::NAN; rows * cols];
                    // SAFETY: the sizes above.
                    unsafe {
                        lafuse_row_dot_rows(
                            x.as_ptr(),
                            stride as i64,
                            bt.as_ptr(),
                            len as i64,
                            cols as i64,
                            rows as i64,
                            public.as_mut_ptr(),
                        )
                    };
                    assert!(
                        same_bits(&public, &want),
                        "dispatched, len {len} cols {cols} rows {rows}"
                    );
                }
            }
        }
    }

    /// The updates add each row in order as a multiply then an add, on every kernel.
    #[test]
    fn axpy_rows_adds_the_rows_in_order_on_every_kernel() {
        for len in [0usize, 1, 7, 8, 9, 1003] {
            for cols in [1usize, 2, 3] {
                for rows in [BLOCK_ROWS, 5] {
                    let (stride, ss) = (len + 3, cols + 1);
                    let x = values(rows * stride, 3 + len as u64);
                    let s = values(ss * rows + cols, 5 + cols as u64);
                    let start = values(cols * len, 17);
                    let mut want = start.clone();
                    for c in 0..cols {
                        for j in 0..len {
                            let mut a = want[c * len + j];
                            for r in 0..rows {
                                a += s[c + ss * r] * x[r * stride + j];
                            }
                            want[c * len + j] = a;
                        }
                    }
                    let mut portable = start.clone();
                    // SAFETY: the sizes above.
                    unsafe {
                        axpy_rows::<Portable>(
                            portable.as_mut_ptr(),
                            x.as_ptr(),
                            stride,
                            s.as_ptr(),
                            ss,
                            cols,
                            rows,
                            len,
                        )
                    };
                    assert!(
                        same_bits(&portable, &want),
                        "portable, len {len} cols {cols} rows {rows}"
                    );
                    let mut public = start.clone();
                    // SAFETY: the sizes above.
                    unsafe {
                        lafuse_row_axpy_rows(
                            public.as_mut_ptr(),
                            x.as_ptr(),
                            stride as i64,
                            s.as_ptr(),
                            ss as i64,
                            cols as i64,
                            rows as i64,
                            len as i64,
                        )
                    };
                    assert!(
                        same_bits(&public, &want),
                        "dispatched, len {len} cols {cols} rows {rows}"
                    );
                }
            }
        }
    }
}
