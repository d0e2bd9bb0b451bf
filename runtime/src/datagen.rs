//! DML's `rand`, reproducing Apache SystemDS 3.4.0 bit for bit for a given seed.
//!
//! Scripts written for SystemDS generate their inputs with `rand(..., seed=s)` and print
//! aggregates; to compare our results with SystemDS's we must produce the same matrix. This module
//! re-implements the generator chain of SystemDS's `LibMatrixDatagen` (CP, single node):
//!
//! 1. The user seed (or `System.nanoTime()` for `seed=-1`) seeds a `java.util.Random`, whose first
//!    32 `nextInt()`s seed a commons-math `Well1024a`; its `nextLong()`s are the per-block seeds,
//!    one per 1000×1000 block in row-major block order.
//! 2. Per block, the value generator (`java.util.Random` for uniform; Box-Muller over
//!    `java.util.Random` for normal) is seeded with the block seed, and its *first* draw seeds a
//!    second `java.util.Random` that picks the non-zero cells: `(long)(draw * Long.MAX_VALUE)`.
//!    So even fully dense blocks consume one value draw before their first cell.
//! 3. Cells are filled per block in row-major order: all cells when `sparsity == 1`; otherwise
//!    either by geometric skips (`ceil(ln(u) / ln(1 - sparsity))`) when SystemDS would store the
//!    block sparse ([`block_is_sparse`], a port of `MatrixBlock.evalSparseFormatInMemory` with its
//!    MCSR memory estimate), or by a per-cell Bernoulli test `u <= sparsity` otherwise.
//!
//! Shortcuts taken by SystemDS and kept here: `sparsity == 0` or `min == max == 0` give an empty
//! matrix; uniform with `sparsity == 1` and `min == max` (or both NaN) gives a constant matrix
//! without touching any generator. For `pdf = "normal"`, `min` and `max` are ignored (values are
//! N(0,1)).
//!
//! Known deviation: the normal pdf uses `ln`, `sin` and `cos` (Box-Muller). HotSpot computes
//! `Math.log/sin/cos` with Intel-libm intrinsics, which differ from Rust's (glibc's) in the last
//! bit for about 0.1-0.2 % of arguments (measured with `java` 17 on this platform). Such a value
//! is off by one ulp, which no printed sum notices; but if it is the first draw of a block, the
//! non-zero pattern of that block (only for `sparsity < 1`) is seeded differently. Uniform
//! generation uses only exact integer and IEEE arithmetic and `ln` in the skip computation, where
//! an ulp can only matter when the quotient lies within an ulp of an integer.
//!
//! Blocks have independent seeds, so they are generated in parallel (rayon, over row blocks)
//! without changing a single bit.

use rayon::prelude::*;

use crate::matrix::{prefers_sparse, DenseMatrix, Matrix, SparseMatrix};
use crate::{Result, RuntimeError};

/// SystemDS's default block size (`ConfigurationManager.getBlocksize()`); the per-block seeds
/// are drawn per block of this size.
pub const BLOCK_SIZE: usize = 1000;

/// The value distribution of `rand`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pdf {
    /// Uniform in `[min, max)`: `min + (max - min) * u`.
    Uniform,
    /// Standard normal N(0, 1) by Box-Muller; `min` and `max` are ignored, as in SystemDS.
    Normal,
}

impl Pdf {
    /// Parses DML's `pdf=` argument (case-insensitive, as SystemDS upper-cases it).
    ///
    /// `poisson` is valid DML but not implemented here (it needs commons-math's Poisson
    /// sampler to be bit-exact), so it is reported as unsupported.
    pub fn parse(name: &str) -> Result<Pdf> {
        match name.to_ascii_lowercase().as_str() {
            "uniform" => Ok(Pdf::Uniform),
            "normal" => Ok(Pdf::Normal),
            "poisson" => Err(RuntimeError::unsupported("rand pdf 'poisson'")),
            _ => Err(RuntimeError::user(format!(
                "rand: unsupported probability distribution \"{name}\" -- it must be one of \"uniform\", \"normal\", or \"poisson\""
            ))),
        }
    }
}

