//! Native fused operators: CPlan → LLVM IR → optimized machine code for the host CPU (DESIGN
//! section 4), hosted by the skeletons of `lafuse_skeletons`.
//!
//! Each entry point of a template (a loop over a row range of a dense main input; one over a
//! CSR main input where the template iterates non-zeros: sparse-safe Cell, Outer, Row; and
//! Outer's loop over every cell, for calls whose driver zeros cannot be skipped) goes into a
//! module of its own, with the body inlined, which is verified, optimized for the host CPU and
//! JIT-compiled. [`compile_for`] does this for the entry point the expected main-input format
//! runs; any other is compiled on the first execution that needs it (machine-code generation
//! dominates compile time, and most operators only ever see one format, so this roughly
//! halves it for the templates that have both). [`NativeOperator::execute`] has the contract
//! of [`reference::evaluate`](crate::reference::evaluate). Implemented: Cell (all types and
//! aggregations), MultiAgg, Outer (all types), Row (all row types).
//!
//! Module map: `llvm` (everything LLVM-version specific), `expr` (body emission and the Java
//! scalar semantics), `cell` (Cell and MultiAgg loops), `outer` (Outer loops and primitives),
//! `row` (Row loops, vector primitives and per-call layouts), `library` (plan-independent
//! functions compiled once per process), `cache` (the operator cache).

mod cache;
pub(crate) mod cell;
pub(crate) mod expr;
mod library;
pub(crate) mod llvm;
pub mod math;
mod orc;
mod outer;
mod row;
mod store;

mod backend;

pub use crate::backend::{CodegenError, MainFormat};
use crate::backend::{Internal, Unsupported};
pub use backend::NativeBackend;
pub use cache::{CacheStats, Lookup, MissReason, OperatorCache, DEFAULT_OPERATOR_CAPACITY};
pub use store::{ObjectStore, StoreRefusal};

use crate::backend::Operand;
use crate::zero_cells::{self, InputBound};
use cell::{CellLike, FULL_LANES, LANES};
use inkwell::module::Module;
use lafuse_compiler::fusion::cplan::{CNode, CPlan, TemplateSpec};
use lafuse_runtime::{Matrix, ValueRange};
use lafuse_skeletons::abi::KernelFn;
use lafuse_skeletons::{
    cell as sk_cell, magg as sk_magg, outer as sk_outer, row as sk_row, CellKernels, CellKind,
    CellSpec, EntryError, Input, LazyEntry, MAggKernels, MAggSpec, OuterKernels, OuterSpec,
    OuterTiles, SkeletonError,
};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Where one compilation's time went (the phases of [`compile`], in order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompilePhases {
    /// Building the LLVM IR from the plan.
    pub emit: Duration,
    /// Verifying the module before and after optimization.
    pub verify: Duration,
    /// The optimization pass pipeline.
    pub optimize: Duration,
    /// Creating the JIT engine and mapping the helper functions.
    pub jit: Duration,
    /// Looking up the entry points, which makes the JIT emit and link the machine code.
    pub machine_code: Duration,
}

/// What the operator's skeleton needs (its entry points live in [`NativeOperator`]).
#[derive(Clone, Debug)]
enum Kind {
    Cell(CellSpec),
    MAgg(MAggSpec),
    Outer(OuterSpec),
    Row(Box<row::RowInfo>, sk_row::RowSpec),
}

/// A compiled fused operator: generated code plus the skeleton that hosts it. `Send + Sync`;
/// it owns the JITs (and so the machine code) of its entry points for its lifetime: the one
/// [`compile_for`] made, and each other one from the first execution that needs it.
pub struct NativeOperator {
    kind: Kind,
    num_outputs: usize,
    /// The plan, kept to compile the other entry points later.
    plan: CPlan,
    /// The entry point compiled with the operator.
    first: Entry,
    /// Each entry point once requested (or why it failed to compile); compiled at most once,
    /// concurrent first executions wait for it.
    dense: OnceLock<Result<EntryCode, CodegenError>>,
    csr: OnceLock<Result<EntryCode, CodegenError>>,
    /// Outer: every cell of the driver (see [`Entry::EveryCell`]).
    every_cell: OnceLock<Result<EntryCode, CodegenError>>,
    /// Outer: every cell of blocks, over tiles of the product (see [`Entry::Tiles`]).
    tiles: OnceLock<Result<EntryCode, CodegenError>>,
    /// Time and phases of [`compile_for`] (the first entry point, libraries it waited for).
    compile_time: Duration,
    compile_phases: CompilePhases,
    /// `llvm_ir`/`assembly` text of a dense entry point that failed to compile.
    failure_text: OnceLock<String>,
    /// A Cell operator whose body runs in its main input's transposed frame (see
    /// [`transposed_frame`]): its output is relabelled to the transposed shape.
    transposed_frame: bool,
    /// The first entry point's machine code came from the object store.
    loaded: bool,
    /// Where entry points compiled later are looked up and kept.
    store: Option<Arc<ObjectStore>>,
}

impl fmt::Debug for NativeOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeOperator")
            .field("kind", &self.kind)
            .field("compile_time", &self.compile_time())
            .field("first", &self.first)
            .field("csr_compiled", &self.csr_compiled().is_some())
            .finish()
    }
}

// The PTX kernels take these from here too.
#[cfg(feature = "ptx")]
pub(crate) use crate::plan_info::{agg_kind, input_uses};
pub(crate) use crate::plan_info::{transposed_frame, used_mask};

/// Which entry point of a template a module holds. Each is compiled into its own module and
/// JIT: the dense one by [`compile`], the CSR one (where the template has one) on the first
/// execution with a CSR main input, so the common all-dense case never pays machine-code
/// generation for the other; Outer's every-cell one on the first call whose zeros cannot be
/// skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Dense,
    Csr,
    /// Outer only: every cell of a dense (or densified) driver.
    EveryCell,
    /// Outer only: every cell of blocks of a dense (or densified) driver, with the block's
    /// dot products computed by the skeleton as a tile of `U %*% t(V)`.
    Tiles,
}

