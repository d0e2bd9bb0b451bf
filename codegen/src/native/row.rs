//! Entry points of Row operators (reference 5.6, 6.3, 6.6): the loop over rows `[rl, ru)` of
//! the main input `X` (dense rows, or CSR rows), and per row the plan's nodes in order, each a
//! scalar or a row vector.
//!
//! Vector nodes are materialized into per-task scratch buffers (slots reused by liveness, like
//! SystemDS's ring buffer, reference 5.10), except that a row-wise operator's output node is
//! computed straight into its output row. Element-wise nodes are one loop of [`W`] lanes (plus a
//! scalar tail; a strided scalar loop when a length-one vector broadcasts). The vector
//! primitives — row sum / sum of squares / min / max / product / variance, dot product (one
//! or two columns per pass), sparse dot product, `axpy`, sparse `axpy`, vector add, copy,
//! non-zero and non-finite counts — are internal always-inline functions of the same module;
//! reductions use explicit 8-lane accumulators combined in a fixed order (lane order; for dot
//! products several independent accumulators combined as a fixed tree, see
//! `outer::dot_products`), and LLVM 14 does not reassociate without fast-math, so results are
//! deterministic.
//!
//! Dense `X` goes in blocks of [`ROW_BLOCK`] rows where that saves passes over cached data:
//! products `X[i, ] %*% B` of the block's rows are computed together before its rows run, and
//! outer-product updates `t(X[i, ]) %*% b` are added to the partial once per block. Those two
//! block primitives do not depend on the plan, so they are compiled once per process
//! ([`BlockPrim`]) and operators call them.
//!
//! Sparse `X` (CSR entry, called only when every side input is finite): primitives that read
//! `X` directly visit its non-zeros (`X %*% B` as sparse dot products, row sums, and the
//! outer-product accumulation `t(X) %*% b` as sparse `axpy`s, the latter only when `b` is
//! finite in that row, since `0 * Inf` must stay NaN). Element-wise nodes needed at the row's
//! non-zeros only (such as ALS-CG's `(X != 0) * (Y - X)` before a product) are computed there
//! only, as compact vectors that those primitives read the same way ([`sparse_nodes`]). Every
//! other reader sees the row scattered into a zeroed scratch row (cleared again after the row).
//!
//! Sizes are not part of a plan: [`layout`] derives every vector length and buffer offset from
//! the input shapes at execution, validates them (mismatched lengths are errors before any
//! generated code runs), and passes them as parameters the generated code loads once.

use super::cell::W;
use super::expr::{
    self, declare_entry, declare_primitive, ierr, if_else, load_inputs, load_main_csr, Fx,
    InputPtrs,
};
use super::library::{self, Library};
use super::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use super::outer;
use super::CodegenError;
use crate::reference::Operand;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{
    BasicMetadataValueEnum, FloatValue, FunctionValue, IntValue, PointerValue, VectorValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind, RowType};
use lafuse_compiler::hops::{AggOp, BinaryOp, Literal, NaryOp, TernaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::row::{RowArgs, RowInput, RowKind, RowLayout};
use std::mem::offset_of;
use std::sync::OnceLock;

/// Parameter positions (see [`layout`]): the output row stride, the scratch offset of the
/// scattered sparse row, the outer-product orientation, the scratch offset of the pending
/// outer-product rows, then three values per node.
const P_OUTC: usize = 0;
const P_MROW: usize = 1;
const P_FLIP: usize = 2;
const P_PEND: usize = 3;
const P_NODE0: usize = 4;
const PER_NODE: usize = 4;
/// Per node: vector length (`VectMatMult`: columns of `B`; `OuterMultAdd`: length of `a`).
const LEN: usize = 0;
/// Per node: scratch offset of its buffer.
const OFF: usize = 1;
/// Per node: `VectMatMult`: rows of `B`; `OuterMultAdd`: length of `b`.
const AUX: usize = 2;
/// Per node: a hoisted product's scratch offset of its block of [`ROW_BLOCK`] results.
const HOIST: usize = 3;

fn pidx(node: CNodeId, what: usize) -> usize {
    P_NODE0 + PER_NODE * node + what
}

/// What a node is per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Scalar,
    Vector,
    /// A whole side matrix (operand of a row-times-matrix product).
    Whole,
    /// The outer-product accumulation (the output of an outer row type).
    Outer,
}

/// The compile-time analysis of a Row plan; kept by the operator for [`layout`].
#[derive(Clone, Debug)]
pub(crate) struct RowInfo {
    plan: CPlan,
    pub(crate) kind: RowKind,
    pub(crate) inputs: Vec<RowInput>,
    classes: Vec<Class>,
    reach: Vec<bool>,
    /// Buffer slot per materialized vector node.
    slot: Vec<Option<usize>>,
    /// Element-wise vector nodes computed inside their one reader's loop instead of into a
    /// buffer of their own (see [`inlined_nodes`]).
    inlined: Vec<bool>,
    num_slots: usize,
    /// The output node is computed straight into the output row.
    direct: bool,
    /// The CSR entry needs the row scattered densely.
    needs_dense_main: bool,
    /// `t(X) %*% B` over dense rows of `X` (an outer row type whose `a` is the main row):
    /// the dense entry defers the accumulation and adds a block of [`ROW_BLOCK`] rows at a
    /// time.
    defer_outer: bool,
    /// Products `X[i, ] %*% B` of the main row (per node): the dense entry computes them for a
    /// block of [`ROW_BLOCK`] rows at once, before the block's rows run.
    hoisted: Vec<bool>,
    /// Element-wise nodes the CSR entry computes at the main row's non-zeros only (see
    /// [`sparse_nodes`]); where such a node is not 0 where the main row is, its readers read
    /// it at the non-zeros only too.
    sparse: Vec<bool>,
    /// Per node: whether its value is written as a matrix cell, `-0.0` as `0.0`, as the
    /// unfused kernels do ([`CPlan::matrix_cell_nodes`]).
    matrix_cells: Vec<bool>,
}

/// Rows the dense entry handles as one block.
///
/// * Products of the main row with a whole matrix `B` are computed for the block's rows in
///   one pass over `B` (`lafuse_row_dot_rows`): `B` is read once per block instead of once
///   per row, and the rows' independent sums keep the FMA units busy. Each result is one
///   accumulator of [`W`] lanes over the row in order, then a scalar tail, so a row's value
///   does not depend on the block it falls in (nor on the thread partitioning).
/// * Outer-product updates `t(X[i, ]) %*% b_i` are kept and added to the partial `P` once per
///   block (`P[c, ] += Σ_r b_r[c] * X[r, ]`, the rows in order, so every element sees the same
///   additions in the same order as row by row): `P` is loaded and stored once per block
///   instead of once per row, and the block's rows are read from the cache.
///
/// Eight rows rather than four: a block of 1000-double rows (64 KB) with the partial and `B`
/// stays within the core's L2 cache, and the loads of `B` and of the partial per row of `X`
/// halve again (the load ports, not memory, bound these loops on this machine's cores).
const ROW_BLOCK: u64 = 8;

/// How many blocks ahead the block primitives prefetch the main input's rows, into the L2: the
/// dot products of a block fetch the first half of that block's rows and its outer-product
/// updates the second half, so that memory reads are in flight in both phases. (When the dot
/// products fetched the whole next block, memory idled while a block's updates ran from the
/// cache: `row_mm` at 1e5×1e3 reached 66-69 % of a same-process read of `X` when memory was
/// fast, 70-72 % with the halves; two blocks ahead measured the same as one.)
const PREFETCH_BLOCKS: u64 = 1;

fn unsupported<T>(s: impl Into<String>) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(s.into()))
}

