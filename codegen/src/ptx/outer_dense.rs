//! The PTX kernel of Outer plans over a dense driver: every cell is computed, in tiles of
//! [`OUTER_TILE_ROWS`] rows by a block's threads' columns (a thread per column), so a
//! thread reads its row of `V` once per tile and each row of `U` is one broadcast load per
//! step of `k`, shared by the block's threads; the tile's dot products `u_i · v_j` stay in
//! registers and the body runs over them as the driver's row is read (coalesced). Cell-wise
//! outputs go to `out[i * n + j]`, a full sum to the block's partial pair.
//!
//! Checked against the CPU and timed by `lafuse bench --suite gpu`: on an H200 (session 28),
//! every shape and the NaN and infinities agree within 1e-9 relative, repeats bit-identical,
//! and `sum(X * log(U %*% t(V) + 1e-15))` over a dense 20000 x 2000 `X` at rank 10 takes
//! 0.34-0.35 ms (the host's 16 cores: 14-17 ms).

use super::kx::{declare_kernel, Kx};
use crate::backend::{CodegenError, Unsupported};
use crate::native::expr::{ierr, load_inputs, At, Body};
use crate::native::llvm::{load_vec, store_vec};
use crate::native::{input_uses, transposed_frame, used_mask};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;
use lafuse_compiler::fusion::cplan::{CPlan, OuterType};
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::gpu::abi::{GpuKernel, GpuMain, KernelShape, OUTER_TILE_ROWS};
use lafuse_skeletons::{AggKind, InputUse};
use std::mem::offset_of;

fn unsupported<T>(what: &'static str) -> Result<T, CodegenError> {
    Err(CodegenError::Unsupported(Unsupported::Construct(what)))
}

