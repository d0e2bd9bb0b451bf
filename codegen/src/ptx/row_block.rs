//! The Row kernel's narrow entry ([`NARROW_ENTRY`]): column sums of rows whose every column is
//! resident (`cols <= BLOCK_THREADS * resident_columns`), the block reading a tile of rows
//! together and computing them together.
//!
//! Thread `t` owns columns `t + BLOCK_THREADS * c` of every row. A tile's values of `X` are
//! all loaded first (rows × resident columns loads in flight per thread), then kept in
//! registers: each row aggregate is a per-thread fold over the thread's columns, a warp's fold
//! by shuffles ([`warp_reduce`]) and the block's fold of the warps' values in warp order, which
//! every thread does alike, so all hold the row's value; the rows' terms then go into the
//! thread's resident column sums, rows in order. `X` is read from memory once, through the
//! read-only path, where a warp per row reads a tile's rows a second time for its column walk.
//!
//! Row aggregates are plain sums, as the CPU's Row operator's (a Kahan step is five dependent
//! double operations an element where the fused product itself is two, and the block's tree
//! of 2048 columns is more accurate than the CPU's sequential sum already). The column sums
//! are plain too; the fold of the blocks' partial rows is compensated.
//!
//! Deterministic as the warp-per-row kernel: every fold runs in a fixed order. A level of
//! aggregates writes one of two shared buffers and waits at one barrier; the next level writes
//! the other, and the one after that reuses the first only after every thread has passed the
//! barrier that follows its reads.

use super::kx::{declare_named, Acc, Kx};
use super::row::{
    body_at, column_term, warp_reduce, write_column_sums, Analysis, EntryArgs, Pass,
    RowKernelOptions,
};
use crate::backend::CodegenError;
use crate::native::expr::{ierr, InputPtrs};
use crate::native::llvm::{gep, load_vec, store_vec};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;
use lafuse_compiler::fusion::cplan::{CNodeId, CPlan};
use lafuse_compiler::hops::AggOp;
use lafuse_skeletons::gpu::abi::{BLOCK_THREADS, NARROW_ENTRY};
use lafuse_skeletons::AggKind;
use std::collections::HashMap;

/// Warps of a block.
const WARPS: u64 = BLOCK_THREADS as u64 / 32;

/// The narrow entry's register cap where the layout sets none: three blocks of 256 threads a
/// multiprocessor (65536 registers). On an H200 (`t(X) %*% (X %*% v)` at 20000 x 2000,
/// session 29) the 1-row layout took 0.118 ms at 80 registers, 0.133 at 128 (two blocks), and
/// session 28's 2-row layout with Kahan row sums 0.357 ms at 140 (one block), 0.169 at 128.
const NARROW_MAX_REGISTERS: u32 = 80;

/// Emits the narrow entry of a column-summed Row plan (`opts.block_rows` rows a tile,
/// `opts.resident_columns` columns a thread) into `module`. The host launches it only where
/// the rows fit; elsewhere it returns without reading anything.
pub(super) fn emit_narrow<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    a: &Analysis,
    opts: RowKernelOptions,
) -> Result<(), CodegenError> {
    let mut k = declare_named(ctx, module, NARROW_ENTRY)?;
    let cap = match opts.max_registers {
        0 => NARROW_MAX_REGISTERS,
        n => n,
    };
    super::nvptx::max_registers(ctx, module, k.fx.func, cap)?;
    let EntryArgs {
        ins,
        out,
        rows,
        cols,
        main,
    } = EntryArgs::load(&k, a)?;
    let ncols = EntryArgs::ncols_of(&k, cols)?;
    let sums: Vec<Acc<'c>> = (0..opts.resident_columns)
        .map(|_| k.acc(AggKind::Sum))
        .collect::<Result<_, _>>()?;
    let span = k.fx.i64c(u64::from(BLOCK_THREADS * opts.resident_columns));
    let some = k.ult(k.fx.i64c(0), cols)?;
    let fit =
        k.fx.b
            .build_int_compare(IntPredicate::ULE, cols, span, "fit")
            .map_err(ierr)?;
    let fits = k.fx.b.build_and(some, fit, "fits").map_err(ierr)?;
    k.when(fits, &mut |k| {
        walk(
            k,
            &BlockWalk {
                plan,
                a,
                ins: &ins,
                main,
                rows,
                cols,
                ncols,
                resident: &sums,
                block_rows: opts.block_rows,
                prefetch: opts.prefetch,
            },
        )?;
        // Every column is resident, so this writes the block's whole partial row.
        write_column_sums(k, &sums, out, cols)
    })?;
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(())
}

