//! The PTX kernels of Cell, MultiAgg and Outer plans ([`KernelShape`] says what each writes).
//!
//! Work assignment is fixed by the grid the skeleton launches, which depends on the shapes
//! only, and every reduction has a fixed order: a thread folds its cells in its grid-stride
//! order (Kahan sums as on the CPU), a block folds its threads in a shared-memory tree, and the
//! host folds the blocks' partials in block order. So a result is the same on every run.
//!
//! * Dense main input: cells in a grid-stride walk (`NoAgg`, full aggregates), a block per row
//!   (row aggregates), a thread per column and a chunk of rows (column aggregates).
//! * CSR main input (sparse-safe plans whose zeros may be skipped) and Outer drivers: a thread
//!   per row walks its non-zeros; an Outer thread computes each `u_i · v_j` itself and owns its
//!   row of a right product, so nothing needs atomics.

use super::nvptx::{self, PTX_KERNEL_CC};
use super::ENTRY;
use crate::backend::{CodegenError, Internal, Unsupported};
use crate::native::expr::{ierr, load_inputs, load_main_csr, At, Body, Fx, InputPtrs};
use crate::native::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use crate::native::{agg_kind, input_uses, math, transposed_frame, used_mask};
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::{AddressSpace, IntPredicate};
use lafuse_compiler::fusion::cplan::{CNode, CNodeId, CPlan, OuterType, TemplateSpec};
use lafuse_compiler::fusion::template::CellType;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::gpu::abi::{GpuKernel, GpuMain, KernelShape, BLOCK_THREADS};
use lafuse_skeletons::{AggKind, InputUse};
use std::mem::offset_of;

/// Emits the kernel of `plan` for a main input read as `main` into `module`.
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    main: GpuMain,
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
            };
            emit_cell_like(ctx, module, plan, &kernel, &plan.outputs[..1])?;
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
            };
            emit_cell_like(ctx, module, plan, &kernel, &plan.outputs)?;
            Ok(kernel)
        }
        TemplateSpec::Outer { outer_type } => {
            if !csr {
                return Err(CodegenError::Internal(Internal::MalformedPlan(
                    "a GPU outer-product kernel drives from a CSR main input",
                )));
            }
            emit_outer(ctx, module, plan, *outer_type)
        }
        TemplateSpec::Row { .. } => Err(CodegenError::Unsupported(Unsupported::Construct(
            "the Row template on the GPU (not generated yet; it runs on the CPU)",
        ))),
    }
}

/// The kernel being built: the function, its argument block and the thread's coordinates.
struct Kx<'m, 'c> {
    fx: Fx<'m, 'c>,
    args: PointerValue<'c>,
    /// Thread index in the block, block index and block count (x), block index and count (y).
    tid: IntValue<'c>,
    bid: IntValue<'c>,
    nb: IntValue<'c>,
    bidy: IntValue<'c>,
    nby: IntValue<'c>,
    /// The block's shared reduction arrays (sums or extremes, and Kahan corrections), as
    /// generic pointers to their first element.
    sh_s: PointerValue<'c>,
    sh_c: PointerValue<'c>,
}

/// An aggregate's per-thread state: value slot, and correction slot for sums.
#[derive(Clone, Copy)]
struct Acc<'c> {
    agg: AggKind,
    s: PointerValue<'c>,
    c: PointerValue<'c>,
}

