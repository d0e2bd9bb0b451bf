//! The compiler's error type: who is at fault, what happened, and where in the script.

use crate::span::{SourceFile, Span};
use codespan_reporting::files::{self, Files, SimpleFile};
use std::fmt;
use thiserror::Error;

/// Who has to act on an error: the core's classification, shared by every crate.
pub use lafuse_core::Fault;

/// A compile-time error: what went wrong ([`CompileCause`]), where in the script, and hints.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("{cause}")]
pub struct CompileError {
    /// Boxed: results of the compiler's functions stay small.
    pub cause: Box<CompileCause>,
    pub span: Option<Span>,
    /// Extra hints ("did you mean ...?").
    pub notes: Vec<Note>,
}

impl CompileError {
    /// `cause`, located at `span`.
    pub fn at(cause: impl Into<CompileCause>, span: Span) -> Self {
        Self::new(cause, Some(span))
    }
    pub fn new(cause: impl Into<CompileCause>, span: Option<Span>) -> Self {
        CompileError {
            cause: Box::new(cause.into()),
            span,
            notes: vec![],
        }
    }
    /// A call of `callee` whose arguments have `problem`, at `span`.
    pub fn call(callee: &Callee, problem: CallProblem, span: Span) -> Self {
        Self::at(
            CompileCause::Call {
                callee: callee.clone(),
                problem,
            },
            span,
        )
    }
    /// A bug in lafuse, with no location.
    pub fn internal(cause: Internal) -> Self {
        Self::new(cause, None)
    }
    pub fn with_note(mut self, note: Note) -> Self {
        self.notes.push(note);
        self
    }

    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        self.cause.fault()
    }

    /// The headline the diagnostic prints (the error's `Display`).
    pub fn headline(&self) -> String {
        self.cause.to_string()
    }

    /// Renders the error as `error: msg` with `file:line:col`, the source line and a caret,
    /// in the style of rustc (via codespan-reporting, no colours).
    pub fn render(&self, source: &SourceFile) -> String {
        let notes: Vec<String> = self.notes.iter().map(Note::to_string).collect();
        render_diagnostic(&self.headline(), self.span, &notes, source)
    }
}

/// Renders a diagnostic with `headline` at `span` (the whole file where `None`) followed by
/// `notes`, as [`CompileError::render`] does; the engine renders its runtime errors with it.
pub fn render_diagnostic(
    headline: &str,
    span: Option<Span>,
    notes: &[String],
    source: &SourceFile,
) -> String {
    use codespan_reporting::diagnostic::{Diagnostic, Label};
    use codespan_reporting::term::{self, termcolor::NoColor, Config};

    let mut diagnostic = Diagnostic::error().with_message(headline);
    let file = match span {
        Some(span) => {
            let file = Excerpt::new(source, span);
            diagnostic = diagnostic.with_labels(vec![Label::primary((), file.label.clone())]);
            file
        }
        None => Excerpt::whole(source),
    };
    diagnostic = diagnostic.with_notes(notes.to_vec());
    let mut out = NoColor::new(Vec::new());
    if term::emit(&mut out, &Config::default(), &file, &diagnostic).is_err() {
        return headline.to_string();
    }
    String::from_utf8_lossy(&out.into_inner()).into_owned()
}

