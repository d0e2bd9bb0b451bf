//! The host side of a GPU launch that needs no GPU: the grid a kernel runs on (a function of
//! the shapes only, so the order of every reduction is too), the length of its output buffer,
//! and the outputs made of what it wrote: partials folded in block (or chunk) order with the
//! runtime's Kahan and min/max steps, CSR values compacted into the driver's structure.

use super::abi::{
    GpuKernel, GpuMain, KernelShape, BLOCK_THREADS, MAX_BLOCKS, MAX_COLUMN_BLOCKS, OUTER_TILE_ROWS,
    ROW_TILE,
};
use crate::prep::{self, AggState};
use crate::{AggKind, Result};
use lafuse_runtime::{Matrix, SparseMatrix};

/// A launch grid (blocks in x and y; blocks are [`BLOCK_THREADS`] threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub x: u32,
    pub y: u32,
}

/// Threads a column-aggregate grid aims at: enough to fill a large GPU.
const COLUMN_THREADS: usize = 1 << 18;

/// Cells per thread of a grid-stride walk at full size: a few loads in flight per thread.
const CELLS_PER_THREAD: usize = 4;

fn blocks_for(threads: usize) -> u32 {
    let b = threads.div_ceil(BLOCK_THREADS as usize).max(1);
    b.min(MAX_BLOCKS as usize) as u32
}

/// The grid of `kernel` over an m×n main input (CSR: `nnz` non-zeros). Depends on the shapes
/// only.
pub fn grid(kernel: &GpuKernel, m: usize, n: usize) -> Grid {
    match (&kernel.shape, kernel.main) {
        (KernelShape::NoAgg | KernelShape::FullAgg { .. }, GpuMain::Dense) => Grid {
            x: blocks_for(m.saturating_mul(n).div_ceil(CELLS_PER_THREAD)),
            y: 1,
        },
        (KernelShape::RowAgg { .. }, GpuMain::Dense) => Grid {
            x: m.clamp(1, 65_535) as u32,
            y: 1,
        },
        (KernelShape::ColAgg { .. }, _) => {
            let x = n.div_ceil(BLOCK_THREADS as usize).max(1);
            let chunks = (COLUMN_THREADS / (x * BLOCK_THREADS as usize)).clamp(1, m.max(1));
            Grid {
                x: x.min(u32::MAX as usize) as u32,
                y: chunks.min(65_535) as u32,
            }
        }
        (KernelShape::RowWise { .. } | KernelShape::RowFull | KernelShape::RowB1, _) => Grid {
            x: m.div_ceil(ROW_TILE as usize).clamp(1, MAX_BLOCKS as usize) as u32,
            y: 1,
        },
        (KernelShape::RowColumns, _) => Grid {
            x: m.div_ceil(ROW_TILE as usize).clamp(
                1,
                kernel
                    .narrow_for(n)
                    .map_or(MAX_COLUMN_BLOCKS, |w| w.blocks.clamp(1, MAX_COLUMN_BLOCKS))
                    as usize,
            ) as u32,
            y: 1,
        },
        // Tiles of OUTER_TILE_ROWS rows by a block's columns over a dense driver.
        (KernelShape::OuterCellWise | KernelShape::OuterFullAgg, GpuMain::Dense) => Grid {
            x: (m.div_ceil(OUTER_TILE_ROWS as usize))
                .saturating_mul(n.div_ceil(BLOCK_THREADS as usize))
                .clamp(1, MAX_BLOCKS as usize) as u32,
            y: 1,
        },
        // A warp per row of a CSR walk.
        (KernelShape::NoAgg | KernelShape::FullAgg { .. }, GpuMain::Csr)
        | (KernelShape::OuterCellWise | KernelShape::OuterFullAgg, _) => Grid {
            x: blocks_for(m.saturating_mul(32)),
            y: 1,
        },
        // A thread per column of the driver (a row of its transpose).
        (KernelShape::OuterLeft { .. }, _) => Grid {
            x: blocks_for(n),
            y: 1,
        },
        // A thread per row.
        _ => Grid {
            x: blocks_for(m),
            y: 1,
        },
    }
}

