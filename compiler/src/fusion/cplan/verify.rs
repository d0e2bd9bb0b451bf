//! The CPlan verifier, run on every plan construction builds (as `hops::verify` is on every
//! DAG): the structural invariants the backends (the reference evaluator, native code
//! generation, the skeletons) rely on, and the canonical form the structural hash keys on.
//!
//! It checks structure only. What a backend may decline for a well-formed plan (an input read
//! in two ways, a side input of unknown shape read [`Access::Whole`] in a cell-wise body) is
//! that backend's `Unsupported` answer, after which the hops run unfused; a plan that fails
//! here is a compiler bug. CPlans carry no sizes, so shapes are the skeletons' to check.

use super::{
    count_vector_intermediates, Access, CNode, CNodeId, CPlan, InputKind, OuterType, TemplateSpec,
};
use crate::fusion::template::{CellAgg, CellType};
use crate::hops::{Literal, NaryOp};
use std::collections::HashMap;
use std::fmt;
use thiserror::Error;

/// Why a CPlan is malformed: the defect, at the offending node if it is local to one.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    /// The offending node, if the problem is local to one.
    pub node: Option<CNodeId>,
    pub defect: PlanDefect,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.node {
            Some(n) => write!(f, "invalid CPlan at node %{n}: {}", self.defect),
            None => write!(f, "invalid CPlan: {}", self.defect),
        }
    }
}

impl std::error::Error for VerifyError {}

/// What is wrong with a CPlan ([`VerifyError`]). `template` fields are a template's name,
/// `variant` its variant's, `label` fields a node's label (as `explain` prints them).
#[derive(Clone, Debug, Error, PartialEq)]
pub enum PlanDefect {
    #[error("the plan has no inputs (input 0 is the main input)")]
    NoInputs,
    #[error("the main input (input 0) is a scalar")]
    ScalarMainInput,
    #[error("a MultiAgg plan has no aggregates")]
    NoAggregates,
    #[error("a {template} plan has {want} output(s) (one per aggregate), this one {got}")]
    OutputCount {
        template: &'static str,
        want: usize,
        got: usize,
    },
    #[error("output %{output} is out of range (the plan has {len} nodes)")]
    OutputOutOfRange { output: CNodeId, len: usize },
    #[error("operand %{operand} is out of range (the plan has {len} nodes)")]
    OperandOutOfRange { operand: CNodeId, len: usize },
    #[error("operand %{operand} does not come before its user (operands precede users)")]
    OperandAfterUser { operand: CNodeId },
    #[error("{label} has no meaning in a {template} plan")]
    NodeInTemplate {
        label: String,
        template: &'static str,
    },
    #[error("reads input {input}, but the plan has {inputs} inputs")]
    InputOutOfRange { input: usize, inputs: usize },
    #[error("input {input} is read as the main input, which is input 0")]
    MainRead { input: usize },
    #[error("scalar input {input} is read as {access:?}, not as a scalar")]
    ScalarRead { input: usize, access: Access },
    #[error("an outer-product factor ({access:?}) read in a {template} plan")]
    FactorOutsideOuter {
        access: Access,
        template: &'static str,
    },
    #[error("literal {value:?} is not a double")]
    NonDoubleLiteral { value: Literal },
    #[error("n-ary {f} has {operands} operands, at least {least} needed")]
    NaryOperands {
        f: &'static str,
        operands: usize,
        least: usize,
    },
    /// Operand `operand` (`role`, e.g. `the U of u_i · v_j`) that is not a data input read in
    /// one of the ways `accesses`.
    #[error(
        "{role} must be an input read as {}, is %{operand} ({label})",
        .accesses.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(" or ")
    )]
    ExpectedData {
        role: &'static str,
        accesses: Vec<Access>,
        operand: CNodeId,
        label: String,
    },
    #[error("reads the outer-product factor %{operand} ({access:?}) outside u_i · v_j")]
    FactorRead { operand: CNodeId, access: Access },
    #[error("reads %{operand}, a {label}, which only an output may be")]
    ReadsOutputOnly { operand: CNodeId, label: String },
    #[error("is not reachable from any output")]
    Unreachable,
    #[error("duplicates node %{first} (equal nodes are one after CSE)")]
    Duplicate { first: CNodeId },
    #[error("input {input} is never read")]
    UnreadInput { input: usize },
    #[error(
        "cell type {cell_type:?} with aggregation {agg:?} (a Cell plan aggregates exactly when its type is not no_agg)"
    )]
    CellAggregation {
        cell_type: CellType,
        agg: Option<CellAgg>,
    },
    #[error("sparse-safe Cell plan with aggregation {agg:?}, not a sum")]
    SparseSafeCell { agg: Option<CellAgg> },
    #[error("sparse-safe MultiAgg plan with aggregates {aggs:?}, not all sums")]
    SparseSafeMultiAgg { aggs: Vec<CellAgg> },
    #[error(
        "row type {variant} with output {label} (an outer-product accumulation is the output exactly of the col_agg_t, col_agg_b1 and col_agg_b1_t types)"
    )]
    RowOutput { variant: String, label: String },
    #[error("num_vectors is {declared}, the body needs {needed} row vectors")]
    VectorCount { declared: usize, needed: usize },
    #[error(
        "outer type {variant} with output {label} (a final product is the output exactly of the left, left_t and right types)"
    )]
    OuterOutput { variant: String, label: String },
    #[error("an Outer plan has exactly one u_i · v_j, this one {dots}")]
    OuterDots { dots: usize },
}

