//! The PTX kernel of Row plans: a warp per row of the main input, blocks of
//! [`ROW_TILE`] rows (one per warp) in a grid-stride walk.
//!
//! A row's vectors are never materialized: each element-wise vector node is evaluated at the
//! column where its reader needs it (the native backend's `Body`, one lane wide), and each row
//! aggregate (`rowSums`, `rowMaxs`, `X[i,] %*% v`, ...) is a pass of the warp over the row's
//! columns, lane-strided so reads coalesce (through the read-only path), folded per lane (plain
//! sums, as the CPU's Row operator's) and reduced across the warp by shuffles in a fixed tree. Aggregates that read other aggregates run in later passes
//! ("levels"). Outputs:
//!
//! * row-wise: the warp writes its row of the output (or lane 0 its value);
//! * summed into one value: per-thread Kahan sums, then the block's tree, one partial per block;
//! * summed into one output row (`colSums(f(X))`, `t(X) %*% s`): the warps put their rows'
//!   aggregates in shared memory, then the block walks the columns, each thread owning its
//!   columns of the block's partial row, adding the tile's rows in order.
//!
//! [`RowKernelOptions`] lays the kernel out: how many positions a lane reads before folding,
//! how many chains it folds into, whether the last step of a row pass is masked, and how
//! many of a thread's columns keep their sums in registers across tiles instead of being read
//! and written back per tile. The benchmark compares the layouts on a GPU.
//!
//! What this does not generate (the operator then runs on the CPU): products with a matrix of
//! more than one column (`vect_matmult` of a `k`-column matrix is one dot product here; the
//! caller checks the column count), `cbind`, outer products of two vectors, row types whose
//! output is not `n` wide.

use super::kx::{declare_kernel, pick, unrolled, unrolled_masked, Acc, Kx};
use crate::backend::{CodegenError, Internal, Unsupported};
use crate::native::expr::{ierr, load_inputs, At, Body, Fx, InputPtrs};
use crate::native::llvm::{load_vec, store_vec};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind, RowType};
use lafuse_compiler::hops::{AggOp, Literal};
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::gpu::abi::{
    GpuKernel, GpuMain, KernelShape, NarrowRows, BLOCK_THREADS, MAX_COLUMN_BLOCKS, ROW_TILE,
};
use lafuse_skeletons::{AggKind, InputUse};
use std::collections::HashMap;
use std::mem::offset_of;

/// Row aggregates one kernel may keep per row (shared memory per tile row).
pub(super) const MAX_ROW_AGGREGATES: u32 = 16;

/// How the Row kernel is laid out. Operators get [`RowKernelOptions::default`]; `lafuse bench
/// --suite gpu` checks every layout of [`compared_row_layouts`] against the CPU and times them
/// side by side (its `row` case), so that the default is chosen by a measurement on a GPU.
/// Every layout folds in a fixed order, so each is deterministic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowKernelOptions {
    /// Positions of a row pass a lane evaluates before it folds them (its loads in flight).
    pub unroll: u32,
    /// Chains a lane folds a row pass into, position `u` of a step into chain `u % chains`,
    /// merged in chain order before the warp's fold: shorter dependency chains.
    pub chains: u32,
    /// The last, partial step of a row pass is one masked step ([`unrolled_masked`]), not a
    /// walk of one position (one memory latency) at a time.
    pub masked_tail: bool,
    /// Columns per thread of a column-summed output (`colSums(f(X))`, `t(X) %*% s`) whose
    /// partial sums stay in registers across the block's tiles (plain sums, as the CPU's; the
    /// blocks' partial rows are then folded with Kahan steps). Columns past `BLOCK_THREADS *
    /// resident_columns` are read and written back per tile. 0: all of them are.
    pub resident_columns: u32,
    /// Resident columns whose tile reads are issued together.
    pub resident_group: u32,
    /// A cap on the registers of a thread (`.maxnreg`; 0: none), for more blocks a
    /// multiprocessor.
    pub max_registers: u32,
    /// Column sums with every column resident (`cols <= BLOCK_THREADS * resident_columns`):
    /// the kernel's narrow entry ([`super::row_block`]), where the block reads this many rows
    /// at a time together, each thread its resident columns of every row, keeps the values in
    /// registers and reduces the row aggregates across the block, so `X` is read once. Wider
    /// rows take the main entry, a warp per row with every column written back per tile. 0: no
    /// narrow entry.
    pub block_rows: u32,
    /// Most blocks of the narrow entry's launch ([`NarrowRows::blocks`]): fewer blocks write
    /// fewer partial rows, more fill the device.
    pub column_blocks: u32,
    /// The narrow entry issues the loads of the block's next tile before it computes the
    /// current one (twice the registers for the tile's values).
    pub prefetch: bool,
}

impl RowKernelOptions {
    /// Session 20's kernel: every column read and written back per tile, the row pass's
    /// remainder walked a position at a time. On an H200 (session 28, `t(X) %*% (X %*% v)`):
    /// 0.27-0.29 ms at 20000 x 2000 (28-29 % of the copy bandwidth), 0.33-0.34 ms at 5000 x 8000.
    pub const WRITE_BACK: Self = RowKernelOptions {
        unroll: 8,
        chains: 1,
        masked_tail: false,
        resident_columns: 0,
        resident_group: 1,
        max_registers: 0,
        block_rows: 0,
        column_blocks: MAX_COLUMN_BLOCKS,
        prefetch: false,
    };

    /// Every column written back per tile, two chains and a masked last step in the row pass
    /// (48 registers for `t(X) %*% (X %*% v)`): 0.26-0.28 ms at 20000 x 2000, 0.28-0.29 ms at
    /// 5000 x 8000 on the H200 (session 28, Kahan row sums).
    pub const MASKED: Self = RowKernelOptions {
        chains: 2,
        masked_tail: true,
        ..Self::WRITE_BACK
    };