/// What went wrong, grouped by the stage that finds it; the variant says who has to act
/// ([`CompileCause::fault`]). Each `Display` is the text lafuse has always printed.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CompileCause {
    /// A character sequence that is no token.
    #[error("{0}")]
    Lex(#[from] LexError),
    /// Tokens that do not make a script.
    #[error("{0}")]
    Syntax(#[from] SyntaxError),
    /// A call whose arguments do not fit the parameters of `callee`.
    #[error("{}", .problem.describe(.callee))]
    Call {
        callee: Callee,
        problem: CallProblem,
    },
    /// Names, functions and value kinds that do not fit together.
    #[error("{0}")]
    Check(#[from] CheckError),
    /// Sizes and constant arguments that do not fit the operation.
    #[error("{0}")]
    Shape(#[from] ShapeError),
    /// A HOP DAG (imported or built by an embedder) that is malformed.
    #[error("{0}")]
    Dag(#[from] DagError),
    /// A sourced file or built-in that cannot be loaded, or a call into a namespace that has
    /// no such function.
    #[error("{0}")]
    Load(#[from] crate::modules::LoadError),
    /// A valid construct that lafuse does not implement yet.
    #[error("unsupported: {0}")]
    Unsupported(#[from] Unsupported),
    /// A bug in lafuse.
    #[error("internal error (a bug in lafuse, please report it): {0}")]
    Internal(#[from] Internal),
}

impl CompileCause {
    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            CompileCause::Unsupported(_)
            | CompileCause::Dag(DagError::Type(TypeRule::FrameUnsupported { .. })) => {
                Fault::Unsupported
            }
            CompileCause::Internal(_) => Fault::Internal,
            CompileCause::Lex(_)
            | CompileCause::Syntax(_)
            | CompileCause::Call { .. }
            | CompileCause::Check(_)
            | CompileCause::Shape(_)
            | CompileCause::Dag(_)
            | CompileCause::Load(_) => Fault::User,
        }
    }
}

/// A hint attached to an error.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Note {
    /// A known name close to the one written.
    #[error("did you mean '{name}'?")]
    DidYouMean { name: String },
    /// The function lafuse has that is closest to a SystemDS built-in it lacks.
    #[error("the closest function lafuse has is '{name}'")]
    ClosestKnown { name: String },
    /// How to call a SystemDS built-in written in DML.
    #[error(
        "SystemDS writes '{name}' in DML: pass --builtin-path DIR (or set LAFUSE_BUILTIN_PATH) \
         with DIR a SystemDS checkout's scripts/builtin"
    )]
    BuiltinPath { name: String },
    /// The parameters `callee` has.
    #[error("parameters: {}", .names.join(", "))]
    Parameters { names: Vec<String> },
    /// `callee` has no parameters at all.
    #[error("{callee} takes no parameters")]
    NoParameters { callee: Callee },
    /// How to make a matrix condition a scalar.
    #[error("reduce it to a scalar, e.g. with as.scalar(...), sum(...) or min(...)")]
    ReduceCondition,
    /// How to give the script argument `name` (checking).
    #[error("pass it as --nvargs {name}=<value>, or use ifdef(${name}, <default>)")]
    PassScriptArg { name: String },
    /// How to make the script argument `name` optional (construction).
    #[error("use ifdef(${name}, default) for an optional argument")]
    UseIfdef { name: String },
}

/// A character sequence that is no token ([`CompileCause::Lex`]); `text` fields are the
/// script's own characters.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LexError {
    #[error("unterminated block comment: '/*' without a closing '*/'")]
    UnterminatedComment,
    #[error("expected a script argument name after '$' (e.g. $X or $1)")]
    ScriptArgName,
    #[error("unexpected character {}", shown_char(*.ch))]
    UnexpectedChar { ch: char },
    /// A number with SystemDS's `L` suffix; `float` says whether it is a double.
    #[error(
        "cannot parse the {} value '{text}' (the L suffix is not supported)",
        if *.float { "float" } else { "int" }
    )]
    LongSuffix { float: bool, text: String },
    #[error("integer literal {text} does not fit in 64 bits")]
    IntegerOverflow { text: String },
    #[error("cannot parse the number '{text}'")]
    BadNumber { text: String },
    #[error("unterminated string literal")]
    UnterminatedString,
    #[error(
        "invalid escape sequence '\\{escape}' in string (valid: \\b \\t \\n \\f \\r \\\" \\' \\\\)"
    )]
    InvalidEscape { escape: char },
}

fn shown_char(ch: char) -> String {
    if ch.is_control() {
        format!("{ch:?}")
    } else {
        format!("'{ch}'")
    }
}

/// Tokens that do not make a script ([`CompileCause::Syntax`]). `expected` describes what the
/// grammar wanted there; `found` is the offending token as the script spells it.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SyntaxError {
    #[error("syntax error: expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    #[error("syntax error: expected {expected}, found {found} (a reserved word)")]
    ReservedWord { expected: String, found: String },
    #[error("the script is nested too deeply (more than {limit} levels)")]
    TooDeep { limit: usize },
    /// A block opened at `line` that the file ends inside.
    #[error(
        "syntax error: expected '}}' to close the block opened at line {line}, found end of file"
    )]
    UnclosedBlock { line: usize },
    #[error("function definitions are only allowed at the top level of a script")]
    NestedFunction,
    #[error("cannot assign to the script argument '${name}'")]
    AssignScriptArg { name: String },
    #[error("cannot assign to the built-in constant {name}: choose another name")]
    AssignConstant { name: &'static str },
    /// `ifdef(...)` followed by more of an expression.
    #[error(
        "ifdef(...) must be the whole right-hand side of an assignment (assign it to a variable first)"
    )]
    IfdefInExpression,
    /// `ifdef(...)` inside another expression.
    #[error(
        "ifdef(...) must be the whole right-hand side of an assignment (x = ifdef($name, default))"
    )]
    IfdefNested,
    #[error("seq(...) in a for loop takes positional arguments: seq(from, to, incr)")]
    ForSeqNamed,
    #[error("seq(...) in a for loop takes 2 or 3 arguments, got {got}")]
    ForSeqArity { got: usize },
}