/// `rand(rows=, cols=, min=, max=, sparsity=, seed=, pdf=)` exactly as SystemDS 3.4.0 computes it.
///
/// `seed == -1` draws a seed from the clock, as SystemDS does (`System.nanoTime()`). The result
/// is sparse (CSR) or dense by [`prefers_sparse`] on its exact non-zero count.
///
/// # Errors
/// `RuntimeError::User` for dimensions beyond SystemDS's `int` range or a sparsity outside
/// `[0, 1]` (or NaN); `RuntimeError::Resource` when the cell count overflows memory addressing.
/// `min > max` is accepted, as SystemDS accepts it (values then lie in `(max, min]`).
///
/// # Example
/// ```
/// use lafuse_runtime::datagen::{rand, Pdf};
/// let m = rand(3, 3, 0.0, 1.0, 1.0, 7, Pdf::Uniform).unwrap();
/// match m {
///     lafuse_runtime::Matrix::Dense(d) => assert_eq!(d.values[0], 0.45324353322292277),
///     _ => unreachable!("a full 3x3 matrix is dense"),
/// }
/// ```
pub fn rand(
    rows: usize,
    cols: usize,
    min: f64,
    max: f64,
    sparsity: f64,
    seed: i64,
    pdf: Pdf,
) -> Result<Matrix> {
    validate(rows, cols, sparsity)?;
    let seed = if seed == -1 { clock_seed() } else { seed };
    let (min, max) = match pdf {
        Pdf::Uniform => (min, max),
        Pdf::Normal => (0.0, 1.0),
    };
    if rows == 0 || cols == 0 {
        return Ok(empty(rows, cols));
    }
    // DataGenCPInstruction / LibMatrixDatagen shortcuts, before any generator is touched.
    if sparsity == 0.0 || (pdf == Pdf::Uniform && min == 0.0 && max == 0.0) {
        return Ok(empty(rows, cols));
    }
    if pdf == Pdf::Uniform && sparsity == 1.0 && (min == max || (min.is_nan() && max.is_nan())) {
        return constant(rows, cols, min);
    }

    let nrb = rows.div_ceil(BLOCK_SIZE);
    let ncb = cols.div_ceil(BLOCK_SIZE);
    let seeds = block_seeds(seed, nrb * ncb);
    let mut gen = Generator {
        rows,
        cols,
        min,
        range: max - min,
        sparsity,
        pdf,
        first_kept: 0,
    };
    gen.first_kept = gen.first_kept_block(nrb, ncb);
    let est_nnz = sparsity * rows as f64 * cols as f64;
    let cells = rows
        .checked_mul(cols)
        .ok_or_else(|| RuntimeError::Resource(format!("rand: {rows}x{cols} cells overflow")))?;
    if prefers_sparse(rows, cols, est_nnz.min(cells as f64) as usize) {
        let csr = gen.generate_sparse(&seeds, ncb);
        let nnz = csr.values.len();
        if prefers_sparse(rows, cols, nnz) {
            Ok(Matrix::Sparse(csr))
        } else {
            Ok(Matrix::Dense(csr_to_dense(&csr)))
        }
    } else {
        let dense = gen.generate_dense(&seeds, ncb, cells);
        if prefers_sparse(rows, cols, dense.nnz) {
            Ok(Matrix::Sparse(dense_to_csr(&dense)))
        } else {
            Ok(Matrix::Dense(dense))
        }
    }
}

fn validate(rows: usize, cols: usize, sparsity: f64) -> Result<()> {
    // SystemDS stores dimensions of a CP matrix block in Java ints.
    if rows > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(RuntimeError::user(format!(
            "rand: invalid matrix dimensions {rows}x{cols} (at most {} rows and columns)",
            i32::MAX
        )));
    }
    if !(0.0..=1.0).contains(&sparsity) {
        return Err(RuntimeError::user(format!(
            "rand: sparsity must be in [0, 1], got {sparsity}"
        )));
    }
    // `min > max` is deliberately accepted: SystemDS 3.4.0 runs it and yields values in
    // `(max, min]` (`min + (max - min) * u`), and scripts must print what SystemDS prints.
    Ok(())
}

/// SystemDS's `DataGenOp.generateRandomSeed()` is `System.nanoTime()`; any clock-derived value
/// has the same meaning ("unreproducible").
fn clock_seed() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let s = nanos as i64;
    // -1 would mean "pick a seed" again; any other value is as good.
    if s == -1 {
        0
    } else {
        s
    }
}

fn empty(rows: usize, cols: usize) -> Matrix {
    Matrix::Sparse(SparseMatrix {
        rows,
        cols,
        row_ptr: vec![0; rows + 1],
        col_idx: Vec::new(),
        values: Vec::new(),
    })
}

fn constant(rows: usize, cols: usize, v: f64) -> Result<Matrix> {
    if v == 0.0 {
        return Ok(empty(rows, cols));
    }
    let cells = rows
        .checked_mul(cols)
        .ok_or_else(|| RuntimeError::Resource(format!("rand: {rows}x{cols} cells overflow")))?;
    Ok(Matrix::Dense(DenseMatrix {
        rows,
        cols,
        values: vec![v; cells],
        nnz: cells,
    }))
}