    /// [`MASKED`](Self::MASKED) with 8 columns' sums a thread kept in registers (read 2
    /// columns at a time): 0.20-0.22 ms at 20000 x 2000, 0.37-0.38 at 5000 x 8000.
    pub const RESIDENT: Self = RowKernelOptions {
        resident_columns: 8,
        resident_group: 2,
        ..Self::MASKED
    };

    /// The default: rows of up to 2048 columns by the narrow entry, a row a tile, 8 columns a
    /// thread, at most 396 blocks (three a multiprocessor of a 132-multiprocessor Hopper), 80
    /// registers (the entry's cap, no spills); wider rows by [`MASKED`](Self::MASKED)'s main
    /// entry. On the H200 (session 29, plain row sums and read-only loads, the folds timed
    /// apart): 0.118 ms at 20000 x 2000 (68 % of the copy bandwidth), against 0.130 for two
    /// rows a tile at 128 registers; CuPy's and PyTorch's two matrix-vector products take
    /// 0.19-0.20 ms.
    pub const NARROW_BLOCKS: Self = RowKernelOptions {
        resident_columns: 8,
        resident_group: 2,
        block_rows: 1,
        column_blocks: 396,
        ..Self::MASKED
    };
}

/// The layouts `lafuse bench --suite gpu` compares on its Row case, named.
pub fn compared_row_layouts() -> Vec<(&'static str, RowKernelOptions)> {
    // Rows read by the block together and blocks at most, 8 resident columns a thread.
    let block = |rows: u32, blocks: u32| RowKernelOptions {
        block_rows: rows,
        column_blocks: blocks,
        ..RowKernelOptions::NARROW_BLOCKS
    };
    let m128 = |o: RowKernelOptions| RowKernelOptions {
        max_registers: 128,
        ..o
    };
    vec![
        ("write-back", RowKernelOptions::WRITE_BACK),
        ("masked", RowKernelOptions::MASKED),
        (
            "resident-g8",
            RowKernelOptions {
                resident_group: 8,
                ..RowKernelOptions::RESIDENT
            },
        ),
        ("block-r1-m80", RowKernelOptions::NARROW_BLOCKS),
        // Two blocks a multiprocessor (128 registers), then three (80) and four (64).
        ("block-r1-m128", m128(block(1, 264))),
        ("block-r2-m128", m128(block(2, 264))),
        ("block-r4-m128", m128(block(4, 264))),
        ("block-r2-m80", block(2, 396)),
        (
            "block-r1-m64",
            RowKernelOptions {
                max_registers: 64,
                ..block(1, 528)
            },
        ),
        // The next tile's loads in flight during the current one's work.
        (
            "block-r1-pf-m128",
            RowKernelOptions {
                prefetch: true,
                ..m128(block(1, 264))
            },
        ),
        (
            "block-r2-pf-m128",
            RowKernelOptions {
                prefetch: true,
                ..m128(block(2, 264))
            },
        ),
        (
            "block-r2-pf-m255",
            RowKernelOptions {
                prefetch: true,
                max_registers: 255,
                ..block(2, 132)
            },
        ),
    ]
}

impl Default for RowKernelOptions {
    fn default() -> Self {
        RowKernelOptions::NARROW_BLOCKS
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cls {
    /// One value per row.
    Scalar,
    /// `n` values per row (the main input's columns).
    Vector,
    /// A whole matrix (the right side of `vect_matmult`).
    Whole,
    /// `t(a) %*% b` of a vector and a scalar: the output row.
    Product,
    /// `k` values per row: the product of a row with a k-column matrix (`no_agg_b1`) and what
    /// is computed from it (the "product space", read at `(i, c)`).
    Span,
}

fn unsupported<T>(what: &'static str) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(Unsupported::Construct(what)))
}

/// A row aggregate computed by a pass over the row.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pass {
    /// `rowSums`/`rowMins`/`rowMaxs`/`rowMeans` of a vector (`sq`: of its squares).
    Agg { f: AggOp, x: CNodeId, sq: bool },
    /// `x %*% B` with `B` one column: `sum_j x_j * B[j]`.
    Dot { x: CNodeId, b: usize },
}

impl Pass {
    /// How the pass folds its values.
    pub(super) fn agg(self) -> AggKind {
        match self {
            Pass::Agg { f: AggOp::Min, .. } => AggKind::Min,
            Pass::Agg { f: AggOp::Max, .. } => AggKind::Max,
            Pass::Agg { sq: true, .. } => AggKind::SumSq,
            _ => AggKind::Sum,
        }
    }

    /// The value the pass folds at column `j` of `body`'s row.
    pub(super) fn term<'c>(
        self,
        fx: &Fx<'_, 'c>,
        body: &mut Body<'_, 'c>,
        ins: &InputPtrs<'c>,
        j: IntValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        match self {
            Pass::Agg { x, .. } => body.emit(fx, x, false),
            Pass::Dot { x, b } => {
                let (bp, bc) = ins.get(b)?;
                let bv = load_vec(&fx.b, fx.vty(1), bp, fx.mul(j, bc)?)?;
                fx.fmul(body.emit(fx, x, false)?, bv)
            }
        }
    }
}

/// A row's term of a column-summed output at `body`'s column: `x * y` of `t(x) %*% y`, else
/// the output node's value.
pub(super) fn column_term<'c>(
    fx: &Fx<'_, 'c>,
    body: &mut Body<'_, 'c>,
    plan: &CPlan,
    out_node: CNodeId,
) -> Result<VectorValue<'c>, CodegenError> {
    match &plan.nodes[out_node] {
        CNode::OuterMultAdd { a: x, b: y } => {
            let x = body.emit(fx, *x, false)?;
            let y = body.emit(fx, *y, false)?;
            fx.fmul(x, y)
        }
        _ => body.emit(fx, out_node, false),
    }
}