fn fail<T>(node: Option<CNodeId>, defect: PlanDefect) -> Result<T, VerifyError> {
    Err(VerifyError { node, defect })
}

/// Checks every invariant of a [`CPlan`]. Never panics, whatever the plan holds; linear in
/// its size (one pass per check, no recursion).
pub fn verify(plan: &CPlan) -> Result<(), VerifyError> {
    check_signature(plan)?;
    for (i, node) in plan.nodes.iter().enumerate() {
        check_node(plan, i, node)?;
    }
    check_canonical(plan)?;
    check_template(plan)
}

/// Inputs and outputs: the main input exists and is a matrix (every template iterates over
/// it), and the outputs are as many as the template produces, each an existing node.
fn check_signature(plan: &CPlan) -> Result<(), VerifyError> {
    match plan.inputs.first() {
        None => return fail(None, PlanDefect::NoInputs),
        Some(InputKind::Scalar) => return fail(None, PlanDefect::ScalarMainInput),
        Some(InputKind::Matrix) => {}
    }
    let want = match &plan.template {
        TemplateSpec::MAgg { aggs, .. } if aggs.is_empty() => {
            return fail(None, PlanDefect::NoAggregates)
        }
        TemplateSpec::MAgg { aggs, .. } => aggs.len(),
        _ => 1,
    };
    if plan.outputs.len() != want {
        return fail(
            None,
            PlanDefect::OutputCount {
                template: plan.template.name(),
                want,
                got: plan.outputs.len(),
            },
        );
    }
    let n = plan.nodes.len();
    if let Some(&o) = plan.outputs.iter().find(|&&o| o >= n) {
        return fail(None, PlanDefect::OutputOutOfRange { output: o, len: n });
    }
    Ok(())
}

