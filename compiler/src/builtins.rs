//! The catalog of DML built-in functions of the subset, and argument binding.
//!
//! Each [`Builtin`] has a [`Signature`]: its parameters with SystemDS's names and defaults, the
//! kinds of data each parameter accepts, how arguments may be passed (positional, named, or
//! both; SystemDS differs per function family), and the kind of its result. [`bind_args`] maps
//! the arguments of a call onto the parameters, so later passes read arguments by name instead
//! of re-implementing the positional/named rules; [`bind_udf_args`] does the same for
//! user-defined functions.
//!
//! The rules follow Apache SystemDS 3.4 (checked against its parser and by running scripts):
//! ordinary built-ins (`sum`, `abs`, `cbind`, ...) take positional arguments only (SystemDS
//! reports `sum(target=X)` as an undefined function); `rand` takes named arguments only;
//! `matrix` takes either all-positional arguments or a positional `data` followed by named ones;
//! `read` and `toString` take their first argument positionally and the rest by name;
//! `replace`, `removeEmpty`, `order`, `aggregate`, `lower.tri` and `upper.tri` take named
//! arguments only.

use crate::ast::{self, Expr, ExprKind};
use crate::error::{Bound, CallProblem, Callee, CompileError, Note, Result};
use crate::hops::{BinaryOp, UnaryOp};
use crate::span::Span;
use lafuse_core::{DnnOp, StatOp};

/// One built-in function of the DML subset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Builtin {
    Matrix,
    Rand,
    Seq,
    Diag,
    Cbind,
    Rbind,
    T,
    Solve,
    /// An element-wise function of one argument, named as the operator (`abs`, `exp`, `round`,
    /// `sigmoid`, ...): every [`UnaryOp`] but `-x` and `!x`, which are operators of the syntax.
    Unary(UnaryOp),
    /// An element-wise function of two arguments named as the operator: `xor` and the bit
    /// operations `bitwAnd`, `bitwOr`, `bitwXor`, `bitwShiftL`, `bitwShiftR`.
    Binary(BinaryOp),
    /// `ppred(X, Y, "op")`: the comparison `op` (a string literal) element-wise.
    Ppred,
    /// `log(x)` (natural) or `log(x, base)`.
    Log,
    /// One argument: aggregate over a matrix; two or more: element-wise / scalar minimum.
    Min,
    /// One argument: aggregate over a matrix; two or more: element-wise / scalar maximum.
    Max,
    Pmin,
    Pmax,
    Sum,
    Mean,
    Prod,
    Var,
    Sd,
    RowSums,
    ColSums,
    RowMeans,
    ColMeans,
    RowMaxs,
    RowMins,
    ColMaxs,
    ColMins,
    RowVars,
    ColVars,
    /// `rowSds(X)`, `colSds(X)`: `sqrt` of `rowVars`/`colVars`.
    RowSds,
    ColSds,
    /// `quantile(X, p)` or `quantile(X, W, p)`.
    Quantile,
    /// `median(X)` or `median(X, W)`.
    Median,
    /// `interQuartileMean(X)` or `interQuartileMean(X, W)`.
    InterQuartileMean,
    /// `moment(X, k)` or `moment(X, W, k)`.
    Moment,
    /// `cov(X, Y)` or `cov(X, Y, W)`.
    Cov,
    /// `cdf(target=x, dist=...)` and `icdf(target=p, dist=...)`: a distribution function named
    /// by a string literal (`normal`, `exp`, `chisq`, `f`, `t`) with its parameters.
    Cdf,
    Icdf,
    /// The distribution functions by name: `pnorm`, `qnorm`, `pexp`, `qexp`, `pchisq`,
    /// `qchisq`, `pf`, `qf`, `pt`, `qt`.
    Distribution(StatOp),
    /// SystemDS's deep-learning built-ins: `conv2d`, `conv2d_backward_filter`,
    /// `conv2d_backward_data`, `max_pool`, `max_pool_backward`, `avg_pool`,
    /// `avg_pool_backward`, `bias_add`, `bias_multiply`. Their list arguments
    /// (`stride=[sh, sw]`) reach binding as one argument per element (`stride1=sh`, `stride2=sw`):
    /// the parser expands them, as SystemDS's `expandDnnArguments`.
    Dnn(DnnOp),
    Inv,
    Cholesky,
    Det,
    /// `trace(A)`: the sum of a square matrix's diagonal.
    Trace,
    /// `sqrtMatrixJava(A)`: the square root of a symmetric positive semi-definite matrix.
    SqrtMatrix,
    /// `[values, vectors] = eigen(A)`.
    Eigen,
    /// `[U, S, V] = svd(A)`.
    Svd,
    /// `[P, L, U] = lu(A)`.
    Lu,
    /// `[H, R] = qr(A)`.
    Qr,
    Cumsum,
    Cumprod,
    Cummin,
    Cummax,
    Cumsumprod,
    Rev,
    /// `table(A, B)`, `table(A, B, W)`, `table(A, B, odim1, odim2)`,
    /// `table(A, B, W, odim1, odim2)`: the contingency table.
    Table,
    RemoveEmpty,
    Order,
    RowIndexMax,
    RowIndexMin,
    Outer,
    /// `unique(X)`, `unique(X, dir="r")`.
    Unique,
    /// `aggregate(target=X, groups=G, fn="sum", ngroups=k, weights=W)`: grouped aggregate.
    Aggregate,
    /// `sample(range, size[, replace][, seed])`.
    Sample,
    LowerTri,
    UpperTri,
    Ifelse,
    Replace,
    /// `contains(target=X, pattern=v)`: whether a cell of X equals v (NaN matches NaN).
    Contains,
    /// `list(a, b, ...)` or `list(x=a, y=b, ...)`: a list of any values.
    List,
    /// `[L2, e] = remove(L, i)`: L without its `i`-th element, and that element in a list.
    Remove,
    /// `as.list(L)`: the nested list of a list holding one list, else L itself.
    AsList,
    Nrow,
    Ncol,
    Length,
    AsScalar,
    AsMatrix,
    AsDouble,
    AsInteger,
    AsLogical,
    /// `as.frame(X)`: a frame of a matrix's columns.
    AsFrame,
    /// `[X, M] = transformencode(target=F, spec=S)`: recode and dummy coding of a frame.
    TransformEncode,
    /// `transformapply(target=F, spec=S, meta=M)`: a frame encoded with earlier metadata.
    TransformApply,
    /// `transformdecode(target=X, spec=S, meta=M)`: the frame an encoded matrix came from.
    TransformDecode,
    /// `colnames(F)`: a frame's column names, as a one-row frame of strings.
    Colnames,
    ToString,
    Read,
    Write,
    /// `print(x)`, or `print(format, args...)` with `%d`/`%s`/`%f`-style placeholders.
    Print,
    Stop,
    /// `assert(cond)`: stops the script with "assertion failed" where `cond` is false.
    Assert,
    Time,
    /// `lineage(X)`: the lineage log of X (a string), with lineage tracing on.
    Lineage,
    /// `ifdef($name, default)`: the script argument if given, else the default.
    Ifdef,
}

