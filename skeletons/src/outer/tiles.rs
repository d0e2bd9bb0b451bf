//! Outer operators over tiles: for a dense or dense-ish driver, the `(i, j)` space is walked in
//! tiles, each tile of `U %*% t(V)` is computed by a blocked matrix multiply into a buffer that
//! stays in cache, and the generated body (`lafuse_outer_tiles`) runs over the tile before the
//! next one: the dot products run at matrix-multiply speed and the product is never
//! materialized (issue 27). A final product `G %*% W` (Right) or `t(G) %*% W` (Left) is a
//! second block product per tile, of the tile of `G` the body wrote.
//!
//! Every cell is visited, so the results are those of unfused execution at the driver's zeros
//! too (`0 * body`: 0, or NaN where the body is not finite). Sums are deterministic: tasks are
//! fixed blocks of [`tile_rows`]-row bands, tiles run in a fixed order within a task, and task
//! partials merge in task order, whatever the thread count.

use super::{OuterKind, OuterSpec, MAX_LEFT_TASKS, MAX_TASKS};
use crate::abi::{DenseView, KernelFn};
use crate::prep::{self, for_tasks, with_scratch, ArgsTemplate, Prepared, SharedOut};
use crate::{Result, SkeletonError};
use lafuse_runtime::kernels::block_product::{block_product, Block, BlockMut};
use lafuse_runtime::kernels::dense_result;
use lafuse_runtime::{Matrix, SparseMatrix};

/// Rows of a tile (at most; [`tile_rows`]). The blocked multiply packs the tile's band of `V`
/// on every call and reads `U`'s rows as they are, so the packing is a share of the multiply
/// inversely proportional to a tile's rows: at 20000² and rank 100, 64×512 tiles spent as
/// much time packing as half the multiply (session 21, `perf`), 256×256 a tenth of the
/// operator, 448×144 a twentieth (session 47, 8000²: 161-163 against 164-170 ms an evaluation
/// in alternating runs). A tile (504 KiB), its band of `U` (350 KiB at rank 100) and the
/// packed `V` (113 KiB) stay in a core's L2 cache (1 MiB on the development machines).
pub const TILE_ROWS: usize = 448;
/// Columns of a tile: three times the rows of the multiply's AVX-512 micro-kernel (48), which
/// spares its narrower edge kernel.
pub const TILE_COLS: usize = 144;
/// A product has at least this many bands of tile rows where it has the rows for them, so
/// that the threads share them evenly: 2000 rows (ALS-CG's updates at quick scale) run as 16
/// bands of 125 rows, not five of 448, of which two threads would take three and two.
const MIN_ROW_BANDS: usize = 16;

/// The rows of the tiles of a product of `m` rows: a function of `m` only, so that the
/// tiles, and so the order of a sum over them, do not depend on the thread count.
pub(crate) fn tile_rows(m: usize) -> usize {
    TILE_ROWS.min(m.div_ceil(MIN_ROW_BANDS)).max(1)
}

/// The factor and final-product buffers a tiled call reads, by role.
pub(crate) struct Factors<'a> {
    /// `U`, m×k row-major.
    pub u: &'a [f64],
    /// `V`, n×k row-major.
    pub v: &'a [f64],
    /// Right: `W`, n×k2; Left: `t(W)`, m×k2 (row-major both); empty otherwise.
    pub w: &'a [f64],
    pub k: usize,
    pub k2: usize,
}

/// A fixed partition of `m` rows into bands of whole tiles: at most `max_tasks`, the
/// boundaries a function of `m` only.
fn tile_tasks(m: usize, max_tasks: usize) -> Vec<(usize, usize)> {
    let rows = tile_rows(m);
    let tiles = m.div_ceil(rows);
    let per_task = tiles.div_ceil(max_tasks.max(1)).max(1) * rows;
    (0..m.div_ceil(per_task))
        .map(|t| (t * per_task, ((t + 1) * per_task).min(m)))
        .collect()
}

