//! The one seam between the engine and what executes fused operators: a [`Backend`] turns
//! CPlans into [`Executable`] operators, and reports in a typed error why one cannot be built
//! (its hops then run unfused) or why one cannot run a call.
//!
//! Backends implementing it: the reference evaluator ([`crate::reference::ReferenceBackend`]),
//! native code generated with LLVM (`native::NativeBackend`, feature `llvm`) and with
//! Cranelift (`cranelift::CraneliftBackend`, feature `cranelift`). A further backend (PTX) is
//! one module implementing these two traits, and one arm in the engine's choice of backend.

use lafuse_compiler::fusion::cplan::{Access, CPlan};
use lafuse_core::ops::AggOp;
use lafuse_core::Fault;
use lafuse_runtime::error::Shape;
use lafuse_runtime::lineage::Lineage;
use lafuse_runtime::{Matrix, RuntimeError, ValueRange};
use lafuse_skeletons::row::RowInput;
use lafuse_skeletons::{AggKind, CellKind, EntryError, InputUse, SkeletonError};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Why an operator could not be built or could not run a call, by who is at fault
/// ([`CodegenError::fault`]).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum CodegenError {
    /// A valid plan or call this backend does not implement (names the construct). Not a
    /// failure: the engine runs such hops unfused, or such a call on the reference evaluator.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
    /// A bug, an LLVM failure, or inputs that do not match the operator.
    #[error("internal error: {0}")]
    Internal(Internal),
    /// The skeleton refused the call: an output larger than the memory the machine can give
    /// (the script's sizes), or a call that does not match the operator (a bug).
    #[error("{}", SkeletonMessage(.0))]
    Skeleton(SkeletonError),
    /// A runtime kernel the operator calls failed: out of memory, or a call of ours that does
    /// not match it.
    #[error("{}", RuntimeMessage(.0))]
    Runtime(RuntimeError),
}

/// A skeleton's error as a backend reports it: an output too large for memory as the
/// skeleton says it, anything else as the internal error it is.
struct SkeletonMessage<'a>(&'a SkeletonError);

impl fmt::Display for SkeletonMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            e if e.fault() == Fault::Resource => write!(f, "{e}"),
            e => write!(f, "internal error: {e}"),
        }
    }
}

/// A runtime kernel's error as a backend reports it: a resource error without the runtime's
/// `resources:` prefix, anything else as the internal error it is.
struct RuntimeMessage<'a>(&'a RuntimeError);

impl fmt::Display for RuntimeMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            RuntimeError::Resource(why) => write!(f, "{why}"),
            e => write!(f, "internal error: {e}"),
        }
    }
}

impl CodegenError {
    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            CodegenError::Unsupported(_) => Fault::Unsupported,
            CodegenError::Internal(_) => Fault::Internal,
            CodegenError::Skeleton(e) => e.fault(),
            CodegenError::Runtime(RuntimeError::Resource(_)) => Fault::Resource,
            CodegenError::Runtime(_) => Fault::Internal,
        }
    }
}

