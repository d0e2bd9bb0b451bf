//! Where a CPlan's matrix-cell rule (`x + 0.0`, the runtime's signed-zero rule,
//! [`CPlan::matrix_cell_nodes`]) can change a result, so that generated code computes it only
//! there: not on nodes that can never be `-0.0` (a sound under-approximation: `true` only
//! where every value the node can take, NaN and infinities included, is something other than
//! `-0.0`), and not on nodes whose zero's sign nothing observes (a sound over-approximation of
//! where it is observed: a sum, or a product that a later rule normalises, cannot tell `-0.0`
//! from `0.0`).

use super::{CNode, CPlan, TemplateSpec};
use crate::fusion::template::{CellAgg, CellType};
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

/// How a node's value depends on the sign of one operand's zero.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ZeroSign {
    /// Not at all: `±0` give the same value (`exp`, `abs`, comparisons, a condition).
    Ignored,
    /// Only in the sign of a zero result (`-0 * 3` is `-0`, `0 * 3` is `0`; every other value,
    /// NaN and infinities included, is the same): products, sums, odd functions, a selected
    /// branch.
    Passed,
    /// Otherwise (`1 / ±0` is `±Infinity`; Java's `min` orders `-0` below `0`), and for
    /// every node not known to do better.
    Observed,
}

/// How node `node` treats the sign of a zero in its operand `x`.
fn zero_sign_use(node: &CNode, x: usize) -> ZeroSign {
    use ZeroSign::*;
    match node {
        CNode::Unary { f, .. } => match f {
            UnaryOp::Neg
            | UnaryOp::Sqrt
            | UnaryOp::Sign
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Sin
            | UnaryOp::Tan
            | UnaryOp::Asin
            | UnaryOp::Atan
            | UnaryOp::Sinh
            | UnaryOp::Tanh => Passed,
            // `round` goes through Java's `long`, which has no -0.
            UnaryOp::Not
            | UnaryOp::Abs
            | UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Round
            | UnaryOp::Cos
            | UnaryOp::Cosh
            | UnaryOp::Acos
            | UnaryOp::Sigmoid
            | UnaryOp::IsNaN
            | UnaryOp::IsInf => Ignored,
        },
        CNode::Pow2 { .. } => Ignored,
        CNode::Mult2 { .. } | CNode::Transpose { .. } => Passed,
        CNode::Binary { f, a, .. } => match f {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => Passed,
            // `±0 / y` is `±0` or NaN; `y / ±0` is `±Infinity` (or NaN).
            BinaryOp::Div if x == *a => Passed,
            f if f.is_comparison() || f.is_logical() || *f == BinaryOp::Xor => Ignored,
            _ => Observed,
        },
        CNode::Ternary {
            f: TernaryOp::IfElse,
            a,
            ..
        } => {
            if x == *a {
                Ignored
            } else {
                Passed
            }
        }
        _ => Observed,
    }
}

/// Whether output `k` of `plan` shows the sign of a zero it holds: a sum (or a sum of
/// squares) from `0.0` adds `-0.0` and `0.0` alike (its partial sums, Kahan corrections
/// included, are never `-0.0`), Java's `min` and `max` tell them apart, and a matrix output
/// holds the value itself. Row and Outer outputs count as shown.
fn output_shows_zero_sign(plan: &CPlan, k: usize) -> bool {
    let summed = |agg: Option<CellAgg>| matches!(agg, Some(CellAgg::Sum | CellAgg::SumSq));
    match &plan.template {
        TemplateSpec::Cell { cell_type, agg, .. } => *cell_type == CellType::NoAgg || !summed(*agg),
        TemplateSpec::MAgg { aggs, .. } => !summed(aggs.get(k).copied()),
        TemplateSpec::Row { .. } | TemplateSpec::Outer { .. } => true,
    }
}

