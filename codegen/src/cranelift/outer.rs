//! Entry points of Outer operators in Cranelift IR, as the LLVM backend's `native::outer`
//! builds them, step for step where a result depends on it: per non-zero `x_ij` of the driver
//! (CSR non-zeros, the non-zero cells of a dense driver, or every cell) the dot product
//! `u_i · v_j` in the LLVM backend's fixed order (four 8-lane fused multiply-add accumulators
//! over blocks of 32, then 8-lane blocks into the first, a scalar tail; combined as
//! `(a0 + a1) + (a2 + a3)`, lanes by a halving tree, the tail last), the body, then the final
//! step: write `G_ij`, a Kahan sum, or a scaled-row add. Where the LLVM backend takes a CSR
//! row's non-zeros 8 at a time (`plan_info::lane_parallel`) so does this one, so that sums land
//! in the same partial lanes. (The LLVM backend's prefetches change no result; Cranelift has
//! none.) Over tiles of `U %*% t(V)` (a dense enough driver, [`emit_tiles_entry`]) the dot
//! products come from the skeleton's tile, as in the LLVM backend.

use super::body::{load_inputs, At, Body, InputPtrs};
use super::cell::{LANES, W};
use super::fx::{Fx, V};
use crate::backend::{CodegenError, Internal};
use crate::plan_info::{self, lane_parallel, OuterInputs};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::Variable;
use lafuse_compiler::fusion::cplan::CPlan;
use lafuse_skeletons::abi::{CsrView, KernelArgs};
use lafuse_skeletons::OuterKind;
use std::mem::offset_of;

/// Independent `W`-lane accumulators per dot product (the LLVM backend's `ACCS`).
const ACCS: usize = 4;

/// Dot products per pass over a row of `U` when non-zeros are taken `W` at a time (the LLVM
/// backend's `DOTS_AT_ONCE`; each dot keeps its own order, so this changes no result).
const DOTS_AT_ONCE: usize = 4;

/// Which cells an Outer entry point visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Visit {
    /// The non-zeros of a dense driver.
    DenseNonZeros,
    /// The non-zeros of a CSR driver.
    CsrNonZeros,
    /// Every cell of a dense driver (a sparse one densified block by block), for calls whose
    /// body may be NaN or infinite where the driver is zero.
    EveryCell,
}

struct St {
    out: Value,
    k: Value,
    k2: Value,
    ins: InputPtrs,
    /// FullAgg's scalar-lane Kahan sum and correction (partial lane `W`).
    acc: [Variable; 2],
    /// FullAgg's `W`-lane sum and corrections for non-zeros taken `W` at a time.
    accv: [Vec<Variable>; 2],
    /// The cell-wise output's non-zeros, counted by the dense entries only (the skeleton
    /// counts a CSR driver's output itself).
    nnz: Variable,
    matrix_cells: Vec<bool>,
}

impl St {
    fn input(&self, k: usize) -> Result<Value, CodegenError> {
        self.ins
            .data
            .get(k)
            .copied()
            .flatten()
            .ok_or(CodegenError::Internal(Internal::InputNotPrepared {
                input: k,
            }))
    }
}

