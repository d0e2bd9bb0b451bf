//! The in-module vector primitives of Row entry points (row aggregates, dot products,
//! `axpy`, counts), emitted as always-inline IR with explicit vector accumulators.

use super::*;

// ---- primitives ----------------------------------------------------------------------------

/// The in-module vector primitives.
pub(super) struct Prims<'c> {
    pub(super) sum: FunctionValue<'c>,
    pub(super) sumsq: FunctionValue<'c>,
    pub(super) min: FunctionValue<'c>,
    pub(super) max: FunctionValue<'c>,
    pub(super) prod: FunctionValue<'c>,
    pub(super) m2: FunctionValue<'c>,
    pub(super) nnz: FunctionValue<'c>,
    pub(super) nonfinite: FunctionValue<'c>,
    pub(super) dot: FunctionValue<'c>,
    pub(super) dot2: FunctionValue<'c>,
    pub(super) sdot: FunctionValue<'c>,
    pub(super) axpy: FunctionValue<'c>,
    /// Adds a block of rows' updates to one row of the partial.
    /// (Emitted for a plan that defers its outer-product updates only.)
    pub(super) axpy_rows: Option<FunctionValue<'c>>,
    /// Products of a block of rows with every column of a transposed matrix.
    /// (Emitted for a plan with hoisted products only.)
    pub(super) dot_rows: Option<FunctionValue<'c>>,
    pub(super) saxpy: FunctionValue<'c>,
    pub(super) vadd: FunctionValue<'c>,
    pub(super) copy: FunctionValue<'c>,
}

/// `acc = step(acc, x)` over `len` elements (`W` lanes, then a scalar tail), lanes combined
/// in order with the tail last; returns the scalar.
pub(super) fn reduce_loop<'c>(
    fx: &mut Fx<'_, 'c>,
    len: IntValue<'c>,
    init: f64,
    load: &dyn Fn(&Fx<'_, 'c>, IntValue<'c>, u32) -> Result<VectorValue<'c>, CodegenError>,
    step: &dyn Fn(
        &Fx<'_, 'c>,
        VectorValue<'c>,
        VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError>,
) -> Result<FloatValue<'c>, CodegenError> {
    let acc = [fx.slot(fx.vty(W).into())?, fx.slot(fx.vty(1).into())?];
    fx.store(acc[0], fx.splat_const(init, W))?;
    fx.store(acc[1], fx.splat_const(init, 1))?;
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for (x, w) in [(0usize, W), (1, 1)] {
        fx.for_slot(j, len, w as u64, &mut |fx, jv| {
            let v = load(fx, jv, w)?;
            let cur = fx.load_v(acc[x])?;
            fx.store(acc[x], step(fx, cur, v)?)
        })?;
    }
    let vw = fx.load_v(acc[0])?;
    let mut r = fx.splat_const(init, 1);
    for l in 0..W {
        let x =
            fx.b.build_extract_element(vw, fx.i64c(l as u64), "l")
                .map_err(ierr)?
                .into_float_value();
        r = step(fx, r, fx.splat(x, 1)?)?;
    }
    r = step(fx, r, fx.load_v(acc[1])?)?;
    fx.b.build_extract_element(r, fx.i64c(0), "r")
        .map_err(ierr)
        .map(|v| v.into_float_value())
}

/// `for j in 0..len` in `W`-lane steps, then a scalar tail.
pub(super) fn lanes<'c>(
    fx: &mut Fx<'_, 'c>,
    len: IntValue<'c>,
    body: &mut dyn FnMut(&mut Fx<'_, 'c>, IntValue<'c>, u32) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for w in [W, 1] {
        fx.for_slot(j, len, w as u64, &mut |fx, jv| body(fx, jv, w))?;
    }
    Ok(())
}