impl Entry {
    /// The entry point's name in messages.
    fn name(self) -> &'static str {
        match self {
            Entry::Dense => "Dense",
            Entry::Csr => "Csr",
            Entry::EveryCell => "EveryCell",
            Entry::Tiles => "Tiles",
        }
    }
}

/// The machine code of one entry point: in an execution engine (compiled in this process) or
/// loaded from object code (compiled for, or found in, the on-disk [`ObjectStore`]).
pub(crate) enum Machine {
    Engine(llvm::Jit),
    /// The object's loader and the optimized module's IR text.
    Object(orc::ObjectJit, String),
}

impl Machine {
    fn function(&self, name: &str) -> Result<usize, CodegenError> {
        match self {
            Machine::Engine(jit) => jit.function(name),
            Machine::Object(jit, _) => jit.function(name),
        }
    }

    fn ir(&self) -> String {
        match self {
            Machine::Engine(jit) => jit.ir(),
            Machine::Object(_, ir) => ir.clone(),
        }
    }
}

/// One compiled module: its machine code, the emission result and the compilation's time.
struct Built {
    machine: Machine,
    pending: Pending,
    phases: CompilePhases,
    /// The machine code came from the object store.
    loaded: bool,
}

/// The addresses of what generated code calls: lafuse's helpers and libraries. A library no
/// one has built yet is built here, through `store` (an operator starts building the libraries
/// it calls beside its own compilation, but may reach this point first).
fn helper_address(name: &str, store: Option<&ObjectStore>) -> Option<usize> {
    expr::helper_address(name)
        .or_else(|| row::block_address(name))
        .or_else(|| {
            // Only the library that defines `name` is built: the lookup runs for every external
            // function an operator declares.
            let library = LibraryId::ALL.into_iter().find(|l| l.defines(name))?;
            library.library(store).ok()?.address(name)
        })
}

/// Phase times of one compilation, taken lap by lap; shared (interior mutability) by the
/// emission and optimization steps, which run as separate callbacks.
struct Laps {
    phases: std::cell::RefCell<CompilePhases>,
    lap: std::cell::Cell<Instant>,
}

impl Laps {
    fn new() -> Laps {
        Laps {
            phases: Default::default(),
            lap: std::cell::Cell::new(Instant::now()),
        }
    }

    /// Adds the time since the last lap to the phase `slot` picks.
    fn tick(&self, slot: fn(&mut CompilePhases) -> &mut Duration) {
        let now = Instant::now();
        *slot(&mut self.phases.borrow_mut()) += now - self.lap.replace(now);
    }
}

/// Emits `entry` of `plan` into a fresh module, verifies, optimizes and JIT-compiles it; with
/// a `store`, compiles it through the store instead ([`store::compile_through`]: loaded where
/// an earlier process kept the same verified module, else compiled to object code and kept).
/// `phases.machine_code` is left to the caller (it is paid by the first address lookup).
fn build(plan: &CPlan, entry: Entry, store: Option<&ObjectStore>) -> Result<Built, CodegenError> {
    let laps = Laps::new();
    let prepare = |ctx, module: &inkwell::module::Module<'static>| {
        let k = emit(ctx, module, plan, entry)?;
        laps.tick(|p| &mut p.emit);
        llvm::verify(module, "generated module fails verification")?;
        laps.tick(|p| &mut p.verify);
        Ok(k)
    };
    let optimize = |module: &inkwell::module::Module<'static>, tm: &_| {
        llvm::optimize(module, tm)?;
        laps.tick(|p| &mut p.optimize);
        llvm::verify(module, "optimized module fails verification")?;
        laps.tick(|p| &mut p.verify);
        Ok(())
    };
    let (machine, pending, loaded) = match store {
        None => {
            let helpers = |name: &str| helper_address(name, None);
            let (jit, pending) = llvm::jit_module("lafuse_op", prepare, optimize, helpers)?;
            laps.tick(|p| &mut p.jit);
            (Machine::Engine(jit), pending, false)
        }
        Some(store) => {
            let helpers = |name: &str| helper_address(name, Some(store));
            let made = store::compile_through(store, "lafuse_op", prepare, optimize, helpers)?;
            // Until the load: the object's code generation on a miss, reading the entry on
            // a hit.
            let rest = laps.lap.get().elapsed().saturating_sub(made.load);
            let mut phases = laps.phases.borrow_mut();
            phases.jit += made.load;
            if made.loaded {
                phases.jit += rest;
            } else {
                phases.machine_code += rest;
            }
            // What a tiered backend reads to start this operator on LLVM next time.
            let marker = store::plan_marker_key(plan, entry.name());
            if !made.loaded || !store.has_marker(&marker) {
                store.mark(&marker);
            }
            (made.machine, made.built, made.loaded)
        }
    };
    Ok(Built {
        machine,
        pending,
        phases: laps.phases.into_inner(),
        loaded,
    })
}

/// Builds the process-wide function library that operators call (the vector math of
/// `log`/`exp`) if it is not built yet, and returns how long that
/// took (they build in parallel). Operators otherwise build them on first use, and that first
/// compilation's time includes theirs; an embedder can pay it up front instead.
pub fn build_libraries() -> Result<Duration, CodegenError> {
    use rayon::prelude::*;
    let start = Instant::now();
    // In parallel, on the rayon pool, as operators build the ones they call.
    LibraryId::ALL.par_iter().try_for_each(|l| l.build(None))?;
    Ok(start.elapsed())
}

/// The process-wide libraries this process has built so far (`lafuse_math`): what its
/// compilations paid for besides their operators. (The Row block primitives are functions
/// of the skeletons crate and cost no compilation.)
pub fn built_libraries() -> Vec<&'static str> {
    LibraryId::ALL
        .into_iter()
        .filter(|l| l.built())
        .map(LibraryId::name)
        .collect()
}

