//! The Cell template (paper section 2.2, reference 3.1): a scalar function evaluated per cell
//! of the main input, with side inputs read cell-aligned or broadcast, and an optional row-,
//! column- or full aggregation (`sum`, sum of squares, `min`, `max`).

use super::Template;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, TemplateKind};
use crate::hops::{AggOp, BinaryOp, Direction, HopId, NaryOp, OpKind, TernaryOp};

/// The Cell template.
#[derive(Clone, Copy, Debug, Default)]
pub struct CellTemplate;

/// The aggregations a Cell operator can perform (reference 3.1 `SUPPORTED_AGG`).
///
/// `prod` is left out: SystemDS accepts it but its skeleton has no full-aggregate product
/// (reference defect #6); `mean`/`var` are not cell-wise aggregates.
pub const CELL_AGGS: [AggOp; 3] = [AggOp::Sum, AggOp::Min, AggOp::Max];

/// The output shape class of a Cell operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CellType {
    /// One output cell per main-input cell.
    NoAgg,
    /// `rowSums`-like: one value per row.
    RowAgg,
    /// `colSums`-like: one value per column.
    ColAgg,
    /// A single value.
    FullAgg,
}

/// The aggregation function of an aggregating Cell operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CellAgg {
    /// `sum`, `rowSums`, `colSums`, and the dot product `t(x) %*% y`.
    Sum,
    /// `sum(f^2)`: the body computes `f` and the skeleton squares while summing (reference 3.1:
    /// the square of SUM_SQ is not compiled into the body).
    SumSq,
    /// `min`, `rowMins`, `colMins`.
    Min,
    /// `max`, `rowMaxs`, `colMaxs`.
    Max,
}

/// The type and aggregation of a Cell operator rooted at `root`: `(NoAgg, None)` for a
/// non-aggregating root, `(FullAgg, Sum)` for a dot product `t(x) %*% y`, and the aggregate's
/// direction and function otherwise (`sum(X ^ 2)` is [`CellAgg::SumSq`]). `None` if `root`
/// cannot be a Cell operator's root aggregate.
pub fn cell_agg_kind(dag: &FusionDag<'_>, root: HopId) -> Option<(CellType, Option<CellAgg>)> {
    match dag.op(root) {
        OpKind::AggUnary { op, dir } => {
            let ty = match dir {
                Direction::Row => CellType::RowAgg,
                Direction::Col => CellType::ColAgg,
                Direction::Full => CellType::FullAgg,
            };
            let input = dag.inputs(root)[0];
            let squared = dag.binary_op(input) == Some(BinaryOp::Pow)
                && dag.literal_f64(dag.inputs(input)[1]) == Some(2.0);
            let agg = match op {
                AggOp::Sum if squared => CellAgg::SumSq,
                AggOp::Sum => CellAgg::Sum,
                AggOp::Min => CellAgg::Min,
                AggOp::Max => CellAgg::Max,
                _ => return None,
            };
            Some((ty, Some(agg)))
        }
        OpKind::MatMul if dag.is_1x1(root) => Some((CellType::FullAgg, Some(CellAgg::Sum))),
        _ => Some((CellType::NoAgg, None)),
    }
}

/// SystemDS `TemplateCell.isValidOperation` (reference 3.1): an element-wise operation with a
/// matrix output whose operands line up cell by cell:
/// * any unary op over a matrix;
/// * a binary op matrix–scalar, matrix–vector (the vector broadcast; sizes known), or
///   matrix–matrix of equal known sizes (outer broadcasting `m×1 op 1×n` is the Outer
///   template's business, not a cell-aligned operation);
/// * `ifelse` and `replace` with a matrix output, n-ary `min`/`max` over equal-size matrices
///   and scalars (sizes known).
pub fn is_valid_cell_operation(dag: &FusionDag<'_>, h: HopId) -> bool {
    if !dag.is_matrix(h) {
        return false;
    }
    let ins = dag.inputs(h);
    match dag.op(h) {
        OpKind::Unary(_) => dag.is_matrix(ins[0]),
        OpKind::Binary(_) => {
            let (a, b) = (ins[0], ins[1]);
            if dag.is_scalar(a) || dag.is_scalar(b) {
                return true;
            }
            let (Some(da), Some(db), Some(dh)) = (dag.dims(a), dag.dims(b), dag.dims(h)) else {
                return false;
            };
            if dag.is_outer_binary(h) {
                return false;
            }
            (da == dh && (da == db || dag.is_vector_or_scalar(b)))
                || (db == dh && dag.is_vector_or_scalar(a))
        }
        OpKind::Ternary(TernaryOp::IfElse) | OpKind::Nary(NaryOp::Min | NaryOp::Max) => {
            let Some(dh) = dag.dims(h) else {
                return false;
            };
            ins.iter()
                .all(|&i| dag.is_scalar(i) || dag.dims(i) == Some(dh))
        }
        OpKind::Ternary(TernaryOp::Replace) => dag.dims_known(h),
        _ => false,
    }
}

impl Template for CellTemplate {
    fn kind(&self) -> TemplateKind {
        TemplateKind::Cell
    }