/// Emits the entry point `visit` names into `fx` (positioned at its entry block with
/// parameters `args`, `rl` and `ru`).
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_entry(
    fx: &mut Fx<'_>,
    args: Value,
    rl: Value,
    ru: Value,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
    visit: Visit,
) -> Result<(), CodegenError> {
    let out = fx.load_i64(args, offset_of!(KernelArgs, out))?;
    let n = fx.load_i64(args, offset_of!(KernelArgs, cols))?;
    let k = fx.load_i64(args, offset_of!(KernelArgs, k))?;
    let k2 = fx.load_i64(args, offset_of!(KernelArgs, k2))?;
    let ins = load_inputs(fx, args, used)?;
    let lanes = visit == Visit::CsrNonZeros && lane_parallel(plan, kind, oi);
    let wl = i64::from(W);
    let full = kind == OuterKind::FullAgg;
    // The single Sum partial: the vector lanes at 0..W with their corrections at
    // LANES..LANES + W (used by `W`-lane batches only), the scalar lane at W with its
    // correction at LANES + W.
    let at = |fx: &mut Fx<'_>, off: i64, w: u32| partial_lanes(fx, out, full, off, w);
    let (s1, c1) = (at(fx, wl, 1), at(fx, LANES as i64 + wl, 1));
    let acc = [
        fx.var(types::F64, s1.parts[0]),
        fx.var(types::F64, c1.parts[0]),
    ];
    let accv = if lanes {
        let (sw, cw) = (at(fx, 0, W), at(fx, LANES as i64, W));
        [fx.vars(&sw), fx.vars(&cw)]
    } else {
        [Vec::new(), Vec::new()]
    };
    let zero = fx.iconst(0);
    let nnz = fx.var(types::I64, zero);
    let st = St {
        out,
        k,
        k2,
        ins,
        acc,
        accv,
        nnz,
        matrix_cells: summed_matrix_cells(plan, kind, oi),
    };
    if visit == Visit::CsrNonZeros {
        let o = offset_of!(KernelArgs, main_csr);
        let rp = fx.load_i64(args, o + offset_of!(CsrView, row_ptr))?;
        let ci = fx.load_i64(args, o + offset_of!(CsrView, col_idx))?;
        let va = fx.load_i64(args, o + offset_of!(CsrView, values))?;
        fx.for_range(rl, ru, &mut |fx, i| {
            let pa = fx.elem_addr(rp, i);
            let p0 = fx.b.ins().load(types::I64, super::fx::mem(), pa, 0);
            let p1 = fx.b.ins().load(types::I64, super::fx::mem(), pa, 8);
            let pv = fx.var(types::I64, p0);
            if lanes {
                fx.for_var(pv, p1, wl, &mut |fx, p| {
                    let x = fx.load(va, p, W);
                    elements_w(fx, plan, kind, oi, &st, i, ci, x, p)
                })?;
            }
            let p = fx.b.use_var(pv);
            fx.for_range(p, p1, &mut |fx, p| {
                let j = column(fx, ci, p);
                let x = fx.load(va, p, 1);
                element(fx, plan, kind, oi, &st, i, j, x, p, visit)
            })
        })?;
    } else {
        let (d, stride, row0) = fx.dense_view(args, offset_of!(KernelArgs, main))?;
        fx.for_range(rl, ru, &mut |fx, i| {
            let r = fx.isub(i, row0);
            let rowbase = fx.imul(r, stride);
            let mut row = |fx: &mut Fx<'_>| {
                let zero = fx.iconst(0);
                fx.for_range(zero, n, &mut |fx, j| {
                    let ri = fx.imul(i, n);
                    let p = fx.iadd(ri, j);
                    let at = fx.iadd(rowbase, j);
                    let x = fx.load(d, at, 1);
                    if visit == Visit::EveryCell {
                        return element(fx, plan, kind, oi, &st, i, j, x.clone(), p, visit);
                    }
                    // Only non-zeros (NaN included) of the driver are visited.
                    let z = fx.fconst(0.0, 1);
                    let nz = fx.fcmp(FloatCC::NotEqual, &x, &z).scalar();
                    fx.if_then(nz, &mut |fx| {
                        element(fx, plan, kind, oi, &st, i, j, x.clone(), p, visit)
                    })
                })
            };
            if visit == Visit::EveryCell && full {
                // A NaN sum stays NaN: once this task's sum is NaN its remaining rows cannot
                // change the result (as the LLVM backend, which ends the visit there).
                let s = fx.b.use_var(st.acc[0]);
                let ok = fx.b.ins().fcmp(FloatCC::Ordered, s, s);
                fx.if_then(ok, &mut row)
            } else {
                row(fx)
            }
        })?;
    }
    if full {
        let put = |fx: &mut Fx<'_>, vars: &[Variable], off: i64, w: u32| {
            let v = fx.get(vars, w);
            let idx = fx.iconst(off);
            fx.store(out, idx, &v);
        };
        if lanes {
            put(fx, &st.accv[0], 0, W);
            put(fx, &st.accv[1], LANES as i64, W);
        }
        put(fx, &st.acc[..1], wl, 1);
        put(fx, &st.acc[1..], LANES as i64 + wl, 1);
    }
    let total = fx.b.use_var(nnz);
    fx.b.ins().return_(&[total]);
    Ok(())
}