/// A process-wide library generated code calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LibraryId {
    /// Vector `log`/`exp` (`math`).
    Math,
}

impl LibraryId {
    const ALL: [LibraryId; 1] = [LibraryId::Math];

    fn name(self) -> &'static str {
        match self {
            LibraryId::Math => "lafuse_math",
        }
    }

    /// Whether it is built (or failed to build).
    fn built(self) -> bool {
        match self {
            LibraryId::Math => math::library_built(),
        }
    }

    /// Whether it defines function `name`.
    fn defines(self, name: &str) -> bool {
        match self {
            LibraryId::Math => math::defines(name),
        }
    }

    /// It, built by the first call, through `store` if given.
    fn library(
        self,
        store: Option<&ObjectStore>,
    ) -> Result<&'static library::Library, CodegenError> {
        match self {
            LibraryId::Math => math::library(store),
        }
    }

    /// Builds it if no one has, through `store` if given.
    fn build(self, store: Option<&ObjectStore>) -> Result<(), CodegenError> {
        self.library(store).map(drop)
    }
}

/// The libraries `plan` calls, as far as its nodes tell (a library missed here is built when
/// the operator's JIT maps its calls, only without overlapping the operator's compilation).
fn libraries_needed(plan: &CPlan) -> Vec<LibraryId> {
    use lafuse_compiler::hops::{BinaryOp, UnaryOp};
    let math = plan.nodes.iter().any(|n| {
        matches!(
            n,
            CNode::Unary {
                f: UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sigmoid | UnaryOp::Tanh,
                ..
            } | CNode::Binary {
                f: BinaryOp::Log,
                ..
            }
        )
    });
    LibraryId::ALL
        .into_iter()
        .filter(|l| match l {
            LibraryId::Math => math,
        })
        .collect()
}

/// Compiles a CPlan into a native operator for a dense main input: the dense entry point now,
/// the CSR entry point (sparse-safe Cell and MultiAgg, Outer, Row) on the first execution
/// with a CSR main input.
pub fn compile(plan: &CPlan) -> Result<NativeOperator, CodegenError> {
    compile_for(plan, MainFormat::Dense)
}

/// Largest operator body compiled to native code. Machine-written scripts can chain tens of
/// thousands of operations in one basic block; past this size the compile time (seconds) and
/// LLVM's recursion (see `llvm::LLVM_STACK`) grow with the chain while fusion saves little
/// more, so such an operator runs unfused instead.
pub const MAX_BODY_NODES: usize = 20_000;

/// How an operator runs where the choice is the machine's rather than the plan's: set by the
/// backend from the engine's cost model, the same for every operator it builds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOptions {
    /// An Outer operator runs over tiles of `U %*% t(V)` for a driver of at least this
    /// density ([`CostModel::outer_tile_density`](lafuse_compiler::fusion::CostModel::outer_tile_density)).
    pub outer_tile_density: f64,
}

impl RunOptions {
    /// The options the cost model `model` implies.
    pub fn for_model(model: &lafuse_compiler::fusion::CostModel) -> RunOptions {
        RunOptions {
            outer_tile_density: model.outer_tile_density(),
        }
    }
}

impl Default for RunOptions {
    /// Those of the default cost model (SystemDS's constants).
    fn default() -> RunOptions {
        RunOptions::for_model(&lafuse_compiler::fusion::CostModel::default())
    }
}

/// Compiles a CPlan into a native operator whose main input is expected in format `main`: the
/// entry point that format runs now (the CSR one for a sparse main input, where the template
/// has one), any other on the first execution that needs it. A compilation is most of an
/// operator's first-call cost, so compiling the entry point the calls will not run doubles it.
pub fn compile_for(plan: &CPlan, main: MainFormat) -> Result<NativeOperator, CodegenError> {
    compile_with(plan, main, None)
}

/// The entry point an operator compiles first for a main input in format `main`.
fn first_entry(plan: &CPlan, main: MainFormat) -> Entry {
    if main == MainFormat::Sparse && has_csr_entry(plan) {
        Entry::Csr
    } else {
        Entry::Dense
    }
}

/// Whether `store` holds the machine code of the entry point an operator of `plan` compiles
/// first for a main input in format `main` (as far as its marker says: see
/// [`store::plan_marker_key`]), so that building it is a load.
pub(crate) fn stored_in(store: &ObjectStore, plan: &CPlan, main: MainFormat) -> bool {
    store.has_marker(&store::plan_marker_key(
        plan,
        first_entry(plan, main).name(),
    ))
}

/// [`compile_for`] through an on-disk object store: machine code compiled before (by this or
/// another process) is loaded instead of compiled, and what is compiled is kept there. Every
/// entry point the operator compiles later goes through the store too.
pub fn compile_with(
    plan: &CPlan,
    main: MainFormat,
    store: Option<Arc<ObjectStore>>,
) -> Result<NativeOperator, CodegenError> {
    let start = Instant::now();
    if plan.outputs.is_empty() || plan.inputs.is_empty() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "a plan needs inputs and outputs",
        )));
    }
    if plan.nodes.len() > MAX_BODY_NODES {
        return Err(CodegenError::Unsupported(Unsupported::TooManyNodes {
            nodes: plan.nodes.len(),
            limit: MAX_BODY_NODES,
        }));
    }
    let first = first_entry(plan, main);
    // The libraries the operator calls and that no operator has built yet are built on the
    // other cores while this operator compiles (its JIT waits for them when it maps the calls).
    let missing: Vec<LibraryId> = libraries_needed(plan)
        .into_iter()
        .filter(|l| !l.built())
        .collect();
    let built = if !missing.is_empty() {
        use rayon::prelude::*;
        let (libraries, built) = rayon::join(
            || {
                missing
                    .par_iter()
                    .try_for_each(|l| l.build(store.as_deref()))
            },
            || EntryCode::compile(plan, first, store.as_deref()),
        );
        libraries?;
        built
    } else {
        EntryCode::compile(plan, first, store.as_deref())
    };
    let (code, pending) = built?;
    let kind = match pending {
        Pending::Cell(spec) => Kind::Cell(spec),
        Pending::MAgg(spec) => Kind::MAgg(spec),
        Pending::Row(info) => {
            let spec = sk_row::RowSpec {
                kind: info.kind,
                inputs: info.inputs.clone(),
            };
            Kind::Row(info, spec)
        }
        Pending::Outer(spec) => Kind::Outer(spec),
    };
    let mut op = NativeOperator {
        kind,
        num_outputs: plan.outputs.len(),
        plan: plan.clone(),
        first,
        dense: OnceLock::new(),
        csr: OnceLock::new(),
        every_cell: OnceLock::new(),
        tiles: OnceLock::new(),
        compile_phases: code.phases,
        compile_time: Duration::ZERO,
        failure_text: OnceLock::new(),
        transposed_frame: matches!(plan.template, TemplateSpec::Cell { .. })
            && transposed_frame(plan, &plan.outputs[..1]).unwrap_or(false),
        loaded: code.loaded,
        store,
    };
    let _ = op.slot(first).set(Ok(code));
    op.compile_time = start.elapsed();
    Ok(op)
}

