//! The vector primitives of Row entry points in Cranelift IR, emitted inline where used (the
//! LLVM backend's always-inline functions of `native::row::prims`), each computing its value
//! in the LLVM backend's order: reductions over one [`W`]-lane accumulator and a scalar tail,
//! lanes combined in lane order with the tail last; dot products of a row with a matrix's
//! columns in `outer::dot_products`' order (four accumulators); `axpy` as a multiply then an
//! add. A CSR row's sparse dot products and updates call `lafuse_skeletons::row_sparse`, and
//! the dense entry's blocks of rows `lafuse_skeletons::row_blocks`.

use super::super::cell::W;
use super::super::fx::{mem, parts_of, Fx, V};
use crate::backend::CodegenError;
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};

type R<T> = Result<T, CodegenError>;

/// One step of a reduction, `acc <- step(acc, x)`.
pub(super) type Step = fn(&mut Fx<'_>, &V, &V) -> V;

pub(super) fn add(fx: &mut Fx<'_>, a: &V, x: &V) -> V {
    fx.fadd(a, x)
}

pub(super) fn mul(fx: &mut Fx<'_>, a: &V, x: &V) -> V {
    fx.fmul(a, x)
}

pub(super) fn min(fx: &mut Fx<'_>, a: &V, x: &V) -> V {
    fx.pick(false, a, x)
}

pub(super) fn max(fx: &mut Fx<'_>, a: &V, x: &V) -> V {
    fx.pick(true, a, x)
}

/// One double as a one-lane value.
pub(super) fn one(x: Value) -> V {
    V {
        parts: vec![x],
        w: 1,
    }
}

/// `for j in 0..len` in [`W`]-lane steps, then a scalar tail.
pub(super) fn lanes(
    fx: &mut Fx<'_>,
    len: Value,
    body: &mut dyn FnMut(&mut Fx<'_>, Value, u32) -> R<()>,
) -> R<()> {
    let zero = fx.iconst(0);
    let j = fx.var(types::I64, zero);
    for w in [W, 1] {
        fx.for_var(j, len, i64::from(w), &mut |fx, jv| body(fx, jv, w))?;
    }
    Ok(())
}

/// `acc = step(acc, load(j))` over `len` elements ([`W`] lanes, then a scalar tail), the
/// lanes combined into `init` in lane order and the tail last (the LLVM backend's
/// `reduce_loop`); the scalar result.
pub(super) fn reduce(
    fx: &mut Fx<'_>,
    len: Value,
    init: f64,
    load: &dyn Fn(&mut Fx<'_>, Value, u32) -> V,
    step: Step,
) -> R<Value> {
    let aw = fx.fconst(init, W);
    let vw = fx.vars(&aw);
    let a1 = fx.fconst(init, 1);
    let v1 = fx.vars(&a1);
    let zero = fx.iconst(0);
    let j = fx.var(types::I64, zero);
    for (vars, w) in [(&vw, W), (&v1, 1)] {
        fx.for_var(j, len, i64::from(w), &mut |fx, jv| {
            let x = load(fx, jv, w);
            let cur = fx.get(vars, w);
            let r = step(fx, &cur, &x);
            fx.set(vars, &r);
            Ok(())
        })?;
    }
    let acc = fx.get(&vw, W);
    let mut r = fx.fconst(init, 1);
    for l in 0..W {
        let x = fx.lane(&acc, l);
        r = step(fx, &r, &one(x));
    }
    let t = fx.get(&v1, 1);
    Ok(step(fx, &r, &t).parts[0])
}

/// A reduction of the `len` values at `p` (`sq`: of their squares).
pub(super) fn reduce_at(
    fx: &mut Fx<'_>,
    p: Value,
    len: Value,
    init: f64,
    sq: bool,
    step: Step,
) -> R<Value> {
    reduce(
        fx,
        len,
        init,
        &|fx, j, w| {
            let x = fx.load(p, j, w);
            if sq {
                fx.fmul(&x, &x)
            } else {
                x
            }
        },
        step,
    )
}

/// `Σ (x - mean)^2` over the `len` values at `p`.
pub(super) fn m2(fx: &mut Fx<'_>, p: Value, len: Value, mean: Value) -> R<Value> {
    reduce(
        fx,
        len,
        0.0,
        &|fx, j, w| {
            let x = fx.load(p, j, w);
            let m = fx.splat(mean, w);
            let d = fx.fsub(&x, &m);
            fx.fmul(&d, &d)
        },
        add,
    )
}

/// How many of the `len` values at `p` are non-zero (NaN included), or, with `nonfinite`, NaN
/// or infinite; an `I64`.
pub(super) fn count(fx: &mut Fx<'_>, p: Value, len: Value, nonfinite: bool) -> R<Value> {
    let zi = fx.iconst(0);
    let zv = fx.b.ins().splat(types::I64X2, zi);
    let cw: Vec<_> = (0..parts_of(W)).map(|_| fx.var(types::I64X2, zv)).collect();
    let c1 = vec![fx.var(types::I64, zi)];
    lanes(fx, len, &mut |fx, j, w| {
        let x = fx.load(p, j, w);
        let c = if nonfinite {
            let a = fx.fabs(&x);
            let inf = fx.fconst(f64::INFINITY, w);
            fx.fcmp(FloatCC::UnorderedOrGreaterThanOrEqual, &a, &inf)
        } else {
            let z = fx.fconst(0.0, w);
            fx.fcmp(FloatCC::NotEqual, &x, &z)
        };
        fx.count(if w == 1 { &c1 } else { &cw }, &c);
        Ok(())
    })?;
    let mut total = fx.b.use_var(c1[0]);
    for v in &cw {
        let part = fx.b.use_var(*v);
        for l in 0..2 {
            let x = fx.b.ins().extractlane(part, l);
            total = fx.iadd(total, x);
        }
    }
    Ok(total)
}

/// Column index `idx[p]` of a CSR row (a `u32`), as an `I64`.
pub(super) fn index(fx: &mut Fx<'_>, idx: Value, p: Value) -> Value {
    let off = fx.b.ins().ishl_imm_u(p, 2);
    let at = fx.iadd(idx, off);
    fx.b.ins().uload32(mem(), at, 0)
}

/// `o[j] += s * x[j]` for `j < len`.
pub(super) fn axpy(fx: &mut Fx<'_>, o: Value, x: Value, s: Value, len: Value) -> R<()> {
    lanes(fx, len, &mut |fx, j, w| {
        let sv = fx.splat(s, w);
        let a = fx.load(o, j, w);
        let b = fx.load(x, j, w);
        let prod = fx.fmul(&sv, &b);
        let r = fx.fadd(&a, &prod);
        fx.store(o, j, &r);
        Ok(())
    })
}

/// `o[idx[p]] += s * vals[p]` over `nz` non-zeros (distinct columns: the updates are
/// independent), by `lafuse_skeletons::row_sparse` (Cranelift's own gather loop ran at half
/// LLVM's speed).
pub(super) fn saxpy(
    fx: &mut Fx<'_>,
    o: Value,
    vals: Value,
    idx: Value,
    s: Value,
    nz: Value,
) -> R<()> {
    let f = lafuse_skeletons::row_sparse::lafuse_row_saxpy as *const () as usize;
    fx.call_void(f, &[o, vals, idx, s, nz]);
    Ok(())
}

/// `o[j] = x[j]` (`add`: `o[j] += x[j]`) for `j < len`.
pub(super) fn copy(fx: &mut Fx<'_>, o: Value, x: Value, len: Value, add: bool) -> R<()> {
    lanes(fx, len, &mut |fx, j, w| {
        let b = fx.load(x, j, w);
        let v = if add {
            let a = fx.load(o, j, w);
            fx.fadd(&a, &b)
        } else {
            b
        };
        fx.store(o, j, &v);
        Ok(())
    })
}

/// `Σ vals[p] * q[idx[p]]` over `nz` non-zeros: four accumulators over whole groups of four,
/// combined as `(a0 + a1) + (a2 + a3)`, then the remaining non-zeros in order (the LLVM
/// backend's `lafuse_row_sdot`), by `lafuse_skeletons::row_sparse`.
pub(super) fn sdot(fx: &mut Fx<'_>, vals: Value, idx: Value, q: Value, nz: Value) -> R<Value> {
    let f = lafuse_skeletons::row_sparse::lafuse_row_sdot as *const () as usize;
    Ok(fx.call_f64(f, &[vals, idx, q, nz]))
}

/// Writes a CSR row's `nz` values at their columns of the zeroed dense row `dst`, or, with
/// `clear`, zeros there again.
pub(super) fn scatter(
    fx: &mut Fx<'_>,
    vals: Value,
    idx: Value,
    nz: Value,
    dst: Value,
    clear: bool,
) -> R<()> {
    let zero = fx.iconst(0);
    fx.for_range(zero, nz, &mut |fx, p| {
        let j = index(fx, idx, p);
        let v = if clear {
            fx.fconst(0.0, 1)
        } else {
            fx.load(vals, p, 1)
        };
        fx.store(dst, j, &v);
        Ok(())
    })
}
