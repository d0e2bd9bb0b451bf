//! The Row template (paper section 2.2, reference 3.2): a function over one row of the main
//! input at a time (dense slice or sparse row) with vector intermediates, producing a row of
//! output, a per-row scalar, or an accumulation into a column or full aggregate; covers
//! matrix-vector and skinny matrix-matrix products such as `t(X) %*% (w ⊙ (X %*% v))`.
//!
//! Deliberate differences from SystemDS: every element-wise op is accepted as a vector op
//! (lafuse generates the vector loops instead of calling a fixed primitive library, so there
//! is no "unsupported vector op" to fail on at construction time); `prod` is not a row
//! aggregate (SystemDS lists it but has no `ROW_PRODS` primitive, reference defect #5); and a
//! row-aligned product `f(X) %*% v` / `f(X) %*% B` (skinny B) may extend a Row plan of `f(X)`,
//! which is the same per-row dot product / vector-matrix product the template opens on.

use super::cell::is_valid_cell_operation;
use super::Template;
use crate::fusion::dag::{is_skinny_rhs, FusionDag};
use crate::fusion::memo::{CloseState, TemplateKind};
use crate::hops::{AggOp, CumulativeOp, Direction, HopId, NaryOp, OpKind, TernaryOp};

/// The Row template.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowTemplate;

/// Row- and column-wise aggregations a Row plan computes (reference 3.2 `SUPPORTED_ROW_AGG`
/// without `prod`, see the module docs).
pub const ROW_AGGS: [AggOp; 5] = [AggOp::Sum, AggOp::Min, AggOp::Max, AggOp::Mean, AggOp::Var];

/// Whether a Row plan computes this row or column aggregation: any of [`ROW_AGGS`] per row,
/// but only `colSums` per column: the operator adds each row into its output row, and the CPlan
/// construction builds nothing else per column. Offering `colMins` and the like here made a
/// selected Row plan be dropped at construction, and its hops run unfused although the Cell
/// template (which covers them) had a plan.
fn is_row_template_agg(op: AggOp, dir: Direction) -> bool {
    match dir {
        Direction::Row => ROW_AGGS.contains(&op),
        Direction::Col => op == AggOp::Sum,
        Direction::Full => false,
    }
}

impl Template for RowTemplate {
    fn kind(&self) -> TemplateKind {
        TemplateKind::Row
    }

    /// Reference 3.2 `open`: a binary op over a true matrix (first input >1×>1, sizes known);
    /// a unary op or `replace` with more than one output row; a `cbind` of a matrix with more
    /// than one row; n-ary `min`/`max`; a matrix-vector product `X %*% v` or a product with a
    /// skinny right-hand side (2..63 columns, not outer-product-like); a transpose feeding a
    /// skinny `t(X) %*% B` as its only consumer; a row or column aggregation over a true
    /// matrix; column-range indexing `X[, 1:k]`.
    fn open(&self, dag: &FusionDag<'_>, h: HopId) -> bool {
        let ins = dag.inputs(h);
        match dag.op(h) {
            OpKind::Binary(_) => dag.dims_known(h) && dag.is_full_matrix(ins[0]),
            OpKind::Unary(_) | OpKind::Ternary(TernaryOp::Replace) => {
                is_valid_cell_operation(dag, h) && dag.rows(h).is_some_and(|r| r > 1)
            }
            OpKind::Nary(NaryOp::Cbind) => is_row_cbind(dag, h),
            OpKind::Nary(NaryOp::Min | NaryOp::Max) => is_valid_cell_operation(dag, h),
            OpKind::MatMul => is_row_matmul(dag, h),
            OpKind::Reorg(crate::hops::ReorgOp::Transpose) => {
                matches!(dag.consumers(h), [mm] if dag.is_matmul(*mm)
                    && dag.dims_known(*mm)
                    && dag.inputs(*mm)[0] == h
                    && is_fuse_skinny_matmul(dag, *mm))
            }
            OpKind::AggUnary { op, dir } => {
                is_row_template_agg(*op, *dir) && dag.is_full_matrix(ins[0])
            }
            OpKind::Index => {
                dag.is_column_range_indexing(h) && dag.rows(ins[0]).is_some_and(|r| r > 1)
            }
            _ => false,
        }
    }

