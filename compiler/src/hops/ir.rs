//! HOP IR types: the arena of high-level operators (one DAG per basic block) and its op kinds.
//!
//! Every hop's [`OpKind`] fully describes what to compute; its inputs are ordered as documented
//! on each variant, so an executor can lower a hop without looking at anything else. Operator
//! names (`name()`) are stable: they are the serde names and what `explain` prints.

use crate::span::Span;
use lafuse_core::named_ops;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The whole-matrix statistics and decompositions are the core's as well (shared with the
/// runtime's instructions).
pub use lafuse_core::matrix_ops::{DecompOp, DnnOp, LinAlgOp, StatOp};
/// The element-wise operators and aggregations are the core's (one vocabulary, one scalar
/// semantics for folding, kernels and generated code).
pub use lafuse_core::ops::{AggOp, BinaryOp, Direction, UnaryOp};

/// Index of a hop in its [`HopDag`]'s arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HopId(pub u32);

impl HopId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for HopId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Whether a hop produces a scalar or a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    #[serde(rename = "scalar")]
    Scalar,
    #[serde(rename = "matrix")]
    Matrix,
    /// A DML list: its length and elements are known only at run time (its hops have unknown
    /// sizes). A list hop's value type is the type its elements share where all are scalars
    /// of one type, else `Double` (SystemDS types a list element as unknown until run time;
    /// lafuse types `as.scalar(L[i])` by it, and the instruction keeps the element's own
    /// type).
    #[serde(rename = "list")]
    List,
    /// A DML frame (`as.frame(X)`, a transform's metadata): its sizes are known at run time
    /// only; its value type is `String`.
    #[serde(rename = "frame")]
    Frame,
}

impl DataType {
    /// Short name used by explain.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Scalar => "scalar",
            DataType::Matrix => "matrix",
            DataType::List => "list",
            DataType::Frame => "frame",
        }
    }
}

/// The value type of a scalar, or of a matrix's cells. Matrices are stored as `f64` and always
/// have value type `Double` (as in SystemDS, where `as.scalar` of any matrix is a double).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ValueType {
    #[serde(rename = "double")]
    Double,
    #[serde(rename = "int")]
    Int,
    #[serde(rename = "bool")]
    Bool,
    #[serde(rename = "string")]
    String,
}

impl ValueType {
    /// Short name used by explain.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Double => "double",
            ValueType::Int => "int",
            ValueType::Bool => "bool",
            ValueType::String => "string",
        }
    }

    /// Double, Int or Bool (the types arithmetic accepts in some combination).
    pub fn is_numeric_or_bool(self) -> bool {
        !matches!(self, ValueType::String)
    }
}

/// A scalar constant. Doubles compare and hash by bit pattern (all NaNs being one value), so
/// `NaN == NaN` and `0.0 != -0.0` here (what CSE of literals needs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Literal {
    #[serde(rename = "double")]
    Double(#[serde(with = "json_f64")] f64),
    #[serde(rename = "int")]
    Int(i64),
    #[serde(rename = "bool")]
    Bool(bool),
    #[serde(rename = "string")]
    Str(String),
}

impl Literal {
    /// The literal's value type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Literal::Double(_) => ValueType::Double,
            Literal::Int(_) => ValueType::Int,
            Literal::Bool(_) => ValueType::Bool,
            Literal::Str(_) => ValueType::String,
        }
    }

    /// The value as a double, as DML converts numbers and booleans (strings: `None`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Literal::Double(v) => Some(*v),
            Literal::Int(v) => Some(*v as f64),
            Literal::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            Literal::Str(_) => None,
        }
    }

    /// The value as an integer if it is an integer, a boolean, or a double with an exact
    /// integer value (what sizes such as `rows=n` accept).
    pub fn as_exact_i64(&self) -> Option<i64> {
        match self {
            Literal::Int(v) => Some(*v),
            Literal::Bool(b) => Some(*b as i64),
            Literal::Double(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => Some(*v as i64),
            _ => None,
        }
    }
}