/// The per-block seeds of `LibMatrixDatagen.setupSeedsForRand` + `generateSeedsForCP`.
fn block_seeds(seed: i64, blocks: usize) -> Vec<i64> {
    let mut random = JavaRandom::new(seed);
    let mut init = [0i32; 32];
    for s in init.iter_mut() {
        *s = random.next_int();
    }
    let mut well = Well1024a::new(&init);
    (0..blocks).map(|_| well.next_long()).collect()
}

/// Parameters shared by all blocks of one `rand` call.
struct Generator {
    rows: usize,
    cols: usize,
    min: f64,
    range: f64,
    sparsity: f64,
    pdf: Pdf,
    /// Index (row-major) of the first block whose values survive; see
    /// [`Generator::first_kept_block`].
    first_kept: usize,
}

/// How one block's cells are visited; mirrors the three paths of `genRandomNumbers`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BlockMethod {
    /// `genFullyDense`: every cell gets a value.
    Full,
    /// `genSparse`: geometric skips between non-zeros.
    Skip,
    /// `genDense`: a Bernoulli draw per cell.
    Bernoulli,
}

impl Generator {
    fn block_rows(&self, rbi: usize) -> usize {
        (self.rows - rbi * BLOCK_SIZE).min(BLOCK_SIZE)
    }

    fn block_cols(&self, cbj: usize) -> usize {
        (self.cols - cbj * BLOCK_SIZE).min(BLOCK_SIZE)
    }

    /// Reproduces a SystemDS defect that changes results. `LibMatrixDatagen` allocates the
    /// output dense or sparse from the whole matrix's estimated non-zeros; when the output is
    /// dense but a block is generated by skips (an edge block small enough to count as sparse,
    /// e.g. the last 1x3 block of a 2001x3 matrix), it allocates an empty sparse block and flips
    /// the output to sparse, silently dropping every value generated into the dense block
    /// before. So all blocks before the first skip-generated block come out empty.
    fn first_kept_block(&self, nrb: usize, ncb: usize) -> usize {
        let est = (self.sparsity * self.rows as f64 * self.cols as f64).ceil() as i64;
        if block_is_sparse(self.rows as i64, self.cols as i64, est) {
            return 0;
        }
        (0..nrb * ncb)
            .find(|&b| {
                let (brows, bcols) = (self.block_rows(b / ncb), self.block_cols(b % ncb));
                self.method(brows, bcols) == BlockMethod::Skip
            })
            .unwrap_or(0)
    }

    fn method(&self, brows: usize, bcols: usize) -> BlockMethod {
        if self.sparsity < 1.0 {
            let est = (self.sparsity * brows as f64 * bcols as f64) as i64;
            if block_is_sparse(brows as i64, bcols as i64, est) {
                return BlockMethod::Skip;
            }
            BlockMethod::Bernoulli
        } else {
            BlockMethod::Full
        }
    }

    /// Generates one block, calling `emit(local_row, local_col, value)` in row-major order.
    fn block(
        &self,
        seed: i64,
        brows: usize,
        bcols: usize,
        mut emit: impl FnMut(usize, usize, f64),
    ) {
        let mut values = ValuePrng::new(self.pdf, seed);
        // (long)(valuePRNG.nextDouble() * Long.MAX_VALUE): Java's d2l saturates and maps NaN
        // to 0, exactly like Rust's `as`.
        let mut cells = JavaRandom::new((values.next() * 9.223372036854776e18) as i64);
        let (min, range) = (self.min, self.range);
        match self.method(brows, bcols) {
            BlockMethod::Full => {
                for r in 0..brows {
                    for c in 0..bcols {
                        emit(r, c, min + range * values.next());
                    }
                }
            }
            BlockMethod::Bernoulli => {
                for r in 0..brows {
                    for c in 0..bcols {
                        if cells.next_double() <= self.sparsity {
                            emit(r, c, min + range * values.next());
                        }
                    }
                }
            }
            BlockMethod::Skip => {
                let log1mp = (1.0 - self.sparsity).ln();
                let size = (brows * bcols) as i64;
                let mut idx: i64 = 0;
                while idx < size {
                    let skip = (cells.next_double().ln() / log1mp).ceil() as i64;
                    idx = idx.wrapping_add(skip);
                    // Java would also stop here on a skip that overflows (u == 0.0 exactly,
                    // probability 2^-53), by throwing; ending the block is the graceful choice.
                    if idx > size || idx < 1 {
                        break;
                    }
                    let k = (idx - 1) as usize;
                    emit(k / bcols, k % bcols, min + range * values.next());
                }
            }
        }
    }

