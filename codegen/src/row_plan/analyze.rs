//! Row plans at compile time: the per-node classes, buffer slots, inlined chains and the
//! nodes the CSR entry computes at a row's non-zeros only ([`RowInfo`]).

use super::*;

/// Analyzes a Row plan: node classes, input uses, buffer slots.
pub(crate) fn analyze(plan: &CPlan, row_type: RowType) -> Result<RowInfo, CodegenError> {
    let kind = match row_type {
        RowType::NoAgg | RowType::NoAggB1 | RowType::NoAggConst | RowType::RowAgg => {
            RowKind::RowWise
        }
        RowType::ColAgg | RowType::ColAggB1R | RowType::ColAggConst => RowKind::ColSum,
        RowType::ColAggT | RowType::ColAggB1 | RowType::ColAggB1T => RowKind::Outer,
        RowType::FullAgg => RowKind::FullAgg,
    };
    if plan.outputs.len() != 1 {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "a row operator has one output",
        )));
    }
    let nodes = &plan.nodes;
    let out = plan.outputs[0];
    if out >= nodes.len() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "output node missing",
        )));
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.operands().iter().any(|&o| o >= i) {
            return Err(CodegenError::Internal(Internal::LaterOperand { node: i }));
        }
    }
    let mut reach = vec![false; nodes.len()];
    reach[out] = true;
    for i in (0..nodes.len()).rev() {
        if reach[i] {
            for o in nodes[i].operands() {
                reach[o] = true;
            }
        }
    }
    let mut inputs = vec![RowInput::Unused; plan.inputs.len()];
    if inputs.is_empty() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "a plan needs inputs",
        )));
    }
    inputs[0] = RowInput::Main;
    let mut classes = vec![Class::Scalar; nodes.len()];
    for i in 0..nodes.len() {
        if !reach[i] {
            continue;
        }
        let cls = |o: CNodeId| classes[o];
        classes[i] = match &nodes[i] {
            CNode::Data { input, access } => {
                let k = *input;
                if k >= inputs.len() {
                    return Err(CodegenError::Internal(Internal::InputOutsidePlan {
                        input: k,
                    }));
                }
                let scalar = plan.inputs[k] == InputKind::Scalar;
                let (u, c) = match access {
                    Access::Main if k == 0 && !scalar => (RowInput::Main, Class::Vector),
                    _ if k == 0 => {
                        return unsupported(Unsupported::MainInputAccess { access: *access })
                    }
                    _ if scalar || *access == Access::Scalar => (RowInput::Scalar, Class::Scalar),
                    Access::Aligned => (RowInput::Rows, Class::Vector),
                    Access::RowVector => (RowInput::RowVector, Class::Vector),
                    Access::ColVector => (RowInput::ColVector, Class::Scalar),
                    Access::Whole => (RowInput::WholeT, Class::Whole),
                    &access => {
                        return unsupported(Unsupported::RowInputAccess { input: k, access })
                    }
                };
                if inputs[k] != RowInput::Unused && inputs[k] != u {
                    return unsupported(Unsupported::RowInputUses {
                        input: k,
                        first: inputs[k],
                        then: u,
                    });
                }
                inputs[k] = u;
                c
            }
            CNode::Literal { value } => {
                if let Literal::Str(s) = value {
                    return unsupported(Unsupported::StringLiteral {
                        literal: s.to_string(),
                    });
                }
                Class::Scalar
            }
            n if n.is_elementwise() => {
                let mut c = Class::Scalar;
                for o in n.operands() {
                    match cls(o) {
                        Class::Scalar => {}
                        Class::Vector => c = Class::Vector,
                        _ => {
                            return unsupported(Unsupported::Construct(
                                "a matrix or product used element-wise",
                            ))
                        }
                    }
                }
                c
            }
            CNode::Nary {
                f: NaryOp::Cbind,
                xs,
            } => {
                if xs
                    .iter()
                    .any(|&x| !matches!(cls(x), Class::Scalar | Class::Vector))
                {
                    return unsupported(Unsupported::Construct("cbind of a matrix or product"));
                }
                Class::Vector
            }
            CNode::RowAgg { x, .. } | CNode::RowSumSq { x } => {
                if !matches!(cls(*x), Class::Scalar | Class::Vector) {
                    return unsupported(Unsupported::Construct(
                        "row aggregate of a matrix or product",
                    ));
                }
                Class::Scalar
            }
            CNode::VectMatMult { a, b } => {
                if !matches!(cls(*a), Class::Scalar | Class::Vector) || cls(*b) != Class::Whole {
                    return unsupported(Unsupported::Construct(
                        "row-times-matrix without a row and a whole matrix",
                    ));
                }
                Class::Vector
            }
            CNode::OuterMultAdd { a, b } => {
                if i != out || kind != RowKind::Outer {
                    return unsupported(Unsupported::Construct(
                        "an outer-product accumulation that is not the output",
                    ));
                }
                if !matches!(cls(*a), Class::Scalar | Class::Vector)
                    || !matches!(cls(*b), Class::Scalar | Class::Vector)
                {
                    return unsupported(Unsupported::Construct(
                        "outer-product accumulation of a matrix",
                    ));
                }
                Class::Outer
            }
            other => {
                return unsupported(Unsupported::NodeInRowPlan {
                    node: node_name(other),
                })
            }
        };
    }
    match (kind, classes[out]) {
        (RowKind::Outer, Class::Outer) => {}
        (RowKind::Outer, _) => {
            return unsupported(Unsupported::Construct(
                "an outer row type without its product",
            ))
        }
        (_, Class::Scalar | Class::Vector) => {}
        _ => {
            return unsupported(Unsupported::Construct(
                "a row output that is not a scalar or a vector",
            ))
        }
    }
    let direct = kind == RowKind::RowWise
        && classes[out] == Class::Vector
        && !matches!(nodes[out], CNode::Data { .. });
    let (sparse, zero_at) = sparse_nodes(nodes, &reach, &classes, out);
    let inlined = inlined_nodes(plan, &reach, &classes, &sparse, out);
    // Buffer slots by liveness: a node takes a free slot before its operands are released, so
    // a node never writes the buffer it reads. An inlined node reads its operands inside its
    // reader's loop, so they are released there (`read_by`), not at the inlined node.
    let materialized = |i: usize| {
        reach[i]
            && classes[i] == Class::Vector
            && !matches!(nodes[i], CNode::Data { .. })
            && !(direct && i == out)
            && !inlined[i]
    };
    let mut remaining = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if reach[i] {
            for o in n.operands() {
                remaining[o] += 1;
            }
        }
    }
    remaining[out] += 1;
    let mut slot = vec![None; nodes.len()];
    let mut free: Vec<usize> = Vec::new();
    let mut num_slots = 0;
    for i in 0..nodes.len() {
        if !reach[i] {
            continue;
        }
        if materialized(i) {
            free.sort_unstable_by(|a, b| b.cmp(a));
            slot[i] = Some(free.pop().unwrap_or_else(|| {
                num_slots += 1;
                num_slots - 1
            }));
        }
        if inlined[i] {
            continue;
        }
        for o in read_by(nodes, &inlined, nodes[i].operands()) {
            remaining[o] -= 1;
            if remaining[o] == 0 {
                if let Some(s) = slot[o] {
                    free.push(s);
                }
            }
        }
    }
    // Readers of X that need the dense row in the CSR entry.
    let is_main = |o: CNodeId| is_main_row(&nodes[o]);
    let mut needs_dense_main = is_main(out);
    for (i, n) in nodes.iter().enumerate() {
        if !reach[i] {
            continue;
        }
        for (pos, o) in n.operands().into_iter().enumerate() {
            if is_main(o) && !reads_sparse(nodes, &sparse, &zero_at, i, pos) {
                needs_dense_main = true;
            }
        }
    }
    // The outer-product updates that read the main row at its non-zeros scatter it only on
    // their non-finite path (see `reads_sparse`).
    let scatter_on_demand = !needs_dense_main
        && nodes.iter().enumerate().any(|(i, n)| {
            reach[i] && matches!(n, CNode::OuterMultAdd { a, b } if is_main(*a) || is_main(*b))
        });
    let hoisted = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| reach[i] && matches!(n, CNode::VectMatMult { a, .. } if is_main(*a)))
        .collect();
    Ok(RowInfo {
        plan: plan.clone(),
        kind,
        inputs,
        classes,
        reach,
        slot,
        inlined,
        num_slots,
        direct,
        needs_dense_main,
        scatter_on_demand,
        defer_outer: kind == RowKind::Outer
            && matches!(nodes[out], CNode::OuterMultAdd { a, .. } if is_main(a)),
        hoisted,
        sparse,
        matrix_cells: plan.matrix_cell_nodes(),
    })
}