    /// Reference 3.2 `fuse`: element-wise binary ops, `cbind`, n-ary `min`/`max`, unary ops and
    /// `replace`; row/column aggregations and the full `sum`; `t(X) %*% v` and skinny
    /// `t(X) %*% B` (the final accumulation of one pass over X); `t(cumsum(t(X)))` chains and
    /// `t(f(X)) %*% X` chains; plus row-aligned products `f(X) %*% v` (module docs).
    fn fuse(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool {
        let ins = dag.inputs(h);
        match dag.op(h) {
            OpKind::Binary(_) => dag.dims_known(h),
            OpKind::Nary(NaryOp::Cbind) => is_row_cbind(dag, h),
            OpKind::Nary(NaryOp::Min | NaryOp::Max)
            | OpKind::Unary(_)
            | OpKind::Ternary(TernaryOp::Replace) => is_valid_cell_operation(dag, h),
            OpKind::AggUnary { op, dir } => {
                *dir == Direction::Full && *op == AggOp::Sum || is_row_template_agg(*op, *dir)
            }
            OpKind::MatMul => {
                let row_aligned =
                    ins[0] == input && !dag.is_transpose(ins[0]) && is_row_matmul(dag, h);
                is_row_final_product(dag, h)
                    || row_aligned
                    || is_part_of_valid_transpose_mm_chain(dag, h)
            }
            OpKind::Reorg(crate::hops::ReorgOp::Transpose) | OpKind::Cumulative(_) => {
                is_part_of_valid_cum_agg_chain(dag, h)
                    || is_part_of_valid_transpose_mm_chain(dag, h)
            }
            _ => false,
        }
    }

    /// Reference 3.2 `merge`: a binary op absorbs a row-aligned input (both with more than one
    /// row), `cbind` and n-ary ops absorb any input, a literal `seq` input is merged (read as a
    /// column vector), and `t(X) %*% y` absorbs a column-vector `y` or a right input computed
    /// from X; and (paper Figure 6) a final `t(X) %*% B` absorbs either input (see
    /// `is_row_final_product`).
    fn merge(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool {
        let ins = dag.inputs(h);
        let many_rows = |x: HopId| dag.rows(x).is_some_and(|r| r > 1);
        match dag.op(h) {
            OpKind::Binary(_) if many_rows(h) && many_rows(input) => true,
            OpKind::Nary(NaryOp::Cbind) => is_row_cbind(dag, h),
            OpKind::Nary(NaryOp::Min | NaryOp::Max) => is_valid_cell_operation(dag, h),
            OpKind::MatMul if dag.is_transpose(ins[0]) => {
                dag.is_col_vector(input)
                    || (ins[1] == input && dag.contains(dag.inputs(ins[0])[0], input))
                    || is_row_final_product(dag, h)
            }
            _ => dag.is_literal_seq(input) && dag.has_only_unary_binary_consumers(input, false),
        }
    }

    /// Column and full aggregations and the final `t(X) %*% y` close a Row plan as valid; a
    /// bare transpose is open but cannot be an operator's root; everything else stays open.
    fn close(&self, dag: &FusionDag<'_>, h: HopId) -> CloseState {
        match dag.op(h) {
            OpKind::AggUnary { dir, .. } if *dir != Direction::Row => CloseState::ClosedValid,
            OpKind::MatMul if dag.is_transpose(dag.inputs(h)[0]) => CloseState::ClosedValid,
            OpKind::Reorg(crate::hops::ReorgOp::Transpose) => CloseState::OpenInvalid,
            _ => CloseState::OpenValid,
        }
    }
}

/// The final accumulation of a row-wise pass over X: `t(X) %*% v` (more than one output row,
/// one column) or `t(X) %*% B` with a skinny product over a true matrix X (reference 3.2
/// `fuse`). Row i of X meets row i of the right input, so both inputs can be fused: SystemDS
/// merges only a column vector or a right input computed from X, while the paper's Figure 6
/// shows the plan fusing both `t(X)` and a matrix right input (`R(10,9)`), which lafuse follows
/// (the skeleton computes `out += x_i^T b_i` from any fused row `b_i`).
fn is_row_final_product(dag: &FusionDag<'_>, h: HopId) -> bool {
    let ins = dag.inputs(h);
    if !dag.is_matmul(h) || !dag.is_transpose(ins[0]) {
        return false;
    }
    let tx_v = dag.rows(h).is_some_and(|r| r > 1) && dag.cols(h) == Some(1);
    let tx_b = dag.is_full_matrix(h) && is_fuse_skinny_matmul(dag, h) && dag.is_full_matrix(ins[0]);
    tx_v || tx_b
}

/// `cbind(A, ...)` whose first input is a matrix with more than one row, sizes known.
fn is_row_cbind(dag: &FusionDag<'_>, h: HopId) -> bool {
    let first = dag.inputs(h)[0];
    dag.dims_known(h) && dag.rows(first).is_some_and(|r| r > 1)
}

/// A product computed row by row from its left input: `X %*% v` (one output column) or
/// `X %*% B` with a skinny B, X a true matrix, not outer-product-like.
fn is_row_matmul(dag: &FusionDag<'_>, h: HopId) -> bool {
    let (x, b) = (dag.inputs(h)[0], dag.inputs(h)[1]);
    if !dag.dims_known(h) || !dag.is_full_matrix(x) {
        return false;
    }
    let (Some((xr, xc)), Some((br, bc))) = (dag.dims(x), dag.dims(b)) else {
        return false;
    };
    dag.cols(h) == Some(1) || (is_skinny_rhs(xr, xc, br, bc) && !dag.is_outer_product_like_mm(h))
}

/// SystemDS `isFuseSkinnyMatrixMult` for `mm = A %*% B` (typically `t(X) %*% B`): the product
/// or its transpose has 2..63 columns and fewer columns than the rows on either side.
pub fn is_fuse_skinny_matmul(dag: &FusionDag<'_>, mm: HopId) -> bool {
    let (a, b) = (dag.inputs(mm)[0], dag.inputs(mm)[1]);
    let (Some((ar, ac)), Some((br, bc)), Some((mr, mc))) = (dag.dims(a), dag.dims(b), dag.dims(mm))
    else {
        return false;
    };
    is_skinny_rhs(ac, ar, mr, mc) || is_skinny_rhs(br, bc, mc, mr)
}

fn is_row_cum(dag: &FusionDag<'_>, h: HopId) -> bool {
    matches!(
        dag.op(h),
        OpKind::Cumulative(CumulativeOp::Cumsum | CumulativeOp::Cummin | CumulativeOp::Cummax)
    )
}

/// Part of a `t(cum(t(X)))` chain with single consumers (a row-wise cumulative aggregate,
/// reference 3.2 `isPartOfValidCumAggChain`): the inner transpose, the cumulative op, or the
/// outer transpose.
fn is_part_of_valid_cum_agg_chain(dag: &FusionDag<'_>, h: HopId) -> bool {
    let single = |x: HopId| dag.num_consumers(x) == 1;
    if dag.is_transpose(h) {
        let inner = matches!(dag.consumers(h), [c] if is_row_cum(dag, *c)
            && matches!(dag.consumers(*c), [t] if dag.is_transpose(*t)));
        let input = dag.inputs(h)[0];
        let outer = is_row_cum(dag, input)
            && single(input)
            && dag.is_transpose(dag.inputs(input)[0])
            && single(dag.inputs(input)[0]);
        inner || outer
    } else if is_row_cum(dag, h) {
        let input = dag.inputs(h)[0];
        matches!(dag.consumers(h), [t] if dag.is_transpose(*t))
            && dag.is_transpose(input)
            && single(input)
    } else {
        false
    }
}

/// The transpose of a `t(f(X)) %*% X` chain (reference 3.2 `isPartOfValidTransposeMMChain`):
/// its only consumer is a skinny product whose right input X is computed inside the transposed
/// sub-DAG, and the transposed matrix is very wide relative to the product (more than 128
/// times either output dimension) so that one row-wise pass pays off.
fn is_part_of_valid_transpose_mm_chain(dag: &FusionDag<'_>, h: HopId) -> bool {
    if !dag.is_transpose(h) {
        return false;
    }
    let [mm] = dag.consumers(h) else {
        return false;
    };
    let mm = *mm;
    let (Some((_, tc)), Some((mr, mc))) = (dag.dims(h), dag.dims(mm)) else {
        return false;
    };
    dag.is_matmul(mm)
        && dag.inputs(mm)[0] == h
        && tc > 128 * mr
        && tc > 128 * mc
        && is_fuse_skinny_matmul(dag, mm)
        && dag.contains(dag.inputs(h)[0], dag.inputs(mm)[1])
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
            let x = b.input("X", 1000, 100, 100_000);
            let v = b.input("v", 100, 1, 100);
            let bm = b.input("B", 100, 10, 1000);
            let big = b.input("C", 100, 80, 8000);
            let c = b.input("c", 1000, 1, 1000);
            let s = b.literal_f64(2.0);
            ids.push(b.binary(B::Mul, x, s).unwrap()); // 0 yes
            ids.push(b.binary(B::Mul, s, x).unwrap()); // 1 first input scalar: no
            ids.push(b.matmul(x, v).unwrap()); // 2 X %*% v: yes
            ids.push(b.matmul(x, bm).unwrap()); // 3 skinny: yes
            ids.push(b.matmul(x, big).unwrap()); // 4 80 columns: no
            ids.push(b.agg(AggOp::Sum, Direction::Row, x).unwrap()); // 5 rowSums: yes
            ids.push(b.agg(AggOp::Sum, Direction::Full, x).unwrap()); // 6 sum: no
            ids.push(b.agg(AggOp::Prod, Direction::Row, x).unwrap()); // 7 rowProds: no
            ids.push(b.index(x, (1, 1000), (1, 5)).unwrap()); // 8 X[,1:5]: yes
            ids.push(b.unary(UnaryOp::Exp, c).unwrap()); // 9 exp(col vector): yes
            let xt = b.transpose(x).unwrap();
            ids.push(xt); // 10 t(X) feeding a skinny t(X) %*% B2: yes
            let b2 = b.input("B2", 1000, 5, 5000);
            ids.push(b.matmul(xt, b2).unwrap()); // 11 t(X) %*% B2: skinny rhs: yes
            let xt2 = b.transpose(x).unwrap();
            ids.push(xt2); // 12 t(X) feeding t(X) %*% c (n x 1 output): no
            ids.push(b.matmul(xt2, c).unwrap()); // 13 t(X) %*% c: matrix-vector: yes
                                                 // The transposes are not outputs: their only consumer must be the product.
            ids.iter()
                .enumerate()
                .filter(|(i, _)| *i != 10 && *i != 12)
                .map(|(_, &h)| h)
                .collect()
        });
        let f = view(&dag);
        let got: Vec<bool> = ids.iter().map(|&h| RowTemplate.open(&f, h)).collect();
        assert_eq!(
            got,
            vec![
                true, false, true, true, false, true, false, false, true, true, true, true, false,
                true
            ]
        );
    }

    #[test]
    fn fuse_merge_close_of_the_t_x_w_x_v_pattern() {
        // R = t(X) %*% (w * (X %*% v)), reference 3.6 example B.
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 1000, 100, 100_000);
            let v = b.input("v", 100, 1, 100);
            let w = b.input("w", 1000, 1, 1000);
            let xv = b.matmul(x, v).unwrap();
            let wxv = b.binary(B::Mul, w, xv).unwrap();
            let xt = b.transpose(x).unwrap();
            let r = b.matmul(xt, wxv).unwrap();
            ids.extend([xv, wxv, xt, r]);
            vec![r]
        });
        let f = view(&dag);
        let [xv, wxv, xt, r] = [ids[0], ids[1], ids[2], ids[3]];
        let t = RowTemplate;
        assert!(t.fuse(&f, wxv, xv));
        assert!(t.merge(&f, wxv, xv));
        assert!(!t.open(&f, xt));
        assert!(t.fuse(&f, r, wxv));
        assert!(t.merge(&f, r, wxv));
        assert_eq!(t.close(&f, r), CloseState::ClosedValid);
        assert_eq!(t.close(&f, xt), CloseState::OpenInvalid);
        assert_eq!(t.close(&f, wxv), CloseState::OpenValid);
    }

    #[test]
    fn aggregations_close_by_direction() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 1000, 100, 100_000);
            let e = b.unary(UnaryOp::Exp, x).unwrap();
            ids.push(e);
            ids.push(b.agg(AggOp::Sum, Direction::Row, e).unwrap());
            ids.push(b.agg(AggOp::Sum, Direction::Col, e).unwrap());
            ids.push(b.agg(AggOp::Sum, Direction::Full, e).unwrap());
            ids.push(b.agg(AggOp::Max, Direction::Full, e).unwrap());
            ids.push(b.agg(AggOp::Max, Direction::Col, e).unwrap());
            ids.clone()
        });
        let f = view(&dag);
        let t = RowTemplate;
        assert!(t.fuse(&f, ids[1], ids[0]));
        assert_eq!(t.close(&f, ids[1]), CloseState::OpenValid);
        assert!(t.fuse(&f, ids[2], ids[0]));
        assert_eq!(t.close(&f, ids[2]), CloseState::ClosedValid);
        assert!(t.fuse(&f, ids[3], ids[0]));
        assert!(
            !t.fuse(&f, ids[4], ids[0]),
            "full max is not a row aggregate"
        );
        assert!(
            !t.fuse(&f, ids[5], ids[0]) && !t.open(&f, ids[5]),
            "colMaxs is the Cell template's"
        );
    }

    #[test]
    fn cumulative_chain() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 1000, 100, 100_000);
            let e = b.unary(UnaryOp::Exp, x).unwrap();
            let t1 = b.transpose(e).unwrap();
            let cs = b
                .add(OpKind::Cumulative(CumulativeOp::Cumsum), &[t1])
                .unwrap();
            let t2 = b.transpose(cs).unwrap();
            let cp = b
                .add(OpKind::Cumulative(CumulativeOp::Cumsum), &[x])
                .unwrap();
            ids.extend([e, t1, cs, t2, cp]);
            vec![t2, cp]
        });
        let f = view(&dag);
        let t = RowTemplate;
        assert!(t.fuse(&f, ids[1], ids[0]));
        assert!(t.fuse(&f, ids[2], ids[1]));
        assert!(t.fuse(&f, ids[3], ids[2]));
        assert!(
            !t.fuse(&f, ids[4], ids[0]),
            "a column cumsum is not row-wise"
        );
    }
}