    fn generate_dense(&self, seeds: &[i64], ncb: usize, cells: usize) -> DenseMatrix {
        let cols = self.cols;
        let mut values = vec![0.0; cells];
        let nnz: usize = values
            .par_chunks_mut(BLOCK_SIZE * cols)
            .enumerate()
            .map(|(rbi, chunk)| {
                let brows = self.block_rows(rbi);
                let mut nnz = 0usize;
                for cbj in (0..ncb).filter(|&cbj| rbi * ncb + cbj >= self.first_kept) {
                    let off = cbj * BLOCK_SIZE;
                    self.block(
                        seeds[rbi * ncb + cbj],
                        brows,
                        self.block_cols(cbj),
                        |r, c, v| {
                            chunk[r * cols + off + c] = v;
                            nnz += (v != 0.0) as usize;
                        },
                    );
                }
                nnz
            })
            .sum();
        DenseMatrix {
            rows: self.rows,
            cols,
            values,
            nnz,
        }
    }

    fn generate_sparse(&self, seeds: &[i64], ncb: usize) -> SparseMatrix {
        let nrb = self.rows.div_ceil(BLOCK_SIZE);
        // Per row block: per-row counts plus the entries in row-major order. Column blocks are
        // visited left to right, so every row's columns come out sorted.
        let parts: Vec<(Vec<usize>, Vec<u32>, Vec<f64>)> = (0..nrb)
            .into_par_iter()
            .map(|rbi| {
                let brows = self.block_rows(rbi);
                let mut rows: Vec<Vec<(u32, f64)>> = vec![Vec::new(); brows];
                for cbj in (0..ncb).filter(|&cbj| rbi * ncb + cbj >= self.first_kept) {
                    let off = cbj * BLOCK_SIZE;
                    self.block(
                        seeds[rbi * ncb + cbj],
                        brows,
                        self.block_cols(cbj),
                        |r, c, v| {
                            if v != 0.0 {
                                rows[r].push(((off + c) as u32, v));
                            }
                        },
                    );
                }
                let counts = rows.iter().map(Vec::len).collect();
                let (cols, vals) = rows.into_iter().flatten().unzip();
                (counts, cols, vals)
            })
            .collect();
        let mut row_ptr = Vec::with_capacity(self.rows + 1);
        row_ptr.push(0);
        let total: usize = parts.iter().map(|p| p.1.len()).sum();
        let mut col_idx = Vec::with_capacity(total);
        let mut values = Vec::with_capacity(total);
        for (counts, c, v) in parts {
            for n in counts {
                let last = *row_ptr.last().unwrap_or(&0);
                row_ptr.push(last + n);
            }
            col_idx.extend(c);
            values.extend(v);
        }
        SparseMatrix {
            rows: self.rows,
            cols: self.cols,
            row_ptr,
            col_idx,
            values,
        }
    }
}

fn csr_to_dense(m: &SparseMatrix) -> DenseMatrix {
    let mut values = vec![0.0; m.rows * m.cols];
    for r in 0..m.rows {
        for k in m.row_ptr[r]..m.row_ptr[r + 1] {
            values[r * m.cols + m.col_idx[k] as usize] = m.values[k];
        }
    }
    DenseMatrix {
        rows: m.rows,
        cols: m.cols,
        values,
        nnz: m.values.len(),
    }
}

fn dense_to_csr(m: &DenseMatrix) -> SparseMatrix {
    let mut row_ptr = Vec::with_capacity(m.rows + 1);
    row_ptr.push(0);
    let mut col_idx = Vec::with_capacity(m.nnz);
    let mut values = Vec::with_capacity(m.nnz);
    for r in 0..m.rows {
        for (c, &v) in m.values[r * m.cols..(r + 1) * m.cols].iter().enumerate() {
            if v != 0.0 {
                col_idx.push(c as u32);
                values.push(v);
            }
        }
        row_ptr.push(values.len());
    }
    SparseMatrix {
        rows: m.rows,
        cols: m.cols,
        row_ptr,
        col_idx,
        values,
    }
}

/// `MatrixBlock.evalSparseFormatInMemory(rows, cols, nnz)` of SystemDS 3.4.0: sparse when the
/// sparsity is below 0.4, there is more than one column, and the estimated in-memory size of
/// the default sparse block (MCSR) is smaller than that of a dense block.
///
/// The block-level decision selects the cell-selection algorithm and therefore the values, so
/// the memory estimates are reproduced with Java's exact operation order and `Math.min/max`
/// NaN semantics. The matrix header size appears on both sides and cancels.
pub fn block_is_sparse(rows: i64, cols: i64, nnz: i64) -> bool {
    let sp = nnz as f64 / rows as f64 / cols as f64;
    if !(sp < 0.4 && cols > 1) {
        return false;
    }
    let sparse = if sp == 0.0 {
        0.0
    } else {
        mcsr_size(rows, cols, sp) as f64
    };
    let dense = dense_size(rows, cols);
    sparse < dense
}