/// Aggregates the CSR entry computes from a row's non-zeros.
fn sparse_agg(f: AggOp) -> bool {
    matches!(f, AggOp::Sum | AggOp::Mean | AggOp::Min | AggOp::Max)
}

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
        return Err(CodegenError::Internal(
            "a row operator has one output".into(),
        ));
    }
    let nodes = &plan.nodes;
    let out = plan.outputs[0];
    if out >= nodes.len() {
        return Err(CodegenError::Internal("output node missing".into()));
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.operands().iter().any(|&o| o >= i) {
            return Err(CodegenError::Internal(format!(
                "node {i} uses a later node"
            )));
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
        return Err(CodegenError::Internal("a plan needs inputs".into()));
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
                    return Err(CodegenError::Internal(format!(
                        "input {k} outside the plan"
                    )));
                }
                let scalar = plan.inputs[k] == InputKind::Scalar;
                let (u, c) = match access {
                    Access::Main if k == 0 && !scalar => (RowInput::Main, Class::Vector),
                    _ if k == 0 => {
                        return unsupported(format!("the main input read as {access:?}"))
                    }
                    _ if scalar || *access == Access::Scalar => (RowInput::Scalar, Class::Scalar),
                    Access::Aligned => (RowInput::Rows, Class::Vector),
                    Access::RowVector => (RowInput::RowVector, Class::Vector),
                    Access::ColVector => (RowInput::ColVector, Class::Scalar),
                    Access::Whole => (RowInput::WholeT, Class::Whole),
                    a => return unsupported(format!("input {k} read as {a:?} in a row plan")),
                };
                if inputs[k] != RowInput::Unused && inputs[k] != u {
                    return unsupported(format!(
                        "input {k} read both as {:?} and as {u:?}",
                        inputs[k]
                    ));
                }
                inputs[k] = u;
                c
            }
            CNode::Literal { value } => {
                if let Literal::Str(s) = value {
                    return unsupported(format!("string literal {s:?} in a body"));
                }
                Class::Scalar
            }
            n if n.is_elementwise() => {
                let mut c = Class::Scalar;
                for o in n.operands() {
                    match cls(o) {
                        Class::Scalar => {}
                        Class::Vector => c = Class::Vector,
                        _ => return unsupported("a matrix or product used element-wise"),
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
                    return unsupported("cbind of a matrix or product");
                }
                Class::Vector
            }
            CNode::RowAgg { x, .. } | CNode::RowSumSq { x } => {
                if !matches!(cls(*x), Class::Scalar | Class::Vector) {
                    return unsupported("row aggregate of a matrix or product");
                }
                Class::Scalar
            }
            CNode::VectMatMult { a, b } => {
                if !matches!(cls(*a), Class::Scalar | Class::Vector) || cls(*b) != Class::Whole {
                    return unsupported("row-times-matrix without a row and a whole matrix");
                }
                Class::Vector
            }
            CNode::OuterMultAdd { a, b } => {
                if i != out || kind != RowKind::Outer {
                    return unsupported("an outer-product accumulation that is not the output");
                }
                if !matches!(cls(*a), Class::Scalar | Class::Vector)
                    || !matches!(cls(*b), Class::Scalar | Class::Vector)
                {
                    return unsupported("outer-product accumulation of a matrix");
                }
                Class::Outer
            }
            other => return unsupported(format!("{} in a row plan", expr::node_name(other))),
        };
    }
    match (kind, classes[out]) {
        (RowKind::Outer, Class::Outer) => {}
        (RowKind::Outer, _) => return unsupported("an outer row type without its product"),
        (_, Class::Scalar | Class::Vector) => {}
        _ => return unsupported("a row output that is not a scalar or a vector"),
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
fn inlined_nodes(
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
            && !expr::node_calls_helper(plan, &nodes[i])
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
fn read_by(nodes: &[CNode], inlined: &[bool], operands: Vec<CNodeId>) -> Vec<CNodeId> {
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
fn is_main_row(n: &CNode) -> bool {
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
fn reads_sparse(
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
        // The other side is an input (finite in the CSR entry), read densely, so the update
        // runs over the sparse side's non-zeros.
        CNode::OuterMultAdd { a, b } => {
            let other = if pos == 0 { *b } else { *a };
            !sparse[other] && !is_main(other) && matches!(nodes[other], CNode::Data { .. })
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
fn sparse_nodes(
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

impl RowInfo {
    /// Whether the dense entry calls block primitive `prim` (and so needs its library).
    pub(crate) fn uses(&self, prim: BlockPrim) -> bool {
        match prim {
            BlockPrim::DotRows => self.hoisted.contains(&true),
            BlockPrim::AxpyRows => self.defer_outer,
        }
    }
}

/// Per-node lengths at execution.
#[derive(Clone, Copy, Debug, Default)]
struct Len {
    len: usize,
    aux: usize,
}

fn shape_err<T>(s: String) -> Result<T, CodegenError> {
    Err(CodegenError::Internal(format!("row operator inputs: {s}")))
}

/// Derives and validates every vector length and buffer offset for these inputs, and checks
/// the expected output shape.
pub(crate) fn layout(
    info: &RowInfo,
    inputs: &[Operand<'_>],
    out_shape: (usize, usize),
) -> Result<RowLayout, CodegenError> {
    let plan = &info.plan;
    if inputs.len() != plan.inputs.len() {
        return shape_err(format!(
            "operator takes {} inputs, got {}",
            plan.inputs.len(),
            inputs.len()
        ));
    }
    let shape = |k: usize| match inputs[k] {
        Operand::Scalar(_) => (1, 1),
        Operand::Matrix(m) => m.shape(),
    };
    let Operand::Matrix(main) = inputs[0] else {
        return shape_err("the main input must be a matrix".into());
    };
    let (m, n) = main.shape();
    let vlen = |lens: &[Len], o: CNodeId| {
        if info.classes[o] == Class::Vector {
            lens[o].len
        } else {
            1
        }
    };
    let mut lens = vec![Len::default(); plan.nodes.len()];
    for (i, node) in plan.nodes.iter().enumerate() {
        if !info.reach[i] {
            continue;
        }
        lens[i] = match node {
            CNode::Data { input, access } => match (info.classes[i], access) {
                (Class::Vector, Access::Main) => Len { len: n, aux: 0 },
                (Class::Vector, _) => {
                    let (r, c) = shape(*input);
                    if *access == Access::Aligned && r != m {
                        return shape_err(format!("input {input} has {r} rows, not {m}"));
                    }
                    Len { len: c, aux: 0 }
                }
                (Class::Whole, _) => {
                    let (r, c) = shape(*input);
                    Len { len: c, aux: r }
                }
                _ => Len::default(),
            },
            n if n.is_elementwise() => {
                let mut len: Option<usize> = None;
                for o in n.operands() {
                    if info.classes[o] != Class::Vector {
                        continue;
                    }
                    let x = lens[o].len;
                    len = Some(match len {
                        None | Some(1) => x,
                        Some(l) if x == 1 || x == l => l,
                        Some(l) => {
                            return shape_err(format!(
                                "element-wise operands of lengths {l} and {x}"
                            ))
                        }
                    });
                }
                Len {
                    len: len.unwrap_or(1),
                    aux: 0,
                }
            }
            CNode::Nary { xs, .. } => Len {
                len: xs.iter().map(|&x| vlen(&lens, x)).sum(),
                aux: 0,
            },
            CNode::VectMatMult { a, b } => {
                let (la, Len { len: k, aux: l }) = (vlen(&lens, *a), lens[*b]);
                if la != l {
                    return shape_err(format!("a row of length {la} times a matrix of {l} rows"));
                }
                Len { len: k, aux: l }
            }
            CNode::OuterMultAdd { a, b } => Len {
                len: vlen(&lens, *a),
                aux: vlen(&lens, *b),
            },
            _ => Len::default(),
        };
    }
    let out = plan.outputs[0];
    let (want, flipped) = match info.kind {
        RowKind::RowWise => ((m, vlen(&lens, out)), false),
        RowKind::ColSum => ((1, vlen(&lens, out)), false),
        RowKind::Outer => {
            let Len { len: la, aux: lb } = lens[out];
            ((la, lb), la > lb)
        }
        RowKind::FullAgg => ((1, 1), false),
    };
    if want != out_shape {
        return shape_err(format!(
            "output is {}x{}, expected {}x{}",
            want.0, want.1, out_shape.0, out_shape.1
        ));
    }
    let mut slot_len = vec![0usize; info.num_slots];
    for (i, s) in info.slot.iter().enumerate() {
        if let Some(s) = s {
            slot_len[*s] = slot_len[*s].max(lens[i].len);
        }
    }
    let mut slot_off = Vec::with_capacity(slot_len.len());
    let mut total = 0usize;
    for l in &slot_len {
        slot_off.push(total);
        total += l;
    }
    let mrow = total;
    if info.needs_dense_main {
        total += n;
    }
    let pend = total;
    if info.defer_outer {
        total += ROW_BLOCK as usize * lens[out].aux;
    }
    let mut hoist = vec![0usize; plan.nodes.len()];
    for (i, h) in info.hoisted.iter().enumerate() {
        if *h {
            hoist[i] = total;
            total += ROW_BLOCK as usize * lens[i].len;
        }
    }
    let mut params = vec![0usize; P_NODE0 + PER_NODE * plan.nodes.len()];
    params[P_OUTC] = want.1;
    params[P_MROW] = mrow;
    params[P_FLIP] = usize::from(flipped);
    params[P_PEND] = pend;
    for (i, l) in lens.iter().enumerate() {
        params[pidx(i, LEN)] = l.len;
        params[pidx(i, AUX)] = l.aux;
        params[pidx(i, OFF)] = info.slot[i].map_or(0, |s| slot_off[s]);
        params[pidx(i, HOIST)] = hoist[i];
    }
    Ok(RowLayout {
        params,
        scratch_len: total,
        out_rows: want.0,
        out_cols: want.1,
        flipped,
    })
}

// ---- primitives ----------------------------------------------------------------------------

/// The in-module vector primitives.
struct Prims<'c> {
    sum: FunctionValue<'c>,
    sumsq: FunctionValue<'c>,
    min: FunctionValue<'c>,
    max: FunctionValue<'c>,
    prod: FunctionValue<'c>,
    m2: FunctionValue<'c>,
    nnz: FunctionValue<'c>,
    nonfinite: FunctionValue<'c>,
    dot: FunctionValue<'c>,
    dot2: FunctionValue<'c>,
    sdot: FunctionValue<'c>,
    axpy: FunctionValue<'c>,
    /// Adds a block of rows' updates to one row of the partial.
    /// (Emitted for a plan that defers its outer-product updates only.)
    axpy_rows: Option<FunctionValue<'c>>,
    /// Products of a block of rows with every column of a transposed matrix.
    /// (Emitted for a plan with hoisted products only.)
    dot_rows: Option<FunctionValue<'c>>,
    saxpy: FunctionValue<'c>,
    vadd: FunctionValue<'c>,
    copy: FunctionValue<'c>,
}

/// `acc = step(acc, x)` over `len` elements (`W` lanes, then a scalar tail), lanes combined
/// in order with the tail last; returns the scalar.
fn reduce_loop<'c>(
    fx: &mut Fx<'_, 'c>,
    len: IntValue<'c>,
    init: f64,
    load: &dyn Fn(&Fx<'_, 'c>, IntValue<'c>, u32) -> Result<VectorValue<'c>, CodegenError>,
    step: &dyn Fn(
        &Fx<'_, 'c>,
        VectorValue<'c>,
        VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError>,
) -> Result<FloatValue<'c>, CodegenError> {
    let acc = [fx.slot(fx.vty(W).into())?, fx.slot(fx.vty(1).into())?];
    fx.store(acc[0], fx.splat_const(init, W))?;
    fx.store(acc[1], fx.splat_const(init, 1))?;
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for (x, w) in [(0usize, W), (1, 1)] {
        fx.for_slot(j, len, w as u64, &mut |fx, jv| {
            let v = load(fx, jv, w)?;
            let cur = fx.load_v(acc[x])?;
            fx.store(acc[x], step(fx, cur, v)?)
        })?;
    }
    let vw = fx.load_v(acc[0])?;
    let mut r = fx.splat_const(init, 1);
    for l in 0..W {
        let x =
            fx.b.build_extract_element(vw, fx.i64c(l as u64), "l")
                .map_err(ierr)?
                .into_float_value();
        r = step(fx, r, fx.splat(x, 1)?)?;
    }
    r = step(fx, r, fx.load_v(acc[1])?)?;
    fx.b.build_extract_element(r, fx.i64c(0), "r")
        .map_err(ierr)
        .map(|v| v.into_float_value())
}

/// `for j in 0..len` in `W`-lane steps, then a scalar tail.
fn lanes<'c>(
    fx: &mut Fx<'_, 'c>,
    len: IntValue<'c>,
    body: &mut dyn FnMut(&mut Fx<'_, 'c>, IntValue<'c>, u32) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for w in [W, 1] {
        fx.for_slot(j, len, w as u64, &mut |fx, jv| body(fx, jv, w))?;
    }
    Ok(())
}

fn pick<'c>(
    fx: &Fx<'_, 'c>,
    max: bool,
    acc: VectorValue<'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let p = if max {
        FloatPredicate::OGT
    } else {
        FloatPredicate::OLT
    };
    let better = fx.fcmp(p, x, acc)?;
    let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
    fx.select(fx.or(better, nan)?, x, acc)
}

/// `lafuse_row_axpy_rows(o, x, x stride, s, s stride, cols, rows, len)`: see
/// [`define_axpy_rows`].
const AXPY_ROWS: &str = "lafuse_row_axpy_rows";
/// `lafuse_row_dot_rows(x, stride, bt, l, cols, rows, o)`: see [`define_dot_rows`].
const DOT_ROWS: &str = "lafuse_row_dot_rows";

fn axpy_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, p, i, p, i, i, i, i], false)
}

fn dot_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, i, p, i, i, i, p], false)
}