/// A valid plan or call a backend does not implement ([`CodegenError::Unsupported`]): the
/// construct, by name or by the values that make it one.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Unsupported {
    /// A backend this build does not have; `why` says what it lacks.
    #[error("{why}")]
    Backend { why: &'static str },
    /// A plan construct native code is not generated for, described.
    #[error("{0}")]
    Construct(&'static str),
    /// A plan of more nodes than native code is generated for.
    #[error(
        "native code for a fused operator of {nodes} nodes (at most {limit}); its operations run \
         unfused"
    )]
    TooManyNodes { nodes: usize, limit: usize },
    /// A node (by name) that a row plan cannot hold.
    #[error("{node} in a row plan")]
    NodeInRowPlan { node: &'static str },
    /// A node (by name) used where an element-wise one is needed.
    #[error("{node} is not element-wise")]
    NotElementWise { node: &'static str },
    /// A node (by name) that has no value per cell.
    #[error("{node} has no cell-wise value")]
    NoCellValue { node: &'static str },
    /// An n-ary operation (by name) in a cell-wise body.
    #[error("n-ary {op} in a cell-wise body")]
    NaryInCellBody { op: &'static str },
    /// A row aggregate no hop carries (`sumsq`, `sd`).
    #[error("row aggregate {op}")]
    RowAggregate { op: AggOp },
    /// A string literal in a numeric body.
    #[error("string literal {literal:?} in a body")]
    StringLiteral { literal: String },
    /// The main input of a row plan read other than as its rows.
    #[error("the main input read as {access:?}")]
    MainInputAccess { access: Access },
    /// An input read in a way a row plan does not implement.
    #[error("input {input} read as {access:?} in a row plan")]
    RowInputAccess { input: usize, access: Access },
    /// An input read in a way a cell-wise body does not implement (`transposed`: under a
    /// transpose).
    #[error(
        "input {input} read as {access:?}{} in a cell-wise body",
        if *.transposed { " under a transpose" } else { "" }
    )]
    CellInputAccess {
        input: usize,
        access: Access,
        transposed: bool,
    },
    /// An outer product's factor read other than as a factor.
    #[error("outer factor read as {access:?}")]
    OuterFactorAccess { access: Access },
    /// An input a cell-wise body reads in two ways.
    #[error("input {input} read both as {first:?} and as {then:?}")]
    InputUses {
        input: usize,
        first: InputUse,
        then: InputUse,
    },
    /// An input a row body reads in two ways.
    #[error("input {input} read both as {first:?} and as {then:?}")]
    RowInputUses {
        input: usize,
        first: RowInput,
        then: RowInput,
    },
    /// A Cell operator's shape class with an aggregation that does not fit it.
    #[error("cell type {kind:?} with aggregation {agg:?}")]
    CellAggregation {
        kind: CellKind,
        agg: Option<AggKind>,
    },
}

/// A bug in lafuse, or LLVM or Cranelift failing, while building or running an operator
/// ([`CodegenError::Internal`]).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum Internal {
    /// LLVM refused a step (`step` names it); `detail` is LLVM's message.
    #[error("{step}: {detail}")]
    Llvm { step: &'static str, detail: String },
    /// Cranelift refused a step (`step` names it); `detail` is its message.
    #[error("Cranelift, {step}: {detail}")]
    Cranelift { step: &'static str, detail: String },
    /// A helper library's module that LLVM's verifier refused; `detail` is LLVM's message.
    #[error("library {library} fails verification: {detail}")]
    LibraryVerification { library: String, detail: String },
    /// LLVM could not find the symbol `name`; `detail` is LLVM's message.
    #[error("looking up {name}: {detail}")]
    SymbolLookup { name: String, detail: String },
    /// The IR builder refused an instruction; `detail` is its message.
    #[error("IR building: {detail}")]
    IrBuilding { detail: String },
    /// No target machine for the host.
    #[error("cannot create a host target machine")]
    TargetMachine,
    /// Generated code that calls a symbol no helper defines.
    #[error("generated code calls unknown {name}")]
    UnknownSymbol { name: String },
    /// A symbol name with a NUL byte.
    #[error("symbol {name}")]
    SymbolName { name: String },
    /// An LLVM intrinsic that could not be declared.
    #[error("intrinsic {name} missing")]
    MissingIntrinsic { name: String },
    /// A call (`helper`, or any `call`) that should return a value and does not.
    #[error("{what} returns nothing")]
    NoReturnValue { what: &'static str },
    /// A generated function without its parameter `index`.
    #[error("function lacks parameter {index}")]
    MissingParameter { index: u32 },
    /// An entry point without its parameter `index`.
    #[error("entry point lacks parameter {index}")]
    EntryPointParameter { index: u32 },
    /// An input read before its pointers were loaded.
    #[error("input {input} not prepared")]
    InputNotPrepared { input: usize },
    /// A plan that does not hold together (the plan verifier should have refused it),
    /// described.
    #[error("{0}")]
    MalformedPlan(&'static str),
    /// A plan rewritten with its literals as parameters ([`crate::parameters`]) that the
    /// plan verifier refuses.
    #[error("a parameterized plan fails verification: {0}")]
    ParameterizedPlan(lafuse_compiler::fusion::cplan::VerifyError),
    /// A plan node reading an input position the plan does not have.
    #[error("input {input} outside the plan")]
    InputOutsidePlan { input: usize },
    /// A plan node id beyond the plan's nodes.
    #[error("node {node} missing")]
    NodeMissing { node: usize },
    /// A plan node whose operand comes after it.
    #[error("node {node} uses a later node")]
    LaterOperand { node: usize },
    /// A CSR entry point asked of a plan of `template` that is not sparse-safe.
    #[error("a CSR entry point for a sparse-unsafe {template} plan")]
    SparseUnsafeCsr { template: &'static str },
    /// An entry point (by name) the operator's template does not have.
    #[error("the operator has no {entry} entry point")]
    NoEntryPoint { entry: &'static str },
    /// A call with another number of output shapes than the operator has outputs.
    #[error("operator has {outputs} outputs, {shapes} shapes given")]
    OutputCount { outputs: usize, shapes: usize },
    /// An output of another shape than the call asked for.
    #[error(
        "output is {}x{}, expected {}x{}",
        .got.0,
        .got.1,
        .expected.0,
        .expected.1
    )]
    OutputShape { got: Shape, expected: Shape },
    /// Inputs that do not fit a Row operator.
    #[error("row operator inputs: {0}")]
    RowInputs(RowInputs),
    /// An entry point the generator could not give, with an error not of this crate's type.
    #[error("{}", .error.0)]
    EntryPoint { error: EntryError },
    /// A backend that returned fewer operators than it was asked for.
    #[error("the backend built fewer operators than requested")]
    MissingOperators,
    /// The reference evaluator refused a plan or call.
    #[error("reference evaluation: {0}")]
    Reference(crate::reference::Invalid),
}

/// How the inputs of a Row operator's call do not fit it ([`Internal::RowInputs`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RowInputs {
    #[error("operator takes {expected} inputs, got {got}")]
    Count { expected: usize, got: usize },
    #[error("the main input must be a matrix")]
    MainNotMatrix,
    /// An input read row-aligned with the main input with another number of rows.
    #[error("input {input} has {rows} rows, not {expected}")]
    Rows {
        input: usize,
        rows: usize,
        expected: usize,
    },
    #[error("element-wise operands of lengths {left} and {right}")]
    ElementWiseLengths { left: usize, right: usize },
    /// A row vector times a matrix of another number of rows.
    #[error("a row of length {row} times a matrix of {rows} rows")]
    VectorMatrix { row: usize, rows: usize },
    #[error(
        "output is {}x{}, expected {}x{}",
        .got.0,
        .got.1,
        .expected.0,
        .expected.1
    )]
    Output { got: Shape, expected: Shape },
}

/// The format of an operator's main input that a backend prepares for first (the native
/// backend compiles that entry point with the operator, any other on the first call that
/// needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MainFormat {
    Dense,
    Sparse,
}

