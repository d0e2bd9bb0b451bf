//! The runtime's error type: an enum of causes, each with the values that describe it, whose
//! variant says who has to act ([`RuntimeError::fault`]).
//!
//! Messages are part of the interface: scripts' error tests and the corpus compare them, so
//! each variant's `Display` is the text lafuse has always printed for that failure.

use crate::matrix::MAX_DIM;
use lafuse_core::Fault;
use std::fmt;
use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// A matrix shape, `(rows, cols)`.
pub type Shape = (usize, usize);

/// Errors raised while executing kernels and instructions.
///
/// Every variant but the last three is the user's (shapes that do not match, an index out of
/// range, a bad argument value, a missing or malformed file, the script's own `stop`); the
/// last three are nobody's yet (`Unsupported`: valid but not implemented), the machine's
/// (`Resource`) and ours (`Internal`).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RuntimeError {
    /// Two operands whose shapes the operation cannot combine.
    #[error("{}", .op.describe(.left, .right))]
    ShapeMismatch {
        op: ShapeOp,
        left: Shape,
        right: Shape,
    },
    /// `solve` of a matrix that is not square.
    #[error("solve: the matrix must be square, got {}", dims(.shape))]
    NotSquare { shape: Shape },
    /// `solve` of a matrix singular to working precision (`order` x `order`).
    #[error("solve: the {order}x{order} matrix is singular")]
    Singular { order: usize },
    /// A built-in's argument whose value it does not accept (`function` names the built-in,
    /// `problem` the argument and its value), e.g. a zero category of `table`.
    #[error("{function}: {problem}")]
    Argument {
        function: &'static str,
        problem: String,
    },
    /// A function given a matrix of a shape it does not take (`inv` of a non-square matrix).
    #[error("{function}: expected {expected}, got {}", dims(.shape))]
    FunctionShape {
        function: &'static str,
        expected: &'static str,
        shape: Shape,
    },
    /// A decomposition that does not exist for its input (singular, not positive definite).
    #[error("{function}: {problem}")]
    Decomposition {
        function: &'static str,
        problem: &'static str,
    },
    /// A statistic's argument out of its range (`quantile`'s p, `moment`'s order, weights).
    #[error("{function}: argument {argument} must be {expected}, found {found}")]
    StatArgument {
        function: &'static str,
        argument: &'static str,
        expected: &'static str,
        found: f64,
    },
    /// `diag` of a matrix that is neither a column vector nor square.
    #[error("diag: expected a column vector or a square matrix, got {}", dims(.shape))]
    DiagShape { shape: Shape },
    /// The `as.scalar` builtin applied to a matrix that is not 1x1.
    #[error("as.scalar needs a 1x1 matrix, found a {} matrix", dims(.shape))]
    AsScalarShape { shape: Shape },
    /// The single value of a matrix asked for where the matrix is not 1x1.
    #[error("as.scalar: expected a 1x1 matrix, got {}", dims(.shape))]
    NotOneByOne { shape: Shape },
    /// `cbind` or `rbind` (`function`) of no matrices.
    #[error("{function}: no inputs")]
    NoInputs { function: &'static str },
    /// A number of values that does not fill the matrix they are to make (`function` names
    /// the builtin, where one asked).
    #[error(
        "{}{values} values do not fill a {} matrix",
        prefix(.function),
        dims(.shape)
    )]
    ValuesDoNotFill {
        function: Option<&'static str>,
        values: usize,
        shape: Shape,
    },
    /// `matrix("...", rows, cols)` whose string holds another number of values.
    #[error(
        "matrix(\"...\") has {values} values, but {}x{} = {} are needed",
        .shape.0,
        .shape.1,
        cells(.shape)
    )]
    MatrixStringValues { values: usize, shape: Shape },
    /// `matrix("...", rows, cols)` whose string holds something other than a number.
    #[error("matrix(\"...\"): cannot parse '{token}' as a number")]
    MatrixStringToken { token: String },
    /// `matrix(A, rows, cols)` into a shape of another cell count.
    #[error(
        "matrix: cannot reshape a {} matrix ({} cells) into {}",
        dims(.from),
        cells(.from),
        dims(.to)
    )]
    Reshape { from: Shape, to: Shape },
    /// Left indexing whose source matrix does not have the shape of the cells it is assigned
    /// to (`rows` and `cols` 0-based, half-open).
    #[error(
        "left indexing: a {} matrix cannot be assigned to {}x{} cells ({}:{}, {}:{}) of a {} matrix",
        dims(.source_shape),
        .rows.len(),
        .cols.len(),
        .rows.start + 1,
        .rows.end,
        .cols.start + 1,
        .cols.end,
        dims(.target)
    )]
    LeftIndexShape {
        source_shape: Shape,
        rows: Range<usize>,
        cols: Range<usize>,
        target: Shape,
    },
    /// A script's index range (1-based, inclusive) outside the matrix.
    #[error(
        "{} index range {lower}:{upper} is out of bounds for a {} matrix",
        .axis.singular(),
        dims(.shape)
    )]
    IndexRange {
        axis: Axis,
        lower: usize,
        upper: usize,
        shape: Shape,
    },
    /// A range (0-based, half-open) an indexing kernel was given outside the matrix; `op` is
    /// `index` or `left indexing`.
    #[error(
        "{op}: {} {}:{} out of bounds for a {} matrix",
        .axis.plural(),
        .range.start + 1,
        .range.end,
        dims(.shape)
    )]
    KernelIndexRange {
        op: &'static str,
        axis: Axis,
        range: Range<usize>,
        shape: Shape,
    },
    /// An index bound below 1 once truncated to an integer (`found`: the value as the script
    /// prints it).
    #[error("{} index must be at least 1, found {found}", .axis.singular())]
    NotAnIndex { axis: Axis, found: String },
    /// A size argument (`rows`, `cols`) that is not a non-negative integer.
    #[error("{argument} must be a non-negative integer, found {found}")]
    NotACount {
        argument: &'static str,
        found: String,
    },
    /// A cell (1-based) outside the matrix it is to be stored in.
    #[error("cell ({}, {}) is outside a {} matrix", .cell.0, .cell.1, dims(.shape))]
    CellOutside { cell: (usize, usize), shape: Shape },
    /// Dimensions beyond [`MAX_DIM`] (SystemDS's `int` limit); `function` names the builtin
    /// that was asked, where one was.
    #[error(
        "{}invalid matrix dimensions {} (at most {MAX_DIM} rows and columns)",
        prefix(.function),
        dims(.shape)
    )]
    DimensionsBeyondLimit {
        function: Option<&'static str>,
        shape: Shape,
    },
    /// CSR arrays handed in that do not make a valid sparse matrix.
    #[error("invalid CSR {} matrix: {defect}", dims(.shape))]
    InvalidCsr { shape: Shape, defect: CsrDefect },
    /// `seq(from, to, incr)` whose increment is zero or points away from `to`.
    #[error(
        "seq: invalid parameters (from={from}, to={to}, incr={incr}): the increment must be \
         non-zero and point from 'from' towards 'to'"
    )]
    InvalidSeq { from: f64, to: f64, incr: f64 },
    /// `rand` with a sparsity outside `[0, 1]` (or NaN).
    #[error("rand: sparsity must be in [0, 1], got {sparsity}")]
    InvalidSparsity { sparsity: f64 },
    /// `rand` with a `pdf` that names no distribution.
    #[error(
        "rand: unknown probability distribution \"{name}\" -- it must be one of \"uniform\", \
         \"normal\", or \"poisson\""
    )]
    UnknownPdf { name: String },
    /// A `for` loop whose range cannot be counted.
    #[error("invalid for-loop range: {0}")]
    LoopRange(LoopRange),
    /// A call of the script's function `function` that does not fit its definition.
    #[error("{}", .cause.describe(.function))]
    Call { function: String, cause: CallError },
    /// A variable read where it has no value.
    #[error("variable '{name}' is not defined here")]
    UndefinedVariable { name: String },
    /// A value that cannot be converted to the type an operation needs.
    #[error("{0}")]
    Conversion(Conversion),
    /// A binary operator strings do not have (`-`, `*`, ...).
    #[error("operator {op} is not defined for strings")]
    StringOperator { op: &'static str },
    /// The script's own `stop(message)`: the message is the script's text.
    #[error("{message}")]
    Stop { message: String },
    /// `assert(cond)` with a false condition (the error's location is the assertion's).
    #[error("assertion failed")]
    AssertionFailed,
    /// `lineage(X)` in a run without lineage tracing (`--lineage`): there is no lineage to
    /// return.
    #[error("lineage(X) needs lineage tracing: run with --lineage")]
    LineageNotTraced,
    /// A `print` format string its arguments do not fit.
    #[error("{0}")]
    Print(PrintError),
    /// A `format=` argument that names no file format.
    #[error("unknown file format '{name}': use \"csv\", \"text\", \"mm\" or \"binary\"")]
    UnknownFileFormat { name: String },
    /// `read` with `sep=""`.
    #[error("read: the CSV separator must not be empty")]
    EmptyCsvSeparator,
    /// A file that cannot be read or written, or whose content is not a matrix.
    #[error("{}", FileMessage(.path, .cause))]
    File { path: PathBuf, cause: FileError },
    /// A `transformencode`/`transformapply` spec that is not valid JSON naming the frame's
    /// columns (`problem` says what is wrong with `spec`).
    #[error("transform spec '{spec}': {problem}")]
    TransformSpec { spec: String, problem: String },
    /// A `transformapply` metadata frame not made by `transformencode` for such a frame.
    #[error("transformapply: the meta frame is not transformencode's: {problem}")]
    TransformMeta { problem: String },
    /// A valid request that lafuse does not implement yet; names the construct.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
    /// Out of memory or another machine limit.
    #[error("resources: {0}")]
    Resource(Resource),
    /// A bug in lafuse.
    #[error("internal error (a bug in lafuse, please report it): {0}")]
    Internal(Internal),
}

