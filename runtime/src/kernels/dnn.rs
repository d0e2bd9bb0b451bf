//! SystemDS's deep-learning built-ins (its `LibMatrixDNN*`): `conv2d` and its two gradients,
//! max and average pooling and their gradients, `bias_add` and `bias_multiply`.
//!
//! A batch of images is a matrix with one image per row, each channel's `H x W` pixels
//! row-major after the previous channel's (NCHW). Outputs are laid out alike: `conv2d` gives
//! N x (K*P*Q), P x Q the output image of each of the K filters.
//!
//! Each output cell is a sum in SystemDS's order, and sums run in a fixed order whatever the
//! thread count (images are independent; `conv2d_backward_filter`'s sum over images adds fixed
//! chunks in order):
//! * `conv2d` is `F %*% im2col(X[n,])` per image: a cell sums over the filter's (c, r, s)
//!   ascending, skipping the filter's zeros (the left operand's, as SystemDS's products).
//! * `conv2d_backward_filter` sums `im2col(X[n,]) %*% t(dout[n,])` over the images in order,
//!   each a sum over the output pixels; `conv2d_backward_data` is `col2im(t(dout[n,]) %*% F)`,
//!   the product summing over the filters, col2im adding in SystemDS's (p, q, c, r, s) order.
//! * Pooling windows are clipped to the image: padding adds no values ("we do not treat pad as
//!   zero"). A max starts at `-Double.MAX_VALUE` and takes Java's `Math.max` (NaN wins); an
//!   average adds each window row's sum (SystemDS's eight-way `vectSum`) times `1/(R*S)`, the
//!   divisor counting the clipped cells too. The gradient of a max goes to the window's first
//!   largest cell (NaN never is one), accumulated where windows overlap.
//!
//! SystemDS's products group four terms of a sum where it unrolls (`vectMultiplyAdd4`); lafuse
//! adds them one by one, so results differ from SystemDS's in the last bits only.

use super::dense_result;
use crate::error::{Internal, Result, RuntimeError};
use crate::matrix::{count_nnz, try_alloc_zeroed, Matrix};
use lafuse_core::DnnOp;
use rayon::prelude::*;

/// The sizes of one call: N images of C channels, H x W each; K filters of C x R x S (a pooling
/// window R x S); strides and paddings; and the output image P x Q.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub r: usize,
    pub s: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub pad_h: usize,
    pub pad_w: usize,
    pub p: usize,
    pub q: usize,
}

impl Geometry {
    /// The geometry from `op`'s scalars in SystemDS's order (stride, padding, input shape, then
    /// the filter's count and size or the pool's size), each read as SystemDS reads it (a long,
    /// fractions truncated), with SystemDS's checks (`DnnUtils.getP`).
    pub fn new(op: DnnOp, scalars: &[f64]) -> Result<Geometry> {
        let function = op.name();
        let int = |i: usize| -> Result<i64> {
            let x = scalars.get(i).copied().unwrap_or(f64::NAN);
            let t = x.signum() * (x.abs() + f64::EPSILON / 2.0).floor();
            if !t.is_finite() || t.abs() > i32::MAX as f64 {
                return Err(RuntimeError::Argument {
                    function,
                    problem: format!("a size or stride of {x} is not an integer"),
                });
            }
            Ok(t as i64)
        };
        let [sh, sw, ph, pw, n, c, h, w] = [0, 1, 2, 3, 4, 5, 6, 7].map(int);
        let (sh, sw, ph, pw, n, c, h, w) = (sh?, sw?, ph?, pw?, n?, c?, h?, w?);
        let (k, r, s) = if op.is_pooling() {
            (c, int(8)?, int(9)?)
        } else {
            (int(8)?, int(9)?, int(10)?)
        };
        let bad = |problem: String| RuntimeError::Argument { function, problem };
        if sh <= 0 || sw <= 0 {
            return Err(bad(format!(
                "only positive strides are supported, got {sh}, {sw}"
            )));
        }
        let extent = |size: i64, filter: i64, stride: i64, pad: i64, what: &str| {
            if size <= 0 || filter <= 0 || pad < 0 {
                return Err(bad(format!(
                    "incorrect parameters: {what}={size}, filter {what}={filter}, pad={pad}"
                )));
            }
            if size + 2 * pad < filter {
                return Err(bad(format!(
                    "the padded image {what} {} cannot be less than the filter {what} {filter}",
                    size + 2 * pad
                )));
            }
            Ok(((size + 2 * pad - filter) / stride + 1) as usize)
        };
        let p = extent(h, r, sh, ph, "height")?;
        let q = extent(w, s, sw, pw, "width")?;
        if n < 0 || c <= 0 || k <= 0 {
            return Err(bad(format!(
                "incorrect parameters: {n} images, {c} channels, {k} filters"
            )));
        }
        // Every size the kernels form, counted without overflow (a script may state any).
        let cells = [n, c, h, w, k, r, s, p as i64, q as i64].map(|v| v as u128);
        let [n_, c_, h_, w_, k_, r_, s_, p_, q_] = cells;
        let largest = [
            n_ * c_ * h_ * w_,
            n_ * k_ * p_ * q_,
            n_ * c_ * p_ * q_,
            k_ * c_ * r_ * s_,
            c_ * r_ * s_ * p_ * q_,
        ];
        if largest
            .iter()
            .any(|&v| v > crate::matrix::MAX_DIM as u128 * crate::matrix::MAX_DIM as u128)
        {
            return Err(bad(format!(
                "the sizes {n}x{c}x{h}x{w} with filters {k}x{c}x{r}x{s} are too large"
            )));
        }
        let u = |v: i64| v as usize;
        Ok(Geometry {
            n: u(n),
            c: u(c),
            h: u(h),
            w: u(w),
            k: u(k),
            r: u(r),
            s: u(s),
            stride_h: u(sh),
            stride_w: u(sw),
            pad_h: u(ph),
            pad_w: u(pw),
            p,
            q,
        })
    }