/// The bits of a double with every NaN mapped to one canonical NaN: NaN payloads are not
/// observable in DML, and JSON cannot carry them.
pub fn double_bits(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

impl PartialEq for Literal {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Literal::Double(a), Literal::Double(b)) => double_bits(*a) == double_bits(*b),
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Bool(a), Literal::Bool(b)) => a == b,
            (Literal::Str(a), Literal::Str(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Literal {}

impl std::hash::Hash for Literal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Literal::Double(v) => double_bits(*v).hash(state),
            Literal::Int(v) => v.hash(state),
            Literal::Bool(v) => v.hash(state),
            Literal::Str(v) => v.hash(state),
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Double(v) => {
                if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e16 {
                    write!(f, "{v:.1}")
                } else {
                    write!(f, "{v}")
                }
            }
            Literal::Int(v) => write!(f, "{v}"),
            Literal::Bool(true) => f.write_str("TRUE"),
            Literal::Bool(false) => f.write_str("FALSE"),
            Literal::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// JSON cannot hold NaN or infinities as numbers; they are written as the strings
/// `"NaN"`, `"Infinity"` and `"-Infinity"` so that every literal round-trips.
mod json_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if *v == f64::INFINITY {
            s.serialize_str("Infinity")
        } else if *v == f64::NEG_INFINITY {
            s.serialize_str("-Infinity")
        } else {
            s.serialize_f64(*v)
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Str(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Num(v) => Ok(v),
            Repr::Str(s) => match s.as_str() {
                "NaN" => Ok(f64::NAN),
                "Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!(
                    "invalid double literal {other:?}"
                ))),
            },
        }
    }
}

named_ops! {
    /// Three-input operators.
    TernaryOp {
        /// `ifelse(cond, yes, no)`: inputs `[cond, yes, no]`; any of them may be a matrix (all
        /// matrices must have the same shape) or a scalar.
        IfElse = "ifelse",
        /// `replace(target=X, pattern=p, replacement=r)`: inputs `[X, p, r]` (X a matrix,
        /// p and r scalars); replaces every cell equal to p (NaN matches NaN) by r.
        Replace = "replace",
    }
}

named_ops! {
    /// Reorganisations: data movement without arithmetic.
    ReorgOp {
        /// `t(X)`: inputs `[X]`.
        Transpose = "t",
        /// `diag(X)`: inputs `[X]`; a column vector n×1 becomes an n×n diagonal matrix, a
        /// square matrix n×n gives its diagonal as n×1.
        Diag = "diag",
        /// `matrix(X, rows, cols, byrow)`: inputs `[X, rows, cols, byrow]` (scalars; byrow bool).
        Reshape = "reshape",
        /// `rev(X)`: inputs `[X]`; the rows in reverse order.
        Rev = "rev",
    }
}

named_ops! {
    /// Operators over a variable number of inputs.
    NaryOp {
        /// `cbind(A, B, ...)`: inputs in argument order, all with the same number of rows.
        Cbind = "cbind",
        /// `rbind(A, B, ...)`: inputs in argument order, all with the same number of columns.
        Rbind = "rbind",
        /// Element-wise `min(a, b, c, ...)` with three or more arguments (scalars or same-shape matrices).
        Min = "min",
        /// Element-wise `max(a, b, c, ...)` with three or more arguments.
        Max = "max",
    }
}

named_ops! {
    /// Conversions between data and value types: inputs `[x]`.
    CastOp {
        /// 1×1 matrix → scalar (of the matrix's value type).
        AsScalar = "as.scalar",
        /// scalar → 1×1 matrix (a matrix input is passed through).
        AsMatrix = "as.matrix",
        AsDouble = "as.double",
        /// Truncates toward zero; saturates at the i64 range (Java's `(long)` cast).
        AsInt = "as.integer",
        AsBool = "as.logical",
        /// matrix → frame, each column typed as SystemDS types it.
        AsFrame = "as.frame",
    }
}

named_ops! {
    /// Column-wise cumulative aggregates: inputs `[X]`, output has X's shape (`cumsumprod`:
    /// X has two columns and the output one).
    CumulativeOp {
        Cumsum = "cumsum",
        Cumprod = "cumprod",
        Cummin = "cummin",
        Cummax = "cummax",
        /// `cumsumprod(X)`: `Y[i] = X[i,1] + X[i,2] * Y[i-1]`, `Y[0] = 0`.
        Cumsumprod = "cumsumprod",
    }
}