fn declare_kernel<'m, 'c>(ctx: &'c Context, module: &'m Module<'c>) -> Result<Kx<'m, 'c>, CodegenError> {
    let fnty = ctx.void_type().fn_type(&[llvm::i8_ptr(ctx).into()], false);
    let f = module.add_function(ENTRY, fnty, None);
    f.set_call_conventions(PTX_KERNEL_CC);
    f.add_attribute(AttributeLoc::Function, llvm::enum_attr(ctx, "nounwind"));
    let fx = Fx::new(ctx, module, f);
    let args = fx.param(0)?.into_pointer_value();
    let reg = |name: &str| -> Result<IntValue<'c>, CodegenError> {
        let v = fx
            .b
            .build_call(nvptx::sreg(ctx, module, name), &[], name)
            .map_err(ierr)?
            .try_as_basic_value();
        let inkwell::values::ValueKind::Basic(v) = v else {
            return Err(CodegenError::Internal(Internal::NoReturnValue {
                what: "special register",
            }));
        };
        let v = v.into_int_value();
        fx.b.build_int_z_extend(v, ctx.i64_type(), "r").map_err(ierr)
    };
    let (tid, bid, nb, bidy, nby) = (
        reg("tid.x")?,
        reg("ctaid.x")?,
        reg("nctaid.x")?,
        reg("ctaid.y")?,
        reg("nctaid.y")?,
    );
    let shared = |name: &str| -> Result<PointerValue<'c>, CodegenError> {
        let g = nvptx::shared_array(ctx, module, name, BLOCK_THREADS);
        let first = fx
            .b
            .build_pointer_cast(
                g.as_pointer_value(),
                ctx.f64_type().ptr_type(nvptx::shared()),
                "sh",
            )
            .map_err(ierr)?;
        fx.b
            .build_address_space_cast(first, f64_ptr(ctx), "shg")
            .map_err(ierr)
    };
    let (sh_s, sh_c) = (shared("lafuse_sh_s")?, shared("lafuse_sh_c")?);
    Ok(Kx {
        fx,
        args,
        tid,
        bid,
        nb,
        bidy,
        nby,
        sh_s,
        sh_c,
    })
}

impl<'m, 'c> Kx<'m, 'c> {
    fn field(&self, off: usize, ty: inkwell::types::PointerType<'c>) -> Result<inkwell::values::BasicValueEnum<'c>, CodegenError> {
        llvm::load_field(self.fx.ctx, &self.fx.b, self.args, off, ty)
    }

    fn i64_field(&self, off: usize) -> Result<IntValue<'c>, CodegenError> {
        let t = self.fx.ctx.i64_type().ptr_type(AddressSpace::default());
        Ok(self.field(off, t)?.into_int_value())
    }