/// One node on its own: operands before it (so the body is a DAG in evaluation order, which
/// every backend's single pass and the zero-cell analysis index by), a kind the template's
/// evaluator defines, its arity, and data reads that match the inputs.
fn check_node(plan: &CPlan, i: CNodeId, node: &CNode) -> Result<(), VerifyError> {
    let n = plan.nodes.len();
    for o in node.operands() {
        if o >= n {
            return fail(
                Some(i),
                PlanDefect::OperandOutOfRange { operand: o, len: n },
            );
        }
        if o >= i {
            return fail(Some(i), PlanDefect::OperandAfterUser { operand: o });
        }
    }
    let template = &plan.template;
    let outer = matches!(template, TemplateSpec::Outer { .. });
    let row = matches!(template, TemplateSpec::Row { .. });
    let allowed = match node {
        CNode::Data { .. }
        | CNode::Literal { .. }
        | CNode::Unary { .. }
        | CNode::Pow2 { .. }
        | CNode::Mult2 { .. }
        | CNode::Binary { .. }
        | CNode::Ternary { .. }
        | CNode::Nary {
            f: NaryOp::Min | NaryOp::Max,
            ..
        } => true,
        CNode::DotCell { .. } | CNode::Transpose { .. } => !row,
        CNode::OuterDot { .. } | CNode::FinalProduct { .. } => outer,
        CNode::Nary {
            f: NaryOp::Cbind, ..
        }
        | CNode::RowAgg { .. }
        | CNode::RowSumSq { .. }
        | CNode::VectMatMult { .. }
        | CNode::OuterMultAdd { .. } => row,
        CNode::Nary { .. } => false,
    };
    if !allowed {
        return fail(
            Some(i),
            PlanDefect::NodeInTemplate {
                label: node.label(),
                template: template.name(),
            },
        );
    }
    match node {
        CNode::Data { input, access } => {
            let Some(kind) = plan.inputs.get(*input) else {
                return fail(
                    Some(i),
                    PlanDefect::InputOutOfRange {
                        input: *input,
                        inputs: plan.inputs.len(),
                    },
                );
            };
            if *access == Access::Main && *input != 0 {
                return fail(Some(i), PlanDefect::MainRead { input: *input });
            }
            if *kind == InputKind::Scalar && *access != Access::Scalar {
                return fail(
                    Some(i),
                    PlanDefect::ScalarRead {
                        input: *input,
                        access: *access,
                    },
                );
            }
            if matches!(access, Access::OuterU | Access::OuterV) && !outer {
                return fail(
                    Some(i),
                    PlanDefect::FactorOutsideOuter {
                        access: *access,
                        template: template.name(),
                    },
                );
            }
        }
        // Construction turns every numeric literal into a double; a string has no cell value.
        CNode::Literal { value } if !matches!(value, Literal::Double(_)) => {
            return fail(
                Some(i),
                PlanDefect::NonDoubleLiteral {
                    value: value.clone(),
                },
            );
        }
        CNode::Nary { f, xs } => {
            let least = if *f == NaryOp::Cbind { 1 } else { 2 };
            if xs.len() < least {
                return fail(
                    Some(i),
                    PlanDefect::NaryOperands {
                        f: f.name(),
                        operands: xs.len(),
                        least,
                    },
                );
            }
        }
        CNode::VectMatMult { b, .. } => expect_data(
            plan,
            i,
            *b,
            &[Access::Whole],
            "the matrix of a row-times-matrix",
        )?,
        CNode::OuterDot { u, v } => {
            expect_data(plan, i, *u, &[Access::OuterU], "the U of u_i · v_j")?;
            expect_data(
                plan,
                i,
                *v,
                &[Access::OuterV, Access::Whole],
                "the V of u_i · v_j",
            )?;
        }
        CNode::FinalProduct { w, .. } => expect_data(
            plan,
            i,
            *w,
            &[Access::Whole, Access::OuterU],
            "the matrix of a final product",
        )?,
        _ => {}
    }
    // A factor of `U %*% t(V)` has no value per cell: only the template's dot product reads it.
    for (pos, o) in node.operands().into_iter().enumerate() {
        if let CNode::Data {
            access: access @ (Access::OuterU | Access::OuterV),
            ..
        } = plan.nodes[o]
        {
            let as_factor = match node {
                CNode::OuterDot { .. } => (pos == 0) == (access == Access::OuterU),
                // A Left product's `t(U)`, read as U's rows.
                CNode::FinalProduct { .. } => {
                    pos == 1
                        && access == Access::OuterU
                        && matches!(
                            template,
                            TemplateSpec::Outer {
                                outer_type: OuterType::Left | OuterType::LeftT
                            }
                        )
                }
                _ => false,
            };
            if !as_factor {
                return fail(Some(i), PlanDefect::FactorRead { operand: o, access });
            }
        }
        // Final products and outer-product accumulations are what the template writes out.
        if matches!(
            plan.nodes[o],
            CNode::FinalProduct { .. } | CNode::OuterMultAdd { .. }
        ) {
            return fail(
                Some(i),
                PlanDefect::ReadsOutputOnly {
                    operand: o,
                    label: plan.nodes[o].label(),
                },
            );
        }
    }
    Ok(())
}

/// Operand `o` of node `i` must be a data input read with one of `accesses`.
fn expect_data(
    plan: &CPlan,
    i: CNodeId,
    o: CNodeId,
    accesses: &[Access],
    role: &'static str,
) -> Result<(), VerifyError> {
    match plan.nodes[o] {
        CNode::Data { access, .. } if accesses.contains(&access) => Ok(()),
        ref other => fail(
            Some(i),
            PlanDefect::ExpectedData {
                role,
                accesses: accesses.to_vec(),
                operand: o,
                label: other.label(),
            },
        ),
    }
}

