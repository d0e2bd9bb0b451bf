//! The instruction executor: runs a block's linear instruction list over registers and a
//! symbol table, with optional per-opcode timing for `--stats`.
//!
//! A block is lowered (by the engine) into [`Instruction`]s that read and write numbered
//! registers; `Load`/`Store` move values between registers and the block's variables. Each
//! instruction lists the registers whose last use it is, so intermediates are released as soon
//! as possible (peak memory is that of the live values, not of the whole block).

use crate::error::{
    Axis, Conversion, FileError, Internal, PrintError, Resource, Result, RuntimeError, Unsupported,
};
use crate::frame::Frame;
use crate::lineage::reuse::{self, Decision, Reuse};
use crate::lineage::trace::{self, Traced, Tracer};
use crate::lineage::Lineage;
use crate::matrix::{Matrix, ValueRange};
use crate::operator::{Operator, OperatorInput};
use crate::ops::{AggOp, BinaryOp, Direction, UnaryOp};
use crate::value::{ScalarType, Value};
use lafuse_core::{DecompOp, DnnOp, LinAlgOp, StatOp};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A register number, local to one instruction list.
pub type Reg = u32;

/// What an instruction computes. Input order is documented per variant; scalar inputs are
/// registers holding scalar values.
#[derive(Clone, Debug)]
pub enum Op {
    /// Reads a variable of the symbol table. No inputs.
    Load(Arc<str>),
    /// Moves a variable's value out of the symbol table (for a block that rebinds the variable
    /// before it ends), so that an in-place kernel may own the only reference. No inputs.
    Take(Arc<str>),
    /// Binds a variable. Inputs: `[value]`.
    Store(Arc<str>),
    /// A constant. No inputs.
    Const(Value),
    /// Element-wise unary operator on a matrix or scalar. Inputs: `[x]`.
    Unary(UnaryOp),
    /// Element-wise binary operator; either side may be a scalar. Inputs: `[a, b]`.
    Binary(BinaryOp),
    /// `ifelse(test, yes, no)`. Inputs: `[test, yes, no]` (each a matrix or scalar).
    IfElse,
    /// `replace(target, pattern, replacement)`. Inputs: `[target, pattern, replacement]`.
    Replace,
    /// Aggregation. Inputs: `[x]`.
    Aggregate(AggOp, Direction),
    /// Column-wise cumulative sum. Inputs: `[x]`.
    Cumsum,
    /// Column-wise running `*`, `min` or `max` (`cumprod`, `cummin`, `cummax`). Inputs: `[x]`.
    Cumulative(BinaryOp),
    /// `cumsumprod(X)` of a two-column X. Inputs: `[x]`.
    Cumsumprod,
    /// `rev(X)`. Inputs: `[x]`.
    Rev,
    /// `table(A, B, W, odim1, odim2)`. Inputs: `[A, B, W, odim1, odim2]` (dimensions -1 where
    /// not given).
    Table,
    /// `removeEmpty(...)`. Inputs: `[X, margin, empty_return]` or `[X, margin,
    /// empty_return, select]`.
    RemoveEmpty,
    /// `order(...)`. Inputs: `[X, by, decreasing, index_return]`.
    Order,
    /// `rowIndexMax(X)` (`true`) or `rowIndexMin(X)`. Inputs: `[x]`.
    RowIndex(bool),
    /// `outer(u, v, op)`. Inputs: `[u, v, op]`.
    Outer,
    /// `unique(X, dir)`. Inputs: `[X, dir]`.
    Unique,
    /// `lower.tri` (`true`) or `upper.tri`. Inputs: `[X, diag, values]`.
    Triangle(bool),
    /// `aggregate(...)`. Inputs: `[X, G, fn, ngroups, order]` or `[X, G, fn, ngroups, order,
    /// W]`.
    GroupedAggregate,
    /// `%*%`. Inputs: `[a, b]`.
    MatMul,
    /// `t(X) %*% X` without materialising `t(X)`. Inputs: `[X]`.
    TransposeSelfMatMul,
    /// `t(Z) %*% Z` for `Z = cbind(X, dX)`, which partial reuse computes without `Z` (from a
    /// cached `t(X) %*% X`); run as it stands, the `cbind` and `tsmm`. Inputs: `[X, dX]`.
    TransposeSelfMatMulOfCbind,
    /// `t(X) %*% y` for `X = rbind(A, dA)` and `y = rbind(yA, dy)`, which partial reuse
    /// computes without the concatenations (from a cached `t(A) %*% yA`); run as it stands,
    /// the `rbind`s and the product. Inputs: `[A, dA, yA, dy]`.
    TransposedLeftMatMulOfRbind,
    /// `t(A) %*% B` without materialising `t(A)`. Inputs: [A, B].
    TransposedLeftMatMul,
    /// `A %*% t(B)` without materialising `t(B)` where the product allows
    /// ([`kernels::matmul_nt`]). Inputs: [A, B].
    TransposedRightMatMul,
    /// `t(A %*% B)`, or `t(A %*% t(B))` with `b_transposed`, without materialising the
    /// product where dgemm computes it ([`kernels::matmul_transposed_out`]). Inputs: [A, B].
    TransposedOutMatMul {
        b_transposed: bool,
    },
    /// `t(X)`. Inputs: `[x]`.
    Transpose,
    /// `diag(X)`. Inputs: `[x]`.
    Diag,
    /// `matrix(X, rows, cols, byrow)`. Inputs: `[x, rows, cols, byrow]`.
    Reshape,
    /// `matrix(v, rows, cols)` with a scalar v. Inputs: `[v, rows, cols]`.
    Fill,
    /// `solve(A, b)`. Inputs: [A, b].
    Solve,
    /// A statistic of column vectors (`quantile`, `median`, `moment`, `cov`, ...). Inputs:
    /// as [`StatOp`] lists them.
    Stat(StatOp),
    /// `inv`, `cholesky` or `det`. Inputs: `[A]`.
    LinAlg(LinAlgOp),
    /// A deep-learning built-in (`conv2d`, `max_pool`, `bias_add`, ...). Inputs: as
    /// [`DnnOp`] lists them, its matrices then its geometry's scalars.
    Dnn(DnnOp),
    /// A decomposition with several results, computed once. Inputs: `[A]`. Result `k` (in
    /// DML's order) goes to `outputs[k]` where the block uses it (the instruction's own
    /// `output` is unused); its lineage patches are those of the `Some` entries, in order.
    Decompose {
        op: DecompOp,
        outputs: Vec<Option<Reg>>,
    },
    /// `as.frame(X)`. Inputs: `[X]`.
    AsFrame,
    /// `[X, M] = transformencode(target=F, spec=S)`, computed once: the encoded matrix goes to
    /// `outputs[0]`, the metadata frame to `outputs[1]`, where the block uses them (as for
    /// `Decompose`). Inputs: `[F, S]`.
    TransformEncode {
        outputs: Vec<Option<Reg>>,
    },
    /// `transformapply(target=F, spec=S, meta=M)`. Inputs: `[F, S, M]`.
    TransformApply,
    /// `transformdecode(target=X, spec=S, meta=M)`. Inputs: `[X, S, M]`.
    TransformDecode,
    /// `colnames(F)`. Inputs: `[F]`.
    Colnames,
    /// `X[rl:ru, cl:cu]`, bounds 1-based inclusive. Inputs: [X, rl, ru, cl, cu].
    Slice,
    /// `X[rl:ru, cl:cu] = src`. Inputs: [X, src, rl, ru, cl, cu]; result: the updated X.
    LeftIndex,
    /// `cbind(...)`. Inputs: the operands.
    Cbind,
    /// `rbind(...)`. Inputs: the operands.
    Rbind,
    /// Element-wise min/max of several operands. Inputs: the operands.
    NaryMinMax(BinaryOp),
    /// `matrix("1 2 3 4", rows, cols)`: numbers separated by spaces or commas, filled row by
    /// row. Inputs: `[values, rows, cols]`.
    MatrixFromString,
    /// `rand(...)`. Inputs: `[rows, cols, min, max, sparsity, seed, pdf]`.
    Rand,
    /// `seq(from, to, incr)`. Inputs: `[from, to, incr]`.
    Seq,
    /// `sample(range, size, replace, seed)`. Inputs: `[range, size, replace, seed]`.
    Sample,
    /// A scalar cast (`as.double`, `as.integer`, `as.logical`). Inputs: `[x]`.
    CastScalar(ScalarType),
    /// `as.scalar(X)` of a 1x1 matrix. Inputs: `[X]`.
    CastToScalar,
    /// `as.matrix(s)` of a scalar (1x1). Inputs: `[s]`.
    CastToMatrix,
    /// `nrow`, `ncol`, `length` at run time (normally folded at compile time). Inputs: `[X]`.
    Nrow,
    Ncol,
    Length,
    /// `print(x)`, or `print(format, args...)` with Java `String.format` placeholders.
    /// Inputs: `[x]` or `[format, args...]`.
    Print,
    /// `stop(msg)`. Inputs: `[msg]`.
    Stop,
    /// `assert(cond)`: fails with [`RuntimeError::AssertionFailed`] where `cond` is false.
    Assert,
    /// `toString(X, ...)`. Inputs: [X, rows, cols, decimal, sparse, sep, linebreak].
    ToString,
    /// `list(...)`: a list of the inputs, named by `names` (one per input) when given.
    ListNew {
        names: Option<Arc<[String]>>,
    },
    /// `L[lower:upper]`, or `L["name"]` with the name as both bounds: a sub-list.
    /// Inputs: `[L, lower, upper]`.
    ListIndex,
    /// `append(L, x)`: L with x added (a one-element list adds its element, with its name).
    /// Inputs: `[L, x]`.
    ListAppend,
    /// `L[lower:upper] = x`: L with those elements replaced by x (x's elements where x is a
    /// list of that many). Inputs: `[L, lower, upper, x]`.
    ListSet,
    /// Result `output` of `[L2, e] = remove(L, i)`: L without its `i`-th element (0), or that
    /// element in a list (1). Inputs: `[L, i]`.
    ListRemove {
        output: u8,
    },
    /// `as.list(L)`: the element of a list holding one list, else L. Inputs: `[L]`.
    ListUnnest,
    /// `read(file, ...)`. Inputs: `[path, p_1, ..., p_k]`, `p_i` the value of the named
    /// parameter `params[i]` (`format`, `header`, `sep`, `rows`, `cols`, ...).
    Read {
        params: Vec<Arc<str>>,
    },
    /// `write(X, file, ...)`. Inputs: [X, path, p_1, ..., p_k] as for `Read`.
    Write {
        params: Vec<Arc<str>>,
    },
    /// `time()`: nanoseconds since the Unix epoch. No inputs.
    Time,
    /// `lineage(X)`: the lineage log of X's item (a string); needs tracing. Inputs: `[X]`.
    Lineage,
    /// A fused operator. Inputs: the operator's inputs by position. Its results go to
    /// `outputs` (the instruction's own `output` is unused), a 1×1 result becoming a double
    /// where the output is a scalar.
    Fused {
        operator: Arc<dyn Operator>,
        outputs: Vec<FusedOutput>,
    },
}