/// Whether the plan's template has a CSR entry point (Cell and MultiAgg: sparse-safe only).
fn has_csr_entry(plan: &CPlan) -> bool {
    match &plan.template {
        TemplateSpec::Cell { sparse_safe, .. } | TemplateSpec::MAgg { sparse_safe, .. } => {
            *sparse_safe
        }
        TemplateSpec::Outer { .. } | TemplateSpec::Row { .. } => true,
    }
}

/// The name of `entry`'s function in the module of `plan`'s template.
fn entry_name(plan: &CPlan, entry: Entry) -> &'static str {
    match (&plan.template, entry) {
        (TemplateSpec::Cell { .. } | TemplateSpec::MAgg { .. }, Entry::Csr) => "lafuse_cell_csr",
        (TemplateSpec::Cell { .. } | TemplateSpec::MAgg { .. }, _) => "lafuse_cell_dense",
        (TemplateSpec::Row { .. }, Entry::Csr) => "lafuse_row_csr",
        (TemplateSpec::Row { .. }, _) => "lafuse_row_dense",
        (TemplateSpec::Outer { .. }, Entry::Dense) => outer::Visit::DenseNonZeros.entry_name(),
        (TemplateSpec::Outer { .. }, Entry::Csr) => outer::Visit::CsrNonZeros.entry_name(),
        (TemplateSpec::Outer { .. }, Entry::EveryCell) => outer::Visit::EveryCell.entry_name(),
        (TemplateSpec::Outer { .. }, Entry::Tiles) => outer::Visit::Tiles.entry_name(),
    }
}

/// One compiled entry point: its address (typed at the call), its compilation's time, and
/// the JIT that owns its machine code.
struct EntryCode {
    kernel: usize,
    compile_time: Duration,
    phases: CompilePhases,
    ir: OnceLock<String>,
    asm: OnceLock<String>,
    /// The machine code came from the object store.
    loaded: bool,
    // Last: `kernel` points into it.
    machine: Machine,
}

impl EntryCode {
    /// Emits, verifies, optimizes and JIT-compiles `entry` of `plan` into a module of its
    /// own; also returns what the emission found (the skeleton's spec).
    fn compile(
        plan: &CPlan,
        entry: Entry,
        store: Option<&ObjectStore>,
    ) -> Result<(EntryCode, Pending), CodegenError> {
        let start = Instant::now();
        let Built {
            machine,
            pending,
            mut phases,
            loaded,
        } = build(plan, entry, store)?;
        let lap = Instant::now();
        let kernel = machine.function(entry_name(plan, entry))?;
        match machine {
            Machine::Engine(_) => phases.machine_code += lap.elapsed(),
            Machine::Object(..) => phases.jit += lap.elapsed(),
        }
        Ok((
            EntryCode {
                kernel,
                compile_time: start.elapsed(),
                phases,
                ir: OnceLock::new(),
                asm: OnceLock::new(),
                loaded,
                machine,
            },
            pending,
        ))
    }

    /// The module's IR text (printed on first request).
    fn ir(&self) -> &str {
        self.ir.get_or_init(|| self.machine.ir())
    }

    /// The module's host assembly text (produced on first request from the IR).
    fn assembly(&self) -> &str {
        self.asm
            .get_or_init(|| llvm::assembly_of(self.ir()).unwrap_or_else(|e| format!("; {e}")))
    }
}

enum Pending {
    Cell(CellSpec),
    MAgg(MAggSpec),
    Outer(OuterSpec),
    Row(Box<row::RowInfo>),
}

/// The dense or CSR entry point of a Cell or MultiAgg plan: the CSR one only for a
/// sparse-safe plan (`what` names the template in the error; an every-cell entry point was
/// refused before).
#[allow(clippy::too_many_arguments)]
fn emit_cell_like_entry<'c>(
    ctx: &'c inkwell::context::Context,
    module: &Module<'c>,
    plan: &CPlan,
    like: &CellLike,
    used: &[bool],
    entry: Entry,
    sparse_safe: bool,
    template: &'static str,
) -> Result<(), CodegenError> {
    let csr = match entry {
        Entry::Dense => false,
        Entry::Csr if sparse_safe => true,
        Entry::Csr | Entry::EveryCell | Entry::Tiles => {
            return Err(CodegenError::Internal(Internal::SparseUnsafeCsr {
                template,
            }))
        }
    };
    cell::emit_entry(ctx, module, plan, like, used, csr, entry_name(plan, entry))
}