impl RuntimeError {
    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            RuntimeError::Unsupported(_) => Fault::Unsupported,
            RuntimeError::Resource(_) => Fault::Resource,
            RuntimeError::Internal(_) => Fault::Internal,
            RuntimeError::ShapeMismatch { .. }
            | RuntimeError::Argument { .. }
            | RuntimeError::NotSquare { .. }
            | RuntimeError::Singular { .. }
            | RuntimeError::FunctionShape { .. }
            | RuntimeError::Decomposition { .. }
            | RuntimeError::StatArgument { .. }
            | RuntimeError::DiagShape { .. }
            | RuntimeError::AsScalarShape { .. }
            | RuntimeError::NotOneByOne { .. }
            | RuntimeError::NoInputs { .. }
            | RuntimeError::ValuesDoNotFill { .. }
            | RuntimeError::MatrixStringValues { .. }
            | RuntimeError::MatrixStringToken { .. }
            | RuntimeError::Reshape { .. }
            | RuntimeError::LeftIndexShape { .. }
            | RuntimeError::IndexRange { .. }
            | RuntimeError::KernelIndexRange { .. }
            | RuntimeError::NotAnIndex { .. }
            | RuntimeError::NotACount { .. }
            | RuntimeError::CellOutside { .. }
            | RuntimeError::DimensionsBeyondLimit { .. }
            | RuntimeError::InvalidCsr { .. }
            | RuntimeError::InvalidSeq { .. }
            | RuntimeError::InvalidSparsity { .. }
            | RuntimeError::UnknownPdf { .. }
            | RuntimeError::LoopRange(_)
            | RuntimeError::Call { .. }
            | RuntimeError::UndefinedVariable { .. }
            | RuntimeError::Conversion(_)
            | RuntimeError::StringOperator { .. }
            | RuntimeError::Stop { .. }
            | RuntimeError::AssertionFailed
            | RuntimeError::LineageNotTraced
            | RuntimeError::Print(_)
            | RuntimeError::UnknownFileFormat { .. }
            | RuntimeError::EmptyCsvSeparator
            | RuntimeError::TransformSpec { .. }
            | RuntimeError::TransformMeta { .. }
            | RuntimeError::File { .. } => Fault::User,
        }
    }

    /// A failed operation on the file at `path`.
    pub fn file(path: impl Into<PathBuf>, cause: FileError) -> Self {
        RuntimeError::File {
            path: path.into(),
            cause,
        }
    }
}

