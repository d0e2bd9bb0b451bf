//! Fusion inside the engine: plans a block's fused operators with the configured policy,
//! turns each CPlan into a runnable [`Operator`] (interpreted by the reference evaluator, or
//! compiled to native code through the operator cache), and counts what they did for
//! `--stats`.
//!
//! An operator the backend cannot build (an unsupported template variant, say) is not an
//! error: its hops simply run unfused, and the reason is counted in the statistics.

use crate::error::Error;
use crate::FusionPolicy;
use lafuse_codegen::reference::{self, Operand};
use lafuse_compiler::fusion::cplan::{construct_cplans, CPlan, FusedOperator};
use lafuse_compiler::fusion::{self, CostModel};
use lafuse_compiler::hops::{HopDag, HopId};
use lafuse_core::Fault;
use lafuse_runtime::{Matrix, Operator, OperatorInput, RuntimeError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What executes fused operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FusionBackend {
    /// Native code generated with LLVM for this CPU (when built with the `llvm` feature).
    #[cfg_attr(feature = "llvm", default)]
    Native,
    /// The reference evaluator: interprets the CPlan cell by cell or row by row. Slow, but
    /// obviously correct; the oracle generated code is tested against.
    #[cfg_attr(not(feature = "llvm"), default)]
    Reference,
}

/// A fused operator as a block runs it: the runnable operator and the hops it replaces.
#[derive(Clone, Debug)]
pub(crate) struct PlannedOperator {
    pub(crate) operator: Arc<dyn Operator>,
    /// The hops feeding the operator, by input position.
    pub(crate) inputs: Vec<HopId>,
    /// The hops whose values it produces, with whether each is a scalar.
    pub(crate) outputs: Vec<(HopId, bool)>,
}

/// Counters shared by the fuser and the operators it built (operators run on any thread).
#[derive(Debug, Default)]
pub(crate) struct FusionCounters {
    executed: AtomicU64,
    execution_nanos: AtomicU64,
    compiled: AtomicU64,
    /// Of `compiled`: machine code loaded from the on-disk object store.
    loaded: AtomicU64,
    cache_hits: AtomicU64,
    codegen_nanos: AtomicU64,
    planning_nanos: AtomicU64,
    /// Why operators were left unfused, with how often.
    fallbacks: Mutex<BTreeMap<String, u64>>,
    /// Why operator-cache requests compiled, with how often.
    miss_reasons: Mutex<BTreeMap<String, u64>>,
}

/// A snapshot of the fusion counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct FusionCounts {
    pub(crate) executed: u64,
    pub(crate) execution: Duration,
    pub(crate) compiled: u64,
    pub(crate) loaded: u64,
    pub(crate) cache_hits: u64,
    pub(crate) codegen: Duration,
    pub(crate) planning: Duration,
    pub(crate) fallbacks: BTreeMap<String, u64>,
    pub(crate) miss_reasons: BTreeMap<String, u64>,
}