/// The canonical form construction leaves (structurally equal operators must be equal, since
/// the structural hash and the operator cache key on it): no node unreachable from the
/// outputs, no two equal nodes (hash-consing is the CSE), no input but the main one unread.
fn check_canonical(plan: &CPlan) -> Result<(), VerifyError> {
    // Operands precede users: one backward pass marks everything the outputs reach.
    let mut live = vec![false; plan.nodes.len()];
    for &o in &plan.outputs {
        live[o] = true;
    }
    for i in (0..plan.nodes.len()).rev() {
        if live[i] {
            for o in plan.nodes[i].operands() {
                live[o] = true;
            }
        }
    }
    if let Some(dead) = live.iter().position(|&l| !l) {
        return fail(Some(dead), PlanDefect::Unreachable);
    }
    let mut seen: HashMap<&CNode, CNodeId> = HashMap::with_capacity(plan.nodes.len());
    let mut read = vec![false; plan.inputs.len()];
    for (i, node) in plan.nodes.iter().enumerate() {
        if let Some(first) = seen.insert(node, i) {
            return fail(Some(i), PlanDefect::Duplicate { first });
        }
        if let CNode::Data { input, .. } = node {
            read[*input] = true;
        }
    }
    // The main input stays even when unread: it drives the iteration.
    if let Some(k) = read.iter().skip(1).position(|&r| !r) {
        return fail(None, PlanDefect::UnreadInput { input: k + 1 });
    }
    Ok(())
}

/// Per template: the output variant agrees with the output nodes and the aggregates.
fn check_template(plan: &CPlan) -> Result<(), VerifyError> {
    let out = plan.outputs[0];
    let sums_only = |aggs: &[CellAgg]| {
        aggs.iter()
            .all(|a| matches!(a, CellAgg::Sum | CellAgg::SumSq))
    };
    match &plan.template {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        } => {
            if (*cell_type == CellType::NoAgg) != agg.is_none() {
                return fail(
                    None,
                    PlanDefect::CellAggregation {
                        cell_type: *cell_type,
                        agg: *agg,
                    },
                );
            }
            if *sparse_safe && !agg.is_some_and(|a| sums_only(&[a])) {
                return fail(None, PlanDefect::SparseSafeCell { agg: *agg });
            }
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            if *sparse_safe && !sums_only(aggs) {
                return fail(None, PlanDefect::SparseSafeMultiAgg { aggs: aggs.clone() });
            }
        }
        TemplateSpec::Row {
            row_type,
            num_vectors,
        } => {
            let accumulates = matches!(plan.nodes[out], CNode::OuterMultAdd { .. });
            if accumulates != row_type.is_outer_accumulation() {
                return fail(
                    Some(out),
                    PlanDefect::RowOutput {
                        variant: plan.template.variant(),
                        label: plan.nodes[out].label(),
                    },
                );
            }
            let count = count_vector_intermediates(&plan.nodes, &plan.outputs);
            if *num_vectors != count {
                return fail(
                    None,
                    PlanDefect::VectorCount {
                        declared: *num_vectors,
                        needed: count,
                    },
                );
            }
        }
        TemplateSpec::Outer { outer_type } => {
            let product = matches!(plan.nodes[out], CNode::FinalProduct { .. });
            let wants_product = matches!(
                outer_type,
                OuterType::Left | OuterType::LeftT | OuterType::Right
            );
            if product != wants_product {
                return fail(
                    Some(out),
                    PlanDefect::OuterOutput {
                        variant: plan.template.variant(),
                        label: plan.nodes[out].label(),
                    },
                );
            }
            // The skeleton computes `u_i · v_j` once per cell and hands it to the body, so a
            // body has exactly one (CSE merges equal ones); without it the plan is a Cell plan.
            let dots: Vec<CNodeId> = (0..plan.nodes.len())
                .filter(|&i| matches!(plan.nodes[i], CNode::OuterDot { .. }))
                .collect();
            if dots.len() != 1 {
                return fail(
                    dots.get(1).copied(),
                    PlanDefect::OuterDots { dots: dots.len() },
                );
            }
        }
    }
    Ok(())
}