/// `RxC`, as every message writes a shape.
fn dims(&(rows, cols): &Shape) -> String {
    format!("{rows}x{cols}")
}

/// The cell count of a shape, exact whatever the dimensions.
fn cells(&(rows, cols): &Shape) -> u128 {
    rows as u128 * cols as u128
}

/// `function: `, or nothing where no builtin is named.
fn prefix(function: &Option<&'static str>) -> String {
    function.map(|f| format!("{f}: ")).unwrap_or_default()
}

/// A double as the script prints it.
fn double(value: &f64) -> String {
    crate::format::format_double(*value)
}

/// The size of `cells` doubles in GB.
fn gigabytes(cells: &usize) -> f64 {
    *cells as f64 * 8.0 / 1e9
}

/// The operation whose operands' shapes do not match ([`RuntimeError::ShapeMismatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeOp {
    /// An element-wise binary operator (its DML name), broadcasting vectors and scalars.
    ElementWise(&'static str),
    /// `A %*% B`.
    MatrixMultiply,
    /// `t(A) %*% B` with `A` read in place: the left shape is `A`'s, untransposed.
    TransposedMatrixMultiply,
    /// `solve(A, B)`: `B` must have `A`'s rows.
    Solve,
    /// `cbind`: the inputs must have the same rows.
    Cbind,
    /// `rbind`: the inputs must have the same columns.
    Rbind,
    /// `ifelse`: every matrix argument must have the same shape; `operand` names the one that
    /// differs from the first.
    IfElse { operand: &'static str },
    /// A built-in (named) whose matrix arguments must fit each other: `table`'s inputs of
    /// one shape, `removeEmpty`'s `select` of the margin's length, `outer`'s two vectors.
    Builtin(&'static str),
}

impl ShapeOp {
    fn describe(&self, left: &Shape, right: &Shape) -> String {
        let (l, r) = (dims(left), dims(right));
        match self {
            &ShapeOp::ElementWise(op) => {
                format!("element-wise {op}: shapes {l} and {r} do not match")
            }
            ShapeOp::MatrixMultiply => format!(
                "matrix multiply: shapes {l} and {r} do not match (inner dimensions {} and {})",
                left.1, right.0
            ),
            ShapeOp::TransposedMatrixMultiply => format!(
                "matrix multiply: shapes {}x{} (the transpose of {l}) and {r} do not match \
                 (inner dimensions {} and {})",
                left.1, left.0, left.0, right.0
            ),
            ShapeOp::Solve => format!("solve: shapes {l} and {r} do not match"),
            ShapeOp::Cbind => format!("cbind: row counts differ: {l} and {r}"),
            ShapeOp::Rbind => format!("rbind: column counts differ: {l} and {r}"),
            &ShapeOp::IfElse { operand } => {
                format!("ifelse: shapes {l} and {r} ({operand}) do not match")
            }
            &ShapeOp::Builtin(function) => {
                format!("{function}: shapes {l} and {r} do not match")
            }
        }
    }
}

/// Rows or columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Rows,
    Columns,
}

impl Axis {
    /// `row` or `column`.
    pub fn singular(self) -> &'static str {
        match self {
            Axis::Rows => "row",
            Axis::Columns => "column",
        }
    }

    /// `rows` or `columns`.
    pub fn plural(self) -> &'static str {
        match self {
            Axis::Rows => "rows",
            Axis::Columns => "columns",
        }
    }
}

