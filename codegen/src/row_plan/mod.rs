//! Row plans independent of the backend that generates their code (reference 5.6, 6.3):
//! the compile-time analysis ([`analyze`]: per-node classes, input uses, buffer slots,
//! inlined chains, the nodes a CSR entry computes at a row's non-zeros only) and the
//! execution-time [`layout`] (every vector length and buffer offset derived from the input
//! shapes and validated before any generated code runs). The LLVM backend (`native::row`) and
//! the Cranelift backend (`cranelift::row`) generate entry points from the same [`RowInfo`]
//! and read the same layout parameters, so the same skeleton runs either.

use crate::backend::{CodegenError, Internal, Operand, Unsupported};
use crate::plan_info::{node_calls_helper, node_name};
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind, RowType};
use lafuse_compiler::hops::{AggOp, BinaryOp, Literal, NaryOp};
use lafuse_skeletons::row::{RowInput, RowKind, RowLayout};

mod analyze;
mod layout;
#[cfg(test)]
mod tests;

pub(crate) use analyze::{analyze, is_main_row, read_by};
pub(crate) use layout::layout;

/// Parameter positions (see [`layout`]): the output row stride, the scratch offset of the
/// scattered sparse row, the outer-product orientation, the scratch offset of the pending
/// outer-product rows, then [`PER_NODE`] values per node.
pub(crate) const P_OUTC: usize = 0;
pub(crate) const P_MROW: usize = 1;
pub(crate) const P_FLIP: usize = 2;
pub(crate) const P_PEND: usize = 3;
pub(crate) const P_NODE0: usize = 4;
pub(crate) const PER_NODE: usize = 4;
/// Per node: vector length (`VectMatMult`: columns of `B`; `OuterMultAdd`: length of `a`).
pub(crate) const LEN: usize = 0;
/// Per node: scratch offset of its buffer.
pub(crate) const OFF: usize = 1;
/// Per node: `VectMatMult`: rows of `B`; `OuterMultAdd`: length of `b`.
pub(crate) const AUX: usize = 2;
/// Per node: a hoisted product's scratch offset of its block of [`ROW_BLOCK`] results.
pub(crate) const HOIST: usize = 3;

/// The parameter `what` of node `node`.
pub(crate) fn pidx(node: CNodeId, what: usize) -> usize {
    P_NODE0 + PER_NODE * node + what
}

/// Rows the LLVM backend's dense entry handles as one block (see `native::row`); the layout
/// reserves scratch for a block's hoisted products and pending outer-product updates.
pub(crate) const ROW_BLOCK: u64 = 8;

/// What a node is per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
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
    pub(crate) plan: CPlan,
    pub(crate) kind: RowKind,
    pub(crate) inputs: Vec<RowInput>,
    pub(crate) classes: Vec<Class>,
    pub(crate) reach: Vec<bool>,
    /// Buffer slot per materialized vector node.
    pub(crate) slot: Vec<Option<usize>>,
    /// Element-wise vector nodes computed inside their one reader's loop instead of into a
    /// buffer of their own (see `analyze::inlined_nodes`).
    pub(crate) inlined: Vec<bool>,
    pub(crate) num_slots: usize,
    /// The output node is computed straight into the output row.
    pub(crate) direct: bool,
    /// The CSR entry needs the row scattered densely.
    pub(crate) needs_dense_main: bool,
    /// The CSR entry scatters the row only where an outer-product update meets a non-finite
    /// value in its other operand (0 * Inf is NaN at the row's zeros), and clears it after;
    /// the scratch row is reserved, but finite rows never touch it.
    pub(crate) scatter_on_demand: bool,
    /// `t(X) %*% B` over dense rows of `X` (an outer row type whose `a` is the main row):
    /// the LLVM backend's dense entry defers the accumulation and adds a block of
    /// [`ROW_BLOCK`] rows at a time.
    pub(crate) defer_outer: bool,
    /// Products `X[i, ] %*% B` of the main row (per node): the LLVM backend's dense entry
    /// computes them for a block of [`ROW_BLOCK`] rows at once, before the block's rows run.
    pub(crate) hoisted: Vec<bool>,
    /// Element-wise nodes the CSR entry computes at the main row's non-zeros only (see
    /// `analyze::sparse_nodes`); where such a node is not 0 where the main row is, its
    /// readers read it at the non-zeros only too.
    pub(crate) sparse: Vec<bool>,
    /// Per node: whether its value is written as a matrix cell, `-0.0` as `0.0`, as the
    /// unfused kernels do ([`CPlan::matrix_cell_nodes`]).
    pub(crate) matrix_cells: Vec<bool>,
}

fn unsupported<T>(why: Unsupported) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(why))
}

impl RowInfo {
    /// The products of the main row that the dense entry computes a block of rows at a time
    /// ([`RowInfo::hoisted`]), each with the input holding its matrix (transposed).
    pub(crate) fn hoisted_products(&self) -> Result<Vec<(CNodeId, usize)>, CodegenError> {
        let nodes = &self.plan.nodes;
        nodes
            .iter()
            .enumerate()
            .filter(|&(k, _)| self.hoisted[k])
            .map(|(k, node)| match node {
                CNode::VectMatMult { b, .. } => match nodes[*b] {
                    CNode::Data { input, .. } => Ok((k, input)),
                    _ => Err(CodegenError::Internal(Internal::MalformedPlan(
                        "a row-times-matrix operand that is not an input",
                    ))),
                },
                _ => Err(CodegenError::Internal(Internal::MalformedPlan(
                    "a hoisted node that is no row-times-matrix product",
                ))),
            })
            .collect()
    }
}

/// Aggregates the CSR entry computes from a row's non-zeros.
pub(crate) fn sparse_agg(f: AggOp) -> bool {
    matches!(f, AggOp::Sum | AggOp::Mean | AggOp::Min | AggOp::Max)
}
