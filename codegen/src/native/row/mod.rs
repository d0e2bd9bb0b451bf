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
//! block primitives do not depend on the plan: they are functions of the skeletons crate
//! ([`BlockPrim`]) that operators call.
//!
//! Sparse `X` (CSR entry, called only when every side input is finite): primitives that read
//! `X` directly visit its non-zeros (`X %*% B` as sparse dot products, row sums, and the
//! outer-product accumulation `t(X) %*% b` as sparse `axpy`s, the latter only when `b` is
//! finite in that row, since `0 * Inf` must stay NaN). Element-wise nodes needed at the row's
//! non-zeros only (such as ALS-CG's `(X != 0) * (Y - X)` before a product) are computed there
//! only, as compact vectors that those primitives read the same way (`row_plan`'s
//! `sparse_nodes`). Every other reader sees the row scattered into a zeroed scratch row
//! (cleared again after the row).
//!
//! The analysis ([`RowInfo`]) and the layout are shared with the Cranelift backend
//! (`crate::row_plan`). Sizes are not part of a plan: [`layout`] derives every vector length and buffer offset from
//! the input shapes at execution, validates them (mismatched lengths are errors before any
//! generated code runs), and passes them as parameters the generated code loads once.

use super::cell::W;
use super::expr::{
    self, declare_entry, declare_primitive, ierr, if_else, load_inputs, load_main_csr, Fx,
    InputPtrs,
};
use super::library;
use super::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use super::outer;
use super::{CodegenError, Unsupported};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{
    BasicMetadataValueEnum, FloatValue, FunctionValue, IntValue, PointerValue, VectorValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan};
use lafuse_compiler::hops::{AggOp, BinaryOp, NaryOp, TernaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::row::{RowArgs, RowInput, RowKind};
use std::mem::offset_of;

mod block;
mod body;
mod entry;
mod prims;

pub(crate) use crate::row_plan::{analyze, layout, RowInfo};
use crate::row_plan::{
    is_main_row, pidx, read_by, sparse_agg, Class, AUX, HOIST, LEN, OFF, PER_NODE, P_FLIP, P_MROW,
    P_NODE0, P_OUTC, P_PEND, ROW_BLOCK,
};
use block::*;
pub(crate) use block::{block_address, BlockPrim};
use body::*;
pub(crate) use entry::emit;
use prims::*;

// Blocks of `ROW_BLOCK` rows in the dense entry (the constant lives with the shared layout).
//
// * Products of the main row with a whole matrix `B` are computed for the block's rows in
//   one pass over `B` (`lafuse_row_dot_rows`): `B` is read once per block instead of once
//   per row, and the rows' independent sums keep the FMA units busy. Each result is one
//   accumulator of [`W`] lanes over the row in order, then a scalar tail, so a row's value
//   does not depend on the block it falls in (nor on the thread partitioning).
// * Outer-product updates `t(X[i, ]) %*% b_i` are kept and added to the partial `P` once per
//   block (`P[c, ] += Σ_r b_r[c] * X[r, ]`, the rows in order, so every element sees the same
//   additions in the same order as row by row): `P` is loaded and stored once per block
//   instead of once per row, and the block's rows are read from the cache.
//
// Eight rows rather than four: a block of 1000-double rows (64 KB) with the partial and `B`
// stays within the core's L2 cache, and the loads of `B` and of the partial per row of `X`
// halve again (the load ports, not memory, bound these loops on this machine's cores).

fn unsupported<T>(why: Unsupported) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(why))
}

impl RowInfo {
    /// Whether the dense entry calls block primitive `prim`.
    pub(crate) fn uses(&self, prim: BlockPrim) -> bool {
        match prim {
            BlockPrim::DotRows => self.hoisted.contains(&true),
            BlockPrim::AxpyRows => self.defer_outer,
        }
    }
}
