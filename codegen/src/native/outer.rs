//! Entry points of Outer operators: per non-zero `x_ij` of the driver (CSR non-zeros, or the
//! non-zero cells of a dense driver), the dot product `u_i · v_j` (an in-module vector
//! primitive with fixed-order lanes), the body, then the final step: write `G_ij`, a Kahan
//! sum, or a scaled-row add (`out_i += G_ij · w_j` for Right, `out_j += G_ij · wt_i` for Left)
//! through an in-module `axpy` primitive.

use super::cell::{LANES, W};
use super::expr::{ierr, load_inputs, At, Body, Fx, InputPtrs};
use super::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use super::CodegenError;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use lafuse_compiler::fusion::cplan::{CNodeId, CPlan};
use lafuse_skeletons::abi::{CsrView, DenseView, KernelArgs};
use lafuse_skeletons::OuterKind;
use std::mem::offset_of;

/// Emits `double lafuse_dot(double* u, double* v, i64 k)`: [`W`] lanes plus a scalar tail,
/// combined in lane order.
fn emit_dot<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<FunctionValue<'c>, CodegenError> {
    let f64t = ctx.f64_type();
    let pf = f64_ptr(ctx);
    let f = module.add_function(
        "lafuse_dot",
        f64t.fn_type(&[pf.into(), pf.into(), ctx.i64_type().into()], false),
        Some(Linkage::Internal),
    );
    llvm::set_function_attributes(ctx, f);
    let mut fx = Fx::new(ctx, module, f);
    let u = f
        .get_nth_param(0)
        .ok_or_else(|| ierr("param"))?
        .into_pointer_value();
    let v = f
        .get_nth_param(1)
        .ok_or_else(|| ierr("param"))?
        .into_pointer_value();
    let k = f
        .get_nth_param(2)
        .ok_or_else(|| ierr("param"))?
        .into_int_value();
    let acc = [fx.slot(fx.vty(W).into())?, fx.slot(fx.vty(1).into())?];
    fx.store(acc[0], fx.splat_const(0.0, W))?;
    fx.store(acc[1], fx.splat_const(0.0, 1))?;
    let c = fx.slot(ctx.i64_type().into())?;
    fx.store(c, fx.i64c(0))?;
    for (x, w) in [(0usize, W), (1, 1)] {
        fx.for_slot(c, k, w as u64, &mut |fx, ci| {
            let a = load_vec(&fx.b, fx.vty(w), u, ci)?;
            let b = load_vec(&fx.b, fx.vty(w), v, ci)?;
            let cur = fx.load_v(acc[x])?;
            fx.store(acc[x], fx.fadd(cur, fx.fmul(a, b)?)?)
        })?;
    }
    let vw = fx.load_v(acc[0])?;
    let mut r = fx.ctx.f64_type().const_float(0.0);
    for l in 0..W {
        let x =
            fx.b.build_extract_element(vw, fx.i64c(l as u64), "l")
                .map_err(ierr)?
                .into_float_value();
        r = fx.b.build_float_add(r, x, "r").map_err(ierr)?;
    }
    let t =
        fx.b.build_extract_element(fx.load_v(acc[1])?, fx.i64c(0), "t")
            .map_err(ierr)?
            .into_float_value();
    r = fx.b.build_float_add(r, t, "r").map_err(ierr)?;
    fx.b.build_return(Some(&r)).map_err(ierr)?;
    Ok(f)
}

/// Emits `void lafuse_axpy(double* o, double* w, double g, i64 len)`: `o[c] += g * w[c]`.
fn emit_axpy<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<FunctionValue<'c>, CodegenError> {
    let pf = f64_ptr(ctx);
    let f = module.add_function(
        "lafuse_axpy",
        ctx.void_type().fn_type(
            &[
                pf.into(),
                pf.into(),
                ctx.f64_type().into(),
                ctx.i64_type().into(),
            ],
            false,
        ),
        Some(Linkage::Internal),
    );
    llvm::set_function_attributes(ctx, f);
    let mut fx = Fx::new(ctx, module, f);
    let o = f
        .get_nth_param(0)
        .ok_or_else(|| ierr("param"))?
        .into_pointer_value();
    let w_ = f
        .get_nth_param(1)
        .ok_or_else(|| ierr("param"))?
        .into_pointer_value();
    let g = f
        .get_nth_param(2)
        .ok_or_else(|| ierr("param"))?
        .into_float_value();
    let len = f
        .get_nth_param(3)
        .ok_or_else(|| ierr("param"))?
        .into_int_value();
    let c = fx.slot(ctx.i64_type().into())?;
    fx.store(c, fx.i64c(0))?;
    for w in [W, 1] {
        fx.for_slot(c, len, w as u64, &mut |fx, ci| {
            let gv = fx.splat(g, w)?;
            let a = load_vec(&fx.b, fx.vty(w), o, ci)?;
            let b = load_vec(&fx.b, fx.vty(w), w_, ci)?;
            store_vec(&fx.b, o, ci, fx.fadd(a, fx.fmul(gv, b)?)?)
        })?;
    }
    fx.b.build_return(None).map_err(ierr)?;
    Ok(f)
}