/// Every built-in, in declaration order (for iteration and "did you mean" suggestions).
pub const ALL: &[Builtin] = &[
    Builtin::Matrix,
    Builtin::Rand,
    Builtin::Seq,
    Builtin::Diag,
    Builtin::Cbind,
    Builtin::Rbind,
    Builtin::T,
    Builtin::Solve,
    Builtin::Unary(UnaryOp::Abs),
    Builtin::Unary(UnaryOp::Exp),
    Builtin::Log,
    Builtin::Unary(UnaryOp::Sqrt),
    Builtin::Unary(UnaryOp::Round),
    Builtin::Unary(UnaryOp::Floor),
    Builtin::Unary(UnaryOp::Ceil),
    Builtin::Unary(UnaryOp::Sign),
    Builtin::Unary(UnaryOp::Sin),
    Builtin::Unary(UnaryOp::Cos),
    Builtin::Unary(UnaryOp::Tan),
    Builtin::Unary(UnaryOp::Asin),
    Builtin::Unary(UnaryOp::Acos),
    Builtin::Unary(UnaryOp::Atan),
    Builtin::Unary(UnaryOp::Sinh),
    Builtin::Unary(UnaryOp::Cosh),
    Builtin::Unary(UnaryOp::Tanh),
    Builtin::Unary(UnaryOp::Sigmoid),
    Builtin::Unary(UnaryOp::IsNaN),
    Builtin::Unary(UnaryOp::IsInf),
    Builtin::Binary(BinaryOp::Xor),
    Builtin::Binary(BinaryOp::BitwAnd),
    Builtin::Binary(BinaryOp::BitwOr),
    Builtin::Binary(BinaryOp::BitwXor),
    Builtin::Binary(BinaryOp::BitwShiftL),
    Builtin::Binary(BinaryOp::BitwShiftR),
    Builtin::Ppred,
    Builtin::Min,
    Builtin::Max,
    Builtin::Pmin,
    Builtin::Pmax,
    Builtin::Sum,
    Builtin::Mean,
    Builtin::Prod,
    Builtin::Var,
    Builtin::Sd,
    Builtin::RowSums,
    Builtin::ColSums,
    Builtin::RowMeans,
    Builtin::ColMeans,
    Builtin::RowMaxs,
    Builtin::RowMins,
    Builtin::ColMaxs,
    Builtin::ColMins,
    Builtin::RowVars,
    Builtin::ColVars,
    Builtin::RowSds,
    Builtin::ColSds,
    Builtin::Quantile,
    Builtin::Median,
    Builtin::InterQuartileMean,
    Builtin::Moment,
    Builtin::Cov,
    Builtin::Cdf,
    Builtin::Icdf,
    Builtin::Distribution(StatOp::NormalCdf),
    Builtin::Distribution(StatOp::NormalQuantile),
    Builtin::Distribution(StatOp::ExpCdf),
    Builtin::Distribution(StatOp::ExpQuantile),
    Builtin::Distribution(StatOp::ChisqCdf),
    Builtin::Distribution(StatOp::ChisqQuantile),
    Builtin::Distribution(StatOp::FCdf),
    Builtin::Distribution(StatOp::FQuantile),
    Builtin::Distribution(StatOp::TCdf),
    Builtin::Distribution(StatOp::TQuantile),
    Builtin::Dnn(DnnOp::Conv2d),
    Builtin::Dnn(DnnOp::Conv2dBackwardFilter),
    Builtin::Dnn(DnnOp::Conv2dBackwardData),
    Builtin::Dnn(DnnOp::MaxPool),
    Builtin::Dnn(DnnOp::MaxPoolBackward),
    Builtin::Dnn(DnnOp::AvgPool),
    Builtin::Dnn(DnnOp::AvgPoolBackward),
    Builtin::Dnn(DnnOp::BiasAdd),
    Builtin::Dnn(DnnOp::BiasMultiply),
    Builtin::Inv,
    Builtin::Cholesky,
    Builtin::Det,
    Builtin::Trace,
    Builtin::SqrtMatrix,
    Builtin::Eigen,
    Builtin::Svd,
    Builtin::Lu,
    Builtin::Qr,
    Builtin::Cumsum,
    Builtin::Cumprod,
    Builtin::Cummin,
    Builtin::Cummax,
    Builtin::Cumsumprod,
    Builtin::Rev,
    Builtin::Table,
    Builtin::RemoveEmpty,
    Builtin::Order,
    Builtin::RowIndexMax,
    Builtin::RowIndexMin,
    Builtin::Outer,
    Builtin::Unique,
    Builtin::Aggregate,
    Builtin::Sample,
    Builtin::LowerTri,
    Builtin::UpperTri,
    Builtin::Ifelse,
    Builtin::Replace,
    Builtin::Contains,
    Builtin::List,
    Builtin::Remove,
    Builtin::AsList,
    Builtin::Nrow,
    Builtin::Ncol,
    Builtin::Length,
    Builtin::AsScalar,
    Builtin::AsMatrix,
    Builtin::AsDouble,
    Builtin::AsInteger,
    Builtin::AsLogical,
    Builtin::AsFrame,
    Builtin::TransformEncode,
    Builtin::TransformApply,
    Builtin::TransformDecode,
    Builtin::Colnames,
    Builtin::ToString,
    Builtin::Read,
    Builtin::Write,
    Builtin::Print,
    Builtin::Stop,
    Builtin::Assert,
    Builtin::Time,
    Builtin::Lineage,
    Builtin::Ifdef,
];

/// A literal default value of a built-in parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Double(f64),
    Int(i64),
    Bool(bool),
    Str(&'static str),
}

impl Literal {
    /// The literal as an AST expression located at `span` (usually the call's span), so a
    /// default can be lowered exactly like an argument the user wrote.
    pub fn to_expr(self, span: Span) -> Expr {
        let kind = match self {
            Literal::Double(v) => ExprKind::Double(v),
            Literal::Int(v) => ExprKind::Int(v),
            Literal::Bool(v) => ExprKind::Bool(v),
            Literal::Str(s) => ExprKind::Str(s.to_string()),
        };
        Expr { kind, span }
    }
}

/// The data an argument must be, as far as it can be told before running the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// A matrix or a scalar.
    Any,
    /// A matrix (SystemDS rejects scalars statically, e.g. `nrow(3)`).
    Matrix,
    /// A scalar of any value type (e.g. `print`, `as.double`).
    Scalar,
    /// A string scalar (file names, formats).
    Str,
    /// A frame (`transformencode`'s target).
    Frame,
}

/// The kind of value a built-in returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResultKind {
    Matrix,
    Double,
    Int,
    Bool,
    Str,
    /// A matrix if any argument is a matrix, otherwise a scalar (element-wise functions,
    /// `min`/`max` with two or more arguments, `ifelse`).
    ElementWise,
    /// A scalar double when the single argument is a matrix (`min(X)`); element-wise otherwise.
    AggregateOrElementWise,
    /// Not known statically (`ifdef` returns whatever the script argument is).
    Unknown,
    /// A list (`list(...)`).
    List,
    /// A frame (`as.frame(X)`).
    Frame,
    /// No value: the call is a statement (`print`, `stop`, `write`).
    Nothing,
    /// This many matrices, bound only by a multi-assignment (`[U, S, V] = svd(A)`).
    Several(usize),
}

