//! The engine's error type: a compile error or a runtime error, located in the script, or
//! what went wrong around a script (its file, its arguments, explain, calibrate, bench), each
//! an enum of causes whose variant says who has to act ([`Error::fault`]).

use lafuse_codegen::backend::CodegenError;
use lafuse_compiler::error::{render_diagnostic, CompileError};
use lafuse_compiler::fusion::CostModelError;
use lafuse_compiler::span::{SourceFile, Span};
use lafuse_core::Fault;
use lafuse_runtime::error::CsrDefect;
use lafuse_runtime::RuntimeError;
use std::path::PathBuf;
use thiserror::Error;

/// Anything that stops a script: compile errors (possibly several) or a runtime error at an
/// instruction. [`Error::render`] prints it with the offending script line and a caret.
#[derive(Debug, Error)]
pub enum Error {
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Compile(Vec<CompileError>),
    #[error("{error}")]
    Runtime {
        error: RuntimeError,
        span: Option<Span>,
    },
    /// A file lafuse was pointed at cannot be read or written (the script, a machine profile,
    /// a report), or an argument or option is malformed.
    #[error("{0}")]
    Usage(Usage),
    /// An embedder's inputs or outputs do not match what the prepared script or DAG declares.
    #[error("{0}")]
    Binding(Binding),
    /// A valid request outside a script that lafuse does not implement (an explain format or
    /// level this build cannot give); names the construct.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
    /// A bug in lafuse outside a script's execution (explain, calibrate).
    #[error("internal: {0}")]
    Internal(Internal),
    /// A lineage log that cannot be recomputed ([`crate::Engine::recompute`]).
    #[error("recompute: {0}")]
    Recompute(Recompute),
    /// A machine profile or a cost-model override was refused; `context` names the file or
    /// argument.
    #[error("{context}: {error}")]
    CostModel {
        context: String,
        error: lafuse_compiler::fusion::CostModelError,
    },
}

/// A file or argument of the user's that lafuse cannot use ([`Error::Usage`]).
#[derive(Debug, Error)]
pub enum Usage {
    /// A script argument that is not `name=value`.
    #[error("script argument '{argument}' is not of the form name=value")]
    ScriptArgument { argument: String },
    /// A script argument whose name is not a DML identifier.
    #[error("script argument name '{name}' is not a valid DML identifier")]
    ScriptArgumentName { name: String },
    #[error("cannot read the script '{}': {source}", .path.display())]
    ReadScript {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the machine profile '{}': {source}", .path.display())]
    ReadProfile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the machine profile '{}': {source}", .path.display())]
    WriteProfile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `calibrate --threads 0`.
    #[error("calibrate: threads must be at least 1")]
    CalibrateThreads,
    /// A cache-resident array of `cells` cells, not in `1..=max`.
    #[error("calibrate: the cache-resident array must have 1 to {max} cells, got {cells}")]
    CalibrateCacheCells { cells: usize, max: usize },
    /// A matrix multiply of `size` x `size`, below 2.
    #[error("calibrate: the matrix multiply size must be at least 2, got {size}")]
    CalibrateMatmulSize { size: usize },
    /// `bench` without its examples folder.
    #[error(
        "bench: examples folder {} not found (give --examples DIR: the folder with micro/ and \
         algorithms/)",
        .path.display()
    )]
    BenchExamples { path: PathBuf },
    #[error("bench: cannot find the lafuse executable: {source}")]
    BenchExecutable { source: std::io::Error },
    #[error("bench: cannot create the report folder {}: {source}", .path.display())]
    BenchReportFolder {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `bench --filter` that matches no case of `suite` (`filter`: the filters as given).
    #[error(
        "bench: no case of suite `{suite}` matches --filter {filter} (a case's text is its \
         pattern or algorithm and its data, e.g. `sum_xyz dense 100000x1000`, `outer sp=1e-4 \
         20000^2 k=100`, `l2svm sp=0.01 100000x200`; --quick uses smaller sizes)"
    )]
    BenchNoMatch { suite: &'static str, filter: String },
    #[error("bench: cannot write the report: {source}")]
    BenchReport { source: std::io::Error },
    /// A matrix an embedder handed over (`interop::MatrixView`) that lafuse cannot take.
    #[error("{0}")]
    Matrix(MatrixInput),
}