pub(super) fn pick<'c>(
    fx: &Fx<'_, 'c>,
    max: bool,
    acc: VectorValue<'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let p = if max {
        FloatPredicate::OGT
    } else {
        FloatPredicate::OLT
    };
    let better = fx.fcmp(p, x, acc)?;
    let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
    fx.select(fx.or(better, nan)?, x, acc)
}

/// The vector primitives an entry point of `info` calls, declared and defined in `module`.
pub(super) fn emit_prims<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
) -> Result<Prims<'c>, CodegenError> {
    let pf: BasicMetadataTypeEnum = f64_ptr(ctx).into();
    let pi32: BasicMetadataTypeEnum = ctx.i32_type().ptr_type(AddressSpace::default()).into();
    let i64m: BasicMetadataTypeEnum = ctx.i64_type().into();
    let f64m: BasicMetadataTypeEnum = ctx.f64_type().into();
    let f64r = Some(ctx.f64_type().into());
    let i64r = Some(ctx.i64_type().into());
    type Step<'c> =
        fn(&Fx<'_, 'c>, VectorValue<'c>, VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError>;
    // Reductions over (p, len).
    let reduce = |name: &str,
                  init: f64,
                  sq: bool,
                  step: Step<'c>|
     -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, i64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let r = reduce_loop(
            &mut fx,
            len,
            init,
            &|fx, j, w| {
                let x = load_vec(&fx.b, fx.vty(w), p, j)?;
                if sq {
                    fx.fmul(x, x)
                } else {
                    Ok(x)
                }
            },
            &step,
        )?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        Ok(fx.func)
    };
    let sum = reduce("lafuse_row_sum", 0.0, false, |fx, a, x| fx.fadd(a, x))?;
    let sumsq = reduce("lafuse_row_sumsq", 0.0, true, |fx, a, x| fx.fadd(a, x))?;
    let min = reduce("lafuse_row_min", f64::INFINITY, false, |fx, a, x| {
        pick(fx, false, a, x)
    })?;
    let max = reduce("lafuse_row_max", f64::NEG_INFINITY, false, |fx, a, x| {
        pick(fx, true, a, x)
    })?;
    let prod = reduce("lafuse_row_prod", 1.0, false, |fx, a, x| fx.fmul(a, x))?;
    // Σ (x - mean)^2.
    let m2 = {
        let mut fx = declare_primitive(ctx, module, "lafuse_row_m2", &[pf, i64m, f64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let mean = fx.param(2)?.into_float_value();
        let r = reduce_loop(
            &mut fx,
            len,
            0.0,
            &|fx, j, w| {
                let x = load_vec(&fx.b, fx.vty(w), p, j)?;
                let d = fx.fsub(x, fx.splat(mean, w)?)?;
                fx.fmul(d, d)
            },
            &|fx, a, x| fx.fadd(a, x),
        )?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        fx.func
    };
    // Counts of non-zeros and of non-finite values.
    let count = |name: &str, nonfinite: bool| -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, i64m], i64r);
        let p = fx.param(0)?.into_pointer_value();
        let len = fx.param(1)?.into_int_value();
        let acc = [
            fx.slot(ctx.i64_type().vec_type(W).into())?,
            fx.slot(ctx.i64_type().vec_type(1).into())?,
        ];
        fx.store(acc[0], ctx.i64_type().vec_type(W).const_zero())?;
        fx.store(acc[1], ctx.i64_type().vec_type(1).const_zero())?;
        lanes(&mut fx, len, &mut |fx, j, w| {
            let x = load_vec(&fx.b, fx.vty(w), p, j)?;
            let c = if nonfinite {
                let a = fx.intrinsic("llvm.fabs", x)?;
                fx.fcmp(FloatPredicate::UGE, a, fx.splat_const(f64::INFINITY, w))?
            } else {
                fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, w))?
            };
            let ity = ctx.i64_type().vec_type(w);
            let c = fx.b.build_int_z_extend(c, ity, "z").map_err(ierr)?;
            let slot = acc[usize::from(w == 1)];
            let cur = fx.load_v(slot)?;
            fx.store(slot, fx.b.build_int_add(cur, c, "n").map_err(ierr)?)
        })?;
        let t = fx.sum_i64_lanes(fx.load_v(acc[0])?, fx.load_v(acc[1])?)?;
        fx.b.build_return(Some(&t)).map_err(ierr)?;
        Ok(fx.func)
    };
    let nnz = count("lafuse_row_nnz", false)?;
    let nonfinite = count("lafuse_row_nonfinite", true)?;
    // Dot products in the fixed order of `outer::dot_products` (independent accumulators).
    let dot = {
        let mut fx = declare_primitive(ctx, module, "lafuse_row_dot", &[pf, pf, i64m], f64r);
        let p = fx.param(0)?.into_pointer_value();
        let q = fx.param(1)?.into_pointer_value();
        let len = fx.param(2)?.into_int_value();
        let r = outer::dot_products(&mut fx, p, &[q], len, true)?;
        fx.b.build_return(Some(&r[0])).map_err(ierr)?;
        fx.func
    };
    // o[0] = p · q0, o[1] = p · q1 in one pass over p, each as `lafuse_row_dot` computes it.
    let dot2 = {
        let mut fx = declare_primitive(
            ctx,
            module,
            "lafuse_row_dot2",
            &[pf, pf, pf, i64m, pf],
            None,
        );
        let p = fx.param(0)?.into_pointer_value();
        let q0 = fx.param(1)?.into_pointer_value();
        let q1 = fx.param(2)?.into_pointer_value();
        let len = fx.param(3)?.into_int_value();
        let o = fx.param(4)?.into_pointer_value();
        let r = outer::dot_products(&mut fx, p, &[q0, q1], len, true)?;
        for (t, x) in r.iter().enumerate() {
            let x = fx.splat(*x, 1)?;
            store_vec(&fx.b, o, fx.i64c(t as u64), x)?;
        }
        fx.b.build_return(None).map_err(ierr)?;
        fx.func
    };
    // Σ vals[p] * q[idx[p]] over the non-zeros: four accumulators (non-zero p adds to
    // accumulator p mod 4, over the whole groups of four), combined as (a0 + a1) + (a2 + a3),
    // then the remaining non-zeros in order. One accumulator made every non-zero wait for
    // the previous add; four keep the adder busy. The order is fixed by the row alone.
    let sdot = {
        const ACCS: u64 = 4;
        let mut fx = declare_primitive(ctx, module, "lafuse_row_sdot", &[pf, pi32, pf, i64m], f64r);
        let vals = fx.param(0)?.into_pointer_value();
        let idx = fx.param(1)?.into_pointer_value();
        let q = fx.param(2)?.into_pointer_value();
        let nz = fx.param(3)?.into_int_value();
        let mut acc = Vec::new();
        for _ in 0..ACCS {
            let a = fx.slot(fx.vty(1).into())?;
            fx.store(a, fx.splat_const(0.0, 1))?;
            acc.push(a);
        }
        let term = |fx: &Fx<'_, 'c>, p: IntValue<'c>| -> Result<VectorValue<'c>, CodegenError> {
            let j = fx.load_index(idx, p)?;
            let a = load_vec(&fx.b, fx.vty(1), vals, p)?;
            let b = load_vec(&fx.b, fx.vty(1), q, j)?;
            fx.fmul(a, b)
        };
        let p = fx.slot(ctx.i64_type().into())?;
        fx.store(p, fx.i64c(0))?;
        fx.for_slot(p, nz, ACCS, &mut |fx, p0| {
            for (t, a) in acc.iter().enumerate() {
                let x = term(fx, fx.add(p0, fx.i64c(t as u64))?)?;
                let cur = fx.load_v(*a)?;
                fx.store(*a, fx.fadd(cur, x)?)?;
            }
            Ok(())
        })?;
        let left = fx.fadd(fx.load_v(acc[0])?, fx.load_v(acc[1])?)?;
        let right = fx.fadd(fx.load_v(acc[2])?, fx.load_v(acc[3])?)?;
        fx.store(acc[0], fx.fadd(left, right)?)?;
        fx.for_slot(p, nz, 1, &mut |fx, pv| {
            let x = term(fx, pv)?;
            let cur = fx.load_v(acc[0])?;
            fx.store(acc[0], fx.fadd(cur, x)?)
        })?;
        let r =
            fx.b.build_extract_element(fx.load_v(acc[0])?, fx.i64c(0), "r")
                .map_err(ierr)?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
        fx.func
    };
    let axpy = emit_axpy(ctx, module)?;
    // The block primitives: declared here, functions of the skeletons crate (`BlockPrim`).
    let axpy_rows = info
        .uses(BlockPrim::AxpyRows)
        .then(|| library::declare(ctx, module, AXPY_ROWS, axpy_rows_type(ctx)));
    let dot_rows = info
        .uses(BlockPrim::DotRows)
        .then(|| library::declare(ctx, module, DOT_ROWS, dot_rows_type(ctx)));
    // o[idx[p]] += s * vals[p].
    let saxpy = {
        let mut fx = declare_primitive(
            ctx,
            module,
            "lafuse_row_saxpy",
            &[pf, pf, pi32, f64m, i64m],
            None,
        );
        let o = fx.param(0)?.into_pointer_value();
        let vals = fx.param(1)?.into_pointer_value();
        let idx = fx.param(2)?.into_pointer_value();
        let s = fx.param(3)?.into_float_value();
        let nz = fx.param(4)?.into_int_value();
        let update = |fx: &Fx<'_, 'c>, p: IntValue<'c>| -> Result<(), CodegenError> {
            let j = fx.load_index(idx, p)?;
            let a = load_vec(&fx.b, fx.vty(1), vals, p)?;
            let cur = load_vec(&fx.b, fx.vty(1), o, j)?;
            let sv = fx.splat(s, 1)?;
            store_vec(&fx.b, o, j, fx.fadd(cur, fx.fmul(sv, a)?)?)
        };
        // Four non-zeros a step (a row's column indices are distinct, so the updates are
        // independent): the loop's own instructions were a third of its work.
        let p = fx.slot(ctx.i64_type().into())?;
        fx.store(p, fx.i64c(0))?;
        fx.for_slot(p, nz, 4, &mut |fx, p0| {
            for t in 0..4 {
                update(fx, fx.add(p0, fx.i64c(t))?)?;
            }
            Ok(())
        })?;
        fx.for_slot(p, nz, 1, &mut |fx, pv| update(fx, pv))?;
        fx.b.build_return(None).map_err(ierr)?;
        fx.func
    };
    let binop = |name: &str, add: bool| -> Result<FunctionValue<'c>, CodegenError> {
        let mut fx = declare_primitive(ctx, module, name, &[pf, pf, i64m], None);
        let o = fx.param(0)?.into_pointer_value();
        let x = fx.param(1)?.into_pointer_value();
        let len = fx.param(2)?.into_int_value();
        lanes(&mut fx, len, &mut |fx, j, w| {
            let b = load_vec(&fx.b, fx.vty(w), x, j)?;
            let v = if add {
                fx.fadd(load_vec(&fx.b, fx.vty(w), o, j)?, b)?
            } else {
                b
            };
            store_vec(&fx.b, o, j, v)
        })?;
        fx.b.build_return(None).map_err(ierr)?;
        Ok(fx.func)
    };
    let vadd = binop("lafuse_row_vadd", true)?;
    let copy = binop("lafuse_row_copy", false)?;
    Ok(Prims {
        sum,
        sumsq,
        min,
        max,
        prod,
        m2,
        nnz,
        nonfinite,
        dot,
        dot2,
        sdot,
        axpy,
        axpy_rows,
        dot_rows,
        saxpy,
        vadd,
        copy,
    })
}