/// Values the kernel's output buffer holds (`nnz`: the CSR main input's, `k2`: a right outer
/// product's output width).
pub fn out_len(kernel: &GpuKernel, grid: Grid, m: usize, n: usize, nnz: usize, k2: usize) -> usize {
    let blocks = grid.x as usize;
    match (&kernel.shape, kernel.main) {
        (KernelShape::NoAgg | KernelShape::OuterCellWise, GpuMain::Dense) => m * n,
        (KernelShape::NoAgg | KernelShape::OuterCellWise, GpuMain::Csr) => nnz,
        (KernelShape::FullAgg { aggs }, _) => 2 * aggs.len() * blocks,
        (KernelShape::OuterFullAgg, _) => 2 * blocks,
        (KernelShape::RowAgg { .. }, _) => m,
        (KernelShape::ColAgg { .. }, _) => 2 * grid.y as usize * n,
        (KernelShape::OuterRight, _) => m * k2,
        (KernelShape::OuterLeft { .. }, _) => n * k2,
        (KernelShape::RowB1, _) => m * k2,
        (KernelShape::RowWise { vector: true }, _) => m * n,
        (KernelShape::RowWise { vector: false }, _) => m,
        (KernelShape::RowFull, _) => 2 * blocks,
        (KernelShape::RowColumns, _) => 2 * blocks * n,
    }
}

/// Values the call brings back from the device: the output buffer's, or the folded row of a
/// kernel whose partial rows are folded on the device ([`GpuKernel::folds_columns`]).
pub fn result_len(kernel: &GpuKernel, out_len: usize, n: usize) -> usize {
    if kernel.folds_columns() {
        n
    } else {
        out_len
    }
}

/// How many partial rows a column-folding kernel leaves.
pub fn partial_rows(kernel: &GpuKernel, grid: Grid) -> usize {
    match kernel.shape {
        KernelShape::ColAgg { .. } => grid.y as usize,
        _ => grid.x as usize,
    }
}

/// Whether the output buffer must start zeroed (the kernel adds into it).
pub fn out_zeroed(kernel: &GpuKernel) -> bool {
    matches!(
        kernel.shape,
        KernelShape::OuterRight | KernelShape::OuterLeft { .. }
    )
}

/// The output buffer of a kernel that is not launched (an empty main input): every partial at
/// its aggregate's initial value, so folding it gives the aggregate of nothing.
pub fn initial_output(kernel: &GpuKernel, len: usize) -> Vec<f64> {
    let init = |agg: AggKind| prep::ext_init(agg);
    match &kernel.shape {
        KernelShape::FullAgg { aggs } => {
            let per = len / (2 * aggs.len().max(1));
            aggs.iter()
                .flat_map(|&a| std::iter::repeat_n([init(a), 0.0], per).flatten())
                .collect()
        }
        KernelShape::ColAgg { agg } => vec![init(*agg); len],
        KernelShape::RowAgg { agg } => vec![init(*agg); len],
        _ => vec![0.0; len],
    }
}

/// Folds `pairs` (value, correction), one per partial, in order.
fn fold_pairs(agg: AggKind, pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let mut st = AggState::init(agg);
    for (v, c) in pairs {
        st.fold(agg, v, c);
    }
    st.value()
}