/// What is wrong with an embedder's matrix ([`Usage::Matrix`]).
#[derive(Debug, Error)]
pub enum MatrixInput {
    /// A dimension above `max` (`lafuse_runtime::matrix::MAX_DIM`, SystemDS's limit).
    #[error(
        "a {}x{} matrix: dimensions above {max} are not supported",
        .shape.0,
        .shape.1
    )]
    DimensionsBeyondLimit { shape: (usize, usize), max: usize },
    /// Row-major values that do not fill the shape.
    #[error(
        "a {}x{} matrix needs {} values, got {values}",
        .shape.0,
        .shape.1,
        .shape.0 * .shape.1
    )]
    ValuesDoNotFill {
        shape: (usize, usize),
        values: usize,
    },
    /// CSR arrays that break an invariant of `lafuse_runtime::matrix`.
    #[error("the CSR arrays of a {}x{} matrix are invalid: {defect}", .shape.0, .shape.1)]
    Csr {
        shape: (usize, usize),
        defect: CsrDefect,
    },
    /// The column index stored at `position` (counted over all rows) is not below the
    /// columns.
    #[error(
        "the CSR arrays of a {}x{} matrix are invalid: stored entry {position} has column \
         index {column}, not below {}",
        .shape.0,
        .shape.1,
        .shape.1
    )]
    ColumnIndex {
        shape: (usize, usize),
        position: usize,
        column: usize,
    },
}

/// Inputs or outputs of a prepared script or DAG that do not match its declaration
/// ([`Error::Binding`]); always the embedder's to fix.
#[derive(Debug, Error)]
pub enum Binding {
    /// An input or output name given twice, or empty, when preparing.
    #[error("the {role} name '{name}' is empty or given twice")]
    BadName { name: String, role: &'static str },
    /// A value bound to a name the script or DAG does not take as an input.
    #[error("'{name}' is not an input (the inputs are: {})", list(.inputs))]
    UnknownInput { name: String, inputs: Vec<String> },
    /// An input left unbound.
    #[error("the input '{name}' is not bound (bind every input before executing)")]
    Unbound { name: String },
    /// A declared output the execution never assigned.
    #[error("the output '{name}' was not assigned by the script")]
    OutputUnassigned { name: String },
    /// An output asked for that was not declared.
    #[error("'{name}' is not an output (the outputs are: {})", list(.outputs))]
    UnknownOutput { name: String, outputs: Vec<String> },
    /// An output taken as the wrong kind of value.
    #[error("the output '{name}' is a {found}, not a {expected}")]
    OutputType {
        name: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A DAG input bound to a value of the other data type (a matrix for a scalar input).
    #[error("the DAG input '{name}' is a {declared}, but a {bound} was bound")]
    InputKind {
        name: String,
        declared: &'static str,
        bound: &'static str,
    },
    /// A DAG input bound to a matrix whose shape differs from the one the DAG declares.
    #[error(
        "the DAG input '{name}' is declared {} but bound to a {}x{} matrix",
        shape(*.declared),
        .bound.0,
        .bound.1
    )]
    InputShape {
        name: String,
        declared: (Option<u64>, Option<u64>),
        bound: (usize, usize),
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

fn shape((rows, cols): (Option<u64>, Option<u64>)) -> String {
    let dim = |d: Option<u64>| d.map_or("?".to_string(), |d| d.to_string());
    format!("{}x{}", dim(rows), dim(cols))
}

/// A valid request outside a script that this build does not implement
/// ([`Error::Unsupported`]).
#[derive(Debug, Error)]
pub enum Unsupported {
    /// `--format dot` for a report (`report`) that only has text and JSON.
    #[error("--format dot for {report}; use text or json")]
    DotFormat { report: &'static str },
    /// `explain --level ir|asm` in a build without native code generation.
    #[error("--level ir|asm needs native code generation (build with the `llvm` feature)")]
    NativeCode,
    /// `explain --level ptx` in a build without the GPU backend.
    #[error("--level ptx needs the GPU backend (build with the `cuda` feature)")]
    PtxCode,
}

/// Why a lineage log cannot be recomputed ([`Error::Recompute`]). Items are named by their
/// number in the log, `(n)`, which starts their line.
#[derive(Debug, Error)]
pub enum Recompute {
    /// The log is not a lineage log (its line is named).
    #[error("{0}")]
    Log(lafuse_runtime::lineage::LogError),
    /// The value depends on a variable bound from outside the script (an embedder's input),
    /// whose history lafuse never saw.
    #[error(
        "variable '{name}' was bound from outside the script; its value is not in the lineage \
         (run the script that made it with --lineage and recompute from that log)"
    )]
    InputVariable { name: String },
    /// A file the value was read from is not the file it was then.
    #[error(
        "the file '{path}' read by item ({item}) {change}, so the value cannot be reproduced \
         (restore the file, or run the script again with --lineage)"
    )]
    FileChanged {
        path: String,
        item: usize,
        change: FileChange,
    },
    /// A dedup item (LIMA 3.2) whose patch has a placeholder beyond the item's inputs: the
    /// log was damaged or made by hand.
    #[error(
        "lineage log item ({item}) is a dedup item whose patch needs more inputs than it has; \
         the log is damaged"
    )]
    Deduplicated { item: usize },
    /// An item that does not describe a computation lafuse can rebuild.
    #[error("lineage log item ({item}) \"{opcode}\": {defect}")]
    Item {
        item: usize,
        opcode: String,
        defect: ItemDefect,
    },
}