pub(super) struct Analysis {
    pub(super) classes: Vec<Cls>,
    pub(super) uses: Vec<InputUse>,
    /// The passes in the order they run, with their nodes and levels.
    pub(super) passes: Vec<(CNodeId, Pass, u32)>,
    pub(super) levels: u32,
    /// `no_agg_b1`: the product `x %*% B` (node, the row's vector `x`, `B`'s input), whose
    /// `k` values per row span the output's columns.
    pub(super) b1: Option<(CNodeId, CNodeId, usize)>,
}

/// Per node: whether it lies in the product space of a `no_agg_b1` plan: the product of the
/// row with a whole matrix, the element-wise nodes reading a node in it, and the element-wise
/// nodes and side inputs that only such nodes read (`0.5 * C * w` added to the product).
fn product_space(plan: &CPlan, row_type: RowType) -> Vec<bool> {
    let nodes = &plan.nodes;
    let mut span = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        span[i] = match node {
            CNode::VectMatMult { b, .. } => {
                row_type == RowType::NoAggB1
                    && matches!(
                        nodes.get(*b),
                        Some(CNode::Data {
                            access: Access::Whole,
                            ..
                        })
                    )
            }
            n if n.is_elementwise() => n.operands().iter().any(|&o| span[o]),
            _ => false,
        };
    }
    // Backwards: a node all of whose readers read it in the space (as an element-wise
    // operand; a product's row operand is the row's) is in it, unless it is the row itself.
    let readers = |i: CNodeId| {
        nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.operands().contains(&i))
    };
    for i in (0..nodes.len()).rev() {
        let candidate = match &nodes[i] {
            CNode::Data { input, .. } => *input != 0,
            n => n.is_elementwise(),
        };
        if span[i] || !candidate {
            continue;
        }
        let mut any = false;
        let all = readers(i).all(|(c, n)| {
            any = true;
            span[c] && n.is_elementwise()
        });
        span[i] = any && all;
    }
    span
}

fn analyze(plan: &CPlan, row_type: RowType) -> Result<Analysis, CodegenError> {
    let nodes = &plan.nodes;
    let out = *plan
        .outputs
        .first()
        .ok_or(CodegenError::Internal(Internal::MalformedPlan(
            "a row operator has one output",
        )))?;
    for (i, n) in nodes.iter().enumerate() {
        if n.operands().iter().any(|&o| o >= i) {
            return Err(CodegenError::Internal(Internal::LaterOperand { node: i }));
        }
    }
    let mut uses = vec![InputUse::Unused; plan.inputs.len()];
    let mut classes = vec![Cls::Scalar; nodes.len()];
    let span = product_space(plan, row_type);
    let read_in_span = |i: CNodeId| span[i];
    let mut b1 = None;
    let mut level = vec![0u32; nodes.len()];
    let mut passes = Vec::new();
    let mut set = |k: usize, u: InputUse| -> Result<(), CodegenError> {
        match uses.get(k) {
            None => Err(CodegenError::Internal(Internal::InputOutsidePlan {
                input: k,
            })),
            Some(&InputUse::Unused) => {
                uses[k] = u;
                Ok(())
            }
            Some(&x) if x == u => Ok(()),
            Some(_) => unsupported("a GPU row operator reading one input in two ways"),
        }
    };
    for (i, node) in nodes.iter().enumerate() {
        let cls = |o: CNodeId| classes[o];
        let lvl = node.operands().iter().map(|&o| level[o]).max().unwrap_or(0);
        classes[i] = match node {
            CNode::Data { input, access } => {
                let scalar = plan.inputs.get(*input) == Some(&InputKind::Scalar);
                let (u, c) = match access {
                    Access::Main if *input == 0 => (InputUse::Main, Cls::Vector),
                    _ if *input == 0 => {
                        return unsupported("the main input read other than as its rows")
                    }
                    _ if scalar || *access == Access::Scalar => (InputUse::Scalar, Cls::Scalar),
                    Access::Aligned if read_in_span(i) => (InputUse::B1Aligned, Cls::Span),
                    Access::RowVector if read_in_span(i) => (InputUse::B1RowVector, Cls::Span),
                    Access::Aligned => (InputUse::Aligned, Cls::Vector),
                    Access::RowVector => (InputUse::RowVector, Cls::Vector),
                    Access::ColVector => (InputUse::ColVector, Cls::Scalar),
                    // n×1, read at (j, 0).
                    Access::Whole => (InputUse::ColVectorT, Cls::Whole),
                    _ => return unsupported("an input access a GPU row operator does not read"),
                };
                set(*input, u)?;
                c
            }
            CNode::Literal { value } => {
                if let Literal::Str(_) = value {
                    return unsupported("a string literal in a body");
                }
                Cls::Scalar
            }
            n if n.is_elementwise() => {
                let mut c = Cls::Scalar;
                for o in n.operands() {
                    match (cls(o), c) {
                        (Cls::Scalar, _) => {}
                        (Cls::Vector, Cls::Scalar | Cls::Vector) => c = Cls::Vector,
                        (Cls::Span, Cls::Scalar | Cls::Span) => c = Cls::Span,
                        (Cls::Vector | Cls::Span, _) => {
                            return unsupported(
                                "a row's vector and a product's values in one operation on the \
                                 GPU",
                            )
                        }
                        _ => return unsupported("a matrix or product used element-wise"),
                    }
                }
                if c == Cls::Vector && span[i] {
                    return unsupported("a row's vector and a product's values in one operation");
                }
                c
            }
            CNode::RowAgg { x, .. } | CNode::RowSumSq { x } if cls(*x) == Cls::Vector => {
                let (f, sq) = match node {
                    CNode::RowAgg { f, .. } => (*f, false),
                    _ => (AggOp::Sum, true),
                };
                if !matches!(f, AggOp::Sum | AggOp::Mean | AggOp::Min | AggOp::Max) {
                    return unsupported(
                        "a row aggregate other than sum, mean, min and max on the GPU",
                    );
                }
                level[i] = lvl + 1;
                passes.push((i, Pass::Agg { f, x: *x, sq }, lvl + 1));
                Cls::Scalar
            }
            CNode::RowAgg { .. } | CNode::RowSumSq { .. } => {
                return unsupported("a row aggregate of a scalar on the GPU")
            }
            CNode::VectMatMult { a, b } if cls(*a) == Cls::Vector && cls(*b) == Cls::Whole => {
                let CNode::Data { input, .. } = nodes[*b] else {
                    return unsupported("a row-times-matrix product of a computed matrix");
                };
                if span[i] {
                    // Computed at the output, a pass over the row per column of B.
                    if b1.is_some() {
                        return unsupported("two products with a matrix in a GPU row operator");
                    }
                    b1 = Some((i, *a, input));
                    classes[i] = Cls::Span;
                    level[i] = lvl;
                    continue;
                }
                level[i] = lvl + 1;
                passes.push((i, Pass::Dot { x: *a, b: input }, lvl + 1));
                Cls::Scalar
            }
            CNode::OuterMultAdd { a, b }
                if i == out
                    && row_type == RowType::ColAggT
                    && matches!(
                        (cls(*a), cls(*b)),
                        (Cls::Vector, Cls::Scalar) | (Cls::Scalar, Cls::Vector)
                    ) =>
            {
                Cls::Product
            }
            _ => return unsupported("a row-plan node the GPU row kernel does not generate"),
        };
        if level[i] == 0 {
            level[i] = lvl;
        }
    }
    let ok = matches!(
        (row_type, classes[out]),
        (RowType::NoAgg | RowType::RowAgg, Cls::Scalar | Cls::Vector)
            | (RowType::FullAgg, Cls::Scalar | Cls::Vector)
            | (RowType::ColAgg, Cls::Vector)
            | (RowType::ColAggT, Cls::Product)
            | (RowType::NoAggB1, Cls::Span)
    );
    if !ok {
        return unsupported("a row type the GPU row kernel does not generate");
    }
    if passes.len() > MAX_ROW_AGGREGATES as usize {
        return unsupported("more row aggregates than a GPU row kernel keeps");
    }
    passes.sort_by_key(|&(n, _, l)| (l, n));
    let levels = passes.iter().map(|p| p.2).max().unwrap_or(0);
    Ok(Analysis {
        classes,
        uses,
        passes,
        levels,
        b1,
    })
}