/// Runs an Outer operator over tiles with the generated tile entry `f`.
pub(crate) fn execute(
    spec: &OuterSpec,
    f: KernelFn,
    x: &Matrix,
    p: &Prepared<'_>,
    fac: &Factors<'_>,
) -> Result<Matrix> {
    let (m, n) = x.shape();
    let (k, k2) = (fac.k, fac.k2);
    let views = p.views();
    let args = ArgsTemplate(prep::kernel_args(x, &views, k, k2));
    let left = matches!(spec.kind, OuterKind::Left | OuterKind::LeftT);
    let tasks = tile_tasks(m, if left { MAX_LEFT_TASKS } else { MAX_TASKS });
    let par = prep::parallel(m * n * k.max(1));
    let csr = match x {
        Matrix::Sparse(s) => Some(s),
        Matrix::Dense(_) => None,
    };
    let dense = match x {
        Matrix::Dense(d) => &d.values[..],
        Matrix::Sparse(_) => &[][..],
    };
    let lanes = spec.lanes.max(1);
    // The tiles' extent: a product narrower or shorter than a whole tile gets buffers of its
    // own size (2000×100 at rank 20, ALS-CG's update: a fifth of a whole tile's memory).
    let tile_cols = TILE_COLS.min(n);
    let band_rows = tile_rows(m);
    let tile_cells = band_rows.min(m) * tile_cols;
    // The tile of G a final product multiplies; the densified tile of a CSR driver.
    let g_cells = match spec.kind {
        OuterKind::CellWise | OuterKind::FullAgg => 0,
        _ => tile_cells,
    };
    let x_cells = if csr.is_some() { tile_cells } else { 0 };
    // Per task: the output it writes (the shared cell-wise or Right output, a full sum's
    // partial, a Left product's n×k2 partial). Its tiles are its thread's scratch memory:
    // every tile overwrites what it reads of them.
    let run = |out: &(dyn Fn(usize) -> SharedOut + Sync)| -> Vec<Result<u64>> {
        for_tasks(tasks.len(), par, |t| {
            with_scratch(tile_cells + g_cells + x_cells, |scratch| {
                let (prod, rest) = scratch.split_at_mut(tile_cells);
                let (g, xbuf) = rest.split_at_mut(g_cells);
                let mut cursors = Vec::new();
                let (rl, ru) = tasks[t];
                let (optr, olen) = out(t).ptr();
                let mut nnz = 0u64;
                for i0 in (rl..ru).step_by(band_rows) {
                    let i1 = (i0 + band_rows).min(ru);
                    if let Some(s) = csr {
                        cursors.clear();
                        cursors.extend((i0..i1).map(|i| (s.row_ptr[i], s.row_ptr[i + 1])));
                    }
                    for j0 in (0..n).step_by(TILE_COLS) {
                        let j1 = (j0 + TILE_COLS).min(n);
                        if spec.kind == OuterKind::FullAgg {
                            // A NaN sum stays NaN: the task's remaining tiles cannot change it.
                            // SAFETY: the task's own partial of `2 * lanes` values.
                            let part = unsafe { std::slice::from_raw_parts(optr, olen) };
                            if part[..lanes].iter().any(|v| v.is_nan()) {
                                return Ok(nnz);
                            }
                        }
                        let (rows, cols) = (i1 - i0, j1 - j0);
                        block_product(
                            BlockMut {
                                data: &mut *prod,
                                rows,
                                cols,
                                row_stride: tile_cols,
                                col_stride: 1,
                            },
                            Block {
                                data: &fac.u[i0 * k..i1 * k],
                                rows,
                                cols: k,
                                row_stride: k,
                                col_stride: 1,
                            },
                            Block {
                                data: &fac.v[j0 * k..j1 * k],
                                rows: cols,
                                cols: k,
                                row_stride: k,
                                col_stride: 1,
                            }
                            .t(),
                            false,
                        )
                        .map_err(|_| SkeletonError::TileBlocks)?;
                        let mut a = args.get();
                        a.main = match csr {
                            Some(s) => {
                                densify_tile(s, &mut cursors, j0, j1, tile_cols, xbuf);
                                DenseView {
                                    data: xbuf.as_ptr(),
                                    len: xbuf.len(),
                                    rows: m,
                                    cols: tile_cols,
                                    row0: i0,
                                }
                            }
                            // The tile's first cell; the entry reads `(i - row0) * cols + j - col_lo`.
                            None => DenseView {
                                data: dense[i0 * n + j0..].as_ptr(),
                                len: dense.len() - (i0 * n + j0),
                                rows: m,
                                cols: n,
                                row0: i0,
                            },
                        };
                        a.tile = prod.as_ptr();
                        a.tile_stride = tile_cols;
                        (a.col_lo, a.col_hi) = (j0, j1);
                        match spec.kind {
                            OuterKind::FullAgg => (a.out, a.out_len) = (optr, olen),
                            OuterKind::CellWise => {
                                // SAFETY: rows [i0, i1) of the m×n output belong to this task.
                                a.out = unsafe { optr.add(i0 * n + j0) };
                                a.out_len = olen - (i0 * n + j0);
                                a.out_stride = n;
                            }
                            _ => {
                                (a.out, a.out_len) = (g.as_mut_ptr(), g.len());
                                a.out_stride = tile_cols;
                            }
                        }
                        prep::call(f, &a, i0, i1);
                        // The tile of G the entry wrote, for a final product.
                        let g_tile = Block {
                            data: &*g,
                            rows,
                            cols,
                            row_stride: tile_cols,
                            col_stride: 1,
                        };
                        match spec.kind {
                            OuterKind::CellWise => {
                                // Counted while the tile's rows are in cache.
                                // SAFETY: as above; the entry has returned.
                                let o = unsafe { std::slice::from_raw_parts(optr, olen) };
                                for i in i0..i1 {
                                    nnz += lafuse_runtime::matrix::count_nnz(
                                        &o[i * n + j0..i * n + j1],
                                    ) as u64;
                                }
                            }
                            OuterKind::Right => {
                                // out[i0..i1, :] += G_tile %*% W[j0..j1, :]
                                // SAFETY: rows [i0, i1) of the m×k2 output belong to this task.
                                let o = unsafe { std::slice::from_raw_parts_mut(optr, olen) };
                                block_product(
                                    BlockMut {
                                        data: &mut o[i0 * k2..i1 * k2],
                                        rows,
                                        cols: k2,
                                        row_stride: k2,
                                        col_stride: 1,
                                    },
                                    g_tile,
                                    Block {
                                        data: &fac.w[j0 * k2..j1 * k2],
                                        rows: cols,
                                        cols: k2,
                                        row_stride: k2,
                                        col_stride: 1,
                                    },
                                    true,
                                )
                                .map_err(|_| SkeletonError::TileBlocks)?;
                            }
                            OuterKind::Left | OuterKind::LeftT => {
                                // part[j0..j1, :] += t(G_tile) %*% t(W)[i0..i1, :]
                                // SAFETY: the task's own n×k2 partial.
                                let o = unsafe { std::slice::from_raw_parts_mut(optr, olen) };
                                block_product(
                                    BlockMut {
                                        data: &mut o[j0 * k2..j1 * k2],
                                        rows: cols,
                                        cols: k2,
                                        row_stride: k2,
                                        col_stride: 1,
                                    },
                                    g_tile.t(),
                                    Block {
                                        data: &fac.w[i0 * k2..i1 * k2],
                                        rows,
                                        cols: k2,
                                        row_stride: k2,
                                        col_stride: 1,
                                    },
                                    true,
                                )
                                .map_err(|_| SkeletonError::TileBlocks)?;
                            }
                            OuterKind::FullAgg => {}
                        }
                    }
                }
                Ok(nnz)
            })
        })
    };
    let total = |r: Vec<Result<u64>>| r.into_iter().sum::<Result<u64>>();
    Ok(match spec.kind {
        OuterKind::CellWise => {
            let mut out = prep::output(m * n)?;
            let so = SharedOut(out.as_mut_ptr(), out.len());
            let nnz = total(run(&|_| so))?;
            dense_result(m, n, out, nnz as usize)
        }
        kind => super::aggregated(kind, tasks.len(), (m, n, k2), lanes, &|out| {
            total(run(out)).map(drop)
        })?,
    })
}