    /// A cell-wise operation of known size that is not 1×1 (nothing to gain from a fused
    /// scalar), a single-column lookup `X[, j]`, or a literal `seq` whose consumers are unary
    /// ops or binaries with the seq on the right (SystemDS computes it on the fly as
    /// `from + i·incr`; lafuse's construction reads it as a column-vector input).
    fn open(&self, dag: &FusionDag<'_>, h: HopId) -> bool {
        (dag.dims_known(h) && is_valid_cell_operation(dag, h) && !dag.is_1x1(h))
            || dag.is_single_column_indexing(h)
            || (dag.is_literal_seq(h) && dag.has_only_unary_binary_consumers(h, true))
    }

    /// Extends to a further cell-wise operation, to a supported aggregation in any direction
    /// (which then closes the plan), to a dot product `t(x) %*% y` (a full sum of `x ⊙ y`), or
    /// to the transpose of a column vector (a relabelling of the same cells).
    fn fuse(&self, dag: &FusionDag<'_>, h: HopId, _input: HopId) -> bool {
        is_valid_cell_operation(dag, h)
            || matches!(dag.op(h), OpKind::AggUnary { op, .. } if CELL_AGGS.contains(op))
            || is_dot_product(dag, h)
            || (dag.is_transpose(h) && dag.is_row_vector(h))
    }

    /// Absorbs another input's Cell plan at a cell-wise operation, the transposed vector of a
    /// dot product, or a literal `seq` input (read as a column vector, see [`Self::open`]).
    fn merge(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool {
        is_valid_cell_operation(dag, h)
            || (is_dot_product(dag, h) && dag.inputs(h)[0] == input)
            || (dag.is_literal_seq(input) && dag.has_only_unary_binary_consumers(input, false))
    }

    /// Any aggregation ends a Cell plan: a supported one (or a dot product) as a valid
    /// operator, any other as an invalid one; everything else stays open.
    fn close(&self, dag: &FusionDag<'_>, h: HopId) -> CloseState {
        match dag.op(h) {
            OpKind::AggUnary { op, .. } if CELL_AGGS.contains(op) => CloseState::ClosedValid,
            OpKind::MatMul if dag.is_1x1(h) => CloseState::ClosedValid,
            OpKind::AggUnary { .. } | OpKind::MatMul => CloseState::ClosedInvalid,
            _ => CloseState::OpenValid,
        }
    }
}

/// `t(x) %*% y` with a 1×1 result: a dot product of two column vectors.
fn is_dot_product(dag: &FusionDag<'_>, h: HopId) -> bool {
    dag.is_matmul(h) && dag.is_1x1(h) && dag.is_transpose(dag.inputs(h)[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{BinaryOp as B, UnaryOp};

    #[test]
    fn open_conditions() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 50, 5000);
            let y = b.input("Y", 100, 50, 5000);
            let c = b.input("c", 100, 1, 100);
            let r = b.input("r", 1, 50, 50);
            let one = b.input("one", 1, 1, 1);
            let s = b.literal_f64(2.0);
            ids.push(b.binary(B::Mul, x, y).unwrap()); // 0 matrix-matrix: opens
            ids.push(b.binary(B::Add, x, s).unwrap()); // 1 matrix-scalar: opens
            ids.push(b.binary(B::Sub, x, c).unwrap()); // 2 matrix-colvector: opens
            ids.push(b.binary(B::Div, x, r).unwrap()); // 3 matrix-rowvector: opens
            ids.push(b.unary(UnaryOp::Exp, x).unwrap()); // 4 unary: opens
                                                         // 5 outer broadcast (if the IR accepts it): not cell-aligned, no
            ids.push(b.binary(B::Mul, c, r).unwrap_or(c));
            ids.push(b.unary(UnaryOp::Exp, one).unwrap()); // 6 1x1: no
            ids.push(b.agg(AggOp::Sum, Direction::Row, x).unwrap()); // 7 aggregate: no
            ids.push(b.index(x, (1, 100), (3, 3)).unwrap()); // 8 X[,3]: opens
            ids.push(b.index(x, (2, 100), (3, 3)).unwrap()); // 9 row subrange: no
            let xt = b.transpose(x).unwrap();
            ids.push(b.matmul(xt, y).unwrap()); // 10 matmul: no
            ids.clone()
        });
        let f = view(&dag);
        let t = CellTemplate;
        let got: Vec<bool> = ids.iter().map(|&h| t.open(&f, h)).collect();
        assert_eq!(
            got,
            vec![true, true, true, true, true, false, false, false, true, false, false]
        );
    }

    #[test]
    fn unknown_sizes_do_not_open_matrix_matrix_cells() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input_with("X", None, Some(10), None);
            let y = b.input_with("Y", None, Some(10), None);
            ids.push(b.binary(B::Mul, x, y).unwrap());
            ids.clone()
        });
        let f = view(&dag);
        assert!(!CellTemplate.open(&f, ids[0]));
        assert!(!is_valid_cell_operation(&f, ids[0]));
    }

    #[test]
    fn fuse_merge_and_close() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 50, 5000);
            let v = b.input("v", 100, 1, 100);
            let w = b.input("w", 100, 1, 100);
            let e = b.unary(UnaryOp::Exp, x).unwrap();
            ids.push(e); // 0
            ids.push(b.agg(AggOp::Sum, Direction::Col, e).unwrap()); // 1 colSums: fuse, closed valid
            ids.push(b.agg(AggOp::Mean, Direction::Full, e).unwrap()); // 2 mean: no fuse
            ids.push(b.agg(AggOp::Max, Direction::Full, e).unwrap()); // 3 max: fuse
            let vw = b.binary(B::Mul, v, w).unwrap();
            ids.push(vw); // 4
            let vt = b.transpose(vw).unwrap();
            ids.push(vt); // 5 t(col vector): fuse
            ids.push(b.matmul(vt, v).unwrap()); // 6 dot product: fuse, closed valid
            let xt = b.transpose(x).unwrap();
            ids.push(xt); // 7 t(matrix): no fuse
            ids.push(b.matmul(xt, v).unwrap()); // 8 t(X) %*% v: no fuse
            ids.clone()
        });
        let f = view(&dag);
        let t = CellTemplate;
        let e = ids[0];
        assert!(t.fuse(&f, ids[1], e));
        assert_eq!(t.close(&f, ids[1]), CloseState::ClosedValid);
        assert!(!t.fuse(&f, ids[2], e));
        assert_eq!(t.close(&f, ids[2]), CloseState::ClosedInvalid);
        assert!(t.fuse(&f, ids[3], e));
        assert!(t.fuse(&f, ids[5], ids[4]));
        assert_eq!(t.close(&f, ids[5]), CloseState::OpenValid);
        assert!(t.fuse(&f, ids[6], ids[5]));
        assert!(t.merge(&f, ids[6], ids[5]));
        assert_eq!(t.close(&f, ids[6]), CloseState::ClosedValid);
        assert!(!t.fuse(&f, ids[7], ids[0]));
        assert!(!t.fuse(&f, ids[8], ids[7]));
        assert_eq!(t.close(&f, ids[8]), CloseState::ClosedInvalid);
        assert_eq!(t.close(&f, e), CloseState::OpenValid);
    }

    #[test]
    fn agg_kinds() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 50, 5000);
            let two = b.literal_f64(2.0);
            let sq = b.binary(B::Pow, x, two).unwrap();
            ids.push(b.agg(AggOp::Sum, Direction::Full, sq).unwrap());
            ids.push(b.agg(AggOp::Min, Direction::Row, x).unwrap());
            ids.push(sq);
            ids.push(b.agg(AggOp::Prod, Direction::Full, x).unwrap());
            ids.clone()
        });
        let f = view(&dag);
        assert_eq!(
            cell_agg_kind(&f, ids[0]),
            Some((CellType::FullAgg, Some(CellAgg::SumSq)))
        );
        assert_eq!(
            cell_agg_kind(&f, ids[1]),
            Some((CellType::RowAgg, Some(CellAgg::Min)))
        );
        assert_eq!(cell_agg_kind(&f, ids[2]), Some((CellType::NoAgg, None)));
        assert_eq!(cell_agg_kind(&f, ids[3]), None);
    }
}

