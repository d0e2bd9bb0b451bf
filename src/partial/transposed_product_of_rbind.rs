//! `t(rbind(A, dA)) %*% rbind(yA, dy)` for a column vector `y` from a cached `t(A) %*% yA`:
//! the rows of `dA` continue the sums (k-fold cross-validation, where the training set is the
//! folds bound together, LIMA section 4.4).
//!
//! Only under compiler assistance (`Op::TransposedLeftMatMulOfRbind` reads the four parts):
//! the item of the product does not say where the rows split, the parts do. Where
//! `t(A) %*% yA` is not cached yet this computes it with the kernel and puts it.

use super::{dense_part, product, product_item, rbind_of_two, transpose_item, transposed};
use super::{Operation, PartialRewrite};
use lafuse_runtime::exec::Op;
use lafuse_runtime::kernels::{self, index::binding_is_dense, partial};
use lafuse_runtime::lineage::cache::{Probe, ReuseCache};
use lafuse_runtime::value::Value;
use lafuse_runtime::{Matrix, Result};
use std::time::Instant;

pub(crate) struct TransposedProductOfRbind;

impl PartialRewrite for TransposedProductOfRbind {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        if !matches!(op.op, Op::TransposedLeftMatMulOfRbind) {
            return Ok(None);
        }
        let Some((t, y)) = product(op.item) else {
            return Ok(None);
        };
        let (Some(x), Some((ly, _))) = (transposed(t), rbind_of_two(y)) else {
            return Ok(None);
        };
        let Some((la, _)) = rbind_of_two(x) else {
            return Ok(None);
        };
        let (Some(am @ Matrix::Dense(a)), Some(da), Some(yam @ Matrix::Dense(ya)), Some(dy)) =
            (op.matrix(0), op.dense(1), op.matrix(2), op.dense(3))
        else {
            return Ok(None);
        };
        // The full product runs the dense vector-matrix pass only over dense concatenations.
        let k = a.cols;
        let (m, dm) = (a.rows, da.rows);
        if da.cols != k
            || ya.cols != 1
            || dy.cols != 1
            || ya.rows != m
            || dy.rows != dm
            || !binding_is_dense(m + dm, k, a.nnz + da.nnz)
            || !binding_is_dense(m + dm, 1, ya.nnz + dy.nnz)
        {
            return Ok(None);
        }
        let top_item = product_item(&transpose_item(la), ly);
        let top = match dense_part(cache, &top_item).filter(|t| t.shape() == (k, 1)) {
            Some(top) => top,
            None => {
                // A and yA are dense: the kernel's vector-matrix pass, as over the whole.
                let started = Instant::now();
                let top = Value::matrix(kernels::matmul_tn(am, yam)?);
                if let Probe::Miss(reservation) = cache.probe(&top_item) {
                    cache.put_computed(reservation, &top, started.elapsed(), true);
                }
                top.as_matrix()?.clone()
            }
        };
        Ok(Some(Value::matrix(partial::transposed_product_of_rbind(
            &top, da, dy,
        )?)))
    }
}
