//! What the native code generators (LLVM, Cranelift, PTX) read off a plan alike, kept apart
//! from any one of them so that every backend makes the same choices: how each input is read,
//! the frame a cell-wise body runs in, which nodes call a scalar helper (which decides the
//! vector width of a loop, and so the lanes sums are kept in), aggregates' initial values.

use crate::backend::{CodegenError, Internal, Unsupported};
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind, OuterType};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp, UnaryOp};
use lafuse_skeletons::{AggKind, CellKind, InputUse, OuterKind};

/// A Cell plan's loop as every native generator reads it.
pub(crate) struct CellAnalysis {
    /// The walk's kind: in the transposed frame a row aggregate of the body is a column
    /// aggregate of the walk, and the other way round.
    pub kind: CellKind,
    pub agg: Option<AggKind>,
    /// The body runs in the main input's transposed frame ([`transposed_frame`]).
    pub transposed: bool,
    /// How each input is read.
    pub uses: Vec<InputUse>,
}

/// The [`CellAnalysis`] of a Cell plan of `cell_type` and `agg`; an aggregate on a no-agg plan
/// (or none on an aggregating one) is unsupported.
pub(crate) fn cell_analysis(
    plan: &CPlan,
    cell_type: CellType,
    agg: Option<CellAgg>,
) -> Result<CellAnalysis, CodegenError> {
    let transposed = transposed_frame(plan, &plan.outputs[..1])?;
    let kind = match (cell_type, transposed) {
        (CellType::NoAgg, _) => CellKind::NoAgg,
        (CellType::RowAgg, false) | (CellType::ColAgg, true) => CellKind::RowAgg,
        (CellType::ColAgg, false) | (CellType::RowAgg, true) => CellKind::ColAgg,
        (CellType::FullAgg, _) => CellKind::FullAgg,
    };
    let agg = agg.map(agg_kind);
    if (kind == CellKind::NoAgg) != agg.is_none() {
        return Err(CodegenError::Unsupported(Unsupported::CellAggregation {
            kind,
            agg,
        }));
    }
    let uses = input_uses(plan, &plan.outputs[..1], transposed)?;
    Ok(CellAnalysis {
        kind,
        agg,
        transposed,
        uses,
    })
}

/// A MultiAgg plan's loop as every native generator reads it: one full aggregate per output.
pub(crate) struct MAggAnalysis {
    pub aggs: Vec<AggKind>,
    /// The bodies run in the main input's transposed frame ([`transposed_frame`]).
    pub transposed: bool,
    /// How each input is read.
    pub uses: Vec<InputUse>,
}

/// The [`MAggAnalysis`] of a MultiAgg plan with `aggs`; other than one aggregate per output
/// is a malformed plan.
pub(crate) fn magg_analysis(plan: &CPlan, aggs: &[CellAgg]) -> Result<MAggAnalysis, CodegenError> {
    if aggs.len() != plan.outputs.len() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "one aggregate per output expected",
        )));
    }
    let transposed = transposed_frame(plan, &plan.outputs)?;
    let uses = input_uses(plan, &plan.outputs, transposed)?;
    Ok(MAggAnalysis {
        aggs: aggs.iter().map(|&a| agg_kind(a)).collect(),
        transposed,
        uses,
    })
}

pub(crate) fn agg_kind(a: CellAgg) -> AggKind {
    match a {
        CellAgg::Sum => AggKind::Sum,
        CellAgg::SumSq => AggKind::SumSq,
        CellAgg::Min => AggKind::Min,
        CellAgg::Max => AggKind::Max,
    }
}

/// Whether the cell-wise bodies at `roots` run in the main input's transposed frame
/// ([`CPlan::transposes_main`]: a body over `t(x)` of a column-vector main input `x`). The
/// generated loop still walks the main input's cells, the same cells relabelled: reads outside
/// the transpose are the transposed reads, the output's row and column aggregates swap, and
/// the output is relabelled to its transposed shape. Roots in different frames are unsupported.
pub(crate) fn transposed_frame(plan: &CPlan, roots: &[CNodeId]) -> Result<bool, CodegenError> {
    let mut frame = None;
    for &r in roots {
        if let Some(t) = plan.transposes_main(r) {
            if frame.is_some_and(|f| f != t) {
                return Err(CodegenError::Unsupported(Unsupported::Construct(
                    "outputs over both the main input and its transpose",
                )));
            }
            frame = Some(t);
        }
    }
    Ok(frame == Some(true))
}

