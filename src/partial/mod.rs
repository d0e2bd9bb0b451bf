//! Partial reuse (LIMA section 4.2): an operation whose output missed the cache is computed
//! from cached parts plus a compensation, one rewrite per file behind [`PartialRewrite`], tried
//! in the order of [`REWRITES`].
//!
//! A rewrite matches the output's lineage item, which names the hops computed
//! ([`crate::lineage`]), builds the items of the parts it wants, peeks the cache for them, and
//! computes the rest with `lafuse_runtime::kernels::partial`, whose kernels continue the dense
//! kernels' arithmetic. Reuse never changes a result, so each rewrite applies only where that
//! holds: operands dense and finite now, the cached part computed from such operands (the
//! cache records it), and the full kernel and the part's on the same path (dgemm for products). Elsewhere
//! the operation just runs. `kernels::partial`'s tests pin each compensation against its
//! kernel; `tests/reuse.rs` the rewrites against runs without reuse.
//!
//! `t(X) %*% y` over `rbind` is rewritten only under compiler assistance, which reads the
//! parts: the item does not say where the rows split. Not rewritten, because no compensation
//! reproduces the kernel's order of summation: `tsmm(rbind(X, dX))` and `t(X) %*% Y` over
//! `rbind` with more than one column (dgemm sums a cell over the inner dimension in one pass,
//! not as two sums added).

mod col_aggregate_of_cbind;
mod product_block;
mod product_of_cbind;
mod product_of_rbind;
mod transposed_product_of_rbind;
mod tsmm_of_cbind;

use crate::lineage::{hop_opcode_data, literal_of_item};
use lafuse_compiler::hops::{Literal, NaryOp, OpKind, ReorgOp};
use lafuse_runtime::exec::Op;
use lafuse_runtime::lineage::cache::{Peeked, ReuseCache};
use lafuse_runtime::lineage::reuse::Compensations;
use lafuse_runtime::lineage::{ItemKind, Lineage};
use lafuse_runtime::value::Value;
use lafuse_runtime::{DenseMatrix, Matrix, Result};
use std::sync::LazyLock;

/// One partial-reuse rewrite: a source pattern over an output's item, the parts it reuses,
/// and its compensation.
pub(crate) trait PartialRewrite: Sync {
    /// The output of `op` computed from cached parts, or `None` where the rewrite does not
    /// apply (no match, a part not cached, or a kernel path it cannot continue exactly).
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>>;
}

/// The rewrites, in the order they are tried.
pub(crate) const REWRITES: &[&dyn PartialRewrite] = &[
    &tsmm_of_cbind::TsmmOfCbind,
    &product_of_rbind::ProductOfRbind,
    &product_of_cbind::ProductOfCbind,
    &product_block::ProductOfBlock,
    &col_aggregate_of_cbind::ColAggregateOfCbind,
    &transposed_product_of_rbind::TransposedProductOfRbind,
];

/// The run's partial reuse, as the executor asks for it.
pub(crate) struct PartialReuse;

impl Compensations for PartialReuse {
    fn compensate(
        &self,
        op: &Op,
        item: &Lineage,
        operands: &[&Value],
        cache: &ReuseCache,
    ) -> Result<Option<Value>> {
        let op = Operation { op, item, operands };
        for rewrite in REWRITES {
            if let Some(value) = rewrite.apply(&op, cache)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }
}

/// The operation whose output missed: what it is, its output's item and its operands' values.
pub(crate) struct Operation<'a> {
    pub(crate) op: &'a Op,
    pub(crate) item: &'a Lineage,
    pub(crate) operands: &'a [&'a Value],
}

impl Operation<'_> {
    /// Operand `i` if it is a matrix.
    pub(crate) fn matrix(&self, i: usize) -> Option<&Matrix> {
        match self.operands.get(i)? {
            Value::Matrix(m) => Some(m),
            _ => None,
        }
    }

    /// Operand `i` if it is a dense matrix of finite values: NaN/±Inf take the products'
    /// zero-skipping kernel, not the dgemm the compensations continue.
    pub(crate) fn dense(&self, i: usize) -> Option<&DenseMatrix> {
        match self.matrix(i)? {
            Matrix::Dense(d) if lafuse_runtime::matrix::all_finite(&d.values) => Some(d),
            _ => None,
        }
    }
}

/// The opcode and data of the items of the hops the rewrites match.
struct Signatures {
    matmul: (String, String),
    transpose: (String, String),
    cbind: (String, String),
    rbind: (String, String),
    index: (String, String),
}