named_ops! {
    /// Reorganisations with parameters, several of them with a size that depends on the data
    /// (`table` without output dimensions, `removeEmpty`, `unique`): size inference leaves
    /// those unknown, and the program builder ends a block after a statement calling them, so
    /// the statements after it are compiled with the actual size.
    ParamOp {
        /// `table(A, B, W, odim1, odim2)`: inputs `[A, B, W, odim1, odim2]`; A and B matrices
        /// of the same shape or one a scalar, W a matrix of that shape or a scalar; `odim1` and
        /// `odim2` integers, `-1` where not given (the maximum category then).
        Table = "table",
        /// `removeEmpty(target, margin, empty.return, select)`: inputs `[X, margin,
        /// empty_return]` or `[X, margin, empty_return, select]` (margin "rows" or "cols").
        RemoveEmpty = "removeEmpty",
        /// `order(target, by, decreasing, index.return)`: inputs `[X, by, decreasing,
        /// index_return]`.
        Order = "order",
        /// `rowIndexMax(X)`: inputs `[X]`; n×1, the 1-based column of each row's maximum.
        RowIndexMax = "rowIndexMax",
        /// `rowIndexMin(X)`: inputs `[X]`; as `rowIndexMax`.
        RowIndexMin = "rowIndexMin",
        /// `outer(u, v, op)`: inputs `[u, v, op]`, u n×1, v 1×m, op a string naming a binary
        /// operator; n×m.
        Outer = "outer",
        /// `unique(X, dir)`: inputs `[X, dir]`; dir `"rc"` (the distinct values as a column,
        /// in `java.util.HashSet` order as SystemDS), `"r"` or `"c"` (per row or column).
        Unique = "unique",
        /// `aggregate(target, groups, fn, ngroups, order, weights)`: inputs `[X, G, fn,
        /// ngroups, order]` or `[X, G, fn, ngroups, order, W]`; ngroups -1 where not given
        /// (the largest group then).
        Aggregate = "aggregate",
        /// `lower.tri(target, diag, values)`: inputs `[X, diag, values]`; X's shape.
        LowerTri = "lower.tri",
        /// `upper.tri(target, diag, values)`: inputs `[X, diag, values]`; X's shape.
        UpperTri = "upper.tri",
    }
}

named_ops! {
    /// Size queries that could not be folded to literals (input sizes unknown): inputs `[X]`,
    /// integer scalar result.
    MetaOp {
        Nrow = "nrow",
        Ncol = "ncol",
        Length = "length",
    }
}

/// The input order of `DataGen(Rand)`.
pub const RAND_INPUTS: [&str; 8] = [
    "rows", "cols", "min", "max", "sparsity", "seed", "pdf", "lambda",
];
/// The input order of `ToString`.
pub const TOSTRING_INPUTS: [&str; 7] = [
    "target", "rows", "cols", "decimal", "sparse", "sep", "linesep",
];

named_ops! {
    /// Data generators.
    DataGenOp {
        /// `rand(...)`: inputs `[rows, cols, min, max, sparsity, seed, pdf, lambda]` (see
        /// [`RAND_INPUTS`]); seed `-1` means "draw a fresh seed", pdf is `"uniform"`,
        /// `"normal"` or `"poisson"` (with `lambda`).
        Rand = "rand",
        /// `seq(from, to, incr)`: inputs `[from, to, incr]`; a column vector.
        Seq = "seq",
        /// `matrix(v, rows, cols)` with a numeric scalar v: inputs `[v, rows, cols]`.
        Fill = "fill",
        /// `matrix("1 2 3 4", rows, cols)`: inputs `[values, rows, cols]`, values a string of
        /// numbers separated by spaces or commas, filled row by row.
        Sinit = "sinit",
        /// `time()`: no inputs; the current time in nanoseconds (int). Never merged by CSE.
        Time = "time",
        /// `sample(range, size, replace, seed)`: inputs `[range, size, replace, seed]`; a
        /// size×1 column of values in `1..=range`, SystemDS's stream for a given seed; seed
        /// `-1` draws a fresh one (as `rand`; never merged by CSE then).
        Sample = "sample",
    }
}

