//! Native fused operators: CPlan → LLVM IR → optimized machine code for the host CPU (DESIGN
//! section 4), hosted by the skeletons of `lafuse_skeletons`.
//!
//! Each entry point of a template (a loop over a row range of a dense main input, and one over
//! a CSR main input where the template iterates non-zeros: sparse-safe Cell, Outer, Row) goes
//! into a module of its own, with the body inlined, which is verified, optimized for the host
//! CPU and JIT-compiled. [`compile`] does this for the dense entry point only; the CSR one is
//! compiled on the first execution whose skeleton visits a CSR main input's non-zeros (most
//! operators never see one, and machine-code generation dominates compile time, so this
//! roughly halves it for the templates that have both). [`NativeOperator::execute`] has the
//! contract of [`reference::evaluate`](crate::reference::evaluate). Implemented: Cell (all
//! types and aggregations), MultiAgg, Outer (all types), Row (all row types).
//!
//! Module map: `llvm` (everything LLVM-version specific), `expr` (body emission and the Java
//! scalar semantics), `cell` (Cell and MultiAgg loops), `outer` (Outer loops and primitives),
//! `row` (Row loops, vector primitives and per-call layouts), `library` (plan-independent
//! functions compiled once per process), `cache` (the operator cache).

mod cache;
mod cell;
mod expr;
mod library;
mod llvm;
pub mod math;
mod outer;
mod row;

pub use cache::{CacheStats, Lookup, MissReason, OperatorCache};

use crate::reference::Operand;
use crate::zero_cells::{self, InputBound};
use cell::{CellLike, LANES};
use inkwell::module::Module;
use lafuse_compiler::fusion::cplan::{
    Access, CNode, CNodeId, CPlan, InputKind, OuterType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_runtime::{Matrix, ValueRange};
use lafuse_skeletons::abi::KernelFn;
use lafuse_skeletons::{
    cell as sk_cell, magg as sk_magg, outer as sk_outer, row as sk_row, AggKind, CellKernels,
    CellKind, CellSpec, Input, InputUse, LazyEntry, MAggKernels, MAggSpec, OuterKernels, OuterKind,
    OuterSpec, SkeletonError,
};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Why an operator could not be compiled or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// A valid plan or call this backend does not implement (names the construct).
    Unsupported(String),
    /// A bug, an LLVM failure, or inputs that do not match the operator.
    Internal(String),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::Unsupported(s) => write!(f, "unsupported: {s}"),
            CodegenError::Internal(s) => write!(f, "internal error: {s}"),
        }
    }
}

impl std::error::Error for CodegenError {}

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

/// What the operator's skeleton needs: the spec and the dense entry point (the CSR entry point
/// lives in [`NativeOperator::csr`]).
#[derive(Clone, Debug)]
enum Kind {
    Cell(CellSpec, KernelFn),
    MAgg(MAggSpec, KernelFn),
    Outer(OuterSpec, KernelFn),
    Row(Box<row::RowInfo>, sk_row::RowSpec, sk_row::RowKernelFn),
}

/// A compiled fused operator: generated code plus the skeleton that hosts it. `Send + Sync`;
/// it owns the JITs (and so the machine code) for its lifetime: the dense entry point's, made
/// by [`compile`], and the CSR entry point's, made on the first execution that runs it.
pub struct NativeOperator {
    kind: Kind,
    num_outputs: usize,
    /// The plan, kept to compile the CSR entry point later (`None`: the template has none).
    plan: Option<CPlan>,
    /// The CSR entry point once requested (or why it failed to compile); compiled at most
    /// once, concurrent first executions wait for it.
    csr: OnceLock<Result<LazyCode, CodegenError>>,
    /// Outer: the every-cell entry point once a call needed it (see [`Entry::EveryCell`]).
    every_cell: OnceLock<Result<LazyCode, CodegenError>>,
    ir: OnceLock<String>,
    asm: OnceLock<String>,
    compile_time: Duration,
    compile_phases: CompilePhases,
    // Last: the code the kernels point into must outlive nothing else here.
    jit: llvm::Jit,
}

