//! The Outer-product template (paper sections 1 and 2.2, reference 3.4): sparsity-exploiting
//! evaluation of expressions over `X ⊙ f(U %*% t(V))` that visit only the non-zeros of a
//! sparse driver `X`, computing `u_i · v_j` on demand, with an optional final left or right
//! matrix multiply (`t(t(U) %*% W)`, `W %*% V`) or full sum.
//!
//! Exploration opens Outer plans at the outer-product-like multiply; they stay *open invalid*
//! while the dense outer product is unmasked (`U %*% t(V) + eps`, `log(...)`) and become valid
//! once a sparse-safe binary with a sparse-driver candidate masks them. Deliberate differences
//! from SystemDS: the mask must be zero-preserving in an operand that does not itself contain
//! the outer product (SystemDS accepts any `*`/`/`, e.g. `(U %*% t(V)) / X`, which has no
//! sparse driver), the full aggregate must be a `sum` (the skeleton only sums, so SystemDS's
//! acceptance of `max(...)` would compute the wrong aggregate), a final product with a
//! transpose consumer stays open *valid* (it is a complete operator whether or not the
//! transpose is fused as well), and products of any known size open (SystemDS: larger than
//! 256×256 only; here the cost model weighs the driver's non-zeros against the product).

use super::Template;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, TemplateKind};
use crate::fusion::sparsity::{binary_zero_preserving, is_sparse_safe_binary};
use crate::hops::{AggOp, BinaryOp, Direction, HopId, OpKind};

/// The Outer template.
#[derive(Clone, Copy, Debug, Default)]
pub struct OuterTemplate;

impl Template for OuterTemplate {
    fn kind(&self) -> TemplateKind {
        TemplateKind::Outer
    }

    /// An outer-product-like `U %*% t(V)` (or an outer broadcast `u op t(v)`) of known size,
    /// however small. SystemDS opens only outputs larger than 256×256 (reference 3.4, 11.2),
    /// on the view that a small dense product is cheap; but the operator's cost scales with
    /// its driver's non-zeros and, over a dense driver, runs the same blocked multiply over
    /// tiles, so the cost model, not a size, decides. ALS-CG's 2000×100 rating matrix at
    /// sparsity 0.01 needs 2,000 dot products of rank 20 where `S %*% t(V)` computes 200,000.
    fn open(&self, dag: &FusionDag<'_>, h: HopId) -> bool {
        (dag.is_outer_product_like_mm(h) || dag.is_outer_binary(h)) && dag.dims(h).is_some()
    }

