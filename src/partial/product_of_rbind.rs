//! `rbind(X, dX) %*% Y` from a cached `X %*% Y`: the rows of `dX %*% Y` below it.

use super::{dense_part, product, product_item, rbind_of_two, Operation, PartialRewrite};
use lafuse_runtime::kernels::partial::{dense_product_uses_dgemm, product_of_rbind};
use lafuse_runtime::lineage::cache::ReuseCache;
use lafuse_runtime::value::Value;
use lafuse_runtime::Result;

pub(crate) struct ProductOfRbind;

impl PartialRewrite for ProductOfRbind {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        let Some((ab, y)) = product(op.item) else {
            return Ok(None);
        };
        let Some((x, _)) = rbind_of_two(ab) else {
            return Ok(None);
        };
        let (Some(a), Some(b), 2) = (op.dense(0), op.dense(1), op.operands.len()) else {
            return Ok(None);
        };
        if !dense_product_uses_dgemm(a.rows, b.cols) {
            return Ok(None);
        }
        let Some(top) = dense_part(cache, &product_item(x, y)) else {
            return Ok(None);
        };
        let (mx, n) = top.shape();
        if n != b.cols || mx >= a.rows || !dense_product_uses_dgemm(mx, n) {
            return Ok(None);
        }
        Ok(Some(Value::matrix(product_of_rbind(&top, a, b)?)))
    }
}
