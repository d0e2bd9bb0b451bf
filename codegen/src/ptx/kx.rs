//! The kernel builder every PTX kernel is written with: the kernel's declaration and thread
//! coordinates, grid-stride and unrolled loops, aggregate accumulators (Kahan sums, the
//! runtime's min/max), the block's shared-memory tree, and partial pairs.

use super::nvptx::{self, PTX_KERNEL_CC};
use super::ENTRY;
use crate::backend::{CodegenError, Internal};
use crate::native::expr::{ierr, Fx};
use crate::native::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::{AddressSpace, IntPredicate};
use lafuse_skeletons::gpu::abi::BLOCK_THREADS;
use lafuse_skeletons::AggKind;

/// The kernel being built: the function, its argument block and the thread's coordinates.
pub(super) struct Kx<'m, 'c> {
    pub(super) fx: Fx<'m, 'c>,
    pub(super) args: PointerValue<'c>,
    /// Thread index in the block, block index and block count (x), block index and count (y).
    pub(super) tid: IntValue<'c>,
    pub(super) bid: IntValue<'c>,
    pub(super) nb: IntValue<'c>,
    pub(super) bidy: IntValue<'c>,
    pub(super) nby: IntValue<'c>,
    /// The block's shared reduction arrays (sums or extremes, and Kahan corrections), as
    /// generic pointers to their first element.
    pub(super) sh_s: PointerValue<'c>,
    pub(super) sh_c: PointerValue<'c>,
}

/// An aggregate's per-thread state: value slot, and correction slot for sums.
#[derive(Clone, Copy)]
pub(super) struct Acc<'c> {
    pub(super) agg: AggKind,
    pub(super) s: PointerValue<'c>,
    pub(super) c: PointerValue<'c>,
    /// Sums are Kahan sums (the correction slot is kept); a plain accumulator's correction
    /// stays 0 and is neither updated nor exchanged.
    pub(super) kahan: bool,
}

pub(super) fn declare_kernel<'m, 'c>(
    ctx: &'c Context,
    module: &'m Module<'c>,
) -> Result<Kx<'m, 'c>, CodegenError> {
    declare_named(ctx, module, ENTRY)
}

pub(super) fn declare_named<'m, 'c>(
    ctx: &'c Context,
    module: &'m Module<'c>,
    name: &str,
) -> Result<Kx<'m, 'c>, CodegenError> {
    let fnty = ctx.void_type().fn_type(&[llvm::i8_ptr(ctx).into()], false);
    let f = module.add_function(name, fnty, None);
    f.set_call_conventions(PTX_KERNEL_CC);
    f.add_attribute(AttributeLoc::Function, llvm::enum_attr(ctx, "nounwind"));
    let fx = Fx::new(ctx, module, f);
    let args = fx.param(0)?.into_pointer_value();
    let reg = |name: &str| -> Result<IntValue<'c>, CodegenError> {
        let v =
            fx.b.build_call(nvptx::sreg(ctx, module, name), &[], name)
                .map_err(ierr)?
                .try_as_basic_value();
        let inkwell::values::ValueKind::Basic(v) = v else {
            return Err(CodegenError::Internal(Internal::NoReturnValue {
                what: "special register",
            }));
        };
        let v = v.into_int_value();
        fx.b.build_int_z_extend(v, ctx.i64_type(), "r")
            .map_err(ierr)
    };
    let (tid, bid, nb, bidy, nby) = (
        reg("tid.x")?,
        reg("ctaid.x")?,
        reg("nctaid.x")?,
        reg("ctaid.y")?,
        reg("nctaid.y")?,
    );
    let shared = |name: &str| shared_array(&fx, name, BLOCK_THREADS);
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

/// A block-shared array of `len` doubles, as a generic pointer to its first element.
fn shared_array<'c>(
    fx: &Fx<'_, 'c>,
    name: &str,
    len: u32,
) -> Result<PointerValue<'c>, CodegenError> {
    let ctx = fx.ctx;
    let g = nvptx::shared_array(ctx, fx.module, name, len);
    let first =
        fx.b.build_pointer_cast(
            g.as_pointer_value(),
            ctx.f64_type().ptr_type(nvptx::shared()),
            "sh",
        )
        .map_err(ierr)?;
    fx.b.build_address_space_cast(first, f64_ptr(ctx), "shg")
        .map_err(ierr)
}