/// A block primitive of the dense entry (see [`ROW_BLOCK`]). Each is plan-independent, so it
/// is compiled once per process, as a library of its own (their unrolled loops would otherwise
/// be most of a Row operator's machine code): an operator that calls both builds them on two
/// cores, and one that calls one of them does not wait for the other (the dot products take
/// about 23 ms of LLVM's time, the updates 13 ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockPrim {
    /// `lafuse_row_dot_rows`: products of a block of rows with a transposed matrix.
    DotRows,
    /// `lafuse_row_axpy_rows`: a block's outer-product updates of the partial.
    AxpyRows,
}

static DOT_ROWS_LIBRARY: OnceLock<Result<Library, CodegenError>> = OnceLock::new();
static AXPY_ROWS_LIBRARY: OnceLock<Result<Library, CodegenError>> = OnceLock::new();

impl BlockPrim {
    /// The function's name, which is also its library's module name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BlockPrim::DotRows => DOT_ROWS,
            BlockPrim::AxpyRows => AXPY_ROWS,
        }
    }

    fn cell(self) -> &'static OnceLock<Result<Library, CodegenError>> {
        match self {
            BlockPrim::DotRows => &DOT_ROWS_LIBRARY,
            BlockPrim::AxpyRows => &AXPY_ROWS_LIBRARY,
        }
    }

    /// Whether its library is built (or failed to build).
    pub(crate) fn built(self) -> bool {
        self.cell().get().is_some()
    }

    /// Its library, built on first use.
    pub(crate) fn library(
        self,
        store: Option<&super::ObjectStore>,
    ) -> Result<&'static Library, CodegenError> {
        Library::get(
            self.cell(),
            self.name(),
            |ctx, module| {
                match self {
                    BlockPrim::DotRows => define_dot_rows(ctx, module)?,
                    BlockPrim::AxpyRows => define_axpy_rows(ctx, module)?,
                }
                Ok(vec![self.name().to_string()])
            },
            store,
        )
    }
}

/// `o[j] += s * x[j]` (`lafuse_row_axpy`, inlined where called).
fn emit_axpy<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<FunctionValue<'c>, CodegenError> {
    let (pf, f64m, i64m) = (
        f64_ptr(ctx).into(),
        ctx.f64_type().into(),
        ctx.i64_type().into(),
    );
    let mut fx = declare_primitive(ctx, module, "lafuse_row_axpy", &[pf, pf, f64m, i64m], None);
    let o = fx.param(0)?.into_pointer_value();
    let x = fx.param(1)?.into_pointer_value();
    let s = fx.param(2)?.into_float_value();
    let len = fx.param(3)?.into_int_value();
    lanes(&mut fx, len, &mut |fx, j, w| {
        let sv = fx.splat(s, w)?;
        let a = load_vec(&fx.b, fx.vty(w), o, j)?;
        let b = load_vec(&fx.b, fx.vty(w), x, j)?;
        store_vec(&fx.b, o, j, fx.fadd(a, fx.fmul(sv, b)?)?)
    })?;
    fx.b.build_return(None).map_err(ierr)?;
    Ok(fx.func)
}

/// `lafuse_row_axpy_rows`: a block's outer-product updates of the partial.
fn define_axpy_rows<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<(), CodegenError> {
    let axpy = emit_axpy(ctx, module)?;
    // For each of `cols` rows of the partial, `o_c = o + c * len` with the scales
    // `s_c = s + c`: o_c[j] += s_c[0] * x[j], then += s_c[ss] * x[stride + j], ... for `rows`
    // rows. A full block (`ROW_BLOCK` rows) updates two partial rows per pass over the block
    // (then the odd one), each loaded and stored once; a short block goes row by row. Either
    // way every element sees its rows in order.
    {
        let f = library::declare(ctx, module, AXPY_ROWS, axpy_rows_type(ctx));
        let mut fx = Fx::new(ctx, module, f);
        let o = fx.param(0)?.into_pointer_value();
        let x = fx.param(1)?.into_pointer_value();
        let stride = fx.param(2)?.into_int_value();
        let s = fx.param(3)?.into_pointer_value();
        let ss = fx.param(4)?.into_int_value();
        let cols = fx.param(5)?.into_int_value();
        let rows = fx.param(6)?.into_int_value();
        let len = fx.param(7)?.into_int_value();
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, rows, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        if_else(
            &mut fx,
            full,
            &mut |fx| {
                let xs = (0..ROW_BLOCK)
                    .map(|r| gep(&fx.b, x, fx.mul(stride, fx.i64c(r))?))
                    .collect::<Result<Vec<_>, _>>()?;
                let ahead = fx.mul(stride, fx.i64c(PREFETCH_BLOCKS * ROW_BLOCK))?;
                let c = fx.slot(fx.ctx.i64_type().into())?;
                fx.store(c, fx.i64c(0))?;
                for nc in [2u64, 1] {
                    fx.for_slot(c, cols, nc, &mut |fx, c| {
                        let mut os = Vec::new();
                        let mut svs = Vec::new();
                        for t in 0..nc {
                            let ct = fx.add(c, fx.i64c(t))?;
                            os.push(gep(&fx.b, o, fx.mul(ct, len)?)?);
                            let st = gep(&fx.b, s, ct)?;
                            let mut per = Vec::new();
                            for r in 0..ROW_BLOCK {
                                let sv = load(&fx.b, gep(&fx.b, st, fx.mul(ss, fx.i64c(r))?)?)?;
                                per.push(sv.into_float_value());
                            }
                            svs.push(per);
                        }
                        lanes(fx, len, &mut |fx, j, w| {
                            if w == W {
                                // The second half of the rows of the block `PREFETCH_BLOCKS`
                                // on, a line of each per step, into the L2: memory reads stay in
                                // flight while this block is added from the cache.
                                for r in ROW_BLOCK / 2..ROW_BLOCK {
                                    let row = fx.add(ahead, fx.mul(stride, fx.i64c(r))?)?;
                                    expr::prefetch_element(fx, x, fx.add(row, j)?, 2)?;
                                }
                            }
                            let mut acc = os
                                .iter()
                                .map(|ot| load_vec(&fx.b, fx.vty(w), *ot, j))
                                .collect::<Result<Vec<_>, _>>()?;
                            for (r, xr) in xs.iter().enumerate() {
                                let b = load_vec(&fx.b, fx.vty(w), *xr, j)?;
                                for (a, per) in acc.iter_mut().zip(&svs) {
                                    *a = fx.fadd(*a, fx.fmul(fx.splat(per[r], w)?, b)?)?;
                                }
                            }
                            for (ot, a) in os.iter().zip(acc) {
                                store_vec(&fx.b, *ot, j, a)?;
                            }
                            Ok(())
                        })
                    })?;
                }
                Ok(())
            },
            &mut |fx| {
                fx.for_range(fx.i64c(0), cols, &mut |fx, c| {
                    let oc = gep(&fx.b, o, fx.mul(c, len)?)?;
                    let sc = gep(&fx.b, s, c)?;
                    fx.for_range(fx.i64c(0), rows, &mut |fx, r| {
                        let xr = gep(&fx.b, x, fx.mul(stride, r)?)?;
                        let sr = load(&fx.b, gep(&fx.b, sc, fx.mul(ss, r)?)?)?;
                        call(fx, axpy, &[oc.into(), xr.into(), sr.into(), len.into()])?;
                        Ok(())
                    })
                })
            },
        )?;
        fx.b.build_return(None).map_err(ierr)?;
    }
    Ok(())
}