/// Where one result of a fused operator goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedOutput {
    /// The register receiving the value.
    pub reg: Reg,
    /// Whether the value is a scalar (a full aggregate) rather than a matrix.
    pub scalar: bool,
}

impl Op {
    /// The registers of an instruction with several results (a fused operator, a
    /// decomposition), in the order of its lineage patches; `None` for one with a single
    /// result (in the instruction's `output`).
    pub fn result_registers(&self) -> Option<Vec<Reg>> {
        match self {
            Op::Fused { outputs, .. } => Some(outputs.iter().map(|o| o.reg).collect()),
            Op::Decompose { outputs, .. } | Op::TransformEncode { outputs } => {
                Some(outputs.iter().flatten().copied().collect())
            }
            _ => None,
        }
    }

    /// A short opcode, shown in statistics (in the spirit of SystemDS's opcodes).
    pub fn opcode(&self) -> String {
        match self {
            Op::Load(_) | Op::Take(_) => "load".into(),
            Op::Store(_) => "store".into(),
            Op::Const(_) => "const".into(),
            Op::Unary(op) => op.name().into(),
            Op::Binary(op) => op.name().into(),
            Op::IfElse => "ifelse".into(),
            Op::Replace => "replace".into(),
            Op::Aggregate(op, dir) => {
                let prefix = match dir {
                    Direction::Full => "ua",
                    Direction::Row => "uar",
                    Direction::Col => "uac",
                };
                format!("{prefix}{}", op.name())
            }
            Op::Cumsum => "ucumk+".into(),
            Op::Cumulative(BinaryOp::Mul) => "ucum*".into(),
            Op::Cumulative(BinaryOp::Min) => "ucummin".into(),
            Op::Cumulative(op) => format!("ucum{}", op.name()),
            Op::Cumsumprod => "ucumk+*".into(),
            Op::Rev => "rev".into(),
            Op::Table => "ctable".into(),
            Op::RemoveEmpty => "rmempty".into(),
            Op::Order => "rsort".into(),
            Op::RowIndex(true) => "uarimax".into(),
            Op::RowIndex(false) => "uarimin".into(),
            Op::Outer => "outer".into(),
            Op::Unique => "unique".into(),
            Op::Triangle(true) => "lowertri".into(),
            Op::Triangle(false) => "uppertri".into(),
            Op::GroupedAggregate => "groupedagg".into(),
            Op::MatMul => "ba+*".into(),
            Op::TransposeSelfMatMul => "tsmm".into(),
            Op::TransposeSelfMatMulOfCbind => "tsmm_cbind".into(),
            Op::TransposedLeftMatMulOfRbind => "ba+*t_rbind".into(),
            Op::TransposedLeftMatMul => "ba+*t".into(),
            Op::TransposedRightMatMul => "ba+*nt".into(),
            Op::TransposedOutMatMul {
                b_transposed: false,
            } => "t(ba+*)".into(),
            Op::TransposedOutMatMul { b_transposed: true } => "t(ba+*nt)".into(),
            Op::Transpose => "r'".into(),
            Op::Diag => "rdiag".into(),
            Op::Reshape => "rshape".into(),
            Op::Fill => "fill".into(),
            Op::MatrixFromString => "sinit".into(),
            Op::Solve => "solve".into(),
            Op::Stat(op) => op.name().into(),
            // SystemDS's opcodes.
            Op::LinAlg(LinAlgOp::Inverse) => "inverse".into(),
            Op::LinAlg(op) => op.name().into(),
            Op::Dnn(op) => op.name().into(),
            Op::Decompose { op, .. } => op.name().into(),
            // SystemDS's opcodes.
            Op::AsFrame => "castdtf".into(),
            Op::TransformEncode { .. } => "transformencode".into(),
            Op::TransformApply => "transformapply".into(),
            Op::TransformDecode => "transformdecode".into(),
            Op::Colnames => "colnames".into(),
            Op::Slice => "rightIndex".into(),
            Op::LeftIndex => "leftIndex".into(),
            Op::Cbind => "cbind".into(),
            Op::Rbind => "rbind".into(),
            Op::NaryMinMax(op) => format!("n{}", op.name()),
            Op::Rand => "rand".into(),
            Op::Seq => "seq".into(),
            Op::Sample => "sample".into(),
            Op::CastScalar(_) => "castsc".into(),
            Op::CastToScalar => "castdts".into(),
            Op::CastToMatrix => "castsdm".into(),
            Op::Nrow => "nrow".into(),
            Op::Ncol => "ncol".into(),
            Op::Length => "length".into(),
            Op::Print => "print".into(),
            Op::Stop => "stop".into(),
            Op::Assert => "assert".into(),
            Op::ToString => "toString".into(),
            Op::ListNew { .. } => "list".into(),
            Op::ListIndex => "rightIndex".into(),
            Op::ListAppend => "append".into(),
            Op::ListSet => "leftIndex".into(),
            Op::ListRemove { .. } => "remove".into(),
            Op::ListUnnest => "castdtl".into(),
            Op::Read { .. } => "read".into(),
            Op::Write { .. } => "write".into(),
            Op::Time => "time".into(),
            Op::Lineage => "lineage".into(),
            Op::Fused { operator, .. } => operator.opcode().into(),
        }
    }
}

/// One step of a block: `output = op(inputs)`.
#[derive(Clone, Debug)]
pub struct Instruction {
    pub op: Op,
    pub inputs: Vec<Reg>,
    pub output: Option<Reg>,
    /// For scalar results: the DML type the result is converted to (e.g. `Int` for `5 + 2`).
    pub scalar_type: Option<ScalarType>,
    /// Registers whose last use is this instruction.
    pub release: Vec<Reg>,
    /// Where in the script this instruction comes from (byte range), for error messages.
    pub span: (u32, u32),
    /// The lineage of its outputs, one patch per output register (for a fused operator, per
    /// entry of `outputs`): the items of the computation it performs, with
    /// `Lineage::placeholder(i)` for input register `i` and `placeholder(inputs.len())` for
    /// the run-time input of `rand` (its seed), `time` (its value) and `read` (the file).
    /// `None` for instructions without a value (and for loads and stores, which the tracer
    /// handles through the lineage map).
    pub lineage: Option<Arc<[Lineage]>>,
    /// Whether lineage-based reuse probes and caches its outputs: false where the compiler
    /// unmarked it (its lineage is new in every iteration of a loop, LIMA section 4.4).
    pub cacheable: bool,
}

/// A runtime error together with the script location of the failing instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct LocatedError {
    pub error: RuntimeError,
    pub span: Option<(u32, u32)>,
}

impl From<RuntimeError> for LocatedError {
    fn from(error: RuntimeError) -> Self {
        LocatedError { error, span: None }
    }
}

/// A script's variables. Function calls get a fresh table.
pub type SymbolTable = HashMap<String, Value>;

/// Time and count per opcode, for `--stats`.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    pub per_opcode: BTreeMap<String, (u64, Duration)>,
}

impl OpStats {
    pub fn record(&mut self, opcode: String, elapsed: Duration) {
        let entry = self.per_opcode.entry(opcode).or_insert((0, Duration::ZERO));
        entry.0 += 1;
        entry.1 += elapsed;
    }
}

/// Where `print` writes and whether instructions are timed.
pub struct ExecContext<'a> {
    pub out: &'a mut dyn Write,
    pub stats: Option<&'a mut OpStats>,
    /// Value ranges of matrix values, remembered across instructions and blocks.
    pub ranges: Option<&'a mut ValueRangeCache>,
    /// Lineage tracing, when on: the frame's lineage map and the counters.
    pub lineage: Option<Tracer<'a>>,
    /// Lineage-based reuse, when on (needs `lineage`): the cache probed before reusable
    /// instructions and filled after them.
    pub reuse: Option<Reuse<'a>>,
}

