//! Operations on whole matrices that have no per-cell semantics: order statistics and
//! moments, and the decompositions of linear algebra. The HOP IR and the runtime share these
//! enums, as they share the element-wise ones of [`crate::ops`]; the kernels live in the
//! runtime (`kernels::stats`, `kernels::linalg`).

use crate::named_ops;

named_ops! {
    /// Statistics of column vectors (SystemDS's `qpick`, `qsort`, `cm`, `cov`): the inputs
    /// of each are listed by [`StatOp::arity`] and the variant's doc.
    StatOp {
        /// `quantile(X, p)`: `[X, p]`; p a scalar gives a scalar, p a column of
        /// probabilities a column of quantiles.
        Quantile = "quantile",
        /// `quantile(X, W, p)`: `[X, W, p]`, W integer weights (counts).
        WeightedQuantile = "wquantile",
        /// `median(X)`: `[X]`.
        Median = "median",
        /// `median(X, W)`: `[X, W]`.
        WeightedMedian = "wmedian",
        /// `interQuartileMean(X)`: `[X]`, the mean of the values between the quartiles.
        Iqm = "iqm",
        /// `interQuartileMean(X, W)`: `[X, W]`.
        WeightedIqm = "wiqm",
        /// `moment(X, k)`: `[X, k]`, the k-th central moment (k in 2, 3, 4), denominator n.
        Moment = "moment",
        /// `moment(X, W, k)`: `[X, W, k]`.
        WeightedMoment = "wmoment",
        /// `cov(X, Y)`: `[X, Y]`, the sample covariance (denominator n - 1).
        Cov = "cov",
        /// `cov(X, Y, W)`: `[X, Y, W]`.
        WeightedCov = "wcov",
        /// `pnorm(x, mean, sd, lower.tail)` and `cdf(dist="normal")`: `[x, mean, sd, lower]`,
        /// all scalars, as every distribution function's.
        NormalCdf = "pnorm",
        /// `pexp(x, rate, lower.tail)`: `[x, rate, lower]`.
        ExpCdf = "pexp",
        /// `pchisq(x, df, lower.tail)`: `[x, df, lower]`.
        ChisqCdf = "pchisq",
        /// `pf(x, df1, df2, lower.tail)`: `[x, df1, df2, lower]`.
        FCdf = "pf",
        /// `pt(x, df, lower.tail)`: `[x, df, lower]`.
        TCdf = "pt",
        /// `qnorm(p, mean, sd)` and `icdf(dist="normal")`: `[p, mean, sd]`.
        NormalQuantile = "qnorm",
        /// `qexp(p, rate)`: `[p, rate]`.
        ExpQuantile = "qexp",
        /// `qchisq(p, df)`: `[p, df]`.
        ChisqQuantile = "qchisq",
        /// `qf(p, df1, df2)`: `[p, df1, df2]`.
        FQuantile = "qf",
        /// `qt(p, df)`: `[p, df]`.
        TQuantile = "qt",
    }
}

impl StatOp {
    /// The number of inputs.
    pub fn arity(self) -> usize {
        use StatOp::*;
        match self {
            Median | Iqm => 1,
            Quantile | WeightedMedian | WeightedIqm | Moment | Cov => 2,
            WeightedQuantile | WeightedMoment | WeightedCov => 3,
            ExpQuantile | ChisqQuantile | TQuantile => 2,
            ExpCdf | ChisqCdf | TCdf | NormalQuantile | FQuantile => 3,
            NormalCdf | FCdf => 4,
        }
    }

    /// A distribution function (SystemDS's `cdf`, `icdf`, `pnorm`, `qt`, ...): scalar inputs,
    /// a scalar result.
    pub fn is_distribution(self) -> bool {
        use StatOp::*;
        matches!(
            self,
            NormalCdf
                | ExpCdf
                | ChisqCdf
                | FCdf
                | TCdf
                | NormalQuantile
                | ExpQuantile
                | ChisqQuantile
                | FQuantile
                | TQuantile
        )
    }

    /// Whether the result is a matrix for these input kinds (`quantile` with a column of
    /// probabilities); otherwise a double scalar.
    pub fn matrix_result(self, last_input_is_matrix: bool) -> bool {
        matches!(self, StatOp::Quantile | StatOp::WeightedQuantile) && last_input_is_matrix
    }
}

named_ops! {
    /// Functions of one square matrix (all but `trace` through a decomposition): inputs `[A]`.
    LinAlgOp {
        /// `inv(A)`: the inverse (SystemDS: through QR).
        Inverse = "inv",
        /// `cholesky(A)`: the lower triangular `L` with `L %*% t(L) == A`.
        Cholesky = "cholesky",
        /// `det(A)`: the determinant, a double scalar (SystemDS: through LU).
        Det = "det",
        /// `trace(A)`: the sum of the diagonal, a double scalar (SystemDS: a Kahan sum).
        Trace = "trace",
        /// `sqrtMatrixJava(A)`: the symmetric positive semi-definite square root `B` with
        /// `B %*% B == A`, `V sqrt(D) t(V)` of A's eigendecomposition (SystemDS: Commons
        /// Math's `EigenDecomposition.getSquareRoot`).
        SqrtMatrix = "sqrtMatrixJava",
    }
}