/// Per node of `plan`: whether the sign of a zero it computes can reach a result, given
/// `sign_fixed` (per node: its value is never `-0.0`, or the matrix-cell rule normalises it
/// wherever its own sign is observed). Users follow their operands, so one pass from the last
/// node back decides each node after all its users.
pub(super) fn zero_sign_observed(plan: &CPlan, sign_fixed: &[bool]) -> Vec<bool> {
    let mut observed = vec![false; plan.nodes.len()];
    for (k, &o) in plan.outputs.iter().enumerate() {
        if let Some(slot) = observed.get_mut(o) {
            *slot |= output_shows_zero_sign(plan, k);
        }
    }
    for u in (0..plan.nodes.len()).rev() {
        let node = &plan.nodes[u];
        // A user whose own sign is fixed where it is observed passes no operand's sign on.
        let passes = observed[u] && !sign_fixed.get(u).copied().unwrap_or(false);
        for x in node.operands() {
            let seen = match zero_sign_use(node, x) {
                ZeroSign::Ignored => false,
                ZeroSign::Passed => passes,
                ZeroSign::Observed => true,
            };
            if let Some(slot) = observed.get_mut(x) {
                *slot |= seen;
            }
        }
    }
    observed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::cplan::{Access, InputKind};
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

    /// `x * y * z` over three matrix inputs (nodes 0-2 the inputs, 3 `x * y`, 4 the root)
    /// under `template`.
    fn product_of_three(template: TemplateSpec) -> CPlan {
        let input = |k| CNode::Data {
            input: k,
            access: if k == 0 {
                Access::Main
            } else {
                Access::Aligned
            },
        };
        CPlan {
            template,
            inputs: vec![InputKind::Matrix; 3],
            nodes: vec![
                input(0),
                input(1),
                input(2),
                CNode::Binary {
                    f: BinaryOp::Mul,
                    a: 0,
                    b: 1,
                },
                CNode::Binary {
                    f: BinaryOp::Mul,
                    a: 3,
                    b: 2,
                },
            ],
            outputs: vec![4],
        }
    }

    fn cell(cell_type: CellType, agg: Option<CellAgg>) -> TemplateSpec {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe: false,
        }
    }

    /// A sum cannot tell `-0.0` from `0.0`, so `sum(x * y * z)` normalises nothing; a matrix
    /// output normalises its root only (the product under it passes its zero's sign to the
    /// root alone); `min` observes the sign (Java's `min` orders `-0` first), and so does
    /// `1 / (x * y)`'s denominator; a MultiAgg's sum and max share a product that the max
    /// observes.
    #[test]
    fn the_rule_applies_only_where_a_zeros_sign_is_observed() {
        for (ty, agg) in [
            (CellType::FullAgg, CellAgg::Sum),
            (CellType::RowAgg, CellAgg::Sum),
            (CellType::ColAgg, CellAgg::SumSq),
        ] {
            let p = product_of_three(cell(ty, Some(agg)));
            assert_eq!(p.matrix_cell_nodes(), vec![false; 5], "{ty:?} {agg:?}");
        }
        let matrix = product_of_three(cell(CellType::NoAgg, None));
        assert_eq!(
            matrix.matrix_cell_nodes(),
            vec![false, false, false, false, true]
        );
        for agg in [CellAgg::Min, CellAgg::Max] {
            let p = product_of_three(cell(CellType::FullAgg, Some(agg)));
            assert_eq!(
                p.matrix_cell_nodes(),
                vec![false, false, false, false, true],
                "{agg:?}"
            );
        }
        // sum(1 / (x * y) * z): the quotient's denominator observes `x * y`'s sign.
        let mut p = product_of_three(cell(CellType::FullAgg, Some(CellAgg::Sum)));
        p.nodes.truncate(4);
        p.nodes.push(lit(1.0));
        p.nodes.push(CNode::Binary {
            f: BinaryOp::Div,
            a: 4,
            b: 3,
        });
        p.nodes.push(CNode::Binary {
            f: BinaryOp::Mul,
            a: 5,
            b: 2,
        });
        p.outputs = vec![6];
        assert_eq!(
            p.matrix_cell_nodes(),
            vec![false, false, false, true, false, false, false]
        );
        // MultiAgg of sum(x * y * z) and max(x * y): the max observes `x * y`.
        let mut m = product_of_three(TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Max],
            sparse_safe: false,
        });
        m.outputs = vec![4, 3];
        assert_eq!(
            m.matrix_cell_nodes(),
            vec![false, false, false, true, false]
        );
        m.template = TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Sum],
            sparse_safe: false,
        };
        assert_eq!(m.matrix_cell_nodes(), vec![false; 5]);
    }

    /// Along a chain of element-wise nodes into a matrix output, only the root is normalised;
    /// `abs` and a comparison hide their operand's sign, `-x` and an `ifelse` branch pass it
    /// on, and an `ifelse` condition hides it.
    #[test]
    fn a_zeros_sign_passes_through_sign_preserving_nodes_only() {
        let neg = |x| CNode::Unary { f: U::Neg, x };
        // -(-(x)) as a matrix: the inner negation passes its sign to the root, which the
        // rule normalises.
        let p = plan(vec![data(), neg(0), neg(1)]);
        assert_eq!(p.matrix_cell_nodes(), vec![false, false, true]);
        // abs(-x) and -x > 0 as matrices: neither shows `-x`'s sign, and neither root can be
        // -0.
        for root in [
            CNode::Unary { f: U::Abs, x: 1 },
            CNode::Binary {
                f: BinaryOp::Gt,
                a: 1,
                b: 2,
            },
        ] {
            let q = plan(vec![data(), neg(0), lit(0.0), root]);
            assert_eq!(q.matrix_cell_nodes(), vec![false; 4], "{:?}", q.nodes[3]);
        }
        // ifelse(-x == 0, -x, x) as a matrix: the condition hides `-x`'s sign, the branch
        // passes it to the root, which normalises.
        let mut q = plan(vec![
            data(),
            neg(0),
            lit(0.0),
            CNode::Binary {
                f: BinaryOp::Eq,
                a: 1,
                b: 2,
            },
            CNode::Ternary {
                f: TernaryOp::IfElse,
                a: 3,
                b: 1,
                c: 0,
            },
        ]);
        q.outputs = vec![4];
        assert_eq!(
            q.matrix_cell_nodes(),
            vec![false, false, false, false, true]
        );
    }
}