/// What is wrong with CSR arrays ([`RuntimeError::InvalidCsr`], [`Internal::InvalidCsr`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CsrDefect {
    #[error("row_ptr has {entries} entries, expected {expected}")]
    RowPointerCount { entries: usize, expected: usize },
    #[error("row_ptr[0] is not 0")]
    RowPointerStart,
    #[error("row_ptr ends at {end} with {col_indices} column indices and {values} values")]
    RowPointerEnd {
        end: usize,
        col_indices: usize,
        values: usize,
    },
    #[error("row_ptr decreases at row {row}")]
    RowPointerDecreases { row: usize },
    /// `row_ptr[index] = value` points past the stored entries.
    #[error("row_ptr[{index}] = {value} is beyond the {stored} stored entries")]
    RowPointerBeyondEntries {
        index: usize,
        value: usize,
        stored: usize,
    },
    #[error("column indices of row {row} are not strictly increasing")]
    UnsortedColumns { row: usize },
    #[error("column index {column} in row {row} is out of range")]
    ColumnOutOfRange { column: u32, row: usize },
}

/// Why a `for` loop's range cannot be counted ([`RuntimeError::LoopRange`]).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LoopRange {
    /// A zero or NaN step, or a NaN bound.
    #[error("from {from}, to {to}, by {by}")]
    NotCountable { from: f64, to: f64, by: f64 },
    /// An infinite `start`, `end` or `step`.
    #[error("the {bound} is {value}; a loop needs finite bounds")]
    Infinite { bound: &'static str, value: f64 },
    /// An integer loop whose (rounded) end lies beyond the 64-bit integers.
    #[error("the end {end} is beyond the 64-bit integer range")]
    EndBeyondIntegers { end: f64 },
    /// More iterations than a loop counter holds.
    #[error("from {from} to {to} by {by} has more iterations than a loop can count")]
    TooManyIterations { from: f64, to: f64, by: f64 },
}

/// How a call of a script's function does not fit its definition ([`RuntimeError::Call`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// A parameter without a default that the call gives no value.
    MissingArgument { parameter: String },
    /// Calls nested deeper than `limit`, most likely unbounded recursion.
    TooDeep { limit: usize },
    /// More assignment targets than the function has results.
    TooManyTargets { results: usize, targets: usize },
    /// A result the function's body never assigned.
    ResultUnassigned { result: String },
    /// A matrix given for the parameter or result `name`, declared a scalar.
    MatrixForScalar { name: String },
    /// A scalar of type `given` for the parameter or result `name`, declared a matrix.
    ScalarForMatrix { name: String, given: &'static str },
    /// A value of type `given` for the parameter or result `name`, declared a list (or a list
    /// for one declared otherwise: `declared` names the declared kind).
    KindMismatch {
        name: String,
        declared: &'static str,
        given: &'static str,
    },
    /// `eval`'s list of arguments names `name`, which the function has no parameter for.
    NoParameter { name: String },
    /// `eval` gave `given` arguments (one value that is no list, or a list's elements) to a
    /// function of `params` parameters.
    ArgumentCount { params: usize, given: usize },
}

