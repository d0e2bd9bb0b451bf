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
use super::{CodegenError, Internal, Unsupported};
use crate::backend::Operand;
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

mod analyze;
mod block;
mod body;
mod entry;
mod layout;
mod prims;
#[cfg(test)]
mod tests;

pub(crate) use analyze::analyze;
use analyze::*;
pub(crate) use block::BlockPrim;
use block::*;
use body::*;
pub(crate) use entry::emit;
pub(crate) use layout::layout;
use prims::*;

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
    /// The CSR entry scatters the row only where an outer-product update meets a non-finite
    /// value in its other operand (0 * Inf is NaN at the row's zeros), and clears it after;
    /// the scratch row is reserved, but finite rows never touch it.
    scatter_on_demand: bool,
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

fn unsupported<T>(why: Unsupported) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(why))
}

/// Aggregates the CSR entry computes from a row's non-zeros.
fn sparse_agg(f: AggOp) -> bool {
    matches!(f, AggOp::Sum | AggOp::Mean | AggOp::Min | AggOp::Max)
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