/// Remembers the value range of matrix values (their smallest and largest values and whether
/// they hold a NaN), so that a sparse-safe fused operator over a sparse main input scans its
/// side inputs once per value, not once per call (a loop reusing `Y` in `sum(X * Y)`),
/// and not at all where the kernel that produced the value handed its range over
/// ([`ValueRangeCache::insert`]; a matrix product computes it with its non-zero count).
///
/// Entries are keyed by the value's allocation and hold a `Weak` reference: a value that was
/// dropped or moved out for an in-place update no longer upgrades, and its address cannot be
/// reused while the `Weak` lives, so an entry never describes a different or changed matrix.
#[derive(Debug, Default)]
pub struct ValueRangeCache {
    entries: HashMap<usize, (std::sync::Weak<Matrix>, Known)>,
}

/// What the cache knows of a value: its range, a range its producer knows its values lie in
/// (not necessarily the smallest: `rand`'s span), or only whether it is finite (the cheaper
/// scan an unfused element-wise kernel needs).
#[derive(Clone, Copy, Debug)]
enum Known {
    Range(ValueRange),
    Bound(ValueRange),
    Finite(bool),
}

impl ValueRangeCache {
    /// Entries kept before dead ones are swept.
    const SWEEP_AT: usize = 1024;

    /// What is known of `m`, if its entry is live.
    fn known(&self, m: &Arc<Matrix>) -> Option<Known> {
        let (weak, known) = self.entries.get(&(Arc::as_ptr(m) as usize))?;
        weak.upgrade()
            .is_some_and(|live| Arc::ptr_eq(&live, m))
            .then_some(*known)
    }

    /// The value range of `m`, scanning it only the first time.
    pub fn range(&mut self, m: &Arc<Matrix>) -> ValueRange {
        if let Some(Known::Range(range)) = self.known(m) {
            return range;
        }
        let range = m.value_range();
        self.insert(m, range);
        range
    }

    /// A range every value of `m` lies in: its exact range where known, else a bound its
    /// producer remembered ([`ValueRangeCache::remember_bound`]), else its range, scanned
    /// once. What a fused operator needs to prove its body zero at the zeros of a sparse main
    /// input, which a bound proves as well as the exact range does (`sum(X * Y)` over a sparse
    /// `X` and a `rand` `Y` of 80 MB scanned `Y` at its first call, several milliseconds).
    pub fn bound(&mut self, m: &Arc<Matrix>) -> ValueRange {
        match self.known(m) {
            Some(Known::Range(range) | Known::Bound(range)) => range,
            _ => self.range(m),
        }
    }

    /// Whether every value of `m` is finite, scanning it only the first time (and only for
    /// that, where its range is not known already).
    pub fn all_finite(&mut self, m: &Arc<Matrix>) -> bool {
        match self.known(m) {
            Some(Known::Range(range) | Known::Bound(range)) => range.is_finite(),
            Some(Known::Finite(finite)) => finite,
            None => {
                let finite = m.all_finite();
                self.remember(m, Known::Finite(finite));
                finite
            }
        }
    }

    /// Remembers that every value of `m` lies in `bound` (NaN among them only where
    /// `bound.nan`), as the kernel that produced it knows by construction (a uniform `rand`:
    /// its span, and zero where it is sparse). A range already known stays: it is exact.
    pub fn remember_bound(&mut self, m: &Arc<Matrix>, bound: ValueRange) {
        if !matches!(self.known(m), Some(Known::Range(_))) {
            self.remember(m, Known::Bound(bound));
        }
    }

    /// Remembers `range`, which must be exactly `m.value_range()`, as computed by the kernel
    /// that produced `m` on its way (so that no consumer scans `m` for it).
    pub fn insert(&mut self, m: &Arc<Matrix>, range: ValueRange) {
        self.remember(m, Known::Range(range));
    }

    fn remember(&mut self, m: &Arc<Matrix>, known: Known) {
        if self.entries.len() >= Self::SWEEP_AT {
            self.entries.retain(|_, (weak, _)| weak.strong_count() > 0);
        }
        self.entries
            .insert(Arc::as_ptr(m) as usize, (Arc::downgrade(m), known));
    }
}

/// Runs `instructions` against `vars`, with `num_regs` registers.
pub fn execute(
    instructions: &[Instruction],
    num_regs: usize,
    vars: &mut SymbolTable,
    ctx: &mut ExecContext<'_>,
) -> std::result::Result<(), LocatedError> {
    let mut regs: Vec<Option<Value>> = vec![None; num_regs];
    // The items of the registers' values, when tracing (nothing is allocated otherwise).
    // A skipped deduplicated scope draws run-time inputs but builds no items.
    let skipped = ctx
        .lineage
        .as_ref()
        .is_some_and(|t| t.scope.as_ref().is_some_and(|s| s.skip));
    let mut items: Vec<Option<Lineage>> = match ctx.lineage {
        Some(_) if !skipped => vec![None; num_regs],
        _ => Vec::new(),
    };
    for instr in instructions {
        let located = |error| LocatedError {
            error,
            span: Some(instr.span),
        };
        let mut traced = match ctx.lineage.as_mut() {
            Some(tracer) => {
                let started = Instant::now();
                let traced = match tracer.scope.as_deref_mut() {
                    // The instruction needs the seed or time drawn; no items are built.
                    Some(scope) if skipped => trace::before_skipped(instr, &regs, scope),
                    _ => trace::before(instr, &regs, &items, tracer),
                }
                .map_err(located)?;
                tracer.stats.time += started.elapsed();
                Some(traced)
            }
            None => None,
        };
        // An instruction's time includes its reuse: probing, and a partial reuse's
        // compensation.
        let started = ctx.stats.is_some().then(Instant::now);
        let decision = match (traced.as_mut(), ctx.reuse.as_mut()) {
            (Some(t), Some(r)) if !skipped => {
                reuse::before(instr, &mut regs, &mut t.outputs, r).map_err(located)?
            }
            _ => Decision::Run,
        };
        let value = match decision {
            Decision::Reused(value) => value,
            Decision::Run => {
                run_one(instr, &mut regs, vars, ctx, traced.as_ref()).map_err(located)?
            }
            Decision::RunAndPut(reservations, dense) => {
                let computing = Instant::now();
                let value =
                    run_one(instr, &mut regs, vars, ctx, traced.as_ref()).map_err(located)?;
                if let Some(r) = ctx.reuse.as_ref() {
                    reuse::after(
                        instr,
                        &regs,
                        value.as_ref(),
                        reservations,
                        dense,
                        computing.elapsed(),
                        r.cache,
                    );
                }
                value
            }
        };
        if let (Some(traced), false) = (traced, skipped) {
            let started = Instant::now();
            trace::after(instr, &regs, &mut items, traced).map_err(located)?;
            if let Some(tracer) = ctx.lineage.as_mut() {
                tracer.stats.time += started.elapsed();
            }
        }
        if let (Some(stats), Some(started)) = (ctx.stats.as_deref_mut(), started) {
            stats.record(instr.op.opcode(), started.elapsed());
        }
        if let Some(out) = instr.output {
            let slot = regs.get_mut(out as usize).ok_or_else(|| {
                LocatedError::from(RuntimeError::Internal(Internal::RegisterOutOfRange {
                    register: out,
                }))
            })?;
            *slot = value;
        }
        for &r in &instr.release {
            if let Some(slot) = regs.get_mut(r as usize) {
                *slot = None;
            }
            if let Some(slot) = items.get_mut(r as usize) {
                *slot = None;
            }
        }
    }
    Ok(())
}

fn input<'r>(regs: &'r [Option<Value>], instr: &Instruction, i: usize) -> Result<&'r Value> {
    let reg = *instr.inputs.get(i).ok_or_else(|| {
        RuntimeError::Internal(Internal::MissingInput {
            opcode: instr.op.opcode(),
            input: i,
        })
    })?;
    regs.get(reg as usize)
        .and_then(|v| v.as_ref())
        .ok_or_else(|| {
            RuntimeError::Internal(Internal::EmptyRegister {
                opcode: instr.op.opcode(),
                register: reg,
            })
        })
}

/// Converts a computed double to the scalar type the compiler assigned. Integer results follow
/// SystemDS: NaN becomes 0 (Java's `(long) NaN`), values beyond the INT64 range are an error.
fn scalar_result(value: f64, ty: Option<ScalarType>) -> Result<Value> {
    match ty.unwrap_or(ScalarType::Double) {
        ScalarType::Double => Ok(Value::Double(value)),
        ScalarType::Int if value.is_nan() => Ok(Value::Int(0)),
        ScalarType::Int if value.abs() >= i64::MAX as f64 => {
            Err(RuntimeError::Conversion(Conversion::IntegerOverflow {
                value,
            }))
        }
        other => Value::Double(value).cast_scalar(other),
    }
}

fn matrix_from_string(text: &str, rows: usize, cols: usize) -> Result<Matrix> {
    let values = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<f64>()
                .map_err(|_| RuntimeError::MatrixStringToken {
                    token: t.to_string(),
                })
        })
        .collect::<Result<Vec<f64>>>()?;
    if values.len() != rows * cols {
        return Err(RuntimeError::MatrixStringValues {
            values: values.len(),
            shape: (rows, cols),
        });
    }
    Matrix::from_dense_values(rows, cols, values)
}