impl CallError {
    fn describe(&self, function: &str) -> String {
        match self {
            CallError::MissingArgument { parameter } => {
                format!("function '{function}' needs a value for parameter '{parameter}'")
            }
            CallError::TooDeep { limit } => format!(
                "function calls nested deeper than {limit} (unbounded recursion in '{function}'?)"
            ),
            CallError::TooManyTargets { results, targets } => format!(
                "function '{function}' returns {results} value(s), but {targets} are assigned"
            ),
            CallError::ResultUnassigned { result } => {
                format!("function '{function}' did not assign its result '{result}'")
            }
            CallError::MatrixForScalar { name } => format!(
                "'{name}' of function '{function}' is declared as a scalar, but a matrix was given"
            ),
            CallError::ScalarForMatrix { name, given } => format!(
                "'{name}' of function '{function}' is declared as a matrix, but a {given} was given"
            ),
            CallError::KindMismatch {
                name,
                declared,
                given,
            } => format!(
                "'{name}' of function '{function}' is declared as a {declared}, but a {given} was given"
            ),
            CallError::NoParameter { name } => format!(
                "eval's list of arguments names '{name}', but function '{function}' has no such parameter"
            ),
            CallError::ArgumentCount { params, given } => format!(
                "eval gave function '{function}' {given} argument(s), but it takes {params}"
            ),
        }
    }
}

/// A value that cannot become what an operation needs ([`RuntimeError::Conversion`]).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Conversion {
    /// A scalar (of type `found`) where a matrix is needed.
    #[error("expected a matrix, found a {found}")]
    ExpectedMatrix { found: &'static str },
    /// A matrix where a scalar is needed.
    #[error("expected a scalar, found a {} matrix", dims(.shape))]
    ExpectedScalar { shape: Shape },
    #[error("cannot convert the string '{text}' to a number")]
    StringToNumber { text: String },
    #[error("cannot convert the string '{text}' to a boolean")]
    StringToBoolean { text: String },
    #[error("cannot convert NaN to an integer")]
    NanToInteger,
    /// A value other than a frame where a frame is needed (`transformencode`'s target).
    #[error("expected a frame, found a {found} (make one with as.frame(X))")]
    ExpectedFrame { found: &'static str },
    /// A frame where a scalar is needed.
    #[error("expected a scalar, found a frame")]
    FrameAsScalar,
    /// A scalar or matrix where a list is needed.
    #[error("expected a list, found a {found}")]
    ExpectedList { found: &'static str },
    /// A list where a scalar is needed (a list's element is taken with `as.scalar(L[i])`).
    #[error("expected a scalar, found a list (take an element with as.scalar(L[i]))")]
    ListAsScalar,
    /// A list index beyond the list (`L[i]` with `i` outside `1..=length`).
    #[error("list index {lower}:{upper} is out of range for a list of length {length}")]
    ListIndex {
        lower: i64,
        upper: i64,
        length: usize,
    },
    /// `append(L, x)` of a named list with an element that has no name.
    #[error("cannot add an unnamed element to a named list (append a named one: list(name=x))")]
    UnnamedIntoNamedList,
    /// `L[i:j] = x` where x is not a list of as many elements as the range.
    #[error("cannot assign {given} element(s) to {positions} list position(s)")]
    ListSetLength { positions: usize, given: usize },
    /// `L["name"]` of a list without an element of that name.
    #[error("the list has no element named '{name}'")]
    ListName { name: String },
    /// `as.scalar(L[i])` or `as.matrix(L[i])` of a list that is not one element.
    #[error("{cast} of a list needs a list of one element, found {length}")]
    ListCast { cast: &'static str, length: usize },
    /// An element of a kind the cast cannot give (`as.matrix` of a string element).
    #[error("{cast} of a list element that is a {found}")]
    ListElement {
        cast: &'static str,
        found: &'static str,
    },
    /// An integer result beyond the 64-bit range (SystemDS's overflow error).
    #[error(
        "integer operation created numerical result overflow ({} is beyond the 64-bit integer \
         range)",
        double(.value)
    )]
    IntegerOverflow { value: f64 },
}

/// A `print` format its arguments do not fit ([`RuntimeError::Print`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PrintError {
    #[error("print: format '{format}' ends with '%'")]
    TrailingPercent { format: String },
    #[error("print: format '{format}' has more placeholders than arguments")]
    TooFewArguments { format: String },
    /// `%d` of a value with a fraction (`found`, as the script prints it).
    #[error("print: %d needs an integer, got {found}")]
    NotAnInteger { found: String },
}

/// An I/O failure as a value that can be cloned and compared: its kind, and the system's
/// description of it (what `std::io::Error` prints).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{detail}")]
pub struct IoFailure {
    pub kind: ErrorKind,
    pub detail: String,
}

impl From<&std::io::Error> for IoFailure {
    fn from(e: &std::io::Error) -> Self {
        IoFailure {
            kind: e.kind(),
            detail: e.to_string(),
        }
    }
}

impl From<std::io::Error> for IoFailure {
    fn from(e: std::io::Error) -> Self {
        IoFailure::from(&e)
    }
}