/// An input value of a fused operator, by CPlan input position.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A scalar.
    Scalar(f64),
    /// A matrix.
    Matrix(&'a Matrix),
}

/// One operator to build: its plan and the format its main input is expected in.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub plan: &'a Arc<CPlan>,
    pub main: MainFormat,
}

/// How a built operator came to be, for statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Nothing was compiled (an interpreter).
    Interpreted,
    /// Found in the backend's operator cache.
    CacheHit,
    /// Compiled now (`loaded_from_store`: its machine code came from the on-disk store), and
    /// why the cache missed.
    Compiled {
        miss_reason: String,
        loaded_from_store: bool,
    },
}

/// A built operator and how it came to be.
#[derive(Clone, Debug)]
pub struct Built {
    pub executable: Arc<dyn Executable>,
    pub origin: Origin,
}

/// A fused operator ready to run. `Send + Sync`: blocks run on any thread.
pub trait Executable: Send + Sync + fmt::Debug {
    /// Runs the operator: inputs by CPlan position, one output per plan output with the given
    /// shapes, in the runtime's preferred format. `known` holds the value ranges the caller
    /// knows of some inputs (by position), so that they need not be scanned.
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError>;

    /// [`Executable::execute`], told the lineage items of the inputs (by position; `None` or
    /// past the end: not traced): an operator that keeps device copies of its inputs reuses
    /// them by these. The default ignores them.
    fn execute_traced(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        lineage: &[Option<Lineage>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let _ = lineage;
        self.execute(inputs, out_shapes, known)
    }

    /// Code generation time spent on this operator so far: it grows when an entry point is
    /// compiled on the first call that needs it, which callers count as code generation.
    fn compile_time(&self) -> Duration {
        Duration::ZERO
    }
}

/// What executes fused operators.
pub trait Backend: Send + Sync {
    /// A short stable name (`native`, `reference`).
    fn name(&self) -> &'static str;

    /// One operator per request, in order (a backend may build them in parallel), or why that
    /// plan cannot be built here.
    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>>;
}

/// A backend this build of lafuse does not have: every request is `Unsupported` with `why`,
/// so the engine runs every operator's hops unfused and says why.
#[derive(Clone, Copy, Debug)]
pub struct Unavailable {
    pub name: &'static str,
    pub why: &'static str,
}

impl Backend for Unavailable {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        requests
            .iter()
            .map(|_| {
                Err(CodegenError::Unsupported(Unsupported::Backend {
                    why: self.why,
                }))
            })
            .collect()
    }
}

/// Where fused operators run (`lafuse run --device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// On the CPU (native code), always.
    #[default]
    Cpu,
    /// On the GPU wherever the GPU backend generates the operator and a GPU is present;
    /// elsewhere on the CPU.
    Gpu,
    /// On the GPU where the placement cost model (transfers included) expects it to be faster.
    Auto,
}

impl Placement {
    /// `cpu`, `gpu` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Cpu => "cpu",
            Placement::Gpu => "gpu",
            Placement::Auto => "auto",
        }
    }
}