/// `lafuse_row_dot_rows`: the products of a block of rows with a transposed matrix.
fn define_dot_rows<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<(), CodegenError> {
    // o[q * cols + c] = x[q * stride + ..] · bt[c * l + ..] for `rows` rows and `cols`
    // columns: `ROW_BLOCK` rows at once (two columns per pass over `bt`, then the odd one), or
    // row by row; either way each value is one `W`-lane accumulator over the row in order,
    // lanes summed as a halving tree, then the scalar tail (see `ROW_BLOCK`).
    {
        let f = library::declare(ctx, module, DOT_ROWS, dot_rows_type(ctx));
        let mut fx = Fx::new(ctx, module, f);
        let x = fx.param(0)?.into_pointer_value();
        let stride = fx.param(1)?.into_int_value();
        let bt = fx.param(2)?.into_pointer_value();
        let l = fx.param(3)?.into_int_value();
        let cols = fx.param(4)?.into_int_value();
        let rows = fx.param(5)?.into_int_value();
        let o = fx.param(6)?.into_pointer_value();
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, rows, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        // The products of `nr` rows from `x0` with the columns from `c`, `nc` at a time.
        let block = |fx: &mut Fx<'_, 'c>,
                     x0: PointerValue<'c>,
                     o0: PointerValue<'c>,
                     nr: u64|
         -> Result<(), CodegenError> {
            let xs = (0..nr)
                .map(|q| gep(&fx.b, x0, fx.mul(stride, fx.i64c(q))?))
                .collect::<Result<Vec<_>, _>>()?;
            let c = fx.slot(fx.ctx.i64_type().into())?;
            fx.store(c, fx.i64c(0))?;
            // A short block's rows take the columns one at a time: no faster in pairs, and
            // one loop less to compile.
            let widths: &[u64] = if nr == ROW_BLOCK { &[2, 1] } else { &[1] };
            let ahead = (nr == ROW_BLOCK)
                .then(|| fx.mul(stride, fx.i64c(PREFETCH_BLOCKS * ROW_BLOCK)))
                .transpose()?;
            for &nc in widths {
                fx.for_slot(c, cols, nc, &mut |fx, c| {
                    let bs = (0..nc)
                        .map(|t| gep(&fx.b, bt, fx.mul(fx.add(c, fx.i64c(t))?, l)?))
                        .collect::<Result<Vec<_>, _>>()?;
                    let vals = dot_block(fx, &xs, &bs, l, ahead)?;
                    for (k, v) in vals.into_iter().enumerate() {
                        let (q, t) = (k as u64 / nc, k as u64 % nc);
                        let at = fx.add(fx.mul(fx.i64c(q), cols)?, fx.add(c, fx.i64c(t))?)?;
                        fx.store(gep(&fx.b, o0, at)?, v)?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        };
        if_else(
            &mut fx,
            full,
            &mut |fx| block(fx, x, o, ROW_BLOCK),
            &mut |fx| {
                fx.for_range(fx.i64c(0), rows, &mut |fx, q| {
                    let xq = gep(&fx.b, x, fx.mul(stride, q)?)?;
                    let oq = gep(&fx.b, o, fx.mul(cols, q)?)?;
                    block(fx, xq, oq, 1)
                })
            },
        )?;
        fx.b.build_return(None).map_err(ierr)?;
    }
    Ok(())
}

/// The dot products of every row `xs[q]` with every vector `bs[t]` over `len` elements, each
/// in one accumulator of [`W`] lanes (then a scalar tail), all in one pass over the rows; the
/// lanes are summed as a halving tree and the tail added last. Returns them row by row
/// (`q * bs.len() + t`).
fn dot_block<'c>(
    fx: &mut Fx<'_, 'c>,
    xs: &[PointerValue<'c>],
    bs: &[PointerValue<'c>],
    len: IntValue<'c>,
    ahead: Option<IntValue<'c>>,
) -> Result<Vec<FloatValue<'c>>, CodegenError> {
    let mut acc = Vec::new();
    for w in [W, 1] {
        let mut per = Vec::new();
        for _ in 0..xs.len() * bs.len() {
            let s = fx.slot(fx.vty(w).into())?;
            fx.store(s, fx.splat_const(0.0, w))?;
            per.push(s);
        }
        acc.push(per);
    }
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for (a, w) in [(0usize, W), (1, 1)] {
        let slots = acc[a].clone();
        fx.for_slot(j, len, u64::from(w), &mut |fx, j| {
            let bv = bs
                .iter()
                .map(|b| load_vec(&fx.b, fx.vty(w), *b, j))
                .collect::<Result<Vec<_>, _>>()?;
            for (q, x) in xs.iter().enumerate() {
                if let (Some(d), true) = (ahead, w == W && q < xs.len() / 2) {
                    // For the first half of the rows, this row's line `ahead` elements on (the
                    // same row of the block `PREFETCH_BLOCKS` on; `lafuse_row_axpy_rows`
                    // prefetches the other half): memory reads stay in flight while this block
                    // is computed from the cache.
                    expr::prefetch_element(fx, *x, fx.add(d, j)?, 2)?;
                }
                let xv = load_vec(&fx.b, fx.vty(w), *x, j)?;
                for (t, b) in bv.iter().enumerate() {
                    let s = slots[q * bs.len() + t];
                    let cur = fx.load_v(s)?;
                    fx.store(s, fx.fma(xv, *b, cur)?)?;
                }
            }
            Ok(())
        })?;
    }
    let mut out = Vec::with_capacity(xs.len() * bs.len());
    for q in 0..xs.len() {
        for t in 0..bs.len() {
            let v = fx.load_v(acc[0][q * bs.len() + t])?;
            let tv = scalar0(fx, fx.load_v(acc[1][q * bs.len() + t])?)?;
            let r = outer::sum_lanes(fx, v)?;
            out.push(fx.b.build_float_add(r, tv, "r").map_err(ierr)?);
        }
    }
    Ok(out)
}

fn emit_prims<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
) -> Result<Prims<'c>, CodegenError> {
    let pf: BasicMetadataTypeEnum = f64_ptr(ctx).into();
    let pi32: BasicMetadataTypeEnum = ctx.i32_type().ptr_type(AddressSpace::default()).into();
    let i64m: BasicMetadataTypeEnum = ctx.i64_type().into();
    let f64m: BasicMetadataTypeEnum = ctx.f64_type().into();
    let f64r = Some(ctx.f64_type().into());
    let i64r = Some(ctx.i64_type().into());
    type Step<'c> =
        fn(&Fx<'_, 'c>, VectorValue<'c>, VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError>;
    // Reductions over (p, len).
    let reduce = |name: &str,
                  init: f64,
                  sq: bool,
                  step: Step<'c>|
     -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, i64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let r = reduce_loop(
            &mut fx,
            len,
            init,
            &|fx, j, w| {
                let x = load_vec(&fx.b, fx.vty(w), p, j)?;
                if sq {
                    fx.fmul(x, x)
                } else {
                    Ok(x)
                }
            },
            &step,
        )?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        Ok(fx.func)
    };
    let sum = reduce("lafuse_row_sum", 0.0, false, |fx, a, x| fx.fadd(a, x))?;
    let sumsq = reduce("lafuse_row_sumsq", 0.0, true, |fx, a, x| fx.fadd(a, x))?;
    let min = reduce("lafuse_row_min", f64::INFINITY, false, |fx, a, x| {
        pick(fx, false, a, x)
    })?;
    let max = reduce("lafuse_row_max", f64::NEG_INFINITY, false, |fx, a, x| {
        pick(fx, true, a, x)
    })?;
    let prod = reduce("lafuse_row_prod", 1.0, false, |fx, a, x| fx.fmul(a, x))?;
    // Σ (x - mean)^2.
    let m2 = {
        let mut fx = declare_primitive(ctx, module, "lafuse_row_m2", &[pf, i64m, f64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let mean = fx.param(2)?.into_float_value();
        let r = reduce_loop(
            &mut fx,
            len,
            0.0,
            &|fx, j, w| {
                let x = load_vec(&fx.b, fx.vty(w), p, j)?;
                let d = fx.fsub(x, fx.splat(mean, w)?)?;
                fx.fmul(d, d)
            },
            &|fx, a, x| fx.fadd(a, x),
        )?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        fx.func
    };
    // Counts of non-zeros and of non-finite values.
    let count = |name: &str, nonfinite: bool| -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, i64m], i64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let acc = [
            fx.slot(ctx.i64_type().vec_type(W).into())?,
            fx.slot(ctx.i64_type().vec_type(1).into())?,
        ];
        fx.store(acc[0], ctx.i64_type().vec_type(W).const_zero())?;
        fx.store(acc[1], ctx.i64_type().vec_type(1).const_zero())?;
        lanes(&mut fx, len, &mut |fx, j, w| {
            let x = load_vec(&fx.b, fx.vty(w), p, j)?;
            let c = if nonfinite {
                let a = fx.intrinsic("llvm.fabs", x)?;
                fx.fcmp(FloatPredicate::UGE, a, fx.splat_const(f64::INFINITY, w))?
            } else {
                fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, w))?
            };
            let ity = ctx.i64_type().vec_type(w);
            let c = fx.b.build_int_z_extend(c, ity, "z").map_err(ierr)?;
            let slot = acc[usize::from(w == 1)];
            let cur = fx.load_v(slot)?;
            fx.store(slot, fx.b.build_int_add(cur, c, "n").map_err(ierr)?)
        })?;
        let t = fx.sum_i64_lanes(fx.load_v(acc[0])?, fx.load_v(acc[1])?)?;
        fx.b.build_return(Some(&t)).map_err(ierr)?;
        Ok(fx.func)
    };
    let nnz = count("lafuse_row_nnz", false)?;
    let nonfinite = count("lafuse_row_nonfinite", true)?;
    // Dot products in the fixed order of `outer::dot_products` (independent accumulators).
    let dot = {
        let mut fx = declare_primitive(ctx, module, "lafuse_row_dot", &[pf, pf, i64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let q = fx.param(1)?.into_pointer_value();
        let len = fx.param(2)?.into_int_value();
        let r = outer::dot_products(&mut fx, p, &[q], len, true)?;
        fx.b.build_return(Some(&r[0])).map_err(ierr)?;
        fx.func
    };
    // o[0] = p · q0, o[1] = p · q1 in one pass over p, each as `lafuse_row_dot` computes it.
    let dot2 = {
        let mut fx = declare_primitive(
            ctx,
            module,
            "lafuse_row_dot2",
            &[pf, pf, pf, i64m, pf],
            None,
        );
        let p = fx.param(0)?.into_pointer_value();
        let q0 = fx.param(1)?.into_pointer_value();
        let q1 = fx.param(2)?.into_pointer_value();
        let len = fx.param(3)?.into_int_value();
        let o = fx.param(4)?.into_pointer_value();
        let r = outer::dot_products(&mut fx, p, &[q0, q1], len, true)?;
        for (t, x) in r.iter().enumerate() {
            let x = fx.splat(*x, 1)?;
            store_vec(&fx.b, o, fx.i64c(t as u64), x)?;
        }
        fx.b.build_return(None).map_err(ierr)?;
        fx.func
    };
    // Σ vals[p] * q[idx[p]] over the non-zeros, in order.
    let sdot = {
        let mut fx = declare_primitive(ctx, module, "lafuse_row_sdot", &[pf, pi32, pf, i64m], f64r);
        let vals = fx.param(0)?.into_pointer_value();
        let idx = fx.param(1)?.into_pointer_value();
        let q = fx.param(2)?.into_pointer_value();
        let nz = fx.param(3)?.into_int_value();
        let acc = fx.slot(fx.vty(1).into())?;
        fx.store(acc, fx.splat_const(0.0, 1))?;
        fx.for_range(fx.i64c(0), nz, &mut |fx, p| {
            let j = fx.load_index(idx, p)?;
            let a = load_vec(&fx.b, fx.vty(1), vals, p)?;
            let b = load_vec(&fx.b, fx.vty(1), q, j)?;
            let cur = fx.load_v(acc)?;
            fx.store(acc, fx.fadd(cur, fx.fmul(a, b)?)?)
        })?;
        let r =
            fx.b.build_extract_element(fx.load_v(acc)?, fx.i64c(0), "r")
                .map_err(ierr)?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        fx.func
    };
    let axpy = emit_axpy(ctx, module)?;
    // The block primitives: declared here, defined once per process (`BlockPrim`).
    let axpy_rows = info
        .uses(BlockPrim::AxpyRows)
        .then(|| library::declare(ctx, module, AXPY_ROWS, axpy_rows_type(ctx)));
    let dot_rows = info
        .uses(BlockPrim::DotRows)
        .then(|| library::declare(ctx, module, DOT_ROWS, dot_rows_type(ctx)));
    // o[idx[p]] += s * vals[p].
    let saxpy = {
        let mut fx = declare_primitive(
            ctx,
            module,
            "lafuse_row_saxpy",
            &[pf, pf, pi32, f64m, i64m],
            None,
        );
        let o = fx.param(0)?.into_pointer_value();
        let vals = fx.param(1)?.into_pointer_value();
        let idx = fx.param(2)?.into_pointer_value();
        let s = fx.param(3)?.into_float_value();
        let nz = fx.param(4)?.into_int_value();
        fx.for_range(fx.i64c(0), nz, &mut |fx, p| {
            let j = fx.load_index(idx, p)?;
            let a = load_vec(&fx.b, fx.vty(1), vals, p)?;
            let cur = load_vec(&fx.b, fx.vty(1), o, j)?;
            let sv = fx.splat(s, 1)?;
            store_vec(&fx.b, o, j, fx.fadd(cur, fx.fmul(sv, a)?)?)
        })?;
        fx.b.build_return(None).map_err(ierr)?;
        fx.func
    };
    let binop = |name: &str, add: bool| -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, pf, i64m], None);
        let o = fx.param(0)?.into_pointer_value();
        let x = fx.param(1)?.into_pointer_value();
        let len = fx.param(2)?.into_int_value();
        lanes(&mut fx, len, &mut |fx, j, w| {
            let b = load_vec(&fx.b, fx.vty(w), x, j)?;
            let v = if add {
                fx.fadd(load_vec(&fx.b, fx.vty(w), o, j)?, b)?
            } else {
                b
            };
            store_vec(&fx.b, o, j, v)
        })?;
        fx.b.build_return(None).map_err(ierr)?;
        Ok(fx.func)
    };
    let vadd = binop("lafuse_row_vadd", true)?;
    let copy = binop("lafuse_row_copy", false)?;
    Ok(Prims {
        sum,
        sumsq,
        min,
        max,
        prod,
        m2,
        nnz,
        nonfinite,
        dot,
        dot2,
        sdot,
        axpy,
        axpy_rows,
        dot_rows,
        saxpy,
        vadd,
        copy,
    })
}