/// What a hop computes. Inputs are the hop's `inputs` in the order documented per variant; all
/// size and parameter inputs are scalar hops (usually literals after construction).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpKind {
    /// A scalar constant: no inputs.
    #[serde(rename = "lit")]
    Literal(Literal),
    /// The value of a variable live at block entry: no inputs. Always reads the value the
    /// variable had when the block started, even if the block reassigns it.
    #[serde(rename = "tread")]
    TransientRead { name: String },
    /// Binds a variable at block exit: inputs `[value]`. No users.
    #[serde(rename = "twrite")]
    TransientWrite { name: String },
    /// `read(file, ...)`: inputs `[file, p_1, ..., p_k]`, `p_i` the value of the named
    /// parameter `params[i]` (e.g. `format`, `rows`, `cols`, `header`, `sep`).
    #[serde(rename = "pread")]
    PersistentRead { params: Vec<String> },
    /// `write(X, file, ...)`: inputs `[X, file, p_1, ..., p_k]`. A side effect; no users.
    #[serde(rename = "pwrite")]
    PersistentWrite { params: Vec<String> },
    /// Data generators; see [`DataGenOp`] for the input order of each.
    #[serde(rename = "dg")]
    DataGen(DataGenOp),
    /// `[x]`.
    #[serde(rename = "u")]
    Unary(UnaryOp),
    /// `[lhs, rhs]`.
    #[serde(rename = "b")]
    Binary(BinaryOp),
    /// See [`TernaryOp`].
    #[serde(rename = "t")]
    Ternary(TernaryOp),
    /// `[X]`: `sum(X)`, `rowSums(X)`, `colMeans(X)`, ...
    #[serde(rename = "ua")]
    AggUnary { op: AggOp, dir: Direction },
    /// `A %*% B`: `[A, B]` (SystemDS's AggBinary `ba+*`).
    #[serde(rename = "ba+*")]
    MatMul,
    /// See [`ReorgOp`].
    #[serde(rename = "r")]
    Reorg(ReorgOp),
    /// Right indexing `X[rl:ru, cl:cu]`: `[X, rl, ru, cl, cu]`, 1-based inclusive bounds as
    /// in DML (omitted bounds are filled in: `1` and `nrow(X)`/`ncol(X)`).
    #[serde(rename = "rix")]
    Index,
    /// Left indexing `X[rl:ru, cl:cu] = V`: `[X, V, rl, ru, cl, cu]` (V a matrix of the
    /// range's shape or a scalar); the result is a new matrix.
    #[serde(rename = "lix")]
    LeftIndex,
    /// See [`NaryOp`].
    #[serde(rename = "n")]
    Nary(NaryOp),
    /// `[x]`; see [`CastOp`].
    #[serde(rename = "cast")]
    Cast(CastOp),
    /// `[X]`; see [`CumulativeOp`].
    #[serde(rename = "cum")]
    Cumulative(CumulativeOp),
    /// See [`ParamOp`].
    #[serde(rename = "p")]
    Param(ParamOp),
    /// `solve(A, b)`: `[A, b]`, A square n×n, b n×1; result n×1.
    #[serde(rename = "solve")]
    Solve,
    /// Statistics of column vectors; see [`StatOp`] for the inputs of each.
    #[serde(rename = "stat")]
    Stat(StatOp),
    /// `[A]`: `inv`, `cholesky`, `det`; see [`LinAlgOp`].
    #[serde(rename = "linalg")]
    LinAlg(LinAlgOp),
    /// SystemDS's deep-learning built-ins (`conv2d`, `max_pool`, `bias_add`, ...); see
    /// [`DnnOp`] for the inputs of each.
    #[serde(rename = "dnn")]
    Dnn(DnnOp),
    /// Result `output` (0-based, in DML's order: `[values, vectors] = eigen(A)` has 0 and 1)
    /// of the decomposition `op`: `[A]`. The results of one call are separate hops over the
    /// same input; the lowering computes the decomposition once for all of them.
    #[serde(rename = "decomp")]
    Decompose { op: DecompOp, output: u8 },
    /// Result `output` of `[X, M] = transformencode(target=F, spec=S)`: `[F, S]`, the encoded
    /// matrix (0) or the metadata frame (1). The results of one call are separate hops; the
    /// lowering encodes once for both.
    #[serde(rename = "tfencode")]
    TransformEncode { output: u8 },
    /// `transformapply(target=F, spec=S, meta=M)`: `[F, S, M]`, a matrix.
    #[serde(rename = "tfapply")]
    TransformApply,
    /// `transformdecode(target=X, spec=S, meta=M)`: `[X, S, M]`, a frame.
    #[serde(rename = "tfdecode")]
    TransformDecode,
    /// `colnames(F)`: `[F]`, a one-row frame of F's column names.
    #[serde(rename = "colnames")]
    Colnames,
    /// `[X]`; see [`MetaOp`].
    #[serde(rename = "meta")]
    Meta(MetaOp),
    /// `print(x)`: `[x]`, or `print(format, a_1, ..., a_k)`: `[format, a_1, ..., a_k]` with
    /// printf-style placeholders. A side effect; no users.
    #[serde(rename = "print")]
    Print,
    /// `stop(message)`: `[message]`. A side effect; no users.
    #[serde(rename = "stop")]
    Stop,
    /// `assert(cond)`: `[cond]`; stops the script where `cond` is false. A side effect; no
    /// users.
    #[serde(rename = "assert")]
    Assert,
    /// `list(a, b, ...)` or `list(x=a, y=b, ...)`: a list of the inputs (any data types), named
    /// by `names` (one per input) when the call names them.
    #[serde(rename = "list")]
    ListNew { names: Option<Vec<String>> },
    /// `L[lower:upper]` (1-based, inclusive) or `L["name"]` (`lower` = `upper` = the name):
    /// `[L, lower, upper]`; a list.
    #[serde(rename = "listIndex")]
    ListIndex,
    /// `append(L, x)` (SystemDS's `cbind` of a list): `[L, x]`; L with x added, a one-element
    /// list added as its element with its name.
    #[serde(rename = "listAppend")]
    ListAppend,
    /// `L[lower:upper] = x` (or `L["name"] = x`): `[L, lower, upper, x]`; the updated list.
    #[serde(rename = "listSet")]
    ListSet,
    /// Result `output` of `[L2, e] = remove(L, i)`: `[L, i]`; L without its `i`-th element
    /// (0), or that element alone in an unnamed list (1).
    #[serde(rename = "listRemove")]
    ListRemove { output: u8 },
    /// `as.list(L)`: `[L]`; the element of a list holding one list, else L itself.
    #[serde(rename = "listUnnest")]
    ListUnnest,
    /// `toString(X, rows, cols, decimal, sparse, sep, linesep)`: inputs in that order (see
    /// [`TOSTRING_INPUTS`]); a string scalar.
    #[serde(rename = "toString")]
    ToString,
    /// `lineage(X)`: `[X]`; X's lineage log, a string scalar (needs lineage tracing).
    #[serde(rename = "lineage")]
    Lineage,
}