static SIGNATURES: LazyLock<Signatures> = LazyLock::new(|| Signatures {
    matmul: hop_opcode_data(&OpKind::MatMul),
    transpose: hop_opcode_data(&OpKind::Reorg(ReorgOp::Transpose)),
    cbind: hop_opcode_data(&OpKind::Nary(NaryOp::Cbind)),
    rbind: hop_opcode_data(&OpKind::Nary(NaryOp::Rbind)),
    index: hop_opcode_data(&OpKind::Index),
});

fn is(item: &Lineage, signature: &(String, String)) -> bool {
    item.kind() == ItemKind::Instruction
        && item.opcode() == signature.0
        && item.data() == signature.1
}

fn item_of(signature: &(String, String), inputs: Vec<Lineage>) -> Lineage {
    Lineage::instruction(signature.0.as_str(), signature.1.as_str(), inputs)
}

/// `A %*% B`'s operands' items.
pub(crate) fn product(item: &Lineage) -> Option<(&Lineage, &Lineage)> {
    match item.inputs() {
        [a, b] if is(item, &SIGNATURES.matmul) => Some((a, b)),
        _ => None,
    }
}

/// The item of `A %*% B`.
pub(crate) fn product_item(a: &Lineage, b: &Lineage) -> Lineage {
    item_of(&SIGNATURES.matmul, vec![a.clone(), b.clone()])
}

/// `t(X)`'s operand's item.
pub(crate) fn transposed(item: &Lineage) -> Option<&Lineage> {
    match item.inputs() {
        [x] if is(item, &SIGNATURES.transpose) => Some(x),
        _ => None,
    }
}

/// The item of `t(X)`.
pub(crate) fn transpose_item(x: &Lineage) -> Lineage {
    item_of(&SIGNATURES.transpose, vec![x.clone()])
}

/// The two operands' items of `cbind(X, dX)` (two operands only).
pub(crate) fn cbind_of_two(item: &Lineage) -> Option<(&Lineage, &Lineage)> {
    match item.inputs() {
        [x, dx] if is(item, &SIGNATURES.cbind) => Some((x, dx)),
        _ => None,
    }
}

/// The two operands' items of `rbind(X, dX)` (two operands only).
pub(crate) fn rbind_of_two(item: &Lineage) -> Option<(&Lineage, &Lineage)> {
    match item.inputs() {
        [x, dx] if is(item, &SIGNATURES.rbind) => Some((x, dx)),
        _ => None,
    }
}

/// `X[rl:ru, cl:cu]`: `X`'s item and the first row and column, 0-based, where they are
/// literals. The upper bounds are not needed: the slice's shape is its operand's, and a
/// bound computed from a loop variable is an operation's item, not a literal.
pub(crate) fn index(item: &Lineage) -> Option<(&Lineage, Option<usize>, Option<usize>)> {
    match item.inputs() {
        [x, rl, _, cl, _] if is(item, &SIGNATURES.index) => Some((
            x,
            bound(rl).and_then(|b| b.checked_sub(1)),
            bound(cl).and_then(|b| b.checked_sub(1)),
        )),
        _ => None,
    }
}

/// A literal item's value as an index bound.
fn bound(item: &Lineage) -> Option<usize> {
    if item.kind() != ItemKind::Literal {
        return None;
    }
    match literal_of_item(item.data())? {
        Literal::Int(i) => usize::try_from(i).ok(),
        Literal::Double(d) if d.fract() == 0.0 && d >= 0.0 && d < 2f64.powi(53) => Some(d as usize),
        _ => None,
    }
}

/// The cached value of `item` if it was computed from dense operands.
pub(crate) fn dense_part(cache: &ReuseCache, item: &Lineage) -> Option<std::sync::Arc<Matrix>> {
    match cache.peek(item)? {
        Peeked {
            value: Value::Matrix(m),
            dense_operands: true,
        } => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_the_items_hops_get() {
        let x = Lineage::creation("read", "x");
        let t = transpose_item(&x);
        assert_eq!(transposed(&t).map(|i| i.same(&x)), Some(true));
        let p = product_item(&t, &x);
        assert!(product(&p).is_some());
        let (op, data) = hop_opcode_data(&OpKind::MatMul);
        assert!(p.opcode() == op && p.data() == data);
    }

    #[test]
    fn index_bounds_are_read_from_literal_items_only() {
        let x = Lineage::creation("read", "x");
        let lit = |v: i64| crate::lineage::literal_item(&Literal::Int(v));
        let ix = item_of(
            &SIGNATURES.index,
            vec![x.clone(), lit(1), lit(4), lit(2), lit(3)],
        );
        let (_, row, col) = index(&ix).unwrap();
        assert_eq!((row, col), (Some(0), Some(1)));
        let computed = item_of(
            &SIGNATURES.index,
            vec![x.clone(), x.clone(), lit(4), lit(0), x.clone()],
        );
        assert_eq!(index(&computed).map(|(_, r, c)| (r, c)), Some((None, None)));
    }
}