/// Emits `lafuse_outer_tiles` into `fx`, as the LLVM backend's `native::outer` builds it: the
/// body at every cell of rows `[rl, ru)` and columns `[col_lo, col_hi)` of a dense (or
/// densified) driver, `W` cells at a time then one, reading `u_i · v_j` from the skeleton's
/// tile of `U %*% t(V)`; `0 * body` at the driver's zeros (unless a sum's root is `X * f` of
/// the driver, which is that already). A full sum adds into the partial's
/// `W` lanes and its scalar lane (Kahan); otherwise `G_ij` goes to
/// `out[(i - rl) * out_stride + (j - col_lo)]`. Returns 0 (the skeleton counts non-zeros).
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_tiles_entry(
    fx: &mut Fx<'_>,
    args: Value,
    rl: Value,
    ru: Value,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
) -> Result<(), CodegenError> {
    let out = fx.load_i64(args, offset_of!(KernelArgs, out))?;
    let tile = fx.load_i64(args, offset_of!(KernelArgs, tile))?;
    let tile_stride = fx.load_i64(args, offset_of!(KernelArgs, tile_stride))?;
    let col_lo = fx.load_i64(args, offset_of!(KernelArgs, col_lo))?;
    let col_hi = fx.load_i64(args, offset_of!(KernelArgs, col_hi))?;
    let out_stride = fx.load_i64(args, offset_of!(KernelArgs, out_stride))?;
    let (d, stride, row0) = fx.dense_view(args, offset_of!(KernelArgs, main))?;
    let ins = load_inputs(fx, args, used)?;
    let full = kind == OuterKind::FullAgg;
    let matrix_cells = summed_matrix_cells(plan, kind, oi);
    // As the LLVM tiles: `X * f` of the driver is already `0 * f` at its zeros.
    let masked_at_zeros = !(full && plan_info::multiplies_by_main(plan, oi.g));
    let wl = i64::from(W);
    // The single Sum partial: vector lanes at 0..W, corrections at LANES..LANES + W; the
    // scalar lane at W, its correction at LANES + W.
    let at = |fx: &mut Fx<'_>, off: i64, w: u32| partial_lanes(fx, out, full, off, w);
    let (sw, cw) = (at(fx, 0, W), at(fx, LANES as i64, W));
    let accv = [fx.vars(&sw), fx.vars(&cw)];
    let (s1, c1) = (at(fx, wl, 1), at(fx, LANES as i64 + wl, 1));
    let acc = [fx.vars(&s1), fx.vars(&c1)];
    let zero = fx.iconst(0);
    let j = fx.var(types::I64, zero);
    fx.for_range(rl, ru, &mut |fx, i| {
        let ti = fx.isub(i, rl);
        let r = fx.isub(i, row0);
        let main_row = fx.imul(r, stride);
        let tile_row = fx.imul(ti, tile_stride);
        let out_row = fx.imul(ti, out_stride);
        fx.b.def_var(j, col_lo);
        for w in [W, 1] {
            fx.for_var(j, col_hi, i64::from(w), &mut |fx, jv| {
                let jt = fx.isub(jv, col_lo);
                // The main view starts at the tile's first column (`col_lo`).
                let xa = fx.iadd(main_row, jt);
                let x = fx.load(d, xa, w);
                let ta = fx.iadd(tile_row, jt);
                let dots = fx.load(tile, ta, w);
                let mut body = Body::new(
                    plan,
                    &ins,
                    &matrix_cells,
                    At {
                        i,
                        j: jv,
                        w,
                        main: x.clone(),
                    },
                );
                body.outer_dot = Some(dots);
                let mut g = body.emit(fx, oi.g, false)?;
                if masked_at_zeros {
                    // `0 * body` at the driver's zeros, the unfused value.
                    let z = fx.fconst(0.0, w);
                    let nz = fx.fcmp(FloatCC::NotEqual, &x, &z);
                    let masked = fx.fmul(&g, &z);
                    g = fx.select(&nz, &g, &masked);
                }
                if full {
                    let (sv, cv) = if w == W {
                        (&accv[0], &accv[1])
                    } else {
                        (&acc[0], &acc[1])
                    };
                    let s = fx.get(sv, w);
                    let c = fx.get(cv, w);
                    let (s, c) = fx.kahan(&s, &c, &g);
                    fx.set(sv, &s);
                    fx.set(cv, &c);
                } else {
                    let oa = fx.iadd(out_row, jt);
                    fx.store(out, oa, &g);
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    if full {
        for (vars, off, w) in [
            (&accv[0], 0, W),
            (&accv[1], LANES as i64, W),
            (&acc[0], wl, 1),
            (&acc[1], LANES as i64 + wl, 1),
        ] {
            let v = fx.get(vars, w);
            let idx = fx.iconst(off);
            fx.store(out, idx, &v);
        }
    }
    let zero = fx.iconst(0);
    fx.b.ins().return_(&[zero]);
    Ok(())
}

/// `w` lanes of a full sum's partial at `out[off..]` (its running value), or zeros where the
/// operator has no full sum.
fn partial_lanes(fx: &mut Fx<'_>, out: Value, full: bool, off: i64, w: u32) -> V {
    if full {
        let idx = fx.iconst(off);
        fx.load(out, idx, w)
    } else {
        fx.fconst(0.0, w)
    }
}

/// The column index `ci[p]` (a `u32`) of a CSR non-zero.
fn column(fx: &mut Fx<'_>, ci: Value, p: Value) -> Value {
    let off = fx.b.ins().ishl_imm_u(p, 2);
    let a = fx.iadd(ci, off);
    fx.b.ins().uload32(super::fx::mem(), a, 0)
}

/// The address of row `r` of the row-major matrix at `base` with `len` doubles a row.
fn row_at(fx: &mut Fx<'_>, base: Value, r: Value, len: Value) -> Value {
    let at = fx.imul(r, len);
    fx.elem_addr(base, at)
}

/// The dot products `u · vs[t]` over `k` elements in one pass over `u`, in the LLVM
/// backend's order (see the module documentation).
pub(super) fn dot_products(
    fx: &mut Fx<'_>,
    u: Value,
    vs: &[Value],
    k: Value,
) -> Result<Vec<Value>, CodegenError> {
    let zero_w = fx.fconst(0.0, W);
    let acc: Vec<Vec<Vec<Variable>>> = vs
        .iter()
        .map(|_| (0..ACCS).map(|_| fx.vars(&zero_w)).collect())
        .collect();
    let zero1 = fx.b.ins().f64const(0.0);
    let tail: Vec<Variable> = vs.iter().map(|_| fx.var(types::F64, zero1)).collect();
    let zero = fx.iconst(0);
    let c = fx.var(types::I64, zero);
    let wl = i64::from(W);
    fx.for_var(c, k, ACCS as i64 * wl, &mut |fx, ci| {
        for a in 0..ACCS {
            let off = fx.b.ins().iadd_imm_s(ci, a as i64 * wl);
            let x = fx.load(u, off, W);
            for (v, slots) in vs.iter().zip(&acc) {
                let y = fx.load(*v, off, W);
                let cur = fx.get(&slots[a], W);
                let r = fx.fma(&x, &y, &cur);
                fx.set(&slots[a], &r);
            }
        }
        Ok(())
    })?;
    fx.for_var(c, k, wl, &mut |fx, ci| {
        let x = fx.load(u, ci, W);
        for (v, slots) in vs.iter().zip(&acc) {
            let y = fx.load(*v, ci, W);
            let cur = fx.get(&slots[0], W);
            let r = fx.fma(&x, &y, &cur);
            fx.set(&slots[0], &r);
        }
        Ok(())
    })?;
    fx.for_var(c, k, 1, &mut |fx, ci| {
        let x = fx.load(u, ci, 1);
        for (v, t) in vs.iter().zip(&tail) {
            let y = fx.load(*v, ci, 1);
            let cur = fx.get(&[*t], 1);
            let r = fx.fma(&x, &y, &cur);
            fx.set(&[*t], &r);
        }
        Ok(())
    })?;
    let mut out = Vec::with_capacity(vs.len());
    for (slots, t) in acc.iter().zip(&tail) {
        let a: Vec<V> = slots.iter().map(|s| fx.get(s, W)).collect();
        let s01 = fx.fadd(&a[0], &a[1]);
        let s23 = fx.fadd(&a[2], &a[3]);
        let s = fx.fadd(&s01, &s23);
        // The lanes as a halving tree (lane l += lane l + h for h = W/2, ..., 1).
        let mut lanes: Vec<Value> = (0..W).map(|l| fx.lane(&s, l)).collect();
        let mut h = lanes.len() / 2;
        while h > 0 {
            for l in 0..h {
                lanes[l] = fx.b.ins().fadd(lanes[l], lanes[l + h]);
            }
            h /= 2;
        }
        let tv = fx.b.use_var(*t);
        out.push(fx.b.ins().fadd(lanes[0], tv));
    }
    Ok(out)
}

/// `W` consecutive non-zeros `p..p + W` of row `i` (values `x`, columns at `ci`) of a
/// `lane_parallel` plan: their dot products, then the body and the final step on `W` lanes.
#[allow(clippy::too_many_arguments)]
fn elements_w(
    fx: &mut Fx<'_>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    st: &St,
    i: Value,
    ci: Value,
    x: V,
    p: Value,
) -> Result<(), CodegenError> {
    let (u, v) = (st.input(oi.u)?, st.input(oi.v)?);
    let urow = row_at(fx, u, i, st.k);
    let mut vrows = Vec::with_capacity(W as usize);
    for l in 0..i64::from(W) {
        let pl = fx.b.ins().iadd_imm_s(p, l);
        let j = column(fx, ci, pl);
        vrows.push(row_at(fx, v, j, st.k));
    }
    let mut dots = Vec::with_capacity(W as usize);
    for rows in vrows.chunks(DOTS_AT_ONCE) {
        dots.extend(dot_products(fx, urow, rows, st.k)?);
    }
    let dots = fx.of_lanes(&dots);
    // The body reads no column (see `lane_parallel`): `j` is a placeholder.
    let j = fx.iconst(0);
    let mut body = Body::new(
        plan,
        &st.ins,
        &st.matrix_cells,
        At {
            i,
            j,
            w: W,
            main: x,
        },
    );
    body.outer_dot = Some(dots);
    let g = body.emit(fx, oi.g, false)?;
    match kind {
        // Not counted: see `St::nnz`.
        OuterKind::CellWise => fx.store(st.out, p, &g),
        OuterKind::FullAgg => {
            let s = fx.get(&st.accv[0], W);
            let c = fx.get(&st.accv[1], W);
            let (s, c) = fx.kahan(&s, &c, &g);
            fx.set(&st.accv[0], &s);
            fx.set(&st.accv[1], &c);
        }
        _ => {
            return Err(CodegenError::Internal(Internal::MalformedPlan(
                "a final product taken W non-zeros at a time",
            )))
        }
    }
    Ok(())
}

/// The plan's matrix-cell flags ([`CPlan::matrix_cell_nodes`]), the root's cleared where the
/// operator only sums it ([`plan_info::summed_only`]), as the LLVM Outer entries have them.
fn summed_matrix_cells(plan: &CPlan, kind: OuterKind, oi: &OuterInputs) -> Vec<bool> {
    let mut cells = plan.matrix_cell_nodes();
    if kind == OuterKind::FullAgg && plan_info::summed_only(plan, oi.g) {
        if let Some(m) = cells.get_mut(oi.g) {
            *m = false;
        }
    }
    cells
}

#[allow(clippy::too_many_arguments)]
fn element(
    fx: &mut Fx<'_>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    st: &St,
    i: Value,
    j: Value,
    x: V,
    p: Value,
    visit: Visit,
) -> Result<(), CodegenError> {
    let urow = row_at(fx, st.input(oi.u)?, i, st.k);
    let vrow = row_at(fx, st.input(oi.v)?, j, st.k);
    let d = dot_products(fx, urow, &[vrow], st.k)?[0];
    let mut body = Body::new(
        plan,
        &st.ins,
        &st.matrix_cells,
        At {
            i,
            j,
            w: 1,
            main: x.clone(),
        },
    );
    body.outer_dot = Some(fx.splat(d, 1));
    let mut g = body.emit(fx, oi.g, false)?;
    let sum = kind == OuterKind::FullAgg;
    if visit == Visit::EveryCell && !(sum && plan_info::multiplies_by_main(plan, oi.g)) {
        // At a zero of the driver the unfused value is `0 * body`: 0, or NaN where the body
        // is not finite (a sum's `X * f` of the driver is that already).
        let z = fx.fconst(0.0, 1);
        let nz = fx.fcmp(FloatCC::NotEqual, &x, &z);
        let masked = fx.fmul(&g, &z);
        g = fx.select(&nz, &g, &masked);
    }
    match kind {
        // Not counted: see `St::nnz`.
        OuterKind::CellWise if visit == Visit::CsrNonZeros => fx.store(st.out, p, &g),
        OuterKind::CellWise => {
            fx.store(st.out, p, &g);
            let z = fx.fconst(0.0, 1);
            let nz = fx.fcmp(FloatCC::NotEqual, &g, &z);
            fx.count(&[st.nnz], &nz);
        }
        OuterKind::FullAgg => {
            let s = fx.get(&st.acc[..1], 1);
            let c = fx.get(&st.acc[1..], 1);
            let (s, c) = fx.kahan(&s, &c, &g);
            fx.set(&st.acc[..1], &s);
            fx.set(&st.acc[1..], &c);
        }
        OuterKind::Right | OuterKind::Left | OuterKind::LeftT => {
            let wk = oi.w.ok_or(CodegenError::Internal(Internal::MalformedPlan(
                "final product without its matrix",
            )))?;
            let (orow, wrow) = if kind == OuterKind::Right {
                (i, j)
            } else {
                (j, i)
            };
            let o = row_at(fx, st.out, orow, st.k2);
            let w = row_at(fx, st.input(wk)?, wrow, st.k2);
            axpy(fx, o, w, g.parts[0], st.k2)?;
        }
    }
    Ok(())
}

/// `o[c] += g * w[c]` for `c < len` (`W` lanes at a time, then a scalar tail; lanes are
/// independent, so any width gives the LLVM backend's bits).
fn axpy(fx: &mut Fx<'_>, o: Value, w_: Value, g: Value, len: Value) -> Result<(), CodegenError> {
    let zero = fx.iconst(0);
    let c = fx.var(types::I64, zero);
    for w in [W, 1] {
        fx.for_var(c, len, i64::from(w), &mut |fx, ci| {
            let gv = fx.splat(g, w);
            let a = fx.load(o, ci, w);
            let b = fx.load(w_, ci, w);
            let prod = fx.fmul(&gv, &b);
            let r = fx.fadd(&a, &prod);
            fx.store(o, ci, &r);
            Ok(())
        })?;
    }
    Ok(())
}