    fn chw(&self) -> usize {
        self.c * self.h * self.w
    }
    fn crs(&self) -> usize {
        self.c * self.r * self.s
    }
    fn pq(&self) -> usize {
        self.p * self.q
    }

    /// The input rows `[lo, hi)` window row `p` covers, clipped to the image.
    fn rows_of(&self, p: usize) -> (usize, usize) {
        let start = (p * self.stride_h) as i64 - self.pad_h as i64;
        let lo = start.max(0) as usize;
        let hi = ((start + self.r as i64).min(self.h as i64)).max(0) as usize;
        (lo, hi.max(lo))
    }
    /// The input columns `[lo, hi)` window column `q` covers, clipped to the image.
    fn cols_of(&self, q: usize) -> (usize, usize) {
        let start = (q * self.stride_w) as i64 - self.pad_w as i64;
        let lo = start.max(0) as usize;
        let hi = ((start + self.s as i64).min(self.w as i64)).max(0) as usize;
        (lo, hi.max(lo))
    }
}

/// `op` over its matrices (one or two, as [`DnnOp::matrix_inputs`]) and its geometry's scalars
/// (none for the bias functions).
pub fn dnn(op: DnnOp, matrices: &[&Matrix], scalars: &[f64]) -> Result<Matrix> {
    // The compiler passes each function its matrices; a missing one is lafuse's fault.
    let input = |pos: usize| {
        matrices.get(pos).copied().ok_or_else(|| {
            RuntimeError::Internal(Internal::MissingInput {
                opcode: op.name().to_string(),
                input: pos,
            })
        })
    };
    match op {
        DnnOp::BiasAdd => return bias(input(0)?, input(1)?, false),
        DnnOp::BiasMultiply => return bias(input(0)?, input(1)?, true),
        _ => {}
    }
    let g = Geometry::new(op, scalars)?;
    let expect = |m: &Matrix, what: &str, rows: usize, cols: usize| {
        if m.shape() == (rows, cols) {
            Ok(())
        } else {
            Err(RuntimeError::Argument {
                function: op.name(),
                problem: format!(
                    "the {what} must be {rows}x{cols} for this geometry, got {}x{}",
                    m.rows(),
                    m.cols()
                ),
            })
        }
    };
    let a = input(0)?;
    let kpq = g.k * g.pq();
    let cpq = g.c * g.pq();
    match op {
        DnnOp::Conv2d => {
            let f = input(1)?;
            expect(f, "filter", g.k, g.crs())?;
            expect(a, "input", g.n, g.chw())?;
            conv2d(a, f, &g)
        }
        DnnOp::Conv2dBackwardFilter => {
            let dout = input(1)?;
            expect(a, "input", g.n, g.chw())?;
            expect(dout, "dout", g.n, kpq)?;
            conv2d_backward_filter(a, dout, &g)
        }
        DnnOp::Conv2dBackwardData => {
            let dout = input(1)?;
            expect(a, "filter", g.k, g.crs())?;
            expect(dout, "dout", g.n, kpq)?;
            conv2d_backward_data(a, dout, &g)
        }
        DnnOp::MaxPool | DnnOp::AvgPool => {
            expect(a, "input", g.n, g.chw())?;
            pool(a, &g, op == DnnOp::MaxPool)
        }
        DnnOp::MaxPoolBackward => {
            let dout = input(1)?;
            expect(a, "input", g.n, g.chw())?;
            expect(dout, "dout", g.n, cpq)?;
            max_pool_backward(a, dout, &g)
        }
        DnnOp::AvgPoolBackward => {
            // SystemDS does not read the input of an average's gradient.
            let dout = input(1)?;
            expect(dout, "dout", g.n, cpq)?;
            avg_pool_backward(dout, &g)
        }
        DnnOp::BiasAdd | DnnOp::BiasMultiply => unreachable!("handled above"),
    }
}

