//! The Row skeleton (reference 6.3): one generated body per row of the main input `X`, values
//! being scalars or row vectors, then the row type's output.
//!
//! The generated entry points own the loop over a row range; row-vector intermediates live in
//! a per-task scratch buffer allocated here (zeroed, sized by the generator's [`RowLayout`]).
//! Iteration modes, chosen per call:
//! * dense main input: the dense entry point over row ranges;
//! * sparse main input, all side inputs finite: the CSR entry point, whose primitives that read
//!   `X` directly (dot products, row sums, outer-product accumulation) visit non-zeros only
//!   (with finite side values a skipped zero contributes exactly 0);
//! * sparse main input otherwise: blocks of rows are densified and run through the dense entry.
//!
//! Outputs ([`RowKind`]): row-wise types write disjoint rows of one m×c output; column sums,
//! outer-product accumulations and full aggregates keep one partial per task, merged in task
//! order (task boundaries depend on the shape only, so results do not depend on the thread
//! count). All outputs are returned in the runtime's preferred format.

use crate::abi::KernelArgs;
use crate::prep::{self, densify_rows, for_tasks, partition, SharedOut};
use crate::{err, Input, LazyEntry, Result, ShapeNeed, SkeletonError};
use lafuse_runtime::kernels::aggregate::Kahan;
use lafuse_runtime::kernels::dense_result;
use lafuse_runtime::matrix::count_nnz;
use lafuse_runtime::Matrix;

/// What a Row operator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowKind {
    /// Row `i` of an m×c output per row (`no_agg*`, `row_agg`).
    RowWise,
    /// The rows' vectors summed into a 1×c output (`col_agg`, `col_agg_b1r`, `col_agg_const`).
    ColSum,
    /// Outer products `t(a_i) %*% b_i` summed into an r×c output (`col_agg_t`, `col_agg_b1`,
    /// `col_agg_b1_t`).
    Outer,
    /// The rows' values summed into 1×1 (`full_agg`), Kahan-compensated.
    FullAgg,
}

/// How the generated code reads one input position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowInput {
    /// The main input `X` (position 0), read through [`KernelArgs::main`] / `main_csr`.
    Main,
    /// m rows (any width): row `i` read as a vector.
    Rows,
    /// Row 0 read as a vector (at least one row).
    RowVector,
    /// m rows: cell `(i, 0)` read as a scalar.
    ColVector,
    /// The first cell (a scalar operand or any non-empty matrix).
    Scalar,
    /// A whole matrix `B` (l×k) of a row-times-matrix product, transposed here once to k×l so
    /// the generated dot products read contiguous rows.
    WholeT,
    /// Not read.
    Unused,
}

/// What a Row operator is, independent of sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSpec {
    /// The output class.
    pub kind: RowKind,
    /// How each input position is read.
    pub inputs: Vec<RowInput>,
}

/// The per-call sizes the generator derives (and validates) from the input shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Opaque parameters the generated code reads (vector lengths, buffer offsets, ...).
    pub params: Vec<usize>,
    /// Values of per-task scratch (row-vector buffers).
    pub scratch_len: usize,
    /// The output shape.
    pub out_rows: usize,
    /// The output shape.
    pub out_cols: usize,
    /// [`RowKind::Outer`]: the generated code accumulates the transpose (out_cols×out_rows),
    /// transposed back at the end (long, thin products are accumulated as a few long rows).
    pub flipped: bool,
}

/// Arguments of a Row entry point: the common [`KernelArgs`] first (so the generated code
/// reads its fields at the same offsets), then the Row-specific fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RowArgs {
    /// Main input, side inputs, output or partial.
    pub base: KernelArgs,
    /// [`RowLayout::params`].
    pub params: *const usize,
    /// Number of parameters.
    pub num_params: usize,
    /// This task's zeroed scratch.
    pub scratch: *mut f64,
    /// Values at `scratch`.
    pub scratch_len: usize,
}