/// Emits the dense-driver Outer kernel of `plan` into `module`.
pub(super) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    outer_type: OuterType,
) -> Result<GpuKernel, CodegenError> {
    let out_node = plan.outputs[0];
    let shape =
        match outer_type {
            OuterType::CellWise => KernelShape::OuterCellWise,
            OuterType::FullAgg => KernelShape::OuterFullAgg,
            _ => return unsupported(
                "a left or right outer product over a dense driver on the GPU (it runs on the CPU)",
            ),
        };
    if transposed_frame(plan, &[out_node])? {
        return unsupported("an outer product over a transposed driver on the GPU");
    }
    let uses = input_uses(plan, &[out_node], false)?;
    let find = |f: &dyn Fn(InputUse) -> bool| uses.iter().position(|&x| f(x));
    let (Some(ui), Some(vi)) = (
        find(&|x| x == InputUse::OuterU),
        find(&|x| matches!(x, InputUse::OuterV | InputUse::OuterVT)),
    ) else {
        return unsupported("outer operator without u_i · v_j");
    };
    let kernel = GpuKernel {
        shape: shape.clone(),
        main: GpuMain::Dense,
        uses,
        transposed: false,
        narrow: None,
    };
    let mut k = declare_kernel(ctx, module)?;
    let ins = load_inputs(&k.fx, k.args, &used_mask(&kernel.uses))?;
    let out = k.ptr_field(offset_of!(KernelArgs, out))?;
    let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
    let cols = k.i64_field(offset_of!(KernelArgs, cols))?;
    let kk = k.i64_field(offset_of!(KernelArgs, k))?;
    let main = k.ptr_field(offset_of!(KernelArgs, main) + offset_of!(DenseView, data))?;
    let (up, _) = ins.get(ui)?;
    let (vp, _) = ins.get(vi)?;
    let acc = k.acc(AggKind::Sum)?;
    let tile_rows = u64::from(OUTER_TILE_ROWS);
    let dots: Vec<PointerValue<'c>> = (0..tile_rows)
        .map(|_| k.fx.slot(k.fx.vty(1).into()))
        .collect::<Result<_, _>>()?;
    let threads = k.threads();
    let div_up = |k: &Kx<'_, 'c>, a: IntValue<'c>, b: IntValue<'c>| {
        k.fx.b
            .build_int_unsigned_div(k.fx.sub(k.fx.add(a, b)?, k.fx.i64c(1))?, b, "tiles")
            .map_err(ierr)
    };
    let col_tiles = div_up(&k, cols, threads)?;
    let row_tiles = div_up(&k, rows, k.fx.i64c(tile_rows))?;
    let tiles = k.fx.mul(row_tiles, col_tiles)?;
    // The kernel is launched for a non-empty driver only, so `rows - 1` and `cols - 1` are
    // indexes: loads at a clamped index stay in bounds, their results unused.
    let last_row = k.fx.sub(rows, k.fx.i64c(1))?;
    let last_col = k.fx.sub(cols, k.fx.i64c(1))?;
    let (bid, nb, tid) = (k.bid, k.nb, k.tid);
    k.for_stride(bid, tiles, nb, &mut |k, t| {
        let fx = &k.fx;
        let rt =
            fx.b.build_int_unsigned_div(t, col_tiles, "rt")
                .map_err(ierr)?;
        let ct =
            fx.b.build_int_unsigned_rem(t, col_tiles, "ct")
                .map_err(ierr)?;
        let i0 = fx.mul(rt, fx.i64c(tile_rows))?;
        let j = fx.add(fx.mul(ct, threads)?, tid)?;
        let col_inside = k.ult(j, cols)?;
        let jc = k.clamp(j, col_inside, last_col)?;
        let fx = &k.fx;
        let vb = fx.mul(jc, kk)?;
        let mut ubs = Vec::new();
        for (r, &d) in dots.iter().enumerate() {
            fx.store(d, fx.splat_const(0.0, 1))?;
            let i = fx.add(i0, fx.i64c(r as u64))?;
            let ic = k.clamp(i, k.ult(i, rows)?, last_row)?;
            ubs.push(k.fx.mul(ic, kk)?);
        }
        // The dot products in order over k, as the CSR kernel and the CPU's non-zero path
        // take them.
        k.for_stride(k.fx.i64c(0), kk, k.fx.i64c(1), &mut |k, s| {
            let fx = &k.fx;
            let v = load_vec(&fx.b, fx.vty(1), vp, fx.add(vb, s)?)?;
            for (&d, &ub) in dots.iter().zip(&ubs) {
                let u = load_vec(&fx.b, fx.vty(1), up, fx.add(ub, s)?)?;
                fx.store(d, fx.fma(u, v, fx.load_v(d)?)?)?;
            }
            Ok(())
        })?;
        // A whole tile (every row inside, the thread's column too): the driver's cells read
        // together, then the bodies in row order; elsewhere each row is guarded.
        let whole_rows =
            k.fx.b
                .build_int_compare(
                    IntPredicate::ULE,
                    k.fx.add(i0, k.fx.i64c(tile_rows))?,
                    rows,
                    "whole",
                )
                .map_err(ierr)?;
        let whole =
            k.fx.b
                .build_and(whole_rows, col_inside, "whole_tile")
                .map_err(ierr)?;
        let cell_at =
            |k: &Kx<'_, 'c>, r: usize| -> Result<(IntValue<'c>, VectorValue<'c>), CodegenError> {
                let i = k.fx.add(i0, k.fx.i64c(r as u64))?;
                let at = k.fx.add(k.fx.mul(i, cols)?, j)?;
                Ok((i, load_vec(&k.fx.b, k.fx.vty(1), main, at)?))
            };
        let finish = |k: &mut Kx<'_, 'c>, r: usize, i: IntValue<'c>, x: VectorValue<'c>| {
            let mut body = Body::new(
                plan,
                &ins,
                At {
                    i,
                    j,
                    w: 1,
                    main: x,
                },
            );
            body.outer_dot = Some(k.fx.load_v(dots[r])?);
            let g = body.emit(&k.fx, out_node, false)?;
            match shape {
                KernelShape::OuterCellWise => {
                    store_vec(&k.fx.b, out, k.fx.add(k.fx.mul(i, cols)?, j)?, g)
                }
                _ => k.fold(acc, g),
            }
        };
        let (then, other, done) = (
            ctx.append_basic_block(k.fx.func, "tile"),
            ctx.append_basic_block(k.fx.func, "edge"),
            ctx.append_basic_block(k.fx.func, "tile_done"),
        );
        k.fx.b
            .build_conditional_branch(whole, then, other)
            .map_err(ierr)?;
        k.fx.b.position_at_end(then);
        let cells: Vec<(IntValue<'c>, VectorValue<'c>)> = (0..dots.len())
            .map(|r| cell_at(k, r))
            .collect::<Result<_, _>>()?;
        for (r, (i, x)) in cells.into_iter().enumerate() {
            finish(k, r, i, x)?;
        }
        k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        k.fx.b.position_at_end(other);
        for r in 0..dots.len() {
            let i = k.fx.add(i0, k.fx.i64c(r as u64))?;
            let inside =
                k.fx.b
                    .build_and(k.ult(i, rows)?, col_inside, "inside")
                    .map_err(ierr)?;
            k.when(inside, &mut |k| {
                let (i, x) = cell_at(k, r)?;
                finish(k, r, i, x)
            })?;
        }
        k.fx.b.build_unconditional_branch(done).map_err(ierr)?;
        k.fx.b.position_at_end(done);
        Ok(())
    })?;
    if kernel.shape == KernelShape::OuterFullAgg {
        let bid = k.bid;
        k.block_reduce(acc, &mut |k, s, c| k.write_pair(out, bid, s, c))?;
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(kernel)
}