/// Element-wise vector nodes the dense loop computes inside their reader's loop, element by
/// element, instead of into a buffer of their own: those read by exactly one node, itself an
/// element-wise vector node (so a chain `((x * a + b) * c ...)` is one loop, not one loop and
/// one buffer per operation). The values are the same operations on the same elements, so
/// inlining changes no result; it saves the buffer's store and reload, and keeps machine-code
/// generation linear in the chain (a loop per operation made register allocation over the
/// row's loop quadratic: seconds for a few hundred operations). Nodes the CSR entry computes
/// at the non-zeros only, nodes calling a scalar helper (their loop has no vector fast path),
/// and the output stay materialized.
pub(super) fn inlined_nodes(
    plan: &CPlan,
    reach: &[bool],
    classes: &[Class],
    sparse: &[bool],
    out: CNodeId,
) -> Vec<bool> {
    let nodes = &plan.nodes;
    let inlinable = |i: usize| {
        reach[i]
            && classes[i] == Class::Vector
            && !sparse[i]
            && nodes[i].is_elementwise()
            && !node_calls_helper(plan, &nodes[i])
    };
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if reach[i] {
            for o in n.operands() {
                readers[o].push(i);
            }
        }
    }
    (0..nodes.len())
        .map(|i| i != out && inlinable(i) && matches!(readers[i].as_slice(), [u] if inlinable(*u)))
        .collect()
}