/// What a Row kernel's entry reads from its argument block.
pub(super) struct EntryArgs<'c> {
    pub(super) ins: InputPtrs<'c>,
    pub(super) out: PointerValue<'c>,
    pub(super) rows: IntValue<'c>,
    pub(super) cols: IntValue<'c>,
    /// The dense main input's values.
    pub(super) main: PointerValue<'c>,
}

impl<'c> EntryArgs<'c> {
    pub(super) fn load(k: &Kx<'_, 'c>, a: &Analysis) -> Result<Self, CodegenError> {
        let used: Vec<bool> = a
            .uses
            .iter()
            .map(|u| !matches!(u, InputUse::Unused | InputUse::Main))
            .collect();
        // In this order, so the entries' PTX reads the block as it always has.
        let ins = load_inputs(&k.fx, k.args, &used)?;
        let out = k.ptr_field(offset_of!(KernelArgs, out))?;
        let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
        let cols = k.i64_field(offset_of!(KernelArgs, cols))?;
        let main = k.ptr_field(offset_of!(KernelArgs, main) + offset_of!(DenseView, data))?;
        Ok(EntryArgs {
            ins,
            out,
            rows,
            cols,
            main,
        })
    }

    /// `cols` as a double (`rowMeans`).
    pub(super) fn ncols_of(
        k: &Kx<'_, 'c>,
        cols: IntValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let n =
            k.fx.b
                .build_unsigned_int_to_float(cols, k.fx.ctx.f64_type(), "n")
                .map_err(ierr)?;
        k.fx.splat(n, 1)
    }
}