/// Writes columns `[j0, j1)` of the rows of a band of a CSR driver into `buf` (row stride
/// `stride`, zeros elsewhere), advancing each row's cursor past them: the band's tiles are
/// visited left to right, so each stored value is copied once. `cursors[r]` is row r's
/// (next non-zero, end of the row).
fn densify_tile(
    s: &SparseMatrix,
    cursors: &mut [(usize, usize)],
    j0: usize,
    j1: usize,
    stride: usize,
    buf: &mut [f64],
) {
    let width = j1 - j0;
    for (r, (cur, end)) in cursors.iter_mut().enumerate() {
        let row = &mut buf[r * stride..r * stride + width];
        row.fill(0.0);
        while *cur < *end && (s.col_idx[*cur] as usize) < j1 {
            row[s.col_idx[*cur] as usize - j0] = s.values[*cur];
            *cur += 1;
        }
    }
}

/// Whether a driver of this many non-zeros in `m×n` cells is dense enough for tiles.
pub(crate) fn dense_enough(nnz: usize, m: usize, n: usize, min_density: f64) -> bool {
    let cells = m as f64 * n as f64;
    cells > 0.0 && nnz as f64 >= min_density * cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_tasks_are_whole_tiles_and_independent_of_threads() {
        // 1000 rows: 16 bands of 63 rows (the last 55), eight to a task.
        let t = tile_tasks(1000, 2);
        assert_eq!(tile_rows(1000), 63);
        assert_eq!(t, vec![(0, 504), (504, 1000)]);
        assert!(t.iter().all(|&(a, _)| a % tile_rows(1000) == 0));
        assert!(tile_tasks(0, 4).is_empty());
        assert_eq!(tile_tasks(1, 64), vec![(0, 1)]);
        // Large products take whole tiles of TILE_ROWS rows, each a task of its own.
        let t = tile_tasks(20_000, 64);
        assert_eq!(t.len(), 20_000usize.div_ceil(TILE_ROWS));
        assert!(t
            .iter()
            .all(|&(a, b)| a % TILE_ROWS == 0 && b - a <= TILE_ROWS));
    }

    #[test]
    fn small_products_have_enough_bands_for_the_threads() {
        assert_eq!(tile_rows(2000), 125);
        assert_eq!(tile_rows(8000), TILE_ROWS);
        assert_eq!(tile_rows(3), 1);
        assert_eq!(tile_rows(0), 1);
    }

    #[test]
    fn density_threshold() {
        assert!(dense_enough(10, 2, 5, 1.0));
        assert!(!dense_enough(9, 2, 5, 1.0));
        assert!(!dense_enough(0, 0, 5, 0.0));
    }
}
