//! Hand-written skeletons hosting generated fused-operator bodies (one per fusion template,
//! DESIGN section 4).
//!
//! A skeleton owns everything around the generated loop: validating inputs against what the
//! generated code reads ([`InputUse`]), preparing side inputs (sparse side inputs are densified
//! once per execution, so generated code never searches a sparse row), partitioning rows into
//! tasks whose boundaries depend on the shape only, running tasks on rayon above a work
//! threshold, allocating outputs in the runtime's preferred format, and merging per-task
//! partial aggregates in task order (so results do not depend on the thread count). The
//! generated code owns the loop over a row range `[rl, ru)` of the main input and is called
//! through the C ABI of [`abi`].
//!
//! Invariant: this crate knows nothing of CPlans or LLVM; templates describe themselves with the
//! types here ([`CellKind`], [`AggKind`], [`OuterKind`], [`InputUse`]).

pub mod abi;
pub mod cell;
mod gather_prefetch;
pub mod gpu;
pub mod magg;
pub mod outer;
mod prep;
pub mod row;
pub mod row_blocks;
pub mod row_sparse;
mod zeroed_buffers;

pub use abi::{DenseView, KernelArgs, KernelFn, PARTIAL_SLOTS_PER_LANE};
pub use cell::{CellKernels, CellSpec};
pub use magg::{MAggKernels, MAggSpec};
pub use outer::{OuterKernels, OuterSpec, OuterTiles};
pub use prep::Input;

use lafuse_core::Fault;
use std::fmt;

/// The output shape class of a Cell operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CellKind {
    /// One output cell per main-input cell.
    NoAgg,
    /// One value per row (m×1).
    RowAgg,
    /// One value per column (1×n).
    ColAgg,
    /// One value (1×1).
    FullAgg,
}

/// An aggregation function of a Cell or MultiAgg operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggKind {
    /// Kahan-compensated sum.
    Sum,
    /// Kahan-compensated sum of squares (the body computes the base).
    SumSq,
    /// Minimum (NaN wins).
    Min,
    /// Maximum (NaN wins).
    Max,
}

/// The final step of an Outer operator over `G` (the body at the driver's non-zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OuterKind {
    /// `G` itself, in the driver's format.
    CellWise,
    /// `sum(G)`.
    FullAgg,
    /// `t(t(W) %*% G)` (n×k2) with `W` given as k2×m.
    Left,
    /// `W %*% G` (k2×n) with `W` given as k2×m.
    LeftT,
    /// `G %*% W` (m×k2) with `W` given as n×k2.
    Right,
}

/// How the generated code reads one input (by input position); the skeleton checks the
/// input's shape against it before any generated code runs, and prepares the view it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputUse {
    /// The main input (position 0).
    Main,
    /// Same shape as the main input, read at the current cell `(i, j)`.
    Aligned,
    /// m rows, read at `(i, 0)` (row stride = its column count).
    ColVector,
    /// n columns, read at `(0, j)`.
    RowVector,
    /// Inside a transpose: m columns, read at `(0, i)`.
    RowVectorT,
    /// Inside a transpose: n rows, read at `(j, 0)` (row stride = its column count).
    ColVectorT,
    /// A GPU Row kernel's product space (`no_agg_b1`): m rows of as many columns as the
    /// product's matrix has, read at `(i, c)`.
    B1Aligned,
    /// A GPU Row kernel's product space: one row of as many columns as the product's matrix
    /// has, read at `(0, c)`.
    B1RowVector,
    /// Read at its first cell: a scalar operand or any non-empty matrix.
    Scalar,
    /// Outer: `U` (m×k), row `i` read as a contiguous vector.
    OuterU,
    /// Outer: `V` (n×k), row `j` read as a contiguous vector.
    OuterV,
    /// Outer: `V` given as k×n (the product's right side as is); the skeleton transposes it to
    /// n×k so row `j` is contiguous.
    OuterVT,
    /// Outer Right: the final product's matrix `W` (n×k2), row `j` read contiguously.
    FinalW,
    /// Outer Left/LeftT: the final product's matrix given as k2×m; the skeleton transposes it
    /// to m×k2 so row `i` is contiguous.
    FinalWT,
    /// Not read by the generated code.
    Unused,
}