/// Emits `entry` of `plan` (the analysis is redone for each entry; it costs microseconds).
fn emit<'c>(
    ctx: &'c inkwell::context::Context,
    module: &Module<'c>,
    plan: &CPlan,
    entry: Entry,
) -> Result<Pending, CodegenError> {
    let csr = entry == Entry::Csr;
    if matches!(entry, Entry::EveryCell | Entry::Tiles)
        && !matches!(plan.template, TemplateSpec::Outer { .. })
    {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "an every-cell entry point outside an outer-product operator",
        )));
    }
    match &plan.template {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        } => {
            let crate::plan_info::CellAnalysis {
                kind,
                agg,
                transposed,
                uses,
            } = crate::plan_info::cell_analysis(plan, *cell_type, *agg)?;
            let used = used_mask(&uses);
            let like = CellLike {
                outs: vec![(plan.outputs[0], agg)],
                kind,
                transposed,
            };
            emit_cell_like_entry(ctx, module, plan, &like, &used, entry, *sparse_safe, "cell")?;
            Ok(Pending::Cell(CellSpec {
                kind,
                agg,
                sparse_safe: *sparse_safe,
                uses,
                lanes: FULL_LANES,
            }))
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            let crate::plan_info::MAggAnalysis {
                aggs,
                transposed,
                uses,
            } = crate::plan_info::magg_analysis(plan, aggs)?;
            let used = used_mask(&uses);
            let like = CellLike {
                outs: plan
                    .outputs
                    .iter()
                    .copied()
                    .zip(aggs.iter().map(|&a| Some(a)))
                    .collect(),
                kind: CellKind::FullAgg,
                transposed,
            };
            emit_cell_like_entry(
                ctx,
                module,
                plan,
                &like,
                &used,
                entry,
                *sparse_safe,
                "MultiAgg",
            )?;
            Ok(Pending::MAgg(MAggSpec {
                aggs,
                sparse_safe: *sparse_safe,
                uses,
                lanes: FULL_LANES,
            }))
        }
        TemplateSpec::Outer { outer_type } => {
            let (kind, oi, uses) = crate::plan_info::outer_analysis(plan, *outer_type)?;
            let w = oi.w;
            let used = used_mask(&uses);
            outer::emit(
                ctx,
                module,
                plan,
                kind,
                &oi,
                &used,
                match entry {
                    Entry::Dense => outer::Visit::DenseNonZeros,
                    Entry::Csr => outer::Visit::CsrNonZeros,
                    Entry::EveryCell => outer::Visit::EveryCell,
                    Entry::Tiles => outer::Visit::Tiles,
                },
            )?;
            Ok(Pending::Outer(OuterSpec {
                kind,
                w,
                uses,
                lanes: LANES,
            }))
        }
        TemplateSpec::Row { row_type, .. } => {
            let info = row::analyze(plan, *row_type)?;
            row::emit(ctx, module, &info, csr)?;
            Ok(Pending::Row(Box::new(info)))
        }
    }
}

impl CompilePhases {
    /// The phase-wise sum of two compilations.
    fn plus(self, o: CompilePhases) -> CompilePhases {
        CompilePhases {
            emit: self.emit + o.emit,
            verify: self.verify + o.verify,
            optimize: self.optimize + o.optimize,
            jit: self.jit + o.jit,
            machine_code: self.machine_code + o.machine_code,
        }
    }
}

impl NativeOperator {
    /// Whether the machine code of the entry point compiled with the operator was loaded from
    /// the object store instead of compiled.
    pub fn loaded_from_store(&self) -> bool {
        self.loaded
    }

