//! The C ABI between skeletons and generated code.
//!
//! Generated code is called once per task as `f(&KernelArgs, rl, ru)` and processes rows
//! `[rl, ru)` of the main input; it returns the number of non-zeros it wrote (no-aggregate
//! outputs) or 0. Every pointer is valid for the length stored beside it, and the skeleton has
//! checked all shapes against the operator's [`InputUse`](crate::InputUse)s before the call, so
//! the generated code indexes without bounds checks. The layout is `#[repr(C)]`; the code
//! generator reads fields at the offsets `std::mem::offset_of!` gives for these structs, so the
//! two sides cannot disagree about it.

/// A dense row-major matrix (or a block of rows of one) handed to generated code.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DenseView {
    /// First value of row `row0`.
    pub data: *const f64,
    /// Number of values readable from `data`.
    pub len: usize,
    /// Rows of the whole matrix.
    pub rows: usize,
    /// Columns (the row stride).
    pub cols: usize,
    /// The first row held at `data` (non-zero for a densified row block of a sparse main
    /// input); row `i` starts at `data + (i - row0) * cols`.
    pub row0: usize,
}

impl DenseView {
    /// A view of nothing.
    pub const EMPTY: DenseView = DenseView {
        data: std::ptr::null(),
        len: 0,
        rows: 0,
        cols: 0,
        row0: 0,
    };

    /// A view of a whole row-major buffer.
    pub fn of(values: &[f64], rows: usize, cols: usize) -> DenseView {
        DenseView {
            data: values.as_ptr(),
            len: values.len(),
            rows,
            cols,
            row0: 0,
        }
    }
}

/// A CSR matrix handed to generated code.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsrView {
    /// `rows + 1` row offsets.
    pub row_ptr: *const usize,
    /// `nnz` column indexes, increasing within a row.
    pub col_idx: *const u32,
    /// `nnz` values.
    pub values: *const f64,
    /// Number of stored values.
    pub nnz: usize,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

impl CsrView {
    /// A view of nothing.
    pub const EMPTY: CsrView = CsrView {
        row_ptr: std::ptr::null(),
        col_idx: std::ptr::null(),
        values: std::ptr::null(),
        nnz: 0,
        rows: 0,
        cols: 0,
    };
}

/// Everything one call of generated code reads and writes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelArgs {
    /// The dense main input (or a densified block of rows of a sparse one); empty for the CSR
    /// entry points.
    pub main: DenseView,
    /// The CSR main input; empty for the dense entry points.
    pub main_csr: CsrView,
    /// One view per operator input position (position 0 mirrors the main input; scalars are
    /// one-value views).
    pub inputs: *const DenseView,
    /// Number of entries at `inputs`.
    pub num_inputs: usize,
    /// The output, or this task's partial aggregates (layout per template, see the skeletons).
    pub out: *mut f64,
    /// Number of values writable at `out`.
    pub out_len: usize,
    /// Rows of the iteration space (the main input's rows).
    pub rows: usize,
    /// Columns of the iteration space (the main input's columns).
    pub cols: usize,
    /// Outer: the length `k` of the dot products `u_i · v_j`.
    pub k: usize,
    /// Outer: the row length `k2` of the final product's matrix.
    pub k2: usize,
    /// Outer over tiles: the block of `U %*% t(V)` at rows `[rl, ru)` and columns
    /// `[col_lo, col_hi)`, row `rl` first, row-major with row stride `tile_stride`; null for
    /// every other entry point.
    pub tile: *const f64,
    /// Outer over tiles: the row stride of `tile`.
    pub tile_stride: usize,
    /// Outer over tiles: the first column of the tile.
    pub col_lo: usize,
    /// Outer over tiles: the end of the tile's columns.
    pub col_hi: usize,
    /// Outer over tiles, where the entry writes cells (`G_ij` at
    /// `out[(i - rl) * out_stride + (j - col_lo)]`): the row stride of `out`.
    pub out_stride: usize,
}

/// A generated entry point: processes rows `[rl, ru)`; returns the non-zeros it wrote.
///
/// # Safety
/// `args` must point to a `KernelArgs` whose views are valid and whose shapes match the
/// operator the function was generated for; `rl <= ru <= rows`.
pub type KernelFn = unsafe extern "C" fn(args: *const KernelArgs, rl: usize, ru: usize) -> u64;

/// Full aggregates: slots per lane of a partial. An aggregate with `L` lanes (the generated
/// code's vector width plus one scalar lane) occupies `PARTIAL_SLOTS_PER_LANE * L` values:
/// lane sums then lane corrections (Kahan), or lane extremes then unused slots (min/max).
pub const PARTIAL_SLOTS_PER_LANE: usize = 2;