/// Why a skeleton could not run: a call that does not match the operator (lafuse's doing:
/// the engine checks the script's shapes before it calls an operator), an entry point the
/// generator could not give, or an output larger than memory.
#[derive(Clone, Debug, PartialEq)]
pub enum SkeletonError {
    /// The main input (position 0) is a scalar.
    MainNotMatrix,
    /// The operator takes `expected` inputs; the call passed `got`.
    InputCount { expected: usize, got: usize },
    /// Input `pos` is `rows`x`cols`, not the shape its use needs.
    InputShape {
        pos: usize,
        rows: usize,
        cols: usize,
        need: ShapeNeed,
    },
    /// Input `pos` is a scalar, but its use (`read_as`, the use's name) reads a matrix.
    ScalarInput { pos: usize, read_as: String },
    /// An Outer operator without its factors `U` and `V`.
    OuterFactorsMissing,
    /// `U` and `V` (as n x k) disagree on `k`.
    FactorColumns { u: usize, v: usize },
    /// An Outer operator with a final product but no matrix for it.
    FinalProductMissing,
    /// The final product's matrix is not read as one.
    FinalProductUse,
    /// A Cell or Outer operator whose kind and aggregation disagree.
    AggregationKind,
    /// A full aggregate over no lanes.
    NoLanes,
    /// A row-wise Row operator's output has `out_rows` rows for a main input of `rows`.
    RowWiseRows { rows: usize, out_rows: usize },
    /// A column-aggregate Row operator's output has more than one row.
    ColAggRows,
    /// A full-aggregate Row operator's output is not 1x1.
    FullAggShape,
    /// A runtime kernel the skeleton calls (a transpose) failed other than for memory.
    Runtime(lafuse_runtime::RuntimeError),
    /// The generator could not give an entry point the skeleton asked for: its own error,
    /// passed through untouched.
    EntryPoint(EntryError),
    /// An output larger than the memory the machine can give (the script's sizes are at
    /// fault): the runtime's resource error.
    OutOfMemory(lafuse_runtime::RuntimeError),
    /// The GPU's driver refused a step (`step` names it; `detail` is the driver's message):
    /// the operator runs on the CPU instead.
    Device { step: &'static str, detail: String },
    /// Device memory ran out, after recycling and eviction: the operator runs on the CPU.
    DeviceMemory(gpu::memory::DeviceOutOfMemory),
    /// A block product of the Outer skeleton's tiles did not fit its buffers.
    TileBlocks,
}

/// The shape an input's use needs ([`SkeletonError::InputShape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeNeed {
    /// Exactly `rows x cols`.
    Exactly(usize, usize),
    /// `rows x k` with `k >= 1`.
    RowsByAny(usize),
    /// `k x cols` with `k >= 1`.
    AnyByCols(usize),
    /// `rows` rows.
    Rows(usize),
    /// `cols` columns.
    Cols(usize),
    /// At least one cell.
    NonEmpty,
    /// At least one row.
    SomeRow,
}

impl fmt::Display for ShapeNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeNeed::Exactly(r, c) => write!(f, "{r}x{c}"),
            ShapeNeed::RowsByAny(r) => write!(f, "{r}xk (k >= 1)"),
            ShapeNeed::AnyByCols(c) => write!(f, "kx{c} (k >= 1)"),
            ShapeNeed::Rows(r) => write!(f, "{r} rows"),
            ShapeNeed::Cols(c) => write!(f, "{c} columns"),
            ShapeNeed::NonEmpty => f.write_str("non-empty"),
            ShapeNeed::SomeRow => f.write_str("at least one row"),
        }
    }
}