/// A generated Row entry point: rows `[rl, ru)`; returns the non-zeros written (row-wise
/// outputs) or 0.
///
/// # Safety
/// `args` must be valid for the operator's layout; `rl <= ru <= rows`.
pub type RowKernelFn = unsafe extern "C" fn(args: *const RowArgs, rl: usize, ru: usize) -> u64;

/// The generated entry points of a Row operator.
#[derive(Clone, Copy)]
pub struct RowKernels<'a> {
    /// Rows of a dense main input, requested only by calls that run it (a dense main input,
    /// or a sparse one with a side input not known finite).
    pub dense: LazyEntry<'a, RowKernelFn>,
    /// Rows of a CSR main input, requested only when a call visits its non-zeros (every side
    /// input finite).
    pub csr: LazyEntry<'a, RowKernelFn>,
}

/// Tasks at most; aggregating kinds also cap the total partial memory.
const MAX_TASKS: usize = 64;
const PARTIAL_BUDGET: usize = 1 << 25;

#[derive(Clone, Copy)]
struct Shared(RowArgs);
// SAFETY: the pointers reference inputs borrowed for the whole call (read only) and the
// params vector; outputs and scratch are replaced per task.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// A copy (a method, so closures capture the whole `Sync` wrapper).
    fn get(&self) -> RowArgs {
        self.0
    }
}

impl prep::InputRole for RowInput {
    fn is_skipped(self) -> bool {
        matches!(self, RowInput::Main | RowInput::Unused)
    }

    fn is_scalar(self) -> bool {
        self == RowInput::Scalar
    }

    /// `n` is not constrained: a Row operator's side inputs have widths of their own.
    fn mismatch(self, r: usize, c: usize, m: usize, _n: usize) -> Option<ShapeNeed> {
        match self {
            RowInput::Rows if r != m => Some(ShapeNeed::Rows(m)),
            RowInput::ColVector if r != m || c == 0 => Some(ShapeNeed::RowsByAny(m)),
            RowInput::RowVector if r == 0 => Some(ShapeNeed::SomeRow),
            RowInput::Scalar if r * c == 0 => Some(ShapeNeed::NonEmpty),
            _ => None,
        }
    }

    fn is_transposed(self) -> bool {
        self == RowInput::WholeT
    }

    fn is_streamed(self) -> bool {
        self == RowInput::Rows
    }
}

