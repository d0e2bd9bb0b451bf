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

/// Why a CPlan is malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// The offending node, if the problem is local to one.
    pub node: Option<CNodeId>,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.node {
            Some(n) => write!(f, "invalid CPlan at node %{n}: {}", self.message),
            None => write!(f, "invalid CPlan: {}", self.message),
        }
    }
}

impl std::error::Error for VerifyError {}

fn fail<T>(node: Option<CNodeId>, message: impl Into<String>) -> Result<T, VerifyError> {
    Err(VerifyError {
        node,
        message: message.into(),
    })
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
        None => return fail(None, "the plan has no inputs (input 0 is the main input)"),
        Some(InputKind::Scalar) => return fail(None, "the main input (input 0) is a scalar"),
        Some(InputKind::Matrix) => {}
    }
    let want = match &plan.template {
        TemplateSpec::MAgg { aggs, .. } if aggs.is_empty() => {
            return fail(None, "a MultiAgg plan has no aggregates")
        }
        TemplateSpec::MAgg { aggs, .. } => aggs.len(),
        _ => 1,
    };
    if plan.outputs.len() != want {
        return fail(
            None,
            format!(
                "a {} plan has {want} output(s) (one per aggregate), this one {}",
                plan.template.name(),
                plan.outputs.len()
            ),
        );
    }
    let n = plan.nodes.len();
    if let Some(&o) = plan.outputs.iter().find(|&&o| o >= n) {
        return fail(
            None,
            format!("output %{o} is out of range (the plan has {n} nodes)"),
        );
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
                format!("operand %{o} is out of range (the plan has {n} nodes)"),
            );
        }
        if o >= i {
            return fail(
                Some(i),
                format!("operand %{o} does not come before its user (operands precede users)"),
            );
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
            format!(
                "{} has no meaning in a {} plan",
                node.label(),
                template.name()
            ),
        );
    }
    match node {
        CNode::Data { input, access } => {
            let Some(kind) = plan.inputs.get(*input) else {
                return fail(
                    Some(i),
                    format!(
                        "reads input {input}, but the plan has {} inputs",
                        plan.inputs.len()
                    ),
                );
            };
            if *access == Access::Main && *input != 0 {
                return fail(
                    Some(i),
                    format!("input {input} is read as the main input, which is input 0"),
                );
            }
            if *kind == InputKind::Scalar && *access != Access::Scalar {
                return fail(
                    Some(i),
                    format!("scalar input {input} is read as {access:?}, not as a scalar"),
                );
            }
            if matches!(access, Access::OuterU | Access::OuterV) && !outer {
                return fail(
                    Some(i),
                    format!(
                        "an outer-product factor ({access:?}) read in a {} plan",
                        template.name()
                    ),
                );
            }
        }
        // Construction turns every numeric literal into a double; a string has no cell value.
        CNode::Literal { value } if !matches!(value, Literal::Double(_)) => {
            return fail(Some(i), format!("literal {value:?} is not a double"));
        }
        CNode::Nary { f, xs } => {
            let least = if *f == NaryOp::Cbind { 1 } else { 2 };
            if xs.len() < least {
                return fail(
                    Some(i),
                    format!(
                        "n-ary {} has {} operands, at least {least} needed",
                        f.name(),
                        xs.len()
                    ),
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
            &[Access::Whole],
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
                _ => false,
            };
            if !as_factor {
                return fail(
                    Some(i),
                    format!("reads the outer-product factor %{o} ({access:?}) outside u_i · v_j"),
                );
            }
        }
        // Final products and outer-product accumulations are what the template writes out.
        if matches!(
            plan.nodes[o],
            CNode::FinalProduct { .. } | CNode::OuterMultAdd { .. }
        ) {
            return fail(
                Some(i),
                format!(
                    "reads %{o}, a {}, which only an output may be",
                    plan.nodes[o].label()
                ),
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
    what: &str,
) -> Result<(), VerifyError> {
    match plan.nodes[o] {
        CNode::Data { access, .. } if accesses.contains(&access) => Ok(()),
        ref other => fail(
            Some(i),
            format!(
                "{what} must be an input read as {}, is %{o} ({})",
                accesses
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(" or "),
                other.label()
            ),
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
        return fail(Some(dead), "is not reachable from any output");
    }
    let mut seen: HashMap<&CNode, CNodeId> = HashMap::with_capacity(plan.nodes.len());
    let mut read = vec![false; plan.inputs.len()];
    for (i, node) in plan.nodes.iter().enumerate() {
        if let Some(first) = seen.insert(node, i) {
            return fail(
                Some(i),
                format!("duplicates node %{first} (equal nodes are one after CSE)"),
            );
        }
        if let CNode::Data { input, .. } = node {
            read[*input] = true;
        }
    }
    // The main input stays even when unread: it drives the iteration.
    if let Some(k) = read.iter().skip(1).position(|&r| !r) {
        return fail(None, format!("input {} is never read", k + 1));
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
                    format!("cell type {cell_type:?} with aggregation {agg:?} (a Cell plan aggregates exactly when its type is not no_agg)"),
                );
            }
            if *sparse_safe && !agg.is_some_and(|a| sums_only(&[a])) {
                return fail(
                    None,
                    format!("sparse-safe Cell plan with aggregation {agg:?}, not a sum"),
                );
            }
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            if *sparse_safe && !sums_only(aggs) {
                return fail(
                    None,
                    format!("sparse-safe MultiAgg plan with aggregates {aggs:?}, not all sums"),
                );
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
                    format!(
                        "row type {} with output {} (an outer-product accumulation is the output exactly of the col_agg_t, col_agg_b1 and col_agg_b1_t types)",
                        plan.template.variant(),
                        plan.nodes[out].label()
                    ),
                );
            }
            let count = count_vector_intermediates(&plan.nodes, &plan.outputs);
            if *num_vectors != count {
                return fail(
                    None,
                    format!("num_vectors is {num_vectors}, the body needs {count} row vectors"),
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
                    format!(
                        "outer type {} with output {} (a final product is the output exactly of the left, left_t and right types)",
                        plan.template.variant(),
                        plan.nodes[out].label()
                    ),
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
                    format!(
                        "an Outer plan has exactly one u_i · v_j, this one {}",
                        dots.len()
                    ),
                );
            }
        }
    }
    Ok(())
}