/// Who is called ([`CompileCause::Call`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Callee {
    /// A built-in function, by name.
    Builtin { name: &'static str },
    /// A script's function, by name.
    Function { name: String },
}

impl fmt::Display for Callee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Callee::Builtin { name } => write!(f, "{name}()"),
            Callee::Function { name } => write!(f, "function {name}"),
        }
    }
}

/// How many arguments a callee takes ([`CallProblem::Count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Exactly,
    AtLeast,
    AtMost,
}

/// What is wrong with a call's arguments ([`CompileCause::Call`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallProblem {
    PositionalAfterNamed,
    /// More positional arguments than parameters.
    TooMany {
        max: usize,
        got: usize,
    },
    /// A named argument `name` the callee has no parameter for.
    NoParameter {
        name: String,
    },
    GivenTwice {
        name: String,
    },
    Missing {
        name: String,
    },
    /// Named arguments to a callee that takes positional ones only.
    PositionalOnly,
    /// Unnamed arguments to a callee that takes named ones only.
    NamedOnly,
    /// An unnamed argument after the first.
    OnlyFirstUnnamed,
    /// Named arguments with more than one unnamed.
    MixedNamed,
    /// `got` arguments where the callee takes `bound` `expected`.
    Count {
        bound: Bound,
        expected: usize,
        got: usize,
    },
}

impl CallProblem {
    fn describe(&self, callee: &Callee) -> String {
        match self {
            CallProblem::PositionalAfterNamed => {
                format!("positional argument after named arguments in call to {callee}")
            }
            CallProblem::TooMany { max, got } => format!(
                "too many arguments to {callee}: it takes at most {}, got {got}",
                plural(*max, "argument")
            ),
            CallProblem::NoParameter { name } => {
                format!("{callee} has no parameter named '{name}'")
            }
            CallProblem::GivenTwice { name } => {
                format!("parameter '{name}' of {callee} is given more than once")
            }
            CallProblem::Missing { name } => format!("missing argument '{name}' in call to {callee}"),
            CallProblem::PositionalOnly => {
                format!("{callee} takes positional arguments only, not named ones")
            }
            CallProblem::NamedOnly => format!("for {callee}, all arguments must be named parameters"),
            CallProblem::OnlyFirstUnnamed => {
                format!("only the first argument of {callee} may be unnamed")
            }
            CallProblem::MixedNamed => format!(
                "for {callee}, cannot mix named and unnamed parameters (only the first may be unnamed)"
            ),
            CallProblem::Count {
                bound,
                expected,
                got,
            } => {
                let bound = match bound {
                    Bound::Exactly => "",
                    Bound::AtLeast => "at least ",
                    Bound::AtMost => "at most ",
                };
                format!(
                    "{callee} takes {bound}{}, got {got}",
                    plural(*expected, "argument")
                )
            }
        }
    }
}

/// `1 argument`, `2 arguments`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A value's kind as a message names it: `a matrix`, `a scalar`, `a string`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Matrix,
    Scalar,
    String,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Matrix => "a matrix",
            Kind::Scalar => "a scalar",
            Kind::String => "a string",
        })
    }
}

/// An operand as a message names it: `'X'` for a variable, else `the argument`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    Var { name: String },
    Argument,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Var { name } => write!(f, "'{name}'"),
            Operand::Argument => f.write_str("the argument"),
        }
    }
}