impl OpKind {
    /// Side effects: kept in statement order, never merged or removed, never used as inputs.
    pub fn is_side_effect(&self) -> bool {
        matches!(
            self,
            OpKind::Print | OpKind::Stop | OpKind::Assert | OpKind::PersistentWrite { .. }
        )
    }

    /// Hops that must be roots (outputs and side effects): they produce no value for users.
    pub fn is_sink(&self) -> bool {
        self.is_side_effect() || matches!(self, OpKind::TransientWrite { .. })
    }

    /// The number of inputs this op requires: `Some(n)` exactly n, `None` a variable count
    /// (checked by [`OpKind::arity_ok`]).
    pub fn fixed_arity(&self) -> Option<usize> {
        Some(match self {
            OpKind::Literal(_) | OpKind::TransientRead { .. } => 0,
            OpKind::TransientWrite { .. } => 1,
            OpKind::PersistentRead { params } => 1 + params.len(),
            OpKind::PersistentWrite { params } => 2 + params.len(),
            OpKind::DataGen(op) => match op {
                DataGenOp::Rand => RAND_INPUTS.len(),
                DataGenOp::Seq | DataGenOp::Fill | DataGenOp::Sinit => 3,
                DataGenOp::Time => 0,
                DataGenOp::Sample => 4,
            },
            OpKind::Unary(_)
            | OpKind::AggUnary { .. }
            | OpKind::Cast(_)
            | OpKind::Cumulative(_) => 1,
            OpKind::Meta(_) | OpKind::Stop | OpKind::Assert | OpKind::Lineage => 1,
            OpKind::ListAppend | OpKind::ListRemove { .. } => 2,
            OpKind::ListUnnest => 1,
            OpKind::ListIndex => 3,
            OpKind::ListSet => 4,
            OpKind::ListNew { .. } => return None,
            OpKind::Binary(_) | OpKind::MatMul | OpKind::Solve => 2,
            OpKind::Stat(op) => op.arity(),
            OpKind::LinAlg(_) | OpKind::Decompose { .. } => 1,
            OpKind::TransformEncode { .. } => 2,
            OpKind::TransformApply | OpKind::TransformDecode => 3,
            OpKind::Colnames => 1,
            OpKind::Dnn(op) => op.arity(),
            OpKind::Ternary(_) => 3,
            OpKind::Reorg(ReorgOp::Reshape) => 4,
            OpKind::Reorg(_) => 1,
            OpKind::Index => 5,
            OpKind::LeftIndex => 6,
            OpKind::ToString => TOSTRING_INPUTS.len(),
            OpKind::Param(p) => match p {
                ParamOp::Table => 5,
                ParamOp::RemoveEmpty => return None,
                ParamOp::Order => 4,
                ParamOp::RowIndexMax | ParamOp::RowIndexMin => 1,
                ParamOp::Outer => 3,
                ParamOp::Unique => 2,
                ParamOp::Aggregate => return None,
                ParamOp::LowerTri | ParamOp::UpperTri => 3,
            },
            OpKind::Nary(_) | OpKind::Print => return None,
        })
    }