/// What went wrong with a file ([`RuntimeError::File`]); each message starts with the path.
/// Line numbers are 1-based.
#[derive(Debug, Clone, PartialEq)]
pub enum FileError {
    /// The file does not exist.
    NotFound,
    /// Reading or writing failed.
    Io(IoFailure),
    /// Writing a scalar's text failed.
    Write(IoFailure),
    /// The `.mtd` sidecar (the path) is not valid metadata JSON; `detail` is the parser's.
    Metadata { detail: String },
    /// The `.mtd` sidecar gives another shape than the file holds.
    MetadataShape { metadata: Shape, file: Shape },
    /// `read(path, rows=, cols=)` given a `dim` the file does not have.
    GivenDimension {
        dim: &'static str,
        given: i64,
        actual: usize,
    },
    /// A text-cell or MatrixMarket entry line without its row or column index.
    MissingIndex { line: usize, axis: Axis },
    /// A text-cell or MatrixMarket entry line whose index is not a 1-based integer.
    BadIndex {
        line: usize,
        axis: Axis,
        token: String,
    },
    /// A text-cell or MatrixMarket entry line without its value.
    MissingValue { line: usize },
    /// A field (1-based `column`) that is not a number.
    BadNumber {
        line: usize,
        column: usize,
        token: String,
    },
    /// A CSV line with another number of fields than the first.
    RaggedRow {
        line: usize,
        expected: usize,
        found: usize,
    },
    /// A MatrixMarket file whose first line is not its banner.
    NotMatrixMarket { banner: String },
    /// A MatrixMarket file that ends before its size line.
    MissingSizeLine,
    /// A MatrixMarket size line that is not all integers.
    BadSizeLine { line: usize, text: String },
    /// A MatrixMarket size line with the wrong number of fields (`expected` names them).
    SizeLineFields {
        line: usize,
        expected: &'static str,
        text: String,
    },
    /// A MatrixMarket coordinate file with another number of entries than it announces.
    EntryCount { announced: usize, found: usize },
    /// A MatrixMarket array value that is not a number.
    BadArrayValue { line: usize, token: String },
    /// A MatrixMarket array with another number of values than its shape needs.
    ArrayValueCount { shape: Shape, found: usize },
    /// The entries do not make a matrix of the file's shape (a cell outside it, dimensions
    /// beyond the limit): the error the matrix constructor gave.
    Content { error: Box<RuntimeError> },
    /// A binary matrix file that is damaged or not one.
    Corrupt(Corruption),
}

/// A file error's message: the path, then what went wrong.
struct FileMessage<'a>(&'a Path, &'a FileError);

impl fmt::Display for FileMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0.display();
        match self.1 {
            FileError::NotFound => write!(f, "{p}: no such file"),
            FileError::Io(e) => write!(f, "{p}: {e}"),
            FileError::Write(e) => write!(f, "{p}: cannot write: {e}"),
            FileError::Metadata { detail } => write!(f, "{p}: invalid metadata: {detail}"),
            FileError::MetadataShape { metadata, file } => write!(
                f,
                "{p}: metadata says {} but the file holds a {} matrix",
                dims(metadata),
                dims(file)
            ),
            FileError::GivenDimension { dim, given, actual } => write!(
                f,
                "read('{p}'): {dim}={given} was given, but the file has {actual}"
            ),
            FileError::MissingIndex { line, axis } => {
                write!(f, "{p}:{line}: missing {} index", axis.singular())
            }
            FileError::BadIndex { line, axis, token } => write!(
                f,
                "{p}:{line}: cannot parse '{token}' as a 1-based {} index",
                axis.singular()
            ),
            FileError::MissingValue { line } => write!(f, "{p}:{line}: missing value"),
            FileError::BadNumber {
                line,
                column,
                token,
            } => write!(
                f,
                "{p}:{line}: column {column}: cannot parse '{token}' as a number"
            ),
            FileError::RaggedRow {
                line,
                expected,
                found,
            } => write!(f, "{p}:{line}: expected {expected} columns, found {found}"),
            FileError::NotMatrixMarket { banner } => {
                write!(f, "{p}: 1: not a MatrixMarket matrix header: '{banner}'")
            }
            FileError::MissingSizeLine => write!(f, "{p}: missing size line"),
            FileError::BadSizeLine { line, text } => {
                write!(f, "{p}: {line}: cannot parse the size line '{text}'")
            }
            FileError::SizeLineFields {
                line,
                expected,
                text,
            } => write!(f, "{p}: {line}: expected '{expected}', got '{text}'"),
            FileError::EntryCount { announced, found } => write!(
                f,
                "{p}: the size line announces {announced} entries, found {found}"
            ),
            FileError::BadArrayValue { line, token } => {
                write!(f, "{p}: {line}: cannot parse '{token}' as a number")
            }
            FileError::ArrayValueCount { shape, found } => write!(
                f,
                "{p}: a {} array needs {} values, found {found}",
                dims(shape),
                cells(shape)
            ),
            FileError::Content { error } => write!(f, "{p}: {error}"),
            FileError::Corrupt(defect) => write!(f, "{p}: corrupt binary matrix file: {defect}"),
        }
    }
}