/// A count given in DML (sizes, `ngroups`), read as SystemDS reads it (`UtilFunctions.toLong`:
/// truncated toward zero after adding 2^-53, so `rows=30/100` is 0 rows).
fn to_usize(v: &Value, argument: &'static str) -> Result<usize> {
    let x = v.as_f64()?;
    let x = x.signum() * (x.abs() + f64::EPSILON / 2.0).floor();
    if x.is_nan() || x < 0.0 || x > (1u64 << 53) as f64 {
        return Err(RuntimeError::NotACount {
            argument,
            found: v.display_string(),
        });
    }
    Ok(x as usize)
}

/// An index bound given in DML (1-based), checked to be an integer >= 1.
/// The results of an instruction with several, each into its register where the block uses
/// it (`None`: unused, dropped).
fn set_results(
    regs: &mut [Option<Value>],
    outputs: &[Option<Reg>],
    results: impl IntoIterator<Item = Value>,
) -> Result<()> {
    for (v, out) in results.into_iter().zip(outputs) {
        if let Some(reg) = *out {
            let slot = regs.get_mut(reg as usize).ok_or(RuntimeError::Internal(
                Internal::RegisterOutOfRange { register: reg },
            ))?;
            *slot = Some(v);
        }
    }
    Ok(())
}

/// A 1-based index bound. A fractional bound is truncated as SystemDS's
/// `UtilFunctions.toLong` does (toward zero after adding 2^-53): `X[2.5, 1]` is `X[2, 1]`
/// there, and gridSearch's grid indexes rely on it.
fn to_index(v: &Value, axis: Axis) -> Result<usize> {
    let x = v.as_f64()?;
    let x = x.signum() * (x.abs() + f64::EPSILON / 2.0).floor();
    if x.is_nan() || x < 1.0 || x > (1u64 << 53) as f64 {
        return Err(RuntimeError::NotAnIndex {
            axis,
            found: v.display_string(),
        });
    }
    Ok(x as usize)
}

/// Converts DML's 1-based inclusive bounds into a 0-based half-open range within `extent`.
fn index_range(
    lower: &Value,
    upper: &Value,
    extent: usize,
    axis: Axis,
    shape: (usize, usize),
) -> Result<std::ops::Range<usize>> {
    let lo = to_index(lower, axis)?;
    let hi = to_index(upper, axis)?;
    if lo > hi || hi > extent {
        return Err(RuntimeError::IndexRange {
            axis,
            lower: lo,
            upper: hi,
            shape,
        });
    }
    Ok(lo - 1..hi)
}

/// Integer arithmetic of DML (INT64, Java semantics: wrapping) for the operators that keep
/// integers integral; `None` where the result is not an integer operation.
fn int_binary(op: BinaryOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinaryOp::Add => Some(a.wrapping_add(b)),
        BinaryOp::Sub => Some(a.wrapping_sub(b)),
        BinaryOp::Mul => Some(a.wrapping_mul(b)),
        BinaryOp::Min => Some(a.min(b)),
        BinaryOp::Max => Some(a.max(b)),
        _ => None,
    }
}

fn scalar_binary(op: BinaryOp, a: &Value, b: &Value, ty: Option<ScalarType>) -> Result<Value> {
    // String concatenation and comparison.
    if let (BinaryOp::Add, true) = (op, matches!(a, Value::Str(_)) || matches!(b, Value::Str(_))) {
        return Ok(Value::str(format!(
            "{}{}",
            a.display_string(),
            b.display_string()
        )));
    }
    if matches!(a, Value::Str(_)) || matches!(b, Value::Str(_)) {
        // SystemDS compares a string with a number or boolean as strings, the other operand
        // as `print` shows it: `3.0 == "3"` and `2 < "10"` are FALSE, `TRUE == "TRUE"` TRUE.
        let (x, y) = (a.display_string(), b.display_string());
        let r = match op {
            BinaryOp::Eq => x == y,
            BinaryOp::Ne => x != y,
            BinaryOp::Lt => x < y,
            BinaryOp::Le => x <= y,
            BinaryOp::Gt => x > y,
            BinaryOp::Ge => x >= y,
            _ => return Err(RuntimeError::StringOperator { op: op.name() }),
        };
        return Ok(Value::Bool(r));
    }
    if let (Value::Int(x), Value::Int(y), Some(ScalarType::Int)) = (a, b, ty) {
        if let Some(r) = int_binary(op, *x, *y) {
            return Ok(Value::Int(r));
        }
    }
    scalar_result(op.apply(a.as_f64()?, b.as_f64()?), ty)
}

/// Takes the matrix in input `i` out of its register when this instruction holds the only
/// reference to it (its last use, not shared with a variable or another input), so a kernel can
/// reuse its buffer instead of allocating (and page-faulting) a fresh output.
fn take_owned(instr: &Instruction, regs: &mut [Option<Value>], i: usize) -> Option<Matrix> {
    let reg = *instr.inputs.get(i)?;
    let last_use =
        instr.release.contains(&reg) && instr.inputs.iter().filter(|&&r| r == reg).count() == 1;
    if !last_use {
        return None;
    }
    let slot = regs.get_mut(reg as usize)?;
    match slot.take() {
        Some(Value::Matrix(m)) => match Arc::try_unwrap(m) {
            Ok(owned) => Some(owned),
            Err(shared) => {
                *slot = Some(Value::Matrix(shared));
                None
            }
        },
        other => {
            *slot = other;
            None
        }
    }
}