// ---- entry points --------------------------------------------------------------------------

/// The non-zeros of the current CSR row.
#[derive(Clone, Copy)]
struct Sp<'c> {
    vals: PointerValue<'c>,
    idx: PointerValue<'c>,
    nnz: IntValue<'c>,
}

/// A node's value in the current row.
#[derive(Clone, Copy)]
enum RV<'c> {
    /// A scalar (`<1 x double>`).
    S(VectorValue<'c>),
    /// A vector at `p` of `len` values; the CSR main row also carries its non-zeros (`p` is
    /// then the scattered row, valid only when the plan needs it).
    V {
        p: PointerValue<'c>,
        len: IntValue<'c>,
        sp: Option<Sp<'c>>,
    },
    /// A whole matrix, transposed (k×l, row-major).
    Whole(PointerValue<'c>),
    /// Consumed by the template (outer-product accumulation).
    Done,
    /// An inlined element-wise node ([`RowInfo::inlined`]): computed element by element
    /// inside its reader's loop.
    Inlined(CNodeId),
}

struct Em<'a, 'c> {
    info: &'a RowInfo,
    prims: &'a Prims<'c>,
    ins: InputPtrs<'c>,
    params: Vec<IntValue<'c>>,
    scratch: PointerValue<'c>,
    out: PointerValue<'c>,
    n: IntValue<'c>,
    /// FullAgg Kahan accumulator (sum, correction).
    kahan: Option<[PointerValue<'c>; 2]>,
    nnz: PointerValue<'c>,
    /// The dense entry of a [`RowInfo::defer_outer`] plan: rows whose outer-product update
    /// is pending.
    pending: Option<Pending<'c>>,
}

/// Outer-product updates not yet added to the partial (see [`ROW_BLOCK`]).
#[derive(Clone, Copy)]
struct Pending<'c> {
    /// How many rows are pending (i64 slot).
    count: PointerValue<'c>,
    /// The first pending row (i64 slot); the rest follow it.
    first: PointerValue<'c>,
    /// Each pending row's `b`, `len(b)` values a row, in the scratch buffer.
    bs: PointerValue<'c>,
    /// The dense main input: values, first row held, row stride.
    data: PointerValue<'c>,
    row0: IntValue<'c>,
    stride: IntValue<'c>,
}

fn call<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<Option<inkwell::values::BasicValueEnum<'c>>, CodegenError> {
    let r = fx.b.build_call(f, args, "c").map_err(ierr)?;
    Ok(match r.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => Some(v),
        _ => None,
    })
}

fn call_f<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<VectorValue<'c>, CodegenError> {
    let v = call(fx, f, args)?.ok_or_else(|| ierr("primitive returns nothing"))?;
    fx.splat(v.into_float_value(), 1)
}

fn call_i<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<IntValue<'c>, CodegenError> {
    Ok(call(fx, f, args)?
        .ok_or_else(|| ierr("primitive returns nothing"))?
        .into_int_value())
}

fn scalar0<'c>(fx: &Fx<'_, 'c>, v: VectorValue<'c>) -> Result<FloatValue<'c>, CodegenError> {
    Ok(fx
        .b
        .build_extract_element(v, fx.i64c(0), "s")
        .map_err(ierr)?
        .into_float_value())
}

fn to_f64<'c>(fx: &Fx<'_, 'c>, i: IntValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    let f =
        fx.b.build_unsigned_int_to_float(i, fx.ctx.f64_type(), "f")
            .map_err(ierr)?;
    fx.splat(f, 1)
}

