//! The one seam between the engine and what executes fused operators: a [`Backend`] turns
//! CPlans into [`Executable`] operators, and reports in a typed error why one cannot be built
//! (its hops then run unfused) or why one cannot run a call.
//!
//! Two backends implement it: the reference evaluator ([`crate::reference::ReferenceBackend`])
//! and native code generated with LLVM (`native::NativeBackend`, feature `llvm`). A further
//! backend (a Cranelift tier, PTX) is one module implementing these two traits, and one arm in
//! the engine's choice of backend.

use lafuse_compiler::fusion::cplan::CPlan;
use lafuse_core::Fault;
use lafuse_runtime::{Matrix, RuntimeError, ValueRange};
use lafuse_skeletons::SkeletonError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why an operator could not be built or could not run a call, by who is at fault
/// ([`CodegenError::fault`]).
#[derive(Clone, Debug, PartialEq)]
pub enum CodegenError {
    /// A valid plan or call this backend does not implement (names the construct). Not a
    /// failure: the engine runs such hops unfused, or such a call on the reference evaluator.
    Unsupported(String),
    /// A bug, an LLVM failure, or inputs that do not match the operator.
    Internal(String),
    /// The skeleton refused the call: an output larger than the memory the machine can give
    /// (the script's sizes), or a call that does not match the operator (a bug).
    Skeleton(SkeletonError),
    /// A runtime kernel the operator calls failed: out of memory, or a call of ours that does
    /// not match it.
    Runtime(RuntimeError),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::Unsupported(s) => write!(f, "unsupported: {s}"),
            CodegenError::Internal(s) => write!(f, "internal error: {s}"),
            CodegenError::Skeleton(e) if e.fault() == Fault::Resource => write!(f, "{e}"),
            CodegenError::Runtime(RuntimeError::Resource(why)) => write!(f, "{why}"),
            CodegenError::Skeleton(e) => write!(f, "internal error: {e}"),
            CodegenError::Runtime(e) => write!(f, "internal error: {e}"),
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

impl std::error::Error for CodegenError {}

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
            .map(|_| Err(CodegenError::Unsupported(self.why.to_string())))
            .collect()
    }
}