impl FusionCounters {
    fn fallback(&self, reason: String) {
        if let Ok(mut map) = self.fallbacks.lock() {
            *map.entry(reason).or_insert(0) += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> FusionCounts {
        FusionCounts {
            executed: self.executed.load(Ordering::Relaxed),
            execution: Duration::from_nanos(self.execution_nanos.load(Ordering::Relaxed)),
            compiled: self.compiled.load(Ordering::Relaxed),
            loaded: self.loaded.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            codegen: Duration::from_nanos(self.codegen_nanos.load(Ordering::Relaxed)),
            planning: Duration::from_nanos(self.planning_nanos.load(Ordering::Relaxed)),
            fallbacks: self.fallbacks.lock().map(|m| m.clone()).unwrap_or_default(),
            miss_reasons: self
                .miss_reasons
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
        }
    }
}

impl FusionCounts {
    /// What happened since `earlier` (counters only grow).
    pub(crate) fn since(&self, earlier: &FusionCounts) -> FusionCounts {
        let minus = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            let mut out = now.clone();
            for (reason, n) in then {
                if let Some(v) = out.get_mut(reason) {
                    *v = v.saturating_sub(*n);
                }
            }
            out.retain(|_, v| *v > 0);
            out
        };
        let fallbacks = minus(&self.fallbacks, &earlier.fallbacks);
        let miss_reasons = minus(&self.miss_reasons, &earlier.miss_reasons);
        FusionCounts {
            executed: self.executed.saturating_sub(earlier.executed),
            execution: self.execution.saturating_sub(earlier.execution),
            compiled: self.compiled.saturating_sub(earlier.compiled),
            loaded: self.loaded.saturating_sub(earlier.loaded),
            cache_hits: self.cache_hits.saturating_sub(earlier.cache_hits),
            codegen: self.codegen.saturating_sub(earlier.codegen),
            planning: self.planning.saturating_sub(earlier.planning),
            fallbacks,
            miss_reasons,
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Plans and builds the fused operators of blocks, for one engine.
pub(crate) struct Fuser {
    /// Built once, so the cost-based selector's plan cache serves every block of the engine
    /// (a loop body recompiled for new sizes meets the same partitions again).
    selector: Box<dyn fusion::PlanSelector>,
    backend: FusionBackend,
    counters: Arc<FusionCounters>,
    #[cfg(feature = "llvm")]
    cache: lafuse_codegen::native::OperatorCache,
}

impl Fuser {
    /// `store_dir`: the on-disk object store native operators go through, if any, pruned to
    /// `store_limit` bytes (a directory that cannot be opened is not used: it only saves
    /// compilations).
    pub(crate) fn new(
        policy: FusionPolicy,
        cost_model: CostModel,
        backend: FusionBackend,
        store_dir: Option<&std::path::Path>,
        store_limit: u64,
    ) -> Fuser {
        #[cfg(feature = "llvm")]
        let cache = match store_dir
            .map(|dir| lafuse_codegen::native::ObjectStore::open_with_limit(dir, store_limit))
        {
            Some(Ok(store)) => lafuse_codegen::native::OperatorCache::with_store(Arc::new(store)),
            _ => lafuse_codegen::native::OperatorCache::default(),
        };
        #[cfg(not(feature = "llvm"))]
        let _ = (store_dir, store_limit);
        Fuser {
            selector: policy.selector(cost_model),
            backend,
            counters: Arc::new(FusionCounters::default()),
            #[cfg(feature = "llvm")]
            cache,
        }
    }

    pub(crate) fn counters(&self) -> FusionCounts {
        self.counters.snapshot()
    }

    /// The fused operators of `dag` under the policy, each ready to run.
    pub(crate) fn fuse(&self, dag: &HopDag) -> Result<Vec<PlannedOperator>, Error> {
        let started = Instant::now();
        let plan = fusion::plan_fusion(dag, self.selector.as_ref())?;
        let program = construct_cplans(dag, &plan.memo, &plan.selection)?;
        self.counters
            .planning_nanos
            .fetch_add(nanos(started.elapsed()), Ordering::Relaxed);
        let plans: Vec<Arc<CPlan>> = program
            .operators
            .iter()
            .map(|op| Arc::new(op.cplan.clone()))
            .collect();
        // Whether each operator's main input will be stored sparse (its estimated size), so
        // that its first compilation is of the entry point that input runs.
        let sparse_main: Vec<bool> = program
            .operators
            .iter()
            .map(|op| {
                op.inputs.first().is_some_and(|&h| {
                    let hop = dag.hop(h);
                    match (hop.rows, hop.cols, hop.nnz) {
                        (Some(r), Some(c), Some(nnz)) => lafuse_runtime::matrix::prefers_sparse(
                            r as usize,
                            c as usize,
                            nnz as usize,
                        ),
                        _ => false,
                    }
                })
            })
            .collect();
        let mut kernels = self.kernels(&plans, &sparse_main).into_iter();
        let mut planned = Vec::with_capacity(program.operators.len());
        for (op, plan) in program.operators.iter().zip(plans) {
            let kernel = kernels
                .next()
                .unwrap_or_else(|| Err("internal: no kernel for an operator".into()));
            match self.build(dag, op, plan, kernel) {
                Ok(operator) => planned.push(PlannedOperator {
                    operator,
                    inputs: op.inputs.clone(),
                    outputs: op
                        .outputs
                        .iter()
                        .map(|&h| (h, dag.hop(h).is_scalar()))
                        .collect(),
                }),
                Err(reason) => self.counters.fallback(reason),
            }
        }
        Ok(planned)
    }

    /// The kernel of each plan (native ones compiled in parallel), or why it has none;
    /// `sparse_main` says per plan whether its main input is expected sparse.
    fn kernels(&self, plans: &[Arc<CPlan>], sparse_main: &[bool]) -> Vec<Result<Kernel, String>> {
        match self.backend {
            FusionBackend::Reference => plans.iter().map(|_| Ok(Kernel::Reference)).collect(),
            FusionBackend::Native => self.native(plans, sparse_main),
        }
    }

    /// A runnable operator for `op` with its kernel, or why its hops must run unfused.
    fn build(
        &self,
        dag: &HopDag,
        op: &FusedOperator,
        plan: Arc<CPlan>,
        kernel: Result<Kernel, String>,
    ) -> Result<Arc<dyn Operator>, String> {
        let mut out_shapes = Vec::with_capacity(op.outputs.len());
        for &h in &op.outputs {
            let hop = dag.hop(h);
            if hop.is_scalar() {
                out_shapes.push((1, 1));
            } else {
                let (r, c) = hop
                    .dims()
                    .ok_or_else(|| "an output of unknown size".to_string())?;
                out_shapes.push((r as usize, c as usize));
            }
        }
        let kernel = kernel?;
        Ok(Arc::new(RunnableOperator {
            opcode: format!("fused_{}", plan.template.name()),
            plan,
            out_shapes,
            kernel,
            counters: Arc::clone(&self.counters),
        }))
    }

    /// Native operators for `plans` from the operator cache; the missing ones compile in
    /// parallel (`codegen_ms` sums their compile times, so it can exceed the wall time).
    #[cfg(feature = "llvm")]
    fn native(&self, plans: &[Arc<CPlan>], sparse_main: &[bool]) -> Vec<Result<Kernel, String>> {
        use lafuse_codegen::native::{Lookup, MainFormat};
        let requests: Vec<(&CPlan, MainFormat)> = plans
            .iter()
            .zip(sparse_main)
            .map(|(p, &sparse)| {
                let main = if sparse {
                    MainFormat::Sparse
                } else {
                    MainFormat::Dense
                };
                (p.as_ref(), main)
            })
            .collect();
        self.cache
            .lookup_all_for(&requests)
            .into_iter()
            .map(|(operator, lookup)| {
                let operator = operator.map_err(|e| e.to_string())?;
                match lookup {
                    Lookup::Hit => {
                        self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    }
                    Lookup::Miss(reason) => {
                        self.counters.compiled.fetch_add(1, Ordering::Relaxed);
                        if operator.loaded_from_store() {
                            self.counters.loaded.fetch_add(1, Ordering::Relaxed);
                        }
                        self.counters
                            .codegen_nanos
                            .fetch_add(nanos(operator.compile_time()), Ordering::Relaxed);
                        if let Ok(mut reasons) = self.counters.miss_reasons.lock() {
                            *reasons.entry(format!("{reason:?}")).or_insert(0) += 1;
                        }
                    }
                }
                Ok(Kernel::Native(operator))
            })
            .collect()
    }

    #[cfg(not(feature = "llvm"))]
    fn native(&self, plans: &[Arc<CPlan>], _sparse_main: &[bool]) -> Vec<Result<Kernel, String>> {
        plans
            .iter()
            .map(|_| {
                Err(
                    "unsupported: native code generation (lafuse was built without the `llvm` \
                     feature; use --fusion-backend reference)"
                        .into(),
                )
            })
            .collect()
    }
}

/// Per input: its value range, if the executor knows it.
#[cfg(feature = "llvm")]
fn known_ranges(inputs: &[OperatorInput<'_>]) -> Vec<Option<lafuse_runtime::ValueRange>> {
    inputs
        .iter()
        .map(|i| match i {
            OperatorInput::Matrix(_, known) => *known,
            OperatorInput::Scalar(_) => None,
        })
        .collect()
}

#[derive(Debug)]
enum Kernel {
    Reference,
    #[cfg(feature = "llvm")]
    Native(Arc<lafuse_codegen::native::NativeOperator>),
}

/// A fused operator the executor can run.
#[derive(Debug)]
struct RunnableOperator {
    opcode: String,
    plan: Arc<CPlan>,
    out_shapes: Vec<(usize, usize)>,
    kernel: Kernel,
    counters: Arc<FusionCounters>,
}

impl RunnableOperator {
    /// A reference evaluation's failure: a resource error where an output does not fit in
    /// memory (the script's doing), an internal one otherwise (the plan is ours).
    fn reference_error(&self, e: reference::EvalError) -> RuntimeError {
        match e.fault() {
            Fault::Resource => RuntimeError::Resource(format!("{}: {e}", self.opcode)),
            _ => RuntimeError::internal(format!("{}: {e}", self.opcode)),
        }
    }
}

impl Operator for RunnableOperator {
    fn opcode(&self) -> &str {
        &self.opcode
    }

    fn execute(&self, inputs: &[OperatorInput<'_>]) -> lafuse_runtime::Result<Vec<Matrix>> {
        let started = Instant::now();
        let operands: Vec<Operand<'_>> = inputs
            .iter()
            .map(|i| match *i {
                OperatorInput::Scalar(v) => Operand::Scalar(v),
                OperatorInput::Matrix(m, _) => Operand::Matrix(m),
            })
            .collect();
        // Entry points an operator compiles on the call that first needs one (a CSR main
        // input of an operator compiled for a dense one, Outer's every-cell entry) count as
        // code generation, not execution.
        let compiled_in_call;
        let results = match &self.kernel {
            Kernel::Reference => {
                compiled_in_call = Duration::ZERO;
                reference::evaluate(&self.plan, &operands, &self.out_shapes)
                    .map_err(|e| self.reference_error(e))?
            }
            #[cfg(feature = "llvm")]
            Kernel::Native(op) => {
                let compiled_before = op.compile_time();
                let r = op.execute_with_ranges(&operands, &self.out_shapes, &known_ranges(inputs));
                compiled_in_call = op.compile_time().saturating_sub(compiled_before);
                match r {
                    Ok(r) => r,
                    // A call the generated code cannot do (no native operator refuses one
                    // today; Outer calls whose zeros cannot be skipped visit every cell) runs
                    // on the reference evaluator, cell by cell.
                    Err(lafuse_codegen::native::CodegenError::Unsupported(why)) => {
                        self.counters
                            .fallback(format!("a call ran on the reference evaluator: {why}"));
                        reference::evaluate(&self.plan, &operands, &self.out_shapes)
                            .map_err(|e| self.reference_error(e))?
                    }
                    Err(e) if e.fault() == Fault::Resource => {
                        return Err(RuntimeError::Resource(format!("{}: {e}", self.opcode)))
                    }
                    Err(e) => return Err(RuntimeError::internal(format!("{}: {e}", self.opcode))),
                }
            }
        };
        let results = results
            .into_iter()
            .map(Matrix::examine_and_convert)
            .collect::<Result<Vec<_>, _>>()?;
        self.counters.executed.fetch_add(1, Ordering::Relaxed);
        self.counters
            .codegen_nanos
            .fetch_add(nanos(compiled_in_call), Ordering::Relaxed);
        self.counters.execution_nanos.fetch_add(
            nanos(started.elapsed().saturating_sub(compiled_in_call)),
            Ordering::Relaxed,
        );
        Ok(results)
    }
}