    /// Cell-wise ops over the outer product (unary; binary with a scalar, a row or column
    /// vector, or an equal-size matrix), the final product `W %*% V` / `t(U) %*% W` whose
    /// other input is the `V`/`U` of the outer product inside W, the transpose of such a final
    /// product, and a full `sum`.
    fn fuse(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool {
        let ins = dag.inputs(h);
        match dag.op(h) {
            OpKind::Unary(_) => dag.is_matrix(h),
            OpKind::Binary(_) => is_outer_compatible_binary(dag, h),
            OpKind::Reorg(crate::hops::ReorgOp::Transpose) => {
                dag.is_matmul(input) && !dag.is_outer_product_like_mm(input)
            }
            OpKind::MatMul => {
                if dag.is_outer_product_like_mm(h) {
                    return false;
                }
                let other = if ins[0] == input { ins[1] } else { ins[0] };
                dag.contains_outer_product(input, Some(other))
            }
            OpKind::AggUnary { op, dir } => *dir == Direction::Full && *op == AggOp::Sum,
            _ => false,
        }
    }

    /// Absorbs the other input of a binary with a row vector or scalar, and the sparse driver
    /// side of the masking multiply (`(X != 0) * (U %*% t(V))`: a sparse-safe binary that
    /// contains no outer product itself).
    fn merge(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool {
        let ins = dag.inputs(h);
        if dag.binary_op(h).is_none() {
            return false;
        }
        let row_or_scalar = ins
            .iter()
            .any(|&i| dag.is_scalar(i) || dag.is_row_vector(i));
        let masking = dag.binary_op(h) == Some(BinaryOp::Mul)
            && is_sparse_safe_binary(dag, input)
            && !dag.contains_outer_product(input, None);
        (row_or_scalar && is_outer_compatible_binary(dag, h)) || masking
    }

    /// Reference 3.4 `close` (with the refinements of the module docs):
    /// * a full aggregate is valid over a masked product, invalid over anything else;
    /// * a product reading an outer product directly (`U %*% t(V) %*% V`) is invalid, a final
    ///   product over a masked product is valid (open if a transpose may still follow), any
    ///   other product invalid; the transpose of a final product is valid;
    /// * a masking `*` or `/` is open valid; everything else open invalid (unmasked).
    fn close(&self, dag: &FusionDag<'_>, h: HopId) -> CloseState {
        let ins = dag.inputs(h);
        match dag.op(h) {
            OpKind::AggUnary { .. } => {
                if is_masked_product(dag, ins[0]) {
                    CloseState::ClosedValid
                } else {
                    CloseState::ClosedInvalid
                }
            }
            OpKind::MatMul if dag.is_outer_product_like_mm(h) => CloseState::OpenInvalid,
            OpKind::MatMul => {
                if ins.iter().any(|&i| dag.is_outer_product_like_mm(i)) {
                    return CloseState::ClosedInvalid;
                }
                let largest = if dag.hop(ins[0]).cells() >= dag.hop(ins[1]).cells() {
                    ins[0]
                } else {
                    ins[1]
                };
                if !is_masked_product(dag, largest) {
                    CloseState::ClosedInvalid
                } else if dag.consumers(h).iter().any(|&c| dag.is_transpose(c)) {
                    CloseState::OpenValid
                } else {
                    CloseState::ClosedValid
                }
            }
            OpKind::Reorg(crate::hops::ReorgOp::Transpose)
                if dag.is_matmul(ins[0]) && !dag.is_outer_product_like_mm(ins[0]) =>
            {
                CloseState::ClosedValid
            }
            OpKind::Binary(_) if is_masked_product(dag, h) => CloseState::OpenValid,
            _ => CloseState::OpenInvalid,
        }
    }
}

/// A binary over a true matrix whose other operand is a scalar, a row or column vector, or a
/// matrix of the same size: the shapes the per-non-zero body can evaluate.
fn is_outer_compatible_binary(dag: &FusionDag<'_>, h: HopId) -> bool {
    let Some(dh) = dag.dims(h) else {
        return false;
    };
    dag.is_full_matrix(h)
        && dag.inputs(h).iter().all(|&i| {
            dag.is_scalar(i) || dag.is_vector(i) || dag.is_1x1(i) || dag.dims(i) == Some(dh)
        })
}

/// A `*` or `/` of two equal-size matrices that is zero-preserving in an operand without an
/// outer product: that operand can drive sparse iteration (`X ⊙ f(U %*% t(V))`,
/// `X / f(U %*% t(V))`).
pub fn is_masked_product(dag: &FusionDag<'_>, h: HopId) -> bool {
    let Some(op @ (BinaryOp::Mul | BinaryOp::Div)) = dag.binary_op(h) else {
        return false;
    };
    let ins = dag.inputs(h);
    let Some(dh) = dag.dims(h) else {
        return false;
    };
    (0..2).any(|pos| {
        binary_zero_preserving(op, pos, None)
            && dag.dims(ins[pos]) == Some(dh)
            && dag.is_full_matrix(ins[pos])
            && !dag.contains_outer_product(ins[pos], None)
    }) && ins.iter().any(|&i| dag.contains_outer_product(i, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{BinaryOp as B, UnaryOp};

    /// ids: [uv, uv+eps, log, X*log, sum, (X!=0), W=(X!=0)*uv, W %*% V, uv%*%V, sum(uv), X/uv, uv/X]
    fn als_like() -> (crate::hops::HopDag, Vec<HopId>) {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 2000, 2000, 4000);
            let u = b.input("U", 2000, 10, 20_000);
            let v = b.input("V", 2000, 10, 20_000);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let eps = b.literal_f64(1e-15);
            let pe = b.binary(B::Add, uv, eps).unwrap();
            let l = b.unary(UnaryOp::Log, pe).unwrap();
            let xl = b.binary(B::Mul, x, l).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, xl).unwrap();
            let zero = b.literal_f64(0.0);
            let nz = b.binary(B::Ne, x, zero).unwrap();
            let w = b.binary(B::Mul, nz, uv).unwrap();
            let wv = b.matmul(w, v).unwrap();
            let uvv = b.matmul(uv, v).unwrap();
            let suv = b.agg(AggOp::Sum, Direction::Full, uv).unwrap();
            let xd = b.binary(B::Div, x, uv).unwrap();
            let dx = b.binary(B::Div, uv, x).unwrap();
            ids.extend([uv, pe, l, xl, s, nz, w, wv, uvv, suv, xd, dx]);
            vec![s, wv, uvv, suv, xd, dx]
        });
        (dag, ids)
    }

