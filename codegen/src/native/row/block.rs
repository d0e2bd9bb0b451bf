//! The two plan-independent block primitives of the dense Row entry (`X[i, ] %*% B` for a
//! block of rows, and the deferred outer-product updates): their names, types and addresses
//! (they are functions of `lafuse_skeletons::row_blocks`), and the `axpy` they are made of.

use super::*;

/// `lafuse_row_axpy_rows(o, x, x stride, s, s stride, cols, rows, len)`: see
/// `lafuse_skeletons::row_blocks::lafuse_row_axpy_rows`.
pub(super) const AXPY_ROWS: &str = "lafuse_row_axpy_rows";
/// `lafuse_row_dot_rows(x, stride, bt, l, cols, rows, o)`: see
/// `lafuse_skeletons::row_blocks::lafuse_row_dot_rows`.
pub(super) const DOT_ROWS: &str = "lafuse_row_dot_rows";

pub(super) fn axpy_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, p, i, p, i, i, i, i], false)
}

pub(super) fn dot_rows_type(ctx: &Context) -> inkwell::types::FunctionType<'_> {
    let (p, i) = (f64_ptr(ctx).into(), ctx.i64_type().into());
    ctx.void_type().fn_type(&[p, i, p, i, i, i, p], false)
}

/// A block primitive of the dense entry (see [`ROW_BLOCK`]). Both are plan-independent
/// functions of `lafuse_skeletons::row_blocks`, which operators call by name (the JIT maps
/// the names to them, [`block_address`]). They were LLVM libraries built at the first Row
/// compilation of every process (the dot products took about 23 ms of LLVM's time, the
/// updates 13 ms); as functions of the crate they cost no compilation, and Cranelift's entry
/// points can call the same code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockPrim {
    /// `lafuse_row_dot_rows`: products of a block of rows with a transposed matrix.
    DotRows,
    /// `lafuse_row_axpy_rows`: a block's outer-product updates of the partial.
    AxpyRows,
}

// The skeletons' functions compute with the generated code's lanes and blocks.
const _: () = assert!(
    ROW_BLOCK as usize == lafuse_skeletons::row_blocks::BLOCK_ROWS
        && W as usize == lafuse_skeletons::row_blocks::LANES
);

/// The address of block primitive `name`, if it names one.
pub(crate) fn block_address(name: &str) -> Option<usize> {
    use lafuse_skeletons::row_blocks::{lafuse_row_axpy_rows, lafuse_row_dot_rows};
    match name {
        DOT_ROWS => Some(lafuse_row_dot_rows as *const () as usize),
        AXPY_ROWS => Some(lafuse_row_axpy_rows as *const () as usize),
        _ => None,
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