impl fmt::Debug for NativeOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeOperator")
            .field("kind", &self.kind)
            .field("compile_time", &self.compile_time())
            .field("csr_compiled", &self.csr_compiled().is_some())
            .finish()
    }
}

fn agg_kind(a: CellAgg) -> AggKind {
    match a {
        CellAgg::Sum => AggKind::Sum,
        CellAgg::SumSq => AggKind::SumSq,
        CellAgg::Min => AggKind::Min,
        CellAgg::Max => AggKind::Max,
    }
}

/// How each input is read, from the nodes reachable from `roots` (inside transposes the
/// vector reads flip); conflicting reads of one input are unsupported.
fn input_uses(plan: &CPlan, roots: &[CNodeId]) -> Result<Vec<InputUse>, CodegenError> {
    let mut uses = vec![InputUse::Unused; plan.inputs.len()];
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<(CNodeId, bool)> = roots.iter().map(|&r| (r, false)).collect();
    let mut set = |k: usize, u: InputUse| -> Result<(), CodegenError> {
        let slot = uses
            .get_mut(k)
            .ok_or_else(|| CodegenError::Internal(format!("input {k} outside the plan")))?;
        if *slot != InputUse::Unused && *slot != u {
            return Err(CodegenError::Unsupported(format!(
                "input {k} read both as {slot:?} and as {u:?}"
            )));
        }
        *slot = u;
        Ok(())
    };
    while let Some((n, sw)) = stack.pop() {
        if !seen.insert((n, sw)) {
            continue;
        }
        let node = plan
            .nodes
            .get(n)
            .ok_or_else(|| CodegenError::Internal(format!("node {n} missing")))?;
        match node {
            CNode::Data { input, access } => {
                let k = *input;
                let scalar =
                    plan.inputs.get(k) == Some(&InputKind::Scalar) || *access == Access::Scalar;
                let u = match (access, sw) {
                    _ if scalar => InputUse::Scalar,
                    (Access::Main, false) if k == 0 => InputUse::Main,
                    (Access::Aligned, false) => InputUse::Aligned,
                    (Access::ColVector, false) => InputUse::ColVector,
                    (Access::RowVector, false) => InputUse::RowVector,
                    (Access::ColVector, true) => InputUse::ColVectorT,
                    (Access::RowVector, true) => InputUse::RowVectorT,
                    (a, _) => {
                        return Err(CodegenError::Unsupported(format!(
                            "input {k} read as {a:?} in a cell-wise body"
                        )))
                    }
                };
                set(k, u)?;
            }
            CNode::OuterDot { u, v } => {
                let (
                    CNode::Data {
                        input: ui,
                        access: Access::OuterU,
                    },
                    CNode::Data {
                        input: vi,
                        access: va,
                    },
                ) = (&plan.nodes[*u], &plan.nodes[*v])
                else {
                    return Err(CodegenError::Unsupported(
                        "outer dot over non-input operands".into(),
                    ));
                };
                set(*ui, InputUse::OuterU)?;
                set(
                    *vi,
                    match va {
                        Access::OuterV => InputUse::OuterV,
                        Access::Whole => InputUse::OuterVT,
                        a => {
                            return Err(CodegenError::Unsupported(format!(
                                "outer factor read as {a:?}"
                            )))
                        }
                    },
                )?;
            }
            CNode::Transpose { x } => stack.push((*x, !sw)),
            other => stack.extend(other.operands().into_iter().map(|o| (o, sw))),
        }
    }
    Ok(uses)
}

fn used_mask(uses: &[InputUse]) -> Vec<bool> {
    uses.iter()
        .map(|u| !matches!(u, InputUse::Unused | InputUse::Main))
        .collect()
}

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
}

/// One JIT-compiled module: the engine (owning the machine code), the emission result and the
/// compilation's time.
struct Built {
    jit: llvm::Jit,
    pending: Pending,
    phases: CompilePhases,
}