/// Names, functions and value kinds that do not fit together ([`CompileCause::Check`]).
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CheckError {
    #[error(
        "the default value of parameter '{param}' of function {function} calls the user-defined function {callee}; a default may call built-in functions only"
    )]
    DefaultCallsFunction {
        param: String,
        function: String,
        callee: String,
    },
    #[error(
        "function {function} never assigns its result '{result}'; every result must be assigned in the function body"
    )]
    ResultUnassigned { function: String, result: String },
    #[error("a for loop bound must be a scalar, but this is a matrix")]
    MatrixLoopBound,
    #[error("an index must be a scalar, but this is a matrix")]
    MatrixIndex,
    /// The condition of an `if` or `while` (`statement`).
    #[error("the {statement} condition must be a scalar, but it is a matrix")]
    MatrixCondition { statement: &'static str },
    #[error("{target} is a scalar and cannot be indexed")]
    ScalarIndexed { target: Operand },
    /// A call (of `name`, or `this expression`) with no value, assigned.
    #[error("{name}() returns no value to assign")]
    NoValueToAssign { name: String },
    #[error(
        "parameter '{param}' of function {function} expects {expected}, but {given} is {found}"
    )]
    ParameterKind {
        param: String,
        function: String,
        expected: Kind,
        given: Operand,
        found: Kind,
    },
    #[error("{builtin}() expects {expected} argument, but {given} is {found}")]
    ArgumentKind {
        builtin: &'static str,
        expected: Kind,
        given: Operand,
        found: Kind,
    },
    /// A call of `function` (`results` results) inside an expression.
    #[error(
        "function {function} {}; a call inside an expression must return exactly one",
        returns(*.results)
    )]
    ResultsInExpression { function: String, results: usize },
    /// One target for a function with several `results`.
    #[error(
        "function {function} {}; assign them all, as in [{}] = {function}(...)",
        returns(.results.len()),
        .results.join(", ")
    )]
    AssignAllResults {
        function: String,
        results: Vec<String>,
    },
    #[error("function {function} {}, but {targets} targets are assigned", returns(*.results))]
    TargetCount {
        function: String,
        results: usize,
        targets: usize,
    },
    #[error(
        "built-in function {name}() returns one value; it cannot be assigned to {targets} targets"
    )]
    BuiltinTargets { name: String, targets: usize },
    /// A built-in with several results used as one value, or assigned to the wrong number of
    /// targets.
    #[error(
        "built-in function {name}() returns {results} matrices: assign them all with \
         [{placeholder}] = {name}(...)"
    )]
    SeveralResults {
        name: &'static str,
        results: usize,
        placeholder: &'static str,
    },
    #[error("cannot assign to {name}[...] before '{name}' is initialized")]
    IndexedBeforeInitialized { name: String },
    #[error("undefined variable '{name}': it is read before it is assigned")]
    ReadBeforeAssigned { name: String },
    #[error("undefined variable '{name}'")]
    UndefinedVariable { name: String },
    #[error("unknown function '{name}'")]
    UnknownFunction { name: String },
    #[error("function '{name}' has the name of a built-in function")]
    BuiltinName { name: String },
    #[error("function '{name}' is defined more than once")]
    DefinedTwice { name: String },
    #[error("no value given for the script argument '${name}'")]
    MissingScriptArg { name: String },
    #[error("script argument ${name} is not given (pass it with --nvargs {name}=...)")]
    ScriptArgNotGiven { name: String },
    #[error(
        "matrix multiplication (%*%) needs matrices, but this is a scalar (use * to scale by a scalar)"
    )]
    ScalarMatrixMultiply,
    #[error("'{op}' cannot be applied to a string (only '+' concatenates strings with scalars)")]
    StringOperand { op: &'static str },
    #[error("unary '+' of a string")]
    StringUnaryPlus,
    #[error("the first argument of ifdef must be a script argument such as $name")]
    IfdefArgument,
    #[error("the first argument of ifdef must be a script argument ($name)")]
    IfdefNotScriptArg,
    /// An argument whose value must be known when the call is compiled, and is not one of
    /// those the function takes (`ppred`'s operator, `cdf`'s distribution).
    #[error("{builtin}(): argument '{param}' must be {expected}")]
    ArgumentValue {
        builtin: &'static str,
        param: &'static str,
        expected: &'static str,
    },
    /// Indexing into the scalar variable `name` (or an unnamed scalar).
    #[error("cannot index into '{name}': it is a scalar")]
    IndexIntoScalar { name: String },
    /// `L[i, j]` of a list: lists have one dimension (`L[i, 1]` is `L[i]`).
    #[error("a list is indexed by one position, range or name (L[i], L[i:j], L[\"name\"]); its one column is 1")]
    ListIndexShape,
    #[error("cannot index into a scalar")]
    IndexIntoScalarValue,
    #[error("an index must be a number")]
    NonNumericIndex,
    #[error("{builtin}() has no value; call it as a statement")]
    StatementAsValue { builtin: &'static str },
    #[error("{builtin}() of a single scalar: pass a matrix or at least two values")]
    SingleScalar { builtin: &'static str },
    /// A condition or loop bound that is a matrix that cannot be made a scalar.
    #[error("a condition or loop bound must be a scalar: {}", bare(.cause))]
    NonScalarCondition { cause: Box<CompileCause> },
}

/// A cause's text without the class headline an internal error adds.
fn bare(cause: &CompileCause) -> String {
    match cause {
        CompileCause::Internal(i) => i.to_string(),
        c => c.to_string(),
    }
}

/// `returns no value`, `returns 1 value`, `returns n values`.
fn returns(n: usize) -> String {
    match n {
        0 => "returns no value".to_string(),
        1 => "returns 1 value".to_string(),
        n => format!("returns {n} values"),
    }
}

/// A shape as far as it is known: `?x3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub rows: Option<u64>,
    pub cols: Option<u64>,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        write!(f, "{}x{}", s(self.rows), s(self.cols))
    }
}