/// How arguments may be passed to a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgStyle {
    /// Positional arguments only (ordinary SystemDS built-ins).
    PositionalOnly,
    /// Named arguments only (`rand`, `replace`).
    NamedOnly,
    /// Positional arguments first, then named ones, in any mix (user-defined functions, `write`).
    Mixed,
    /// Only the first argument may be positional; the rest must be named (`read`, `toString`).
    FirstPositional,
    /// Either all positional, or only the first positional and the rest named (`matrix`).
    AllPositionalOrFirstPositional,
    /// Either all positional or all named, any names (`list`: the names name the elements).
    AllPositionalOrAllNamed,
}

/// One parameter of a built-in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamSpec {
    /// SystemDS's parameter name.
    pub name: &'static str,
    /// `None` for a required parameter unless `optional` is set.
    pub default: Option<Literal>,
    /// A parameter without a default that may be left out (e.g. `read`'s `rows`): binding
    /// reports it as [`BoundValue::Absent`].
    pub optional: bool,
    pub kind: ArgKind,
}

const fn req(name: &'static str, kind: ArgKind) -> ParamSpec {
    ParamSpec {
        name,
        default: None,
        optional: false,
        kind,
    }
}
const fn opt(name: &'static str, kind: ArgKind, default: Literal) -> ParamSpec {
    ParamSpec {
        name,
        default: Some(default),
        optional: true,
        kind,
    }
}
const fn absent(name: &'static str, kind: ArgKind) -> ParamSpec {
    ParamSpec {
        name,
        default: None,
        optional: true,
        kind,
    }
}

/// The signature of a built-in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Signature {
    /// Fixed parameters, in positional order. For a variadic function, the single parameter
    /// describes every argument.
    pub params: &'static [ParamSpec],
    /// Takes any number (at least `min_args`) of positional arguments, all of `params[0]`'s kind.
    pub variadic: bool,
    /// Fewest arguments the call must have.
    pub min_args: usize,
    /// Most arguments, `None` when unbounded.
    pub max_args: Option<usize>,
    pub style: ArgStyle,
    pub result: ResultKind,
}

use ArgKind::{Any, Matrix as Mat, Scalar as Sca, Str};

const UNARY_ANY: &[ParamSpec] = &[req("x", Any)];
const UNARY_MAT: &[ParamSpec] = &[req("x", Mat)];
const UNARY_SCA: &[ParamSpec] = &[req("x", Sca)];
const BINARY_ANY: &[ParamSpec] = &[req("x", Any), req("y", Any)];
const PPRED_PARAMS: &[ParamSpec] = &[req("x", Any), req("y", Any), req("op", Str)];
const VARIADIC_ANY: &[ParamSpec] = &[req("x", Any)];
const VARIADIC_MAT: &[ParamSpec] = &[req("x", Mat)];

const MATRIX_PARAMS: &[ParamSpec] = &[
    req("data", Any),
    req("rows", Sca),
    req("cols", Sca),
    opt("byrow", Sca, Literal::Bool(true)),
];
const RAND_PARAMS: &[ParamSpec] = &[
    opt("rows", Sca, Literal::Int(1)),
    opt("cols", Sca, Literal::Int(1)),
    opt("min", Sca, Literal::Double(0.0)),
    opt("max", Sca, Literal::Double(1.0)),
    opt("sparsity", Sca, Literal::Double(1.0)),
    opt("seed", Sca, Literal::Int(-1)),
    opt("pdf", Str, Literal::Str("uniform")),
    opt("lambda", Sca, Literal::Double(1.0)),
];
const SEQ_PARAMS: &[ParamSpec] = &[req("from", Sca), req("to", Sca), absent("incr", Sca)];
const SOLVE_PARAMS: &[ParamSpec] = &[req("A", Mat), req("b", Mat)];
const LOG_PARAMS: &[ParamSpec] = &[req("x", Any), absent("base", Sca)];
const ROUND_PARAMS: &[ParamSpec] = &[req("x", Any)];
const IFELSE_PARAMS: &[ParamSpec] = &[req("test", Any), req("yes", Any), req("no", Any)];
const REPLACE_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    req("pattern", Sca),
    req("replacement", Sca),
];
// SystemDS's table takes 2 to 6 positional arguments; with 4 the last two are the output
// dimensions (`table(A, B, odim1, odim2)`), which HOP construction sorts out. The sixth,
// `outputEmptyBlocks`, only steers how SystemDS stores an empty result: the values are the
// same either way, so it is bound and not used.
const TABLE_PARAMS: &[ParamSpec] = &[
    req("A", Any),
    req("B", Any),
    absent("W", Any),
    absent("odim1", Sca),
    absent("odim2", Sca),
    absent("outputEmptyBlocks", Sca),
];
const REMOVE_EMPTY_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    req("margin", Str),
    absent("select", Mat),
    opt("empty.return", Sca, Literal::Bool(true)),
];
const ORDER_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    // A column, or a vector of columns to sort by in turn.
    opt("by", Any, Literal::Int(1)),
    opt("decreasing", Sca, Literal::Bool(false)),
    opt("index.return", Sca, Literal::Bool(false)),
];
const OUTER_PARAMS: &[ParamSpec] = &[req("X", Mat), req("Y", Mat), req("op", Str)];
const UNIQUE_PARAMS: &[ParamSpec] = &[req("x", Mat), opt("dir", Str, Literal::Str("rc"))];
const AGGREGATE_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    req("groups", Mat),
    req("fn", Str),
    opt("ngroups", Sca, Literal::Int(-1)),
    opt("order", Sca, Literal::Int(-1)),
    absent("weights", Mat),
];
// With three arguments the third is `replace` if it is a boolean and the seed if an integer
// (SystemDS's DMLTranslator); HOP construction sorts that out.
const SAMPLE_PARAMS: &[ParamSpec] = &[
    req("range", Sca),
    req("size", Sca),
    absent("replace", Sca),
    absent("seed", Sca),
];
const TRI_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    opt("diag", Sca, Literal::Bool(false)),
    opt("values", Sca, Literal::Bool(false)),
];
const TOSTRING_PARAMS: &[ParamSpec] = &[
    req("target", Any),
    opt("rows", Sca, Literal::Int(100)),
    opt("cols", Sca, Literal::Int(100)),
    opt("decimal", Sca, Literal::Int(3)),
    opt("sparse", Sca, Literal::Bool(false)),
    opt("sep", Str, Literal::Str(" ")),
    opt("linesep", Str, Literal::Str("\n")),
];
const READ_PARAMS: &[ParamSpec] = &[
    req("file", Str),
    absent("format", Str),
    absent("header", Sca),
    absent("sep", Str),
    absent("rows", Sca),
    absent("cols", Sca),
    absent("nnz", Sca),
    absent("data_type", Str),
    absent("value_type", Str),
];
const WRITE_PARAMS: &[ParamSpec] = &[
    req("x", Any),
    req("file", Str),
    opt("format", Str, Literal::Str("text")),
    opt("header", Sca, Literal::Bool(false)),
    opt("sep", Str, Literal::Str(",")),
    opt("sparse", Sca, Literal::Bool(false)),
];
// SystemDS prints matrices too (as toString would).
const PRINT_PARAMS: &[ParamSpec] = &[req("x", Any)];
const STOP_PARAMS: &[ParamSpec] = &[req("msg", Sca)];
const ASSERT_PARAMS: &[ParamSpec] = &[req("cond", Sca)];
const MEAN_PARAMS: &[ParamSpec] = &[req("x", Mat), absent("w", Mat)];
const CONTAINS_PARAMS: &[ParamSpec] = &[req("target", Mat), req("pattern", Sca)];
const REMOVE_PARAMS: &[ParamSpec] = &[req("x", Any), req("pos", Sca)];
const TRANSFORMENCODE_PARAMS: &[ParamSpec] = &[req("target", ArgKind::Frame), req("spec", Str)];
const TRANSFORMDECODE_PARAMS: &[ParamSpec] = &[
    req("target", Mat),
    req("spec", Str),
    req("meta", ArgKind::Frame),
];
const TRANSFORMAPPLY_PARAMS: &[ParamSpec] = &[
    req("target", ArgKind::Frame),
    req("spec", Str),
    req("meta", ArgKind::Frame),
];
// The deep-learning built-ins: their matrices by position, then the elements of their list
// arguments under SystemDS's expanded names (`stride=[a, b]` is `stride1=a, stride2=b`), all
// required, as SystemDS's `orderDnnParams` requires them. The filter's channel count
// (`filter_shape2`) is the input's (SystemDS reads `input_shape2`); it is bound and not used.
macro_rules! dnn_params {
    ($($matrix:literal),*; $($shape:literal),*) => {
        &[
            $(req($matrix, Mat),)*
            req("stride1", Sca), req("stride2", Sca),
            req("padding1", Sca), req("padding2", Sca),
            req("input_shape1", Sca), req("input_shape2", Sca),
            req("input_shape3", Sca), req("input_shape4", Sca),
            $(req($shape, Sca),)*
        ]
    };
}
const CONV2D_PARAMS: &[ParamSpec] = dnn_params!("input", "filter";
    "filter_shape1", "filter_shape2", "filter_shape3", "filter_shape4");