/// Emits `entry` of `plan` into a fresh module, verifies, optimizes and JIT-compiles it.
/// `phases.machine_code` is left to the caller (it is paid by the first address lookup).
fn build(plan: &CPlan, entry: Entry) -> Result<Built, CodegenError> {
    let mut phases = CompilePhases::default();
    let mut lap = Instant::now();
    let mut tick = |slot: &mut Duration| {
        let now = Instant::now();
        *slot += now - lap;
        lap = now;
    };
    let (jit, pending) = llvm::jit_module(
        "lafuse_op",
        |ctx, module, tm| {
            let k = emit(ctx, module, plan, entry)?;
            tick(&mut phases.emit);
            llvm::verify(module, "generated module fails verification")?;
            tick(&mut phases.verify);
            llvm::optimize(module, tm)?;
            tick(&mut phases.optimize);
            llvm::verify(module, "optimized module fails verification")?;
            tick(&mut phases.verify);
            Ok(k)
        },
        |name| {
            expr::helper_address(name)
                .or_else(|| math::library_address(name))
                .or_else(|| row::library_address(name))
        },
    )?;
    tick(&mut phases.jit);
    Ok(Built {
        jit,
        pending,
        phases,
    })
}

/// The address of a generated entry point as a [`KernelFn`].
fn kernel(jit: &llvm::Jit, name: &str) -> Result<KernelFn, CodegenError> {
    let addr = jit.function(name)?;
    // SAFETY: Cell, MultiAgg and Outer entry points are generated with exactly the `KernelFn`
    // signature (i8*, i64, i64) -> i64, and live as long as `jit`, which the operator owns.
    Ok(unsafe { std::mem::transmute::<usize, KernelFn>(addr) })
}

/// The address of a generated Row entry point as a [`sk_row::RowKernelFn`].
fn row_kernel(jit: &llvm::Jit, name: &str) -> Result<sk_row::RowKernelFn, CodegenError> {
    let addr = jit.function(name)?;
    // SAFETY: Row entry points are generated with the `RowKernelFn` signature
    // (i8*, i64, i64) -> i64, and live as long as `jit`, which the operator owns.
    Ok(unsafe { std::mem::transmute::<usize, sk_row::RowKernelFn>(addr) })
}

/// Builds the process-wide function libraries that operators call (the vector math of
/// `log`/`exp`, the Row block primitives) if they are not built yet, and returns how long that
/// took. Operators otherwise build them on first use, and that first compilation's time
/// includes theirs; an embedder can pay it up front instead.
pub fn build_libraries() -> Result<Duration, CodegenError> {
    let start = Instant::now();
    math::library()?;
    row::library()?;
    Ok(start.elapsed())
}

/// The process-wide libraries a plan's generated code calls.
#[derive(Clone, Copy, Debug, Default)]
struct Libraries {
    /// Vector `log`/`exp` (`math`).
    math: bool,
    /// The Row block primitives (`row`).
    row_blocks: bool,
}

impl Libraries {
    fn any(self) -> bool {
        self.math || self.row_blocks
    }

    /// Those of them not built yet.
    fn missing(self) -> Libraries {
        Libraries {
            math: self.math && !math::library_built(),
            row_blocks: self.row_blocks && !row::library_built(),
        }
    }
}

/// What `plan` calls, as far as its nodes tell (a library missed here is built when the
/// operator's JIT maps its calls, only without overlapping the operator's compilation).
fn libraries_needed(plan: &CPlan) -> Libraries {
    use lafuse_compiler::hops::{BinaryOp, UnaryOp};
    let math = plan.nodes.iter().any(|n| {
        matches!(
            n,
            CNode::Unary {
                f: UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sigmoid,
                ..
            } | CNode::Binary {
                f: BinaryOp::Log,
                ..
            }
        )
    });
    let row_blocks = match &plan.template {
        TemplateSpec::Row { row_type, .. } => {
            row::analyze(plan, *row_type).is_ok_and(|info| info.uses_block_prims())
        }
        _ => false,
    };
    Libraries { math, row_blocks }
}