/// Emits the Row kernel of `plan` into `module`.
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    row_type: RowType,
    opts: RowKernelOptions,
) -> Result<GpuKernel, CodegenError> {
    if opts.unroll == 0 || opts.chains == 0 || opts.resident_group == 0 || opts.column_blocks == 0 {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "row kernel options with a zero unroll, chain, group or block count",
        )));
    }
    let a = analyze(plan, row_type)?;
    let out_node = plan.outputs[0];
    let shape = match row_type {
        RowType::NoAgg | RowType::RowAgg => KernelShape::RowWise {
            vector: a.classes[out_node] == Cls::Vector,
        },
        RowType::FullAgg => KernelShape::RowFull,
        RowType::NoAggB1 => KernelShape::RowB1,
        _ => KernelShape::RowColumns,
    };
    // Column sums of narrow rows by a block's tiles of rows (`row_block`), in an entry of
    // their own so that each entry has the registers it needs and no more.
    let by_block_layout =
        shape == KernelShape::RowColumns && opts.block_rows > 0 && opts.resident_columns > 0;
    let kernel = GpuKernel {
        shape: shape.clone(),
        main: GpuMain::Dense,
        uses: a.uses.clone(),
        transposed: false,
        narrow: by_block_layout.then(|| NarrowRows {
            max_cols: (BLOCK_THREADS * opts.resident_columns) as usize,
            blocks: opts.column_blocks.min(MAX_COLUMN_BLOCKS),
        }),
    };
    let mut k = declare_kernel(ctx, module)?;
    if opts.max_registers > 0 {
        super::nvptx::max_registers(ctx, module, k.fx.func, opts.max_registers)?;
    }
    let EntryArgs {
        ins,
        out,
        rows,
        cols,
        main,
    } = EntryArgs::load(&k, &a)?;
    let (tid, bid, nb) = (k.tid, k.bid, k.nb);
    let fx = &k.fx;
    let lane = fx.b.build_and(tid, fx.i64c(31), "lane").map_err(ierr)?;
    let warp =
        fx.b.build_right_shift(tid, fx.i64c(5), false, "warp")
            .map_err(ierr)?;
    let tile = fx.i64c(u64::from(ROW_TILE));
    let threads = k.threads();
    let sh_rows = k.shared("lafuse_sh_rows", ROW_TILE * MAX_ROW_AGGREGATES)?;
    // Per-thread sums of a full aggregate; the block's partial row of a column sum starts at 0
    // (each thread zeroes the columns it owns).
    let full = k.acc(AggKind::Sum)?;
    if shape == KernelShape::RowColumns {
        k.for_stride(tid, cols, threads, &mut |k, j| {
            let slot = k.fx.add(k.fx.mul(bid, cols)?, j)?;
            let z = k.fx.splat_const(0.0, 1);
            k.write_pair(out, slot, z, z)
        })?;
    }
    let tiles =
        k.fx.b
            .build_int_unsigned_div(
                k.fx.sub(k.fx.add(rows, tile)?, k.fx.i64c(1))?,
                tile,
                "tiles",
            )
            .map_err(ierr)?;
    // The main input through the read-only path (the kernel never writes it).
    let main_ro = k.global_ro(main)?;
    let mains = |k: &Kx<'_, 'c>,
                 i: IntValue<'c>,
                 j: IntValue<'c>|
     -> Result<VectorValue<'c>, CodegenError> {
        let idx = k.fx.add(k.fx.mul(i, cols)?, j)?;
        k.load_ro(main_ro, idx)
    };
    let ncols_v = EntryArgs::ncols_of(&k, cols)?;
    // Column sums kept in registers across tiles (the first `resident_columns` columns a
    // thread owns), plain sums from 0; none where the narrow entry takes the rows it fits
    // (this entry then writes every column back, keeping its registers few).
    let resident: Vec<Acc<'c>> = if shape == KernelShape::RowColumns && !by_block_layout {
        (0..opts.resident_columns)
            .map(|_| k.acc(AggKind::Sum))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let resident_span = k.fx.mul(threads, k.fx.i64c(resident.len() as u64))?;
    k.for_stride(bid, tiles, nb, &mut |k, t| {
        let i = k.fx.add(k.fx.mul(t, tile)?, warp)?;
        let valid = k.ult(i, rows)?;
        // The warp's row: its aggregates level by level, then its share of the output.
        k.when(valid, &mut |k| {
            let mut given: HashMap<CNodeId, VectorValue<'c>> = HashMap::new();
            for level in 1..=a.levels {
                let here: Vec<(CNodeId, Pass)> = a
                    .passes
                    .iter()
                    .filter(|p| p.2 == level)
                    .map(|p| (p.0, p.1))
                    .collect();
                let chains = opts.chains as usize;
                // Plain sums, as the CPU's Row operator's row aggregates.
                let accs: Vec<Vec<Acc<'c>>> = here
                    .iter()
                    .map(|(_, p)| (0..chains).map(|_| k.plain_acc(p.agg())).collect())
                    .collect::<Result<_, _>>()?;
                let g = given.clone();
                let mut eval = |k: &mut Kx<'_, 'c>, j: IntValue<'c>| {
                    let mut body = body_at(plan, &ins, (i, j, mains(k, i, j)?), g.clone());
                    here.iter()
                        .map(|&(_, p)| p.term(&k.fx, &mut body, &ins, j))
                        .collect()
                };
                if opts.masked_tail {
                    let unroll = u64::from(opts.unroll);
                    unrolled_masked(
                        k,
                        lane,
                        cols,
                        32,
                        unroll,
                        &mut eval,
                        &mut |k, u, vs, inside| {
                            for (acc, v) in accs.iter().zip(vs) {
                                k.fold_masked(acc[u as usize % chains], v, inside)?;
                            }
                            Ok(())
                        },
                    )?;
                } else {
                    unrolled(k, lane, cols, 32, &mut eval, &mut |k, vs| {
                        for (acc, v) in accs.iter().zip(vs) {
                            k.fold(acc[0], v)?;
                        }
                        Ok(())
                    })?;
                }
                for acc in &accs {
                    for &other in &acc[1..] {
                        k.merge(acc[0], other)?;
                    }
                }
                for (&(node, p), acc) in here.iter().zip(&accs) {
                    let v = warp_reduce(k, acc[0])?;
                    let v = match p {
                        Pass::Agg { f: AggOp::Mean, .. } => k.fx.fdiv(v, ncols_v)?,
                        _ => v,
                    };
                    given.insert(node, v);
                }
            }
            let first =
                k.fx.b
                    .build_int_compare(IntPredicate::EQ, lane, k.fx.i64c(0), "l0")
                    .map_err(ierr)?;
            match (&shape, a.classes[out_node]) {
                (KernelShape::RowWise { vector: true }, _)
                | (KernelShape::RowFull, Cls::Vector) => {
                    let g = given.clone();
                    let to_out = shape != KernelShape::RowFull;
                    unrolled(
                        k,
                        lane,
                        cols,
                        32,
                        &mut |k, j| {
                            let mut body = body_at(plan, &ins, (i, j, mains(k, i, j)?), g.clone());
                            let v = body.emit(&k.fx, out_node, false)?;
                            if to_out {
                                store_vec(&k.fx.b, out, k.fx.add(k.fx.mul(i, cols)?, j)?, v)?;
                                return Ok(vec![]);
                            }
                            Ok(vec![v])
                        },
                        &mut |k, vs| {
                            for v in vs {
                                k.fold(full, v)?;
                            }
                            Ok(())
                        },
                    )?;
                }
                (KernelShape::RowWise { vector: false } | KernelShape::RowFull, _) => {
                    let g = given.clone();
                    let to_out = shape != KernelShape::RowFull;
                    k.when(first, &mut |k| {
                        // A scalar output reads no column: column 0's main value is never
                        // used, but `At` needs one.
                        let z = k.fx.splat_const(0.0, 1);
                        let mut body = body_at(plan, &ins, (i, k.fx.i64c(0), z), g.clone());
                        let v = body.emit(&k.fx, out_node, false)?;
                        if to_out {
                            store_vec(&k.fx.b, out, i, v)
                        } else {
                            k.fold(full, v)
                        }
                    })?;
                }
                (KernelShape::RowB1, _) => {
                    let (product, x, b) = a.b1.ok_or(CodegenError::Internal(
                        Internal::MalformedPlan("a no_agg_b1 kernel without its product"),
                    ))?;
                    // B is n×k, read at (j, c): k is its row stride.
                    let (bp, k_cols) = ins.get(b)?;
                    let g = given.clone();
                    let one = k.fx.i64c(1);
                    k.for_stride(k.fx.i64c(0), k_cols, one, &mut |k, c| {
                        // The warp's pass over the row: x_j * B[j, c], in a fixed order.
                        let acc = k.plain_acc(AggKind::Sum)?;
                        unrolled(
                            k,
                            lane,
                            cols,
                            32,
                            &mut |k, j| {
                                let mut body =
                                    body_at(plan, &ins, (i, j, mains(k, i, j)?), g.clone());
                                let xv = body.emit(&k.fx, x, false)?;
                                let at = k.fx.add(k.fx.mul(j, k_cols)?, c)?;
                                let bv = load_vec(&k.fx.b, k.fx.vty(1), bp, at)?;
                                Ok(vec![k.fx.fmul(xv, bv)?])
                            },
                            &mut |k, vs| {
                                for v in vs {
                                    k.fold(acc, v)?;
                                }
                                Ok(())
                            },
                        )?;
                        let p = warp_reduce(k, acc)?;
                        let mut at_c = g.clone();
                        at_c.insert(product, p);
                        k.when(first, &mut |k| {
                            // The product space reads no column of the row.
                            let z = k.fx.splat_const(0.0, 1);
                            let mut body = body_at(plan, &ins, (i, c, z), at_c.clone());
                            let v = body.emit(&k.fx, out_node, false)?;
                            store_vec(&k.fx.b, out, k.fx.add(k.fx.mul(i, k_cols)?, c)?, v)
                        })
                    })?;
                }
                (KernelShape::RowColumns, _) => {
                    // The tile row's aggregates for the block's column walk.
                    let g = given.clone();
                    k.when(first, &mut |k| {
                        for (s, (node, _, _)) in a.passes.iter().enumerate() {
                            let at = k.fx.add(
                                k.fx.mul(warp, k.fx.i64c(u64::from(MAX_ROW_AGGREGATES)))?,
                                k.fx.i64c(s as u64),
                            )?;
                            store_vec(&k.fx.b, sh_rows, at, g[node])?;
                        }
                        Ok(())
                    })?;
                }
                _ => {
                    return Err(CodegenError::Internal(Internal::MalformedPlan(
                        "a row kernel shape without its output",
                    )))
                }
            }
            Ok(())
        })?;
        if shape == KernelShape::RowColumns {
            k.barrier()?;
            let t0 = k.fx.mul(t, tile)?;
            // Row r's term at column j.
            let term = |k: &Kx<'_, 'c>,
                        r: u64,
                        j: IntValue<'c>|
             -> Result<VectorValue<'c>, CodegenError> {
                let ir = k.fx.add(t0, k.fx.i64c(r))?;
                let mut given = HashMap::new();
                for (s, (node, _, _)) in a.passes.iter().enumerate() {
                    let idx = k.fx.i64c(r * u64::from(MAX_ROW_AGGREGATES) + s as u64);
                    given.insert(*node, load_vec(&k.fx.b, k.fx.vty(1), sh_rows, idx)?);
                }
                let mut body = body_at(plan, &ins, (ir, j, mains(k, ir, j)?), given);
                column_term(&k.fx, &mut body, plan, out_node)
            };
            let whole =
                k.fx.b
                    .build_int_compare(IntPredicate::ULE, k.fx.add(t0, tile)?, rows, "whole")
                    .map_err(ierr)?;
            if !resident.is_empty() {
                resident_walk(k, &resident, opts, whole, (t0, rows, cols), &term)?;
            }
            let first_written = k.fx.add(tid, resident_span)?;
            k.for_stride(first_written, cols, threads, &mut |k, j| {
                // Plain sums, as the resident columns' and the CPU's column sums: the pair's
                // correction stays the 0 written at the start, so only the sum moves.
                let slot = k.fx.add(k.fx.mul(bid, cols)?, j)?;
                let at = k.fx.mul(slot, k.fx.i64c(2))?;
                let acc = k.plain_acc(AggKind::Sum)?;
                k.fx.store(acc.s, load_vec(&k.fx.b, k.fx.vty(1), out, at)?)?;
                // A whole tile (the common case): every row's read first, so they are in
                // flight together, then the folds in row order. A last, partial tile guards
                // each row.
                let (then, other, done) = (
                    ctx.append_basic_block(k.fx.func, "tile"),
                    ctx.append_basic_block(k.fx.func, "partial"),
                    ctx.append_basic_block(k.fx.func, "folded"),
                );
                k.fx.b
                    .build_conditional_branch(whole, then, other)
                    .map_err(ierr)?;
                k.fx.b.position_at_end(then);
                let terms: Vec<VectorValue<'c>> = (0..u64::from(ROW_TILE))
                    .map(|r| term(k, r, j))
                    .collect::<Result<_, _>>()?;
                for v in terms {
                    k.fold(acc, v)?;
                }
                k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
                k.fx.b.position_at_end(other);
                for r in 0..u64::from(ROW_TILE) {
                    let ir = k.fx.add(t0, k.fx.i64c(r))?;
                    let inside = k.ult(ir, rows)?;
                    k.when(inside, &mut |k| {
                        let v = term(k, r, j)?;
                        k.fold(acc, v)
                    })?;
                }
                k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
                k.fx.b.position_at_end(done);
                store_vec(&k.fx.b, out, at, k.fx.load_v(acc.s)?)
            })?;
            // The shared aggregates are rewritten by the next tile only after every thread
            // has read them.
            k.barrier()?;
        }
        Ok(())
    })?;
    write_column_sums(&mut k, &resident, out, cols)?;
    if shape == KernelShape::RowFull {
        k.block_reduce(full, &mut |k, s, c| k.write_pair(out, bid, s, c))?;
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    if by_block_layout {
        super::row_block::emit_narrow(ctx, module, plan, &a, opts)?;
    }
    if shape == KernelShape::RowColumns {
        super::fold::emit_fold_columns(ctx, module, AggKind::Sum)?;
    }
    Ok(kernel)
}