/// How each input is read, from the nodes reachable from `roots` (inside transposes the
/// vector reads flip, and all of them when the roots run in the transposed `frame`, see
/// [`transposed_frame`]); conflicting reads of one input are unsupported.
pub(crate) fn input_uses(
    plan: &CPlan,
    roots: &[CNodeId],
    frame: bool,
) -> Result<Vec<InputUse>, CodegenError> {
    let mut uses = vec![InputUse::Unused; plan.inputs.len()];
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<(CNodeId, bool)> = roots.iter().map(|&r| (r, frame)).collect();
    let mut set = |k: usize, u: InputUse| -> Result<(), CodegenError> {
        let slot = uses
            .get_mut(k)
            .ok_or(CodegenError::Internal(Internal::InputOutsidePlan {
                input: k,
            }))?;
        if *slot != InputUse::Unused && *slot != u {
            return Err(CodegenError::Unsupported(Unsupported::InputUses {
                input: k,
                first: *slot,
                then: u,
            }));
        }
        *slot = u;
        Ok(())
    };
    while let Some((n, sw)) = stack.pop() {
        if !seen.insert((n, sw)) {
            continue;
        }
        let node = plan
            .nodes
            .get(n)
            .ok_or(CodegenError::Internal(Internal::NodeMissing { node: n }))?;
        match node {
            CNode::Data { input, access } => {
                let k = *input;
                let scalar =
                    plan.inputs.get(k) == Some(&InputKind::Scalar) || *access == Access::Scalar;
                let u = match (access, sw) {
                    _ if scalar => InputUse::Scalar,
                    (Access::Main, false) if k == 0 => InputUse::Main,
                    (Access::Aligned, false) => InputUse::Aligned,
                    (Access::ColVector, false) => InputUse::ColVector,
                    (Access::RowVector, false) => InputUse::RowVector,
                    (Access::ColVector, true) => InputUse::ColVectorT,
                    (Access::RowVector, true) => InputUse::RowVectorT,
                    (&access, _) => {
                        return Err(CodegenError::Unsupported(Unsupported::CellInputAccess {
                            input: k,
                            access,
                            transposed: false,
                        }))
                    }
                };
                set(k, u)?;
            }
            CNode::OuterDot { u, v } => {
                let (
                    CNode::Data {
                        input: ui,
                        access: Access::OuterU,
                    },
                    CNode::Data {
                        input: vi,
                        access: va,
                    },
                ) = (&plan.nodes[*u], &plan.nodes[*v])
                else {
                    return Err(CodegenError::Unsupported(Unsupported::Construct(
                        "outer dot over non-input operands",
                    )));
                };
                set(*ui, InputUse::OuterU)?;
                set(
                    *vi,
                    match va {
                        Access::OuterV => InputUse::OuterV,
                        Access::Whole => InputUse::OuterVT,
                        &access => {
                            return Err(CodegenError::Unsupported(Unsupported::OuterFactorAccess {
                                access,
                            }))
                        }
                    },
                )?;
            }
            CNode::Transpose { x } => stack.push((*x, !sw)),
            other => stack.extend(other.operands().into_iter().map(|o| (o, sw))),
        }
    }
    Ok(uses)
}

pub(crate) fn used_mask(uses: &[InputUse]) -> Vec<bool> {
    uses.iter()
        .map(|u| !matches!(u, InputUse::Unused | InputUse::Main))
        .collect()
}

/// Vector accumulators a full aggregate's dense loop keeps (Cell and MultiAgg; both native
/// backends alike, so that every sum lands in the same lanes): cells `j .. j + 4W` go to
/// accumulators 0-3 a vector each, what is left of whole vectors to accumulator 0, the rest to
/// the scalar tail. One accumulator's Kahan chain (four dependent adds, about twelve cycles)
/// bound a full sum over cached data: `sum(R ^ 2)` over 2000 x 20 ran at 1.5 cycles a cell.
pub(crate) const FULL_AGG_VECTORS: usize = 4;

pub(crate) fn init_value(agg: AggKind) -> f64 {
    match agg {
        AggKind::Min => f64::INFINITY,
        AggKind::Max => f64::NEG_INFINITY,
        _ => 0.0,
    }
}

