//! The contract between generated PTX kernels and the GPU skeleton: which kernel shape an
//! operator has, how it is launched, and where its outputs and per-block partials lie.
//!
//! Every kernel takes one parameter, a device pointer to a [`KernelArgs`](crate::abi::KernelArgs)
//! whose pointers are device pointers (the `inputs` views follow it in the same buffer), so the
//! CPU's argument layout is the GPU's too and the native emitters read it unchanged.

use crate::{AggKind, InputUse};

/// The entry of the kernel that folds partial rows on the device, beside the main kernel in the
/// modules of [`KernelShape::ColAgg`] and [`KernelShape::RowColumns`] operators.
pub const FOLD_ENTRY: &str = "lafuse_fold_columns";

/// The entry of a Row kernel's second form, for column sums of rows at most
/// [`NarrowRows::max_cols`] wide (a block reads a tile of rows together).
pub const NARROW_ENTRY: &str = "lafuse_kernel_narrow";

/// Threads per block of every kernel (the shared-memory reduction arrays are this long).
pub const BLOCK_THREADS: u32 = 256;

/// Rows a Row kernel's block works on at a time: one per warp.
pub const ROW_TILE: u32 = BLOCK_THREADS / 32;

/// Rows of a dense-driver Outer kernel's tile (its columns: a block's threads, one each).
pub const OUTER_TILE_ROWS: u32 = 8;

/// Most blocks of a Row kernel whose output is summed over rows (its narrow entry's may be
/// fewer, [`NarrowRows::blocks`]): each keeps a partial row of the output, folded in block
/// order.
pub const MAX_COLUMN_BLOCKS: u32 = 1056;

/// Most blocks of a grid-stride kernel: enough to fill a Hopper GPU (132 multiprocessors,
/// 8 blocks of 256 threads each) several times over.
pub const MAX_BLOCKS: u32 = 132 * 16;

/// A PTX module's text with its identity, a hash of the text computed once: the device loads
/// each module once and finds it again by this key on every call, which would otherwise hash
/// the whole text (tens to hundreds of kilobytes) for each of the call's launches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxText {
    text: String,
    key: u64,
}

impl PtxText {
    pub fn new(text: String) -> PtxText {
        let key = fnv(text.as_bytes());
        PtxText { text, key }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text's FNV-1a hash.
    pub fn key(&self) -> u64 {
        self.key
    }
}

impl std::ops::Deref for PtxText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for PtxText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// FNV-1a, 64 bits.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The format of the main input a kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuMain {
    Dense,
    /// CSR; only for sparse-safe plans whose zeros may be skipped.
    Csr,
}

/// What a kernel computes and where it writes (`out` of the argument block).
#[derive(Clone, Debug, PartialEq)]
pub enum KernelShape {
    /// A value per cell of a dense main input (`out[i * n + j]`), or per non-zero of a CSR one
    /// (`out[p]`, the driver's structure).
    NoAgg,
    /// Full aggregates over a grid-stride walk: output `k`'s partial of block `b` is the pair
    /// (value, Kahan correction) at `out[2 * (k * blocks + b)]`, merged on the host in block
    /// order.
    FullAgg { aggs: Vec<AggKind> },
    /// One value per row, finished by the kernel at `out[i]` (a block per row of a dense main
    /// input, a thread per row of a CSR one).
    RowAgg { agg: AggKind },
    /// One value per column of a dense main input: the rows in `blocks_y` chunks (grid
    /// dimension y), chunk `c`'s partial of column `j` the pair at `out[2 * (c * n + j)]`,
    /// merged on the host in chunk order.
    ColAgg { agg: AggKind },
    /// Outer `G` in the driver's structure (`out[p]`), a warp per row of a CSR driver; over a
    /// dense driver every cell (`out[i * n + j]`), in tiles of [`OUTER_TILE_ROWS`] rows.
    OuterCellWise,
    /// Outer `sum(G)`: partials as [`KernelShape::FullAgg`] with one sum.
    OuterFullAgg,
    /// Outer `G %*% W` (m×k2): a thread per row owns its output row, so no atomics.
    OuterRight,
    /// Outer `t(G) %*% Wt` (n×k2, `out[j * k2 + c]`; `transposed`: its transpose `W %*% G`,
    /// k2×n, `out[c * n + j]`), with `W` given as k2×m and read as m×k2 rows
    /// ([`InputUse::FinalWT`]): a thread per column `j` of the driver owns output row `j`,
    /// walking the column's non-zeros in row order through the CSR of `t(X)`
    /// ([`GpuKernel::walks_columns`]), so no atomics and the CPU's order of additions.
    OuterLeft { transposed: bool },
    /// Row template, row-wise: the output row `i` (`out[i * n + j]`, `vector`) or value
    /// (`out[i]`) of main-input row `i`; a warp per row.
    RowWise { vector: bool },
    /// Row template, summed into one value: partials as [`KernelShape::FullAgg`] with one sum.
    RowFull,
    /// Row template, `no_agg_b1`: row `i` of an m×k output (`out[i * k + c]`), `k` the
    /// columns of the product's matrix (the [`InputUse::ColVectorT`] input); a warp per row,
    /// a pass over the row per output column.
    RowB1,
    /// Row template, rows summed into one output row of `n` values (`colSums(f(X))`,
    /// `t(X) %*% v`): block `b`'s partial of column `j` the pair at `out[2 * (b * n + j)]`,
    /// folded on the host in block order.
    RowColumns,
}

