//! Native fused operators: CPlan → LLVM IR → optimized machine code for the host CPU (DESIGN
//! section 4), hosted by the skeletons of `lafuse_skeletons`.
//!
//! [`compile`] emits one module per operator: the template's entry points (a loop over a row
//! range of a dense main input, and one over a CSR main input where the template iterates
//! non-zeros) with the body inlined, verifies it, optimizes it for the host CPU and
//! JIT-compiles it. [`NativeOperator::execute`] has the contract of
//! [`reference::evaluate`](crate::reference::evaluate). Implemented: Cell (all types and
//! aggregations), MultiAgg, Outer (all types), Row (all row types).
//!
//! Module map: `llvm` (everything LLVM-version specific), `expr` (body emission and the Java
//! scalar semantics), `cell` (Cell and MultiAgg loops), `outer` (Outer loops and primitives),
//! `row` (Row loops, vector primitives and per-call layouts), `cache` (the operator cache).

mod cache;
mod cell;
mod expr;
mod llvm;
mod outer;
mod row;

pub use cache::{CacheStats, MissReason, OperatorCache};

use crate::reference::Operand;
use cell::{CellLike, LANES};
use inkwell::module::Module;
use lafuse_compiler::fusion::cplan::{
    Access, CNode, CNodeId, CPlan, InputKind, OuterType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_runtime::Matrix;
use lafuse_skeletons::abi::KernelFn;
use lafuse_skeletons::{
    cell as sk_cell, magg as sk_magg, outer as sk_outer, row as sk_row, AggKind, CellKernels,
    CellKind, CellSpec, Input, InputUse, MAggKernels, MAggSpec, OuterKernels, OuterKind, OuterSpec,
};
use std::fmt;
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

/// What the operator's skeleton needs.
#[derive(Clone, Debug)]
enum Kind {
    Cell(CellSpec, CellKernels),
    MAgg(MAggSpec, MAggKernels),
    Outer(OuterSpec, OuterKernels),
    Row(Box<row::RowInfo>, sk_row::RowSpec, sk_row::RowKernels),
}

/// A compiled fused operator: generated code plus the skeleton that hosts it. `Send + Sync`;
/// it owns the JIT (and so the machine code) for its lifetime.
pub struct NativeOperator {
    kind: Kind,
    num_outputs: usize,
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
            .field("compile_time", &self.compile_time)
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

/// Compiles a CPlan into a native operator.
pub fn compile(plan: &CPlan) -> Result<NativeOperator, CodegenError> {
    let start = Instant::now();
    if plan.outputs.is_empty() || plan.inputs.is_empty() {
        return Err(CodegenError::Internal(
            "a plan needs inputs and outputs".into(),
        ));
    }
    let ctx = llvm::new_context();
    let module = ctx.create_module("lafuse_op");
    let mut phases = CompilePhases::default();
    let mut lap = Instant::now();
    let mut tick = |slot: &mut Duration| {
        let now = Instant::now();
        *slot += now - lap;
        lap = now;
    };
    let built = llvm::with_host_machine(|tm| {
        llvm::setup_module(&module, tm);
        let k = emit(ctx, &module, plan)?;
        tick(&mut phases.emit);
        llvm::verify(&module, "generated module fails verification")?;
        tick(&mut phases.verify);
        llvm::optimize(&module, tm)?;
        tick(&mut phases.optimize);
        llvm::verify(&module, "optimized module fails verification")?;
        tick(&mut phases.verify);
        Ok(k)
    });
    let pending = match built {
        Ok(x) => x,
        Err(e) => {
            drop(module);
            // SAFETY: the module, the only thing created in the context, is gone.
            unsafe { llvm::free_context(ctx) };
            return Err(e);
        }
    };
    let jit = llvm::Jit::new(ctx, module, expr::helper_address)?;
    tick(&mut phases.jit);
    let f = |name: &str| -> Result<KernelFn, CodegenError> {
        let addr = jit.function(name)?;
        // SAFETY: the function was generated with exactly the `KernelFn` signature
        // (i8*, i64, i64) -> i64, and lives as long as `jit`, which the operator owns.
        Ok(unsafe { std::mem::transmute::<usize, KernelFn>(addr) })
    };
    let kind = match pending {
        Pending::Cell(spec, has_csr) => Kind::Cell(
            spec,
            CellKernels {
                dense: f("lafuse_cell_dense")?,
                csr: if has_csr {
                    Some(f("lafuse_cell_csr")?)
                } else {
                    None
                },
            },
        ),
        Pending::MAgg(spec) => Kind::MAgg(
            spec,
            MAggKernels {
                dense: f("lafuse_cell_dense")?,
            },
        ),
        Pending::Row(info) => {
            let rf = |name: &str| -> Result<sk_row::RowKernelFn, CodegenError> {
                let addr = jit.function(name)?;
                // SAFETY: generated with the `RowKernelFn` signature (i8*, i64, i64) -> i64;
                // lives as long as `jit`, which the operator owns.
                Ok(unsafe { std::mem::transmute::<usize, sk_row::RowKernelFn>(addr) })
            };
            let spec = sk_row::RowSpec {
                kind: info.kind,
                inputs: info.inputs.clone(),
            };
            let kernels = sk_row::RowKernels {
                dense: rf("lafuse_row_dense")?,
                csr: rf("lafuse_row_csr")?,
            };
            Kind::Row(info, spec, kernels)
        }
        Pending::Outer(spec) => Kind::Outer(
            spec,
            OuterKernels {
                dense: f("lafuse_outer_dense")?,
                csr: f("lafuse_outer_csr")?,
            },
        ),
    };
    Ok(NativeOperator {
        kind,
        num_outputs: plan.outputs.len(),
        ir: OnceLock::new(),
        asm: OnceLock::new(),
        compile_phases: {
            tick(&mut phases.machine_code);
            phases
        },
        compile_time: start.elapsed(),
        jit,
    })
}

enum Pending {
    Cell(CellSpec, bool),
    MAgg(MAggSpec),
    Outer(OuterSpec),
    Row(Box<row::RowInfo>),
}

fn emit<'c>(
    ctx: &'c inkwell::context::Context,
    module: &Module<'c>,
    plan: &CPlan,
) -> Result<Pending, CodegenError> {
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
            cell::emit_entry(ctx, module, plan, &like, &used, false, "lafuse_cell_dense")?;
            if *sparse_safe {
                cell::emit_entry(ctx, module, plan, &like, &used, true, "lafuse_cell_csr")?;
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
        TemplateSpec::MAgg { aggs } => {
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
            cell::emit_entry(ctx, module, plan, &like, &used, false, "lafuse_cell_dense")?;
            Ok(Pending::MAgg(MAggSpec {
                aggs,
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
                if uses[wk] != InputUse::Unused {
                    return Err(CodegenError::Unsupported(
                        "final-product matrix also read in the body".into(),
                    ));
                }
                uses[wk] = u;
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
            )?;
            Ok(Pending::Outer(OuterSpec {
                kind,
                uses,
                lanes: LANES,
            }))
        }
        TemplateSpec::Row { row_type, .. } => {
            let info = row::analyze(plan, *row_type)?;
            row::emit(ctx, module, &info)?;
            Ok(Pending::Row(Box::new(info)))
        }
    }
}

impl NativeOperator {
    /// Runs the operator: same contract as [`reference::evaluate`](crate::reference::evaluate)
    /// (inputs by CPlan position, one output per plan output with the given shapes); outputs
    /// in the runtime's preferred format.
    pub fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
    ) -> Result<Vec<Matrix>, CodegenError> {
        if out_shapes.len() != self.num_outputs {
            return Err(CodegenError::Internal(format!(
                "operator has {} outputs, {} shapes given",
                self.num_outputs,
                out_shapes.len()
            )));
        }
        let ins: Vec<Input<'_>> = inputs
            .iter()
            .map(|o| match o {
                Operand::Scalar(s) => Input::Scalar(*s),
                Operand::Matrix(m) => Input::Matrix(m),
            })
            .collect();
        let sk = |e: lafuse_skeletons::SkeletonError| CodegenError::Internal(e.0);
        let out = match &self.kind {
            Kind::Cell(spec, k) => vec![sk_cell::execute(spec, k, &ins).map_err(sk)?],
            Kind::MAgg(spec, k) => sk_magg::execute(spec, k, &ins).map_err(sk)?,
            Kind::Outer(spec, k) => vec![sk_outer::execute(spec, k, &ins).map_err(sk)?],
            Kind::Row(info, spec, k) => {
                let shape = out_shapes.first().copied().unwrap_or((0, 0));
                let layout = row::layout(info, inputs, shape)?;
                vec![sk_row::execute(spec, k, &ins, &layout).map_err(sk)?]
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

    /// The optimized module's LLVM IR (printed from the JIT's module on first request, so a
    /// compilation does not pay for text nobody reads).
    pub fn llvm_ir(&self) -> &str {
        self.ir.get_or_init(|| self.jit.ir())
    }

    /// The host machine code as assembly text (produced on first request from the IR).
    pub fn assembly(&self) -> &str {
        self.asm
            .get_or_init(|| llvm::assembly_of(self.llvm_ir()).unwrap_or_else(|e| format!("; {e}")))
    }

    /// Time spent in [`compile`] (emission, verification, optimization, JIT).
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// [`compile_time`](Self::compile_time) split by phase.
    pub fn compile_phases(&self) -> CompilePhases {
        self.compile_phases
    }
}
