//! The two plan-independent block primitives of the dense Row entry (`X[i, ] %*% B` for a
//! block of rows, and the deferred outer-product updates), compiled once per process.

use super::*;

/// `lafuse_row_axpy_rows(o, x, x stride, s, s stride, cols, rows, len)`: see
/// [`define_axpy_rows`].
pub(super) const AXPY_ROWS: &str = "lafuse_row_axpy_rows";
/// `lafuse_row_dot_rows(x, stride, bt, l, cols, rows, o)`: see [`define_dot_rows`].
pub(super) const DOT_ROWS: &str = "lafuse_row_dot_rows";

pub(super) fn axpy_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, p, i, p, i, i, i, i], false)
}

pub(super) fn dot_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, i, p, i, i, i, p], false)
}

/// A block primitive of the dense entry (see [`ROW_BLOCK`]). Each is plan-independent, so it
/// is compiled once per process, as a library of its own (their unrolled loops would otherwise
/// be most of a Row operator's machine code): an operator that calls both builds them on two
/// cores, and one that calls one of them does not wait for the other (the dot products take
/// about 23 ms of LLVM's time, the updates 13 ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockPrim {
    /// `lafuse_row_dot_rows`: products of a block of rows with a transposed matrix.
    DotRows,
    /// `lafuse_row_axpy_rows`: a block's outer-product updates of the partial.
    AxpyRows,
}

pub(super) static DOT_ROWS_LIBRARY: OnceLock<Result<Library, CodegenError>> = OnceLock::new();
pub(super) static AXPY_ROWS_LIBRARY: OnceLock<Result<Library, CodegenError>> = OnceLock::new();

impl BlockPrim {
    /// The function's name, which is also its library's module name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BlockPrim::DotRows => DOT_ROWS,
            BlockPrim::AxpyRows => AXPY_ROWS,
        }
    }

    pub(super) fn cell(self) -> &'static OnceLock<Result<Library, CodegenError>> {
        match self {
            BlockPrim::DotRows => &DOT_ROWS_LIBRARY,
            BlockPrim::AxpyRows => &AXPY_ROWS_LIBRARY,
        }
    }

    /// Whether its library is built (or failed to build).
    pub(crate) fn built(self) -> bool {
        self.cell().get().is_some()
    }

    /// Its library, built on first use.
    pub(crate) fn library(
        self,
        store: Option<&super::super::ObjectStore>,
    ) -> Result<&'static Library, CodegenError> {
        Library::get(
            self.cell(),
            self.name(),
            |ctx, module| {
                match self {
                    BlockPrim::DotRows => define_dot_rows(ctx, module)?,
                    BlockPrim::AxpyRows => define_axpy_rows(ctx, module)?,
                }
                Ok(vec![self.name().to_string()])
            },
            store,
        )
    }
}

/// `o[j] += s * x[j]` (`lafuse_row_axpy`, inlined where called).
pub(super) fn emit_axpy<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
) -> Result<FunctionValue<'c>, CodegenError> {
    let (pf, f64m, i64m) = (
        f64_ptr(ctx).into(),
        ctx.f64_type().into(),
        ctx.i64_type().into(),
    );
    let mut fx = declare_primitive(ctx, module, "lafuse_row_axpy", &[pf, pf, f64m, i64m], None);
    let o = fx.param(0)?.into_pointer_value();
    let x = fx.param(1)?.into_pointer_value();
    let s = fx.param(2)?.into_float_value();
    let len = fx.param(3)?.into_int_value();
    lanes(&mut fx, len, &mut |fx, j, w| {
        let sv = fx.splat(s, w)?;
        let a = load_vec(&fx.b, fx.vty(w), o, j)?;
        let b = load_vec(&fx.b, fx.vty(w), x, j)?;
        store_vec(&fx.b, o, j, fx.fadd(a, fx.fmul(sv, b)?)?)
    })?;
    fx.b.build_return(None).map_err(ierr)?;
    Ok(fx.func)
}