/// Sizes and constant arguments that do not fit the operation ([`CompileCause::Shape`]).
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ShapeError {
    #[error("as.scalar needs a 1x1 matrix, got {shape}")]
    AsScalar { shape: Shape },
    /// `op` (`ifelse`, `min`, ...) of matrices of different shapes.
    #[error("{op} needs matrix arguments of the same shape, got {left} and {right}")]
    SameShape {
        op: &'static str,
        left: Shape,
        right: Shape,
    },
    #[error(
        "dimension mismatch in matrix multiply: ncol(A) must equal nrow(B), got A {left} and B {right}"
    )]
    MatrixMultiply { left: Shape, right: Shape },
    #[error(
        "dimension mismatch in '{op}': {left} and {right} (the right operand must have the left's shape or be a row or column vector of it)"
    )]
    Broadcast {
        op: &'static str,
        left: Shape,
        right: Shape,
    },
    #[error("diag needs a column vector or a square matrix, got {shape}")]
    Diag { shape: Shape },
    #[error("outer needs a column vector and a row vector, got {left} and {right}")]
    Outer { left: Shape, right: Shape },
    #[error("{op} needs a matrix with {cols} columns, got {shape}")]
    Columns {
        op: &'static str,
        cols: u64,
        shape: Shape,
    },
    /// A scalar argument whose known value the function does not accept.
    #[error("{function}: invalid {argument} {value}; {expected}")]
    Argument {
        function: &'static str,
        argument: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("cannot reshape a {from} matrix into {rows}x{cols}")]
    Reshape { from: Shape, rows: u64, cols: u64 },
    #[error(
        "left indexing assigns a {value} matrix to a {}x{} range of a {target} matrix",
        unknown(.rows),
        unknown(.cols)
    )]
    LeftIndex {
        value: Shape,
        rows: Option<u64>,
        cols: Option<u64>,
        target: Shape,
    },
    /// `cbind`/`rbind` (`op`) inputs whose rows/columns (`axis`) differ: input 1 and `input`.
    #[error(
        "inputs to {op} must have the same number of {axis}: input 1 is {first}, input {input} is {other}"
    )]
    Bind {
        op: &'static str,
        axis: &'static str,
        first: Shape,
        input: usize,
        other: Shape,
    },
    #[error("solve(A, b) needs a square A and nrow(b) == nrow(A), got A {a} and b {b}")]
    Solve { a: Shape, b: Shape },
    /// A size argument (`rows`, `cols`) that is not a non-negative integer.
    #[error("{argument} must be a non-negative integer, got {value}")]
    NotACount {
        argument: &'static str,
        value: crate::hops::Literal,
    },
    /// A literal bound of a `row` or `column` (`axis`) index outside a matrix of `shape`.
    #[error("{} (indexing a {shape} matrix)", .problem.describe(.axis))]
    Index {
        axis: &'static str,
        problem: IndexProblem,
        shape: Shape,
    },
    #[error("rand sparsity must be in [0, 1], got {sparsity}")]
    RandSparsity { sparsity: f64 },
    #[error("rand needs min <= max, got min={min}, max={max}")]
    RandRange { min: f64, max: f64 },
    #[error("matrix(\"...\", rows={rows}, cols={cols}) needs {cells} values, got {values}")]
    MatrixValues {
        rows: u64,
        cols: u64,
        cells: u64,
        values: usize,
    },
    /// A token of `matrix("...")`'s string that is not a number (the script's text).
    #[error("matrix(\"...\") cannot parse {token:?} as a number")]
    MatrixToken { token: String },
    #[error("invalid seq({from}, {to}, {incr}): the increment must be finite and non-zero")]
    SeqIncrement { from: f64, to: f64, incr: f64 },
    #[error("wrong sign for the increment in seq({from}, {to}, {incr})")]
    SeqSign { from: f64, to: f64, incr: f64 },
}

/// What is wrong with a literal index bound ([`ShapeError::Index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexProblem {
    BelowOne { index: i64 },
    Reversed { lower: i64, upper: i64 },
    OutOfBounds { index: i64 },
}