    fn ptr_field(&self, off: usize) -> Result<PointerValue<'c>, CodegenError> {
        let t = f64_ptr(self.fx.ctx).ptr_type(AddressSpace::default());
        Ok(self.field(off, t)?.into_pointer_value())
    }

    fn threads(&self) -> IntValue<'c> {
        self.fx.i64c(u64::from(BLOCK_THREADS))
    }

    /// `for (x = lo; x < hi; x += step) body(x)` with a step known at run time only.
    fn for_stride(
        &mut self,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        step: IntValue<'c>,
        body: &mut dyn FnMut(&mut Self, IntValue<'c>) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let ctx = self.fx.ctx;
        let iv = self.fx.slot(ctx.i64_type().into())?;
        self.fx.store(iv, lo)?;
        let head = ctx.append_basic_block(self.fx.func, "head");
        let bodyb = ctx.append_basic_block(self.fx.func, "body");
        let exit = ctx.append_basic_block(self.fx.func, "exit");
        self.fx.b.build_unconditional_branch(head).map_err(ierr)?;
        self.fx.b.position_at_end(head);
        let x = self.fx.load_i64(iv)?;
        let c = self
            .fx
            .b
            .build_int_compare(IntPredicate::ULT, x, hi, "c")
            .map_err(ierr)?;
        self.fx.b.build_conditional_branch(c, bodyb, exit).map_err(ierr)?;
        self.fx.b.position_at_end(bodyb);
        body(self, x)?;
        let next = self.fx.add(x, step)?;
        self.fx.store(iv, next)?;
        self.fx.b.build_unconditional_branch(head).map_err(ierr)?;
        self.fx.b.position_at_end(exit);
        Ok(())
    }

    /// `if (cond) body()`.
    fn when(
        &mut self,
        cond: IntValue<'c>,
        body: &mut dyn FnMut(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let ctx = self.fx.ctx;
        let then = ctx.append_basic_block(self.fx.func, "then");
        let done = ctx.append_basic_block(self.fx.func, "done");
        self.fx.b.build_conditional_branch(cond, then, done).map_err(ierr)?;
        self.fx.b.position_at_end(then);
        body(self)?;
        self.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        self.fx.b.position_at_end(done);
        Ok(())
    }

    fn ult(&self, a: IntValue<'c>, b: IntValue<'c>) -> Result<IntValue<'c>, CodegenError> {
        self.fx
            .b
            .build_int_compare(IntPredicate::ULT, a, b, "lt")
            .map_err(ierr)
    }

    fn barrier(&self) -> Result<(), CodegenError> {
        let f = nvptx::barrier(self.fx.ctx, self.fx.module);
        self.fx.b.build_call(f, &[], "").map_err(ierr)?;
        Ok(())
    }

    /// Fresh accumulator slots for `agg`, at its initial value.
    fn acc(&self, agg: AggKind) -> Result<Acc<'c>, CodegenError> {
        let ty = self.fx.vty(1).into();
        let a = Acc {
            agg,
            s: self.fx.slot(ty)?,
            c: self.fx.slot(ty)?,
        };
        self.reset(a)?;
        Ok(a)
    }

    fn reset(&self, a: Acc<'c>) -> Result<(), CodegenError> {
        self.fx.store(a.s, self.fx.splat_const(init_value(a.agg), 1))?;
        self.fx.store(a.c, self.fx.splat_const(0.0, 1))
    }

    /// Folds the body's value `v` into `a` (a Kahan sum, the square's for `SumSq`, or the
    /// runtime's min/max step).
    fn fold(&self, a: Acc<'c>, v: VectorValue<'c>) -> Result<(), CodegenError> {
        let fx = &self.fx;
        match a.agg {
            AggKind::Min | AggKind::Max => {
                let cur = fx.load_v(a.s)?;
                fx.store(a.s, pick(fx, a.agg, cur, v)?)
            }
            AggKind::SumSq => fx.kahan_add(a.s, a.c, fx.fmul(v, v)?),
            AggKind::Sum => fx.kahan_add(a.s, a.c, v),
        }
    }

    /// Folds the block's accumulators `a` into thread 0's in a fixed tree over the shared
    /// arrays, then runs `finish` on thread 0 with the block's value and correction. Every
    /// thread of the block must reach this call.
    fn block_reduce(
        &mut self,
        a: Acc<'c>,
        finish: &mut dyn FnMut(&mut Self, VectorValue<'c>, VectorValue<'c>) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let (sh_s, sh_c, tid) = (self.sh_s, self.sh_c, self.tid);
        store_vec(&self.fx.b, sh_s, tid, self.fx.load_v(a.s)?)?;
        store_vec(&self.fx.b, sh_c, tid, self.fx.load_v(a.c)?)?;
        self.barrier()?;
        let mut stride = BLOCK_THREADS / 2;
        while stride >= 1 {
            let st = self.fx.i64c(u64::from(stride));
            let active = self.ult(tid, st)?;
            self.when(active, &mut |k| {
                let fx = &k.fx;
                let other = fx.add(tid, st)?;
                let (os, oc) = (
                    load_vec(&fx.b, fx.vty(1), sh_s, other)?,
                    load_vec(&fx.b, fx.vty(1), sh_c, other)?,
                );
                let (ms, mc) = (
                    load_vec(&fx.b, fx.vty(1), sh_s, tid)?,
                    load_vec(&fx.b, fx.vty(1), sh_c, tid)?,
                );
                match a.agg {
                    AggKind::Min | AggKind::Max => {
                        store_vec(&fx.b, sh_s, tid, pick(fx, a.agg, ms, os)?)?;
                    }
                    AggKind::Sum | AggKind::SumSq => {
                        // Kahan::merge: add the other sum, then its negated correction.
                        fx.store(a.s, ms)?;
                        fx.store(a.c, mc)?;
                        fx.kahan_add(a.s, a.c, os)?;
                        let neg = fx.b.build_float_neg(oc, "n").map_err(ierr)?;
                        fx.kahan_add(a.s, a.c, neg)?;
                        store_vec(&fx.b, sh_s, tid, fx.load_v(a.s)?)?;
                        store_vec(&fx.b, sh_c, tid, fx.load_v(a.c)?)?;
                    }
                }
                Ok(())
            })?;
            self.barrier()?;
            stride /= 2;
        }
        let first = self
            .fx
            .b
            .build_int_compare(IntPredicate::EQ, tid, self.fx.i64c(0), "t0")
            .map_err(ierr)?;
        self.when(first, &mut |k| {
            let s = load_vec(&k.fx.b, k.fx.vty(1), sh_s, k.fx.i64c(0))?;
            let c = load_vec(&k.fx.b, k.fx.vty(1), sh_c, k.fx.i64c(0))?;
            finish(k, s, c)
        })?;
        // The arrays are reused by the next reduction only after thread 0 has read them.
        self.barrier()
    }

    /// Writes a (value, correction) partial pair at `out[2 * slot]`.
    fn write_pair(
        &self,
        out: PointerValue<'c>,
        slot: IntValue<'c>,
        s: VectorValue<'c>,
        c: VectorValue<'c>,
    ) -> Result<(), CodegenError> {
        let fx = &self.fx;
        let at = fx.mul(slot, fx.i64c(2))?;
        store_vec(&fx.b, out, at, s)?;
        store_vec(&fx.b, out, fx.add(at, fx.i64c(1))?, c)
    }

    /// The CSR main input's non-zeros `[p0, p1)` of row `i`.
    fn csr_row(
        &self,
        rp: PointerValue<'c>,
        i: IntValue<'c>,
    ) -> Result<(IntValue<'c>, IntValue<'c>), CodegenError> {
        let fx = &self.fx;
        let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
        let p1 = load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
        Ok((p0, p1))
    }
}

