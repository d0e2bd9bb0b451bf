//! Which kernel a plan gets: Cell and MultiAgg plans the cell-wise kernels ([`super::cell`]),
//! Outer plans the CSR-driven ones ([`super::outer`]), Row plans the warp-per-row kernel
//! ([`super::row`]); modules whose output is summed over rows also get the fold kernel
//! ([`super::fold`]). [`KernelShape`] says what each writes.
//!
//! Work assignment is fixed by the grid the skeleton launches, which depends on the shapes
//! only, and every reduction has a fixed order: a thread folds its cells in its own order
//! (Kahan sums as on the CPU), a warp or block folds its threads in a fixed tree, and partials
//! are folded in block order. No kernel uses atomics. So a result is the same on every run.

use super::row::RowKernelOptions;
use super::{cell, outer, outer_dense, row};
use crate::backend::{CodegenError, Internal};
use crate::native::{agg_kind, input_uses, math, transposed_frame};
use inkwell::context::Context;
use inkwell::module::Module;
use lafuse_compiler::fusion::cplan::{CPlan, TemplateSpec};
use lafuse_compiler::fusion::template::CellType;
use lafuse_skeletons::gpu::abi::{GpuKernel, GpuMain, KernelShape};

/// Emits the kernel of `plan` for a main input read as `main` into `module`.
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    main: GpuMain,
    row_options: RowKernelOptions,
) -> Result<GpuKernel, CodegenError> {
    math::define_one_lane(ctx, module)?;
    let csr = main == GpuMain::Csr;
    match &plan.template {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        } => {
            let transposed = transposed_frame(plan, &plan.outputs[..1])?;
            let agg = agg.map(agg_kind);
            let shape = match (cell_type, transposed, agg) {
                (CellType::NoAgg, _, None) => KernelShape::NoAgg,
                (CellType::FullAgg, _, Some(a)) => KernelShape::FullAgg { aggs: vec![a] },
                (CellType::RowAgg, false, Some(agg)) | (CellType::ColAgg, true, Some(agg)) => {
                    KernelShape::RowAgg { agg }
                }
                (CellType::ColAgg, false, Some(agg)) | (CellType::RowAgg, true, Some(agg)) => {
                    KernelShape::ColAgg { agg }
                }
                _ => {
                    return Err(CodegenError::Internal(Internal::MalformedPlan(
                        "a Cell plan whose aggregation does not match its type",
                    )))
                }
            };
            if csr && (!sparse_safe || matches!(shape, KernelShape::ColAgg { .. })) {
                return Err(CodegenError::Internal(Internal::SparseUnsafeCsr {
                    template: "cell",
                }));
            }
            let uses = input_uses(plan, &plan.outputs[..1], transposed)?;
            let kernel = GpuKernel {
                shape,
                main,
                uses,
                transposed,
                narrow: None,
            };
            cell::emit_cell_like(ctx, module, plan, &kernel, &plan.outputs[..1])?;
            if let KernelShape::ColAgg { agg } = kernel.shape {
                super::fold::emit_fold_columns(ctx, module, agg)?;
            }
            Ok(kernel)
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            if aggs.len() != plan.outputs.len() {
                return Err(CodegenError::Internal(Internal::MalformedPlan(
                    "one aggregate per output expected",
                )));
            }
            if csr && !sparse_safe {
                return Err(CodegenError::Internal(Internal::SparseUnsafeCsr {
                    template: "MultiAgg",
                }));
            }
            let transposed = transposed_frame(plan, &plan.outputs)?;
            let kernel = GpuKernel {
                shape: KernelShape::FullAgg {
                    aggs: aggs.iter().map(|&a| agg_kind(a)).collect(),
                },
                main,
                uses: input_uses(plan, &plan.outputs, transposed)?,
                transposed,
                narrow: None,
            };
            cell::emit_cell_like(ctx, module, plan, &kernel, &plan.outputs)?;
            Ok(kernel)
        }
        TemplateSpec::Outer { outer_type } if csr => {
            outer::emit_outer(ctx, module, plan, *outer_type)
        }
        TemplateSpec::Outer { outer_type } => outer_dense::emit(ctx, module, plan, *outer_type),
        TemplateSpec::Row { row_type, .. } => {
            if csr {
                return Err(CodegenError::Internal(Internal::MalformedPlan(
                    "a GPU row kernel reads a dense main input",
                )));
            }
            row::emit(ctx, module, plan, *row_type, row_options)
        }
    }
}