/// Checks that one task's scratch space of `cells` doubles fits the memory budget, once per
/// call, before tasks that cannot report an error allocate it (as the skeletons'
/// `check_task_buffers`).
fn probe_scratch(cells: usize) -> Result<()> {
    try_alloc_zeroed(cells).map(drop)
}

/// An output of `rows` images of `width` cells, each image's row filled by `image(n, row)`
/// (independent images, in parallel above the kernels' threshold), each using at most
/// `scratch` doubles of its own.
fn per_image<F>(
    rows: usize,
    width: usize,
    work_per_image: usize,
    scratch: usize,
    image: F,
) -> Result<Matrix>
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    probe_scratch(scratch)?;
    let mut out = try_alloc_zeroed(rows * width)?;
    if width > 0 {
        if rows * work_per_image >= crate::matrix::PAR_THRESHOLD {
            out.par_chunks_mut(width)
                .enumerate()
                .for_each(|(n, row)| image(n, row));
        } else {
            out.chunks_mut(width)
                .enumerate()
                .for_each(|(n, row)| image(n, row));
        }
    }
    let nnz = count_nnz(&out);
    Ok(dense_result(rows, width, out, nnz))
}

/// Image `n` of `x` as a dense row (a sparse row scattered into `buf`).
fn image_row<'a>(x: &'a Matrix, n: usize, buf: &'a mut Vec<f64>) -> &'a [f64] {
    match x {
        Matrix::Dense(d) => d.row(n),
        Matrix::Sparse(s) => {
            buf.clear();
            buf.resize(s.cols, 0.0);
            let (cols, vals) = s.row(n);
            for (&j, &v) in cols.iter().zip(vals) {
                buf[j as usize] = v;
            }
            buf
        }
    }
}

/// `im2col` of one image: `col[(c*R + r)*S + s][p*Q + q]` is the pixel under filter cell
/// (c, r, s) at output pixel (p, q), 0 in the padding.
fn im2col(image: &[f64], g: &Geometry, col: &mut [f64]) {
    col.fill(0.0);
    let pq = g.pq();
    for c in 0..g.c {
        for r in 0..g.r {
            for s in 0..g.s {
                let row = &mut col[((c * g.r + r) * g.s + s) * pq..][..pq];
                for p in 0..g.p {
                    let h = (p * g.stride_h + r) as i64 - g.pad_h as i64;
                    if h < 0 || h >= g.h as i64 {
                        continue;
                    }
                    let pixels = &image[(c * g.h + h as usize) * g.w..][..g.w];
                    for q in 0..g.q {
                        let w = (q * g.stride_w + s) as i64 - g.pad_w as i64;
                        if w >= 0 && w < g.w as i64 {
                            row[p * g.q + q] = pixels[w as usize];
                        }
                    }
                }
            }
        }
    }
}

/// `out[i][j] += Σ_k a[i][k] * b[k][j]` (a is m x kd, b kd x n, row-major), k ascending,
/// skipping a's zeros: SystemDS's dense product, term by term.
fn multiply_add(a: &[f64], b: &[f64], out: &mut [f64], kd: usize, n: usize) {
    for (a_row, out_row) in a.chunks(kd.max(1)).zip(out.chunks_mut(n.max(1))) {
        for (k, &aik) in a_row.iter().enumerate() {
            if aik == 0.0 {
                continue;
            }
            for (o, &bkj) in out_row.iter_mut().zip(&b[k * n..][..n]) {
                *o += aik * bkj;
            }
        }
    }
}

fn dense_values(m: &Matrix) -> Result<std::borrow::Cow<'_, [f64]>> {
    Ok(match m.dense_cow()? {
        std::borrow::Cow::Borrowed(d) => std::borrow::Cow::Borrowed(&d.values[..]),
        std::borrow::Cow::Owned(d) => std::borrow::Cow::Owned(d.values.to_vec()),
    })
}