#[cfg(test)]
mod more_tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{BinaryOp as B, DataGenOp, OpKind as K};

    #[test]
    fn ternary_nary_and_seq() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 50, 5000);
            let y = b.input("Y", 100, 50, 5000);
            let z = b.input("Z", 100, 40, 4000);
            let s = b.literal_f64(0.0);
            let c = b.binary(B::Gt, x, s).unwrap();
            ids.push(b.ternary(TernaryOp::IfElse, c, x, y).unwrap()); // 0 yes
            ids.push(b.ternary(TernaryOp::Replace, x, s, s).unwrap()); // 1 yes
            ids.push(b.add(K::Nary(NaryOp::Max), &[x, y, s]).unwrap()); // 2 yes
            ids.push(b.add(K::Nary(NaryOp::Cbind), &[x, z]).unwrap()); // 3 no
            let (one, n, inc) = (b.literal_f64(1.0), b.literal_f64(100.0), b.literal_f64(1.0));
            let seq = b.add(K::DataGen(DataGenOp::Seq), &[one, n, inc]).unwrap();
            ids.push(seq); // 4: consumed only as right operand of a binary: opens
            let v = b.input("v", 100, 1, 100);
            ids.push(b.binary(B::Mul, v, seq).unwrap()); // 5
            ids.clone()
        });
        let f = view(&dag);
        let t = CellTemplate;
        assert!(t.open(&f, ids[0]));
        assert!(t.open(&f, ids[1]));
        assert!(t.open(&f, ids[2]));
        assert!(!t.open(&f, ids[3]));
        assert!(!is_valid_cell_operation(&f, ids[3]));
        // The seq is also an output here (a consumer that is not unary/binary): no open.
        assert!(!t.open(&f, ids[4]));
        assert!(t.merge(&f, ids[5], ids[4]) == is_valid_cell_operation(&f, ids[5]));
    }
}