const CONV2D_BACKWARD_FILTER_PARAMS: &[ParamSpec] = dnn_params!("input", "dout";
    "filter_shape1", "filter_shape2", "filter_shape3", "filter_shape4");
const CONV2D_BACKWARD_DATA_PARAMS: &[ParamSpec] = dnn_params!("filter", "dout";
    "filter_shape1", "filter_shape2", "filter_shape3", "filter_shape4");
const POOL_PARAMS: &[ParamSpec] = dnn_params!("input"; "pool_size1", "pool_size2");
const POOL_BACKWARD_PARAMS: &[ParamSpec] = dnn_params!("input", "dout"; "pool_size1", "pool_size2");
const BIAS_PARAMS: &[ParamSpec] = &[req("input", Mat), req("bias", Mat)];
// The distribution functions (SystemDS's defaults: mean 0, sd 1, rate 1, the lower tail). `cdf`
// and `icdf` take every distribution's parameters; their construction checks which apply.
const CDF_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    req("dist", Str),
    opt("mean", Sca, Literal::Double(0.0)),
    opt("sd", Sca, Literal::Double(1.0)),
    opt("rate", Sca, Literal::Double(1.0)),
    absent("df", Sca),
    absent("df1", Sca),
    absent("df2", Sca),
    opt("lower.tail", Sca, Literal::Bool(true)),
];
const ICDF_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    req("dist", Str),
    opt("mean", Sca, Literal::Double(0.0)),
    opt("sd", Sca, Literal::Double(1.0)),
    opt("rate", Sca, Literal::Double(1.0)),
    absent("df", Sca),
    absent("df1", Sca),
    absent("df2", Sca),
];
const PNORM_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    opt("mean", Sca, Literal::Double(0.0)),
    opt("sd", Sca, Literal::Double(1.0)),
    opt("lower.tail", Sca, Literal::Bool(true)),
];
const QNORM_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    opt("mean", Sca, Literal::Double(0.0)),
    opt("sd", Sca, Literal::Double(1.0)),
];
const PEXP_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    opt("rate", Sca, Literal::Double(1.0)),
    opt("lower.tail", Sca, Literal::Bool(true)),
];
const QEXP_PARAMS: &[ParamSpec] = &[req("target", Sca), opt("rate", Sca, Literal::Double(1.0))];
const PDF1_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    req("df", Sca),
    opt("lower.tail", Sca, Literal::Bool(true)),
];
const QDF1_PARAMS: &[ParamSpec] = &[req("target", Sca), req("df", Sca)];
const PF_PARAMS: &[ParamSpec] = &[
    req("target", Sca),
    req("df1", Sca),
    req("df2", Sca),
    opt("lower.tail", Sca, Literal::Bool(true)),
];
const QF_PARAMS: &[ParamSpec] = &[req("target", Sca), req("df1", Sca), req("df2", Sca)];
const IFDEF_PARAMS: &[ParamSpec] = &[req("name", Any), req("default", Any)];

const fn fixed(
    params: &'static [ParamSpec],
    min: usize,
    style: ArgStyle,
    result: ResultKind,
) -> Signature {
    Signature {
        params,
        variadic: false,
        min_args: min,
        max_args: Some(params.len()),
        style,
        result,
    }
}
const fn positional(params: &'static [ParamSpec], result: ResultKind) -> Signature {
    fixed(params, params.len(), ArgStyle::PositionalOnly, result)
}
/// Between `min` and `max` positional arguments of any kind, bound in order (the meaning of
/// each position depends on how many there are: `quantile(X, p)`, `quantile(X, W, p)`).
const fn ranged(min: usize, max: usize, result: ResultKind) -> Signature {
    Signature {
        params: VARIADIC_ANY,
        variadic: true,
        min_args: min,
        max_args: Some(max),
        style: ArgStyle::PositionalOnly,
        result,
    }
}
const fn variadic(params: &'static [ParamSpec], min: usize, result: ResultKind) -> Signature {
    Signature {
        params,
        variadic: true,
        min_args: min,
        max_args: None,
        style: ArgStyle::PositionalOnly,
        result,
    }
}