impl IndexProblem {
    fn describe(&self, axis: &str) -> String {
        match *self {
            IndexProblem::BelowOne { index } => {
                format!("{axis} index {index} is out of bounds: indices start at 1")
            }
            IndexProblem::Reversed { lower, upper } => {
                format!("upper {axis} index {upper} is smaller than the lower {axis} index {lower}")
            }
            IndexProblem::OutOfBounds { index } => format!("{axis} index {index} is out of bounds"),
        }
    }
}

fn unknown(v: &Option<u64>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

/// A HOP DAG that is malformed ([`CompileCause::Dag`]); `detail` fields are a parser's text.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum DagError {
    #[error("invalid HOP DAG JSON: {detail}")]
    Json { detail: String },
    #[error("invalid memo table JSON: {detail}")]
    MemoJson { detail: String },
    /// The verifier's finding.
    #[error("{0}")]
    Invalid(crate::hops::VerifyError),
    #[error("fusion needs a valid HOP DAG: {0}")]
    Fusion(crate::hops::VerifyError),
    #[error("hop {node} has input {input}, but the DAG has only {len} hops")]
    InputOutOfRange {
        node: usize,
        input: usize,
        len: usize,
    },
    #[error("the DAG has a cycle through hop {hop}")]
    Cycle { hop: usize },
    #[error("hop id {id} does not exist (the DAG has {len} hops)")]
    NoSuchHop { id: crate::hops::HopId, len: usize },
    #[error("hop {id} is an output or side effect and has no value")]
    SinkInput { id: crate::hops::HopId },
    #[error("use DagBuilder::input or scalar_input for transient reads")]
    TransientRead,
    /// Inputs whose types the op does not take.
    #[error("{0}")]
    Type(#[from] TypeRule),
    /// What size inference found inconsistent in an imported DAG.
    #[error("{0}")]
    Inconsistent(Internal),
}

/// Input types a HOP does not take ([`DagError::Type`]); `op` is the op's display name.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TypeRule {
    /// `expected` says how many inputs the op takes (`2`, `2 or 3`, ...).
    #[error("'{op}' takes {expected} inputs, got {got}")]
    Arity {
        op: String,
        expected: String,
        got: usize,
    },
    /// `what` names the op.
    #[error("{what}: input {input} must be a scalar, got a matrix")]
    NeedScalar { what: String, input: usize },
    #[error("{what} expects a matrix argument, got a scalar")]
    NeedMatrix { what: String },
    #[error("{what} expects a matrix argument, got a frame (convert it with as.matrix)")]
    FrameForMatrix { what: String },
    #[error(
        "{op} does not take a frame: lafuse's frames support as.matrix, as.scalar, nrow, ncol, \
         length, colnames, indexing, print, toString, lists and transformencode/apply/decode (convert \
         it with as.matrix)"
    )]
    FrameOperand { op: String },
    /// A frame operation SystemDS has and lafuse lacks (its fault is `Unsupported`).
    #[error("unsupported: {what} of a frame (convert it with as.matrix)")]
    FrameUnsupported { what: &'static str },
    #[error("{what} expects a list as its first input")]
    NeedList { what: String },
    #[error("{what} expects a frame as input {input} (make one with as.frame(X))")]
    NeedFrame { what: String, input: usize },
    #[error("a transient read has no inputs to infer from")]
    TransientRead,
    #[error("invalid operands for '{op}': matrix and string")]
    MatrixAndString { op: &'static str },
    /// `op` (`ifelse`, `min`, `max`) with a matrix and a string.
    #[error("{op} with a matrix cannot take string arguments")]
    StringWithMatrix { op: &'static str },
    #[error("'{op}' is not an aggregation of the HOP IR")]
    NotAnAggregation { op: String },
    #[error("left indexing cannot assign a string")]
    LeftIndexString,
    #[error("invalid value type for '{op}': {value_type}")]
    ValueType {
        op: &'static str,
        value_type: &'static str,
    },
    #[error("as.matrix cannot convert a string")]
    AsMatrixString,
    #[error("invalid value types for '{op}': {left} and {right}")]
    ValueTypes {
        op: &'static str,
        left: &'static str,
        right: &'static str,
    },
}

/// A valid construct that lafuse does not implement yet ([`CompileCause::Unsupported`]).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Unsupported {
    #[error("source(...) inside a block or function (lafuse takes it at a script's top level)")]
    Source,
    #[error("setwd(...)")]
    Setwd,
    /// A built-in function of SystemDS that lafuse does not have.
    #[error("built-in function '{name}'")]
    BuiltinFunction { name: String },
    #[error(
        "source(...) in a script built without the module loader (lafuse_compiler::modules::load)"
    )]
    SourceNotLoaded,
    #[error("namespaced variables (ns::name outside a function call)")]
    Namespaces,
    #[error("'+=' on an indexed target")]
    IndexedCompoundAssign,
    #[error("indexed targets in a multi-assignment")]
    IndexedMultiAssign,
    #[error("externalFunction")]
    ExternalFunction,
    #[error("the value type 'unknown'")]
    UnknownValueType,
    /// `found` is the value type as the script spells it.
    #[error("matrices of value type {found}")]
    MatrixValueType { found: String },
    #[error("the data type '{name}'")]
    DataType { name: String },
    #[error(
        "assigning several results from a built-in function (only user-defined functions return several)"
    )]
    BuiltinMultiAssign,
    #[error(
        "a call of a user-defined function in a while condition (assign it to a variable before the loop and at the end of its body)"
    )]
    CallInWhileCondition,
    /// A list built-in lafuse lacks (`remove`, `as.list`).
    #[error("the list function {name}")]
    ListFunction { name: &'static str },
}