    /// Whether `n` inputs are valid for this op.
    pub fn arity_ok(&self, n: usize) -> bool {
        match self {
            OpKind::Nary(NaryOp::Cbind | NaryOp::Rbind) => n >= 1,
            OpKind::Nary(NaryOp::Min | NaryOp::Max) => n >= 2,
            OpKind::Print => n >= 1,
            OpKind::Param(ParamOp::RemoveEmpty) => n == 3 || n == 4,
            OpKind::Param(ParamOp::Aggregate) => n == 5 || n == 6,
            OpKind::ListNew { names } => names.as_ref().is_none_or(|names| names.len() == n),
            other => other.fixed_arity() == Some(n),
        }
    }

    /// A short, stable description for explain: class and operator, e.g. `b(+)`,
    /// `ua(sum,row)`, `ba(+*)`, `TRead X`, `lit(3)`.
    pub fn display_name(&self) -> String {
        match self {
            OpKind::Literal(l) => format!("lit({l})"),
            OpKind::TransientRead { name } => format!("TRead {name}"),
            OpKind::TransientWrite { name } => format!("TWrite {name}"),
            OpKind::PersistentRead { params } => format!("PRead({})", params.join(",")),
            OpKind::PersistentWrite { params } => format!("PWrite({})", params.join(",")),
            OpKind::DataGen(op) => format!("dg({op})"),
            OpKind::Unary(op) => format!("u({op})"),
            OpKind::Binary(op) => format!("b({op})"),
            OpKind::Ternary(op) => format!("t({op})"),
            OpKind::AggUnary { op, dir } => format!("ua({op},{dir})"),
            OpKind::MatMul => "ba(+*)".to_string(),
            OpKind::Reorg(op) => format!("r({op})"),
            OpKind::Index => "rix".to_string(),
            OpKind::LeftIndex => "lix".to_string(),
            OpKind::Nary(op) => format!("n({op})"),
            OpKind::Cast(op) => format!("cast({op})"),
            OpKind::Cumulative(op) => format!("cum({op})"),
            OpKind::Param(op) => format!("p({op})"),
            OpKind::Solve => "solve".to_string(),
            OpKind::Stat(op) => format!("stat({op})"),
            OpKind::LinAlg(op) => format!("la({op})"),
            OpKind::Dnn(op) => format!("dnn({op})"),
            OpKind::Decompose { op, output } => format!("{op}[{output}]"),
            OpKind::TransformEncode { output } => format!("transformencode[{output}]"),
            OpKind::TransformApply => "transformapply".to_string(),
            OpKind::TransformDecode => "transformdecode".to_string(),
            OpKind::Colnames => "colnames".to_string(),
            OpKind::Meta(op) => format!("meta({op})"),
            OpKind::Print => "print".to_string(),
            OpKind::Stop => "stop".to_string(),
            OpKind::Assert => "assert".to_string(),
            OpKind::ListNew { names: None } => "list".to_string(),
            OpKind::ListNew { names: Some(names) } => format!("list({})", names.join(",")),
            OpKind::ListIndex => "rix(list)".to_string(),
            OpKind::ListAppend => "append(list)".to_string(),
            OpKind::ListSet => "lix(list)".to_string(),
            OpKind::ListRemove { output } => format!("remove[{output}]"),
            OpKind::ListUnnest => "as.list".to_string(),
            OpKind::ToString => "toString".to_string(),
            OpKind::Lineage => "lineage".to_string(),
        }
    }
}