/// How a file read by a value's lineage differs from when it was read.
#[derive(Debug, Error)]
pub enum FileChange {
    #[error("is missing")]
    Missing,
    #[error("was {recorded} bytes and is now {now}")]
    Size { recorded: String, now: String },
    #[error("was modified since it was read (modification time {recorded} ns then, {now} ns now)")]
    Modified { recorded: String, now: String },
}

/// What is wrong with one item of a lineage log ([`Recompute::Item`]).
#[derive(Debug, Error)]
pub enum ItemDefect {
    /// A literal whose data is not `<value>·<TYPE>`.
    #[error("the literal '{data}' is not of the form <value>·<DOUBLE|INT|BOOLEAN|STRING>")]
    Literal { data: String },
    /// An instruction whose data is not the JSON of a hop's op kind.
    #[error("its data is not a hop's op kind in JSON: {source}")]
    OpKind { source: serde_json::Error },
    /// An op that produces no value (a write, a print) or is not an operation (a variable).
    #[error("it is not an operation that computes a value")]
    NotAValue,
    /// An instruction whose inputs do not fit its op (arity, types, shapes).
    #[error("{source}")]
    Hop {
        source: lafuse_compiler::CompileError,
    },
    /// A patch's placeholder: a log of a patch, not of a value.
    #[error("a placeholder (the log is a lineage patch, not the lineage of a value)")]
    Placeholder,
    /// A creation item lafuse does not make, or a file's identity anywhere but as a read's
    /// last input.
    #[error("a creation item that is not a read's file identity or a bound variable")]
    Creation,
    /// A read without its file's identity as last input.
    #[error("a read whose last input is not its file's identity (a `C \"file\"` item)")]
    ReadIdentity,
    /// A file identity whose data is not `{path, format, size, modified}`.
    #[error("the file identity is not JSON with path, format, size and modified: {source}")]
    FileIdentity { source: serde_json::Error },
    /// `time()` without the literal of the value it returned as its one input.
    #[error("time() without the integer literal of the time it returned")]
    TimeValue,
}

/// A bug in lafuse outside a script's execution ([`Error::Internal`]).
#[derive(Debug, Error)]
pub enum Internal {
    /// A fusion plan whose JSON does not read back.
    #[error("fusion JSON: {source}")]
    FusionJson { source: serde_json::Error },
    /// The native backend failed on a plan `explain` prints the code of.
    #[error("code generation: {source}")]
    CodeGeneration { source: CodegenError },
    /// Calibration's large array came out sparse.
    #[error("calibrate: the large array is not dense")]
    CalibrationNotDense,
    /// A measured cost-model constant the model refused.
    #[error("calibrate: {source}")]
    CalibratedConstant { source: CostModelError },
    /// A calibrated model that does not validate.
    #[error("calibrate measured {source}")]
    CalibratedModel { source: CostModelError },
    /// A matrix of lafuse's that the embedder's type `to` refused (`interop`): its arrays break
    /// the matrix invariants.
    #[error("a {}x{} matrix does not convert to {to}", .shape.0, .shape.1)]
    MatrixExport {
        to: &'static str,
        shape: (usize, usize),
    },
}

impl From<CompileError> for Error {
    fn from(e: CompileError) -> Self {
        Error::Compile(vec![e])
    }
}

impl From<Vec<CompileError>> for Error {
    fn from(e: Vec<CompileError>) -> Self {
        Error::Compile(e)
    }
}

impl Error {
    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            Error::Compile(errors) => errors.first().map_or(Fault::Internal, CompileError::fault),
            Error::Runtime { error, .. } => error.fault(),
            Error::Usage(_) | Error::Binding(_) => Fault::User,
            Error::Recompute(_) => Fault::User,
            Error::Unsupported(_) => Fault::Unsupported,
            Error::Internal(_) => Fault::Internal,
            Error::CostModel { error, .. } => error.fault(),
        }
    }

    /// The error as the CLI prints it: `error: message`, then `file:line:col`, the source line
    /// and a caret under the offending expression.
    pub fn render(&self, source: &SourceFile) -> String {
        match self {
            Error::Compile(errors) => errors
                .iter()
                .map(|e| e.render(source))
                .collect::<Vec<_>>()
                .join("\n"),
            Error::Runtime { error, span } => {
                // The runtime error's text is the headline (an internal one's says "internal
                // error" itself).
                render_diagnostic(&error.to_string(), *span, &[], source)
            }
            Error::Usage(message) => format!("error: {message}\n"),
            Error::Recompute(_) => format!("error: {self}\n"),
            Error::Binding(message) => format!("error: {message}\n"),
            Error::Unsupported(_) | Error::Internal(_) | Error::CostModel { .. } => {
                format!("error: {self}\n")
            }
        }
    }
}