/// Whether the dense entry runs over the rows as one stretch of cells: no row or column
/// aggregate, and every input read at the current cell of a same-shaped matrix (or a
/// scalar), never broadcast along a row or a column, nor transposed.
pub(crate) fn runs_flat(plan: &CPlan, kind: CellKind) -> bool {
    matches!(kind, CellKind::NoAgg | CellKind::FullAgg)
        && plan.nodes.iter().all(|n| match n {
            CNode::Data { input, access } => {
                plan.inputs.get(*input) == Some(&InputKind::Scalar)
                    || matches!(access, Access::Main | Access::Aligned | Access::Scalar)
            }
            CNode::Transpose { .. } => false,
            _ => true,
        })
}

/// A node kind's name for messages.
pub(crate) fn node_name(n: &CNode) -> &'static str {
    match n {
        CNode::Data { .. } => "data",
        CNode::Literal { .. } => "literal",
        CNode::Unary { .. } => "unary",
        CNode::Pow2 { .. } => "pow2",
        CNode::Mult2 { .. } => "mult2",
        CNode::Binary { .. } => "binary",
        CNode::Ternary { .. } => "ternary",
        CNode::Nary { .. } => "n-ary",
        CNode::RowAgg { .. } => "row aggregate",
        CNode::RowSumSq { .. } => "row sum of squares",
        CNode::VectMatMult { .. } => "row-times-matrix",
        CNode::OuterMultAdd { .. } => "outer-product accumulation",
        CNode::DotCell { .. } => "dot product",
        CNode::OuterDot { .. } => "outer dot",
        CNode::FinalProduct { .. } => "final product",
        CNode::Transpose { .. } => "transpose",
    }
}

/// Whether the generators' `unary` computes `f` with a scalar Rust helper (one call per lane), so a
/// vector loop of it gains nothing over a scalar one. Any operation not listed as inline
/// counts as a helper call: a wrong `true` costs speed only.
pub(crate) fn unary_calls_helper(f: UnaryOp) -> bool {
    !matches!(
        f,
        UnaryOp::Neg
            | UnaryOp::Not
            | UnaryOp::Abs
            | UnaryOp::Sqrt
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Sign
            | UnaryOp::Round
            | UnaryOp::Log
            | UnaryOp::Exp
            | UnaryOp::Sigmoid
            | UnaryOp::Tanh
    )
}

/// Whether the generators' `binary` computes `f` with a scalar Rust helper (see [`unary_calls_helper`]).
pub(crate) fn binary_calls_helper(f: BinaryOp) -> bool {
    matches!(f, BinaryOp::Pow | BinaryOp::Mod) || f.is_bitwise()
}