impl Builtin {
    /// The function's name as written in DML.
    pub fn name(self) -> &'static str {
        use Builtin::*;
        match self {
            Matrix => "matrix",
            Rand => "rand",
            Seq => "seq",
            Diag => "diag",
            Cbind => "cbind",
            Rbind => "rbind",
            T => "t",
            Solve => "solve",
            Unary(op) => op.name(),
            Binary(op) => op.name(),
            Ppred => "ppred",
            Log => "log",
            Min => "min",
            Max => "max",
            Pmin => "pmin",
            Pmax => "pmax",
            Sum => "sum",
            Mean => "mean",
            Prod => "prod",
            Var => "var",
            Sd => "sd",
            RowSums => "rowSums",
            ColSums => "colSums",
            RowMeans => "rowMeans",
            ColMeans => "colMeans",
            RowMaxs => "rowMaxs",
            RowMins => "rowMins",
            ColMaxs => "colMaxs",
            ColMins => "colMins",
            RowVars => "rowVars",
            ColVars => "colVars",
            RowSds => "rowSds",
            ColSds => "colSds",
            Quantile => "quantile",
            Median => "median",
            InterQuartileMean => "interQuartileMean",
            Moment => "moment",
            Cdf => "cdf",
            Icdf => "icdf",
            Distribution(op) => op.name(),
            Dnn(op) => op.name(),
            Cov => "cov",
            Inv => "inv",
            Cholesky => "cholesky",
            Det => "det",
            Trace => "trace",
            SqrtMatrix => "sqrtMatrixJava",
            Eigen => "eigen",
            Svd => "svd",
            Lu => "lu",
            Qr => "qr",
            Cumsum => "cumsum",
            Cumprod => "cumprod",
            Cummin => "cummin",
            Cummax => "cummax",
            Cumsumprod => "cumsumprod",
            Rev => "rev",
            Table => "table",
            RemoveEmpty => "removeEmpty",
            Order => "order",
            RowIndexMax => "rowIndexMax",
            RowIndexMin => "rowIndexMin",
            Outer => "outer",
            Unique => "unique",
            Aggregate => "aggregate",
            Sample => "sample",
            LowerTri => "lower.tri",
            UpperTri => "upper.tri",
            Ifelse => "ifelse",
            Replace => "replace",
            Contains => "contains",
            List => "list",
            Remove => "remove",
            AsList => "as.list",
            Nrow => "nrow",
            Ncol => "ncol",
            Length => "length",
            AsScalar => "as.scalar",
            AsMatrix => "as.matrix",
            AsDouble => "as.double",
            AsInteger => "as.integer",
            AsLogical => "as.logical",
            AsFrame => "as.frame",
            TransformEncode => "transformencode",
            TransformApply => "transformapply",
            TransformDecode => "transformdecode",
            Colnames => "colnames",
            ToString => "toString",
            Read => "read",
            Write => "write",
            Print => "print",
            Stop => "stop",
            Assert => "assert",
            Time => "time",
            Lineage => "lineage",
            Ifdef => "ifdef",
        }
    }

    /// The function's signature.
    pub fn signature(self) -> Signature {
        use Builtin::*;
        use ResultKind as R;
        match self {
            Matrix => fixed(
                MATRIX_PARAMS,
                3,
                ArgStyle::AllPositionalOrFirstPositional,
                R::Matrix,
            ),
            Rand => fixed(RAND_PARAMS, 0, ArgStyle::NamedOnly, R::Matrix),
            Seq => fixed(SEQ_PARAMS, 2, ArgStyle::PositionalOnly, R::Matrix),
            Diag | T | Cumsum | Cumprod | Cummin | Cummax | Cumsumprod | Rev | RowIndexMax
            | RowIndexMin => positional(UNARY_MAT, R::Matrix),
            Table => fixed(TABLE_PARAMS, 2, ArgStyle::PositionalOnly, R::Matrix),
            RemoveEmpty => fixed(REMOVE_EMPTY_PARAMS, 2, ArgStyle::NamedOnly, R::Matrix),
            Order => fixed(ORDER_PARAMS, 1, ArgStyle::NamedOnly, R::Matrix),
            Outer => positional(OUTER_PARAMS, R::Matrix),
            Unique => fixed(UNIQUE_PARAMS, 1, ArgStyle::FirstPositional, R::Matrix),
            Aggregate => fixed(AGGREGATE_PARAMS, 3, ArgStyle::NamedOnly, R::Matrix),
            Sample => fixed(SAMPLE_PARAMS, 2, ArgStyle::PositionalOnly, R::Matrix),
            LowerTri | UpperTri => fixed(TRI_PARAMS, 1, ArgStyle::NamedOnly, R::Matrix),
            // One argument: a list, whose matrices are bound (the HOP types check it).
            Cbind | Rbind => variadic(VARIADIC_MAT, 1, R::Matrix),
            Solve => positional(SOLVE_PARAMS, R::Matrix),
            Unary(UnaryOp::Round) => positional(ROUND_PARAMS, R::ElementWise),
            Unary(_) => positional(UNARY_ANY, R::ElementWise),
            Binary(_) => positional(BINARY_ANY, R::ElementWise),
            Ppred => positional(PPRED_PARAMS, R::ElementWise),
            Log => fixed(LOG_PARAMS, 1, ArgStyle::PositionalOnly, R::ElementWise),
            Min | Max => variadic(VARIADIC_ANY, 1, R::AggregateOrElementWise),
            Pmin | Pmax => variadic(VARIADIC_ANY, 2, R::ElementWise),
            // `mean(X, W)`: the mean weighted by W (SystemDS's `cm` mean with weights).
            Mean => fixed(MEAN_PARAMS, 1, ArgStyle::PositionalOnly, R::Double),
            Sum | Prod | Var | Sd => positional(UNARY_MAT, R::Double),
            RowSums | ColSums | RowMeans | ColMeans | RowMaxs | RowMins | ColMaxs | ColMins
            | RowVars | ColVars | RowSds | ColSds => positional(UNARY_MAT, R::Matrix),
            // A weights column is the optional middle argument (SystemDS binds by position).
            Quantile => ranged(2, 3, R::Unknown),
            Median | InterQuartileMean => ranged(1, 2, R::Double),
            Moment | Cov => ranged(2, 3, R::Double),
            Cdf => fixed(CDF_PARAMS, 2, ArgStyle::FirstPositional, R::Double),
            Icdf => fixed(ICDF_PARAMS, 2, ArgStyle::FirstPositional, R::Double),
            Distribution(op) => {
                use StatOp::*;
                let (params, min): (&'static [ParamSpec], usize) = match op {
                    NormalCdf => (PNORM_PARAMS, 1),
                    NormalQuantile => (QNORM_PARAMS, 1),
                    ExpCdf => (PEXP_PARAMS, 1),
                    ExpQuantile => (QEXP_PARAMS, 1),
                    ChisqCdf | TCdf => (PDF1_PARAMS, 2),
                    ChisqQuantile | TQuantile => (QDF1_PARAMS, 2),
                    FCdf => (PF_PARAMS, 3),
                    _ => (QF_PARAMS, 3),
                };
                fixed(params, min, ArgStyle::FirstPositional, R::Double)
            }
            Dnn(op) => {
                let params = match op {
                    DnnOp::Conv2d => CONV2D_PARAMS,
                    DnnOp::Conv2dBackwardFilter => CONV2D_BACKWARD_FILTER_PARAMS,
                    DnnOp::Conv2dBackwardData => CONV2D_BACKWARD_DATA_PARAMS,
                    DnnOp::MaxPool | DnnOp::AvgPool => POOL_PARAMS,
                    DnnOp::MaxPoolBackward | DnnOp::AvgPoolBackward => POOL_BACKWARD_PARAMS,
                    DnnOp::BiasAdd | DnnOp::BiasMultiply => {
                        return positional(BIAS_PARAMS, R::Matrix)
                    }
                };
                fixed(params, params.len(), ArgStyle::Mixed, R::Matrix)
            }
            Inv | Cholesky | SqrtMatrix => positional(UNARY_MAT, R::Matrix),
            Det | Trace => positional(UNARY_MAT, R::Double),
            Eigen | Qr => positional(UNARY_MAT, R::Several(2)),
            Svd | Lu => positional(UNARY_MAT, R::Several(3)),
            Ifelse => positional(IFELSE_PARAMS, R::ElementWise),
            Replace => fixed(REPLACE_PARAMS, 3, ArgStyle::NamedOnly, R::Matrix),
            Contains => fixed(CONTAINS_PARAMS, 2, ArgStyle::NamedOnly, R::Bool),
            List => Signature {
                style: ArgStyle::AllPositionalOrAllNamed,
                ..variadic(VARIADIC_ANY, 0, R::List)
            },
            Remove => positional(REMOVE_PARAMS, R::Several(2)),
            AsList => positional(UNARY_ANY, R::List),
            Nrow | Ncol | Length => positional(UNARY_MAT, R::Int),
            AsScalar => positional(UNARY_MAT, R::Double),
            AsMatrix => positional(UNARY_ANY, R::Matrix),
            AsDouble => positional(UNARY_SCA, R::Double),
            AsInteger => positional(UNARY_SCA, R::Int),
            AsLogical => positional(UNARY_SCA, R::Bool),
            AsFrame => positional(UNARY_MAT, R::Frame),
            TransformEncode => fixed(
                TRANSFORMENCODE_PARAMS,
                2,
                ArgStyle::NamedOnly,
                R::Several(2),
            ),
            TransformApply => fixed(TRANSFORMAPPLY_PARAMS, 3, ArgStyle::NamedOnly, R::Matrix),
            TransformDecode => fixed(TRANSFORMDECODE_PARAMS, 3, ArgStyle::NamedOnly, R::Frame),
            Colnames => positional(UNARY_ANY, R::Frame),
            ToString => fixed(TOSTRING_PARAMS, 1, ArgStyle::FirstPositional, R::Str),
            Read => fixed(READ_PARAMS, 1, ArgStyle::FirstPositional, R::Matrix),
            Write => fixed(WRITE_PARAMS, 2, ArgStyle::Mixed, R::Nothing),
            Print => variadic(PRINT_PARAMS, 1, R::Nothing),
            Stop => positional(STOP_PARAMS, R::Nothing),
            Assert => positional(ASSERT_PARAMS, R::Nothing),
            Time => positional(&[], R::Int),
            Lineage => positional(UNARY_ANY, R::Str),
            Ifdef => positional(IFDEF_PARAMS, R::Unknown),
        }
    }

    /// Whether a call is evaluated for its effect only (it may appear as a statement and has
    /// no value to assign).
    pub fn is_statement(self) -> bool {
        self.signature().result == ResultKind::Nothing
    }
}