/// The nodes whose values a computation over `operands` reads: the operands, with each inlined
/// one replaced by what it reads in turn.
pub(crate) fn read_by(nodes: &[CNode], inlined: &[bool], operands: Vec<CNodeId>) -> Vec<CNodeId> {
    let mut found = Vec::new();
    let mut stack = operands;
    while let Some(o) = stack.pop() {
        if inlined[o] {
            stack.extend(nodes[o].operands());
        } else {
            found.push(o);
        }
    }
    found
}

/// Whether `n` reads the main input's row.
pub(crate) fn is_main_row(n: &CNode) -> bool {
    matches!(
        n,
        CNode::Data {
            access: Access::Main,
            ..
        }
    )
}

/// Whether node `i` needs its operand at `pos` at the main row's non-zeros only: a node of
/// `sparse` (computed there only); or, for an operand `zero` where the main row is (the main
/// row itself, or `zero_at[o]`), a reader that skips its zeros (row-times-matrix, sums,
/// minima and maxima of a row, the outer-product update by an input).
pub(super) fn reads_sparse(
    nodes: &[CNode],
    sparse: &[bool],
    zero_at: &[bool],
    i: CNodeId,
    pos: usize,
) -> bool {
    if sparse[i] {
        return true;
    }
    let o = nodes[i].operands()[pos];
    let is_main = |o: CNodeId| is_main_row(&nodes[o]);
    if !(zero_at[o] || is_main(o)) {
        return false;
    }
    match &nodes[i] {
        CNode::VectMatMult { .. } => pos == 0,
        CNode::RowAgg { f, .. } => sparse_agg(*f),
        CNode::RowSumSq { .. } => true,
        // The other side is read densely, and the update runs over the sparse side's
        // non-zeros when the other side is finite: always for an input (finite in the CSR
        // entry); for a computed vector, `outer_add` checks it per row and, where it is not
        // finite, scatters the main row for a dense update ([`RowInfo::scatter_on_demand`]).
        CNode::OuterMultAdd { a, b } => {
            let other = if pos == 0 { *b } else { *a };
            let dense_other = !sparse[other] && !is_main(other);
            dense_other && (matches!(nodes[other], CNode::Data { .. }) || is_main(o))
        }
        _ => false,
    }
}

