//! The contract between generated PTX kernels and the GPU skeleton: which kernel shape an
//! operator has, how it is launched, and where its outputs and per-block partials lie.
//!
//! Every kernel takes one parameter, a device pointer to a [`KernelArgs`](crate::abi::KernelArgs)
//! whose pointers are device pointers (the `inputs` views follow it in the same buffer), so the
//! CPU's argument layout is the GPU's too and the native emitters read it unchanged.

use crate::{AggKind, InputUse};

/// Threads per block of every kernel (the shared-memory reduction arrays are this long).
pub const BLOCK_THREADS: u32 = 256;

/// Most blocks of a grid-stride kernel: enough to fill a Hopper GPU (132 multiprocessors,
/// 8 blocks of 256 threads each) several times over.
pub const MAX_BLOCKS: u32 = 132 * 16;

/// The format of the main input a kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuMain {
    Dense,
    /// CSR; only for sparse-safe plans whose zeros may be skipped.
    Csr,
}

/// What a kernel computes and where it writes (`out` of the argument block).
#[derive(Clone, Debug, PartialEq)]
pub enum KernelShape {
    /// A value per cell of a dense main input (`out[i * n + j]`), or per non-zero of a CSR one
    /// (`out[p]`, the driver's structure).
    NoAgg,
    /// Full aggregates over a grid-stride walk: output `k`'s partial of block `b` is the pair
    /// (value, Kahan correction) at `out[2 * (k * blocks + b)]`, merged on the host in block
    /// order.
    FullAgg { aggs: Vec<AggKind> },
    /// One value per row, finished by the kernel at `out[i]` (a block per row of a dense main
    /// input, a thread per row of a CSR one).
    RowAgg { agg: AggKind },
    /// One value per column of a dense main input: the rows in `blocks_y` chunks (grid
    /// dimension y), chunk `c`'s partial of column `j` the pair at `out[2 * (c * n + j)]`,
    /// merged on the host in chunk order.
    ColAgg { agg: AggKind },
    /// Outer `G` in the driver's structure (`out[p]`), a thread per row of the CSR driver.
    OuterCellWise,
    /// Outer `sum(G)`: partials as [`KernelShape::FullAgg`] with one sum.
    OuterFullAgg,
    /// Outer `G %*% W` (m×k2): a thread per row owns its output row, so no atomics.
    OuterRight,
}

/// A kernel's launch contract: its shape, how it reads each input, and its input positions.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuKernel {
    pub shape: KernelShape,
    pub main: GpuMain,
    /// How each input is read, by CPlan position (as the CPU skeletons' [`InputUse`]).
    pub uses: Vec<InputUse>,
    /// The body runs in the main input's transposed frame (a column-vector main input read as
    /// its transpose): the output is relabelled to the transposed shape.
    pub transposed: bool,
}

impl GpuKernel {
    /// Whether the kernel reduces the rows of a block together (shared-memory tree), so its
    /// grid is one-dimensional with a block per row.
    pub fn block_per_row(&self) -> bool {
        matches!(self.shape, KernelShape::RowAgg { .. }) && self.main == GpuMain::Dense
    }
}