fn init_value(agg: AggKind) -> f64 {
    match agg {
        AggKind::Min => f64::INFINITY,
        AggKind::Max => f64::NEG_INFINITY,
        AggKind::Sum | AggKind::SumSq => 0.0,
    }
}

/// The runtime's min/max step: NaN wins, else the strictly better value.
fn pick<'c>(
    fx: &Fx<'_, 'c>,
    agg: AggKind,
    acc: VectorValue<'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    crate::native::cell::pick(fx, agg, acc, x)
}

/// Where the main input's value at the current cell comes from.
enum MainRead<'c> {
    Dense(PointerValue<'c>),
    Csr {
        rp: PointerValue<'c>,
        ci: PointerValue<'c>,
        va: PointerValue<'c>,
    },
}

/// Cell and MultiAgg kernels: the body of each root at every cell (or non-zero), aggregated as
/// the kernel's shape says.
fn emit_cell_like<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kernel: &GpuKernel,
    roots: &[CNodeId],
) -> Result<(), CodegenError> {
    let mut k = declare_kernel(ctx, module)?;
    let used = used_mask(&kernel.uses);
    let ins = load_inputs(&k.fx, k.args, &used)?;
    let out = k.ptr_field(offset_of!(KernelArgs, out))?;
    let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
    let cols = k.i64_field(offset_of!(KernelArgs, cols))?;
    let main = match kernel.main {
        GpuMain::Dense => MainRead::Dense(k.ptr_field(
            offset_of!(KernelArgs, main) + offset_of!(DenseView, data),
        )?),
        GpuMain::Csr => {
            let (rp, ci, va) = load_main_csr(&k.fx, k.args)?;
            MainRead::Csr { rp, ci, va }
        }
    };
    let aggs: Vec<AggKind> = match &kernel.shape {
        KernelShape::FullAgg { aggs } => aggs.clone(),
        KernelShape::RowAgg { agg } | KernelShape::ColAgg { agg } => vec![*agg],
        _ => vec![],
    };
    let accs: Vec<Acc<'c>> = aggs.iter().map(|&a| k.acc(a)).collect::<Result<_, _>>()?;
    let tr = kernel.transposed;
    // The roots' values at one cell (`p`: the non-zero's position, CSR), folded or written.
    let visit = |k: &mut Kx<'_, 'c>,
                 at: At<'c>,
                 flat_idx: IntValue<'c>|
     -> Result<(), CodegenError> {
        let mut body = Body::new(plan, &ins, at);
        for (r, &root) in roots.iter().enumerate() {
            let v = body.emit(&k.fx, root, tr)?;
            match accs.get(r) {
                Some(&a) => k.fold(a, v)?,
                None => store_vec(&k.fx.b, out, flat_idx, v)?,
            }
        }
        Ok(())
    };
    let threads = k.threads();
    let gtid = k.fx.add(k.fx.mul(k.bid, threads)?, k.tid)?;
    let gstride = k.fx.mul(k.nb, threads)?;
    match (&kernel.shape, &main) {
        (KernelShape::NoAgg | KernelShape::FullAgg { .. }, MainRead::Dense(mp)) => {
            let total = k.fx.mul(rows, cols)?;
            let flat = runs_flat(plan);
            k.for_stride(gtid, total, gstride, &mut |k, idx| {
                let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                let (i, j) = if flat {
                    (k.fx.i64c(0), idx)
                } else {
                    let i = k.fx.b.build_int_unsigned_div(idx, cols, "i").map_err(ierr)?;
                    (i, k.fx.sub(idx, k.fx.mul(i, cols)?)?)
                };
                visit(k, At { i, j, w: 1, main: m }, idx)
            })?;
        }
        (KernelShape::RowAgg { .. }, MainRead::Dense(mp)) => {
            let a = accs[0];
            let (bid, nb, tid) = (k.bid, k.nb, k.tid);
            k.for_stride(bid, rows, nb, &mut |k, i| {
                k.reset(a)?;
                let base = k.fx.mul(i, cols)?;
                k.for_stride(tid, cols, threads, &mut |k, j| {
                    let idx = k.fx.add(base, j)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                    visit(k, At { i, j, w: 1, main: m }, idx)
                })?;
                k.block_reduce(a, &mut |k, s, _| store_vec(&k.fx.b, out, i, s))
            })?;
        }
        (KernelShape::ColAgg { .. }, MainRead::Dense(mp)) => {
            let a = accs[0];
            let (bidy, nby) = (k.bidy, k.nby);
            let fx = &k.fx;
            // Rows per chunk: ceil(rows / chunks).
            let per = fx
                .b
                .build_int_unsigned_div(fx.sub(fx.add(rows, nby)?, fx.i64c(1))?, nby, "per")
                .map_err(ierr)?;
            let lo = fx.mul(bidy, per)?;
            let hi_raw = fx.add(lo, per)?;
            let over = fx
                .b
                .build_int_compare(IntPredicate::UGT, hi_raw, rows, "over")
                .map_err(ierr)?;
            let hi = fx
                .b
                .build_select(over, rows, hi_raw, "hi")
                .map_err(ierr)?
                .into_int_value();
            let j = gtid;
            let inside = k.ult(j, cols)?;
            k.when(inside, &mut |k| {
                k.for_stride(lo, hi, k.fx.i64c(1), &mut |k, i| {
                    let idx = k.fx.add(k.fx.mul(i, cols)?, j)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                    visit(k, At { i, j, w: 1, main: m }, idx)
                })?;
                let slot = k.fx.add(k.fx.mul(bidy, cols)?, j)?;
                k.write_pair(out, slot, k.fx.load_v(a.s)?, k.fx.load_v(a.c)?)
            })?;
        }
        (
            KernelShape::OuterCellWise | KernelShape::OuterFullAgg | KernelShape::OuterRight,
            _,
        ) => {
            return Err(CodegenError::Internal(Internal::MalformedPlan(
                "an outer-product shape for a cell-wise plan",
            )))
        }
        (shape, MainRead::Csr { rp, ci, va }) => {
            let row_agg = matches!(shape, KernelShape::RowAgg { .. });
            let (rp, ci, va) = (*rp, *ci, *va);
            k.for_stride(gtid, rows, gstride, &mut |k, i| {
                if row_agg {
                    k.reset(accs[0])?;
                }
                let (p0, p1) = k.csr_row(rp, i)?;
                k.for_stride(p0, p1, k.fx.i64c(1), &mut |k, p| {
                    let j = k.fx.load_index(ci, p)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), va, p)?;
                    visit(k, At { i, j, w: 1, main: m }, p)
                })?;
                if row_agg {
                    store_vec(&k.fx.b, out, i, k.fx.load_v(accs[0].s)?)?;
                }
                Ok(())
            })?;
        }
    }
    if let KernelShape::FullAgg { .. } = kernel.shape {
        let (bid, nb) = (k.bid, k.nb);
        for (r, &a) in accs.iter().enumerate() {
            k.block_reduce(a, &mut |k, s, c| {
                let slot = k.fx.add(k.fx.mul(k.fx.i64c(r as u64), nb)?, bid)?;
                k.write_pair(out, slot, s, c)
            })?;
        }
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(())
}

