//! Which nodes of a CPlan can never be `-0.0`: a matrix cell's `x + 0.0` (the runtime's
//! signed-zero rule, [`CPlan::matrix_cell_nodes`]) is the identity on them, so generated code
//! need not compute it. A sound under-approximation: `true` only where every value the node
//! can take (NaN and infinities included) is something other than `-0.0`.

use super::{CNode, CPlan};
use crate::hops::{BinaryOp, Literal, NaryOp, TernaryOp, UnaryOp};

/// Per node of `plan`: whether its value is never `-0.0`.
pub(super) fn never_negative_zero(plan: &CPlan) -> Vec<bool> {
    // Operands precede users: one pass in order.
    let mut never: Vec<bool> = Vec::with_capacity(plan.nodes.len());
    for node in &plan.nodes {
        let of = |x: usize| never.get(x).copied().unwrap_or(false);
        let answer = match node {
            CNode::Literal { value } => match value {
                Literal::Double(v) => v.to_bits() != (-0.0f64).to_bits(),
                Literal::Int(_) | Literal::Bool(_) => true,
                Literal::Str(_) => false,
            },
            CNode::Unary { f, x } => match f {
                // 0/1, positive, or +-inf and NaN: log(1) is +0 (fdlibm's method sums +0s).
                UnaryOp::Not
                | UnaryOp::Abs
                | UnaryOp::Exp
                | UnaryOp::Log
                | UnaryOp::Sigmoid
                | UnaryOp::Cos
                | UnaryOp::Cosh
                | UnaryOp::IsNaN
                | UnaryOp::IsInf => true,
                // sqrt(-0) and signum(-0) are -0; any other argument gives no -0.
                UnaryOp::Sqrt | UnaryOp::Sign => of(*x),
                _ => false,
            },
            // x * x is +0 at either zero.
            CNode::Pow2 { .. } => true,
            // -0 + -0 is the only sum that is -0 (round to nearest).
            CNode::Mult2 { x } => of(*x),
            CNode::Binary { f, a, b } => match f {
                BinaryOp::Add => of(*a) || of(*b),
                // a - b is -0 only for a = -0, b = +0.
                BinaryOp::Sub => of(*a),
                // Java min/max: -0 only where an operand is -0.
                BinaryOp::Min | BinaryOp::Max => of(*a) && of(*b),
                // 0 or 1.
                f => f.is_comparison() || f.is_logical() || *f == BinaryOp::Xor,
            },
            CNode::Ternary {
                f: TernaryOp::IfElse,
                b,
                c,
                ..
            } => of(*b) && of(*c),
            CNode::Nary {
                f: NaryOp::Min | NaryOp::Max,
                xs,
            } => xs.iter().all(|&x| of(x)),
            _ => false,
        };
        never.push(answer);
    }
    never
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::cplan::{Access, InputKind, TemplateSpec};
    use crate::fusion::template::CellType;
    use lafuse_core::ops::UnaryOp as U;

    fn plan(nodes: Vec<CNode>) -> CPlan {
        let out = nodes.len() - 1;
        CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::NoAgg,
                agg: None,
                sparse_safe: false,
            },
            inputs: vec![InputKind::Matrix],
            nodes,
            outputs: vec![out],
        }
    }

    fn data() -> CNode {
        CNode::Data {
            input: 0,
            access: Access::Main,
        }
    }

    fn lit(v: f64) -> CNode {
        CNode::Literal {
            value: Literal::Double(v),
        }
    }

    /// Every rule against the values it claims: for each unary function and binary operator
    /// the analysis calls never -0, no operand pair of signed zeros, infinities, NaN and
    /// ordinary values (operands themselves never -0 where the rule needs it) gives -0.
    #[test]
    fn a_node_called_never_negative_zero_is_never_negative_zero() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -2.5,
            1e-310,
            -1e-310,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MAX,
            -f64::MAX,
        ];
        let is_neg_zero = |v: f64| v.to_bits() == (-0.0f64).to_bits();
        for f in U::ALL {
            let p = plan(vec![data(), CNode::Unary { f: *f, x: 0 }]);
            if never_negative_zero(&p)[1] {
                for &v in &values {
                    assert!(!is_neg_zero(f.apply(v)), "{f:?}({v:e}) is -0");
                }
            }
            // With an operand that is never -0 (abs of the input).
            let p = plan(vec![
                data(),
                CNode::Unary { f: U::Abs, x: 0 },
                CNode::Unary { f: *f, x: 1 },
            ]);
            if never_negative_zero(&p)[2] {
                for &v in &values {
                    assert!(!is_neg_zero(f.apply(v.abs())), "{f:?}(|{v:e}|) is -0");
                }
            }
        }
        for f in BinaryOp::ALL {
            for (a_never, b_never) in [(false, false), (true, false), (false, true), (true, true)] {
                let operand = |never: bool, x: usize| {
                    if never {
                        CNode::Unary { f: U::Abs, x }
                    } else {
                        CNode::Unary { f: U::Neg, x }
                    }
                };
                let p = plan(vec![
                    data(),
                    operand(a_never, 0),
                    operand(b_never, 0),
                    CNode::Binary { f: *f, a: 1, b: 2 },
                ]);
                if !never_negative_zero(&p)[3] {
                    continue;
                }
                let domain = |never: bool| -> Vec<f64> {
                    values
                        .iter()
                        .copied()
                        .filter(|&v| !never || !is_neg_zero(v))
                        .collect()
                };
                for a in domain(a_never) {
                    for b in domain(b_never) {
                        assert!(
                            !is_neg_zero(f.apply(a, b)),
                            "{f:?}({a:e}, {b:e}) is -0 (operands never -0: {a_never}, {b_never})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_outer_log_body_needs_no_normalisation_but_its_product_does() {
        // log(x + 1e-15) * x: the sum with a non-zero literal and the log are never -0, the
        // product is (-0 * 3 = -0).
        let p = plan(vec![
            data(),
            lit(1e-15),
            CNode::Binary {
                f: BinaryOp::Add,
                a: 0,
                b: 1,
            },
            CNode::Unary { f: U::Log, x: 2 },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 3,
            },
        ]);
        assert_eq!(
            never_negative_zero(&p),
            vec![false, true, true, true, false]
        );
        assert_eq!(
            p.matrix_cell_nodes(),
            vec![false, false, false, false, true]
        );
        // A literal -0 is -0, and x + -0 may be.
        let p = plan(vec![
            data(),
            lit(-0.0),
            CNode::Binary {
                f: BinaryOp::Add,
                a: 0,
                b: 1,
            },
        ]);
        assert_eq!(never_negative_zero(&p), vec![false, false, false]);
    }
}