/// `lafuse_row_axpy_rows`: a block's outer-product updates of the partial.
pub(super) fn define_axpy_rows<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
) -> Result<(), CodegenError> {
    let axpy = emit_axpy(ctx, module)?;
    // For each of `cols` rows of the partial, `o_c = o + c * len` with the scales
    // `s_c = s + c`: o_c[j] += s_c[0] * x[j], then += s_c[ss] * x[stride + j], ... for `rows`
    // rows. A full block (`ROW_BLOCK` rows) updates two partial rows per pass over the block
    // (then the odd one), each loaded and stored once; a short block goes row by row. Either
    // way every element sees its rows in order.
    {
        let f = library::declare(ctx, module, AXPY_ROWS, axpy_rows_type(ctx));
        let mut fx = Fx::new(ctx, module, f);
        let o = fx.param(0)?.into_pointer_value();
        let x = fx.param(1)?.into_pointer_value();
        let stride = fx.param(2)?.into_int_value();
        let s = fx.param(3)?.into_pointer_value();
        let ss = fx.param(4)?.into_int_value();
        let cols = fx.param(5)?.into_int_value();
        let rows = fx.param(6)?.into_int_value();
        let len = fx.param(7)?.into_int_value();
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, rows, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        if_else(
            &mut fx,
            full,
            &mut |fx| {
                let xs = (0..ROW_BLOCK)
                    .map(|r| gep(&fx.b, x, fx.mul(stride, fx.i64c(r))?))
                    .collect::<Result<Vec<_>, _>>()?;
                let ahead = fx.mul(stride, fx.i64c(PREFETCH_BLOCKS * ROW_BLOCK))?;
                let c = fx.slot(fx.ctx.i64_type().into())?;
                fx.store(c, fx.i64c(0))?;
                for nc in [2u64, 1] {
                    fx.for_slot(c, cols, nc, &mut |fx, c| {
                        let mut os = Vec::new();
                        let mut svs = Vec::new();
                        for t in 0..nc {
                            let ct = fx.add(c, fx.i64c(t))?;
                            os.push(gep(&fx.b, o, fx.mul(ct, len)?)?);
                            let st = gep(&fx.b, s, ct)?;
                            let mut per = Vec::new();
                            for r in 0..ROW_BLOCK {
                                let sv = load(&fx.b, gep(&fx.b, st, fx.mul(ss, fx.i64c(r))?)?)?;
                                per.push(sv.into_float_value());
                            }
                            svs.push(per);
                        }
                        lanes(fx, len, &mut |fx, j, w| {
                            if w == W {
                                // The second half of the rows of the block `PREFETCH_BLOCKS`
                                // on, a line of each per step, into the L2: memory reads stay in
                                // flight while this block is added from the cache.
                                for r in ROW_BLOCK / 2..ROW_BLOCK {
                                    let row = fx.add(ahead, fx.mul(stride, fx.i64c(r))?)?;
                                    expr::prefetch_element(fx, x, fx.add(row, j)?, 2)?;
                                }
                            }
                            let mut acc = os
                                .iter()
                                .map(|ot| load_vec(&fx.b, fx.vty(w), *ot, j))
                                .collect::<Result<Vec<_>, _>>()?;
                            for (r, xr) in xs.iter().enumerate() {
                                let b = load_vec(&fx.b, fx.vty(w), *xr, j)?;
                                for (a, per) in acc.iter_mut().zip(&svs) {
                                    *a = fx.fadd(*a, fx.fmul(fx.splat(per[r], w)?, b)?)?;
                                }
                            }
                            for (ot, a) in os.iter().zip(acc) {
                                store_vec(&fx.b, *ot, j, a)?;
                            }
                            Ok(())
                        })
                    })?;
                }
                Ok(())
            },
            &mut |fx| {
                fx.for_range(fx.i64c(0), cols, &mut |fx, c| {
                    let oc = gep(&fx.b, o, fx.mul(c, len)?)?;
                    let sc = gep(&fx.b, s, c)?;
                    fx.for_range(fx.i64c(0), rows, &mut |fx, r| {
                        let xr = gep(&fx.b, x, fx.mul(stride, r)?)?;
                        let sr = load(&fx.b, gep(&fx.b, sc, fx.mul(ss, r)?)?)?;
                        call(fx, axpy, &[oc.into(), xr.into(), sr.into(), len.into()])?;
                        Ok(())
                    })
                })
            },
        )?;
        fx.b.build_return(None).map_err(ierr)?;
    }
    Ok(())
}