#[cfg(test)]
mod more_tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::BinaryOp as B;

    #[test]
    fn cbind_nary_and_unknown_sizes() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 1000, 100, 100_000);
            let c = b.input("c", 1000, 1, 1000);
            let r = b.input("r", 1, 100, 100);
            let u = b.input_with("U", None, Some(100), None);
            ids.push(b.add(OpKind::Nary(NaryOp::Cbind), &[x, c]).unwrap()); // 0 yes
            ids.push(b.add(OpKind::Nary(NaryOp::Cbind), &[r, r]).unwrap()); // 1 one row: no
            ids.push(b.add(OpKind::Nary(NaryOp::Min), &[x, x, c]).unwrap_or(x)); // 2
            ids.push(b.binary(B::Add, u, r).unwrap()); // 3 unknown rows: no
            ids.push(b.agg(AggOp::Sum, Direction::Row, c).unwrap()); // 4 rowSums(vector): no
            ids.clone()
        });
        let f = view(&dag);
        let t = RowTemplate;
        assert!(t.open(&f, ids[0]));
        assert!(!t.open(&f, ids[1]));
        assert_eq!(t.open(&f, ids[2]), is_valid_cell_operation(&f, ids[2]));
        assert!(!t.open(&f, ids[3]));
        assert!(!t.fuse(&f, ids[3], ids[3]));
        assert!(!t.open(&f, ids[4]));
    }
}