impl Unsupported {
    /// The unsupported SystemDS built-in called `name`, if it is one (rather than a name
    /// nothing defines).
    pub fn builtin(name: &str) -> Option<Unsupported> {
        Some(match name {
            "remove" => Unsupported::ListFunction { name: "remove" },
            "as.list" => Unsupported::ListFunction { name: "as.list" },
            _ => return None,
        })
    }
}

/// A bug in lafuse ([`CompileCause::Internal`]).
#[derive(Clone, Debug, Error, PartialEq)]
pub enum Internal {
    /// A broken invariant of one stage, stated.
    #[error("{what}")]
    Invariant { what: &'static str },
    #[error("multi-assignment left in a basic block at {span:?}")]
    MultiAssignInBlock { span: Span },
    #[error("call of function {function} left in an expression")]
    CallInExpression { function: String },
    #[error("{builtin} is not a statement")]
    NotAStatement { builtin: &'static str },
    #[error("built-in {builtin} has no HOP lowering")]
    NoLowering { builtin: &'static str },
    #[error("block input '{name}' is declared {declared} but holds a {holds}")]
    InputType {
        name: String,
        declared: &'static str,
        holds: &'static str,
    },
    #[error("parameter '{name}' missing after binding")]
    MissingParameter { name: String },
    /// An op (its display name) typed as a matrix that cannot produce one.
    #[error("{op} cannot produce a matrix")]
    NotAMatrix { op: String },
    #[error("DAG construction produced an invalid DAG: {0}")]
    ConstructedDag(crate::hops::VerifyError),
    #[error("the DAG is invalid after rewrite '{pass}': {error}")]
    RewrittenDag {
        pass: &'static str,
        error: crate::hops::VerifyError,
    },
    /// An invalid CPlan built for the operator at `hop`; `plan` is its explanation.
    #[error(
        "CPlan construction built an invalid plan for the operator at hop {hop}: {error}\n{plan}"
    )]
    ConstructedCPlan {
        hop: crate::hops::HopId,
        error: crate::fusion::cplan::VerifyError,
        plan: String,
    },
}

/// Longest source line a diagnostic shows whole. A machine-written script can put thousands
/// of terms on one line; its error shows a window of the line around the error instead (with
/// `…` where text is cut), under the error's true line and column.
const MAX_SHOWN_LINE: usize = 160;

/// The script as a diagnostic shows it: the text, with the error's line cut to a window
/// around the error when it is longer than [`MAX_SHOWN_LINE`].
struct Excerpt {
    /// The original text of the file holding the error.
    original: std::sync::Arc<str>,
    /// The text shown: the original, or the original with the error's line cut.
    file: SimpleFile<String, String>,
    /// The label's byte range in the text shown.
    label: std::ops::Range<usize>,
    /// Where the cut line's window starts in `original` and in the text shown (`None`: not
    /// cut).
    window: Option<(usize, usize)>,
}

impl Excerpt {
    fn whole(source: &SourceFile) -> Self {
        let original: std::sync::Arc<str> = source.text.as_str().into();
        Self::shown(
            source.name.clone(),
            original,
            source.text.clone(),
            0..0,
            None,
        )
    }