/// The in-place variants of element-wise kernels, used when an input dies here.
fn run_in_place(instr: &Instruction, regs: &mut [Option<Value>]) -> Result<Option<Value>> {
    use crate::kernels;
    let other_is_matrix = |regs: &[Option<Value>], i: usize| {
        instr
            .inputs
            .get(i)
            .and_then(|&r| regs.get(r as usize))
            .and_then(|v| v.as_ref())
            .map(Value::is_matrix)
    };
    match &instr.op {
        Op::Unary(op) => match take_owned(instr, regs, 0) {
            Some(m) => Ok(Some(Value::matrix(kernels::unary_owned(m, *op)?))),
            None => Ok(None),
        },
        Op::Binary(op) => {
            if let Some(a) = take_owned(instr, regs, 0) {
                let b = input(regs, instr, 1)?;
                let result = match b {
                    Value::Matrix(b) => kernels::binary_owned(a, b, *op)?,
                    s => kernels::binary_scalar_owned(a, s.as_f64()?, *op, false)?,
                };
                return Ok(Some(Value::matrix(result)));
            }
            if other_is_matrix(regs, 0) == Some(false) {
                if let Some(b) = take_owned(instr, regs, 1) {
                    let s = input(regs, instr, 0)?.as_f64()?;
                    return Ok(Some(Value::matrix(kernels::binary_scalar_owned(
                        b, s, *op, true,
                    )?)));
                }
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

fn run_one(
    instr: &Instruction,
    regs: &mut [Option<Value>],
    vars: &mut SymbolTable,
    ctx: &mut ExecContext<'_>,
    traced: Option<&Traced>,
) -> Result<Option<Value>> {
    use crate::kernels;
    if let Some(value) = run_in_place(instr, regs)? {
        return Ok(Some(value));
    }
    // Left indexing updates its target in place when it holds the only reference.
    let owned_target = match instr.op {
        Op::LeftIndex => take_owned(instr, regs, 0),
        _ => None,
    };
    let arg = |i: usize| input(regs, instr, i);
    let ty = instr.scalar_type;
    let value = match &instr.op {
        Op::Load(name) => {
            vars.get(name.as_ref())
                .cloned()
                .ok_or_else(|| RuntimeError::UndefinedVariable {
                    name: name.to_string(),
                })?
        }
        Op::Take(name) => {
            vars.remove(name.as_ref())
                .ok_or_else(|| RuntimeError::UndefinedVariable {
                    name: name.to_string(),
                })?
        }
        Op::Store(name) => {
            let v = arg(0)?.clone();
            vars.insert(name.to_string(), v);
            return Ok(None);
        }
        Op::Const(v) => v.clone(),
        Op::Unary(op) => match arg(0)? {
            Value::Matrix(m) => Value::matrix(kernels::unary(m, *op)?),
            s => {
                if let (UnaryOp::Neg, Value::Int(i)) = (op, s) {
                    Value::Int(i.wrapping_neg())
                } else if let (UnaryOp::Abs, Value::Int(i)) = (op, s) {
                    Value::Int(i.wrapping_abs())
                } else {
                    scalar_result(op.apply(s.as_f64()?), ty)?
                }
            }
        },
        Op::Binary(op) => match (arg(0)?, arg(1)?) {
            (Value::Matrix(a), Value::Matrix(b)) => {
                // Against a sparse operand, whether the other is finite decides if the sparse
                // one's zeros may be skipped: the range cache answers it once per value (a
                // loop's `X * Y` with dense `Y` scanned all of `Y` on every iteration).
                let mut finite = [None, None];
                if let Some(cache) = ctx.ranges.as_deref_mut() {
                    for (k, (m, other)) in [(a, b), (b, a)].into_iter().enumerate() {
                        if other.is_sparse() && !m.is_sparse() {
                            finite[k] = Some(cache.all_finite(m));
                        }
                    }
                }
                Value::matrix(kernels::binary_known(a, b, *op, finite)?)
            }
            (Value::Matrix(a), s) => {
                Value::matrix(kernels::binary_scalar(a, s.as_f64()?, *op, false)?)
            }
            (s, Value::Matrix(b)) => {
                Value::matrix(kernels::binary_scalar(b, s.as_f64()?, *op, true)?)
            }
            (a, b) => scalar_binary(*op, a, b, ty)?,
        },
        Op::NaryMinMax(op) => {
            let mut acc = arg(0)?.clone();
            for i in 1..instr.inputs.len() {
                let next = arg(i)?;
                acc = match (&acc, next) {
                    (Value::Matrix(a), Value::Matrix(b)) => {
                        Value::matrix(kernels::binary(a, b, *op)?)
                    }
                    (Value::Matrix(a), s) => {
                        Value::matrix(kernels::binary_scalar(a, s.as_f64()?, *op, false)?)
                    }
                    (s, Value::Matrix(b)) => {
                        Value::matrix(kernels::binary_scalar(b, s.as_f64()?, *op, true)?)
                    }
                    (a, b) => scalar_binary(*op, a, b, ty)?,
                };
            }
            acc
        }
        Op::IfElse => {
            let (t, y, n) = (arg(0)?, arg(1)?, arg(2)?);
            if !t.is_matrix() && !y.is_matrix() && !n.is_matrix() {
                let chosen = if t.as_bool()? { y } else { n };
                match ty {
                    Some(ty) => chosen.cast_scalar(ty)?,
                    None => chosen.clone(),
                }
            } else {
                Value::matrix(kernels::ifelse(operand(t)?, operand(y)?, operand(n)?)?)
            }
        }
        Op::Replace => {
            let m = arg(0)?.as_matrix()?;
            Value::matrix(kernels::replace(m, arg(1)?.as_f64()?, arg(2)?.as_f64()?)?)
        }
        Op::Aggregate(op, dir) => match arg(0)? {
            Value::Matrix(m) => {
                let r = kernels::aggregate(m, *op, *dir)?;
                if *dir == Direction::Full {
                    scalar_result(r.get(0, 0), ty)?
                } else {
                    Value::matrix(r)
                }
            }
            s => {
                // Aggregates of a scalar (e.g. `sum(3)`), as SystemDS allows for min/max.
                let one = Matrix::scalar(s.as_f64()?);
                scalar_result(
                    kernels::aggregate(&one, *op, Direction::Full)?.get(0, 0),
                    ty,
                )?
            }
        },
        Op::Cumsum => Value::matrix(kernels::cumsum(arg(0)?.as_matrix()?)?),
        Op::Cumulative(op) => Value::matrix(kernels::cumulative(arg(0)?.as_matrix()?, *op)?),
        Op::Cumsumprod => Value::matrix(kernels::cumsumprod(arg(0)?.as_matrix()?)?),
        Op::Rev => Value::matrix(kernels::rev(arg(0)?.as_matrix()?)?),
        Op::RowIndex(max) => Value::matrix(kernels::row_index(arg(0)?.as_matrix()?, *max)?),
        Op::Table => {
            let odim = |i: usize, name: &'static str| -> Result<Option<usize>> {
                let v = arg(i)?.as_f64()?;
                if v == -1.0 {
                    return Ok(None);
                }
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(RuntimeError::Argument {
                        function: "table",
                        problem: format!("{name} must be a count or -1, found {v}"),
                    });
                }
                // SystemDS truncates fractional dimensions.
                Ok(Some(to_usize(&Value::Double(v.trunc()), name)?))
            };
            let (rows, cols) = (odim(3, "odim1")?, odim(4, "odim2")?);
            Value::matrix(kernels::table(
                operand(arg(0)?)?,
                operand(arg(1)?)?,
                operand(arg(2)?)?,
                rows,
                cols,
            )?)
        }
        Op::RemoveEmpty => {
            let rows = match arg(1)?.display_string().as_str() {
                "rows" => true,
                "cols" => false,
                other => {
                    return Err(RuntimeError::Argument {
                        function: "removeEmpty",
                        problem: format!("margin must be \"rows\" or \"cols\", found {other:?}"),
                    })
                }
            };
            let select = match instr.inputs.len() {
                4 => Some(arg(3)?.as_matrix()?),
                _ => None,
            };
            Value::matrix(kernels::remove_empty(
                arg(0)?.as_matrix()?,
                rows,
                select.map(|m| m.as_ref()),
                arg(2)?.as_bool()?,
            )?)
        }
        Op::Order => {
            let x = arg(0)?.as_matrix()?;
            // `by` is a column, or a vector of columns (SystemDS's multi-column order).
            let by_values: Vec<f64> = match arg(1)? {
                Value::Matrix(m) => (0..m.rows())
                    .flat_map(|i| (0..m.cols()).map(move |j| (i, j)))
                    .map(|(i, j)| m.get(i, j))
                    .collect(),
                s => vec![s.as_f64()?],
            };
            let mut by = Vec::with_capacity(by_values.len());
            for b in by_values {
                if !(b >= 1.0 && b.fract() == 0.0 && b <= x.cols() as f64) {
                    return Err(RuntimeError::Argument {
                        function: "order",
                        problem: format!(
                            "by={b} is not a column of a {}x{} matrix",
                            x.rows(),
                            x.cols()
                        ),
                    });
                }
                by.push(b as usize - 1);
            }
            Value::matrix(kernels::order(
                x,
                &by,
                arg(2)?.as_bool()?,
                arg(3)?.as_bool()?,
            )?)
        }
        Op::GroupedAggregate => {
            let f = kernels::grouped::GroupedFn::parse(
                &arg(2)?.display_string(),
                arg(4)?.as_f64()? as i64,
            )?;
            let k = arg(3)?.as_f64()?;
            let ngroups = if k == -1.0 {
                None
            } else {
                Some(to_usize(arg(3)?, "ngroups")?)
            };
            let w = match instr.inputs.len() {
                6 => Some(arg(5)?.as_matrix()?),
                _ => None,
            };
            Value::matrix(kernels::grouped_aggregate(
                arg(0)?.as_matrix()?,
                arg(1)?.as_matrix()?,
                w.map(|m| m.as_ref()),
                f,
                ngroups,
            )?)
        }
        Op::Triangle(lower) => Value::matrix(kernels::tri::triangle(
            arg(0)?.as_matrix()?,
            *lower,
            arg(1)?.as_bool()?,
            arg(2)?.as_bool()?,
        )?),
        Op::Unique => Value::matrix(kernels::unique(
            arg(0)?.as_matrix()?,
            &arg(1)?.display_string(),
        )?),
        Op::Outer => {
            let name = arg(2)?.display_string();
            let op = BinaryOp::from_outer_name(&name).ok_or_else(|| RuntimeError::Argument {
                function: "outer",
                problem: format!("unknown operator {name:?}"),
            })?;
            Value::matrix(kernels::outer(
                arg(0)?.as_matrix()?,
                arg(1)?.as_matrix()?,
                op,
            )?)
        }
        Op::MatMul => {
            let (product, range) =
                kernels::matmul_with_range(arg(0)?.as_matrix()?, arg(1)?.as_matrix()?)?;
            let product = Arc::new(product);
            if let (Some(range), Some(cache)) = (range, ctx.ranges.as_deref_mut()) {
                cache.insert(&product, range);
            }
            Value::Matrix(product)
        }
        Op::TransposeSelfMatMul => Value::matrix(kernels::tsmm(arg(0)?.as_matrix()?)?),
        Op::TransposeSelfMatMulOfCbind => {
            let z = kernels::cbind(&[arg(0)?.as_matrix()?, arg(1)?.as_matrix()?])?;
            Value::matrix(kernels::tsmm(&z)?)
        }
        Op::TransposedLeftMatMulOfRbind => {
            let x = kernels::rbind(&[arg(0)?.as_matrix()?, arg(1)?.as_matrix()?])?;
            let y = kernels::rbind(&[arg(2)?.as_matrix()?, arg(3)?.as_matrix()?])?;
            Value::matrix(kernels::matmul_tn(&x, &y)?)
        }
        Op::TransposedLeftMatMul => Value::matrix(kernels::matmul_tn(
            arg(0)?.as_matrix()?,
            arg(1)?.as_matrix()?,
        )?),
        Op::TransposedRightMatMul => Value::matrix(kernels::matmul_nt(
            arg(0)?.as_matrix()?,
            arg(1)?.as_matrix()?,
        )?),
        Op::TransposedOutMatMul { b_transposed } => Value::matrix(kernels::matmul_transposed_out(
            arg(0)?.as_matrix()?,
            arg(1)?.as_matrix()?,
            *b_transposed,
        )?),
        Op::Transpose => Value::matrix(kernels::transpose(arg(0)?.as_matrix()?)?),
        Op::Diag => Value::matrix(kernels::diag(arg(0)?.as_matrix()?)?),
        Op::Reshape => {
            let m = arg(0)?.as_matrix()?;
            let rows = to_usize(arg(1)?, "rows")?;
            let cols = to_usize(arg(2)?, "cols")?;
            Value::matrix(kernels::reshape(m, rows, cols, arg(3)?.as_bool()?)?)
        }
        Op::Fill => {
            let rows = to_usize(arg(1)?, "rows")?;
            let cols = to_usize(arg(2)?, "cols")?;
            Value::matrix(Matrix::filled(rows, cols, arg(0)?.as_f64()?)?)
        }
        Op::MatrixFromString => {
            let rows = to_usize(arg(1)?, "rows")?;
            let cols = to_usize(arg(2)?, "cols")?;
            Value::matrix(matrix_from_string(&arg(0)?.display_string(), rows, cols)?)
        }
        Op::Solve => Value::matrix(kernels::solve(arg(0)?.as_matrix()?, arg(1)?.as_matrix()?)?),
        Op::Stat(op) => {
            use kernels::stats::{StatInput, StatValue};
            let mut inputs = Vec::with_capacity(instr.inputs.len());
            for i in 0..instr.inputs.len() {
                inputs.push(match arg(i)? {
                    Value::Matrix(m) => StatInput::Matrix(m),
                    s => StatInput::Scalar(s.as_f64()?),
                });
            }
            match kernels::stats::stat(*op, &inputs)? {
                StatValue::Scalar(v) => Value::Double(v),
                StatValue::Column(v) => Value::matrix(Matrix::from_dense_values(v.len(), 1, v)?),
            }
        }
        Op::Dnn(op) => {
            let mut matrices = Vec::with_capacity(op.matrix_inputs());
            for i in 0..op.matrix_inputs() {
                matrices.push(&**arg(i)?.as_matrix()?);
            }
            let mut scalars = Vec::with_capacity(op.geometry_inputs());
            for i in op.matrix_inputs()..op.arity() {
                scalars.push(arg(i)?.as_f64()?);
            }
            Value::matrix(kernels::dnn::dnn(*op, &matrices, &scalars)?)
        }
        Op::LinAlg(op) => match kernels::linalg::linalg(*op, arg(0)?.as_matrix()?)? {
            kernels::linalg::LinAlgValue::Matrix(m) => Value::matrix(m),
            kernels::linalg::LinAlgValue::Scalar(v) => Value::Double(v),
        },
        Op::Decompose { op, outputs } => {
            let results = kernels::linalg::decompose(*op, arg(0)?.as_matrix()?)?;
            set_results(regs, outputs, results.into_iter().map(Value::matrix))?;
            return Ok(None);
        }
        Op::AsFrame => match arg(0)? {
            Value::Frame(f) => Value::Frame(Arc::clone(f)),
            Value::List(l) => match crate::list::single_element(l, "as.frame")? {
                Value::Frame(f) => Value::Frame(Arc::clone(f)),
                other => Value::Frame(Arc::new(Frame::from_matrix(other.as_matrix()?))),
            },
            other => Value::Frame(Arc::new(Frame::from_matrix(other.as_matrix()?))),
        },
        Op::TransformEncode { outputs } => {
            let spec = arg(1)?.display_string();
            let (encoded, meta) = crate::transform::encode(arg(0)?.as_frame()?, &spec)?;
            let results = [Value::matrix(encoded), Value::Frame(Arc::new(meta))];
            set_results(regs, outputs, results)?;
            return Ok(None);
        }
        Op::TransformApply => Value::matrix(crate::transform::apply(
            arg(0)?.as_frame()?,
            &arg(1)?.display_string(),
            arg(2)?.as_frame()?,
        )?),
        Op::TransformDecode => Value::Frame(Arc::new(crate::transform::decode(
            arg(0)?.as_matrix()?,
            &arg(1)?.display_string(),
            arg(2)?.as_frame()?,
        )?)),
        Op::Colnames => Value::Frame(Arc::new(arg(0)?.as_frame()?.colnames())),
        Op::Slice if arg(0)?.is_frame() => {
            let f = arg(0)?.as_frame()?;
            let shape = (f.rows(), f.cols());
            let rows = index_range(arg(1)?, arg(2)?, f.rows(), Axis::Rows, shape)?;
            let cols = index_range(arg(3)?, arg(4)?, f.cols(), Axis::Columns, shape)?;
            Value::Frame(Arc::new(f.slice(rows, cols)))
        }
        Op::Slice => {
            let m = arg(0)?.as_matrix()?;
            let shape = (m.rows(), m.cols());
            let rows = index_range(arg(1)?, arg(2)?, m.rows(), Axis::Rows, shape)?;
            let cols = index_range(arg(3)?, arg(4)?, m.cols(), Axis::Columns, shape)?;
            Value::matrix(kernels::slice(m, rows, cols)?)
        }
        Op::LeftIndex => {
            let target = match owned_target {
                Some(owned) => owned,
                None => arg(0)?.as_matrix()?.try_clone()?,
            };
            let shape = (target.rows(), target.cols());
            let rows = index_range(arg(2)?, arg(3)?, target.rows(), Axis::Rows, shape)?;
            let cols = index_range(arg(4)?, arg(5)?, target.cols(), Axis::Columns, shape)?;
            Value::matrix(kernels::left_index(target, rows, cols, operand(arg(1)?)?)?)
        }
        Op::Cbind | Op::Rbind => {
            let mut mats: Vec<Arc<Matrix>> = Vec::with_capacity(instr.inputs.len());
            for i in 0..instr.inputs.len() {
                match arg(i)? {
                    Value::Matrix(m) => mats.push(Arc::clone(m)),
                    Value::List(l) => crate::list::matrices(l, &mut mats)?,
                    s => mats.push(Arc::new(Matrix::scalar(s.as_f64()?))),
                }
            }
            let refs: Vec<&Matrix> = mats.iter().map(|m| m.as_ref()).collect();
            Value::matrix(if refs.is_empty() {
                // SystemDS binds an empty list to a 0x0 matrix.
                Matrix::zeros(0, 0)?
            } else if matches!(instr.op, Op::Cbind) {
                kernels::cbind(&refs)?
            } else {
                kernels::rbind(&refs)?
            })
        }
        Op::Rand => {
            let rows = to_usize(arg(0)?, "rows")?;
            let cols = to_usize(arg(1)?, "cols")?;
            let pdf = crate::datagen::Pdf::parse(&arg(6)?.display_string())?;
            let (min, max, sparsity) = (arg(2)?.as_f64()?, arg(3)?.as_f64()?, arg(4)?.as_f64()?);
            let m = Arc::new(crate::datagen::rand(
                rows,
                cols,
                min,
                max,
                sparsity,
                // When tracing, the seed the item records (drawn there for `seed=-1`).
                match traced.and_then(|t| t.seed) {
                    Some(seed) => seed,
                    None => arg(5)?.as_i64()?,
                },
                pdf,
            )?);
            // Bounded by construction, so no consumer need scan it to know.
            let bound = crate::datagen::value_bound(min, max, sparsity, pdf);
            if let (Some(bound), Some(cache)) = (bound, ctx.ranges.as_deref_mut()) {
                cache.remember_bound(&m, bound);
            }
            Value::Matrix(m)
        }
        Op::Sample => {
            let range = arg(0)?.as_f64()?;
            Value::matrix(crate::datagen::sample(
                // SystemDS's `UtilFunctions.toLong` of the range.
                (range.signum() * (range.abs() + f64::EPSILON / 2.0).floor()) as i64,
                to_usize(arg(1)?, "size")?,
                arg(2)?.as_bool()?,
                match traced.and_then(|t| t.seed) {
                    Some(seed) => seed,
                    None => arg(3)?.as_i64()?,
                },
            )?)
        }
        Op::Seq => Value::matrix(kernels::seq(
            arg(0)?.as_f64()?,
            arg(1)?.as_f64()?,
            Some(arg(2)?.as_f64()?),
        )?),
        Op::CastScalar(to) => match arg(0)? {
            Value::Matrix(m) => matrix_to_scalar(m)?.cast_scalar(*to)?,
            s => s.cast_scalar(*to)?,
        },
        Op::CastToScalar | Op::CastToMatrix if arg(0)?.is_list() => {
            crate::list::cast_element(arg(0)?.as_list()?, matches!(instr.op, Op::CastToMatrix))?
        }
        Op::ListNew { names } => crate::list::new(
            (0..instr.inputs.len())
                .map(|i| arg(i).cloned())
                .collect::<Result<Vec<_>>>()?,
            names.as_deref(),
        ),
        Op::ListIndex => crate::list::index(arg(0)?.as_list()?, arg(1)?, arg(2)?)?,
        Op::ListAppend => crate::list::append(arg(0)?.as_list()?, arg(1)?)?,
        Op::ListSet => crate::list::set(arg(0)?.as_list()?, arg(1)?, arg(2)?, arg(3)?)?,
        Op::ListRemove { output } => crate::list::remove(arg(0)?.as_list()?, arg(1)?, *output)?,
        Op::ListUnnest => crate::list::unnest(arg(0)?),
        Op::CastToScalar if arg(0)?.is_frame() => arg(0)?.as_frame()?.scalar()?,
        Op::CastToScalar => match arg(0)? {
            Value::Matrix(m) => {
                let v = matrix_to_scalar(m)?;
                match ty {
                    Some(ty) => v.cast_scalar(ty)?,
                    None => v,
                }
            }
            s => s.clone(),
        },
        Op::CastToMatrix => match arg(0)? {
            Value::Matrix(m) => Value::Matrix(Arc::clone(m)),
            Value::Frame(f) => Value::matrix(f.to_matrix()?),
            s => Value::matrix(Matrix::scalar(s.as_f64()?)),
        },
        // SystemDS's list is a column: `nrow` and `length` are its length, `ncol` 1.
        Op::Nrow | Op::Length if arg(0)?.is_list() => Value::Int(arg(0)?.as_list()?.len() as i64),
        Op::Ncol if arg(0)?.is_list() => Value::Int(1),
        Op::Nrow | Op::Ncol | Op::Length if arg(0)?.is_frame() => {
            let f = arg(0)?.as_frame()?;
            Value::Int(match instr.op {
                Op::Nrow => f.rows(),
                Op::Ncol => f.cols(),
                _ => f.rows() * f.cols(),
            } as i64)
        }
        Op::Nrow => Value::Int(arg(0)?.as_matrix()?.rows() as i64),
        Op::Ncol => Value::Int(arg(0)?.as_matrix()?.cols() as i64),
        Op::Length => {
            let m = arg(0)?.as_matrix()?;
            Value::Int((m.rows() * m.cols()) as i64)
        }
        Op::Print => {
            let text = if instr.inputs.len() == 1 {
                arg(0)?.display_string()
            } else {
                let args = (1..instr.inputs.len())
                    .map(arg)
                    .collect::<Result<Vec<_>>>()?;
                format_printf(&arg(0)?.display_string(), &args)?
            };
            writeln!(ctx.out, "{text}")
                .map_err(|e| RuntimeError::Resource(Resource::Output(e.into())))?;
            return Ok(None);
        }
        Op::Stop => {
            return Err(RuntimeError::Stop {
                message: arg(0)?.display_string(),
            })
        }
        Op::Assert => {
            // SystemDS casts the condition to boolean (`0.5` holds, `0` fails).
            if !arg(0)?.as_bool()? {
                return Err(RuntimeError::AssertionFailed);
            }
            return Ok(None);
        }
        Op::ToString => {
            let opts = crate::format::ToStringOptions {
                rows: arg(1)?.as_i64()?,
                cols: arg(2)?.as_i64()?,
                decimal: arg(3)?.as_i64()?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                sparse: arg(4)?.as_bool()?,
                sep: arg(5)?.display_string(),
                linesep: arg(6)?.display_string(),
            };
            match arg(0)? {
                Value::Matrix(m) => Value::str(crate::format::to_string_matrix(m, &opts)),
                Value::List(l) => Value::str(crate::format::to_string_list(l, &opts)),
                Value::Frame(f) => Value::str(crate::frame::to_string_frame(f, &opts)),
                s => Value::str(s.display_string()),
            }
        }
        Op::Read { params } => {
            let named = |name: &str| {
                params
                    .iter()
                    .position(|p| p.as_ref() == name)
                    .map(|i| arg(1 + i))
                    .transpose()
            };
            let path = arg(0)?.display_string();
            let format = named("format")?
                .map(|f| file_format(&f.display_string()))
                .transpose()?;
            let csv = csv_options(named("header")?, named("sep")?)?;
            let m = crate::io::read_matrix(std::path::Path::new(&path), format, csv.as_ref())?;
            for (dim, actual) in [("rows", m.rows()), ("cols", m.cols())] {
                if let Some(expected) = named(dim)? {
                    let expected = expected.as_i64()?;
                    if expected >= 0 && expected as usize != actual {
                        return Err(RuntimeError::file(
                            &path,
                            FileError::GivenDimension {
                                dim,
                                given: expected,
                                actual,
                            },
                        ));
                    }
                }
            }
            Value::matrix(m)
        }
        Op::Write { params } => {
            let named = |name: &str| {
                params
                    .iter()
                    .position(|p| p.as_ref() == name)
                    .map(|i| arg(2 + i))
                    .transpose()
            };
            let path = arg(1)?.display_string();
            let format = match named("format")? {
                Some(f) => file_format(&f.display_string())?,
                None => crate::io::FileFormat::Text,
            };
            let csv = csv_options(named("header")?, named("sep")?)?.unwrap_or_default();
            match arg(0)? {
                Value::Matrix(m) => {
                    crate::io::write_matrix(m, std::path::Path::new(&path), format, &csv)?
                }
                s => std::fs::write(&path, s.display_string())
                    .map_err(|e| RuntimeError::file(&path, FileError::Write(e.into())))?,
            }
            return Ok(None);
        }
        Op::Time => Value::Int(traced.and_then(|t| t.time).unwrap_or_else(now_nanos)),
        Op::Lineage => match traced.and_then(|t| t.log.as_ref()) {
            Some(log) => Value::str(log.as_str()),
            None => return Err(RuntimeError::LineageNotTraced),
        },
        Op::Fused { operator, outputs } => {
            run_fused(
                instr,
                regs,
                operator.as_ref(),
                outputs,
                ctx.ranges.as_deref_mut(),
                traced.map_or(&[][..], |t| t.inputs.as_slice()),
            )?;
            return Ok(None);
        }
    };
    Ok(Some(value))
}

/// `time()`'s value: nanoseconds since the Unix epoch.
pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Runs a fused operator and stores each of its results in its register.
fn run_fused(
    instr: &Instruction,
    regs: &mut [Option<Value>],
    operator: &dyn Operator,
    outputs: &[FusedOutput],
    mut ranges: Option<&mut ValueRangeCache>,
    lineage: &[Option<Lineage>],
) -> Result<()> {
    let results = {
        // Value ranges matter (and are worth remembering) for the side inputs of an operator
        // over a sparse main input (dense or sparse: whether its zeros may be skipped), and
        // for the inputs the operator says it reads them of (a product's right operand: `X`
        // itself in `t(X) %*% (w * (X %*% v))`).
        let sparse_main = matches!(input(regs, instr, 0), Ok(Value::Matrix(m)) if m.is_sparse());
        let mut inputs = Vec::with_capacity(instr.inputs.len());
        for i in 0..instr.inputs.len() {
            inputs.push(match input(regs, instr, i)? {
                Value::Matrix(m) => {
                    let wanted = sparse_main && i > 0 || operator.reads_value_range(i);
                    let known = match ranges.as_deref_mut() {
                        Some(cache) if wanted => Some(cache.bound(m)),
                        _ => None,
                    };
                    OperatorInput::Matrix(m, known)
                }
                s => OperatorInput::Scalar(s.as_f64()?),
            });
        }
        operator.execute_traced(&inputs, lineage)?
    };
    if results.len() != outputs.len() {
        return Err(RuntimeError::Internal(Internal::ResultCount {
            opcode: operator.opcode().to_string(),
            results: results.len(),
            outputs: outputs.len(),
        }));
    }
    for (m, out) in results.into_iter().zip(outputs) {
        let value = if out.scalar {
            Value::Double(m.as_scalar()?)
        } else {
            Value::matrix(m)
        };
        let slot = regs
            .get_mut(out.reg as usize)
            .ok_or(RuntimeError::Internal(Internal::RegisterOutOfRange {
                register: out.reg,
            }))?;
        *slot = Some(value);
    }
    Ok(())
}

/// `%.{digits}f` as Java's `Formatter` writes it: the shortest decimal that reads back as `x`
/// (what `Double.toString` shows), rounded half up (`2.25` is `2.3` at one digit, where
/// rounding the exact binary value half to even gives `2.2`).
fn java_fixed(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return crate::format::format_double(x);
    }
    let shortest = format!("{}", x.abs());
    let (int, frac) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut kept: Vec<u8> = int.bytes().chain(frac.bytes().take(digits)).collect();
    kept.extend(std::iter::repeat_n(b'0', digits.saturating_sub(frac.len())));
    if frac.as_bytes().get(digits).is_some_and(|&d| d >= b'5') {
        // Carry the rounding up through the kept digits.
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let split = kept.len() - digits;
    let (i, f) = kept.split_at(split);
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let (i, f) = (String::from_utf8_lossy(i), String::from_utf8_lossy(f));
    if digits == 0 {
        format!("{sign}{i}")
    } else {
        format!("{sign}{i}.{f}")
    }
}

/// A converted value padded to `width` as Java's `Formatter` pads it: with spaces on the left,
/// on the right with the `-` flag, or with zeros after the sign with the `0` flag.
fn pad(s: String, width: usize, left: bool, zeros: bool) -> String {
    let len = s.chars().count();
    if len >= width {
        return s;
    }
    let fill = width - len;
    if left {
        format!("{s}{}", " ".repeat(fill))
    } else if zeros {
        let (sign, digits) = match s.strip_prefix('-') {
            Some(rest) => ("-", rest),
            None => ("", s.as_str()),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{s}", " ".repeat(fill))
    }
}

/// Java `String.format` for the placeholders DML scripts use: `%s`, `%d`, `%f`/`%e` with
/// optional flags `-` and `0`, a width and a precision (`%5.0f`, `%-8s`, `%.3f`), `%%` and
/// `%n`.
fn format_printf(format: &str, args: &[&Value]) -> Result<String> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let (mut left, mut zeros) = (false, false);
        while let Some(f) = chars.peek().filter(|f| matches!(f, '-' | '0')) {
            left |= *f == '-';
            zeros |= *f == '0';
            chars.next();
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*d);
            chars.next();
        }
        let width: usize = width.parse().unwrap_or(0);
        let mut precision = String::new();
        if chars.peek() == Some(&'.') {
            chars.next();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                precision.push(*d);
                chars.next();
            }
        }
        let conversion = chars.next().ok_or_else(|| {
            RuntimeError::Print(PrintError::TrailingPercent {
                format: format.to_string(),
            })
        })?;
        let mut value = || {
            next.next().copied().ok_or_else(|| {
                RuntimeError::Print(PrintError::TooFewArguments {
                    format: format.to_string(),
                })
            })
        };
        let digits: Option<usize> = precision.parse().ok();
        let start = out.len();
        match conversion {
            '%' => out.push('%'),
            'n' => out.push('\n'),
            's' => out.push_str(&value()?.display_string()),
            'd' => {
                let v = value()?;
                let x = v.as_f64()?;
                if !matches!(v, Value::Int(_)) && x.fract() != 0.0 {
                    return Err(RuntimeError::Print(PrintError::NotAnInteger {
                        found: v.display_string(),
                    }));
                }
                out.push_str(&v.as_i64()?.to_string());
            }
            'f' => out.push_str(&java_fixed(value()?.as_f64()?, digits.unwrap_or(6))),
            'e' => {
                let s = format!("{:.*e}", digits.unwrap_or(6), value()?.as_f64()?);
                // Java writes a signed, two-digit exponent: 1.5e3 -> 1.500000e+03.
                let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
                let exp: i32 = exp.parse().unwrap_or(0);
                out.push_str(&format!(
                    "{mantissa}e{}{:02}",
                    if exp < 0 { '-' } else { '+' },
                    exp.abs()
                ));
            }
            other => {
                return Err(RuntimeError::Unsupported(Unsupported::PrintConversion {
                    conversion: other,
                }))
            }
        }
        if width > 0 && !matches!(conversion, '%' | 'n') {
            let converted = out.split_off(start);
            out.push_str(&pad(converted, width, left, zeros && conversion != 's'));
        }
    }
    Ok(out)
}