impl SkeletonError {
    /// Who has to act on this error: a call that does not match the operator, or a failed
    /// kernel, is lafuse's doing (the engine checked the script's shapes before it called the
    /// operator); an output that does not fit in memory is a resource error.
    pub fn fault(&self) -> Fault {
        match self {
            SkeletonError::OutOfMemory(_)
            | SkeletonError::Device { .. }
            | SkeletonError::DeviceMemory(_) => Fault::Resource,
            _ => Fault::Internal,
        }
    }
}

impl fmt::Display for SkeletonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use lafuse_runtime::RuntimeError;
        match self {
            SkeletonError::MainNotMatrix => f.write_str("the main input must be a matrix"),
            SkeletonError::InputCount { expected, got } => {
                write!(f, "operator takes {expected} inputs, got {got}")
            }
            SkeletonError::InputShape {
                pos,
                rows,
                cols,
                need,
            } => write!(f, "input {pos} is {rows}x{cols}, expected {need}"),
            SkeletonError::ScalarInput { pos, read_as } => {
                write!(f, "input {pos} is a scalar, read as {read_as}")
            }
            SkeletonError::OuterFactorsMissing => f.write_str("an outer operator reads U and V"),
            SkeletonError::FactorColumns { u, v } => {
                write!(f, "U has {u} columns but V has {v} (as n x k)")
            }
            SkeletonError::FinalProductMissing => f.write_str("a final product needs its matrix"),
            SkeletonError::FinalProductUse => {
                f.write_str("the final product's matrix is not read as one")
            }
            SkeletonError::AggregationKind => f.write_str(
                "a cell or outer operator aggregates exactly when its kind is not no-agg or cell-wise",
            ),
            SkeletonError::NoLanes => f.write_str("a full aggregate needs at least one lane"),
            SkeletonError::RowWiseRows { rows, out_rows } => {
                write!(f, "a row-wise output has {rows} rows, not {out_rows}")
            }
            SkeletonError::ColAggRows => f.write_str("a column aggregate has one row"),
            SkeletonError::FullAggShape => f.write_str("a full aggregate is 1x1"),
            SkeletonError::Runtime(e) => write!(f, "{e}"),
            SkeletonError::EntryPoint(e) => write!(f, "{}", e.0),
            SkeletonError::OutOfMemory(RuntimeError::Resource(why)) => write!(f, "{why}"),
            SkeletonError::OutOfMemory(e) => write!(f, "{e}"),
            SkeletonError::Device { step, detail } => write!(f, "GPU: {step}: {detail}"),
            SkeletonError::DeviceMemory(e) => write!(f, "GPU: {e}"),
            SkeletonError::TileBlocks => {
                f.write_str("a tile of the outer product does not fit its buffers")
            }
        }
    }
}

impl std::error::Error for SkeletonError {}

/// Result of a skeleton call.
pub type Result<T> = std::result::Result<T, SkeletonError>;

/// A generator's error for an entry point it could not give. Skeletons know nothing of code
/// generation, so they carry the error as it was, and the generator that called the skeleton
/// gets back its own typed error (`downcast_ref`), not a message about it.
#[derive(Clone, Debug)]
pub struct EntryError(pub std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl PartialEq for EntryError {
    /// The same error value (errors have no equality of their own).
    fn eq(&self, other: &EntryError) -> bool {
        std::ptr::addr_eq(
            std::sync::Arc::as_ptr(&self.0),
            std::sync::Arc::as_ptr(&other.0),
        )
    }
}

impl From<EntryError> for SkeletonError {
    fn from(e: EntryError) -> SkeletonError {
        SkeletonError::EntryPoint(e)
    }
}

/// A generated entry point produced on first request. Generators compile CSR entry points
/// lazily, so a skeleton asks for one only once it has decided to call it (a CSR main input
/// whose side inputs allow visiting non-zeros only); the call may take milliseconds the first
/// time and is cheap afterwards. An error (the generator's) fails the skeleton call as
/// [`SkeletonError::EntryPoint`].
pub type LazyEntry<'a, F> = &'a (dyn Fn() -> std::result::Result<F, EntryError> + Sync);

pub(crate) fn err<T>(e: SkeletonError) -> Result<T> {
    Err(e)
}