/// `Math.max` / `Math.min` propagate NaN, unlike `f64::max` / `f64::min`.
fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// `MemoryEstimates.intArrayCost`.
fn int_array_cost(n: i64) -> f64 {
    let mut size = 28.0;
    if n <= 1 {
        size += 4.0;
    } else {
        size += 4.0 * n as f64;
        if n % 2 == 0 {
            size += 4.0;
        }
    }
    size
}

/// `MemoryEstimates.doubleArrayCost` (equal to `objectArrayCost` with compressed oops).
fn double_array_cost(n: i64) -> f64 {
    32.0 + 8.0 * n as f64
}

/// `SparseBlockMCSR.estimateSizeInMemory(rows, cols, sparsity)`.
fn mcsr_size(rows: i64, cols: i64, sp: f64) -> i64 {
    let cnnz = (sp * rows as f64 * cols as f64).ceil();
    let rlen = java_min(rows as f64, cnnz);
    let cnnz_per_row = java_max(4.0, cnnz / rlen);
    let mut size = 16.0 + double_array_cost(rows);
    let mut row_size: i64 = 24;
    row_size = (row_size as f64 + int_array_cost(0)) as i64;
    row_size = (row_size as f64 + double_array_cost(0)) as i64;
    row_size = (row_size as f64 + 12.0 * java_max(1.0, cnnz_per_row)) as i64;
    size += rlen * row_size as f64;
    java_min(size, 9.223372036854776e18) as i64
}

/// `DenseBlockFP64.estimateMemory(rows, cols)`.
fn dense_size(rows: i64, cols: i64) -> f64 {
    if rows as f64 * cols as f64 > 9.223372036854776e18 {
        return 9.223372036854776e18;
    }
    let base = ((24.0 + int_array_cost(1)) as i64 + 8) as f64;
    base + double_array_cost(rows.wrapping_mul(cols))
}

/// The value generator of one block: `UniformPRNGenerator` or `NormalPRNGenerator`.
enum ValuePrng {
    Uniform(JavaRandom),
    Normal(BoxMuller),
}

impl ValuePrng {
    fn new(pdf: Pdf, seed: i64) -> ValuePrng {
        match pdf {
            Pdf::Uniform => ValuePrng::Uniform(JavaRandom::new(seed)),
            Pdf::Normal => ValuePrng::Normal(BoxMuller::new(seed)),
        }
    }

    #[inline]
    fn next(&mut self) -> f64 {
        match self {
            ValuePrng::Uniform(r) => r.next_double(),
            ValuePrng::Normal(b) => b.next(),
        }
    }
}

/// SystemDS's `NormalPRNGenerator` + `RandNPair`: Box-Muller pairs over `java.util.Random`,
/// computed eagerly on seeding and after the second value of a pair is taken.
struct BoxMuller {
    random: JavaRandom,
    pair: (f64, f64),
    second: bool,
}

impl BoxMuller {
    fn new(seed: i64) -> BoxMuller {
        let mut random = JavaRandom::new(seed);
        let pair = Self::pair(&mut random);
        BoxMuller {
            random,
            pair,
            second: false,
        }
    }

    fn pair(random: &mut JavaRandom) -> (f64, f64) {
        let u1 = random.next_double();
        let u2 = random.next_double();
        let v1 = (-2.0 * u1.ln()).sqrt();
        let v2 = std::f64::consts::TAU * u2;
        (v1 * v2.cos(), v1 * v2.sin())
    }

    #[inline]
    fn next(&mut self) -> f64 {
        let d = if self.second {
            let d = self.pair.1;
            self.pair = Self::pair(&mut self.random);
            d
        } else {
            self.pair.0
        };
        self.second = !self.second;
        d
    }
}