fn file_format(name: &str) -> Result<crate::io::FileFormat> {
    crate::io::FileFormat::from_name(name).ok_or_else(|| RuntimeError::UnknownFileFormat {
        name: name.to_string(),
    })
}

/// CSV options when the script gave `header` or `sep` (otherwise the file's metadata decides).
fn csv_options(
    header: Option<&Value>,
    sep: Option<&Value>,
) -> Result<Option<crate::io::CsvOptions>> {
    if header.is_none() && sep.is_none() {
        return Ok(None);
    }
    let mut opts = crate::io::CsvOptions::default();
    if let Some(h) = header {
        opts.header = h.as_bool()?;
    }
    if let Some(s) = sep {
        opts.sep = s.display_string();
    }
    Ok(Some(opts))
}

/// A matrix-or-scalar operand for kernels that accept both.
fn operand(v: &Value) -> Result<crate::kernels::Operand<'_>> {
    Ok(match v {
        Value::Matrix(m) => crate::kernels::Operand::Matrix(m),
        s => crate::kernels::Operand::Scalar(s.as_f64()?),
    })
}

fn matrix_to_scalar(m: &Matrix) -> Result<Value> {
    if m.rows() != 1 || m.cols() != 1 {
        return Err(RuntimeError::AsScalarShape { shape: m.shape() });
    }
    Ok(Value::Double(m.get(0, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operator that records, per call, which inputs came with a value range.
    #[derive(Debug)]
    struct RangeProbe {
        reads: usize,
        seen: std::sync::Mutex<Vec<Vec<Option<ValueRange>>>>,
    }

    impl Operator for RangeProbe {
        fn opcode(&self) -> &str {
            "probe"
        }
        fn execute(&self, inputs: &[OperatorInput<'_>]) -> Result<Vec<Matrix>> {
            let ranges = inputs
                .iter()
                .map(|i| match i {
                    OperatorInput::Matrix(_, known) => *known,
                    OperatorInput::Scalar(_) => None,
                })
                .collect();
            self.seen.lock().unwrap().push(ranges);
            Ok(vec![Matrix::zeros(1, 1)?])
        }
        fn reads_value_range(&self, position: usize) -> bool {
            position == self.reads
        }
    }

    /// The cache answers finiteness from a range, from a finiteness scan of its own, or from
    /// what the producer remembered, and a scan of one kind does not stand in for a range.
    #[test]
    fn the_range_cache_answers_finiteness_once_per_value() {
        let inf = Arc::new(Matrix::from_dense_values(1, 2, vec![1.0, f64::INFINITY]).unwrap());
        let one = Arc::new(Matrix::from_dense_values(1, 1, vec![1.0]).unwrap());
        let mut cache = ValueRangeCache::default();
        assert!(!cache.all_finite(&inf));
        assert!(matches!(cache.known(&inf), Some(Known::Finite(false))));
        // A range asked for after a finiteness scan is computed, not made up from it.
        let r = cache.range(&inf);
        assert_eq!((r.min, r.max), (1.0, f64::INFINITY));
        assert!(!cache.all_finite(&inf));
        cache.remember_bound(
            &one,
            crate::datagen::value_bound(0.0, 2.0, 1.0, crate::datagen::Pdf::Uniform).unwrap(),
        );
        assert!(cache.all_finite(&one));
        // A dropped value's entry never answers for a new one at the same address.
        let ptr = Arc::as_ptr(&one) as usize;
        drop(one);
        assert!(cache.entries.contains_key(&ptr));
        let fresh = Arc::new(Matrix::from_dense_values(1, 1, vec![f64::NAN]).unwrap());
        assert!(!cache.all_finite(&fresh));
    }

    /// A bound answers a fused operator without a scan, never stands in for an exact range,
    /// and never replaces one.
    #[test]
    fn a_producers_bound_answers_fused_operators_but_never_stands_in_for_a_range() {
        let y = Arc::new(Matrix::from_dense_values(1, 2, vec![2.0, 3.0]).unwrap());
        let mut cache = ValueRangeCache::default();
        cache.remember_bound(
            &y,
            crate::datagen::value_bound(1.0, 4.0, 1.0, crate::datagen::Pdf::Uniform).unwrap(),
        );
        let b = cache.bound(&y);
        assert_eq!(
            (b.min, b.max),
            (1.0, 4.0f64.next_up()),
            "the bound, unscanned"
        );
        assert!(cache.all_finite(&y));
        let r = cache.range(&y);
        assert_eq!(
            (r.min, r.max),
            (2.0, 3.0),
            "a range is scanned, not the bound"
        );
        cache.remember_bound(
            &y,
            crate::datagen::value_bound(0.0, 9.0, 0.5, crate::datagen::Pdf::Uniform).unwrap(),
        );
        let b = cache.bound(&y);
        assert_eq!((b.min, b.max), (2.0, 3.0), "the exact range stays");
    }

    /// The ranges `run_fused` hands an operator: the sparse main input's side inputs (dense
    /// and sparse) and the inputs the operator asks for, from the cache, which scans each
    /// value once (`t(X) %*% (w * (X %*% v))` used to scan all of `X` on every call).
    #[test]
    fn fused_operators_get_value_ranges_from_the_cache_once_per_value() {
        let sparse = |seed: f64| {
            let d = Matrix::from_dense_values(
                3,
                4,
                vec![0.0, seed, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 2.0],
            )
            .unwrap();
            Value::matrix(Matrix::Sparse(d.to_sparse()))
        };
        let dense =
            Value::matrix(Matrix::from_dense_values(1, 2, vec![1.0, f64::INFINITY]).unwrap());
        let regs_for = |main: Value| vec![Some(main), Some(sparse(5.0)), Some(dense.clone())];
        let probe = Arc::new(RangeProbe {
            reads: 0,
            seen: Default::default(),
        });
        let instr = Instruction {
            op: Op::Fused {
                operator: probe.clone(),
                outputs: vec![FusedOutput {
                    reg: 3,
                    scalar: true,
                }],
            },
            inputs: vec![0, 1, 2],
            output: None,
            scalar_type: None,
            release: vec![],
            span: (0, 0),
            lineage: None,
            cacheable: false,
        };
        let run = |regs: &mut Vec<Option<Value>>, cache: &mut ValueRangeCache| {
            let Op::Fused { operator, outputs } = &instr.op else {
                unreachable!()
            };
            run_fused(&instr, regs, operator.as_ref(), outputs, Some(cache), &[]).unwrap();
        };
        let mut cache = ValueRangeCache::default();
        let mut regs = regs_for(sparse(7.0));
        regs.push(None);
        for _ in 0..2 {
            run(&mut regs, &mut cache);
        }
        let seen = probe.seen.lock().unwrap().clone();
        let main = seen[0][0].expect("the main input's range, asked for");
        assert!(main.is_finite());
        let side = seen[0][1].expect("a sparse side input's range");
        assert!(side.is_finite());
        assert!(!seen[0][2].expect("a dense side input's range").is_finite());
        assert_eq!(seen[0], seen[1]);
        // Each value was scanned once: its entry is there, keyed by its allocation.
        assert_eq!(cache.entries.len(), 3);

        // A dense main input: no side input's range unless asked for.
        let dense_main = Value::matrix(Matrix::from_dense_values(1, 1, vec![3.0]).unwrap());
        let mut regs = regs_for(dense_main);
        regs.push(None);
        probe.seen.lock().unwrap().clear();
        run(&mut regs, &mut cache);
        assert_eq!(probe.seen.lock().unwrap()[0][1..], [None, None]);
    }

    #[test]
    fn printf_rounds_half_up_and_pads_as_java() {
        assert_eq!(java_fixed(2.25, 1), "2.3");
        assert_eq!(java_fixed(-2.25, 1), "-2.3");
        assert_eq!(java_fixed(0.125, 2), "0.13");
        assert_eq!(java_fixed(9.996, 2), "10.00");
        assert_eq!(java_fixed(7.4, 0), "7");
        assert_eq!(java_fixed(1e-7, 3), "0.000");
        assert_eq!(java_fixed(3.0, 6), "3.000000");
        assert_eq!(java_fixed(f64::NAN, 2), "NaN");
        let v = [
            Value::Double(12.0),
            Value::str("ab"),
            Value::Double(-2.25),
            Value::Int(42),
        ];
        let args: Vec<&Value> = v.iter().collect();
        assert_eq!(
            format_printf("%5.0f|%-6s|%05.1f|%4d|%%", &args).unwrap(),
            "   12|ab    |-02.3|  42|%"
        );
    }
}