named_ops! {
    /// Decompositions with several results (DML's `[a, b] = eigen(A)`): inputs `[A]`; each
    /// result is its own hop, which names the result it is (see [`DecompOp::outputs`]).
    DecompOp {
        /// `[values, vectors] = eigen(A)` of a symmetric A: the eigenvalues ascending (n x 1)
        /// and the eigenvectors as columns in that order (n x n).
        Eigen = "eigen",
        /// `[U, S, V] = svd(A)`: A m x n, p = min(m, n): U m x p, S = diag(sigma) p x p
        /// (descending), V n x p.
        Svd = "svd",
        /// `[P, L, U] = lu(A)`: partial pivoting, `P %*% A == L %*% U` (all n x n).
        Lu = "lu",
        /// `[H, R] = qr(A)`: A m x n; H the Householder vectors (m x n, lower trapezoidal,
        /// each scaled by its reflector's tau as Apache Commons Math's `getH`), R m x n.
        Qr = "qr",
    }
}

impl DecompOp {
    /// The number of results.
    pub fn outputs(self) -> usize {
        match self {
            DecompOp::Eigen | DecompOp::Qr => 2,
            DecompOp::Svd | DecompOp::Lu => 3,
        }
    }
}

named_ops! {
    /// SystemDS's deep-learning built-ins over images stored one per row, each channel's
    /// `H x W` pixels row-major after the previous channel's (NCHW). The inputs of each are
    /// listed by [`DnnOp::arity`]: the matrices first, then the scalars of its geometry in
    /// SystemDS's order (stride, padding, input shape, filter shape).
    DnnOp {
        /// `conv2d(X, F, ...)`: `[X, F, sh, sw, ph, pw, N, C, H, W, K, R, S]`; X is N x CHW,
        /// F is K x CRS, the result N x KPQ (cross-correlation, zero padding).
        Conv2d = "conv2d",
        /// `conv2d_backward_filter(X, dout, ...)`: `[X, dout, sh, ..., S]` as conv2d; the
        /// gradient of the filter, K x CRS.
        Conv2dBackwardFilter = "conv2d_backward_filter",
        /// `conv2d_backward_data(F, dout, ...)`: `[F, dout, sh, ..., S]` as conv2d; the
        /// gradient of the input, N x CHW.
        Conv2dBackwardData = "conv2d_backward_data",
        /// `max_pool(X, ...)`: `[X, sh, sw, ph, pw, N, C, H, W, R, S]` (R x S the pool size);
        /// N x CPQ, padding not a value (each window clipped to the image).
        MaxPool = "max_pool",
        /// `max_pool_backward(X, dout, ...)`: `[X, dout, sh, ..., S]` as max_pool; N x CHW, each
        /// window's gradient on its first maximum.
        MaxPoolBackward = "max_pool_backward",
        /// `avg_pool(X, ...)`: as max_pool; each window's sum divided by R*S.
        AvgPool = "avg_pool",
        /// `avg_pool_backward(X, dout, ...)`: as max_pool_backward.
        AvgPoolBackward = "avg_pool_backward",
        /// `bias_add(X, b)`: `[X, b]`; b is K x 1, added to each of K equal column ranges of X.
        BiasAdd = "bias_add",
        /// `bias_multiply(X, b)`: `[X, b]`; as bias_add with a product.
        BiasMultiply = "bias_multiply",
    }
}

impl DnnOp {
    /// The number of inputs: its matrices, then its geometry's scalars.
    pub fn arity(self) -> usize {
        self.matrix_inputs() + self.geometry_inputs()
    }

    /// The number of matrix inputs (the first inputs).
    pub fn matrix_inputs(self) -> usize {
        match self {
            DnnOp::MaxPool | DnnOp::AvgPool => 1,
            _ => 2,
        }
    }

    /// The number of scalars after the matrices: stride, padding and input shape (8), then the
    /// filter's count and size (3) or the pool's size (2); none for the bias functions.
    pub fn geometry_inputs(self) -> usize {
        match self {
            DnnOp::Conv2d | DnnOp::Conv2dBackwardFilter | DnnOp::Conv2dBackwardData => 11,
            DnnOp::MaxPool | DnnOp::AvgPool | DnnOp::MaxPoolBackward | DnnOp::AvgPoolBackward => 10,
            DnnOp::BiasAdd | DnnOp::BiasMultiply => 0,
        }
    }

    /// A pooling function (its filter is a window of size `pool_size`, one per channel).
    pub fn is_pooling(self) -> bool {
        matches!(
            self,
            DnnOp::MaxPool | DnnOp::AvgPool | DnnOp::MaxPoolBackward | DnnOp::AvgPoolBackward
        )
    }
}