/// Compiles a CPlan into a native operator: the dense entry point now, the CSR entry point
/// (sparse-safe Cell, Outer, Row) on the first execution with a CSR main input.
pub fn compile(plan: &CPlan) -> Result<NativeOperator, CodegenError> {
    let start = Instant::now();
    if plan.outputs.is_empty() || plan.inputs.is_empty() {
        return Err(CodegenError::Internal(
            "a plan needs inputs and outputs".into(),
        ));
    }
    // A library the operator calls and that no operator has built yet is built on another
    // core while this operator compiles (its JIT waits for it when it maps the calls).
    let build_missing = |needed: Libraries| -> Result<(), CodegenError> {
        if needed.math {
            math::library()?;
        }
        if needed.row_blocks {
            row::library()?;
        }
        Ok(())
    };
    let missing = libraries_needed(plan).missing();
    let built = if missing.any() {
        let (libraries, built) =
            rayon::join(|| build_missing(missing), || build(plan, Entry::Dense));
        libraries?;
        built
    } else {
        build(plan, Entry::Dense)
    };
    let Built {
        jit,
        pending,
        mut phases,
    } = built?;
    let lap = Instant::now();
    let (kind, has_csr) = match pending {
        Pending::Cell(spec, has_csr) => {
            let dense = kernel(&jit, "lafuse_cell_dense")?;
            (Kind::Cell(spec, dense), has_csr)
        }
        Pending::MAgg(spec) => {
            let has_csr = spec.sparse_safe;
            let dense = kernel(&jit, "lafuse_cell_dense")?;
            (Kind::MAgg(spec, dense), has_csr)
        }
        Pending::Row(info) => {
            let spec = sk_row::RowSpec {
                kind: info.kind,
                inputs: info.inputs.clone(),
            };
            let dense = row_kernel(&jit, "lafuse_row_dense")?;
            (Kind::Row(info, spec, dense), true)
        }
        Pending::Outer(spec) => (Kind::Outer(spec, kernel(&jit, "lafuse_outer_dense")?), true),
    };
    phases.machine_code += lap.elapsed();
    Ok(NativeOperator {
        kind,
        num_outputs: plan.outputs.len(),
        plan: has_csr.then(|| plan.clone()),
        csr: OnceLock::new(),
        every_cell: OnceLock::new(),
        ir: OnceLock::new(),
        asm: OnceLock::new(),
        compile_phases: phases,
        compile_time: start.elapsed(),
        jit,
    })
}

/// An entry point compiled on first use (the CSR one, Outer's every-cell one): its address,
/// typed at the call.
struct LazyCode {
    kernel: usize,
    compile_time: Duration,
    phases: CompilePhases,
    ir: OnceLock<String>,
    asm: OnceLock<String>,
    // Last: `kernel` points into it.
    jit: llvm::Jit,
}

impl LazyCode {
    fn compile(plan: &CPlan, entry: Entry, name: &str) -> Result<LazyCode, CodegenError> {
        let start = Instant::now();
        let Built {
            jit, mut phases, ..
        } = build(plan, entry)?;
        let lap = Instant::now();
        let kernel = jit.function(name)?;
        phases.machine_code += lap.elapsed();
        Ok(LazyCode {
            kernel,
            compile_time: start.elapsed(),
            phases,
            ir: OnceLock::new(),
            asm: OnceLock::new(),
            jit,
        })
    }
}

enum Pending {
    Cell(CellSpec, bool),
    MAgg(MAggSpec),
    Outer(OuterSpec),
    Row(Box<row::RowInfo>),
}