/// The thread's resident column sums (`sums[c]`: column `tid + c * BLOCK_THREADS`) into the
/// block's partial row (correction 0).
pub(super) fn write_column_sums<'c>(
    k: &mut Kx<'_, 'c>,
    sums: &[Acc<'c>],
    out: PointerValue<'c>,
    cols: IntValue<'c>,
) -> Result<(), CodegenError> {
    let (tid, bid, threads) = (k.tid, k.bid, k.threads());
    for (c, acc) in sums.iter().enumerate() {
        let j = k.fx.add(tid, k.fx.mul(threads, k.fx.i64c(c as u64))?)?;
        let inside = k.ult(j, cols)?;
        k.when(inside, &mut |k| {
            let slot = k.fx.add(k.fx.mul(bid, cols)?, j)?;
            let zero = k.fx.splat_const(0.0, 1);
            k.write_pair(out, slot, k.fx.load_v(acc.s)?, zero)
        })?;
    }
    Ok(())
}

/// A tile's terms added to the thread's resident column sums (`acc[c]`: column `tid + c *
/// BLOCK_THREADS`), rows in order, in groups of `resident_group` columns. Where the tile is
/// whole and the group's columns inside the matrix (the common case) the group's reads are
/// issued together, without guards; elsewhere each column is guarded, and in the last, partial
/// tile each row too.
fn resident_walk<'c>(
    k: &mut Kx<'_, 'c>,
    acc: &[Acc<'c>],
    opts: RowKernelOptions,
    whole: IntValue<'c>,
    (t0, rows, cols): (IntValue<'c>, IntValue<'c>, IntValue<'c>),
    term: &dyn Fn(&Kx<'_, 'c>, u64, IntValue<'c>) -> Result<VectorValue<'c>, CodegenError>,
) -> Result<(), CodegenError> {
    let ctx = k.fx.ctx;
    let threads = k.threads();
    let column = |k: &Kx<'_, 'c>, c: usize| -> Result<IntValue<'c>, CodegenError> {
        k.fx.add(k.tid, k.fx.mul(threads, k.fx.i64c(c as u64))?)
    };
    let add = |k: &Kx<'_, 'c>, a: Acc<'c>, v: VectorValue<'c>| -> Result<(), CodegenError> {
        let s = k.fx.fadd(k.fx.load_v(a.s)?, v)?;
        k.fx.store(a.s, s)
    };
    // A column's tile rows, read together, then added in row order; a partial tile guards
    // each row.
    let tile_rows = |k: &mut Kx<'_, 'c>, a: Acc<'c>, j: IntValue<'c>, guarded: bool| {
        if !guarded {
            let terms: Vec<VectorValue<'c>> = (0..u64::from(ROW_TILE))
                .map(|r| term(k, r, j))
                .collect::<Result<_, _>>()?;
            return terms.into_iter().try_for_each(|v| add(k, a, v));
        }
        for r in 0..u64::from(ROW_TILE) {
            let ir = k.fx.add(t0, k.fx.i64c(r))?;
            let row_inside = k.ult(ir, rows)?;
            k.when(row_inside, &mut |k| add(k, a, term(k, r, j)?))?;
        }
        Ok(())
    };
    let group = opts.resident_group as usize;
    for first in (0..acc.len()).step_by(group) {
        let cs: Vec<usize> = (first..(first + group).min(acc.len())).collect();
        let last = column(k, cs[cs.len() - 1])?;
        let all_inside =
            k.fx.b
                .build_and(whole, k.ult(last, cols)?, "all")
                .map_err(ierr)?;
        let (fast, slow, done) = (
            ctx.append_basic_block(k.fx.func, "resident"),
            ctx.append_basic_block(k.fx.func, "resident_guarded"),
            ctx.append_basic_block(k.fx.func, "resident_done"),
        );
        k.fx.b
            .build_conditional_branch(all_inside, fast, slow)
            .map_err(ierr)?;
        // Every column of the group inside a whole tile: all its reads issued together.
        k.fx.b.position_at_end(fast);
        let mut terms = Vec::new();
        for &c in &cs {
            let j = column(k, c)?;
            for r in 0..u64::from(ROW_TILE) {
                terms.push((c, term(k, r, j)?));
            }
        }
        for (c, v) in terms {
            add(k, acc[c], v)?;
        }
        k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        // The group's last columns past the matrix, or the last, partial tile.
        k.fx.b.position_at_end(slow);
        for &c in &cs {
            let j = column(k, c)?;
            let inside = k.ult(j, cols)?;
            k.when(inside, &mut |k| {
                let (then, other, joined) = (
                    ctx.append_basic_block(k.fx.func, "whole_tile"),
                    ctx.append_basic_block(k.fx.func, "partial_tile"),
                    ctx.append_basic_block(k.fx.func, "column_done"),
                );
                k.fx.b
                    .build_conditional_branch(whole, then, other)
                    .map_err(ierr)?;
                k.fx.b.position_at_end(then);
                tile_rows(k, acc[c], j, false)?;
                k.fx.b.build_unconditional_branch(joined).map_err(ierr)?;
                k.fx.b.position_at_end(other);
                tile_rows(k, acc[c], j, true)?;
                k.fx.b.build_unconditional_branch(joined).map_err(ierr)?;
                k.fx.b.position_at_end(joined);
                Ok(())
            })?;
        }
        k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        k.fx.b.position_at_end(done);
    }
    Ok(())
}

/// The body at row `i`, column `j` (main value `main`), with the row aggregates of row `i`
/// already computed (`given`).
pub(super) fn body_at<'p, 'c>(
    plan: &'p CPlan,
    ins: &'p InputPtrs<'c>,
    (i, j, main): (IntValue<'c>, IntValue<'c>, VectorValue<'c>),
    given: HashMap<CNodeId, VectorValue<'c>>,
) -> Body<'p, 'c> {
    let mut body = Body::new(plan, ins, At { i, j, w: 1, main });
    body.given = given;
    body
}

/// `x` of the lane `offset` lanes up (`shfl.sync.down`; the top lanes get their own), as two
/// 32-bit shuffles of the double's halves.
fn shfl_down<'c>(
    k: &Kx<'_, 'c>,
    x: VectorValue<'c>,
    offset: u32,
    idx: bool,
) -> Result<VectorValue<'c>, CodegenError> {
    let fx: &Fx<'_, 'c> = &k.fx;
    let ctx = fx.ctx;
    let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
    let name = if idx {
        "llvm.nvvm.shfl.sync.idx.i32"
    } else {
        "llvm.nvvm.shfl.sync.down.i32"
    };
    let f = match fx.module.get_function(name) {
        Some(f) => f,
        None => fx.module.add_function(
            name,
            i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into(), i32t.into()], false),
            None,
        ),
    };
    let d =
        fx.b.build_extract_element(x, fx.i64c(0), "d")
            .map_err(ierr)?;
    let bits =
        fx.b.build_bit_cast(d, i64t, "bits")
            .map_err(ierr)?
            .into_int_value();
    let lo = fx.b.build_int_truncate(bits, i32t, "lo").map_err(ierr)?;
    let hi =
        fx.b.build_int_truncate(
            fx.b.build_right_shift(bits, i64t.const_int(32, false), false, "h")
                .map_err(ierr)?,
            i32t,
            "hi",
        )
        .map_err(ierr)?;
    let shuffle = |v: IntValue<'c>| -> Result<IntValue<'c>, CodegenError> {
        let r =
            fx.b.build_call(
                f,
                &[
                    i32t.const_all_ones().into(),
                    v.into(),
                    i32t.const_int(u64::from(offset), false).into(),
                    i32t.const_int(31, false).into(),
                ],
                "sh",
            )
            .map_err(ierr)?;
        match r.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v.into_int_value()),
            _ => Err(CodegenError::Internal(Internal::NoReturnValue {
                what: "shuffle",
            })),
        }
    };
    let (lo, hi) = (shuffle(lo)?, shuffle(hi)?);
    let lo = fx.b.build_int_z_extend(lo, i64t, "lo64").map_err(ierr)?;
    let hi = fx.b.build_int_z_extend(hi, i64t, "hi64").map_err(ierr)?;
    let hi =
        fx.b.build_left_shift(hi, i64t.const_int(32, false), "hs")
            .map_err(ierr)?;
    let bits = fx.b.build_or(hi, lo, "b").map_err(ierr)?;
    let d =
        fx.b.build_bit_cast(bits, ctx.f64_type(), "d")
            .map_err(ierr)?
            .into_float_value();
    fx.splat(d, 1)
}