impl<'a, 'c> Em<'a, 'c> {
    fn par(&self, i: usize) -> IntValue<'c> {
        self.params[i]
    }

    /// A value as a vector (a scalar goes through a one-value stack slot).
    fn as_vec(
        &self,
        fx: &Fx<'_, 'c>,
        v: RV<'c>,
    ) -> Result<(PointerValue<'c>, IntValue<'c>, Option<Sp<'c>>), CodegenError> {
        match v {
            RV::V { p, len, sp } => Ok((p, len, sp)),
            RV::S(s) => {
                let slot = fx.slot(fx.ctx.f64_type().into())?;
                fx.store(slot, scalar0(fx, s)?)?;
                Ok((slot, fx.i64c(1), None))
            }
            _ => Err(ierr("a matrix used as a row value")),
        }
    }

    /// The products of the main row that [`RowInfo::hoisted`] marks, for the `rows` rows from
    /// `i` (at `x`, `stride` apart): into each node's block buffer, a row's values at
    /// `q * len` for its index `q` in the block.
    fn hoist(
        &self,
        fx: &mut Fx<'_, 'c>,
        x: PointerValue<'c>,
        stride: IntValue<'c>,
        rows: IntValue<'c>,
    ) -> Result<(), CodegenError> {
        for (k, node) in self.info.plan.nodes.iter().enumerate() {
            let CNode::VectMatMult { b, .. } = node else {
                continue;
            };
            if !self.info.hoisted[k] {
                continue;
            }
            let CNode::Data { input, .. } = self.info.plan.nodes[*b] else {
                return Err(ierr("a row-times-matrix operand that is not an input"));
            };
            let bt = self.ins.get(input)?.0;
            let o = gep(&fx.b, self.scratch, self.par(pidx(k, HOIST)))?;
            let (l, cols) = (self.par(pidx(k, AUX)), self.par(pidx(k, LEN)));
            call(
                fx,
                self.prims
                    .dot_rows
                    .ok_or_else(|| ierr("dot_rows not emitted"))?,
                &[
                    x.into(),
                    stride.into(),
                    bt.into(),
                    l.into(),
                    cols.into(),
                    rows.into(),
                    o.into(),
                ],
            )?;
        }
        Ok(())
    }

    /// The body of one row: every reachable node in order, then the output statement. `q`:
    /// the row's index in its block when the [`Em::hoist`]ed products are computed.
    fn row(
        &self,
        fx: &mut Fx<'_, 'c>,
        i: IntValue<'c>,
        main: RV<'c>,
        q: Option<IntValue<'c>>,
    ) -> Result<(), CodegenError> {
        let info = self.info;
        let plan = &info.plan;
        let out_node = plan.outputs[0];
        let outc = self.par(P_OUTC);
        let orow = gep(&fx.b, self.out, fx.mul(i, outc)?)?;
        let mut vals: Vec<RV<'c>> = vec![RV::Done; plan.nodes.len()];
        let main_sp = match main {
            RV::V { sp, .. } => sp,
            _ => None,
        };
        for (k, node) in plan.nodes.iter().enumerate() {
            if !info.reach[k] {
                continue;
            }
            if info.inlined[k] {
                vals[k] = RV::Inlined(k);
                continue;
            }
            let len = self.par(pidx(k, LEN));
            let buf = if info.direct && k == out_node {
                orow
            } else {
                gep(&fx.b, self.scratch, self.par(pidx(k, OFF)))?
            };
            vals[k] = match node {
                CNode::Data { input, access } => match (info.classes[k], access) {
                    (Class::Vector, Access::Main) => main,
                    (Class::Vector, Access::Aligned) => {
                        let (p, row) = self.ins.aligned_row(fx, *input, i)?;
                        RV::V {
                            p: gep(&fx.b, p, row)?,
                            len,
                            sp: None,
                        }
                    }
                    (Class::Vector, _) => RV::V {
                        p: self.ins.get(*input)?.0,
                        len,
                        sp: None,
                    },
                    (Class::Whole, _) => RV::Whole(self.ins.get(*input)?.0),
                    (_, Access::ColVector) if info.inputs[*input] == RowInput::ColVector => {
                        let (p, c) = self.ins.get(*input)?;
                        RV::S(fx.load_splat(p, fx.mul(i, c)?, 1)?)
                    }
                    _ => RV::S(fx.load_splat(self.ins.get(*input)?.0, fx.i64c(0), 1)?),
                },
                CNode::Literal { value } => {
                    RV::S(fx.splat_const(value.as_f64().unwrap_or(f64::NAN), 1))
                }
                n if info.sparse[k] && main_sp.is_some() => {
                    let ops: Vec<RV<'c>> = n.operands().iter().map(|&o| vals[o]).collect();
                    let sp = main_sp.ok_or_else(|| ierr("sparse main row"))?;
                    self.sparse_elementwise(fx, k, &ops, buf, len, sp)?
                }
                n if n.is_elementwise() => {
                    self.elementwise(fx, k, &vals, info.classes[k], buf, len)?
                }
                CNode::Nary { xs, .. } => {
                    let mut off = fx.i64c(0);
                    for &x in xs {
                        match vals[x] {
                            RV::S(s) => {
                                store_vec(&fx.b, buf, off, s)?;
                                off = fx.add(off, fx.i64c(1))?;
                            }
                            RV::V { p, len: l, .. } => {
                                let dst = gep(&fx.b, buf, off)?;
                                call(fx, self.prims.copy, &[dst.into(), p.into(), l.into()])?;
                                off = fx.add(off, l)?;
                            }
                            _ => return Err(ierr("cbind operand")),
                        }
                    }
                    RV::V {
                        p: buf,
                        len,
                        sp: None,
                    }
                }
                CNode::RowAgg { f, x } => RV::S(self.row_agg(fx, *f, false, vals[*x])?),
                CNode::RowSumSq { x } => RV::S(self.row_agg(fx, AggOp::Sum, true, vals[*x])?),
                CNode::VectMatMult { .. } if info.hoisted[k] && q.is_some() => {
                    let q = q.ok_or_else(|| ierr("block row"))?;
                    let base = fx.add(self.par(pidx(k, HOIST)), fx.mul(q, len)?)?;
                    let p = gep(&fx.b, self.scratch, base)?;
                    if info.direct && k == out_node {
                        // The output row is where the statement expects the values.
                        call(fx, self.prims.copy, &[buf.into(), p.into(), len.into()])?;
                    }
                    RV::V { p, len, sp: None }
                }
                CNode::VectMatMult { a, b } => {
                    let RV::Whole(bt) = vals[*b] else {
                        return Err(ierr("row-times-matrix operand"));
                    };
                    let (ap, _, asp) = self.as_vec(fx, vals[*a])?;
                    let l = self.par(pidx(k, AUX));
                    let prims = self.prims;
                    // Dense rows: two columns of B per pass over the row (pairs, then the
                    // last odd column alone); each result is computed as the single dot
                    // computes it, so the pairing does not change any value.
                    let c0 = fx.slot(fx.ctx.i64_type().into())?;
                    fx.store(c0, fx.i64c(0))?;
                    if asp.is_none() {
                        fx.for_slot(c0, len, 2, &mut |fx, c| {
                            let b0 = gep(&fx.b, bt, fx.mul(c, l)?)?;
                            let b1 = gep(&fx.b, bt, fx.mul(fx.add(c, fx.i64c(1))?, l)?)?;
                            let o = gep(&fx.b, buf, c)?;
                            call(
                                fx,
                                prims.dot2,
                                &[ap.into(), b0.into(), b1.into(), l.into(), o.into()],
                            )?;
                            Ok(())
                        })?;
                    }
                    fx.for_slot(c0, len, 1, &mut |fx, c| {
                        let brow = gep(&fx.b, bt, fx.mul(c, l)?)?;
                        let d = match asp {
                            Some(sp) => call_f(
                                fx,
                                prims.sdot,
                                &[sp.vals.into(), sp.idx.into(), brow.into(), sp.nnz.into()],
                            )?,
                            None => call_f(fx, prims.dot, &[ap.into(), brow.into(), l.into()])?,
                        };
                        store_vec(&fx.b, buf, c, d)
                    })?;
                    RV::V {
                        p: buf,
                        len,
                        sp: None,
                    }
                }
                CNode::OuterMultAdd { a, b } => {
                    match self.pending {
                        Some(pd) if k == out_node => {
                            self.defer_outer_add(fx, pd, k, i, vals[*b])?
                        }
                        _ => self.outer_add(fx, k, vals[*a], vals[*b])?,
                    }
                    RV::Done
                }
                other => return unsupported(format!("{} in a row plan", expr::node_name(other))),
            };
        }
        // The output statement.
        let v = vals[out_node];
        match info.kind {
            RowKind::RowWise => {
                match v {
                    _ if info.direct => {}
                    RV::S(s) => store_vec(&fx.b, orow, fx.i64c(0), s)?,
                    RV::V { p, .. } => {
                        call(fx, self.prims.copy, &[orow.into(), p.into(), outc.into()])?;
                    }
                    _ => return Err(ierr("row output")),
                }
                let c = call_i(fx, self.prims.nnz, &[orow.into(), outc.into()])?;
                let cur = fx.load_i64(self.nnz)?;
                fx.store(self.nnz, fx.add(cur, c)?)?;
            }
            RowKind::ColSum => match v {
                RV::S(s) => {
                    let cur = load_vec(&fx.b, fx.vty(1), self.out, fx.i64c(0))?;
                    store_vec(&fx.b, self.out, fx.i64c(0), fx.fadd(cur, s)?)?;
                }
                RV::V { p, .. } => {
                    call(
                        fx,
                        self.prims.vadd,
                        &[self.out.into(), p.into(), outc.into()],
                    )?;
                }
                _ => return Err(ierr("column aggregate output")),
            },
            RowKind::Outer => {}
            RowKind::FullAgg => {
                let x = match v {
                    RV::S(s) => s,
                    RV::V { p, len, .. } => call_f(fx, self.prims.sum, &[p.into(), len.into()])?,
                    _ => return Err(ierr("full aggregate output")),
                };
                let [s, c] = self.kahan.ok_or_else(|| ierr("kahan"))?;
                fx.kahan_add(s, c, x)?;
            }
        }
        Ok(())
    }

    /// An element-wise node of [`RowInfo::sparse`] in the CSR entry: its values at the main
    /// row's non-zeros `sp` only, into `buf` compactly (beside the row's column indices).
    /// Sparse operands give their value at the same position, dense vectors theirs at the
    /// column (a length-one vector its only one), scalars theirs.
    fn sparse_elementwise(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        ops: &[RV<'c>],
        buf: PointerValue<'c>,
        len: IntValue<'c>,
        sp: Sp<'c>,
    ) -> Result<RV<'c>, CodegenError> {
        fx.for_range(fx.i64c(0), sp.nnz, &mut |fx, p| {
            let j = fx.load_index(sp.idx, p)?;
            let xs = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(*s),
                    RV::V { sp: Some(o), .. } => load_vec(&fx.b, fx.vty(1), o.vals, p),
                    RV::V { p: dp, len: l, .. } => fx.load_broadcast(*dp, *l, j),
                    _ => Err(ierr("operand")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            store_vec(&fx.b, buf, p, self.apply(fx, k, &xs)?)
        })?;
        Ok(RV::V {
            p: buf,
            len,
            sp: Some(Sp {
                vals: buf,
                idx: sp.idx,
                nnz: sp.nnz,
            }),
        })
    }

    /// One element-wise node: scalar, or a loop over its vector length. `vals`: every node's
    /// value so far (its operands', and those of inlined operands).
    fn elementwise(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        vals: &[RV<'c>],
        class: Class,
        buf: PointerValue<'c>,
        len: IntValue<'c>,
    ) -> Result<RV<'c>, CodegenError> {
        let plan = &self.info.plan;
        let node = &plan.nodes[k];
        let ops: Vec<RV<'c>> = node.operands().iter().map(|&o| vals[o]).collect();
        if class == Class::Scalar {
            let xs: Vec<VectorValue<'c>> = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(*s),
                    _ => Err(ierr("scalar operand")),
                })
                .collect::<Result<_, _>>()?;
            return Ok(RV::S(self.apply(fx, k, &xs)?));
        }
        // Fast path: every vector operand has the node's length; `W` lanes at a time. Not for
        // an operation computed by a scalar helper (one call per lane either way): its vector
        // loop would only add machine code, and so compile time.
        let j = fx.slot(fx.ctx.i64_type().into())?;
        fx.store(j, fx.i64c(0))?;
        if !expr::node_calls_helper(plan, node) {
            let mut all = fx.ctx.bool_type().const_int(1, false);
            // The vectors read, through inlined operands.
            let lens = read_by(&plan.nodes, &self.info.inlined, node.operands())
                .into_iter()
                .filter_map(|o| match vals[o] {
                    RV::V { len, .. } => Some(len),
                    _ => None,
                });
            for l in lens {
                let eq =
                    fx.b.build_int_compare(IntPredicate::EQ, l, len, "eq")
                        .map_err(ierr)?;
                all = fx.b.build_and(all, eq, "all").map_err(ierr)?;
            }
            if_else(
                fx,
                all,
                &mut |fx| {
                    fx.for_slot(j, len, u64::from(W), &mut |fx, j| {
                        let xs = ops
                            .iter()
                            .map(|v| self.element(fx, vals, *v, j, true))
                            .collect::<Result<Vec<_>, _>>()?;
                        store_vec(&fx.b, buf, j, self.apply(fx, k, &xs)?)
                    })
                },
                &mut |_| Ok(()),
            )?;
        }
        // The rest one element at a time: the fast path's tail, or every element when a
        // length-one vector broadcasts (index 0 for such operands). One loop serves both, which
        // keeps the machine code (and its generation time) smaller than a loop for each.
        fx.for_slot(j, len, 1, &mut |fx, j| {
            let xs = ops
                .iter()
                .map(|v| self.element(fx, vals, *v, j, false))
                .collect::<Result<Vec<_>, _>>()?;
            store_vec(&fx.b, buf, j, self.apply(fx, k, &xs)?)
        })?;
        Ok(RV::V {
            p: buf,
            len,
            sp: None,
        })
    }

    /// Element-wise node `k` on lane vectors of its operands, written as a matrix cell where
    /// it is one ([`RowInfo::matrix_cells`]).
    fn apply(
        &self,
        fx: &Fx<'_, 'c>,
        k: CNodeId,
        xs: &[VectorValue<'c>],
    ) -> Result<VectorValue<'c>, CodegenError> {
        let plan = &self.info.plan;
        let v = apply(fx, plan, &plan.nodes[k], xs)?;
        if self.info.matrix_cells[k] {
            expr::matrix_cell(fx, v)
        } else {
            Ok(v)
        }
    }

    /// Operand `v` of an element-wise loop at element `j`: `W` elements from `j` on the fast
    /// path (`lanes`, where every vector has the loop's length), else the one element `j`
    /// (index 0 of a length-one vector, which broadcasts). An inlined operand is computed
    /// here from its own operands, the same operations its own loop would have run.
    fn element(
        &self,
        fx: &Fx<'_, 'c>,
        vals: &[RV<'c>],
        v: RV<'c>,
        j: IntValue<'c>,
        lanes: bool,
    ) -> Result<VectorValue<'c>, CodegenError> {
        match v {
            RV::S(s) if lanes => fx.splat(scalar0(fx, s)?, W),
            RV::S(s) => Ok(s),
            RV::V { p, .. } if lanes => load_vec(&fx.b, fx.vty(W), p, j),
            RV::V { p, len, .. } => fx.load_broadcast(p, len, j),
            RV::Inlined(k) => with_stack(|| {
                let plan = &self.info.plan;
                let node = &plan.nodes[k];
                let xs = node
                    .operands()
                    .into_iter()
                    .map(|o| self.element(fx, vals, vals[o], j, lanes))
                    .collect::<Result<Vec<_>, _>>()?;
                self.apply(fx, k, &xs)
            }),
            RV::Whole(_) | RV::Done => Err(ierr("operand of an element-wise node")),
        }
    }

    /// A row aggregate of a value (reference: the runtime's aggregate of the row vector);
    /// `sq`: the sum of squares.
    fn row_agg(
        &self,
        fx: &mut Fx<'_, 'c>,
        f: AggOp,
        sq: bool,
        x: RV<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let pr = self.prims;
        let (p, len, sp) = match x {
            RV::S(s) => {
                return Ok(match f {
                    _ if sq => fx.fmul(s, s)?,
                    AggOp::Var => fx.splat_const(0.0, 1),
                    _ => s,
                })
            }
            RV::V { p, len, sp } => (p, len, sp.filter(|_| sparse_agg(f))),
            _ => return Err(ierr("row aggregate operand")),
        };
        // Sparse rows: reduce the non-zeros (contiguous values), then account for the zeros.
        let (rp, rlen) = match sp {
            Some(s) => (s.vals, s.nnz),
            None => (p, len),
        };
        let args: [BasicMetadataValueEnum<'c>; 2] = [rp.into(), rlen.into()];
        Ok(match f {
            AggOp::Sum if sq => call_f(fx, pr.sumsq, &args)?,
            AggOp::Sum => call_f(fx, pr.sum, &args)?,
            AggOp::Mean => fx.fdiv(call_f(fx, pr.sum, &args)?, to_f64(fx, len)?)?,
            AggOp::Min | AggOp::Max => {
                let max = f == AggOp::Max;
                let r = call_f(fx, if max { pr.max } else { pr.min }, &args)?;
                match sp {
                    Some(s) => {
                        let zeros =
                            fx.b.build_int_compare(IntPredicate::ULT, s.nnz, len, "z")
                                .map_err(ierr)?;
                        let with0 = pick(fx, max, r, fx.splat_const(0.0, 1))?;
                        fx.b.build_select(zeros, with0, r, "mm")
                            .map_err(ierr)?
                            .into_vector_value()
                    }
                    None => r,
                }
            }
            AggOp::Prod => {
                // As the runtime: a zero wins over overflow, unless a value is non-finite.
                let prod = call_f(fx, pr.prod, &args)?;
                let nz = call_i(fx, pr.nnz, &args)?;
                let nf = call_i(fx, pr.nonfinite, &args)?;
                let zero =
                    fx.b.build_int_compare(IntPredicate::ULT, nz, len, "zero")
                        .map_err(ierr)?;
                let nonfin =
                    fx.b.build_int_compare(IntPredicate::NE, nf, fx.i64c(0), "nf")
                        .map_err(ierr)?;
                let zv =
                    fx.b.build_select(
                        nonfin,
                        fx.splat_const(f64::NAN, 1),
                        fx.splat_const(0.0, 1),
                        "zv",
                    )
                    .map_err(ierr)?
                    .into_vector_value();
                fx.b.build_select(zero, zv, prod, "prod")
                    .map_err(ierr)?
                    .into_vector_value()
            }
            AggOp::Var => {
                let nf = to_f64(fx, len)?;
                let mean = fx.fdiv(call_f(fx, pr.sum, &args)?, nf)?;
                let m2 = call_f(
                    fx,
                    pr.m2,
                    &[p.into(), len.into(), scalar0(fx, mean)?.into()],
                )?;
                let var = fx.fdiv(m2, fx.fsub(nf, fx.splat_const(1.0, 1))?)?;
                let is0 =
                    fx.b.build_int_compare(IntPredicate::EQ, len, fx.i64c(0), "l0")
                        .map_err(ierr)?;
                let is1 =
                    fx.b.build_int_compare(IntPredicate::EQ, len, fx.i64c(1), "l1")
                        .map_err(ierr)?;
                let v =
                    fx.b.build_select(is1, fx.splat_const(0.0, 1), var, "v")
                        .map_err(ierr)?
                        .into_vector_value();
                fx.b.build_select(is0, fx.splat_const(f64::NAN, 1), v, "v")
                    .map_err(ierr)?
                    .into_vector_value()
            }
            // Kernel aggregates no hop carries, so no construction puts them in a plan.
            AggOp::SumSq | AggOp::Sd => {
                return Err(CodegenError::Unsupported(format!("row aggregate {f}")))
            }
        })
    }

    /// The outer-product update `t(X[i, ]) %*% b` of row `i`: `b` is kept, and every
    /// [`ROW_BLOCK`] rows [`Em::flush_outer`] adds the kept updates to the partial.
    fn defer_outer_add(
        &self,
        fx: &mut Fx<'_, 'c>,
        pd: Pending<'c>,
        k: CNodeId,
        i: IntValue<'c>,
        b: RV<'c>,
    ) -> Result<(), CodegenError> {
        let (bp, lb, _) = self.as_vec(fx, b)?;
        let cnt = fx.load_i64(pd.count)?;
        let none =
            fx.b.build_int_compare(IntPredicate::EQ, cnt, fx.i64c(0), "none")
                .map_err(ierr)?;
        let first =
            fx.b.build_select(none, i, fx.load_i64(pd.first)?, "first")
                .map_err(ierr)?;
        fx.store(pd.first, first)?;
        let dst = gep(&fx.b, pd.bs, fx.mul(cnt, lb)?)?;
        call(fx, self.prims.copy, &[dst.into(), bp.into(), lb.into()])?;
        let cnt = fx.add(cnt, fx.i64c(1))?;
        fx.store(pd.count, cnt)?;
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, cnt, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        if_else(fx, full, &mut |fx| self.flush_outer(fx, pd, k), &mut |_| {
            Ok(())
        })
    }

    /// Adds the pending rows' outer-product updates to the partial, rows in order.
    fn flush_outer(
        &self,
        fx: &mut Fx<'_, 'c>,
        pd: Pending<'c>,
        k: CNodeId,
    ) -> Result<(), CodegenError> {
        let cnt = fx.load_i64(pd.count)?;
        let (la, lb) = (self.n, self.par(pidx(k, AUX)));
        let first = fx.load_i64(pd.first)?;
        let x = gep(&fx.b, pd.data, fx.mul(fx.sub(first, pd.row0)?, pd.stride)?)?;
        let flip =
            fx.b.build_int_compare(IntPredicate::NE, self.par(P_FLIP), fx.i64c(0), "flip")
                .map_err(ierr)?;
        let sel_p = |a: PointerValue<'c>, b: PointerValue<'c>| {
            fx.b.build_select(flip, a, b, "p")
                .map(|v| v.into_pointer_value())
                .map_err(ierr)
        };
        let sel_i = |a: IntValue<'c>, b: IntValue<'c>| {
            fx.b.build_select(flip, a, b, "i")
                .map(|v| v.into_int_value())
                .map_err(ierr)
        };
        // Flipped, P[c, ] += Σ_r b_r[c] * X[r, ]: the rows of X scaled by the kept b's (lb
        // rows of P, la long). Else P[j, ] += Σ_r X[r, j] * b_r: the kept b's scaled by a
        // column of X's rows (la rows of P, lb long).
        let (rows, rows_stride) = (sel_p(x, pd.bs)?, sel_i(pd.stride, lb)?);
        let (scales, scales_stride) = (sel_p(pd.bs, x)?, sel_i(lb, pd.stride)?);
        let (cols, len) = (sel_i(lb, la)?, sel_i(la, lb)?);
        let axpy_rows = self
            .prims
            .axpy_rows
            .ok_or_else(|| ierr("axpy_rows not emitted"))?;
        call(
            fx,
            axpy_rows,
            &[
                self.out.into(),
                rows.into(),
                rows_stride.into(),
                scales.into(),
                scales_stride.into(),
                cols.into(),
                cnt.into(),
                len.into(),
            ],
        )?;
        fx.store(pd.count, fx.i64c(0))
    }

    /// `P += t(a) %*% b` into the task's partial (la×lb, or lb×la when flipped), at once (the
    /// CSR entry, and a dense entry whose `a` is not the main row).
    fn outer_add(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        a: RV<'c>,
        b: RV<'c>,
    ) -> Result<(), CodegenError> {
        let pr = self.prims;
        let (ap, la, asp) = self.as_vec(fx, a)?;
        let (bp, lb, bsp) = self.as_vec(fx, b)?;
        let _ = (self.par(pidx(k, LEN)), self.par(pidx(k, AUX)));
        let out = self.out;
        let flip =
            fx.b.build_int_compare(IntPredicate::NE, self.par(P_FLIP), fx.i64c(0), "flip")
                .map_err(ierr)?;
        // P's rows are indexed by one operand (`a`, or `b` when flipped: a column-major
        // partial) and take that operand's value times the other one. With `sparse`, the
        // operand that is sparse (and whether it is `a`): as the row operand it updates only the
        // rows of its non-zeros (dense axpy of the other); as the column operand it updates
        // every row (sparse axpy of it). Without, every row takes a dense axpy.
        let update = |fx: &mut Fx<'_, 'c>,
                      rows_of_a: bool,
                      sparse: Option<(Sp<'c>, bool)>|
         -> Result<(), CodegenError> {
            let (rv, rl, cv, cl) = if rows_of_a {
                (ap, la, bp, lb)
            } else {
                (bp, lb, ap, la)
            };
            match sparse {
                Some((sp, a_sparse)) if rows_of_a == a_sparse => {
                    fx.for_range(fx.i64c(0), sp.nnz, &mut |fx, p| {
                        let k = fx.load_index(sp.idx, p)?;
                        let s = load(&fx.b, gep(&fx.b, sp.vals, p)?)?;
                        let o = gep(&fx.b, out, fx.mul(k, cl)?)?;
                        call(fx, pr.axpy, &[o.into(), cv.into(), s.into(), cl.into()])?;
                        Ok(())
                    })
                }
                _ => fx.for_range(fx.i64c(0), rl, &mut |fx, k| {
                    let s = load(&fx.b, gep(&fx.b, rv, k)?)?;
                    let o = gep(&fx.b, out, fx.mul(k, cl)?)?;
                    match sparse {
                        Some((sp, _)) => {
                            let args = [
                                o.into(),
                                sp.vals.into(),
                                sp.idx.into(),
                                s.into(),
                                sp.nnz.into(),
                            ];
                            call(fx, pr.saxpy, &args)?;
                        }
                        None => {
                            call(fx, pr.axpy, &[o.into(), cv.into(), s.into(), cl.into()])?;
                        }
                    }
                    Ok(())
                }),
            }
        };
        let oriented =
            |fx: &mut Fx<'_, 'c>, sparse: Option<(Sp<'c>, bool)>| -> Result<(), CodegenError> {
                if_else(fx, flip, &mut |fx| update(fx, false, sparse), &mut |fx| {
                    update(fx, true, sparse)
                })
            };
        let Some((sp, a_sparse)) = asp.map(|s| (s, true)).or(bsp.map(|s| (s, false))) else {
            return oriented(fx, None);
        };
        // Sparse X: skipped zeros contribute 0 only when the other side is finite.
        let (op_, ol) = if a_sparse { (bp, lb) } else { (ap, la) };
        let nf = call_i(fx, pr.nonfinite, &[op_.into(), ol.into()])?;
        let finite =
            fx.b.build_int_compare(IntPredicate::EQ, nf, fx.i64c(0), "fin")
                .map_err(ierr)?;
        if_else(
            fx,
            finite,
            &mut |fx| oriented(fx, Some((sp, a_sparse))),
            &mut |fx| oriented(fx, None),
        )
    }
}

/// The node's operation on lane vectors (all of one width).
fn apply<'c>(
    fx: &Fx<'_, 'c>,
    plan: &CPlan,
    node: &CNode,
    xs: &[VectorValue<'c>],
) -> Result<VectorValue<'c>, CodegenError> {
    let w = xs[0].get_type().get_size();
    Ok(match node {
        CNode::Unary { f, .. } => expr::unary(fx, *f, xs[0])?,
        CNode::Pow2 { .. } => fx.fmul(xs[0], xs[0])?,
        CNode::Mult2 { .. } => fx.fadd(xs[0], xs[0])?,
        CNode::Binary { f, b, .. } => {
            let lit2 = matches!(plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
            if *f == BinaryOp::Pow && lit2 {
                // java_pow(x, 2) is x * x.
                fx.fmul(xs[0], xs[0])?
            } else {
                expr::binary(fx, *f, xs[0], xs[1])?
            }
        }
        CNode::Ternary { f, .. } => {
            let (a, b, c) = (xs[0], xs[1], xs[2]);
            match f {
                TernaryOp::IfElse => {
                    let cond = fx.fcmp(FloatPredicate::UNE, a, fx.splat_const(0.0, w))?;
                    fx.select(cond, b, c)?
                }
                TernaryOp::Replace => {
                    let eq = fx.fcmp(FloatPredicate::OEQ, a, b)?;
                    let an = fx.fcmp(FloatPredicate::UNO, a, a)?;
                    let bn = fx.fcmp(FloatPredicate::UNO, b, b)?;
                    let m = fx.or(eq, fx.and(an, bn)?)?;
                    fx.select(m, c, a)?
                }
            }
        }
        CNode::Nary { f, .. } => {
            let max = *f == NaryOp::Max;
            let mut acc = xs[0];
            for &x in &xs[1..] {
                acc = fx.java_minmax(max, acc, x)?;
            }
            acc
        }
        other => return unsupported(format!("{} is not element-wise", expr::node_name(other))),
    })
}

/// Emits one entry point: `lafuse_row_csr` (a CSR main input) when `csr`, else
/// `lafuse_row_dense`. Each goes into its own module (the CSR one on first use), so a
/// compilation pays machine code for the entry it runs only.
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
    csr: bool,
) -> Result<(), CodegenError> {
    let prims = emit_prims(ctx, module, info)?;
    emit_entry(ctx, module, info, &prims, csr)
}