/// Emits `entry` of `plan` (the analysis is redone for each entry; it costs microseconds).
fn emit<'c>(
    ctx: &'c inkwell::context::Context,
    module: &Module<'c>,
    plan: &CPlan,
    entry: Entry,
) -> Result<Pending, CodegenError> {
    let csr = entry == Entry::Csr;
    if entry == Entry::EveryCell && !matches!(plan.template, TemplateSpec::Outer { .. }) {
        return Err(CodegenError::Internal(
            "an every-cell entry point outside an outer-product operator".into(),
        ));
    }
    match &plan.template {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        } => {
            let kind = match cell_type {
                CellType::NoAgg => CellKind::NoAgg,
                CellType::RowAgg => CellKind::RowAgg,
                CellType::ColAgg => CellKind::ColAgg,
                CellType::FullAgg => CellKind::FullAgg,
            };
            let agg = agg.map(agg_kind);
            if (kind == CellKind::NoAgg) != agg.is_none() {
                return Err(CodegenError::Unsupported(format!(
                    "cell type {kind:?} with aggregation {agg:?}"
                )));
            }
            let uses = input_uses(plan, &plan.outputs[..1])?;
            let used = used_mask(&uses);
            let like = CellLike {
                outs: vec![(plan.outputs[0], agg)],
                kind,
            };
            match entry {
                Entry::Dense => {
                    cell::emit_entry(ctx, module, plan, &like, &used, false, "lafuse_cell_dense")?
                }
                Entry::Csr if *sparse_safe => {
                    cell::emit_entry(ctx, module, plan, &like, &used, true, "lafuse_cell_csr")?
                }
                // (An every-cell entry point was refused above.)
                Entry::Csr | Entry::EveryCell => {
                    return Err(CodegenError::Internal(
                        "a CSR entry point for a sparse-unsafe cell plan".into(),
                    ))
                }
            }
            Ok(Pending::Cell(
                CellSpec {
                    kind,
                    agg,
                    sparse_safe: *sparse_safe,
                    uses,
                    lanes: LANES,
                },
                *sparse_safe,
            ))
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            if aggs.len() != plan.outputs.len() {
                return Err(CodegenError::Internal(
                    "one aggregate per output expected".into(),
                ));
            }
            let uses = input_uses(plan, &plan.outputs)?;
            let used = used_mask(&uses);
            let aggs: Vec<AggKind> = aggs.iter().map(|&a| agg_kind(a)).collect();
            let like = CellLike {
                outs: plan
                    .outputs
                    .iter()
                    .copied()
                    .zip(aggs.iter().map(|&a| Some(a)))
                    .collect(),
                kind: CellKind::FullAgg,
            };
            match entry {
                Entry::Dense => {
                    cell::emit_entry(ctx, module, plan, &like, &used, false, "lafuse_cell_dense")?
                }
                Entry::Csr if *sparse_safe => {
                    cell::emit_entry(ctx, module, plan, &like, &used, true, "lafuse_cell_csr")?
                }
                // (An every-cell entry point was refused above.)
                Entry::Csr | Entry::EveryCell => {
                    return Err(CodegenError::Internal(
                        "a CSR entry point for a sparse-unsafe MultiAgg plan".into(),
                    ))
                }
            }
            Ok(Pending::MAgg(MAggSpec {
                aggs,
                sparse_safe: *sparse_safe,
                uses,
                lanes: LANES,
            }))
        }
        TemplateSpec::Outer { outer_type } => {
            let kind = match outer_type {
                OuterType::CellWise => OuterKind::CellWise,
                OuterType::FullAgg => OuterKind::FullAgg,
                OuterType::Left => OuterKind::Left,
                OuterType::LeftT => OuterKind::LeftT,
                OuterType::Right => OuterKind::Right,
            };
            let out = plan.outputs[0];
            let (g, w) = match (&plan.nodes[out], kind) {
                (
                    CNode::FinalProduct { g, w },
                    OuterKind::Left | OuterKind::LeftT | OuterKind::Right,
                ) => {
                    let CNode::Data { input, .. } = plan.nodes[*w] else {
                        return Err(CodegenError::Unsupported(
                            "final product operand is not an input".into(),
                        ));
                    };
                    (*g, Some(input))
                }
                (_, OuterKind::CellWise | OuterKind::FullAgg) => (out, None),
                _ => {
                    return Err(CodegenError::Unsupported(
                        "outer type does not match its output node".into(),
                    ))
                }
            };
            let mut uses = input_uses(plan, &[g])?;
            if let Some(wk) = w {
                let u = if kind == OuterKind::Right {
                    InputUse::FinalW
                } else {
                    InputUse::FinalWT
                };
                match uses[wk] {
                    InputUse::Unused => uses[wk] = u,
                    // `(X * (U %*% t(V))) %*% V`: the final product reads the rows of V that
                    // the dot products read, from the same n x k view.
                    InputUse::OuterV if kind == OuterKind::Right => {}
                    _ => {
                        return Err(CodegenError::Unsupported(
                            "final-product matrix also read in the body other than as V of a \
                             right product"
                                .into(),
                        ))
                    }
                }
            }
            let find = |u: &dyn Fn(InputUse) -> bool| uses.iter().position(|&x| u(x));
            let (Some(ui), Some(vi)) = (
                find(&|x| x == InputUse::OuterU),
                find(&|x| matches!(x, InputUse::OuterV | InputUse::OuterVT)),
            ) else {
                return Err(CodegenError::Unsupported(
                    "outer operator without u_i · v_j".into(),
                ));
            };
            let used = used_mask(&uses);
            outer::emit(
                ctx,
                module,
                plan,
                kind,
                &outer::OuterInputs { u: ui, v: vi, w, g },
                &used,
                match entry {
                    Entry::Dense => outer::Visit::DenseNonZeros,
                    Entry::Csr => outer::Visit::CsrNonZeros,
                    Entry::EveryCell => outer::Visit::EveryCell,
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
        if out_shapes.len() != self.num_outputs {
            return Err(CodegenError::Internal(format!(
                "operator has {} outputs, {} shapes given",
                self.num_outputs,
                out_shapes.len()
            )));
        }
        let mut ranges: Vec<Option<ValueRange>> = (0..inputs.len())
            .map(|pos| known.get(pos).copied().flatten())
            .collect();
        let main_sparse = matches!(inputs.first(), Some(Operand::Matrix(m)) if m.is_sparse());
        let skips_zeros = match &self.kind {
            Kind::Cell(spec, _) => spec.sparse_safe && main_sparse,
            Kind::MAgg(spec, _) => spec.sparse_safe && main_sparse,
            Kind::Outer(..) => true,
            Kind::Row(..) => false,
        };
        let zeros_skippable = match (&self.plan, skips_zeros) {
            (Some(plan), true) => {
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
        // Set when this call's request for the CSR entry point failed, so the compiler's own
        // error (not the skeleton's wrapping of it) is returned.
        let csr_failed = AtomicBool::new(false);
        let csr_addr = || -> Result<usize, SkeletonError> {
            self.csr_code().map(|c| c.kernel).map_err(|e| {
                csr_failed.store(true, Ordering::Relaxed);
                SkeletonError(e.to_string())
            })
        };
        // SAFETY (both): the CSR entry points of Cell and Outer are generated with the
        // `KernelFn` signature, Row's with the `RowKernelFn` one; they live as long as the CSR
        // JIT, which `self.csr` owns for the operator's lifetime.
        let csr_fn = || csr_addr().map(|a| unsafe { std::mem::transmute::<usize, KernelFn>(a) });
        let csr_row_fn =
            || csr_addr().map(|a| unsafe { std::mem::transmute::<usize, sk_row::RowKernelFn>(a) });
        // As for the CSR entry point: the every-cell one's compile error, unwrapped.
        let every_failed = AtomicBool::new(false);
        // SAFETY: the every-cell entry point is generated with the `KernelFn` signature and
        // lives as long as its JIT, which `self.every_cell` owns for the operator's lifetime.
        let every_fn = || {
            self.every_cell_code()
                .map(|c| unsafe { std::mem::transmute::<usize, KernelFn>(c.kernel) })
                .map_err(|e| {
                    every_failed.store(true, Ordering::Relaxed);
                    SkeletonError(e.to_string())
                })
        };
        let sk = |e: SkeletonError| {
            let lazy = [
                (csr_failed.load(Ordering::Relaxed), self.csr.get()),
                (every_failed.load(Ordering::Relaxed), self.every_cell.get()),
            ];
            for (failed, code) in lazy {
                if let (true, Some(Err(ce))) = (failed, code) {
                    return ce.clone();
                }
            }
            CodegenError::Internal(e.0)
        };
        let out = match &self.kind {
            Kind::Cell(spec, dense) => {
                let k = CellKernels {
                    dense: *dense,
                    csr: zeros_skippable.then_some(&csr_fn as LazyEntry<'_, KernelFn>),
                };
                vec![sk_cell::execute(spec, &k, &ins).map_err(sk)?]
            }
            Kind::MAgg(spec, dense) => {
                let k = MAggKernels {
                    dense: *dense,
                    csr: zeros_skippable.then_some(&csr_fn as LazyEntry<'_, KernelFn>),
                };
                sk_magg::execute(spec, &k, &ins).map_err(sk)?
            }
            Kind::Outer(spec, dense) => {
                let k = OuterKernels {
                    dense: *dense,
                    csr: &csr_fn,
                    every_cell: (!zeros_skippable).then_some(&every_fn as LazyEntry<'_, KernelFn>),
                };
                vec![sk_outer::execute(spec, &k, &ins).map_err(sk)?]
            }
            Kind::Row(info, spec, dense) => {
                let shape = out_shapes.first().copied().unwrap_or((0, 0));
                let layout = row::layout(info, inputs, shape)?;
                let k = sk_row::RowKernels {
                    dense: *dense,
                    csr: &csr_row_fn,
                };
                vec![sk_row::execute(spec, &k, &ins, &layout).map_err(sk)?]
            }
        };
        for (m, &s) in out.iter().zip(out_shapes) {
            if m.shape() != s {
                return Err(CodegenError::Internal(format!(
                    "output is {}x{}, expected {}x{}",
                    m.rows(),
                    m.cols(),
                    s.0,
                    s.1
                )));
            }
        }
        Ok(out)
    }

    /// The CSR entry point's code, compiled on first request.
    fn csr_code(&self) -> Result<&LazyCode, CodegenError> {
        let name = match &self.kind {
            Kind::Cell(..) => "lafuse_cell_csr",
            Kind::Outer(..) => "lafuse_outer_csr",
            Kind::Row(..) => "lafuse_row_csr",
            Kind::MAgg(..) => "lafuse_cell_csr",
        };
        let plan = self
            .plan
            .as_ref()
            .filter(|_| !name.is_empty())
            .ok_or_else(|| CodegenError::Internal("the operator has no CSR entry point".into()))?;
        self.csr
            .get_or_init(|| LazyCode::compile(plan, Entry::Csr, name))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Compiles the CSR entry point now (`explain` shows it before any execution has needed
    /// it); `Ok(false)` when the operator has none (a sparse-unsafe Cell or MultiAgg plan).
    pub fn compile_csr_entry(&self) -> Result<bool, CodegenError> {
        if self.plan.is_none() {
            return Ok(false);
        }
        self.csr_code().map(|_| true)
    }

    /// The compiled CSR entry point, if an execution has compiled it.
    fn csr_compiled(&self) -> Option<&LazyCode> {
        self.csr.get().and_then(|r| r.as_ref().ok())
    }

    /// The LLVM IR of the dense entry point's module, the one [`compile`] builds (printed from
    /// the JIT's module on first request, so a compilation does not pay for text nobody
    /// reads). The CSR entry point has its own module: [`csr_llvm_ir`](Self::csr_llvm_ir).
    pub fn llvm_ir(&self) -> &str {
        self.ir.get_or_init(|| self.jit.ir())
    }

    /// The dense entry point's host machine code as assembly text (produced on first request
    /// from the IR); the CSR one's is [`csr_assembly`](Self::csr_assembly).
    pub fn assembly(&self) -> &str {
        self.asm
            .get_or_init(|| llvm::assembly_of(self.llvm_ir()).unwrap_or_else(|e| format!("; {e}")))
    }

    /// The LLVM IR of the CSR entry point's module; `None` until an execution with a CSR main
    /// input has compiled it (or when the template has none).
    pub fn csr_llvm_ir(&self) -> Option<&str> {
        self.csr_compiled()
            .map(|c| c.ir.get_or_init(|| c.jit.ir()).as_str())
    }

    /// The CSR entry point's assembly text; `None` as for [`csr_llvm_ir`](Self::csr_llvm_ir).
    pub fn csr_assembly(&self) -> Option<&str> {
        let c = self.csr_compiled()?;
        let ir = c.ir.get_or_init(|| c.jit.ir());
        Some(
            c.asm
                .get_or_init(|| llvm::assembly_of(ir).unwrap_or_else(|e| format!("; {e}"))),
        )
    }

    /// Compilation time spent on this operator so far: [`compile`] (emission, verification,
    /// optimization, JIT of the dense entry point) plus the CSR entry point's compilation once
    /// an execution has done it (and an Outer operator's every-cell entry point's).
    /// [`OperatorCache`] records the time right after [`compile`], so its
    /// [`CacheStats::compile_time`] counts the dense entry points only.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
            + self.csr_compile_time().unwrap_or_default()
            + self
                .every_cell_compiled()
                .map_or(Duration::ZERO, |c| c.compile_time)
    }

    /// Time the lazy compilation of the CSR entry point took; `None` while not compiled.
    pub fn csr_compile_time(&self) -> Option<Duration> {
        self.csr_compiled().map(|c| c.compile_time)
    }

    /// [`compile_time`](Self::compile_time) split by phase (summed over both entry points'
    /// compilations once the CSR one is compiled).
    pub fn compile_phases(&self) -> CompilePhases {
        [self.csr_compiled(), self.every_cell_compiled()]
            .into_iter()
            .flatten()
            .fold(self.compile_phases, |p, c| p.plus(c.phases))
    }

    /// Outer's every-cell entry point, compiled on first request.
    fn every_cell_code(&self) -> Result<&LazyCode, CodegenError> {
        let plan = self
            .plan
            .as_ref()
            .filter(|_| matches!(self.kind, Kind::Outer(..)))
            .ok_or_else(|| {
                CodegenError::Internal("the operator has no every-cell entry point".into())
            })?;
        self.every_cell
            .get_or_init(|| {
                LazyCode::compile(plan, Entry::EveryCell, outer::Visit::EveryCell.entry_name())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The every-cell entry point, if a call has compiled it.
    fn every_cell_compiled(&self) -> Option<&LazyCode> {
        self.every_cell.get().and_then(|r| r.as_ref().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cplan::{count_vector_intermediates, RowType};
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
        let none = libraries_needed(&cell_plan());
        assert!(!none.math && !none.row_blocks);
        assert!(!libraries_needed(&row_plan()).any());
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
        let e = libraries_needed(&exp);
        assert!(e.math && !e.row_blocks);
        // rowSums(X %*% v): a product of the main row, computed a block of rows at a time.
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
        let p = libraries_needed(&product);
        assert!(p.row_blocks && !p.math);
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
        let (a, b) = (a.to_dense().values, b.to_dense().values);
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0))
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
            let shape = match plan.template {
                TemplateSpec::Row { .. } => (40, 30),
                _ => (1, 1),
            };
            let want = crate::reference::evaluate(&plan, &[Operand::Matrix(&dense)], &[shape])
                .unwrap()
                .remove(0);
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
        assert!(op.csr_code().is_err());
    }
}
