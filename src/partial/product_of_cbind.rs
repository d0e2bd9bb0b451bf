//! `X %*% cbind(Y, dY)` from a cached `X %*% Y`: the columns of `X %*% dY` right of it.

use super::{cbind_of_two, dense_part, product, product_item, transposed};
use super::{Operation, PartialRewrite};
use lafuse_runtime::kernels::partial::{dense_product_uses_dgemm, product_of_cbind};
use lafuse_runtime::lineage::cache::ReuseCache;
use lafuse_runtime::value::Value;
use lafuse_runtime::Result;

pub(crate) struct ProductOfCbind;

impl PartialRewrite for ProductOfCbind {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        let Some((x, yb)) = product(op.item) else {
            return Ok(None);
        };
        // With `t(A)` on the left the operand is `A`, read transposed in place.
        if transposed(x).is_some() {
            return Ok(None);
        }
        let Some((y, _)) = cbind_of_two(yb) else {
            return Ok(None);
        };
        let (Some(a), Some(b), 2) = (op.dense(0), op.dense(1), op.operands.len()) else {
            return Ok(None);
        };
        if !dense_product_uses_dgemm(a.rows, b.cols) {
            return Ok(None);
        }
        let Some(left) = dense_part(cache, &product_item(x, y)) else {
            return Ok(None);
        };
        let (m, ny) = left.shape();
        if m != a.rows || ny >= b.cols || !dense_product_uses_dgemm(m, ny) {
            return Ok(None);
        }
        Ok(Some(Value::matrix(product_of_cbind(&left, a, b)?)))
    }
}