/// Whether every input is read at the current cell of a same-shaped matrix (or is a scalar),
/// so a dense walk needs no row and column indexes: the flat index serves as both.
fn runs_flat(plan: &CPlan) -> bool {
    use lafuse_compiler::fusion::cplan::{Access, InputKind};
    plan.nodes.iter().all(|n| match n {
        CNode::Data { input, access } => {
            plan.inputs.get(*input) == Some(&InputKind::Scalar)
                || matches!(access, Access::Main | Access::Aligned | Access::Scalar)
        }
        CNode::Transpose { .. } => false,
        _ => true,
    })
}

/// Outer kernels over a CSR driver: a thread per row, the dot products `u_i · v_j` computed
/// per non-zero in order over `k`.
fn emit_outer<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    outer_type: OuterType,
) -> Result<GpuKernel, CodegenError> {
    let out_node = plan.outputs[0];
    let (shape, g, w) = match (outer_type, &plan.nodes[out_node]) {
        (OuterType::CellWise, _) => (KernelShape::OuterCellWise, out_node, None),
        (OuterType::FullAgg, _) => (KernelShape::OuterFullAgg, out_node, None),
        (OuterType::Right, CNode::FinalProduct { g, w }) => {
            let CNode::Data { input, .. } = plan.nodes[*w] else {
                return Err(CodegenError::Unsupported(Unsupported::Construct(
                    "final product operand is not an input",
                )));
            };
            (KernelShape::OuterRight, *g, Some(input))
        }
        (OuterType::Left | OuterType::LeftT, _) => {
            return Err(CodegenError::Unsupported(Unsupported::Construct(
                "a left outer product on the GPU (its rows scatter over the output; it runs on \
                 the CPU)",
            )))
        }
        _ => {
            return Err(CodegenError::Unsupported(Unsupported::Construct(
                "outer type does not match its output node",
            )))
        }
    };
    if transposed_frame(plan, &[g])? {
        return Err(CodegenError::Unsupported(Unsupported::Construct(
            "an outer product over a transposed driver on the GPU",
        )));
    }
    let mut uses = input_uses(plan, &[g], false)?;
    if let Some(wk) = w {
        match uses[wk] {
            InputUse::Unused => uses[wk] = InputUse::FinalW,
            InputUse::OuterV => {}
            _ => {
                return Err(CodegenError::Unsupported(Unsupported::Construct(
                    "final-product matrix also read in the body other than as V of a right \
                     product",
                )))
            }
        }
    }
    let find = |f: &dyn Fn(InputUse) -> bool| uses.iter().position(|&x| f(x));
    let (Some(ui), Some(vi)) = (
        find(&|x| x == InputUse::OuterU),
        find(&|x| matches!(x, InputUse::OuterV | InputUse::OuterVT)),
    ) else {
        return Err(CodegenError::Unsupported(Unsupported::Construct(
            "outer operator without u_i · v_j",
        )));
    };
    let kernel = GpuKernel {
        shape,
        main: GpuMain::Csr,
        uses,
        transposed: false,
    };
    let mut k = declare_kernel(ctx, module)?;
    let used = used_mask(&kernel.uses);
    let ins: InputPtrs<'c> = load_inputs(&k.fx, k.args, &used)?;
    let out = k.ptr_field(offset_of!(KernelArgs, out))?;
    let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
    let kk = k.i64_field(offset_of!(KernelArgs, k))?;
    let k2 = k.i64_field(offset_of!(KernelArgs, k2))?;
    let (rp, ci, va) = load_main_csr(&k.fx, k.args)?;
    let (up, _) = ins.get(ui)?;
    let (vp, _) = ins.get(vi)?;
    let wp = match w {
        Some(wk) => Some(ins.get(wk)?.0),
        None => None,
    };
    let acc = k.acc(AggKind::Sum)?;
    let dot = k.fx.slot(k.fx.vty(1).into())?;
    let threads = k.threads();
    let gtid = k.fx.add(k.fx.mul(k.bid, threads)?, k.tid)?;
    let gstride = k.fx.mul(k.nb, threads)?;
    let shape = kernel.shape.clone();
    k.for_stride(gtid, rows, gstride, &mut |k, i| {
        let (p0, p1) = k.csr_row(rp, i)?;
        let ub = k.fx.mul(i, kk)?;
        k.for_stride(p0, p1, k.fx.i64c(1), &mut |k, p| {
            let j = k.fx.load_index(ci, p)?;
            let vb = k.fx.mul(j, kk)?;
            k.fx.store(dot, k.fx.splat_const(0.0, 1))?;
            k.for_stride(k.fx.i64c(0), kk, k.fx.i64c(1), &mut |k, t| {
                let fx = &k.fx;
                let u = load_vec(&fx.b, fx.vty(1), up, fx.add(ub, t)?)?;
                let v = load_vec(&fx.b, fx.vty(1), vp, fx.add(vb, t)?)?;
                fx.store(dot, fx.fma(u, v, fx.load_v(dot)?)?)
            })?;
            let m = load_vec(&k.fx.b, k.fx.vty(1), va, p)?;
            let mut body = Body::new(plan, &ins, At { i, j, w: 1, main: m });
            body.outer_dot = Some(k.fx.load_v(dot)?);
            let gv = body.emit(&k.fx, g, false)?;
            match (&shape, wp) {
                (KernelShape::OuterCellWise, _) => store_vec(&k.fx.b, out, p, gv),
                (KernelShape::OuterFullAgg, _) => k.fold(acc, gv),
                (KernelShape::OuterRight, Some(wp)) => {
                    let ob = k.fx.mul(i, k2)?;
                    let wb = k.fx.mul(j, k2)?;
                    k.for_stride(k.fx.i64c(0), k2, k.fx.i64c(1), &mut |k, c| {
                        let fx = &k.fx;
                        let o = fx.add(ob, c)?;
                        let cur = load_vec(&fx.b, fx.vty(1), out, o)?;
                        let wv = load_vec(&fx.b, fx.vty(1), wp, fx.add(wb, c)?)?;
                        store_vec(&fx.b, out, o, fx.fma(gv, wv, cur)?)
                    })
                }
                _ => Err(CodegenError::Internal(Internal::MalformedPlan(
                    "a right outer product without its matrix",
                ))),
            }
        })
    })?;
    if kernel.shape == KernelShape::OuterFullAgg {
        let bid = k.bid;
        k.block_reduce(acc, &mut |k, s, c| k.write_pair(out, bid, s, c))?;
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(kernel)
}