/// One high-level operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    pub op: OpKind,
    /// Ordered inputs; see the [`OpKind`] variant for what each position means.
    pub inputs: Vec<HopId>,
    pub data_type: DataType,
    pub value_type: ValueType,
    /// Number of rows: `Some(0)` for scalars; `None` only where genuinely unknown at compile
    /// time (e.g. a `read` without size metadata, or sizes depending on unknown scalars).
    #[serde(default)]
    pub rows: Option<u64>,
    /// Number of columns; as `rows`.
    #[serde(default)]
    pub cols: Option<u64>,
    /// Estimated number of non-zeros (exact where derivable, otherwise SystemDS's worst-case
    /// estimate, average case for matrix multiply); `None` for scalars and where unknown.
    #[serde(default)]
    pub nnz: Option<u64>,
    /// Where in the script this hop comes from (for error messages).
    #[serde(default)]
    pub span: Span,
    /// The value of a scalar that is known at compile time without being a literal: a
    /// block's scalar input whose current value the compiler was given, and what folds from
    /// such values. Size inference reads it; rewrites and code generation never do (they see
    /// a variable), so a plan compiled with one value stays correct for any other value that
    /// implies the same sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known: Option<Literal>,
}

impl Hop {
    /// A hop with unknown sizes (to be filled by size propagation).
    pub fn new(
        op: OpKind,
        inputs: Vec<HopId>,
        data_type: DataType,
        value_type: ValueType,
        span: Span,
    ) -> Hop {
        let (rows, cols) = if data_type == DataType::Scalar {
            (Some(0), Some(0))
        } else {
            (None, None)
        };
        Hop {
            op,
            inputs,
            data_type,
            value_type,
            rows,
            cols,
            nnz: None,
            span,
            known: None,
        }
    }

    /// `Some(value)` for a literal hop.
    pub fn literal(&self) -> Option<&Literal> {
        match &self.op {
            OpKind::Literal(l) => Some(l),
            _ => None,
        }
    }

    pub fn is_scalar(&self) -> bool {
        self.data_type == DataType::Scalar
    }

    pub fn is_matrix(&self) -> bool {
        self.data_type == DataType::Matrix
    }

    pub fn is_list(&self) -> bool {
        self.data_type == DataType::List
    }

    pub fn is_frame(&self) -> bool {
        self.data_type == DataType::Frame
    }

    /// `(rows, cols)` when both are known.
    pub fn dims(&self) -> Option<(u64, u64)> {
        Some((self.rows?, self.cols?))
    }

    /// Number of cells when known (scalars: 1).
    pub fn cells(&self) -> Option<u64> {
        if self.is_scalar() {
            return Some(1);
        }
        self.rows?.checked_mul(self.cols?)
    }

    /// Fraction of non-zero cells when known.
    pub fn sparsity(&self) -> Option<f64> {
        let cells = self.cells()?;
        let nnz = self.nnz?;
        Some(if cells == 0 {
            0.0
        } else {
            nnz as f64 / cells as f64
        })
    }

    /// The shape as `[rows x cols]` (`?` for unknown) for messages.
    pub fn shape_string(&self) -> String {
        if self.is_scalar() {
            return "scalar".to_string();
        }
        let d = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        format!("{}x{}", d(self.rows), d(self.cols))
    }
}

/// The HOP DAG of one basic block (or of one predicate expression).
///
/// `roots` are in statement order: every `TransientWrite` (at the position of the variable's
/// final assignment), every side effect (`Print`, `Stop`, `PersistentWrite`) and every
/// `time()` hop, each at most once. Execution order is defined by [`crate::hops::linearize`](fn@crate::hops::linearize).
/// Hops that no root reaches are dead and ignored (removed by [`HopDag::compact`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HopDag {
    pub hops: Vec<Hop>,
    pub roots: Vec<HopId>,
}

impl HopDag {
    /// An empty DAG.
    pub fn new() -> HopDag {
        HopDag::default()
    }

    /// Appends a hop and returns its id.
    pub fn add(&mut self, hop: Hop) -> HopId {
        let id = HopId(self.hops.len() as u32);
        self.hops.push(hop);
        id
    }

    /// Appends a literal scalar (typed by its value) and returns its id.
    pub fn add_literal(&mut self, value: Literal, span: Span) -> HopId {
        let vt = value.value_type();
        self.add(Hop::new(
            OpKind::Literal(value),
            vec![],
            DataType::Scalar,
            vt,
            span,
        ))
    }

    /// The hop with this id. Panics on an id not from this DAG (ids from verified DAGs are in range).
    pub fn hop(&self, id: HopId) -> &Hop {
        &self.hops[id.index()]
    }