    #[test]
    fn opens_on_outer_products_of_any_known_size() {
        let (dag, ids) = als_like();
        let f = view(&dag);
        assert!(OuterTemplate.open(&f, ids[0]));
        assert!(
            !OuterTemplate.open(&f, ids[7]),
            "W %*% V is not outer-product-like"
        );
        let small = build(|b| {
            let u = b.input("U", 200, 10, 2000);
            let v = b.input("V", 2000, 10, 20_000);
            let vt = b.transpose(v).unwrap();
            vec![b.matmul(u, vt).unwrap()]
        });
        let fs = view(&small);
        let uv = fs.dag().outputs()[0].1;
        assert!(
            OuterTemplate.open(&fs, uv),
            "200 rows: the cost model decides"
        );
    }

    #[test]
    fn close_states_follow_masking() {
        let (dag, ids) = als_like();
        let f = view(&dag);
        let t = OuterTemplate;
        let c = |i: usize| t.close(&f, ids[i]);
        assert_eq!(c(0), CloseState::OpenInvalid, "bare U %*% t(V)");
        assert_eq!(c(1), CloseState::OpenInvalid, "+ eps keeps it dense");
        assert_eq!(c(2), CloseState::OpenInvalid);
        assert_eq!(c(3), CloseState::OpenValid, "X * log(...) is masked by X");
        assert_eq!(c(4), CloseState::ClosedValid, "sum over a masked product");
        assert_eq!(c(6), CloseState::OpenValid, "(X != 0) * UV'");
        assert_eq!(c(7), CloseState::ClosedValid, "W %*% V");
        assert_eq!(
            c(8),
            CloseState::ClosedInvalid,
            "UV' %*% V has nothing sparse"
        );
        assert_eq!(c(9), CloseState::ClosedInvalid, "sum(UV')");
        assert_eq!(c(10), CloseState::OpenValid, "X / UV'");
        assert_eq!(
            c(11),
            CloseState::OpenInvalid,
            "UV' / X has no sparse driver"
        );
    }

    #[test]
    fn fuse_and_merge() {
        let (dag, ids) = als_like();
        let f = view(&dag);
        let t = OuterTemplate;
        assert!(t.fuse(&f, ids[1], ids[0]));
        assert!(t.fuse(&f, ids[2], ids[1]));
        assert!(t.fuse(&f, ids[3], ids[2]));
        assert!(t.fuse(&f, ids[4], ids[3]));
        assert!(t.fuse(&f, ids[6], ids[0]));
        assert!(t.merge(&f, ids[6], ids[5]), "absorbs X != 0");
        assert!(
            !t.merge(&f, ids[6], ids[0]),
            "the outer product is no sparse driver"
        );
        assert!(
            t.fuse(&f, ids[7], ids[6]),
            "W %*% V, V feeds the outer product"
        );
        // UV' %*% V extends, but closes invalid: nothing masks the outer product.
        assert!(t.fuse(&f, ids[8], ids[0]));
        assert_eq!(t.close(&f, ids[8]), CloseState::ClosedInvalid);
    }
}

#[cfg(test)]
mod more_tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::BinaryOp as B;

    #[test]
    fn left_outer_product_and_broadcast_shapes() {
        // t(t(U) %*% W) with W = X * (U %*% t(V)): the final product and its transpose.
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 1000, 900, 2000);
            let u = b.input("U", 1000, 8, 8000);
            let v = b.input("V", 900, 8, 7200);
            let r = b.input("r", 1, 900, 900);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let w = b.binary(B::Mul, x, uv).unwrap();
            let ut = b.transpose(u).unwrap();
            let left = b.matmul(ut, w).unwrap();
            let tl = b.transpose(left).unwrap();
            let plus_r = b.binary(B::Add, uv, r).unwrap();
            ids.extend([uv, w, left, tl, plus_r]);
            vec![tl, plus_r]
        });
        let f = view(&dag);
        let t = OuterTemplate;
        let [uv, w, left, tl, plus_r] = [ids[0], ids[1], ids[2], ids[3], ids[4]];
        assert!(t.fuse(&f, left, w), "t(U) %*% W: U feeds the outer product");
        assert_eq!(
            t.close(&f, left),
            CloseState::OpenValid,
            "a transpose may follow"
        );
        assert!(t.fuse(&f, tl, left));
        assert_eq!(t.close(&f, tl), CloseState::ClosedValid);
        assert!(t.fuse(&f, plus_r, uv), "row-vector broadcast");
        assert_eq!(
            t.close(&f, plus_r),
            CloseState::OpenInvalid,
            "+ r is not masked"
        );
    }
}