/// The operator's outputs from the kernel's output buffer `out`: `out_shapes` as the call
/// asked (a transposed-frame output is the walk's values relabelled), `csr` the CSR main
/// input or driver the kernel walked.
pub fn finish(
    kernel: &GpuKernel,
    grid: Grid,
    out: Vec<f64>,
    _shape: (usize, usize),
    csr: Option<&SparseMatrix>,
    out_shapes: &[(usize, usize)],
) -> Result<Vec<Matrix>> {
    let blocks = grid.x as usize;
    let shape_of = |k: usize| out_shapes.get(k).copied().unwrap_or((1, 1));
    let dense = |(r, c): (usize, usize), vals: Vec<f64>| -> Result<Matrix> {
        Matrix::from_dense_values(r, c, vals)
            .and_then(Matrix::examine_and_convert)
            .map_err(prep::kernel_error)
    };
    Ok(match &kernel.shape {
        KernelShape::NoAgg | KernelShape::OuterCellWise => match (kernel.main, csr) {
            (GpuMain::Csr, Some(s)) => {
                let compacted = prep::compact(s, &out)?;
                if kernel.transposed {
                    vec![lafuse_runtime::kernels::transpose(&compacted)
                        .map_err(prep::kernel_error)?]
                } else {
                    vec![compacted]
                }
            }
            _ => vec![dense(shape_of(0), out)?],
        },
        KernelShape::FullAgg { aggs } => aggs
            .iter()
            .enumerate()
            .map(|(k, &agg)| {
                let part = &out[2 * k * blocks..2 * (k + 1) * blocks];
                let v = fold_pairs(agg, part.chunks_exact(2).map(|p| (p[0], p[1])));
                Ok(Matrix::scalar(v))
            })
            .collect::<Result<_>>()?,
        KernelShape::OuterFullAgg | KernelShape::RowFull => {
            let v = fold_pairs(AggKind::Sum, out.chunks_exact(2).map(|p| (p[0], p[1])));
            vec![Matrix::scalar(v)]
        }
        KernelShape::RowWise { .. } | KernelShape::RowB1 => vec![dense(shape_of(0), out)?],
        KernelShape::RowAgg { .. } => vec![dense(shape_of(0), out)?],
        // Folded on the device: `out` is the output row.
        KernelShape::ColAgg { .. } | KernelShape::RowColumns => vec![dense(shape_of(0), out)?],
        KernelShape::OuterRight | KernelShape::OuterLeft { .. } => {
            vec![dense(shape_of(0), out)?]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::abi::{NarrowRows, NARROW_ENTRY};
    use crate::InputUse;

    fn kernel(shape: KernelShape, main: GpuMain) -> GpuKernel {
        GpuKernel {
            shape,
            main,
            uses: vec![InputUse::Main],
            transposed: false,
            narrow: None,
        }
    }

    #[test]
    fn grids_depend_on_the_shapes_only_and_stay_within_the_limits() {
        let full = kernel(
            KernelShape::FullAgg {
                aggs: vec![AggKind::Sum],
            },
            GpuMain::Dense,
        );
        assert_eq!(grid(&full, 1, 1), Grid { x: 1, y: 1 });
        assert_eq!(grid(&full, 0, 0), Grid { x: 1, y: 1 });
        assert_eq!(grid(&full, 100_000, 1_000).x, MAX_BLOCKS);
        assert_eq!(grid(&full, 1000, 1000), grid(&full, 1000, 1000));
        let col = kernel(KernelShape::ColAgg { agg: AggKind::Sum }, GpuMain::Dense);
        let g = grid(&col, 1_000_000, 10);
        assert_eq!(g.x, 1);
        assert!(g.y > 1 && g.y <= 65_535, "{g:?}");
        assert_eq!(grid(&col, 3, 10).y, 3, "no more chunks than rows");
        // Dense-driver Outer: tiles of OUTER_TILE_ROWS rows by a block's columns.
        let outer = kernel(KernelShape::OuterFullAgg, GpuMain::Dense);
        assert_eq!(grid(&outer, 17, 300).x, 3 * 2);
        assert_eq!(grid(&outer, 100_000, 100_000).x, MAX_BLOCKS);
        assert_eq!(
            out_len(
                &kernel(KernelShape::OuterCellWise, GpuMain::Dense),
                grid(&outer, 3, 4),
                3,
                4,
                0,
                0
            ),
            12
        );
        let row = kernel(KernelShape::RowAgg { agg: AggKind::Sum }, GpuMain::Dense);
        assert_eq!(grid(&row, 10_000_000, 3).x, 65_535);
    }

    #[test]
    fn a_left_outer_product_gets_a_thread_per_driver_column_and_a_zeroed_n_by_k2_output() {
        for transposed in [false, true] {
            let left = kernel(KernelShape::OuterLeft { transposed }, GpuMain::Csr);
            assert!(left.walks_columns() && out_zeroed(&left));
            // 3 rows, 1000 columns: 1000 threads in blocks of BLOCK_THREADS.
            let g = grid(&left, 3, 1000);
            assert_eq!(g.x, 1000u32.div_ceil(BLOCK_THREADS));
            assert_eq!(out_len(&left, g, 3, 1000, 17, 4), 4000);
        }
        let right = kernel(KernelShape::OuterRight, GpuMain::Csr);
        assert!(!right.walks_columns());
        assert_eq!(grid(&right, 3, 1000).x, 1);
    }

    #[test]
    fn a_product_space_row_kernel_writes_m_by_k_and_takes_only_inputs_of_the_products_width() {
        let mut b1 = kernel(KernelShape::RowB1, GpuMain::Dense);
        b1.uses = vec![
            InputUse::Main,
            InputUse::ColVectorT,
            InputUse::B1RowVector,
            InputUse::B1Aligned,
        ];
        let g = grid(&b1, 100, 7);
        assert_eq!(out_len(&b1, g, 100, 7, 0, 3), 300);
        assert!(b1.accepts(&[(100, 7), (7, 3), (1, 3), (100, 3)]));
        assert!(!b1.accepts(&[(100, 7), (7, 3), (1, 4), (100, 3)]));
        assert!(!b1.accepts(&[(100, 7), (7, 3), (1, 3), (100, 2)]));
        // A one-column product of the other row kernels stays one dot product.
        let mut wise = kernel(KernelShape::RowWise { vector: false }, GpuMain::Dense);
        wise.uses = vec![InputUse::Main, InputUse::ColVectorT];
        assert!(wise.accepts(&[(100, 7), (7, 1)]));
        assert!(!wise.accepts(&[(100, 7), (7, 3)]));
    }

    #[test]
    fn a_row_kernel_launches_its_narrow_entry_on_narrow_rows_only_with_its_own_block_count() {
        let mut columns = kernel(KernelShape::RowColumns, GpuMain::Dense);
        assert_eq!(
            grid(&columns, 17, 5).x,
            17usize.div_ceil(ROW_TILE as usize) as u32
        );
        assert_eq!(grid(&columns, 100_000, 5).x, MAX_COLUMN_BLOCKS);
        assert_eq!(columns.entry_for("main", 5), "main");
        columns.narrow = Some(NarrowRows {
            max_cols: 2048,
            blocks: 264,
        });
        for (n, entry, blocks) in [
            (1, NARROW_ENTRY, 264),
            (2048, NARROW_ENTRY, 264),
            (2049, "main", MAX_COLUMN_BLOCKS),
            (0, "main", MAX_COLUMN_BLOCKS),
        ] {
            assert_eq!(columns.entry_for("main", n), entry, "{n} columns");
            assert_eq!(grid(&columns, 100_000, n).x, blocks, "{n} columns");
        }
        assert_eq!(grid(&columns, 17, 5).x, 3, "no more blocks than tiles");
        columns.narrow = Some(NarrowRows {
            max_cols: 2048,
            blocks: 0,
        });
        assert_eq!(grid(&columns, 100_000, 5).x, 1, "a zero count is one block");
    }

    #[test]
    fn partials_fold_in_block_order_with_kahan_and_nan_winning_extremes() {
        let full = kernel(
            KernelShape::FullAgg {
                aggs: vec![AggKind::Sum, AggKind::Max],
            },
            GpuMain::Dense,
        );
        let g = Grid { x: 3, y: 1 };
        // Sums 1, 1e-16, 1e-16 (a naive fold stays at 1); maxima 2, NaN, 5.
        let out = vec![
            1.0,
            0.0,
            1e-16,
            0.0,
            1e-16,
            0.0,
            2.0,
            0.0,
            f64::NAN,
            0.0,
            5.0,
            0.0,
        ];
        let r = finish(&full, g, out, (3, 3), None, &[(1, 1), (1, 1)]).unwrap();
        assert_eq!(r[0].as_scalar().unwrap(), 1.0000000000000002);
        assert!(r[1].as_scalar().unwrap().is_nan());
    }

    #[test]
    fn column_partials_are_folded_on_the_device_and_only_the_row_comes_back() {
        let col = kernel(KernelShape::ColAgg { agg: AggKind::Min }, GpuMain::Dense);
        let g = Grid { x: 1, y: 2 };
        // Two chunks of (value, correction) pairs for two columns on the device...
        assert_eq!(out_len(&col, g, 4, 2, 0, 0), 8);
        assert_eq!(partial_rows(&col, g), 2);
        // ...and the folded row back.
        assert_eq!(result_len(&col, 8, 2), 2);
        let r = finish(&col, g, vec![1.0, 4.0], (4, 2), None, &[(1, 2)]).unwrap();
        assert_eq!(r[0].to_dense().unwrap().values[..], [1.0, 4.0]);
        // An empty main input launches nothing: the aggregate of nothing per column.
        assert_eq!(initial_output(&col, 2), [f64::INFINITY, f64::INFINITY]);
    }
}