/// Whether the element-wise `node` of `plan` is computed by a scalar Rust helper (as
/// the cell bodies and the Row template emit it: `x ^ 2` is a multiplication).
pub(crate) fn node_calls_helper(plan: &CPlan, node: &CNode) -> bool {
    match node {
        CNode::Unary { f, .. } => unary_calls_helper(*f),
        CNode::Binary { f, b, .. } => {
            let lit2 = matches!(plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
            binary_calls_helper(*f) && !(*f == BinaryOp::Pow && lit2)
        }
        _ => false,
    }
}

/// Input positions an Outer entry point reads specially.
pub(crate) struct OuterInputs {
    pub u: usize,
    pub v: usize,
    pub w: Option<usize>,
    /// The node whose value is `G_ij`.
    pub g: CNodeId,
}

/// An Outer plan's final step, the inputs its entry points read specially, and how each
/// input is read (the final product's matrix included).
pub(crate) fn outer_analysis(
    plan: &CPlan,
    outer_type: OuterType,
) -> Result<(OuterKind, OuterInputs, Vec<InputUse>), CodegenError> {
    let kind = match outer_type {
        OuterType::CellWise => OuterKind::CellWise,
        OuterType::FullAgg => OuterKind::FullAgg,
        OuterType::Left => OuterKind::Left,
        OuterType::LeftT => OuterKind::LeftT,
        OuterType::Right => OuterKind::Right,
    };
    let out = plan.outputs[0];
    let (g, w) = match (&plan.nodes[out], kind) {
        (CNode::FinalProduct { g, w }, OuterKind::Left | OuterKind::LeftT | OuterKind::Right) => {
            let CNode::Data { input, .. } = plan.nodes[*w] else {
                return Err(CodegenError::Unsupported(Unsupported::Construct(
                    "final product operand is not an input",
                )));
            };
            (*g, Some(input))
        }
        (_, OuterKind::CellWise | OuterKind::FullAgg) => (out, None),
        _ => {
            return Err(CodegenError::Unsupported(Unsupported::Construct(
                "outer type does not match its output node",
            )))
        }
    };
    let mut uses = input_uses(plan, &[g], transposed_frame(plan, &[g])?)?;
    if let Some(wk) = w {
        let u = if kind == OuterKind::Right {
            InputUse::FinalW
        } else {
            InputUse::FinalWT
        };
        match uses[wk] {
            InputUse::Unused => uses[wk] = u,
            // `(X * (U %*% t(V))) %*% V`: the final product reads the rows of V that
            // the dot products read, from the same n x k view.
            InputUse::OuterV if kind == OuterKind::Right => {}
            // `t(U) %*% (X * (U %*% t(V)))`: the rows of U, from the m x k view the dot
            // products read (the construction's `Access::OuterU` final matrix).
            InputUse::OuterU if kind != OuterKind::Right => {}
            _ => {
                return Err(CodegenError::Unsupported(Unsupported::Construct(
                    "final-product matrix also read in the body other than as V of a \
                     right product",
                )))
            }
        }
    }
    let find = |u: &dyn Fn(InputUse) -> bool| uses.iter().position(|&x| u(x));
    let (Some(ui), Some(vi)) = (
        find(&|x| x == InputUse::OuterU),
        find(&|x| matches!(x, InputUse::OuterV | InputUse::OuterVT)),
    ) else {
        return Err(CodegenError::Unsupported(Unsupported::Construct(
            "outer operator without u_i · v_j",
        )));
    };
    Ok((kind, OuterInputs { u: ui, v: vi, w, g }, uses))
}

/// Whether an Outer CSR entry may take a row's non-zeros `W` at a time: `W` dot products one after
/// another, then the body once on `W` lanes (one vector `log` or `exp` instead of `W` scalar
/// ones, a vector Kahan sum). The body must read nothing per cell but the driver's value and
/// the dot product (its cells' columns are scattered), and the final step must be a sum or
/// the cell itself; a Left or Right product adds a row per non-zero either way.
pub(crate) fn lane_parallel(plan: &CPlan, kind: OuterKind, oi: &OuterInputs) -> bool {
    matches!(kind, OuterKind::FullAgg | OuterKind::CellWise)
        && plan.nodes.iter().all(|n| match n {
            CNode::Data { input, access } => {
                *access == Access::Main
                    || *access == Access::Scalar
                    || plan.inputs.get(*input) == Some(&InputKind::Scalar)
                    || *input == oi.u
                    || *input == oi.v
            }
            CNode::Transpose { .. } | CNode::FinalProduct { .. } => false,
            _ => true,
        })
}

/// Whether node `g` is `X * f` or `f * X` with `X` the driver itself: then at a zero of the
/// driver `g` is already `0 * f` (0, or NaN where `f` is not finite), which the mask
/// `0 * g` of the every-cell walks would only repeat, up to the sign of a zero; a sum adds
/// either zero alike.
pub(crate) fn multiplies_by_main(plan: &CPlan, g: CNodeId) -> bool {
    let is_main = |n: CNodeId| {
        matches!(
            plan.nodes.get(n),
            Some(CNode::Data {
                access: Access::Main,
                ..
            })
        )
    };
    matches!(
        plan.nodes.get(g),
        Some(CNode::Binary { f: BinaryOp::Mul, a, b }) if is_main(*a) || is_main(*b)
    )
}

/// Whether no node of `plan` reads node `n`: then, where the operator sums `n`, its value
/// may be left as computed, `-0.0` kept (a Kahan sum from `0.0` adds `-0.0` and `0.0` alike,
/// every partial and correction staying the same), and the matrix-cell rule would only cost
/// an add.
pub(crate) fn summed_only(plan: &CPlan, n: CNodeId) -> bool {
    !plan.nodes.iter().any(|node| node.operands().contains(&n))
}