    /// Mutable access to a hop.
    pub fn hop_mut(&mut self, id: HopId) -> &mut Hop {
        &mut self.hops[id.index()]
    }

    /// The hop if the id is in range.
    pub fn get(&self, id: HopId) -> Option<&Hop> {
        self.hops.get(id.index())
    }

    /// Gives the transient reads of the matrix variable `name` (a DAG's input) the size
    /// `rows` x `cols` with `nnz` non-zeros, each `None` where unknown; whether the DAG reads
    /// such a matrix. Sizes downstream change only once propagated
    /// ([`propagate_sizes`](crate::hops::propagate_sizes)).
    pub fn size_input(
        &mut self,
        name: &str,
        rows: Option<u64>,
        cols: Option<u64>,
        nnz: Option<u64>,
    ) -> bool {
        let mut found = false;
        for hop in &mut self.hops {
            if matches!(&hop.op, OpKind::TransientRead { name: n } if n == name) && hop.is_matrix()
            {
                (hop.rows, hop.cols, hop.nnz) = (rows, cols, nnz);
                found = true;
            }
        }
        found
    }

    /// Number of hops in the arena (including dead ones).
    pub fn len(&self) -> usize {
        self.hops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }

    /// All ids in arena order.
    pub fn ids(&self) -> impl Iterator<Item = HopId> {
        (0..self.hops.len() as u32).map(HopId)
    }

    /// The literal value of a scalar hop, if it is a literal.
    pub fn literal_of(&self, id: HopId) -> Option<&Literal> {
        self.get(id).and_then(Hop::literal)
    }

    /// The value of scalar hop `id` where the compiler knows it: a literal's, or a known
    /// value ([`Hop::known`]). For size inference only: a rewrite that relied on a known
    /// value would bake it into a plan that is reused for other values.
    pub fn scalar_value(&self, id: HopId) -> Option<&Literal> {
        self.get(id).and_then(|h| h.literal().or(h.known.as_ref()))
    }

    /// The `TransientWrite` roots as `(variable, value hop)` in root order.
    pub fn outputs(&self) -> Vec<(&str, HopId)> {
        self.roots
            .iter()
            .filter_map(|&r| match &self.hop(r).op {
                OpKind::TransientWrite { name } => Some((name.as_str(), self.hop(r).inputs[0])),
                _ => None,
            })
            .collect()
    }

    /// For each hop, the ids of the hops that use it (each user once per use).
    pub fn users(&self) -> Vec<Vec<HopId>> {
        let mut users = vec![Vec::new(); self.hops.len()];
        for id in self.ids() {
            for &input in &self.hop(id).inputs {
                if let Some(u) = users.get_mut(input.index()) {
                    u.push(id);
                }
            }
        }
        users
    }

    /// Removes the `TransientWrite` roots of variables not in `live` (dead after the block:
    /// `crate::liveness`). What only they read becomes dead, for [`HopDag::compact`] to drop.
    pub fn drop_writes_except(&mut self, live: &std::collections::BTreeSet<String>) {
        let hops = &self.hops;
        self.roots.retain(|r| match &hops[r.index()].op {
            OpKind::TransientWrite { name } => live.contains(name),
            _ => true,
        });
    }

    /// Replaces every use of `old` (as an input or a root) by `new`.
    pub fn replace_uses(&mut self, old: HopId, new: HopId) {
        for hop in &mut self.hops {
            for input in &mut hop.inputs {
                if *input == old {
                    *input = new;
                }
            }
        }
        for root in &mut self.roots {
            if *root == old {
                *root = new;
            }
        }
    }

    /// Removes dead hops and renumbers the rest in linearized order (inputs before users), so
    /// the arena is deterministic for a given DAG structure. Requires a verified (acyclic) DAG.
    pub fn compact(&mut self) {
        let order = crate::hops::linearize(self);
        let mut map = vec![None; self.hops.len()];
        for (new, old) in order.iter().enumerate() {
            map[old.index()] = Some(HopId(new as u32));
        }
        let mut hops = Vec::with_capacity(order.len());
        for old in &order {
            let mut hop = self.hops[old.index()].clone();
            for input in &mut hop.inputs {
                // linearize visits inputs before users, so every input has a new id.
                *input = map[input.index()].unwrap_or(*input);
            }
            hops.push(hop);
        }
        let roots = self.roots.iter().filter_map(|r| map[r.index()]).collect();
        self.hops = hops;
        self.roots = roots;
    }
}