/// How a binary matrix file is damaged ([`FileError::Corrupt`]).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Corruption {
    #[error("bad magic bytes")]
    BadMagic,
    #[error("no checksum")]
    NoChecksum,
    #[error("checksum mismatch (the file is damaged)")]
    ChecksumMismatch,
    #[error("dimensions too large")]
    DimensionsTooLarge,
    #[error("length does not match the dimensions")]
    LengthMismatch,
    #[error("recorded nnz does not match the values")]
    NnzMismatch,
    #[error("unknown format flag")]
    UnknownFormatFlag,
    /// Arrays that do not make a valid matrix: the matrix constructor's error.
    #[error("{error}")]
    Content { error: Box<RuntimeError> },
}

/// A valid request the runtime does not implement ([`RuntimeError::Unsupported`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// A `rand` distribution that is valid DML but not implemented (`poisson`).
    #[error("rand pdf '{name}'")]
    RandPdf { name: &'static str },
    /// A `print` conversion other than `%s %d %f %e %% %n`.
    #[error("print format conversion '%{conversion}'")]
    PrintConversion { conversion: char },
    /// A file format named in a `.mtd` sidecar that lafuse does not read.
    #[error("file format '{name}' (in {})", .metadata.display())]
    FileFormat { name: String, metadata: PathBuf },
    /// A MatrixMarket variant lafuse does not read: `value` of `feature`.
    #[error("MatrixMarket {} '{value}' in {}", .feature.describe(), .path.display())]
    MatrixMarket {
        feature: MatrixMarketFeature,
        value: String,
        path: PathBuf,
    },
    /// A binary matrix file of a format version lafuse does not read.
    #[error("binary matrix format version {version} in {}", .path.display())]
    BinaryVersion { version: u32, path: PathBuf },
    /// A built-in function of DML that lafuse does not compute yet.
    #[error("the built-in function {function}()")]
    Function { function: &'static str },
    /// A transform of `transformencode`'s spec other than recode and dummycode.
    #[error("the transform '{name}' (lafuse encodes frames with recode and dummycode)")]
    Transform { name: String },
}

/// The part of a MatrixMarket banner lafuse does not support ([`Unsupported::MatrixMarket`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixMarketFeature {
    Field,
    Symmetry,
    /// A symmetry of an `array` (only `general` arrays are read).
    ArraySymmetry,
    Layout,
}

impl MatrixMarketFeature {
    fn describe(self) -> &'static str {
        match self {
            MatrixMarketFeature::Field => "field",
            MatrixMarketFeature::Symmetry => "symmetry",
            MatrixMarketFeature::ArraySymmetry => "array with symmetry",
            MatrixMarketFeature::Layout => "layout",
        }
    }
}

/// A machine limit a request ran into ([`RuntimeError::Resource`]). Errors that carry one
/// (a skeleton's, a backend's) print it without the `resources:` prefix.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Resource {
    /// An output of `cells` cells the allocator cannot give.
    #[error(
        "cannot allocate a result of {cells} cells ({:.1} GB): more memory than this machine can \
         give; use smaller inputs, or a sparser formulation",
        gigabytes(.cells)
    )]
    Allocation { cells: usize },
    /// The row pointers of a sparse matrix of this shape.
    #[error(
        "a {} sparse matrix needs more memory than is available for its {} row pointers",
        dims(.shape),
        .shape.0 as u128 + 1
    )]
    RowPointers { shape: Shape },
    /// A shape whose cell count overflows the address space.
    #[error("a {} matrix has too many cells", dims(.shape))]
    CellCount { shape: Shape },
    /// `rand` of a shape whose cell count overflows the address space.
    #[error("rand: {} cells overflow", dims(.shape))]
    RandCells { shape: Shape },
    /// `rand`'s output of `cells` cells the allocator cannot give.
    #[error("rand: cannot allocate {cells} cells ({} bytes)", .cells.saturating_mul(8))]
    RandAllocation { cells: usize },
    /// `rand`'s per-block seeds the allocator cannot give.
    #[error("rand: too many blocks ({blocks})")]
    RandSeeds { blocks: usize },
    /// The row buffers of a fused operator's input of `cols` columns.
    #[error("the row buffers of a {cols}-column input overflow the address space")]
    RowBuffers { cols: usize },
    /// `print` could not write to its output.
    #[error("cannot write output: {0}")]
    Output(IoFailure),
    /// A buffer of `bytes` bytes the allocator cannot give.
    #[error(
        "cannot allocate {:.2} GB: more memory than this process can have",
        *.bytes as f64 / 1e9
    )]
    Bytes { bytes: usize },
    /// An allocation refused before it was tried: more than the memory budget has left
    /// (the smaller of physical memory and the process's cgroup limit, see
    /// [`crate::memory`]).
    #[error("{refused} ({budget})")]
    OverBudget {
        refused: Box<Resource>,
        budget: crate::memory::OverBudget,
    },
    /// A fused operator (`opcode`) ran out of memory: its backend's error.
    #[error("{opcode}: {source}")]
    Operator {
        opcode: String,
        source: OperatorFailure,
    },
}