/// `lafuse_row_dot_rows`: the products of a block of rows with a transposed matrix.
pub(super) fn define_dot_rows<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
) -> Result<(), CodegenError> {
    // o[q * cols + c] = x[q * stride + ..] · bt[c * l + ..] for `rows` rows and `cols`
    // columns: `ROW_BLOCK` rows at once (two columns per pass over `bt`, then the odd one), or
    // row by row; either way each value is one `W`-lane accumulator over the row in order,
    // lanes summed as a halving tree, then the scalar tail (see `ROW_BLOCK`).
    {
        let f = library::declare(ctx, module, DOT_ROWS, dot_rows_type(ctx));
        let mut fx = Fx::new(ctx, module, f);
        let x = fx.param(0)?.into_pointer_value();
        let stride = fx.param(1)?.into_int_value();
        let bt = fx.param(2)?.into_pointer_value();
        let l = fx.param(3)?.into_int_value();
        let cols = fx.param(4)?.into_int_value();
        let rows = fx.param(5)?.into_int_value();
        let o = fx.param(6)?.into_pointer_value();
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, rows, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        // The products of `nr` rows from `x0` with the columns from `c`, `nc` at a time.
        let block = |fx: &mut Fx<'_, 'c>,
                     x0: PointerValue<'c>,
                     o0: PointerValue<'c>,
                     nr: u64|
         -> Result<(), CodegenError> {
            let xs = (0..nr)
                .map(|q| gep(&fx.b, x0, fx.mul(stride, fx.i64c(q))?))
                .collect::<Result<Vec<_>, _>>()?;
            let c = fx.slot(fx.ctx.i64_type().into())?;
            fx.store(c, fx.i64c(0))?;
            // A short block's rows take the columns one at a time: no faster in pairs, and
            // one loop less to compile.
            let widths: &[u64] = if nr == ROW_BLOCK { &[2, 1] } else { &[1] };
            let ahead = (nr == ROW_BLOCK)
                .then(|| fx.mul(stride, fx.i64c(PREFETCH_BLOCKS * ROW_BLOCK)))
                .transpose()?;
            for &nc in widths {
                fx.for_slot(c, cols, nc, &mut |fx, c| {
                    let bs = (0..nc)
                        .map(|t| gep(&fx.b, bt, fx.mul(fx.add(c, fx.i64c(t))?, l)?))
                        .collect::<Result<Vec<_>, _>>()?;
                    let vals = dot_block(fx, &xs, &bs, l, ahead)?;
                    for (k, v) in vals.into_iter().enumerate() {
                        let (q, t) = (k as u64 / nc, k as u64 % nc);
                        let at = fx.add(fx.mul(fx.i64c(q), cols)?, fx.add(c, fx.i64c(t))?)?;
                        fx.store(gep(&fx.b, o0, at)?, v)?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        };
        if_else(
            &mut fx,
            full,
            &mut |fx| block(fx, x, o, ROW_BLOCK),
            &mut |fx| {
                fx.for_range(fx.i64c(0), rows, &mut |fx, q| {
                    let xq = gep(&fx.b, x, fx.mul(stride, q)?)?;
                    let oq = gep(&fx.b, o, fx.mul(cols, q)?)?;
                    block(fx, xq, oq, 1)
                })
            },
        )?;
        fx.b.build_return(None).map_err(ierr)?;
    }
    Ok(())
}

/// The dot products of every row `xs[q]` with every vector `bs[t]` over `len` elements, each
/// in one accumulator of [`W`] lanes (then a scalar tail), all in one pass over the rows; the
/// lanes are summed as a halving tree and the tail added last. Returns them row by row
/// (`q * bs.len() + t`).
pub(super) fn dot_block<'c>(
    fx: &mut Fx<'_, 'c>,
    xs: &[PointerValue<'c>],
    bs: &[PointerValue<'c>],
    len: IntValue<'c>,
    ahead: Option<IntValue<'c>>,
) -> Result<Vec<FloatValue<'c>>, CodegenError> {
    let mut acc = Vec::new();
    for w in [W, 1] {
        let mut per = Vec::new();
        for _ in 0..xs.len() * bs.len() {
            let s = fx.slot(fx.vty(w).into())?;
            fx.store(s, fx.splat_const(0.0, w))?;
            per.push(s);
        }
        acc.push(per);
    }
    let j = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(j, fx.i64c(0))?;
    for (a, w) in [(0usize, W), (1, 1)] {
        let slots = acc[a].clone();
        fx.for_slot(j, len, u64::from(w), &mut |fx, j| {
            let bv = bs
                .iter()
                .map(|b| load_vec(&fx.b, fx.vty(w), *b, j))
                .collect::<Result<Vec<_>, _>>()?;
            for (q, x) in xs.iter().enumerate() {
                if let (Some(d), true) = (ahead, w == W && q < xs.len() / 2) {
                    // For the first half of the rows, this row's line `ahead` elements on (the
                    // same row of the block `PREFETCH_BLOCKS` on; `lafuse_row_axpy_rows`
                    // prefetches the other half): memory reads stay in flight while this block
                    // is computed from the cache.
                    expr::prefetch_element(fx, *x, fx.add(d, j)?, 2)?;
                }
                let xv = load_vec(&fx.b, fx.vty(w), *x, j)?;
                for (t, b) in bv.iter().enumerate() {
                    let s = slots[q * bs.len() + t];
                    let cur = fx.load_v(s)?;
                    fx.store(s, fx.fma(xv, *b, cur)?)?;
                }
            }
            Ok(())
        })?;
    }
    let mut out = Vec::with_capacity(xs.len() * bs.len());
    for q in 0..xs.len() {
        for t in 0..bs.len() {
            let v = fx.load_v(acc[0][q * bs.len() + t])?;
            let tv = scalar0(fx, fx.load_v(acc[1][q * bs.len() + t])?)?;
            let r = outer::sum_lanes(fx, v)?;
            out.push(fx.b.build_float_add(r, tv, "r").map_err(ierr)?);
        }
    }
    Ok(out)
}
