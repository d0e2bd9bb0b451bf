//! `t(Z) %*% Z` for `Z = cbind(X, dX)` from a cached `t(X) %*% X`: the cross and new diagonal
//! blocks by dgemm (steplm's inner loop, LIMA Figure 7a).
//!
//! Two forms. Plain partial reuse finds `Z` made and reads it in place. Under compiler
//! assistance the plan never makes `Z` (`Op::TransposeSelfMatMulOfCbind` reads `X` and `dX`),
//! and where `t(X) %*% X` is not cached yet this computes it with the `tsmm` kernel and puts
//! it, so that the next candidate finds it.

use super::{cbind_of_two, dense_part, product, product_item, transpose_item, transposed};
use super::{Operation, PartialRewrite};
use lafuse_runtime::exec::Op;
use lafuse_runtime::kernels::{self, index::binding_is_dense, partial};
use lafuse_runtime::lineage::cache::{Probe, ReuseCache};
use lafuse_runtime::value::Value;
use lafuse_runtime::{Matrix, Result};
use std::time::Instant;

pub(crate) struct TsmmOfCbind;

impl PartialRewrite for TsmmOfCbind {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        let Some((t, z)) = product(op.item) else {
            return Ok(None);
        };
        if transposed(t) != Some(z) {
            return Ok(None);
        }
        let Some((x, _)) = cbind_of_two(z) else {
            return Ok(None);
        };
        let left_item = product_item(&transpose_item(x), x);
        if matches!(op.op, Op::TransposeSelfMatMulOfCbind) {
            return of_parts(op, cache, &left_item);
        }
        // `tsmm` reads Z alone; a product of a computed `t(Z)` reads both (dgemm either way).
        let all_dense = (0..op.operands.len()).all(|i| op.dense(i).is_some());
        let Some(zv) = op.operands.len().checked_sub(1).and_then(|i| op.dense(i)) else {
            return Ok(None);
        };
        if !all_dense || zv.rows == 0 {
            return Ok(None);
        }
        let Some(left) = dense_part(cache, &left_item) else {
            return Ok(None);
        };
        // A 1 x 1 `t(X) %*% X` may have come from a dot product (a product of a computed
        // `t(X)`), not dgemm.
        let k = left.rows();
        if k < 2 || left.cols() != k || k >= zv.cols {
            return Ok(None);
        }
        Ok(Some(Value::matrix(partial::tsmm_of_cbind(&left, zv)?)))
    }
}

/// The compiler-assisted form: operands `X` and `dX`. Where the `cbind` would have been sparse
/// (its `tsmm` then takes the sparse path), or a part is, the instruction runs as it stands.
fn of_parts(
    op: &Operation<'_>,
    cache: &ReuseCache,
    left_item: &lafuse_runtime::lineage::Lineage,
) -> Result<Option<Value>> {
    let (Some(xm @ Matrix::Dense(x)), Some(dx)) = (op.matrix(0), op.dense(1)) else {
        return Ok(None);
    };
    // NaN/±Inf take tsmm's zero-skipping product, which no compensation continues.
    if op.dense(0).is_none() {
        return Ok(None);
    }
    let (m, k, d) = (x.rows, x.cols, dx.cols);
    if m == 0 || d == 0 || dx.rows != m || !binding_is_dense(m, k + d, x.nnz + dx.nnz) {
        return Ok(None);
    }
    let cached = dense_part(cache, left_item).filter(|l| l.shape() == (k, k) && k >= 2);
    let left = match cached {
        Some(left) => left,
        None => {
            // X is dense, so the kernel takes its dgemm path, as on the whole of Z.
            let started = Instant::now();
            let left = Value::matrix(kernels::tsmm(xm)?);
            if let Probe::Miss(reservation) = cache.probe(left_item) {
                cache.put_computed(reservation, &left, started.elapsed(), true);
            }
            left.as_matrix()?.clone()
        }
    };
    Ok(Some(Value::matrix(partial::tsmm_of_parts(&left, x, dx)?)))
}