/// SystemDS's other names of built-ins (the alias column of its `Builtins` enum), each with
/// the name the catalog knows the function by. An alias of a function the catalog lacks finds
/// nothing until the function is added.
const ALIASES: &[(&str, &str)] = &[
    ("append", "cbind"),
    ("as.boolean", "as.logical"),
    ("avg", "mean"),
    ("castAsScalar", "as.scalar"),
    ("ceiling", "ceil"),
    ("centralMoment", "moment"),
    ("ctable", "table"),
    ("FDR", "fdr"),
    ("groupedAggregate", "aggregate"),
    ("inverse", "inv"),
    // R's spellings of the predicates, the same functions in SystemDS.
    ("is.infinite", "isInf"),
    ("is.na", "isNaN"),
    ("is.nan", "isNaN"),
    ("isNA", "isNaN"),
    ("tr", "trace"),
];

/// The built-in called `name`, if any. Names are case-sensitive, as in DML, but for SystemDS's
/// aliases ([`ALIASES`]) and `rand`, which its parser matches in any case (`Rand`, `RAND`:
/// `DataExpression.getDataExpression`).
pub fn lookup(name: &str) -> Option<Builtin> {
    let name = match ALIASES.iter().find(|(alias, _)| *alias == name) {
        Some((_, canonical)) => canonical,
        None if name.eq_ignore_ascii_case("rand") => "rand",
        None => name,
    };
    ALL.iter().copied().find(|b| b.name() == name)
}

/// Where a parameter's value comes from after binding.
#[derive(Clone, Copy, Debug)]
pub enum BoundValue<'a> {
    /// The caller passed this argument.
    Arg(&'a Expr),
    /// Not passed; the built-in's literal default applies.
    Default(Literal),
    /// Not passed; the user-defined function's default expression applies (evaluated in the
    /// callee, as SystemDS does).
    DefaultExpr(&'a Expr),
    /// Not passed, optional and without a default (e.g. `read`'s `rows`, `log`'s `base`).
    Absent,
}

/// One parameter with its bound value.
#[derive(Clone, Copy, Debug)]
pub struct BoundParam<'a> {
    pub name: &'a str,
    pub value: BoundValue<'a>,
}

/// The arguments of one call, mapped onto the callee's parameters.
#[derive(Clone, Debug, Default)]
pub struct BoundArgs<'a> {
    /// Every fixed parameter in declaration order (empty for a variadic built-in).
    pub params: Vec<BoundParam<'a>>,
    /// The arguments of a variadic built-in, in order.
    pub variadic: Vec<&'a Expr>,
}

impl<'a> BoundArgs<'a> {
    /// The bound value of parameter `name`, `None` if the callee has no such parameter.
    pub fn value(&self, name: &str) -> Option<BoundValue<'a>> {
        self.params.iter().find(|p| p.name == name).map(|p| p.value)
    }

    /// The argument the caller passed for `name`, if they passed one.
    pub fn arg(&self, name: &str) -> Option<&'a Expr> {
        match self.value(name) {
            Some(BoundValue::Arg(e)) => Some(e),
            _ => None,
        }
    }

    /// The expression for `name`: the caller's argument or the default (built-in literal
    /// defaults are materialized at `span`). `None` if absent or not a parameter.
    pub fn expr_or_default(&self, name: &str, span: Span) -> Option<std::borrow::Cow<'a, Expr>> {
        use std::borrow::Cow;
        match self.value(name)? {
            BoundValue::Arg(e) | BoundValue::DefaultExpr(e) => Some(Cow::Borrowed(e)),
            BoundValue::Default(lit) => Some(Cow::Owned(lit.to_expr(span))),
            BoundValue::Absent => None,
        }
    }

    /// All argument expressions the caller passed, fixed and variadic, in parameter order.
    pub fn passed(&self) -> Vec<&'a Expr> {
        let mut out: Vec<&'a Expr> = self
            .params
            .iter()
            .filter_map(|p| match p.value {
                BoundValue::Arg(e) => Some(e),
                _ => None,
            })
            .collect();
        out.extend(self.variadic.iter().copied());
        out
    }
}

/// A parameter as the generic binder sees it (built-in or user-defined).
struct Formal<'a> {
    name: &'a str,
    fallback: BoundValue<'a>,
    required: bool,
}

/// Binds positional-then-named arguments onto `formals` (the rules of DML function calls).
/// Alternative spellings of parameter names. DESIGN.md spells `toString`'s line separator
/// `linebreak`; SystemDS calls it `linesep`. Both are accepted so scripts written either way run.
fn canonical_param_name(name: &str) -> &str {
    match name {
        "linebreak" => "linesep",
        other => other,
    }
}