/// Runs a Row operator. `inputs` by operator input position, the main input first; `layout`
/// from the generator for these inputs' shapes.
pub fn execute(
    spec: &RowSpec,
    kernels: &RowKernels,
    inputs: &[Input<'_>],
    layout: &RowLayout,
) -> Result<Matrix> {
    let Some(main) = inputs.first().and_then(Input::as_matrix) else {
        return err(SkeletonError::MainNotMatrix);
    };
    let (m, n) = main.shape();
    let prepared = prep::prepare(inputs, &spec.inputs, m, n)?;
    let views = prepared.views();
    let (or, oc) = (layout.out_rows, layout.out_cols);
    let out_len = match spec.kind {
        RowKind::RowWise => {
            if or != m {
                return err(SkeletonError::RowWiseRows {
                    rows: m,
                    out_rows: or,
                });
            }
            or * oc
        }
        RowKind::ColSum => {
            if or != 1 {
                return err(SkeletonError::ColAggRows);
            }
            oc
        }
        RowKind::Outer => or * oc,
        RowKind::FullAgg => {
            if (or, oc) != (1, 1) {
                return err(SkeletonError::FullAggShape);
            }
            2
        }
    };
    let args = Shared(RowArgs {
        base: prep::kernel_args(main, &views, 0, 0),
        params: layout.params.as_ptr(),
        num_params: layout.params.len(),
        scratch: std::ptr::null_mut(),
        scratch_len: 0,
    });
    let max_tasks = match spec.kind {
        RowKind::RowWise => MAX_TASKS,
        _ => (PARTIAL_BUDGET / out_len.max(1)).clamp(1, MAX_TASKS),
    };
    let tasks = partition(m, n, max_tasks);
    // Only a sparse main input needs its side inputs known finite (to skip its zeros).
    let csr_mode = matches!(main, Matrix::Sparse(_)) && prepared.all_finite(true);
    let entry = if csr_mode {
        (kernels.csr)()?
    } else {
        (kernels.dense)()?
    };
    let work = if csr_mode { main.nnz() } else { m * n.max(1) };
    let par = prep::parallel(work);
    let scratch_len = layout.scratch_len;
    let densify_main = matches!(main, Matrix::Sparse(_)) && !csr_mode;
    prepared.check_task_buffers(n, densify_main, scratch_len.max(1), tasks.len())?;
    let run = |out: &(dyn Fn(usize) -> SharedOut + Sync)| -> Vec<u64> {
        for_tasks(tasks.len(), par, |t| {
            let (rl, ru) = tasks[t];
            let mut a = args.get();
            (a.base.out, a.base.out_len) = out(t).ptr();
            let mut scratch = vec![0.0; scratch_len.max(1)];
            a.scratch = scratch.as_mut_ptr();
            a.scratch_len = scratch.len();
            prepared.for_blocks(rl, ru, n, densify_main, &mut |views, r, e| {
                let mut a = a;
                if let Some(v) = views {
                    a.base.inputs = v.as_ptr();
                }
                match main {
                    Matrix::Sparse(s) if densify_main => {
                        let (_block, view) = densify_rows(s, r, e);
                        a.base.main = view;
                        call(entry, &a, r, e)
                    }
                    _ => call(entry, &a, r, e),
                }
            })
        })
    };
    let partials = |len: usize| -> Result<Vec<Vec<f64>>> {
        let mut parts: Vec<Vec<f64>> = (0..tasks.len())
            .map(|_| prep::output(len))
            .collect::<Result<_>>()?;
        let outs: Vec<SharedOut> = parts
            .iter_mut()
            .map(|p| SharedOut(p.as_mut_ptr(), p.len()))
            .collect();
        run(&|t| outs[t]);
        Ok(parts)
    };
    Ok(match spec.kind {
        RowKind::RowWise => {
            let mut out = prep::output(out_len)?;
            let so = SharedOut(out.as_mut_ptr(), out.len());
            let nnz: u64 = run(&|_| so).into_iter().sum();
            dense_result(or, oc, out, nnz as usize)
        }
        RowKind::ColSum | RowKind::Outer => {
            let parts = partials(out_len)?;
            // Partials summed in task order (independent of the thread count).
            let mut out = prep::output(out_len)?;
            for p in &parts {
                for (o, v) in out.iter_mut().zip(p) {
                    *o += v;
                }
            }
            if spec.kind == RowKind::Outer && layout.flipped {
                let mut t = prep::output(out_len)?;
                for r in 0..or {
                    for c in 0..oc {
                        t[r * oc + c] = out[c * or + r];
                    }
                }
                out = t;
            }
            let nnz = count_nnz(&out);
            dense_result(or, oc, out, nnz)
        }
        RowKind::FullAgg => {
            let parts = partials(2)?;
            let mut k = Kahan::default();
            for p in &parts {
                k.merge(Kahan {
                    sum: p[0],
                    corr: p[1],
                });
            }
            Matrix::scalar(k.sum)
        }
    })
}

fn call(f: RowKernelFn, args: &RowArgs, rl: usize, ru: usize) -> u64 {
    // SAFETY: `args` was built from inputs validated against the operator's uses and a layout
    // the generator derived from these shapes; outputs and scratch have the layout's sizes;
    // `rl <= ru <= rows` by the partition.
    unsafe { f(args, rl, ru) }
}