fn emit_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
    prims: &Prims<'c>,
    csr: bool,
) -> Result<(), CodegenError> {
    let i64t = ctx.i64_type();
    let name = if csr {
        "lafuse_row_csr"
    } else {
        "lafuse_row_dense"
    };
    let (mut fx, args, rl, ru) = declare_entry(ctx, module, name)?;
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let n = field(&fx, offset_of!(KernelArgs, cols), pi64)?.into_int_value();
    let scratch = field(&fx, offset_of!(RowArgs, scratch), pf64)?.into_pointer_value();
    let pp = field(
        &fx,
        offset_of!(RowArgs, params),
        pi64.ptr_type(AddressSpace::default()),
    )?
    .into_pointer_value();
    let num_params = P_NODE0 + PER_NODE * info.plan.nodes.len();
    let params = (0..num_params)
        .map(|k| Ok(load(&fx.b, gep(&fx.b, pp, fx.i64c(k as u64))?)?.into_int_value()))
        .collect::<Result<Vec<_>, CodegenError>>()?;
    let used: Vec<bool> = info
        .inputs
        .iter()
        .map(|u| !matches!(u, RowInput::Unused | RowInput::Main))
        .collect();
    let ins = load_inputs(&fx, args, &used)?;
    let nnz = fx.slot(i64t.into())?;
    fx.store(nnz, fx.i64c(0))?;
    let kahan = if info.kind == RowKind::FullAgg {
        let s = [fx.slot(fx.vty(1).into())?, fx.slot(fx.vty(1).into())?];
        fx.store(s[0], load_vec(&fx.b, fx.vty(1), out, fx.i64c(0))?)?;
        fx.store(s[1], load_vec(&fx.b, fx.vty(1), out, fx.i64c(1))?)?;
        Some(s)
    } else {
        None
    };
    let main_dense = if csr {
        None
    } else {
        let o = offset_of!(KernelArgs, main);
        let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
        let stride = field(&fx, o + offset_of!(DenseView, cols), pi64)?.into_int_value();
        let row0 = field(&fx, o + offset_of!(DenseView, row0), pi64)?.into_int_value();
        Some((d, stride, row0))
    };
    let pending = match main_dense {
        Some((data, stride, row0)) if info.defer_outer => {
            let count = fx.slot(i64t.into())?;
            fx.store(count, fx.i64c(0))?;
            let first = fx.slot(i64t.into())?;
            fx.store(first, rl)?;
            let bs = gep(&fx.b, scratch, params[P_PEND])?;
            Some(Pending {
                count,
                first,
                bs,
                data,
                row0,
                stride,
            })
        }
        _ => None,
    };
    let em = Em {
        info,
        prims,
        ins,
        params,
        scratch,
        out,
        n,
        kahan,
        nnz,
        pending,
    };
    if csr {
        let (rp, ci, va) = load_main_csr(&fx, args)?;
        let mrow = gep(&fx.b, scratch, em.par(P_MROW))?;
        fx.for_range(rl, ru, &mut |fx, i| {
            let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
            let p1 = load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
            let sp = Sp {
                vals: gep(&fx.b, va, p0)?,
                idx: gep(&fx.b, ci, p0)?,
                nnz: fx.sub(p1, p0)?,
            };
            // Scatter the row (and clear it afterwards) where a reader needs it dense.
            let scatter = |fx: &mut Fx<'_, 'c>, clear: bool| {
                fx.for_range(p0, p1, &mut |fx, p| {
                    let j = fx.load_index(ci, p)?;
                    let v = if clear {
                        fx.splat_const(0.0, 1)
                    } else {
                        load_vec(&fx.b, fx.vty(1), va, p)?
                    };
                    store_vec(&fx.b, mrow, j, v)
                })
            };
            if info.needs_dense_main {
                scatter(fx, false)?;
            }
            em.row(
                fx,
                i,
                RV::V {
                    p: mrow,
                    len: em.n,
                    sp: Some(sp),
                },
                None,
            )?;
            if info.needs_dense_main {
                scatter(fx, true)?;
            }
            Ok(())
        })?;
    } else if let Some((d, stride, row0)) = main_dense {
        let dense_row = |base: PointerValue<'c>| RV::V {
            p: base,
            len: em.n,
            sp: None,
        };
        if info.hoisted.contains(&true) {
            // Blocks of `ROW_BLOCK` rows (the last one shorter): the block's hoisted products,
            // then its rows. One copy of the row body serves full and short blocks.
            let blk = fx.i64c(ROW_BLOCK);
            let blocks =
                fx.b.build_int_unsigned_div(
                    fx.add(fx.sub(ru, rl)?, fx.i64c(ROW_BLOCK - 1))?,
                    blk,
                    "blocks",
                )
                .map_err(ierr)?;
            fx.for_range(fx.i64c(0), blocks, &mut |fx, bi| {
                let i0 = fx.add(rl, fx.mul(bi, blk)?)?;
                let left = fx.sub(ru, i0)?;
                let short =
                    fx.b.build_int_compare(IntPredicate::ULT, left, blk, "short")
                        .map_err(ierr)?;
                let nb =
                    fx.b.build_select(short, left, blk, "nb")
                        .map_err(ierr)?
                        .into_int_value();
                let x0 = gep(&fx.b, d, fx.mul(fx.sub(i0, row0)?, stride)?)?;
                em.hoist(fx, x0, stride, nb)?;
                fx.for_range(fx.i64c(0), nb, &mut |fx, q| {
                    let i = fx.add(i0, q)?;
                    let base = gep(&fx.b, x0, fx.mul(q, stride)?)?;
                    em.row(fx, i, dense_row(base), Some(q))
                })
            })?;
        } else {
            fx.for_range(rl, ru, &mut |fx, i| {
                let base = gep(&fx.b, d, fx.mul(fx.sub(i, row0)?, stride)?)?;
                em.row(fx, i, dense_row(base), None)
            })?;
        }
        if let Some(pd) = em.pending {
            let out_node = info.plan.outputs[0];
            let cnt = fx.load_i64(pd.count)?;
            let some =
                fx.b.build_int_compare(IntPredicate::NE, cnt, fx.i64c(0), "some")
                    .map_err(ierr)?;
            if_else(
                &mut fx,
                some,
                &mut |fx| em.flush_outer(fx, pd, out_node),
                &mut |_| Ok(()),
            )?;
        }
    }
    if let Some([s, c]) = em.kahan {
        store_vec(&fx.b, out, fx.i64c(0), fx.load_v(s)?)?;
        store_vec(&fx.b, out, fx.i64c(1), fx.load_v(c)?)?;
    }
    let total = fx.load_i64(nnz)?;
    fx.b.build_return(Some(&total)).map_err(ierr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cplan::{count_vector_intermediates, TemplateSpec};
    use lafuse_compiler::hops::UnaryOp;

    fn plan(row_type: RowType, inputs: usize, nodes: Vec<CNode>) -> CPlan {
        let out = nodes.len() - 1;
        CPlan {
            template: TemplateSpec::Row {
                row_type,
                num_vectors: count_vector_intermediates(&nodes, &[out]),
            },
            inputs: vec![InputKind::Matrix; inputs],
            nodes,
            outputs: vec![out],
        }
    }

    fn data(input: usize, access: Access) -> CNode {
        CNode::Data { input, access }
    }

    fn bin(f: BinaryOp, a: CNodeId, b: CNodeId) -> CNode {
        CNode::Binary { f, a, b }
    }

    fn lit(v: f64) -> CNode {
        CNode::Literal {
            value: Literal::Double(v),
        }
    }

    #[test]
    fn sparse_nodes_are_those_zero_where_the_main_row_is_and_read_sparsely() {
        // t(W) %*% ((X != 0) * (Y - X)): the masked difference is 0 where X is.
        let nodes = vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            lit(0.0),
            bin(BinaryOp::Ne, 0, 3),
            bin(BinaryOp::Sub, 1, 0),
            bin(BinaryOp::Mul, 4, 5),
            CNode::OuterMultAdd { a: 2, b: 6 },
        ];
        let info = analyze(&plan(RowType::ColAggB1, 3, nodes), RowType::ColAggB1).unwrap();
        // `Y - X` is not 0 where X is, but its only reader needs it at X's non-zeros only;
        // nothing reads the row densely, so it is not scattered.
        assert!(
            info.sparse[4] && info.sparse[5] && info.sparse[6],
            "{:?}",
            info.sparse
        );
        assert!(!info.needs_dense_main);

        // (X * Y) * 2 + Y: the sum reads the product densely, so nothing is sparse.
        let nodes = vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            bin(BinaryOp::Mul, 0, 1),
            lit(2.0),
            bin(BinaryOp::Mul, 2, 3),
            bin(BinaryOp::Add, 4, 1),
        ];
        let info = analyze(&plan(RowType::NoAgg, 2, nodes), RowType::NoAgg).unwrap();
        assert!(!info.sparse.contains(&true), "{:?}", info.sparse);

        // rowSums(exp(X) * Y): exp(0) is 1, so the product is not 0 where X is.
        let nodes = vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 0,
            },
            bin(BinaryOp::Mul, 2, 1),
            CNode::RowAgg {
                f: AggOp::Sum,
                x: 3,
            },
        ];
        let info = analyze(&plan(RowType::RowAgg, 2, nodes), RowType::RowAgg).unwrap();
        assert!(!info.sparse.contains(&true), "{:?}", info.sparse);

        // rowSums((X * Y) * (Y / Y)): Y / Y may be NaN, so 0 times it is not 0.
        let nodes = vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            bin(BinaryOp::Mul, 0, 1),
            bin(BinaryOp::Div, 1, 1),
            bin(BinaryOp::Mul, 2, 3),
            CNode::RowAgg {
                f: AggOp::Sum,
                x: 4,
            },
        ];
        let info = analyze(&plan(RowType::RowAgg, 2, nodes), RowType::RowAgg).unwrap();
        assert!(!info.sparse.contains(&true), "{:?}", info.sparse);
    }
}
