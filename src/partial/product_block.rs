//! `X %*% Y[, cols]` and `X[rows, ] %*% Y` from a cached `X %*% Y`: its columns or rows (the
//! projections onto the first K eigenvectors of PCA for several K, LIMA section 4.2).

use super::{dense_part, index, product, product_item, transposed};
use super::{Operation, PartialRewrite};
use lafuse_runtime::kernels::partial::{block_of_product, dense_product_uses_dgemm};
use lafuse_runtime::lineage::cache::ReuseCache;
use lafuse_runtime::value::Value;
use lafuse_runtime::Result;

pub(crate) struct ProductOfBlock;

impl PartialRewrite for ProductOfBlock {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        let Some((xa, yb)) = product(op.item) else {
            return Ok(None);
        };
        if transposed(xa).is_some() {
            return Ok(None);
        }
        let (Some(a), Some(b), 2) = (op.dense(0), op.dense(1), op.operands.len()) else {
            return Ok(None);
        };
        let (m, n) = (a.rows, b.cols);
        if !dense_product_uses_dgemm(m, n) {
            return Ok(None);
        }
        // X %*% Y[, c0..], the slice keeping all of Y's k rows (it has k rows, as Y has).
        if let Some((y, Some(0), Some(c0))) = index(yb) {
            if let Some(full) = dense_part(cache, &product_item(xa, y)) {
                let (fm, fn_) = full.shape();
                if fm == m && c0 + n <= fn_ && dense_product_uses_dgemm(fm, fn_) {
                    return Ok(Some(Value::matrix(block_of_product(
                        &full,
                        0..m,
                        c0..c0 + n,
                    )?)));
                }
            }
        }
        // X[r0.., ] %*% Y, the slice keeping all of X's k columns.
        if let Some((x, Some(r0), Some(0))) = index(xa) {
            if let Some(full) = dense_part(cache, &product_item(x, yb)) {
                let (fm, fn_) = full.shape();
                if fn_ == n && r0 + m <= fm && dense_product_uses_dgemm(fm, fn_) {
                    return Ok(Some(Value::matrix(block_of_product(
                        &full,
                        r0..r0 + m,
                        0..n,
                    )?)));
                }
            }
        }
        Ok(None)
    }
}