/// A kernel's launch contract: its shape, how it reads each input, and its input positions.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuKernel {
    pub shape: KernelShape,
    pub main: GpuMain,
    /// How each input is read, by CPlan position (as the CPU skeletons' [`InputUse`]).
    pub uses: Vec<InputUse>,
    /// The body runs in the main input's transposed frame (a column-vector main input read as
    /// its transpose): the output is relabelled to the transposed shape.
    pub transposed: bool,
    /// A [`KernelShape::RowColumns`] kernel's [`NARROW_ENTRY`], launched instead of the main
    /// entry where the main input's rows are narrow enough; `None` for every other kernel.
    pub narrow: Option<NarrowRows>,
}

/// Where a Row kernel's [`NARROW_ENTRY`] runs, and on how many blocks at most: constants of
/// the kernel, so the entry and the grid still depend on the shapes only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NarrowRows {
    /// The widest row it computes (every column resident in a block's registers).
    pub max_cols: usize,
    /// Most blocks of its launch (each writes a partial row of the output).
    pub blocks: u32,
}

impl GpuKernel {
    /// Whether the kernel computes a call over inputs of these shapes exactly: a Row kernel's
    /// product with a whole matrix (read as [`InputUse::ColVectorT`]) is one dot product, so
    /// that matrix must have one column (a wider one runs on the CPU).
    pub fn accepts(&self, shapes: &[(usize, usize)]) -> bool {
        let cols_of = |want: InputUse| {
            self.uses
                .iter()
                .zip(shapes)
                .filter(move |(u, _)| **u == want)
                .map(|(_, &(_, c))| c)
        };
        match self.shape {
            KernelShape::RowWise { .. } | KernelShape::RowFull | KernelShape::RowColumns => {
                cols_of(InputUse::ColVectorT).all(|c| c == 1)
            }
            // Every input of the product space is as wide as the product's matrix.
            KernelShape::RowB1 => {
                let mut k = cols_of(InputUse::ColVectorT);
                match (k.next(), k.next()) {
                    (Some(k), None) => cols_of(InputUse::B1Aligned)
                        .chain(cols_of(InputUse::B1RowVector))
                        .all(|c| c == k),
                    _ => false,
                }
            }
            _ => true,
        }
    }

    /// The narrow entry's launch where an m×n main input takes it (`n` at least 1 and at most
    /// its widest row).
    pub fn narrow_for(&self, n: usize) -> Option<NarrowRows> {
        self.narrow.filter(|w| n >= 1 && n <= w.max_cols)
    }

    /// The entry to launch over an m×n main input: the narrow one where it applies, else
    /// `main_entry`.
    pub fn entry_for<'e>(&self, main_entry: &'e str, n: usize) -> &'e str {
        if self.narrow_for(n).is_some() {
            NARROW_ENTRY
        } else {
            main_entry
        }
    }

    /// Whether the kernel walks the CSR driver by columns: the skeleton hands it the CSR of
    /// `t(X)` (rows `n`, columns `m`), each of its rows a column of `X` in row order.
    pub fn walks_columns(&self) -> bool {
        matches!(self.shape, KernelShape::OuterLeft { .. })
    }

    /// Whether the module's [`FOLD_ENTRY`] folds the kernel's partial rows on the device.
    pub fn folds_columns(&self) -> bool {
        matches!(
            self.shape,
            KernelShape::ColAgg { .. } | KernelShape::RowColumns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ptx_text_keeps_the_hash_of_its_text_computed_once() {
        let a = PtxText::new(".entry a() {}".to_string());
        let b = PtxText::new(".entry b() {}".to_string());
        assert_eq!(a.key(), fnv(a.as_bytes()));
        assert_ne!(a.key(), b.key());
        assert_eq!(&*a, ".entry a() {}");
        assert_eq!(a.to_string(), a.as_str());
        // FNV-1a's published value for "a".
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        // The device finds a module's entries by these hashes.
        let entries = ["lafuse_kernel", NARROW_ENTRY, FOLD_ENTRY]; // codegen's ENTRY first
        for (i, a) in entries.iter().enumerate() {
            for b in &entries[i + 1..] {
                assert_ne!(fnv(a.as_bytes()), fnv(b.as_bytes()), "{a} {b}");
            }
        }
    }
}