/// `java.util.Random`: a 48-bit linear congruential generator.
#[derive(Clone, Debug)]
pub struct JavaRandom {
    seed: u64,
}

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;

    /// `new Random(seed)` / `setSeed(seed)`.
    pub fn new(seed: i64) -> JavaRandom {
        JavaRandom {
            seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    #[inline]
    fn next(&mut self, bits: u32) -> i32 {
        self.seed = self.seed.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB) & Self::MASK;
        (self.seed >> (48 - bits)) as i32
    }

    /// `nextInt()`.
    pub fn next_int(&mut self) -> i32 {
        self.next(32)
    }

    /// `nextDouble()`: 53 random bits scaled to `[0, 1)`.
    #[inline]
    pub fn next_double(&mut self) -> f64 {
        let hi = (self.next(26) as i64) << 27;
        let lo = self.next(27) as i64;
        (hi + lo) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// commons-math3 `Well1024a` (Panneton, L'Ecuyer, Matsumoto), as used by SystemDS to derive
/// per-block seeds.
struct Well1024a {
    v: [i32; 32],
    index: usize,
}

impl Well1024a {
    const R: usize = 32;
    const M1: usize = 3;
    const M2: usize = 24;
    const M3: usize = 10;

    /// `new Well1024a()` followed by `setSeed(int[32])`: a full-length seed fills the state.
    fn new(seed: &[i32; 32]) -> Well1024a {
        Well1024a { v: *seed, index: 0 }
    }

    fn next(&mut self) -> i32 {
        let r = Self::R;
        let i = self.index;
        let index_rm1 = (i + r - 1) % r;
        let v0 = self.v[i];
        let vm1 = self.v[(i + Self::M1) % r];
        let vm2 = self.v[(i + Self::M2) % r];
        let vm3 = self.v[(i + Self::M3) % r];
        let z0 = self.v[index_rm1];
        let z1 = v0 ^ (vm1 ^ ((vm1 as u32) >> 8) as i32);
        let z2 = (vm2 ^ (vm2 << 19)) ^ (vm3 ^ (vm3 << 14));
        let z3 = z1 ^ z2;
        let z4 = (z0 ^ (z0 << 11)) ^ (z1 ^ (z1 << 7)) ^ (z2 ^ (z2 << 13));
        self.v[i] = z3;
        self.v[index_rm1] = z4;
        self.index = index_rm1;
        z4
    }

    /// `BitsStreamGenerator.nextLong()`: two 32-bit outputs, high word first.
    fn next_long(&mut self) -> i64 {
        let high = (self.next() as i64) << 32;
        let low = (self.next() as i64) & 0xffff_ffff;
        high | low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(m: &Matrix) -> (usize, usize, Vec<f64>) {
        match m {
            Matrix::Dense(d) => (d.rows, d.cols, d.values.clone()),
            Matrix::Sparse(s) => {
                let mut v = vec![0.0; s.rows * s.cols];
                for r in 0..s.rows {
                    for k in s.row_ptr[r]..s.row_ptr[r + 1] {
                        v[r * s.cols + s.col_idx[k] as usize] = s.values[k];
                    }
                }
                (s.rows, s.cols, v)
            }
        }
    }

    /// Checks the matrix invariants of `matrix.rs` (written out here so this test does not
    /// depend on helper methods) and returns (nnz, row-major sum).
    fn check(m: &Matrix) -> (usize, f64) {
        match m {
            Matrix::Dense(d) => {
                assert_eq!(d.values.len(), d.rows * d.cols);
                assert_eq!(d.nnz, d.values.iter().filter(|v| **v != 0.0).count());
            }
            Matrix::Sparse(s) => {
                assert_eq!(s.row_ptr.len(), s.rows + 1);
                assert_eq!(s.row_ptr[0], 0);
                assert_eq!(s.row_ptr[s.rows], s.values.len());
                assert_eq!(s.col_idx.len(), s.values.len());
                for r in 0..s.rows {
                    let row = &s.col_idx[s.row_ptr[r]..s.row_ptr[r + 1]];
                    assert!(row.windows(2).all(|w| w[0] < w[1]), "row {r} unsorted");
                    assert!(row.iter().all(|&c| (c as usize) < s.cols));
                }
                assert!(s.values.iter().all(|v| *v != 0.0), "explicit zero stored");
            }
        }
        let (_, _, v) = cells(m);
        (v.iter().filter(|x| **x != 0.0).count(), v.iter().sum())
    }

    fn assert_close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs().max(1e-300),
            "got {got:?}, want {want:?}"
        );
    }

    #[test]
    fn java_random_and_well1024a_match_the_jdk_and_commons_math() {
        // Values printed by java.util.Random and commons-math3 3.4.1 Well1024a.
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next_int(), -1170105035);
        assert_eq!(r.next_double(), 0.05466526274716077);
        assert_eq!(JavaRandom::new(-7).next_double(), 0.2691218093260761);
        let mut seed = [0i32; 32];
        for (i, s) in seed.iter_mut().enumerate() {
            *s = i as i32 * 7919 - 3;
        }
        let mut w = Well1024a::new(&seed);
        assert_eq!(w.next_long(), -9096414507199321416);
        assert_eq!(w.next_long(), -8582506665628653830);
    }

    // The reference values below come from SystemDS 3.4.0: `print(...)` of DML scripts, or
    // `MatrixBlock.randOperations(rows, cols, sparsity, min, max, pdf, seed)` called from Java
    // with the row-major sum of the cells and the exact non-zero count.

    #[test]
    fn small_uniform_matrix_is_bit_exact() {
        // print(toString(rand(rows=3, cols=3, seed=7), decimal=17))
        let m = rand(3, 3, 0.0, 1.0, 1.0, 7, Pdf::Uniform).unwrap();
        let (_, _, v) = cells(&m);
        assert_eq!(
            v,
            [
                0.45324353322292277,
                0.01592030416320278,
                0.08606588879859611,
                0.5966360597314019,
                0.05575396305254521,
                0.05475426466690947,
                0.4610377623131737,
                0.77709061434543,
                0.40737390321617917
            ]
        );
        assert!(matches!(m, Matrix::Dense(_)));
    }

    #[test]
    fn multi_block_matrices_match_systemds() {
        // (rows, cols, min, max, sparsity, seed, pdf, nnz, sum, relative tolerance)
        let cases = [
            // skip-generated sparse blocks, 3x2 blocks
            (
                2500,
                1700,
                0.0,
                1.0,
                0.3,
                42,
                Pdf::Uniform,
                1274177,
                637614.2144095871,
                1e-12,
            ),
            // Bernoulli-generated dense blocks, 2x1 blocks
            (
                1001,
                999,
                -5.0,
                10.0,
                0.9,
                123456789,
                Pdf::Uniform,
                900276,
                2238428.7354903347,
                1e-12,
            ),
            // narrow: the MCSR estimate makes these blocks dense (Bernoulli)
            (
                1000,
                2,
                0.0,
                1.0,
                0.1,
                5,
                Pdf::Uniform,
                187,
                91.12992907350255,
                1e-12,
            ),
            (
                3000,
                3,
                -1.0,
                1.0,
                0.2,
                9,
                Pdf::Uniform,
                1795,
                7.185714702574105,
                1e-12,
            ),
            // negative seed, one row block of five column blocks
            (
                7,
                5000,
                0.0,
                1.0,
                0.05,
                -5,
                Pdf::Uniform,
                1750,
                871.834506108394,
                1e-12,
            ),
            (
                1500,
                2100,
                0.0,
                1.0,
                0.001,
                77,
                Pdf::Uniform,
                3130,
                1545.0587410510232,
                1e-12,
            ),
            (
                5000,
                1,
                0.0,
                1.0,
                0.3,
                11,
                Pdf::Uniform,
                1542,
                773.9008803613373,
                1e-12,
            ),
            // print(sum(rand(rows=2500, cols=1700, sparsity=0.3, seed=42, pdf="normal")))
            (
                2500,
                1700,
                0.0,
                1.0,
                0.3,
                42,
                Pdf::Normal,
                1274676,
                -963.7882608452237,
                1e-9,
            ),
            // print(sum(rand(rows=1001, cols=1001, sparsity=0.01, seed=5, pdf="normal")))
            (
                1001,
                1001,
                0.0,
                1.0,
                0.01,
                5,
                Pdf::Normal,
                10127,
                79.93157546276353,
                1e-9,
            ),
            // print(sum(rand(rows=2500, cols=2500, sparsity=0.7, min=-2, max=3, seed=99)))
            (
                2500,
                2500,
                -2.0,
                3.0,
                0.7,
                99,
                Pdf::Uniform,
                4374740,
                2194803.3520828728,
                1e-12,
            ),
        ];
        for (rows, cols, min, max, sp, seed, pdf, nnz, sum, tol) in cases {
            let m = rand(rows, cols, min, max, sp, seed, pdf).unwrap();
            let (got_nnz, got_sum) = check(&m);
            assert_eq!(
                got_nnz, nnz,
                "nnz of rand({rows}, {cols}, sparsity={sp}, seed={seed})"
            );
            assert_close(got_sum, sum, tol);
        }
    }

    #[test]
    fn dense_normal_matrix_matches_systemds() {
        // print(sum(rand(rows=3000, cols=3000, seed=1, pdf="normal"))): 9 blocks.
        let m = rand(3000, 3000, 0.0, 1.0, 1.0, 1, Pdf::Normal).unwrap();
        let (nnz, sum) = check(&m);
        assert_eq!(nnz, 9_000_000);
        assert_close(sum, -300.5637519067807, 1e-9);
    }

    #[test]
    fn systemds_defect_drops_blocks_before_a_sparse_edge_block() {
        // Whole matrix dense, last 1x3 block sparse: SystemDS keeps only that block.
        // print(sum(rand(rows=2001, cols=3, sparsity=0.2, seed=8, pdf="normal"))) -> 0.0
        let m = rand(2001, 3, 0.0, 1.0, 0.2, 8, Pdf::Normal).unwrap();
        assert_eq!(check(&m), (0, 0.0));
        let m = rand(2001, 3, 0.0, 1.0, 0.3, 8, Pdf::Uniform).unwrap();
        assert_eq!(check(&m), (1, 0.2126976768344231));
        // print(sum(rand(rows=200001, cols=3, sparsity=0.2, seed=5)))
        let m = rand(200001, 3, 0.0, 1.0, 0.2, 5, Pdf::Uniform).unwrap();
        assert_eq!(check(&m), (3, 2.3695850533036538));
    }

    #[test]
    fn shortcuts_and_degenerate_ranges() {
        // print(toString(rand(rows=3, cols=3, min=2, max=1, seed=1))): min > max is accepted.
        let m = rand(3, 3, 2.0, 1.0, 1.0, 1, Pdf::Uniform).unwrap();
        let (_, _, v) = cells(&m);
        let rounded: Vec<f64> = v.iter().map(|x| (x * 1000.0).round() / 1000.0).collect();
        assert_eq!(
            rounded,
            [1.546, 1.217, 1.639, 1.888, 1.634, 1.384, 1.208, 1.633, 1.370]
        );
        // print(toString(rand(rows=2, cols=2, min=5, max=5, sparsity=0.5, seed=3)))
        let m = rand(2, 2, 5.0, 5.0, 0.5, 3, Pdf::Uniform).unwrap();
        assert_eq!(cells(&m).2, [5.0, 0.0, 5.0, 0.0]);
        // Constant and empty shortcuts touch no generator, so any seed gives the same.
        let m = rand(4, 3, 2.5, 2.5, 1.0, -1, Pdf::Uniform).unwrap();
        assert_eq!(check(&m), (12, 30.0));
        assert!(matches!(m, Matrix::Dense(_)));
        for m in [
            rand(4, 3, 0.0, 0.0, 1.0, 1, Pdf::Uniform).unwrap(),
            rand(4, 3, 0.0, 1.0, 0.0, 1, Pdf::Normal).unwrap(),
            rand(0, 3, 0.0, 1.0, 1.0, 1, Pdf::Uniform).unwrap(),
        ] {
            assert!(matches!(&m, Matrix::Sparse(s) if s.values.is_empty()));
            check(&m);
        }
        // Normal ignores min and max.
        assert_eq!(
            rand(5, 5, 3.0, 9.0, 1.0, 4, Pdf::Normal).unwrap(),
            rand(5, 5, 0.0, 1.0, 1.0, 4, Pdf::Normal).unwrap()
        );
    }

    #[test]
    fn format_follows_sparsity() {
        assert!(matches!(
            rand(100, 100, 0.0, 1.0, 0.39, 8, Pdf::Uniform).unwrap(),
            Matrix::Sparse(_)
        ));
        assert!(matches!(
            rand(100, 100, 0.0, 1.0, 0.5, 8, Pdf::Uniform).unwrap(),
            Matrix::Dense(_)
        ));
        // A column vector is always dense.
        assert!(matches!(
            rand(100, 1, 0.0, 1.0, 0.1, 8, Pdf::Uniform).unwrap(),
            Matrix::Dense(_)
        ));
    }

    #[test]
    fn random_seed_and_determinism() {
        let a = rand(50, 40, 0.0, 1.0, 1.0, -1, Pdf::Uniform).unwrap();
        let b = rand(50, 40, 0.0, 1.0, 1.0, -1, Pdf::Uniform).unwrap();
        assert_ne!(a, b, "seed=-1 must draw a fresh seed");
        let c = rand(2100, 1300, -1.0, 1.0, 0.2, 3, Pdf::Normal).unwrap();
        let d = rand(2100, 1300, -1.0, 1.0, 0.2, 3, Pdf::Normal).unwrap();
        assert_eq!(c, d);
        check(&c);
    }

    #[test]
    fn invalid_arguments_are_user_errors() {
        for sp in [1.5, -0.1, f64::NAN] {
            assert!(matches!(
                rand(3, 3, 0.0, 1.0, sp, 1, Pdf::Uniform),
                Err(RuntimeError::User(_))
            ));
        }
        assert!(matches!(
            rand(1 << 31, 3, 0.0, 1.0, 1.0, 1, Pdf::Uniform),
            Err(RuntimeError::User(_))
        ));
        assert_eq!(Pdf::parse("NORMAL"), Ok(Pdf::Normal));
        assert_eq!(
            Pdf::parse("poisson"),
            Err(RuntimeError::unsupported("rand pdf 'poisson'"))
        );
        assert!(matches!(Pdf::parse("foo"), Err(RuntimeError::User(_))));
    }

    #[test]
    fn block_format_decision_matches_systemds_estimates() {
        assert!(!block_is_sparse(1000, 3, 600)); // per-row overhead beats dense
        assert!(block_is_sparse(1, 3, 0)); // empty edge block
        assert!(block_is_sparse(1000, 1000, 300_000));
        assert!(!block_is_sparse(1000, 1000, 400_000)); // at the 0.4 turn point
        assert!(!block_is_sparse(1000, 1, 0)); // column vectors are never sparse
        assert!(!block_is_sparse(2001, 3, 1201));
    }
}