    /// Runs the operator: same contract as [`reference::evaluate`](crate::reference::evaluate)
    /// (inputs by CPlan position, one output per plan output with the given shapes); outputs
    /// in the runtime's preferred format. The first execution whose skeleton visits the
    /// non-zeros of a CSR main input compiles the CSR entry point (once, thread-safe; its time
    /// is added to [`compile_time`](Self::compile_time)).
    pub fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_with_ranges(inputs, out_shapes, &[])
    }

    /// [`NativeOperator::execute`], told the value ranges the caller knows of some inputs (by
    /// position; `None` or positions beyond `known`: not known), so that it need not scan
    /// them before deciding whether the main input's zeros may be skipped.
    ///
    /// A sparse-safe operator skips the zeros of its main input (Cell and MultiAgg over a
    /// CSR main input, Outer always) only when [`zero_cells::zeros_skippable`] proves its
    /// body 0 there over the ranges of the other inputs; otherwise Cell, MultiAgg and Outer
    /// visit every cell (Outer with its every-cell entry point, compiled on the first such
    /// call), so results are the unfused ones, NaN and infinities included.
    pub fn execute_with_ranges(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_with_options(inputs, out_shapes, known, RunOptions::default())
    }

    /// [`NativeOperator::execute_with_ranges`] with the backend's [`RunOptions`].
    pub fn execute_with_options(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        options: RunOptions,
    ) -> Result<Vec<Matrix>, CodegenError> {
        if out_shapes.len() != self.num_outputs {
            return Err(CodegenError::Internal(Internal::OutputCount {
                outputs: self.num_outputs,
                shapes: out_shapes.len(),
            }));
        }
        let mut ranges: Vec<Option<ValueRange>> = (0..inputs.len())
            .map(|pos| known.get(pos).copied().flatten())
            .collect();
        let main_sparse = matches!(inputs.first(), Some(Operand::Matrix(m)) if m.is_sparse());
        let skips_zeros = match &self.kind {
            Kind::Cell(spec) => spec.sparse_safe && main_sparse,
            Kind::MAgg(spec) => spec.sparse_safe && main_sparse,
            Kind::Outer(..) => true,
            Kind::Row(..) => false,
        };
        let zeros_skippable = match (&self.plan, skips_zeros) {
            (plan, true) => {
                let bounds: Vec<InputBound> = inputs
                    .iter()
                    .zip(ranges.iter_mut())
                    .enumerate()
                    .map(|(pos, (o, range))| match o {
                        Operand::Scalar(s) => InputBound::Scalar(*s),
                        Operand::Matrix(_) if pos == 0 => InputBound::Unknown,
                        Operand::Matrix(m) => InputBound::Matrix {
                            range: *range.get_or_insert_with(|| m.value_range()),
                            cols: m.cols(),
                        },
                    })
                    .collect();
                zero_cells::zeros_skippable(plan, &bounds)
            }
            _ => false,
        };
        let ins: Vec<Input<'_>> = inputs
            .iter()
            .zip(&ranges)
            .map(|(o, range)| match o {
                Operand::Scalar(s) => Input::Scalar(*s),
                Operand::Matrix(m) if range.is_some_and(|r| r.is_finite()) => {
                    Input::FiniteMatrix(m)
                }
                Operand::Matrix(m) => Input::Matrix(m),
            })
            .collect();
        // Each entry point is requested when the skeleton needs it (compiled then, the
        // first time); the compiler's error comes back through the skeleton as it was.
        let addr = |entry: Entry| -> Result<usize, EntryError> {
            self.code(entry)
                .map(|c| c.kernel)
                .map_err(|e| EntryError(Arc::new(e)))
        };
        // SAFETY (all): the entry points of Cell, MultiAgg and Outer are generated with the
        // `KernelFn` signature, Row's with the `RowKernelFn` one; each lives as long as its
        // JIT, which the operator owns for its lifetime.
        let cell_fn = |entry: Entry| {
            move || addr(entry).map(|a| unsafe { std::mem::transmute::<usize, KernelFn>(a) })
        };
        let row_fn = |entry: Entry| {
            move || {
                addr(entry).map(|a| unsafe { std::mem::transmute::<usize, sk_row::RowKernelFn>(a) })
            }
        };
        let (dense_fn, csr_fn, every_fn, tiles_fn) = (
            cell_fn(Entry::Dense),
            cell_fn(Entry::Csr),
            cell_fn(Entry::EveryCell),
            cell_fn(Entry::Tiles),
        );
        let (dense_row_fn, csr_row_fn) = (row_fn(Entry::Dense), row_fn(Entry::Csr));
        let sk = |e: SkeletonError| match e {
            SkeletonError::EntryPoint(entry) => match entry.0.downcast_ref::<CodegenError>() {
                Some(ce) => ce.clone(),
                None => CodegenError::Internal(Internal::EntryPoint { error: entry }),
            },
            e => CodegenError::Skeleton(e),
        };
        let out = match &self.kind {
            Kind::Cell(spec) => {
                let k = CellKernels {
                    dense: &dense_fn,
                    csr: zeros_skippable.then_some(&csr_fn as LazyEntry<'_, KernelFn>),
                };
                vec![sk_cell::execute(spec, &k, &ins).map_err(sk)?]
            }
            Kind::MAgg(spec) => {
                let k = MAggKernels {
                    dense: &dense_fn,
                    csr: zeros_skippable.then_some(&csr_fn as LazyEntry<'_, KernelFn>),
                };
                sk_magg::execute(spec, &k, &ins).map_err(sk)?
            }
            Kind::Outer(spec) => {
                let k = OuterKernels {
                    dense: &dense_fn,
                    csr: &csr_fn,
                    every_cell: (!zeros_skippable).then_some(&every_fn as LazyEntry<'_, KernelFn>),
                    tiles: Some(OuterTiles {
                        entry: &tiles_fn,
                        min_density: options.outer_tile_density,
                    }),
                };
                vec![sk_outer::execute(spec, &k, &ins).map_err(sk)?]
            }
            Kind::Row(info, spec) => {
                let shape = out_shapes.first().copied().unwrap_or((0, 0));
                let layout = row::layout(info, inputs, shape)?;
                let k = sk_row::RowKernels {
                    dense: &dense_row_fn,
                    csr: &csr_row_fn,
                };
                vec![sk_row::execute(spec, &k, &ins, &layout).map_err(sk)?]
            }
        };
        let mut out = out;
        for (m, &s) in out.iter_mut().zip(out_shapes) {
            // A body over a transposed vector main input walked its cells in the main
            // input's shape: the same cells, relabelled (see `transposed_frame`).
            if m.shape() == (s.1, s.0) && (s.0 == 1 || s.1 == 1) && self.transposed_frame {
                *m = lafuse_runtime::kernels::reshape(m, s.0, s.1, true)
                    .map_err(CodegenError::Runtime)?;
            }
            if m.shape() != s {
                return Err(CodegenError::Internal(Internal::OutputShape {
                    got: m.shape(),
                    expected: s,
                }));
            }
        }
        Ok(out)
    }

    /// Where entry point `entry`'s code is kept.
    fn slot(&self, entry: Entry) -> &OnceLock<Result<EntryCode, CodegenError>> {
        match entry {
            Entry::Dense => &self.dense,
            Entry::Csr => &self.csr,
            Entry::EveryCell => &self.every_cell,
            Entry::Tiles => &self.tiles,
        }
    }

    /// Entry point `entry`'s code, compiled on first request; an error where the template
    /// has no such entry point.
    fn code(&self, entry: Entry) -> Result<&EntryCode, CodegenError> {
        let exists = match (&self.kind, entry) {
            (_, Entry::Dense) => true,
            (Kind::Outer(..), _) | (Kind::Row(..), Entry::Csr) => true,
            (Kind::Cell(..) | Kind::MAgg(..), Entry::Csr) => has_csr_entry(&self.plan),
            _ => false,
        };
        if !exists {
            return Err(CodegenError::Internal(Internal::NoEntryPoint {
                entry: entry.name(),
            }));
        }
        self.slot(entry)
            .get_or_init(|| {
                EntryCode::compile(&self.plan, entry, self.store.as_deref()).map(|(code, _)| code)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Entry point `entry`'s code, if compiled.
    fn compiled(&self, entry: Entry) -> Option<&EntryCode> {
        self.slot(entry).get().and_then(|r| r.as_ref().ok())
    }

    /// Compiles the CSR entry point now (`explain` shows it before any execution has needed
    /// it); `Ok(false)` when the operator has none (a sparse-unsafe Cell or MultiAgg plan).
    pub fn compile_csr_entry(&self) -> Result<bool, CodegenError> {
        if matches!(self.kind, Kind::Cell(..) | Kind::MAgg(..)) && !has_csr_entry(&self.plan) {
            return Ok(false);
        }
        self.code(Entry::Csr).map(|_| true)
    }

    /// Whether an execution (or [`NativeOperator::tiles_text`]) has compiled the Outer tile
    /// entry point: it ran over tiles of its outer product.
    pub fn tiles_compiled(&self) -> bool {
        self.compiled(Entry::Tiles).is_some()
    }

    /// An Outer operator's tile entry point (every cell of tiles of a dense-enough driver, the
    /// dot products read from a tile of `U %*% t(V)`), compiled now, as LLVM IR or assembly
    /// text; `None` for other templates.
    pub fn tiles_text(&self, ir: bool) -> Option<Result<&str, CodegenError>> {
        if !matches!(self.kind, Kind::Outer(..)) {
            return None;
        }
        Some(
            self.code(Entry::Tiles)
                .map(|c| if ir { c.ir() } else { c.assembly() }),
        )
    }

    /// The compiled CSR entry point, if an execution (or [`compile_for`]) has compiled it.
    fn csr_compiled(&self) -> Option<&EntryCode> {
        self.compiled(Entry::Csr)
    }

    /// The LLVM IR of the dense entry point's module (compiled now if [`compile_for`]
    /// compiled the CSR one; a failure is shown as a comment), printed on first request, so
    /// a compilation does not pay for text nobody reads. The CSR entry point has its own
    /// module: [`csr_llvm_ir`](Self::csr_llvm_ir).
    pub fn llvm_ir(&self) -> &str {
        match self.code(Entry::Dense) {
            Ok(c) => c.ir(),
            Err(e) => self.dense_error_text(e),
        }
    }

    /// The dense entry point's host machine code as assembly text (produced on first request
    /// from the IR); the CSR one's is [`csr_assembly`](Self::csr_assembly).
    pub fn assembly(&self) -> &str {
        match self.code(Entry::Dense) {
            Ok(c) => c.assembly(),
            Err(e) => self.dense_error_text(e),
        }
    }

    /// A failed dense compilation as a comment line.
    fn dense_error_text(&self, e: CodegenError) -> &str {
        self.failure_text.get_or_init(|| format!("; {e}"))
    }

    /// The LLVM IR of the CSR entry point's module; `None` until it is compiled (or when the
    /// template has none).
    pub fn csr_llvm_ir(&self) -> Option<&str> {
        self.csr_compiled().map(EntryCode::ir)
    }

    /// The CSR entry point's assembly text; `None` as for [`csr_llvm_ir`](Self::csr_llvm_ir).
    pub fn csr_assembly(&self) -> Option<&str> {
        self.csr_compiled().map(EntryCode::assembly)
    }

    /// The entry points compiled after [`compile_for`] (by executions or `explain`).
    fn later(&self) -> impl Iterator<Item = &EntryCode> {
        [Entry::Dense, Entry::Csr, Entry::EveryCell, Entry::Tiles]
            .into_iter()
            .filter(move |&e| e != self.first)
            .filter_map(move |e| self.compiled(e))
    }

    /// Compilation time spent on this operator so far: [`compile_for`] (emission,
    /// verification, optimization, JIT of its first entry point, and the libraries it waited
    /// for) plus each entry point compiled since by an execution that needed it.
    /// [`OperatorCache`] records the time right after [`compile_for`], so its
    /// [`CacheStats::compile_time`] counts the first entry points only.
    pub fn compile_time(&self) -> Duration {
        self.compile_time + self.later().map(|c| c.compile_time).sum::<Duration>()
    }

    /// Time the compilation of the CSR entry point took; `None` while not compiled.
    pub fn csr_compile_time(&self) -> Option<Duration> {
        self.csr_compiled().map(|c| c.compile_time)
    }

    /// [`compile_time`](Self::compile_time) split by phase (summed over the entry points
    /// compiled so far).
    pub fn compile_phases(&self) -> CompilePhases {
        self.later()
            .fold(self.compile_phases, |p, c| p.plus(c.phases))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cplan::{count_vector_intermediates, Access, InputKind, RowType};
    use lafuse_compiler::fusion::template::CellAgg;
    use lafuse_compiler::fusion::template::CellType;
    use lafuse_compiler::hops::{AggOp, BinaryOp, Literal};

    /// `X * rowSums(X)`: a row-wise Row plan.
    fn row_plan() -> CPlan {
        let nodes = vec![
            CNode::Data {
                input: 0,
                access: Access::Main,
            },
            CNode::RowAgg {
                f: AggOp::Sum,
                x: 0,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
        ];
        CPlan {
            template: TemplateSpec::Row {
                row_type: RowType::NoAgg,
                num_vectors: count_vector_intermediates(&nodes, &[2]),
            },
            inputs: vec![InputKind::Matrix],
            nodes,
            outputs: vec![2],
        }
    }

    /// `sum(X * 3)`: a sparse-safe Cell plan.
    fn cell_plan() -> CPlan {
        CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::FullAgg,
                agg: Some(CellAgg::Sum),
                sparse_safe: true,
            },
            inputs: vec![InputKind::Matrix],
            nodes: vec![
                CNode::Data {
                    input: 0,
                    access: Access::Main,
                },
                CNode::Literal {
                    value: Literal::Double(3.0),
                },
                CNode::Binary {
                    f: BinaryOp::Mul,
                    a: 0,
                    b: 1,
                },
            ],
            outputs: vec![2],
        }
    }

    #[test]
    fn plans_say_which_libraries_they_call() {
        assert!(libraries_needed(&cell_plan()).is_empty());
        assert!(libraries_needed(&row_plan()).is_empty());
        // exp(X) * 3: the vector math.
        let mut exp = cell_plan();
        exp.nodes.push(CNode::Unary {
            f: lafuse_compiler::hops::UnaryOp::Exp,
            x: 0,
        });
        exp.nodes.push(CNode::Binary {
            f: BinaryOp::Mul,
            a: 3,
            b: 1,
        });
        exp.outputs = vec![4];
        assert_eq!(libraries_needed(&exp), [LibraryId::Math]);
        // rowSums(X %*% v): a product of the main row, computed a block of rows at a time
        // by a function of the skeletons crate, which is no library.
        let nodes = vec![
            CNode::Data {
                input: 0,
                access: Access::Main,
            },
            CNode::Data {
                input: 1,
                access: Access::Whole,
            },
            CNode::VectMatMult { a: 0, b: 1 },
        ];
        let product = CPlan {
            template: TemplateSpec::Row {
                row_type: RowType::RowAgg,
                num_vectors: count_vector_intermediates(&nodes, &[2]),
            },
            inputs: vec![InputKind::Matrix, InputKind::Matrix],
            nodes,
            outputs: vec![2],
        };
        assert!(libraries_needed(&product).is_empty());
    }

    fn sparse_input() -> lafuse_runtime::DenseMatrix {
        let vals = (0..40 * 30)
            .map(|k| {
                if k % 7 == 0 {
                    (k % 11) as f64 - 5.0
                } else {
                    0.0
                }
            })
            .collect();
        lafuse_runtime::DenseMatrix::new(40, 30, vals).unwrap()
    }

    fn close(a: &Matrix, b: &Matrix) -> bool {
        let (a, b) = (a.to_dense().unwrap().values, b.to_dense().unwrap().values);
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0))
    }

    /// The output shape of [`row_plan`] or [`cell_plan`] over `x`, and the reference result.
    fn shape_and_reference(plan: &CPlan, x: &Matrix) -> ((usize, usize), Matrix) {
        let shape = match plan.template {
            TemplateSpec::Row { .. } => (40, 30),
            _ => (1, 1),
        };
        let want = crate::reference::evaluate(plan, &[Operand::Matrix(x)], &[shape])
            .unwrap()
            .remove(0);
        (shape, want)
    }

    #[test]
    fn csr_entry_is_compiled_on_the_first_csr_execution_only() {
        let d = sparse_input();
        let dense = Matrix::Dense(d.clone());
        let sparse = Matrix::Sparse(d.to_sparse());
        for (plan, csr_name) in [
            (row_plan(), "lafuse_row_csr"),
            (cell_plan(), "lafuse_cell_csr"),
        ] {
            let (shape, want) = shape_and_reference(&plan, &dense);
            let op = compile(&plan).unwrap();
            let t0 = op.compile_time();
            assert!(op.llvm_ir().contains("_dense"));
            assert!(!op.llvm_ir().contains(csr_name));
            // A dense execution compiles nothing more.
            let got = op.execute(&[Operand::Matrix(&dense)], &[shape]).unwrap();
            assert!(close(&got[0], &want));
            assert!(op.csr_llvm_ir().is_none() && op.csr_compile_time().is_none());
            assert_eq!(op.compile_time(), t0);
            // Concurrent first CSR executions compile the entry point once and all use it.
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| op.execute(&[Operand::Matrix(&sparse)], &[shape])))
                    .collect();
                for h in hs {
                    assert!(close(&h.join().unwrap().unwrap()[0], &want));
                }
            });
            let csr_ir = op.csr_llvm_ir().expect("CSR entry compiled");
            assert!(csr_ir.contains(csr_name), "{csr_ir}");
            assert!(!op.llvm_ir().contains(csr_name));
            assert!(op.csr_assembly().is_some_and(|a| !a.is_empty()));
            let tc = op.csr_compile_time().unwrap();
            assert!(tc > Duration::ZERO);
            assert_eq!(op.compile_time(), t0 + tc);
        }
    }

    #[test]
    fn sparse_unsafe_multi_agg_has_no_csr_entry_point() {
        let mut plan = cell_plan();
        plan.template = TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum],
            sparse_safe: false,
        };
        let op = compile(&plan).unwrap();
        let sparse = Matrix::Sparse(sparse_input().to_sparse());
        let got = op.execute(&[Operand::Matrix(&sparse)], &[(1, 1)]).unwrap();
        let want =
            crate::reference::evaluate(&plan, &[Operand::Matrix(&sparse)], &[(1, 1)]).unwrap();
        assert!(close(&got[0], &want[0]));
        assert!(op.csr_llvm_ir().is_none());
        assert!(op.code(Entry::Csr).is_err());
        // Compiled for a sparse main input, it compiles its dense entry point first.
        let op = compile_for(&plan, MainFormat::Sparse).unwrap();
        assert!(op.compiled(Entry::Dense).is_some());
    }

    #[test]
    fn an_operator_compiled_for_a_sparse_main_input_compiles_its_dense_entry_on_demand() {
        let d = sparse_input();
        let dense = Matrix::Dense(d.clone());
        let sparse = Matrix::Sparse(d.to_sparse());
        for plan in [row_plan(), cell_plan()] {
            let (shape, want) = shape_and_reference(&plan, &dense);
            let op = compile_for(&plan, MainFormat::Sparse).unwrap();
            let t0 = op.compile_time();
            assert!(op.csr_llvm_ir().is_some() && op.compiled(Entry::Dense).is_none());
            let got = op.execute(&[Operand::Matrix(&sparse)], &[shape]).unwrap();
            assert!(close(&got[0], &want));
            assert!(op.compiled(Entry::Dense).is_none());
            assert_eq!(op.compile_time(), t0);
            let got = op.execute(&[Operand::Matrix(&dense)], &[shape]).unwrap();
            assert!(close(&got[0], &want));
            let dense_code = op.compiled(Entry::Dense).expect("dense entry compiled");
            assert_eq!(op.compile_time(), t0 + dense_code.compile_time);
            assert!(op.llvm_ir().contains("_dense"));
        }
    }
}