/// What the block walk reads and where its column sums go.
struct BlockWalk<'a, 'c> {
    plan: &'a CPlan,
    a: &'a Analysis,
    ins: &'a InputPtrs<'c>,
    /// The dense main input's values.
    main: PointerValue<'c>,
    rows: IntValue<'c>,
    /// At least 1 and at most `BLOCK_THREADS * resident.len()`.
    cols: IntValue<'c>,
    /// `cols` as a double (`rowMeans`).
    ncols: VectorValue<'c>,
    /// The thread's column sums: `resident[c]` is column `tid + BLOCK_THREADS * c`.
    resident: &'a [Acc<'c>],
    /// Rows of a tile.
    block_rows: u32,
    /// Issue the next tile's loads before computing the current one.
    prefetch: bool,
}

/// Walks the block's tiles of `w.block_rows` rows (a grid-stride walk), adding each tile's
/// terms to the resident column sums. Every thread of the block must reach this.
fn walk<'c>(k: &mut Kx<'_, 'c>, w: &BlockWalk<'_, 'c>) -> Result<(), CodegenError> {
    let tile_rows = u64::from(w.block_rows);
    let passes = w.a.passes.len().max(1) as u64;
    let (tid, bid, nb) = (k.tid, k.bid, k.nb);
    let lane = k.fx.b.build_and(tid, k.fx.i64c(31), "lane").map_err(ierr)?;
    let warp =
        k.fx.b
            .build_right_shift(tid, k.fx.i64c(5), false, "warp")
            .map_err(ierr)?;
    let first_lane =
        k.fx.b
            .build_int_compare(IntPredicate::EQ, lane, k.fx.i64c(0), "l0")
            .map_err(ierr)?;
    // Two buffers of a value per warp, pass and tile row.
    let half = WARPS * passes * tile_rows;
    let sh = k.shared("lafuse_sh_block_rows", (2 * half) as u32)?;
    let phase = k.fx.slot(k.fx.ctx.i64_type().into())?;
    k.fx.store(phase, k.fx.i64c(0))?;
    let last_col = k.fx.sub(w.cols, k.fx.i64c(1))?;
    let main = k.global_ro(w.main)?;
    // The thread's columns, where each is read (a column past the matrix reads the last one,
    // and its values are never folded), and that column of the matrix's first row: a load is
    // then one address addition from the row's offset.
    let columns: Vec<(IntValue<'c>, IntValue<'c>, PointerValue<'c>)> = (0..w.resident.len())
        .map(|c| {
            let j =
                k.fx.add(tid, k.fx.i64c(u64::from(BLOCK_THREADS) * c as u64))?;
            let inside = k.ult(j, w.cols)?;
            let read = k.clamp(j, inside, last_col)?;
            Ok((inside, read, gep(&k.fx.b, main, read)?))
        })
        .collect::<Result<_, CodegenError>>()?;
    let tile = k.fx.i64c(tile_rows);
    let tiles =
        k.fx.b
            .build_int_unsigned_div(
                k.fx.sub(k.fx.add(w.rows, tile)?, k.fx.i64c(1))?,
                tile,
                "tiles",
            )
            .map_err(ierr)?;
    // Tile `t`'s rows (a row past the matrix reads the last one; its values are never
    // folded): only where the matrix has a row.
    let rows_of = |k: &Kx<'_, 'c>, t: IntValue<'c>| {
        let last_row = k.fx.sub(w.rows, k.fx.i64c(1))?;
        let i0 = k.fx.mul(t, tile)?;
        (0..tile_rows)
            .map(|r| {
                let i = k.fx.add(i0, k.fx.i64c(r))?;
                let inside = k.ult(i, w.rows)?;
                Ok((inside, k.clamp(i, inside, last_row)?))
            })
            .collect::<Result<Vec<(IntValue<'c>, IntValue<'c>)>, CodegenError>>()
    };
    // Their values at the thread's columns, every load issued before any is used.
    let load_tile = |k: &Kx<'_, 'c>, rows_at: &[(IntValue<'c>, IntValue<'c>)]| {
        rows_at
            .iter()
            .map(|&(_, i)| {
                let offset = k.fx.mul(i, w.cols)?;
                columns
                    .iter()
                    .map(|&(_, _, first)| k.load_ro(first, offset))
                    .collect()
            })
            .collect::<Result<Vec<Vec<VectorValue<'c>>>, CodegenError>>()
    };
    // Prefetching: the values of the block's next tile, loaded during the current one's work.
    let ahead: Vec<Vec<PointerValue<'c>>> = if w.prefetch {
        let slots = (0..tile_rows)
            .map(|_| {
                (0..columns.len())
                    .map(|_| k.fx.slot(k.fx.vty(1).into()))
                    .collect()
            })
            .collect::<Result<Vec<Vec<_>>, CodegenError>>()?;
        let any = k.ult(bid, tiles)?;
        k.when(any, &mut |k| {
            let xs = load_tile(k, &rows_of(k, bid)?)?;
            store_tile(k, &slots, xs)
        })?;
        slots
    } else {
        Vec::new()
    };
    k.for_stride(bid, tiles, nb, &mut |k, t| {
        let rows_at = rows_of(k, t)?;
        let (xs, next) = if w.prefetch {
            let xs = ahead
                .iter()
                .map(|row| row.iter().map(|&p| k.fx.load_v(p)).collect())
                .collect::<Result<Vec<Vec<_>>, CodegenError>>()?;
            // Past the last tile the rows clamp to the matrix's last: harmless reads.
            (xs, Some(load_tile(k, &rows_of(k, k.fx.add(t, nb)?)?)?))
        } else {
            (load_tile(k, &rows_at)?, None)
        };
        let at_cell = |r: usize, c: usize, given: &HashMap<CNodeId, VectorValue<'c>>| {
            body_at(
                w.plan,
                w.ins,
                (rows_at[r].1, columns[c].1, xs[r][c]),
                given.clone(),
            )
        };
        let mut given: Vec<HashMap<CNodeId, VectorValue<'c>>> =
            vec![HashMap::new(); tile_rows as usize];
        for level in 1..=w.a.levels {
            let here: Vec<(u64, CNodeId, Pass)> =
                w.a.passes
                    .iter()
                    .enumerate()
                    .filter(|p| p.1 .2 == level)
                    .map(|(s, &(node, p, _))| (s as u64, node, p))
                    .collect();
            let base = k.fx.mul(k.fx.load_i64(phase)?, k.fx.i64c(half))?;
            let slot = |k: &Kx<'_, 'c>, warp: IntValue<'c>, s: u64, r: u64| {
                let at = k.fx.mul(warp, k.fx.i64c(passes * tile_rows))?;
                k.fx.add(base, k.fx.add(at, k.fx.i64c(s * tile_rows + r))?)
            };
            // Each thread's fold over its columns, the warp's by shuffles, lane 0's pair out.
            for &(s, _, p) in &here {
                for (r, given_r) in given.iter().enumerate() {
                    let acc = k.plain_acc(p.agg())?;
                    for (c, &(inside, j, _)) in columns.iter().enumerate() {
                        let mut body = at_cell(r, c, given_r);
                        let v = p.term(&k.fx, &mut body, w.ins, j)?;
                        k.fold_masked(acc, v, Some(inside))?;
                    }
                    warp_reduce(k, acc)?;
                    let at = slot(k, warp, s, r as u64)?;
                    k.when(first_lane, &mut |k| {
                        store_vec(&k.fx.b, sh, at, k.fx.load_v(acc.s)?)
                    })?;
                }
            }
            k.barrier()?;
            // The block's fold of the warps' values, in warp order, by every thread.
            for &(s, node, p) in &here {
                for (r, given_r) in given.iter_mut().enumerate() {
                    let (acc, other) = (k.plain_acc(p.agg())?, k.plain_acc(p.agg())?);
                    for wi in 0..WARPS {
                        let at = slot(k, k.fx.i64c(wi), s, r as u64)?;
                        let vs = load_vec(&k.fx.b, k.fx.vty(1), sh, at)?;
                        k.fx.store(other.s, vs)?;
                        k.merge(acc, other)?;
                    }
                    let v = k.fx.load_v(acc.s)?;
                    let v = match p {
                        Pass::Agg { f: AggOp::Mean, .. } => k.fx.fdiv(v, w.ncols)?,
                        _ => v,
                    };
                    given_r.insert(node, v);
                }
            }
            let flipped =
                k.fx.b
                    .build_xor(k.fx.load_i64(phase)?, k.fx.i64c(1), "phase")
                    .map_err(ierr)?;
            k.fx.store(phase, flipped)?;
        }
        // The tile's terms into the column sums, rows in order (plain sums, as the
        // warp-per-row kernel's resident columns).
        let out_node = w.plan.outputs[0];
        for (c, &(col_inside, _, _)) in columns.iter().enumerate() {
            for (r, &(row_inside, _)) in rows_at.iter().enumerate() {
                let mut body = at_cell(r, c, &given[r]);
                let v = column_term(&k.fx, &mut body, w.plan, out_node)?;
                let acc = w.resident[c];
                let cur = k.fx.load_v(acc.s)?;
                let sum = k.fx.fadd(cur, v)?;
                let inside =
                    k.fx.b
                        .build_and(row_inside, col_inside, "in")
                        .map_err(ierr)?;
                let kept =
                    k.fx.b
                        .build_select(inside, sum, cur, "sum")
                        .map_err(ierr)?
                        .into_vector_value();
                k.fx.store(acc.s, kept)?;
            }
        }
        if let Some(next) = next {
            store_tile(k, &ahead, next)?;
        }
        Ok(())
    })
}

fn store_tile<'c>(
    k: &Kx<'_, 'c>,
    slots: &[Vec<PointerValue<'c>>],
    xs: Vec<Vec<VectorValue<'c>>>,
) -> Result<(), CodegenError> {
    for (row, vals) in slots.iter().zip(xs) {
        for (&p, v) in row.iter().zip(vals) {
            k.fx.store(p, v)?;
        }
    }
    Ok(())
}