    /// The file holding `span` (the script or a file loaded beside it), with `span` in it.
    fn new(source: &SourceFile, span: Span) -> Self {
        let (name, original, start) = source.in_file(span.start, |name, text, local| {
            (name.to_string(), std::sync::Arc::<str>::from(text), local)
        });
        let end = span.end - (span.start - start);
        let text: &str = &original;
        // Within the text and on character boundaries (a span handed in by an embedder, with
        // a DAG, need not be).
        let floor = |mut b: usize| {
            b = b.min(text.len());
            while !text.is_char_boundary(b) {
                b -= 1;
            }
            b
        };
        let start = floor(start as usize);
        let end = floor(end as usize).max(start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        if line_end - line_start <= MAX_SHOWN_LINE {
            let shown = text.to_string();
            return Self::shown(name, original, shown, start..end, None);
        }
        let from = floor(start.saturating_sub(MAX_SHOWN_LINE / 3).max(line_start));
        let to = floor((from + MAX_SHOWN_LINE).min(line_end));
        let (head, tail) = (
            if from > line_start { "… " } else { "" },
            if to < line_end { " …" } else { "" },
        );
        let shown = format!(
            "{}{head}{}{tail}{}",
            &text[..line_start],
            &text[from..to],
            &text[line_end..]
        );
        let at = line_start + head.len();
        let label = at + (start - from)..at + (end.min(to).max(start) - from);
        Self::shown(name, original, shown, label, Some((from, at)))
    }

    fn shown(
        name: String,
        original: std::sync::Arc<str>,
        text: String,
        label: std::ops::Range<usize>,
        window: Option<(usize, usize)>,
    ) -> Self {
        Excerpt {
            original,
            file: SimpleFile::new(name, text),
            label,
            window,
        }
    }
}

/// The shown text's lines as `SimpleFile` has them; only columns are the original line's.
impl<'a> Files<'a> for Excerpt {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, files::Error> {
        Ok(self.file.name().as_str())
    }

    fn source(&'a self, (): ()) -> Result<&'a str, files::Error> {
        Ok(self.file.source().as_str())
    }

    fn line_index(&'a self, (): (), byte: usize) -> Result<usize, files::Error> {
        self.file.line_index((), byte)
    }

    fn line_range(&'a self, (): (), line: usize) -> Result<std::ops::Range<usize>, files::Error> {
        self.file.line_range((), line)
    }

    /// The column in the original line, also where the shown line is cut.
    fn column_number(&'a self, (): (), line: usize, byte: usize) -> Result<usize, files::Error> {
        let range = self.line_range((), line)?;
        match self.window {
            Some((from, at)) if byte >= at && byte >= range.start && byte < range.end => {
                let line_start = self.original[..from].rfind('\n').map_or(0, |i| i + 1);
                let original = (from + (byte - at)).min(self.original.len());
                Ok(self.original[line_start..original].chars().count() + 1)
            }
            _ => Ok(files::column_index(self.file.source(), range, byte) + 1),
        }
    }
}

pub type Result<T, E = CompileError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_show_a_window_at_the_true_line_and_column() {
        let long = vec!["X"; 2000].join(" + ");
        let text = format!("X = 1\ny = {long} + foo + é + {long}\nprint(y)\n");
        let at = text.find("foo").unwrap();
        let source = SourceFile::new("t.dml", text.clone());
        let shown = CompileError::at(
            CheckError::UnknownFunction { name: "foo".into() },
            Span::new(at, at + 3),
        )
        .render(&source);
        let line_start = text.find("y = ").unwrap();
        let column = text[line_start..at].chars().count() + 1;
        assert!(shown.contains(&format!("t.dml:2:{column}")), "{shown}");
        assert!(shown.contains("… ") && shown.contains(" …"), "{shown}");
        assert!(shown.contains("foo + é"), "{shown}");
        assert!(shown.lines().all(|l| l.chars().count() < 200), "{shown}");
        // The caret is under `foo` in the window.
        let lines: Vec<&str> = shown.lines().collect();
        let code = lines.iter().position(|l| l.contains("foo + é")).unwrap();
        let caret = lines[code + 1].chars().position(|c| c == '^').unwrap();
        let under: String = lines[code].chars().skip(caret).take(3).collect();
        assert_eq!(under, "foo", "{shown}");

        // A short line is shown whole.
        let source = SourceFile::new("t.dml", "x = 1\ny = x + foo\n");
        let shown = CompileError::at(
            CheckError::UnknownFunction { name: "foo".into() },
            Span::new(14, 17),
        )
        .render(&source);
        assert!(
            shown.contains("t.dml:2:9") && shown.contains("y = x + foo"),
            "{shown}"
        );
        assert!(!shown.contains('…'), "{shown}");

        // Spans past the end or inside a character are rendered, not a panic.
        let source = SourceFile::new("t.dml", "x = é\n");
        for (a, b) in [(5, 6), (4, 99), (99, 120), (6, 5)] {
            let shown =
                CompileError::at(SyntaxError::NestedFunction, Span::new(a, b)).render(&source);
            assert!(shown.contains("error: function definitions"), "{shown}");
        }
    }
}