fn bind_formals<'a>(
    callee: &Callee,
    formals: &[Formal<'a>],
    args: &'a [ast::Arg],
    call_span: Span,
) -> Result<Vec<BoundParam<'a>>> {
    let mut slots: Vec<Option<&'a Expr>> = vec![None; formals.len()];
    let mut seen_named = false;
    let mut positional = 0usize;
    for arg in args {
        match &arg.name {
            None => {
                if seen_named {
                    return Err(CompileError::call(
                        callee,
                        CallProblem::PositionalAfterNamed,
                        arg.span,
                    ));
                }
                if positional >= formals.len() {
                    return Err(CompileError::call(
                        callee,
                        CallProblem::TooMany {
                            max: formals.len(),
                            got: args.len(),
                        },
                        arg.span,
                    ));
                }
                slots[positional] = Some(&arg.value);
                positional += 1;
            }
            Some(name) => {
                seen_named = true;
                let wanted = canonical_param_name(&name.name);
                let Some(idx) = formals.iter().position(|f| f.name == wanted) else {
                    let names: Vec<&str> = formals.iter().map(|f| f.name).collect();
                    let err = CompileError::call(
                        callee,
                        CallProblem::NoParameter {
                            name: name.name.clone(),
                        },
                        name.span,
                    );
                    let err = err.with_note(
                        match crate::builtins::closest(&name.name, names.iter().copied()) {
                            Some(s) => Note::DidYouMean {
                                name: s.to_string(),
                            },
                            None if names.is_empty() => Note::NoParameters {
                                callee: callee.clone(),
                            },
                            None => Note::Parameters {
                                names: names.iter().map(|n| n.to_string()).collect(),
                            },
                        },
                    );
                    return Err(err);
                };
                if slots[idx].is_some() {
                    return Err(CompileError::call(
                        callee,
                        CallProblem::GivenTwice {
                            name: name.name.clone(),
                        },
                        arg.span,
                    ));
                }
                slots[idx] = Some(&arg.value);
            }
        }
    }
    let mut out = Vec::with_capacity(formals.len());
    for (formal, slot) in formals.iter().zip(slots) {
        let value = match slot {
            Some(e) => BoundValue::Arg(e),
            None if formal.required => {
                return Err(CompileError::call(
                    callee,
                    CallProblem::Missing {
                        name: formal.name.to_string(),
                    },
                    call_span,
                ));
            }
            None => formal.fallback,
        };
        out.push(BoundParam {
            name: formal.name,
            value,
        });
    }
    Ok(out)
}

/// Maps the arguments of a call of `builtin` onto its parameters.
///
/// Errors (user faults, pointing at the offending argument or the call): an argument style the
/// function does not accept (e.g. `rand(3, 3)`, `sum(target=X)`), an unknown parameter name,
/// too many or too few arguments, a parameter given twice.
pub fn bind_args<'a>(
    builtin: Builtin,
    args: &'a [ast::Arg],
    call_span: Span,
) -> Result<BoundArgs<'a>> {
    let sig = builtin.signature();
    let name = builtin.name();
    let callee = Callee::Builtin { name };
    let named: Vec<&ast::Arg> = args.iter().filter(|a| a.name.is_some()).collect();
    let n_positional = args.len() - named.len();
    // SystemDS's parser takes a call of an ordinary built-in with at least one unnamed argument
    // by position, names ignored (`table(a, b, n, cols=m)` in its raJoin).
    let names_ignored = sig.style == ArgStyle::PositionalOnly && n_positional > 0;
    match sig.style {
        ArgStyle::PositionalOnly if names_ignored => {}
        ArgStyle::PositionalOnly => {
            if let Some(arg) = named.first() {
                return Err(CompileError::call(
                    &callee,
                    CallProblem::PositionalOnly,
                    arg.span,
                ));
            }
        }
        ArgStyle::NamedOnly => {
            if let Some(arg) = args.iter().find(|a| a.name.is_none()) {
                let params: Vec<&str> = sig.params.iter().map(|p| p.name).collect();
                return Err(
                    CompileError::call(&callee, CallProblem::NamedOnly, arg.span).with_note(
                        Note::Parameters {
                            names: params.iter().map(|p| p.to_string()).collect(),
                        },
                    ),
                );
            }
        }
        ArgStyle::FirstPositional => {
            if let Some(arg) = args.iter().skip(1).find(|a| a.name.is_none()) {
                return Err(CompileError::call(
                    &callee,
                    CallProblem::OnlyFirstUnnamed,
                    arg.span,
                ));
            }
        }
        ArgStyle::AllPositionalOrFirstPositional => {
            if n_positional > 1 && !named.is_empty() {
                return Err(CompileError::call(
                    &callee,
                    CallProblem::MixedNamed,
                    named[0].span,
                ));
            }
        }
        ArgStyle::AllPositionalOrAllNamed => {
            if n_positional > 0 && !named.is_empty() {
                return Err(CompileError::call(
                    &callee,
                    CallProblem::MixedNamed,
                    named[0].span,
                ));
            }
        }
        ArgStyle::Mixed => {}
    }
    if args.len() < sig.min_args {
        let bound = if sig.max_args == Some(sig.min_args) {
            Bound::Exactly
        } else {
            Bound::AtLeast
        };
        return Err(CompileError::call(
            &callee,
            CallProblem::Count {
                bound,
                expected: sig.min_args,
                got: args.len(),
            },
            call_span,
        ));
    }
    if let Some(max) = sig.max_args {
        if args.len() > max {
            let bound = if max == sig.min_args {
                Bound::Exactly
            } else {
                Bound::AtMost
            };
            let culprit = args.get(max).map_or(call_span, |a| a.span);
            return Err(CompileError::call(
                &callee,
                CallProblem::Count {
                    bound,
                    expected: max,
                    got: args.len(),
                },
                culprit,
            ));
        }
    }
    if sig.variadic {
        return Ok(BoundArgs {
            params: vec![],
            variadic: args.iter().map(|a| &a.value).collect(),
        });
    }
    let formals: Vec<Formal<'a>> = sig
        .params
        .iter()
        .map(|p| Formal {
            name: p.name,
            fallback: match p.default {
                Some(lit) => BoundValue::Default(lit),
                None => BoundValue::Absent,
            },
            required: p.default.is_none() && !p.optional,
        })
        .collect();
    if names_ignored {
        // The counts are checked above: every required parameter has its argument.
        let params = formals
            .iter()
            .enumerate()
            .map(|(i, formal)| BoundParam {
                name: formal.name,
                value: args
                    .get(i)
                    .map_or(formal.fallback, |a| BoundValue::Arg(&a.value)),
            })
            .collect();
        return Ok(BoundArgs {
            params,
            variadic: vec![],
        });
    }
    Ok(BoundArgs {
        params: bind_formals(&callee, &formals, args, call_span)?,
        variadic: vec![],
    })
}

/// Maps the arguments of a call of the user-defined function `def` onto its parameters
/// (positional first, then named; parameters with a default may be left out).
pub fn bind_udf_args<'a>(
    def: &'a ast::FunctionDef,
    args: &'a [ast::Arg],
    call_span: Span,
) -> Result<BoundArgs<'a>> {
    let formals: Vec<Formal<'a>> = def
        .params
        .iter()
        .map(|p| Formal {
            name: p.name.as_str(),
            fallback: match &p.default {
                Some(e) => BoundValue::DefaultExpr(e),
                None => BoundValue::Absent,
            },
            required: p.default.is_none(),
        })
        .collect();
    let callee = Callee::Function {
        name: def.name.clone(),
    };
    Ok(BoundArgs {
        params: bind_formals(&callee, &formals, args, call_span)?,
        variadic: vec![],
    })
}