fn conv2d(x: &Matrix, f: &Matrix, g: &Geometry) -> Result<Matrix> {
    let (crs, pq) = (g.crs(), g.pq());
    if x.nnz() == 0 || f.nnz() == 0 {
        return Matrix::zeros(g.n, g.k * pq);
    }
    let f = dense_values(f)?;
    per_image(
        g.n,
        g.k * pq,
        g.k * crs * pq,
        crs * pq + g.chw(),
        |n, out| {
            let mut buf = Vec::new();
            let mut col = vec![0.0; crs * pq];
            im2col(image_row(x, n, &mut buf), g, &mut col);
            multiply_add(&f, &col, out, crs, pq);
        },
    )
}

/// Images per partial sum of `conv2d_backward_filter`: partials are added in order, so the
/// result does not depend on the thread count.
const FILTER_GRADIENT_CHUNK: usize = 8;

fn conv2d_backward_filter(x: &Matrix, dout: &Matrix, g: &Geometry) -> Result<Matrix> {
    let (crs, pq, k) = (g.crs(), g.pq(), g.k);
    if x.nnz() == 0 || dout.nnz() == 0 {
        return Matrix::zeros(k, crs);
    }
    // One image's product im2col (CRS x PQ) %*% t(dout[n,]) (PQ x K), summed over the output
    // pixels with im2col's zeros skipped, stored transposed (K x CRS) as SystemDS adds it.
    let image = |n: usize, acc: &mut [f64]| {
        let mut buf = Vec::new();
        let mut col = vec![0.0; crs * pq];
        im2col(image_row(x, n, &mut buf), g, &mut col);
        let mut dbuf = Vec::new();
        let d = image_row(dout, n, &mut dbuf);
        for i in 0..crs {
            let col_row = &col[i * pq..][..pq];
            for kk in 0..k {
                let d_row = &d[kk * pq..][..pq];
                let mut sum = 0.0;
                for (&a, &b) in col_row.iter().zip(d_row) {
                    if a != 0.0 {
                        sum += a * b;
                    }
                }
                acc[kk * crs + i] += sum;
            }
        }
    };
    let chunk_sum = |chunk: usize| -> Vec<f64> {
        let mut acc = vec![0.0; k * crs];
        let first = chunk * FILTER_GRADIENT_CHUNK;
        for n in first..(first + FILTER_GRADIENT_CHUNK).min(g.n) {
            let mut one = vec![0.0; k * crs];
            image(n, &mut one);
            for (a, o) in acc.iter_mut().zip(&one) {
                *a += o;
            }
        }
        acc
    };
    probe_scratch(crs * pq + 2 * k * crs + g.chw() + k * pq)?;
    let chunks = g.n.div_ceil(FILTER_GRADIENT_CHUNK);
    let partials: Vec<Vec<f64>> = if g.n * k * crs * pq >= crate::matrix::PAR_THRESHOLD {
        (0..chunks).into_par_iter().map(chunk_sum).collect()
    } else {
        (0..chunks).map(chunk_sum).collect()
    };
    let mut out = try_alloc_zeroed(k * crs)?;
    for partial in &partials {
        for (o, v) in out.iter_mut().zip(partial) {
            *o += v;
        }
    }
    let nnz = count_nnz(&out);
    Ok(dense_result(k, crs, out, nnz))
}