impl<'m, 'c> Kx<'m, 'c> {
    /// Another block-shared array of `len` doubles.
    pub(super) fn shared(&self, name: &str, len: u32) -> Result<PointerValue<'c>, CodegenError> {
        shared_array(&self.fx, name, len)
    }

    pub(super) fn field(
        &self,
        off: usize,
        ty: inkwell::types::PointerType<'c>,
    ) -> Result<inkwell::values::BasicValueEnum<'c>, CodegenError> {
        llvm::load_field(self.fx.ctx, &self.fx.b, self.args, off, ty)
    }

    pub(super) fn i64_field(&self, off: usize) -> Result<IntValue<'c>, CodegenError> {
        let t = self.fx.ctx.i64_type().ptr_type(AddressSpace::default());
        Ok(self.field(off, t)?.into_int_value())
    }

    pub(super) fn ptr_field(&self, off: usize) -> Result<PointerValue<'c>, CodegenError> {
        let t = f64_ptr(self.fx.ctx).ptr_type(AddressSpace::default());
        Ok(self.field(off, t)?.into_pointer_value())
    }

    pub(super) fn threads(&self) -> IntValue<'c> {
        self.fx.i64c(u64::from(BLOCK_THREADS))
    }

    /// `for (x = lo; x < hi; x += step) body(x)` with a step known at run time only.
    pub(super) fn for_stride(
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
        self.fx
            .b
            .build_conditional_branch(c, bodyb, exit)
            .map_err(ierr)?;
        self.fx.b.position_at_end(bodyb);
        body(self, x)?;
        let next = self.fx.add(x, step)?;
        self.fx.store(iv, next)?;
        self.fx.b.build_unconditional_branch(head).map_err(ierr)?;
        self.fx.b.position_at_end(exit);
        Ok(())
    }

    /// Chunk `c` of `chunks` of `0..count`: `[c * ceil(count / chunks), ...)`, clipped to
    /// `count` (empty for chunks past the end).
    pub(super) fn chunk(
        &self,
        count: IntValue<'c>,
        c: IntValue<'c>,
        chunks: IntValue<'c>,
    ) -> Result<(IntValue<'c>, IntValue<'c>), CodegenError> {
        let fx = &self.fx;
        let per =
            fx.b.build_int_unsigned_div(fx.sub(fx.add(count, chunks)?, fx.i64c(1))?, chunks, "per")
                .map_err(ierr)?;
        let lo = fx.mul(c, per)?;
        let hi_raw = fx.add(lo, per)?;
        let over =
            fx.b.build_int_compare(IntPredicate::UGT, hi_raw, count, "over")
                .map_err(ierr)?;
        let hi =
            fx.b.build_select(over, count, hi_raw, "hi")
                .map_err(ierr)?
                .into_int_value();
        Ok((lo, hi))
    }

    /// `if (cond) body()`.
    pub(super) fn when(
        &mut self,
        cond: IntValue<'c>,
        body: &mut dyn FnMut(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let ctx = self.fx.ctx;
        let then = ctx.append_basic_block(self.fx.func, "then");
        let done = ctx.append_basic_block(self.fx.func, "done");
        self.fx
            .b
            .build_conditional_branch(cond, then, done)
            .map_err(ierr)?;
        self.fx.b.position_at_end(then);
        body(self)?;
        self.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        self.fx.b.position_at_end(done);
        Ok(())
    }

    pub(super) fn ult(
        &self,
        a: IntValue<'c>,
        b: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        self.fx
            .b
            .build_int_compare(IntPredicate::ULT, a, b, "lt")
            .map_err(ierr)
    }

    /// `x` where `inside`, else `last` (an index whose loads stay in bounds).
    pub(super) fn clamp(
        &self,
        x: IntValue<'c>,
        inside: IntValue<'c>,
        last: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        Ok(self
            .fx
            .b
            .build_select(inside, x, last, "clamped")
            .map_err(ierr)?
            .into_int_value())
    }

    pub(super) fn barrier(&self) -> Result<(), CodegenError> {
        let f = nvptx::barrier(self.fx.ctx, self.fx.module);
        self.fx.b.build_call(f, &[], "").map_err(ierr)?;
        Ok(())
    }

    /// Fresh accumulator slots for `agg`, at its initial value.
    pub(super) fn acc(&self, agg: AggKind) -> Result<Acc<'c>, CodegenError> {
        self.new_acc(agg, true)
    }

    /// [`acc`](Self::acc) whose sums are plain, in the fold's order: a Row operator's row
    /// aggregates, which the CPU's Row operator sums without compensation too.
    pub(super) fn plain_acc(&self, agg: AggKind) -> Result<Acc<'c>, CodegenError> {
        self.new_acc(agg, false)
    }

    fn new_acc(&self, agg: AggKind, kahan: bool) -> Result<Acc<'c>, CodegenError> {
        let ty = self.fx.vty(1).into();
        let a = Acc {
            agg,
            s: self.fx.slot(ty)?,
            c: self.fx.slot(ty)?,
            kahan,
        };
        self.reset(a)?;
        Ok(a)
    }

    /// A read-only view of the device array at generic pointer `p` in the global address
    /// space, read through [`load_ro`](Self::load_ro).
    pub(super) fn global_ro(&self, p: PointerValue<'c>) -> Result<PointerValue<'c>, CodegenError> {
        let ty = self.fx.ctx.f64_type().ptr_type(AddressSpace::from(1u16));
        self.fx
            .b
            .build_address_space_cast(p, ty, "global")
            .map_err(ierr)
    }

    /// Element `idx` of `base` (a [`global_ro`](Self::global_ro) view) as a one-lane vector,
    /// loaded as invariant: the kernel never writes its inputs, so the load may take the
    /// non-coherent read-only path (`ld.global.nc`).
    pub(super) fn load_ro(
        &self,
        base: PointerValue<'c>,
        idx: IntValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let b = &self.fx.b;
        let p = gep(b, base, idx)?;
        let v = load(b, p)?;
        let inst = inkwell::values::BasicValue::as_instruction_value(&v)
            .ok_or_else(|| ierr("a load is an instruction"))?;
        inst.set_alignment(8).map_err(ierr)?;
        let ctx = self.fx.ctx;
        let invariant = ctx.get_kind_id("invariant.load");
        inst.set_metadata(ctx.metadata_node(&[]), invariant)
            .map_err(ierr)?;
        self.fx.splat(v.into_float_value(), 1)
    }

    pub(super) fn reset(&self, a: Acc<'c>) -> Result<(), CodegenError> {
        self.fx
            .store(a.s, self.fx.splat_const(init_value(a.agg), 1))?;
        self.fx.store(a.c, self.fx.splat_const(0.0, 1))
    }

    /// Folds the body's value `v` into `a` (a Kahan sum, the square's for `SumSq`, or the
    /// runtime's min/max step).
    pub(super) fn fold(&self, a: Acc<'c>, v: VectorValue<'c>) -> Result<(), CodegenError> {
        let fx = &self.fx;
        match a.agg {
            AggKind::Min | AggKind::Max => {
                let cur = fx.load_v(a.s)?;
                fx.store(a.s, pick(fx, a.agg, cur, v)?)
            }
            AggKind::SumSq | AggKind::Sum => {
                let x = match a.agg {
                    AggKind::SumSq => fx.fmul(v, v)?,
                    _ => v,
                };
                if a.kahan {
                    fx.kahan_add(a.s, a.c, x)
                } else {
                    fx.store(a.s, fx.fadd(fx.load_v(a.s)?, x)?)
                }
            }
        }
    }

    /// [`fold`](Self::fold) where `inside` holds (`None`: always); elsewhere `a` keeps its
    /// state, bit for bit.
    pub(super) fn fold_masked(
        &self,
        a: Acc<'c>,
        v: VectorValue<'c>,
        inside: Option<IntValue<'c>>,
    ) -> Result<(), CodegenError> {
        let Some(inside) = inside else {
            return self.fold(a, v);
        };
        let fx = &self.fx;
        let (s0, c0) = (fx.load_v(a.s)?, fx.load_v(a.c)?);
        self.fold(a, v)?;
        let keep = |p: PointerValue<'c>, old: VectorValue<'c>| -> Result<(), CodegenError> {
            let new = fx.load_v(p)?;
            let v =
                fx.b.build_select(inside, new, old, "masked")
                    .map_err(ierr)?
                    .into_vector_value();
            fx.store(p, v)
        };
        keep(a.s, s0)?;
        if a.kahan {
            keep(a.c, c0)?;
        }
        Ok(())
    }

    /// Folds accumulator `b` into `a` (same aggregate): `Kahan::merge` (the other sum, then
    /// its negated correction), the other sum where `a` is plain, or the min/max step.
    pub(super) fn merge(&self, a: Acc<'c>, b: Acc<'c>) -> Result<(), CodegenError> {
        let fx = &self.fx;
        let (s, c) = (fx.load_v(b.s)?, fx.load_v(b.c)?);
        match a.agg {
            AggKind::Min | AggKind::Max => {
                let cur = fx.load_v(a.s)?;
                fx.store(a.s, pick(fx, a.agg, cur, s)?)
            }
            AggKind::Sum | AggKind::SumSq if !a.kahan => {
                fx.store(a.s, fx.fadd(fx.load_v(a.s)?, s)?)
            }
            AggKind::Sum | AggKind::SumSq => {
                fx.kahan_add(a.s, a.c, s)?;
                let neg = fx.b.build_float_neg(c, "n").map_err(ierr)?;
                fx.kahan_add(a.s, a.c, neg)
            }
        }
    }

    /// Folds the block's accumulators `a` into thread 0's in a fixed tree over the shared
    /// arrays, then runs `finish` on thread 0 with the block's value and correction. Every
    /// thread of the block must reach this call.
    pub(super) fn block_reduce(
        &mut self,
        a: Acc<'c>,
        finish: &mut dyn FnMut(
            &mut Self,
            VectorValue<'c>,
            VectorValue<'c>,
        ) -> Result<(), CodegenError>,
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
    pub(super) fn write_pair(
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
    pub(super) fn csr_row(
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

/// The runtime's min/max step (NaN wins, else the strictly better value) and the aggregates'
/// initial values, as the native emitters have them.
pub(super) use crate::native::cell::{init_value, pick};

/// What an [`unrolled`] loop evaluates at one iteration: the values its fold takes.
pub(super) type Eval<'f, 'c> =
    dyn FnMut(&mut Kx<'_, 'c>, IntValue<'c>) -> Result<Vec<VectorValue<'c>>, CodegenError> + 'f;
/// How an [`unrolled`] loop folds one iteration's values.
pub(super) type Consume<'f, 'c> =
    dyn FnMut(&mut Kx<'_, 'c>, Vec<VectorValue<'c>>) -> Result<(), CodegenError> + 'f;

/// Iterations an [`unrolled`] loop evaluates before it folds: that many loads in flight per
/// thread instead of one (a GPU thread issues in order, so a fold waiting on its load would
/// hold back the next iteration's).
const UNROLL: u64 = 8;

/// `for (j = start; j < n; j += stride)`, unrolled: `eval` gives the values at `j` (its loads),
/// `consume` folds them; in the unrolled part the evaluations of `UNROLL` iterations come
/// first, then their folds in order, so the result is the plain loop's.
pub(super) fn unrolled<'c>(
    k: &mut Kx<'_, 'c>,
    start: IntValue<'c>,
    n: IntValue<'c>,
    stride: u64,
    eval: &mut Eval<'_, 'c>,
    consume: &mut Consume<'_, 'c>,
) -> Result<(), CodegenError> {
    let limit = step_limit(k, n, stride * (UNROLL - 1))?;
    let iv = k.fx.slot(k.fx.ctx.i64_type().into())?;
    k.fx.store(iv, start)?;
    let mut each = |k: &mut Kx<'_, 'c>, _: u64, vs: Vec<VectorValue<'c>>| consume(k, vs);
    steps(k, iv, limit, stride, UNROLL, eval, &mut each)?;
    steps(k, iv, n, stride, 1, eval, &mut each)
}

/// The first index from which a step of positions `span` apart would pass `n`: `n - span`
/// where `n > span`, else 0 (no step fits), without underflow.
fn step_limit<'c>(
    k: &Kx<'_, 'c>,
    n: IntValue<'c>,
    span: u64,
) -> Result<IntValue<'c>, CodegenError> {
    let big =
        k.fx.b
            .build_int_compare(IntPredicate::UGT, n, k.fx.i64c(span), "big")
            .map_err(ierr)?;
    Ok(k.fx
        .b
        .build_select(big, k.fx.sub(n, k.fx.i64c(span))?, k.fx.i64c(0), "lim")
        .map_err(ierr)?
        .into_int_value())
}

/// How [`steps`] folds one position's values, given its number in the step.
type ConsumeStep<'f, 'c> =
    dyn FnMut(&mut Kx<'_, 'c>, u64, Vec<VectorValue<'c>>) -> Result<(), CodegenError> + 'f;

/// `while (j < hi) { the evaluations at j, j + stride, ... (unroll of them); their folds in
/// order; j += unroll * stride }` with `j` in the slot `iv`, which keeps the next index.
#[allow(clippy::too_many_arguments)]
fn steps<'c>(
    k: &mut Kx<'_, 'c>,
    iv: PointerValue<'c>,
    hi: IntValue<'c>,
    stride: u64,
    unroll: u64,
    eval: &mut Eval<'_, 'c>,
    consume: &mut ConsumeStep<'_, 'c>,
) -> Result<(), CodegenError> {
    let ctx = k.fx.ctx;
    let head = ctx.append_basic_block(k.fx.func, "lhead");
    let body = ctx.append_basic_block(k.fx.func, "lbody");
    let exit = ctx.append_basic_block(k.fx.func, "lexit");
    k.fx.b.build_unconditional_branch(head).map_err(ierr)?;
    k.fx.b.position_at_end(head);
    let j = k.fx.load_i64(iv)?;
    let c = k.ult(j, hi)?;
    k.fx.b
        .build_conditional_branch(c, body, exit)
        .map_err(ierr)?;
    k.fx.b.position_at_end(body);
    let mut all = Vec::new();
    for u in 0..unroll {
        let ju = k.fx.add(j, k.fx.i64c(stride * u))?;
        all.push(eval(k, ju)?);
    }
    for (u, vs) in all.into_iter().enumerate() {
        consume(k, u as u64, vs)?;
    }
    k.fx.store(iv, k.fx.add(j, k.fx.i64c(stride * unroll))?)?;
    k.fx.b.build_unconditional_branch(head).map_err(ierr)?;
    k.fx.b.position_at_end(exit);
    Ok(())
}

/// How an [`unrolled_masked`] loop folds one position's values: its number in the step, and
/// for the last, partial step whether it lies inside the range (`None`: it does).
pub(super) type ConsumeAt<'f, 'c> = dyn FnMut(
        &mut Kx<'_, 'c>,
        u64,
        Vec<VectorValue<'c>>,
        Option<IntValue<'c>>,
    ) -> Result<(), CodegenError>
    + 'f;

/// `for (j = start; j < n; j += stride)` in steps of `unroll` positions whose evaluations come
/// first (their loads in flight together), like [`unrolled`]; but the last, partial step is one
/// step too: every position is evaluated at an index clamped into the range (so its loads are
/// in bounds) and handed to `consume` with whether it is inside, for a masked fold. A row of
/// 2000 columns read by a warp is then 8 steps of one memory latency each, where a remainder
/// walked one position at a time would add 7 more.
pub(super) fn unrolled_masked<'c>(
    k: &mut Kx<'_, 'c>,
    start: IntValue<'c>,
    n: IntValue<'c>,
    stride: u64,
    unroll: u64,
    eval: &mut Eval<'_, 'c>,
    consume: &mut ConsumeAt<'_, 'c>,
) -> Result<(), CodegenError> {
    let limit = step_limit(k, n, stride * (unroll - 1))?;
    let iv = k.fx.slot(k.fx.ctx.i64_type().into())?;
    k.fx.store(iv, start)?;
    steps(k, iv, limit, stride, unroll, eval, &mut |k, u, vs| {
        consume(k, u, vs, None)
    })?;
    // The partial step: j >= n - span, so every position left lies in it.
    let j = k.fx.load_i64(iv)?;
    let any = k.ult(j, n)?;
    k.when(any, &mut |k| {
        let last = k.fx.sub(n, k.fx.i64c(1))?;
        let mut all = Vec::new();
        for u in 0..unroll {
            let ju = k.fx.add(j, k.fx.i64c(stride * u))?;
            let inside = k.ult(ju, n)?;
            let at =
                k.fx.b
                    .build_select(inside, ju, last, "at")
                    .map_err(ierr)?
                    .into_int_value();
            all.push((eval(k, at)?, inside));
        }
        for (u, (vs, inside)) in all.into_iter().enumerate() {
            consume(k, u as u64, vs, Some(inside))?;
        }
        Ok(())
    })
}

/// How a CSR walk maps threads to rows: the first row, the row step, the first non-zero of a
/// row and the non-zero step: a warp per row (`per_warp`, its lanes strided over the row's
/// non-zeros, reads coalesced), else a thread per row.
pub(super) fn rows_of<'c>(
    k: &Kx<'_, 'c>,
    gtid: IntValue<'c>,
    gstride: IntValue<'c>,
    per_warp: bool,
) -> Result<(IntValue<'c>, IntValue<'c>, IntValue<'c>, IntValue<'c>), CodegenError> {
    let fx = &k.fx;
    if !per_warp {
        return Ok((gtid, gstride, fx.i64c(0), fx.i64c(1)));
    }
    let five = fx.i64c(5);
    Ok((
        fx.b.build_right_shift(gtid, five, false, "wrow")
            .map_err(ierr)?,
        fx.b.build_right_shift(gstride, five, false, "wstep")
            .map_err(ierr)?,
        fx.b.build_and(gtid, fx.i64c(31), "lane").map_err(ierr)?,
        fx.i64c(32),
    ))
}