/// Edit distance between two short strings (names): insertions, deletions, substitutions and
/// transpositions of adjacent characters (the "optimal string alignment" distance), so the
/// common typo `cuont` is one edit from `count`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// The candidate closest to `name` if it is close enough to be a plausible typo (distance at
/// most a third of the name's length, and none for names of one or two characters, where any
/// other short name would be "close"; case-only differences always qualify).
/// Ties go to the first candidate in iteration order, so callers pass a sorted order to stay
/// deterministic.
pub fn closest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let len = name.chars().count();
    let limit = if len <= 2 { 0 } else { (len / 3).max(1) };
    let mut best: Option<(usize, &'c str)> = None;
    for cand in candidates {
        if cand == name {
            continue;
        }
        let d = if cand.eq_ignore_ascii_case(name) {
            0
        } else {
            edit_distance(name, cand)
        };
        if d <= limit && !matches!(best, Some((bd, _)) if d >= bd) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Arg, Ident};

    fn e(kind: ExprKind) -> Expr {
        Expr {
            kind,
            span: Span::new(0, 1),
        }
    }
    fn pos(v: i64) -> Arg {
        Arg {
            name: None,
            value: e(ExprKind::Int(v)),
            span: Span::new(0, 1),
        }
    }
    fn named(n: &str, v: i64) -> Arg {
        Arg {
            name: Some(Ident {
                name: n.into(),
                span: Span::new(0, 1),
            }),
            value: e(ExprKind::Int(v)),
            span: Span::new(0, 1),
        }
    }
    fn int_of(b: &BoundArgs, name: &str) -> Option<i64> {
        match b.arg(name)?.kind {
            ExprKind::Int(v) => Some(v),
            _ => None,
        }
    }

    #[test]
    fn every_builtin_round_trips_through_lookup() {
        for &b in ALL {
            assert_eq!(lookup(b.name()), Some(b));
            let sig = b.signature();
            assert!(
                !matches!(sig.max_args, Some(m) if m < sig.min_args),
                "{}",
                b.name()
            );
        }
        assert_eq!(lookup("Sum"), None);
        assert_eq!(lookup("as.scalar"), Some(Builtin::AsScalar));
    }

    #[test]
    fn rand_requires_named_arguments_and_fills_defaults() {
        let args = [pos(3), pos(3)];
        let err = bind_args(Builtin::Rand, &args, Span::new(0, 1)).unwrap_err();
        assert!(
            err.to_string().contains("must be named"),
            "{}",
            err.to_string()
        );

        let args = [named("cols", 4), named("rows", 2)];
        let b = bind_args(Builtin::Rand, &args, Span::new(0, 1)).unwrap();
        assert_eq!(int_of(&b, "rows"), Some(2));
        assert_eq!(int_of(&b, "cols"), Some(4));
        assert!(matches!(
            b.value("pdf"),
            Some(BoundValue::Default(Literal::Str("uniform")))
        ));
        assert!(matches!(
            b.value("seed"),
            Some(BoundValue::Default(Literal::Int(-1)))
        ));
    }

    #[test]
    fn matrix_accepts_positional_or_data_then_named() {
        let args = [pos(1), pos(2), pos(3)];
        let b = bind_args(Builtin::Matrix, &args, Span::new(0, 1)).unwrap();
        assert_eq!(int_of(&b, "cols"), Some(3));
        assert!(matches!(
            b.value("byrow"),
            Some(BoundValue::Default(Literal::Bool(true)))
        ));
        let args = [pos(1), named("cols", 3), named("rows", 2)];
        let b = bind_args(Builtin::Matrix, &args, Span::new(0, 1)).unwrap();
        assert_eq!(int_of(&b, "rows"), Some(2));
        let err = bind_args(
            Builtin::Matrix,
            &[pos(1), pos(2), named("cols", 3)],
            Span::new(0, 1),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("cannot mix"),
            "{}",
            err.to_string()
        );
        let err = bind_args(Builtin::Matrix, &[pos(1), pos(2)], Span::new(0, 1)).unwrap_err();
        assert!(
            err.to_string().contains("at least 3 arguments"),
            "{}",
            err.to_string()
        );
    }

    #[test]
    fn ordinary_builtins_reject_names_and_wrong_counts() {
        let err = bind_args(Builtin::Sum, &[named("target", 1)], Span::new(0, 1)).unwrap_err();
        assert!(err.to_string().contains("positional arguments only"));
        let err = bind_args(Builtin::Sum, &[pos(1), pos(2)], Span::new(0, 1)).unwrap_err();
        assert_eq!(err.to_string(), "sum() takes 1 argument, got 2");
        let err = bind_args(Builtin::Cbind, &[], Span::new(0, 1)).unwrap_err();
        assert_eq!(err.to_string(), "cbind() takes at least 1 argument, got 0");
        let args = [pos(1), pos(2), pos(3)];
        let b = bind_args(Builtin::Max, &args, Span::new(0, 1)).unwrap();
        assert_eq!(b.variadic.len(), 3);
        let args = [pos(8)];
        let b = bind_args(Builtin::Log, &args, Span::new(0, 1)).unwrap();
        assert!(matches!(b.value("base"), Some(BoundValue::Absent)));
    }

    #[test]
    fn unknown_and_duplicate_parameters_are_reported() {
        let err = bind_args(
            Builtin::ToString,
            &[pos(1), named("decimals", 2)],
            Span::new(0, 1),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "toString() has no parameter named 'decimals'"
        );
        let notes: Vec<String> = err.notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(notes, vec!["did you mean 'decimal'?".to_string()]);
        let err = bind_args(
            Builtin::Write,
            &[pos(1), pos(2), named("file", 3)],
            Span::new(0, 1),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("more than once"),
            "{}",
            err.to_string()
        );
    }

    #[test]
    fn udf_binding_uses_defaults_and_names() {
        let def = ast::FunctionDef {
            name: "f".into(),
            params: vec![
                ast::Param {
                    name: "X".into(),
                    ty: ast::ValueType::Matrix,
                    default: None,
                    span: Span::default(),
                },
                ast::Param {
                    name: "a".into(),
                    ty: ast::ValueType::Double,
                    default: Some(e(ExprKind::Double(1.0))),
                    span: Span::default(),
                },
            ],
            results: vec![],
            body: vec![],
            span: Span::default(),
        };
        let args = [named("X", 5)];
        let b = bind_udf_args(&def, &args, Span::new(0, 1)).unwrap();
        assert_eq!(int_of(&b, "X"), Some(5));
        assert!(matches!(b.value("a"), Some(BoundValue::DefaultExpr(_))));
        let args = [named("a", 5)];
        let err = bind_udf_args(&def, &args, Span::new(0, 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "missing argument 'X' in call to function f"
        );
        let args = [pos(1), pos(2), pos(3)];
        let err = bind_udf_args(&def, &args, Span::new(0, 1)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("too many arguments to function f"),
            "{}",
            err.to_string()
        );
    }

    #[test]
    fn closest_name_suggestions() {
        assert_eq!(closest("rowsum", ["rowSums", "colSums"]), Some("rowSums"));
        assert_eq!(closest("xyz", ["rowSums", "colSums"]), None);
        assert_eq!(closest("cuont", ["count"]), Some("count"));
        assert_eq!(closest("b", ["a"]), None);
        assert_eq!(closest("x", ["X"]), Some("X"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }
}