fn conv2d_backward_data(f: &Matrix, dout: &Matrix, g: &Geometry) -> Result<Matrix> {
    let (crs, pq, k) = (g.crs(), g.pq(), g.k);
    if f.nnz() == 0 || dout.nnz() == 0 {
        return Matrix::zeros(g.n, g.chw());
    }
    let f = dense_values(f)?;
    per_image(
        g.n,
        g.chw(),
        k * crs * pq,
        (k + crs) * pq + k * pq,
        |n, out| {
            let mut dbuf = Vec::new();
            let d = image_row(dout, n, &mut dbuf);
            // t(dout[n,]) (PQ x K) %*% F (K x CRS), k ascending, dout's zeros skipped.
            let mut rotated = vec![0.0; pq * k];
            for kk in 0..k {
                for i in 0..pq {
                    rotated[i * k + kk] = d[kk * pq + i];
                }
            }
            let mut temp = vec![0.0; pq * crs];
            multiply_add(&rotated, &f, &mut temp, k, crs);
            // col2im: each output pixel's window adds its (c, r, s) cells onto the image.
            for p in 0..g.p {
                let (h_off, r_range) = window_range(p, g.stride_h, g.pad_h, g.r, g.h);
                for q in 0..g.q {
                    let (w_off, s_range) = window_range(q, g.stride_w, g.pad_w, g.s, g.w);
                    let cells = &temp[(p * g.q + q) * crs..][..crs];
                    for c in 0..g.c {
                        for r in r_range.clone() {
                            let h = (h_off + r as i64) as usize;
                            for s in s_range.clone() {
                                let w = (w_off + s as i64) as usize;
                                out[(c * g.h + h) * g.w + w] += cells[(c * g.r + r) * g.s + s];
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The offset of output pixel `i`'s window in the image (may be negative) and the filter
/// indices that fall inside the image.
fn window_range(
    i: usize,
    stride: usize,
    pad: usize,
    filter: usize,
    size: usize,
) -> (i64, std::ops::Range<usize>) {
    let offset = (i * stride) as i64 - pad as i64;
    let start = (-offset).max(0) as usize;
    let end = (size as i64 - offset).clamp(0, filter as i64) as usize;
    (offset, start..end.max(start))
}

/// Java's `Math.max`: NaN if either is NaN, and `0.0` above `-0.0`.
fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        a
    } else if a == 0.0 && b == 0.0 && a.is_sign_negative() {
        b
    } else if a >= b {
        a
    } else {
        b
    }
}

/// SystemDS's `LibSpoofPrimitives.vectSum`: the cells that do not fill a group of eight one
/// by one, then each group of eight summed left to right and added.
fn vect_sum(a: &[f64]) -> f64 {
    let rest = a.len() % 8;
    let mut sum = 0.0;
    for &v in &a[..rest] {
        sum += v;
    }
    for g in a[rest..].chunks_exact(8) {
        sum += g[0] + g[1] + g[2] + g[3] + g[4] + g[5] + g[6] + g[7];
    }
    sum
}

fn pool(x: &Matrix, g: &Geometry, max: bool) -> Result<Matrix> {
    let (pq, cpq) = (g.pq(), g.c * g.pq());
    if x.nnz() == 0 {
        return Matrix::zeros(g.n, cpq);
    }
    let multiplier = 1.0 / (g.r * g.s) as f64;
    // SystemDS's stride-1 quick path for one output pixel of a one-column image sums the
    // column in one `vectSum`.
    let one_column = g.stride_h == 1
        && g.stride_w == 1
        && g.pad_h == 0
        && g.pad_w == 0
        && g.p == 1
        && g.q == 1
        && g.w == 1;
    per_image(g.n, cpq, g.chw() * g.r * g.s, g.chw(), |n, out| {
        let mut buf = Vec::new();
        let image = image_row(x, n, &mut buf);
        for c in 0..g.c {
            let channel = &image[c * g.h * g.w..][..g.h * g.w];
            for p in 0..g.p {
                let (h_lo, h_hi) = g.rows_of(p);
                for q in 0..g.q {
                    let (w_lo, w_hi) = g.cols_of(q);
                    let cell = &mut out[c * pq + p * g.q + q];
                    if max {
                        *cell = -f64::MAX;
                        for h in h_lo..h_hi {
                            for &v in &channel[h * g.w + w_lo..h * g.w + w_hi] {
                                *cell = java_max(*cell, v);
                            }
                        }
                    } else if one_column {
                        *cell = vect_sum(&channel[h_lo..h_hi]) * multiplier;
                    } else {
                        *cell = 0.0;
                        for h in h_lo..h_hi {
                            let row = &channel[h * g.w + w_lo..h * g.w + w_hi];
                            *cell += vect_sum(row) * multiplier;
                        }
                    }
                }
            }
        }
    })
}

fn max_pool_backward(x: &Matrix, dout: &Matrix, g: &Geometry) -> Result<Matrix> {
    let pq = g.pq();
    if x.nnz() == 0 || dout.nnz() == 0 {
        return Matrix::zeros(g.n, g.chw());
    }
    per_image(
        g.n,
        g.chw(),
        g.chw() * g.r * g.s,
        g.chw() + g.c * pq,
        |n, out| {
            let mut buf = Vec::new();
            let image = image_row(x, n, &mut buf);
            let mut dbuf = Vec::new();
            let d = image_row(dout, n, &mut dbuf);
            for c in 0..g.c {
                let base = c * g.h * g.w;
                for p in 0..g.p {
                    let (h_lo, h_hi) = g.rows_of(p);
                    for q in 0..g.q {
                        let (w_lo, w_hi) = g.cols_of(q);
                        // The first cell above all before it (`maxVal < v`, from -Infinity).
                        let mut best: Option<usize> = None;
                        let mut best_value = f64::NEG_INFINITY;
                        for h in h_lo..h_hi {
                            for w in w_lo..w_hi {
                                let at = base + h * g.w + w;
                                if best_value < image[at] {
                                    best = Some(at);
                                    best_value = image[at];
                                }
                            }
                        }
                        if let Some(at) = best {
                            out[at] += d[c * pq + p * g.q + q];
                        }
                    }
                }
            }
        },
    )
}

fn avg_pool_backward(dout: &Matrix, g: &Geometry) -> Result<Matrix> {
    let pq = g.pq();
    if dout.nnz() == 0 {
        return Matrix::zeros(g.n, g.chw());
    }
    let multiplier = 1.0 / (g.r * g.s) as f64;
    per_image(g.n, g.chw(), g.chw() * g.r * g.s, g.c * pq, |n, out| {
        let mut dbuf = Vec::new();
        let d = image_row(dout, n, &mut dbuf);
        for c in 0..g.c {
            let base = c * g.h * g.w;
            for p in 0..g.p {
                let (h_lo, h_hi) = g.rows_of(p);
                for q in 0..g.q {
                    let (w_lo, w_hi) = g.cols_of(q);
                    let share = multiplier * d[c * pq + p * g.q + q];
                    for h in h_lo..h_hi {
                        for w in w_lo..w_hi {
                            out[base + h * g.w + w] += share;
                        }
                    }
                }
            }
        }
    })
}

/// `bias_add(X, b)` (`multiply` false) or `bias_multiply(X, b)`: b's k-th value onto X's k-th
/// range of `ncol(X) / nrow(b)` columns. As SystemDS, a product with an all-zero bias is all
/// zeros, and a sparse X's zeros stay zeros (a dense X's meet the bias: `0 * NaN` is NaN).
fn bias(x: &Matrix, b: &Matrix, multiply: bool) -> Result<Matrix> {
    let function = if multiply {
        "bias_multiply"
    } else {
        "bias_add"
    };
    let (rows, cols) = x.shape();
    let k = b.rows();
    if b.cols() != 1 || k == 0 || cols % k != 0 {
        return Err(RuntimeError::Argument {
            function,
            problem: format!(
                "the bias must be a column whose length divides the input's columns: input \
                 {rows}x{cols}, bias {k}x{}",
                b.cols()
            ),
        });
    }
    let width = cols / k;
    let bias: Vec<f64> = (0..k).map(|i| b.get(i, 0)).collect();
    if multiply && b.nnz() == 0 {
        return Matrix::zeros(rows, cols);
    }
    if !multiply && b.nnz() == 0 {
        return x.try_clone();
    }
    let mut out = try_alloc_zeroed(rows * cols)?;
    let apply = |v: f64, j: usize| {
        let beta = bias[j / width.max(1)];
        if multiply {
            v * beta
        } else {
            v + beta
        }
    };
    match x {
        Matrix::Sparse(s) if multiply => {
            for i in 0..rows {
                let (idx, vals) = s.row(i);
                for (&j, &v) in idx.iter().zip(vals) {
                    out[i * cols + j as usize] = apply(v, j as usize);
                }
            }
        }
        _ => {
            for i in 0..rows {
                for j in 0..cols {
                    out[i * cols + j] = apply(x.get(i, j), j);
                }
            }
        }
    }
    let nnz = count_nnz(&out);
    Ok(dense_result(rows, cols, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(rows: usize, cols: usize, values: &[f64]) -> Matrix {
        Matrix::from_dense_values(rows, cols, values.to_vec()).unwrap()
    }

    fn values(m: &Matrix) -> Vec<f64> {
        m.to_dense().unwrap().values.to_vec()
    }

    /// `[sh, sw, ph, pw, N, C, H, W, K, R, S]`.
    #[allow(clippy::too_many_arguments)]
    fn conv_geometry(
        stride: usize,
        pad: usize,
        n: usize,
        c: usize,
        h: usize,
        w: usize,
        k: usize,
        r: usize,
        s: usize,
    ) -> Vec<f64> {
        [stride, stride, pad, pad, n, c, h, w, k, r, s]
            .iter()
            .map(|&v| v as f64)
            .collect()
    }

    /// conv2d by its definition: out[n, k, p, q] = Σ F[k, c, r, s] X[n, c, p*sh - ph + r, ...].
    fn conv2d_by_definition(x: &[f64], f: &[f64], g: &Geometry) -> Vec<f64> {
        let mut out = vec![0.0; g.n * g.k * g.pq()];
        for n in 0..g.n {
            for k in 0..g.k {
                for p in 0..g.p {
                    for q in 0..g.q {
                        let mut sum = 0.0;
                        for c in 0..g.c {
                            for r in 0..g.r {
                                for s in 0..g.s {
                                    let h = (p * g.stride_h + r) as i64 - g.pad_h as i64;
                                    let w = (q * g.stride_w + s) as i64 - g.pad_w as i64;
                                    if h < 0 || w < 0 || h >= g.h as i64 || w >= g.w as i64 {
                                        continue;
                                    }
                                    let xv =
                                        x[n * g.chw() + (c * g.h + h as usize) * g.w + w as usize];
                                    sum += f[k * g.crs() + (c * g.r + r) * g.s + s] * xv;
                                }
                            }
                        }
                        out[n * g.k * g.pq() + k * g.pq() + p * g.q + q] = sum;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn output_sizes_follow_stride_and_padding() {
        let g = Geometry::new(DnnOp::Conv2d, &conv_geometry(2, 1, 3, 2, 5, 4, 6, 3, 3)).unwrap();
        assert_eq!((g.p, g.q), (3, 2)); // (5 + 2 - 3) / 2 + 1, (4 + 2 - 3) / 2 + 1
        let pool = [2.0, 2.0, 0.0, 0.0, 1.0, 3.0, 7.0, 7.0, 2.0, 2.0];
        let g = Geometry::new(DnnOp::MaxPool, &pool).unwrap();
        assert_eq!((g.p, g.q, g.k), (3, 3, 3));
        // A filter larger than the padded image, a zero stride, a negative padding.
        for bad in [
            conv_geometry(1, 0, 1, 1, 2, 2, 1, 3, 3),
            conv_geometry(0, 0, 1, 1, 4, 4, 1, 3, 3),
            [1.0, 1.0, -1.0, 0.0, 1.0, 1.0, 4.0, 4.0, 1.0, 3.0, 3.0].to_vec(),
        ] {
            assert!(Geometry::new(DnnOp::Conv2d, &bad).is_err(), "{bad:?}");
        }
        // Sizes whose products no matrix holds are errors, not overflows.
        let huge = [1.0, 1.0, 0.0, 0.0, 2e9, 2e9, 2e9, 2e9, 2e9, 1.0, 1.0];
        let err = Geometry::new(DnnOp::Conv2d, &huge).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }

    #[test]
    fn conv2d_matches_its_definition_with_stride_and_padding() {
        for (stride, pad) in [(1, 0), (1, 1), (2, 0), (2, 1), (3, 2)] {
            let scalars = conv_geometry(stride, pad, 2, 2, 5, 6, 3, 3, 2);
            let g = Geometry::new(DnnOp::Conv2d, &scalars).unwrap();
            let x: Vec<f64> = (0..g.n * g.chw())
                .map(|i| ((i * 7) % 11) as f64 - 5.0)
                .collect();
            let f: Vec<f64> = (0..g.k * g.crs())
                .map(|i| ((i * 5) % 7) as f64 - 3.0)
                .collect();
            let xm = dense(g.n, g.chw(), &x);
            let fm = dense(g.k, g.crs(), &f);
            let out = dnn(DnnOp::Conv2d, &[&xm, &fm], &scalars).unwrap();
            assert_eq!(out.shape(), (2, 3 * g.pq()));
            assert_eq!(
                values(&out),
                conv2d_by_definition(&x, &f, &g),
                "{stride} {pad}"
            );
            // The gradients are the adjoints of conv2d: <conv2d(X, F), D> equals
            // <X, backward_data(F, D)> and <F, backward_filter(X, D)>, exactly for integers.
            let d: Vec<f64> = (0..g.n * g.k * g.pq())
                .map(|i| ((i * 3) % 5) as f64 - 2.0)
                .collect();
            let dm = dense(g.n, g.k * g.pq(), &d);
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
            let y = values(&out);
            let dx = values(&dnn(DnnOp::Conv2dBackwardData, &[&fm, &dm], &scalars).unwrap());
            let df = values(&dnn(DnnOp::Conv2dBackwardFilter, &[&xm, &dm], &scalars).unwrap());
            assert_eq!(dot(&y, &d), dot(&x, &dx));
            assert_eq!(dot(&y, &d), dot(&f, &df));
        }
    }

    #[test]
    fn inputs_must_match_the_geometry() {
        let scalars = conv_geometry(1, 0, 2, 1, 3, 3, 1, 2, 2);
        let x = dense(2, 9, &[1.0; 18]);
        let wrong_filter = dense(1, 5, &[1.0; 5]);
        let err = dnn(DnnOp::Conv2d, &[&x, &wrong_filter], &scalars).unwrap_err();
        assert!(err.to_string().contains("filter must be 1x4"), "{err}");
        let wrong_input = dense(3, 9, &[1.0; 27]);
        assert!(dnn(
            DnnOp::MaxPool,
            &[&wrong_input],
            &[1.0, 1.0, 0.0, 0.0, 2.0, 1.0, 3.0, 3.0, 2.0, 2.0]
        )
        .is_err());
    }

    #[test]
    fn max_pooling_clips_windows_to_the_image_and_routes_gradients_to_the_first_maximum() {
        // One 3x3 image, 2x2 windows, stride 2, padding 1: windows of 1, 2, 2 and 4 cells.
        let x = dense(1, 9, &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, 7.0, 7.0, -9.0]);
        let scalars = [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 2.0, 2.0];
        let out = dnn(DnnOp::MaxPool, &[&x], &scalars).unwrap();
        // Padding is no value: the corner window's maximum is -1, not 0.
        assert_eq!(values(&out), [-1.0, -2.0, 7.0, 7.0]);
        let avg = dnn(DnnOp::AvgPool, &[&x], &scalars).unwrap();
        // The divisor counts the clipped cells: -1/4, (-2 - 3)/4, (-4 + 7)/4, (-5 - 6 + 7 - 9)/4.
        assert_eq!(values(&avg), [-0.25, -1.25, 0.75, -3.25]);
        let dout = dense(1, 4, &[1.0, 2.0, 3.0, 4.0]);
        let dx = dnn(DnnOp::MaxPoolBackward, &[&x, &dout], &scalars).unwrap();
        // The tie of 7s in the bottom-right window goes to the first.
        assert_eq!(values(&dx), [1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 4.0, 0.0]);
        let davg = dnn(DnnOp::AvgPoolBackward, &[&x, &dout], &scalars).unwrap();
        assert_eq!(
            values(&davg),
            [0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.75, 1.0, 1.0]
        );
    }

    #[test]
    fn overlapping_max_windows_add_their_gradients() {
        // 1x3 image, windows of 1x2 at stride 1: both windows pick the middle cell.
        let x = dense(1, 3, &[1.0, 5.0, 2.0]);
        let dout = dense(1, 2, &[10.0, 20.0]);
        let scalars = [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 3.0, 1.0, 2.0];
        let dx = dnn(DnnOp::MaxPoolBackward, &[&x, &dout], &scalars).unwrap();
        assert_eq!(values(&dx), [0.0, 30.0, 0.0]);
    }

    #[test]
    fn max_follows_java_for_nan_and_infinities() {
        let x = dense(1, 4, &[f64::NEG_INFINITY, f64::NEG_INFINITY, 1.0, f64::NAN]);
        let scalars = [2.0, 2.0, 0.0, 0.0, 1.0, 1.0, 1.0, 4.0, 1.0, 2.0];
        let out = values(&dnn(DnnOp::MaxPool, &[&x], &scalars).unwrap());
        // A window of -Infinity keeps the starting -Double.MAX_VALUE; NaN wins.
        assert_eq!(out[0], -f64::MAX);
        assert!(out[1].is_nan());
        let dout = dense(1, 2, &[1.0, 1.0]);
        // No cell exceeds -Infinity in the first window; NaN is never the maximum.
        let dx = values(&dnn(DnnOp::MaxPoolBackward, &[&x, &dout], &scalars).unwrap());
        assert_eq!(dx, [0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn vect_sum_groups_eight_after_the_rest() {
        let a: Vec<f64> = (1..=11).map(|i| 1.0 / i as f64).collect();
        let rest: f64 = a[0] + a[1] + a[2];
        let group = a[3] + a[4] + a[5] + a[6] + a[7] + a[8] + a[9] + a[10];
        assert_eq!(vect_sum(&a).to_bits(), (rest + group).to_bits());
    }

    #[test]
    fn bias_add_and_multiply_per_channel() {
        let x = dense(2, 4, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let b = dense(2, 1, &[10.0, -1.0]);
        let added = dnn(DnnOp::BiasAdd, &[&x, &b], &[]).unwrap();
        assert_eq!(values(&added), [11.0, 12.0, 2.0, 3.0, 15.0, 16.0, 6.0, 7.0]);
        let multiplied = dnn(DnnOp::BiasMultiply, &[&x, &b], &[]).unwrap();
        assert_eq!(
            values(&multiplied),
            [10.0, 20.0, -3.0, -4.0, 50.0, 60.0, -7.0, -8.0]
        );
        let zero = dense(2, 1, &[0.0, 0.0]);
        let with_nan = dense(1, 2, &[f64::NAN, 1.0]);
        let zeroed = dnn(DnnOp::BiasMultiply, &[&with_nan, &zero], &[]).unwrap();
        assert_eq!(values(&zeroed), [0.0, 0.0]);
        let odd = dense(3, 1, &[1.0, 2.0, 3.0]);
        assert!(dnn(DnnOp::BiasAdd, &[&x, &odd], &[]).is_err());
    }
}