/// A bug in lafuse ([`RuntimeError::Internal`]). `lafuse::Error::render` prints it under a
/// headline that says "internal error" itself.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Internal {
    /// An instruction's register beyond the block's registers.
    #[error("register {register} out of range")]
    RegisterOutOfRange { register: u32 },
    /// An instruction with fewer inputs than its operation reads.
    #[error("{opcode} lacks input {input}")]
    MissingInput { opcode: String, input: usize },
    /// An instruction reading a register nothing wrote, or that was released.
    #[error("{opcode} reads empty register {register}")]
    EmptyRegister { opcode: String, register: u32 },
    /// A fused operator that returned another number of results than it has outputs.
    #[error("{opcode} returned {results} results for {outputs} outputs")]
    ResultCount {
        opcode: String,
        results: usize,
        outputs: usize,
    },
    /// Metadata that could not be written as JSON; `detail` is the serialiser's.
    #[error("serialising metadata: {detail}")]
    MetadataSerialisation { detail: String },
    /// A dense matrix whose value count is not its cell count.
    #[error("dense {} matrix holds {values} values", dims(.shape))]
    DenseLength { shape: Shape, values: usize },
    /// A dense matrix whose recorded non-zero count is wrong.
    #[error(
        "dense {} matrix records nnz {recorded} but holds {actual} non-zeros",
        dims(.shape)
    )]
    DenseNnz {
        shape: Shape,
        recorded: usize,
        actual: usize,
    },
    /// A sparse matrix storing a zero.
    #[error("sparse {} matrix stores an explicit zero", dims(.shape))]
    ExplicitZero { shape: Shape },
    /// A sparse matrix of ours whose CSR arrays are broken.
    #[error("invalid CSR {} matrix: {defect}", dims(.shape))]
    InvalidCsr { shape: Shape, defect: CsrDefect },
    /// A compiled expression (`expression` names its role, e.g. `for-loop start`) that left no
    /// value.
    #[error("the {expression} produced no value")]
    NoValue { expression: String },
    /// An instruction whose lineage patch names an input it does not have, or that lacks the
    /// patch while lineage is traced (a lowering defect).
    #[error("{opcode}: no lineage for its output")]
    LineagePatch { opcode: String },
    /// A partial-reuse compensation handed parts that do not fit the output (a rewrite
    /// defect: the rules check shapes before they compensate).
    #[error("partial reuse: {detail}")]
    Compensation { detail: &'static str },
    /// A thread running part of a script (a `parfor` worker) ended without a result.
    #[error("parallel worker: {detail}")]
    Worker { detail: &'static str },
    /// A block's fused operators that depend on each other in a cycle.
    #[error("the fused operators of a block depend on each other in a cycle")]
    OperatorCycle,
    /// A thread measuring for `command` (`calibrate`) panicked.
    #[error("{command}: a measuring thread panicked")]
    MeasuringThreadPanicked { command: &'static str },
    /// A fused operator (`opcode`) failed: its backend's error.
    #[error("{opcode}: {source}")]
    Operator {
        opcode: String,
        source: OperatorFailure,
    },
}

/// A fused operator's own error, of a type the runtime cannot name (the backend's, in a
/// crate above this one), kept as a value so that its type and source chain survive. Two are
/// equal when they are the same error or print the same.
#[derive(Clone, Debug)]
pub struct OperatorFailure(pub Arc<dyn std::error::Error + Send + Sync>);

impl OperatorFailure {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        OperatorFailure(Arc::new(e))
    }
}

impl fmt::Display for OperatorFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for OperatorFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for OperatorFailure {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The class prefixes other crates strip (a skeleton's and a backend's resource errors,
    /// the engine's internal-error headline) are the outer variant's, not the cause's.
    #[test]
    fn class_prefixes_belong_to_the_outer_variant() {
        let cause = Resource::CellCount { shape: (3, 4) };
        assert_eq!(cause.to_string(), "a 3x4 matrix has too many cells");
        let e = RuntimeError::Resource(cause);
        assert_eq!(e.to_string(), "resources: a 3x4 matrix has too many cells");
        assert_eq!(e.fault(), Fault::Resource);
        let e = RuntimeError::Internal(Internal::OperatorCycle);
        assert!(e.to_string().starts_with("internal error (a bug in lafuse"));
        assert_eq!(e.fault(), Fault::Internal);
        let e = RuntimeError::file("x.csv", FileError::NotFound);
        assert_eq!(e.to_string(), "x.csv: no such file");
        assert_eq!(e.fault(), Fault::User);
    }
}