/// Input positions the Outer entry reads specially.
pub(crate) struct OuterInputs {
    pub u: usize,
    pub v: usize,
    pub w: Option<usize>,
    /// The node whose value is `G_ij`.
    pub g: CNodeId,
}

struct St<'c> {
    out: PointerValue<'c>,
    k: IntValue<'c>,
    k2: IntValue<'c>,
    ins: InputPtrs<'c>,
    acc: [PointerValue<'c>; 2],
    nnz: PointerValue<'c>,
    dot: FunctionValue<'c>,
    axpy: FunctionValue<'c>,
}

/// Emits one entry point: `lafuse_outer_csr` (a CSR driver) when `csr`, else
/// `lafuse_outer_dense`. Each goes into its own module (the CSR one on first use), so a
/// compilation pays machine code for the entry it runs only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
    csr: bool,
) -> Result<(), CodegenError> {
    let dot = emit_dot(ctx, module)?;
    let axpy = emit_axpy(ctx, module)?;
    let name = if csr {
        "lafuse_outer_csr"
    } else {
        "lafuse_outer_dense"
    };
    emit_entry(ctx, module, plan, kind, oi, used, csr, name, dot, axpy)
}

#[allow(clippy::too_many_arguments)]
fn emit_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
    csr: bool,
    name: &str,
    dot: FunctionValue<'c>,
    axpy: FunctionValue<'c>,
) -> Result<(), CodegenError> {
    let i64t = ctx.i64_type();
    let f = module.add_function(
        name,
        i64t.fn_type(&[llvm::i8_ptr(ctx).into(), i64t.into(), i64t.into()], false),
        None,
    );
    llvm::set_function_attributes(ctx, f);
    let mut fx = Fx::new(ctx, module, f);
    let args = f
        .get_nth_param(0)
        .ok_or_else(|| ierr("param"))?
        .into_pointer_value();
    let rl = f
        .get_nth_param(1)
        .ok_or_else(|| ierr("param"))?
        .into_int_value();
    let ru = f
        .get_nth_param(2)
        .ok_or_else(|| ierr("param"))?
        .into_int_value();
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let n = field(&fx, offset_of!(KernelArgs, cols), pi64)?.into_int_value();
    let k = field(&fx, offset_of!(KernelArgs, k), pi64)?.into_int_value();
    let k2 = field(&fx, offset_of!(KernelArgs, k2), pi64)?.into_int_value();
    let ins = load_inputs(&fx, args, used)?;
    let acc = [fx.slot(fx.vty(1).into())?, fx.slot(fx.vty(1).into())?];
    let wl = W as u64;
    if kind == OuterKind::FullAgg {
        // The scalar lane of the single Sum partial: sum at W, correction at LANES + W.
        fx.store(acc[0], load_vec(&fx.b, fx.vty(1), out, fx.i64c(wl))?)?;
        fx.store(
            acc[1],
            load_vec(&fx.b, fx.vty(1), out, fx.i64c(LANES as u64 + wl))?,
        )?;
    }
    let nnz = fx.slot(i64t.into())?;
    fx.store(nnz, fx.i64c(0))?;
    let st = St {
        out,
        k,
        k2,
        ins,
        acc,
        nnz,
        dot,
        axpy,
    };
    if csr {
        let o = offset_of!(KernelArgs, main_csr);
        let rp = field(
            &fx,
            o + offset_of!(CsrView, row_ptr),
            pi64.ptr_type(AddressSpace::default()),
        )?
        .into_pointer_value();
        let ci = field(
            &fx,
            o + offset_of!(CsrView, col_idx),
            ctx.i32_type()
                .ptr_type(AddressSpace::default())
                .ptr_type(AddressSpace::default()),
        )?
        .into_pointer_value();
        let va = field(&fx, o + offset_of!(CsrView, values), pf64)?.into_pointer_value();
        fx.for_range(rl, ru, &mut |fx, i| {
            let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
            let p1 = load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
            fx.for_range(p0, p1, &mut |fx, p| {
                let j32 = load(&fx.b, gep(&fx.b, ci, p)?)?.into_int_value();
                let j =
                    fx.b.build_int_z_extend(j32, ctx.i64_type(), "j")
                        .map_err(ierr)?;
                let x = load_vec(&fx.b, fx.vty(1), va, p)?;
                element(fx, plan, kind, oi, &st, i, j, x, p)
            })
        })?;
    } else {
        let o = offset_of!(KernelArgs, main);
        let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
        let stride = field(&fx, o + offset_of!(DenseView, cols), pi64)?.into_int_value();
        let row0 = field(&fx, o + offset_of!(DenseView, row0), pi64)?.into_int_value();
        fx.for_range(rl, ru, &mut |fx, i| {
            let rowbase = fx.mul(fx.sub(i, row0)?, stride)?;
            fx.for_range(fx.i64c(0), n, &mut |fx, j| {
                let p = fx.add(fx.mul(i, n)?, j)?;
                let x = load_vec(&fx.b, fx.vty(1), d, fx.add(rowbase, j)?)?;
                // Only non-zeros (NaN included) of the driver are visited.
                let nz = fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, 1))?;
                let nz =
                    fx.b.build_extract_element(nz, fx.i64c(0), "nz")
                        .map_err(ierr)?
                        .into_int_value();
                let then = ctx.append_basic_block(f, "nz");
                let cont = ctx.append_basic_block(f, "cont");
                fx.b.build_conditional_branch(nz, then, cont)
                    .map_err(ierr)?;
                fx.b.position_at_end(then);
                element(fx, plan, kind, oi, &st, i, j, x, p)?;
                fx.b.build_unconditional_branch(cont).map_err(ierr)?;
                fx.b.position_at_end(cont);
                Ok(())
            })
        })?;
    }
    if kind == OuterKind::FullAgg {
        store_vec(&fx.b, out, fx.i64c(wl), fx.load_v(acc[0])?)?;
        store_vec(&fx.b, out, fx.i64c(LANES as u64 + wl), fx.load_v(acc[1])?)?;
    }
    let total = fx.load_i64(nnz)?;
    fx.b.build_return(Some(&total)).map_err(ierr)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn element<'c>(
    fx: &mut Fx<'_, 'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    st: &St<'c>,
    i: IntValue<'c>,
    j: IntValue<'c>,
    x: inkwell::values::VectorValue<'c>,
    p: IntValue<'c>,
) -> Result<(), CodegenError> {
    let ptr = |k: usize| {
        st.ins
            .data
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| ierr("outer input"))
    };
    let urow = gep(&fx.b, ptr(oi.u)?, fx.mul(i, st.k)?)?;
    let vrow = gep(&fx.b, ptr(oi.v)?, fx.mul(j, st.k)?)?;
    let d =
        fx.b.build_call(st.dot, &[urow.into(), vrow.into(), st.k.into()], "dot")
            .map_err(ierr)?;
    let d = match d.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => v.into_float_value(),
        _ => return Err(ierr("dot returns nothing")),
    };
    let mut body = Body::new(
        plan,
        &st.ins,
        At {
            i,
            j,
            w: 1,
            main: x,
        },
    );
    body.outer_dot = Some(fx.splat(d, 1)?);
    let g = body.emit(fx, oi.g, false)?;
    match kind {
        OuterKind::CellWise => {
            store_vec(&fx.b, st.out, p, g)?;
            let nz = fx.fcmp(FloatPredicate::UNE, g, fx.splat_const(0.0, 1))?;
            let nz =
                fx.b.build_extract_element(nz, fx.i64c(0), "nz")
                    .map_err(ierr)?
                    .into_int_value();
            let nz =
                fx.b.build_int_z_extend(nz, fx.ctx.i64_type(), "z")
                    .map_err(ierr)?;
            let cur = fx.load_i64(st.nnz)?;
            fx.store(st.nnz, fx.add(cur, nz)?)?;
        }
        OuterKind::FullAgg => {
            let (s, c) = (fx.load_v(st.acc[0])?, fx.load_v(st.acc[1])?);
            let y = fx.fsub(g, c)?;
            let t = fx.fadd(s, y)?;
            let cn = fx.fsub(fx.fsub(t, s)?, y)?;
            let fin = fx.fcmp(
                FloatPredicate::OLT,
                fx.intrinsic("llvm.fabs", cn)?,
                fx.splat_const(f64::INFINITY, 1),
            )?;
            fx.store(st.acc[1], fx.select(fin, cn, fx.splat_const(0.0, 1))?)?;
            fx.store(st.acc[0], t)?;
        }
        OuterKind::Right | OuterKind::Left | OuterKind::LeftT => {
            let wk =
                oi.w.ok_or_else(|| ierr("final product without its matrix"))?;
            let (orow, wrow) = if kind == OuterKind::Right {
                (i, j)
            } else {
                (j, i)
            };
            let o = gep(&fx.b, st.out, fx.mul(orow, st.k2)?)?;
            let w = gep(&fx.b, ptr(wk)?, fx.mul(wrow, st.k2)?)?;
            let gs =
                fx.b.build_extract_element(g, fx.i64c(0), "g")
                    .map_err(ierr)?;
            fx.b.build_call(st.axpy, &[o.into(), w.into(), gs.into(), st.k2.into()], "")
                .map_err(ierr)?;
        }
    }
    let _ = IntPredicate::EQ;
    Ok(())
}
