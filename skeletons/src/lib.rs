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
pub mod magg;
pub mod outer;
mod prep;
pub mod row;

pub use abi::{DenseView, KernelArgs, KernelFn, PARTIAL_SLOTS_PER_LANE};
pub use cell::{CellKernels, CellSpec};
pub use magg::{MAggKernels, MAggSpec};
pub use outer::{OuterKernels, OuterSpec};
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

/// Why a skeleton could not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkeletonError {
    /// Inputs that do not match the operator (the caller's fault), or the generator's error
    /// when it could not give an entry point.
    Invalid(String),
    /// An output larger than the memory the machine can give (the script's sizes are at
    /// fault).
    OutOfMemory(String),
}

impl SkeletonError {
    /// Who has to act on this error: inputs that do not match the operator are lafuse's
    /// doing (the engine checked the script's shapes before it called the operator), an
    /// output that does not fit in memory is a resource error.
    pub fn fault(&self) -> Fault {
        match self {
            SkeletonError::Invalid(_) => Fault::Internal,
            SkeletonError::OutOfMemory(_) => Fault::Resource,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        match self {
            SkeletonError::Invalid(s) | SkeletonError::OutOfMemory(s) => s,
        }
    }
}

impl fmt::Display for SkeletonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for SkeletonError {}

/// Result of a skeleton call.
pub type Result<T> = std::result::Result<T, SkeletonError>;

/// A generated entry point produced on first request. Generators compile CSR entry points
/// lazily, so a skeleton asks for one only once it has decided to call it (a CSR main input
/// whose side inputs allow visiting non-zeros only); the call may take milliseconds the first
/// time and is cheap afterwards. An error (the generator's) fails the skeleton call.
pub type LazyEntry<'a, F> = &'a (dyn Fn() -> Result<F> + Sync);

pub(crate) fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(SkeletonError::Invalid(msg.into()))
}