/// The element-wise vector nodes the CSR entry computes at the main row's non-zeros only (a
/// compact vector of values beside the row's column indices), and, per node, whether its
/// value is 0 wherever the main row is (side inputs are finite in the CSR entry).
///
/// A node is computed so when every reader needs it at the non-zeros only: a reader computed
/// so itself, or, for a node that is 0 where the main row is, a reader that skips zeros (see
/// [`reads_sparse`]). "0 where X is 0" and "finite where X is 0" are proved node by node: `X`;
/// `a * b` with one side 0 and the other finite; `a + b`, `a - b` with both 0 (finite with one
/// 0 and the other finite: the sum is then the other side exactly); `a != 0`; `abs`, `sign`,
/// `sqrt` and squares of a 0 (all map 0 to 0); comparisons are finite; inputs and finite
/// literals are finite. A node that is 0 there is needed by its readers at the non-zeros only,
/// which is what lets `Y - X` in `(X != 0) * (Y - X)` be computed there only too.
pub(super) fn sparse_nodes(
    nodes: &[CNode],
    reach: &[bool],
    classes: &[Class],
    out: CNodeId,
) -> (Vec<bool>, Vec<bool>) {
    use lafuse_compiler::hops::UnaryOp;
    let n = nodes.len();
    let (mut zero, mut finite) = (vec![false; n], vec![false; n]);
    let is_lit0 =
        |o: CNodeId| matches!(&nodes[o], CNode::Literal { value } if value.as_f64() == Some(0.0));
    for i in 0..n {
        if !reach[i] {
            continue;
        }
        let (z, f) = match &nodes[i] {
            n if is_main_row(n) => (classes[i] == Class::Vector, true),
            CNode::Data { .. } => (false, true),
            CNode::Literal { value } => (false, value.as_f64().is_some_and(f64::is_finite)),
            CNode::Binary { f: op, a, b } => {
                let (a, b) = (*a, *b);
                match op {
                    BinaryOp::Mul => {
                        let z = (zero[a] && finite[b]) || (zero[b] && finite[a]);
                        (z, z)
                    }
                    BinaryOp::Add | BinaryOp::Sub => (
                        zero[a] && zero[b],
                        (zero[a] && finite[b]) || (zero[b] && finite[a]),
                    ),
                    BinaryOp::Ne => ((zero[a] && is_lit0(b)) || (zero[b] && is_lit0(a)), true),
                    BinaryOp::Lt
                    | BinaryOp::Le
                    | BinaryOp::Gt
                    | BinaryOp::Ge
                    | BinaryOp::Eq
                    | BinaryOp::And
                    | BinaryOp::Or => (false, true),
                    _ => (false, false),
                }
            }
            CNode::Unary {
                f: UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Sqrt,
                x,
            }
            | CNode::Pow2 { x } => (zero[*x], zero[*x]),
            _ => (false, false),
        };
        zero[i] = z;
        finite[i] = f || z;
    }
    // Only vector nodes of the row's length are 0 "where the main row is" in a usable way.
    let zero_at: Vec<bool> = (0..n)
        .map(|i| zero[i] && classes[i] == Class::Vector)
        .collect();
    // Candidates, then withdraw those with a reader that needs them elsewhere, until none
    // does.
    let mut sparse: Vec<bool> = (0..n)
        .map(|i| reach[i] && i != out && classes[i] == Class::Vector && nodes[i].is_elementwise())
        .collect();
    loop {
        let mut changed = false;
        for i in 0..n {
            if !reach[i] {
                continue;
            }
            for (pos, o) in nodes[i].operands().into_iter().enumerate() {
                if sparse[o] && !reads_sparse(nodes, &sparse, &zero_at, i, pos) {
                    sparse[o] = false;
                    changed = true;
                }
            }
        }
        if !changed {
            return (sparse, zero_at);
        }
    }
}