/// The warp's fold of `acc` (a fixed tree: lanes 16 apart, then 8, ..., then 1), broadcast from
/// lane 0 so every lane holds the same value. Every lane of the warp must reach this.
pub(super) fn warp_reduce<'c>(
    k: &mut Kx<'_, 'c>,
    acc: Acc<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    for offset in [16, 8, 4, 2, 1] {
        let s = k.fx.load_v(acc.s)?;
        let c = k.fx.load_v(acc.c)?;
        let os = shfl_down(k, s, offset, false)?;
        match acc.agg {
            AggKind::Min | AggKind::Max => {
                k.fx.store(acc.s, pick(&k.fx, acc.agg, s, os)?)?;
            }
            AggKind::Sum | AggKind::SumSq if !acc.kahan => {
                k.fx.store(acc.s, k.fx.fadd(s, os)?)?;
            }
            AggKind::Sum | AggKind::SumSq => {
                let oc = shfl_down(k, c, offset, false)?;
                k.fx.kahan_add(acc.s, acc.c, os)?;
                let neg = k.fx.b.build_float_neg(oc, "n").map_err(ierr)?;
                k.fx.kahan_add(acc.s, acc.c, neg)?;
            }
        }
    }
    let s = k.fx.load_v(acc.s)?;
    shfl_down(k, s, 0, true)
}
